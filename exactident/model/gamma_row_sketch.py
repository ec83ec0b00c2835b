"""Row sketches ``R Gamma mod p`` of a very tall ``Gamma`` from the backpropagation, never building ``Gamma``.

Row ``r = i N_L + k`` of ``Gamma`` (sample ``x_i``, output ``k``) is ``D_l[r, :] (x) h_{l-1}(x_i)`` on the
``W_l`` columns and ``D_l[r, :]`` on the ``b_l`` columns (Prop. 10).  So a combination of rows is, per layer,

    (R Gamma)[t, (v, j)] = sum_r R[t, r] D_l[r, v] h_{l-1}(x_{r // N_L})[j]
    (R Gamma)[t, b_v]    = sum_r R[t, r] D_l[r, v]

a product of ``(R * D_l)`` with ``h_{l-1}``: ``rows x N_l x N_{l-1}`` work per layer for the sparse ``R`` of
:func:`exactident.linalg.blas_modp.sketch_rows_sparse` (one or two nonzeros per column), against ``rows x dim``
entries of ``Gamma mod p`` to build and then read twice.  The draws are those of ``sketch_rows_sparse`` and
:func:`exactident.linalg.blas_modp.sketch_rows` (the same seeds, the same order), so the residues are those
of the sketches of ``gamma_mod_p``'s ``Gamma`` (tests/test_gamma_row_sketch.py compares them).

The plain MLP only (its ``Gamma``'s columns are the free dense entries: :func:`exactident.model.gamma.free_columns`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import flint
import numpy as np

from exactident.linalg.draws import Draws
from exactident.linalg.modular import require_prime
from exactident.model.backprop import ModularData, column_blocks, hidden_and_backprop_mod_p
from exactident.model.fixed_edges import FixedEdges
from exactident.model.gamma import free_columns
from exactident.model.network import Network

__all__ = ["gamma_live_row_sketch_mod_p", "gamma_row_sketch_mod_p"]

#: Entries of the gathered ``(R * D_l)`` and ``h_{l-1}`` blocks of the sparse part (8 MB of float64 each).
_GATHER_ENTRIES = 1 << 20


def gamma_row_sketch_mod_p(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                           fixed: FixedEdges, p: int, k: int, dense: int = 16, avoid: int = 1,
                           data: ModularData | None = None) -> np.ndarray:
    """``[R_s Gamma; R_d Gamma] mod p``: the sparse sketch and ``dense`` dense random rows, without ``Gamma``.

    ``R_s`` is the ``k x rows`` matrix of ``sketch_rows_sparse(Gamma, k, p, seed=p)`` (two passes, each row of
    ``Gamma`` into one bucket per pass with a random nonzero coefficient) and ``R_d`` the ``dense x rows`` matrix of
    ``sketch_rows(Gamma, dense, p, random.Random(p))``: the stack that
    :func:`exactident.linalg.lower_bound.modular_lower_bound` eliminates for a very tall ``Gamma``.  Any ``R``
    gives ``rank_p(R Gamma) <= rank_p(Gamma)`` (a lower bound).

    Parameters
    ----------
    net : Network
        A plain network (dense ReLU MLP).
    X, pattern, fixed
        As for :func:`exactident.model.gamma_modular.gamma_mod_p`.
    p : int
        A prime below ``2**21`` dividing no denominator of the data (``avoid``).
    k, dense : int
        Rows of the sparse and of the dense part.
    data : ModularData, optional
        The case's data scaled to integers, if already built.

    Returns
    -------
    numpy.ndarray of float64, shape ``(k + dense, dim)``
        Symmetric residues mod p (Z/pZ): the sparse part's rows first.

    Raises
    ------
    InvariantViolation
        If ``p`` is not a prime below ``2**21`` or divides ``avoid``.

    Examples
    --------
    The hand-checked network of docs/theory.md on 40 samples (40 rows, 3 columns: very tall):

    >>> from exactident.model.activation import activation_state
    >>> from exactident.model.fixed_edges import fixed_edges
    >>> from exactident.linalg.blas_modp import rank_blas
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])],
    ...               [[flint.fmpq(1)], [flint.fmpq(0)]])
    >>> X = [[flint.fmpq(i, 7)] for i in range(40)]
    >>> S = gamma_row_sketch_mod_p(net, X, activation_state(net, X).pattern, fixed_edges(net), 1048583, 3 + 16)
    >>> S.shape, rank_blas(S, 1048583)
    ((35, 3), 2)
    """
    Hs, Ds, free = _backward(net, X, pattern, fixed, p, avoid, data)
    n, N_L = len(X), net.widths[-1]
    out = np.zeros((k + dense, free.size))
    _sparse_rows(Hs, Ds, net.widths, free, n * N_L, p, k, p, out[:k])
    if dense:
        _dense_rows(Hs, Ds, net.widths, free, n, p, dense, out[k:])
    return out


def gamma_live_row_sketch_mod_p(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                                fixed: FixedEdges, p: int, seed: int, avoid: int = 1,
                                data: ModularData | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(live, R_s Gamma[:, live] mod p)``: the columns of ``Gamma`` nonzero mod p and the sparse sketch of
    ``len(live) + 16`` rows of ``sketch_rows_sparse(Gamma, len(live) + 16, p, seed, cols=live)``, without ``Gamma``.

    Column ``(v, j)`` of layer ``l`` is nonzero mod p iff ``D_l[r, v] h_{l-1}(x_{r // N_L})[j] != 0`` for some row
    ``r`` (p is prime), a count of 0/1 products; a bias column iff ``D_l[:, v] != 0``.  As the verifier's first
    try on a very tall ``Gamma`` (:func:`exactident.verify.rank_kernel.tall_lower`).  Same parameters, domains
    and errors as :func:`gamma_row_sketch_mod_p`; ``live`` is an int64 array of column indices (increasing).
    """
    Hs, Ds, free = _backward(net, X, pattern, fixed, p, avoid, data)
    n, widths = len(X), net.widths
    N_L = widths[-1]
    nonzero = np.zeros(free.size, dtype=bool)
    for l, lo, hi, local, bias in column_blocks(widths, free):
        # sample i has a nonzero D_l[(i, k), v] for some output k: n x N_l, not n N_L x N_l
        Dz = (Ds[l - 1] != 0).reshape(n, N_L, widths[l]).any(axis=1).astype(np.float64)
        if hi > lo:  # counts of samples, below 2**53: exact
            nonzero[lo:hi] = (Dz.T @ (Hs[l - 1] != 0).astype(np.float64)).reshape(-1)[local] > 0
        nonzero[hi:hi + bias.size] = Dz.any(axis=0)[bias]
    live = np.flatnonzero(nonzero)
    out = np.zeros((live.size + 16, free.size))
    _sparse_rows(Hs, Ds, widths, free, n * N_L, p, live.size + 16, seed, out)
    return live, out[:, live]


