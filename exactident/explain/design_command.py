"""``exactident design CASE [--budget K] [--box LO:HI] [-o NEW_CASE.json] [--seed S] [--json]``.

Prints which prefix and which subsample of the sample already identify theta,
or which new points would (:mod:`exactident.explain.design`), or why no finite
sample can.  With ``-o`` the new case is written atomically: the sample with
the new points, or, when theta is already identifiable, the small identifying
subsample; its verdict is re-derived by :func:`exactident.check.check` and
printed.  The output path is checked before any work (an output that is the
input case, a missing directory: exit 2).  ``--json`` prints the
``exactident-design/1`` object (docs/cli.md).

Called by :mod:`exactident.cli`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys

from exactident.errors import CaseFormatError
from exactident.explain.design import DEFAULT_BUDGET, Design, design
from exactident.explain.points import stderr_progress
from exactident.io.argtypes import non_negative_int, positive_seconds
from exactident.io.atomic import check_writable, write_outputs, write_stdout
from exactident.io.case import dump_case
from exactident.io.limits import add_limit_arguments, limits_from_args
from exactident.io.rationals import add_box_argument
from exactident.io.report import escape_nonprintable

__all__ = ["add_arguments", "render_design", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``exactident design`` (called by :func:`exactident.cli.build_parser`)."""
    from exactident.io.importers.command import add_check_arguments

    parser.add_argument("case", metavar="CASE", help="a case file, or a model file with --sample")
    parser.add_argument("--budget", type=non_negative_int, default=DEFAULT_BUDGET, metavar="K",
                        help=f"add at most K new points (default {DEFAULT_BUDGET})")
    add_box_argument(parser, "new points (default: the sample's bounding box)")
    parser.add_argument("-o", "--output", metavar="NEW_CASE.json", default=None,
                        help="write the new case here (atomically)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the point search and the primes (default 0)")
    parser.add_argument("--json", action="store_true", help="print the exactident-design/1 JSON object")
    parser.add_argument("--timeout", type=positive_seconds, default=None, metavar="SECONDS",
                        help="wall-time budget: past it the output says 'time budget exhausted at <stage>', "
                             "no -o file is written (exit 0)")
    add_limit_arguments(parser)
    add_check_arguments(parser)  # --sample and the model options, as for check


def _short(values, limit: int = 20) -> str:
    shown = ", ".join(str(v) for v in values[:limit])
    return shown + (f", ... ({len(values)} in all)" if len(values) > limit else "")


def _deficit(dim_name: str) -> str:
    """``dim - rank Gamma``: the MLP's kernel dimension; a layer graph's kernel also holds ``S_H``."""
    return "kernel dimension" if dim_name == "dim" else "dim_free - rank Gamma_free ="


