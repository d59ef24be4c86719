#!/usr/bin/env python3
#===- test/gpu/wheel_check.py - the wheel on a training machine, on a GPU -===#
"""norm_opt installed from the wheel on a machine with CUDA and torch but no
LLVM (issue 39): every kernel is compiled on first use by the bundled
norm-opt. Checks, each against a float64 reference on fresh random inputs
with poisoned outputs (a comparison fails on NaN):

  env         no LLVM/MLIR on the machine, no $NORM_OPT / $NORM_OPT_LIBRARY_PATH,
              norm_opt imported from the installed wheel, its norm-opt bundled
  first-call  a fresh cache: each (kind, N, dtype) compiled on its first call
              (time), then a cache hit (time), results checked
  specialize  Specializing with a run-time N: the generic library's compile,
              calls of a new N before and after its static-N library
  race        4 processes' concurrent first calls of one new library: one
              compile, all the same complete library
  bitwise     dW/dB of two runs of each kernel equal bit for bit
  --self-check  a wrong reference must fail the comparison
  --sanitize    only a small LayerNorm and RMSNorm case each (for a run
                under compute-sanitizer: memcheck, racecheck, synccheck)

Then test/gpu/train_check.py and test/gpu/compile_routing_check.py as
subprocesses on a fresh cache each. A table is printed last; exit 0 when
every check passed. Everything of norm_opt comes from the wheel (its
norm_opt.reference.rel_l2 too).
  python3 -m pip install --no-deps --no-index dist/norm_opt-*.whl
  python3 test/gpu/wheel_check.py [--steps 20] [--self-check]
"""

import argparse
import glob
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
rows_table = []   # (check, result, detail)
failures = []


def record(check, ok, detail):
    rows_table.append((check, "PASS" if ok else "FAIL", detail))
    if not ok:
        failures.append(check)
    print(f"{'PASS' if ok else 'FAIL'} {check}: {detail}", flush=True)


# The GPU harnesses' one tolerance table (harness.py, beside this script;
# it imports only the wheel's norm_opt).
from harness import TOLERANCE as TOL, within  # noqa: E402


def check_env():
    import norm_opt
    llvm = (glob.glob("/usr/lib/llvm-*/lib/libMLIR*") +
            glob.glob("/usr/lib/llvm-*/lib/libLLVM*") +
            [p for p in ("mlir-opt", "llc", "mlir-opt-22") if shutil.which(p)])
    record("env: no LLVM/MLIR on the machine", not llvm,
           "none found" if not llvm else ", ".join(llvm[:4]))
    env = [v for v in ("NORM_OPT", "NORM_OPT_LIBRARY_PATH") if os.environ.get(v)]
    record("env: no $NORM_OPT, no $NORM_OPT_LIBRARY_PATH", not env,
           "unset" if not env else ", ".join(env))
    info = norm_opt.info()
    installed = "site-packages" in norm_opt.__file__ or \
        "dist-packages" in norm_opt.__file__
    record("env: norm_opt from the wheel, norm-opt bundled",
           installed and info["norm_opt_origin"] == "bundled",
           f"{norm_opt.__file__}; {info['norm_opt']} "
           f"({info['norm_opt_origin']}); {info['norm_opt_version']}")
    ldd = subprocess.run(["ldd", info["norm_opt"]], capture_output=True,
                         text=True).stdout
    libs = sorted({line.split()[0] for line in ldd.splitlines() if line.strip()})
    record("env: the bundled norm-opt needs glibc alone",
           all(l.startswith(("linux-vdso", "/lib64/ld-linux", "libc.so",
                             "libm.so", "libdl.so", "libpthread.so",
                             "librt.so")) for l in libs), " ".join(libs))
    print(f"ptxas: {info['ptxas']}", flush=True)


def inputs(kind, rows, n, dtype, seed):
    import torch
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(rows, n, device="cuda", generator=g).to(dtype)
    dy = torch.randn(rows, n, device="cuda", generator=g).to(dtype)
    w = (1 + 0.1 * torch.randn(n, device="cuda", generator=g)).to(dtype)
    xf = x.float()
    mean = xf.mean(-1)
    var = (xf * xf).mean(-1) if kind == "rms" else xf.var(-1, unbiased=False)
    rstd = torch.rsqrt(var + 1e-5)
    return x, dy, w, mean, rstd


