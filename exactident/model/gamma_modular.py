"""``Gamma`` and the Gram matrix of ``alpha`` mod p (Props. 10-11), and the entry bounds that lift them to Q.

With the exact activation pattern fixed (from the integer forward pass of
:mod:`exactident.model.integer_forward`), every entry of ``Gamma`` is a polynomial
in the data, so ``Gamma mod p`` is backpropagation in Z/pZ: the one builder of
:mod:`exactident.model.backprop` (the same pass as :func:`exactident.model.gamma.gamma_exact`,
in int64 residues, the MLP's dense route in row blocks).  ``rank alpha`` is the rank of the ``n x n`` Gram matrix
``alpha alpha^T`` (entries from counts of co-active neurons,
:func:`exactident.model.activation.alpha_gram`), so ``|P|`` columns are never built.
:func:`gamma_entry_bound` and :func:`gram_entry_bound` bound the integer
matrices behind these residues, which is what a kernel check needs to
conclude over Q.  :class:`Scaled` and :class:`ModularData` (the data scaled to integers
once) live with the builder and are re-exported here for the MLP's callers.

Called by :mod:`exactident.ranks.certify` (certified ranks) and
:mod:`exactident.verify.rank` (re-checking rank certificates).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from math import ceil, lcm, prod

import flint
import numpy as np

from exactident.linalg.draws import Draws
from exactident.linalg.modular import require_prime
from exactident.model import backprop
from exactident.model.backprop import ModularData, Scaled, column_blocks, hidden_and_backprop_mod_p, jacobian_mod_p
from exactident.model.fixed_edges import FixedEdges
from exactident.model.gamma import free_columns
from exactident.model.integer_forward import common_denominator, integer_forward
from exactident.model.network import Network

__all__ = [
    "ModularData",
    "Scaled",
    "alpha_mod_p",
    "gamma_entry_bound",
    "gamma_integer",
    "gamma_mod_p",
    "gamma_sketch_mod_p",
    "gram_counts",
    "gram_entry_bound",
    "gram_mod_p",
    "sketch_coefficients",
]


def gamma_mod_p(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                fixed: FixedEdges, p: int, avoid: int = 1, data: ModularData | None = None) -> np.ndarray:
    """``Gamma(X, theta) mod p`` by backpropagation in Z/pZ (Prop. 10).

    Parameters
    ----------
    net, X, pattern, fixed
        As for :func:`exactident.model.gamma.gamma_exact`.
    p : int
        A prime in ``[3, 2**31)`` dividing no denominator of the data.
    avoid : int
        The data's denominator (:func:`exactident.model.integer_forward.data_denominator`).
    data : ModularData, optional
        The same data pre-scaled to integers (saves time over many primes).

    Returns
    -------
    numpy.ndarray of int64, shape ``(n * N_L, dim)``, entries in ``[0, p)``
        Row ``i * N_L + k``, columns as :func:`exactident.model.fixed_edges.free_parameters`;
        equal to ``gamma_exact(...)`` reduced mod p.

    Raises
    ------
    InvariantViolation
        If ``p`` is not a usable prime (composite, or divides a denominator).

    Examples
    --------
    The hand-checked network of docs/theory.md at ``0, 1``: exact rows ``(0, 3, 1)``, ``(3, 3, 1)``.

    >>> import flint
    >>> from exactident.model.fixed_edges import fixed_edges
    >>> from exactident.model.activation import activation_state
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])],
    ...               [[flint.fmpq(1)], [flint.fmpq(0)]])
    >>> X = [[flint.fmpq(0)], [flint.fmpq(1)]]
    >>> gamma_mod_p(net, X, activation_state(net, X).pattern, fixed_edges(net), 7).tolist()
    [[0, 3, 1], [3, 3, 1]]
    """
    require_prime(p, avoid)
    return jacobian_mod_p(net, X, pattern, p, data, free_columns(net, fixed))


def _backprop_mod_p(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray], p: int,
                    data: ModularData | None) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """``H`` and ``D`` of the builder's pass (:func:`exactident.model.backprop.hidden_and_backprop_mod_p`;
    this name is what :mod:`exactident.verify.rank_kernel` imports)."""
    return hidden_and_backprop_mod_p(net, X, pattern, p, data)


def gamma_sketch_mod_p(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                       fixed: FixedEdges, p: int, k: int, seed: int, avoid: int = 1,
                       data: ModularData | None = None) -> np.ndarray:
    """``Gamma S mod p`` for a random ``dim x k`` matrix ``S`` with Khatri-Rao structure, never building ``Gamma``.

    Column ``j`` of ``S`` gives the ``W_l`` entry ``(a, b)`` the coefficient ``U_l[a, j] V_l[b, j]`` and
    the ``b_l`` entry ``a`` the coefficient ``B_l[a, j]`` (``U_l, V_l, B_l`` uniform mod p, drawn from
    ``seed``), fixed edges 0.  The ``W_l`` rows of ``Gamma`` are ``D_l (x) h_{l-1}`` (Prop. 10), so
    ``Gamma S = sum_l (D_l U_l) * (h_{l-1} V_l) + D_l B_l`` (elementwise ``*``, ``h`` repeated per output)
    minus the fixed edges' columns times their coefficients: ``O(rows (N_l + N_{l-1}) k)`` work per layer
    instead of ``rows dim k``, and memory for the ``rows x k`` result only.

    ``rank_p(Gamma S) <= rank_p(Gamma) <= rank_Q(Gamma)`` for any ``S``: a sound lower bound.  It equals
    ``rank_p(Gamma)`` with probability at least ``1 - 2 r / p`` (``r = rank_p Gamma <= k``): a nonzero
    ``r x r`` minor of ``Gamma S`` is a polynomial of degree ``2 r`` in the coefficients (Schwartz-Zippel),
    not identically zero since ``Gamma``'s column space is spanned by images of rank-one ``u (x) v`` (the
    restrictions of the rank-one vectors span the free coordinates).  Unlike a random column subset it
    sees every column, so the later layers' few columns are not drowned by the first layer's many.

    Parameters
    ----------
    net, X, pattern, fixed
        As for :func:`gamma_mod_p`.
    p : int
        A prime below ``2**21`` dividing no denominator of the data.
    k : int
        Columns of the sketch.
    seed : int
        Seed of ``U_l, V_l, B_l`` (:class:`exactident.linalg.draws.Draws`).

    Returns
    -------
    numpy.ndarray of float64, shape ``(n * N_L, k)``
        Symmetric residues (``|x| <= p / 2``) of ``Gamma S`` mod p, rows as :func:`gamma_mod_p`.

    Raises
    ------
    InvariantViolation
        If ``p`` is not a prime below ``2**21`` or divides a denominator.

    Examples
    --------
    Against ``Gamma mod p`` times the explicit ``S`` (tests/test_gamma_modular.py does so on random nets);
    here only the shape and the rank of the hand-checked network of docs/theory.md:

    >>> import flint
    >>> from exactident.model.fixed_edges import fixed_edges
    >>> from exactident.model.activation import activation_state
    >>> from exactident.linalg.blas_modp import rank_blas
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])],
    ...               [[flint.fmpq(1)], [flint.fmpq(0)]])
    >>> X = [[flint.fmpq(0)], [flint.fmpq(1)]]
    >>> G = gamma_sketch_mod_p(net, X, activation_state(net, X).pattern, fixed_edges(net), 1048583, 4, 0)
    >>> G.shape, rank_blas(G, 1048583)
    ((2, 4), 2)
    """
    from exactident.linalg.blas_modp import _check_prime, _reduce, matmul_blas, to_symmetric

    require_prime(p, avoid)
    _check_prime(p)
    H, D = _backprop_mod_p(net, X, pattern, p, data)
    n, N_L = len(X), net.widths[-1]
    rows = n * N_L
    U, V, B = sketch_coefficients(net, p, k, seed)
    free = np.asarray(free_columns(net, fixed), dtype=np.int64)
    out = np.zeros((rows, k))
    step = max(N_L, (backprop._BLOCK_ENTRIES // max(k, 1)) // N_L * N_L)
    for l, _lo, _hi, local, _bias in column_blocks(net.widths, free):
        n_in = net.widths[l - 1]
        Dl = to_symmetric(D[l - 1], p)
        fixed_local = np.setdiff1d(np.arange(net.widths[l] * n_in), local)
        coef_fixed = _reduce(U[l - 1][fixed_local // n_in] * V[l - 1][fixed_local % n_in], p)
        for r0 in range(0, rows, step):
            r1 = min(rows, r0 + step)
            Hs = to_symmetric(H[l - 1][r0 // N_L:r1 // N_L], p)
            part = np.repeat(matmul_blas(Hs, V[l - 1], p), N_L, axis=0)
            part *= matmul_blas(Dl[r0:r1], U[l - 1], p)  # |products| < 2**40: exact
            part += matmul_blas(Dl[r0:r1], B[l - 1], p)
            if fixed_local.size:
                cols = Dl[r0:r1, fixed_local // n_in] * np.repeat(Hs[:, fixed_local % n_in], N_L, axis=0)
                part -= matmul_blas(_reduce(cols, p), coef_fixed, p)
            out[r0:r1] += _reduce(part, p)
            _reduce(out[r0:r1], p)
    return out


def sketch_coefficients(net: Network, p: int, k: int, seed: int) -> tuple[list[np.ndarray], ...]:
    """``U_l`` (``N_l x k``), ``V_l`` (``N_{l-1} x k``), ``B_l`` (``N_l x k``) of :func:`gamma_sketch_mod_p`:
    uniform symmetric residues mod p (float64), drawn in this order layer by layer from ``seed``."""
    gen = Draws(seed)
    U, V, B = [], [], []
    for l in range(1, net.L + 1):
        U.append(gen.integers(-(p // 2), p // 2 + 1, (net.widths[l], k)).astype(np.float64))
        V.append(gen.integers(-(p // 2), p // 2 + 1, (net.widths[l - 1], k)).astype(np.float64))
        B.append(gen.integers(-(p // 2), p // 2 + 1, (net.widths[l], k)).astype(np.float64))
    return U, V, B


def gram_counts(pattern: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``c_l = A_l A_l^T`` (int64, exact: counts ``<= N_l``), deepest layer first.

    The products run in float BLAS (numpy has no BLAS for integers): 0/1 entries, sums at most
    ``N_l``, so every value is exact in float32 below ``2**24`` (half the memory), else in float64.
    """
    return [_layer_counts(a).astype(np.int64) for a in reversed(pattern)]


