"""``suite run``: recompute every case of a suite, compare with ``expected``, keep results as they arrive.

Workers compute; only the client compares and writes.  A worker runs
:func:`check_case_text` on the case file's *text* (so a remote Dask worker
needs exactident installed, not the files) and returns the report's scalar
fields, or an error string: one bad case never kills a worker.  The client
compares the chosen fields (:func:`~exactident.suites.compare.compare`) and
appends one JSON line per case to ``--out`` as soon as it arrives, keyed by
the SHA-256 of the case file (:func:`~exactident.suites.compare.case_key`),
so an interrupted run keeps what it finished and ``--resume`` skips it.
The client holds an exclusive ``flock`` on ``--out`` for the whole run, so a
second run on the same file is refused (exit 2) instead of duplicating lines.

Execution: ``jobs == 1`` runs in this process; otherwise a Dask
``LocalCluster`` of ``jobs`` single-threaded worker processes, or, with
``scheduler``, an existing Dask distributed cluster.  A worker process that
dies (segfault, out of memory) is restarted by its nanny and the scheduler
re-runs its tasks elsewhere (up to Dask's ``allowed-failures``, default 3);
a case that still fails is recorded as an ``error``, never fatal.
"""

from __future__ import annotations

import decimal
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exactident.errors import CaseFormatError, OutputError, UnsupportedCaseError
from exactident.io.case import load_case, require_case_files
from exactident.io.limits import DEFAULT_LIMITS, read_text
from exactident.suites.compare import DEFAULT_FIELDS, REPORT_SCALARS, case_key, compare
from exactident.suites.manifest import read_manifest

__all__ = ["SuiteCase", "SuiteRun", "check_case_text", "check_chunk", "chunk_size", "load_suite", "read_results",
           "run_suite"]

#: Result-file line format.
RESULT_FORMAT = "exactident-suite-result/1"
#: How long ``--scheduler`` waits for the scheduler to answer.
CONNECT_TIMEOUT = "20s"


@dataclass
class SuiteCase:
    """One case of a suite, as the client holds it."""

    rel: str
    key: str
    text: str
    name: str
    family: str
    expected: dict[str, Any]


@dataclass
class SuiteRun:
    """What a run found: one row per case (in suite order) and how it ran."""

    rows: list[dict[str, Any]]
    fields: tuple[str, ...]
    mode: str
    seconds: float
    resumed: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def failing(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["status"] != "agree"]

    @property
    def ok(self) -> bool:
        return not self.failing


def load_suite(folder: str) -> tuple[list[SuiteCase], dict[str, Any] | None]:
    """Read and validate every case of a suite folder (and its manifest, if any) before any work.

    Raises
    ------
    CaseFormatError
        Missing folder, no case file, a malformed case, a case without
        ``expected``, or two cases with one name.
    """
    root = Path(folder)
    if not root.is_dir():
        raise CaseFormatError(folder, "", "no such folder (a suite is a folder of case files)")
    manifest = read_manifest(root)
    paths = require_case_files(root)
    cases = []
    seen: dict[str, str] = {}
    for path in paths:
        case = load_case(path)
        if case.expected is None:
            raise CaseFormatError(str(path), "expected", "missing: a suite case needs its expected block")
        if case.name in seen:
            raise CaseFormatError(str(path), "name",
                                  f"case name {case.name!r} appears twice (also in {seen[case.name]})")
        seen[case.name] = str(path)
        data = path.read_bytes()
        family = str((case.generator or {}).get("family", path.parent.name if path.parent != root else "-"))
        text = read_text(path, DEFAULT_LIMITS.max_bytes)  # as load_case read it (gunzipped, BOM dropped)
        cases.append(SuiteCase(path.relative_to(root).as_posix(), case_key(data), text,
                               case.name, family, case.expected))
    return cases, manifest


def _json_int(text: str) -> int | decimal.Decimal:
    return int(text) if len(text) < 4000 else decimal.Decimal(text)


def check_case_text(text: str, source: str) -> dict[str, Any]:
    """The worker: analyse one case file's text; ``{"report": {...}, "seconds": s}`` or ``{"error": ...}``.

    Exact ranks for every verdict (``all_ranks=True``), no float cross-check.
    Never raises for a bad case: the error is returned, so the worker lives on.
    """
    from exactident.check import check
    from exactident.io.case import parse_case
    from exactident.io.rationals import NonFinite

    start = time.perf_counter()
    try:
        obj = json.loads(text, parse_float=decimal.Decimal, parse_int=_json_int, parse_constant=NonFinite)
        report = check(parse_case(obj, source), numeric=False, all_ranks=True).to_dict()
        return {"report": {k: report[k] for k in REPORT_SCALARS if k in report},
                "seconds": round(time.perf_counter() - start, 4)}
    except Exception as exc:  # one failing case must not take the worker down
        return {"error": f"{type(exc).__name__}: {exc}", "seconds": round(time.perf_counter() - start, 4)}


