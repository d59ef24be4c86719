#!/usr/bin/env python3
"""Channels-first norms on the GPU (issue 27 item 1): numerics against
float64 (the ConvNeXt-T benchmark of these libraries is
bench/channels_first.py).

N is not the last dim: ConvNeXt's LayerNorm2d normalises x [B, C, H, W]
over C, with statistics [B, H, W] and weight [C]. The functions are
written as linalg on tensors (what a compiler hands over), fused by
--norm-fuse-mixed-reductions into one norm.mixed_reduction with n_dim = 1
and run by the channels-first kernel (docs/gpu.md, "Channels-first rows").

Two modes (PYTHONPATH=python:test/lib-python):
  test/gpu/gpu_channels_first_check.py --build .carry/cf   (build machine:
      writes the functions below and compiles each to a library)
  python3 test/gpu/gpu_channels_first_check.py --dir .carry/cf [--quick]
      (GPU machine: numerics) -- fresh random inputs (never zero), outputs
      poisoned with NaN, every result against float64 by relative L2
      error (norm_opt.testing's channels-first inputs and reference),
      dW/dB bitwise identical over 3 calls
Prints one line per check and a summary last.
"""

import argparse
import os
import subprocess
import sys

from harness import Results, add_inject_option
from norm_opt import compile_command

# The ConvNeXt-T stages (C, S): bench/channels_first.py times the rank-3
# LayerNorms of these C (library_name there is name_of below).
CONVNEXT = ((96, 3136), (192, 784), (384, 196), (768, 49))
DTYPES = ("f32", "bf16")
# (kind, dtype, C, rank, n_dim): the benchmark's functions (rank 3, N in
# the middle), then rank 4 (NCHW), N outermost, and an RMSNorm.
FUNCTIONS = ([("layer", dt, c, 3, 1) for dt in DTYPES for c, _ in CONVNEXT]
             + [("layer", "f32", 64, 4, 1), ("rms", "bf16", 96, 4, 1),
                ("layer", "bf16", 40, 3, 0), ("rms", "f32", 3, 3, 1)])


def name_of(kind, dt, c, rank, n_dim):
    return f"{kind}_cf_{dt}_c{c}_r{rank}_n{n_dim}"


