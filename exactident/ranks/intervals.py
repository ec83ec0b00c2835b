"""Certified intervals for ``R_Gamma``: the verdict first, the exact rank only when it is cheap.

The rank rules need less than ``R_Gamma`` itself: ``C_S`` fails as soon as one
certified kernel vector of ``Gamma`` exists, and ``C_N`` holds as soon as an upper
bound on ``R_Gamma`` is below a lower bound on ``R_A`` (Theorems 8-9, Prop. 11).
:func:`gamma_upper_bound` looks for such an upper bound among the cheap certified
kernel vectors (the semi-local kernel, :func:`exactident.ranks.kernels.semi_local_kernel`,
then single kernel vectors by p-adic lifting, :mod:`exactident.linalg.dixon`); the
rank is then reported as the certified interval ``[rank_p Gamma, dim - k]`` beside a
Monte Carlo value with its proven error bound (:func:`monte_carlo_gamma`).

Called by :mod:`exactident.ranks.certify`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import flint
import numpy as np

from exactident.budget import stage
from exactident.linalg.certified import (
    _zero_guard,
    has_full_column_rank,
    kernel_is_checkable,
    kernel_to_integer_columns,
)
from exactident.linalg.dixon import dixon_solve
from exactident.linalg.modular import random_primes
from exactident.model.fixed_edges import FixedEdges
from exactident.model.gamma_modular import ModularData, gamma_entry_bound, gamma_integer, gamma_mod_p
from exactident.model.network import Network

__all__ = ["CHECK_BLOCK", "DIXON_FIRST_ENTRIES", "MAX_DIXON_VECTORS", "MAX_EXACT_DIXON_VECTORS",
           "MONTE_CARLO_TARGET", "PER_LIFT_STEP", "SOLUTION_BITS_PER_PIVOT", "close_within", "dixon_kernel_vectors",
           "gamma_upper_bound", "interval_why", "lifting_estimate", "lifting_seconds", "lifting_steps",
           "monte_carlo_gamma"]


#: Dixon vectors only for ``Gamma`` above this many entries: below it CRT and FLINT's nullspace are quick
#: (the verdict-first path then leaves the gap to the exact path) and their certificates stay as they were.
DIXON_FIRST_ENTRIES = 200_000
#: Most kernel vectors asked of :func:`dixon_kernel_vectors` by :func:`gamma_upper_bound`.
MAX_DIXON_VECTORS = 16
#: The same when the exact rank is asked for (the whole kernel: one solve with that many right-hand sides).
MAX_EXACT_DIXON_VECTORS = 64

def gamma_upper_bound(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                      fixed: FixedEdges, lower: tuple[int, int, np.ndarray | None], below: int, *,
                      avoid: int, data: ModularData, rng: random.Random,
                      semi_local: Callable[[], list[dict[int, flint.fmpq]]],
                      max_missing: int = MAX_DIXON_VECTORS,
                      entry_bound: Callable[[], int] | None = None,
                      source: Callable[[], str] | None = None,
                      lifting_seconds: float | None = None) -> dict[str, Any] | None:
    """A certified upper bound ``dim - k < below`` on ``rank Gamma`` from cheap kernel vectors, or None.

    Parameters
    ----------
    net, X, pattern, fixed
        As for :func:`exactident.model.gamma.gamma_exact`.
    lower : (rank, prime, image)
        ``rank Gamma mod p`` (a lower bound, :func:`exactident.linalg.lower_bound.modular_lower_bound`).
    below : int
        The bound must be below this (a certified lower bound on ``R_A``, or ``dim``).
    semi_local : callable
        The semi-local kernel (exact vectors of ``ker Gamma`` over Q), built once by the caller.
    max_missing : int
        Most vectors asked of :func:`dixon_kernel_vectors` beyond the semi-local ones.
    entry_bound : callable, optional
        :func:`~exactident.model.gamma_modular.gamma_entry_bound` of the case, cached by the caller.
    source : callable, optional
        The name of ``semi_local``'s construction in the certificate (read after it is built; default
        ``"semi-local"``; ``"shifted"`` for :func:`exactident.ranks.shifted.structural_kernel`).
    lifting_seconds : float, optional
        A budget for the Dixon vectors, in the cost model's seconds (:func:`lifting_steps`): the
        lifting stops after that many steps and no vector is returned (no FLINT solve either).

    Returns
    -------
    dict or None
        The ``upper`` part of a rank certificate: ``{"kind": "kernel", "bound": dim - k,
        "source": "semi-local", "nullity": k}`` (rebuilt and checked by the verifier), or
        ``{"kind": "kernel", "bound", "source": "dixon", "kernel", "primes"}`` (explicit
        vectors, checked like a CRT kernel).  None when no cheap bound is below ``below``.
    """
    from exactident.ranks.kernels import independent_subset

    dim = net.dim
    shape = (len(X) * net.widths[-1], dim)
    bound = entry_bound or (lambda: gamma_entry_bound(net, X))
    need = max(1, dim - below + 1)  # independent kernel vectors for dim - k < below
    K = semi_local()
    image = lambda p: gamma_mod_p(net, X, pattern, fixed, p, avoid, data)  # noqa: E731
    if K and len(K) >= need:
        K_int = kernel_to_integer_columns(K)
        q = random_primes(1, avoid, rng, exclude=[lower[1]])[0]
        if has_full_column_rank(K_int, dim, q) and kernel_is_checkable(K_int, shape, bound()) \
                and _zero_guard(image, dim, K_int, avoid, rng, [lower[1], q]):
            return {"kind": "kernel", "bound": dim - len(K), "source": source() if source else "semi-local",
                    "nullity": len(K)}
        return None  # the semi-local vectors failed a check (dependent, or not 0 mod a prime): trust none of them
    if need - len(K) > max_missing or need > dim - lower[0] or shape[0] * shape[1] <= DIXON_FIRST_ENTRIES:
        return None
    # single kernel vectors over Q (checked exactly on every row by dixon_kernel_vectors), explicit
    extra = dixon_kernel_vectors(net, X, pattern, fixed, need - len(K) + 2, avoid=avoid, data=data, rng=rng,
                                 known=K, lifting_seconds=lifting_seconds)
    both = independent_subset(list(K) + extra, dim)
    if len(both) < need:
        return None
    K_int = kernel_to_integer_columns(both)
    if not kernel_is_checkable(K_int, shape, bound()):
        return None
    from exactident.linalg.certified import _fmt

    cols = [[[i, _fmt(int(v.p), int(v.q))] for i, v in sorted(col.items())] for col in both]
    return {"kind": "kernel", "bound": dim - len(both), "source": "dixon", "kernel": cols}


def close_within(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray], fixed: FixedEdges,
                 lower: tuple[int, int, np.ndarray | None], seconds: float, *, avoid: int, data: ModularData,
                 rng: random.Random, semi_local: Callable[[], list[dict[int, flint.fmpq]]],
                 source: Callable[[], str] | None = None) -> tuple[bool, dict[str, Any] | None]:
    """Certify ``R_Gamma = lower[0]`` with kernel vectors whose Dixon lifting ends within ``seconds`` (the model).

    The default's *exact ranks when cheap*: the size model (:func:`exactident.ranks.estimate.exact_rank_is_cheap`)
    cannot see the bits of the missing kernel vectors, and Dixon's steps grow with them (random-16x4-1: 211
    steps, 4,200-bit solutions, 12 s where the model said 0.4 s); the lifting is capped at
    :func:`lifting_steps` for ``seconds`` instead, a count, so the outcome does not depend on the machine.
    The caller prices the lifting first (:func:`lifting_estimate`) and does not call this when it cannot end
    within ``seconds``.

    Returns
    -------
    (tried, upper)
        ``tried`` False when ``Gamma`` has at most :data:`DIXON_FIRST_ENTRIES` entries (CRT and FLINT's
        nullspace are quick there) or more than :data:`MAX_EXACT_DIXON_VECTORS` vectors are missing beyond
        ``semi_local``'s: the exact path decides, as before.  ``upper``: the rank certificate's ``upper`` part
        (:func:`gamma_upper_bound`) when it meets ``lower[0]``, else None (not closed within the budget).
    """
    dim, shape = net.dim, (len(X) * net.widths[-1], net.dim)
    if shape[0] * shape[1] <= DIXON_FIRST_ENTRIES or dim - lower[0] - len(semi_local()) > MAX_EXACT_DIXON_VECTORS:
        return False, None
    up = gamma_upper_bound(net, X, pattern, fixed, lower, lower[0] + 1, avoid=avoid, data=data, rng=rng,
                           semi_local=semi_local, max_missing=MAX_EXACT_DIXON_VECTORS, source=source,
                           lifting_seconds=seconds)
    return True, (up if up is not None and up["bound"] == lower[0] else None)


def monte_carlo_gamma(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                      fixed: FixedEdges, lower: tuple[int, int, np.ndarray | None], upper: int, *, avoid: int,
                      data: ModularData, rng: random.Random, max_primes: int = 1,
                      entry_bound: Callable[[], int] | None = None,
                      lower_uniform: bool = False) -> dict[str, Any] | None:
    """The Monte Carlo value of ``rank Gamma`` inside a certified interval, with error bound ``<= MONTE_CARLO_TARGET``.

    The value is the largest rank mod uniformly drawn primes (the interval's lower end counts too; a
    rank mod p is a lower bound, so it never exceeds the certified upper end), and the proven bound
    of :func:`exactident.linalg.montecarlo.failure_bound` on the chance that it is below the exact
    rank.  The primes are as many as that bound needs to reach :data:`MONTE_CARLO_TARGET`, from the
    BLAS range (``lower``'s prime counts as the first when ``lower_uniform``: it was drawn uniformly
    from that range and its rank taken the Monte Carlo way, not by a wide sketch) or from the
    word-size range (FLINT, for ``Gamma`` of at most ``MAX_MONTE_CARLO_WORD`` entries),
    whichever costs less by :func:`exactident.ranks.estimate.verdict_rank_seconds`.  When either costs
    more than the verdict's own rank stage (and more than
    :data:`~exactident.ranks.estimate.EXACT_FREE_SECONDS`), no value is given: a Monte Carlo value whose
    error bound is not small is not worth its label.  ``max_primes`` is ignored (kept for callers).

    Returns
    -------
    dict or None
        ``{"rank_gamma": value, "error_probability": e}`` with ``e <= MONTE_CARLO_TARGET`` (0 when
        ``value`` reaches the certified upper bound), or None (no Monte Carlo value).
    """
    from exactident.linalg.blas_modp import BLAS_PRIME_HI, BLAS_PRIME_LO
    from exactident.linalg.modular import PRIME_HI, PRIME_LO
    from exactident.linalg.montecarlo import monte_carlo_rank, primes_for, very_tall
    from exactident.ranks.estimate import EXACT_FREE_SECONDS, verdict_rank_seconds

    if lower[0] >= upper:
        return {"rank_gamma": lower[0], "error_probability": 0.0}
    rows, dim = len(X) * net.widths[-1], net.dim
    if rows < dim and rows * dim > MAX_MONTE_CARLO_WIDE:
        return None  # one more rank of a wide Gamma costs what the verdict did, and a BLAS prime's bound is ~1
    B = (entry_bound or (lambda: gamma_entry_bound(net, X)))()
    sketch = very_tall(rows, dim)
    first_counts = lower_uniform and dim <= rows + rows // 8 + 16  # not a wide sketch's rank (modular_lower_bound)
    one = verdict_rank_seconds(rows, dim, lower[0])  # one more rank mod p, as the verdict's
    plans = []
    k = primes_for(MONTE_CARLO_TARGET, (rows, dim), B, avoid, BLAS_PRIME_LO, BLAS_PRIME_HI, sketch)
    if k is not None:
        plans.append(((k - first_counts) * one, (BLAS_PRIME_LO, BLAS_PRIME_HI), k, first_counts))
    k = primes_for(MONTE_CARLO_TARGET, (rows, dim), B, avoid, PRIME_LO, PRIME_HI, sketch)
    if k is not None and rows * dim <= MAX_MONTE_CARLO_WORD:
        plans.append((k * one * WORD_PRIME_COST, (PRIME_LO, PRIME_HI), k, False))
    plans = [p for p in plans if p[0] <= max(EXACT_FREE_SECONDS, one)]
    if not plans:
        return None
    _cost, prime_range, k, first_uniform = min(plans, key=lambda p: p[0])
    if k > first_uniform:
        stage("ranks mod p (Monte Carlo)", rows=rows, cols=dim, primes=k - first_uniform)
    value, err = monte_carlo_rank(lambda q: gamma_mod_p(net, X, pattern, fixed, q, avoid, data), (rows, dim),
                                  avoid, lambda: B, rng, first=lower, max_primes=k, target=MONTE_CARLO_TARGET,
                                  prime_range=prime_range, first_uniform=first_uniform)
    if value >= upper:
        return {"rank_gamma": value, "error_probability": 0.0}
    if err > MONTE_CARLO_TARGET:  # cannot happen (k primes reach the target); never label a weaker bound
        return None
    return {"rank_gamma": value, "error_probability": err}


#: Largest proven error probability of a reported Monte Carlo value (else none is given).
MONTE_CARLO_TARGET = 1e-6
#: A rank mod a word-size prime (FLINT) against one mod a BLAS prime, on the same ``Gamma`` (digits 64-64-10:
#: 55 s against 20 s for the verdict).
WORD_PRIME_COST = 3.0


#: A wide ``Gamma`` with more entries than this gets no Monte Carlo value (one more rank costs what
#: the verdict did, and a BLAS prime's bound is near 1 at this size).
MAX_MONTE_CARLO_WIDE = 200_000_000
#: Past this many entries no word-size Monte Carlo prime is drawn (a FLINT rank costs more than the verdict).
MAX_MONTE_CARLO_WORD = 20_000_000

#: Samples per block of the exact check ``Gamma' u = 0`` (object arrays: memory, not speed).
CHECK_BLOCK = 64


def dixon_kernel_vectors(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                         fixed: FixedEdges, count: int, *, avoid: int, data: ModularData,
                         rng: random.Random, known: Sequence[dict[int, flint.fmpq]] = (),
                         lifting_seconds: float | None = None) -> list[dict[int, flint.fmpq]]:
    """Up to ``count`` exact kernel vectors of ``Gamma`` by solving a nonsingular subsystem over Q.

    Mod a prime p (BLAS): pivot rows ``R`` and columns ``C`` of ``Gamma`` (of a row subset for a tall
    matrix, grown until the candidate vanishes mod p on every row), ``r = |C|``.  For a free column
    ``c``, the ``r x r`` system ``Gamma'[R, C] x = -Gamma'[R, c]`` (``Gamma' = Gamma diag(s)`` in
    integers, :func:`exactident.model.gamma_modular.gamma_integer`) is nonsingular (its determinant
    is nonzero mod p) and solved over Q by FLINT (``fmpq_mat.solve``, Dixon's p-adic lifting).  The
    vector ``u = e_c + x`` on ``C`` is then checked exactly over Z on every row (``Gamma' d u = 0``
    for the common denominator ``d``), block by block; a vector that fails is dropped.  Vectors for
    distinct free columns of one pivot set are independent.  Returned as ``s u`` (kernel of ``Gamma``).

    ``known`` kernel vectors (the semi-local ones): a kernel vector is determined by its free
    coordinates, so the free columns chosen are those outside the pivots of the known vectors'
    free coordinates mod p; the new vectors then complete the known ones instead of repeating them.

    ``lifting_seconds`` caps the lifting at :func:`lifting_steps` steps (deterministic: a count, not a
    clock); past it no vector is returned, where without it FLINT's solve finishes the job.
    """
    from exactident.linalg.blas_modp import blas_primes, matmul_blas, pivots_blas, to_symmetric
    from exactident.linalg.montecarlo import very_tall

    if count <= 0:
        return []
    N_L = net.widths[-1]
    p = blas_primes(1, avoid, rng)[0]
    Gp = gamma_mod_p(net, X, pattern, fixed, p, avoid, data)
    m, n = Gp.shape
    rows = np.arange(m) if not very_tall(m, n) else np.array(sorted(rng.sample(range(m), n + 16)))
    for _round in range(4):
        R, C, Binv = pivots_blas(Gp[rows], p, need_inv=True)
        pivot_set = set(C)
        free = _new_directions([j for j in range(n) if j not in pivot_set], known, p)[:count]
        if not free or Binv is None:
            return []
        sub = Gp[rows[R]]
        x = -matmul_blas(to_symmetric(Binv, p), to_symmetric(sub[:, free], p), p)  # r x k, mod p
        V = np.zeros((n, len(free)), dtype=np.int64)
        V[C] = x.astype(np.int64) % p
        V[free, range(len(free))] = 1
        bad = np.flatnonzero(matmul_blas(to_symmetric(Gp, p), to_symmetric(V, p), p).any(axis=1))
        if len(bad) == 0:
            break
        rows = np.union1d(rows, bad[:n])  # rows the candidates miss mod p
    else:
        return []
    stage("kernel", source="dixon", rows=len(R), cols=n, vectors=len(free))
    prow = rows[R]
    samples = sorted(set(int(i) // N_L for i in prow))
    G, s = gamma_integer(net, X, pattern, fixed, samples, data)
    pos = {smp: k for k, smp in enumerate(samples)}
    sel = [pos[int(i) // N_L] * N_L + int(i) % N_L for i in prow]
    Gs = G[sel]
    BC = Gs[:, C]
    B = flint.fmpz_mat(len(C), len(C), [int(v) for v in BC.ravel()])
    rhs = flint.fmpz_mat(len(C), len(free), [-int(v) for v in Gs[:, free].ravel()])
    # Gamma' = Gamma diag(s): the inverse mod p of its pivot block is diag(1/s_C) times that of Gamma's
    sinv = np.array([pow(int(v) % p, -1, p) for v in s[C]], dtype=np.int64)
    Binv_s = (sinv[:, None] * (Binv.astype(np.int64) % p)) % p
    if lifting_seconds is not None:  # capped: the steps grow with the bits of the solution, which no size predicts
        sol = dixon_solve(B, rhs, Binv_s, p, max_steps=lifting_steps(lifting_seconds, len(C), len(free)))
        if sol is None:
            return []
    else:
        sol = dixon_solve(B, rhs, Binv_s, p)  # early-terminating p-adic lifting (small solutions: few steps)
    if sol is None:
        sol = flint.fmpq_mat(B).solve(flint.fmpq_mat(rhs))  # FLINT (Dixon to the Hadamard bound)
    cands = []
    for j, c in enumerate(free):
        u = {c: flint.fmpq(1)}
        u.update({C[t]: sol[t, j] for t in range(len(C)) if sol[t, j] != 0})
        cands.append(u)
    ok = _kernel_columns_vanish(net, X, pattern, fixed, cands, data)
    return [{i: v * int(s[i]) for i, v in u.items()} for u, good in zip(cands, ok) if good]


#: CPU seconds of one Dixon lifting step per ``r^2 k`` (``r x r`` block, ``k`` right-hand sides): a step is a
#: BLAS product mod p plus an exact FLINT product ``B x``.  Fitted on random-16x4-1 of
#: ``benchmarks/train_deficient.py`` (1302 x 1041 ``Gamma``, ``r = 923``, ``k = 8``): 211 steps (4,200-bit
#: solutions) in 9.4 s CPU, one BLAS thread, 2026-12-07 (load 10 on 2 cores).
PER_LIFT_STEP = 6.5e-9


def lifting_steps(seconds: float, r: int, k: int) -> int:
    """Most Dixon steps on an ``r x r`` block with ``k`` right-hand sides within ``seconds`` (model), at least 1.

    Examples
    --------
    >>> lifting_steps(2.0, 923, 8)  # random-16x4-1's block: 211 steps needed, 45 within 2 s
    45
    """
    return max(1, int(seconds / (PER_LIFT_STEP * max(r, 1) ** 2 * max(k, 1))))


#: Bits of a lifted kernel vector (numerators and denominators together) per row of the ``r x r`` pivot block,
#: the size Dixon's steps must reach before rational reconstruction can succeed.  Measured on the deep random
#: nets of ``benchmarks/train_deficient.py``, one BLAS thread, 2026-12-07: random-16x4-1, ``r = 923``, 4,200 bits
#: (4.55 per row); random-16x3-1-s80717 (a dead neuron), ``r = 760``, 3,752 bits (4.94 per row).  Hadamard's
#: bound is no guide: 325,000 bits on the latter block.  A model, not a bound: a structured kernel vector can
#: be much smaller (the semi-local and shifted kernels find those first).
SOLUTION_BITS_PER_PIVOT = 4.5


def lifting_seconds(r: int, k: int, prime_bits: float = 20.0) -> float:
    """Model CPU seconds for Dixon's lifting to *end* on an ``r x r`` block with ``k`` right-hand sides.

    The steps are those that reach :data:`SOLUTION_BITS_PER_PIVOT` ``* r`` bits (``prime_bits`` per step), rounded
    up to the next rational reconstruction attempt of :func:`exactident.linalg.dixon.dixon_solve` (after 1, 2,
    3, 4, 6, 9, ... steps), each costing :data:`PER_LIFT_STEP` ``r^2 k``.

    Examples
    --------
    >>> round(lifting_seconds(760, 3), 2)  # random-16x3-1-s80717: 211 steps (2.8 s CPU measured)
    2.38
    """
    need = math.ceil(SOLUTION_BITS_PER_PIVOT * max(r, 1) / prime_bits)
    step, at = 1, 1
    while at < need:
        step += 1
        at = max(at + 1, int(at * 1.5))
    return at * PER_LIFT_STEP * max(r, 1) ** 2 * max(k, 1)


def lifting_estimate(net: Network, X: Sequence[Sequence[flint.fmpq]], lower: tuple[int, int, np.ndarray | None],
                     known: int) -> float | None:
    """:func:`lifting_seconds` of the kernel vectors :func:`close_within` would lift, or None (it lifts none).

    ``known`` is the number of structural kernel vectors already certified.  None when ``Gamma`` has at most
    :data:`DIXON_FIRST_ENTRIES` entries, when no vector is missing, or when more than
    :data:`MAX_EXACT_DIXON_VECTORS` are (then :func:`close_within` leaves the exact rank to the exact path).
    The block is about ``rank_p x rank_p`` and the right-hand sides those of :func:`gamma_upper_bound`
    (the missing vectors and two spare ones).
    """
    dim, rows = net.dim, len(X) * net.widths[-1]
    missing = dim - lower[0] - known
    if rows * dim <= DIXON_FIRST_ENTRIES or missing <= 0 or missing > MAX_EXACT_DIXON_VECTORS:
        return None
    return lifting_seconds(lower[0], missing + 2)


def _new_directions(free: list[int], known: Sequence[dict[int, flint.fmpq]], p: int) -> list[int]:
    """The free columns outside the pivots of the known vectors' free coordinates (mod p), first."""
    from exactident.linalg.blas_modp import pivots_blas
    from exactident.linalg.certified import kernel_to_integer_columns

    if not known or not free:
        return free
    at = {c: t for t, c in enumerate(free)}
    KF = np.zeros((len(known), len(free)), dtype=np.int64)
    for r, col in enumerate(kernel_to_integer_columns(known)):
        for i, v in col.items():
            if i in at:
                KF[r, at[i]] = v % p
    _R, P, _ = pivots_blas(KF, p)
    taken = {free[t] for t in P}
    return [c for c in free if c not in taken] + [free[t] for t in P]


def _kernel_columns_vanish(net, X, pattern, fixed, cols: list[dict[int, flint.fmpq]], data: ModularData) -> list[bool]:
    """For each column ``u``: is ``Gamma' u = 0`` exactly over Z on every row?  (Blocks of :data:`CHECK_BLOCK`.)"""
    from exactident.linalg.certified import kernel_to_integer_columns

    K = kernel_to_integer_columns(cols)
    support = sorted(set().union(*K)) if K else []
    pos = {i: t for t, i in enumerate(support)}
    U = flint.fmpz_mat(len(support), len(cols))
    for j, col in enumerate(K):
        for i, v in col.items():
            U[pos[i], j] = v
    ok = np.ones(len(cols), dtype=bool)
    for start in range(0, len(X), CHECK_BLOCK):
        G, _s = gamma_integer(net, X, pattern, fixed, range(start, min(start + CHECK_BLOCK, len(X))), data)
        Gs = G[:, support]
        prod = flint.fmpz_mat(Gs.shape[0], len(support), [int(v) for v in Gs.ravel()]) * U  # exact, FLINT
        ok &= ~np.array([v != 0 for v in prod.entries()], dtype=bool).reshape(-1, len(cols)).any(axis=0)
        if not ok.any():
            break
    return [bool(v) for v in ok]


def interval_why(interval: tuple[int, int], exact_estimate: Mapping[str, float] | None) -> dict[str, Any]:
    """Why ``R_Gamma`` is reported as the certified ``interval`` (the report's ``rank_gamma_interval_why``).

    ``{"why": "exact-rank-costly", "missing_vectors", "exact_seconds", "verdict_seconds"}`` when the cost
    model (:func:`exactident.ranks.estimate.exact_rank_is_cheap`) priced the exact rank above the verdict's
    rank stage (and above :data:`~exactident.ranks.estimate.EXACT_FREE_SECONDS`), or :func:`lifting_estimate`
    priced the Dixon lifting above the budget before it started, with its two estimates (CPU
    seconds, 3 significant digits: models of the sizes, not clocks); ``{"why": "lifting-capped", ...,
    "budget_seconds"}`` when the model said cheap but the kernel vectors' lifting did not end within that
    budget (:func:`close_within`); ``{"why": "verdict-first", "missing_vectors"}`` when the interval was asked
    for (``verdict_first``), however cheap the exact rank.  ``missing_vectors`` is ``hi - lo``, the kernel
    vectors the exact rank still needs beyond the certified ones.  Not a claim about the case:
    ``verify-certificate`` lists it as not verified.

    Examples
    --------
    >>> interval_why((2176, 2181), {"seconds": 20.71234, "verdict_seconds": 5.8765})
    {'why': 'exact-rank-costly', 'missing_vectors': 5, 'exact_seconds': 20.7, 'verdict_seconds': 5.88}
    >>> why = interval_why((923, 929), {"seconds": 0.38, "verdict_seconds": 0.09, "budget": 2.0, "lifting_capped": 1})
    >>> why["why"], why["missing_vectors"], why["budget_seconds"]
    ('lifting-capped', 6, 2.0)
    >>> interval_why((109, 111), None)
    {'why': 'verdict-first', 'missing_vectors': 2}
    """
    capped = bool(exact_estimate and exact_estimate.get("lifting_capped"))
    out: dict[str, Any] = {"why": "verdict-first" if not exact_estimate else "lifting-capped" if capped
                           else "exact-rank-costly", "missing_vectors": int(interval[1]) - int(interval[0])}
    if exact_estimate:
        keys = (("exact_seconds", "seconds"), ("verdict_seconds", "verdict_seconds"))
        out.update({k: float(f"{float(exact_estimate[v]):.3g}") for k, v in (*keys, *((("budget_seconds", "budget"),)
                                                                                     if capped else ()))})
    return out