def check_chunk(work: Callable[[str, str], dict[str, Any]], items: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """A Dask task: ``work`` on a few cases (one task per case would cost more in scheduling than in checking)."""
    return [work(text, source) for text, source in items]


def chunk_size(n_cases: int, n_workers: int) -> int:
    """Cases per Dask task: about 4 tasks per worker, at most 16 cases each.

    >>> chunk_size(244, 2), chunk_size(5, 2), chunk_size(10_000, 8)
    (16, 1, 16)
    """
    return max(1, min(16, n_cases // (4 * max(1, n_workers))))


def _n_workers(client: Any) -> int:
    try:
        return max(1, len(client.scheduler_info().get("workers", {})))
    except Exception:  # an old or unusual scheduler: any positive guess is fine
        return 1


def _row(case: SuiteCase, result: dict[str, Any], fields: Sequence[str]) -> dict[str, Any]:
    row: dict[str, Any] = {"format": RESULT_FORMAT, "key": case.key, "file": case.rel, "name": case.name,
                           "family": case.family}
    if "error" in result:
        row.update(status="error", error=str(result["error"]), differences=[])
    else:
        diffs = compare(case.expected, result["report"], fields)
        row.update(status="differ" if diffs else "agree", differences=[list(d) for d in diffs],
                   report=result["report"])
    row["seconds"] = result.get("seconds")
    return row


def read_results(path: str) -> dict[str, dict[str, Any]]:
    """Finished results of an earlier run, by case key; a torn last line (a killed run) is dropped from the file.

    Raises
    ------
    OutputError
        The file cannot be rewritten.
    """
    from exactident.io.atomic import atomic_write_text

    p = Path(path)
    if not p.exists():
        return {}
    text = p.read_text(encoding="utf-8", errors="replace")
    good, out = [], {}
    for line in text.splitlines(keepends=True):
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if not line.endswith("\n") or not isinstance(row, dict) or row.get("format") != RESULT_FORMAT:
            continue
        good.append(line)
        out[str(row.get("key"))] = row
    if "".join(good) != text:
        try:
            atomic_write_text(p, "".join(good))
        except OSError as exc:
            raise OutputError(path, exc) from None
    return out


def _reusable(row: dict[str, Any], case: SuiteCase, fields: Sequence[str]) -> bool:
    if row.get("status") not in ("agree", "differ") or not isinstance(row.get("report"), dict):
        return False
    return all(f in row["report"] for f in fields if f in case.expected)


def _resolve_jobs(jobs: int | None, scheduler: str | None, notes: list[str]) -> int:
    if scheduler or jobs == 1:
        return jobs or 1
    try:
        import distributed  # noqa: F401
    except ImportError:
        if jobs is None:
            notes.append("dask[distributed] is not installed: running in this process "
                         "(pip install 'exactident[suites]' for parallel runs)")
            return 1
        raise UnsupportedCaseError(f"--jobs {jobs} needs dask[distributed]: pip install 'exactident[suites]'") from None
    return jobs if jobs is not None else max(1, os.cpu_count() or 1)


def run_suite(folder: str, *, jobs: int | None = None, scheduler: str | None = None, out: str | None = None,
              resume: bool = False, fields: Sequence[str] | None = None,
              work: Callable[[str, str], dict[str, Any]] | None = None,
              progress: Callable[[int, str], Any] | None = None) -> SuiteRun:
    """Run a suite; see the module docstring.

    Parameters
    ----------
    folder : str
        The suite folder (case files under it, optional ``manifest.json``).
    jobs : int, optional
        ``1``: in this process; ``N > 1``: a Dask ``LocalCluster`` of ``N``
        worker processes; default: one per core (in this process when Dask is
        not installed).
    scheduler : str, optional
        Address of a Dask distributed scheduler (``tcp://host:8786``); overrides ``jobs``.
    out : str, optional
        JSON-lines result file, appended to as results arrive.
    resume : bool
        Keep the finished results already in ``out`` and skip their cases.
    fields : sequence of str, optional
        Report fields to compare (default: the manifest's ``compared_fields``, else
        :data:`~exactident.suites.compare.DEFAULT_FIELDS`).
    work : callable (text, source) -> dict, optional
        The worker function (default :func:`check_case_text`; it must be importable by Dask workers).
    progress : callable (total, description) -> object with ``update(note)`` and ``close()``
        Progress display factory (default: :class:`~exactident.suites.progress.Progress`).

    Raises
    ------
    CaseFormatError
        Bad suite (see :func:`load_suite`); ``--out`` holds results but ``resume`` is false;
        ``resume`` without ``out``.
    UnsupportedCaseError
        ``jobs > 1`` or ``scheduler`` without dask[distributed].
    OutputError
        The result file cannot be written.
    """

    work = work or check_case_text
    cases, manifest = load_suite(folder)
    if fields is None:
        fields = tuple(manifest["compared_fields"]) if manifest else DEFAULT_FIELDS
    if resume and not out:
        raise CaseFormatError("--resume", "", "needs --out FILE (the results to resume)")
    if out and Path(out).is_dir():
        raise CaseFormatError(out, "--out", "is a folder")
    if out and not resume and Path(out).exists() and Path(out).stat().st_size > 0:
        raise CaseFormatError(out, "--out", "already holds results: --resume continues that run, or remove the file")
    notes: list[str] = []
    njobs = _resolve_jobs(jobs, scheduler, notes)
    if out:
        from exactident.io.atomic import check_writable

        problem = check_writable(out)
        if problem:
            raise CaseFormatError(out, "--out", problem)
    handle = _open_locked(out) if out else None  # one writer per result file, from here to the end
    try:
        previous = {}
        if out and resume:
            previous = read_results(out)
            if handle is not None and _replaced(handle, out):  # repaired by a rename: lock the new file
                handle.close()
                handle = _open_locked(out)
        return _run_cases(cases, previous, fields, handle, str(out), njobs, scheduler, work, progress, notes)
    finally:
        if handle is not None:
            try:
                handle.close()
            except OSError as exc:
                if sys.exc_info()[0] is None:  # not hiding the error already on its way
                    raise OutputError(str(out), exc) from None


def _open_locked(out: str) -> Any:
    """``out`` opened for appending under an exclusive ``flock``: a second run on the same file is refused.

    Raises
    ------
    CaseFormatError
        Another process holds the lock (``--out``, exit 2).
    OutputError
        The file cannot be opened.
    """
    try:
        handle = open(out, "a", encoding="utf-8")  # noqa: SIM115 (the caller closes it)
    except OSError as exc:
        raise OutputError(out, exc) from None
    try:
        import fcntl
    except ImportError:  # not POSIX: no advisory locks
        return handle
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise CaseFormatError(out, "--out", "another exactident suite run is writing this file (it holds its lock): "
                                            "wait for it to end, or give another --out") from None
    except OSError:  # a file system without locks (some network mounts): run unlocked
        pass
    return handle


def _replaced(handle: Any, path: str) -> bool:
    a, b = os.fstat(handle.fileno()), os.stat(path)
    return (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino)


def _run_cases(cases: list[SuiteCase], previous: dict[str, dict[str, Any]], fields: Sequence[str], handle: Any,
               out: str, njobs: int, scheduler: str | None, work: Callable[[str, str], dict[str, Any]],
               progress: Callable[[int, str], Any] | None, notes: list[str]) -> SuiteRun:
    from exactident.suites.progress import Progress

    rows: dict[str, dict[str, Any]] = {}
    todo = []
    for c in cases:
        old = previous.get(c.key)
        if old is not None and _reusable(old, c, fields):
            rows[c.key] = _row(c, {"report": old["report"], "seconds": old.get("seconds")}, fields)
        else:
            todo.append(c)
    resumed = len(rows)
    start = time.perf_counter()
    bar = (progress or (lambda total, desc: Progress(total, desc)))(len(todo), "suite run")

    def arrived(case: SuiteCase, result: dict[str, Any]) -> None:
        row = _row(case, result, fields)
        rows[case.key] = row
        if handle is not None:
            try:
                handle.write(json.dumps(row, separators=(",", ":")) + "\n")
                handle.flush()
            except OSError as exc:
                raise OutputError(out, exc) from None
        bar.update(row["status"] if row["status"] != "agree" else "")

    try:
        if not todo:
            mode = "nothing to run"
        elif njobs == 1 and not scheduler:
            mode = "in-process"
            for c in todo:
                arrived(c, work(c.text, c.rel))
        else:
            mode = _run_dask(todo, njobs, scheduler, work, arrived)
    finally:
        bar.close()
    ordered = [rows[c.key] for c in cases if c.key in rows]
    return SuiteRun(ordered, tuple(fields), mode, time.perf_counter() - start, resumed, notes)


def _run_dask(todo: list[SuiteCase], jobs: int, scheduler: str | None,
              work: Callable[[str, str], dict[str, Any]], arrived: Callable[[SuiteCase, dict[str, Any]], None]) -> str:
    import logging

    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise UnsupportedCaseError("running on Dask needs dask[distributed]: pip install 'exactident[suites]'"
                                   ) from None
    cluster = None
    if scheduler:
        try:
            client = Client(scheduler, timeout=CONNECT_TIMEOUT)
        except OSError as exc:
            raise UnsupportedCaseError(f"--scheduler {scheduler}: cannot connect ({exc})") from None
        mode = f"dask scheduler {scheduler}"
    else:
        started = time.perf_counter()
        cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=None,
                               silence_logs=logging.ERROR)
        client = Client(cluster)
        mode = f"dask LocalCluster, {jobs} worker processes started in {time.perf_counter() - started:.1f} s"
    try:
        size = chunk_size(len(todo), jobs if not scheduler else _n_workers(client))
        futures = {client.submit(check_chunk, work, [(c.text, c.rel) for c in todo[k:k + size]], pure=False):
                   todo[k:k + size] for k in range(0, len(todo), size)}
        for fut in as_completed(list(futures)):
            chunk = futures.pop(fut)
            try:
                results = fut.result()
            except Exception as exc:  # KilledWorker after Dask's retries, or an error in `work` itself
                results = [{"error": f"{type(exc).__name__}: {exc}"}] * len(chunk)
            for case, result in zip(chunk, results):
                arrived(case, result)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    return mode
