# -*- Python -*-
# lit configuration for the norm-opt tests.

import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "NORM_OPT"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "README.md", "lit.cfg.py", "lit.site.cfg.py", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.norm_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%mlir_lib_dir", config.mlir_lib_dir))

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

# The ASan + UBSan build (build-asan/, docs/reliability.md): feature
# `sanitizer`. What runs the instrumented code inside an uninstrumented
# program (Python, a library linked with cc) says `UNSUPPORTED: sanitizer`.
sanitized = bool(config.norm_sanitizer)
if sanitized:
    config.available_features.add("sanitizer")

# Upstream mlir-opt with norm-opt loaded as a plugin (libNormOptPlugin.so);
# the tests that run it do so as a second RUN line beside norm-opt's,
# `%if mlir-opt-plugin %{ %mlir_opt_plugin ... %}`. An uninstrumented
# mlir-opt cannot load the instrumented plugin, so the sanitizer build has
# neither the feature nor the substitution (a plugin line outside %if
# fails there: `%mlir_opt_plugin: command not found`); the plain build
# runs every plugin line.
norm_plugin = os.path.join(config.norm_obj_root, "lib", "libNormOptPlugin.so")
config.substitutions.append(("%norm_plugin", norm_plugin))
if not sanitized:
    config.available_features.add("mlir-opt-plugin")
    config.substitutions.append(
        ("%mlir_opt_plugin",
         f"mlir-opt --load-dialect-plugin={norm_plugin} "
         f"--load-pass-plugin={norm_plugin}"))

tool_dirs = [config.norm_tools_dir, config.llvm_tools_dir]
tools = ["norm-opt", "mlir-opt", "mlir-runner", "norm-capi-test"]
llvm_config.add_tool_substitutions(tools, tool_dirs)
# The runtime libraries (printMemref*) for an mlir-runner RUN line,
# -shared-libs=%mlir_runner_utils: in %mlir_lib_dir, or where that is empty
# in ../lib next to mlir-runner (as norm_numerics.runner_libs finds them).
runner_lib_dir = config.mlir_lib_dir or os.path.join(
    os.path.dirname(config.llvm_tools_dir), "lib")
config.substitutions.append(
    ("%mlir_runner_utils",
     ",".join(os.path.join(runner_lib_dir, n) for n in
              ("libmlir_runner_utils.so", "libmlir_c_runner_utils.so"))))
# norm-opt's path where it is a value, not a command (NORM_OPT=...).
config.substitutions.append(
    ("%norm_opt_path", os.path.join(config.norm_tools_dir, "norm-opt")))

# The fake libcuda of the runtime's unit tests (unittests/RuntimeFakeCuda):
# generated libraries run on it without a GPU.
config.substitutions.append(
    ("%fakecuda", os.path.join(config.norm_lib_dir, "libnormrt_fakecuda.so")))

# The shared runtime: with the entry points upstream gpu-to-llvm calls, what
# mlir-runner loads to run a lowered GPU program (--shared-libs).
config.substitutions.append(
    ("%norm_runtime", os.path.join(config.norm_lib_dir, "libnorm_runtime.so")))

# The source tree and LLVM's llvm-tblgen: the option tables generated from
# Passes.td are checked against it (Docs/option-tables.test).
config.substitutions.append(
    ("%norm_src_root", os.path.dirname(config.test_source_root)))
config.substitutions.append(
    ("%llvm_tblgen", os.path.join(config.llvm_tools_dir, "llvm-tblgen")))

# The one Python path of the tests and of bench/ (README.md,
# PYTHONPATH=python:test/lib-python): the norm_opt package (its
# norm_opt.reference is the float64 reference every numeric check shares)
# and the CPU numerics' helpers.
llvm_config.with_environment(
    "PYTHONPATH",
    [os.path.join(os.path.dirname(config.test_source_root), "python"),
     os.path.join(config.test_source_root, "lib-python")],
    append_path=True)

# ptxas from the CUDA toolkit CMake found (PTX checks; no GPU needed).
config.substitutions.append(
    ("%ptxas", os.path.join(config.cuda_bin_dir, "ptxas")))
