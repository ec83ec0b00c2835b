"""Cheap certified upper bounds on ``rank alpha`` (paper Prop. 11) that need no kernel.

Called by :mod:`exactident.ranks.certify` and :mod:`exactident.verify.rank`.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import lcm, prod

import flint
import numpy as np

from exactident.linalg import exact

__all__ = ["alpha_column_kernel", "pattern_count_bound", "pattern_rank_bound"]


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


def _block_columns(widths: Sequence[int]) -> list[list[int]]:
    """Columns of ``alpha`` grouped by the last-hidden-layer neuron ``v`` their path ends at.

    Column order of :func:`exactident.model.activation.alpha_exact`: for each start
    layer ``l = 0..L-1`` a block of ``N_l ... N_{L-1}`` paths whose last index (fastest)
    is the neuron of layer ``L-1``; then ``beta``.  Within each group the columns are
    in the order of the truncated network's ``alpha'`` (see :func:`alpha_column_kernel`).
    """
    L = len(widths) - 1
    N = widths[L - 1]
    groups: list[list[int]] = [[] for _ in range(N)]
    offset = 0
    for l in range(L):
        size = prod(widths[l:L])
        for c in range(size):
            groups[c % N].append(offset + c)
        offset += size
    return groups


def alpha_column_kernel(pattern: Sequence[np.ndarray], X: Sequence[Sequence[flint.fmpq]],
                        widths: Sequence[int]) -> list[dict[int, flint.fmpq]]:
    """Exact kernel vectors of ``alpha`` from its column blocks (paper Prop. 1), independent.

    Group the paths by the neuron ``v`` of the last hidden layer they end at.  The
    columns of group ``v`` are ``alpha[i, group v] = a_v(x^i) alpha'(x^i)``, where
    ``alpha'`` is the activation operator of the network truncated before layer
    ``L - 1`` (its ``beta`` is the path that starts at ``v``; with one hidden layer
    ``alpha'(x) = (x, 1)``).  Hence, with ``S_v`` the samples where ``v`` is active:

    - *block*: ``u`` in ``ker alpha'(X_{S_v})`` placed on group ``v`` is in ``ker alpha``
      (the block is zero outside ``S_v``); this is the column-block bound
      ``rank alpha <= 1 + sum_v rank alpha'(X_{S_v})``;
    - *pair*: for two neurons ``v, w``, ``u`` in ``ker alpha'(X_{S_v Δ S_w})`` placed as
      ``-u`` on group ``v`` and ``+u`` on group ``w`` is in ``ker alpha``: on
      ``S_v ∩ S_w`` the two contributions cancel, on the symmetric difference one of
      them is ``alpha'(x) u = 0``, elsewhere both are zero.  (Neurons with nested
      active sets, one active on a few more samples than the other, give these.)

    - *beta*: for ``v`` active on every sample, the column of the path that starts
      at ``v`` is all ones, like ``beta``: their difference is in ``ker alpha``.

    Every vector is exact by construction; a maximal subset independent mod a fixed
    prime (so over Q) is returned, so ``rank alpha <= |P| - len(result)``.

    Returns
    -------
    list of dict column -> fmpq
        Sparse columns indexed like :func:`exactident.model.activation.alpha_exact`.

    Examples
    --------
    Two neurons active on the same samples: their blocks ``(x a_v, a_v)`` coincide,
    so ``alpha`` (5 columns) has rank 3 (two copies of ``[x, 1]`` and ``beta``).

    >>> X = [[flint.fmpq(k)] for k in range(4)]
    >>> pat = [np.array([[True, True], [True, True], [False, False], [True, True]])]
    >>> len(alpha_column_kernel(pat, X, (1, 2, 1)))
    2
    """
    from exactident.model.activation import alpha_exact, n_paths
    from exactident.ranks.kernels import _SELECT_PRIME, _integer_kernel, independent_subset

    L = len(widths) - 1
    n = len(X)
    if L < 2 or n == 0:
        return []
    groups = _block_columns(widths)
    # Kernels depend only on the distinct rows: merge samples equal in x and in pattern.
    keep = list(range(n))
    if n > 5000:  # exact keys: merging rows that differ would make the kernels wrong
        seen: dict[tuple, int] = {}
        for i in range(n):
            seen.setdefault((tuple((int(v.p), int(v.q)) for v in map(flint.fmpq, X[i])),
                             *(np.asarray(a[i]).tobytes() for a in pattern)), i)
        keep = sorted(seen.values())
    if len(keep) < n:
        X = [X[i] for i in keep]
        pattern = [np.asarray(a)[keep] for a in pattern]
        n = len(X)
    a = np.asarray(pattern[-1], dtype=bool)
    sub = alpha_exact(list(pattern[:-1]), X).table()  # alpha'(X), n x |P'|, scaled to integers below
    d = lcm(1, *(int(v.q) for row in sub for v in row))
    rows = np.array([[int(v.p) * (d // int(v.q)) for v in row] for row in sub], dtype=object)
    rows_res = (rows % _SELECT_PRIME).astype(np.int64)
    width = rows.shape[1]

    def ker(S: np.ndarray) -> list[list[int]]:
        idx = np.flatnonzero(S)
        return _integer_kernel(rows[idx], rows_res[idx])

    vectors: list[dict[int, flint.fmpq]] = []
    for v, cols in enumerate(groups):
        for u in ker(a[:, v]):
            vectors.append({cols[r]: flint.fmpq(x) for r, x in enumerate(u) if x})
    N = a.shape[1]
    P = n_paths(widths)
    for v in range(N):
        if a[:, v].all():
            # always active: the path that starts at v (its column is a_v = 1) equals beta
            vectors.append({groups[v][-1]: flint.fmpq(1), P - 1: flint.fmpq(-1)})
    for v in range(N):
        for w in range(v + 1, N):
            diff = a[:, v] ^ a[:, w]
            if not (a[:, v] & a[:, w]).any() or int(diff.sum()) >= width:
                continue
            for u in ker(diff):
                vec = {groups[v][r]: flint.fmpq(-x) for r, x in enumerate(u) if x}
                vec.update({groups[w][r]: flint.fmpq(x) for r, x in enumerate(u) if x})
                vectors.append(vec)
    return independent_subset(vectors, P)


def pattern_count_bound(pattern: Sequence[np.ndarray], N0: int) -> int:
    """``sum_g min(|g|, N_0 + 1)`` over groups of samples with one pattern: at least the pattern-group bound."""
    n = pattern[0].shape[0] if pattern else 0
    if n == 0 or not pattern:
        return n
    keys = np.packbits(np.concatenate([np.asarray(a, dtype=bool) for a in pattern], axis=1), axis=1)
    _u, counts = np.unique(keys, axis=0, return_counts=True)
    return int(np.minimum(counts, N0 + 1).sum())
