#===- kernel_set.py - the kernel set of the GPU checks and benchmarks -----===#
"""The kernel set: one shared library per (kind, dtype config) with a
function per hidden size N and one with N dynamic too, plus a manifest
(JSON) of every library that built, each function and its C signature.
The GPU checks (test/gpu/gpu_check.py, test/gpu/gpu_capture_test.py) and
the benchmarks (bench/bench.py, bench/fixed_costs.py, bench/dram_bytes.py,
bench/profile_kernels.py, bench/autotune.py, which calls build() once per
plan variant) run over it. Standard library only: the set is built on the
build machine (no torch, no GPU) and loaded on the GPU machine
(ManifestLibrary; norm_opt.testing launches it with torch tensors).

For each (kind, activation dtype, weight dtype) one input module holds one
function per hidden size N (`<kind>_<config>_<N>`, dynamic rows) and one
with N dynamic too (`<kind>_<config>_dyn`), written with the norm ops a
front end that knows the op emits; `norm-opt compile --emit=lib` turns it
into one shared library (cubin inside, C launchers, the runtime linked in)
plus its header. With --riders DIR, also the front-end (linalg) inputs of
RIDERS from DIR (test/gpu/Inputs: gpu_check.py checks them).

  python3 -m norm_opt.kernel_set [--norm-opt build/bin/norm-opt]
      [--out .carry/gpu] [--riders test/gpu/Inputs] [--chip sm_90a]
      [--ns 1024,4096] [--configs bf16,f16] [--no-dynamic]
      [--modules-only] [-j 2] [-- extra norm-opt compile flags]

Without --norm-opt, norm-opt is the package's (the wheel's bundled one,
else $NORM_OPT, else PATH: norm_opt.find_norm_opt).
"""

import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys

from .compiler import compile_command as _compile_command
from .library import Library

# The hidden sizes of ../shared/BENCHMARKS.md (short rows 64 and 128, the
# odd 2999 beside the aligned 3000), the odd ones of the validation list
# and DiT's 1152 (rows of 64 lanes, four to a CTA).
BENCH_NS = [64, 128, 384, 768, 1024, 2048, 2999, 3000, 4096, 5120, 8192,
            12288, 16384, 17389, 32768]
EXTRA_NS = [17, 1152, 4099, 65536, 131072, 262144]
# Also one function per library with N dynamic (`<kind>_<config>_dyn`,
# tensor<?x?x...>): the run-time N points of BENCHMARKS.md.
# name: (x dtype, weight dtype)
CONFIGS = {
    "bf16": ("bf16", "bf16"),
    "f16": ("f16", "f16"),
    "f32": ("f32", "f32"),
    "bf16w32": ("bf16", "f32"),
}


def function(kind, config, n):
    """The function for hidden size n; n = None: N dynamic."""
    x, w = CONFIGS[config]
    dim = "?" if n is None else n
    name = f"{kind}_{config}_{'dyn' if n is None else n}"
    full = f"tensor<?x{dim}x{x}>"
    vec = f"tensor<{dim}x{w}>"
    if kind == "layer":
        text = f"""
func.func @{name}(%dy: {full}, %x: {full}, %mean: tensor<?xf32>,
    %rstd: tensor<?xf32>, %w: {vec}, %b: {vec})
    -> ({full}, {vec}, {vec}) {{
  %dx, %dw, %db = norm.layer_norm_grad %dy, %x, %mean, %rstd
      weight(%w : {vec}) bias(%b : {vec})
      : {full}, tensor<?xf32> -> {full}, {vec}, {vec}
  return %dx, %dw, %db : {full}, {vec}, {vec}
}}"""
        # arguments: dy x mean rstd w b; results dx dw db
        sig = {"args": ["dy", "x", "mean", "rstd", "w", "b"],
               "results": ["dx", "dw", "db"],
               "strides": ["dy", "x", "dx"]}
    else:
        text = f"""
func.func @{name}(%dy: {full}, %x: {full}, %rstd: tensor<?xf32>,
    %w: {vec}) -> ({full}, {vec}) {{
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : {vec})
      : {full}, tensor<?xf32> -> {full}, {vec}
  return %dx, %dw : {full}, {vec}
}}"""
        sig = {"args": ["dy", "x", "rstd", "w"], "results": ["dx", "dw"],
               "strides": ["dy", "x", "dx"]}
    sig.update(name=name, kind=kind, config=config, n=n or 0, x=x, w=w)
    if n is None:
        sig["dynamic"] = True
    return text, sig


