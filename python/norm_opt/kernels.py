#===- kernels.py - LayerNorm / RMSNorm backward libraries, cached ---------===#
"""The backward kernels norm_opt.torch calls, without torch: the MLIR source
of `layer_norm_backward` / `rms_norm_backward` for a hidden size N and the
activation / weight dtypes, and a disk cache of the compiled libraries keyed
by the source, the compile options and the chip.

Lookup order for a library: the directories of $NORM_OPT_LIBRARY_PATH
(os.pathsep-separated, read-only: libraries compiled ahead of time), the
package's own prebuilt/ directory, then the cache ($NORM_OPT_CACHE_DIR, else
~/.cache/norm_opt), compiling into the cache on a miss. The compiler is the
wheel's bundled norm-opt where the package came from the wheel, so a
training machine with no LLVM compiles on first use (compiler.py says where
else norm-opt is looked for). The cache has a folder per compiler (its
`--version` and size): a new norm-opt never takes an older one's libraries.
Concurrent first calls (DDP ranks) compile each library once: the others
wait on a lock file and take it. Precompile a set ahead of time (for a
machine without norm-opt):

    python3 -m norm_opt.kernels --out DIR --chip sm_90a \\
        --kind layer,rms --hidden 768,1024 --dtype bf16,f32
"""

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import pathlib
import shutil
import sys
import tempfile
import threading

from . import __version__
from .compiler import compile as _compile
from .compiler import find_norm_opt, norm_opt_version
from .errors import NormOptError, NormOptNotFoundError
from .library import Library

FORMAT = 1  # bump when the sources' calling convention changes
KINDS = ("layer", "rms")
# Short names -> MLIR element types.
DTYPES = {"bf16": "bf16", "bfloat16": "bf16", "f16": "f16", "float16": "f16",
          "half": "f16", "f32": "f32", "float32": "f32", "float": "f32"}


def mlir_dtype(dtype):
    """"bf16" for torch.bfloat16 / "bfloat16" / "bf16"."""
    text = str(dtype)
    text = text[len("torch."):] if text.startswith("torch.") else text
    if text not in DTYPES:
        raise ValueError(f"unsupported dtype {dtype} (supported: bfloat16, "
                         "float16, float32)")
    return DTYPES[text]


FUNCTION_NAMES = {"layer": "layer_norm_backward", "rms": "rms_norm_backward"}


def function_name(kind):
    if kind not in FUNCTION_NAMES:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return FUNCTION_NAMES[kind]


def source(kind, n, dtype, weight_dtype=None):
    """The MLIR of one backward function with dynamic rows, static N (None:
    N dynamic too).
    layer: (dy, x, mean, rstd, weight, bias) -> (dx, dweight, dbias);
    rms:   (dy, x, rstd, weight) -> (dx, dweight)."""
    x, w = mlir_dtype(dtype), mlir_dtype(weight_dtype or dtype)
    if n is None:
        n = "?"
    else:
        n = int(n)
        if n < 1:
            raise ValueError(f"hidden size must be >= 1, got {n}")
    name = function_name(kind)
    full, vec = f"tensor<?x{n}x{x}>", f"tensor<{n}x{w}>"
    if kind == "layer":
        return f"""func.func @{name}(%dy: {full}, %x: {full},
    %mean: tensor<?xf32>, %rstd: tensor<?xf32>, %w: {vec}, %b: {vec})
    -> ({full}, {vec}, {vec}) {{
  %dx, %dw, %db = norm.layer_norm_grad %dy, %x, %mean, %rstd
      weight(%w : {vec}) bias(%b : {vec})
      : {full}, tensor<?xf32> -> {full}, {vec}, {vec}
  return %dx, %dw, %db : {full}, {vec}, {vec}
}}
"""
    return f"""func.func @{name}(%dy: {full}, %x: {full}, %rstd: tensor<?xf32>,
    %w: {vec}) -> ({full}, {vec}) {{
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : {vec})
      : {full}, tensor<?xf32> -> {full}, {vec}
  return %dx, %dw : {full}, {vec}
}}
"""


