#!/usr/bin/env python3
#===- bench/channels_first.py - channels-first norms: ConvNeXt-T stages ---===#
"""The ConvNeXt-T benchmark of the channels-first norms (issue 27 item 1):
LayerNorm2d's backward over C of x [B, C, S] at the ConvNeXt-T stages, batch
32 (C x S = 96x3136, 192x784, 384x196, 768x49), f32 and bf16, under the
BENCHMARKS.md protocol (bench.py's Timer: cold L2, CUDA-graph replay,
median): ours, torch eager and torch.compile of the same backward math,
and torch eager as torchvision's LayerNorm2d runs it (permute, then
native_layer_norm_backward on the contiguous copy); the floor and each
row's relative L2 error of ours against float64.

Runs on the GPU machine over the libraries the channels-first check
builds (its layer functions of rank 3, N in the middle; the check itself
is test/gpu/gpu_channels_first_check.py):

  PYTHONPATH=python:test/lib-python \\
      python3 test/gpu/gpu_channels_first_check.py --build .carry/cf  # here
  PYTHONPATH=python python3 bench/channels_first.py --dir .carry/cf \\
      [--reps 200]                                               # GPU

Prints one line per point and a markdown table last.
"""

import argparse
import os
import sys

CONVNEXT = ((96, 3136), (192, 784), (384, 196), (768, 49))
DTYPES = ("f32", "bf16")


def library_name(dt, c):
    """The LayerNorm function over dim 1 (of size c) of a rank-3 tensor, as
    test/gpu/gpu_channels_first_check.py --build names it."""
    return f"layer_cf_{dt}_c{c}_r3_n1"


def benchmark(args):
    import torch
    from norm_opt import Library
    from norm_opt.reference import rel_l2, worst
    from norm_opt.testing import (channels_first_inputs,
                                  channels_first_reference)
    from bench import Timer  # bench/bench.py, beside this script

    timer = Timer(args.reps)
    bandwidth = timer.copy_bandwidth()
    print(f"copy bandwidth {bandwidth / 1e12:.2f} TB/s")

    def math(dy, x, mean, rstd, w):
        """The LayerNorm2d backward in plain torch (dim 1 normalised)."""
        xf, g = x.float(), dy.float()
        m, r = mean[:, None], rstd[:, None]
        xhat = (xf - m) * r
        wg = g * w.float()[None, :, None]
        c1 = (wg * xhat).mean(1, keepdim=True)
        c2 = wg.mean(1, keepdim=True)
        dx = (wg - xhat * c1 - c2) * r
        return (dx.to(x.dtype), (g * xhat).sum((0, 2)).to(w.dtype),
                g.sum((0, 2)).to(w.dtype))

    def native(dy, x, mean, rstd, w):
        """torchvision's LayerNorm2d: permute to [B, S, C], layer_norm."""
        b, c, s = x.shape
        xp = x.permute(0, 2, 1).contiguous()
        gp = dy.permute(0, 2, 1).contiguous()
        dx, dw, db = torch.ops.aten.native_layer_norm_backward(
            gp, xp, [c], mean.reshape(b, s, 1), rstd.reshape(b, s, 1), w,
            torch.zeros_like(w), [True, True, True])
        return dx.permute(0, 2, 1), dw, db

    compiled = torch.compile(math, dynamic=False)
    rows = []
    for dt in DTYPES:
        esize = 4 if dt == "f32" else 2
        for c, s in CONVNEXT:
            name = library_name(dt, c)
            fn = getattr(Library(os.path.join(args.dir, f"lib{name}.so")),
                         name)
            shape = (32, c, s)
            dy, x, mean, rstd, w = channels_first_inputs("layer", dt, c,
                                                         list(shape), 1)
            dx = torch.empty_like(x)
            dw, db = torch.empty_like(w), torch.empty_like(w)
            ref = channels_first_reference("layer", 1, dy, x, mean, rstd, w)
            fn(dy, x, mean, rstd, w, dx, dw, db)
            err = worst(rel_l2(a, r) for a, r in zip((dx, dw, db), ref))
            m = 32 * s
            floor = (3 * m * c * esize + 4 * c * esize + 8 * m) / bandwidth \
                * 1e6
            times = {
                "ours": timer.graph_time(
                    lambda: fn(dy, x, mean, rstd, w, dx, dw, db)),
                "eager": timer.graph_time(lambda: math(dy, x, mean, rstd, w)),
                "eager-native": timer.graph_time(
                    lambda: native(dy, x, mean, rstd, w)),
                "compile": timer.graph_time(
                    lambda: compiled(dy, x, mean, rstd, w)),
            }
            rows.append((dt, c, s, floor, times, err))
            print(f"layer {dt} 32x{c}x{s}: floor {floor:.1f} us, " +
                  ", ".join(f"{k} {v:.1f}" for k, v in times.items()) +
                  f", err {err:.1e}", flush=True)
    print("\n| dtype | B x C x S | floor us | ours | torch eager (math) | "
          "torch eager (permute + native) | torch.compile | ours SOL | "
          "best peer / ours |")
    print("|---|---|---|---|---|---|---|---|---|")
    for dt, c, s, floor, t, err in rows:
        best = min(t["eager"], t["eager-native"], t["compile"])
        print(f"| {dt} | 32x{c}x{s} | {floor:.1f} | {t['ours']:.1f} | "
              f"{t['eager']:.1f} | {t['eager-native']:.1f} | "
              f"{t['compile']:.1f} | {floor / t['ours']:.2f} | "
              f"{best / t['ours']:.2f} |")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=".carry/cf")
    ap.add_argument("--reps", type=int, default=200)
    return benchmark(ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
