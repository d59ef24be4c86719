#===- jax.py - LayerNorm / RMSNorm with our backward, for JAX -------------===#
"""`layer_norm` and `rms_norm` for JAX: the forward is XLA's (plain jnp, so
XLA fuses it with its neighbours), the backward one of norm-opt's kernels,
called through a typed XLA FFI handler (`jax.ffi.ffi_call`):

    import norm_opt.jax as nj
    y = nj.layer_norm(x, weight, bias, eps=1e-5)     # x [..., N]
    y = nj.rms_norm(x, weight, eps=1e-6)

Both are `jax.custom_vjp` functions and work under `jit`, `grad`, `vmap`
(each batch element is a launch of its own: per-example dW), `shard_map`
(per-device kernels; JAX's transpose sums the replicated weight's
gradient over the devices), a sharded `jit` without shard_map (the call
is a `custom_partitioning`: per-device kernels on the local rows, dW / dB
psum'd; $NORM_OPT_JAX_PARTITION=0 turns it off; on a mesh of Explicit
axes, a shard_map over the types' shardings) and inside XLA's command
buffers (the handlers are command-buffer compatible). The forward saves
x, the weight (and LayerNorm's bias, for its type) and the fp32
statistics (mean, rstd), as torch's does.

What happens on first use (docs/jax.md):
- the handlers (_jax_ffi.cc) are built against `jax.ffi.include_dir()`
  with $CXX (else c++) into norm-opt's cache folder, once per source, JAX
  version and compiler, and registered for the CUDA platform;
- each (kind, N, dtypes, chip) kernel is found or compiled
  (norm_opt.kernels: the wheel's bundled norm-opt where the package came
  from the wheel) when its call is traced, and its launcher handed to the
  handlers by name;
- its workspace (fp32 partial sums) is asked of the launcher at trace time
  and becomes one more result of the call, allocated by XLA.
"""

import ctypes
import functools
import os
import subprocess
import tempfile
import threading

import jax
import jax.numpy as jnp
import numpy as np

from . import jax_plan as plan
from . import kernels
from .errors import NormOptError

__all__ = ["layer_norm", "rms_norm", "layer_norm_reference",
           "rms_norm_reference", "load_handlers"]

_lock = threading.RLock()
_handlers = None          # the ctypes library of _jax_ffi.cc
_kernels = {}             # (kind, n, x dtype, w dtype, chip) -> key
_workspace = {}           # (key, rows) -> bytes


# -- the handlers -------------------------------------------------------------

def _build_handlers():
    include = jax.ffi.include_dir()
    compiler = os.environ.get("CXX", "c++")
    key = plan.build_key(include, jax.__version__, compiler)
    folder = kernels.cache_dir() / "jax-ffi" / key
    lib = folder / "libnorm_opt_jax.so"
    if lib.is_file():
        return lib
    folder.mkdir(parents=True, exist_ok=True)
    fd, scratch = tempfile.mkstemp(suffix=".so", dir=folder)
    os.close(fd)
    try:
        done = subprocess.run(plan.build_command(compiler, include, scratch),
                              capture_output=True, text=True)
        if done.returncode:
            raise NormOptError(
                "norm_opt.jax: building the XLA FFI handlers failed:\n"
                + " ".join(plan.build_command(compiler, include, scratch))
                + "\n" + done.stderr[-4000:])
        os.replace(scratch, lib)
    finally:
        if os.path.exists(scratch):
            os.unlink(scratch)
    return lib


def load_handlers():
    """Builds (once, cached) and registers the FFI handlers; returns their
    ctypes library."""
    global _handlers
    with _lock:
        if _handlers is None:
            dll = ctypes.CDLL(str(_build_handlers()))
            dll.norm_opt_jax_register.restype = ctypes.c_int
            dll.norm_opt_jax_register.argtypes = [
                ctypes.c_char_p, ctypes.c_int, ctypes.c_int64, ctypes.c_int,
                ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                ctypes.c_void_p]
            for kind in plan.KINDS:
                jax.ffi.register_ffi_target(
                    plan.TARGETS[kind],
                    jax.ffi.pycapsule(getattr(dll, plan.SYMBOLS[kind])),
                    platform="CUDA")
            _handlers = dll
        return _handlers