def source(kind, dt, c, rank, n_dim):
    """The backward of a norm over dim n_dim (of size c) of a rank-`rank`
    tensor with run-time other dims, as linalg.generic ops: dx, dW (and dB
    for LayerNorm) in the activation dtype."""
    dims = [f"d{i}" for i in range(rank)]
    shape = ["?"] * rank
    shape[n_dim] = str(c)
    full_t = f"tensor<{'x'.join(shape)}x{dt}>"
    row_t = f"tensor<{'x'.join(['?'] * (rank - 1))}xf32>"
    w_t, acc_t = f"tensor<{c}x{dt}>", f"tensor<{c}xf32>"
    all_map = f"affine_map<({', '.join(dims)}) -> ({', '.join(dims)})>"
    row_map = (f"affine_map<({', '.join(dims)}) -> "
               f"({', '.join(d for i, d in enumerate(dims) if i != n_dim)})>")
    col_map = f"affine_map<({', '.join(dims)}) -> ({dims[n_dim]})>"
    par = ", ".join(['"parallel"'] * rank)
    row_it = ", ".join('"reduction"' if i == n_dim else '"parallel"'
                       for i in range(rank))
    col_it = ", ".join('"parallel"' if i == n_dim else '"reduction"'
                       for i in range(rank))
    ext = (lambda v, o: f"%{o} = arith.extf %{v} : {dt} to f32"
           if dt != "f32" else f"%{o} = arith.addf %{v}, %zero : f32")
    layer = kind == "layer"
    dyn = [i for i in range(rank) if i != n_dim]
    dims_code = "\n".join(
        f"  %s{i} = tensor.dim %x, %i{i} : {full_t}" for i in dyn)
    consts = "\n".join(f"  %i{i} = arith.constant {i} : index" for i in dyn)
    sizes = ", ".join(f"%s{i}" for i in dyn)
    mean_arg = f"%mean: {row_t}, " if layer else ""
    mean_in = "%mean, " if layer else ""
    mean_ty = f"{row_t}, " if layer else ""
    mean_bb = "%m: f32, " if layer else ""
    center = ("%c = arith.subf %xf, %m : f32\n    %h = arith.mulf %c, %r : f32"
              if layer else "%h = arith.mulf %xf, %r : f32")
    n_sums = 2 if layer else 1
    sum_outs = ", ".join(["%zs"] * n_sums)
    sum_tys = ", ".join([row_t] * n_sums)
    sum_bb = ", ".join(f"%o{j}: f32" for j in range(n_sums))
    sum_body = ("%p = arith.mulf %h, %wg : f32\n    %v0 = arith.addf %o0, %p : f32"
                + ("\n    %v1 = arith.addf %o1, %wg : f32" if layer else ""))
    sum_yield = ", ".join(f"%v{j}" for j in range(n_sums))
    sum_res = "%sums:2" if layer else "%sums"
    s0, s1 = ("%sums#0", "%sums#1") if layer else ("%sums", None)
    dx_sums_in = f"{s0}, {s1}, " if layer else f"{s0}, "
    dx_sums_ty = f"{row_t}, {row_t}, " if layer else f"{row_t}, "
    dx_sums_bb = "%a: f32, %bb: f32, " if layer else "%a: f32, "
    dx_body = ("%c1 = arith.divf %a, %n : f32\n    %c2 = arith.divf %bb, %n : f32\n"
               "    %t = arith.mulf %c1, %h : f32\n    %u = arith.addf %c2, %t : f32"
               if layer else
               "%c1 = arith.divf %a, %n : f32\n    %u = arith.mulf %c1, %h : f32")
    to_dt = (lambda v, o: f"%{o} = arith.truncf %{v} : f32 to {dt}"
             if dt != "f32" else f"%{o} = arith.addf %{v}, %zero : f32")
    n_cols = 2 if layer else 1
    col_bb = ", ".join(f"%q{j}: f32" for j in range(n_cols))
    col_body = ("%p = arith.mulf %gf, %h : f32\n    %v0 = arith.addf %q0, %p : f32"
                + ("\n    %v1 = arith.addf %q1, %gf : f32" if layer else ""))
    col_res = "%cols:2" if layer else "%cols"
    col_list = ["%cols#0", "%cols#1"] if layer else ["%cols"]
    epilogues = "\n".join(f"""  %ew{j} = tensor.empty() : {w_t}
  %out{j} = linalg.generic {{indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}}
      ins({v} : {acc_t}) outs(%ew{j} : {w_t}) {{
  ^bb0(%a: f32, %o: {dt}):
    {to_dt("a", "t")}
    linalg.yield %t : {dt}
  }} -> {w_t}""" for j, v in enumerate(col_list))
    outs = ", ".join(f"%out{j}" for j in range(n_cols))
    out_tys = ", ".join([w_t] * n_cols)
    return f"""#all = {all_map}
#row = {row_map}
#col = {col_map}
func.func @{name_of(kind, dt, c, rank, n_dim)}(%dy: {full_t}, %x: {full_t}, {mean_arg}%rstd: {row_t}, %w: {w_t}) -> ({full_t}, {out_tys}) {{
{consts}
  %zero = arith.constant 0.0 : f32
  %n = arith.constant {float(c)} : f32
{dims_code}
  %es = tensor.empty({sizes}) : {row_t}
  %zs = linalg.fill ins(%zero : f32) outs(%es : {row_t}) -> {row_t}
  {sum_res} = linalg.generic {{indexing_maps = [#all, #all, {'#row, ' if layer else ''}#row, #col, {', '.join(['#row'] * n_sums)}], iterator_types = [{row_it}]}}
      ins(%dy, %x, {mean_in}%rstd, %w : {full_t}, {full_t}, {mean_ty}{row_t}, {w_t}) outs({sum_outs} : {sum_tys}) {{
  ^bb0(%g: {dt}, %xe: {dt}, {mean_bb}%r: f32, %we: {dt}, {sum_bb}):
    {ext("g", "gf")}
    {ext("xe", "xf")}
    {ext("we", "wf")}
    {center}
    %wg = arith.mulf %gf, %wf : f32
    {sum_body}
    linalg.yield {sum_yield} : {', '.join(['f32'] * n_sums)}
  }} -> ({sum_tys})
  %e = tensor.empty({sizes}) : {full_t}
  %dx = linalg.generic {{indexing_maps = [#all, #all, {'#row, ' if layer else ''}#row, #col, {', '.join(['#row'] * n_sums)}, #all], iterator_types = [{par}]}}
      ins(%dy, %x, {mean_in}%rstd, %w, {dx_sums_in[:-2]} : {full_t}, {full_t}, {mean_ty}{row_t}, {w_t}, {dx_sums_ty[:-2]}) outs(%e : {full_t}) {{
  ^bb0(%g: {dt}, %xe: {dt}, {mean_bb}%r: f32, %we: {dt}, {dx_sums_bb}%o: {dt}):
    {ext("g", "gf")}
    {ext("xe", "xf")}
    {ext("we", "wf")}
    {center}
    %wg = arith.mulf %gf, %wf : f32
    {dx_body}
    %d = arith.subf %wg, %u : f32
    %v = arith.mulf %d, %r : f32
    {to_dt("v", "vt")}
    linalg.yield %vt : {dt}
  }} -> {full_t}
  %ec = tensor.empty() : {acc_t}
  %zc = linalg.fill ins(%zero : f32) outs(%ec : {acc_t}) -> {acc_t}
  {col_res} = linalg.generic {{indexing_maps = [#all, #all, {'#row, ' if layer else ''}#row, {', '.join(['#col'] * n_cols)}], iterator_types = [{col_it}]}}
      ins(%dy, %x, {mean_in}%rstd : {full_t}, {full_t}, {mean_ty}{row_t}) outs({', '.join(['%zc'] * n_cols)} : {', '.join([acc_t] * n_cols)}) {{
  ^bb0(%g: {dt}, %xe: {dt}, {mean_bb}%r: f32, {col_bb}):
    {ext("g", "gf")}
    {ext("xe", "xf")}
    {center}
    {col_body}
    linalg.yield {', '.join(f'%v{j}' for j in range(n_cols))} : {', '.join(['f32'] * n_cols)}
  }} -> ({', '.join([acc_t] * n_cols)})
{epilogues}
  return %dx, {outs} : {full_t}, {out_tys}
}}
"""


