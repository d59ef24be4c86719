"""Random norm-backward programs in linalg on tensors (Python 3.11 stdlib).

A generator for the differential test (../Numerics/differential.py): each
`Program` is one LayerNorm or RMSNorm backward written the way front ends
write it -- no norm ops -- with its own inputs and float64 reference, alone
in its function or (GRAPH_SHARE of them) inside a whole graph:

- op: LayerNorm (mean and rstd) or RMSNorm (rstd);
- weight or not (zero-centred `w + 1` or not; trained, so dW is computed,
  or frozen), bias gradient dB or not (at least one of dW, dB: without a
  column reduction there is nothing to fuse);
- riders: a residual gradient added into dx, a scale on dy (a 0-d tensor,
  a scalar f32 argument or a constant), dW / dB accumulated into the
  previous gradient (`outs` initialised with it, f32);
- statistics given (`[rows]` or keepdim `[rows, 1]`) or recomputed in the
  backward from x (mean, variance, rsqrt: chained row reductions);
- types: x / dy / dx in bf16, f16 or f32; weight and dW / dB in the same
  type or f32 with bf16 / f16 x; everything computed in f32 (extf ...
  truncf), column sums accumulated in f32;
- shapes: rank 2 [rows, N] or rank 3 [B, S, N], static or with dynamic
  rows / all dims dynamic (N then taken with tensor.dim);
- operand order: function parameters permuted, `ins` of every generic
  shuffled, commutative operands swapped, combiners `out + x` or `x + out`;
- style:
    steps  : one linalg.generic per step (torch-mlir), with random
             splits (xhat in one or two steps, products before or inside
             the reductions, dx in one to five steps, row sums in one
             multi-result generic or apart, dW / dB together or apart);
    fused  : the steps form after upstream --linalg-fuse-elementwise-ops
             (the caller runs it; `needs_elementwise_fusion`);
    named  : linalg.map / linalg.broadcast / linalg.reduce / linalg.mul /
             linalg.add / linalg.sub mixed with generics;
    inline : hand-fused generics, each reduction and dx computing xhat and
             w * dy from the raw inputs in its own payload (IREE / XLA);
- graphs (`Graph`, f32 throughout): opaque neighbours around the group --
  dy out of a linalg.matmul ([rows, K] x [K, N], K 8 to 24; batch_matmul
  at rank 3), dx into one ([N, J]; its result returned instead of dx or
  beside it), a reduction that is not the group's (a row max of x, dy or
  dx; a row sum over another [rows, N'] domain, returned and maybe scaling
  dy per row; a loss's total sum into a 0-d tensor, the dy scale), an input
  (dy, w or the residual) made by a func.call to a helper function of the
  module -- and maybe a second group of another N, independent or fed by
  the first group's dx through a matmul. The reference computes the whole
  graph in float64; the fused path must give one norm.mixed_reduction per
  group and leave only the neighbours' reductions.
- masks (`Mask`, MASK_SHARE of the single-norm programs): integer and
  boolean inputs read by a rider on dy -- a dropout keep-mask [rows..., N]
  (i8: uitofp, times dy and 1 / (1 - p); i1: select k, dy * c, 0), a
  per-row i32 id (dy * (id + 1)), a per-row i1 padding mask (select valid,
  dy, 0); one generic on dy in f32 or on the raw 16-bit dy with a truncf
  back (steps, fused; named: maybe a linalg.map), or in every payload that
  reads dy (inline). The reference rounds as the payload does.

Every random choice comes from a `random.Random` seeded with a string
(stable across Python versions and runs).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import operator
import random

import norm_numerics as nn
from norm_opt.reference import MUTANTS as REFERENCE_MUTANTS
from norm_opt.reference import Rows
from norm_opt.reference import backward as reference_backward

STYLES = ("steps", "fused", "named", "inline")
SCALES = (None, "tensor", "arg", "const")
EPS = nn.DTYPES["f32"].round(1e-5)  # the recomputed statistics' epsilon


@dataclasses.dataclass(frozen=True)
class Program:
    index: int
    seed: str
    op: str  # "layer_norm" | "rms_norm"
    lead: tuple  # leading (row) dims
    n: int
    x_type: str
    p_type: str  # weight, dW and dB storage type
    has_w: bool
    zc: bool
    need_dw: bool
    need_db: bool
    residual: bool
    scale: str | None  # None | "tensor" | "arg" | "const"
    acc_dw: bool
    acc_db: bool
    keepdim: bool  # statistics (and torch-style row sums) as [rows..., 1]
    dynamic: str | None  # None | "rows" | "all" | "lead" (see KNOWN_BUGS)
    stats: str  # "given" | "recomputed"
    style: str
    # dW / dB accumulated into a buffer of the weight's (16-bit) type:
    # extf of the previous gradient as the reduction's init, truncf after.
    acc16: bool = False
    # A whole-graph function: the neighbours around this program's group,
    # and maybe a second group (see Graph). None: the function is the group.
    graph: Graph | None = None
    # Integer / boolean inputs read by a rider on dy (see Mask); None: none.
    mask: Mask | None = None

    @property
    def name(self) -> str:
        return f"prog_{self.index}"

    @property
    def groups(self) -> tuple:
        """The norm backward groups of the function, in order."""
        if self.graph is not None and self.graph.second is not None:
            return (self, self.graph.second)
        return (self,)

    @property
    def shape(self) -> tuple:
        return (*self.lead, self.n)

    @property
    def rows(self) -> int:
        return math.prod(self.lead)

    def describe(self) -> str:
        parts = ["ln" if self.op == "layer_norm" else "rms", self.x_type,
                 "x".join(map(str, self.shape)), self.style]
        if self.has_w:
            parts.append(("zcw" if self.zc else "w") + ":" + self.p_type
                         + ("" if self.need_dw else "(frozen)"))
        if self.need_db:
            parts.append("db:" + self.p_type)
        if self.residual:
            parts.append("res")
        if self.scale:
            parts.append("scale:" + self.scale)
        if self.acc_dw:
            parts.append("acc-dw")
        if self.acc_db:
            parts.append("acc-db")
        if self.acc16 and (self.acc_dw or self.acc_db):
            parts.append("acc16")
        if self.keepdim:
            parts.append("keepdim")
        if self.dynamic:
            parts.append("dyn:" + self.dynamic)
        if self.stats == "recomputed":
            parts.append("stats")
        if self.mask is not None:
            parts.append(self.mask.describe())
        text = ".".join(parts)
        if self.graph is not None:
            text += "+" + self.graph.describe()
        return text

    @property
    def dw_type(self) -> str:
        return "f32" if self.acc_dw and not self.acc16 else self.p_type

    @property
    def db_type(self) -> str:
        return "f32" if self.acc_db and not self.acc16 else self.p_type

    @property
    def prev_type(self) -> str:
        """Element type of the previous dW / dB arguments."""
        return self.p_type if self.acc16 else "f32"

    def outputs(self):
        """[(name, element type, shape)] of the function's results."""
        if self.graph is not None:
            return graph_outputs(self)
        return self.group_outputs()

    def group_outputs(self, suffix=""):
        """[(name, element type, shape)] of the group's own results; in a
        graph the second group's names end in `suffix`."""
        outs = [("dx" + suffix, self.x_type, self.shape)]
        if self.need_dw:
            outs.append(("dw" + suffix, self.dw_type, (self.n,)))
        if self.need_db:
            outs.append(("db" + suffix, self.db_type, (self.n,)))
        return outs

    @property
    def needs_elementwise_fusion(self) -> bool:
        return any(q.style == "fused" for q in self.groups)


@dataclasses.dataclass(frozen=True)
class Graph:
    """What surrounds the group(s) of a whole-graph function; the Program
    holding it is the first group. Every group of a graph is f32.

    Opaque neighbours, each optional (a graph has at least one of them, or
    a second group):
    - dy_k: the first group's dy is a matmul [rows..., K] x [K, N] (rank 3:
      batch_matmul) of two parameters;
    - dx_j: the last group's dx goes into a matmul [rows..., N] x [N, J]
      whose result is returned, dx itself too when keep_dx;
    - reduction, one that is not the group's:
        row_max   : a row max (arith.maximumf from -inf) over the first
                    group's domain of its x or dy (beside the group) or of
                    its dx (after it), returned;
        row_sum   : a row sum over another [rows..., other_n] domain,
                    returned and, when row_sum_scales_dy, a per-row scale
                    of the first group's dy (an input of the group);
        total_sum : the sum of a [L1, L2] loss into a 0-d tensor, the first
                    group's dy scale;
    - call (group, input key): that input of that group is the result of a
      func.call to a helper function of the module that scales a tensor by
      a constant (helper_scale).
    A second group over [rows..., N2] (N2 != N) has its own parameters; when
    chained, its dy is a matmul of the first group's dx ([N, N2] weight)."""

    second: Program | None = None
    chained: bool = False
    dy_k: int | None = None
    dx_j: int | None = None
    keep_dx: bool = True
    reduction: str | None = None  # None | "row_max" | "row_sum" | "total_sum"
    row_max_of: str = "x"  # "x" | "dy" | "dx"
    other_n: int = 0
    other_n_dynamic: bool = False  # the row sum's N dynamic (with "all")
    row_sum_scales_dy: bool = False
    loss_shape: tuple = ()
    call: tuple | None = None  # (group index, input key)

    def describe(self) -> str:
        parts = []
        if self.dy_k:
            parts.append(f"mm>dy:k{self.dy_k}")
        if self.call:
            parts.append(f"call>{self.call[1]}{_suffix(self.call[0])}")
        if self.reduction == "row_max":
            parts.append(f"rowmax:{self.row_max_of}")
        elif self.reduction == "row_sum":
            parts.append(f"rowsum:{self.other_n}"
                         + ("?" if self.other_n_dynamic else "")
                         + ("*dy" if self.row_sum_scales_dy else ""))
        elif self.reduction == "total_sum":
            parts.append("total:" + "x".join(map(str, self.loss_shape)))
        if self.second is not None:
            parts.append(("chain>" if self.chained else "and>")
                         + self.second.describe())
        if self.dx_j:
            parts.append(f"dx>mm:j{self.dx_j}"
                         + ("+dx" if self.keep_dx else ""))
        return "graph[" + ",".join(parts) + "]"

    def kinds(self) -> list:
        """Its kinds of neighbour, as GRAPH_KINDS names them."""
        has = {"two groups": self.second is not None,
               "chained": self.chained, "dy matmul": bool(self.dy_k),
               "dx matmul": bool(self.dx_j), "call": bool(self.call),
               "row max": self.reduction == "row_max",
               "row sum": self.reduction == "row_sum",
               "total sum": self.reduction == "total_sum"}
        return [k for k in GRAPH_KINDS if has[k]]

    @property
    def neighbour_reductions(self) -> int:
        """How many linalg reductions no group takes, as generics (the
        matmuls stay named ops)."""
        return 1 if self.reduction else 0


GRAPH_KINDS = ("two groups", "chained", "dy matmul", "dx matmul", "call",
               "row max", "row sum", "total sum")


@dataclasses.dataclass(frozen=True)
class Mask:
    """Integer and boolean inputs that a rider on dy reads (a single-norm
    program only; results stay float). One rider generic (or payload code,
    inline) computes, in f32 from dy g (after its extf and scale, or, with
    in_storage, from the raw dy with a truncf back to x's type):
      keep "i8": uitofp k : i8 to f32, g * k * c     (dropout keep-mask,
      keep "i1": select k, g * c, 0                   c = 1 / (1 - drop))
      ids      : g * (sitofp id : i32 to f32 + 1)    (a per-row i32 id)
      row_mask : select valid, g, 0                  (a per-row i1: padding)
    keep is full-domain ([rows..., N]); ids and valid are [rows...], read
    with the row map. At least one of them."""

    keep: str | None = None  # None | "i8" | "i1"
    drop: float = 0.0  # the dropout probability (c = 1 / (1 - drop))
    row_mask: bool = False
    ids: bool = False
    in_storage: bool = False  # on dy in x's type: ext, rider, truncf

    def describe(self) -> str:
        parts = []
        if self.keep:
            parts.append(f"keep:{self.keep}/{self.drop:g}")
        if self.ids:
            parts.append("ids")
        if self.row_mask:
            parts.append("rowmask")
        return ("mask" + ("@dy" if self.in_storage else "") + "["
                + ",".join(parts) + "]")

    def keys(self) -> list:
        """The parameters it reads (mask_params gives their types)."""
        return [k for k, on in (("keep", self.keep), ("valid", self.row_mask),
                                ("ids", self.ids)) if on]

    def kinds(self) -> list:
        """Its kinds of rider, as MASK_KINDS names them."""
        has = {"i8": self.keep == "i8", "i1": self.keep == "i1",
               "row mask": self.row_mask, "ids": self.ids}
        return [k for k in MASK_KINDS if has[k]]

    @property
    def keep_scale(self) -> float:
        """c = 1 / (1 - drop), the f32 constant of the payload."""
        return nn.DTYPES["f32"].round(1.0 / (1.0 - self.drop))


MASK_KINDS = ("i8", "i1", "row mask", "ids")
MASK_ROW_TYPES = {"valid": "i1", "ids": "i32"}  # the per-row inputs' types


def _suffix(group: int) -> str:
    """The ending of a group's result and parameter names in a graph."""
    return f"_{group + 1}" if group else ""


LEADS2 = (1, 2, 3, 5, 8, 13, 16, 33, 64)
LEADS3 = ((1, 1), (1, 3), (2, 3), (2, 8), (3, 5), (4, 4))
HIDDEN = (1, 2, 3, 7, 16, 33, 64, 100, 128, 256, 257)


# Whole graphs: their share of the programs, and sizes. Graph groups are
# f32 (activations, weights, matmuls: f32 sums of at most 24 products, or
# N for a matmul reading dx, stay far inside the f32 tolerance); at most
# GRAPH_MAX_SIZE elements (the float64 matmuls are Python loops); N >= 2;
# the first group of a chain N >= CHAIN_MIN_N (its dx, the chain's input,
# is then never a cancellation of its terms) and the chain matmul at most
# CHAIN_MAX_SIZE products.
GRAPH_SHARE = 0.3
GRAPH_HIDDEN = (2, 3, 7, 16, 33, 64, 100, 128, 256, 257)
GRAPH_MAX_SIZE = 2048
CHAIN_MIN_N = 7
CHAIN_MAX_SIZE = 32768
MATMUL_K = (8, 12, 16, 24)
MATMUL_J = (3, 4, 8, 16)
OTHER_N = (2, 3, 5, 8, 16)
LOSS_SHAPES = ((2, 3), (4, 8), (8, 16))

# Masks: their share of the single-norm programs, the dropout probabilities
# (keep probability 0.8 to 0.9), the largest per-row id.
MASK_SHARE = 0.2
MASK_DROPS = (0.1, 0.125, 0.2)
MASK_MAX_ID = 3


# Forms the fused path is known to get wrong (docs/numerics.md has the
# details): generated only with known_bugs=True. None at present ("lead",
# rank 3 with both leading dims dynamic, was one until partial accumulation
# stopped using expand_shape there; a graph's row sum over another [?, ?]
# domain scaling dy per row, taken into the group as a row stage over the
# group's N, was one until recognition told dynamic domains apart; both are
# now generated always).
#
# "adaln-dynamic-b-and-n" (an adaLN with B and N both dynamic) was one
# until partial accumulation brought the [B, N] column results back with
# tensor.reshape (two dynamic sizes in one expand_shape group crash LLVM
# 22's expand-strided-metadata); it is generated always now.
KNOWN_BUGS = ()


def gen_program(index: int, seed, known_bugs=False,
                graphs=False, masks=False, multi=False):
    """Program `index` of the stream with this seed: one norm per function,
    or with `graphs` (differential.py, the remark sweep; not the GPU check,
    which takes single norms) GRAPH_SHARE of them whole graphs; with
    `masks` (differential.py, the remark sweep) MASK_SHARE of the
    single-norm ones read a Mask. Whether it is a graph, and the graph, come
    from their own stream, and so do the masks, so that the other programs
    of a seed are the same either way. With `multi` (differential.py)
    MULTI_SHARE of them (or the share `multi` gives, a number: a larger
    share takes a superset of the indices) are a MultiProgram instead
    (adaLN or GroupNorm: drawn from their own stream; the other indices
    keep their programs)."""
    if multi:
        share = MULTI_SHARE if multi is True else float(multi)
        multi_rng = random.Random(f"diffgen-multi/{seed}/{index}")
        if multi_rng.random() < share:
            return _draw_multi(index, f"{seed}/{index}", multi_rng,
                               known_bugs)
    rng = random.Random(f"diffgen/{seed}/{index}")
    # Drawn from its own stream, so the draws of _draw_group stay as they
    # were.
    acc16_rng = random.Random(f"diffgen-acc16/{seed}/{index}")
    p = _draw_group(rng, acc16_rng, index, f"{seed}/{index}", known_bugs)
    graph_rng = random.Random(f"diffgen-graph/{seed}/{index}")
    if graphs and graph_rng.random() < GRAPH_SHARE:
        p = _draw_graph(p, graph_rng, known_bugs)
    mask_rng = random.Random(f"diffgen-mask/{seed}/{index}")
    if masks and p.graph is None and mask_rng.random() < MASK_SHARE:
        p = dataclasses.replace(p, mask=_draw_mask(p, mask_rng))
    return p


def _draw_group(rng, acc16_rng, index, seed, known_bugs) -> Program:
    """One norm backward and its riders."""
    op = rng.choice(("layer_norm", "rms_norm"))
    if rng.random() < 0.3:
        lead = rng.choice(LEADS3)
    else:
        lead = (rng.choice(LEADS2),)
    n = rng.choice(HIDDEN)
    while math.prod(lead) * n > 8192:
        n = rng.choice(HIDDEN)
    x_type = rng.choice(("bf16", "f16", "f32"))
    p_type = x_type if x_type == "f32" or rng.random() < 0.6 else "f32"
    has_w = rng.random() < 0.75
    zc = has_w and rng.random() < 0.3
    need_dw = has_w and rng.random() < 0.85
    need_db = rng.random() < 0.5
    if not (need_dw or need_db):
        if has_w and rng.random() < 0.5:
            need_dw = True
        else:
            need_db = True
    acc16 = p_type != "f32" and acc16_rng.random() < 0.5
    return Program(
        acc16=acc16,
        index=index, seed=seed, op=op, lead=lead, n=n,
        x_type=x_type, p_type=p_type, has_w=has_w, zc=zc, need_dw=need_dw,
        need_db=need_db, residual=rng.random() < 0.3,
        scale=rng.choice(SCALES), acc_dw=need_dw and rng.random() < 0.3,
        acc_db=need_db and rng.random() < 0.3,
        keepdim=rng.random() < 0.4,
        dynamic=_dynamic(rng, lead, known_bugs),
        stats="recomputed" if rng.random() < 0.2 else "given",
        style=rng.choice(STYLES))


