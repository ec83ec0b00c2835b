"""Certified ranks from ranks mod p, with exact kernel certificates (paper Props. 10-11, Theorems 8-9).

Why modular.  A rational matrix ``M`` scaled to integers has, for a prime p
dividing no denominator, ``rank_p(M) <= rank_Q(M)`` (a minor that is nonzero
mod p is nonzero over Q).  So one rank mod p gives a *certified lower bound*,
with no rational arithmetic and word-size entries; FLINT's ``nmod_mat``
elimination is fast.  A rank is certified exactly when the lower bound meets
an upper bound, which is either structural (``min(rows, cols)``, ``|P|``,
``rank Gamma <= R_A`` from Prop. 11) or an exact kernel basis ``K``:
``M K = 0`` and ``K`` of full column rank give ``rank M <= ncols - ncols(K)``.

Kernel certificates are found mod p (the reduced-echelon kernel basis is
unique over Q, so its residues for several primes are lifted by CRT and
rational reconstruction) and accepted only after an exact check: ``M K`` is an
integer matrix (after scaling) with ``|entries| <= bound``, and it is zero mod
primes whose product exceeds the bound, so it is zero.

Guards (PITFALLS.md): FLINT aborts the process on a composite modulus, so every
modulus passes :func:`require_prime`; a prime dividing a denominator of the
data would make ``x mod p`` meaningless, so primes come from
:func:`random_primes` with the data's denominator to avoid and
:func:`residues` refuses such a prime.  Residues are int64 numpy arrays with
``p < 2**31``, so entrywise products fit; :func:`matmul_mod` splits one factor
so that sums fit too.

Called by :mod:`exactident.gamma_modular` and :mod:`exactident.check`;
:func:`verify_rank_certificate` is what ``verify-certificate`` calls.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from math import gcd, isqrt
from typing import Any, Callable, Mapping, Sequence

import flint
import numpy as np

from ..errors import InvariantViolation

__all__ = ["PRIME_LO", "PRIME_HI", "require_prime", "random_primes", "residues", "matmul_mod",
           "to_nmod_mat", "rank_mod_p", "modular_lower_bound", "rref_kernel_mod_p", "rational_reconstruction",
           "CertifiedRank", "certified_rank", "kernel_is_zero_mod", "verify_rank_certificate"]

#: Random primes are drawn from ``[PRIME_LO, PRIME_HI)``: word size, and ``p**2 < 2**62``.
PRIME_LO = 2**30
PRIME_HI = 2**31


def require_prime(p: int, avoid: int = 1) -> int:
    """Return ``p`` if it is a prime in ``[3, 2**31)`` not dividing ``avoid``.

    Raises
    ------
    InvariantViolation
        If ``p`` is composite, out of range, or divides ``avoid`` (a denominator
        of the data).  Never pass such a modulus to FLINT: a composite one
        aborts the process (PITFALLS.md).

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


@dataclass
class CertifiedRank:
    """An exact rank and the data that proves it.

    Attributes
    ----------
    rank : int
        Exact rank over Q.
    certificate : dict
        JSON-ready: ``{"rank", "shape", "lower": {"prime", "rank_mod_p"},
        "upper": {"kind", ...}, "primes"}`` (see :func:`certified_rank`).
    """

    rank: int
    certificate: dict[str, Any] = field(default_factory=dict)


def _fmt(num: int, den: int) -> str:
    return str(num) if den == 1 else f"{num}/{den}"


