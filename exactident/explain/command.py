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
import math
import sys
from collections.abc import Sequence

from exactident.argtypes import any_int, positive_seconds
from exactident.explain.core import add_explanation, explain
from exactident.explain.render import render_explanation
from exactident.io.atomic import write_stdout
from exactident.io.case import Case
from exactident.io.limits import add_limit_arguments, limits_from_args
from exactident.io.report import Report, render_table, reports_to_json

__all__ = ["add_arguments", "explain_reports", "run"]


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


def run(args: argparse.Namespace) -> int:
    """Run ``exactident explain``; exit status as in docs/cli.md (errors propagate to :func:`exactident.cli.main`)."""
    limits = limits_from_args(args)
    from exactident.io.importers.command import load_check_inputs

    cases = load_check_inputs(args.cases, args, limits)  # model files imported with --sample, as check does
    texts, reports = [], []
    # On a terminal each case runs in a child process even without --timeout (no deadline then), as
    # check does: Ctrl-C kills it at once instead of waiting for a long FLINT call to return.
    tty = getattr(sys.stderr, "isatty", lambda: False)()
    timeout = args.timeout if args.timeout is not None or not tty else math.inf
    for case in cases:
        def work(case: Case = case) -> tuple[Report, str]:
            report, ex = explain(case, seed=args.seed)
            report.extra.update(ex.fields())
            return report, render_explanation(report, ex, max_directions=max(args.max_directions, 0))

        if timeout is None:
            report, text = work()
        else:  # a child process killed at the deadline (exactident.budget.run_isolated), as check --timeout
            from exactident.budget import run_isolated
            from exactident.check import timed_out_report

            outcome = run_isolated(work, timeout)
            if outcome.timed_out:
                report = timed_out_report(case, outcome.stage, outcome.seconds)
                text = render_table([report])
            else:
                report, text = outcome.value
        reports.append(report)
        texts.append(text)
    write_stdout(reports_to_json(reports, as_list=len(reports) > 1) if args.json else "\n".join(texts))
    return 0
