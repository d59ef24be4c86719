#!/usr/bin/env python3
"""Benchmark of the norm-opt kernels against the peers of BENCHMARKS.md.

Runs on the GPU machine over the kernel set of norm_opt.kernel_set,
with the protocol of ../shared/BENCHMARKS.md: backward only; the L2 flushed
(a 256 MB buffer written) before every timed call; every provider but JAX
captured in a CUDA graph after 3 warm-up calls and timed by replaying it
(events around the replay only); the median of >= 200; the floor = the
fewest bytes (x, dy read; dx written; w, b read; dw, db written; mean/rstd
read) over the device-to-device copy bandwidth measured in the same run;
the relative L2 error against a float64 reference printed beside each time.

Peers: torch eager (aten native_layer_norm_backward /
_fused_rms_norm_backward), torch.compile of the plain backward math
(dynamic=False), Liger-Kernel's layer_norm_backward / rms_norm_backward
(its source carried in --liger, N <= 65536), and JAX/XLA (jax.jit of the
jax.vjp of a plain LayerNorm / RMSNorm; no graph capture, so timed by wall
clock: batches of back-to-back calls, each after a 256 MB flush, minus the
same batch of flushes alone; marked "wall" in the table). A peer that
cannot run (missing package, unsupported N) is reported and skipped.

  PYTHONPATH=python:test/lib-python \
  python3 bench/bench.py --dir .carry/gpu --liger .carry/liger/src --out $OUT
      [--dtypes bf16,f16,f32] [--kinds layer,rms] [--reps 200]
      [--shapes 4096x1024,5000x2999:dyn,...] [--providers norm-opt,liger,...]
      [--variant LABEL=DIR ...]   (other builds of ours, timed beside it;
                                   or --variants-file, bench/autotune.py's)
      [--time-budget S]           (start no row after S seconds)
      [--dry-run]                 (no GPU, no torch needed: checks the
                                   libraries, Liger's source, JAX, the plan,
                                   and estimates the run time)

Writes OUT/bench.json (after every row, so a run cut short keeps what it
measured), OUT/benchmarks.md and OUT/benchmarks.png (bench/report.py, which
also regenerates both here from the JSON); prints the table last.
"""

import argparse
import ast
import json
import math
import os
import statistics
import sys
import time

# JAX must not grab 75% of the GPU at its first use: torch shares it.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

try:
    import torch
except ImportError:  # --dry-run on a machine without torch
    torch = None

import norm_opt  # noqa: E402
import report  # noqa: E402  (bench/report.py, beside this script)
from norm_opt import kernel_set  # noqa: E402

# ../shared/BENCHMARKS.md: (M, N, function) with function "static" (the
# library's function for that N) or "dynamic" (its dynamic-N function).
SHAPES = [(m, n, "static") for m, n in (
    (29, 17389), (512, 1024), (4096, 1024), (8192, 2048), (1024, 32768),
    (32768, 1024), (2048, 16384), (8192, 4096), (4096, 8192), (4096, 12288),
    (65536, 768), (8192, 8192), (16384, 4096), (16384, 5120), (576000, 384),
    (131072, 128), (262144, 64))] + [
    (5000, 2999, "static"), (5000, 2999, "dynamic"),
    (5000, 3000, "static"), (5000, 3000, "dynamic")]
# "copy": the reference time of issues 28 and 44 (a graph of one copy of
# the floor's bytes), not a peer.
ALL_PROVIDERS = ("norm-opt",) + report.PEERS + ("copy",)
ELEMENT_BYTES = {"bf16": 2, "f16": 2, "f32": 4}
EPS = 1e-5  # the forward's epsilon (norm_opt.testing.make_inputs)
FLUSH_BYTES = 256 * 1024 * 1024
JAX_CACHE = os.environ.get("BENCH_JAX_CACHE", "/tmp/bench-jax-cache")


def parse_shapes(text):
    """'4096x1024,5000x2999:dyn' -> [(4096, 1024, 'static'), ...]."""
    out = []
    for item in text.split(","):
        dims, _, fn = item.partition(":")
        try:
            m, n = (int(v) for v in dims.split("x"))
        except ValueError:
            fn = "bad"
        if fn not in ("", "static", "dyn", "dynamic") or m < 0 or n < 1:
            raise SystemExit(f"bench: bad shape {item!r} (MxN[:dyn])")
        out.append((m, n, "dynamic" if fn.startswith("dyn") else "static"))
    return out


def floor_bytes(kind, m, n, dt):
    e = ELEMENT_BYTES[dt]
    total = 3 * m * n * e  # x, dy read; dx written
    total += 2 * n * e  # w read, dw written
    total += m * 4  # rstd
    if kind == "layer":
        total += 2 * n * e + m * 4  # b read, db written, mean
    return total


