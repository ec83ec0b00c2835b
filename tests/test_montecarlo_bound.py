"""The Monte Carlo rank's proven error bound (docs/modular.md, "Monte Carlo ranks"; issue 31, item 4).

A rank mod p falls below the rank ``r`` over Q only when p divides a nonzero ``r x r`` minor, and by
Hadamard at most ``d = floor(r log2(sqrt(r) B) / log2 lo)`` primes ``>= lo`` do.  Right values: the
ranks over Q and mod every small prime are sympy's (DomainMatrix over QQ and GF(q)), counted
exhaustively; the number of primes in each range from a sieve (numpy) or sympy's ``primepi``; the
bound of :func:`failure_bound` recomputed by hand from the formula; a reported Monte Carlo value
checked against the target ``1e-6`` and the exact rank.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from sympy import GF, QQ, primerange
from sympy.polys.matrices import DomainMatrix

from exactident.linalg.blas_modp import BLAS_PRIME_HI, BLAS_PRIME_LO
from exactident.linalg.modular import PRIME_HI, PRIME_LO
from exactident.linalg.montecarlo import PRIMES_IN_RANGE, bad_primes_bound, failure_bound, primes_for


def _rank_q(M) -> int:
    return DomainMatrix([[QQ(v) for v in row] for row in M], (len(M), len(M[0])), QQ).rank()


def _rank_mod(M, q: int) -> int:
    F = GF(q)
    return DomainMatrix([[F(v) for v in row] for row in M], (len(M), len(M[0])), F).rank()


def _matrices():
    rng = random.Random(7)
    out = [[[3 * 5 * 7 * 11 * 13]], [[105, 0], [0, 1]], [[2 * 3 * 5 * 7, 11], [13 * 17 * 19, 1]],
           [[30030, 0, 0], [0, 1, 0], [0, 0, 1]]]
    for shape in [(2, 2), (3, 3), (3, 4), (4, 3)]:
        for _ in range(6):
            out.append([[rng.randint(-60, 60) for _ in range(shape[1])] for _ in range(shape[0])])
    return out


@pytest.mark.parametrize("lo", [3, 11, 31])
def test_bad_primes_never_exceed_the_hadamard_count(lo):
    """Exhaustive: every prime q in [lo, 400) with rank mod q < rank over Q is counted; the count is at most d,
    for the true rank and for min(m, n) (the value the code uses, larger)."""
    seen = 0
    for M in _matrices():
        B = max(abs(v) for row in M for v in row)
        r = _rank_q(M)
        bad = [q for q in primerange(lo, 400) if _rank_mod(M, q) < r]
        assert len(bad) <= bad_primes_bound(r, B, lo) <= bad_primes_bound(min(len(M), len(M[0])), B, lo), (M, bad)
        seen += len(bad)
    assert seen >= 5  # the crafted determinants (15015, 30030, ...) do lose rank mod several primes


def test_bad_primes_bound_by_hand():
    # r = 1, B = 15015 = 3 5 7 11 13 (five bad primes >= 3): floor(log2 15015 / log2 3) = floor(8.75) = 8
    assert bad_primes_bound(1, 15015, 3) == 8 >= 5
    # r = 4, B = 2^100, lo = 2^20: floor(4 (100 + 1) / 20) = floor(20.2) = 20
    assert bad_primes_bound(4, 2**100, 2**20) == 20


def test_primes_in_range_are_counted_right():
    sieve = np.ones(BLAS_PRIME_HI, dtype=bool)
    sieve[:2] = False
    for i in range(2, int(BLAS_PRIME_HI**0.5) + 1):
        if sieve[i]:
            sieve[i * i::i] = False
    assert PRIMES_IN_RANGE[(BLAS_PRIME_LO, BLAS_PRIME_HI)] == int(sieve[BLAS_PRIME_LO:].sum())
    from sympy import primepi

    assert PRIMES_IN_RANGE[(PRIME_LO, PRIME_HI)] == int(primepi(PRIME_HI - 1) - primepi(PRIME_LO - 1))


def test_failure_bound_by_hand():
    """prod_{i<k} d / (N - i) with d = 20 (above), N = 73586 minus the primes the denominator may take."""
    lo, hi = BLAS_PRIME_LO, BLAS_PRIME_HI
    assert failure_bound((4, 4), 2**100, 1, lo, hi, 2) == pytest.approx(20 / 73586 * 20 / 73585, rel=1e-12)
    # avoid = 2^40 + 1: at most floor(40 / 20) = 2 primes of the range divide it
    assert failure_bound((4, 4), 2**100, 2**40 + 1, lo, hi, 1) == pytest.approx(20 / 73584, rel=1e-12)
    # a sketch adds r / 2^20 per trial (Schwartz-Zippel, degree r)
    assert failure_bound((4, 4), 2**100, 1, lo, hi, 1, sketch=True) == pytest.approx(20 / 73586 + 4 / 2**20)
    # word-size primes: N = 50,697,537, log2 lo = 30: d = floor(4 * 101 / 30) = 13
    assert failure_bound((4, 4), 2**100, 1, PRIME_LO, PRIME_HI, 1) == pytest.approx(13 / 50697537, rel=1e-12)


def test_primes_for_reaches_the_target_with_the_fewest_primes():
    lo, hi = BLAS_PRIME_LO, BLAS_PRIME_HI
    k = primes_for(1e-6, (4, 4), 2**100, 1, lo, hi)
    # 20 / 73586 = 2.7e-4: two primes give 7.4e-8 <= 1e-6, one does not
    assert k == 2 and 20 / 73586 > 1e-6 >= 20 / 73586 * 20 / 73585
    d = bad_primes_bound(2000, 2**3000, lo)
    assert d > PRIMES_IN_RANGE[(lo, hi)] and primes_for(1e-6, (2000, 2000), 2**3000, 1, lo, hi) is None
    assert math.isclose(failure_bound((2000, 2000), 2**3000, 1, lo, hi, 5), 1.0)


def test_interval_monte_carlo_value_is_worth_its_label():
    """iris 4-8-8-3 with --verdict-first: the Monte Carlo value beside [109, 111] has a proven error <= 1e-6 (its
    first sample had 1.6e-2) and is the exact rank 109 (dim - 14, the exact path's nullity)."""
    from exactident.check import check
    from exactident.io.case import load_case

    r = check(load_case("cases/iris-mlp-4-8-8-3.json"), numeric=False, verdict_first=True)
    assert r.rank_gamma_interval == (109, 111) or list(r.rank_gamma_interval) == [109, 111]
    assert r.montecarlo["rank_gamma"] == 109 and 0 < r.montecarlo["error_probability"] <= 1e-6


def test_failure_bound_never_underflows_to_certainty():
    """Regression: 49 word-size primes at 2.4e-7 each multiply to 1e-325, which underflowed to 0.0, a claim
    of certainty; the bound is positive whenever d > 0, and 0 only when no prime of the range can divide a minor."""
    b = failure_bound((40, 86), 4, 1, PRIME_LO, PRIME_HI, 49)
    assert b > 0.0
    assert primes_for(0.0, (40, 86), 4, 1, PRIME_LO, PRIME_HI) is None
    assert bad_primes_bound(1, 3, BLAS_PRIME_LO) == 0
    assert failure_bound((1, 1), 3, 1, BLAS_PRIME_LO, BLAS_PRIME_HI, 1) == 0


def test_certify_none_range_reaches_1e6_by_hand():
    """``--certify none``: the prime range is one whose ``MAX_PRIMES`` (8) draws bound the error by 1e-6 / 2.

    100 x 100 with entries below 2^2940: d = floor(100 (2940 + log2(10)) / 20) = 14716 BLAS primes of 73,586,
    0.19998 per draw.  The earlier rule took BLAS primes whenever one draw's bound was <= 1/4, and 8 of them
    leave ~0.2^8 = 2.6e-6 > 1e-6: a label not worth its name.  Word-size primes: d = floor(100 (2940 +
    log2(10)) / 30) = 9811 of 50,697,537, so two draws give 3.7e-8 <= 5e-7."""
    from exactident.linalg.montecarlo import MAX_PRIMES
    from exactident.ranks.montecarlo import LABEL_TARGET, label_range

    B = 2**2940
    assert LABEL_TARGET == 1e-6 and MAX_PRIMES == 8
    assert bad_primes_bound(100, B, BLAS_PRIME_LO) == 14716 and bad_primes_bound(100, B, PRIME_LO) == 9811
    blas8 = math.prod(14716 / (73586 - i) for i in range(8))
    assert failure_bound((100, 100), B, 1, BLAS_PRIME_LO, BLAS_PRIME_HI, 8) == pytest.approx(blas8, rel=1e-12)
    assert failure_bound((100, 100), B, 1, BLAS_PRIME_LO, BLAS_PRIME_HI, 1) <= 0.25 and blas8 > 1e-6
    assert label_range((100, 100), B, 1) == (PRIME_LO, PRIME_HI)
    word2 = 9811 / 50697537 * 9811 / 50697536
    assert word2 <= LABEL_TARGET / 2
    assert failure_bound((100, 100), B, 1, PRIME_LO, PRIME_HI, 2) == pytest.approx(word2, rel=1e-12)
    # small entries: BLAS primes reach it (d = floor(4 * 101 / 20) = 20: two draws, 7.4e-8)
    assert label_range((4, 4), 2**100, 1) == (BLAS_PRIME_LO, BLAS_PRIME_HI)


def _oracle_rank(path: str) -> int:
    """rank Gamma of a case by the independent oracle (Fraction backpropagation, sympy's rank over QQ): the
    full Jacobian's rank equals rank Gamma (a fixed edge's column is a combination of its neuron's others)."""
    import json

    from _jacobian_oracle import full_jacobian, network_from_json
    from sympy import QQ as Q

    with open(path) as fh:
        W, b, X = network_from_json(json.load(fh))
    J = full_jacobian(W, b, X, 0)
    return DomainMatrix([[Q(v.numerator, v.denominator) for v in r] for r in J], (len(J), len(J[0])), Q).rank()


SMALL_DEFICIENT = "cases/suite-v1/generic/generic-2x3x2-s1-000.json"  # an interval [9, 10] with verdict_first


def test_certify_none_labels_only_a_bound_below_1e6_else_certifies():
    """``certify="none"`` on a shipped rank-deficient case: the Monte Carlo rank is the oracle's with a proven
    bound <= 1e-6.  When no prime range can reach 1e-6 (forced here), the ranks are certified instead: no
    ``certified: false`` label, the oracle's rank, and the report verifies."""
    import exactident.ranks.montecarlo as rmc
    from exactident.check import check
    from exactident.io.case import load_case
    from exactident.verify.certificate import verify_certificate

    case, true_rank = load_case(SMALL_DEFICIENT), _oracle_rank(SMALL_DEFICIENT)
    assert true_rank < case.network.dim
    mc = check(case, numeric=False, certify="none").to_dict()
    assert mc["certified"] is False and 0 <= mc["error_probability"] <= 1e-6 and mc["rank_gamma"] == true_rank
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(rmc, "label_range", lambda *a, **k: None)
        r = check(case, numeric=False, certify="none")
    finally:
        mp.undo()
    d = r.to_dict()
    assert "certified" not in d and "error_probability" not in d and d["certificate"]["rank"]
    assert r.rank_gamma == true_rank and r.verdict == mc["verdict"]
    assert verify_certificate(case, d, require_claims=True)[0]


def test_default_closes_the_interval_of_a_shipped_case():
    """Issue 31, item 2 on a shipped case: ``verdict_first`` reports an interval; the default, the exact rank being
    cheap, reports the oracle's rank instead (no interval, no Monte Carlo value), with the same verdict."""
    from exactident.check import check
    from exactident.io.case import load_case

    case, true_rank = load_case(SMALL_DEFICIENT), _oracle_rank(SMALL_DEFICIENT)
    fast = check(case, numeric=False, verdict_first=True)
    lo, hi = fast.rank_gamma_interval
    assert lo <= true_rank <= hi and lo < hi
    assert fast.to_dict()["rank_gamma_interval_why"] == {"why": "verdict-first", "missing_vectors": hi - lo}
    r = check(case, numeric=False)
    assert (r.rank_gamma, r.rank_gamma_interval, r.montecarlo, r.verdict) == (true_rank, None, None, fast.verdict)
    assert "rank_gamma_interval_why" not in r.to_dict()
