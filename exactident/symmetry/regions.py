"""The activation regions of a layered ReLU network on ``R^n`` or a box, enumerated exactly (docs/symmetries.md).

A *region* is the set of inputs with one activation pattern and no tie: the strict
system ``s_{l,v} z_l(x)_v > 0`` over the hidden neurons (``s = +1`` active, ``-1``
inactive).  Below a neuron every layer is affine in ``x`` on the region, so a region is
an open polyhedron, and the tie-free inputs of the domain are the disjoint union of the
regions that meet it (a box is open here: an open region meeting the closed box meets
its interior).

:func:`enumerate_regions` walks the tree of partial patterns, neuron by neuron in layer
order.  A node holds the strict rows ``a_h . x + e_h > 0`` of its neurons, exact over Q
(the layers below are affine on it), and a rational point satisfying them.  Each child
adds one row and is

- **realised** by an exact rational point: the parent's point when it satisfies the
  new row; else the centre of the largest ball inside the child (a float LP, scipy's
  HiGHS), rounded to a dyadic and *checked exactly*;
- **empty** by a Farkas certificate checked exactly: ``y >= 0``, ``y != 0``, ``sum_h y_h
  a_h = 0`` and ``sum_h y_h e_h <= 0`` (then ``sum_h y_h (a_h . x + e_h) <= 0`` at every
  ``x``, which contradicts every row being positive).  ``y`` is the LP's dual made exact
  on its support (the exact nullspace of those rows), or, when that dual is degenerate, a
  basic solution of a second LP (``min e . y``, ``sum y_h a_h = 0``, ``sum y = 1``, ``y >= 0``)
  made exact the same way;
- otherwise (the floats misled the checks: nearly parallel hyperplanes meeting far beyond
  the LP's tolerance) decided by the exact simplex method over Q
  (:func:`exactident.linalg.exact_lp.strict_solution`, Bland's rule: it always terminates),
  whose point or Farkas certificate is checked as above.

Rows are scaled by powers of two (the same inequalities) so that their float copies are
finite.  A new row with ``a = 0`` is decided by the sign of ``e`` alone (``e = 0``: the neuron's
pre-activation is 0 on the whole node, every input there is a tie, no child).  The
floats only propose; every child is accepted by an exact check.  The cover is
**complete** when every node was decided: every tie-free input of the domain is then in
exactly one listed region.  A budget (``max_regions``, ``seconds``) stops the walk: the
regions found are real, the cover is not complete.

On a region the rows of the Jacobian ``J(x)`` of the outputs in the parameters are affine
in ``x``, so ``n0 + 1`` affinely independent points of the region give all of them
(the ``points`` of :class:`Region`); :func:`exactident.symmetry.region_fdim.cover_rank` ranks them over
all the regions of a complete cover: the functional dimension itself.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import flint
import numpy as np

from exactident.budget import stage
from exactident.errors import UnsupportedCaseError
from exactident.linalg.exact_lp import is_certificate
from exactident.model.network import Network
from exactident.symmetry.linewalk import exact_floats

__all__ = ["Region", "RegionCover", "enumerate_regions", "lp_solver_installed"]

_ZERO = flint.fmpq(0)
Box = tuple[Sequence[flint.fmpq], Sequence[flint.fmpq]]
Row = tuple[list[flint.fmpq], flint.fmpq]  # (a, e): the strict inequality a . x + e > 0


@dataclass
class Region:
    """One activation region: its pattern and ``n0 + 1`` affinely independent points strictly inside.

    Attributes
    ----------
    pattern : tuple of tuple of bool
        ``pattern[l - 1][v]``: neuron ``v`` of hidden layer ``l`` active.
    points : list of list of fmpq
        ``x0`` and ``x0 + eps e_j`` (``j = 1..n0``), ``eps`` a power of two: every hidden
        pre-activation has the pattern's strict sign at each (exact).
    """

    pattern: tuple[tuple[bool, ...], ...]
    points: list[list[flint.fmpq]]


@dataclass
class RegionCover:
    """The regions found, and whether they are all the regions meeting the domain.

    Attributes
    ----------
    regions : list of Region
    complete : bool
        Every node of the walk was decided exactly: every tie-free input of the domain is in one
        of ``regions``.
    reason : str
        Why the cover is not complete (empty when it is).
    empty : int
        Children proved empty (Farkas certificates, a constant row of the wrong sign, the exact simplex).
    lps : int
        Float LPs solved (proposals only).
    seconds : float
    """

    regions: list[Region] = field(default_factory=list)
    complete: bool = False
    reason: str = ""
    empty: int = 0
    lps: int = 0
    seconds: float = 0.0


def lp_solver_installed() -> bool:
    """Whether the LP proposals of the cover can run (highspy or scipy importable), without importing either."""
    import importlib.util

    return any(importlib.util.find_spec(m) is not None for m in ("highspy", "scipy"))


def _linprog():
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


def _value(row: Row, x: Sequence[flint.fmpq]) -> flint.fmpq:
    a, e = row
    s = e
    for aj, xj in zip(a, x):
        if aj != _ZERO:
            s += aj * xj
    return s


def _scaled(row: Row) -> Row:
    """``row`` times ``2^-k``, its largest entry then in ``1/2 < |v| < 2``: its float copy is finite (10^400)."""
    a, e = row
    k = max((int(v.p).bit_length() - int(v.q).bit_length() for v in (*a, e) if v != _ZERO), default=0)
    f = flint.fmpq(1, 2 ** k) if k >= 0 else flint.fmpq(2 ** -k)
    return ([v * f for v in a], e * f) if k else row


def _floats(row: Row) -> tuple[np.ndarray, float]:
    return np.array([float(v) for v in row[0]]), float(row[1])


def _inside(rows: Sequence[Row], x: Sequence[flint.fmpq]) -> bool:
    return all(_value(r, x) > _ZERO for r in rows)


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


def _region_points(rows: Sequence[Row], x0: list[flint.fmpq]) -> list[list[flint.fmpq]]:
    """``x0`` and ``x0 + eps e_j`` with ``eps`` a power of two small enough that every row stays positive."""
    eps = flint.fmpq(1)
    for a, e in rows:
        big = max((abs(v) for v in a), default=_ZERO)
        if big != _ZERO:
            room = _value((a, e), x0) / (2 * big)
            while eps >= room:
                eps /= 2
    return [list(x0)] + [[v + eps if i == j else v for i, v in enumerate(x0)] for j in range(len(x0))]


def _root(net: Network, box: Box | None) -> tuple[list[Row], list[flint.fmpq]]:
    n0 = net.widths[0]
    if box is None:
        return [], [_ZERO] * n0
    rows: list[Row] = []
    for j in range(n0):
        unit = [_ZERO] * n0
        unit[j] = flint.fmpq(1)
        rows.append(_scaled((unit, -box[0][j])))
        rows.append(_scaled(([-v for v in unit], box[1][j])))
    return rows, [(box[0][j] + box[1][j]) / 2 for j in range(n0)]


def enumerate_regions(net: Network, box: Box | None = None, *, max_regions: int = 50_000,
                      seconds: float | None = None) -> RegionCover:
    """Every activation region meeting ``R^n`` (or the open ``box``), each proved (module docstring).

    Parameters
    ----------
    net : Network
        A layered ReLU network over Q.
    box : (lo, hi), optional
        Lists of ``n0`` rationals, ``lo < hi``; None: all of ``R^n``.  When some ``lo >= hi`` the
        open box is empty: no region, and the cover is complete.
    max_regions : int
        Stop (cover not complete) when this many regions are found.
    seconds : float, optional
        Stop (cover not complete) after this much time.

    Returns
    -------
    RegionCover
        ``complete`` when every tie-free input of the domain is in one of its regions.

    Raises
    ------
    UnsupportedCaseError
        scipy (the LP proposals) is not installed.

    Examples
    --------
    ``relu(x) - relu(-x - 1)`` cuts the line at ``0`` and ``-1``: three regions.

    >>> net = Network((1, 2, 1), [[[1], [-1]], [[1, -1]]], [[0, -1], [0]])
    >>> cover = enumerate_regions(net)
    >>> cover.complete, sorted(r.pattern for r in cover.regions)
    (True, [((False, False),), ((False, True),), ((True, False),)])
    """
    linprog = _linprog()
    start = time.perf_counter()
    cover = RegionCover()
    n0 = net.widths[0]
    neurons = [(l, v) for l in net.hidden_layers() for v in range(net.widths[l])]
    rows0, x0 = _root(net, box)
    ident = flint.fmpq_mat(n0, n0, [flint.fmpq(int(i == j)) for i in range(n0) for j in range(n0)])
    # a node: (index of the next neuron, rows, float rows, point, affine map of h_{l-1} (M, m), pattern so far)
    empty_box = box is not None and any(lo >= hi for lo, hi in zip(box[0], box[1]))  # no input: complete, no region
    stack: list[tuple] = [] if empty_box else [(0, rows0, [_floats(r) for r in rows0], x0, (ident, [_ZERO] * n0),
                                                None, ())]
    ticks = 0
    while stack:
        k, rows, frows, x, (M, m), Z, pat = stack.pop()
        ticks += 1
        if ticks % 256 == 0:
            stage("activation regions", regions=len(cover.regions), open=len(stack))
            if seconds is not None and time.perf_counter() - start > seconds:
                cover.reason = f"time budget of {seconds:g} s"
                break
        if k == len(neurons):
            cover.regions.append(Region(_split(net, pat), _region_points(rows, x)))
            if len(cover.regions) >= max_regions and stack:
                cover.reason = f"more than {max_regions} regions"
                break
            continue
        l, v = neurons[k]
        if v == 0:  # entering layer l: z_l = W_l (M x + m) + b_l on this node, exactly
            W = net.W[l - 1]
            Z = (W * M, [sum((W[i, j] * m[j] for j in range(len(m))), net.b[l - 1][i])
                         for i in range(net.widths[l])])
        ZM, zc = Z
        a = [ZM[v, j] for j in range(n0)]
        e = zc[v]
        children = []
        for s in (1, -1):
            row = _scaled(([s * aj for aj in a], s * e))
            if all(aj == _ZERO for aj in a):
                if s * e > _ZERO:
                    children.append((s, rows, frows, x))  # always true here: no new row
                else:
                    cover.empty += 1
                continue
            new_rows = rows + [row]
            new_f = frows + [_floats(row)]
            if _value(row, x) > _ZERO:
                children.append((s, new_rows, new_f, x))
                continue
            verdict, pt = _decide(linprog, new_rows, new_f, cover)
            if verdict == "realised":
                children.append((s, new_rows, new_f, pt))
            else:
                cover.empty += 1
        for s, r2, f2, p2 in children:
            pat2 = pat + (s > 0,)
            if v == net.widths[l] - 1:  # layer l done: h_l = diag(active) z_l on the child
                act = pat2[-net.widths[l]:]
                M2 = flint.fmpq_mat(net.widths[l], n0, [ZM[i, j] if act[i] else _ZERO
                                                         for i in range(net.widths[l]) for j in range(n0)])
                stack.append((k + 1, r2, f2, p2, (M2, [zc[i] if act[i] else _ZERO for i in range(len(zc))]),
                              None, pat2))
            else:
                stack.append((k + 1, r2, f2, p2, (M, m), Z, pat2))
    cover.complete = not stack and not cover.reason
    cover.seconds = time.perf_counter() - start
    return cover


def _decide(linprog, rows: list[Row], frows: list[tuple[np.ndarray, float]],
            cover: RegionCover) -> tuple[str, list[flint.fmpq] | None]:
    """A child whose parent's point is outside it: ``("realised", point)`` or ``("empty", None)``, proved."""
    A, e = np.array([f[0] for f in frows]), np.array([f[1] for f in frows])
    if np.all(np.any(A, axis=1)):  # a float row of zeros has no direction for the LP's ball
        cover.lps += 1
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


def _split(net: Network, pat: tuple[bool, ...]) -> tuple[tuple[bool, ...], ...]:
    out, k = [], 0
    for l in net.hidden_layers():
        out.append(tuple(pat[k:k + net.widths[l]]))
        k += net.widths[l]
    return tuple(out)

