#!/usr/bin/env python3
"""Randomized GPU differential test: random front-end programs, random
shapes, every kernel variant, checked against a float64 reference.

The programs come from the CPU differential test's generator
(test/lib-python/norm_diffgen.py: four front-end styles, every rider --
residual, dy scale as a constant / 0-d tensor, dW / dB accumulated into f32
buffers, several column results, recomputed statistics, zero-centred or no
weight, no bias -- bf16 / f16 / f32 and 16-bit activations with f32
weights), with GPU-sized shapes instead of the CPU's small ones: N from 1
to 70000 (primes, odd N, multiples of 8 / 16, N on either side of every
threshold of the kernel plan; a tenth of the 16-bit programs at the looped
kernels' bulk ring: an aligned N of 9000 to 20000 and 34 rows or more),
rows from 1 to ~200k (static, dynamic rows,
all dims dynamic). Each program is run on several cases: random rows (when
dynamic), row strides > N, base pointers off their 16-byte alignment; a
run-time N lands half the time at a resident tier's boundary (its capacity,
one more, one less, or an odd N inside it; docs/gpu.md, "Resident tiers").

Two steps, because the GPU machine has no MLIR:

  build (here):   test/gpu/gpu_random_check.py build [--seed 1]
                     [--programs 300] [--cases-per-program 7]
                     [--norm-opt build/bin/norm-opt]
                     [--out .carry/gpurand] [-j 2]
      generates the programs, compiles them with `norm-opt compile
      --emit=lib` (many functions per library), records each op's kernel
      plan (from the IR after convert-norm-to-gpu) and writes manifest.json
      with every case.
  run (GPU):      test/gpu/gpu_random_check.py run --dir .carry/gpurand
                     [--subset all|sanitize] [--limit N] [--out DIR]
                     [--mutant NAME] [--inject nan|empty|error]
      For every case: inputs drawn fresh on the GPU (never zero), outputs
      and row padding poisoned with NaN, the call, then
        - every result within its type's tolerance of the float64
          reference (norm_opt.reference; relative L2 against the terms,
          norm_opt.reference.rel_l2 with the reference's scales; the
          tolerances are test/gpu/harness.py's, the WORST line measures
          them);
        - every element written, no padding or neighbour touched;
        - dx / dW / dB bitwise equal on a second call and on the other
          launch path (NORMRT_NO_COOPERATIVE=1).
      Which kernels each call launched comes from the driver itself
      (test/gpu/tools/launch_trace.c, loaded as NORMRT_LIBCUDA), and with the
      plan it gives the coverage table (a resident tier's kernels count as
      tier-vector / tier-scalar, and as tier-boundary at either end of the
      tier's range of N): a full run fails unless every variant ran on
      >= 50 cases (--min-cases); --limit, --subset, --mutant and --inject
      runs are limited on purpose and say the minimum is not enforced.
      --mutant: a mutant counts as caught on a case only when a compared
      result is out of tolerance; any other failure fails the run.
      --inject nan|empty|error: self-checks that must fail
      (test/gpu/suite.py); error makes every case fail without a tolerance,
      which a --mutant run must report as an error, not as a catch.
      An empty manifest fails; so does a build that leaves a program out
      (no kernel plan read from its IR: listed by name).
      --subset sanitize runs the small cases chosen for compute-sanitizer
      (every variant).
  sanitize (GPU): test/gpu/gpu_random_check.py sanitize --dir .carry/gpurand
                     [--tools memcheck,racecheck,synccheck]
                     [--sanitize-cases 120]
      runs that subset under each compute-sanitizer tool (our kernels only:
      --kernel-name kns=prog_), one process per tool, and tabulates the
      sanitizer summaries.
  Prints one line per failure and a table last; exits non-zero on failure.
  Every step runs with PYTHONPATH=python:test/lib-python (README.md): the
  generator, norm_opt's compile_command, Library and float64 reference.
"""

import argparse
import concurrent.futures
import ctypes
import dataclasses
import json
import math
import os
import random
import re
import subprocess
import sys
import time
import zlib

import norm_diffgen as dg
from harness import Worst, add_inject_option, poison, tol
from norm_opt import Library, compile_command
from norm_opt import reference as float64
from norm_opt.checks import Checks, Mutants
from norm_opt.reference import rel_l2, worst

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# Largest problem (elements of one [rows, N] tensor) of an ordinary case,
# and of the few large ones.
MAX_ELEMS = 1 << 24
MAX_ELEMS_LARGE = 1 << 26
SANITIZE_MAX_ELEMS = 1 << 17
FULL_KEYS = ("x", "dy", "dres")  # the [rows, N] arguments
SMS = 132  # H100 SXM; only used to aim some row counts at the split kernels
# Wrong references (--mutant): each must fail >= 95% of the cases it
# applies to (a term can vanish: LayerNorm's projection at N = 1).
MUTANTS = {
    "no-dy-scale": lambda p: p["scale"] is not None,
    "dx-no-projection-term": lambda p: True,
    "no-residual": lambda p: p["residual"],
    "dw-uses-x-not-xhat": lambda p: p["need_dw"],
}
# A full run (no --limit, --subset, --mutant or --inject) fails when a
# variant ran on fewer cases than this: coverage is a claim of the check.
MIN_CASES_PER_VARIANT = 50
VARIANTS = ("resident", "looped", "split", "scalar", "vector", "ring",
            "column-groups", "combine-in-cta", "cooperative", "two-launch",
            "tier-vector", "tier-scalar", "tier-boundary", "cluster", "bulk",
            "dependent-launch", "peel", "latency")


