#===- flax.py - Flax LayerNorm / RMSNorm with our backward ----------------===#
"""Drop-in Flax modules whose backward is norm-opt's (norm_opt.jax): the
same classes' parameters, names, defaults and forward as Flax's, so a model
swaps the import and keeps its checkpoints.

    from norm_opt.flax import linen as nnorm     # nnorm.LayerNorm(), ...
    from norm_opt.flax import nnx as nnorm       # nnorm.LayerNorm(N, rngs=)

Each is a subclass of Flax's own module. A call takes our path when it
normalises the last axis only (Flax's default reduction and feature axes),
over a supported dtype, without `mask`, group or axis_name options;
otherwise it runs Flax's own code. The dtype of the result follows Flax's
rule (the module's `dtype`, else the promoted input / parameter dtype);
our kernels then compute in fp32 as Flax does.
"""

import jax.numpy as jnp

from . import jax as _nj

_SUPPORTED = (jnp.bfloat16, jnp.float16, jnp.float32)


def _covered(module, x, mask):
    axes_ok = all(getattr(module, a, -1) in (-1, (-1,))
                  for a in ("reduction_axes", "feature_axes"))
    plain = mask is None and getattr(module, "axis_name", None) is None
    return (axes_ok and plain and x.ndim >= 1
            and jnp.dtype(x.dtype) in map(jnp.dtype, _SUPPORTED))


def _apply(kind, x, scale, bias, eps, out_dtype, param_dtype):
    n = x.shape[-1]
    w = scale if scale is not None else jnp.ones((n,), param_dtype)
    if jnp.dtype(w.dtype) not in map(jnp.dtype, _SUPPORTED):
        w = w.astype(jnp.float32)
    if kind == "layer":
        b = bias if bias is not None else jnp.zeros((n,), w.dtype)
        return _nj.layer_norm(x, w, b.astype(w.dtype), eps, out_dtype)
    return _nj.rms_norm(x, w, eps, out_dtype)


def _out_dtype(module, x, *params):
    if module.dtype is not None:
        return module.dtype
    return jnp.result_type(x, *[p for p in params if p is not None])


def _linen_call(module, kind, x, mask, flax_call):
    """A Linen module's call: Flax's parameters (same names, inits and
    dtypes), our function; Flax's own call where ours does not apply."""
    if not _covered(module, x, mask):
        return flax_call(x, mask=mask)
    n = x.shape[-1]
    scale = (module.param("scale", module.scale_init, (n,),
                          module.param_dtype) if module.use_scale else None)
    bias = (module.param("bias", module.bias_init, (n,), module.param_dtype)
            if kind == "layer" and module.use_bias else None)
    return _apply(kind, x, scale, bias, module.epsilon,
                  _out_dtype(module, x, scale, bias), module.param_dtype)


def _nnx_call(module, kind, x, mask, flax_call):
    """An NNX module's call: its own parameters, our function."""
    if not _covered(module, x, mask):
        return flax_call(x, mask=mask)
    scale = None if module.scale is None else module.scale[...]
    bias = getattr(module, "bias", None) if kind == "layer" else None
    bias = None if bias is None else bias[...]
    return _apply(kind, x, scale, bias, module.epsilon,
                  _out_dtype(module, x, scale, bias), module.param_dtype)


class _Linen:
    """norm_opt.flax.linen: LayerNorm and RMSNorm."""

    def __init__(self):
        import flax.linen as nn

        class LayerNorm(nn.LayerNorm):
            @nn.compact
            def __call__(self, x, *, mask=None):
                return _linen_call(self, "layer", x, mask, super().__call__)

        class RMSNorm(nn.RMSNorm):
            @nn.compact
            def __call__(self, x, *, mask=None):
                return _linen_call(self, "rms", x, mask, super().__call__)

        self.LayerNorm, self.RMSNorm = LayerNorm, RMSNorm


class _Nnx:
    """norm_opt.flax.nnx: LayerNorm and RMSNorm."""

    def __init__(self):
        from flax import nnx

        class LayerNorm(nnx.LayerNorm):
            def __call__(self, x, *, mask=None):
                return _nnx_call(self, "layer", x, mask, super().__call__)

        class RMSNorm(nnx.RMSNorm):
            def __call__(self, x, *, mask=None):
                return _nnx_call(self, "rms", x, mask, super().__call__)

        self.LayerNorm, self.RMSNorm = LayerNorm, RMSNorm


def __getattr__(name):
    # Built on first access: importing norm_opt.flax needs no Flax API.
    if name in ("linen", "nnx"):
        module = _Linen() if name == "linen" else _Nnx()
        globals()[name] = module
        return module
    raise AttributeError(name)
