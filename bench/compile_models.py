#!/usr/bin/env python3
#===- bench/compile_models.py - real models under the torch.compile route -===#
"""Issue 40's model table: unmodified models (Hugging Face Llama, Gemma,
GPT-2, OLMo, ViT; torchvision ConvNeXt-T), bf16, randomly initialised,
one training step (forward + backward) under torch.compile, without and
with norm_opt.torch.enable_compile_routing(). Per model:

  norms     the norm modules (each has one backward)
  fused     regions the recognition pass fused and the route replaced
  launched  our launches in one step (norm_opt.torch.launches)
  err       the worst relative L2 error over the parameter gradients, of
            eager bf16, Inductor and Inductor + route, against the model
            in fp32 eager on the same weights and inputs (NaN: inf)
  step      GPU time per step: the profiler's kernel time per step, the
            median of 3 rounds of 5 steps, the two variants' rounds
            interleaved
  norm      the kernel time of our launches per step (route)
  compile   the first step's wall time (compile included), without and
            with the route; NORM_OPT_CACHE_DIR is fresh per run

LMs: 2 layers, hidden 2048, 8 x 1024 tokens. ViT-B/16 dims (2 layers),
ConvNeXt-T whole, 32 images of 224 x 224 (channels-last for ConvNeXt).
unet: Stable Diffusion's UNet at its 64 x 64 stage, 4 ResNet blocks (two
GroupNorm(32, 320) each, SiLU, 3x3 convs; no time embedding), batch 8.

  PYTHONPATH=python NORM_OPT=... python3 bench/compile_models.py \\
      [--models llama,gemma,gpt2,olmo,vit,convnext,unet] [--json out.json]
"""

import argparse
import copy
import json
import math
import os
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

import norm_opt.torch as nt
from norm_opt.reference import rel_l2

DTYPE = torch.bfloat16


