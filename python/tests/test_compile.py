#===- test_compile.py - norm_opt.compile and finding norm-opt -------------===#
"""compile() runs `norm-opt compile` found by argument, $NORM_OPT or PATH,
returns a Library (or the PTX path), and reports norm-opt's diagnostics."""

import os
import re
import pathlib
import sys
import unittest
from unittest import mock

import norm_opt
from norm_opt import ArgumentError, CompileError, NormOptNotFoundError
from tests.support import FakeTensor, require_env, scratch

RMS = """
func.func @rms(%dy: tensor<?x128xf32>, %x: tensor<?x128xf32>,
               %rstd: tensor<?xf32>, %w: tensor<128xf32>)
    -> (tensor<?x128xf32>, tensor<128xf32>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<128xf32>)
      : tensor<?x128xf32>, tensor<?xf32> -> tensor<?x128xf32>, tensor<128xf32>
  return %dx, %dw : tensor<?x128xf32>, tensor<128xf32>
}
"""


# dy comes out of a matmul: the function is not only its group.
BLOCK = """
func.func @block(%g: tensor<?x32xf32>, %wm: tensor<32x128xf32>,
                 %x: tensor<?x128xf32>, %rstd: tensor<?xf32>,
                 %w: tensor<128xf32>) -> (tensor<?x128xf32>, tensor<128xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %g, %c0 : tensor<?x32xf32>
  %e = tensor.empty(%m) : tensor<?x128xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<?x128xf32>) -> tensor<?x128xf32>
  %dy = linalg.matmul ins(%g, %wm : tensor<?x32xf32>, tensor<32x128xf32>)
                      outs(%z : tensor<?x128xf32>) -> tensor<?x128xf32>
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<128xf32>)
      : tensor<?x128xf32>, tensor<?xf32> -> tensor<?x128xf32>, tensor<128xf32>
  return %dx, %dw : tensor<?x128xf32>, tensor<128xf32>
}
"""

# Two norms of different N in one function, every input an argument.
TWO = """
func.func @two(%dy: tensor<?x128xf32>, %x: tensor<?x128xf32>,
               %rstd: tensor<?xf32>, %w: tensor<128xf32>,
               %dq: tensor<?x64xf32>, %q: tensor<?x64xf32>,
               %qrstd: tensor<?xf32>, %qw: tensor<64xf32>)
    -> (tensor<?x128xf32>, tensor<128xf32>, tensor<?x64xf32>,
        tensor<64xf32>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<128xf32>)
      : tensor<?x128xf32>, tensor<?xf32> -> tensor<?x128xf32>, tensor<128xf32>
  %dqx, %dqw = norm.rms_norm_grad %dq, %q, %qrstd weight(%qw : tensor<64xf32>)
      : tensor<?x64xf32>, tensor<?xf32> -> tensor<?x64xf32>, tensor<64xf32>
  return %dx, %dw, %dqx, %dqw
      : tensor<?x128xf32>, tensor<128xf32>, tensor<?x64xf32>, tensor<64xf32>
}
"""


