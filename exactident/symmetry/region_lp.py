"""One strict linear system decided exactly: a rational point, or a proof that it has none (docs/symmetries.md).

Each child of the region cover (:mod:`exactident.symmetry.regions`) is a strict system
``a_h . x + e_h > 0`` over Q.  :func:`decide` settles it:

- **realised** by an exact rational point: the centre of the largest ball inside it (a float LP,
  HiGHS through highspy, else scipy's ``linprog``), rounded to a dyadic and *checked exactly*;
- **empty** by a Farkas certificate checked exactly: ``y >= 0``, ``y != 0``, ``sum_h y_h a_h = 0``
  and ``sum_h y_h e_h <= 0`` (then ``sum_h y_h (a_h . x + e_h) <= 0`` at every ``x``, which
  contradicts every row being positive).  ``y`` is the LP's dual made exact on its support (the
  exact nullspace of those rows), or, when that dual is degenerate, a basic solution of a second
  LP (``min e . y``, ``sum y_h a_h = 0``, ``sum y = 1``, ``y >= 0``) made exact the same way;
- otherwise (the floats misled the checks: nearly parallel hyperplanes meeting far beyond the
  LP's tolerance) by the exact simplex method over Q
  (:func:`exactident.linalg.exact_lp.strict_solution`, Bland's rule: it always terminates), whose
  point or Farkas certificate is checked as above.

Rows are scaled by powers of two (:func:`scaled`: the same inequalities) so that their float copies
are finite.  The floats only propose; every answer is accepted by an exact check.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Sequence
from fractions import Fraction

import flint
import numpy as np

from exactident.errors import UnsupportedCaseError
from exactident.linalg.exact_lp import is_certificate
from exactident.symmetry.linewalk import exact_floats

__all__ = ["decide", "floats", "lp_solver", "lp_solver_installed", "scaled", "value"]

_ZERO = flint.fmpq(0)
# (a, e): the strict inequality a . x + e > 0 over Q
Row = tuple[list[flint.fmpq], flint.fmpq]

def lp_solver_installed() -> bool:
    """Whether the LP proposals of the cover can run (highspy or scipy importable), without importing either."""
    import importlib.util

    return any(importlib.util.find_spec(m) is not None for m in ("highspy", "scipy"))


def lp_solver():
    """The LP solver of the proposals: HiGHS through highspy (fast), else scipy's linprog (HiGHS too)."""
    import importlib.util

    if importlib.util.find_spec("highspy") is not None:
        import highspy

        return _HighsLP(highspy)
    try:
        from scipy.optimize import linprog
    except ImportError:
        raise UnsupportedCaseError("the region cover needs highspy or scipy for its LP proposals (pip install "
                                   "'exactident[lp]')") from None
    return _ScipyLP(linprog)


class _HighsLP:
    """``max t`` with ``An x - t >= -en``, ``t <= 1``, on one reused ``highspy.Highs`` (no per-call set-up)."""

    def __init__(self, highspy) -> None:
        self.hs = highspy
        # HiGHS prints its banner on stdout (file descriptor 1) when constructed: not into a --json output
        sys.stdout.flush()
        saved = os.dup(1)
        try:
            with open(os.devnull, "w") as null:
                os.dup2(null.fileno(), 1)
                self.h = highspy.Highs()
                self.h.setOptionValue("output_flag", False)
        finally:
            os.dup2(saved, 1)
            os.close(saved)

    def __call__(self, An: np.ndarray, en: np.ndarray) -> tuple[float, np.ndarray, np.ndarray] | None:
        hs, k, n = self.hs, An.shape[0], An.shape[1]
        inf = hs.kHighsInf
        lp = hs.HighsLp()
        lp.num_col_, lp.num_row_ = n + 1, k
        lp.col_cost_ = np.r_[np.zeros(n), -1.0]
        lp.col_lower_ = np.full(n + 1, -inf)
        lp.col_upper_ = np.r_[np.full(n, inf), 1.0]
        lp.row_lower_, lp.row_upper_ = np.full(k, -inf), en
        lp.a_matrix_.format_ = hs.MatrixFormat.kRowwise
        lp.a_matrix_.start_ = np.arange(0, k * (n + 1) + 1, n + 1)
        lp.a_matrix_.index_ = np.tile(np.arange(n + 1), k)
        lp.a_matrix_.value_ = np.c_[-An, np.ones(k)].ravel()
        lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = n + 1, k
        self.h.clearModel()
        self.h.passModel(lp)
        self.h.run()
        if self.h.getModelStatus() != hs.HighsModelStatus.kOptimal:
            return None
        sol = self.h.getSolution()
        return (-float(self.h.getInfo().objective_function_value), np.array(sol.col_value[:n]),
                -np.array(sol.row_dual))

    def farkas(self, A: np.ndarray, e: np.ndarray) -> np.ndarray | None:
        """A basic optimum of ``min e . y``, ``A^T y = 0``, ``sum y = 1``, ``y >= 0`` (rows of ``A`` unit), or None."""
        hs, (k, n) = self.hs, A.shape
        lp = hs.HighsLp()
        lp.num_col_, lp.num_row_ = k, n + 1
        lp.col_cost_ = e
        lp.col_lower_, lp.col_upper_ = np.zeros(k), np.full(k, hs.kHighsInf)
        lp.row_lower_ = lp.row_upper_ = np.r_[np.zeros(n), 1.0]
        lp.a_matrix_.format_ = hs.MatrixFormat.kRowwise
        lp.a_matrix_.start_ = np.arange(0, (n + 1) * k + 1, k)
        lp.a_matrix_.index_ = np.tile(np.arange(k), n + 1)
        lp.a_matrix_.value_ = np.r_[A.T, np.ones((1, k))].ravel()
        lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = k, n + 1
        self.h.clearModel()
        self.h.passModel(lp)
        self.h.run()
        if self.h.getModelStatus() != hs.HighsModelStatus.kOptimal:
            return None
        return np.array(self.h.getSolution().col_value)


