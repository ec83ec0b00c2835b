"""The pattern row-space bound on ``rank alpha`` (paper Prop. 1) and its certificate kind.

Right values: FLINT's rational rank of ``alpha_exact`` (an independent elimination of the
whole matrix), and two consequences of the argument in docs/performance.md: the bound is
always >= ``rank alpha`` (any set ``F`` of groups), and it equals ``rank alpha`` when at most
one group is outside ``F`` (then no subadditivity is lost: ``rank alpha = dim W_F +
dim pi(V_q M_q)`` exactly, since ``V_p M_p = rowspace M_p`` for a full group).  The engine
(:mod:`exactident.ranks.rowspace`) and the verifier (:mod:`exactident.verify.rank_rowspace`)
compute the bound by different routes and must agree.  The exact-elimination fallback
that reuses an exact nullspace of the Gram matrix is checked against FLINT's rank too.
"""

from __future__ import annotations

import copy
import itertools
import random

import flint
import numpy as np
import pytest

from exactident.io.case import Case
from exactident.model.activation import activation_state, alpha_exact
from exactident.model.network import Network
from exactident.ranks.certify import certified_by, certify_rank_alpha, certify_ranks
from exactident.ranks.rowspace import pattern_groups, pattern_matrix, pattern_rowspace_bound
from exactident.verify.rank import verify_rank_certificate
from exactident.verify.rank_rowspace import rowspace_bound


def _rank(pattern, X):
    return flint.fmpq_mat(alpha_exact(pattern, X)).rank()


def _n_full(pattern, X, N0):
    return sum(flint.fmpq_mat([list(X[int(i)]) + [1] for i in g]).rank() == N0 + 1
               for g in pattern_groups(pattern, len(X)))


def _check_bound(pattern, X, widths):
    true = _rank(pattern, X)
    bound, full = pattern_rowspace_bound(pattern, X, widths)
    assert bound >= true
    assert full == _n_full(pattern, X, widths[0])
    if len(pattern_groups(pattern, len(X))) - full <= 1:
        assert bound == true
    assert rowspace_bound(pattern, X, widths) == bound
    return bound, true


def test_pattern_matrix_is_alpha_at_unit_inputs():
    # alpha is affine in x at a fixed pattern: alpha(x) = (x, 1) M_p, checked on random x
    rng = random.Random(3)
    for widths in [(1, 2, 1), (2, 3, 1), (2, 2, 3, 1), (3, 2, 2, 2, 1), (2, 1)]:
        for _ in range(5):
            row = [np.array([rng.random() < 0.5 for _ in range(w)]) for w in widths[1:-1]]
            M = pattern_matrix(row, widths[0])
            x = [flint.fmpq(rng.randint(-9, 9), rng.randint(1, 4)) for _ in range(widths[0])]
            A = alpha_exact([a.reshape(1, -1) for a in row], [x])
            expect = [sum((list(x) + [1])[j] * int(M[j, c]) for j in range(widths[0] + 1)) for c in range(M.shape[1])]
            assert [A[0, c] for c in range(A.ncols())] == expect


@pytest.mark.parametrize("widths,points", [((1, 2, 1), [[0], [1], [2]]), ((1, 2, 1), [[1], [1], [-1]]),
                                           ((2, 2, 1), [[0, 0], [1, 0], [0, 1]]),
                                           ((2, 2, 1), [[1, 2], [2, 4], [0, 0]]),
                                           ((1, 1, 2, 1), [[0], [3], [1]])])
def test_every_pattern_on_tiny_samples(widths, points):
    # exhaustive: every assignment of every hidden neuron on every sample (not only realisable ones)
    X = [[flint.fmpq(v) for v in row] for row in points]
    n, hidden = len(X), widths[1:-1]
    sizes = [n * w for w in hidden]
    for bits in itertools.product([False, True], repeat=sum(sizes)):
        pattern, k = [], 0
        for w, s in zip(hidden, sizes):
            pattern.append(np.array(bits[k:k + s], dtype=bool).reshape(n, w))
            k += s
        _check_bound(pattern, X, widths)


