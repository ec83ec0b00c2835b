"""The activation regions of a piecewise-linear network on ``R^n`` or a box, enumerated exactly (docs/symmetries.md).

Every network is read in the compiled layered form (:class:`exactident.symmetry.jacobian.Layered`:
a plain ReLU MLP, or a layer graph with convolutions, pooling, skips, leaky ReLU, PReLU).  A
*region* is the set of inputs with one activation pattern and no tie: the strict system
``s_{l,v} z_l(x)_v > 0`` over the *kinked* hidden units (``s = +1`` active, ``-1`` on the slope
side; ReLU, leaky ReLU and PReLU units kink at ``z = 0``, a unit of slope exactly 1 is linear and
does not).  On a region every unit computes ``h = z`` or ``h = a z`` with its fixed side, so below a
unit every layer is affine in ``x``: a region is an open polyhedron, and the tie-free inputs of the
domain are the disjoint union of the regions that meet it (a box is open here: an open region
meeting the closed box meets its interior).

:func:`enumerate_regions` walks the tree of partial patterns, kinked unit by kinked unit in layer
order.  A node holds the strict rows ``a_h . x + e_h > 0`` of its units, exact over Q
(the layers below are affine on it: ``h_l = diag(f) z_l``, ``f_v = 1`` on the active side and for
linear units, the slope ``a_v`` on the other), and a rational point satisfying them.  Each child
adds one row and is realised by the parent's point when it satisfies the new row, else decided
exactly by :func:`exactident.symmetry.region_lp.decide` (a float LP proposes a point or a Farkas
certificate, an exact check accepts it, the exact simplex method decides what the floats could
not).  A new row with ``a = 0`` is decided by the sign of ``e`` alone (``e = 0``: the unit's
pre-activation is 0 on the whole node, every input there is a tie, no child).  The cover is
**complete** when every node was decided: every tie-free input of the domain is then in
exactly one listed region.  A budget (``max_regions``, ``seconds``) stops the walk: the
regions found are real, the cover is not complete.

On a region the rows of the Jacobian ``J(x)`` of the outputs in the parameters are affine
in ``x`` (the pattern fixes every unit's side), so ``n0 + 1`` affinely independent points of
the region give all of them (the ``points`` of :class:`Region`);
:func:`exactident.symmetry.region_fdim.cover_rank` ranks them over all the regions of a complete
cover: the functional dimension itself.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import flint

from exactident.budget import stage
from exactident.model.network import Network
from exactident.symmetry.jacobian import Layered
from exactident.symmetry.region_lp import Row, decide, floats, lp_solver, scaled, value

__all__ = ["Region", "RegionCover", "enumerate_regions"]

_ZERO = flint.fmpq(0)
Box = tuple[Sequence[flint.fmpq], Sequence[flint.fmpq]]


@dataclass
class Region:
    """One activation region: its pattern and ``n0 + 1`` affinely independent points strictly inside.

    Attributes
    ----------
    pattern : tuple of tuple of bool
        ``pattern[l - 1][v]``: unit ``v`` of hidden layer ``l`` on its active side (derivative 1);
        always True for a linear unit (no kink).
    points : list of list of fmpq
        ``x0`` and ``x0 + eps e_j`` (``j = 1..n0``), ``eps`` a power of two: every kinked
        pre-activation has the pattern's strict sign at each (exact).
    """

    pattern: tuple[tuple[bool, ...], ...]
    points: list[list[flint.fmpq]]


@dataclass
class RegionCover:
    """The regions found, and whether they are all the regions meeting the domain.

    Attributes
    ----------
    regions : list of Region
    complete : bool
        Every node of the walk was decided exactly: every tie-free input of the domain is in one
        of ``regions``.
    reason : str
        Why the cover is not complete (empty when it is).
    empty : int
        Children proved empty (Farkas certificates, a constant row of the wrong sign, the exact simplex).
    lps : int
        Float LPs solved (proposals only).
    seconds : float
    """

    regions: list[Region] = field(default_factory=list)
    complete: bool = False
    reason: str = ""
    empty: int = 0
    lps: int = 0
    seconds: float = 0.0


def _region_points(rows: Sequence[Row], x0: list[flint.fmpq]) -> list[list[flint.fmpq]]:
    """``x0`` and ``x0 + eps e_j`` with ``eps`` a power of two small enough that every row stays positive."""
    eps = flint.fmpq(1)
    for a, e in rows:
        big = max((abs(v) for v in a), default=_ZERO)
        if big != _ZERO:
            room = value((a, e), x0) / (2 * big)
            while eps >= room:
                eps /= 2
    return [list(x0)] + [[v + eps if i == j else v for i, v in enumerate(x0)] for j in range(len(x0))]


def _root(n0: int, box: Box | None) -> tuple[list[Row], list[flint.fmpq]]:
    if box is None:
        return [], [_ZERO] * n0
    rows: list[Row] = []
    for j in range(n0):
        unit = [_ZERO] * n0
        unit[j] = flint.fmpq(1)
        rows.append(scaled((unit, -box[0][j])))
        rows.append(scaled(([-v for v in unit], box[1][j])))
    return rows, [(box[0][j] + box[1][j]) / 2 for j in range(n0)]


def _next_layer(cn: Network, l: int, Z: tuple[flint.fmpq_mat, list[flint.fmpq]],
                side: dict[int, bool]) -> tuple[flint.fmpq_mat, list[flint.fmpq]]:
    """``z_{l+1} = W_{l+1} diag(f) z_l + b_{l+1}`` as an affine map of ``x``, exactly; ``f_v = 1`` on the active side
    (``side[v]``) and for linear units, the unit's negative slope on the other side."""
    ZM, zc = Z
    n0 = ZM.ncols()
    one = flint.fmpq(1)
    f = [one if side.get(v, True) else cn.negative_slope[l - 1][v] for v in range(cn.widths[l])]
    H = flint.fmpq_mat(cn.widths[l], n0, [f[i] * ZM[i, j] for i in range(cn.widths[l]) for j in range(n0)])
    W = cn.W[l]
    return W * H, [sum((W[i, j] * f[j] * zc[j] for j in range(len(zc)) if f[j] != _ZERO), cn.b[l][i])
                   for i in range(cn.widths[l + 1])]


