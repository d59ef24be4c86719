#===- compile_route.py - torch.compile's backward graphs through the pass -===#
"""The torch.compile route (issue 40): Inductor's post-grad backward graphs
through the recognition pass. Needs torch; norm_opt.torch installs it
(enable_compile_routing). For each backward graph:

  1. `record`: the graph as fx_record's JSON (shapes, dtypes, symbols);
  2. `fx_region.select`: the regions the pass fuses, each one group (the
     pass is run on each candidate; its FusedLoc names the members);
  3. `compile_region`: each region's MLIR compiled by norm-opt into a
     library (cached on disk by MLIR, chip and compiler; the wheel's
     bundled norm-opt where there is no LLVM) and registered as a key of
     `norm_opt::launch`;
  4. `rewrite`: the region's nodes replaced by one launch whose results
     stand for the region's outputs; the dead nodes go.

Forward graphs are left alone (Inductor's forward stays; a statistic the
forward does not save is recomputed in the group). Any failure leaves the
graph as it was and is a remark (`remarks`, and the log callback), never
an exception in the user's torch.compile.
"""

import json
import logging
import os
import operator
import time

import torch

from . import fx_record, fx_region, kernels
from .compiler import find_norm_opt

_logger = logging.getLogger("norm_opt.compile_route")

TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16,
                "bfloat16": torch.bfloat16, "float64": torch.float64}


class Route:
    """The post-grad pass (a CustomGraphPass). Counters: `graphs` (backward
    graphs seen), `regions` (replaced), `seconds` (time spent in the route,
    compiles included); `remarks`: why anything was left to Inductor."""

    def __init__(self, before, log=None):
        self.before, self.log = before, log
        self.graphs = self.regions = 0
        self.seconds = 0.0
        self.remarks = []

    def remark(self, text):
        self.remarks.append(text)
        _logger.info("%s", text)
        if self.log:
            self.log(text)

    def __call__(self, graph):
        if self.before is not None:
            self.before(graph)
        start = time.perf_counter()
        try:
            if is_backward(graph):
                self.graphs += 1
                self.regions += route_graph(graph, self)
        except Exception as e:  # never the user's torch.compile's problem
            self.remark(f"route failed, graph left as it was: "
                        f"{type(e).__name__}: {e}")
        finally:
            self.seconds += time.perf_counter() - start

    def uuid(self):
        # Inductor's caches key on it: a new route or compiler, new graphs.
        return ("norm_opt.compile_route", 2, kernels.__version__)


def install(log=None):
    from torch._inductor import config as inductor_config
    from torch._inductor.custom_graph_pass import CustomGraphPass

    class _Pass(Route, CustomGraphPass):
        pass

    route = _Pass(inductor_config.post_grad_custom_post_pass, log)
    inductor_config.post_grad_custom_post_pass = route
    return route


def is_backward(graph):
    """AOTAutograd names the incoming gradients tangents_*."""
    return any(n.op == "placeholder" and n.name.startswith("tangents")
               for n in graph.nodes)


