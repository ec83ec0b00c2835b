"""``Gamma_free = d f(X) / d theta`` of a :class:`~exactident.model.constrained.ConstrainedNetwork`, exact or mod p.

With the activation pattern held fixed (every kinked unit's derivative ``1`` or its
negative slope ``a``), ``f(X)`` is a polynomial in ``theta`` and its Jacobian is
backpropagation (the constrained form of the paper's Prop. 10): with
``D_l = d f / d z_l`` (rows ``i N_L + k``) and ``h_{l-1}`` the hidden values,

- the column of a parameter ``theta_j`` feeding weight entries ``W_l[i, k]`` and bias
  entries ``b_l[i]`` is ``sum D_l[:, i] * h_{l-1}[:, k] + sum D_l[:, i]`` over them
  (a tied parameter *sums* its dense columns: ``Gamma_free = Gamma_dense T``);
- the column of a PReLU slope ``theta_j = a_v`` is ``sum_v G_l[:, v] * min(z_v, 0)``,
  ``G_l = d f / d h_l``.

The dense Jacobian (one column per dense entry of a convolution) is never built:
each block of rows sums its entries straight into the parameter columns.  The same
code runs on numpy object arrays of ``fmpq`` (exact, Q; small cases and tests) and on
int64 residues mod p (:func:`gamma_free_mod_p`).

Called by :mod:`exactident.check_constrained`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from math import ceil, lcm
from typing import Any

import flint
import numpy as np

from exactident.linalg.modular import matmul_mod, require_prime
from exactident.model.constrained import ConstrainedNetwork, constrained_pre_activations
from exactident.model.gamma_modular import Scaled
from exactident.model.integer_forward import common_denominator

__all__ = [
    "FreeModularData",
    "FreeState",
    "free_data_denominator",
    "free_state",
    "gamma_free_entry_bound",
    "gamma_free_exact",
    "gamma_free_mod_p",
    "persistent_tie_indices",
    "persistent_ties",
    "resolve_ties",
    "tie_resolutions",
]

#: Entries of the per-block temporaries (rows are taken in blocks of about this size).
_BLOCK_ENTRIES = 1 << 22


@dataclass
class FreeState:
    """The exact forward pass of a constrained network on ``X``, its pattern and its ties.

    Attributes
    ----------
    Z : list of fmpq_mat
        ``z_l(X)``, ``l = 1..L``, shape ``(n, N_l)`` (Q).
    pattern : list of bool ndarray
        ``pattern[l-1]`` (hidden ``l``), shape ``(n, N_l)``: True where the unit's derivative
        is 1 (``z > 0``, a linear unit, or a tie at ``z = 0`` resolved active), False where it
        is the unit's negative slope.  Ties start resolved active (the ``>= 0`` pattern).
    ties : list of (sample, layer, unit)
        Kinked units with ``z == 0`` exactly (linear units never tie).
    zero_inputs : bool ndarray ``(N_0,)`` or None
        Input coordinates that are 0 on every sample (weights leaving them multiply 0 on ``X``).
    """

    Z: list[flint.fmpq_mat]
    pattern: list[np.ndarray]
    ties: list[tuple[int, int, int]]
    zero_inputs: np.ndarray | None = None


def free_state(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]]) -> FreeState:
    """Exact pre-activations, the ``>= 0`` pattern and the ties (kinked units only).

    Examples
    --------
    ``f(x) = leaky(x - 1)`` at ``x = 1, 0``: a tie at sample 0, sample 1 on the slope side.

    >>> from exactident.model.network import Network
    >>> from exactident.model.constrained import from_network
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[1]]), flint.fmpq_mat([[1]])],
    ...               [[flint.fmpq(-1)], [flint.fmpq(0)]])
    >>> st = free_state(from_network(net), [[1], [0]])
    >>> st.ties, st.pattern[0].tolist()
    ([(0, 1, 0)], [[True], [False]])
    """
    Z = constrained_pre_activations(cn, X)
    n = len(X)
    zero = flint.fmpq(0)
    pattern, ties = [], []
    for l in range(1, cn.L):
        kinked = cn.kinked(l)
        table = Z[l - 1].table()
        mask = np.ones((n, cn.widths[l]), dtype=bool)
        for i in range(n):
            for v in np.flatnonzero(kinked):
                z = table[i][v]
                if z < zero:
                    mask[i, v] = False
                elif z == zero:
                    ties.append((i, l, int(v)))
        pattern.append(mask)
    zero_inputs = np.array([all(row[k] == 0 for row in X) for k in range(cn.widths[0])], dtype=bool) if n else None
    return FreeState(Z, pattern, ties, zero_inputs)


def persistent_ties(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]], state: FreeState) -> list[int]:
    """Indices (into ``state.ties``) of ties that stay ties for every theta nearby: first-layer units whose bias is
    fixed and whose free weights all meet a zero input at that sample.

    Their pre-activation is then the fixed part of ``W_1 x + b_1``, constant in theta, so it stays 0: the unit outputs
    0 near theta, ``F_X`` does not depend on the tie's side, and neither does ``Gamma_free`` (its free weights'
    columns are ``D_1[:, v] x_k = 0``, no bias column, a slope column ``G min(z, 0) = 0``, nothing earlier to
    backpropagate to).  Enumerating one side of each is enough (docs/theory.md, "Beyond the layered ReLU MLP").
    :func:`persistent_tie_indices` on ``state.ties``.

    Examples
    --------
    ``relu(w x)`` with no bias at ``x = 0``: a persistent tie.

    >>> from exactident.model.constrained import ConstrainedNetwork
    >>> cn = ConstrainedNetwork((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])],
    ...     [[flint.fmpq(0)], [flint.fmpq(0)]], [np.array([[0]]), np.array([[1]])], [np.array([-1]), np.array([2])],
    ...     [[flint.fmpq(0)]], [np.array([-1])], 3)
    >>> X = [[flint.fmpq(0)], [flint.fmpq(1)]]
    >>> persistent_ties(cn, X, free_state(cn, X))
    [0]
    """
    return persistent_tie_indices(cn, X, state.ties)


def persistent_tie_indices(cn: ConstrainedNetwork, X: Sequence[Sequence[Any]],
                           ties: Sequence[tuple[int, int, int]]) -> list[int]:
    """The rule of :func:`persistent_ties` on ties ``(sample, layer, unit)`` computed by the caller.

    A pure function of the compiled network, the sample and the ties, so that the verifier applies the
    engine's rule to the ties it recomputed itself (:mod:`exactident.verify.resolutions`).
    """
    out = []
    for t, (i, l, v) in enumerate(ties):
        if l != 1 or int(cn.b_index[0][v]) >= 0:
            continue
        if all(X[i][int(k)] == 0 for k in np.flatnonzero(cn.W_index[0][v] >= 0)):
            out.append(t)
    return out


def tie_resolutions(n_ties: int, persistent: Collection[int]) -> Iterator[tuple[bool, ...]]:
    """Every tie resolution to analyse, as sides in tie order: each non-persistent tie active or inactive,
    every persistent one active (its side changes nothing: :func:`persistent_ties`).

    The order is the engine's and the verifier's: all active first, then ``itertools.product`` order
    over the non-persistent ties.  ``2 ** (n_ties - len(persistent))`` resolutions; the caller caps.

    Examples
    --------
    >>> list(tie_resolutions(3, [1]))
    [(True, True, True), (True, True, False), (False, True, True), (False, True, False)]
    >>> list(tie_resolutions(0, []))
    [()]
    """
    fixed = set(persistent)
    free = [t for t in range(n_ties) if t not in fixed]
    for sides in itertools.product((True, False), repeat=len(free)):
        active = [True] * n_ties
        for t, side in zip(free, sides):
            active[t] = side
        yield tuple(active)


def resolve_ties(state: FreeState, active: Sequence[bool]) -> list[np.ndarray]:
    """The pattern with tie ``t`` resolved active (derivative 1) or not (the slope), in ``state.ties`` order."""
    out = [m.copy() for m in state.pattern]
    for (i, l, v), on in zip(state.ties, active):
        out[l - 1][i, v] = bool(on)
    return out


class _Index:
    """Tied entries per layer: ``(rows, cols, params)`` of weights, ``(rows, params)`` of biases and slopes."""

    def __init__(self, cn: ConstrainedNetwork) -> None:
        self.w, self.b, self.s = [], [], []
        for l in range(1, cn.L + 1):
            r, c = np.nonzero(cn.W_index[l - 1] >= 0)
            self.w.append((r, c, cn.W_index[l - 1][r, c]))
            u = np.flatnonzero(cn.b_index[l - 1] >= 0)
            self.b.append((u, cn.b_index[l - 1][u]))
            if l < cn.L:
                u = np.flatnonzero(cn.slope_index[l - 1] >= 0)
                self.s.append((u, cn.slope_index[l - 1][u]))


def _core(cn: ConstrainedNetwork, Xv: np.ndarray, Wv: list[np.ndarray], bv: list[np.ndarray],
          av: list[np.ndarray], pattern: Sequence[np.ndarray], red: Callable[[np.ndarray], np.ndarray],
          mm: Callable[[np.ndarray, np.ndarray], np.ndarray], one: Any, dtype: Any) -> np.ndarray:
    """Backpropagation over any ring given as arrays: ``red`` reduces, ``mm`` multiplies matrices."""
    n, N_L, L = Xv.shape[0], cn.widths[-1], cn.L
    rows = n * N_L
    idx = _Index(cn)
    H, Zneg, factor = [Xv], [], []
    for l in range(1, L):
        Z = red(mm(H[-1], Wv[l - 1].T) + bv[l - 1][None, :])
        mask = np.asarray(pattern[l - 1], dtype=bool).reshape(n, cn.widths[l])
        f = np.where(mask, one, av[l - 1][None, :]).astype(dtype)
        factor.append(f)
        Zneg.append(np.where(mask, 0, Z).astype(dtype))
        H.append(red(Z * f))
    out = np.zeros((rows, cn.n_params), dtype=dtype)
    D = np.tile(np.eye(N_L, dtype=np.int64), (n, 1)).astype(dtype)  # d f / d z_L
    for l in range(L, 0, -1):
        wr, wc, wj = idx.w[l - 1]
        br, bj = idx.b[l - 1]
        G = None
        if l > 1:
            G = red(mm(D, Wv[l - 1]))  # d f / d h_{l-1}
        ids = np.concatenate([wj, bj] + ([idx.s[l - 2][1]] if l > 1 else []))
        if ids.size:
            order = np.argsort(ids, kind="stable")
            uniq, starts = np.unique(ids[order], return_index=True)
            per = max(1, ids.size)
            step = max(N_L, (_BLOCK_ENTRIES // per) // N_L * N_L)
            for r0 in range(0, rows, step):
                r1 = min(rows, r0 + step)
                Hrep = np.repeat(H[l - 1][r0 // N_L:r1 // N_L], N_L, axis=0)
                parts = [red(D[r0:r1][:, wr] * Hrep[:, wc]), D[r0:r1][:, br]]
                if l > 1:
                    su = idx.s[l - 2][0]
                    Zrep = np.repeat(Zneg[l - 2][r0 // N_L:r1 // N_L], N_L, axis=0)
                    assert G is not None
                    parts.append(red(G[r0:r1][:, su] * Zrep[:, su]))
                vals = np.concatenate(parts, axis=1)[:, order]
                sums = np.add.reduceat(vals, starts, axis=1)
                out[r0:r1, uniq] = red(out[r0:r1, uniq] + red(sums))
        if l > 1:
            assert G is not None
            D = red(G * np.repeat(factor[l - 2], N_L, axis=0))
    return out


def gamma_free_exact(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]],
                     pattern: Sequence[np.ndarray]) -> flint.fmpq_mat:
    """``Gamma_free(X, theta)`` over Q with the pattern held fixed (small cases, tests).

    Parameters
    ----------
    cn : ConstrainedNetwork
    X : n rows of N_0 fmpq
    pattern : from :func:`free_state` or :func:`resolve_ties`

    Returns
    -------
    fmpq_mat, shape ``(n N_L, n_params)``
        Row ``i N_L + k`` is ``d f_k(x^i) / d theta``.

    Examples
    --------
    ``f(x) = w2 relu(w1 x + b1) + b2`` at ``x = 1`` with ``w1 = 2, b1 = -1, w2 = 3``:
    ``(d/dw1, d/db1, d/dw2, d/db2) = (w2 x, w2, w1 x + b1, 1)``.

    >>> from exactident.model.network import Network
    >>> from exactident.model.constrained import from_network
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])],
    ...               [[flint.fmpq(-1)], [flint.fmpq(0)]])
    >>> cn = from_network(net)
    >>> gamma_free_exact(cn, [[1]], free_state(cn, [[1]]).pattern).entries()
    [3, 3, 1, 1]
    """
    n = len(X)
    Xv = np.array([flint.fmpq(v) for row in X for v in row] or [flint.fmpq(0)], dtype=object)[:n * cn.widths[0]]
    Xv = Xv.reshape(n, cn.widths[0])
    Wv = [np.array(W.table(), dtype=object).reshape(W.nrows(), W.ncols()) for W in cn.W]
    bv = [np.array(list(b), dtype=object) for b in cn.b]
    av = [np.array(list(a), dtype=object) for a in cn.negative_slope]
    out = _core(cn, Xv, Wv, bv, av, pattern, lambda a: a, lambda A, B: A.dot(B), flint.fmpq(1), object)
    m = out.shape[0]
    return flint.fmpq_mat(m, cn.n_params, [flint.fmpq(v) for v in out.ravel()])


class FreeModularData:
    """``X``, ``W``, ``b`` and the slopes scaled to integers once, for many primes (speed only)."""

    def __init__(self, cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]]) -> None:
        self.X = Scaled([v for row in X for v in row], (len(X), cn.widths[0]))
        self.W = [Scaled(W.entries(), (W.nrows(), W.ncols())) for W in cn.W]
        self.b = [Scaled(b, (1, len(b))) for b in cn.b]
        self.a = [Scaled(a, (1, len(a))) for a in cn.negative_slope]


def gamma_free_mod_p(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                     p: int, avoid: int = 1, data: FreeModularData | None = None) -> np.ndarray:
    """``Gamma_free(X, theta) mod p`` (int64 residues), rows in blocks, tied entries summed per block.

    Parameters
    ----------
    cn, X, pattern
        As for :func:`gamma_free_exact`.
    p : int
        A prime in ``[3, 2**31)`` dividing no denominator of the data.
    avoid : int
        :func:`free_data_denominator` of the data.
    data : FreeModularData, optional
        The same data pre-scaled (saves time over many primes).

    Returns
    -------
    numpy.ndarray of int64, shape ``(n N_L, n_params)``, entries in ``[0, p)``
        :func:`gamma_free_exact` reduced mod p.

    Raises
    ------
    InvariantViolation
        If ``p`` is not a usable prime.

    Examples
    --------
    >>> from exactident.model.network import Network
    >>> from exactident.model.constrained import from_network
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])],
    ...               [[flint.fmpq(-1)], [flint.fmpq(0)]])
    >>> cn = from_network(net)
    >>> gamma_free_mod_p(cn, [[1]], free_state(cn, [[1]]).pattern, 7).tolist()
    [[3, 3, 1, 1]]
    """
    require_prime(p, avoid)
    data = data or FreeModularData(cn, X)
    Xv = data.X.mod(p)
    Wv = [W.mod(p) for W in data.W]
    bv = [b.mod(p)[0] for b in data.b]
    av = [a.mod(p)[0] for a in data.a]

    def mm(A: np.ndarray, B: np.ndarray) -> np.ndarray:
        return matmul_mod(np.ascontiguousarray(A), np.ascontiguousarray(B), p)

    return _core(cn, Xv, Wv, bv, av, pattern, lambda a: a % p, mm, 1, np.int64)


def free_data_denominator(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]]) -> int:
    """``lcm`` of every denominator of ``X``, ``W``, ``b`` and the slopes (primes dividing it are avoided)."""
    d = common_denominator(v for row in X for v in row)
    for W, b in zip(cn.W, cn.b):
        d = lcm(d, common_denominator(W.entries()), common_denominator(b))
    for a in cn.negative_slope:
        d = lcm(d, common_denominator(a))
    return d


def _max_abs(values) -> flint.fmpq:
    return max((abs(flint.fmpq(v)) for v in values), default=flint.fmpq(0))


def gamma_free_entry_bound(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]]) -> int:
    """An integer ``B >= |S Gamma_free|`` entrywise for ``S = den(X) prod_l den(W_l) den(b_l) den(a_l)``.

    ``S Gamma_free`` is an integer matrix: a weight column of layer ``l`` has denominator dividing
    ``e_l s_{l-1}`` (``s`` the hidden values' denominators, ``s_l | s_{l-1} den(W_l) den(b_l) den(a_l)``;
    ``e_l = prod_{j > l} den(W_j) den(a_j)`` for ``D_l``), all dividing ``S``.  Magnitudes: ``|h_l| <=
    amax_l (rmax(W_l) |h_{l-1}| + |b_l|)``, ``|D_l| <= amax_l cmax(W_{l+1}) |D_{l+1}|`` (row / column
    sums of ``|W|``, ``amax = max(1, |a|)``), and a column sums at most ``m`` entries (``m`` the
    largest number of entries a parameter feeds).  Whatever the pattern.
    """
    S = common_denominator(v for row in X for v in row)
    for W, b in zip(cn.W, cn.b):
        S *= common_denominator(W.entries()) * common_denominator(b)
    for a in cn.negative_slope:
        S *= common_denominator(a)
    one = flint.fmpq(1)
    amax = [max(one, _max_abs(a)) for a in cn.negative_slope] + [one]
    rsum, csum = [], []
    for W in cn.W:
        t = W.table()
        rsum.append(max((sum((abs(x) for x in row), flint.fmpq(0)) for row in t), default=flint.fmpq(0)))
        csum.append(max((sum((abs(t[i][j]) for i in range(W.nrows())), flint.fmpq(0))
                         for j in range(W.ncols())), default=flint.fmpq(0)))
    h = [_max_abs(v for row in X for v in row)]
    zmax = []
    for l in range(1, cn.L + 1):
        z = rsum[l - 1] * h[-1] + _max_abs(cn.b[l - 1])
        zmax.append(z)
        h.append(amax[l - 1] * z)
    counts = np.zeros(cn.n_params, dtype=np.int64)
    for I in [*cn.W_index, *cn.b_index, *cn.slope_index]:
        j = I[I >= 0]
        counts += np.bincount(j, minlength=cn.n_params)
    m = int(counts.max()) if cn.n_params else 0
    worst = flint.fmpq(0)
    D = one
    for l in range(cn.L, 0, -1):
        worst = max(worst, D * max(h[l - 1], one))
        G = csum[l - 1] * D  # d f / d h_{l-1}
        if l > 1:
            worst = max(worst, G * zmax[l - 2])
            D = G * amax[l - 2]
    return int(ceil(flint.fmpq(S) * worst * max(m, 1))) + 1  # noqa: RUF046 - ceil of an fmpq is an fmpz
