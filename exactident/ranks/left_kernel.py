"""Exact left kernel vectors of ``Gamma`` from the last hidden layer (an upper bound ``rows - t``).

For a sample ``x_i`` whose last hidden layer has active set ``A_i`` (pattern of layer
``L - 1``), every row block of ``Gamma`` for the parameters of layers ``l < L`` is
``D_{l,i} (x) h_{l-1,i}`` with ``D_{l,i} = W_L diag(m_{L-1,i}) (...)`` (Prop. 10), so a
combination ``c`` of the ``N_L`` rows of sample ``i`` with ``c^T W_L[:, A_i] = 0`` vanishes
on all of them; on the last layer's columns it is ``c (x) (h_{L-1,i}, 1)`` (``W_L`` entry
``(k, a)``: ``c_k h_{L-1,i}[a]``; ``b_L`` entry ``k``: ``c_k``).  A combination
``y = sum_i e_i (x) c_i`` (``c_i`` in the left kernel of ``W_L[:, A_i]``) is therefore a left
kernel vector of ``Gamma`` iff ``sum_i c_i (x) (h_{L-1,i}, 1) = 0`` on the free columns of
the last layer: a linear system of ``N_L (N_{L-1} + 1)`` equations in ``sum_i (N_L -
rank W_L[:, A_i])`` unknowns, solved exactly (FLINT).  The map from unknowns to ``y`` is
injective (disjoint samples, a basis per sample), so its nullity ``t`` gives
``R_Gamma <= n N_L - t``.

This is the row dependency of wide ``Gamma`` on trained networks whose last hidden layer
has fewer than ``N_L`` active neurons on some samples (the MNIST 784-30-30-30-10 network of
docs/performance.md: nullity 41 on 600 images, which is exactly ``6000 - rank Gamma``).
Used by :func:`exactident.ranks.certify.certify_ranks` as the ``left-kernel`` upper bound for a wide,
row-deficient ``Gamma``; :mod:`exactident.verify.rank_left` proves the vectors.
"""

from __future__ import annotations

from collections.abc import Sequence

import flint
import numpy as np

from exactident.linalg import exact
from exactident.model.fixed_edges import FixedEdges
from exactident.model.integer_forward import integer_forward
from exactident.model.network import Network

__all__ = ["last_layer_left_kernel"]


def last_layer_left_kernel(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                           fixed: FixedEdges) -> list[dict[int, flint.fmpq]]:
    """A basis of the left kernel vectors of ``Gamma`` that come from the last hidden layer (see module).

    Parameters
    ----------
    net, X, pattern, fixed
        As for :func:`exactident.model.gamma.gamma_exact`.

    Returns
    -------
    list of dict row -> fmpq
        Sparse vectors ``y`` over the rows of ``Gamma`` (row ``i N_L + k``), linearly independent,
        with ``y^T Gamma = 0`` over Q; empty when ``L < 2`` or there is none.

    Examples
    --------
    One output fed by one hidden neuron that is inactive on both samples: ``W_2[:, A_i]`` is
    empty, so each sample's row only lives on ``b_2`` (entry 1), and the two rows are equal.

    >>> from exactident.model.fixed_edges import fixed_edges
    >>> from exactident.model.activation import activation_state
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[1]]), flint.fmpq_mat([[3]])],
    ...               [[flint.fmpq(-5)], [flint.fmpq(0)]])
    >>> X = [[flint.fmpq(0)], [flint.fmpq(1)]]
    >>> ys = last_layer_left_kernel(net, X, activation_state(net, X).pattern, fixed_edges(net))
    >>> [sorted((r, str(v)) for r, v in y.items()) for y in ys]
    [[(0, '1'), (1, '-1')]]
    """
    L, N_L, n = net.L, net.widths[-1], len(X)
    if L < 2 or n == 0:
        return []
    width = net.widths[L - 1]
    Z = integer_forward(net, X).Z()[L - 2]  # z_{L-1}, n x N_{L-1}
    mask = np.asarray(pattern[L - 2], dtype=bool).reshape(n, width)
    W = net.W[L - 1]
    bases: dict[tuple[int, ...], list[list[flint.fmpq]]] = {}
    unknowns: list[tuple[int, list[flint.fmpq]]] = []
    for i in range(n):
        act = tuple(int(a) for a in np.flatnonzero(mask[i]))
        if act not in bases:
            if act:
                K = exact.nullspace(flint.fmpq_mat([[W[k, a] for k in range(N_L)] for a in act]))
                bases[act] = [[K[k, j] for k in range(N_L)] for j in range(K.ncols())]
            else:
                bases[act] = [[flint.fmpq(int(k == j)) for k in range(N_L)] for j in range(N_L)]
        unknowns.extend((i, c) for c in bases[act])
    if not unknowns:
        return []
    pairs = [(k, a) for k in range(N_L) for a in range(width) if not fixed.is_fixed(L, k, a)]
    C = flint.fmpq_mat(len(pairs) + N_L, len(unknowns))
    for u, (i, c) in enumerate(unknowns):
        h = [Z[i, a] if mask[i, a] else flint.fmpq(0) for a in range(width)]
        for r, (k, a) in enumerate(pairs):
            if c[k] != 0 and h[a] != 0:
                C[r, u] = c[k] * h[a]
        for k in range(N_L):
            C[len(pairs) + k, u] = c[k]
    K = exact.nullspace(C)
    out: list[dict[int, flint.fmpq]] = []
    for j in range(K.ncols()):
        y: dict[int, flint.fmpq] = {}
        for u, (i, c) in enumerate(unknowns):
            z = K[u, j]
            if z == 0:
                continue
            for k in range(N_L):
                if c[k] != 0:
                    y[i * N_L + k] = y.get(i * N_L + k, flint.fmpq(0)) + z * c[k]
        out.append({r: v for r, v in y.items() if v != 0})
    return out