def _random_case(rng, widths):
    W = [flint.fmpq_mat(widths[l + 1], widths[l],
                        [rng.choice([-2, -1, 1, 2]) for _ in range(widths[l] * widths[l + 1])])
         for l in range(len(widths) - 1)]
    b = [[flint.fmpq(rng.randint(-3, 3)) for _ in range(widths[l + 1])] for l in range(len(widths) - 1)]
    n = rng.randint(1, 6 * widths[0] + 8)
    X = [[flint.fmpq(rng.randint(-3, 3), rng.choice([1, 2])) for _ in range(widths[0])] for _ in range(n)]
    if rng.random() < 0.3:
        X += X[: rng.randint(1, n)]  # repeated samples
    if rng.random() < 0.3:
        for row in X:
            row[0] = flint.fmpq(0)  # a zero column
    if rng.random() < 0.2 and widths[0] > 1:
        for row in X:
            row[-1] = 2 * row[0]  # rank-deficient data
    return Network(widths, W, b), X


@pytest.mark.parametrize("seed", range(40))
def test_random_networks_bound_and_certified_rank(seed):
    rng = random.Random(seed)
    widths = [(1, 2, 1), (2, 3, 1), (2, 3, 2), (3, 4, 1), (2, 3, 3, 1), (2, 2, 3, 2), (3, 2, 2, 2, 1)][seed % 7]
    net, X = _random_case(rng, widths)
    st = activation_state(net, X)
    for pattern in [st.pattern] + [[np.asarray(a).copy() for a in st.pattern] for _ in st.ties[:1]]:
        _check_bound(pattern, X, widths)  # ties resolved active: any pattern is a valid input
        res = certify_rank_alpha(pattern, X, widths, rng=random.Random(seed))
        assert res.rank == _rank(pattern, X)


def _bc_analogue(seed):
    # breast-cancer-like in miniature: three tight clusters (a full group each) and 30 scattered
    # samples in many patterns of few samples, where the cheaper bounds of alpha are all loose
    rng = random.Random(seed)
    W = [flint.fmpq_mat(5, 3, [rng.choice([-2, -1, 1, 2, 3]) for _ in range(15)]), flint.fmpq_mat(1, 5, [1] * 5)]
    net = Network((3, 5, 1), W, [[flint.fmpq(rng.randint(-2, 2)) for _ in range(5)], [flint.fmpq(0)]])
    X = []
    for _c in range(3):
        centre = [rng.randint(-20, 20) for _ in range(3)]
        X += [[flint.fmpq(centre[j] * 4 + rng.randint(-1, 1), 4) for j in range(3)] for _ in range(6)]
    X += [[flint.fmpq(rng.randint(-40, 40), rng.choice([1, 2, 3])) for _ in range(3)] for _ in range(30)]
    return net, X


@pytest.mark.parametrize("seed", [21, 29, 111])
def test_trained_like_network_is_certified_by_pattern_rowspace(seed):
    net, X = _bc_analogue(seed)
    st = activation_state(net, X)
    assert not st.ties
    res = certify_rank_alpha(st.pattern, X, net.widths, rng=random.Random(0))
    assert res.certificate["upper"] == {"kind": "pattern-rowspace", "bound": res.rank}
    assert res.rank == _rank(st.pattern, X) < min(len(X), 21)
    # R_Gamma = R_A or not, the full rank certificate verifies from the case
    from exactident.model.fixed_edges import fixed_edges

    ranks = certify_ranks(net, X, st.pattern, fixed_edges(net), need_rank_a=True, rng=random.Random(1))
    assert ranks.certificate["rank_a"]["upper"]["kind"] == "pattern-rowspace"
    assert verify_rank_certificate(Case("t", net, X), ranks.certificate) == []
    # as check() calls it: R_Gamma = R_A here (Theorem 8), and R_A, certified before any kernel of
    # Gamma is sought, closes R_Gamma (Prop. 11); R_Gamma itself against FLINT's rank of Gamma
    from exactident.model.gamma import gamma_exact
    from exactident.model.integer_forward import integer_forward

    fixed = fixed_edges(net)
    res = certify_ranks(net, X, st.pattern, fixed, rng=random.Random(1), allow_rank_a_lower=True)
    true_gamma = flint.fmpq_mat(gamma_exact(net, X, integer_forward(net, X).Z(), st.pattern, fixed)).rank()
    assert res.rank_gamma == true_gamma == res.rank_a == _rank(st.pattern, X) < net.dim
    assert certified_by(res.certificate) == {"rank_gamma": "rank_a", "rank_a": "pattern-rowspace"}
    assert verify_rank_certificate(Case("t", net, X), res.certificate) == []


