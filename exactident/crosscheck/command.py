"""``exactident crosscheck PATH...``: float tolerances against exact ranks, per case and per suite.

PATHs are case files, folders (their ``*.json`` files, not recursive, in
name order) or model files with ``--sample`` (the model options of ``check``).
Every case is loaded and validated before any work, so bad
input exits 2 naming the file and field with nothing written.  Per case the
exact ranks and verdict are set beside each tolerance policy's
(:mod:`exactident.crosscheck.core`); for a suite, a confusion table per policy,
the wrong verdicts and ranks, and the relative tolerance band right for every
case.  ``--json`` prints all of it; ``--csv FILE`` writes one row per
(case, policy); ``--plot FILE`` draws singular values (one case) or bands
(suite).  Output paths are checked before any work (an output that resolves
to an input case file, ``--csv`` and ``--plot`` naming one file, a symlink loop
or a missing directory is bad usage); every output is rendered before any is
written, and the files are replaced together or not at all
(:func:`exactident.io.atomic.write_outputs`), so a failing run leaves existing
files untouched.  ``--json`` has no timings unless ``--timings`` is given, so it
is byte-reproducible.

Called by :mod:`exactident.cli`; calls :mod:`exactident.crosscheck.core` and
:mod:`exactident.crosscheck.plot`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from exactident.crosscheck.core import CaseCrosscheck, crosscheck_case, summarize
from exactident.crosscheck.render import render_text, to_csv
from exactident.errors import CaseFormatError
from exactident.io.atomic import check_writable, write_outputs, write_stdout
from exactident.io.case import Case, require_case_files
from exactident.io.limits import add_limit_arguments, limits_from_args
from exactident.numeric.pipelines import parse_pipeline
from exactident.numeric.tolerance import default_policies

__all__ = ["add_arguments", "expand_paths", "run"]


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
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="case files, folders of *.json cases, or model files with --sample")
    parser.add_argument("--json", action="store_true", help="print the per-case results and summary as JSON")
    parser.add_argument("--csv", metavar="FILE", help="write one row per (case, policy) to FILE")
    parser.add_argument("--plot", metavar="FILE", help="draw singular values / bands to FILE (needs matplotlib)")
    parser.add_argument("--tol", type=_positive, default=None, help="also judge an absolute tolerance on Gamma")
    parser.add_argument("--rtol", type=_positive, default=None, help="also judge a relative tolerance")
    parser.add_argument("--torch", action="store_true", help="add the PyTorch backend (needs torch)")
    parser.add_argument("--timings", action="store_true",
                        help="include wall-clock seconds per case in --json (off: the JSON is byte-reproducible)")
    parser.add_argument("--certified-bands", action="store_true",
                        help="add certified sigma_r bounds, rounding perturbations and the distance to the "
                             "nearest kink (exact; Gram matrices up to 300)")
    parser.add_argument("--pipeline", action="append", default=[], metavar="NAME",
                        help="emulate a pipeline: numpy, torch-float32, torch-float64, jax, "
                             "functional-dimension[:BATCH] (repeatable)")
    add_limit_arguments(parser)  # --max-file-size, --max-digits, --max-number-digits
    from exactident.io.importers.command import add_check_arguments

    add_check_arguments(parser)  # --sample and the model options, as for check


def expand_paths(paths: Sequence[str]) -> list[Path]:
    """Files as given, folders as their ``*.json`` files in name order, suite manifests left out.

    Not recursive (:func:`exactident.io.case.case_files`).

    Raises
    ------
    CaseFormatError
        A path that does not exist, or a folder without case files.
    """
    out: list[Path] = []
    for text in paths:
        p = Path(text)
        if p.is_dir():
            out.extend(require_case_files(p, recursive=False))
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


def render_extras(results: Sequence[CaseCrosscheck]) -> str:
    """Text of ``--certified-bands`` and ``--pipeline`` per case ("" when neither was asked)."""
    from exactident.crosscheck.certified import render_certified
    from exactident.numeric.pipelines import render_pipeline

    lines: list[str] = []
    for r in results:
        if r.certified is None and not r.pipelines:
            continue
        lines.append(f"case {r.name}: certified conditioning and emulated pipelines")
        if r.certified is not None:
            lines.extend(render_certified(r.certified))
        for d in r.pipelines or []:
            lines.extend(render_pipeline(d))
    return "\n".join(lines) + "\n" if lines else ""


def _check_outputs(args: argparse.Namespace, inputs: Sequence[Path]) -> None:
    """Refuse, before any work, outputs that would clobber an input or each other, or cannot be written.

    Paths are compared after resolving symlinks (:func:`os.path.realpath`); a symlink loop, a
    directory, a missing or unwritable directory is refused here, not after the work
    (:func:`exactident.io.atomic.check_writable`).
    """
    seen: dict[str, str] = {os.path.realpath(p): f"input case file {p}" for p in inputs}
    from exactident.io.importers.command import option_input_files

    for option, given in option_input_files(args):
        seen[os.path.realpath(given)] = f"input {option} {given}"
    for option in ("--csv", "--plot"):
        path = getattr(args, option[2:])
        if not path:
            continue
        problem = check_writable(path)
        if problem is not None:
            raise CaseFormatError(path, option, problem)
        real = os.path.realpath(path)
        if real in seen:
            raise CaseFormatError(path, option, f"is also the {seen[real]}; refusing to overwrite it")
        seen[real] = f"{option} output"


def run(args: argparse.Namespace) -> int:
    """Run the subcommand; exit status as in docs/cli.md (errors propagate to :func:`exactident.cli.main`).

    Every output is rendered before any is written, and they are committed
    together, so a failing run leaves existing files untouched; a failing
    write raises :class:`~exactident.errors.OutputError`.
    """
    plot_fmt = ""
    if args.plot:
        from exactident.crosscheck.plot import plot_format

        plot_fmt = plot_format(args.plot)
    if args.torch:
        from exactident.numeric.torch_backend import import_torch

        import_torch()
    paths = expand_paths(args.paths)
    _check_outputs(args, paths)
    limits = limits_from_args(args)
    from exactident.io.importers.command import load_check_inputs

    cases = load_check_inputs([str(p) for p in paths], args, limits)  # model files imported with --sample
    first: dict[str, str] = {}
    for c in cases:
        if c.name in first:
            raise CaseFormatError(c.source, "name", f"case name {c.name!r} appears twice in this suite "
                                  f"(also in {first[c.name]})")
        first[c.name] = c.source
    policies = default_policies(args.tol, args.rtol, args.torch)
    for name in args.pipeline:  # bad names are usage errors before any work
        parse_pipeline(name)
    results = [crosscheck_case(c, policies, certified=args.certified_bands, pipelines=args.pipeline)
               for c in _progress(cases)]
    summary = summarize(results)
    outputs: list[tuple[str, bytes]] = []
    if args.csv:
        outputs.append((args.csv, to_csv(results).encode("utf-8")))
    if args.plot:
        from exactident.crosscheck.plot import render_case, render_suite

        image = (render_case(results[0], plot_fmt) if len(results) == 1
                 else render_suite(results, summary, plot_fmt))
        outputs.append((args.plot, image))
    if args.json:
        per_case = [r.to_dict() for r in results]
        if not args.timings:  # wall-clock time would make the JSON differ from run to run
            for entry in per_case:
                entry.pop("seconds", None)
        data = {"format": "exactident-crosscheck/1", "cases": per_case, "summary": summary.to_dict()}
        text = json.dumps(data, indent=2) + "\n"
    else:
        text = render_text(results, summary) + render_extras(results)
    # Everything computed: the files are written to temporary files first, then standard output,
    # then all renamed together; any failure before the renames replaces nothing.
    write_outputs(outputs, last_step=lambda: write_stdout(text))
    return 0


