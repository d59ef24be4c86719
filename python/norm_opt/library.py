#===- library.py - A compiled library and its checked functions -----------===#
"""Library: a shared library `norm-opt compile --emit=lib` wrote, loaded with
ctypes, each C function exposed as a Python callable that validates its
tensors (count, dtype, shape, strides, alignment, device) before the call and
raises NormRuntimeError with normrt_last_error() when the call fails.

Tensors are any objects with `shape`, `stride()`, `dtype`, `data_ptr()` and
`device` (torch tensors; tests use a stand-in). The caller passes the
function's inputs then its outputs, in order:

    lib = Library("librms.so")
    lib.rms_norm_backward(dy, x, rstd, w, dx, dw, stream=s)
"""

import ctypes
import os
import pathlib
import sys

from .errors import (ArgumentError, LibraryNotFoundError, NormRuntimeError,
                     SignatureError)
from . import signature as _signature

_STATUS_NAMES = {
    0: "NORMRT_SUCCESS", 1: "NORMRT_ERROR_NO_DRIVER",
    2: "NORMRT_ERROR_NO_DEVICE", 3: "NORMRT_ERROR_INVALID_ARGUMENT",
    4: "NORMRT_ERROR_MISALIGNED", 5: "NORMRT_ERROR_OUT_OF_RANGE",
    6: "NORMRT_ERROR_MODULE", 7: "NORMRT_ERROR_LAUNCH",
    8: "NORMRT_ERROR_OUT_OF_MEMORY", 9: "NORMRT_ERROR_DRIVER",
}


def _dtype_name(dtype):
    """"bfloat16" for torch.bfloat16, numpy's dtype('float32'), "float32"."""
    text = str(dtype)
    return text[len("torch."):] if text.startswith("torch.") else text


def _device_of(t):
    """("cuda", index) / ("cpu", None) from a tensor-like's `device`."""
    device = getattr(t, "device", None)
    if device is None:
        return None
    kind = getattr(device, "type", None)
    index = getattr(device, "index", None)
    if kind is None:
        text = str(device)
        kind, _, rest = text.partition(":")
        index = int(rest) if rest.isdigit() else None
    return kind, index


def _stream_handle(stream, tensors):
    """The CUstream to launch on: the argument (an int, None, or an object
    with `cuda_stream`), else torch's current stream of the tensors' device
    when they are torch tensors, else 0 (the legacy default stream)."""
    if stream is None:
        torch = sys.modules.get("torch")
        if torch is not None and tensors and isinstance(tensors[0],
                                                        torch.Tensor):
            return torch.cuda.current_stream(tensors[0].device).cuda_stream
        return 0
    if hasattr(stream, "cuda_stream"):
        return int(stream.cuda_stream)
    if isinstance(stream, int):
        return stream
    raise ArgumentError(f"stream must be an int (CUstream), None or a "
                        f"torch.cuda.Stream, got {type(stream).__name__}",
                        "stream")


def _nonunit(shape):
    return tuple(d for d in shape if d != 1)


