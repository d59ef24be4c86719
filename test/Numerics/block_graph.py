#!/usr/bin/env python3
"""A transformer block's backward as one function, on the CPU, against
float64: the group boundary checked by numbers.

examples/transformer_block_backward.mlir holds matmul -> RMSNorm backward
(+ a residual gradient) -> matmul -> LayerNorm backward of another N, in
one function. For seeded random inputs (never zero) it runs three paths
and compares every result with a float64 reference computed here:

  fused     norm-opt --norm-lower-to-cpu=programs=3: both groups fused in
            place, the matmuls lowered by the upstream passes;
  outlined  --norm-decompose --norm-fuse-mixed-reductions
            --norm-outline-groups, then --norm-lower-to-cpu=programs=5: each
            group in its own function, called from the host;
  unfused   --norm-decompose, then upstream passes only (mlir-opt).

Each must be within the f32 tolerance (relative L2 1e-5) of float64; the
fused run must have produced two norm.mixed_reduction and the outlined one
two outlined functions. --perturb scales one reference result by 1 + 1e-3:
the comparison must then fail (a self-check); --inject-nan puts a NaN into
the fused path's first result: that path must then fail (a NaN is never
within tolerance).

  run: block_graph.py --opt norm-opt --mlir-opt mlir-opt --runner
       mlir-runner [--shared-lib-dir DIR] [--rows M] [--seed S] [--perturb]
       [--inject-nan]
Python 3.11 standard library only (PYTHONPATH=python:test/lib-python, as
lit sets it).
"""

import argparse
import math
import os
import random
import re
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
import norm_numerics as nn  # noqa: E402
from norm_opt.checks import Checks  # noqa: E402
from norm_opt.reference import Rows  # noqa: E402
from norm_opt.reference import backward as reference_backward  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

EXAMPLE = os.path.join(HERE, os.pardir, os.pardir, "examples",
                       "transformer_block_backward.mlir")
FUNC = "block_backward"
F, N, NQ = 512, 256, 128  # the example's static sizes


def matmul(a, b, m, k, n):
    """[m, k] x [k, n], row-major lists, float64."""
    out = [0.0] * (m * n)
    for i in range(m):
        row = a[i * k:(i + 1) * k]
        o = out[i * n:(i + 1) * n]
        for p, av in enumerate(row):
            bp = b[p * n:(p + 1) * n]
            for j in range(n):
                o[j] += av * bp[j]
        out[i * n:(i + 1) * n] = o
    return out


def norm_backward(dy, x, mean, rstd, w, m, n):
    """(dx, dw, db) of LayerNorm (mean given) or RMSNorm (mean None):
    norm_opt.reference.backward on the flat row-major lists."""
    out = reference_backward(
        "layer" if mean is not None else "rms", Rows.full(x, n),
        Rows.full(dy, n), Rows.column(rstd),
        Rows.column(mean) if mean is not None else None, Rows.vector(w))
    return out["dx"].flat(), out["dw"].flat(), out["db"].flat()


def reference(v, m):
    """The block's results in float64, in the function's result order."""
    dy = matmul(v["g"], v["w_down"], m, F, N)
    dx, dweight, _ = norm_backward(dy, v["x"], None, v["rstd"], v["weight"],
                                   m, N)
    dsum = [a + b for a, b in zip(dx, v["g_residual"])]
    dq = matmul(dsum, v["w_up"], m, N, NQ)
    dqx, dqw, dqb = norm_backward(dq, v["q"], v["q_mean"], v["q_rstd"],
                                  v["q_weight"], m, NQ)
    return [dqx, dweight, dqw, dqb]


def inputs(rng, m):
    """Name -> (shape, values): random, never zero, f32-representable."""
    def draw(n, lo=0.25, hi=2.0, signed=True):
        return [nn.DTYPES["f32"].round(
            (rng.choice((-1.0, 1.0)) if signed else 1.0) * rng.uniform(lo, hi))
            for _ in range(n)]
    # Small weights keep the matmuls' outputs of the order of their inputs.
    return {
        "g": ((m, F), draw(m * F)),
        "w_down": ((F, N), draw(F * N, 0.01, 0.08)),
        "x": ((m, N), draw(m * N)),
        "rstd": ((m,), draw(m, 0.5, 2.0, signed=False)),
        "weight": ((N,), draw(N)),
        "g_residual": ((m, N), draw(m * N)),
        "w_up": ((N, NQ), draw(N * NQ, 0.02, 0.1)),
        "q": ((m, NQ), draw(m * NQ)),
        "q_mean": ((m,), draw(m, 0.1, 1.0)),
        "q_rstd": ((m,), draw(m, 0.5, 2.0, signed=False)),
        "q_weight": ((NQ,), draw(NQ)),
    }


def signature(text):
    """(argument types, result types) of @block_backward."""
    m = re.search(rf"func\.func @{FUNC}\((.*?)\)\s*->\s*\((.*?)\)\s*\{{",
                  text, re.S)
    args = re.findall(r"%\w+: (tensor<[^>]*>)", m.group(1))
    results = re.findall(r"tensor<[^>]*>", m.group(2))
    return args, results


