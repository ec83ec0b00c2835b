"""The stages of :func:`exactident.check.check` after the ranks, on a layered ReLU MLP.

Each stage is a function from the records of the stages before it to a new record:

- :func:`decide` (stage ``verdict`` off the boundary): the verdict from the ranks: ``degenerate``
  when ``theta`` is in ``S``, the tie resolutions when the sample is on the boundary
  (:func:`exactident.boundary.analyse.analyse_boundary`), else the rank rules of Theorems 8 and 9
  (:mod:`exactident.model.conditions`);
- :func:`settle_structurally` (stage ``structural certificates``): an ``inconclusive`` verdict
  settled by a structural certificate or a straight line
  (:func:`exactident.boundary.structural.settle`);
- :func:`assemble` (no stage: pure): the :class:`~exactident.io.report.Report`, ``C_S`` and
  ``C_N`` from the ranks or their certified bounds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from exactident.budget import stage
from exactident.errors import InvariantViolation
from exactident.io.report import Report
from exactident.model.activation import ActivationState
from exactident.model.conditions import (
    DEGENERATE,
    INCONCLUSIVE,
    NOT_IDENTIFIABLE,
    cn_from_bounds,
    cs_from_bounds,
    decided_by,
    holds_cn,
    holds_cs,
    reason_from_ranks,
    verdict_from_ranks,
    with_sample_size,
)
from exactident.model.fixed_edges import FixedEdges
from exactident.model.network import Network, degenerate_neurons

__all__ = ["Forward", "Ranks", "Verdict", "assemble", "decide", "settle_structurally"]


@dataclass(frozen=True)
class Forward:
    """What the ``forward pass`` stage computes: the exact activation ``state`` on the sample (its
    ``pattern``, ``Z`` and ``ties``), whether ``theta`` is in the degenerate set ``S``, the fixed edges."""

    state: ActivationState
    degenerate: bool
    fixed: FixedEdges


@dataclass(frozen=True)
class Ranks:
    """What the rank stages compute at the ``>= 0`` activation pattern (the matrices a float tool rounds).

    ``rank_gamma`` is None when the verdict did not need it (then ``interval`` holds its certified
    bounds and ``montecarlo`` the labelled Monte Carlo value); ``certificate`` is the rank certificate
    (None for Monte Carlo ranks, which ``labels`` mark ``certified: false``); ``gamma`` is the rational
    ``Gamma`` of the reference path (``modular=False``), else None.
    """

    rank_gamma: int | None
    rank_a: int | None
    rank_a_lower: int | None
    interval: tuple[int, int] | None
    exact_estimate: Mapping[str, float] | None
    certificate: dict[str, Any] | None
    labels: dict[str, Any]
    montecarlo: dict[str, Any] | None
    gamma: Any = None


@dataclass(frozen=True)
class Verdict:
    """The verdict and what it rests on: the ranks (over the tie resolutions on the boundary), the
    ``patterns`` enumerated, the certificate, the report's ``extra`` fields; ``rank_verdict`` is what
    the rank rules gave (the float pipeline is compared with it), ``settled_by`` the mechanism that
    settled an ``inconclusive`` one; ``reached`` is False when nothing was enumerated (the cap)."""

    verdict: str
    reason: str
    rank_gamma: int | None
    rank_a: int | None
    patterns: list[dict[str, Any]] | None
    certificate: dict[str, Any] | None
    extra: dict[str, Any]
    reached: bool
    rank_verdict: str
    settled_by: str | None = None


def decide(net: Network, X: Any, forward: Forward, ranks: Ranks, max_resolutions: int,
           all_ranks: bool) -> Verdict:
    """The verdict from the ranks (Theorems 8 and 9 off the boundary; the tie resolutions on it)."""
    state, rank_gamma, rank_a, dim = forward.state, ranks.rank_gamma, ranks.rank_a, net.dim
    interval, extra, patterns = ranks.interval, dict(ranks.labels), None
    # The rank part certifies the ranks at the >= 0 pattern: the report's ranks unless tie resolutions are enumerated.
    certificate = ({"rank": ranks.certificate} if ranks.certificate and (not state.ties or forward.degenerate)
                   else None)
    reached = True
    if forward.degenerate:
        verdict = DEGENERATE
        dead = degenerate_neurons(net)
        bad = ", ".join(f"({l},{v}) {why}" for l, v, why in dead[:8])
        bad += f", ... ({len(dead)} in all)" if len(dead) > 8 else ""
        reason = f"theta is in S: hidden neuron(s) {bad} all zero; the theorems do not apply"
        from exactident.boundary.certificate import build_degenerate_part

        certificate = {**(certificate or {}), "degenerate": build_degenerate_part(net) or {}}
    elif state.ties:
        from exactident.boundary.analyse import analyse_boundary  # only with ties: keeps start-up light

        outcome = analyse_boundary(net, X, state, forward.fixed, max_resolutions=max_resolutions,
                                   all_ranks=all_ranks)
        verdict, reason = outcome.verdict, outcome.reason
        patterns, certificate = outcome.patterns, outcome.certificate
        if outcome.rank_gamma is not None:
            rank_gamma, rank_a = outcome.rank_gamma, outcome.rank_a
        else:  # nothing enumerated (the cap): the smallest R_Gamma over the resolutions is unknown
            if ranks.certificate and certificate is not None:  # the rank part: the >= 0 pattern's ranks
                certificate = {**certificate, "rank": ranks.certificate}
            rank_gamma = rank_a = None  # and cs, cn: null (docs/cli.md)
        reached = outcome.rank_gamma is not None  # None: nothing enumerated (the cap)
        extra.update(outcome.extra)
    elif rank_a is None and ranks.rank_a_lower is not None:
        # R_Gamma < N_L rank_p(alpha) <= R_A and R_Gamma < dim: C_S fails and C_N holds
        verdict = INCONCLUSIVE
        reason = (f"R_Gamma {rank_text(rank_gamma, interval, ranks.exact_estimate)} < dim = {dim} and "
                  f"R_A >= {ranks.rank_a_lower} > R_Gamma (C_S fails, C_N holds); R_A itself not computed "
                  "(use --all-ranks)")
        # the rank part certifies R_Gamma and the lower bound (its rank_a part has no upper bound)
        extra["rank_a_lower_bound"] = ranks.rank_a_lower
    else:
        stage("verdict", rank_gamma=rank_gamma, dim=dim)
        if interval is not None:  # hi < dim and hi < R_A: every rank in the interval gives this verdict
            verdict = verdict_from_ranks(interval[1], rank_a, dim, False)
            reason = (f"neither theorem applies: R_Gamma {rank_text(rank_gamma, interval, ranks.exact_estimate)} "
                      f"< rank A = {rank_a} and < dim = {dim}")
        else:
            verdict = verdict_from_ranks(rank_gamma, rank_a, dim, False)  # type: ignore[arg-type]
            reason = reason_from_ranks(rank_gamma, rank_a, dim, verdict)  # type: ignore[arg-type]
        if extra.get("certified") is False:
            reason += f" (Monte Carlo ranks, not certified: error probability <= {extra['error_probability']:.3g})"
    return Verdict(verdict=verdict, reason=reason, rank_gamma=rank_gamma, rank_a=rank_a, patterns=patterns,
                   certificate=certificate, extra=extra, reached=reached, rank_verdict=verdict)


def settle_structurally(net: Network, X: Any, state: ActivationState, decided: Verdict) -> Verdict:
    """An ``inconclusive`` verdict settled by a structural certificate or a line, else the searches tried.

    Monte Carlo ranks (``certified: false``): the verdict is settled the same way, but the report
    carries no certificate, like every uncertified report.
    """
    from exactident.boundary.structural import settle

    certificate, attach = decided.certificate, decided.extra.get("certified") is not False
    visible = bool(((certificate or {}).get("boundary") or {}).get("ties"))
    stage("structural certificates", samples=len(X), neurons=sum(net.widths[1:-1]))
    found = settle(net, X, state, kernel_line=not visible)  # on the boundary analyse_boundary searched lines
    extra = {**decided.extra, "summary": [*decided.extra.get("summary", []), *found.summary]}
    if found.certificate is None:
        return replace(decided, reason=f"{decided.reason}; {found.clause}", extra=extra)
    settled = {**(certificate or {}), **found.certificate} if attach else certificate
    return replace(decided, verdict=NOT_IDENTIFIABLE, reason=f"{decided.reason}; but {found.clause}",
                   certificate=settled, extra=extra, settled_by=found.decided_by)


def assemble(name: str, net: Network, X: Any, forward: Forward, ranks: Ranks, decided: Verdict) -> Report:
    """The report: ``C_S`` and ``C_N`` from the ranks, or from the certified bounds of an interval.

    Raises
    ------
    InvariantViolation
        A verdict-first interval that does not lie below ``dim`` (it is reported only when it settles
        ``C_S`` false).
    """
    state, dim, interval = forward.state, net.dim, ranks.interval
    rank_gamma, rank_a = decided.rank_gamma, decided.rank_a
    cs: bool | None = None if rank_gamma is None else holds_cs(rank_gamma, dim)
    if interval is not None and not state.ties:
        # one rule with the verifier (model.conditions.cs_from_bounds): C_S from the certified bounds, never
        # from the Monte Carlo value
        cs = cs_from_bounds(interval[0], interval[1], dim)
        if cs is not False:
            raise InvariantViolation(f"a verdict-first interval {list(interval)} must lie below dim = {dim}")
    if interval is not None and not state.ties:
        cn = cn_from_bounds(interval[1], rank_a, ranks.rank_a_lower)
    elif rank_gamma is None:
        cn = None
    elif ranks.rank_a_lower is not None and rank_a is None:
        cn = True
    else:
        cn = holds_cn(rank_gamma, rank_a, dim)
    return Report(
        name=name, widths=list(net.widths), n_samples=len(X), dim=dim, rank_gamma=rank_gamma, rank_a=rank_a,
        cs=cs, cn=cn,  # type: ignore[arg-type]  # null: no rank (past the cap, timed out)
        degenerate=forward.degenerate, on_boundary=bool(state.ties), n_ties=len(state.ties),
        verdict=decided.verdict, reason=with_sample_size(decided.reason, X, net.widths[-1], dim),
        patterns=decided.patterns, certificate=decided.certificate, extra=decided.extra,
        decided_by=decided.settled_by or decided_by(decided.verdict, decided.certificate),
        rank_gamma_interval=interval, montecarlo=ranks.montecarlo)


def rank_text(rank_gamma: int | None, interval: tuple[int, int] | None,
              exact_estimate: Mapping[str, float] | None = None) -> str:
    """``R_Gamma`` for a reason: ``= r`` when exact, else the certified interval (never the Monte Carlo value),
    with the estimated cost of the exact value when that is why it was not computed."""
    if interval is None:
        return f"= {rank_gamma}"
    if exact_estimate:
        from exactident.ranks.estimate import duration_text

        if exact_estimate.get("lifting_capped"):
            return (f"certified in [{interval[0]}, {interval[1]}] (exact value not computed: its kernel vectors' "
                    f"lifting did not end within ~{duration_text(exact_estimate['budget'])}, the budget the "
                    "verdict's cost allows; --exact-ranks computes it)")
        cost, verdict_cost = duration_text(exact_estimate["seconds"]), duration_text(exact_estimate["verdict_seconds"])
        return (f"certified in [{interval[0]}, {interval[1]}] (exact value not computed: estimated ~{cost} against "
                f"~{verdict_cost} for the ranks of the verdict; --exact-ranks computes it)")
    return f"certified in [{interval[0]}, {interval[1]}] (exact value: --exact-ranks)"
