"""Hand-derived cases: each test writes its derivation, then checks the engine against it.

Conventions (SPEC §1, docs/theory.md): ``tau`` lists, layer by layer, the free
entries of ``W_l`` row-major then ``b_l``; row ``i*N_L + k`` of Gamma is output
``k`` at sample ``x^i``; a hidden neuron with a single outgoing edge has that
edge fixed.
"""

from __future__ import annotations

import flint
import pytest

from exactident.check import check
from exactident.io.case import parse_case
from exactident.linalg import exact
from exactident.model.activation import Tie, activation_state, alpha_exact
from exactident.model.fixed_edges import fixed_edges, free_parameters
from exactident.model.gamma import gamma_exact


def make(widths, weights, biases, sample, name="hand"):
    return parse_case({"format": "exactident-case/1", "name": name, "widths": widths,
                       "weights": weights, "biases": biases, "sample": sample})


def gamma_of(case):
    net, X = case.network, case.X
    st = activation_state(net, X)
    return gamma_exact(net, X, st.Z, st.pattern, fixed_edges(net))


def Q(rows):
    return flint.fmpq_mat(rows)


# --------------------------------------------------------------------------- SPEC §2, [1,1,1]

def spec_111(sample):
    return make([1, 1, 1], [[["2"]], [["3"]]], [["1"], ["0"]], [[s] for s in sample])


def test_spec_111_all_active_is_not_identifiable():
    """f(x) = 3 relu(2x + 1) + b_2.  The hidden neuron has one outgoing edge (W_2 = 3): fixed.

    tau = (W_1[0,0], b_1[0], b_2[0]), dim = 1 + 1 + 1 = 3.  At x in {0, 1, 2},
    z = 2x + 1 in {1, 3, 5} > 0 (active), so df/dW_1 = 3x, df/db_1 = 3, df/db_2 = 1:
        Gamma = [[0, 3, 1], [3, 3, 1], [6, 3, 1]]: row 3 = 2 row 2 - row 1, rank 2.
    Paths: (0,(0,)) with entry x*a, (1,(0,)) with entry a, beta with 1:
        alpha = [[0, 1, 1], [1, 1, 1], [2, 1, 1]], rank 2, so R_A = N_L * 2 = 2.
    R_Gamma = R_A = 2 < 3: C_N fails, not-identifiable (Theorem 8).
    """
    case = spec_111(["0", "1", "2"])
    assert [p.name for p in free_parameters(case.network, fixed_edges(case.network))] == \
        ["W_1[0,0]", "b_1[0]", "b_2[0]"]
    assert gamma_of(case) == Q([[0, 3, 1], [3, 3, 1], [6, 3, 1]])
    st = activation_state(case.network, case.X)
    assert alpha_exact(st.pattern, case.X) == Q([[0, 1, 1], [1, 1, 1], [2, 1, 1]])
    r = check(case, all_ranks=True)
    assert (r.rank_gamma, r.rank_a, r.dim, r.cs, r.cn) == (2, 2, 3, False, False)
    assert r.verdict == "not-identifiable" and "Theorem 8" in r.reason
    assert r.numeric["agrees"] is True


def test_spec_111_one_inactive_sample_is_identifiable():
    """Samples 0, 1, -1: at x = -1, z = -1 < 0 (inactive), so its Gamma row is (0, 0, 1).

    Gamma = [[0, 3, 1], [3, 3, 1], [0, 0, 1]]: det = 0*(3-0) - 3*(3-0) + 1*(0-0) = -9 != 0,
    rank 3 = dim, C_S holds (Theorem 9).
    alpha = [[0,1,1],[1,1,1],[0,0,1]], rank 3, R_A = 3.
    """
    case = spec_111(["0", "1", "-1"])
    assert gamma_of(case) == Q([[0, 3, 1], [3, 3, 1], [0, 0, 1]])
    r = check(case, all_ranks=True)
    assert (r.rank_gamma, r.rank_a, r.verdict, r.cs) == (3, 3, "identifiable", True)
    assert "Theorem 9" in r.reason
    # without all_ranks, C_S decides alone and rank_a is not computed
    assert check(case, numeric=False).rank_a is None


