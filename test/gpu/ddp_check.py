#!/usr/bin/env python3
#===- test/gpu/ddp_check.py - norm_opt.torch under DistributedDataParallel ===#
"""Data-parallel training with norm_opt.torch's LayerNorm / RMSNorm on two
GPUs (torch.distributed, NCCL), against one GPU (issue 27 item 5).

A small residual MLP (token embedding, blocks of LayerNorm -> MLP and
RMSNorm -> MLP, a head) is built from one seed on every process. For each
dtype (f32, bf16):

  single    rank 0 alone, the whole global batch: one step's gradients;
  ddp       both ranks, half the batch each, under DistributedDataParallel
            (the all-reduce averages dW/dB of our kernels with the rest):
            every gradient must match `single` within the dtype's
            tolerance (the halves' means average to the whole batch's);
  repeat    the DDP step again from the same initialisation: every
            gradient bitwise identical to the first run, on every rank;
  train     20 AdamW steps under DDP and on one GPU from one
            initialisation: the loss curves must stay close;
  sp        a sequence-parallel LayerNorm backward: each rank holds a slice
            of the rows (8192 of 16384, hidden 512) and runs our kernel on
            it; dW/dB of the ranks are summed by NCCL (all_reduce) and dx
            gathered. Against float64 over all rows: dx, dW, dB within the
            dtype's tolerance; dW/dB bitwise equal over two runs and across
            ranks; each rank's dx bitwise equal to the one-GPU kernel's rows.

Self-contained on the GPU machine (no norm-opt there): the kernels come from
.carry/norm_opt_libs, built on the build machine with
  NORM_OPT=build/bin/norm-opt PYTHONPATH=python python3 -m norm_opt.kernels \\
      --out .carry/norm_opt_libs --chip sm_90a --kind layer,rms \\
      --hidden 512 --dtype f32,bf16
Run from the repo root on a machine with 2 GPUs (device kind
nvidia-h100-x2; NVLink multicast left off):
  PYTHONPATH=python python3 test/gpu/ddp_check.py [--steps 20]
      [--inject nan|empty]
One line per check, the worst errors per dtype last (WORST lines); exit
status 0 when every check passes and at least one ran. --inject: self-checks
that must fail (test/gpu/suite.py runs them).
"""

import argparse
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
os.environ.setdefault("NORM_OPT_LIBRARY_PATH",
                      str(ROOT / ".carry" / "norm_opt_libs"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

import norm_opt.torch as nt  # noqa: E402
from harness import Worst, add_inject_option, poison, tol  # noqa: E402
from norm_opt import reference as float64  # noqa: E402
from norm_opt.checks import Checks, within  # noqa: E402
from norm_opt.reference import rel_l2, worst  # noqa: E402

HIDDEN, VOCAB, BLOCKS, BATCH, SEQ = 512, 1024, 2, 8, 64
# Whole-model gradients and losses against one GPU (not one kernel result
# against float64: not harness.TOLERANCE). Measured worst: gradients 6.7e-7
# (f32), 3.2e-3 (bf16); losses 6.8e-8, 3.6e-5.
GRAD_TOL = {torch.float32: 1e-5, torch.bfloat16: 2e-2}
LOSS_TOL = {torch.float32: 1e-4, torch.bfloat16: 2e-2}


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln, self.rms = nt.LayerNorm(HIDDEN), nt.RMSNorm(HIDDEN)
        self.up1, self.down1 = nn.Linear(HIDDEN, 2 * HIDDEN), nn.Linear(
            2 * HIDDEN, HIDDEN)
        self.up2, self.down2 = nn.Linear(HIDDEN, 2 * HIDDEN), nn.Linear(
            2 * HIDDEN, HIDDEN)

    def forward(self, h):
        h = h + self.down1(F.gelu(self.up1(self.ln(h))))
        return h + self.down2(F.gelu(self.up2(self.rms(h))))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.blocks = nn.ModuleList(Block() for _ in range(BLOCKS))
        self.norm = nt.LayerNorm(HIDDEN)
        self.head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens):
        h = self.embed(tokens)
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h))


def make(dtype, device):
    torch.manual_seed(1234)
    model = Model().to(device=device, dtype=dtype)
    # Norm weights away from 1 (and biases from 0), so dW/dB matter.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.LayerNorm, nn.RMSNorm)):
                m.weight.uniform_(0.5, 1.5)
                if getattr(m, "bias", None) is not None:
                    m.bias.uniform_(-0.5, 0.5)
    return model