def _val(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def route_graph(graph, route):
    """Steps 1-4 on one graph; returns how many regions were replaced.
    $NORM_OPT_ROUTE_DUMP (a directory): each graph is also saved there,
    and the routed graph as text."""
    recorded = fx_record.graph_to_json(graph, "norm_bwd")
    dump = os.environ.get("NORM_OPT_ROUTE_DUMP")
    if dump:
        os.makedirs(dump, exist_ok=True)
        path = os.path.join(dump, f"graph{route.graphs}.json")
        with open(path, "w") as f:
            json.dump(recorded, f)
    try:
        norm_opt = find_norm_opt()
    except Exception as e:
        route.remark(f"no norm-opt to ask: {e}")
        return 0
    regions = fx_region.select(recorded, fx_region.fuse_with(norm_opt),
                               log=route.remark)
    nodes = {n.name: n for n in graph.nodes}
    done = 0
    for region in regions:
        why = check_region(region, nodes)
        if why:
            route.remark(f"{region.compute[0]}..: not replaced: {why}")
            continue
        try:
            key = compile_region(region, nodes)
        except Exception as e:
            route.remark(f"{region.compute[0]}..: not compiled "
                         f"({type(e).__name__}: {e})")
            continue
        rewrite(graph, region, nodes, key)
        done += 1
    if done:
        _stable_toposort(graph)
        graph.eliminate_dead_code()
        graph.lint()
        if dump:  # what Inductor gets
            with open(os.path.join(dump, f"graph{route.graphs}.routed.txt"),
                      "w") as f:
                f.write(str(graph))
    return done


def check_region(region, nodes):
    """Why the region cannot be one launch here, or None."""
    vals = [_val(nodes[i]) for i in region.inputs]
    if not vals or any(not isinstance(v, torch.Tensor) for v in vals):
        return "an input is not a tensor"
    devices = {v.device for v in vals}
    if len(devices) != 1 or next(iter(devices)).type != "cuda":
        return f"inputs on {sorted(map(str, devices))}, not one CUDA device"
    # No input may be computed from the region's own values (through ops
    # outside it, which the pass never saw).
    compute = set(region.compute)
    seen, work = set(), [nodes[c] for c in region.compute]
    while work:
        n = work.pop()
        for u in n.users:
            if u.name not in seen:
                seen.add(u.name)
                work.append(u)
    for i in region.inputs:
        if i in seen and i not in compute:
            return f"input {i} is computed from the region's results"
    return None


def output_dims(region):
    """Per output of the region: (torch dtype, [(input, dim) or (-1,
    size)]), sizes named by a symbol found on an input's dim."""
    by_name = {n["name"]: n for n in region.graph["nodes"]}
    where = {}
    for i, (name, perm) in enumerate(zip(region.inputs,
                                         region.input_perms)):
        shape = by_name[name]["shape"]
        for d, size in enumerate([shape[p] for p in perm]):
            if isinstance(size, str):
                where.setdefault(size, (i, d))
    out = []
    for name, perm in zip(region.outputs, region.output_perms):
        node = by_name[name]
        dims = []
        for size in [node["shape"][p] for p in perm]:
            if isinstance(size, str):
                if size not in where:
                    raise ValueError(f"output {name}: size {size} is no "
                                     "input's")
                dims.append(where[size])
            else:
                dims.append((-1, int(size)))
        out.append((TORCH_DTYPES[node["dtype"]], dims))
    return out


def compile_region(region, nodes):
    """Compiles (or finds cached) the region's library and registers it as
    a key of norm_opt::launch; returns the key."""
    from . import torch as nt
    device = _val(nodes[region.inputs[0]]).device
    chip = nt.chip_of(device)
    # The pass's own output (row-only groups fused, as the route asked),
    # without the graph's names: every layer's region of one spelling and
    # shape is one library.
    function = "norm_region"
    text = fx_region.canonical(find_norm_opt(), region.fused, function)
    lib = kernels.source_library(text, function, chip)
    key = lib.path.parent.name  # the cache entry: function, chip, hash
    if key not in nt._regions:
        fn = lib[function]
        sig = fn.signature
        if (len(sig.inputs) != len(region.inputs)
                or len(sig.outputs) != len(region.outputs)):
            raise ValueError(f"{function}: the library takes "
                             f"{len(sig.inputs)} inputs and "
                             f"{len(sig.outputs)} outputs, the region "
                             f"{len(region.inputs)} and "
                             f"{len(region.outputs)}")
        check_full_shapes(region, sig)
        outputs = output_dims(region)
        nt.save_region_outputs(lib.path, outputs)
        nt.register_region(key, fn, outputs)
    return key


def check_full_shapes(region, sig):
    """The launch takes each domain's extents from its full tensors, which
    must have one shape (unit dims aside): a region whose function reshapes
    one of them inside is refused here, at compile time, not at the call."""
    by_name = {n["name"]: n for n in region.graph["nodes"]}
    names = list(region.inputs) + list(region.outputs)
    perms = list(region.input_perms) + list(region.output_perms)
    shapes = {}
    for spec, name, perm in zip(sig.tensors, names, perms):
        if spec.layout not in ("rows_by_cols", "channels_first"):
            continue
        shape = [by_name[name]["shape"][p] for p in perm]
        shape = [d for d in shape if d != 1]
        first = shapes.setdefault(spec.domain, (name, shape))
        if first[1] != shape:
            raise ValueError(f"full tensors {first[0]} {first[1]} and "
                             f"{name} {shape} of one domain differ in shape")


def rewrite(graph, region, nodes, key):
    """One launch for the region: inserted after its last input, its
    results read where the region's outputs were read outside it; `nodes`
    then names the results (name -> getitem) for the regions after it."""
    compute = set(region.compute)
    inputs = [nodes[i] for i in region.inputs]
    order = {n: k for k, n in enumerate(graph.nodes)}
    last = max(inputs, key=order.get)
    with graph.inserting_after(last):
        launch = graph.call_function(torch.ops.norm_opt.launch.default,
                                     (key, inputs))
    # Inputs in memory order (channels-last read as [B, H, W, C]): a view.
    # A small one the region declares contiguous though it is not (see
    # fx_region.subgraph): a copy, which Inductor makes.
    args = []
    for node, perm in zip(inputs, region.input_perms):
        if perm != list(range(len(perm))):
            with graph.inserting_before(launch):
                view = graph.call_function(torch.ops.aten.permute.default,
                                           (node, perm))
            view.meta["val"] = _val(node).permute(perm)
            node = view
        elif not _val(node).is_contiguous():
            with graph.inserting_before(launch):
                copy = graph.call_function(
                    torch.ops.aten.clone.default, (node,),
                    {"memory_format": torch.contiguous_format})
            copy.meta["val"] = _val(node).clone(
                memory_format=torch.contiguous_format)
            node = copy
        args.append(node)
    launch.args = (key, args)
    # Outputs in memory order (a channels-last dx written [N, H, W, C]):
    # permuted back to the node's dims, a view with the node's strides.
    perms = region.output_perms
    fake = [_val(nodes[o]).permute(p) for o, p in zip(region.outputs, perms)]
    launch.meta["val"] = [_contiguous_like(v) for v in fake]
    prev = launch
    for k, (name, perm) in enumerate(zip(region.outputs, perms)):
        with graph.inserting_after(prev):
            item = graph.call_function(operator.getitem, (launch, k))
        item.meta["val"] = launch.meta["val"][k]
        prev = item
        if perm != list(range(len(perm))):
            back = [perm.index(d) for d in range(len(perm))]
            with graph.inserting_after(prev):
                view = graph.call_function(torch.ops.aten.permute.default,
                                           (item, back))
            view.meta["val"] = item.meta["val"].permute(back)
            item = prev = view
        old = nodes[name]
        old.replace_all_uses_with(
            item, delete_user_cb=lambda user: user.name not in compute)
        # A later region reading this output (the next layer's norm reads
        # this one's dx through the residual) reads the launch's result;
        # the old node would stay alive and Inductor would compute the
        # region over again for it.
        nodes[name] = item


def _contiguous_like(v):
    with v.fake_mode:
        return torch.empty(v.shape, dtype=v.dtype, device=v.device)


def _stable_toposort(graph):
    """Reorders the nodes so that each comes after what it reads, keeping
    the original order otherwise (the launch sits after its last input;
    a user of a region output may have come before that)."""
    order, placed = [], set()
    for start in list(graph.nodes):
        stack = [(start, False)]
        while stack:
            n, ready = stack.pop()
            if n in placed:
                continue
            if ready:
                placed.add(n)
                order.append(n)
                continue
            stack.append((n, True))
            for a in reversed(n.all_input_nodes):
                if a not in placed:
                    stack.append((a, False))
    output = next(n for n in reversed(graph.nodes) if n.op == "output")
    for n in order:
        if n is not output:
            output.prepend(n)