def _draw_mask(p: Program, rng) -> Mask:
    """A dropout keep-mask (i8 or i1), and / or per-row ids and a per-row
    padding mask (with at least two rows: one row always stays valid).
    in_storage (16-bit x only, not inline: its payloads compute in f32)
    puts the rider on the raw dy, rounded back to x's type."""
    keep = rng.choice(("i8", "i1", "i8", "i1", None))
    ids = rng.random() < 0.3
    row_mask = p.rows >= 2 and rng.random() < 0.3
    if not (keep or ids or row_mask):
        keep = rng.choice(("i8", "i1"))
    return Mask(keep=keep, drop=rng.choice(MASK_DROPS) if keep else 0.0,
                row_mask=row_mask, ids=ids,
                in_storage=(p.x_type != "f32" and p.style != "inline"
                            and rng.random() < 0.5))


def _dynamic(rng, lead, known_bugs):
    d = rng.choice((None, None, None, "rows", "all"))
    del known_bugs  # no form is held back at present
    if len(lead) == 2 and d and rng.random() < 0.5:
        d = "lead"
    return d


# --------------------------------------------------------------------------
# Inputs and the float64 reference
# --------------------------------------------------------------------------


def core_case(p: Program) -> nn.Case:
    return nn.Case(p.op, p.shape, p.x_type, p.p_type if p.has_w else None,
                   p.p_type if p.need_db else None, p.zc)


@dataclasses.dataclass
class ProgramInputs:
    core: nn.Inputs
    scale: float | None
    dres: list | None
    prev_dw: list | None
    prev_db: list | None
    graph: GraphInputs | None = None  # the neighbours' (a graph's) inputs
    mask: MaskInputs | None = None  # the mask rider's inputs (Mask)

    @property
    def groups(self) -> tuple:
        """The inputs of each group of the function (Program.groups)."""
        if self.graph is not None and self.graph.second is not None:
            return (self, self.graph.second)
        return (self,)


def gen_inputs(p: Program) -> ProgramInputs:
    """Seeded, never zero, representable in their types."""
    if isinstance(p, MultiProgram):
        return gen_multi_inputs(p)
    inp = _gen_group_inputs(p)
    if p.graph is not None:
        inp.graph = gen_graph_inputs(p)
    return inp


def _gen_group_inputs(p: Program) -> ProgramInputs:
    core = nn.gen_inputs(core_case(p), p.seed)
    rng = random.Random(f"diffgen-riders/{p.seed}")
    f32, xt = nn.DTYPES["f32"], nn.DTYPES[p.x_type]
    scale = p_scale_const(p) if p.scale else None
    dres = prev_dw = prev_db = None
    if p.residual:
        dres = [nn._nonzero(lambda: rng.gauss(0.0, 1.0), xt)
                for _ in range(len(core.x))]
    pt = nn.DTYPES[p.prev_type]
    if p.acc_dw:
        prev_dw = [nn._nonzero(lambda: rng.gauss(0.0, 2.0), pt)
                   for _ in range(p.n)]
    if p.acc_db:
        prev_db = [nn._nonzero(lambda: rng.gauss(0.0, 2.0), pt)
                   for _ in range(p.n)]
    return ProgramInputs(core, scale, dres, prev_dw, prev_db,
                         mask=gen_mask_inputs(p) if p.mask else None)


@dataclasses.dataclass
class MaskInputs:
    """A Mask's inputs, 0 / 1 and small ints as floats (None: not read)."""
    keep: list | None  # [rows * N]: 1 with probability 1 - drop
    valid: list | None  # [rows]: 0 for a padded row
    ids: list | None  # [rows]: 0 to MASK_MAX_ID
    # masked_dy's results, by the rider a mutant forgets (None: none).
    dy_cache: dict = dataclasses.field(default_factory=dict)


def gen_mask_inputs(p: Program) -> MaskInputs:
    """Seeded (their own stream: the other inputs stay as they were). Never
    degenerate: every row keeps at least one element, some row is valid and
    some is padded, some id is not 0 (so that forgetting a rider shows)."""
    m = p.mask
    rng = random.Random(f"diffgen-mask-inputs/{p.seed}")
    rows, n = p.rows, p.n
    keep = valid = ids = None
    if m.keep:
        keep = [float(rng.random() >= m.drop) for _ in range(rows * n)]
        for r in range(rows):
            if not any(keep[r * n:(r + 1) * n]):
                keep[r * n + rng.randrange(n)] = 1.0
    if m.row_mask:
        valid = [float(rng.random() >= 0.25) for _ in range(rows)]
        valid[rng.randrange(rows)] = 1.0
        if all(valid):  # (rows >= 2: one stays valid)
            valid[rng.randrange(rows)] = 0.0
    if m.ids:
        ids = [float(rng.randint(0, MASK_MAX_ID)) for _ in range(rows)]
        if not any(ids):
            ids[rng.randrange(rows)] = float(rng.randint(1, MASK_MAX_ID))
    return MaskInputs(keep, valid, ids)


def masked_dy(p: Program, inp: ProgramInputs, forget=None):
    """dy through the mask rider as the payload computes it (_mask_payload:
    f32 products; rounded to x's type when in_storage); `forget`: the
    rider a mutant leaves out ("keep", "valid" or "ids")."""
    mi = inp.mask
    if forget in mi.dy_cache:
        return mi.dy_cache[forget]
    m, n = p.mask, p.n
    r32 = nn.DTYPES["f32"].round
    c = m.keep_scale
    out = []
    for i, g in enumerate(inp.core.dy):
        r = i // n
        if m.keep and forget != "keep":
            g = r32(g * c) * mi.keep[i]
        if m.ids and forget != "ids":
            g = r32(g * (mi.ids[r] + 1.0))
        if m.row_mask and forget != "valid":
            g = g * mi.valid[r]
        out.append(g)
    if m.in_storage:
        out = nn.DTYPES[p.x_type].round_list(out)
    mi.dy_cache[forget] = out
    return out


# Wrong references for the self-check (each must be caught): the core
# formula mistakes of norm_numerics.MUTANTS, plus forgetting a rider.
RIDER_MUTANTS = {
    "no-residual": lambda p: p.residual,
    "no-dy-scale": lambda p: p.scale is not None,
    "no-prev-dw": lambda p: p.acc_dw,
    "no-prev-db": lambda p: p.acc_db,
    "no-mask": lambda p: _dy_matters(p) and p.mask.keep is not None,
    "no-row-mask": lambda p: _dy_matters(p) and p.mask.row_mask,
    "no-row-ids": lambda p: _dy_matters(p) and p.mask.ids,
}
# The Mask rider each mask mutant forgets (masked_dy's `forget`).
MASK_MUTANTS = {"no-mask": "keep", "no-row-mask": "valid",
                "no-row-ids": "ids"}


def _dy_matters(p: Program) -> bool:
    """Whether a program with a mask has a result that depends on dy: not
    LayerNorm over N = 1 without dB (xhat = 0: dx = 0, dW = 0)."""
    return p.mask is not None and not (p.op == "layer_norm" and p.n == 1
                                       and not p.need_db)


def mutant_applies(p: Program, mutant: str) -> bool:
    """Whether the mistake changes the program's results: in a graph, a
    group mistake applies where it applies to some group (the reference
    makes it in every group)."""
    if isinstance(p, MultiProgram):
        return _multi_mutant_applies(p, mutant)
    if mutant in MULTI_MUTANTS:
        return False
    if mutant in GRAPH_MUTANTS:
        return p.graph is not None and GRAPH_MUTANTS[mutant](p)
    return any(_group_mutant_applies(q, mutant) for q in p.groups)


def _group_mutant_applies(p: Program, mutant: str) -> bool:
    if mutant in RIDER_MUTANTS:
        return RIDER_MUTANTS[mutant](p)
    c = core_case(p)
    if not nn.MUTANTS[mutant](c):
        return False
    # dW mutants need a dW result; dB-only mutants a dB one.
    if mutant.startswith("dw-uses") and not p.need_dw:
        return False
    if mutant == "dw-db-first-row-only" and not (p.need_dw or p.need_db):
        return False
    # With dW and dB both accumulated into large previous gradients, a
    # first-row-only sum can hide below the f32 tolerance; it cannot with
    # the accumulation off.
    if mutant == "dw-db-first-row-only" and (
            (p.need_dw and p.acc_dw) or not p.need_dw) and (
            (p.need_db and p.acc_db) or not p.need_db):
        return False
    return True


def all_mutants():
    return (list(nn.MUTANTS) + list(RIDER_MUTANTS) + list(GRAPH_MUTANTS)
            + list(MULTI_MUTANTS))


def recomputed_stats(p: Program, x):
    """The statistics a program recomputes from x, as its f32 arithmetic
    gives them (sequential f32 sums over N, as both paths sum; rsqrt as
    1 / sqrt, as math-to-llvm lowers it). The reference takes these, like
    the given f32 statistics of norm_numerics.reference: LayerNorm's x - mean
    loses digits in f32 when a row's spread is small next to its offset
    (N = 2 with two close values), and that error is the program's, not the
    lowering's; from the same statistics the backward itself is well
    conditioned."""
    r32 = nn.DTYPES["f32"].round
    n = p.n
    nf = float(n)
    mean, rstd = [], []
    for r in range(p.rows):
        row = x[r * n:(r + 1) * n]
        if p.op == "layer_norm":
            s = 0.0
            for v in row:
                s = r32(s + v)
            m = r32(s / nf)
            mean.append(m)
            row = [r32(v - m) for v in row]
        ss = 0.0
        for v in row:
            ss = r32(ss + r32(v * v))
        var = r32(r32(ss / nf) + EPS)
        rstd.append(r32(1.0 / r32(math.sqrt(var))))
    return (mean if p.op == "layer_norm" else None), rstd


@functools.lru_cache(maxsize=4)
def _recomputed_stats_cached(p: Program, x: tuple):
    """recomputed_stats, once for the reference and all the mutants'."""
    return recomputed_stats(p, x)


def reference(p: Program, inp: ProgramInputs, mutant: str | None = None):
    """nn.Result for the program's outputs, in float64 from the same
    (rounded) inputs; recomputed statistics as recomputed_stats gives them.
    A graph's reference computes the whole graph (graph_reference), a
    multi-axis program's multi_reference."""
    if isinstance(p, MultiProgram):
        return multi_reference(p, inp, mutant)
    if p.graph is not None:
        return graph_reference(p, inp, mutant)
    return _group_reference(p, inp, mutant)


def _group_reference(p: Program, inp: ProgramInputs, mutant: str | None):
    """One group's results (in a graph, from the inputs the graph gives
    it): norm_opt.reference.backward with the riders (dy scale, residual,
    dW / dB accumulated) from the same inputs; the mask rider's dy as
    masked_dy computes it, recomputed statistics as recomputed_stats."""
    core = inp.core
    n = p.n
    dy = core.dy
    if p.mask is not None:
        dy = masked_dy(p, inp, MASK_MUTANTS.get(mutant))
    mean, rstd = core.mean, core.rstd
    if p.stats == "recomputed":
        mean, rstd = _recomputed_stats_cached(p, tuple(core.x))
    results = ["dx"] + (["dw"] if p.need_dw else []) + (
        ["db"] if p.need_db else [])
    values, scales = reference_backward(
        p.op, Rows.full(core.x, n), Rows.full(dy, n), Rows.column(rstd),
        Rows.column(mean) if p.op == "layer_norm" else None,
        Rows.vector(core.w) if core.w is not None else None,
        zero_centered=p.zc, dy_scale=inp.scale,
        residual=Rows.full(inp.dres, n) if inp.dres is not None else None,
        dw_in=inp.prev_dw if p.need_dw else None,
        db_in=inp.prev_db if p.need_db else None,
        results=results, scales=True,
        mutant=mutant if mutant in REFERENCE_MUTANTS else None)
    return nn.Result({k: v.flat() for k, v in values.items()},
                     {k: v.flat() for k, v in scales.items()})


# --------------------------------------------------------------------------
# Emission
# --------------------------------------------------------------------------


def _ttype(dims, elem):
    """tensor type from dims given as ints or None (dynamic)."""
    return "tensor<" + "".join(("?" if d is None else str(d)) + "x"
                               for d in dims) + elem + ">"


class Body:
    """Builds a payload: fresh SSA names, commutative operands swapped at
    random."""

    def __init__(self, fn: "Fn"):
        self.fn = fn
        self.lines = []

    def _new(self):
        return self.fn.fresh("v")

    def bin(self, op, a, b, ty="f32"):
        if op in ("mulf", "addf", "maximumf") and \
                self.fn.rng.random() < 0.5:
            a, b = b, a
        v = self._new()
        self.lines.append(f"{v} = arith.{op} {a}, {b} : {ty}")
        return v

    def mul(self, a, b):
        return self.bin("mulf", a, b)

    def add(self, a, b):
        return self.bin("addf", a, b)

    def sub(self, a, b):
        return self.bin("subf", a, b)

    def div(self, a, b):
        return self.bin("divf", a, b)

    def ext(self, a, src):
        if src == "f32":
            return a
        v = self._new()
        self.lines.append(f"{v} = arith.extf {a} : {src} to f32")
        return v

    def trunc(self, a, dst):
        if dst == "f32":
            return a
        v = self._new()
        self.lines.append(f"{v} = arith.truncf {a} : f32 to {dst}")
        return v

    def itofp(self, op, a, src):
        """uitofp / sitofp of an integer to f32."""
        v = self._new()
        self.lines.append(f"{v} = arith.{op} {a} : {src} to f32")
        return v

    def select(self, cond, a, b):
        v = self._new()
        self.lines.append(f"{v} = arith.select {cond}, {a}, {b} : f32")
        return v

    def rsqrt(self, a):
        v = self._new()
        self.lines.append(f"{v} = math.rsqrt {a} : f32")
        return v

    def const(self, value: float):
        v = self._new()
        bits = nn.DTYPES["f32"].to_bits(value)
        self.lines.append(f"{v} = arith.constant 0x{bits:08X} : f32")
        return v


