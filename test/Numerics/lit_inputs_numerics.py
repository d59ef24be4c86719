#!/usr/bin/env python3
"""The recognition pass's lit inputs as numeric tests: fused vs unfused.

Everything --norm-fuse-mixed-reductions fuses must still compute the same
numbers after the rest of the pipeline. This script takes the functions of
test/Transforms/fuse-mixed-reductions*.mlir (split on `// -----`), prepares
each the way its RUN lines do before the recognition pass (nothing;
--linalg-fuse-elementwise-ops; --norm-decompose; the TOSA-to-linalg
passes: one variant per distinct RUN-line preparation), and for every
function whose shapes are static (or bound below) and which the pipeline
fuses:

  - builds seeded random inputs, never zero (|v| in [0.25, 2], random sign,
    representable in the element type);
  - runs the unfused path (upstream lowering only, mlir-opt) and the fused
    path (norm-opt --norm-lower-to-cpu=programs=3) on the CPU;
  - requires the relative L2 difference of every result to be within the
    tolerance of its type (f32 1e-5, f16 1e-3, bf16 8e-3; the inputs are
    arbitrary, so there is no float64 reference: both paths compute in f32
    and differ only in summation order and the final rounding).

Functions that do not fuse (the negative tests), or whose dynamic shapes
have no binding, are skipped and listed with the reason. A function whose
lowering fails is a failure unless KNOWN_FAILURES names it.

  run: lit_inputs_numerics.py --opt norm-opt --mlir-opt mlir-opt
       --runner mlir-runner [--shared-lib-dir DIR] [--seed S]
       [--perturb] [--only REGEX] [--min-checked N] [--keep DIR] [-q]

--perturb scales the fused path's first result by 1 + 2e-3 before comparing
(an error a wrong lowering could make): a self-check that the comparison
can fail (f32 and f16 results must then fail). --only REGEX keeps the
functions whose label matches.
Python 3.11 standard library only.
"""

import argparse
import glob
import os
import random
import re
import shlex
import sys
import tempfile
import time

sys.dont_write_bytecode = True
import norm_numerics as nn  # noqa: E402
from norm_opt.checks import within  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

INPUTS = os.path.join(HERE, os.pardir, "Transforms",
                      "fuse-mixed-reductions*.mlir")
PROGRAMS = 3

# Static shapes for the functions with dynamic ones: (argument shapes,
# result shapes), by function name.
DYNAMIC_BINDINGS = {
    # ConvNeXt's LayerNorm2d: x, dy [B, 96, S], mean, rstd [B, S], w [96]
    "layer_norm_2d_f32": (
        [(3, 96, 7), (3, 96, 7), (3, 7), (3, 7), (96,)],
        [(3, 96, 7), (96,), (96,)]),
    # [B, S, 1024] f16, keepdim statistics [B, S, 1]
    "rank3_dynamic_rows_f16_bias_only": (
        [(3, 5, 1024), (3, 5, 1024), (3, 5, 1), (3, 5, 1)],
        [(3, 5, 1024), (1024,)]),
    # x, dy, rstd, w, scale (0-d), dres, prev_dw: M = 5, N = 12
    "training_riders_dynamic": (
        [(5, 12), (5, 12), (5,), (12,), (), (5, 12), (12,)],
        [(5, 12), (12,), (12,)]),
    # A matmul before and after the norm: g, w2, x, rstd, w, w1; M = 5
    "matmul_before_and_after": (
        [(5, 32), (32, 64), (5, 64), (5,), (64,), (64, 16)],
        [(5, 16), (64,)]),
    # y [5, 7] summed per row scales dy of a norm over [5, 12]: the two Ns
    # differ at run time (the sum must stay a neighbour)
    "row_sum_over_other_dynamic_extents": (
        [(5, 7), (5, 12), (5, 12), (5,), (12,)],
        [(5, 12), (12,), (5,)]),
    # dy, x, rstd, w, b: M = 6, N = 20
    "rms_dynamic_weight_bias": (
        [(6, 20), (6, 20), (6,), (20,), (20,)],
        [(6, 20), (20,), (20,)]),
}

# Functions whose fused lowering is known to fail (docs/numerics.md, and an
# XFAIL test each in this directory): skipped with this reason.
KNOWN_FAILURES: dict = {}


def variants(path):
    """The distinct preparations before recognition in the RUN lines."""
    out = []
    with open(path) as f:
        for line in f:
            m = re.match(r"\s*//\s*RUN:\s*norm-opt\s+%s(.*)", line)
            if not m:
                continue
            cmd = m.group(1).split("|")[0]
            passes = []
            for tok in shlex.split(cmd):
                if tok.startswith("--pass-pipeline="):
                    pl = re.sub(r",?norm-fuse-mixed-reductions(\{[^}]*\})?",
                                "", tok[len("--pass-pipeline="):])
                    passes.append("--pass-pipeline=" + pl.replace("(,", "("))
                elif "norm-fuse-mixed-reductions" in tok:
                    continue
                elif tok in ("-split-input-file", "--split-input-file",
                             "-verify-diagnostics", "-o", "/dev/null",
                             "2>&1") or tok.startswith("-mlir-print"):
                    continue
                elif tok.startswith("-"):
                    passes.append(tok)
            if passes not in out:
                out.append(passes)
    return out


