#===- test_fx_region.py - the torch.compile route's region selection ------===#
"""norm_opt.fx_region (which parts of a recorded graph become one launch),
norm_opt.fx_eval (the float64 evaluation of a recorded graph) and the
importer's remarks for what it does not take. The pass is asked through
$NORM_OPT (ctest sets it)."""

import json
import math
import os
import unittest

from norm_opt import fx_eval, fx_import, fx_region
from tests.support import require_env
from tests.test_fx_import import arg, graph, node, ref

GRAPHS = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir,
                      "test", "Import", "graphs")


def load(name):
    with open(os.path.join(GRAPHS, name)) as f:
        return json.load(f)


# Two elementwise ops that share x, one of them feeding a matmul whose
# result the other's consumer reads: the two sides must not share a region
# (it would read what it feeds through the matmul).
THROUGH_MM = graph([
    arg("x", [4, 8]), arg("w", [8, 8]),
    node("a", "aten.mul.Tensor", [ref("x"), 2.0], [4, 8]),
    node("s", "aten.sum.dim_IntList", [ref("a"), [1], True], [4, 1]),
    node("m", "aten.mm.default", [ref("a"), ref("w")], [4, 8]),
    node("c", "aten.mul.Tensor", [ref("x"), ref("m")], [4, 8]),
    node("d", "aten.add.Tensor", [ref("c"), ref("s")], [4, 8]),
], ["d"])


class Components(unittest.TestCase):
    def test_no_region_reads_what_it_feeds(self):
        comps = fx_region.components(THROUGH_MM)
        for c in comps:
            self.assertFalse({"a", "c"} <= set(c), comps)
        self.assertIn(["a", "s"], [sorted(c) for c in comps])

    def test_subgraph_inputs_outputs(self):
        sub, inputs, outputs = fx_region.subgraph(THROUGH_MM, ["a", "s"])
        self.assertEqual(inputs, ["x"])
        self.assertEqual(outputs, ["a", "s"])  # a feeds the matmul
        self.assertEqual(sub["nodes"][-1]["op"], "output")

    def test_domain_filter_drops_partial_row_operands(self):
        g = graph([
            arg("x", [2, 3, 8]), arg("pos", [1, 3, 8]),
            node("h", "aten.add.Tensor", [ref("x"), ref("pos")], [2, 3, 8]),
            node("s", "aten.sum.dim_IntList", [ref("h"), [2], True],
                 [2, 3, 1]),
        ], ["s"])
        self.assertEqual(fx_region.domain_filter(g, ["h", "s"]), ["s"])

    def test_small_permuted_inputs_are_declared_contiguous(self):
        # ConvNeXt's per-row statistics [B, H, W, 1] laid out [B, W, H]
        # beside [B, H, W, C] activations: passed as a contiguous copy.
        x = arg("x", [2, 3, 4, 8])
        x["stride"] = [96, 32, 8, 1]
        rstd = arg("rstd", [2, 3, 4, 1])
        rstd["stride"] = [12, 1, 3, 3]
        g = graph([x, rstd,
                   node("m", "aten.mul.Tensor", [ref("x"), ref("rstd")],
                        [2, 3, 4, 8]),
                   node("s", "aten.sum.dim_IntList", [ref("m"), [3], True],
                        [2, 3, 4, 1])], ["s"])
        sub, _, _ = fx_region.subgraph(g, ["m", "s"])
        by_name = {n["name"]: n for n in sub["nodes"]}
        self.assertEqual(by_name["rstd"]["stride"], [12, 4, 1, 1])
        self.assertEqual(by_name["x"]["stride"], [96, 32, 8, 1])
        # A full-size input may be declared in a sibling's layout instead.
        dy = arg("dy", [2, 3, 4, 8])
        dy["stride"] = [96, 8, 24, 1]  # [B, W, H, C] in memory
        self.assertEqual(fx_region._layouts({"x": x, "dy": dy}, "dy",
                                            ["x", "dy"]),
                         [(96, 32, 8, 1)])
        sub, _, _ = fx_region.subgraph(
            graph([x, dy, node("a", "aten.add.Tensor", [ref("x"), ref("dy")],
                               [2, 3, 4, 8])], ["a"]),
            ["a"], copies=(("dy", (96, 32, 8, 1)),))
        self.assertEqual({n["name"]: n.get("stride") for n in sub["nodes"]}
                         ["dy"], [96, 32, 8, 1])

    def test_physical_order(self):
        # [B, C, H, W] channels-last: memory order B, H, W, C.
        self.assertEqual(fx_import.physical_order([2, 3, 4, 5],
                                                  [60, 1, 15, 3]),
                         [0, 2, 3, 1])
        self.assertEqual(fx_import.physical_order([2, 3, 4], [12, 4, 1]),
                         [0, 1, 2])
        self.assertEqual(fx_import.physical_order(["s0", 3], [3, 1]), [0, 1])

    def test_parse_fusion(self):
        text = '''  func.func @f(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = norm.mixed_reduction full(%a : tensor<4x8xf32>) row_stages {
    } -> full(tensor<4x8xf32>) loc(fused["s", "d", "c"])
    %1 = linalg.generic {indexing_maps = []} ins(%0 : tensor<4x8xf32>) {
    ^bb0(%x: f32):
      linalg.yield %x : f32 loc("-":3:4)
    } -> tensor<4x8xf32> loc("left")
    return %1 : tensor<4x8xf32>
  }'''
        groups, left = fx_region.parse_fusion(text)
        self.assertEqual(groups, [["s", "d", "c"]])
        self.assertEqual(left, ["left"])


