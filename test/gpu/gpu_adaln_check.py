#!/usr/bin/env python3
"""adaLN-modulated LayerNorm backward on the GPU (issue 42): numerics
against float64 and bitwise determinism (the benchmark is bench/adaln.py).

DiT / SD3 / Flux: y = LN(x) * (1 + scale[b]) + shift[b], x [B, S, N],
scale and shift [B, N]. The functions are the linalg a front end emits
(norm_opt.kernels' adaln_source: one generic per step),
fused by --norm-fuse-mixed-reductions into one multi-axis
norm.mixed_reduction (row sums over N, column sums keeping B and N:
batched rows) and run by the 2-D kernels with a sample per blockIdx.y
(docs/gpu.md, "Batched rows"). The chained cases are pytorch issue
193061's pattern: two modulated LayerNorms sharing scale / shift, the
second group's column sums starting from the first's (two launches, in the
order of norm-opt compile's host module).

Two modes (PYTHONPATH=python:test/lib-python):
  test/gpu/gpu_adaln_check.py --build .carry/adaln   (build machine:
      writes the functions and compiles each to a library, with its host
      module)
  python3 test/gpu/gpu_adaln_check.py --dir .carry/adaln [--quick]
      (GPU machine) -- fresh random inputs (never zero), outputs poisoned
      with NaN, every result against float64 by relative L2 error, every
      result bitwise identical over 3 calls; then norm_opt.torch's
      adaln_modulate (compiling on first use: $NORM_OPT or the wheel's
      norm-opt) against float64 autograd; --tiny: small shapes only, for
      compute-sanitizer
Prints one line per check and a summary last.
"""

import os
import re
import subprocess
import sys

from harness import Results, build_or_check

# (name, N, dtype, chained, B, S): B and S are run-time sizes (the function
# takes any) unless chained (static: the host module's types give the
# intermediate results' shapes).
FUNCTIONS = (
    [(f"adaln_{t}_n{n}", n, t, False, None, None)
     for t in ("bf16", "f32") for n in (1152, 33, 4096)]
    + [("adaln_chain_bf16_n1152", 1152, "bf16", True, 4, 256),
       ("adaln_chain_f32_n40", 40, "f32", True, 3, 17)])
# (B, S) run on each dynamic function: a DiT-XL/2 batch (256 tokens of
# 1152), samples of one token, uneven sizes, many samples.
SHAPES = [(2, 3), (5, 1), (3, 257), (64, 256), (1, 1000), (33, 7)]
QUICK_SHAPES = [(2, 3), (3, 257), (64, 256)]
# Under compute-sanitizer (--tiny): every kernel path, few elements.
TINY_SHAPES = [(2, 3), (5, 1), (3, 37)]


def build(out, norm_opt):
    from norm_opt import compile_command
    from norm_opt.kernels import adaln_source
    os.makedirs(out, exist_ok=True)
    for name, n, t, chain, b, s in FUNCTIONS:
        text, _ = adaln_source(name, n, t, chain=chain, batch=b, tokens=s)
        src = os.path.join(out, f"{name}.mlir")
        with open(src, "w") as fh:
            fh.write(text)
        lib = os.path.join(out, f"lib{name}.so")
        cmd = compile_command(src, lib, emit="lib", norm_opt=norm_opt)
        cmd += [f"--host-module={os.path.join(out, name + '.host.mlir')}"]
        subprocess.run(cmd, check=True)
        print(f"built lib{name}.so")
    return 0


# --- GPU side ---------------------------------------------------------------

_CALL = re.compile(r"(%\w+)(?::\d+)? = (?:func\.)?call @(\w+)\(([^)]*)\) : "
                   r"\([^)]*\) -> \(?([^)=]*?)\)?$")
_RETURN = re.compile(r"return (.*) :")


def host_program(path, function):
    """The calls of `function` in its host module, in order: (callee,
    operands, result types); operands are ("arg", k) or ("res", call,
    index); and the returned values."""
    calls, returned, inside = [], None, False
    names = {}
    for line in open(path):
        line = line.strip()
        if line.startswith(f"func.func @{function}("):
            inside = True
            continue
        if not inside:
            continue
        m = _CALL.match(line)
        if m:
            result, callee, operands, types = m.groups()
            names[result] = len(calls)
            calls.append((callee, [_operand(o, names) for o in
                                   operands.split(", ")],
                          re.findall(r"tensor<[^>]*>", types)))
            continue
        m = _RETURN.match(line)
        if m:
            returned = [_operand(o, names) for o in m.group(1).split(", ")]
            break
    if not calls or returned is None:
        raise SystemExit(f"{path}: no calls of @{function}'s groups")
    return calls, returned


def _operand(text, names):
    text = text.strip()
    if text.startswith("%arg"):
        return ("arg", int(text[4:]))
    value, _, index = text.partition("#")
    return ("res", names[value], int(index or 0))


def run_host_program(lib, calls, returned, inputs):
    """Runs the calls with NaN-poisoned results of their static types;
    returns the function's results."""
    import torch
    dtypes = {"f32": torch.float32, "bf16": torch.bfloat16}
    results = []
    for callee, operands, types in calls:
        args = [inputs[o[1]] if o[0] == "arg" else results[o[1]][o[2]]
                for o in operands]
        outs = []
        for t in types:
            *dims, elem = t[len("tensor<"):-1].split("x")
            outs.append(torch.full([int(d) for d in dims], float("nan"),
                                   dtype=dtypes[elem], device="cuda"))
        getattr(lib, callee)(*args, *outs)
        results.append(outs)
    return [inputs[o[1]] if o[0] == "arg" else results[o[1]][o[2]]
            for o in returned]


