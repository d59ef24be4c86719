#!/usr/bin/env python3
"""norm_opt.jax on the GPU (issue 43): LayerNorm / RMSNorm with our
backward through the XLA FFI handlers, under jit, grad, vmap, shard_map and
XLA's command buffers.

- **Against float64**: every gradient (dx, dW, dB) of `jax.grad` under
  `jit`, on fresh random inputs (never zero), against norm_opt.reference's
  float64 backward of the same statistics, with harness.TOLERANCE; XLA's
  own backward (jax.grad of the plain-jnp forward) is measured beside it.
  Outputs are poisoned: XLA's allocator is first handed NaN-filled buffers
  of the results' sizes, freed just before the call, so an element the
  kernel leaves unwritten reads NaN.
- **Bitwise determinism**: the same step twice gives identical bits, and
  so does a step that donates its inputs (donate_argnums).
- **jax.test_util.check_grads** (f32, small shapes) of the custom_vjp.
- **vmap**: per-example gradients (vmap of grad, w shared), each against
  its own float64 reference.
- **shard_map**: rows sharded over every GPU (one GPU: a mesh of one),
  dW / dB summed by JAX's transpose of the replicated weight.
- **Sharded jit** (`--shard-jit`, 2 GPUs): jit(grad) with x rows-sharded
  by NamedSharding and no shard_map, where norm_opt.jax's call is a
  custom_partitioning: per case the gradients against float64, the
  compiled per-device HLO (our call on the local rows, no all-gather of an
  x-sized array), bitwise determinism over 5 runs and dx sharded as x;
  the HLO check must catch the gathered call of NORM_OPT_JAX_PARTITION=0
  (its self-check), and vmap under the sharded jit still runs.
- **Command buffers**: `--cmdbuf DIR` runs one step in a child process with
  XLA's command buffers on for custom calls and one with them off; the
  results must be bitwise equal, and the optimised HLO must show our call
  inside a command buffer.

  PYTHONPATH=python:test/lib-python:test/gpu python3 test/gpu/jax_check.py
      [--quick] [--cmdbuf DIR] [--shard-only | --shard-jit]
      [--inject nan|empty]
"""

import argparse
import glob
import math
import os
import re
import subprocess
import sys

import numpy as np

STEP_SHAPES = [((64, 256), "float32", "layer")]


def _env_for(cmdbuf, dump):
    flags = [f"--xla_dump_to={dump}", "--xla_dump_hlo_as_text"]
    if cmdbuf:
        flags += ["--xla_gpu_enable_command_buffer=FUSION,CUSTOM_CALL",
                  "--xla_gpu_graph_min_graph_size=1"]
    else:
        flags += ["--xla_gpu_enable_command_buffer="]
    env = dict(os.environ)
    env["XLA_FLAGS"] = " ".join(flags)
    return env


def bitwise_equal(xs, ys):
    """Every array of `xs` bit for bit equal to its partner in `ys`."""
    return all(np.array_equal(np.asarray(p).view(np.uint8),
                              np.asarray(q).view(np.uint8))
               for p, q in zip(xs, ys))


