#!/usr/bin/env python3
"""The torch.compile route's regions, by numbers, on the CPU: each region
the recognition pass fuses in a recorded graph (test/Import/graphs: real
models' post-grad backward graphs, norm_opt.fx_region selects them as the
route does, row-only groups included) runs through the CPU pipeline
(--norm-lower-to-cpu, its fused MLIR as the route compiles it) and is
compared with a float64 evaluation of the recorded nodes themselves
(norm_opt.fx_eval: the graph's own roundings, nothing else).

Seeded random inputs, never zero (per-row statistics positive), symbolic
sizes bound to --rows. Every output of every region must be within the
tolerance of its kind (relative L2; f32 results of regions that compute
in f32 only: 1e-5; a region with 16-bit values: 8e-3); NaN fails. A run
that compared nothing fails. --perturb scales one reference output by
1 + 2e-2: every region must then fail (the self-check).

  recorded_regions.py --opt norm-opt --runner mlir-runner
      [--shared-lib-dir DIR] [--rows 1] [--perturb] [--generated K]
      [--seed S] GRAPH.json...

--generated K adds K graphs of aten_graphs.py (the norm_diffgen styles
written as Inductor's ATen): each must become exactly one region.
Python 3.11 standard library only (PYTHONPATH=python:test/lib-python).
"""

import argparse
import itertools
import json
import os
import random
import re
import sys
import tempfile

sys.dont_write_bytecode = True
import aten_graphs  # noqa: E402
import norm_numerics as nn  # noqa: E402
from norm_opt import fx_eval, fx_import, fx_region  # noqa: E402
from norm_opt.checks import within  # noqa: E402

TOL_F32, TOL_16 = 1e-5, 8e-3


def draw(rng, shape, dtype, positive):
    values = []
    for _ in range(max(1, _count(shape))):
        v = rng.uniform(0.5, 2.0) if positive else rng.uniform(0.1, 1.0) * \
            rng.choice((-1.0, 1.0))
        values.append(v)
    return fx_eval.round_to(values, dtype)


def _count(shape):
    out = 1
    for d in shape:
        out *= d
    return out


def signature(text):
    m = re.search(r"func\.func @(\w+)\((.*?)\)\s*->\s*\(?(.*?)\)?\s*\{",
                  text, re.S)
    args = re.findall(r"%\w+: (tensor<[^>]*>)", m.group(2))
    results = re.findall(r"tensor<[^>]*>", m.group(3))
    return m.group(1), args, results


def permuted(t, perm):
    """fx_eval tensor t with its dims in the order `perm`."""
    if perm == list(range(len(perm))):
        return t
    shape = [t.shape[p] for p in perm]
    strides, acc = [0] * len(t.shape), 1
    for d in reversed(range(len(t.shape))):
        strides[d], acc = acc, acc * t.shape[d]
    data = []
    for idx in itertools.product(*(range(n) for n in shape)):
        data.append(t.data[sum(i * strides[p] for i, p in zip(idx, perm))])
    return fx_eval.T(shape, data)


