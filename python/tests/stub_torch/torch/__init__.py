#===- __init__.py - A stand-in for torch (CI has none) --------------------===#
"""Just enough of torch's surface for norm_opt.torch's custom ops to run on
tensor stand-ins (no data, no GPU): tests/test_torch_stub.py uses it to
check what the ops hand to the kernel. Not a model of torch's numerics."""

import contextlib
import math
import sys
import types


class dtype:
    def __init__(self, name, size):
        self.name, self.itemsize = name, size

    def __str__(self):
        return f"torch.{self.name}"

    __repr__ = __str__


float32, float16, bfloat16 = (dtype("float32", 4), dtype("float16", 2),
                              dtype("bfloat16", 2))
uint8 = dtype("uint8", 1)


class device:
    def __init__(self, spec="cuda", index=None):
        if isinstance(spec, device):
            spec, index = spec.type, spec.index
        kind, _, rest = str(spec).partition(":")
        self.type = kind
        self.index = int(rest) if rest else (0 if kind == "cuda" else index)

    def __eq__(self, other):
        return (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))


_next_ptr = [0x7f0000000000]


def _contiguous_strides(shape):
    strides, step = [], 1
    for d in reversed(shape):
        strides.insert(0, step)
        step *= d
    return tuple(strides)


class Tensor:
    def __init__(self, shape, dtype=float32, device_=None, strides=None,
                 ptr=None):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.device = device_ or device("cuda")
        self._strides = strides or _contiguous_strides(self.shape)
        if ptr is None:
            ptr = _next_ptr[0]
            _next_ptr[0] += 1 << 24
        self._ptr = ptr
        self.requires_grad = False

    def stride(self, dim=None):
        return self._strides if dim is None else self._strides[dim]

    def data_ptr(self):
        return self._ptr

    def dim(self):
        return len(self.shape)

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    def is_contiguous(self):
        return all(d == 1 or s == c for d, s, c in
                   zip(self.shape, self._strides,
                       _contiguous_strides(self.shape)))

    def contiguous(self):
        return self if self.is_contiguous() else Tensor(
            self.shape, self.dtype, self.device)

    def reshape(self, *shape):
        """A view where torch makes one: contiguous, or merging leading
        dims that collapse (keeping the last); else a copy."""
        if len(shape) == 1 and isinstance(shape[0], tuple):
            shape = shape[0]
        shape = tuple(shape)
        if self.is_contiguous():
            return Tensor(shape, self.dtype, self.device, ptr=self._ptr)
        lead, st = self.shape[:-1], self._strides
        if (len(shape) == 2 and self.shape and shape[1] == self.shape[-1]
                and all(st[i] == st[i + 1] * lead[i + 1]
                        for i in range(len(lead) - 1))):
            return Tensor(shape, self.dtype, self.device,
                          strides=(st[-2] if lead else shape[1], st[-1]),
                          ptr=self._ptr)
        return Tensor(shape, self.dtype, self.device)

    view = reshape

    def to(self, dtype_):
        return self if dtype_ is self.dtype else Tensor(self.shape, dtype_,
                                                        self.device)

    def new_empty(self, shape):
        return Tensor(shape, self.dtype, self.device)

    def numel(self):
        return math.prod(self.shape)


def empty(shape, dtype=float32, device=None):
    return Tensor((shape,) if isinstance(shape, int) else shape, dtype, device)


def empty_like(t):
    return Tensor(t.shape, t.dtype, t.device)


class _CustomOp:
    def __init__(self, fn):
        self.fn, self.fake = fn, None

    def __call__(self, *args):
        return self.fn(*args)

    def register_fake(self, fn):
        self.fake = fn
        return fn


class _Library:
    ops = {}

    @staticmethod
    def custom_op(name, mutates_args, device_types=None):
        def wrap(fn):
            op = _CustomOp(fn)
            _Library.ops[name] = op
            return op
        return wrap

    class Library:
        """torch.library.Library: define() records a schema, impl() the
        kernel of a dispatch key."""

        def __init__(self, namespace, kind):
            self.namespace = namespace

        def define(self, schema):
            name = f"{self.namespace}::{schema.split('(')[0]}"
            _Library.ops.setdefault(name, _CustomOp(None))

        def impl(self, name, fn, key):
            _Library.ops[f"{self.namespace}::{name}"].fn = fn

    @staticmethod
    def register_fake(name):
        def wrap(fn):
            _Library.ops.setdefault(name, _CustomOp(None)).fake = fn
            return fn
        return wrap


library = _Library


class _Stream:
    cuda_stream = 0x5157


class _Cuda:
    @staticmethod
    def current_stream(device_=None):
        return _Stream()

    @staticmethod
    @contextlib.contextmanager
    def device(device_):
        yield

    @staticmethod
    def get_device_capability(device_=None):
        return (9, 0)

    @staticmethod
    def current_device():
        return 0

    @staticmethod
    def is_current_stream_capturing():
        return False


cuda = _Cuda()


class _Function:
    @classmethod
    def apply(cls, *args):
        raise NotImplementedError("stub torch: no autograd")


autograd = types.SimpleNamespace(Function=_Function)


class _Module:
    def __init__(self, *args, **kwargs):
        pass


nn = types.ModuleType("torch.nn")
nn.LayerNorm = nn.RMSNorm = nn.GroupNorm = nn.Module = _Module
nn.functional = types.ModuleType("torch.nn.functional")
sys.modules["torch.nn"] = nn
sys.modules["torch.nn.functional"] = nn.functional