class Fn:
    """One function being emitted: SSA names, shapes, helpers for linalg
    ops in the forms front ends use. The shapes are those of one domain
    ([rows..., N] of `p`); in a graph each domain has its own Fn, and they
    all write to the lines of the first (`host`) with its SSA names."""

    def __init__(self, p: Program, rng: random.Random, host=None):
        self.p = p
        self.rng = rng
        self.host = host or self
        self.lines = self.host.lines if host else []
        self.counter = 0
        self.rank = len(p.shape)
        r = self.rank
        # Dynamic rows: the first leading dim (all of them with "lead");
        # dynamic N with "all".
        dyn_rows = p.dynamic in ("rows", "all")
        dyn_n = p.dynamic == "all"
        self.full_dims = [
            None if (dyn_rows and i == 0) or p.dynamic == "lead" else d
            for i, d in enumerate(p.lead)] + [None if dyn_n else p.n]
        self.row_dims = self.full_dims[:-1]
        self.col_dims = self.full_dims[-1:]
        d = [f"d{i}" for i in range(r)]
        self.maps = {
            "full": f"affine_map<({', '.join(d)}) -> ({', '.join(d)})>",
            "row": f"affine_map<({', '.join(d)}) -> ({', '.join(d[:-1])})>",
            "rowk": f"affine_map<({', '.join(d)}) -> "
                    f"({', '.join(d[:-1])}, 0)>",
            "col": f"affine_map<({', '.join(d)}) -> ({d[-1]})>",
            "scalar": f"affine_map<({', '.join(d)}) -> ()>",
        }
        dr = d[:-1]
        self.row_maps = {  # generics over the rows only
            "row": f"affine_map<({', '.join(dr)}) -> ({', '.join(dr)})>",
            "rowk": f"affine_map<({', '.join(dr)}) -> "
                    f"({', '.join(dr)}, 0)>",
            "scalar": f"affine_map<({', '.join(dr)}) -> ()>",
        }
        self.col_maps = {"col": "affine_map<(d0) -> (d0)>"}
        self.dim_values = {}  # dim index -> SSA index value
        self.zero = None
        self.n_value = None

    def fresh(self, stem="t"):
        self.host.counter += 1
        return f"%{stem}{self.host.counter}"

    def emit(self, line):
        self.lines.append("  " + line)

    # ---- types --------------------------------------------------------

    def t_full(self, elem):
        return _ttype(self.full_dims, elem)

    def t_row(self, elem="f32", keep=False):
        return _ttype(self.row_dims + ([1] if keep else []), elem)

    def t_col(self, elem):
        return _ttype(self.col_dims, elem)

    # ---- helpers ------------------------------------------------------

    def setup(self, x):
        """Index constants, dynamic dims, the zero, N as f32."""
        self.x = x
        for i, dim in enumerate(self.full_dims):
            if dim is None:
                c = self.fresh("c")
                self.emit(f"{c} = arith.constant {i} : index")
                v = self.fresh("dim")
                self.emit(f"{v} = tensor.dim {x}, {c} : "
                          f"{self.t_full(self.p.x_type)}")
                self.dim_values[i] = v
        self.zero = self.fresh("zero")
        self.emit(f"{self.zero} = arith.constant 0.000000e+00 : f32")
        if self.full_dims[-1] is None:
            ni = self.fresh("ni")
            self.emit(f"{ni} = arith.index_cast "
                      f"{self.dim_values[self.rank - 1]} : index to i64")
            self.n_value = self.fresh("nf")
            self.emit(f"{self.n_value} = arith.uitofp {ni} : i64 to f32")
        else:
            self.n_value = self.fresh("nf")
            self.emit(f"{self.n_value} = arith.constant "
                      f"{float(self.p.n):e} : f32")

    def empty(self, kind, elem, keep=False):
        dims = {"full": self.full_dims, "row": self.row_dims,
                "col": self.col_dims}[kind]
        idx = {"full": range(self.rank), "row": range(self.rank - 1),
               "col": [self.rank - 1]}[kind]
        dyn = [self.dim_values[i] for i, d in zip(idx, dims) if d is None]
        t = {"full": self.t_full(elem), "row": self.t_row(elem, keep),
             "col": self.t_col(elem)}[kind]
        v = self.fresh("e")
        self.emit(f"{v} = tensor.empty({', '.join(dyn)}) : {t}")
        return v, t

    def zeros(self, kind, keep=False):
        e, t = self.empty(kind, "f32", keep)
        return self.fill(self.zero, e, t), t

    def fill(self, value, e, t):
        v = self.fresh("z")
        self.emit(f"{v} = linalg.fill ins({value} : f32) outs({e} : {t})"
                  f" -> {t}")
        return v

    def rows_by(self, last):
        """The type of [rows..., last] f32 (static last): a matmul's
        operand or result beside the domain."""
        return _ttype(self.row_dims + [last], "f32")

    def matmul(self, a, at, b, bt, last):
        """a [rows..., K] x b [K, last] (rank 3: batch_matmul with b [B, K,
        last]) into a zero-filled [rows..., last] f32; `last` None (a
        dynamic N) is only allowed for this domain's own N."""
        if last is None or last == self.full_dims[-1]:
            out, t = self.zeros("full")
        else:
            t = self.rows_by(last)
            dyn = [self.dim_values[i] for i, d in enumerate(self.row_dims)
                   if d is None]
            e = self.fresh("e")
            self.emit(f"{e} = tensor.empty({', '.join(dyn)}) : {t}")
            out = self.fill(self.zero, e, t)
        op = "linalg.matmul" if self.rank == 2 else "linalg.batch_matmul"
        r = self.fresh("mm")
        self.emit(f"{r} = {op} ins({a}, {b} : {at}, {bt}) outs({out} : {t})"
                  f" -> {t}")
        return r, t

    def t_weight(self, k, last):
        """A matmul's right operand [K, last] ([B, K, last] at rank 3, with
        the batch dim as dynamic as the rows' first)."""
        batch = self.full_dims[:1] if self.rank == 3 else []
        return _ttype(batch + [k, last], "f32")

    def generic(self, ins, outs, iters, body_fn, maps=None):
        """ins: [(key, ssa, type, map name)]; outs: [(ssa, type, map name)];
        body_fn(args: {key: block arg}, outs: [out args], Body) ->
        [yielded]. The order of `ins` is shuffled."""
        maps = maps or self.maps
        ins = list(ins)
        self.rng.shuffle(ins)
        args = {}
        bargs = []
        for i, (key, _, t, _) in enumerate(ins):
            a = self.fresh("in")
            args[key] = a
            bargs.append(f"{a}: {nn.parse_type(t)[1] if t != 'f32' else t}")
        oargs = []
        for _, t, _ in outs:
            a = self.fresh("out")
            oargs.append(a)
            bargs.append(f"{a}: {nn.parse_type(t)[1]}")
        b = Body(self)
        ys = body_fn(args, oargs, b)
        ytypes = [nn.parse_type(t)[1] for _, t, _ in outs]
        res = [self.fresh("g") for _ in outs]
        lhs = res[0] if len(res) == 1 else f"{res[0]}:{len(res)}"
        if len(res) > 1:
            res = [f"{res[0]}#{i}" for i in range(len(res))]
        imaps = ", ".join(maps[m] for *_, m in ins) + (", " if ins else "") \
            + ", ".join(maps[m] for *_, m in outs)
        its = ", ".join(f'"{i}"' for i in iters)
        ins_s = ", ".join(v for _, v, _, _ in ins)
        ins_t = ", ".join(t for _, _, t, _ in ins)
        outs_s = ", ".join(v for v, _, _ in outs)
        outs_t = ", ".join(t for _, t, _ in outs)
        rt = outs_t if len(outs) == 1 else f"({outs_t})"
        self.emit(f"{lhs} = linalg.generic {{indexing_maps = [{imaps}], "
                  f"iterator_types = [{its}]}}")
        self.emit(f"    ins({ins_s} : {ins_t}) outs({outs_s} : {outs_t}) {{")
        self.emit(f"^bb0({', '.join(bargs)}):")
        for line in b.lines:
            self.emit("  " + line)
        self.emit(f"  linalg.yield {', '.join(ys)} : {', '.join(ytypes)}")
        self.emit(f"}} -> {rt}")
        return res

    def elementwise(self, ins, elem, body_fn):
        """A full-domain elementwise generic with one result."""
        e, t = self.empty("full", elem)
        return self.generic(ins, [(e, t, "full")],
                            ["parallel"] * self.rank,
                            lambda a, o, b: [body_fn(a, b)])[0], t

    def row_reduce(self, ins, contribs_fn, keep, count=None):
        """A row reduction (over N) into zero-filled [rows] (or keepdim)
        tensors; contribs_fn(args, Body) -> [contribution per output]."""
        k = count or 1
        outs = []
        for _ in range(k):
            z, t = self.zeros("row", keep)
            outs.append((z, t, "rowk" if keep else "row"))
        iters = ["parallel"] * (self.rank - 1) + ["reduction"]

        def body(a, o, b):
            cs = contribs_fn(a, b)
            return [self._combine(b, oa, c) for oa, c in zip(o, cs)]
        return self.generic(ins, outs, iters, body)

    def _combine(self, b, out, c):
        # `out + c` or `c + out`: Body.bin swaps addf operands at random.
        return b.bin("addf", out, c)

    def col_reduce(self, ins, contribs_fn, inits):
        """A column reduction (over all leading dims) into `inits`
        ([(ssa, type)]: zero fills or the previous gradients)."""
        outs = [(v, t, "col") for v, t in inits]
        iters = ["reduction"] * (self.rank - 1) + ["parallel"]

        def body(a, o, b):
            cs = contribs_fn(a, b)
            return [self._combine(b, oa, c) for oa, c in zip(o, cs)]
        return self.generic(ins, outs, iters, body)

    def row_elementwise(self, ins, body_fn, keep=False):
        """A generic over the rows only: [rows] -> [rows] with identity
        maps, or keepdim [rows, 1] -> [rows, 1] as torch-mlir writes it (a
        rank-R generic whose last loop has extent 1)."""
        e, t = self.empty("row", "f32", keep)
        if keep:
            ins = [(k, v, it, "full") for k, v, it, _ in ins]
            return self.generic(ins, [(e, t, "full")],
                                ["parallel"] * self.rank,
                                lambda a, o, b: [body_fn(a, b)])[0], t
        return self.generic(ins, [(e, t, "row")],
                            ["parallel"] * (self.rank - 1),
                            lambda a, o, b: [body_fn(a, b)],
                            maps=self.row_maps)[0], t

    def col_elementwise(self, ins, elem, body_fn):
        e, t = self.empty("col", elem)
        return self.generic(ins, [(e, t, "col")], ["parallel"],
                            lambda a, o, b: [body_fn(a, b)],
                            maps=self.col_maps)[0], t

    # ---- named ops ----------------------------------------------------

    def broadcast(self, v, vt, kind):
        """linalg.broadcast of a [rows] or [N] value over the domain."""
        e, t = self.empty("full", "f32")
        dims = [self.rank - 1] if kind == "row" else list(
            range(self.rank - 1))
        r = self.fresh("bc")
        self.emit(f"{r} = linalg.broadcast ins({v} : {vt}) outs({e} : {t}) "
                  f"dimensions = [{', '.join(map(str, dims))}]")
        return r, t

    def map_binary(self, op, a, b_, t):
        """linalg.map { arith.op } or the named linalg.mul/add/sub/div."""
        if op in ("mulf", "addf") and self.rng.random() < 0.5:
            a, b_ = b_, a
        e, _ = self.empty("full", nn.parse_type(t)[1])
        r = self.fresh("m")
        if self.rng.random() < 0.5:
            self.emit(f"{r} = linalg.map {{ arith.{op} }} ins({a}, {b_} : "
                      f"{t}, {t}) outs({e} : {t})")
        else:
            named = {"mulf": "mul", "addf": "add", "subf": "sub",
                     "divf": "div"}[op]
            self.emit(f"{r} = linalg.{named} ins({a}, {b_} : {t}, {t}) "
                      f"outs({e} : {t}) -> {t}")
        return r

    def map_region(self, ins, elem, body_fn):
        """linalg.map with a payload over same-shaped full tensors."""
        e, t = self.empty("full", elem)
        args = {}
        bargs = []
        for key, _, it in ins:
            a = self.fresh("in")
            args[key] = a
            bargs.append(f"{a}: {nn.parse_type(it)[1]}")
        o = self.fresh("out")
        bargs.append(f"{o}: {elem}")
        b = Body(self)
        y = body_fn(args, b)
        r = self.fresh("m")
        self.emit(f"{r} = linalg.map ins({', '.join(v for _, v, _ in ins)} :"
                  f" {', '.join(it for _, _, it in ins)}) outs({e} : {t})")
        self.emit(f"    ({', '.join(bargs)}) {{")
        for line in b.lines:
            self.emit("  " + line)
        self.emit(f"  linalg.yield {y} : {elem}")
        self.emit("}")
        return r, t

    def reduce(self, v, vt, kind, init, init_t):
        """linalg.reduce over N (kind row) or over the rows (kind col)."""
        dims = [self.rank - 1] if kind == "row" else list(
            range(self.rank - 1))
        r = self.fresh("red")
        ds = ", ".join(map(str, dims))
        if self.rng.random() < 0.5:
            self.emit(f"{r} = linalg.reduce {{ arith.addf }} ins({v} : {vt}) "
                      f"outs({init} : {init_t}) dimensions = [{ds}]")
        else:
            a, o = self.fresh("in"), self.fresh("acc")
            s = self.fresh("s")
            lhs, rhs = (o, a) if self.rng.random() < 0.5 else (a, o)
            self.emit(f"{r} = linalg.reduce ins({v} : {vt}) outs({init} : "
                      f"{init_t}) dimensions = [{ds}]")
            self.emit(f"    ({a}: f32, {o}: f32) {{")
            self.emit(f"    {s} = arith.addf {lhs}, {rhs} : f32")
            self.emit(f"    linalg.yield {s} : f32")
            self.emit("  }")
        return r

    def collapse_keep(self, v, vt):
        """[rows..., 1] -> [rows...] (for named ops)."""
        r = self.rank - 1  # rank of the keepdim value is self.rank
        groups = [[i] for i in range(r - 1)] + [[r - 1, r]]
        g = ", ".join("[" + ", ".join(map(str, x)) + "]" for x in groups)
        c = self.fresh("col")
        t = self.t_row("f32")
        self.emit(f"{c} = tensor.collapse_shape {v} [{g}] : {vt} into {t}")
        return c, t


# ---- the program ----------------------------------------------------------


def params(p: Program):
    """[(key, type)] of the parameters, in canonical order."""
    fn = Fn(p, random.Random(0))
    ps = [("x", fn.t_full(p.x_type)), ("dy", fn.t_full(p.x_type))]
    if p.stats == "given":
        if p.op == "layer_norm":
            ps.append(("mean", fn.t_row("f32", p.keepdim)))
        ps.append(("rstd", fn.t_row("f32", p.keepdim)))
    if p.has_w:
        ps.append(("w", fn.t_col(p.p_type)))
    if p.scale == "tensor":
        ps.append(("scale", "tensor<f32>"))
    elif p.scale == "arg":
        ps.append(("scale", "f32"))
    if p.residual:
        ps.append(("dres", fn.t_full(p.x_type)))
    if p.acc_dw:
        ps.append(("prev_dw", fn.t_col(p.prev_type)))
    if p.acc_db:
        ps.append(("prev_db", fn.t_col(p.prev_type)))
    ps += mask_params(p, fn)
    return ps


def mask_params(p: Program, fn):
    """[(key, type)] of the Mask's inputs: keep [rows..., N] i8 / i1,
    valid [rows...] i1, ids [rows...] i32."""
    m = p.mask
    if m is None:
        return []
    return [(k, fn.t_full(m.keep) if k == "keep"
             else fn.t_row(MASK_ROW_TYPES[k])) for k in m.keys()]


def emit_program(p: Program):
    """(function text, [(param key, type)] in signature order,
    [result type]); a graph's text also defines its helper function."""
    if isinstance(p, MultiProgram):
        return emit_multi(p)
    if p.graph is not None:
        return emit_graph(p)
    rng = random.Random(f"diffgen-emit/{p.seed}")
    fn = Fn(p, rng)
    ps = params(p)
    order = list(range(len(ps)))
    rng.shuffle(order)
    sig = [ps[i] for i in order]
    names = {k: f"%{k}" for k, _ in ps}
    types = dict(ps)
    fn.setup(names["x"])
    results = emit_group(fn, p, names, types)
    return _function_text(p, fn, sig, results)


def emit_group(fn, p, names, types):
    """The group's ops in p.style; {result name: (SSA value, type)}."""
    if p.scale == "const":
        # A constant at function level, captured by the payloads.
        names = dict(names)
        names["scale"] = fn.fresh("scale")
        bits = nn.DTYPES["f32"].to_bits(p_scale_const(p))
        fn.emit(f"{names['scale']} = arith.constant 0x{bits:08X} : f32")
    return {"steps": _emit_steps, "fused": _emit_steps,
            "named": _emit_named, "inline": _emit_inline}[p.style](
        fn, p, names, types)


def _function_text(p, fn, sig, results, defs=""):
    """(text, sig, result types) of the function returning p.outputs() from
    `results` ({name: (SSA value, type)}); `defs`: functions it calls."""
    rtypes = []
    rets = []
    for name, elem, _ in p.outputs():
        v, t = results[name]
        rets.append(v)
        rtypes.append(t)
    fn.emit(f"return {', '.join(rets)} : {', '.join(rtypes)}")
    sig_s = ", ".join(f"%{k}: {t}" for k, t in sig)
    text = (f"// {p.describe()}\n{defs}"
            f"func.func @{p.name}({sig_s}) -> ({', '.join(rtypes)}) {{\n"
            + "\n".join(fn.lines) + "\n}\n")
    return text, sig, rtypes


def p_scale_const(p: Program) -> float:
    """The value of a constant dy scale (fixed per program)."""
    rng = random.Random(f"diffgen-scale/{p.seed}")
    return nn.DTYPES["f32"].round(rng.choice((rng.uniform(0.3, 0.8),
                                              rng.uniform(1.3, 3.0))))


def _scale_in(fn, p, names, types, ins):
    """Adds the dy scale to a generic's inputs when it is a 0-d tensor;
    returns a function giving the scale's SSA value inside the payload."""
    if p.scale == "tensor":
        ins.append(("scale", names["scale"], types["scale"], "scalar"))
        return lambda a: a["scale"]
    if p.scale in ("arg", "const"):
        return lambda a: names["scale"]
    return None


def _mask_ins(p, names, types, ins):
    """Adds the Mask's inputs to a generic's inputs (keep with the full
    map, valid and ids with the row map)."""
    for key in p.mask.keys():
        ins.append((key, names[key], types[key],
                    "full" if key == "keep" else "row"))


def _mask_payload(b, p, a, g):
    """dy g (f32) through the Mask rider, in a payload with the block
    arguments a["keep"], a["ids"], a["valid"] (masked_dy computes the
    same)."""
    m = p.mask
    if m.keep == "i8":
        g = b.mul(b.mul(g, b.itofp("uitofp", a["keep"], "i8")),
                  b.const(m.keep_scale))
    elif m.keep == "i1":
        g = b.select(a["keep"], b.mul(g, b.const(m.keep_scale)),
                     b.const(0.0))
    if m.ids:
        g = b.mul(g, b.add(b.itofp("sitofp", a["ids"], "i32"),
                           b.const(1.0)))
    if m.row_mask:
        g = b.select(a["valid"], g, b.const(0.0))
    return g


def _emit_mask(fn, p, names, types, dy, elem, named=False):
    """The Mask rider on dy (full, of type `elem`: x's type for in_storage,
    else f32) in its own elementwise op: a generic, or (`named`, a
    keep-mask alone) maybe a linalg.map. Returns the new dy (same type)."""
    def body(a, b):
        return b.trunc(_mask_payload(b, p, a, b.ext(a["dy"], elem)), elem)
    t = fn.t_full(elem)
    if named and not (p.mask.row_mask or p.mask.ids) and \
            fn.rng.random() < 0.7:
        return fn.map_region([("dy", dy, t),
                              ("keep", names["keep"], types["keep"])],
                             elem, body)[0]
    ins = [("dy", dy, t, "full")]
    _mask_ins(p, names, types, ins)
    return fn.elementwise(ins, elem, body)[0]


def _mask_in_storage(fn, p, names, types, named=False):
    """names with dy replaced by the masked raw dy when the Mask is
    applied in x's type (in_storage); names as given otherwise."""
    if p.mask is None or not p.mask.in_storage:
        return names
    names = dict(names)
    names["dy"] = _emit_mask(fn, p, names, types, names["dy"], p.x_type,
                             named)
    return names


def _stats_ins(p, names, types, ins):
    keymap = "rowk" if p.keepdim else "row"
    if p.op == "layer_norm":
        ins.append(("mean", names["mean"], types["mean"], keymap))
    ins.append(("rstd", names["rstd"], types["rstd"], keymap))


def _recompute_stats(fn, p, names, types, keep):
    """Emits the statistics computed from x: returns (names, types) with
    "mean" / "rstd" as [rows] (or keepdim) f32 tensors, read with the row
    map. Chained row reductions: sum x -> mean -> sum (x - mean)^2 -> rstd
    (RMSNorm: sum x^2 -> rstd)."""
    km = "rowk" if keep else "row"
    names, types = dict(names), dict(types)
    rmaps_key = "rowk" if keep else "row"
    if p.op == "layer_norm":
        (s,) = fn.row_reduce(
            [("x", names["x"], types["x"], "full")],
            lambda a, b: [b.ext(a["x"], p.x_type)], keep)
        mean, mt = fn.row_elementwise(
            [("s", s, fn.t_row("f32", keep), rmaps_key)],
            lambda a, b: b.div(a["s"], fn.n_value), keep)
        names["mean"], types["mean"] = mean, mt

        def sq(a, b):
            c = b.sub(b.ext(a["x"], p.x_type), a["mean"])
            return [b.bin("mulf", c, c)]
        (ss,) = fn.row_reduce([("x", names["x"], types["x"], "full"),
                               ("mean", mean, mt, km)], sq, keep)
    else:
        def sq(a, b):
            c = b.ext(a["x"], p.x_type)
            return [b.bin("mulf", c, c)]
        (ss,) = fn.row_reduce([("x", names["x"], types["x"], "full")], sq,
                              keep)

    def rs(a, b):
        var = b.div(a["ss"], fn.n_value)
        return b.rsqrt(b.add(var, b.const(EPS)))
    rstd, rt = fn.row_elementwise(
        [("ss", ss, fn.t_row("f32", keep), rmaps_key)], rs, keep)
    names["rstd"], types["rstd"] = rstd, rt
    return names, types


