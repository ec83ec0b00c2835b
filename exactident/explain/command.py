"""``exactident explain CASE...`` and ``exactident check --explain``: per parameter and per neuron, what is determined.

The terminal view names the under-determined neurons and the parameters of each
class, then the kernel directions (a few lines each); ``--json`` prints the
``exactident-report/1`` report with the optional fields ``parameters``,
``neurons``, ``kernel_basis`` and ``explanation`` (docs/cli.md), which
``exactident verify-certificate`` re-checks.  Every case is loaded and
validated before any work (bad input: exit 2 naming the file and field).

Called by :mod:`exactident.cli`; calls :mod:`exactident.explain.core`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from exactident.budget import run_command_work
from exactident.explain.core import add_explanation, explain
from exactident.explain.render import render_explanation
from exactident.io.argtypes import any_int, positive_seconds
from exactident.io.atomic import write_stdout
from exactident.io.case import Case
from exactident.io.limits import add_limit_arguments, limits_from_args
from exactident.io.report import Report, render_table, reports_to_json

__all__ = ["MISSING", "add_arguments", "explain_reports", "run", "unexplained_report"]

#: The explain fields a report lacks when the budget runs out after check's verdict.
MISSING = ("parameters", "neurons", "kernel_basis")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``exactident explain`` (called by :func:`exactident.cli.build_parser`)."""
    from exactident.io.importers.command import add_check_arguments

    parser.add_argument("cases", nargs="+", metavar="CASE",
                        help="case files (exactident-case/1 or /2 JSON), or model files with --sample")
    parser.add_argument("--json", action="store_true",
                        help="print the report (exactident-report/1) with the explain fields")
    parser.add_argument("--seed", type=any_int, default=0, help="seed of the random primes (speed only)")
    parser.add_argument("--max-directions", type=int, default=20, metavar="N",
                        help="kernel directions printed on the terminal (all of them are in --json)")
    parser.add_argument("--timeout", type=positive_seconds, default=None, metavar="SECONDS",
                        help="wall-time budget per case: past it the case's report is inconclusive "
                             "('time budget exhausted at <stage>'), without the explain fields")
    add_limit_arguments(parser)
    add_check_arguments(parser)  # --sample and the model options, as for check


def explain_reports(cases: Sequence[Case], reports: Sequence[Report]) -> str:
    """Add the explain fields to each report (``check --explain``); returns the terminal text for the table."""
    out = []
    for case, report in zip(cases, reports):
        ex = add_explanation(case, report)
        out.append(render_explanation(report, ex))
    return "\n" + "\n".join(out)


def _checked(case: Case, seed: int) -> Report | None:
    """``check``'s report first (the verdict, certified), handed to the budget before the explanation starts.

    Past the budget the certified verdict is then kept (:func:`unexplained_report`), never turned into
    ``inconclusive``.  Explain's kernel bases need the exact ``R_Gamma``: a report with only a certified
    interval is recomputed with exact ranks inside :func:`~exactident.explain.core.explain`.
    """
    import copy

    from exactident.budget import deliver
    from exactident.check import check

    report = check(case, numeric=False, seed=seed)
    deliver(copy.deepcopy(report))
    return report if report.rank_gamma_interval is None else None


def unexplained_report(report: Report, at_stage: str, seconds: float) -> Report:
    """``check``'s report of a case whose explanation ran out of budget: its verdict kept, the gap said.

    The verdict, ranks and certificate are check's (complete, certified, verified by
    ``verify-certificate``); the explain fields :data:`MISSING` are absent and the reason and
    ``explanation`` say which and where the budget ran out.

    Examples
    --------
    >>> from exactident.io.case import parse_case
    >>> from exactident.check import check
    >>> case = parse_case({"format": "exactident-case/1", "name": "t", "widths": [1, 1, 1],
    ...     "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]], "sample": [[0], [1], [2]]})
    >>> r = unexplained_report(check(case, numeric=False), "kernel", 2.0)
    >>> r.verdict, r.extra["explanation"][0][:57]
    ('not-identifiable', 'explanation not finished: time budget exhausted at kernel')
    """
    note = (f"explanation not finished: time budget exhausted at {at_stage}; the verdict is check's, certified; "
            f"missing: per-parameter classes, neuron diagnoses and kernel bases ({', '.join(MISSING)})")
    report.reason = f"{report.reason}; {note}"
    report.extra["explanation"] = [note]
    report.seconds = seconds
    return report


def run(args: argparse.Namespace) -> int:
    """Run ``exactident explain``; exit status as in docs/cli.md (errors propagate to :func:`exactident.cli.main`)."""
    limits = limits_from_args(args)
    from exactident.io.importers.command import load_check_inputs

    cases = load_check_inputs(args.cases, args, limits)  # model files imported with --sample, as check does
    texts, reports = [], []
    for case in cases:
        def work(case: Case = case) -> tuple[Report, str]:
            # with a deadline, check's verdict first (kept past it); without one, explain's own check only
            first = _checked(case, args.seed) if args.timeout is not None else None
            report, ex = explain(case, seed=args.seed, report=first)
            report.extra.update(ex.fields())
            return report, render_explanation(report, ex, max_directions=max(args.max_directions, 0))

        # with --timeout (or on a terminal) a child process, as check --timeout (exactident.budget)
        outcome = run_command_work(work, args.timeout)
        if outcome.timed_out:
            from exactident.check import timed_out_report

            if outcome.partial is not None:  # check's verdict was reached: keep it
                report = unexplained_report(outcome.partial, outcome.stage, outcome.seconds)
            else:
                report = timed_out_report(case, outcome.stage, outcome.seconds)
            text = render_table([report])
        else:
            report, text = outcome.value
        reports.append(report)
        texts.append(text)
    write_stdout(reports_to_json(reports, as_list=len(reports) > 1) if args.json else "\n".join(texts))
    return 0
