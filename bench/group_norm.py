#!/usr/bin/env python3
#===- bench/group_norm.py - the GroupNorm backward ------------------------===#
"""The GroupNorm benchmark (issue 42): the backward of GroupNorm (G = 32,
with weight and bias) at Stable Diffusion's shapes ([8, 320, 64, 64],
[8, 640, 32, 32], [8, 1280, 16, 16], [2, 512, 128, 128]; NCHW and channels
last; bf16 and f32), under the BENCHMARKS.md protocol (bench.py's Timer:
cold L2, CUDA-graph replay, median): ours (one slab group: dx, dweight,
dbias), torch eager (`native_group_norm_backward`; channels last on
contiguous NCHW copies, as its kernel takes them), torch.compile of the plain math (Inductor,
dynamic=False) and, with --liger, Liger-Kernel's group_norm_backward; the
floor, a CUDA graph of one copy of the op's bytes, and
each row's relative L2 error of ours against float64.

Runs on the GPU machine over the libraries the GroupNorm check builds:

  PYTHONPATH=python:test/lib-python \\
      python3 test/gpu/gpu_group_norm_check.py --build .carry/gn     # here
  PYTHONPATH=python:test/gpu python3 bench/group_norm.py --dir .carry/gn \\
      [--reps 200]                                               # GPU

Prints one line per point and a markdown table last.
"""

import argparse
import os
import sys

SHAPES = ((8, 320, 64), (8, 640, 32), (8, 1280, 16), (2, 512, 128))
GROUPS = 32


