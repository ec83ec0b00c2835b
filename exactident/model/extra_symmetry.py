"""Exact moves beyond the groups: kernels of compositions through linear units and PReLU slope trades.

:func:`composition_directions` moves the weights out of the linear units of a layer into its next kinked
units along the left kernel of the weights into them (two convolutions with no activation between them
compose to one convolution with more factorisations than channel mixings give);
:func:`slope_trade_directions` trades the free slopes of a PReLU layer against the weights they feed
(``prelu_a(z) = a z + (1 - a) relu(z)``: the linear parts of a layer wider than its outputs times its
inputs can be redistributed).  Both are solved exactly at the current ``theta``; docs/theory.md proves
them, together with the groups of :mod:`exactident.model.linear_symmetry` and the rescalings, in the
identifiability proof's family ``e(u)``.  The verifier recounts them by another route
(:mod:`exactident.verify.linear_symmetry`).

Called by :mod:`exactident.model.symmetry`.
"""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction

import flint
import numpy as np

from exactident.model.linear_symmetry import (
    _constraints,
    _entries,
    _integer_row,
    _nullspace_rows,
    _param_of,
    _q,
    linear_units,
)
from exactident.model.network import Network

__all__ = ["COMPOSITION_KERNEL", "SLOPE_TRADE", "composition_directions", "slope_trade_directions"]

#: The kind of a direction moving the weights *out of* linear units inside the left kernel of the weights into them.
COMPOSITION_KERNEL = "composition-kernel"
#: The kind of a direction trading PReLU slopes against the next weights (the linear parts of the units moved).
SLOPE_TRADE = "slope-trade"