class _ScipyLP:
    def __init__(self, linprog) -> None:
        self.linprog = linprog

    def farkas(self, A: np.ndarray, e: np.ndarray) -> np.ndarray | None:
        k, n = A.shape
        res = self.linprog(e, A_eq=np.r_[A.T, np.ones((1, k))], b_eq=np.r_[np.zeros(n), 1.0], bounds=(0, None),
                           method="highs-ds")
        return res.x if res.status == 0 else None

    def __call__(self, An: np.ndarray, en: np.ndarray) -> tuple[float, np.ndarray, np.ndarray] | None:
        k, n = An.shape
        res = self.linprog(np.r_[np.zeros(n), -1.0], A_ub=np.c_[-An, np.ones(k)], b_ub=en,
                           bounds=[(None, None)] * n + [(None, 1.0)], method="highs")
        if res.status != 0:
            return None
        return -float(res.fun), res.x[:n], -np.asarray(res.ineqlin.marginals)



def value(row: Row, x: Sequence[flint.fmpq]) -> flint.fmpq:
    """``a . x + e`` over Q."""
    a, e = row
    s = e
    for aj, xj in zip(a, x):
        if aj != _ZERO:
            s += aj * xj
    return s


def scaled(row: Row) -> Row:
    """``row`` times ``2^-k``, its largest entry then in ``1/2 < |v| < 2``: its float copy is finite (10^400)."""
    a, e = row
    k = max((int(v.p).bit_length() - int(v.q).bit_length() for v in (*a, e) if v != _ZERO), default=0)
    f = flint.fmpq(1, 2 ** k) if k >= 0 else flint.fmpq(2 ** -k)
    return ([v * f for v in a], e * f) if k else row


def floats(row: Row) -> tuple[np.ndarray, float]:
    """The float64 copy ``(a, e)`` of a row (a proposal's input only; scale it first, :func:`scaled`)."""
    return np.array([float(v) for v in row[0]]), float(row[1])


def _inside(rows: Sequence[Row], x: Sequence[flint.fmpq]) -> bool:
    return all(value(r, x) > _ZERO for r in rows)


def _round(x: np.ndarray, bits: int) -> list[flint.fmpq]:
    """``x`` rounded to the grid ``2^-bits Z`` (``bits >= 0``), exactly."""
    return [flint.fmpq(int(np.rint(v * 2.0 ** bits)), 2 ** bits) for v in x]


def _lp(solve, A: np.ndarray, e: np.ndarray) -> tuple[float, np.ndarray, np.ndarray] | None:
    """``max t`` with ``a_h . x + e_h >= t |a_h|``, ``t <= 1``: ``(t, x, y)``, ``y`` the dual on the raw rows."""
    norms = np.linalg.norm(A, axis=1)
    out = solve(A / norms[:, None], e / norms)
    if out is None:
        return None
    t, x, y = out
    return t, x, y / norms


def _point(rows: Sequence[Row], x: np.ndarray, t: float) -> list[flint.fmpq] | None:
    """A dyadic rounding of the LP's centre that satisfies ``rows`` exactly, or None."""
    if not np.all(np.isfinite(x)) or t <= 0:
        return None
    base = max(0, math.ceil(math.log2(2 * math.sqrt(len(x))) - math.log2(t))) if t < 1 else 1  # t may be subnormal
    for bits in (base, base + 8, base + 24, 1074):  # x's exact binary value when x 2^bits would overflow
        fine = bits < 1000 and bool(np.all(np.abs(x) < 2.0 ** (1000 - bits)))
        cand = _round(x, bits) if fine else exact_floats(x)
        if _inside(rows, cand):
            return cand
    return None


