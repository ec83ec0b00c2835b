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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import flint

from exactident.explain.obstructions import prove_on_box
from exactident.model.network import Network

__all__ = ["Mechanism", "active_directions", "attribute", "blocked_directions", "bottleneck_direction",
           "dead_directions", "far_nonnegative", "far_nonpositive", "full_index", "holds_on_domain",
           "kernel_dimension", "proved_sign", "rescalings", "sign_on_rn", "twin_directions"]

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


def attribute(net: Network, mechs: list[Mechanism]) -> tuple[int, list[Mechanism]]:
    """``(upper, kept)``: the proved upper bound ``dim - dim V`` and the mechanisms that add to ``V``, in order.

    Each mechanism's ``dimensions`` is set to what its directions add to the span of those before it
    (:func:`kernel_dimension`); those adding nothing are dropped.
    """
    acc: list[dict[int, flint.fmpq]] = []
    before = 0
    kept = []
    for m in mechs:
        acc += m.directions
        now = kernel_dimension(net, acc)
        m.dimensions = now - before
        if now > before:
            kept.append(m)
        before = now
    return net.dim - before, kept


def proved_sign(net: Network, l: int, v: int, sign: int, box: Box | None, max_boxes: int) -> bool:
    """Is ``sign * z_l(x)_v >= 0`` for every ``x`` in ``box`` (None: ``R^n``)? Exact; False: not proved."""
    if box is not None:
        return prove_on_box(net, box, lambda bnd: sign * (bnd[l - 1][v][0 if sign > 0 else 1]) >= _ZERO,
                            max_boxes)
    return sign_on_rn(net, l, v, sign, max_boxes)


Affine = tuple[flint.fmpq, flint.fmpq]  # (slope, intercept): the function s -> slope * s + intercept


def _at(f: Affine, R: flint.fmpq) -> flint.fmpq:
    return f[0] * R + f[1]


def _far_bounds(net: Network, lo: Sequence[flint.fmpq], hi: Sequence[flint.fmpq], R: flint.fmpq, upto: int
                ) -> list[list[tuple[Affine, Affine]]]:
    """Per layer ``1..upto``: affine ``L(s) <= z_l(s y) <= U(s)``, ``y`` in ``[lo, hi]``, all ``s >= R >= 0``."""
    W1 = net.W[0]
    layer = []
    for i in range(net.widths[1]):
        a_lo = a_hi = _ZERO
        for j in range(net.widths[0]):
            p, q = W1[i, j] * lo[j], W1[i, j] * hi[j]
            a_lo += min(p, q)
            a_hi += max(p, q)
        layer.append(((a_lo, net.b[0][i]), (a_hi, net.b[0][i])))
    out = [layer]
    for l in range(2, upto + 1):
        h = []
        for L, U in layer:  # relu, kept affine: 0 or L below, 0, U or U - U(R) (or U(R)) above
            low = L if L[0] >= _ZERO and _at(L, R) >= _ZERO else (_ZERO, _ZERO)
            if U[0] <= _ZERO and _at(U, R) <= _ZERO:
                up: Affine = (_ZERO, _ZERO)
            elif U[0] >= _ZERO and _at(U, R) >= _ZERO:
                up = U
            elif U[0] > _ZERO:
                up = (U[0], U[1] - _at(U, R))
            else:
                up = (_ZERO, _at(U, R))
            h.append((low, up))
        W = net.W[l - 1]
        layer = []
        for i in range(net.widths[l]):
            Ls, Li, Us, Ui = _ZERO, net.b[l - 1][i], _ZERO, net.b[l - 1][i]
            for j, (L, U) in enumerate(h):
                w = W[i, j]
                if w == _ZERO:
                    continue
                lo_f, up_f = (L, U) if w > _ZERO else (U, L)
                Ls, Li, Us, Ui = Ls + w * lo_f[0], Li + w * lo_f[1], Us + w * up_f[0], Ui + w * up_f[1]
            layer.append(((Ls, Li), (Us, Ui)))
        out.append(layer)
    return out