def check_region(region, args, work, libs, index):
    sub = region.graph
    by_name = {n["name"]: n for n in sub["nodes"]}
    syms = {d for n in sub["nodes"] for d in n.get("shape", [])
            if isinstance(d, str)}
    sizes = {s: args.rows for s in syms}
    rng = random.Random(f"recorded-regions/{index}")
    inputs, call_args = {}, []
    fused = region.fused.strip()
    body = fused[fused.index("{") + 1:fused.rindex("}")]
    fname, ptypes, rtypes = signature(body)
    for name, ptype, perm in zip(region.inputs, ptypes, region.input_perms):
        node = by_name[name]
        shape = [sizes.get(d, d) for d in node["shape"]]
        dtype = fx_import.DTYPES[node["dtype"]]
        # Per-row statistics (a trailing unit dim) are positive.
        positive = len(shape) >= 2 and shape[-1] == 1
        values = draw(rng, shape, dtype, positive)
        inputs[name] = fx_eval.T(shape, values)
        # Passed in memory order (channels last), as the route passes it.
        stored = permuted(inputs[name], perm)
        call_args.append((ptype, stored.shape, dtype, stored.data))
    ref = fx_eval.evaluate(sub, inputs, sizes)
    ref = [permuted(r, perm) for r, perm in zip(ref, region.output_perms)]
    if args.perturb:
        ref[0] = fx_eval.T(ref[0].shape, [v * (1 + 2e-2) for v in ref[0].data])
    results = [(t, r.shape) for t, r in zip(rtypes, ref)]
    cm = nn.CallModule()
    cm.add_func(body)
    cm.add_call(fname, call_args, results)
    src = os.path.join(work, f"region{index}.mlir")
    with open(src, "w") as f:
        f.write(cm.text())
    bc = os.path.join(work, f"region{index}.mlirbc")
    nn.compile_module(args.opt, src, bc, nn.fused_pipeline(4))
    out = nn.run_module_to_file(args.runner, bc, libs,
                                os.path.join(work, f"region{index}.out"))
    sixteen = any(fx_import.DTYPES.get(n.get("dtype")) in ("bf16", "f16")
                  for n in sub["nodes"] if "dtype" in n)
    tol = TOL_16 if sixteen else TOL_F32
    errs, notes = [], []
    for i, r in enumerate(ref):
        if list(out.shape(i)) != list(r.shape):
            notes.append(f"output {i} has shape {out.shape(i)}, expected "
                         f"{r.shape}")
            continue
        err = nn.rel_l2(out.values(i), r.data, r.data)
        errs.append(err)
        if not within(err, tol):  # NaN and inf fail too
            notes.append(f"output {i} ({region.outputs[i]}) differs from "
                         f"float64 by {err:.2e} (tolerance {tol:.0e})")
    out.close()
    return errs, notes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("graphs", nargs="*")
    ap.add_argument("--generated", type=int, default=0,
                    help="also K generated graphs (aten_graphs.py): each "
                         "must become exactly one region")
    ap.add_argument("--seed", default="1")
    ap.add_argument("--opt", default="norm-opt")
    ap.add_argument("--runner", default="mlir-runner")
    ap.add_argument("--shared-lib-dir", default="")
    ap.add_argument("--rows", type=int, default=1)
    ap.add_argument("--perturb", action="store_true")
    args = ap.parse_args()
    libs = nn.runner_libs(args.runner, args.shared_lib_dir)
    fuse = fx_region.fuse_with(args.opt)
    checked = failed = 0
    with tempfile.TemporaryDirectory(prefix="norm-regions-") as work:
        todo = [(os.path.basename(p), p, None) for p in args.graphs]
        todo += [(f"generated {i}", None, i) for i in range(args.generated)]
        for name, path, index in todo:
            if path is not None:
                with open(path) as f:
                    graph = json.load(f)
            else:
                graph, style = aten_graphs.generate(index, args.seed)
                name += " " + ",".join(f"{k}={v}" for k, v in style.items())
            regions = fx_region.select(graph, fuse)
            if index is not None and len(regions) != 1:
                failed += 1
                checked += 1
                print(f"FAIL {name}: {len(regions)} regions, expected 1")
                continue
            for region in regions:
                errs, notes = check_region(region, args, work, libs, checked)
                checked += 1
                failed += bool(notes)
                worst = nn.worst_of(errs)  # max() may drop a NaN
                print(f"{'FAIL' if notes else 'PASS'} {name} "
                      f"{region.compute[0]}.. ({len(region.compute)} ops, "
                      f"{len(region.outputs)} outputs) worst {worst:.1e}"
                      + (f"  [{'; '.join(notes)}]" if notes else ""))
    if not checked:
        print("FAILED: no region was checked")
        return 1
    if failed:
        print(f"FAILED: {failed} of {checked} regions")
        return 1
    print(f"ALL PASSED: {checked} regions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
