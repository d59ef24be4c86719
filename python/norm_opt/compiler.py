#===- compiler.py - norm_opt.compile: run `norm-opt compile` --------------===#
"""compile(): `norm-opt compile` from Python. The executable comes from the
`norm_opt=` argument, else the one bundled with the package (the wheel's
self-contained build, `norm_opt/_native/bin`), else $NORM_OPT, else
`norm-opt` on PATH."""

import os
import pathlib
import shutil
import subprocess
import tempfile

from ._options import GPU_OPTIONS
from .errors import CompileError, NormOptNotFoundError
from .library import Library

# The GPU options that are not plan options: the target (compile_command's
# chip, features and opt_level keywords) and the per-op remark switch.
_NOT_PLAN_OPTIONS = ("chip", "features", "opt-level", "remarks")
# Python keyword -> `norm-opt compile` flag (docs/compile.md): every other
# GPU option. GPU_OPTIONS, the options of --convert-norm-to-gpu, is
# generated from Passes.td (scripts/gen_option_tables.py).
PLAN_OPTIONS = {option.keyword: "--" + option.argument
                for option in GPU_OPTIONS
                if option.argument not in _NOT_PLAN_OPTIONS}
# Not plan options: those, the tools (compile_command's keywords) and the
# output. test_compile checks that every other option of
# `norm-opt compile --help` is in PLAN_OPTIONS.
NON_PLAN_FLAGS = tuple("--" + argument for argument in _NOT_PLAN_OPTIONS) + (
    "--cc", "--ptxas", "--ptxas-verbose", "--runtime-library",
    "--host-module", "--keep-launcher", "--emit", "-o")
EMIT_KINDS = {"lib": ".so", "ptx": ".ptx", "cubin": ".cubin"}


# The wheel's self-contained build (scripts/dev.sh wheel): the executable,
# the runtime it links into libraries, the C headers and the CMake package.
NATIVE_DIR = pathlib.Path(__file__).resolve().parent / "_native"
BUNDLED_NORM_OPT = NATIVE_DIR / "bin" / "norm-opt"


def locate_norm_opt(norm_opt=None):
    """(path, origin) of the norm-opt to run: the argument, the bundled
    executable, $NORM_OPT, then PATH. origin says which one it was."""
    if norm_opt:
        return _checked(norm_opt, "the norm_opt argument"), "argument"
    if os.access(BUNDLED_NORM_OPT, os.X_OK):
        return str(BUNDLED_NORM_OPT), "bundled"
    env = os.environ.get("NORM_OPT")
    if env:
        return _checked(env, "$NORM_OPT"), "$NORM_OPT"
    path = shutil.which("norm-opt")
    if path and not _is_console_script(path):
        return os.path.abspath(path), "PATH"
    raise NormOptNotFoundError(
        "norm-opt not found: pass norm_opt=PATH, set $NORM_OPT, or put "
        "norm-opt on PATH (e.g. build/bin of a norm-opt build); the wheel "
        "(scripts/dev.sh wheel) bundles one")


def find_norm_opt(norm_opt=None):
    """The norm-opt executable to run (an absolute path)."""
    return locate_norm_opt(norm_opt)[0]


def _checked(candidate, where):
    path = shutil.which(str(candidate))
    if path:
        return os.path.abspath(path)
    raise NormOptNotFoundError(
        f"norm-opt not found: {candidate!s} (from {where}) is not an "
        "executable file")


def _is_console_script(path):
    """Whether `path` is the package's own `norm-opt` entry point (a Python
    script, which would only look for the executable again)."""
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


_versions = {}


