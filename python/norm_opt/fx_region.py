#===- fx_region.py - the regions of a torch graph the pass fuses ----------===#
"""Region selection (issue 40, item 2), without torch: which parts of a
recorded ATen graph (FORMAT 1, norm_opt.fx_import) become one launch of a
norm-opt kernel group. The recognition pass decides; this module only asks.

The steps, one function each:
  1. `components`: the nodes the importer writes as ops (`compute`) and as
     views or no-op casts (`transparent`); the compute nodes joined through
     their uses, views looked through, form connected components; those
     with a reduction are the candidate regions. Matmuls, convolutions,
     attention, collectives and every op the importer does not cover are
     not compute nodes, so they end the regions.
  2. `subgraph`: one region as a graph of its own: the values it reads are
     placeholders, the views it reads through come with it, and the compute
     nodes read outside it (through views or not) are its outputs. A
     small input (a row or column operand) laid out as a permutation of its
     dims is declared contiguous: the caller passes a contiguous copy.
  3. `refine`: the region imported (each op located by its node's name) and
     run through --norm-fuse-mixed-reductions. The fused op's location lists
     its members (a FusedLoc), and every op left outside a group keeps its
     node's name. A region that is exactly one group is done; otherwise
     each group's members are a region of their own, asked again, and
     nodes no group takes stay Inductor's. A region without a group is
     dropped with the pass's remark.
The regions returned are lists of compute node names; `subgraph` gives
their inputs and outputs (node names), in order, for the caller's rewrite.
"""

import collections
import math
import re
import subprocess

from . import fx_import

VIEW_TARGETS = set(fx_import.VIEWS) | set(fx_import.CASTS)


class Region:
    """One region: its compute nodes, and the graph `subgraph` made of it
    (inputs, outputs: node names; mlir: the imported function)."""

    def __init__(self, compute, inputs, outputs, graph, mlir, fused,
                 result_perms=None):
        self.compute, self.inputs, self.outputs = compute, inputs, outputs
        self.graph, self.mlir, self.fused = graph, mlir, fused
        self.result_perms = result_perms or {}

    @property
    def output_perms(self):
        """Per output: its dims in the order the launch writes them
        (channels-last results in memory order; the identity for most)."""
        by_name = {n["name"]: n for n in self.graph["nodes"]}
        return [self.result_perms.get(
                    o, list(range(len(by_name[o]["shape"]))))
                for o in self.outputs]

    @property
    def input_perms(self):
        """Per input: its dims in memory order (the launch reads each input
        permuted so, contiguous; the identity for most)."""
        by_name = {n["name"]: n for n in self.graph["nodes"]}
        return [fx_import.physical_order(by_name[i]["shape"],
                                         by_name[i].get("stride"))
                for i in self.inputs]

    def __repr__(self):
        return (f"Region({len(self.compute)} ops, {len(self.inputs)} inputs, "
                f"{len(self.outputs)} outputs)")


_CLASSIFIED = {}


def classify(graph):
    """(compute, transparent, importer) for the whole graph: the nodes that
    become ops, and the views / same-dtype casts that write nothing (kept
    for the graph last asked about: every region asks again)."""
    key = id(graph)
    if key not in _CLASSIFIED or _CLASSIFIED[key][0] is not graph:
        _CLASSIFIED.clear()
        _CLASSIFIED[key] = (graph, _classify(graph))
    return _CLASSIFIED[key][1]


def _classify(graph):
    imp = fx_import.Importer(graph)
    imp.run()
    written = set(imp.located)
    compute = [n for n in imp.imported if n in written]
    transparent = {n for n in imp.imported if n not in written}
    return compute, transparent, imp


def _users(graph):
    users = {}
    for n in graph["nodes"]:
        for ref in set(fx_import._refs(n.get("args", [])) +
                       fx_import._refs(n.get("kwargs", {}))):
            users.setdefault(ref, []).append(n["name"])
    return users


