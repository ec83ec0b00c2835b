"""Adversarial inputs for the region cover and the exact simplex (independent oracles only).

Oracles: on one input the exact breakpoint sweep of tests/test_regions.py (Fractions, layer by
layer); on two inputs every pattern seen at a tie-free point of an exact grid must be a region
and every region point must have its region's pattern (a Fraction forward pass); scaling a
layer by ``c > 0`` scales every later pre-activation by ``c`` and so keeps every pattern; for
``fdim`` the Fraction rank of the Jacobian at two points of every sweep piece.
"""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import flint
import numpy as np
import pytest
from test_fdim import _net, _tie_free, fraction_rank, full_jacobian_rows
from test_regions import _pattern, _sweep_1d

from exactident.boundary.entering import find_strict_direction
from exactident.errors import UnsupportedCaseError
from exactident.model.network import Network
from exactident.symmetry.fdim import functional_dimension
from exactident.symmetry.region_fdim import cover_rank
from exactident.symmetry.region_lp import _point
from exactident.symmetry.regions import enumerate_regions

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


# --- adversarial cases that passed: kept as regression tests ----------------------------------------------------

ONE_INPUT = {
    # twins, a scaled twin and a negated twin (same or touching hyperplanes)
    "twins": ([[[F(1)], [F(1)], [F(3)], [F(-1)]], [[F(1), F(-2), F(1), F(1)]]], [[F(-1), F(-1), F(-3), F(1)], [F(0)]]),
    # a zero-weight neuron (a = 0: decided by the sign of its bias) and a dead one
    "constant": ([[[F(0)], [F(0)], [F(2)]], [[F(1), F(1), F(1)]]], [[F(1), F(-1), F(-1)], [F(0)]]),
    # a second-layer neuron h0 - h1 with h0, h1 twins: 0 everywhere, every input a tie, no region
    "all ties": ([[[F(1)], [F(1)]], [[F(1), F(-1)]], [[F(1)]]], [[F(0), F(0)], [F(0)], [F(0)]]),
    # a second-layer neuron relu(x): 0 on x < 0, only x > 0 holds regions
    "half ties": ([[[F(1)]], [[F(1)]], [[F(1)]]], [[F(0)], [F(0)], [F(0)]]),
    # kinks 10^-40 apart, and slopes 10^40 / 10^-40
    "tiny gap": ([[[F(1)], [F(-1)], [F(10**40)]], [[F(1), F(1), F(1)]]],
                 [[F(0), F(1, 10**40), F(-1)], [F(0)]]),
    "tiny slope": ([[[F(1, 10**40)], [F(-1)]], [[F(1), F(1)]], [[F(1)]]], [[F(1, 10**39), F(0)], [F(-1)], [F(0)]]),
    # a deep layer with a huge and a tiny layer scale (patterns unchanged by positive scaling)
    "scaled layers": ([[[F(1)], [F(-2)], [F(1)]], [[F(10**30), F(-10**30), F(10**30)], [F(1, 10**30), F(2, 10**30),
                      F(-1, 10**30)]], [[F(1), F(1)]]], [[F(-1), F(1), F(2)], [F(0), F(-1, 10**30)], [F(0)]]),
}


@pytest.mark.parametrize("name", sorted(ONE_INPUT))
@pytest.mark.parametrize("box", [None, (F(-1), F(1)), (F(0), F(1, 2)), (F(-1, 10**12), F(1, 10**12))])
def test_one_input_families_against_the_sweep(name, box):
    # the boxes: a kink at the box's end (0), and a box of width 2e-12 around a kink
    W, b = ONE_INPUT[name]
    cover = _check_1d(W, b, *(box or (None, None)))
    if name == "all ties":
        assert cover.regions == []


def test_all_ties_is_refused():
    # no tie-free input at all (the cover is complete and empty, test above): J is defined nowhere, as for a unit
    # with zero incoming weights and bias, so fdim refuses in one line; "rank 0" would also say that the output
    # bias never moves the function, false for any network
    W, b = ONE_INPUT["all ties"]
    net = _net(W, b, (1, 2, 1, 1))
    with pytest.raises(UnsupportedCaseError, match="every point of R\\^n is a tie"):
        functional_dimension(net, lines=0, search=False, regions=100)


