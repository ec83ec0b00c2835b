"""Monte Carlo ranks: ranks mod uniformly random primes with a proven failure bound.

Used only when the caller asks for an uncertified answer (``--certify none``).
For an integer matrix ``M`` (the data scaled by its denominators) with
``|entries| <= B`` and rank ``r`` over Q, some ``r x r`` minor ``Delta`` is nonzero
and ``|Delta| <= (sqrt(r) B)^r`` (Hadamard).  ``rank_p(M) < r`` needs ``p | Delta``,
and at most ``d = floor(log2 |Delta| / log2 lo)`` primes ``>= lo`` divide ``Delta``.
Drawing ``k`` distinct primes uniformly from the ``N`` usable primes of
``[lo, hi)`` (rejection sampling, so every prime is equally likely), the chance
that all of them divide ``Delta`` is at most ``prod_{i<k} d / (N - i)``.  The rank
reported is the largest rank seen, so it is wrong only in that event.  Since
``r`` is unknown, ``r = min(m, n)`` is used in ``d`` (a larger ``d``, a valid bound).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import flint
import numpy as np

from exactident.linalg.blas_modp import BLAS_PRIME_HI, BLAS_PRIME_LO, rank_blas, sketch_rows
from exactident.linalg.draws import Draws
from exactident.linalg.modular import PRIME_HI, PRIME_LO, rank_mod_p, require_prime

__all__ = ["PRIMES_IN_RANGE", "TARGET_ERROR", "bad_primes_bound", "failure_bound", "monte_carlo_rank",
           "primes_for", "uniform_prime", "very_tall"]

#: Number of primes in each range (pi(2**21) - pi(2**20), pi(2**31) - pi(2**30)).
PRIMES_IN_RANGE = {(BLAS_PRIME_LO, BLAS_PRIME_HI): 73_586, (PRIME_LO, PRIME_HI): 50_697_537}
#: More primes are drawn until the failure bound is at most this (stopping at ``MAX_PRIMES`` primes).
TARGET_ERROR = 2.0**-40
MAX_PRIMES = 8


def very_tall(m: int, n: int) -> bool:
    """Is an ``m x n`` matrix *very tall* (``m > 2 n + 64``)?  Its rank mod p is then taken from a sketch of its
    rows (:func:`~exactident.linalg.blas_modp.sketch_rows`,
    :func:`~exactident.linalg.blas_modp.sketch_rows_sparse`), never by eliminating all ``m`` rows.

    Examples
    --------
    >>> very_tall(17970, 2378), very_tall(1302, 1041), very_tall(2 * 100 + 65, 100)
    (True, False, True)
    """
    return m > 2 * n + 64


def uniform_prime(rng: random.Random, lo: int, hi: int, avoid: int, exclude: set[int]) -> int:
    """A prime drawn uniformly from ``[lo, hi)`` (rejection sampling), not dividing ``avoid``."""
    while True:
        q = rng.randrange(lo, hi)
        if q in exclude or int(avoid) % q == 0 or not flint.fmpz(q).is_prime():
            continue
        return require_prime(q, avoid)


def failure_bound(shape: tuple[int, int], entry_bound: int, avoid: int, lo: int, hi: int, k: int,
                  sketch: bool = False) -> float:
    """``prod_{i<k} d / (N - i)``: chance that ``k`` uniform primes of ``[lo, hi)`` all lower the rank.

    With ``sketch`` each trial also compresses the rows by a random matrix ``R``
    (uniform residues below ``min(p, SKETCH_SET)``): the rank of ``R M`` drops below that of
    ``M`` mod p only if a nonzero polynomial of degree ``r`` in the entries of ``R`` vanishes,
    chance at most ``r / min(lo, SKETCH_SET)`` (Schwartz-Zippel), added to each trial's ``d / (N - i)``.  The same
    holds for ``[M_S; R M_rest]`` (random rows ``S`` of rank ``r_1`` mod p, ``R`` with at least
    ``rank_p M - r_1`` rows): the polynomial is nonzero since some ``R`` picks the missing rows.

    Examples
    --------
    >>> failure_bound((3, 3), 10, 1, 2**20, 2**21, 1) < 1e-4
    True
    """
    r = min(shape)
    if r == 0:
        return 0.0
    d = bad_primes_bound(r, entry_bound, lo)
    n_usable = PRIMES_IN_RANGE[(lo, hi)] - math.floor(math.log2(max(int(avoid), 1)) / math.log2(lo))
    bound = 1.0
    for i in range(k):
        factor = min(1.0, d / max(n_usable - i, 1) + (r / min(lo, SKETCH_SET) if sketch else 0.0))
        if factor == 0.0:
            return 0.0  # no prime of the range can lower the rank: exact with certainty
        bound *= factor
    # a product of positive factors that underflows is still positive: never claim 0 (certainty) for it
    return max(bound, math.ulp(0.0))


def bad_primes_bound(r: int, entry_bound: int, lo: int) -> int:
    """``d = floor(r log2(sqrt(r) B) / log2(lo))``: most primes ``>= lo`` that divide a nonzero ``r x r`` minor.

    A nonzero integer ``r x r`` minor with entries ``|x| <= B`` has ``|Delta| <= (sqrt(r) B)^r``
    (Hadamard), and a product of ``t`` primes ``>= lo`` is at least ``lo^t``; so at most ``d``
    distinct primes ``>= lo`` divide it.  Only they can lower the rank mod p below ``r``.

    Examples
    --------
    >>> bad_primes_bound(2, 10, 3)  # |Delta| <= 200 < 3^5: at most 4 primes >= 3 divide it (valid; 3*5*7*11 > 200)
    4
    """
    if r <= 0:
        return 0
    return math.floor(r * (math.log2(max(entry_bound, 1)) + 0.5 * math.log2(r)) / math.log2(lo))


def primes_for(target: float, shape: tuple[int, int], entry_bound: int, avoid: int, lo: int, hi: int,
               sketch: bool = False, max_primes: int = 64) -> int | None:
    """Fewest uniform primes of ``[lo, hi)`` whose :func:`failure_bound` is at most ``target``, or None.

    Examples
    --------
    >>> primes_for(1e-6, (3, 3), 10, 1, 2**20, 2**21)  # d = 0: one prime is exact with certainty
    1
    >>> primes_for(1e-6, (2000, 2000), 2**3000, 1, 2**20, 2**21) is None  # d > N: no number of primes
    True
    """
    for k in range(1, max_primes + 1):
        if failure_bound(shape, entry_bound, avoid, lo, hi, k, sketch) <= target:
            return k
    return None


#: Entries of a random sketch matrix are drawn from ``[0, SKETCH_SET)`` (or all residues below it):
#: a sketch loses rank with probability at most ``rank / SKETCH_SET`` (Schwartz-Zippel).
SKETCH_SET = 2**20


def _sketch_word(A: np.ndarray, k: int, q: int, rng: random.Random) -> np.ndarray:
    """``R A mod q`` for a word-size prime ``q``, ``R`` uniform in ``[0, 2**20)^(k x m)`` (int64 residues).

    ``A = 2**16 A_hi + A_lo`` with ``A_lo < 2**16``, ``A_hi < 2**15``: each float64 product of
    ``R`` with a part over at most ``2**16`` rows stays below ``2**52``, so it is exact.
    """
    gen = Draws(rng.getrandbits(64))
    A = np.asarray(A, dtype=np.int64) % q
    R = gen.integers(0, SKETCH_SET, (k, A.shape[0])).astype(np.float64)
    out = np.zeros((k, A.shape[1]), dtype=np.int64)
    for start in range(0, A.shape[0], 2**16):
        part = A[start:start + 2**16]
        Rp = R[:, start:start + 2**16]
        lo_part = (Rp @ (part & 0xFFFF).astype(np.float64)).astype(np.int64) % q
        hi_part = (Rp @ (part >> 16).astype(np.float64)).astype(np.int64) % q
        out = (out + hi_part * 65536 + lo_part) % q
    return out


def monte_carlo_rank(image_mod_p: Callable[[int], np.ndarray], shape: tuple[int, int], avoid: int,
                     entry_bound: Callable[[], int], rng: random.Random,
                     first: tuple[int, int, np.ndarray | None] | None = None,
                     max_primes: int = MAX_PRIMES, *, target: float = TARGET_ERROR,
                     prime_range: tuple[int, int] | None = None, first_uniform: bool = False) -> tuple[int, float]:
    """Largest rank mod uniformly random primes and a bound on the chance it is below the rank over Q.

    Parameters
    ----------
    image_mod_p : callable p -> int64 residues of shape ``shape``
    shape : (m, n)
    avoid : int
        Denominator of the data (primes dividing it are never drawn).
    entry_bound : callable () -> int
        ``|entries|`` bound of the integer matrix behind the residues.
    rng : random.Random
    first : (rank, prime, image), optional
        A rank already known (any prime): it counts in the maximum, not in the bound.
    max_primes : int
        Most uniform primes drawn (the bound is then whatever they reach), ``first`` included when it counts.
    target : float
        Draws stop once the bound is at most this.
    prime_range : (lo, hi), optional
        The range the primes are drawn from (default: BLAS primes when one draw's bound is at most 1/4,
        else word-size primes).
    first_uniform : bool
        ``first``'s prime was itself drawn uniformly from ``prime_range`` (and its rank taken the same
        way): it counts as the first trial of the bound.

    Returns
    -------
    (rank, error_probability)
        ``error_probability`` is 0 when the rank reaches ``min(m, n)`` (then it is exact).
    """
    m, n = shape
    top = min(m, n)
    best = first[0] if first is not None else 0
    if best >= top:
        return best, 0.0
    B = entry_bound()
    small = (BLAS_PRIME_LO, BLAS_PRIME_HI)
    if prime_range is None:
        prime_range = small if failure_bound(shape, B, avoid, *small, 1) <= 0.25 else (PRIME_LO, PRIME_HI)
    lo, hi = prime_range
    rank_fn = rank_blas if lo == BLAS_PRIME_LO else rank_mod_p
    sketch = very_tall(m, n)  # rank of a random row sketch
    used: set[int] = set()
    k = 0
    if first is not None and first_uniform:
        used.add(first[1])
        k = 1
        bound = failure_bound(shape, B, avoid, lo, hi, k, sketch)
        if bound <= target:
            return best, bound
    while k < max_primes:
        q = uniform_prime(rng, lo, hi, avoid, used)
        used.add(q)
        k += 1
        image = None  # the previous prime's image is freed before the next one is built
        image = image_mod_p(q)
        if sketch:
            # n + 16 random rows, stacked with a sketch of the others by n - r1 + 16 random rows: at
            # least as many sketch rows as the rank the sample misses, so the stack loses rank only
            # if the sketch is unlucky (the same r / p bound), for a smaller product than R M
            rows = sorted(rng.sample(range(m), n + 16))
            r1 = rank_fn(image[rows], q)
            rest = np.setdiff1d(np.arange(m), rows)
            extra = (sketch_rows(image, n - r1 + 16, q, rng, rows=rest) if lo == BLAS_PRIME_LO  # no copy of the rest
                     else _sketch_word(image[rest], n - r1 + 16, q, rng))
            image = image[rows] if r1 >= top else np.vstack([image[rows], extra])
        best = max(best, rank_fn(image, q))
        if best >= top:
            return best, 0.0
        bound = failure_bound(shape, B, avoid, lo, hi, k, sketch)
        if bound <= target:
            return best, bound
    return best, failure_bound(shape, B, avoid, lo, hi, k, sketch)
