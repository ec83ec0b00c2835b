"""``exactident verify-certificate``: re-check every part of a report's certificate from the case alone.

A certificate ``{"entering": {...}}`` claims: at the tie resolution ``s``,
``R_Gamma(s) == R_A(s) < dim`` and ``delta`` lies in ``ker Gamma(s)`` and
enters the piece of ``s`` strictly (``sign_t g_t(s) . delta > 0``).  By the
constant-rank argument of ``docs/boundary.md`` (paper Theorem 8's proof on
the piece of ``s``) nearby non-equivalent parameters then give the same
outputs on ``X``.

:func:`exactident.boundary.certificate.build_entering_certificate` writes it.
:func:`verify_certificate` re-checks it **independently** of the code that produced
it: it uses only the case file (parsed by
:func:`exactident.io.case.load_case`, the validated edge) and its own arithmetic
over ``fractions.Fraction``: its own forward pass and ties, its own check of
the invisible ties and of the free-parameter set (one nonzero fixed outgoing
edge per hidden neuron), ``Gamma(s)`` and ``g_t . delta`` by *forward-mode*
differentiation (the engine uses backpropagation), ``alpha(s)`` by explicit
path enumeration, and ranks by sympy's ``DomainMatrix`` over QQ.

A ``line`` part ``{"delta": {name: "p/q"}, "probe": [x*]}`` (from
:mod:`exactident.boundary.line`) claims that ``f_{theta + eps delta}(X) = f_theta(X)``
for all small ``eps > 0`` and that ``f`` changes at ``x*``; the verifier
re-runs the network on polynomials in ``eps`` over Fractions.

Entering part keys: ``resolution`` (ties with ``active``), ``invisible_ties``,
``parameters`` (names of ``tau``'s coordinates, in order), ``delta``
(``name -> "p/q"``), ``derivatives`` (``g_t . delta`` per resolved tie),
``rank_gamma``, ``rank_a``, ``dim``.  A ``rank`` part (modular rank
certificates) is checked by :func:`exactident.verify.rank.verify_rank_certificate`;
if that check cannot run the part counts as not checked, hence not valid.
Nothing is valid unless it was checked: unknown parts or fields, a
missing certificate, a report whose ``verdict`` or ``name`` disagrees with the
certificate or the case are all rejected (exit 3); malformed fields are bad
input (exit 2).
Parts are checked by :mod:`exactident.verify.entering`, :mod:`exactident.verify.line`
and :mod:`exactident.verify.rank`.
"""

from __future__ import annotations

import sys
from typing import Any

from exactident.errors import CaseFormatError, InvariantViolation, UnsupportedCaseError
from exactident.io.limits import ReadLimits
from exactident.io.report_file import read_report_json
from exactident.verify.arith import BadField, need, unknown_fields
from exactident.verify.entering import verify_entering
from exactident.verify.line import verify_line

__all__ = ["run_verify_certificate", "verify_certificate"]


# ---------------------------------------------------------------------------------------------
# Independent verifier: Fraction arithmetic only, nothing from boundary/gamma/entering/activation.


def verify_certificate(case, report: Any, source: str = "<report>", *,
                       require_claims: bool = False) -> tuple[bool, list[str]]:
    """Re-check a report's certificate from the case alone.

    Valid only if every part present (``entering``, ``line``, ``rank``) is
    verified, the report's ``name`` is the case's name and, with an
    ``entering`` or ``line`` part, its ``verdict`` is ``not-identifiable``
    (what those parts prove, ``docs/boundary.md``).  Unknown parts or fields,
    a part that cannot be checked, and a report without a certificate are
    *not valid*.

    Parameters
    ----------
    case : Case
    report : dict
        An ``exactident-report/1`` object with a ``certificate``.
    source : str
        Report file name for error messages.
    require_claims : bool
        Require the report's ``name`` and ``verdict`` (the CLI does).  If
        False a bare ``{"certificate": ...}`` is accepted; ``name`` and
        ``verdict`` are still checked when present.

    Returns
    -------
    (valid, messages) : (bool, list of str)
        ``messages`` says what was checked, then what failed (each failure names its field).

    Raises
    ------
    CaseFormatError
        If the report lacks a required field or has one of the wrong type (names the field).
    UnsupportedCaseError
        If ``alpha(s)`` is too large to materialise for the rank check.

    Examples
    --------
    >>> from exactident.io.case import parse_case
    >>> case = parse_case({"format": "exactident-case/1", "name": "k", "widths": [1, 1, 1],
    ...                    "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]],
    ...                    "sample": [["0"], ["1"], ["-1/2"]]})
    >>> verify_certificate(case, {"name": "k", "verdict": "not-identifiable"})
    (False, ["no certificate to verify (the report has no 'certificate')"])
    >>> line = {"delta": {"b_1[0]": "1", "b_2[0]": "-3"}, "probe": ["-1"]}
    >>> verify_certificate(case, {"name": "k", "verdict": "identifiable", "certificate": {"line": line}})[0]
    False
    """
    try:
        return _verify(case, report, require_claims)
    except BadField as exc:
        raise CaseFormatError(source, exc.where, str(exc)) from None


_PARTS = ("entering", "line", "rank")


