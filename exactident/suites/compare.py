"""Comparing a report with a case's ``expected`` block, field by field.

Suites compare a chosen set of fields (by default :data:`DEFAULT_FIELDS`),
never whole reports, so fields added to the report later do not break old
suites.  A field is compared when the ``expected`` block has it; values must
be equal *and* of the same JSON type (``true`` is not ``1``).  Used by
``exactident suite run``, ``exactident check --expect`` and the scorer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from exactident.errors import UnsupportedCaseError

__all__ = [
    "DEFAULT_FIELDS",
    "REPORT_SCALARS",
    "Difference",
    "case_key",
    "compare",
    "expect_lines",
    "expected_from_report",
    "parse_fields",
]

#: Fields ``suite run`` and ``check --expect`` compare unless told otherwise.
DEFAULT_FIELDS: tuple[str, ...] = ("verdict", "rank_gamma", "rank_a", "dim", "on_boundary", "n_ties", "degenerate")

#: Report fields a comparison may name (the scalar part of ``exactident-report/1``).
REPORT_SCALARS: tuple[str, ...] = ("widths", "n_samples", "dim", "rank_gamma", "rank_a", "cs", "cn", "degenerate",
                                   "on_boundary", "n_ties", "verdict", "reason", "decided_by")

#: One disagreement: (field, expected value, value found).
Difference = tuple[str, Any, Any]


def parse_fields(text: str) -> tuple[str, ...]:
    """``"verdict,rank_gamma"`` -> ``("verdict", "rank_gamma")``.

    Raises
    ------
    UnsupportedCaseError
        Empty list, or a name that is not a scalar report field.

    Examples
    --------
    >>> parse_fields("verdict, rank_a")
    ('verdict', 'rank_a')
    >>> parse_fields("verdict,colour")
    Traceback (most recent call last):
    ...
    exactident.errors.UnsupportedCaseError: --fields: unknown report field 'colour' (known: widths, n_samples, \
dim, rank_gamma, rank_a, cs, cn, degenerate, on_boundary, n_ties, verdict, reason, decided_by)
    """
    names = tuple(f.strip() for f in text.split(",") if f.strip())
    if not names:
        raise UnsupportedCaseError("--fields: expected a comma-separated list of report fields")
    for name in names:
        if name not in REPORT_SCALARS:
            raise UnsupportedCaseError(f"--fields: unknown report field {name!r} (known: {', '.join(REPORT_SCALARS)})")
    return names


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a == b) and (a is None) == (b is None)


def compare(expected: Mapping[str, Any], report: Mapping[str, Any], fields: Iterable[str]) -> list[Difference]:
    """The fields of ``fields`` present in ``expected`` whose value in ``report`` differs.

    A field missing from the report counts as a difference (found ``None``).

    Examples
    --------
    >>> compare({"verdict": "identifiable", "n_ties": 0}, {"verdict": "inconclusive", "n_ties": 0},
    ...         ["verdict", "n_ties", "rank_a"])
    [('verdict', 'identifiable', 'inconclusive')]
    >>> compare({"on_boundary": True}, {"on_boundary": 1}, ["on_boundary"])
    [('on_boundary', True, 1)]
    """
    out = []
    for f in fields:
        if f in expected and not _same(expected[f], report.get(f)):
            out.append((f, expected[f], report.get(f)))
    return out


def _has_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_has_float(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_float(v) for v in value)
    return False


def expected_from_report(report: Mapping[str, Any]) -> dict[str, Any]:
    """The exact part of a report (``Report.to_dict()``): what a generated case's ``expected`` block holds.

    Dropped: ``format`` and ``name`` (they describe the report, not the case),
    and every field holding a float (the float cross-check, timings: not exact,
    not reproducible across machines).

    Examples
    --------
    >>> expected_from_report({"format": "exactident-report/1", "name": "t", "verdict": "identifiable",
    ...                       "numeric": {"tol": 1e-15}, "dim": 3})
    {'verdict': 'identifiable', 'dim': 3}
    """
    return {k: v for k, v in report.items() if k not in ("format", "name") and not _has_float(v)}


def case_key(data: bytes) -> str:
    """The key of a case in result files: SHA-256 of the file's bytes (hex, 24 digits).

    >>> case_key(b"{}")
    '44136fa355b3678a1146ad16'
    """
    return hashlib.sha256(data).hexdigest()[:24]


def expect_lines(sources: Sequence[str], expected: Sequence[Mapping[str, Any]], reports: Sequence[Mapping[str, Any]],
                 fields: Sequence[str] = DEFAULT_FIELDS) -> list[str]:
    """``check --expect``: one line per differing field, ``FILE: FIELD: expected X, got Y`` (empty when all agree).

    >>> expect_lines(["a.json"], [{"verdict": "identifiable"}], [{"verdict": "inconclusive"}])
    ['a.json: verdict: expected "identifiable", got "inconclusive"\\n']
    """
    import json

    out = []
    for source, exp, rep in zip(sources, expected, reports):
        for f, want, got in compare(exp, rep, fields):
            out.append(f"{source}: {f}: expected {json.dumps(want)}, got {json.dumps(got)}\n")
    return out
