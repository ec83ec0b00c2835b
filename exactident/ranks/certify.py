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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from exactident.budget import stage
from exactident.errors import InvariantViolation
from exactident.linalg import exact
from exactident.linalg.certified import (
    CertifiedRank,
    certified_rank,
)
from exactident.linalg.lower_bound import modular_lower_bound
from exactident.linalg.montecarlo import very_tall
from exactident.model.fixed_edges import FixedEdges
from exactident.model.gamma import gamma_exact
from exactident.model.gamma_modular import (
    ModularData,
    gamma_entry_bound,
    gamma_mod_p,
    gamma_sketch_mod_p,
)
from exactident.model.gamma_row_sketch import gamma_row_sketch_mod_p
from exactident.model.integer_forward import data_denominator, integer_forward
from exactident.model.network import Network
from exactident.ranks.active_blocks import active_block_bound
from exactident.ranks.kernels import semi_local_kernel, sparse_columns
from exactident.ranks.rank_alpha import MAX_EXPLICIT_ALPHA_MOD_P, AlphaLowerBound, certify_rank_alpha
from exactident.ranks.shifted import StructuralKernels

__all__ = ["AlphaLowerBound", "RankResult", "certified_by", "certify_rank_alpha", "certify_rank_gamma",
           "certify_ranks"]


def certify_rank_gamma(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                       fixed: FixedEdges, *, rng: random.Random | None = None,
                       upper_bounds: Mapping[str, int] | None = None,
                       lower: tuple[int, int, np.ndarray | None] | None = None, data: ModularData | None = None,
                       semi_local: Callable[[], list[dict[int, flint.fmpq]]] | None = None,
                       source: Callable[[], str] | None = None,
                       known_upper: Mapping[str, Any] | None = None) -> CertifiedRank:
    """Exact ``R_Gamma = rank Gamma`` with a certificate (falls back to exact elimination).

    Upper bounds, cheapest first, stopping as soon as one meets the rank mod p:
    ``min(rows, dim)`` and ``upper_bounds`` (``R_A``, Prop. 11); the semi-local
    kernel (:func:`exactident.ranks.kernels.semi_local_kernel`), completed by single kernel vectors
    over Q (:func:`exactident.ranks.intervals.dixon_kernel_vectors`, at most
    :data:`~exactident.ranks.intervals.MAX_EXACT_DIXON_VECTORS` of them, for ``Gamma`` above
    :data:`~exactident.ranks.intervals.DIXON_FIRST_ENTRIES` entries); a CRT kernel
    (capped, :data:`exactident.linalg.certified.MAX_CRT_PRIMES`); FLINT's exact
    nullspace for small matrices; exact elimination.

    ``semi_local`` (default: the semi-local kernel) gives exact kernel vectors the verifier rebuilds by
    the construction ``source()`` names; ``known_upper``, a checked kernel ``upper`` part
    (:func:`exactident.ranks.shifted.kernel_upper`), certifies the rank at once when it meets ``lower``.
    """
    if known_upper is not None and lower is not None and known_upper["bound"] == lower[0]:
        return CertifiedRank(lower[0], {"rank": lower[0], "shape": [len(X) * net.widths[-1], net.dim],
                                        "lower": {"prime": lower[1], "rank_mod_p": lower[0]},
                                        "upper": dict(known_upper)})
    avoid = data_denominator(net, X)
    shape = (len(X) * net.widths[-1], net.dim)
    data = data or ModularData(net, X)
    semi_local = semi_local or (lambda: semi_local_kernel(net, X, pattern, fixed))
    from exactident.ranks import intervals

    if lower is not None and lower[0] < min([min(shape), *(upper_bounds or {}).values()]) \
            and shape[0] * shape[1] > intervals.DIXON_FIRST_ENTRIES:
        # the whole kernel from cheap exact vectors (semi-local, then Dixon) before CRT over many primes
        from exactident.ranks.intervals import MAX_EXACT_DIXON_VECTORS, gamma_upper_bound

        up = gamma_upper_bound(net, X, pattern, fixed, lower, lower[0] + 1, avoid=avoid, data=data,
                               rng=rng or random.Random(), semi_local=semi_local,
                               max_missing=MAX_EXACT_DIXON_VECTORS, source=source)
        if up is not None and up["bound"] == lower[0]:
            return CertifiedRank(lower[0], {"rank": lower[0], "shape": list(shape),
                                            "lower": {"prime": lower[1], "rank_mod_p": lower[0]}, "upper": up})
    res = certified_rank(lambda q: gamma_mod_p(net, X, pattern, fixed, q, avoid, data), shape, avoid=avoid,
                         entry_bound=lambda: gamma_entry_bound(net, X), upper_bounds=upper_bounds,
                         rng=rng, lower=lower, blas=True,
                         local_kernels=[(source or "semi-local", semi_local)],
                         exact_kernel=lambda: sparse_columns(exact.nullspace(
                             gamma_exact(net, X, integer_forward(net, X).Z(), pattern, fixed))))
    if res is not None:
        return res
    stage("exact elimination", rows=shape[0], cols=shape[1])
    r = exact.rank(gamma_exact(net, X, integer_forward(net, X).Z(), pattern, fixed))
    return CertifiedRank(r, {"rank": r, "shape": list(shape), "upper": {"kind": "exact-elimination"}})


