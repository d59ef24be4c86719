#===- testing.py - What the GPU checks and the benchmarks share -----------===#
"""What the GPU checks (test/gpu) and the benchmarks (bench/) share, on
torch tensors (needs torch; a CUDA GPU to run a kernel):

* the kernel set (norm_opt.kernel_set) launched with torch tensors:
  DT, TOL (dtypes by short name; the relative L2 tolerance of a result by
  its stored type), make_inputs (one problem: fresh random inputs and
  their f32 statistics), poisoned_outputs (NaN-filled results),
  float64_backward (norm_opt.reference of make_inputs' tensors), errors
  (the relative L2 error of each result), call / call_framework_workspace
  (a launcher called with raw pointers, with the runtime's workspace or
  one from torch's allocator) and prepared_cases (`name:MxN` cases of a
  kernel set, ready to call);
* channels-first norms (N not the last dim): channels_first_inputs and
  channels_first_reference (for the libraries of
  test/gpu/gpu_channels_first_check.py --build, which
  bench/channels_first.py times);
* the norm spellings of real models (LlamaRMSNorm, GemmaRMSNorm,
  CohereLayerNorm, OlmoLayerNorm) and a residual Block around one: what
  torch.compile's route must recognise (test/gpu/compile_routing_check.py,
  bench/launch_host_cost.py, bench/record_graphs.py).

The error measure is norm_opt.reference.rel_l2 (a NaN or an unwritten
element is an infinite error; compare with `not err <= tol`), the
NaN-aware maximum norm_opt.reference.worst. The autograd functions whose
backward is ours are norm_opt.torch's (layer_norm, rms_norm, LayerNorm,
RMSNorm).
"""

import torch
import torch.nn as nn

from . import kernel_set
from . import reference as _float64
from .reference import rel_l2

DT = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
# Relative L2 tolerance by the stored type of a result: test/gpu/harness.py's
# TOLERANCE (measured worst errors with their headroom), for torch dtypes.
TOL = {torch.bfloat16: 8e-3, torch.float16: 1e-3, torch.float32: 1e-5}


# ---------------------------------------------------------------------------
# The kernel set on torch tensors
# ---------------------------------------------------------------------------

