"""Helpers for the CPU numerics tests of norm-opt (Python 3.11, standard
library and python/norm_opt: run with PYTHONPATH=python:test/lib-python, as
lit does).

What is here, each usable on its own:

- float formats (`DTYPES`): rounding a Python float (binary64) to a value
  exactly representable in bf16 / f16 / f32, and the storage bits of it;
- `Case` and `gen_inputs`: one norm backward problem and its seeded random
  inputs, never zero, already representable in their element types;
- `reference`: the backward in float64 (norm_opt.reference, the one formula
  every check shares), from the f32 statistics the test feeds the op (so
  the only error measured is the op's);
- `ModuleBuilder`: one MLIR module holding many cases, a `func.func @main()`
  that builds the inputs as `arith.constant dense<"0x...">` (raw bits, exact
  for every type), calls one function per case holding the norm op, and
  prints every result as the i32 bits of its f32 value (`arith.extf` is
  exact, `printMemrefI32` prints integers), so nothing is lost in printing;
- `run_pipeline` / `parse_printed`: `norm-opt` (decompose + lowering to the
  LLVM dialect) then `mlir-runner`, and reading the printed memrefs back;
- `rel_l2` / `compare_case`: the error measure (norm_opt.reference's, the
  one every numeric check shares) and the per-type tolerances.
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import re
import struct
import subprocess

from norm_opt.reference import Rows
from norm_opt.reference import backward as reference_backward
from norm_opt.checks import within
from norm_opt.reference import rel_l2  # noqa: F401  (the error measure)
from norm_opt.reference import worst as reference_worst

# --------------------------------------------------------------------------
# Float formats
# --------------------------------------------------------------------------


def _f32_bits(v: float) -> int:
    """Bits of v rounded (to nearest even) to binary32."""
    return struct.unpack("<I", struct.pack("<f", v))[0]


def _f32_from_bits(b: int) -> float:
    return struct.unpack("<f", struct.pack("<I", b & 0xFFFFFFFF))[0]


def _bf16_bits(v: float) -> int:
    """Bits of v rounded to bfloat16 (via binary32, ties to even)."""
    b = _f32_bits(v)
    if (b & 0x7FFFFFFF) > 0x7F800000:  # NaN: keep it quiet
        return ((b >> 16) | 0x40) & 0xFFFF
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


def _bf16_from_bits(b: int) -> float:
    return _f32_from_bits((b & 0xFFFF) << 16)


def _f16_bits(v: float) -> int:
    return struct.unpack("<H", struct.pack("<e", v))[0]


def _f16_from_bits(b: int) -> float:
    return struct.unpack("<e", struct.pack("<H", b & 0xFFFF))[0]


# Bulk versions (one struct call per list instead of per element; the same
# rounding, bit for bit: struct's 'f' and 'e' formats round to nearest even
# exactly like the scalar functions above).


def _bf16_bits_of_f32_bits(b: int) -> int:
    if (b & 0x7FFFFFFF) > 0x7F800000:
        return ((b >> 16) | 0x40) & 0xFFFF
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


def _f32_bits_list(vals) -> list:
    n = len(vals)
    return list(struct.unpack(f"<{n}I", struct.pack(f"<{n}f", *vals)))


def _bits_list_f32(vals) -> list:
    return _f32_bits_list(vals)


def _bits_list_f16(vals) -> list:
    n = len(vals)
    return list(struct.unpack(f"<{n}H", struct.pack(f"<{n}e", *vals)))


def _bits_list_bf16(vals) -> list:
    if any(map(math.isnan, vals)):
        return [_bf16_bits_of_f32_bits(b) for b in _f32_bits_list(vals)]
    return [((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF
            for b in _f32_bits_list(vals)]


def _round_list_f32(vals) -> list:
    n = len(vals)
    return list(struct.unpack(f"<{n}f", struct.pack(f"<{n}f", *vals)))


def _round_list_f16(vals) -> list:
    n = len(vals)
    return list(struct.unpack(f"<{n}e", struct.pack(f"<{n}e", *vals)))


def _round_list_bf16(vals) -> list:
    bits = [b << 16 for b in _bits_list_bf16(vals)]
    n = len(bits)
    return list(struct.unpack(f"<{n}f", struct.pack(f"<{n}I", *bits)))


def f32_from_bits_list(bits) -> list:
    """Floats from a list of (signed or unsigned) 32-bit patterns."""
    n = len(bits)
    return list(struct.unpack(
        f"<{n}f", struct.pack(f"<{n}I", *(b & 0xFFFFFFFF for b in bits))))


@dataclasses.dataclass(frozen=True)
class DType:
    name: str  # MLIR spelling
    nbytes: int
    to_bits: object  # float -> storage bits (rounded to nearest even)
    from_bits: object  # storage bits -> float
    unit_roundoff: float  # u = 2^-p: |round(v) - v| <= u |v|
    tolerance: float  # relative L2 tolerance for a result of this type
    round_list: object = None  # [float] -> [float], the same as round()
    bits_list: object = None  # [float] -> [storage bits]

    def round(self, v: float) -> float:
        return self.from_bits(self.to_bits(v))


# Tolerances on the relative L2 error (see rel_l2) of one result, by the
# element type of that result. The op computes in f32 and rounds each result
# to its storage type once, so the error is that rounding (at most u, the
# unit roundoff, in this norm) plus f32 arithmetic error (~1e-7 here):
#   f32  : u = 6.0e-8  -> tolerance 1e-5  (measured worst 3.1e-7)
#   f16  : u = 4.9e-4  -> tolerance 1e-3  (~2u; measured worst 4.2e-4)
#   bf16 : u = 3.9e-3  -> tolerance 8e-3  (~2u; measured worst 2.9e-3)
# (measured: worst over dx, dw, db and all cases, 9 seeds, incl.
# --all-shapes.) A wrong formula (a missing term, a wrong sign, w instead of
# w + 1, the sum instead of the mean, ...) moves results by 1e-2 to 1 on
# these inputs; `MUTANTS` below checks that such mistakes are caught.
def _int_type(name: str, nbytes: int) -> DType:
    """An integer or boolean input type (masks, ids): exact, never a
    result, so no tolerance."""
    bits = 1 if name == "i1" else 8 * nbytes
    mask = (1 << bits) - 1

    def to_bits(v):
        return int(v) & mask

    def from_bits(b):
        return float(b - (1 << bits) if bits > 1 and b >> (bits - 1) else b)
    return DType(name, nbytes, to_bits, from_bits, 0.0, 0.0,
                 lambda vals: [float(int(v)) for v in vals],
                 lambda vals: [to_bits(v) for v in vals])


DTYPES = {
    "i1": _int_type("i1", 1),
    "i8": _int_type("i8", 1),
    "i16": _int_type("i16", 2),
    "i32": _int_type("i32", 4),
    "f32": DType("f32", 4, _f32_bits, _f32_from_bits, 2.0**-24, 1e-5,
                 _round_list_f32, _bits_list_f32),
    "f16": DType("f16", 2, _f16_bits, _f16_from_bits, 2.0**-11, 1e-3,
                 _round_list_f16, _bits_list_f16),
    "bf16": DType("bf16", 2, _bf16_bits, _bf16_from_bits, 2.0**-8, 8e-3,
                  _round_list_bf16, _bits_list_bf16),
}

RSTD_EPS = 1e-5  # the forward's epsilon, only used to make rstd realistic

# --------------------------------------------------------------------------
# Cases and inputs
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Case:
    op: str  # "layer_norm" or "rms_norm"
    shape: tuple  # (rows..., N)
    x_type: str  # type of dy, x and dx
    w_type: str | None  # weight (and dweight) type; None: no weight
    b_type: str | None  # bias (and dbias) type; None: no bias
    zero_centered: bool = False

    @property
    def name(self) -> str:
        parts = ["ln" if self.op == "layer_norm" else "rms", self.x_type]
        if self.w_type:
            parts.append(("zcw:" if self.zero_centered else "w:") + self.w_type)
        if self.b_type:
            parts.append("b:" + self.b_type)
        parts.append("x".join(map(str, self.shape)))
        return ".".join(parts)

    @property
    def rows(self) -> int:
        return math.prod(self.shape[:-1])

    @property
    def hidden(self) -> int:
        return self.shape[-1]

    def outputs(self):
        """[(name, element type, shape)] of the op's results, in order."""
        outs = [("dx", self.x_type, self.shape)]
        if self.w_type:
            outs.append(("dw", self.w_type, (self.hidden,)))
        if self.b_type:
            outs.append(("db", self.b_type, (self.hidden,)))
        return outs