class Timer:
    def __init__(self, reps):
        self.reps = reps
        self.cache = torch.empty(FLUSH_BYTES, dtype=torch.int8, device="cuda")

    def flush(self):
        """The protocol's L2 flush: a 256 MB write."""
        self.cache.zero_()

    def graph_time(self, fn):
        """Median microseconds of a CUDA-graph replay of fn, cold L2."""
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                fn()
        s.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            fn()
        torch.cuda.synchronize()
        n = self.reps + 10
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for i in range(n):
            self.flush()
            starts[i].record()
            g.replay()
            ends[i].record()
        torch.cuda.synchronize()
        times = [a.elapsed_time(b) * 1e3 for a, b in zip(starts, ends)][10:]
        del g
        return statistics.median(times)

    def copy_bandwidth(self):
        src = torch.empty(1 << 30, dtype=torch.int8, device="cuda")
        dst = torch.empty_like(src)
        src.fill_(1)
        for _ in range(3):
            dst.copy_(src)
        times = []
        for _ in range(20):
            a = torch.cuda.Event(enable_timing=True)
            b = torch.cuda.Event(enable_timing=True)
            a.record()
            dst.copy_(src)
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) * 1e-3)
        return 2 * src.numel() / statistics.median(times)


def torch_math(kind):
    """The plain-torch backward math torch.compile sees."""
    if kind == "layer":
        def f(dy, x, w, mean, rstd):
            xf, dyf, wf = x.float(), dy.float(), w.float()
            xhat = (xf - mean[:, None]) * rstd[:, None]
            wdy = dyf * wf
            c1 = (xhat * wdy).mean(-1, keepdim=True)
            c2 = wdy.mean(-1, keepdim=True)
            dx = (wdy - xhat * c1 - c2) * rstd[:, None]
            return (dx.to(x.dtype), (dyf * xhat).sum(0).to(w.dtype),
                    dyf.sum(0).to(w.dtype))
    else:
        def f(dy, x, w, mean, rstd):
            xf, dyf, wf = x.float(), dy.float(), w.float()
            xhat = xf * rstd[:, None]
            wdy = dyf * wf
            c1 = (xhat * wdy).mean(-1, keepdim=True)
            dx = (wdy - xhat * c1) * rstd[:, None]
            return dx.to(x.dtype), (dyf * xhat).sum(0).to(w.dtype)
    return f


# --- Liger-Kernel -----------------------------------------------------------

LIGER_FILES = ("liger_kernel/__init__.py", "liger_kernel/utils.py",
               "liger_kernel/ops/utils.py", "liger_kernel/ops/layer_norm.py",
               "liger_kernel/ops/rms_norm.py")
# The calls below, by parameter count (checked against the source).
LIGER_SIGNATURES = {"layer_norm.layer_norm_backward": 6,
                    "rms_norm.rms_norm_backward": 10,
                    "utils.calculate_settings": 1}


def check_liger_source(src):
    """Problems with the carried Liger source, found without importing it."""
    problems = []
    for f in LIGER_FILES:
        if not os.path.isfile(os.path.join(src, f)):
            problems.append(f"missing {os.path.join(src, f)}")
    if problems:
        return problems
    for qual, nparams in LIGER_SIGNATURES.items():
        mod, fn = qual.split(".")
        path = os.path.join(src, "liger_kernel", "ops", mod + ".py")
        tree = ast.parse(open(path).read())
        defs = [d for d in tree.body
                if isinstance(d, ast.FunctionDef) and d.name == fn]
        if not defs:
            problems.append(f"{path}: no {fn}")
        elif len(defs[0].args.args) != nparams:
            problems.append(f"{path}: {fn} takes "
                            f"{len(defs[0].args.args)} parameters, the bench "
                            f"passes {nparams}")
    return problems


def liger_ops(src, *names):
    """The modules liger_kernel.ops.<name> of the carried copy at `src`.

    The packages are registered by path (their __path__; nothing is added
    to sys.path), so that liger_kernel/ops/__init__.py (which imports every
    Liger op and what they need) never runs, whether the carried copy has
    the shim or the upstream file.
    """
    import importlib
    import types
    for pkg in ("liger_kernel", "liger_kernel.ops"):
        if pkg not in sys.modules:
            mod = types.ModuleType(pkg)
            mod.__path__ = [os.path.join(src, *pkg.split("."))]
            sys.modules[pkg] = mod
    sys.modules["liger_kernel"].ops = sys.modules["liger_kernel.ops"]
    # Liger's import probes peft and transformers (for Ascend NPUs), which
    # would take seconds in every process: made unimportable meanwhile.
    blocked = [m for m in ("peft", "transformers") if m not in sys.modules]
    for m in blocked:
        sys.modules[m] = None
    try:
        return [importlib.import_module(f"liger_kernel.ops.{n}")
                for n in names]
    finally:
        for m in blocked:
            del sys.modules[m]


