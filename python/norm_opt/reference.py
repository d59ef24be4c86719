#===- reference.py - The float64 reference of the norm backward -----------===#
"""The backward of LayerNorm / RMSNorm in float64: the one reference every
numeric check of norm-opt compares with (the GPU checks in test/gpu, the
benchmarks' error column in bench/, the CPU numerics in test/Numerics and
test/lib-python), and the one error measure they compare by (rel_l2).

From the inputs and the (f32) statistics the kernel is given:

  xhat = (x - mean) * rstd            (RMSNorm: x * rstd)
  wdy  = w * dy     ((w + 1) * dy when zero-centred; dy without a weight)
  dx   = rstd * (wdy - mean_n(wdy) - xhat * mean_n(xhat * wdy))
         (RMSNorm: without the mean_n(wdy) term)
  dw   = sum over the rows of dy * xhat
  db   = sum over the rows of dy

with the riders front ends add: dy scaled first (a loss scale), a residual
gradient added to dx, dW / dB accumulated into previous values. With
`scales=True` each result also comes with the magnitude of the terms it is
computed from (|rstd * wdy| for dx, the column sums of |dy * xhat| for dw
and of |dy| for db, plus |residual| / |previous| where those are added):
the scale a rounding error is relative to where the terms cancel
(rel_l2). `mutant` names a deliberately
wrong variant of the math (MUTANTS), for the self-checks that show a
comparison can fail.

The arguments are torch tensors (any dtype and device: computed in float64
where they are; `chunk_rows` bounds the float64 temporaries of a large
problem) or `Rows`, a float64 matrix of the standard library for the CPU
numerics (exact sums: math.fsum). Nothing beyond the standard library is
imported here; torch is used only through the tensors given.
"""

import itertools
import math
import operator
from functools import reduce

__all__ = ["MUTANTS", "Rows", "backward", "rel_l2", "statistics", "worst"]

# The wrong variants `mutant` selects: the core formula's mistakes, then
# forgetting a rider.
MUTANTS = (
    "dx-no-mean-wdy-term",        # LayerNorm's dx without mean_n(wdy)
    "dx-rms-with-mean-wdy-term",  # RMSNorm's dx with it
    "dx-no-projection-term",      # dx without xhat * mean_n(xhat * wdy)
    "dx-projection-sign-flipped",
    "dx-sum-instead-of-mean",     # sum_n where mean_n belongs
    "dx-no-outer-rstd",
    "xhat-not-centred",           # LayerNorm's xhat = x * rstd
    "w-not-plus-one",             # a zero-centred weight taken as is
    "w-plus-one-always",          # any weight taken as w + 1
    "dw-uses-w-times-dy",         # dw from w * dy * xhat
    "dw-uses-x-not-xhat",         # dw from dy * x
    "dw-db-first-row-only",       # dw / db summed over the first row only
    "no-dy-scale",
    "no-residual",
    "no-prev-dw",
    "no-prev-db",
)
KINDS = {"layer": "layer", "layer_norm": "layer", "rms": "rms",
         "rms_norm": "rms"}


# ---------------------------------------------------------------------------
# Rows: a float64 matrix of the standard library
# ---------------------------------------------------------------------------

