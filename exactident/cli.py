"""Command line: ``exactident check CASE... [--json] [--no-numeric] [--tol T] [--verify-propositions] [--expect]``,
plus ``verify-certificate``, ``crosscheck``, ``generate``, ``suite run|score``, ``survey``, ``explain``,
``design``, ``canonical``, ``equiv`` and ``audit`` (each in its own module).

A thin layer over :func:`exactident.check.check`.  This is the only place
that catches exceptions, with one table of exit statuses for every command
(docs/cli.md): 0 answered (whatever the verdicts; a budget that ran out is
reported in the output); 1 ``equiv``: different orbits; 2 bad input or usage,
or an output that cannot be written, with one line on stderr naming the file
and field; 3 ``verify-certificate``: not valid (``check --expect`` / ``suite
run``: a difference; ``equiv``: undecided); 70 internal error (a bug, a broken
invariant); 130 interrupted (Ctrl-C or SIGTERM; temporary outputs removed).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import NoReturn

from exactident.errors import CaseFormatError, ExactIdentError, InvariantViolation, OutputError, UnsupportedCaseError
from exactident.io.argtypes import looks_like_number, positive_int, positive_number, positive_seconds

__all__ = ["build_parser", "main"]


class _UsageError(Exception):
    pass


class _Version(Exception):
    pass


class _VersionAction(argparse.Action):
    # argparse's own "version" action exits the process; main() must return 0 instead
    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        raise _Version()


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse would exit(2) itself, with usage text
        raise _UsageError(f"{self.prog}: {message}")

    def _parse_optional(self, arg_string):
        # "-3:3" and "-1/2" are values (--box -3:3), not options: no option starts with a digit
        if looks_like_number(arg_string):
            return None
        return super()._parse_optional(arg_string)

    def parse_args(self, args=None, namespace=None):
        # argparse reports a subcommand's unknown options from the top parser: name the subcommand
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            words = [getattr(ns, k, None) for k in ("command", "suite_command")]
            prog = " ".join([self.prog, *(w for w in words if isinstance(w, str))])
            raise _UsageError(f"{prog}: unrecognized arguments: {' '.join(extras)}")
        return ns


def _known_expected_fields(path: str, expected: dict) -> None:
    """A misspelt key of an ``expected`` block would be compared with nothing: bad input (exit 2)."""
    from exactident.verify.claims import REPORT_FIELDS

    known = (*REPORT_FIELDS, "architecture")  # ``architecture``: reports of layer-graph cases
    for key in expected:
        if key not in known:
            raise CaseFormatError(path, f"expected.{key}", f"not a report field (known: {', '.join(known)})")


class _LazySubParsers(argparse._SubParsersAction):
    # A subcommand's parser and options (and the modules defining them) are made only when that subcommand
    # is parsed: ``exactident check`` imports nothing of ``explain``, ``suite`` or ``symmetry`` and builds
    # one subparser, not fifteen; ``exactident -h`` lists every subcommand from its help line alone.
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fillers: dict[str, str] = {}

    def add_lazy(self, name: str, help_line: str, where: str) -> None:
        """Register subcommand ``name`` (its help line now, its parser by :func:`_fill_subparser`)."""
        self._choices_actions.append(self._ChoicesPseudoAction(name, (), help_line))
        self._name_parser_map[name] = None  # a valid choice; the parser is made when it is chosen
        self.fillers[name] = where

    def __call__(self, parser, namespace, values, option_string=None):
        _fill_subparser(self, values[0])
        super().__call__(parser, namespace, values, option_string)


def _fill_subparser(sub: argparse._SubParsersAction, name: str) -> None:
    """Make subcommand ``name``'s parser with its options (once), importing the module that defines them."""
    fillers = getattr(sub, "fillers", {})
    if name not in fillers:  # an unknown name: argparse reports it
        return
    where = fillers.pop(name)
    subparser = sub._parser_class(prog=f"{sub._prog_prefix} {name}")  # as add_parser names it
    sub._name_parser_map[name] = subparser
    module, _, function = where.partition(":")
    getattr(importlib.import_module(module), function)(subparser)


