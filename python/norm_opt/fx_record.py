#===- fx_record.py - torch's post-grad ATen graphs as JSON ----------------===#
"""Records the graphs Inductor hands to a post-grad pass in the format
norm_opt.fx_import reads (FORMAT 1; fx_import's docstring describes it), so
that the importer and the recognition pass run on real models' graphs in
CI, where there is no torch. Needs torch.

    with norm_opt.fx_record.recording() as graphs:
        torch.compile(model)(x).sum().backward()
    # graphs: one dict per graph Inductor compiled (forward, backward)
"""

import contextlib

import torch

from .fx_import import FORMAT


def _size(d):
    """A size: an int, or the name of its symbol ("s0")."""
    if isinstance(d, torch.SymInt):
        expr = d.node.expr
        return int(expr) if expr.is_number else str(expr)
    return int(d)


def _encode(a):
    if isinstance(a, torch.fx.Node):
        return {"node": a.name}
    if isinstance(a, torch.dtype):
        return {"dtype": str(a).split(".")[-1]}
    if isinstance(a, torch.SymInt):
        return {"sym": str(a.node.expr)}
    if isinstance(a, (bool, int, float, str)) or a is None:
        return a
    if isinstance(a, (list, tuple)):
        return [_encode(x) for x in a]
    if isinstance(a, dict):
        return {str(k): _encode(v) for k, v in a.items()}
    return {"other": str(a)}


def graph_to_json(graph, name="graph"):
    """One torch.fx.Graph (with FakeTensor metadata) as a FORMAT 1 dict."""
    nodes = []
    for n in graph.nodes:
        entry = {"name": n.name, "op": n.op}
        if n.op == "call_function":
            entry["target"] = (str(n.target) if isinstance(
                n.target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket))
                else getattr(n.target, "__name__", str(n.target)))
        entry["args"] = _encode(n.args)
        if n.kwargs:
            entry["kwargs"] = _encode(dict(n.kwargs))
        val = n.meta.get("val")
        if isinstance(val, torch.Tensor):
            entry["shape"] = [_size(d) for d in val.shape]
            entry["dtype"] = str(val.dtype).split(".")[-1]
            entry["stride"] = [_size(d) for d in val.stride()]
        elif isinstance(val, (list, tuple)):
            entry["results"] = [
                {"shape": [_size(d) for d in v.shape],
                 "dtype": str(v.dtype).split(".")[-1]}
                if isinstance(v, torch.Tensor) else None for v in val]
        nodes.append(entry)
    return {"format": FORMAT, "name": name, "nodes": nodes}


@contextlib.contextmanager
def recording():
    """Records every post-grad graph Inductor compiles while it is active
    (after any post-grad pass already installed), into the list it yields.
    Inductor's graph cache is off meanwhile (a cached graph runs no pass)."""
    from torch._inductor import config as inductor_config
    from torch._inductor.custom_graph_pass import CustomGraphPass

    graphs = []
    before = inductor_config.post_grad_custom_post_pass

    class _Record(CustomGraphPass):
        def __call__(self, graph):
            if before is not None:
                before(graph)
            graphs.append(graph_to_json(graph, f"graph{len(graphs)}"))

        def uuid(self):
            return ("norm_opt.fx_record", len(graphs))

    saved = (inductor_config.fx_graph_cache,
             torch._functorch.config.enable_autograd_cache)
    inductor_config.post_grad_custom_post_pass = _Record()
    inductor_config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    try:
        yield graphs
    finally:
        inductor_config.post_grad_custom_post_pass = before
        (inductor_config.fx_graph_cache,
         torch._functorch.config.enable_autograd_cache) = saved
