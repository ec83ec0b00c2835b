"""The verifier's check of the ``left-kernel`` upper bound on ``R_Gamma`` (last hidden layer).

The vectors are rebuilt from the case (:func:`exactident.ranks.left_kernel.last_layer_left_kernel`)
and each is *proved* a left kernel vector of ``Gamma`` here, from Prop. 10: writing ``c_i`` for
its entries on the rows of sample ``i``, ``y^T Gamma = 0`` as soon as

- ``c_i^T W_L[:, a] = 0`` for every neuron ``a`` of layer ``L - 1`` active at ``x_i`` (then ``c_i``
  kills ``D_{l,i}`` for every ``l < L``: all columns of layers ``1..L-1``), and
- ``sum_i c_i[k] h_{L-1,i}[a] = 0`` for every free ``W_L`` entry ``(k, a)`` and
  ``sum_i c_i[k] = 0`` for every ``b_L`` entry ``k`` (the last layer's columns),

both checked exactly (FLINT products); their independence by a rank mod a prime (a lower bound
on the rank over Q).  The bound is ``rows - t`` for the ``t`` vectors proved.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from math import lcm

import flint
import numpy as np

from exactident.linalg.modular import random_primes, rank_mod_p
from exactident.model.fixed_edges import FixedEdges
from exactident.model.integer_forward import integer_forward
from exactident.model.network import Network
from exactident.ranks.left_kernel import last_layer_left_kernel

__all__ = ["left_kernel_bound"]


def left_kernel_bound(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                      fixed: FixedEdges) -> int:
    """``n N_L - t``: an upper bound on ``R_Gamma`` from ``t`` left kernel vectors proved here (see module).

    Returns ``n N_L`` (the trivial bound) when a rebuilt vector fails a check or they are not
    independent mod the prime drawn.

    Examples
    --------
    >>> from exactident.model.fixed_edges import fixed_edges
    >>> from exactident.model.activation import activation_state
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[1]]), flint.fmpq_mat([[3]])],
    ...               [[flint.fmpq(-5)], [flint.fmpq(0)]])
    >>> X = [[flint.fmpq(0)], [flint.fmpq(1)]]
    >>> left_kernel_bound(net, X, activation_state(net, X).pattern, fixed_edges(net))
    1
    """
    L, N_L, n = net.L, net.widths[-1], len(X)
    rows = n * N_L
    ys = last_layer_left_kernel(net, X, pattern, fixed)
    if not ys:
        return rows
    width = net.widths[L - 1]
    Z = integer_forward(net, X).Z()[L - 2]
    mask = np.asarray(pattern[L - 2], dtype=bool).reshape(n, width)
    # [h_{L-1}, 1]: h = z where active (at a tie z = 0 either way)
    H1 = flint.fmpq_mat(n, width + 1, [(Z[i, a] if mask[i, a] else 0) if a < width else 1
                                       for i in range(n) for a in range(width + 1)])
    W = net.W[L - 1]
    for y in ys:
        C = flint.fmpq_mat(n, N_L)
        for r, v in y.items():
            if not 0 <= r < rows:
                return rows
            C[r // N_L, r % N_L] = v
        CW = C * W  # n x width: sample i's combination of W_L's rows
        if any(CW[i, a] != 0 for i, a in zip(*np.nonzero(mask))):
            return rows
        last = C.transpose() * H1  # N_L x (width + 1): the last layer's columns
        if any(last[k, a] != 0 for k in range(N_L) for a in range(width + 1)
               if a == width or not fixed.is_fixed(L, k, a)):
            return rows
    dens = 1
    for y in ys:
        for v in y.values():
            dens = lcm(dens, int(v.q))
    p = random_primes(1, dens, random.Random(len(ys)))[0]
    Y = np.zeros((len(ys), rows), dtype=np.int64)
    for j, y in enumerate(ys):
        for r, v in y.items():
            Y[j, r] = int(v.p) % p * pow(int(v.q), -1, p) % p
    if rank_mod_p(Y, p) != len(ys):
        return rows
    return rows - len(ys)
