#===- fx_import.py - a recorded ATen graph as linalg on tensors -----------===#
"""The importer of issue 40, item 1: a region of torch's post-grad ATen graph
(recorded as JSON by norm_opt.fx_record, on a machine with torch) written as
one `func.func` on tensors in the forms the recognition pass takes: one
`linalg.generic` per ATen op, `linalg.fill` for reduction inits,
`tensor.empty` / `tensor.dim` for the outputs, `arith` / `math` in the
payloads. Needs no torch: CI imports the checked-in graphs.

The graph format (FORMAT 1), one JSON object:
  {"format": 1, "name": ..., "nodes": [node...]}
  node: {"name", "op": "placeholder" | "call_function" | "output",
         "target": "aten.mul.Tensor" (call_function), "args", "kwargs",
         "shape": [int or "s0"...], "dtype": "bfloat16" (tensor results)}
  an argument: a number, a string, null, a list, {"node": name} (another
  node's value), {"dtype": "float32"} (a torch dtype), {"sym": "s0"}.

How values are written:
  * every op of the elementwise table, with numpy broadcasting and ATen's
    type promotion as the node's recorded dtype says, is one generic;
  * views (expand, unsqueeze, squeeze, view / reshape / _unsafe_view that
    only add or drop unit dims, permute, transpose, t, clone, alias) write
    nothing: a view is an indexing map its users read through;
  * sum.dim_IntList / mean.dim (keepdim or not) are reduction generics in
    f32 or the recorded dtype; mean divides by the count of a static extent;
  * anything else is a boundary: its result is a function argument, the
    values it reads are function results, and a remark says so (`remarks`).
Symbolic sizes ("s0") are `?` dims, taken with `tensor.dim` from the first
argument that has them.
"""

import json
import sys

FORMAT = 1

DTYPES = {"float32": "f32", "float": "f32", "bfloat16": "bf16", "float16": "f16",
          "half": "f16", "float64": "f64", "double": "f64", "int64": "i64",
          "long": "i64", "int32": "i32", "int": "i32", "bool": "i1",
          "uint8": "i8", "int8": "i8"}
FLOATS = ("f16", "bf16", "f32", "f64")
WIDTH = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64, "i1": 1, "i8": 8,
         "i32": 32, "i64": 64}

# aten op -> (arity, payload builder name); the payload computes in the
# result's float type.
UNARY = {"aten.neg.default": "neg", "aten.rsqrt.default": "rsqrt",
         "aten.sqrt.default": "sqrt", "aten.exp.default": "exp",
         "aten.reciprocal.default": "reciprocal", "aten.tanh.default": "tanh",
         "aten.abs.default": "abs"}
BINARY = {"aten.add.Tensor": "add", "aten.add.Scalar": "add",
          "aten.sub.Tensor": "sub", "aten.sub.Scalar": "sub",
          "aten.mul.Tensor": "mul", "aten.mul.Scalar": "mul",
          "aten.div.Tensor": "div", "aten.div.Scalar": "div",
          "aten.rsub.Scalar": "rsub", "aten.rsub.Tensor": "rsub",
          "aten.pow.Tensor_Scalar": "pow"}
CASTS = ("prims.convert_element_type.default",
         "aten._to_copy.default", "aten.to.dtype")
VIEWS = ("aten.expand.default", "aten.unsqueeze.default",
         "aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default",
         "aten.view.default", "aten.reshape.default",
         "aten._unsafe_view.default", "aten.permute.default",
         "aten.transpose.int", "aten.t.default", "aten.clone.default",
         "aten.alias.default")
RESHAPES = ("aten.view.default", "aten.reshape.default",
            "aten._unsafe_view.default")
REDUCTIONS = ("aten.sum.dim_IntList", "aten.mean.dim")
PERMUTES = ("aten.permute.default", "aten.transpose.int", "aten.t.default")


def permutation(target, args, rank):
    """The dims a permute / transpose / t reads: result dim i is dim
    perm[i] of its operand."""
    if target == "aten.permute.default":
        return [p % rank for p in args[1]]
    a, b = ((args[1] % rank, args[2] % rank)
            if target == "aten.transpose.int" else (0, 1))
    perm = list(range(rank))
    perm[a], perm[b] = perm[b], perm[a]
    return perm


class ImportError_(Exception):
    """A graph this importer cannot read (not an unsupported op: those are
    boundaries)."""