def far_nonpositive(bound: tuple[Affine, Affine], R: flint.fmpq) -> bool:
    """Is the upper bound ``U(s) <= 0`` for every ``s >= R``?"""
    U = bound[1]
    return U[0] <= _ZERO and _at(U, R) <= _ZERO


def far_nonnegative(bound: tuple[Affine, Affine], R: flint.fmpq) -> bool:
    """Is the lower bound ``L(s) >= 0`` for every ``s >= R``?"""
    L = bound[0]
    return L[0] >= _ZERO and _at(L, R) >= _ZERO


def _far_field(net: Network, upto: int, holds: Callable[[list[list[tuple[Affine, Affine]]], flint.fmpq], bool],
               R: flint.fmpq, max_boxes: int) -> bool:
    """``holds`` on the far bounds of each piece of a cover of ``{|x|_inf >= R}`` (cube faces times ``s >= R``)."""
    n = net.widths[0]
    used = 0
    for j in range(n):
        for side in (-1, 1):
            lo = [flint.fmpq(-1)] * n
            hi = [flint.fmpq(1)] * n
            lo[j] = hi[j] = flint.fmpq(side)
            stack = [(lo, hi)]
            while stack:
                used += 1
                if used > max_boxes:
                    return False
                a, b = stack.pop()
                if holds(_far_bounds(net, a, b, R, upto), R):
                    continue
                k = max((k for k in range(n) if k != j), key=lambda k: b[k] - a[k], default=None)
                if k is None or b[k] == a[k]:
                    return False
                mid = (a[k] + b[k]) / 2
                stack += [(a, [*b[:k], mid, *b[k + 1:]]), ([*a[:k], mid, *a[k + 1:]], b)]
    return True


def holds_on_domain(net: Network, box: Box | None, upto: int, on_box: Callable[[Any], bool],
                    far: Callable[[Any, flint.fmpq], bool], max_boxes: int) -> bool:
    """Prove a property of the pre-activations (layers ``<= upto``) at every input of the domain.

    ``on_box(bounds)`` reads :func:`~exactident.explain.obstructions.interval_bounds` of a piece,
    ``far(bounds, R)`` the far-field bounds of :func:`sign_on_rn`; each must imply the property on
    its piece.  A box: one branch and bound.  ``R^n``: the far field beyond ``R`` and a branch
    and bound on ``[-R, R]^n``, for ``R = 16``.
    """
    if box is not None:
        return prove_on_box(net, box, on_box, max_boxes)
    for R in (flint.fmpq(16),):
        if _far_field(net, upto, far, R, max_boxes // 2):
            return prove_on_box(net, ([-R] * net.widths[0], [R] * net.widths[0]), on_box, max_boxes)
    return False


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
    is in ``[0, inf)``), e.g. nonnegative incoming weights and a nonnegative bias.  Then the far
    field: every ``x`` with ``|x|_inf >= R`` is ``s y``, ``s >= R``, ``y`` on a face of ``[-1, 1]^n``; on
    pieces of each face, bounds ``L(s) <= z <= U(s)`` affine in ``s`` are carried through the layers
    (through ReLU: ``0`` or ``L`` below; ``0``, ``U``, ``U - U(R)`` or ``U(R)`` above, whichever is
    valid for all ``s >= R``), and the sign of ``U`` (``L``) for all ``s >= R`` is read off its slope
    and its value at ``R``.  Where the first layer is inactive on a whole piece, the layers above
    are exact constants.  Then a branch and bound on ``[-R, R]^n`` (``R = 16``).
    """
    bounds = _global_bounds(net)[l - 1][v]
    if (sign > 0 and bounds[0] is not None and bounds[0] >= _ZERO) or (
            sign < 0 and bounds[1] is not None and bounds[1] <= _ZERO):
        return True
    test = far_nonnegative if sign > 0 else far_nonpositive
    return holds_on_domain(net, None, l, lambda bnd: sign * (bnd[l - 1][v][0 if sign > 0 else 1]) >= _ZERO,
                           lambda fb, R: test(fb[l - 1][v], R), max_boxes)
