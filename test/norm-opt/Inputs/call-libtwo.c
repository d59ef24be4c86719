/* Calls the library `norm-opt compile --emit=lib` made from two-domains.mlir:
 * one launcher, a rows/cols pair per group. */
#include "libtwo.h"
#include <stdio.h>

int main(void) {
  char *p = (char *)16;
  /* The second group's N is wrong: refused, naming its parameter. */
  int st = two_norms(p, p, p, p, p, p, p, p, p, p, p, p, p, p,
                     4, 256, 4, 127, 256, 256, 128, 128, 256, 128, 0);
  printf("bad cols1: %d %s\n", st, normrt_last_error());
  /* A row stride of the first group shorter than its row. */
  st = two_norms(p, p, p, p, p, p, p, p, p, p, p, p, p, p,
                 4, 256, 4, 128, 255, 256, 128, 128, 256, 128, 0);
  printf("bad stride: %d %s\n", st, normrt_last_error());
  /* Right shapes but no usable driver: a status and a message. */
  st = two_norms(p, p, p, p, p, p, p, p, p, p, p, p, p, p,
                 4, 256, 9, 128, 256, 256, 128, 128, 256, 128, 0);
  printf("no driver: %d %s\n", st, normrt_last_error());
  return 0;
}