class Value:
    """A tensor of the graph: the SSA value holding it and how its logical
    dims read that value's dims (`index[i]`: the source dim of logical dim
    i, or None where the dim is a broadcast of size `shape[i]`). Source dims
    no logical dim reads have extent 1."""

    def __init__(self, ssa, shape, dtype, src_shape=None, index=None):
        self.ssa, self.shape, self.dtype = ssa, list(shape), dtype
        self.src_shape = list(src_shape if src_shape is not None else shape)
        self.index = list(index if index is not None else range(len(shape)))

    def is_view(self):
        return self.src_shape != self.shape or \
            self.index != list(range(len(self.shape)))


def _dim(d):
    return "?" if isinstance(d, str) else str(d)


def tensor_type(shape, dtype):
    if not shape:
        return f"tensor<{dtype}>"
    return f"tensor<{'x'.join(_dim(d) for d in shape)}x{dtype}>"


def _same(a, b):
    return a == b


def broadcast_shape(shapes):
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(rank):
        size = 1
        for s in shapes:
            i = k - (rank - len(s))
            if i < 0:
                continue
            d = s[i]
            if d == 1:
                continue
            if size != 1 and not _same(size, d):
                raise ImportError_(f"shapes {shapes} do not broadcast")
            size = d
        out.append(size)
    return out


def refinement(src, dst):
    """The groups (src dims, dst dims) of a reshape of `src` into `dst`,
    each with one dim on a side (a split or a merge) or the same dims; None
    where a group would need dims of both sides cut (6x4 -> 4x6) or a
    symbolic size is not matched by itself."""
    groups, i, j = [], 0, 0
    while i < len(src) or j < len(dst):
        a, b = [], []
        while True:
            pa = _product(a)
            pb = _product(b)
            if a and b and pa == pb and pa is not None:
                break
            if (pb is None or (pa is not None and pa < pb)) and i < len(src) \
                    or j >= len(dst):
                if i >= len(src):
                    return None
                a.append(src[i])
                i += 1
            else:
                b.append(dst[j])
                j += 1
            if _product(a) is None or _product(b) is None:
                # A symbolic size: alone, and the same on both sides.
                if len(a) == 1 and len(b) == 1 and a == b:
                    break
                if len([d for d in a + b if isinstance(d, str)]) > 2 or \
                        (a and b and (len(a) > 1 or len(b) > 1)):
                    return None
        while i < len(src) and src[i] == 1 and j >= len(dst):
            a.append(src[i])
            i += 1
        if len(a) > 1 and len(b) > 1 and a != b:
            return None
        groups.append((a, b))
    return groups


def _product(dims):
    p = 1
    for d in dims:
        if isinstance(d, str):
            return None
        p *= d
    return p


def _groups(groups):
    return "[" + ", ".join("[" + ", ".join(str(k) for k in g) + "]"
                           for g in groups) + "]"


def _float_literal(v, dtype):
    if dtype in FLOATS:
        v = float(v)
        if v != v or v in (float("inf"), float("-inf")):
            raise ImportError_(f"the scalar {v} is not imported")
        return f"{v:.17e}"
    return str(int(v))


