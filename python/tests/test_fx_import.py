#===- test_fx_import.py - ATen graphs (recorded) as linalg ----------------===#
"""norm_opt.fx_import: views read through indexing maps, broadcasting and
type promotion in the payloads, reductions with and without keepdim,
boundaries as arguments and results with a remark; the text it writes
parses and verifies in norm-opt ($NORM_OPT)."""

import os
import subprocess
import unittest

from norm_opt import fx_import
from tests.support import require_env


def node(name, target, args, shape, dtype="float32", **kwargs):
    n = {"name": name, "op": "call_function", "target": target,
         "args": args, "shape": shape, "dtype": dtype}
    if kwargs:
        n["kwargs"] = kwargs
    return n


def arg(name, shape, dtype="float32"):
    return {"name": name, "op": "placeholder", "args": [], "shape": shape,
            "dtype": dtype}


def ref(name):
    return {"node": name}


def graph(nodes, outputs):
    return {"format": 1, "name": "g", "nodes": nodes + [
        {"name": "output", "op": "output", "args": [[ref(o) for o in outputs]]}]}


# RMSNorm-style: x [s0, 8, 16] bf16 upcast, a keepdim row sum, a broadcast
# back, a weight [16], the rows' dW as a keepdim sum over two dims.
RMS = graph([
    arg("x", ["s0", 8, 16], "bfloat16"),
    arg("w", [16], "bfloat16"),
    arg("rstd", ["s0", 8, 1]),
    {"name": "n", "op": "placeholder", "args": []},  # a SymInt: no tensor
    node("xf", "prims.convert_element_type.default", [ref("x"), {"dtype": "float32"}], ["s0", 8, 16]),
    node("h", "aten.mul.Tensor", [ref("xf"), ref("rstd")], ["s0", 8, 16]),
    node("hw", "aten.mul.Tensor", [ref("h"), ref("w")], ["s0", 8, 16]),
    node("s", "aten.sum.dim_IntList", [ref("hw"), [-1], True], ["s0", 8, 1]),
    node("e", "aten.expand.default", [ref("s"), [ref("n"), 8, 16]], ["s0", 8, 16]),
    node("d", "aten.div.Scalar", [ref("e"), 16], ["s0", 8, 16]),
    node("y", "aten.sub.Tensor", [ref("hw"), ref("d")], ["s0", 8, 16]),
    node("yb", "prims.convert_element_type.default", [ref("y"), {"dtype": "bfloat16"}], ["s0", 8, 16], "bfloat16"),
    node("dw", "aten.sum.dim_IntList", [ref("h"), [0, 1], True], [1, 1, 16]),
    node("dwv", "aten.view.default", [ref("dw"), [16]], [16]),
    node("mm", "aten.mm.default", [ref("yb"), ref("w")], ["s0", 16], "bfloat16"),
    node("t", "aten.permute.default", [ref("mm"), [1, 0]], [16, "s0"], "bfloat16"),
], ["yb", "dwv", "t"])


