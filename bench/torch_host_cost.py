#!/usr/bin/env python3
"""Host cost per call of norm_opt's PyTorch ops (issue 30 item 1).

For LayerNorm / RMSNorm backward on [16, 256, 1024] (bf16 and f32) it
reports the op's CPU time per call as torch's profiler counts it (the
`norm_opt::*` event's CPU time total / calls), the wall time per call of a
loop of eager calls (no synchronisation inside), and the GPU time of one
call; with --profile, cProfile's top entries of 200 calls.

  PYTHONPATH=python NORM_OPT_LIBRARY_PATH=.carry/norm_opt_libs \\
      python3 bench/torch_host_cost.py [--profile]
"""

import argparse
import cProfile
import pstats
import time

import torch

import norm_opt.torch as nt  # noqa: F401  (registers torch.ops.norm_opt)

SHAPE = (16, 256, 1024)


def inputs(kind, dtype):
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(SHAPE, generator=g, device="cuda").to(dtype)
    dy = torch.randn(SHAPE, generator=g, device="cuda").to(dtype)
    w = torch.randn(SHAPE[-1], generator=g, device="cuda").to(dtype)
    xf = x.float()
    rstd = torch.rsqrt(xf.var(-1, unbiased=False) + 1e-5)
    if kind == "layer":
        return (dy, x, xf.mean(-1), rstd, w)
    return (dy, x, rstd, w)


def op(kind):
    return (torch.ops.norm_opt.layer_norm_backward if kind == "layer"
            else torch.ops.norm_opt.rms_norm_backward)


def profiler_us(f, args, calls=200):
    for _ in range(20):
        f(*args)
    torch.cuda.synchronize()
    with torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            f(*args)
        torch.cuda.synchronize()
    name = f._qualname if hasattr(f, "_qualname") else None
    for e in prof.key_averages():
        if e.key.startswith(("norm_opt::", "aten::native_layer_norm_backward")):
            return e.cpu_time_total / e.count, e.key
    return float("nan"), name


def wall_us(f, args, calls=200):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        f(*args)
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def gpu_us(f, args, reps=50):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
        enable_timing=True)
    torch.cuda.synchronize()
    a.record()
    for _ in range(reps):
        f(*args)
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e3 / reps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    rows = []
    for kind in ("layer", "rms"):
        for dtype in (torch.bfloat16, torch.float32):
            f, args = op(kind), inputs(kind, dtype)
            prof, key = profiler_us(f, args)
            wall = min(wall_us(f, args) for _ in range(5))
            rows.append((kind, str(dtype).split(".")[-1], prof, wall,
                         gpu_us(f, args)))
            if a.profile and dtype == torch.bfloat16:
                pr = cProfile.Profile()
                pr.enable()
                for _ in range(200):
                    f(*args)
                pr.disable()
                torch.cuda.synchronize()
                pstats.Stats(pr).sort_stats("tottime").print_stats(18)
    # torch's own LayerNorm backward, under the same protocol.
    for dtype in (torch.bfloat16, torch.float32):
        dy, x, mean, rstd, w = inputs("layer", dtype)
        args = (dy, x, [SHAPE[-1]], mean.unsqueeze(-1), rstd.unsqueeze(-1),
                w, w, [True, True, True])
        f = torch.ops.aten.native_layer_norm_backward
        prof, _ = profiler_us(f, args)
        rows.append(("torch layer", str(dtype).split(".")[-1], prof,
                     min(wall_us(f, args) for _ in range(5)), gpu_us(f, args)))
    print(f"{'kind':11} {'dtype':9} {'profiler CPU us/call':>21} "
          f"{'wall us/call':>13} {'GPU us/call':>12}")
    for r in rows:
        print(f"{r[0]:11} {r[1]:9} {r[2]:21.1f} {r[3]:13.1f} {r[4]:12.1f}")


if __name__ == "__main__":
    main()
