#!/usr/bin/env python3
"""torch.compile on unmodified models, with norm_opt.torch.enable_compile_
routing() (issues 30, 40 and 42): the norm backwards of nn.LayerNorm,
nn.RMSNorm, a hand-written LLaMA-style RMSNorm, a Gemma-style (1 + w) one,
a weight-only fp32 LayerNorm, DiT's adaLN modulation (per-sample scale
and shift: one batched-rows group) and nn.GroupNorm in a UNet block (conv,
GroupNorm(32, 320), SiLU, conv; NCHW and channels last: one slab group,
found through --norm-propagate-reshapes and --norm-merge-nested-sums), as
Inductor decomposes them, must be
found by the recognition pass (norm_opt.compile_route), run on our kernels,
and every gradient must match eager torch.

For each model and dtype: a small residual block (Linear -> norm ->
Linear) compiled with torch.compile after the call, one forward + backward
on fresh random inputs, the gradients of every parameter and of the input
against the same model run eagerly without the routing (relative L2), the
regions the route replaced, and our kernel launches. The norm spellings
and the block are norm_opt.testing's.

  PYTHONPATH=python NORM_OPT=build/bin/norm-opt python3 \\
      test/gpu/compile_routing_check.py [--inject nan|empty]

Prints the worst gradient error per dtype last (the WORST line); exits
non-zero on any failure and when nothing was compared. --inject: self-checks
that must fail (test/gpu/suite.py runs them).
"""

import argparse
import copy
import os
import sys

import torch
import torch.nn as nn

import norm_opt.torch as nt
from harness import Worst, add_inject_option, poison
from norm_opt.checks import Checks
from norm_opt.reference import rel_l2, worst
from norm_opt.testing import (AdaLNBlock, Block, CohereLayerNorm,
                              GemmaRMSNorm, GroupNormBlock, LlamaRMSNorm,
                              OlmoLayerNorm)

HIDDEN = 1024  # Block's default hidden size
# Whole-model gradients against eager torch (whose own bf16 rounding is in
# the difference too), not one kernel result against float64: not
# harness.TOLERANCE. Measured worst: 5.8e-7 (f32), 6.5e-3 (bf16). The conv
# blocks (GroupNorm) differ from eager by cuDNN's choice of algorithms even
# when Inductor runs them alone: 7.9e-5 in f32 unrouted, so 5e-4 there.
TOL = {torch.float32: 1e-5, torch.bfloat16: 2e-2}
TOL_CONV = {torch.float32: 5e-4, torch.bfloat16: 2e-2}


def run(model, xs, module=None):
    """Forward + backward of `model` on the inputs `xs`; the gradients of
    `module`'s parameters (the compiled model's original module) and of
    each input."""
    xs = [x.detach().clone().requires_grad_() for x in xs]
    model(*xs).float().pow(2).mean().backward()
    grads = {n: p.grad for n, p in (module or model).named_parameters()}
    for i, x in enumerate(xs):
        grads["input" if i == 0 else f"input{i}"] = x.grad
    return grads



def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_inject_option(ap)
    args = ap.parse_args()
    torch.manual_seed(0)
    cases = [("nn.LayerNorm", nn.LayerNorm, True),
             ("nn.RMSNorm", nn.RMSNorm, True),
             ("LLaMA RMSNorm", LlamaRMSNorm, True),
             ("Gemma RMSNorm", GemmaRMSNorm, True),
             ("Cohere LN f32", CohereLayerNorm, True),
             ("OLMo LN", OlmoLayerNorm, True),
             ("DiT adaLN", "adaln", True),
             ("GroupNorm", "group_norm", True),
             # A module the user made channels last: torch's decomposition
             # copies x to NCHW (aten.clone) for its kernels; the importer
             # writes the steps in x's stored order, so the copy fuses away.
             ("GroupNorm NHWC", "group_norm_nhwc", True)]
    only = os.environ.get("NORM_ROUTING_CASES")  # "OLMo LN,nn.RMSNorm"
    if only:
        cases = [c for c in cases if c[0] in only.split(",")]
        if not cases:
            print(f"FAIL: no case named in $NORM_ROUTING_CASES={only}")
            return 1
    # Eager references first, before the routing changes Inductor.
    data = []
    for name, norm, routed in cases:
        for dtype in (torch.float32, torch.bfloat16):
            model = (AdaLNBlock(HIDDEN) if norm == "adaln" else
                     GroupNormBlock() if isinstance(norm, str) else
                     Block(norm)).cuda().to(dtype)
            with torch.no_grad():  # weights away from their init
                for p in model.parameters():
                    p.add_(torch.randn_like(p) * 0.1)
            if norm in ("group_norm", "group_norm_nhwc"):
                xs = [torch.randn(4, 320, 32, 32, device="cuda", dtype=dtype)]
                if norm == "group_norm_nhwc":
                    model = model.to(memory_format=torch.channels_last)
                    xs = [xs[0].to(memory_format=torch.channels_last)]
            else:
                xs = [torch.randn(8, 512, HIDDEN, device="cuda", dtype=dtype)]
            if norm == "adaln":  # the conditioning, [B, hidden]
                xs.append(torch.randn(8, HIDDEN, device="cuda", dtype=dtype))
            data.append((name, dtype, routed, model, xs, run(model, xs)))
    if args.inject == "empty":  # self-check: compare nothing
        data = []
    # Compile every graph here (a cached one would skip the pass that
    # counts the routed nodes).
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    routing = nt.enable_compile_routing()
    remarks = 0
    checks = Checks("compile_routing_check", expected=2 * len(data))
    errors = Worst("compile_routing_check")
    for name, dtype, routed, model, xs, want in data:
        compiled_model = copy.deepcopy(model)
        for p in compiled_model.parameters():
            p.grad = None
        torch._dynamo.reset()
        def rewritten():
            return routing.regions
        replaced, launches = rewritten(), nt.launches
        got = run(torch.compile(compiled_model), xs, compiled_model)
        replaced, launches = rewritten() - replaced, nt.launches - launches
        for r in routing.remarks[remarks:]:
            print(f"  remark: {r}")
        remarks = len(routing.remarks)
        if args.inject == "nan":  # after our kernels ran
            poison(got["input"])
        # NaN counts as the worst (not max's NaN-dropping order).
        errs = [(rel_l2(got[k], want[k]), k) for k in want]
        bad = worst(errs, key=lambda e: e[0])
        label = f"{name} {str(dtype).split('.')[-1]}"
        errors.add(dtype, bad[0])
        tol = TOL_CONV if name.startswith("GroupNorm") else TOL
        ok = checks.within(f"{label} gradients ({bad[1]})", bad[0],
                           tol[dtype])
        ok &= checks.require(f"{label} routing", replaced >= 1 and
                             launches >= 1 if routed else replaced == 0,
                             f"{replaced} regions routed, {launches} "
                             "launches")
        print(f"{'PASS' if ok else 'FAIL'} {name:14} "
              f"{str(dtype).split('.')[-1]:9} regions routed {replaced}, our "
              f"launches {launches}, worst gradient {bad[0]:.1e} "
              f"({bad[1]})", flush=True)
    errors.print()
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