class Importer:
    def __init__(self, graph, name=None):
        if graph.get("format") != FORMAT:
            raise ImportError_(f"graph format {graph.get('format')!r}, this "
                               f"importer reads {FORMAT}")
        self.graph = graph
        self.name = name or graph.get("name") or "region"
        self.lines, self.args, self.results = [], [], []
        self.values, self.remarks = {}, []
        self.counter = 0
        self.dims = {}         # symbol -> SSA index value
        self.dim_sources = {}  # symbol -> (arg ssa, position)
        self.consts = {}
        self.imported = []     # the nodes written as ops or views, in order
        self.located = []      # those written as an op located by its name
        self.arg_perms = {}    # argument -> its dims in memory order
        self.users = {}        # node -> the nodes that read it
        self.result_perms = {}  # result in memory order -> its dims there

    # -- SSA helpers --------------------------------------------------------
    def fresh(self, hint="v"):
        self.counter += 1
        return f"%{hint}{self.counter}"

    def emit(self, text):
        self.lines.append("  " + text)

    def index_const(self, i):
        key = ("index", i)
        if key not in self.consts:
            ssa = self.fresh("c")
            self.emit(f"{ssa} = arith.constant {i} : index")
            self.consts[key] = ssa
        return self.consts[key]

    def dim_value(self, sym):
        if sym not in self.dims:
            if sym not in self.dim_sources:
                raise ImportError_(f"size {sym} is no argument's")
            arg, pos, ty = self.dim_sources[sym]
            ssa = self.fresh("dim")
            self.emit(f"{ssa} = tensor.dim {arg}, {self.index_const(pos)} : {ty}")
            self.dims[sym] = ssa
        return self.dims[sym]

    def empty(self, shape, dtype):
        dyn = [self.dim_value(d) for d in shape if isinstance(d, str)]
        ssa = self.fresh("e")
        self.emit(f"{ssa} = tensor.empty({', '.join(dyn)}) : "
                  f"{tensor_type(shape, dtype)}")
        return ssa

    # -- graph --------------------------------------------------------------
    def argument(self, node, why=None):
        shape, dtype = node["shape"], DTYPES[node["dtype"]]
        ssa = f"%{_ident(node['name'])}"
        # A placeholder laid out as a permutation of its dims (channels-
        # last) is the argument in its memory order, read through a map.
        perm = physical_order(shape, node.get("stride"))
        physical = [shape[p] for p in perm]
        self.arg_perms[node["name"]] = perm
        ty = tensor_type(physical, dtype)
        self.args.append((ssa, ty))
        for pos, d in enumerate(physical):
            if isinstance(d, str) and d not in self.dim_sources:
                self.dim_sources[d] = (ssa, pos, ty)
        self.values[node["name"]] = Value(ssa, shape, dtype, physical,
                                          [perm.index(i)
                                           for i in range(len(shape))])
        if why:
            self.remarks.append(f"{node['name']}: boundary ({why}): a "
                                "function argument")

    def run(self):
        nodes = self.graph["nodes"]
        self.by_name = {n["name"]: n for n in nodes}
        users = self.users = {}
        for n in nodes:
            for ref in _refs(n.get("args", [])) + _refs(n.get("kwargs", {})):
                users.setdefault(ref, []).append(n)
        self.boundary_inputs = []
        for n in nodes:
            op = n["op"]
            if op == "placeholder":
                if "shape" not in n:
                    continue  # a symbolic size or a scalar: not a tensor
                self.argument(n)
            elif op == "call_function":
                why = self.call(n)
                if not why:
                    self.imported.append(n["name"])
                if why:
                    if "shape" in n and n.get("dtype") in DTYPES:
                        self.argument(n, why)
                    else:
                        self.remarks.append(f"{n['name']}: not imported "
                                            f"({why})")
                    for ref in _refs(n.get("args", [])) + \
                            _refs(n.get("kwargs", {})):
                        if ref in self.values and ref not in \
                                self.boundary_inputs:
                            self.boundary_inputs.append(ref)
            elif op == "output":
                outs = n["args"][0] if n["args"] else []
                for ref in _refs(outs):
                    # A graph output that was not imported (its remark
                    # says why) is no result of the function.
                    if ref in self.values and ref not in \
                            self.boundary_inputs:
                        self.boundary_inputs.append(ref)
        for ref in self.boundary_inputs:
            v = self.values[ref]
            if any(a[0] == v.ssa for a in self.args):
                continue  # an argument handed straight back: not a result
            perm = _permutation_of(v)
            if perm is not None:  # channels last: returned in memory order
                self.result_perms[ref] = perm
                self.results.append((v.ssa, tensor_type(v.src_shape,
                                                        v.dtype)))
                continue
            self.results.append(self.materialize(v))
        return self.text()

    def text(self):
        args = ", ".join(f"{ssa}: {ty}" for ssa, ty in self.args)
        rtys = ", ".join(ty for _, ty in self.results)
        out = [f"func.func @{_ident(self.name)}({args}) -> ({rtys}) {{"]
        out += self.lines
        out.append(f"  return {', '.join(s for s, _ in self.results)} : "
                   f"{rtys}" if self.results else "  return")
        out.append("}")
        return "\n".join(out) + "\n"

    # -- ops ----------------------------------------------------------------
    def operand(self, a):
        if isinstance(a, dict) and "node" in a:
            if a["node"] not in self.values:
                return None
            return self.values[a["node"]]
        return a

    def call(self, n):
        """Writes node n; returns why it is a boundary, or None."""
        target = n["target"]
        args = [self.operand(a) for a in n.get("args", [])]
        kwargs = n.get("kwargs", {})
        if any(a is None for a in args):
            return "reads a value that was not imported"
        if "shape" not in n or n.get("dtype") not in DTYPES:
            return f"{target}: not one tensor of a known dtype"
        shape, dtype = n["shape"], DTYPES[n["dtype"]]
        if target in VIEWS:
            v = self.view(target, args, shape)
            if v is None and target in RESHAPES and \
                    not self.only_reshaped_argument(n):
                v = self.reshape(args[0], shape)
            if v is None:
                return f"{target}: a view that is not a permutation, a " \
                       "change of unit dims or a split / merge of dims"
            self.values[n["name"]] = Value(v.ssa, shape, v.dtype, v.src_shape,
                                           v.index)
            return None
        if dtype not in FLOATS:
            return f"{target} computes in {dtype}"
        if target in CASTS:
            if not isinstance(args[0], Value):
                return f"{target} of a scalar"
            if args[0].dtype == dtype:
                self.values[n["name"]] = args[0]
                return None
            return self.elementwise(n, "cast", [args[0]], shape, dtype)
        if target in UNARY:
            return self.elementwise(n, UNARY[target], args[:1], shape, dtype)
        if target in BINARY:
            if target.startswith("aten.add") or target.startswith("aten.sub"):
                alpha = kwargs.get("alpha", 1)
                if alpha != 1:
                    return f"{target} with alpha {alpha}"
            return self.elementwise(n, BINARY[target], args[:2], shape, dtype)
        if target in REDUCTIONS:
            return self.reduction(n, target, args, kwargs, shape, dtype)
        if target in ("aten.full.default", "aten.scalar_tensor.default"):
            value = args[1] if target == "aten.full.default" else args[0]
            return self.elementwise(n, "fill", [value], shape, dtype)
        return f"{target} is not imported"

    def view(self, target, args, shape):
        v = args[0]
        if not isinstance(v, Value):
            return None
        if target in ("aten.clone.default", "aten.alias.default"):
            return v
        if target in PERMUTES:
            perm = permutation(target, args, len(v.shape))
            return Value(v.ssa, shape, v.dtype, v.src_shape,
                         [v.index[p] for p in perm])
        if target == "aten.expand.default":
            off = len(shape) - len(v.shape)
            index = [None] * off + [
                v.index[i] if v.shape[i] != 1 or shape[off + i] == 1 else None
                for i in range(len(v.shape))]
            return Value(v.ssa, shape, v.dtype, v.src_shape, index)
        # unsqueeze / squeeze / view / reshape: only unit dims may come or go.
        kept = [(d, s) for d, s in zip(v.shape, v.index) if d != 1]
        wanted = [d for d in shape if d != 1]
        if [d for d, _ in kept] != wanted:
            return None
        it = iter(s for _, s in kept)
        index = [None if d == 1 else next(it) for d in shape]
        return Value(v.ssa, shape, v.dtype, v.src_shape, index)

    def only_reshaped_argument(self, n):
        """Whether reshape n reads a function argument that nothing else
        reads: then the reshape's result is the argument instead (one full
        tensor of the domain's shape: a matmul's [B*S, N] output viewed as
        [B, S, N]); an argument read both reshaped and not is one argument,
        reshaped inside (GroupNorm's x)."""
        ref = n["args"][0]
        if not isinstance(ref, dict) or "node" not in ref:
            return False
        v = self.values.get(ref["node"])
        if v is None or not any(a[0] == v.ssa for a in self.args):
            return False
        return len(self.users.get(ref["node"], [])) == 1

    def reshape(self, v, shape):
        """A reshape that splits and merges dims (GroupNorm's [N, C, H, W]
        -> [N, G, C/G, H*W]): the tensor expanded to the reshape's common
        refinement ([N, G, C/G, H, W]), then collapsed to `shape`. The
        pass's reshape propagation takes every group to the refinement. A
        permuted tensor (channels last, [N, H, W, C] in memory) is reshaped
        in its memory order where each group's dims are adjacent there
        ([N, H*W, G, C/G]), and read through a permutation as before."""
        if not isinstance(v, Value):
            return None
        # Unit dims come and go as views (a split of C into [1, G, C/G]
        # would make a loop of extent 1 everywhere it reaches).
        kept = [k for k, d in enumerate(v.shape) if d != 1]
        src = [v.shape[k] for k in kept]
        dst = [d for d in shape if d != 1]
        groups = refinement(src, dst)
        if groups is None:
            return None
        placed = self.memory_order(v, kept, groups)
        if placed is not None:  # reshaped in memory order, read permuted
            order, offsets = placed
            ssa, fine = self.refine(v.ssa, v.src_shape, v.dtype,
                                    [groups[g] for g in order])
            # Result dim j (of the non-unit dims, in order) -> its dim in
            # memory order: the groups' result dims, each at its offset.
            position = [offsets[g] + k for g, (_, b) in enumerate(groups)
                        for k in range(len(b))]
            it = iter(position)
            index = [None if d == 1 else next(it) for d in shape]
            return Value(ssa, shape, v.dtype, fine, index)
        v = Value(v.ssa, src, v.dtype, v.src_shape, [v.index[k] for k in kept])
        ssa, _ = self.materialize(v)
        ssa, _ = self.refine(ssa, src, v.dtype, groups)
        it = iter(range(len(dst)))
        return Value(ssa, shape, v.dtype, dst,
                     [None if d == 1 else next(it) for d in shape])

    @staticmethod
    def memory_order(v, kept, groups):
        """For a permuted view v (every source dim read by one logical dim,
        none of extent 1): the groups in memory order and each one's first
        result dim there, where every group's source dims are adjacent and
        in order in memory; None otherwise."""
        if not v.is_view() or len(v.src_shape) != len(kept) or \
                any(d == 1 for d in v.src_shape) or \
                any(v.index[k] is None for k in kept):
            return None
        pos = [v.index[k] for k in kept]
        firsts, i = [], 0
        for a, _ in groups:
            dims = pos[i:i + len(a)]
            i += len(a)
            if dims != list(range(dims[0], dims[0] + len(a))):
                return None
            firsts.append(dims[0])
        order = sorted(range(len(groups)), key=firsts.__getitem__)
        offsets, at = [0] * len(groups), 0
        for g in order:
            offsets[g] = at
            at += len(groups[g][1])
        return order, offsets

    def refine(self, ssa, src_shape, dtype, groups):
        """Writes `ssa` (of `src_shape`) reshaped by `groups` (src dims, dst
        dims): expanded to the refinement, then collapsed; returns the SSA
        name and the result's shape."""
        ty = tensor_type(src_shape, dtype)
        fine, expand, collapse, dst = [], [], [], []
        for src_dims, dst_dims in groups:
            longer = dst_dims if len(dst_dims) > len(src_dims) else src_dims
            start = len(fine)
            fine += longer
            dst += dst_dims
            if len(dst_dims) > len(src_dims):  # one source dim: it splits
                expand.append(list(range(start, len(fine))))
                collapse += [[k] for k in range(start, len(fine))]
            else:  # one result dim (or the same dims): a merge
                expand += [[k] for k in range(start, len(fine))]
                collapse.append(list(range(start, len(fine))))
        if fine != list(src_shape):
            out = self.fresh("x")
            sizes = ", ".join(self.dim_value(d) if isinstance(d, str)
                              else str(d) for d in fine)
            self.emit(f"{out} = tensor.expand_shape {ssa} {_groups(expand)} "
                      f"output_shape [{sizes}] : {ty} into "
                      f"{tensor_type(fine, dtype)}")
            ssa, ty = out, tensor_type(fine, dtype)
        if fine != dst:
            out = self.fresh("x")
            self.emit(f"{out} = tensor.collapse_shape {ssa} "
                      f"{_groups(collapse)} : {ty} into "
                      f"{tensor_type(dst, dtype)}")
            ssa = out
        return ssa, dst

    def input_map(self, v, iter_dims, rank):
        """The affine result of Value v read at iteration dims `iter_dims`
        (one per logical dim of v) in a `rank`-dim iteration space."""
        exprs = []
        for s, size in enumerate(v.src_shape):
            expr = "0"
            for i, src in enumerate(v.index):
                if src == s and iter_dims[i] is not None:
                    expr = f"d{iter_dims[i]}"
            exprs.append(expr)
        dims = ", ".join(f"d{k}" for k in range(rank))
        return f"affine_map<({dims}) -> ({', '.join(exprs)})>"

    def materialize(self, v):
        """v as a tensor of its own (views become a copy)."""
        ty = tensor_type(v.shape, v.dtype)
        if not v.is_view():
            return v.ssa, ty
        rank = len(v.shape)
        iter_dims = [k if v.index[k] is not None else None for k in range(rank)]
        ssa = self.generic("copy", [self.input_map(v, iter_dims, rank),
                                    self.identity(rank)],
                           ['"parallel"'] * rank, [v], v.shape, v.dtype,
                           self.empty(v.shape, v.dtype),
                           [f"%in: {v.dtype}", f"%out: {v.dtype}"], [], "%in")
        return ssa, ty

    def generic(self, hint, maps, iterators, ins, shape, dtype, init, block,
                body, yielded, node=None):
        """Writes one linalg.generic over `iterators`: the Values `ins`, read
        through `maps` (the last one the output's), into `init` (a tensor of
        `shape` and `dtype`); the payload `body` over the block arguments
        `block` yields `yielded`. Returns its SSA name."""
        ssa, ty = self.fresh(hint), tensor_type(shape, dtype)
        ins_text = ""
        if ins:
            ins_text = (f" ins({', '.join(v.ssa for v in ins)} : "
                        f"{', '.join(tensor_type(v.src_shape, v.dtype) for v in ins)})")
        self.emit(f"{ssa} = linalg.generic {{indexing_maps = [{', '.join(maps)}], "
                  f"iterator_types = [{', '.join(iterators)}]}}{ins_text} "
                  f"outs({init} : {ty}) {{")
        self.emit(f"^bb0({', '.join(block)}):")
        for line in body:
            self.emit("  " + line)
        self.emit(f"  linalg.yield {yielded} : {dtype}")
        # The node's name as the op's location: what the region selection
        # (norm_opt.fx_region) reads back from the pass's output.
        loc = f' loc("{node}")' if node else ""
        if node:
            self.located.append(node)
        self.emit(f"}} -> {ty}{loc}")
        return ssa

    @staticmethod
    def identity(rank):
        dims = ", ".join(f"d{k}" for k in range(rank))
        return f"affine_map<({dims}) -> ({dims})>"

    def cast(self, ssa, src, dst, body):
        if src == dst:
            return ssa
        out = f"%t{len(body)}"
        if src in FLOATS and dst in FLOATS:
            op = "arith.extf" if WIDTH[src] < WIDTH[dst] or \
                (src, dst) == ("f16", "bf16") else "arith.truncf"
            if {src, dst} == {"f16", "bf16"}:  # through f32
                mid = f"%t{len(body)}m"
                body.append(f"{mid} = arith.extf {ssa} : {src} to f32")
                body.append(f"{out} = arith.truncf {mid} : f32 to {dst}")
                return out
            body.append(f"{out} = {op} {ssa} : {src} to {dst}")
        elif src == "i1":
            body.append(f"{out} = arith.uitofp {ssa} : i1 to {dst}")
        else:
            body.append(f"{out} = arith.sitofp {ssa} : {src} to {dst}")
        return out

    def scalar(self, value, dtype, body):
        out = f"%k{len(body)}"
        body.append(f"{out} = arith.constant {_float_literal(value, dtype)} "
                    f": {dtype}")
        return out

    def elementwise(self, n, kind, operands, shape, dtype):
        tensors = [o for o in operands if isinstance(o, Value)]
        for o in operands:
            if not isinstance(o, (Value, int, float)) or isinstance(o, bool):
                return f"{n['target']}: operand {o!r} is not a tensor or a " \
                       "number"
        rank = len(shape)
        try:
            if broadcast_shape([t.shape for t in tensors] + [shape]) != \
                    list(shape):
                return f"{n['target']}: the operands broadcast past the result"
        except ImportError_ as e:
            return str(e)
        perm = list(range(rank)) if 1 in shape else _loop_order(
            tensors, shape, physical_order(shape, n.get("stride")))
        loop = [perm.index(i) for i in range(rank)]  # logical dim -> loop
        maps, ins = [], []
        for t in tensors:
            off = rank - len(t.shape)
            iter_dims = [None if (t.shape[i] == 1 and shape[off + i] != 1)
                         else loop[off + i] for i in range(len(t.shape))]
            maps.append(self.input_map(t, iter_dims, rank))
            ins.append(t)
        maps.append(self.identity(rank))
        body, block = [], []
        vals = []
        for i, t in enumerate(ins):
            block.append(f"%a{i}: {t.dtype}")
        it = iter(range(len(ins)))
        for o in operands:
            if isinstance(o, Value):
                vals.append(self.cast(f"%a{next(it)}", o.dtype, dtype, body))
            else:
                vals.append(self.scalar(o, dtype, body))
        r = f"%r{len(body)}"
        if kind == "cast" or kind == "fill":
            r = vals[0]
        elif kind == "neg":
            body.append(f"{r} = arith.negf {vals[0]} : {dtype}")
        elif kind in ("rsqrt", "sqrt", "exp", "tanh"):
            body.append(f"{r} = math.{kind} {vals[0]} : {dtype}")
        elif kind == "abs":
            body.append(f"{r} = math.absf {vals[0]} : {dtype}")
        elif kind == "reciprocal":
            one = self.scalar(1.0, dtype, body)
            body.append(f"{r} = arith.divf {one}, {vals[0]} : {dtype}")
        elif kind in ("add", "sub", "mul", "div"):
            body.append(f"{r} = arith.{kind}f {vals[0]}, {vals[1]} : {dtype}")
        elif kind == "rsub":
            body.append(f"{r} = arith.subf {vals[1]}, {vals[0]} : {dtype}")
        elif kind == "pow":
            exponent = operands[1]
            if exponent == 2:
                body.append(f"{r} = arith.mulf {vals[0]}, {vals[0]} : {dtype}")
            elif exponent == 1:
                r = vals[0]
            else:
                body.append(f"{r} = math.powf {vals[0]}, {vals[1]} : {dtype}")
        else:
            raise AssertionError(kind)
        block.append(f"%out: {dtype}")
        physical = [shape[p] for p in perm]
        ssa = self.generic(_ident(n["name"])[:12] + "_", maps,
                           ['"parallel"'] * rank, ins, physical, dtype,
                           self.empty(physical, dtype), block, body, r,
                           node=n["name"])
        self.values[n["name"]] = Value(ssa, shape, dtype, physical, loop)
        return None

    def reduction(self, n, target, args, kwargs, shape, dtype):
        x = args[0]
        if not isinstance(x, Value):
            return f"{target} of a scalar"
        rank = len(x.shape)
        dims = args[1] if len(args) > 1 else kwargs.get("dim")
        if dims is None:
            dims = list(range(rank))
        dims = sorted({d % rank for d in dims})
        keepdim = (args[2] if len(args) > 2 else kwargs.get("keepdim", False))
        count = 1
        for d in dims:
            if isinstance(x.shape[d], str):
                if target == "aten.mean.dim":
                    return f"{target} over a dim of run-time extent"
            else:
                count *= x.shape[d]
        acc = dtype  # the recorded result dtype (f32 where the model upcasts)
        # Loops in x's memory order where x is a permuted view of all its
        # source's dims (a channels-last activation); else x's dims.
        # The kept dims stay in order: the result is written contiguous.
        loop = list(range(rank))
        if len(x.src_shape) == rank and None not in x.index:
            kept = [x.index[k] for k in range(rank) if k not in dims]
            if kept == sorted(kept):
                loop = list(x.index)
        iters = ['"reduction"' if loop.index(j) in dims else '"parallel"'
                 for j in range(rank)]
        in_map = self.input_map(x, loop, rank)
        out_exprs = [("0" if keepdim else None) if k in dims else
                     f"d{loop[k]}" for k in range(rank)]
        out_exprs = [e for e in out_exprs if e is not None]
        all_dims = ", ".join(f"d{k}" for k in range(rank))
        out_map = f"affine_map<({all_dims}) -> ({', '.join(out_exprs)})>"
        zero = self.fresh("zero")
        self.emit(f"{zero} = arith.constant 0.0 : {acc}")
        init = self.empty(shape, acc)
        filled = self.fresh("init")
        ty = tensor_type(shape, acc)
        self.emit(f"{filled} = linalg.fill ins({zero} : {acc}) outs({init} : "
                  f"{ty}) -> {ty}")
        body = []
        v = self.cast("%a0", x.dtype, acc, body)
        body.append(f"%s = arith.addf {v}, %out : {acc}")
        ssa = self.generic(_ident(n["name"])[:12] + "_", [in_map, out_map],
                           iters, [x], shape, acc, filled,
                           [f"%a0: {x.dtype}", f"%out: {acc}"], body, "%s",
                           node=n["name"])
        self.values[n["name"]] = Value(ssa, shape, acc)
        if target == "aten.mean.dim":
            mean = dict(n, name=n["name"] + "_mean")
            self.elementwise(mean, "div", [self.values[n["name"]], float(count)],
                             shape, acc)
            self.values[n["name"]] = self.values[mean["name"]]
        return None


