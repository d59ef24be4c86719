#===- signature.py - What a compiled library's functions take -------------===#
"""The signature of a library `norm-opt compile --emit=lib -o libX.so`
wrote: from libX.json (written beside it) or, for libraries built without
one, from the C header libX.h. Both give the same FunctionSignature; the
header leaves one thing open: a 1-D tensor whose length could be rows or
cols (both dynamic) gets layout "rows_or_cols"."""

import dataclasses
import json
import re

from .errors import SignatureError

# MLIR element type -> the dtype name torch / numpy use.
DTYPE_NAMES = {
    "f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16",
    "i64": "int64", "i32": "int32", "i16": "int16", "i8": "int8",
    "i1": "bool",
}
ELEMENT_BYTES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8,
                 "i32": 4, "i16": 2, "i8": 1, "i1": 1}
LAYOUTS = ("rows_by_cols", "rows", "cols", "scalar", "unused",
           "rows_or_cols", "channels_first", "batch_cols", "slab_rows",
           "slab_cols")


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    name: str            # "arg0", "res1": the C parameter
    role: str            # "input" or "output"
    index: int           # position among the inputs / outputs
    type: str            # the MLIR type, "tensor<?x256xbf16>"
    dtype: str           # the MLIR element type, "bf16"
    element_bytes: int
    shape: tuple         # -1 for a dynamic dim
    layout: str          # one of LAYOUTS (see docs/compile.md)
    row_stride: str = None  # the stride parameter of a rows_by_cols tensor
    domain: int = 0      # the [rows, cols] domain (group) it follows
    col_stride: str = None  # the stride parameter of a channels_first one

    @property
    def stride_param(self):
        """The launcher's stride parameter of a full (strided) tensor."""
        return self.row_stride if self.layout == "rows_by_cols" \
            else self.col_stride

    @property
    def dtype_name(self):
        """"bfloat16", "float32", ... (torch.bfloat16 prints as that)."""
        return DTYPE_NAMES.get(self.dtype, self.dtype)

    def describe(self):
        return f"{self.name} ({self.role} {self.index}, {self.type})"


@dataclasses.dataclass(frozen=True)
class FunctionSignature:
    name: str
    tensors: tuple       # inputs, then outputs, in parameter order
    params: tuple        # every C parameter name, in order
    # The (rows, cols) parameter names of each domain: one, or one pair per
    # group when the function's groups have different domains; batched
    # rows (adaLN) add a third, batch.
    domains: tuple = (("rows", "cols"),)
    # The dim of the full tensors that is N, per domain (None: the last).
    n_dims: tuple = ()
    # Batched rows: the leading dims that are samples, per domain (0: none).
    batch_ranks: tuple = ()

    def n_dim(self, domain):
        return self.n_dims[domain] if domain < len(self.n_dims) else None

    def batch_rank(self, domain):
        return self.batch_ranks[domain] if domain < len(self.batch_ranks) \
            else 0

    @property
    def inputs(self):
        return tuple(t for t in self.tensors if t.role == "input")

    @property
    def outputs(self):
        return tuple(t for t in self.tensors if t.role == "output")

    @property
    def strided(self):
        return tuple(t for t in self.tensors
                     if t.layout in ("rows_by_cols", "channels_first"))

    def check(self):
        """Raises SignatureError unless the parameters are those the
        launcher ABI gives these tensors (docs/compile.md)."""
        expected = ([t.name for t in self.tensors] +
                    [p for pair in self.domains for p in pair] +
                    [t.stride_param for t in self.strided] + ["stream"])
        if list(self.params) != expected:
            raise SignatureError(
                f"{self.name}: parameters {list(self.params)} are not the "
                f"launcher ABI's {expected}")
        if not self.strided:
            raise SignatureError(f"{self.name}: no [rows, cols] tensor")
        for t in self.tensors:
            if not 0 <= t.domain < len(self.domains):
                raise SignatureError(f"{self.name}: {t.name} follows domain "
                                     f"{t.domain} of {len(self.domains)}")
            if t.layout not in LAYOUTS:
                raise SignatureError(f"{self.name}: {t.name} has unknown "
                                     f"layout '{t.layout}'")
        return self


def _parse_type(text):
    """("bf16", (-1, 256)) for "tensor<?x256xbf16>", ("f32", ()) for
    "tensor<f32>" or "f32"."""
    m = re.fullmatch(r"tensor<(.*)>", text.strip())
    body = m.group(1) if m else text.strip()
    parts = body.split("x")
    dims, element = parts[:-1], parts[-1]
    try:
        shape = tuple(-1 if d == "?" else int(d) for d in dims)
    except ValueError:
        raise SignatureError(f"cannot read the type '{text}'") from None
    return element, shape


