/*===- wheel-host.c - a C host of a kernel compiled by the wheel's norm-opt -===*
 *
 * librms.h and librms.so come from norm_opt_add_kernel_library (the wheel's
 * CMake package): the RMSNorm backward of rms.mlir with its C launcher and
 * the runtime inside. On a machine without a GPU driver (CI) the launch
 * must report that as a status and a message, not crash; with a driver it
 * would run on the (here null) buffers, so this host only runs without one.
 *===----------------------------------------------------------------------===*/
#include "librms.h"

#include <stdio.h>
#include <string.h>

int main(void) {
  int status = rms_f32(NULL, NULL, NULL, NULL, NULL, NULL, /*rows=*/4,
                       /*cols=*/256, 256, 256, 256, /*stream=*/NULL);
  const char *message = normrt_last_error();
  if (status == 0 || !message || !*message) {
    fprintf(stderr, "wheel-host: expected a failed launch with a message, "
                    "got status %d\n", status);
    return 1;
  }
  printf("no CUDA driver: status %d (%s)\n", status, message);
  return 0;
}