def split_top(s, sep=","):
    """Splits at `sep` outside <>, (), [], {}."""
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def functions(module_text):
    """[(name, text, arg types, result types)] of the module's functions
    (printed with -mlir-print-local-scope: no aliases)."""
    out = []
    lines = module_text.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)func\.func (?:private )?@([\w$.]+)\((.*)$",
                     lines[i])
        if not m or not lines[i].rstrip().endswith("{"):  # declarations
            i += 1
            continue
        indent, name = m.group(1), m.group(2)
        j = i + 1
        while not re.match(rf"^{indent}}}\s*$", lines[j]):
            j += 1
        text = "\n".join(ln[len(indent):] for ln in lines[i:j + 1])
        head = lines[i].strip()
        sig = head[head.index("(") + 1:]
        depth, k = 1, 0
        while depth:
            depth += {"(": 1, ")": -1}.get(sig[k], 0)
            k += 1
        args = [a.split(":", 1)[1].strip() for a in split_top(sig[:k - 1])]
        rest = sig[k:].strip()
        results = []
        if rest.startswith("->"):
            r = rest[2:].strip()
            r = r[:r.rindex("{")].strip()
            if r.startswith("("):
                r = r[1:-1]
            results = split_top(r)
        out.append((name, text, args, results))
        i = j + 1
    return out