def load_liger(src):
    """(layer_norm module, rms_norm module, calculate_settings)."""
    ln, rms, utils = liger_ops(src, "layer_norm", "rms_norm", "utils")
    return ln, rms, utils.calculate_settings


def liger_provider(liger, kind, t, m, n):
    ln, rms, calculate_settings = liger
    res = {}
    if kind == "layer":
        names = ["dx", "dw", "db"]

        def call():
            res["o"] = ln.layer_norm_backward(t["dy"], t["x"], t["w"], t["b"],
                                              t["mean"], t["rstd"])
    else:
        names = ["dx", "dw"]
        block, warps = calculate_settings(n)  # raises past N = 65536

        def call():
            # offset 0, casting mode 0 ("llama", Liger's default), not in
            # place, row_mode None (Liger picks its kernel).
            res["o"] = rms.rms_norm_backward(t["dy"], t["x"], t["w"],
                                             t["rstd"], 0.0, 0, block, warps,
                                             False, None)
    return call, lambda: dict(zip(names, res["o"]))


# --- JAX/XLA ----------------------------------------------------------------

class JaxPeer:
    """jax.jit(jax.vjp(plain norm)) timed by wall clock, cold L2."""

    def __init__(self, flush=True):
        import jax
        import jax.numpy as jnp
        self.jax, self.jnp = jax, jnp
        # A compilation cache on disk, shared with the --precompile workers.
        for key, value in (("jax_compilation_cache_dir", JAX_CACHE),
                           ("jax_persistent_cache_min_compile_time_secs", 0),
                           ("jax_persistent_cache_min_entry_size_bytes", -1)):
            try:
                jax.config.update(key, value)
            except Exception:
                pass
        self.flush = jax.jit(lambda a: a + 1, donate_argnums=0)
        self.buf = jnp.zeros(FLUSH_BYTES if flush else 1, dtype=jnp.int8)
        self.device = str(jax.devices()[0])
        f32 = jnp.float32

        def layer(x, w, b):
            xf = x.astype(f32)
            xc = xf - xf.mean(-1, keepdims=True)
            rstd = jax.lax.rsqrt((xc * xc).mean(-1, keepdims=True) + EPS)
            return (xc * rstd * w.astype(f32) + b.astype(f32)).astype(x.dtype)

        def rms(x, w):
            xf = x.astype(f32)
            rstd = jax.lax.rsqrt((xf * xf).mean(-1, keepdims=True) + EPS)
            return (xf * rstd * w.astype(f32)).astype(x.dtype)

        def layer_bwd(dy, x, w, b):
            return jax.vjp(layer, x, w, b)[1](dy)

        def rms_bwd(dy, x, w):
            return jax.vjp(rms, x, w)[1](dy)
        self.bwd = {"layer": jax.jit(layer_bwd), "rms": jax.jit(rms_bwd)}

    def to_jax(self, t):
        """Zero-copy through DLPack where it works, else through the host."""
        torch.cuda.synchronize()
        for convert in (self.jax.dlpack.from_dlpack, self.jnp.from_dlpack):
            try:
                return convert(t)
            except Exception:
                pass
        return self.jnp.asarray(t.float().cpu().numpy()).astype(
            {torch.bfloat16: self.jnp.bfloat16,
             torch.float16: self.jnp.float16}.get(t.dtype, self.jnp.float32))

    def to_torch(self, v, like):
        try:
            return torch.from_dlpack(v)
        except Exception:
            import numpy as np
            host = np.asarray(v.astype(self.jnp.float32))
            return torch.from_numpy(host).to("cuda", like.dtype)

    def args(self, kind, t):
        keys = ("dy", "x", "w", "b") if kind == "layer" else ("dy", "x", "w")
        return [self.to_jax(t[k]) for k in keys]

    def compile(self, kind, t):
        self.jax.block_until_ready(self.bwd[kind](*self.args(kind, t)))

    def run(self, kind, t, reps):
        """(outputs as torch tensors, median microseconds)."""
        args = self.args(kind, t)
        fn = self.bwd[kind]
        out = fn(*args)  # compiles for this shape
        self.jax.block_until_ready(out)
        for _ in range(3):
            self.buf = self.flush(self.buf)
            out = fn(*args)
        self.jax.block_until_ready((out, self.buf))
        batch, ests = 10, []
        for _ in range(max(20, math.ceil(reps / batch))):
            t0 = time.perf_counter()
            for _ in range(batch):
                self.buf = self.flush(self.buf)
                out = fn(*args)
            self.jax.block_until_ready((out, self.buf))
            t1 = time.perf_counter()
            for _ in range(batch):
                self.buf = self.flush(self.buf)
            self.buf.block_until_ready()
            t2 = time.perf_counter()
            ests.append(((t1 - t0) - (t2 - t1)) / batch * 1e6)
        us = statistics.median(ests)
        if us <= 0:
            raise RuntimeError(f"no time left after the flushes ({us:.1f} us)")
        names = ["dx", "dw", "db"][:len(out)]
        outs = {k: self.to_torch(v, t[{"dx": "x"}.get(k, "w")])
                for k, v in zip(names, out)}
        return outs, us


