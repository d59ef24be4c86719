#!/usr/bin/env python3
"""Norm groups of a whole graph on the GPU, against float64.

Runs on the GPU machine over the libraries `norm-opt compile` made from
test/gpu/Inputs/block_bf16.mlir (a function that is not only its groups:
each group outlined, one launcher each) and
test/gpu/Inputs/two_domains_bf16.mlir
(two groups of different [rows, N], one launcher with a rows/cols pair per
group), loaded with the norm_opt package (PYTHONPATH=python):

  block     torch runs the matmuls the host keeps: dy = g @ w_down, then
            @block_bf16_group0 (RMSNorm backward + the residual gradient),
            dq = dsum @ w_proj, then @block_bf16_group1 (LayerNorm backward
            over N = 1024). Each group is checked at its boundary against a
            float64 reference computed from the same inputs (the matmuls'
            real outputs).
  two       @two_domains_bf16 with rows1 = 32 x rows0 (a head norm).

Inputs are fresh random (never zero), outputs poisoned with NaN first,
every result compared by relative L2 error with the tolerance of its type
and checked written; dx/dW/dB bitwise identical over 5 repeated calls.

  PYTHONPATH=python python3 test/gpu/gpu_graph_check.py --dir .carry/graph
      [--quick] [--cpu-matmuls] [--inject nan|empty]
  PYTHONPATH=python python3 test/gpu/gpu_graph_check.py --build DIR
      [--norm-opt PATH]      (the two libraries, with `norm-opt compile`)

--cpu-matmuls runs the host's matmuls on the CPU (in float32, then rounded
to bf16 on the GPU), so that a compute-sanitizer run sees no cuBLAS kernel
(racecheck reports hazards inside cuBLAS's own matmul kernels).
Prints one line per case and a table last; exits non-zero on any failure.
"""

import argparse
import os
import subprocess
import sys

import torch

from norm_opt import Library
from norm_opt import reference as float64
from harness import Results, add_inject_option
from norm_opt import compile_command

INPUTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "Inputs")
LIBRARIES = ("block_bf16", "two_domains_bf16")

REPEATS = 5


def norm_backward_f64(dy, x, mean, rstd, w):
    """dx, dw, db in float64 (norm_opt.reference; LayerNorm when mean is
    given, else RMSNorm)."""
    ref = float64.backward("layer" if mean is not None else "rms", x, dy,
                           rstd, mean, w)
    return ref["dx"], ref["dw"], ref["db"]


def poisoned_like(shape, dtype):
    return torch.full(shape, float("nan"), dtype=dtype, device="cuda")


def randn(*shape, dtype=torch.bfloat16, scale=1.0):
    t = torch.randn(*shape, device="cuda") * scale
    t = torch.where(t.abs() < 1e-3, torch.full_like(t, 1e-3), t)
    return t.to(dtype)


def stats(rows):
    return (torch.rand(rows, device="cuda") * 1.5 + 0.5,
            torch.randn(rows, device="cuda") * 0.5)


class Report(Results):
    """Results (harness.py) with the graph's bitwise checks and its table."""

    def __init__(self, inject=None):
        super().__init__("gpu_graph_check", inject)

    def check(self, case, name, got, ref):
        self.compare(case, name, got, ref)

    def same(self, case, name, runs):
        self.require(case, f"{name} bitwise over {len(runs)} calls",
                     all(torch.equal(runs[0], r) for r in runs[1:]))

    def table(self):
        print(f"\n{'case':<32} {'result':<26} {'rel_l2':>9}  ok")
        for case, name, err, ok in self.rows:
            shown = "" if err is None else f"{err:9.2e}"
            print(f"{case:<32} {name:<26} {shown:>9}  {'yes' if ok else 'NO'}")


MATMUL_ON_CPU = False


def matmul(a, b):
    """The host's matmul: torch's on the GPU, or on the CPU (--cpu-matmuls)."""
    if not MATMUL_ON_CPU:
        return a @ b
    return (a.float().cpu() @ b.float().cpu()).to(a.device).to(a.dtype)


