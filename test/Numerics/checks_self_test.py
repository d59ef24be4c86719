#!/usr/bin/env python3
"""Self-checks of the comparison tallies every numeric harness relies on
(issue 45: every check can fail): python/norm_opt/checks.py and the CPU
harnesses' pieces of test/lib-python/norm_numerics.py. Each line below is
a way a harness could pass what it must fail: a NaN or infinite error, an
empty or short run, a mutant failing for something other than a tolerance,
a mutant that applied to no case, a NaN dropped from a worst-error line.

Prints `ok` / `FAIL` per self-check and a summary; exits 1 on any failure.
Python 3.11 standard library only (PYTHONPATH=python:test/lib-python, as
lit sets it).
"""

import contextlib
import io
import math
import sys

sys.dont_write_bytecode = True
import norm_numerics as nn  # noqa: E402
from norm_opt.checks import Checks, Mutants, within  # noqa: E402

NAN, INF = math.nan, math.inf
results = []


def check(what, condition):
    results.append(bool(condition))
    print(f"{'ok  ' if condition else 'FAIL'} {what}")


def quietly(f, *args):
    """f(*args) with its printing captured: (result, printed text)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        r = f(*args)
    return r, buf.getvalue()


def checks_run(*steps, expected=None):
    """A Checks run of `steps` (("within", label, err, tol) or ("require",
    label, condition, why)): (exit code of finish(), printed text)."""
    c = Checks("self", expected)
    for method, *step_args in steps:
        getattr(c, method)(*step_args)
    return quietly(c.finish)


# within: a finite error at most the tolerance, nothing else.
check("within(nan) fails", not within(NAN, 1e-5))
check("within(inf) fails", not within(INF, 1e-5))
check("within(-inf) fails", not within(-INF, 1e-5))
check("within(None) fails", not within(None, 1e-5))
check("within(2e-5, 1e-5) fails", not within(2e-5, 1e-5))
check("within(1e-5, 1e-5) passes", within(1e-5, 1e-5))
check("within(0.0, 1e-5) passes", within(0.0, 1e-5))

# Checks: a NaN, an empty run, a short run, a failed requirement fail.
rc, text = checks_run(("within", "a", 1e-7, 1e-5),
                      ("within", "b", 2e-7, 1e-5), expected=2)
check("Checks: two good checks pass", rc == 0 and "PASS self: 2" in text)
rc, text = checks_run(("within", "a", 1e-7, 1e-5),
                      ("within", "nan", NAN, 1e-5))
check("Checks: a NaN error fails the run", rc == 1 and "nan" in text)
rc, text = checks_run(("within", "inf", INF, 1e-5))
check("Checks: an infinite error fails the run", rc == 1)
rc, text = checks_run()
check("Checks: an empty run fails", rc == 1 and "no check ran" in text)
rc, text = checks_run(("within", "a", 1e-7, 1e-5), expected=2)
check("Checks: fewer checks than expected fail",
      rc == 1 and "1 checks ran, 2 expected" in text)
rc, text = checks_run(("within", "a", 1e-7, 1e-5),
                      ("require", "bitwise", False, "differs"))
check("Checks: a failed require fails the run", rc == 1)
c = Checks("self")
check("Checks.compare: a NaN output fails",
      not c.compare("nan out", [1.0, NAN], [1.0, 2.0], 1e-5))

# Mutants: caught only by a tolerance failure; an error fails the run; a
# mutant that applied to no case fails it.
m = Mutants(["m1", "m2"], min_caught=1.0)
check("Mutants.record: out of tolerance is caught",
      m.record("m1", [(1e-7, 1e-5), (0.5, 1e-5)]))
check("Mutants.record: within tolerance is not caught",
      not m.record("m2", [(1e-7, 1e-5)]))
check("Mutants.record: nothing compared is not caught",
      not m.record("m2", []))
check("Mutants: a mutant caught too rarely is a problem",
      any("m2 caught in 0/2" in p for p in m.problems()))
m = Mutants(["m1"])
m.record("m1", [(0.5, 1e-5)])
check("Mutants: a caught mutant is no problem", m.problems() == [])
m.error("m1", "launch failed")
check("Mutants.error fails the run on its own",
      m.problems() == ["mutant m1: launch failed"])
m = Mutants(["m1", "never"])
m.record("m1", [(0.5, 1e-5)])
check("Mutants: a mutant applied to no case fails",
      m.problems() == ["mutant never applied to no case"])

# norm_numerics (the CPU harnesses): the same rules.
check("rel_l2 of a NaN output is not within",
      not within(nn.rel_l2([1.0, NAN], [1.0, 2.0]), 1e-5))
tally = nn.MutantTally(["m1", "never"])
tally.record("m1", "case0", [("dx", "f32", 0.5, 1e-5, False)])
missed, _ = quietly(tally.report, "cases", 0.95)
check("MutantTally: a mutant applied to no case is missed",
      missed == ["never"])
tally = nn.MutantTally(["m1"])
tally.record("m1", "case0", [("dx", "f32", 1e-7, 1e-5, True)])
missed, _ = quietly(tally.report, "cases", 0.95)
check("MutantTally: a mutant within tolerance is missed", missed == ["m1"])
rc, text = quietly(nn.finish, 0, 0, [])
check("finish: an empty run fails", rc == 1 and "FAILED" in text)
rc, _ = quietly(nn.finish, 0, 5, ["m1"])
check("finish: a missed mutant fails", rc == 1)
rc, _ = quietly(nn.finish, 1, 5, [])
check("finish: a failed case fails", rc == 1)
rc, _ = quietly(nn.finish, 0, 5, [])
check("finish: five good cases pass", rc == 0)
worst = {}
for err in (1e-7, NAN, 1e-6):
    nn.keep_worst(worst, "dx", err, f"e{err}")
check("keep_worst keeps a NaN as the worst", math.isnan(worst["dx"][0]))
check("worst_of keeps a NaN", math.isnan(nn.worst_of([1e-7, NAN, 1e-6])))
check("worst_of of nothing is NaN", math.isnan(nn.worst_of([])))
r, _ = nn.column_agreement([1.0, NAN], [1.0, 2.0], [1.0, 2.0], 4, 1, 3,
                           "f32")
check("column_agreement: a NaN is out of every bound", not r <= 1.0)

failed = results.count(False)
if failed or not results:
    print(f"FAILED: {failed} of {len(results)} self-checks")
    sys.exit(1)
print(f"ALL PASSED: {len(results)} self-checks")
