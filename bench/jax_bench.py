#!/usr/bin/env python3
"""norm_opt.jax against XLA's own backward (issue 43), on the GPU machine.

Per op: the backward alone from the saved statistics (x, dy [M, N]; w, b
[N]; mean, rstd [M] fp32 -> dx, dw, db), BENCHMARKS.md's shapes:
- ours: the XLA FFI call norm_opt.jax makes in its backward, under jit;
- XLA: the same backward written in jnp (what jax.grad of a LayerNorm /
  RMSNorm gives), under jit: XLA fuses it as it likes.
JAX has no CUDA-graph replay here. Both are timed the same two ways over
`--calls` back-to-back calls whose inputs rotate over enough copies
(>= 256 MB) that L2 is cold for every call: the GPU time of their kernels
in JAX's profiler trace (CUPTI), per call (the figure compared: host
dispatch, 50-60 us per jit call here, is out, as CUDA-graph replay takes it
out for the torch peers), and by wall clock (median of 5 rounds; printed
beside). The floor is the minimal bytes over the bandwidth of an
elementwise 1 GiB copy (x + 1, bf16), by GPU time too. The error of both against float64 (rel. L2 of
dx) is printed beside the time.

Whole step (`--step`): a LLaMA-style stack in pure JAX (hidden 2048, 16
heads of 128, SwiGLU 5632, 2 layers, bf16, 8 x 1024 tokens, RMSNorm before
attention and MLP and at the end), `jax.value_and_grad` of a loss over all
parameters under jit; step time with XLA's RMSNorm backward and with ours,
GPU time (profiler) and wall, median of 3 alternating rounds. The same
with Qwen3 / OLMo2's QK-norm (an RMSNorm of every head's q and k, N = 128
over 131072 rows), where the norms are a larger share of the step.

  python3 bench/jax_bench.py [--dtypes bf16,f32] [--quick] [--step]
      [--step-profile] [--no-ops] [--json out.json]
  python3 bench/jax_bench.py --report a.json [b.json ...] [--png out.png]
"""

import argparse
import glob
import gzip
import json
import math
import os
import statistics
import tempfile
import time

try:
    import jax
    import jax.numpy as jnp
    import numpy as np

    import norm_opt.jax as nj
    DT = {"bf16": jnp.bfloat16, "f16": jnp.float16, "f32": jnp.float32}
except ImportError:  # --report needs none of them
    jax = None

SHAPES = [(4096, 1024), (8192, 2048), (8192, 4096), (16384, 4096),
          (4096, 8192), (8192, 8192), (2048, 16384), (4096, 12288),
          (32768, 1024), (65536, 768), (16384, 5120), (1024, 32768),
          (576000, 384), (29, 17389), (512, 1024), (131072, 128),
          (262144, 64)]


def wall(fn, arg_sets, calls):
    """Median over 5 rounds of the per-call wall time (us) of `calls`
    back-to-back calls, rotating over arg_sets (the whole step)."""
    out = fn(*arg_sets[0])
    for args in arg_sets[:3]:
        out = fn(*args)
    jax.block_until_ready(out)
    rounds = []
    for _ in range(5):
        t0 = time.perf_counter()
        for i in range(calls):
            out = fn(*arg_sets[i % len(arg_sets)])
        jax.block_until_ready(out)
        rounds.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(rounds)


def device_time(fn, arg_sets, calls, show=False, by_name=None):
    """GPU time per call (us): the kernels' durations in JAX's profiler
    trace (CUPTI) of `calls` calls rotating over arg_sets, summed and
    divided by `calls`. Host dispatch, which a wall clock of small calls
    measures instead, is out, as CUDA-graph replay takes it out of the
    protocol's figures for torch."""
    out = None
    for args in arg_sets[:3]:
        out = fn(*args)
    jax.block_until_ready(out)
    with tempfile.TemporaryDirectory() as d:
        jax.profiler.start_trace(d, create_perfetto_trace=True)
        for i in range(calls):
            out = fn(*arg_sets[i % len(arg_sets)])
        jax.block_until_ready(out)
        jax.profiler.stop_trace()
        path = glob.glob(os.path.join(d, "**", "perfetto_trace.json.gz"),
                         recursive=True)[0]
        with gzip.open(path) as f:
            trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    gpu = {e["pid"] for e in events if e.get("ph") == "M"
           and e.get("name") == "process_name"
           and "GPU" in str(e.get("args", {}).get("name", ""))}
    kernels = [e for e in events if e.get("ph") == "X" and e.get("pid") in gpu
               and "memcpy" not in e.get("name", "").lower()
               and "memset" not in e.get("name", "").lower()]
    if show:
        names = sorted({e["name"][:60] for e in kernels})
        print("   kernels:", names[:8], flush=True)
    if not kernels:
        raise RuntimeError("no GPU kernel in the profiler's trace")
    if by_name is not None:
        for e in kernels:
            by_name[e["name"]] = by_name.get(e["name"], 0.0) + float(
                e["dur"]) / calls
    return sum(float(e["dur"]) for e in kernels) / calls