# name, help line, "module:function" adding the subcommand's options (imported when that subcommand runs)
_SUBCOMMANDS = (
    ("check", "decide identifiability of each case", "exactident.cli:_add_check_arguments"),
    ("verify-certificate", "re-check a report's certificate independently",
     "exactident.cli:_add_verify_arguments"),
    ("crosscheck", "float tolerances against exact ranks, per case and per suite",
     "exactident.crosscheck.command:add_arguments"),
    ("import", "convert a model file (and a sample) exactly into a case file",
     "exactident.io.importers.command:add_arguments"),
    ("generate", "write generated cases with their expected blocks", "exactident.suites.cli_generate:add_arguments"),
    ("suite", "run a suite against its expected blocks, or score a tool", "exactident.suites.cli_suite:add_arguments"),
    ("survey", "distribution of R_Gamma over random parameters", "exactident.suites.cli_survey:add_arguments"),
    ("explain", "per parameter and per neuron, what the sample determines; the kernel of Gamma, readable",
     "exactident.explain.command:add_arguments"),
    ("design", "which samples identify theta, which new points would, or why none can",
     "exactident.explain.design_command:add_arguments"),
    ("canonical", "the exact canonical form under positive rescaling and permutation of hidden neurons",
     "exactident.symmetry.command:add_canonical_arguments"),
    ("equiv", "are two networks in the same orbit; where they differ; exact alignment error",
     "exactident.symmetry.command:add_equiv_arguments"),
    ("audit", "extraction audit: identifiability from the queries, per neuron; the extracted model's error",
     "exactident.symmetry.command:add_audit_arguments"),
    ("fdim", "the functional dimension of theta, certified both ways",
     "exactident.symmetry.fdim_command:add_arguments"),
    ("hidden-symmetries", "how often random parameters have hidden symmetries (Grigsby, Lindsey, Rolnick), exactly",
     "exactident.symmetry.glr_command:add_arguments"),
    ("track-plot", "plot a training run's tracked ranks (JSON Lines of exactident.track)",
     "exactident.track.command:add_arguments"),
)


def build_parser() -> argparse.ArgumentParser:
    """The ``exactident`` argument parser with its subcommands (usage errors raise, never exit).

    Returns
    -------
    argparse.ArgumentParser
        Its ``error`` raises an internal usage error that :func:`main` turns
        into exit status 2 with one line on stderr.  A subcommand's options are
        added when that subcommand is parsed.
    """
    parser = _Parser(prog="exactident", description="Exact local identifiability of ReLU networks "
                     "(Bona-Pellissier, Malgouyres, Bachoc, NeurIPS 2022).")
    parser.register("action", "parsers", _LazySubParsers)
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    assert isinstance(sub, _LazySubParsers)
    for name, help_line, where in _SUBCOMMANDS:
        sub.add_lazy(name, help_line, where)
    return parser


def _add_check_arguments(p: argparse.ArgumentParser) -> None:
    from exactident.io.importers.command import add_check_arguments
    from exactident.io.limits import add_limit_arguments

    p.add_argument("cases", nargs="+", metavar="CASE",
                   help="case files (exactident-case/1 JSON), folders of them (their *.json files), "
                        "or model files with --sample")
    p.add_argument("--json", action="store_true", help="print exactident-report/1 JSON")
    p.add_argument("--no-numeric", action="store_true", help="skip the float64 cross-check")
    p.add_argument("--pipelines", default=None, metavar="NAME,...",
                   help="more float pipelines in the cross-check: stored-dtype, kinks, full-jacobian, "
                        "float32, torch, or all (default: the float64 one only)")
    p.add_argument("--tol", type=positive_number, default=None,
                   help="absolute SVD tolerance for the float Gamma (default: numpy's rule)")
    p.add_argument("--verify-propositions", action="store_true",
                   help="check Prop. 1 (f = alpha phi) and Prop. 10 (Gamma = A Dpsi) exactly")
    p.add_argument("--all-ranks", action="store_true",
                   help="compute rank_a even when C_S already decides the verdict")
    p.add_argument("--exact-ranks", action="store_true",
                   help="certify rank_gamma exactly even when a certified interval decides the verdict "
                        "(default: exact whenever its estimated cost is small)")
    p.add_argument("--verdict-first", action="store_true",
                   help="report a certified interval for rank_gamma whenever it decides the verdict, "
                        "even when the exact rank would be cheap")
    p.add_argument("--max-resolutions", type=positive_int, default=4096, metavar="N",
                   help="stop enumerating tie resolutions beyond N (verdict inconclusive)")
    p.add_argument("--rtol", type=positive_number, default=None,
                   help="relative SVD tolerance (times sigma_max) for the float Gamma")
    add_check_arguments(p)  # CASE may also be a model file (.onnx, .pt, .keras, ...) with --sample DATA
    p.add_argument("--expect", action="store_true",
                   help="compare each report with the case's expected block (exit 3 when a field differs)")
    add_limit_arguments(p)  # --max-file-size, --max-digits, --max-number-digits
    p.add_argument("--timeout", type=positive_seconds, default=None, metavar="SECONDS",
                   help="wall-time budget per case: past it the case is inconclusive "
                        "('time budget exhausted at <stage>')")
    p.add_argument("--estimate", action="store_true",
                   help="print each case's cost estimate (stages, rough time) and stop, analysing nothing")
    p.add_argument("--jsonl", default=None, metavar="FILE",
                   help="also write each report to FILE as one JSON line as soon as its case finishes")
    p.add_argument("--certify", choices=["full", "none"], default="full",
                   help="full (default): certified ranks; none: Monte Carlo ranks, labelled with "
                        "their error probability")
    p.add_argument("--explain", action="store_true",  # exactident.explain.command.explain_reports
                   help="also classify every parameter, diagnose every hidden neuron and print the kernel of "
                        "Gamma (report fields parameters, neurons, kernel_basis, explanation)")