def ptxas_report(text):
    """{kernel: {registers, spill_stores, spill_loads, stack}} from ptxas -v."""
    report, current = {}, None
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            current = report.setdefault(m.group(1), {})
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, "
                      r"(\d+) bytes spill loads", line)
        if m and current is not None:
            current.update(stack=int(m.group(1)), spill_stores=int(m.group(2)),
                           spill_loads=int(m.group(3)))
        m = re.search(r"Used (\d+) registers", line)
        if m and current is not None:
            current["registers"] = int(m.group(1))
    return report


# Front-end (linalg) inputs with riders, one library each (built with
# --riders DIR; test/gpu/gpu_check.py checks them): (input in DIR, library,
# the function's signature entry).
RIDERS = [
    # A training-step backward: dynamic rows and N, a 0-d loss scale, a
    # residual, dW accumulated.
    ("training_riders.mlir", "libriders.so", {
        "name": "training_riders_dynamic", "kind": "riders", "config": "f32",
        "n": 0, "x": "f32", "w": "f32",
        "args": ["x", "dy", "rstd", "w", "scale", "dres", "prev_dw"],
        "results": ["dx", "dw", "db"], "strides": ["x", "dy", "dres", "dx"]}),
    # Issue 11's crash: the bf16 RMSNorm riders backward, static 16384x5120
    # (constant loss scale, residual, dW accumulated into an f32 buffer).
    ("rms_riders_bf16.mlir", "libriders_bf16.so", {
        "name": "rms_riders_bf16", "kind": "riders_bf16", "config": "bf16",
        "n": 5120, "x": "bf16", "w": "bf16",
        "args": ["x", "dy", "rstd", "w", "dres", "dw_in"],
        "results": ["dx", "dw"], "strides": ["x", "dy", "dres", "dx"]}),
]


def compile_command(norm_opt_path, src, lib, chip, extra):
    """norm_opt.compile_command of one library, with ptxas's register and
    spill report (--ptxas-verbose, for the manifest's "kernels")."""
    return _compile_command(src, lib, chip=chip, emit="lib",
                            norm_opt=norm_opt_path,
                            extra=["--ptxas-verbose", *extra])


def build(norm_opt_path, out, chip="sm_90a", ns=None, configs=tuple(CONFIGS),
          kinds=("layer", "rms"), extra=(), jobs=2, dynamic=True,
          riders=None, compile_libraries=True):
    """Writes OUT/lib<kind>_<config>.so (+ RIDERS' libraries from the
    directory `riders`, when given) and OUT/manifest.json, which lists the
    libraries that built. Returns ([(library, stderr) of each failure],
    manifest). Without compile_libraries only the input modules
    OUT/<kind>_<config>.mlir. norm_opt_path None: norm_opt.find_norm_opt's."""
    ns = BENCH_NS + EXTRA_NS if ns is None else list(ns)
    for source, _, _ in RIDERS if riders else ():
        if not os.path.isfile(os.path.join(riders, source)):
            raise FileNotFoundError(f"no {source} in {riders} (the riders "
                                    "inputs are in test/gpu/Inputs)")
    os.makedirs(out, exist_ok=True)
    work = []  # (source, library, manifest entry)
    for kind in kinds:
        for config in configs:
            texts, sigs = [], []
            for n in ns + ([None] if dynamic else []):
                t, s = function(kind, config, n)
                texts.append(t)
                sigs.append(s)
            stem = f"{kind}_{config}"
            src = os.path.join(out, stem + ".mlir")
            with open(src, "w") as f:
                f.write("\n".join(texts) + "\n")
            lib = os.path.join(out, f"lib{stem}.so")
            work.append((src, lib, {"library": os.path.basename(lib),
                                    "functions": sigs}))

    if riders:
        for source, library, signature in RIDERS:
            work.append((os.path.join(riders, source),
                         os.path.join(out, library),
                         {"library": library, "functions": [signature]}))

    if not compile_libraries:
        return [], {"libraries": [e for _, _, e in work]}
    work = [(compile_command(norm_opt_path, src, lib, chip, extra), entry)
            for src, lib, entry in work]

    def run(item):
        return item, subprocess.run(item[0], capture_output=True, text=True)

    failures = []
    made = {"chip": chip, "flags": list(extra),
                "libraries": [], "kernels": {}}
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for (cmd, entry), r in pool.map(run, work):
            if r.returncode != 0:
                failures.append((entry["library"], r.stderr))
                print("FAILED:", " ".join(cmd), "\n", r.stderr,
                      file=sys.stderr)
            else:
                print("built", os.path.join(out, entry["library"]))
                made["libraries"].append(entry)
                made["kernels"].update(ptxas_report(r.stderr))
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(made, f, indent=1)
    return failures, made