def probe_jax():
    """--probe-jax: JAX beside torch on the GPU, through dlpack, on a small
    case (run in a child process first: a crash there costs nothing)."""
    from norm_opt import testing
    from norm_opt.reference import rel_l2
    gen = torch.Generator(device="cuda")
    gen.manual_seed(7)
    jaxp = JaxPeer(flush=False)
    for kind in ("layer", "rms"):
        t = testing.make_inputs(kind, torch.bfloat16, torch.bfloat16, 64,
                                256, gen, "cuda")
        out = jaxp.bwd[kind](*jaxp.args(kind, t))
        dx = jaxp.to_torch(out[0], t["x"])
        err = rel_l2(dx, testing.float64_backward(kind, t, 64, 256)["dx"])
        if not err < 2e-2:
            raise SystemExit(f"jax {kind}: dx error {err}")
    print(f"jax {jaxp.jax.__version__} on {jaxp.device}: ok")
    return 0


# --- providers --------------------------------------------------------------

def ours_provider(testing, lib, fn, sig, t, m, n):
    """Ours as norm_opt.torch's ops call it: the workspace from torch's
    allocator (inside the captured graph: its private pool, no allocation
    nodes, as for every peer's temporaries)."""
    outs = testing.poisoned_outputs(sig, m, n, t["x"].dtype, t["w"].dtype,
                                    t["x"].device)
    nbytes = lib.workspace_bytes(fn, sig, t, outs, m, n)

    def ours():
        testing.call_framework_workspace(lib, fn, sig, t, outs, m, n, nbytes)
    return ours, lambda: outs


def graph_providers(testing, kind, wanted, ours, t, m, n, compiled,
                    variants, liger):
    """name -> (callable, outputs getter), all timed by graph replay."""
    out = {}
    if ours is not None and "norm-opt" in wanted:
        lib, fn, sig = ours
        out["norm-opt"] = ours_provider(testing, lib, fn, sig, t, m, n)
    for label, (vlib, vfn, vsig) in variants.items():
        out[label] = ours_provider(testing, vlib, vfn, vsig, t, m, n)
    names = ["dx", "dw", "db"] if kind == "layer" else ["dx", "dw"]
    if "torch-eager" in wanted:
        res = {}
        if kind == "layer":
            def eager():
                res["o"] = torch.ops.aten.native_layer_norm_backward(
                    t["dy"], t["x"], [n], t["mean"].view(m, 1),
                    t["rstd"].view(m, 1), t["w"], t["b"], [True, True, True])
        else:
            def eager():
                res["o"] = torch.ops.aten._fused_rms_norm_backward(
                    t["dy"], t["x"], [n], t["rstd"].view(m, 1), t["w"],
                    [True, True])
        out["torch-eager"] = (eager, lambda: dict(zip(names, res["o"])))
    if compiled is not None:
        cres = {}

        def comp():
            cres["o"] = compiled(t["dy"], t["x"], t["w"], t["mean"], t["rstd"])
        out["torch-compile"] = (comp, lambda: dict(zip(names, cres["o"])))
    if liger is not None:
        try:
            out["liger"] = liger_provider(liger, kind, t, m, n)
        except Exception as e:  # N past Liger's limit
            out["liger"] = (e, None)
    return out


def ours_function(lib, n, fn_kind):
    if lib is None:
        return None
    key = "dyn" if fn_kind == "dynamic" else n
    if key not in lib.funcs:
        return None
    fn, sig = lib.funcs[key]
    return lib, fn, sig


def summary_line(row):
    return (f"{row['kind']:<5} {row['dtype']:<4} "
            f"{report.shape_label(row):<18} floor {row['floor']:7.1f} | "
            + " | ".join(f"{k} {report.fmt_t(row, k)}" for k in row["times"])
            + (f" | x{row['speedup']:.2f} vs {row['best_peer']}"
               if "speedup" in row else ""))


