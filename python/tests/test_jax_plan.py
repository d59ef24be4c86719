#===- test_jax_plan.py - norm_opt.jax's FFI calls, without JAX ------------===#
"""What norm_opt.jax hands to XLA (norm_opt.jax_plan), checked without JAX
or a GPU (CI has neither): the arguments' checks and their messages, the
FFI call's operands, results (the workspace last, 16-byte multiples) and
attributes, the registration arguments, the handlers' names beside their C
symbols in _jax_ffi.cc, the build command and its cache key, and the
sharded-jit path's Shardy rule, row split and switch. The calls
themselves run in test/gpu/jax_check.py; the C++ side of a call
(_jax_launch.h) in unittests/JaxLaunchTest.cpp."""

import re
import unittest

from norm_opt import jax_plan as plan
from norm_opt.errors import ArgumentError


class Arguments(unittest.TestCase):
    def test_accepts(self):
        self.assertEqual(plan.check("layer", (8, 128, 1024), "bfloat16",
                                    (1024,), "float32", (1024,), "float32"),
                         (1024, "bf16", "f32"))
        self.assertEqual(plan.check("rms", (5,), "float16", (5,), "float16"),
                         (5, "f16", "f16"))

    def test_rejects(self):
        bad = [
            (("group", (4, 8), "float32", (8,), "float32"), "kind must be"),
            (("rms", (), "float32", (1,), "float32"), "at least one dim"),
            (("rms", (4, 0), "float32", (0,), "float32"), "is empty"),
            (("rms", (4, 8), "float32", (4,), "float32"),
             r"weight must have shape \(8,\)"),
            (("layer", (4, 8), "float32", (8,), "float32", (7,), "float32"),
             r"bias must have shape \(8,\)"),
            (("rms", (4, 8), "float64", (8,), "float32"),
             "unsupported dtype float64"),
            (("rms", (4, 8), "float32", (8,), "int32"),
             "unsupported dtype int32"),
        ]
        for args, message in bad:
            with self.subTest(args=args):
                with self.assertRaisesRegex(ArgumentError, message):
                    plan.check(*args)

    def test_dtype_names(self):
        # jnp.bfloat16 is a class named so; np.dtype has .name
        self.assertEqual(plan.dtype_name(type("bfloat16", (), {})), "bf16")
        self.assertEqual(plan.dtype_name("float32"), "f32")


class Call(unittest.TestCase):
    def test_operands(self):
        self.assertEqual(plan.operand_names("layer"),
                         ("dy", "x", "mean", "rstd", "w"))
        self.assertEqual(plan.operand_names("rms"), ("dy", "x", "rstd", "w"))
        self.assertEqual(plan.stats_shape((8, 128, 1024)), (8, 128))

    def test_results(self):
        self.assertEqual(
            plan.results("layer", (8, 128, 1024), "bf16", (1024,), "f32",
                         1000),
            [((8, 128, 1024), "bf16"), ((1024,), "f32"), ((1024,), "f32"),
             ((1008,), "uint8")])
        # No workspace still passes a 16-byte buffer (an address to set).
        self.assertEqual(plan.results("rms", (4, 8), "f32", (8,), "f32", 0),
                         [((4, 8), "f32"), ((8,), "f32"), ((16,), "uint8")])
        with self.assertRaises(ArgumentError):
            plan.results("rms", (4, 8), "f32", (8,), "f32", -1)

    def test_attributes(self):
        self.assertEqual(plan.attributes("rms-8-f32-f32-sm_90a-abc", 3),
                         [("kernel", "string", "rms-8-f32-f32-sm_90a-abc"),
                          ("x_rank", "int64", 3)])
        with self.assertRaises(ArgumentError):
            plan.attributes("", 2)
        with self.assertRaises(ArgumentError):
            plan.attributes("k", 0)

    def test_register_arguments(self):
        self.assertEqual(plan.register_arguments("k", "rms", 64, "bf16",
                                                 "f32"),
                         (b"k", 1, 64, 2, 4))
        self.assertEqual(plan.register_arguments("k", "layer", 8, "f16",
                                                 "f16")[1:], (0, 8, 2, 2))