def _layer_counts(a: np.ndarray) -> np.ndarray:
    """``A_l A_l^T`` in float BLAS: 0/1 entries, sums at most ``N_l``, exact in float32 below ``2**24``."""
    f: np.ndarray = np.asarray(a, dtype=np.float32 if np.shape(a)[-1] < 2**24 else np.float64)
    c = np.matmul(f, f.T)
    return np.rint(c, out=c)


def gram_mod_p(pattern: Sequence[np.ndarray], X: Sequence[Sequence[flint.fmpq]], p: int,
               avoid: int = 1, counts: Sequence[np.ndarray] | None = None,
               X_scaled: Scaled | None = None, symmetric: bool = False) -> np.ndarray:
    """``alpha alpha^T mod p``, shape ``(n, n)`` (see :func:`exactident.model.activation.alpha_gram`).

    ``<alpha(x^i), alpha(x^j)> = (x^i . x^j) prod_l c_l + sum_l prod_{l' >= l} c_l' + 1``,
    ``c_l(i, j)`` = number of neurons of hidden layer ``l`` active at both samples.

    int64 residues in ``[0, p)``; with ``symmetric`` and ``p < 2**21``, float64 symmetric residues
    (what :func:`~exactident.linalg.blas_modp.rank_blas` eliminates), computed in float64 throughout:
    no int64 ``n x n`` array is made, each layer's counts stay float32 (half of the int64 copy).

    Examples
    --------
    >>> gram_mod_p([np.array([[True], [False]])], [[flint.fmpq(2)], [flint.fmpq(-1, 2)]], 7).tolist()
    [[6, 1], [1, 1]]
    """
    from exactident.linalg.blas_modp import BLAS_PRIME_HI, _reduce, matmul_blas, to_symmetric
    from exactident.linalg.modular import matmul_mod

    n = len(X)
    if n == 0:
        require_prime(p, avoid)
        return np.zeros((0, 0), dtype=np.int64)
    require_prime(p, avoid)
    Xp = (X_scaled or Scaled([v for row in X for v in row], (n, len(X[0])))).mod(p)
    if counts is not None:
        shallow_first: Iterable[np.ndarray] = list(counts)[::-1]
        maxima = [int(c.max()) if c.size else 0 for c in shallow_first]
    else:  # one layer's counts at a time (n x n each: never all of them at once)
        shallow_first = (_layer_counts(a) if symmetric and p < BLAS_PRIME_HI else gram_counts([a])[0] for a in pattern)
        maxima = [int(np.asarray(a, dtype=bool).sum(axis=1).max()) if np.size(a) else 0 for a in pattern]
    if p < BLAS_PRIME_HI:  # float64 BLAS, exact in chunks (|residues| <= 2**20)
        F = to_symmetric(Xp, p)
        S = matmul_blas(F, F.T.copy(), p)
        del F
        if symmetric:
            for c in shallow_first:  # Horner as below, in float64: |S + 1| <= 2**20 and c <= N_l < 2**32, exact
                S += 1
                S *= c
                _reduce(S, p)
                del c
            S += 1
            return _reduce(S, p)
        G = S.astype(np.int64)
        del S
    else:
        G = matmul_mod(Xp, Xp.T.copy(), p)
    G %= p
    bound = 1  # >= every entry of prod_l c_l (counts are >= 0; c_l(i, j) <= the active neurons of layer l at x_i)
    for m in maxima:
        bound *= max(m, 1)
    # Horner, shallowest layer first, in place: ((XX + 1) c_1 + 1) c_2 ... c_{L-1} + 1 is the sum above
    exact = p * (len(maxima) + 2) * bound < 2**62  # every partial value fits int64: one reduction at the end
    for c in shallow_first:
        G += 1
        G *= c if exact else c % p
        if not exact:
            G %= p
        del c  # before the next layer's counts are built
    G += 1
    G %= p
    return G


