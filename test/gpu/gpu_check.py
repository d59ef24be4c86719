#!/usr/bin/env python3
"""Checks the compiled kernels on a GPU against a float64 torch reference.

Runs on the GPU machine over the kernel set norm_opt.kernel_set built
(kernel_set.ManifestLibrary; the launchers called with torch tensors' data
pointers by norm_opt.testing, which also makes the inputs).
For every case: fresh random inputs (never zeros), outputs poisoned with
NaN first, dx/dw/db compared with the float64 reference
(norm_opt.reference) by relative L2 error, and every element checked
written. Also: dw/db bitwise identical over 20 runs; strided rows and an
unaligned base pointer (the scalar kernel); rows around the programs of
the two-rows-per-CTA plans (N = 2999, 3000, 4096) and of the looped
kernels' bulk ring (N = 12288, 16384); rows = 0; a problem of more
than 2^31 elements; the dynamic-N function at odd and aligned N; the
riders inputs (with --riders); and a small training step whose backward
is ours (norm_opt.torch.layer_norm).

  # build machine (or the GPU machine, with the wheel's norm-opt):
  PYTHONPATH=python python3 -m norm_opt.kernel_set --out .carry/gpu \
      --riders test/gpu/Inputs [--norm-opt build/bin/norm-opt]
  # GPU machine:
  PYTHONPATH=python:test/lib-python python3 test/gpu/gpu_check.py \
      --dir .carry/gpu [--quick] [--out DIR]
      [--libs libriders_bf16.so,...] [--shapes MxN,...]

Prints one line per case and a table last, then the worst error per
dtype (the WORST line: what test/gpu/harness.py's tolerances are measured
by); exits non-zero on any failure and on a run that checked nothing (a
misspelt --libs). --inject nan|empty: self-checks that must fail
(test/gpu/suite.py runs them).
"""

import argparse
import json
import os
import sys
import time

import torch

from harness import Worst, add_inject_option, poison, tol
from norm_opt import kernel_set
from norm_opt import reference as float64
from norm_opt.checks import Checks
from norm_opt.reference import rel_l2, worst
from norm_opt.testing import (DT, call, call_framework_workspace, errors,
                              float64_backward, make_inputs,
                              poisoned_outputs)

# Every check of the run (NaN-safe comparisons; an empty run fails), the
# worst error per dtype, and --inject (set by main).
CHECKS = Checks("gpu_check")
WORST = Worst("gpu_check")
INJECT = None

# (kind, N) -> rows for the shape sweep: ../shared/BENCHMARKS.md's shapes
# plus the extra ones.
BENCH_SHAPES = [(4096, 1024), (8192, 2048), (8192, 4096), (16384, 4096),
                (4096, 8192), (8192, 8192), (2048, 16384), (4096, 12288),
                (32768, 1024), (65536, 768), (16384, 5120), (1024, 32768),
                (576000, 384), (29, 17389)]
EXTRA_SHAPES = [(1, 8192), (7, 4099), (3, 131072), (100000, 17),
                (4096, 262144)]
# Rows of 128 lanes run two per CTA (N = 2999, 3000, 4096 here): row
# counts at and around the multiples of the programs (132 per wave of one
# CTA per SM, 264 rows), and fewer rows than programs.
PAIRED_ROW_SHAPES = [(m, n) for n in (2999, 3000, 4096)
                     for m in (1, 2, 3, 131, 132, 133, 263, 264, 265, 1001)]
# Rows of 64 lanes run four per CTA with the cp.async ring (N = 1152,
# 2048 at 16 bits; 528 rows a wave of one CTA per SM): past the latency
# kernel's 32 rows, at and around the wave, and many.
SHARED_ROW_SHAPES = [(m, n) for n in (1152, 2048)
                     for m in (33, 131, 527, 528, 529, 1057, 65536)]