def physical_order(shape, stride):
    """The dims of a tensor in memory order (outermost first) when its
    strides are a dense permutation of them that is not the identity (a
    channels-last tensor read as [B, C, H, W]); else the identity."""
    rank = len(shape)
    identity = list(range(rank))
    if not stride or len(stride) != rank or not all(
            isinstance(v, int) for v in stride):
        return identity
    perm = sorted(identity, key=lambda d: (-stride[d], d))
    # A run-time extent only outermost (a dynamic batch: [s0, H, W, C]).
    if any(isinstance(shape[d], str) for d in perm[1:]):
        return identity
    expected = 1
    for d in reversed(perm):
        if shape[d] != 1 and stride[d] != expected:
            return identity
        expected *= 1 if isinstance(shape[d], str) else shape[d]
    moved = [d for d in perm if shape[d] != 1]
    if moved == sorted(moved):
        return identity
    return perm


def _permutation_of(v):
    """The logical dims of Value v in its tensor's order, where v reads
    every dim of its tensor once in another order; else None."""
    if not v.is_view() or len(v.src_shape) != len(v.shape) or \
            None in v.index or sorted(v.index) != list(range(len(v.shape))):
        return None
    return [v.index.index(k) for k in range(len(v.shape))]


def _loop_order(tensors, shape, recorded):
    """The order of an elementwise step's loops (of its logical dims):
      1. the logical order where a full-size input (of the result's
         `shape`) is stored so (or there is none);
      2. else the result's `recorded` memory order where that reads one in
         its stored order (Inductor's channels-last activations [N, C, H, W]
         written [N, H, W, C]; GroupNorm's [N, G, C/G, H*W] view of them
         [N, H*W, G, C/G]);
      3. else the stored order of the first full-size input stored as a
         permutation (torch's decomposition copying a channels-last x to
         NCHW for its kernels: the copy fuses away, the reads stay in
         order).
    Other layouts Inductor picks for intermediates ([B, W, H, C] beside
    [B, H, W, C] inputs) keep the logical order by rule 1."""
    rank = len(shape)
    identity = list(range(rank))
    full = [t for t in tensors if list(t.shape) == list(shape) and
            len(t.src_shape) == rank and None not in t.index]

    def in_order(t, order):
        dims = [t.index[d] for d in order]
        return dims == sorted(dims)

    if not full or any(in_order(t, identity) for t in full):
        return identity
    if recorded != identity and any(in_order(t, recorded) for t in full):
        return recorded
    for t in full:
        if sorted(t.index) == identity:
            return [t.index.index(k) for k in range(rank)]
    return identity


