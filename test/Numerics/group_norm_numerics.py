#!/usr/bin/env python3
"""CPU numerics test of norm.group_norm_grad (issue 42).

Builds one MLIR module of many GroupNorm backward cases (NCHW and channels
last, bf16 / f16 / f32 with f32 or same-type weight and bias, with and
without them, one to three spatial dims), lowers it twice, runs each with
mlir-runner and compares every result with a float64 reference:

- decomposed: `--norm-decompose`, then upstream lowering (norm_numerics'
  LOWERING);
- pipeline: the registered CPU pipeline `--norm-lower-to-cpu` (decompose,
  recognition, partial accumulation, lowering), the path a user takes.

Prints one line per case and path and a summary; exits non-zero if any
result is out of tolerance, NaN, missing, or if nothing was compared.
--check-mutants also compares with deliberately wrong references (MUTANTS)
and fails unless each is caught in at least 95% of the cases it applies to;
--mutant NAME compares with one of them only (the run must then fail).

  group_norm_numerics.py --opt norm-opt --runner mlir-runner
      [--shared-lib-dir DIR] [--seed S] [--check-mutants] [--mutant NAME]
      [--keep DIR] [-q]

Python 3.11 standard library only (no numpy).
"""

import argparse
import dataclasses
import math
import os
import random
import sys
import tempfile

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
import norm_numerics as nn  # noqa: E402
from norm_opt.checks import within  # noqa: E402

MUTANT_MIN_CAUGHT = 0.95


@dataclasses.dataclass(frozen=True)
class Case:
    shape: tuple  # x's shape: (N, C, spatial...) or (N, spatial..., C)
    groups: int
    channels_last: bool
    x_type: str
    w_type: str | None  # weight (and dweight) type; None: no weight
    b_type: str | None  # bias (and dbias) type; None: no bias
    # N and the spatial dims dynamic in the function's types (the call
    # casts the static inputs to them and the results back).
    dynamic: bool = False

    @property
    def channels(self):
        return self.shape[-1] if self.channels_last else self.shape[1]

    @property
    def spatial(self):
        dims = self.shape[1:-1] if self.channels_last else self.shape[2:]
        return math.prod(dims)

    @property
    def name(self):
        parts = ["gn", "nhwc" if self.channels_last else "nchw", self.x_type,
                 f"g{self.groups}"]
        if self.w_type:
            parts.append("w:" + self.w_type)
        if self.b_type:
            parts.append("b:" + self.b_type)
        parts.append("x".join(map(str, self.shape)))
        if self.dynamic:
            parts.append("dyn")
        return ".".join(parts)

    def func_shape(self):
        """x's shape in the function's types: N and the spatial dims '?'
        when dynamic (C stays static: the op needs it)."""
        if not self.dynamic:
            return self.shape
        return tuple(d if i == (len(self.shape) - 1 if self.channels_last
                                else 1) else "?"
                     for i, d in enumerate(self.shape))

    def index(self, n, c, s):
        """Flat row-major index of (sample n, channel c, spatial s)."""
        C, S = self.channels, self.spatial
        return (n * S + s) * C + c if self.channels_last else (n * C + c) * S + s

    def outputs(self):
        outs = [("dx", self.x_type, self.shape)]
        if self.w_type:
            outs.append(("dw", self.w_type, (self.channels,)))
        if self.b_type:
            outs.append(("db", self.b_type, (self.channels,)))
        return outs


SHAPES = [  # (N, C, spatial...), groups
    ((2, 6, 3, 3), 3), ((1, 8, 5), 4), ((3, 4, 2, 2, 2), 2),
    ((2, 12, 7, 1), 4), ((2, 4), 2), ((4, 9, 3), 3), ((2, 32, 4, 4), 8),
    ((1, 6, 3, 3), 1), ((2, 6, 2, 3), 6),
]
TYPES = [("f32", "f32"), ("bf16", "bf16"), ("f16", "f16"), ("bf16", "f32")]
AFFINE = [(True, True), (True, False), (False, True), (False, False)]


def random_cases(seed, count):
    """`count` more cases drawn from `seed`: N 1-3, G 1-6 groups of 1-5
    channels, 0-3 spatial dims of 1-5, NCHW or channels last, any type
    pair, weight and bias each or not, static or run-time N and spatial
    dims."""
    rng = random.Random(f"group-norm-random/{seed}")
    cases = []
    for _ in range(count):
        groups = rng.randint(1, 6)
        c = groups * rng.randint(1, 5)
        spatial = [rng.randint(1, 5) for _ in range(rng.randint(0, 3))]
        last = rng.random() < 0.5
        shape = ((rng.randint(1, 3), *spatial, c) if last
                 else (rng.randint(1, 3), c, *spatial))
        x_t, p_t = rng.choice(TYPES)
        has_w, has_b = rng.choice(AFFINE)
        cases.append(Case(shape, groups, last, x_t,
                          p_t if has_w else None, p_t if has_b else None,
                          dynamic=rng.random() < 0.5))
    return cases


