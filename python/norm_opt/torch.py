#===- torch.py - norm-opt's backward kernels as PyTorch ops ---------------===#
"""PyTorch integration (needs torch; the rest of norm_opt does not).

* Custom ops (torch.library: a schema, a CUDA impl and register_fake for
  meta/fake tensors, so torch.compile traces them without a graph break):
    torch.ops.norm_opt.layer_norm_backward(dy, x, mean, rstd, weight)
        -> (dx, dweight, dbias)
    torch.ops.norm_opt.rms_norm_backward(dy, x, rstd, weight)
        -> (dx, dweight)
  x / dy: [..., N]; mean / rstd: the fp32 statistics of the forward, one per
  row ([...] or [..., 1]); weight: [N]. They launch on torch's current
  stream, so they work inside CUDA graphs (torch.compile
  mode="reduce-overhead", torch.cuda.graph) once warmed up. Inside a
  capture their fp32 workspace comes from torch's allocator (its size from
  the launcher's query, cached per shape): a graph captured around them
  holds no allocation nodes of ours; eager calls use the runtime's own.
  Their CUDA kernels are C++ (_torch_ops.cpp, built against this torch on
  first use: about 20 us of host time per call), else Python (about 60).
    torch.ops.norm_opt.launch(key, inputs) -> outputs
  one compiled region of the torch.compile route (below): the key names a
  library the route compiled from a region of Inductor's backward graph.
* layer_norm / rms_norm / group_norm (functional) and LayerNorm / RMSNorm
  / GroupNorm (drop-in subclasses of torch.nn's): the forward is torch's,
  the backward ours (GroupNorm: NCHW, or channels last on a 4-D
  channels-last x; f32 and bf16). adaln_modulate / AdaLNModulation: DiT's
  LN(x) * (1 + scale) + shift, its backward one of our kernels.
* enable_compile_routing(): torch.compile runs the recognition pass on
  Inductor's backward graphs (norm_opt.compile_route) and launches every
  region it fuses, whatever the model's spelling.
  Inputs our kernels do not cover (CPU tensors, no weight, more than one
  normalized dim, other dtypes, no grad needed) take torch's path.

Libraries come from norm_opt.kernels: compiled ahead of time
($NORM_OPT_LIBRARY_PATH), cached, or compiled on first use when norm-opt is
available (the chip from the device, or $NORM_OPT_CHIP). preload() loads
them before a CUDA-graph capture or a timed region.
"""

import ctypes
import math
import os
import pathlib
import sys
import threading
import types
import warnings

import torch
import torch.nn.functional as F

from . import kernels
from .errors import NormRuntimeError

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# GroupNorm's (the slab kernel's, checked on the GPU in these two).
GROUP_NORM_DTYPES = (torch.float32, torch.bfloat16)

_functions = {}
_lock = threading.Lock()
# Calls of our backward kernels (eager and torch.compile; a CUDA-graph
# replay runs none): tests check that they ran. `launches` (a property of
# this module, below) adds the C++ ops' count.
_py_launches = 0


def chip_of(device):
    """The --chip for a CUDA device: sm_90a on Hopper (9.0), else sm_XY."""
    env = os.environ.get("NORM_OPT_CHIP")
    if env:
        return env
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}" + ("a" if (major, minor) == (9, 0) else "")


_by_device = {}


def _kernel(kind, n, dtype, weight_dtype, device):
    """kernel(), cached by what the call sites have at hand."""
    key = (kind, n, dtype, weight_dtype, device)
    fn = _by_device.get(key)
    if fn is None:
        fn = _by_device[key] = kernel(kind, n, dtype, weight_dtype, device)
    return fn


def _run(device, fn, *tensors):
    """_launch on `device`, made current only if it is not already."""
    if torch.cuda.current_device() == device.index:
        _launch(fn, device, *tensors)
    else:
        with torch.cuda.device(device):
            _launch(fn, device, *tensors)


