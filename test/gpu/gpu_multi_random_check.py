#!/usr/bin/env python3
"""Randomized GPU differential test of the multi-axis programs the CPU
differential test generates (test/lib-python/norm_diffgen.py,
gen_program(i, seed, multi=1.0)): adaLN (batched rows, the shared-parameter
chain of pytorch 193061, dy out of a batch_matmul) and GroupNorm (NCHW,
channels last), dynamic dims, recomputed and keepdim statistics, four
spellings; each on the GPU against its float64 multi_reference.
PYTHONPATH=python:test/lib-python; two steps (the GPU machine has no MLIR):

  build (here): gpu_multi_random_check.py build [--seed 1] [--programs 120]
                   [--norm-opt build/bin/norm-opt] [--out DIR] [-j 2]
      each program into a library of its own (`norm-opt compile --emit=lib
      --chip sm_90a --host-module=...`; the `fused` style after upstream
      --linalg-fuse-elementwise-ops, as differential.py), its calls run on
      shape-only tensors through the launchers' argument checks
      (norm_opt.Library), DIR/manifest.json (seed + index regenerate a
      program). A program that does not compile or whose calls do not fit
      fails by name (the manifest lists it, the run fails on it): exit 1,
      unless the failure is one of KNOWN_GPU_GAPS (forms the GPU path
      refuses with a diagnostic: listed by name as GAP lines, not run).
  run (GPU):    gpu_multi_random_check.py run --dir DIR [--limit N] [--tiny]
                   [--mutant NAME] [--inject nan|empty]
      gen_multi_inputs' inputs (the program's sizes are the run-time sizes
      of its dynamic dims), outputs poisoned with NaN, the function called
      -- or, where norm-opt outlined the groups (a chain, a matmul's dy),
      its host module run: the groups' launchers, torch's f32 batch_matmul
      (no TF32), the reshapes -- twice: every result within its type's
      tolerance (harness.py) of the reference by relative L2 against the
      reference's term scales (as differential.py), and bitwise equal over
      the two runs. --mutant: against a wrong reference, on the programs it
      applies to; caught only by a result out of tolerance, on >= 95% of
      them (any other failure fails the run). --inject: self-checks that
      must fail (suite.py). --tiny: the smallest program of each kind (for
      compute-sanitizer). Prints a line per program, WORST, kinds run.
"""

import argparse
import concurrent.futures
import json
import math
import os
import re
import subprocess
import sys
import time

import norm_diffgen as dg
from harness import Worst, add_inject_option, poison, tol
from norm_opt import Library, compile_command
from norm_opt.checks import Checks, Mutants
from norm_opt.reference import rel_l2

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
DEFAULT_DIR = os.path.join(ROOT, ".carry", "multirand")
MUTANTS = sorted(set(dg.MULTI_MUTANTS) | set(dg.MULTI_CORE_MUTANTS)
                 | {"matmul-skips-last-k"})
KINDS = dg.MULTI_KINDS + ("group_norm",)
DTYPES = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}
_TYPE = re.compile(r"tensor<([^>]*)>")

# Forms the CPU pipeline fuses but the GPU path refuses, each with a located
# diagnostic or a refused call (never a wrong result): open gaps of issue
# 42, listed by name in every build and run, not failures. Any other build
# failure fails. (name, what the failure says, why)
KNOWN_GPU_GAPS = [
    ("chain-outline-dynamic",
     "cannot outline the fused group",
     "adaLN chain with every dim at run time: outlining the second group "
     "meets a size it cannot pass"),
    ("group-norm-no-spatial",
     "no fused norm group in the input",
     "GroupNorm of x [N, C] (no spatial dims): the GPU fuse pipeline "
     "leaves it unfused (the CPU pipeline fuses it)"),
    ("slab-unit-domain-weight",
     "must start with the samples",
     "GroupNorm whose N and spatial dims are all 1: the weight reads as a "
     "full operand and the signature's batched-rows check refuses it"),
]


def known_gap(error):
    """The KNOWN_GPU_GAPS name `error` is an instance of, else None."""
    return next((name for name, text, _ in KNOWN_GPU_GAPS if text in error),
                None)