def _backward(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray], fixed: FixedEdges,
              p: int, avoid: int, data: ModularData | None) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
    """``h_{l-1}`` and ``D_l`` as float64 symmetric residues mod p, and ``Gamma``'s dense columns (the free ones)."""
    from exactident.linalg.blas_modp import _check_prime, to_symmetric

    require_prime(p, avoid)
    _check_prime(p)
    H, D = hidden_and_backprop_mod_p(net, X, pattern, p, data)
    free = np.asarray(free_columns(net, fixed), dtype=np.int64)
    return [to_symmetric(np.asarray(h), p) for h in H], [to_symmetric(np.asarray(d), p) for d in D], free


def _sparse_rows(Hs: list[np.ndarray], Ds: list[np.ndarray], widths: Sequence[int], free: np.ndarray, m: int,
                 p: int, k: int, seed: int, out: np.ndarray) -> None:
    """``R_s Gamma`` into ``out``: per pass, bucket ``t`` holds rows ``perm[t], perm[t + k], ...`` (as in
    ``sketch_rows_sparse``), gathered as a ``(buckets, c, N_l)`` block and multiplied by its rows of ``h``."""
    from exactident.linalg.blas_modp import CHUNK, _reduce

    N_L = widths[-1]
    gen = Draws(seed)
    c_max = -(-m // k) if k else 0
    for _ in range(2):
        perm = gen.permutation(m)
        coef = np.asarray(gen.integers(1, p, size=m), dtype=np.float64)
        flat = np.full(k * c_max, m, dtype=np.int64)  # row m: a zero row (buckets of c_max - 1 rows)
        flat[:m] = perm
        idx = flat.reshape(c_max, k).T  # idx[t, c] = perm[c k + t]: bucket t
        coef = np.append(coef, 0.0)
        for l, lo, hi, local, bias in column_blocks(widths, free):
            Dl = np.vstack([Ds[l - 1], np.zeros((1, widths[l]))])
            Hl = np.vstack([Hs[l - 1], np.zeros((1, widths[l - 1]))])  # sample m // N_L = n: the zero row
            # buckets per block: the gathered (R * D_l) and h rows, and the block's products S
            step = max(1, _GATHER_ENTRIES // max(1, c_max * max(widths[l], widths[l - 1]) + widths[l] * widths[l - 1]))
            for t0 in range(0, k, step):
                rows = idx[t0:t0 + step]
                CD = _reduce(coef[rows][:, :, None] * Dl[rows], p)  # (buckets, c, N_l), |x| <= p / 2
                Hg = Hl[rows // N_L]                               # (buckets, c, N_{l-1})
                block = out[t0:t0 + step]
                if hi > lo:
                    S = np.zeros((len(rows), widths[l], widths[l - 1]))
                    for c0 in range(0, c_max, CHUNK):  # each product below 2**40, at most CHUNK summed: exact
                        S += _reduce(np.matmul(CD[:, c0:c0 + CHUNK].transpose(0, 2, 1), Hg[:, c0:c0 + CHUNK]), p)
                    block[:, lo:hi] += S.reshape(len(rows), -1)[:, local]
                block[:, hi:hi + bias.size] += CD.sum(axis=1)[:, bias]
                _reduce(block, p)


def _dense_rows(Hs: list[np.ndarray], Ds: list[np.ndarray], widths: Sequence[int], free: np.ndarray, n: int,
                p: int, dense: int, out: np.ndarray) -> None:
    """``R_d Gamma`` into ``out``: ``R_d`` drawn as ``sketch_rows`` draws it (blocks of 1024 rows), reduced over
    each sample's ``N_L`` rows first (``Y_t[i, v] = sum_k R_d[t, i N_L + k] D_l[i N_L + k, v]``), then ``Y_t^T h``."""
    from exactident.linalg.blas_modp import _SKETCH_ROWS, CHUNK, _reduce

    N_L, m = widths[-1], n * widths[-1]
    gen = Draws(random.Random(p).getrandbits(64))
    R = np.empty((dense, m))
    for s in range(0, m, _SKETCH_ROWS):
        R[:, s:s + _SKETCH_ROWS] = gen.integers(-(p // 2), p // 2 + 1, (dense, min(_SKETCH_ROWS, m - s)))
    R3 = R.reshape(dense, n, N_L).transpose(1, 0, 2)  # (n, dense, N_L)
    for l, lo, hi, local, bias in column_blocks(widths, free):
        Y = np.zeros((n, dense, widths[l]))
        for k0 in range(0, N_L, CHUNK):  # sums over the outputs of one sample, exact in chunks
            Y += _reduce(np.matmul(R3[:, :, k0:k0 + CHUNK], Ds[l - 1].reshape(n, N_L, widths[l])[:, k0:k0 + CHUNK]), p)
            _reduce(Y, p)
        Yt = np.ascontiguousarray(Y.transpose(1, 2, 0))  # (dense, N_l, n)
        if hi > lo:
            S = np.zeros((dense, widths[l], widths[l - 1]))
            for i0 in range(0, n, CHUNK):
                S += _reduce(np.matmul(Yt[:, :, i0:i0 + CHUNK], Hs[l - 1][i0:i0 + CHUNK]), p)
                _reduce(S, p)
            out[:, lo:hi] += S.reshape(dense, -1)[:, local]
        B = np.zeros((dense, widths[l]))
        for i0 in range(0, n, CHUNK):
            B += _reduce(Yt[:, :, i0:i0 + CHUNK].sum(axis=2), p)
        out[:, hi:hi + bias.size] += B[:, bias]
        _reduce(out, p)
