"""The report ``exactident-report/1`` (docs/cli.md) and its human-readable table."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["NOT_ENUMERATED", "REPORT_FORMAT", "Report", "escape_nonprintable", "past_the_cap", "render_table",
           "reports_to_json"]

#: The ``format`` field of a report (docs/cli.md).
REPORT_FORMAT = "exactident-report/1"
#: The report field saying why the tie resolutions were not enumerated (docs/cli.md).
NOT_ENUMERATED = "resolutions_not_enumerated"


def past_the_cap(max_resolutions: int, k: int) -> dict[str, Any]:
    """The value of :data:`NOT_ENUMERATED` when the ``2^k`` tie resolutions exceed ``--max-resolutions``.

    ``k`` is the number of free sides: a plain MLP's classes of visible ties (ties at equal sample
    points take one side), a layer graph's non-persistent ties.  The count is given as its exponent
    (``2^k`` can have any number of digits); ``exactident verify-certificate`` recomputes ``k`` from
    the case and refuses the record unless ``2^k > max_resolutions``.

    Examples
    --------
    >>> past_the_cap(16, 6)
    {'why': 'cap', 'max_resolutions': 16, 'log2_resolutions': 6}
    """
    return {"why": "cap", "max_resolutions": max_resolutions, "log2_resolutions": k}


@dataclass
class Report:
    """Everything ``exactident check`` says about one case.

    Field names are those of docs/cli.md, verbatim.  ``rank_a`` is ``N_L rank alpha``
    (Prop. 11).  ``patterns``, ``numeric`` and ``certificate`` are present only
    when they apply.

    ``rank_gamma`` is a certified rank or None: when the verdict did not need the exact
    ``R_Gamma``, the certified bounds are ``rank_gamma_interval`` and the Monte Carlo value
    inside them, which nothing certifies, is ``montecarlo["rank_gamma"]`` with its proven
    error bound (docs/modular.md, "Verdict first").  :attr:`rank_gamma_text` is what every
    view shows.
    """

    name: str
    widths: list[int]
    n_samples: int
    dim: int
    rank_gamma: int | None
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
    #: The rule that decided the verdict (``theorem-9``, ``dead-neuron``, ...; docs/cli.md).
    decided_by: str | None = None
    #: Exact ranks at the ``>= 0`` activation pattern (what a float tool rounds); equal to
    #: ``rank_gamma``/``rank_a`` off the boundary.  Not part of the JSON report.
    pattern_ranks: tuple[int | None, int | None] | None = None
    #: The certified ``(lo, hi)`` of ``R_Gamma`` at that pattern when ``pattern_ranks[0]`` is None (a layer
    #: graph's float cross-check holds its float rank against it).  Not part of the JSON report.
    pattern_interval: tuple[int, int] | None = None
    #: ``(lo, hi)`` with ``lo <= R_Gamma <= hi`` certified and ``lo < hi``, when the verdict did not need the
    #: exact rank (``rank_gamma`` is then None); ``lo`` is a rank mod p, ``hi`` a proven upper bound.
    rank_gamma_interval: tuple[int, int] | None = None
    #: Beside ``rank_gamma_interval``: ``{"rank_gamma": value, "error_probability": e}``, the largest rank
    #: mod uniformly drawn primes (inside the interval, not certified) and a proven bound on the
    #: probability that it is below the exact ``R_Gamma``.
    montecarlo: dict[str, Any] | None = None

    @property
    def rank_gamma_text(self) -> str:
        """``rank_gamma`` as the views show it: the exact rank, ``[lo, hi]`` for a certified interval, or ``-``.

        Examples
        --------
        >>> r = Report("t", [1, 2, 1], 4, 5, None, None, False, True, False, False, 0, "inconclusive", "",
        ...            rank_gamma_interval=(2, 4), montecarlo={"rank_gamma": 3, "error_probability": 1e-9})
        >>> r.rank_gamma_text, r.montecarlo_text
        ('[2, 4]', 'Monte Carlo value 3, not certified (error probability <= 1e-09)')
        """
        if self.rank_gamma_interval is not None:
            lo, hi = self.rank_gamma_interval
            return f"[{lo}, {hi}]"
        return "-" if self.rank_gamma is None else str(self.rank_gamma)

    @property
    def montecarlo_text(self) -> str | None:
        """The Monte Carlo value beside a certified interval, labelled, with its error bound; None without one."""
        if not self.montecarlo:
            return None
        return (f"Monte Carlo value {self.montecarlo.get('rank_gamma')}, not certified (error probability "
                f"<= {float(self.montecarlo.get('error_probability', 1.0)):.3g})")

    def __repr__(self) -> str:
        """One short line: verdict, ranks, ``decided_by`` (the full report is :meth:`to_dict`; the table is
        ``str(report)``)."""
        interval = "" if self.rank_gamma_interval is None else \
            f"rank_gamma_interval={list(self.rank_gamma_interval)}, "
        return (f"Report(name={_short(self.name)}, verdict={self.verdict!r}, rank_gamma={self.rank_gamma}, {interval}"
                f"rank_a={self.rank_a}, dim={self.dim}, n_samples={self.n_samples}, n_ties={self.n_ties}, "
                f"decided_by={self.decided_by!r}, float={_float_cell(self.numeric)!r})")

    def __str__(self) -> str:
        """The human-readable table of this report, reasons wrapped at 100 characters (:func:`render_table`)."""
        from exactident.io.display import REASON_WIDTH

        return render_table([self], width=REASON_WIDTH)

    def _repr_html_(self) -> str:
        """The notebook view: verdict, ranks, ``decided_by``, the reason and the notes (HTML, escaped)."""
        from exactident.io.display import html_block

        rank = self.rank_gamma_text + (" (certified interval)" if self.rank_gamma_interval is not None else "")
        fields = [("verdict", self.verdict), ("decided by", self.decided_by), ("rank Gamma", rank),
                  ("rank A", self.rank_a), ("dim", self.dim),
                  ("n N_L", self.n_samples * self.widths[-1]), ("widths", self.widths),
                  ("samples", self.n_samples), ("ties", self.n_ties), ("float", _float_cell(self.numeric)),
                  ("time", f"{self.seconds:.2f}s")]
        explained = self.extra.get("explanation")
        lines = [self.reason, *_summary_lines(self), *(explained if isinstance(explained, list) else [])]
        return html_block(f"Report {self.name}", fields, [str(t) for t in lines])

    def parameters_rows(self) -> list[dict[str, Any]]:
        """One dict per parameter: the paper's name, the framework's name, layer, kind, and explain's class.

        Names come from the widths and the case's ``provenance["parameter_names"]``; the columns
        ``class``, ``by`` and ``why`` are present when the report was explained (``exactident.explain``,
        ``check --explain``: report field ``parameters``, fixed edges listed as ``fixed``); otherwise
        every parameter is listed with its names only (docs/notebook.md).
        """
        from exactident.io.display import parameter_rows

        entries = self.extra.get("parameters")
        return parameter_rows(self.widths, self.extra.get("provenance"),
                              entries if isinstance(entries, list) else None,
                              layer_graph="architecture" in self.extra)

    def parameters_frame(self) -> Any:
        """:meth:`parameters_rows` as a pandas ``DataFrame`` (one row per parameter).

        Raises
        ------
        UnsupportedCaseError
            When pandas is not installed (it is optional), or for a layer graph's report that was
            not explained (its parameters are listed by ``exactident.explain``).
        """
        from exactident.io.display import to_frame

        return to_frame(self.parameters_rows())

    @property
    def summary(self) -> list[str]:
        """The readable lines printed under the table for this case: the reason, then the
        boundary analysis's ``summary`` (JSON field) and the float cross-check's notes."""
        return [self.reason, *_summary_lines(self)]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"format": REPORT_FORMAT}
        for key in ("name", "widths", "n_samples", "dim", "rank_gamma", "rank_a", "cs", "cn",
                    "degenerate", "on_boundary", "n_ties", "verdict", "reason"):
            out[key] = getattr(self, key)
        if self.decided_by is not None:
            out["decided_by"] = self.decided_by
        if self.rank_gamma_interval is not None:
            out["rank_gamma_interval"] = list(self.rank_gamma_interval)
            if self.montecarlo:  # absent when no Monte Carlo value was worth its label
                out["montecarlo"] = dict(self.montecarlo)
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


def _short(name: str, limit: int = 60) -> str:
    # repr escapes control characters; long names are cut so the repr stays one short line
    return repr(name if len(name) <= limit else name[:limit] + "...")


def _float_cell(num: dict[str, Any] | None) -> str:
    """The table's ``float`` column for a ``numeric`` block (docs/cli.md)."""
    if num is None:
        return "-"
    if num.get("status") == "timed out":
        return "timed out"
    if num.get("status", "ok") != "ok" and num.get("rank_gamma") is None:
        return f"FAILED ({num['status']})"
    if num.get("agrees") is None:
        return f"{num['verdict']} (exact not reached)"
    if num.get("status", "ok") != "ok":
        return f"DISAGREES ({num['status']})"
    cell = "agrees" if num["agrees"] else f"DISAGREES ({num['verdict']}, rank {num['rank_gamma']})"
    n_kinks = (num.get("near_kinks") or {}).get("n", 0)
    return cell + (f", {n_kinks} at kinks" if n_kinks else "")


