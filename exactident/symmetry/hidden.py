"""Directions that survive every sample: the proved part of the hidden symmetries (docs/symmetries.md).

Everything here lives in the *full* parameter space (all of ``W_l`` row-major,
then ``b_l``, for ``l = 1..L``; :func:`full_index`), where the positive
rescalings of the hidden neurons are kernel directions of the Jacobian at every
input.  A *mechanism* is a set of full-space directions ``delta`` with
``J(x) delta = 0`` at every input ``x`` of the domain where no hidden
pre-activation is zero (``J(x)``: the Jacobian of ``theta -> f_theta(x)``):

- ``dead``: a hidden neuron with ``z <= 0`` on the whole domain; its incoming
  weights and bias and its outgoing weights are unit directions;
- ``blocked``: a hidden neuron whose every outgoing weight is zero or leads to a
  dead or blocked neuron; its incoming weights and bias are unit directions, as
  the outgoing weights into dead or blocked neurons, and the incoming weights
  from dead neurons;
- ``active``: the hidden neurons ``S`` of one layer with ``z >= 0`` on the whole
  domain (affine there); with ``A = W_{l+1}[:, S]``, ``B = W_l[S, :]``, ``c = b_l[S]``,
  ``d = b_{l+1}``, the layer ``l + 1`` sees ``A (B h + c) + d``: for every
  ``E`` in ``gl(|S|)`` and ``u`` in ``R^|S|``, ``(dA, dB, dc, dd) = (-A E, E B, E c + u,
  -A u)`` keeps it to first order (``|S|^2 + |S|`` directions, the ``|S|`` positive
  rescalings among them);
- ``bottleneck``: a hidden layer ``l`` of width 1 whose neuron ``u``, when inactive,
  leaves the outputs blind to ``z_{l+1}`` along ``W_{l+1}[:, u]``: with ``h_l = 0`` the
  layers above are constant (one activation pattern), and if ``D W_{l+1}[:, u] = 0``
  for the derivative ``D`` of the outputs in ``z_{l+1}`` there, then ``b_l[u] + t``,
  ``b_{l+1} - t W_{l+1}[:, u]`` keeps the outputs to first order at every input
  (where ``u`` is active it is affine; where it is not, ``b_l`` is unseen and the
  change of ``z_{l+1}`` is killed by ``D``);
- ``twins``: two neurons of one layer with ``(W_l[u,:], b_l[u]) = c (W_l[v,:],
  b_l[v])``, ``c > 0``: ``h_u = c h_v`` everywhere, and ``dW_{l+1}[k,u] = 1``,
  ``dW_{l+1}[k,v] = -c`` keeps ``z_{l+1}`` for each ``k``;
- ``unseen``: on a box, a weight ``W_l[v,k]`` whose column is proved zero at every
  point (:func:`exactident.explain.obstructions.never_seen`).

The domain is a box (exact interval bounds on the pieces of a branch and bound,
:func:`exactident.explain.obstructions.prove_on_box`) or all of ``R^n``
(:func:`sign_on_rn`: the bias-free network bounds the far field, a box the rest).
How the directions become an upper bound on the rank is in :func:`kernel_dimension`.

Called by :mod:`exactident.symmetry.fdim`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import flint

from exactident.explain.obstructions import interval_bounds, prove_on_box
from exactident.model.network import Network

__all__ = ["Mechanism", "active_directions", "blocked_directions", "bottleneck_direction", "dead_directions",
           "full_index", "kernel_dimension", "proved_sign", "rescalings", "sign_on_rn", "twin_directions"]

_ZERO = flint.fmpq(0)
Box = tuple[Sequence[flint.fmpq], Sequence[flint.fmpq]]


@dataclass
class Mechanism:
    """One proved mechanism: its kind, the neurons and the full-space directions (docstring above).

    Attributes
    ----------
    kind : str
        ``"dead"``, ``"blocked"``, ``"active"``, ``"bottleneck"``, ``"twins"`` or ``"unseen"``.
    neurons : list of (l, v)
    directions : list of dict
        Sparse full-space directions ``{full index: fmpq}``.
    text : str
    dimensions : int
        What it adds to the proved kernel after the mechanisms before it (set by the caller).
    """

    kind: str
    neurons: list[tuple[int, int]]
    directions: list[dict[int, flint.fmpq]]
    text: str
    dimensions: int = 0


def full_index(widths: Sequence[int]):
    """``(l, i, j)`` -> index in the full parameter vector (``j = None``: the bias ``b_l[i]``).

    Examples
    --------
    >>> ix = full_index((2, 3, 1))
    >>> ix(1, 0, 1), ix(1, 2, None), ix(2, 0, 2), ix(2, 0, None)
    (1, 8, 11, 12)
    """
    offsets = []
    off = 0
    for l in range(1, len(widths)):
        offsets.append(off)
        off += widths[l] * widths[l - 1] + widths[l]

    def index(l: int, i: int, j: int | None) -> int:
        base = offsets[l - 1]
        n_in = widths[l - 1]
        return base + widths[l] * n_in + i if j is None else base + i * n_in + j

    return index


def rescalings(net: Network) -> list[dict[int, flint.fmpq]]:
    """The positive rescaling of each hidden neuron, differentiated: incoming ``+``, outgoing ``-``."""
    ix = full_index(net.widths)
    out = []
    for l in net.hidden_layers():
        for v in range(net.widths[l]):
            d = {ix(l, v, j): net.W[l - 1][v, j] for j in range(net.widths[l - 1])}
            d[ix(l, v, None)] = net.b[l - 1][v]
            for k in range(net.widths[l + 1]):
                d[ix(l + 1, k, v)] = -net.W[l][k, v]
            out.append(d)
    return out


def _unit(i: int) -> dict[int, flint.fmpq]:
    return {i: flint.fmpq(1)}


def dead_directions(net: Network, l: int, v: int) -> list[dict[int, flint.fmpq]]:
    """Unit directions of a dead neuron: its incoming weights, bias and outgoing weights."""
    ix = full_index(net.widths)
    cols = [ix(l, v, j) for j in range(net.widths[l - 1])] + [ix(l, v, None)]
    cols += [ix(l + 1, k, v) for k in range(net.widths[l + 1])]
    return [_unit(c) for c in cols]


def blocked_directions(net: Network, dead: set[tuple[int, int]]) -> tuple[list[tuple[int, int]],
                                                                           list[dict[int, flint.fmpq]]]:
    """Neurons blocked by ``dead`` (module docstring) and the unit directions they and ``dead`` add."""
    ix = full_index(net.widths)
    gone = set(dead)
    blocked: list[tuple[int, int]] = []
    for l in range(net.L - 1, 0, -1):
        for v in range(net.widths[l]):
            if (l, v) in gone:
                continue
            if all(net.W[l][k, v] == _ZERO or (l + 1, k) in gone for k in range(net.widths[l + 1])):
                gone.add((l, v))
                blocked.append((l, v))
    cols = set()
    for l, v in blocked:
        cols |= {ix(l, v, j) for j in range(net.widths[l - 1])} | {ix(l, v, None)}
    for l in range(2, net.L + 1):  # weights out of a dead neuron, or into a dead / blocked one
        for i in range(net.widths[l]):
            for j in range(net.widths[l - 1]):
                if (l - 1, j) in dead or (l, i) in gone:
                    cols.add(ix(l, i, j))
    return blocked, [_unit(c) for c in sorted(cols)]


def active_directions(net: Network, l: int, S: Sequence[int]) -> list[dict[int, flint.fmpq]]:
    """``(-A E, E B, E c + u, -A u)`` for ``E = e_a e_b^T`` and ``u = e_a`` (module docstring)."""
    ix = full_index(net.widths)
    n_in, n_out = net.widths[l - 1], net.widths[l + 1]
    out = []
    for a in S:
        for b in S:
            d: dict[int, flint.fmpq] = {}
            for k in range(n_out):  # (-A E)[:, b] = -A[:, a]
                d[ix(l + 1, k, b)] = d.get(ix(l + 1, k, b), _ZERO) - net.W[l][k, a]
            for j in range(n_in):  # (E B)[a, :] = B[b, :]
                d[ix(l, a, j)] = d.get(ix(l, a, j), _ZERO) + net.W[l - 1][b, j]
            d[ix(l, a, None)] = d.get(ix(l, a, None), _ZERO) + net.b[l - 1][b]
            out.append(d)
        u = {ix(l, a, None): flint.fmpq(1)}
        for k in range(n_out):
            u[ix(l + 1, k, None)] = -net.W[l][k, a]
        out.append(u)
    return out


def bottleneck_direction(net: Network, l: int) -> dict[int, flint.fmpq] | None:
    """The ``bottleneck`` direction of the width-1 hidden layer ``l`` (module docstring), or None."""
    if net.widths[l] != 1:
        return None
    h: list[flint.fmpq] = [_ZERO]
    masks = []
    for k in range(l + 1, net.L):  # the constant forward pass above h_l = 0
        z = [sum((net.W[k - 1][i, j] * h[j] for j in range(len(h))), _ZERO) + net.b[k - 1][i]
             for i in range(net.widths[k])]
        if any(v == _ZERO for v in z):
            break  # every input where u is inactive is a tie: no such input is in the domain
        masks.append([v > _ZERO for v in z])
        h = [max(v, _ZERO) for v in z]
    else:
        M = [net.W[l][i, 0] for i in range(net.widths[l + 1])]
        for k in range(l + 1, net.L):
            M = [m if a else _ZERO for m, a in zip(M, masks[k - l - 1])]
            M = [sum((net.W[k][i, j] * M[j] for j in range(len(M))), _ZERO) for i in range(net.widths[k + 1])]
        if any(m != _ZERO for m in M):
            return None
    ix = full_index(net.widths)
    d = {ix(l, 0, None): flint.fmpq(1)}
    for i in range(net.widths[l + 1]):
        d[ix(l + 1, i, None)] = -net.W[l][i, 0]
    return d


def twin_directions(net: Network, l: int, u: int, v: int, c: flint.fmpq) -> list[dict[int, flint.fmpq]]:
    """``h_u = c h_v``: ``dW_{l+1}[k,u] = 1, dW_{l+1}[k,v] = -c`` for each ``k`` (module docstring)."""
    ix = full_index(net.widths)
    return [{ix(l + 1, k, u): flint.fmpq(1), ix(l + 1, k, v): -c} for k in range(net.widths[l + 1])]


def kernel_dimension(net: Network, directions: Sequence[dict[int, flint.fmpq]]) -> int:
    """``rank(directions + rescalings) - rank(rescalings)``: proved kernel dimension beyond the rescalings.

    Every vector of the span ``V`` is in the kernel of the full Jacobian ``J(X)`` at every sample
    ``X`` of the domain, so ``rank J(X) <= #params - dim V``; the rescalings alone have rank
    ``#hidden`` (each moves its neuron's incoming row, nonzero), so this returns ``dim - (#params -
    dim V)``: how far below ``dim`` the rank is proved to stay.  Exact (FLINT over Q).
    """
    resc = rescalings(net)
    rows = list(directions) + resc
    n_full = sum(net.widths[l] * net.widths[l - 1] + net.widths[l] for l in range(1, net.L + 1))

    def rank(rs: Sequence[dict[int, flint.fmpq]]) -> int:
        if not rs:
            return 0
        return int(flint.fmpq_mat(len(rs), n_full, [r.get(c, _ZERO) for r in rs for c in range(n_full)]).rank())

    return rank(rows) - rank(resc)


def proved_sign(net: Network, l: int, v: int, sign: int, box: Box | None, max_boxes: int) -> bool:
    """Is ``sign * z_l(x)_v >= 0`` for every ``x`` in ``box`` (None: ``R^n``)? Exact; False: not proved."""
    if box is not None:
        return prove_on_box(net, box, lambda bnd: sign * (bnd[l - 1][v][0 if sign > 0 else 1]) >= _ZERO,
                            max_boxes)
    return sign_on_rn(net, l, v, sign, max_boxes)


def _bias_free(net: Network) -> Network:
    return Network(net.widths, [flint.fmpq_mat(M) for M in net.W], [[_ZERO] * len(b) for b in net.b])


def _worst_bound(net: Network, box: Box, l: int, v: int, sign: int, max_boxes: int) -> flint.fmpq | None:
    """The largest upper bound of ``-sign * z`` over a cover of ``box`` where all are ``< 0``; None: not proved."""
    lo0, hi0 = [flint.fmpq(x) for x in box[0]], [flint.fmpq(x) for x in box[1]]
    scale = [1 / (b - a) if b > a else _ZERO for a, b in zip(lo0, hi0)]
    stack, worst, used = [(lo0, hi0)], None, 0
    while stack:
        used += 1
        if used > max_boxes:
            return None
        lo, hi = stack.pop()
        low, high = interval_bounds(net, lo, hi)[l - 1][v]
        bound = high if sign < 0 else -low  # bound on sign-adjusted "-sign z": must be < 0
        if bound < _ZERO:
            worst = bound if worst is None or bound > worst else worst
            continue
        if all(a == b for a, b in zip(lo, hi)):
            return None
        j = max(range(len(lo)), key=lambda k: (hi[k] - lo[k]) * scale[k])
        mid = (lo[j] + hi[j]) / 2
        stack += [(lo, [*hi[:j], mid, *hi[j + 1:]]), ([*lo[:j], mid, *lo[j + 1:]], hi)]
    return worst


def _global_bounds(net: Network) -> list[list[tuple[flint.fmpq | None, flint.fmpq | None]]]:
    """Interval bounds of every hidden pre-activation over ``R^n`` (None: unbounded): the sign argument."""
    box: list[tuple[flint.fmpq | None, flint.fmpq | None]] = [(None, None)] * net.widths[0]
    out = []
    for l in range(1, net.L):
        W = net.W[l - 1]
        layer = []
        for r in range(net.widths[l]):
            low: flint.fmpq | None = net.b[l - 1][r]
            high: flint.fmpq | None = net.b[l - 1][r]
            for j, (a, b) in enumerate(box):
                w = W[r, j]
                if w == _ZERO:
                    continue
                lo_term, hi_term = (a, b) if w > _ZERO else (b, a)
                low = None if low is None or lo_term is None else low + w * lo_term
                high = None if high is None or hi_term is None else high + w * hi_term
            layer.append((low, high))
        out.append(layer)
        box = [(_ZERO if a is None else max(a, _ZERO), None if b is None else max(b, _ZERO)) for a, b in layer]
    return out


def sign_on_rn(net: Network, l: int, v: int, sign: int, max_boxes: int = 4096) -> bool:
    """Prove ``sign * z_l(x)_v >= 0`` for every ``x`` in ``R^n`` (exact; False when not proved).

    First the sign argument: interval bounds over ``R^n`` with infinite ends (a hidden input
    is in ``[0, inf)``), e.g. nonnegative incoming weights and a nonnegative bias.  Then:
    ``z^0``, the same network without biases, is positively homogeneous, and ReLU is
    1-Lipschitz, so ``|z_l(x) - z^0_l(x)| <= C_l`` with ``C_1 = |b_1|``, ``C_l = |W_l| C_{l-1} +
    |b_l|`` (entrywise).  If ``-sign * z^0 <= -m < 0`` on every face of the cube ``[-1, 1]^n``
    (branch and bound), homogeneity gives ``-sign * z^0(x) <= -m |x|_inf``, so ``-sign * z(x) <= -m
    |x|_inf + C <= 0`` for ``|x|_inf >= R = C / m``; inside ``[-R, R]^n`` a second branch and
    bound proves it.
    """
    bounds = _global_bounds(net)[l - 1][v]
    if (sign > 0 and bounds[0] is not None and bounds[0] >= _ZERO) or (
            sign < 0 and bounds[1] is not None and bounds[1] <= _ZERO):
        return True
    n = net.widths[0]
    zero = _bias_free(net)
    worst = None
    for j in range(n):
        for side in (-1, 1):
            lo = [flint.fmpq(-1)] * n
            hi = [flint.fmpq(1)] * n
            lo[j] = hi[j] = flint.fmpq(side)
            w = _worst_bound(zero, (lo, hi), l, v, sign, max_boxes // (2 * n) or 1)
            if w is None:
                return False
            worst = w if worst is None or w > worst else worst
    assert worst is not None
    m = -worst
    C = [abs(x) for x in net.b[0]]
    for k in range(2, l + 1):
        W = net.W[k - 1]
        C = [sum((abs(W[i, j]) * C[j] for j in range(net.widths[k - 1])), _ZERO) + abs(net.b[k - 1][i])
             for i in range(net.widths[k])]
    R = C[v] / m
    box = ([-R] * n, [R] * n)
    return prove_on_box(net, box, lambda bnd: sign * (bnd[l - 1][v][0 if sign > 0 else 1]) >= _ZERO, max_boxes)
