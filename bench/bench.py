#!/usr/bin/env python3
"""Benchmark of the norm-opt kernels against torch eager and torch.compile.

Runs on the GPU machine over the libraries of bench/build_gpu_kernels.py,
with the protocol of ../shared/BENCHMARKS.md: backward only; the L2 flushed
(a 256 MB buffer written) before every timed replay; every provider
captured in a CUDA graph after 3 warm-up calls and timed by replaying it
(events around the replay only); the median of >= 200; the floor = the
fewest bytes (x, dy read; dx written; w, b read; dw, db written; mean/rstd
read) over the device-to-device copy bandwidth measured in the same run;
the relative L2 error against a float64 reference printed beside each time.

  python3 bench/bench.py --dir .carry/gpu --out $OUT [--dtypes bf16,f16,f32]
      [--compile-dtypes bf16] [--reps 200] [--shapes 4096x1024,...]
      [--variant LABEL=DIR ...]   (other builds of ours, timed beside it)

Writes OUT/benchmarks.md (the table), OUT/benchmarks.png (SOL per shape)
and OUT/bench.json; prints the table last.
"""

import argparse
import ctypes
import json
import math
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_check as gc  # noqa: E402

SHAPES = [(29, 17389), (4096, 1024), (8192, 2048), (1024, 32768),
          (32768, 1024), (2048, 16384), (8192, 4096), (4096, 8192),
          (4096, 12288), (65536, 768), (8192, 8192), (16384, 4096),
          (16384, 5120), (576000, 384)]


class Timer:
    def __init__(self, reps):
        self.reps = reps
        self.cache = torch.empty(256 * 1024 * 1024, dtype=torch.int8,
                                 device="cuda")

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
            self.cache.zero_()
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


def floor_bytes(kind, m, n, xdt, wdt):
    e, we = torch.tensor([], dtype=xdt).element_size(), \
        torch.tensor([], dtype=wdt).element_size()
    total = 3 * m * n * e  # x, dy read; dx written
    total += 2 * n * we  # w read, dw written
    total += m * 4  # rstd
    if kind == "layer":
        total += 2 * n * we + m * 4  # b read, db written, mean
    return total


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


def ours_provider(lib, fn, sig, t, m, n):
    outs = gc.poisoned_outputs(sig, m, n, t["x"].dtype, t["w"].dtype,
                               t["x"].device)

    def ours():
        gc.call(lib, fn, sig, t, outs, m, n)
    return ours, lambda: outs


def providers(kind, lib, fn, sig, t, m, n, compiled, variants):
    """name -> (callable, outputs getter)."""
    out = {}
    if fn is not None:
        out["norm-opt"] = ours_provider(lib, fn, sig, t, m, n)
    for label, vlib in variants.items():
        if vlib and n in vlib.funcs:
            vfn, vsig = vlib.funcs[n]
            out[label] = ours_provider(vlib, vfn, vsig, t, m, n)
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
    names = ["dx", "dw", "db"] if kind == "layer" else ["dx", "dw"]
    out["torch-eager"] = (eager, lambda: dict(zip(names, res["o"])))
    if compiled is not None:
        cres = {}

        def comp():
            cres["o"] = compiled(t["dy"], t["x"], t["w"], t["mean"], t["rstd"])
        out["torch-compile"] = (comp, lambda: dict(zip(names, cres["o"])))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=".carry/gpu")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--dtypes", default="bf16,f16,f32")
    ap.add_argument("--compile-dtypes", default="bf16,f16,f32")
    ap.add_argument("--kinds", default="layer,rms")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--shapes", default=None)
    ap.add_argument("--variant", action="append", default=[])
    args = ap.parse_args()
    torch.manual_seed(0)
    # One compiled graph per shape (dynamic=False): allow them all, or
    # dynamo falls back to eager after 8 and the peer is timed unfairly.
    import torch._dynamo.config as dynamo_config
    dynamo_config.cache_size_limit = 1024
    if hasattr(dynamo_config, "recompile_limit"):
        dynamo_config.recompile_limit = 1024
    manifest = json.load(open(os.path.join(args.dir, "manifest.json")))
    ptxas = manifest.get("kernels", {})
    libs = {}
    for entry in manifest["libraries"]:
        libs[entry["library"]] = gc.Library(
            os.path.join(args.dir, entry["library"]), entry)
    variant_libs = {}
    for v in args.variant:
        label, vdir = v.split("=", 1)
        vman = json.load(open(os.path.join(vdir, "manifest.json")))
        variant_libs[label] = {
            e["library"]: gc.Library(os.path.join(vdir, e["library"]), e)
            for e in vman["libraries"]}
    shapes = SHAPES if not args.shapes else [
        tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]

    timer = Timer(args.reps)
    bw = timer.copy_bandwidth()
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s on "
          f"{torch.cuda.get_device_name()}", flush=True)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(7)
    rows = []
    t0 = time.time()
    for dt in args.dtypes.split(","):
        for kind in args.kinds.split(","):
            lib = libs.get(f"lib{kind}_{dt}.so")
            compiled_fn = (torch.compile(torch_math(kind), dynamic=False)
                           if dt in args.compile_dtypes.split(",") else None)
            for m, n in shapes:
                fn, sig = lib.funcs.get(n, (None, None)) if lib else (None,
                                                                      None)
                xdt = gc.DT[dt]
                t = gc.make_inputs(kind, xdt, xdt, m, n, gen, "cuda")
                ref = gc.reference(kind, t, m, n)
                floor = floor_bytes(kind, m, n, xdt, xdt) / bw * 1e6
                row = dict(kind=kind, dtype=dt, m=m, n=n, floor=floor,
                           times={}, errs={})
                for name, (call, get) in providers(
                        kind, lib, fn, sig, t, m, n, compiled_fn,
                        {label: v.get(f"lib{kind}_{dt}.so")
                         for label, v in variant_libs.items()}).items():
                    try:
                        call()
                        torch.cuda.synchronize()
                        o = get()
                        row["errs"][name] = {
                            k: (gc.rel_l2_chunked(o[k], ref[k], n)
                                if k == "dx" else gc.rel_l2(o[k], ref[k]))
                            for k in o}
                        row["times"][name] = timer.graph_time(call)
                    except Exception as e:  # a peer that cannot run a shape
                        row["errs"][name] = {"error": str(e)[:200]}
                        print(f"  {name} {kind} {dt} {m}x{n}: {e}",
                              flush=True)
                if sig is not None:
                    prefix = f"{sig['name']}_0"
                    row["ptxas"] = {k: ptxas.get(f"{prefix}_{k}")
                                    for k in ("main", "main_scalar", "final")}
                peers = {k: v for k, v in row["times"].items()
                         if k in ("torch-eager", "torch-compile")}
                ours = row["times"].get("norm-opt")
                if peers and ours:
                    best = min(peers, key=peers.get)
                    row["best_peer"] = best
                    row["speedup"] = peers[best] / ours
                rows.append(row)
                print(summary_line(row), flush=True)
                del t, ref
                torch.cuda.empty_cache()
    with open(os.path.join(args.out, "bench.json"), "w") as f:
        json.dump(dict(bandwidth=bw, device=torch.cuda.get_device_name(),
                       rows=rows), f, indent=1)
    table = markdown(rows, bw)
    with open(os.path.join(args.out, "benchmarks.md"), "w") as f:
        f.write(table)
    plot(rows, os.path.join(args.out, "benchmarks.png"))
    print(f"\n({time.time() - t0:.0f} s)\n" + table)


