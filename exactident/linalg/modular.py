"""Linear algebra mod a word-size prime: guarded primes, residues, products, ranks, kernels.

A rational matrix ``M`` scaled to integers has, for a prime p dividing no
denominator, ``rank_p(M) <= rank_Q(M)`` (a minor that is nonzero mod p is
nonzero over Q): one rank mod p is a *certified lower bound* with word-size
entries.  :mod:`exactident.linalg.certified` turns such bounds into exact
ranks.

Guards: FLINT aborts the whole process on a composite modulus, so every
modulus passes :func:`require_prime`; a prime dividing a denominator of the
data would make ``x mod p`` meaningless, so primes come from
:func:`random_primes` with the data's denominator to avoid and
:func:`residues` refuses such a prime.  Residues are int64 numpy arrays with
``p < 2**31``, so entrywise products fit; :func:`matmul_mod` splits one factor
so that sums fit too.

Imports nothing from the rest of the package but :mod:`exactident.errors`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from math import gcd, isqrt
from typing import Any

import flint
import numpy as np

from exactident.errors import InvariantViolation

__all__ = [
    "PRIME_HI",
    "PRIME_LO",
    "matmul_mod",
    "random_primes",
    "rank_mod_p",
    "rational_reconstruction",
    "require_prime",
    "residues",
    "rref_kernel_mod_p",
    "to_nmod_mat",
]

#: Random primes are drawn from ``[PRIME_LO, PRIME_HI)``: word size, and ``p**2 < 2**62``.
PRIME_LO = 2**30
#: Upper end (excluded) of the word-size prime range.
PRIME_HI = 2**31


def require_prime(p: int, avoid: int = 1) -> int:
    """Return ``p`` if it is a prime in ``[3, 2**31)`` not dividing ``avoid``.

    Raises
    ------
    InvariantViolation
        If ``p`` is composite, out of range, or divides ``avoid`` (a denominator
        of the data).  Never pass such a modulus to FLINT: a composite one
        aborts the process (docs/pitfalls.md).

    Examples
    --------
    >>> require_prime(1073741789)
    1073741789
    >>> require_prime(2**31 - 3)
    Traceback (most recent call last):
    ...
    exactident.errors.InvariantViolation: modulus 2147483645 is not a prime in [3, 2**31)
    >>> require_prime(7, avoid=14)
    Traceback (most recent call last):
    ...
    exactident.errors.InvariantViolation: prime 7 divides a denominator of the data
    """
    p = int(p)
    if not (3 <= p < PRIME_HI and flint.fmpz(p).is_prime()):
        raise InvariantViolation(f"modulus {p} is not a prime in [3, 2**31)")
    if int(avoid) % p == 0:
        raise InvariantViolation(f"prime {p} divides a denominator of the data")
    return p


def random_primes(count: int, avoid: int = 1, rng: random.Random | None = None,
                  exclude: Sequence[int] = (), lo: int = PRIME_LO, hi: int = PRIME_HI) -> list[int]:
    """``count`` distinct random primes in ``[lo, hi)`` that divide neither ``avoid`` nor are in ``exclude``.

    Raises
    ------
    InvariantViolation
        If the range holds too few usable primes.

    Examples
    --------
    >>> random_primes(1, avoid=101 * 103 * 107 * 109, rng=random.Random(1), lo=100, hi=114)
    [113]
    """
    rng = rng or random.Random()
    out: list[int] = []
    seen = set(int(e) for e in exclude)
    tries = 0
    while len(out) < count:
        tries += 1
        if tries > 100_000:
            raise InvariantViolation(f"fewer than {count} usable primes in [{lo}, {hi})")
        q = rng.randrange(lo, hi) | 1
        while q < hi and not flint.fmpz(q).is_prime():
            q += 2
        if q >= hi or q in seen or int(avoid) % q == 0:
            continue
        seen.add(q)
        out.append(require_prime(q, avoid))
    return out


def residues(values: Sequence[Any], p: int, avoid: int = 1) -> np.ndarray:
    """Residues mod p of rationals (fmpq/fmpz/int), as int64 in ``[0, p)``.

    Raises
    ------
    InvariantViolation
        If p is not a usable prime or divides a denominator.

    Examples
    --------
    >>> residues([flint.fmpq(1, 2), -1, flint.fmpq(2, 3)], 7).tolist()
    [4, 6, 3]
    >>> residues([flint.fmpq(1, 7)], 7)
    Traceback (most recent call last):
    ...
    exactident.errors.InvariantViolation: prime 7 divides a denominator of the data
    """
    require_prime(p, avoid)
    out = np.empty(len(values), dtype=np.int64)
    for k, v in enumerate(values):
        if isinstance(v, flint.fmpq):
            num, den = int(v.p), int(v.q)
        else:
            num, den = int(v), 1
        if den % p == 0:
            raise InvariantViolation(f"prime {p} divides a denominator of the data")
        out[k] = num * pow(den, -1, p) % p if den != 1 else num % p
    return out


def matmul_mod(A: np.ndarray, B: np.ndarray, p: int) -> np.ndarray:
    """``A @ B mod p`` for int64 residues, ``p < 2**31``, without overflow.

    ``B = B_hi 2**16 + B_lo``: each product is ``< 2**47``, so inner sums of up
    to ``2**16`` terms stay below ``2**63``.
    """
    if A.shape[1] >= 2**16:
        raise InvariantViolation(f"matmul_mod: inner dimension {A.shape[1]} too large")
    B_lo = B & 0xFFFF
    B_hi = B >> 16
    hi = (A @ B_hi) % p
    return ((hi << 16) + (A @ B_lo) % p) % p


def to_nmod_mat(A: np.ndarray, p: int) -> flint.nmod_mat:
    """An int64 residue array as FLINT ``nmod_mat`` (modulus checked prime first)."""
    require_prime(p)
    m, n = A.shape
    if m == 0 or n == 0:
        return flint.nmod_mat(m, n, p)
    # via fmpz_mat: about 20% faster than nmod_mat(list of lists) in python-flint 0.9
    return flint.nmod_mat(flint.fmpz_mat(A.tolist()), p)


def rank_mod_p(A: np.ndarray, p: int) -> int:
    """Rank of an int64 residue array over Z/pZ (a lower bound for the rank over Q).

    Examples
    --------
    >>> rank_mod_p(np.array([[1, 2], [3, 6]]), 7), rank_mod_p(np.zeros((0, 4), dtype=np.int64), 7)
    (1, 0)
    >>> rank_mod_p(np.array([[1, 2], [3, 4]]), 15)
    Traceback (most recent call last):
    ...
    exactident.errors.InvariantViolation: modulus 15 is not a prime in [3, 2**31)
    """
    if A.shape[0] == 0 or A.shape[1] == 0:
        require_prime(p)
        return 0
    require_prime(p)  # before A % p: a zero or composite modulus never reaches numpy or FLINT
    return int(to_nmod_mat(A % p, p).rank())


def rref_kernel_mod_p(A: np.ndarray, p: int) -> tuple[list[int], list[int], np.ndarray]:
    """Pivot columns, free columns and the reduced-echelon kernel data mod p.

    Returns
    -------
    pivots, free : list of int
    N : int64 array, shape ``(len(pivots), len(free))``
        Kernel basis vector ``f`` has 1 at ``free[f]``, 0 at the other free
        columns and ``-N[j, f]`` at ``pivots[j]``.  Over Q the same recipe on
        the rref gives the unique reduced kernel basis.
    """
    require_prime(p)
    m, n = A.shape
    if m == 0:
        return [], list(range(n)), np.zeros((0, n), dtype=np.int64)
    R, r = to_nmod_mat(A % p, p).rref()
    r = int(r)
    # Row j is zero before its pivot, so scanning on from the previous pivot
    # reads n + r entries in all; then only the free columns are read.
    pivots: list[int] = []
    c = 0
    for j in range(r):
        while int(R[j, c]) == 0:
            c += 1
        pivots.append(c)
        c += 1
    pset = set(pivots)
    free = [c for c in range(n) if c not in pset]
    N = np.array([int(R[j, f]) for j in range(r) for f in free], dtype=np.int64).reshape(r, len(free))
    return pivots, free, N


def rational_reconstruction(a: int, m: int) -> tuple[int, int] | None:
    """``(u, v)`` with ``u/v = a mod m``, ``|u|, v <= sqrt(m/2)``, ``gcd(u, v) = 1``; None if none.

    Examples
    --------
    >>> m = 1000003 * 1000033
    >>> rational_reconstruction(-3 * pow(7, -1, m) % m, m)
    (-3, 7)
    """
    a %= m
    bound = isqrt(m // 2)
    r0, r1, s0, s1 = m, a, 0, 1
    while r1 > bound:
        q = r0 // r1
        r0, r1 = r1, r0 - q * r1
        s0, s1 = s1, s0 - q * s1
    if s1 == 0 or abs(s1) > bound:
        return None
    if s1 < 0:
        r1, s1 = -r1, -s1
    if gcd(r1, s1) != 1:
        return None
    return r1, s1


