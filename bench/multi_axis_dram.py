#!/usr/bin/env python3
#===- bench/multi_axis_dram.py - DRAM bytes of the adaLN / GroupNorm calls ===#
"""DRAM bytes one call of ours moves at the adaLN and GroupNorm benchmark
points (bench/adaln.py, bench/group_norm.py), against the floor's bytes
(issue 42's DRAM column).

Runs on the GPU machine over the libraries the two checks build, under
Nsight Compute (the parent runs this script again as its child):

  PYTHONPATH=python:test/lib-python:test/gpu \\
      python3 bench/multi_axis_dram.py --adaln .carry/adaln --gn .carry/gn

The child runs each point once to load and warm it, fills the L2 with
clean lines (a read of 256 MB), then runs it once more inside an NVTX
range `measure` that ncu profiles (`--cache-control none`), so the bytes
ncu counts are the call's own. Each call launches two kernels (the main
and the final one); the i-th pair is the i-th point's. Prints a markdown
table: the floor's bytes, the DRAM bytes read and written over both
kernels, their ratio, and the kernels' time.
"""

import argparse
import csv
import io
import os
import subprocess
import sys

METRICS = "dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum"


def points(args):
    """(label, floor bytes, call) of every point, inputs made."""
    import torch
    from norm_opt import Library
    from gpu_adaln_check import make_inputs as adaln_inputs
    from gpu_group_norm_check import make_inputs as gn_inputs
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from adaln import SHAPES as ADALN_SHAPES
    from group_norm import GROUPS, SHAPES as GN_SHAPES

    gen = torch.Generator(device="cuda")
    gen.manual_seed(20261129)
    dtypes = {"bf16": torch.bfloat16, "f32": torch.float32}
    out = []
    for dt in ("bf16", "f32"):
        esize = 2 if dt == "bf16" else 4
        name = f"adaln_{dt}_n1152"
        fn = getattr(Library(os.path.join(args.adaln, f"lib{name}.so")), name)
        for b, s, n in ADALN_SHAPES:
            ins = adaln_inputs(b, s, n, dtypes[dt], False, gen)
            outs = [torch.empty_like(ins[2]), torch.empty_like(ins[0]),
                    torch.empty_like(ins[0])]
            nbytes = (3 * b * s * n + 3 * b * n) * esize + 8 * b * s
            out.append((f"adaLN {dt} {b}x{s}x{n}", nbytes,
                        lambda fn=fn, ins=ins, outs=outs: fn(*ins, *outs)))
    for cl in (False, True):
        for dt in ("bf16", "f32"):
            esize = 2 if dt == "bf16" else 4
            for n, c, hw in GN_SHAPES:
                name = f"gn_{'nhwc' if cl else 'nchw'}_{dt}_c{c}_s{hw}"
                fn = getattr(Library(os.path.join(args.gn, f"lib{name}.so")),
                             name)
                ins = gn_inputs(n, c, (hw, hw), GROUPS, dt, dt, cl, gen)
                outs = [torch.empty_like(ins[1]), torch.empty_like(ins[4]),
                        torch.empty_like(ins[4])]
                nbytes = 3 * n * c * hw * hw * esize + 4 * c * esize \
                    + 8 * n * GROUPS
                out.append((f"GroupNorm {'NHWC' if cl else 'NCHW'} {dt} "
                            f"{n}x{c}x{hw}x{hw}", nbytes,
                            lambda fn=fn, ins=ins, outs=outs: fn(*ins, *outs)))
    return out


def child(args):
    import torch
    clean = torch.ones(256 << 20, dtype=torch.int8, device="cuda")
    for _, _, call in points(args):
        call()
        torch.cuda.synchronize()
        clean.sum()  # clean lines in the L2: no write-back inside the call
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("measure")
        call()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
    return 0


def parent(args):
    cmd = ["ncu", "--nvtx", "--nvtx-include", "measure/", "--cache-control",
           "none", "--metrics", METRICS, "--csv", "--print-units", "base",
           sys.executable,
           os.path.abspath(__file__), "--child", "--adaln", args.adaln,
           "--gn", args.gn]
    run = subprocess.run(cmd, capture_output=True, text=True)
    text = run.stdout[run.stdout.find('"ID"'):]
    kernels = {}
    for row in csv.DictReader(io.StringIO(text)):
        k = kernels.setdefault(int(row["ID"]), {"name": row["Kernel Name"]})
        value = float(row["Metric Value"].replace(",", ""))
        k[row["Metric Name"]] = value
    labels = [(label, nbytes) for label, nbytes, _ in points(args)]
    ordered = [kernels[i] for i in sorted(kernels)]
    if run.returncode or len(ordered) != 2 * len(labels):
        print(run.stderr[-3000:])
        print(f"FAIL: {len(ordered)} kernels profiled for {len(labels)} "
              "points (two each)")
        return 1
    print("| point | floor MB | DRAM read MB | DRAM written MB | DRAM / floor "
          "| kernels us |")
    print("|---|---|---|---|---|---|")
    for i, (label, nbytes) in enumerate(labels):
        pair = ordered[2 * i:2 * i + 2]
        read = sum(k["dram__bytes_read.sum"] for k in pair)
        written = sum(k["dram__bytes_write.sum"] for k in pair)
        time = sum(k["gpu__time_duration.sum"] for k in pair)
        print(f"| {label} | {nbytes / 1e6:.1f} | {read / 1e6:.1f} | "
              f"{written / 1e6:.1f} | {(read + written) / nbytes:.2f} | "
              f"{time / 1e3:.1f} |")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--adaln", default=".carry/adaln")
    ap.add_argument("--gn", default=".carry/gn")
    ap.add_argument("--child", action="store_true")
    args = ap.parse_args()
    return child(args) if args.child else parent(args)


if __name__ == "__main__":
    sys.exit(main())
