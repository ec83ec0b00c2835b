"""Exact kernel vectors of ``Gamma`` found from the network's structure (paper Prop. 10).

A neuron active on few samples has incoming-parameter columns of ``Gamma``
that vanish outside those samples' rows; the small block's exact kernel
extends by zeros to kernel vectors of ``Gamma``.  These give the upper bound
on ``rank Gamma`` without reconstructing a kernel mod many primes.

Called by :mod:`exactident.ranks.certify` and :mod:`exactident.verify.rank`.
"""

from __future__ import annotations

from collections.abc import Sequence

import flint
import numpy as np

from exactident.errors import InvariantViolation
from exactident.linalg import exact
from exactident.model.fixed_edges import FixedEdges
from exactident.model.gamma import gamma_exact
from exactident.model.integer_forward import integer_forward
from exactident.model.network import Network

__all__ = ["neuron_local_kernel", "sparse_columns"]


def sparse_columns(K: flint.fmpq_mat) -> list[dict[int, flint.fmpq]]:
    rows = K.table()
    return [{i: rows[i][c] for i in range(K.nrows()) if rows[i][c] != 0} for c in range(K.ncols())]


def neuron_local_kernel(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                        fixed: FixedEdges) -> list[dict[int, flint.fmpq]]:
    """Exact kernel vectors of ``Gamma`` supported on one hidden neuron's incoming parameters.

    A hidden neuron ``v`` of layer ``l`` inactive at sample ``x^i`` has
    ``d f(x^i) / d (W_l[v, :], b_l[v]) = 0`` (the ReLU derivative ``a_v(x^i)``
    is a factor), so the columns ``C_v`` of its incoming parameters vanish
    outside the rows of its active samples ``S_v``.  When ``|S_v| N_L < |C_v|``
    (a neuron active on few samples), every vector of the exact kernel of the
    small block ``Gamma[S_v, C_v]`` (extended by zeros) is in ``ker Gamma``.

    Returns
    -------
    list of dict index -> fmpq
        Sparse columns (indices into :func:`exactident.model.fixed_edges.free_parameters`);
        disjoint supports, so they are independent.
    """
    from exactident.model.fixed_edges import free_parameters

    params = free_parameters(net, fixed)
    cols: dict[tuple[int, int], list[int]] = {}
    for c, prm in enumerate(params):
        cols.setdefault((prm.l, prm.i), []).append(c)
    N_L, n = net.widths[-1], len(X)
    fw = integer_forward(net, X)
    # h_{l-1}(x^i)_j != 0, exactly (inputs, then strictly positive pre-activations)
    h_nonzero = [np.array([v != 0 for v in H.entries()], dtype=bool).reshape(n, net.widths[l])
                 for l, H in enumerate(fw.H_int)]
    out: list[dict[int, flint.fmpq]] = []
    for (l, v), C in sorted(cols.items()):
        active = pattern[l - 1][:, v] if l < net.L else np.ones(n, dtype=bool)
        S = [i for i in range(n) if active[i]]
        if l == net.L or len(S) * N_L >= len(C):
            # Too many rows for a small block: keep only the structurally zero columns
            # (W_l[v, j] with h_{l-1, j} = 0 wherever v is active; b_l[v] if v is never active).
            for c in C:
                prm = params[c]
                zero = not active.any() if prm.j is None else not (active & h_nonzero[l - 1][:, prm.j]).any()
                if zero:
                    out.append({c: flint.fmpq(1)})
            continue
        X_S = [X[i] for i in S]
        G = gamma_exact(net, X_S, integer_forward(net, X_S).Z(), [a[S] for a in pattern], fixed)
        block = flint.fmpq_mat(G.nrows(), len(C), [G[r, c] for r in range(G.nrows()) for c in C])
        K = exact.nullspace(block)
        if block * K != flint.fmpq_mat(block.nrows(), K.ncols()):
            raise InvariantViolation("exact nullspace of a Gamma block is not a kernel")
        rows = K.table()
        for j in range(K.ncols()):
            out.append({C[r]: rows[r][j] for r in range(len(C)) if rows[r][j] != 0})
    return out
