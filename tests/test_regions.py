"""The exact cover by activation regions and the functional dimension it settles.

Independent checks: on a line (one input) the regions are found here by an exact sweep
of breakpoints in Fractions, layer by layer, and the functional dimension by the Fraction
rank of the Jacobian at two points of each piece; in two dimensions every pattern seen at
a tie-free point of a grid at several scales must be one of the cover's regions; the
kernel the cover proves is checked against the Fraction Jacobian at random points.
"""

from __future__ import annotations

import json
import os
import random
from fractions import Fraction
from itertools import pairwise

import flint
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fdim import _forward, _net, _random_net, _tie_free, fraction_rank, full_jacobian_rows

from exactident.boundary.entering import find_strict_direction
from exactident.cli import main
from exactident.errors import UnsupportedCaseError
from exactident.model.network import Network
from exactident.symmetry.fdim import functional_dimension
from exactident.symmetry.region_fdim import cover_rank
from exactident.symmetry.region_lp import _farkas
from exactident.symmetry.regions import enumerate_regions

q = flint.fmpq


def _pattern(W, b, x):
    zs, _ = _forward(W, b, x)
    return tuple(tuple(v > 0 for v in z) for z in zs[:-1])


def _interior(left, right):
    """Two points strictly inside the interval (left, right); None is an infinite end."""
    if left is None and right is None:
        return Fraction(0), Fraction(1)
    if left is None:
        return right - 2, right - 1
    if right is None:
        return left + 1, left + 2
    return left + (right - left) / 3, left + 2 * (right - left) / 3


def _sweep_1d(W, b, lo=None, hi=None):
    """The pieces of a one-input network, two points inside each: breakpoints layer by layer, exactly."""
    cuts: set[Fraction] = set()
    for layer in range(len(W) - 1):
        ends = [None] + sorted(cuts) + [None]
        # between two cuts of the layers below, the pre-activations of this layer are affine in x
        for left, right in pairwise(ends):
            m0, m1 = _interior(left, right)
            z0, z1 = _forward(W, b, [m0])[0][layer], _forward(W, b, [m1])[0][layer]
            for v in range(len(z0)):
                slope = (z1[v] - z0[v]) / (m1 - m0)
                if slope != 0:
                    root = m0 - z0[v] / slope
                    if (left is None or root > left) and (right is None or root < right):
                        cuts.add(root)
    ends = [lo] + sorted(c for c in cuts if (lo is None or c > lo) and (hi is None or c < hi)) + [hi]
    return [_interior(left, right) for left, right in pairwise(ends)]


NETS_1D = [((1, 3, 1), s) for s in range(6)] + [((1, 3, 3, 1), s) for s in range(6)] + \
          [((1, 2, 2, 2, 1), s) for s in range(6)] + [((1, 4, 2), s) for s in range(3)]


@pytest.mark.parametrize("widths,seed", NETS_1D)
@pytest.mark.parametrize("boxed", [False, True])
def test_one_input_against_an_exact_sweep(widths, seed, boxed):
    rng = random.Random(7000 + seed)
    W, b = _random_net(widths, rng)
    net = _net(W, b, widths)
    lo, hi = (Fraction(-1), Fraction(2)) if boxed else (None, None)
    box = ([q(-1)], [q(2)]) if boxed else None
    pieces = [(a, c) for a, c in _sweep_1d(W, b, lo, hi) if _tie_free(W, b, [a]) and _tie_free(W, b, [c])]
    expected = {_pattern(W, b, [a]) for a, _ in pieces}
    cover = enumerate_regions(net, box)
    assert cover.complete
    assert {r.pattern for r in cover.regions} == expected
    assert len(cover.regions) == len(expected)  # each region once
    # fdim: the Fraction rank of J at two points of every piece (J is affine on a piece)
    fdim = fraction_rank([row for a, c in pieces for x in (a, c) for row in full_jacobian_rows(W, b, [x])])
    cr = cover_rank(net, cover)
    assert cr.complete and cr.rank == fdim
    if not pieces:  # every input is a tie (a neuron fed only by dead ones): J is defined nowhere, refused
        with pytest.raises(UnsupportedCaseError, match="tie"):
            functional_dimension(net, box=box, lines=0, search=False, regions=1000)
        return
    res = functional_dimension(net, box=box, lines=0, search=False, regions=1000)
    assert res.lower == res.upper == fdim
    assert res.cover is None or res.cover["complete"]  # no cover when random points already reach dim