def program(seed, index):
    p = dg.gen_program(index, seed, multi=1.0)
    assert isinstance(p, dg.MultiProgram), p
    return p


def parse_type(text):
    """([dim, None where dynamic], element type) of "tensor<?x16xbf16>"'s
    inside."""
    *dims, elem = text.split("x")
    return [None if d == "?" else int(d) for d in dims], elem


def result_shape(p, text):
    """A group result's shape: x's in memory or the column results' (adaLN
    [B, N], GroupNorm [C]), the one its type's rank and static dims fit."""
    dims, _ = parse_type(text)
    fits = {s for s in (tuple(p.mem_shape), tuple(p.cols_shape))
            if len(s) == len(dims)
            and all(d is None or d == v for d, v in zip(dims, s))}
    if len(fits) != 1:
        raise ValueError(f"{p.name}: no one shape for result type {text}")
    return list(fits.pop())


def host_body(path, name):
    """The lines of @name's body in the host module; None where the library
    launches @name itself (the whole-function form)."""
    lines, inside = [], False
    for line in map(str.strip, open(path)):
        if line.startswith(f"func.func @{name}("):
            inside = True
        elif inside and line == "}":
            return lines
        elif inside:
            lines.append(line)
    return None


class Shapes:
    """Shape-only tensors (build step): the calls go through the launchers'
    argument checks only (Function.arguments), nothing is launched."""

    class T:
        ptr = 1 << 40

        def __init__(self, shape, elem):
            self.shape, self.elem, self.dtype = tuple(shape), elem, \
                DTYPES[elem]
            self.device = "cuda:0"
            Shapes.T.ptr += 1 << 24
            self._ptr = Shapes.T.ptr

        def stride(self):
            out = [1]
            for d in reversed(self.shape[1:]):
                out.insert(0, out[0] * max(d, 1))
            return tuple(out) if self.shape else ()

        def data_ptr(self):
            return self._ptr

    def input(self, flat, shape, elem):
        assert len(flat) == math.prod(shape), (shape, len(flat))
        return Shapes.T(shape, elem)

    def empty(self, shape, elem):
        return Shapes.T(shape, elem)

    def fill(self, t, value):
        return t

    def bmm(self, a, b, c):
        assert a.shape[2] == b.shape[1] and c.shape == a.shape[:2] + \
            b.shape[2:], (a.shape, b.shape, c.shape)
        return c

    def reshape(self, t, shape):
        assert math.prod(shape) == math.prod(t.shape), (t.shape, shape)
        return Shapes.T(shape, t.elem)

    def call(self, fn, tensors):
        fn.arguments(*tensors, stream=0)


class Cuda:
    """torch tensors on the GPU, outputs poisoned with NaN."""

    def __init__(self):
        import torch
        self.torch = torch
        torch.backends.cuda.matmul.allow_tf32 = False  # an f32 matmul
        self.DT = {k: getattr(torch, v) for k, v in DTYPES.items()}

    def input(self, flat, shape, elem):
        t = self.torch.tensor(flat, dtype=self.torch.float64)
        return t.reshape(shape).to(self.DT[elem]).cuda()

    def empty(self, shape, elem):
        return self.torch.full(shape, math.nan, dtype=self.DT[elem],
                               device="cuda")

    def fill(self, t, value):
        return self.torch.full_like(t, value)

    def bmm(self, a, b, c):
        return c + self.torch.bmm(a, b)

    def reshape(self, t, shape):
        return t.reshape(shape)

    def call(self, fn, tensors):
        fn(*tensors)  # NormRuntimeError on a failed status


def inputs(p, inp, be):
    """The function's arguments in its parameters' order (emit_multi's
    signature), of multi_param_values' shapes, types and values."""
    vals = dg.multi_param_values(p, inp)
    return [be.input(vals[k][2], vals[k][0], vals[k][1])
            for k, _ in dg.emit_multi(p)[1]]