def _loaded_once(key, load):
    """_functions[key], made by `load()` the first time (one thread)."""
    fn = _functions.get(key)
    if fn is None:
        with _lock:
            fn = _functions.get(key)
            if fn is None:
                fn = _functions[key] = load()
    return fn


def kernel(kind, n, dtype, weight_dtype, device):
    """The norm_opt.Function of one backward kernel (loaded once)."""
    chip = chip_of(device)
    key = (kind, int(n), kernels.mlir_dtype(dtype),
           kernels.mlir_dtype(weight_dtype), chip)
    return _loaded_once(key, lambda: kernels.library(
        kind, n, dtype, weight_dtype, chip)[kernels.function_name(kind)])


def preload(hidden_sizes, dtypes=(torch.bfloat16,), weight_dtypes=None,
            kinds=kernels.KINDS, device=None):
    """Loads (compiling if needed) the kernels for these sizes and dtypes."""
    device = torch.device(device or "cuda")
    for kind in kinds:
        for n in hidden_sizes:
            for dtype in dtypes:
                for wdtype in (weight_dtypes or (dtype,)):
                    kernel(kind, n, dtype, wdtype, device)


# What a call of one kernel keeps from the last call with the same shapes,
# strides, dtypes, device and pointer alignment (the launcher's plan depends
# on the pointers' alignment: vector or scalar kernel): everything but the
# pointers and the stream. The first call of a key takes the checked path
# (Function.arguments: every shape, stride, dtype and device checked, with
# the messages of norm_opt.Library); later calls only read the pointers.
class _Call:
    __slots__ = ("cfunc", "ints", "nbytes", "library", "set_workspace",
                 "name")

    def __init__(self, fn, ints, nbytes):
        self.cfunc = fn._cfunc
        self.ints = ints
        self.nbytes = nbytes
        self.library = fn.library
        # Set only when there is a workspace to hand over.
        self.set_workspace = fn.library._set_workspace if nbytes else None
        self.name = fn.name


_calls = {}


def _plan_call(fn, device, tensors, stream):
    """The checked first call of a key: the C arguments but the pointers
    and the stream, and the workspace bytes (the launcher's query)."""
    args = fn.arguments(*tensors, stream=stream)
    pointers = len(fn.signature.tensors)
    library = getattr(fn, "library", None)
    # A library built before the query: the runtime's own workspace.
    nbytes = (fn.workspace_bytes(*tensors, stream=stream)
              if library is None or library.has_workspace_query else 0)
    return _Call(fn, tuple(args[pointers:-1]), nbytes)


def _launch(fn, device, *tensors):
    """fn(*tensors) on torch's current stream; while the stream captures a
    CUDA graph, with its workspace from torch's allocator (the graph's
    pool; set for the stream around the call), so the graph holds no
    allocation of ours."""
    stream = torch.cuda.current_stream(device).cuda_stream
    ptrs = [t.data_ptr() for t in tensors]
    key = (fn, device.index, tuple(p & 15 for p in ptrs),
           tuple(t.shape for t in tensors), tuple(t.stride() for t in tensors),
           tuple(t.dtype for t in tensors))
    call = _calls.get(key)
    if call is None:
        call = _calls[key] = _plan_call(fn, device, tensors, stream)
    if call.nbytes == 0 or not torch.cuda.is_current_stream_capturing():
        # Eager: the runtime's own workspace (kept per context and stream).
        status = call.cfunc(*ptrs, *call.ints, stream)
    else:
        workspace = torch.empty(call.nbytes, dtype=torch.uint8, device=device)
        call.set_workspace(stream, workspace.data_ptr(), call.nbytes)
        try:
            status = call.cfunc(*ptrs, *call.ints, stream)
        finally:
            call.set_workspace(stream, None, 0)
    if status:
        lib = call.library
        raise NormRuntimeError(call.name, status, lib.status_string(status),
                               lib.last_error())


def _as_rows(t, rows, n):
    """t as [rows, n] with unit stride along n and one row stride >= n."""
    t2 = t.reshape(rows, n)
    if (n > 1 and t2.stride(1) != 1) or (rows > 1 and t2.stride(0) < n):
        t2 = t2.contiguous()
    return t2


