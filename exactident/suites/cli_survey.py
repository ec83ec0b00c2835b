"""``exactident survey --widths 5,5,5,1 --trials T [--n-samples N] [--seed S] [--rational] [--plot FILE]``.

Prints the distribution of ``R_Gamma`` (the batch functional dimension) over
random draws and the fraction reaching ``dim`` (:mod:`exactident.suites.survey`);
``--json`` prints it as JSON, ``--plot FILE`` draws it (needs matplotlib),
``--budget S`` stops starting trials after S seconds.  Called by :mod:`exactident.cli`.
"""

from __future__ import annotations

import argparse
import json

from exactident.errors import OutputError
from exactident.io.argtypes import non_negative_int, parse_widths, positive_int, positive_seconds

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``survey`` subcommand's options."""
    parser.add_argument("--widths", type=parse_widths, required=True, metavar="N0,...,NL")
    parser.add_argument("--trials", type=positive_int, default=100, metavar="T", help="random draws (default 100)")
    parser.add_argument("--n-samples", type=positive_int, default=None, metavar="N",
                        help="sample size (default: smallest n with n*N_L >= dim)")
    parser.add_argument("--seed", type=non_negative_int, default=0, metavar="S")
    parser.add_argument("--rational", action="store_true",
                        help="small-denominator rationals instead of Gaussian float64 values (converted exactly)")
    parser.add_argument("--budget", type=positive_seconds, default=None, metavar="S",
                        help="start no trial after S seconds")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--plot", metavar="FILE", help="bar chart of the distribution (needs matplotlib)")


def run(args: argparse.Namespace) -> int:
    """Run ``exactident survey``; errors propagate to :func:`exactident.cli.main` (bad requests exit 2)."""
    from exactident.io.atomic import atomic_write_bytes, write_stdout
    from exactident.suites.survey import render_plot, survey

    fmt = ""
    if args.plot:
        from exactident.crosscheck.plot import plot_format

        fmt = plot_format(args.plot)
    result = survey(args.widths, args.trials, args.n_samples, args.seed, "rational" if args.rational else "gaussian",
                    budget=args.budget)
    if args.plot:
        try:
            atomic_write_bytes(args.plot, render_plot(result, fmt))
        except OSError as exc:
            raise OutputError(args.plot, exc) from None
    write_stdout(json.dumps(result.to_dict(), indent=1) + "\n" if args.json else result.render())
    return 0