@dataclasses.dataclass
class Inputs:
    """Flat row-major lists of Python floats, each exactly representable in
    its tensor's element type (mean and rstd: f32)."""

    dy: list
    x: list
    mean: list | None
    rstd: list
    w: list | None
    b: list | None


def _nonzero(draw, dtype: DType, min_abs=1e-3, away_from=None):
    """A value from draw(), rounded to dtype, with |value| >= min_abs (and
    |value - away_from| >= min_abs when given)."""
    while True:
        v = dtype.round(draw())
        if abs(v) >= min_abs and math.isfinite(v) and (
                away_from is None or abs(v - away_from) >= min_abs):
            return v


def _draw_row(rng, dtype: DType, base: list, scale: float, reject,
              chunk: int = 128):
    """For each i: g = rng.gauss(0, 1), redrawn while
    reject(dtype.round(base[i] + scale * g)); returns ([g], [rounded]).

    The same draws, in the same order, as that element-by-element loop, but
    drawn and rounded `chunk` at a time: at a rejected element the generator
    goes back to the chunk's state, replays the accepted prefix, redraws the
    element, and carries on in bulk after it."""
    gs, vals = [], []
    start = 0
    n = len(base)
    while start < n:
        state = rng.getstate()
        stop = min(n, start + chunk)
        g = [rng.gauss(0.0, 1.0) for _ in range(stop - start)]
        v = dtype.round_list([b + scale * t
                              for b, t in zip(base[start:stop], g)])
        bad = next((i for i, t in enumerate(v) if reject(t)), None)
        if bad is None:
            gs.extend(g)
            vals.extend(v)
            start = stop
            continue
        rng.setstate(state)
        for _ in range(bad):  # replay the accepted prefix
            rng.gauss(0.0, 1.0)
        gs.extend(g[:bad])
        vals.extend(v[:bad])
        i = start + bad
        t = rng.gauss(0.0, 1.0)
        while reject(dtype.round(base[i] + scale * t)):
            t = rng.gauss(0.0, 1.0)
        gs.append(t)
        vals.append(dtype.round(base[i] + scale * t))
        start = i + 1
    return gs, vals



def draw_norm_group(rng, dt, count):
    """One normalised group of `count` elements (a GroupNorm slab, an
    adaLN row): x around a random offset at a random scale and dy with it,
    neither near zero, in type dt; and the group's f32 mean and rstd.
    Returns (x, dy, mean, rstd)."""
    offset = rng.choice((-1.0, 1.0)) * rng.uniform(0.5, 2.0)
    scale = rng.choice((rng.uniform(0.3, 0.7), rng.uniform(1.5, 3.0)))
    z, vals = _draw_row(rng, dt, [offset] * count, scale,
                        lambda v: abs(v) < 1e-3)
    _, dvals = _draw_row(rng, dt, [1.0 + t for t in z], 1.0,
                         lambda v: abs(v) < 1e-3)
    m = math.fsum(vals) / len(vals)
    var = math.fsum((v - m) ** 2 for v in vals) / len(vals)
    f32 = DTYPES["f32"]
    return vals, dvals, f32.round(m), f32.round(1.0 / math.sqrt(var +
                                                                RSTD_EPS))

