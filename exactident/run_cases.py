"""Run ``check`` over several cases for the CLI: progress, per-case budget, results as they finish.

- Each case runs with :func:`exactident.check.check`; with ``--timeout`` (or on a
  terminal, to keep the display live) it runs in a child process that is killed
  with its whole process group at the deadline (:func:`exactident.budget.run_isolated`),
  and the case's report is ``inconclusive`` with reason
  ``time budget exhausted at <stage>``.
- ``--jsonl FILE``: every report is appended to ``FILE`` as one JSON line as soon as
  its case finishes (flushed and synced), so Ctrl-C or a timeout keeps the cases
  already done.  The file is written in place (not atomically): that is its point.
- On a terminal (stderr is a tty) each case's cost estimate is printed first
  (:mod:`exactident.ranks.estimate`); without ``--timeout``, a case whose estimate is large
  gets the default budget :data:`exactident.ranks.estimate.TERMINAL_BUDGET`, said so.  A
  progress line then shows the case, the stage and the sizes involved, and the
  elapsed time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from exactident.check import CheckOptions, check
from exactident.errors import OutputError, UnsupportedCaseError

__all__ = ["TerminalProgress", "check_cases", "options_from_args", "print_estimates"]


def options_from_args(args: argparse.Namespace) -> CheckOptions:
    """The :class:`~exactident.check.options.CheckOptions` of ``exactident check``'s flags, built once.

    ``--expect`` asks for every rank (``all_ranks``), ``--explain`` for the exact ``rank_gamma``
    (``exact_ranks``).  The per-case budget and the progress line are set per case by
    :func:`check_cases`.

    Raises
    ------
    UnsupportedCaseError
        An option outside its domain (an unknown ``--pipelines`` name).
    """
    return CheckOptions(numeric=not args.no_numeric, tol=args.tol, rtol=args.rtol,
                        verify_propositions=args.verify_propositions, max_resolutions=args.max_resolutions,
                        all_ranks=args.all_ranks or getattr(args, "expect", False),
                        certify=getattr(args, "certify", "full"),
                        exact_ranks=getattr(args, "exact_ranks", False) or getattr(args, "explain", False),
                        verdict_first=getattr(args, "verdict_first", False),
                        pipelines=getattr(args, "pipelines", None))


def _estimate(case: Any, args: argparse.Namespace) -> Any:
    from exactident.ranks.estimate import estimate

    if not case.is_plain:  # the size model is fitted on the plain engine's stages only
        features = ", ".join(case.compiled.features) or "a layer graph"
        raise UnsupportedCaseError(f"{case.source}: --estimate has a cost model for plain ReLU MLPs only, and this "
                                   f"case is a layer graph ({features}): run check without --estimate "
                                   "(--timeout SECONDS bounds it)")
    return estimate(case, numeric=not args.no_numeric, all_ranks=args.all_ranks or getattr(args, "expect", False),
                    max_resolutions=args.max_resolutions, exact_ranks=getattr(args, "exact_ranks", False))


def _terminal_budget(case: Any, args: argparse.Namespace, timeout: float | None) -> float:
    """Print the case's estimate (stderr); its budget: ``--timeout``, else the default when large, else none."""
    from exactident.ranks.estimate import TERMINAL_BUDGET

    if not case.is_plain:  # no cost model for a layer graph: no estimate, no default budget
        return timeout if timeout is not None else math.inf
    est = _estimate(case, args)
    print(est.render(case.name), file=sys.stderr)
    if timeout is not None:
        return timeout
    if est.large:
        print(f"  a default budget of {TERMINAL_BUDGET:.0f} s per case applies on a terminal "
              "(--timeout SECONDS to change it)", file=sys.stderr)
        return TERMINAL_BUDGET
    return math.inf  # a child process, so the display stays live during long FLINT calls


