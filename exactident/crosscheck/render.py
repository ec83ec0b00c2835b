"""Text and CSV renderings of a crosscheck (per case and per suite).

Called by :mod:`exactident.crosscheck.command`.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence

from exactident.crosscheck.core import CaseCrosscheck, SuiteSummary
from exactident.io.report import escape_nonprintable

__all__ = ["CSV_COLUMNS", "render_text", "to_csv"]


#: Header of :func:`to_csv`: one row per (case, policy).
CSV_COLUMNS = ["case", "policy", "exact_verdict", "float_verdict", "right_verdict",
               "exact_rank_gamma", "float_rank_gamma", "exact_rank_a", "float_rank_a", "right_ranks",
               "tol_gamma", "band_rel_lo", "band_rel_hi", "pattern_differs", "fixable"]


def to_csv(results: Sequence[CaseCrosscheck]) -> str:
    """One row per (case, policy), columns :data:`CSV_COLUMNS`."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for r in results:
        for o in r.outcomes:
            backend = o.policy.split("/")[0]
            sp = r.spectra[backend]
            if sp.failure is not None:  # float failure: no ranks, no band
                w.writerow([r.name, o.policy, r.verdict, o.verdict, False, r.pattern_rank_gamma, "",
                            r.pattern_rank_a, "", False, "", "", "", "", r.fixable])
                continue
            band = sp.band(r.pattern_rank_gamma, r.rank_alpha)["rel"]
            w.writerow([r.name, o.policy, r.verdict, o.verdict, o.right_verdict, r.pattern_rank_gamma,
                        o.rank_gamma, r.pattern_rank_a, o.rank_a, o.right_ranks, repr(o.tol_gamma),
                        repr(band[0]), "" if math.isinf(band[1]) else repr(band[1]),
                        sp.n_pattern_flips > 0, r.fixable])
    return buf.getvalue()


def _s(v: int | None) -> str:
    return "-" if v is None else str(v)


def _fmt_band(lo: float, hi: float | None) -> str:
    hi_s = "inf" if hi is None or math.isinf(hi) else f"{hi:.3g}"
    return f"[{lo:.3g}, {hi_s})" if hi is None or lo < hi else f"EMPTY [{lo:.3g}, {hi_s})"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[c]) for r in rows)) if rows else len(h) for c, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    return lines


def _case_detail(r: CaseCrosscheck) -> list[str]:
    lines = [f"case {r.name}: {r.comparison} (rank_gamma {r.rank_gamma}, rank_a {_s(r.rank_a)}, dim {r.dim}"
             f"{', ' + str(r.n_ties) + ' ties' if r.n_ties else ''}); float policies are marked against "
             "the rank rules' verdict"]
    if not r.fixable:
        lines.append(f"  no tolerance can give the exact verdict: the >= 0 pattern's exact ranks "
                     f"({r.pattern_rank_gamma}, {_s(r.pattern_rank_a)}) give {r.pattern_verdict}")
    for key, sp in r.spectra.items():
        if sp.failure is not None:
            lines.append(f"  {key}: FLOAT FAILURE {sp.failure.status}: {sp.failure.message}")
            continue
        k = r.pattern_rank_gamma
        near = [f"{v:.3g}" for v in sp.gamma_sv[max(0, k - 2):k + 2]]
        what = "full Jacobian" if "full-jacobian" in key else "Gamma"
        if sp.n_pattern_flips:  # another matrix: a band on it would be no advice
            lines.append(f"  {key}: sigma({what}) around the cut {k}: {', '.join(near)}; no band: the float "
                         f"pattern differs at {sp.n_pattern_flips} entries, so the float matrix rounds another one")
            continue
        b = sp.band(r.pattern_rank_gamma, r.rank_alpha)
        lines.append(f"  {key}: sigma({what}) around the cut {k}: {', '.join(near)}; band abs "
                     f"{_fmt_band(*b['gamma_abs'])}, rel {_fmt_band(*b['rel'])}")
    rows = [[o.policy, "-" if o.tol_gamma is None else f"{o.tol_gamma:.3g}", _s(o.rank_gamma), _s(o.rank_a),
             o.verdict, "right" if o.right_verdict else "WRONG", "right" if o.right_ranks else "WRONG"]
            for o in r.outcomes]
    lines += ["  " + s for s in _table(["policy", "tol(Gamma)", "rank_gamma", "rank_a", "verdict",
                                        "verdict?", "ranks?"], rows)]
    return lines