# -- kernels and their workspace ---------------------------------------------

def _gpu():
    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    if not gpus:
        raise NormOptError("norm_opt.jax needs a CUDA GPU; JAX has none "
                           f"(devices: {jax.devices()})")
    return gpus[0]


def chip():
    """The --chip of JAX's first GPU: sm_90a on Hopper, else sm_XY."""
    env = os.environ.get("NORM_OPT_CHIP")
    if env:
        return env
    major, minor = _gpu().compute_capability.split(".")
    return f"sm_{major}{minor}" + ("a" if (major, minor) == ("9", "0") else "")


def _address(cfunc):
    return ctypes.cast(cfunc, ctypes.c_void_p).value or 0


def _kernel(kind, n, xd, wd):
    """The kernel's name for the call's `kernel` attribute, loaded (compiled
    on a miss) and registered with the handlers."""
    c = chip()
    k = (kind, n, xd, wd, c)
    with _lock:
        if k not in _kernels:
            handlers = load_handlers()
            lib = kernels.library(kind, n, xd, wd, c)
            fn = lib[kernels.function_name(kind)]
            name = kernels.entry_name(kind, n, xd, wd, c, {})
            status = handlers.norm_opt_jax_register(
                *plan.register_arguments(name, kind, n, xd, wd),
                _address(fn.cfunc), _address(lib._set_workspace),
                _address(lib._last_error))
            if status:
                raise NormOptError(f"norm_opt.jax: registering {name} failed")
            _kernels[k] = (name, fn)
        return _kernels[k]


class _Stand:
    """A tensor-like for the launcher's workspace query: shapes and dtypes
    of the call, 256-byte aligned addresses (as XLA's), nothing behind."""

    def __init__(self, shape, dtype, address):
        self.shape, self.dtype, self._address = tuple(shape), dtype, address
        self.device = "cuda:0"

    def stride(self):
        out, step = [], 1
        for d in reversed(self.shape):
            out.append(step)
            step *= max(d, 1)
        return tuple(reversed(out))

    def data_ptr(self):
        return self._address


class _PrimaryContext:
    """The first GPU's primary context (the one XLA uses), current on this
    thread for the query: the launcher plans for its device."""

    def __enter__(self):
        cuda = ctypes.CDLL("libcuda.so.1")
        self._cuda = cuda
        dev, ctx = ctypes.c_int(0), ctypes.c_void_p()
        ordinal = _gpu().local_hardware_id or 0
        if (cuda.cuInit(0) or cuda.cuDeviceGet(ctypes.byref(dev), ordinal)
                or cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)):
            raise NormOptError("norm_opt.jax: no CUDA context for the "
                               "workspace query")
        self._dev = dev
        cuda.cuCtxPushCurrent_v2(ctx)
        return self

    def __exit__(self, *exc):
        popped = ctypes.c_void_p()
        self._cuda.cuCtxPopCurrent_v2(ctypes.byref(popped))
        self._cuda.cuDevicePrimaryCtxRelease_v2(self._dev)


def _workspace_bytes(kind, name, fn, rows, n, xd, wd):
    key = (name, rows)
    if key not in _workspace:
        dt = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}
        shapes = {"dy": ((rows, n), dt[xd]), "x": ((rows, n), dt[xd]),
                  "mean": ((rows,), "float32"), "rstd": ((rows,), "float32"),
                  "w": ((n,), dt[wd])}
        ins = [shapes[o] for o in plan.operand_names(kind)]
        if kind == "layer":
            ins.append(((n,), dt[wd]))          # the bias slot
        outs = [((rows, n), dt[xd]), ((n,), dt[wd])]
        if kind == "layer":
            outs.append(((n,), dt[wd]))
        stands = [_Stand(s, d, (i + 1) << 20)
                  for i, (s, d) in enumerate(ins + outs)]
        with _PrimaryContext():
            _workspace[key] = fn.workspace_bytes(*stands, stream=0)
    return _workspace[key]


