#!/usr/bin/env python3
"""Integer and boolean inputs on the GPU, against float64 (issue 27 item 2).

Two modes (PYTHONPATH=python:test/lib-python, README.md):
  test/gpu/gpu_mask_check.py --build .carry/masks  (build machine: writes
      the inputs below and compiles them with norm-opt compile --emit=lib)
  python3 test/gpu/gpu_mask_check.py --dir .carry/masks
      [--quick]                                   (GPU machine: checks)

The functions: dropout before an RMSNorm backward with an i8 keep-mask
(bf16, N = 1024, 2999, 4096, 16384 and a run-time N: the resident, peeled,
looped and tier kernels), a boolean (torch.bool) keep-mask through select
before a LayerNorm backward (f32, N = 768, 8192 and a run-time N), and a
per-row boolean padding mask with per-row i32 ids (f32, N = 4096). Fresh
random inputs (never zero where they are floats), outputs poisoned with
NaN, every result against float64 by relative L2 error, dW/dB bitwise
identical over 3 calls. Prints one line per check and a count last.
"""

import argparse
import os
import subprocess
import sys

from harness import Results, add_inject_option
from norm_opt import compile_command

DROP8_NS = (1024, 2999, 4096, 16384, "dyn")
DROP1_NS = (768, 8192, "dyn")
ROWS = (1, 33, 4096)
ROWS_QUICK = (1, 33, 300)


def drop8_source(n):
    d = "?" if n == "dyn" else n
    t, w = f"tensor<?x{d}xbf16>", f"tensor<{d}xbf16>"
    m = f"tensor<?x{d}xi8>"
    return f"""
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @rms_drop8_{n}(%dy: {t}, %keep: {m}, %x: {t}, %rstd: tensor<?xf32>, %w: {w}) -> ({t}, {w}) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = tensor.dim %dy, %c0 : {t}
  %n = tensor.dim %dy, %c1 : {t}
  %e = tensor.empty(%r{', %n' if n == 'dyn' else ''}) : {t}
  %kept = linalg.generic {{indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%dy, %keep : {t}, {m}) outs(%e : {t}) {{
  ^bb0(%g: bf16, %k: i8, %o: bf16):
    %kf = arith.uitofp %k : i8 to f32
    %gf = arith.extf %g : bf16 to f32
    %s = arith.constant 1.25 : f32
    %v = arith.mulf %gf, %kf : f32
    %v2 = arith.mulf %v, %s : f32
    %tr = arith.truncf %v2 : f32 to bf16
    linalg.yield %tr : bf16
  }} -> {t}
  %dx, %dw = norm.rms_norm_grad %kept, %x, %rstd weight(%w : {w}) : {t}, tensor<?xf32> -> {t}, {w}
  return %dx, %dw : {t}, {w}
}}
"""


def drop1_source(n):
    d = "?" if n == "dyn" else n
    t, w = f"tensor<?x{d}xf32>", f"tensor<{d}xf32>"
    m = f"tensor<?x{d}xi1>"
    return f"""
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @layer_drop1_{n}(%dy: {t}, %keep: {m}, %x: {t}, %mean: tensor<?xf32>, %rstd: tensor<?xf32>, %w: {w}, %b: {w}) -> ({t}, {w}, {w}) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = tensor.dim %dy, %c0 : {t}
  %n = tensor.dim %dy, %c1 : {t}
  %e = tensor.empty(%r{', %n' if n == 'dyn' else ''}) : {t}
  %kept = linalg.generic {{indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%dy, %keep : {t}, {m}) outs(%e : {t}) {{
  ^bb0(%g: f32, %k: i1, %o: f32):
    %zero = arith.constant 0.0 : f32
    %s = arith.constant 2.0 : f32
    %gs = arith.mulf %g, %s : f32
    %v = arith.select %k, %gs, %zero : f32
    linalg.yield %v : f32
  }} -> {t}
  %dx, %dw, %db = norm.layer_norm_grad %kept, %x, %mean, %rstd weight(%w : {w}) bias(%b : {w}) : {t}, tensor<?xf32> -> {t}, {w}, {w}
  return %dx, %dw, %db : {t}, {w}, {w}
}}
"""