def beyond(graph, importable):
    """Per node: the nodes reached from it along a path through at least one
    op the importer does not take (a matmul, attention, ...), as a bitset
    over the node order. Two nodes one of which is beyond the other must
    not share a region: the pass, which sees such ops only as function
    arguments and results, would make a region that feeds itself."""
    nodes = graph["nodes"]
    index = {n["name"]: i for i, n in enumerate(nodes)}
    users = _users(graph)
    reach, past = {}, {}
    for n in reversed(nodes):
        name = n["name"]
        r = p = 0
        for u in users.get(name, []):
            if u not in index:
                continue
            r |= (1 << index[u]) | reach[u]
            # A user the importer does not take: all it reaches is beyond.
            p |= past[u] if u in importable else (1 << index[u]) | reach[u]
        reach[name], past[name] = r, p
    return past, index


def components(graph):
    """Step 1: the candidate regions (lists of compute node names, in graph
    order), each connected and holding at least one reduction."""
    compute, transparent, _ = classify(graph)
    by_name = {n["name"]: n for n in graph["nodes"]}
    parent = {c: c for c in compute}

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    def bases(ref, seen):
        """The compute nodes `ref` reads, through views."""
        if ref in parent:
            return [ref]
        if ref in transparent and ref not in seen:
            seen.add(ref)
            n = by_name[ref]
            return [b for r in fx_import._refs(n.get("args", []))
                    for b in bases(r, seen)]
        return []

    def outside(ref, seen):
        """The values from outside the compute nodes `ref` reads."""
        if ref in parent:
            return []
        if ref in transparent and ref not in seen:
            seen.add(ref)
            n = by_name[ref]
            return [o for r in fx_import._refs(n.get("args", []))
                    for o in outside(r, seen)]
        return [ref] if ref in by_name else []

    # Joined: a compute node and what it reads; compute nodes that read one
    # tensor of two or more dims from outside (x, dy, a statistic: what the
    # pass's groups share; a weight is left out). Two sets join only where
    # neither is beyond the other (`beyond`).
    past, index = beyond(graph, set(compute) | transparent)
    members = {c: 1 << index[c] for c in compute}
    ahead = {c: past[c] for c in compute}

    def join(a, b):
        ra, rb = find(a), find(b)
        if ra == rb or ahead[ra] & members[rb] or ahead[rb] & members[ra]:
            return
        parent[ra] = rb
        members[rb] |= members[ra]
        ahead[rb] |= ahead[ra]

    readers = {}
    for c in compute:
        n = by_name[c]
        for ref in fx_import._refs(n.get("args", [])):
            for b in bases(ref, set()):
                join(b, c)
            for o in outside(ref, set()):
                readers.setdefault(o, []).append(c)
    for o, cs in readers.items():
        if len(by_name[o].get("shape", [])) >= 2:
            for c in cs[1:]:
                join(c, cs[0])
    groups = {}
    for c in compute:
        groups.setdefault(find(c), []).append(c)
    return [members for members in groups.values()
            if any(by_name[m].get("target") in fx_import.REDUCTIONS
                   for m in members)]


