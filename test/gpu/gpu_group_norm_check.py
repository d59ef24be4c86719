#!/usr/bin/env python3
"""GroupNorm backward on the GPU (issue 42): numerics against float64 and
bitwise determinism (the benchmark is bench/group_norm.py).

Each function is one norm.group_norm_grad (NCHW or channels last, with
weight and bias), as a front end would hand it over; norm-opt compile
decomposes it, fuses it into one multi-axis norm.mixed_reduction of a slab
domain ([N, G, C/G, HW] or [N, HW, G, C/G]) and runs the slab kernel (a
CTA per (n, g) slab, the column sums reduced per channel in the CTA, then
the final kernel over the N partial rows in a fixed order; docs/gpu.md,
"GroupNorm slabs").

Two modes (PYTHONPATH=python:test/lib-python):
  test/gpu/gpu_group_norm_check.py --build .carry/gn   (build machine:
      writes the functions and compiles each to a library)
  python3 test/gpu/gpu_group_norm_check.py --dir .carry/gn [--quick|--tiny]
      (GPU machine) -- fresh random inputs (never zero), outputs poisoned
      with NaN, dx, dweight and dbias against float64 (torch's
      native_group_norm_backward in float64) by relative L2 error, every
      result bitwise identical over 3 calls; then norm_opt.torch.GroupNorm
      (compiling on first use: $NORM_OPT or the wheel's norm-opt) against
      torch.nn.GroupNorm in float64; --tiny: small shapes only, for
      compute-sanitizer
Prints one line per check and a summary last.
"""

import os
import subprocess
import sys

from harness import Results, build_or_check

# (name, C, spatial dims, G, x dtype, weight dtype, channels last): N is a
# run-time size. Stable Diffusion's UNet / VAE GroupNorms (G = 32), odd
# sizes, one group, a group per channel.
SD_SHAPES = [
    (f"gn_{'nhwc' if cl else 'nchw'}_{t}_c{c}_s{hw}", c, (hw, hw), 32, t, t,
     cl)
    for cl in (False, True) for t in ("bf16", "f32")
    for c, hw in ((320, 64), (640, 32), (1280, 16), (512, 128))
]
SD_FUNCTIONS = {f[0] for f in SD_SHAPES}
FUNCTIONS = SD_SHAPES + [
    ("gn_nchw_bf16w32_c12_s5x3", 12, (5, 3), 4, "bf16", "f32", False),
    ("gn_nhwc_f32_c6_s7", 6, (7,), 1, "f32", "f32", True),
    # channels last with several groups per CTA (plan slab_groups: 8 and
    # 4 adjacent groups, runs of 2 and 10 channels)
    ("gn_nhwc_bf16_c16_s4x4", 16, (4, 4), 8, "bf16", "bf16", True),
    ("gn_nhwc_f32_c40_s3x5", 40, (3, 5), 4, "f32", "f32", True),
    ("gn_nchw_f32_c8_s3x3", 8, (3, 3), 8, "f32", "f32", False),
]
# N: few slabs (fewer than the SMs: the split kernels on sm_90+, a cluster
# of CTAs per slab) and many (a CTA per slab): 8 x 32 slabs, and 160 for
# the tiny shapes.
BATCHES = {"full": (1, 2, 8), "quick": (2,), "tiny": (2, 1, 160)}
# Shapes too large for compute-sanitizer: skipped with --tiny.
TINY_MAX_ELEMENTS = 1 << 16



def shape_of(c, spatial, cl, n="?"):
    return [n, *spatial, c] if cl else [n, c, *spatial]


def source(name, c, spatial, groups, t, wt, cl):
    full = f"tensor<{'x'.join(map(str, shape_of(c, spatial, cl)))}x{t}>"
    rows = "tensor<?x{}xf32>".format(groups)
    w = f"tensor<{c}x{wt}>"
    attrs = f"groups = {groups} : i64" + (", channels_last" if cl else "")
    return f"""func.func @{name}(%dy: {full}, %x: {full}, %mean: {rows}, %rstd: {rows}, %w: {w}, %b: {w}) -> ({full}, {w}, {w}) {{
  %dx, %dw, %db = norm.group_norm_grad %dy, %x, %mean, %rstd weight(%w : {w}) bias(%b : {w}) {{{attrs}}} : {full}, {rows} -> {full}, {w}, {w}
  return %dx, %dw, %db : {full}, {w}, {w}
}}
"""


def build(out, norm_opt):
    from norm_opt import compile_command
    os.makedirs(out, exist_ok=True)
    for f in FUNCTIONS:
        name = f[0]
        src = os.path.join(out, f"{name}.mlir")
        with open(src, "w") as fh:
            fh.write(source(*f))
        # The small shapes split at any size (their few slabs take the
        # split kernels; by default a split CTA must walk 32 KiB).
        extra = [] if name in SD_FUNCTIONS else ["--slab-split-min-bytes=0"]
        subprocess.run(compile_command(src, os.path.join(out, f"lib{name}.so"),
                                       emit="lib", norm_opt=norm_opt,
                                       extra=extra),
                       check=True)
        print(f"built lib{name}.so")
    return 0


# --- GPU side ---------------------------------------------------------------