def parse_json(text, source="<json>"):
    """{name: FunctionSignature} from the JSON signature file's text."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise SignatureError(f"{source}: not JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != "norm-opt-library":
        raise SignatureError(f"{source}: not a norm-opt library signature "
                             "(format != 'norm-opt-library')")
    if doc.get("version") != 1:
        raise SignatureError(f"{source}: signature version "
                             f"{doc.get('version')} is not 1")
    functions = {}
    try:
        for f in doc["functions"]:
            tensors = tuple(
                TensorSpec(name=t["name"], role=t["role"], index=t["index"],
                           type=t["type"], dtype=t["dtype"],
                           element_bytes=t["element_bytes"],
                           shape=tuple(t.get("shape", ())),
                           layout=t["layout"],
                           row_stride=t.get("row_stride"),
                           domain=t.get("domain", 0),
                           col_stride=t.get("col_stride"))
                for t in f["tensors"])
            domains = tuple((d["rows"], d["cols"])
                            + ((d["batch"],) if "batch" in d else ())
                            for d in f.get("domains",
                                           [{"rows": "rows", "cols": "cols"}]))
            n_dims = tuple(d.get("n_dim") for d in f.get("domains", []))
            batch_ranks = tuple(d.get("batch_rank", 0)
                                for d in f.get("domains", []))
            sig = FunctionSignature(f["name"], tensors, tuple(f["params"]),
                                    domains, n_dims, batch_ranks)
            functions[sig.name] = sig.check()
    except (KeyError, TypeError) as e:
        raise SignatureError(f"{source}: malformed signature ({e!r})") \
            from None
    return functions


_DOC = re.compile(r"/\* @(\w+): device pointers\n(.*?)\*/", re.S)
_DOC_TENSOR = re.compile(r"\*\s+(arg|res)(\d+): (\S+)")
_PROTO = re.compile(r"^int (\w+)\(([^)]*void \*stream)\);", re.M)


def parse_header(text, source="<header>"):
    """{name: FunctionSignature} from the generated C header's text."""
    docs = {m.group(1): m.group(2) for m in _DOC.finditer(text)}
    functions = {}
    for m in _PROTO.finditer(text):
        name, params = m.group(1), [p.strip() for p in m.group(2).split(",")]
        names = [re.split(r"[ *]", p)[-1] for p in params]
        if any(n.endswith("_col_stride") for n in names):
            raise SignatureError(f"{source}: {name} has a channels-first "
                                 "group; load it with its JSON signature")
        if name not in docs:
            raise SignatureError(f"{source}: no comment with the tensor "
                                 f"types of {name}")
        if "rows0" in names:
            raise SignatureError(f"{source}: {name} has groups of several "
                                 "domains; load it with its JSON signature")
        if "batch" in names:
            raise SignatureError(f"{source}: {name} has batched rows "
                                 "(adaLN); load it with its JSON signature")
        types = {f"{kind}{i}": t for kind, i, t in
                 _DOC_TENSOR.findall(docs[name])}
        tensors = []
        full_shape = None
        for pname in names:
            if not re.fullmatch(r"(arg|res)\d+", pname):
                continue
            if pname not in types:
                raise SignatureError(f"{source}: {name}: no type for "
                                     f"{pname}")
            dtype, shape = _parse_type(types[pname])
            strided = f"{pname}_row_stride" in names
            if strided and full_shape is None:
                full_shape = shape
            tensors.append([pname, dtype, shape, strided, types[pname]])
        if full_shape is None:
            raise SignatureError(f"{source}: {name} has no row stride "
                                 "parameter (not a norm-opt launcher?)")
        rows, cols = full_shape[:-1], full_shape[-1]
        specs = []
        counters = {"arg": 0, "res": 0}
        for pname, dtype, shape, strided, mlir_type in tensors:
            kind = pname[:3]
            if strided:
                layout = "rows_by_cols"
            elif shape == ():
                layout = "scalar"
            elif shape == (cols,) and shape == rows:
                layout = "rows_or_cols"
            elif shape == (cols,):
                layout = "cols"
            elif shape == rows or (len(shape) == len(rows) and all(
                    a == b or a == -1 or b == -1
                    for a, b in zip(shape, rows))):
                layout = "rows"
            else:
                layout = "unused"
            specs.append(TensorSpec(
                name=pname, role="input" if kind == "arg" else "output",
                index=counters[kind], type=mlir_type, dtype=dtype,
                element_bytes=ELEMENT_BYTES.get(dtype, 0), shape=shape,
                layout=layout,
                row_stride=f"{pname}_row_stride" if strided else None))
            counters[kind] += 1
        sig = FunctionSignature(name, tuple(specs), tuple(names))
        functions[name] = sig.check()
    if not functions:
        raise SignatureError(f"{source}: no launcher prototypes found")
    return functions