def _stats(t, rows):
    t = t.reshape(rows)
    if t.dtype is not torch.float32:
        t = t.to(torch.float32)
    return t if t.is_contiguous() else t.contiguous()


# The ops are defined with torch.library's low-level Library (define + a
# CUDA impl + register_fake) rather than torch.library.custom_op: the
# dispatcher then calls the impl directly, where custom_op's wrapper costs
# about 7 us per call (bench/torch_host_cost.py).
_library = torch.library.Library("norm_opt", "DEF")
_library.define("layer_norm_backward(Tensor dy, Tensor x, Tensor mean, "
                "Tensor rstd, Tensor weight) -> (Tensor, Tensor, Tensor)")
_library.define("rms_norm_backward(Tensor dy, Tensor x, Tensor rstd, "
                "Tensor weight) -> (Tensor, Tensor)")


def layer_norm_backward(dy: torch.Tensor, x: torch.Tensor,
                        mean: torch.Tensor, rstd: torch.Tensor,
                        weight: torch.Tensor
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n = x.shape[-1]
    rows = math.prod(x.shape[:-1])
    w = weight if weight.is_contiguous() else weight.contiguous()
    # Outputs are fresh tensors (custom ops must not return views).
    dx = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    dw, db = torch.empty_like(w), torch.empty_like(w)
    fn = _kernel("layer", n, x.dtype, w.dtype, x.device)
    global _py_launches
    _py_launches += 1
    # bias is not read by the kernel (dbias = sum of dy): pass weight.
    _run(x.device, fn, _as_rows(dy.to(x.dtype), rows, n),
         _as_rows(x, rows, n), _stats(mean, rows), _stats(rstd, rows),
         w, w, dx.view(rows, n), dw, db)
    return dx, dw, db


@torch.library.register_fake("norm_opt::layer_norm_backward")
def _(dy, x, mean, rstd, weight):
    return (x.new_empty(x.shape), weight.new_empty(weight.shape),
            weight.new_empty(weight.shape))


def rms_norm_backward(dy: torch.Tensor, x: torch.Tensor, rstd: torch.Tensor,
                      weight: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    n = x.shape[-1]
    rows = math.prod(x.shape[:-1])
    w = weight if weight.is_contiguous() else weight.contiguous()
    dx = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    dw = torch.empty_like(w)
    fn = _kernel("rms", n, x.dtype, w.dtype, x.device)
    global _py_launches
    _py_launches += 1
    _run(x.device, fn, _as_rows(dy.to(x.dtype), rows, n),
         _as_rows(x, rows, n), _stats(rstd, rows), w, dx.view(rows, n), dw)
    return dx, dw


def _address(cfunc):
    return ctypes.cast(cfunc, ctypes.c_void_p).value or 0


_DTYPES = {"Float": torch.float32, "Half": torch.float16,
           "BFloat16": torch.bfloat16}


def _resolve(kind, n, dtype, weight_dtype, device):
    """The C++ ops' first call of a (kind, N, dtypes, device): load the
    library (norm_opt.kernels) and hand its function pointers over."""
    fn = _kernel(kind, n, _DTYPES[dtype], _DTYPES[weight_dtype],
                 torch.device("cuda", device))
    lib = fn.library
    _cpp.register_kernel(0 if kind == "layer" else 1, n, dtype, weight_dtype,
                         device, _address(fn._cfunc),
                         _address(lib._set_capture_allocator)
                         if lib._set_capture_allocator else 0,
                         _address(lib._last_error))


def _load_cpp_ops():
    """The CUDA kernels of the ops in C++ (_torch_ops.cpp), built against
    this torch on first use (torch.utils.cpp_extension, cached in its build
    directory); None where that fails or $NORM_OPT_TORCH_OPS=python, and
    the Python kernels above serve. $NORM_OPT_TORCH_OPS=cpp makes a build
    failure an error."""
    mode = os.environ.get("NORM_OPT_TORCH_OPS", "auto")
    if mode not in ("auto", "cpp", "python"):
        raise ValueError(f"$NORM_OPT_TORCH_OPS must be auto, cpp or python, "
                         f"got {mode!r}")
    if mode == "python":
        return None
    try:
        from torch.utils import cpp_extension
        source = pathlib.Path(__file__).with_name("_torch_ops.cpp")
        module = cpp_extension.load(
            name="norm_opt_torch_ops", sources=[str(source)],
            extra_cflags=["-O2"], with_cuda=True, verbose=False)
    except Exception as e:  # no compiler, no CUDA headers, ...
        if mode == "cpp":
            raise
        warnings.warn(f"norm_opt.torch: the C++ ops could not be built "
                      f"({type(e).__name__}: {e}); using the Python ones "
                      "(about 60 us of host time per call instead of ~10)")
        return None
    module.set_resolver(_resolve)
    return module


_cpp = _load_cpp_ops()
if _cpp is None:
    _library.impl("layer_norm_backward", layer_norm_backward, "CUDA")
    _library.impl("rms_norm_backward", rms_norm_backward, "CUDA")


class _Module(types.ModuleType):
    @property
    def launches(self):
        return _py_launches + (_cpp.launches() if _cpp is not None else 0)

    @launches.setter
    def launches(self, value):
        global _py_launches
        _py_launches = value - (_cpp.launches() if _cpp is not None else 0)


sys.modules[__name__].__class__ = _Module


@torch.library.register_fake("norm_opt::rms_norm_backward")
def _(dy, x, rstd, weight):
    return x.new_empty(x.shape), weight.new_empty(weight.shape)


class _LayerNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        y, mean, rstd = torch.ops.aten.native_layer_norm(
            x, [x.shape[-1]], weight, bias, eps)
        ctx.save_for_backward(x, weight, mean, rstd)
        ctx.has_bias = bias is not None
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, mean, rstd = ctx.saved_tensors
        dx, dw, db = torch.ops.norm_opt.layer_norm_backward(dy, x, mean, rstd,
                                                            weight)
        return dx, dw, (db if ctx.has_bias else None), None


class _RMSNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        fused = getattr(torch.ops.aten, "_fused_rms_norm", None)
        if fused is not None:
            # torch's own fused forward also returns the fp32 rstd ([..., 1]).
            y, rstd = fused(x, [x.shape[-1]], weight, eps)
        else:
            y = F.rms_norm(x, (x.shape[-1],), weight, eps)
            # The statistic the forward does not return; fp32, per row,
            # summed in fp32 without an fp32 copy of x.
            rstd = torch.rsqrt(torch.linalg.vector_norm(
                x, dim=-1, dtype=torch.float32).square() / x.shape[-1] + eps)
        ctx.save_for_backward(x, weight, rstd)
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, rstd = ctx.saved_tensors
        dx, dw = torch.ops.norm_opt.rms_norm_backward(dy, x, rstd, weight)
        return dx, dw, None


def _covered(x, normalized_shape, weight):
    """Whether our backward handles this call (else torch's path)."""
    shape = ((normalized_shape,) if isinstance(normalized_shape, int)
             else tuple(normalized_shape))
    return (x.is_cuda and weight is not None and len(shape) == 1
            and x.dim() >= 1 and shape[0] == x.shape[-1]
            and x.dtype in SUPPORTED_DTYPES
            and weight.dtype in SUPPORTED_DTYPES
            and torch.is_grad_enabled()
            and (x.requires_grad or weight.requires_grad))


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """torch.nn.functional.layer_norm with our backward."""
    if _covered(x, normalized_shape, weight):
        if _cpp is not None and not torch.compiler.is_compiling():
            return _cpp.layer_norm(x, weight, bias, eps)  # C++ autograd
        return _LayerNormFunction.apply(x, weight, bias, eps)
    return F.layer_norm(x, normalized_shape, weight, bias, eps)


def rms_norm(x, normalized_shape, weight=None, eps=None):
    """torch.nn.functional.rms_norm with our backward."""
    if eps is None:
        eps = torch.finfo(x.dtype).eps
    if _covered(x, normalized_shape, weight):
        if _cpp is not None and not torch.compiler.is_compiling():
            return _cpp.rms_norm(x, weight, eps)  # C++ autograd
        return _RMSNormFunction.apply(x, weight, eps)
    return F.rms_norm(x, normalized_shape, weight, eps)


class _GroupNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, groups, weight, bias, eps):
        n, c = x.shape[:2]
        # (torch's CUDA kernel takes x contiguous, as F.group_norm hands it.)
        y, mean, rstd = torch.ops.aten.native_group_norm(
            x.contiguous(), weight, bias, n, c, math.prod(x.shape[2:]),
            groups, eps)
        ctx.save_for_backward(x, weight, mean, rstd)
        ctx.groups, ctx.has_bias = groups, bias is not None
        return y

    @staticmethod
    def backward(ctx, dy):
        global _py_launches
        _py_launches += 1
        x, weight, mean, rstd = ctx.saved_tensors
        # Channels last (a 4-D x in that memory format) takes the channels-
        # last kernel on the NHWC views; otherwise contiguous NCHW.
        last = x.dim() == 4 and not x.is_contiguous() and \
            x.is_contiguous(memory_format=torch.channels_last)
        perm = [0, *range(2, x.dim()), 1]
        if last:
            xk = x.permute(perm)
            dyk = dy.contiguous(memory_format=torch.channels_last).permute(perm)
        else:
            xk, dyk = x.contiguous(), dy.contiguous()
        spatial = tuple(x.shape[2:])
        fn = _group_norm_kernel(x.shape[1], spatial, ctx.groups, x.dtype,
                                weight.dtype, last, x.device)
        dx = torch.empty_like(xk)
        dw, db = torch.empty_like(weight), torch.empty_like(weight)
        # (The bias is not read: its gradient is dy's sum; weight stands in.)
        _run(x.device, fn, dyk, xk, mean.float().contiguous(),
             rstd.float().contiguous(), weight, weight, dx, dw, db)
        if last:
            dx = dx.permute(0, x.dim() - 1, *range(1, x.dim() - 1))
        return dx, None, dw, (db if ctx.has_bias else None), None


def _group_norm_kernel(channels, spatial, groups, dtype, weight_dtype,
                       channels_last, device):
    """The norm_opt.Function of GroupNorm's backward (loaded once)."""
    chip = chip_of(device)
    key = ("group", int(channels), tuple(spatial), int(groups),
           kernels.mlir_dtype(dtype), kernels.mlir_dtype(weight_dtype),
           bool(channels_last), chip)
    return _loaded_once(key, lambda: kernels.group_norm_library(
        channels, spatial, groups, dtype, weight_dtype, channels_last,
        chip)[kernels.GROUP_NORM_FUNCTION])


def group_norm(x, num_groups, weight=None, bias=None, eps=1e-5):
    """torch.nn.functional.group_norm with our backward (a CUDA x of at
    least 3 dims with weight and bias; else torch's path)."""
    if (x.is_cuda and x.dim() >= 3 and weight is not None and bias is not None
            and x.dtype in GROUP_NORM_DTYPES
            and weight.dtype in GROUP_NORM_DTYPES
            and x.shape[1] % num_groups == 0 and x.numel() > 0
            and torch.is_grad_enabled()
            and (x.requires_grad or weight.requires_grad)):
        return _GroupNormFunction.apply(x, num_groups, weight, bias, eps)
    return F.group_norm(x, num_groups, weight, bias, eps)


class GroupNorm(torch.nn.GroupNorm):
    """torch.nn.GroupNorm whose backward runs norm-opt's kernel (NCHW, or
    channels last on a 4-D channels-last x)."""

    def forward(self, x):
        return group_norm(x, self.num_groups, self.weight, self.bias,
                          self.eps)


class _AdaLNFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, shift, scale, eps):
        h, mean, rstd = torch.ops.aten.native_layer_norm(
            x, [x.shape[-1]], None, None, eps)
        ctx.save_for_backward(x, scale, mean, rstd)
        return h * (1 + scale[:, None]) + shift[:, None]

    @staticmethod
    def backward(ctx, dy):
        global _py_launches
        _py_launches += 1
        x, scale, mean, rstd = ctx.saved_tensors
        b, s, n = x.shape
        fn = _adaln_kernel(n, x.dtype, x.device)
        dx = torch.empty_like(x, memory_format=torch.contiguous_format)
        dscale, dshift = torch.empty_like(scale), torch.empty_like(scale)
        _run(x.device, fn, scale.contiguous(), dy.contiguous(),
             x.contiguous(), mean.reshape(b, s).float().contiguous(),
             rstd.reshape(b, s).float().contiguous(), dx, dscale, dshift)
        return dx, dshift, dscale, None


