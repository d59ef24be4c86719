/* Calls the library `norm-opt compile --emit=lib` made from rms-f32.mlir. */
#include "librms.h"
#include <stdio.h>

int main(void) {
  /* A wrong static N: refused before any driver call. */
  int st = rms_f32(0, 0, 0, 0, 0, 0, 4, 255, 256, 256, 256, 0);
  printf("bad cols: %d %s\n", st, normrt_last_error());
  /* Right shapes but no usable driver: a status and a message. */
  char *p = (char *)16;
  st = rms_f32(p, p, p, p, p, p, 4, 256, 256, 256, 256, 0);
  printf("no driver: %d %s\n", st, normrt_last_error());
  return 0;
}