#: The structural kernel (:mod:`exactident.ranks.shifted`) is built for ``Gamma`` of at most this many entries, or
#: a tall one when the other bounds leave a gap above 1 % of ``dim`` (wide image ``Gamma``: costly per neuron).
MAX_STRUCTURAL_ENTRIES = 100_000_000
#: Structural upper bounds on ``R_Gamma`` that an interval may end at (recomputed by the verifier).
_INTERVAL_STRUCTURAL = ("active-blocks",)


@dataclass
class RankResult:
    """``rank_gamma`` (exact), ``rank_a`` (exact, or None when ``C_S`` made it unnecessary), certificate."""

    rank_gamma: int
    rank_a: int | None
    certificate: dict[str, Any]
    #: A certified lower bound on ``R_A`` when the exact value was not needed (see :func:`certify_ranks`).
    rank_a_lower: int | None = None
    #: ``(lo, hi)``, certified ``lo <= R_Gamma <= hi``, when the exact ``R_Gamma`` was not needed
    #: (``lo < hi``); ``rank_gamma`` is then the Monte Carlo value of ``montecarlo``.
    rank_gamma_interval: tuple[int, int] | None = None
    #: ``{"rank_gamma": value, "error_probability": e}`` beside an interval.
    montecarlo: dict[str, Any] | None = None
    #: Beside an interval by default (not ``verdict_first``): why the exact rank was not computed,
    #: ``{"seconds": estimated exact rank, "verdict_seconds": estimated rank stage, "budget", "lifting_capped": 0|1}``
    #: (:func:`exactident.ranks.estimate.exact_rank_is_cheap`, :func:`exactident.ranks.intervals.close_within`).
    exact_estimate: dict[str, float] | None = None


