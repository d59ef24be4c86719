#!/usr/bin/env python3
"""CPU numerics of the adaLN-modulated LayerNorm backward (issue 42).

DiT / SD3 / Flux modulate a LayerNorm without affine per sample:
y = LN(x) * (1 + scale[b]) + shift[b], x [B, S, N], scale and shift
[B, N]. Its backward, in the linalg a front end emits (one generic per
step, f32 compute, bf16 / f32 storage):

  xhat = (x - mean[b, s]) * rstd[b, s];  g = dy * (1 + scale[b, n])
  dx = rstd * (g - mean_n(g) - xhat * mean_n(g * xhat))
  dscale[b, n] = sum_s dy * xhat;  dshift[b, n] = sum_s dy

`--chain` cases are the pattern of pytorch issue 193061 (a silent wrong
gradient in Inductor's mix-order reduction): two modulated LayerNorms that
share one scale / shift, whose gradients are the sums of both
contributions.

Each case runs unfused (upstream lowering only) and through the registered
CPU pipeline `--norm-lower-to-cpu` (recognition, partial accumulation);
every result is compared with a float64 reference. Exits non-zero if any
result is out of tolerance, NaN or missing, or if nothing was compared;
--check-mutants requires each deliberately wrong reference to be caught in
95% of the cases it applies to, --mutant NAME compares with one only (the
run must then fail).

Python 3.11 standard library only.
"""

import argparse
import math
import os
import random
import sys
import tempfile

sys.dont_write_bytecode = True
import norm_numerics as nn  # noqa: E402
from norm_opt.checks import within  # noqa: E402
from norm_opt.kernels import adaln_source  # noqa: E402

MUTANT_MIN_CAUGHT = 0.95
# (B, S, N, storage type, chained, B and S dynamic in the function's types)
CASES = [(b, s, n, t, chain, False)
         for (b, s, n) in ((2, 3, 8), (3, 5, 16), (1, 7, 24), (4, 2, 33))
         for t in ("f32", "bf16") for chain in (False, True)]


def random_cases(seed, count):
    """`count` more cases drawn from `seed`: B 1-5, S 1-9, N 2-40, f32 or
    bf16, alone or chained, B and S static or run-time."""
    rng = random.Random(f"adaln-random/{seed}")
    return [(rng.randint(1, 5), rng.randint(1, 9), rng.randint(2, 40),
             rng.choice(("f32", "bf16")), rng.random() < 0.5,
             rng.random() < 0.5) for _ in range(count)]


def case_name(c):
    b, s, n, t, chain, dyn = c
    return (f"adaln{'-chain' if chain else ''}.{t}.{b}x{s}x{n}"
            + (".dyn" if dyn else ""))


def function_text(name, B, S, N, t, chain, dyn=False):
    """The backward as a front end spells it (norm_opt.kernels'
    adaln_source, which norm_opt.torch compiles too)."""
    return adaln_source(name, N, t, chain=chain, batch=None if dyn else B,
                        tokens=None if dyn else S)


def gen_inputs(c, seed):
    B, S, N, t, chain, _ = c
    rng = random.Random(f"{seed}/{case_name(c)}")
    dt, f32 = nn.DTYPES[t], nn.DTYPES["f32"]
    scale = [nn._nonzero(lambda: 0.5 * rng.gauss(0.0, 1.0), dt, 0.05)
             for _ in range(B * N)]
    lns = []
    for _ in range(2 if chain else 1):
        x, dy, mean, rstd = [], [], [], []
        for _ in range(B * S):
            offset = rng.choice((-1.0, 1.0)) * rng.uniform(0.5, 2.0)
            sc = rng.choice((rng.uniform(0.3, 0.7), rng.uniform(1.5, 3.0)))
            z, row = nn._draw_row(rng, dt, [offset] * N, sc,
                                  lambda v: abs(v) < 1e-3)
            _, drow = nn._draw_row(rng, dt, [1.0 + v for v in z], 1.0,
                                   lambda v: abs(v) < 1e-3)
            x += row
            dy += drow
            m = math.fsum(row) / N
            var = math.fsum((v - m) ** 2 for v in row) / N
            mean.append(f32.round(m))
            rstd.append(f32.round(1.0 / math.sqrt(var + nn.RSTD_EPS)))
        lns.append(dict(x=x, dy=dy, mean=mean, rstd=rstd))
    return scale, lns


MUTANTS = {
    "scale-not-plus-one": lambda c: True,
    "dx-no-mean-term": lambda c: True,
    # d(scale) over every sample's tokens: Inductor's 2-D column reduction.
    "dscale-over-all-samples": lambda c: c[0] > 1,
    # The chain's second contribution to d(scale) / d(shift) lost.
    "chain-drops-second": lambda c: c[4],
}


