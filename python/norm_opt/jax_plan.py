#===- jax_plan.py - What norm_opt.jax hands to XLA, without JAX ---------===#
"""The parts of norm_opt.jax that need neither JAX nor a GPU, so that CI
(which has neither) tests them (python/tests/test_jax_plan.py): the
arguments' checks, the FFI call's operands, results and attributes, the
names of the handlers, and the command that builds them.

A backward call is one `jax.ffi.ffi_call` of a typed XLA FFI handler
(_jax_ffi.cc); its operands, results and attributes are:

    layer: (dy, x, mean, rstd, w) -> (dx, dw, db, workspace)
    rms:   (dy, x, rstd, w)       -> (dx, dw, workspace)
    attributes: kernel = the library's cache name (a string),
                x_rank = x's rank (int64: vmap's batch dims come in front)

The statistics are fp32 `x.shape[:-1]`, the workspace a uint8 buffer of
the bytes the launcher asks for (its query, when the call is traced).
"""

import hashlib
import pathlib

from .errors import ArgumentError
from . import kernels

KINDS = ("layer", "rms")
TARGETS = {"layer": "norm_opt_layer_norm_backward",
           "rms": "norm_opt_rms_norm_backward"}
# The handlers' C symbols in the built library.
SYMBOLS = {"layer": "NormOptLayerNormBackward",
           "rms": "NormOptRmsNormBackward"}
ELEMENT_BYTES = {"bf16": 2, "f16": 2, "f32": 4}
SOURCES = ("_jax_ffi.cc", "_jax_launch.h", "_launchers.h")


def dtype_name(dtype):
    """"bf16" for jnp.bfloat16, np.dtype("float32"), "float16", ..."""
    name = getattr(dtype, "name", None) or getattr(dtype, "__name__", None) \
        or str(dtype)
    try:
        return kernels.mlir_dtype(name)
    except ValueError:
        raise ArgumentError(f"unsupported dtype {name} (supported: bfloat16, "
                            "float16, float32)", None) from None


def check(kind, x_shape, x_dtype, w_shape, w_dtype, b_shape=None,
          b_dtype=None):
    """The arguments of layer_norm / rms_norm: x [..., N] and w, b [N] in a
    supported dtype. Returns (N, x dtype, weight dtype) as kernel names."""
    if kind not in KINDS:
        raise ArgumentError(f"kind must be one of {KINDS}, got {kind!r}",
                            "kind")
    x_shape, w_shape = tuple(x_shape), tuple(w_shape)
    if len(x_shape) < 1:
        raise ArgumentError("x must have at least one dim (the normalised "
                            "one, last), got a scalar", "x")
    n = x_shape[-1]
    if n < 1:
        raise ArgumentError(f"x {x_shape}: the normalised (last) dim is "
                            "empty", "x")
    if w_shape != (n,):
        raise ArgumentError(f"weight must have shape ({n},) for x {x_shape}, "
                            f"got {w_shape}", "weight")
    if b_shape is not None and tuple(b_shape) != (n,):
        raise ArgumentError(f"bias must have shape ({n},) for x {x_shape}, "
                            f"got {tuple(b_shape)}", "bias")
    xd, wd = dtype_name(x_dtype), dtype_name(w_dtype)
    if b_dtype is not None:
        dtype_name(b_dtype)
    return n, xd, wd


def stats_shape(x_shape):
    """The fp32 statistics' shape: one per row."""
    return tuple(x_shape)[:-1]


def operand_names(kind):
    return (("dy", "x", "mean", "rstd", "w") if kind == "layer"
            else ("dy", "x", "rstd", "w"))


def results(kind, x_shape, x_dtype, w_shape, w_dtype, workspace_bytes):
    """(shape, dtype name) of each result, the workspace last."""
    out = [(tuple(x_shape), x_dtype), (tuple(w_shape), w_dtype)]
    if kind == "layer":
        out.append((tuple(w_shape), w_dtype))
    if workspace_bytes < 0:
        raise ArgumentError(f"workspace bytes must be >= 0, got "
                            f"{workspace_bytes}", None)
    # At least 16 bytes: a 0-size buffer may have no address.
    out.append(((max(16, (int(workspace_bytes) + 15) // 16 * 16),), "uint8"))
    return out


def attributes(kernel, x_rank):
    """The call's attributes as (name, kind, value): kind "string" or
    "int64" (norm_opt.jax makes them np.int64, so XLA sees an i64)."""
    if not kernel or not isinstance(kernel, str):
        raise ArgumentError("kernel must be a library's name", "kernel")
    if int(x_rank) < 1:
        raise ArgumentError(f"x_rank must be >= 1, got {x_rank}", "x_rank")
    return [("kernel", "string", kernel), ("x_rank", "int64", int(x_rank))]


def register_arguments(kernel, kind, n, x_dtype, w_dtype):
    """The leading arguments of norm_opt_jax_register (the function
    pointers follow): name, kind (0 layer, 1 rms), N, element bytes."""
    return (kernel.encode(), KINDS.index(kind), int(n),
            ELEMENT_BYTES[x_dtype], ELEMENT_BYTES[w_dtype])


def source_dir():
    return pathlib.Path(__file__).parent


def build_key(include_dir, jax_version, compiler):
    """The cache folder of the handlers' library: it changes with their
    sources, XLA's FFI headers, the JAX version and the compiler."""
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update((source_dir() / name).read_bytes())
    for part in (str(include_dir), str(jax_version), str(compiler)):
        digest.update(b"\0" + part.encode())
    return digest.hexdigest()[:20]


def build_command(compiler, include_dir, output):
    """The compile of _jax_ffi.cc into a shared library."""
    return [compiler, "-O2", "-std=c++17", "-shared", "-fPIC",
            f"-I{include_dir}", f"-I{source_dir()}",
            str(source_dir() / "_jax_ffi.cc"), "-o", str(output), "-ldl"]
