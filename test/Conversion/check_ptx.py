#!/usr/bin/env python3
"""PTX checks of `norm-opt compile` (no GPU needed).

For LayerNorm and RMSNorm x bf16/f16/f32 x N, compiles one module per
(kind, dtype) to PTX for --chip, assembles it with ptxas -v for that chip,
and checks, per kernel:
  - ptxas accepts it;
  - every vector main kernel (`*_main`, `*_main_split`, `*_latency`, emitted when N is
    a multiple of the vector width) loads with 16-byte global loads
    (ld.global.v4.b32 or .v2.b64, or cp.async of 16 bytes into the
    shared-memory ring) and stores 16 bytes at a time;
  - 0 bytes spilled and no stack frame for the register-resident variants
    (the looped variant, for rows too long for registers, is reported);
  - the shared-memory alignment checks of check_shared_alignment.py (the
    dynamic shared memory is an .extern array; vector accesses to named
    shared arrays are aligned to their width).
Prints one line per kernel and "ALL PASSED: <n> kernels" at the end.

  check_ptx.py --norm-opt norm-opt --ptxas ptxas --chip sm_90a
      --ns 384,1024 --workdir DIR
"""

import argparse
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True
from norm_opt import kernel_set as kernels  # noqa: E402  (lit's PYTHONPATH)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_shared_alignment  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--norm-opt", required=True)
    ap.add_argument("--ptxas", required=True)
    ap.add_argument("--chip", default="sm_90a")
    ap.add_argument("--ns", default="384,1024,4096,8192,17389,65536")
    ap.add_argument("--configs", default="bf16,f16,f32")
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    ns = [int(v) for v in args.ns.split(",")]
    failures, count = [], 0
    for kind in ("layer", "rms"):
        for config in args.configs.split(","):
            stem = os.path.join(args.workdir, f"{kind}_{config}_{args.chip}")
            text = "\n".join(kernels.function(kind, config, n)[0] for n in ns)
            with open(stem + ".mlir", "w") as f:
                f.write(text + "\n")
            subprocess.run([args.norm_opt, "compile", stem + ".mlir",
                            f"--chip={args.chip}", "--emit=ptx", "-o",
                            stem + ".ptx"], check=True)
            # Which kernels are register-resident: the pass's remarks.
            remarks = subprocess.run(
                [args.norm_opt, stem + ".mlir", "--pass-pipeline="
                 "builtin.module(norm-decompose,func.func(norm-fuse-mixed-"
                 "reductions),canonicalize,cse,convert-norm-to-gpu{"
                 f"chip={args.chip} remarks=true}})", "-o", os.devnull],
                capture_output=True, text=True, check=True).stderr
            variant = dict(re.findall(r"GPU kernels (\w+): (\w+)", remarks))
            r = subprocess.run([args.ptxas, f"-arch={args.chip}", "-v",
                                stem + ".ptx", "-o", stem + ".cubin"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                failures.append(f"{stem}.ptx: ptxas failed: {r.stderr}")
                continue
            ptx = open(stem + ".ptx").read()
            shared_problems, _ = check_shared_alignment.check(ptx)
            for p in shared_problems:
                print(f"FAIL {args.chip} {os.path.basename(stem)}: {p}")
                failures.append(p)
            bodies = dict(re.findall(
                r"\.entry (\w+)\((.*?)\n}\n", ptx, re.S))
            report = {}
            current = None
            for line in r.stderr.splitlines():
                m = re.search(r"Compiling entry function '(\w+)'", line)
                if m:
                    current = m.group(1)
                    report[current] = {}
                m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill "
                              r"stores, (\d+) bytes spill loads", line)
                if m and current:
                    report[current]["spill"] = tuple(map(int, m.groups()))
                m = re.search(r"Used (\d+) registers", line)
                if m and current:
                    report[current]["regs"] = int(m.group(1))
            for name in sorted(bodies):
                count += 1
                info = report.get(name, {})
                spill = info.get("spill", (-1, -1, -1))
                problems = []
                # The suffixes of include/norm/Conversion/NormToGPU/
                # KernelNames.h (kMainKernelSuffix, ...).
                # A resident tier's kernels have the prefix
                # `<op prefix>_tier<cols>` (its own remark); final kernels
                # of other blocks end in `_final_<threads>`.
                final = re.search(r"_final(_\d+)?$", name)
                prefix = re.sub(
                    r"_(main|main_peel|main_scalar|main_split|main_split_scalar|"
                    r"latency|latency_scalar)$",
                    "", name)
                latency = re.search(r"_latency(_scalar)?$", name)
                kind_of = ("final" if final else
                           "latency" if latency else variant.get(prefix, "?"))
                if kind_of == "?":
                    problems.append("no remark for this kernel")
                if spill != (0, 0, 0) and kind_of != "looped":
                    problems.append(f"stack/spill {spill}")
                if name.endswith(("_main", "_main_split", "_latency")):
                    body = bodies[name]
                    # Plain 16-byte loads, or 16-byte cp.async copies into
                    # the shared-memory ring.
                    if not re.search(r"ld\.global(\.nc)?\.v4\.b32|"
                                     r"ld\.global(\.nc)?\.v2\.b64|"
                                     r"cp\.async\.cg\.shared\.global "
                                     r"\[[^]]*\], \[[^]]*\], 16;", body):
                        problems.append("no 16-byte global loads")
                    if not re.search(r"st\.global\.v4\.b32|"
                                     r"st\.global\.v2\.b64", body):
                        problems.append("no 16-byte global stores")
                status = "FAIL" if problems else "PASS"
                print(f"{status} {args.chip} {name} ({kind_of}): "
                      f"{info.get('regs')} registers, spill {spill}"
                      + (" -- " + ", ".join(problems) if problems else ""))
                if problems:
                    failures.append(name)
    if failures:
        print(f"FAILED: {len(failures)} of {count} kernels")
        return 1
    print(f"ALL PASSED: {count} kernels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
