"""``verify-certificate`` for reports of constrained networks (convolution, pooling, skips, leaky ReLU, PReLU).

The verifier trusts nothing in the report: from the compiled network and the sample it
recomputes, with its own code (:mod:`exactident.verify.constrained_facts`), the
pre-activations and ties, ``Gamma_free`` mod primes for any tie resolution, the rescaling
symmetry ``S_H``, ``dim_free = rank T - dim S_H`` and the softmax bound, then checks every claim:

- ``widths``, ``n_samples``, ``dim`` (``= dim_free``), ``architecture`` (``features``,
  ``n_params``, ``rank_t``, ``symmetry_dim``, ``dim_free``, ``input_shape``,
  ``softmax_rank_bound``), ``on_boundary``, ``n_ties``;
- ``rank_a`` and ``cn`` must be null (also in ``patterns``): Theorem 8 of the paper (``C_N``)
  is proved for the plain layered ReLU MLP only, so a ``C_N`` value, or ``decided_by:
  theorem-8``, for another architecture is refused; so is ``degenerate``;
- the tie resolutions: the verifier enumerates them itself (the engine's rule,
  :func:`exactident.model.gamma_free.tie_resolutions` on the persistent ties it recomputed, up to
  ``--max-resolutions``), and a ``free_rank`` part must list every one
  (:func:`exactident.verify.rank_rules.cover_problems`, the rule of the plain MLP's boundary part);
- ``rank_gamma``, ``cs``, ``rank_gamma_interval``, ``montecarlo`` against the smallest rank over every
  resolution (:func:`exactident.verify.rank_rules.rank_claim_problems`): bounds from the ``free_rank``
  part (:mod:`exactident.verify.constrained_parts`: each lower bound recomputed mod its prime, each upper
  bound the proven ``dim_free``, exact kernel vectors or an exact rank), or without one the verifier's own
  ranks mod p and ``min(rows, dim_free)``; an interval is never evidence for ``cs: true``; each of
  ``patterns`` is a certified resolution with its rank, each tie listed once; ``reachable: true`` needs a
  witness (:func:`exactident.verify.claims.reachable_claim`, the plain MLP's rule), and a layer graph has
  none, so only ``"unknown"``;
- the verdict: ``identifiable`` needs ``rank Gamma_free = dim_free`` on every tie resolution
  (the certified lower bounds, or the verifier's own ranks mod p: a rank mod p never exceeds the
  rank over Q, and ``S_H`` is in the kernel so the rank never exceeds ``dim_free``); ``not-identifiable``
  needs a verified ``dead_units``, ``constant_units``, ``slope_lines``, ``submersion``, ``entering_submersion``,
  ``line`` or ``constant_rank`` part (:mod:`exactident.verify.constrained_constant_rank`; a ``dead_units``,
  ``constant_units``, ``slope_lines`` or ``line`` line states its segment ``t0``, checked exactly; a ``line``
  part's probe must move,
  :func:`exactident.verify.constrained_parts.check_graph_line`);
  no weaker verdict beside a proof (:func:`exactident.verify.rank_rules.verdict_strength_problems`, the
  plain MLP's rule); ``decided_by`` must name a rule giving the verdict (:data:`RULES`), backed by its part;
- ``rules``: only the ``decided_by`` rule may be ``decided``, and Theorem 8 must be ``not-applicable``
  (its ``why`` texts are prose, not verified);
- the explain fields ``parameters``, ``units``, ``channels`` and ``kernel_basis``
  (:mod:`exactident.verify.constrained_explained`); ``explanation`` is prose, printed as not verified.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import Any

from exactident.io.limits import DEFAULT_WORK_LIMITS, WorkLimits
from exactident.model.conditions import cs_from_bounds
from exactident.model.constrained import ConstrainedNetwork
from exactident.model.gamma_free import tie_resolutions
from exactident.verify.claims import identity_claims, reachable_claim, uncertified_claims
from exactident.verify.constrained_constant_rank import check_constant_rank
from exactident.verify.constrained_facts import ConstrainedFacts, rank_mod_p, softmax_rank_bound, verifier_primes
from exactident.verify.constrained_parts import check_free_rank, check_graph_line, check_line_part
from exactident.verify.constrained_submersion import check_entering_submersion, check_submersion, persistent_ties
from exactident.verify.rank_rules import (
    RankBounds,
    cover_problems,
    proves_identifiable,
    rank_claim_problems,
    smallest,
    verdict_strength_problems,
)
from exactident.verify.schema import (
    AnyOf,
    Anything,
    Enum,
    Int,
    List,
    Null,
    Number,
    Obj,
    Rational,
    Tuple,
    Type,
    validate,
)

__all__ = ["CONSTRAINED_REPORT", "EXPLAIN_NOT_VERIFIED", "MAX_RESOLUTIONS", "RULES", "verify_constrained"]

#: The explain field of a constrained network's report that is prose (the others are verified).
EXPLAIN_NOT_VERIFIED = ("explanation",)

#: Tie resolutions the verifier enumerates by default (``2^ties``; ``--max-resolutions``); beyond, a claim that
#: needs them is not verified.
MAX_RESOLUTIONS = DEFAULT_WORK_LIMITS.max_resolutions
#: Primes tried per resolution before a rank mod p below the claim counts as a failure.
N_PRIMES = 3

NAT, BOOL, STR = Int(), Type(bool), Type(str)


TIE = Obj({"sample": NAT, "layer": Int(1), "neuron": NAT})
RANK_ONE = Obj({"shape": List(NAT, 2)},
               {"rank": NAT, "lower": Obj({"prime": NAT, "rank_mod_p": NAT},
                                          {"matrix": STR, "rows": AnyOf(Enum("all"), List(NAT))}),
                "upper": Obj({"kind": STR}, {"bound": NAT, "source": STR, "nullity": NAT, "primes": List(NAT),
                                              "kernel": List(List(Tuple(NAT, Rational())))})})
WITNESS = {"eps": Rational(), "x": List(Rational()), "f_0": List(Rational()), "f_eps": List(Rational())}
UNITS = List(Tuple(NAT, NAT))  # (layer, unit); layer 0 is an input coordinate (a blank input, dead_units)
#: The schema of a constrained network's report (``exactident-report/1`` with ``architecture``).
CONSTRAINED_REPORT = Obj({"architecture": Obj({"features": List(STR), "n_params": NAT, "rank_t": NAT,
                                                "symmetry_dim": NAT, "dim_free": NAT},
                                               {"input_shape": List(NAT), "softmax_rank_bound": NAT})}, {
    "name": STR, "verdict": Enum("identifiable", "not-identifiable", "inconclusive", "degenerate"),
    "format": Enum("exactident-report/1"), "widths": List(Int(1)), "n_samples": NAT, "dim": NAT,
    "rank_gamma": Null(NAT), "rank_a": AnyOf(Type(type(None)), NAT), "cs": Null(BOOL),
    "cn": AnyOf(Type(type(None)), BOOL), "degenerate": BOOL, "on_boundary": Null(BOOL), "n_ties": Null(NAT),
    "reason": STR, "decided_by": STR, "numeric": Type(dict), "summary": List(STR), "provenance": Anything(),
    "certified": BOOL, "timed_out": BOOL, "stage": STR, "error_probability": Number(0, 1),
    "rank_gamma_interval": List(NAT, 2),
    "montecarlo": Obj({"rank_gamma": NAT, "error_probability": Number(0, 1)}),
    "parameters": List(Obj({"name": STR, "index": NAT, "class": Enum(
        "gauge", "identifiable", "not-identifiable", "first-order-determined", "undetermined", "unknown")},
        {"by": STR, "witness": AnyOf(Enum("certificate"), List(NAT, 2)), "line": Enum(True), "why": STR})),
    "units": List(Obj({key: Anything() for key in (
        "layer", "unit", "name", "kind", "slope", "slope_parameter", "n_active", "n_tie", "n_slope_side", "dead",
        "silent", "constant", "local_rank", "local_full", "pinned")})),
    "channels": List(Type(dict)),
    "kernel_basis": List(Obj({"active": AnyOf(Type(type(None)), List(BOOL)), "rank_gamma": NAT,
                              "directions": List(Obj({"delta": Type(dict)}, {"line": Enum(True)}))})),
    "explanation": List(STR),
    "patterns": List(Obj({"ties": List(Obj({"sample": NAT, "layer": Int(1), "neuron": NAT, "active": BOOL})),
                          "rank_gamma": Null(NAT), "rank_a": Null(NAT), "cs": Null(BOOL), "cn": Null(BOOL)},
                         {"reachable": AnyOf(Enum(True), Enum("unknown"))})),
    "certificate": Null(Obj({}, {
        "free_rank": Obj({"kind": Enum("free-rank"), "ties": List(TIE),
                          "resolutions": List(Obj({"active": List(BOOL), "rank_gamma": RANK_ONE}))},
                         {"persistent": List(NAT)}),
        "submersion": Obj({"kind": Enum("submersion"), "y": List(List(Rational())), "prime": NAT, "rank_x": NAT,
                           "rank_xy": NAT}),
        "entering_submersion": Obj({"kind": Enum("entering-submersion"), "active": List(BOOL),
                                    "delta": List(Tuple(NAT, Rational())), "y": List(Rational()), "prime": NAT,
                                    "rank_x": NAT}),
        "constant_rank": Obj({"kind": Enum("constant-rank"), "y": List(List(Rational())), "prime": NAT,
                              "rank_a": NAT, "rank_x": NAT, "rank_xy": NAT}),
        "dead_units": Obj({"kind": Enum("dead-units"), "parameter": NAT, "name": STR, "units": UNITS,
                           "direction": Enum("-1"), "t0": Null(Rational()), **WITNESS}),
        "slope_lines": Obj({"kind": Enum("slope-lines"), "parameter": NAT, "name": STR, "units": UNITS,
                            "direction": Enum("1"), "t0": Null(Rational()), **WITNESS}),
        "constant_units": Obj({"kind": Enum("constant-units"), "units": UNITS, "value": Rational(),
                               "delta": List(Tuple(NAT, Rational())), "names": List(STR), "t0": Null(Rational()),
                               **WITNESS}),
        "line": Obj({"kind": Enum("line"), "delta": List(Tuple(NAT, Rational())), "names": List(STR),
                     "t0": Null(Rational()), "probe": List(Rational())})})),
    "rules": List(Obj({"rule": STR, "status": Enum("decided", "tried", "not-applicable", "not-run"), "why": STR}))})
#: ``decided_by`` values a constrained report may carry, with the verdict each gives.
RULES = {"free-rank": "identifiable", "theorem-9": "identifiable", "dead-units": "not-identifiable",
         "constant-units": "not-identifiable", "slope-lines": "not-identifiable", "submersion": "not-identifiable",
         "entering-submersion": "not-identifiable", "line": "not-identifiable",
         "constant-rank": "not-identifiable", "none": "inconclusive"}


class _Ranks:
    """Ranks mod p of ``Gamma_free(s)`` per tie resolution, computed on demand (max over primes)."""

    def __init__(self, facts: ConstrainedFacts) -> None:
        self.facts = facts
        self.primes = verifier_primes(N_PRIMES, facts.avoid)
        self.cache: dict[tuple[bool, ...], int] = {}

    def at(self, sides: tuple[bool, ...], target: int) -> int:
        """Largest rank mod p over the primes, stopping once ``target`` is reached."""
        if sides not in self.cache:
            best = -1
            pattern = self.facts.resolution(sides) if sides else None
            for p in self.primes:
                best = max(best, rank_mod_p(self.facts.gamma_mod_p(p, pattern), p))
                if best >= target:
                    break
            self.cache[sides] = best
        return self.cache[sides]


def verify_constrained(cn: ConstrainedNetwork, X: Sequence[Sequence[object]], report: Any, *,
                       name: str | None = None, input_shape: Sequence[int] | None = None,
                       provenance: Any = None, limits: WorkLimits = DEFAULT_WORK_LIMITS) -> tuple[bool, list[str]]:
    """Re-check a constrained network's report from the network and the sample alone.

    Parameters
    ----------
    cn : ConstrainedNetwork
        The compiled case (never taken from the report).
    X : n rows of ``N_0`` exact numbers (fmpq or int)
    report : dict
        The report (``exactident-report/1`` with ``architecture``).
    name, input_shape, provenance : optional
        The case's, compared with the report's when given.
    limits : WorkLimits
        Caps on the verifier's own work (tie resolutions enumerated, exact eliminations); past one, the
        claim that needs it is not verified (a failure saying so), never a hang.

    Returns
    -------
    (valid, messages) : (bool, list of str)
        What was checked, then what failed (each failure names the field, found and claimed).
        A malformed report is a failure naming its field's JSON path, never an exception.
    """
    facts = ConstrainedFacts.from_network(cn, X)
    if isinstance(report, dict):  # a report of another case: say so before its parts fail for shape reasons
        identity = identity_claims(report, name, list(cn.layer_widths), len(facts.X), dim=facts.symmetry.dim_free)
        if identity:
            return False, identity + ["the report is not about this case: its certificate was not checked"]
    problem = validate(report, CONSTRAINED_REPORT)
    if problem is not None:
        return False, [problem]
    uncertified = uncertified_claims(report)
    if uncertified:  # timed out or Monte Carlo: the report itself says nothing is proved
        return False, uncertified
    max_resolutions = limits.max_resolutions
    sym, fails, msgs = facts.symmetry, [], []
    features = ", ".join(cn.features) or "this architecture"

    def claim(field: str, found: Any, claimed: Any) -> None:
        if claimed != found:
            fails.append(f"{field}: the case gives {found!r}, the report claims {claimed!r}")

    arch = report["architecture"]
    for key, found in (("name", name), ("widths", cn.layer_widths), ("n_samples", len(facts.X)),
                       ("dim", sym.dim_free), ("on_boundary", bool(facts.ties)), ("n_ties", len(facts.ties)),
                       ("provenance", provenance)):
        if key in report and (found is not None or key not in ("name", "provenance")):
            claim(key, found, report[key])
    claim("architecture.features", sorted(cn.features), sorted(arch["features"]))
    for key, found in (("n_params", cn.n_params), ("rank_t", sym.rank_t), ("symmetry_dim", sym.symmetry_dim),
                       ("dim_free", sym.dim_free)):
        claim(f"architecture.{key}", found, arch[key])
    if "softmax_rank_bound" in arch:
        claim("architecture.softmax_rank_bound", softmax_rank_bound(cn, sym), arch["softmax_rank_bound"])
    if "input_shape" in arch:
        if input_shape is not None:
            claim("architecture.input_shape", list(input_shape), arch["input_shape"])
        elif prod(arch["input_shape"]) != cn.widths[0]:
            fails.append(f"architecture.input_shape: {arch['input_shape']} does not hold {cn.widths[0]} inputs")
    if report.get("cn") is not None:
        fails.append(f"cn: Theorem 8 (C_N) is not proved for {features}: a constrained report must say null")
    if report.get("rank_a") is not None:
        fails.append(f"rank_a: R_A is not used for {features} (Theorem 8 is not proved for it): must be null")
    if report.get("degenerate"):
        fails.append("degenerate: no degenerate rule is proved for constrained networks")
    msgs.append(f"recomputed: {cn.n_params} parameters, rank T = {sym.rank_t}, dim S_H = {sym.symmetry_dim}, "
                f"dim_free = {sym.dim_free}, {len(facts.ties)} tie(s)")
    persistent = persistent_ties(facts)  # a side that changes nothing: enumerated active only
    free_ties = [t for t in facts.ties if t not in persistent]
    enumerable = 2 ** len(free_ties) <= max_resolutions
    # the engine's enumeration rule (shared pure function) on the ties the verifier recomputed
    everyone = list(tie_resolutions(len(facts.ties), [k for k, t in enumerate(facts.ties) if t in persistent])) \
        if enumerable else []
    cert = report.get("certificate") or {}
    ranks = _Ranks(facts)
    proved: dict[tuple[bool, ...], tuple[int, int]] = {}
    if "free_rank" in cert:
        bad, proved = check_free_rank(facts, cert["free_rank"], limits)
        if not bad and enumerable:  # the rule shared with the MLP: every resolution the verifier enumerates
            bad = cover_problems(proved, everyone, "certificate.free_rank.resolutions", show=list)
        elif not bad:
            bad = [f"certificate.free_rank.resolutions: 2^{len(free_ties)} tie resolutions are past the verifier's "
                   f"limit of {max_resolutions} (--max-resolutions): not verified"]
        fails += bad
        if not bad:
            open_ = sorted({(lo, hi) for lo, hi in proved.values() if lo < hi})
            msgs.append(f"free_rank part valid: all {len(proved)} tie resolution(s), ranks "
                        f"{sorted({lo for lo, hi in proved.values() if lo == hi})} certified"
                        + (f", intervals {[list(b) for b in open_]}" if open_ else ""))
        else:
            proved = {}

    def all_full() -> bool:  # the verifier's own check: rank Gamma_free(s) = dim_free mod p for every s
        return enumerable and all(ranks.at(s, sym.dim_free) >= sym.dim_free for s in everyone)

    top = min(len(facts.X) * cn.widths[-1], sym.dim_free)

    def own(s: tuple[bool, ...]) -> RankBounds:  # no certificate: the verifier's ranks mod p, and the proven top
        lo = min(ranks.at(s, sym.dim_free), top)
        return RankBounds(lo, top)

    claims_rank = any(report.get(k) is not None for k in ("rank_gamma", "cs", "rank_gamma_interval", "montecarlo"))
    bounds: RankBounds | None = None
    if proved:
        bounds = smallest(RankBounds(*proved[s]) for s in everyone)
    elif "free_rank" not in cert and enumerable and claims_rank:
        bounds = smallest(own(s) for s in everyone)
    fails += rank_claim_problems(report, bounds, sym.dim_free, "rank Gamma_free (smallest over the tie resolutions)",
                                 reaches=lambda v: enumerable and all(ranks.at(s, v) >= v for s in everyone))
    if bounds is not None and not fails:
        msgs.append(f"rank valid: the smallest rank Gamma_free over the {len(everyone)} tie resolution(s) is "
                    f"{'certified ' + bounds.text if bounds.exact is None else bounds.text}, dim_free = {sym.dim_free}")
    for m, pat in enumerate(report.get("patterns", [])):
        side = {(t["sample"], t["layer"], t["neuron"]): t["active"] for t in pat["ties"]}
        sides = tuple(True if t in persistent else side.get(t, True) for t in facts.ties)
        # checked before anything else: a pattern without a rank still claims these (no witness part exists)
        if pat["cn"] is not None or pat["rank_a"] is not None:
            fails.append(f"patterns[{m}]: cn and rank_a must be null (Theorem 8 is not proved for {features})")
        fails += reachable_claim(pat, f"patterns[{m}]", witnessed=False)
        if len(pat["ties"]) != len(side):  # one tie twice, maybe on both sides: names no resolution
            fails.append(f"patterns[{m}].ties: a tie listed more than once")
            continue
        if set(side) == set(facts.ties) and pat["rank_gamma"] is None and pat["cs"] is None:
            continue  # a resolution enumerated without a certified rank: it claims nothing more
        if set(side) != set(facts.ties) or sides not in proved:
            fails.append(f"patterns[{m}].ties: not a tie resolution certified by the free_rank part")
            continue
        lo, hi = proved[sides]
        if pat["rank_gamma"] is not None:
            claim(f"patterns[{m}].rank_gamma", lo if lo == hi else None, pat["rank_gamma"])
        if pat["cs"] is not None:
            claim(f"patterns[{m}].cs", cs_from_bounds(lo, hi, sym.dim_free), pat["cs"])
    line_ok = {}
    for key in ("dead_units", "constant_units", "slope_lines", "submersion", "entering_submersion", "line",
                "constant_rank"):
        if key not in cert:
            continue
        if key == "line":
            bad = check_graph_line(facts, cert[key])
            t0 = cert[key]["t0"]
            why = (f"the outputs on X are constant along theta + t delta for "
                   f"{'every t >= 0' if t0 is None else f'0 <= t <= t0 = {t0}'} and f(x*) moves at the probe")
        elif key in ("dead_units", "constant_units", "slope_lines"):
            bad = check_line_part(facts, key, cert[key])
            t0 = cert[key]["t0"]
            why = (f"the outputs on X are constant along theta + t delta for "
                   f"{'every t >= 0' if t0 is None else f'0 <= t <= t0 = {t0}'}, delta is not in S_H, "
                   "and f(x) changes")
        elif key == "constant_rank":
            bad = check_constant_rank(facts, cert[key])
            why = ("rank Gamma_free = rank A with alpha constant near theta: the rank is constant there, and a "
                   "direction of the fibre moves f(y)")
        else:
            bad = (check_submersion if key == "submersion" else check_entering_submersion)(facts, cert[key])
            why = "Gamma_free has full row rank and a direction of its fiber moves f(y)"
        fails += bad
        line_ok[key] = not bad
        if not bad:
            msgs.append(f"{key} part valid: {why}")
    verdict, rule = report.get("verdict"), report.get("decided_by")
    if rule is not None and (rule not in RULES or (verdict is not None and RULES[rule] != verdict)):
        why = "Theorem 8 (C_N) is not proved for " + features if rule == "theorem-8" else \
            f"not a rule giving {verdict} for a constrained network"
        fails.append(f"decided_by: {rule!r}: {why}")
    # every not-identifiable rule names its part (as the plain MLP's line / entering / structural rules do)
    if rule in RULES and RULES[rule] == "not-identifiable" and not line_ok.get(rule.replace("-", "_")):
        fails.append(f"decided_by: {rule} without a verified {rule.replace('-', '_')} part")
    # identifiable: the certified lower bound at dim_free on every resolution, or the verifier's own ranks mod p
    # there (a rank mod p never exceeds the rank over Q; S_H in the kernel bounds it by dim_free)
    if proves_identifiable(bounds, sym.dim_free):
        identifiable = True
    elif bounds is not None and bounds.hi < sym.dim_free:
        identifiable = False  # certified below dim_free on some resolution
    else:
        identifiable = all_full()
    not_identifiable = any(line_ok.values())
    if verdict == "identifiable":
        if not identifiable:
            fails.append(f"verdict: identifiable needs rank Gamma_free = dim_free = {sym.dim_free} on every tie "
                         "resolution; the verifier finds less")
        else:
            msgs.append("verdict identifiable verified: rank Gamma_free = dim_free on every tie resolution")
    elif verdict == "not-identifiable":
        if not not_identifiable:
            fails.append(f"verdict: not-identifiable needs an exact certificate for {features} (dead_units, "
                         "constant_units, slope_lines, submersion, entering_submersion, line or constant_rank), "
                         "verified")
    elif verdict == "degenerate":
        fails.append("verdict: no degenerate rule is proved for constrained networks")
    # the rule shared with the MLP: no verdict weaker than (or opposite to) what the certificate proves
    fails += verdict_strength_problems(
        verdict, identifiable, not_identifiable, "rank Gamma_free = dim_free on every tie resolution",
        "a valid " + " / ".join(k for k, ok in line_ok.items() if ok) + " part")
    from exactident.verify.constrained_explained import verify_constrained_explained

    bad, more = verify_constrained_explained(
        facts, report, persistent=persistent, everyone=everyone, rank_at=ranks.at,
        verified_parts={**line_ok, "dead_units": line_ok.get("dead_units", False)})
    fails += bad
    msgs += more
    for m, entry in enumerate(report.get("rules", [])):  # the engine's account: only its decided rule is checked
        if entry["status"] == "decided" and entry["rule"] != rule:
            fails.append(f"rules[{m}]: {entry['rule']} is said to decide, but decided_by is {rule!r}")
        if entry["rule"] == "theorem-8" and entry["status"] != "not-applicable":
            fails.append(f"rules[{m}]: Theorem 8 (C_N) is proved for the dense ReLU MLP only, never for {features}")
    if "rules" in report:
        msgs.append("not verified: rules (why each rule ran or not: prose)")
    if "explanation" in report:
        msgs.append("not verified: explanation (prose)")
    return not fails, msgs + fails
