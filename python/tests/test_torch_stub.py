#===- test_torch_stub.py - norm_opt.torch's ops, on a torch stand-in ------===#
"""What norm_opt.torch's custom ops hand to the kernel, with
tests/stub_torch standing in for torch (CI has no torch): rows, cols and
row strides from [batch, seq, N] tensors, padded rows passed through,
non-unit inner strides copied, the statistics flattened, outputs fresh,
torch's current stream; a missing library is a clear error; the real call
reaches the (fake) driver. The real thing runs in test/gpu/train_check.py."""

import os
import pathlib
import sys
import unittest
from unittest import mock

sys.path.insert(0, str(pathlib.Path(__file__).parent / "stub_torch"))
import torch  # noqa: E402  (the stand-in)

# The stand-in has no C++ extension support: the Python kernels.
os.environ["NORM_OPT_TORCH_OPS"] = "python"

import norm_opt.torch as nt  # noqa: E402
from norm_opt import NormOptNotFoundError, NormRuntimeError  # noqa: E402
from tests.support import require_env  # noqa: E402

N = 256


class Recorder:
    """Stands in for a kernel Function: validates the first call of a shape
    (what norm_opt.torch's cached path asks `arguments` for) and records
    every call of the C launcher (`_cfunc`) with the tensors last checked."""

    library = None  # no workspace query: the runtime's own workspace

    def __init__(self, fn):
        self.fn, self.calls, self.checked = fn, [], None

    def _cfunc(self, *args):
        self.calls.append((self.checked, list(args)))
        return 0

    name = property(lambda self: self.fn.name)
    signature = property(lambda self: self.fn.signature)

    def arguments(self, *tensors, stream=None):
        self.checked = tensors
        return self.fn.arguments(*tensors, stream=stream)

    def workspace_bytes(self, *tensors, stream=None):
        self.fn.arguments(*tensors, stream=stream)  # validated, not run
        return 0


class CustomOps(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_env("NORM_OPT_LIBRARY_PATH", "NORMRT_TEST_SCENARIO")
        assert torch.Tensor.__module__ == "torch" and hasattr(
            torch, "_next_ptr"), "not the stand-in"

    def recorder(self, kind, dtype):
        fn = nt.kernel(kind, N, dtype, dtype, torch.device("cuda"))
        key = (kind, N, str(dtype)[6:].replace("bfloat16", "bf16")
               .replace("float32", "f32"), str(dtype)[6:]
               .replace("bfloat16", "bf16").replace("float32", "f32"),
               "sm_90a")
        rec = Recorder(fn)
        for patcher in (mock.patch.dict(nt._functions, {key: rec}),
                        mock.patch.dict(nt._by_device, clear=True),
                        mock.patch.dict(nt._calls, clear=True)):
            patcher.start()
            self.addCleanup(patcher.stop)
        return rec

    def test_layer_norm_backward_arguments(self):
        rec = self.recorder("layer", torch.bfloat16)
        bf16 = torch.bfloat16
        # dy with padded rows (stride 320), x contiguous [2, 3, 256].
        dy = torch.Tensor((2, 3, N), bf16, strides=(3 * 320, 320, 1))
        x = torch.Tensor((2, 3, N), bf16)
        mean = torch.Tensor((2, 3, 1))
        rstd = torch.Tensor((2, 3, 1))
        w = torch.Tensor((N,), bf16)
        before = nt.launches
        dx, dw, db = nt.layer_norm_backward(dy, x, mean, rstd, w)
        self.assertEqual(nt.launches, before + 1)
        (tensors, values), = rec.calls
        self.assertEqual(dx.shape, (2, 3, N))
        self.assertEqual(dx.dtype, bf16)
        self.assertEqual(dw.shape, (N,))
        # dy, x, mean, rstd, w, b, dx, dw, db; rows, cols; strides; stream
        self.assertEqual(values[0], dy.data_ptr())   # padded: no copy
        self.assertEqual(values[1], x.data_ptr())
        self.assertEqual(values[6], dx.data_ptr())   # the returned tensor
        self.assertEqual(values[7:9], [dw.data_ptr(), db.data_ptr()])
        self.assertEqual(values[9:], [6, N, 320, N, N, 0x5157])
        self.assertEqual(tensors[2].shape, (6,))     # mean flattened

    def test_rms_norm_backward_copies_strided_inner_dim(self):
        rec = self.recorder("rms", torch.float32)
        dy = torch.Tensor((4, N), strides=(2 * N, 2))  # every other element
        x, rstd, w = torch.Tensor((4, N)), torch.Tensor((4,)), \
            torch.Tensor((N,))
        dx, dw = nt.rms_norm_backward(dy, x, rstd, w)
        (tensors, values), = rec.calls
        self.assertNotEqual(values[0], dy.data_ptr())  # a contiguous copy
        self.assertEqual(values[6:], [4, N, N, N, N, 0x5157])

    def test_missing_library(self):
        with mock.patch.dict(os.environ, {"NORM_OPT": "/nonexistent/norm-opt"}):
            with self.assertRaisesRegex(
                    NormOptNotFoundError, "no compiled rms_norm_backward for "
                    "N=256, dtype=bf16, weight=f16, chip=sm_90a"):
                nt.rms_norm_backward(
                    torch.Tensor((4, N), torch.bfloat16),
                    torch.Tensor((4, N), torch.bfloat16), torch.Tensor((4,)),
                    torch.Tensor((N,), torch.float16))

    def test_reaches_the_driver(self):
        args = (torch.Tensor((4, N)), torch.Tensor((4, N)),
                torch.Tensor((4,)), torch.Tensor((N,)))
        if os.environ["NORMRT_TEST_SCENARIO"] == "fake":
            # The fake driver loads the library's cubin and takes the
            # launches (it runs no kernel): the call succeeds.
            dx, dw = nt.rms_norm_backward(*args)
            self.assertEqual((dx.shape, dw.shape), ((4, N), (N,)))
            return
        with self.assertRaises(NormRuntimeError) as cm:
            nt.rms_norm_backward(*args)
        self.assertEqual(cm.exception.status_name, "NORMRT_ERROR_NO_DRIVER")

    def test_fake_functions(self):
        x = torch.Tensor((2, 3, N), torch.bfloat16)
        w = torch.Tensor((N,), torch.bfloat16)
        fake = torch.library.ops["norm_opt::layer_norm_backward"].fake
        dx, dw, db = fake(x, x, None, None, w)
        self.assertEqual((dx.shape, dw.shape, db.shape),
                         ((2, 3, N), (N,), (N,)))
        fake = torch.library.ops["norm_opt::rms_norm_backward"].fake
        dx, dw = fake(x, x, None, w)
        self.assertEqual((dx.shape, dw.dtype), ((2, 3, N), torch.bfloat16))

    def test_bad_ops_mode(self):
        with mock.patch.dict(os.environ, {"NORM_OPT_TORCH_OPS": "fast"}):
            with self.assertRaisesRegex(ValueError, "must be auto, cpp or "
                                        "python, got 'fast'"):
                nt._load_cpp_ops()

    def test_chip(self):
        self.assertEqual(nt.chip_of(torch.device("cuda")), "sm_90a")
        with mock.patch.dict(os.environ, {"NORM_OPT_CHIP": "sm_80"}):
            self.assertEqual(nt.chip_of(torch.device("cuda")), "sm_80")


if __name__ == "__main__":
    unittest.main()
