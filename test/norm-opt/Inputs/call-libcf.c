/* Calls the library `norm-opt compile --emit=lib` made from
 * layer-channels-first.mlir: its domain checks run before any driver call. */
#include "libcf.h"
#include <stdio.h>

int main(void) {
  char *p = (char *)16;
  /* rows = B x S = 2 x 7, cols = 96, column strides I = S = 7. */
  int st = layer_cf(p, p, p, p, p, p, p, p, 14, 96, 7, 7, 5, 0);
  printf("strides differ: %d %s\n", st, normrt_last_error());
  st = layer_cf(p, p, p, p, p, p, p, p, 15, 96, 7, 7, 7, 0);
  printf("rows: %d %s\n", st, normrt_last_error());
  st = layer_cf(p, p, p, p, p, p, p, p, 14, 95, 7, 7, 7, 0);
  printf("cols: %d %s\n", st, normrt_last_error());
  return 0;
}