def all_cases():
    cases = []
    k = 0
    for shape, groups in SHAPES:
        for channels_last in (False, True):
            if channels_last:
                shape = (shape[0], *shape[2:], shape[1])
            for x_t, p_t in TYPES:
                has_w, has_b = AFFINE[k % len(AFFINE)]
                k += 1
                # Every third case with run-time N and spatial dims.
                cases.append(Case(shape, groups, channels_last, x_t,
                                  p_t if has_w else None,
                                  p_t if has_b else None,
                                  dynamic=k % 3 == 0))
    return cases


def gen_inputs(case: Case, seed):
    """Seeded inputs, none zero: per (sample, group) slab an offset of 0.5
    to 2 either way and a scale away from 1 (so mean and rstd matter), dy
    correlated with x (so both slab sums matter), weights 1 +- 0.5 at least
    0.1 from 1 and different per channel (so a wrong channel shows)."""
    rng = random.Random(f"{seed}/{case.name}")
    xt = nn.DTYPES[case.x_type]
    N, C, S, G = case.shape[0], case.channels, case.spatial, case.groups
    cg = C // G
    size = N * C * S
    x, dy = [0.0] * size, [0.0] * size
    mean, rstd = [], []
    for n in range(N):
        for g in range(G):
            idx = [case.index(n, c, s)
                   for c in range(g * cg, (g + 1) * cg) for s in range(S)]
            vals, dvals, m, r = nn.draw_norm_group(rng, xt, len(idx))
            for i, v, d in zip(idx, vals, dvals):
                x[i], dy[i] = v, d
            mean.append(m)
            rstd.append(r)
    w = b = None
    if case.w_type:
        wt = nn.DTYPES[case.w_type]
        w = [nn._nonzero(lambda: 1.0 + 0.5 * rng.gauss(0.0, 1.0), wt, 0.1,
                         away_from=1.0) for _ in range(C)]
    if case.b_type:
        bt = nn.DTYPES[case.b_type]
        b = [nn._nonzero(lambda: rng.gauss(0.0, 1.0), bt) for _ in range(C)]
    return dict(dy=dy, x=x, mean=mean, rstd=rstd, w=w, b=b)


