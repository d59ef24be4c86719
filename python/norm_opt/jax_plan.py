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

Under a sharded `jit` (no shard_map), the call is wrapped in
`jax.experimental.custom_partitioning`: `sharding_rule` is its Shardy rule,
`partition_rows` which mesh axes split its rows (and so sum dW / dB), and
`partition_enabled` reads the switch that turns it off.
"""

import hashlib
import math
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


# -- sharded jit: the custom_partitioning of a call --------------------------

PARTITION_ENV = "NORM_OPT_JAX_PARTITION"


def partition_enabled(environ):
    """Whether norm_opt.jax partitions its calls under a sharded jit
    (custom_partitioning): yes unless $NORM_OPT_JAX_PARTITION is 0 (or
    off, false, no)."""
    value = str(environ.get(PARTITION_ENV, "1")).strip().lower()
    return value not in ("0", "off", "false", "no")


def sharding_rule(kind, x_rank):
    """The Shardy rule (an einsum-like string) of a call on x of rank
    `x_rank` (>= 2), and its need-replication factors. Each leading dim
    of x, dy and the statistics is a factor of its own (r0, r1, ...) that
    dx keeps; the hidden dim n, shared by the weight and dW / dB, must be
    replicated. The workspace is no result of the partitioned call:

        layer, rank 3: "r0 r1 n, r0 r1 n, r0 r1, r0 r1, n -> r0 r1 n, n, n"
    """
    if kind not in KINDS:
        raise ArgumentError(f"kind must be one of {KINDS}, got {kind!r}",
                            "kind")
    if int(x_rank) < 2:
        raise ArgumentError(f"a partitioned call needs x of rank >= 2 (a "
                            f"row dim), got rank {x_rank}", "x")
    rows = " ".join(f"r{i}" for i in range(int(x_rank) - 1))
    full = f"{rows} n"
    shapes = {"dy": full, "x": full, "mean": rows, "rstd": rows, "w": "n"}
    operands = [shapes[name] for name in operand_names(kind)]
    results = [full, "n"] + (["n"] if kind == "layer" else [])
    return ", ".join(operands) + " -> " + ", ".join(results), ("n",)


def spec_axes(entry):
    """The mesh axes of one PartitionSpec entry: None -> (), "a" ->
    ("a",), ("a", "b") -> ("a", "b"); anything else (P.UNCONSTRAINED)
    -> ()."""
    if entry is None:
        return ()
    if isinstance(entry, str):
        return (entry,)
    if isinstance(entry, (tuple, list)):
        return tuple(a for a in entry if isinstance(a, str))
    return ()


def partition_rows(x_shape, specs, mesh_shape):
    """How a partitioned call splits its rows over the mesh.

    x_shape: x's global shape; specs: PartitionSpec-like tuples, in order
    of preference, whose leading entries are the row dims (x's and dy's;
    the statistics', all of whose dims are rows); mesh_shape: {axis: size}.

    The rows follow the first spec that splits any row dim; a dim keeps
    the longest prefix of its axes whose sizes divide it (a padded shard
    would add its padding rows to dW), and the hidden dim is never split.
    Returns (rows, sum_axes): one PartitionSpec entry per leading dim of x
    (None, an axis name or a tuple of names), and the mesh axes they use,
    in order: the axes dW and dB are summed over."""
    nrows = len(tuple(x_shape)) - 1
    kept = [()] * max(nrows, 0)
    for spec in specs:
        entries = (tuple(spec or ()) + (None,) * nrows)[:nrows]
        candidate, used = [], set()
        for dim, entry in zip(tuple(x_shape)[:-1], entries):
            axes = spec_axes(entry)
            keep = ()
            for i in range(len(axes), 0, -1):
                prefix = axes[:i]
                if (all(a in mesh_shape and a not in used for a in prefix)
                        and len(set(prefix)) == len(prefix)):
                    size = math.prod(int(mesh_shape[a]) for a in prefix)
                    if size > 0 and int(dim) % size == 0:
                        keep = prefix
                        break
            used.update(keep)
            candidate.append(keep)
        if any(candidate):
            kept = candidate
            break
    rows = tuple(None if not k else k[0] if len(k) == 1 else k
                 for k in kept)
    return rows, tuple(a for k in kept for a in k)
