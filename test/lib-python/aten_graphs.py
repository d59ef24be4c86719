"""Generated norm backward graphs in the form torch.compile hands the route
(fx_record's FORMAT 1: Inductor's post-grad ATen, after decomposition), in
the styles norm_diffgen draws its MLIR programs from: LayerNorm / RMSNorm,
a weight, a weight and a bias, none (OLMo), a zero-centred weight in fp32
(Gemma's 1 + w), 16-bit storage with fp32 math or fp32 throughout, one or
two row dims, dW summed with keepdim or not, a loss scale on dy, a residual
gradient added to dx. recorded_regions.py --generated K imports K of them,
asks the pass (each must become exactly one region) and compares the CPU
pipeline with a float64 evaluation of the generated nodes.

Standard library only.
"""

import random


class Builder:
    def __init__(self, name):
        self.name, self.nodes, self.count = name, [], 0

    def arg(self, name, shape, dtype):
        self.nodes.append({"name": name, "op": "placeholder", "args": [],
                           "shape": list(shape), "dtype": dtype})
        return name

    def op(self, target, args, shape, dtype, hint="v"):
        self.count += 1
        name = f"{hint}_{self.count}"
        enc = [{"node": a} if isinstance(a, str) else a for a in args]
        self.nodes.append({"name": name, "op": "call_function",
                           "target": target, "args": enc,
                           "shape": list(shape), "dtype": dtype})
        return name

    def graph(self, outputs):
        return {"format": 1, "name": self.name, "nodes": self.nodes + [
            {"name": "output", "op": "output",
             "args": [[{"node": o} for o in outputs]]}]}


def _style(rng):
    return {
        "kind": rng.choice(["layer", "rms"]),
        "affine": rng.choice(["weight", "weight_bias", "none", "gemma"]),
        "dtype": rng.choice(["bfloat16", "float32"]),
        "rows": rng.choice([[5], [2, 3]]),
        "n": rng.choice([16, 40, 64]),
        "keepdim": rng.choice([True, False]),
        "scale": rng.choice([None, 0.5]),
        "residual": rng.choice([True, False]),
    }


def generate(index, seed="1"):
    """(graph, style) of generated graph `index`."""
    rng = random.Random(f"aten-graphs/{seed}/{index}")
    s = _style(rng)
    if s["kind"] == "rms" and s["affine"] == "weight_bias":
        s["affine"] = "weight"
    return build(s, f"gen{index}"), s


def build(s, name):
    b = Builder(name)
    rows, n, dt = s["rows"], s["n"], s["dtype"]
    full, stat, col = rows + [n], rows + [1], [n]
    f32 = "float32"
    conv = "prims.convert_element_type.default"
    dy = b.arg("tangents_1", full, dt)
    x = b.arg("x", full, dt)
    mean = b.arg("mean", stat, f32) if s["kind"] == "layer" else None
    rstd = b.arg("rstd", stat, f32)
    w = b.arg("weight", col, f32 if s["affine"] == "gemma" else dt) \
        if s["affine"] != "none" else None
    res = b.arg("residual", full, dt) if s["residual"] else None
    if s["scale"] is not None:
        dy = b.op("aten.mul.Tensor", [dy, s["scale"]], full, dt, "scaled")
    # fp32 math on 16-bit storage, as Inductor's decompositions upcast.
    x32 = b.op(conv, [x, {"dtype": f32}], full, f32, "x32") \
        if dt != f32 else x
    dy32 = b.op(conv, [dy, {"dtype": f32}], full, f32, "dy32") \
        if dt != f32 else dy
    if s["kind"] == "layer":
        cent = b.op("aten.sub.Tensor", [x32, mean], full, f32, "cent")
        xhat = b.op("aten.mul.Tensor", [cent, rstd], full, f32, "xhat")
    else:
        xhat = b.op("aten.mul.Tensor", [x32, rstd], full, f32, "xhat")
    if s["affine"] == "gemma":
        w1 = b.op("aten.add.Tensor", [w, 1.0], col, f32, "w1")
        g = b.op("aten.mul.Tensor", [dy32, w1], full, f32, "g")
    elif w is not None:
        w32 = b.op(conv, [w, {"dtype": f32}], col, f32, "w32") \
            if dt != f32 else w
        g = b.op("aten.mul.Tensor", [dy32, w32], full, f32, "g")
    else:
        g = dy32
    gx = b.op("aten.mul.Tensor", [g, xhat], full, f32, "gx")
    sgx = b.op("aten.sum.dim_IntList", [gx, [-1], True], stat, f32, "sgx")
    term = b.op("aten.mul.Tensor", [xhat, sgx], full, f32, "term")
    gn = b.op("aten.mul.Tensor", [g, n], full, f32, "gn")
    if s["kind"] == "layer":
        sg = b.op("aten.sum.dim_IntList", [g, [-1], True], stat, f32, "sg")
        inner = b.op("aten.sub.Tensor", [gn, sg], full, f32, "inner")
        inner = b.op("aten.sub.Tensor", [inner, term], full, f32, "inner")
    else:
        inner = b.op("aten.sub.Tensor", [gn, term], full, f32, "inner")
    k = b.op("aten.div.Tensor", [rstd, n], stat, f32, "k")
    dx = b.op("aten.mul.Tensor", [k, inner], full, f32, "dx")
    if dt != f32:
        dx = b.op(conv, [dx, {"dtype": dt}], full, dt, "dx16")
    if res is not None:
        dx = b.op("aten.add.Tensor", [dx, res], full, dt, "dxr")
    outputs = [dx]
    row_dims = list(range(len(rows)))
    wshape = ([1] * len(rows) + col) if s["keepdim"] else col
    if w is not None:
        p = b.op("aten.mul.Tensor", [dy32, xhat], full, f32, "dyx")
        dw = b.op("aten.sum.dim_IntList", [p, row_dims, s["keepdim"]],
                  wshape, f32, "dw")
        outputs.append(dw)
    if s["affine"] == "weight_bias":
        db = b.op("aten.sum.dim_IntList", [dy32, row_dims, s["keepdim"]],
                  wshape, f32, "db")
        outputs.append(db)
    return b.graph(outputs)
