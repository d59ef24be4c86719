#!/usr/bin/env python3
"""Host cost per call of norm_opt's PyTorch ops (issue 30 item 1).

For LayerNorm / RMSNorm backward on [16, 256, 1024] (bf16 and f32) it
reports the op's CPU time per call as torch's profiler counts it (the
`norm_opt::*` events' CPU time, mean and median over 2000 calls), the wall time per call of a
loop of eager calls (no synchronisation inside), and the GPU time of one
call; with --profile, cProfile's top entries of 200 calls.

  PYTHONPATH=python NORM_OPT_LIBRARY_PATH=.carry/norm_opt_libs \\
      python3 bench/torch_host_cost.py [--profile] [--modules]

--modules: forward + backward of one layer (torch.nn.LayerNorm / RMSNorm
against norm_opt.torch's, same weights) at [4096, 1024] and [8192, 4096],
bf16 and f32: wall time per iteration.
"""

import argparse
import cProfile
import pstats
import statistics
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


def profiler_us(f, args, calls=2000):
    """The op's CPU time per call in torch's profiler: the mean (as
    key_averages gives it) and the median over `calls` calls. 2000 calls:
    with 200, a few slow first calls under the profiler moved the mean by
    up to 6 us."""
    for _ in range(50):
        f(*args)
    torch.cuda.synchronize()
    with torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            f(*args)
        torch.cuda.synchronize()
    times = [e.cpu_time_total for e in prof.events()
             if e.name.startswith(("norm_opt::",
                                   "aten::native_layer_norm_backward"))]
    if not times:
        return float("nan"), float("nan")
    return statistics.fmean(times), statistics.median(times)


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


def layer_step_us(module, x, dy, iters=50):
    """Forward + backward of one norm layer, wall time per iteration (the
    loop synchronised at the end only, as a training step runs)."""
    def step():
        module.weight.grad = None
        if getattr(module, "bias", None) is not None:
            module.bias.grad = None
        x.grad = None
        module(x).backward(dy)
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(iters):
            step()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / iters * 1e6)
    return best


def modules_table():
    """torch.nn's LayerNorm / RMSNorm against norm_opt.torch's drop-ins."""
    out = []
    for shape in ((4096, 1024), (8192, 4096)):
        for dtype in (torch.bfloat16, torch.float32):
            for kind in ("LayerNorm", "RMSNorm"):
                theirs = getattr(torch.nn, kind)(shape[-1]).cuda().to(dtype)
                ours = getattr(nt, kind)(shape[-1]).cuda().to(dtype)
                ours.load_state_dict(theirs.state_dict())
                g = torch.Generator(device="cuda").manual_seed(1)
                x = torch.randn(shape, generator=g, device="cuda").to(
                    dtype).requires_grad_()
                dy = torch.randn(shape, generator=g, device="cuda").to(dtype)
                t = layer_step_us(theirs, x, dy)
                o = layer_step_us(ours, x, dy)
                out.append((kind, str(dtype).split(".")[-1],
                            f"{shape[0]}x{shape[1]}", t, o))
    print(f"{'module':10} {'dtype':9} {'shape':10} {'torch us':>9} "
          f"{'ours us':>8} {'torch/ours':>10}")
    for r in out:
        print(f"{r[0]:10} {r[1]:9} {r[2]:10} {r[3]:9.1f} {r[4]:8.1f} "
              f"{r[3] / r[4]:10.2f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--modules", action="store_true",
                    help="also forward + backward of one layer, torch.nn's "
                         "against ours")
    a = ap.parse_args()
    rows = []
    for kind in ("layer", "rms"):
        for dtype in (torch.bfloat16, torch.float32):
            f, args = op(kind), inputs(kind, dtype)
            prof = profiler_us(f, args)
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
        prof = profiler_us(f, args)
        rows.append(("torch layer", str(dtype).split(".")[-1], prof,
                     min(wall_us(f, args) for _ in range(5)), gpu_us(f, args)))
    print(f"{'kind':11} {'dtype':9} {'profiler CPU us/call':>21} "
          f"{'(median)':>8} {'wall us/call':>13} {'GPU us/call':>12}")
    for r in rows:
        print(f"{r[0]:11} {r[1]:9} {r[2][0]:21.1f} {r[2][1]:8.1f} "
              f"{r[3]:13.1f} {r[4]:12.1f}")
    if a.modules:
        modules_table()


if __name__ == "__main__":
    main()