ROWMASK_SOURCE = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @rms_rowmask_4096(%dy: tensor<?x4096xf32>, %valid: tensor<?xi1>, %ids: tensor<?xi32>, %x: tensor<?x4096xf32>, %rstd: tensor<?xf32>, %w: tensor<4096xf32>) -> (tensor<?x4096xf32>, tensor<4096xf32>) {
  %c0 = arith.constant 0 : index
  %r = tensor.dim %dy, %c0 : tensor<?x4096xf32>
  %e = tensor.empty(%r) : tensor<?x4096xf32>
  %masked = linalg.generic {indexing_maps = [#id, #row, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %valid, %ids : tensor<?x4096xf32>, tensor<?xi1>, tensor<?xi32>) outs(%e : tensor<?x4096xf32>) {
  ^bb0(%g: f32, %v: i1, %i: i32, %o: f32):
    %zero = arith.constant 0.0 : f32
    %one = arith.constant 1.0 : f32
    %if = arith.sitofp %i : i32 to f32
    %s = arith.addf %if, %one : f32
    %gs = arith.mulf %g, %s : f32
    %rr = arith.select %v, %gs, %zero : f32
    linalg.yield %rr : f32
  } -> tensor<?x4096xf32>
  %dx, %dw = norm.rms_norm_grad %masked, %x, %rstd weight(%w : tensor<4096xf32>) : tensor<?x4096xf32>, tensor<?xf32> -> tensor<?x4096xf32>, tensor<4096xf32>
  return %dx, %dw : tensor<?x4096xf32>, tensor<4096xf32>
}
"""


def build(out, norm_opt):
    os.makedirs(out, exist_ok=True)
    sources = ([("drop8_" + str(n), drop8_source(n)) for n in DROP8_NS] +
               [("drop1_" + str(n), drop1_source(n)) for n in DROP1_NS] +
               [("rowmask", ROWMASK_SOURCE)])
    for name, text in sources:
        src = os.path.join(out, f"{name}.mlir")
        with open(src, "w") as f:
            f.write(text)
        lib = os.path.join(out, f"lib{name}.so")
        subprocess.run(compile_command(src, lib, emit="lib",
                                       norm_opt=norm_opt), check=True)
        print(f"built lib{name}.so")
    return 0


def check(args):
    import torch
    from norm_opt import Library
    from norm_opt import reference as float64
    results = Results("gpu_mask_check", args.inject)

    def expect(case, name, got, ref):
        """got against float64 with harness.py's tolerance of its type."""
        results.compare(case, name, got, ref)

    def same(case, runs):
        results.require(case, f"bitwise over {len(runs)} calls",
                        all(torch.equal(runs[0][i], r[i]) for r in runs[1:]
                            for i in range(len(runs[0]))))

    def norm_ref(dy, x, mean, rstd, w):
        """dx, dw, db in float64 (norm_opt.reference)."""
        ref = float64.backward("layer" if mean is not None else "rms", x, dy,
                               rstd, mean, w)
        return ref["dx"], ref["dw"], ref["db"]

    def nan(*shape, dtype):
        return torch.full(shape, float("nan"), dtype=dtype, device="cuda")

    dev = "cuda"
    rows_list = ROWS_QUICK if args.quick else ROWS
    for n in DROP8_NS:
        lib = Library(os.path.join(args.dir, f"libdrop8_{n}.so"))
        fn = getattr(lib, f"rms_drop8_{n}")
        cols = 5000 if n == "dyn" else n
        for rows in rows_list:
            case = f"rms+dropout(i8) bf16 {rows}x{cols}{' (run-time N)' if n == 'dyn' else ''}"
            dy = torch.randn(rows, cols, device=dev).bfloat16()
            keep = torch.randint(0, 2, (rows, cols), device=dev,
                                 dtype=torch.int8)
            x = torch.randn(rows, cols, device=dev).bfloat16()
            rstd = torch.rand(rows, device=dev) * 1.5 + 0.5
            w = torch.randn(cols, device=dev).bfloat16()
            runs = []
            for _ in range(3):
                out = (nan(rows, cols, dtype=torch.bfloat16),
                       nan(cols, dtype=torch.bfloat16))
                fn(dy, keep, x, rstd, w, *out)
                runs.append(out)
            kept = (dy.float() * keep.float() * 1.25).bfloat16().double()
            dx, dw, _ = norm_ref(kept, x.double(), None, rstd.double(),
                                 w.double())
            expect(case, "dx", runs[0][0], dx)
            expect(case, "dw", runs[0][1], dw)
            same(case, runs)
    for n in DROP1_NS:
        lib = Library(os.path.join(args.dir, f"libdrop1_{n}.so"))
        fn = getattr(lib, f"layer_drop1_{n}")
        cols = 3001 if n == "dyn" else n
        for rows in rows_list:
            case = f"layer+dropout(bool) f32 {rows}x{cols}{' (run-time N)' if n == 'dyn' else ''}"
            dy = torch.randn(rows, cols, device=dev)
            keep = torch.rand(rows, cols, device=dev) < 0.9
            x = torch.randn(rows, cols, device=dev)
            mean = torch.randn(rows, device=dev) * 0.5
            rstd = torch.rand(rows, device=dev) * 1.5 + 0.5
            w, b = torch.randn(cols, device=dev), torch.randn(cols, device=dev)
            runs = []
            for _ in range(3):
                out = (nan(rows, cols, dtype=torch.float32),
                       nan(cols, dtype=torch.float32),
                       nan(cols, dtype=torch.float32))
                fn(dy, keep, x, mean, rstd, w, b, *out)
                runs.append(out)
            kept = dy.double() * 2.0 * keep.double()
            ref = norm_ref(kept, x.double(), mean.double(), rstd.double(),
                           w.double())
            for name, got, want in zip(("dx", "dw", "db"), runs[0], ref):
                expect(case, name, got, want)
            same(case, runs)
    lib = Library(os.path.join(args.dir, "librowmask.so"))
    for rows in rows_list:
        case = f"rms+row mask(bool)+ids(i32) f32 {rows}x4096"
        dy = torch.randn(rows, 4096, device=dev)
        valid = torch.rand(rows, device=dev) < 0.8
        ids = torch.randint(0, 4, (rows,), device=dev, dtype=torch.int32)
        x = torch.randn(rows, 4096, device=dev)
        rstd = torch.rand(rows, device=dev) * 1.5 + 0.5
        w = torch.randn(4096, device=dev)
        runs = []
        for _ in range(3):
            out = (nan(rows, 4096, dtype=torch.float32),
                   nan(4096, dtype=torch.float32))
            lib.rms_rowmask_4096(dy, valid, ids, x, rstd, w, *out)
            runs.append(out)
        masked = (dy.double() * (ids.double() + 1)[:, None] *
                  valid.double()[:, None])
        dx, dw, _ = norm_ref(masked, x.double(), None, rstd.double(),
                             w.double())
        expect(case, "dx", runs[0][0], dx)
        expect(case, "dw", runs[0][1], dw)
        same(case, runs)
    torch.cuda.synchronize()
    return results.finish()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", metavar="OUT")
    ap.add_argument("--norm-opt", default="build/bin/norm-opt")
    ap.add_argument("--dir", default=".carry/masks")
    ap.add_argument("--quick", action="store_true")
    add_inject_option(ap)
    args = ap.parse_args()
    if args.build:
        return build(args.build, args.norm_opt)
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
