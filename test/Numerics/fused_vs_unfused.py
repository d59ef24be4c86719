#!/usr/bin/env python3
"""Fused vs unfused CPU numerics of norm.layer_norm_grad / norm.rms_norm_grad.

Every case runs on seeded random inputs (never zero) through

  unfused : norm-opt --norm-decompose + upstream lowering only (LOWERING),
  fused   : norm-opt --norm-lower-to-cpu=programs=P for P = 1, 3 and 132
            (decompose, recognition, partial accumulation, lowering),

and is checked as follows (a case fails on any of these):

  1. each path's dx / dW / dB against the float64 reference: relative L2
     error within the tolerance of the result's type (f32 1e-5, f16 1e-3,
     bf16 8e-3; see ../lib-python/norm_numerics.py);
  2. the fused path really fused: right after recognition the case's
     function holds a norm.mixed_reduction and no linalg reduction, and
     after partial accumulation an scf.forall (read from the pipeline's own
     -mlir-print-ir-after dumps, for every P). A case without weight and
     bias has no column reduction: it must stay unfused (and still match);
  3. dx is bitwise the same for every P (it does not depend on P);
  4. dW / dB for every two P agree within f32 summation-order rounding:
     |a - b| <= 1.01 (gamma_h1 + gamma_h2) sum|terms| (+ u_out (|a|+|b|)
     when stored in bf16/f16), h = ceil(rows/P) + P additions
     (norm_numerics.column_agreement has the derivation);
  5. the P = 3 binary run twice prints bitwise-identical results.

Covering design (the full product, 2 ops x 6 affine variants x 3 types x
16 (rows, N) x 3 P, is 1728 cases, 864 of them with 256K to 1M elements:
too slow with a pure-Python float64 reference):

  - P is not sampled: every case runs at P = 1, 3 and 132 (so P meets
    every other factor, incl. rows < P and rows not divisible by P);
  - the 14 (rows, N) pairs of rows in {1, 3, 64, 1000}, N in {1, 7, 256,
    1031} other than the two heavy ones ((1000, 256), (1000, 1031)) each
    get all 6 (op, type) combinations (op in LayerNorm / RMSNorm, type in
    f32 / bf16 / f16 for x, w and b), the affine variant rotating with the
    shape: affine = [none, b, w, wb, zcw, zcwb][(shape# + combo#) % 6].
    So every light shape meets every op, type and affine variant, and
    every (op, type, affine) triple occurs (2 x 3 x 6 = 36 of them);
  - one case per light shape with f32 weight/bias and bf16/f16 x
    (the mixed-precision configuration), op and affine rotating;
  - a third of the cases use rank-3 [B, S, N] for the same rows
    (64 = 4x16, 1000 = 8x125, 3 = 1x3, 1 = 1x1);
  - the heavy shapes appear twice each (4 cases, both ops, f32 / bf16 /
    f16 / bf16 with f32 weight, weight and bias).

  run: fused_vs_unfused.py --opt norm-opt --runner mlir-runner
       [--shared-lib-dir DIR] [--seed S] [--small] [--limit K]
       [--mutant NAME]
       [--no-fuse] [--p-bound-scale X] [--keep DIR] [-q]

--small keeps the cases with at most 2048 elements, --limit K at most K of
them, evenly spread (for the self-checks).
--mutant NAME compares with a deliberately wrong reference (must fail);
--check-mutants compares every case of at most 4096 elements with every
wrong reference that applies to it (norm_numerics.MUTANTS), and fails
unless each is caught in at least 95% of those;
--no-fuse lowers the "fused" path without the norm passes (every case with
weight or bias must then fail check 2); --p-bound-scale 0 makes check 4
demand bitwise-equal dW/dB across P (which summation order does not give).
Python 3.11 standard library only.
"""

import argparse
import array
import concurrent.futures
import math
import os
import sys
import tempfile
import time

sys.dont_write_bytecode = True
import norm_numerics as nn  # noqa: E402