def _verify(case, report: Any, require_claims: bool) -> tuple[bool, list[str]]:
    if not isinstance(report, dict):
        raise BadField("", f"expected a JSON object (exactident-report/1), found {type(report).__name__}")
    cert = report.get("certificate")
    if cert is None:  # e.g. an `identifiable` or `inconclusive` report: nothing is proved
        return False, ["no certificate to verify (the report has no 'certificate')"]
    if not isinstance(cert, dict):
        raise BadField("certificate", f"expected dict, found {type(cert).__name__}")
    if not cert:
        return False, ["no certificate to verify (the report's 'certificate' is empty)"]
    name, verdict = (need(report, k, str, "") if require_claims or k in report else None
                     for k in ("name", "verdict"))
    fails: list[str] = [f"certificate.{key}: unknown certificate part, not verified"
                        for key in sorted(set(cert) - set(_PARTS), key=str)]
    msgs: list[str] = []
    if name is not None and name != case.name:
        fails.append(f"name: the report is for case {name!r} but the case file is named {case.name!r}")
    if verdict is not None and ("entering" in cert or "line" in cert) and verdict != "not-identifiable":
        fails.append(f"verdict: report says {verdict} but the certificate proves not-identifiable")
    if "rank" in cert:
        fails_rank, msgs_rank = _verify_rank(case, cert["rank"])
        if not fails_rank:
            fails_rank = _rank_claims(case, report, cert["rank"])
        fails, msgs = fails + fails_rank, msgs + msgs_rank
    for part, check in (("entering", verify_entering), ("line", verify_line)):
        if part in cert:
            good, more = check(case, need(cert, part, dict, "certificate"))
            (msgs if good else fails).extend(more)
    return not fails, msgs + fails


_RANK_KEYS = ("fixed_edges", "rank_gamma", "rank_a")


def _rank_claims(case, report: dict, part: dict) -> list[str]:
    """The report's own ranks, ``cs``/``cn`` and verdict must be what the verified ranks give.

    ``part`` has passed ``verify_rank_certificate``; rank certificates exist only
    off the boundary, where the verdict rule is a function of the ranks.
    """
    fails = unknown_fields(part, _RANK_KEYS, "certificate.rank")
    if not isinstance(part.get("rank_gamma"), dict) or not isinstance(part["rank_gamma"].get("rank"), int):
        return fails + ["certificate.rank.rank_gamma: no certified rank to compare the report with"]
    widths = list(case.network.widths)
    dim = sum(widths[l] * widths[l + 1] for l in range(len(widths) - 1)) + widths[-1]
    rg = part["rank_gamma"]["rank"]
    ra = part["rank_a"].get("rank_a") if isinstance(part.get("rank_a"), dict) else None
    cs = rg == dim
    cn = None if ra is None and not cs else not (ra is not None and rg == ra and rg < dim)
    claims = {"dim": dim, "rank_gamma": rg, "cs": cs}
    if ra is not None:
        claims["rank_a"] = ra
    if cn is not None:
        claims["cn"] = cn
    if report.get("on_boundary") is True:
        fails.append("certificate.rank: a rank certificate does not decide a boundary case")
    elif report.get("degenerate") is not True and "verdict" in report:
        verdict = ("identifiable" if cs else "not-identifiable" if cn is False
                   else "inconclusive" if cn else None)
        if verdict is None:
            fails.append("certificate.rank: rank_a is missing, so the ranks do not decide the verdict")
        else:
            claims["verdict"] = verdict
    for key, value in claims.items():
        if key in report and report[key] != value:
            fails.append(f"{key}: report says {report[key]!r} but the certified ranks give {value!r}")
    return fails


def _verify_rank(case, part: Any) -> tuple[list[str], list[str]]:
    """The ``rank`` part, by :func:`exactident.verify.rank.verify_rank_certificate` (problems; [] = valid)."""
    try:
        from exactident.verify.rank import verify_rank_certificate
    except ImportError:
        return ["rank part could not be checked (exactident.verify.rank.verify_rank_certificate "
                "is not available): not verified"], []
    try:
        problems = verify_rank_certificate(case, part)
    except CaseFormatError as exc:  # malformed rank part: bad input, like the other parts
        field = exc.field if exc.field.startswith("[") or not exc.field else f".{exc.field}"
        raise BadField(f"certificate.rank{field}", exc.message) from None
    except InvariantViolation as exc:
        problems = [str(exc)]
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:  # a crash proves nothing
        return [f"rank part could not be checked (verify_rank_certificate raised "
                f"{type(exc).__name__}: {exc})"], []
    if not isinstance(problems, list) or not all(isinstance(p, str) for p in problems):
        return [f"rank part could not be checked (verify_rank_certificate returned "
                f"{type(problems).__name__}, expected a list of problems)"], []
    if problems:
        return [f"rank part: {p}" for p in problems], []
    return [], ["rank part valid"]


def run_verify_certificate(case_path: str, report_path: str, limits: ReadLimits | None = None) -> int:
    """CLI body of ``exactident verify-certificate CASE REPORT.json``.

    ``limits`` bounds both files (size, digits; default :data:`exactident.io.limits.DEFAULT_LIMITS`).

    Returns
    -------
    int
        0 valid, 3 invalid (each failure printed), 2 bad input (one line naming file and field).
    """
    from exactident.io.case import load_case

    try:
        try:
            case = load_case(case_path, limits)
        except RecursionError:
            raise CaseFormatError(case_path, "", "not valid JSON (nested too deeply)") from None
        report = read_report_json(report_path, limits.max_bytes if limits else None)
        if isinstance(report, list):  # several cases: take the one named like the case
            named = [r for r in report if isinstance(r, dict) and r.get("name") == case.name]
            if len(named) != 1:
                raise CaseFormatError(report_path, "", f"expected one report named {case.name!r}, found {len(named)}")
            report = named[0]
        valid, msgs = verify_certificate(case, report, source=report_path, require_claims=True)
    except (CaseFormatError, UnsupportedCaseError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for m in msgs:
        print(m)
    print("certificate VALID" if valid else "certificate INVALID")
    return 0 if valid else 3