# -- the backward call -------------------------------------------------------

_JNP_DTYPES = {"bf16": jnp.bfloat16, "f16": jnp.float16, "f32": jnp.float32,
               "uint8": jnp.uint8}


def _ffi_call(kind, *operands):
    """One FFI call on these operands' shapes, (dy, x, *stats, w) in the
    kernel's dtypes; returns its results less the workspace (dx, dW[, dB]).
    The workspace is sized for these rows: the local ones inside a
    partitioned call's lower_fn."""
    x, w = operands[1], operands[-1]
    n, xd, wd = plan.check(kind, x.shape, x.dtype, w.shape, w.dtype)
    name, fn = _kernel(kind, n, xd, wd)
    rows = int(np.prod(x.shape[:-1], dtype=np.int64))
    nbytes = _workspace_bytes(kind, name, fn, rows, n, xd, wd)
    results = [jax.ShapeDtypeStruct(shape, _JNP_DTYPES[d])
               for shape, d in plan.results(kind, x.shape, xd, w.shape, wd,
                                            nbytes)]
    attrs = {}
    for attr, typ, value in plan.attributes(name, x.ndim):
        attrs[attr] = np.int64(value) if typ == "int64" else value
    call = jax.ffi.ffi_call(plan.TARGETS[kind], results,
                            vmap_method="broadcast_all")
    return tuple(call(*operands, **attrs)[:-1])


def _backward(kind, dy, x, stats, w, like):
    """(dx, dW[, dB]) of the call; `like`: the primal inputs (x, w[, b])
    whose types (with their shardings, on a mesh of Explicit axes) the
    results take."""
    operands = (dy.astype(x.dtype), x,
                *[s.astype(jnp.float32) for s in stats], w)
    mesh = _explicit_mesh(like)
    if mesh is not None:
        return _explicit_call(kind, operands, like, mesh)
    # Inside shard_map, each device's results are its own (varying over
    # the operands' mesh axes); the gradient of an input that does not
    # vary over an axis (the replicated weight) is the sum over it.
    varying = frozenset().union(*map(_vma, operands))
    if not varying and _partitionable(operands):
        outs = _partitioned_call(kind, operands)
        if outs is not None:
            return outs
    outs = _ffi_call(kind, *operands)
    return tuple(_summed_to(out, varying, _vma(a))
                 for out, a in zip(outs, (x, w, w)))


# -- Explicit mesh axes: the call in a shard_map -------------------------------
#
# On a mesh of Explicit axes (jax.make_mesh's default, under jax.set_mesh)
# every array's type carries its sharding, and a custom_vjp's backward must
# return its inputs' types. The shardings are then known when the step is
# traced, so the call goes into a shard_map over them: per-device kernels
# on the local rows, dW / dB psum'd by the shard_map path above (_summed_to),
# and every result resharded to its input's type.

def _explicit_sharding(a):
    """(mesh, spec padded to a's rank) of a's type where its mesh has
    Explicit axes, else None."""
    sharding = getattr(jax.typeof(a), "sharding", None)
    mesh = getattr(sharding, "mesh", None)
    explicit = tuple(getattr(mesh, "explicit_axes", ()) or ())
    if not explicit or getattr(mesh, "empty", True):
        return None
    spec = tuple(sharding.spec)
    return mesh, spec + (None,) * (a.ndim - len(spec))


def _explicit_mesh(arrays):
    """The Explicit mesh that shards any of `arrays` by its type, else
    None."""
    for a in arrays:
        found = _explicit_sharding(a)
        if found is not None and any(d is not None for d in found[1]):
            return found[0]
    return None


