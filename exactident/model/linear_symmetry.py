"""The symmetries of linear units: invertible maps mixing them and translations of their values.

A *linear* unit has its negative slope fixed at 1 (no kink: a skip carrier, the units of an
``add`` with no activation after it, a leaky ReLU with slope exactly 1).  On the linear units
``Lin_l`` of hidden layer ``l`` the affine group acts: ``z -> M z + c`` (``M`` invertible) on their
values, compensated in the next layer, keeps every input-output map::

    W_l[Lin, :] -> M W_l[Lin, :],     b_l[Lin] -> M b_l[Lin] + c,
    W_{l+1}[:, Lin] -> W_{l+1}[:, Lin] M^{-1},   b_{l+1} -> b_{l+1} - W_{l+1}[:, Lin] M^{-1} c.

The kinked units' pre-activations are unchanged *as functions of the input*, so the realised function is
unchanged for every ``theta`` and every activation pattern.  Its Lie algebra element ``g = (E_l, c_l)_l``
moves the dense weights by the affine vector field ``delta(g; W)``: ``E W_l[Lin, :]``, ``E b_l[Lin] + c``,
``-W_{l+1}[:, Lin] E``, ``-W_{l+1}[:, Lin] c`` (summed over the layers).  A generator is *admissible*
when ``delta(g; T theta' + c)`` lies in ``image T`` for *every* ``theta'`` (fixed entries do not move,
entries tied to one parameter move alike): as ``delta`` is affine in ``theta'`` this is ``delta_0(g) +
delta_1(g; C) in image T`` and ``delta_1(g; T_j) in image T`` for every column ``T_j``, linear in ``g``, solved
exactly (fmpq).  Then the flow of ``g`` keeps the family and the function, and its tangent at ``theta``,
pulled back through ``T``, is a kernel vector of ``Gamma_free(s)`` for every tie resolution ``s`` and every
input (docs/theory.md, "Symmetries of linear units").

Mixing matrices ``E_l`` are used for layers with at most :data:`MAX_MIXED_UNITS` linear units (a
``m x m`` block of unknowns each); larger layers get their translations only (fewer symmetries
make ``dim_free`` larger, never a wrong verdict).  The verifier applies the same rule.

Two more kinds of exact moves live here (docs/theory.md): :func:`composition_directions` moves the weights
out of the linear units of a layer into its next kinked units along the left kernel of the weights into
them (two convolutions with no activation between them compose to one convolution with more
factorisations than channel mixings give), and :func:`slope_trade_directions` trades the free slopes of a
PReLU layer against the weights they feed (``prelu_a(z) = a z + (1 - a) relu(z)``: the linear parts of a
layer wider than its outputs times its inputs can be redistributed).  Both are solved at the current
``theta`` and proved, together with the group above, in the identifiability proof's family ``e(u)``.

Called by :mod:`exactident.model.symmetry`.
"""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction
from math import lcm

import flint
import numpy as np

from exactident.errors import InvariantViolation
from exactident.model.constrained import ConstrainedNetwork

__all__ = ["COMPOSITION_KERNEL", "LINEAR_MAP", "MAX_MIXED_UNITS", "SLOPE_TRADE", "TRANSLATION",
           "composition_directions", "linear_units", "slope_trade_directions", "stretch_directions"]

#: Largest number of linear units of one layer whose mixing matrix ``E_l`` is solved for.
MAX_MIXED_UNITS = 24
#: The kind of a direction mixing linear units (``E != 0``).
LINEAR_MAP = "linear-map"
#: The kind of a direction translating the values of linear units (``E = 0``, ``c != 0``).
TRANSLATION = "bias-translation"
#: The kind of a direction moving the weights *out of* linear units inside the left kernel of the weights into them.
COMPOSITION_KERNEL = "composition-kernel"
#: The kind of a direction trading PReLU slopes against the next weights (the linear parts of the units moved).
SLOPE_TRADE = "slope-trade"


def linear_units(cn: ConstrainedNetwork) -> dict[int, list[int]]:
    """Hidden layer ``l`` -> its linear units (slope fixed at 1), for the layers that have some.

    >>> from exactident.model.network import Network
    >>> from exactident.model.constrained import from_network
    >>> cn = from_network(Network((1, 2, 1), [[[1], [1]], [[1, 1]]], [[0, 0], [0]]))
    >>> cn.negative_slope[0][1] = flint.fmpq(1)
    >>> linear_units(cn)
    {1: [1]}
    """
    out = {}
    for l in range(1, cn.L):
        lin = [int(v) for v in np.flatnonzero(~cn.kinked(l))]
        if lin:
            out[l] = lin
    return out


