#!/usr/bin/env python3
#===- dram_bytes.py - DRAM bytes of one call of ours, against the floor's ---===#
"""DRAM bytes one call of ours moves, against the floor's bytes (issue 28).

Runs on the GPU machine over the benchmark's libraries (bench/bench.py's
--dir) under Nsight Compute:

  python3 bench/dram_bytes.py --dir .carry/gpu --dtypes bf16,f16 \
      [--kinds layer,rms] [--shapes 8192x2048,2048x16384] [--out FILE]

For each (kind, dtype) library a child process (this script, --child) runs
each shape once to load and warm it, then once more inside an NVTX range
that ncu profiles (`--nvtx-include measure/`, `--cache-control none`). Just
before that call the L2 is filled with clean lines (a read of 256 MB), so
the bytes ncu counts are the call's own: no dirty line of an earlier write
is written back inside it. Which kernels belong to which shape comes from
their names (`<kind>_<dtype>_<N>_...`; `dyn` for a run-time N) and their
order (shapes of one N share the names: the i-th such call is the i-th
such shape's). Per shape
the table gives the floor's bytes (bench.floor_bytes), the DRAM bytes read
and written summed over the call's kernels (dram__bytes_read.sum,
dram__bytes_write.sum), their ratio, and the kernels' durations.

The launch path is the cooperative one unless NORMRT_NO_COOPERATIVE=1 is
set (then the main and the final kernel each appear).
"""

import argparse
import csv
import io
import json
import os
import re
import subprocess
import sys

METRICS = "dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum"
DEFAULT_SHAPES = ("8192x2048,32768x1024,8192x4096,4096x8192,16384x5120,"
                  "5000x3000,2048x16384,4096x12288,1024x32768")


def parse_shapes(text):
    return [tuple(int(v) for v in s.split("x")) for s in text.split(",")]


def child(args):
    import torch
    import bench
    from norm_opt import kernel_set, testing
    name = f"lib{args.kind}_{args.dtype}.so"
    lib = kernel_set.libraries(args.dir, only={name})[name]
    gen = torch.Generator(device="cuda")
    gen.manual_seed(7)
    clean = torch.ones(256 << 20, dtype=torch.int8, device="cuda")
    xdt = testing.DT[args.dtype]
    for m, n in parse_shapes(args.shapes):
        ours = bench.ours_function(lib, n, "static")
        if ours is None:
            print(f"skip {m}x{n}: no function", flush=True)
            continue
        t = testing.make_inputs(args.kind, xdt, xdt, m, n, gen, "cuda")
        call, _ = bench.ours_provider(testing, ours[0], ours[1], ours[2], t,
                                      m, n)
        call()
        torch.cuda.synchronize()
        clean.sum()  # L2 full of clean lines
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("measure")
        call()
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        print(f"ran {m}x{n}", flush=True)
        del t


def run_library(args, kind, dtype):
    cmd = ["ncu", "--csv", "--page", "raw", "--metrics", METRICS,
           "--cache-control", "none", "--nvtx", "--nvtx-include", "measure/",
           sys.executable, os.path.abspath(__file__), "--child",
           "--dir", args.dir, "--kind", kind, "--dtype", dtype,
           "--shapes", args.shapes]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"ncu failed ({p.returncode}): {p.stderr[-2000:]}")
    lines = [l for l in p.stdout.splitlines() if l.startswith('"')]
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    kernels = []
    for r in rows:
        if "Kernel Name" not in r or not r.get("dram__bytes_read.sum"):
            continue
        try:
            read = float(r["dram__bytes_read.sum"].replace(",", ""))
        except ValueError:  # the units row
            continue
        kernels.append(dict(
            name=r["Kernel Name"], read=read,
            write=float(r["dram__bytes_write.sum"].replace(",", "")),
            ns=float(r["gpu__time_duration.sum"].replace(",", ""))))
    return kernels


def calls_of(kernels):
    """Kernels in launch order, grouped into calls: each call has one main
    kernel (main, main_peel, main_scalar, a tier's) and maybe a final one."""
    calls = []
    for k in kernels:
        if "_main" in k["name"] or not calls:
            calls.append([])
        calls[-1].append(k)
    return calls


def shape_rows(kind, dtype, shapes, kernels, floor_bytes):
    """One row per shape that ran: the i-th call whose kernels are named
    for N goes to the i-th shape with that N (shapes of one N share their
    kernels' names; the child runs the shapes in order)."""
    calls = [c for c in calls_of(kernels)
             if re.search(rf"(^|_){kind}_{dtype}_", c[0]["name"])]
    taken, rows = {}, []
    for m, n in shapes:
        mine = [c for c in calls
                if re.search(rf"(^|_){kind}_{dtype}_{n}_", c[0]["name"])]
        i = taken.get(n, 0)
        if i >= len(mine):
            continue
        taken[n] = i + 1
        call = mine[i]
        rows.append(dict(
            kind=kind, dtype=dtype, m=m, n=n,
            floor_bytes=floor_bytes(kind, m, n, dtype),
            read=sum(k["read"] for k in call),
            write=sum(k["write"] for k in call),
            kernels=[(k["name"], round(k["ns"] / 1e3, 2), k["read"],
                      k["write"]) for k in call]))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--kinds", default="layer,rms")
    ap.add_argument("--dtypes", default="bf16,f16")
    ap.add_argument("--shapes", default=DEFAULT_SHAPES)
    ap.add_argument("--out", help="also write the table as JSON here")
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--kind")
    ap.add_argument("--dtype")
    args = ap.parse_args()
    if args.child:
        return child(args)
    import bench
    table = []
    for dtype in args.dtypes.split(","):
        for kind in args.kinds.split(","):
            table += shape_rows(kind, dtype, parse_shapes(args.shapes),
                                run_library(args, kind, dtype),
                                bench.floor_bytes)
    print(f"{'kind':5} {'dtype':5} {'shape':11} {'floor MB':>9} "
          f"{'read MB':>8} {'write MB':>9} {'DRAM/floor':>10}  kernels (us)")
    for r in table:
        ks = ", ".join(f"{name.split('_', 3)[-1]} {us}" for name, us, _, _
                       in r["kernels"])
        print(f"{r['kind']:5} {r['dtype']:5} {r['m']}x{r['n']:<6} "
              f"{r['floor_bytes'] / 1e6:9.1f} {r['read'] / 1e6:8.1f} "
              f"{r['write'] / 1e6:9.1f} "
              f"{(r['read'] + r['write']) / r['floor_bytes']:10.3f}  {ks}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(table, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
