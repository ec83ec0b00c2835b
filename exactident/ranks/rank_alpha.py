"""Certified ``rank alpha`` (``R_A = N_L rank alpha``, Prop. 11; Theorem 8's ``C_N``).

:func:`certify_rank_alpha`: a rank mod p of rows of ``alpha`` (or of their Gram matrix) as the
lower bound, then the cheapest upper bound that meets it (the shape, the pattern groups, the
column-block kernel, the pattern row spaces, Gram kernels), exact elimination last.  The
certificate is re-checked from the case alone by :func:`exactident.verify.rank.check_rank_certificate`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from exactident.budget import stage
from exactident.linalg import exact
from exactident.linalg.blas_modp import blas_primes, rank_blas, to_symmetric
from exactident.linalg.certified import (
    CertifiedRank,
    certified_rank,
    kernel_is_checkable,
    kernel_to_integer_columns,
)
from exactident.model.activation import alpha_exact, alpha_gram, alpha_row_subset, n_paths
from exactident.model.gamma_modular import (
    Scaled,
    alpha_mod_p,
    gram_counts,
    gram_entry_bound,
    gram_mod_p,
)
from exactident.ranks.bounds import alpha_column_kernel, pattern_count_bound, pattern_rank_bound
from exactident.ranks.kernels import sparse_columns
from exactident.ranks.rowspace import pattern_rowspace_bound

__all__ = ["MAX_EXPLICIT_ALPHA_MOD_P", "AlphaLowerBound", "certify_rank_alpha"]

#: ``alpha`` is reduced mod p explicitly (rows of
#: :func:`~exactident.model.activation.alpha_row_subset`) up to this many entries.
MAX_EXPLICIT_ALPHA_MOD_P = 40_000_000

@dataclass
class AlphaLowerBound:
    """A certified lower bound ``rank alpha >= rank`` (a rank mod p of rows of ``alpha``), no upper bound.

    ``certificate`` is ``{"shape": [n, |P|], "lower": {...}}``: the ``rank_a`` part of a
    rank certificate without ``rank`` or ``upper`` (checked by
    :func:`exactident.verify.rank.check_rank_certificate`).
    """

    rank: int
    certificate: dict[str, Any]


def certify_rank_alpha(pattern: Sequence[np.ndarray], X: Sequence[Sequence[flint.fmpq]],
                       widths: Sequence[int], *, rng: random.Random | None = None,
                       lower_only: bool = False, X_scaled: Scaled | None = None) -> CertifiedRank | AlphaLowerBound:
    """Exact ``rank alpha`` with a certificate; ``R_A = N_L`` times it.

    Lower bound: the rank mod p of ``alpha`` on the rows of
    :func:`~exactident.model.activation.alpha_row_subset` (identical samples merged, pattern
    groups reduced to independent rows), reduced explicitly when it has at most
    ``MAX_EXPLICIT_ALPHA_MOD_P`` entries, else the
    Gram matrix of those rows; memory is linear in ``n`` whenever the groups are
    small.  Upper bounds: ``n``, ``|P|``, the pattern-group bound, the column-block
    kernel (:func:`exactident.ranks.bounds.alpha_column_kernel`), the pattern row-space
    bound (:func:`exactident.ranks.rowspace.pattern_rowspace_bound`), then Gram kernels and
    exact elimination.  With ``lower_only``, returns the rank mod p (an
    :class:`AlphaLowerBound`) unless the shape bounds already certify it.  ``X_scaled``: ``X`` as a
    :class:`~exactident.model.backprop.Scaled` (over any common denominator), if already built.
    """
    rng = rng or random.Random()
    n = len(X)
    P = n_paths(widths)
    Xs = X_scaled if X_scaled is not None else Scaled([v for row in X for v in row], (n, widths[0]))
    avoid = Xs.den  # a multiple of every denominator of X: a prime not dividing it reduces X
    if n == 0:  # the Gram route handles the empty sample (shape bound 0)
        return _certify_rank_alpha_gram(pattern, X, widths, rng, avoid, Xs)
    p = blas_primes(1, avoid, rng)[0]
    X_res = Xs.mod(p)
    stage("rank alpha mod p", samples=n, paths=P)
    rows = alpha_row_subset(pattern, X_res, p)
    sub = [a[rows] for a in pattern]
    explicit = len(rows) * P <= MAX_EXPLICIT_ALPHA_MOD_P

    def gram() -> np.ndarray:
        Xs_sub = Xs if len(rows) == n and list(rows) == list(range(n)) else Xs.take(rows)
        return gram_mod_p(sub, [X[i] for i in rows], p, avoid, None, Xs_sub, symmetric=True)  # float64 as it is

    image = alpha_mod_p(sub, X_res[rows], p) if explicit else gram()
    r_low = -1
    m_img, n_img = image.shape
    if explicit and n_img > m_img + m_img // 8 + 16:
        # wide: a random set of m + 16 columns usually has rank m already, the most its m rows can have
        cols = sorted(rng.sample(range(n_img), m_img + 16))
        if rank_blas(image[:, cols], p) == m_img:
            r_low = m_img
        else:  # rank below m: eliminating the m x m Gram matrix costs m^3, the m x |P| rows m |P| rank
            explicit = False
            del image  # alpha's rows freed before the Gram matrix is built
            image = gram()
    if r_low < 0:
        if image.dtype.kind != "f":  # the float copy the elimination needs, without the int64 one beside it
            image = to_symmetric(image, p)
        r_low = rank_blas(image, p)
    del image
    upper = {"shape": n, "paths": P}
    lower_info = {"prime": p, "rank_mod_p": r_low, "matrix": "alpha" if explicit else "gram",
                  "rows": [int(i) for i in rows] if len(rows) < n else "all"}
    cert: dict[str, Any] = {"rank": r_low, "shape": [n, P], "lower": lower_info}
    for kind, bound in upper.items():
        if bound == r_low:
            cert["upper"] = {"kind": kind, "bound": bound}
            return CertifiedRank(r_low, cert)
    if lower_only:
        return AlphaLowerBound(r_low, {"shape": [n, P], "lower": lower_info})
    stage("bounds", what="alpha pattern groups", samples=n, paths=P)
    if pattern_count_bound(pattern, widths[0]) >= r_low and pattern_rank_bound(pattern, X) == r_low:
        cert["upper"] = {"kind": "patterns", "bound": r_low}
        return CertifiedRank(r_low, cert)
    stage("bounds", what="alpha column blocks", samples=n, paths=P)
    if len(widths) > 2 and MAX_EXPLICIT_ALPHA_MOD_P // max(n, 1) + 1 >= P:
        K = alpha_column_kernel(pattern, X, widths)
        x_bound = max(max((abs(int(v)) for v in Xs.ints.ravel()), default=0), Xs.den)  # entries of den * alpha
        if P - len(K) == r_low and kernel_is_checkable(kernel_to_integer_columns(K), (n, P), x_bound):
            cert["upper"] = {"kind": "kernel", "bound": r_low, "source": "column-blocks", "nullity": len(K)}
            return CertifiedRank(r_low, cert)
    stage("bounds", what="alpha pattern row spaces", samples=n, paths=P)
    rowspace = pattern_rowspace_bound(pattern, X, widths)
    if rowspace is not None and rowspace[0] == r_low:
        cert["upper"] = {"kind": "pattern-rowspace", "bound": r_low}
        return CertifiedRank(r_low, cert)
    return _certify_rank_alpha_gram(pattern, X, widths, rng, avoid, Xs)


def _certify_rank_alpha_gram(pattern, X, widths, rng, avoid, Xs) -> CertifiedRank:
    """The Gram route (kernels in sample space, the earlier certificate kinds), then exact elimination."""
    n, P = len(X), n_paths(widths)
    nullity: list[int] = []  # FLINT's exact nullspace, when computed, is an exact elimination already

    def exact_kernel() -> list:
        K = sparse_columns(exact.nullspace(alpha_gram(pattern, X)))
        nullity.append(len(K))
        return K

    if n * n <= MAX_EXPLICIT_ALPHA_MOD_P:
        counts = gram_counts(pattern)
        res = certified_rank(lambda q: gram_mod_p(pattern, X, q, avoid, counts, Xs), (n, n), avoid=avoid,
                             entry_bound=lambda: gram_entry_bound(X, widths),
                             upper_bounds={"paths": P, "patterns": pattern_rank_bound(pattern, X)},
                             rng=rng, blas=True, exact_kernel=exact_kernel)
        if res is not None:
            return res
    stage("exact elimination", what="alpha", samples=n, paths=P)
    # alpha itself only when it is tall: fraction-free elimination of the n x n Gram matrix was
    # 5-18x faster on trained networks with |P| ~ n (569 x 497: 18 s vs 103 s; 569 x 1993: 25 s vs 459 s)
    if nullity:  # the kernel was too big to check by primes, but its size is exact: rank = n - nullity
        r = n - nullity[0]
    elif n * P <= MAX_EXPLICIT_ALPHA_MOD_P and n > 2 * P:
        r = exact.rank(alpha_exact(pattern, X))
    else:
        r = exact.rank(alpha_gram(pattern, X)) if n else 0
    return CertifiedRank(r, {"rank": r, "shape": [n, n], "upper": {"kind": "exact-elimination"}})