def _max_abs(values) -> flint.fmpq:
    return max((abs(flint.fmpq(v)) for v in values), default=flint.fmpq(0))


def gamma_entry_bound(net: Network, X: Sequence[Sequence[flint.fmpq]]) -> int:
    """An integer ``B >= |S Gamma|`` entrywise, for an integer ``S`` made of the data's denominators.

    ``S Gamma`` is an integer matrix for ``S = lcm_l(e_l s_{l-1})``, ``e_l = prod_{j>l}``
    (denominator of ``W_j``), ``s_l`` the denominator of ``h_l``; ``|d f / d z_l|``
    is at most ``prod_{j>l} max_r sum_k |W_j[k, r]|``.  Whatever the pattern.
    """
    fw = integer_forward(net, X)
    L = net.L
    dW = [common_denominator(W.entries()) for W in net.W]
    colsum = []
    for W in net.W:
        rows = W.table()
        colsum.append(max((sum((abs(rows[k][r]) for k in range(W.nrows())), flint.fmpq(0))
                           for r in range(W.ncols())), default=flint.fmpq(0)))
    S = 1
    worst = flint.fmpq(0)
    D_abs = flint.fmpq(1)
    e = 1
    for l in range(L, 0, -1):
        S = lcm(S, e * fw.den[l - 1])
        entries = fw.H_int[l - 1].entries()  # fmpz compared in C: the largest |entry| is max(max, -min)
        h_max = flint.fmpq(int(max(max(entries), -min(entries))) if entries else 0, fw.den[l - 1])
        worst = max(worst, D_abs * max(h_max, flint.fmpq(1)))
        D_abs *= colsum[l - 1]
        e *= dW[l - 1]
    return int(ceil(flint.fmpq(S) * worst)) + 1  # noqa: RUF046 - ceil of an fmpq is an fmpz