def _adaln_kernel(n, dtype, device):
    """The norm_opt.Function of the adaLN backward (loaded once)."""
    chip = chip_of(device)
    key = ("adaln", int(n), kernels.mlir_dtype(dtype), chip)
    return _loaded_once(key, lambda: kernels.adaln_library(
        n, dtype, chip)[kernels.ADALN_FUNCTION])


def adaln_modulate(x, shift, scale, eps=1e-6):
    """DiT's adaLN modulation, layer_norm(x) * (1 + scale[:, None]) +
    shift[:, None] (a LayerNorm without affine; x [B, S, N], shift and
    scale [B, N]), whose backward (dx, dshift, dscale: sums over each
    sample's tokens) is one of our kernels: CUDA tensors of one dtype, f32
    or bf16; else torch's path."""
    if (x.is_cuda and x.dim() == 3 and scale.dim() == 2 and shift.dim() == 2
            and x.dtype in GROUP_NORM_DTYPES and scale.dtype == x.dtype
            and shift.dtype == x.dtype and x.numel() > 0
            and torch.is_grad_enabled()
            and (x.requires_grad or scale.requires_grad
                 or shift.requires_grad)):
        return _AdaLNFunction.apply(x, shift, scale, eps)
    h = F.layer_norm(x, (x.shape[-1],), None, None, eps)
    return h * (1 + scale[:, None]) + shift[:, None]