def gen_inputs(case: Case, seed) -> Inputs:
    """Seeded inputs for `case`, none of them zero.

    Chosen so that every term of the backward matters (a mistake in any of
    them moves the results well past the tolerances): per row an offset of
    0.5 to 2 either way (so LayerNorm's mean matters) and a scale of 0.3 to
    0.7 or 1.5 to 3 (so rstd is not ~1); dy = 1 + z + noise where z is x
    standardised (a nonzero mean, so mean_n(w * dy) matters, and a
    correlation with x, so mean_n(xhat * w * dy) matters even in one row);
    weights ~1 +- 0.5 but at least 0.1 from 1, or when zero-centred ~0 +- 0.4
    but at least 0.1 from 0 (so w, w + 1 and 1 are told apart). mean/rstd
    are the forward's statistics, computed from the rounded x in float64
    (rstd = 1/sqrt(var + 1e-5)) and stored as f32."""
    rng = random.Random(f"{seed}/{case.name}")  # str seeds are stable
    xt = DTYPES[case.x_type]
    n, rows = case.hidden, case.rows
    x, dy, mean, rstd = [], [], [], []
    f32 = DTYPES["f32"]
    for _ in range(rows):
        offset = (rng.choice((-1.0, 1.0)) * rng.uniform(0.5, 2.0)
                  if case.op == "layer_norm" else 0.0)
        # Keep rstd well away from 1, so that a missing rstd factor shows.
        scale = rng.choice((rng.uniform(0.3, 0.7), rng.uniform(1.5, 3.0)))
        # z: the standardised x, which dy is correlated with; a draw that
        # rounds to (almost) zero is redrawn.
        z, row = _draw_row(rng, xt, [offset] * n, scale,
                           lambda v: abs(v) < 1e-3)
        x.extend(row)
        _, drow = _draw_row(rng, xt, [1.0 + t for t in z], 1.0,
                            lambda v: abs(v) < 1e-3 or not math.isfinite(v))
        dy.extend(drow)
        if case.op == "layer_norm":
            m = math.fsum(row) / n
            var = math.fsum((v - m) ** 2 for v in row) / n
            mean.append(f32.round(m))
        else:
            var = math.fsum(v * v for v in row) / n
        rstd.append(f32.round(1.0 / math.sqrt(var + RSTD_EPS)))
    w = b = None
    if case.w_type:
        wt = DTYPES[case.w_type]
        if case.zero_centered:
            w = [_nonzero(lambda: 0.4 * rng.gauss(0.0, 1.0), wt, 0.1)
                 for _ in range(n)]
        else:
            w = [_nonzero(lambda: 1.0 + 0.5 * rng.gauss(0.0, 1.0), wt, 0.1,
                          away_from=1.0) for _ in range(n)]
    if case.b_type:
        bt = DTYPES[case.b_type]
        b = [_nonzero(lambda: rng.gauss(0.0, 1.0), bt) for _ in range(n)]
    return Inputs(dy, x, mean if case.op == "layer_norm" else None, rstd, w, b)


# --------------------------------------------------------------------------
# float64 reference
# --------------------------------------------------------------------------


def _degenerate(c):
    """N = 1: LayerNorm's xhat is exactly 0, and RMSNorm's dx is ~1e-5 of
    its terms (xhat = +-1 cancels wdy), so dx hardly depends on w or rstd."""
    return c.hidden == 1


# Deliberately wrong variants of the math, to show that the tolerances catch
# real mistakes. Each maps to a predicate: the cases where the mistake
# changes the results (elsewhere it is mathematically harmless, e.g. the
# projection term when xhat == 0). --check-mutants requires every mutant to
# fail (nearly) every case it applies to.
MUTANTS = {
    "dx-no-mean-wdy-term": lambda c: c.op == "layer_norm",
    "dx-rms-with-mean-wdy-term": lambda c: c.op == "rms_norm",
    "dx-no-projection-term":
        lambda c: c.op == "rms_norm" or not _degenerate(c),
    "dx-projection-sign-flipped":
        lambda c: c.op == "rms_norm" or not _degenerate(c),
    "dx-sum-instead-of-mean": lambda c: not _degenerate(c),
    "dx-no-outer-rstd": lambda c: not _degenerate(c),
    "xhat-not-centred": lambda c: c.op == "layer_norm",
    "w-not-plus-one": lambda c: c.zero_centered and not _degenerate(c),
    "w-plus-one-always": lambda c: c.w_type is not None
        and not c.zero_centered and not _degenerate(c),
    # With one column, dw is one sum over the rows that may cancel; the
    # error is measured against the size of its terms, and a factor w on
    # a cancelled sum need not show. Many columns average that out.
    "dw-uses-w-times-dy": lambda c: c.w_type is not None
        and not _degenerate(c),
    "dw-uses-x-not-xhat": lambda c: c.w_type is not None
        and not (c.op == "rms_norm" and _degenerate(c)),
    "dw-db-first-row-only": lambda c: c.rows > 1 and not _degenerate(c)
        and (c.w_type is not None or c.b_type is not None),
}


@dataclasses.dataclass
class Result:
    """Reference results, and per result the magnitude of the terms it is
    computed from (the scale its rounding error is relative to)."""

    values: dict  # name -> flat list
    scales: dict  # name -> flat list of term magnitudes (see rel_l2)


