"""The report's own claims, checked against the case's facts and what the certificate proved.

:mod:`exactident.verify.certificate` verifies the certificate's parts; this
module then checks every claim of the report (docs/boundary.md, "What VALID
means"):

- *structural* claims against :class:`exactident.verify.facts.CaseFacts`:
  ``format``, ``widths``, ``n_samples``, ``dim``, ``degenerate``, ``on_boundary``, ``n_ties``;
- *rank* claims (``rank_gamma``, ``rank_a``, ``cs``, ``cn``, every ``patterns`` entry)
  against the certified ranks (a claim with no certified rank to compare with is not valid);
- the *verdict* against what the parts prove, by the rules of docs/boundary.md;
- ``rank_a_lower_bound`` (``R_A >= value``, with ``rank_a: null``) against the lower
  bound the rank part certifies, ``certified_by`` against the upper-bound kinds of the
  verified rank part, ``provenance`` against the case file's;
- ``decided_by``: the named rule must be one that the verified parts prove, for that verdict.

``reason``, ``summary`` (prose), ``numeric`` (the float cross-check) and ``stage``
are not claims about the exact facts and are not verified; any other unknown
field is not valid.  A report that says it is not certified (``certified: false``,
``error_probability``: Monte Carlo ranks) or that its analysis ran out of time
(``timed_out: true``) is never valid (:func:`uncertified_claims`).  Each failure
names the value found and the value claimed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from exactident.model.conditions import cn_from_bounds, cs_from_bounds
from exactident.verify.arith import BadField, need, show, unknown_fields
from exactident.verify.boundary import BoundaryResult, Resolution
from exactident.verify.common_claims import (
    as_json_object,
    identity_claims,
    provenance_claims,
    reachable_claim,
    uncertified_claims,
)
from exactident.verify.common_claims import same_json as _same
from exactident.verify.common_claims import typed_field as _typed
from exactident.verify.facts import CaseFacts
from exactident.verify.rank_rules import RankBounds, proves_identifiable, rank_claim_problems, smallest
from exactident.verify.verdict import identifiable_proved, own_ranks_count, past_cap_note, verdict_strength_problems

__all__ = ["NOT_VERIFIED", "REPORT_FIELDS", "RULES", "Proofs", "decided_by_claim", "extra_claims",
           "identity_claims", "rank_and_pattern_claims", "reachable_claim",
           "structural_claims", "uncertified_claims", "verdict_claim", "verify_degenerate"]

#: Fields of ``exactident-report/1`` (docs/cli.md).
REPORT_FIELDS = ("format", "name", "widths", "n_samples", "dim", "rank_gamma", "rank_a", "cs", "cn", "degenerate",
                 "on_boundary", "n_ties", "verdict", "reason", "decided_by", "patterns", "numeric", "certificate",
                 "summary", "certified_by", "rank_a_lower_bound", "provenance", "certified", "error_probability",
                 "timed_out", "stage", "parameters", "neurons", "kernel_basis", "explanation",
                 "rank_gamma_interval", "montecarlo", "rank_gamma_interval_why", "resolutions_not_enumerated")
#: Fields that are not claims about the exact facts, with why.
NOT_VERIFIED = {"reason": "prose", "summary": "prose", "numeric": "the float cross-check, not an exact claim",
                "stage": "where a timed-out analysis stopped, not an exact claim", "explanation": "prose",
                "montecarlo": "a labelled Monte Carlo estimate, checked to lie in the reported interval, not certified",
                "rank_gamma_interval_why": "why the exact rank was not computed: the engine's choice or cost "
                                           "estimate, not an exact claim"}

VERDICTS = ("identifiable", "not-identifiable", "inconclusive", "degenerate")
#: ``decided_by`` values and the verdict each rule gives (docs/cli.md).
RULES = {"theorem-9": "identifiable", "boundary-cs": "identifiable", "theorem-8": "not-identifiable",
         "boundary-entering": "not-identifiable", "line": "not-identifiable", "dead-neuron": "not-identifiable",
         "untouched-input": "not-identifiable", "proportional-neurons": "not-identifiable",
         "always-active-block": "not-identifiable", "unpinned-hyperplane": "not-identifiable",
         "degenerate": "degenerate", "none": "inconclusive"}
_PATTERN_KEYS = ("ties", "rank_gamma", "rank_a", "cs", "cn", "reachable")


@dataclass
class Proofs:
    """What the verified parts established (``None``/False: not established)."""

    degenerate: bool = False
    nonequivalence: str | None = None        # "entering" or "line": a valid not-identifiable proof
    entering: bool = False                   # a valid entering part
    line: bool = False                       # a valid line part
    mechanism: str | None = None             # a valid structural part (with a valid line part)
    rank_part: tuple[int | None, int | None] | None = None  # certified (R_Gamma, R_A) at the >= 0 pattern
    boundary: BoundaryResult | None = None
    rank_a_lower: int | None = None          # certified lower bound on R_A by the rank part (R_A when certified)
    rank_reaches: Any = None                 # with the rank part's interval: do the verifier's own ranks reach v
    closed_by: dict[str, str] | None = None  # upper-bound kind per matrix of the verified rank part
    #: certified (lo, hi) for R_Gamma when the rank part's rank_gamma is the interval form; rank_part[0] is then None
    rank_gamma_interval: tuple[int, int] | None = None


def structural_claims(report: dict, facts: CaseFacts) -> list[str]:
    """``format``, ``widths``, ``n_samples``, ``dim``, ``degenerate``, ``on_boundary``, ``n_ties``, unknown fields."""
    fails = [f"{key}: unknown report field, not verified" for key in sorted(set(report) - set(REPORT_FIELDS))]
    if "format" in report and report["format"] != "exactident-report/1":
        fails.append(f"format: report says {report['format']!r}, expected 'exactident-report/1'")
    widths = _typed(report, "widths", list)
    if widths is not None and not _same(widths, facts.widths):
        fails.append(f"widths: report says {widths}, the case has {facts.widths}")
    expect = {"n_samples": facts.n, "dim": facts.dim, "n_ties": len(facts.ties)}
    for key, value in expect.items():
        got = _typed(report, key, int)
        if got is not None and got != value:
            fails.append(f"{key}: report says {got}, the case gives {value}")
    for key, value in (("degenerate", bool(facts.degenerate)), ("on_boundary", bool(facts.ties))):
        got = _typed(report, key, bool)
        if got is not None and got != value:
            why = (f"neurons in S: {[(l, v) for l, v, _ in facts.degenerate][:4]}" if key == "degenerate"
                   else f"ties: {facts.ties[:4]}")
            fails.append(f"{key}: report says {got}, the case gives {value} ({why})")
    return fails


def verify_degenerate(part: Any, facts: CaseFacts) -> tuple[list[str], list[str]]:
    """A ``degenerate`` part ``{"layer", "neuron", "why"}``: the named hidden neuron puts theta in ``S``."""
    where = "certificate.degenerate"
    if not isinstance(part, dict):
        raise BadField(where, f"expected dict, found {type(part).__name__}")
    fails = unknown_fields(part, ("layer", "neuron", "why"), where)
    l, v, why = need(part, "layer", int, where), need(part, "neuron", int, where), need(part, "why", str, where)
    if not (1 <= l < facts.L and 0 <= v < facts.widths[l]):
        return fails + [f"{where}: ({l},{v}) is not a hidden neuron of this network (widths {facts.widths})"], []
    W, b = facts.W, facts.b
    if why == "outgoing":
        vals = [W[l][k][v] for k in range(facts.widths[l + 1])]
    elif why == "incoming":
        vals = [*W[l - 1][v], b[l - 1][v]]
    else:
        raise BadField(f"{where}.why", f"expected 'outgoing' or 'incoming', found {why!r}")
    if any(vals):
        fails.append(f"{where}: neuron ({l},{v}) has {why} weights{' and bias' if why == 'incoming' else ''} "
                     f"{[show(x) for x in vals]}; the certificate claims they are all zero")
    if fails:
        return fails, []
    return [], [f"degenerate part valid: hidden neuron ({l},{v}) has all {why} weights zero (theta in S)"]


def _common_ranks(facts: CaseFacts, proofs: Proofs) -> tuple[int | None, int | None] | None:
    """Certified ranks of the one ``alpha`` near theta, when no visible tie exists."""
    if facts.visible:
        return None
    res = proofs.boundary.resolutions if proofs.boundary else None
    if res and len(res) == 1 and res[0].rank_gamma is not None:
        return res[0].rank_gamma, res[0].rank_a
    return proofs.rank_part


def gamma_bounds(facts: CaseFacts, proofs: Proofs) -> RankBounds | None:
    """Certified bounds on the ``R_Gamma`` the report's top-level claims are about (None: nothing certified).

    On the boundary (visible ties): the smallest ``R_Gamma`` over every tie resolution, which the boundary
    part lists in full (:func:`exactident.verify.rank_rules.smallest`).  Off it: the one ``alpha`` near theta,
    certified by the boundary part's single resolution or the rank part (exact, or its interval).
    """
    res = proofs.boundary.resolutions if proofs.boundary else None
    if facts.visible and not facts.degenerate:
        return smallest(r.bounds for r in res) if res else None
    if not facts.degenerate and res and len(res) == 1 and res[0].bounds is not None:
        return res[0].bounds
    if proofs.rank_part is not None and proofs.rank_part[0] is not None:
        return RankBounds(proofs.rank_part[0], proofs.rank_part[0])
    if proofs.rank_gamma_interval is not None:
        return RankBounds(*proofs.rank_gamma_interval)
    return None


def _top_level_rank_a(facts: CaseFacts, proofs: Proofs) -> int | None:
    """The certified ``rank_a`` the report's top-level ``rank_a`` must match (None: not certified).

    On the boundary the rule is docs/cli.md's: the smallest ``rank_a`` among the resolutions of smallest
    ``rank_gamma``, certified only if every resolution has an exact ``R_Gamma`` and each of those an ``R_A``.
    """
    res = proofs.boundary.resolutions if proofs.boundary else None
    if facts.visible and not facts.degenerate:
        if not res or any(r.rank_gamma is None for r in res):
            return None
        low = min(r.rank_gamma for r in res if r.rank_gamma is not None)
        ras = [r.rank_a for r in res if r.rank_gamma == low]
        return min(ra for ra in ras if ra is not None) if None not in ras else None
    common = _common_ranks(facts, proofs) if not facts.degenerate else proofs.rank_part
    return common[1] if common is not None else None


def _common_lower(facts: CaseFacts, proofs: Proofs) -> int | None:
    """Certified lower bound on ``R_A`` of the one ``alpha`` near theta (no visible tie)."""
    if facts.visible:
        return None
    res = proofs.boundary.resolutions if proofs.boundary else None
    if res and len(res) == 1 and res[0].rank_gamma is not None:
        return res[0].rank_a
    return proofs.rank_a_lower


def _cn_problem(where: str, claimed_cn: Any, rg: int, ra: int | None, dim: int,
                ra_lower: int | None = None) -> str | None:
    if rg == dim:
        truth = True
    elif ra is None and ra_lower is not None and ra_lower > rg:
        truth = True  # R_A >= ra_lower > R_Gamma: C_N holds without the exact R_A
    elif ra is None:
        return f"{where}cn: report says {claimed_cn}, but R_A is not certified, so C_N cannot be checked"
    else:
        truth = not (rg == ra < dim)
    if claimed_cn != truth:
        shown = f"R_A = {ra}" if ra is not None else f"R_A >= {ra_lower}"
        return f"{where}cn: report says {claimed_cn}, the certified ranks give {truth} (R_Gamma = {rg}, {shown})"
    return None


def rank_and_pattern_claims(report: dict, facts: CaseFacts, proofs: Proofs) -> list[str]:
    """``rank_gamma``, ``rank_a``, ``cs``, ``cn``, ``rank_gamma_interval`` and ``patterns`` against the certified ranks.

    ``rank_gamma``, ``cs`` and the interval follow :func:`exactident.verify.rank_rules.rank_claim_problems`
    (the rule shared with layer graphs: an interval is never evidence for ``C_S``).
    """
    fails = []
    # null claims nothing (a boundary report that enumerates no resolution must say null)
    claims = {"rank_gamma": _typed(report, "rank_gamma", int, True), "rank_a": _typed(report, "rank_a", int, True),
              "cs": _typed(report, "cs", bool, True), "cn": _typed(report, "cn", bool, True)}
    bounds = gamma_bounds(facts, proofs)
    unenumerated = (bool(facts.visible) and not facts.degenerate and proofs.boundary is not None
                    and not proofs.boundary.resolutions)
    if bounds is None and unenumerated:
        fails += [f"{k}: report says {v}, but no tie resolution is enumerated in the certificate, so the smallest "
                  f"R_Gamma over the {len(facts.visible)} visible tie(s)' resolutions is unknown: it must be null"
                  for k, v in claims.items() if v is not None]
    elif bounds is None:
        fails += [f"{k}: report says {v}, but the certificate certifies no rank to check it against"
                  for k, v in claims.items() if v is not None]
    if bounds is None:
        for key in ("rank_gamma_interval", "montecarlo"):
            if report.get(key) is not None:
                fails.append(f"{key}: report says {report[key]}, but the certificate certifies no R_Gamma")
        return fails + _pattern_claims(report, facts, proofs)
    dim = facts.dim
    from_rank_part = proofs.rank_gamma_interval is not None and bounds == RankBounds(*proofs.rank_gamma_interval)
    fails += rank_claim_problems(report, bounds, dim, reaches=proofs.rank_reaches if from_rank_part else None)
    certified_ra = _top_level_rank_a(facts, proofs)
    ra = claims["rank_a"]
    if ra is not None and ra != certified_ra:
        rule = (" (the smallest R_A among the resolutions of smallest R_Gamma)"
                if facts.visible and proofs.boundary and proofs.boundary.resolutions else "")
        fails.append(f"rank_a: report says {ra}, the certificate certifies "
                     f"{'no R_A' if certified_ra is None else certified_ra}{rule}")
    cn = claims["cn"]
    if cn is not None:
        ra_lower = _common_lower(facts, proofs)
        if bounds.exact is not None:
            problem = _cn_problem("", cn, bounds.exact, ra if ra is not None else certified_ra, dim, ra_lower)
            if problem:
                fails.append(problem)
        elif not (cn is True and cn_from_bounds(bounds.hi, certified_ra, ra_lower)):
            fails.append(f"cn: report says {cn}, but the certified interval {bounds.text} and R_A "
                         f"({certified_ra if certified_ra is not None else f'>= {ra_lower}'}) prove C_N only when "
                         f"R_Gamma <= {bounds.hi} < R_A")
    fails += _pattern_claims(report, facts, proofs)
    return fails


def _pattern_claims(report: dict, facts: CaseFacts, proofs: Proofs) -> list[str]:
    patterns = report.get("patterns")
    res: list[Resolution] | None = proofs.boundary.resolutions if proofs.boundary else None
    if patterns is None or (patterns == [] and not (facts.visible and not facts.degenerate)):
        return []  # no claim ([] is what a case whose ties are all invisible gets: no visible tie to resolve)
    if not isinstance(patterns, list):
        raise BadField("patterns", f"expected list, found {type(patterns).__name__}")
    if not facts.visible or facts.degenerate or res is None:
        return [f"patterns: report lists {len(patterns)} tie resolution(s), but the certificate certifies none "
                f"(the case has {len(facts.visible)} visible tie(s))"]
    if len(patterns) != len(res):
        return [f"patterns: report lists {len(patterns)} resolution(s), the certificate certifies {len(res)}"]
    fails: list[str] = []
    ties = proofs.boundary.ties if proofs.boundary else []
    dim = facts.dim
    for j, (p, r) in enumerate(zip(patterns, res)):
        at = f"patterns[{j}]"
        if not isinstance(p, dict):
            raise BadField(at, f"expected dict, found {type(p).__name__}")
        fails += unknown_fields(p, _PATTERN_KEYS, at)
        want = [{"sample": i, "layer": l, "neuron": v, "active": a} for (i, l, v), a in zip(ties, r.active)]
        if not _same(need(p, "ties", list, at), want):  # an entry's claims are about the resolution it names
            fails.append(f"{at}.ties: report says {p['ties']}, the certificate's resolution {j} is {want}")
        rg = r.rank_gamma
        bounds = r.bounds
        got_rg = _typed(p, "rank_gamma", int)
        if got_rg is not None and got_rg != rg:
            shown = "only the interval " + bounds.text if bounds is not None and rg is None else str(rg)
            fails.append(f"{at}.rank_gamma: report says {got_rg}, the certificate certifies {shown}")
        got_ra = _typed(p, "rank_a", int, True)
        if got_ra is not None and got_ra != r.rank_a:
            fails.append(f"{at}.rank_a: report says {got_ra}, the certificate certifies "
                         f"{'no R_A' if r.rank_a is None else r.rank_a}")
        got_cs = _typed(p, "cs", bool)
        if got_cs is not None and bounds is not None:
            truth = cs_from_bounds(bounds.lo, bounds.hi, dim)
            if got_cs is not truth:
                fails.append(f"{at}.cs: report says {got_cs}, the certified ranks give "
                             f"{'nothing (the rank is not settled)' if truth is None else truth} "
                             f"(R_Gamma {bounds.text}, dim = {dim})")
        got_cn = _typed(p, "cn", bool)
        if got_cn is not None and rg is None:
            fails.append(f"{at}.cn: report says {got_cn}, but R_Gamma is not certified exactly at this resolution")
        elif got_cn is not None and rg is not None:
            problem = _cn_problem(f"{at}.", got_cn, rg, r.rank_a, dim)
            if problem:
                fails.append(problem)
        fails += reachable_claim(p, at, bool(r.reachable))
    return fails


def verdict_claim(verdict: str, facts: CaseFacts, proofs: Proofs,
                  everyone: list[tuple[bool, ...]] | None = None,
                  own_reaches: Callable[[tuple[bool, ...], int], bool] | None = None,
                  capped: dict | None = None) -> list[str]:
    """The verdict must be what the verified parts prove, by the rules of docs/boundary.md.

    ``everyone`` (every tie resolution, sides over ``facts.visible``; :mod:`exactident.verify.resolutions`)
    and ``own_reaches`` (the verifier's own ranks mod p) serve the rule against weaker verdicts
    (:mod:`exactident.verify.verdict`): an ``inconclusive`` verdict with nothing proving not-identifiable is
    refused when ``C_S`` holds on every resolution by the certified bounds or the verifier's own ranks, whether
    the report lists the resolutions or stopped at the cap it records (``capped``, its
    ``resolutions_not_enumerated``, named in the message).
    """
    if verdict not in VERDICTS:
        return [f"verdict: report says {verdict!r}, not one of {list(VERDICTS)}"]
    if facts.degenerate:
        l, v, why = facts.degenerate[0]
        if verdict != "degenerate":
            return [f"verdict: report says {verdict}, but theta is in S (hidden neuron ({l},{v}), {why} weights all "
                    "zero): the verdict is degenerate"]
        return [] if proofs.degenerate else ["verdict: report says degenerate, but the certificate has no valid "
                                             "degenerate part naming the neuron"]
    if verdict == "degenerate":
        return ["verdict: report says degenerate, but no hidden neuron of the case puts theta in S"]
    dim = facts.dim
    bounds = gamma_bounds(facts, proofs)
    res = proofs.boundary.resolutions if proofs.boundary else None
    # C_S needs the certified lower bound to reach dim (an interval's upper end is never evidence for it)
    identifiable = proves_identifiable(bounds, dim) and (not facts.visible or bool(res))
    ra = _top_level_rank_a(facts, proofs)
    if not facts.visible:
        shown = (f"certified R_Gamma {'= ' + bounds.text if bounds.exact is not None else 'in ' + bounds.text}, "
                 f"R_A = {ra}" if bounds is not None else "no certified rank")
    else:
        fails_cs = sum(r.rank_gamma != dim for r in res) if res else None
        shown = (f"C_S fails on {fails_cs} of {len(res)} tie resolutions" if res
                 else "the tie resolutions are not certified")
    by_ranks = (not facts.visible and bounds is not None and bounds.exact is not None and ra is not None
                and bounds.exact == ra < dim)  # Theorem 8: C_N fails, from exact ranks only
    not_identifiable = proofs.nonequivalence is not None or by_ranks
    if verdict == "identifiable" and not identifiable:
        return [f"verdict: report says identifiable, but the certificate does not prove C_S on every tie resolution "
                f"({shown}, dim = {dim})"]
    if verdict == "not-identifiable" and not not_identifiable:
        return [f"verdict: report says not-identifiable, but no valid entering or line part proves it and the "
                f"ranks do not ({shown}, dim = {dim})"]
    why_identifiable = "C_S certified on every tie resolution"
    if not identifiable and own_reaches is not None and own_ranks_count(verdict, not_identifiable) \
            and verdict == "inconclusive":
        # the rule shared with layer graphs: the verifier's own ranks count as a proof against a weaker verdict,
        # also for a report that stopped at its cap (verify.verdict: a recorded cap proves nothing)
        certified = _certified_by_resolution(facts, proofs)
        if identifiable_proved(everyone, dim, certified, own_reaches):
            identifiable = True
            why_identifiable = (f"C_S on every tie resolution: the certified ranks or the verifier's own ranks mod p "
                                f"reach dim = {dim}" + (past_cap_note(capped, everyone) if not res else ""))
    strength = verdict_strength_problems(
        verdict, identifiable, not_identifiable, why_identifiable,
        "a valid entering or line part" if proofs.nonequivalence else "certified R_Gamma = R_A < dim (Theorem 8)")
    if strength:
        return strength
    if verdict == "inconclusive" and not facts.visible:
        # off the boundary, inconclusive says C_S fails and C_N holds: both certified (an interval whose upper
        # end reaches dim leaves the rank not settled, and proves neither)
        cs_fails = bounds is not None and bounds.hi < dim
        cn_holds = bounds is not None and (bool(cn_from_bounds(bounds.hi, ra, _common_lower(facts, proofs)))
                                           or (bounds.exact is not None and ra is not None and bounds.exact != ra))
        if not (cs_fails and cn_holds):
            return [f"verdict: report says inconclusive, but the certificate does not certify the ranks that would "
                    f"show C_S failing and C_N holding ({shown})"]
    return []


def _certified_by_resolution(facts: CaseFacts, proofs: Proofs) -> dict[tuple[bool, ...], RankBounds | None]:
    """Certified ``R_Gamma`` bounds per tie resolution, keyed by sides over ``facts.visible`` (sorted)."""
    if not facts.visible:
        return {(): gamma_bounds(facts, proofs)}
    res = proofs.boundary.resolutions if proofs.boundary else None
    if not res or proofs.boundary is None:
        return {}
    order = [proofs.boundary.ties.index(t) for t in facts.visible]
    return {tuple(r.active[k] for k in order): r.bounds for r in res}


def extra_claims(report: dict, facts: CaseFacts, proofs: Proofs, provenance: Any) -> list[str]:
    """``rank_a_lower_bound``, ``certified_by`` and ``provenance`` (``provenance``: the case file's)."""
    fails = []
    lower = _typed(report, "rank_a_lower_bound", int, True)
    if lower is not None:
        certified = _common_lower(facts, proofs)
        if certified is None:
            fails.append(f"rank_a_lower_bound: report says {lower}, but the certificate certifies no lower bound "
                         "on R_A for the report's ranks")
        elif lower != certified:
            fails.append(f"rank_a_lower_bound: report says {lower}, the certificate certifies R_A >= {certified}")
    if "certified_by" in report:
        claim = need(report, "certified_by", dict, "")
        if proofs.closed_by is None:
            fails.append(f"certified_by: report says {claim}, but the certificate has no verified rank part")
        elif not _same(claim, proofs.closed_by):
            fails.append(f"certified_by: report says {claim}, the verified rank part's bounds are {proofs.closed_by}")
    if "provenance" in report:
        fails += provenance_claims(report["provenance"], as_json_object(provenance) if provenance else None)
    return fails


def decided_by_claim(report: dict, verdict: str | None, facts: CaseFacts, proofs: Proofs) -> list[str]:
    """``decided_by`` names a rule of :data:`RULES` that goes with the verdict and that the verified parts prove."""
    rule = _typed(report, "decided_by", str)
    if rule is None:
        return []
    if rule not in RULES:
        return [f"decided_by: report says {rule!r}, not one of {list(RULES)}"]
    if verdict is not None and RULES[rule] != verdict:
        return [f"decided_by: report says {rule}, which gives {RULES[rule]}, but the verdict is {verdict}"]
    bounds = gamma_bounds(facts, proofs)
    res = proofs.boundary.resolutions if proofs.boundary else None
    dim = facts.dim
    ra = _top_level_rank_a(facts, proofs)
    proved = {  # C_S from the certified lower bound only: an interval's upper end never proves Theorem 9
        "theorem-9": not facts.visible and proves_identifiable(bounds, dim),
        "boundary-cs": bool(facts.visible) and bool(res) and proves_identifiable(bounds, dim),
        "theorem-8": (not facts.visible and bounds is not None and bounds.exact is not None and ra is not None
                      and bounds.exact == ra < dim),
        "boundary-entering": proofs.entering,
        "line": proofs.line,
        "degenerate": proofs.degenerate,
        "none": True,  # inconclusive: verdict_claim checks that nothing contradicts it
    }.get(rule, proofs.mechanism == rule)
    if facts.degenerate and rule != "degenerate":
        proved = False  # theta in S: only the degenerate rule applies (the theorems do not)
    if not proved:
        what = {"theorem-9": "certified R_Gamma = dim with no visible tie",
                "boundary-cs": "C_S certified on every tie resolution",
                "theorem-8": "certified R_Gamma = R_A < dim with no visible tie",
                "boundary-entering": "valid entering part", "line": "valid line part",
                "degenerate": "valid degenerate part"}.get(rule, f"valid line part with a valid {rule} "
                                                                 "structural part")
        return [f"decided_by: report says {rule}, but the certificate has no {what}"]
    return []
