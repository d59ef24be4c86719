"""Helpers for the CPU numerics tests of norm-opt (Python 3.11, stdlib only).

What is here, each usable on its own:

- float formats (`DTYPES`): rounding a Python float (binary64) to a value
  exactly representable in bf16 / f16 / f32, and the storage bits of it;
- `Case` and `gen_inputs`: one norm backward problem and its seeded random
  inputs, never zero, already representable in their element types;
- `reference`: the backward in float64, from the f32 statistics the test
  feeds the op (so the only error measured is the op's);
- `ModuleBuilder`: one MLIR module holding many cases, a `func.func @main()`
  that builds the inputs as `arith.constant dense<"0x...">` (raw bits, exact
  for every type), calls one function per case holding the norm op, and
  prints every result as the i32 bits of its f32 value (`arith.extf` is
  exact, `printMemrefI32` prints integers), so nothing is lost in printing;
- `run_pipeline` / `parse_printed`: `norm-opt` (decompose + lowering to the
  LLVM dialect) then `mlir-runner`, and reading the printed memrefs back;
- `rel_l2` / `compare_case`: the error measure and the per-type tolerances.
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import re
import struct
import subprocess

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


@dataclasses.dataclass(frozen=True)
class DType:
    name: str  # MLIR spelling
    nbytes: int
    to_bits: object  # float -> storage bits (rounded to nearest even)
    from_bits: object  # storage bits -> float
    unit_roundoff: float  # u = 2^-p: |round(v) - v| <= u |v|
    tolerance: float  # relative L2 tolerance for a result of this type

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
DTYPES = {
    "f32": DType("f32", 4, _f32_bits, _f32_from_bits, 2.0**-24, 1e-5),
    "f16": DType("f16", 2, _f16_bits, _f16_from_bits, 2.0**-11, 1e-3),
    "bf16": DType("bf16", 2, _bf16_bits, _bf16_from_bits, 2.0**-8, 8e-3),
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
        z = []  # the standardised x, which dy is correlated with
        for _ in range(n):
            z.append(rng.gauss(0.0, 1.0))
            while abs(xt.round(offset + scale * z[-1])) < 1e-3:
                z[-1] = rng.gauss(0.0, 1.0)
        row = [xt.round(offset + scale * t) for t in z]
        x.extend(row)
        dy.extend(_nonzero(lambda: 1.0 + t + rng.gauss(0.0, 1.0), xt)
                  for t in z)
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
    """The backward in float64 from the same (rounded) inputs and f32 stats:

      xhat = (x - mean) * rstd          (RMSNorm: x * rstd)
      wdy  = w * dy  ((w + 1) * dy if zero-centred; dy without weight)
      dx   = rstd * (wdy - mean_n(wdy) - xhat * mean_n(xhat * wdy))
             (RMSNorm: without the mean_n(wdy) term)
      dw   = sum over all rows of dy * xhat
      db   = sum over all rows of dy
    """
    mu = mutant or ""
    n, rows = case.hidden, case.rows
    ln = case.op == "layer_norm"
    if inp.w is None:
        weff = [1.0] * n
    elif (case.zero_centered and mu != "w-not-plus-one") or \
            mu == "w-plus-one-always":
        weff = [w + 1.0 for w in inp.w]
    else:
        weff = list(inp.w)
    dx, dx_scale = [], []
    dw, dw_scale = [[] for _ in range(n)], [0.0] * n
    db, db_scale = [[] for _ in range(n)], [0.0] * n
    for r in range(rows):
        lo = r * n
        x = inp.x[lo:lo + n]
        dy = inp.dy[lo:lo + n]
        rs = inp.rstd[r]
        if ln and mu != "xhat-not-centred":
            m = inp.mean[r]
            xhat = [(v - m) * rs for v in x]
        else:
            xhat = [v * rs for v in x]
        wdy = [d * w for d, w in zip(dy, weff)]
        div = 1.0 if mu == "dx-sum-instead-of-mean" else float(n)
        c_mean = math.fsum(wdy) / div
        c_proj = math.fsum(h * g for h, g in zip(xhat, wdy)) / div
        if not ln and mu != "dx-rms-with-mean-wdy-term":
            c_mean = 0.0
        if mu == "dx-no-mean-wdy-term":
            c_mean = 0.0
        if mu == "dx-no-projection-term":
            c_proj = 0.0
        sign = -1.0 if mu == "dx-projection-sign-flipped" else 1.0
        outer = 1.0 if mu == "dx-no-outer-rstd" else rs
        for h, g in zip(xhat, wdy):
            dx.append(outer * (g - c_mean - sign * h * c_proj))
            dx_scale.append(rs * g)
        if mu == "dw-db-first-row-only" and r > 0:
            continue
        for j in range(n):
            if mu == "dw-uses-w-times-dy":
                t = wdy[j] * xhat[j]
            elif mu == "dw-uses-x-not-xhat":
                t = dy[j] * x[j]
            else:
                t = dy[j] * xhat[j]
            dw[j].append(t)
            dw_scale[j] += abs(t)
            db[j].append(dy[j])
            db_scale[j] += abs(dy[j])
    values = {"dx": dx}
    scales = {"dx": dx_scale}
    if case.w_type:
        values["dw"] = [math.fsum(t) for t in dw]
        scales["dw"] = dw_scale
    if case.b_type:
        values["db"] = [math.fsum(t) for t in db]
        scales["db"] = db_scale
    return Result(values, scales)


# --------------------------------------------------------------------------
# Error measure
# --------------------------------------------------------------------------


def _norm(v):
    return math.sqrt(math.fsum(t * t for t in v))


def rel_l2(out, ref, scale):
    """||out - ref|| / max(||ref||, ||scale||), all L2 over the result.

    `scale` holds the magnitudes of the terms each element is computed from
    (rstd * w * dy for dx; sum_rows |dy * xhat| for dw; sum_rows |dy| for
    db). Where the result is of the size of its terms this is the plain
    relative L2 error. Where the terms cancel (RMSNorm with N = 1, where
    dx ~ 1e-5 * rstd * w * dy; a column sum over rows of mixed signs) the
    exact result is tiny and no f32 computation can match it to relative
    precision, so the error is measured against the terms instead. A wrong
    formula still fails: it is off by a sizeable fraction of the terms.
    """
    diff = _norm([a - b for a, b in zip(out, ref)])
    if diff == 0.0:
        return 0.0
    denom = max(_norm(ref), _norm(scale))
    return math.inf if denom == 0.0 else diff / denom


def compare_case(case: Case, got: dict, ref: Result):
    """[(result name, element type, error, tolerance, ok)] for one case."""
    rows = []
    for name, elem, _ in case.outputs():
        err = rel_l2(got[name], ref.values[name], ref.scales[name])
        tol = DTYPES[elem].tolerance
        rows.append((name, elem, err, tol, err <= tol))
    return rows


# --------------------------------------------------------------------------
# MLIR emission
# --------------------------------------------------------------------------


def tensor_type(shape, elem) -> str:
    return "tensor<" + "x".join(map(str, shape)) + "x" + elem + ">"


def dense_hex(values, elem: str) -> str:
    """`dense<"0x...">`: the raw little-endian bits, exact for any type."""
    dt = DTYPES[elem]
    fmt = "<I" if dt.nbytes == 4 else "<H"
    blob = b"".join(struct.pack(fmt, dt.to_bits(v)) for v in values)
    return 'dense<"0x' + blob.hex().upper() + '">'


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
        lib_dir = os.path.join(
            os.path.dirname(os.path.dirname(os.path.realpath(runner))), "lib")
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
        bits = [int(t) for t in _INT.findall(text[h.end():end])]
        out.append((shape, [_f32_from_bits(b) for b in bits]))
    return out