def subgraph(graph, compute, name="region", copies=()):
    """Step 2: (graph, inputs, outputs) of the region `compute` (names).
    `copies`: (input, strides) pairs, inputs declared laid out so (the
    caller passes such a copy); small permuted inputs are declared
    contiguous."""
    _, transparent, _ = classify(graph)
    by_name = {n["name"]: n for n in graph["nodes"]}
    users = _users(graph)
    compute_set = set(compute)
    include, inputs = set(compute), []

    def visit(ref):
        if ref in include or ref in inputs:
            return
        if ref in transparent:
            include.add(ref)
            for r in fx_import._refs(by_name[ref].get("args", [])):
                visit(r)
        else:
            inputs.append(ref)

    for c in compute:
        for r in fx_import._refs(by_name[c].get("args", [])) + \
                fx_import._refs(by_name[c].get("kwargs", {})):
            visit(r)

    def escapes(ref, seen):
        for u in users.get(ref, []):
            if u in compute_set:
                continue
            if u in transparent and u not in seen:
                seen.add(u)
                if escapes(u, seen):
                    return True
            elif u not in transparent:
                return True
        return False

    order = {n["name"]: i for i, n in enumerate(graph["nodes"])}
    inputs.sort(key=order.get)
    outputs = [_through_reshape(c, by_name, users, compute_set, transparent,
                                inputs)
               for c in sorted(compute, key=order.get) if escapes(c, set())]
    include.update(outputs)
    nodes = []
    largest = max((_numel(by_name[i].get("shape")) or 0 for i in inputs),
                  default=0)
    for ref in inputs:
        src = by_name[ref]
        node = {"name": ref, "op": "placeholder", "args": []}
        for key in ("shape", "dtype", "stride"):
            if key in src:
                node[key] = src[key]
        # A small input laid out as a permutation of its dims (ConvNeXt's
        # per-row statistics are [B, W, H] in memory, its activations
        # [B, H, W, C]) is passed as a contiguous copy: a copy of a row or
        # column input is cheap, reading it permuted is a transposing map
        # the pass refuses.
        numel = _numel(src.get("shape"))
        if ref in dict(copies):
            node["stride"] = list(dict(copies)[ref])
        elif _permuted(src) and 4 * numel <= largest:
            node["stride"] = contiguous_strides(src["shape"])
        nodes.append(node)
    nodes += [by_name[n] for n in sorted(include, key=order.get)]
    nodes.append({"name": "output", "op": "output",
                  "args": [[{"node": o} for o in outputs]]})
    sub = {"format": fx_import.FORMAT, "name": name, "nodes": nodes}
    # Symbolic sizes a view reads are placeholders too, but not tensors.
    return sub, [i for i in inputs if "shape" in by_name[i]], outputs


def _through_reshape(c, by_name, users, compute, transparent, inputs):
    """The output standing for compute node c: c, or the one reshape all
    that reads c outside the region goes through, where that reshape is
    stored like one of the region's inputs and c is not (GroupNorm's dx,
    computed [N, G, C/G, H*W] and read as x's [N, C, H, W]): the launch's
    full tensors then have one shape."""
    outside = [u for u in users.get(c, []) if u not in compute]
    if len(outside) != 1 or outside[0] not in transparent or \
            by_name[outside[0]].get("target") not in fx_import.RESHAPES:
        return c
    view = outside[0]
    nonunit = [[d for d in by_name[n].get("shape", []) if d != 1]
               for n in (c, view)]
    if nonunit[0] == nonunit[1]:
        return c  # unit dims only (a keepdim sum's [1, N] as [N])
    # Compared as the inputs are stored and, for the torch decomposition's
    # NCHW copies (which the importer writes in x's stored order), as they
    # are shaped.
    shapes = {tuple(_stored_shape(by_name[i])) for i in inputs} | \
        {tuple(by_name[i].get("shape", [])) for i in inputs}
    if tuple(_stored_shape(by_name[c])) in shapes or \
            tuple(by_name[c].get("shape", [])) in shapes or \
            (tuple(_stored_shape(by_name[view])) not in shapes and
             tuple(by_name[view].get("shape", [])) not in shapes):
        return c
    return view


def _stored_shape(node):
    shape = node.get("shape", [])
    return [shape[p] for p in fx_import.physical_order(shape,
                                                       node.get("stride"))]


def _numel(shape):
    """The element count of a static shape; None when a size is symbolic."""
    if not shape or not all(isinstance(d, int) for d in shape):
        return None
    return math.prod(shape)


def _permuted(node):
    """A static tensor laid out as a permutation of its dims."""
    shape = node.get("shape")
    return (bool(_numel(shape)) and "stride" in node and
            fx_import.physical_order(shape, node["stride"])
            != list(range(len(shape))))


