"""The canonical form of a layered ReLU network under positive rescaling and permutation of hidden neurons.

The group acting (docs/symmetries.md): for each hidden layer ``l = 1..L-1`` a permutation
``sigma_l`` of its ``N_l`` neurons and a positive rational ``lambda_l[i]`` per neuron; the
parameter ``theta`` becomes

``W_l'[i, j] = lambda_l[i] W_l[sigma_l[i], sigma_{l-1}[j]] / lambda_{l-1}[j]``,
``b_l'[i] = lambda_l[i] b_l[sigma_l[i]]``

(``sigma_0``, ``sigma_L`` the identity, ``lambda_0 = lambda_L = 1``).  It computes the same
function, because ``relu(lambda z) = lambda relu(z)`` for ``lambda > 0``.

The rule (all exact, over Q):

1. **Live and dead-in neurons.**  A hidden neuron is *dead-in* when its bias is zero and so is
   its incoming weight from every live neuron of the layer below (its pre-activation is then 0
   on every input); every other hidden neuron is *live*.  The definition is recursive over the
   layers and invariant under the group.
2. **Forward pass, live neurons** (``l = 1..L-1``).  The incoming vector of a live neuron is its
   row of ``W_l`` on the live neurons of layer ``l-1`` (in their canonical order, with their
   canonical scales) followed by its bias; its scale makes the first nonzero entry of that vector
   ``+1`` or ``-1``.  Live neurons are sorted by the normalised vector (lexicographic order of
   rationals) and come first; dead-in neurons come after them.
3. **Backward pass, dead-in neurons** (``l = L-1..1``).  A dead-in neuron's scale makes the first
   nonzero entry of its outgoing column (rows in the canonical order of layer ``l+1``, already
   scaled) ``+1`` or ``-1``; dead-in neurons are sorted by that normalised column.  A dead-in
   neuron whose outgoing column is zero keeps scale 1: it is *isolated* (if some incoming weight
   from a dead-in neuron below is nonzero, the form may then depend on the representative, which
   ``CanonicalForm.isolated`` reports; when its whole row is zero too it is all zero and the
   scale acts trivially).
4. **Ties.**  Neurons with equal sort keys (live *twins*: equal normalised incoming vectors; dead-in
   neurons with equal normalised outgoing columns) can be ordered in several ways; every order is
   tried (orders of identical neurons once) and the form is the lexicographically smallest
   parameter vector (``W_1`` row by row, ``b_1``, ``W_2``, ...).  More than
   :data:`MAX_BRANCHES` orders raise :class:`~exactident.errors.UnsupportedCaseError`.

Claim (docs/symmetries.md): two networks without an isolated neuron with a nonzero incoming
weight are in the same orbit iff their canonical forms are equal; equal forms always imply the
same orbit (the form is reached from each network by an element of the group).

**Any other network** (a layer graph: ``W = T theta + c``, docs/symmetries.md, "Layer graphs") has
its group from :mod:`exactident.symmetry.group`: the rescalings ``H`` and the permutations of
interchangeable blocks (dense units, convolution channels).  Its form (:class:`GraphCanonicalForm`):

1. **Rescalings.**  Repeatedly, the first generator ``g`` (by its first unit) having a *pivot* --
   the first parameter ``j`` with ``theta_j != 0``, ``c_j[g] = +-1`` and ``c_j[g'] = 0`` for every
   generator not yet normalised -- gets ``mu_g = |theta_j|^{-c_j[g]}``, so ``|theta_j| = 1``.  The
   pivots' exponents are triangular with ``+-1`` on the diagonal and the pivot choice depends only
   on the zero pattern of theta (which ``H`` keeps): when every generator moving a nonzero parameter
   got a pivot (``complete``), every member of an ``H``-orbit has the same form.
2. **Blocks.**  Each class of interchangeable blocks, by layer, is sorted by the blocks' normalised
   parameters (:func:`exactident.symmetry.group.block_key`: incoming weights, bias, slope, then
   outgoing weights; exact order of rationals), as the MLP's neurons are sorted by their normalised
   incoming vectors, and step 1 is run again.  Blocks tied before their outgoing weights are tried in
   every distinct order, as the MLP's twins, and the lexicographically smallest theta is the form.

Every step is a group element, so equal forms always prove the same orbit.  A plain ReLU MLP given
in the constrained form (``T = I``, ``c = 0``, slopes 0: ``is_plain``) gets the MLP's form above.

Called by :mod:`exactident.symmetry.equiv`, :mod:`exactident.symmetry.command`.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import flint

from exactident.errors import UnsupportedCaseError
from exactident.io.rationals import format_fmpq
from exactident.model.network import Network
from exactident.symmetry.group import (
    FamilyCodes,
    block_key,
    complete_for,
    interchangeable_blocks,
    normalise,
    permute_theta,
    scale_classes,
    structure_key,
    transform,
    unit_scales,
)

__all__ = ["MAX_BRANCHES", "CanonicalForm", "GraphCanonicalForm", "canonical_form", "parameter_vector"]

#: Most tie orders tried before giving up (the product over tie groups of their distinct orders).
MAX_BRANCHES = 40320

_ZERO = flint.fmpq(0)
_ONE = flint.fmpq(1)


@dataclass
class CanonicalForm:
    """The canonical representative of the orbit of ``theta`` and how it was reached.

    Attributes
    ----------
    network : Network
        The canonical parameters (exact, Q).
    perm : list of list of int
        ``perm[l-1][i]``: the original index of the neuron at canonical position ``i`` of hidden
        layer ``l`` (``sigma_l``).
    scale : list of list of fmpq
        ``scale[l-1][i]``: the positive rational ``lambda_l[i]`` that multiplies that neuron's
        incoming weights and bias (its outgoing weights are divided by it).
    twins : list of (l, list of int)
        Groups of live neurons with equal normalised incoming vectors (canonical indices).
    dead_in : list of (l, i)
        Dead-in neurons (canonical indices): pre-activation 0 on every input.
    dead_out : list of (l, i)
        Neurons with an all-zero outgoing column (canonical indices).
    isolated : list of (l, i)
        Dead-in neurons with a zero outgoing column and a nonzero incoming weight: their scale is not
        normalised, so equal orbits may give different forms (docs/symmetries.md).
    branches : int
        Tie orders tried.
    """

    network: Network
    perm: list[list[int]]
    scale: list[list[flint.fmpq]]
    twins: list[tuple[int, list[int]]] = field(default_factory=list)
    dead_in: list[tuple[int, int]] = field(default_factory=list)
    dead_out: list[tuple[int, int]] = field(default_factory=list)
    isolated: list[tuple[int, int]] = field(default_factory=list)
    branches: int = 1

    @property
    def key(self) -> tuple[flint.fmpq, ...]:
        """The parameter vector compared between forms (:func:`parameter_vector`)."""
        return tuple(parameter_vector(self.network))

    def digest(self) -> str:
        """A short fingerprint of the form (sha256 of the widths and exact entries, 16 hex digits)."""
        text = repr(self.network.widths) + ";" + ",".join(str(x) for x in self.key)
        return hashlib.sha256(text.encode("ascii")).hexdigest()[:16]


def parameter_vector(net: Network) -> list[flint.fmpq]:
    """``W_1`` row by row, ``b_1``, ``W_2``, ``b_2``, ... as one list (the order forms are compared in)."""
    out: list[flint.fmpq] = []
    for l in range(net.L):
        out += list(net.W[l].entries()) + list(net.b[l])
    return out


def _first_nonzero(v: Sequence[flint.fmpq]) -> flint.fmpq | None:
    return next((x for x in v if x != _ZERO), None)


def _orders(group: Sequence[int], ident: dict[int, int]) -> Iterator[tuple[int, ...]]:
    # distinct orders of a tie group: identical neurons (same ident) are interchangeable, tried once
    pools: dict[int, list[int]] = {}
    for p in group:
        pools.setdefault(ident[p], []).append(p)

    def rec(left: dict[int, int], prefix: list[int]) -> Iterator[tuple[int, ...]]:
        if len(prefix) == len(group):
            yield tuple(prefix)
            return
        for c in sorted(left):
            if left[c]:
                left[c] -= 1
                yield from rec(left, prefix + [pools[c][left[c]]])
                left[c] += 1

    yield from rec({c: len(v) for c, v in pools.items()}, [])


def _grouped(keys: dict[int, tuple[flint.fmpq, ...]]) -> list[list[int]]:
    ordered = sorted(keys, key=lambda p: keys[p])
    return [list(g) for _, g in itertools.groupby(ordered, key=lambda p: keys[p])]


def _class_ids(group: Sequence[int], data: dict[int, tuple[flint.fmpq, ...]]) -> dict[int, int]:
    ids: dict[tuple[flint.fmpq, ...], int] = {}
    return {p: ids.setdefault(data[p], len(ids)) for p in group}


class _Search:
    def __init__(self, net: Network):
        self.net = net
        self.best: tuple[tuple[flint.fmpq, ...], Network, list[list[int]], list[list[flint.fmpq]]] | None = None
        self.leaves = 0

    def count(self, n: int) -> None:
        self.leaves += n
        if self.leaves > MAX_BRANCHES:
            raise UnsupportedCaseError(f"canonical form: more than {MAX_BRANCHES} orders of tied neurons (twins or "
                                       "dead neurons that look alike) would have to be compared")

    def forward(self, l: int, perm: list[list[int]], scale: list[list[flint.fmpq]], live: list[int]) -> None:
        net = self.net
        if l == net.L:
            self.backward(net.L - 1, perm, scale, live)
            return
        W, widths = net.W[l - 1], net.widths
        cols = [(perm[l - 2][j], scale[l - 2][j]) for j in range(live[-1])] if l > 1 \
            else [(j, _ONE) for j in range(widths[0])]
        keys: dict[int, tuple[flint.fmpq, ...]] = {}
        lam: dict[int, flint.fmpq] = {}
        dead: list[int] = []
        for p in range(widths[l]):
            r = [W[p, q] / s for q, s in cols] + [net.b[l - 1][p]]
            f = _first_nonzero(r)
            if f is None:
                dead.append(p)
                continue
            lam[p] = 1 / abs(f)
            keys[p] = tuple(lam[p] * x for x in r)
        groups = _grouped(keys)
        nxt = net.W[l]
        # interchangeable twins: equal whole rows (dead columns included) and outgoing columns, once scaled
        outdata = {p: tuple(W[p, q] * lam[p] for q in range(widths[l - 1])) + keys[p]
                   + tuple(nxt[k, p] / lam[p] for k in range(widths[l + 1])) for p in keys}
        choices = [list(_orders(g, _class_ids(g, outdata))) if len(g) > 1 else [tuple(g)] for g in groups]
        total = 1
        for c in choices:
            total *= len(c)
        if total > 1:
            self.count(total - 1)
        for combo in itertools.product(*choices):
            order = [p for part in combo for p in part]
            self.forward(l + 1, perm + [order + dead], scale + [[lam[p] for p in order] + [_ONE] * len(dead)],
                         live + [len(order)])

    def backward(self, l: int, perm: list[list[int]], scale: list[list[flint.fmpq]], live: list[int]) -> None:
        net = self.net
        if l == 0:
            self.finish(perm, scale)
            return
        widths = net.widths
        n_live = live[l]
        dead = perm[l - 1][n_live:]
        if not dead:
            self.backward(l - 1, perm, scale, live)
            return
        M = net.W[l]
        rows = ([(perm[l][k], scale[l][k]) for k in range(widths[l + 1])] if l + 1 < net.L
                else [(k, _ONE) for k in range(widths[l + 1])])
        keys: dict[int, tuple[flint.fmpq, ...]] = {}
        lam: dict[int, flint.fmpq] = {}
        for p in dead:
            c = [s * M[q, p] for q, s in rows]
            f = _first_nonzero(c)
            lam[p] = abs(f) if f is not None else _ONE
            keys[p] = tuple(x / lam[p] for x in c)
        groups = _grouped(keys)
        Win = net.W[l - 1]
        indata = {p: keys[p] + tuple(Win[p, q] * lam[p] for q in range(widths[l - 1])) for p in dead}
        choices = [list(_orders(g, _class_ids(g, indata))) if len(g) > 1 else [tuple(g)] for g in groups]
        total = 1
        for ch in choices:
            total *= len(ch)
        if total > 1:
            self.count(total - 1)
        for combo in itertools.product(*choices):
            order = [p for part in combo for p in part]
            new_perm = perm[:l - 1] + [perm[l - 1][:n_live] + order] + perm[l:]
            new_scale = scale[:l - 1] + [scale[l - 1][:n_live] + [lam[p] for p in order]] + scale[l:]
            self.backward(l - 1, new_perm, new_scale, live)

    def finish(self, perm: list[list[int]], scale: list[list[flint.fmpq]]) -> None:
        out = transform(self.net, perm, scale)
        key = tuple(parameter_vector(out))
        if self.best is None or key < self.best[0]:
            self.best = (key, out, perm, scale)


def canonical_form(net: Network) -> CanonicalForm | GraphCanonicalForm:
    """The canonical representative of the orbit of ``net`` (module docstring; docs/symmetries.md).

    Parameters
    ----------
    net : Network
        Exact over Q.  A plain ReLU MLP (also in the constrained form) gets the MLP's form.

    Returns
    -------
    CanonicalForm or GraphCanonicalForm
        For a plain MLP: the form, the permutation and scales that reach it from ``net``, and the named
        twins, dead-in, dead-out and isolated neurons; otherwise the normal form of a layer graph.

    Raises
    ------
    UnsupportedCaseError
        More than :data:`MAX_BRANCHES` tie orders.

    Examples
    --------
    Two hidden neurons given in the "wrong" order and scale:

    >>> net = Network((1, 2, 1), [[[-2], [3]], [[5, 7]]], [[4, 0], [1]])
    >>> cf = canonical_form(net)
    >>> cf.network.W[0].entries(), cf.network.b[0], cf.network.W[1].entries(), cf.perm, cf.scale
    ([-1, 1], [2, 0], [10, 21], [[0, 1]], [[1/2, 1/3]])
    """
    return _mlp_form(net) if net.is_plain() else _graph_form(net)


def _mlp_form(net: Network) -> CanonicalForm:
    search = _Search(net)
    search.forward(1, [], [], [net.widths[0]])
    assert search.best is not None
    _, out, perm, scale = search.best
    cf = CanonicalForm(out, perm, scale, branches=search.leaves + 1)
    zero = _ZERO
    for l in range(1, net.L):
        Win, Wout = out.W[l - 1], out.W[l]
        rows = [[Win[i, j] for j in range(Win.ncols())] + [out.b[l - 1][i]] for i in range(out.widths[l])]
        for i in range(out.widths[l]):
            col_zero = all(Wout[k, i] == zero for k in range(Wout.nrows()))
            if col_zero:
                cf.dead_out.append((l, i))
        dead_in = _dead_in(out, l)
        n_below = out.widths[l - 1] - (len(_dead_in(out, l - 1)) if l > 1 else 0)  # live neurons come first
        live_rows = {i: tuple(rows[i][:n_below]) + (rows[i][-1],) for i in range(out.widths[l]) if i not in dead_in}
        cf.twins += [(l, g) for g in _grouped(live_rows) if len(g) > 1]
        for i in dead_in:
            cf.dead_in.append((l, i))
            if (l, i) in cf.dead_out and any(x != zero for x in rows[i]):
                cf.isolated.append((l, i))
    return cf


def _dead_in(net: Network, l: int) -> list[int]:
    # recursive definition of the module docstring, on any representative
    live_below = list(range(net.widths[0]))
    for m in range(1, l + 1):
        W, b = net.W[m - 1], net.b[m - 1]
        dead = [i for i in range(net.widths[m]) if b[i] == _ZERO and all(W[i, j] == _ZERO for j in live_below)]
        if m == l:
            return dead
        live_below = [i for i in range(net.widths[m]) if i not in dead]
    return []


@dataclass
class GraphCanonicalForm:
    """The normal form of a layer graph (module docstring, "Any other network").

    Attributes
    ----------
    network : Network
        The normalised network (same architecture, theta replaced); ``theta`` its free parameters.
    units : list of (l, v)
        The hidden units, in the order of ``scale``: the positive factor applied to each (the group
        element reaching the form, permutations included).
    classes : list of list of (l, v)
        The generators of ``H``: the units each one rescales; ``generators`` per generator unit row ->
        exponent; ``exponents`` per parameter generator -> exponent (:func:`~exactident.symmetry.group.scale_classes`).
    pivots : list of int or None
        Per generator, the parameter set to ``+-1`` (None: not normalised).
    complete : bool
        Every generator that moves a nonzero parameter has a pivot: the form is the same for the whole ``H``-orbit.
    mu : list of fmpq
        The generator scales of the element of ``H`` normalising theta before any permutation (an alignment
        of :mod:`exactident.symmetry.alignment`).
    perm : list of list of int or None
        Per hidden layer, ``perm[l-1][i]``: the original unit at position ``i`` of the form (None: no
        interchangeable blocks).
    groups : list of (l, blocks)
        The classes of interchangeable blocks (:func:`~exactident.symmetry.group.interchangeable_blocks`).
    """

    network: Network
    theta: list[flint.fmpq]
    units: list[tuple[int, int]]
    scale: list[flint.fmpq]
    classes: list[list[tuple[int, int]]]
    pivots: list[int | None]
    complete: bool
    structure: str = ""
    exponents: list[dict[int, int]] = field(default_factory=list)
    mu: list[flint.fmpq] = field(default_factory=list)
    perm: list[list[int]] | None = None
    groups: list[tuple[int, list[list[tuple[int, int]]]]] = field(default_factory=list)
    generators: list[dict[int, int]] = field(default_factory=list)

    @property
    def key(self) -> tuple[flint.fmpq, ...]:
        """The free parameters of the form (comparable between two networks of one family)."""
        return tuple(self.theta)

    def digest(self) -> str:
        """SHA-256 (first 16 hex digits) of the architecture and the exact parameters of the form."""
        h = hashlib.sha256(self.structure.encode())
        h.update(",".join(format_fmpq(v) for v in self.theta).encode())
        return h.hexdigest()[:16]


def _graph_form(cn: Network) -> GraphCanonicalForm:
    """The normal form of a layer graph (module docstring)."""
    units, generators, exponents = scale_classes(cn)
    theta, mu, pivots, left = normalise(cn.n_params, list(cn.theta()), generators, exponents)
    search = _BlockSearch(cn, units, generators, exponents)
    scale = unit_scales(len(units), generators, mu)
    search.run(0, theta, [list(range(cn.widths[l])) for l in range(1, cn.L)], scale, pivots,
               complete_for(theta, exponents, left))
    assert search.best is not None
    _, theta, perm, scale, pivots, complete = search.best
    return GraphCanonicalForm(cn.with_theta(theta), theta, units, scale,
                              [[units[u] for u in sorted(gen)] for gen in generators], pivots, complete,
                              structure_key(cn), exponents, list(mu), perm if search.groups else None, search.groups,
                              generators)


class _BlockSearch:
    """Sort each class of interchangeable blocks by the incoming part of its key; blocks tied there are tried in
    every distinct order (as the MLP's twins), and the lexicographically smallest theta is the form."""

    def __init__(self, cn: Network, units: list[tuple[int, int]], generators: list[dict[int, int]],
                 exponents: list[dict[int, int]]):
        self.cn, self.units, self.generators, self.exponents = cn, units, generators, exponents
        self.row = {u: r for r, u in enumerate(units)}
        self.codes = FamilyCodes(cn)
        self.groups = interchangeable_blocks(cn, units, generators, self.codes)
        self.best: tuple[Any, ...] | None = None
        self.leaves = 0

    def run(self, k: int, theta: list[flint.fmpq], perm: list[list[int]], scale: list[flint.fmpq],
            pivots: list[int | None], complete: bool) -> None:
        if k == len(self.groups):
            if self.best is None or tuple(theta) < self.best[0]:
                self.best = (tuple(theta), theta, perm, scale, pivots, complete)
            return
        cn, blocks = self.cn, self.groups[k][1]
        head = {i: block_key(cn, theta, blk, outgoing=False) for i, blk in enumerate(blocks)}
        full = {i: block_key(cn, theta, blk) for i, blk in enumerate(blocks)}
        choices = [list(_orders(g, _class_ids(g, full))) if len(g) > 1 else [tuple(g)] for g in _grouped(head)]
        total = 1
        for ch in choices:
            total *= len(ch)
        self.leaves += total - 1
        if self.leaves > MAX_BRANCHES:
            raise UnsupportedCaseError(f"canonical form: more than {MAX_BRANCHES} orders of interchangeable blocks "
                                       "equal on their incoming parameters would have to be compared")
        for combo in itertools.product(*choices):
            order = [i for part in combo for i in part]
            if order == list(range(len(blocks))):
                self.run(k + 1, theta, perm, scale, pivots, complete)
                continue
            new, pi = permute_theta(cn, theta, blocks, order, self.codes)
            new_perm, new_scale = [list(p) for p in perm], list(scale)
            for m in range(1, cn.L):
                for a in range(cn.widths[m]):
                    if (d := int(pi[m][a])) != a:
                        new_perm[m - 1][d] = perm[m - 1][a]
                        new_scale[self.row[(m, d)]] = scale[self.row[(m, a)]]
            new, mu, new_pivots, left = normalise(cn.n_params, new, self.generators, self.exponents)
            new_scale = [a * b for a, b in zip(new_scale, unit_scales(len(self.units), self.generators, mu))]
            self.run(k + 1, new, new_perm, new_scale, new_pivots,
                     complete and complete_for(new, self.exponents, left))