# The looped kernels' bulk ring (N = 12288, 16384: S = 2 or 3 stages, 132
# or 66 row programs with column groups): one to many row iterations, so
# every stage is reused and each mbarrier's phase parity flips; row
# counts of the split kernels (rows x 4 <= SMs) and just past them.
BULK_ROW_SHAPES = [(m, n) for n in (12288, 16384)
                   for m in (1, 33, 34, 65, 66, 67, 131, 132, 133, 197, 263,
                             264, 265, 1001)]
FRAMEWORK_WORKSPACE_SHAPES = [(4096, 1024), (512, 1024), (1000, 16384),
                              (29, 17389), (5000, 2999), (8, 4096)]
HUGE = (2097169, 1024)  # > 2^31 elements
# The dynamic-N function (`<kind>_<config>_dyn`) at odd and aligned N, and
# at the ends of resident tiers (256 and 2048: the N itself, one less, one
# more; 8192, the last tier of 16-bit LayerNorm, then the looped kernels).
DYN_SHAPES = [(5000, 2999), (5000, 3000), (7, 4099), (64, 17), (29, 17389),
              (300, 256), (300, 255), (300, 257), (100, 2048), (100, 2047),
              (100, 2049), (40, 8192), (40, 8193), (9, 1)]


def takes_latency_kernel(sig, m, n):
    """Whether the call of m rows takes the latency kernel, which needs no
    workspace: a static N, and at most latency-max-rows (32) rows and
    kLatencyChunkRows (2048) / the chunks of a CTA's part (16 CTAs, 16-byte
    chunks where N allows; KernelPlanner::withLatencyKernels)."""
    if sig.get("dynamic"):
        return False
    v = 16 // DT[sig["x"]].itemsize
    chunks = n // v if n % v == 0 else n
    ctas = 16
    while ctas > chunks:
        ctas //= 2
    part = -(-chunks // ctas)
    return ctas >= 2 and 1 <= m <= min(32, 2048 // part)


def scaled_errors(sig, t, m, n, outs):
    """||out - ref|| / max(||ref||, ||terms||) per result, the terms being
    the magnitudes each element is computed from (norm_opt.reference)."""
    ref, mags = float64_backward(sig["kind"], t, m, n, scales=True)
    return {k: rel_l2(outs[k], ref[k], mags[k]) for k in sig["results"]}


def check_framework_workspace(lib, fn, sig, m, n, gen, dev, results):
    """The call as a framework makes it (norm_opt.torch, bench.py): the
    workspace sized by the launcher's query, from torch's allocator. Every
    result bitwise equal to the runtime-owned workspace's (also captured in
    a CUDA graph and replayed), and a buffer 16 bytes short refused with
    the runtime's message, not used."""
    xdt, wdt = DT[sig["x"]], DT[sig["w"]]
    t = make_inputs(sig["kind"], xdt, wdt, m, n, gen, dev)
    outs = poisoned_outputs(sig, m, n, xdt, wdt, dev)
    call(lib, fn, sig, t, outs, m, n)
    mine = poisoned_outputs(sig, m, n, xdt, wdt, dev)
    nbytes = lib.workspace_bytes(fn, sig, t, mine, m, n)
    call_framework_workspace(lib, fn, sig, t, mine, m, n, nbytes)
    graph_outs = poisoned_outputs(sig, m, n, xdt, wdt, dev)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        call_framework_workspace(lib, fn, sig, t, graph_outs, m, n, nbytes)
    for r in graph_outs.values():
        r.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    same = all(torch.equal(outs[r].view(torch.uint8), mine[r].view(torch.uint8))
               and torch.equal(outs[r].view(torch.uint8),
                               graph_outs[r].view(torch.uint8))
               for r in outs)
    refused = nbytes == 0
    if nbytes >= 32:
        stream = torch.cuda.current_stream().cuda_stream
        ws = torch.empty(nbytes, dtype=torch.uint8, device=dev)
        lib.set_workspace(stream, ws.data_ptr(), nbytes - 16)
        try:
            call(lib, fn, sig, t, mine, m, n, stream=stream)
        except RuntimeError as e:
            refused = f"needs {nbytes} bytes" in str(e)
        finally:
            lib.set_workspace(stream, None, 0)
    needs = len(sig["results"]) > 1 and not takes_latency_kernel(sig, m, n)
    ok = CHECKS.require(
        f"{sig['name']} {m}x{n} framework workspace",
        same and refused and (nbytes > 0) == needs,
        f"bitwise equal={same}, short buffer refused={refused}, "
        f"{nbytes} bytes")
    print(f"{'PASS' if ok else 'FAIL'} {sig['name']:<26} {m:>7}x{n:<6} "
          f"framework workspace {nbytes} bytes: bitwise equal={same} "
          f"(graph replay too), short buffer refused={refused}", flush=True)
    results.append(dict(name=sig["name"], m=m, n=n, ok=ok, det=same, errs={},
                        note=f"framework workspace, {nbytes} bytes"))


def check_case(lib, fn, sig, m, n, gen, dev, results, note=""):
    xdt, wdt = DT[sig["x"]], DT[sig["w"]]
    t = make_inputs(sig["kind"], xdt, wdt, m, n, gen, dev)
    outs = poisoned_outputs(sig, m, n, xdt, wdt, dev)
    call(lib, fn, sig, t, outs, m, n)
    torch.cuda.synchronize()
    if INJECT == "nan":  # self-check: the comparison below must fail
        poison(outs["dx"])
    ref = float64_backward(sig["kind"], t, m, n)
    errs = errors(outs, ref, n)
    if not all(e <= tol(outs[k].dtype) for k, e in errs.items()):
        # An ill-conditioned reference (RMSNorm at N = 1: dx is the
        # difference of two nearly equal terms, 1 - x^2 / (x^2 + eps)): the
        # error against the magnitude of the terms each element is computed
        # from (norm_opt.reference's scales, the CPU numerics' and the
        # random check's measure; never larger than the plain one).
        scaled = scaled_errors(sig, t, m, n, outs)
        note += " (against the terms: " + " ".join(
            f"{k}={v:.2e}" for k, v in scaled.items()) + ")"
        errs = {k: scaled[k] for k in errs}  # inf where out is not finite
    ok = True
    for k, e in errs.items():
        WORST.add(outs[k].dtype, e)
        ok &= CHECKS.within(f"{sig['name']} {m}x{n} {k}", e,
                            tol(outs[k].dtype))
    # Determinism: dw/db bitwise over 20 runs.
    det = True
    if m * n <= (1 << 28):
        first = {r: outs[r].clone() for r in sig["results"][1:]}
        for _ in range(19):
            for r in sig["results"][1:]:
                outs[r].fill_(float("nan"))
            call(lib, fn, sig, t, outs, m, n)
            for r in sig["results"][1:]:
                det = det and torch.equal(outs[r].view(torch.uint8),
                                          first[r].view(torch.uint8))
        torch.cuda.synchronize()
        CHECKS.require(f"{sig['name']} {m}x{n} dw/db deterministic", det,
                       "not bitwise equal over 20 runs")
    ok = ok and det
    line = (f"{'PASS' if ok else 'FAIL'} {sig['name']:<22} {m:>8}x{n:<7}"
            + " ".join(f"{k}={v:.2e}" for k, v in errs.items())
            + f" deterministic={det} {note}")
    print(line, flush=True)
    results.append(dict(name=sig["name"], m=m, n=n, ok=ok, det=det,
                        errs=errs, note=note))
    return ok


def check_layouts(lib, fn, sig, m, n, gen, dev, results):
    """Row stride != N and a misaligned base pointer: the scalar kernel."""
    xdt, wdt = DT[sig["x"]], DT[sig["w"]]
    t = make_inputs(sig["kind"], xdt, wdt, m, n, gen, dev)
    pad = 3
    ok = True
    # Strided rows: inputs and dx live in wider buffers.
    wide = {}
    for k in ("x", "dy"):
        buf = torch.randn(m, n + pad, generator=gen, device=dev).to(xdt)
        buf[:, :n] = t[k]
        wide[k] = buf
    dxbuf = torch.full((m, n + pad), float("nan"), dtype=xdt, device=dev)
    ts = dict(t, x=wide["x"], dy=wide["dy"])
    outs = poisoned_outputs(sig, m, n, xdt, wdt, dev)
    outs["dx"] = dxbuf
    call(lib, fn, sig, ts, outs, m, n, strides=[n + pad] * 3)
    torch.cuda.synchronize()
    ref = float64_backward(sig["kind"], t, m, n)
    e1 = rel_l2(dxbuf[:, :n], ref["dx"])
    untouched = torch.isnan(dxbuf[:, n:].float()).all().item()
    e1w = rel_l2(outs["dw"], ref["dw"])
    label = f"{sig['name']} {m}x{n}"
    ok1 = all([CHECKS.within(f"{label} strided dx", WORST.add(xdt, e1),
                             tol(xdt)),
               CHECKS.within(f"{label} strided dw", WORST.add(wdt, e1w),
                             tol(wdt)),
               CHECKS.require(f"{label} strided pad", untouched,
                              "padding written")])
    # Misaligned base pointers (one element in).
    shifted = {}
    for k in ("x", "dy"):
        buf = torch.empty(m * n + 1, dtype=xdt, device=dev)
        buf[1:] = t[k].reshape(-1)
        shifted[k] = buf[1:].view(m, n)
    dxs = torch.full((m * n + 1,), float("nan"), dtype=xdt, device=dev)
    outs2 = poisoned_outputs(sig, m, n, xdt, wdt, dev)
    outs2["dx"] = dxs[1:].view(m, n)
    call(lib, fn, sig, dict(t, **shifted), outs2, m, n)
    torch.cuda.synchronize()
    e2 = rel_l2(outs2["dx"], ref["dx"])
    e2w = rel_l2(outs2["dw"], ref["dw"])
    ok2 = all([CHECKS.within(f"{label} misaligned dx", WORST.add(xdt, e2),
                             tol(xdt)),
               CHECKS.within(f"{label} misaligned dw", WORST.add(wdt, e2w),
                             tol(wdt)),
               CHECKS.require(f"{label} misaligned", bool(torch.isnan(
                   dxs[0].float()).item()), "element before dx written")])
    ok = ok1 and ok2
    print(f"{'PASS' if ok else 'FAIL'} {sig['name']:<22} {m:>8}x{n:<7}"
          f"strided dx={e1:.2e} dw={e1w:.2e} pad-untouched={untouched}; "
          f"misaligned dx={e2:.2e} dw={e2w:.2e}", flush=True)
    results.append(dict(name=sig["name"], m=m, n=n, ok=ok, det=True,
                        errs={"dx": worst((e1, e2))}, note="layouts"))
    return ok


def check_zero_rows(lib, fn, sig, n, dev, results):
    xdt, wdt = DT[sig["x"]], DT[sig["w"]]
    t = {k: torch.ones(1, device=dev) for k in sig["args"]}
    outs = poisoned_outputs(sig, 0, n, xdt, wdt, dev)
    call(lib, fn, sig, t, outs, 0, n)
    torch.cuda.synchronize()
    ok = CHECKS.require(f"{sig['name']} rows=0", all(
        bool((outs[r] == 0).all()) for r in sig["results"][1:]),
        "dw/db not zero")
    print(f"{'PASS' if ok else 'FAIL'} {sig['name']:<22} rows=0: dw/db = 0, "
          "dx untouched", flush=True)
    results.append(dict(name=sig["name"], m=0, n=n, ok=ok, det=True,
                        errs={}, note="rows=0"))
    return ok


def check_bad_input(lib, fn, sig, n, dev, results):
    """A wrong static N and a too-small stride give clean errors."""
    t = {k: torch.ones(1, device=dev) for k in sig["args"]}
    outs = {r: torch.ones(1, device=dev) for r in sig["results"]}
    ptrs = [t[a].data_ptr() for a in sig["args"]] + [
        outs[r].data_ptr() for r in sig["results"]]
    rc1 = fn(*ptrs, 4, n + 1, *([n + 1] * 3), None)
    msg1 = lib.error()
    rc2 = fn(*ptrs, 4, n, *([n - 1] * 3), None)
    msg2 = lib.error()
    ok = CHECKS.require(f"{sig['name']} bad input",
                        bool(rc1 != 0 and rc2 != 0 and msg1 and msg2),
                        f"bad cols -> {rc1}, bad stride -> {rc2}")
    print(f"{'PASS' if ok else 'FAIL'} {sig['name']:<22} bad cols -> {rc1} "
          f"'{msg1}'; bad stride -> {rc2} '{msg2}'", flush=True)
    results.append(dict(name=sig["name"], m=4, n=n, ok=ok, det=True, errs={},
                        note="bad input"))
    return ok


def check_training(n, dev, results):
    """A small model, one step: grads from our backward (norm_opt.torch's
    layer_norm: its autograd function, the kernel for N from
    norm_opt.kernels, compiled by norm-opt on first use) vs torch's."""
    import norm_opt
    import norm_opt.torch as nt
    torch.manual_seed(0)
    m = 512
    lin = torch.nn.Linear(n, n, device=dev, dtype=torch.float32)
    w = (1 + 0.1 * torch.randn(n, device=dev)).requires_grad_()
    b = (0.1 * torch.randn(n, device=dev)).requires_grad_()
    x0 = torch.randn(m, n, device=dev)

    def step(ours):
        for p in (lin.weight, lin.bias, w, b):
            p.grad = None
        h = lin(x0)
        norm = nt.layer_norm if ours else torch.nn.functional.layer_norm
        y = norm(h, (n,), w, b, 1e-5)
        loss = (y * y).mean()
        loss.backward()
        return [p.grad.clone() for p in (lin.weight, lin.bias, w, b)]

    try:
        ref = step(False)
        before = nt.launches
        ours = step(True)
        launched = nt.launches - before
    except norm_opt.NormOptError as e:  # no kernel: a failure, not a crash
        CHECKS.require("training step", False, str(e))
        print(f"FAIL training step: {e}", flush=True)
        results.append(dict(name="training", m=m, n=n, ok=False, det=True,
                            errs={}, note=str(e)))
        return False
    errs = [rel_l2(o, r) for o, r in zip(ours, ref)]
    # f32 gradients through a Linear against torch's: a model's tolerance,
    # not one kernel result's.
    ok = all([CHECKS.within(f"training step grad {i}", e, 1e-4)
              for i, e in enumerate(errs)]
             + [CHECKS.require("training step launches", launched >= 1,
                               "our kernel did not run")])
    print(f"{'PASS' if ok else 'FAIL'} training step (Linear -> our "
          f"LayerNorm backward, f32, {m}x{n}, {launched} launch(es) of "
          "ours): grad errors " + " ".join(f"{e:.1e}" for e in errs),
          flush=True)
    results.append(dict(name="training", m=m, n=n, ok=ok, det=True,
                        errs={"grads": worst(errs)}, note="training"))
    return ok


def check_riders(lib, results, gen, dev):
    """The linalg training-step backward
    (test/gpu/Inputs/training_riders.mlir): dynamic rows and N, loss scale,
    residual, dW accumulated, dB."""
    fn, sig = lib.funcs[0]
    ok_all = True
    for m, n in ((1000, 4096), (37, 1031), (5, 20000)):
        t = dict(x=torch.randn(m, n, generator=gen, device=dev) * 2 + 0.5,
                 dy=torch.randn(m, n, generator=gen, device=dev),
                 w=1 + 0.2 * torch.randn(n, generator=gen, device=dev),
                 scale=torch.full((), 0.37, device=dev),
                 dres=torch.randn(m, n, generator=gen, device=dev),
                 prev_dw=torch.randn(n, generator=gen, device=dev))
        t["rstd"] = torch.rsqrt((t["x"] * t["x"]).mean(-1) + 1e-5)
        outs = {"dx": torch.full((m, n), float("nan"), device=dev),
                "dw": torch.full((n,), float("nan"), device=dev),
                "db": torch.full((n,), float("nan"), device=dev)}
        call(lib, fn, sig, t, outs, m, n)
        torch.cuda.synchronize()
        ref = float64.backward("rms", t["x"], t["dy"], t["rstd"],
                               weight=t["w"], dy_scale=t["scale"],
                               residual=t["dres"], dw_in=t["prev_dw"])
        errs = {k: WORST.add(outs[k].dtype, rel_l2(outs[k], ref[k]))
                for k in ref}
        ok = all([CHECKS.within(f"riders {m}x{n} {k}", e, tol(outs[k].dtype))
                  for k, e in errs.items()])
        ok_all = ok_all and ok
        print(f"{'PASS' if ok else 'FAIL'} training_riders_dynamic "
              f"{m:>6}x{n:<6} " + " ".join(f"{k}={v:.2e}"
                                         for k, v in errs.items()),
              flush=True)
        results.append(dict(name="riders", m=m, n=n, ok=ok, det=True,
                            errs=errs, note="linalg riders"))
    return ok_all


def check_riders_bf16(lib, results, gen, dev):
    """Issue 11's crash (test/gpu/Inputs/rms_riders_bf16.mlir): the bf16
    RMSNorm backward with a constant loss scale 2^-14, a bf16 residual added
    into dx and dW accumulated into an f32 buffer; static 16384x5120. dW
    bitwise over 5 runs. Run it once more with NORMRT_NO_COOPERATIVE=1 and
    under compute-sanitizer for the two-launch path and the memory
    check."""
    fn, sig = lib.funcs[5120]
    m, n = 16384, 5120
    bf = torch.bfloat16
    t = dict(x=(torch.randn(m, n, generator=gen, device=dev) * 2 + 0.5).to(bf),
             dy=(torch.randn(m, n, generator=gen, device=dev) * 1e3).to(bf),
             w=(1 + 0.2 * torch.randn(n, generator=gen, device=dev)).to(bf),
             dres=torch.randn(m, n, generator=gen, device=dev).to(bf),
             dw_in=torch.randn(n, generator=gen, device=dev))
    x64 = t["x"].double()
    t["rstd"] = torch.rsqrt((x64 * x64).mean(-1) + 1e-5).float()
    outs = {"dx": torch.full((m, n), float("nan"), dtype=bf, device=dev),
            "dw": torch.full((n,), float("nan"), device=dev)}
    call(lib, fn, sig, t, outs, m, n)
    torch.cuda.synchronize()
    ref = float64.backward("rms", t["x"], t["dy"], t["rstd"], weight=t["w"],
                           dy_scale=2.0 ** -14, residual=t["dres"],
                           dw_in=t["dw_in"], results=("dx", "dw"))
    errs = {k: WORST.add(outs[k].dtype, rel_l2(outs[k], ref[k]))
            for k in ref}
    ok = all([CHECKS.within(f"riders_bf16 {k}", e, tol(outs[k].dtype))
              for k, e in errs.items()])
    first = outs["dw"].clone()
    det = True
    for _ in range(4):
        outs["dw"].fill_(float("nan"))
        call(lib, fn, sig, t, outs, m, n)
        det = det and torch.equal(outs["dw"].view(torch.uint8),
                                  first.view(torch.uint8))
    torch.cuda.synchronize()
    ok = CHECKS.require("riders_bf16 dw deterministic", det,
                        "not bitwise equal over 5 runs") and ok
    print(f"{'PASS' if ok else 'FAIL'} rms_riders_bf16 {m}x{n} "
          + " ".join(f"{k}={v:.2e}" for k, v in errs.items())
          + f" deterministic={det}", flush=True)
    results.append(dict(name="riders_bf16", m=m, n=n, ok=ok, det=det,
                        errs=errs, note="issue 11 riders, bf16"))
    return ok


def check_shapes(args):
    """Only the cases `args.shapes` names, in each library that has their N."""
    dev = torch.device("cuda")
    manifest = kernel_set.manifest(args.dir)
    gen = torch.Generator(device=dev)
    gen.manual_seed(1234)
    # MxN: the static-N function; MxN:dyn the dynamic-N one.
    shapes = []
    for item in args.shapes.split(","):
        dims, _, fn_kind = item.partition(":")
        m, n = (int(v) for v in dims.split("x"))
        shapes.append((m, n, "dyn" if fn_kind == "dyn" else n))
    results = []
    for entry in selected(manifest, args):
        if entry["library"].startswith("libriders"):
            continue
        lib = kernel_set.ManifestLibrary(
            os.path.join(args.dir, entry["library"]), entry)
        for m, n, key in shapes:
            if key in lib.funcs:
                fn, sig = lib.funcs[key]
                check_case(lib, fn, sig, m, n, gen, dev, results,
                           note="N dynamic" if key == "dyn" else "")
    failed = [r for r in results if not r["ok"]]
    print(f"{len(results) - len(failed)} of {len(results)} checks passed")
    WORST.print()
    return 1 if CHECKS.finish() or failed else 0


def selected(manifest, args):
    """The manifest's libraries --libs names (all without it; none with
    --inject empty). A name not in the manifest is a failed check."""
    entries = manifest["libraries"]
    if args.libs:
        names = args.libs.split(",")
        known = {e["library"] for e in entries}
        for name in names:  # a known name is no check (an empty run fails)
            if name not in known:
                CHECKS.require(f"--libs {name}", False,
                               "no such library in the manifest")
        entries = [e for e in entries if e["library"] in names]
    return [] if args.inject == "empty" else entries


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=".carry/gpu")
    ap.add_argument("--quick", action="store_true",
                    help="a few shapes per library")
    ap.add_argument("--no-huge", action="store_true")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--libs", default=None,
                    help="comma-separated libraries of the manifest to "
                         "check (default: all)")
    ap.add_argument("--shapes", default=None,
                    help="MxN[:dyn],...: only these cases of each library "
                         "(:dyn: its dynamic-N function; for "
                         "compute-sanitizer runs)")
    add_inject_option(ap)
    args = ap.parse_args()
    global INJECT
    INJECT = args.inject
    if args.shapes:
        return check_shapes(args)
    dev = torch.device("cuda")
    manifest = kernel_set.manifest(args.dir)
    gen = torch.Generator(device=dev)
    gen.manual_seed(1234)
    results, t0 = [], time.time()
    libs = {}
    for entry in selected(manifest, args):
        lib = kernel_set.ManifestLibrary(
            os.path.join(args.dir, entry["library"]), entry)
        libs[entry["library"]] = lib
        if entry["library"] == "libriders.so":
            check_riders(lib, results, gen, dev)
            continue
        if entry["library"] == "libriders_bf16.so":
            try:
                check_riders_bf16(lib, results, gen, dev)
            except RuntimeError as e:
                CHECKS.require("riders_bf16", False, str(e))
                print(f"FAIL rms_riders_bf16: {e}", flush=True)
                results.append(dict(name="riders_bf16", m=16384, n=5120,
                                    ok=False, det=False, errs={},
                                    note=str(e)))
            continue
        shapes = (BENCH_SHAPES + EXTRA_SHAPES + PAIRED_ROW_SHAPES +
                  SHARED_ROW_SHAPES + BULK_ROW_SHAPES)
        if args.quick:
            shapes = [(4096, 1024), (29, 17389), (7, 4099), (100000, 17),
                      (3, 4096), (133, 3000), (265, 2999)]
        for m, n in shapes:
            if n not in lib.funcs:
                continue
            fn, sig = lib.funcs[n]
            try:
                check_case(lib, fn, sig, m, n, gen, dev, results)
            except (RuntimeError, torch.OutOfMemoryError) as e:
                CHECKS.require(f"{sig['name']} {m}x{n}", False, str(e))
                print(f"FAIL {sig['name']} {m}x{n}: {e}", flush=True)
                results.append(dict(name=sig["name"], m=m, n=n, ok=False,
                                    det=False, errs={}, note=str(e)))
        if "dyn" in lib.funcs:
            fn, sig = lib.funcs["dyn"]
            for m, n in DYN_SHAPES[:2] if args.quick else DYN_SHAPES:
                try:
                    check_case(lib, fn, sig, m, n, gen, dev, results,
                               note="N dynamic")
                except RuntimeError as e:
                    CHECKS.require(f"{sig['name']} {m}x{n}", False, str(e))
                    print(f"FAIL {sig['name']} {m}x{n}: {e}", flush=True)
                    results.append(dict(name=sig["name"], m=m, n=n, ok=False,
                                        det=False, errs={}, note=str(e)))
        for n in (1024, 4099):
            if n in lib.funcs:
                fn, sig = lib.funcs[n]
                check_layouts(lib, fn, sig, 300, n, gen, dev, results)
        # The framework's workspace: a cooperative plan (1024), the
        # two-launch looped ones (16384: the bulk ring; 17389: clusters),
        # and a run-time N at a tier.
        for m, n in FRAMEWORK_WORKSPACE_SHAPES:
            key = "dyn" if (m, n) == (5000, 2999) else n
            if key in lib.funcs:
                fn, sig = lib.funcs[key]
                check_framework_workspace(lib, fn, sig, m, n, gen, dev,
                                          results)
        if 1024 in lib.funcs:
            fn, sig = lib.funcs[1024]
            check_zero_rows(lib, fn, sig, 1024, dev, results)
            check_bad_input(lib, fn, sig, 1024, dev, results)
        torch.cuda.empty_cache()

    if not args.no_huge:
        lib = libs.get("librms_bf16.so")
        if lib and HUGE[1] in lib.funcs:
            fn, sig = lib.funcs[HUGE[1]]
            check_case(lib, fn, sig, HUGE[0], HUGE[1], gen, dev, results,
                       note=f"{HUGE[0] * HUGE[1]} elements > 2^31")
            torch.cuda.empty_cache()
    # The training step where liblayer_f32.so (N = 1024) was checked: its
    # kernel then comes from norm_opt.kernels (norm_opt.torch's ops).
    lib = libs.get("liblayer_f32.so")
    if lib and 1024 in lib.funcs:
        check_training(1024, dev, results)

    failed = [r for r in results if not r["ok"]]
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "gpu_check.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(f"\n{len(results) - len(failed)} of {len(results)} checks passed "
          f"in {time.time() - t0:.0f} s on {torch.cuda.get_device_name()}")
    worst_err = {}
    for r in results:
        for k, v in r["errs"].items():
            key = (r["name"].split("_")[1] if "_" in r["name"] else r["name"],
                   k)
            worst_err[key] = worst((worst_err.get(key, 0), v))
    print("worst relative L2 error by (dtype config, result):")
    for (cfg, k), v in sorted(worst_err.items()):
        print(f"  {cfg:<8} {k:<6} {v:.2e}")
    for r in failed:
        print("FAILED:", r["name"], r["m"], r["n"], r["note"], r["errs"])
    WORST.print()
    return 1 if CHECKS.finish() or failed else 0


if __name__ == "__main__":
    sys.exit(main())