class Partitioning(unittest.TestCase):
    """The sharded-jit path (custom_partitioning): its Shardy rule and how
    it splits the rows, from PartitionSpec-like tuples."""

    def test_rule(self):
        self.assertEqual(
            plan.sharding_rule("layer", 3),
            ("r0 r1 n, r0 r1 n, r0 r1, r0 r1, n -> r0 r1 n, n, n", ("n",)))
        self.assertEqual(plan.sharding_rule("rms", 2),
                         ("r0 n, r0 n, r0, n -> r0 n, n", ("n",)))
        self.assertEqual(plan.sharding_rule("rms", 4)[0],
                         "r0 r1 r2 n, r0 r1 r2 n, r0 r1 r2, n "
                         "-> r0 r1 r2 n, n")
        for bad in (("rms", 1), ("group", 3)):
            with self.subTest(bad=bad):
                with self.assertRaises(ArgumentError):
                    plan.sharding_rule(*bad)

    def test_rule_matches_the_call(self):
        # One mapping per operand and per result less the workspace, each
        # of its value's rank; factor names as JAX's parser takes them.
        for kind in plan.KINDS:
            for rank in (2, 3, 5):
                rule, replicated = plan.sharding_rule(kind, rank)
                lhs, rhs = rule.split(" -> ")
                ins = [m.split() for m in lhs.split(", ")]
                outs = [m.split() for m in rhs.split(", ")]
                ranks = {"dy": rank, "x": rank, "mean": rank - 1,
                         "rstd": rank - 1, "w": 1}
                self.assertEqual([len(m) for m in ins],
                                 [ranks[o] for o in plan.operand_names(kind)])
                results = plan.results(kind, (2,) * rank, "f32", (2,),
                                       "f32", 0)[:-1]
                self.assertEqual([len(m) for m in outs],
                                 [len(shape) for shape, _ in results])
                for factor in sum(ins + outs, []):
                    self.assertRegex(factor, r"^[A-Za-z][A-Za-z0-9_]*$")
                self.assertEqual(replicated, ("n",))
                # the hidden dim is last everywhere; the rows never reach
                # the weight's results
                self.assertTrue(all(m[-1] == "n" for m in ins + outs
                                    if len(m) == rank))
                self.assertEqual(outs[1:], [["n"]] * (len(outs) - 1))

    def test_rows(self):
        mesh = {"data": 2}
        cases = [
            # (x shape, specs in order x, dy, stats...), (rows, sum axes)
            (((4096, 1024), [("data", None)]), (("data",), ("data",))),
            (((8, 1024, 1024), [("data", None)]),
             (("data", None), ("data",))),
            (((8, 1024, 1024), [("data", None, None)]),
             (("data", None), ("data",))),
            (((8, 1024, 1024), [(None, "data", None)]),
             ((None, "data"), ("data",))),
            # a spec shorter than the rank; a 1-tuple entry
            (((8, 1024, 1024), [(("data",),)]), (("data", None), ("data",))),
            # nothing sharded: everything replicated, no sum
            (((8, 1024), [(), (None, None)]), ((None,), ())),
            # the hidden dim sharded: asked replicated, rows from dy
            (((8, 16, 64), [(None, None, "data"), ("data",)]),
             (("data", None), ("data",))),
            # x replicated, the statistics sharded (all their dims rows)
            (((8, 16, 64), [(), (), (None, "data")]),
             ((None, "data"), ("data",))),
            # a dim the axis does not divide stays whole (padding rows
            # would add to dW)
            (((7, 64), [("data", None)]), ((None,), ())),
            # an axis the mesh does not have; P.UNCONSTRAINED-like entries
            (((8, 64), [("model", None)]), ((None,), ())),
            (((8, 64), [(object(), None)]), ((None,), ())),
        ]
        for (shape, specs), want in cases:
            with self.subTest(shape=shape, specs=specs):
                self.assertEqual(plan.partition_rows(shape, specs, mesh),
                                 want)

    def test_rows_several_axes(self):
        mesh = {"data": 2, "fsdp": 4, "model": 2}
        self.assertEqual(
            plan.partition_rows((16, 64, 128), [(("data", "fsdp"), None)],
                                mesh),
            ((("data", "fsdp"), None), ("data", "fsdp")))
        # 4 rows: ("data", "fsdp") is 8 devices, its prefix "data" divides
        self.assertEqual(
            plan.partition_rows((4, 128), [(("data", "fsdp"),)], mesh),
            (("data",), ("data",)))
        # two row dims on two axes: dW / dB summed over both, in order
        self.assertEqual(
            plan.partition_rows((8, 64, 128), [("fsdp", "data", "model")],
                                mesh),
            (("fsdp", "data"), ("fsdp", "data")))
        # an axis named twice (no valid spec does) shards one dim only
        self.assertEqual(
            plan.partition_rows((8, 8, 128), [("data", "data", None)], mesh),
            (("data", None), ("data",)))

    def test_switch(self):
        self.assertTrue(plan.partition_enabled({}))
        for on in ("1", "yes", " 1 "):
            self.assertTrue(plan.partition_enabled(
                {plan.PARTITION_ENV: on}), on)
        for off in ("0", "off", "False", "no", " 0"):
            self.assertFalse(plan.partition_enabled(
                {plan.PARTITION_ENV: off}), off)
        self.assertEqual(plan.PARTITION_ENV, "NORM_OPT_JAX_PARTITION")