def render_design(d: Design) -> str:
    """The terminal view of a :class:`~exactident.explain.design.Design`."""
    N_L, dn = d.widths[-1], d.dim_name
    g = "Gamma" if dn == "dim" else "Gamma_free"  # a layer graph: Gamma_free and dim_free
    verdict = d.verdict or f"C_S fails (rank Gamma = {d.rank_gamma} < dim)"
    rank = "not certified" if d.rank_gamma is None else d.rank_gamma
    lines = [f"{escape_nonprintable(d.name)}: {verdict} (rank {g} = {rank}, {dn} = {d.dim}, "
             f"n = {d.n_samples}, N_L = {N_L}; at least ceil({dn} / N_L) = {d.lower_bound} samples are needed)"]
    lines += [f"  {s}" for s in d.statement]
    if d.prefix:
        p, sh = d.prefix, d.prefix["shorter"]
        proof = (f"rank {g} = {dn} mod p = {p['prime']}" if "prime" in p else "exact rank")
        why = (f"rank {g} <= {sh['rank_gamma_at_most']} < {dn} by shape" if sh["proof"] == "shape"
               else f"exact rank {g} = {sh['rank_gamma']} < {dn}")
        lines.append(f"  smallest identifying prefix: the first {p['length']} samples ({proof}); "
                     f"the first {sh['length']}: {why}")
    if d.subsample:
        s = d.subsample
        lines.append(f"  identifying subsample: {s['size']} samples (lower bound {s['lower_bound']}), "
                     f"indices {_short(s['indices'])}")
    if d.points:
        pts = d.points
        lines.append(f"  new points (seed {pts['seed']}, budget {pts['budget']}, {pts['tried']} candidates tried): "
                     f"{len(pts['added'])} added, {_deficit(dn)} {sum(pts['nullity_before'])} -> "
                     f"{sum(pts['nullity_after'])}")
        for k, e in enumerate(pts["added"][:12]):
            act = ", ".join(f"({l},{v})" for l, v in e["active"]) or "-"
            lines.append(f"    x{k} = ({', '.join(e['x'])}): +{e['gain']} rank; active at {act}")
        if len(pts["added"]) > 12:
            lines.append(f"    ... ({len(pts['added']) - 12} more in --json)")
    if d.new_case is not None and d.new_report is not None:
        nr = d.new_report
        lines.append(f"  new case {escape_nonprintable(d.new_case.name)} ({nr.n_samples} samples): check says "
                     f"{nr.verdict}: {escape_nonprintable(nr.reason)}")
    lines.append(f"  ({d.seconds:.2f}s)")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    """Run ``exactident design``; exit status as in docs/cli.md (errors propagate to :func:`exactident.cli.main`)."""
    if args.output:
        problem = check_writable(args.output)
        if problem is not None:
            raise CaseFormatError(args.output, "-o", problem)
        from exactident.io.importers.command import option_input_files

        for option, path in [("CASE", args.case), *option_input_files(args)]:
            if isinstance(path, str) and os.path.exists(path) and os.path.exists(args.output) \
                    and os.path.samefile(path, args.output):
                raise CaseFormatError(args.output, "-o", f"is also the input {option}; refusing to overwrite it")
    from exactident.io.importers.command import load_check_inputs

    case = load_check_inputs([args.case], args, limits_from_args(args))[0]
    box = None
    if args.box is not None:
        n0 = (case.network if case.is_plain else case.compiled).widths[0]  # any network: its input size
        box = ([args.box[0]] * n0, [args.box[1]] * n0)
    tty = getattr(sys.stderr, "isatty", lambda: False)()

    def work() -> tuple[str, str | None, str]:
        # picklable results only (a child process returns them with --timeout)
        from exactident.budget import listening

        def show(name: str, sizes: dict[str, object]) -> None:  # every stage, on a terminal only
            stderr_progress(name.removeprefix("design: ") + "".join(f" {k}={v}" for k, v in sizes.items()))

        with listening(show) if tty else contextlib.nullcontext():
            d = design(case, budget=args.budget, box=box, seed=args.seed, progress=stderr_progress if tty else None)
        if tty and d.points:
            print(file=sys.stderr)
        new = dump_case(d.new_case) if args.output and d.new_case is not None else None
        note = ""
        if args.output:
            note = (f"wrote {args.output}: {d.new_case.name}, {len(d.new_case.X)} samples\n" if d.new_case is not None
                    else f"nothing written to {args.output}: no new case\n")
        return (json.dumps(d.to_dict(), indent=2) + "\n" if args.json else render_design(d) + note), new, note

    from exactident.budget import run_command_work, timed_out_output

    outcome = run_command_work(work, args.timeout)
    if outcome.timed_out:  # an answer: the budget ran out (exit 0); no -o file is written
        new_case_text, note = None, (f"nothing written to {args.output}: time budget exhausted\n" if args.output
                                     else "")
        text = timed_out_output("exactident-design/1", case.name, args.timeout, outcome, args.json) + (
            "" if args.json else note)
    else:
        text, new_case_text, note = outcome.value
    outputs = [(args.output, new_case_text.encode("utf-8"))] if args.output and new_case_text is not None else []
    write_outputs(outputs, last_step=lambda: write_stdout(text))
    if args.json and note:
        print(note.rstrip("\n"), file=sys.stderr)
    return 0
