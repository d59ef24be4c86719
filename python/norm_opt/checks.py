"""The one comparison tally every numeric harness uses, CPU and GPU
(issue 45): a check passes only when its error is a finite number within
its tolerance, so a NaN or an infinity (an unwritten, NaN-poisoned element;
norm_opt.reference.rel_l2 returns inf for a non-finite output) fails it;
and a run fails when it compared nothing, or fewer checks than it expected.

    checks = Checks("gpu_check", expected=len(cases) * 3)
    ok = checks.within("rms bf16 4096x4096 dx", err, tol)
    ok = checks.compare("dw", out, ref, tol, scale)   # rel_l2, then within
    sys.exit(checks.finish())

Mutant self-checks count only what they test: `Mutants.record(name,
errors_and_tolerances)` counts a mutant as caught only when a compared
result is out of tolerance; a failure of anything else (a launch, an
exception, a bounds check) is `Mutants.error(name, why)`, which fails the
run on its own.

Standard library only (the CPU numerics run without torch); `compare`
imports rel_l2 lazily.
"""

from __future__ import annotations

import math


def within(err, tol) -> bool:
    """err <= tol for a finite err: False on NaN and on infinities."""
    return isinstance(err, (int, float)) and math.isfinite(err) and err <= tol


class Checks:
    """Counts the checks of one run; `finish()` is its exit code."""

    def __init__(self, name: str, expected: int | None = None):
        self.name = name
        self.expected = expected
        self.count = 0
        self.failures: list[str] = []

    def within(self, label: str, err, tol) -> bool:
        self.count += 1
        ok = within(err, tol)
        if not ok:
            self.failures.append(f"{label}: error {err} (tolerance {tol})")
        return ok

    def compare(self, label: str, out, ref, tol, scale=None) -> bool:
        from norm_opt.reference import rel_l2
        return self.within(label, rel_l2(out, ref, scale), tol)

    def require(self, label: str, condition: bool, why: str = "") -> bool:
        """A check that is not a tolerance (bitwise equality, a count)."""
        self.count += 1
        if not condition:
            self.failures.append(f"{label}: {why or 'failed'}")
        return bool(condition)

    def problems(self) -> list[str]:
        """What makes the run fail: failed checks, an empty run, too few."""
        out = list(self.failures)
        if self.count == 0:
            out.append("no check ran (an empty run passes nothing)")
        elif self.expected is not None and self.count < self.expected:
            out.append(f"{self.count} checks ran, {self.expected} expected")
        return out

    def finish(self, quiet: bool = False) -> int:
        problems = self.problems()
        for p in problems[:20]:
            print(f"FAIL {self.name}: {p}")
        if len(problems) > 20:
            print(f"FAIL {self.name}: ... and {len(problems) - 20} more")
        if not problems and not quiet:
            print(f"PASS {self.name}: {self.count} checks")
        return 1 if problems else 0


class Mutants:
    """Deliberately wrong references a harness must catch. A mutant is
    caught on a case only when some compared result is out of tolerance
    against the mutant's reference; anything else that goes wrong while
    trying it is an error that fails the run by itself."""

    def __init__(self, names, min_caught: float = 0.95):
        self.min_caught = min_caught
        self.counts = {n: [0, 0] for n in names}  # caught, applied
        self.errors: list[str] = []

    def record(self, name: str, errors_and_tolerances) -> bool:
        """errors_and_tolerances: [(error, tolerance)] of the compared
        results against the mutant's reference."""
        count = self.counts[name]
        count[1] += 1
        caught = any(not within(e, t) for e, t in errors_and_tolerances)
        count[0] += caught
        return caught

    def error(self, name: str, why: str):
        self.errors.append(f"mutant {name}: {why}")

    def problems(self) -> list[str]:
        out = list(self.errors)
        for name, (caught, applied) in self.counts.items():
            if applied == 0:
                out.append(f"mutant {name} applied to no case")
            elif caught < self.min_caught * applied:
                out.append(f"mutant {name} caught in {caught}/{applied}")
        return out
