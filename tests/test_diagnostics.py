"""Per-neuron diagnostics (exactident.model.diagnostics) against hand derivations and Fractions."""

from fractions import Fraction

import flint
import pytest
import sympy
from _gen import forward, random_case

from exactident.model.activation import activation_state
from exactident.model.diagnostics import (
    hyperplane_rank,
    hyperplane_rows,
    neuron_activity,
    proportional_twins,
    untouched_inputs,
)
from exactident.model.network import Network


def _q(rows):
    return [[flint.fmpq(Fraction(x).numerator, Fraction(x).denominator) for x in r] for r in rows]


def test_hand_built_dead_always_active_and_tie():
    # Layer 1: n0 = x - 10 (negative on x in {1,2,3}: dead), n1 = x + 1 (always active),
    # n2 = x - 2 (inactive, tie at 2, active at 3).
    net = Network((1, 3, 1), [[[1], [1], [1]], [[1, 1, 1]]], [[-10, 1, -2], [0]])
    X = _q([[1], [2], [3]])
    acts = neuron_activity(activation_state(net, X))
    assert [(a.n_active, a.n_tie, a.n_inactive) for a in acts] == [(0, 0, 3), (3, 0, 0), (1, 1, 1)]
    assert [a.is_dead for a in acts] == [True, False, False]
    assert [a.is_always_active for a in acts] == [False, True, False]


def test_no_sample_means_neither_dead_nor_active():
    net = Network((1, 1, 1), [[[1]], [[1]]], [[0], [0]])
    (a,) = neuron_activity(activation_state(net, []))
    assert not a.is_dead and not a.is_always_active and untouched_inputs([]) == []


def test_twins_need_same_pattern_no_tie_and_one_ratio():
    # n0 = x - 1, n1 = 3x - 3 = 3 n0: twins with c = 1/3 (h_0 = c h_1) on samples avoiding x = 1.
    # n2 = 2x: proportional to n0 nowhere (ratio differs between x = 2 and x = 3).
    net = Network((1, 3, 1), [[[1], [3], [2]], [[1, 1, 1]]], [[-1, -3, 0], [0]])
    assert proportional_twins(activation_state(net, _q([[2], [3], [0]]))) == [(1, 0, 1, flint.fmpq(1, 3))]
    # A tie at x = 1 for both: no claim (the side at the tie is not fixed by the sample).
    assert proportional_twins(activation_state(net, _q([[2], [1]]))) == []


def test_untouched_inputs_hand():
    assert untouched_inputs(_q([[0, 1, 0, 0], [0, 0, 0, 2]])) == [0, 2]


def test_hyperplane_rank_second_layer_uses_hidden_values():
    # Layer 1: h = relu(x), relu(-x); layer 2 neuron: h_0 + h_1 + 1 > 0 everywhere.
    # Its inputs [h_0, h_1, 1] at x = 1, -1, 2: (1,0,1), (0,1,1), (2,0,1) -> rank 3 = N_1 + 1.
    net = Network((1, 2, 1, 1), [[[1], [-1]], [[1, 1]], [[1]]], [[0, 0], [1], [0]])
    X = _q([[1], [-1], [2]])
    assert hyperplane_rank(activation_state(net, X), X, 2, 0) == (3, 3)
    # With x = 1, 2 only, h_1 = 0 on every sample: rank 2 < 3.
    X = _q([[1], [2]])
    assert hyperplane_rank(activation_state(net, X), X, 2, 0) == (2, 3)


def test_hyperplane_rows_with_and_without_ties():
    # Layer 2 neuron z = h_0 - h_1 over h = (relu(x), relu(-x)): at x = 2, -1, 0 it is 2 (active),
    # -1 (inactive), 0 (a tie, and h = (0, 0) there).  Rows [h_0, h_1, 1].
    net = Network((1, 2, 1, 1), [[[1], [-1]], [[1, -1]], [[1]]], [[0, 0], [0], [0]])
    X = _q([[2], [-1], [0]])
    state = activation_state(net, X)
    assert hyperplane_rows(state, X, 2, 0) == _q([[2, 0, 1]])
    assert hyperplane_rows(state, X, 2, 0, ties=True) == _q([[2, 0, 1], [0, 0, 1]])
    assert hyperplane_rank(state, X, 2, 0) == (1, 3)


@pytest.mark.parametrize("widths", [(1, 3, 1), (2, 3, 2), (2, 2, 3, 1)])
@pytest.mark.parametrize("seed", range(4))
def test_random_networks_against_fractions(widths, seed):
    # Independent forward pass in Fractions (tests/_gen.py) and ranks by sympy; ties allowed.
    tc = random_case(widths, seed, n=5, rational=True, allow_ties=True)
    W, b, X = tc.W, tc.b, tc.X
    net = Network(tuple(widths), [[[flint.fmpq(w.numerator, w.denominator) for w in r] for r in Wl] for Wl in W],
                  [[flint.fmpq(v.numerator, v.denominator) for v in bl] for bl in b])
    Xq = [[flint.fmpq(x.numerator, x.denominator) for x in r] for r in X]
    state = activation_state(net, Xq)
    zs = [forward(W, b, x) for x in X]  # zs[i][l-1][v] = z_l(x^i)_v
    expect = [(l, v, sum(z[l - 1][v] > 0 for z in zs), sum(z[l - 1][v] == 0 for z in zs),
               sum(z[l - 1][v] < 0 for z in zs)) for l in range(1, len(widths) - 1) for v in range(widths[l])]
    assert [(a.l, a.v, a.n_active, a.n_tie, a.n_inactive) for a in neuron_activity(state)] == expect
    for l in range(1, len(widths) - 1):
        for v in range(widths[l]):
            S = [i for i, z in enumerate(zs) if z[l - 1][v] > 0]
            inputs = [X[i] if l == 1 else [max(t, 0) for t in zs[i][l - 2]] for i in S]
            M = sympy.Matrix([[sympy.Rational(t.numerator, t.denominator) for t in r] + [1] for r in inputs]) \
                if S else sympy.zeros(0, 1)
            assert hyperplane_rank(state, Xq, l, v) == (M.rank() if S else 0, widths[l - 1] + 1)