ROWS = (1, 3, 64, 1000)
HIDDEN = (1, 7, 256, 1031)
PROGRAMS = (1, 3, 132)
REPEAT_P = 3
MUTANT_MIN_CAUGHT = 0.95
HEAVY = ((1000, 256), (1000, 1031))
OPS = ("layer_norm", "rms_norm")
TYPES = ("f32", "bf16", "f16")
# (has weight, zero-centred, has bias)
AFFINE = {
    "none": (False, False, False),
    "b": (False, False, True),
    "w": (True, False, False),
    "wb": (True, False, True),
    "zcw": (True, True, False),
    "zcwb": (True, True, True),
}
AFFINE_NAMES = tuple(AFFINE)
MIXED_AFFINE = ("w", "wb", "zcw", "zcwb", "b")
RANK3 = {1: (1, 1), 3: (1, 3), 64: (4, 16), 1000: (8, 125)}
HEAVY_CASES = (
    ("layer_norm", 1000, 256, "bf16", "bf16", "wb", True),
    ("rms_norm", 1000, 256, "f16", "f16", "zcwb", False),
    ("layer_norm", 1000, 1031, "f32", "f32", "wb", False),
    ("rms_norm", 1000, 1031, "bf16", "f32", "zcwb", True),
)


def make_case(op, rows, n, x_type, p_type, affine, rank3):
    has_w, zc, has_b = AFFINE[affine]
    shape = (*RANK3[rows], n) if rank3 else (rows, n)
    return nn.Case(op, shape, x_type, p_type if has_w else None,
                   p_type if has_b else None, zc)


