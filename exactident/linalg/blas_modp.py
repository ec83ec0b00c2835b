"""Ranks, pivots and kernels mod a prime below ``2**21`` by BLAS (float64) elimination.

Why float64: a residue in symmetric form has ``|x| <= 2**20``, so a product is
at most ``2**40`` and a dot product of up to :data:`CHUNK` ``= 4096`` terms is an
integer below ``2**52``: float64 holds every partial sum exactly, *whatever
order* BLAS adds in, so ``A @ B`` followed by one reduction is ``A B mod p``
exactly.  Elimination is recursive over columns, so almost all the work is
such products (the classic recursive LU/PLE schedule):

    pivots(A[:, :h]) -> rows R1, columns C1, G1 = A[R1, C1]^-1
    S = A[others, h:] - A[others, C1] (G1 A[R1, h:])        (Schur complement)
    pivots(S)        -> rows R2, columns C2, G2 = S[R2, C2]^-1

and ``A[R, C]^-1`` is assembled from ``G1, G2`` by the block-inverse formula.
The pivot columns are the greedy ones (a column is a pivot iff it is not in
the span of the columns before it), which are the pivot columns of the reduced
echelon form, so :func:`rref_kernel_blas` returns exactly what FLINT's
``nmod_mat.rref`` gives (:func:`exactident.linalg.modular.rref_kernel_mod_p`),
which is the reference it is tested against.

A rank mod a prime dividing no denominator of the data is a lower bound on the
rank over Q (a minor nonzero mod p is nonzero); the small primes used here are
unlucky (rank drops) more often than word-size ones, which costs time (a later
prime or a different bound), never correctness.

Imports nothing from the package but :mod:`exactident.linalg.modular` (prime guards) and :mod:`exactident.errors`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np

from exactident.errors import InvariantViolation
from exactident.linalg.draws import Draws
from exactident.linalg.modular import random_primes, require_prime

__all__ = ["BLAS_PRIME_HI", "BLAS_PRIME_LO", "CHUNK", "blas_primes", "inverse_blas", "matmul_blas", "nonzero_columns",
           "pivots_blas", "rank_blas", "rref_kernel_blas", "sketch_columns_sparse", "sketch_rows", "sketch_rows_sparse",
           "symmetric_rows", "to_symmetric"]

#: Primes for BLAS elimination are drawn from ``[BLAS_PRIME_LO, BLAS_PRIME_HI)``.
BLAS_PRIME_LO = 2**20
#: Upper end (excluded) of the BLAS prime range.
BLAS_PRIME_HI = 2**21
#: Longest exact float64 dot product of symmetric residues: ``CHUNK * 2**40 <= 2**52``.
CHUNK = 4096
#: Below this many columns the elimination is unblocked (numpy row operations).
_BASE = 16


def blas_primes(count: int, avoid: int = 1, rng: random.Random | None = None,
                exclude: Sequence[int] = ()) -> list[int]:
    """``count`` distinct random primes in ``[2**20, 2**21)`` not dividing ``avoid``.

    Examples
    --------
    >>> ps = blas_primes(3, avoid=6, rng=random.Random(0))
    >>> all(2**20 <= p < 2**21 for p in ps), len(set(ps))
    (True, 3)
    """
    return random_primes(count, avoid, rng, exclude=exclude, lo=BLAS_PRIME_LO, hi=BLAS_PRIME_HI)


def _check_prime(p: int) -> int:
    p = require_prime(p)
    if p >= BLAS_PRIME_HI:
        raise InvariantViolation(f"BLAS elimination needs a prime below 2**21, got {p}")
    return p


#: Entries reduced at a time by :func:`_reduce` (its temporary: 2 MB of float64, not a copy of a large ``x``).
_REDUCE_BLOCK = 1 << 18


def _reduce(x: np.ndarray, p: int) -> np.ndarray:
    """Symmetric residues in place: ``x - p round(x / p)``, ``|result| <= (p + 1) / 2``.

    ``x`` holds integers below ``2**53`` in magnitude; the float quotient is off by
    less than ``2**-19``, so ``round`` can only pick the other neighbour when
    ``x mod p`` is next to ``p / 2``: the residue is still exact and below ``2**20``.
    """
    if x.size > _REDUCE_BLOCK and x.shape[0] > 1:
        step = max(1, _REDUCE_BLOCK * x.shape[0] // x.size)
        for s in range(0, x.shape[0], step):
            _reduce(x[s:s + step], p)
        return x
    q = x * (1.0 / p)
    np.rint(q, out=q)  # in place: one temporary the size of x, not three
    q *= p
    x -= q
    return x


def to_symmetric(A: np.ndarray, p: int) -> np.ndarray:
    """Integer residues (any int64 or float64 integers) as float64 symmetric residues mod p.

    Examples
    --------
    >>> to_symmetric(np.array([[0, 1, 6, -8]]), 7).tolist()
    [[0.0, 1.0, -1.0, -1.0]]
    """
    if A.dtype.kind == "f":
        return _reduce(A.astype(np.float64, copy=True), p)
    if A.size and A.dtype == np.int64 and A.min() > -(2**52) and A.max() < 2**52:
        # exact as float64: one copy (a wide Gamma mod p is large), reduced in place
        return _reduce(A.astype(np.float64), p)
    B = np.asarray(A, dtype=np.int64) % p
    out = B.astype(np.float64)
    out[p // 2 < B] -= p
    return out


def symmetric_rows(A: np.ndarray, rows: Sequence[int] | np.ndarray, p: int, out: np.ndarray) -> np.ndarray:
    """``A[rows]`` as float64 symmetric residues mod p, written into ``out`` (shape ``(len(rows), n)``).

    Copied in blocks of rows, so no full int64 copy of ``A[rows]`` is made beside ``out``; ``A``
    (integer residues below ``2**52`` in magnitude, or float64 symmetric residues) is left unchanged.

    Examples
    --------
    >>> out = np.empty((2, 2)); symmetric_rows(np.array([[6, 1], [0, 0], [8, 3]]), [0, 2], 7, out).tolist()
    [[-1.0, 1.0], [1.0, 3.0]]
    """
    index = np.asarray(rows, dtype=np.int64)
    for s in range(0, len(index), _SKETCH_ROWS):
        out[s:s + _SKETCH_ROWS] = A[index[s:s + _SKETCH_ROWS]]
        _reduce(out[s:s + _SKETCH_ROWS], p)
    return out


def matmul_blas(A: np.ndarray, B: np.ndarray, p: int) -> np.ndarray:
    """``A @ B mod p`` for float64 symmetric residues (``|entries| <= 2**20``), symmetric result.

    The inner dimension is cut into chunks of :data:`CHUNK`, each product exact in float64.

    Examples
    --------
    >>> p = 1048583
    >>> A = to_symmetric(np.array([[p - 1, 2]]), p); B = to_symmetric(np.array([[3], [p - 5]]), p)
    >>> int(matmul_blas(A, B, p)[0, 0] % p) == (-3 - 10) % p
    True
    """
    k = A.shape[1]
    if k <= CHUNK:
        return _reduce(A @ B, p)
    out = np.zeros((A.shape[0], B.shape[1]))
    for s in range(0, k, CHUNK):
        out += _reduce(A[:, s:s + CHUNK] @ B[s:s + CHUNK], p)
        _reduce(out, p)
    return out


def _inv_small(B: np.ndarray, p: int) -> np.ndarray:
    """Inverse of a small nonsingular matrix mod p (Gauss-Jordan with numpy rows)."""
    k = B.shape[0]
    M = np.concatenate([B % p, np.eye(k)], axis=1)
    for j in range(k):
        nz = np.flatnonzero(M[j:, j])
        if nz.size == 0:
            raise InvariantViolation("pivot block is singular mod p")
        i = j + int(nz[0])
        if i != j:
            M[[i, j]] = M[[j, i]]
        M[j] = (M[j] * pow(int(M[j, j]), -1, p)) % p
        f = M[:, j].copy()
        f[j] = 0
        M -= np.outer(f, M[j])
        M %= p
    return _reduce(M[:, k:], p)


def _base(A: np.ndarray, p: int, need_inv: bool):
    """Unblocked greedy pivots of a narrow matrix (columns left to right, pivot rows moved up)."""
    T = A.copy()
    perm = np.arange(T.shape[0])
    m = T.shape[0]
    k = 0
    cols: list[int] = []
    for j in range(T.shape[1]):
        if k == m:
            break
        col = _reduce(T[k:, j].copy(), p)  # the block is reduced lazily: test residues
        T[k:, j] = col
        nz = np.flatnonzero(col)
        if nz.size == 0:
            continue
        i = k + int(nz[0])
        if i != k:
            T[[k, i]] = T[[i, k]]
            perm[[k, i]] = perm[[i, k]]
        cols.append(j)
        if k + 1 < m:
            # Delayed reduction: the block grows by <= 2**40 a step (<= _BASE steps, far below
            # 2**53); only the column and the pivot row that enter a product are reduced.
            piv = _reduce(T[k, j:].copy(), p)
            f = T[k + 1:, j] * float(pow(int(piv[0]) % p, -1, p))
            _reduce(f, p)
            T[k + 1:, j:] -= np.outer(f, piv)
        k += 1
    rows = [int(r) for r in perm[:k]]
    G = _inv_small(A[np.ix_(rows, cols)], p) if need_inv and rows else None
    return rows, cols, G


#: Entries of a row block of the Schur-complement update in :func:`_pivots` (8 MB of float64, at ``A``'s width).
_UPDATE_ENTRIES = 1 << 20


def _pivots(A: np.ndarray, p: int, need_inv: bool):
    m, w = A.shape
    if m == 0 or w == 0:
        return [], [], (np.zeros((0, 0)) if need_inv else None)
    if w <= _BASE:
        G = None
        rows, cols, G = _base(A, p, need_inv)
        if need_inv and G is None:
            G = np.zeros((0, 0))
        return rows, cols, G
    h = w // 2
    R1, C1, G1 = _pivots(A[:, :h], p, True)
    if not R1:
        R2, C2, G2 = _pivots(A[:, h:], p, need_inv)
        return R2, [h + c for c in C2], G2
    others = np.ones(m, dtype=bool)
    others[R1] = False
    oidx = np.flatnonzero(others)
    A_R1 = A[R1, h:]  # the right half only: the left one is not read again
    Y = matmul_blas(G1, A_R1, p)  # G1 A[R1, h:], k1 x (w - h)
    # Only the right half of the other rows is copied (not all of A[oidx]); the update runs in row
    # blocks so its temporaries stay small: peak memory about A plus half of A.
    S = A[oidx, h:]
    step = max(1, _UPDATE_ENTRIES // max(1, w))
    for s0 in range(0, S.shape[0], step):
        A_oC1 = A[oidx[s0:s0 + step]][:, C1] if len(C1) > 0.5 * h else A[np.ix_(oidx[s0:s0 + step], C1)]
        if len(C1) <= CHUNK:  # one exact product (< 2**52), one reduction
            S[s0:s0 + step] -= A_oC1 @ Y
        else:
            S[s0:s0 + step] -= matmul_blas(A_oC1, Y, p)
        _reduce(S[s0:s0 + step], p)
    R2s, C2s, G2 = _pivots(S, p, need_inv)
    R = list(R1) + [int(oidx[i]) for i in R2s]
    C = list(C1) + [h + c for c in C2s]
    if not need_inv:
        return R, C, None
    if not R2s:
        return R, C, G1
    # B = [[A11, A12], [A21, A22]] = A[R, C]; Schur complement A22 - A21 G1 A12 = S[R2s, C2s], inverse G2.
    A12 = A_R1[:, C2s]
    A21 = A[np.ix_(oidx[R2s], C1)]
    G1A12 = matmul_blas(G1, A12, p)             # k1 x k2
    A21G1 = matmul_blas(A21, G1, p)             # k2 x k1
    top_right = -matmul_blas(G1A12, G2, p)      # -G1 A12 G2
    bottom_left = -matmul_blas(G2, A21G1, p)    # -G2 A21 G1
    top_left = G1 - matmul_blas(top_right, A21G1, p)  # G1 + G1 A12 G2 A21 G1
    G = np.block([[_reduce(top_left, p), top_right], [bottom_left, G2]])
    return R, C, G


def pivots_blas(A: np.ndarray, p: int, need_inv: bool = False) -> tuple[list[int], list[int], np.ndarray | None]:
    """Pivot rows ``R``, greedy pivot columns ``C`` and optionally ``A[R, C]^-1`` mod p.

    Parameters
    ----------
    A : numpy.ndarray, shape (m, n)
        Integer residues (int64, any representative) or float64 symmetric residues.
    p : int
        A prime in ``[3, 2**21)``.
    need_inv : bool
        Also return ``A[R, C]^-1`` (float64 symmetric residues, rows indexed like ``C``,
        columns like ``R``).

    Returns
    -------
    R, C, G
        ``len(R) = len(C) = rank_p(A)``; ``C`` increasing.

    Raises
    ------
    InvariantViolation
        If ``p`` is not a prime below ``2**21``.
    """
    _check_prime(p)
    F = to_symmetric(A, p) if A.dtype.kind != "f" else A
    return _pivots(F, p, need_inv)


def rank_blas(A: np.ndarray, p: int) -> int:
    """Rank of an integer matrix over Z/pZ, ``p < 2**21`` prime (a lower bound for the rank over Q).

    Examples
    --------
    >>> rank_blas(np.array([[1, 2], [3, 6]]), 7), rank_blas(np.zeros((0, 3), dtype=np.int64), 7)
    (1, 0)
    >>> rank_blas(np.array([[1]]), 15)
    Traceback (most recent call last):
    ...
    exactident.errors.InvariantViolation: modulus 15 is not a prime in [3, 2**31)
    >>> rank_blas(np.array([[1]]), 2147483647)
    Traceback (most recent call last):
    ...
    exactident.errors.InvariantViolation: BLAS elimination needs a prime below 2**21, got 2147483647
    """
    return len(pivots_blas(A, p)[0])


def inverse_blas(A: np.ndarray, p: int) -> np.ndarray:
    """Inverse of a square matrix mod p (int64 in ``[0, p)``).

    Raises
    ------
    InvariantViolation
        If ``A`` is singular mod p.

    Examples
    --------
    >>> inverse_blas(np.array([[2, 0], [0, 3]]), 7).tolist()
    [[4, 0], [0, 5]]
    """
    R, C, G = pivots_blas(A, p, need_inv=True)
    if len(R) != A.shape[0] or A.shape[0] != A.shape[1]:
        raise InvariantViolation("matrix is singular mod p")
    assert G is not None
    out = np.zeros(A.shape)
    out[np.ix_(C, R)] = G  # G rows follow C, columns follow R
    return out.astype(np.int64) % p


def rref_kernel_blas(A: np.ndarray, p: int) -> tuple[list[int], list[int], np.ndarray]:
    """Same output as :func:`exactident.linalg.modular.rref_kernel_mod_p`, by BLAS elimination.

    Returns
    -------
    pivots, free : list of int
    N : int64 array, shape ``(len(pivots), len(free))``, entries in ``[0, p)``
        ``N = A[R, pivots]^-1 A[R, free]`` (the free columns of the reduced
        echelon form): kernel vector ``f`` is 1 at ``free[f]`` and ``-N[:, f]``
        at ``pivots``.

    Examples
    --------
    >>> rref_kernel_blas(np.array([[1, 2, 3], [2, 4, 7]]), 11)
    ([0, 2], [1], array([[2],
           [0]]))
    """
    _m, n = A.shape
    R, C, G = pivots_blas(A, p, need_inv=True)
    cset = set(C)
    free = [c for c in range(n) if c not in cset]
    if not C:
        return [], free, np.zeros((0, len(free)), dtype=np.int64)
    F = to_symmetric(A, p) if A.dtype.kind != "f" else A
    assert G is not None
    N = matmul_blas(G, F[np.ix_(R, free)], p) if free else np.zeros((len(C), 0))
    return C, free, N.astype(np.int64) % p


def sketch_rows(A: np.ndarray, k: int, p: int, rng: random.Random, rows: np.ndarray | None = None) -> np.ndarray:
    """``R A[rows] mod p`` for a random ``k x len(rows)`` matrix ``R`` (int64 residues in ``[0, p)``).

    ``rank_p(R A) <= rank_p(A)`` always (a lower bound stays a lower bound); equality
    holds unless ``R`` is unlucky, with probability at most about ``rank / p``.

    Parameters
    ----------
    A : numpy.ndarray, shape (m, n)
        Integer residues (int64, any representative) or float64 symmetric residues; left unchanged.
    k : int
        Rows of the sketch.
    p : int
        A prime in ``[3, 2**21)``.
    rng : random.Random
        Seeds ``R``.
    rows : int array, optional
        The rows of ``A`` sketched (default: all).  ``A[rows]`` is never copied: ``A`` is read in
        blocks of ``_SKETCH_ROWS`` (1024) rows, each turned into float64 symmetric residues and
        multiplied by its block of ``R``, so the memory beside ``A`` is ``k x n`` plus one block
        (a tall ``Gamma mod p`` is the largest array of the rank stage; no second copy of it).

    Examples
    --------
    >>> A = np.array([[1, 2], [2, 4], [3, 6], [1, 0]] * 3)
    >>> rank_blas(sketch_rows(A, 3, 1048583, random.Random(0)), 1048583)
    2
    >>> rank_blas(sketch_rows(A, 3, 1048583, random.Random(0), rows=np.arange(3)), 1048583)
    1
    """
    _check_prime(p)
    gen = Draws(rng.getrandbits(64))
    index = np.arange(A.shape[0]) if rows is None else np.asarray(rows, dtype=np.int64)
    out = np.zeros((k, A.shape[1]))
    # each block product has at most _SKETCH_ROWS <= CHUNK terms below 2**40: exact in float64
    for s in range(0, len(index), _SKETCH_ROWS):
        block = index[s:s + _SKETCH_ROWS]
        R = gen.integers(-(p // 2), p // 2 + 1, (k, len(block))).astype(np.float64)  # symmetric residues
        F = to_symmetric(A[block], p)
        out += _reduce(R @ F, p)
        _reduce(out, p)
    return out.astype(np.int64) % p


#: Rows of ``A`` per block of :func:`sketch_rows` (at most :data:`CHUNK`, so each product is exact).
_SKETCH_ROWS = 1024


def sketch_rows_sparse(A: np.ndarray, k: int, p: int, seed: int, cols: np.ndarray | None = None,
                       hashes: int = 2) -> np.ndarray:
    """``R A[:, cols] mod p`` for a sparse random ``k x m`` matrix ``R``: each row of ``A`` added, times a random
    nonzero coefficient, into ``hashes`` rows of the result (float64 symmetric residues, shape ``(k, len(cols))``).

    ``rank_p(R A) <= rank_p(A)`` whatever ``R`` is (its rows combine rows of ``A``): a lower bound on ``rank_p(A)``
    for ``hashes`` passes over ``A`` (no ``k x m x n`` product, unlike :func:`sketch_rows`).  Each pass shuffles the
    rows (``seed``) into ``k`` buckets of ``m / k`` rows; two passes, not one, kept the rank at ``rank_p(A)`` on
    digits 64-48-10 (17970 rows, 3434 buckets) for every seed tried.  ``A`` (residues ``|x| < p``, int64 or
    float64) is read in blocks of ``_SKETCH_ROWS`` rows, unchanged; ``cols`` (default: all) are the columns kept.

    Raises
    ------
    InvariantViolation
        If ``p`` is not a prime below ``2**21``, or an entry of ``A`` is not below ``p`` in magnitude (the
        float64 sums would not be exact).

    Examples
    --------
    >>> A = np.array([[1, 2, 0], [2, 4, 0], [3, 6, 0], [1, 0, 0]] * 3)
    >>> S = sketch_rows_sparse(A, 6, 1048583, 0, cols=np.array([0, 1]))
    >>> S.shape, rank_blas(S, 1048583)
    ((6, 2), 2)
    """
    _check_prime(p)
    if A.size and (A.min() <= -p or A.max() >= p):
        raise InvariantViolation(f"sketch_rows_sparse needs residues below {p} in magnitude")
    m, gen = A.shape[0], Draws(seed)
    out, buf = np.zeros((k, A.shape[1])), np.empty((min(_SKETCH_ROWS, k), A.shape[1]))
    for _ in range(hashes):  # each pass: row perm[c k + t] goes to row t of the result (buckets of m / k rows)
        perm = gen.permutation(m)
        coef = np.asarray(gen.integers(1, p, size=m), dtype=np.float64)
        for c0 in range(0, m, k):
            for s in range(c0, min(c0 + k, m), _SKETCH_ROWS):
                rows = perm[s:min(s + _SKETCH_ROWS, c0 + k, m)]
                # exact: |x| < p < 2**21 times coefficients below 2**21, at most 1000 summed: below 2**52
                np.multiply(A[rows], coef[rows, None], out=buf[:len(rows)])
                out[s - c0:s - c0 + len(rows)] += buf[:len(rows)]
            if (c0 // k) % 1000 == 999:
                _reduce(out, p)
        _reduce(out, p)
    return out if cols is None else out[:, cols]


def nonzero_columns(A: np.ndarray) -> np.ndarray:
    """Indices of the columns of ``A`` with a nonzero entry, read in row blocks (no ``m x n`` mask).

    Examples
    --------
    >>> nonzero_columns(np.array([[0, 1, 0], [0, 0, 2]])).tolist()
    [1, 2]
    """
    live = np.zeros(A.shape[1], dtype=bool)
    for s in range(0, A.shape[0], _SKETCH_ROWS):
        live |= A[s:s + _SKETCH_ROWS].any(axis=0)
    return np.flatnonzero(live)


def sketch_columns_sparse(A: np.ndarray, k: int, p: int, seed: int, hashes: int = 2) -> np.ndarray:
    """``A R mod p`` for a sparse random ``n x k`` matrix ``R``: each column of ``A`` added, times a random
    nonzero coefficient, into ``hashes`` random columns of the result (int64 residues in ``[0, p)``).

    ``rank_p(A R) <= rank_p(A)`` whatever ``R`` is (a lower bound stays a lower bound). The cost is
    ``hashes`` passes over ``A`` (no ``m x n x k`` product); unlike a random subset of columns, every
    column of ``A`` contributes, so columns that are a small share of ``A`` (e.g. those of the later
    layers of a network, next to the many of the first layer) are not missed.

    Examples
    --------
    >>> A = np.array([[1, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 1]])
    >>> rank_blas(sketch_columns_sparse(A, 2, 1048583, 0), 1048583)
    2
    """
    _check_prime(p)
    m, n = A.shape
    gen = Draws(seed)
    A = np.asarray(A, dtype=np.int64) % p
    out = np.zeros((m, k), dtype=np.int64)
    for _ in range(hashes):
        target = np.asarray(gen.integers(0, k, size=n), dtype=np.int64)
        coef = np.asarray(gen.integers(1, p, size=n), dtype=np.int64)
        order = np.argsort(target, kind="stable")
        starts = np.searchsorted(target[order], np.arange(k))
        scaled = (A[:, order] * coef[order]) % p  # below 2**21 each: sums of n of them fit in int64
        empty = np.diff(np.append(starts, n)) == 0
        sums = np.add.reduceat(scaled, np.minimum(starts, n - 1), axis=1) if n else np.zeros((m, k), np.int64)
        sums[:, empty] = 0  # reduceat gives an element, not 0, for an empty group
        out = (out + sums) % p
    return out