def test_pattern_rowspace_tampering_is_rejected():
    net, X = _bc_analogue(21)
    st = activation_state(net, X)
    from exactident.model.fixed_edges import fixed_edges

    cert = certify_ranks(net, X, st.pattern, fixed_edges(net), need_rank_a=True, rng=random.Random(1)).certificate
    case = Case("t", net, X)
    assert verify_rank_certificate(case, cert) == []
    r = cert["rank_a"]["rank"]
    mutations = [
        lambda c: c["rank_a"]["upper"].__setitem__("bound", r + 1),
        lambda c: (c["rank_a"]["upper"].__setitem__("bound", r - 1), c["rank_a"].__setitem__("rank", r - 1)),
        lambda c: c["rank_a"].__setitem__("rank", r + 1),
        lambda c: c["rank_a"]["upper"].__setitem__("full_groups", 3),
        lambda c: c["rank_a"]["upper"].__setitem__("kind", "patterns"),
        lambda c: c["rank_a"]["upper"].pop("bound"),
        lambda c: c["rank_a"]["lower"].__setitem__("rank_mod_p", r - 1),
        lambda c: c["rank_a"].__setitem__("rank_a", r + 1),
    ]
    for mutate in mutations:
        bad = copy.deepcopy(cert)
        mutate(bad)
        assert verify_rank_certificate(case, bad), bad


def test_a_loose_pattern_rowspace_claim_is_rejected():
    # 1-2-1, one sample in each pattern (no group full): [x, x, 1, 1, 1] at pattern (1, 1) is the sum of
    # [x, 0, 1, 0, 1] at (1, 0) and [0, x, 0, 1, 1] at (0, 1) minus [0, 0, 0, 0, 1] at (0, 0): rank 3,
    # while the bound adds 1 per group: 4.  A claim "pattern-rowspace bounds it by 3" is false.
    from exactident.io.limits import DEFAULT_WORK_LIMITS
    from exactident.verify.rank import _check_rank_a, _Reject

    pattern = [np.array([[True, True], [True, False], [False, True], [False, False]])]
    X = [[flint.fmpq(v)] for v in (2, 2, 2, 5)]
    assert _rank(pattern, X) == 3
    assert pattern_rowspace_bound(pattern, X, (1, 2, 1)) == (4, 0) and rowspace_bound(pattern, X, (1, 2, 1)) == 4
    res = certify_rank_alpha(pattern, X, (1, 2, 1), rng=random.Random(0))
    assert res.rank == 3
    forged = dict(copy.deepcopy(res.certificate), upper={"kind": "pattern-rowspace", "bound": 3}, rank_a=3)
    with pytest.raises(_Reject, match="pattern-rowspace bounds the rank by 3, recomputed bound is 4"):
        _check_rank_a("rank_a", forged, pattern, X, (1, 2, 1), DEFAULT_WORK_LIMITS.max_exact_entries)


@pytest.mark.parametrize("seed", [21, 29, 111])
def test_exact_elimination_fallback_takes_the_rank_from_an_unusable_exact_nullspace(monkeypatch, seed):
    # the Gram route computed FLINT's exact nullspace but could not check it by primes (simulated):
    # rank alpha = n - nullity, and the exact-elimination certificate verifies (the verifier eliminates)
    import exactident.ranks.rank_alpha as cm
    from exactident.model.fixed_edges import fixed_edges

    def unusable(*args, exact_kernel=None, **kw):
        exact_kernel()
        return None

    net, X = _bc_analogue(seed)
    st = activation_state(net, X)
    monkeypatch.setattr(cm, "certified_rank", unusable)
    monkeypatch.setattr(cm, "pattern_rowspace_bound", lambda *a: None)
    res = certify_rank_alpha(st.pattern, X, net.widths, rng=random.Random(0))
    assert res.rank == _rank(st.pattern, X)
    assert res.certificate["upper"] == {"kind": "exact-elimination"}
    monkeypatch.undo()
    ranks = certify_ranks(net, X, st.pattern, fixed_edges(net), need_rank_a=True, rng=random.Random(1))
    cert = dict(ranks.certificate, rank_a=dict(res.certificate, rank_a=res.rank))
    assert verify_rank_certificate(Case("t", net, X), cert) == []