class Select(unittest.TestCase):
    def setUp(self):
        require_env("NORM_OPT")
        self.fuse = fx_region.fuse_with(os.environ["NORM_OPT"])

    def test_recorded_llama_one_region(self):
        regions = fx_region.select(load("llama_rmsnorm.json"), self.fuse)
        self.assertEqual(len(regions), 1)
        r = regions[0]
        self.assertEqual(r.outputs, ["sum_2", "convert_element_type_13"])
        self.assertIn("norm.mixed_reduction", r.fused)
        # The matmuls around it are not in it.
        self.assertNotIn("mm", r.compute)

    def test_row_only_group(self):
        regions = fx_region.select(load("olmo_layernorm.json"), self.fuse)
        self.assertEqual(len(regions), 1)
        off = fx_region.select(load("olmo_layernorm.json"),
                               fx_region.fuse_with(os.environ["NORM_OPT"],
                                                   row_only=False))
        self.assertEqual(off, [])

    def test_through_matmul_graph_is_safe(self):
        for r in fx_region.select(THROUGH_MM, self.fuse):
            self.assertFalse({"a", "c"} <= set(r.compute))


class Eval(unittest.TestCase):
    def test_ops(self):
        g = graph([
            arg("x", [2, 3]),
            node("t", "aten.permute.default", [ref("x"), [1, 0]], [3, 2]),
            node("m", "aten.mean.dim", [ref("t"), [1], True], [3, 1]),
            node("e", "aten.expand.default", [ref("m"), [3, 2]], [3, 2]),
            node("b", "prims.convert_element_type.default",
                 [ref("e"), {"dtype": "bfloat16"}], [3, 2], "bfloat16"),
            node("r", "aten.rsqrt.default", [ref("m")], [3, 1]),
        ], ["b", "r"])
        x = fx_eval.T([2, 3], [1.0, 2.0, 3.0, 5.0, 7.0, 11.0 + 1 / 3])
        b, r = fx_eval.evaluate(g, {"x": x})
        means = [3.0, 4.5, (3.0 + 11.0 + 1 / 3) / 2]
        self.assertEqual(r.data, [1 / math.sqrt(v) for v in means])
        self.assertEqual(b.shape, [3, 2])
        self.assertEqual(b.data[4], fx_eval._round_bf16(means[2]))
        self.assertNotEqual(b.data[4], means[2])  # rounded, as written

    def test_symbols(self):
        g = graph([arg("x", ["s0", 2]),
                   node("y", "aten.mul.Tensor", [ref("x"), 3], ["s0", 2])],
                  ["y"])
        (y,) = fx_eval.evaluate(g, {"x": fx_eval.T([1, 2], [1.0, -2.0])},
                                {"s0": 1})
        self.assertEqual(y.data, [3.0, -6.0])


class Remarks(unittest.TestCase):
    def test_unsupported_dynamic_n_odd_dtype(self):
        g = graph([
            arg("x", [4, "s1"]),
            node("m", "aten.mean.dim", [ref("x"), [1], True], [4, 1]),
            node("i", "aten.add.Tensor", [ref("x"), 1], [4, "s1"], "int64"),
            node("f8", "aten.mul.Tensor", [ref("x"), 2], [4, "s1"],
                 "float8_e4m3fn"),
            node("mm", "aten.mm.default", [ref("x"), ref("x")], [4, 4]),
        ], ["m", "i", "f8", "mm"])
        _, remarks = fx_import.import_graph(g)
        text = "\n".join(remarks)
        self.assertIn("m: boundary (aten.mean.dim over a dim of run-time "
                      "extent)", text)
        self.assertIn("i: boundary (aten.add.Tensor computes in i64)", text)
        self.assertIn("f8: not imported (aten.mul.Tensor: not one tensor of "
                      "a known dtype)", text)
        self.assertIn("mm: boundary (aten.mm.default is not imported)", text)


if __name__ == "__main__":
    unittest.main()
