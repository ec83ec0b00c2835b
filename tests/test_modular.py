"""Modular ranks and their guards (exactident.linalg.modular).

Known-rank matrices are built in the style of FLINT's ``fmpq_mat/test/t-rref.c``:
start from ``r`` nonzero pivots (rank exactly ``r`` by construction), then
scramble with random elementary row and column operations (invertible, so the
rank is unchanged).  The expected rank comes from the construction, and FLINT's
exact elimination (``linalg.exact.rank``) is checked against it too.
"""

from __future__ import annotations

import random
from fractions import Fraction

import flint
import numpy as np
import pytest

from exactident.errors import InvariantViolation
from exactident.linalg import exact
from exactident.linalg.certified import certified_rank
from exactident.linalg.lower_bound import modular_lower_bound
from exactident.linalg.modular import (
    PRIME_HI,
    PRIME_LO,
    matmul_mod,
    random_primes,
    rank_mod_p,
    rational_reconstruction,
    require_prime,
    residues,
    rref_kernel_mod_p,
    to_nmod_mat,
)


def known_rank_matrix(rng: random.Random, m: int, n: int, r: int, ops: int = 60) -> list[list[int]]:
    """An integer ``m x n`` matrix of rank exactly ``r`` (pivots then elementary operations)."""
    A = [[0] * n for _ in range(m)]
    rows, cols = rng.sample(range(m), r), rng.sample(range(n), r)
    for i, j in zip(rows, cols):
        A[i][j] = rng.choice([-3, -2, -1, 1, 2, 3])
    for _ in range(ops):
        if rng.random() < 0.5 and m > 1:
            i, k = rng.sample(range(m), 2)
            c = rng.randint(-3, 3)
            A[i] = [a + c * b for a, b in zip(A[i], A[k])]
        elif n > 1:
            j, k = rng.sample(range(n), 2)
            c = rng.randint(-3, 3)
            for row in A:
                row[j] += c * row[k]
    return A


def _rational_image(M: list[list[Fraction]]):
    def image(p):
        return np.array([[v.numerator * pow(v.denominator, -1, p) % p for v in row] for row in M],
                        dtype=np.int64).reshape(len(M), len(M[0]) if M else 0)
    return image


def _bound(M):
    # |D M| for D = lcm of all denominators
    from math import lcm
    d = lcm(1, *(v.denominator for row in M for v in row))
    return max((abs(v * d) for row in M for v in row), default=0).__ceil__() + 1, d


@pytest.mark.parametrize("seed", range(12))
def test_known_rank_constructions(seed):
    rng = random.Random(seed)
    m, n = rng.randint(1, 9), rng.randint(1, 9)
    r = rng.randint(0, min(m, n))
    A = known_rank_matrix(rng, m, n, r)
    # Rational version: divide each row by a random denominator (same rank).
    dens = [rng.choice([1, 2, 3, 7, 12]) for _ in range(m)]
    Q = [[Fraction(a, d) for a in row] for row, d in zip(A, dens)]
    assert exact.rank(flint.fmpq_mat(m, n, [flint.fmpq(v.numerator, v.denominator) for row in Q for v in row])) == r
    for p in random_primes(3, rng=rng):
        assert rank_mod_p(np.array(A, dtype=np.int64) % p, p) <= r  # lower bound, always
    bound, d = _bound(Q)
    res = certified_rank(_rational_image(Q), (m, n), avoid=d, entry_bound=lambda: bound, rng=rng)
    assert res is not None and res.rank == r
    cert = res.certificate
    assert cert["rank"] == r and cert["lower"]["rank_mod_p"] == r
    if r < min(m, n):
        assert cert["upper"]["kind"] == "kernel" and len(cert["upper"]["kernel"]) == n - r
        # the kernel really is a kernel, over Q
        for col in cert["upper"]["kernel"]:
            v = {i: Fraction(s) for i, s in col}
            assert all(sum(row[i] * x for i, x in v.items()) == 0 for row in Q)
    else:
        assert cert["upper"]["kind"] == "shape"