class AdaLNModulation(torch.nn.Module):
    """adaln_modulate as a module: forward(x, shift, scale), a LayerNorm
    of `hidden` without affine modulated per sample."""

    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.hidden, self.eps = hidden, eps

    def forward(self, x, shift, scale):
        return adaln_modulate(x, shift, scale, self.eps)


class LayerNorm(torch.nn.LayerNorm):
    """torch.nn.LayerNorm whose backward runs norm-opt's kernel."""

    def forward(self, x):
        return layer_norm(x, self.normalized_shape, self.weight, self.bias,
                          self.eps)


class RMSNorm(torch.nn.RMSNorm):
    """torch.nn.RMSNorm whose backward runs norm-opt's kernel."""

    def forward(self, x):
        return rms_norm(x, self.normalized_shape, self.weight, self.eps)


# --- torch.compile: the recognition pass on Inductor's backward graphs ------
#
# enable_compile_routing() installs a post-grad pass. On each backward graph
# Inductor compiles it (norm_opt.compile_route): records the graph (the
# fx_record format), asks norm_opt.fx_region which regions the recognition
# pass fuses, compiles each region with norm-opt (cached on disk by its
# MLIR, chip and compiler), and replaces it with one
# `norm_opt::launch(key, inputs)`. Everything else stays Inductor's, and a
# failure anywhere leaves the graph as it was, with a remark.