def _float_notes(num: dict[str, Any] | None) -> list[str]:
    """Readable lines about the float cross-check: failure, kinks, full Jacobian, warnings."""
    if num is None:
        return []
    out = []
    dtype = num.get("dtype", "float64")
    if num.get("status", "ok") != "ok":
        out.append(f"{dtype} pipeline: {num['status']}: {num.get('message', '')}")
    kinks = num.get("near_kinks") or {}
    if kinks.get("n"):
        e = kinks["entries"][0]
        exact = e["exact"]
        bound = "inf" if e["bound"] is None else f"{e['bound']:.3g}"
        out.append(f"{dtype}: {kinks['n']} (sample, neuron) pair(s) at a kink in floats, e.g. sample "
                   f"{e['sample']} neuron ({e['layer']},{e['neuron']}): float z = {e['float']:.3g} (rounding "
                   f"bound {bound}), exact z = {exact} ({e['kind']}); the float pattern "
                   + ("differs: the float verdict depends on relu'(0)" if num.get("pattern_differs")
                      else "is right here, by luck of rounding"))
    full = num.get("full_jacobian") or {}
    wrong = {k: v for k, v in (full.get("pipelines") or {}).items() if not v.get("agrees")}
    if wrong:
        parts = [f"{k} {'FAILED (' + v['status'] + ')' if v.get('status') != 'ok' else 'rank ' + str(v['rank'])}"
                 + (" > dim" if v.get("exceeds_dim") else "") for k, v in wrong.items()]
        out.append(f"full Jacobian (all {full['n_parameters']} parameters, as autograd tools rank it; exact rank "
                   f"{full['compared_with']}, dim {full['dim']}): " + ", ".join(parts))
    warns = list(num.get("warnings") or []) + list(full.get("warnings") or [])
    if warns:
        out.append("float warnings: " + "; ".join(f"{w['message']} ({w['stage']}, x{w['count']})" for w in warns[:4])
                   + (" ..." if len(warns) > 4 else ""))
    return out