def composition_directions(cn: Network) -> list[dict[int, flint.fmpq]]:
    """Directions moving the weights out of linear units along the left kernel of the weights into them (Q).

    For a hidden layer ``l`` with linear units ``Lin`` let ``R`` be the *kinked* units of layer ``l + 1``
    (every unit when ``l + 1 = L``).  A direction ``v`` in ``theta`` whose dense move ``T v`` touches only
    ``W_{l+1}[R, Lin]`` and ``b_{l+1}[R]`` (every entry of every moved parameter lies there) and satisfies,
    at the current ``theta``,

    ``dW_{l+1}[R, Lin] W_l[Lin, :] = 0``  and  ``db_{l+1}[R] + dW_{l+1}[R, Lin] b_l[Lin] = 0``

    keeps ``z_{l+1}[R]`` as a function of ``h_{l-1}`` (hence of the input) along the whole line
    ``theta + t v``: the linear units output ``W_l[Lin, :] h_{l-1} + b_l[Lin]``, which nothing on the line
    moves.  Such moves of different layers touch disjoint entries and none of them touches the rows
    ``W_l[Lin, :]``, ``b_l[Lin]`` another one reads, so every point of ``theta + span`` keeps every kinked
    pre-activation and every output (docs/theory.md, "Kernel of a composition through linear units").
    Example: two convolutions with no activation between them, whose composed kernel (a product of
    polynomials) has more factorisations than the channel mixings give.

    Returns
    -------
    list of dict j -> fmpq
        A basis of these directions, layer by layer (sparse, ``theta`` coordinates); not reduced against
        the other symmetries.

    Examples
    --------
    ``y = w2 . (W1 x + b1) + b2`` with two linear units reading one input: ``w2`` may move along the left
    kernel of ``W1 = [[1], [2]]``, ``(2, -1)``, with ``b2`` compensating ``-(2 b1[0] - b1[1])``.

    >>> from exactident.model.network import Network
    >>> cn = Network((1, 2, 1), [[[1], [2]], [[3, 4]]], [[5, 6], [7]])
    >>> cn.negative_slope[0][0] = cn.negative_slope[0][1] = flint.fmpq(1)
    >>> [{j: str(v) for j, v in d.items()} for d in composition_directions(cn)]
    [{4: '-2', 5: '1', 6: '4'}]
    """
    lin = linear_units(cn)
    if not lin:
        return []
    by_param = _entries(cn)
    out: list[dict[int, flint.fmpq]] = []
    for l, units in lin.items():
        rows = (list(range(cn.widths[l + 1])) if l + 1 == cn.L
                else [int(i) for i in np.flatnonzero(cn.kinked(l + 1))])
        if not rows:
            continue
        allowed = {("W", l + 1, i, u) for i in rows for u in units} | {("b", l + 1, i) for i in rows}
        I, Ib = cn.W_index[l], cn.b_index[l]
        touched = {int(I[i, u]) for i in rows for u in units if I[i, u] >= 0}
        moving = sorted(j for j in touched if all(e in allowed for e in by_param[j]))
        if not moving:
            continue
        var = {j: a for a, j in enumerate(moving)}
        bias_var = {j: len(var) + a for a, j in enumerate(sorted(
            {int(Ib[i]) for i in rows if Ib[i] >= 0 and all(e in allowed for e in by_param[int(Ib[i])])} - set(var)))}
        n = len(var) + len(bias_var)
        Wl, bl = cn.W[l - 1], cn.b[l - 1]
        B = {u: {k: _q(Wl[u, k]) for k in range(cn.widths[l - 1]) if Wl[u, k] != 0} for u in units}
        eqs: list[dict[int, Fraction]] = []
        for i in rows:
            prod: dict[int, dict[int, Fraction]] = defaultdict(lambda: defaultdict(Fraction))  # column -> form
            bias: dict[int, Fraction] = defaultdict(Fraction)
            for u in units:
                j = int(I[i, u])
                if j not in var:
                    continue
                for k, w in B[u].items():
                    prod[k][var[j]] += w
                if bl[u] != 0:
                    bias[var[j]] += _q(bl[u])
            jb = int(Ib[i])
            if jb in var or jb in bias_var:
                bias[var.get(jb, bias_var.get(jb, -1))] += 1
            eqs.extend(dict(f) for f in prod.values())
            eqs.append(dict(bias))
        N = _nullspace_rows([_integer_row(r) for r in eqs if any(r.values())], n)
        params = {**{a: j for j, a in var.items()}, **{a: j for j, a in bias_var.items()}}
        for c in range(N.ncols()):
            d = {params[a]: N[a, c] for a in range(n) if N[a, c] != 0}
            if d:
                out.append(d)
    return out


