"""Exact decision of a strict linear system ``a_h . x + e_h > 0`` over Q by the simplex method.

The linear program ``max t`` subject to ``a_h . x + e_h >= t`` (every ``h``) and ``t <= 1``
is solved over Q (python-flint ``fmpq``) by the two-phase simplex method with Bland's rule
(smallest index entering and leaving), which never cycles, so it terminates on every input,
degenerate or not.  The system has a solution iff ``t* > 0``; then the optimal ``x`` is one.
Otherwise the optimal dual ``y`` (``y >= 0``, ``sum_h y_h a_h = 0``, ``sum_h y_h e_h = t* <= 0``,
``sum_h y_h = 1``) is a Farkas certificate that it has none.

Used where floats cannot decide: the exact fallback of the region cover
(:mod:`exactident.symmetry.regions`), for nearly parallel hyperplanes whose intersection lies
far beyond the float LP's tolerance.  Sizes there are tens of rows in a few variables; the
cost is ``O(rows * cols)`` exact operations per pivot.
"""

from __future__ import annotations

from collections.abc import Sequence

import flint

from exactident.errors import InvariantViolation

__all__ = ["is_certificate", "strict_solution"]

_ZERO = flint.fmpq(0)
_ONE = flint.fmpq(1)


def _pivot(T: list[list[flint.fmpq]], r: int, c: int) -> None:
    piv = T[r][c]
    T[r] = [v / piv for v in T[r]]
    row = T[r]
    for i in range(len(T)):
        if i != r and T[i][c] != _ZERO:
            f = T[i][c]
            T[i] = [a - f * b for a, b in zip(T[i], row)]


def _simplex(T: list[list[flint.fmpq]], basis: list[int], allowed: int) -> bool:
    """Maximise the objective row ``T[-1]`` (reduced costs ``-c``) over columns ``< allowed``, Bland's rule.

    ``T`` has one row per constraint then the objective row; the last column is the right-hand
    side.  Returns False when unbounded (not reached by the programs of this module).
    """
    m = len(T) - 1
    while True:
        enter = next((j for j in range(allowed) if T[-1][j] < _ZERO), None)
        if enter is None:
            return True
        best = None
        for i in range(m):
            if T[i][enter] > _ZERO:
                ratio = T[i][-1] / T[i][enter]
                if best is None or ratio < best[0] or (ratio == best[0] and basis[i] < basis[best[1]]):
                    best = (ratio, i)
        if best is None:
            return False
        _pivot(T, best[1], enter)
        basis[best[1]] = enter


