/*===- RuntimeHeaderC.c - NormRuntime.h from C, linked to the archive -----===*
 *
 * Part of norm-opt. Built as strict C99 with warnings as errors, which
 * proves include/norm/Runtime/NormRuntime.h is a valid C header; linked
 * against libnorm_runtime_static.a alone (plus dl/pthread), which proves the
 * archive is self-contained. ctest runs it with NORMRT_LIBCUDA naming a path
 * that does not exist.
 *
 *===----------------------------------------------------------------------===*/

#include "norm/Runtime/NormRuntime.h"

#include <stdio.h>
#include <string.h>

static int failures = 0;

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "FAILED: %s (last error: %s)\n", what, normrt_last_error());
    ++failures;
  }
}

int main(void) {
  normrt_status status = NORMRT_ERROR_NO_DRIVER;
  static double buffer[4];
  void *function = NULL;
  void *workspace = NULL;
  void *barrier = NULL;
  int sms = 0;
  int fits = -1;

  check(strcmp(normrt_status_string(status), "NORMRT_ERROR_NO_DRIVER") == 0,
        "normrt_status_string");
  check(strcmp(normrt_last_error(), "") == 0, "no error yet");
  check(normrt_check_aligned(buffer, 8, "buffer") == NORMRT_SUCCESS, "aligned");
  check(normrt_check_aligned((const char *)buffer + 1, 8, "buffer") ==
            NORMRT_ERROR_MISALIGNED,
        "misaligned");
  check(strstr(normrt_last_error(), "buffer") != NULL, "message names it");

  check(normrt_init() == NORMRT_ERROR_NO_DRIVER, "normrt_init");
  check(strstr(normrt_last_error(), "NORMRT_LIBCUDA") != NULL, "init message");
  check(normrt_ensure_context() == NORMRT_ERROR_NO_DRIVER, "ensure_context");
  check(normrt_sm_count(&sms) == NORMRT_ERROR_NO_DRIVER, "sm_count");
  check(normrt_get_function("", "k", &function) == NORMRT_ERROR_NO_DRIVER,
        "get_function");
  check(normrt_workspace(NULL, 64, &workspace) == NORMRT_ERROR_NO_DRIVER,
        "workspace");
  check(normrt_set_workspace(NULL, NULL, 0) == NORMRT_ERROR_NO_DRIVER,
        "set_workspace");
  check(normrt_launch(&sms, 1, 1, 32, 0, NULL, NULL) == NORMRT_ERROR_NO_DRIVER,
        "launch");
  check(normrt_launch(NULL, 1, 1, 32, 0, NULL, NULL) ==
            NORMRT_ERROR_INVALID_ARGUMENT,
        "launch NULL");
  check(normrt_launch_dependent(NULL, 1, 1, 32, 0, NULL, NULL) ==
            NORMRT_ERROR_INVALID_ARGUMENT,
        "launch_dependent NULL");
  check(normrt_launch_dependent(&sms, 1, 1, 32, 0, NULL, NULL) ==
            NORMRT_ERROR_NO_DRIVER,
        "launch_dependent");
  check(normrt_cooperative_fits(&sms, 1, 32, 0, &fits) ==
            NORMRT_ERROR_NO_DRIVER,
        "cooperative_fits");
  check(fits == 0, "cooperative_fits says no");
  check(normrt_grid_barrier_word(NULL, &barrier) == NORMRT_ERROR_NO_DRIVER,
        "grid_barrier_word");
  check(barrier == NULL, "grid_barrier_word gives NULL");
  check(normrt_launch_cooperative(&sms, 1, 32, 0, NULL, NULL) ==
            NORMRT_ERROR_NO_DRIVER,
        "launch_cooperative");
  check(normrt_launch_cooperative(NULL, 1, 32, 0, NULL, NULL) ==
            NORMRT_ERROR_INVALID_ARGUMENT,
        "launch_cooperative NULL");
  /* Nothing taken during a capture: no driver call, so no failure. */
  check(normrt_scratch_done(NULL) == NORMRT_SUCCESS, "scratch_done");
  /* The capture allocator is state of the runtime: no driver needed. */
  check(normrt_set_capture_allocator(NULL, NULL) == NORMRT_SUCCESS,
        "set_capture_allocator");
  /* A query needs no driver to begin and end. */
  size_t needed = 1;
  check(normrt_query_begin() == NORMRT_SUCCESS, "query_begin");
  check(normrt_query_end(&needed) == NORMRT_SUCCESS && needed == 0,
        "query_end: nothing asked");
  check(normrt_query_end(&needed) == NORMRT_ERROR_INVALID_ARGUMENT,
        "query_end without a query");
  check(strcmp(normrt_status_string(NORMRT_ERROR_CAPTURE),
               "NORMRT_ERROR_CAPTURE") == 0,
        "NORMRT_ERROR_CAPTURE");
  normrt_release_all();

  if (failures == 0)
    printf("NormRuntime.h from C: OK\n");
  return failures == 0 ? 0 : 1;
}
