"""An exact upper bound on ``rank alpha`` from its row space, pattern by pattern (paper Prop. 1).

For a fixed activation pattern ``p`` (all hidden layers), the row of ``alpha`` at a
sample ``x`` is ``(x, 1) M_p`` with ``M_p`` a fixed 0/1 matrix of shape
``(N_0 + 1, |P|)`` (:func:`pattern_matrix`).  Group the samples by pattern,
``R_p`` the samples of group ``p`` and ``V_p = rowspace [X_{R_p}, 1]``; then

    rowspace alpha = sum_p V_p M_p.

Choose any set ``F`` of groups and let ``W_F = sum_{p in F} rowspace M_p`` (it
contains ``V_p M_p`` for ``p`` in ``F``, with equality when ``V_p = Q^{N_0+1}``).
Let ``pi`` be the linear map "reduce modulo ``W_F``" (subtract the rows of the
reduced row echelon form ``E`` of ``W_F`` at its pivots: ``ker pi = W_F``).  Then

    rank alpha <= dim W_F + dim pi(sum_{q not in F} V_q M_q)
               <= dim W_F + sum_{q not in F} rank([X_{R_q}, 1] pi(M_q)),

the first step because ``rowspace alpha`` is contained in ``W_F + sum_q V_q M_q`` and
``dim(W + U) = dim W + dim pi(U)``, the second by subadditivity.  Every term is an
exact rank of a small matrix: ``E`` and ``pi(M_q)`` have the small entries of 0/1
matrices, and ``[X_{R_q}, 1] pi(M_q)`` has ``|R_q|`` rows and ``rank pi(M_q) <=
N_0 + 1`` useful columns.  The bound holds for *any* ``F``; it is tight when the
groups of ``F`` have ``V_p = Q^{N_0+1}`` (many samples in general position) and the
other groups meet only inside ``W_F``.  The engine takes for ``F`` the groups whose
``[X_{R_p}, 1]`` has rank ``N_0 + 1`` mod a fixed prime (then over Q too).

Called by :mod:`exactident.ranks.certify`; :mod:`exactident.verify.rank_rowspace`
recomputes the bound with its own code.
"""

from __future__ import annotations

from collections.abc import Sequence

import flint
import numpy as np

from exactident.linalg.modular import rank_mod_p
from exactident.model.activation import n_paths

__all__ = ["FULL_GROUP_PRIME", "MAX_ROWSPACE_ENTRIES", "MAX_ROWSPACE_WORK", "pattern_groups", "pattern_matrix",
           "pattern_rowspace_bound"]

#: The prime used to decide which groups are full (any choice gives a valid bound).
FULL_GROUP_PRIME = 2_147_483_629

#: The bound is tried only when ``W_F``'s generators ``|F| (N_0 + 1) x |P|`` have at most this many entries.
MAX_ROWSPACE_ENTRIES = 4_000_000

#: ... and when all the groups' ``M_p`` together have at most this many entries.
MAX_ROWSPACE_WORK = 50_000_000


def pattern_matrix(row: Sequence[np.ndarray], N0: int) -> np.ndarray:
    """``M_p``: the 0/1 matrix with ``alpha(x) = (x, 1) M_p`` at pattern ``p`` (Prop. 1).

    Parameters
    ----------
    row : list of bool arrays ``(N_l,)``, ``l = 1..L-1``
        The activation pattern of one sample.
    N0 : int
        The input width.

    Returns
    -------
    numpy.ndarray of int64, shape ``(N_0 + 1, |P|)``
        Row ``j < N_0`` is ``e_j ⊗ a_1 ⊗ ... ⊗ a_{L-1}`` on the paths from input ``j``;
        row ``N_0`` holds the paths from hidden neurons and ``beta`` (column order of
        :func:`exactident.model.activation.alpha_exact`).

    Examples
    --------
    >>> pattern_matrix([np.array([True, False])], 1).tolist()
    [[1, 0, 0, 0, 0], [0, 0, 1, 0, 1]]
    """
    tail = np.ones(1, dtype=np.int64)
    blocks = []
    for a in reversed(row):
        tail = np.kron(np.asarray(a, dtype=np.int64), tail)
        blocks.append(tail)
    blocks.reverse()
    t = tail.size
    width = N0 * t + sum(b.size for b in blocks) + 1
    M = np.zeros((N0 + 1, width), dtype=np.int64)
    for j in range(N0):
        M[j, j * t:(j + 1) * t] = tail
    M[N0, N0 * t:] = np.concatenate(blocks + [np.ones(1, dtype=np.int64)])
    return M