def _add_verify_arguments(v: argparse.ArgumentParser) -> None:
    from exactident.io.importers.command import add_check_arguments
    from exactident.io.limits import add_limit_arguments, add_work_limit_arguments

    v.add_argument("case", metavar="CASE", help="a case file, or a model file with --sample")
    v.add_argument("report", metavar="REPORT.json")
    add_limit_arguments(v)
    add_check_arguments(v)  # --sample and the model options, as for check
    add_work_limit_arguments(v)  # --max-exact-entries, --max-resolutions: caps on the verifier's own work


def _cmd_verify_certificate(args: argparse.Namespace) -> int:
    from exactident.io.importers.command import is_model_file, load_check_inputs, refuse_model_options
    from exactident.io.limits import limits_from_args, work_limits_from_args
    from exactident.verify.certificate import run_verify_certificate

    limits = limits_from_args(args)
    case = None
    if is_model_file(args.case, args.format):  # imported with --sample, as check does
        case = load_check_inputs([args.case], args, limits)[0]
    elif args.sample is not None or getattr(args, "sample_rows", None) is not None:
        load_check_inputs([args.case], args, limits)  # a case file holds its sample: the loader's one-line refusal
    else:
        refuse_model_options([args.case], args)  # and its network: --config, --reference, ... are refused too
    return run_verify_certificate(args.case, args.report, limits, work_limits_from_args(args), case=case)


def _cmd_crosscheck(args: argparse.Namespace) -> int:
    from exactident.crosscheck.command import run

    return run(args)


def _cmd_import(args: argparse.Namespace) -> int:
    from exactident.io.importers.command import run

    return run(args)


def _cmd_suites(args: argparse.Namespace) -> int:
    from exactident.suites import cli_generate, cli_suite, cli_survey

    return {"generate": cli_generate, "suite": cli_suite, "survey": cli_survey}[args.command].run(args)


def _cmd_explain(args: argparse.Namespace) -> int:
    from exactident.explain import command, design_command

    return {"explain": command, "design": design_command}[args.command].run(args)


def _cmd_symmetry(args: argparse.Namespace) -> int:
    from exactident.symmetry import command

    return {"canonical": command.run_canonical, "equiv": command.run_equiv, "audit": command.run_audit}[args.command](
        args)


def _cmd_fdim(args: argparse.Namespace) -> int:
    from exactident.symmetry import fdim_command, glr_command

    return {"fdim": fdim_command, "hidden-symmetries": glr_command}[args.command].run(args)


def _cmd_check(args: argparse.Namespace) -> int:
    from exactident.io.atomic import write_stdout
    from exactident.io.importers.command import load_check_inputs
    from exactident.io.limits import limits_from_args
    from exactident.io.report import render_table, reports_to_json

    limits = limits_from_args(args)
    if getattr(args, "verdict_first", False) and (args.exact_ranks or args.all_ranks):
        raise UnsupportedCaseError("--verdict-first asks for an interval that --exact-ranks and --all-ranks refuse")
    if args.pipelines is not None:
        if args.no_numeric:
            raise UnsupportedCaseError("--pipelines adds float pipelines to the cross-check that --no-numeric skips")
        from exactident.numeric.block import parse_pipelines

        parse_pipelines(args.pipelines)  # an unknown name is bad usage, before any file is read
    from exactident.run_cases import check_cases, options_from_args, print_estimates

    options = options_from_args(args)  # every case's options, built and validated once
    # a folder: its *.json files, as crosscheck; anything else as given (a case or a model file)
    if any(os.path.isdir(p) for p in args.cases):
        from exactident.crosscheck.command import expand_paths
    paths = [str(q) for p in args.cases for q in (expand_paths([p]) if os.path.isdir(p) else [p])]
    cases = load_check_inputs(paths, args, limits)  # validate (and import) everything before any work
    if args.expect:
        for path, c in zip(paths, cases):
            if c.expected is None:
                raise CaseFormatError(path, "expected", "missing: --expect needs the case's expected block")
            _known_expected_fields(path, c.expected)
    reports = []
    if args.estimate:
        print_estimates(cases, args)
        return 0

    for path, report in check_cases(paths, cases, args, options):
        if isinstance(report, UnsupportedCaseError):  # docs/cli.md: the message names the file (once)
            named = str(report).startswith(f"{path}: ")
            raise UnsupportedCaseError(str(report) if named else f"{path}: {report}") from None
        reports.append(report)
    as_list = len(paths) > 1 or any(os.path.isdir(p) for p in args.cases)  # a folder: an array, even of one
    explained = ""
    if args.explain:
        from exactident.explain.command import explain_reports

        explained = explain_reports(cases, reports)  # adds the report fields; the text is for the table
    write_stdout(reports_to_json(reports, as_list=as_list) if args.json else render_table(reports) + explained)
    if args.expect:
        from exactident.suites.compare import expect_lines

        lines = expect_lines(paths, [c.expected or {} for c in cases], [r.to_dict() for r in reports])
        print("".join(lines).rstrip("\n") or f"expect: {len(cases)} case(s) agree with their expected blocks",
              file=sys.stderr)
        return 3 if lines else 0
    return 0


