#!/usr/bin/env python3
#===- bench/vendor_liger.py - Liger-Kernel's norm ops for the GPU bench ----===#
"""Copies the part of Liger-Kernel that bench/bench.py runs into a folder
that is carried to the GPU machine (Liger is not installed there).

  python3 bench/vendor_liger.py --git-dir LIGER.git [--rev HEAD]
      [--out .carry/liger]

LIGER.git: a clone (or bare mirror) of linkedin/Liger-Kernel. Writes
OUT/src/liger_kernel/ with the layer_norm, rms_norm and group_norm ops
(bench/group_norm.py runs the last) and the two
utils modules they import, unchanged; ops/__init__.py is a shim (the
upstream one imports every Liger op and their backends). Also OUT/LICENSE
(BSD 2-clause) and OUT/REVISION. About 60 KB.
"""

import argparse
import os
import shutil
import subprocess
import sys

FILES = ("src/liger_kernel/__init__.py", "src/liger_kernel/utils.py",
         "src/liger_kernel/ops/utils.py", "src/liger_kernel/ops/layer_norm.py",
         "src/liger_kernel/ops/rms_norm.py",
         "src/liger_kernel/ops/group_norm.py", "LICENSE")
SHIM = ("# Shim (norm-opt bench/vendor_liger.py): the upstream ops/__init__.py"
        "\n# imports every Liger op and its backends; bench/bench.py needs only"
        "\n# layer_norm and rms_norm (and loads them by path).\n")


def git(git_dir, *args):
    return subprocess.run(["git", f"--git-dir={git_dir}", *args],
                          check=True, capture_output=True).stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--git-dir", required=True)
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--out", default=".carry/liger")
    args = ap.parse_args()
    rev = git(args.git_dir, "rev-parse", args.rev).decode().strip()
    date = git(args.git_dir, "log", "-1", "--format=%cd", rev).decode().strip()
    if os.path.isdir(args.out):
        shutil.rmtree(args.out)
    for f in FILES:
        path = os.path.join(args.out, f)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as out:
            out.write(git(args.git_dir, "show", f"{rev}:{f}"))
    with open(os.path.join(args.out, "src/liger_kernel/ops/__init__.py"),
              "w") as f:
        f.write(SHIM)
    with open(os.path.join(args.out, "REVISION"), "w") as f:
        f.write(f"linkedin/Liger-Kernel {rev} ({date})\n"
                "Files: src/liger_kernel/{__init__,utils}.py, "
                "ops/{utils,layer_norm,rms_norm,group_norm}.py unchanged; "
                "ops/__init__.py"
                " a shim. BSD 2-clause (LICENSE).\n")
    print(f"wrote {args.out} from {rev[:12]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