def _explicit_call(kind, operands, like, mesh):
    from jax.sharding import NamedSharding, PartitionSpec as P
    x = operands[1]
    found = _explicit_sharding(x)
    spec = found[1] if found is not None else (None,) * x.ndim
    full, stat, rep = P(*spec[:-1], None), P(*spec[:-1]), P()
    nstats = len(operands) - 3
    specs = (full, full) + (stat,) * nstats + (rep,)
    # The kernel needs whole rows (N, a sharded hidden dim, is gathered)
    # and the statistics and dy split as x's rows.
    operands = [jax.sharding.reshard(a, NamedSharding(mesh, s_))
                for a, s_ in zip(operands, specs)]
    outs = jax.shard_map(
        lambda *ops: tuple(_backward(kind, ops[0], ops[1], ops[2:-1],
                                     ops[-1], like=())),
        mesh=mesh, in_specs=specs,
        out_specs=(full,) + (rep,) * (len(like) - 1))(*operands)
    return tuple(jax.sharding.reshard(out, jax.typeof(a).sharding)
                 for out, a in zip(outs, like))


# -- sharded jit: the call as a custom_partitioning ---------------------------
#
# XLA's SPMD partitioner knows nothing of our FFI call: under a sharded jit
# it would gather the operands and run the whole backward on every device.
# Wrapped in jax.experimental.custom_partitioning, the call tells it (Shardy
# rule: plan.sharding_rule) that the rows may stay sharded and the hidden dim
# must be replicated; `partition` then lowers one call per device on its
# rows, with dW / dB psum'd over the mesh axes that split the rows. On one
# device (a plain jit) custom_partitioning lowers its body: the same call.

_partitioned_fns = {}     # (kind, x rank) -> custom_partitioning function


def _batched(a):
    """Whether `a` is a vmap tracer (custom_partitioning has no batching
    rule: under vmap the call stays a plain FFI call, one launch per
    element)."""
    try:
        from jax._src.interpreters import batching
        return isinstance(a, batching.BatchTracer)
    except (ImportError, AttributeError):
        return False  # _partitioned_call's fallback still catches vmap


def _inside_named_axes():
    """Inside shard_map (manual mesh axes), pmap or a named vmap: the call
    is per device already (and shard_map with check_vma=False gives its
    operands no vma to tell)."""
    try:
        mesh = jax.sharding.get_abstract_mesh()
        if tuple(getattr(mesh, "manual_axes", ()) or ()):
            return True
    except (AttributeError, TypeError):
        pass
    try:
        from jax._src import core as jax_core
        return bool(jax_core.get_axis_env().axis_sizes)
    except (ImportError, AttributeError):
        return False


def _partitionable(operands):
    x = operands[1]
    return (plan.partition_enabled(os.environ) and x.ndim >= 2
            and int(np.prod(x.shape[:-1], dtype=np.int64)) > 0
            and not any(_batched(a) for a in operands)
            and not _inside_named_axes())


def _partitioned_call(kind, operands):
    """The call through its custom_partitioning function; None where JAX
    cannot take it (a transformation custom_partitioning has no rule for,
    as vmap): the caller then makes the plain call."""
    fn = _partitioned(kind, operands[1].ndim)
    try:
        return tuple(fn(*operands))
    except NotImplementedError as e:
        if "custom_partitioning" in str(e):
            return None
        raise


