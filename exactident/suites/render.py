"""Plain-text tables for ``suite run`` and ``suite score``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from exactident.io.report import escape_nonprintable

__all__ = ["render_run", "table"]


def table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligned columns, a rule under the header."""
    widths = [max(len(h), *(len(r[c]) for r in rows)) if rows else len(h) for c, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip(), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    return lines


def _value(v: Any) -> str:
    return json.dumps(v)


def render_run(run: Any) -> str:
    """The summary of a :class:`~exactident.suites.run.SuiteRun`: per family, then the failing cases."""
    families: dict[str, dict[str, float]] = {}
    for r in run.rows:
        f = families.setdefault(r["family"], {"cases": 0, "agree": 0, "differ": 0, "error": 0, "seconds": 0.0})
        f["cases"] += 1
        f[r["status"]] += 1
        f["seconds"] += float(r.get("seconds") or 0.0)
    total = {k: sum(f[k] for f in families.values()) for k in ("cases", "agree", "differ", "error", "seconds")}
    rows = [[esc, *(str(int(f[k])) for k in ("cases", "agree", "differ", "error")), f"{f['seconds']:.2f}"]
            for esc, f in ((escape_nonprintable(name), f) for name, f in sorted(families.items()))]
    rows.append(["all", *(str(int(total[k])) for k in ("cases", "agree", "differ", "error")),
                 f"{total['seconds']:.2f}"])
    lines = table(["family", "cases", "agree", "differ", "error", "check s"], rows)
    failing = run.failing
    if failing:
        lines.append("")
        lines.append("failing cases:")
        for r in failing:
            where = escape_nonprintable(r["file"])
            if r["status"] == "error":
                lines.append(f"  {where}: error: {escape_nonprintable(r['error'])}")
            for f, want, got in r.get("differences", []):
                lines.append(f"  {where}: {f}: expected {_value(want)}, got {_value(got)}")
    lines.append("")
    resumed = f"; {run.resumed} taken from earlier results" if run.resumed else ""
    lines.append(f"{int(total['cases'])} cases: {int(total['agree'])} agree, {int(total['differ'])} differ, "
                 f"{int(total['error'])} errors ({run.mode}, {run.seconds:.1f} s{resumed})")
    lines.append(f"compared fields: {', '.join(run.fields)}")
    lines += [f"note: {n}" for n in run.notes]
    return "\n".join(lines) + "\n"