def contiguous_strides(shape):
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return strides[::-1]


_FUSED = re.compile(r'norm\.mixed_reduction\b.*?\)\s*loc\(fused\[(.*?)\]\)\s*$',
                    re.S | re.M)
_MEMBER = re.compile(r'"([^"]+)"(?!:)')
_LEFT = re.compile(r'^\s*%\S+ = linalg\.generic\b.*?\}\s*->\s*tensor<[^>]*>\s*'
                   r'loc\("([^"]+)"\)\s*$', re.S | re.M)


def parse_fusion(text):
    """(groups, left): the members of each fused op (node names, from its
    FusedLoc) and the located ops no group took, in the pass's output
    printed with -mlir-print-debuginfo -mlir-print-local-scope."""
    groups = []
    for block in _FUSED.findall(text):
        groups.append(_MEMBER.findall(block))
    # A generic's region nests; only ops printed at the function's level
    # (4 spaces in) are left outside a group.
    left = [m.group(1) for m in _LEFT.finditer(text)
            if m.group(0).startswith("    %")
            and not m.group(0).startswith("     ")]
    return groups, left


# What runs before recognition: GroupNorm's reshapes and two-level sums
# (torch's decomposition) to the one domain the pass fuses.
SPELLING_PASSES = ("--norm-propagate-reshapes", "--norm-merge-nested-sums")


def fuse_with(norm_opt, row_only=True):
    """The oracle `refine` asks: runs `norm_opt` (a path) over an imported
    function; returns (groups, left, remarks, fused MLIR). Backward graphs
    take row-only groups too (a norm without affine parameters).
    Of the multi-axis groups, those the GPU lowering takes fuse (adaLN's
    batched rows, GroupNorm's slabs); any other stays unfused, with its
    remark."""
    option = "remarks=true multi-axis=gpu" + (
        " row-only=true" if row_only else "")
    def fuse(mlir):
        proc = subprocess.run(
            [norm_opt, "-", *SPELLING_PASSES,
             f"--norm-fuse-mixed-reductions={option}",
             "-mlir-print-debuginfo", "-mlir-print-local-scope",
             "-mlir-print-op-on-diagnostic=false"],
            input=mlir, capture_output=True, text=True)
        remarks = [line for line in proc.stderr.splitlines()
                   if "remark:" in line or "error:" in line]
        if proc.returncode != 0:
            return [], [], remarks or [proc.stderr.strip()], None
        groups, left = parse_fusion(proc.stdout)
        return groups, left, remarks, proc.stdout
    return fuse


def canonical(norm_opt, fused, name="norm_region"):
    """The fused function as the compile takes it: renamed `name`, printed
    by `norm_opt` without locations, so that regions of one spelling and
    shape (every layer of a model) are one text, one library."""
    head, rest = fused.split("func.func @", 1)
    rest = rest.split("(", 1)[1]
    proc = subprocess.run([norm_opt, "-"], capture_output=True, text=True,
                          input=f"{head}func.func @{name}({rest}")
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip())
    return proc.stdout