def child_step(out):
    """One jitted training-like step of both norms (what --cmdbuf runs in
    each child): saves every gradient to `out` (npz)."""
    import jax
    import jax.numpy as jnp
    import norm_opt.jax as nj
    key = jax.random.PRNGKey(7)
    k1, k2, k3, k4 = jax.random.split(key, 4)
    x = jax.random.normal(k1, (8, 512, 1024), jnp.bfloat16)
    w = 1 + 0.1 * jax.random.normal(k2, (1024,), jnp.bfloat16)
    b = 0.1 * jax.random.normal(k3, (1024,), jnp.bfloat16)
    g = jax.random.normal(k4, (8, 512, 1024), jnp.bfloat16)

    def loss(x, w, b):
        h = nj.layer_norm(x, w, b) * 1.5 + x
        h = nj.rms_norm(h, w)
        return jnp.sum((h * g).astype(jnp.float32))

    step = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))
    results = None
    for _ in range(5):  # replays (command buffers are recorded once)
        results = [np.asarray(r.astype(jnp.float32)) for r in step(x, w, b)]
    np.savez(out, *results)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--tiny", action="store_true",
                    help="small cases only (for compute-sanitizer)")
    ap.add_argument("--shard-only", action="store_true",
                    help="only shard_map, over every GPU (at least 2)")
    ap.add_argument("--shard-jit", action="store_true",
                    help="only sharded jit without shard_map (the "
                         "custom_partitioning path) on 2 GPUs, and "
                         "shard_map")
    ap.add_argument("--cmdbuf", metavar="DIR",
                    help="also check XLA's command buffers (work folder)")
    ap.add_argument("--child-step", metavar="NPZ", help=argparse.SUPPRESS)
    from harness import Worst, add_inject_option, tol
    add_inject_option(ap)
    args = ap.parse_args()
    if args.child_step:
        child_step(args.child_step)
        return 0

    import jax
    import jax.numpy as jnp
    import torch
    from jax.sharding import Mesh, PartitionSpec as P
    import norm_opt.jax as nj
    from norm_opt.checks import Checks
    from norm_opt.reference import backward, rel_l2

    checks = Checks("jax_check")
    worst = Worst("jax_check")
    xla_worst = Worst("xla_own_backward")
    rng = np.random.default_rng(43)
    if args.inject == "empty":
        sys.exit(checks.finish())

    def t64(a):
        return torch.from_numpy(np.asarray(a.astype(jnp.float32),
                                           dtype=np.float64))

    def inputs(shape, dtype, wdtype):
        n = shape[-1]
        x = jnp.asarray(rng.standard_normal(shape) * 2 + 0.5, dtype)
        dy = jnp.asarray(rng.standard_normal(shape), dtype)
        w = jnp.asarray(1 + 0.3 * rng.standard_normal(n), wdtype)
        b = jnp.asarray(0.2 * rng.standard_normal(n), wdtype)
        return x, dy, w, b

    def poison(*shapes_dtypes):
        """Hands XLA's allocator NaN buffers of these sizes, then frees
        them: the next results are likely to land on NaN."""
        bufs = [jnp.full(s, jnp.nan, d) for s, d in shapes_dtypes]
        for buf in bufs:
            buf.block_until_ready()
            buf.delete()

    def grads(kind, fn, x, dy, w, b):
        if kind == "layer":
            f = lambda x, w, b: jnp.vdot(fn(x, w, b).astype(jnp.float32),
                                         dy.astype(jnp.float32))
            return jax.jit(jax.grad(f, argnums=(0, 1, 2)))(x, w, b)
        f = lambda x, w: jnp.vdot(fn(x, w).astype(jnp.float32),
                                  dy.astype(jnp.float32))
        return jax.jit(jax.grad(f, argnums=(0, 1)))(x, w)

    def reference(kind, x, dy, w, b):
        n = x.shape[-1]
        x2 = x.reshape(-1, n)
        if kind == "layer":
            _, mean, rstd = nj._layer_forward(x2, w, b, 1e-5)
            mean = t64(mean)
        else:
            _, rstd = nj._rms_forward(x2, w, 1e-6)
            mean = None
        ref, scale = backward(kind, t64(x2), t64(dy.reshape(-1, n)),
                              t64(rstd), mean, t64(w), scales=True)
        return ref, scale

    def compare(label, kind, got, ref, scale, dtype, wdtype, into):
        """Each gradient against float64; returns their errors."""
        names = ("dx", "dw", "db") if kind == "layer" else ("dx", "dw")
        dtype, wdtype = np.dtype(dtype).name, np.dtype(wdtype).name
        errs = []
        for name, g in zip(names, got):
            g = t64(g).reshape(ref[name].shape)
            if args.inject == "nan" and name == "dx" and into is worst:
                g.view(-1)[0] = float("nan")
            err = rel_l2(g, ref[name], scale[name])
            errs.append(err)
            into.add(dtype if name == "dx" else wdtype, err)
            if into is worst:
                checks.within(f"{label} {name}", err,
                              tol(dtype if name == "dx" else wdtype))
        return errs

    fns = {"layer": (nj.layer_norm, lambda x, w, b: nj.layer_norm_reference(
        x, w, b)), "rms": (lambda x, w: nj.rms_norm(x, w, 1e-6),
                           lambda x, w: nj.rms_norm_reference(x, w, 1e-6))}
    cases = [((4, 128, 1024), jnp.bfloat16, jnp.bfloat16),
             ((2048, 4096), jnp.float32, jnp.float32),
             ((29, 17389), jnp.bfloat16, jnp.bfloat16),
             ((3, 333, 768), jnp.float16, jnp.float16),
             ((1000, 2048), jnp.bfloat16, jnp.float32)]
    if args.quick:
        cases = cases[:2]
    if args.tiny:
        cases = [((64, 1024), jnp.bfloat16, jnp.bfloat16),
                 ((29, 3000), jnp.float32, jnp.float32)]
    if args.shard_only or args.shard_jit:
        cases = []
    for shape, dtype, wdtype in cases:
        for kind in ("layer", "rms"):
            label = f"{kind} {np.dtype(dtype).name}/{np.dtype(wdtype).name} {shape}"
            x, dy, w, b = inputs(shape, dtype, wdtype)
            ours, xla = fns[kind]
            a = (x, dy, w, b) if kind == "layer" else (x, dy, w, None)
            poison((shape, dtype), ((shape[-1],), wdtype),
                   ((shape[-1],), wdtype))
            got = grads(kind, ours, *a)
            got2 = grads(kind, ours, *a)
            ref, scale = reference(kind, x, dy, w, b)
            compare(label, kind, got, ref, scale, dtype, wdtype, worst)
            compare(label, kind, grads(kind, xla, *a), ref, scale, dtype,
                    wdtype, xla_worst)
            same = bitwise_equal(got, got2)
            checks.require(f"{label} bitwise determinism", same,
                           "two runs differ")
            print(f"ok {label}", flush=True)

    def check_sharded():
        """shard_map: rows over every GPU (a mesh of one on one GPU)."""
        shard_map = getattr(jax, "shard_map", None)
        if shard_map is None:
            from jax.experimental.shard_map import shard_map
        gpus = jax.devices()
        mesh = Mesh(np.array(gpus), ("rows",))
        rows = 256 * len(gpus)
        x = jnp.asarray(rng.standard_normal((rows, 1024)), jnp.bfloat16)
        dy = jnp.asarray(rng.standard_normal((rows, 1024)), jnp.bfloat16)
        w = jnp.asarray(1 + 0.3 * rng.standard_normal(1024), jnp.bfloat16)
        b = jnp.asarray(0.2 * rng.standard_normal(1024), jnp.bfloat16)

        def local(x, dy, w, b):
            return jnp.vdot(nj.layer_norm(x, w, b).astype(jnp.float32),
                            dy.astype(jnp.float32))

        def sharded_loss(check_vma):
            def loss(x, dy, w, b):
                try:
                    sm = shard_map(lambda x, dy, w, b: jax.lax.psum(
                        local(x, dy, w, b), "rows"), mesh=mesh,
                        in_specs=(P("rows"), P("rows"), P(), P()), out_specs=P(),
                        check_vma=check_vma)
                except TypeError:  # older JAX: check_rep
                    sm = shard_map(lambda x, dy, w, b: jax.lax.psum(
                        local(x, dy, w, b), "rows"), mesh=mesh,
                        in_specs=(P("rows"), P("rows"), P(), P()), out_specs=P(),
                        check_rep=check_vma)
                return sm(x, dy, w, b)
            return loss

        ref, scale = reference("layer", x, dy, w, b)
        for check_vma in (False, True):
            label = f"shard_map (check_vma={check_vma}) over {len(gpus)} GPU(s)"
            try:
                g = jax.jit(jax.grad(sharded_loss(check_vma),
                                     argnums=(0, 2, 3)))(x, dy, w, b)
            except Exception as e:  # noqa: BLE001 - reported as a failure
                checks.require(label, False, f"{type(e).__name__}: {str(e)[:400]}")
                continue
            compare(label, "layer", g, ref, scale, jnp.bfloat16, jnp.bfloat16,
                    worst)
            again = jax.jit(jax.grad(sharded_loss(check_vma),
                                     argnums=(0, 2, 3)))(x, dy, w, b)
            same = bitwise_equal(g, again)
            checks.require(f"{label} bitwise determinism", same,
                           "two runs differ")
            print(f"ok {label}: bitwise equal over two runs={same}", flush=True)
        # Sharded jit without shard_map: our call is a custom_partitioning
        # there (per-device kernels; --shard-jit checks that in detail).
        from jax.sharding import NamedSharding
        rows_sharded = NamedSharding(mesh, P("rows"))
        g = jax.jit(jax.grad(local, argnums=(0, 2, 3)))(
            jax.device_put(x, rows_sharded), jax.device_put(dy, rows_sharded),
            w, b)
        compare(f"sharded jit over {len(gpus)} GPU(s)", "layer", g, ref,
                scale, jnp.bfloat16, jnp.bfloat16, worst)
        if args.shard_only and len(gpus) < 2:
            checks.require("shard_map over 2 or more GPUs", False,
                           f"{len(gpus)} GPU(s) here")

    def check_shard_jit():
        """Sharded jit without shard_map on 2 GPUs: x rows-sharded with a
        NamedSharding, the weight and bias replicated; our backward is a
        custom_partitioning there (per-device kernels on the local rows,
        dW / dB psum'd)."""
        from jax.sharding import NamedSharding
        from norm_opt import jax_plan
        gpus = jax.devices()
        if len(gpus) < 2:
            checks.require("sharded jit over 2 GPUs", False,
                           f"{len(gpus)} GPU(s) here")
            return
        ndev = 2
        mesh = Mesh(np.array(gpus[:ndev]), ("data",))
        rep = NamedSharding(mesh, P())
        bf16, f32 = jnp.bfloat16, jnp.float32
        cases = [("layer", (4096, 1024), P("data", None), bf16),
                 ("layer", (8, 1024, 1024), P("data", None), bf16),
                 ("layer", (8, 1024, 1024), P("data", None, None), bf16),
                 ("rms", (8, 1024, 1024), P("data", None, None), bf16),
                 ("rms", (8, 1024, 1024), P(None, "data", None), bf16),
                 ("layer", (4096, 1024), P("data", None), f32)]
        if args.quick:
            cases = cases[1:4]
        if args.tiny:
            cases = [("layer", (4, 16, 1024), P("data", None, None), bf16),
                     ("rms", (64, 1024), P("data", None), f32)]

        def report(label, what, ok, detail=""):
            print(f"{'PASS' if ok else 'FAIL'} {label}: {what}"
                  + (f" ({detail})" if detail else ""), flush=True)

        def step(kind):
            """jit(grad) of a loss with dy = g; a fresh function each call
            (norm_opt.jax reads NORM_OPT_JAX_PARTITION when it traces)."""
            if kind == "layer":
                def loss(x, w, b, g):
                    return jnp.sum(nj.layer_norm(x, w, b).astype(f32)
                                   * g.astype(f32))
                return jax.grad(loss, argnums=(0, 1, 2))

            def loss(x, w, g):
                return jnp.sum(nj.rms_norm(x, w, 1e-6).astype(f32)
                               * g.astype(f32))
            return jax.grad(loss, argnums=(0, 1))

        def hlo_check(text, kind, shape):
            """(ok, why) of a compiled per-device module: our call's x-shaped
            operands and results on the local rows (rows / 2), and no
            all-gather of an x-sized array (the unpartitioned call gathers
            x and dy)."""
            target = jax_plan.TARGETS[kind]
            n, size = shape[-1], math.prod(shape)
            local = math.prod(shape[:-1]) // ndev
            rows, gathers = [], 0
            for line in text.splitlines():
                shapes = [tuple(int(d) for d in dims.split(",") if d)
                          for dims in re.findall(
                              r"\b(?:bf16|f16|f32|f64|u8|s8|s32|pred)"
                              r"\[([0-9,]*)\]", line)]
                if f'custom_call_target="{target}"' in line:
                    rows += [math.prod(t[:-1]) for t in shapes
                             if len(t) == len(shape) and t[-1] == n]
                if (re.search(r"\ball-gather(?:-start)?\(", line)
                        and any(math.prod(t) == size for t in shapes)):
                    gathers += 1
            why = (f"{target}: {len(rows)} x-shaped buffers with rows "
                   f"{sorted(set(rows))} (local {local}), {gathers} "
                   f"all-gather(s) of {size} elements")
            return bool(rows) and set(rows) == {local} and not gathers, why

        def run_case(kind, shape, spec, dtype):
            """(inputs, sharded arguments, jitted step, gradients)."""
            x, dy, w, b = inputs(shape, dtype, dtype)
            xs = NamedSharding(mesh, spec)
            if kind == "layer":
                a = (jax.device_put(x, xs), jax.device_put(w, rep),
                     jax.device_put(b, rep), jax.device_put(dy, xs))
                shardings = (xs, rep, rep, xs)
            else:
                a = (jax.device_put(x, xs), jax.device_put(w, rep),
                     jax.device_put(dy, xs))
                shardings = (xs, rep, xs)
            jitted = jax.jit(step(kind), in_shardings=shardings)
            local = (shape[0] // ndev,) + shape[1:]
            bufs = [jax.device_put(np.full(s, np.nan, np.dtype(dtype)), d)
                    for d in gpus[:ndev] for s in (local, shape[-1:],
                                                   shape[-1:])]
            for buf in bufs:  # poisoned outputs, as the other modes
                buf.block_until_ready()
                buf.delete()
            return (x, dy, w, b), a, jitted, jitted(*a)

        def results_check(label, kind, shape, dtype, xs, a, got, text):
            """A sharded step's results: gradients against float64, the
            per-device module (`text`), dx sharded as x."""
            x, dy, w, b = xs
            ref, scale = reference(kind, x, dy, w, b)
            before = len(checks.failures)
            errs = compare(label, kind, got, ref, scale, dtype, dtype, worst)
            report(label, "gradients against float64",
                   len(checks.failures) == before,
                   ", ".join(f"{e:.2e}" for e in errs)
                   + f"; tolerance {tol(np.dtype(dtype).name):g}")
            ok, why = hlo_check(text, kind, shape)
            checks.require(f"{label} per-device call, no gather of x", ok,
                           why)
            report(label, "per-device call on the local rows, no gather "
                   "of x", ok, why)
            ok = got[0].sharding.is_equivalent_to(a[0].sharding, len(shape))
            checks.require(f"{label} dx sharded as x", ok,
                           f"dx {got[0].sharding}, x {a[0].sharding}")
            report(label, "dx sharded as x", ok,
                   f"{getattr(got[0].sharding, 'spec', got[0].sharding)}")

        def explicit_case(kind, shape, spec, dtype):
            """One case on a mesh of Explicit axes (jax.make_mesh's
            default under jax.set_mesh: shardings are part of the types)."""
            from jax.sharding import AxisType
            label = f"shard-jit explicit axes {kind} {shape} {spec}"
            try:
                emesh = jax.make_mesh((2,), ("data",),
                                      axis_types=(AxisType.Explicit,),
                                      devices=gpus[:ndev])
                x, dy, w, b = inputs(shape, dtype, dtype)
                xs = NamedSharding(emesh, spec)
                erep = NamedSharding(emesh, P())
                pairs = ((x, xs), (w, erep), (b, erep), (dy, xs))
                if kind != "layer":
                    pairs = (pairs[0], pairs[1], pairs[3])
                use_mesh = (getattr(jax, "set_mesh", None)
                            or jax.sharding.use_mesh)
                with use_mesh(emesh):
                    a = [jax.device_put(v, s_) for v, s_ in pairs]
                    jitted = jax.jit(step(kind))
                    got = jitted(*a)
                    text = jitted.lower(*a).compile().as_text()
            except Exception as e:  # noqa: BLE001 - reported as a failure
                checks.require(label, False,
                               f"{type(e).__name__}: {str(e)[:600]}")
                report(label, "the step ran", False,
                       f"{type(e).__name__}: {str(e)[:300]}")
                return
            results_check(label, kind, shape, dtype, (x, dy, w, b), a, got,
                          text)

        for kind, shape, spec, dtype in cases:
            label = (f"shard-jit {kind} {np.dtype(dtype).name} {shape} "
                     f"{spec}")
            try:
                (x, dy, w, b), a, jitted, got = run_case(kind, shape, spec,
                                                         dtype)
            except Exception as e:  # noqa: BLE001 - reported as a failure
                checks.require(label, False,
                               f"{type(e).__name__}: {str(e)[:600]}")
                report(label, "the step ran", False, type(e).__name__)
                continue
            results_check(label, kind, shape, dtype, (x, dy, w, b), a, got,
                          jitted.lower(*a).compile().as_text())
            # bitwise determinism over 5 runs
            runs = [got] + [jitted(*a) for _ in range(4)]
            same = all(bitwise_equal(runs[0], r) for r in runs[1:])
            checks.require(f"{label} bitwise determinism over 5 runs", same,
                           "runs differ")
            report(label, "bitwise equal over 5 runs", same)

        # Explicit mesh axes (jax.make_mesh's default under jax.set_mesh:
        # shardings are part of the types); the same checks.
        for case in [cases[0]] + [c for c in cases if c[0] == "rms"][-1:]:
            explicit_case(*case)

        # Self-check: with the switch off, the call is unpartitioned (XLA
        # gathers its operands): the HLO check must fail there, and the
        # gradients are still right.
        kind, shape, spec, dtype = cases[0]
        label = f"shard-jit {kind} {shape} {spec} NORM_OPT_JAX_PARTITION=0"
        saved = os.environ.get(jax_plan.PARTITION_ENV)
        os.environ[jax_plan.PARTITION_ENV] = "0"
        try:
            (x, dy, w, b), a, jitted, got = run_case(kind, shape, spec, dtype)
            ok, why = hlo_check(jitted.lower(*a).compile().as_text(), kind,
                                shape)
        except Exception as e:  # noqa: BLE001 - reported as a failure
            checks.require(label, False, f"{type(e).__name__}: {str(e)[:600]}")
            report(label, "the step ran", False, type(e).__name__)
            got = None
        finally:
            if saved is None:
                os.environ.pop(jax_plan.PARTITION_ENV, None)
            else:
                os.environ[jax_plan.PARTITION_ENV] = saved
        if got is not None:
            checks.require(f"self-check: {label}: the HLO check catches the "
                           "gathered call", not ok, f"it passed: {why}")
            report(label, "self-check, the HLO check catches the gathered "
                   "call", not ok, why)
            ref, scale = reference(kind, x, dy, w, b)
            before = len(checks.failures)
            errs = compare(label, kind, got, ref, scale, dtype, dtype, worst)
            report(label, "gradients against float64",
                   len(checks.failures) == before,
                   ", ".join(f"{e:.2e}" for e in errs))

        # vmap under the sharded jit: custom_partitioning has no batching
        # rule, so the call stays the plain one (a launch per example).
        B, n = 2 * ndev, 512
        xs = jnp.asarray(rng.standard_normal((B, 64, n)), f32)
        dys = jnp.asarray(rng.standard_normal((B, 64, n)), f32)
        w = jnp.asarray(1 + 0.3 * rng.standard_normal(n), f32)
        b = jnp.asarray(0.2 * rng.standard_normal(n), f32)
        bs = NamedSharding(mesh, P("data"))
        f = lambda x, dy, w, b: jnp.vdot(nj.layer_norm(x, w, b), dy)
        label = f"shard-jit vmap(grad) layer f32 {xs.shape} P('data')"
        try:
            g = jax.jit(jax.vmap(jax.grad(f, argnums=(0, 2, 3)),
                                 in_axes=(0, 0, None, None)),
                        in_shardings=(bs, bs, rep, rep))(
                jax.device_put(xs, bs), jax.device_put(dys, bs),
                jax.device_put(w, rep), jax.device_put(b, rep))
        except Exception as e:  # noqa: BLE001 - reported as a failure
            checks.require(label, False, f"{type(e).__name__}: {str(e)[:600]}")
            report(label, "the step ran", False, type(e).__name__)
            return
        before = len(checks.failures)
        for i in range(B):
            ref, scale = reference("layer", xs[i], dys[i], w, b)
            compare(f"{label} example {i}", "layer", [r[i] for r in g], ref,
                    scale, f32, f32, worst)
        report(label, "per-example gradients against float64",
               len(checks.failures) == before)

    # check_grads: the custom_vjp against numerical differences (f32).
    from jax.test_util import check_grads
    if args.shard_only:
        check_sharded()
        worst.print()
        return checks.finish()
    if args.shard_jit:
        check_shard_jit()
        check_sharded()
        worst.print()
        return checks.finish()
    x, dy, w, b = inputs((16, 64), jnp.float32, jnp.float32)
    for kind in ("layer", "rms"):
        try:
            if kind == "layer":
                check_grads(lambda x, w, b: nj.layer_norm(x, w, b), (x, w, b),
                            order=1, modes=["rev"], atol=5e-2, rtol=5e-2,
                            eps=1e-2)
            else:
                check_grads(lambda x, w: nj.rms_norm(x, w), (x, w), order=1,
                            modes=["rev"], atol=5e-2, rtol=5e-2, eps=1e-2)
            checks.require(f"check_grads {kind}", True)
        except AssertionError as e:
            checks.require(f"check_grads {kind}", False, str(e)[:300])

    # Donation: a step that donates x (and w) gets the same gradients;
    # XLA may reuse the donated buffers for the step's results, never for
    # an operand our call still reads.
    x, dy, w, b = inputs((256, 1024), jnp.bfloat16, jnp.bfloat16)
    f = lambda x, w, b: jnp.vdot(nj.layer_norm(x, w, b).astype(jnp.float32),
                                 dy.astype(jnp.float32))
    plain = jax.jit(jax.grad(f, argnums=(0, 1, 2)))(x, w, b)
    donated = jax.jit(jax.grad(f, argnums=(0, 1, 2)),
                      donate_argnums=(0, 1))(jnp.copy(x), jnp.copy(w), b)
    checks.require("donated inputs: bitwise equal gradients",
                   bitwise_equal(plain, donated), "they differ")

    # vmap of grad: per-example gradients of a shared weight.
    B, shape = 3, (64, 512)
    xs = jnp.asarray(rng.standard_normal((B,) + shape), jnp.float32)
    dys = jnp.asarray(rng.standard_normal((B,) + shape), jnp.float32)
    w = jnp.asarray(1 + 0.3 * rng.standard_normal(512), jnp.float32)
    b = jnp.asarray(0.2 * rng.standard_normal(512), jnp.float32)
    for kind in ("layer", "rms"):
        if kind == "layer":
            f = lambda x, dy, w, b: jnp.vdot(nj.layer_norm(x, w, b), dy)
            g = jax.jit(jax.vmap(jax.grad(f, argnums=(0, 2, 3)),
                                 in_axes=(0, 0, None, None)))(xs, dys, w, b)
        else:
            f = lambda x, dy, w: jnp.vdot(nj.rms_norm(x, w), dy)
            g = jax.jit(jax.vmap(jax.grad(f, argnums=(0, 2)),
                                 in_axes=(0, 0, None)))(xs, dys, w)
        for i in range(B):
            ref, scale = reference(kind, xs[i], dys[i], w, b)
            compare(f"vmap {kind} example {i}", kind, [r[i] for r in g], ref,
                    scale, jnp.float32, jnp.float32, worst)

    check_sharded()

    # Flax: the drop-in modules have Flax's parameters and forward, and
    # their gradients go through our call.
    try:
        import flax  # noqa: F401
        have_flax = True
    except ImportError:
        have_flax = False
        print("no flax: its modules are not checked")
    if have_flax:
        from flax import linen, nnx
        import norm_opt.flax as nflax
        x = jnp.asarray(rng.standard_normal((4, 64, 512)), jnp.bfloat16)
        dy = jnp.asarray(rng.standard_normal((4, 64, 512)), jnp.float32)
        for name in ("LayerNorm", "RMSNorm"):
            ref_mod = getattr(linen, name)()
            our_mod = getattr(nflax.linen, name)()
            params = ref_mod.init(jax.random.PRNGKey(0), x)
            ours_params = our_mod.init(jax.random.PRNGKey(0), x)
            checks.require(f"flax linen {name}: same parameters",
                           jax.tree.structure(params)
                           == jax.tree.structure(ours_params))
            params = jax.tree.map(lambda p: p + 0.1 * jnp.asarray(
                rng.standard_normal(p.shape), p.dtype), params)

            def loss(mod):
                return lambda p, x: jnp.vdot(mod.apply(p, x).astype(
                    jnp.float32), dy)
            g_ref = jax.jit(jax.grad(loss(ref_mod), argnums=(0, 1)))(params, x)
            g_our = jax.jit(jax.grad(loss(our_mod), argnums=(0, 1)))(params, x)
            y_ref, y_our = ref_mod.apply(params, x), our_mod.apply(params, x)
            checks.require(f"flax linen {name}: same result dtype",
                           y_ref.dtype == y_our.dtype,
                           f"{y_our.dtype} vs {y_ref.dtype}")
            checks.within(f"flax linen {name}: forward",
                          rel_l2(t64(y_our), t64(y_ref)), 1e-2)
            for label, a, b in zip(("dparams", "dx"), jax.tree.leaves(g_our[0])
                                   + [g_our[1]], jax.tree.leaves(g_ref[0])
                                   + [g_ref[1]]):
                checks.within(f"flax linen {name}: {label} against Flax's",
                              rel_l2(t64(a), t64(b)), 2e-2)
            jaxpr = str(jax.make_jaxpr(jax.grad(loss(our_mod)))(params, x))
            checks.require(f"flax linen {name}: our backward ran",
                           "norm_opt_" in jaxpr, "no norm_opt call in jaxpr")
            ref_n = getattr(nnx, name)(512, rngs=nnx.Rngs(0))
            our_n = getattr(nflax.nnx, name)(512, rngs=nnx.Rngs(0))
            gn = nnx.grad(lambda m, x: jnp.vdot(m(x).astype(jnp.float32), dy),
                          argnums=(0, 1))
            (gm_ref, gx_ref), (gm_our, gx_our) = gn(ref_n, x), gn(our_n, x)
            checks.within(f"flax nnx {name}: dx against Flax's",
                          rel_l2(t64(gx_our), t64(gx_ref)), 2e-2)
            for a, b in zip(jax.tree.leaves(nnx.state(gm_our)),
                            jax.tree.leaves(nnx.state(gm_ref))):
                checks.within(f"flax nnx {name}: dparam against Flax's",
                              rel_l2(t64(a), t64(b)), 2e-2)
            jaxpr = str(jax.make_jaxpr(lambda x: jax.grad(
                lambda x: jnp.vdot(our_n(x).astype(jnp.float32), dy))(x))(x))
            checks.require(f"flax nnx {name}: our backward ran",
                           "norm_opt_" in jaxpr, "no norm_opt call in jaxpr")

    if args.cmdbuf:
        os.makedirs(args.cmdbuf, exist_ok=True)
        saved = {}
        for mode in ("off", "on"):
            dump = os.path.join(args.cmdbuf, f"dump-{mode}")
            out = os.path.join(args.cmdbuf, f"step-{mode}.npz")
            done = subprocess.run([sys.executable, __file__, "--child-step",
                                   out], env=_env_for(mode == "on", dump),
                                  capture_output=True, text=True)
            ok = checks.require(f"command buffers {mode}: the step ran",
                                done.returncode == 0, done.stderr[-2000:])
            if ok:
                saved[mode] = np.load(out)
        if len(saved) == 2:
            same = all(np.array_equal(saved["on"][k], saved["off"][k])
                       for k in saved["off"].files)
            checks.require("command buffers: bitwise equal to the plain run",
                           same, "the captured step differs")
            # XLA turns thunks into command buffers after its thunk passes:
            # with them on, our calls (kCustomCall thunks) must be nested
            # inside a kCommandBuffer thunk of the step.
            inside, outside = 0, 0
            for path in glob.glob(os.path.join(
                    args.cmdbuf, "dump-on",
                    "*jit_loss*thunk_sequence_after_thunk_passes.txt")):
                buffer_indent = None
                for line in open(path).read().splitlines():
                    indent = len(line) - len(line.lstrip())
                    if buffer_indent is not None and indent <= buffer_indent:
                        buffer_indent = None
                    if "kCommandBuffer" in line:
                        buffer_indent = indent
                    elif "kCustomCall" in line:
                        if buffer_indent is None:
                            outside += 1
                        else:
                            inside += 1
            print(f"command buffers: {inside} of our calls inside, "
                  f"{outside} outside")
            checks.require("command buffers: our calls are inside them",
                           inside >= 2 and outside == 0,
                           f"{inside} inside, {outside} outside")

    worst.print()
    xla_worst.print()
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
