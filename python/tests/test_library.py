#===- test_library.py - Checked calls of a compiled library ---------------===#
"""Library validates every tensor before the C call (count, dtype, shape,
strides, alignment, device) with an ArgumentError naming it; a call that
passes goes to the launcher, whose failure (no driver here, or the fake
driver of unittests/RuntimeFakeCuda) comes back as NormRuntimeError with
normrt_last_error()."""

import ctypes
import json
import os
import shutil
import types
import unittest

import norm_opt
from norm_opt import (ArgumentError, LibraryNotFoundError, NormRuntimeError,
                      SignatureError, parse_header, parse_json)
from tests.support import (Device, FakeTensor, fixture_library, require_env,
                           scratch)

ROWS, N = 8, 256


def rms_args(rows=ROWS, n=N, dtype="float32", **override):
    """dy, x, rstd, w, dx, dw for rms_norm_backward (f32, N = 256)."""
    args = {
        "dy": FakeTensor((rows, n), dtype), "x": FakeTensor((rows, n), dtype),
        "rstd": FakeTensor((rows,), "float32"), "w": FakeTensor((n,), dtype),
        "dx": FakeTensor((rows, n), dtype), "dw": FakeTensor((n,), dtype),
    }
    args.update(override)
    return list(args.values())


class Validation(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_env("NORM_OPT_LIBRARY_PATH")
        cls.fn = fixture_library("rms", "f32").rms_norm_backward
        cls.layer = fixture_library("layer", "bf16").layer_norm_backward

    def refuse(self, args, argument, pattern, fn=None):
        with self.assertRaisesRegex(ArgumentError, pattern) as cm:
            (fn or self.fn).arguments(*args, stream=0)
        self.assertEqual(cm.exception.argument, argument)
        return cm.exception

    def test_good_arguments(self):
        args = rms_args()
        values = self.fn.arguments(*args, stream=7)
        self.assertEqual(values[:6], [a.data_ptr() for a in args])
        # rows, cols, the three row strides, the stream
        self.assertEqual(values[6:], [ROWS, N, N, N, N, 7])

    def test_padded_rows(self):
        # dy's rows padded to 320 elements, dx's to 512.
        args = rms_args(dy=FakeTensor((ROWS, N), strides=(320, 1)),
                        dx=FakeTensor((ROWS, N), strides=(512, 1)))
        self.assertEqual(self.fn.arguments(*args, stream=0)[6:],
                         [ROWS, N, 320, N, 512, 0])

    def test_count(self):
        e = self.refuse(rms_args()[:5], None, "takes 6 tensors")
        self.assertIn("arg0 (input 0, tensor<?x256xf32>)", str(e))

    def test_dtype(self):
        self.refuse(rms_args(x=FakeTensor((ROWS, N), "bfloat16")), "arg1",
                    "arg1 .*dtype must be float32, got bfloat16")

    def test_torch_style_dtype_names(self):
        class TorchDtype:
            def __str__(self):
                return "torch.float32"
        args = rms_args(w=FakeTensor((N,), TorchDtype()))
        self.fn.arguments(*args, stream=0)

    def test_static_cols(self):
        self.refuse(rms_args(n=128), "arg0", r"dim 1 must be 256, got shape "
                    r"\(8, 128\)")

    def test_rank(self):
        self.refuse(rms_args(rstd=FakeTensor((ROWS, 1))), "arg2",
                    "expected rank 1")

    def test_rows_disagree(self):
        self.refuse(rms_args(x=FakeTensor((ROWS + 1, N))), "arg1",
                    "must have one shape")
        self.refuse(rms_args(rstd=FakeTensor((ROWS + 1,))), "arg2",
                    r"must have shape \(8,\) \(the rows of arg0\)")

    def test_inner_dim_not_contiguous(self):
        self.refuse(rms_args(x=FakeTensor((ROWS, N), strides=(2 * N, 2))),
                    "arg1", r"last dim must be contiguous \(stride 1\)")

    def test_rows_overlap(self):
        self.refuse(rms_args(dx=FakeTensor((ROWS, N), strides=(N // 2, 1))),
                    "res0", "row stride 128 is smaller than the row")

    def test_vector_not_contiguous(self):
        self.refuse(rms_args(w=FakeTensor((N,), strides=(2,))), "arg3",
                    "must be contiguous")

    def test_misaligned(self):
        x = FakeTensor((ROWS, N), ptr=0x7e0000000002)
        self.refuse(rms_args(x=x), "arg1", "data pointer 0x7e0000000002 is "
                    "not aligned to 4 bytes")
        # bf16 needs 2 bytes only.
        layer = [FakeTensor((ROWS, N), "bfloat16", ptr=0x7e0000000002),
                 FakeTensor((ROWS, N), "bfloat16"), FakeTensor((ROWS,)),
                 FakeTensor((ROWS,)), FakeTensor((N,), "bfloat16"),
                 FakeTensor((N,), "bfloat16"),
                 FakeTensor((ROWS, N), "bfloat16"),
                 FakeTensor((N,), "bfloat16"), FakeTensor((N,), "bfloat16")]
        self.layer.arguments(*layer, stream=0)
        layer[0] = FakeTensor((ROWS, N), "bfloat16", ptr=0x7e0000000001)
        self.refuse(layer, "arg0", "not aligned to 2 bytes", self.layer)

    def test_null_pointer(self):
        self.refuse(rms_args(dw=FakeTensor((N,), ptr=0)), "res1",
                    "null data pointer")

    def test_device(self):
        self.refuse(rms_args(w=FakeTensor((N,), device=Device("cpu", None))),
                    "arg3", "arg3 .* is on 'cpu'; every tensor must be on "
                    "the GPU")
        self.refuse(rms_args(dx=FakeTensor((ROWS, N),
                                           device=Device("cuda", 1))),
                    "res0", "res0 .* is on cuda:1 but arg0 is on cuda:0")

    def test_not_a_tensor(self):
        self.refuse(rms_args(rstd=[1.0] * ROWS), "arg2",
                    "expected a tensor .* got list")

    def test_stream(self):
        with self.assertRaisesRegex(ArgumentError, "stream must be"):
            self.fn.arguments(*rms_args(), stream="default")

        class Stream:
            cuda_stream = 1234
        self.assertEqual(self.fn.arguments(*rms_args(), stream=Stream())[-1],
                         1234)


RANK3 = """
/* @f: device pointers
 *   arg0: tensor<?x?x64xbf16>
 *   arg1: tensor<?x?xf32>
 *   res0: tensor<?x?x64xbf16> (written)
 *   res1: tensor<64xbf16> (written)
 */
int f(const void *arg0, const void *arg1, void *res0, void *res1, int64_t rows, int64_t cols, int64_t arg0_row_stride, int64_t res0_row_stride, void *stream);
"""


class LeadingDims(unittest.TestCase):
    """A function compiled for [batch, seq, N]: rows = batch x seq, which
    must collapse into one row stride."""

    def setUp(self):
        sig = parse_header(RANK3)["f"]
        self.fn = norm_opt.Function(None, sig, types.SimpleNamespace())

    def args(self, x):
        return [x, FakeTensor((2, 4)), FakeTensor((2, 4, 64), "bfloat16"),
                FakeTensor((64,), "bfloat16")]

    def test_collapsible(self):
        # Each batch padded: rows of 96 elements, batches of 4 rows.
        x = FakeTensor((2, 4, 64), "bfloat16", strides=(4 * 96, 96, 1))
        self.assertEqual(self.fn.arguments(*self.args(x), stream=0)[4:],
                         [8, 64, 96, 64, 0])
        # One batch: its stride does not matter.
        one = [FakeTensor((1, 4, 64), "bfloat16", strides=(7, 64, 1)),
               FakeTensor((1, 4)), FakeTensor((1, 4, 64), "bfloat16"),
               FakeTensor((64,), "bfloat16")]
        self.assertEqual(self.fn.arguments(*one, stream=0)[4:],
                         [4, 64, 64, 64, 0])

    def test_not_collapsible(self):
        x = FakeTensor((2, 4, 64), "bfloat16", strides=(8 * 64, 64, 1))
        with self.assertRaisesRegex(ArgumentError, "arg0 .*leading dims "
                                    r"\(2, 4\) with strides \(512, 64\) "
                                    "do not collapse into rows"):
            self.fn.arguments(*self.args(x), stream=0)

    def test_rows_tensor_shape(self):
        x = FakeTensor((2, 4, 64), "bfloat16")
        args = self.args(x)
        args[1] = FakeTensor((8,))
        with self.assertRaisesRegex(ArgumentError, "expected rank 2"):
            self.fn.arguments(*args, stream=0)
        args[1] = FakeTensor((4, 2))
        with self.assertRaisesRegex(ArgumentError, r"arg1 .*must have shape "
                                    r"\(2, 4\) \(the rows of arg0\)"):
            self.fn.arguments(*args, stream=0)


def channels_first_json():
    """The JSON signature of f(x [?, 64, ?] bf16, rstd [?, ?]) -> (dx, dw)
    over N = dim 1 (norm-opt compile writes this layout)."""
    def full(name, role, index):
        return {"name": name, "role": role, "index": index,
                "type": "tensor<?x64x?xbf16>", "dtype": "bf16",
                "element_bytes": 2, "shape": [-1, 64, -1],
                "layout": "channels_first", "col_stride": name + "_col_stride",
                "domain": 0}
    return json.dumps({
        "format": "norm-opt-library", "version": 1, "functions": [{
            "name": "f",
            "tensors": [
                full("arg0", "input", 0),
                {"name": "arg1", "role": "input", "index": 1,
                 "type": "tensor<?x?xf32>", "dtype": "f32", "element_bytes": 4,
                 "shape": [-1, -1], "layout": "rows", "domain": 0},
                full("res0", "output", 0),
                {"name": "res1", "role": "output", "index": 1,
                 "type": "tensor<64xbf16>", "dtype": "bf16",
                 "element_bytes": 2, "shape": [64], "layout": "cols",
                 "domain": 0}],
            "domains": [{"rows": "rows", "cols": "cols", "n_dim": 1}],
            "params": ["arg0", "arg1", "res0", "res1", "rows", "cols",
                       "arg0_col_stride", "res0_col_stride", "stream"]}]})


class ChannelsFirst(unittest.TestCase):
    """x [B, C, S] normalised over C: rows = B x S, cols = C, and each full
    tensor's column stride S; the tensors must be contiguous."""

    def setUp(self):
        sig = parse_json(channels_first_json())["f"]
        self.fn = norm_opt.Function(None, sig, types.SimpleNamespace())

    def args(self, x=None, rows=None):
        return [x or FakeTensor((3, 64, 5), "bfloat16"),
                rows or FakeTensor((3, 5)),
                FakeTensor((3, 64, 5), "bfloat16"),
                FakeTensor((64,), "bfloat16")]

    def test_arguments(self):
        self.assertEqual(self.fn.arguments(*self.args(), stream=0)[4:],
                         [15, 64, 5, 5, 0])

    def test_not_contiguous(self):
        x = FakeTensor((3, 64, 5), "bfloat16", strides=(64 * 8, 8, 1))
        with self.assertRaisesRegex(ArgumentError, "arg0 .*must be "
                                    "contiguous .*channels-first"):
            self.fn.arguments(*self.args(x), stream=0)

    def test_rows_shape(self):
        with self.assertRaisesRegex(ArgumentError, r"arg1 .*must have shape "
                                    r"\(3, 5\)"):
            self.fn.arguments(*self.args(rows=FakeTensor((5, 3))), stream=0)

    def test_header_only_refused(self):
        with self.assertRaisesRegex(SignatureError, "channels-first group; "
                                    "load it with its JSON signature"):
            parse_header(RANK3.replace("arg0_row_stride", "arg0_col_stride"))


def multi_axis_json(slabs):
    """adaLN's batched rows (x [B, S, N], scale / dscale [B, N]) or a
    GroupNorm slab domain (x [N, C, H, W], mean [N, G], weight / dweight
    [C]): rows, cols and batch, as norm-opt compile writes them."""
    full_shape = [-1, 8, 4, 4] if slabs else [-1, -1, 16]
    def t(name, role, index, shape, layout, dtype="f32"):
        entry = {"name": name, "role": role, "index": index,
                 "type": "tensor<...>", "dtype": dtype,
                 "element_bytes": 4 if dtype == "f32" else 2,
                 "shape": shape, "layout": layout, "domain": 0}
        if layout == "rows_by_cols":
            entry["row_stride"] = name + "_row_stride"
        return entry
    cols = ([8], "slab_cols") if slabs else ([-1, 16], "batch_cols")
    rows = ([-1, 2], "slab_rows") if slabs else ([-1, -1], "rows")
    return json.dumps({
        "format": "norm-opt-library", "version": 1, "functions": [{
            "name": "f",
            "tensors": [t("arg0", "input", 0, full_shape, "rows_by_cols"),
                        t("arg1", "input", 1, rows[0], rows[1]),
                        t("arg2", "input", 2, cols[0], cols[1]),
                        t("res0", "output", 0, full_shape, "rows_by_cols"),
                        t("res1", "output", 1, cols[0], cols[1])],
            "domains": [{"rows": "rows", "cols": "cols", "n_dim": 3 if slabs
                         else 2, "batch": "batch", "batch_rank": 1}],
            "params": ["arg0", "arg1", "arg2", "res0", "res1", "rows", "cols",
                       "batch", "arg0_row_stride", "res0_row_stride",
                       "stream"]}]})


class MultiAxis(unittest.TestCase):
    """The launcher's batch parameter: the product of the leading
    batch_rank dims (adaLN's B, GroupNorm's N), after rows and cols."""

    def fn(self, slabs):
        sig = parse_json(multi_axis_json(slabs))["f"]
        return norm_opt.Function(None, sig, types.SimpleNamespace())

    def test_batched_rows(self):
        fn = self.fn(slabs=False)
        self.assertEqual(fn.signature.domains, (("rows", "cols", "batch"),))
        self.assertEqual(fn.signature.batch_rank(0), 1)
        args = [FakeTensor((3, 5, 16)), FakeTensor((3, 5)),
                FakeTensor((3, 16)), FakeTensor((3, 5, 16)),
                FakeTensor((3, 16))]
        self.assertEqual(fn.arguments(*args, stream=0)[5:],
                         [15, 16, 3, 16, 16, 0])
        args[2] = FakeTensor((2, 16))
        with self.assertRaisesRegex(ArgumentError, r"arg2 .*must have shape "
                                    r"\(3, 16\) \(the samples and cols"):
            fn.arguments(*args, stream=0)

    def test_group_norm_slabs(self):
        fn = self.fn(slabs=True)
        args = [FakeTensor((2, 8, 4, 4)), FakeTensor((2, 2)),
                FakeTensor((8,)), FakeTensor((2, 8, 4, 4)),
                FakeTensor((8,))]
        # rows = N x C x H, cols = W, batch = N.
        self.assertEqual(fn.arguments(*args, stream=0)[5:],
                         [64, 4, 2, 4, 4, 0])
        args[1] = FakeTensor((3, 2))
        with self.assertRaisesRegex(ArgumentError, r"arg1 .*must start with "
                                    r"the samples \(2,\)"):
            fn.arguments(*args, stream=0)

    def test_header_only_refused(self):
        with self.assertRaisesRegex(SignatureError, "batched rows"):
            parse_header(RANK3.replace("int64_t cols,",
                                       "int64_t cols, int64_t batch,"))


class Loading(unittest.TestCase):
    def test_missing_library(self):
        with self.assertRaisesRegex(LibraryNotFoundError,
                                    "no compiled library at .*nothing.so"):
            norm_opt.Library("/nonexistent/nothing.so")

    def test_missing_signature(self):
        require_env("NORM_OPT_LIBRARY_PATH")
        lib = fixture_library("rms", "f32")
        d = scratch("missing-signature")
        copy = d / "librms.so"
        shutil.copy(lib.path, copy)
        with self.assertRaisesRegex(LibraryNotFoundError,
                                    "neither librms.json nor librms.h"):
            norm_opt.Library(copy)
        # The header alone will do.
        shutil.copy(lib.path.with_suffix(".h"), d / "librms.h")
        self.assertEqual(list(norm_opt.Library(copy).functions),
                         ["rms_norm_backward"])
        # A signature naming a function the library lacks.
        (d / "librms.json").write_text(
            lib.signature_path.read_text().replace(
                '"name": "rms_norm_backward"', '"name": "other"'))
        with self.assertRaisesRegex(SignatureError, "lists other, which .* "
                                    "does not export"):
            norm_opt.Library(copy)

    def test_unknown_function(self):
        require_env("NORM_OPT_LIBRARY_PATH")
        with self.assertRaisesRegex(AttributeError, "no function 'nope' "
                                    r"\(it has: rms_norm_backward\)"):
            fixture_library("rms", "f32").nope


def persistent_args():
    """rms_args of 64 rows: past the latency kernel's 32, so the call takes
    the persistent grid, whose workspace these tests check."""
    return rms_args(rows=64)


class RuntimeErrors(unittest.TestCase):
    """The call itself fails: no driver, or the fake driver (which cannot
    load a real cubin). Needs NORMRT_LIBCUDA set before the first call."""

    @classmethod
    def setUpClass(cls):
        require_env("NORM_OPT_LIBRARY_PATH", "NORMRT_TEST_SCENARIO")
        cls.scenario = os.environ["NORMRT_TEST_SCENARIO"]
        cls.lib = fixture_library("rms", "f32")

    def test_call_fails_with_the_runtime_message(self):
        fake = None
        if self.scenario == "fake":
            # The fake driver loads the cubin and takes launches; a device
            # with no memory makes the workspace allocation fail.
            fake = ctypes.CDLL(os.environ["NORMRT_LIBCUDA"])
            fake.fakecuda_set_memory_limit.argtypes = [ctypes.c_size_t]
            fake.fakecuda_set_memory_limit(0)
        try:
            with self.assertRaises(NormRuntimeError) as cm:
                self.lib.rms_norm_backward(*persistent_args(), stream=0)
        finally:
            if fake:
                fake.fakecuda_set_memory_limit(1 << 30)
        e = cm.exception
        self.assertEqual(e.function, "rms_norm_backward")
        self.assertEqual(e.message, self.lib.last_error())
        if self.scenario == "no-driver":
            self.assertEqual((e.status, e.status_name),
                             (1, "NORMRT_ERROR_NO_DRIVER"))
            self.assertIn("/nonexistent/libcuda.so.1", e.message)
        elif self.scenario == "fake":
            self.assertEqual((e.status, e.status_name),
                             (8, "NORMRT_ERROR_OUT_OF_MEMORY"))
        else:
            self.fail(f"unknown NORMRT_TEST_SCENARIO {self.scenario}")
        self.assertIn(e.status_name, str(e))
        self.assertIn(e.message, str(e))

    def test_raw_launcher(self):
        # Function.cfunc, the launcher itself (nothing validated), gives
        # the status of the checked call with the same arguments.
        fn = self.lib.rms_norm_backward
        args = fn.arguments(*persistent_args(), stream=0)
        fake = None
        if self.scenario == "fake":
            fake = ctypes.CDLL(os.environ["NORMRT_LIBCUDA"])
            fake.fakecuda_set_memory_limit.argtypes = [ctypes.c_size_t]
            fake.fakecuda_set_memory_limit(0)
        try:
            status = fn.cfunc(*args)
        finally:
            if fake:
                fake.fakecuda_set_memory_limit(1 << 30)
        self.assertEqual(self.lib.status_string(status),
                         {"no-driver": "NORMRT_ERROR_NO_DRIVER",
                          "fake": "NORMRT_ERROR_OUT_OF_MEMORY"}[
                              self.scenario])
        self.assertTrue(self.lib.last_error())

    def test_workspace_query_allocates_and_launches_nothing(self):
        fn = self.lib.rms_norm_backward
        if self.scenario == "no-driver":
            with self.assertRaises(NormRuntimeError) as cm:
                fn.workspace_bytes(*persistent_args(), stream=0)
            self.assertEqual(cm.exception.status_name,
                             "NORMRT_ERROR_NO_DRIVER")
            return
        # The fake driver: a device with no memory left still answers the
        # query (nothing is allocated), and the size is the call's.
        fake = ctypes.CDLL(os.environ["NORMRT_LIBCUDA"])
        fake.fakecuda_set_memory_limit.argtypes = [ctypes.c_size_t]
        fake.fakecuda_set_memory_limit(0)
        try:
            nbytes = fn.workspace_bytes(*persistent_args(), stream=0)
        finally:
            fake.fakecuda_set_memory_limit(1 << 30)
        self.assertGreater(nbytes, 0)  # dW's fp32 partial rows
        self.assertEqual(nbytes % (4 * N), 0)
        # A caller buffer of that size is taken; one 16 bytes short is not.
        try:
            self.lib.set_workspace(0, 0x100000, nbytes - 16)
            with self.assertRaises(NormRuntimeError) as cm:
                fn(*persistent_args(), stream=0)
            self.assertIn(f"needs {nbytes} bytes", cm.exception.message)
            self.lib.set_workspace(0, 0x100000, nbytes)
            fn(*persistent_args(), stream=0)
        finally:
            self.lib.set_workspace(0, None, 0)


if __name__ == "__main__":
    unittest.main()