def refine(graph, candidate, fuse, name="region", log=None, limit=16):
    """Step 3: the Regions the pass makes of one candidate (compute node
    names), each exactly one group. `fuse(mlir) -> (groups, left, remarks, fused)`
    is the oracle (fuse_with: also the fused MLIR, which the Region keeps
    for the compile). `log(text)` gets what was not taken."""
    done, work, seen, retried = [], [(list(candidate), ())], set(), set()
    by_name = {n["name"]: n for n in graph["nodes"]}
    users = _users(graph)

    def attempt(region, copies):
        sub, inputs, outputs = subgraph(graph, region,
                                        f"{name}{len(done)}", copies)
        mlir, perms = fx_import.import_region(sub)
        return _Attempt(sub, inputs, outputs, mlir, *fuse(mlir), perms)

    while work and limit:
        limit -= 1
        region, copies = work.pop(0)
        key = frozenset(region)
        if not region or key in seen:
            continue
        seen.add(key)
        if not any(_is_row_reduction(by_name[c]) for c in region):
            continue  # no row reduction: no group to ask the pass about
        tried = attempt(region, copies)
        # An input read permuted against the others (a full-size one laid
        # out [B, W, C, H] by Inductor's forward beside [B, H, W, C]
        # activations): passed as a copy, contiguous or laid out as another
        # input of its shape, where that removes a transposing read; one
        # input at a time.
        transposing = _transposing(tried.remarks)
        for i in tried.inputs:
            for strides in _layouts(by_name, i, tried.inputs):
                if transposing == 0:
                    break
                other = attempt(region, copies + ((i, strides),))
                if _transposing(other.remarks) < transposing:
                    tried, copies = other, copies + ((i, strides),)
                    transposing = _transposing(tried.remarks)
        (sub, inputs, outputs, mlir, groups, left, pass_remarks, fused,
         perms) = tried
        members = [[m for m in g if m in key] for g in groups]
        if not members and key not in retried:
            # Not fused as a whole: once more without the ops whose tensors
            # follow only some of the row dims (a position embedding added
            # to x, its gradient summed over the batch), which the pass
            # refuses for the whole group; they stay Inductor's.
            retried.add(key)
            narrowed = domain_filter(graph, region)
            if narrowed and len(narrowed) < len(region):
                retried.add(frozenset(narrowed))
                seen.discard(frozenset(narrowed))
                work.append((narrowed, copies))
                continue
        if not members:
            if log:
                log(f"{region[0]}..{region[-1]} ({len(region)} ops): not "
                    f"fused: " + "; ".join(_short(r) for r in pass_remarks
                                          if "not fused" in r or
                                          "error" in r)[:400])
            continue
        if len(members) == 1 and not left:
            done.append(Region(region, inputs, outputs, sub, mlir, fused,
                               perms))
            continue
        if log and left:
            log(f"left to Inductor: {', '.join(left)}")
        order = {c: i for i, c in enumerate(region)}
        keep = [c for c in region if c not in set(left)]
        if len(members) == 1:
            work.append((keep, copies))
            continue
        # Several groups: one region each, with the ops the pass took into
        # no group's location (row statistics folded into a group's
        # payload) going with the group whose members they feed.
        taken = {m for g in members for m in g}
        absorbed = [c for c in keep if c not in taken]
        for g in members:
            feeds = _feeding(users, absorbed, set(g))
            work.append((sorted(set(g) | feeds, key=order.get), copies))
    return done


def _layouts(by_name, name, inputs):
    """Other layouts to try for input `name`: contiguous (if it is not),
    and those of the inputs of its shape laid out otherwise."""
    node = by_name[name]
    if not _numel(node.get("shape")):
        return []
    order = fx_import.physical_order(node["shape"], node.get("stride"))
    out = []
    if _permuted(node):
        out.append(tuple(contiguous_strides(node["shape"])))
    for other in inputs:
        o = by_name[other]
        if (other != name and o.get("shape") == node["shape"]
                and "stride" in o and fx_import.physical_order(
                    o["shape"], o["stride"]) != order
                and tuple(o["stride"]) not in out):
            out.append(tuple(o["stride"]))
    return out


# One import of a region and the pass's answer on it (fuse_with's four).
_Attempt = collections.namedtuple(
    "_Attempt",
    "sub inputs outputs mlir groups left remarks fused output_perms")


def _transposing(remarks):
    return sum("transposing indexing map" in r for r in remarks)