def copy_bandwidth(calls):
    n = 1 << 29  # 1 GiB of bf16
    a = [jnp.ones((n,), jnp.bfloat16) for _ in range(2)]
    f = jax.jit(lambda a: a + jnp.bfloat16(1))
    us = device_time(f, [(x,) for x in a], calls)
    return 2 * n * 2 / (us * 1e-6)  # bytes read + written per second


def xla_backward(kind):
    def layer(dy, x, mean, rstd, w):
        xf, dyf, wf = (t.astype(jnp.float32) for t in (x, dy, w))
        xhat = (xf - mean[:, None]) * rstd[:, None]
        wdy = wf * dyf
        dx = rstd[:, None] * (wdy - wdy.mean(-1, keepdims=True)
                              - xhat * (xhat * wdy).mean(-1, keepdims=True))
        return (dx.astype(x.dtype), (dyf * xhat).sum(0).astype(w.dtype),
                dyf.sum(0).astype(w.dtype))

    def rms(dy, x, rstd, w):
        xf, dyf, wf = (t.astype(jnp.float32) for t in (x, dy, w))
        xhat = xf * rstd[:, None]
        wdy = wf * dyf
        dx = rstd[:, None] * (wdy - xhat * (xhat * wdy).mean(-1,
                                                              keepdims=True))
        return dx.astype(x.dtype), (dyf * xhat).sum(0).astype(w.dtype)
    return jax.jit(layer if kind == "layer" else rms)


def ours_backward(kind):
    if kind == "layer":
        return jax.jit(lambda dy, x, mean, rstd, w: nj._backward(
            "layer", dy, x, (mean, rstd), w))
    return jax.jit(lambda dy, x, rstd, w: nj._backward("rms", dy, x, (rstd,),
                                                       w))


def dx_error(kind, got, dy, x, mean, rstd, w):
    """rel. L2 of dx against float64 (numpy, first 4096 rows)."""
    r = min(4096, x.shape[0])
    xf, dyf = (np.asarray(t[:r].astype(jnp.float32), np.float64)
               for t in (x, dy))
    wf = np.asarray(w.astype(jnp.float32), np.float64)
    rs = np.asarray(rstd[:r], np.float64)[:, None]
    xhat = (xf - np.asarray(mean[:r], np.float64)[:, None]) * rs \
        if kind == "layer" else xf * rs
    wdy = wf * dyf
    ref = wdy - xhat * (xhat * wdy).mean(-1, keepdims=True)
    if kind == "layer":
        ref -= wdy.mean(-1, keepdims=True)
    ref *= rs
    out = np.asarray(got[0][:r].astype(jnp.float32), np.float64)
    if not np.all(np.isfinite(out)):
        return float("inf")
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


