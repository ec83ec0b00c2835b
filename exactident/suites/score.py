"""Scoring another tool against a suite: accuracy per field and per family, the wrong cases listed.

A tool is a function ``path -> dict`` (the case file's path; the dict holds any
of ``verdict``, ``rank_gamma``, ``rank_a``), or a command run once per case
(:func:`command_tool`: ``'python mytool.py {case}'`` printing one JSON object).

Counting rule: a field is scored on a case when the case's ``expected``
block has it (not null) and the tool reported that field on at least one
case of the run (a tool that never gives ``rank_a`` is not marked wrong
for it).  A case where the tool failed (non-zero exit, timeout, no JSON
object, an exception) counts as wrong on every scored field.  Values must
match exactly (``"identifiable"``, integers).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exactident.errors import CaseFormatError, UnsupportedCaseError
from exactident.io.case import load_case, require_case_files
from exactident.suites.compare import compare
from exactident.suites.render import table

__all__ = ["SCORED_FIELDS", "Score", "command_tool", "score"]

#: Fields a tool may report and be scored on (``suite score --fields`` may narrow them).
SCORED_FIELDS: tuple[str, ...] = ("verdict", "rank_gamma", "rank_a")


class ToolFailed(Exception):
    """The scored tool failed on one case (recorded, never fatal)."""


@dataclass
class Score:
    """Per-case outcomes and the accuracies derived from them.

    ``cases`` rows: ``{"file", "family", "got", "error", "wrong", "scored"}``,
    ``wrong`` a list of ``[field, expected, got]``.
    """

    fields: tuple[str, ...]
    cases: list[dict[str, Any]]

    def by_field(self) -> dict[str, list[int]]:
        """``{field: [correct, scored]}``."""
        out = {f: [0, 0] for f in self.fields}
        for c in self.cases:
            wrong = {w[0] for w in c["wrong"]}
            for f in c["scored"]:
                out[f][1] += 1
                out[f][0] += f not in wrong
        return out

    def by_family(self) -> dict[str, dict[str, list[int]]]:
        """``{family: {field: [correct, scored]}}``."""
        out: dict[str, dict[str, list[int]]] = {}
        for c in self.cases:
            fam = out.setdefault(c["family"], {f: [0, 0] for f in self.fields})
            wrong = {w[0] for w in c["wrong"]}
            for f in c["scored"]:
                fam[f][1] += 1
                fam[f][0] += f not in wrong
        return dict(sorted(out.items()))

    def failed_by_family(self) -> dict[str, list[int]]:
        """``{family: [failed, cases]}``: cases where the tool gave no answer (an error), per family."""
        out: dict[str, list[int]] = {}
        for c in self.cases:
            pair = out.setdefault(c["family"], [0, 0])
            pair[0] += c["error"] is not None
            pair[1] += 1
        return dict(sorted(out.items()))

    @property
    def usable(self) -> bool:
        """Did the tool answer at least one scored field on at least one case?  (False: a bad ``--tool``.)"""
        return bool(self.fields)

    def wrong_cases(self) -> list[dict[str, Any]]:
        return [c for c in self.cases if c["wrong"] or c["error"]]

    def to_dict(self) -> dict[str, Any]:
        return {"format": "exactident-score/1", "fields": list(self.fields), "by_field": self.by_field(),
                "by_family": self.by_family(), "failed_by_family": self.failed_by_family(), "cases": self.cases}

    def render(self) -> str:
        def cell(pair: list[int]) -> str:
            return "-" if not pair[1] else f"{pair[0]}/{pair[1]} ({100 * pair[0] / pair[1]:.0f}%)"

        failed = self.failed_by_family()
        n_failed = sum(v[0] for v in failed.values())
        extra = ["failed"] if n_failed else []  # a failed case is also wrong on every scored field

        def fail_cell(pair: list[int]) -> list[str]:
            return [f"{pair[0]}/{pair[1]}"] if n_failed else []

        lines = table(["family", *self.fields, *extra],
                      [[fam, *(cell(v[f]) for f in self.fields), *fail_cell(failed[fam])]
                       for fam, v in self.by_family().items()]
                      + [["all", *(cell(self.by_field()[f]) for f in self.fields),
                          *fail_cell([n_failed, len(self.cases)])]])
        bad = self.wrong_cases()
        if bad:
            lines += ["", "wrong cases:"]
            for c in bad:
                if c["error"]:
                    lines.append(f"  {c['file']}: tool failed: {c['error']}")
                for f, want, got in c["wrong"]:
                    if not c["error"]:
                        lines.append(f"  {c['file']}: {f}: expected {json.dumps(want)}, got {json.dumps(got)}")
        if not self.fields:
            lines.append("the tool reported none of the scored fields")
        return "\n".join(lines) + "\n"


def command_tool(template: str, timeout: float | None = None) -> Callable[[str], dict[str, Any]]:
    """A tool that runs ``template`` with ``{case}`` replaced by the case file's path (no shell).

    Raises
    ------
    UnsupportedCaseError
        The template is empty, unbalanced in quotes, or has no ``{case}``.

    Examples
    --------
    >>> command_tool("mytool --json")
    Traceback (most recent call last):
    ...
    exactident.errors.UnsupportedCaseError: --tool: the command must contain {case} (the case file's path)
    """
    try:
        tokens = shlex.split(template)
    except ValueError as exc:
        raise UnsupportedCaseError(f"--tool: cannot split the command ({exc})") from None
    if not tokens or not any("{case}" in t for t in tokens):
        raise UnsupportedCaseError("--tool: the command must contain {case} (the case file's path)")

    def tool(path: str) -> dict[str, Any]:
        argv = [t.replace("{case}", path) for t in tokens]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ToolFailed(str(exc)) from None
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or [""])[-1]
            raise ToolFailed(f"exit status {proc.returncode}{': ' + last if last else ''}")
        out = proc.stdout.strip()
        for text in (out, (out.splitlines() or [""])[-1]):
            try:
                value = json.loads(text)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
        raise ToolFailed(f"did not print a JSON object (stdout: {out[:80]!r})")

    return tool


def _suite_paths(suite: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[Path]:
    if isinstance(suite, (str, os.PathLike)):
        root = Path(suite)
        if root.is_dir():
            return require_case_files(root)
        if root.is_file():
            return [root]
        raise CaseFormatError(str(suite), "", "no such file or folder")
    return [Path(p) for p in suite]


def score(fn: Callable[[str], Mapping[str, Any]], suite: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
          *, fields: Sequence[str] = SCORED_FIELDS, jobs: int = 1,
          progress: Callable[[int, str], Any] | None = None) -> Score:
    """Score ``fn`` on every case of ``suite`` (a suite folder, a case file, or a list of case files).

    Parameters
    ----------
    fn : callable path -> dict
        Called with each case file's path (``str``); returns any of ``verdict``,
        ``rank_gamma``, ``rank_a``.  Exceptions count as a failure on that case.
    suite : path or list of paths
    fields : sequence of str
        Fields to score, among those the tool reports.
    jobs : int
        Cases run concurrently (threads; for command tools, processes run in parallel).

    Returns
    -------
    Score

    Raises
    ------
    CaseFormatError
        A missing suite, a malformed case file, or a case without ``expected``.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "a.json").write_text('{"format": "exactident-case/1", "name": "a", "widths": [1, 1], '
    ...     '"weights": [[["1"]]], "biases": [["0"]], "sample": [[1], [2]], "expected": {"verdict": "identifiable"}}')
    >>> s = score(lambda path: {"verdict": "identifiable"}, folder)
    >>> s.by_field()
    {'verdict': [1, 1]}
    """
    from exactident.suites.progress import Progress

    paths = _suite_paths(suite)
    cases = [load_case(p) for p in paths]
    for p, c in zip(paths, cases):
        if c.expected is None:
            raise CaseFormatError(str(p), "expected", "missing: scoring needs the case's expected block")
    root = Path(suite) if isinstance(suite, (str, os.PathLike)) and Path(suite).is_dir() else None
    bar = (progress or (lambda total, desc: Progress(total, desc)))(len(paths), "suite score")

    def one(path: Path) -> tuple[dict[str, Any] | None, str | None]:
        try:
            got = fn(str(path))
            if not isinstance(got, Mapping):
                raise ToolFailed(f"returned {type(got).__name__}, not a mapping")
            return dict(got), None
        except Exception as exc:  # the scored tool's failure is data, not our error
            return None, (str(exc) if isinstance(exc, ToolFailed) else f"{type(exc).__name__}: {exc}")
        finally:
            bar.update()

    try:
        if jobs > 1:
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                outcomes = list(pool.map(one, paths))
        else:
            outcomes = [one(p) for p in paths]
    finally:
        bar.close()
    reported = tuple(f for f in fields if any(got and got.get(f) is not None for got, _ in outcomes))
    rows = []
    for path, case, (got, error) in zip(paths, cases, outcomes):
        expected = case.expected or {}
        scored = [f for f in reported if expected.get(f) is not None]
        if error is not None:
            wrong = [[f, expected[f], None] for f in scored]
        else:
            wrong = [list(d) for d in compare(expected, got or {}, scored)]
        family = str((case.generator or {}).get("family") or (path.parent.name if root and path.parent != root
                                                                else "-"))
        rows.append({"file": path.relative_to(root).as_posix() if root else str(path), "family": family,
                     "got": {f: (got or {}).get(f) for f in reported} if got is not None else None,
                     "error": error, "wrong": wrong, "scored": scored})
    return Score(reported, rows)