# --------------------------------------------------------------------------
# Programs and shapes
# --------------------------------------------------------------------------

def _primes_upto(n):
    sieve = bytearray([1]) * (n + 1)
    sieve[0:2] = b"\x00\x00"
    for i in range(2, int(n ** 0.5) + 1):
        if sieve[i]:
            sieve[i * i::i] = bytearray(len(sieve[i * i::i]))
    return [i for i in range(n + 1) if sieve[i]]


PRIMES = _primes_upto(70000)


def plan_thresholds(p):
    """N on which the kernel plan of program p changes, as
    lib/Conversion/NormToGPU/KernelPlan.cpp decides it: lanes per row
    double where a lane would own more than 32 columns; the resident
    variant ends where 40 + per-column registers x columns passes the
    budget of 512 / 1024 lanes (128 / 64 registers); looped rows keep
    their accumulators in shared memory in parts of 100 KiB (16-bit rows up
    to 16384) or 160 KiB, up to 8 column groups, 4-way split kernels; 32
    columns per final-reduction tile."""
    full = 2 + int(p.residual)
    num_col = int(p.need_dw) + int(p.need_db)
    per_column = full + int(p.has_w) + num_col + 1
    ts = [32 * g for g in (1, 2, 4, 8, 16, 32, 64, 128, 256)]
    ts += [(128 - 40) // per_column * 512, (64 - 40) // per_column * 1024]
    # Static N past one CTA: clusters of 2, 4, 8 CTAs, each holding up to
    # 32 columns x 256 lanes (and the 512 / 1024-lane budgets above).
    for c in (2, 4, 8):
        ts += [c * 32 * 256, c * (128 - 40) // per_column * 512,
               c * (64 - 40) // per_column * 1024]
    ts += [64, 128, 256, 4096 * 3, 16384, 32768, 65536]
    for budget in (100 * 1024, 160 * 1024):
        for groups in (1, 2, 3, 4, 8):
            ts.append(groups * budget // (4 * max(1, num_col)))
    # The looped kernels' bulk ring (16-bit full inputs, sm_90a): the
    # longest row whose two stages of x, dy (, residual) fit 224 KiB beside
    # the accumulators of 1 or 2 column groups.
    room = 224 * 1024 - 2 * 16
    for groups in (1, 2):
        ts.append(room // (4 * num_col // groups + 2 * 2 * full))
    return sorted(set(t for t in ts if 1 <= t <= 70000))


def pick_n(rng, p, vector):
    r = rng.random()
    if r < 0.12:
        return rng.randint(1, 300)
    if r < 0.27:
        return rng.choice(PRIMES)
    if r < 0.42:
        return rng.choice((8, 16)) * rng.randint(1, 70000 // 16)
    if r < 0.52:
        return 2 * rng.randint(0, 34999) + 1
    if r < 0.62:
        return rng.choice((64, 128, 256, 384, 768, 1024, 2048, 4096, 5120,
                           8192, 12288, 16384, 17389, 32768, 65536))
    t = rng.choice(plan_thresholds(p))
    return max(1, min(70000, t + rng.choice((-vector, -1, 0, 0, 1, vector))))


def pick_rows(rng, n, limit):
    cap = max(1, min(200000, limit // n))
    r = rng.random()
    if r < 0.15:
        rows = rng.randint(1, 8)
    elif r < 0.3:
        rows = rng.randint(1, SMS // 4 + 8)  # around the split threshold
    else:
        rows = int(math.exp(rng.uniform(0, math.log(200000))))
    return max(1, min(rows, cap))


def factor_lead(rng, rows, rank):
    if rank == 2:
        return (rows,)
    divisors = [d for d in range(1, min(rows, 64) + 1) if rows % d == 0]
    b = rng.choice(divisors)
    return (b, rows // b)


def gen_program(index, seed):
    """A norm_diffgen program with a GPU-sized shape."""
    base = dg.gen_program(index, f"gpu/{seed}")
    rng = random.Random(f"gpurand/{seed}/{index}")
    vector = 16 // (2 if base.x_type != "f32" else 4)
    n = pick_n(rng, base, vector)
    limit = MAX_ELEMS_LARGE if rng.random() < 0.05 else MAX_ELEMS
    rows = pick_rows(rng, n, limit)
    if base.x_type != "f32" and rng.random() < 0.1:
        # The looped kernels' bulk ring (16-bit rows past the resident
        # variant, aligned, more rows than the split kernels take): a
        # multiple of the vector width up to where its stages stop fitting.
        n = vector * rng.randint(9000 // vector, 20000 // vector)
        rows = rng.randint(34, max(34, min(3000, MAX_ELEMS // n)))
    rank = 3 if rng.random() < 0.25 else 2
    lead = factor_lead(rng, rows, rank)
    dynamic = rng.choice((None, "rows", "rows", "rows", "all"))
    if rank == 3 and dynamic and rng.random() < 0.4:
        dynamic = "lead"
    # A scalar f32 function argument has no place in the C ABI (compile
    # mode takes 0-d tensors): the tensor form.
    scale = "tensor" if base.scale == "arg" else base.scale
    return dataclasses.replace(base, lead=lead, n=n, dynamic=dynamic,
                               scale=scale)


def tier_n(rng, tiers, c):
    """A run-time N at a resident tier's boundary (a run-time N function's
    plan, `tiers`): its capacity, one more (the next tier, or the looped
    kernels after the last), one less, or an odd N inside the tier."""
    i = rng.randrange(len(tiers))
    cap = tiers[i]["cols"]
    low = tiers[i - 1]["cols"] + 1 if i > 0 else 1
    kind = c % 4
    if kind == 0:
        return cap
    if kind == 1:
        return cap + 1
    if kind == 2:
        return max(1, cap - 1)
    return rng.randrange(low | 1, cap + 1, 2) if cap > low else cap


def gen_cases(p, rng, count, plan=None):
    """Run-time shapes, strides and offsets of one program (plan: its
    kernel plan, whose resident tiers a run-time N aims at half the time)."""
    vector = 16 // (2 if p.x_type != "f32" else 4)
    tiers = (plan or {}).get("tiers") or []
    cases = []
    for c in range(count):
        n = p.n
        if p.dynamic == "all" and c > 0:
            n = (tier_n(rng, tiers, c) if tiers and rng.random() < 0.5
                 else pick_n(rng, p, vector))
        if p.dynamic:
            limit = MAX_ELEMS_LARGE if p.rows * p.n > MAX_ELEMS else MAX_ELEMS
            rows = p.rows if c == 0 else pick_rows(rng, n, limit)
        else:
            rows = p.rows
        if rows * n > MAX_ELEMS_LARGE:
            rows = max(1, MAX_ELEMS_LARGE // n)
        if len(p.lead) == 2 and p.dynamic in ("rows", "all"):
            s = p.lead[1]  # static: rows is a multiple of it
            rows = max(s, rows // s * s)
            if rows * n > MAX_ELEMS_LARGE:  # one block of s rows at most
                n = p.n if p.dynamic == "rows" else max(1, MAX_ELEMS // s)
        # Strides (elements) per full tensor and offsets (elements) per
        # pointer: the first case is dense and aligned.
        pad, off = {}, {}
        if c > 0:
            for key in ("x", "dy", "dres", "dx"):
                u = rng.random()
                if u < 0.25:
                    pad[key] = vector * rng.randint(1, 4)
                elif u < 0.40:
                    pad[key] = rng.randint(1, 2 * vector + 1)
            for key in ("x", "dy", "dres", "dx", "w", "prev_dw", "prev_db",
                        "dw", "db", "mean", "rstd"):
                if rng.random() < 0.08:
                    off[key] = rng.randint(1, vector - 1) if vector > 1 else 0
        cases.append(dict(rows=rows, n=n, pad=pad, off=off,
                          seed=f"{p.seed}/case{c}"))
    return cases


# --------------------------------------------------------------------------
# build (on the build machine)
# --------------------------------------------------------------------------

PLAN_KEYS = ("threads_per_row", "rows_per_cta", "chunks_per_thread",
             "vector", "async_stages", "single_launch", "combine_in_cta",
             "column_groups", "split_column_groups", "dynamic_shared_bytes",
             "cluster_ctas", "bulk_stages", "latency_ctas", "latency_rows")
TIER_KEYS = ("cols",) + PLAN_KEYS


def _fields(text, keys):
    fields = {}
    for key in keys:
        mk = re.search(rf"\b{key}\s*=\s*(true|false|-?\d+)", text)
        if mk:
            v = mk.group(1)
            fields[key] = (v == "true") if v in ("true", "false") else int(v)
    return fields


def parse_plans(ir_text):
    """{function name: [plan dict per fused op]} from the IR printed after
    convert-norm-to-gpu (the op's `norm.gpu` plan attribute; a run-time N's
    resident tiers as plan["tiers"], one dict each)."""
    plans = {}
    func = None
    for line in ir_text.splitlines():
        m = re.search(r"func\.func @(\w+)\(", line)
        if m:
            func = m.group(1)
            plans.setdefault(func, [])
            continue
        if func and "norm.gpu" in line:
            own, _, rest = line.partition("tiers = [")
            plan = _fields(own, PLAN_KEYS)
            tiers = re.findall(r"#norm\.resident_tier<([^>]*)>", rest)
            if tiers:
                plan["tiers"] = [_fields(t, TIER_KEYS) for t in tiers]
            plans[func].append(plan)
    return plans


def compile_module(args, index, progs):
    text = "\n".join(dg.emit_program(p)[0] for p in progs)
    base = os.path.join(args.out, f"mod{index}")
    with open(base + ".mlir", "w") as f:
        f.write(text)
    cmd = compile_command(base + ".mlir", base + ".so", chip=args.chip,
                          emit="lib", norm_opt=args.norm_opt,
                          extra=["--mlir-print-ir-after=convert-norm-to-gpu",
                                 "--mlir-print-ir-module-scope=false"])
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return index, None, r.stderr[-4000:], time.time() - t0
    return index, parse_plans(r.stderr), "", time.time() - t0


_PROTOTYPE = re.compile(r"^int (\w+)\(([^)]*)\);", re.M)


def launcher_row_strides(header_path):
    """{function: ([argument index], [result index])}: which arguments and
    results the launcher takes a row stride for, from the library's header.
    The compiler decides it (a [N] weight over a one-row domain [1, N] is a
    full-domain input, with a stride), so the harness reads it rather than
    assuming the [rows, N] arguments."""
    with open(header_path) as f:
        text = f.read()
    out = {}
    for name, params in _PROTOTYPE.findall(text):
        args = [int(k) for k in re.findall(r"\barg(\d+)_row_stride", params)]
        res = [int(k) for k in re.findall(r"\bres(\d+)_row_stride", params)]
        out[name] = (args, res)
    return out


def cases_for(args, plan):
    """Cases to draw for a program: the bulk ring is the rarest variant
    (few random N take it), so its programs get twice as many, for every
    variant to reach the run's minimum."""
    return args.cases_per_program * (2 if plan.get("bulk_stages", 0) >= 2
                                     else 1)


def cmd_recase(args):
    """Draws the cases of an existing build again (after a change to
    gen_cases), keeping its libraries and plans."""
    path = os.path.join(args.out, "manifest.json")
    with open(path) as f:
        manifest = json.load(f)
    rng = random.Random(f"gpurand-cases/{manifest['seed']}")
    for e in manifest["programs"]:
        p = dg.Program(**{**e["program"], "lead": tuple(e["program"]["lead"])})
        e["cases"] = gen_cases(p, rng, cases_for(args, e["plan"]), e["plan"])
    with open(path, "w") as f:
        json.dump(manifest, f)
    return 0


def cmd_build(args):
    if args.cases_only:
        return cmd_recase(args)
    os.makedirs(args.out, exist_ok=True)
    progs = [gen_program(i, args.seed) for i in range(args.programs)]
    rng = random.Random(f"gpurand-cases/{args.seed}")
    manifest = {"seed": args.seed, "chip": args.chip, "programs": []}
    groups = [progs[i:i + args.per_module]
              for i in range(0, len(progs), args.per_module)]
    failures = []
    plans = {}
    unplanned = []  # compiled, but no kernel plan read from the IR
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for index, got, err, secs in pool.map(
                lambda ig: compile_module(args, *ig), enumerate(groups)):
            if got is None:
                failures.append((index, err))
                print(f"mod{index}: compile failed\n{err}", file=sys.stderr)
            else:
                plans.update({(index, k): v for k, v in got.items()})
                print(f"mod{index}: {len(groups[index])} functions, "
                      f"{secs:.1f} s", flush=True)
    failed_modules = {index for index, _ in failures}
    for index, group in enumerate(groups):
        header = os.path.join(args.out, f"mod{index}.h")
        row_strides = (launcher_row_strides(header)
                       if os.path.exists(header) else {})
        for p in group:
            _, sig, _ = dg.emit_program(p)
            plan = plans.get((index, p.name))
            if not plan:  # a program left out is a failure, by name
                if index not in failed_modules:
                    unplanned.append(f"mod{index}:{p.name}")
                continue
            manifest["programs"].append(dict(
                program=dataclasses.asdict(p), name=p.name,
                library=f"mod{index}.so", signature=[k for k, _ in sig],
                param_types=[t for _, t in sig],
                results=[name for name, _, _ in p.outputs()],
                plan=plan[0],
                row_strides=row_strides.get(p.name),
                cases=gen_cases(p, rng, cases_for(args, plan[0]), plan[0])))
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    ncases = sum(len(e["cases"]) for e in manifest["programs"])
    print(f"{len(manifest['programs'])} programs, {ncases} cases in "
          f"{len(groups)} libraries ({time.time() - t0:.0f} s); "
          f"{len(failures)} modules failed to compile")
    for name in unplanned:
        print(f"FAIL {name}: compiled, but no kernel plan (norm.gpu) read "
              "from its IR: left out of the manifest", file=sys.stderr)
    if not manifest["programs"]:
        print("FAIL: the manifest lists no program", file=sys.stderr)
    # The launch tracer, built here against the toolkit's stub libcuda.
    tracer = os.path.join(args.out, "liblaunch_trace.so")
    subprocess.run([args.cc, "-shared", "-fPIC", "-O2",
                    f"-I{args.cuda}/include",
                    os.path.join(HERE, "tools", "launch_trace.c"), "-o",
                    tracer, f"-L{args.cuda}/lib64/stubs",
                    "-Wl,--no-as-needed", "-lcuda", "-ldl"], check=True)
    return 1 if failures or unplanned or not manifest["programs"] else 0


# --------------------------------------------------------------------------
# run (on the GPU machine)
# --------------------------------------------------------------------------

def variants_of(plan, kernels, n=None):
    """Kernel variants one call exercised, from its plan and the kernels the
    driver launched ("name:mode:grid;..."); with the run-time N (n), a
    resident tier's kernels at either end of the tier's range (N = its
    capacity or one less, or the previous tier's capacity plus one) also
    count as "tier-boundary"."""
    tiers = plan.get("tiers", [])
    names = [k.split(":") for k in kernels.split(";") if k]
    out = set()
    # The latency kernels (one cluster, few rows): no final kernel.
    for name, _, _ in names:
        if "_latency" in name:
            out.add("latency")
            out.add("scalar" if name.endswith("_scalar") else "vector")
    mains = [(n, m) for n, m, _ in names if "_main" in n]
    for name, mode in mains:
        split = "_main_split" in name
        scalar = name.endswith("_scalar")
        out.add("scalar" if scalar else "vector")
        # The peeled vector kernel (rows off a 16-byte boundary).
        if name.endswith("_main_peel"):
            out.add("peel")
        if split:
            out.add("split")
        # A resident tier's kernels (`<prefix>_tier<cols>_main[_peel|_scalar]`,
        # a run-time N): counted with that tier's plan.
        tier = re.search(r"_tier(\d+)_main", name)
        if tier:
            cols = int(tier.group(1))
            caps = [t.get("cols") for t in tiers]
            low = max([c for c in caps if c < cols], default=0) + 1
            plan = next((t for t in tiers if t.get("cols") == cols),
                        {"chunks_per_thread": 1})
            out.add("tier-scalar" if scalar else "tier-vector")
            if n in (cols, cols - 1, low):
                out.add("tier-boundary")
        if plan.get("chunks_per_thread", 0) > 0:
            out.add("resident")
            if plan.get("cluster_ctas", 1) > 1 and not tier:
                out.add("cluster")
            if not scalar and plan.get("async_stages", 0) >= 2:
                out.add("ring")
            if plan.get("combine_in_cta"):
                out.add("combine-in-cta")
        else:
            out.add("looped")
            if not split and plan.get("column_groups", 1) > 1:
                out.add("column-groups")
            if not split and not scalar and plan.get("bulk_stages", 0) >= 2:
                out.add("bulk")
        out.add("cooperative" if mode == "coop" else "two-launch")
    if any("_final" in n for n, _, _ in names) and not mains:
        out.add("two-launch")
    if any("_final" in n and m == "dependent" for n, m, _ in names):
        out.add("dependent-launch")
    return out


class Runner:
    def __init__(self, args):
        import torch
        self.torch = torch
        self.args = args
        self.dir = args.dir
        with open(os.path.join(args.dir, "manifest.json")) as f:
            self.manifest = json.load(f)
        tracer = os.path.join(args.dir, "liblaunch_trace.so")
        self.trace = None
        if os.path.exists(tracer) and not args.no_trace:
            os.environ["NORMRT_LIBCUDA"] = tracer
            self.trace = ctypes.CDLL(tracer)
            self.trace.launch_trace_take.restype = ctypes.c_size_t
            self.trace_buf = ctypes.create_string_buffer(1 << 16)
        self.libs = {}
        self.worst = {}  # result dtype -> largest error / tolerance
        self.errors = Worst("gpu_random_check")
        self.dev = torch.device("cuda")
        self.DT = {"bf16": torch.bfloat16, "f16": torch.float16,
                   "f32": torch.float32}

    def take_trace(self):
        if not self.trace:
            return ""
        self.trace.launch_trace_take(self.trace_buf, len(self.trace_buf))
        return self.trace_buf.value.decode()

    def function(self, entry):
        """(norm_opt.Library, the C launcher of the entry's function): the
        cases call it with raw pointers, strides and offsets (`call`)."""
        lib = self.libs.get(entry["library"])
        if lib is None:
            lib = Library(os.path.join(self.dir, entry["library"]))
            self.libs[entry["library"]] = lib
        return lib, lib.functions[entry["name"]].cfunc

    # ---- inputs -------------------------------------------------------

    def place(self, values, rows, n, pad, off, poison=None):
        """values [rows, n] (or None) into a fresh buffer with row stride
        n + pad at element offset off; the rest of the buffer NaN (or
        poison). Returns (view, buffer)."""
        torch = self.torch
        stride = n + pad
        dtype = values.dtype if values is not None else poison
        buf = torch.full((off + rows * stride + 8,), float("nan"),
                         dtype=dtype, device=self.dev)
        view = buf[off:off + rows * stride].view(rows, stride)[:, :n]
        if values is not None:
            view.copy_(values)
        return view, buf

    def inputs(self, p, case):
        torch = self.torch
        rows, n = case["rows"], case["n"]
        g = torch.Generator(device=self.dev)
        g.manual_seed(zlib.crc32(case["seed"].encode()))
        xt, pt = self.DT[p["x_type"]], self.DT[p["p_type"]]

        def randn(*shape, std=1.0):
            return torch.randn(*shape, generator=g, device=self.dev,
                               dtype=torch.float64) * std

        def nonzero(t, dt, away=0.0, min_abs=1e-3):
            t = t.to(dt).double()
            bad = (t - away).abs() < min_abs
            return torch.where(bad, away + min_abs * 4, t).to(dt)

        sign = torch.where(torch.rand(rows, 1, generator=g, device=self.dev)
                           < 0.5, -1.0, 1.0).double()
        offset = sign * (0.5 + 1.5 * torch.rand(
            rows, 1, generator=g, device=self.dev).double())
        spread = torch.where(torch.rand(rows, 1, generator=g,
                                        device=self.dev) < 0.5,
                             0.3 + 0.4 * torch.rand(rows, 1, generator=g,
                                                    device=self.dev),
                             1.5 + 1.5 * torch.rand(rows, 1, generator=g,
                                                    device=self.dev)).double()
        x = nonzero(offset + spread * randn(rows, n), xt)
        xd = x.double()
        mu = xd.mean(-1, keepdim=True)
        z = (xd - mu) / (xd.std(-1, keepdim=True, correction=0) + 1e-3)
        # dW / dB sum over the rows terms of mean ~1: keep them inside f16's
        # range (65504) when they are stored in f16.
        amp = min(1.0, 2048.0 / rows) if "f16" in (p["x_type"],
                                                   p["p_type"]) else 1.0
        dy = nonzero(amp * (1.0 + z + 0.5 * randn(rows, n)), xt,
                     min_abs=1e-3 * amp)
        t = {"x": x, "dy": dy}
        if p["op"] == "layer_norm":
            var = ((xd - mu) ** 2).mean(-1, keepdim=True)
        else:
            mu = torch.zeros_like(mu)
            var = (xd * xd).mean(-1, keepdim=True)
        t["mean"] = mu.float()
        t["rstd"] = (1.0 / torch.sqrt(var + 1e-5)).float()
        if p["has_w"]:
            if p["zc"]:
                t["w"] = nonzero(0.4 * randn(n), pt, 0.0, 0.1)
            else:
                t["w"] = nonzero(1.0 + 0.5 * randn(n), pt, 1.0, 0.1)
        if p["scale"]:
            t["scale"] = torch.tensor(dg.p_scale_const(dg.Program(**{
                **p, "lead": tuple(p["lead"])})), dtype=torch.float32,
                device=self.dev)
        if p["residual"]:
            t["dres"] = nonzero(randn(rows, n), xt)
        prev = self.DT[prev_type(p)]
        if p["acc_dw"]:
            t["prev_dw"] = nonzero(2.0 * randn(n), prev)
        if p["acc_db"]:
            t["prev_db"] = nonzero(2.0 * randn(n), prev)
        return t

    def reference(self, p, t, rows, n, mutant=None):
        """{result: (float64 values, their term scales)}: norm_opt.reference
        with the program's riders, from the statistics the program is
        given or (recomputed) from x in float64. A mutant is a wrong
        reference the check must reject (MUTANTS)."""
        ln = p["op"] == "layer_norm"
        if p["stats"] == "recomputed":
            mean, rstd = float64.statistics(p["op"], t["x"], dg.EPS)
        else:
            mean, rstd = t["mean"], t["rstd"]
        results = ["dx"] + (["dw"] if p["need_dw"] else []) + (
            ["db"] if p["need_db"] else [])
        values, scales = float64.backward(
            p["op"], t["x"], t["dy"], rstd, mean if ln else None,
            t["w"] if p["has_w"] else None, zero_centered=p["zc"],
            dy_scale=t.get("scale"), residual=t.get("dres"),
            dw_in=t.get("prev_dw"), db_in=t.get("prev_db"), results=results,
            scales=True, mutant=mutant)
        return {k: (values[k], scales[k]) for k in values}

    # ---- one case -----------------------------------------------------

    def call(self, entry, fn, lib, t, case, outs):
        """Places inputs per the case, poisons outputs, calls. Returns
        (status, {result: (view, buffer)}, trace)."""
        torch = self.torch
        p = entry["program"]
        rows, n = case["rows"], case["n"]
        ptrs, strides, keep = [], [], []
        arg_strides = []  # the row stride of each argument as placed
        for key, ty in zip(entry["signature"], entry["param_types"]):
            v = t[key]
            if key in FULL_KEYS:
                view, buf = self.place(v, rows, n, case["pad"].get(key, 0),
                                       case["off"].get(key, 0))
                arg_strides.append(n + case["pad"].get(key, 0))
            elif key == "scale":
                view, buf = v, v
                arg_strides.append(None)
            else:
                view, buf = self.place(v.reshape(1, -1), 1, v.numel(), 0,
                                       case["off"].get(key, 0))
                arg_strides.append(v.numel())
            keep.append(buf)
            ptrs.append(view.data_ptr())
        # The arguments the launcher takes a row stride for (its header; an
        # old manifest without them: the [rows, N] ones).
        row_strides = entry.get("row_strides")
        if row_strides is None:
            strides = [s for key, s in zip(entry["signature"], arg_strides)
                       if key in FULL_KEYS]
        else:
            strides = [arg_strides[k] for k in row_strides[0]]
        res = {}
        res_strides = []
        for name in entry["results"]:
            dt = self.DT[p["x_type"]] if name == "dx" else self.DT[
                prev_type(p) if p["acc_" + name] else p["p_type"]]
            if name == "dx":
                view, buf = self.place(None, rows, n, case["pad"].get("dx", 0),
                                       case["off"].get("dx", 0), poison=dt)
                res_strides.append(n + case["pad"].get("dx", 0))
            else:
                view, buf = self.place(None, 1, n, 0,
                                       case["off"].get(name, 0), poison=dt)
                res_strides.append(n)
            res[name] = (view, buf)
            ptrs.append(view.data_ptr())
        if row_strides is None:
            strides += res_strides[:1]  # dx
        else:
            strides += [res_strides[k] for k in row_strides[1]]
        self.take_trace()
        st = fn(*ptrs, rows, n, *strides,
                torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()
        del keep
        return st, res, self.take_trace()

    def check_case(self, entry, fn, lib, case):
        """(compared, problems, trace): compared is [(result, error,
        tolerance)] against the (mutant's) reference; problems are the
        failures that are no tolerance (status, unwritten or stray
        elements, bitwise repeats), which a mutant cannot cause."""
        torch = self.torch
        p = entry["program"]
        rows, n = case["rows"], case["n"]
        t = self.inputs(p, case)
        problems, compared = [], []
        st, res, trace = self.call(entry, fn, lib, t, case, None)
        if st != 0:
            return compared, [f"status {st}: {lib.last_error()}"], trace
        if self.args.inject == "error":  # self-check: a failure no mutant
            return compared, ["injected error (a failed status)"], trace
        if self.args.inject == "nan":  # self-check: after the kernel ran
            poison(res[entry["results"][0]][0])
        ref = self.reference(p, t, rows, n, self.args.mutant)
        for name, (view, buf) in res.items():
            r, s = ref[name]
            out = view.double().reshape(r.shape)
            err = rel_l2(out, r, s)  # inf where an element is not finite
            # --inject nan: the NaN goes to the comparison, which must fail.
            bound = tol(view.dtype)
            self.worst[view.dtype] = worst((self.worst.get(view.dtype, 0.0),
                                            err / bound))
            self.errors.add(view.dtype, err)
            if not torch.isfinite(out).all() and not self.args.inject:
                problems.append(f"{name}: {int((~torch.isfinite(out)).sum())}"
                                f" elements not written or not finite")
                continue
            compared.append((name, err, bound))
            # Nothing outside the view written (padding, neighbours).
            written = buf.isfinite().sum().item()
            if written != view.numel():
                problems.append(f"{name}: {written - view.numel()} elements "
                                f"written outside the result")
        # Bitwise: a second call, and the other launch path.
        first = {k: v[0].clone() for k, v in res.items()}
        del res
        for env in ("", "1"):
            os.environ["NORMRT_NO_COOPERATIVE"] = env
            st2, res2, trace2 = self.call(entry, fn, lib, t, case, None)
            os.environ["NORMRT_NO_COOPERATIVE"] = ""
            if st2 != 0:
                problems.append(f"status {st2} on repeat (no-coop={env})")
                continue
            trace += trace2
            for k, (v, _) in res2.items():
                if not torch.equal(bits(first[k]), bits(v)):
                    problems.append(f"{k}: not bitwise equal on " + (
                        "the two-launch path" if env else "a second call"))
        return compared, problems, trace

    def run(self):
        entries = self.manifest["programs"]
        if not entries:  # nothing to check is no pass
            print(f"FAIL: {self.dir}/manifest.json lists no program")
            return 1
        todo = []
        for entry in entries:
            for ci, case in enumerate(entry["cases"]):
                small = case["rows"] * case["n"] <= SANITIZE_MAX_ELEMS
                todo.append((entry, ci, case, small))
        if self.args.subset == "sanitize":
            todo = pick_sanitize(todo, self.args.sanitize_cases)
        if self.args.mutant:
            todo = [t for t in todo
                    if MUTANTS[self.args.mutant](t[0]["program"])]
        if self.args.limit:
            todo = todo[:self.args.limit]
        if self.args.inject == "empty":
            todo = []
        # Each case compares each of its results, and its other checks.
        checks = Checks("gpu_random_check", expected=sum(
            len(t[0]["results"]) + 1 for t in todo))
        mutants = Mutants([self.args.mutant]) if self.args.mutant else None
        coverage = {v: 0 for v in VARIANTS}
        failures = []
        t0 = time.time()
        for i, (entry, ci, case, _) in enumerate(todo):
            lib, fn = self.function(entry)
            try:
                compared, problems, trace = self.check_case(entry, fn, lib,
                                                            case)
            except Exception as e:  # a crash of one case is a failure
                compared, problems, trace = [], [
                    f"exception {type(e).__name__}: {e}"], ""
            for v in variants_of(entry["plan"], trace, case["n"]):
                coverage[v] += 1
            label = f"{entry['library']}:{entry['name']} case {ci}"
            if mutants:
                # Caught only by a compared result out of tolerance; any
                # other failure is an error of the run, not a catch.
                if problems or not compared:
                    mutants.error(self.args.mutant, f"{label}: " + (
                        "; ".join(problems) or "nothing compared"))
                else:
                    mutants.record(self.args.mutant,
                                   [(e, b) for _, e, b in compared])
            else:
                for name, err, bound in compared:
                    if not checks.within(f"{label} {name}", err, bound):
                        problems.append(f"{name}: rel L2 {err:.3g} not "
                                        f"within {bound:g}")
                checks.require(label, not problems, "; ".join(problems))
            if problems:
                p = dg.Program(**{**entry["program"],
                                  "lead": tuple(entry["program"]["lead"])})
                failures.append((entry["name"], ci))
                print(f"FAIL {label} "
                      f"{p.describe()} rows={case['rows']} n={case['n']} "
                      f"pad={case['pad']} off={case['off']} "
                      f"plan={entry['plan']} kernels={trace}: "
                      + "; ".join(problems), flush=True)
            if self.args.verbose:
                print(f"ok {entry['name']} case {ci} rows={case['rows']} "
                      f"n={case['n']} {trace}", flush=True)
        secs = time.time() - t0
        by_type = {str(k).replace("torch.", ""): round(v, 3)
                   for k, v in self.worst.items()}
        # The coverage minimum holds for a full run only: --limit, a subset,
        # a mutant or an injection choose fewer cases on purpose.
        limited = [why for why, on in (
            ("--limit", self.args.limit), ("--subset sanitize",
                                           self.args.subset != "all"),
            ("--mutant", self.args.mutant), ("--inject", self.args.inject))
            if on]
        thin = [v for v in VARIANTS if coverage[v] < self.args.min_cases]
        summary = dict(seed=self.manifest["seed"], cases=len(todo),
                       failures=len(failures), seconds=round(secs, 1),
                       coverage=coverage, subset=self.args.subset,
                       worst_error_over_tolerance=by_type,
                       mutant=self.args.mutant)
        if self.args.out:
            os.makedirs(self.args.out, exist_ok=True)
            with open(os.path.join(self.args.out,
                                   f"gpurand-{self.args.subset}.json"),
                      "w") as f:
                json.dump(summary, f, indent=1)
        print()
        print(f"| variant | cases |")
        print(f"|---|---|")
        for v in VARIANTS:
            print(f"| {v} | {coverage[v]} |")
        print(f"\nworst error / tolerance by result type: {by_type}")
        self.errors.print()
        print(f"\n{len(todo)} cases ({self.args.subset}), "
              f"{len(failures)} failures, {secs:.0f} s")
        if limited:
            print(f"coverage minimum ({self.args.min_cases} cases per "
                  f"variant) not enforced: a limited run "
                  f"({', '.join(limited)})")
        elif thin:
            print(f"FAIL coverage: fewer than {self.args.min_cases} cases "
                  "on " + ", ".join(f"{v} ({coverage[v]})" for v in thin)
                  + " (build more programs or cases)")
        else:
            print(f"coverage: every variant >= {self.args.min_cases} cases")
        coverage_ok = bool(limited) or not thin
        if mutants:  # the wrong reference must fail (nearly) all
            caught, applied = mutants.counts[self.args.mutant]
            print(f"mutant {self.args.mutant}: caught {caught} of "
                  f"{applied} (by tolerance)")
            problems = mutants.problems()
            for why in problems[:20]:
                print(f"FAIL {why}")
            return 1 if problems or not coverage_ok else 0
        return 1 if checks.finish() or not coverage_ok else 0


def prev_type(p):
    """Element type of an accumulated dW / dB (norm_diffgen.prev_type)."""
    return p["p_type"] if p.get("acc16") else "f32"


def bits(t):
    import torch
    return t.clone().view(torch.uint8)


def pick_sanitize(todo, count):
    """Small cases, round-robin over the plans' variants, so every variant
    is in the sanitizer subset."""
    small = [t for t in todo if t[3]]
    buckets = {}
    for t in small:
        plan = t[0]["plan"]
        tiers = plan.get("tiers") or []
        on_tier = bool(tiers) and t[2]["n"] <= tiers[-1]["cols"]
        key = ("resident" if plan.get("chunks_per_thread", 0) or on_tier
               else "looped", on_tier,
               plan.get("async_stages", 0) >= 2,
               plan.get("column_groups", 1) > 1,
               plan.get("cluster_ctas", 1) > 1,
               plan.get("bulk_stages", 0) >= 2,
               t[2]["rows"] * 4 <= SMS, bool(t[2]["off"]) or bool(t[2]["pad"]))
        buckets.setdefault(key, []).append(t)
    picked = []
    while len(picked) < count and any(buckets.values()):
        for key in list(buckets):
            if buckets[key]:
                picked.append(buckets[key].pop(0))
    return picked[:count]


def cmd_sanitize(args):
    """The sanitize subset under each compute-sanitizer tool, one process
    per tool; a tool passes when it reports nothing and the check passes."""
    rows = []
    for tool in args.tools.split(","):
        cmd = [args.compute_sanitizer, "--tool", tool, "--error-exitcode",
               "97", "--kernel-name", "kns=prog_",
               sys.executable, os.path.abspath(__file__), "run", "--dir",
               args.dir, "--subset", "sanitize", "--sanitize-cases",
               str(args.sanitize_cases)]
        if args.out:
            cmd += ["--out", os.path.join(args.out, tool)]
        t0 = time.time()
        r = subprocess.run(cmd, capture_output=True, text=True)
        out = r.stdout + r.stderr
        summary = [l for l in out.splitlines() if "SUMMARY" in l]
        cases = re.findall(r"^(\d+) cases \(sanitize\), (\d+) failures",
                           out, re.M)
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            with open(os.path.join(args.out, f"sanitize-{tool}.log"),
                      "w") as f:
                f.write(out)
        ok = r.returncode == 0
        rows.append((tool, cases[0] if cases else ("?", "?"),
                     summary[-1].strip() if summary else "(no summary)",
                     r.returncode, time.time() - t0))
        if not ok:
            print(out[-6000:])
    print("\n| tool | cases | failures | sanitizer summary | exit | s |")
    print("|---|---|---|---|---|---|")
    for tool, (n, f), summ, rc, secs in rows:
        print(f"| {tool} | {n} | {f} | {summ} | {rc} | {secs:.0f} |")
    return 0 if all(rc == 0 for *_, rc, _ in rows) else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--seed", default="1")
    b.add_argument("--programs", type=int, default=300)
    b.add_argument("--cases-per-program", type=int, default=7)
    b.add_argument("--per-module", type=int, default=25)
    b.add_argument("--norm-opt", default=os.path.join(ROOT, "build", "bin",
                                                      "norm-opt"))
    b.add_argument("--chip", default="sm_90a")
    b.add_argument("--cc", default="cc")
    b.add_argument("--cuda", default="/usr/local/cuda")
    b.add_argument("--out", default=os.path.join(ROOT, ".carry", "gpurand"))
    b.add_argument("-j", "--jobs", type=int, default=2)
    b.add_argument("--cases-only", action="store_true",
                   help="only draw the cases again (the libraries stay)")
    r = sub.add_parser("run")
    r.add_argument("--dir", default=os.path.join(ROOT, ".carry", "gpurand"))
    r.add_argument("--subset", choices=("all", "sanitize"), default="all")
    r.add_argument("--sanitize-cases", type=int, default=120)
    r.add_argument("--limit", type=int, default=0,
                   help="the first N cases only (a smoke run: the "
                        "coverage minimum is not enforced)")
    r.add_argument("--min-cases", type=int, default=MIN_CASES_PER_VARIANT,
                   help="a full run fails when a variant ran on fewer "
                        "cases (default %(default)s)")
    r.add_argument("--out", default=os.environ.get("OUT"))
    r.add_argument("--no-trace", action="store_true")
    r.add_argument("--mutant", choices=sorted(MUTANTS),
                   help="check against this wrong reference: every case "
                        "it applies to must fail (a self-check)")
    add_inject_option(r, {"error": "every case fails without a tolerance "
                          "(a failed status): with --mutant too, the run "
                          "must fail, not count it as a catch"})
    r.add_argument("-v", "--verbose", action="store_true")
    z = sub.add_parser("sanitize")
    z.add_argument("--dir", default=os.path.join(ROOT, ".carry", "gpurand"))
    z.add_argument("--tools", default="memcheck,racecheck,synccheck")
    z.add_argument("--sanitize-cases", type=int, default=120)
    z.add_argument("--compute-sanitizer", default="compute-sanitizer")
    z.add_argument("--out", default=os.environ.get("OUT"))
    args = ap.parse_args()
    if args.cmd == "sanitize":
        return cmd_sanitize(args)
    if args.cmd == "build":
        return cmd_build(args)
    return Runner(args).run()


if __name__ == "__main__":
    sys.exit(main())