def render_text(results: Sequence[CaseCrosscheck], summary: SuiteSummary) -> str:
    """Human-readable report: detail for one case, tables for a suite (non-printables escaped)."""
    if len(results) == 1:
        return "\n".join(map(escape_nonprintable, _case_detail(results[0]))) + "\n"
    # suites: the verdict column is the rank rules' (what the policies are marked against)
    lines = []
    rows = []
    for r in results:
        sp = r.spectra.get("float64") or next(iter(r.spectra.values()))
        if sp.failure is not None:
            band_text = f"FAILED ({sp.failure.status})"
        elif sp.n_pattern_flips:
            band_text = "none (float pattern differs)"
        else:
            band_text = _fmt_band(*sp.band(r.pattern_rank_gamma, r.rank_alpha)["rel"])
        wrong = [o.policy for o in r.outcomes if not o.right_verdict]
        final = "-" if r.check_verdict is None else r.check_verdict
        rows.append([r.name, r.verdict, final, f"{r.pattern_rank_gamma}/{r.dim}", band_text,
                     "" if r.fixable else "no", str(len(wrong))])
    lines += _table(["case", "rank rules", "check's verdict", "rank/dim", "band rel (float64)", "fixable",
                     "#wrong policies"], rows)
    lines.append("")
    prow = [[p, str(len(summary.wrong_verdicts[p])), str(len(summary.wrong_ranks[p])),
             ", ".join(summary.wrong_verdicts[p][:4]) + (" ..." if len(summary.wrong_verdicts[p]) > 4 else "")]
            for p in summary.policies]
    lines += _table(["policy", "wrong verdicts", "wrong ranks", "cases (wrong verdict)"], prow)
    lines.append("")
    lines.append("confusion (exact verdict -> float verdict: count)")
    for p in summary.policies:
        cells = [f"{e}->{f}: {n}" for e, row in summary.confusion[p].items() for f, n in row.items()]
        lines.append(f"  {p}: " + "; ".join(cells))
    lines.append("")
    for b, entry in summary.bands.items():
        if entry["rel"] is None:
            lines.append(f"common band {b}: no case with the exact activation pattern")
        elif entry["exists"]:
            lines.append(f"common band {b}: rtol in {_fmt_band(entry['rel'][0], entry['rel'][1])}, "
                         f"chosen rtol {entry['chosen']:.3g}")
        else:
            c = entry["conflict"]
            lines.append(f"common band {b}: NONE: {c['needs_rtol_at_least']['case']} needs rtol >= "
                         f"{c['needs_rtol_at_least']['rtol']:.3g} but {c['needs_rtol_below']['case']} needs "
                         f"rtol < {c['needs_rtol_below']['rtol']:.3g} ({len(c['cases_below'])} case(s) below)")
        if entry["excluded_pattern_differs"]:
            lines.append(f"  left out (float pattern differs): {', '.join(entry['excluded_pattern_differs'])}")
        if entry.get("excluded_float_failed"):
            lines.append(f"  left out (float pipeline failed): {', '.join(entry['excluded_float_failed'])}")
    if summary.unfixable:
        lines.append("no tolerance gives the exact verdict for: " + ", ".join(summary.unfixable))
    return "\n".join(map(escape_nonprintable, lines)) + "\n"  # case names cannot drive the terminal