def run_program(p, lib, host, args, be):
    """The program's results (p.outputs()' order): its launcher called, or
    its host module's body run (the outlined groups' launchers and what
    the host keeps between them)."""
    if host is None:
        outs = [be.empty(shape, elem) for _, elem, shape in p.outputs()]
        be.call(lib.functions[p.name], args + outs)
        return outs
    env = {f"%arg{i}": a for i, a in enumerate(args)}

    def val(tok):
        name, _, k = tok.partition("#")
        return env[name][int(k)] if k else env[name]
    for line in host:
        if line.startswith("return"):
            return [val(t) for t in re.findall(r"%[\w#]+", line)]
        m = re.match(r"(%\w+)(?::\d+)? = ([\w.]+)(.*)$", line)
        if not m:
            raise ValueError(f"{p.name}: host module line not read: {line}")
        res, op, rest = m.groups()
        ops = [val(t) for t in re.findall(r"%[\w#]+", rest)]
        types = _TYPE.findall(rest)
        if op == "arith.constant":
            num = rest.split(":")[0].strip()
            env[res] = int(num) if num.lstrip("-").isdigit() else float(num)
        elif op == "tensor.dim":
            env[res] = ops[0].shape[ops[1]]
        elif op == "tensor.empty":
            dims, elem = parse_type(types[0])
            dyn = iter(ops)
            env[res] = be.empty([next(dyn) if d is None else d
                                 for d in dims], elem)
        elif op == "linalg.fill":
            env[res] = be.fill(ops[1], ops[0])
        elif op == "linalg.batch_matmul":
            env[res] = be.bmm(*ops)
        elif op == "tensor.collapse_shape":
            groups = json.loads(re.search(r"\[\[.*?\]\]", rest).group(0))
            env[res] = be.reshape(ops[0], [
                math.prod(ops[0].shape[i] for i in g) for g in groups])
        elif op == "tensor.expand_shape":
            out = re.search(r"output_shape \[([^\]]*)\]", rest).group(1)
            env[res] = be.reshape(ops[0], [
                val(d) if d.startswith("%") else int(d)
                for d in out.replace(" ", "").split(",")])
        elif op in ("call", "func.call"):
            callee = re.search(r"@(\w+)\(", rest).group(1)
            outs = [be.empty(result_shape(p, t), parse_type(t)[1])
                    for t in _TYPE.findall(rest.rpartition("->")[2])]
            be.call(lib.functions[callee], ops + outs)
            env[res] = outs
        else:
            raise ValueError(f"{p.name}: host op {op} not handled")
    raise ValueError(f"{p.name}: no return in its host module")


def check_outputs(p, results):
    """What is wrong with the results' count, shapes, element types."""
    if len(results) != len(p.outputs()):
        return [f"{len(results)} results, {len(p.outputs())} expected"]
    return [f"{name}: {tuple(r.shape)} {r.dtype}, expected {tuple(shape)} "
            f"{elem}" for (name, elem, shape), r in zip(p.outputs(), results)
            if tuple(r.shape) != tuple(shape)
            or str(r.dtype).replace("torch.", "") != DTYPES[elem]]


# --------------------------------------------------------------------------
# build (here)
# --------------------------------------------------------------------------

def build_one(args, p):
    """(None or why program p failed, its library's launchers): written,
    compiled, its calls checked."""
    base = os.path.join(args.out, p.name)
    with open(base + ".mlir", "w") as f:
        f.write(dg.emit_multi(p)[0])
    src, steps = base + ".mlir", []
    if p.needs_elementwise_fusion:  # the `fused` style's input form
        steps.append([args.norm_opt, "--linalg-fuse-elementwise-ops", src,
                      "-o", base + ".pre.mlir"])
        src = base + ".pre.mlir"
    steps.append(compile_command(src, base + ".so", chip=args.chip,
                                 emit="lib", norm_opt=args.norm_opt,
                                 host_module=base + ".host.mlir"))
    for cmd in steps:
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:  # the first error line; all of it in the log
            with open(base + ".log", "w") as f:
                f.write(" ".join(cmd) + "\n" + r.stderr)
            why = next((l for l in r.stderr.splitlines() if "error" in l),
                       f"exit {r.returncode}")
            return f"does not compile: {why.strip()[:400]}", []
    try:
        be, lib = Shapes(), Library(base + ".so")
        bad = check_outputs(p, run_program(
            p, lib, host_body(base + ".host.mlir", p.name),
            inputs(p, dg.gen_multi_inputs(p), be), be))
        return ("results do not fit: " + "; ".join(bad) if bad else None,
                sorted(lib.functions))
    except Exception as e:  # an argument check refused a call
        return f"calls do not fit: {type(e).__name__}: {e}", []


