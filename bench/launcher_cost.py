#!/usr/bin/env python3
"""Two builds of the same kernels, side by side: the host cost of a call and
bitwise-equal results.

Issue 26 replaced the launchers written as C source with launchers built as
host IR (upstream gpu.launch_func + the runtime's normrt_ir_* calls) and
compiled in process. The kernels are the same, so every output must be
bitwise equal; what may differ is the host time a call takes. For each
library and shape it runs both builds on the same fresh random inputs
(outputs poisoned with NaN first) and times, interleaved, the C call alone
(the arguments prepared once, torch and the Python wrapper out of the way):
300 calls after a synchronise, repeated 7 times, the median of the per-call
time. A graph replay of one call (bench.py's protocol without the flush)
gives the GPU time of each.

  python3 bench/launcher_cost.py --new .carry/gpu --old .carry/gpu_old \\
      --libs layer_bf16,rms_bf16,layer_f32,rms_f32 --shapes 512x1024,4096x1024
"""

import argparse
import ctypes
import statistics
import sys
import time

import torch

from norm_opt.library import Library

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def make_tensors(sig, rows, cols, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    tensors = []
    for spec in sig.tensors:
        shape = {"rows_by_cols": (rows, cols), "rows": (rows,),
                 "cols": (cols,), "scalar": ()}.get(spec.layout)
        if shape is None:  # "unused", "rows_or_cols": any tensor of its type
            shape = tuple(1 if d < 0 else d for d in spec.shape)
        dtype = DTYPES[spec.dtype]
        if spec.role == "input":
            t = torch.randn(shape, generator=gen, device="cuda",
                            dtype=torch.float32) * 0.5 + 0.25
            if spec.layout == "rows":  # rstd / mean: positive
                t = t.abs() + 0.5
            tensors.append(t.to(dtype))
        else:
            tensors.append(torch.full(shape, float("nan"), device="cuda",
                                      dtype=dtype))
    return tensors


def host_us(fn, args, calls=300, repeats=7):
    per = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        per.append((t1 - t0) / calls * 1e6)
    return statistics.median(per)


def graph_us(fn, args, replays=200):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        fn(*args)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            fn(*args[:-1], ctypes.c_void_p(s.cuda_stream))
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--new", required=True)
    ap.add_argument("--old", required=True)
    ap.add_argument("--libs", default="layer_bf16,rms_bf16,layer_f32,rms_f32")
    ap.add_argument("--shapes", default="512x1024,4096x1024")
    a = ap.parse_args()
    rows_out, failures = [], 0
    for name in a.libs.split(","):
        new = Library(f"{a.new}/lib{name}.so")
        old = Library(f"{a.old}/lib{name}.so")
        for shape in a.shapes.split(","):
            rows, cols = map(int, shape.split("x"))
            fname = f"{name}_{cols}"  # norm_opt.kernel_set's names
            if fname not in new.functions:
                raise SystemExit(f"no {fname} in {new.path}")
            fn_new, fn_old = new.functions[fname], old.functions[fname]
            outs = {}
            cost, keep = {}, {}
            for label, f in (("old", fn_old), ("new", fn_new)):
                ts = make_tensors(f.signature, rows, cols, seed=rows + cols)
                args = f.arguments(*ts)
                status = f._cfunc(*args)
                if status != 0:
                    raise SystemExit(f"{label} {name} {shape}: status {status}")
                torch.cuda.synchronize()
                outs[label] = [t.clone() for t in
                               ts[len(f.signature.inputs):]]
                cost[label] = (f._cfunc, args)
                keep[label] = ts  # the pointers in args stay valid
            same = all(torch.equal(x, y)
                       for x, y in zip(outs["old"], outs["new"]))
            finite = all(torch.isfinite(x).all() for x in outs["new"])
            hosts = {k: [] for k in cost}
            for _ in range(3):  # interleaved
                for k, (fn, args) in cost.items():
                    hosts[k].append(host_us(fn, args))
            gpu = {k: graph_us(fn, list(args)) for k, (fn, args) in cost.items()}
            h = {k: min(v) for k, v in hosts.items()}
            ok = same and finite
            failures += not ok
            rows_out.append((name, shape, h["old"], h["new"], gpu["old"],
                             gpu["new"], "yes" if same else "NO",
                             "yes" if finite else "NO"))
    print(f"{'library':12} {'shape':10} {'host old':>9} {'host new':>9} "
          f"{'ratio':>6} {'gpu old':>8} {'gpu new':>8} {'ratio':>6} "
          f"{'bitwise':>7} {'finite':>6}")
    for r in rows_out:
        print(f"{r[0]:12} {r[1]:10} {r[2]:9.2f} {r[3]:9.2f} {r[3]/r[2]:6.3f} "
              f"{r[4]:8.2f} {r[5]:8.2f} {r[5]/r[4]:6.3f} {r[6]:>7} {r[7]:>6}")
    print(f"{len(rows_out) - failures} of {len(rows_out)} equal and finite")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