def reference(case: Case, inp: Inputs, mutant: str | None = None) -> Result:
    """The backward in float64 from the same (rounded) inputs and f32 stats
    (norm_opt.reference.backward, the formula every check shares):

      xhat = (x - mean) * rstd          (RMSNorm: x * rstd)
      wdy  = w * dy  ((w + 1) * dy if zero-centred; dy without weight)
      dx   = rstd * (wdy - mean_n(wdy) - xhat * mean_n(xhat * wdy))
             (RMSNorm: without the mean_n(wdy) term)
      dw   = sum over all rows of dy * xhat
      db   = sum over all rows of dy
    """
    n = case.hidden
    results = ["dx"] + (["dw"] if case.w_type else []) + (
        ["db"] if case.b_type else [])
    values, scales = reference_backward(
        case.op, Rows.full(inp.x, n), Rows.full(inp.dy, n),
        Rows.column(inp.rstd),
        Rows.column(inp.mean) if case.op == "layer_norm" else None,
        Rows.vector(inp.w) if inp.w is not None else None,
        zero_centered=case.zero_centered, results=results, scales=True,
        mutant=mutant)
    return Result({k: v.flat() for k, v in values.items()},
                  {k: v.flat() for k, v in scales.items()})


# --------------------------------------------------------------------------
# Error measure (rel_l2: norm_opt.reference's)
# --------------------------------------------------------------------------


def compare_case(case: Case, got: dict, ref: Result):
    """[(result name, element type, error, tolerance, ok)] for one case."""
    rows = []
    for name, elem, _ in case.outputs():
        err = rel_l2(got[name], ref.values[name], ref.scales[name])
        tol = DTYPES[elem].tolerance
        rows.append((name, elem, err, tol, within(err, tol)))
    return rows


def keep_worst(worst: dict, key, err, label):
    """worst[key] = (err, label) if err is the worst error yet. A NaN is
    the worst of all and stays (`err > old` would drop it, and
    `not err <= old` would let a later number replace it)."""
    old = worst.get(key)
    if old is None or (not math.isnan(old[0]) and not err <= old[0]):
        worst[key] = (err, label)


def worst_of(errs):
    """The largest error, NaN if any is NaN (max() may drop a NaN); NaN
    for none."""
    errs = list(errs)
    return reference_worst(errs) if errs else math.nan


def report_case(path: str, label: str, rows, quiet: bool,
                width: int = 40) -> bool:
    """One case of one path: its PASS / FAIL line (always when it failed),
    from compare_case-style rows; returns whether every result passed."""
    ok = all(r[4] for r in rows)
    if not ok or not quiet:
        errs = "  ".join(f"{n}({e})={err:.2e}/{tol:.0e}"
                         for n, e, err, tol, _ in rows)
        print(f"{'PASS' if ok else 'FAIL'} {path:<10} {label:<{width}} "
              f"{errs}")
    return ok


def tally_mutants(tally, mutants: dict, case, label: str, compare_with):
    """Records, for every mutant that applies to `case`, the rows of
    compare_with(mutant) (the case's results against that mutant's
    reference) in `tally` (a MutantTally)."""
    for m, applies in mutants.items():
        if applies(case):
            tally.record(m, label, compare_with(m))


class MutantTally:
    """How often each deliberately wrong reference (MUTANTS) was caught:
    a mutant is caught on a case when some result of the case, compared with
    the mutant's reference, is out of tolerance."""

    def __init__(self, names):
        self.counts = {m: [0, 0, []] for m in names}  # caught, applied, missed

    def __contains__(self, name):
        return name in self.counts

    def record(self, name, label, rows):
        """`rows`: compare_case against the mutant's reference."""
        count = self.counts[name]
        count[1] += 1
        if all(r[4] for r in rows):
            count[2].append(label)
        else:
            count[0] += 1

    def report(self, noun, min_caught):
        """Prints one line per mutant; returns those caught too rarely,
        or applied to no case (a mutant tried must be shown to fail)."""
        missed = []
        for m, (k, n, names) in self.counts.items():
            print(f"MUTANT {m:<28} caught in {k}/{n} applicable {noun}"
                  + (f"; missed in {' '.join(names[:4])}" if names else ""))
            if n == 0 or k < min_caught * n:
                missed.append(m)
        return missed


def finish(failed, total, missed, noun="cases"):
    """The summary lines every numerics script ends with; its exit code."""
    if missed:
        print(f"MUTANTS CAUGHT IN TOO FEW {noun.upper()}: {' '.join(missed)}")
    if not total:  # an empty run shows nothing
        print(f"FAILED: no {noun[:-1] if noun.endswith('s') else noun} "
              "was compared")
    elif failed:
        print(f"FAILED: {failed} of {total} cases")
    elif not missed:
        print(f"ALL PASSED: {total} cases")
    return 1 if failed or missed or not total else 0


# --------------------------------------------------------------------------
# MLIR emission
# --------------------------------------------------------------------------


def tensor_type(shape, elem) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + elem + ">"


def dense_hex(values, elem: str) -> str:
    """`dense<"0x...">`: the raw little-endian bits, exact for any type."""
    dt = DTYPES[elem]
    if elem == "i1":  # booleans: bit-packed, element k in bit k % 8
        bits = [int(v) & 1 for v in values]
        packed = bytes(sum(b << j for j, b in enumerate(bits[i:i + 8]))
                       for i in range(0, len(bits), 8))
        return 'dense<"0x' + packed.hex().upper() + '">'
    if elem.startswith("i"):  # integers: two's complement, little-endian
        code = {1: "B", 2: "H", 4: "I"}[dt.nbytes]
        raw = struct.pack(f"<{len(values)}{code}",
                          *dt.bits_list(list(values)))
        return 'dense<"0x' + raw.hex().upper() + '">'
    bits = dt.bits_list(list(values))
    fmt = f"<{len(bits)}{'I' if dt.nbytes == 4 else 'H'}"
    return 'dense<"0x' + struct.pack(fmt, *bits).hex().upper() + '">'