class Rows:
    """Float64 values in one of three shapes, combined elementwise with
    +, -, *, / (with each other, broadcasting like torch, or with a
    number), abs() and ** 2:

      Rows.full(flat, n)     a [rows, n] block, from a flat row-major
                             sequence (list, array.array)
      Rows.column(values)    one value per row    ([rows, 1])
      Rows.vector(values)    one value per column ([n])

    `flat()` gives the values back as a flat list (row-major)."""

    __slots__ = ("kind", "data", "width")

    def __init__(self, kind, data, width):
        self.kind = kind    # "full", "column" or "vector"
        self.data = data    # full: a list of rows; else a list of values
        self.width = width  # columns (full, vector); 1 for a column

    @classmethod
    def full(cls, flat, n):
        n = int(n)
        if n < 1 or len(flat) % n:
            raise ValueError(f"Rows.full: {len(flat)} values are not rows "
                             f"of {n}")
        return cls("full", [flat[i:i + n] for i in range(0, len(flat), n)],
                   n)

    @classmethod
    def column(cls, values):
        return cls("column", list(values), 1)

    @classmethod
    def vector(cls, values):
        values = list(values)
        return cls("vector", values, len(values))

    @property
    def shape(self):
        if self.kind == "full":
            return (len(self.data), self.width)
        if self.kind == "column":
            return (len(self.data), 1)
        return (self.width,)

    def flat(self):
        if self.kind == "full":
            return list(itertools.chain.from_iterable(self.data))
        return list(self.data)

    def __len__(self):
        return len(self.data)

    def __repr__(self):
        return f"<Rows {self.kind} {self.shape}>"

    # -- elementwise ------------------------------------------------------

    def _map(self, fn):
        if self.kind == "full":
            return Rows("full", [list(map(fn, r)) for r in self.data],
                        self.width)
        return Rows(self.kind, list(map(fn, self.data)), self.width)

    def __abs__(self):
        return self._map(abs)

    def __neg__(self):
        return self._map(operator.neg)

    def __pow__(self, exponent):
        if exponent != 2:
            return NotImplemented
        if self.kind == "full":
            return Rows("full", [list(map(operator.mul, r, r))
                                 for r in self.data], self.width)
        return Rows(self.kind, list(map(operator.mul, self.data, self.data)),
                    self.width)

    def __add__(self, other):
        return _combine(operator.add, self, other)

    def __radd__(self, other):
        return _combine(operator.add, other, self)

    def __sub__(self, other):
        return _combine(operator.sub, self, other)

    def __rsub__(self, other):
        return _combine(operator.sub, other, self)

    def __mul__(self, other):
        return _combine(operator.mul, self, other)

    def __rmul__(self, other):
        return _combine(operator.mul, other, self)

    def __truediv__(self, other):
        return _combine(operator.truediv, self, other)

    def __rtruediv__(self, other):
        return _combine(operator.truediv, other, self)


def _combine(op, a, b):
    """op(a, b) elementwise, a and b Rows or numbers (at least one Rows),
    broadcast like torch ([rows, n] with [rows, 1] and [n])."""
    rep = itertools.repeat
    if not isinstance(b, Rows):
        if not isinstance(b, (int, float)):
            return NotImplemented
        if a.kind == "full":
            return Rows("full", [list(map(op, r, rep(b))) for r in a.data],
                        a.width)
        return Rows(a.kind, list(map(op, a.data, rep(b))), a.width)
    if not isinstance(a, Rows):
        if not isinstance(a, (int, float)):
            return NotImplemented
        if b.kind == "full":
            return Rows("full", [list(map(op, rep(a), r)) for r in b.data],
                        b.width)
        return Rows(b.kind, list(map(op, rep(a), b.data)), b.width)
    ka, kb = a.kind, b.kind
    if ka == kb:
        if len(a.data) != len(b.data) or a.width != b.width:
            raise ValueError(f"Rows: shapes {a.shape} and {b.shape} differ")
        if ka == "full":
            return Rows("full", [list(map(op, ra, rb))
                                 for ra, rb in zip(a.data, b.data)], a.width)
        return Rows(ka, list(map(op, a.data, b.data)), a.width)
    rows = a if ka == "full" else b if kb == "full" else None
    if rows is None:  # a column with a vector: the outer [rows, n]
        col, vec = (a, b) if ka == "column" else (b, a)
        out = [list(map(op, rep(s), vec.data)) if col is a
               else list(map(op, vec.data, rep(s))) for s in col.data]
        return Rows("full", out, vec.width)
    other = b if rows is a else a
    if other.kind == "column":
        if len(other.data) != len(rows.data):
            raise ValueError(f"Rows: shapes {a.shape} and {b.shape} do not "
                             "broadcast")
        if rows is a:
            out = [list(map(op, r, rep(s))) for r, s in zip(a.data, b.data)]
        else:
            out = [list(map(op, rep(s), r)) for s, r in zip(a.data, b.data)]
    else:
        if other.width != rows.width:
            raise ValueError(f"Rows: shapes {a.shape} and {b.shape} do not "
                             "broadcast")
        v = other.data
        if rows is a:
            out = [list(map(op, r, v)) for r in a.data]
        else:
            out = [list(map(op, v, r)) for r in b.data]
    return Rows("full", out, rows.width)


# ---------------------------------------------------------------------------
# The operations the formula needs, for each kind of array
# ---------------------------------------------------------------------------

