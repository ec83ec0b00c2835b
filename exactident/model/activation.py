"""Activation patterns, ties and the activation operator ``alpha`` (paper §2.2, Prop. 1).

``a_v(x, theta) = 1`` if the pre-activation ``z_l(x)_v >= 0`` else 0 (docs/theory.md).
A *tie* is a pair (sample ``i``, hidden neuron ``(l, v)``) with
``z_l(x^i)_v == 0`` exactly; at a tie the pattern of nearby parameters can be
either side, so ties are reported and never resolved silently.

``alpha(X, theta)`` has shape ``(n, |P|)``.  With the path order of
:func:`exactident.model.lifting.paths`, row ``i`` is the concatenation

    x^i ⊗ a_1 ⊗ ... ⊗ a_{L-1},  a_1 ⊗ ... ⊗ a_{L-1},  ...,  a_{L-1},  1

(paths starting in layer 0, then layer 1, ..., then the empty path ``beta``).
Because ``|P|`` grows exponentially with depth, ``rank alpha`` is computed
from the Gram matrix (:func:`alpha_gram`) when ``alpha`` is too wide.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import lcm, prod

import flint
import numpy as np

from exactident.model.integer_forward import float_forward_bounded, integer_forward
from exactident.model.network import Network

__all__ = [
    "ActivationState",
    "Tie",
    "activation_pattern",
    "activation_state",
    "alpha_exact",
    "alpha_gram",
    "alpha_row_subset",
    "n_paths",
    "resolve_ties",
]


@dataclass(frozen=True, order=True)
class Tie:
    """Sample ``i`` sits exactly on the zero set of hidden neuron ``v`` of layer ``l``."""

    i: int
    l: int
    v: int

    def __str__(self) -> str:
        return f"x^{self.i}@({self.l},{self.v})"


class ActivationState:
    """Exact forward pass of a sample.

    Attributes
    ----------
    Z : list of fmpq_mat
        ``Z[l-1]`` = ``z_l(X)``, shape ``(n, N_l)``, for ``l = 1..L`` (Q); computed on
        first use (the pattern and the ties do not need it).
    pattern : list of numpy.ndarray of bool
        ``pattern[l-1]`` has shape ``(n, N_l)`` for hidden ``l = 1..L-1``;
        ``True`` where ``z >= 0`` (the paper's indicator ``z >= 0``; ties are ``True`` here).
    ties : list of Tie
        Sorted by sample, layer, neuron.
    """

    def __init__(self, Z: list[flint.fmpq_mat] | None, pattern: list[np.ndarray], ties: list[Tie],
                 net: Network | None = None, X: Sequence[Sequence[flint.fmpq]] | None = None) -> None:
        self._Z = Z
        self.pattern = pattern
        self.ties = ties
        self._source = (net, X)

    @property
    def Z(self) -> list[flint.fmpq_mat]:
        if self._Z is None:
            net, X = self._source
            assert net is not None and X is not None
            self._Z = integer_forward(net, X).Z()
        return self._Z


def activation_state(net: Network, X: Sequence[Sequence[flint.fmpq]]) -> ActivationState:
    """Pre-activations, the ``>= 0`` activation pattern and the ties.

    The pattern comes from a float64 forward pass with a rigorous error bound
    (:func:`exactident.model.integer_forward.float_forward_bounded`); only the samples
    whose margin is inside the bound are recomputed exactly (integer forward pass),
    and ties can only be among them.

    Examples
    --------
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])],
    ...               [[flint.fmpq(1)], [flint.fmpq(0)]])
    >>> st = activation_state(net, [[0], [1], [flint.fmpq(-1, 2)]])
    >>> st.pattern[0].ravel().tolist(), [str(t) for t in st.ties]
    ([True, True, True], ['x^2@(1,0)'])
    """
    n = len(X)
    bounded = float_forward_bounded(net, X) if n else None
    if bounded is None:
        return _exact_state(net, X)
    pattern, uncertain = bounded
    idx = np.flatnonzero(uncertain)
    ties: list[Tie] = []
    if idx.size:
        sub = _exact_state(net, [X[int(i)] for i in idx], keep_Z=False)
        for a, a_sub in zip(pattern, sub.pattern):
            a[idx] = a_sub
        ties = sorted(Tie(int(idx[t.i]), t.l, t.v) for t in sub.ties)
    return ActivationState(None, pattern, ties, net, X)


def _exact_state(net: Network, X: Sequence[Sequence[flint.fmpq]], keep_Z: bool = True) -> ActivationState:
    # Signs come from the integer forward pass (same signs, no per-entry gcd);
    # Z is the exact rational z_l(X) rebuilt from it for callers that want Q.
    fw = integer_forward(net, X)
    n = len(X)
    pattern = []
    ties: list[Tie] = []
    zero = flint.fmpz(0)
    for l in net.hidden_layers():
        entries = fw.Z_int[l - 1].entries()
        width = net.widths[l]
        pattern.append(np.array([z >= zero for z in entries], dtype=bool).reshape(n, width))
        ties.extend(Tie(k // width, l, k % width) for k, z in enumerate(entries) if z == zero)
    ties.sort()
    return ActivationState(fw.Z() if keep_Z else None, pattern, ties, net, X)


def activation_pattern(net: Network, X: Sequence[Sequence[flint.fmpq]]) -> list[np.ndarray]:
    """The ``>= 0`` activation pattern only (see :func:`activation_state`)."""
    return activation_state(net, X).pattern


def resolve_ties(pattern: Sequence[np.ndarray], ties: Sequence[Tie], active: Sequence[bool]) -> list[np.ndarray]:
    """Copy of ``pattern`` with tie ``ties[k]`` set to ``active[k]``."""
    out = [p.copy() for p in pattern]
    for tie, a in zip(ties, active):
        out[tie.l - 1][tie.i, tie.v] = bool(a)
    return out


def n_paths(widths: Sequence[int]) -> int:
    """``|P| = sum_{l=0}^{L-1} N_l N_{l+1} ... N_{L-1} + 1`` (the ``+1`` is ``beta``).

    Examples
    --------
    >>> n_paths((1, 1, 1)), n_paths((2, 3)), n_paths((4, 16, 16, 3))
    (3, 3, 1297)
    """
    L = len(widths) - 1
    return sum(prod(widths[l:L]) for l in range(L)) + 1


def alpha_exact(pattern: Sequence[np.ndarray], X: Sequence[Sequence[flint.fmpq]]) -> flint.fmpq_mat:
    """The activation operator ``alpha(X, theta)``, shape ``(n, |P|)``, over Q.

    Parameters
    ----------
    pattern : list of bool arrays ``(n, N_l)``, ``l = 1..L-1``
        A (possibly tie-resolved) activation pattern.
    X : n rows of N_0 fmpq

    Notes
    -----
    Entry ``(i, p)`` is ``x^i_{v_0} prod a_{v_m}(x^i)`` for a path ``p`` from
    input ``v_0`` and ``prod a_{v_m}(x^i)`` for a path from a hidden neuron;
    the ``beta`` column is 1 (Prop. 1).  Column order matches
    :func:`exactident.model.lifting.paths`.

    Examples
    --------
    >>> alpha_exact([np.array([[True], [False]])], [[flint.fmpq(2)], [flint.fmpq(-1, 2)]])
    [2, 1, 1]
    [0, 0, 1]
    """
    rows = []
    for i, x in enumerate(X):
        tail = [1]
        blocks = []
        for p in reversed(pattern):
            tail = [int(a) * t for a in p[i] for t in tail]
            blocks.append(tail)
        blocks.reverse()
        first = [xv * t for xv in x for t in tail]
        rows.append(first + [v for blk in blocks for v in blk] + [1])
    ncols = len(rows[0]) if rows else 0
    return flint.fmpq_mat(len(X), ncols, [flint.fmpq(v) for r in rows for v in r])


def alpha_gram(pattern: Sequence[np.ndarray], X: Sequence[Sequence[flint.fmpq]]) -> flint.fmpz_mat:
    """Scaled Gram matrix ``d^2 alpha alpha^T`` as an integer matrix ``(n, n)``.

    ``<alpha(x^i), alpha(x^j)> = (x^i . x^j) prod_l c_l + sum_{l=1}^{L-1} prod_{l'>=l} c_l' + 1``
    where ``c_l(i, j)`` counts neurons of hidden layer ``l`` active at both
    samples.  ``d`` is the common denominator of ``X``; over Q,
    ``rank(alpha alpha^T) = rank(alpha)``, so this gives ``rank alpha``
    without materialising ``|P|`` columns.

    Returns
    -------
    fmpz_mat, shape (n, n), entries in Z
    """
    n = len(X)
    if n == 0:
        return flint.fmpz_mat(0, 0)
    d = lcm(*(int(v.q) for row in X for v in row)) if X and X[0] else 1
    Xint = np.array([[int(v.p) * (d // int(v.q)) for v in row] for row in X], dtype=object).reshape(n, -1)
    prod_c = np.ones((n, n), dtype=object)
    suffix_sum = np.zeros((n, n), dtype=object)
    for p in reversed(pattern):
        A = p.astype(np.int64)
        c = (A @ A.T).astype(object)
        prod_c = prod_c * c
        suffix_sum = suffix_sum + prod_c
    G = (Xint @ Xint.T) * prod_c + (d * d) * (suffix_sum + 1)
    return flint.fmpz_mat(G.tolist())


def alpha_row_subset(pattern: Sequence[np.ndarray], X_res: np.ndarray, p: int) -> np.ndarray:
    """Rows of ``alpha`` that span its row space (if ``p`` is not unlucky), in memory linear in ``n``.

    Samples with one activation pattern have ``alpha`` rows that are one fixed linear
    map of ``(x, 1)`` (Prop. 1), so within a pattern group only rows independent in
    ``[X_g, 1]`` matter, at most ``N_0 + 1`` of them; identical samples are merged
    first.  Groups are found by sorting (no ``n x n`` array).  Any subset of rows
    gives a lower bound ``rank_p(alpha[rows]) <= rank alpha``, so a merge of distinct
    samples (equal residues mod p) or an unlucky ``p`` can only lower the bound.

    Parameters
    ----------
    pattern : activation pattern, ``(n, N_l)`` bool arrays
    X_res : int64 array ``(n, N_0)``
        Residues of the sample mod ``p``.
    p : int
        A prime below ``2**21``.

    Returns
    -------
    numpy.ndarray of int
        Sorted row indices.

    Examples
    --------
    Five samples of a 1-1-1 network, two distinct points: two rows suffice.

    >>> pat = [np.array([[True]] * 5)]
    >>> alpha_row_subset(pat, np.array([[3], [4], [3], [4], [3]]), 7).tolist()
    [0, 1]
    """
    from exactident.linalg.blas_modp import pivots_blas

    n = X_res.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    bits = [np.asarray(a, dtype=bool).reshape(n, -1) for a in pattern]
    key = np.concatenate([np.asarray(X_res, dtype=np.int64) % p] + [b.astype(np.int64) for b in bits], axis=1)
    _uniq, first, _inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
    first = np.sort(first)
    if not bits:
        pat_key = np.zeros((first.size, 0), dtype=np.uint8)
    else:
        pat_key = np.packbits(np.concatenate(bits, axis=1)[first], axis=1)
    _g, group = np.unique(pat_key, axis=0, return_inverse=True)
    group = np.asarray(group).reshape(-1)
    keep: list[np.ndarray] = []
    width = X_res.shape[1] + 1
    order = np.argsort(group, kind="stable")
    bounds = np.flatnonzero(np.diff(group[order])) + 1
    for members in np.split(order, bounds):
        idx = first[members]
        if idx.size <= width:
            keep.append(idx)
            continue
        M = np.concatenate([np.asarray(X_res, dtype=np.int64)[idx] % p, np.ones((idx.size, 1), dtype=np.int64)],
                           axis=1)
        R, _C, _G = pivots_blas(M, p)
        keep.append(idx[np.sort(np.asarray(R, dtype=np.int64))])
    return np.sort(np.concatenate(keep))