def batch(step, device):
    g = torch.Generator().manual_seed(100 + step)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g)
    return tokens[:, :-1].to(device), tokens[:, 1:].to(device)


def loss_of(model, inputs, targets):
    logits = model(inputs)
    return F.cross_entropy(logits.float().reshape(-1, VOCAB),
                           targets.reshape(-1))


def grads(model):
    return {n: p.grad.detach().clone() for n, p in model.named_parameters()}


def ddp_step(model, rank, world, inputs, targets):
    half = BATCH // world
    sl = slice(rank * half, (rank + 1) * half)
    model.zero_grad(set_to_none=True)
    loss_of(model, inputs[sl], targets[sl]).backward()
    return grads(model.module)


SP_ROWS = 16384


def sequence_parallel(rank, world, dtype, device, inject=None,
                      errors=None):
    """The sp checks: (ok, text) pairs; dx, dW, dB against float64 with
    harness.py's tolerances (their errors into `errors`, a Worst)."""
    name = str(dtype).split(".")[-1]
    gen = torch.Generator(device=device).manual_seed(1234)
    x = torch.randn(SP_ROWS, HIDDEN, generator=gen, device=device) * 2 + 0.5
    dy = torch.randn(SP_ROWS, HIDDEN, generator=gen, device=device)
    w = torch.randn(HIDDEN, generator=gen, device=device) * 0.5 + 1
    x, dy, w = x.to(dtype), dy.to(dtype), w.to(dtype)
    xf = x.double()
    mean = xf.mean(-1)
    rstd = (xf.var(-1, unbiased=False) + 1e-5).rsqrt()
    # float64 over all rows, from the float64 statistics: the reference.
    ref = float64.backward("layer", x, dy, rstd, mean, w)
    mean, rstd = mean.float(), rstd.float()
    part = SP_ROWS // world
    sl = slice(rank * part, (rank + 1) * part)
    one_dx, _, _ = torch.ops.norm_opt.layer_norm_backward(dy, x, mean, rstd, w)
    runs = []
    for _ in range(2):
        dx, dw, db = torch.ops.norm_opt.layer_norm_backward(
            dy[sl].contiguous(), x[sl].contiguous(), mean[sl].contiguous(),
            rstd[sl].contiguous(), w)
        dw, db = dw.float(), db.float()  # the all-reduce sums in f32
        dist.all_reduce(dw)
        dist.all_reduce(db)
        gathered = [torch.empty_like(dx) for _ in range(world)]
        dist.all_gather(gathered, dx)
        runs.append((torch.cat(gathered), dw, db))
    dx, dw, db = runs[0]
    if inject == "nan":  # after our kernel ran
        poison(dx)
    errs = [rel_l2(dx, ref["dx"]), rel_l2(dw, ref["dw"]),
            rel_l2(db, ref["db"])]
    for e in errs:  # the stored type of each is dtype (dW / dB summed in f32)
        if errors is not None:
            errors.add(dtype, e)
    out = [(all([within(e, tol(dtype)) for e in errs]),
            f"{name} rank {rank}: sequence-parallel LayerNorm ({world} x "
            f"{part} rows): dx {errs[0]:.1e}, dW {errs[1]:.1e}, dB "
            f"{errs[2]:.1e} vs float64 over {SP_ROWS} rows")]
    out.append((all(torch.equal(a, b) for a, b in zip(runs[0], runs[1])),
                f"{name} rank {rank}: sequence-parallel dx/dW/dB bitwise equal "
                "over two runs"))
    flat = torch.cat([dw, db])
    other = flat.clone()
    dist.broadcast(other, src=0)
    out.append((torch.equal(flat, other),
                f"{name} rank {rank}: sequence-parallel dW/dB bitwise equal "
                "across ranks"))
    out.append((torch.equal(runs[0][0][sl], one_dx[sl]),
                f"{name} rank {rank}: its dx rows bitwise equal to the "
                "one-GPU call's"))
    return out