def test_spec_111_kink_sample_is_a_tie():
    """At x = -1/2, z = 2(-1/2) + 1 = 0 exactly: tie (sample 2, layer 1, neuron 0)."""
    case = spec_111(["0", "1", "-1/2"])
    st = activation_state(case.network, case.X)
    assert st.ties == [Tie(2, 1, 0)]
    assert st.pattern[0][2, 0]  # the >= 0 convention marks it active
    r = check(case, numeric=False)
    assert (r.on_boundary, r.n_ties) == (True, 1)
    # SPEC §2: the true answer is not-identifiable; the off-boundary rank test
    # alone must never claim identifiable here (C_S fails for the active side).
    assert r.verdict in ("not-identifiable", "inconclusive")


# --------------------------------------------------------------------------- L = 1, affine

@pytest.mark.parametrize("sample,rank,verdict", [
    # augmented [x | 1] = [[0,0,1],[1,0,1],[0,1,1]]: det = 1 -> rank 3
    ([["0", "0"], ["1", "0"], ["0", "1"]], 3, "identifiable"),
    # (0,0), (1,1), (2,2) are collinear: [x | 1] has rank 2
    ([["0", "0"], ["1", "1"], ["2", "2"]], 2, "not-identifiable"),
    # 4 samples on the line x_2 = 1 - x_1: rank 2 however many
    ([["0", "1"], ["1", "0"], ["1/2", "1/2"], ["3", "-2"]], 2, "not-identifiable"),
    # two points: rank 2
    ([["5", "7"], ["-1/3", "2"]], 2, "not-identifiable"),
])
def test_affine_case_rank_is_augmented_sample_rank(sample, rank, verdict):
    """L = 1, widths [2, 1]: f(x) = W_1 x + b_1, no hidden neuron so no fixed edge.

    tau = (W_1[0,0], W_1[0,1], b_1[0]), dim = 3, Gamma row of x = (x_1, x_2, 1):
    Gamma = [X | 1].  Paths: (0,(0,)), (0,(1,)), beta, so alpha = [X | 1] too.
    R_Gamma = R_A = rank [X | 1]; identifiable iff it is 3, otherwise C_N fails.
    The affine case is therefore never inconclusive.
    """
    case = make([2, 1], [[["3", "-2"]]], [["1/2"]], sample)
    assert gamma_of(case) == Q([[flint.fmpq(*map(int, a.split("/"))) for a in row] + [1] for row in sample])
    r = check(case, all_ranks=True)
    assert (r.rank_gamma, r.rank_a, r.dim, r.verdict) == (rank, rank, 3, verdict)


def test_affine_two_outputs():
    """widths [1, 2]: tau = (W_1[0,0], W_1[1,0], b_1[0], b_1[1]), dim = 4.

    Output 0 at x: (x, 0, 1, 0); output 1: (0, x, 0, 1).  Gamma = [x 1] ⊗ I_2 after
    reordering, rank 2 * rank [x | 1]: one sample -> 2 (R_A = 2 * 1, not-identifiable),
    two distinct samples -> 4 = dim (identifiable).
    """
    one = make([1, 2], [[["1"], ["-1"]]], [["0", "0"]], [["3"]])
    assert gamma_of(one) == Q([[3, 0, 1, 0], [0, 3, 0, 1]])
    r = check(one, all_ranks=True)
    assert (r.rank_gamma, r.rank_a, r.dim, r.verdict) == (2, 2, 4, "not-identifiable")
    two = make([1, 2], [[["1"], ["-1"]]], [["0", "0"]], [["3"], ["-2/7"]])
    r = check(two, all_ranks=True)
    assert (r.rank_gamma, r.rank_a, r.verdict) == (4, 4, "identifiable")


# --------------------------------------------------------------------------- degenerate / empty / dead

def test_dead_outgoing_weights_is_degenerate():
    """widths [1,2,1], W_2 = [[3, 0]]: hidden neuron (1,1) has all outgoing weights 0.

    theta is in S (it could be removed without changing f): verdict degenerate,
    whatever the ranks.
    """
    case = make([1, 2, 1], [[["1"], ["2"]], [["3", "0"]]], [["1", "1"], ["0"]], [["1"], ["2"], ["3"]])
    r = check(case, all_ranks=True)
    assert r.degenerate is True and r.verdict == "degenerate"
    assert "(1,1) outgoing" in r.reason


