"""The report ``exactident-report/1`` (docs/cli.md) and its human-readable table."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["REPORT_FORMAT", "Report", "escape_nonprintable", "render_table", "reports_to_json"]

REPORT_FORMAT = "exactident-report/1"


@dataclass
class Report:
    """Everything ``exactident check`` says about one case.

    Field names are those of docs/cli.md, verbatim.  ``rank_a`` is ``N_L rank alpha``
    (Prop. 11).  ``patterns``, ``numeric`` and ``certificate`` are present only
    when they apply.
    """

    name: str
    widths: list[int]
    n_samples: int
    dim: int
    rank_gamma: int
    rank_a: int | None
    cs: bool
    cn: bool
    degenerate: bool
    on_boundary: bool
    n_ties: int
    verdict: str
    reason: str
    patterns: list[dict[str, Any]] | None = None
    numeric: dict[str, Any] | None = None
    certificate: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    #: Exact ranks at the ``>= 0`` activation pattern (what a float tool rounds); equal to
    #: ``rank_gamma``/``rank_a`` off the boundary.  Not part of the JSON report.
    pattern_ranks: tuple[int, int | None] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"format": REPORT_FORMAT}
        for key in ("name", "widths", "n_samples", "dim", "rank_gamma", "rank_a", "cs", "cn",
                    "degenerate", "on_boundary", "n_ties", "verdict", "reason"):
            out[key] = getattr(self, key)
        for key in ("patterns", "numeric", "certificate"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        out.update(self.extra)
        return out


def reports_to_json(reports: Sequence[Report], as_list: bool) -> str:
    """One object, or an array when several cases were given (docs/cli.md)."""
    data: Any = [r.to_dict() for r in reports] if as_list else reports[0].to_dict()
    return json.dumps(data, indent=2) + "\n"


def escape_nonprintable(text: str) -> str:
    r"""``text`` with each non-printable character (controls, ANSI escapes) as a Python escape.

    For human-readable output only, so a case name cannot drive the terminal;
    JSON output keeps the exact string.

    Examples
    --------
    >>> print(escape_nonprintable("a\x1b[31mred\n\u00e9"))
    a\x1b[31mred\né
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def render_table(reports: Sequence[Report]) -> str:
    """A plain-text table: verdict, ranks, dim, n*N_L, ties, float agreement, time.

    Non-printable characters in names and reasons are escaped
    (:func:`escape_nonprintable`).
    """
    esc = escape_nonprintable
    head = ["case", "verdict", "rank_gamma", "rank_a", "dim", "n*N_L", "ties", "float", "time"]
    rows = []
    for r in reports:
        if r.numeric is None:
            flt = "-"
        else:
            num = r.numeric
            flt = "agrees" if num["agrees"] else f"DISAGREES ({num['verdict']}, rank {num['rank_gamma']})"
        rows.append([esc(r.name), r.verdict, "-" if r.rank_gamma is None else str(r.rank_gamma),  # None: timed out
                     "-" if r.rank_a is None else str(r.rank_a),
                     str(r.dim), str(r.n_samples * r.widths[-1]), "-" if r.n_ties is None else str(r.n_ties), flt,
                     f"{r.seconds:.2f}s"])
    widths = [max(len(h), *(len(row[c]) for row in rows)) for c, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in rows]
    for r in reports:
        lines.append(f"{esc(r.name)}: {esc(r.reason)}")
        for line in r.extra.get("summary", []) if isinstance(r.extra.get("summary"), list) else []:
            lines.append(f"  {esc(str(line))}")
    return "\n".join(lines) + "\n"