def measure_row(testing, args, timer, jaxp, kind, dt, m, n, fn_kind, lib,
                compiled, variant_libs, liger, ptxas, bw, gen, peer_cache):
    xdt = testing.DT[dt]
    ours = ours_function(lib, n, fn_kind)
    row = dict(kind=kind, dtype=dt, m=m, n=n, fn=fn_kind,
               floor=floor_bytes(kind, m, n, dt) / bw * 1e6, times={},
               errs={}, timing={"jax-xla": "wall"})
    if ours is None and "norm-opt" in args.wanted:
        row["errs"]["norm-opt"] = {"error": f"no {fn_kind} function for "
                                            f"N={n} in lib{kind}_{dt}.so"}
    t = testing.make_inputs(kind, xdt, xdt, m, n, gen, "cuda")
    ref = testing.float64_backward(kind, t, m, n)

    def errors(o):
        return testing.errors(o, ref, n)

    # A dynamic-N row's peers are the static row's, when that one ran.
    cached = peer_cache.get((kind, dt, m, n)) if fn_kind == "dynamic" else None
    variants = {}
    for label, vlibs in variant_libs.items():
        v = ours_function(vlibs.get(f"lib{kind}_{dt}.so"), n, fn_kind)
        if v:
            variants[label] = v
    wanted = args.wanted if cached is None else {"norm-opt"}
    provs = graph_providers(testing, kind, wanted, ours, t, m, n,
                            compiled if cached is None else None, variants,
                            liger if cached is None else None)
    for name, (call, get) in provs.items():
        try:
            if get is None:
                raise call
            call()
            torch.cuda.synchronize()
            row["errs"][name] = errors(get())
            row["times"][name] = timer.graph_time(call)
        except Exception as e:  # a peer that cannot run a shape
            row["errs"][name] = {"error": str(e)[:200]}
            print(f"  {name} {kind} {dt} {m}x{n}: {str(e)[:200]}", flush=True)
    # The reference (issues 28, 44): a CUDA graph of one device-to-device
    # copy of the floor's bytes (half read, half written), same protocol.
    # Two spellings, the faster kept: a memcpy node, which the driver may
    # give to a copy engine (on the H200 0.57-0.65 of the floor at some
    # sizes, 0.9 at others), and an SM kernel (torch's vectorised
    # elementwise copy of 32-bit words).
    if cached is None and "copy" in args.wanted:
        half = floor_bytes(kind, m, n, dt) // 2 // 4
        src = torch.ones(half, dtype=torch.int32, device="cuda")
        dst = torch.empty_like(src)
        row["copy_kinds"] = {
            "memcpy": timer.graph_time(lambda: dst.copy_(src)),
            "kernel": timer.graph_time(
                lambda: torch.bitwise_not(src, out=dst))}
        row["copy"] = min(row["copy_kinds"].values())
        del src, dst
    elif cached is not None and "copy" in cached:
        row["copy"] = cached["copy"][0]
    if jaxp is not None and cached is None:
        try:
            outs, us = jaxp.run(kind, t, args.reps)
            row["errs"]["jax-xla"] = errors(outs)
            row["times"]["jax-xla"] = us
        except Exception as e:
            row["errs"]["jax-xla"] = {"error": str(e)[:200]}
            print(f"  jax-xla {kind} {dt} {m}x{n}: {str(e)[:200]}",
                  flush=True)
    if cached is not None:
        for name, (tm, err) in cached.items():
            if name != "copy":
                row["times"][name], row["errs"][name] = tm, err
        row["peers_from"] = "static row"
    elif fn_kind == "static":
        peer_cache[(kind, dt, m, n)] = {
            k: (row["times"][k], row["errs"][k]) for k in row["times"]
            if k in report.PEERS}
        if "copy" in row:
            peer_cache[(kind, dt, m, n)]["copy"] = (row["copy"], None)
    if ours is not None:
        prefix = f"{ours[2]['name']}_0"
        row["ptxas"] = {k: ptxas.get(f"{prefix}_{k}")
                        for k in ("main", "main_scalar", "final")}
    best, bt = report.best_peer(row)
    if best and "norm-opt" in row["times"]:
        row["best_peer"] = best
        row["speedup"] = bt / row["times"]["norm-opt"]
    del t, ref
    torch.cuda.empty_cache()
    return row


# --- compile caches filled in parallel -------------------------------------

def setup_torch():
    # One compiled graph per shape (dynamic=False): allow them all, or
    # dynamo falls back to eager after 8 and the peer is timed unfairly.
    import torch._dynamo.config as dynamo_config
    dynamo_config.cache_size_limit = 1024
    if hasattr(dynamo_config, "recompile_limit"):
        dynamo_config.recompile_limit = 1024


def warm_jobs(args, shapes):
    return [(dt, kind, m, n) for dt in args.dtypes for kind in args.kinds
            for m, n, fn_kind in shapes if fn_kind == "static"]


