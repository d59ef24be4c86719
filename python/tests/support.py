#===- support.py - What the norm_opt tests share --------------------------===#
"""A tensor stand-in (no torch here) and the environment the ctest entries
set (python/CMakeLists.txt):
  NORM_OPT                    build/bin/norm-opt
  NORM_OPT_LIBRARY_PATH       libraries the python-libs fixture compiled
                              (norm_opt.kernels: layer/rms, N = 256,
                              f32 and bf16)
  NORMRT_TEST_SCENARIO        no-driver / fake (and NORMRT_LIBCUDA)
  NORM_OPT_TEST_TMP           scratch directory"""

import os
import pathlib
import tempfile
import unittest

from norm_opt import kernels


class Device:
    def __init__(self, kind="cuda", index=0):
        self.type, self.index = kind, index

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"


class FakeTensor:
    """shape, stride(), dtype, data_ptr(), device: all Library looks at.
    Strides default to contiguous; `ptr` to a 256-byte aligned address."""

    _next = 0x7f0000000000

    def __init__(self, shape, dtype="float32", strides=None, ptr=None,
                 device=None):
        self.shape = tuple(shape)
        if strides is None:
            strides, step = [], 1
            for d in reversed(self.shape):
                strides.insert(0, step)
                step *= d
        self._strides = tuple(strides)
        self.dtype = dtype
        if ptr is None:
            ptr = FakeTensor._next
            FakeTensor._next += 1 << 24
        self._ptr = ptr
        self.device = device or Device()

    def stride(self):
        return self._strides

    def data_ptr(self):
        return self._ptr


def scratch(test):
    root = pathlib.Path(os.environ.get("NORM_OPT_TEST_TMP") or
                        tempfile.gettempdir())
    root.mkdir(parents=True, exist_ok=True)
    return pathlib.Path(tempfile.mkdtemp(prefix=f"{test}.", dir=root))


def fixture_library(kind, dtype):
    """A library of the python-libs fixture (N = 256)."""
    lib = kernels.library(kind, 256, dtype, chip="sm_90a")
    return lib


def require_env(*names):
    missing = [n for n in names if not os.environ.get(n)]
    if missing:
        raise unittest.SkipTest(f"needs {', '.join(missing)} (run through "
                                "ctest)")
