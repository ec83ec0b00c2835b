"""``exactident fdim CASE [--sample DATA] [--box LO:HI] [--seed S] [--no-search] [--max-boxes N] [--lines N]
[--walk-seconds S] [--regions N] [--region-seconds S] [--timeout S] [--json]``.

Prints the certified interval of the functional dimension of the case's theta on
``R^n`` (default) or on the box ``[LO, HI]^n`` (``--box LO:HI``) (:mod:`exactident.symmetry.fdim`),
starting from the case's sample (or, for a model file, ``--sample``'s), with the mechanism of every proved missing
dimension; a layer graph (residual, leaky/PReLU, convolution) is read in its compiled form, with
the same stages (target ``dim_free``); ``--json`` prints the ``exactident-fdim/1`` object
(docs/symmetries.md).  The stages show on a terminal; ``--timeout`` runs the computation in a
child process killed at the deadline.  Exit 0 when computed (whatever the interval) and when the
time budget ran out (the output says so: ``timed_out``), 2 on bad input.  Called by :mod:`exactident.cli`.
"""

from __future__ import annotations

import argparse
import json

from exactident.io.argtypes import non_negative_int, positive_int, positive_seconds
from exactident.io.rationals import add_box_argument
from exactident.progress import showing

__all__ = ["add_arguments", "add_region_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``exactident fdim`` (called by :func:`exactident.cli.build_parser`)."""
    from exactident.io.importers.command import add_check_arguments
    from exactident.io.limits import add_limit_arguments

    parser.add_argument("case", metavar="CASE", help="a case file (exactident-case/1 or /2 JSON), or a model file "
                        "with --sample")
    add_check_arguments(parser)  # --sample and the model options, as for check
    add_box_argument(parser, "the domain is the box [LO, HI]^n (default: all of R^n)")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="seed of the points and primes (default 0)")
    parser.add_argument("--no-search", action="store_true", help="random points only, no design point search")
    parser.add_argument("--max-boxes", type=positive_int, default=2048, metavar="N",
                        help="sub-boxes per sign proof (default 2048)")
    parser.add_argument("--lines", type=non_negative_int, default=256, metavar="N",
                        help="random lines walked for the lower bound (default 256; 0: none)")
    parser.add_argument("--walk-seconds", type=positive_seconds, default=120.0, metavar="S",
                        help="time budget of the line walk (default 120)")
    add_region_arguments(parser)
    parser.add_argument("--timeout", type=positive_seconds, default=None, metavar="SECONDS",
                        help="wall-time budget: past it the output says 'time budget exhausted at <stage>' (exit 0)")
    parser.add_argument("--json", action="store_true", help="print the exactident-fdim/1 JSON object")
    add_limit_arguments(parser)


def add_region_arguments(parser: argparse.ArgumentParser, scope: str = "") -> None:
    """``--regions`` and ``--region-seconds``, the region cover's budget (``scope``: e.g. ``"per trial: "``)."""
    parser.add_argument("--regions", type=non_negative_int, default=None, metavar="N",
                        help=f"{scope}at most N activation regions in the exact cover of the domain, which settles "
                             "fdim when complete (default: 50000 when the input width is at most 16 and highspy or "
                             "scipy is installed; 0: no cover)")
    parser.add_argument("--region-seconds", type=positive_seconds, default=120.0, metavar="S",
                        help=f"{scope}time budget of the region cover (default 120)")


def run(args: argparse.Namespace) -> int:
    """Run ``exactident fdim``; errors propagate to :func:`exactident.cli.main` (bad input exits 2)."""
    from exactident.io.atomic import write_stdout
    from exactident.io.limits import limits_from_args
    from exactident.symmetry.fdim import functional_dimension

    box = None
    from exactident.io.importers.command import load_check_inputs

    case = load_check_inputs([args.case], args, limits_from_args(args))[0]
    if args.box is not None:
        n0 = case.widths[0]
        box = ([args.box[0]] * n0, [args.box[1]] * n0)
    X = case.X

    def work() -> str:  # text only: picklable, as a child process returns it with --timeout
        # a layer graph is read in its compiled form (target dim_free), a plain MLP as it is (target dim)
        network = case.network if case.is_plain else case.compiled
        result = functional_dimension(network, X, box=box, seed=args.seed, search=not args.no_search,
                                      max_boxes=args.max_boxes, lines=args.lines, walk_seconds=args.walk_seconds,
                                      regions=args.regions, region_seconds=args.region_seconds, name=case.name)
        return json.dumps(result.to_dict(), indent=1) + "\n" if args.json else result.render()

    from exactident.budget import run_command_work, timed_out_output

    with showing(None, f"fdim {case.name}") as show:
        outcome = run_command_work(work, args.timeout, on_stage=show)
    text = (timed_out_output("exactident-fdim/1", case.name, args.timeout, outcome, args.json) if outcome.timed_out
            else outcome.value)
    write_stdout(text)
    return 0