def kernel_to_integer_columns(kernel: Sequence[Mapping[int, flint.fmpq]]) -> list[dict[int, int]]:
    """Scale each sparse rational column by its denominators' lcm (same span)."""
    out = []
    for col in kernel:
        d = 1
        for v in col.values():
            d = d * int(v.q) // gcd(d, int(v.q))
        out.append({i: int(v.p) * (d // int(v.q)) for i, v in col.items()})
    return out


def kernel_is_zero_mod(image_mod_p: Callable[[int], np.ndarray], ncols: int,
                       K_int: Sequence[Mapping[int, int]], primes: Sequence[int], avoid: int) -> bool:
    """Is ``M K = 0`` mod every prime in ``primes``?  (``K`` sparse integer columns.)"""
    k = len(K_int)
    for q in primes:
        require_prime(q, avoid)
        Kq = np.zeros((ncols, k), dtype=np.int64)
        for c, col in enumerate(K_int):
            for i, v in col.items():
                Kq[i, c] = v % q
        Mq = image_mod_p(q)
        if k <= 64:  # thin K: numpy is cheaper than converting M to nmod_mat
            if matmul_mod(Mq, Kq, q).any():
                return False
        elif not all(int(x) == 0 for x in (to_nmod_mat(Mq, q) * to_nmod_mat(Kq, q)).entries()):
            return False
    return True


def _bits_needed(bound: int) -> int:
    return bound.bit_length() + 1


def modular_lower_bound(image_mod_p: Callable[[int], np.ndarray], *, avoid: int,
                        rng: random.Random | None = None, n_primes: int = 1,
                        stop_at: int | None = None) -> tuple[int, int, np.ndarray]:
    """Best rank mod p over up to ``n_primes`` random primes: a lower bound on the rank over Q.

    Stops at the first prime whose rank reaches ``stop_at`` (a proven upper
    bound such as ``dim``: nothing larger can come).

    Returns
    -------
    (rank, prime, image)
        The best rank, the prime that gave it and the image mod that prime.
    """
    rng = rng or random.Random()
    best: tuple[int, int, np.ndarray] | None = None
    for p in random_primes(n_primes, avoid, rng):
        image = image_mod_p(p)
        m, n = image.shape
        if stop_at is not None and stop_at == n and m > n + n // 8 + 16:
            # Tall: a random set of n + 16 rows usually has full column rank already, and the
            # rank of a submatrix is a lower bound too; eliminating fewer rows is cheaper.
            rows = sorted(rng.sample(range(m), n + 16))
            if rank_mod_p(image[rows], p) == n:
                return n, p, image
        if stop_at is not None and stop_at == m and n > m + m // 8 + 16:
            # Wide, same idea with columns (e.g. Gamma with n N_L < dim: full row rank).
            cols = sorted(rng.sample(range(n), m + 16))
            if rank_mod_p(image[:, cols], p) == m:
                return m, p, image
        r = rank_mod_p(image, p)
        if best is None or r > best[0]:
            best = (r, p, image)
        if stop_at is not None and r >= stop_at:
            break
    assert best is not None
    return best


def certified_rank(image_mod_p: Callable[[int], np.ndarray], shape: tuple[int, int], *,
                   avoid: int, entry_bound: Callable[[], int],
                   upper_bounds: Mapping[str, int] | None = None,
                   rng: random.Random | None = None, n_lower_primes: int = 1,
                   max_primes: int | None = None,
                   lower: tuple[int, int, np.ndarray] | None = None,
                   exact_kernel: Callable[[], list[dict[int, flint.fmpq]]] | None = None,
                   local_kernel: Callable[[], list[dict[int, flint.fmpq]]] | None = None,
                   ) -> CertifiedRank | None:
    """Exact rank of a rational matrix ``M`` known through its images mod p.

    Parameters
    ----------
    image_mod_p : callable p -> int64 array of shape ``shape``
        ``S M mod p`` for some integer scaling ``S`` that is a unit mod every
        allowed p (a prime not dividing ``avoid``).
    shape : (m, n)
    avoid : int
        Denominator of the data: primes dividing it are never used.
    entry_bound : callable () -> int
        Bound on ``|entries|`` of an integer matrix ``D M`` (``D`` positive,
        made of the data's denominators); only called for kernel certificates.
    upper_bounds : dict name -> int, optional
        Proven upper bounds on the rank besides ``min(m, n)`` (e.g. ``|P|``).
    n_lower_primes : int
        Primes tried for the lower bound; stops as soon as it meets an upper bound.
    max_primes : int, optional
        Most primes for the rational reconstruction of a kernel (default 40,
        or 8 for a small matrix that has ``exact_kernel``).
    lower : (rank, prime, image), optional
        A lower bound already computed by :func:`modular_lower_bound`.
    exact_kernel : callable () -> list of sparse fmpq columns, optional
        An exact kernel basis (e.g. FLINT's fraction-free nullspace), used
        when reconstruction needs too many primes (huge kernel entries); it is
        checked like a reconstructed one.
    local_kernel : callable () -> list of sparse fmpq columns, optional
        Kernel vectors the caller has already proved exactly (e.g. from small
        blocks of ``M``); tried first, and accepted without a modular zero
        check when there are ``n - lower`` of them (full column rank is still
        checked).  The verifier re-checks them mod its own primes.

    Returns
    -------
    CertifiedRank or None
        None when no certificate was found within ``max_primes`` (the caller
        falls back to exact elimination).  ``certificate["upper"]["kind"]`` is
        ``"shape"``, a key of ``upper_bounds``, or ``"kernel"`` (then
        ``"kernel"`` holds the columns of ``K`` as sparse ``[[index, "p/q"], ...]``
        and ``"primes"`` the primes of the zero check of ``M K``).

    Notes
    -----
    ``rank_p(M) <= rank_Q(M)`` for every allowed p, so the best modular rank
    is a lower bound; the kernel certificate is checked exactly, so an unlucky
    prime can only cost time, never correctness.
    """
    rng = rng or random.Random()
    m, n = shape
    bounds = {"shape": min(m, n)}
    bounds.update(upper_bounds or {})
    ub_kind = min(bounds, key=lambda k: bounds[k])
    ub = bounds[ub_kind]
    if lower is None:
        lower = modular_lower_bound(image_mod_p, avoid=avoid, rng=rng, n_primes=n_lower_primes, stop_at=ub)
    lower, lower_prime, image = lower
    used = [lower_prime]
    if lower > ub:
        raise InvariantViolation(f"rank mod {lower_prime} = {lower} exceeds proven upper bound {ub} ({ub_kind})")
    cert: dict[str, Any] = {"rank": lower, "shape": [m, n],
                            "lower": {"prime": lower_prime, "rank_mod_p": lower}}
    if lower == ub:
        cert["upper"] = {"kind": ub_kind, "bound": ub}
        return CertifiedRank(lower, cert)
    if max_primes is None:
        max_primes = 8 if exact_kernel is not None and m * n <= 200_000 else 40
    kernel = None
    if local_kernel is not None:
        K = local_kernel()
        if K and n - len(K) == lower:
            q = random_primes(1, avoid, rng, exclude=used)[0]
            if _full_column_rank(kernel_to_integer_columns(K), n, q):
                # K is not stored: the verifier rebuilds it from the case (compact certificate)
                cert["upper"] = {"kind": "kernel", "bound": lower, "source": "local", "nullity": len(K)}
                return CertifiedRank(lower, cert)
    source = "crt"
    kernel = _reconstruct_kernel(image_mod_p, image, lower_prime, shape, avoid,
                                 entry_bound, rng, max_primes, used)
    if kernel is None and exact_kernel is not None:
        source = "exact-nullspace"
        K = exact_kernel()
        if n - len(K) == lower:
            check_primes = _check_kernel(K, image_mod_p, n, avoid, entry_bound(), rng, used)
            kernel = (K, check_primes) if check_primes else None
    if kernel is None:
        return None
    K, check_primes = kernel
    if n - len(K) != lower:
        return None
    cert["upper"] = {"kind": "kernel", "bound": n - len(K), "source": source,
                     "kernel": [[[i, _fmt(int(v.p), int(v.q))] for i, v in sorted(col.items())] for col in K],
                     "primes": check_primes}
    return CertifiedRank(lower, cert)


def _check_kernel(K, image_mod_p, n, avoid, bound_M, rng, used) -> list[int] | None:
    """Fresh primes proving ``M K = 0`` exactly, with ``K`` of full column rank; None if it is not."""
    K_int = kernel_to_integer_columns(K)
    bound_K = max((abs(v) for col in K_int for v in col.values()), default=0)
    bits = _bits_needed(n * bound_M * bound_K)
    check: list[int] = []
    while sum(q.bit_length() - 1 for q in check) < bits:
        check += random_primes(1, avoid, rng, exclude=used + check)
    used.extend(check)
    if _full_column_rank(K_int, n, check[0]) and kernel_is_zero_mod(image_mod_p, n, K_int, check, avoid):
        return check
    return None


def _reconstruct_kernel(image_mod_p, first_image, first_prime, shape, avoid, entry_bound, rng,
                        max_primes, used):
    """CRT + rational reconstruction of the reduced kernel basis; exact check. None on failure."""
    m, n = shape
    pivots, free, N = rref_kernel_mod_p(first_image, first_prime)
    if not free:
        return None
    crt = N.astype(object)
    modulus = first_prime
    primes = [first_prime]
    next_try = 1
    bound_M = None
    while len(primes) <= max_primes:
        if len(primes) >= next_try:
            next_try = max(next_try + 1, int(next_try * 1.5))
            K = _try_reconstruct(crt, modulus, pivots, free)
            if K is not None:
                if bound_M is None:
                    bound_M = entry_bound()
                check = _check_kernel(K, image_mod_p, n, avoid, bound_M, rng, used)
                if check:
                    return K, check
        p = random_primes(1, avoid, rng, exclude=used)[0]
        used.append(p)
        piv_p, free_p, N_p = rref_kernel_mod_p(image_mod_p(p), p)
        if piv_p != pivots:
            if len(piv_p) > len(pivots) or (len(piv_p) == len(pivots) and piv_p < pivots):
                # The earlier primes were unlucky: start over from this one.
                pivots, free, crt, modulus, primes = piv_p, free_p, N_p.astype(object), p, [p]
                if not free:
                    return None
            continue
        # CRT: x = crt + modulus * t, t = (N_p - crt) / modulus mod p.
        inv = pow(modulus % p, -1, p)
        t = ((N_p.astype(object) - crt) % p) * inv % p
        crt = crt + modulus * t
        modulus *= p
        primes.append(p)
    return None


def _try_reconstruct(crt, modulus, pivots, free):
    K = []
    for f_idx, f in enumerate(free):
        col = {f: flint.fmpq(1)}
        for j, piv in enumerate(pivots):
            a = int(crt[j, f_idx])
            if a == 0:
                continue
            rr = rational_reconstruction(-a, modulus)
            if rr is None:
                return None
            col[piv] = flint.fmpq(*rr)
        K.append(col)
    return K


def _full_column_rank(K_int, n, q) -> bool:
    k = len(K_int)
    Kq = np.zeros((n, k), dtype=np.int64)
    for c, col in enumerate(K_int):
        for i, v in col.items():
            Kq[i, c] = v % q
    return rank_mod_p(Kq, q) == k


def verify_rank_certificate(case: Any, rank_certificate: Mapping[str, Any]) -> list[str]:
    """Re-check a rank certificate (``report["certificate"]["rank"]``) from the case alone.

    Parameters
    ----------
    case : Case
    rank_certificate : dict
        ``{"rank_gamma": {...}, "rank_a": {...}, "fixed_edges": [[l, v, k], ...]}``
        as written by :func:`exactident.gamma_modular.certify_ranks`.

    Returns
    -------
    list of str
        Problems found; empty means the certificate is valid.
    """
    from ..gamma_modular import verify_rank_certificate as _verify

    return _verify(case, rank_certificate)
