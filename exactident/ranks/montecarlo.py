"""Monte Carlo ranks of ``Gamma`` and ``alpha`` (``--certify none``), with a proven error bound.

Called by :func:`exactident.ranks.certify.certify_ranks` when certification is off; the certified path
never uses these values as ranks (docs/modular.md, "Monte Carlo ranks").
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import flint
import numpy as np

from exactident.budget import stage
from exactident.model.activation import n_paths
from exactident.model.fixed_edges import FixedEdges
from exactident.model.gamma_modular import (
    ModularData,
    Scaled,
    alpha_mod_p,
    gamma_entry_bound,
    gamma_mod_p,
    gram_counts,
    gram_entry_bound,
    gram_mod_p,
)
from exactident.model.integer_forward import common_denominator
from exactident.model.network import Network

__all__ = ["LABEL_TARGET", "label_range", "monte_carlo_ranks"]


def monte_carlo_ranks(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                      fixed: FixedEdges, lower: tuple[int, int, np.ndarray | None] | None, need_rank_a: bool,
                      rng: random.Random, avoid: int, data: ModularData | None,
                      max_alpha_entries: int) -> tuple[int, int | None, float] | None:
    """``--certify none``: ranks mod random primes, with a bound on the probability that one is low.

    A rank mod p can only be *below* the rank over Q, and only when p divides a
    nonzero ``r x r`` minor of the integer matrix ``D M`` (``|entries| <= B``); by
    Hadamard such a minor is at most ``(sqrt(r) B)^r`` in absolute value, so at most
    ``d = floor(r log2(sqrt(r) B) / log2(lo))`` primes of the range ``[lo, hi)`` divide
    it.  Primes drawn uniformly and independently from the ``N`` primes of the
    range fail together with probability at most ``(d / N)^k`` (docs/modular.md).
    A rank equal to a proven upper bound (``dim``, ``n``) is exact and contributes 0.

    Parameters
    ----------
    net, X, pattern, fixed
        The network, the sample ``(n, N_0)`` over Q, its activation pattern and fixed edges.
    lower : (rank, prime, image) or None
        A rank mod a prime already computed, counted as the first draw.
    need_rank_a : bool
        Also ``R_A`` (it is computed anyway when ``rank_gamma < dim``).
    rng, avoid, data
        The random source of the primes, an integer no prime may divide, the cached modular data.
    max_alpha_entries : int
        ``alpha`` is reduced mod p explicitly up to this many entries, else its Gram matrix.

    Returns
    -------
    (int, int or None, float) or None
        ``rank_gamma`` and ``rank_a`` (Monte Carlo, not certified) and the proven bound on the probability
        that either is below the true rank, at most :data:`LABEL_TARGET`; None (before any rank is
        taken) when no prime range reaches that bound in ``MAX_PRIMES`` draws (:func:`label_range`):
        the caller then certifies the ranks.
    """
    from exactident.linalg.montecarlo import monte_carlo_rank, very_tall

    dim, N_L, n = net.dim, net.widths[-1], len(X)
    B_g = gamma_entry_bound(net, X)
    range_g = label_range((n * N_L, dim), B_g, avoid, sketch=very_tall(n * N_L, dim))
    if range_g is None:
        return None
    rank_a = None
    avoid_x = common_denominator(v for row in X for v in row)
    Xs = Scaled([v for row in X for v in row], (n, net.widths[0]))
    P = n_paths(net.widths)
    explicit = n * P <= max_alpha_entries
    shape_a = (n, P) if explicit else (n, n)
    B_a, range_a = 1, None
    if need_rank_a or lower is None or lower[0] < dim:  # rank_a may be needed: its range too, before any rank
        B_a = (int(max((abs(int(v)) for v in Xs.ints.ravel()), default=1)) + Xs.den if explicit
               else gram_entry_bound(X, net.widths))
        range_a = label_range(shape_a, B_a, avoid_x, sketch=very_tall(*shape_a))
        if range_a is None:
            return None
    stage("ranks mod p (Monte Carlo)", rows=n * N_L, cols=dim)
    rg, err_g = monte_carlo_rank(lambda q: gamma_mod_p(net, X, pattern, fixed, q, avoid, data),
                                 (n * N_L, dim), avoid, lambda: B_g, rng, first=lower, prime_range=range_g)
    err_a = 0.0
    if need_rank_a or rg < dim:
        if explicit:
            ra, err_a = monte_carlo_rank(lambda q: alpha_mod_p(pattern, Xs.mod(q), q), shape_a, avoid_x,
                                         lambda: B_a, rng, prime_range=range_a)
        else:
            counts = gram_counts(pattern)
            ra, err_a = monte_carlo_rank(lambda q: gram_mod_p(pattern, X, q, avoid_x, counts, Xs), shape_a, avoid_x,
                                         lambda: B_a, rng, prime_range=range_a)
        rank_a = N_L * ra
    err = err_g + err_a
    if err > LABEL_TARGET:  # cannot happen (each range reaches LABEL_TARGET / 2 in MAX_PRIMES draws); never label it
        return None
    return rg, rank_a, err


#: A Monte Carlo rank is reported only with a proven error bound at most this (the union bound of
#: ``rank_gamma`` and ``rank_a``); otherwise ``--certify none`` certifies the ranks instead.
LABEL_TARGET = 1e-6


def label_range(shape: tuple[int, int], entry_bound: int, avoid: int, sketch: bool = False) -> tuple[int, int] | None:
    """The prime range whose ``MAX_PRIMES`` uniform draws bound the error by ``LABEL_TARGET / 2``, or None.

    BLAS primes (``[2^20, 2^21)``, cheaper ranks) when they reach it, else word-size primes
    (``[2^30, 2^31)``, FLINT), else None: no Monte Carlo rank is worth its label then (entries of
    thousands of bits on a large matrix: the ``d`` of :func:`~exactident.linalg.montecarlo.bad_primes_bound`
    is a sizeable fraction of the primes of the range).  Half the target each for ``Gamma`` and ``alpha``.

    Examples
    --------
    >>> label_range((4, 4), 2**100, 1)  # d = 20 of 73,586 BLAS primes: two draws give 7.4e-8
    (1048576, 2097152)
    >>> label_range((2000, 2000), 2**3000, 1)  # d = 300,548 BLAS primes (> 73,586), 200,365 word-size ones
    (1073741824, 2147483648)
    >>> label_range((20000, 20000), 2**30000, 1) is None  # d = 20,004,762 word-size primes: 0.39 per draw
    True
    """
    from exactident.linalg.blas_modp import BLAS_PRIME_HI, BLAS_PRIME_LO
    from exactident.linalg.modular import PRIME_HI, PRIME_LO
    from exactident.linalg.montecarlo import MAX_PRIMES, primes_for

    for lo, hi in ((BLAS_PRIME_LO, BLAS_PRIME_HI), (PRIME_LO, PRIME_HI)):
        if primes_for(LABEL_TARGET / 2, shape, entry_bound, avoid, lo, hi, sketch, max_primes=MAX_PRIMES) is not None:
            return lo, hi
    return None