def pattern_groups(pattern: Sequence[np.ndarray], n: int) -> list[np.ndarray]:
    """Sample indices grouped by their full activation pattern (all hidden layers), in order of first sample.

    Examples
    --------
    >>> [g.tolist() for g in pattern_groups([np.array([[True], [False], [True]])], 3)]
    [[0, 2], [1]]
    """
    if n == 0:
        return []
    if not pattern:
        return [np.arange(n)]
    bits = np.concatenate([np.asarray(a, dtype=bool).reshape(n, -1) for a in pattern], axis=1)
    _u, first, inv = np.unique(np.packbits(bits, axis=1), axis=0, return_index=True, return_inverse=True)
    inv = np.asarray(inv).reshape(-1)
    order = np.argsort(first, kind="stable")
    return [np.flatnonzero(inv == g) for g in order]


def _x1_rows(X: Sequence[Sequence[flint.fmpq]], idx: np.ndarray) -> flint.fmpz_mat:
    """``[X_{idx}, 1]`` scaled row by row to integers (same row space)."""
    from exactident.linalg.exact import to_integer_rows

    N0 = len(X[0]) if X else 0
    return to_integer_rows(flint.fmpq_mat(len(idx), N0 + 1,
                                          [v for i in idx for v in list(X[int(i)]) + [flint.fmpq(1)]]))


def pattern_rowspace_bound(pattern: Sequence[np.ndarray], X: Sequence[Sequence[flint.fmpq]],
                           widths: Sequence[int]) -> tuple[int, int] | None:
    """``rank alpha <= dim W_F + sum_q rank([X_q, 1] pi(M_q))`` (module docstring), exact.

    Parameters
    ----------
    pattern : activation pattern, bool arrays ``(n, N_l)``
    X : n rows of N_0 fmpq
    widths : the network's widths

    Returns
    -------
    (bound, full) or None
        The upper bound and ``|F|``, the number of full groups; None past the size caps
        :data:`MAX_ROWSPACE_ENTRIES` and :data:`MAX_ROWSPACE_WORK`.

    Examples
    --------
    One neuron, active on three samples of a line and off on two (both groups full):
    ``W_F`` is spanned by ``(x a, a + beta)`` for the first and ``beta`` for the second.

    >>> X = [[flint.fmpq(k)] for k in range(5)]
    >>> pattern_rowspace_bound([np.array([[True]] * 3 + [[False]] * 2)], X, (1, 1, 1))
    (3, 2)
    """
    n, N0, P = len(X), widths[0], n_paths(widths)
    groups = pattern_groups(pattern, n)
    if len(groups) * (N0 + 1) * P > MAX_ROWSPACE_WORK:
        return None
    Ms = [pattern_matrix([np.asarray(a)[int(g[0])] for a in pattern], N0) for g in groups]
    Bs = [_x1_rows(X, g) for g in groups]
    full = [k for k, B in enumerate(Bs) if _is_full(B, FULL_GROUP_PRIME)]
    if len(full) * (N0 + 1) * P > MAX_ROWSPACE_ENTRIES:
        return None
    E, den, pivots = _echelon([Ms[k] for k in full], P)
    total = len(pivots)  # dim W_F
    in_F = set(full)
    for k, B in enumerate(Bs):
        if k in in_F:
            continue
        # den * pi(M): subtract the echelon rows at the pivots (E is den times the rref of W_F)
        N = flint.fmpz_mat(Ms[k].tolist()) * den
        if E is not None:
            N -= flint.fmpz_mat(Ms[k][:, pivots].tolist()) * E
        # over Q (inside R), N^T is injective on rowspace N: rank(B N) = rank(B N N^T), N_0 + 1 columns
        total += int((B * (N * N.transpose())).rank())
    return total, len(full)


def _echelon(Ms: list[np.ndarray], P: int) -> tuple[flint.fmpz_mat | None, int, list[int]]:
    """``d E`` (``E`` the rref of the stacked rows, zero rows dropped), ``d`` and the pivot columns."""
    if not Ms:
        return None, 1, []
    E_all, d, r = flint.fmpz_mat(np.concatenate(Ms, axis=0).tolist()).rref()
    E_np = np.array(E_all.tolist(), dtype=object)[:int(r)]
    pivots = [int(np.flatnonzero(E_np[k])[0]) for k in range(int(r))]
    return (flint.fmpz_mat(E_np.tolist()) if int(r) else None), int(d), pivots


def _is_full(B: flint.fmpz_mat, p: int) -> bool:
    """``rank B = ncols`` mod ``p`` (hence over Q: a rank mod p is a lower bound)."""
    m, k = B.nrows(), B.ncols()
    if m < k:
        return False
    res = np.array([[int(B[i, j]) % p for j in range(k)] for i in range(m)], dtype=np.int64)
    return rank_mod_p(res, p) == k