def _mangle(shape, elem):
    return "x".join(map(str, shape)) + "x" + elem


class ModuleBuilder:
    """Accumulates cases into one module; `text()` returns it."""

    def __init__(self):
        self.funcs = []
        self.main = []
        self.printers = {}
        self.count = 0

    def _printer(self, shape, elem):
        """@print_bits_<type>(tensor): prints the i32 bits of the f32 value
        of every element (extf to f32 is exact) with printMemrefI32."""
        key = _mangle(shape, elem)
        if key in self.printers:
            return self.printers[key]
        name = "print_bits_" + key
        rank = len(shape)
        dims = ", ".join(f"d{i}" for i in range(rank))
        idmap = f"affine_map<({dims}) -> ({dims})>"
        tin = tensor_type(shape, elem)
        tout = tensor_type(shape, "i32")
        mref = "memref<" + "x".join(map(str, shape)) + "xi32>"
        ext = (f"      %f = arith.extf %a : {elem} to f32\n" if elem != "f32"
               else "")
        val = "%f" if elem != "f32" else "%a"
        self.funcs.append(f"""\
func.func private @{name}(%t: {tin}) {{
  %e = tensor.empty() : {tout}
  %bits = linalg.generic {{indexing_maps = [{idmap}, {idmap}],
      iterator_types = [{", ".join(['"parallel"'] * rank)}]}}
      ins(%t : {tin}) outs(%e : {tout}) {{
    ^bb0(%a: {elem}, %o: i32):
{ext}      %i = arith.bitcast {val} : f32 to i32
      linalg.yield %i : i32
  }} -> {tout}
  %m = bufferization.to_buffer %bits : {tout} to {mref}
  %u = memref.cast %m : {mref} to memref<*xi32>
  call @printMemrefI32(%u) : (memref<*xi32>) -> ()
  return
}}
""")
        self.printers[key] = name
        return name

    def add(self, case: Case, inp: Inputs):
        k = self.count
        self.count += 1
        rows_shape = case.shape[:-1]
        tx = tensor_type(case.shape, case.x_type)
        ts = tensor_type(rows_shape, "f32")
        args = [("dy", tx, inp.dy, case.x_type), ("x", tx, inp.x, case.x_type)]
        if case.op == "layer_norm":
            args.append(("mean", ts, inp.mean, "f32"))
        args.append(("rstd", ts, inp.rstd, "f32"))
        opnds = ", ".join("%" + a[0] for a in args)
        affine = ""
        if case.w_type:
            tw = tensor_type((case.hidden,), case.w_type)
            args.append(("w", tw, inp.w, case.w_type))
            affine += f" weight(%w : {tw})"
        if case.b_type:
            tb = tensor_type((case.hidden,), case.b_type)
            args.append(("b", tb, inp.b, case.b_type))
            affine += f" bias(%b : {tb})"
        if case.zero_centered:
            affine += " {zero_centered_weight}"
        outs = [tensor_type(s, e) for _, e, s in case.outputs()]
        nres = len(outs)
        res = "%r" if nres == 1 else f"%r:{nres}"
        rets = ["%r"] if nres == 1 else [f"%r#{i}" for i in range(nres)]
        sig = ", ".join(f"%{a[0]}: {a[1]}" for a in args)
        if case.b_type and not case.w_type:
            # Bias without weight has no custom form that parses back: the
            # format's optional result types `(, type($dweight)^)?
            # (, type($dbias)^)?` give the lone extra type to dweight, and
            # the verifier then rejects the op. Use the generic form.
            seg = "1, 1, 1, 1, 0, 1" if case.op == "layer_norm" else \
                "1, 1, 1, 0, 1"
            all_opnds = ", ".join("%" + a[0] for a in args)
            op_text = (f'"norm.{case.op}_grad"({all_opnds}) <{{'
                       f"operandSegmentSizes = array<i32: {seg}>, "
                       "resultSegmentSizes = array<i32: 1, 0, 1>}>\n"
                       f"      : ({', '.join(a[1] for a in args)}) -> "
                       f"({', '.join(outs)})")
        else:
            op_text = (f"norm.{case.op}_grad {opnds}{affine}\n"
                       f"      : {tx}, {ts} -> {', '.join(outs)}")
        self.funcs.append(f"""\
// case {k}: {case.name}
func.func @norm_case_{k}({sig}) -> ({", ".join(outs)}) {{
  {res} = {op_text}
  return {", ".join(rets)} : {", ".join(outs)}
}}
""")
        body = [f"  // case {k}: {case.name}"]
        for name, t, vals, elem in args:
            body.append(f"  %c{k}_{name} = arith.constant "
                        f"{dense_hex(vals, elem)} : {t}")
        argtypes = ", ".join(a[1] for a in args)
        call_args = ", ".join(f"%c{k}_{a[0]}" for a in args)
        body.append(f"  {res.replace('%r', f'%r{k}')} = call @norm_case_{k}"
                    f"({call_args}) : ({argtypes}) -> ({', '.join(outs)})")
        for i, (_, elem, shape) in enumerate(case.outputs()):
            p = self._printer(shape, elem)
            v = f"%r{k}" if nres == 1 else f"%r{k}#{i}"
            body.append(f"  call @{p}({v}) : ({tensor_type(shape, elem)}) -> ()")
        self.main.extend(body)

    def text(self) -> str:
        return ("func.func private @printMemrefI32(memref<*xi32>)"
                " attributes { llvm.emit_c_interface }\n\n"
                + "\n".join(self.funcs)
                + "\nfunc.func @main() {\n" + "\n".join(self.main)
                + "\n  return\n}\n")


# --------------------------------------------------------------------------
# Running and parsing
# --------------------------------------------------------------------------

