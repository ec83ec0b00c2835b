"""One network type: ``Network(widths, W, b)`` and the same MLP given with ``T = I`` by hand behave the same.

The plain ReLU MLP is the special case ``T = I`` (every entry its own free parameter), ``c = 0``, every
slope 0, no feature (docs/theory.md, "Beyond the layered ReLU MLP").  Built either way it must be the
same network for every engine (check, Gamma, canonical form, equiv); the truths used: the definition
of ``T = I`` (an index array written here), a Fraction forward pass (tests/_gen.py), the dense
dimension ``sum N_l N_{l+1} + N_L`` (docs/theory.md), and the exact rank of ``Gamma`` computed here with
sympy from the Fraction entries.
"""

from __future__ import annotations

from fractions import Fraction

import flint
import numpy as np
import pytest
import sympy as sp
from _gen import forward, random_case

from exactident.check import check
from exactident.errors import UnsupportedCaseError
from exactident.io.case import Case, parse_case
from exactident.model.activation import activation_state
from exactident.model.fixed_edges import fixed_edges
from exactident.model.gamma import gamma_exact
from exactident.model.network import Network, pre_activations
from exactident.symmetry.canonical import canonical_form
from exactident.symmetry.equiv import equiv

WIDTHS = [(1, 1, 1), (2, 3, 2), (3, 2), (1, 2, 2, 1), (2, 3, 1)]


def _by_hand(net: Network, order: list[int] | None = None) -> Network:
    """``net`` with explicit ``T = I``: ``W_l`` row-major then ``b_l`` numbered ``0, 1, ...`` (or by ``order``)."""
    w, k = net.widths, 0
    W_index, b_index = [], []
    for l in range(1, len(w)):
        W_index.append([[k + i * w[l - 1] + j for j in range(w[l - 1])] for i in range(w[l])])
        k += w[l] * w[l - 1]
        b_index.append([k + i for i in range(w[l])])
        k += w[l]
    if order is not None:  # the same T = I up to a renumbering of the parameters
        W_index = [[[order[j] for j in row] for row in M] for M in W_index]
        b_index = [[order[j] for j in v] for v in b_index]
    slopes = [[0] * w[l] for l in range(1, len(w) - 1)]
    slope_index = [[-1] * w[l] for l in range(1, len(w) - 1)]
    return Network(w, [M.table() for M in net.W], [list(v) for v in net.b], [np.array(M) for M in W_index],
                   [np.array(v) for v in b_index], slopes, [np.array(s, dtype=np.int64) for s in slope_index], k)


def _dense_dim(widths) -> int:
    return sum(widths[l] * widths[l + 1] for l in range(len(widths) - 1)) + widths[-1]


@pytest.mark.parametrize("widths", WIDTHS)
def test_both_forms_are_the_plain_mlp(widths):
    tc = random_case(widths, 3, 4, rational=True)
    case = parse_case(tc.obj())
    net = case.network
    hand = _by_hand(net)
    rng = np.random.default_rng(len(widths))
    perm = _by_hand(net, [int(j) for j in rng.permutation(net.n_params)])
    for n in (net, hand, perm):
        assert n.is_plain() and n.all_free() and n.is_relu_only()
        assert n.n_params == sum(widths[l] * (widths[l - 1] + 1) for l in range(1, len(widths)))
        assert n.dim == _dense_dim(widths)
        assert n.features == ()
        assert all(n.kinked(l).all() for l in range(1, len(widths) - 1))
    assert net == hand
    # theta is W_l row-major then b_l, read off the Fractions of the case file
    expected = [Fraction(v) for l in range(len(widths) - 1) for v in [*(x for row in tc.W[l] for x in row), *tc.b[l]]]
    assert [Fraction(int(q.p), int(q.q)) for q in net.theta()] == expected
    assert net.theta() == hand.theta()
    assert hand.with_theta(hand.theta()) == hand and net.with_theta(net.theta()) == net
    for n in (net, hand):
        Z = pre_activations(n, case.X)
        for i, x in enumerate(tc.X):
            for l, z in enumerate(forward(tc.W, tc.b, x)):
                assert [Fraction(int(q.p), int(q.q)) for q in Z[l].table()[i]] == z


def test_plain_mlp_holds_no_index_array_until_read():
    net = Network((2, 3, 1), [[[1, 2], [3, 4], [5, 6]], [[1, -1, 2]]], [[0, 1, -1], [3]])
    assert net._W_index is None and net._b_index is None and net._slope_index is None  # nothing built eagerly
    assert [I.tolist() for I in net.W_index] == [[[0, 1], [2, 3], [4, 5]], [[9, 10, 11]]]
    assert [I.tolist() for I in net.b_index] == [[6, 7, 8], [12]]
    assert net.is_plain() and net == _by_hand(net)  # reading the structure does not change what the network is
    assert net.param_names[:3] == ["W_1[0,0]", "W_1[0,1]", "W_1[1,0]"] and net.param_names[6] == "b_1[0]"