def print_estimates(cases: Sequence[Any], args: argparse.Namespace) -> None:
    """``check --estimate``: each case's cost estimate on stdout, no analysis."""
    from exactident.io.atomic import write_stdout

    write_stdout("".join(_estimate(case, args).render(case.name) + "\n" for case in cases))


def check_cases(paths: Sequence[str], cases: Sequence[Any], args: argparse.Namespace,
                options: CheckOptions | None = None) -> Iterator[tuple[str, Any]]:
    """Yield ``(path, report)`` per case, in order (``report`` may be an ``UnsupportedCaseError``).

    ``options``: the options of every case (default :func:`options_from_args`); each case gets its
    budget (``timeout``) and the terminal progress line on top.

    Raises
    ------
    OutputError
        If the ``--jsonl`` file cannot be written.
    """
    jsonl = getattr(args, "jsonl", None)
    fh = None
    if jsonl:
        from exactident.errors import CaseFormatError
        from exactident.io.atomic import check_writable

        problem = check_writable(jsonl)  # before truncating anything: bad usage, exit 2
        if problem:
            raise CaseFormatError(jsonl, "--jsonl", problem)
        from exactident.io.importers.command import option_input_files

        inputs = [*paths, *(path for _, path in option_input_files(args))]
        if any(isinstance(p, str) and os.path.isfile(p) and os.path.samefile(p, jsonl) for p in inputs
               if os.path.exists(jsonl)):
            raise CaseFormatError(jsonl, "--jsonl", "is also an input of this command; refusing to overwrite it")
        try:
            fh = open(jsonl, "w", encoding="utf-8")  # noqa: SIM115 - kept open across cases
        except OSError as exc:
            raise OutputError(jsonl, exc) from None
    try:
        tty = sys.stderr is not None and sys.stderr.isatty()
    except (ValueError, AttributeError):
        tty = False
    timeout = getattr(args, "timeout", None)
    budgets = [timeout] * len(cases)
    if tty:  # the cost estimate before the work, and a default budget when it is large (docs/cli.md)
        budgets = [_terminal_budget(case, args, timeout) for case in cases]
    progress = TerminalProgress(len(cases), enabled=tty)
    options = options if options is not None else options_from_args(args)
    try:
        for path, case, budget in zip(paths, cases, budgets):
            progress.case(case.name)
            try:
                report = check(case, options, timeout=budget, on_stage=progress.stage, on_tick=progress.tick)
            except UnsupportedCaseError as exc:
                yield path, exc
                continue
            progress.done()
            if fh is not None:
                try:
                    fh.write(json.dumps(report.to_dict()) + "\n")
                    fh.flush()
                    os.fsync(fh.fileno())
                except OSError as exc:
                    raise OutputError(str(jsonl), exc) from None
            yield path, report
    finally:
        progress.close()
        if fh is not None:
            with contextlib.suppress(OSError):
                fh.close()


class TerminalProgress:
    """Stage progress of several cases on a terminal (tqdm on stderr); silent elsewhere.

    ``case(name)`` starts a case, ``stage(name, sizes)`` and ``tick()`` update the
    line (elapsed time included), ``done()`` advances the bar, ``close()`` ends it.
    """

    def __init__(self, total: int, enabled: bool) -> None:
        self.bar = None
        self.name = ""
        self.current = ""
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="case", dynamic_ncols=True, leave=False,
                            bar_format="{desc} [{elapsed}, case {n_fmt}/{total_fmt} done]")

    def case(self, name: str) -> None:
        self.name = name
        self.stage("start", {})

    def stage(self, name: str, sizes: dict[str, Any]) -> None:
        if self.bar is None:
            return
        size = " ".join(f"{k}={v}" for k, v in sizes.items())
        self.current = f"{self.name}: {name}" + (f" ({size})" if size else "")
        self.bar.set_description_str(self.current[:110], refresh=True)

    def tick(self) -> None:
        if self.bar is not None:
            self.bar.refresh()

    def done(self) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
