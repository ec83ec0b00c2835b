"""Both linear-algebra backends (``linalg/exact.py`` over Q, ``linalg/floating.py`` float64) from one table.

Matrices of *known* rank are built in the spirit of FLINT's ``t-rref.c``: an
``r x n`` block in echelon form with unit pivots (rank exactly ``r`` by
construction) padded with zero rows, then scrambled by random elementary row
operations (swaps, ``row_i += c row_j``), which preserve rank and kernel.
The rank is therefore known from the construction, not from any rank routine.
"""

from __future__ import annotations

import random
from fractions import Fraction

import flint
import numpy as np
import pytest

from exactident.linalg import exact, floating


def known_rank_matrix(m: int, n: int, r: int, seed: int) -> list[list[int]]:
    """An ``m x n`` integer matrix of rank exactly ``r`` (``r <= min(m, n)``)."""
    rng = random.Random(seed)
    pivots = sorted(rng.sample(range(n), r))
    rows = []
    for _t, p in enumerate(pivots):
        row = [0] * n
        row[p] = 1
        for c in range(p + 1, n):
            row[c] = rng.randint(-3, 3)
        rows.append(row)
    rows += [[0] * n for _ in range(m - r)]
    for _ in range(3 * m):
        i, j = rng.randrange(m), rng.randrange(m)
        if i == j:
            continue
        if rng.random() < 0.3:
            rows[i], rows[j] = rows[j], rows[i]
        else:
            c = rng.choice([-2, -1, 1, 2])
            rows[i] = [a + c * b for a, b in zip(rows[i], rows[j])]
    return rows


class Exact:
    name = "exact"

    @staticmethod
    def matrix(rows, m, n, scale=None):
        entries = [flint.fmpq(v) for row in rows for v in row]
        if scale:  # divide each row by a different integer: same rank and kernel, rational entries
            entries = [e / scale[k // n] for k, e in enumerate(entries)] if n else entries
        return flint.fmpq_mat(m, n, entries)

    @staticmethod
    def rank(M) -> int:
        return exact.rank(M)

    @staticmethod
    def check_nullspace(M, r):
        K = exact.nullspace(M)
        n = M.ncols()
        assert (K.nrows(), K.ncols()) == (n, n - r)
        assert flint.fmpq_mat(M.nrows(), n - r) == M * K  # exactly zero
        assert exact.rank(K) == n - r                       # full column rank


class Float:
    name = "float"

    @staticmethod
    def matrix(rows, m, n, scale=None):
        A = np.array(rows, dtype=float).reshape(m, n)
        if scale:
            A = A / np.array(scale, dtype=float)[:, None]
        return A

    @staticmethod
    def rank(M) -> int:
        return floating.rank(M).rank

    @staticmethod
    def check_nullspace(M, r):
        K = floating.nullspace(M)
        n = M.shape[1]
        assert K.shape == (n, n - r)
        if n - r and M.size:
            assert np.abs(M @ K).max() <= 1e-10 * max(1.0, np.abs(M).max())
        assert np.allclose(K.T @ K, np.eye(n - r), atol=1e-10)  # orthonormal, so full rank


BACKENDS = [Exact, Float]
SHAPES = [(1, 1, 1), (1, 1, 0), (3, 3, 3), (3, 3, 2), (4, 6, 2), (6, 4, 4), (6, 4, 1), (7, 7, 0),
          (8, 5, 3), (5, 9, 5), (10, 10, 9), (12, 7, 6), (3, 15, 2)]


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize("m,n,r", SHAPES, ids=[f"{m}x{n}r{r}" for m, n, r in SHAPES])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_known_rank(backend, m, n, r, seed):
    rows = known_rank_matrix(m, n, r, seed)
    M = backend.matrix(rows, m, n)
    assert backend.rank(M) == r
    backend.check_nullspace(M, r)
    scaled = backend.matrix(rows, m, n, scale=[(i % 5) + 1 for i in range(m)])
    assert backend.rank(scaled) == r
    backend.check_nullspace(scaled, r)


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize("m,n", [(0, 4), (4, 0), (0, 0)])
def test_empty_matrices(backend, m, n):
    M = backend.matrix([], m, n)
    assert backend.rank(M) == 0
    backend.check_nullspace(M, 0)


def test_exact_nullspace_of_no_rows_is_the_identity():
    K = exact.nullspace(flint.fmpq_mat(0, 3))
    assert flint.fmpq_mat([[1, 0, 0], [0, 1, 0], [0, 0, 1]]) == K
    assert np.array_equal(floating.nullspace(np.zeros((0, 3))), np.eye(3))


def test_exact_accepts_fmpz_mat_and_huge_entries():
    big = 10**60
    Z = flint.fmpz_mat([[big, 1], [2 * big, 2], [1, 0]])
    assert exact.rank(Z) == 2
    M = flint.fmpq_mat([[flint.fmpq(1, big), 1], [flint.fmpq(2, big), 2]])
    assert exact.rank(M) == 1
    K = exact.nullspace(M)
    assert K.ncols() == 1 and flint.fmpq_mat(2, 1) == M * K


def test_to_integer_rows_keeps_kernel():
    M = flint.fmpq_mat([[flint.fmpq(1, 2), flint.fmpq(1, 3)], [flint.fmpq(-2, 7), 5]])
    Z = exact.to_integer_rows(M)
    assert flint.fmpz_mat([[3, 2], [-2, 35]]) == Z  # rows times lcm 6 and 7


def test_exact_sees_what_float_misses():
    """[[1, 1], [1, 1 + 2^-60]] has rank 2 over Q; in float64 1 + 2^-60 == 1."""
    eps = Fraction(1, 2**60)
    M = flint.fmpq_mat([[1, 1], [1, flint.fmpq(eps.numerator + eps.denominator, eps.denominator)]])
    assert exact.rank(M) == 2
    assert floating.rank(np.array([[1.0, 1.0], [1.0, 1.0 + 2.0**-60]])).rank == 1


def test_float_tolerances():
    M = np.diag([1.0, 1e-3, 1e-9])
    default = floating.rank(M)
    assert default.rank == 3 and default.tol == pytest.approx(1.0 * 3 * np.finfo(float).eps)
    assert floating.rank(M, tol=1e-6).rank == 2 and floating.rank(M, tol=1e-6).tol == 1e-6
    r = floating.rank(M, rtol=1e-2)
    assert r.rank == 1 and r.tol == pytest.approx(1e-2)
    assert floating.rank(M, tol=1e-6, rtol=0.5).rank == 2  # tol wins over rtol
    assert list(default.singular_values) == [1.0, 1e-3, 1e-9]
    assert floating.rank(M, tol=1e-6).near_cut(1) == [1e-3, 1e-9]
    assert floating.nullspace(M, tol=1e-6).shape == (3, 1)