def _weff(b, a, p):
    """w (or w + 1) in f32 inside a payload, from block arg a["w"]."""
    w = b.ext(a["w"], p.p_type)
    if p.zc:
        w = b.add(w, b.const(1.0))
    return w


def _mean_of(b, fn, s):
    """s / N, as a division or a multiplication by 1/N."""
    if fn.p.dynamic == "all" or fn.rng.random() < 0.5:
        return b.div(s, fn.n_value)
    return b.mul(s, b.const(nn.DTYPES["f32"].round(1.0 / fn.p.n)))


def _prev_init(fn, p, names, types, nm):
    """The column reduction's init for an accumulated dW / dB: the previous
    gradient itself (f32), or its extf (a 16-bit buffer)."""
    key = "prev_" + nm
    if p.prev_type == "f32":
        return names[key], types[key]
    return fn.col_elementwise([("s", names[key], types[key], "col")], "f32",
                              lambda a, b: b.ext(a["s"], p.prev_type))


def _finish_columns(fn, p, names, types, col_contribs, ins):
    """dW / dB: one multi-result column reduction or one each; then the
    casts to the weight type. col_contribs: {name: fn(args, Body)}."""
    results = {}
    wanted = [nm for nm in ("dw", "db") if (nm == "dw" and p.need_dw) or
              (nm == "db" and p.need_db)]
    inits = {}
    for nm in wanted:
        if (nm == "dw" and p.acc_dw) or (nm == "db" and p.acc_db):
            inits[nm] = _prev_init(fn, p, names, types, nm)
        else:
            inits[nm] = fn.zeros("col")
    groups = [wanted] if len(wanted) > 1 and fn.rng.random() < 0.5 else [
        [nm] for nm in wanted]
    if fn.rng.random() < 0.5:
        groups.reverse()
    for g in groups:
        res = fn.col_reduce(ins, lambda a, b, g=g: [col_contribs[nm](a, b)
                                                    for nm in g],
                            [inits[nm] for nm in g])
        for nm, r in zip(g, res):
            results[nm] = r
    out = {}
    for nm in wanted:
        elem = p.dw_type if nm == "dw" else p.db_type
        v = results[nm]
        if elem != "f32":
            v, t = fn.col_elementwise(
                [("s", v, fn.t_col("f32"), "col")], elem,
                lambda a, b, elem=elem: b.trunc(a["s"], elem))
        out[nm] = (v, fn.t_col(elem))
    return out


def _emit_steps(fn, p, names, types):
    """torch-mlir style: one linalg.generic per step."""
    rng = fn.rng
    full32 = fn.t_full("f32")
    if p.stats == "recomputed":
        names, types = _recompute_stats(fn, p, names, types, p.keepdim)
    km = "rowk" if p.keepdim else "row"
    names = _mask_in_storage(fn, p, names, types)
    # extf of x and dy.
    x32, dy32 = names["x"], names["dy"]
    if p.x_type != "f32":
        x32, _ = fn.elementwise([("x", names["x"], types["x"], "full")],
                                "f32", lambda a, b: b.ext(a["x"], p.x_type))
        dy32, _ = fn.elementwise([("dy", names["dy"], types["dy"], "full")],
                                 "f32",
                                 lambda a, b: b.ext(a["dy"], p.x_type))
    # dy scale.
    if p.scale:
        ins = [("dy", dy32, full32, "full")]
        sc = _scale_in(fn, p, names, types, ins)
        dy32, _ = fn.elementwise(ins, "f32",
                                 lambda a, b: b.mul(a["dy"], sc(a)))
    if p.mask is not None and not p.mask.in_storage:
        dy32 = _emit_mask(fn, p, names, types, dy32, "f32")
    # xhat, in one or two steps.
    mean_in = [("mean", names["mean"], types["mean"], km)] \
        if p.op == "layer_norm" else []
    rstd_in = ("rstd", names["rstd"], types["rstd"], km)
    if p.op == "layer_norm" and rng.random() < 0.5:
        xc, _ = fn.elementwise([("x", x32, full32, "full")] + mean_in, "f32",
                               lambda a, b: b.sub(a["x"], a["mean"]))
        xhat, _ = fn.elementwise([("x", xc, full32, "full"), rstd_in], "f32",
                                 lambda a, b: b.mul(a["x"], a["rstd"]))
    else:
        def xh(a, b):
            v = a["x"]
            if p.op == "layer_norm":
                v = b.sub(v, a["mean"])
            return b.mul(v, a["rstd"])
        xhat, _ = fn.elementwise([("x", x32, full32, "full"), rstd_in]
                                 + mean_in, "f32", xh)
    # w * dy (zero-centred: w + 1, in its own [N] generic or inline).
    wdy = dy32
    if p.has_w:
        w_in = ("w", names["w"], types["w"], "col")
        if p.zc and rng.random() < 0.5:
            w1, w1t = fn.col_elementwise(
                [("w", names["w"], types["w"], "col")], "f32",
                lambda a, b: b.add(b.ext(a["w"], p.p_type), b.const(1.0)))
            wdy, _ = fn.elementwise([("dy", dy32, full32, "full"),
                                     ("w", w1, w1t, "col")], "f32",
                                    lambda a, b: b.mul(a["dy"], a["w"]))
        else:
            wdy, _ = fn.elementwise([("dy", dy32, full32, "full"), w_in],
                                    "f32",
                                    lambda a, b: b.mul(a["dy"],
                                                       _weff(b, a, p)))
    # Row sums: s1 = sum xhat * wdy, s2 = sum wdy (LayerNorm).
    keep = p.keepdim and rng.random() < 0.7
    rkm = "rowk" if keep else "row"
    rowt = fn.t_row("f32", keep)
    ln = p.op == "layer_norm"
    if rng.random() < 0.4:
        prod, _ = fn.elementwise([("h", xhat, full32, "full"),
                                  ("g", wdy, full32, "full")], "f32",
                                 lambda a, b: b.mul(a["h"], a["g"]))
        (s1,) = fn.row_reduce([("p", prod, full32, "full")],
                              lambda a, b: [a["p"]], keep)
        s2 = fn.row_reduce([("g", wdy, full32, "full")],
                           lambda a, b: [a["g"]], keep)[0] if ln else None
    elif ln and rng.random() < 0.5:
        s1, s2 = fn.row_reduce([("h", xhat, full32, "full"),
                                ("g", wdy, full32, "full")],
                               lambda a, b: [b.mul(a["h"], a["g"]), a["g"]],
                               keep, count=2)
    else:
        (s1,) = fn.row_reduce([("h", xhat, full32, "full"),
                               ("g", wdy, full32, "full")],
                              lambda a, b: [b.mul(a["h"], a["g"])], keep)
        s2 = fn.row_reduce([("g", wdy, full32, "full")],
                           lambda a, b: [a["g"]], keep)[0] if ln else None
    # dx = rstd * (wdy - s2/N - xhat * s1/N) [+ dres], in 1 to 5 steps.
    split = rng.random() < 0.5
    if split:
        c1, c1t = fn.row_elementwise([("s", s1, rowt, rkm)],
                                     lambda a, b: _mean_of(b, fn, a["s"]),
                                     keep)
        t, _ = fn.elementwise([("h", xhat, full32, "full"),
                               ("c", c1, c1t, rkm)], "f32",
                              lambda a, b: b.mul(a["h"], a["c"]))
        if ln:
            c2, c2t = fn.row_elementwise(
                [("s", s2, rowt, rkm)],
                lambda a, b: _mean_of(b, fn, a["s"]), keep)
            t, _ = fn.elementwise([("t", t, full32, "full"),
                                   ("c", c2, c2t, rkm)], "f32",
                                  lambda a, b: b.add(a["t"], a["c"]))
        d, _ = fn.elementwise([("g", wdy, full32, "full"),
                               ("t", t, full32, "full")], "f32",
                              lambda a, b: b.sub(a["g"], a["t"]))
        dx32, _ = fn.elementwise([("d", d, full32, "full"), rstd_in], "f32",
                                 lambda a, b: b.mul(a["d"], a["rstd"]))
    else:
        ins = [("h", xhat, full32, "full"), ("g", wdy, full32, "full"),
               ("s1", s1, rowt, rkm), rstd_in]
        if ln:
            ins.append(("s2", s2, rowt, rkm))

        def dxb(a, b):
            t = b.mul(a["h"], _mean_of(b, fn, a["s1"]))
            if ln:
                t = b.add(t, _mean_of(b, fn, a["s2"]))
            return b.mul(b.sub(a["g"], t), a["rstd"])
        dx32, _ = fn.elementwise(ins, "f32", dxb)
    if p.residual:
        dx32, _ = fn.elementwise(
            [("d", dx32, full32, "full"),
             ("r", names["dres"], types["dres"], "full")], "f32",
            lambda a, b: b.add(a["d"], b.ext(a["r"], p.x_type)))
    dx = dx32
    if p.x_type != "f32":
        dx, _ = fn.elementwise([("d", dx32, full32, "full")], p.x_type,
                               lambda a, b: b.trunc(a["d"], p.x_type))
    out = {"dx": (dx, fn.t_full(p.x_type))}
    # dW = sum dy * xhat, dB = sum dy (dy scaled, not weighted).
    if p.need_dw and rng.random() < 0.4:
        q, _ = fn.elementwise([("g", dy32, full32, "full"),
                               ("h", xhat, full32, "full")], "f32",
                              lambda a, b: b.mul(a["g"], a["h"]))
        ins = [("q", q, full32, "full"), ("g", dy32, full32, "full")]
        contribs = {"dw": lambda a, b: a["q"], "db": lambda a, b: a["g"]}
    else:
        ins = [("g", dy32, full32, "full"), ("h", xhat, full32, "full")]
        contribs = {"dw": lambda a, b: b.mul(a["g"], a["h"]),
                    "db": lambda a, b: a["g"]}
    if not p.need_db and ins[0][0] == "q":
        ins = ins[:1]
    out.update(_finish_columns(fn, p, names, types, contribs, ins))
    return out


def _emit_inline(fn, p, names, types):
    """Hand-fused: every reduction and dx recompute xhat and w * dy from the
    raw inputs in their own payloads."""
    rng = fn.rng
    if p.stats == "recomputed":
        names, types = _recompute_stats(fn, p, names, types, p.keepdim)
    km = "rowk" if p.keepdim else "row"
    ln = p.op == "layer_norm"

    def raw_ins(with_w=True):
        ins = [("x", names["x"], types["x"], "full"),
               ("dy", names["dy"], types["dy"], "full")]
        _stats_ins(p, names, types, ins)
        if p.has_w and with_w:
            ins.append(("w", names["w"], types["w"], "col"))
        sc = _scale_in(fn, p, names, types, ins)
        if p.mask is not None:
            _mask_ins(p, names, types, ins)
        return ins, sc

    def xhat_of(a, b):
        v = b.ext(a["x"], p.x_type)
        if ln:
            v = b.sub(v, a["mean"])
        return b.mul(v, a["rstd"])

    def dy_of(a, b, sc):
        g = b.ext(a["dy"], p.x_type)
        if sc:
            g = b.mul(g, sc(a))
        return _mask_payload(b, p, a, g) if p.mask is not None else g

    def wdy_of(a, b, sc):
        g = dy_of(a, b, sc)
        return b.mul(g, _weff(b, a, p)) if p.has_w else g

    keep = p.keepdim and rng.random() < 0.5
    rkm = "rowk" if keep else "row"
    rowt = fn.t_row("f32", keep)
    ins, sc = raw_ins()

    def s1c(a, b):
        return b.mul(xhat_of(a, b), wdy_of(a, b, sc))
    if ln and rng.random() < 0.6:
        s1, s2 = fn.row_reduce(ins, lambda a, b: [s1c(a, b),
                                                  wdy_of(a, b, sc)],
                               keep, count=2)
    else:
        (s1,) = fn.row_reduce(ins, lambda a, b: [s1c(a, b)], keep)
        s2 = None
        if ln:
            ins2, sc2 = raw_ins()
            (s2,) = fn.row_reduce(ins2, lambda a, b: [wdy_of(a, b, sc2)],
                                  keep)
    ins, sc = raw_ins()
    ins.append(("s1", s1, rowt, rkm))
    if ln:
        ins.append(("s2", s2, rowt, rkm))
    if p.residual:
        ins.append(("r", names["dres"], types["dres"], "full"))

    def dxb(a, b):
        h = xhat_of(a, b)
        t = b.mul(h, _mean_of(b, fn, a["s1"]))
        if ln:
            t = b.add(t, _mean_of(b, fn, a["s2"]))
        d = b.mul(b.sub(wdy_of(a, b, sc), t), a["rstd"])
        if p.residual:
            d = b.add(d, b.ext(a["r"], p.x_type))
        return b.trunc(d, p.x_type)
    dx, dxt = fn.elementwise(ins, p.x_type, dxb)
    out = {"dx": (dx, dxt)}
    ins, sc = raw_ins(with_w=False)
    contribs = {"dw": lambda a, b: b.mul(dy_of(a, b, sc), xhat_of(a, b)),
                "db": lambda a, b: dy_of(a, b, sc)}
    out.update(_finish_columns(fn, p, names, types, contribs, ins))
    return out


def _emit_named(fn, p, names, types):
    """linalg.map / broadcast / reduce / mul / add / sub mixed with
    generics (each step picks a named form at random where one exists)."""
    rng = fn.rng
    full32 = fn.t_full("f32")
    # Statistics recomputed for named ops come out of the reductions as
    # [rows] (no keepdim): a tensor.collapse_shape of a computed keepdim
    # value is not looked through by recognition (see KNOWN_LIMITS).
    recomputed = p.stats == "recomputed"
    if recomputed:
        names, types = _recompute_stats(fn, p, names, types, False)
    names = _mask_in_storage(fn, p, names, types, named=True)
    ln = p.op == "layer_norm"

    def named():
        return rng.random() < 0.7

    def row_flat(key):
        v, t = names[key], types[key]
        if p.keepdim and not recomputed:
            v, t = fn.collapse_keep(v, t)
        return v, t

    def ext_full(key):
        v, t = names[key], types[key]
        if p.x_type == "f32":
            return v
        if named():
            return fn.map_region([(key, v, t)], "f32",
                                 lambda a, b: b.ext(a[key], p.x_type))[0]
        return fn.elementwise([(key, v, t, "full")], "f32",
                              lambda a, b: b.ext(a[key], p.x_type))[0]

    x32, dy32 = ext_full("x"), ext_full("dy")
    if p.scale:
        if p.scale == "tensor" or not named():
            ins = [("dy", dy32, full32, "full")]
            sc = _scale_in(fn, p, names, types, ins)
            dy32, _ = fn.elementwise(ins, "f32",
                                     lambda a, b: b.mul(a["dy"], sc(a)))
        else:
            dy32, _ = fn.map_region([("dy", dy32, full32)], "f32",
                                    lambda a, b: b.mul(a["dy"],
                                                       names["scale"]))
    if p.mask is not None and not p.mask.in_storage:
        dy32 = _emit_mask(fn, p, names, types, dy32, "f32", named=True)
    rstd, rstdt = row_flat("rstd")
    rstd_b, _ = fn.broadcast(rstd, rstdt, "row")
    if ln:
        mean, meant = row_flat("mean")
        mean_b, _ = fn.broadcast(mean, meant, "row")
        xc = fn.map_binary("subf", x32, mean_b, full32) if named() else \
            fn.elementwise([("x", x32, full32, "full"),
                            ("m", mean_b, full32, "full")], "f32",
                           lambda a, b: b.sub(a["x"], a["m"]))[0]
    else:
        xc = x32
    xhat = fn.map_binary("mulf", xc, rstd_b, full32)
    wdy = dy32
    if p.has_w:
        if p.zc or p.p_type != "f32":
            w32, w32t = fn.col_elementwise(
                [("w", names["w"], types["w"], "col")], "f32",
                lambda a, b: _weff(b, a, p))
        else:
            w32, w32t = names["w"], types["w"]
        w_b, _ = fn.broadcast(w32, w32t, "col")
        wdy = fn.map_binary("mulf", dy32, w_b, full32)
    prod = fn.map_binary("mulf", xhat, wdy, full32)
    z1, z1t = fn.zeros("row")
    s1 = fn.reduce(prod, full32, "row", z1, z1t)
    rowt = fn.t_row("f32")
    c = fn.row_elementwise([("s", s1, rowt, "row")],
                           lambda a, b: _mean_of(b, fn, a["s"]))[0]
    c_b, _ = fn.broadcast(c, rowt, "row")
    t = fn.map_binary("mulf", xhat, c_b, full32)
    if ln:
        z2, z2t = fn.zeros("row")
        s2 = fn.reduce(wdy, full32, "row", z2, z2t)
        c2 = fn.row_elementwise([("s", s2, rowt, "row")],
                                lambda a, b: _mean_of(b, fn, a["s"]))[0]
        c2_b, _ = fn.broadcast(c2, rowt, "row")
        t = fn.map_binary("addf", t, c2_b, full32)
    d = fn.map_binary("subf", wdy, t, full32)
    dx32 = fn.map_binary("mulf", d, rstd_b, full32)
    if p.residual:
        r32 = ext_full("dres")
        dx32 = fn.map_binary("addf", dx32, r32, full32)
    dx = dx32
    if p.x_type != "f32":
        if named():
            dx, _ = fn.map_region([("d", dx32, full32)], p.x_type,
                                  lambda a, b: b.trunc(a["d"], p.x_type))
        else:
            dx, _ = fn.elementwise([("d", dx32, full32, "full")], p.x_type,
                                   lambda a, b: b.trunc(a["d"], p.x_type))
    out = {"dx": (dx, fn.t_full(p.x_type))}
    inits = {}
    for nm, need, acc in (("dw", p.need_dw, p.acc_dw),
                          ("db", p.need_db, p.acc_db)):
        if need:
            inits[nm] = _prev_init(fn, p, names, types, nm) if acc \
                else fn.zeros("col")
    if p.need_dw:
        q = fn.map_binary("mulf", dy32, xhat, full32)
        r = fn.reduce(q, full32, "col", *inits["dw"])
        out["dw"] = r
    if p.need_db:
        out["db"] = fn.reduce(dy32, full32, "col", *inits["db"])
    for nm in ("dw", "db"):
        if nm not in out:
            continue
        elem = p.dw_type if nm == "dw" else p.db_type
        v = out[nm]
        if elem != "f32":
            v, _ = fn.col_elementwise([("s", v, fn.t_col("f32"), "col")],
                                      elem,
                                      lambda a, b, e=elem: b.trunc(a["s"],
                                                                   e))
        out[nm] = (v, fn.t_col(elem))
    return out