class _RowsOps:
    """Rows: sums of values exactly rounded (math.fsum); sums of
    magnitudes (the scales) in row order."""

    @staticmethod
    def full(a):
        if not isinstance(a, Rows) or a.kind != "full":
            raise TypeError(f"expected Rows.full, got {a!r}")
        return a

    @staticmethod
    def column(a):
        if isinstance(a, Rows) and a.kind == "column":
            return a
        if isinstance(a, Rows):
            raise TypeError(f"expected Rows.column, got {a!r}")
        return Rows.column(a)

    @staticmethod
    def vector(a):
        if isinstance(a, Rows) and a.kind == "vector":
            return a
        if isinstance(a, Rows):
            raise TypeError(f"expected Rows.vector, got {a!r}")
        return Rows.vector(a)

    @staticmethod
    def width(a):
        return a.width

    @staticmethod
    def row_sum(a):
        return Rows("column", [math.fsum(r) for r in a.data], 1)

    @staticmethod
    def row_dot(a, b):
        return Rows("column", [math.fsum(map(operator.mul, ra, rb))
                               for ra, rb in zip(a.data, b.data)], 1)

    @staticmethod
    def row_mean(a):
        n = a.width
        return Rows("column", [math.fsum(r) / n for r in a.data], 1)

    @staticmethod
    def col_sums(a, scales):
        """(column sums, column sums of magnitudes or None)."""
        if not a.data:
            zeros = Rows("vector", [0.0] * a.width, a.width)
            return zeros, (zeros if scales else None)
        cols = list(zip(*a.data))
        sums = Rows("vector", [math.fsum(c) for c in cols], a.width)
        if not scales:
            return sums, None
        return sums, Rows("vector", [reduce(operator.add, map(abs, c), 0.0)
                                     for c in cols], a.width)

    @staticmethod
    def first_row(a):
        return Rows("full", a.data[:1], a.width)

    @staticmethod
    def sqrt(a):
        return a._map(math.sqrt)


class _TorchOps:
    """torch tensors (any dtype: taken to float64 where they are)."""

    @staticmethod
    def full(a):
        return a.double()

    @staticmethod
    def column(a):
        return a.double().reshape(-1, 1)

    @staticmethod
    def vector(a):
        return a.double()

    @staticmethod
    def width(a):
        return a.shape[-1]

    @staticmethod
    def row_sum(a):
        return a.sum(-1, keepdim=True)

    @staticmethod
    def row_dot(a, b):
        return (a * b).sum(-1, keepdim=True)

    @staticmethod
    def row_mean(a):
        return a.mean(-1, keepdim=True)

    @staticmethod
    def col_sums(a, scales):
        return a.sum(0), (a.abs().sum(0) if scales else None)

    @staticmethod
    def first_row(a):
        return a[:1]

    @staticmethod
    def sqrt(a):
        return a.sqrt()


def _ops_for(a):
    return _RowsOps if isinstance(a, Rows) else _TorchOps


def _kind(kind):
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got "
                         f"{kind!r}")
    return KINDS[kind]


# ---------------------------------------------------------------------------
# The reference
# ---------------------------------------------------------------------------

def statistics(kind, x, eps):
    """The forward's statistics of x recomputed in float64: (mean, rstd),
    one per row ([rows, 1]; mean None for RMSNorm), rstd = 1 / sqrt(var +
    eps) with var the mean of (x - mean)^2 (RMSNorm: of x^2)."""
    ops = _ops_for(x)
    x = ops.full(x)
    if _kind(kind) == "layer":
        mean = ops.row_mean(x)
        var = ops.row_mean((x - mean) ** 2)
    else:
        mean = None
        var = ops.row_mean(x * x)
    return mean, 1.0 / ops.sqrt(var + eps)