def domain_filter(graph, region):
    """The region without the nodes that read or write a tensor indexed by
    only some of the row dims of the region's widest shape [rows..., N]
    (full, rows [rows..., 1], cols [1..., N] and scalars are kept)."""
    by_name = {n["name"]: n for n in graph["nodes"]}
    shapes = [by_name[c].get("shape", []) for c in region]
    full = max(shapes, key=lambda s: (len(s), shapes.count(s)))

    def fits(shape):
        if len(shape) > len(full):
            return False
        s = [1] * (len(full) - len(shape)) + list(shape)
        same = [a == b for a, b in zip(s, full)]
        unit = [a == 1 for a in s]
        lead_same, lead_unit = all(same[:-1]), all(unit[:-1])
        return (lead_same or lead_unit) and (same[-1] or unit[-1])

    keep = []
    for c in region:
        n = by_name[c]
        operands = [by_name[r].get("shape", []) for r in
                    fx_import._refs(n.get("args", [])) if r in by_name
                    and "shape" in by_name[r]]
        if fits(n.get("shape", [])) and all(fits(s) for s in operands):
            keep.append(c)
    return keep


def _is_row_reduction(node):
    """Whether a node may be a row reduction: a sum or mean over one dim
    that is not the first (a norm's N, last or in the middle). A cheap
    filter before the pass is asked: it decides."""
    if node.get("target") not in fx_import.REDUCTIONS:
        return False
    args = node.get("args", [])
    dims = args[1] if len(args) > 1 else node.get("kwargs", {}).get("dim")
    if not isinstance(dims, list) or len(dims) != 1:
        return False
    return dims[0] != 0


def _feeding(users, candidates, targets):
    """The candidates from which a target is reached (through any nodes;
    `users`: name -> the names of its users)."""
    memo = {}

    def reaches(name, depth=0):
        if name in memo:
            return memo[name]
        memo[name] = False
        hit = name in targets
        if not hit and depth < 64:
            hit = any(reaches(u, depth + 1) for u in users.get(name, []))
        memo[name] = hit
        return hit

    return {c for c in candidates if reaches(c)}


def _short(remark):
    return remark.split("remark: ", 1)[-1]


def select(graph, fuse, log=None):
    """Every region of `graph` the pass fuses (see the module docstring)."""
    out = []
    for i, candidate in enumerate(components(graph)):
        out += refine(graph, candidate, fuse,
                      f"{graph.get('name', 'graph')}_r{i}_", log)
    return out


def main(argv=None):
    import argparse
    import json
    import os
    import sys
    from .compiler import find_norm_opt
    p = argparse.ArgumentParser(
        prog="python3 -m norm_opt.fx_region",
        description="The regions of a recorded graph the recognition pass "
                    "fuses, as the torch.compile route selects them.")
    p.add_argument("graph", help="a recorded graph (fx_record's JSON)")
    p.add_argument("--norm-opt", default=None, help="norm-opt to ask")
    p.add_argument("--remarks", action="store_true",
                   help="print why the rest was left alone")
    p.add_argument("--emit-dir", default=None,
                   help="write each distinct region's MLIR (as the route "
                        "compiles it) to DIR/region<i>.mlir")
    args = p.parse_args(argv)
    norm_opt = find_norm_opt(args.norm_opt)
    with open(args.graph) as f:
        graph = json.load(f)
    remarks = []
    regions = select(graph, fuse_with(norm_opt), log=remarks.append)
    texts = []
    for i, r in enumerate(regions):
        text = canonical(norm_opt, r.fused)
        if text not in texts:
            texts.append(text)
            if args.emit_dir:
                os.makedirs(args.emit_dir, exist_ok=True)
                with open(os.path.join(args.emit_dir,
                                       f"region{len(texts) - 1}.mlir"),
                          "w") as f:
                    f.write(text)
        print(f"region {i}: {len(r.compute)} ops ({r.compute[0]}.."
              f"{r.compute[-1]}), inputs {', '.join(r.inputs)}; outputs "
              f"{', '.join(r.outputs)}; library {texts.index(text)}")
    if args.remarks:
        for text in remarks:
            print(f"remark: {text}")
    print(f"regions: {len(regions)} ({len(texts)} distinct)")
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(main())
