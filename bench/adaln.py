#!/usr/bin/env python3
#===- bench/adaln.py - the adaLN-modulated LayerNorm backward -------------===#
"""The adaLN benchmark (issue 42): the backward of DiT's modulated
LayerNorm, y = LN(x) * (1 + scale[b]) + shift[b], x [B, S, N], at the
protocol's shapes ([64, 256, 1152], [32, 1024, 1152]; bf16 and f32), under
the BENCHMARKS.md protocol (bench.py's Timer: cold L2, CUDA-graph replay,
median): ours (one batched-rows group: dx, d(scale), d(shift)), torch eager
as autograd runs it (native_layer_norm_backward on dy * (1 + scale), then
the two sums over each sample's tokens), torch eager of the plain math, and
torch.compile of the plain math (Inductor, dynamic=False); the floor, a
CUDA graph of one copy of the op's bytes, and each row's relative L2 error
of ours against float64.

Runs on the GPU machine over the libraries the adaLN check builds:

  PYTHONPATH=python:test/lib-python \\
      python3 test/gpu/gpu_adaln_check.py --build .carry/adaln     # here
  PYTHONPATH=python:test/gpu python3 bench/adaln.py --dir .carry/adaln \\
      [--reps 200]                                               # GPU

Prints one line per point and a markdown table last.
"""

import argparse
import os
import sys

SHAPES = ((64, 256, 1152), (32, 1024, 1152))
DTYPES = ("bf16", "f32")


def benchmark(args):
    import torch
    from norm_opt import Library
    from norm_opt.reference import rel_l2, worst
    from bench import Timer  # bench/bench.py, beside this script
    from gpu_adaln_check import make_inputs, reference

    timer = Timer(args.reps)
    bandwidth = timer.copy_bandwidth()
    print(f"copy bandwidth {bandwidth / 1e12:.2f} TB/s")

    def math(dy, x, mean, rstd, scale):
        """The backward in plain torch, f32 compute."""
        g0 = dy.float()
        xhat = (x.float() - mean[..., None]) * rstd[..., None]
        g = g0 * (1 + scale.float()[:, None, :])
        a = g.mean(-1, keepdim=True)
        p = (g * xhat).mean(-1, keepdim=True)
        dx = rstd[..., None] * (g - a - xhat * p)
        return (dx.to(x.dtype), (g0 * xhat).sum(1).to(scale.dtype),
                g0.sum(1).to(scale.dtype))

    def autograd(dy, x, mean, rstd, scale):
        """What eager autograd runs for F.layer_norm(x) * (1 + scale) +
        shift: the modulation's backward, native_layer_norm_backward
        without affine, the sums over the tokens."""
        n = x.shape[-1]
        g = dy * (1 + scale[:, None, :])
        dx = torch.ops.aten.native_layer_norm_backward(
            g, x, [n], mean[..., None], rstd[..., None], None, None,
            [True, False, False])[0]
        xhat = (x.float() - mean[..., None]) * rstd[..., None]
        return (dx, (dy * xhat).sum(1).to(scale.dtype),
                dy.sum(1, dtype=torch.float32).to(scale.dtype))

    compiled = torch.compile(math, dynamic=False)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(20261129)
    rows = []
    for dt in DTYPES:
        dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dt]
        esize = 4 if dt == "f32" else 2
        if args.dtypes and dt not in args.dtypes.split(","):
            continue
        name = f"adaln_{dt}_n1152"
        fn = getattr(Library(os.path.join(args.dir, f"lib{name}.so")), name)
        # The same function built with other plan options (A/B).
        variants = {}
        for d in args.variants:
            lib = os.path.join(d, f"lib{name}.so")
            if os.path.exists(lib):
                variants[os.path.basename(d.rstrip("/"))] = getattr(
                    Library(lib), name)
        for B, S, N in SHAPES:
            scale, dy, x, mean, rstd = make_inputs(B, S, N, dtype, False, gen)
            dx = torch.empty_like(x)
            ds, dsh = torch.empty_like(scale), torch.empty_like(scale)
            fn(scale, dy, x, mean, rstd, dx, ds, dsh)
            torch.cuda.synchronize()
            ref = reference([scale, dy, x, mean, rstd], False)
            err = worst(rel_l2(a, r) for a, r in zip((dx, ds, dsh), ref))
            for label, vfn in variants.items():
                # A variant counts only with its results checked too.
                outs = [torch.full_like(t, float("nan"))
                        for t in (dx, ds, dsh)]
                vfn(scale, dy, x, mean, rstd, *outs)
                torch.cuda.synchronize()
                verr = worst(rel_l2(a, r) for a, r in zip(outs, ref))
                vt = timer.graph_time(
                    lambda: vfn(scale, dy, x, mean, rstd, *outs))
                print(f"  variant {label}: {vt:.1f} us, err {verr:.1e}",
                      flush=True)
            nbytes = (3 * B * S * N + 3 * B * N) * esize + 8 * B * S
            floor = nbytes / bandwidth * 1e6
            src = torch.empty(nbytes // 2, dtype=torch.int8, device="cuda")
            dst = torch.empty_like(src)
            times = {
                "ours": timer.graph_time(
                    lambda: fn(scale, dy, x, mean, rstd, dx, ds, dsh)),
                "autograd": timer.graph_time(
                    lambda: autograd(dy, x, mean, rstd, scale)),
                "eager": timer.graph_time(
                    lambda: math(dy, x, mean, rstd, scale)),
                "compile": timer.graph_time(
                    lambda: compiled(dy, x, mean, rstd, scale)),
                "copy": timer.graph_time(lambda: dst.copy_(src)),
            }
            rows.append((dt, (B, S, N), floor, times, err))
            print(f"adaln {dt} {B}x{S}x{N}: floor {floor:.1f} us, " +
                  ", ".join(f"{k} {v:.1f}" for k, v in times.items()) +
                  f", err {err:.1e}", flush=True)
    print("\n| dtype | B x S x N | floor us | copy us | ours us | "
          "torch eager (autograd) | torch eager (math) | torch.compile | "
          "ours / copy | best peer / ours | ours rel. L2 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for dt, (B, S, N), floor, t, err in rows:
        best = min(t["autograd"], t["eager"], t["compile"])
        print(f"| {dt} | {B}x{S}x{N} | {floor:.1f} | {t['copy']:.1f} | "
              f"{t['ours']:.1f} | {t['autograd']:.1f} | {t['eager']:.1f} | "
              f"{t['compile']:.1f} | {t['ours'] / t['copy']:.2f} | "
              f"{best / t['ours']:.2f} | {err:.1e} |")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=".carry/adaln")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--dtypes", metavar="LIST", default="",
                    help="only these (bf16,f32)")
    ap.add_argument("--variants", metavar="DIR", nargs="*", default=[],
                    help="library dirs of the same functions built with "
                         "other plan options: timed beside ours (A/B), "
                         "each checked against float64 first")
    return benchmark(ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