def _rows_of(ops, x, dy, rstd, mean, weight, residual, dy_scale, layer,
             zero_centered, results, scales, mu):
    """Every row-wise part of the backward over one block of rows: dx (its
    residual added), the column sums of this block (dw, db), and the scales
    of each when asked."""
    x, dy, rstd = ops.full(x), ops.full(dy), ops.column(rstd)
    n = ops.width(x)
    if dy_scale is not None and mu != "no-dy-scale":
        dy = dy * dy_scale
    if layer and mu != "xhat-not-centred":
        xhat = (x - ops.column(mean)) * rstd
    else:
        xhat = x * rstd
    if weight is None:
        wdy = dy
    else:
        weight = ops.vector(weight)
        if (zero_centered and mu != "w-not-plus-one") or \
                mu == "w-plus-one-always":
            weight = weight + 1.0
        wdy = dy * weight
    div = 1.0 if mu == "dx-sum-instead-of-mean" else n
    dx = wdy
    if (layer and mu != "dx-no-mean-wdy-term") or \
            (not layer and mu == "dx-rms-with-mean-wdy-term"):
        dx = dx - ops.row_sum(wdy) / div
    if mu != "dx-no-projection-term":
        proj = xhat * (ops.row_dot(xhat, wdy) / div)
        dx = dx + proj if mu == "dx-projection-sign-flipped" else dx - proj
    if mu != "dx-no-outer-rstd":
        dx = rstd * dx
    values, mags = {}, {}
    if scales:
        mags["dx"] = abs(rstd * wdy)
    if residual is not None:
        residual = ops.full(residual)
        if mu != "no-residual":
            dx = dx + residual
        if scales:
            mags["dx"] = mags["dx"] + abs(residual)
    values["dx"] = dx
    first_only = mu == "dw-db-first-row-only"
    if "dw" in results:
        if mu == "dw-uses-w-times-dy":
            term = wdy * xhat
        elif mu == "dw-uses-x-not-xhat":
            term = dy * x
        else:
            term = dy * xhat
        if first_only:
            term = ops.first_row(term)
        values["dw"], mags["dw"] = ops.col_sums(term, scales)
    if "db" in results:
        term = ops.first_row(dy) if first_only else dy
        values["db"], mags["db"] = ops.col_sums(term, scales)
    return values, {k: v for k, v in mags.items() if v is not None}


def backward(kind, x, dy, rstd, mean=None, weight=None, *,
             zero_centered=False, dy_scale=None, residual=None, dw_in=None,
             db_in=None, results=("dx", "dw", "db"), scales=False,
             mutant=None, chunk_rows=None):
    """The backward in float64 (the module docstring has the formula).

    kind: "layer" / "layer_norm" or "rms" / "rms_norm". x, dy (and
    residual): [rows, n]; rstd and mean (LayerNorm; ignored for RMSNorm):
    one per row ([rows] or [rows, 1]); weight, dw_in, db_in: [n] (weight
    None: no weight, w = 1). dy_scale: a number or a 0-d tensor. results:
    which of "dx", "dw", "db" to compute.

    Returns {name: float64 values} (torch tensors: dx [rows, n], dw and db
    [n]; Rows: Rows), or with scales=True ({name: values}, {name: scales}).
    chunk_rows (torch): at most that many rows at a time in float64, the
    column sums added chunk by chunk."""
    layer = _kind(kind) == "layer"
    mu = mutant or ""
    if mutant is not None and mutant not in MUTANTS:
        raise ValueError(f"unknown mutant {mutant!r} (known: "
                         f"{', '.join(MUTANTS)})")
    results = tuple(results)
    unknown = set(results) - {"dx", "dw", "db"}
    if unknown or "dx" not in results:
        raise ValueError(f"results must be dx and any of dw, db; got "
                         f"{results}")
    if layer and mean is None and mu != "xhat-not-centred":
        raise ValueError("backward: LayerNorm needs the mean")
    if dy_scale is not None:
        dy_scale = float(dy_scale)
    ops = _ops_for(x)
    args = dict(layer=layer, zero_centered=zero_centered, results=results,
                scales=scales, mu=mu, dy_scale=dy_scale, weight=weight)
    rows = len(x) if ops is _RowsOps else x.shape[0]
    if ops is _RowsOps or chunk_rows is None or rows <= chunk_rows:
        values, mags = _rows_of(ops, x, dy, rstd, mean if layer else None,
                                residual=residual, **args)
    else:
        if mu == "dw-db-first-row-only":
            raise ValueError("backward: mutant dw-db-first-row-only is not "
                             "computed in chunks")
        import torch
        n = x.shape[-1]
        f64 = dict(dtype=torch.float64, device=x.device)
        values = {"dx": torch.empty(rows, n, **f64)}
        values.update({k: torch.zeros(n, **f64) for k in results
                       if k != "dx"})
        mags = {}
        if scales:
            mags = {"dx": torch.empty(rows, n, **f64)}
            mags.update({k: torch.zeros(n, **f64) for k in values
                         if k != "dx"})
        step = int(chunk_rows)
        for r0 in range(0, rows, step):
            part = slice(r0, r0 + step)
            v, s = _rows_of(ops, x[part], dy[part], rstd[part],
                            mean[part] if layer and mean is not None
                            else None,
                            residual=(residual[part] if residual is not None
                                      else None), **args)
            for into, got in ((values, v), (mags, s)):
                for k, t in got.items():
                    if k == "dx":
                        into[k][part] = t
                    else:
                        into[k] += t
    for name, prev, forgot in (("dw", dw_in, "no-prev-dw"),
                               ("db", db_in, "no-prev-db")):
        if prev is None or name not in values:
            continue
        prev = ops.vector(prev)
        if mu != forgot:
            values[name] = values[name] + prev
        if scales:
            mags[name] = mags[name] + abs(prev)
    return (values, mags) if scales else values


