#!/usr/bin/env python3
#===- test/gpu/train_check.py - norm_opt.torch in training, against torch -===#
"""Trains a small transformer-style model (token embedding, blocks of
LayerNorm -> attention and RMSNorm -> MLP, a final LayerNorm, a vocabulary
head) for --steps steps with norm_opt.torch's LayerNorm / RMSNorm (torch's
forward, our backward kernels) and with torch's, and compares them step by
step, in eager mode, under torch.compile(fullgraph=True) and under
torch.compile(mode="reduce-overhead") (CUDA graphs):

  lockstep  every step both models start from the same parameters and
            batch: the losses must be equal (same forward) and every
            gradient close (relative L2 error, per parameter);
  free      both train independently from one initialisation: the loss
            curves must stay close, and our model's loss must be finite
            and fall.

Also: torch.library.opcheck on both custom ops, and one direct comparison
of each op's outputs with torch's autograd. Exit status 0 when every check
passes (and at least one ran); one line per check, the worst errors per
dtype last (WORST lines). --inject nan|empty: self-checks that must fail
(test/gpu/suite.py runs them).

On the GPU machine (no LLVM there) the kernels are compiled on first use
by the wheel's bundled norm-opt (scripts/dev.sh wheel; pip install the
wheel), or come from $NORM_OPT_LIBRARY_PATH where it is set (compiled
ahead of time with `python3 -m norm_opt.kernels --out DIR ...`). Run with
the installed wheel:
  python3 test/gpu/train_check.py [--steps 50] [--modes eager,compile,graphs]
      [--dtypes f32,bf16]
or from this checkout's python/ with libraries compiled ahead of time:
  PYTHONPATH=python NORM_OPT_LIBRARY_PATH=DIR python3 test/gpu/train_check.py
"""

import argparse
import copy
import math
import os
import sys
import time

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import norm_opt.torch as nt  # noqa: E402
from harness import Worst, add_inject_option, poison  # noqa: E402
from norm_opt.checks import Checks  # noqa: E402
from norm_opt.reference import rel_l2, worst  # noqa: E402

HIDDEN, HEADS, BLOCKS, VOCAB, BATCH, SEQ = 512, 8, 3, 1024, 8, 128
# Whole-model bounds against torch (not one kernel result against float64:
# not harness.TOLERANCE). Relative L2 of gradients per step (lockstep;
# measured worst 8.4e-7 f32, 1.07e-2 bf16), relative loss difference
# (free-running), absolute loss difference in lockstep (the same forward
# but for compiled fusion: measured 4.8e-7 f32, 2.6e-4 bf16; 10-20x here).
GRAD_TOL = {torch.float32: 1e-4, torch.bfloat16: 3e-2}
FREE_TOL = {torch.float32: 1e-3, torch.bfloat16: 3e-2}
LOSS_TOL = {torch.float32: 1e-5, torch.bfloat16: 3e-3}


class Block(nn.Module):
    def __init__(self, layer_norm, rms_norm):
        super().__init__()
        self.ln = layer_norm(HIDDEN)
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.proj = nn.Linear(HIDDEN, HIDDEN)
        self.rms = rms_norm(HIDDEN)
        self.up = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.down = nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(self.ln(x)).split(HIDDEN, dim=-1)
        shape = (b, s, HEADS, HIDDEN // HEADS)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, HIDDEN))
        return x + self.down(F.gelu(self.up(self.rms(x))))


class Model(nn.Module):
    def __init__(self, layer_norm, rms_norm):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.blocks = nn.ModuleList(Block(layer_norm, rms_norm)
                                    for _ in range(BLOCKS))
        self.final = layer_norm(HIDDEN)
        self.head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens, targets):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.final(x)).float()
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


def models(dtype, seed):
    torch.manual_seed(seed)
    ref = Model(nn.LayerNorm, nn.RMSNorm)
    with torch.no_grad():  # norm parameters away from 1 / 0
        for name, p in ref.named_parameters():
            if any(k in name for k in ("ln.", "rms.", "final.")):
                p.add_(0.1 * torch.randn_like(p))
    ref = ref.to("cuda", dtype)
    ours = Model(nt.LayerNorm, nt.RMSNorm).to("cuda", dtype)
    ours.load_state_dict(ref.state_dict())
    return ref, ours