def lm(name):
    import transformers as tf
    common = dict(hidden_size=2048, num_hidden_layers=2,
                  num_attention_heads=16, max_position_embeddings=1024)
    if name == "llama":
        cfg = tf.LlamaConfig(intermediate_size=5632, vocab_size=32000,
                             **common)
        return tf.LlamaForCausalLM(cfg)
    if name == "gemma":
        cfg = tf.GemmaConfig(intermediate_size=5632, vocab_size=32000,
                             num_key_value_heads=16, head_dim=128, **common)
        return tf.GemmaForCausalLM(cfg)
    if name == "olmo":
        cfg = tf.OlmoConfig(intermediate_size=5632, vocab_size=50304,
                            **common)
        return tf.OlmoForCausalLM(cfg)
    if name == "gpt2":
        cfg = tf.GPT2Config(n_embd=2048, n_layer=2, n_head=16,
                            n_positions=1024, vocab_size=50257,
                            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        return tf.GPT2LMHeadModel(cfg)
    raise ValueError(name)


def build(name):
    """(model, inputs, loss(model, inputs))."""
    g = torch.Generator(device="cuda").manual_seed(0)
    if name in ("llama", "gemma", "olmo", "gpt2"):
        model = lm(name)
        vocab = model.config.vocab_size
        ids = torch.randint(0, vocab, (8, 1024), device="cuda", generator=g)

        def loss(m, ids):
            logits = m(input_ids=ids).logits.float()
            return F.cross_entropy(logits[:, :-1].reshape(-1, vocab),
                                   ids[:, 1:].reshape(-1))
        return model, ids, loss
    images = torch.randn(32, 3, 224, 224, device="cuda", generator=g)
    labels = torch.randint(0, 1000, (32,), device="cuda", generator=g)
    if name == "vit":
        import transformers as tf
        model = tf.ViTForImageClassification(tf.ViTConfig(
            num_hidden_layers=2, num_labels=1000))

        def loss(m, x):
            return F.cross_entropy(m(pixel_values=x).logits.float(), labels)
        return model, images, loss
    if name == "unet":  # SD's 64 x 64 stage: 4 ResNet blocks, 320 ch
        from norm_opt.testing import ResBlock
        model = torch.nn.Sequential(*[ResBlock(320) for _ in range(4)])
        x = torch.randn(8, 320, 64, 64, device="cuda", generator=g)

        def loss(m, x):
            return m(x).float().square().mean()
        return model, x, loss
    if name == "convnext":
        import torchvision
        model = torchvision.models.convnext_tiny(stochastic_depth_prob=0.0)
        model = model.to(memory_format=torch.channels_last)
        images = images.to(memory_format=torch.channels_last)

        def loss(m, x):
            return F.cross_entropy(m(x).float(), labels)
        return model, images, loss
    raise ValueError(name)


def count_norms(model):
    return sum(1 for m in model.modules()
               if "Norm" in type(m).__name__ and not any(
                   "Norm" in type(c).__name__ for c in m.children()))


def grads(model, inputs, loss):
    for p in model.parameters():
        p.grad = None
    loss(model, inputs).backward()
    return {n: p.grad.detach().clone() for n, p in model.named_parameters()
            if p.grad is not None}


def grads_of(compiled, module, inputs, loss):
    """grads() of a compiled module, named as the module's parameters."""
    for p in module.parameters():
        p.grad = None
    loss(compiled, inputs).backward()
    return {n: p.grad.detach().clone() for n, p in module.named_parameters()
            if p.grad is not None}


def worst(got, want):
    """The worst relative L2 error over the parameters whose reference
    gradient is not negligible (>= 1e-3 of the largest one: a gradient of
    nearly zero, e.g. an unused position's embedding, has no relative
    error worth the name)."""
    out = 0.0
    scale = max(w.double().norm().item() for w in want.values())
    for k, w in want.items():
        if w.double().norm().item() < 1e-3 * scale:
            continue
        g = got.get(k)
        if g is None:
            return math.inf
        e = rel_l2(g, w)
        if not e <= out:  # NaN is the worst
            out = e if e == e else math.inf
    return out


def profile_round(fn, model, inputs, loss, our_prefix="norm_region",
                  steps=5):
    """(kernel ms per step, our kernels' ms per step, {kernel: [launches,
    us] per step}) over `steps` steps, from the profiler."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            fn(model, inputs, loss)
        torch.cuda.synchronize()
    total = ours = 0.0
    kernels = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            total += e.device_time
            if our_prefix in e.name:
                ours += e.device_time
            k = kernels.setdefault(e.name, [0, 0.0])
            k[0] += 1 / steps
            k[1] += e.device_time / steps
    return total / steps / 1e3, ours / steps / 1e3, kernels


def step_times(variants, inputs, loss):
    """Per variant (tag -> compiled): the median of ROUNDS rounds of 5
    steps, the variants' rounds interleaved (clocks drift over a run; run
    one after the other, the second variant's GEMMs measured 10-35 us
    slower)."""
    for compiled in variants.values():
        for _ in range(3):
            train_step(compiled, inputs, loss)
    torch.cuda.synchronize()
    rounds = {tag: [] for tag in variants}
    for _ in range(ROUNDS):
        for tag, compiled in variants.items():
            rounds[tag].append(profile_round(train_step, compiled, inputs,
                                             loss))
    out = {}
    for tag, rs in rounds.items():
        rs.sort(key=lambda r: r[0])
        out[tag] = rs[len(rs) // 2]
        if BREAKDOWN:
            print(f"  {tag}:")
            for name, (count, us) in sorted(
                    out[tag][2].items(), key=lambda kv: -kv[1][1])[:BREAKDOWN]:
                print(f"    {us:9.1f} us {round(count):3}x {name[:110]}")
    return out


class Compiled:
    """A module `m` called through a compiled `forward(m, ...)`."""

    def __init__(self, forward, m):
        self.forward, self.m = forward, m

    def __call__(self, *args, **kwargs):
        return self.forward(self.m, *args, **kwargs)

    def parameters(self):
        return self.m.parameters()


def own_forward(tag):
    """`f(m, *args) -> m(*args)` with a code object of its own: Dynamo
    caches compiled frames per code object, so each variant's compile
    stays in place beside the other's (torch.compile(m) twice would share
    one cache entry, the second variant reusing the first's graph)."""
    ns = {}
    exec(f"def forward_{tag}(m, *args, **kwargs):\n"
         f"    return m(*args, **kwargs)\n", ns)
    return ns[f"forward_{tag}"]


BREAKDOWN = 0
ROUNDS = 3
KERNELS = None  # {model: {variant: {kernel: [launches, us]}}} (--kernels)


def train_step(model, inputs, loss):
    for p in model.parameters():
        p.grad = None
    loss(model, inputs).backward()