def slope_trade_directions(cn: Network) -> list[dict[int, flint.fmpq]]:
    """Directions trading the free slopes of a layer against the weights they feed (exact, Q).

    A PReLU unit ``v`` of layer ``l`` outputs ``a_v z_v + (1 - a_v) relu(z_v)``: the next layer reads its
    ReLU part through ``alpha_v = (1 - a_v) W_{l+1}[:, v]`` and its linear part through
    ``beta_v = a_v W_{l+1}[:, v]``.  Scaling ``W_{l+1}[:, v]`` by ``1 + s_v`` and setting
    ``a_v -> 1 - (1 - a_v) / (1 + s_v)`` keeps ``alpha_v`` and adds ``s_v W_{l+1}[:, v]`` to ``beta_v``;
    with ``b_{l+1} -= sum_v s_v W_{l+1}[:, v] b_l[v]`` every pre-activation of layer ``l + 1`` is unchanged as
    a function of the input whenever (at the current ``theta``)

    ``sum_v s_v W_{l+1}[:, v] W_l[v, :] = 0``

    -- a linear condition on ``s`` (one unknown per slope parameter), with solutions when the layer is
    wider than the outputs times the inputs it reads allow (a PReLU ``2-3-1``: 3 units, ``1 x 2`` conditions).
    The tangent is ``da_v = s_v (1 - a_v)``, ``dW_{l+1}[:, v] = s_v W_{l+1}[:, v]``, ``db_{l+1} = -sum_v
    s_v W_{l+1}[:, v] b_l[v]``; it must lie in ``image T`` (fixed entries still, tied entries alike), also
    solved exactly.  docs/theory.md, "Slope trades of PReLU layers", proves that these moves and the other
    symmetries together keep the function on a manifold through ``theta`` with that tangent.

    Returns
    -------
    list of dict j -> fmpq
        A basis of the tangents, layer by layer (sparse, ``theta`` coordinates).

    Examples
    --------
    ``y = 2 prelu_{1/4}(x) + 3 prelu_{1/2}(x + 1)``: ``s = (3, -2)`` makes ``s_0 2 + s_1 3 = 0``; the move is
    ``da = (3 (1 - 1/4), -2 (1 - 1/2))``, ``dw = (3 * 2, -2 * 3)``, ``db = -(-6 * 1)``.

    >>> from fractions import Fraction
    >>> from exactident.model.architecture import Architecture, Layer, exact_array
    >>> from exactident.model.compile import compile_architecture
    >>> arch = Architecture((1,), [
    ...     Layer("f1", "linear", ("input",), exact_array([[1], [1]]), exact_array([0, 1])),
    ...     Layer("a", "prelu", ("f1",), exact_array([Fraction(1, 4), Fraction(1, 2)])),
    ...     Layer("f2", "linear", ("a",), exact_array([[2, 3]]), exact_array([0]))], "f2")
    >>> cn = compile_architecture(arch)
    >>> [{cn.param_names[j]: str(v) for j, v in sorted(d.items())} for d in slope_trade_directions(cn)]
    [{'a.weight[0]': '9/4', 'a.weight[1]': '-1', 'f2.weight[0,0]': '6', 'f2.weight[0,1]': '-6', 'f2.bias[0]': '6'}]
    """
    by_param = _entries(cn)
    out: list[dict[int, flint.fmpq]] = []
    for l in range(1, cn.L):
        SI = cn.slope_index[l - 1]
        U = [int(v) for v in np.flatnonzero(np.asarray(SI) >= 0)]
        if not U:
            continue
        var = {g: a for a, g in enumerate(sorted({int(SI[v]) for v in U}))}
        Wn, Wl, bl = cn.W[l], cn.W[l - 1], cn.b[l - 1]
        field: dict[tuple, dict[int, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
        eqs: set[tuple] = set()
        for v in U:
            field[("a", l, v)][var[int(SI[v])]] += 1 - _q(cn.negative_slope[l - 1][v])
        for i in range(cn.widths[l + 1]):
            prod: dict[int, dict[int, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
            for v in U:
                if Wn[i, v] == 0:
                    continue
                w, g = _q(Wn[i, v]), var[int(SI[v])]
                field[("W", l + 1, i, v)][g] += w
                if bl[v] != 0:
                    field[("b", l + 1, i)][g] -= w * _q(bl[v])
                for k in range(cn.widths[l - 1]):
                    if Wl[v, k] != 0:
                        prod[k][g] += w * _q(Wl[v, k])
            for form in prod.values():
                row = _integer_row({g: c for g, c in form.items() if c}) if any(form.values()) else {}
                if row:
                    eqs.add(tuple(sorted(row.items())))
        rows: list[dict[int, Fraction]] = []
        _constraints(cn, field, by_param, rows)
        N = _nullspace_rows([dict(r) for r in eqs] + [_integer_row(r) for r in rows], len(var))
        for c in range(N.ncols()):
            sigma = {a: _q(N[a, c]) for a in range(len(var))}
            direction: dict[int, flint.fmpq] = {}
            for e, form in field.items():
                j = _param_of(cn, e)
                value = sum((sigma[g] * x for g, x in form.items()), Fraction(0))
                if j >= 0 and value:
                    direction[j] = flint.fmpq(value.numerator, value.denominator)
            if direction:
                out.append(direction)
    return out