class Function:
    """One C launcher of a Library; call it with the inputs then the outputs
    (see the module docstring)."""

    def __init__(self, library, sig, cfunc):
        self.library = library
        self.signature = sig
        self._cfunc = cfunc
        n_tensors = len(sig.tensors)
        n_ints = len(sig.params) - n_tensors - 1
        cfunc.argtypes = ([ctypes.c_void_p] * n_tensors +
                          [ctypes.c_int64] * n_ints + [ctypes.c_void_p])
        cfunc.restype = ctypes.c_int

    @property
    def name(self):
        return self.signature.name

    @property
    def cfunc(self):
        """The C launcher itself, a ctypes function (argtypes set: the
        tensors' data pointers, inputs then outputs; rows and cols of each
        domain; the row strides; the stream; it returns the normrt_status),
        for callers that pass raw pointers and sizes, e.g. to check the
        runtime's own argument checks. Nothing is validated on this path:
        calling the Function does that."""
        return self._cfunc

    def __repr__(self):
        args = ", ".join(t.describe() for t in self.signature.tensors)
        return f"<norm_opt function {self.name}({args})>"

    def arguments(self, *tensors, stream=None):
        """The C arguments for `tensors` (validated), without calling."""
        sig = self.signature
        fn = sig.name
        if len(tensors) != len(sig.tensors):
            ins = ", ".join(t.describe() for t in sig.inputs)
            outs = ", ".join(t.describe() for t in sig.outputs)
            raise ArgumentError(
                f"{fn} takes {len(sig.tensors)} tensors ({len(sig.inputs)} "
                f"inputs: {ins}; then {len(sig.outputs)} outputs: {outs}), "
                f"got {len(tensors)}", None)
        facts = [self._facts(spec, t) for spec, t in zip(sig.tensors,
                                                         tensors)]
        self._check_devices(facts)
        # (rows, cols) of each domain, from the tensors that follow it.
        domains = [self._domain([f for f in facts if f[0].domain == d],
                                sig.n_dim(d), sig.batch_rank(d))
                   for d in range(len(sig.domains))]
        strides = {}
        for spec, shape, stride, _, _ in facts:
            where = f"{fn}: {spec.describe()}"
            if spec.layout == "channels_first":
                if not self._contiguous(shape, stride):
                    raise ArgumentError(
                        f"{where} must be contiguous (a channels-first "
                        f"domain); got shape {shape} with strides {stride}",
                        spec.name)
                inner = 1
                for d in shape[sig.n_dim(spec.domain) + 1:]:
                    inner *= d
                strides[spec.col_stride] = inner
            elif spec.layout == "rows_by_cols":
                rows, cols = domains[spec.domain][:2]
                strides[spec.row_stride] = self._row_stride(
                    where, spec, shape, stride, rows, cols)
            elif spec.layout != "unused" and not self._contiguous(shape,
                                                                  stride):
                raise ArgumentError(
                    f"{where} must be contiguous; got shape {shape} with "
                    f"strides {stride}", spec.name)
        for spec, shape, _, ptr, _ in facts:
            numel = 1
            for d in shape:
                numel *= d
            if numel and not ptr:
                raise ArgumentError(f"{fn}: {spec.describe()} has a null "
                                    "data pointer", spec.name)
            if ptr % spec.element_bytes:
                raise ArgumentError(
                    f"{fn}: {spec.describe()}: data pointer {ptr:#x} is not "
                    f"aligned to {spec.element_bytes} bytes (its element "
                    "size)", spec.name)
        values = [f[3] for f in facts] + [v for pair in domains
                                          for v in pair]
        values += [strides[t.stride_param] for t in sig.strided]
        values.append(_stream_handle(stream, tensors))
        return values

    def __call__(self, *tensors, stream=None):
        status = self._cfunc(*self.arguments(*tensors, stream=stream))
        if status:
            raise NormRuntimeError(self.name, status,
                                   self.library.status_string(status),
                                   self.library.last_error())

    def workspace_bytes(self, *tensors, stream=None):
        """Bytes of workspace the call with these arguments takes, without
        running it (normrt_query_begin / normrt_query_end around the
        launcher: it plans and launches nothing). Allocated by the caller
        (16-byte aligned) and passed with Library.set_workspace, they keep
        our allocation out of a CUDA graph captured around the call."""
        args = self.arguments(*tensors, stream=stream)
        lib = self.library
        if not lib.has_workspace_query:
            raise NormRuntimeError(
                self.name, 3, "NORMRT_ERROR_INVALID_ARGUMENT",
                f"{lib.path} was built without the workspace query "
                "(normrt_query_begin); rebuild it")
        lib._query_begin()
        try:
            status = self._cfunc(*args)
        finally:
            size = ctypes.c_size_t(0)
            end = lib._query_end(ctypes.byref(size))
        if status or end:
            status = status or end
            raise NormRuntimeError(self.name, status,
                                   lib.status_string(status),
                                   lib.last_error())
        return size.value

    # -- checks ------------------------------------------------------------

    def _facts(self, spec, t):
        """(spec, shape, strides, data pointer, device) of one tensor."""
        where = f"{self.name}: {spec.describe()}"
        try:
            shape = tuple(int(d) for d in t.shape)
            stride = t.stride() if callable(t.stride) else t.stride
            stride = tuple(int(s) for s in stride)
            ptr = t.data_ptr() if callable(t.data_ptr) else t.data_ptr
            ptr = int(ptr)
            dtype = t.dtype
        except (AttributeError, TypeError) as e:
            raise ArgumentError(
                f"{where}: expected a tensor (shape, stride(), dtype, "
                f"data_ptr(), device), got {type(t).__name__} ({e})",
                spec.name) from None
        if _dtype_name(dtype) != spec.dtype_name:
            raise ArgumentError(f"{where}: dtype must be {spec.dtype_name}, "
                                f"got {_dtype_name(dtype)}", spec.name)
        if spec.layout != "unused" and len(shape) != len(spec.shape):
            raise ArgumentError(f"{where}: expected rank {len(spec.shape)}, "
                                f"got shape {shape}", spec.name)
        for i, (want, got) in enumerate(zip(spec.shape, shape)):
            if spec.layout != "unused" and want >= 0 and want != got:
                raise ArgumentError(f"{where}: dim {i} must be {want}, got "
                                    f"shape {shape}", spec.name)
        return spec, shape, stride, ptr, _device_of(t)

    def _check_devices(self, facts):
        first = None
        for spec, _, _, _, device in facts:
            where = f"{self.name}: {spec.describe()}"
            if device is None:
                raise ArgumentError(f"{where}: has no device", spec.name)
            if device[0] != "cuda":
                raise ArgumentError(f"{where} is on '{device[0]}'; every "
                                    "tensor must be on the GPU (cuda)",
                                    spec.name)
            if first is None:
                first = (spec, device)
            elif device != first[1]:
                raise ArgumentError(
                    f"{where} is on cuda:{device[1]} but "
                    f"{first[0].name} is on cuda:{first[1][1]}; all tensors "
                    "must be on one device", spec.name)

    def _domain(self, facts, n_dim=None, batch_rank=0):
        """(rows, cols) from the full tensors ([rows..., cols], or N at dim
        n_dim for channels_first), which must agree; the other tensors must
        fit them. Batched rows: (rows, cols, batch), batch the product of
        the first batch_rank dims."""
        fn = self.name
        lead = cols = None
        owner = full = None
        for spec, shape, _, _, _ in facts:
            if spec.layout not in ("rows_by_cols", "channels_first"):
                continue
            n = len(shape) - 1 if spec.layout == "rows_by_cols" else n_dim
            if lead is None:
                lead, cols, owner, full = (shape[:n] + shape[n + 1:],
                                           shape[n], spec, shape)
            elif shape != full and not (
                    spec.layout == "rows_by_cols" and shape[-1] == full[-1]
                    and _nonunit(shape) == _nonunit(full)):
                # (A full tensor may leave out unit dims the others have:
                # [32, 768] beside [32, 1, 1, 768], a pooled row's view.)
                raise ArgumentError(
                    f"{fn}: {spec.describe()} has shape {shape} but "
                    f"{owner.name} has {full}; the full tensors of a domain "
                    "must have one shape", spec.name)
        rows = 1
        for d in lead:
            rows *= d
        for spec, shape, _, _, _ in facts:
            where = f"{fn}: {spec.describe()}"
            # A rows / cols tensor may carry unit dims its type declares
            # (torch's keepdim statistics, [rows..., 1]).
            if spec.layout == "rows" and shape != lead and not (
                    len(shape) == len(spec.shape)
                    and _nonunit(shape) == _nonunit(lead)):
                raise ArgumentError(f"{where} must have shape {lead} (the "
                                    f"rows of {owner.name}), got {shape}",
                                    spec.name)
            if spec.layout == "cols" and shape != (cols,) and not (
                    len(shape) == len(spec.shape)
                    and _nonunit(shape) == _nonunit((cols,))):
                raise ArgumentError(f"{where} must have shape ({cols},) (the "
                                    f"cols of {owner.name}), got {shape}",
                                    spec.name)
            if spec.layout == "slab_rows" and (
                    tuple(shape[:batch_rank]) != tuple(lead[:batch_rank])):
                raise ArgumentError(
                    f"{where} must start with the samples {lead[:batch_rank]}"
                    f" of {owner.name}, got {shape}", spec.name)
            if spec.layout == "batch_cols":
                want = tuple(lead[:batch_rank]) + (cols,)
                if shape != want and not (len(shape) == len(spec.shape)
                                          and _nonunit(shape)
                                          == _nonunit(want)):
                    raise ArgumentError(
                        f"{where} must have shape {want} (the samples and "
                        f"cols of {owner.name}), got {shape}", spec.name)
            if spec.layout == "rows_or_cols" and shape not in ((rows,),
                                                               (cols,)):
                raise ArgumentError(f"{where} must have shape ({rows},) or "
                                    f"({cols},), got {shape}", spec.name)
            if spec.layout == "scalar" and shape != ():
                raise ArgumentError(f"{where} must be 0-d, got {shape}",
                                    spec.name)
        if cols < 1:
            raise ArgumentError(f"{fn}: {owner.describe()}: the last dim "
                                "must be >= 1", owner.name)
        if batch_rank:
            batch = 1
            for d in lead[:batch_rank]:
                batch *= d
            return rows, cols, batch
        return rows, cols

    @staticmethod
    def _contiguous(shape, stride):
        expected = 1
        for d, s in reversed(list(zip(shape, stride))):
            if d != 1 and s != expected:
                return False
            expected *= d
        return True

    @staticmethod
    def _row_stride(where, spec, shape, stride, rows, cols):
        """The one row stride (elements) of a [rows..., cols] tensor: unit
        stride along cols, the leading dims collapsible into rows."""
        if cols > 1 and stride[-1] != 1:
            raise ArgumentError(
                f"{where}: the last dim must be contiguous (stride 1), got "
                f"strides {stride}; call .contiguous()", spec.name)
        row = None
        expected = None
        for d, s in reversed(list(zip(shape[:-1], stride[:-1]))):
            if d == 1:
                continue
            if row is None:
                row = expected = s
            elif s != expected:
                raise ArgumentError(
                    f"{where}: the leading dims {shape[:-1]} with strides "
                    f"{stride[:-1]} do not collapse into rows with one row "
                    "stride; call .contiguous()", spec.name)
            expected *= d
        if row is None:  # at most one row: any stride will do
            row = cols
        if row < cols:
            raise ArgumentError(f"{where}: row stride {row} is smaller than "
                                f"the row ({cols}): rows overlap", spec.name)
        return row


