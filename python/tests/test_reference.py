#===- test_reference.py - norm_opt.reference without torch ----------------===#
"""The float64 reference on the standard library's Rows: it is the gradient
of the forward (central differences), its riders and mutants do what they
say, and Rows broadcasts like torch."""

import math
import random
import unittest

from norm_opt import reference
from norm_opt.reference import Rows

EPS = 1e-5


def forward(kind, x, w, b, n):
    """y of each row of the flat x (LayerNorm / RMSNorm, statistics from x,
    in float64)."""
    y = []
    for r in range(0, len(x), n):
        row = x[r:r + n]
        layer = kind in ("layer", "layer_norm")
        mean = math.fsum(row) / n if layer else 0.0
        var = math.fsum((v - mean) ** 2 for v in row) / n
        rstd = 1.0 / math.sqrt(var + EPS)
        y += [(v - mean) * rstd * wj + bj
              for v, wj, bj in zip(row, w, b)]
    return y


def loss(kind, x, w, b, dy, n):
    return math.fsum(g * v for g, v in zip(dy, forward(kind, x, w, b, n)))


def central(f, values, i, h=1e-6):
    up, down = list(values), list(values)
    up[i] += h
    down[i] -= h
    return (f(up) - f(down)) / (2 * h)


def problem(rows, n, seed=1):
    rng = random.Random(seed)
    x = [rng.uniform(0.5, 2.0) * rng.choice((-1, 1)) + 0.3
         for _ in range(rows * n)]
    dy = [rng.gauss(0.0, 1.0) for _ in range(rows * n)]
    w = [1.0 + 0.3 * rng.gauss(0.0, 1.0) for _ in range(n)]
    b = [0.2 * rng.gauss(0.0, 1.0) for _ in range(n)]
    return x, dy, w, b


def run(kind, x, dy, w, n, **kw):
    """backward on flat lists, statistics recomputed from x."""
    rx = Rows.full(x, n)
    mean, rstd = reference.statistics(kind, rx, EPS)
    out = reference.backward(kind, rx, Rows.full(dy, n), rstd, mean,
                             Rows.vector(w) if w is not None else None, **kw)
    if isinstance(out, tuple):
        return tuple({k: v.flat() for k, v in d.items()} for d in out)
    return {k: v.flat() for k, v in out.items()}


class Gradient(unittest.TestCase):
    """dx, dw, db are the gradients of sum(dy * y) by x, w, b."""

    def check(self, kind, rows, n):
        x, dy, w, b = problem(rows, n)
        got = run(kind, x, dy, w, n)
        for name, values, index in (("dx", x, range(len(x))),
                                    ("dw", w, range(n)), ("db", b, range(n))):
            def f(v, name=name):
                args = {"x": x, "w": w, "b": b, name[1:]: v}
                return loss(kind, args["x"], args["w"], args["b"], dy, n)
            for i in index:
                want = central(f, values, i)
                self.assertAlmostEqual(got[name][i], want, delta=1e-6 * (
                    1 + abs(want)), msg=f"{kind} {name}[{i}]")

    def test_layer_norm(self):
        self.check("layer", 3, 7)

    def test_rms_norm(self):
        self.check("rms_norm", 2, 5)

    def test_one_column(self):
        self.check("layer_norm", 2, 1)
        self.check("rms", 3, 1)