def precompile(args, argv, shapes):
    """Compile every peer's kernels for every shape in --precompile worker
    processes first: Inductor's FX-graph cache, Triton's cache and JAX's
    compilation cache are on disk, so the timing process then loads instead
    of compiling (the compiles are most of a run's time, and serial). Only
    a speed-up: a worker that fails or runs late is reported and ignored."""
    import subprocess
    import tempfile
    t0 = time.time()
    procs = []
    # Each worker compiles in-process: J workers with a pool of cpu_count
    # compile processes each would swamp the machine. compile_threads is
    # not part of Inductor's cache key, so the timing process still hits.
    env = dict(os.environ, TORCHINDUCTOR_COMPILE_THREADS="1")
    for i in range(args.precompile):
        # The last of a repeated option wins.
        cmd = [sys.executable, os.path.abspath(__file__)] + argv + [
            "--precompile=0", f"--warm-shard={i}/{args.precompile}"]
        log = tempfile.TemporaryFile(mode="w+")
        procs.append((subprocess.Popen(cmd, stdout=log, env=env,
                                       stderr=subprocess.STDOUT), log))
    failed = 0
    for p, log in procs:
        note = ""
        try:
            p.wait(timeout=max(1, args.precompile_timeout
                               - (time.time() - t0)))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            note = " (killed: --precompile-timeout)"
        log.seek(0)
        out = log.read()
        if p.returncode != 0:
            failed += 1
            print(f"  precompile worker{note}:", out.strip()[-600:],
                  flush=True)
    print(f"precompiled {len(warm_jobs(args, shapes))} shapes in "
          f"{args.precompile} processes, {time.time() - t0:.0f} s"
          + (f" ({failed} workers failed)" if failed else ""), flush=True)


def warm(args, shapes, shard):
    """A --precompile worker: compile (run once, untimed) its share."""
    from norm_opt import testing
    setup_torch()
    index, count = (int(v) for v in shard.split("/"))
    jobs = warm_jobs(args, shapes)[index::count]
    compiled = {k: torch.compile(torch_math(k), dynamic=False)
                for k in args.kinds}
    liger = (load_liger(os.path.abspath(args.liger))
             if "liger" in args.wanted else None)
    jaxp = JaxPeer(flush=False) if "jax-xla" in args.wanted else None
    gen = torch.Generator(device="cuda")
    gen.manual_seed(7)
    for dt, kind, m, n in jobs:
        t = testing.make_inputs(kind, testing.DT[dt], testing.DT[dt], m, n,
                                gen, "cuda")
        calls = []
        if ("torch-compile" in args.wanted
                and dt in args.compile_dtypes.split(",")):
            calls.append(lambda: compiled[kind](t["dy"], t["x"], t["w"],
                                                t["mean"], t["rstd"]))
        if liger is not None:
            calls.append(lambda: liger_provider(liger, kind, t, m, n)[0]())
        if jaxp is not None:
            calls.append(lambda: jaxp.compile(kind, t))
        for c in calls:
            try:
                c()
            except Exception as e:  # the timing process reports it
                print(f"warm {kind} {dt} {m}x{n}: {str(e)[:120]}")
        torch.cuda.synchronize()
        del t
        torch.cuda.empty_cache()
    return 0


# --- dry run and time estimate ----------------------------------------------

def estimate_seconds(args, shapes):
    """Rough wall time of the run: graph timing, compiles, JAX batches.

    Compile costs (per shape: Inductor ~4 s, Liger's Triton ~1.5 s, XLA
    ~1.5 s; the first Inductor compile of a (kind, dtype) ~15 s) are
    guesses; with --precompile J they run in J processes first and the
    timing process loads them (~1.5 s a shape in all)."""
    bw = 3.0e12
    flush = FLUSH_BYTES / 2.8e12
    jobs = 0.0
    total, per_dtype = 15.0, {}
    for dt in args.dtypes:
        s = 0.0
        for kind in args.kinds:
            compile_first = 15.0 if "torch-compile" in args.wanted else 0
            for m, n, fn_kind in shapes:
                floor = floor_bytes(kind, m, n, dt) / bw
                call = max(floor / 0.6, 15e-6)
                graph = (args.reps + 13) * (call + flush + 15e-6) + 0.2
                providers = 1 + len(args.variants)
                s += 0.3 + floor * 1e4  # inputs + float64 reference
                if fn_kind == "static":
                    work = compile_first
                    compile_first = 0
                    providers += sum(p in args.wanted for p in
                                     ("torch-eager", "torch-compile",
                                      "liger"))
                    work += 4.0 * ("torch-compile" in args.wanted)
                    work += 1.5 * ("liger" in args.wanted)
                    if "jax-xla" in args.wanted:
                        work += 1.5
                        s += 2 * max(20, args.reps // 10) * 10 * (
                            call + 2 * flush)
                    if args.precompile > 0:
                        jobs += work
                        s += 1.5 * (work > 0)
                    else:
                        s += work
                s += providers * graph
        per_dtype[dt] = s
        total += s
    if args.precompile > 0 and jobs:
        pre = 25.0 + 1.3 * jobs / args.precompile
        total += pre
        per_dtype["precompile"] = pre
    return total, per_dtype


