"""``exactident verify-certificate``: re-check a report from the case alone, every claim included.

The verifier is a trust boundary: it trusts only the case file (read by the
validated loader :func:`exactident.io.case.load_case`) and derives every fact it
relies on from it (:class:`exactident.verify.facts.CaseFacts`: ties, invisible
ties, degenerate set, ``dim``, which tie resolutions exist).  It then verifies
each part of the report's ``certificate`` and checks every claim of the report
against what the case and the verified parts give
(:mod:`exactident.verify.claims`).  Parts:

``rank``
    certified ``R_Gamma`` (and ``R_A``) at the exact ``>= 0`` activation pattern
    (:mod:`exactident.verify.rank`);
``boundary``
    the visible and invisible ties, and certified ranks on every tie
    resolution (:mod:`exactident.verify.boundary`);
``entering``
    a kernel direction of ``Gamma(s)`` entering the piece of ``s`` strictly,
    with ``R_Gamma(s) == R_A(s) < dim`` (:mod:`exactident.verify.entering`);
``line``
    a segment ``theta + eps delta`` of constant outputs on ``X`` that leaves the
    equivalence class (:mod:`exactident.verify.line`);
``degenerate``
    a hidden neuron putting theta in ``S``;
``structural``
    the mechanism behind a ``line`` part (dead neuron, unpinned hyperplane, untouched
    input, proportional neurons, always-active block), re-derived from the case
    (:mod:`exactident.verify.structural`).

The arithmetic is the verifier's own (``fractions.Fraction`` forward passes,
forward-mode tangents where the engine backpropagates, explicit path
enumeration for ``alpha``, sympy ranks over QQ; rank certificates are checked
mod primes from the case).  Nothing is valid unless it was checked: unknown
parts or fields, a part that cannot be checked, a missing certificate, a claim
with nothing to check it against are rejected (exit 3), and so is a malformed
report: every field is first checked against the one schema of the report
(:mod:`exactident.verify.schema`: types, ranges, unknown fields), and the failure
names the field's JSON path.  The rules are in ``docs/boundary.md``.

A case whose layer graph is more than a plain ReLU MLP (convolution, pooling, skips, leaky
ReLU, PReLU) is verified by :func:`verify_constrained` on the case's own compilation, with the
same rules (:mod:`exactident.verify.resolutions`: every tie resolution enumerated by the verifier;
:mod:`exactident.verify.verdict`: the smallest verdict over them, no weaker verdict, and the
certificates that need no resolution first) and the same primitives.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from typing import Any

from exactident.errors import CaseFormatError, InvariantViolation, UnsupportedCaseError
from exactident.io.limits import DEFAULT_WORK_LIMITS, ReadLimits, WorkLimits
from exactident.io.report_file import looks_like_case, looks_like_report, read_report_json
from exactident.model.network import Network
from exactident.verify.arith import BadField, need
from exactident.verify.boundary import verify_boundary
from exactident.verify.claims import (
    NOT_VERIFIED,
    Proofs,
    decided_by_claim,
    extra_claims,
    identity_claims,
    rank_and_pattern_claims,
    structural_claims,
    uncertified_claims,
    verdict_claim,
    verify_degenerate,
)
from exactident.verify.common_claims import architecture_claims
from exactident.verify.entering import verify_entering
from exactident.verify.explained import verify_free_explained
from exactident.verify.facts import CaseFacts, ConstrainedFacts
from exactident.verify.line import verify_line
from exactident.verify.rank_free import OwnRanks, free_pattern_claims, free_rank_claims
from exactident.verify.rank_kernel import closed_by
from exactident.verify.rank_rules import RankBounds
from exactident.verify.resolutions import NOT_ENUMERATED, every_resolution, not_enumerated_problems, persistent_ties
from exactident.verify.schema import GRAPH_REPORT, validate, validate_report
from exactident.verify.structural import verify_structural
from exactident.verify.verdict import (
    RESOLUTION_FREE,
    graph_verdict_problems,
    identifiable_proved,
    own_ranks_count,
    past_cap_note,
    resolution_free_proof,
)

__all__ = ["NOT_VERIFIED_MARK", "PARTS", "run_verify_certificate", "verify_certificate", "verify_constrained"]

#: What a failure line past one of the verifier's caps (``--max-exact-entries``, ``--max-resolutions``) says.
NOT_VERIFIED_MARK = "past the verifier's limit"

#: Certificate parts the verifier understands.
PARTS = ("rank", "boundary", "entering", "line", "degenerate", "structural")


def verify_certificate(case, report: Any, source: str = "<report>", *,
                       require_claims: bool = False,
                       limits: WorkLimits = DEFAULT_WORK_LIMITS) -> tuple[bool, list[str]]:
    """Re-check a report's certificate and claims from the case alone.

    Valid only if every part present is verified and every claim of the report
    holds for the case (structural claims recomputed, ranks certified by the
    parts, the verdict proved by them: docs/boundary.md).  Unknown parts or
    fields, a part that cannot be checked, and a report without a certificate
    are *not valid*.

    Parameters
    ----------
    case : Case
    report : dict
        An ``exactident-report/1`` object with a ``certificate``.
    source : str
        Report file name for error messages.
    require_claims : bool
        Require the report's ``name`` and ``verdict`` (the CLI does).  If
        False a bare ``{"certificate": ...}`` is accepted (only its parts are
        checked); claims are still checked when present.

    Returns
    -------
    (valid, messages) : (bool, list of str)
        ``messages`` says what was checked, then what failed (each failure names
        its field, the value found and the value claimed).

    Raises
    ------
    UnsupportedCaseError
        If ``alpha(s)`` is too large to materialise for the rank check.

    Examples
    --------
    >>> from exactident.io.case import parse_case
    >>> case = parse_case({"format": "exactident-case/1", "name": "k", "widths": [1, 1, 1],
    ...                    "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]],
    ...                    "sample": [["0"], ["1"], ["-1/2"]]})
    >>> verify_certificate(case, {"name": "k", "verdict": "not-identifiable"})
    (False, ["no certificate to verify (the report has no 'certificate'): the verdict not-identifiable is not backed"])
    >>> line = {"delta": {"b_1[0]": "1", "b_2[0]": "-3"}, "probe": ["-1"], "t0": None}  # every t >= 0
    >>> verify_certificate(case, {"name": "k", "verdict": "not-identifiable", "certificate": {"line": line}})[0]
    True
    >>> verify_certificate(case, {"name": "k", "verdict": "identifiable", "certificate": {"line": line}})[0]
    False
    """
    if not getattr(case, "is_plain", True):  # a layer graph beyond the plain ReLU MLP (case format 2)
        return _verify_constrained_case(case, report, require_claims, limits)
    try:
        return _verify(case, report, require_claims, limits)
    except BadField as exc:  # a value the schema admits but its checker cannot read (e.g. W_9[0,0] in [2, 1])
        return False, [f"{exc.where or '<report>'}: {exc}"]
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:  # a crash proves nothing
        return False, [f"<report>: could not be checked (the verifier raised {type(exc).__name__}: {exc})"]


def _verify_constrained_case(case, report: Any, require_claims: bool,
                             limits: WorkLimits) -> tuple[bool, list[str]]:
    """A layer graph's report (:func:`verify_constrained`), from the case's own compilation."""
    if isinstance(report, dict) and require_claims:
        for key in ("name", "verdict"):
            if key not in report:
                return False, [f"{key}: missing"]
    if isinstance(report, dict) and "architecture" not in report:
        features = ", ".join(case.compiled.features)
        return False, [f"architecture: missing: the case is a layer graph with {features}, the report is about a "
                       "plain ReLU MLP"]
    shape = getattr(case.architecture, "input_shape", None)
    try:
        return verify_constrained(case.compiled, case.X, report, name=case.name, input_shape=shape,
                                  provenance=case.provenance, limits=limits)
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:  # a crash proves nothing
        return False, [f"<report>: could not be checked (the verifier raised {type(exc).__name__}: {exc})"]


def _rank_checker(limits: WorkLimits) -> tuple[Any, str | None]:
    """:func:`exactident.verify.rank.check_rank_certificate` within ``limits``, or why it cannot be used."""
    try:
        from exactident.verify.rank import check_rank_certificate
    except ImportError as exc:
        return None, f"exactident.verify.rank is not available ({exc})"
    return functools.partial(check_rank_certificate, limits=limits), None


def _guarded(check_rank):
    """The rank checker, with a crash turned into a failure (a crash proves nothing)."""
    def run(case, cert, pattern, where):
        try:
            problems, ranks = check_rank(case, cert, pattern, where)
        except CaseFormatError as exc:  # malformed rank part: bad input, like the other parts
            field = exc.field if exc.field.startswith(where) else f"{where}.{exc.field}" if exc.field else where
            raise BadField(field, exc.message) from None
        except InvariantViolation as exc:
            return [f"{where}: {exc}"], _none_ranks()
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
            return [f"{where}: could not be checked (the rank checker raised {type(exc).__name__}: {exc})"], \
                _none_ranks()
        if not isinstance(problems, list) or not all(isinstance(p, str) for p in problems):
            return [f"{where}: could not be checked (the rank checker returned {type(problems).__name__}, "
                    "expected a list of problems)"], _none_ranks()
        return problems, ranks
    return run


def _none_ranks():
    from types import SimpleNamespace  # not CertifiedRanks: the rank module may be the part that failed

    return SimpleNamespace(rank_gamma=None, rank_a=None)


def _verify(case, report: Any, require_claims: bool, limits: WorkLimits) -> tuple[bool, list[str]]:
    if not isinstance(report, dict):
        raise BadField("", f"expected a JSON object (exactident-report/1), found {type(report).__name__}")
    _name, verdict = (need(report, k, str, "") if require_claims or k in report else None
                      for k in ("name", "verdict"))
    backed = f": the verdict {verdict} is not backed" if verdict is not None else ""
    widths = list(case.network.widths)
    identity = identity_claims(report, case.name, widths, len(case.X))
    if identity:  # a report of another case: say so before its certificate fails for shape reasons
        return False, identity + ["the report is not about this case: its certificate was not checked"]
    problem = validate_report(report, require_claims)  # every field's type and range, before any is read
    if problem is not None:
        return False, [problem]
    uncertified = uncertified_claims(report)
    if uncertified:  # Monte Carlo or timed out: the report itself says nothing is proved
        return False, uncertified
    cert = report.get("certificate")
    if cert is None:
        return False, [f"no certificate to verify (the report has no 'certificate'){backed}"]
    if not isinstance(cert, dict):
        raise BadField("certificate", f"expected dict, found {type(cert).__name__}")
    if not cert:
        return False, [f"no certificate to verify (the report's 'certificate' is empty){backed}"]
    facts = CaseFacts.from_case(case)
    fails: list[str] = [f"certificate.{key}: unknown certificate part, not verified"
                        for key in sorted(set(cert) - set(PARTS), key=str)]
    msgs: list[str] = []
    fails += structural_claims(report, facts)
    proofs = Proofs()
    check_rank, missing = _rank_checker(limits)
    rank_check = _guarded(check_rank) if check_rank else None
    if "rank" in cert:
        if rank_check is None:
            fails.append(f"certificate.rank: could not be checked ({missing}): not verified")
        else:
            problems, ranks = rank_check(case, cert["rank"], facts.pattern({}), "certificate.rank")
            if problems:
                fails += problems
            else:
                interval = getattr(ranks, "rank_gamma_interval", None)
                proofs.rank_gamma_interval = interval
                proofs.rank_reaches = getattr(ranks, "reaches", None)
                # an interval is never a rank: R_Gamma stays unknown (None), only the bounds are kept
                proofs.rank_part = (ranks.rank_gamma, ranks.rank_a)
                proofs.rank_a_lower = getattr(ranks, "rank_a_lower", None)
                proofs.closed_by = closed_by(cert["rank"])
                lower = proofs.rank_a_lower if ranks.rank_a is None and proofs.rank_a_lower is not None else None
                shown_rg = f"in [{interval[0]}, {interval[1]}]" if interval else f"= {ranks.rank_gamma}"
                msgs.append(f"rank part valid: at the >= 0 pattern R_Gamma {shown_rg}"
                            + (f", R_A = {ranks.rank_a}" if ranks.rank_a is not None else "")
                            + (f", R_A >= {lower}" if lower is not None else ""))
    if "boundary" in cert:
        if rank_check is None:
            fails.append(f"certificate.boundary: could not be checked ({missing}): not verified")
        else:
            result = verify_boundary(case, cert["boundary"], facts, rank_check, limits.max_resolutions)
            fails += result.fails
            msgs += result.messages
            if not result.fails:
                proofs.boundary = result
    if "entering" in cert:
        ent = verify_entering(case, need(cert, "entering", dict, "certificate"), facts)
        (msgs if ent.valid else fails).extend(ent.messages)
        if ent.valid:
            proofs.nonequivalence = "entering"
            proofs.entering = True
    if "line" in cert and ({"kind", "names"} & set(cert["line"]) or not isinstance(cert["line"]["delta"], dict)):
        # a layer graph's line part (the schema admits both forms): its delta names no MLP parameter
        fails.append("certificate.line: the form of a layer graph's line (kind, names, delta by index) on a plain "
                     "MLP case")
    elif "line" in cert:
        good, more = verify_line(case, need(cert, "line", dict, "certificate"), facts)
        (msgs if good else fails).extend(more)
        if good and proofs.nonequivalence is None:
            proofs.nonequivalence = "line"
        proofs.line = good
    if "structural" in cert:
        bad, more, mechanism = verify_structural(cert["structural"], cert.get("line"), facts)
        fails += bad
        msgs += more
        proofs.mechanism = mechanism if proofs.line else None
    if "degenerate" in cert:
        bad, more = verify_degenerate(cert["degenerate"], facts)
        fails += bad
        msgs += more
        proofs.degenerate = not bad
    fails += rank_and_pattern_claims(report, facts, proofs)
    fails += extra_claims(report, facts, proofs, case.provenance)
    fails += decided_by_claim(report, verdict, facts, proofs)
    from exactident.verify.explained import verify_explained  # parameters, neurons, kernel_basis (explain)

    bad, more = verify_explained(case, report, facts, proofs)
    fails += bad
    msgs += more
    bad, more = not_enumerated_problems(report, facts, "boundary")  # the cap a report stopped at, against k
    fails += bad
    msgs += more
    if verdict is not None:  # the rules of verify.verdict: every resolution, the verifier's own ranks if needed
        fails += verdict_claim(verdict, facts, proofs, every_resolution(facts, limits.max_resolutions),
                               _own_reaches(case, facts), capped=report.get(NOT_ENUMERATED))
    msgs += [f"not verified: {key} ({why})" for key, why in NOT_VERIFIED.items() if key in report]
    return not fails, msgs + fails


def _own_reaches(case, facts: CaseFacts):
    """``(sides, target) -> bool``: the verifier's own ranks of ``Gamma`` mod p at a resolution (sides over
    ``facts.visible``) reach ``target`` (:func:`exactident.verify.rank_kernel.own_rank_reaches`); None without it."""
    try:
        from exactident.verify.rank_kernel import own_rank_reaches
    except ImportError:
        return None

    def reaches(sides: tuple[bool, ...], target: int) -> bool:
        return own_rank_reaches(case, facts.pattern(dict(zip(facts.visible, sides))), target)
    return reaches


def _load_case_or_explain(case_path: str, limits: ReadLimits | None):
    from exactident.io.case import load_case

    try:
        return load_case(case_path, limits)
    except RecursionError:
        raise CaseFormatError(case_path, "", "not valid JSON (nested too deeply)") from None
    except CaseFormatError:
        try:
            data = read_report_json(case_path, limits=limits)
        except CaseFormatError:
            data = None
        if looks_like_report(data):
            raise CaseFormatError(case_path, "", "this file is a report (exactident-report/1), not a case: "
                                  "the arguments are CASE then REPORT") from None
        raise


def run_verify_certificate(case_path: str, report_path: str, limits: ReadLimits | None = None,
                           work: WorkLimits = DEFAULT_WORK_LIMITS, case: Any = None) -> int:
    """CLI body of ``exactident verify-certificate CASE REPORT.json``.

    ``limits`` bounds both files (size, digits; default :data:`exactident.io.limits.DEFAULT_LIMITS`);
    ``work`` the verifier's own work (:class:`exactident.io.limits.WorkLimits`): past it, "not verified".
    ``case``: the case already read from ``case_path`` (a model file imported with ``--sample``).

    Returns
    -------
    int
        0 valid, 3 invalid or not verified (each failure printed; a malformed report too, naming the field's
        path; past a cap of ``work`` the last line is ``certificate NOT VERIFIED``),
        2 bad input (the case, or a report file that is not readable JSON: one line naming file and field).
    """
    try:
        if case is None:
            case = _load_case_or_explain(case_path, limits)
        report = read_report_json(report_path, limits=limits)
        if looks_like_case(report):
            raise CaseFormatError(report_path, "", "this file is a case (exactident-case/1), not a report: "
                                  "the arguments are CASE then REPORT")
        if isinstance(report, list):  # several cases: take the one named like the case
            named = [r for r in report if isinstance(r, dict) and r.get("name") == case.name]
            if len(named) != 1:
                raise CaseFormatError(report_path, "", f"expected one report named {case.name!r}, found {len(named)}")
            report = named[0]
        valid, msgs = verify_certificate(case, report, source=report_path, require_claims=True, limits=work)
    except (CaseFormatError, UnsupportedCaseError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for m in msgs:
        print(m)
    capped = not valid and any(NOT_VERIFIED_MARK in m for m in msgs)
    print("certificate VALID" if valid else "certificate NOT VERIFIED (past a --max-* limit of the verifier)"
          if capped else "certificate INVALID")
    return 0 if valid else 3


def verify_constrained(cn: Network, X: Sequence[Sequence[object]], report: Any, *,
                       name: str | None = None, input_shape: Sequence[int] | None = None,
                       provenance: Any = None, limits: WorkLimits = DEFAULT_WORK_LIMITS) -> tuple[bool, list[str]]:
    """Re-check a layer graph's report (convolution, pooling, skips, leaky ReLU, PReLU) from its case alone.

    From the compiled network and the sample the verifier recomputes, with its own code
    (:class:`~exactident.verify.facts.ConstrainedFacts`), the pre-activations and ties, ``Gamma_free`` mod
    primes for any tie resolution, the rescaling symmetry ``S_H``, ``dim_free = rank T - dim S_H`` and the
    softmax bound, then checks every claim:

    - ``widths``, ``n_samples``, ``dim`` (``= dim_free``), ``architecture``, ``on_boundary``, ``n_ties``
      (:func:`~exactident.verify.common_claims.architecture_claims`); ``rank_a`` and ``cn`` must be null (also in
      ``patterns``): Theorem 8 (``C_N``) is proved for the plain layered ReLU MLP only; so is ``degenerate``;
    - the parts that need no tie resolution first (``dead_units``, ``constant_units``, ``slope_lines``,
      ``line``, ``submersion``, ``entering_submersion``; :mod:`exactident.verify.line`,
      :mod:`exactident.verify.submersion`);
    - the tie resolutions, enumerated by the verifier (:mod:`exactident.verify.resolutions`, up to
      ``--max-resolutions``): a ``free_rank`` part (:mod:`exactident.verify.rank_free`) lists every one;
    - ``rank_gamma``, ``cs``, ``rank_gamma_interval``, ``montecarlo`` against the smallest rank over every
      resolution (:func:`exactident.verify.rank_rules.rank_claim_problems`); ``patterns``
      (:func:`~exactident.verify.rank_free.free_pattern_claims`);
    - the verdict by the rules of :mod:`exactident.verify.verdict` (``identifiable``: ``C_S`` on every
      resolution, certified or by the verifier's own ranks mod p, not computed when a resolution-free part
      proves ``not-identifiable``; no weaker verdict); ``decided_by`` must name a rule giving the verdict
      (:data:`~exactident.verify.verdict.GRAPH_RULES`), backed by its part;
    - ``rules``: only ``decided_by`` may be ``decided``; Theorem 8 ``not-applicable`` (``not-run`` on a plain MLP);
    - the explain fields (:func:`~exactident.verify.explained.verify_free_explained`).

    Parameters
    ----------
    cn : Network
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
    problem = validate(report, GRAPH_REPORT)
    if problem is not None:
        return False, [problem]
    uncertified = uncertified_claims(report)
    if uncertified:  # timed out or Monte Carlo: the report itself says nothing is proved
        return False, uncertified
    max_resolutions = limits.max_resolutions
    sym, msgs = facts.symmetry, []
    features = ", ".join(cn.features) or "this architecture"
    fails = architecture_claims(report, facts, name, input_shape, provenance)
    msgs.append(f"recomputed: {cn.n_params} parameters, rank T = {sym.rank_t}, dim S_H = {sym.symmetry_dim}, "
                f"dim_free = {sym.dim_free}, {len(facts.ties)} tie(s)")
    cert = report.get("certificate") or {}
    # the parts that need no tie resolution, first (their messages keep their place below)
    proofs: dict[str, tuple[list[str], str]] = {key: resolution_free_proof(facts, key, cert[key])
                                                for key in RESOLUTION_FREE if key in cert}
    line_ok = {key: not bad for key, (bad, _why) in proofs.items()}
    not_identifiable = any(line_ok.values())
    persistent = persistent_ties(facts)  # a side that changes nothing: enumerated active only
    everyone = every_resolution(facts, max_resolutions)  # None past the cap
    ranks = OwnRanks(facts)
    bad, more, proved = free_rank_claims(report, facts, cert, everyone, ranks, limits, clean=not fails)
    fails += bad
    msgs += more
    fails += free_pattern_claims(report, facts, persistent, proved)
    for key, (bad, why) in proofs.items():
        fails += bad
        if not bad:
            msgs.append(f"{key} part valid: {why}")
    verdict, rule = report.get("verdict"), report.get("decided_by")
    # identifiable: C_S on every resolution (certified, or the verifier's own ranks mod p: a rank mod p never
    # exceeds the rank over Q); not computed past a valid resolution-free proof of the opposite (verify.verdict)
    certified = {s: RankBounds(*b) for s, b in proved.items()}
    own = own_ranks_count(verdict, not_identifiable)  # also past the report's recorded cap (verify.verdict)
    identifiable = identifiable_proved(everyone, sym.dim_free, certified,
                                       (lambda s, v: ranks.at(s, v) >= v) if own else None)
    bad, more = not_enumerated_problems(report, facts, "free_rank")  # the cap a report stopped at, against k
    fails += bad
    msgs += more
    bad, more = graph_verdict_problems(verdict, rule, line_ok, identifiable, sym.dim_free, features,
                                       note=past_cap_note(report.get(NOT_ENUMERATED), everyone))
    fails += bad
    msgs += more
    bad, more = verify_free_explained(
        facts, report, persistent=persistent, everyone=everyone or [], rank_at=ranks.at,
        verified_parts={**line_ok, "dead_units": line_ok.get("dead_units", False)})
    fails += bad
    msgs += more
    # a plain ReLU MLP in the layer-graph engine: Theorem 8's hypotheses hold, it is not run
    theorem_8_status = "not-run" if cn.is_plain() else "not-applicable"
    for m, entry in enumerate(report.get("rules", [])):  # the engine's account: only its decided rule is checked
        if entry["status"] == "decided" and entry["rule"] != rule:
            fails.append(f"rules[{m}]: {entry['rule']} is said to decide, but decided_by is {rule!r}")
        if entry["rule"] == "theorem-8" and entry["status"] != theorem_8_status:
            fails.append(f"rules[{m}]: theorem-8 is {entry['status']!r}: " + (
                f"Theorem 8 (C_N) is proved for the dense ReLU MLP only, never for {features}"
                if theorem_8_status == "not-applicable" else "never run here, its hypotheses hold: 'not-run'"))
    if "rules" in report:
        msgs.append("not verified: rules (why each rule ran or not: prose)")
    if "explanation" in report:
        msgs.append("not verified: explanation (prose)")
    return not fails, msgs + fails