def call_args(p: Program, inp: ProgramInputs, sig):
    """CallModule args for the signature: (param type, static shape, element
    type, values); a scalar f32 parameter as ("f32", None, "f32", v)."""
    if isinstance(p, MultiProgram):
        vals = multi_param_values(p, inp)
    elif p.graph is not None:
        vals = graph_param_values(p, inp)
    else:
        vals = _group_param_values(p, inp)
    out = []
    for key, t in sig:
        shape, elem, v = vals[key]
        if t == "f32":
            out.append(("f32", None, "f32", v[0]))
        else:
            out.append((t, shape, elem, v))
    return out


def _group_param_values(p: Program, inp: ProgramInputs):
    """{parameter key: (static shape, element type, values)} of a group."""
    core = inp.core
    lead = p.lead
    keep = (1,) if p.keepdim else ()
    vals = {}
    if p.mask is not None:
        mi = inp.mask
        vals = {"keep": (p.shape, p.mask.keep, mi.keep),
                "valid": (lead, MASK_ROW_TYPES["valid"], mi.valid),
                "ids": (lead, MASK_ROW_TYPES["ids"], mi.ids)}
    return vals | {
        "x": (p.shape, p.x_type, core.x),
        "dy": (p.shape, p.x_type, core.dy),
        "mean": ((*lead, *keep), "f32", core.mean),
        "rstd": ((*lead, *keep), "f32", core.rstd),
        "w": ((p.n,), p.p_type, core.w),
        "scale": ((), "f32", [inp.scale]),
        "dres": (p.shape, p.x_type, inp.dres),
        "prev_dw": ((p.n,), p.prev_type, inp.prev_dw),
        "prev_db": ((p.n,), p.prev_type, inp.prev_db),
    }


# --------------------------------------------------------------------------
# Whole graphs
# --------------------------------------------------------------------------