def _brute_patterns(W, b, box):
    """Every pattern whose strict system (affine rows layer by layer, exact) Fourier-Motzkin finds feasible."""
    n0, sizes = len(W[0][0]), [len(M) for M in W[:-1]]
    out = set()
    for bits in itertools.product([True, False], repeat=sum(sizes)):
        pat = tuple(tuple(bits[sum(sizes[:i]):sum(sizes[:i + 1])]) for i in range(len(sizes)))
        M, m, rows = [[F(int(i == j)) for j in range(n0)] for i in range(n0)], [F(0)] * n0, []
        for l, Wl in enumerate(W[:-1]):
            Z = [[sum((Wl[i][k] * M[k][j] for k in range(len(M))), F(0)) for j in range(n0)] for i in range(len(Wl))]
            z = [sum((Wl[i][k] * m[k] for k in range(len(m))), F(0)) + b[l][i] for i in range(len(Wl))]
            rows += [[(1 if pat[l][i] else -1) * v for v in Z[i] + [z[i]]] for i in range(len(Wl))]
            M = [Z[i] if pat[l][i] else [F(0)] * n0 for i in range(len(Wl))]
            m = [z[i] if pat[l][i] else F(0) for i in range(len(Wl))]
        for j in range(n0 if box else 0):
            u = [F(int(k == j)) for k in range(n0)]
            rows += [u + [-box[0][j]], [-v for v in u] + [box[1][j]]]
        rows.append([F(0)] * n0 + [F(1)])  # homogenised: (x, s) with s > 0
        c, how = find_strict_direction([[q(v.numerator, v.denominator) for v in r] for r in rows])
        assert c is not None or how in ("zero row", "infeasible (exact Fourier-Motzkin)")
        if c is not None:
            out.add(pat)
    return out


@pytest.mark.parametrize("seed", range(12))
def test_nearly_parallel_against_brute_force(seed):
    # two and three inputs; neurons tilted by 10^-3 .. 10^-40 off another (or its negation), offsets 0, +-1,
    # the tilt, 10^6 or 10^20: intersections far beyond a float LP's tolerance
    rng = random.Random(4200 + seed)
    n0 = (2, 2, 3)[seed % 3]
    widths = [n0, 3, 2, 1] if seed % 2 else [n0, 4, 1]
    L = len(widths) - 1
    W = [[[F(rng.randint(-3, 3), rng.choice([1, 2])) for _ in range(widths[l])] for _ in range(widths[l + 1])]
         for l in range(L)]
    b = [[F(rng.randint(-3, 3)) for _ in range(widths[l + 1])] for l in range(L)]
    for _ in range(3):
        l = rng.randrange(L - 1)
        i, j, t = rng.randrange(widths[l + 1]), rng.randrange(widths[l + 1]), rng.randrange(widths[l])
        eps = F(1, 10 ** rng.choice([3, 9, 15, 40]))
        W[l][i] = list(W[l][j])
        W[l][i][t] += eps * rng.choice([1, -1])
        b[l][i] = b[l][j] + rng.choice([F(0), F(1), -F(1), eps, F(10) ** rng.choice([6, 20])])
        if rng.random() < 0.3:
            W[l][i], b[l][i] = [-v for v in W[l][i]], -b[l][i]
    box = ([F(-2)] * n0, [F(1)] * n0) if seed % 4 == 3 else None
    cover = enumerate_regions(_net(W, b, widths), None if box is None else
                              ([q(v.numerator, v.denominator) for v in box[0]],
                               [q(v.numerator, v.denominator) for v in box[1]]))
    assert cover.complete
    _check_points(W, b, cover)
    got = [r.pattern for r in cover.regions]
    assert len(set(got)) == len(got) and set(got) == _brute_patterns(W, b, box)


def test_functional_dimension_refuses_an_empty_box():
    # before: the lower bound counted the closed box's point 1/2 (rank 1), the complete empty cover rank 0, and
    # settle_by_regions raised InvariantViolation
    net = Network((1, 2, 1), [[[1], [-1]], [[1, 1]]], [[0, 1], [0]])
    with pytest.raises(UnsupportedCaseError, match="lo < hi"):
        functional_dimension(net, box=([q(1, 2)], [q(1, 2)]), lines=0, search=False)
