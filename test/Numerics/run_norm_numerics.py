#!/usr/bin/env python3
"""CPU numerics test of `norm-opt --norm-decompose`.

Builds one MLIR module holding many norm.layer_norm_grad / norm.rms_norm_grad
cases (seeded random inputs), lowers it with norm-opt, runs it once with
mlir-runner, and compares every result with a float64 reference. Prints one
line per case and a summary; exits non-zero if any case fails.

  run_norm_numerics.py --opt norm-opt --runner mlir-runner [--op rms_norm]
      [--dtype bf16] [--shared-lib-dir DIR] [--seed S] [--keep DIR]
      [--all-shapes] [--mutant NAME] [--check-mutants] [-q]

--mutant NAME compares against a deliberately wrong reference (see
norm_numerics.MUTANTS): the run must then fail. --check-mutants also
compares every case with every mutant that applies to it, and fails unless
each mutant fails at least MUTANT_MIN_CAUGHT of the cases it applies to
(a single short row can, by chance, hide one term: its mean may be ~0).
The mutants tried are those that can apply to the --op set (mutants_for);
one of them that applies to no case of the run (too few --dtype or shapes)
fails it.

Python 3.11 standard library only (no numpy).
"""

import argparse
import math
import os
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
import norm_numerics as nn  # noqa: E402

# Activation / weight / bias type configurations.
DTYPE_CONFIGS = {
    "f32": ("f32", "f32"),
    "bf16": ("bf16", "bf16"),
    "f16": ("f16", "f16"),
    # f32 weight (and bias) with bf16 / f16 activations.
    "bf16-f32w": ("bf16", "f32"),
    "f16-f32w": ("f16", "f32"),
}
# Affine variants: (has weight, zero-centred, has bias).
AFFINE = {
    "none": (False, False, False),
    "b": (False, False, True),
    "w": (True, False, False),
    "wb": (True, False, True),
    "zcw": (True, True, False),
    "zcwb": (True, True, True),
}
SHAPES = ([(r, n) for r in (1, 3, 17) for n in (1, 7, 64, 130)]
          + [(2, 3, 7), (2, 3, 64), (4, 5, 130), (3, 1, 1)])
# Shapes per (op, types, affine variant) unless --all-shapes: a rotating
# window over SHAPES, so every (op, types) pair still sees every shape.
SHAPES_PER_VARIANT = 6
# --check-mutants: the fraction of applicable cases each mutant must fail.
MUTANT_MIN_CAUGHT = 0.95


def all_cases(ops, dtypes, all_shapes=False):
    cases = []
    for op in ops:
        for cfg in dtypes:
            x_type, p_type = DTYPE_CONFIGS[cfg]
            variant = 0
            for aff, (has_w, zc, has_b) in AFFINE.items():
                if p_type != x_type and not (has_w or has_b):
                    continue  # same as the plain x_type case
                if all_shapes:
                    shapes = SHAPES
                else:
                    k = SHAPES_PER_VARIANT
                    shapes = [SHAPES[(variant * k + j) % len(SHAPES)]
                              for j in range(k)]
                variant += 1
                for shape in shapes:
                    cases.append(nn.Case(op, shape, x_type,
                                         p_type if has_w else None,
                                         p_type if has_b else None, zc))
    return cases


def mutants_for(ops):
    """The mutants that can apply to these ops: to some case of them with
    any types, affine variant and shape (a LayerNorm-only mistake is not
    tried on an RMSNorm run). Each of these must then apply to a case of
    the run, and be caught: one that applies to none fails it."""
    every = all_cases(ops, list(DTYPE_CONFIGS), all_shapes=True)
    return [m for m, applies in nn.MUTANTS.items() if any(map(applies, every))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--opt", default="norm-opt", help="norm-opt binary")
    ap.add_argument("--runner", default="mlir-runner",
                    help="mlir-runner binary")
    ap.add_argument("--shared-lib-dir", default="",
                    help="directory of libmlir_(c_)runner_utils.so "
                         "(default: ../lib next to mlir-runner)")
    ap.add_argument("--op", action="append",
                    choices=["layer_norm", "rms_norm"],
                    help="op(s) to test (default: both)")
    ap.add_argument("--dtype", action="append", choices=list(DTYPE_CONFIGS),
                    help="type configuration(s) (default: all)")
    ap.add_argument("--all-shapes", action="store_true",
                    help="every shape for every variant (slow)")
    ap.add_argument("--seed", default="20240611")
    ap.add_argument("--keep", help="write the modules to this directory")
    ap.add_argument("--mutant", choices=list(nn.MUTANTS),
                    help="compare with a wrong reference (must fail)")
    ap.add_argument("--check-mutants", action="store_true",
                    help="report which cases catch each wrong reference")
    ap.add_argument("-q", "--quiet", action="store_true",
                    help="print failing cases only")
    args = ap.parse_args()

    t0 = time.monotonic()
    ops = args.op or ["layer_norm", "rms_norm"]
    cases = all_cases(ops, args.dtype or list(DTYPE_CONFIGS), args.all_shapes)
    inputs = [nn.gen_inputs(c, args.seed) for c in cases]
    mb = nn.ModuleBuilder()
    for c, i in zip(cases, inputs):
        mb.add(c, i)
    libs = nn.runner_libs(args.runner, args.shared_lib_dir)

    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        printed = nn.run_pipeline(mb.text(), args.keep, args.opt,
                                  args.runner, libs)
    else:
        with tempfile.TemporaryDirectory(prefix="norm-numerics-") as d:
            printed = nn.run_pipeline(mb.text(), d, args.opt, args.runner,
                                      libs)
    t_run = time.monotonic()

    memrefs = iter(nn.parse_printed(printed))
    failed = 0
    worst = {}  # (result, type) -> (error, case name)
    caught = nn.MutantTally(mutants_for(ops) if args.check_mutants else [])
    for case, inp in zip(cases, inputs):
        got = {}
        for name, elem, shape in case.outputs():
            pshape, vals = next(memrefs, (None, None))
            if pshape != tuple(shape) or len(vals) != math.prod(shape):
                sys.exit(f"error: {case.name}: printed {name} has shape "
                         f"{pshape}, expected {shape}")
            got[name] = vals
        ref = nn.reference(case, inp, args.mutant)
        rows = nn.compare_case(case, got, ref)
        ok = all(r[4] for r in rows)
        failed += not ok
        for name, elem, err, tol, _ in rows:
            nn.keep_worst(worst, (name, elem), err, case.name)
        if not ok or not args.quiet:
            errs = "  ".join(f"{n}({e})={err:.2e}/{tol:.0e}"
                             for n, e, err, tol, _ in rows)
            print(f"{'PASS' if ok else 'FAIL'} {case.name:<32} {errs}")
        if args.check_mutants:
            for m, applies in nn.MUTANTS.items():
                if m in caught and applies(case):
                    caught.record(m, case.name, nn.compare_case(
                        case, got, nn.reference(case, inp, m)))
    if next(memrefs, None) is not None:
        sys.exit("error: more results printed than expected")
    t_end = time.monotonic()

    for (name, elem), (err, cname) in sorted(worst.items()):
        print(f"WORST {name} {elem:<4} {err:.2e} "
              f"(tolerance {nn.DTYPES[elem].tolerance:.0e}) in {cname}")
    missed = caught.report("cases", MUTANT_MIN_CAUGHT)
    print(f"TIME generate+lower+run {t_run - t0:.1f}s, "
          f"reference+compare {t_end - t_run:.1f}s")
    return nn.finish(failed, len(cases), missed)


if __name__ == "__main__":
    sys.exit(main())