def check_libraries(folder, args, shapes, required):
    """The manifest's libraries load (no GPU needed: the runtime opens the
    driver at the first call) and have a function for every row; a
    variant (required=False) may lack some N."""
    ok = True
    path = os.path.join(folder, "manifest.json")
    if not os.path.isfile(path):
        print(f"FAIL no {path} (python3 -m norm_opt.kernel_set)")
        return False
    entries = {e["library"]: e for e in json.load(open(path))["libraries"]}
    missing = 0
    for dt in args.dtypes:
        for kind in args.kinds:
            name = f"lib{kind}_{dt}.so"
            entry = entries.get(name)
            if entry is None:
                print(f"{'FAIL' if required else 'note'} {folder}: no {name}")
                ok = ok and not required
                continue
            try:
                lib = norm_opt.Library(os.path.join(folder, name))
            except (OSError, norm_opt.NormOptError) as e:
                print(f"FAIL {name}: {e}")
                ok = False
                continue
            have = {("dyn" if s.get("dynamic") else s["n"]): s["name"]
                    for s in entry["functions"]}
            for m, n, fn_kind in shapes:
                sym = have.get("dyn" if fn_kind == "dynamic" else n)
                if sym is None or sym not in lib.functions:
                    missing += 1
                    if required:
                        print(f"FAIL {folder}/{name}: no function for "
                              f"{m}x{n} ({fn_kind})")
                        ok = False
    print(f"{'ok  ' if ok else 'FAIL'} libraries in {folder}"
          + (f" ({missing} rows without a function)"
             if missing and not required else ""))
    return ok


def dry_run(args, shapes):
    """Everything that can be checked without a GPU (or torch)."""
    ok = True
    print(f"shapes: {len(shapes)} x kinds {args.kinds} x dtypes "
          f"{args.dtypes}; providers {sorted(args.wanted)}; "
          f"variants {sorted(args.variants)}")
    if "norm-opt" in args.wanted:
        ok = check_libraries(args.dir, args, shapes, required=True)
    for label, vdir in args.variants.items():
        ok = check_libraries(vdir, args, shapes, required=False) and ok
    if "liger" in args.wanted:
        problems = check_liger_source(args.liger)
        for p in problems:
            print(f"FAIL liger: {p}")
        ok = ok and not problems
        if not problems:
            print(f"ok   liger source in {args.liger}")
            if torch is not None:
                try:
                    load_liger(args.liger)
                    print("ok   liger imports")
                except Exception as e:
                    print(f"FAIL liger import: {e}")
                    ok = False
    if "jax-xla" in args.wanted:
        try:
            import jax  # noqa: F401
            print(f"ok   jax {jax.__version__}")
        except ImportError:
            print("note no jax here (the GPU machine has it; the column is "
                  "skipped where it is missing)")
    total, per_dtype = estimate_seconds(args, shapes)
    print("estimated run time: " + ", ".join(
        f"{dt} {s / 60:.1f} min" for dt, s in per_dtype.items())
        + f"; all {total / 60:.1f} min")
    return 0 if ok else 1


# --- main -------------------------------------------------------------------

def triton_version():
    try:
        import triton
        return triton.__version__
    except ImportError:
        return None


def liger_revision(src):
    path = os.path.join(os.path.dirname(os.path.abspath(src)), "REVISION")
    try:
        return open(path).readline().strip()
    except OSError:
        return None


