#===- _cli.py - the package's entry points: `norm-opt`, `python -m norm_opt` =#
"""`norm-opt` (the wheel's console script) runs the bundled executable with
the same arguments; `python3 -m norm_opt` prints what info() reports."""

import argparse
import json
import os
import sys

from . import __version__
from .compiler import BUNDLED_NORM_OPT, NATIVE_DIR, locate_norm_opt
from .compiler import norm_opt_version
from .errors import NormOptError


def info():
    """What this installation uses, as a dict: the package version, the
    norm-opt that compiles (path, where it was found: bundled, $NORM_OPT,
    PATH) and its `--version`, ptxas, the cache and the CMake package of
    the bundled build (None where there is none)."""
    from . import kernels
    report = {"version": __version__, "norm_opt": None,
              "norm_opt_origin": None, "norm_opt_version": None,
              "ptxas": _ptxas(), "cache": str(kernels.cache_dir()),
              "library_path": os.environ.get("NORM_OPT_LIBRARY_PATH") or None,
              "cmake_dir": None}
    cmake = NATIVE_DIR / "lib" / "cmake" / "NormOpt"
    if cmake.is_dir():
        report["cmake_dir"] = str(cmake)
    try:
        path, origin = locate_norm_opt()
        report.update(norm_opt=path, norm_opt_origin=origin,
                      norm_opt_version=norm_opt_version(path))
    except NormOptError as e:
        report["error"] = str(e)
    return report


def _ptxas():
    """ptxas as norm-opt compile looks for it (lib/Compile/Compile.cpp),
    but for the toolkit path the build saw."""
    import shutil
    for env in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(env)
        if root and os.access(os.path.join(root, "bin", "ptxas"), os.X_OK):
            return os.path.join(root, "bin", "ptxas")
    found = shutil.which("ptxas")
    if found:
        return found
    default = "/usr/local/cuda/bin/ptxas"
    return default if os.access(default, os.X_OK) else None


def _format(report):
    lines = [f"norm_opt {report['version']}"]
    if report["norm_opt"]:
        lines.append(f"norm-opt: {report['norm_opt']} "
                     f"({report['norm_opt_origin']})")
        lines.append(f"  {report['norm_opt_version']}")
    else:
        lines.append(f"norm-opt: none ({report.get('error')})")
    lines.append(f"ptxas: {report['ptxas'] or 'not found (install the CUDA '}"
                 + ("" if report["ptxas"] else "toolkit or set CUDA_HOME)"))
    lines.append(f"cache: {report['cache']}")
    if report["library_path"]:
        lines.append(f"NORM_OPT_LIBRARY_PATH: {report['library_path']}")
    if report["cmake_dir"]:
        lines.append(f"CMake package: {report['cmake_dir']}")
    return "\n".join(lines)


def main(argv=None):
    """python3 -m norm_opt [--version | --json | --cmake-dir]"""
    p = argparse.ArgumentParser(
        prog="python3 -m norm_opt",
        description="Where norm_opt's compiler, runtime and cache are.")
    p.add_argument("--version", action="store_true",
                   help="the version, the norm-opt in use and its origin")
    p.add_argument("--json", action="store_true", help="info() as JSON")
    p.add_argument("--cmake-dir", action="store_true",
                   help="the bundled CMake package (for -DNormOpt_DIR=)")
    args = p.parse_args(argv)
    report = info()
    if args.cmake_dir:
        if not report["cmake_dir"]:
            print("error: no bundled CMake package (not installed from the "
                  "wheel)", file=sys.stderr)
            return 1
        print(report["cmake_dir"])
        return 0
    print(json.dumps(report, indent=2) if args.json else _format(report))
    return 0 if report["norm_opt"] else 1


def run_norm_opt():
    """The `norm-opt` console script: the bundled executable, exec'd with
    the same arguments (no Python left in between)."""
    if not os.access(BUNDLED_NORM_OPT, os.X_OK):
        print(f"norm-opt: this norm_opt package has no bundled executable "
              f"({BUNDLED_NORM_OPT}); install the wheel, or run a norm-opt "
              "build directly", file=sys.stderr)
        return 127
    os.execv(str(BUNDLED_NORM_OPT), [str(BUNDLED_NORM_OPT)] + sys.argv[1:])