class _Vars:
    """Unknowns ``E_l[a, b]`` (layers with few linear units) and ``c_l[a]``."""

    def __init__(self, lin: dict[int, list[int]], mix: bool) -> None:
        self.lin = lin
        self.pos = {l: {v: a for a, v in enumerate(us)} for l, us in lin.items()}
        self.E: dict[tuple[int, int, int], int] = {}
        self.c: dict[tuple[int, int], int] = {}
        n = 0
        for l, us in lin.items():
            if mix and len(us) <= MAX_MIXED_UNITS:
                for a in range(len(us)):
                    for b in range(len(us)):
                        self.E[(l, a, b)] = n
                        n += 1
            for a in range(len(us)):
                self.c[(l, a)] = n
                n += 1
        self.n = n


def _delta(cn: ConstrainedNetwork, V: _Vars, Wl, bl, const: bool) -> dict[tuple, dict[int, Fraction]]:
    """``delta(g; W)`` as linear forms in the unknowns: dense entry -> {unknown: coefficient}.

    ``Wl(l)`` is a dict ``(i, k) -> value`` of the nonzero entries of ``W_l`` of the network the
    field is evaluated at, ``bl(l)`` the same for ``b_l`` (``i -> value``); ``const`` adds the
    translation term ``c_l`` itself (the part of ``delta`` that does not depend on ``W``).
    """
    out: dict[tuple, dict[int, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    for l in range(1, cn.L + 1):
        rows = V.pos.get(l, {})
        cols = V.pos.get(l - 1, {}) if l > 1 else {}
        lin_l = V.lin.get(l, [])
        lin_c = V.lin.get(l - 1, []) if l > 1 else []
        for (i, k), w in Wl(l).items():
            if i in rows:  # E_l W_l[Lin, :]: entry (Lin[a], k) gets E[a, b] W[Lin[b], k]
                b = rows[i]
                for a, u in enumerate(lin_l):
                    e = V.E.get((l, a, b))
                    if e is not None:
                        out[("W", l, u, k)][e] += w
            if k in cols:  # -W_l[:, Lin] E_{l-1}: entry (i, Lin[b]) gets -W[i, Lin[a]] E[a, b]
                a = cols[k]
                for b, u in enumerate(lin_c):
                    e = V.E.get((l - 1, a, b))
                    if e is not None:
                        out[("W", l, i, u)][e] -= w
                out[("b", l, i)][V.c[(l - 1, a)]] -= w  # -W_l[:, Lin] c_{l-1}
        for i, w in bl(l).items():
            if i in rows:
                b = rows[i]
                for a, u in enumerate(lin_l):
                    e = V.E.get((l, a, b))
                    if e is not None:
                        out[("b", l, u)][e] += w
        if const:
            for a, u in enumerate(lin_l):
                out[("b", l, u)][V.c[(l, a)]] += 1
    return out


def _entries(cn: ConstrainedNetwork):
    """Parameter -> its dense entries (``("W", l, i, k)``, ``("b", l, i)``, ``("a", l, v)``); fixed entries' index."""
    by_param: dict[int, list[tuple]] = defaultdict(list)
    for l in range(1, cn.L + 1):
        I = cn.W_index[l - 1]
        for i, k in zip(*np.nonzero(I >= 0)):
            by_param[int(I[i, k])].append(("W", l, int(i), int(k)))
        for i in np.flatnonzero(cn.b_index[l - 1] >= 0):
            by_param[int(cn.b_index[l - 1][i])].append(("b", l, int(i)))
    for l in range(1, cn.L):
        for v in np.flatnonzero(cn.slope_index[l - 1] >= 0):
            by_param[int(cn.slope_index[l - 1][v])].append(("a", l, int(v)))
    return by_param


def _param_of(cn: ConstrainedNetwork, e: tuple) -> int:
    if e[0] == "W":
        return int(cn.W_index[e[1] - 1][e[2], e[3]])
    if e[0] == "a":
        return int(cn.slope_index[e[1] - 1][e[2]])
    return int(cn.b_index[e[1] - 1][e[2]])


def _constraints(cn: ConstrainedNetwork, field: dict[tuple, dict[int, Fraction]], by_param, rows: list) -> None:
    """Rows saying ``field`` lies in ``image T``: fixed entries 0, a parameter's entries equal."""
    touched: dict[int, list[tuple]] = defaultdict(list)
    for e, form in field.items():
        form = {u: v for u, v in form.items() if v}
        j = _param_of(cn, e)
        if j < 0:
            if form:
                rows.append(form)
        else:
            touched[j].append(e)
    for j, es in touched.items():
        forms = [{u: v for u, v in field[e].items() if v} for e in es]
        if len(es) < len(by_param[j]):  # an untouched entry of theta_j does not move: neither may these
            rows.extend(f for f in forms if f)
            continue
        for f in forms[1:]:
            diff = dict(f)
            for u, v in forms[0].items():
                diff[u] = diff.get(u, Fraction(0)) - v
            diff = {u: v for u, v in diff.items() if v}
            if diff:
                rows.append(diff)


def _integer_row(row: dict[int, Fraction]) -> dict[int, int]:
    m = lcm(*(v.denominator for v in row.values()))
    return {u: int(v * m) for u, v in row.items()}


def _nullspace_rows(rows: list[dict[int, int]], n: int) -> flint.fmpq_mat:
    """A basis (columns) of ``{s : r . s = 0 for every row}`` over Q.

    Most rows say ``s_a = s_b`` or ``s_a = 0`` (a fixed weight, a tie inside a convolution channel):
    those merge variables (union-find) first; the other rows are then solved exactly on the classes.
    """
    parent = list(range(n + 1))  # node n stands for the value 0

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    general = []
    for row in rows:
        items = [(c, v) for c, v in row.items() if v]
        if len(items) == 1:
            parent[find(items[0][0])] = find(n)
        elif len(items) == 2 and items[0][1] == -items[1][1]:
            a, b = find(items[0][0]), find(items[1][0])
            if a != b:
                if n in (a, b):  # merged with the value 0
                    parent[a if a != n else b] = n
                else:
                    parent[max(a, b)] = min(a, b)
        elif items:
            general.append(items)
    zero = find(n)
    classes: dict[int, int] = {}
    for u in range(n):
        r = find(u)
        if r != zero and r not in classes:
            classes[r] = len(classes)
    m = len(classes)
    if general and m:
        M = flint.fmpz_mat(len(general), m)
        for i, items in enumerate(general):
            for c, v in items:
                r = find(c)
                if r != zero:
                    M[i, classes[r]] += v
        N, nullity = M.nullspace()
        basis = [[int(N[i, j]) for i in range(m)] for j in range(nullity)]
    else:
        basis = [[1 if i == j else 0 for i in range(m)] for j in range(m)]
    out = flint.fmpq_mat(n, len(basis))
    for u in range(n):
        r = find(u)
        if r != zero:
            for j, col in enumerate(basis):
                out[u, j] = col[classes[r]]
    return out


def _q(v: flint.fmpq) -> Fraction:
    return Fraction(int(v.p), int(v.q))


def _near(cn: ConstrainedNetwork, V: _Vars, l: int) -> tuple[list[int], list[int]]:
    """Rows (linear units of layer ``l``) and columns (linear units of layer ``l - 1``) of ``W_l`` a field touches."""
    return V.lin.get(l, []), (V.lin.get(l - 1, []) if l > 1 else [])


def _network_part(cn: ConstrainedNetwork, V: _Vars, fixed_only: bool):
    """``(Wl, bl)`` of :func:`_delta` for the fixed part ``C`` (``fixed_only``) or the whole current network."""
    W: list[dict[tuple[int, int], Fraction]] = []
    b: list[dict[int, Fraction]] = []
    for l in range(1, cn.L + 1):
        rows, cols = _near(cn, V, l)
        I, M = cn.W_index[l - 1], cn.W[l - 1]
        cells = {(i, k) for i in rows for k in range(cn.widths[l - 1])}
        cells |= {(i, k) for i in range(cn.widths[l]) for k in cols}
        W.append({(i, k): _q(M[i, k]) for i, k in cells
                  if M[i, k] != 0 and (not fixed_only or I[i, k] < 0)})
        Ib, bb = cn.b_index[l - 1], cn.b[l - 1]
        b.append({i: _q(bb[i]) for i in rows if bb[i] != 0 and (not fixed_only or Ib[i] < 0)})
    return (lambda l: W[l - 1]), (lambda l: b[l - 1])


def _generators(cn: ConstrainedNetwork, V: _Vars, by_param) -> flint.fmpq_mat:
    """A basis (columns) of the admissible generators ``g`` (module docstring)."""
    rows: list[dict[int, Fraction]] = []
    Wc, bc = _network_part(cn, V, True)
    _constraints(cn, _delta(cn, V, Wc, bc, True), by_param, rows)
    one = Fraction(1)
    # only the parameters with an entry in a linear unit's row (W_l, b_l) or column (W_{l+1}) give a field
    for j in sorted(_touching(cn, V)):
        Wj: dict[int, dict[tuple[int, int], Fraction]] = defaultdict(dict)
        bj: dict[int, dict[int, Fraction]] = defaultdict(dict)
        for e in by_param[j]:
            if e[0] == "W":
                Wj[e[1]][(e[2], e[3])] = one
            elif e[0] == "b":
                bj[e[1]][e[2]] = one
        _constraints(cn, _delta(cn, V, Wj.__getitem__, bj.__getitem__, False), by_param, rows)  # defaultdicts
    return _nullspace_rows([_integer_row(r) for r in rows], V.n)


def _touching(cn: ConstrainedNetwork, V: _Vars) -> set[int]:
    out: set[int] = set()
    for l, us in V.lin.items():
        for I in (cn.W_index[l - 1][us, :], cn.b_index[l - 1][us], cn.W_index[l][:, us]):
            out.update(int(j) for j in np.asarray(I).ravel() if j >= 0)
    return out


def stretch_directions(cn: ConstrainedNetwork) -> list[tuple[dict[int, flint.fmpq], str]]:
    """The tangents at ``theta`` of the admissible linear-unit symmetries, pulled back to ``theta`` (exact, Q).

    Returns
    -------
    list of (dict j -> fmpq, kind)
        Sparse directions in ``theta`` coordinates and their kind, :data:`TRANSLATION` (from the
        generators with ``E = 0``) first, then :data:`LINEAR_MAP`; not reduced (the caller keeps an
        independent subset together with the rescalings).

    Raises
    ------
    InvariantViolation
        When a direction moves a fixed entry or tied entries apart (cannot happen: the generators
        are admissible by construction).

    Examples
    --------
    ``y = w3 (w2 x + b2) + b3`` with the middle unit linear: one translation
    (``b2 += 1``, ``b3 -= w3``) and one map of the unit (its rescaling ``(w2, b2, -w3)``).

    >>> from exactident.model.network import Network
    >>> from exactident.model.constrained import from_network
    >>> cn = from_network(Network((1, 1, 1), [[[2]], [[3]]], [[5], [7]]))
    >>> cn.negative_slope[0][0] = flint.fmpq(1)
    >>> [({j: str(v) for j, v in d.items()}, kind) for d, kind in stretch_directions(cn)]
    [({1: '1', 3: '-3'}, 'bias-translation'), ({0: '2', 1: '5', 2: '-3'}, 'linear-map')]
    """
    lin = linear_units(cn)
    if not lin:
        return []
    by_param = _entries(cn)
    out: list[tuple[dict[int, flint.fmpq], str]] = []
    for mix in (False, True):
        V = _Vars(lin, mix)
        G = _generators(cn, V, by_param)
        Wt, bt = _network_part(cn, V, False)
        field = _delta(cn, V, Wt, bt, True)
        for g in range(G.ncols()):
            coeff = {u: Fraction(int(G[u, g].p), int(G[u, g].q)) for u in range(V.n) if G[u, g] != 0}
            if mix and not any(coeff.get(e) for e in V.E.values()):
                continue  # a translation: listed in the first pass
            dense = {e: sum((coeff.get(u, 0) * v for u, v in form.items()), Fraction(0))
                     for e, form in field.items()}
            direction: dict[int, flint.fmpq] = {}
            for e, value in dense.items():
                if not value:
                    continue
                j = _param_of(cn, e)
                if j < 0:
                    raise InvariantViolation(f"a linear-unit symmetry moves the fixed entry {e}")
                direction[j] = flint.fmpq(value.numerator, value.denominator)
            for j in direction:  # every entry of theta_j moves by the same amount
                if any(dense.get(e, 0) != Fraction(int(direction[j].p), int(direction[j].q))
                       for e in by_param[j]):
                    raise InvariantViolation(f"a linear-unit symmetry moves the entries of theta_{j} apart")
            if direction:
                out.append((direction, LINEAR_MAP if mix else TRANSLATION))
    return out


def composition_directions(cn: ConstrainedNetwork) -> list[dict[int, flint.fmpq]]:
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
    >>> from exactident.model.constrained import from_network
    >>> cn = from_network(Network((1, 2, 1), [[[1], [2]], [[3, 4]]], [[5, 6], [7]]))
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


def slope_trade_directions(cn: ConstrainedNetwork) -> list[dict[int, flint.fmpq]]:
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