def manifest(directory):
    """The manifest (JSON) of the kernel set in `directory`."""
    with open(os.path.join(directory, "manifest.json")) as f:
        return json.load(f)


class ManifestLibrary:
    """A library of the manifest, loaded with norm_opt.Library: `funcs` maps
    each function's N (or "dyn") to (its C launcher, its manifest entry);
    the checks call the launchers with raw pointers and sizes
    (norm_opt.testing.call), so that they can also pass what
    norm_opt.Function would refuse (strides, misaligned bases, wrong sizes:
    the runtime's own checks)."""

    def __init__(self, path, entry):
        self.lib = Library(path)
        self.funcs = {}
        for sig in entry["functions"]:
            fn = self.lib.functions[sig["name"]].cfunc
            # A dynamic-N function under "dyn", static ones under their N.
            self.funcs["dyn" if sig.get("dynamic") else sig["n"]] = (fn, sig)

    def error(self):
        return self.lib.last_error()

    def status_string(self, status):
        return self.lib.status_string(status)

    def workspace_bytes(self, fn, sig, t, outs, m, n):
        """The workspace `call` would take (normrt_query_begin/_end around
        the launcher: it plans and launches nothing)."""
        tensors = [t[a] for a in sig["args"]] + [outs[r]
                                                 for r in sig["results"]]
        return self.lib.functions[sig["name"]].workspace_bytes(*tensors)

    def set_workspace(self, stream, ptr, nbytes):
        self.lib.set_workspace(stream, ptr, nbytes)


def libraries(directory, only=None):
    """{library file name: ManifestLibrary} of the kernel set in
    `directory` (only those named in `only`, when given), in the manifest's
    order."""
    return {e["library"]: ManifestLibrary(
        os.path.join(directory, e["library"]), e)
        for e in manifest(directory)["libraries"]
        if only is None or e["library"] in only}


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="python3 -m norm_opt.kernel_set",
        description="Build the kernel set of the GPU checks and benchmarks.")
    ap.add_argument("--norm-opt", default=None,
                    help="norm-opt to run (default: norm_opt.find_norm_opt)")
    ap.add_argument("--out", default=".carry/gpu")
    ap.add_argument("--riders", metavar="DIR", default=None,
                    help="also the riders inputs in DIR (test/gpu/Inputs)")
    ap.add_argument("--chip", default="sm_90a")
    ap.add_argument("--ns", default=None, help="comma-separated N values")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--kinds", default="layer,rms")
    ap.add_argument("--no-dynamic", action="store_true",
                    help="no dynamic-N function per library")
    ap.add_argument("--modules-only", action="store_true",
                    help="write the input modules, compile nothing")
    ap.add_argument("-j", type=int, default=os.cpu_count() or 2)
    ap.add_argument("extra", nargs="*", help="extra norm-opt compile flags")
    args = ap.parse_args(argv)
    failures, _ = build(
        args.norm_opt, args.out, args.chip,
        [int(v) for v in args.ns.split(",")] if args.ns else None,
        args.configs.split(","), args.kinds.split(","), args.extra, args.j,
        dynamic=not args.no_dynamic, riders=args.riders,
        compile_libraries=not args.modules_only)
    return 1 if failures else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