class Handlers(unittest.TestCase):
    def test_symbols_and_attributes_match_the_source(self):
        text = (plan.source_dir() / "_jax_ffi.cc").read_text()
        for kind in plan.KINDS:
            self.assertRegex(text, r"XLA_FFI_DEFINE_HANDLER_SYMBOL\(\s*"
                             + plan.SYMBOLS[kind] + r",")
        # Every attribute plan.attributes names is bound, with its type.
        for name, typ, _ in plan.attributes("k", 1):
            cpp = {"string": "std::string_view", "int64": "int64_t"}[typ]
            self.assertEqual(len(re.findall(
                rf'\.Attr<{re.escape(cpp)}>\("{name}"\)', text)), 2, name)
        # One .Arg per operand and one .Ret per result, in each binding.
        bindings = text.split("XLA_FFI_DEFINE_HANDLER_SYMBOL(")[1:]
        for kind, binding in zip(plan.KINDS, bindings):
            self.assertEqual(binding.count(".Arg<"),
                             len(plan.operand_names(kind)), kind)
            self.assertEqual(binding.count(".Ret<"),
                             len(plan.results(kind, (2, 4), "f32", (4,),
                                              "f32", 0)), kind)
            self.assertIn("kCmdBufferCompatible", binding)

    def test_build(self):
        cmd = plan.build_command("c++", "/inc", "/tmp/out.so")
        self.assertEqual(cmd[0], "c++")
        for flag in ("-shared", "-fPIC", "-std=c++17", "-I/inc"):
            self.assertIn(flag, cmd)
        self.assertTrue(cmd[cmd.index("-o") - 1].endswith("_jax_ffi.cc"))
        a = plan.build_key("/inc", "0.11.2", "c++")
        self.assertEqual(a, plan.build_key("/inc", "0.11.2", "c++"))
        self.assertNotEqual(a, plan.build_key("/inc", "0.11.3", "c++"))
        self.assertNotEqual(a, plan.build_key("/other", "0.11.2", "c++"))


if __name__ == "__main__":
    unittest.main()