NETS_2D = [((2, 3, 3, 1), s) for s in range(4)] + [((2, 3, 2, 2, 1), s) for s in range(4)]


@pytest.mark.parametrize("widths,seed", NETS_2D)
def test_two_inputs_every_seen_pattern_is_a_region(widths, seed):
    rng = random.Random(9000 + seed)
    W, b = _random_net(widths, rng)
    net = _net(W, b, widths)
    cover = enumerate_regions(net)
    assert cover.complete
    patterns = {r.pattern for r in cover.regions}
    # every region point is strictly inside its region (an independent Fraction forward pass)
    for r in cover.regions:
        for x in r.points:
            xf = [Fraction(int(v.p), int(v.q)) for v in x]
            assert _tie_free(W, b, xf) and _pattern(W, b, xf) == r.pattern
    seen = set()
    for scale in (Fraction(1, 8), Fraction(1), Fraction(8), Fraction(64)):
        for i in range(-12, 13):
            for j in range(-12, 13):
                x = [scale * Fraction(i, 4) + Fraction(1, 97), scale * Fraction(j, 4) + Fraction(1, 89)]
                if _tie_free(W, b, x):
                    seen.add(_pattern(W, b, x))
    assert seen <= patterns
    # the kernel the cover proves is in ker J at random tie-free points (Fraction Jacobian)
    cr = cover_rank(net, cover)
    assert cr.complete
    n_full = net.dim + sum(widths[1:-1])
    for _ in range(20):
        x = [Fraction(rng.randint(-200, 200), rng.choice([7, 9, 16])) for _ in range(2)]
        if not _tie_free(W, b, x):
            continue
        for row in full_jacobian_rows(W, b, x):
            for k in cr.kernel:
                assert sum((row[c] * Fraction(int(v.p), int(v.q)) for c, v in k.items()), Fraction(0)) == 0
    assert len(cr.kernel) == n_full - cr.rank


def test_hand_derived_cover_on_a_line():
    # f = relu(x) - relu(-x - 1): the kinks are at 0 and -1, three pieces with patterns (+,-), (-,-), (-,+).
    net = Network((1, 2, 1), [[[1], [-1]], [[1, -1]]], [[0, -1], [0]])
    cover = enumerate_regions(net)
    assert cover.complete and sorted(r.pattern for r in cover.regions) == [((False, False),), ((False, True),),
                                                                          ((True, False),)]
    # on (-1/2, 1/2)... only the box (1/2, 2): neuron 0 active, neuron 1 inactive: one region
    cover = enumerate_regions(net, ([q(1, 2)], [q(2)]))
    assert cover.complete and [r.pattern for r in cover.regions] == [((True, False),)]


def test_box_dimension_by_hand():
    # f = 2 relu(x) + relu(-x - 1) + d on [0, 1]: only (1,0) active; f = 2 (w x + c) + d there, J in (w, c, v0, d)
    # is (2x, 2, x, 1) (v0 the outgoing weight of (1,0)): span{x, 1}, rank 2 (as test_fdim's hand case)
    net = Network((1, 2, 1), [[[1], [-1]], [[2, 1]]], [[0, -1], [0]])
    cover = enumerate_regions(net, ([q(0)], [q(1)]))
    assert cover.complete and [r.pattern for r in cover.regions] == [((True, False),)]
    cr = cover_rank(net, cover)
    assert cr.complete and cr.rank == 2
    # zero columns: W_1[1,0], b_1[1] (neuron 1 inactive) and W_2[0,1] (its output h_1 = 0)
    assert cr.zero_columns == [1, 3, 5]


