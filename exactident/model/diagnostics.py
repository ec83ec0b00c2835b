"""Per-neuron facts on the sample: dead, always active, proportional twins, pinned hyperplanes.

These are the structural reasons for which ``C_S`` (Theorem 9) fails on
trained networks, read off the exact pre-activations of
:func:`exactident.model.activation.activation_state`:

- a hidden neuron **dead on the sample**: ``z_l(x^i)_v < 0`` for every sample
  (strictly: a tie is not dead).  Its incoming weights and bias do not
  appear in ``f(X)`` to any order: their columns of ``Gamma`` are zero;
- a hidden neuron **always active**: ``z_l(x^i)_v > 0`` for every sample
  (strictly).  On the sample it is affine, and a block of such neurons in one
  layer acts on ``X`` as one affine map;
- **proportional twins**: two neurons ``u, v`` of one hidden layer with the
  same strict activation set ``S`` (and no tie) and ``z_u = c z_v`` on ``S``
  for one ``c > 0``: their post-activations ``h_u = c h_v`` on the sample;
- **untouched inputs**: an input coordinate that is zero on every sample;
- a neuron's **hyperplane pinned**: ``rank [h_{l-1}(x^i), 1]`` over its
  strictly active samples equals ``N_{l-1} + 1`` (every incoming parameter
  is seen by the data).

Every fact is exact (signs and ratios of rationals).  Used by the structural
certificates and by ``exactident explain``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import flint
import numpy as np

from exactident.linalg.exact import rank
from exactident.model.activation import ActivationState

__all__ = [
    "NeuronActivity",
    "hyperplane_rank",
    "hyperplane_rows",
    "neuron_activity",
    "proportional_twins",
    "untouched_inputs",
]

_ZERO = flint.fmpq(0)


@dataclass(frozen=True)
class NeuronActivity:
    """Sign counts of one hidden neuron's pre-activation over the sample.

    Attributes
    ----------
    l, v : int
        Hidden layer ``l`` (1-based, paper indexing) and neuron ``v`` (0-based).
    n_active, n_tie, n_inactive : int
        Samples with ``z > 0``, ``z == 0`` and ``z < 0``.
    """

    l: int
    v: int
    n_active: int
    n_tie: int
    n_inactive: int

    @property
    def is_dead(self) -> bool:
        """Strictly inactive on every sample (and there is at least one sample)."""
        return self.n_inactive > 0 and self.n_active == 0 and self.n_tie == 0

    @property
    def is_always_active(self) -> bool:
        """Strictly active on every sample (and there is at least one sample)."""
        return self.n_active > 0 and self.n_inactive == 0 and self.n_tie == 0


def _column(Z: flint.fmpq_mat, v: int) -> list[flint.fmpq]:
    return [Z[i, v] for i in range(Z.nrows())]


def neuron_activity(state: ActivationState) -> list[NeuronActivity]:
    """Sign counts of every hidden neuron, layer by layer.

    Parameters
    ----------
    state : ActivationState
        Exact pre-activations ``Z[l-1]`` of shape ``(n, N_l)`` over Q.

    Returns
    -------
    list of NeuronActivity
        Hidden layers ``l = 1..L-1``, neurons in order.

    Examples
    --------
    ``f = 3 relu(2x + 1)`` at ``0, 1, -1/2, -1``: active, active, tie, inactive.

    >>> from exactident.model.activation import activation_state
    >>> from exactident.model.network import Network
    >>> net = Network((1, 1, 1), [[[2]], [[3]]], [[1], [0]])
    >>> X = [[flint.fmpq(x)] for x in (0, 1, flint.fmpq(-1, 2), -1)]
    >>> neuron_activity(activation_state(net, X))
    [NeuronActivity(l=1, v=0, n_active=2, n_tie=1, n_inactive=1)]
    """
    out = []
    for l, Z in enumerate(state.Z[:-1], start=1):
        # the signs in one pass over the entries: a numerator's (denominators are positive), compared as fmpz
        nums = [z.p for z in Z.entries()]
        signs = np.array([(p > 0) - (p < 0) for p in nums], dtype=np.int8).reshape(Z.nrows(), Z.ncols())
        for v in range(Z.ncols()):
            pos, zero = int((signs[:, v] > 0).sum()), int((signs[:, v] == 0).sum())
            out.append(NeuronActivity(l, v, pos, zero, Z.nrows() - pos - zero))
    return out


def untouched_inputs(X: Sequence[Sequence[flint.fmpq]]) -> list[int]:
    """Input coordinates ``j`` with ``x^i_j == 0`` for every sample (none for an empty sample).

    Examples
    --------
    >>> untouched_inputs([[0, 1, 0], [0, 2, 5]])
    [0]
    """
    if not X:
        return []
    return [j for j in range(len(X[0])) if all(row[j] == 0 for row in X)]


def proportional_twins(state: ActivationState) -> list[tuple[int, int, int, flint.fmpq]]:
    """Pairs of hidden neurons whose post-activations are positively proportional on the sample.

    Returns
    -------
    list of (l, u, v, c)
        ``u < v`` in hidden layer ``l``, ``c > 0`` in Q with ``h_u = c h_v`` on
        every sample: same strict activation set ``S`` (non-empty, no tie at
        either neuron) and ``z_u(x^i) = c z_v(x^i)`` for ``i`` in ``S``.  Dead
        neurons are left out (every dead pair would qualify trivially).

    Examples
    --------
    Two first-layer neurons ``x`` and ``2x`` on positive samples, a third ``-x``:

    >>> from exactident.model.activation import activation_state
    >>> from exactident.model.network import Network
    >>> net = Network((1, 3, 1), [[[1], [2], [-1]], [[1, 1, 1]]], [[0, 0, 0], [0]])
    >>> proportional_twins(activation_state(net, [[1], [2], [3]]))
    [(1, 0, 1, 1/2)]
    """
    out = []
    for l, Z in enumerate(state.Z[:-1], start=1):
        cols = [_column(Z, v) for v in range(Z.ncols())]
        # Only neurons with the same strict signs on every sample can pair: compare those (speed only).
        signs = [tuple((z > _ZERO) - (z < _ZERO) for z in col) for col in cols]
        for u in range(len(cols)):
            for v in range(u + 1, len(cols)):
                if signs[u] != signs[v]:
                    continue
                c = _ratio(cols[u], cols[v])
                if c is not None:
                    out.append((l, u, v, c))
    return out


def _ratio(zu: Sequence[flint.fmpq], zv: Sequence[flint.fmpq]) -> flint.fmpq | None:
    if any(z == _ZERO for z in zu) or any(z == _ZERO for z in zv):
        return None  # a tie: the activation there is not determined by the sample alone
    active = [zu_i > _ZERO for zu_i in zu]
    if active != [zv_i > _ZERO for zv_i in zv] or not any(active):
        return None
    S = [i for i, a in enumerate(active) if a]
    c = zu[S[0]] / zv[S[0]]
    return c if all(zu[i] == c * zv[i] for i in S) else None


def hyperplane_rows(state: ActivationState, X: Sequence[Sequence[flint.fmpq]], l: int, v: int, *,
                    ties: bool = False) -> list[list[flint.fmpq]]:
    """The rows ``[h_{l-1}(x^i), 1]`` over the samples where neuron ``(l, v)`` is strictly active.

    With ``ties=True`` the samples where ``z_l(x^i)_v == 0`` are included too: a change
    ``(dw, db)`` of the neuron's incoming weights and bias with ``[h_{l-1}(x^i), 1] . (dw, db) = 0``
    on these rows leaves ``z_l(x^i)_v`` unchanged there, ties included (used by the
    ``unpinned-hyperplane`` certificate on the boundary).  ``h_{l-1}`` does not depend on
    how ties of earlier layers resolve (``relu(0) = 0``).

    Returns
    -------
    list of list of fmpq
        One row of length ``N_{l-1} + 1`` per such sample, in sample order (Q).

    Examples
    --------
    ``relu(x - 1)`` at ``x = 2, 1, 0``: active at 2, tied at 1.

    >>> from exactident.model.activation import activation_state
    >>> from exactident.model.network import Network
    >>> net = Network((1, 1, 1), [[[1]], [[1]]], [[-1], [0]])
    >>> X = [[flint.fmpq(x)] for x in (2, 1, 0)]
    >>> state = activation_state(net, X)
    >>> hyperplane_rows(state, X, 1, 0), hyperplane_rows(state, X, 1, 0, ties=True)
    ([[2, 1]], [[2, 1], [1, 1]])
    """
    Z = state.Z[l - 1]
    S = [i for i in range(Z.nrows()) if Z[i, v] > _ZERO or (ties and Z[i, v] == _ZERO)]
    if l == 1:
        rows = [[flint.fmpq(x) for x in X[i]] for i in S]
    else:
        prev = state.Z[l - 2]
        rows = [[max(prev[i, j], _ZERO) for j in range(prev.ncols())] for i in S]
    return [r + [flint.fmpq(1)] for r in rows]


def hyperplane_rank(state: ActivationState, X: Sequence[Sequence[flint.fmpq]], l: int, v: int) -> tuple[int, int]:
    """``(rank [h_{l-1}(x^i), 1] over the samples where neuron (l, v) is strictly active, N_{l-1} + 1)``.

    When the rank is ``N_{l-1} + 1`` the data pin the neuron's hyperplane: no
    nonzero change of its incoming weights and bias leaves ``z_l(x^i)_v``
    unchanged on its active samples.  Over Q (exact rank).

    Examples
    --------
    ``relu(x)`` active only at ``x = 1``: one point cannot pin a line in 1-D.

    >>> from exactident.model.activation import activation_state
    >>> from exactident.model.network import Network
    >>> net = Network((1, 1, 1), [[[1]], [[1]]], [[0], [0]])
    >>> state = activation_state(net, [[1], [-1], [-2]])
    >>> hyperplane_rank(state, [[1], [-1], [-2]], 1, 0)
    (1, 2)
    """
    rows = hyperplane_rows(state, X, l, v)
    width = (len(X[0]) if l == 1 and X else state.Z[l - 2].ncols() if l > 1 else 0) + 1
    if not rows:
        return 0, width
    return rank(flint.fmpq_mat(rows)), width