class Import(unittest.TestCase):
    def test_rms_region(self):
        text, remarks = fx_import.import_graph(RMS)
        # Arguments: the graph's tensors, then the boundary's result.
        self.assertIn("func.func @g(%x: tensor<?x8x16xbf16>, %w: tensor<16xbf16>, "
                      "%rstd: tensor<?x8x1xf32>, %mm: tensor<?x16xbf16>)", text)
        # The row sum keeps its unit dim; the expand is a view its user
        # reads through (d0, d1, 0).
        self.assertIn('iterator_types = ["parallel", "parallel", "reduction"]', text)
        self.assertIn("affine_map<(d0, d1, d2) -> (d0, d1, 0)>", text)
        self.assertIn("affine_map<(d0, d1, d2) -> (d2)>", text)  # w
        self.assertIn('iterator_types = ["reduction", "reduction", "parallel"]', text)
        self.assertIn("affine_map<(d0, d1, d2) -> (0, 0, d2)>", text)
        # Type promotion in the payloads, dynamic sizes from an argument.
        self.assertIn("arith.extf %a0 : bf16 to f32", text)
        self.assertIn("arith.truncf", text)
        self.assertIn("tensor.dim %x, %c", text)
        self.assertIn("arith.constant 1.60000000000000000e+01 : f32", text)
        # The permuted boundary value is an argument returned as is (not a
        # result); the boundary's inputs (yb) and the outputs are results.
        self.assertRegex(text, r"-> \(tensor<\?x8x16xbf16>, tensor<16xf32>\)")
        self.assertEqual(remarks, ["mm: boundary (aten.mm.default is not "
                                   "imported): a function argument"])

    def test_parses_and_verifies(self):
        require_env("NORM_OPT")
        text, _ = fx_import.import_graph(RMS)
        done = subprocess.run([os.environ["NORM_OPT"], "-"], input=text,
                              capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr + text)

    def test_boundaries(self):
        g = graph([
            arg("x", [4, 8]),
            node("m", "aten.mean.dim", [ref("x"), [1], False], [4]),
            node("c", "aten.cumsum.default", [ref("x"), 1], [4, 8]),
            node("r", "aten.view.default", [ref("x"), [6, 5]], [6, 5]),
            node("a", "aten.add.Tensor", [ref("c"), ref("x")], [4, 8], alpha=2),
        ], ["m", "a", "r"])
        text, remarks = fx_import.import_graph(g)
        self.assertEqual(remarks, [
            "c: boundary (aten.cumsum.default is not imported): a function argument",
            "r: boundary (aten.view.default: a view that is not a permutation, "
            "a change of unit dims or a split / merge of dims): a function "
            "argument",
            "a: boundary (aten.add.Tensor with alpha 2): a function argument"])
        # mean over a static extent divides by it.
        self.assertIn("arith.constant 8.00000000000000000e+00 : f32", text)
        self.assertIn("%c: tensor<4x8xf32>", text)

    def test_reshapes(self):
        # GroupNorm's view [N, C, H, W] -> [N, G, C/G, H*W] of a computed
        # tensor: expanded to the common refinement, then collapsed.
        g = graph([
            arg("x", ["s0", 8, 2, 3]),
            node("e", "aten.exp.default", [ref("x")], ["s0", 8, 2, 3]),
            node("v", "aten.reshape.default", [ref("e"), [ref("s0"), 4, 2, 6]],
                 ["s0", 4, 2, 6]),
            node("s", "aten.sum.dim_IntList", [ref("v"), [2, 3]], ["s0", 4]),
        ], ["s"])
        text, remarks = fx_import.import_graph(g)
        self.assertEqual(remarks, [])
        self.assertIn("tensor.expand_shape %e_4 [[0], [1, 2], [3], [4]] "
                      "output_shape [%dim1, 4, 2, 2, 3]", text)
        self.assertIn("tensor<?x8x2x3xf32> into tensor<?x4x2x2x3xf32>", text)
        self.assertIn("[[0], [1], [2], [3, 4]] : tensor<?x4x2x2x3xf32> into "
                      "tensor<?x4x2x6xf32>", text)
        # A reshape of an argument nothing else reads: the argument is the
        # reshape's result (one full tensor of the domain's shape).
        g = graph([
            arg("mm", [12, 4]),
            node("v", "aten.view.default", [ref("mm"), [3, 4, 4]], [3, 4, 4]),
            node("s", "aten.sum.dim_IntList", [ref("v"), [2]], [3, 4]),
        ], ["s"])
        text, remarks = fx_import.import_graph(g)
        self.assertIn("%v: tensor<3x4x4xf32>", text)
        self.assertNotIn("expand_shape", text)
        # Splits of both sides (6x4 -> 4x6) stay a boundary.
        self.assertIsNone(fx_import.refinement([6, 4], [4, 6]))
        self.assertEqual(fx_import.refinement(["s", 320, 32, 32],
                                              ["s", 32, 10, 1024]),
                         [(["s"], ["s"]), ([320], [32, 10]),
                          ([32, 32], [1024])])

    def test_channels_last_steps_in_memory_order(self):
        # Inductor's channels-last activation: an elementwise step on it is
        # written in memory order ([N, H, W, C]) and read back permuted.
        g = graph([
            dict(arg("x", [2, 4, 3, 3]), stride=[36, 1, 12, 4]),
            dict(node("e", "aten.exp.default", [ref("x")], [2, 4, 3, 3]),
                 stride=[36, 1, 12, 4]),
            node("s", "aten.sum.dim_IntList", [ref("e"), [1, 2, 3]], [2]),
        ], ["s"])
        text, _ = fx_import.import_graph(g)
        self.assertIn("%x: tensor<2x3x3x4xf32>", text)
        self.assertIn("outs(%e1 : tensor<2x3x3x4xf32>)", text)
        self.assertIn("ins(%x : tensor<2x3x3x4xf32>)", text)

    def test_mean_over_a_runtime_extent_is_a_boundary(self):
        g = graph([arg("x", [4, "s1"]),
                   node("m", "aten.mean.dim", [ref("x"), [1], True], [4, 1])],
                  ["m"])
        _, remarks = fx_import.import_graph(g)
        self.assertIn("over a dim of run-time extent", remarks[0])

    def test_format_is_checked(self):
        with self.assertRaisesRegex(fx_import.ImportError_, "graph format 2"):
            fx_import.import_graph({"format": 2, "nodes": []})
        with self.assertRaisesRegex(fx_import.ImportError_, "do not broadcast"):
            fx_import.broadcast_shape([[3, 4], [5, 4]])


if __name__ == "__main__":
    unittest.main()
