#!/usr/bin/env python3
#===- make_seeds.py - norm-fuzz's seed corpus ------------------------------===#
#
# Part of norm-opt. Writes the seed corpus of tools/norm-fuzz into OUT: every
# lit input (test/**/*.mlir, the GPU checks' test/gpu/Inputs among them;
# examples) split on `// -----`, and programs from the differential test's
# random generator (test/lib-python/norm_diffgen.py). Deterministic; Python
# 3.11 stdlib.
#
# usage: PYTHONPATH=python:test/lib-python make_seeds.py OUT [--generated N]
#===----------------------------------------------------------------------===#
import argparse
import glob
import hashlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, os.pardir, os.pardir))
sys.dont_write_bytecode = True


def write(out, text):
    data = text.encode()
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--generated", type=int, default=40)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    files = sorted(glob.glob(os.path.join(ROOT, "test", "**", "*.mlir"),
                             recursive=True) +
                   glob.glob(os.path.join(ROOT, "examples", "*.mlir")))
    count = 0
    for path in files:
        if os.sep + "fuzz" + os.sep in path:
            continue
        with open(path) as f:
            for chunk in f.read().split("// -----"):
                lines = [l for l in chunk.splitlines()
                         if not l.lstrip().startswith("// RUN:")]
                text = "\n".join(lines).strip() + "\n"
                if "func.func" in text:
                    write(args.out, text)
                    count += 1
    import norm_diffgen as gen
    for i in range(args.generated):
        program = gen.gen_program(i, "norm-fuzz-seeds")
        text, _, _ = gen.emit_program(program)
        write(args.out, text)
        count += 1
    print(f"{count} seeds in {args.out}")


if __name__ == "__main__":
    main()