def norm_opt_version(norm_opt=None):
    """`norm-opt --version` of the executable (first line: norm-opt's
    version, then LLVM's), memoised by path, size and modification time."""
    path = find_norm_opt(norm_opt)
    st = os.stat(path)
    key = (path, st.st_size, st.st_mtime_ns)
    if key not in _versions:
        done = subprocess.run([path, "--version"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            raise CompileError(f"{path} --version failed (exit "
                               f"{done.returncode}): {done.stdout.strip()}",
                               [path, "--version"], done.returncode,
                               done.stdout)
        _versions[key] = " ".join(done.stdout.split())
    return _versions[key]


def _flag_value(key, value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    raise TypeError(f"compile(): plan option {key} must be an int or a bool, "
                    f"got {type(value).__name__}")


def compile_command(source_path, output, *, chip="sm_90a", emit="lib",
                    norm_opt=None, features=None, opt_level=None,
                    ptxas=None, cc=None, runtime_library=None,
                    host_module=None, extra=(), **plan_options):
    """The argv of `norm-opt compile` for these arguments (validated).
    `extra`: further arguments appended as given, for what the keywords do
    not spell (--ptxas-verbose, --mlir-timing, --mlir-print-ir-after=...,
    plan options as flags: ["--threads-per-row=8"])."""
    if emit not in EMIT_KINDS:
        raise ValueError(f"compile(): emit must be one of "
                         f"{', '.join(EMIT_KINDS)}, got {emit!r}")
    if isinstance(extra, (str, bytes)) or not all(
            isinstance(a, str) for a in extra):
        raise TypeError("compile(): extra must be a list of strings (one "
                        f"argument each), got {extra!r}")
    argv = [find_norm_opt(norm_opt), "compile", str(source_path),
            f"--chip={chip}", f"--emit={emit}", "-o", str(output)]
    if features is not None:
        argv.append(f"--features={features}")
    if opt_level is not None:
        argv.append(f"--opt-level={int(opt_level)}")
    for key, value in (("ptxas", ptxas), ("cc", cc),
                       ("runtime-library", runtime_library),
                       ("host-module", host_module)):
        if value is not None:
            argv.append(f"--{key}={value}")
    for key in sorted(plan_options):
        if key not in PLAN_OPTIONS:
            raise TypeError(f"compile(): unknown plan option '{key}' (known: "
                            f"{', '.join(sorted(PLAN_OPTIONS))})")
        argv.append(f"{PLAN_OPTIONS[key]}="
                    f"{_flag_value(key, plan_options[key])}")
    return argv + list(extra)


def _looks_like_mlir(text):
    return "\n" in text or "func.func" in text or "{" in text


def compile(source, chip="sm_90a", emit="lib", output=None, *, norm_opt=None,
            timeout=None, **options):
    """Compiles `source` (a path to a .mlir file, or MLIR text) with
    `norm-opt compile` and returns a Library (emit="lib") or the path of the
    PTX / cubin. `output` defaults to a new temporary directory. Other
    keywords: features, opt_level, ptxas, cc, runtime_library, host_module
    (where to write the host module: functions that are not only their
    fused groups call one launcher per outlined group), extra (further
    arguments, as compile_command takes them) and the plan options
    (PLAN_OPTIONS: every kernel-shape option of norm-opt compile)."""
    workdir = None
    if isinstance(source, (str, os.PathLike)) and not (
            isinstance(source, str) and _looks_like_mlir(source)):
        source_path = pathlib.Path(source)
        if not source_path.is_file():
            raise FileNotFoundError(f"compile(): no source file {source_path}")
        stem = source_path.stem
    elif isinstance(source, str):
        workdir = pathlib.Path(tempfile.mkdtemp(prefix="norm_opt_"))
        source_path = workdir / "input.mlir"
        source_path.write_text(source)
        stem = "kernels"
    else:
        raise TypeError("compile(): source must be a path or MLIR text, got "
                        f"{type(source).__name__}")
    if output is None:
        if workdir is None:
            workdir = pathlib.Path(tempfile.mkdtemp(prefix="norm_opt_"))
        prefix = "lib" if emit == "lib" else ""
        output = workdir / f"{prefix}{stem}{EMIT_KINDS.get(emit, '')}"
    output = pathlib.Path(output)
    argv = compile_command(source_path, output, chip=chip, emit=emit,
                           norm_opt=norm_opt, **options)
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise CompileError(f"norm-opt compile timed out after {timeout} s: "
                           f"{' '.join(argv)}", argv) from None
    if done.returncode != 0:
        diagnostics = (done.stderr + done.stdout).strip()
        raise CompileError(
            f"norm-opt compile failed (exit {done.returncode}) for "
            f"{source_path}:\n{diagnostics}", argv, done.returncode,
            diagnostics)
    return Library(output) if emit == "lib" else output
