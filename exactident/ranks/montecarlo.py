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

__all__ = ["monte_carlo_ranks"]


def monte_carlo_ranks(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                      fixed: FixedEdges, lower: tuple[int, int, np.ndarray | None] | None, need_rank_a: bool,
                      rng: random.Random, avoid: int, data: ModularData | None,
                      max_alpha_entries: int) -> tuple[int, int | None, float]:
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
    (int, int or None, float)
        ``rank_gamma`` and ``rank_a`` (Monte Carlo, not certified) and the proven bound on the probability
        that either is below the true rank.
    """
    from exactident.linalg.montecarlo import monte_carlo_rank

    dim, N_L, n = net.dim, net.widths[-1], len(X)
    stage("ranks mod p (Monte Carlo)", rows=n * N_L, cols=dim)
    rg, err_g = monte_carlo_rank(lambda q: gamma_mod_p(net, X, pattern, fixed, q, avoid, data),
                                 (n * N_L, dim), avoid, lambda: gamma_entry_bound(net, X), rng, first=lower)
    rank_a = None
    err_a = 0.0
    if need_rank_a or rg < dim:
        avoid_x = common_denominator(v for row in X for v in row)
        Xs = Scaled([v for row in X for v in row], (n, net.widths[0]))
        P = n_paths(net.widths)
        if n * P <= max_alpha_entries:
            ra, err_a = monte_carlo_rank(lambda q: alpha_mod_p(pattern, Xs.mod(q), q), (n, P), avoid_x,
                                         lambda: int(max((abs(int(v)) for v in Xs.ints.ravel()), default=1)) + Xs.den,
                                         rng)
        else:
            counts = gram_counts(pattern)
            ra, err_a = monte_carlo_rank(lambda q: gram_mod_p(pattern, X, q, avoid_x, counts, Xs), (n, n), avoid_x,
                                         lambda: gram_entry_bound(X, net.widths), rng)
        rank_a = N_L * ra
    return rg, rank_a, min(1.0, err_g + err_a)