class Library:
    """A compiled library: `Library("libX.so")` loads it and its signature
    (libX.json, else libX.h); each launcher is an attribute and in
    `functions`."""

    def __init__(self, path, signature=None):
        self.path = pathlib.Path(path)
        if not self.path.is_file():
            raise LibraryNotFoundError(f"no compiled library at {self.path}")
        self.signature_path = self._find_signature(signature)
        text = self.signature_path.read_text()
        if self.signature_path.suffix == ".json":
            sigs = _signature.parse_json(text, str(self.signature_path))
        else:
            sigs = _signature.parse_header(text, str(self.signature_path))
        try:
            self._dll = ctypes.CDLL(str(self.path.resolve()))
        except OSError as e:
            raise LibraryNotFoundError(f"cannot load {self.path}: {e}") \
                from None
        self._last_error = self._dll.normrt_last_error
        self._last_error.restype = ctypes.c_char_p
        self._last_error.argtypes = []
        self._status_string = getattr(self._dll, "normrt_status_string",
                                      None)
        if self._status_string is not None:
            self._status_string.restype = ctypes.c_char_p
            self._status_string.argtypes = [ctypes.c_int]
        # Libraries built before the runtime had the workspace query
        # (cached ones, say) lack it: workspace_bytes then says so.
        self._query_begin = getattr(self._dll, "normrt_query_begin", None)
        self._query_end = getattr(self._dll, "normrt_query_end", None)
        if self._query_begin is not None and self._query_end is not None:
            self._query_begin.restype = ctypes.c_int
            self._query_begin.argtypes = []
            self._query_end.restype = ctypes.c_int
            self._query_end.argtypes = [ctypes.c_void_p]
        # The framework allocator for captures (norm_opt.torch's C++ ops);
        # None in a library built before it.
        self._set_capture_allocator = getattr(
            self._dll, "normrt_set_capture_allocator", None)
        self._set_workspace = self._dll.normrt_set_workspace
        self._set_workspace.restype = ctypes.c_int
        self._set_workspace.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                        ctypes.c_size_t]
        self.functions = {}
        for name, sig in sigs.items():
            try:
                cfunc = getattr(self._dll, name)
            except AttributeError:
                raise SignatureError(
                    f"{self.signature_path} lists {name}, which "
                    f"{self.path} does not export") from None
            self.functions[name] = Function(self, sig, cfunc)

    def _find_signature(self, given):
        if given is not None:
            p = pathlib.Path(given)
            if not p.is_file():
                raise LibraryNotFoundError(f"no signature file at {p}")
            return p
        for suffix in (".json", ".h"):
            p = self.path.with_suffix(suffix)
            if p.is_file():
                return p
        raise LibraryNotFoundError(
            f"no signature for {self.path}: neither "
            f"{self.path.with_suffix('.json').name} nor "
            f"{self.path.with_suffix('.h').name} beside it")

    def __getattr__(self, name):
        functions = self.__dict__.get("functions", {})
        if name in functions:
            return functions[name]
        raise AttributeError(f"{self.path.name} has no function '{name}' "
                             f"(it has: {', '.join(functions) or 'none'})")

    def __getitem__(self, name):
        return getattr(self, name)

    def __repr__(self):
        return f"<norm_opt.Library {self.path} ({', '.join(self.functions)})>"

    @property
    def has_workspace_query(self):
        """Whether the library's runtime has normrt_query_begin/_end."""
        return self._query_begin is not None and self._query_end is not None

    def set_workspace(self, stream, ptr, nbytes):
        """normrt_set_workspace: [ptr, ptr + nbytes) (16-byte aligned) is the
        workspace of the current context and `stream` (an int CUstream, None
        or a torch.cuda.Stream) until it is set again; ptr None or 0 gives
        the runtime's own back. The runtime never frees it."""
        handle = _stream_handle(stream, ())
        status = self._set_workspace(handle, ptr or None, nbytes if ptr else 0)
        if status:
            raise NormRuntimeError("normrt_set_workspace", status,
                                   self.status_string(status),
                                   self.last_error())

    def last_error(self):
        """normrt_last_error() of the calling thread."""
        return self._last_error().decode(errors="replace")

    def status_string(self, status):
        if self._status_string is not None:
            return self._status_string(status).decode()
        return _STATUS_NAMES.get(status, "NORMRT_ERROR_UNKNOWN")
