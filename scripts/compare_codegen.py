#!/usr/bin/env python3
#===- compare_codegen.py - PTX and host IR of two norm-opt builds ---------===#
"""Compiles the same modules with two norm-opt binaries and says which
outputs differ: the check that a refactoring of the planner, the kernel
builders or the host lowering left the generated code as it was.

    cp build/bin/norm-opt /tmp/norm-opt-before     # before the change
    ... change, ninja -C build ...
    python3 scripts/compare_codegen.py /tmp/norm-opt-before build/bin/norm-opt

Modules: examples/, test/norm-opt/Inputs/, test/gpu/Inputs/, the kernel
set's LayerNorm / RMSNorm functions (bf16 and f32, short to long rows and N
dynamic), the GroupNorm (NCHW, channels last) and adaLN functions of the GPU
checks. Each is compiled with every plan variant of VARIANTS to PTX plus its
host module (`--host-module`, the launchers' IR). Exit 0 when every pair is
byte-identical and something was compared; the outputs stay in --out.
"""

import argparse
import concurrent.futures
import glob
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "python"), os.path.join(ROOT, "test/gpu")]

# Plan variants: the defaults, and options that take the other kernels.
VARIANTS = {
    "default": [],
    "no-cluster": ["--max-cluster-ctas=1"],
    "peel": ["--peel-rows"],
    "no-latency": ["--latency-ctas=0"],
    "no-ring": ["--bulk-stages=0", "--async-stages=0"],
}


def modules():
    """(name, MLIR text) of every module compared."""
    from norm_opt import kernels
    import gpu_adaln_check
    import gpu_group_norm_check
    out = []
    for pattern in ("examples/*.mlir", "test/norm-opt/Inputs/*.mlir",
                    "test/gpu/Inputs/*.mlir"):
        for path in sorted(glob.glob(os.path.join(ROOT, pattern))):
            with open(path) as f:
                text = f.read()
            if "// -----" not in text:
                out.append((os.path.basename(path)[:-5], text))
    for kind in ("layer", "rms"):
        for dtype in ("bf16", "f32"):
            for n in (64, 128, 768, 1024, 2999, 4096, 8192, 17389, 32768,
                      None):
                out.append((f"{kind}_{dtype}_{n or 'dyn'}",
                            kernels.source(kind, n, dtype)))
    for f in gpu_group_norm_check.FUNCTIONS:
        out.append((f[0], gpu_group_norm_check.source(*f)))
    for name, n, t, chain, b, s in gpu_adaln_check.FUNCTIONS:
        out.append((name, kernels.adaln_source(name, n, t, chain=chain,
                                               batch=b, tokens=s)[0]))
    return out


def compile_one(norm_opt, src, stem, flags):
    """PTX + host module text, or None where the compile failed."""
    ptx, host = stem + ".ptx", stem + ".host.mlir"
    r = subprocess.run([norm_opt, "compile", src, "--emit=ptx", "-o", ptx,
                        f"--host-module={host}", *flags],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr
    with open(ptx) as f, open(host) as g:
        return f.read() + "\n// host\n" + g.read(), ""


def compare(old, new, out, name, variant, flags):
    src = os.path.join(out, f"{name}.mlir")
    stem = os.path.join(out, f"{name}.{variant}")
    a, err_a = compile_one(old, src, stem + ".old", flags)
    b, err_b = compile_one(new, src, stem + ".new", flags)
    if a is None and b is None:
        # Both refuse it (a module that is not for the GPU path, a variant
        # that does not apply): the same diagnostics count as the same.
        return ("same-error" if err_a.replace(old, "") ==
                err_b.replace(new, "") else "differ", name, variant)
    if a is None or b is None:
        return "differ", name, variant
    return ("same" if a == b else "differ"), name, variant


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--out", default="/tmp/norm-opt-codegen")
    p.add_argument("-j", type=int, default=os.cpu_count() or 2)
    p.add_argument("--only", metavar="TEXT", default="",
                   help="only the modules whose name contains TEXT")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    jobs = []
    for name, text in modules():
        if args.only not in name:
            continue
        # Written once, before the jobs that read it.
        with open(os.path.join(args.out, f"{name}.mlir"), "w") as f:
            f.write(text)
        jobs += [(name, v, flags) for v, flags in VARIANTS.items()]
    counts = {"same": 0, "same-error": 0, "differ": 0}
    with concurrent.futures.ThreadPoolExecutor(args.j) as pool:
        for status, name, variant in pool.map(
                lambda j: compare(args.old, args.new, args.out, *j), jobs):
            counts[status] += 1
            if status == "differ":
                print(f"DIFFER {name} [{variant}]")
    print(f"{counts['same']} identical, {counts['same-error']} refused by "
          f"both alike, {counts['differ']} different, of {len(jobs)} "
          f"(module x variant)")
    return 0 if counts["differ"] == 0 and counts["same"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
