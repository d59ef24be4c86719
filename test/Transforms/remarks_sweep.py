#!/usr/bin/env python3
"""Every reduction gets one remark: a sweep over the recognition pass's lit
inputs (test/Transforms/*.mlir, each split on `// -----`, prepared as its
RUN lines prepare it) and, with --generated N, over N programs of the
random generator (test/lib-python/norm_diffgen.py).

For each chunk it counts the ops with a reduction iterator after the
preparation (a linalg.generic whose iterator_types hold "reduction", and
the named reductions: linalg.reduce, the matmuls, dot, matvec, vecmat,
convolutions, poolings, contract) and the remarks that
--norm-fuse-mixed-reductions=remarks=true emits (`fused ...` or
`not fused: ...`); the two counts must be equal: one remark per reduction,
fused or not, none left silent and none said twice.

  run: remarks_sweep.py --opt norm-opt [--generated N] [--seed S] [-q]
       [--miscount K]

--miscount K expects K more remarks per input than reductions (a
self-check: every input with a reduction must then fail).
Python 3.11 standard library only (PYTHONPATH=python:test/lib-python).
"""

import argparse
import glob
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
# test/Numerics (scripts, no package); python/ and test/lib-python come
# from PYTHONPATH (python:test/lib-python, as lit sets it).
sys.path.insert(0, os.path.join(HERE, os.pardir, "Numerics"))
from lit_inputs_numerics import variants  # noqa: E402

NAMED_REDUCTIONS = re.compile(
    r"\blinalg\.(reduce|matmul\w*|batch_matmul\w*|batch_reduce_matmul|dot|"
    r"matvec|vecmat|batch_matvec|batch_vecmat|conv_\w+|depthwise_conv_\w+|"
    r"pooling_\w+|contract|mmt4d|batch_mmt4d)\b")
GENERIC_REDUCTION = re.compile(
    r"\blinalg\.generic\b[^\n]*iterator_types = \[[^\]]*\"reduction\"")
REMARK = re.compile(r"remark: (fused|not fused)")


def reductions(ir):
    return len(GENERIC_REDUCTION.findall(ir)) + len(
        NAMED_REDUCTIONS.findall(ir))


def sweep_chunk(opt, text, passes, label, quiet, miscount=0):
    """None if the counts agree, else a description."""
    prep = subprocess.run([opt, "-", *passes], input=text,
                          capture_output=True, text=True)
    if prep.returncode != 0:
        return None  # a chunk that fails on purpose (verifier tests)
    fused = subprocess.run(
        [opt, "-", "--norm-fuse-mixed-reductions=remarks=true",
         "-mlir-print-op-on-diagnostic=false", "-o", "/dev/null"],
        input=prep.stdout, capture_output=True, text=True)
    want = reductions(prep.stdout) + miscount
    got = len(REMARK.findall(fused.stderr))
    if want == got:
        if not quiet:
            print(f"PASS {label}: {want} reduction(s), {got} remark(s)")
        return None
    return f"{label}: {want} reduction(s) but {got} remark(s)"


def lit_chunks():
    for path in sorted(glob.glob(os.path.join(HERE, "*.mlir"))):
        with open(path) as f:
            text = f.read()
        base = os.path.basename(path)
        try:
            preparations = variants(path)
        except ValueError:  # RUN lines continued with '\': as written
            preparations = [[]]
        for v, passes in enumerate(preparations or [[]]):
            passes = [p for p in passes if p != "-split-input-file"]
            for c, chunk in enumerate(text.split("// -----")):
                if "func.func" in chunk:
                    yield f"{base}#{c} v{v}", chunk, passes


def generated_chunks(count, seed):
    import norm_diffgen as gen
    for i in range(count):
        program = gen.gen_program(i, seed, graphs=True, masks=True)
        yield f"generated#{i} ({program.name})", gen.emit_program(program)[0], []


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--opt", default="norm-opt")
    ap.add_argument("--generated", type=int, default=0)
    ap.add_argument("--seed", default="1")
    ap.add_argument("--miscount", type=int, default=0)
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args()
    problems, total = [], 0
    chunks = list(lit_chunks())
    if args.generated:
        chunks += list(generated_chunks(args.generated, args.seed))
    for label, text, passes in chunks:
        total += 1
        problem = sweep_chunk(args.opt, text, passes, label, args.quiet,
                              args.miscount)
        if problem:
            problems.append(problem)
            print("FAIL " + problem)
    if problems:
        print(f"FAILED: {len(problems)} of {total} inputs")
        return 1
    print(f"ALL PASSED: {total} inputs, one remark per reduction")
    return 0


if __name__ == "__main__":
    sys.exit(main())