def run_path(name, tool, src, passes, args, work, libs):
    bc = os.path.join(work, f"{name}.mlirbc")
    dumps = nn.compile_module(tool, src, bc, passes)
    out = nn.run_module_to_file(args.runner, bc, libs,
                                os.path.join(work, f"{name}.out"))
    return out, dumps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--opt", default="norm-opt")
    ap.add_argument("--mlir-opt", default="mlir-opt")
    ap.add_argument("--runner", default="mlir-runner")
    ap.add_argument("--shared-lib-dir", default="")
    ap.add_argument("--rows", type=int, default=19)
    ap.add_argument("--seed", default="1")
    ap.add_argument("--perturb", action="store_true")
    ap.add_argument("--inject-nan", action="store_true")
    args = ap.parse_args()
    libs = nn.runner_libs(args.runner, args.shared_lib_dir)
    m = args.rows
    with open(EXAMPLE) as f:
        text = f.read()
    arg_types, res_types = signature(text)
    rng = random.Random(f"block-graph/{args.seed}")
    values = inputs(rng, m)
    ref = reference({k: v for k, (_, v) in values.items()}, m)
    if args.perturb:
        ref[0] = [v * (1 + 1e-3) for v in ref[0]]
    res_shapes = [(m, NQ), (N,), (NQ,), (NQ,)]

    failed = 0
    # Every result of every path is one check: a missing one fails the run.
    checks = Checks("block_graph")
    with tempfile.TemporaryDirectory(prefix="norm-block-") as work:
        # The call module over the function as written, and over its
        # outlined form (the groups in their own functions).
        def call_module(body, path):
            cm = nn.CallModule()
            cm.add_func(body)
            cm.add_call(FUNC, [(t, shape, "f32", vals) for t, (shape, vals)
                               in zip(arg_types, values.values())],
                        list(zip(res_types, res_shapes)))
            with open(path, "w") as f:
                f.write(cm.text())
            return path
        whole = call_module(text, os.path.join(work, "whole.mlir"))
        outlined_ir = subprocess.run(
            [args.opt, EXAMPLE, "--norm-decompose",
             "--norm-fuse-mixed-reductions", "--norm-outline-groups"],
            check=True, capture_output=True, text=True).stdout
        body = outlined_ir.strip()
        body = body[body.index("{") + 1:body.rindex("}")]
        n_outlined = body.count("norm.outlined_from")
        outlined = call_module(body, os.path.join(work, "outlined.mlir"))
        unfused_src = os.path.join(work, "unfused.mlir")
        subprocess.run([args.opt, whole, "--norm-decompose", "-o",
                        unfused_src], check=True)

        paths = [
            ("fused", args.opt, whole,
             nn.fused_pipeline(3) + nn.IR_DUMP_FLAGS),
            ("outlined", args.opt, outlined, nn.fused_pipeline(5)),
            ("unfused", args.mlir_opt, unfused_src, nn.UPSTREAM_LOWERING),
        ]
        checks.expected = len(paths) * len(res_shapes)
        for name, tool, src, passes in paths:
            out, stderr = run_path(name, tool, src, passes, args, work, libs)
            notes = []
            if name == "fused":
                dumps = nn.parse_ir_dumps(stderr)
                groups = dumps.get("norm-fuse-mixed-reductions", {}).get(
                    FUNC, "").count("= norm.mixed_reduction")
                if groups != 2:
                    notes.append(f"{groups} fused groups, expected 2")
            if name == "outlined" and n_outlined != 2:
                notes.append(f"{n_outlined} outlined functions, expected 2")
            errs = []
            for r, shape in enumerate(res_shapes):
                if not checks.require(f"{name} result {r}",
                                      out.shape(r) == shape,
                                      f"shape {out.shape(r)}"):
                    notes.append(f"result {r} has shape {out.shape(r)}")
                    continue
                got = out.values(r)
                if args.inject_nan and name == "fused" and r == 0:
                    got = [math.nan] + list(got[1:])
                err = nn.rel_l2(got, ref[r], ref[r])
                errs.append(f"r{r}={err:.1e}")
                # within: NaN and inf fail (`err > tol` passed a NaN).
                if not checks.within(f"{name} result {r}", err,
                                     nn.DTYPES["f32"].tolerance):
                    notes.append(f"result {r} differs from float64 by "
                                 f"{err:.2e}")
            out.close()
            failed += bool(notes)
            print(f"{'FAIL' if notes else 'PASS'} {name:<9} rows={m} "
                  f"{' '.join(errs)}" + (f"  [{'; '.join(notes)}]"
                                         if notes else ""))
    # Prints each failed check, and fails a run that compared too little.
    if checks.finish(quiet=True) or failed:
        print(f"FAILED: {failed} of {len(paths)} paths")
        return 1
    print(f"ALL PASSED: {len(paths)} paths")
    return 0


if __name__ == "__main__":
    sys.exit(main())