def cache_key(text, chip, options):
    # The package version stands for the compiler's: they ship together.
    blob = json.dumps({"format": FORMAT, "version": __version__,
                       "source": text, "chip": chip, "options": options},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def entry_name(kind, n, dtype, weight_dtype, chip, options):
    """The directory name of one library: readable, and the key."""
    x, w = mlir_dtype(dtype), mlir_dtype(weight_dtype or dtype)
    key = cache_key(source(kind, n, dtype, weight_dtype), chip, options)
    return f"{kind}-{'dyn' if n is None else n}-{x}-{w}-{chip}-{key}"


def cache_dir():
    """The root of the disk cache (one folder per compiler under it)."""
    env = os.environ.get("NORM_OPT_CACHE_DIR")
    if env:
        return pathlib.Path(env)
    return pathlib.Path.home() / ".cache" / "norm_opt"


def compiler_tag(norm_opt=None):
    """The cache folder of one norm-opt: a hash of its `--version` and its
    size (a rebuilt compiler of the same version gets a folder of its own
    as soon as its size changes)."""
    path = find_norm_opt(norm_opt)
    blob = f"{norm_opt_version(path)}|{os.path.getsize(path)}"
    return "compiler-" + hashlib.sha256(blob.encode()).hexdigest()[:16]


def search_path():
    dirs = [pathlib.Path(p) for p in
            os.environ.get("NORM_OPT_LIBRARY_PATH", "").split(os.pathsep) if p]
    dirs.append(pathlib.Path(__file__).parent / "prebuilt")
    return dirs


@contextlib.contextmanager
def _entry_lock(into, name):
    """An exclusive lock per entry (flock on a file beside it): concurrent
    first calls of one library, threads or processes, compile it once."""
    pathlib.Path(into).mkdir(parents=True, exist_ok=True)
    with open(pathlib.Path(into) / f".{name}.lock", "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def build(kind, n, dtype, weight_dtype, chip, options, into, norm_opt=None):
    """Compiles one backward library into the directory `into`/<entry>
    unless it is there (build_source). Returns its path."""
    return build_source(source(kind, n, dtype, weight_dtype),
                        entry_name(kind, n, dtype, weight_dtype, chip,
                                   options),
                        f"lib{function_name(kind)}.so", chip, options, into,
                        norm_opt)


def build_source(text, name, libname, chip, options, into, norm_opt=None):
    """Compiles the MLIR `text` into `into`/`name`/`libname` unless it is
    there. Several builders of one entry take turns on a lock, and each
    entry appears whole (compiled in a scratch folder, then renamed), so a
    reader never sees half a library. Returns its path."""
    final = pathlib.Path(into) / name
    lib = final / libname
    if lib.is_file():
        return lib
    with _entry_lock(into, name):
        if lib.is_file():  # compiled by whoever held the lock before us
            return lib
        scratch = pathlib.Path(tempfile.mkdtemp(prefix=f".{name}.", dir=into))
        try:
            _compile(text, chip=chip, emit="lib", output=scratch / lib.name,
                     norm_opt=norm_opt, **options)
            try:
                os.rename(scratch, final)
            except OSError:
                if not lib.is_file():  # not someone else's identical entry
                    raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return lib


def _find_or_build(name, libname, text, chip, options, norm_opt, what):
    """The Library `name`/`libname`: ahead of time, cached, or compiled now
    from `text`. With no compiler here, a library another norm-opt cached
    for this very source, options and chip is still the right code; `what`
    names it in the error when there is none."""
    for d in search_path():
        if (d / name / libname).is_file():
            return Library(d / name / libname)
    try:
        cache = cache_dir() / compiler_tag(norm_opt)
    except NormOptNotFoundError as e:
        cached = sorted(cache_dir().glob(f"compiler-*/{name}/{libname}"))
        if cached:
            return Library(cached[-1])
        looked = ", ".join(str(d) for d in search_path() + [cache_dir()])
        raise NormOptNotFoundError(
            f"no compiled {what} (looked for {name}/ in {looked}), and it "
            f"cannot be compiled now: {e}") from None
    return Library(build_source(text, name, libname, chip, options, cache,
                                norm_opt))


def source_library(text, function, chip="sm_90a", options=None,
                   norm_opt=None):
    """The Library compiled from the MLIR `text` (one function, `function`):
    a torch.compile region (norm_opt.compile_route). Found ahead of time or
    cached by the text, the options, the chip and the compiler, like
    library()."""
    options = dict(options or {})
    name = f"{function}-{chip}-{cache_key(text, chip, options)}"
    return _find_or_build(name, f"lib{function}.so", text, chip, options,
                          norm_opt, f"region {function} for chip={chip}")


def library(kind, n, dtype, weight_dtype=None, chip="sm_90a", options=None,
            norm_opt=None):
    """The Library of one backward kernel: found ahead of time, cached, or
    compiled now (see the module docstring)."""
    options = dict(options or {})
    return _find_or_build(
        entry_name(kind, n, dtype, weight_dtype, chip, options),
        f"lib{function_name(kind)}.so",
        source(kind, n, dtype, weight_dtype), chip, options, norm_opt,
        f"{function_name(kind)} for N={n}, dtype={mlir_dtype(dtype)}, "
        f"weight={mlir_dtype(weight_dtype or dtype)}, chip={chip}")


ADALN_FUNCTION = "adaln_backward"


def adaln_source(name, n, dtype, chain=False, batch=None, tokens=None):
    """The backward of DiT's adaLN modulation, y = LN(x) * (1 + scale[b]) +
    shift[b] over x [B, S, N] (a LayerNorm without affine), as a front end
    spells it in linalg: one generic per step, f32 compute, `dtype`
    storage. (scale, dy, x, mean, rstd) -> (dx, dscale, dshift), mean /
    rstd the forward's f32 [B, S]; `chain`: pytorch 193061's two modulated
    LayerNorms sharing scale / shift, (scale, dy1, x1, mean1, rstd1, dy2,
    x2, mean2, rstd2) -> (dx1, dx2, dscale, dshift). B and S are run-time
    sizes unless both `batch` and `tokens` are given. Returns the text and
    the result types."""
    t = mlir_dtype(dtype)
    N = int(n)
    if N < 1:
        raise ValueError(f"hidden size must be >= 1, got {N}")
    dyn = batch is None or tokens is None
    B, S = batch, tokens
    b_, s_ = ("?", "?") if dyn else (B, S)
    full, rows, cols = (f"tensor<{b_}x{s_}x{N}x{{}}>",
                        f"tensor<{b_}x{s_}xf32>", f"tensor<{b_}x{N}x{{}}>")
    tf, tc = full.format(t), cols.format(t)
    ff, cf = full.format("f32"), cols.format("f32")
    idm = "affine_map<(b, s, n) -> (b, s, n)>"
    rowm = "affine_map<(b, s, n) -> (b, s)>"
    colm = "affine_map<(b, s, n) -> (b, n)>"
    par3 = '["parallel", "parallel", "parallel"]'
    body = []
    if dyn:  # the run-time sizes, from the first dy
        body += ["  %i0 = arith.constant 0 : index",
                 "  %i1 = arith.constant 1 : index",
                 f"  %nb = tensor.dim %dy1, %i0 : {full.format(t)}",
                 f"  %ns = tensor.dim %dy1, %i1 : {full.format(t)}"]

    def empty(typ):
        """The operands of tensor.empty() for `typ`'s dynamic dims."""
        if not dyn:
            return "()"
        n = typ.count("?")
        return "(%nb, %ns)" if n == 2 else "(%nb)" if n == 1 else "()"

    def ext(v, typ, f32typ, maps, it):
        if t == "f32":
            return v
        out = f"%{v[1:]}32"
        body.append(f"""  {out} = linalg.generic {{indexing_maps = [{maps}, {maps}], iterator_types = {it}}}
      ins({v} : {typ}) outs(%ef{len(body)} : {f32typ}) {{
    ^bb0(%a: {t}, %o: f32):
      %e = arith.extf %a : {t} to f32
      linalg.yield %e : f32
  }} -> {f32typ}""")
        body.insert(-1, f"  %ef{len(body) - 1} = tensor.empty{empty(f32typ)}"
                        f" : {f32typ}")
        return out

    def trunc(v, typ, f32typ, maps, it):
        if t == "f32":
            return v
        out = f"{v}_t"
        body.append(f"  {out}_e = tensor.empty{empty(typ)} : {typ}")
        body.append(f"""  {out} = linalg.generic {{indexing_maps = [{maps}, {maps}], iterator_types = {it}}}
      ins({v} : {f32typ}) outs({out}_e : {typ}) {{
    ^bb0(%a: f32, %o: {t}):
      %e = arith.truncf %a : f32 to {t}
      linalg.yield %e : {t}
  }} -> {typ}""")
        return out

    params = [f"%scale: {tc}"]
    results, rtypes = [], []
    sc = ext("%scale", tc, cf, "affine_map<(b, n) -> (b, n)>",
             '["parallel", "parallel"]')
    body.append("  %zero = arith.constant 0.0 : f32")
    body.append(f"  %nf = arith.constant {float(N)!r} : f32")
    body.append(f"  %zr0 = tensor.empty{empty(rows)} : {rows}")
    body.append(f"  %zr = linalg.fill ins(%zero : f32) outs(%zr0 : {rows}) -> {rows}")
    body.append(f"  %zc0 = tensor.empty{empty(cf)} : {cf}")
    body.append(f"  %zc = linalg.fill ins(%zero : f32) outs(%zc0 : {cf}) -> {cf}")
    body.append(f"  %ee = tensor.empty{empty(ff)} : {ff}")
    dscale_init, dshift_init = "%zc", "%zc"
    for k in (1, 2) if chain else (1,):
        params += [f"%dy{k}: {tf}", f"%x{k}: {tf}", f"%mean{k}: {rows}",
                   f"%rstd{k}: {rows}"]
        dy = ext(f"%dy{k}", tf, ff, idm, par3)
        x = ext(f"%x{k}", tf, ff, idm, par3)
        body.append(f"""  %xhat{k} = linalg.generic {{indexing_maps = [{idm}, {rowm}, {rowm}, {idm}], iterator_types = {par3}}}
      ins({x}, %mean{k}, %rstd{k} : {ff}, {rows}, {rows}) outs(%ee : {ff}) {{
    ^bb0(%a: f32, %m: f32, %r: f32, %o: f32):
      %d = arith.subf %a, %m : f32
      %h = arith.mulf %d, %r : f32
      linalg.yield %h : f32
  }} -> {ff}
  %g{k} = linalg.generic {{indexing_maps = [{idm}, {colm}, {idm}], iterator_types = {par3}}}
      ins({dy}, {sc} : {ff}, {cf}) outs(%ee : {ff}) {{
    ^bb0(%d: f32, %s: f32, %o: f32):
      %one = arith.constant 1.0 : f32
      %w = arith.addf %s, %one : f32
      %p = arith.mulf %d, %w : f32
      linalg.yield %p : f32
  }} -> {ff}
  %s1_{k} = linalg.generic {{indexing_maps = [{idm}, {idm}, {rowm}], iterator_types = ["parallel", "parallel", "reduction"]}}
      ins(%g{k}, %xhat{k} : {ff}, {ff}) outs(%zr : {rows}) {{
    ^bb0(%a: f32, %h: f32, %o: f32):
      %p = arith.mulf %a, %h : f32
      %v = arith.addf %o, %p : f32
      linalg.yield %v : f32
  }} -> {rows}
  %s2_{k} = linalg.generic {{indexing_maps = [{idm}, {rowm}], iterator_types = ["parallel", "parallel", "reduction"]}}
      ins(%g{k} : {ff}) outs(%zr : {rows}) {{
    ^bb0(%a: f32, %o: f32):
      %v = arith.addf %o, %a : f32
      linalg.yield %v : f32
  }} -> {rows}
  %dx{k} = linalg.generic {{indexing_maps = [{idm}, {idm}, {rowm}, {rowm}, {rowm}, {idm}], iterator_types = {par3}}}
      ins(%g{k}, %xhat{k}, %s1_{k}, %s2_{k}, %rstd{k} : {ff}, {ff}, {rows}, {rows}, {rows}) outs(%ee : {ff}) {{
    ^bb0(%a: f32, %h: f32, %p: f32, %q: f32, %r: f32, %o: f32):
      %pm = arith.divf %p, %nf : f32
      %qm = arith.divf %q, %nf : f32
      %hp = arith.mulf %h, %pm : f32
      %t1 = arith.subf %a, %qm : f32
      %t2 = arith.subf %t1, %hp : f32
      %v = arith.mulf %t2, %r : f32
      linalg.yield %v : f32
  }} -> {ff}
  %dscale{k} = linalg.generic {{indexing_maps = [{idm}, {idm}, {colm}], iterator_types = ["parallel", "reduction", "parallel"]}}
      ins({dy}, %xhat{k} : {ff}, {ff}) outs({dscale_init} : {cf}) {{
    ^bb0(%d: f32, %h: f32, %o: f32):
      %p = arith.mulf %d, %h : f32
      %v = arith.addf %o, %p : f32
      linalg.yield %v : f32
  }} -> {cf}
  %dshift{k} = linalg.generic {{indexing_maps = [{idm}, {colm}], iterator_types = ["parallel", "reduction", "parallel"]}}
      ins({dy} : {ff}) outs({dshift_init} : {cf}) {{
    ^bb0(%d: f32, %o: f32):
      %v = arith.addf %o, %d : f32
      linalg.yield %v : f32
  }} -> {cf}""")
        # The chain's second LayerNorm accumulates into the first's sums.
        dscale_init, dshift_init = f"%dscale{k}", f"%dshift{k}"
        results.append(trunc(f"%dx{k}", tf, ff, idm, par3))
        rtypes.append(tf)
    cmap = "affine_map<(b, n) -> (b, n)>"
    for v in (dscale_init, dshift_init):
        results.append(trunc(v, tc, cf, cmap, '["parallel", "parallel"]'))
        rtypes.append(tc)
    return (f"func.func @{name}({', '.join(params)}) -> "
            f"({', '.join(rtypes)}) {{\n" + "\n".join(body)
            + f"\n  return {', '.join(results)} : {', '.join(rtypes)}\n}}\n",
            rtypes)


GROUP_NORM_FUNCTION = "group_norm_backward"


def group_norm_source(channels, spatial, groups, dtype, weight_dtype=None,
                      channels_last=False):
    """The MLIR of GroupNorm's backward over x [?, C, spatial...] (channels
    last: [?, spatial..., C]), N at run time: (dy, x, mean, rstd, weight,
    bias) -> (dx, dweight, dbias); mean / rstd the forward's f32 [N, G]."""
    x, w = mlir_dtype(dtype), mlir_dtype(weight_dtype or dtype)
    channels, groups = int(channels), int(groups)
    spatial = [int(d) for d in spatial]
    if channels < 1 or groups < 1 or channels % groups or not spatial or \
            min(spatial) < 1:
        raise ValueError(f"GroupNorm of {channels} channels in {groups} "
                         f"groups over {spatial}: channels must be a "
                         "multiple of groups, every dim >= 1")
    dims = [*spatial, channels] if channels_last else [channels, *spatial]
    full = f"tensor<?x{'x'.join(map(str, dims))}x{x}>"
    rows, vec = f"tensor<?x{groups}xf32>", f"tensor<{channels}x{w}>"
    attrs = f"groups = {groups} : i64" + (", channels_last" if channels_last
                                          else "")
    return f"""func.func @{GROUP_NORM_FUNCTION}(%dy: {full}, %x: {full},
    %mean: {rows}, %rstd: {rows}, %w: {vec}, %b: {vec})
    -> ({full}, {vec}, {vec}) {{
  %dx, %dw, %db = norm.group_norm_grad %dy, %x, %mean, %rstd
      weight(%w : {vec}) bias(%b : {vec}) {{{attrs}}}
      : {full}, {rows} -> {full}, {vec}, {vec}
  return %dx, %dw, %db : {full}, {vec}, {vec}
}}
"""


def adaln_library(n, dtype, chip="sm_90a", options=None, norm_opt=None):
    """The Library of the adaLN backward (adaln_source, B and S at run
    time): found ahead of time, cached, or compiled now, like library()."""
    options = dict(options or {})
    text, _ = adaln_source(ADALN_FUNCTION, n, dtype)
    x = mlir_dtype(dtype)
    return _find_or_build(
        f"adaln-{int(n)}-{x}-{chip}-{cache_key(text, chip, options)}",
        f"lib{ADALN_FUNCTION}.so", text, chip, options, norm_opt,
        f"{ADALN_FUNCTION} for N={n}, dtype={x}, chip={chip}")


def group_norm_library(channels, spatial, groups, dtype, weight_dtype=None,
                       channels_last=False, chip="sm_90a", options=None,
                       norm_opt=None):
    """The Library of GroupNorm's backward (group_norm_source): found ahead
    of time, cached, or compiled now, like library()."""
    options = dict(options or {})
    text = group_norm_source(channels, spatial, groups, dtype, weight_dtype,
                             channels_last)
    x, w = mlir_dtype(dtype), mlir_dtype(weight_dtype or dtype)
    shape = "x".join(map(str, spatial))
    name = (f"group-{channels}-{shape}-g{groups}{'-cl' if channels_last else ''}"
            f"-{x}-{w}-{chip}-{cache_key(text, chip, options)}")
    return _find_or_build(
        name, f"lib{GROUP_NORM_FUNCTION}.so", text, chip, options, norm_opt,
        f"{GROUP_NORM_FUNCTION} for C={channels}, spatial={shape}, "
        f"G={groups}, dtype={x}, weight={w}, chip={chip}")


class Specializing:
    """One backward kernel for every hidden size N, as a JIT wants it: the
    run-time N library without resident tiers (`tier_min_cols=0`: its
    looped kernels take every N) is compiled now, in about the time of one
    static N (bench/compile_time.py); a run-time N's tiers would take 14x
    that. The first call of each N then compiles the static-N library of
    that N (the tier of exactly this N, the fastest plan) on a background
    thread; calls of that N take the generic kernel until it is ready and
    the specialised one after. `background=False` compiles it within the
    first call instead. A failed specialisation keeps the generic kernel
    (its error in `errors[n]`)."""

    def __init__(self, kind, dtype, weight_dtype=None, chip="sm_90a",
                 options=None, norm_opt=None, background=True):
        self.kind, self.dtype, self.weight_dtype = kind, dtype, weight_dtype
        self.chip, self.norm_opt = chip, norm_opt
        self.options = dict(options or {})
        self.background = background
        self.generic_library = library(
            kind, None, dtype, weight_dtype, chip,
            {**self.options, "tier_min_cols": 0}, norm_opt)
        self._generic = getattr(self.generic_library, function_name(kind))
        self._ready, self._pending, self.errors = {}, {}, {}
        self._lock = threading.Lock()

    def function(self, n):
        """The function to call for rows of `n` columns now (n >= 1:
        checked here, not in the background compile)."""
        n = int(n)
        if n < 1:
            raise ValueError(f"hidden size must be >= 1, got {n}")
        with self._lock:
            if n in self._ready:
                return self._ready[n]
            start = n not in self._pending and n not in self.errors
            if start and self.background:
                thread = threading.Thread(
                    target=self._specialize, args=(n,), daemon=True,
                    name=f"norm_opt specialise {self.kind} N={n}")
                self._pending[n] = thread
                thread.start()
        if start and not self.background:
            self._specialize(n)
            return self.function(n)
        return self._generic

    def specialized(self, n):
        """Whether calls of `n` columns take the static-N kernel."""
        with self._lock:
            return int(n) in self._ready

    def wait(self):
        """Blocks until every specialisation started so far has ended."""
        while True:
            with self._lock:
                threads = [t for t in self._pending.values()
                           if t.is_alive()]
            if not threads:
                return
            for t in threads:
                t.join()

    def _specialize(self, n):
        try:
            fn = getattr(library(self.kind, n, self.dtype, self.weight_dtype,
                                 self.chip, self.options, self.norm_opt),
                         function_name(self.kind))
            with self._lock:
                self._ready[n] = fn
        except NormOptError as e:
            with self._lock:
                self.errors[n] = e
        finally:
            with self._lock:
                self._pending.pop(n, None)


def _csv(text):
    return [t for t in text.split(",") if t]


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python3 -m norm_opt.kernels",
        description="Compile backward kernels ahead of time into a directory "
                    "for $NORM_OPT_LIBRARY_PATH.")
    p.add_argument("--out", required=True, help="directory to fill")
    p.add_argument("--chip", default="sm_90a")
    p.add_argument("--kind", default="layer,rms", help="layer,rms")
    p.add_argument("--hidden", required=True, help="hidden sizes: 768,1024")
    p.add_argument("--dtype", default="bf16",
                   help="activation dtypes: bf16,f16,f32")
    p.add_argument("--weight-dtype", default="",
                   help="weight dtype (default: the activation's)")
    p.add_argument("--norm-opt", default=None, help="norm-opt to run")
    args = p.parse_args(argv)
    count = 0
    for kind in _csv(args.kind):
        for n in _csv(args.hidden):
            for dtype in _csv(args.dtype):
                lib = build(kind, int(n), dtype, args.weight_dtype or None,
                            args.chip, {}, args.out, args.norm_opt)
                print(f"{lib}")
                count += 1
    print(f"{count} libraries in {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except NormOptError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