def make_inputs(kind, xdt, wdt, m, n, gen, dev):
    """{x, dy, w, b, mean, rstd}: x normal scaled and shifted, dy normal,
    w = 1 + 0.2 N(0, 1), b = 0.1 N(0, 1) (never zeros), and the f32
    statistics of x (eps 1e-5) the forward would have saved."""
    x = torch.randn(m, n, generator=gen, device=dev, dtype=torch.float32)
    x = (x * 2 + 0.5).to(xdt)
    dy = torch.randn(m, n, generator=gen, device=dev).to(xdt)
    w = (1 + 0.2 * torch.randn(n, generator=gen, device=dev)).to(wdt)
    b = (0.1 * torch.randn(n, generator=gen, device=dev)).to(wdt)
    # Saved statistics in f32, as the forward keeps them.
    chunk = max(1, (1 << 26) // n)
    mean = torch.empty(m, device=dev)
    rstd = torch.empty(m, device=dev)
    for r0 in range(0, m, chunk):
        xs = x[r0:r0 + chunk].float()
        if kind == "layer":
            mu = xs.mean(-1)
            var = ((xs - mu[:, None]) ** 2).mean(-1)
        else:
            mu = torch.zeros(xs.shape[0], device=dev)
            var = (xs * xs).mean(-1)
        mean[r0:r0 + chunk] = mu
        rstd[r0:r0 + chunk] = torch.rsqrt(var + 1e-5)
    return dict(x=x, dy=dy, w=w, b=b, mean=mean, rstd=rstd)


def float64_backward(kind, t, m, n, scales=False):
    """The float64 backward of make_inputs' tensors `t` from the same (f32)
    statistics (norm_opt.reference), in row chunks: {dx, dw, db} (and
    their term magnitudes, with scales=True)."""
    return _float64.backward(kind, t["x"], t["dy"], t["rstd"],
                             t["mean"] if kind == "layer" else None, t["w"],
                             scales=scales,
                             chunk_rows=max(1, (1 << (24 if scales else 25))
                                            // n))


def errors(outs, ref, n):
    """{result: relative L2 error against ref} (rel_l2; dx in row chunks)
    of the results `outs` of a problem with rows of n."""
    return {k: rel_l2(o, ref[k], chunk_rows=max(1, (1 << 25) // n)
                      if k == "dx" else None)
            for k, o in outs.items()}


def poisoned_outputs(sig, m, n, xdt, wdt, dev):
    """The results of the manifest function `sig`, filled with NaN."""
    outs = {"dx": torch.full((m, n), float("nan"), dtype=xdt, device=dev)}
    for r in sig["results"][1:]:
        outs[r] = torch.full((n,), float("nan"), dtype=wdt, device=dev)
    return outs


def call(lib, fn, sig, t, outs, m, n, strides=None, stream=None):
    """The launcher `fn` of a kernel_set.ManifestLibrary on the tensors `t`
    (inputs) and `outs` (results), rows m of n, row strides `strides`
    (default n); torch's current stream unless `stream`. Raises
    RuntimeError with the runtime's message on a non-zero status."""
    ptrs = [t[a].data_ptr() for a in sig["args"]]
    ptrs += [outs[r].data_ptr() for r in sig["results"]]
    if strides is None:
        strides = [n] * len(sig["strides"])
    rc = fn(*ptrs, m, n, *strides,
            stream if stream is not None
            else torch.cuda.current_stream().cuda_stream)
    if rc != 0:
        raise RuntimeError(f"{sig['name']}: status {rc}: {lib.error()}")


def call_framework_workspace(lib, fn, sig, t, outs, m, n, nbytes):
    """`call` as a framework makes it (norm_opt.torch's ops): the workspace
    (`nbytes`, from ManifestLibrary.workspace_bytes) from torch's
    allocator, set for the current stream around the call, so that a CUDA
    graph captured around it holds no allocation nodes of ours (the peers'
    temporaries come from the same allocator)."""
    stream = torch.cuda.current_stream().cuda_stream
    ws = torch.empty(max(nbytes, 1), dtype=torch.uint8, device=t["x"].device)
    lib.set_workspace(stream, ws.data_ptr() if nbytes else None, nbytes)
    try:
        call(lib, fn, sig, t, outs, m, n, stream=stream)
    finally:
        lib.set_workspace(stream, None, 0)


def prepared_cases(directory, cases, gen, dev="cuda"):
    """For each `name:MxN` of `cases` (comma-separated; `name` picks
    lib<name>.so of the kernel set in `directory`): (case, m, n, lib, fn,
    sig, fresh inputs, poisoned outputs)."""
    libs = kernel_set.libraries(directory)
    for case in cases.split(","):
        name, shape = case.split(":")
        m, n = (int(v) for v in shape.split("x"))
        lib = libs[f"lib{name}.so"]
        fn, sig = lib.funcs[n]
        xdt, wdt = DT[sig["x"]], DT[sig["w"]]
        t = make_inputs(sig["kind"], xdt, wdt, m, n, gen, dev)
        outs = poisoned_outputs(sig, m, n, xdt, wdt, dev)
        yield case, m, n, lib, fn, sig, t, outs


# ---------------------------------------------------------------------------
# Channels-first norms
# ---------------------------------------------------------------------------

def channels_first_inputs(kind, dt, c, shape, n_dim):
    """dy, x, (mean,) rstd, w of a norm over dim n_dim (of size c) of
    `shape`: random magnitudes in [0.25, 2) with random signs (never zero),
    random statistics."""
    dtype = DT[dt]

    def nonzero(*s):
        v = torch.rand(*s, device="cuda") * 1.75 + 0.25
        sign = torch.randint(0, 2, s, device="cuda") * 2 - 1
        return v * sign

    rows = shape[:n_dim] + shape[n_dim + 1:]
    dy = nonzero(*shape).to(dtype)
    x = nonzero(*shape).to(dtype)
    rstd = torch.rand(*rows, device="cuda") * 1.5 + 0.5
    w = nonzero(c).to(dtype)
    if kind == "layer":
        mean = nonzero(*rows) * 0.5
        return dy, x, mean, rstd, w
    return dy, x, rstd, w


def channels_first_reference(kind, n_dim, dy, x, *rest):
    """dx, dw (, db) in float64: norm_opt.reference's backward over the rows
    of x with dim n_dim moved last, dx moved back."""
    if kind == "layer":
        mean, rstd, w = rest
    else:
        (rstd, w), mean = rest, None
    c = x.shape[n_dim]

    def rows(t):  # [..., c] as [rows, c], the row dims in order
        return t.double().movedim(n_dim, -1).reshape(-1, c)

    ref = _float64.backward(kind, rows(x), rows(dy),
                            rstd.double().reshape(-1),
                            None if mean is None
                            else mean.double().reshape(-1), w.double())
    shape = list(x.shape)
    del shape[n_dim]
    dx = ref["dx"].reshape(*shape, c).movedim(-1, n_dim)
    return [dx, ref["dw"]] + ([ref["db"]] if kind == "layer" else [])


# ---------------------------------------------------------------------------
# Norm spellings of real models
# ---------------------------------------------------------------------------

class LlamaRMSNorm(nn.Module):
    """LLaMA's RMSNorm, written out (fp32 inside)."""

    def __init__(self, n, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(n)), eps

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


class GemmaRMSNorm(LlamaRMSNorm):
    """Gemma's RMSNorm: the weight applied as (1 + w)."""

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return (h * (1.0 + self.weight.float())).to(x.dtype)


class CohereLayerNorm(LlamaRMSNorm):
    """A weight-only LayerNorm computed in fp32, written out."""

    def forward(self, x):
        h = x.float()
        mean = h.mean(-1, keepdim=True)
        var = (h - mean).pow(2).mean(-1, keepdim=True)
        h = (h - mean) * torch.rsqrt(var + self.eps)
        return (self.weight.float() * h).to(x.dtype)


class OlmoLayerNorm(nn.Module):
    """OLMo: LayerNorm without weight or bias."""

    def __init__(self, n):
        super().__init__()
        self.n = n

    def forward(self, x):
        return torch.nn.functional.layer_norm(x, (self.n,), None, None, 1e-5)


class AdaLNBlock(nn.Module):
    """DiT's adaLN-Zero modulation (issue 42): a LayerNorm without affine,
    then x * (1 + scale) + shift with per-sample scale and shift from the
    conditioning c [B, hidden]; x [B, S, hidden]."""

    def __init__(self, hidden=1024):
        super().__init__()
        self.hidden = hidden
        self.mod = nn.Linear(hidden, 2 * hidden)
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, x, c):
        scale, shift = self.mod(c).chunk(2, dim=-1)
        h = torch.nn.functional.layer_norm(x, (self.hidden,), None, None,
                                           1e-6)
        return self.proj(h * (1 + scale[:, None]) + shift[:, None])


class GroupNormBlock(nn.Module):
    """A UNet / VAE ResNet block's norm (issue 42): conv, GroupNorm (G
    groups, weight and bias), SiLU, conv; x [N, C, H, W] (channels last
    when the module and x are)."""

    def __init__(self, channels=320, groups=32):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.norm = nn.GroupNorm(groups, channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        return self.conv2(torch.nn.functional.silu(self.norm(self.conv1(x))))


class ResBlock(nn.Module):
    """Stable Diffusion's UNet ResNet block without the time embedding:
    x + conv(silu(gn(conv(silu(gn(x)))))), GroupNorm(32, C)."""

    def __init__(self, channels=320, groups=32):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, channels)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.norm2 = nn.GroupNorm(groups, channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        silu = torch.nn.functional.silu
        h = self.conv1(silu(self.norm1(x)))
        return x + self.conv2(silu(self.norm2(h)))


class Block(nn.Module):
    """A residual block around one norm: x + down(norm(up(x))), the norm
    `norm(hidden)` (a class above or torch.nn's)."""

    def __init__(self, norm, hidden=1024):
        super().__init__()
        self.up = nn.Linear(hidden, hidden)
        self.norm = norm(hidden)
        self.down = nn.Linear(hidden, hidden)

    def forward(self, x):
        return x + self.down(self.norm(self.up(x)))
