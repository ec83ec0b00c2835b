"""Adversarial inputs for the region cover and the exact simplex (independent oracles only).

Oracles: on one input the exact breakpoint sweep of tests/test_regions.py (Fractions, layer by
layer); on two inputs every pattern seen at a tie-free point of an exact grid must be a region
and every region point must have its region's pattern (a Fraction forward pass); scaling a
layer by ``c > 0`` scales every later pre-activation by ``c`` and so keeps every pattern; for
``fdim`` the Fraction rank of the Jacobian at two points of every sweep piece.
"""

from __future__ import annotations

from fractions import Fraction

import flint
import numpy as np
from test_fdim import _net, _tie_free, fraction_rank, full_jacobian_rows
from test_regions import _pattern, _sweep_1d

from exactident.model.network import Network
from exactident.symmetry.region_fdim import cover_rank
from exactident.symmetry.regions import _point, enumerate_regions

q = flint.fmpq
F = Fraction


def _fr(v) -> Fraction:
    return Fraction(int(v.p), int(v.q))


def _check_points(W, b, cover):
    for r in cover.regions:
        for x in r.points:
            xf = [_fr(v) for v in x]
            assert _tie_free(W, b, xf) and _pattern(W, b, xf) == r.pattern


def _check_1d(W, b, lo=None, hi=None, fdim=True):
    widths = (1,) + tuple(len(M) for M in W)
    net = _net(W, b, widths)
    box = None if lo is None else ([q(lo.numerator, lo.denominator)], [q(hi.numerator, hi.denominator)])
    pieces = [(u, v) for u, v in _sweep_1d(W, b, lo, hi) if _tie_free(W, b, [u]) and _tie_free(W, b, [v])]
    cover = enumerate_regions(net, box)
    assert cover.complete
    assert sorted(r.pattern for r in cover.regions) == sorted({_pattern(W, b, [u]) for u, _ in pieces})
    _check_points(W, b, cover)
    if fdim:
        rows = [row for u, v in pieces for x in (u, v) for row in full_jacobian_rows(W, b, [x])]
        cr = cover_rank(net, cover)
        assert cr.complete and cr.rank == (fraction_rank(rows) if rows else 0)
    return cover


# --- regression: huge rationals overflowed the float copy of a row (OverflowError) ------------------------------

def test_huge_weight_by_hand():
    # z0 = 10^400 x + 1 > 0 iff x > -10^-400; z1 = -x > 0 iff x < 0: three pieces (F,T), (T,T), (T,F)
    net = Network((1, 2, 1), [[[q(10**400)], [q(-1)]], [[1, 1]]], [[1, 0], [0]])
    cover = enumerate_regions(net)
    assert cover.complete
    assert sorted(r.pattern for r in cover.regions) == [((False, True),), ((True, False),), ((True, True),)]


def test_huge_product_of_layers_against_the_sweep():
    # each weight is finite as a float, the second layer's row (10^400) is not
    W = [[[F(10**200)], [F(-1)]], [[F(10**200), F(1)], [F(1), F(1)]], [[F(1), F(1)]]]
    b = [[F(1), F(0)], [F(0), F(-1)], [F(0)]]
    _check_1d(W, b)


def test_huge_box_by_hand():
    # the box (-10^400, 10^400) holds the kinks 0 and 1 of relu(x), relu(1 - x): three pieces
    net = Network((1, 2, 1), [[[1], [-1]], [[1, 1]]], [[0, 1], [0]])
    cover = enumerate_regions(net, ([q(-10**400)], [q(10**400)]))
    assert cover.complete
    assert sorted(r.pattern for r in cover.regions) == [((False, True),), ((True, False),), ((True, True),)]


# --- regression: an empty open box (lo = hi, or lo > hi) made _region_points loop forever ---------------------

def test_empty_box_has_no_region():
    # the open interval (1/2, 1/2) is empty, and so is (2, -1): no input, no region, nothing left undecided
    net = Network((1, 2, 1), [[[1], [-1]], [[1, 1]]], [[0, 1], [0]])
    for lo, hi in ((q(1, 2), q(1, 2)), (q(2), q(-1))):
        cover = enumerate_regions(net, ([lo], [hi]))
        assert cover.complete and cover.regions == []
    # two inputs, only the second coordinate degenerate
    net2 = Network((2, 1, 1), [[[1, 1]], [[1]]], [[0], [0]])
    cover = enumerate_regions(net2, ([q(0), q(1)], [q(1), q(1)]))
    assert cover.complete and cover.regions == []


# --- regression: the rounding of the LP's centre overflowed for a tiny radius t or a huge centre x ---------------

def test_point_rounding_with_extreme_floats():
    # x > 0 holds at the float centres below; before, 2.0 ** 1031 (t = 1e-310), log2(0) (t = 5e-324, t / 2
    # underflows) and inf * 0 for x = 1e300 at 2^25 raised OverflowError / ValueError
    rows = [([q(1)], q(0))]
    for x, t in ((1e-300, 1e-310), (1e-300, 5e-324), (1e300, 1e-3), (1e300, 1.0)):
        pt = _point(rows, np.array([x]), t)
        assert pt is not None and pt[0] > 0