GRAPH_TEST = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          os.pardir, "Transforms",
                          "fuse-mixed-reductions-graphs.mlir")
GRAPH = "channels_first_between_matmuls"


def graph_source():
    """The whole-graph lit input: two channels-first RMSNorm groups (C = 16,
    8) between batch_matmuls, comments (and so the test's directives)
    dropped."""
    for part in open(GRAPH_TEST).read().split("// -----"):
        if f"@{GRAPH}(" in part:
            return "\n".join(l for l in part.splitlines()
                             if not l.lstrip().startswith("//"))
    raise SystemExit(f"no @{GRAPH} in {GRAPH_TEST}")


def build(out, norm_opt):
    os.makedirs(out, exist_ok=True)
    src = os.path.join(out, f"{GRAPH}.mlir")
    with open(src, "w") as fh:
        fh.write(graph_source())
    subprocess.run(compile_command(src, os.path.join(out, f"lib{GRAPH}.so"),
                                   emit="lib", norm_opt=norm_opt), check=True)
    for f in FUNCTIONS:
        name = name_of(*f)
        src = os.path.join(out, f"{name}.mlir")
        with open(src, "w") as fh:
            fh.write(source(*f))
        lib = os.path.join(out, f"lib{name}.so")
        subprocess.run(compile_command(src, lib, emit="lib", norm_opt=norm_opt),
                       check=True)
        print(f"built lib{name}.so")
    return 0


# --- GPU side ---------------------------------------------------------------

