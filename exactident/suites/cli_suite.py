"""``exactident suite run`` and ``exactident suite score`` (docs/suites.md).

``suite run DIR [--jobs N | --scheduler ADDRESS] [--out results.jsonl [--resume]] [--fields F,...]``:
recompute every case and compare with its ``expected`` block
(:mod:`exactident.suites.run`); exit 0 when every case agrees, 3 when some
differ or fail.  ``suite score DIR --tool 'COMMAND {case}' [--jobs N] [--timeout S] [--json]``:
score another tool (:mod:`exactident.suites.score`); exit 0 once scored.

Called by :mod:`exactident.cli`.
"""

from __future__ import annotations

import argparse
import json

from exactident.errors import UnsupportedCaseError
from exactident.io.argtypes import positive_int, positive_seconds

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``suite`` with its two subcommands ``run`` and ``score``."""
    sub = parser.add_subparsers(dest="suite_command", required=True)
    r = sub.add_parser("run", help="recompute every case of a suite and compare with its expected block")
    r.add_argument("folder", metavar="DIR", help="suite folder (case files below it, manifest.json optional)")
    r.add_argument("--jobs", type=positive_int, default=None, metavar="N",
                   help="worker processes on a Dask LocalCluster (default: one per core; 1 = in this process)")
    r.add_argument("--scheduler", metavar="ADDRESS", help="submit to a running Dask scheduler (tcp://host:8786)")
    r.add_argument("--out", metavar="FILE", help="append one JSON line per case to FILE as results arrive")
    r.add_argument("--resume", action="store_true", help="keep FILE's finished results and skip those cases")
    r.add_argument("--fields", metavar="F,...", help="report fields to compare (default: the manifest's "
                   "compared_fields, else verdict,rank_gamma,rank_a,dim,on_boundary,n_ties,degenerate)")
    r.add_argument("--json", action="store_true", help="print the per-case results as one JSON object")
    s = sub.add_parser("score", help="score another tool's verdicts and ranks against a suite")
    s.add_argument("folder", metavar="DIR", help="suite folder (or one case file)")
    s.add_argument("--tool", required=True, metavar="'COMMAND {case}'",
                   help="command run per case ({case} = the case file's path), printing a JSON object with any "
                        "of verdict, rank_gamma, rank_a")
    s.add_argument("--jobs", type=positive_int, default=1, metavar="N", help="tool runs in parallel (default 1)")
    s.add_argument("--timeout", type=positive_seconds, default=None, metavar="S", help="seconds per case")
    s.add_argument("--fields", metavar="F,...", help="fields to score (default verdict,rank_gamma,rank_a)")
    s.add_argument("--json", action="store_true", help="print the score as JSON")


def _note_nested_suites(folder: str) -> None:
    """A sub-folder with its own manifest is a suite of its own: say it is left out (stderr)."""
    import os
    import sys

    from exactident.io.case import case_files

    if os.path.isdir(folder):
        files, nested = case_files(folder)
        for n in nested if files else []:  # no files at all: the error names the nested suites
            print(f"note: {n} is a suite of its own (its manifest.json), left out: "
                  f"run it with exactident suite run {n}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    """Dispatch ``suite run`` / ``suite score``; errors propagate to :func:`exactident.cli.main`."""
    from exactident.io.atomic import write_stdout
    from exactident.suites.compare import parse_fields

    fields = parse_fields(args.fields) if args.fields else None
    _note_nested_suites(args.folder)
    if args.suite_command == "score":
        from exactident.suites.score import SCORED_FIELDS, command_tool, score

        tool = command_tool(args.tool, args.timeout)
        result = score(tool, args.folder, fields=fields or SCORED_FIELDS, jobs=args.jobs)
        if not result.usable:  # nothing to score: the command is wrong, not the tool's answers
            first = next((c for c in result.cases if c["error"]), None)
            why = (f"first failure: {first['file']}: {first['error']}" if first
                   else f"it printed none of the fields {', '.join(fields or SCORED_FIELDS)}")
            raise UnsupportedCaseError(f"--tool: no usable answer on any of the {len(result.cases)} case(s) ({why})")
        write_stdout(json.dumps(result.to_dict(), indent=1) + "\n" if args.json else result.render())
        return 0
    from exactident.suites.render import render_run
    from exactident.suites.run import run_suite

    outcome = run_suite(args.folder, jobs=args.jobs, scheduler=args.scheduler, out=args.out, resume=args.resume,
                        fields=fields)
    if args.json:
        data = {"format": "exactident-suite-run/1", "fields": list(outcome.fields), "mode": outcome.mode,
                "seconds": outcome.seconds, "resumed": outcome.resumed, "cases": outcome.rows}
        write_stdout(json.dumps(data, indent=1) + "\n")
    else:
        write_stdout(render_run(outcome))
    return 0 if outcome.ok else 3
