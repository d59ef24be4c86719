#!/usr/bin/env python3
"""Whole training steps of a LLaMA-style decoder stack with torch's norms
against norm_opt.torch's (issue 30 item 2).

The model: `--layers` decoder layers of hidden H (bf16): x -> norm ->
attention (q, k, v, o projections; scaled_dot_product_attention, causal;
heads of 128) -> residual -> norm -> gated MLP (SiLU(gate) * up -> down;
intermediate 8H/3 rounded to 256) -> residual; a final norm; loss = mean
square of the output. Two norms per layer are RMSNorm (torch.nn.RMSNorm or
norm_opt.torch.RMSNorm), or LayerNorm with `--norm layer`. One AdamW step
per iteration on batch x seq tokens. Both models start from the same
weights.

For each mode (eager, torch.compile default, torch.compile
mode="reduce-overhead") it times the step (median over --steps after a
warm-up) with torch's norms and with ours, and from a profile of one eager
step of each it reports the share of GPU time in the norm backward
(kernels whose names hold "norm" and one of "backward", "bwd", "grad",
"gamma": torch's layer_norm_grad_input / GammaBeta kernels, our
*_norm_backward_* ones).

  PYTHONPATH=python NORM_OPT_LIBRARY_PATH=.carry/norm_opt_libs \\
      python3 bench/train_step.py --hidden 2048 [--norm rms|layer]
      [--layers 2] [--batch 4] [--seq 1024] [--modes eager,default,reduce-overhead]
      [--route]   (also torch's norms under enable_compile_routing())
"""

import argparse
import copy
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import norm_opt.torch as nt


class Layer(nn.Module):
    def __init__(self, hidden, norm):
        super().__init__()
        inter = (8 * hidden // 3 + 255) // 256 * 256
        self.heads = hidden // 128
        self.n1, self.n2 = norm(hidden), norm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.o = nn.Linear(hidden, hidden, bias=False)
        self.gate_up = nn.Linear(hidden, 2 * inter, bias=False)
        self.down = nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, s, 3, self.heads,
                                            128).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2),
                                           k.transpose(1, 2),
                                           v.transpose(1, 2), is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, h))
        gate, up = self.gate_up(self.n2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class Model(nn.Module):
    def __init__(self, hidden, layers, norm):
        super().__init__()
        self.layers = nn.ModuleList(Layer(hidden, norm) for _ in range(layers))
        self.final = norm(hidden)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.final(x)


def norm_classes(kind):
    if kind == "rms":
        return torch.nn.RMSNorm, nt.RMSNorm
    return torch.nn.LayerNorm, nt.LayerNorm


def step_fn(model, opt):
    def step(x):
        opt.zero_grad(set_to_none=True)
        loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        return loss
    return step


def time_steps(step, x, steps):
    for _ in range(5):  # warm-up (compiles, captures)
        step(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step(x)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def norm_backward_share(step, x):
    """GPU time in norm backward kernels over all GPU time, one eager step."""
    step(x)
    torch.cuda.synchronize()
    with torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        step(x)
        torch.cuda.synchronize()
    total = norm = 0.0
    for e in prof.key_averages():
        t = e.device_time_total
        total += t
        name = e.key.lower()
        if "norm" in name and any(w in name for w in (
                "backward", "bwd", "grad", "gamma")):
            norm += t
    return norm / total if total else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--norm", choices=["rms", "layer"], default="rms")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--modes", default="eager,default,reduce-overhead")
    ap.add_argument("--route", action="store_true",
                    help="also torch's norms compiled with "
                         "norm_opt.torch.enable_compile_routing() (after the "
                         "other runs: the routing stays on)")
    a = ap.parse_args()
    torch.manual_seed(0)
    theirs_cls, ours_cls = norm_classes(a.norm)
    base = Model(a.hidden, a.layers, theirs_cls).cuda().to(torch.bfloat16)
    x = torch.randn(a.batch, a.seq, a.hidden, device="cuda",
                    dtype=torch.bfloat16)
    nt.preload([a.hidden], dtypes=(torch.bfloat16,),
               kinds=("rms" if a.norm == "rms" else "layer",))
    rows = []
    share = {}
    def timed(mode, cls):
        model = Model(a.hidden, a.layers, cls).cuda().to(torch.bfloat16)
        model.load_state_dict(copy.deepcopy(base.state_dict()))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        step = step_fn(model, opt)
        if mode != "eager":
            step = torch.compile(step,
                                 mode=None if mode == "default" else mode)
        elif cls not in share:
            share[cls] = norm_backward_share(step, x)
        t = time_steps(step, x, a.steps)
        del model, opt, step
        torch._dynamo.reset()
        torch.cuda.empty_cache()
        return t

    modes = a.modes.split(",")
    for mode in modes:
        rows.append([mode, timed(mode, theirs_cls), timed(mode, ours_cls)])
    if a.route:
        nt.enable_compile_routing()
        for row in rows:
            row.append(timed(row[0], theirs_cls) if row[0] != "eager"
                       else None)
    tokens = a.batch * a.seq
    names = {theirs_cls: "torch", ours_cls: "ours"}
    print(f"{a.norm}norm decoder, hidden {a.hidden}, {a.layers} layers, "
          f"{tokens} tokens, bf16; norm backward share of GPU time in an "
          "eager step: " + ", ".join(f"{names[k]} {v:.1%}"
                                     for k, v in share.items()))
    print(f"{'mode':16} {'torch ms':>9} {'ours ms':>8} {'torch/ours':>10}"
          + (f" {'routed ms':>10} {'torch/routed':>12}" if a.route else ""))
    for row in rows:
        mode, t, o = row[:3]
        line = f"{mode:16} {t:9.2f} {o:8.2f} {t / o:10.3f}"
        if a.route:
            r = row[3]
            line += (f" {r:10.2f} {t / r:12.3f}" if r is not None
                     else f" {'-':>10} {'-':>12}")
        print(line)


if __name__ == "__main__":
    main()