def numerics(args):
    import torch
    from norm_opt import Library
    from norm_opt.testing import (channels_first_inputs as make_inputs,
                                  channels_first_reference as reference)

    results = Results("gpu_channels_first_check", args.inject)
    for kind, dt, c, rank, n_dim in FUNCTIONS:
        name = name_of(kind, dt, c, rank, n_dim)
        fn = getattr(Library(os.path.join(args.dir, f"lib{name}.so")), name)
        others = {3: [(1, 7), (3, 49), (2, 1000)],
                  4: [(1, 3, 5), (4, 7, 9)]}[rank]
        if args.quick:
            others = others[:2]
        if rank == 3 and n_dim == 1 and not args.quick:
            others.append((32, dict(CONVNEXT).get(c, 49)))
        for o in others:
            shape = list(o)
            shape.insert(n_dim, c)
            ins = make_inputs(kind, dt, c, shape, n_dim)
            dtype = ins[0].dtype
            runs = []
            for _ in range(3):
                outs = [torch.full(shape, float("nan"), dtype=dtype,
                                   device="cuda")]
                outs += [torch.full((c,), float("nan"), dtype=dtype,
                                    device="cuda")
                         for _ in range(2 if kind == "layer" else 1)]
                fn(*ins, *outs)
                runs.append(outs)
            torch.cuda.synchronize()
            ref = reference(kind, n_dim, *ins)
            case = f"{name} {tuple(shape)}"
            for label, got, want in zip(("dx", "dw", "db"), runs[0], ref):
                results.compare(case, label, got, want)
            results.require(case, "dW/dB bitwise over 3 calls",
                            all(torch.equal(a, b) for r in runs[1:]
                                for a, b in zip(runs[0][1:], r[1:])))
    graph_check(args.dir, results)
    return results.finish()


def graph_check(folder, results):
    """The whole graph: the batch_matmuls in torch, each outlined group
    through its launcher, against the float64 function (f32, within its
    tolerance)."""
    import torch
    from norm_opt import Library
    from norm_opt.testing import channels_first_reference as reference

    lib = Library(os.path.join(folder, f"lib{GRAPH}.so"))
    g0, g1 = (getattr(lib, f"{GRAPH}_group{i}") for i in (0, 1))

    def rnd(*shape):
        v = torch.rand(*shape, device="cuda") * 1.75 + 0.25
        return v * (torch.randint(0, 2, shape, device="cuda") * 2 - 1)

    a, g, x1 = rnd(2, 16, 4), rnd(2, 4, 6), rnd(2, 16, 6)
    r1 = torch.rand(2, 6, device="cuda") + 0.5
    w1, p, q = rnd(16), rnd(2, 3, 16), rnd(2, 8, 3)
    x2, r2, w2 = rnd(2, 8, 6), torch.rand(2, 6, device="cuda") + 0.5, rnd(8)

    def nan(*shape):
        return torch.full(shape, float("nan"), device="cuda")

    def group(fn, x, dy, r, w):
        outs = (nan(*x.shape), nan(x.shape[1]))
        # the outlined group's arguments: x, dy, rstd, w (its order)
        fn(x, dy.contiguous(), r, w, *outs)
        return outs

    dy1 = torch.bmm(a, g)
    dx1, dw1 = group(g0, x1, dy1, r1, w1)
    dy2 = torch.bmm(q, torch.bmm(p, dx1))
    dx2, dw2 = group(g1, x2, dy2, r2, w2)
    torch.cuda.synchronize()
    d = torch.float64
    rdx1, rdw1 = reference("rms", 1, torch.bmm(a.to(d), g.to(d)),
                           x1, r1, w1)[:2]
    rdy2 = torch.bmm(q.to(d), torch.bmm(p.to(d), rdx1))
    rdx2, rdw2 = reference("rms", 1, rdy2, x2, r2, w2)[:2]
    for name, got, want in (("dx", dx2, rdx2), ("dw1", dw1, rdw1),
                            ("dw2", dw2, rdw2)):
        results.compare(f"{GRAPH} (graph)", name, got, want)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", metavar="OUT")
    ap.add_argument("--norm-opt", default="build/bin/norm-opt")
    ap.add_argument("--dir", default=".carry/cf")
    ap.add_argument("--quick", action="store_true")
    add_inject_option(ap)
    args = ap.parse_args()
    if args.build:
        return build(args.build, args.norm_opt)
    return numerics(args)


if __name__ == "__main__":
    sys.exit(main())
