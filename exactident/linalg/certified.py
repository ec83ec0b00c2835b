"""Certified exact ranks from ranks mod p and exact kernel certificates (paper Props. 10-11, Theorems 8-9).

A rank is certified exactly when a lower bound (a rank mod p,
:mod:`exactident.linalg.modular`) meets an upper bound, which is either
structural (``min(rows, cols)``, ``|P|``, ``rank Gamma <= R_A`` from
Prop. 11, supplied by the caller) or an exact kernel basis ``K``: ``M K = 0``
and ``K`` of full column rank give ``rank M <= ncols - ncols(K)``.

Kernel certificates are found mod p (the reduced-echelon kernel basis is
unique over Q, so its residues for several primes are lifted by CRT and
rational reconstruction) and accepted only after an exact check: ``M K`` is an
integer matrix (after scaling) with ``|entries| <= bound``, and it is zero mod
primes whose product exceeds the bound, so it is zero.

Works on any matrix given as a function ``p -> M mod p``; knows nothing of
networks.  Called by :mod:`exactident.ranks.certify` and
:mod:`exactident.verify.rank`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from math import gcd
from typing import Any

import flint
import numpy as np

from exactident.errors import InvariantViolation
from exactident.linalg.blas_modp import (
    blas_primes,
    rref_kernel_blas,
)
from exactident.linalg.lower_bound import modular_lower_bound
from exactident.linalg.modular import (
    matmul_mod,
    random_primes,
    rank_mod_p,
    rational_reconstruction,
    require_prime,
    rref_kernel_mod_p,
    to_nmod_mat,
)

__all__ = [
    "MAX_CHECK_PRIMES",
    "MAX_CRT_PRIMES",
    "MAX_EXACT_CHECK_ENTRIES",
    "CertifiedRank",
    "certified_rank",
    "has_full_column_rank",
    "kernel_is_checkable",
    "kernel_is_zero_mod",
    "kernel_to_integer_columns",
]


#: Most primes (of ~30 bits) for the exact zero check ``M K = 0`` of one kernel candidate;
#: beyond it (entries of many thousand digits) the candidate is dropped and the caller
#: falls back to exact rational elimination, whose cost does not explode the same way.
MAX_CHECK_PRIMES = 120
#: Most primes for the CRT reconstruction of one kernel (before the exact-nullspace fallback).
MAX_CRT_PRIMES = 60
#: A kernel rebuilt by the verifier whose zero check needs more than ``MAX_CHECK_PRIMES`` primes is
#: checked by one exact product over Q instead, for matrices of at most this many entries; a
#: kernel that fits neither is not used (:func:`kernel_is_checkable`).
MAX_EXACT_CHECK_ENTRIES = 4_000_000


def _stage(name: str, **sizes: Any) -> None:
    from exactident.budget import stage

    stage(name, **sizes)


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
    # Through fmpz: str(int) refuses more than 4300 digits (Python's interpreter-wide limit).
    p = str(flint.fmpz(num))
    return p if den == 1 else f"{p}/{flint.fmpz(den)}"


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


def _zero_guard(image_mod_p, n, K_int, avoid, rng, used) -> bool:
    """``M K = 0`` mod one small prime, by BLAS: a cheap guard, not a proof (the verifier proves it)."""
    from exactident.linalg.blas_modp import matmul_blas, to_symmetric

    q = blas_primes(1, avoid, rng, exclude=used)[0]
    Kq = np.zeros((n, len(K_int)), dtype=np.int64)
    for c, col in enumerate(K_int):
        for i, v in col.items():
            Kq[i, c] = v % q
    return not matmul_blas(to_symmetric(image_mod_p(q), q), to_symmetric(Kq, q), q).any()


def kernel_is_checkable(K_int: Sequence[Mapping[int, int]], shape: tuple[int, int], entry_bound: int) -> bool:
    """Can ``M K = 0`` be proved within the caps: ``MAX_CHECK_PRIMES`` primes, or an exact product?

    ``|D M K| <= ncols * entry_bound * max |K|``; each prime of ``[2**30, 2**31)`` gives 30
    bits.  Past the primes, one exact product is allowed when ``M`` has at most
    :data:`MAX_EXACT_CHECK_ENTRIES` entries.  The verifier applies the same caps
    (:mod:`exactident.verify.rank`), so a certificate built on a checkable kernel verifies.

    Examples
    --------
    >>> kernel_is_checkable([{0: 2**5000}], (10**4, 10**3), 1)
    False
    >>> kernel_is_checkable([{0: 2**5000}], (10, 10), 1), kernel_is_checkable([{0: 3}], (10**4, 10**3), 1)
    (True, True)
    """
    size = shape[1] * entry_bound * max((abs(v) for col in K_int for v in col.values()), default=0)
    return size.bit_length() < 30 * MAX_CHECK_PRIMES or shape[0] * shape[1] <= MAX_EXACT_CHECK_ENTRIES


def _bits_needed(bound: int) -> int:
    return bound.bit_length() + 1


def certified_rank(image_mod_p: Callable[[int], np.ndarray], shape: tuple[int, int], *,
                   avoid: int, entry_bound: Callable[[], int],
                   upper_bounds: Mapping[str, int] | None = None,
                   rng: random.Random | None = None, n_lower_primes: int = 1,
                   max_primes: int | None = None,
                   lower: tuple[int, int, np.ndarray | None] | None = None,
                   exact_kernel: Callable[[], list[dict[int, flint.fmpq]]] | None = None,
                   local_kernel: Callable[[], list[dict[int, flint.fmpq]]] | None = None,
                   local_kernels: Sequence[tuple[str | Callable[[], str],
                                                 Callable[[], list[dict[int, flint.fmpq]]]]] = (),
                   blas: bool = False, use_crt: bool = True,
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
        A lower bound already computed by :func:`exactident.linalg.lower_bound.modular_lower_bound`.
    exact_kernel : callable () -> list of sparse fmpq columns, optional
        An exact kernel basis (e.g. FLINT's fraction-free nullspace), used
        when reconstruction needs too many primes (huge kernel entries); it is
        checked like a reconstructed one.
    local_kernel : callable () -> list of sparse fmpq columns, optional
        Kernel vectors the caller has already proved exactly (e.g. from small
        blocks of ``M``); tried first, and accepted without a modular zero
        check when there are ``n - lower`` of them (full column rank is still
        checked).  The verifier re-checks them mod its own primes.
    local_kernels : sequence of (source, callable), optional
        More such constructions, tried in order after ``local_kernel``; the
        certificate's ``upper.source`` names the one that closed the gap (a callable name is
        read after its construction is built).
    blas : bool
        Primes below ``2**21`` and BLAS elimination for the lower bound and the
        CRT kernel (word-size primes and FLINT otherwise); zero checks always use
        word-size primes.
    use_crt : bool
        Try the CRT reconstruction of a kernel (at most :data:`MAX_CRT_PRIMES` primes).

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
        lower = modular_lower_bound(image_mod_p, avoid=avoid, rng=rng, n_primes=n_lower_primes, stop_at=ub,
                                    blas=blas)
    r_low, lower_prime, image = lower
    if image is None:  # a wide sketch's bound: the image is built now, for the kernels below
        image = image_mod_p(lower_prime)
    used = [lower_prime]
    if r_low > ub:
        raise InvariantViolation(f"rank mod {lower_prime} = {r_low} exceeds proven upper bound {ub} ({ub_kind})")
    cert: dict[str, Any] = {"rank": r_low, "shape": [m, n],
                            "lower": {"prime": lower_prime, "rank_mod_p": r_low}}
    if r_low == ub:
        cert["upper"] = {"kind": ub_kind, "bound": ub}
        return CertifiedRank(r_low, cert)
    if max_primes is None:
        max_primes = 8 if exact_kernel is not None and m * n <= 200_000 else MAX_CRT_PRIMES
    max_primes = min(max_primes, MAX_CRT_PRIMES)
    kernel = None
    sources = ([("local", local_kernel)] if local_kernel is not None else []) + list(local_kernels)
    for name, build in sources:
        _stage("kernel", source=name, rows=m, cols=n)
        K = build()
        name = name() if callable(name) else name
        if K and n - len(K) == r_low:
            q = random_primes(1, avoid, rng, exclude=used)[0]
            K_int = kernel_to_integer_columns(K)
            # K is exact by construction; M K = 0 mod one prime guards against a construction bug
            # (the verifier proves M K = 0 with enough primes, or exactly: only if that fits its caps)
            if has_full_column_rank(K_int, n, q) and kernel_is_checkable(K_int, shape, entry_bound()) \
                    and _zero_guard(image_mod_p, n, K_int, avoid, rng, used):
                # K is not stored: the verifier rebuilds it from the case (compact certificate)
                cert["upper"] = {"kind": "kernel", "bound": r_low, "source": name, "nullity": len(K)}
                return CertifiedRank(r_low, cert)
    source = "crt"
    if use_crt:
        _stage("kernel", source="crt", rows=m, cols=n)
        kernel = _reconstruct_kernel(image_mod_p, image, lower_prime, shape, avoid,
                                     entry_bound, rng, max_primes, used, blas)
    if kernel is None and exact_kernel is not None:
        source = "exact-nullspace"
        _stage("kernel", source=source, rows=m, cols=n)
        K = exact_kernel()
        if n - len(K) == r_low:
            check_primes = _check_kernel(K, image_mod_p, n, avoid, entry_bound(), rng, used)
            kernel = (K, check_primes) if check_primes else None
    if kernel is None:
        return None
    K, check_primes = kernel
    if n - len(K) != r_low:
        return None
    cert["upper"] = {"kind": "kernel", "bound": n - len(K), "source": source,
                     "kernel": [[[i, _fmt(int(v.p), int(v.q))] for i, v in sorted(col.items())] for col in K],
                     "primes": check_primes}
    return CertifiedRank(r_low, cert)


def _check_kernel(K, image_mod_p, n, avoid, bound_M, rng, used) -> list[int] | None:
    """Fresh primes proving ``M K = 0`` exactly, with ``K`` of full column rank; None if it is not."""
    K_int = kernel_to_integer_columns(K)
    bound_K = max((abs(v) for col in K_int for v in col.values()), default=0)
    bits = _bits_needed(n * bound_M * bound_K)
    if bits > 29 * MAX_CHECK_PRIMES:
        return None  # too many primes: the caller falls back to exact elimination
    check: list[int] = []
    while sum(q.bit_length() - 1 for q in check) < bits:
        check += random_primes(1, avoid, rng, exclude=used + check)
    used.extend(check)
    if has_full_column_rank(K_int, n, check[0]) and kernel_is_zero_mod(image_mod_p, n, K_int, check, avoid):
        return check
    return None


def _reconstruct_kernel(image_mod_p, first_image, first_prime, shape, avoid, entry_bound, rng,
                        max_primes, used, blas=False):
    """CRT + rational reconstruction of the reduced kernel basis; exact check. None on failure."""
    _m, n = shape
    rref = rref_kernel_blas if blas else rref_kernel_mod_p
    draw = blas_primes if blas else random_primes
    pivots, free, N = rref(first_image, first_prime)
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
        p = draw(1, avoid, rng, exclude=used)[0]
        used.append(p)
        piv_p, free_p, N_p = rref(image_mod_p(p), p)
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


def has_full_column_rank(K_int, n, q) -> bool:
    """Does the integer matrix ``K`` have full column rank mod the prime ``q``?

    A ``True`` answer is a proof of full column rank over Q: a ``k x k`` minor of ``K``
    nonzero mod ``q`` is a nonzero integer.  (``False`` proves nothing over Q: ``q``
    may divide every such minor.)  With ``M K = 0``, full column rank of ``K`` gives
    ``dim ker M >= k``, i.e. the upper bound ``rank M <= n - k``.

    Parameters
    ----------
    K_int : sequence of dict int -> int
        The ``k`` columns of ``K`` (in Z), sparse: row index -> nonzero entry.
    n : int
        Number of rows of ``K``.
    q : int
        A prime in ``[3, 2**31)``; ``K`` is reduced to Z/qZ.

    Returns
    -------
    bool
        ``rank (K mod q) == k`` (``True`` for ``k = 0``).

    Raises
    ------
    exactident.errors.InvariantViolation
        ``q`` is not a prime in range.

    Examples
    --------
    ``K = [[1, 3], [2, -1]]`` has determinant ``-7``: full rank over Q, not mod 7.

    >>> K = [{0: 1, 1: 2}, {0: 3, 1: -1}]
    >>> has_full_column_rank(K, 2, 11), has_full_column_rank(K, 2, 7)
    (True, False)
    """
    k = len(K_int)
    Kq = np.zeros((n, k), dtype=np.int64)
    for c, col in enumerate(K_int):
        for i, v in col.items():
            Kq[i, c] = v % q
    return rank_mod_p(Kq, q) == k