def cmd_build(args):
    os.makedirs(args.out, exist_ok=True)
    progs = [program(args.seed, i) for i in range(args.programs)]
    manifest = {"seed": args.seed, "chip": args.chip, "programs": [],
                "failed": []}
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        done = list(pool.map(lambda p: build_one(args, p), progs))
    kinds = {k: 0 for k in KINDS}
    for p, (problem, functions) in zip(progs, done):
        entry = dict(index=p.index, name=p.name, describe=p.describe(),
                     kinds=p.kinds() + [p.kind] * (p.kind == "group_norm"),
                     library=p.name + ".so", functions=functions,
                     host=p.name + ".host.mlir", size=p.size,
                     outputs=[o[0] for o in p.outputs()])
        gap = known_gap(problem) if problem else None
        if gap:
            manifest.setdefault("gaps", []).append(dict(entry, gap=gap,
                                                        error=problem))
            print(f"GAP {gap} {p.name} {p.describe()}")
            continue
        if problem:
            manifest["failed"].append(dict(entry, error=problem))
            print(f"FAIL {p.name} {p.describe()}: {problem}")
            continue
        manifest["programs"].append(entry)
        for k in entry["kinds"]:
            kinds[k] += 1
        print(f"built {p.name} {p.describe()}")
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    failed = [e["name"] for e in manifest["failed"]]
    print(f"{len(manifest['programs'])} of {len(progs)} programs compiled "
          f"({time.time() - t0:.0f} s); {len(failed)} failed"
          + (": " + ", ".join(failed) if failed else ""))
    print("KINDS " + ", ".join(f"{k}: {n}" for k, n in kinds.items()))
    print_gaps(manifest)
    return 1 if failed or not manifest["programs"] else 0


def print_gaps(manifest):
    """The known GPU gaps the programs met, one line each."""
    for name, _, why in KNOWN_GPU_GAPS:
        hit = [e["name"] for e in manifest.get("gaps", [])
               if e["gap"] == name]
        if hit:
            print(f"GAP {name} ({len(hit)}: {', '.join(hit)}): {why}")


# --------------------------------------------------------------------------
# run (on the GPU machine)
# --------------------------------------------------------------------------

def pick_tiny(entries):
    """The smallest program of each kind."""
    out = []
    for kind in KINDS:
        have = [e for e in entries if kind in e["kinds"]]
        if have and min(have, key=lambda e: e["size"]) not in out:
            out.append(min(have, key=lambda e: e["size"]))
    return out


def check_program(args, seed, entry, be):
    """([(result, type, error, tolerance)], problems) of one program, run
    twice, against the (--mutant's) reference."""
    torch = be.torch
    p = program(seed, entry["index"])
    if p.describe() != entry["describe"]:
        return [], [f"regenerated as {p.describe()} (norm_diffgen changed "
                    "since the build?)"]
    lib = Library(os.path.join(args.dir, entry["library"]))
    host = host_body(os.path.join(args.dir, entry["host"]), p.name)
    inp = dg.gen_multi_inputs(p)
    ins = inputs(p, inp, be)
    runs = [run_program(p, lib, host, ins, be) for _ in range(2)]
    torch.cuda.synchronize()
    problems = check_outputs(p, runs[0])
    if problems:
        return [], problems
    problems = [f"{name}: not bitwise equal on a second run"
                for (name, _, _), a, b in zip(p.outputs(), *runs)
                if not torch.equal(a.view(torch.uint8), b.view(torch.uint8))]
    if args.inject == "nan":  # self-check: after the kernels ran
        poison(runs[0][0])
    ref = dg.multi_reference(p, inp, args.mutant)
    return [(name, elem, rel_l2(got.double().flatten().tolist(),
                                ref.values[name], ref.scales[name]), tol(elem))
            for (name, elem, _), got in zip(p.outputs(), runs[0])], problems