def _farkas(rows: Sequence[Row], y: np.ndarray) -> bool:
    """An exact Farkas certificate near the float dual ``y``: the rows have no common point.

    Tried on the support of ``y`` and on the ``k <= n0 + 1`` rows of largest ``y`` (a tiny float
    multiplier is often noise, and a degenerate dual may leave a needed row at 0): each exact
    nullspace vector of those rows, then the float ``y`` projected on that nullspace and
    rationalised; every candidate is checked exactly
    (:func:`exactident.linalg.exact_lp.is_certificate`).
    """
    if not np.all(np.isfinite(y)) or y.max() <= 0:
        return False
    order = [int(h) for h in np.argsort(-y, kind="stable")]
    support = sum(1 for h in order if y[h] > 1e-12 * y.max())
    n = len(rows[0][0])
    tried = set()
    # a minimal certificate has at most n + 1 rows (Caratheodory); HiGHS may leave one of them at 0
    for size in [support] + list(range(2, min(len(order), n + 1) + 1)):
        S = tuple(sorted(order[:size]))
        if S in tried:
            continue
        tried.add(S)
        if _farkas_on(rows, S, y):
            return True
    return False


def _farkas_on(rows: Sequence[Row], S: Sequence[int], y: np.ndarray) -> bool:
    n = len(rows[0][0])
    scale, cols = [], []
    for h in S:
        d = 1
        for a in rows[h][0]:
            d = math.lcm(d, int(a.q))
        scale.append(d)
        cols.append([int(a.p) * (d // int(a.q)) for a in rows[h][0]])
    M = flint.fmpz_mat(n, len(S), [cols[k][j] for j in range(n) for k in range(len(S))])
    N, nullity = M.nullspace()
    if not nullity:
        return False
    basis = [[int(N[k, c]) for k in range(len(S))] for c in range(nullity)]
    cands = [[flint.fmpq(v) for v in u] for u in basis]
    if nullity > 1:  # the float dual, projected on the exact nullspace (in the scaled coordinates y_h / d_h)
        B = np.array(basis, dtype=float).T
        target = np.array([y[h] / scale[k] for k, h in enumerate(S)])
        coef = np.linalg.lstsq(B, target, rcond=None)[0]
        for den in (10**3, 10**6, 10**9):
            c = [Fraction(float(v)).limit_denominator(den) for v in coef]
            cands.append([sum((flint.fmpq(ci.numerator, ci.denominator) * u[k] for ci, u in zip(c, basis)),
                              flint.fmpq(0)) for k in range(len(S))])
    sub = [rows[h] for h in S]
    for u in cands:  # y_h = u_h d_h (sum y_h a_h = M u = 0), either sign
        y_S = [v * d for v, d in zip(u, scale)]
        if is_certificate(sub, y_S) or is_certificate(sub, [-v for v in y_S]):
            return True
    return False


def _exact_decide(rows: Sequence[Row]) -> tuple[str, list[flint.fmpq] | None]:
    """The exact simplex (:func:`exactident.linalg.exact_lp.strict_solution`, which checks its own point or
    Farkas certificate exactly): ``("realised", x)`` or ``("empty", None)``."""
    from exactident.linalg.exact_lp import strict_solution

    x, _ = strict_solution(rows)
    return ("realised", x) if x is not None else ("empty", None)



def decide(linprog, rows: list[Row], frows: list[tuple[np.ndarray, float]], counts: dict[str, int]
           ) -> tuple[str, list[flint.fmpq] | None]:
    """A strict system (``frows`` its float copy): ``("realised", point)`` or ``("empty", None)``, proved.

    ``linprog`` is :func:`lp_solver`'s; ``counts["lps"]`` counts the float LPs solved (proposals only).
    """
    A, e = np.array([f[0] for f in frows]), np.array([f[1] for f in frows])
    if np.all(np.any(A, axis=1)):  # a float row of zeros has no direction for the LP's ball
        counts["lps"] = counts.get("lps", 0) + 1
        out = _lp(linprog, A, e)
        if out is not None:
            t, xf, y = out
            if t > 0:
                pt = _point(rows, xf, t)
                if pt is not None:
                    return "realised", pt
            elif _farkas(rows, y):
                return "empty", None
            else:  # a degenerate dual: a basic certificate (at most n0 + 1 rows) from a second LP
                norms = np.linalg.norm(A, axis=1)
                yb = linprog.farkas(A / norms[:, None], e / norms)
                if yb is not None and _farkas(rows, yb / norms):
                    return "empty", None
    return _exact_decide(rows)

