#!/usr/bin/env python3
"""norm_opt.torch's ops against torch's own rules (issue 30 item 4):
torch.library.opcheck on both ops (schema, fake kernel, dispatch,
aliasing) in f32 and bf16, and a CUDA graph captured around a forward +
backward of the drop-in modules (their C++ autograd path: the backward op
inside the capture takes its workspace from torch's graph pool), replayed
and compared bitwise with eager calls.

  PYTHONPATH=python NORM_OPT_LIBRARY_PATH=.carry/norm_opt_libs \\
      python3 test/gpu/torch_ops_check.py [--inject nan|empty]

Requires norm_opt.torch's C++ ops (norm_opt.torch._cpp): without them the
pool check has nothing to check and fails. Exit status 0 when every check
passes and at least one ran. --inject: self-checks that must fail
(test/gpu/suite.py runs them).
"""

import argparse
import sys

import torch

import norm_opt.torch as nt
from harness import add_inject_option, poison
from norm_opt.checks import Checks

N = 1024


def inputs(kind, dtype):
    g = torch.Generator(device="cuda").manual_seed(3)
    x = torch.randn(4, 64, N, generator=g, device="cuda").to(dtype)
    dy = torch.randn(4, 64, N, generator=g, device="cuda").to(dtype)
    w = torch.randn(N, generator=g, device="cuda").to(dtype)
    xf = x.float()
    rstd = torch.rsqrt(xf.var(-1, unbiased=False) + 1e-5)
    if kind == "layer":
        return (dy, x, xf.mean(-1), rstd, w)
    return (dy, x, rstd, w)


def graph_check(kind, dtype, inject=None):
    """(replays bitwise equal to eager, workspace from the graph's pool)."""
    cls = nt.LayerNorm if kind == "layer" else nt.RMSNorm
    module = cls(N).cuda().to(dtype)
    x = torch.randn(4, 64, N, device="cuda", dtype=dtype, requires_grad=True)
    dy = torch.randn(4, 64, N, device="cuda", dtype=dtype)

    def step():
        module.weight.grad = None
        x.grad = None
        module(x).backward(dy)
        return x.grad.clone(), module.weight.grad.clone()

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        want = [step() for _ in range(3)][-1]  # warm-up on the side stream
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    module.weight.grad = None
    x.grad = None
    before = nt._cpp.capture_workspaces() if nt._cpp else 0
    with torch.cuda.graph(g):
        out = module(x)
        out.backward(dy)
    # The C++ ops' workspace came from torch's allocator (the graph's pool),
    # asked for by the runtime through normrt_set_capture_allocator. Without
    # the C++ ops there is no such path: a failure, not a pass.
    from_pool = (nt._cpp is not None
                 and nt._cpp.capture_workspaces() == before + 1)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    if inject == "nan":  # after the replays ran our kernels
        poison(x.grad)
    return (torch.equal(x.grad, want[0])
            and torch.equal(module.weight.grad, want[1])), from_pool


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_inject_option(ap)
    args = ap.parse_args()
    checks = Checks("torch_ops_check")
    print(f"C++ ops: {nt._cpp is not None}")
    # --inject empty: compare nothing (the run must fail).
    kinds = () if args.inject == "empty" else ("layer", "rms")
    if kinds:
        checks.require("C++ ops loaded", nt._cpp is not None,
                       "norm_opt.torch._cpp is None: the graph-pool "
                       "workspace check cannot run")
    for kind in kinds:
        op = (torch.ops.norm_opt.layer_norm_backward if kind == "layer"
              else torch.ops.norm_opt.rms_norm_backward)
        for dtype in (torch.float32, torch.bfloat16):
            name = f"{kind} {str(dtype).split('.')[-1]}"
            try:
                torch.library.opcheck(op, inputs(kind, dtype))
                ok, why = True, ""
            except Exception as e:  # opcheck raises with the failed check
                ok, why = False, f": {type(e).__name__}: {e}"
            checks.require(f"opcheck {name}", ok, why)
            print(f"{'PASS' if ok else 'FAIL'} opcheck {name}{why}")
            same, from_pool = graph_check(kind, dtype, args.inject)
            checks.require(f"CUDA graph {name} replays", same,
                           "not bitwise equal to eager")
            checks.require(f"CUDA graph {name} workspace", from_pool,
                           "not one workspace from the graph's pool")
            print(f"{'PASS' if same else 'FAIL'} CUDA graph of the module's "
                  f"forward + backward, {name}: replays bitwise equal to "
                  "eager")
            print(f"{'PASS' if from_pool else 'FAIL'} CUDA graph {name}: "
                  "the C++ ops' workspace from the graph's pool")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