def _degenerate(c):
    """Slabs of two elements: xhat = +-1 and dx cancels to ~1e-5 of its
    terms (as LayerNorm's N = 2), so dx hardly depends on rstd or w."""
    return (c.channels // c.groups) * c.spatial <= 2


# Deliberately wrong references, with the cases each one changes.
MUTANTS = {
    "dx-no-mean-wdy-term": lambda c: True,
    "dx-no-projection-term": lambda c: True,
    "dx-no-outer-rstd": lambda c: not _degenerate(c),
    # Channel c in group c % G instead of c // (C / G).
    "groups-interleaved": lambda c: 1 < c.groups < c.channels,
    # The weight indexed by the channel's place in its group.
    "w-by-place-in-group": lambda c: c.w_type is not None and c.groups > 1
        and not _degenerate(c),
    "dw-db-first-sample-only": lambda c: c.shape[0] > 1
        and (c.w_type is not None or c.b_type is not None),
}


def reference(case: Case, inp, mutant=None):
    """float64: per slab (n, g) of M = (C / G) x spatial elements,
    xhat = (x - mean) * rstd, wdy = w[c] * dy,
    dx = rstd * (wdy - mean(wdy) - xhat * mean(xhat * wdy));
    dw[c] = sum over (n, s) of dy * xhat, db[c] = sum of dy. Returns
    ({name: values}, {name: term magnitudes}) for nn.rel_l2."""
    N, C, S, G = case.shape[0], case.channels, case.spatial, case.groups
    cg = C // G
    x, dy, w = inp["x"], inp["dy"], inp["w"]
    dx = [0.0] * len(x)
    sdx = [0.0] * len(x)
    dw_terms = [[] for _ in range(C)]
    db_terms = [[] for _ in range(C)]

    def group_of(c):
        return c % G if mutant == "groups-interleaved" else c // cg

    def weight(c):
        if w is None:
            return 1.0
        return w[c % cg] if mutant == "w-by-place-in-group" else w[c]

    for n in range(N):
        for g in range(G):
            m, r = inp["mean"][n * G + g], inp["rstd"][n * G + g]
            chans = [c for c in range(C) if group_of(c) == g]
            idx = [(c, case.index(n, c, s)) for c in chans for s in range(S)]
            xhat = {i: (x[i] - m) * r for _, i in idx}
            wdy = {i: weight(c) * dy[i] for c, i in idx}
            a = math.fsum(wdy.values()) / len(idx)
            p = math.fsum(xhat[i] * wdy[i] for _, i in idx) / len(idx)
            if mutant == "dx-no-mean-wdy-term":
                a = 0.0
            if mutant == "dx-no-projection-term":
                p = 0.0
            outer = 1.0 if mutant == "dx-no-outer-rstd" else r
            for c, i in idx:
                dx[i] = outer * (wdy[i] - a - xhat[i] * p)
                sdx[i] = abs(r * wdy[i]) + abs(r * a) + abs(r * xhat[i] * p)
                if n == 0 or mutant != "dw-db-first-sample-only":
                    dw_terms[c].append(dy[i] * xhat[i])
                    db_terms[c].append(dy[i])
    values, scales = {"dx": dx}, {"dx": sdx}
    if case.w_type:
        values["dw"] = [math.fsum(t) for t in dw_terms]
        scales["dw"] = [math.fsum(map(abs, t)) for t in dw_terms]
    if case.b_type:
        values["db"] = [math.fsum(t) for t in db_terms]
        scales["db"] = [math.fsum(map(abs, t)) for t in db_terms]
    return values, scales


def compare(case, got, ref):
    """[(result, element type, error, tolerance, ok)]: ok fails on NaN."""
    values, scales = ref
    rows = []
    for name, elem, _ in case.outputs():
        err = nn.rel_l2(got[name], values[name], scales[name])
        tol = nn.DTYPES[elem].tolerance
        rows.append((name, elem, err, tol, within(err, tol)))
    return rows


class Module(nn.ModuleBuilder):
    def add(self, case: Case, inp):
        k = self.count
        self.count += 1
        tx = nn.tensor_type(case.func_shape(), case.x_type)
        ts = nn.tensor_type((case.func_shape()[0], case.groups), "f32")
        static = {tx: nn.tensor_type(case.shape, case.x_type),
                  ts: nn.tensor_type((case.shape[0], case.groups), "f32")}
        args = [("dy", tx, inp["dy"], case.x_type),
                ("x", tx, inp["x"], case.x_type),
                ("mean", ts, inp["mean"], "f32"),
                ("rstd", ts, inp["rstd"], "f32")]
        affine = ""
        for key, name, t in (("w", "weight", case.w_type),
                             ("b", "bias", case.b_type)):
            if t:
                tp = nn.tensor_type((case.channels,), t)
                args.append((key, tp, inp[key], t))
                affine += f" {name}(%{key} : {tp})"
        attrs = f"groups = {case.groups} : i64" + (
            ", channels_last" if case.channels_last else "")
        outs = [nn.tensor_type(case.func_shape() if n == "dx" else s, e)
                for n, e, s in case.outputs()]
        nres = len(outs)
        res = "%r" if nres == 1 else f"%r:{nres}"
        rets = ["%r"] if nres == 1 else [f"%r#{i}" for i in range(nres)]
        sig = ", ".join(f"%{a[0]}: {a[1]}" for a in args)
        if case.b_type and not case.w_type:  # see nn.ModuleBuilder.add
            opnds = ", ".join("%" + a[0] for a in args)
            op_text = (f'"norm.group_norm_grad"({opnds}) <{{{attrs.replace("channels_last", "channels_last = unit")}, '
                       "operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 1>, "
                       "resultSegmentSizes = array<i32: 1, 0, 1>}>\n"
                       f"      : ({', '.join(a[1] for a in args)}) -> "
                       f"({', '.join(outs)})")
        else:
            op_text = (f"norm.group_norm_grad %dy, %x, %mean, %rstd{affine}"
                       f" {{{attrs}}}\n      : {tx}, {ts} -> {', '.join(outs)}")
        self.funcs.append(f"""\
// case {k}: {case.name}
func.func @gn_case_{k}({sig}) -> ({", ".join(outs)}) {{
  {res} = {op_text}
  return {", ".join(rets)} : {", ".join(outs)}
}}
""")
        body = [f"  // case {k}: {case.name}"]
        for name, t, vals, elem in args:
            st = static.get(t, t)
            body.append(f"  %c{k}_{name} = arith.constant "
                        f"{nn.dense_hex(vals, elem)} : {st}")
            if st != t:
                body.append(f"  %c{k}_{name}_d = tensor.cast %c{k}_{name}"
                            f" : {st} to {t}")
        call_args = ", ".join(f"%c{k}_{a[0]}" + ("_d" if static.get(
            a[1], a[1]) != a[1] else "") for a in args)
        body.append(f"  {res.replace('%r', f'%r{k}')} = call @gn_case_{k}"
                    f"({call_args}) : ({', '.join(a[1] for a in args)}) -> "
                    f"({', '.join(outs)})")
        for i, (_, elem, shape) in enumerate(case.outputs()):
            p = self._printer(shape, elem)
            v = f"%r{k}" if nres == 1 else f"%r{k}#{i}"
            if outs[i] != nn.tensor_type(shape, elem):
                body.append(f"  %r{k}_s{i} = tensor.cast {v} : {outs[i]} to "
                            f"{nn.tensor_type(shape, elem)}")
                v = f"%r{k}_s{i}"
            body.append(f"  call @{p}({v}) : "
                        f"({nn.tensor_type(shape, elem)}) -> ()")
        self.main.extend(body)


# The reshapes' index math (memref.expand_shape / collapse_shape after
# bufferization) becomes affine.apply: lowered with the rest.
DECOMPOSED = list(nn.LOWERING)
DECOMPOSED.insert(DECOMPOSED.index("--expand-strided-metadata") + 1,
                  "--lower-affine")
# The fused paths: the pipeline on the op, and on its decomposition after
# upstream elementwise fusion (the generics a fusing front end leaves).
FUSE_ELEMENTWISE = ("--norm-decompose", "--linalg-fuse-elementwise-ops")
PATHS = {
    "decomposed": DECOMPOSED,
    "pipeline": nn.fused_pipeline(3),
    "pipeline-fused-elementwise": [*FUSE_ELEMENTWISE, *nn.fused_pipeline(3)],
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--opt", default="norm-opt")
    ap.add_argument("--runner", default="mlir-runner")
    ap.add_argument("--shared-lib-dir", default="")
    ap.add_argument("--seed", default="20261128")
    ap.add_argument("--random", type=int, default=12,
                    help="cases drawn at random (from --seed) after the "
                         "fixed ones")
    ap.add_argument("--keep", help="write the modules to this directory")
    ap.add_argument("--mutant", choices=list(MUTANTS))
    ap.add_argument("--check-mutants", action="store_true")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args()

    cases = all_cases() + random_cases(args.seed, args.random)
    inputs = [gen_inputs(c, args.seed) for c in cases]
    mb = Module()
    for c, i in zip(cases, inputs):
        mb.add(c, i)
    libs = nn.runner_libs(args.runner, args.shared_lib_dir)
    workdir = args.keep or tempfile.mkdtemp(prefix="gn-numerics-")
    os.makedirs(workdir, exist_ok=True)
    failed = compared = 0
    worst = {}
    caught = nn.MutantTally(MUTANTS)
    # The pipeline path is fused: one multi-axis group per case with dγ or
    # dβ (without them there is no column reduction, so nothing to fuse).
    want = sum(1 for c in cases if c.w_type or c.b_type)
    for pre in ((), FUSE_ELEMENTWISE):
        groups = nn.multi_axis_groups(args.opt, mb.text(), workdir, pre)
        print(f"{'FUSED' if groups == want else 'FAIL fused'}: {groups} "
              f"multi-axis groups (expected {want}){' after ' if pre else ''}"
              f"{' '.join(pre)}")
        failed += groups != want
    for path, printed in nn.run_paths(mb.text(), "group_norm", PATHS,
                                      args.opt, args.runner, libs, workdir):
        for case, inp in zip(cases, inputs):
            got = {}
            for name, _, shape in case.outputs():
                pshape, vals = next(printed, (None, None))
                if pshape != tuple(shape) or len(vals) != math.prod(shape):
                    sys.exit(f"error: {path} {case.name}: printed {name} has "
                             f"shape {pshape}, expected {shape}")
                got[name] = vals
            rows = compare(case, got, reference(case, inp, args.mutant))
            compared += 1
            for name, elem, err, _, _ in rows:
                nn.keep_worst(worst, (path, name, elem), err, case.name)
            failed += not nn.report_case(path, case.name, rows, args.quiet)
            if args.check_mutants:
                nn.tally_mutants(
                    caught, MUTANTS, case, f"{path}/{case.name}",
                    lambda m: compare(case, got, reference(case, inp, m)))

    for (path, name, elem), (err, cname) in sorted(worst.items()):
        print(f"WORST {path} {name} {elem:<4} {err:.2e} "
              f"(tolerance {nn.DTYPES[elem].tolerance:.0e}) in {cname}")
    if compared != len(cases) * len(PATHS):
        sys.exit(f"error: compared {compared} of "
                 f"{len(cases) * len(PATHS)} cases")
    missed = (caught.report("cases", MUTANT_MIN_CAUGHT)
              if args.check_mutants else [])
    return nn.finish(failed, compared, missed)


if __name__ == "__main__":
    sys.exit(main())