class Riders(unittest.TestCase):
    def setUp(self):
        self.n = 6
        self.x, self.dy, self.w, _ = problem(4, self.n, seed=2)
        self.base = run("layer", self.x, self.dy, self.w, self.n)

    def test_dy_scale_is_linear(self):
        # A power of two scales every result exactly.
        got = run("layer", self.x, self.dy, self.w, self.n, dy_scale=0.25)
        for k in ("dx", "dw", "db"):
            self.assertEqual(got[k], [0.25 * v for v in self.base[k]])
        got = run("layer", self.x, self.dy, self.w, self.n, dy_scale=0.25,
                  mutant="no-dy-scale")
        self.assertEqual(got, self.base)

    def test_residual_and_previous_gradients(self):
        dres = [0.5 * i for i in range(len(self.x))]
        prev = [float(i) for i in range(self.n)]
        got, scales = run("layer", self.x, self.dy, self.w, self.n,
                          residual=Rows.full(dres, self.n), dw_in=prev,
                          db_in=prev, scales=True)
        self.assertEqual(got["dx"], [a + r for a, r in
                                     zip(self.base["dx"], dres)])
        for k in ("dw", "db"):
            self.assertEqual(got[k], [a + p for a, p in
                                      zip(self.base[k], prev)])
        _, plain = run("layer", self.x, self.dy, self.w, self.n, scales=True)
        self.assertEqual(scales["dx"], [a + abs(r) for a, r in
                                        zip(plain["dx"], dres)])
        for mutant, name in (("no-residual", "dx"), ("no-prev-dw", "dw"),
                             ("no-prev-db", "db")):
            wrong, wrong_scales = run(
                "layer", self.x, self.dy, self.w, self.n,
                residual=Rows.full(dres, self.n), dw_in=prev, db_in=prev,
                scales=True, mutant=mutant)
            self.assertEqual(wrong[name], self.base[name], mutant)
            self.assertEqual(wrong_scales, scales, mutant)

    def test_zero_centred_weight(self):
        w0 = [v - 1.0 for v in self.w]
        got = run("layer", self.x, self.dy, w0, self.n, zero_centered=True)
        for k in ("dx", "dw", "db"):
            for a, b in zip(got[k], self.base[k]):
                self.assertAlmostEqual(a, b, delta=1e-12)

    def test_no_weight_is_weight_one(self):
        ones = [1.0] * self.n
        self.assertEqual(run("rms", self.x, self.dy, None, self.n),
                         run("rms", self.x, self.dy, ones, self.n))

    def test_results(self):
        got = run("rms", self.x, self.dy, self.w, self.n, results=("dx",))
        self.assertEqual(list(got), ["dx"])
        with self.assertRaisesRegex(ValueError, "results must be dx"):
            run("rms", self.x, self.dy, self.w, self.n, results=("dw",))


class Mutants(unittest.TestCase):
    def test_every_mutant_changes_a_result(self):
        n = 5
        x, dy, w, _ = problem(3, n, seed=3)
        w = [v + 0.5 for v in w]
        prev = [1.0] * n
        dres = Rows.full([0.5] * len(x), n)
        for kind in ("layer", "rms"):
            for zc in (False, True):
                args = dict(dy_scale=0.5, residual=dres, dw_in=prev,
                            db_in=prev, zero_centered=zc)
                right = run(kind, x, dy, w, n, **args)
                for mutant in reference.MUTANTS:
                    applies = {
                        "dx-no-mean-wdy-term": kind == "layer",
                        "dx-rms-with-mean-wdy-term": kind == "rms",
                        "xhat-not-centred": kind == "layer",
                        "w-not-plus-one": zc,
                        "w-plus-one-always": not zc,
                    }.get(mutant, True)
                    wrong = run(kind, x, dy, w, n, mutant=mutant, **args)
                    self.assertEqual(wrong != right, applies,
                                     f"{kind} zc={zc} {mutant}")

    def test_unknown_mutant(self):
        with self.assertRaisesRegex(ValueError, "unknown mutant 'x'"):
            run("rms", [1.0], [1.0], [1.0], 1, mutant="x")