# norm-opt does every stage: the norm lowering, then upstream bufferization
# and conversion to the LLVM dialect (it registers those passes). bf16
# extf/truncf are expanded to integer bit operations (`arith-expand` with
# include-bf16) so that the JIT never needs the __truncsfbf2 libcall, which
# older libgcc lacks; f16 conversions stay LLVM fpext/fptrunc.
LOWERING = [
    "--norm-decompose",
    "--one-shot-bufferize=bufferize-function-boundaries",
    "--convert-linalg-to-loops",
    "--convert-scf-to-cf",
    "--expand-strided-metadata",
    "--lower-affine",
    "--finalize-memref-to-llvm",
    "--arith-expand=include-bf16=true",
    "--convert-arith-to-llvm",
    "--convert-func-to-llvm",
    "--convert-cf-to-llvm",
    "--reconcile-unrealized-casts",
]


def runner_libs(runner: str, lib_dir: str | None) -> list:
    """The runtime libraries: in lib_dir, or in ../lib next to mlir-runner."""
    if not lib_dir:
        import shutil
        exe = shutil.which(runner) or runner
        lib_dir = os.path.join(
            os.path.dirname(os.path.dirname(os.path.realpath(exe))), "lib")
    libs = [os.path.join(lib_dir, n) for n in
            ("libmlir_runner_utils.so", "libmlir_c_runner_utils.so")]
    for lib in libs:
        if not os.path.exists(lib):
            raise FileNotFoundError(f"runtime library not found: {lib}")
    return libs


def run_pipeline(module_text: str, workdir: str, norm_opt: str, runner: str,
                 libs: list, opt_level: str = "-O0") -> str:
    """Lowers and runs the module; returns what it printed."""
    src = os.path.join(workdir, "numerics.mlir")
    llvm = os.path.join(workdir, "numerics.llvm.mlirbc")
    with open(src, "w") as f:
        f.write(module_text)
    subprocess.run([norm_opt, src, *LOWERING, "--emit-bytecode", "-o", llvm],
                   check=True)
    out = subprocess.run(
        [runner, llvm, "-e", "main", "-entry-point-result=void", opt_level,
         "-shared-libs=" + ",".join(libs)],
        check=True, stdout=subprocess.PIPE, text=True)
    return out.stdout


_MEMREF = re.compile(r"Unranked Memref base@ = \S+ rank = (\d+) offset = \d+ "
                     r"sizes = \[([^\]]*)\] strides = \[[^\]]*\] data =")
_INT = re.compile(r"-?\d+")


def parse_printed(text: str):
    """[(shape, [f32 values])] for every printMemrefI32 in `text`."""
    heads = list(_MEMREF.finditer(text))
    out = []
    for i, h in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        shape = tuple(int(s) for s in h.group(2).split(",") if s.strip())
        bits = [int(t) for t in _INT.findall(text, h.end(), end)]
        out.append((shape, f32_from_bits_list(bits)))
    return out


# --------------------------------------------------------------------------
# The fused path, and modules for arbitrary functions
# --------------------------------------------------------------------------

# The unfused path for linalg / TOSA-lowered input: upstream passes only (no
# norm pass at all; mlir-opt runs it). The same stages as LOWERING, plus
# math-to-llvm for payloads that use math ops (rsqrt of recomputed stats).
UPSTREAM_LOWERING = [p for p in LOWERING if p != "--norm-decompose"]
UPSTREAM_LOWERING.insert(UPSTREAM_LOWERING.index("--convert-arith-to-llvm"),
                         "--convert-math-to-llvm")


def fused_pipeline(programs: int) -> list:
    """The rewritten form: the registered CPU pipeline (decompose, fuse,
    partial accumulation with `programs` programs, bufferize, lower)."""
    return [f"--norm-lower-to-cpu=programs={programs}"]


# Appended to a fused-pipeline run: the IR of every function right after
# recognition and after partial accumulation goes to stderr, with big dense
# constants elided, in a deterministic order.
IR_DUMP_FLAGS = [
    "-mlir-print-ir-after=norm-fuse-mixed-reductions,norm-partial-accumulate",
    "-mlir-elide-elementsattrs-if-larger=16",
    "-mlir-disable-threading",
]

def complete_if_needed(mlir_opt: str, bc: str) -> bool:
    """Fails if a lowered module still holds bufferization ops.

    --norm-lower-to-cpu once left a bufferization.clone when dW accumulated
    into a function argument (fixed: the pipeline now runs
    convert-bufferization-to-memref after deallocation; regression test
    test/Numerics/accumulate-into-argument.mlir). Returns False when the
    module is pure LLVM dialect, as it must be."""
    del mlir_opt  # kept for the callers' signature
    with open(bc, "rb") as f:
        if b"bufferization" in f.read():
            raise RuntimeError(f"{bc}: --norm-lower-to-cpu left bufferization "
                               "ops (regression of the clone lowering)")
    return False


_DUMP_HEAD = re.compile(r"^// -----// IR Dump After \S+ \(([\w-]+)\)"
                        r"[^\n]*//----- //\n", re.M)
_FUNC_NAME = re.compile(r"func\.func\s+(?:private\s+)?@([\w$.]+)")


def parse_ir_dumps(text: str) -> dict:
    """{pass argument: {function name: IR text}} from IR_DUMP_FLAGS output."""
    dumps = {}
    heads = list(_DUMP_HEAD.finditer(text))
    for i, h in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        body = text[h.end():end]
        m = _FUNC_NAME.search(body)
        if m:
            dumps.setdefault(h.group(1), {})[m.group(1)] = body
    return dumps