def enumerate_regions(net: Network | Layered, box: Box | None = None, *,
                      max_regions: int = 50_000, seconds: float | None = None) -> RegionCover:
    """Every activation region meeting ``R^n`` (or the open ``box``), each proved (module docstring).

    Parameters
    ----------
    net : Network or Layered
        A plain ReLU MLP or a layer graph, over Q.
    box : (lo, hi), optional
        Lists of ``n0`` rationals, ``lo < hi``; None: all of ``R^n``.  When some ``lo >= hi`` the
        open box is empty: no region, and the cover is complete.
    max_regions : int
        Stop (cover not complete) when this many regions are found.
    seconds : float, optional
        Stop (cover not complete) after this much time.

    Returns
    -------
    RegionCover
        ``complete`` when every tie-free input of the domain is in one of its regions.

    Raises
    ------
    UnsupportedCaseError
        Neither highspy nor scipy (the LP proposals) is installed.

    Examples
    --------
    ``relu(x) - relu(-x - 1)`` cuts the line at ``0`` and ``-1``: three regions.

    >>> net = Network((1, 2, 1), [[[1], [-1]], [[1, -1]]], [[0, -1], [0]])
    >>> cover = enumerate_regions(net)
    >>> cover.complete, sorted(r.pattern for r in cover.regions)
    (True, [((False, False),), ((False, True),), ((True, False),)])
    """
    linprog = lp_solver()
    start = time.perf_counter()
    cn = Layered.of(net).cn
    cover = RegionCover()
    counts: dict[str, int] = {}
    n0 = cn.widths[0]
    units = Layered.of(net).kinked_units()
    rows0, x0 = _root(n0, box)
    Z1 = (flint.fmpq_mat(cn.W[0]), list(cn.b[0]))
    # a node: (index of the next kinked unit, rows, float rows, point, layer l, affine z_l, signs so far)
    empty_box = box is not None and any(lo >= hi for lo, hi in zip(box[0], box[1]))  # no input: complete, no region
    stack: list[tuple] = [] if empty_box else [(0, rows0, [floats(r) for r in rows0], x0, 1, Z1, ())]
    ticks = 0
    while stack:
        k, rows, frows, x, l, Z, pat = stack.pop()
        ticks += 1
        if ticks % 256 == 0:
            stage("activation regions", regions=len(cover.regions), open=len(stack))
            if seconds is not None and time.perf_counter() - start > seconds:
                cover.reason = f"time budget of {seconds:g} s"
                break
        if k == len(units):
            cover.regions.append(Region(_split(cn, units, pat), _region_points(rows, x)))
            if len(cover.regions) >= max_regions and stack:
                cover.reason = f"more than {max_regions} regions"
                break
            continue
        lk, v = units[k]
        while l < lk:  # every kinked unit of layer l has its side on this node: z_{l+1} is affine in x
            Z = _next_layer(cn, l, Z, {vv: s for (ll, vv), s in zip(units, pat) if ll == l})
            l += 1
        ZM, zc = Z
        a = [ZM[v, j] for j in range(n0)]
        e = zc[v]
        for s in (1, -1):
            if all(aj == _ZERO for aj in a):
                if s * e > _ZERO:
                    stack.append((k + 1, rows, frows, x, l, Z, pat + (s > 0,)))  # always true here: no new row
                else:
                    cover.empty += 1
                continue
            row = scaled(([s * aj for aj in a], s * e))
            new_rows, new_f = rows + [row], frows + [floats(row)]
            if value(row, x) > _ZERO:
                pt: list[flint.fmpq] | None = x
            else:
                verdict, pt = decide(linprog, new_rows, new_f, counts)
                if verdict != "realised":
                    cover.empty += 1
                    continue
            stack.append((k + 1, new_rows, new_f, pt, l, Z, pat + (s > 0,)))
    cover.lps = counts.get("lps", 0)
    cover.complete = not stack and not cover.reason
    cover.seconds = time.perf_counter() - start
    return cover


def _split(cn: Network, units: Sequence[tuple[int, int]],
           pat: tuple[bool, ...]) -> tuple[tuple[bool, ...], ...]:
    """Per hidden layer, every unit's side (linear units True)."""
    out = [[True] * cn.widths[l] for l in range(1, cn.L)]
    for (l, v), s in zip(units, pat):
        out[l - 1][v] = s
    return tuple(tuple(r) for r in out)
