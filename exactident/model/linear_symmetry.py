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

Two more kinds of exact moves, solved at the current ``theta``, are in
:mod:`exactident.model.extra_symmetry`.

Called by :mod:`exactident.model.symmetry`.
"""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction
from math import lcm

import flint
import numpy as np

from exactident.errors import InvariantViolation
from exactident.model.network import Network

__all__ = ["LINEAR_MAP", "MAX_MIXED_UNITS", "TRANSLATION", "linear_units", "stretch_directions"]

#: Largest number of linear units of one layer whose mixing matrix ``E_l`` is solved for.
MAX_MIXED_UNITS = 24
#: The kind of a direction mixing linear units (``E != 0``).
LINEAR_MAP = "linear-map"
#: The kind of a direction translating the values of linear units (``E = 0``, ``c != 0``).
TRANSLATION = "bias-translation"


def linear_units(cn: Network) -> dict[int, list[int]]:
    """Hidden layer ``l`` -> its linear units (slope fixed at 1), for the layers that have some.

    >>> from exactident.model.network import Network
    >>> cn = Network((1, 2, 1), [[[1], [1]], [[1, 1]]], [[0, 0], [0]])
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


def _delta(cn: Network, V: _Vars, Wl, bl, const: bool) -> dict[tuple, dict[int, Fraction]]:
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


def _entries(cn: Network):
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


def _param_of(cn: Network, e: tuple) -> int:
    if e[0] == "W":
        return int(cn.W_index[e[1] - 1][e[2], e[3]])
    if e[0] == "a":
        return int(cn.slope_index[e[1] - 1][e[2]])
    return int(cn.b_index[e[1] - 1][e[2]])


def _constraints(cn: Network, field: dict[tuple, dict[int, Fraction]], by_param, rows: list) -> None:
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


def _near(cn: Network, V: _Vars, l: int) -> tuple[list[int], list[int]]:
    """Rows (linear units of layer ``l``) and columns (linear units of layer ``l - 1``) of ``W_l`` a field touches."""
    return V.lin.get(l, []), (V.lin.get(l - 1, []) if l > 1 else [])


def _network_part(cn: Network, V: _Vars, fixed_only: bool):
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


def _generators(cn: Network, V: _Vars, by_param) -> flint.fmpq_mat:
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


def _touching(cn: Network, V: _Vars) -> set[int]:
    out: set[int] = set()
    for l, us in V.lin.items():
        for I in (cn.W_index[l - 1][us, :], cn.b_index[l - 1][us], cn.W_index[l][:, us]):
            out.update(int(j) for j in np.asarray(I).ravel() if j >= 0)
    return out


def stretch_directions(cn: Network) -> list[tuple[dict[int, flint.fmpq], str]]:
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
    >>> cn = Network((1, 1, 1), [[[2]], [[3]]], [[5], [7]])
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