def check_block(lib, rows, report):
    """The outlined groups of block_bf16, with torch's matmuls between."""
    case = f"block rows={rows}"
    g = randn(rows, 8192)
    w_down = randn(8192, 2048, scale=8192 ** -0.5)
    x, g_res = randn(rows, 2048), randn(rows, 2048)
    rstd, _ = stats(rows)
    weight = randn(2048)
    dy = matmul(g, w_down)  # the host's matmul

    def group0():
        dsum, dweight = poisoned_like((rows, 2048), torch.bfloat16), \
            poisoned_like((2048,), torch.bfloat16)
        lib.block_bf16_group0(x, dy, g_res, rstd, weight, dsum, dweight)
        return dsum, dweight
    runs = [group0() for _ in range(REPEATS)]
    dx64, dw64, _ = norm_backward_f64(dy, x, None, rstd, weight)
    report.check(case, "group0 dx+residual", runs[0][0], dx64 + g_res.double())
    report.check(case, "group0 dweight", runs[0][1], dw64)
    report.same(case, "group0 dx", [r[0] for r in runs])
    report.same(case, "group0 dweight", [r[1] for r in runs])

    dsum = runs[0][0]
    w_proj = randn(2048, 1024, scale=2048 ** -0.5)
    dq = matmul(dsum, w_proj)  # the host's second matmul
    q = randn(rows, 1024)
    q_rstd, q_mean = stats(rows)
    q_weight = randn(1024)

    def group1():
        out = (poisoned_like((rows, 1024), torch.bfloat16),
               poisoned_like((1024,), torch.bfloat16),
               poisoned_like((1024,), torch.bfloat16))
        lib.block_bf16_group1(q, dq, q_mean, q_rstd, q_weight, *out)
        return out
    runs = [group1() for _ in range(REPEATS)]
    ref = norm_backward_f64(dq, q, q_mean, q_rstd, q_weight)
    for name, got, want in zip(("dx", "dweight", "dbias"), runs[0], ref):
        report.check(case, "group1 " + name, got, want)
        report.same(case, "group1 " + name,
                     [r[("dx", "dweight", "dbias").index(name)] for r in runs])


def check_two_domains(lib, rows0, report):
    """Both groups from one launcher: rows1 = 32 heads x rows0."""
    rows1 = 32 * rows0
    case = f"two rows0={rows0} rows1={rows1}"
    dy, x = randn(rows0, 4096), randn(rows0, 4096)
    rstd, _ = stats(rows0)
    w = randn(4096, dtype=torch.float32)
    dq, q = randn(rows1, 128), randn(rows1, 128)
    q_rstd, q_mean = stats(rows1)
    q_w, q_b = randn(128, dtype=torch.float32), randn(128, dtype=torch.float32)

    def call():
        out = (poisoned_like((rows0, 4096), torch.bfloat16),
               poisoned_like((4096,), torch.float32),
               poisoned_like((rows1, 128), torch.bfloat16),
               poisoned_like((128,), torch.float32),
               poisoned_like((128,), torch.float32))
        lib.two_domains_bf16(dy, x, rstd, w, dq, q, q_mean, q_rstd, q_w, q_b,
                             *out)
        return out
    runs = [call() for _ in range(REPEATS)]
    rms = norm_backward_f64(dy, x, None, rstd, w)
    layer = norm_backward_f64(dq, q, q_mean, q_rstd, q_w)
    names = ("rms dx", "rms dw", "qk dx", "qk dw", "qk db")
    refs = (rms[0], rms[1], layer[0], layer[1], layer[2])
    for i, (name, ref) in enumerate(zip(names, refs)):
        report.check(case, name, runs[0][i], ref)
        report.same(case, name, [r[i] for r in runs])


def build(out, norm_opt):
    """lib<name>.so of each graph in Inputs/ (and its host module)."""
    os.makedirs(out, exist_ok=True)
    for name in LIBRARIES:
        subprocess.run(compile_command(
            os.path.join(INPUTS, f"{name}.mlir"),
            os.path.join(out, f"lib{name}.so"), emit="lib",
            norm_opt=norm_opt,
            host_module=os.path.join(out, f"{name}.host.mlir")), check=True)
        print(f"built lib{name}.so")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", metavar="OUT")
    ap.add_argument("--norm-opt", default="build/bin/norm-opt")
    ap.add_argument("--dir", default=".carry/graph")
    ap.add_argument("--quick", action="store_true",
                    help="small row counts (for compute-sanitizer)")
    ap.add_argument("--cpu-matmuls", action="store_true",
                    help="the host's matmuls on the CPU (no cuBLAS kernels)")
    add_inject_option(ap)
    args = ap.parse_args()
    if args.build:
        return build(args.build, args.norm_opt)
    global MATMUL_ON_CPU
    MATMUL_ON_CPU = args.cpu_matmuls
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    block = Library(os.path.join(args.dir, "libblock_bf16.so"))
    two = Library(os.path.join(args.dir, "libtwo_domains_bf16.so"))
    report = Report(args.inject)
    rows = (1, 37, 300) if args.quick else (1, 37, 4096, 16383)
    for m in rows:
        check_block(block, m, report)
        check_two_domains(two, m, report)
    torch.cuda.synchronize()
    report.table()
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