def worker(rank, world, args, queue):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29517"
    # Bitwise-repeatable steps need torch's deterministic kernels too (the
    # embedding's backward, cuBLAS's workspace).
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    device = torch.device("cuda", rank)
    torch.cuda.set_device(device)
    checks = Checks(f"ddp_check rank {rank}")
    grad_errors = Worst("ddp_check DDP gradients vs one GPU")
    sp_errors = Worst("ddp_check sequence parallel vs float64")
    # --inject empty: compare nothing (the run must fail).
    dtypes = [] if args.inject == "empty" else [torch.float32,
                                                 torch.bfloat16]

    def report(ok, text):
        checks.require(text, ok)
        if rank == 0:
            print(f"{'PASS' if ok else 'FAIL'} {text}", flush=True)

    for dtype in dtypes:
        name = str(dtype).split(".")[-1]
        inputs, targets = batch(0, device)
        # single: one process, the whole batch.
        single = make(dtype, device)
        loss_of(single, inputs, targets).backward()
        want = grads(single)
        # ddp, twice from the same initialisation.
        runs = []
        for _ in range(2):
            model = DDP(make(dtype, device), device_ids=[rank])
            runs.append(ddp_step(model, rank, world, inputs, targets))
            del model
        if args.inject == "nan":  # after our kernels ran
            poison(runs[0]["norm.weight"])
        errs = {n: rel_l2(runs[0][n], want[n]) for n in want}
        bad = worst(((e, n) for n, e in errs.items()), key=lambda p: p[0])
        norm_bad = worst(((e, n) for n, e in errs.items()
                          if ".ln." in n or ".rms." in n
                          or n.startswith("norm.")), key=lambda p: p[0])
        grad_errors.add(dtype, bad[0])
        report(within(bad[0], GRAD_TOL[dtype]),
               f"{name} rank {rank}: DDP gradients vs one GPU, worst "
               f"{bad[0]:.1e} ({bad[1]}); norm dW/dB worst "
               f"{norm_bad[0]:.1e} ({norm_bad[1]})")
        same = all(torch.equal(runs[0][n], runs[1][n]) for n in want)
        report(same, f"{name} rank {rank}: DDP gradients bitwise equal over "
               "two runs")
        # The ranks hold the same averaged gradients.
        flat = torch.cat([runs[0][n].float().flatten() for n in sorted(want)])
        other = flat.clone()
        dist.broadcast(other, src=0)
        report(torch.equal(flat, other),
               f"{name} rank {rank}: gradients bitwise equal across ranks")
        # train: DDP against one GPU.
        model = DDP(make(dtype, device), device_ids=[rank])
        single = make(dtype, device)
        opt_d = torch.optim.AdamW(model.parameters(), lr=1e-3)
        opt_s = torch.optim.AdamW(single.parameters(), lr=1e-3)
        worst_loss = 0.0
        for step in range(args.steps):
            inputs, targets = batch(step + 1, device)
            half = BATCH // world
            sl = slice(rank * half, (rank + 1) * half)
            opt_d.zero_grad(set_to_none=True)
            ld = loss_of(model, inputs[sl], targets[sl])
            ld.backward()
            opt_d.step()
            opt_s.zero_grad(set_to_none=True)
            ls = loss_of(single, inputs, targets)
            ls.backward()
            opt_s.step()
            total = ld.detach().clone()
            dist.all_reduce(total)
            total /= world
            worst_loss = worst((worst_loss, abs(total.item() - ls.item())
                                / abs(ls.item())))
        report(within(worst_loss, LOSS_TOL[dtype]),
               f"{name} rank {rank}: {args.steps} AdamW steps, DDP loss vs "
               f"one GPU within {worst_loss:.1e} (last {ls.item():.4f})")
    for dtype in dtypes:
        for ok, text in sequence_parallel(rank, world, dtype, device,
                                          args.inject, sp_errors):
            report(ok, text)
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        grad_errors.print()
        sp_errors.print()
    problems = checks.problems()  # failed checks, or none ran
    for why in problems:
        print(f"FAIL ddp_check rank {rank}: {why}", flush=True)
    queue.put(len(problems))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=20)
    add_inject_option(ap)
    args = ap.parse_args()
    world = torch.cuda.device_count()
    if world < 2:
        print(f"needs 2 GPUs, found {world}")
        return 2
    world = 2
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.spawn(worker, args=(world, args, queue), nprocs=world, join=True)
    failed = sum(queue.get() for _ in range(world))
    print("ALL PASSED" if not failed else f"FAILED: {failed} checks")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
