"""First-order entering test at ties: derivatives ``g_t`` and strict directions (docs/theory.md, verdict rules).

At a tie ``t = (i, l, v)`` the pre-activation ``z_l(x^i)_v`` is exactly zero.
For a tie resolution ``s`` the network restricted to the piece of ``s`` is a
polynomial in ``tau`` (active neurons act as the identity, inactive ones as
zero), and ``g_t(s) = d z_l(x^i)_v / d tau`` at ``tau_theta`` is a row vector
of length ``dim`` computed by backpropagation from neuron ``(l, v)`` through
the upstream pattern of ``s`` (fixed edges are not parameters), exactly as
:mod:`exactident.model.gamma` does from the output layer.

A direction ``delta`` *enters* the piece of ``s`` when
``sign_t(s) * g_t(s) . delta > 0`` for every tie ``t`` (strict).  Such a
``delta`` is found by :func:`find_strict_direction`:

1. a zero row makes the strict system infeasible (``0 > 0``): answer ``None``;
2. scipy's HiGHS LP in float64 on ``G c >= 1`` (rows normalised), then the
   float solution is rationalised (small denominators first, then the exact
   binary value) and **accepted only after an exact check** ``G c > 0`` in Q;
3. otherwise (no scipy, HiGHS failed, or no rationalisation passed) exact
   Fourier–Motzkin elimination in integers, which always terminates and gives
   up beyond :data:`MAX_FM_ROWS` combined rows.  (sympy's exact simplex was
   used here first; it looped forever on a 3 x 4 degenerate system.)

``None`` means "no direction found": it does not prove that none exists
(callers report ``reachable: "unknown"``).  Called by
:mod:`exactident.boundary.analyse`.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from math import gcd, lcm

import flint
import numpy as np

from exactident.model.activation import Tie
from exactident.model.fixed_edges import FixedEdges
from exactident.model.gamma import free_columns, hidden_values
from exactident.model.network import Network

__all__ = ["MAX_FM_ROWS", "TieGradients", "find_strict_direction", "is_strictly_entering", "primitive_integer",
           "relaxed_directions"]

#: Fourier–Motzkin gives up when one elimination step would combine more row pairs.
MAX_FM_ROWS = 20_000


class TieGradients:
    """Exact ``g_t(s)`` for the ties of one network and sample.

    Parameters
    ----------
    net : Network
    X : n rows of N_0 fmpq
    Z : list of fmpq_mat
        Pre-activations (:func:`exactident.model.activation.activation_state`).
    fixed : FixedEdges

    Examples
    --------
    The hand-checked network of docs/theory.md ``f = 3 relu(2x + 1)``: at the kink ``x = -1/2``,
    ``z = w_1 x + b_1`` so ``g = (x, 1, 0) = (-1/2, 1, 0)`` over ``(w_1, b_1, b_2)``.

    >>> from exactident.model.activation import activation_state
    >>> from exactident.model.fixed_edges import fixed_edges
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])],
    ...               [[flint.fmpq(1)], [flint.fmpq(0)]])
    >>> X = [[flint.fmpq(0)], [flint.fmpq(-1, 2)]]
    >>> st = activation_state(net, X)
    >>> TieGradients(net, X, st.Z, fixed_edges(net)).gradient(st.pattern, st.ties[0])
    [-1/2, 1, 0]
    """

    def __init__(self, net: Network, X: Sequence[Sequence[flint.fmpq]], Z: Sequence[flint.fmpq_mat],
                 fixed: FixedEdges) -> None:
        self.net = net
        self.cols = free_columns(net, fixed)
        self._H = [Hl.table() for Hl in hidden_values(net, X, Z)]

    def gradient(self, pattern: Sequence[np.ndarray], tie: Tie) -> list[flint.fmpq]:
        """``g_t``: derivative of ``z_l(x^i)_v`` w.r.t. ``tau`` under ``pattern``.

        Parameters
        ----------
        pattern : list of bool arrays ``(n, N_m)``
            A tie-resolved activation pattern (only layers ``< l`` at sample
            ``i`` matter).
        tie : Tie

        Returns
        -------
        list of fmpq, length ``dim`` (Q)
        """
        net, i, l, v = self.net, tie.i, tie.l, tie.v
        zero = flint.fmpq(0)
        # D[m-1] = d z_l(x^i)_v / d z_m (row of length N_m), m = 1..l.
        D: list[list[flint.fmpq]] = [[flint.fmpq(int(u == v)) for u in range(net.widths[l])]]
        for m in range(l - 1, 0, -1):
            W = net.W[m].table()  # W_{m+1}, shape (N_{m+1}, N_m)
            up = D[0]
            mask = pattern[m - 1][i]
            D.insert(0, [sum((up[r] * W[r][c] for r in range(len(up))), zero) if mask[c] else zero
                         for c in range(net.widths[m])])
        full: list[flint.fmpq] = []
        for m in range(1, net.L + 1):
            n_out, n_in = net.widths[m], net.widths[m - 1]
            if m <= l:
                h = self._H[m - 1][i]
                for d in D[m - 1]:
                    full.extend(d * hv for hv in h)
                full.extend(D[m - 1])
            else:
                full.extend([zero] * (n_out * n_in + n_out))
        return [full[c] for c in self.cols]


def is_strictly_entering(rows: Sequence[Sequence[flint.fmpq]], c: Sequence[flint.fmpq]) -> bool:
    """Exact check ``row . c > 0`` for every row (Q)."""
    zero = flint.fmpq(0)
    return all(sum((a * b for a, b in zip(row, c) if a != zero), zero) > zero for row in rows)


def primitive_integer(c: Sequence[Fraction | flint.fmpq]) -> list[flint.fmpq]:
    """The primitive integer vector on the ray of ``c`` (positive scaling keeps strict signs).

    Examples
    --------
    >>> primitive_integer([Fraction(0), Fraction(3, 2), Fraction(-9, 2)])
    [0, 1, -3]
    """
    c = [x if isinstance(x, Fraction) else _to_fraction(x) for x in c]
    den = lcm(*(x.denominator for x in c)) if c else 1
    ints = [int(x * den) for x in c]
    g = 0
    for x in ints:
        g = gcd(g, x)
    g = g or 1
    return [flint.fmpq(x // g) for x in ints]


def _to_fraction(q: flint.fmpq) -> Fraction:
    return Fraction(int(q.p), int(q.q))


def _float_candidates(rows: Sequence[Sequence[flint.fmpq]]) -> list[list[Fraction]]:
    try:
        from scipy.optimize import linprog
    except ImportError:
        return []
    fr = [[_to_fraction(a) for a in row] for row in rows]
    A = []
    for row in fr:  # positive row scaling: same feasible set, sane float magnitudes
        big = max(abs(a) for a in row)
        A.append([-float(a / big) for a in row])
    ncols = len(rows[0])
    try:
        res = linprog(np.zeros(ncols), A_ub=np.array(A), b_ub=-np.ones(len(A)),
                      bounds=[(None, None)] * ncols, method="highs")
    except (ValueError, RuntimeError):
        return []
    if res.status != 0 or res.x is None or not np.all(np.isfinite(res.x)):
        return []
    out = []
    for max_den in (1, 12, 1000, 10**6):
        out.append([Fraction(float(x)).limit_denominator(max_den) for x in res.x])
    out.append([Fraction(float(x)) for x in res.x])  # exact binary value of the float
    return out


def _primitive_row(row: Sequence[int]) -> tuple[int, ...]:
    g = 0
    for v in row:
        g = gcd(g, v)
    return tuple(v // g for v in row) if g > 1 else tuple(row)


def _fourier_motzkin(rows: Sequence[Sequence[flint.fmpq]]) -> tuple[list[Fraction] | None, str]:
    """Exact decision of ``{c : row . c > 0 for every row}`` by Fourier–Motzkin elimination.

    Eliminating a variable combines each row with a positive coefficient and
    each with a negative one (positive multipliers keep ``> 0``); a zero row
    is a positive combination summing to 0, which proves infeasibility
    (Gordan's alternative).  It always terminates; :data:`MAX_FM_ROWS` bounds
    the row growth, beyond which it gives up (``None``, "too large").
    Back-substitution picks each variable strictly inside its interval.
    """
    R: set[tuple[int, ...]] = set()
    for row in rows:
        d = lcm(*(int(a.q) for a in row))
        R.add(_primitive_row([int(a.p) * (d // int(a.q)) for a in row]))
    ncols = len(rows[0])
    stages: list[tuple[int, list[tuple[int, ...]]]] = []
    for j in range(ncols):
        P = [r for r in R if r[j] > 0]
        N = [r for r in R if r[j] < 0]
        if len(P) * len(N) > MAX_FM_ROWS:
            return None, "too large for the exact Fourier-Motzkin fallback"
        new = {r for r in R if r[j] == 0}
        for p in P:
            for m in N:
                new.add(_primitive_row([-m[j] * pk + p[j] * mk for pk, mk in zip(p, m)]))
        if any(not any(r) for r in new):
            return None, "infeasible (exact Fourier-Motzkin)"
        stages.append((j, list(R)))
        R = new
    # Invariants: R is empty (every variable eliminated, no zero row), so the system is feasible.
    c = [Fraction(0)] * ncols
    for j, stage_rows in reversed(stages):
        lo = hi = None
        for r in stage_rows:
            if r[j] == 0:
                continue
            bound = -sum((r[k] * c[k] for k in range(j + 1, ncols)), Fraction(0)) / r[j]
            if r[j] > 0:
                lo = bound if lo is None else max(lo, bound)
            else:
                hi = bound if hi is None else min(hi, bound)
        if lo is not None and hi is not None:
            c[j] = (lo + hi) / 2
        elif lo is not None:
            c[j] = lo + 1
        elif hi is not None:
            c[j] = hi - 1
    return c, "exact Fourier-Motzkin"


def find_strict_direction(rows: Sequence[Sequence[flint.fmpq]]) -> tuple[list[flint.fmpq] | None, str]:
    """Find ``c`` with ``row . c > 0`` for every row, exactly checked.

    Parameters
    ----------
    rows : list of list of fmpq, each of length ``k >= 0``
        The rows ``sign_t g_t`` (possibly expressed in kernel coordinates).

    Returns
    -------
    (c, how) : (list of fmpq or None, str)
        ``c`` a primitive integer vector satisfying every strict inequality
        (checked in Q), or ``None``; ``how`` says which method found it or
        why none was found (``"zero row"``, ``"infeasible (exact Fourier-Motzkin)"``,
        ...); those two prove that no first-order direction exists.

    Examples
    --------
    >>> q = flint.fmpq
    >>> rows = [[q(1), q(-1)], [q(0), q(1)]]
    >>> c, how = find_strict_direction(rows)
    >>> is_strictly_entering(rows, c)
    True
    >>> find_strict_direction([[q(1)], [q(-1)]])
    (None, 'infeasible (exact Fourier-Motzkin)')
    """
    if not rows:
        return [], "no constraint"
    ncols = len(rows[0])
    if any(all(a == 0 for a in row) for row in rows) or ncols == 0:
        return None, "zero row"
    for cand in _float_candidates(rows):
        c = primitive_integer(cand)
        if is_strictly_entering(rows, c):
            return c, "float LP, exactly checked"
    exact, how = _fourier_motzkin(rows)
    if exact is None:
        return None, how
    c = primitive_integer(exact)
    if is_strictly_entering(rows, c):  # rational by construction, but check anyway
        return c, how
    return None, "exact Fourier-Motzkin answer failed the exact check"


def relaxed_directions(rows: Sequence[Sequence[flint.fmpq]], k: int) -> list[list[flint.fmpq]]:
    """Float LP points of ``{c in Q^k : row . c >= 0 for all rows, c_j = +-1}``, rationalised.

    Candidates only (empty without scipy): callers check whatever they use exactly.
    """
    try:
        from scipy.optimize import linprog
    except ImportError:
        return []
    fr = [[_to_fraction(a) for a in row] for row in rows]
    A = [[-float(a / max(abs(x) for x in row)) for a in row] for row in fr if any(row)]
    out = []
    for j in range(k):
        for sign in (1, -1):
            bounds = [(-100, 100)] * k
            bounds[j] = (sign, sign)
            try:
                res = linprog(np.zeros(k), A_ub=np.array(A) if A else None, b_ub=np.zeros(len(A)) if A else None,
                              bounds=bounds, method="highs")
            except (ValueError, RuntimeError):
                continue
            if res.status == 0 and res.x is not None and np.all(np.isfinite(res.x)):
                out.append(primitive_integer([Fraction(float(x)).limit_denominator(1000) for x in res.x]))
    return out