def gram_entry_bound(X: Sequence[Sequence[flint.fmpq]], widths: Sequence[int]) -> int:
    """An integer ``B >= |d^2 alpha alpha^T|`` entrywise, ``d`` the denominator of ``X``."""
    d = common_denominator(v for row in X for v in row)
    x_max = int(_max_abs(v for row in X for v in row) * d)
    L = len(widths) - 1
    hidden = list(widths[1:L])
    tail = sum(prod(hidden[l:]) for l in range(len(hidden)))
    return widths[0] * x_max * x_max * prod(hidden) + d * d * (tail + 1)




def alpha_mod_p(pattern: Sequence[np.ndarray], X_res: np.ndarray, p: int) -> np.ndarray:
    """``alpha(X, theta) mod p``, shape ``(n, |P|)``, from the residues ``X_res`` of the sample.

    Vectorised form of :func:`exactident.model.activation.alpha_exact` (same column
    order): row ``i`` is ``x^i ⊗ a_1 ⊗ ... ⊗ a_{L-1}, a_1 ⊗ ... ⊗ a_{L-1}, ..., a_{L-1}, 1``.

    Examples
    --------
    >>> alpha_mod_p([np.array([[True], [False]])], np.array([[2], [3]]), 7).tolist()
    [[2, 1, 1], [0, 0, 1]]
    """
    n = X_res.shape[0]
    acts = [np.asarray(a, dtype=np.int64) for a in pattern]
    acts = [a.reshape(n, a.shape[-1] if a.ndim == 2 else a.size // max(n, 1)) for a in acts]
    sizes = [1]  # |tail_l| = N_l ... N_{L-1}, deepest first; the first block has N_0 |tail_1| columns
    for a in reversed(acts):
        sizes.append(a.shape[1] * sizes[-1])
    x = np.asarray(X_res, dtype=np.int64) % p
    out = np.empty((n, x.shape[1] * sizes[-1] + sum(sizes)), dtype=np.int64)  # written in place: no concatenation
    tail = np.ones((n, 1), dtype=np.int64)
    end = out.shape[1] - 1
    out[:, end] = 1
    for a in reversed(acts):
        tail = (a[:, :, None] * tail[:, None, :]).reshape(n, -1)
        out[:, end - tail.shape[1]:end] = tail
        end -= tail.shape[1]
    out[:, :end] = (x[:, :, None] * tail[:, None, :]).reshape(n, -1)
    return out


def gamma_integer(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                  fixed: FixedEdges, samples: Sequence[int], data: ModularData | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``Gamma'`` on the rows of ``samples``: ``Gamma diag(s)`` as exact integers, and ``s``.

    The same backpropagation as :func:`gamma_mod_p`, in exact integers (numpy object
    arrays of Python ints) on the data scaled once: ``h_l = H_l / e_l``, ``d f / d z_l =
    D_l / c_l`` with integer ``H_l, D_l``, so a column of layer ``l`` times
    ``s = c_l e_{l-1} > 0`` is an integer column.  ``Gamma' u = 0`` iff ``Gamma (s u) = 0``.

    Returns
    -------
    (G, s) : object arrays, shapes ``(len(samples) * N_L, dim)`` and ``(dim,)``
        Rows ``k * N_L + j`` for the ``k``-th sample of ``samples``; columns as
        :func:`exactident.model.fixed_edges.free_parameters`.
    """
    data = data or ModularData(net, X)
    L, N_L = net.L, net.widths[-1]
    idx = np.asarray(samples, dtype=np.int64)
    n = len(idx)
    dw = [w.den for w in data.W]
    db = [b.den for b in data.b]
    H = [data.X.ints[idx]]
    e = [data.X.den]
    masks = [np.asarray(a, dtype=bool)[idx].reshape(n, net.widths[l + 1]) for l, a in enumerate(pattern)]
    for l in range(1, L):
        Z = H[-1].dot(data.W[l - 1].ints.T) * db[l - 1] + data.b[l - 1].ints[0] * (e[-1] * dw[l - 1])
        H.append(np.where(masks[l - 1], Z, 0).astype(object))
        e.append(e[-1] * dw[l - 1] * db[l - 1])
    D = np.tile(np.eye(N_L, dtype=np.int64), (n, 1)).astype(object)
    c = 1
    blocks: list[np.ndarray] = []
    scales: list[np.ndarray] = []
    for l in range(L, 0, -1):
        Hrep = np.repeat(H[l - 1], N_L, axis=0)
        dW = (D[:, :, None] * Hrep[:, None, :]).reshape(n * N_L, net.widths[l] * net.widths[l - 1])
        blocks += [D * e[l - 1], dW]
        scales += [np.full(net.widths[l], c * e[l - 1], dtype=object),
                   np.full(net.widths[l] * net.widths[l - 1], c * e[l - 1], dtype=object)]
        if l > 1:
            D = np.where(np.repeat(masks[l - 2], N_L, axis=0), D.dot(data.W[l - 1].ints), 0).astype(object)
            c *= dw[l - 1]
    cols = free_columns(net, fixed)
    full = np.concatenate(blocks[::-1], axis=1)
    return full[:, cols], np.concatenate(scales[::-1])[cols]