def _ident(name):
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return out if out and not out[0].isdigit() else "v" + out


def _refs(a):
    if isinstance(a, dict):
        if "node" in a:
            return [a["node"]]
        return [r for v in a.values() for r in _refs(v)]
    if isinstance(a, (list, tuple)):
        return [r for v in a for r in _refs(v)]
    return []


def import_graph(graph, name=None):
    """(MLIR text of one func.func, remarks) for a recorded graph (a dict,
    or JSON text)."""
    if isinstance(graph, str):
        graph = json.loads(graph)
    imp = Importer(graph, name)
    return imp.run(), imp.remarks


def import_region(graph, name=None):
    """(MLIR text, per result returned in memory order: its node -> its
    logical dims in that order) for a region's graph."""
    imp = Importer(graph, name)
    return imp.run(), imp.result_perms


def main(argv=None):
    import argparse
    p = argparse.ArgumentParser(prog="python3 -m norm_opt.fx_import",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("graph", help="a recorded graph (JSON)")
    p.add_argument("--name", default=None, help="the function's name")
    p.add_argument("--remarks", action="store_true",
                   help="print what became a boundary, on stderr")
    args = p.parse_args(argv)
    with open(args.graph) as f:
        text, remarks = import_graph(json.load(f), args.name)
    sys.stdout.write(text)
    if args.remarks:
        for r in remarks:
            print(f"remark: {r}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ImportError_ as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