def run_kernel(fn, kind, x, dy, w, mean, rstd, poison=float("nan")):
    """The kernel's outputs, written over NaN-poisoned buffers."""
    import torch
    dx = torch.full_like(x, poison)
    dw = torch.full_like(w, poison)
    if kind == "layer":
        db = torch.full_like(w, poison)
        fn(dy, x, mean, rstd, w, torch.zeros_like(w), dx, dw, db)
        torch.cuda.synchronize()
        return {"dx": dx, "dw": dw, "db": db}
    fn(dy, x, rstd, w, dx, dw)
    torch.cuda.synchronize()
    return {"dx": dx, "dw": dw}


def reference(kind, x, dy, w, mean, rstd, wrong=0.0):
    from norm_opt import reference as ref
    want = ref.backward(kind, x.double(), dy.double(), rstd.double(),
                        mean.double() if kind == "layer" else None,
                        w.double(), results=("dx", "dw", "db")
                        if kind == "layer" else ("dx", "dw"))
    if wrong:  # the self-check: a reference that must not match
        want["dw"] = want["dw"] * (1 + wrong)
    return want


def compare(got, want, tol):
    from norm_opt.reference import rel_l2, worst
    errors = []
    for k in want:
        e = rel_l2(got[k], want[k])
        if not within(e, tol):  # NaN fails too
            return False, f"{k} rel L2 {e:.2e} > {tol:.0e}"
        errors.append(e)
    return True, f"worst rel L2 {worst(errors):.1e}"


def first_calls(rows, self_check):
    from norm_opt import kernels
    for kind, n, dtype in (("layer", 4096, "bf16"), ("rms", 4096, "bf16"),
                           ("layer", 1024, "f32"), ("rms", 5120, "f32"),
                           ("rms", 2880, "f16")):
        t0 = time.perf_counter()
        lib = kernels.library(kind, n, dtype, chip="sm_90a")
        cold = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = kernels.library(kind, n, dtype, chip="sm_90a")
        warm = time.perf_counter() - t0
        fn = lib[kernels.function_name(kind)]
        import torch
        tdt = {"bf16": torch.bfloat16, "f16": torch.float16,
               "f32": torch.float32}[dtype]
        args = inputs(kind, rows, n, tdt, seed=n)
        got = run_kernel(fn, kind, *args)
        ok, detail = compare(got, reference(kind, *args), TOL[dtype])
        again_out = run_kernel(fn, kind, *args, poison=7.0)
        bitwise = all(torch.equal(got[k], again_out[k]) for k in got
                      if k != "dx")
        record(f"first-call {kind} N={n} {dtype}",
               ok and bitwise and again.path == lib.path,
               f"compile {cold:.2f} s, cached {warm * 1e3:.1f} ms, {detail}, "
               f"dW/dB bitwise {'equal' if bitwise else 'DIFFERENT'}")
        if self_check:
            # dW off by ten times the tolerance.
            ok, detail = compare(got, reference(kind, *args,
                                                wrong=10 * TOL[dtype]),
                                 TOL[dtype])
            record(f"self-check {kind} N={n} {dtype}: a wrong reference fails",
                   not ok, detail)
            self_check = False


def specialize(rows):
    import torch
    from norm_opt import kernels
    t0 = time.perf_counter()
    spec = kernels.Specializing("rms", "bf16", chip="sm_90a")
    generic = time.perf_counter() - t0
    n = 3000  # not a multiple of the vector width
    args = inputs("rms", rows, n, torch.bfloat16, seed=3)
    want = reference("rms", *args)
    t0 = time.perf_counter()
    fn = spec.function(n)  # the generic kernel while the static one compiles
    first = time.perf_counter() - t0
    ok1, d1 = compare(run_kernel(fn, "rms", *args), want, TOL["bf16"])
    t0 = time.perf_counter()
    spec.wait()
    waited = time.perf_counter() - t0
    fn2 = spec.function(n)
    ok2, d2 = compare(run_kernel(fn2, "rms", *args), want, TOL["bf16"])
    record("specialize rms bf16 run-time N, then N=3000",
           ok1 and ok2 and spec.specialized(n) and not spec.errors,
           f"generic library {generic:.2f} s; first call of N=3000 "
           f"{first * 1e3:.1f} ms (generic: {d1}); static N ready "
           f"{waited:.2f} s later ({d2})")


