"""Lower bounds on the rank of a rational matrix known through its images mod p.

``rank_p(M) <= rank_Q(M)`` for every prime ``p`` not dividing a denominator, and
``rank_p(M S) <= rank_p(M)`` for any ``S``: the best rank over a few random primes, of the
matrix or of a cheaper sketch of it (random rows of a tall matrix, a column sketch of a wide
one), is a certified lower bound.  Used by :func:`exactident.linalg.certified.certified_rank`
and the engine's rank search (:mod:`exactident.ranks.certify`).
"""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np

from exactident.linalg.blas_modp import (
    BLAS_PRIME_HI,
    BLAS_PRIME_LO,
    blas_primes,
    rank_blas,
    sketch_columns_sparse,
    sketch_rows,
    sketch_rows_sparse,
    symmetric_rows,
)
from exactident.linalg.modular import PRIME_HI, PRIME_LO, random_primes, rank_mod_p
from exactident.linalg.montecarlo import uniform_prime, very_tall

__all__ = ["modular_lower_bound"]


def modular_lower_bound(image_mod_p: Callable[[int], np.ndarray], *, avoid: int,
                        rng: random.Random | None = None, n_primes: int = 1,
                        stop_at: int | None = None, blas: bool = False,
                        sketch: Callable[[int, int], np.ndarray] | None = None,
                        shape: tuple[int, int] | None = None,
                        uniform: bool = False, short: bool = False,
                        sparse_rows: bool = False, row_sketch: Callable[[int, int], np.ndarray] | None = None
                        ) -> tuple[int, int, np.ndarray | None]:
    """Best rank mod p over up to ``n_primes`` random primes: a lower bound on the rank over Q.

    Stops at the first prime whose rank reaches ``stop_at`` (a proven upper
    bound such as ``dim``: nothing larger can come).

    ``sketch(p, k)`` (with ``shape``, ``blas`` only), when given, returns ``A S mod p`` for some
    ``n x k`` matrix ``S`` without building ``A`` (e.g.
    :func:`exactident.model.gamma_modular.gamma_sketch_mod_p`).  For a wide ``A`` whose row count is
    ``stop_at`` it is tried first: ``rank_p(A S) <= rank_p(A)`` for every ``S``, so when it reaches the
    row count the rank is proved without the full image (time and memory of ``m x (m + 16)`` instead
    of ``m x n``), and the image returned is that sketch.

    With ``blas`` the primes are below ``2**21`` and the ranks are BLAS eliminations
    (:mod:`exactident.linalg.blas_modp`), else word-size primes and FLINT.  With ``uniform`` each
    prime is drawn uniformly from the primes of its range (rejection sampling,
    :func:`exactident.linalg.montecarlo.uniform_prime`), so that the rank is also a Monte Carlo
    sample with the bound of :func:`~exactident.linalg.montecarlo.failure_bound`.

    ``short``: the rank is known to be below the column count (e.g. a zero column), so a tall image's
    random row sample cannot prove full column rank; its rank is then not taken (the rows are still
    drawn, so the random stream, and every later prime, is the same as without ``short``).

    ``sparse_rows`` (``blas`` only): a very tall image (rows above ``2 cols + 64``) is reduced to one sparse
    sketch ``R A`` of ``cols + 16`` rows (:func:`~exactident.linalg.blas_modp.sketch_rows_sparse`: two passes over
    ``A``) stacked over 16 dense random combinations of ``A``'s rows (:func:`~exactident.linalg.blas_modp.sketch_rows`),
    and eliminated once (no random-row elimination first).  Its rank is a lower bound whatever the draw, and
    ``rank_p(A)`` unless the sparse sketch misses more than 16 of it or the dense rows are unlucky (chance about
    ``rank / p``); no bound is proved for the sparse part, so the rank is then not a Monte Carlo trial (callers
    must not count it as one).  ``row_sketch(p, k)`` (with ``shape``), when given, returns that stack (``k`` sparse
    rows, then the 16 dense ones, float64 symmetric residues) without building ``A``
    (:func:`exactident.model.gamma_row_sketch.gamma_row_sketch_mod_p`): the same residues, the image never built.

    Returns
    -------
    (rank, prime, image)
        The best rank, the prime that gave it and the image mod that prime (``None`` when the
        rank is that of a column sketch below the row count: the caller builds it if needed).
    """
    rng = rng or random.Random()
    best: tuple[int, int, np.ndarray | None] | None = None
    rank_fn = rank_blas if blas else rank_mod_p
    if uniform:
        lo, hi = (BLAS_PRIME_LO, BLAS_PRIME_HI) if blas else (PRIME_LO, PRIME_HI)
        primes: list[int] = []
        while len(primes) < n_primes:
            primes.append(uniform_prime(rng, lo, hi, avoid, set(primes)))
    else:
        primes = blas_primes(n_primes, avoid, rng) if blas else random_primes(n_primes, avoid, rng)
    for p in primes:
        if blas and sketch is not None and shape is not None and stop_at == shape[0] \
                and shape[1] > shape[0] + shape[0] // 8 + 16:
            small = sketch(p, shape[0] + 16)
            r_small = rank_fn(small, p)
            if r_small == shape[0]:
                return shape[0], p, small
            del small
            # rank-deficient: the sketch's rank is the bound (equal to rank_p A unless S was unlucky);
            # the full image (rows x dim: gigabytes on MNIST) only if a caller's kernel needs it
            if best is None or r_small > best[0]:
                best = (r_small, p, None)
            continue
        fused = False  # the stack below from row_sketch, the image never built
        if row_sketch is not None and shape is not None and sparse_rows and blas and stop_at == shape[1] \
                and very_tall(*shape):
            fused, image, (m, n) = True, row_sketch(p, shape[1] + 16), shape
        else:
            image = image_mod_p(p)
            m, n = image.shape
        first: tuple[list[int], int] | None = None
        if sparse_rows and blas and stop_at is not None and stop_at == n and very_tall(m, n):
            # one elimination, not a row sample's and then a stack's (trained nets are rank-deficient: the
            # sample never proved full rank); the 16 dense rows make up a shortfall of the sparse sketch up
            # to 16.  Both seeded by p: the shared rng is not drawn
            if not fused:
                stack = np.empty((n + 32, n))
                stack[:n + 16] = sketch_rows_sparse(image, n + 16, p, seed=p)
                symmetric_rows(sketch_rows(image, 16, p, random.Random(p)), range(16), p, stack[n + 16:])
                image = stack
                del stack
            r = rank_fn(image, p)
            if best is None or r > best[0]:
                best = (r, p, image.astype(np.int64) % p)
            if r >= stop_at:
                break
            continue
        if stop_at is not None and stop_at == n and m > n + n // 8 + 16:
            # Tall: a random set of n + 16 rows usually has full column rank already, and the
            # rank of a submatrix is a lower bound too; eliminating fewer rows is cheaper.
            rows = sorted(rng.sample(range(m), n + 16))
            if blas and very_tall(m, n):
                # Very tall (sketched below when deficient): the sample, then the sketch of the other
                # rows, are written as float64 symmetric residues into one stack, whose pages are
                # touched only as they are filled: beside A, memory for the stack alone (no int64
                # copy of the sample, no copy by vstack; A is the rank stage's largest array)
                stack = np.empty((2 * (n + 16), n))
                r_rows = rank_fn(symmetric_rows(image, rows, p, stack[:n + 16]), p)
            elif short:  # cannot reach n: the full elimination below decides
                r_rows = -1
            elif blas:  # the sample's float64 residues only (no int64 copy of it beside them)
                r_rows = rank_fn(symmetric_rows(image, rows, p, np.empty((n + 16, n))), p)
            else:
                r_rows = rank_fn(image[rows], p)
            if r_rows == n:
                return n, p, image
            first = (rows, r_rows)
        if stop_at is not None and stop_at == m and n > m + m // 8 + 16:
            # Wide, same idea with columns (e.g. Gamma with n N_L < dim: full row rank).
            cols = sorted(rng.sample(range(n), m + 16))
            if rank_fn(image[:, cols], p) == m:
                return m, p, image
            # a subset misses columns that are a small share of the matrix (the later layers'
            # parameters beside the first layer's): a sparse column sketch mixes all of them.
            # Seeded by p so the shared rng (and every later prime) is unchanged.
            if blas and rank_fn(sketch_columns_sparse(image, m + 16, p, seed=p), p) == m:
                return m, p, image
        if blas and very_tall(m, n) and first is not None:
            # Very tall, rank-deficient rows sample of rank r1: stack it with R A_rest for a random
            # (n - r1 + 16) x (m - n - 16) matrix R.  Any such stack [A_rows; R A_rest] has rank at
            # most rank A (a lower bound), equal to it unless R is unlucky (chance about rank / p),
            # and then A's row space, so its reduced echelon kernel is A's too.  R needs only the
            # rank the sample misses: a product n / (n - r1) times smaller than a full sketch.
            rows, r1 = first
            rest = np.ones(m, dtype=bool)
            rest[rows] = False
            k = n - r1 + 16
            # the rest is read in row blocks (no copy of A[rest]), the sketch written under the sample
            symmetric_rows(sketch_rows(image, k, p, rng, rows=np.flatnonzero(rest)), range(k), p,
                           stack[n + 16:n + 16 + k])
            image = stack[:n + 16 + k]  # A is freed here
            del stack
        elif blas and very_tall(m, n):
            # Very tall: the rank of R A for a random k x m matrix R (k = n + 16) is a lower bound
            # for the rank of A (and equal to it unless R is unlucky, chance about rank / p); one
            # product instead of an elimination over all m rows.  R A has A's row space then, so
            # its reduced echelon kernel is A's too.
            image = sketch_rows(image, n + 16, p, rng)
        r = _rank_in_place(image, p) if blas else rank_fn(image, p)
        if best is None or r > best[0]:
            best = (r, p, image if image.dtype.kind != "f" else image.astype(np.int64) % p)  # int64 in [0, p)
        if stop_at is not None and r >= stop_at:
            break
    assert best is not None
    return best


def _rank_in_place(image: np.ndarray, p: int) -> int:
    """``rank_blas(image, p)`` without a float64 copy beside an int64 ``image`` of residues below ``2**52``.

    The residues are rewritten as float64 symmetric residues in ``image``'s own buffer (row blocks, through a
    float64 view), eliminated, and written back as int64 residues in ``[0, p)``: the same matrix mod p, and
    the peak of the elimination without a second copy of it (a ``Gamma`` mod p of ``n N_L x dim``).
    """
    if image.dtype != np.int64 or not image.flags.c_contiguous or not image.flags.writeable or image.ndim != 2 \
            or not image.size or image.min() <= -(2**52) or image.max() >= 2**52:
        return rank_blas(image, p)
    # symmetric_rows copies each block of rows before writing it: reading as int64 and writing as float64 over the
    # same memory is safe
    F = symmetric_rows(image, np.arange(image.shape[0]), p, image.view(np.float64))
    step = max(1, (1 << 18) // image.shape[1])
    try:
        return rank_blas(F, p)  # float64 input: eliminated without a copy of it
    finally:
        for r in range(0, image.shape[0], step):
            image[r:r + step] = np.mod(F[r:r + step], p)
