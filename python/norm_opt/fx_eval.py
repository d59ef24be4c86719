#===- fx_eval.py - a recorded ATen graph evaluated in float64 -------------===#
"""The float64 reference of a recorded graph (fx_import's FORMAT 1): each
node computed in float64 over flat Python lists, with the roundings the
graph itself writes (a convert_element_type to bf16 / f16 / f32 rounds,
as the model asks), and nothing else rounded. It covers the ops
fx_import imports; CI checks the importer and the pipeline against it
(test/Numerics/recorded_regions.py). Standard library only; meant for
small shapes (a few hundred thousand elements).
"""

import math
import struct

from . import fx_import


def _round_f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def _round_bf16(v):
    if v != v or math.isinf(v):
        return v
    b = struct.unpack("<I", struct.pack("<f", v))[0]
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000  # to nearest even
    return struct.unpack("<f", struct.pack("<I", b))[0]


def _round_f16(v):
    try:
        return struct.unpack("<e", struct.pack("<e", v))[0]
    except OverflowError:
        return math.copysign(math.inf, v)


ROUND = {"f32": _round_f32, "bf16": _round_bf16, "f16": _round_f16,
         "f64": float}


def round_to(values, dtype):
    """values rounded to the MLIR float type `dtype` (floats kept)."""
    r = ROUND.get(dtype)
    return values if r is None or dtype == "f64" else [r(v) for v in values]


class T:
    """A tensor: its shape (ints) and its values, row-major."""
    __slots__ = ("shape", "data")

    def __init__(self, shape, data):
        self.shape, self.data = list(shape), data


def _strides(shape):
    out, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        out[i] = acc
        acc *= shape[i]
    return out


def _gather(t, shape, src_of):
    """A tensor of `shape` whose element at index i is t's at the index
    src_of(i) (a list: per dim of t, an output dim or None for 0)."""
    ts = _strides(t.shape)
    coef = [0] * len(shape)
    for d, src in enumerate(src_of):
        if src is not None and t.shape[d] != 1:
            coef[src] += ts[d]
    return T(shape, _walk(t.data, shape, coef))


def _walk(data, shape, coef):
    """data[sum(idx * coef)] for every index of `shape`, row-major."""
    offsets = [0]
    for size, c in zip(shape, coef):
        offsets = [o + k * c for o in offsets for k in range(size)]
    return [data[o] for o in offsets]


def broadcast_to(t, shape):
    off = len(shape) - len(t.shape)
    return _gather(t, shape, [off + d for d in range(len(t.shape))])


def _binary(kind, a, b):
    if kind == "add":
        return a + b
    if kind == "sub":
        return a - b
    if kind == "mul":
        return a * b
    if kind == "div":
        return a / b if b != 0 else math.copysign(math.inf, a) * \
            math.copysign(1, b) if a != 0 else math.nan
    if kind == "rsub":
        return b - a
    raise AssertionError(kind)


def _unary(kind, a):
    if kind == "neg":
        return -a
    if kind == "rsqrt":
        return 1.0 / math.sqrt(a) if a > 0 else (math.inf if a == 0
                                                 else math.nan)
    if kind == "sqrt":
        return math.sqrt(a) if a >= 0 else math.nan
    if kind == "exp":
        return math.exp(a)
    if kind == "reciprocal":
        return 1.0 / a if a != 0 else math.inf
    if kind == "tanh":
        return math.tanh(a)
    if kind == "abs":
        return abs(a)
    raise AssertionError(kind)


def evaluate(graph, inputs, sizes=None):
    """The graph's outputs (a list of T, float64) for `inputs` (name -> T);
    `sizes` binds symbolic sizes ("s0" -> int)."""
    sizes = sizes or {}
    env = {}

    def shape_of(node):
        return [sizes[d] if isinstance(d, str) else d for d in node["shape"]]

    def val(a):
        return env[a["node"]] if isinstance(a, dict) and "node" in a else a

    for n in graph["nodes"]:
        op, name = n["op"], n["name"]
        if op == "placeholder":
            if name in inputs:
                env[name] = inputs[name]
            continue
        if op == "output":
            return [env[r] for r in fx_import._refs(n["args"])]
        env[name] = _node(n, [val(a) for a in n.get("args", [])],
                          n.get("kwargs", {}), shape_of(n),
                          fx_import.DTYPES[n["dtype"]])
    raise ValueError("the graph has no output node")


def _node(n, args, kwargs, shape, dtype):
    """One node in float64; an op whose result is 16-bit rounds to it (as
    ATen's op does: the program's own rounding)."""
    out = _compute(n, args, kwargs, shape, dtype)
    if dtype in ("bf16", "f16") and n["target"] not in fx_import.VIEWS:
        out = T(out.shape, round_to(out.data, dtype))
    return out


def _compute(n, args, kwargs, shape, dtype):
    target = n["target"]
    x = args[0] if args else None
    if target in fx_import.VIEWS:
        if target in fx_import.PERMUTES:
            rank = len(x.shape)
            perm = fx_import.permutation(target, args, rank)
            # output dim i is input dim perm[i]
            src_of = [perm.index(d) for d in range(rank)]
            return _gather(x, shape, src_of)
        if target == "aten.expand.default":
            return broadcast_to(x, shape)
        return T(shape, x.data)  # unit dims only, or a copy: same order
    if target in fx_import.CASTS:
        return T(shape, round_to(x.data, dtype))
    if target in fx_import.UNARY:
        kind = fx_import.UNARY[target]
        return T(shape, [_unary(kind, v) for v in
                         broadcast_to(x, shape).data])
    if target in fx_import.BINARY:
        kind = fx_import.BINARY[target]
        a, b = args[0], args[1]
        if kind == "pow":
            e = float(b)
            return T(shape, [v ** e if e != 2 else v * v
                             for v in broadcast_to(a, shape).data])
        av = broadcast_to(a, shape).data if isinstance(a, T) else None
        bv = broadcast_to(b, shape).data if isinstance(b, T) else None
        count = math.prod(shape)
        av = av if av is not None else [float(a)] * count
        bv = bv if bv is not None else [float(b)] * count
        return T(shape, [_binary(kind, p, q) for p, q in zip(av, bv)])
    if target in fx_import.REDUCTIONS:
        rank = len(x.shape)
        dims = args[1] if len(args) > 1 else kwargs.get("dim")
        dims = sorted({d % rank for d in (dims if dims is not None
                                          else range(rank))})
        kept = [d for d in range(rank) if d not in dims]
        out_shape = [x.shape[d] for d in kept]
        sums = [[] for _ in range(math.prod(out_shape))]
        ks = _strides(out_shape)
        index = [0] * rank
        for v in x.data:
            o = sum(index[d] * ks[i] for i, d in enumerate(kept))
            sums[o].append(v)
            for d in range(rank - 1, -1, -1):
                index[d] += 1
                if index[d] < x.shape[d]:
                    break
                index[d] = 0
        count = math.prod(x.shape[d] for d in dims)
        div = count if target == "aten.mean.dim" else 1
        return T(shape, [math.fsum(s) / div for s in sums])
    if target in ("aten.full.default", "aten.scalar_tensor.default"):
        value = args[1] if target == "aten.full.default" else args[0]
        return T(shape, [float(value)] * math.prod(shape))
    raise ValueError(f"{n['name']}: {target} is not evaluated")