def test_unlucky_prime_only_lowers_the_bound():
    # det = 1000003 * 1000033 kills the rank mod either prime, never over Q.
    p, q = 1000003, 1000033
    A = np.array([[p, 0], [0, q]], dtype=np.int64)
    assert rank_mod_p(A, p) == 1 and rank_mod_p(A, q) == 1
    assert exact.rank(flint.fmpz_mat([[p, 0], [0, q]])) == 2
    assert rank_mod_p(A, random_primes(1, rng=random.Random(0))[0]) == 2


def test_lower_bound_stops_when_it_reaches_the_target():
    calls = []

    def image(p):
        calls.append(p)
        return np.eye(3, dtype=np.int64)

    r, p, _ = modular_lower_bound(image, avoid=1, rng=random.Random(0), n_primes=5, stop_at=3)
    assert (r, len(calls), calls[0]) == (3, 1, p)


@pytest.mark.parametrize("modulus", [15, 2**30 + 1, 1, 0, 2, 2**31 + 11, -7])
def test_composite_or_out_of_range_modulus_is_refused(modulus):
    # FLINT would abort the whole process on a composite modulus: the guard must come first.
    with pytest.raises(InvariantViolation, match="is not a prime"):
        rank_mod_p(np.array([[1, 2], [3, 4]], dtype=np.int64), modulus)
    with pytest.raises(InvariantViolation, match="is not a prime"):
        to_nmod_mat(np.array([[1]], dtype=np.int64), modulus)
    with pytest.raises(InvariantViolation, match="is not a prime"):
        rref_kernel_mod_p(np.array([[1, 2]], dtype=np.int64), modulus)


def test_prime_dividing_a_denominator_is_refused():
    with pytest.raises(InvariantViolation, match="divides a denominator"):
        require_prime(13, avoid=26)
    with pytest.raises(InvariantViolation, match="divides a denominator"):
        residues([flint.fmpq(1, 13)], 13)
    assert residues([flint.fmpq(1, 13)], 11).tolist() == [6]  # 13 = 2 mod 11, 2 * 6 = 12 = 1


def test_random_primes_avoid_denominators():
    primes_100_140 = [101, 103, 107, 109, 113, 127, 131, 137, 139]
    avoid = 1
    for p in primes_100_140:
        if p not in (113, 127):
            avoid *= p
    for seed in range(20):
        got = random_primes(2, avoid=avoid, rng=random.Random(seed), lo=100, hi=140)
        assert sorted(got) == [113, 127]
    with pytest.raises(InvariantViolation, match="fewer than 3 usable primes"):
        random_primes(3, avoid=avoid, rng=random.Random(0), lo=100, hi=140)
    ps = random_primes(5, rng=random.Random(1))
    assert len(set(ps)) == 5 and all(PRIME_LO <= p < PRIME_HI and flint.fmpz(p).is_prime() for p in ps)


def test_matmul_mod_matches_big_integers():
    rng = np.random.default_rng(0)
    p = 2147483647  # 2**31 - 1: naive int64 sums of products would overflow
    A = rng.integers(0, p, size=(7, 900), dtype=np.int64)
    B = rng.integers(0, p, size=(900, 5), dtype=np.int64)
    want = [[sum(int(a) * int(b) for a, b in zip(A[i], B[:, j])) % p for j in range(5)] for i in range(7)]
    assert matmul_mod(A, B, p).tolist() == want


@pytest.mark.parametrize("u,v", [(0, 1), (-3, 7), (22, 7), (1, 1000), (-999, 1001)])
def test_rational_reconstruction(u, v):
    m = 1000003 * 1000033
    assert rational_reconstruction(u * pow(v, -1, m) % m, m) == (u, v)


def test_rational_reconstruction_fails_when_modulus_too_small():
    m = 101
    a = 12345 * pow(67891, -1, m) % m
    assert rational_reconstruction(a, m) != (12345, 67891)


def test_empty_matrices():
    p = random_primes(1, rng=random.Random(0))[0]
    assert rank_mod_p(np.zeros((0, 5), dtype=np.int64), p) == 0
    assert rank_mod_p(np.zeros((5, 0), dtype=np.int64), p) == 0
    res = certified_rank(lambda q: np.zeros((0, 3), dtype=np.int64), (0, 3), avoid=1, entry_bound=lambda: 1)
    assert res is not None and res.rank == 0