def test_farkas_by_hand():
    # x > 1 and -x > 0: 1 * (x - 1) + 1 * (-x) = -1 <= 0, no common point
    rows = [([q(1)], q(-1)), ([q(-1)], q(0))]
    assert _farkas(rows, np.array([1.0, 1.0]))
    # x > 0 and x > 1 have common points: no multiplier may prove the contrary
    rows = [([q(1)], q(0)), ([q(1)], q(-1))]
    for y in ([1.0, 1.0], [1.0, 0.0], [0.3, 2.0]):
        assert not _farkas(rows, np.array(y))
    # touching half-planes x > 0, -x > 0 (the line x = 0 only: no strict point): y = (1, 1), sum y e = 0
    assert _farkas([([q(1), q(0)], q(0)), ([q(-1), q(0)], q(0))], np.array([1.0, 1.0]))


_small = st.integers(-3, 3)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_small, _small, _small), min_size=2, max_size=6),
       st.lists(st.floats(0, 4, allow_nan=False), min_size=6, max_size=6))
def test_farkas_never_accepts_a_feasible_system(raw, y):
    rows = [([q(a1), q(a2)], q(e)) for a1, a2, e in raw if (a1, a2) != (0, 0)]
    if len(rows) < 2:
        return
    if _farkas(rows, np.array(y[:len(rows)])):
        hom = [list(a) + [e] for a, e in rows] + [[q(0), q(0), q(1)]]
        c, how = find_strict_direction(hom)
        assert c is None and how in ("zero row", "infeasible (exact Fourier-Motzkin)")


def test_budget_leaves_an_incomplete_cover_and_valid_bounds():
    rng = random.Random(5)
    W, b = _random_net((2, 3, 3, 1), rng)
    net = _net(W, b, (2, 3, 3, 1))
    cover = enumerate_regions(net, max_regions=1)
    assert not cover.complete and "more than 1 regions" in cover.reason and len(cover.regions) == 1
    res = functional_dimension(net, lines=0, search=False, regions=1)
    assert res.cover is not None and not res.cover["complete"]
    full = functional_dimension(net, lines=0, search=False, regions=10_000)
    assert res.lower <= full.lower == full.upper <= res.upper


def test_cli_regions_flag_and_json(tmp_path, capsys):
    case = {"format": "exactident-case/1", "name": "c", "widths": [1, 2, 1],
            "weights": [[["1"], ["-1"]], [["1", "-1"]]], "biases": [["0", "-1"], ["0"]], "sample": [["1"]]}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(case))
    assert main(["fdim", str(path), "--json", "--regions", "0"]) == 0
    assert json.loads(capsys.readouterr().out)["cover"] is None
    assert main(["fdim", str(path), "--json", "--regions", "100", "--no-search", "--lines", "0"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["lower"] == out["upper"] == 5
    assert main(["fdim", str(path), "--regions", "-1"]) == 2


def test_cover_without_an_lp_solver_is_one_line_exit_2(capsys, monkeypatch):
    # bad input for a core-only install: --regions asked for, but neither highspy nor scipy importable
    import importlib.util
    import sys

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("highspy", "scipy") else
                        real(name, *a))
    monkeypatch.setitem(sys.modules, "scipy.optimize", None)  # `from scipy.optimize import ...` raises ImportError
    # the automatic choice skips the cover; asking for one is refused in one line, exit 2
    assert functional_dimension(_net([[[Fraction(1)], [Fraction(-1)]], [[Fraction(1), Fraction(-1)]]],
                                     [[Fraction(0), Fraction(-1)], [Fraction(0)]], (1, 2, 1)), lines=0).cover is None
    with pytest.raises(UnsupportedCaseError, match="highspy or scipy"):
        enumerate_regions(Network((2, 2, 1), [[[1, 0], [0, 1]], [[1, 1]]], [[0, 0], [0]]))
    # iris on [-3, 3]^4: the bounds differ after the random points and the proofs (docs/symmetries.md), so the
    # cover is reached
    iris = os.path.join(os.path.dirname(__file__), "..", "cases", "iris-mlp-4-8-8-3.json")
    capsys.readouterr()
    assert main(["fdim", iris, "--box", "-3:3", "--regions", "10", "--lines", "0", "--no-search"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "exactident[lp]" in err
