#===- test_signature.py - Reading a library's JSON signature and header ---===#
"""The JSON signature `norm-opt compile --emit=lib` writes and the C header
give the same functions; malformed ones are refused with a SignatureError."""

import json
import unittest

from norm_opt import SignatureError, parse_header, parse_json
from tests.support import fixture_library, require_env


class FromCompiledLibraries(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_env("NORM_OPT_LIBRARY_PATH")
        cls.layer = fixture_library("layer", "bf16")
        cls.rms = fixture_library("rms", "f32")

    def test_layer_norm_json(self):
        sig = self.layer.layer_norm_backward.signature
        self.assertEqual(self.layer.signature_path.suffix, ".json")
        self.assertEqual(
            [(t.name, t.role, t.dtype, t.shape, t.layout)
             for t in sig.tensors],
            [("arg0", "input", "bf16", (-1, 256), "rows_by_cols"),
             ("arg1", "input", "bf16", (-1, 256), "rows_by_cols"),
             ("arg2", "input", "f32", (-1,), "rows"),
             ("arg3", "input", "f32", (-1,), "rows"),
             ("arg4", "input", "bf16", (256,), "cols"),
             ("arg5", "input", "bf16", (256,), "unused"),
             ("res0", "output", "bf16", (-1, 256), "rows_by_cols"),
             ("res1", "output", "bf16", (256,), "cols"),
             ("res2", "output", "bf16", (256,), "cols")])
        self.assertEqual(sig.params, (
            "arg0", "arg1", "arg2", "arg3", "arg4", "arg5", "res0", "res1",
            "res2", "rows", "cols", "arg0_row_stride", "arg1_row_stride",
            "res0_row_stride", "stream"))
        self.assertEqual([t.element_bytes for t in sig.tensors],
                         [2, 2, 4, 4, 2, 2, 2, 2, 2])
        self.assertEqual(sig.tensors[0].dtype_name, "bfloat16")

    def test_json_records_the_build(self):
        doc = json.loads(self.layer.signature_path.read_text())
        self.assertEqual(doc["chip"], "sm_90a")
        self.assertEqual(doc["library"], "liblayer_norm_backward.so")
        self.assertEqual(doc["header"], "liblayer_norm_backward.h")

    def test_header_agrees_with_json(self):
        for lib in (self.layer, self.rms):
            from_json = parse_json(lib.signature_path.read_text())
            from_header = parse_header(
                lib.signature_path.with_suffix(".h").read_text())
            self.assertEqual(from_json.keys(), from_header.keys())
            for name, sig in from_json.items():
                other = from_header[name]
                self.assertEqual(sig.params, other.params)
                for a, b in zip(sig.tensors, other.tensors):
                    # The header cannot tell an unused [N] argument (the
                    # bias of layer_norm_grad) from a column one.
                    layout = "cols" if a.layout == "unused" else a.layout
                    self.assertEqual(
                        (a.name, a.role, a.index, a.type, a.dtype,
                         a.element_bytes, a.shape, layout, a.row_stride),
                        (b.name, b.role, b.index, b.type, b.dtype,
                         b.element_bytes, b.shape, b.layout, b.row_stride))


HEADER = """
/* @f: device pointers
 *   arg0: tensor<?x?xf16>
 *   arg1: tensor<?xf32>
 *   arg2: tensor<f32>
 *   res0: tensor<?x?xf16> (written)
 * rows = ... */
int f(const void *arg0, const void *arg1, const void *arg2, void *res0, int64_t rows, int64_t cols, int64_t arg0_row_stride, int64_t res0_row_stride, void *stream);
"""


class Malformed(unittest.TestCase):
    def test_header_dynamic_cols(self):
        sig = parse_header(HEADER)["f"]
        self.assertEqual([t.layout for t in sig.tensors],
                         ["rows_by_cols", "rows_or_cols", "scalar",
                          "rows_by_cols"])

    def test_header_without_types(self):
        text = HEADER.replace("@f:", "@g:")
        with self.assertRaisesRegex(SignatureError, "no comment with the "
                                    "tensor types of f"):
            parse_header(text)

    def test_header_without_launchers(self):
        with self.assertRaisesRegex(SignatureError, "no launcher"):
            parse_header("int main(void);\n")

    def test_header_params_out_of_order(self):
        text = HEADER.replace("int64_t arg0_row_stride, int64_t "
                              "res0_row_stride",
                              "int64_t res0_row_stride, int64_t "
                              "arg0_row_stride")
        with self.assertRaisesRegex(SignatureError, "launcher ABI"):
            parse_header(text)

    def test_json_errors(self):
        with self.assertRaisesRegex(SignatureError, "not JSON"):
            parse_json("{")
        with self.assertRaisesRegex(SignatureError, "format"):
            parse_json('{"format": "x"}')
        with self.assertRaisesRegex(SignatureError, "version 2"):
            parse_json('{"format": "norm-opt-library", "version": 2}')
        with self.assertRaisesRegex(SignatureError, "malformed"):
            parse_json('{"format": "norm-opt-library", "version": 1, '
                       '"functions": [{"name": "f"}]}')


if __name__ == "__main__":
    unittest.main()
