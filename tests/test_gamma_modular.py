"""Gamma mod p, the Gram route to rank alpha, certified ranks and rank certificates.

Oracles are independent of the modular code: ``gamma_exact`` (rational
backprop) with FLINT's exact rank, ``alpha_exact`` (explicit path columns)
with its exact rank, and the rational forward pass ``network.pre_activations``.
"""

from __future__ import annotations

import copy
import glob
import os
import random

import flint
import pytest

from exactident.check import check
from exactident.errors import InvariantViolation
from exactident.io.case import Case, load_case
from exactident.linalg import exact
from exactident.linalg.modular import random_primes
from exactident.model.activation import activation_state, alpha_exact
from exactident.model.fixed_edges import fixed_edges
from exactident.model.gamma import gamma_exact
from exactident.model.gamma_modular import gamma_mod_p, gram_mod_p
from exactident.model.integer_forward import data_denominator, integer_forward
from exactident.model.network import Network, pre_activations
from exactident.ranks.bounds import pattern_rank_bound
from exactident.ranks.certify import certify_rank_alpha, certify_ranks
from exactident.ranks.kernels import neuron_local_kernel
from exactident.verify.rank import verify_rank_certificate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _q(rng, dyadic=False):
    if dyadic:  # a float64 draw, converted exactly (huge power-of-two denominators)
        from fractions import Fraction
        f = Fraction(rng.gauss(0, 1))
        return flint.fmpq(f.numerator, f.denominator)
    return flint.fmpq(rng.randint(-6, 6), rng.choice([1, 2, 3, 4, 5, 9]))


def random_case(seed: int, dead: bool = False) -> Case:
    """A small random network and sample; ``dead`` kills one first-layer neuron on the whole sample."""
    rng = random.Random(seed)
    dyadic = seed % 3 == 0
    L = rng.randint(1, 3)
    widths = tuple(rng.randint(1, 3) for _ in range(L + 1))
    W = [flint.fmpq_mat(widths[l + 1], widths[l], [_q(rng, dyadic) for _ in range(widths[l] * widths[l + 1])])
         for l in range(L)]
    b = [[_q(rng, dyadic) for _ in range(widths[l + 1])] for l in range(L)]
    n = rng.randint(0, 7)
    X = [[_q(rng, dyadic) for _ in range(widths[0])] for _ in range(n)]
    if dead and L >= 2:
        b[0][0] = flint.fmpq(-10**6)  # z_1(x)_0 < 0 for every sample: its incoming weights are free
    return Case(f"random-{seed}", Network(widths, W, b), X)


def small_cases() -> list[Case]:
    cases = [random_case(s) for s in range(40)] + [random_case(s, dead=True) for s in range(40, 55)]
    cases += [load_case(p) for p in sorted(glob.glob(os.path.join(ROOT, "cases", "*.json")))]
    return cases


CASES = small_cases()


def _reduce(M: flint.fmpq_mat, p: int) -> list[list[int]]:
    return [[int(v.p) * pow(int(v.q), -1, p) % p for v in row] for row in M.table()]


@pytest.mark.parametrize("case", CASES[:40], ids=lambda c: c.name)
def test_integer_forward_matches_rational_forward(case):
    fw = integer_forward(case.network, case.X)
    assert fw.Z() == pre_activations(case.network, case.X)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_gamma_mod_p_is_gamma_exact_reduced(case):
    net, X = case.network, case.X
    st = activation_state(net, X)
    fixed = fixed_edges(net)
    G = gamma_exact(net, X, st.Z, st.pattern, fixed)
    avoid = data_denominator(net, X)
    for p in random_primes(2, avoid, random.Random(1)):
        Gp = gamma_mod_p(net, X, st.pattern, fixed, p, avoid)
        assert Gp.shape == (G.nrows(), G.ncols())
        assert Gp.tolist() == _reduce(G, p)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_gram_route_agrees_with_explicit_alpha(case):
    st = activation_state(case.network, case.X)
    A = alpha_exact(st.pattern, case.X)
    p = random_primes(1, data_denominator(case.network, case.X), random.Random(2))[0]
    if case.X:
        assert gram_mod_p(st.pattern, case.X, p).tolist() == _reduce(A * A.transpose(), p)
    res = certify_rank_alpha(st.pattern, case.X, case.widths, rng=random.Random(3))
    assert res.rank == exact.rank(A)
    assert pattern_rank_bound(st.pattern, case.X) >= exact.rank(A)  # a valid upper bound


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_certified_ranks_agree_with_exact_ranks_and_verify(case):
    net, X = case.network, case.X
    st = activation_state(net, X)
    fixed = fixed_edges(net)
    res = certify_ranks(net, X, st.pattern, fixed, need_rank_a=True, rng=random.Random(4))
    assert res.rank_gamma == exact.rank(gamma_exact(net, X, st.Z, st.pattern, fixed))
    assert res.rank_a == net.widths[-1] * exact.rank(alpha_exact(st.pattern, X))
    assert verify_rank_certificate(case, res.certificate) == []