def race():
    from norm_opt import kernels
    cache = tempfile.mkdtemp(prefix="norm_opt_race.")
    log = pathlib.Path(cache) / "compiles.log"
    wrapper = pathlib.Path(cache) / "norm-opt"
    wrapper.write_text(f"#!/bin/sh\ncase \"$1\" in compile) echo x >> "
                       f"'{log}';; esac\nexec '{kernels.find_norm_opt()}' "
                       "\"$@\"\n")
    wrapper.chmod(0o755)
    code = ("from norm_opt import kernels; print(kernels.library('layer', "
            f"6144, 'bf16', chip='sm_90a', norm_opt='{wrapper}').path)")
    env = dict(os.environ, NORM_OPT_CACHE_DIR=str(pathlib.Path(cache) / "c"))
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    took = time.perf_counter() - t0
    paths = {o.strip() for o, _ in outs}
    compiles = log.read_text().split() if log.exists() else []
    ok = all(p.returncode == 0 for p in procs) and len(paths) == 1 and \
        len(compiles) == 1
    record("race: 4 processes' first calls of layer N=6144 bf16", ok,
           f"{len(compiles)} compile(s), {len(paths)} path(s), {took:.2f} s "
           f"for all four" + ("" if ok else f"; {[e for _, e in outs]}"))


def subprocess_check(name, argv, timeout):
    cache = tempfile.mkdtemp(prefix=f"norm_opt_{name}.")
    env = dict(os.environ, NORM_OPT_CACHE_DIR=cache, PYTHONUNBUFFERED="1")
    t0 = time.perf_counter()
    try:
        done = subprocess.run([sys.executable] + argv, env=env, cwd="/tmp",
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=timeout)
        out, rc = done.stdout, done.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) \
            else (e.stdout or ""), 124
    took = time.perf_counter() - t0
    tail = [l for l in out.splitlines() if l.strip()][-3:]
    print(out[-4000:], flush=True)
    libs = len(list(pathlib.Path(cache).glob("compiler-*/*/lib*.so")))
    record(f"{name} (fresh cache)", rc == 0 and libs > 0,
           f"exit {rc}, {took:.0f} s, {libs} libraries compiled on first use; "
           f"{' | '.join(tail)[-200:]}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--rows", type=int, default=8192)
    p.add_argument("--self-check", action="store_true")
    p.add_argument("--skip-subprocess-checks", action="store_true")
    p.add_argument("--sanitize", action="store_true")
    args = p.parse_args()
    if args.sanitize:  # the cache of the run before: only the kernels run
        import torch
        from norm_opt import kernels
        for kind, n, dtype in (("layer", 4096, torch.bfloat16),
                               ("rms", 1000, torch.float32)):
            name = "bf16" if dtype == torch.bfloat16 else "f32"
            fn = kernels.library(kind, n, name, chip="sm_90a")[
                kernels.function_name(kind)]
            a = inputs(kind, 300, n, dtype, seed=1)
            ok, detail = compare(run_kernel(fn, kind, *a),
                                 reference(kind, *a), TOL[name])
            record(f"sanitize case {kind} 300x{n} {name}", ok, detail)
        return 0 if not failures else 1
    os.environ["NORM_OPT_CACHE_DIR"] = tempfile.mkdtemp(prefix="norm_opt_cache.")
    check_env()
    first_calls(args.rows, args.self_check)
    specialize(args.rows)
    race()
    if not args.skip_subprocess_checks:
        subprocess_check("train_check", [str(HERE / "train_check.py"),
                                         "--steps", str(args.steps)], 420)
        subprocess_check("compile_routing_check",
                         [str(HERE / "compile_routing_check.py")], 300)
    print()
    print(f"{'check':58} {'':4} detail")
    for check, result, detail in rows_table:
        print(f"{check:58} {result:4} {detail}")
    ran = len(rows_table)
    print(f"{ran - len(failures)} of {ran} passed")
    return 0 if ran and not failures else 1


if __name__ == "__main__":
    sys.exit(main())
