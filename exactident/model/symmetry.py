"""The rescaling symmetries a constrained family keeps, ``S_H``, and ``dim_free = rank T - dim S_H``.

A positive rescaling multiplies hidden unit ``v``'s incoming weights and bias by
``e^{s_v}`` and its outgoing weights by ``e^{-s_v}`` (``s = 0`` on inputs and outputs);
for a fixed activation pattern every unit is positively homogeneous (``h(e^s z) = e^s h(z)``,
slopes unchanged), so the function is unchanged.  It stays inside the family
``W = T theta + c`` for *every* theta exactly when

- a fixed nonzero weight ``W_l[i, k]`` keeps its value: ``s_{l,i} - s_{l-1,k} = 0``;
- a fixed nonzero bias ``b_l[i]`` keeps its value: ``s_{l,i} = 0``;
- the entries tied to one parameter get one common factor: ``s_{l,i} - s_{l-1,k}`` (a weight),
  ``s_{l,i}`` (a bias) and ``0`` (a PReLU slope: rescaling leaves slopes alone) are equal over
  the group.

These linear constraints on ``s`` define the group ``H`` (its log-scales: a subspace ``A``);
the group acts on ``theta`` by ``theta_j -> e^{c_j(s)} theta_j`` (``c_j`` the group's common
factor), so its orbit's tangent at ``theta`` is ``S_H = {(c_j(s) theta_j)_j : s in A}``.
Every direction of ``S_H`` is in the kernel of ``Gamma_free(s)`` for every tie resolution,
so ``rank Gamma_free <= dim_free = rank T - dim S_H`` (docs/theory.md, "Beyond the layered
ReLU MLP").  ``T`` (one 0/1 column per parameter, each dense entry in at most one column)
has full column rank: ``rank T = n_params``.

Linear units (slope fixed at 1) have more symmetries: invertible maps mixing the linear units of
a layer and translations of their values, compensated in the next layer
(:mod:`exactident.model.linear_symmetry`); their tangents at theta join the rescalings' in
``S_H``, each basis direction named by its kind (``kinds``); so do the moves of the weights out of
linear units along the left kernel of the weights into them (``composition-kernel``, the composition
of two affine maps through linear units unchanged), and the slope trades of PReLU layers
(``slope-trade``: free slopes traded against the weights they feed).  Missing symmetries only make
``dim_free`` too big, which can make a verdict inconclusive, never wrong.

Called by :mod:`exactident.check.free_route`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import flint

from exactident.model.extra_symmetry import (
    COMPOSITION_KERNEL,
    SLOPE_TRADE,
    composition_directions,
    slope_trade_directions,
)
from exactident.model.linear_symmetry import _nullspace_rows, stretch_directions
from exactident.model.network import Network

__all__ = ["RESCALING", "Symmetry", "log_scales", "rescaling_symmetry"]

#: The kind of a positive-rescaling direction in ``Symmetry.kinds``.
RESCALING = "rescaling"


@dataclass
class Symmetry:
    """``S_H`` at theta and the dimensions derived from it.

    Attributes
    ----------
    n_params, rank_t, symmetry_dim, dim_free : int
        ``k``, ``rank T`` (``= k``), ``dim S_H``, ``rank T - dim S_H``.
    basis : list of dict int -> fmpq
        A basis of ``S_H`` in ``theta`` coordinates (sparse columns, Q).
    log_scales : int
        ``dim A`` (rescalings kept by the family; more than ``symmetry_dim`` when some act trivially at theta).
    softmax_rank_bound : int
        ``k - dim(S_H + shifts)``: an upper bound on the rank of the Jacobian of the *softmax* of the
        outputs, whose kernel also holds the shifts of every logit by one amount (``b_L += c 1``,
        ``W_L += 1 u^T``) that the family allows.
    kinds : list of str
        ``kinds[d]`` names the symmetry of ``basis[d]``: ``"rescaling"``, ``"bias-translation"`` (the
        values of linear units shifted, compensated in the next layer) or ``"linear-map"`` (linear
        units mixed by an invertible map) or ``"composition-kernel"`` (the weights out of linear units moved
        along the left kernel of the weights into them) or ``"slope-trade"`` (PReLU slopes traded against the
        next weights); see :mod:`exactident.model.linear_symmetry` and :mod:`exactident.model.extra_symmetry`.
    """

    n_params: int
    rank_t: int
    symmetry_dim: int
    dim_free: int
    basis: list[dict[int, flint.fmpq]] = field(default_factory=list)
    log_scales: int = 0
    softmax_rank_bound: int = 0
    kinds: list[str] = field(default_factory=list)

    def describe(self) -> str:
        """The basis in words for a reason: ``"2 rescalings"``, ``"3 rescalings, 1 bias-translation"``.

        >>> Symmetry(4, 4, 2, 2, [], 0, 0, ["rescaling", "linear-map"]).describe()
        '1 rescaling, 1 linear-map of linear units'
        """
        if not self.kinds:
            return f"{self.symmetry_dim} rescalings"
        words = {"linear-map": "of linear units", "bias-translation": "through linear units",
                 "composition-kernel": "through linear units", "slope-trade": "of PReLU units"}
        return ", ".join(f"{n} {kind}{'s' if n != 1 else ''}" + (f" {words[kind]}" if kind in words else "")
                         for kind, n in self.counts().items())

    def counts(self) -> dict[str, int]:
        """How many basis directions of each kind (``{"rescaling": 2, "bias-translation": 1}``)."""
        out: dict[str, int] = {}
        for kind in self.kinds:
            out[kind] = out.get(kind, 0) + 1
        return out


def _units(cn: Network) -> dict[tuple[int, int], int]:
    """Column of the log-scale of hidden unit ``(l, v)``."""
    out: dict[tuple[int, int], int] = {}
    for l in range(1, cn.L):
        for v in range(cn.widths[l]):
            out[(l, v)] = len(out)
    return out


def _occurrences(cn: Network):
    """``(kind, l, i, k, index, value)`` for every dense weight (``"W"``), bias (``"b"``) and slope (``"a"``)."""
    for l in range(1, cn.L + 1):
        I, M = cn.W_index[l - 1], cn.W[l - 1]
        for i in range(cn.widths[l]):
            for k in range(cn.widths[l - 1]):
                yield "W", l, i, k, int(I[i, k]), M[i, k]
            yield "b", l, i, -1, int(cn.b_index[l - 1][i]), cn.b[l - 1][i]
    for l in range(1, cn.L):
        for v in range(cn.widths[l]):
            yield "a", l, v, -1, int(cn.slope_index[l - 1][v]), cn.negative_slope[l - 1][v]


def _factor(units: dict[tuple[int, int], int], kind: str, l: int, i: int, k: int) -> dict[int, int]:
    """The log-factor of one entry as a sparse row over the log-scales."""
    row: dict[int, int] = {}
    if kind == "a":
        return row
    if (l, i) in units:
        row[units[(l, i)]] = 1
    if kind == "W" and (l - 1, k) in units:
        row[units[(l - 1, k)]] = row.get(units[(l - 1, k)], 0) - 1
    return row


def _independent(columns: list[dict[int, flint.fmpq]], k: int) -> list[dict[int, flint.fmpq]]:
    """A maximal independent subset (exact rank by FLINT, greedy)."""
    if not columns:
        return []
    M = flint.fmpq_mat(k, len(columns))
    for c, col in enumerate(columns):
        for i, v in col.items():
            M[i, c] = v
    R, rank = M.rref()
    pivots, r = [], 0
    for c in range(len(columns)):
        if r < rank and R[r, c] != 0:
            pivots.append(c)
            r += 1
    return [columns[c] for c in pivots]


def _tie_constraints(cn: Network, factor, fixed_constrains) -> tuple[list[dict[int, int]],
                                                                               dict[int, dict[int, int]]]:
    """Linear constraints on the variables of a family of directions, from the entries of ``cn``.

    ``factor(kind, l, i, kk)`` is the (sparse, integer) linear form by which an entry moves; a fixed entry
    gives the row ``factor = 0`` when ``fixed_constrains(kind, value)``; the entries tied to one ``theta_j``
    must move alike (rows ``factor - factor_first = 0``).  Returns the rows and, per parameter, the form of
    its first entry (how ``theta_j`` itself moves).
    """
    rows: list[dict[int, int]] = []
    first: dict[int, dict[int, int]] = {}
    for kind, l, i, kk, idx, val in _occurrences(cn):
        f = factor(kind, l, i, kk)
        if idx < 0:
            if f and fixed_constrains(kind, val):
                rows.append(f)
            continue
        if idx not in first:
            first[idx] = f
            continue
        diff = dict(f)
        for c, v in first[idx].items():
            diff[c] = diff.get(c, 0) - v
        diff = {c: v for c, v in diff.items() if v}
        if diff:
            rows.append(diff)
    return rows, first


def log_scales(cn: Network) -> tuple[list[tuple[int, int]], flint.fmpq_mat, dict[int, dict[int, int]]]:
    """The group ``H`` itself: its hidden units, a basis of its log-scales ``A`` and each parameter's log-factor.

    Returns
    -------
    units : list of (l, v)
        The hidden units, rows of ``A`` in this order.
    A : fmpq_mat, shape ``(len(units), dim A)``
        Column ``g`` is a generator: ``s = A[:, g]`` rescales unit ``u`` by ``e^{s_u}`` (integer entries).
    factor : dict j -> {row of A: int}
        ``theta_j`` moves by ``e^{c_j(s)}``, ``c_j(s) = sum_u factor[j][u] s_u`` (a parameter feeding no
        rescaled entry has an empty form).

    Examples
    --------
    >>> from exactident.model.network import Network
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])],
    ...               [[flint.fmpq(-1)], [flint.fmpq(0)]])
    >>> units, A, factor = log_scales(net)
    >>> units, A.entries(), factor
    ([(1, 0)], [1], {0: {0: 1}, 1: {0: 1}, 2: {0: -1}, 3: {}})
    """
    units = _units(cn)
    zero = flint.fmpq(0)
    rows, first = _tie_constraints(cn, lambda kind, l, i, kk: _factor(units, kind, l, i, kk),
                                   lambda kind, val: kind != "a" and val != zero)
    return list(units), _nullspace_rows(rows, len(units)), first


def rescaling_symmetry(cn: Network) -> Symmetry:
    """``S_H``, ``dim_free`` and the softmax bound of ``cn`` at its current theta (exact, Q).

    Examples
    --------
    A plain ``1-1-1`` ReLU net keeps its one rescaling: ``dim_free = 4 - 1``.

    >>> from exactident.model.network import Network
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])],
    ...               [[flint.fmpq(-1)], [flint.fmpq(0)]])
    >>> sym = rescaling_symmetry(net)
    >>> sym.dim_free, sym.symmetry_dim, [{j: str(v) for j, v in c.items()} for c in sym.basis]
    (3, 1, [{0: '2', 1: '-1', 2: '-3'}])
    """
    k = cn.n_params
    zero = flint.fmpq(0)
    # a fixed nonzero weight or bias must keep its value (slopes are unchanged by any rescaling)
    _units_list, A, first = log_scales(cn)
    theta = cn.theta()
    cols: list[dict[int, flint.fmpq]] = []
    for a in range(A.ncols()):
        col: dict[int, flint.fmpq] = {}
        for j, f in first.items():
            cj = sum((A[u, a] * v for u, v in f.items()), zero)
            if cj != zero and theta[j] != zero:
                col[j] = cj * theta[j]
        if col:
            cols.append(col)
    basis = _independent(cols, k)
    kinds = [RESCALING] * len(basis)
    stretch = (stretch_directions(cn) + [(d, COMPOSITION_KERNEL) for d in composition_directions(cn)]
               + [(d, SLOPE_TRADE) for d in slope_trade_directions(cn)])
    if stretch:  # kept greedily: a direction already spanned (a linear unit's own rescaling) is dropped
        kept = _independent(basis + [d for d, _kind in stretch], k)
        extra = {id(d): kind for d, kind in stretch}
        kinds += [extra[id(d)] for d in kept[len(basis):]]
        basis = kept
    shifts = _shift_directions(cn)
    both = len(_independent(basis + shifts, k))
    return Symmetry(k, k, len(basis), k - len(basis), basis, A.ncols(), k - both, kinds)


def _shift_directions(cn: Network) -> list[dict[int, flint.fmpq]]:
    """Directions in theta adding one vector ``u`` to every row of ``W_L`` and one ``c`` to every ``b_L[i]``."""
    L, N = cn.L, cn.widths[cn.L - 1]
    n_var = N + 1  # u_0..u_{N-1}, c
    # a fixed entry of the last layer, zero or not, must keep its value
    rows, first = _tie_constraints(
        cn, lambda kind, l, _i, kk: ({kk: 1} if kind == "W" else {N: 1}) if l == L and kind != "a" else {},
        lambda kind, val: True)
    B = _nullspace_rows(rows, n_var)
    zero = flint.fmpq(0)
    out = []
    for a in range(B.ncols()):
        col = {j: sum((B[u, a] * v for u, v in f.items()), zero) for j, f in first.items()}
        col = {j: v for j, v in col.items() if v != zero}
        if col:
            out.append(col)
    return out