def parse_args(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=".carry/gpu")
    ap.add_argument("--liger", default=".carry/liger/src",
                    help="Liger-Kernel's src/ folder")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--dtypes", default="bf16,f16,f32")
    ap.add_argument("--compile-dtypes", default="bf16,f16,f32")
    ap.add_argument("--kinds", default="layer,rms")
    ap.add_argument("--providers", default=",".join(ALL_PROVIDERS))
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--shapes", default=None,
                    help="MxN[:dyn],... (default: BENCHMARKS.md's)")
    ap.add_argument("--variant", action="append", default=[],
                    help="LABEL=DIR: another build of ours, timed beside")
    ap.add_argument("--variants-file", default=None,
                    help="JSON with {'variants': {LABEL: DIR}} "
                    "(bench/autotune.py build)")
    ap.add_argument("--time-budget", type=float, default=0,
                    help="seconds; start no row after that (0: no limit)")
    ap.add_argument("--precompile", type=int, default=8,
                    help="processes that fill the compile caches first "
                    "(0: none)")
    ap.add_argument("--precompile-timeout", type=float, default=300)
    ap.add_argument("--warm-shard", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--probe-jax", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    args.dtypes = args.dtypes.split(",")
    args.kinds = args.kinds.split(",")
    args.wanted = set(args.providers.split(","))
    unknown = args.wanted - set(ALL_PROVIDERS)
    if unknown:
        ap.error(f"unknown providers {sorted(unknown)}; "
                 f"known: {','.join(ALL_PROVIDERS)}")
    if args.reps < 200:
        print(f"note: --reps {args.reps} is below the protocol's 200",
              file=sys.stderr)
    args.variants = {}
    if args.variants_file:
        with open(args.variants_file) as f:
            args.variants.update(json.load(f)["variants"])
    args.variants.update(v.split("=", 1) for v in args.variant)
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    shapes = parse_shapes(args.shapes) if args.shapes else SHAPES
    if args.dry_run:
        return dry_run(args, shapes)
    if torch is None:
        raise SystemExit("bench: no torch here (use --dry-run)")
    if args.warm_shard:
        return warm(args, shapes, args.warm_shard)
    if args.probe_jax:
        return probe_jax()
    t_start = time.time()
    notes = []
    if "jax-xla" in args.wanted:
        import subprocess
        try:
            probe = subprocess.run(
                [sys.executable, os.path.abspath(__file__), "--probe-jax"],
                capture_output=True, text=True, timeout=180)
            ok, msg = probe.returncode == 0, (probe.stdout + probe.stderr)
        except subprocess.TimeoutExpired:
            ok, msg = False, "timed out"
        print(("" if ok else "no JAX column: ") + msg.strip()[-400:],
              flush=True)
        if not ok:
            notes.append("JAX not usable beside torch: "
                         + msg.strip()[-200:])
            args.wanted.discard("jax-xla")
            argv = argv + ["--providers=" + ",".join(sorted(args.wanted))]
    if args.precompile > 0 and (
            args.wanted & {"torch-compile", "liger", "jax-xla"}):
        precompile(args, argv, shapes)
    from norm_opt import testing
    torch.manual_seed(0)
    setup_torch()
    libs, ptxas = {}, {}
    if "norm-opt" in args.wanted:
        manifest = json.load(open(os.path.join(args.dir, "manifest.json")))
        ptxas = manifest.get("kernels", {})
        for entry in manifest["libraries"]:
            libs[entry["library"]] = kernel_set.ManifestLibrary(
                os.path.join(args.dir, entry["library"]), entry)
    variant_libs = {}
    for label, vdir in args.variants.items():
        vman = json.load(open(os.path.join(vdir, "manifest.json")))
        variant_libs[label] = {
            e["library"]: kernel_set.ManifestLibrary(os.path.join(vdir,
                                                          e["library"]), e)
            for e in vman["libraries"]}
    liger = jaxp = None
    if "liger" in args.wanted:
        try:
            liger = load_liger(os.path.abspath(args.liger))
        except Exception as e:
            notes.append(f"Liger not loaded from {args.liger}: {e}")
    if "jax-xla" in args.wanted:
        try:
            jaxp = JaxPeer()
        except Exception as e:
            notes.append(f"JAX not usable: {e}")
    for note in notes:
        print("note:", note, flush=True)

    timer = Timer(args.reps)
    bw = timer.copy_bandwidth()
    device = torch.cuda.get_device_name()
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s on {device}"
          + (f"; jax on {jaxp.device}" if jaxp else ""), flush=True)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(7)
    rows, t0, stopped = [], t_start, None
    head = dict(bandwidth=bw, device=device, reps=args.reps, notes=notes,
                versions={"torch": torch.__version__,
                          "triton": triton_version(),
                          "jax": jaxp.jax.__version__ if jaxp else None,
                          "liger": liger_revision(args.liger)})
    json_path = os.path.join(args.out, "bench.json")
    os.makedirs(os.path.dirname(json_path) or ".", exist_ok=True)
    for dt in args.dtypes:
        for kind in args.kinds:
            if stopped:
                break
            lib = libs.get(f"lib{kind}_{dt}.so")
            compiled_fn = (torch.compile(torch_math(kind), dynamic=False)
                           if dt in args.compile_dtypes.split(",")
                           and "torch-compile" in args.wanted else None)
            peer_cache = {}
            for m, n, fn_kind in shapes:
                if args.time_budget and time.time() - t0 > args.time_budget:
                    stopped = f"{kind} {dt} {m}x{n}"
                    break
                row = measure_row(testing, args, timer, jaxp, kind, dt, m, n,
                                  fn_kind, lib, compiled_fn, variant_libs,
                                  liger, ptxas, bw, gen, peer_cache)
                rows.append(row)
                print(summary_line(row), flush=True)
                with open(json_path, "w") as f:
                    json.dump(dict(head, rows=rows), f, indent=1)
    if stopped:
        print(f"time budget of {args.time_budget:.0f} s spent: stopped "
              f"before {stopped}", flush=True)
        head["stopped_before"] = stopped
    with open(json_path, "w") as f:
        json.dump(dict(head, rows=rows), f, indent=1)
    table = report.markdown(head, rows)
    with open(os.path.join(args.out, "benchmarks.md"), "w") as f:
        f.write(table)
    report.plot(rows, os.path.join(args.out, "benchmarks.png"))
    # The full table is OUT/benchmarks.md; the short one fits a log's tail.
    print(f"\n({time.time() - t0:.0f} s)\n" + report.short(head, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