def fmt_t(row, name):
    t = row["times"].get(name)
    if t is None:
        return "-"
    return f"{t:.1f} ({row['floor'] / t:.2f})"


def summary_line(row):
    extra = " ".join(f"| {k} {fmt_t(row, k)}" for k in row["times"]
                     if k not in ("norm-opt", "torch-eager", "torch-compile"))
    return (f"{row['kind']:<5} {row['dtype']:<4} {row['m']:>6}x{row['n']:<6} "
            f"floor {row['floor']:7.1f} | ours {fmt_t(row, 'norm-opt'):>15} "
            f"| eager {fmt_t(row, 'torch-eager'):>15} | compile "
            f"{fmt_t(row, 'torch-compile'):>15} | x{row.get('speedup', 0):.2f} "
            + extra)


def err_str(errs):
    if not errs or "error" in errs:
        return "-"
    return "/".join(f"{v:.1e}" for v in errs.values())


def markdown(rows, bw):
    lines = [f"Copy bandwidth measured in the same run: {bw / 1e12:.2f} TB/s."
             " Times in microseconds, (SOL) = floor / time. Errors: relative "
             "L2 vs float64 of dx/dw(/db). Registers / spill bytes of our "
             "main (vector) kernel from ptxas.", "",
             "| kind | dtype | M x N | floor us | norm-opt | torch eager | "
             "torch.compile | speedup vs best peer | err norm-opt | "
             "err best peer | regs/spill |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    speedups = {}
    for r in rows:
        p = (r.get("ptxas") or {})
        main = p.get("main") or p.get("main_scalar") or {}
        regs = (f"{main.get('registers')}/{main.get('spill_stores', 0)}"
                if main else "-")
        best = r.get("best_peer")
        lines.append(
            f"| {r['kind']} | {r['dtype']} | {r['m']}x{r['n']} | "
            f"{r['floor']:.1f} | {fmt_t(r, 'norm-opt')} | "
            f"{fmt_t(r, 'torch-eager')} | {fmt_t(r, 'torch-compile')} | "
            f"{r.get('speedup', 0):.2f} ({best}) | "
            f"{err_str(r['errs'].get('norm-opt'))} | "
            f"{err_str(r['errs'].get(best)) if best else '-'} | {regs} |")
        if "speedup" in r:
            speedups.setdefault(r["dtype"], []).append(r["speedup"])
    lines.append("")
    for dt, s in speedups.items():
        geo = math.exp(sum(math.log(v) for v in s) / len(s))
        lines.append(f"Geometric-mean speedup over the best peer, {dt}: "
                     f"{geo:.2f}x ({len(s)} shapes; slower on "
                     f"{sum(v < 1 for v in s)}).")
    return "\n".join(lines) + "\n"


def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    groups = [(k, d) for d in ("bf16", "f16", "f32") for k in ("layer", "rms")
              if any(r["kind"] == k and r["dtype"] == d for r in rows)]
    fig, axes = plt.subplots(len(groups), 1, figsize=(12, 3.2 * len(groups)),
                             squeeze=False)
    for ax, (k, d) in zip(axes[:, 0], groups):
        sel = [r for r in rows if r["kind"] == k and r["dtype"] == d]
        labels = [f"{r['m']}x{r['n']}" for r in sel]
        xs = range(len(sel))
        for i, name in enumerate(("norm-opt", "torch-eager",
                                  "torch-compile")):
            sol = [r["floor"] / r["times"][name] if name in r["times"] else 0
                   for r in sel]
            ax.bar([x + (i - 1) * 0.27 for x in xs], sol, 0.27, label=name)
        ax.axhline(0.9, color="gray", linestyle="--", linewidth=0.8)
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels, rotation=30, fontsize=7)
        ax.set_ylabel("SOL (floor / time)")
        ax.set_title(f"{k} norm backward, {d}")
        ax.set_ylim(0, 1.05)
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