# ---------------------------------------------------------------------------
# The error measure
# ---------------------------------------------------------------------------

def rel_l2(out, ref, scale=None, *, chunk_rows=None):
    """||out - ref|| / max(||ref||, ||scale||), L2 over the whole result, in
    float64: the relative L2 error every numeric check compares by.

    out, ref (and scale): torch tensors of one shape (any dtype and device:
    taken to float64 where they are) or flat sequences of numbers (the CPU
    numerics' lists). `scale` holds the magnitudes of the terms each element
    is computed from (backward(..., scales=True): rstd * w * dy for dx,
    sum_rows |dy * xhat| for dw, sum_rows |dy| for db). Where the result is
    of the size of its terms this is the plain relative L2 error; where the
    terms cancel (RMSNorm with N = 1, where dx ~ 1e-5 * rstd * w * dy; a
    column sum over rows of mixed signs) the exact result is tiny and no
    f32 computation can match it to relative precision, so the error is
    measured against the terms instead. A wrong formula still fails: it is
    off by a sizeable fraction of the terms.

    0 where out equals ref exactly; inf where out holds a NaN or an
    infinity (an unwritten, NaN-poisoned element), and where ref (and
    scale) are all zeros but out is not; NaN where ref holds a NaN. Compare
    with `not err <= tol` (or `err <= tol` for a pass): both fail on NaN,
    where `err > tol` would pass it. chunk_rows (torch): the float64
    differences of at most that many rows at a time (a large dx)."""
    if hasattr(out, "isfinite"):
        return _rel_l2_torch(out, ref, scale, chunk_rows)
    out = list(out)
    if not all(map(math.isfinite, out)):
        return math.inf
    diff = math.hypot(*map(operator.sub, out, ref))
    if diff == 0.0:
        return 0.0
    denom = max(math.hypot(*ref),
                math.hypot(*scale) if scale is not None else 0.0)
    return math.inf if denom == 0.0 else diff / denom


def _rel_l2_torch(out, ref, scale, chunk_rows):
    import torch
    norm = torch.linalg.vector_norm
    rows = out.shape[0] if out.dim() > 0 else 1
    step = rows if chunk_rows is None or out.dim() == 0 else \
        max(1, int(chunk_rows))
    diff2 = ref2 = scale2 = 0.0
    for r0 in range(0, rows, step):
        def part(t):
            return t[r0:r0 + step] if out.dim() > 0 else t
        o = part(out)
        if not bool(o.isfinite().all()):
            return math.inf
        r = part(ref).double()
        diff2 += norm(o.double() - r).item() ** 2
        ref2 += norm(r).item() ** 2
        if scale is not None:
            scale2 += norm(part(scale).double()).item() ** 2
    if diff2 == 0.0:
        return 0.0
    denom = math.sqrt(max(ref2, scale2))
    return math.inf if denom == 0.0 else math.sqrt(diff2) / denom


def worst(values, key=None):
    """The largest of `values` (by `key`), a NaN counting as the largest:
    max() drops a NaN or keeps it by its position. A running maximum:
    `w = worst((w, err))`."""
    def rank(v):
        e = v if key is None else key(v)
        return math.inf if e != e else e
    return max(values, key=rank)