def reference(c, scale, lns, mutant=None):
    B, S, N, t, chain, _ = c
    values, scales = {}, {}
    dscale = [[] for _ in range(B * N)]
    dshift = [[] for _ in range(B * N)]
    for k, ln in enumerate(lns, 1):
        dx, sdx = [], []
        for b in range(B):
            for s in range(S):
                r = b * S + s
                m, rs = ln["mean"][r], ln["rstd"][r]
                xs = ln["x"][r * N:(r + 1) * N]
                ds = ln["dy"][r * N:(r + 1) * N]
                w = [(0.0 if mutant == "scale-not-plus-one" else 1.0)
                     + scale[b * N + n] for n in range(N)]
                xhat = [(v - m) * rs for v in xs]
                g = [d * wn for d, wn in zip(ds, w)]
                a = 0.0 if mutant == "dx-no-mean-term" else math.fsum(g) / N
                p = math.fsum(gi * h for gi, h in zip(g, xhat)) / N
                dx += [rs * (gi - a - h * p) for gi, h in zip(g, xhat)]
                sdx += [abs(rs * gi) + abs(rs * a) + abs(rs * h * p)
                        for gi, h in zip(g, xhat)]
                if k == 2 and mutant == "chain-drops-second":
                    continue
                for n in range(N):
                    tgt = n if mutant == "dscale-over-all-samples" else b * N + n
                    dscale[tgt].append(ds[n] * xhat[n])
                    dshift[tgt].append(ds[n])
        values[f"dx{k}"], scales[f"dx{k}"] = dx, sdx
    if mutant == "dscale-over-all-samples":
        for b in range(1, B):
            for n in range(N):
                dscale[b * N + n] = list(dscale[n])
                dshift[b * N + n] = list(dshift[n])
    values["dscale"] = [math.fsum(v) for v in dscale]
    scales["dscale"] = [math.fsum(map(abs, v)) for v in dscale]
    values["dshift"] = [math.fsum(v) for v in dshift]
    scales["dshift"] = [math.fsum(map(abs, v)) for v in dshift]
    return values, scales


def outputs(c):
    B, S, N, t, chain, _ = c
    outs = [(f"dx{k}", (B, S, N)) for k in ((1, 2) if chain else (1,))]
    return outs + [("dscale", (B, N)), ("dshift", (B, N))]


def compare(c, got, ref):
    values, scales = ref
    tol = nn.DTYPES[c[3]].tolerance
    rows = []
    for name, _ in outputs(c):
        err = nn.rel_l2(got[name], values[name], scales[name])
        rows.append((name, c[3], err, tol, within(err, tol)))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--opt", default="norm-opt")
    ap.add_argument("--runner", default="mlir-runner")
    ap.add_argument("--shared-lib-dir", default="")
    ap.add_argument("--seed", default="20261128")
    ap.add_argument("--keep")
    ap.add_argument("--mutant", choices=list(MUTANTS))
    ap.add_argument("--check-mutants", action="store_true")
    ap.add_argument("-q", "--quiet", action="store_true")
    ap.add_argument("--random", type=int, default=12,
                    help="cases drawn at random (from --seed) after the "
                         "fixed ones")
    args = ap.parse_args()

    cases = CASES + random_cases(args.seed, args.random)
    mod = nn.CallModule()
    inputs = []
    for i, c in enumerate(cases):
        B, S, N, t, chain, dyn = c
        b_, s_ = ("?", "?") if dyn else (B, S)
        text, rtypes = function_text(f"adaln_{i}", *c)
        mod.add_func(f"// {case_name(c)}\n" + text)
        scale, lns = gen_inputs(c, args.seed)
        inputs.append((scale, lns))
        call_args = [(f"tensor<{b_}x{N}x{t}>", (B, N), t, scale)]
        for ln in lns:
            call_args += [
                (f"tensor<{b_}x{s_}x{N}x{t}>", (B, S, N), t, ln["dy"]),
                (f"tensor<{b_}x{s_}x{N}x{t}>", (B, S, N), t, ln["x"]),
                (f"tensor<{b_}x{s_}xf32>", (B, S), "f32", ln["mean"]),
                (f"tensor<{b_}x{s_}xf32>", (B, S), "f32", ln["rstd"])]
        mod.add_call(f"adaln_{i}", call_args,
                     [(rt, shape) for rt, (_, shape) in
                      zip(rtypes, outputs(c))])
    libs = nn.runner_libs(args.runner, args.shared_lib_dir)
    workdir = args.keep or tempfile.mkdtemp(prefix="adaln-numerics-")
    os.makedirs(workdir, exist_ok=True)
    failed = compared = 0
    caught = nn.MutantTally(MUTANTS)
    # The pipeline paths are fused: one multi-axis group per modulated
    # LayerNorm (two per chain), from the steps as written and after
    # upstream elementwise fusion (the generics a fusing front end leaves).
    want = sum(len(lns) for _, lns in inputs)
    for pre in ((), ("--linalg-fuse-elementwise-ops",)):
        groups = nn.multi_axis_groups(args.opt, mod.text(), workdir, pre)
        print(f"{'FUSED' if groups == want else 'FAIL fused'}: {groups} "
              f"multi-axis groups (expected {want}){' after ' if pre else ''}"
              f"{' '.join(pre)}")
        failed += groups != want
    paths = {"unfused": nn.UPSTREAM_LOWERING, "pipeline": nn.fused_pipeline(3),
             "pipeline-fused-elementwise": ["--linalg-fuse-elementwise-ops",
                                            *nn.fused_pipeline(3)]}
    for path, printed in nn.run_paths(mod.text(), "adaln", paths, args.opt,
                                      args.runner, libs, workdir):
        for c, (scale, lns) in zip(cases, inputs):
            got = {}
            for name, shape in outputs(c):
                pshape, vals = next(printed, (None, None))
                if pshape != tuple(shape) or len(vals) != math.prod(shape):
                    sys.exit(f"error: {path} {case_name(c)}: printed {name} "
                             f"has shape {pshape}, expected {shape}")
                got[name] = vals
            rows = compare(c, got, reference(c, scale, lns, args.mutant))
            compared += 1
            failed += not nn.report_case(path, case_name(c), rows,
                                         args.quiet, width=24)
            if args.check_mutants:
                nn.tally_mutants(
                    caught, MUTANTS, c, f"{path}/{case_name(c)}",
                    lambda m: compare(c, got, reference(c, scale, lns, m)))
    if compared != len(cases) * len(paths):
        sys.exit(f"error: compared {compared} of {len(cases) * len(paths)}")
    missed = (caught.report("cases", MUTANT_MIN_CAUGHT)
              if args.check_mutants else [])
    return nn.finish(failed, compared, missed)


if __name__ == "__main__":
    sys.exit(main())
