"""``Gamma_free = d f(X) / d theta`` of a :class:`~exactident.model.network.Network`, exact or mod p.

The compiled network's front of the one exact builder (:mod:`exactident.model.backprop`,
which also builds the MLP's ``Gamma``): its exact forward pass, activation pattern and
ties (:func:`free_state`), the tie resolutions to analyse (:func:`tie_resolutions`, with
the persistent ties that need one side only), ``Gamma_free`` over Q and mod p, and the
bounds that lift its residues to Q.

With the activation pattern held fixed (every kinked unit's derivative ``1`` or its
negative slope ``a``), ``f(X)`` is a polynomial in ``theta`` and its Jacobian is
backpropagation (the constrained form of the paper's Prop. 10): a tied parameter sums
its dense columns (``Gamma_free = Gamma_dense T``) and a PReLU slope ``a_v`` has the
column ``d f / d h_v * min(z_v, 0)``.  The builder takes the MLP's dense route when ``T``
only selects entries and every slope is 0.

Called by :mod:`exactident.check.free_route` (the layer-graph stages of :func:`exactident.check.check`).
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from math import ceil, lcm
from typing import Any

import flint
import numpy as np

from exactident.linalg.modular import require_prime
from exactident.model.backprop import ModularData, jacobian_exact, jacobian_mod_p
from exactident.model.integer_forward import common_denominator
from exactident.model.network import Network, pre_activations

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

#: The data pre-scaled for many primes: the builder's :class:`~exactident.model.backprop.ModularData`.
FreeModularData = ModularData


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


def free_state(cn: Network, X: Sequence[Sequence[flint.fmpq]]) -> FreeState:
    """Exact pre-activations, the ``>= 0`` pattern and the ties (kinked units only).

    Examples
    --------
    ``f(x) = leaky(x - 1)`` at ``x = 1, 0``: a tie at sample 0, sample 1 on the slope side.

    >>> from exactident.model.network import Network
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[1]]), flint.fmpq_mat([[1]])],
    ...               [[flint.fmpq(-1)], [flint.fmpq(0)]])
    >>> st = free_state(net, [[1], [0]])
    >>> st.ties, st.pattern[0].tolist()
    ([(0, 1, 0)], [[True], [False]])
    """
    Z = pre_activations(cn, X)
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


def persistent_ties(cn: Network, X: Sequence[Sequence[flint.fmpq]], state: FreeState) -> list[int]:
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

    >>> from exactident.model.network import Network
    >>> cn = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])],
    ...     [[flint.fmpq(0)], [flint.fmpq(0)]], [np.array([[0]]), np.array([[1]])], [np.array([-1]), np.array([2])],
    ...     [[flint.fmpq(0)]], [np.array([-1])], 3)
    >>> X = [[flint.fmpq(0)], [flint.fmpq(1)]]
    >>> persistent_ties(cn, X, free_state(cn, X))
    [0]
    """
    return persistent_tie_indices(cn, X, state.ties)


def persistent_tie_indices(cn: Network, X: Sequence[Sequence[Any]],
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


def gamma_free_exact(cn: Network, X: Sequence[Sequence[flint.fmpq]],
                     pattern: Sequence[np.ndarray]) -> flint.fmpq_mat:
    """``Gamma_free(X, theta)`` over Q with the pattern held fixed (the one builder,
    :func:`exactident.model.backprop.jacobian_exact`).

    Parameters
    ----------
    cn : Network
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
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])],
    ...               [[flint.fmpq(-1)], [flint.fmpq(0)]])
    >>> cn = net
    >>> gamma_free_exact(cn, [[1]], free_state(cn, [[1]]).pattern).entries()
    [3, 3, 1, 1]
    """
    return jacobian_exact(cn, X, pattern)


def gamma_free_mod_p(cn: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                     p: int, avoid: int = 1, data: ModularData | None = None) -> np.ndarray:
    """``Gamma_free(X, theta) mod p`` (int64 residues; :func:`exactident.model.backprop.jacobian_mod_p`).

    Parameters
    ----------
    cn, X, pattern
        As for :func:`gamma_free_exact`.
    p : int
        A prime in ``[3, 2**31)`` dividing no denominator of the data.
    avoid : int
        :func:`free_data_denominator` of the data.
    data : ModularData, optional
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
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])],
    ...               [[flint.fmpq(-1)], [flint.fmpq(0)]])
    >>> cn = net
    >>> gamma_free_mod_p(cn, [[1]], free_state(cn, [[1]]).pattern, 7).tolist()
    [[3, 3, 1, 1]]
    """
    require_prime(p, avoid)
    return jacobian_mod_p(cn, X, pattern, p, data)


def free_data_denominator(cn: Network, X: Sequence[Sequence[flint.fmpq]]) -> int:
    """``lcm`` of every denominator of ``X``, ``W``, ``b`` and the slopes (primes dividing it are avoided)."""
    d = common_denominator(v for row in X for v in row)
    for W, b in zip(cn.W, cn.b):
        d = lcm(d, common_denominator(W.entries()), common_denominator(b))
    for a in cn.negative_slope:
        d = lcm(d, common_denominator(a))
    return d


def _max_abs(values) -> flint.fmpq:
    return max((abs(flint.fmpq(v)) for v in values), default=flint.fmpq(0))


def gamma_free_entry_bound(cn: Network, X: Sequence[Sequence[flint.fmpq]]) -> int:
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