class RowsArithmetic(unittest.TestCase):
    def test_broadcasting(self):
        full = Rows.full([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 3)
        col = Rows.column([10.0, 20.0])
        vec = Rows.vector([1.0, 0.5, 0.25])
        self.assertEqual(full.shape, (2, 3))
        self.assertEqual((full - col).flat(), [-9, -8, -7, -16, -15, -14])
        self.assertEqual((col - full).flat(), [9, 8, 7, 16, 15, 14])
        self.assertEqual((full * vec).flat(), [1, 1, 0.75, 4, 2.5, 1.5])
        self.assertEqual((vec * full).flat(), [1, 1, 0.75, 4, 2.5, 1.5])
        self.assertEqual((2.0 * full / 2).flat(), full.flat())
        self.assertEqual((1.0 / col).flat(), [0.1, 0.05])
        self.assertEqual((col * vec).flat(), [10, 5, 2.5, 20, 10, 5])
        self.assertEqual(abs(-full).flat(), full.flat())
        self.assertEqual((full ** 2).flat(), [1, 4, 9, 16, 25, 36])
        with self.assertRaisesRegex(ValueError, "do not broadcast"):
            full + Rows.vector([1.0, 2.0])
        with self.assertRaisesRegex(ValueError, "not rows of 4"):
            Rows.full([1.0] * 6, 4)

    def test_exact_sums(self):
        # math.fsum: the column sum of 1e16, 1, -1e16 is 1, not 0.
        dy = Rows.full([1e16, 1.0, -1e16], 1)
        out = reference.backward("rms", Rows.full([1.0] * 3, 1), dy,
                                 [1.0] * 3)
        self.assertEqual(out["dw"].flat(), [1.0])
        self.assertEqual(out["db"].flat(), [1.0])

    def test_statistics(self):
        x = Rows.full([1.0, 3.0, 2.0, 6.0], 2)
        mean, rstd = reference.statistics("layer", x, 0.0)
        self.assertEqual(mean.flat(), [2.0, 4.0])
        self.assertEqual(rstd.flat(), [1.0, 0.5])
        mean, rstd = reference.statistics("rms", x, 0.0)
        self.assertIsNone(mean)
        self.assertEqual(rstd.flat(), [1 / math.sqrt(5.0),
                                       1 / math.sqrt(20.0)])


class ErrorMeasure(unittest.TestCase):
    """rel_l2 on the standard library's lists (the CPU numerics') and
    worst: a NaN or an unwritten element must fail `err <= tol`."""

    def test_relative_and_scaled(self):
        self.assertEqual(reference.rel_l2([1.0, 2.0], [1.0, 2.0]), 0.0)
        self.assertAlmostEqual(reference.rel_l2([3.0, 4.0], [0.0, 5.0]),
                               math.hypot(3.0, 1.0) / 5.0)
        # Against the terms where they are larger than the result.
        self.assertAlmostEqual(
            reference.rel_l2([1e-3], [0.0], [10.0]), 1e-4)
        self.assertAlmostEqual(
            reference.rel_l2([2.0], [1.0], [0.5]), 1.0)

    def test_failures_are_infinite(self):
        nan, inf = float("nan"), float("inf")
        self.assertEqual(reference.rel_l2([nan, 1.0], [1.0, 1.0]), inf)
        self.assertEqual(reference.rel_l2([inf], [1.0]), inf)
        self.assertEqual(reference.rel_l2([1e-30], [0.0]), inf)
        self.assertEqual(reference.rel_l2([0.0], [0.0]), 0.0)
        err = reference.rel_l2([1.0], [nan])
        self.assertFalse(err <= 1.0)  # a NaN reference fails too

    def test_worst(self):
        nan = float("nan")
        self.assertEqual(reference.worst([1.0, 3.0, 2.0]), 3.0)
        self.assertTrue(math.isnan(reference.worst([1.0, nan, 2.0])))
        self.assertTrue(math.isnan(reference.worst([nan, 2.0])))
        running = 0.0
        for e in (1.0, nan, 5.0):
            running = reference.worst((running, e))
        self.assertTrue(math.isnan(running))
        self.assertEqual(reference.worst([(1.0, "a"), (4.0, "b")],
                                         key=lambda p: p[0]), (4.0, "b"))


class NoTorch(unittest.TestCase):
    def test_import_needs_no_torch(self):
        import subprocess
        import sys
        code = ("import sys; sys.modules['torch'] = None\n"
                "import norm_opt.reference\n")
        subprocess.run([sys.executable, "-c", code], check=True)


if __name__ == "__main__":
    unittest.main()
