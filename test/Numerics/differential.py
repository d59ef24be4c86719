#!/usr/bin/env python3
"""Randomized differential test: generated norm-backward programs, unfused
vs fused, both against a float64 reference and against each other.

Programs come from ../lib-python/norm_diffgen.py (LayerNorm / RMSNorm in
linalg on tensors the way front ends write them: weight / bias or not,
zero-centred weight, residual add, dy scale, dW / dB accumulation, bf16 /
f16 / f32 with f32 weights, rank 2 and 3, static and dynamic shapes,
permuted operands; one generic per step, upstream-fused generics, named
ops, hand-fused generics), and for about a third of them a whole graph in
f32 (norm_diffgen.Graph: dy out of a matmul, dx into one, a row max, a row
sum over another domain or a total sum beside the group, an input from a
call to a helper function, a second group of another N, alone or fed by
the first group's dx through a matmul), and for about a fifth of the others
integer and boolean inputs read by a rider on dy (norm_diffgen.Mask: a
dropout keep-mask in i8 or i1, a per-row i1 padding mask, per-row i32
ids). Each runs through

  unfused : mlir-opt with upstream passes only (UPSTREAM_LOWERING; no norm
            pass; the `fused` style first gets --linalg-fuse-elementwise-ops
            on both paths, that is its input form),
  fused   : norm-opt --norm-lower-to-cpu=programs=P,

and a program fails unless
  - the fused path fused it (norm.mixed_reduction after recognition, no
    linalg reduction left, scf.forall after partial accumulation); a graph
    has one norm.mixed_reduction per group, and the reductions left are
    its neighbours' (graph_fusion_status);
  - both paths are within the tolerance of each result's type of the
    float64 reference (relative L2, as in norm_numerics.rel_l2);
  - the two paths agree with each other within the same tolerance.

Programs are batched, --batch per module (one mlir-opt, one norm-opt and
two mlir-runner runs per module and path); P cycles over 3, 132, 1, 5 from
module to module.

  run: differential.py --opt norm-opt --mlir-opt mlir-opt
       --runner mlir-runner [--shared-lib-dir DIR] [--cases 200]
       [--seed 1] [--batch 250] [--mutant NAME] [--check-mutants]
       [--no-fuse] [--inject-nan] [--no-graphs] [--no-masks] [--keep DIR]
       [-q]

--cases 5000 --seed S runs thousands; --check-mutants also requires each
wrong reference to fail in at least 95% of the cases it applies to;
--mutant NAME compares with that wrong reference only (must fail);
--no-fuse lowers the fused path without the norm passes (must fail: the
test refuses a comparison where nothing fused); --inject-nan puts a NaN in
the first program's first fused result (that program must fail: a NaN is
never within tolerance).
--no-graphs generates one norm per function only (the single-norm programs
of a seed are the same with or without graphs); --no-masks draws no Mask
(the others stay the same).
Python 3.11 standard library only.
"""

import argparse
import concurrent.futures
import math
import os
import re
import sys
import tempfile
import time

sys.dont_write_bytecode = True
import norm_diffgen as dg  # noqa: E402
import norm_numerics as nn  # noqa: E402
from norm_opt.checks import within  # noqa: E402

P_CYCLE = (3, 132, 1, 5)
MUTANT_MIN_CAUGHT = 0.95


# A linalg reduction in the IR after recognition: a generic with a
# reduction loop, or linalg.reduce (named contractions do not match).
_REDUCTION = re.compile(
    r'iterator_types = \[[^\]]*"reduction"|linalg\.reduce\b')


def graph_fusion_status(dumps, p):
    """fusion_status for a graph: its neighbours' reductions may stay, but
    each group must be one norm.mixed_reduction and nothing but the
    neighbours' reductions may be left."""
    fused, why = nn.fusion_status(dumps, p.name, neighbours=True)
    if not fused:
        return fused, why
    after = dumps["norm-fuse-mixed-reductions"][p.name]
    groups = after.count("norm.mixed_reduction")
    if groups != len(p.groups):
        return False, (f"{groups} norm.mixed_reduction after recognition for "
                       f"{len(p.groups)} groups")
    left = len(_REDUCTION.findall(after))
    if left != p.graph.neighbour_reductions:
        return False, (f"{left} linalg reduction(s) left after recognition, "
                       f"{p.graph.neighbour_reductions} of them neighbours")
    return True, why