def cmd_run(args):
    try:
        import torch
        cuda = torch.cuda.is_available()
    except ImportError:
        cuda = False
    if not cuda:
        print("FAIL: the run step needs torch with CUDA (a GPU machine); "
              "the build step runs here")
        return 1
    with open(os.path.join(args.dir, "manifest.json")) as f:
        manifest = json.load(f)
    seed, todo = manifest["seed"], manifest["programs"]
    if args.tiny:
        todo = pick_tiny(todo)
    if args.mutant:
        todo = [e for e in todo if dg.mutant_applies(
            program(seed, e["index"]), args.mutant)]
    todo = todo[:args.limit or None] if args.inject != "empty" else []
    be, name = Cuda(), "gpu_multi_random_check"
    checks = Checks(name, expected=sum(len(e["outputs"]) + 1 for e in todo))
    mutants = Mutants([args.mutant]) if args.mutant else None
    worst, kinds = Worst(name), {k: 0 for k in KINDS}
    for e in manifest["failed"]:  # a build failure is never dropped
        print(f"FAIL {e['name']} {e['describe']}: built with {e['error']}")
        checks.require(e["name"], False, f"{e['describe']}: {e['error']}")
    t0 = time.time()
    for e in todo:
        try:
            compared, problems = check_program(args, seed, e, be)
        except Exception as ex:  # a failed call, a crash: this program's
            compared, problems = [], [f"{type(ex).__name__}: {ex}"]
        for k in e["kinds"]:
            kinds[k] += 1
        for _, elem, err, _ in compared:
            worst.add(elem, err)
        if mutants:  # caught by a tolerance only; anything else an error
            if problems or not compared:
                mutants.error(args.mutant, f"{e['name']}: " + (
                    "; ".join(problems) or "nothing compared"))
            else:
                mutants.record(args.mutant, [c[2:] for c in compared])
        else:
            for res, elem, err, bound in compared:
                if not checks.within(f"{e['name']} {res}", err, bound):
                    problems.append(f"{res}({elem}) {err:.2e} > {bound:g}")
            checks.require(f"{e['name']}", not problems, "; ".join(problems))
        errs = " ".join(f"{r}={err:.1e}" for r, _, err, _ in compared)
        print(f"{'FAIL' if problems else 'ok'} {e['name']} {e['describe']} "
              f"{errs}" + (f"  [{'; '.join(problems)}]" if problems else ""),
              flush=True)
    worst.print()
    print_gaps(manifest)
    print(f"MULTI {len(todo)} programs ({time.time() - t0:.0f} s): "
          + ", ".join(f"{k}: {n}" for k, n in kinds.items()))
    if not mutants:
        return checks.finish()
    caught, applied = mutants.counts[args.mutant]
    print(f"mutant {args.mutant}: caught {caught} of {applied} by tolerance")
    problems = mutants.problems() + checks.failures
    for why in problems[:20]:
        print(f"FAIL {why}")
    return 1 if problems else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--seed", default="1")
    b.add_argument("--programs", type=int, default=120)
    b.add_argument("--norm-opt", default=os.path.join(ROOT, "build", "bin",
                                                      "norm-opt"))
    b.add_argument("--chip", default="sm_90a")
    b.add_argument("--out", default=DEFAULT_DIR)
    b.add_argument("-j", "--jobs", type=int, default=2)
    r = sub.add_parser("run")
    r.add_argument("--dir", default=DEFAULT_DIR)
    r.add_argument("--limit", type=int, default=0,
                   help="the first N programs only")
    r.add_argument("--tiny", action="store_true",
                   help="the smallest program of each kind (for "
                        "compute-sanitizer)")
    r.add_argument("--mutant", choices=MUTANTS,
                   help="against this wrong reference: the programs it "
                        "applies to must fail by tolerance (a self-check)")
    add_inject_option(r)
    args = ap.parse_args()
    return cmd_build(args) if args.cmd == "build" else cmd_run(args)


if __name__ == "__main__":
    sys.exit(main())