_library.define("launch(str key, Tensor[] inputs) -> Tensor[]")


class _RegionEntry:
    """One compiled region: its launcher (a norm_opt.Function) and, per
    output, its dtype and dims ((input, dim) or (-1, size))."""
    __slots__ = ("fn", "outputs", "launches")

    def __init__(self, fn, outputs):
        self.fn, self.outputs, self.launches = fn, outputs, 0


_regions = {}


def _region_outputs(entry, inputs):
    return [inputs[0].new_empty(
        [inputs[i].shape[d] if i >= 0 else d for i, d in dims], dtype=dtype)
        for dtype, dims in entry.outputs]


def _region(key):
    """The entry of `key`: registered by the route in this process, else
    (a graph Inductor took from its cache) loaded from the library cache,
    where the route left the outputs' shapes beside the library."""
    entry = _regions.get(key)
    if entry is None:
        import json
        function = key.rsplit("-", 2)[0]
        for root in kernels.search_path() + [kernels.cache_dir()]:
            for lib in sorted(root.glob(f"**/{key}/lib{function}.so")):
                side = lib.with_name("region.json")
                if side.is_file():
                    from .library import Library
                    outputs = [(getattr(torch, dtype), [tuple(d) for d in dims])
                               for dtype, dims in json.loads(side.read_text())]
                    register_region(key, Library(lib)[function], outputs)
                    return _regions[key]
        raise KeyError(f"norm_opt::launch: no compiled region {key}")
    return entry