def _summary_lines(r: Report) -> list[str]:
    lines = []
    prov = r.extra.get("provenance") or {}
    arch = prov.get("architecture")
    if isinstance(arch, str) and arch.startswith("assumed"):
        lines.append(f"architecture {arch} (give --reference to check it)")
    dropped = prov.get("dropped_output_activation")
    if dropped:
        lines.append(f"analysed before the output activation {dropped} (dropped: the network ends at the logits)")
    if r.rank_gamma_interval is not None and r.montecarlo_text:  # labelled, never in the rank's place
        lines.append(f"R_Gamma certified in {r.rank_gamma_text}; {r.montecarlo_text}")
    if isinstance(r.extra.get("summary"), list):
        lines += [str(line) for line in r.extra["summary"]]
    return lines + _float_notes(r.numeric)


def render_table(reports: Sequence[Report], width: int | None = None) -> str:
    """A plain-text table: verdict, ranks, dim, n*N_L, ties, float agreement, time; then each reason.

    Each reason line ends with ``[decided by: RULE]`` when the report has ``decided_by``.
    With ``width``, reasons and notes are wrapped at that many characters (``str(report)``);
    the command line keeps one line per reason.

    Non-printable characters in names and reasons are escaped
    (:func:`escape_nonprintable`).
    """
    esc = escape_nonprintable
    head = ["case", "verdict", "rank_gamma", "rank_a", "dim", "n*N_L", "ties", "float", "time"]
    rows = []
    for r in reports:
        flt = _float_cell(r.numeric)
        rows.append([esc(r.name), r.verdict, r.rank_gamma_text,  # a certified interval, or -: timed out
                     "-" if r.rank_a is None else str(r.rank_a),
                     str(r.dim), str(r.n_samples * r.widths[-1]), "-" if r.n_ties is None else str(r.n_ties), flt,
                     f"{r.seconds:.2f}s"])
    widths = [max(len(h), *(len(row[c]) for row in rows)) for c, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in rows]
    for r in reports:
        decided = r.decided_by  # the JSON field, shown compactly after the reason
        text = f"{esc(r.name)}: {esc(r.reason)}" + (f" [decided by: {esc(decided)}]" if decided else "")
        notes = [esc(line) for line in _summary_lines(r)]
        if width is None:
            lines += [text, *(f"  {line}" for line in notes)]
            continue
        from exactident.io.display import wrap

        lines += wrap(text, width)
        for line in notes:
            lines += wrap(line, width, "  ")
    return "\n".join(lines) + "\n"