def fusion_status(dumps: dict, func: str, neighbours: bool = False):
    """(fused, detail) for one function of a fused-pipeline run: fused means
    recognition produced norm.mixed_reduction with no linalg reduction left
    over (unless the function has `neighbours`: matmuls and other
    reductions that stay by design), and partial accumulation turned every
    one into an scf.forall."""
    after_fuse = dumps.get("norm-fuse-mixed-reductions", {}).get(func)
    after_pa = dumps.get("norm-partial-accumulate", {}).get(func)
    if after_fuse is None or after_pa is None:
        return False, "no IR dump for the function"
    groups = after_fuse.count("norm.mixed_reduction")
    if groups == 0:
        return False, "no norm.mixed_reduction after recognition"
    if not neighbours and ('"reduction"' in after_fuse or
                           "linalg.reduce" in after_fuse):
        return False, "a linalg reduction is left after recognition"
    if "norm.mixed_reduction" in after_pa or "scf.forall" not in after_pa:
        return False, "partial accumulation did not produce scf.forall"
    return True, f"{groups} norm.mixed_reduction"


def compile_module(tool: str, src: str, out: str, passes: list) -> str:
    """tool src passes -> out (bytecode); returns stderr (IR dumps)."""
    p = subprocess.run([tool, src, *passes, "--emit-bytecode", "-o", out],
                       stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{os.path.basename(tool)} {' '.join(passes)} "
                           f"failed on {src}:\n{describe_failure(p.stderr)}")
    return p.stderr


def describe_failure(stderr: str) -> str:
    """The errors of a failed tool run, or for a crash the innermost MLIR
    frame of its backtrace."""
    if "Stack dump:" in stderr:
        frames = re.findall(r"^\s*#\d+ 0x[0-9a-f]+ (mlir::\S+?)\(", stderr,
                            re.M)
        where = frames[0] if frames else "unknown frame"
        return f"crash (stack dump) in {where}"
    errors = [ln for ln in stderr.splitlines() if "error" in ln]
    return "\n".join(errors[:5]) if errors else stderr[-2000:]