def save_region_outputs(lib_path, outputs):
    """region.json beside a region's library: its outputs (dtype, dims)."""
    import json
    side = pathlib.Path(lib_path).with_name("region.json")
    if side.is_file():
        return
    tmp = side.with_name(f".region.{os.getpid()}.json")
    tmp.write_text(json.dumps([[str(dtype).split(".")[-1], dims]
                               for dtype, dims in outputs]))
    os.replace(tmp, side)


@torch.library.register_fake("norm_opt::launch")
def _(key, inputs):
    return _region_outputs(_region(key), inputs)


def _launch_region(key, inputs):
    """norm_opt::launch in Python (where the C++ ops are not built)."""
    entry = _region(key)
    tensors = [t if t.is_contiguous() else t.contiguous() for t in inputs]
    outs = [torch.empty(o.shape, dtype=o.dtype, device=tensors[0].device)
            for o in _region_outputs(entry, tensors)]
    global _py_launches
    _py_launches += 1
    _run(tensors[0].device, entry.fn, *tensors, *outs)
    return outs


def _region_ints(key, tensors):
    """The launcher's int parameters for these tensors (inputs, then
    outputs), checked: the C++ launch keeps them per shape."""
    entry = _region(key)  # registers it with the C++ ops if it was not
    if not tensors:
        return []
    args = entry.fn.arguments(*tensors, stream=0)
    return [int(a) for a in args[len(tensors):-1]]


if _cpp is None:
    _library.impl("launch", _launch_region, "CUDA")
else:
    _cpp.set_region_resolver(_region_ints)


def register_region(key, fn, outputs):
    """Makes `norm_opt::launch(key, ...)` run `fn` (a norm_opt.Function
    whose tensors are the inputs then the outputs); `outputs`: per output,
    (torch dtype, dims) as _RegionEntry keeps them."""
    _regions[key] = _RegionEntry(fn, outputs)
    if _cpp is not None:
        lib = fn.library
        _cpp.register_region(
            key, fn.name, _address(fn._cfunc),
            _address(lib._set_capture_allocator)
            if lib._set_capture_allocator else 0,
            _address(lib._last_error),
            [c10_name(dtype) for dtype, _ in outputs],
            [list(dims) for _, dims in outputs])


def c10_name(dtype):
    """c10's name of a torch dtype ("BFloat16")."""
    return {torch.float32: "Float", torch.float16: "Half",
            torch.bfloat16: "BFloat16", torch.float64: "Double"}[dtype]


_routing = None


def enable_compile_routing(log=None):
    """Makes torch.compile (Inductor) run norm-opt's fused kernels for the
    norm backwards of unmodified models, in whatever spelling: each
    backward graph's regions that the recognition pass fuses become one
    launch each (norm_opt.compile_route). Idempotent; returns the pass
    (its `regions` counts the regions it replaced, `remarks` says why the
    others were not). `log(text)` also gets every remark."""
    global _routing
    if _routing is None:
        from . import compile_route
        _routing = compile_route.install(log)
    return _routing