def _specs(kind, mesh, arg_shapes):
    """(arg shardings, result shardings, mesh axes to psum dW / dB over)
    of a partitioned call, from the shardings XLA proposes: the rows as
    x's (else dy's, else the statistics'), the hidden dim and the weight
    replicated; dx as x, dW / dB replicated."""
    from jax.sharding import NamedSharding, PartitionSpec as P
    nstats = len(arg_shapes) - 3
    nouts = 3 if kind == "layer" else 2
    if getattr(mesh, "empty", True):
        # No mesh to name the axes by (JAX hands GSPMD shardings): all
        # replicated, the whole call on every device, as unpartitioned.
        rep = _replicated([a.sharding for a in arg_shapes])
        return (rep,) * len(arg_shapes), (rep,) * nouts, ()
    specs = []
    for a in arg_shapes:
        s = a.sharding
        spec = s.spec if isinstance(s, NamedSharding) else ()
        specs.append(tuple(getattr(spec, "partitions", spec)))
    rows, sum_axes = plan.partition_rows(
        arg_shapes[1].shape, [specs[1], specs[0], *specs[2:2 + nstats]],
        dict(mesh.shape))
    full = NamedSharding(mesh, P(*rows, None))
    stats = NamedSharding(mesh, P(*rows))
    rep = NamedSharding(mesh, P())
    args = (full, full) + (stats,) * nstats + (rep,)
    return args, (full,) + (rep,) * (nouts - 1), sum_axes


def _replicated(shardings):
    """A replicated sharding over the devices of these (GSPMD) ones."""
    from jax._src.sharding_impls import GSPMDSharding
    devices = next(s._device_assignment for s in shardings if s is not None)
    return GSPMDSharding.get_replicated(devices)


def _partitioned(kind, rank):
    """The custom_partitioning function of (kind, x rank): operands (dy,
    x, *stats, w), results (dx, dW[, dB]), no workspace (each lowering's
    call has its own)."""
    key = (kind, rank)
    with _lock:
        if key in _partitioned_fns:
            return _partitioned_fns[key]
        from jax.experimental.custom_partitioning import custom_partitioning

        if kind == "layer":
            def body(dy, x, mean, rstd, w):
                return _ffi_call("layer", dy, x, mean, rstd, w)
        else:
            def body(dy, x, rstd, w):
                return _ffi_call("rms", dy, x, rstd, w)
        fn = custom_partitioning(body)

        def partition(mesh, arg_shapes, result_shape):
            args, outs, sum_axes = _specs(kind, mesh, arg_shapes)

            def lower_fn(*operands):
                dx, *grads = _ffi_call(kind, *operands)
                if sum_axes:
                    grads = [jax.lax.psum(g, sum_axes) for g in grads]
                return (dx, *grads)
            return mesh, lower_fn, outs, args

        def infer_sharding_from_operands(mesh, arg_shapes, result_shape):
            return _specs(kind, mesh, arg_shapes)[1]

        rule, replicated = plan.sharding_rule(kind, rank)
        try:
            fn.def_partition(
                partition=partition,
                infer_sharding_from_operands=infer_sharding_from_operands,
                sharding_rule=rule, need_replication_factors=replicated)
        except TypeError:  # a JAX without need_replication_factors:
            fn.def_partition(  # `partition` still asks N replicated
                partition=partition,
                infer_sharding_from_operands=infer_sharding_from_operands,
                sharding_rule=rule)
        _partitioned_fns[key] = fn
        return fn


def _vma(a):
    """The mesh axes `a` varies over inside shard_map (empty outside)."""
    aval = jax.typeof(a)
    vma = getattr(aval, "vma", None)
    if vma is None:  # JAX 0.10 on: the aval's ManualAxisType
        vma = getattr(getattr(aval, "manual_axis_type", None), "varying",
                      None)
    return frozenset(vma or ())


def _summed_to(out, varying, want):
    """`out`, computed per device over the axes `varying`, as the type of
    an input varying over `want`: summed over the others."""
    if not varying:
        return out
    axes = tuple(sorted(varying))
    pcast = getattr(jax.lax, "pcast", None)
    out = (pcast(out, axes, to="varying") if pcast is not None
           else jax.lax.pvary(out, axes))
    extra = tuple(sorted(varying - want))
    return jax.lax.psum(out, extra) if extra else out


# -- the forwards (XLA's) -----------------------------------------------------