def benchmark(args):
    import torch
    from norm_opt import Library
    from norm_opt.reference import rel_l2, worst
    from bench import Timer  # bench/bench.py, beside this script
    from gpu_group_norm_check import make_inputs, reference

    timer = Timer(args.reps)
    bandwidth = timer.copy_bandwidth()
    print(f"copy bandwidth {bandwidth / 1e12:.2f} TB/s")

    def nchw(t, cl):
        return t.permute(0, 3, 1, 2) if cl else t

    def math(dy, x, mean, rstd, w, cl):
        """The backward in plain torch, f32 compute, NCHW views."""
        dy, x = nchw(dy, cl).float(), nchw(x, cl).float()
        n, c, h, wd = x.shape
        xg = x.reshape(n, GROUPS, -1)
        xhat = ((xg - mean[..., None]) * rstd[..., None]).reshape(x.shape)
        g = dy * w.float()[None, :, None, None]
        gg, hg = g.reshape(n, GROUPS, -1), xhat.reshape(n, GROUPS, -1)
        a = gg.mean(-1, keepdim=True)
        p = (gg * hg).mean(-1, keepdim=True)
        dx = ((gg - a - hg * p) * rstd[..., None]).reshape(x.shape)
        dx = dx.to(x.dtype)
        if cl:
            dx = dx.permute(0, 2, 3, 1)
        return (dx, (dy * xhat).sum((0, 2, 3)).to(w.dtype),
                dy.sum((0, 2, 3)).to(w.dtype))

    def eager(dy, x, mean, rstd, w, cl):
        # (Channels last: torch's kernel takes contiguous NCHW copies.)
        dyv, xv = nchw(dy, cl).contiguous(), nchw(x, cl).contiguous()
        n, c = xv.shape[:2]
        # (torch keeps a 16-bit GroupNorm's statistics in its dtype.)
        return torch.ops.aten.native_group_norm_backward(
            dyv, xv, mean.to(x.dtype), rstd.to(x.dtype), w, n, c,
            xv.shape[2] * xv.shape[3], GROUPS, [True, True, True])

    # One compiled graph per point (16 of them): past dynamo's default
    # recompile limit (8) torch.compile would fall back to eager.
    torch._dynamo.config.recompile_limit = 64
    compiled = torch.compile(math, dynamic=False)
    liger = None
    if args.liger:
        from bench import liger_ops
        liger = liger_ops(os.path.join(args.liger, "src"), "group_norm")[0]

    def liger_bwd(dy, x, mean, rstd, w, b, cl):
        """Liger's GroupNorm backward ([N, C, hidden] contiguous; its
        statistics in x's dtype; dW / dB by atomic adds)."""
        n, c = x.shape[0], w.shape[0]
        return liger.group_norm_backward(
            nchw(dy, cl).contiguous().view(n, c, -1),
            nchw(x, cl).contiguous().view(n, c, -1), w, b,
            mean.to(x.dtype), rstd.to(x.dtype), c, GROUPS)

    rows = []
    for cl in (False, True):
        for dt in ("bf16", "f32"):
            esize = 4 if dt == "f32" else 2
            for n, c, hw in SHAPES:
                name = f"gn_{'nhwc' if cl else 'nchw'}_{dt}_c{c}_s{hw}"
                if args.only and args.only not in name:
                    continue
                fn = getattr(Library(os.path.join(args.dir, f"lib{name}.so")),
                             name)
                gen = torch.Generator(device="cuda")
                gen.manual_seed(20261129)
                ins = make_inputs(n, c, (hw, hw), GROUPS, dt, dt, cl, gen)
                dy, x, mean, rstd, w, b = ins
                dx = torch.empty_like(x)
                dw, db = torch.empty_like(w), torch.empty_like(w)
                fn(*ins, dx, dw, db)
                torch.cuda.synchronize()
                ref = reference(ins, GROUPS, cl)
                err = worst(rel_l2(a, r) for a, r in zip((dx, dw, db), ref))
                nbytes = 3 * n * c * hw * hw * esize + 4 * c * esize \
                    + 8 * n * GROUPS
                floor = nbytes / bandwidth * 1e6
                src = torch.empty(nbytes // 2, dtype=torch.int8,
                                  device="cuda")
                dst = torch.empty_like(src)
                times = {
                    "ours": timer.graph_time(lambda: fn(*ins, dx, dw, db)),
                    "eager": timer.graph_time(
                        lambda: eager(dy, x, mean, rstd, w, cl)),
                    "compile": timer.graph_time(
                        lambda: compiled(dy, x, mean, rstd, w, cl)),
                    "copy": timer.graph_time(lambda: dst.copy_(src)),
                }
                # The same function built with other plan options (A/B in
                # one run), checked like ours.
                for vdir in args.variants:
                    vlib = os.path.join(vdir, f"lib{name}.so")
                    if not os.path.exists(vlib):
                        continue
                    vfn = getattr(Library(vlib), name)
                    vout = [torch.full_like(t, float("nan"))
                            for t in (dx, dw, db)]
                    vfn(*ins, *vout)
                    torch.cuda.synchronize()
                    verr = worst(rel_l2(a, r) for a, r in zip(vout, ref))
                    if not verr <= 1e-2:
                        raise SystemExit(f"variant {vdir}: {name} error "
                                         f"{verr}")
                    times[f"ours[{os.path.basename(vdir)}]"] = \
                        timer.graph_time(lambda: vfn(*ins, *vout))
                if liger is not None:
                    times["liger"] = timer.graph_time(
                        lambda: liger_bwd(dy, x, mean, rstd, w, b, cl))
                layout = "NHWC" if cl else "NCHW"
                rows.append((layout, dt, (n, c, hw), floor, times, err))
                print(f"gn {layout} {dt} {n}x{c}x{hw}x{hw}: floor "
                      f"{floor:.1f} us, " +
                      ", ".join(f"{k} {v:.1f}" for k, v in times.items()) +
                      f", err {err:.1e}", flush=True)
    print("\n| layout | dtype | N x C x H x W | floor us | copy us | ours us | "
          "torch eager | torch.compile | Liger | ours / copy | "
          "best peer / ours | ours rel. L2 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for layout, dt, (n, c, hw), floor, t, err in rows:
        peers = [t[k] for k in ("eager", "compile", "liger") if k in t]
        liger_t = f"{t['liger']:.1f}" if "liger" in t else "-"
        print(f"| {layout} | {dt} | {n}x{c}x{hw}x{hw} | {floor:.1f} | "
              f"{t['copy']:.1f} | {t['ours']:.1f} | {t['eager']:.1f} | "
              f"{t['compile']:.1f} | {liger_t} | {t['ours'] / t['copy']:.2f} | "
              f"{min(peers) / t['ours']:.2f} | {err:.1e} |")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=".carry/gn")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--only", metavar="TEXT",
                    help="only the functions whose name contains TEXT "
                         "(e.g. nhwc, f32, c512)")
    ap.add_argument("--variants", metavar="DIR", nargs="*", default=[],
                    help="library dirs of the same functions (or some of "
                         "them) built with other plan options or compilers: "
                         "timed beside ours (A/B)")
    ap.add_argument("--liger", metavar="DIR",
                    help="a copy of Liger-Kernel (bench/vendor_liger.py "
                         "--out DIR): its GroupNorm backward as a peer")
    return benchmark(ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
