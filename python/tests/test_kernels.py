#===- test_kernels.py - Backward kernels: sources, lookup, disk cache -----===#
"""norm_opt.kernels finds a library ahead of time ($NORM_OPT_LIBRARY_PATH),
in the cache, or compiles it into the cache; the key follows the source, the
options and the chip; with neither a library nor norm-opt the error says
what was looked for and where."""

import os
import pathlib
import subprocess
import sys
import unittest
from unittest import mock

from norm_opt import NormOptNotFoundError, compiler, kernels
from tests.support import require_env, scratch


class Sources(unittest.TestCase):
    def test_key(self):
        a = kernels.entry_name("rms", 512, "bf16", None, "sm_90a", {})
        self.assertTrue(a.startswith("rms-512-bf16-bf16-sm_90a-"))
        self.assertEqual(a, kernels.entry_name("rms", 512, "torch.bfloat16",
                                               "bfloat16", "sm_90a", {}))
        others = {
            kernels.entry_name("rms", 512, "bf16", None, "sm_80", {}),
            kernels.entry_name("rms", 512, "bf16", "f32", "sm_90a", {}),
            kernels.entry_name("rms", 1024, "bf16", None, "sm_90a", {}),
            kernels.entry_name("layer", 512, "bf16", None, "sm_90a", {}),
            kernels.entry_name("rms", 512, "bf16", None, "sm_90a",
                               {"threads_per_row": 8}),
        }
        self.assertEqual(len(others), 5)
        self.assertNotIn(a, others)

    def test_source(self):
        text = kernels.source("layer", 768, "bf16", "f32")
        self.assertIn("func.func @layer_norm_backward(", text)
        self.assertIn("%x: tensor<?x768xbf16>", text)
        self.assertIn("weight(%w : tensor<768xf32>)", text)

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ValueError, "unsupported dtype int8"):
            kernels.source("rms", 64, "int8")
        with self.assertRaisesRegex(ValueError, "kind must be one of"):
            kernels.source("batch", 64, "f32")
        with self.assertRaisesRegex(ValueError, "hidden size must be >= 1"):
            kernels.source("rms", 0, "f32")


    def test_group_norm_source(self):
        text = kernels.group_norm_source(320, (64, 64), 32, "bf16", "f32")
        self.assertIn("func.func @group_norm_backward(", text)
        self.assertIn("%x: tensor<?x320x64x64xbf16>", text)
        self.assertIn("{groups = 32 : i64}", text)
        last = kernels.group_norm_source(6, (7,), 3, "f32",
                                         channels_last=True)
        self.assertIn("tensor<?x7x6xf32>", last)
        self.assertIn("channels_last", last)
        with self.assertRaisesRegex(ValueError, "multiple of groups"):
            kernels.group_norm_source(10, (4, 4), 4, "f32")
        with self.assertRaisesRegex(ValueError, "every dim >= 1"):
            kernels.group_norm_source(8, (), 4, "f32")


