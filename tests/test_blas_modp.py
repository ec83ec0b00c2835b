"""BLAS elimination mod p (exactident.linalg.blas_modp) against FLINT's nmod_mat, the reference.

Matrices of prescribed rank mod p are built as ``L U mod p`` with random ``L``
(``m x r``) and ``U`` (``r x n``), so their rank is at most ``r`` by construction;
FLINT's ``nmod_mat.rank`` / ``rref`` give the reference rank, pivots and reduced
kernel basis.  Unlucky primes: ``M = L U + p E`` has (generically) full rank over
Z but rank ``<= r`` mod p, the situation where a rank mod p is only a lower bound.
"""

from __future__ import annotations

import random

import flint
import numpy as np
import pytest

from exactident.errors import InvariantViolation
from exactident.linalg.blas_modp import (
    BLAS_PRIME_HI,
    BLAS_PRIME_LO,
    CHUNK,
    blas_primes,
    inverse_blas,
    matmul_blas,
    pivots_blas,
    rank_blas,
    rref_kernel_blas,
    sketch_rows,
    sketch_rows_sparse,
    to_symmetric,
)
from exactident.linalg.certified import certified_rank
from exactident.linalg.modular import rank_mod_p, rref_kernel_mod_p


def prescribed(rng: np.random.Generator, m: int, n: int, r: int, p: int) -> np.ndarray:
    if r == 0 or m == 0 or n == 0:
        return np.zeros((m, n), dtype=np.int64)
    L = rng.integers(0, p, (m, r))
    U = rng.integers(0, p, (r, n))
    A = (L @ U) % p if p < 2**21 else np.array((L.astype(object) @ U.astype(object)) % p, dtype=np.int64)
    if rng.random() < 0.3:  # zero columns and repeated rows: pivots that must be skipped
        A[:, rng.integers(0, n, max(1, n // 5))] = 0
        if m > 1:
            A[rng.integers(0, m)] = A[rng.integers(0, m)]
    return A.astype(np.int64)


@pytest.mark.parametrize("block", range(6))
def test_rank_pivots_and_kernel_agree_with_flint(block, monkeypatch):
    if block >= 4:  # the Schur-complement update in row blocks of a few rows: its seams are tested too
        from exactident.linalg import blas_modp

        monkeypatch.setattr(blas_modp, "_UPDATE_ENTRIES", 50)
        # and every reduction of more than 7 entries in row blocks (the large-array path of _reduce)
        monkeypatch.setattr(blas_modp, "_REDUCE_BLOCK", 7 if block == 5 else blas_modp._REDUCE_BLOCK)
    # 6 x 400 = 2400 random matrices of prescribed rank, small primes and p = 3 (many zero divisors
    # of pivots), shapes from empty to 70 x 70 (several recursion levels: the base case is 16 columns)
    rng = np.random.default_rng(block)
    prng = random.Random(block)
    for t in range(400):
        m, n = int(rng.integers(0, 71)), int(rng.integers(0, 71))
        p = [3, 5, 65537][t % 3] if t % 4 == 0 else blas_primes(1, rng=prng)[0]
        r = int(rng.integers(0, min(m, n) + 1)) if min(m, n) else 0
        A = prescribed(rng, m, n, r, p)
        expected = rank_mod_p(A, p)
        assert expected <= r
        assert rank_blas(A, p) == expected, (m, n, r, p)
        if m and n:
            pv, free, N = rref_kernel_blas(A, p)
            pv_f, free_f, N_f = rref_kernel_mod_p(A, p)
            assert (pv, free) == (pv_f, free_f)
            assert np.array_equal(N, N_f)
            # the kernel it describes is a kernel: A K = 0 mod p
            K = np.zeros((n, len(free)), dtype=object)
            for f_idx, f in enumerate(free):
                K[f, f_idx] = 1
                for j, c in enumerate(pv):
                    K[c, f_idx] = -int(N[j, f_idx])
            assert not ((A.astype(object) @ K) % p).any()


def test_unlucky_prime_forces_rank_down():
    # M = L U + p E: full rank over Z (E random), rank r mod p; BLAS and FLINT agree mod p,
    # a luckier prime sees the full rank, and the certified rank (exact) is never the low one.
    rng = np.random.default_rng(7)
    p = blas_primes(1, rng=random.Random(7))[0]
    for r in (0, 3, 9):
        L, U = rng.integers(0, p, (14, r)), rng.integers(0, p, (r, 12))
        M = (L @ U) % p + p * rng.integers(1, 4, (14, 12))
        assert rank_blas(M, p) == rank_mod_p(M, p) == r
        q = blas_primes(1, rng=random.Random(8), exclude=[p])[0]
        assert rank_blas(M, q) == rank_mod_p(M, q) == int(flint.fmpz_mat(M.tolist()).rank()) == 12

        def image(prime, M=M):
            return M % prime

        res = certified_rank(image, (14, 12), avoid=1, entry_bound=lambda M=M: int(np.abs(M).max()),
                             lower=(r, p, M % p), rng=random.Random(0), blas=True)
        assert res is None or res.rank == 12  # None: the caller falls back to exact elimination


def test_float_products_are_exact_over_long_chunks():
    # Worst case magnitudes: residues +-(p-1)/2 with the largest p, inner dimension past CHUNK
    p = 2097143  # the largest prime below 2**21
    assert flint.fmpz(p).is_prime() and p < BLAS_PRIME_HI
    k = CHUNK + 100
    A = np.full((2, k), (p - 1) // 2, dtype=np.int64)
    B = np.full((k, 3), -((p - 1) // 2), dtype=np.int64)
    got = matmul_blas(to_symmetric(A, p), to_symmetric(B, p), p)
    expected = (k * ((p - 1) // 2) * (-((p - 1) // 2))) % p
    assert all(int(v) % p == expected for v in got.ravel())


def test_inverse_and_guards():
    rng = np.random.default_rng(3)
    p = blas_primes(1, rng=random.Random(3))[0]
    while True:
        A = rng.integers(0, p, (40, 40))
        if rank_mod_p(A, p) == 40:
            break
    Ainv = inverse_blas(A, p)
    assert np.array_equal((A.astype(object) @ Ainv.astype(object)) % p, np.eye(40, dtype=object))
    with pytest.raises(InvariantViolation, match="singular mod p"):
        inverse_blas(np.array([[1, 2], [2, 4]]), 7)
    with pytest.raises(InvariantViolation, match="not a prime"):
        rank_blas(np.array([[1]]), 21)
    with pytest.raises(InvariantViolation, match="below 2\\*\\*21"):
        pivots_blas(np.array([[1]]), 2147483647)
    ps = blas_primes(20, rng=random.Random(0))
    assert len(set(ps)) == 20 and all(BLAS_PRIME_LO <= q < BLAS_PRIME_HI for q in ps)


def _flint_rank(A: np.ndarray, p: int) -> int:
    return flint.nmod_mat(A.shape[0], A.shape[1], [int(v) % p for v in A.ravel()], p).rank()


@pytest.mark.parametrize("r", [0, 7, 40])
def test_sketch_rows_of_a_row_subset_keeps_its_rank_and_row_space(r, monkeypatch):
    # A[rows] of known rank r (FLINT, independently), rows spanning several blocks of the sketch: the
    # sketch by k >= r + 16 random rows has rank r mod p and lies in the row space of A[rows]
    import exactident.linalg.blas_modp as blas_modp

    monkeypatch.setattr(blas_modp, "_SKETCH_ROWS", 64)  # block seams on a small matrix
    p = 1048573
    gen = np.random.default_rng(r)
    A = prescribed(gen, 400, 50, r, p)
    A[::2] = (A[::2] + p * gen.integers(-3, 4, A[::2].shape)) % (7 * p) - 3 * p  # any representatives
    rows = np.flatnonzero(gen.random(400) < 0.8)
    expected = _flint_rank(A[rows], p)
    A.setflags(write=False)  # read only: sketch_rows never writes into A
    S = sketch_rows(A, expected + 16, p, random.Random(r), rows=rows)
    assert S.dtype == np.int64 and S.min() >= 0 and S.max() < p
    assert _flint_rank(S, p) == expected
    assert _flint_rank(np.vstack([A[rows], S]), p) == expected


@pytest.mark.parametrize("seed", range(4))
def test_sparse_row_sketch_is_a_lower_bound_and_reaches_a_generic_rank(seed, monkeypatch):
    # R A for a sparse R: every row of the sketch is a combination of rows of A, so rank_p(sketch) <=
    # rank_p(A) and stacking it under A leaves the rank unchanged (FLINT, independently); with k = n + 16
    # buckets the rank of a tall L U (generic rows) is reached; the kept columns are A's columns ``cols``.
    # Two representations of A (int64 in [0, p), float64 symmetric), block seams (_SKETCH_ROWS = 64) and
    # A read only.
    import exactident.linalg.blas_modp as blas_modp

    monkeypatch.setattr(blas_modp, "_SKETCH_ROWS", 64)
    p = 1048573
    gen = np.random.default_rng(seed)
    r = int(gen.integers(5, 40))
    A = prescribed(gen, 900, 60, r, p)
    A[:, [3, 17]] = 0
    cols = np.array([c for c in range(60) if c not in (3, 17)])
    expected = _flint_rank(A, p)
    A.setflags(write=False)
    for image in (A, to_symmetric(A, p)):
        S = sketch_rows_sparse(image, 60 + 16, p, seed, cols=cols)
        assert blas_modp.nonzero_columns(image).tolist() == [c for c in range(60) if any(int(v) for v in A[:, c])]
        assert S.shape == (76, 58) and S.dtype == np.float64 and np.abs(S).max() <= p // 2
        assert (np.rint(S) == S).all()
        assert _flint_rank(S, p) == expected
        assert _flint_rank(np.vstack([A[:, cols], S]), p) == expected
    # a rank-1 A with few rows: the sketch cannot exceed it whatever the draw
    B = np.outer(np.arange(1, 11), np.arange(1, 5)) % p
    assert _flint_rank(sketch_rows_sparse(B, 8, p, seed), p) <= 1
    with pytest.raises(InvariantViolation):  # not residues: the float64 sums would not be exact
        sketch_rows_sparse(B + p, 8, p, seed)


def test_sketch_rows_makes_no_copy_of_the_rows_it_reads():
    # the rank stage's memory: sketching all but a few rows of a tall matrix allocates k x n plus one
    # row block, never another copy of A (tracemalloc counts numpy's buffers)
    import tracemalloc

    p = 1048573
    A = np.random.default_rng(0).integers(0, p, (20000, 100))
    rows = np.arange(16, 20000)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        sketch_rows(A, 40, p, random.Random(0), rows=rows)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < A.nbytes / 2


def test_lower_bound_of_a_very_tall_deficient_matrix_by_sample_and_sketch():
    # m > 2 n + 64 and the row sample misses rank: the sample and the sketch of the other rows are
    # eliminated as one float64 stack; the rank (FLINT over Z, independently) and the int64 image contract hold
    from exactident.linalg.lower_bound import modular_lower_bound

    gen = np.random.default_rng(5)
    L = gen.integers(-9, 10, (700, 25))
    L[:650, 20:] = 0  # most rows miss 5 directions: a random sample of n + 16 rows is likely deficient
    A = L @ gen.integers(-9, 10, (25, 40))
    expected = flint.fmpz_mat(A.tolist()).rank()
    r, p, image = modular_lower_bound(lambda q: A % q, avoid=1, rng=random.Random(3), stop_at=40, blas=True)
    assert r == expected == 25
    assert image.dtype == np.int64 and image.min() >= 0 and image.max() < p
    assert _flint_rank(image, p) == expected


@pytest.mark.parametrize("seed", range(4))
def test_lower_bound_of_a_very_tall_matrix_by_one_sparse_sketch(seed):
    # sparse_rows: one sparse sketch R A of n + 16 rows over 16 dense combinations, one elimination.  Its rank
    # never exceeds A's (FLINT over Z, independently) and, on these matrices, equals it; the image is n + 32 rows
    # (int64 in [0, p)) whose kernel is A's: A's kernel vectors (FLINT nullspace over Q) vanish on it mod p
    from exactident.linalg.lower_bound import modular_lower_bound

    gen = np.random.default_rng(seed)
    L = gen.integers(-9, 10, (900, 25))
    L[:850, 20:] = 0  # five directions only in the last 50 rows
    A = L @ gen.integers(-9, 10, (25, 40))
    expected = flint.fmpz_mat(A.tolist()).rank()
    r, p, image = modular_lower_bound(lambda q: A % q, avoid=1, rng=random.Random(seed), stop_at=40, blas=True,
                                      sparse_rows=True)
    assert r == expected == 25
    assert image.shape == (40 + 32, 40)
    assert image.dtype == np.int64 and image.min() >= 0 and image.max() < p
    assert _flint_rank(image, p) == expected
    K, nullity = flint.fmpz_mat(A.tolist()).nullspace()  # integer kernel columns (the first nullity)
    assert nullity == 40 - expected
    Kp = np.array([[int(K[i, j]) % p for j in range(nullity)] for i in range(40)], dtype=object)
    assert not (image.astype(object).dot(Kp) % p).any()
    # a full-column-rank very tall matrix: the sketch proves the column count and stops there
    B = gen.integers(-9, 10, (900, 40))
    assert modular_lower_bound(lambda q: B % q, avoid=1, rng=random.Random(seed), stop_at=40, blas=True,
                               sparse_rows=True)[0] == 40


def test_sparse_row_sketch_shortfall_made_up_by_the_dense_rows(monkeypatch):
    # a sparse sketch that misses everything (all zero, as if every bucket were unlucky): the 16 dense random
    # combinations under it still reach a rank of at most 16 (here 10, FLINT over Z); never above A's rank
    import exactident.linalg.lower_bound as lower_bound

    monkeypatch.setattr(lower_bound, "sketch_rows_sparse", lambda A, k, p, seed: np.zeros((k, A.shape[1])))
    gen = np.random.default_rng(11)
    A = gen.integers(-9, 10, (600, 10)) @ gen.integers(-9, 10, (10, 30))
    assert flint.fmpz_mat(A.tolist()).rank() == 10
    r, p, image = lower_bound.modular_lower_bound(lambda q: A % q, avoid=1, rng=random.Random(0), stop_at=30,
                                                  blas=True, sparse_rows=True)
    assert r == 10 and _flint_rank(image, p) == 10


@pytest.mark.parametrize("shape", [(1, 1), (5, 300), (900, 400), (1500, 1200)])
def test_rank_in_place_is_the_rank_and_leaves_the_residues(shape):
    """The lower bound's elimination of an int64 image in its own buffer (float64 view, row blocks) gives
    FLINT's rank mod p and leaves the same residues, in ``[0, p)``; any representative on entry (negative,
    above p), one block or many."""
    from exactident.linalg.lower_bound import _rank_in_place

    rng = np.random.default_rng(shape[0])
    p = blas_primes(1, rng=random.Random(shape[1]))[0]
    m, n = shape
    r = int(rng.integers(0, min(m, n) + 1))
    A = prescribed(rng, m, n, r, p) + p * rng.integers(-3, 4, (m, n))
    expected = rank_mod_p(A % p, p)  # FLINT
    want = A % p
    assert _rank_in_place(A, p) == expected
    assert A.dtype == np.int64 and np.array_equal(A, want)