def test_kernel_certificates_occur():
    kinds = set()
    for case in CASES:
        st = activation_state(case.network, case.X)
        res = certify_ranks(case.network, case.X, st.pattern, fixed_edges(case.network), need_rank_a=True,
                            rng=random.Random(5))
        kinds.add(res.certificate["rank_gamma"]["upper"]["kind"])
        kinds.add(res.certificate["rank_a"]["upper"]["kind"])
    assert {"kernel", "shape", "rank_a", "patterns"} <= kinds


def test_dead_neuron_kernel_by_hand():
    # f(x) = 3 relu(x - 100) + 5 relu(x) + b_2 on x = 1..6: neuron 0 is dead, neuron 1 active.
    # Both W_2 entries are fixed edges, so tau = (W_1[0,0], W_1[1,0], b_1[0], b_1[1], b_2[0]) and
    # the Gamma row of x is (0, 5x, 0, 5, 1): rank 2, and ker Gamma is spanned by
    # e_{W_1[0,0]}, e_{b_1[0]} (dead neuron) and e_{b_1[1]} - 5 e_{b_2[0]}.
    net = Network((1, 2, 1), [flint.fmpq_mat([[1], [1]]), flint.fmpq_mat([[3, 5]])],
                  [[flint.fmpq(-100), flint.fmpq(0)], [flint.fmpq(0)]])
    X = [[flint.fmpq(k)] for k in range(1, 7)]
    st = activation_state(net, X)
    from exactident.ranks.certify import certify_rank_gamma
    res = certify_rank_gamma(net, X, st.pattern, fixed_edges(net), rng=random.Random(0))
    assert res.rank == 2 and res.certificate["upper"]["kind"] == "kernel"
    K = [[flint.fmpq(0)] * 3 for _ in range(5)]
    for c, col in enumerate(res.certificate["upper"]["kernel"]):
        for i, v in col:
            num, _, den = v.partition("/")
            K[i][c] = flint.fmpq(int(num), int(den or 1))
    expected = [[1, 0, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 1, -5]]
    for v in expected:
        M = flint.fmpq_mat(5, 4, [x for i in range(5) for x in K[i] + [v[i]]])
        assert exact.rank(M) == 3  # v lies in the span of the certified kernel
    # and through check(): rank Gamma = R_A = 2 < 5, closed by Prop. 11 without a Gamma kernel
    r = check(Case("dead", net, X), numeric=False)
    assert (r.verdict, r.rank_gamma, r.rank_a) == ("not-identifiable", 2, 2)
    assert r.certificate["rank"]["rank_gamma"]["upper"] == {"kind": "rank_a", "bound": 2}


def test_check_modular_and_reference_paths_agree():
    for case in CASES[:30]:
        a = check(case, numeric=False, all_ranks=True)
        b = check(case, numeric=False, all_ranks=True, modular=False)
        assert (a.verdict, a.rank_gamma, a.rank_a) == (b.verdict, b.rank_gamma, b.rank_a), case.name
        if not a.on_boundary:
            assert verify_rank_certificate(case, a.certificate["rank"]) == []