def run_module(runner: str, bc: str, libs: list, opt_level="-O0") -> str:
    """mlir-runner on a lowered module; returns stdout."""
    p = subprocess.run(
        [runner, bc, "-e", "main", "-entry-point-result=void", opt_level,
         "-shared-libs=" + ",".join(libs)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"mlir-runner failed on {bc} (exit "
                           f"{p.returncode}):\n{p.stderr[-4000:]}")
    return p.stdout


def run_paths(module_text: str, stem: str, paths: dict, norm_opt: str,
              runner: str, libs: list, workdir: str):
    """Writes the module once to workdir/<stem>.mlir and, per path (name ->
    norm-opt passes), lowers and runs it: yields (name, iterator over the
    printed memrefs). A path that printed more than its caller read is an
    error."""
    src = os.path.join(workdir, f"{stem}.mlir")
    with open(src, "w") as f:
        f.write(module_text)
    for path, passes in paths.items():
        bc = os.path.join(workdir, f"{stem}.{path}.mlirbc")
        compile_module(norm_opt, src, bc, passes)
        printed = iter(parse_printed(run_module(runner, bc, libs)))
        yield path, printed
        if next(printed, None) is not None:
            raise RuntimeError(f"{path}: more results printed than expected")


def multi_axis_groups(norm_opt: str, module_text: str, workdir: str,
                      pre=()) -> int:
    """How many multi-axis groups (norm.mixed_reduction with row_sum_dims)
    recognition makes of the module, as the CPU pipeline runs it: a
    harness's proof that its fused path is fused, not left as written.
    `pre`: passes run first (as the path under test does)."""
    src = os.path.join(workdir, "multi_axis_groups.mlir")
    with open(src, "w") as f:
        f.write(module_text)
    p = subprocess.run([norm_opt, src, *pre, "--norm-decompose",
                        "--norm-fuse-mixed-reductions"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"recognition failed on {src}:\n"
                           f"{describe_failure(p.stderr)}")
    return len(re.findall(r"row_sum_dims = array", p.stdout))


_BASE = re.compile(r"base@ = 0x[0-9a-fA-F]+")


def without_addresses(printed: str) -> str:
    """Printed memrefs without their (run-dependent) base addresses."""
    return _BASE.sub("base@ = ?", printed)


def parse_type(t: str):
    """'tensor<4x?xbf16>' -> ((4, None), 'bf16'); 'tensor<f32>' -> ((), ..)."""
    m = re.fullmatch(r"\s*tensor<(.*)>\s*", t)
    if not m:
        raise ValueError(f"not a ranked tensor type: {t}")
    parts = m.group(1).split("x")
    shape = tuple(None if d == "?" else int(d) for d in parts[:-1])
    return shape, parts[-1].strip()


class CallModule:
    """One module calling arbitrary tensor functions with constant inputs:
    `add_func(text)` adds function definitions verbatim; `add_call(name,
    args, results)` builds the inputs (static constants, tensor.cast to the
    parameter type where it has dynamic dims), calls, and prints every
    result (cast to its static shape) as exact f32 bits."""

    def __init__(self):
        self.mb = ModuleBuilder()  # for its printers
        self.defs = []
        self.main = []
        self.count = 0

    def add_func(self, text: str):
        self.defs.append(text)

    def add_call(self, func: str, args: list, results: list):
        """args: [(parameter type, static shape, element type, values)]
        (a scalar parameter: static shape None, values one float);
        results: [(result type, static shape)]."""
        k = self.count
        self.count += 1
        names = []
        for i, (ptype, shape, elem, vals) in enumerate(args):
            v = f"%a{k}_{i}"
            if shape is None:  # a scalar parameter
                bits = DTYPES[elem].to_bits(vals)
                fmt = "08X" if DTYPES[elem].nbytes == 4 else "04X"
                self.main.append(f"  {v} = arith.constant 0x{bits:{fmt}} : "
                                 f"{elem}")
                names.append(v)
                continue
            st = tensor_type(shape, elem)
            self.main.append(f"  {v} = arith.constant {dense_hex(vals, elem)}"
                             f" : {st}")
            if ptype.replace(" ", "") != st:
                self.main.append(f"  {v}c = tensor.cast {v} : {st} to "
                                 f"{ptype}")
                v += "c"
            names.append(v)
        rtypes = [r[0] for r in results]
        res = f"%r{k}" if len(results) == 1 else f"%r{k}:{len(results)}"
        ptypes = ", ".join(a[0] for a in args)
        self.main.append(f"  {res} = call @{func}({', '.join(names)}) : "
                         f"({ptypes}) -> ({', '.join(rtypes)})")
        for i, (rtype, shape) in enumerate(results):
            v = f"%r{k}" if len(results) == 1 else f"%r{k}#{i}"
            _, elem = parse_type(rtype)
            st = tensor_type(shape, elem)
            if rtype.replace(" ", "") != st:
                cast = f"%s{k}_{i}"
                self.main.append(f"  {cast} = tensor.cast {v} : {rtype} to "
                                 f"{st}")
                v = cast
            p = self.mb._printer(shape, elem)
            self.main.append(f"  call @{p}({v}) : ({st}) -> ()")

    def text(self) -> str:
        return ("func.func private @printMemrefI32(memref<*xi32>)"
                " attributes { llvm.emit_c_interface }\n\n"
                + "\n".join(self.mb.funcs) + "\n" + "\n".join(self.defs)
                + "\nfunc.func @main() {\n" + "\n".join(self.main)
                + "\n  return\n}\n")


def summation_depth(rows: int, programs: int) -> int:
    """How many f32 additions a column term goes through in the fused form:
    at most ceil(rows / P) in its program's accumulator (which starts at
    0, so the first is exact), P in the fixed-order sum of the partial rows
    (from 0 again), and 1 to add the initial value: ceil(rows/P) + P + 1,
    minus the two exact ones, rounded up to ceil(rows/P) + P."""
    return -(-rows // programs) + programs


def column_agreement(a, b, term_sums, rows, p1, p2, elem):
    """Worst |a - b| / bound over a column result computed with P = p1 and
    P = p2 (lists of floats; ratio <= 1 passes).

    The terms (dy * xhat, dy, the initial value) are the same f32 values
    for every P: only the order of the f32 additions changes. Summing terms
    t_i with at most h additions on any term's path has error at most
    gamma_h * sum |t_i|, gamma_h = h u / (1 - h u), u = 2^-24 (Higham,
    Accuracy and Stability of Numerical Algorithms, 2nd ed., eq. 4.4). So
    |S_p1 - S_p2| <= (gamma_h1 + gamma_h2) * sum |t_i|, with h from
    summation_depth; sum |t_i| is the float64 reference's (the f32 terms
    are within a few u of it: the bound takes 1% extra). A result stored
    in bf16 / f16 is rounded once more: + u_out * (|a| + |b|)."""
    u = 2.0 ** -24
    h1, h2 = summation_depth(rows, p1), summation_depth(rows, p2)
    gamma = h1 * u / (1 - h1 * u) + h2 * u / (1 - h2 * u)
    u_out = 0.0 if elem == "f32" else DTYPES[elem].unit_roundoff
    worst, where = 0.0, -1
    for j, (x, y, s) in enumerate(zip(a, b, term_sums)):
        d = abs(x - y)
        if d == 0.0:
            continue
        bound = 1.01 * gamma * s + u_out * (abs(x) + abs(y))
        r = math.inf if bound == 0.0 else d / bound
        if math.isnan(r):  # a NaN result (or term sum): out of every bound
            return math.inf, j
        if r > worst:
            worst, where = r, j
    return worst, where


class PrintedFile:
    """What a run printed, in a file, indexed without reading it into
    Python objects: memref i's shape, its values on demand, and the raw
    bytes of its data (for bitwise comparisons)."""

    _HEAD = re.compile(rb"Unranked Memref base@ = \S+ rank = \d+ offset = "
                       rb"\d+ sizes = \[([^\]]*)\] strides = \[[^\]]*\] "
                       rb"data =")
    _INTB = re.compile(rb"-?\d+")

    def __init__(self, path: str):
        import mmap
        self.path = path
        self._f = open(path, "rb")
        size = os.fstat(self._f.fileno()).st_size
        self.data = (mmap.mmap(self._f.fileno(), 0, access=mmap.ACCESS_READ)
                     if size else b"")
        heads = list(self._HEAD.finditer(self.data))
        self.entries = []
        for i, h in enumerate(heads):
            end = heads[i + 1].start() if i + 1 < len(heads) else len(
                self.data)
            shape = tuple(int(s) for s in h.group(1).split(b",")
                          if s.strip())
            self.entries.append((shape, h.end(), end))

    def __len__(self):
        return len(self.entries)

    def shape(self, i):
        return self.entries[i][0]

    def raw(self, i) -> bytes:
        _, lo, hi = self.entries[i]
        return bytes(self.data[lo:hi])

    def values(self, i) -> list:
        _, lo, hi = self.entries[i]
        return f32_from_bits_list(
            list(map(int, self._INTB.findall(self.data, lo, hi))))

    def close(self):
        if not isinstance(self.data, bytes):
            self.data.close()
        self._f.close()


def run_module_to_file(runner: str, bc: str, libs: list, out_path: str,
                       opt_level="-O0") -> PrintedFile:
    """mlir-runner on a lowered module, stdout to out_path."""
    with open(out_path, "wb") as out:
        p = subprocess.run(
            [runner, bc, "-e", "main", "-entry-point-result=void", opt_level,
             "-shared-libs=" + ",".join(libs)],
            stdout=out, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise RuntimeError(f"mlir-runner failed on {bc} (exit "
                           f"{p.returncode}):\n"
                           f"{p.stderr.decode(errors='replace')[-4000:]}")
    return PrintedFile(out_path)