def design():
    light = [(r, n) for r in ROWS for n in HIDDEN if (r, n) not in HEAVY]
    combos = [(op, t) for op in OPS for t in TYPES]
    cases = []
    for s, (r, n) in enumerate(light):
        for c, (op, t) in enumerate(combos):
            cases.append(make_case(op, r, n, t, t,
                                   AFFINE_NAMES[(s + c) % len(AFFINE)],
                                   (s + c) % 3 == 0))
        cases.append(make_case(OPS[(s // 2) % 2], r, n, ("bf16", "f16")[s % 2],
                               "f32", MIXED_AFFINE[s % len(MIXED_AFFINE)],
                               s % 3 == 1))
    cases += [make_case(*h) for h in HEAVY_CASES]
    return cases


def affine_of(c):
    return next(k for k, v in AFFINE.items()
                if v == (c.w_type is not None, c.zero_centered,
                         c.b_type is not None))


def check_design(cases):
    """The coverage claimed in the header, checked; returns a summary."""
    pairs = {(c.rows, c.hidden) for c in cases}
    assert pairs == {(r, n) for r in ROWS for n in HIDDEN}, pairs
    triples = {(c.op, c.x_type, affine_of(c)) for c in cases
               if c.w_type in (None, c.x_type) and c.b_type in (None,
                                                                c.x_type)}
    assert len(triples) == len(OPS) * len(TYPES) * len(AFFINE), triples
    for r, n in pairs - set(HEAVY):
        sub = [c for c in cases if (c.rows, c.hidden) == (r, n)]
        assert {c.op for c in sub} == set(OPS)
        assert {c.x_type for c in sub} == set(TYPES)
        assert {affine_of(c) for c in sub} == set(AFFINE)
    heavy = [c for c in cases if (c.rows, c.hidden) in HEAVY]
    return (f"{len(cases)} cases x {len(PROGRAMS)} P: {len(pairs)} "
            f"(rows, N) pairs, {len(triples)} (op, type, affine) triples, "
            f"{sum(len(c.shape) == 3 for c in cases)} rank-3, "
            f"{len(heavy)} heavy, "
            f"{sum(c.rows * c.hidden for c in cases)} elements")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--opt", default="norm-opt")
    ap.add_argument("--runner", default="mlir-runner")
    ap.add_argument("--shared-lib-dir", default="")
    ap.add_argument("--seed", default="20240611")
    ap.add_argument("--small", action="store_true",
                    help="only cases with at most 2048 elements")
    ap.add_argument("--limit", type=int, default=0,
                    help="at most this many cases, evenly spread")
    ap.add_argument("--mutant", choices=list(nn.MUTANTS))
    ap.add_argument("--check-mutants", action="store_true",
                    help="every wrong reference must fail (nearly) every "
                         "case of at most 4096 elements it applies to")
    ap.add_argument("--no-fuse", action="store_true",
                    help="self-check: lower the fused path without fusion")
    ap.add_argument("--p-bound-scale", type=float, default=1.0,
                    help="self-check: scale the dW/dB agreement bound")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--keep", help="keep the modules and outputs here")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args()

    t0 = time.monotonic()
    cases = design()
    summary = check_design(cases)
    if args.small:
        cases = [c for c in cases if c.rows * c.hidden <= 2048]
    if args.limit and args.limit < len(cases):
        step = len(cases) / args.limit
        cases = [cases[int(i * step)] for i in range(args.limit)]
    print(f"DESIGN {summary}")

    mb = nn.ModuleBuilder()
    inputs = []
    for c in cases:
        inp = nn.gen_inputs(c, args.seed)
        mb.add(c, inp)
        # Keep the inputs compact (8 bytes a value) until the reference.
        inp.x, inp.dy = array.array("d", inp.x), array.array("d", inp.dy)
        inputs.append(inp)
    libs = nn.runner_libs(args.runner, args.shared_lib_dir)

    tmp = None
    if args.keep:
        work = args.keep
        os.makedirs(work, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="norm-fused-")
        work = tmp.name
    src = os.path.join(work, "cases.mlir")
    with open(src, "w") as f:
        f.write(mb.text())
    del mb
    t_gen = time.monotonic()

    def fused_passes(p):
        if args.no_fuse:
            return nn.LOWERING + nn.IR_DUMP_FLAGS
        return nn.fused_pipeline(p) + nn.IR_DUMP_FLAGS

    def build(key, passes):
        bc = os.path.join(work, f"{key}.mlirbc")
        return key, bc, nn.compile_module(args.opt, src, bc, passes)

    def run(key, bc, tag=""):
        return nn.run_module_to_file(args.runner, bc, libs,
                                     os.path.join(work, f"{key}{tag}.out"))

    jobs = [("unfused", nn.LOWERING)] + [
        (f"P{p}", fused_passes(p)) for p in PROGRAMS]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
        built = list(ex.map(lambda j: build(*j), jobs))
        bcs = {k: bc for k, bc, _ in built}
        dumps = {k: nn.parse_ir_dumps(err) for k, _, err in built}
        runs = [("unfused", ""), *((f"P{p}", "") for p in PROGRAMS),
                (f"P{REPEAT_P}", ".again")]
        outs = list(ex.map(lambda r: run(r[0], bcs[r[0]], r[1]), runs))
    printed = {k + t: o for (k, t), o in zip(runs, outs)}
    t_run = time.monotonic()

    failed = 0
    worst = {}  # (path, result, type) -> (error, case)
    worst_ratio = (0.0, "")
    n_p_differ = 0  # dW/dB results not bitwise equal across P
    caught = nn.MutantTally(nn.MUTANTS if args.check_mutants else [])
    n_fused = n_unfusable = n_identical_p1 = 0
    pos = 0  # index of the case's first printed memref
    for k, (case, inp) in enumerate(zip(cases, inputs)):
        outs_desc = case.outputs()
        idx = list(range(pos, pos + len(outs_desc)))
        pos += len(outs_desc)
        problems = []
        for key, pf in printed.items():
            for i, (name, _, shape) in zip(idx, outs_desc):
                if i >= len(pf) or pf.shape(i) != tuple(shape):
                    sys.exit(f"error: {key}: {case.name}: printed {name} "
                             "is missing or has the wrong shape")
        ref = nn.reference(case, inp, args.mutant)
        inputs_keep = inp
        inputs[k] = None
        # Parse each printed result once: most are bitwise the same on
        # every path (then they share the parsed values).
        got = {}
        for key, pf in printed.items():
            if key.endswith(".again"):
                continue
            got[key] = {}
            for i, (name, _, _) in zip(idx, outs_desc):
                same = next((k for k in got if k != key and
                             printed[k].raw(i) == pf.raw(i)), None)
                got[key][name] = (got[same][name] if same
                                  else pf.values(i))
        errs = {}
        cache = {}  # id(values) -> rows of compare_case: parsed once, so
        #            results shared between paths are compared once
        for key in ["unfused"] + [f"P{p}" for p in PROGRAMS]:
            path = "unfused" if key == "unfused" else "fused"
            ck = tuple(id(got[key][name]) for name, _, _ in outs_desc)
            if ck not in cache:
                cache[ck] = nn.compare_case(case, got[key], ref)
            for name, elem, err, tol, ok in cache[ck]:
                if not ok:
                    problems.append(f"{key} {name}({elem}) error {err:.2e} "
                                    f"> {tol:.0e}")
                # worst_of / keep_worst keep a NaN (max() may drop it).
                errs[(path, name)] = nn.worst_of(
                    [errs.get((path, name), 0.0), err])
                nn.keep_worst(worst, (path, name, elem), err, case.name)
        # 2. fusion
        expect = case.w_type is not None or case.b_type is not None
        as_expected = True
        for p in PROGRAMS:
            fused, why = nn.fusion_status(dumps[f"P{p}"], f"norm_case_{k}")
            if fused != expect:
                as_expected = False
                problems.append(f"P{p} " + (f"not fused: {why}" if expect
                                            else "fused a case without "
                                            "column reductions"))
        n_fused += expect and as_expected
        n_unfusable += not expect and as_expected
        # 3. dx bitwise the same for every P; 4. dW/dB agree across P
        for i, (name, elem, _) in zip(idx, outs_desc):
            if name == "dx":
                raws = {printed[f"P{p}"].raw(i) for p in PROGRAMS}
                if len(raws) != 1:
                    problems.append("dx differs between P values")
                continue
            n_p_differ += len({printed[f"P{p}"].raw(i)
                               for p in PROGRAMS}) > 1
            for a, b in ((1, 3), (1, 132), (3, 132)):
                r, j = nn.column_agreement(
                    got[f"P{a}"][name], got[f"P{b}"][name], ref.scales[name],
                    case.rows, a, b, elem)
                if args.p_bound_scale:
                    r /= args.p_bound_scale
                elif r > 0.0:
                    r = math.inf
                if not r <= worst_ratio[0]:
                    worst_ratio = (r, f"{case.name} {name} P{a}/P{b}")
                if not r <= 1.0:  # column_agreement: inf on a NaN
                    problems.append(f"{name}[{j}] P={a} vs P={b}: "
                                    f"{r:.2f} x the rounding bound")
        # 5. two runs bitwise identical
        again = printed[f"P{REPEAT_P}.again"]
        if any(printed[f"P{REPEAT_P}"].raw(i) != again.raw(i) for i in idx):
            problems.append(f"P{REPEAT_P}: two runs differ")
        if all(printed["unfused"].raw(i) == printed["P1"].raw(i)
               for i in idx):
            n_identical_p1 += 1
        for mu, applies in nn.MUTANTS.items():
            if mu in caught and applies(case) and \
                    case.rows * case.hidden <= 4096:
                caught.record(mu, case.name, nn.compare_case(
                    case, got["P3"], nn.reference(case, inputs_keep, mu)))
        ok = not problems
        failed += not ok
        if not ok or not args.quiet:
            e = "  ".join(f"{path[0]}:{name}={err:.1e}"
                          for (path, name), err in errs.items())
            print(f"{'PASS' if ok else 'FAIL'} {case.name:<34} {e}"
                  + (f"  [{'; '.join(problems)}]" if problems else ""))
    t_end = time.monotonic()
    for pf in printed.values():
        pf.close()
    if tmp:
        tmp.cleanup()

    for (path, name, elem), (err, cname) in sorted(worst.items()):
        print(f"WORST {path:<7} {name} {elem:<4} {err:.2e} "
              f"(tolerance {nn.DTYPES[elem].tolerance:.0e}) in {cname}")
    print(f"P-AGREEMENT {n_p_differ} dW/dB results differ between P values;"
          f" worst |dW/dB(P) - dW/dB(P')| / bound = {worst_ratio[0]:.3f} in "
          f"{worst_ratio[1]}")
    missed = caught.report("cases", MUTANT_MIN_CAUGHT)
    print(f"FUSION {n_fused} cases fused at every P, {n_unfusable} without "
          f"weight and bias left unfused as expected; {n_identical_p1} "
          f"cases bitwise identical between unfused and P=1")
    print(f"TIME generate {t_gen - t0:.1f}s, lower+run {t_run - t_gen:.1f}s,"
          f" reference+compare {t_end - t_run:.1f}s")
    return nn.finish(failed, len(cases), missed)


if __name__ == "__main__":
    sys.exit(main())