def batches(steps, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    for _ in range(steps):
        t = torch.randint(0, VOCAB, (BATCH, SEQ + 1), device="cuda",
                          generator=g)
        yield t[:, :-1].contiguous(), t[:, 1:].contiguous()


def wrap(model, mode):
    if mode == "eager":
        return model
    if mode == "compile":
        return torch.compile(model, fullgraph=True)
    return torch.compile(model, mode="reduce-overhead", fullgraph=True)


class Results:
    """Checks (an empty run fails; NaN-safe), the worst errors per dtype
    and --inject."""

    def __init__(self, inject=None):
        self.checks = Checks("train_check")
        self.ops = Worst("train_check ops vs torch autograd")
        self.grads = Worst("train_check lockstep gradients")
        self.inject = inject

    @property
    def failed(self):
        return len(self.checks.failures)

    def check(self, ok, what):
        print(f"{'PASS' if ok else 'FAIL'} {what}", flush=True)
        self.checks.require(what, ok)

    def within(self, errs_and_bounds, what):
        """Passes when every (error, bound) is within: NaN fails."""
        ok = all([self.checks.within(what, e, b) for e, b in errs_and_bounds])
        print(f"{'PASS' if ok else 'FAIL'} {what}", flush=True)
        return ok


def lockstep(mode, dtype, steps, results):
    ref, ours = models(dtype, 1)
    run = wrap(ours, mode)
    opt = torch.optim.AdamW(ref.parameters(), lr=1e-3)
    bad, bad_at, loss_diff, norm_bad = 0.0, "", 0.0, 0.0
    nt.launches = 0
    for step, (x, y) in enumerate(batches(steps, 2)):
        with torch.no_grad():
            for p, q in zip(ours.parameters(), ref.parameters()):
                p.copy_(q)
        ref.zero_grad(set_to_none=True)
        ours.zero_grad(set_to_none=True)
        loss_ref = ref(x, y)
        loss_ref.backward()
        loss = run(x, y)
        loss.backward()
        if results.inject == "nan" and step == 0:  # after our backward
            poison(ours.final.weight.grad)
        loss_diff = worst((loss_diff, abs(loss.item() - loss_ref.item())))
        for (name, p), q in zip(ours.named_parameters(), ref.parameters()):
            e = rel_l2(p.grad, q.grad)
            if any(k in name for k in ("ln.", "rms.", "final.")):
                norm_bad = worst((norm_bad, e))
            if bad == bad and not e <= bad:  # a NaN is the worst, kept
                bad, bad_at = e, f"{name} at step {step}"
        opt.step()
    torch.cuda.synchronize()
    tag = f"lockstep {mode} {str(dtype)[6:]}"
    results.grads.add(dtype, bad)
    results.within([(bad, GRAD_TOL[dtype]), (loss_diff, LOSS_TOL[dtype])],
                   f"{tag}: {steps} steps, worst gradient rel L2 {bad:.2e} "
                   f"({bad_at}), norm weights/biases {norm_bad:.2e} (bound "
                   f"{GRAD_TOL[dtype]:.0e}), loss |diff| {loss_diff:.2e} "
                   f"(bound {LOSS_TOL[dtype]:.0e})")
    if mode != "graphs":
        results.check(nt.launches >= steps * (2 * BLOCKS + 1),
                      f"{tag}: our kernels ran ({nt.launches} launches)")


def free_running(mode, dtype, steps, results):
    ref, ours = models(dtype, 3)
    run = wrap(ours, mode)
    opt_ref = torch.optim.AdamW(ref.parameters(), lr=1e-3)
    opt = torch.optim.AdamW(ours.parameters(), lr=1e-3)
    bad, first, last = 0.0, None, None
    for x, y in batches(steps, 4):
        for model, o in ((ref, opt_ref), (run, opt)):
            o.zero_grad(set_to_none=True)
            loss = model(x, y)
            loss.backward()
            o.step()
            if model is ref:
                l_ref = loss.item()
            else:
                l_ours = loss.item()
        bad = worst((bad, abs(l_ours - l_ref) / abs(l_ref)))
        first = first or (l_ref, l_ours)
        last = (l_ref, l_ours)
    tag = f"free {mode} {str(dtype)[6:]}"
    results.within([(bad, FREE_TOL[dtype])],
                   f"{tag}: loss {first[0]:.4f} -> {last[0]:.4f} (torch) / "
                   f"{first[1]:.4f} -> {last[1]:.4f} (ours), worst rel diff "
                   f"{bad:.2e} (bound {FREE_TOL[dtype]:.0e})")
    # Our model trains: its loss is finite and falls (NaN fails both).
    results.check(math.isfinite(last[1]) and last[1] < first[1],
                  f"{tag}: our loss falls, {first[1]:.4f} -> {last[1]:.4f}")


def op_checks(dtype, results):
    torch.manual_seed(5)
    x = torch.randn(4, 33, HIDDEN, device="cuda", dtype=dtype)
    w = 1 + 0.1 * torch.randn(HIDDEN, device="cuda", dtype=dtype)
    b = 0.1 * torch.randn(HIDDEN, device="cuda", dtype=dtype)
    dy = torch.randn_like(x)
    # LayerNorm: against autograd through torch's layer_norm.
    xs, ws, bs = (t.detach().requires_grad_() for t in (x, w, b))
    F.layer_norm(xs, (HIDDEN,), ws, bs, 1e-5).backward(dy)
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, [HIDDEN], w, b, 1e-5)
    dx, dw, db = torch.ops.norm_opt.layer_norm_backward(dy, x, mean, rstd, w)
    if results.inject == "nan":  # after our kernel ran
        poison(dx)
    errs = (rel_l2(dx, xs.grad), rel_l2(dw, ws.grad), rel_l2(db, bs.grad))
    # Against torch's autograd, whose bf16 rounding is in the difference.
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    for e in errs:
        results.ops.add(dtype, e)
    results.within([(e, tol) for e in errs], f"op layer_norm_backward "
                   f"{str(dtype)[6:]}: rel L2 dx/dw/db " +
                   "/".join(f"{e:.1e}" for e in errs))
    # RMSNorm.
    xs, ws = (t.detach().requires_grad_() for t in (x, w))
    eps = torch.finfo(dtype).eps
    F.rms_norm(xs, (HIDDEN,), ws, eps).backward(dy)
    rstd = torch.rsqrt(x.float().pow(2).mean(-1) + eps)
    dx, dw = torch.ops.norm_opt.rms_norm_backward(dy, x, rstd, w)
    errs = (rel_l2(dx, xs.grad), rel_l2(dw, ws.grad))
    for e in errs:
        results.ops.add(dtype, e)
    results.within([(e, tol) for e in errs], f"op rms_norm_backward "
                   f"{str(dtype)[6:]}: rel L2 dx/dw " +
                   "/".join(f"{e:.1e}" for e in errs))
    # Schema, fake (meta) functions, AOT dispatch.
    for op, args in ((torch.ops.norm_opt.layer_norm_backward.default,
                      (dy, x, mean, rstd, w)),
                     (torch.ops.norm_opt.rms_norm_backward.default,
                      (dy, x, rstd, w))):
        try:
            torch.library.opcheck(op, args)
            results.check(True, f"opcheck {op} {str(dtype)[6:]}")
        except Exception as e:  # report, go on
            results.check(False, f"opcheck {op} {str(dtype)[6:]}: {e}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--modes", default="eager,compile,graphs")
    p.add_argument("--dtypes", default="f32,bf16")
    add_inject_option(p)
    args = p.parse_args()
    dtypes = {"f32": torch.float32, "bf16": torch.bfloat16}
    results = Results(args.inject)
    if args.inject == "empty":  # self-check: run and compare nothing
        args.dtypes = ""
    import norm_opt
    info = norm_opt.info()
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, "
          f"chip {nt.chip_of(torch.device('cuda'))}, libraries from "
          f"{info['library_path'] or 'nowhere ahead of time'}, else compiled "
          f"by {info['norm_opt']} ({info['norm_opt_origin']}) into "
          f"{info['cache']}", flush=True)
    start = time.time()
    for name in filter(None, args.dtypes.split(",")):
        dtype = dtypes[name]
        op_checks(dtype, results)
        for mode in args.modes.split(","):
            try:
                counters = torch._dynamo.utils.counters
                counters.clear()
                lockstep(mode, dtype, args.steps, results)
                free_running(mode, dtype, args.steps, results)
                if mode == "graphs":  # not silently run without graphs
                    skips = dict(counters["inductor"])
                    skips = {k: v for k, v in skips.items()
                             if "cudagraph_skip" in k and v}
                    results.check(not skips, f"graphs {name}: CUDA graphs "
                                  f"used (skips: {skips or 'none'})")
            except Exception as e:  # a graph break, a capture error...
                results.check(False, f"{mode} {name}: {type(e).__name__}: "
                              f"{e}")
            torch._dynamo.reset()
    print(f"{'OK' if not results.failed else 'FAILED'}: {results.failed} "
          f"failed, {time.time() - start:.0f} s", flush=True)
    results.ops.print()
    results.grads.print()
    return results.checks.finish()


if __name__ == "__main__":
    sys.exit(main())