def multi_fusion_status(dumps, p):
    """fusion_status for a multi-axis program (norm_diffgen.MultiProgram):
    one norm.mixed_reduction per group (two for an adaLN chain), each the
    multi-axis group of its domain (the row_sum_dims and col_dims the
    program's reductions have: adaLN [B, S, N] rows over N, columns keeping
    (B, N); GroupNorm rows over the slab, columns keeping (G, C/G)), no
    linalg reduction left, scf.forall after partial accumulation."""
    fused, why = nn.fusion_status(dumps, p.name)
    if not fused:
        return fused, why
    after = dumps["norm-fuse-mixed-reductions"][p.name]
    groups = after.count("norm.mixed_reduction")
    if groups != p.n_groups:
        return False, (f"{groups} norm.mixed_reduction after recognition for "
                       f"{p.n_groups} groups")
    for attr, dims in (("row_sum_dims", p.row_sum_dims),
                       ("col_dims", p.col_dims)):
        want = f"{attr} = array<i64: {', '.join(map(str, dims))}>"
        if after.count(want) != p.n_groups:
            return False, f"not the expected multi-axis group ({want})"
    return True, why


def build_text(metas):
    """One module calling every program once on its inputs."""
    cm = nn.CallModule()
    for p, inp in metas:
        text, sig, rtypes = dg.emit_program(p)
        cm.add_func(text)
        cm.add_call(p.name, dg.call_args(p, inp, sig),
                    [(t, shape) for t, (_, _, shape) in zip(rtypes,
                                                            p.outputs())])
    return cm.text()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--opt", default="norm-opt")
    ap.add_argument("--mlir-opt", default="mlir-opt")
    ap.add_argument("--runner", default="mlir-runner")
    ap.add_argument("--shared-lib-dir", default="")
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--seed", default="1")
    ap.add_argument("--first", type=int, default=0,
                    help="index of the first program (to rerun one)")
    ap.add_argument("--batch", type=int, default=250)
    ap.add_argument("--mutant", choices=dg.all_mutants())
    ap.add_argument("--check-mutants", action="store_true")
    ap.add_argument("--no-fuse", action="store_true")
    ap.add_argument("--inject-nan", action="store_true",
                    help="self-check: a NaN in the first program's first "
                         "fused result (that program must fail)")
    ap.add_argument("--known-bugs", action="store_true",
                    help="also generate the forms of norm_diffgen.KNOWN_BUGS")
    ap.add_argument("--no-graphs", action="store_true",
                    help="one norm per function only (no norm_diffgen.Graph)")
    ap.add_argument("--no-masks", action="store_true",
                    help="no integer / boolean inputs (norm_diffgen.Mask)")
    ap.add_argument("--no-multi", action="store_true",
                    help="no multi-axis programs (norm_diffgen.MultiProgram:"
                         " adaLN, GroupNorm)")
    ap.add_argument("--multi-share", type=float, default=dg.MULTI_SHARE,
                    help="the share of multi-axis programs (1: all; a "
                         "larger share keeps the smaller one's)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--keep")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args()

    t0 = time.monotonic()
    progs = [dg.gen_program(i, args.seed, args.known_bugs,
                            graphs=not args.no_graphs,
                            masks=not args.no_masks,
                            multi=not args.no_multi and args.multi_share)
             for i in range(args.first, args.first + args.cases)]
    # Modules: the `fused` style needs upstream elementwise fusion first.
    groups = []
    for pre in (False, True):
        sel = [p for p in progs if p.needs_elementwise_fusion == pre]
        for i in range(0, len(sel), args.batch):
            groups.append((pre, sel[i:i + args.batch]))
    libs = nn.runner_libs(args.runner, args.shared_lib_dir)
    tmp = None
    if args.keep:
        work = args.keep
        os.makedirs(work, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="norm-diff-")
        work = tmp.name

    modules = [(m, pre, sel, P_CYCLE[m % len(P_CYCLE)])
               for m, (pre, sel) in enumerate(groups)]

    def fused_passes(programs):
        return (nn.UPSTREAM_LOWERING if args.no_fuse
                else nn.fused_pipeline(programs)) + nn.IR_DUMP_FLAGS

    def lower_and_run_once(m, pre, metas, programs):
        text = build_text(metas)
        src = os.path.join(work, f"m{m}.mlir")
        with open(src, "w") as f:
            f.write(text)
        if pre:
            fused_src = os.path.join(work, f"m{m}.pre.mlir")
            nn.compile_module(args.mlir_opt, src, fused_src,
                              ["--linalg-fuse-elementwise-ops"])
            src = fused_src
        out = {"metas": metas, "crashed": []}
        ubc = os.path.join(work, f"m{m}.unfused.mlirbc")
        nn.compile_module(args.mlir_opt, src, ubc, nn.UPSTREAM_LOWERING)
        fbc = os.path.join(work, f"m{m}.fused.mlirbc")
        tool = args.mlir_opt if args.no_fuse else args.opt
        err = nn.compile_module(tool, src, fbc, fused_passes(programs))
        out["dumps"] = nn.parse_ir_dumps(err)
        out["completed"] = nn.complete_if_needed(args.mlir_opt, fbc)
        out["unfused"] = nn.run_module_to_file(
            args.runner, ubc, libs, os.path.join(work, f"m{m}.unfused.out"))
        out["fused"] = nn.run_module_to_file(
            args.runner, fbc, libs, os.path.join(work, f"m{m}.fused.out"))
        return out

    def culprits(m, pre, metas, programs):
        """The programs that, alone, make a lowering fail: [(program,
        first line of the error)]."""
        bad = []
        for p, _ in metas:
            src = os.path.join(work, f"m{m}.alone.mlir")
            with open(src, "w") as f:
                f.write(dg.emit_program(p)[0])
            steps = ([(args.mlir_opt, ["--linalg-fuse-elementwise-ops"])]
                     if pre else [])
            try:
                cur = src
                for i, (tool, passes) in enumerate(steps + [
                        (args.mlir_opt, nn.UPSTREAM_LOWERING),
                        (args.mlir_opt if args.no_fuse else args.opt,
                         fused_passes(programs))]):
                    out = os.path.join(work, f"m{m}.alone{i}.mlirbc")
                    nn.compile_module(tool, cur, out, passes)
                    if i < len(steps):
                        cur = out
            except RuntimeError as e:
                lines = str(e).splitlines()[1:] or ["failed"]
                bad.append((p, lines[0].strip()[:160]))
        return bad

    def lower_and_run(job):
        m, pre, sel, programs = job
        metas = [(p, dg.gen_inputs(p)) for p in sel]
        try:
            return lower_and_run_once(m, pre, metas, programs)
        except RuntimeError as e:
            bad = culprits(m, pre, metas, programs)
            if not bad:
                raise
            badset = {p.index for p, _ in bad}
            out = lower_and_run_once(
                m, pre, [(p, i) for p, i in metas if p.index not in badset],
                programs)
            out["crashed"] = bad
            print(f"module {m}: {len(bad)} program(s) fail to compile "
                  f"({str(e).splitlines()[0][:100]}...)")
            return out

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
        results = list(ex.map(lower_and_run, modules))
    t_run = time.monotonic()

    failed = 0
    worst = {}  # (what, result, type) -> (error, program)
    mutants = dg.all_mutants() if args.check_mutants else []
    # Mutants of a feature turned off apply to no program.
    off = ((dg.GRAPH_MUTANTS if args.no_graphs else {})
           | (dg.MASK_MUTANTS if args.no_masks else {})
           | (dg.MULTI_MUTANTS if args.no_multi else {}))
    if not args.no_multi and args.multi_share >= 1:
        # Multi-axis programs only: the 2-D mutants that apply to none.
        off = off | {mu: None for mu in mutants
                     if not any(dg.mutant_applies(p, mu) for p in progs)}
    mutants = [mu for mu in mutants if mu not in off]
    caught = nn.MutantTally(mutants)
    styles = {}  # style -> [programs, failed]
    graphs = [0, 0]  # [graph programs, failed]
    graph_kinds = {k: 0 for k in dg.GRAPH_KINDS}
    masks = [0, 0]  # [programs with a mask, failed]
    mask_kinds = {k: 0 for k in dg.MASK_KINDS}
    multis = [0, 0]  # [multi-axis programs, failed]
    multi_kinds = {k: 0 for k in dg.MULTI_KINDS}

    def tally(p, ok):
        st = styles.setdefault(p.style, [0, 0])
        st[0] += 1
        st[1] += not ok
        if p.graph is not None:
            graphs[0] += 1
            graphs[1] += not ok
            for kind in p.graph.kinds():
                graph_kinds[kind] += 1
        if isinstance(p, dg.MultiProgram):
            multis[0] += 1
            multis[1] += not ok
            for kind in p.kinds():
                multi_kinds[kind] += 1
        if p.mask is not None:
            masks[0] += 1
            masks[1] += not ok
            for kind in p.mask.kinds():
                mask_kinds[kind] += 1

    n_identical = 0
    for (m, pre, _, programs), res in zip(modules, results):
        uf, fu = res["unfused"], res["fused"]
        metas = res["metas"]
        for p, why in res["crashed"]:
            failed += 1
            tally(p, False)
            print(f"FAIL {p.name} P={programs} {p.describe()}  [does not "
                  f"compile: {why}]")
        pos = 0
        for p, inp in metas:
            outs = p.outputs()
            idx = list(range(pos, pos + len(outs)))
            pos += len(outs)
            problems = []
            got = {}
            for key, pf in (("unfused", uf), ("fused", fu)):
                got[key] = {}
                for i, (name, _, shape) in zip(idx, outs):
                    if i >= len(pf) or pf.shape(i) != tuple(shape):
                        sys.exit(f"error: {key}: {p.name}: printed {name} is "
                                 "missing or has the wrong shape")
                    got[key][name] = pf.values(i)
            if args.inject_nan and p.index == args.first:
                first = outs[0][0]
                got["fused"][first] = [math.nan] + got["fused"][first][1:]
            if isinstance(p, dg.MultiProgram):
                fused, why = multi_fusion_status(res["dumps"], p)
            elif p.graph is None:
                fused, why = nn.fusion_status(res["dumps"], p.name)
            else:
                fused, why = graph_fusion_status(res["dumps"], p)
            if not fused:
                problems.append(f"not fused: {why}")
            ref = dg.reference(p, inp, args.mutant)
            errs = []
            for key in ("unfused", "fused"):
                for name, elem, err, tol, ok in nn.compare_case(
                        p, got[key], ref):
                    if not ok:
                        problems.append(f"{key} {name}({elem}) error "
                                        f"{err:.2e} > {tol:.0e}")
                    nn.keep_worst(worst, (key, name, elem), err,
                                  p.describe())
                    errs.append(f"{key[0]}:{name}={err:.1e}")
            # fused vs unfused, measured like the reference errors
            for name, elem, _ in outs:
                err = nn.rel_l2(got["fused"][name], got["unfused"][name],
                                ref.scales[name])
                tol = nn.DTYPES[elem].tolerance
                if not within(err, tol):  # NaN and inf fail too
                    problems.append(f"fused vs unfused {name}({elem}) "
                                    f"{err:.2e} > {tol:.0e}")
                nn.keep_worst(worst, ("fused-vs-unfused", name, elem), err,
                              p.describe())
            if all(uf.raw(i) == fu.raw(i) for i in idx):
                n_identical += 1
            for mu in mutants:
                if dg.mutant_applies(p, mu):
                    caught.record(mu, p.name, nn.compare_case(
                        p, got["fused"], dg.reference(p, inp, mu)))
            ok = not problems
            failed += not ok
            tally(p, ok)
            if not ok or not args.quiet:
                print(f"{'PASS' if ok else 'FAIL'} {p.name} P={programs} "
                      f"{p.describe()}  {' '.join(errs)}"
                      + (f"  [{'; '.join(problems)}]" if problems else ""))
        uf.close()
        fu.close()
    t_end = time.monotonic()
    n_acc = sum(p.acc_dw or p.acc_db for p in progs)
    print(f"ACCUMULATE {n_acc} programs add dW/dB into an argument")
    if tmp:
        tmp.cleanup()

    for (what, name, elem), (err, desc) in sorted(worst.items()):
        print(f"WORST {what:<16} {name} {elem:<4} {err:.2e} (tolerance "
              f"{nn.DTYPES[elem].tolerance:.0e}) in {desc}")
    print("STYLES " + ", ".join(f"{s}: {n} ({f} failed)"
                                for s, (n, f) in sorted(styles.items())))
    print(f"GRAPHS {graphs[0]} ({graphs[1]} failed): "
          + ", ".join(f"{k}: {n}" for k, n in graph_kinds.items()))
    print(f"MASKS {masks[0]} ({masks[1]} failed): "
          + ", ".join(f"{k}: {n}" for k, n in mask_kinds.items()))
    print(f"MULTI {multis[0]} ({multis[1]} failed): "
          + ", ".join(f"{k}: {n}" for k, n in multi_kinds.items()))
    print(f"IDENTICAL {n_identical} of {len(progs)} programs bitwise equal "
          "between the unfused and fused paths")
    if args.mutant:
        # A --mutant run must fail exactly the programs the mistake applies
        # to (numerics_self_checks.test matches FAILED against this count).
        n_applies = sum(dg.mutant_applies(p, args.mutant) for p in progs)
        print(f"APPLIES {args.mutant} to {n_applies} of {len(progs)} "
              "programs")
    missed = caught.report("programs", MUTANT_MIN_CAUGHT)
    print(f"TIME generate+lower+run {t_run - t0:.1f}s ({len(modules)} "
          f"modules), reference+compare {t_end - t_run:.1f}s")
    return nn.finish(failed, len(progs), missed, noun="programs")


if __name__ == "__main__":
    sys.exit(main())