def _draw_graph(p: Program, rng, known_bugs) -> Program:
    """p as the first group of a whole-graph function (Graph)."""
    p = _as_graph_group(p, rng)
    two = rng.random() < 0.4
    chained = two and p.n >= CHAIN_MIN_N and rng.random() < 0.6
    second = None
    if two:
        q = _draw_group(rng, rng, p.index, f"{p.seed}/2", known_bugs)
        q = dataclasses.replace(q, lead=p.lead, dynamic=p.dynamic)
        max_size = min(GRAPH_MAX_SIZE, CHAIN_MAX_SIZE // p.n) if chained \
            else GRAPH_MAX_SIZE
        second = _as_graph_group(q, rng, other_than=p.n, max_size=max_size)
        # Upstream elementwise fusion, the input form of a `fused` group,
        # runs on the whole function: beside a `fused` group only `steps`
        # and `fused` ones, the forms it is meant for. (A `named` keepdim
        # rank-3 group through it leaves dynamic memref reshapes, whose
        # affine.apply the unfused path's UPSTREAM_LOWERING cannot lower.)
        if "fused" in (p.style, second.style) and \
                not {p.style, second.style} <= {"steps", "fused"}:
            second = dataclasses.replace(second, style=p.style)
    dy_k = rng.choice(MATMUL_K) if rng.random() < 0.5 else None
    dx_j = rng.choice(MATMUL_J) if rng.random() < 0.4 else None
    reduction = rng.choice((None, "row_max", "row_sum", "total_sum"))
    if reduction == "total_sum":
        p = dataclasses.replace(p, scale="tensor")  # the total is the scale
    groups = (p,) if second is None else (p, second)
    computed_dy = (dy_k is not None, chained)
    calls = [(i, key) for i, q in enumerate(groups)
             for key, has in (("dy", not computed_dy[i]), ("w", q.has_w),
                              ("dres", q.residual)) if has]
    call = rng.choice(calls) if calls and rng.random() < 0.5 else None
    if not (second or dy_k or dx_j or reduction or call):
        dx_j = rng.choice(MATMUL_J)
    keep_dx = rng.random() < 0.5
    row_max_of = rng.choice(("x", "dy", "dx"))
    other_n = rng.choice(OTHER_N)
    scales_dy = rng.random() < 0.5
    graph = Graph(
        second=second, chained=chained, dy_k=dy_k, dx_j=dx_j,
        keep_dx=keep_dx, reduction=reduction, row_max_of=row_max_of,
        other_n=other_n, row_sum_scales_dy=scales_dy,
        other_n_dynamic=p.dynamic == "all" and rng.random() < 0.5,
        loss_shape=rng.choice(LOSS_SHAPES), call=call)
    return dataclasses.replace(p, graph=graph)


def _as_graph_group(q: Program, rng, other_than=None,
                    max_size=GRAPH_MAX_SIZE) -> Program:
    """q in f32, with N from GRAPH_HIDDEN (not other_than) and at most
    max_size elements (q's own N where it already fits)."""
    n = q.n
    while n not in GRAPH_HIDDEN or n == other_than or q.rows * n > max_size:
        n = rng.choice(GRAPH_HIDDEN)
    return dataclasses.replace(q, n=n, x_type="f32", p_type="f32",
                               acc16=False)


def _dx_consumed(p: Program, group: int) -> bool:
    """Whether a matmul of the graph reads the group's dx."""
    g = p.graph
    return (group == 0 and g.chained) or (
        group == len(p.groups) - 1 and g.dx_j is not None)


def graph_outputs(p: Program):
    """The graph function's results: each group's (a dx that a matmul reads
    only when keep_dx), the dx matmul's, the returned neighbour
    reduction's."""
    g = p.graph
    outs = []
    for i, q in enumerate(p.groups):
        group_outs = q.group_outputs(_suffix(i))
        if _dx_consumed(p, i) and not g.keep_dx:
            group_outs = group_outs[1:]
        outs += group_outs
    if g.dx_j:
        outs.append(("dx_mm", "f32", (*p.lead, g.dx_j)))
    if g.reduction in ("row_max", "row_sum"):
        outs.append((g.reduction, "f32", p.lead))
    return outs


def _batches(p: Program) -> int:
    """The matmuls' batch count: B of a rank-3 [B, S, N] domain, else 1."""
    return p.lead[0] if len(p.lead) == 2 else 1


def helper_scale(p: Program) -> float:
    """The constant the helper function of a graph multiplies by."""
    rng = random.Random(f"diffgen-helper/{p.seed}")
    return nn.DTYPES["f32"].round(rng.choice((rng.uniform(0.3, 0.8),
                                              rng.uniform(1.3, 3.0))))


# ---- inputs and the float64 reference --------------------------------------


@dataclasses.dataclass
class GraphInputs:
    """What a graph adds to its first group's inputs: f32, never zero;
    flat row-major lists (matmul weights [B, K, N] at rank 3)."""

    second: ProgramInputs | None = None
    dy_a: list | None = None  # [rows..., K] x dy_b [K, N] -> the first dy
    dy_b: list | None = None
    dy_product: tuple | None = None  # its float64 (values, term sums)
    chain_w: list | None = None  # [N, N2]
    dx_w: list | None = None  # [N of the last group, J]
    y: list | None = None  # the row sum's [rows..., other_n]
    loss: list | None = None  # the total sum's [L1, L2]


def gen_graph_inputs(p: Program) -> GraphInputs:
    """Seeded: matmul operands ~ N(0, 1)-sized products (dy's with a
    nonzero mean, as a norm's dy has), positive row-sum inputs summing to
    ~0.3 .. 1.5 per row, a loss whose total is 0.3 .. 0.8 or 1.3 .. 3."""
    g = p.graph
    f32 = nn.DTYPES["f32"]
    rng = random.Random(f"diffgen-graph-inputs/{p.seed}")

    def gauss(count, mu, sigma):
        return [nn._nonzero(lambda: rng.gauss(mu, sigma), f32)
                for _ in range(count)]

    def uniform(count, lo, hi):
        return [f32.round(rng.uniform(lo, hi)) for _ in range(count)]

    b = _batches(p)
    gi = GraphInputs()
    if g.second is not None:
        gi.second = _gen_group_inputs(g.second)
    if g.dy_k:
        k = g.dy_k
        gi.dy_a = gauss(p.rows * k, 0.5, 1.0)
        gi.dy_b = gauss(b * k * p.n, 0.5 / math.sqrt(k), 1.0 / math.sqrt(k))
        gi.dy_product = _matmul(gi.dy_a, gi.dy_b, p.rows, k, p.n, b)
    if g.chained:
        gi.chain_w = gauss(b * p.n * g.second.n, 0.0, 1.0 / math.sqrt(p.n))
    if g.dx_j:
        n = p.groups[-1].n
        gi.dx_w = gauss(b * n * g.dx_j, 0.0, 1.0 / math.sqrt(n))
    if g.reduction == "row_sum":
        gi.y = uniform(p.rows * g.other_n, 0.3 / g.other_n, 1.5 / g.other_n)
    if g.reduction == "total_sum":
        count = math.prod(g.loss_shape)
        total = rng.choice((rng.uniform(0.3, 0.8), rng.uniform(1.3, 3.0)))
        gi.loss = uniform(count, 0.5 * total / count, 1.5 * total / count)
    return gi


def _matmul(a, b, rows, k, n, batches, a_scale=None, skip_last=False):
    """a [rows, k] x b [batches, k, n] in float64, the rows split evenly
    over the batches (batch_matmul at rank 3): (values, sums of |terms|),
    |a| taken from a_scale when given (the size of a's own terms).
    skip_last: the last of the k terms left out (a mutant)."""
    used = k - 1 if skip_last else k
    per = rows // batches
    vals, mags = [], []
    for bi in range(batches):
        base = bi * k * n
        cols = [b[base + j:base + used * n:n] for j in range(n)]
        abs_cols = [list(map(abs, c)) for c in cols]
        for r in range(bi * per, (bi + 1) * per):
            row = a[r * k:r * k + used]
            abs_row = list(map(abs, (a_scale or a)[r * k:r * k + used]))
            vals.extend(sum(map(operator.mul, row, c)) for c in cols)
            mags.extend(sum(map(operator.mul, abs_row, c)) for c in abs_cols)
    return vals, mags


def _row_max(v, mags, n, first_only):
    """Per row of n: (max, the largest |term| of the row: its scale)."""
    rows = range(0, len(v), n)
    vals = [v[r] if first_only else max(v[r:r + n]) for r in rows]
    m = mags if mags is not None else v
    return vals, [max(map(abs, m[r:r + n])) for r in rows]


def _row_sum(v, n, first_only):
    """Per row of n: (sum, sum of |terms|)."""
    rows = range(0, len(v), n)
    if first_only:
        return [v[r] for r in rows], [abs(v[r]) for r in rows]
    return ([math.fsum(v[r:r + n]) for r in rows],
            [math.fsum(map(abs, v[r:r + n])) for r in rows])


def _first_element_matters(p: Program) -> bool:
    """A row max is its row's first element in every row with probability
    (1/N)^rows: the mutant counts only where that is small."""
    g = p.graph
    return g.reduction in ("row_sum", "total_sum") or (
        g.reduction == "row_max" and p.n >= 16 and p.rows >= 2)


# Wrong graph references (each must be caught).
GRAPH_MUTANTS = {
    "no-helper-call": lambda p: p.graph.call is not None,
    "matmul-skips-last-k":
        lambda p: bool(p.graph.dy_k or p.graph.chained or p.graph.dx_j),
    "other-reduction-first-only": _first_element_matters,
}


def graph_reference(p: Program, inp: ProgramInputs, mutant=None):
    """The whole graph in float64: the first group's dy (a matmul, the
    helper call, a row scale from the other domain's row sum), its dy scale
    (the loss total), both groups (a group mistake of `mutant` in each),
    the chain, the dx matmul, the neighbour reductions."""
    g, gi = p.graph, inp.graph
    first_only = mutant == "other-reduction-first-only"
    skip_last = mutant == "matmul-skips-last-k"
    values, scales = {}, {}

    def called(group, key, v):
        """v, or the helper call's result where the call produces it."""
        if v is None or g.call != (group, key) or mutant == "no-helper-call":
            return v
        s = helper_scale(p)
        return [s * t for t in v]

    def matmul(a, b, k, n, a_scale=None):
        return _matmul(a, b, p.rows, k, n, _batches(p), a_scale, skip_last)

    def group(i, dy, scale):
        q, qi = p.groups[i], inp.groups[i]
        core = dataclasses.replace(qi.core, dy=dy,
                                   w=called(i, "w", qi.core.w))
        qi = dataclasses.replace(qi, core=core, scale=scale,
                                 dres=called(i, "dres", qi.dres))
        res = _group_reference(q, qi, mutant)
        for name in res.values:
            values[name + _suffix(i)] = res.values[name]
            scales[name + _suffix(i)] = res.scales[name]
        return res

    # The first group's inputs.
    dy, dy_mags = inp.core.dy, None
    if g.dy_k:
        dy, dy_mags = (matmul(gi.dy_a, gi.dy_b, g.dy_k, p.n) if skip_last
                       else gi.dy_product)
    dy = called(0, "dy", dy)
    if g.reduction == "row_max" and g.row_max_of != "dx":
        of = inp.core.x if g.row_max_of == "x" else dy
        mags = dy_mags if g.row_max_of == "dy" else None
        values["row_max"], scales["row_max"] = _row_max(of, mags, p.n,
                                                        first_only)
    if g.reduction == "row_sum":
        s, s_mags = _row_sum(gi.y, g.other_n, first_only)
        values["row_sum"], scales["row_sum"] = s, s_mags
        if g.row_sum_scales_dy:
            dy = [v * s[i // p.n] for i, v in enumerate(dy)]
    scale = inp.scale
    if g.reduction == "total_sum":
        scale = gi.loss[0] if first_only else math.fsum(gi.loss)
    last = group(0, dy, scale)
    if g.reduction == "row_max" and g.row_max_of == "dx":
        values["row_max"], scales["row_max"] = _row_max(
            last.values["dx"], last.scales["dx"], p.n, first_only)
    if g.second is not None:
        second_inp = inp.groups[1]
        dy2 = second_inp.core.dy
        if g.chained:
            dy2 = matmul(last.values["dx"], gi.chain_w, p.n, g.second.n)[0]
        last = group(1, called(1, "dy", dy2), second_inp.scale)
    if g.dx_j:
        values["dx_mm"], scales["dx_mm"] = matmul(
            last.values["dx"], gi.dx_w, p.groups[-1].n, g.dx_j,
            a_scale=last.scales["dx"])
    return nn.Result(values, scales)


# ---- emission ------------------------------------------------------------


def _computed_inputs(p: Program, group: int) -> set:
    """The group inputs that the graph computes instead of taking them as
    parameters."""
    g = p.graph
    out = set()
    if (group == 0 and g.dy_k) or (group == 1 and g.chained):
        out.add("dy")
    if group == 0 and g.reduction == "total_sum":
        out.add("scale")
    return out


def _row_sum_domain(p: Program, rng, host=None) -> Fn:
    """The row sum's own [rows..., other_n] domain: its rows as dynamic as
    p's, its N dynamic when other_n_dynamic."""
    g = p.graph
    dynamic = p.dynamic
    if dynamic == "all" and not g.other_n_dynamic:
        dynamic = "rows"
    other = dataclasses.replace(p, n=g.other_n, dynamic=dynamic, graph=None)
    return Fn(other, rng, host)


def graph_params(p: Program):
    """[(key, type)]: each group's parameters but those the graph computes
    (the second group's keys ending in _2), then the neighbours'."""
    g = p.graph
    fns = [Fn(q, random.Random(0)) for q in p.groups]  # for the types
    first, last = fns[0], fns[-1]
    ps = []
    for i, q in enumerate(p.groups):
        computed = _computed_inputs(p, i)
        ps += [(k + _suffix(i), t) for k, t in params(q)
               if k not in computed]
    if g.dy_k:
        ps += [("dy_a", first.rows_by(g.dy_k)),
               ("dy_b", first.t_weight(g.dy_k, first.full_dims[-1]))]
    if g.chained:
        ps.append(("chain_w", first.t_weight(first.full_dims[-1],
                                             fns[1].full_dims[-1])))
    if g.dx_j:
        ps.append(("dx_w", last.t_weight(last.full_dims[-1], g.dx_j)))
    if g.reduction == "row_sum":
        ps.append(("y", _row_sum_domain(p, random.Random(0)).t_full("f32")))
    if g.reduction == "total_sum":
        ps.append(("loss", _ttype(g.loss_shape, "f32")))
    return ps


def graph_param_values(p: Program, inp: ProgramInputs):
    """{parameter key: (static shape, element type, values)} of a graph."""
    g, gi = p.graph, inp.graph
    vals = {}
    for i, (q, qi) in enumerate(zip(p.groups, inp.groups)):
        vals.update({k + _suffix(i): v
                     for k, v in _group_param_values(q, qi).items()})
    batch = p.lead[:1] if len(p.lead) == 2 else ()
    if g.dy_k:
        vals["dy_a"] = ((*p.lead, g.dy_k), "f32", gi.dy_a)
        vals["dy_b"] = ((*batch, g.dy_k, p.n), "f32", gi.dy_b)
    if g.chained:
        vals["chain_w"] = ((*batch, p.n, g.second.n), "f32", gi.chain_w)
    if g.dx_j:
        vals["dx_w"] = ((*batch, p.groups[-1].n, g.dx_j), "f32", gi.dx_w)
    if g.reduction == "row_sum":
        vals["y"] = ((*p.lead, g.other_n), "f32", gi.y)
    if g.reduction == "total_sum":
        vals["loss"] = (g.loss_shape, "f32", gi.loss)
    return vals


def emit_graph(p: Program):
    """emit_program for a graph: the helper call, the dy matmul and the
    neighbour reduction before the first group, the chain between the
    groups, the dx matmul after them (a row max of dx right after the
    first); parameters shuffled."""
    g = p.graph
    rng = random.Random(f"diffgen-emit/{p.seed}")
    fns = [Fn(p, rng)]
    fns += [Fn(q, rng, host=fns[0]) for q in p.groups[1:]]
    fn = fns[0]
    ps = graph_params(p)
    order = list(range(len(ps)))
    rng.shuffle(order)
    sig = [ps[i] for i in order]
    names = [{k: f"%{k}{_suffix(i)}" for k, _ in params(q)}
             for i, q in enumerate(p.groups)]
    types = [dict(params(q)) for q in p.groups]
    for f, nm in zip(fns, names):
        f.setup(nm["x"])
    defs = _emit_helper_call(p, fn, names, types) if g.call else ""
    if g.dy_k:
        names[0]["dy"], _ = fn.matmul(
            "%dy_a", fn.rows_by(g.dy_k), "%dy_b",
            fn.t_weight(g.dy_k, fn.full_dims[-1]), fn.full_dims[-1])
    results = {}
    if g.reduction == "row_max" and g.row_max_of != "dx":
        key = g.row_max_of
        results["row_max"] = _emit_row_max(fn, names[0][key], types[0][key])
    if g.reduction == "row_sum":
        s, st = results["row_sum"] = _emit_row_sum(p, fn)
        if g.row_sum_scales_dy:
            names[0]["dy"], _ = fn.elementwise(
                [("dy", names[0]["dy"], types[0]["dy"], "full"),
                 ("s", s, st, "row")], "f32",
                lambda a, b: b.mul(a["dy"], a["s"]))
    if g.reduction == "total_sum":
        names[0]["scale"] = _emit_total_sum(fn, g.loss_shape)
    for i, (f, q) in enumerate(zip(fns, p.groups)):
        if i == 1 and g.chained:
            dx, dxt = results["dx"]
            names[1]["dy"], _ = f.matmul(
                dx, dxt, "%chain_w",
                fn.t_weight(fn.full_dims[-1], f.full_dims[-1]),
                f.full_dims[-1])
        res = emit_group(f, q, names[i], types[i])
        results.update({k + _suffix(i): v for k, v in res.items()})
        if i == 0 and g.reduction == "row_max" and g.row_max_of == "dx":
            results["row_max"] = _emit_row_max(fn, *results["dx"])
    if g.dx_j:
        last = fns[-1]
        dx, dxt = results["dx" + _suffix(len(fns) - 1)]
        results["dx_mm"] = last.matmul(
            dx, dxt, "%dx_w", last.t_weight(last.full_dims[-1], g.dx_j),
            g.dx_j)
    return _function_text(p, fn, sig, results, defs)


def _emit_helper_call(p: Program, fn, names, types) -> str:
    """The chosen input becomes `func.call @<program>_scale(input)`;
    returns the helper's definition."""
    group, key = p.graph.call
    t = types[group][key]
    helper = f"{p.name}_scale"
    r = fn.fresh("call")
    fn.emit(f"{r} = func.call @{helper}({names[group][key]}) : ({t}) -> {t}")
    names[group][key] = r
    return _scale_helper(helper, t, helper_scale(p))


def _scale_helper(name: str, t: str, value: float) -> str:
    """func.func @name(%t: t) -> t: every element times `value`."""
    shape, _ = nn.parse_type(t)
    d = [f"d{i}" for i in range(len(shape))]
    idmap = f"affine_map<({', '.join(d)}) -> ({', '.join(d)})>"
    its = ", ".join(['"parallel"'] * len(shape))
    lines, dyn = [], []
    for i, dim in enumerate(shape):
        if dim is None:
            lines.append(f"  %c{i} = arith.constant {i} : index")
            lines.append(f"  %n{i} = tensor.dim %t, %c{i} : {t}")
            dyn.append(f"%n{i}")
    bits = nn.DTYPES["f32"].to_bits(value)
    lines += [
        f"  %s = arith.constant 0x{bits:08X} : f32",
        f"  %e = tensor.empty({', '.join(dyn)}) : {t}",
        f"  %r = linalg.generic {{indexing_maps = [{idmap}, {idmap}], "
        f"iterator_types = [{its}]}}",
        f"      ins(%t : {t}) outs(%e : {t}) {{",
        "  ^bb0(%a: f32, %o: f32):",
        "    %v = arith.mulf %a, %s : f32",
        "    linalg.yield %v : f32",
        f"  }} -> {t}",
        f"  return %r : {t}",
    ]
    return f"func.func @{name}(%t: {t}) -> {t} {{\n" + "\n".join(lines) \
        + "\n}\n"


def _emit_row_max(fn, v, t):
    """A row max (arith.maximumf, from -inf) of v over fn's domain."""
    ninf = fn.fresh("ninf")
    fn.emit(f"{ninf} = arith.constant 0xFF800000 : f32")
    e, rt = fn.empty("row", "f32")
    init = fn.fill(ninf, e, rt)
    iters = ["parallel"] * (fn.rank - 1) + ["reduction"]
    (r,) = fn.generic([("v", v, t, "full")], [(init, rt, "row")], iters,
                      lambda a, o, b: [b.bin("maximumf", o[0], a["v"])])
    return r, rt


def _emit_row_sum(p: Program, fn):
    """The row sum of %y over its own domain: (value, [rows] type)."""
    other = _row_sum_domain(p, fn.rng, host=fn)
    other.setup("%y")
    (s,) = other.row_reduce([("y", "%y", other.t_full("f32"), "full")],
                            lambda a, b: [a["y"]], keep=False)
    return s, other.t_row("f32")


def _emit_total_sum(fn, shape):
    """The sum of %loss (every dim reduced) into a 0-d tensor."""
    t = _ttype(shape, "f32")
    e = fn.fresh("e")
    fn.emit(f"{e} = tensor.empty() : tensor<f32>")
    init = fn.fill(fn.zero, e, "tensor<f32>")
    maps = {"all": "affine_map<(d0, d1) -> (d0, d1)>",
            "none": "affine_map<(d0, d1) -> ()>"}
    (r,) = fn.generic([("l", "%loss", t, "all")],
                      [(init, "tensor<f32>", "none")],
                      ["reduction", "reduction"],
                      lambda a, o, b: [fn._combine(b, o[0], a["l"])],
                      maps=maps)
    return r


# ==========================================================================
# Multi-axis programs (issue 42): adaLN's batched rows, GroupNorm's slabs
# ==========================================================================
#
# A MULTI_SHARE of the programs (differential.py; drawn from their own
# stream, so the 2-D programs of the other indices stay as they were) are
# one of the two multi-axis mixed-order reductions recognition fuses with
# its default multi-axis=true, written in linalg as front ends write them:
#
# - adaLN-modulated LayerNorm backward ("batched rows"): x [B, S, N], a
#   LayerNorm without affine modulated per sample, y = xhat * (1 +
#   scale[b, n]) + shift[b, n]; results dx [B, S, N], d(scale) [B, N] = sum
#   over S of dy * xhat, d(shift) [B, N] = sum over S of dy. Rows sum over
#   N, columns keep (B, N). Sometimes the shared-parameter chain of pytorch
#   issue 193061: two modulated LayerNorms sharing scale / shift, the second
#   group's column sums starting from the first's (two groups).
# - GroupNorm backward ("slab domains"): x [N, C, spatial...] (NCHW) or
#   [N, spatial..., C] (channels last), tensor.expand_shape'd to [N, G, C/G,
#   spatial...] / [N, spatial..., G, C/G]; statistics [N, G], weight [C]
#   expanded to [G, C/G]; dx collapsed back, dweight / dbias [G, C/G]
#   collapsed to [C]. Rows sum over (C/G, spatial), columns keep (G, C/G).
#   One or two spatial dims (HW flattened, or H and W).
#
# Spellings as for the 2-D programs: steps (one generic per step, random
# splits), fused (steps after upstream elementwise fusion), named
# (linalg.map / broadcast / reduce / mul / add / sub), inline (hand-fused
# payloads); statistics given or recomputed (chained row reductions over the
# slab; adaLN's given statistics [B, S] or keepdim [B, S, 1]); x in bf16 /
# f16 / f32 (the parameter in x's type or f32), computed
# in f32, column sums in f32; B, B and S, S and N or all three (adaLN), N
# or N and the spatial dims (GroupNorm)
# static or dynamic; parameters permuted, `ins` shuffled, commutative
# operands swapped. The fused path must give one norm.mixed_reduction per
# group, each multi-axis with the expected row_sum_dims / col_dims
# (differential.py's multi_fusion_status).

MULTI_SHARE = 0.2
MULTI_MAX_SIZE = 2048  # elements of the domain (the float64 reference)
MULTI_KINDS = ("adaln", "chain", "nchw", "channels last", "dynamic",
               "recomputed", "keepdim", "dy matmul")
ADALN_B = (1, 2, 3, 4)
ADALN_S = (1, 2, 3, 5, 8, 16)
ADALN_N = (3, 7, 8, 16, 33, 64)
GN_N = (1, 2, 3)
GN_G = (1, 2, 3, 4, 8)
GN_CG = (1, 2, 3, 4)
GN_SPATIAL = ((), (1,), (4,), (7,), (16,), (2, 3), (3, 3), (4, 4), (1, 5),
              (2, 2, 2))


@dataclasses.dataclass(frozen=True)
class MultiProgram:
    index: int
    seed: str
    kind: str  # "adaln" | "group_norm"
    # adaLN (B, S, N); GroupNorm (N, G, C/G, spatial...)
    sizes: tuple
    layout: str  # adaLN "bsn"; GroupNorm "nchw" | "nhwc"
    # adaLN: None | "batch" (B) | "rows" (B and S) | "hidden" (S and N) |
    # "all" (B, S and N);
    # GroupNorm: None | "batch" (N) | "all" (N and the spatial dims; G and
    # C/G stay static: C is static in the expand_shape).
    dynamic: str | None
    x_type: str
    p_type: str  # scale (adaLN) / weight, and d(scale), d(shift) / dW, dB
    has_w: bool  # GroupNorm's weight (adaLN: the scale, always)
    need_dw: bool  # d(scale) / dweight
    need_db: bool  # d(shift) / dbias
    stats: str  # "given" | "recomputed"
    style: str
    chain: bool = False  # adaLN: two LayerNorms sharing scale / shift
    # adaLN's given statistics keepdim [B, S, 1] (as torch passes them),
    # read with (b, s, n) -> (b, s, 0).
    keepdim: bool = False
    # adaLN (alone, f32): dy is a linalg.batch_matmul [B, S, K] x [B, K, N]
    # of two parameters (an opaque neighbour, as the attention output
    # projection before it), K = dy_k; None: dy is a parameter.
    dy_k: int | None = None
    # What differential.py reads of every program.
    graph: object = None
    mask: object = None
    acc_dw: bool = False
    acc_db: bool = False

    @property
    def name(self) -> str:
        return f"prog_{self.index}"

    @property
    def n_groups(self) -> int:
        return 2 if self.chain else 1

    @property
    def groups(self) -> tuple:
        return (self,) * self.n_groups

    @property
    def needs_elementwise_fusion(self) -> bool:
        return self.style == "fused"

    @property
    def spatial(self) -> tuple:
        return self.sizes[3:] if self.kind == "group_norm" else ()

    @property
    def domain(self) -> tuple:
        """The iteration domain of the group's ops."""
        if self.kind == "adaln":
            return self.sizes
        n, g, cg, *sp = self.sizes
        return (n, g, cg, *sp) if self.layout == "nchw" else (n, *sp, g, cg)

    @property
    def row_keep(self) -> tuple:
        """Per domain dim: kept by the row sums (else summed)."""
        if self.kind == "adaln":
            return (True, True, False)
        k = len(self.spatial)
        if self.layout == "nchw":
            return (True, True, False) + (False,) * k
        return (True,) + (False,) * k + (True, False)

    @property
    def col_keep(self) -> tuple:
        """Per domain dim: kept by the column sums (else summed)."""
        if self.kind == "adaln":
            return (True, False, True)
        k = len(self.spatial)
        if self.layout == "nchw":
            return (False, True, True) + (False,) * k
        return (False,) + (False,) * k + (True, True)

    @property
    def dyn_domain(self) -> tuple:
        """Per domain dim: dynamic in the function's types."""
        if self.kind == "adaln":
            d = self.dynamic
            return (d in ("batch", "rows", "all"),
                    d in ("rows", "hidden", "all"), d in ("hidden", "all"))
        k = len(self.spatial)
        sp = self.dynamic == "all"
        if self.layout == "nchw":
            return (self.dynamic is not None, False, False) + (sp,) * k
        return (self.dynamic is not None,) + (sp,) * k + (False, False)

    @property
    def mem_shape(self) -> tuple:
        """x's shape in memory (the function's parameter)."""
        if self.kind == "adaln":
            return self.sizes
        n, g, cg, *sp = self.sizes
        return (n, g * cg, *sp) if self.layout == "nchw" else (n, *sp, g * cg)

    @property
    def reassociation(self):
        """mem dim -> its domain dims (None: the same, adaLN)."""
        if self.kind == "adaln":
            return None
        k = len(self.spatial)
        if self.layout == "nchw":
            return [[0], [1, 2]] + [[3 + i] for i in range(k)]
        return [[0]] + [[1 + i] for i in range(k)] + [[k + 1, k + 2]]

    @property
    def mem_dyn(self) -> tuple:
        dd = self.dyn_domain
        if self.reassociation is None:
            return dd
        return tuple(any(dd[i] for i in grp) for grp in self.reassociation)

    @property
    def rows_shape(self) -> tuple:
        return tuple(d for d, k in zip(self.domain, self.row_keep) if k)

    @property
    def stats_shape(self) -> tuple:
        """The given statistics' shape (keepdim: 1 for each summed dim)."""
        if not self.keepdim:
            return self.rows_shape
        return tuple(d if k else 1 for d, k in zip(self.domain,
                                                    self.row_keep))

    @property
    def cols_shape(self) -> tuple:
        """The column results' shape as returned ([B, N]; [C])."""
        if self.kind == "adaln":
            return (self.sizes[0], self.sizes[2])
        return (self.sizes[1] * self.sizes[2],)

    @property
    def slab(self) -> int:
        """Elements per row (the row sums' count M)."""
        return math.prod(d for d, k in zip(self.domain, self.row_keep)
                         if not k)

    @property
    def size(self) -> int:
        return math.prod(self.domain)

    @property
    def row_sum_dims(self) -> tuple:
        return tuple(i for i, k in enumerate(self.row_keep) if not k)

    @property
    def col_dims(self) -> tuple:
        return tuple(i for i, k in enumerate(self.col_keep) if k)

    def outputs(self):
        outs = [("dx", self.x_type, self.mem_shape)]
        if self.chain:
            outs.append(("dx_2", self.x_type, self.mem_shape))
        if self.need_dw:
            outs.append(("dw", self.p_type, self.cols_shape))
        if self.need_db:
            outs.append(("db", self.p_type, self.cols_shape))
        return outs

    def kinds(self) -> list:
        """Its kinds, as MULTI_KINDS names them."""
        has = {"adaln": self.kind == "adaln", "chain": self.chain,
               "nchw": self.layout == "nchw",
               "channels last": self.layout == "nhwc",
               "dynamic": self.dynamic is not None,
               "recomputed": self.stats == "recomputed",
               "keepdim": self.keepdim, "dy matmul": bool(self.dy_k)}
        return [k for k in MULTI_KINDS if has[k]]

    def describe(self) -> str:
        if self.kind == "adaln":
            parts = ["adaln-chain" if self.chain else "adaln"]
        else:
            parts = [f"gn-{self.layout}", f"g{self.sizes[1]}"]
        parts += [self.x_type, "x".join(map(str, self.mem_shape)), self.style]
        if self.has_w:
            parts.append(("scale:" if self.kind == "adaln" else "w:")
                         + self.p_type + ("" if self.need_dw else "(frozen)"))
        if self.need_db:
            parts.append(("dshift:" if self.kind == "adaln" else "db:")
                         + self.p_type)
        if self.dynamic:
            parts.append("dyn:" + self.dynamic)
        if self.stats == "recomputed":
            parts.append("stats")
        if self.keepdim:
            parts.append("keepdim")
        if self.dy_k:
            parts.append(f"mm>dy:k{self.dy_k}")
        return "multi:" + ".".join(parts)


def _draw_multi(index: int, seed, rng, known_bugs=False) -> MultiProgram:
    """An adaLN (or its chain) or a GroupNorm backward, from `rng`."""
    p = _draw_multi_kind(index, seed, rng, known_bugs)
    if p.dy_k:  # a matmul's dy: f32, as the 2-D graphs (Graph)
        p = dataclasses.replace(p, x_type="f32", p_type="f32")
    return p


def _draw_multi_kind(index, seed, rng, known_bugs):
    x_type = rng.choice(("bf16", "f16", "f32"))
    p_type = x_type if x_type == "f32" or rng.random() < 0.6 else "f32"
    style = rng.choice(STYLES)
    stats = "recomputed" if rng.random() < 0.25 else "given"
    if rng.random() < 0.45:
        dynamic = rng.choice((None, None, "batch", "rows", "all"))
        chain = rng.random() < 0.4
        while True:
            sizes = (rng.choice(ADALN_B), rng.choice(ADALN_S),
                     rng.choice(ADALN_N))
            if math.prod(sizes) <= MULTI_MAX_SIZE // (2 if chain else 1):
                break
        need_dw = rng.random() < 0.9
        need_db = not need_dw or rng.random() < 0.8
        return MultiProgram(
            index=index, seed=seed, kind="adaln", sizes=sizes, layout="bsn",
            dynamic=dynamic, x_type=x_type, p_type=p_type, has_w=True,
            need_dw=need_dw, need_db=need_db, stats=stats, style=style,
            chain=chain, keepdim=stats == "given" and rng.random() < 0.4,
            dy_k=(rng.choice(MATMUL_K) if not chain and rng.random() < 0.35
                  else None))
    dynamic = rng.choice((None, None, "batch", "all"))
    while True:
        sizes = (rng.choice(GN_N), rng.choice(GN_G), rng.choice(GN_CG),
                 *rng.choice(GN_SPATIAL))
        slab = sizes[2] * math.prod(sizes[3:])
        # At least 3 elements per slab (2 make dx a cancellation, 1 makes
        # xhat 0: see group_norm_numerics._degenerate).
        if slab >= 3 and math.prod(sizes) <= MULTI_MAX_SIZE:
            break
    has_w = rng.random() < 0.8
    need_dw = has_w and rng.random() < 0.9
    need_db = not need_dw or rng.random() < 0.6
    return MultiProgram(
        index=index, seed=seed, kind="group_norm", sizes=sizes,
        layout=rng.choice(("nchw", "nhwc")), dynamic=dynamic, x_type=x_type,
        p_type=p_type, has_w=has_w, need_dw=need_dw, need_db=need_db,
        stats=stats, style=style)


# ---- inputs and the float64 reference --------------------------------------


@dataclasses.dataclass
class MultiInputs:
    """Flat row-major lists in the domain's (= memory's) order; per group
    (two for a chain) x, dy, mean, rstd; the column parameter w (adaLN's
    scale [B, N], GroupNorm's weight [C] or None)."""

    w: list | None
    lns: list  # [{"x", "dy", "mean", "rstd"}] per group
    dy_a: list | None = None  # dy_k: [B, S, K] x dy_b [B, K, N] -> dy
    dy_b: list | None = None


@functools.lru_cache(maxsize=8)
def _multi_index(mp: MultiProgram, interleaved=False):
    """(row id, column id, over-all-samples column id) of every element of
    the domain in flat order, and the elements of each row. Row ids index
    the [rows...] statistics (row-major over the kept dims), column ids the
    [cols...] parameters. interleaved: GroupNorm's channel c taken into
    group c % G (a mutant)."""
    dom = mp.domain
    rk = [i for i, k in enumerate(mp.row_keep) if k]
    ck = [i for i, k in enumerate(mp.col_keep) if k]
    rid, cid, cid_all = [], [], []
    if mp.kind == "group_norm":
        g_dim = 1 if mp.layout == "nchw" else len(dom) - 2
        G, CG = mp.sizes[1], mp.sizes[2]
    for ix in itertools.product(*map(range, dom)):
        if interleaved and mp.kind == "group_norm":
            ix = list(ix)
            c = ix[g_dim] * CG + ix[g_dim + 1]
            ix[g_dim] = c % G
        r = 0
        for i in rk:
            r = r * dom[i] + ix[i]
        c = 0
        for i in ck:
            c = c * dom[i] + ix[i]
        rid.append(r)
        cid.append(c)
        cid_all.append(ix[2] if mp.kind == "adaln" else c)
    members = [[] for _ in range(math.prod(mp.rows_shape))]
    for i, r in enumerate(rid):
        members[r].append(i)
    return rid, cid, cid_all, members


def gen_multi_inputs(mp: MultiProgram) -> MultiInputs:
    """Seeded, never zero, as adaln_numerics / group_norm_numerics draw
    them: per row (slab) an offset of 0.5 to 2 either way and a scale away
    from 1 (mean and rstd matter), dy correlated with x (both row sums
    matter); adaLN's scale 0.5 N(0, 1) at least 0.05 from 0, GroupNorm's
    weight 1 +- 0.5 at least 0.1 from 1."""
    rng = random.Random(f"diffgen-multi-inputs/{mp.seed}")
    dt, f32 = nn.DTYPES[mp.x_type], nn.DTYPES["f32"]
    pt = nn.DTYPES[mp.p_type]
    _, _, _, members = _multi_index(mp)
    ncols = math.prod(mp.cols_shape)
    if mp.kind == "adaln":
        w = [nn._nonzero(lambda: 0.5 * rng.gauss(0.0, 1.0), pt, 0.05)
             for _ in range(ncols)]
    elif mp.has_w:
        w = [nn._nonzero(lambda: 1.0 + 0.5 * rng.gauss(0.0, 1.0), pt, 0.1,
                         away_from=1.0) for _ in range(ncols)]
    else:
        w = None
    lns = []
    for _ in range(mp.n_groups):
        x, dy = [0.0] * mp.size, [0.0] * mp.size
        mean, rstd = [], []
        for idx in members:
            vals, dvals, m, r = nn.draw_norm_group(rng, dt, len(idx))
            for i, v, d in zip(idx, vals, dvals):
                x[i], dy[i] = v, d
            mean.append(m)
            rstd.append(r)
        lns.append({"x": x, "dy": dy, "mean": mean, "rstd": rstd})
    inp = MultiInputs(w, lns)
    if mp.dy_k:
        # dy = dy_a x dy_b (per sample): N(0, 1)-sized products with a
        # nonzero mean, as the 2-D graphs' (gen_graph_inputs).
        f32r = random.Random(f"diffgen-multi-mm/{mp.seed}")
        B, S, N = mp.sizes
        k = mp.dy_k

        def gauss(count, mu, sigma):
            return [nn._nonzero(lambda: f32r.gauss(mu, sigma), f32)
                    for _ in range(count)]
        inp.dy_a = gauss(B * S * k, 0.5, 1.0)
        inp.dy_b = gauss(B * k * N, 0.5 / math.sqrt(k), 1.0 / math.sqrt(k))
        lns[0]["dy"] = _matmul(inp.dy_a, inp.dy_b, B * S, k, N, B)[0]
    return inp


@functools.lru_cache(maxsize=4)
def _multi_recomputed_stats(mp: MultiProgram, x: tuple):
    """The statistics the program recomputes, as its f32 arithmetic gives
    them (recomputed_stats over each row's elements in the domain's
    order)."""
    r32 = nn.DTYPES["f32"].round
    _, _, _, members = _multi_index(mp)
    nf = float(mp.slab)
    mean, rstd = [], []
    for idx in members:
        s = 0.0
        for i in idx:
            s = r32(s + x[i])
        m = r32(s / nf)
        ss = 0.0
        for i in idx:
            c = r32(x[i] - m)
            ss = r32(ss + r32(c * c))
        var = r32(r32(ss / nf) + EPS)
        mean.append(m)
        rstd.append(r32(1.0 / r32(math.sqrt(var))))
    return mean, rstd


# Wrong references for the multi-axis programs (each must be caught), with
# the programs each changes; and the 2-D formula mutants that also apply.
MULTI_MUTANTS = {
    # adaLN's d(scale) / d(shift) summed over every sample's tokens: the
    # 2-D column reduction of Inductor's wrong gradient (pytorch 193061).
    "dcol-over-all-samples": lambda p: p.kind == "adaln" and p.sizes[0] > 1,
    # d(scale) / dweight from dy * (x - mean): the rstd factor missing.
    "dcol-no-rstd": lambda p: p.need_dw,
    # adaLN's modulation taken as scale instead of 1 + scale.
    "scale-not-plus-one": lambda p: p.kind == "adaln",
    # The chain's second contribution to d(scale) / d(shift) lost.
    "chain-drops-second": lambda p: p.chain and (p.need_dw or p.need_db),
    # GroupNorm's slab means over the spatial size, not (C/G) x spatial.
    "slab-mean-wrong-size": lambda p: p.kind == "group_norm"
        and p.sizes[2] > 1,
    # GroupNorm's channel c in group c % G instead of c // (C/G).
    "groups-interleaved": lambda p: p.kind == "group_norm"
        and 1 < p.sizes[1] and p.sizes[2] > 1,
}
MULTI_CORE_MUTANTS = ("dx-no-mean-wdy-term", "dx-no-projection-term",
                      "dx-no-outer-rstd", "xhat-not-centred")


def _multi_mutant_applies(p: MultiProgram, mutant: str) -> bool:
    if mutant == "matmul-skips-last-k":
        return bool(p.dy_k)
    if mutant in MULTI_MUTANTS:
        return MULTI_MUTANTS[mutant](p)
    return mutant in MULTI_CORE_MUTANTS


def multi_reference(mp: MultiProgram, inp: MultiInputs, mutant=None):
    """nn.Result in float64 from the same (rounded) inputs: per row (a
    token of a sample; a slab (n, g)) of M elements
      xhat = (x - mean) * rstd,  wdy = weff[col] * dy
      dx   = rstd * (wdy - mean_row(wdy) - xhat * mean_row(xhat * wdy))
    weff = 1 + scale[b, n] (adaLN) or weight[c] (GroupNorm; 1 without);
    dw[col] = sum dy * xhat, db[col] = sum dy over the elements of the
    column (adaLN: a sample's tokens; GroupNorm: every sample and spatial
    position of a channel); a chain's second group adds to both."""
    rid, cid, cid_all, members = _multi_index(
        mp, interleaved=mutant == "groups-interleaved")
    # The columns each element's dy * xhat and dy sum into.
    ccid = cid_all if mutant == "dcol-over-all-samples" else cid
    ncols = math.prod(mp.cols_shape)
    if mp.kind == "adaln":
        one = 0.0 if mutant == "scale-not-plus-one" else 1.0
        weff = [one + s for s in inp.w]
    else:
        weff = inp.w if inp.w is not None else [1.0] * ncols
    m_count = float(mp.slab)
    if mutant == "slab-mean-wrong-size" and mp.kind == "group_norm":
        m_count = float(math.prod(mp.spatial))
    values, scales = {}, {}
    dw_terms = [[] for _ in range(ncols)]
    db_terms = [[] for _ in range(ncols)]
    for k, ln in enumerate(inp.lns):
        x, dy = ln["x"], ln["dy"]
        if mp.dy_k and mutant == "matmul-skips-last-k":
            B, S, N = mp.sizes
            dy = _matmul(inp.dy_a, inp.dy_b, B * S, mp.dy_k, N, B,
                         skip_last=True)[0]
        mean, rstd = ln["mean"], ln["rstd"]
        if mp.stats == "recomputed":
            mean, rstd = _multi_recomputed_stats(mp, tuple(x))
        centred = mutant != "xhat-not-centred"
        xhat = [(x[i] - (mean[r] if centred else 0.0)) * rstd[r]
                for i, r in enumerate(rid)]
        wdy = [weff[c] * d for c, d in zip(cid, dy)]
        dx = [0.0] * len(x)
        sdx = [0.0] * len(x)
        for r, idx in enumerate(members):
            rs = rstd[r]
            a = math.fsum(wdy[i] for i in idx) / m_count
            pr = math.fsum(xhat[i] * wdy[i] for i in idx) / m_count
            if mutant == "dx-no-mean-wdy-term":
                a = 0.0
            if mutant == "dx-no-projection-term":
                pr = 0.0
            outer = 1.0 if mutant == "dx-no-outer-rstd" else rs
            for i in idx:
                dx[i] = outer * (wdy[i] - a - xhat[i] * pr)
                sdx[i] = abs(rs * wdy[i]) + abs(rs * a) + abs(
                    rs * xhat[i] * pr)
        name = "dx" if k == 0 else "dx_2"
        values[name], scales[name] = dx, sdx
        if k == 1 and mutant == "chain-drops-second":
            continue
        no_rstd = mutant == "dcol-no-rstd"
        for i, c in enumerate(ccid):
            h = (x[i] - mean[rid[i]]) if no_rstd else xhat[i]
            dw_terms[c].append(dy[i] * h)
            db_terms[c].append(dy[i])
    if mutant == "dcol-over-all-samples" and mp.kind == "adaln":
        n = mp.sizes[2]  # every sample's column n gets the total over all
        for c in range(n, ncols):
            dw_terms[c] = dw_terms[c % n]
            db_terms[c] = db_terms[c % n]
    for nm, terms, need in (("dw", dw_terms, mp.need_dw),
                            ("db", db_terms, mp.need_db)):
        if need:
            values[nm] = [math.fsum(t) for t in terms]
            scales[nm] = [math.fsum(map(abs, t)) for t in terms]
    return nn.Result(values, scales)


# ---- emission --------------------------------------------------------------


class MFn(Fn):
    """Fn over a multi-axis domain: "row" values are indexed by the dims
    the row sums keep, "col" values by the dims the column sums keep."""

    def __init__(self, mp: MultiProgram, rng):  # (not Fn's: no Program)
        self.p = mp
        self.rng = rng
        self.host = self
        self.lines = []
        self.counter = 0
        self.rank = r = len(mp.domain)
        self.full_dims = [None if dyn else d
                          for d, dyn in zip(mp.domain, mp.dyn_domain)]
        self.idx = {"full": list(range(r)),
                    "row": [i for i in range(r) if mp.row_keep[i]],
                    "col": [i for i in range(r) if mp.col_keep[i]]}
        self.row_dims = [self.full_dims[i] for i in self.idx["row"]]
        self.col_dims = [self.full_dims[i] for i in self.idx["col"]]
        d = [f"d{i}" for i in range(r)]

        def amap(ins, outs):
            return f"affine_map<({', '.join(ins)}) -> ({', '.join(outs)})>"
        self.maps = {"full": amap(d, d),
                     "row": amap(d, [d[i] for i in self.idx["row"]]),
                     "rowk": amap(d, [d[i] if mp.row_keep[i] else "0"
                                      for i in range(r)]),
                     "col": amap(d, [d[i] for i in self.idx["col"]]),
                     "scalar": amap(d, [])}
        dr = d[:len(self.idx["row"])]
        dc = d[:len(self.idx["col"])]
        self.row_maps = {"row": amap(dr, dr)}
        self.col_maps = {"col": amap(dc, dc)}
        self.dim_values = {}
        self.zero = None
        self.n_value = None

    def t_row(self, elem="f32", keep=False):
        if keep:  # keepdim: 1 for each summed dim
            return _ttype([d if self.p.row_keep[i] else 1
                           for i, d in enumerate(self.full_dims)], elem)
        return _ttype(self.row_dims, elem)

    def t_mem(self, elem):
        mp = self.p
        return _ttype([None if dyn else d
                       for d, dyn in zip(mp.mem_shape, mp.mem_dyn)], elem)

    def setup(self, x):
        """Dynamic dims of x (in memory), the zero, M (elements per row) as
        f32."""
        mp = self.p
        reassoc = mp.reassociation or [[i] for i in range(self.rank)]
        for m, grp in enumerate(reassoc):
            if mp.mem_dyn[m]:
                c = self.fresh("c")
                self.emit(f"{c} = arith.constant {m} : index")
                v = self.fresh("dim")
                self.emit(f"{v} = tensor.dim {x}, {c} : "
                          f"{self.t_mem(mp.x_type)}")
                (i,) = grp  # a dynamic dim is never G or C/G
                self.dim_values[i] = v
        self.zero = self.fresh("zero")
        self.emit(f"{self.zero} = arith.constant 0.000000e+00 : f32")
        summed = [i for i in range(self.rank) if not mp.row_keep[i]]
        dyn = [self.dim_values[i] for i in summed if i in self.dim_values]
        self.n_value = self.fresh("nf")
        self.m_dynamic = bool(dyn)
        if not dyn:
            self.emit(f"{self.n_value} = arith.constant "
                      f"{float(mp.slab):e} : f32")
            return
        static = math.prod(mp.domain[i] for i in summed
                           if i not in self.dim_values)
        acc = self.fresh("c")
        self.emit(f"{acc} = arith.constant {static} : index")
        for v in dyn:
            t = self.fresh("m")
            self.emit(f"{t} = arith.muli {acc}, {v} : index")
            acc = t
        ni = self.fresh("ni")
        self.emit(f"{ni} = arith.index_cast {acc} : index to i64")
        self.emit(f"{self.n_value} = arith.uitofp {ni} : i64 to f32")

    def empty(self, kind, elem, keep=False):
        dims = {"full": self.full_dims, "row": self.row_dims,
                "col": self.col_dims}[kind]
        dyn = [self.dim_values[i] for i, d in zip(self.idx[kind], dims)
               if d is None]
        t = _ttype(dims, elem)
        v = self.fresh("e")
        self.emit(f"{v} = tensor.empty({', '.join(dyn)}) : {t}")
        return v, t

    def _iters(self, kept):
        return ["parallel" if i in self.idx[kept] else "reduction"
                for i in range(self.rank)]

    def row_reduce(self, ins, contribs_fn, keep=False, count=None):
        outs = []
        for _ in range(count or 1):
            z, t = self.zeros("row")
            outs.append((z, t, "row"))

        def body(a, o, b):
            cs = contribs_fn(a, b)
            return [self._combine(b, oa, c) for oa, c in zip(o, cs)]
        return self.generic(ins, outs, self._iters("row"), body)

    def col_reduce(self, ins, contribs_fn, inits):
        outs = [(v, t, "col") for v, t in inits]

        def body(a, o, b):
            cs = contribs_fn(a, b)
            return [self._combine(b, oa, c) for oa, c in zip(o, cs)]
        return self.generic(ins, outs, self._iters("col"), body)

    def row_elementwise(self, ins, body_fn, keep=False):
        e, t = self.empty("row", "f32")
        return self.generic(ins, [(e, t, "row")],
                            ["parallel"] * len(self.idx["row"]),
                            lambda a, o, b: [body_fn(a, b)],
                            maps=self.row_maps)[0], t

    def col_elementwise(self, ins, elem, body_fn):
        e, t = self.empty("col", elem)
        return self.generic(ins, [(e, t, "col")],
                            ["parallel"] * len(self.idx["col"]),
                            lambda a, o, b: [body_fn(a, b)],
                            maps=self.col_maps)[0], t

    def broadcast(self, v, vt, kind):
        e, t = self.empty("full", "f32")
        dims = [i for i in range(self.rank) if i not in self.idx[kind]]
        r = self.fresh("bc")
        self.emit(f"{r} = linalg.broadcast ins({v} : {vt}) outs({e} : {t}) "
                  f"dimensions = [{', '.join(map(str, dims))}]")
        return r, t

    def reduce(self, v, vt, kind, init, init_t):
        dims = [i for i in range(self.rank) if i not in self.idx[kind]]
        r = self.fresh("red")
        ds = ", ".join(map(str, dims))
        if self.rng.random() < 0.5:
            self.emit(f"{r} = linalg.reduce {{ arith.addf }} ins({v} : {vt}) "
                      f"outs({init} : {init_t}) dimensions = [{ds}]")
        else:
            a, o = self.fresh("in"), self.fresh("acc")
            s = self.fresh("s")
            lhs, rhs = (o, a) if self.rng.random() < 0.5 else (a, o)
            self.emit(f"{r} = linalg.reduce ins({v} : {vt}) outs({init} : "
                      f"{init_t}) dimensions = [{ds}]")
            self.emit(f"    ({a}: f32, {o}: f32) {{")
            self.emit(f"    {s} = arith.addf {lhs}, {rhs} : f32")
            self.emit("    linalg.yield %s : f32" % s)
            self.emit("  }")
        return r

    def expand(self, v, elem):
        """x / dy in memory -> the domain (tensor.expand_shape; as is for
        adaLN)."""
        mp = self.p
        if mp.reassociation is None:
            return v
        out = []
        for i, d in enumerate(self.full_dims):
            out.append(self.dim_values[i] if d is None else str(d))
        r = self.fresh("xe")
        g = ", ".join("[" + ", ".join(map(str, x)) + "]"
                      for x in mp.reassociation)
        self.emit(f"{r} = tensor.expand_shape {v} [{g}] output_shape "
                  f"[{', '.join(out)}] : {self.t_mem(elem)} into "
                  f"{self.t_full(elem)}")
        return r

    def collapse(self, v, elem):
        """The domain -> memory (dx)."""
        mp = self.p
        if mp.reassociation is None:
            return v
        r = self.fresh("dxc")
        g = ", ".join("[" + ", ".join(map(str, x)) + "]"
                      for x in mp.reassociation)
        self.emit(f"{r} = tensor.collapse_shape {v} [{g}] : "
                  f"{self.t_full(elem)} into {self.t_mem(elem)}")
        return r


def multi_params(mp: MultiProgram):
    """[(key, type)] in canonical order (a chain's second group's keys end
    in _2)."""
    fn = MFn(mp, random.Random(0))
    ps = []
    for k in range(mp.n_groups):
        sfx = _suffix(k)
        ps.append(("x" + sfx, fn.t_mem(mp.x_type)))
        if mp.dy_k:  # [B, S, K] x [B, K, N]
            b, s_, n = fn.full_dims
            ps += [("dy_a", _ttype([b, s_, mp.dy_k], "f32")),
                   ("dy_b", _ttype([b, mp.dy_k, n], "f32"))]
        else:
            ps.append(("dy" + sfx, fn.t_mem(mp.x_type)))
        if mp.stats == "given":
            ps += [("mean" + sfx, fn.t_row("f32", mp.keepdim)),
                   ("rstd" + sfx, fn.t_row("f32", mp.keepdim))]
    if mp.kind == "adaln":
        ps.append(("w", fn.t_col(mp.p_type)))
    elif mp.has_w:
        ps.append(("w", _ttype(mp.cols_shape, mp.p_type)))
    return ps


def multi_param_values(mp: MultiProgram, inp: MultiInputs):
    vals = {}
    for k, ln in enumerate(inp.lns):
        sfx = _suffix(k)
        vals["x" + sfx] = (mp.mem_shape, mp.x_type, ln["x"])
        vals["dy" + sfx] = (mp.mem_shape, mp.x_type, ln["dy"])
        vals["mean" + sfx] = (mp.stats_shape, "f32", ln["mean"])
        vals["rstd" + sfx] = (mp.stats_shape, "f32", ln["rstd"])
    vals["w"] = (mp.cols_shape, mp.p_type, inp.w)
    if mp.dy_k:
        B, S, N = mp.sizes
        vals["dy_a"] = ((B, S, mp.dy_k), "f32", inp.dy_a)
        vals["dy_b"] = ((B, mp.dy_k, N), "f32", inp.dy_b)
    return vals


def emit_multi(mp: MultiProgram):
    """emit_program for a multi-axis program."""
    rng = random.Random(f"diffgen-multi-emit/{mp.seed}")
    fn = MFn(mp, rng)
    ps = multi_params(mp)
    order = list(range(len(ps)))
    rng.shuffle(order)
    sig = [ps[i] for i in order]
    fn.setup("%x")
    w = None
    if mp.has_w:
        w, wt = "%w", dict(ps)["w"]
        if mp.kind == "group_norm":  # [C] -> [G, C/G]
            r = fn.fresh("we")
            g, cg = mp.sizes[1], mp.sizes[2]
            fn.emit(f"{r} = tensor.expand_shape %w [[0, 1]] output_shape "
                    f"[{g}, {cg}] : {wt} into {fn.t_col(mp.p_type)}")
            w = r
    results = {}
    cols = None
    for k in range(mp.n_groups):
        sfx = _suffix(k)
        names = {"x": fn.expand(f"%x{sfx}", mp.x_type)}
        if mp.dy_k:
            pt = dict(ps)
            z, t = fn.zeros("full")
            names["dy"] = fn.fresh("mm")
            fn.emit(f"{names['dy']} = linalg.batch_matmul ins(%dy_a, %dy_b :"
                    f" {pt['dy_a']}, {pt['dy_b']}) outs({z} : {t}) -> {t}")
        else:
            names["dy"] = fn.expand(f"%dy{sfx}", mp.x_type)
        types = {"x": fn.t_full(mp.x_type), "dy": fn.t_full(mp.x_type)}
        names["km"] = "row"  # the statistics' map
        if mp.stats == "given":
            for key in ("mean", "rstd"):
                names[key], types[key] = f"%{key}{sfx}", fn.t_row(
                    "f32", mp.keepdim)
            if mp.keepdim:
                names["km"] = "rowk"
        if w is not None:
            names["w"], types["w"] = w, fn.t_col(mp.p_type)
        inits = {}
        for nm, need in (("dw", mp.need_dw), ("db", mp.need_db)):
            if need:
                inits[nm] = (cols[nm], fn.t_col("f32")) if cols else \
                    fn.zeros("col")
        dx, cols = {"steps": _m_steps, "fused": _m_steps,
                    "named": _m_named, "inline": _m_inline}[mp.style](
            fn, mp, names, types, inits)
        results["dx" + sfx] = (fn.collapse(dx, mp.x_type),
                               fn.t_mem(mp.x_type))
    for nm in ("dw", "db"):
        if nm not in cols:
            continue
        v = cols[nm]
        if mp.p_type != "f32":
            v, _ = fn.col_elementwise(
                [("s", v, fn.t_col("f32"), "col")], mp.p_type,
                lambda a, b: b.trunc(a["s"], mp.p_type))
        t = fn.t_col(mp.p_type)
        if mp.kind == "group_norm":
            r = fn.fresh("dc")
            ct = _ttype(mp.cols_shape, mp.p_type)
            fn.emit(f"{r} = tensor.collapse_shape {v} [[0, 1]] : {t} into "
                    f"{ct}")
            v, t = r, ct
        results[nm] = (v, t)
    return _function_text(mp, fn, sig, results)


def _m_weff(b, a, mp):
    """The column factor in f32 inside a payload: 1 + scale (adaLN) or the
    weight (GroupNorm)."""
    w = b.ext(a["w"], mp.p_type)
    if mp.kind == "adaln":
        w = b.add(w, b.const(1.0))
    return w


def _m_recompute(fn, mp, names, types):
    """mean and rstd recomputed from x: row sums over the slab."""
    names, types = dict(names), dict(types)
    rowt = fn.t_row("f32")
    (s,) = fn.row_reduce([("x", names["x"], types["x"], "full")],
                         lambda a, b: [b.ext(a["x"], mp.x_type)])
    mean, _ = fn.row_elementwise([("s", s, rowt, "row")],
                                 lambda a, b: b.div(a["s"], fn.n_value))

    def sq(a, b):
        c = b.sub(b.ext(a["x"], mp.x_type), a["mean"])
        return [b.bin("mulf", c, c)]
    (ss,) = fn.row_reduce([("x", names["x"], types["x"], "full"),
                           ("mean", mean, rowt, "row")], sq)

    def rs(a, b):
        return b.rsqrt(b.add(b.div(a["ss"], fn.n_value), b.const(EPS)))
    rstd, _ = fn.row_elementwise([("ss", ss, rowt, "row")], rs)
    names["mean"], types["mean"] = mean, rowt
    names["rstd"], types["rstd"] = rstd, rowt
    names["km"] = "row"
    return names, types


def _m_mean_of(b, fn, s):
    """s / M, as a division or (M static) a multiplication by 1/M."""
    if fn.m_dynamic or fn.rng.random() < 0.5:
        return b.div(s, fn.n_value)
    return b.mul(s, b.const(nn.DTYPES["f32"].round(1.0 / fn.p.slab)))


def _m_columns(fn, mp, ins, contribs, inits):
    """d(scale) / dW and d(shift) / dB: one two-result column reduction or
    one each (f32)."""
    wanted = list(inits)
    groups = [wanted] if len(wanted) > 1 and fn.rng.random() < 0.5 else [
        [nm] for nm in wanted]
    if fn.rng.random() < 0.5:
        groups.reverse()
    out = {}
    for g in groups:
        res = fn.col_reduce(ins, lambda a, b, g=g: [contribs[nm](a, b)
                                                    for nm in g],
                            [inits[nm] for nm in g])
        out.update(zip(g, res))
    return out


def _m_steps(fn, mp, names, types, inits):
    """One linalg.generic per step (random splits, as _emit_steps)."""
    rng = fn.rng
    full32 = fn.t_full("f32")
    rowt = fn.t_row("f32")
    if mp.stats == "recomputed":
        names, types = _m_recompute(fn, mp, names, types)
    x32, dy32 = names["x"], names["dy"]
    if mp.x_type != "f32":
        x32, _ = fn.elementwise([("x", names["x"], types["x"], "full")],
                                "f32", lambda a, b: b.ext(a["x"], mp.x_type))
        dy32, _ = fn.elementwise([("dy", names["dy"], types["dy"], "full")],
                                 "f32",
                                 lambda a, b: b.ext(a["dy"], mp.x_type))
    mean_in = ("mean", names["mean"], types["mean"], names["km"])
    rstd_in = ("rstd", names["rstd"], types["rstd"], names["km"])
    if rng.random() < 0.5:
        xc, _ = fn.elementwise([("x", x32, full32, "full"), mean_in], "f32",
                               lambda a, b: b.sub(a["x"], a["mean"]))
        xhat, _ = fn.elementwise([("x", xc, full32, "full"), rstd_in], "f32",
                                 lambda a, b: b.mul(a["x"], a["rstd"]))
    else:
        xhat, _ = fn.elementwise(
            [("x", x32, full32, "full"), mean_in, rstd_in], "f32",
            lambda a, b: b.mul(b.sub(a["x"], a["mean"]), a["rstd"]))
    wdy = dy32
    if mp.has_w:
        if rng.random() < 0.5:
            w1, w1t = fn.col_elementwise(
                [("w", names["w"], types["w"], "col")], "f32",
                lambda a, b: _m_weff(b, a, mp))
            wdy, _ = fn.elementwise([("dy", dy32, full32, "full"),
                                     ("w", w1, w1t, "col")], "f32",
                                    lambda a, b: b.mul(a["dy"], a["w"]))
        else:
            wdy, _ = fn.elementwise(
                [("dy", dy32, full32, "full"),
                 ("w", names["w"], types["w"], "col")], "f32",
                lambda a, b: b.mul(a["dy"], _m_weff(b, a, mp)))
    # Row sums: s1 = sum xhat * wdy, s2 = sum wdy.
    r = rng.random()
    if r < 0.4:
        prod, _ = fn.elementwise([("h", xhat, full32, "full"),
                                  ("g", wdy, full32, "full")], "f32",
                                 lambda a, b: b.mul(a["h"], a["g"]))
        (s1,) = fn.row_reduce([("p", prod, full32, "full")],
                              lambda a, b: [a["p"]])
        (s2,) = fn.row_reduce([("g", wdy, full32, "full")],
                              lambda a, b: [a["g"]])
    elif r < 0.7:
        s1, s2 = fn.row_reduce([("h", xhat, full32, "full"),
                                ("g", wdy, full32, "full")],
                               lambda a, b: [b.mul(a["h"], a["g"]), a["g"]],
                               count=2)
    else:
        (s1,) = fn.row_reduce([("h", xhat, full32, "full"),
                               ("g", wdy, full32, "full")],
                              lambda a, b: [b.mul(a["h"], a["g"])])
        (s2,) = fn.row_reduce([("g", wdy, full32, "full")],
                              lambda a, b: [a["g"]])
    # dx = rstd * (wdy - s2/M - xhat * s1/M), in 1 or 4 to 5 steps.
    if rng.random() < 0.5:
        c1, _ = fn.row_elementwise([("s", s1, rowt, "row")],
                                   lambda a, b: _m_mean_of(b, fn, a["s"]))
        c2, _ = fn.row_elementwise([("s", s2, rowt, "row")],
                                   lambda a, b: _m_mean_of(b, fn, a["s"]))
        t, _ = fn.elementwise([("h", xhat, full32, "full"),
                               ("c", c1, rowt, "row")], "f32",
                              lambda a, b: b.mul(a["h"], a["c"]))
        t, _ = fn.elementwise([("t", t, full32, "full"),
                               ("c", c2, rowt, "row")], "f32",
                              lambda a, b: b.add(a["t"], a["c"]))
        d, _ = fn.elementwise([("g", wdy, full32, "full"),
                               ("t", t, full32, "full")], "f32",
                              lambda a, b: b.sub(a["g"], a["t"]))
        dx, _ = fn.elementwise([("d", d, full32, "full"), rstd_in],
                               mp.x_type,
                               lambda a, b: b.trunc(b.mul(a["d"], a["rstd"]),
                                                    mp.x_type))
    else:
        def dxb(a, b):
            t = b.add(b.mul(a["h"], _m_mean_of(b, fn, a["s1"])),
                      _m_mean_of(b, fn, a["s2"]))
            return b.mul(b.sub(a["g"], t), a["rstd"])
        dx, _ = fn.elementwise([("h", xhat, full32, "full"),
                                ("g", wdy, full32, "full"),
                                ("s1", s1, rowt, "row"),
                                ("s2", s2, rowt, "row"), rstd_in], "f32",
                               dxb)
        if mp.x_type != "f32":
            dx, _ = fn.elementwise([("d", dx, full32, "full")], mp.x_type,
                                   lambda a, b: b.trunc(a["d"], mp.x_type))
    # Column sums of dy * xhat and dy.
    if "dw" in inits and rng.random() < 0.4:
        q, _ = fn.elementwise([("g", dy32, full32, "full"),
                               ("h", xhat, full32, "full")], "f32",
                              lambda a, b: b.mul(a["g"], a["h"]))
        ins = [("q", q, full32, "full")]
        if "db" in inits:
            ins.append(("g", dy32, full32, "full"))
        contribs = {"dw": lambda a, b: a["q"], "db": lambda a, b: a["g"]}
    else:
        ins = [("g", dy32, full32, "full")]
        if "dw" in inits:
            ins.append(("h", xhat, full32, "full"))
        contribs = {"dw": lambda a, b: b.mul(a["g"], a["h"]),
                    "db": lambda a, b: a["g"]}
    return dx, _m_columns(fn, mp, ins, contribs, inits)


def _m_named(fn, mp, names, types, inits):
    """linalg.map / broadcast / reduce / mul / add / sub with generics."""
    rng = fn.rng
    full32 = fn.t_full("f32")
    rowt = fn.t_row("f32")
    if mp.stats == "recomputed":
        names, types = _m_recompute(fn, mp, names, types)

    def ext_full(key):
        v, t = names[key], types[key]
        if mp.x_type == "f32":
            return v
        return fn.map_region([(key, v, t)], "f32",
                             lambda a, b: b.ext(a[key], mp.x_type))[0]
    x32, dy32 = ext_full("x"), ext_full("dy")

    def stats(key):
        """[B, S, 1] -> [B, S] (keepdim, adaLN) for linalg.broadcast."""
        v = names[key]
        if names["km"] == "rowk":
            c = fn.fresh("col")
            fn.emit(f"{c} = tensor.collapse_shape {v} [[0], [1, 2]] : "
                    f"{types[key]} into {rowt}")
            v = c
        return fn.broadcast(v, rowt, "row")
    mean_b, _ = stats("mean")
    rstd_b, _ = stats("rstd")
    xhat = fn.map_binary("mulf", fn.map_binary("subf", x32, mean_b, full32),
                         rstd_b, full32)
    wdy = dy32
    if mp.has_w:
        if mp.kind == "adaln" or mp.p_type != "f32":
            w32, w32t = fn.col_elementwise(
                [("w", names["w"], types["w"], "col")], "f32",
                lambda a, b: _m_weff(b, a, mp))
        else:
            w32, w32t = names["w"], types["w"]
        w_b, _ = fn.broadcast(w32, w32t, "col")
        wdy = fn.map_binary("mulf", dy32, w_b, full32)
    prod = fn.map_binary("mulf", xhat, wdy, full32)
    s1 = fn.reduce(prod, full32, "row", *fn.zeros("row"))
    s2 = fn.reduce(wdy, full32, "row", *fn.zeros("row"))
    c1 = fn.row_elementwise([("s", s1, rowt, "row")],
                            lambda a, b: _m_mean_of(b, fn, a["s"]))[0]
    c2 = fn.row_elementwise([("s", s2, rowt, "row")],
                            lambda a, b: _m_mean_of(b, fn, a["s"]))[0]
    t = fn.map_binary("mulf", xhat, fn.broadcast(c1, rowt, "row")[0], full32)
    t = fn.map_binary("addf", t, fn.broadcast(c2, rowt, "row")[0], full32)
    dx = fn.map_binary("mulf", fn.map_binary("subf", wdy, t, full32), rstd_b,
                       full32)
    if mp.x_type != "f32":
        dx, _ = fn.map_region([("d", dx, full32)], mp.x_type,
                              lambda a, b: b.trunc(a["d"], mp.x_type))
    cols = {}
    order = list(inits)
    if rng.random() < 0.5:
        order.reverse()
    for nm in order:
        v = fn.map_binary("mulf", dy32, xhat, full32) if nm == "dw" else dy32
        cols[nm] = fn.reduce(v, full32, "col", *inits[nm])
    return dx, cols


def _m_inline(fn, mp, names, types, inits):
    """Hand-fused: each reduction and dx compute xhat and w * dy from the
    raw inputs in their own payloads."""
    rng = fn.rng
    rowt = fn.t_row("f32")
    if mp.stats == "recomputed":
        names, types = _m_recompute(fn, mp, names, types)

    def raw_ins(with_w=True):
        ins = [("x", names["x"], types["x"], "full"),
               ("dy", names["dy"], types["dy"], "full"),
               ("mean", names["mean"], types["mean"], names["km"]),
               ("rstd", names["rstd"], types["rstd"], names["km"])]
        if mp.has_w and with_w:
            ins.append(("w", names["w"], types["w"], "col"))
        return ins

    def xhat_of(a, b):
        return b.mul(b.sub(b.ext(a["x"], mp.x_type), a["mean"]), a["rstd"])

    def wdy_of(a, b):
        g = b.ext(a["dy"], mp.x_type)
        return b.mul(g, _m_weff(b, a, mp)) if mp.has_w else g

    if rng.random() < 0.6:
        s1, s2 = fn.row_reduce(raw_ins(), lambda a, b: [
            b.mul(xhat_of(a, b), wdy_of(a, b)), wdy_of(a, b)], count=2)
    else:
        (s1,) = fn.row_reduce(raw_ins(), lambda a, b: [
            b.mul(xhat_of(a, b), wdy_of(a, b))])
        (s2,) = fn.row_reduce(raw_ins(), lambda a, b: [wdy_of(a, b)])
    ins = raw_ins() + [("s1", s1, rowt, "row"), ("s2", s2, rowt, "row")]

    def dxb(a, b):
        t = b.add(b.mul(xhat_of(a, b), _m_mean_of(b, fn, a["s1"])),
                  _m_mean_of(b, fn, a["s2"]))
        return b.trunc(b.mul(b.sub(wdy_of(a, b), t), a["rstd"]), mp.x_type)
    dx, _ = fn.elementwise(ins, mp.x_type, dxb)
    contribs = {"dw": lambda a, b: b.mul(b.ext(a["dy"], mp.x_type),
                                         xhat_of(a, b)),
                "db": lambda a, b: b.ext(a["dy"], mp.x_type)}
    return dx, _m_columns(fn, mp, raw_ins(with_w=False), contribs, inits)
