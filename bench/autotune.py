#!/usr/bin/env python3
#===- bench/autotune.py - Plan variants per (kind, dtype, N), best one -----===#
"""Compiles plan variants of our kernels and reports the best per shape.

The plan options of `norm-opt compile` (docs/compile.md, docs/gpu.md) are
varied one at a time from the heuristic's choice; each variant is a set of
libraries like norm_opt.kernel_set's. bench/bench.py times them all
beside the default in one run (--variants-file; ours only, same protocol),
and `summarize` picks the fastest variant per row whose errors are no worse
than twice the default's. It shows where the heuristic leaves time; the
defaults stay a rule that docs/gpu.md explains, not this table.

  # here: one folder per variant under OUT (default .carry/tune)
  python3 bench/autotune.py build [--norm-opt build/bin/norm-opt]
      [--out .carry/tune] [--kinds layer,rms] [--configs bf16,f16,f32]
      [--ns 1024,4096,8192] [--variants tpr128,stages0,...|all] [-j 2]
  # prints the GPU command (carry the OUT folder):
  python3 bench/autotune.py command [--out .carry/tune]
  # on the GPU (the command above) or here, from the bench.json:
  python3 bench/autotune.py summarize OUT/bench.json

Variants (label: flags): see VARIANTS; `--variants all` builds them all
(21, each a library per kind and dtype: pick a few N).
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys

import report
from norm_opt import compile_command
from norm_opt import kernel_set as bk

# One option changed from the heuristic's plan each.
VARIANTS = {
    "tpr8": ["--threads-per-row=8"],
    "tpr16": ["--threads-per-row=16"],
    "tpr32": ["--threads-per-row=32"],
    "tpr64": ["--threads-per-row=64"],
    "tpr128": ["--threads-per-row=128"],
    "tpr256": ["--threads-per-row=256"],
    "tpr512": ["--threads-per-row=512"],
    "stages0": ["--async-stages=0"],
    "stages2": ["--async-stages=2"],
    "stages4": ["--async-stages=4"],
    "stages6": ["--async-stages=6"],
    "bulk2": ["--bulk-stages=2"],
    "bulk4": ["--bulk-stages=4"],
    "noprefetch": ["--prefetch=false"],
    "twolaunch": ["--single-launch=false"],
    "ppsm1": ["--programs-per-sm=1"],
    "ppsm2": ["--programs-per-sm=2"],
    "vec8": ["--vector-bytes=8"],
    "resident64": ["--max-resident-elements=64"],
    # Short rows (N <= 128 with many rows): no ring, more lanes per row.
    "s0tpr8": ["--async-stages=0", "--threads-per-row=8"],
    "s0tpr16": ["--async-stages=0", "--threads-per-row=16"],
    "s0nopf": ["--async-stages=0", "--prefetch=false"],
    # Long rows: the looped variant, or clusters of 2 / 4 CTAs at most.
    "nocluster": ["--max-cluster-ctas=1"],
    "cluster2": ["--max-cluster-ctas=2"],
    "cluster4": ["--max-cluster-ctas=4"],
    # ... or more CTAs per row, fewer columns per lane (more CTAs per SM).
    "res16": ["--max-resident-elements=16"],
    "res16s0": ["--max-resident-elements=16", "--async-stages=0"],
    "res8": ["--max-resident-elements=8"],
    "rpc2": ["--rows-per-cta=2"],
    "rpc4": ["--rows-per-cta=4"],
    # Short rows: fewer rows per CTA (fewer registers per CTA, more CTAs
    # per SM where the registers bound occupancy).
    "rpc8": ["--rows-per-cta=8"],
    "rpc16": ["--rows-per-cta=16"],
    # FMA contraction in the kernels (LLVM's NVPTX fma level; the math
    # itself is built without it: mul.rn / add.rn).
    "fma": ["--nvptx-fma-level=1"],
}
DEFAULT_NS = [1024, 4096, 8192]
DEFAULT_VARIANTS = ["tpr128", "tpr256", "stages0", "stages2", "noprefetch",
                    "twolaunch", "ppsm1"]


def compiles(norm_opt, kind, config, n, flags):
    """Whether one function compiles (to PTX) with these flags."""
    text, _ = bk.function(kind, config, n)
    src = f"/tmp/autotune-{os.getpid()}.mlir"
    with open(src, "w") as f:
        f.write(text + "\n")
    r = subprocess.run(compile_command(src, "/dev/null", emit="ptx",
                                       norm_opt=norm_opt, extra=flags),
                       capture_output=True, text=True)
    os.unlink(src)
    return r.returncode == 0


def build_variant(args, label, flags):
    """The variant's libraries; N that its flags cannot compile are left
    out (one library per kind and dtype, as bench.py expects)."""
    out = os.path.join(args.out, label)
    ns = [int(v) for v in args.ns.split(",")]
    failures, manifest = bk.build(args.norm_opt, out, args.chip, ns,
                                  args.configs.split(","),
                                  args.kinds.split(","), flags, args.j,
                                  dynamic=False, riders=False)
    for lib, _ in failures:
        kind, config = lib[3:-3].split("_", 1)
        good = [n for n in ns
                if compiles(args.norm_opt, kind, config, n, flags)]
        print(f"{label}: {lib}: N {sorted(set(ns) - set(good))} do not "
              f"compile with {' '.join(flags)}", file=sys.stderr)
        if not good:
            continue
        again, part = bk.build(args.norm_opt, out + ".part", args.chip, good,
                               [config], [kind], flags, args.j,
                               dynamic=False, riders=False)
        if not again:
            os.replace(os.path.join(out + ".part", lib),
                       os.path.join(out, lib))
            manifest["libraries"] += part["libraries"]
            manifest["kernels"].update(part["kernels"])
        shutil.rmtree(out + ".part", ignore_errors=True)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return manifest


def cmd_build(args):
    names = (list(VARIANTS) if args.variants == "all"
             else args.variants.split(","))
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"autotune: unknown variants {unknown}; known: "
                         f"{', '.join(VARIANTS)}")
    ns = [int(v) for v in args.ns.split(",")]
    failures, _ = bk.build(args.norm_opt, os.path.join(args.out, "default"),
                           args.chip, ns, args.configs.split(","),
                           args.kinds.split(","), [], args.j, dynamic=False,
                           riders=False)
    if failures:
        raise SystemExit("autotune: the default plan does not build")
    index = {"default": os.path.join(args.out, "default"), "variants": {},
             "flags": {}, "ns": ns, "kinds": args.kinds,
             "dtypes": ",".join(c for c in args.configs.split(",")
                                if c in ("bf16", "f16", "f32"))}
    for label in names:
        build_variant(args, label, VARIANTS[label])
        index["variants"][label] = os.path.join(args.out, label)
        index["flags"][label] = VARIANTS[label]
    with open(os.path.join(args.out, "variants.json"), "w") as f:
        json.dump(index, f, indent=1)
    print(f"wrote {args.out}/variants.json; run on the GPU:")
    print(gpu_command(args.out, index))
    return 0


def gpu_command(out, index):
    import bench
    shapes = ",".join(
        f"{m}x{n}" for m, n, fn in bench.SHAPES
        if fn == "static" and n in index["ns"])
    return (f"export PYTHONPATH=python:test/lib-python; "
            f"python3 bench/bench.py --providers norm-opt --precompile 0 "
            f"--dir {index['default']} --variants-file {out}/variants.json "
            f"--kinds {index['kinds']} --dtypes {index['dtypes']} "
            f"--shapes {shapes} --out $OUT && "
            f"python3 bench/autotune.py summarize $OUT/bench.json")


def acceptable(errs, base):
    """No failure, and every error within twice the default's."""
    if not errs or "error" in errs:
        return False
    return all(v <= max(2 * base.get(k, 0), 1e-6) for k, v in errs.items())