def _silence_stdout() -> None:
    # The unwritten buffer would fail again at exit ("Exception ignored ..."): drop it.
    out = sys.stdout
    if out is not sys.__stdout__ or out is None:  # a replaced stream (tests, embedding): leave it alone
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass


#: Exit statuses, one table for every command (docs/cli.md, "Exit status").
EXIT_OK, EXIT_DIFFERENT, EXIT_USAGE, EXIT_INVALID, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 70, 130


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises ``KeyboardInterrupt`` while the block runs (main thread only): exit 130, as Ctrl-C.

    The unwinding removes temporary output files (:mod:`exactident.io.atomic`) and kills a child
    analysis process (:func:`exactident.budget.run_isolated`), so nothing is left half-written.
    """
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTERM"):
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except (OSError, ValueError):
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _cmd_track_plot(args: argparse.Namespace) -> int:
    from exactident.track.command import run

    return run(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (docs/cli.md, "Exit status").

    0 answered; 1 ``equiv``: different orbits; 2 bad input, usage, or an output that cannot be
    written; 3 ``verify-certificate``: not valid (``check --expect``, ``suite run``: a difference;
    ``equiv``: undecided); 70 internal error (a bug); 130 interrupted (Ctrl-C or SIGTERM).
    """
    with _sigterm_interrupts():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    args = None
    try:
        parser = build_parser()
        if not (sys.argv[1:] if argv is None else argv):  # name the commands, not just "required: command"
            commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
            raise _UsageError(f"exactident: a command is required: {', '.join(commands)} "
                              "(exactident -h describes them)")
        args = parser.parse_args(argv)
        status = {"check": _cmd_check, "verify-certificate": _cmd_verify_certificate,
                  "crosscheck": _cmd_crosscheck, "import": _cmd_import, "generate": _cmd_suites,
                  "suite": _cmd_suites, "survey": _cmd_suites, "explain": _cmd_explain,
                  "design": _cmd_explain, "canonical": _cmd_symmetry, "equiv": _cmd_symmetry,
                  "audit": _cmd_symmetry, "fdim": _cmd_fdim, "hidden-symmetries": _cmd_fdim,
                  "track-plot": _cmd_track_plot}[args.command](args)
        try:
            sys.stdout.flush()  # here, not at interpreter exit, so a full disk is named
        except OSError as exc:
            raise OutputError("<stdout>", exc) from None
        return status
    except _Version:
        from exactident import __version__

        print(f"exactident {__version__}")
        return EXIT_OK
    except _UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (CaseFormatError, UnsupportedCaseError) as exc:
        # "this command" (a plain-MLP-only step reached with a layer graph) is named here, where it is known
        command = f"{args.command}: " if args is not None and "this command works on" in str(exc) else ""
        print(f"error: {command}{exc}", file=sys.stderr)
        return EXIT_USAGE
    except OutputError as exc:  # nothing was written (atomic outputs): the file named cannot be written
        if exc.target == "<stdout>":
            _silence_stdout()
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except InvariantViolation as exc:
        print(f"internal error: invariant violated: {exc}", file=sys.stderr)
        return EXIT_INTERNAL
    except ExactIdentError as exc:
        print(f"internal error: {exc}", file=sys.stderr)
        return EXIT_INTERNAL
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        print(f"internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_INTERNAL