def make_inputs(n, c, spatial, groups, t, wt, cl, gen):
    """dy, x, mean, rstd, w, b: random, never zero; mean / rstd those of x
    per (n, g) in float64, stored f32."""
    import torch
    dt = {"bf16": torch.bfloat16, "f32": torch.float32}

    def signed(*shape):
        v = torch.rand(*shape, generator=gen, device="cuda") * 1.75 + 0.25
        sign = torch.randint(0, 2, shape, generator=gen, device="cuda")
        return v * (sign * 2 - 1)

    nchw = [n, c, *spatial]
    x = signed(*nchw) + signed(n, c, *[1] * len(spatial))
    dy = signed(*nchw)
    x, dy = x.to(dt[t]), dy.to(dt[t])
    xg = x.double().reshape(n, groups, -1)
    mean = xg.mean(-1)
    rstd = (xg.var(-1, unbiased=False) + 1e-5).rsqrt()
    w, b = signed(c).to(dt[wt]), signed(c).to(dt[wt])
    if cl:  # channels last: the functions take [N, spatial..., C]
        perm = [0, *range(2, 2 + len(spatial)), 1]
        x, dy = x.permute(perm).contiguous(), dy.permute(perm).contiguous()
    return dy, x, mean.float(), rstd.float(), w, b


def reference(ins, groups, cl):
    """dx, dweight, dbias in float64 (torch's own GroupNorm backward)."""
    import torch
    dy, x, mean, rstd, w, _ = ins
    if cl:  # to NCHW
        perm = [0, x.dim() - 1, *range(1, x.dim() - 1)]
        dy, x = dy.permute(perm), x.permute(perm)
    n, c = x.shape[:2]
    hw = x[0, 0].numel()
    dx, dw, db = torch.ops.aten.native_group_norm_backward(
        dy.double().contiguous(), x.double().contiguous(), mean.double(),
        rstd.double(), w.double(), n, c, hw, groups, [True, True, True])
    if cl:
        dx = dx.permute([0, *range(2, dx.dim()), 1])
    return dx, dw, db


def numerics(args):
    import torch
    from norm_opt import Library

    results = Results("gpu_group_norm_check", args.inject)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(20261129)
    mode = "tiny" if args.tiny else "quick" if args.quick else "full"
    for name, c, spatial, groups, t, wt, cl in FUNCTIONS:
        fn = getattr(Library(os.path.join(args.dir, f"lib{name}.so")), name)
        for n in BATCHES[mode]:
            elements = n * c * torch.Size(spatial).numel()
            if args.tiny and elements > TINY_MAX_ELEMENTS:
                continue
            ins = make_inputs(n, c, spatial, groups, t, wt, cl, gen)
            runs = []
            for _ in range(3):
                outs = [torch.full_like(ins[1], float("nan")),
                        torch.full_like(ins[4], float("nan")),
                        torch.full_like(ins[4], float("nan"))]
                fn(*ins, *outs)
                runs.append(outs)
            torch.cuda.synchronize()
            ref = reference(ins, groups, cl)
            case = f"{name} N={n}"
            for label, got, want in zip(("dx", "dweight", "dbias"), runs[0],
                                        ref):
                results.compare(case, label, got, want)
            results.require(case, "every result bitwise over 3 calls",
                            all(torch.equal(a, b) for r in runs[1:]
                                for a, b in zip(runs[0], r)))
    if not args.tiny:
        module_check(results)
    return results.finish()


def module_check(results):
    """norm_opt.torch.GroupNorm (the drop-in module: torch's forward, our
    backward compiled on first use) against torch.nn.GroupNorm in float64:
    the gradients of x, weight and bias, NCHW and channels last, f32 and
    bf16; and that our kernel ran."""
    import torch
    import norm_opt.torch as nt

    torch.manual_seed(20261129)
    for last in (False, True):
        for dtype in (torch.float32, torch.bfloat16):
            ours = nt.GroupNorm(8, 40).cuda().to(dtype)
            ref = torch.nn.GroupNorm(8, 40).cuda().double()
            with torch.no_grad():
                for p, q in zip(ours.parameters(), ref.parameters()):
                    p.copy_(torch.randn_like(p) * 0.5 + 1)
                    q.copy_(p.double())
            fmt = torch.channels_last if last else torch.contiguous_format
            x = torch.randn(3, 40, 6, 5, device="cuda").to(dtype)
            x = x.contiguous(memory_format=fmt).requires_grad_()
            xr = x.detach().double().requires_grad_()
            g = torch.randn(3, 40, 6, 5, device="cuda").to(dtype)
            before = nt.launches
            ours(x).backward(g.contiguous(memory_format=fmt))
            ran = nt.launches - before
            ref(xr).backward(g.double())
            case = (f"nt.GroupNorm {'channels last' if last else 'NCHW'} "
                    f"{str(dtype).split('.')[-1]}")
            for label, got, want in (("dx", x.grad, xr.grad),
                                     ("dweight", ours.weight.grad,
                                      ref.weight.grad),
                                     ("dbias", ours.bias.grad,
                                      ref.bias.grad)):
                results.compare(case, label, got, want)
            results.require(case, f"our kernel ran ({ran} launches)",
                            ran >= 1)


def main():
    return build_or_check(__doc__, ".carry/gn", build, numerics)


if __name__ == "__main__":
    sys.exit(main())
