"""An upper bound on ``rank Gamma`` from the activation pattern alone: the ``active-blocks`` bound.

Group the columns of ``Gamma`` by the neuron they enter: neuron ``v`` of layer ``l`` (hidden or
output) owns the free entries of ``W_l[v, :]`` and ``b_l[v]``.  By Prop. 10 the row of sample
``x_i``, output ``k`` of that column block is ``delta_{k,v}(x_i) (h_{l-1}(x_i), 1)``, where
``delta_{k,v}(x_i) = d f_k / d z_l[v]`` vanishes when ``v`` is inactive at ``x_i`` (hidden ``v``) or
``k != v`` (output ``v``).  So

- every nonzero row of the block is a multiple of one vector per sample on which ``v`` is active:
  the block's rank is at most ``n_v``, the number of those samples;
- a column ``W_l[v, j]`` is zero on the block unless ``h_{l-1}(x_i)[j] != 0`` for some such
  sample (``x_i[j] != 0`` for ``l = 1``; neuron ``j`` of layer ``l - 1`` active for ``l >= 2``):
  the block's rank is at most ``c_v``, its free columns that are not identically zero;

and ``rank Gamma <= sum_v min(n_v, c_v)`` (the rank of a matrix is at most the sum of the ranks
of its column blocks).  Nothing is computed but counts over the pattern; the bound is exact
arithmetic-free and holds over Q (and mod every prime).

It matters for wide ``Gamma`` on trained networks: a first-layer neuron active on ``n_v < N_0 + 1``
samples contributes at most ``n_v`` to the rank instead of ``N_0 + 1`` (the MNIST 784-30-30-30-10
network of docs/performance.md on 20,000 rows: the bound is below the row count, so
``R_Gamma < R_A`` is certified without a single kernel vector).  Used by
:func:`exactident.ranks.certify.certify_ranks`; the verifier recomputes it on its own
(:mod:`exactident.verify.rank_blocks`).
"""

from __future__ import annotations

from collections.abc import Sequence

import flint
import numpy as np

from exactident.model.fixed_edges import FixedEdges
from exactident.model.network import Network

__all__ = ["active_block_bound"]


def active_block_bound(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                       fixed: FixedEdges) -> int:
    """``sum_v min(n_v, c_v)`` over all non-input neurons ``v``: an upper bound on ``rank Gamma`` (see module).

    Parameters
    ----------
    net : Network
    X : n rows of N_0 fmpq
        The sample (only which entries are zero is used).
    pattern : list of bool arrays ``(n, N_l)``, hidden ``l = 1..L-1``
        The activation pattern of ``Gamma`` (a tie resolution or the ``>= 0`` pattern).
    fixed : FixedEdges
        The fixed outgoing edges (their columns are not in ``Gamma``).

    Returns
    -------
    int
        An upper bound on ``rank Gamma`` over Q, at most ``dim`` and at most ``n N_L`` (not
        necessarily below them).

    Examples
    --------
    A 1-2-1 network whose second hidden neuron is active on one sample of three: its block
    (``W_1[1,0]``, ``b_1[1]``) has rank at most 1; the first neuron's at most 2 (two columns); both
    of the output's weights are fixed edges, so its block is ``b_2[0]`` alone: ``2 + 1 + 1 = 4 < dim``.

    >>> from exactident.model.fixed_edges import fixed_edges
    >>> from exactident.model.activation import activation_state
    >>> net = Network((1, 2, 1), [flint.fmpq_mat([[1], [1]]), flint.fmpq_mat([[2, 3]])],
    ...               [[flint.fmpq(0), flint.fmpq(-5, 2)], [flint.fmpq(0)]])
    >>> X = [[flint.fmpq(1)], [flint.fmpq(2)], [flint.fmpq(3)]]
    >>> net.dim, active_block_bound(net, X, activation_state(net, X).pattern, fixed_edges(net))
    (5, 4)
    """
    n, L = len(X), net.L
    if n == 0:
        return 0
    # nonzero[i, j]: h_{l-1}(x_i)[j] may be nonzero (x_i[j] != 0 on layer 1, neuron j active above)
    nonzero = np.array([[v != 0 for v in row] for row in X], dtype=bool).reshape(n, net.widths[0])
    total = 0
    for l in range(1, L + 1):
        width = net.widths[l]
        live = np.asarray(pattern[l - 1], dtype=bool).reshape(n, width) if l < L else np.ones((n, width), bool)
        for v in range(width):
            rows = live[:, v]
            n_v = int(rows.sum())
            if n_v == 0:
                continue
            seen = nonzero[rows].any(axis=0)
            c_v = 1 + sum(1 for j in np.flatnonzero(seen) if not fixed.is_fixed(l, v, int(j)))  # + b_l[v]
            total += min(n_v, c_v)
        if l < L:
            nonzero = live
    return total
