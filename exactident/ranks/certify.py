"""Certified ``R_Gamma = rank Gamma`` and ``R_A = N_L rank alpha`` (Props. 10-11, Theorems 8-9).

:func:`certify_ranks` turns ranks mod p (:mod:`exactident.model.gamma_modular`)
into exact ranks with the bounds of :mod:`exactident.linalg.certified`,
computing only what the verdict needs: ``rank_a`` is skipped when ``C_S``
holds, and ``rank Gamma <= R_A`` (Prop. 11) closes the gap for free in the
common not-identifiable case.  When no certificate is found it falls back to
exact elimination (the reference path).  The certificate it returns is
re-checked from the case alone by :func:`exactident.verify.rank.verify_rank_certificate`.

Called by :mod:`exactident.check` and :mod:`exactident.boundary.analyse`.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from exactident.errors import InvariantViolation
from exactident.linalg import exact
from exactident.linalg.certified import CertifiedRank, certified_rank, modular_lower_bound
from exactident.model.activation import alpha_gram, n_paths
from exactident.model.fixed_edges import FixedEdges
from exactident.model.gamma import gamma_exact
from exactident.model.gamma_modular import (
    ModularData,
    Scaled,
    gamma_entry_bound,
    gamma_mod_p,
    gram_counts,
    gram_entry_bound,
    gram_mod_p,
)
from exactident.model.integer_forward import common_denominator, data_denominator, integer_forward
from exactident.model.network import Network
from exactident.ranks.bounds import pattern_rank_bound
from exactident.ranks.kernels import neuron_local_kernel, sparse_columns

__all__ = ["RankResult", "certify_rank_alpha", "certify_rank_gamma", "certify_ranks"]


def certify_rank_gamma(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                       fixed: FixedEdges, *, rng: random.Random | None = None,
                       upper_bounds: Mapping[str, int] | None = None,
                       lower: tuple[int, int, np.ndarray] | None = None) -> CertifiedRank:
    """Exact ``R_Gamma = rank Gamma`` with a certificate (falls back to exact elimination)."""
    avoid = data_denominator(net, X)
    shape = (len(X) * net.widths[-1], net.dim)
    data = ModularData(net, X)
    res = certified_rank(lambda q: gamma_mod_p(net, X, pattern, fixed, q, avoid, data), shape, avoid=avoid,
                         entry_bound=lambda: gamma_entry_bound(net, X), upper_bounds=upper_bounds,
                         rng=rng, lower=lower, local_kernel=lambda: neuron_local_kernel(net, X, pattern, fixed),
                         exact_kernel=lambda: sparse_columns(exact.nullspace(
                             gamma_exact(net, X, integer_forward(net, X).Z(), pattern, fixed))))
    if res is not None:
        return res
    r = exact.rank(gamma_exact(net, X, integer_forward(net, X).Z(), pattern, fixed))
    return CertifiedRank(r, {"rank": r, "shape": list(shape), "upper": {"kind": "exact-elimination"}})


def certify_rank_alpha(pattern: Sequence[np.ndarray], X: Sequence[Sequence[flint.fmpq]],
                       widths: Sequence[int], *, rng: random.Random | None = None) -> CertifiedRank:
    """Exact ``rank alpha`` (= rank of its Gram matrix over Q) with a certificate; ``R_A = N_L`` times it."""
    avoid = common_denominator(v for row in X for v in row)
    n = len(X)
    counts = gram_counts(pattern)
    Xs = Scaled([v for row in X for v in row], (n, widths[0]))
    res = certified_rank(lambda q: gram_mod_p(pattern, X, q, avoid, counts, Xs), (n, n), avoid=avoid,
                         entry_bound=lambda: gram_entry_bound(X, widths),
                         upper_bounds={"paths": n_paths(widths), "patterns": pattern_rank_bound(pattern, X)},
                         rng=rng, exact_kernel=lambda: sparse_columns(exact.nullspace(alpha_gram(pattern, X))))
    if res is not None:
        return res
    r = exact.rank(alpha_gram(pattern, X)) if n else 0
    return CertifiedRank(r, {"rank": r, "shape": [n, n], "upper": {"kind": "exact-elimination"}})


@dataclass
class RankResult:
    """``rank_gamma`` (exact), ``rank_a`` (exact, or None when ``C_S`` made it unnecessary), certificate."""

    rank_gamma: int
    rank_a: int | None
    certificate: dict[str, Any]


def certify_ranks(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                  fixed: FixedEdges, *, need_rank_a: bool = False,
                  rng: random.Random | None = None) -> RankResult:
    """Certified ``R_Gamma`` and, when needed, ``R_A = N_L rank alpha`` (Prop. 11).

    Only what the verdict needs: one prime whose rank mod p is ``dim`` proves
    ``C_S`` (Theorem 9) and ``R_A`` is then skipped unless ``need_rank_a``.
    Otherwise ``R_A`` is certified first and used as an upper bound on
    ``R_Gamma`` (``Gamma = A o Dpsi``); only if that leaves a gap is a kernel
    of ``Gamma`` reconstructed.

    Returns
    -------
    RankResult
        ``certificate`` is ``{"fixed_edges": [[l, v, k], ...], "rank_gamma": {...},
        "rank_a": {...}}`` (``rank_a`` absent when skipped), checked by
        :func:`verify_rank_certificate`.

    Examples
    --------
    >>> import flint
    >>> from exactident.model.fixed_edges import fixed_edges
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])],
    ...               [[flint.fmpq(1)], [flint.fmpq(0)]])
    >>> X = [[flint.fmpq(0)], [flint.fmpq(1)], [flint.fmpq(2)]]
    >>> from exactident.model.activation import activation_state
    >>> res = certify_ranks(net, X, activation_state(net, X).pattern, fixed_edges(net))
    >>> res.rank_gamma, res.rank_a, res.certificate["rank_gamma"]["upper"]["kind"]
    (2, 2, 'rank_a')
    """
    rng = rng or random.Random()
    avoid = data_denominator(net, X)
    dim, N_L = net.dim, net.widths[-1]
    rows = len(X) * N_L
    cert: dict[str, Any] = {"fixed_edges": [[l, v, k] for (l, v), k in sorted(fixed.s_max.items())]}
    data = ModularData(net, X)
    lower = modular_lower_bound(lambda q: gamma_mod_p(net, X, pattern, fixed, q, avoid, data), avoid=avoid,
                                rng=rng, stop_at=min(dim, rows))
    rank_a = None
    bounds: dict[str, int] = {}
    if need_rank_a or lower[0] < dim:
        ra = certify_rank_alpha(pattern, X, net.widths, rng=rng)
        rank_a = N_L * ra.rank
        cert["rank_a"] = dict(ra.certificate, rank_a=rank_a)
        bounds["rank_a"] = rank_a
    g = certify_rank_gamma(net, X, pattern, fixed, rng=rng, upper_bounds=bounds, lower=lower)
    cert["rank_gamma"] = g.certificate
    if rank_a is not None and g.rank > rank_a:
        raise InvariantViolation(f"rank Gamma = {g.rank} > R_A = {rank_a}, contradicting Prop. 11")
    return RankResult(g.rank, rank_a, cert)
