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


def add_inject_option(parser):
    parser.add_argument(
        "--inject", choices=sorted(INJECT), default=None,
        help="self-check, the run must then fail: " + "; ".join(
            f"{k}: {v}" for k, v in sorted(INJECT.items())))


def poison(tensor):
    """NaN into one element of `tensor`, in place (a result the kernel
    wrote: the comparison after it must fail)."""
    if tensor.numel():
        tensor[(0,) * tensor.dim()] = float("nan")
    return tensor


__all__ = ["TOLERANCE", "INJECT", "Worst", "add_inject_option",
           "dtype_name", "poison", "tol", "within"]
