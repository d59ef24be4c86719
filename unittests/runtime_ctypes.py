#!/usr/bin/env python3
"""Calls libnorm_runtime.so through ctypes, as docs/runtime.md shows.

usage: runtime_ctypes.py LIBNORM_RUNTIME_SO
NORMRT_TEST_SCENARIO says what to expect: 'no-driver' or 'fake' (see
RuntimeTest.cpp)."""
import ctypes
import os
import sys

NORMRT_SUCCESS, NORMRT_ERROR_NO_DRIVER = 0, 1
NORMRT_ERROR_INVALID_ARGUMENT, NORMRT_ERROR_MISALIGNED = 3, 4
NORMRT_ERROR_CAPTURE = 10


def load(path):
    lib = ctypes.CDLL(path)
    lib.normrt_status_string.restype = ctypes.c_char_p
    lib.normrt_status_string.argtypes = [ctypes.c_int]
    lib.normrt_last_error.restype = ctypes.c_char_p
    lib.normrt_last_error.argtypes = []
    lib.normrt_init.argtypes = []
    lib.normrt_sm_count.argtypes = [ctypes.POINTER(ctypes.c_int)]
    lib.normrt_get_function.argtypes = [
        ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.normrt_workspace.argtypes = [
        ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]
    lib.normrt_check_aligned.argtypes = [
        ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    lib.normrt_cooperative_fits.argtypes = [
        ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
        ctypes.POINTER(ctypes.c_int)]
    lib.normrt_grid_barrier_word.argtypes = [
        ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.normrt_launch_cooperative.argtypes = [
        ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
        ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.normrt_scratch_done.argtypes = [ctypes.c_void_p]
    lib.normrt_release_all.restype = None
    lib.normrt_release_all.argtypes = []
    return lib


def main():
    lib = load(sys.argv[1])
    scenario = os.environ.get("NORMRT_TEST_SCENARIO", "")
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(f"{what} (last error: "
                            f"{lib.normrt_last_error().decode()})")

    check(lib.normrt_status_string(3) == b"NORMRT_ERROR_INVALID_ARGUMENT",
          "normrt_status_string")
    check(lib.normrt_status_string(NORMRT_ERROR_CAPTURE) ==
          b"NORMRT_ERROR_CAPTURE", "normrt_status_string(CAPTURE)")
    # Nothing was taken during a capture: no driver call, in every scenario.
    check(lib.normrt_scratch_done(None) == NORMRT_SUCCESS,
          "normrt_scratch_done")
    check(lib.normrt_check_aligned(0x1004, 16, b"dx") ==
          NORMRT_ERROR_MISALIGNED, "normrt_check_aligned")
    check(b"dx" in lib.normrt_last_error(), "message names the tensor")
    check(lib.normrt_sm_count(None) == NORMRT_ERROR_INVALID_ARGUMENT,
          "sm_count(NULL)")

    sms = ctypes.c_int(0)
    image = ctypes.create_string_buffer(b".entry norm_bwd\n")
    function = ctypes.c_void_p()
    workspace = ctypes.c_void_p()
    fits = ctypes.c_int(-1)
    barrier = ctypes.c_void_p()
    if scenario == "no-driver":
        check(lib.normrt_init() == NORMRT_ERROR_NO_DRIVER, "normrt_init")
        check(os.environ["NORMRT_LIBCUDA"].encode() in lib.normrt_last_error(),
              "init message names the library")
        check(lib.normrt_sm_count(ctypes.byref(sms)) == NORMRT_ERROR_NO_DRIVER,
              "normrt_sm_count")
        check(lib.normrt_grid_barrier_word(None, ctypes.byref(barrier)) ==
              NORMRT_ERROR_NO_DRIVER and not barrier.value,
              "normrt_grid_barrier_word")
    elif scenario == "fake":
        check(lib.normrt_init() == NORMRT_SUCCESS, "normrt_init")
        check(lib.normrt_sm_count(ctypes.byref(sms)) == NORMRT_SUCCESS and
              sms.value == 132, "normrt_sm_count")
        check(lib.normrt_get_function(image, b"norm_bwd",
                                      ctypes.byref(function)) ==
              NORMRT_SUCCESS and function.value, "normrt_get_function")
        check(lib.normrt_workspace(None, 4096, ctypes.byref(workspace)) ==
              NORMRT_SUCCESS and workspace.value, "normrt_workspace")
        # The generated launcher's cooperative path: ask, get the barrier
        # word, launch with it as the last kernel argument.
        check(lib.normrt_cooperative_fits(function, 132, 256, 0,
                                          ctypes.byref(fits)) ==
              NORMRT_SUCCESS and fits.value == 1, "normrt_cooperative_fits")
        check(lib.normrt_grid_barrier_word(None, ctypes.byref(barrier)) ==
              NORMRT_SUCCESS and barrier.value, "normrt_grid_barrier_word")
        args = (ctypes.c_void_p * 1)(ctypes.addressof(barrier))
        check(lib.normrt_launch_cooperative(function, 132, 256, 0, None,
                                            args) == NORMRT_SUCCESS,
              "normrt_launch_cooperative")
        check(lib.normrt_scratch_done(None) == NORMRT_SUCCESS,
              "normrt_scratch_done after the launch")
        lib.normrt_release_all()
    else:
        failures.append(f"unknown NORMRT_TEST_SCENARIO '{scenario}'")

    for failure in failures:
        print("FAILED:", failure)
    if failures:
        return 1
    print(f"ctypes ({scenario}): OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
