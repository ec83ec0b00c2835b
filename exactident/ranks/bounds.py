"""Cheap certified upper bounds on ``rank alpha`` (paper Prop. 11) that need no kernel.

Called by :mod:`exactident.ranks.certify` and :mod:`exactident.verify.rank`.
"""

from __future__ import annotations

from collections.abc import Sequence

import flint
import numpy as np

from exactident.linalg import exact

__all__ = ["pattern_rank_bound"]


def pattern_rank_bound(pattern: Sequence[np.ndarray], X: Sequence[Sequence[flint.fmpq]]) -> int:
    """``rank alpha <= sum_g rank [X_g, 1]`` over groups ``g`` of samples with the same pattern.

    Samples with one activation pattern have ``alpha`` rows ``(x ⊗ t, c)`` with
    ``t, c`` fixed, linear in ``(x, 1)``; rank is subadditive over row groups.
    Exact (small ``fmpq`` ranks).

    Examples
    --------
    >>> X = [[flint.fmpq(k)] for k in range(5)]
    >>> pattern_rank_bound([np.array([[True]] * 5)], X)
    2
    """
    groups: dict[tuple, list[int]] = {}
    n = len(X)
    for i in range(n):
        rows = [np.asarray(a[i], dtype=bool) for a in pattern]
        dead = [m for m, a in enumerate(rows) if not a.any()]
        if dead:
            # a whole layer m inactive: every path through it is 0, the row no longer depends
            # on x nor on the layers before m -- one fixed row for the group (rank <= 1)
            key = ("dead", dead[-1]) + tuple(a.tobytes() for a in rows[dead[-1] + 1:])
        else:
            key = ("live",) + tuple(a.tobytes() for a in rows)
        groups.setdefault(key, []).append(i)
    total = 0
    for key, rows_g in groups.items():
        if key[0] == "dead":
            total += 1
            continue
        M = flint.fmpq_mat(len(rows_g), len(X[0]) + 1, [v for i in rows_g for v in list(X[i]) + [flint.fmpq(1)]])
        total += exact.rank(M)
    return total