@pytest.mark.parametrize("widths", WIDTHS)
def test_check_gamma_and_canonical_agree_on_both_forms(widths):
    tc = random_case(widths, 11, 2 + widths[0], rational=True)
    case = parse_case(tc.obj())
    hand = _by_hand(case.network)
    reports = [check(c, numeric=False) for c in (case, Case("p", hand, case.X))]
    keys = ("verdict", "rank_gamma", "rank_a", "dim", "decided_by", "n_ties", "degenerate")
    assert [getattr(reports[0], k) for k in keys] == [getattr(reports[1], k) for k in keys]
    assert reports[0].dim == _dense_dim(widths)
    gammas = []
    for n in (case.network, hand):
        st = activation_state(n, case.X)
        gammas.append(gamma_exact(n, case.X, st.Z, st.pattern, fixed_edges(n)))
    assert gammas[0] == gammas[1]
    G = sp.Matrix(gammas[0].nrows(), gammas[0].ncols(), [sp.Rational(int(q.p), int(q.q)) for q in gammas[0].entries()])
    assert G.rank() == reports[0].rank_gamma
    fa, fb = canonical_form(case.network), canonical_form(hand)
    assert fa.network == fb.network and fa.perm == fb.perm and fa.scale == fb.scale
    e = equiv(case.network, hand, case.X)
    assert e.same_orbit is True and e.sample["same_outputs"] is True


def test_a_leaky_unit_or_a_fixed_entry_is_not_plain_and_has_no_dense_dim():
    W, b = [[[1], [2]], [[3, 4]]], [[0, -1], [5]]
    leaky = Network((1, 2, 1), W, b, negative_slope=[[Fraction(1, 10), 0]], features=("leaky ReLU",))
    assert leaky.all_free() and not leaky.is_relu_only() and not leaky.is_plain()
    assert leaky.kinked(1).tolist() == [True, True]
    with pytest.raises(UnsupportedCaseError, match="plain ReLU MLP only"):
        _ = leaky.dim
    # x = -10: z_1 = (-10, -21), h = (-1, 0) (slope 1/10 on the first unit, ReLU on the second), f = 3 * -1 + 5
    assert pre_activations(leaky, [[-10]])[-1].entries() == [flint.fmpq(2)]
    fixed = Network((1, 2, 1), W, b, [np.array([[0], [-1]]), np.array([[3, 4]])], [np.array([1, 2]), np.array([5])],
                    None, None, 6, ("fixed weights",))
    assert not fixed.all_free() and fixed.is_relu_only() and not fixed.is_plain()
    # W_1[1][0] = 2 is fixed; the others are theta_0..theta_5 in the order W_1, b_1, W_2, b_2
    assert [str(t) for t in fixed.theta()] == ["1", "0", "-1", "3", "4", "5"]
    with pytest.raises(UnsupportedCaseError):
        _ = fixed.dim


def test_plain_mlp_given_to_the_layer_graph_engine_verifies():
    """A plain ReLU MLP passed to ``check_constrained`` (the layer-graph engine): Theorem 8's hypotheses hold,
    the engine does not run it and says ``not-run``; the verifier accepts that and refuses a report saying
    Theorem 8 was tried or that it does not apply.

    Hand truth: ``dim`` of the 1-2-1 MLP is its 7 weights and biases less the 2 hidden rescalings, 5.
    """
    import copy
    import json

    from exactident.check import check_constrained
    from exactident.io.report import reports_to_json
    from exactident.verify.certificate import verify_constrained

    net = Network((1, 2, 1), [flint.fmpq_mat([[1], [-1]]), flint.fmpq_mat([[1, 2]])],
                  [[flint.fmpq(-1), flint.fmpq(2)], [flint.fmpq(0)]])
    assert net.is_plain() and net.dim == 5
    X = [[-1], [0], [1], [2], [3]]
    report = json.loads(reports_to_json([check_constrained(net, X)], as_list=False))
    entry = next(m for m, e in enumerate(report["rules"]) if e["rule"] == "theorem-8")
    assert report["rules"][entry]["status"] == "not-run"
    valid, messages = verify_constrained(net, X, report)
    assert valid, messages
    for status in ("tried", "not-applicable"):
        forged = copy.deepcopy(report)
        forged["rules"][entry]["status"] = status
        valid, messages = verify_constrained(net, X, forged)
        assert not valid and any(m.startswith(f"rules[{entry}]") for m in messages)