def _layer_forward(x, w, b, eps, out_dtype=None):
    xf = x.astype(jnp.float32)
    mean = jnp.mean(xf, axis=-1)
    xc = xf - mean[..., None]
    rstd = jax.lax.rsqrt(jnp.mean(xc * xc, axis=-1) + eps)
    y = xc * rstd[..., None] * w.astype(jnp.float32) + b.astype(jnp.float32)
    return y.astype(out_dtype or x.dtype), mean, rstd


def _rms_forward(x, w, eps, out_dtype=None):
    xf = x.astype(jnp.float32)
    rstd = jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1) + eps)
    y = xf * rstd[..., None] * w.astype(jnp.float32)
    return y.astype(out_dtype or x.dtype), rstd


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4))
def _layer_norm(x, w, b, eps, out_dtype):
    return _layer_forward(x, w, b, eps, out_dtype)[0]


def _layer_norm_fwd(x, w, b, eps, out_dtype):
    y, mean, rstd = _layer_forward(x, w, b, eps, out_dtype)
    return y, (x, w, b, mean, rstd)


def _layer_norm_bwd(eps, out_dtype, res, dy):
    x, w, b, mean, rstd = res
    return tuple(_backward("layer", dy, x, (mean, rstd), w, (x, w, b)))


_layer_norm.defvjp(_layer_norm_fwd, _layer_norm_bwd)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _rms_norm(x, w, eps, out_dtype):
    return _rms_forward(x, w, eps, out_dtype)[0]


def _rms_norm_fwd(x, w, eps, out_dtype):
    y, rstd = _rms_forward(x, w, eps, out_dtype)
    return y, (x, w, rstd)


def _rms_norm_bwd(eps, out_dtype, res, dy):
    x, w, rstd = res
    return tuple(_backward("rms", dy, x, (rstd,), w, (x, w)))


_rms_norm.defvjp(_rms_norm_fwd, _rms_norm_bwd)


def _out_dtype(x, out_dtype):
    return jnp.dtype(out_dtype or x.dtype)


def layer_norm(x, weight=None, bias=None, eps=1e-5, out_dtype=None):
    """LayerNorm over x's last dim; weight and bias [N] or None (then 1 and
    0: their gradients are computed and dropped). The result has
    `out_dtype` (default x's); the incoming gradient is taken in x's dtype,
    which the kernel reads."""
    n = x.shape[-1] if x.ndim else 0
    w = jnp.ones((n,), x.dtype) if weight is None else weight
    b = jnp.zeros((n,), w.dtype) if bias is None else bias
    plan.check("layer", x.shape, x.dtype, w.shape, w.dtype, b.shape, b.dtype)
    # The kernel's dB has the weight's dtype: a bias of another dtype is
    # cast outside the custom_vjp, and JAX casts its gradient back.
    return _layer_norm(x, w, b.astype(w.dtype), float(eps),
                       _out_dtype(x, out_dtype))


def rms_norm(x, weight=None, eps=1e-6, out_dtype=None):
    """RMSNorm over x's last dim; weight [N] or None (then 1)."""
    n = x.shape[-1] if x.ndim else 0
    w = jnp.ones((n,), x.dtype) if weight is None else weight
    plan.check("rms", x.shape, x.dtype, w.shape, w.dtype)
    return _rms_norm(x, w, float(eps), _out_dtype(x, out_dtype))


def layer_norm_reference(x, weight=None, bias=None, eps=1e-5, out_dtype=None):
    """The same forward with XLA's own backward (jax.grad of plain jnp)."""
    n = x.shape[-1]
    w = jnp.ones((n,), x.dtype) if weight is None else weight
    b = jnp.zeros((n,), w.dtype) if bias is None else bias
    return _layer_forward(x, w, b, eps, out_dtype)[0]


def rms_norm_reference(x, weight=None, eps=1e-6, out_dtype=None):
    """The same forward with XLA's own backward."""
    w = jnp.ones((x.shape[-1],), x.dtype) if weight is None else weight
    return _rms_forward(x, w, eps, out_dtype)[0]
