"""The verifier's own computation of the pattern row-space bound on ``rank alpha`` (paper Prop. 1).

Recomputed from the case and the pattern alone, by a route different from the
engine's (:mod:`exactident.ranks.rowspace`): ``M_p`` is read off
:func:`exactident.model.activation.alpha_exact` at the unit inputs
(``alpha`` is affine in ``x`` for a fixed pattern: row ``j`` of ``M_p`` is
``alpha(e_j) - alpha(0)``, row ``N_0`` is ``alpha(0)``), the full groups are
those with ``rank [X_{R_p}, 1] = N_0 + 1`` over Q, the reduction modulo ``W_F`` is
done over Q with the rref of ``W_F``, and each ``rank([X_{R_q}, 1] pi(M_q))`` is an
exact rank of the product itself.  The bound

    rank alpha <= dim W_F + sum_{q not in F} rank([X_{R_q}, 1] pi(M_q))

holds for any set ``F`` of groups (docs/performance.md), so a certificate of kind
``pattern-rowspace`` is accepted when this recomputed bound equals the claimed one.  (The
engine finds its full groups mod a prime, a subset of these; adding a full group never
raises the bound, and a bound that met the rank cannot go lower, so the two agree.)
"""

from __future__ import annotations

from collections.abc import Sequence

import flint
import numpy as np

from exactident.linalg import exact
from exactident.model.activation import alpha_exact, n_paths
from exactident.ranks.rowspace import MAX_ROWSPACE_WORK

__all__ = ["rowspace_bound"]


def _unit_matrix(row: Sequence[np.ndarray], N0: int) -> flint.fmpq_mat:
    """``M_p`` from ``alpha_exact`` at ``0, e_1, ..., e_{N_0}`` (``(N_0 + 1) x |P|``, over Q)."""
    pat = [np.asarray(a, dtype=bool).reshape(1, -1).repeat(N0 + 1, axis=0) for a in row]
    inputs = [[flint.fmpq(int(i == j)) for j in range(N0)] for i in range(N0)] + [[flint.fmpq(0)] * N0]
    A = alpha_exact(pat, inputs)
    P = A.ncols()
    base = [A[N0, c] for c in range(P)]
    return flint.fmpq_mat(N0 + 1, P, [A[i, c] - base[c] for i in range(N0) for c in range(P)] + base)


def rowspace_bound(pattern: Sequence[np.ndarray], X: Sequence[Sequence[flint.fmpq]],
                   widths: Sequence[int]) -> int | None:
    """The pattern row-space upper bound on ``rank alpha``, recomputed exactly over Q.

    None past the engine's size cap (``groups x (N_0 + 1) x |P|`` entries above
    :data:`exactident.ranks.rowspace.MAX_ROWSPACE_WORK`): the engine never claims the bound
    there, and recomputing it would cost minutes and gigabytes (a forged claim is not verified).

    Examples
    --------
    >>> X = [[flint.fmpq(k)] for k in range(5)]
    >>> rowspace_bound([np.array([[True]] * 3 + [[False]] * 2)], X, (1, 1, 1))
    3
    """
    n, N0, P = len(X), widths[0], n_paths(widths)
    if n == 0:
        return 0
    groups: dict[bytes, list[int]] = {}
    for i in range(n):
        groups.setdefault(b"".join(np.asarray(a[i], dtype=bool).tobytes() for a in pattern), []).append(i)
    if len(groups) * (N0 + 1) * P > MAX_ROWSPACE_WORK:
        return None
    full: list[tuple[flint.fmpq_mat, flint.fmpq_mat]] = []
    rest: list[tuple[flint.fmpq_mat, flint.fmpq_mat]] = []
    for members in groups.values():
        B = flint.fmpq_mat(len(members), N0 + 1, [v for i in members for v in list(X[i]) + [flint.fmpq(1)]])
        M = _unit_matrix([np.asarray(a)[members[0]] for a in pattern], N0)
        (full if exact.rank(B) == N0 + 1 else rest).append((B, M))
    if full:
        W = flint.fmpq_mat(len(full) * (N0 + 1), P, [M[i, c] for _B, M in full for i in range(N0 + 1)
                                                     for c in range(P)])
        E, dim = W.rref()
        dim = int(dim)
    else:
        E, dim = flint.fmpq_mat(0, P), 0
    pivots = [next(c for c in range(P) if E[k, c] != 0) for k in range(dim)]
    E_top = flint.fmpq_mat(dim, P, [E[k, c] for k in range(dim) for c in range(P)])
    total = dim
    for B, M in rest:
        if dim:  # reduce M modulo W_F: subtract the rref rows at the pivots
            M = M - flint.fmpq_mat(N0 + 1, dim, [M[i, c] for i in range(N0 + 1) for c in pivots]) * E_top
        total += exact.rank(B * M)
    return total