def random_values(rng, n, elem):
    if elem in ("i1", "i8"):  # masks: keep or drop
        return [float(rng.choice((0, 1))) for _ in range(n)]
    if elem.startswith("i"):  # ids
        return [float(rng.randint(0, 3)) for _ in range(n)]
    dt = nn.DTYPES[elem]
    return [dt.round(rng.choice((-1.0, 1.0)) * rng.uniform(0.25, 2.0))
            for _ in range(n)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--opt", default="norm-opt")
    ap.add_argument("--mlir-opt", default="mlir-opt")
    ap.add_argument("--runner", default="mlir-runner")
    ap.add_argument("--shared-lib-dir", default="")
    ap.add_argument("--seed", default="1")
    ap.add_argument("--perturb", action="store_true")
    ap.add_argument("--only", help="only functions whose label matches")
    ap.add_argument("--min-checked", type=int, default=1,
                    help="fail unless at least this many are checked")
    ap.add_argument("--keep")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args()
    t0 = time.monotonic()
    tmp = None
    if args.keep:
        work = args.keep
        os.makedirs(work, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="norm-lit-")
        work = tmp.name
    libs = nn.runner_libs(args.runner, args.shared_lib_dir)

    # 1. Prepare every file as each of its RUN lines does, collect functions.
    cands = []  # (label, unique name, text, args, results)
    skipped = []  # (label, reason)
    for path in sorted(glob.glob(INPUTS)):
        base = os.path.basename(path)
        for v, passes in enumerate(variants(path)):
            out = os.path.join(work, f"{base}.v{v}.mlir")
            p = nn.subprocess.run([args.opt, path, "-split-input-file",
                                   *passes, "-mlir-print-local-scope",
                                   "-o", out], capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"error: preparing {base} {passes}:\n{p.stderr}")
            prep = " ".join(passes) or "as written"
            with open(out) as f:
                chunks = f.read().split("// -----")
            for c, chunk in enumerate(chunks):
                for name, text, fargs, fres in functions(chunk):
                    label = f"{base}#{c} @{name} [{prep}]"
                    if args.only and not re.search(args.only, label):
                        continue
                    uname = f"{name}__v{v}_{re.sub(r'[^a-z]', '', base)}"
                    text = text.replace(f"@{name}(", f"@{uname}(", 1)
                    types = [nn.parse_type(t) if t.startswith("tensor")
                             else None for t in fargs + fres]
                    if None in types:
                        skipped.append((label, "non-tensor argument or "
                                        "result"))
                        continue
                    if re.search(r"\bcall @", text):
                        skipped.append((label, "calls a function declared "
                                        "only"))
                        continue
                    shapes = [s for s, _ in types]
                    if any(None in s for s in shapes):
                        if name not in DYNAMIC_BINDINGS:
                            skipped.append((label, "dynamic shapes, no "
                                            "binding"))
                            continue
                        a, r = DYNAMIC_BINDINGS[name]
                        shapes = list(a) + list(r)
                    if name in KNOWN_FAILURES:
                        skipped.append((label, KNOWN_FAILURES[name]))
                        continue
                    cands.append((label, uname, text, fargs, fres,
                                  shapes[:len(fargs)], shapes[len(fargs):]))

    # 2. Which of them does recognition fuse? (remarks give the reason)
    allsrc = os.path.join(work, "all.mlir")
    with open(allsrc, "w") as f:
        f.write("\n".join(c[2] for c in cands))
    p = nn.subprocess.run(
        [args.opt, allsrc, "--norm-fuse-mixed-reductions=remarks=true",
         "-mlir-print-op-on-diagnostic=false", "-mlir-print-local-scope"],
        capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"error: recognition failed:\n{p.stderr[-3000:]}")
    fused_ir = {n: t for n, t, _, _ in functions(p.stdout)}
    starts = []  # (first line, unique name) in all.mlir
    line = 1
    for c in cands:
        starts.append((line, c[1]))
        line += c[2].count("\n") + 1
    why = {}
    for m in re.finditer(r":(\d+):\d+: remark: not fused: (.*)", p.stderr):
        ln = int(m.group(1))
        owner = [n for s, n in starts if s <= ln][-1]
        why.setdefault(owner, m.group(2))
    checked = []
    for c in cands:
        if "norm.mixed_reduction" in fused_ir.get(c[1], ""):
            checked.append(c)
        else:
            skipped.append((c[0], "not fused: " + why.get(
                c[1], "no candidate reduction")))

    # 3. One module calling every fused function; both paths.
    rng = random.Random(f"lit-inputs/{args.seed}")
    cm = nn.CallModule()
    for label, uname, text, fargs, fres, ashapes, rshapes in checked:
        cm.add_func(text)
        call = []
        for t, shape in zip(fargs, ashapes):
            elem = nn.parse_type(t)[1]
            call.append((t, shape, elem,
                         random_values(rng, nn.math.prod(shape), elem)))
        cm.add_call(uname, call, list(zip(fres, rshapes)))
    src = os.path.join(work, "checked.mlir")
    with open(src, "w") as f:
        f.write(cm.text())
    ubc, fbc = (os.path.join(work, f"{k}.mlirbc") for k in ("u", "f"))
    nn.compile_module(args.mlir_opt, src, ubc, nn.UPSTREAM_LOWERING)
    dumps = nn.parse_ir_dumps(nn.compile_module(
        args.opt, src, fbc, nn.fused_pipeline(PROGRAMS) + nn.IR_DUMP_FLAGS))
    completed = nn.complete_if_needed(args.mlir_opt, fbc)
    uf = nn.run_module_to_file(args.runner, ubc, libs,
                               os.path.join(work, "u.out"))
    fu = nn.run_module_to_file(args.runner, fbc, libs,
                               os.path.join(work, "f.out"))
    t_run = time.monotonic()

    failed = identical = 0
    worst = {}
    pos = 0
    for k, (label, uname, _, _, fres, _, rshapes) in enumerate(checked):
        problems = []
        # The graph inputs keep their neighbours' reductions by design.
        fused, detail = nn.fusion_status(dumps, uname,
                                         neighbours="-graphs" in label)
        if not fused:
            problems.append(f"not fused in the pipeline: {detail}")
        errs = []
        same = True
        for r, (t, shape) in enumerate(zip(fres, rshapes)):
            i = pos + r
            elem = nn.parse_type(t)[1]
            if uf.shape(i) != tuple(shape) or fu.shape(i) != tuple(shape):
                sys.exit(f"error: {label}: result {r} has the wrong shape")
            a, b = uf.values(i), fu.values(i)
            same = same and uf.raw(i) == fu.raw(i)
            if args.perturb and r == 0:
                b = [v * (1 + 2e-3) for v in b]
            err = nn.rel_l2(b, a, a)
            tol = nn.DTYPES[elem].tolerance
            errs.append(f"r{r}({elem})={err:.1e}")
            if not within(err, tol):  # NaN and inf fail too
                problems.append(f"result {r} ({elem}) differs by {err:.2e} "
                                f"> {tol:.0e}")
            nn.keep_worst(worst, elem, err, label)  # a NaN stays worst
        pos += len(fres)
        identical += same
        ok = not problems
        failed += not ok
        if not ok or not args.quiet:
            print(f"{'PASS' if ok else 'FAIL'} {label}  {' '.join(errs)}"
                  + (f"  [{'; '.join(problems)}]" if problems else ""))
    uf.close()
    fu.close()
    if tmp:
        tmp.cleanup()
    for label, reason in skipped:
        print(f"SKIP {label}: {reason}")
    for elem, (err, label) in sorted(worst.items()):
        print(f"WORST {elem:<4} {err:.2e} (tolerance "
              f"{nn.DTYPES[elem].tolerance:.0e}) in {label}")
    print(f"CHECKED {len(checked)} functions ({identical} bitwise identical "
          f"on both paths), SKIPPED {len(skipped)}")
    print(f"TIME {time.monotonic() - t0:.1f}s (lower+run "
          f"{t_run - t0:.1f}s)")
    if failed or len(checked) < args.min_checked:
        print(f"FAILED: {failed} of {len(checked)} cases")
        return 1
    print(f"ALL PASSED: {len(checked)} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