def run_model(name, route):
    torch.manual_seed(0)
    model, inputs, loss = build(name)
    model = model.cuda()
    ref = copy.deepcopy(model).float()
    model = model.to(DTYPE)
    if name == "convnext":
        model = model.to(memory_format=torch.channels_last)
    # The fp32 reference: the same (bf16-rounded) weights in fp32.
    with torch.no_grad():
        for p, q in zip(ref.parameters(), model.parameters()):
            p.copy_(q.float())
    x32 = inputs.float() if inputs.is_floating_point() else inputs
    xin = inputs.to(DTYPE) if inputs.is_floating_point() else inputs
    if name == "convnext":
        xin = xin.contiguous(memory_format=torch.channels_last)
    want = grads(ref, x32, loss)
    del ref
    row = {"model": name, "norms": count_norms(model)}
    row["err_eager"] = worst(grads(model, xin, loss), want)
    from torch._inductor import config as inductor_config
    torch._dynamo.reset()
    variants, modules = {}, []
    for routed in (False, True):
        inductor_config.post_grad_custom_post_pass = (
            route if routed else route.before)
        tag = "route" if routed else "inductor"
        m = copy.deepcopy(model)
        compiled = Compiled(torch.compile(own_forward(tag)), m)
        regions, seconds = route.regions, route.seconds
        start = time.perf_counter()
        got = grads_of(compiled, m, xin, loss)
        torch.cuda.synchronize()
        row[f"err_{tag}"] = worst(got, want)
        row[f"compile_{tag}_s"] = time.perf_counter() - start
        before = nt.launches
        train_step(compiled, xin, loss)
        torch.cuda.synchronize()
        if routed:
            row["fused"] = route.regions - regions
            row["route_s"] = route.seconds - seconds
            row["launched"] = nt.launches - before
        elif nt.launches != before:
            raise RuntimeError("the Inductor variant launched our kernels")
        variants[tag] = compiled
        modules.append(m)
    for tag, (ms, ours, kernels) in step_times(variants, xin, loss).items():
        row[f"step_{tag}_ms"] = ms
        if tag == "route":
            row["norm_ms"] = ours
        if KERNELS is not None:
            KERNELS.setdefault(name, {})[tag] = kernels
    del variants, modules
    torch.cuda.empty_cache()
    inductor_config.post_grad_custom_post_pass = route
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="llama,gemma,gpt2,olmo,vit,convnext")
    p.add_argument("--json", default=None)
    p.add_argument("--remarks", action="store_true")
    p.add_argument("--breakdown", type=int, default=0,
                   help="print the N kernels with most time per variant")
    p.add_argument("--kernels", default=None,
                   help="write every kernel's launches and time per step, "
                        "per model and variant, to this JSON file")
    p.add_argument("--rounds", type=int, default=3,
                   help="rounds of 5 steps timed; the median round is kept")
    args = p.parse_args()
    global BREAKDOWN, ROUNDS, KERNELS
    BREAKDOWN, ROUNDS = args.breakdown, args.rounds
    KERNELS = {} if args.kernels else None
    os.environ.setdefault("NORM_OPT_CACHE_DIR", tempfile.mkdtemp())
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    route = nt.enable_compile_routing()
    rows = []
    dump = os.environ.get("NORM_OPT_ROUTE_DUMP")
    for name in args.models.split(","):
        nremarks = len(route.remarks)
        if dump:
            os.environ["NORM_OPT_ROUTE_DUMP"] = os.path.join(dump, name)
        try:
            row = run_model(name, route)
        except Exception as e:  # one model's failure is a row, not a crash
            import traceback
            traceback.print_exc()
            row = {"model": name, "error": f"{type(e).__name__}: {e}"}
        if args.remarks:
            for r in route.remarks[nremarks:]:
                print(f"  remark: {r}")
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.kernels:
        with open(args.kernels, "w") as f:
            json.dump(KERNELS, f)
    print()
    print("| model | norms | fused | launched | err eager | err Inductor | "
          "err route | step Inductor ms | step route ms | route/Inductor | "
          "norm kernels ms | compile +s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    bad = 0
    for r in rows:
        if "error" in r:
            print(f"| {r['model']} | error: {r['error'][:80]} |")
            bad += 1
            continue
        ratio = r["step_route_ms"] / r["step_inductor_ms"]
        print(f"| {r['model']} | {r['norms']} | {r['fused']} | "
              f"{r['launched']} | {r['err_eager']:.2e} | "
              f"{r['err_inductor']:.2e} | {r['err_route']:.2e} | "
              f"{r['step_inductor_ms']:.2f} | {r['step_route_ms']:.2f} | "
              f"{ratio:.3f} | {r['norm_ms']:.3f} | "
              f"{r['compile_route_s'] - r['compile_inductor_s']:+.1f} |")
        # Correctness is checked; speed is reported.
        if not (r["err_route"] <= 1.5 * r["err_inductor"] + 1e-4):
            bad += 1
            print(f"  FAIL {r['model']}: gradients outside Inductor's error")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
