"""The free route of :func:`exactident.check.check`'s stages: ``Gamma_free`` of any other ``T`` or slopes.

A layer graph (convolution, pooling, skips, leaky ReLU, PReLU, no-bias layers, fixed or tied
weights: a :class:`~exactident.model.network.Network` whose ``is_plain()`` is false,
:func:`exactident.check.pipeline.constrained_of`) goes through the same pipeline as the MLP
(:mod:`exactident.check.pipeline`);
this module holds what its stages compute for it:

- :func:`graph_forward` (stages ``forward pass``, ``rescaling symmetries``): the exact forward pass and
  ties (kinked units only), the rescaling symmetries the family keeps, ``S_H``, and
  ``dim_free = rank T - dim S_H`` (:mod:`exactident.model.symmetry`), the persistent ties;
- :func:`free_rank_stage` (stage ``ranks mod p``): for every tie resolution ``s`` (up to a cap; all
  of them, since ``rank_gamma`` is the smallest rank over them:
  :func:`exactident.model.gamma_free.tie_resolutions`), the certified rank of
  ``Gamma_free(s) = d f(X) / d theta`` (:func:`exactident.check.free_rank.free_rank`);
- :func:`certificate_stage` (stages ``dead-unit certificate``, ``submersion certificate``,
  ``line certificate``): the certificates of ``not-identifiable``, each valid for every tie
  resolution (their proofs need only exact evaluation): a dead-unit, constant-unit or slope line
  (:mod:`exactident.boundary.dead_units`), a submersion (:mod:`exactident.boundary.submersion`), a
  straight line of constant outputs on ``X`` with a probe (:mod:`exactident.boundary.kernel_line`),
  then Theorem 8's constant-rank argument with a witness point (:mod:`exactident.boundary.constant_rank`);
- :func:`graph_report`: the verdict by the rules of :mod:`exactident.boundary.rules` and the report.

The verdict:

- **identifiable** when ``rank Gamma_free(s) == dim_free`` for every resolution (the immersion
  argument, docs/theory.md, "Beyond the layered ReLU MLP"); ``decided_by: free-rank``;
- **not-identifiable** only with a certificate valid for every architecture (``decided_by``:
  ``dead-units``, ``constant-units``, ``slope-lines``, ``submersion``, ``entering-submersion``,
  ``line``, ``constant-rank``);
- **inconclusive** otherwise: Theorem 8 (``C_N``) itself is proved for the layered ReLU MLP only and
  is never borrowed.

Each rule states the hypotheses it needs (:mod:`exactident.boundary.rules`); the report's ``rules``
lists every one with its status and, where a hypothesis fails, which.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import flint

from exactident.boundary.rules import rule_entries
from exactident.budget import deliver, stage
from exactident.check.free_rank import FreeRank, free_rank, line_kernel
from exactident.check.options import CheckOptions
from exactident.errors import InvariantViolation
from exactident.io.report import NOT_ENUMERATED, Report, past_the_cap
from exactident.model.conditions import cs_from_bounds, with_sample_size
from exactident.model.gamma_free import (
    FreeModularData,
    FreeState,
    free_data_denominator,
    free_state,
    persistent_ties,
    resolve_ties,
    tie_resolutions,
)
from exactident.model.network import Network
from exactident.model.symmetry import Symmetry, rescaling_symmetry

__all__ = ["CERTIFICATES", "GraphForward", "GraphRanks", "carried_numeric", "certificate_stage",
           "free_rank_stage", "graph_forward", "graph_report", "rng_seed_for_certificates"]

#: The certificate rules of :func:`certificate_stage` (their names in the report's ``rules``).
CERTIFICATES = ("dead-units", "constant-units", "submersion", "entering-submersion", "line", "constant-rank")


def carried_numeric(case: Any, cn: Any, report: Report, options: CheckOptions) -> Report:
    """``report`` with its float cross-check: ``Gamma_free`` in float64 beside the exact rank (stage
    ``float cross-check``).  The verdict is delivered first, so a budget running out here keeps it."""
    from exactident.numeric.block import parse_pipelines, report_numeric_block

    with_torch = "torch" in parse_pipelines(options.pipelines)  # the only optional pipeline for these networks
    deliver(copy.copy(report))
    stage("float cross-check", rows=len(case.X) * report.widths[-1], cols=report.dim)
    report.numeric = report_numeric_block(cn, case.X, report, tol=options.tol, rtol=options.rtol, torch=with_torch)
    return report


def rng_seed_for_certificates(seed: int | None) -> int | None:
    """The seed of the certificate search's own random stream (None: unseeded, as ``seed``).

    >>> rng_seed_for_certificates(0) != rng_seed_for_certificates(1)
    True
    """
    return None if seed is None else 7_919 * seed + 104_729


@dataclass
class GraphForward:
    """What the ``forward pass`` and ``rescaling symmetries`` stages compute on a layer graph.

    ``persistent``: ties whose side changes nothing (enumerated on one side only); ``free_ties`` the
    others, whose ``2^len(free_ties)`` resolutions the rank stage enumerates.
    """

    state: FreeState
    sym: Symmetry
    avoid: int
    data: FreeModularData
    persistent: list[int]
    free_ties: list[int]

    @property
    def n_ties(self) -> int:
        return len(self.state.ties)

    def n_resolutions_bits(self) -> int:
        """``k``: the rank stage enumerates ``2^k`` tie resolutions."""
        return len(self.free_ties)


def graph_forward(cn: Network, X: Sequence[Sequence[flint.fmpq]]) -> GraphForward:
    """Stages ``forward pass`` and ``rescaling symmetries``: ties, ``S_H``, ``dim_free``, persistent ties."""
    stage("forward pass", samples=len(X), widths="-".join(map(str, cn.layer_widths)))
    state = free_state(cn, X)
    stage("rescaling symmetries", params=cn.n_params)
    sym = rescaling_symmetry(cn)
    avoid = free_data_denominator(cn, X)
    data = FreeModularData(cn, X)
    persistent = persistent_ties(cn, X, state)  # their side changes nothing: enumerated on one side only
    free_ties = [t for t in range(len(state.ties)) if t not in set(persistent)]
    return GraphForward(state=state, sym=sym, avoid=avoid, data=data, persistent=persistent, free_ties=free_ties)


def _tie_dicts(state: FreeState) -> list[dict[str, int]]:
    return [{"sample": i, "layer": l, "neuron": v} for i, l, v in state.ties]


def _features_text(cn: Network) -> str:
    return ", ".join(cn.features) if cn.features else "this constrained family"


@dataclass
class GraphRanks:
    """What the rank stage computes on a layer graph: one :class:`~exactident.check.free_rank.FreeRank` per
    tie resolution (none past the cap or when a certificate settled the case first), their report entries,
    the certified interval of the smallest rank, and the parameters of the kernel vectors that lowered it."""

    enumerable: bool
    ranks: list[FreeRank] = field(default_factory=list)
    resolutions: list[dict[str, Any]] = field(default_factory=list)
    patterns: list[dict[str, Any]] = field(default_factory=list)
    interval: tuple[int, int] | None = None
    zero_params: list[int] = field(default_factory=list)
    #: Every resolution enumerated and certified at ``dim_free``: the ``free-rank`` rule holds.
    full: bool = False



def free_rank_stage(cn: Network, X: Sequence[Sequence[flint.fmpq]], fw: GraphForward,
                    rng: random.Random, max_resolutions: int, exact_ranks: bool) -> GraphRanks:
    """Stage ``ranks mod p``: ``rank Gamma_free(s)`` on every tie resolution ``s`` (none past the cap).

    Raises
    ------
    InvariantViolation
        Exact kernel vectors bounding a rank below its rank mod p or its Monte Carlo value (a bug).
    """
    state, sym = fw.state, fw.sym
    enumerable = 2 ** len(fw.free_ties) <= max_resolutions
    out = GraphRanks(enumerable=enumerable)
    ranks, patterns = out.ranks, out.patterns
    if enumerable:
        # every resolution, also after one short of dim_free: rank_gamma is the smallest rank over all of them
        for active in map(list, tie_resolutions(fw.n_ties, fw.persistent)):
            stage("ranks mod p", resolution=len(ranks), rows=len(X) * cn.widths[-1], cols=cn.n_params)
            fr = free_rank(cn, X, resolve_ties(state, active), sym, rng, fw.data, fw.avoid, exact_ranks=exact_ranks)
            ranks.append(fr)
            out.resolutions.append({"active": active, "rank_gamma": fr.certificate})
            patterns.append({"ties": [{**t, "active": a} for t, a in zip(_tie_dicts(state), active)],
                             "rank_gamma": fr.rank, "rank_a": None,
                             "cs": fr.rank == sym.dim_free if fr.rank is not None else None, "cn": None})
    out.full = enumerable and all(r.rank == sym.dim_free for r in ranks)
    interval = None
    if ranks and any(r.rank is None for r in ranks):
        interval = (min(r.interval[0] for r in ranks), min(r.interval[1] for r in ranks))
    if interval is not None and interval[0] < interval[1]:  # lines of constant outputs may lower the upper ends
        found_k = line_kernel(cn, state, sym, rng)  # in ker Gamma_free(s) for every resolution s
        for j, short in enumerate(ranks):
            if found_k is None or short.rank is not None or found_k[0] >= short.interval[1]:
                continue
            from exactident.linalg.certified import _fmt

            bound, K = found_k
            out.zero_params = sorted(set().union(*K))
            if bound < short.interval[0] or short.value > bound:
                raise InvariantViolation(f"kernel of the lines bounds rank Gamma_free by {bound}, below its rank mod "
                                         f"p {short.interval[0]} or Monte Carlo value {short.value}")
            short.interval = (short.interval[0], bound)
            assert short.certificate is not None
            short.certificate["upper"] = {
                "kind": "kernel", "bound": short.interval[1], "source": "lines",
                "kernel": [[[i, _fmt(int(v.p), int(v.q))] for i, v in sorted(col.items())] for col in K]}
            if short.interval[0] == short.interval[1]:  # the lines close the gap: the rank is exact
                short.rank = short.interval[0]
                short.certificate["rank"] = short.rank
                patterns[j].update(rank_gamma=short.rank, cs=short.rank == sym.dim_free)
        interval = (min(r.interval[0] for r in ranks), min(r.interval[1] for r in ranks))
    out.interval = interval
    return out


def _graph_line(cn: Network, X, state: FreeState, n_ties: int, persistent: list[int],
                tried: dict[str, str], skipped: dict[str, str]) -> dict[str, Any] | None:
    """The ``line`` rule (:mod:`exactident.boundary.kernel_line`) on the first tie resolutions, or None."""
    from exactident.boundary.kernel_line import MAX_LINE_PATTERNS, find_graph_line, line_cost_problem

    cost = line_cost_problem(cn, len(X))
    if cost is not None:
        skipped["line"] = cost
        return None
    stage("line certificate", rows=len(X) * cn.widths[-1], cols=cn.n_params)
    patterns = []
    for active in tie_resolutions(n_ties, persistent):
        patterns.append(resolve_ties(state, list(active)))
        if len(patterns) >= MAX_LINE_PATTERNS:
            break
    found = find_graph_line(cn, X, patterns)
    if found is None:
        tried["line"] = "no kernel direction of Gamma_free keeps the outputs on X along a straight line with a probe"
    return found


def certificate_stage(cn: Network, X: Sequence[Sequence[flint.fmpq]], fw: GraphForward,
                      seed: int | None, tried: dict[str, str], skipped: dict[str, str]) -> dict[str, Any] | None:
    """The certificates of ``not-identifiable`` on a layer graph, in order, or None (each one's outcome in
    ``tried`` or ``skipped``).

    None of them reads the tie resolutions' ranks: each proves its verdict whatever the resolution
    (outputs on ``X`` constant along a line while the function changes, or a submersion), so the
    pipeline may run this stage before the ranks (:data:`exactident.check.pipeline.ENUMERATE_FIRST`).

    Returns
    -------
    dict or None
        ``{"kind", "why", ...}``: ``kind`` names the rule (the report's ``decided_by``), ``why`` is
        the clause of the reason, the rest is the certificate part.
    """
    from exactident.boundary.dead_units import find_dead_units

    # a stream of its own: the certificates (hence the verdict) must not depend on how many random
    # primes the rank stage drew, which differs between the verdict-first and the exact-ranks orders
    cert_rng = random.Random(rng_seed_for_certificates(seed))
    stage("dead-unit certificate", units=sum(cn.widths[1:-1]))
    found = find_dead_units(cn, X, fw.state, cert_rng)
    tried["dead-units"] = tried["constant-units"] = "no dead, silent or constant unit gives a line"
    if found is None:
        from exactident.boundary.submersion import find_entering_submersion, find_submersion

        stage("submersion certificate", rows=len(X) * cn.widths[-1], cols=cn.n_params)
        if not fw.free_ties:  # F_X smooth near theta: persistent ties only
            found = find_submersion(cn, X, cert_rng)
            tried["submersion"] = "no full row rank with a moving fiber direction"
            skipped["entering-submersion"] = "no free tie: the submersion rule covers this sample"
        else:
            found = find_entering_submersion(cn, X, cert_rng)
            tried["entering-submersion"] = "no entering direction of a full-row-rank resolution"
            skipped["submersion"] = "free ties: F_X is not smooth at theta (entering-submersion instead)"
    if found is None:  # a straight line of constant outputs on X (exact evaluation: every layer graph)
        found = _graph_line(cn, X, fw.state, fw.n_ties, fw.persistent, tried, skipped)
    if found is None:  # Theorem 8's constant rank with a witness point (tried last)
        from exactident.boundary.constant_rank import try_constant_rank

        found = try_constant_rank(cn, X, fw.state, cert_rng, tried)
    return found


def graph_report(cn: Network, X: Sequence[Sequence[flint.fmpq]], fw: GraphForward, gr: GraphRanks,
                 found: dict[str, Any] | None, tried: dict[str, str], skipped: dict[str, str], *, name: str,
                 max_resolutions: int, structural: bool, first: bool = False,
                 input_shape: Sequence[int] | None = None) -> Report:
    """The verdict by the rules (:mod:`exactident.boundary.rules`) and the report of a layer graph.

    ``first``: ``found`` was searched before the ranks (none enumerated when it settled the case).
    """
    state, sym, n_ties, ranks = fw.state, fw.sym, fw.n_ties, gr.ranks
    interval = gr.interval
    worst = min(ranks, key=lambda r: r.value) if ranks else None
    rank_gamma = worst.value if worst is not None else None
    extra: dict[str, Any] = {"architecture": {
        "features": list(cn.features), "n_params": cn.n_params, "rank_t": sym.rank_t,
        "symmetry_dim": sym.symmetry_dim, "dim_free": sym.dim_free,
        "input_shape": list(input_shape) if input_shape is not None else [cn.widths[0]],
        "softmax_rank_bound": sym.softmax_rank_bound}}
    cs: bool | None = None if rank_gamma is None else rank_gamma == sym.dim_free
    if interval is not None and interval[0] == interval[1]:
        interval = None  # every resolution exact after all
    montecarlo = None
    if interval is not None:  # the verdict did not need the exact rank (Monte Carlo value, labelled)
        assert worst is not None
        montecarlo = {"rank_gamma": rank_gamma,
                      "error_probability": (worst.montecarlo or {}).get("error_probability", 0.0)
                      if worst.rank is None else 0.0}
        from exactident.ranks.intervals import MONTE_CARLO_TARGET

        if float(montecarlo["error_probability"] or 0.0) > MONTE_CARLO_TARGET:
            montecarlo = None  # a Monte Carlo value whose error bound is not small is not worth its label
        cs = cs_from_bounds(interval[0], interval[1], sym.dim_free)  # None: the rank is not settled
    certificate: dict[str, Any] | None = None
    if ranks and all(r.certificate is not None for r in ranks):
        certificate = {"free_rank": {"kind": "free-rank", "ties": _tie_dicts(state), "persistent": fw.persistent,
                                     "resolutions": gr.resolutions}}
    persistent, free_ties = fw.persistent, fw.free_ties
    if gr.full:
        verdict, decided = "identifiable", "free-rank"
        where = f" on each of the {len(ranks)} tie resolutions" if n_ties else ""
        if persistent:
            where += f" ({len(persistent)} persistent ties, whose side changes nothing)"
        reason = (f"rank Gamma_free = {sym.dim_free} = dim_free (= {cn.n_params} parameters - "
                  f"{sym.describe()}){where}: locally identifiable up to "
                  + ("rescaling" if set(sym.kinds) <= {"rescaling"} else "these symmetries"))
    else:
        verdict, decided = "inconclusive", "none"
        ties_text = f"{len(free_ties)} ties ({cn.describe_ties([state.ties[t] for t in free_ties])})"
        more = f" ({len(persistent)} persistent ties more)" if persistent else ""
        if not gr.enumerable:
            reason = (f"{ties_text}: 2^{len(free_ties)} tie resolutions exceed the cap of {max_resolutions}" + more)
        elif first and not ranks:
            reason = (f"{ties_text}: 2^{len(free_ties)} tie resolutions, not enumerated: a certificate valid on "
                      "every resolution was searched first" + more)
        elif interval is not None:
            lo, hi = interval
            reason = (f"rank Gamma_free certified in [{lo}, {hi}] (Monte Carlo value {rank_gamma}; exact value: "
                      f"--exact-ranks), dim_free = {sym.dim_free}")
        else:
            reason = f"rank Gamma_free = {rank_gamma} < dim_free = {sym.dim_free}"
        if gr.zero_params:
            reason += (f" (exact kernel vectors from dead, silent or constant units, moving "
                       f"{cn.describe_params(gr.zero_params)})")
        if found is not None:  # the certificate part and the rule are named after its kind
            verdict, decided = "not-identifiable", found["kind"]
            reason += f"; but {found['why']}"
            part = {k: v for k, v in found.items() if k != "why"}
            certificate = {**(certificate or {}), found["kind"].replace("-", "_"): part}
        else:
            reason += f"; C_N is not proved for {_features_text(cn)}; no certificate found"
    if not structural:
        skipped.update(dict.fromkeys(CERTIFICATES, "the certificate search is off (structural=False)"))
    if not gr.enumerable:  # the cap the resolutions were left at, for the verifier to hold against its count
        extra[NOT_ENUMERATED] = past_the_cap(max_resolutions, len(free_ties))
    extra["rules"] = rule_entries(cn, decided, tried, skipped)
    return Report(name=name, widths=cn.layer_widths, n_samples=len(X), dim=sym.dim_free,
                  # null past the cap, and beside an interval (its Monte Carlo value is montecarlo's)
                  rank_gamma=None if interval is not None else rank_gamma,
                  rank_a=None, cs=cs,  # type: ignore[arg-type]  # null when the interval leaves it open
                  cn=None,  # type: ignore[arg-type]  # Theorem 8 is not used here
                  degenerate=False, on_boundary=bool(n_ties), n_ties=n_ties, verdict=verdict,
                  reason=with_sample_size(reason, X, cn.widths[-1], sym.dim_free, free=True),
                  patterns=gr.patterns if n_ties else None, certificate=certificate, extra=extra,
                  decided_by=decided, rank_gamma_interval=interval, montecarlo=montecarlo)