def strict_solution(rows: Sequence[tuple[Sequence[flint.fmpq], flint.fmpq]]
                    ) -> tuple[list[flint.fmpq] | None, list[flint.fmpq] | None]:
    """``(x, None)`` with ``a_h . x + e_h > 0`` for every row, or ``(None, y)`` a Farkas certificate.

    Parameters
    ----------
    rows : list of (a, e)
        ``a`` a list of ``n`` rationals (Q), ``e`` a rational; at least one row.

    Returns
    -------
    (x, y)
        Exactly one is not None.  ``y`` (one multiplier per row, Q) satisfies ``y >= 0``,
        ``sum y = 1``, ``sum_h y_h a_h = 0`` and ``sum_h y_h e_h <= 0``, which no ``x`` can meet
        if every row were positive.

    Examples
    --------
    >>> q = flint.fmpq
    >>> strict_solution([([q(1)], q(0)), ([q(1)], q(-1))])[0]   # x > 0 and x > 1
    [2]
    >>> strict_solution([([q(1)], q(-1)), ([q(-1)], q(0))])[1]   # x > 1 and -x > 0
    [1/2, 1/2]
    """
    m, n = len(rows), len(rows[0][0])
    # columns: x+ (n), x- (n), t+, t-, s (m slacks), u (t <= 1), then m + 1 artificials; the right-hand side
    n_cols = 2 * n + 2 + m + 1
    T: list[list[flint.fmpq]] = []
    for h, (a, e) in enumerate(rows):  # a.x - t - s_h = -e
        row = list(a) + [-v for v in a] + [-_ONE, _ONE] + [-_ONE if k == h else _ZERO for k in range(m)] + [_ZERO]
        rhs = -e
        if rhs < _ZERO:
            row, rhs = [-v for v in row], -rhs
        T.append(row + [_ONE if k == h else _ZERO for k in range(m + 1)] + [rhs])
    T.append([_ZERO] * (2 * n) + [_ONE, -_ONE] + [_ZERO] * m + [_ONE] + [_ZERO] * m + [_ONE] + [_ONE])  # t + u = 1
    basis = [n_cols + i for i in range(m + 1)]
    # phase 1: maximise -(sum of artificials); reduced costs = -(sum of the rows) on the original columns
    T.append([-sum((T[i][j] for i in range(m + 1)), _ZERO) if j < n_cols else _ZERO for j in range(n_cols + m + 1)]
             + [-sum((T[i][-1] for i in range(m + 1)), _ZERO)])
    _simplex(T, basis, n_cols)
    if T[-1][-1] != _ZERO:  # never: t can always go down to make every row hold
        raise InvariantViolation("phase 1 of the strict system found no feasible point")
    for i, bv in enumerate(basis):  # drive degenerate artificials out of the basis
        if bv >= n_cols:
            j = next((j for j in range(n_cols) if T[i][j] != _ZERO), None)
            if j is not None:
                _pivot(T, i, j)
                basis[i] = j
    # phase 2: maximise t = t+ - t-
    cost = [_ZERO] * n_cols
    cost[2 * n], cost[2 * n + 1] = _ONE, -_ONE
    obj = [-c for c in cost] + [_ZERO] * (m + 1) + [_ZERO]
    for i, bv in enumerate(basis):
        if bv < n_cols and cost[bv] != _ZERO:
            obj = [o + cost[bv] * v for o, v in zip(obj, T[i])]
    T[-1] = obj
    _simplex(T, basis, n_cols)
    value = [_ZERO] * n_cols
    for i, bv in enumerate(basis):
        if bv < n_cols:
            value[bv] = T[i][-1]
    t = value[2 * n] - value[2 * n + 1]
    if t > _ZERO:
        x = [value[j] - value[n + j] for j in range(n)]
        if not all(_dot(a, x) + e > _ZERO for a, e in rows):
            raise InvariantViolation("the simplex point does not satisfy the strict system")
        return x, None
    # the optimal dual of the rows: the reduced cost of slack s_h is y_h (its column is -e_h-row's unit)
    y = [T[-1][2 * n + 2 + h] for h in range(m)]
    if not is_certificate(rows, y):
        raise InvariantViolation("the simplex dual is not a Farkas certificate")
    return None, y


def _dot(a: Sequence[flint.fmpq], x: Sequence[flint.fmpq]) -> flint.fmpq:
    return sum((u * v for u, v in zip(a, x)), _ZERO)


def is_certificate(rows: Sequence[tuple[Sequence[flint.fmpq], flint.fmpq]], y: Sequence[flint.fmpq]) -> bool:
    """``y >= 0``, ``y != 0``, ``sum_h y_h a_h = 0`` and ``sum_h y_h e_h <= 0``: no ``x`` has every row positive.

    (At such an ``x``, ``sum_h y_h (a_h . x + e_h)`` would be positive, yet it equals ``sum_h y_h e_h <= 0``.)
    """
    if any(v < _ZERO for v in y) or all(v == _ZERO for v in y):
        return False
    n = len(rows[0][0])
    if any(sum((yh * a[j] for yh, (a, _) in zip(y, rows)), _ZERO) != _ZERO for j in range(n)):
        return False
    return sum((yh * e for yh, (_, e) in zip(y, rows)), _ZERO) <= _ZERO
