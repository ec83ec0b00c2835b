"""Directions no sample can remove: ``Gamma(X') delta = 0`` for every sample ``X'`` (in a box, or anywhere).

``design`` stops looking for new points when one of these exists: ``C_S`` can
then never hold.  Each is found and checked exactly (docs/explain.md, "When no
sample can help"):

- **theta in S**: a hidden neuron with all outgoing weights zero never reaches the
  outputs (its incoming weights and bias move freely); one with all incoming
  weights and bias zero outputs 0 everywhere (its outgoing weights move freely);
- **twins**: two neurons ``u, v`` of one hidden layer with ``(W_l[u,:], b_l[u]) = c
  (W_l[v,:], b_l[v])``, ``c > 0``, have ``h_u = c h_v`` on every input; the next
  layer sees only ``c W_{l+1}[:,u] + W_{l+1}[:,v]``.  Scaling their incoming
  parameters by ``1 + t s_u``, ``1 + t s_v`` and moving their free outgoing
  weights by ``t dW_u``, ``t dW_v`` leaves every pre-activation of layer ``l + 1``
  unchanged to first order, at every input, when ``c s_u W_u + c dW_u + s_v W_v +
  dW_v = 0`` (``N_{l+1}`` linear equations in ``2 N_{l+1}`` unknowns, the fixed
  edges held; the scalings only when no incoming weight of the neuron is itself a
  fixed edge): each solution is reported;
- **inactive on the box**: a hidden neuron whose pre-activation is ``< 0`` on the
  whole box (exact interval bounds on the pieces of a branch and bound,
  :func:`prove_on_box`): its incoming parameters never matter for inputs in the box;
- **active on the box**: a hidden neuron whose pre-activation is ``> 0`` on the
  whole box is affine there: ``b_l[v] + t`` with ``b_{l+1} - t W_{l+1}[:,v]``
  leaves every output unchanged for inputs in the box (an exact straight line).

Interval bounds over-approximate: a neuron not proved so within the budget of
sub-boxes may still be dead or always active on the box.  :func:`never_seen`
proves the same way that one weight's column of ``Gamma`` vanishes on the box.

Called by :mod:`exactident.explain.design`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import flint

from exactident.linalg import exact
from exactident.model.fixed_edges import FixedEdges, Parameter
from exactident.model.network import Network, degenerate_neurons

__all__ = ["MAX_BOXES", "Obstruction", "interval_bounds", "never_seen", "obstructions", "prove_on_box"]

#: Sub-boxes examined per proof on the box.
MAX_BOXES = 16384

_ZERO = flint.fmpq(0)


@dataclass
class Obstruction:
    """Directions ``delta`` over ``tau`` with ``Gamma(X') delta = 0`` for every ``X'`` (in the box if ``box``).

    Attributes
    ----------
    kind : str
        ``"degenerate"``, ``"twins"``, ``"inactive-on-box"``, ``"active-on-box"`` or ``"unseen-on-box"``.
    neurons : list of (l, v)
    deltas : list of list of fmpq
        Independent directions, each of length ``dim``.
    box : bool
        Holds for inputs in the box only (else for every input).
    text : str
        One readable line.
    """

    kind: str
    neurons: list[tuple[int, int]]
    deltas: list[list[flint.fmpq]]
    box: bool
    text: str

    @property
    def delta(self) -> list[flint.fmpq]:
        """The first direction."""
        return self.deltas[0]


def interval_bounds(net: Network, lo: Sequence[flint.fmpq], hi: Sequence[flint.fmpq]
                    ) -> list[list[tuple[flint.fmpq, flint.fmpq]]]:
    """Exact bounds ``[lower, upper]`` on every hidden pre-activation ``z_l(x)_v`` over the box ``lo <= x <= hi``.

    Interval arithmetic over Q (sound, not tight beyond the first layer).

    Returns
    -------
    list (per hidden layer ``l = 1..L-1``) of list of (fmpq, fmpq)

    Examples
    --------
    >>> net = Network((1, 2, 1), [[[1], [-1]], [[1, 1]]], [[-3, 5], [0]])
    >>> interval_bounds(net, [flint.fmpq(0)], [flint.fmpq(2)])
    [[(-3, -1), (3, 5)]]
    """
    box = [(flint.fmpq(a), flint.fmpq(b)) for a, b in zip(lo, hi)]
    out = []
    for l in range(1, net.L):
        W = net.W[l - 1].table()
        layer = []
        for r in range(net.widths[l]):
            low = high = net.b[l - 1][r]
            for w, (a, b) in zip(W[r], box):
                low += w * a if w >= _ZERO else w * b
                high += w * b if w >= _ZERO else w * a
            layer.append((low, high))
        out.append(layer)
        box = [(max(a, _ZERO), max(b, _ZERO)) for a, b in layer]
    return out


def _split(box, scale):
    lo, hi = box
    j = max(range(len(lo)), key=lambda k: (hi[k] - lo[k]) * scale[k])
    mid = (lo[j] + hi[j]) / 2
    return [(lo, [*hi[:j], mid, *hi[j + 1:]]), ([*lo[:j], mid, *lo[j + 1:]], hi)]


def prove_on_box(net: Network, box: tuple[Sequence[flint.fmpq], Sequence[flint.fmpq]],
                 holds: Callable[[list[list[tuple[flint.fmpq, flint.fmpq]]]], bool],
                 max_boxes: int = 4096) -> bool:
    """Prove ``holds(interval_bounds(sub-box))`` on a cover of ``box`` by sub-boxes (exact branch and bound).

    The box is halved along its widest coordinate (relative to ``box``) until the interval
    bounds of :func:`interval_bounds` satisfy ``holds`` on every piece; False when that takes
    more than ``max_boxes`` evaluations.  Exact (rationals); sound whatever ``holds`` reads
    from the bounds, as they enclose every pre-activation over the piece.

    Examples
    --------
    ``relu(x) - relu(x - 1) + 1/4``, input in ``[0, 2]``: the second-layer pre-activation is at
    least ``1/4``, but plain interval bounds give ``-3/4``; pieces prove it positive.

    >>> net = Network((1, 2, 1, 1), [[[1], [1]], [[1, -1]], [[1]]], [[0, -1], [flint.fmpq(1, 4)], [0]])
    >>> box = ([flint.fmpq(0)], [flint.fmpq(2)])
    >>> interval_bounds(net, *box)[1][0][0]
    -3/4
    >>> prove_on_box(net, box, lambda bnd: bnd[1][0][0] > 0, max_boxes=64)
    True
    """
    lo0, hi0 = [flint.fmpq(v) for v in box[0]], [flint.fmpq(v) for v in box[1]]
    scale = [1 / (b - a) if b > a else flint.fmpq(0) for a, b in zip(lo0, hi0)]
    stack = [(lo0, hi0)]
    used = 0
    while stack:
        used += 1
        if used > max_boxes:
            return False
        piece = stack.pop()
        if holds(interval_bounds(net, *piece)):
            continue
        if all(a == b for a, b in zip(*piece)):
            return False
        stack += _split(piece, scale)
    return True


def never_seen(net: Network, box: tuple[Sequence[flint.fmpq], Sequence[flint.fmpq]], prm: Parameter,
               max_boxes: int = MAX_BOXES) -> bool:
    """Is the column of ``Gamma`` of ``W_l[v,k]`` zero at every point of the box (proved by :func:`prove_on_box`)?

    It is when, on every piece, neuron ``(l, v)`` is inactive (``z <= 0``) or input ``k`` of
    layer ``l`` is zero (hidden: ``z_{l-1,k} <= 0``; for ``l = 1``, ``x_k = 0`` on the piece).
    Hidden ``l < L`` only.
    """
    l, v, k = prm.l, prm.i, prm.j
    if k is None or l >= net.L:
        return False

    def holds(bnd) -> bool:
        if bnd[l - 1][v][1] <= _ZERO:
            return True
        return l > 1 and bnd[l - 2][k][1] <= _ZERO

    return prove_on_box(net, box, holds, max_boxes)


def _index(params: Sequence[Parameter]) -> dict[tuple[int, int, int | None], int]:
    return {(p.l, p.i, p.j): k for k, p in enumerate(params)}


def _incoming(net: Network, idx, l: int, v: int) -> list[int]:
    return [idx[(l, v, j)] for j in range(net.widths[l - 1]) if (l, v, j) in idx] + [idx[(l, v, None)]]


def _twin_directions(net: Network, fixed: FixedEdges, idx, l: int, u: int, v: int, c: flint.fmpq,
                     dim: int) -> list[list[flint.fmpq]]:
    """A basis of the first-order function-preserving directions for twins ``h_u = c h_v`` (module docstring)."""
    N = net.widths[l + 1]
    W = net.W[l]
    ku, kv = fixed.s_max[(l, u)], fixed.s_max[(l, v)]
    # scaling a neuron's incoming parameters is a move in tau only if none of them is a fixed edge
    scalable = [(kind, None) for kind, w in (("su", u), ("sv", v))
                if all((l, w, j) in idx for j in range(net.widths[l - 1]))]
    cols = scalable + [("u", k) for k in range(N) if k != ku] + [("v", k) for k in range(N) if k != kv]
    rows = []
    for k in range(N):
        row = []
        for kind, kk in cols:
            if kind == "su":
                row.append(c * W[k, u])
            elif kind == "sv":
                row.append(W[k, v])
            else:
                row.append((c if kind == "u" else flint.fmpq(1)) if kk == k else _ZERO)
        rows.append(row)
    K = exact.nullspace(flint.fmpq_mat(rows))
    out = []
    for col in range(K.ncols()):
        delta = [_ZERO] * dim
        for (kind, kk), s in zip(cols, [K[r, col] for r in range(K.nrows())]):
            if kind in ("su", "sv"):
                w = u if kind == "su" else v
                for j in range(net.widths[l - 1]):
                    delta[idx[(l, w, j)]] += s * net.W[l - 1][w, j]
                delta[idx[(l, w, None)]] += s * net.b[l - 1][w]
            else:
                delta[idx[(l + 1, kk, u if kind == "u" else v)]] += s
        if any(d != _ZERO for d in delta):
            out.append(delta)
    return out


def _units(cols: Sequence[int], dim: int) -> list[list[flint.fmpq]]:
    return [[flint.fmpq(int(j == c)) for j in range(dim)] for c in cols]


def obstructions(net: Network, fixed: FixedEdges, params: Sequence[Parameter],
                 box: tuple[Sequence[flint.fmpq], Sequence[flint.fmpq]] | None = None,
                 box_candidates: Sequence[tuple[int, int, int]] | None = None,
                 max_boxes: int = MAX_BOXES) -> list[Obstruction]:
    """The structural directions of the module docstring.

    ``theta in S`` and twins always; with a ``box``, each ``(l, v, sign)`` of ``box_candidates``
    is proved inactive (``sign < 0``) or active (``sign > 0``) on the whole box when
    :func:`prove_on_box` succeeds within ``max_boxes`` sub-boxes.

    Examples
    --------
    Two first-layer neurons ``relu(x)`` and ``relu(2x)``: twins with ``c = 1/2``.

    >>> from exactident.model.fixed_edges import fixed_edges, free_parameters
    >>> net = Network((1, 2, 1), [[[1], [2]], [[1, 1]]], [[0, 0], [0]])
    >>> fx = fixed_edges(net)
    >>> [(o.kind, o.neurons) for o in obstructions(net, fx, free_parameters(net, fx), None)]
    [('twins', [(1, 0), (1, 1)])]
    """
    idx = _index(params)
    dim = len(params)
    out: list[Obstruction] = []
    for l, v, why in degenerate_neurons(net):
        cols = (_incoming(net, idx, l, v) if why == "outgoing"
                else [idx[(l + 1, k, v)] for k in range(net.widths[l + 1]) if (l + 1, k, v) in idx])
        if not cols:
            continue
        what = "outgoing weights" if why == "outgoing" else "incoming weights and bias"
        out.append(Obstruction("degenerate", [(l, v)], _units(cols, dim), False,
                               f"theta is in S: neuron ({l},{v}) has all {what} zero, so its "
                               f"{'incoming' if why == 'outgoing' else 'outgoing'} parameters never reach the "
                               "outputs"))
    for l in range(1, net.L):
        rows = [[net.W[l - 1][v, j] for j in range(net.widths[l - 1])] + [net.b[l - 1][v]]
                for v in range(net.widths[l])]
        for u in range(len(rows)):
            for v in range(u + 1, len(rows)):
                c = _positive_ratio(rows[u], rows[v])
                if c is None:
                    continue
                deltas = _twin_directions(net, fixed, idx, l, u, v, c, dim)
                if deltas:
                    out.append(Obstruction("twins", [(l, u), (l, v)], deltas, False,
                                           f"neurons ({l},{u}) and ({l},{v}) have proportional incoming weights "
                                           f"and biases (ratio {c}): h_{u} = {c} h_{v} on every input, so no "
                                           "sample separates them"))
    if box is not None:
        for l, v, sign in box_candidates or []:
            delta = [_ZERO] * dim
            if sign < 0 and prove_on_box(net, box, _below(l, v), max_boxes):
                out.append(Obstruction("inactive-on-box", [(l, v)], _units(_incoming(net, idx, l, v), dim), True,
                                       f"neuron ({l},{v}) is inactive on the whole box (exact interval bounds): "
                                       "no point of the box sees its incoming parameters"))
            elif sign > 0 and l < net.L and prove_on_box(net, box, _above(l, v), max_boxes):
                delta[idx[(l, v, None)]] = flint.fmpq(1)
                for k in range(net.widths[l + 1]):
                    delta[idx[(l + 1, k, None)]] = -net.W[l][k, v]
                out.append(Obstruction("active-on-box", [(l, v)], [delta], True,
                                       f"neuron ({l},{v}) is active on the whole box (exact interval bounds): "
                                       f"affine there, its bias trades with b_{l + 1}"))
    return out


def _below(l: int, v: int) -> Callable[[list[list[tuple[flint.fmpq, flint.fmpq]]]], bool]:
    return lambda bnd: bnd[l - 1][v][1] < _ZERO


def _above(l: int, v: int) -> Callable[[list[list[tuple[flint.fmpq, flint.fmpq]]]], bool]:
    return lambda bnd: bnd[l - 1][v][0] > _ZERO


def _positive_ratio(a: Sequence[flint.fmpq], b: Sequence[flint.fmpq]) -> flint.fmpq | None:
    """``c > 0`` with ``a = c b`` (both nonzero), else None."""
    k = next((i for i, x in enumerate(b) if x != _ZERO), None)
    if k is None or a[k] == _ZERO:
        return None
    c = a[k] / b[k]
    if c <= _ZERO or any(x != c * y for x, y in zip(a, b)):
        return None
    return c