def op_table(dtypes, shapes, calls, bw):
    rows = []
    key = jax.random.PRNGKey(0)
    for dname in dtypes:
        dt = DT[dname]
        for m, n in shapes:
            elem = jnp.dtype(dt).itemsize
            per_set = 3 * m * n * elem
            copies = max(1, min(8, -(-(256 << 20) // per_set)))
            for kind in ("layer", "rms"):
                sets = []
                for c in range(copies):
                    k1, k2, key = jax.random.split(key, 3)
                    x = (jax.random.normal(k1, (m, n), jnp.float32) * 2
                         + 0.5).astype(dt)
                    dy = jax.random.normal(k2, (m, n), jnp.float32).astype(dt)
                    w = (1 + 0.1 * jax.random.normal(k1, (n,))).astype(dt)
                    if kind == "layer":
                        _, mean, rstd = nj._layer_forward(x, w, w, 1e-5)
                        sets.append((dy, x, mean, rstd, w))
                    else:
                        _, rstd = nj._rms_forward(x, w, 1e-6)
                        sets.append((dy, x, rstd, w))
                stats = 2 if kind == "layer" else 1
                vecs = 4 if kind == "layer" else 2  # w, b, dw, db
                floor_bytes = 3 * m * n * elem + vecs * n * elem + stats * m * 4
                floor = floor_bytes / bw * 1e6
                res = {"kind": kind, "dtype": dname, "m": m, "n": n,
                       "floor_us": floor}
                for name, fn in (("ours", ours_backward(kind)),
                                 ("xla", xla_backward(kind))):
                    res[name + "_us"] = device_time(fn, sets, calls,
                                                    show=(m, n) == shapes[0])
                    res[name + "_wall_us"] = wall(fn, sets, calls)
                    res[name + "_err"] = dx_error(
                        kind, fn(*sets[0]), sets[0][0], sets[0][1],
                        sets[0][2] if kind == "layer" else None,
                        sets[0][stats + 1], sets[0][-1])
                res["speedup"] = res["xla_us"] / res["ours_us"]
                rows.append(res)
                print(f"{kind:5} {dname} {m}x{n}: floor {floor:7.1f} | ours "
                      f"{res['ours_us']:7.1f} ({floor / res['ours_us']:.2f}) "
                      f"err {res['ours_err']:.1e} | xla {res['xla_us']:7.1f} "
                      f"({floor / res['xla_us']:.2f}) err {res['xla_err']:.1e}"
                      f" | xla/ours {res['speedup']:.2f} | wall ours "
                      f"{res['ours_wall_us']:.1f} xla {res['xla_wall_us']:.1f}",
                      flush=True)
                del sets
    return rows


def llama_step(norm, tokens=8 * 1024, hidden=2048, heads=16, ffn=5632,
               layers=2, batch=8, qk_norm=False):
    key = jax.random.PRNGKey(1)
    dt = jnp.bfloat16

    def dense(k, a, b):
        return (jax.random.normal(k, (a, b), jnp.float32) / np.sqrt(a)
                ).astype(dt)
    params = []
    for _ in range(layers):
        ks = jax.random.split(key, 8)
        key = ks[0]
        params.append({"nq": jnp.ones((hidden // heads,), dt),
                       "nk": jnp.ones((hidden // heads,), dt),
                       "n1": jnp.ones((hidden,), dt),
                       "n2": jnp.ones((hidden,), dt),
                       "qkv": dense(ks[1], hidden, 3 * hidden),
                       "o": dense(ks[2], hidden, hidden),
                       "up": dense(ks[3], hidden, 2 * ffn),
                       "down": dense(ks[4], ffn, hidden)})
    final = jnp.ones((hidden,), dt)
    x = jax.random.normal(key, (batch, tokens // batch, hidden),
                          jnp.float32).astype(dt)

    def model(params, final, x):
        b, s, _ = x.shape
        for p in params:
            h = norm(x, p["n1"])
            q, k, v = jnp.split(h @ p["qkv"], 3, axis=-1)
            q, k, v = (t.reshape(b, s, heads, hidden // heads)
                       for t in (q, k, v))
            if qk_norm:  # Qwen3 / OLMo2: RMSNorm of each head's q and k
                q, k = norm(q, p["nq"]), norm(k, p["nk"])
            a = jax.nn.dot_product_attention(q, k, v, is_causal=True)
            x = x + a.reshape(b, s, hidden) @ p["o"]
            h = norm(x, p["n2"])
            g, u = jnp.split(h @ p["up"], 2, axis=-1)
            x = x + (jax.nn.silu(g) * u) @ p["down"]
        return jnp.mean(norm(x, final).astype(jnp.float32) ** 2)

    step = jax.jit(jax.value_and_grad(model, argnums=(0, 1)))
    return step, (params, final, x)


def step_table(calls, rounds=3, profile=False):
    """GPU time (profiler) and wall time per step, the two variants
    alternating `rounds` times; medians."""
    norms = {"xla": lambda x, w: nj.rms_norm_reference(x, w),
             "ours": lambda x, w: nj.rms_norm(x, w)}
    steps = {(model, name): llama_step(norm, qk_norm=model == "qk-norm")
             for model in ("llama", "qk-norm") for name, norm in norms.items()}
    times = {key: ([], []) for key in steps}
    for _ in range(rounds):
        for key, (step, args) in steps.items():
            times[key][0].append(device_time(step, [args], calls) / 1e3)
            times[key][1].append(wall(step, [args], calls) / 1e3)
    if profile:
        per = {}
        for (model, name), (step, args) in steps.items():
            if model != "llama":
                continue
            per[name] = {}
            device_time(step, [args], calls, by_name=per[name])
        names = set(per["xla"]) | set(per["ours"])
        diff = sorted(names, key=lambda k: -abs(per["ours"].get(k, 0)
                                                - per["xla"].get(k, 0)))
        print("kernel time per step (us): ours - xla, ours, xla")
        for k in diff[:25]:
            o, x = per["ours"].get(k, 0), per["xla"].get(k, 0)
            print(f"  {o - x:+8.1f} {o:8.1f} {x:8.1f}  {k[:90]}")
    rows = []
    for (model, name), (step, args) in steps.items():
        loss, _ = step(*args)
        gpu, host = (statistics.median(v) for v in times[(model, name)])
        rows.append({"model": model, "norms": name, "gpu_ms": gpu,
                     "wall_ms": host, "loss": float(loss)})
        print(f"step {model} with {name} RMSNorm backward: GPU {gpu:.3f} ms,"
              f" wall {host:.3f} ms (loss {float(loss):.6f})", flush=True)
    return rows


def report(paths, png=None):
    """The markdown table (and the PNG) of one or more --json files."""
    ops, steps = [], []
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        ops += data.get("ops", [])
        steps += data.get("step", [])
    lines = ["| kind | dtype | M x N | floor | ours | XLA | XLA / ours | "
             "ours SOL | XLA SOL | rel. L2 dx ours / XLA |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in ops:
        lines.append(
            f"| {r['kind']} | {r['dtype']} | {r['m']}x{r['n']} | "
            f"{r['floor_us']:.1f} | {r['ours_us']:.1f} | {r['xla_us']:.1f} | "
            f"**{r['speedup']:.2f}** | {r['floor_us'] / r['ours_us']:.2f} | "
            f"{r['floor_us'] / r['xla_us']:.2f} | {r['ours_err']:.1e} / "
            f"{r['xla_err']:.1e} |")
    for dtype in sorted({r["dtype"] for r in ops}):
        ten = [r["speedup"] for r in ops if r["dtype"] == dtype
               and r["floor_us"] >= 10]
        if ten:
            gm = math.exp(sum(map(math.log, ten)) / len(ten))
            lines.append(f"\n{dtype}, floor >= 10 us: XLA / ours from "
                         f"{min(ten):.2f} to {max(ten):.2f}, geomean "
                         f"{gm:.2f} ({len(ten)} points)")
    if steps:
        lines += ["", "| model step | XLA's norm backward (GPU / wall) | "
                  "ours (GPU / wall) | ours / XLA (GPU) |", "|---|---|---|---|"]
        for model in dict.fromkeys(s.get("model", "llama") for s in steps):
            by = {s["norms"]: s for s in steps
                  if s.get("model", "llama") == model}
            x, o = by["xla"], by["ours"]
            lines.append(f"| {model} | {x['gpu_ms']:.3f} / {x['wall_ms']:.3f}"
                         f" ms | {o['gpu_ms']:.3f} / {o['wall_ms']:.3f} ms | "
                         f"{o['gpu_ms'] / x['gpu_ms']:.3f} |")
    if png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        groups = [(k, d) for d in dict.fromkeys(r["dtype"] for r in ops)
                  for k in ("layer", "rms")]
        fig, axes = plt.subplots(len(groups), 1,
                                 figsize=(11, 2.6 * len(groups)))
        for ax, (kind, dtype) in zip(list(axes), groups):
            rows = [r for r in ops if r["kind"] == kind and r["dtype"] == dtype]
            xs = range(len(rows))
            ax.bar([i - 0.2 for i in xs], [r["floor_us"] / r["ours_us"]
                                           for r in rows], 0.4, label="ours")
            ax.bar([i + 0.2 for i in xs], [r["floor_us"] / r["xla_us"]
                                           for r in rows], 0.4, label="XLA")
            ax.set_xticks(list(xs), [f"{r['m']}x{r['n']}" for r in rows],
                          rotation=30, fontsize=7)
            ax.set_ylabel("floor / time")
            ax.set_title(f"{kind} {dtype}: backward from JAX (GPU time)",
                         fontsize=9)
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(png, dpi=90)
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--report", nargs="+", metavar="JSON",
                    help="print the table of earlier runs (no JAX needed)")
    ap.add_argument("--png")
    ap.add_argument("--dtypes", default="bf16,f32")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--step", action="store_true")
    ap.add_argument("--step-profile", action="store_true",
                    help="also the step's kernels, ours against XLA's")
    ap.add_argument("--no-ops", action="store_true")
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.report:
        print(report(args.report, args.png))
        return
    bw = copy_bandwidth(args.calls)
    print(f"device {jax.devices()[0].device_kind}; elementwise copy "
          f"{bw / 1e12:.2f} TB/s", flush=True)
    shapes = SHAPES[:3] if args.quick else SHAPES
    out = {"copy_tb_s": bw / 1e12,
           "ops": [] if args.no_ops else op_table(args.dtypes.split(","),
                                                  shapes, args.calls, bw)}
    if args.step or args.step_profile:
        out["step"] = step_table(max(10, args.calls // 4),
                                 profile=args.step_profile)
    ten = [r for r in out["ops"] if r["floor_us"] >= 10]
    if ten:
        low = min(ten, key=lambda r: r["speedup"])
        print(f"SUMMARY floor>=10us: {len(ten)} points, min xla/ours "
              f"{low['speedup']:.2f} ({low['kind']} {low['dtype']} "
              f"{low['m']}x{low['n']}), geomean "
              f"{np.exp(np.mean([np.log(r['speedup']) for r in ten])):.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