def cmd_summarize(args):
    with open(args.json) as f:
        rows = json.load(f)["rows"]
    wins, gains = {}, []
    print("| kind | dtype | M x N | default us | best | best us | gain |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        base = r["times"].get("norm-opt")
        if base is None:
            continue
        berr = r["errs"].get("norm-opt", {})
        cands = {"default": base}
        for label, t in r["times"].items():
            if label == report.OURS or label in report.PEERS:
                continue
            if acceptable(r["errs"].get(label), berr):
                cands[label] = t
        best = min(cands, key=cands.get)
        wins[best] = wins.get(best, 0) + 1
        gains.append(base / cands[best])
        print(f"| {r['kind']} | {r['dtype']} | {r['m']}x{r['n']} | "
              f"{base:.1f} | {best} | {cands[best]:.1f} | "
              f"{base / cands[best]:.2f} |")
    if gains:
        geo = math.exp(sum(math.log(g) for g in gains) / len(gains))
        print(f"\nGeometric-mean gain of the best variant over the default:"
              f" {geo:.3f}x over {len(gains)} rows; best: "
              + ", ".join(f"{k} {v}" for k, v in
                          sorted(wins.items(), key=lambda kv: -kv[1])))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--norm-opt", default="build/bin/norm-opt")
    b.add_argument("--out", default=".carry/tune")
    b.add_argument("--chip", default="sm_90a")
    b.add_argument("--kinds", default="layer,rms")
    b.add_argument("--configs", default="bf16,f16,f32")
    b.add_argument("--ns", default=",".join(map(str, DEFAULT_NS)))
    b.add_argument("--variants", default=",".join(DEFAULT_VARIANTS))
    b.add_argument("-j", type=int, default=2)
    c = sub.add_parser("command")
    c.add_argument("--out", default=".carry/tune")
    s = sub.add_parser("summarize")
    s.add_argument("json")
    args = ap.parse_args(argv)
    if args.cmd == "build":
        return cmd_build(args)
    if args.cmd == "command":
        with open(os.path.join(args.out, "variants.json")) as f:
            print(gpu_command(args.out, json.load(f)))
        return 0
    return cmd_summarize(args)


if __name__ == "__main__":
    sys.exit(main())