def test_rank_a_skipped_when_cs_holds():
    # SPEC §2: samples 0, 1, -1 give rank Gamma = 3 = dim, so R_A is not needed.
    from exactident.io.case import parse_case
    case = parse_case({"format": "exactident-case/1", "name": "t", "widths": [1, 1, 1],
                       "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]], "sample": [[0], [1], [-1]]})
    r = check(case, numeric=False)
    assert (r.verdict, r.rank_gamma, r.rank_a) == ("identifiable", 3, None)
    assert "rank_a" not in r.certificate["rank"]
    assert r.certificate["rank"]["rank_gamma"]["upper"] == {"kind": "shape", "bound": 3}


def test_a_prime_dividing_a_denominator_is_never_used():
    # Put the very prime that seed 7 would draw first into a weight's denominator.
    q = random_primes(1, rng=random.Random(7))[0]
    net = Network((1, 2, 1), [flint.fmpq_mat([[flint.fmpq(1, q)], [flint.fmpq(-2, 3)]]),
                              flint.fmpq_mat([[3, 5]])], [[flint.fmpq(1), flint.fmpq(1)], [flint.fmpq(0)]])
    X = [[flint.fmpq(k, q)] for k in range(-3, 4)]
    st = activation_state(net, X)
    fixed = fixed_edges(net)
    with pytest.raises(InvariantViolation, match="divides a denominator"):
        gamma_mod_p(net, X, st.pattern, fixed, q, data_denominator(net, X))
    with pytest.raises(InvariantViolation, match="divides a denominator"):
        gram_mod_p(st.pattern, X, q)
    res = certify_ranks(net, X, st.pattern, fixed, need_rank_a=True, rng=random.Random(7))

    def primes_in(obj):
        if isinstance(obj, dict):
            found = [v for k, v in obj.items() if k == "prime"]
            for k, v in obj.items():
                found.extend(v if k == "primes" else primes_in(v))
            return found
        return []

    used = primes_in(res.certificate)
    assert used and q not in used
    assert res.rank_gamma == exact.rank(gamma_exact(net, X, st.Z, st.pattern, fixed))


def _kernel_certified_case():
    for case in CASES:
        st = activation_state(case.network, case.X)
        res = certify_ranks(case.network, case.X, st.pattern, fixed_edges(case.network), need_rank_a=True,
                            rng=random.Random(6))
        if res.certificate["rank_gamma"]["upper"]["kind"] == "kernel":
            return case, res.certificate
    raise AssertionError("no kernel-certified case in the table")


def test_corrupted_certificates_are_rejected():
    case, cert = _kernel_certified_case()
    assert verify_rank_certificate(case, cert) == []
    g = cert["rank_gamma"]

    def bad(mutate):
        c = copy.deepcopy(cert)
        mutate(c)
        return verify_rank_certificate(case, c)

    assert bad(lambda c: c["rank_gamma"].update(rank=g["rank"] + 1))
    assert bad(lambda c: c["rank_gamma"]["lower"].update(prime=15))  # composite
    assert bad(lambda c: c["rank_gamma"]["lower"].update(prime=7 * data_denominator(case.network, case.X)))
    assert bad(lambda c: c["rank_gamma"]["upper"]["kernel"].pop())  # too few kernel vectors
    assert bad(lambda c: c["rank_gamma"]["upper"].update(primes=c["rank_gamma"]["upper"]["primes"][:1]))
    assert bad(lambda c: c["rank_gamma"]["upper"].update(kind="shape"))

    def tamper_entry(c):
        col = c["rank_gamma"]["upper"]["kernel"][0]
        col[0] = [col[0][0], str(flint.fmpq(1) + flint.fmpq(col[0][1]))]
    assert bad(tamper_entry)

    def duplicate_column(c):
        K = c["rank_gamma"]["upper"]["kernel"]
        if len(K) >= 2:
            K[1] = K[0]
        else:
            K[0] = [[i, "0"] for i, _ in K[0]]
    assert bad(duplicate_column)  # not of full column rank
    assert bad(lambda c: c["rank_a"].update(rank_a=c["rank_a"]["rank_a"] + 1))
    assert bad(lambda c: c.pop("rank_gamma"))
    assert bad(lambda c: c["rank_gamma"].update(lower="x"))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_neuron_local_kernel_vectors_are_in_the_exact_kernel(case):
    net, X = case.network, case.X
    st = activation_state(net, X)
    fixed = fixed_edges(net)
    G = gamma_exact(net, X, st.Z, st.pattern, fixed)
    for col in neuron_local_kernel(net, X, st.pattern, fixed):
        v = flint.fmpq_mat(net.dim, 1, [col.get(i, 0) for i in range(net.dim)])
        assert G * v == flint.fmpq_mat(G.nrows(), 1)


def test_neuron_active_on_one_sample_by_hand():
    # f(x) = 2 relu(x - 11/2) + 3 relu(x) + b_2 at x = 1..6: neuron 0 is active only at x = 6, where a
    # change (dw, db) of its incoming weight and bias moves z by 6 dw + db: (1, -6) is in ker Gamma.
    # Neuron 1 is active everywhere (6 rows >= 2 parameters): no block for it.
    net = Network((1, 2, 1), [flint.fmpq_mat([[1], [1]]), flint.fmpq_mat([[2, 3]])],
                  [[flint.fmpq(-11, 2), flint.fmpq(0)], [flint.fmpq(0)]])
    X = [[flint.fmpq(k)] for k in range(1, 7)]
    st = activation_state(net, X)
    fixed = fixed_edges(net)
    K = neuron_local_kernel(net, X, st.pattern, fixed)
    # tau = (W_1[0,0], W_1[1,0], b_1[0], b_1[1], b_2[0])
    assert len(K) == 1 and K[0][2] != 0
    assert K[0][0] / K[0][2] == flint.fmpq(-1, 6) and set(K[0]) == {0, 2}


def test_local_kernel_certificate_is_compact_and_verified():
    # f(x) = 2 relu(x - 11/2) + 3 relu(x - 5/2) + b_2 at x = 1..6; tau = (W_1[0,0], W_1[1,0], b_1[0],
    # b_1[1], b_2[0]).  Rows: x = 1, 2: (0,0,0,0,1); x = 3, 4, 5: (0,3x,0,3,1); x = 6: (12,18,2,3,1).
    # Rank 4 by hand (e_5, e_2, e_4 from x <= 5, then (12,0,2,0,0)); the only kernel direction is the
    # one of neuron 0, active at x = 6 alone: (1, 0, -6, 0, 0).
    net = Network((1, 2, 1), [flint.fmpq_mat([[1], [1]]), flint.fmpq_mat([[2, 3]])],
                  [[flint.fmpq(-11, 2), flint.fmpq(-5, 2)], [flint.fmpq(0)]])
    X = [[flint.fmpq(k)] for k in range(1, 7)]
    st = activation_state(net, X)
    fixed = fixed_edges(net)
    from exactident.ranks.certify import certify_rank_gamma
    res = certify_rank_gamma(net, X, st.pattern, fixed, rng=random.Random(0))
    assert res.rank == 4
    # the semi-local construction contains the neuron-local one (docs/modular.md)
    assert res.certificate["upper"] == {"kind": "kernel", "bound": 4, "source": "semi-local", "nullity": 1}
    case = Case("local", net, X)
    cert = {"fixed_edges": [[l, v, k] for (l, v), k in sorted(fixed.s_max.items())], "rank_gamma": res.certificate}
    assert verify_rank_certificate(case, cert) == []
    bad = copy.deepcopy(cert)
    bad["rank_gamma"]["upper"]["nullity"] = 2
    assert verify_rank_certificate(case, bad) == [
        "rank.rank_gamma.upper.nullity: certificate says 2, the semi-local kernel rebuilt from the case has 1 vectors"]
    bad = copy.deepcopy(cert)
    bad["rank_gamma"]["rank"] = 3
    assert verify_rank_certificate(case, bad)


def _explicit_sketch_matrix(net, fixed, p, k, seed):
    """``S`` of gamma_sketch_mod_p written out entry by entry (dim x k, ints mod p), from its definition."""
    from exactident.model.gamma_modular import sketch_coefficients

    U, V, B = sketch_coefficients(net, p, k, seed)
    S = []
    for l in range(1, net.L + 1):
        for a in range(net.widths[l]):
            for b in range(net.widths[l - 1]):
                if not fixed.is_fixed(l, a, b):
                    S.append([int(U[l - 1][a, j]) * int(V[l - 1][b, j]) % p for j in range(k)])
        for a in range(net.widths[l]):
            S.append([int(B[l - 1][a, j]) % p for j in range(k)])
    return S


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_gamma_sketch_is_gamma_times_its_explicit_sketch_matrix(case, monkeypatch):
    """Gamma S mod p without Gamma equals (Gamma_exact mod p) S with S written out; tiny row blocks."""
    import numpy as np

    from exactident.model import backprop  # the one builder holds the row-block size
    from exactident.model.gamma_modular import gamma_sketch_mod_p

    monkeypatch.setattr(backprop, "_BLOCK_ENTRIES", 1)  # one sample per block: the block seams are tested
    net, X = case.network, case.X
    st = activation_state(net, X)
    fixed = fixed_edges(net)
    G = _reduce(gamma_exact(net, X, st.Z, st.pattern, fixed), 1048583) if X else []
    p, k = 1048583, 5
    S = _explicit_sketch_matrix(net, fixed, p, k, seed=7)
    want = [[sum(g * s[j] for g, s in zip(row, S)) % p for j in range(k)] for row in G]
    got = gamma_sketch_mod_p(net, X, st.pattern, fixed, p, k, 7, data_denominator(net, X))
    assert got.shape == (len(X) * net.widths[-1], k)
    assert (np.asarray(got).astype(np.int64) % p).tolist() == want


@pytest.mark.parametrize("case", CASES[:20] + CASES[-4:], ids=lambda c: c.name)
def test_gamma_mod_p_row_blocks_equal_one_block(case, monkeypatch):
    """Built in row blocks of one sample each, Gamma mod p is the same as in one block (and exact mod p)."""
    from exactident.model import backprop  # the one builder holds the row-block size

    net, X = case.network, case.X
    st = activation_state(net, X)
    fixed = fixed_edges(net)
    avoid = data_denominator(net, X)
    p = random_primes(1, avoid, random.Random(3))[0]
    monkeypatch.setattr(backprop, "_BLOCK_ENTRIES", 1 << 40)
    one = gamma_mod_p(net, X, st.pattern, fixed, p, avoid)
    monkeypatch.setattr(backprop, "_BLOCK_ENTRIES", 1)
    blocks = gamma_mod_p(net, X, st.pattern, fixed, p, avoid)
    assert blocks.tolist() == one.tolist() == _reduce(gamma_exact(net, X, st.Z, st.pattern, fixed), p)


def test_wide_gamma_sketch_reaches_the_rank_where_a_random_column_subset_does_not():
    """Inputs zero outside 4 of 200 coordinates (like an image's border): 1176 of Gamma's 1207 columns
    (W_1 on the zero coordinates) are zero, so m + 16 random columns miss the rank; the Khatri-Rao
    sketch reaches it (the exact rank by FLINT on gamma_exact), and certify_ranks proves it by shape."""
    import numpy as np

    from exactident.linalg.blas_modp import rank_blas
    from exactident.model.gamma_modular import gamma_sketch_mod_p

    rng = random.Random(5)
    widths = (200, 6, 1)
    W = [flint.fmpq_mat(6, 200, [rng.randint(-5, 5) for _ in range(1200)]),
         flint.fmpq_mat(1, 6, [rng.choice([-2, -1, 1, 2]) for _ in range(6)])]
    b = [[flint.fmpq(rng.randint(-3, 3)) for _ in range(6)], [flint.fmpq(1)]]
    net = Network(widths, W, b)
    X = [[flint.fmpq(rng.randint(-6, 6)) if j < 4 else flint.fmpq(0) for j in range(200)] for _ in range(12)]
    st = activation_state(net, X)
    fixed = fixed_edges(net)
    G = gamma_exact(net, X, st.Z, st.pattern, fixed)
    r = exact.rank(G)
    assert r == len(X)  # full row rank: what the sketch route of certify_ranks proves
    p = 1048583
    A = np.array(_reduce(G, p), dtype=np.int64)
    picks = random.Random(1)
    assert max(rank_blas(A[:, sorted(picks.sample(range(A.shape[1]), len(X) + 16))], p) for _ in range(5)) < r
    sk = gamma_sketch_mod_p(net, X, st.pattern, fixed, p, len(X) + 16, 0)
    assert rank_blas(sk, p) == r
    res = certify_ranks(net, X, st.pattern, fixed, rng=random.Random(0))
    assert res.rank_gamma == r and res.certificate["rank_gamma"]["upper"]["kind"] == "shape"
    assert verify_rank_certificate(Case("wide", net, X), res.certificate) == []


def test_wide_rank_deficient_gamma_keeps_its_exact_certified_rank():
    """Wide and row-deficient (two samples repeated): the sketch's rank is only a lower bound there,
    the certified rank is still the exact one (FLINT on gamma_exact) and the certificate verifies."""
    rng = random.Random(5)
    W = [flint.fmpq_mat(6, 200, [rng.randint(-5, 5) for _ in range(1200)]),
         flint.fmpq_mat(1, 6, [rng.choice([-2, -1, 1, 2]) for _ in range(6)])]
    b = [[flint.fmpq(rng.randint(-3, 3)) for _ in range(6)], [flint.fmpq(1)]]
    net = Network((200, 6, 1), W, b)
    X = [[flint.fmpq(rng.randint(-6, 6)) if j < 4 else flint.fmpq(0) for j in range(200)] for _ in range(10)]
    X = X + X[:2]
    st = activation_state(net, X)
    fixed = fixed_edges(net)
    r = exact.rank(gamma_exact(net, X, st.Z, st.pattern, fixed))
    assert r < len(X)
    res = certify_ranks(net, X, st.pattern, fixed, rng=random.Random(0))
    assert res.rank_gamma == r
    assert verify_rank_certificate(Case("wide-deficient", net, X), res.certificate) == []


def test_wide_gamma_with_a_narrow_last_hidden_layer_gets_a_left_kernel_certificate():
    """3 outputs fed by 2 hidden neurons, wide Gamma: every sample has a combination of its rows that
    vanishes on layers 1..L-1, so R_Gamma < rows; the left-kernel bound gives the exact rank (FLINT)
    and the verifier proves it; a tampered bound is rejected."""
    rng = random.Random(2)
    W = [flint.fmpq_mat(4, 60, [rng.randint(-4, 4) for _ in range(240)]),
         flint.fmpq_mat(2, 4, [rng.randint(-3, 3) for _ in range(8)]),
         flint.fmpq_mat(3, 2, [rng.choice([-2, -1, 1, 2]) for _ in range(6)])]
    b = [[flint.fmpq(rng.randint(-2, 2)) for _ in range(4)], [flint.fmpq(1), flint.fmpq(2)],
         [flint.fmpq(0)] * 3]
    net = Network((60, 4, 2, 3), W, b)
    X = [[flint.fmpq(rng.randint(-5, 5)) for _ in range(60)] for _ in range(10)]
    st = activation_state(net, X)
    fixed = fixed_edges(net)
    r = exact.rank(gamma_exact(net, X, st.Z, st.pattern, fixed))
    assert r < 30 < net.dim
    res = certify_ranks(net, X, st.pattern, fixed, rng=random.Random(0))
    part = res.certificate["rank_gamma"]
    assert res.rank_gamma == r and part["upper"] == {"kind": "left-kernel", "bound": r}
    case = Case("narrow-last", net, X)
    assert verify_rank_certificate(case, res.certificate) == []
    bad = copy.deepcopy(res.certificate)
    bad["rank_gamma"]["upper"]["bound"] = r - 1
    assert verify_rank_certificate(case, bad) != []


def test_integer_forward_remembers_by_value_not_by_identity():
    """``integer_forward`` keeps its last results, keyed by the values: a sample or a weight changed in place
    gives the new pass.  Right values: ``z_1 = W x + b`` by hand, in Fractions."""
    from fractions import Fraction

    from exactident.model.integer_forward import integer_forward
    from exactident.model.network import Network

    net = Network((2, 2, 1), [flint.fmpq_mat([[1, 2], [3, -1]]), flint.fmpq_mat([[1, 1]])],
                  [[flint.fmpq(1, 2), flint.fmpq(0)], [flint.fmpq(0)]])
    X = [[flint.fmpq(1), flint.fmpq(1, 3)], [flint.fmpq(-2), flint.fmpq(5)]]

    def z1(fw) -> list[Fraction]:
        return [Fraction(int(v.p), int(v.q)) for v in fw.Z()[0].entries()]

    def by_hand(W, b, X) -> list[Fraction]:
        return [sum(Fraction(W[v][j]) * x[j] for j in range(2)) + b[v] for x in X for v in range(2)]

    Xf = [[Fraction(1), Fraction(1, 3)], [Fraction(-2), Fraction(5)]]
    assert z1(integer_forward(net, X)) == by_hand([[1, 2], [3, -1]], [Fraction(1, 2), 0], Xf)
    assert z1(integer_forward(net, X)) == by_hand([[1, 2], [3, -1]], [Fraction(1, 2), 0], Xf)  # remembered
    X[1][0] = flint.fmpq(7)  # in place: the same list object, new values
    Xf[1][0] = Fraction(7)
    assert z1(integer_forward(net, X)) == by_hand([[1, 2], [3, -1]], [Fraction(1, 2), 0], Xf)
    net.W[0][0, 1] = flint.fmpq(-4)  # a weight changed in place
    assert z1(integer_forward(net, X)) == by_hand([[1, -4], [3, -1]], [Fraction(1, 2), 0], Xf)


@pytest.mark.parametrize("seed", range(12))
def test_alpha_and_its_gram_mod_p_on_random_patterns_equal_alpha_exact_reduced(seed):
    """``alpha_mod_p`` (blocks written in place) and ``gram_mod_p`` (counts one layer at a time, Horner in
    place; or the counts given; int64 or float64 symmetric residues) against ``alpha_exact`` of Prop. 11's path
    enumeration, reduced mod a BLAS prime and a prime above the BLAS range."""
    import numpy as np

    from exactident.model.gamma_modular import Scaled, alpha_mod_p, gram_counts

    rng = random.Random(seed)
    widths = [rng.randint(1, 3) for _ in range(rng.randint(2, 5))]  # L = 1 (no hidden layer) included
    n = rng.randint(1, 7)
    X = [[flint.fmpq(rng.randint(-9, 9), rng.choice([1, 2, 5])) for _ in range(widths[0])] for _ in range(n)]
    pattern = [np.array([[rng.random() < 0.6 for _ in range(w)] for _ in range(n)], dtype=bool) for w in widths[1:-1]]
    A = alpha_exact(pattern, X)
    for p in (1048573, 2147483629):
        Xres = Scaled([v for row in X for v in row], (n, widths[0])).mod(p)
        assert alpha_mod_p(pattern, Xres, p).tolist() == _reduce(A, p)
        want = _reduce(A * A.transpose(), p)
        assert gram_mod_p(pattern, X, p).tolist() == want
        assert gram_mod_p(pattern, X, p, counts=gram_counts(pattern)).tolist() == want
        for counts in (None, gram_counts(pattern)):  # float64 throughout below 2**21 (symmetric residues)
            S = gram_mod_p(pattern, X, p, counts=counts, symmetric=True)
            assert (S.dtype == np.float64) == (p < 2**21)
            assert (np.asarray(S, dtype=np.int64) % p).tolist() == want
            assert p >= 2**21 or np.abs(S).max(initial=0) <= (p + 1) // 2