class Lookup(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_env("NORM_OPT", "NORM_OPT_LIBRARY_PATH")

    def test_group_norm_compiled_on_first_use(self):
        """GroupNorm's source compiles (decomposed, fused into one slab
        group): a launcher with the slab layouts and N as its batch."""
        cache = scratch("gn-cache")
        with mock.patch.dict(os.environ, {"NORM_OPT_CACHE_DIR": str(cache)}):
            lib = kernels.group_norm_library(8, (3, 5), 4, "bf16", "f32",
                                             chip="sm_90a")
        sig = lib[kernels.GROUP_NORM_FUNCTION].signature
        self.assertEqual([t.layout for t in sig.tensors],
                         ["rows_by_cols", "rows_by_cols", "slab_rows",
                          "slab_rows", "slab_cols", "unused",
                          "rows_by_cols", "slab_cols", "slab_cols"])
        self.assertEqual(sig.domains, (("rows", "cols", "batch"),))
        self.assertEqual(sig.batch_rank(0), 1)

    def test_ahead_of_time_library_needs_no_norm_opt(self):
        with mock.patch.dict(os.environ, {"NORM_OPT": "/nonexistent/norm-opt",
                                          "NORM_OPT_CACHE_DIR":
                                          str(scratch("empty-cache"))}):
            lib = kernels.library("layer", 256, "bf16", chip="sm_90a")
        self.assertEqual(str(lib.path.parent.parent),
                         os.environ["NORM_OPT_LIBRARY_PATH"])

    def test_missing_everywhere(self):
        cache = scratch("no-cache")
        with mock.patch.dict(os.environ, {"NORM_OPT": "/nonexistent/norm-opt",
                                          "NORM_OPT_CACHE_DIR": str(cache)}), \
                mock.patch.object(compiler, "BUNDLED_NORM_OPT",
                                  pathlib.Path("/nonexistent/norm-opt")):
            with self.assertRaisesRegex(
                    NormOptNotFoundError,
                    r"no compiled rms_norm_backward for N=320, dtype=f16, "
                    r"weight=f16, chip=sm_90a \(looked for "
                    r"rms-320-f16-f16-sm_90a-\w+/ in .*" + str(cache) +
                    r"\), and it cannot be compiled now: norm-opt not "
                    r"found: /nonexistent/norm-opt \(from \$NORM_OPT\)"):
                kernels.library("rms", 320, "f16", chip="sm_90a")

    def test_compiled_on_first_use_then_cached(self):
        cache = scratch("cache")
        with mock.patch.dict(os.environ, {"NORM_OPT_CACHE_DIR": str(cache)}):
            lib = kernels.library("rms", 64, "f32", chip="sm_90a")
            # One folder per compiler: its version and size.
            self.assertEqual(lib.path.parent.parent,
                             cache / kernels.compiler_tag())
            self.assertIn(kernels.compiler_tag(),
                          {p.name for p in cache.iterdir()})
            os.environ["NORM_OPT"] = "/nonexistent/norm-opt"
            again = kernels.library("rms", 64, "f32", chip="sm_90a")
        self.assertEqual(again.path, lib.path)
        # No scratch left behind: the entry and its lock file.
        entry = lib.path.parent.name
        self.assertEqual(sorted(p.name for p in lib.path.parent.parent.iterdir()),
                         sorted([entry, f".{entry}.lock"]))

    def test_concurrent_first_calls_compile_once(self):
        """Processes racing for one new library (DDP ranks): each gets the
        same complete library, compiled once."""
        cache = scratch("race")
        # norm-opt behind a script that logs each compile it runs.
        log = cache / "compiles.log"
        wrapper = cache / "norm-opt"
        wrapper.write_text(f"#!/bin/sh\ncase \"$1\" in compile) echo x >> "
                           f"'{log}';; esac\nexec '{kernels.find_norm_opt()}' "
                           "\"$@\"\n")
        wrapper.chmod(0o755)
        code = ("import sys; from norm_opt import kernels; "
                "print(kernels.library('rms', 40, 'f32', chip='sm_90a', "
                f"norm_opt='{wrapper}').path)")
        env = dict(os.environ, NORM_OPT_CACHE_DIR=str(cache / "cache"),
                   PYTHONPATH=os.pathsep.join(sys.path))
        procs = [subprocess.Popen([sys.executable, "-c", code], env=env,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
                 for _ in range(4)]
        outs = [p.communicate(timeout=300) for p in procs]
        for p, (out, err) in zip(procs, outs):
            self.assertEqual(p.returncode, 0, err)
        paths = {out.strip() for out, _ in outs}
        self.assertEqual(len(paths), 1, paths)
        lib = pathlib.Path(paths.pop())
        self.assertTrue(lib.is_file() and lib.with_suffix(".json").is_file())
        self.assertEqual(log.read_text().split(), ["x"])  # compiled once
        # Nothing but the entry and its lock: no scratch, no second copy.
        self.assertEqual(len([p for p in lib.parent.parent.iterdir()
                              if not p.name.endswith(".lock")]), 1)


if __name__ == "__main__":
    unittest.main()


class Specializing(unittest.TestCase):
    """A run-time N library without tiers now, the static N of each N seen
    on its first call (kernels.Specializing)."""

    @classmethod
    def setUpClass(cls):
        require_env("NORM_OPT")

    def cache(self, name):
        return mock.patch.dict(os.environ,
                               {"NORM_OPT_CACHE_DIR": str(scratch(name))})

    def test_generic_then_static_n(self):
        with self.cache("specialize-sync"):
            lib = kernels.Specializing("rms", "f32", chip="sm_90a",
                                       background=False)
            self.assertTrue(lib.generic_library.path.parent.name.startswith(
                "rms-dyn-f32-f32-sm_90a-"))
            # No resident tiers (kernels `<fn>_0_tier<C>_main...` in the
            # embedded cubin): the looped kernels take every N.
            code = lib.generic_library.path.read_bytes()
            self.assertIn(b"rms_norm_backward_0_main", code)
            self.assertNotIn(b"_tier", code)
            self.assertFalse(lib.specialized(96))
            fn = lib.function(96)
            self.assertTrue(lib.specialized(96))
            self.assertEqual(fn.library.path.parent.name,
                             kernels.entry_name("rms", 96, "f32", None,
                                                "sm_90a", {}))
            self.assertIs(lib.function(96), fn)
            self.assertIn("tensor<?x?xf32>",
                          kernels.source("rms", None, "f32"))

    def test_background(self):
        with self.cache("specialize-background"):
            lib = kernels.Specializing("layer", "bf16", chip="sm_90a")
            generic = lib.function(128)
            # The first call does not wait for the compile.
            self.assertIn(generic.library.path,
                          (lib.generic_library.path,
                           lib.function(128).library.path))
            lib.wait()
            self.assertTrue(lib.specialized(128))
            self.assertNotEqual(lib.function(128).library.path,
                                lib.generic_library.path)
            self.assertFalse(lib.errors)

    def test_bad_hidden_size(self):
        with self.cache("specialize-bad"):
            lib = kernels.Specializing("rms", "f32", chip="sm_90a")
            for bad in (0, -4):
                with self.assertRaisesRegex(ValueError,
                                            "hidden size must be >= 1"):
                    lib.function(bad)
            with self.assertRaises(ValueError):
                lib.function("wide")
            lib.wait()
            self.assertFalse(lib.errors)
        with self.assertRaisesRegex(ValueError, "kind must be one of"):
            kernels.Specializing("batch", "f32")
        with self.assertRaisesRegex(ValueError, "unsupported dtype int8"):
            kernels.Specializing("rms", "int8")

    def test_failed_specialisation_keeps_the_generic_kernel(self):
        with self.cache("specialize-fails"):
            lib = kernels.Specializing("rms", "f32", chip="sm_90a",
                                       background=False)
            error = NormOptNotFoundError("norm-opt not found: gone")
            with mock.patch.object(kernels, "library", side_effect=error):
                fn = lib.function(64)
            self.assertEqual(fn.library.path, lib.generic_library.path)
            self.assertIs(lib.errors[64], error)
            self.assertFalse(lib.specialized(64))
            # Not retried on every call.
            self.assertEqual(lib.function(64).library.path,
                             lib.generic_library.path)
