"""The dense route of :func:`exactident.check.check`'s stages (``T = I``, ReLU only), up to the verdict.

What the MLP's stages of the pipeline (:mod:`exactident.check.pipeline`) compute:

- :func:`forward_pass` (stage ``forward pass``): the exact activation state and ties, the degenerate
  set ``S``, the fixed edges;
- :func:`rank_stage` (stages ``bounds``, ``ranks mod p``, ... of :mod:`exactident.ranks.certify`):
  certified ``rank_gamma`` and ``rank_a`` at the ``>= 0`` pattern, or their certified bounds;
- :func:`numeric_stage` (stage ``float cross-check``): the float pipelines beside the exact ranks.

The verdict and the report from these are :mod:`exactident.check.verdict`'s.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping
from typing import Any

import numpy as np

from exactident.budget import deliver, stage
from exactident.check.options import CheckOptions
from exactident.check.verdict import Forward, Ranks
from exactident.io.case import Case
from exactident.io.report import Report
from exactident.linalg import exact
from exactident.model.activation import activation_state, alpha_exact, alpha_gram, n_paths
from exactident.model.conditions import holds_cs
from exactident.model.fixed_edges import fixed_edges
from exactident.model.gamma import gamma_exact
from exactident.model.network import Network, degenerate_neurons
from exactident.ranks.certify import certified_by, certify_ranks
from exactident.ranks.intervals import interval_why

__all__ = ["MAX_EXPLICIT_ALPHA", "forward_pass", "numeric_stage", "rank_alpha", "rank_stage"]

#: ``alpha`` is materialised when it has at most this many entries, else the Gram route.
MAX_EXPLICIT_ALPHA = 2_000_000


def rank_alpha(pattern, X, widths) -> int:
    """``rank alpha(X, theta)`` over Q, explicit for small ``|P|``, else by the Gram matrix."""
    if not X:
        return 0
    if len(X) * n_paths(widths) <= MAX_EXPLICIT_ALPHA:
        return exact.rank(alpha_exact(pattern, X))
    return exact.rank(alpha_gram(pattern, X))


def _numeric_dtype(provenance: Mapping[str, str] | None) -> type:
    """float32 when every weight was stored in float32 or narrower (LAPACK has no float16/bfloat16)."""
    stored = (provenance or {}).get("weight_dtype", "")
    narrow = {"float32", "float16", "bfloat16"}
    return np.float32 if stored and set(stored.split("+")) <= narrow else np.float64


def forward_pass(net: Network, X: Any, options: CheckOptions) -> Forward:
    """Stage ``forward pass``: the exact activation state and ties, the degenerate set, the fixed edges."""
    stage("forward pass", samples=len(X), widths="-".join(map(str, net.widths)))
    return Forward(state=activation_state(net, X), degenerate=bool(degenerate_neurons(net)),
                   fixed=fixed_edges(net, options.fixed_choice))


def rank_stage(net: Network, X: Any, forward: Forward, options: CheckOptions) -> Ranks:
    """``R_Gamma`` and ``R_A`` at the ``>= 0`` pattern: certified mod p (its stages), or over Q.

    Monte Carlo ranks (``certify="none"``, off the boundary) are labelled ``certified: false`` with
    their error bound and carry no certificate; a certified interval (the verdict did not need the
    exact ``R_Gamma``) leaves ``rank_gamma`` None and keeps the labelled Monte Carlo value.
    """
    state = forward.state
    rank_gamma: int | None
    gamma = rank_a_lower = interval = exact_estimate = certificate = found = None
    if options.modular:
        found = certify_ranks(net, X, state.pattern, forward.fixed, need_rank_a=options.all_ranks or bool(state.ties),
                              rng=random.Random(options.seed),
                              certify="none" if options.certify == "none" and not state.ties else "full",
                              allow_rank_a_lower=not state.ties and not forward.degenerate,
                              exact_ranks=options.exact_ranks or options.all_ranks,
                              verdict_first=options.verdict_first)
        rank_gamma, rank_a, certificate = found.rank_gamma, found.rank_a, found.certificate
        rank_a_lower, interval, exact_estimate = found.rank_a_lower, found.rank_gamma_interval, found.exact_estimate
    else:
        gamma = gamma_exact(net, X, state.Z, state.pattern, forward.fixed)
        rank_gamma, rank_a = exact.rank(gamma), None
        if options.all_ranks or state.ties or not holds_cs(rank_gamma, net.dim):
            rank_a = net.widths[-1] * rank_alpha(state.pattern, X, net.widths)
    labels: dict[str, Any] = {}
    if certificate and certificate.get("certified") is False:  # Monte Carlo: labelled, no certificate
        labels.update(certified=False, error_probability=certificate["error_probability"])
        certificate = None
    elif certificate and not state.ties:
        labels["certified_by"] = certified_by(certificate)
    montecarlo = None
    if interval is not None:  # the verdict did not need the exact R_Gamma: no certified number to show
        montecarlo = dict(found.montecarlo) if found is not None and found.montecarlo else None
        rank_gamma = None  # the Monte Carlo value is montecarlo's
        labels["rank_gamma_interval_why"] = interval_why(interval, exact_estimate)
    return Ranks(rank_gamma=rank_gamma, rank_a=rank_a, rank_a_lower=rank_a_lower, interval=interval,
                 exact_estimate=exact_estimate, certificate=certificate, labels=labels, montecarlo=montecarlo,
                 gamma=gamma)


def numeric_stage(case: Case, forward: Forward, ranks: Ranks, rank_verdict: str, verdict_reached: bool,
                  report: Report, options: CheckOptions) -> Report:
    """Stage ``float cross-check``: ``report.numeric``, the float pipelines beside the exact ranks.

    The report is delivered first (:func:`exactident.budget.deliver`): a budget running out from here
    keeps the exact verdict.  The float pipeline agrees when it gives ``rank_verdict`` (the rank rules'
    verdict) and the exact ranks of the ``>= 0`` pattern it rounds.
    """
    from exactident.numeric.block import numeric_block

    net, X = case.network, case.X
    deliver(copy.copy(report))
    stage("float cross-check", rows=len(X) * net.widths[-1], cols=net.dim)
    report.numeric = numeric_block(net, X, forward.fixed, forward.state, forward.degenerate, rank_verdict,
                                   (ranks.rank_gamma, ranks.rank_a), tol=options.tol, rtol=options.rtol,
                                   verdict_reached=verdict_reached, pipelines=options.pipelines or (),
                                   stored_dtype=_numeric_dtype(case.provenance), interval=ranks.interval)
    return report
