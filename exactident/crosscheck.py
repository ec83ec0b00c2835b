"""``exactident crosscheck PATH...``: float tolerances against exact ranks, per case and per suite.

PATHs are case files or folders (their ``*.json`` files, not recursive, in
name order).  Every case is loaded and validated before any work, so bad
input exits 2 naming the file and field with nothing written.  Per case the
exact ranks and verdict are set beside each tolerance policy's
(:mod:`exactident.tolerance`); for a suite, a confusion table per policy,
the wrong verdicts and ranks, and the relative tolerance band right for every
case.  ``--json`` prints all of it; ``--csv FILE`` writes one row per
(case, policy); ``--plot FILE`` draws singular values (one case) or bands
(suite).  Output paths are checked before any work (an output that resolves
to an input case file, or ``--csv`` and ``--plot`` naming one file, is bad
usage); every output is rendered before any is written, each atomically, so
a failing run leaves existing files untouched.

Called by :mod:`exactident.cli`; calls :mod:`exactident.tolerance` and
:mod:`exactident.plot`.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import sys
from pathlib import Path
from typing import Iterable, Sequence

from .atomic import atomic_write_bytes, write_stdout
from .case import Case, load_case
from .errors import CaseFormatError, OutputError
from .report import escape_nonprintable
from .tolerance import CaseCrosscheck, SuiteSummary, crosscheck_case, default_policies, summarize

__all__ = ["add_arguments", "run", "expand_paths", "render_text", "to_csv"]

CSV_COLUMNS = ["case", "policy", "exact_verdict", "float_verdict", "right_verdict",
               "exact_rank_gamma", "float_rank_gamma", "exact_rank_a", "float_rank_a", "right_ranks",
               "tol_gamma", "band_rel_lo", "band_rel_hi", "pattern_differs", "fixable"]


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, found {text!r}") from None
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"expected a positive finite number, found {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``crosscheck`` subcommand's options (called by :func:`exactident.cli.build_parser`)."""
    parser.add_argument("paths", nargs="+", metavar="PATH", help="case files or folders of *.json cases")
    parser.add_argument("--json", action="store_true", help="print the per-case results and summary as JSON")
    parser.add_argument("--csv", metavar="FILE", help="write one row per (case, policy) to FILE")
    parser.add_argument("--plot", metavar="FILE", help="draw singular values / bands to FILE (needs matplotlib)")
    parser.add_argument("--tol", type=_positive, default=None, help="also judge an absolute tolerance on Gamma")
    parser.add_argument("--rtol", type=_positive, default=None, help="also judge a relative tolerance")
    parser.add_argument("--torch", action="store_true", help="add the PyTorch backend (needs torch)")


def expand_paths(paths: Sequence[str]) -> list[Path]:
    """Files as given, folders as their ``*.json`` files in name order.

    Raises
    ------
    CaseFormatError
        A path that does not exist, or a folder without ``*.json`` files.
    """
    out: list[Path] = []
    for text in paths:
        p = Path(text)
        if p.is_dir():
            found = sorted(p.glob("*.json"))
            if not found:
                raise CaseFormatError(text, "", "folder holds no case files (*.json)")
            out.extend(found)
        elif p.exists():
            out.append(p)
        else:
            raise CaseFormatError(text, "", "no such file or directory")
    return out


def _progress(cases: Sequence[Case]) -> Iterable[Case]:
    if len(cases) < 2:
        yield from cases
        return
    tty = getattr(sys.stderr, "isatty", lambda: False)()
    if not tty:  # a log file: one plain line per case, no carriage returns
        for k, c in enumerate(cases, 1):
            print(f"[{k}/{len(cases)}] {c.name!r}", file=sys.stderr, flush=True)
            yield c
        return
    try:
        from tqdm import tqdm
    except ImportError:
        for k, c in enumerate(cases, 1):
            print(f"\r[{k}/{len(cases)}] {c.name!r}", end="", file=sys.stderr, flush=True)
            yield c
        print(file=sys.stderr)
        return
    yield from tqdm(cases, desc="crosscheck", unit="case", file=sys.stderr)


def _check_outputs(args: argparse.Namespace, inputs: Sequence[Path]) -> None:
    """Refuse, before any work, outputs that would clobber an input or each other, or cannot be written.

    Paths are compared after resolving symlinks (:func:`os.path.realpath`).
    """
    seen: dict[str, str] = {os.path.realpath(p): f"input case file {p}" for p in inputs}
    for option in ("--csv", "--plot"):
        path = getattr(args, option[2:])
        if not path:
            continue
        real = os.path.realpath(path)
        if real in seen:
            raise CaseFormatError(path, option, f"is also the {seen[real]}; refusing to overwrite it")
        seen[real] = f"{option} output"
        if os.path.isdir(path):
            raise CaseFormatError(path, option, "is a directory")
        if not os.path.exists(path) and not os.path.isdir(os.path.dirname(real)):
            raise CaseFormatError(path, option, "cannot write (no such directory)")


