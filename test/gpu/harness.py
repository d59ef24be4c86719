#===- test/gpu/harness.py - what the GPU harnesses share -----------------===#
"""What the GPU harnesses of test/gpu share (issue 45, "Every check can
fail"): the one tolerance table of a kernel result against float64, the
worst error per dtype each harness prints (its WORST line) and the
--inject self-checks test/gpu/suite.py runs as expected failures.

Not a check itself (suite.py does not list it); the scripts beside it
import it (their directory is sys.path[0]). Torch is imported lazily: the
scripts' CPU-side tests (check-scripts.test) import them without it.
"""

from norm_opt.checks import within
from norm_opt.reference import worst

# Relative L2 tolerance (norm_opt.reference.rel_l2, against the terms where
# the harness has them) of one kernel result against float64, by its stored
# type. From the kernels' measured worst errors on the H100
# (docs/gpu-validation.md, "Results": bf16 2.0e-3, f16 2.5e-4, f32 4.3e-7;
# gpu_random_check's worst error / tolerance 0.28, 0.24, 0.04): 4x headroom
# for bf16 and f16 (about 2 units of their rounding, the CPU numerics' bound
# too: test/lib-python/norm_numerics.py), more for f32, whose error grows
# with the row length. Re-measure with the WORST lines below.
TOLERANCE = {"bf16": 8e-3, "f16": 1e-3, "f32": 1e-5}

_NAMES = {"bfloat16": "bf16", "float16": "f16", "half": "f16",
          "float32": "f32", "float": "f32"}


def dtype_name(dtype) -> str:
    """"bf16" / "f16" / "f32" of a torch dtype or of such a name."""
    s = str(dtype).replace("torch.", "")
    return _NAMES.get(s, s)


def tol(dtype) -> float:
    """The tolerance of a result stored in `dtype` (torch dtype or name)."""
    return TOLERANCE[dtype_name(dtype)]


class Worst:
    """The largest error per dtype a harness saw (NaN counts as the
    largest): `line()` is its WORST line, measured for TOLERANCE above."""

    def __init__(self, name: str):
        self.name = name
        self.errors = {}

    def add(self, dtype, err):
        key = dtype_name(dtype)
        self.errors[key] = worst((self.errors.get(key, 0.0), err))
        return err

    def line(self) -> str:
        parts = [f"{k}={v:.2e} (tolerance {TOLERANCE[k]:g})"
                 if k in TOLERANCE else f"{k}={v:.2e}"
                 for k, v in sorted(self.errors.items())]
        return f"WORST {self.name}: " + (", ".join(parts) or "nothing compared")

    def print(self):
        print(self.line(), flush=True)


# Self-checks: a harness run with --inject must fail (suite.py runs each as
# an expected failure), showing its checks can fail at all.
INJECT = {
    "nan": "poison one output element with NaN after the kernel ran",
    "empty": "compare nothing (an empty run must fail)",
}


def add_inject_option(parser, extra=None):
    """--inject with INJECT's kinds and a harness's own (`extra`)."""
    kinds = {**INJECT, **(extra or {})}
    parser.add_argument(
        "--inject", choices=sorted(kinds), default=None,
        help="self-check, the run must then fail: " + "; ".join(
            f"{k}: {v}" for k, v in sorted(kinds.items())))


def build_or_check(doc, default_dir, build, numerics):
    """The main of a build-here, check-there harness: --build OUT writes
    and compiles its functions with --norm-opt (`build(out, norm_opt)`);
    else the GPU check of --dir (`numerics(args)`: --quick, --tiny (small
    shapes only, for compute-sanitizer), --inject)."""
    import argparse
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--build", metavar="OUT")
    ap.add_argument("--norm-opt", default="build/bin/norm-opt")
    ap.add_argument("--dir", default=default_dir)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--tiny", action="store_true",
                    help="small shapes only (under compute-sanitizer)")
    add_inject_option(ap)
    args = ap.parse_args()
    if args.build:
        return build(args.build, args.norm_opt)
    return numerics(args)


def poison(tensor):
    """NaN into one element of `tensor`, in place (a result the kernel
    wrote: the comparison after it must fail)."""
    if tensor.numel():
        tensor[(0,) * tensor.dim()] = float("nan")
    return tensor


class Results:
    """The PASS/FAIL lines, counts and WORST line of a harness that
    compares kernel results with float64 (the mask, channels-first and
    graph checks). `inject` is the run's --inject: "nan" poisons the first
    result compared, "empty" compares nothing. `finish()` prints the
    summary and returns the exit status: non-zero on a failure and on a run
    that compared nothing."""

    def __init__(self, name: str, inject=None):
        self.worst, self.inject = Worst(name), inject
        self.rows, self.failed = [], 0

    def _record(self, case, label, err, ok):
        self.failed += not ok
        self.rows.append((case, label, err, ok))
        print(f"{'PASS' if ok else 'FAIL'} {case} {label}"
              + ("" if err is None else f" rel_l2={err:.2e}"), flush=True)

    def compare(self, case, label, got, ref, tolerance=None):
        """got (a torch tensor our kernel wrote) against float64 `ref`,
        within `tolerance` (default: TOLERANCE of got's type). A NaN or an
        unwritten (still poisoned) element fails."""
        import torch
        from norm_opt.reference import rel_l2
        if self.inject == "empty":
            return True
        if self.inject == "nan" and not self.rows:
            got = poison(got.clone())
        err = self.worst.add(got.dtype, rel_l2(got, ref))
        ok = (bool(torch.isfinite(got).all())
              and within(err, tol(got.dtype) if tolerance is None
                         else tolerance))
        self._record(case, label, err, ok)
        return ok

    def require(self, case, label, ok):
        """A check that is not a tolerance (bitwise equal runs, ...)."""
        if self.inject != "empty":
            self._record(case, label, None, bool(ok))

    def finish(self) -> int:
        total = len(self.rows)
        if not total:
            print("FAIL: nothing was compared (an empty run passes nothing)")
        print(f"{total - self.failed} of {total} checks passed")
        self.worst.print()
        return 1 if self.failed or not total else 0


__all__ = ["TOLERANCE", "INJECT", "Results", "Worst", "add_inject_option",
           "build_or_check",
           "dtype_name", "poison", "tol", "within"]
