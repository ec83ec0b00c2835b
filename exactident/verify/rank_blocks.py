"""The verifier's own ``active-blocks`` upper bound on ``R_Gamma`` (nothing taken from the engine).

Column by column (the free parameters of the case, in ``Gamma``'s order): the column of ``W_l[v, j]``
or ``b_l[v]`` is ``delta_{k,v}(x_i) h_{l-1}(x_i)[j]`` (``h[j] = 1`` for the bias) on row ``(i, k)``
(Prop. 10), so it can be nonzero only on the samples where neuron ``v`` is active (every sample for
an output neuron) *and* ``h_{l-1}(x_i)[j] != 0`` (``x_i[j] != 0`` on the first layer, neuron ``j``
active above it).  On the rows of one sample the columns of neuron ``v`` are all multiples of
``delta_{., v}(x_i)``, so the block of ``v`` has rank at most the number of samples on which one of
its columns can be nonzero, and at most its number of columns that can be nonzero anywhere.  The
bound is the sum over neurons of the smaller count: a rank of a column concatenation is at most the
sum of the blocks' ranks.
"""

from __future__ import annotations

from collections.abc import Sequence

import flint
import numpy as np

from exactident.model.fixed_edges import FixedEdges, free_parameters
from exactident.model.network import Network

__all__ = ["active_blocks_bound"]


def active_blocks_bound(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                        fixed: FixedEdges) -> int:
    """The ``active-blocks`` bound recomputed from the case and the verifier's pattern (see module).

    Parameters
    ----------
    net, X
        The case's network and sample (Q).
    pattern : list of bool arrays ``(n, N_l)``, hidden ``l = 1..L-1``
        The activation pattern the certificate is about, derived by the caller.
    fixed : FixedEdges

    Returns
    -------
    int

    Examples
    --------
    >>> from exactident.model.fixed_edges import fixed_edges
    >>> from exactident.model.activation import activation_state
    >>> net = Network((1, 2, 1), [flint.fmpq_mat([[1], [1]]), flint.fmpq_mat([[2, 3]])],
    ...               [[flint.fmpq(0), flint.fmpq(-5, 2)], [flint.fmpq(0)]])
    >>> X = [[flint.fmpq(1)], [flint.fmpq(2)], [flint.fmpq(3)]]
    >>> active_blocks_bound(net, X, activation_state(net, X).pattern, fixed_edges(net))
    4
    """
    n = len(X)
    # support[l][i, j]: h_l(x_i)[j] can be nonzero (l = 0: the input itself)
    support = [np.array([[v != 0 for v in row] for row in X], dtype=bool).reshape(n, net.widths[0])]
    support += [np.asarray(a, dtype=bool).reshape(n, net.widths[l + 1]) for l, a in enumerate(pattern)]
    blocks: dict[tuple[int, int], list[np.ndarray]] = {}
    for prm in free_parameters(net, fixed):
        on = support[prm.l][:, prm.i] if prm.l < net.L else np.ones(n, dtype=bool)
        if prm.j is not None:
            on = on & support[prm.l - 1][:, prm.j]
        blocks.setdefault((prm.l, prm.i), []).append(on)
    total = 0
    for cols in blocks.values():
        live = [c for c in cols if c.any()]
        if live:
            rows = int(np.logical_or.reduce(live).sum())
            total += min(rows, len(live))
    return total