def run(args: argparse.Namespace) -> int:
    """Run the subcommand; exit status per SPEC §5 (errors propagate to :func:`exactident.cli.main`).

    Every output is rendered before any is written, so a failing run leaves
    existing files untouched; a failing write raises :class:`OutputError`.
    """
    plot_fmt = None
    if args.plot:
        from .plot import plot_format

        plot_fmt = plot_format(args.plot)
    if args.torch:
        from .numeric_torch import import_torch

        import_torch()
    paths = expand_paths(args.paths)
    _check_outputs(args, paths)
    cases = [load_case(p) for p in paths]
    first: dict[str, str] = {}
    for c in cases:
        if c.name in first:
            raise CaseFormatError(c.source, "name", f"case name {c.name!r} appears twice in this suite "
                                  f"(also in {first[c.name]})")
        first[c.name] = c.source
    policies = default_policies(args.tol, args.rtol, args.torch)
    results = [crosscheck_case(c, policies) for c in _progress(cases)]
    summary = summarize(results)
    outputs: list[tuple[str, bytes]] = []
    if args.csv:
        outputs.append((args.csv, to_csv(results).encode("utf-8")))
    if args.plot:
        from .plot import render_case, render_suite

        image = (render_case(results[0], plot_fmt) if len(results) == 1
                 else render_suite(results, summary, plot_fmt))
        outputs.append((args.plot, image))
    if args.json:
        data = {"format": "exactident-crosscheck/1", "cases": [r.to_dict() for r in results],
                "summary": summary.to_dict()}
        text = json.dumps(data, indent=2) + "\n"
    else:
        text = render_text(results, summary)
    for path, data_bytes in outputs:  # everything computed: now commit
        try:
            atomic_write_bytes(path, data_bytes)
        except OSError as exc:
            raise OutputError(path, exc) from None
    write_stdout(text)
    return 0


def to_csv(results: Sequence[CaseCrosscheck]) -> str:
    """One row per (case, policy), columns :data:`CSV_COLUMNS`."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for r in results:
        for o in r.outcomes:
            backend = o.policy.split("/")[0]
            sp = r.spectra[backend]
            band = sp.band(r.pattern_rank_gamma, r.pattern_rank_a // r.widths[-1])["rel"]
            w.writerow([r.name, o.policy, r.verdict, o.verdict, o.right_verdict, r.pattern_rank_gamma,
                        o.rank_gamma, r.pattern_rank_a, o.rank_a, o.right_ranks, repr(o.tol_gamma),
                        repr(band[0]), "" if math.isinf(band[1]) else repr(band[1]),
                        sp.n_pattern_flips > 0, r.fixable])
    return buf.getvalue()


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
    lines = [f"case {r.name}: exact {r.verdict} (rank_gamma {r.rank_gamma}, rank_a {r.rank_a}, dim {r.dim}"
             f"{', ' + str(r.n_ties) + ' ties' if r.n_ties else ''})"]
    if not r.fixable:
        lines.append(f"  no tolerance can give the exact verdict: the >= 0 pattern's exact ranks "
                     f"({r.pattern_rank_gamma}, {r.pattern_rank_a}) give {r.pattern_verdict}")
    for key, sp in r.spectra.items():
        b = sp.band(r.pattern_rank_gamma, r.pattern_rank_a // r.widths[-1])
        k = r.pattern_rank_gamma
        near = [f"{v:.3g}" for v in sp.gamma_sv[max(0, k - 2):k + 2]]
        flips = f"; float pattern differs at {sp.n_pattern_flips} entries" if sp.n_pattern_flips else ""
        lines.append(f"  {key}: sigma(Gamma) around the cut {k}: {', '.join(near)}; band abs "
                     f"{_fmt_band(*b['gamma_abs'])}, rel {_fmt_band(*b['rel'])}{flips}")
    rows = [[o.policy, f"{o.tol_gamma:.3g}", str(o.rank_gamma), str(o.rank_a), o.verdict,
             "right" if o.right_verdict else "WRONG", "right" if o.right_ranks else "WRONG"]
            for o in r.outcomes]
    lines += ["  " + s for s in _table(["policy", "tol(Gamma)", "rank_gamma", "rank_a", "verdict",
                                        "verdict?", "ranks?"], rows)]
    return lines


def render_text(results: Sequence[CaseCrosscheck], summary: SuiteSummary) -> str:
    """Human-readable report: detail for one case, tables for a suite (non-printables escaped)."""
    if len(results) == 1:
        return "\n".join(map(escape_nonprintable, _case_detail(results[0]))) + "\n"
    lines = []
    rows = []
    for r in results:
        sp = r.spectra.get("float64") or next(iter(r.spectra.values()))
        band = sp.band(r.pattern_rank_gamma, r.pattern_rank_a // r.widths[-1])["rel"]
        wrong = [o.policy for o in r.outcomes if not o.right_verdict]
        rows.append([r.name, r.verdict, f"{r.pattern_rank_gamma}/{r.dim}", _fmt_band(*band),
                     "" if r.fixable else "no", str(len(wrong))])
    lines += _table(["case", "exact verdict", "rank/dim", "band rel (float64)", "fixable", "#wrong policies"],
                    rows)
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
    if summary.unfixable:
        lines.append("no tolerance gives the exact verdict for: " + ", ".join(summary.unfixable))
    return "\n".join(map(escape_nonprintable, lines)) + "\n"  # case names cannot drive the terminal