def make_inputs(B, S, N, dtype, chained, gen):
    """scale, then per LayerNorm dy, x, mean, rstd: random, never zero;
    mean / rstd those of x (f32)."""
    import torch

    def signed(*shape, lo=0.25, hi=2.0):
        v = torch.rand(*shape, generator=gen, device="cuda") * (hi - lo) + lo
        sign = torch.randint(0, 2, shape, generator=gen, device="cuda")
        return v * (sign * 2 - 1)

    scale = (0.5 * signed(B, N)).to(dtype)
    ins = [scale]
    for _ in range(2 if chained else 1):
        x = (signed(B, S, N) + signed(B, S, 1)).to(dtype)
        dy = signed(B, S, N).to(dtype)
        xf = x.double()
        mean = xf.mean(-1)
        rstd = (xf.var(-1, unbiased=False) + 1e-5).rsqrt()
        ins += [dy, x, mean.float(), rstd.float()]
    return ins


def reference(ins, chained):
    """dx per LayerNorm, then dscale and dshift [B, N] (sums over each
    sample's tokens of both LayerNorms), in float64."""
    scale = ins[0].double()
    dxs, dscale, dshift = [], 0, 0
    for k in range(2 if chained else 1):
        dy, x, mean, rstd = (t.double() for t in ins[1 + 4 * k:5 + 4 * k])
        xhat = (x - mean[..., None]) * rstd[..., None]
        g = dy * (1 + scale[:, None, :])
        a = g.mean(-1, keepdim=True)
        p = (g * xhat).mean(-1, keepdim=True)
        dxs.append(rstd[..., None] * (g - a - xhat * p))
        dscale = dscale + (dy * xhat).sum(1)
        dshift = dshift + dy.sum(1)
    return dxs + [dscale, dshift]


def numerics(args):
    import torch
    from norm_opt import Library

    results = Results("gpu_adaln_check", args.inject)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(20261129)
    for name, n, t, chained, b, s in FUNCTIONS:
        lib = Library(os.path.join(args.dir, f"lib{name}.so"))
        dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[t]
        if chained:
            calls, returned = host_program(
                os.path.join(args.dir, f"{name}.host.mlir"), name)
            shapes = [(b, s)]
        else:
            shapes = (TINY_SHAPES if args.tiny else
                      QUICK_SHAPES if args.quick else SHAPES)
        for B, S in shapes:
            ins = make_inputs(B, S, n, dtype, chained, gen)
            runs = []
            for _ in range(3):
                if chained:
                    runs.append(run_host_program(lib, calls, returned, ins))
                    continue
                outs = [torch.full((B, S, n), float("nan"), dtype=dtype,
                                   device="cuda"),
                        torch.full((B, n), float("nan"), dtype=dtype,
                                   device="cuda"),
                        torch.full((B, n), float("nan"), dtype=dtype,
                                   device="cuda")]
                getattr(lib, name)(*ins, *outs)
                runs.append(outs)
            torch.cuda.synchronize()
            ref = reference(ins, chained)
            labels = (["dx1", "dx2"] if chained else ["dx"]) + ["dscale",
                                                                "dshift"]
            case = f"{name} B={B} S={S}"
            for label, got, want in zip(labels, runs[0], ref):
                results.compare(case, label, got, want)
            results.require(case, "every result bitwise over 3 calls",
                            all(torch.equal(a, c) for r in runs[1:]
                                for a, c in zip(runs[0], r)))
    if not args.tiny:
        module_check(results)
    return results.finish()


def module_check(results):
    """norm_opt.torch.adaln_modulate (torch's forward, our backward
    compiled on first use) against the same math in float64 autograd: the
    gradients of x, shift and scale, f32 and bf16; and that our kernel
    ran."""
    import torch
    import norm_opt.torch as nt

    torch.manual_seed(20261129)
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(3, 37, 264, device="cuda").to(dtype).requires_grad_()
        shift = (0.5 * torch.randn(3, 264, device="cuda")).to(dtype)
        scale = (0.5 * torch.randn(3, 264, device="cuda")).to(dtype)
        shift.requires_grad_()
        scale.requires_grad_()
        refs = [t.detach().double().requires_grad_()
                for t in (x, shift, scale)]
        g = torch.randn(3, 37, 264, device="cuda").to(dtype)
        before = nt.launches
        nt.adaln_modulate(x, shift, scale).backward(g)
        ran = nt.launches - before
        xr, shr, scr = refs
        h = torch.nn.functional.layer_norm(xr, (264,), None, None, 1e-6)
        (h * (1 + scr[:, None]) + shr[:, None]).backward(g.double())
        case = f"nt.adaln_modulate {str(dtype).split('.')[-1]}"
        for label, got, want in (("dx", x.grad, xr.grad),
                                 ("dshift", shift.grad, shr.grad),
                                 ("dscale", scale.grad, scr.grad)):
            results.compare(case, label, got, want)
        results.require(case, f"our kernel ran ({ran} launches)", ran >= 1)


def main():
    return build_or_check(__doc__, ".carry/adaln", build, numerics)


if __name__ == "__main__":
    sys.exit(main())
