#!/usr/bin/env python3
"""Compile time and PTX size, static against dynamic N (a benchmark, not a
test): what a JIT user such as torch.compile waits for each new shape
class.

For each kernel kind (RMSNorm with weight, LayerNorm with weight and bias)
and activation dtype, it writes the backward with N static (4096) and with
N dynamic, runs `norm-opt compile` to PTX and to a library, and reports
the wall time (best of --repeat runs), the kernels, the PTX size and where
the time goes (the slowest passes of --mlir-timing). The first run of each
is what a torch user sees on a cold first call (no compile cache); the
norm_opt kernel cache (python/norm_opt/kernels.py) makes later calls free.

  bench/compile_time.py [--norm-opt build/bin/norm-opt] [--repeat 3]
      [--kinds rms,layer] [--dtypes bf16,f32] [--out DIR]
Prints a table; the numbers go to docs/perf-notes.md.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

from norm_opt import compile_command

N_STATIC = 4096


def source(kind, dtype, n):
    """The backward of one norm over [rows, N] (N an int or '?')."""
    t = f"tensor<?x{n}x{dtype}>"
    w = f"tensor<{n}x{dtype}>"
    if kind == "rms":
        return f"""func.func @{kind}_{dtype}(%dy: {t}, %x: {t}, %rstd: tensor<?xf32>, %w: {w}) -> ({t}, {w}) {{
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : {w}) : {t}, tensor<?xf32> -> {t}, {w}
  return %dx, %dw : {t}, {w}
}}
"""
    return f"""func.func @{kind}_{dtype}(%dy: {t}, %x: {t}, %mean: tensor<?xf32>, %rstd: tensor<?xf32>, %w: {w}, %b: {w}) -> ({t}, {w}, {w}) {{
  %dx, %dw, %db = norm.layer_norm_grad %dy, %x, %mean, %rstd weight(%w : {w}) bias(%b : {w}) : {t}, tensor<?xf32> -> {t}, {w}, {w}
  return %dx, %dw, %db : {t}, {w}, {w}
}}
"""


def timed(argv, repeat):
    """(best seconds, first seconds, stderr of the last run)."""
    times, err = [], ""
    for _ in range(repeat):
        t0 = time.perf_counter()
        p = subprocess.run(argv, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        if p.returncode != 0:
            sys.exit(f"failed: {' '.join(argv)}\n{p.stderr}")
        err = p.stderr
    return min(times), times[0], err


def slowest_passes(timing, count=2):
    """The `count` slowest passes of an --mlir-timing report."""
    rows = []
    for line in timing.splitlines():
        m = re.match(r"\s*([\d.]+)\s+\(\s*[\d.]+%\)\s+(\S.*)$", line)
        if m and not m.group(2).startswith(("Total", "Rest", "'")):
            rows.append((float(m.group(1)), m.group(2).strip()))
    rows.sort(reverse=True)
    return ", ".join(f"{name} {sec:.1f}s" for sec, name in rows[:count])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--norm-opt", default="build/bin/norm-opt")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--kinds", default="rms,layer")
    ap.add_argument("--dtypes", default="bf16,f32")
    ap.add_argument("--out")
    args = ap.parse_args()
    work = args.out or tempfile.mkdtemp(prefix="norm-compile-time-")
    os.makedirs(work, exist_ok=True)
    rows = []
    for kind in args.kinds.split(","):
        for dtype in args.dtypes.split(","):
            per_n = {}
            # "no tiers": the run-time N library that norm_opt.kernels.
            # Specializing compiles first (tier-min-cols=0), each N's
            # static library following on its first call.
            for n, label, extra in ((N_STATIC, "static", []),
                                    ("?", "dynamic", []),
                                    ("?", "dynamic, no tiers",
                                     ["--tier-min-cols=0"])):
                tag = label.replace(", ", "_").replace(" ", "_")
                src = os.path.join(work, f"{kind}_{dtype}_{tag}.mlir")
                with open(src, "w") as f:
                    f.write(source(kind, dtype, n))
                ptx = src.replace(".mlir", ".ptx")
                lib = os.path.join(work, f"lib{kind}_{dtype}_{tag}.so")
                best_ptx, first_ptx, err = timed(
                    compile_command(src, ptx, emit="ptx",
                                    norm_opt=args.norm_opt,
                                    extra=["--mlir-timing"] + extra),
                    args.repeat)
                best_lib, first_lib, _ = timed(
                    compile_command(src, lib, emit="lib",
                                    norm_opt=args.norm_opt, extra=extra),
                    args.repeat)
                text = open(ptx).read()
                kernels = len(re.findall(r"^\.visible \.entry ", text, re.M))
                per_n[label] = (best_ptx, best_lib, first_lib)
                rows.append((f"{kind} {dtype}", label, kernels,
                             len(text) / 1e3, best_ptx, best_lib, first_lib,
                             slowest_passes(err)))
            s = per_n["static"]
            for label in ("dynamic", "dynamic, no tiers"):
                d = per_n[label]
                rows.append((f"{kind} {dtype}", f"{label} / static", "", "",
                             d[0] / s[0], d[1] / s[1], d[2] / s[2], ""))
    print(f"{'kernel':<11} {'N':<27} {'kernels':>7} {'PTX KB':>7} "
          f"{'to PTX s':>9} {'to lib s':>9} {'cold lib s':>10}  slowest passes")
    for name, label, kernels, kb, p, l, c, passes in rows:
        if label.endswith(" / static"):
            print(f"{name:<11} {label:<27} {'':>7} {'':>7} {p:>8.1f}x "
                  f"{l:>8.1f}x {c:>9.1f}x")
        else:
            print(f"{name:<11} {label:<27} {kernels:>7} {kb:>7.0f} {p:>9.2f} "
                  f"{l:>9.2f} {c:>10.2f}  {passes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