class FindNormOpt(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_env("NORM_OPT")
        cls.exe = os.path.abspath(os.environ["NORM_OPT"])

    def setUp(self):
        # The order below the bundled executable (a wheel install has one:
        # test_bundled_first); the source tree has none.
        patcher = mock.patch.object(norm_opt.compiler, "BUNDLED_NORM_OPT",
                                    pathlib.Path("/nonexistent/_native/norm-opt"))
        patcher.start()
        self.addCleanup(patcher.stop)

    def test_bundled_first(self):
        """The bundled executable wins over $NORM_OPT and PATH; only the
        argument wins over it."""
        fake = scratch("bundled") / "bin" / "norm-opt"
        fake.parent.mkdir()
        fake.write_text("#!/bin/sh\nexit 0\n")
        fake.chmod(0o755)
        with mock.patch.object(norm_opt.compiler, "BUNDLED_NORM_OPT", fake), \
                mock.patch.dict(os.environ, {"NORM_OPT": self.exe}):
            self.assertEqual(norm_opt.locate_norm_opt(),
                             (str(fake), "bundled"))
            self.assertEqual(norm_opt.locate_norm_opt(self.exe),
                             (self.exe, "argument"))
        with mock.patch.dict(os.environ, {"NORM_OPT": self.exe}):
            self.assertEqual(norm_opt.locate_norm_opt(),
                             (self.exe, "$NORM_OPT"))

    def test_installed_wheel_uses_its_own(self):
        """Run against an installed wheel (NORM_OPT_TEST_INSTALLED=1, as
        scripts/dev.sh wheel-test sets it): the package found its bundled
        norm-opt, a self-contained build."""
        if os.environ.get("NORM_OPT_TEST_INSTALLED") != "1":
            return  # the source tree: nothing bundled to find
        mock.patch.stopall()
        path, origin = norm_opt.locate_norm_opt()
        self.assertEqual(origin, "bundled")
        self.assertNotIn(str(pathlib.Path(__file__).parents[1]), path)
        info = norm_opt.info()
        self.assertEqual(info["norm_opt"], path)
        self.assertIn("self-contained", info["norm_opt_version"])
        self.assertTrue(pathlib.Path(info["cmake_dir"],
                                     "NormOptConfig.cmake").is_file())

    def test_argument_environment_path(self):
        with mock.patch.dict(os.environ, {"NORM_OPT": "/nonexistent/x"}):
            # The argument wins over the environment.
            self.assertEqual(norm_opt.find_norm_opt(self.exe), self.exe)
            with self.assertRaisesRegex(NormOptNotFoundError,
                                        r"/nonexistent/x \(from \$NORM_OPT\)"):
                norm_opt.find_norm_opt()
        with self.assertRaisesRegex(NormOptNotFoundError,
                                    "/no/norm-opt \\(from the norm_opt "
                                    "argument\\)"):
            norm_opt.find_norm_opt("/no/norm-opt")
        env = {"PATH": os.path.dirname(self.exe)}
        with mock.patch.dict(os.environ, env):
            os.environ.pop("NORM_OPT", None)
            self.assertEqual(norm_opt.find_norm_opt(), self.exe)
        with mock.patch.dict(os.environ, {"PATH": "/nonexistent"}):
            os.environ.pop("NORM_OPT", None)
            with self.assertRaisesRegex(NormOptNotFoundError,
                                        r"set \$NORM_OPT, or put norm-opt "
                                        "on PATH"):
                norm_opt.compile(RMS)

    def test_plan_options_are_norm_opt_compile_s(self):
        # Every kernel-shape option of `norm-opt compile --help` has a
        # keyword, and every keyword is an option (no copy that drifts).
        import subprocess
        from norm_opt.compiler import NON_PLAN_FLAGS, PLAN_OPTIONS
        out = subprocess.run([self.exe, "compile", "--help"],
                             capture_output=True, text=True).stdout
        flags = set(re.findall(r"^\s+(--[a-z][a-z-]*)", out, re.M))
        flags -= {"--help", "--help-list", "--version"}
        self.assertEqual(flags - set(NON_PLAN_FLAGS),
                         set(PLAN_OPTIONS.values()))

    def test_command(self):
        argv = norm_opt.compile_command("in.mlir", "out.so", chip="sm_80",
                                        norm_opt=self.exe, threads_per_row=8,
                                        single_launch=False, opt_level=2)
        self.assertEqual(argv, [self.exe, "compile", "in.mlir",
                                "--chip=sm_80", "--emit=lib", "-o", "out.so",
                                "--opt-level=2", "--single-launch=false",
                                "--threads-per-row=8"])
        with self.assertRaisesRegex(TypeError, "unknown plan option "
                                    "'threads' .*threads_per_row"):
            norm_opt.compile_command("a", "b", norm_opt=self.exe, threads=8)
        with self.assertRaisesRegex(TypeError, "rows_per_cta must be an int"):
            norm_opt.compile_command("a", "b", norm_opt=self.exe,
                                     rows_per_cta="4")
        with self.assertRaisesRegex(ValueError, "emit must be one of"):
            norm_opt.compile_command("a", "b", norm_opt=self.exe,
                                     emit="so")

    def test_command_extra(self):
        # Arguments the keywords do not spell, appended as given.
        argv = norm_opt.compile_command(
            "in.mlir", "out.ptx", emit="ptx", norm_opt=self.exe,
            extra=["--ptxas-verbose", "--threads-per-row=8"])
        self.assertEqual(argv, [self.exe, "compile", "in.mlir",
                                "--chip=sm_90a", "--emit=ptx", "-o",
                                "out.ptx", "--ptxas-verbose",
                                "--threads-per-row=8"])
        with self.assertRaisesRegex(TypeError, "extra must be a list of "
                                    "strings"):
            norm_opt.compile_command("a", "b", norm_opt=self.exe,
                                     extra="--mlir-timing")


class Compile(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_env("NORM_OPT")
        cls.dir = scratch("compile")

    def test_library_from_text(self):
        lib = norm_opt.compile(RMS, output=self.dir / "librms.so")
        self.assertIsInstance(lib, norm_opt.Library)
        self.assertEqual(lib.signature_path, self.dir / "librms.json")
        self.assertEqual(lib.rms.signature.params[-1], "stream")
        self.assertTrue((self.dir / "librms.h").is_file())

    def test_ptx_from_file_with_plan_options(self):
        src = self.dir / "rms.mlir"
        src.write_text(RMS)
        ptx = norm_opt.compile(src, chip="sm_80", emit="ptx",
                               threads_per_row=32)
        self.assertEqual(ptx.name, "rms.ptx")
        text = ptx.read_text()
        self.assertIn(".target sm_80", text)
        self.assertIn(".entry rms_0_main(", text)

    def test_graph_is_outlined(self):
        # A matmul produces dy: the group is outlined into @block_group0,
        # which the library launches; the host module calls it.
        src = BLOCK
        host = self.dir / "block.host.mlir"
        lib = norm_opt.compile(src, output=self.dir / "libblock.so",
                               host_module=host)
        self.assertEqual(list(lib.functions), ["block_group0"])
        sig = lib.block_group0.signature
        self.assertEqual([t.layout for t in sig.inputs],
                         ["rows_by_cols", "rows_by_cols", "rows", "cols"])
        text = host.read_text()
        self.assertIn("linalg.matmul", text)
        self.assertIn("call @block_group0(", text)
        self.assertIn("func.func private @block_group0(", text)

    def test_two_domains_in_one_launcher(self):
        lib = norm_opt.compile(TWO, output=self.dir / "libtwo.so")
        sig = lib.two.signature
        self.assertEqual(sig.domains, (("rows0", "cols0"), ("rows1", "cols1")))
        self.assertEqual([t.domain for t in sig.tensors if t.layout != "unused"],
                         [0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 1, 1])
        # Each domain's rows and cols come from its own tensors.
        T = FakeTensor
        args = [T((5, 128)), T((5, 128)), T((5,)), T((128,)),
                T((7, 64)), T((7, 64)), T((7,)), T((64,)),
                T((5, 128)), T((128,)), T((7, 64)), T((64,))]
        values = lib.two.arguments(*args, stream=3)
        self.assertEqual(values[12:], [5, 128, 7, 64,
                                       128, 128, 64, 64, 128, 64, 3])
        args[6] = T((5,))  # the second group's rstd with the first's rows
        with self.assertRaisesRegex(ArgumentError, "arg6 .* must have shape "
                                    r"\(7,\)"):
            lib.two.arguments(*args, stream=3)

    def test_diagnostics(self):
        with self.assertRaises(CompileError) as cm:
            norm_opt.compile(RMS.replace("norm.rms_norm_grad",
                                         "norm.rms_norm_gradd"))
        self.assertEqual(cm.exception.returncode, 1)
        self.assertIn("error:", cm.exception.diagnostics)
        self.assertIn("norm.rms_norm_gradd", str(cm.exception))

    def test_bad_plan_option_value(self):
        with self.assertRaisesRegex(CompileError, "threads-per-row"):
            norm_opt.compile(RMS, emit="ptx", threads_per_row=3)

    def test_missing_source(self):
        with self.assertRaisesRegex(FileNotFoundError, "no source file"):
            norm_opt.compile(pathlib.Path("/nonexistent/in.mlir"))

    def test_import_needs_no_torch(self):
        self.assertNotIn("torch", sys.modules)


if __name__ == "__main__":
    unittest.main()