def test_dead_incoming_weights_and_bias_is_degenerate():
    """W_1 row 1 = [0], b_1[1] = 0: neuron (1,1) is identically 0, theta in S.

    Its pre-activation is 0 at every sample (ties); degenerate wins first.
    """
    case = make([1, 2, 1], [[["1"], ["0"]], [["3", "1"]]], [["1", "0"], ["0"]], [["1"], ["2"]])
    r = check(case, numeric=False)
    assert r.verdict == "degenerate" and r.n_ties == 2 and "incoming" in r.reason


def test_empty_sample_is_not_identifiable_with_ranks_zero():
    """n = 0: Gamma is 0 x dim, alpha has no rows: R_Gamma = R_A = 0 < dim = 3.

    Every parameter gives the same (empty) output, so C_N fails: not-identifiable.
    """
    case = spec_111([])
    r = check(case, all_ranks=True)
    assert (r.n_samples, r.rank_gamma, r.rank_a, r.dim, r.verdict) == (0, 0, 0, 3, "not-identifiable")
    assert gamma_of(case).nrows() == 0 and gamma_of(case).ncols() == 3
    assert r.numeric["rank_gamma"] == 0 and r.numeric["agrees"] is True


def test_hidden_neuron_inactive_on_every_sample():
    """widths [1,2,1], W_1 = [[1],[1]], b_1 = [0, -10], W_2 = [[1, 2]], b_2 = [0].

    Samples 1, 2, 3: neuron 0 has z = x > 0 (active), neuron 1 has z = x - 10 < 0
    (never active).  Each hidden neuron has one outgoing edge, fixed, so
    tau = (W_1[0,0], W_1[1,0], b_1[0], b_1[1], b_2[0]), dim = 2 + 2 + 1 = 5.
    Row of x: (1*x, 0, 1, 0, 1) -> Gamma = [[1,0,1,0,1],[2,0,1,0,1],[3,0,1,0,1]], rank 2.
    alpha columns (0,(0,)) x a_0, (0,(1,)) x a_1, (1,(0,)) a_0, (1,(1,)) a_1, beta:
    the same rows, rank 2.  R_Gamma = R_A = 2 < 5: not-identifiable (the dead
    neuron's W_1[1,0], b_1[1] can move freely).
    """
    case = make([1, 2, 1], [[["1"], ["1"]], [["1", "2"]]], [["0", "-10"], ["0"]], [["1"], ["2"], ["3"]])
    assert gamma_of(case) == Q([[1, 0, 1, 0, 1], [2, 0, 1, 0, 1], [3, 0, 1, 0, 1]])
    r = check(case, all_ranks=True)
    assert (r.rank_gamma, r.rank_a, r.dim, r.verdict, r.degenerate) == (2, 2, 5, "not-identifiable", False)


def test_fixed_edge_tie_break_lowest_index():
    """widths [1,1,2], W_2 = [[-3],[3]]: |-3| = |3|, the lowest index k = 0 is fixed.

    tau = (W_1[0,0], b_1[0], W_2[1,0], b_2[0], b_2[1]); dim = 1 + 2 + 2 = 5.
    At x (active, z = x + 1 > 0, h = x + 1): output 0 = -3h + b_2[0], output 1 = w h + b_2[1]
    with w = W_2[1,0] = 3.  Rows: out 0 -> (-3x, -3, 0, 1, 0); out 1 -> (3x, 3, x + 1, 0, 1).
    """
    case = make([1, 1, 2], [[["1"]], [["-3"], ["3"]]], [["1"], ["0", "0"]], [["1"], ["2"]])
    fixed = fixed_edges(case.network)
    assert dict(fixed.s_max) == {(1, 0): 0}
    assert [p.name for p in free_parameters(case.network, fixed)] == \
        ["W_1[0,0]", "b_1[0]", "W_2[1,0]", "b_2[0]", "b_2[1]"]
    assert gamma_of(case) == Q([[-3, -3, 0, 1, 0], [3, 3, 2, 0, 1], [-6, -3, 0, 1, 0], [6, 3, 3, 0, 1]])
    # 4 rows < dim 5: C_S cannot hold
    assert exact.rank(gamma_of(case)) == 4
    assert check(case, numeric=False).cs is False