def certify_ranks(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                  fixed: FixedEdges, *, need_rank_a: bool = False,
                  rng: random.Random | None = None, certify: str = "full",
                  allow_rank_a_lower: bool = False, exact_ranks: bool = True,
                  verdict_first: bool = False) -> RankResult:
    """Certified ``R_Gamma`` and, when needed, ``R_A = N_L rank alpha`` (Prop. 11).

    Only what the verdict needs: one prime whose rank mod p is ``dim`` proves
    ``C_S`` (Theorem 9) and ``R_A`` is then skipped unless ``need_rank_a``.
    Otherwise ``R_A`` is certified first and used as an upper bound on
    ``R_Gamma`` (``Gamma = A o Dpsi``); only if that leaves a gap is a kernel
    of ``Gamma`` reconstructed.

    With ``allow_rank_a_lower`` (off the boundary, ``rank_a`` not requested): when
    ``R_A`` has no cheap certificate (``n``, ``|P|``, column blocks, pattern row spaces) and the certified
    ``R_Gamma`` is below ``N_L`` times a rank of ``alpha`` mod p (a lower bound on
    ``R_A``), ``R_Gamma < R_A`` is proved without the exact ``R_A``: ``rank_a`` is
    None, ``rank_a_lower`` holds the bound (the verdict is inconclusive) and the
    certificate's ``rank_a`` part is the lower bound only (``{"shape", "lower",
    "rank_a_lower"}``, see :class:`AlphaLowerBound`).  When the rank of ``Gamma`` mod p
    already reaches ``N_L`` times that of ``alpha``, no such gap can be proved and ``R_A`` is
    certified in full before any kernel of ``Gamma``.

    With ``exact_ranks=False`` (and ``allow_rank_a_lower``, ``need_rank_a`` off), the verdict
    first: when ``rank Gamma mod p < dim`` and cheap certified kernel vectors
    (:func:`exactident.ranks.intervals.gamma_upper_bound`) already bound ``R_Gamma`` below the
    certified lower bound on ``R_A``, ``C_S`` fails and ``C_N`` holds; ``R_Gamma`` is then the
    certified interval ``rank_gamma_interval`` and ``rank_gamma`` its Monte Carlo value
    (``montecarlo``, with a proven error bound), and the certificate's ``rank_gamma`` part is the
    *interval* form (``shape``, ``lower``, ``upper``; no ``rank``).  Unless ``verdict_first``, the
    interval is kept only when the exact rank would cost much more than the verdict
    (:func:`exactident.ranks.estimate.exact_rank_is_cheap`, a model of the sizes: ``dim - rank_p`` kernel
    vectors over Q against the rank mod p), and the Dixon lifting of the vectors the structural kernel
    leaves is priced by the bits of its solution (:func:`exactident.ranks.intervals.lifting_estimate`, not
    started above the budget); a cheap exact rank is certified as with ``exact_ranks``, and an interval
    carries the estimate (``exact_estimate``).  Beside an interval at most 1 % of ``dim`` wide no Monte
    Carlo value is drawn.

    With ``certify="none"`` (Monte Carlo) no upper bound is proved: the ranks are
    ranks mod random primes and ``certificate`` is ``{"certified": False,
    "error_probability": e}`` with ``e <= 1e-6`` a proven bound on the chance that a rank is too low
    (:func:`exactident.ranks.montecarlo.monte_carlo_ranks`; else the ranks are certified).

    Returns
    -------
    RankResult
        ``certificate`` is ``{"fixed_edges": [[l, v, k], ...], "rank_gamma": {...},
        "rank_a": {...}}`` (``rank_a`` absent when skipped), checked by
        :func:`~exactident.verify.rank.verify_rank_certificate`.

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
    stage("Gamma mod p", rows=rows, cols=dim)
    data = ModularData(net, X)
    stage("ranks mod p", rows=rows, cols=dim)
    # a hidden neuron inactive on every sample has a zero bias column (Prop. 10: d f / d b_l[v] = 0), so
    # rank Gamma < dim is known and a tall Gamma's row-sample shortcut to full column rank is skipped
    short = len(X) > 0 and any(not np.asarray(a, dtype=bool).any(axis=0).all() for a in pattern[:net.L - 1])
    # wide Gamma (e.g. a first layer on images): a Khatri-Rao column sketch first, Gamma never built
    lower = modular_lower_bound(lambda q: gamma_mod_p(net, X, pattern, fixed, q, avoid, data), avoid=avoid,
                                rng=rng, stop_at=min(dim, rows), blas=True, shape=(rows, dim), uniform=True,
                                short=short, sparse_rows=True, row_sketch=None if not net.is_plain() else
                                lambda q, k: gamma_row_sketch_mod_p(net, X, pattern, fixed, q, k, 16, avoid, data),
                                sketch=lambda q, k: gamma_sketch_mod_p(net, X, pattern, fixed, q, k, q, avoid, data))
    if certify == "none":
        from exactident.ranks.montecarlo import monte_carlo_ranks

        mc = monte_carlo_ranks(net, X, pattern, fixed, lower, need_rank_a, rng, avoid, data, MAX_EXPLICIT_ALPHA_MOD_P)
        if mc is not None:  # None: no prime range bounds the error by 1e-6 (huge entries), so certified ranks
            return RankResult(mc[0], mc[1], {"certified": False, "error_probability": mc[2]})
    rank_a = None
    bounds: dict[str, int] = {}
    if rows < dim and lower[0] < rows and net.L >= 2 and dim - lower[0] > 64:
        # wide, row-deficient, a large kernel: left kernel vectors from the last hidden layer (Prop. 10)
        # bound R_Gamma by rows - t, often exactly (verified by verify/rank_left.py), where dim - (kernel
        # size) would need dim - rank vectors (small kernels keep their kernel certificates)
        from exactident.ranks.left_kernel import last_layer_left_kernel

        stage("left kernel", rows=rows, cols=dim)
        t = len(last_layer_left_kernel(net, X, pattern, fixed))
        if t:
            bounds["left-kernel"] = rows - t
    blocks = active_block_bound(net, X, pattern, fixed)  # counts over the pattern: always cheap
    if blocks < min(rows, dim):
        bounds["active-blocks"] = blocks
    closed = lower[0] in bounds.values()  # the exact rank already: no interval work
    kernels = StructuralKernels(net, X, pattern, fixed, lambda: semi_local_kernel(net, X, pattern, fixed),
                                dim - lower[0], data)
    struct, struct_source = kernels.vectors, kernels.source
    kernel_up: dict[str, Any] | None = None
    estimate: dict[str, float] | None = None
    decided = exact_ranks or closed or lower[0] >= dim

    def decide() -> None:  # where an interval may be reported: the structural kernel, then exact or not by cost
        nonlocal kernel_up, estimate, exact_ranks, closed, decided
        if decided:
            return
        decided = True
        hi = min([min(rows, dim), *bounds.values()])
        if rows * dim <= MAX_STRUCTURAL_ENTRIES or (rows >= dim and 100 * (hi - lower[0]) > dim):
            # the structural kernel (per-neuron, semi-local and shifted blocks): often the whole gap
            stage("kernel", source="shifted", rows=rows, cols=dim)
            kernel_up = kernels.upper(lower, avoid, rng, data)
            closed = kernel_up is not None and kernel_up["bound"] == lower[0]
        if not verdict_first and not closed:  # the model prices all dim - lo vectors (those left are the hard ones:
            # Dixon, thousands of bits); cheap: exact, if a lifting capped at the budget ends (steps grow with bits)
            from exactident.ranks.estimate import EXACT_FREE_SECONDS, exact_rank_is_cheap
            from exactident.ranks.intervals import close_within, lifting_estimate
            cheap, t_exact, t_verdict = exact_rank_is_cheap(rows, dim, lower[0])
            estimate = {"seconds": t_exact, "verdict_seconds": t_verdict, "budget": max(EXACT_FREE_SECONDS, t_verdict)}
            t_lift = lifting_estimate(net, X, lower, len(struct())) if cheap else None
            if t_lift is not None and t_lift > estimate["budget"]:  # the lifting would not end within the budget:
                cheap, estimate["seconds"] = False, max(t_exact, t_lift)  # not started (the solution's bits, priced)
            tried, up = close_within(net, X, pattern, fixed, lower, estimate["budget"], avoid=avoid, data=data, rng=rng,
                                     semi_local=struct, source=struct_source) if cheap else (False, None)
            closed, exact_ranks = up is not None, cheap and (up is not None or not tried)
            kernel_up = up if closed else kernel_up
            estimate["lifting_capped"] = float(tried and not closed)

    # Gamma mod p is not read while alpha's rank is computed: dropped then (peak memory: its image and
    # alpha's, not both) and rebuilt after from the same prime, the same residues (a deterministic image;
    # a row sketch's stack is kept)
    rebuild = lower[2] is not None and lower[2].shape == (rows, dim) and (need_rank_a or lower[0] < dim)

    def image_back() -> None:
        nonlocal lower
        if rebuild and lower[2] is None:
            lower = (lower[0], lower[1], gamma_mod_p(net, X, pattern, fixed, lower[1], avoid, data))

    if rebuild:
        lower = (lower[0], lower[1], None)
    if need_rank_a or lower[0] < dim:
        ra: CertifiedRank | AlphaLowerBound
        if allow_rank_a_lower and not need_rank_a:
            ra = certify_rank_alpha(pattern, X, net.widths, X_scaled=data.X, rng=rng, lower_only=True)
            if isinstance(ra, AlphaLowerBound) and N_L * ra.rank <= lower[0]:
                # R_Gamma >= lower >= N_L rank alpha mod p: R_Gamma < R_A cannot be proved from this lower
                # bound, so a kernel of Gamma would be wasted; an upper bound on R_A (cheap bounds first,
                # then the Gram route) closes both (Prop. 11).
                ra = certify_rank_alpha(pattern, X, net.widths, X_scaled=data.X, rng=rng)
        else:
            ra = certify_rank_alpha(pattern, X, net.widths, X_scaled=data.X, rng=rng)
        image_back()
        if isinstance(ra, AlphaLowerBound):
            # R_A has no cheap certificate; ``ra`` is a rank mod p, a certified lower bound.
            # If the certified R_Gamma is below N_L times it, R_Gamma < R_A < ... is proved,
            # and the certificate's rank_a part carries the lower bound only.
            stage("bounds", rows=rows, cols=dim, rank_mod_p=lower[0])
            decide()
            if not exact_ranks and not closed:
                fast = _verdict_first(net, X, pattern, fixed, lower, N_L * ra.rank, avoid, data, rng, kernels, bounds,
                                      kernel_up)
                if fast is not None:
                    cert["rank_a"] = dict(ra.certificate, rank_a_lower=N_L * ra.rank)
                    cert["rank_gamma"] = fast.certificate
                    return RankResult(fast.rank_gamma, None, cert, rank_a_lower=N_L * ra.rank,
                                      rank_gamma_interval=fast.rank_gamma_interval, montecarlo=fast.montecarlo,
                                      exact_estimate=estimate if fast.rank_gamma_interval else None)
            g = certify_rank_gamma(net, X, pattern, fixed, rng=rng, lower=lower, data=data, semi_local=struct,
                                   upper_bounds=bounds, source=struct_source, known_upper=kernel_up)
            if g.rank < N_L * ra.rank:
                cert["rank_a"] = dict(ra.certificate, rank_a_lower=N_L * ra.rank)
                cert["rank_gamma"] = g.certificate
                return RankResult(g.rank, None, cert, rank_a_lower=N_L * ra.rank)
            ra = certify_rank_alpha(pattern, X, net.widths, X_scaled=data.X, rng=rng)
        assert isinstance(ra, CertifiedRank)
        rank_a = N_L * ra.rank
        cert["rank_a"] = dict(ra.certificate, rank_a=rank_a)
        bounds["rank_a"] = rank_a
        if not need_rank_a and allow_rank_a_lower and lower[0] < min(rank_a, dim):
            decide()
        if not exact_ranks and not need_rank_a and allow_rank_a_lower and lower[0] < min(rank_a, dim) \
                and not closed:
            fast = _verdict_first(net, X, pattern, fixed, lower, rank_a, avoid, data, rng, kernels, bounds, kernel_up)
            if fast is not None:
                cert["rank_gamma"] = fast.certificate
                return RankResult(fast.rank_gamma, rank_a, cert, rank_gamma_interval=fast.rank_gamma_interval,
                                  montecarlo=fast.montecarlo,
                                  exact_estimate=estimate if fast.rank_gamma_interval else None)
    stage("bounds", rows=rows, cols=dim, rank_mod_p=lower[0])
    g = certify_rank_gamma(net, X, pattern, fixed, rng=rng, upper_bounds=bounds, lower=lower, data=data,
                           semi_local=struct, source=struct_source, known_upper=kernel_up)
    cert["rank_gamma"] = g.certificate
    if rank_a is not None and g.rank > rank_a:
        raise InvariantViolation(f"rank Gamma = {g.rank} > R_A = {rank_a}, contradicting Prop. 11")
    return RankResult(g.rank, rank_a, cert)


def _verdict_first(net, X, pattern, fixed, lower, below, avoid, data, rng, kernels: StructuralKernels,
                   bounds: Mapping[str, int] | None = None,
                   kernel_up: Mapping[str, Any] | None = None) -> RankResult | None:
    """``R_Gamma <= hi < below`` from a structural bound or cheap kernel vectors: the interval result, or None.

    ``bounds`` are structural upper bounds already computed (``active-blocks``) and ``kernel_up`` the
    structural kernel's bound (:func:`exactident.ranks.shifted.kernel_upper`): the smallest one below
    ``below`` is used before any other kernel vector is searched (see certify_ranks).
    """
    from exactident.ranks.intervals import gamma_upper_bound, monte_carlo_gamma

    entry_bound = kernels.entry_bound
    cheap = {k: v for k, v in (bounds or {}).items() if k in _INTERVAL_STRUCTURAL and v < below}
    up: dict[str, Any] | None
    if kernel_up is not None and kernel_up["bound"] < min(below, min(cheap.values(), default=below) + 1):
        up = dict(kernel_up)
    elif cheap:
        kind = min(cheap, key=lambda k: cheap[k])
        up = {"kind": kind, "bound": cheap[kind]}
    else:
        up = gamma_upper_bound(net, X, pattern, fixed, lower, below, avoid=avoid, data=data, rng=rng,
                               semi_local=kernels.vectors, entry_bound=entry_bound, source=kernels.source)
    if up is None:
        return None
    r, p = lower[0], lower[1]
    part: dict[str, Any] = {"shape": [len(X) * net.widths[-1], net.dim], "lower": {"prime": p, "rank_mod_p": r}}
    if up["bound"] == r:  # the cheap vectors close the gap: the exact rank, as certified_rank gives it
        return RankResult(r, None, {"rank": r, **part, "upper": up})
    # no Monte Carlo value when the certified interval is already within 1 % of dim (it would cost more ranks
    # mod p than the verdict's own for a value the interval nearly fixes); else None when reaching the Monte
    # Carlo target would cost more than the verdict
    # (a very tall Gamma's lower bound is a sparse sketch's rank: no Schwartz-Zippel bound, not a Monte Carlo trial)
    mc = None if 100 * (up["bound"] - r) <= net.dim else \
        monte_carlo_gamma(net, X, pattern, fixed, lower, up["bound"], avoid=avoid, data=data, rng=rng,
                          entry_bound=entry_bound, lower_uniform=not very_tall(len(X) * net.widths[-1], net.dim))
    return RankResult(mc["rank_gamma"] if mc else r, None, {**part, "upper": up}, rank_gamma_interval=(r, up["bound"]),
                      montecarlo=mc)


def certified_by(certificate: Mapping[str, Any]) -> dict[str, str]:
    """Which bound closed each rank: ``{"rank_gamma": "rank_a", "rank_a": "kernel:column-blocks", ...}``.

    ``kind`` or ``kind:source`` of each part's upper bound; ``lower-bound`` for a
    ``rank_a`` part that only proves a lower bound (no ``upper``).  The verifier
    recomputes it from the certificate it verified (the report's ``certified_by``).

    Examples
    --------
    >>> certified_by({"rank_gamma": {"upper": {"kind": "kernel", "source": "semi-local"}}})
    {'rank_gamma': 'kernel:semi-local'}
    >>> certified_by({"rank_gamma": {"upper": {"kind": "shape", "bound": 3}}, "rank_a": {"lower": {}}})
    {'rank_gamma': 'shape', 'rank_a': 'lower-bound'}
    """
    out = {}
    for key in ("rank_gamma", "rank_a"):
        part = certificate.get(key)
        if not isinstance(part, dict):
            continue
        up = part.get("upper")
        if isinstance(up, dict):
            out[key] = str(up.get("kind", "?")) + (f":{up['source']}" if "source" in up else "")
        elif "upper" not in part and "lower" in part:
            out[key] = "lower-bound"
    return out
