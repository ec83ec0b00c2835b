"""The tracker: at scheduled steps, the certified rank of ``Gamma`` of the model's current weights on a fixed probe.

At each point the model's weights are read exactly (every float is its binary value, a dyadic
rational: the importers of :mod:`exactident.io.importers`), :func:`exactident.check.check` decides the
case within a time budget (its ``timeout``: a child process killed at the deadline), and one record is
made: the certified ``rank_gamma`` (or the certified interval ``[lo, hi]`` when ``check`` reports one),
``dim``, the verdict, the hidden units dead and always active on the probe (strict signs of the exact
pre-activations, :mod:`exactident.model.diagnostics`) and the float64 rank of ``Gamma`` at numpy's
default tolerance (:mod:`exactident.numeric.numpy_backend`, what a float tool reports). Each record is
appended to a JSON Lines file as soon as it is made (one ``write`` of one whole line on a file opened
for appending), so an interrupted run keeps every finished point.

Nothing of the training is changed: the random states of Python's ``random``, numpy's global generator
and PyTorch (CPU, and CUDA when initialised) are saved before a point and restored after it; a PyTorch
module's train/eval flag of every submodule and every parameter's ``requires_grad`` are restored;
weights are read under ``torch.no_grad`` (no gradient, no ``.grad`` touched).
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from exactident.errors import CaseFormatError, ExactIdentError, InvariantViolation, OutputError, UnsupportedCaseError

__all__ = ["RECORD_FIELDS", "Tracker", "point_record", "read_records", "records_frame", "untouched_state"]

#: The fields of one record, in order (docs/tracking.md).
RECORD_FIELDS = ("step", "epoch", "verdict", "rank_gamma", "rank_gamma_interval", "certified", "dim",
                 "float_rank_gamma", "float_tol", "dead_units", "always_active_units", "hidden_units",
                 "n_samples", "widths", "decided_by", "on_boundary", "timed_out", "seconds", "error")


@contextmanager
def untouched_state(module: Any = None) -> Iterator[None]:
    """Run the body, then put back every random state and a PyTorch module's modes.

    Saved and restored: ``random.getstate()``, ``numpy.random.get_state()`` (when numpy is loaded),
    ``torch.get_rng_state()`` and the CUDA states (when torch is loaded; CUDA only when initialised);
    for a ``torch.nn.Module``, the ``training`` flag of every submodule and ``requires_grad`` of every
    parameter. The body runs under ``torch.no_grad()`` when torch is loaded.
    """
    import sys

    py_state = random.getstate()
    np_mod = sys.modules.get("numpy")
    np_state = np_mod.random.get_state() if np_mod is not None else None
    torch = sys.modules.get("torch")
    torch_state = cuda_states = None
    modes: list[tuple[Any, bool]] = []
    grads: list[tuple[Any, bool]] = []
    if torch is not None:
        torch_state = torch.get_rng_state()
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            cuda_states = torch.cuda.get_rng_state_all()
        if isinstance(module, torch.nn.Module):
            modes = [(m, m.training) for m in module.modules()]
            grads = [(p, p.requires_grad) for p in module.parameters()]
    try:
        if torch is not None:
            with torch.no_grad():
                yield
        else:
            yield
    finally:
        for m, was in modes:
            m.training = was  # the flag alone: Module.train(b) would set every child to b
        for p, was in grads:
            if p.requires_grad != was:
                p.requires_grad_(was)
        random.setstate(py_state)
        if np_mod is not None and np_state is not None:
            np_mod.random.set_state(np_state)
        if torch is not None:
            torch.set_rng_state(torch_state)
            if cuda_states is not None:
                torch.cuda.set_rng_state_all(cuda_states)


def _unit_counts(case: Any) -> tuple[int | None, int | None, int | None]:
    """Hidden units dead (``z < 0`` on every probe row) and always active (``z > 0`` on every row), exactly."""
    net = getattr(case, "network", None)
    if net is None or not case.X:
        return None, None, None
    from exactident.model.activation import activation_state
    from exactident.model.diagnostics import neuron_activity

    acts = neuron_activity(activation_state(net, case.X))
    dead = sum(1 for a in acts if a.n_active == 0 and a.n_tie == 0)
    always = sum(1 for a in acts if a.n_inactive == 0 and a.n_tie == 0)
    return dead, always, len(acts)


def _float_rank(case: Any) -> tuple[int | None, float | None]:
    """The float64 rank of ``Gamma`` at numpy's default SVD tolerance (the float backend), and the tolerance."""
    net = getattr(case, "network", None)
    if net is None or not case.X:
        return None, None
    from exactident.linalg.floating import default_tol
    from exactident.model.activation import activation_state
    from exactident.model.fixed_edges import fixed_edges
    from exactident.numeric.guard import FloatPipelineError
    from exactident.numeric.numpy_backend import float_operators

    try:  # Gamma only: the float alpha is not asked for
        ops = float_operators(net, case.X, fixed_edges(net), activation_state(net, case.X).pattern, with_alpha=False)
        s = ops.gamma_singular_values()
    except FloatPipelineError:
        return None, None
    tol = default_tol(s, ops.gamma.shape, ops.dtype) if s.size else 0.0
    return int((s > tol).sum()), float(tol)


def point_record(case: Any, step: int, *, epoch: int | None = None, budget: float | None = 60.0,
                 check_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """One tracking record: :func:`exactident.check.check` on ``case`` within ``budget`` seconds, and the rest.

    Parameters
    ----------
    case : exactident.io.case.Case
        The network at this step (exact rationals) and the probe sample.
    step, epoch : int
    budget : float or None
        Seconds for ``check`` (its ``timeout``: a child process killed at the deadline; the report is
        then ``inconclusive``, or keeps the verdict if it was reached). None: no budget, in this process.
    check_options : dict, optional
        More keyword arguments of ``check`` (e.g. ``{"exact_ranks": True}``).

    Returns
    -------
    dict
        The fields of :data:`RECORD_FIELDS`: ``rank_gamma`` the certified rank (int) or None,
        ``rank_gamma_interval`` the certified ``[lo, hi]`` or None, ``certified`` whether the rank is
        certified exactly, ``float_rank_gamma`` the float64 rank (numpy's default tolerance
        ``float_tol``), ``dead_units``/``always_active_units`` out of ``hidden_units``; ``timed_out`` when
        the budget ran out; ``seconds`` of wall time for the whole point.
    """
    from exactident.check import check

    start = time.perf_counter()
    opts = {"numeric": False, "progress": False, **(check_options or {})}
    report = check(case, timeout=budget, **opts)
    dead, always, hidden = _unit_counts(case)
    frank, ftol = _float_rank(case)
    interval = report.rank_gamma_interval
    return {"step": int(step), "epoch": None if epoch is None else int(epoch), "verdict": report.verdict,
            "rank_gamma": report.rank_gamma, "rank_gamma_interval": None if interval is None else list(interval),
            "certified": report.rank_gamma is not None, "dim": report.dim,
            "float_rank_gamma": frank, "float_tol": ftol, "dead_units": dead, "always_active_units": always,
            "hidden_units": hidden, "n_samples": report.n_samples, "widths": list(report.widths),
            "decided_by": report.decided_by, "on_boundary": report.on_boundary,
            "timed_out": "time budget exhausted" in (report.reason or "")
                         or (report.numeric or {}).get("status") == "timed out",
            "seconds": round(time.perf_counter() - start, 4), "error": None}


def _error_record(step: int, epoch: int | None, error: str, start: float) -> dict[str, Any]:
    rec: dict[str, Any] = {k: None for k in RECORD_FIELDS}
    rec.update(step=int(step), epoch=None if epoch is None else int(epoch), verdict="error", certified=False,
               timed_out=False, error=error, seconds=round(time.perf_counter() - start, 4))
    return rec


def _quiet_worker() -> None:
    """The background worker's standard streams go to ``os.devnull``.

    Forked from a Jupyter kernel, the worker inherits the kernel's ``sys.stdout``/``sys.stderr``, which must
    not be written from another process (ipykernel logs ``attempted to send message from fork`` and the
    whole message for each write: a warning of a library, a progress line).  The worker's result and its
    errors come back through the pool, never through its streams.
    """
    import sys

    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - open for the worker's whole life


def _worker_point(case_json: dict[str, Any], step: int, epoch: int | None, budget: float | None,
                  check_options: dict[str, Any]) -> dict[str, Any]:
    """:func:`point_record` in the background worker, on the case sent as its JSON form (exact ``p/q`` strings)."""
    from exactident.io.case import parse_case

    return point_record(parse_case(case_json), step, epoch=epoch, budget=budget, check_options=check_options)


def _append_line(path: str, record: dict[str, Any]) -> None:
    line = (json.dumps(record, sort_keys=False, allow_nan=False) + "\n").encode("utf-8")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            view = memoryview(line)
            while view:  # one write for a line this short; the loop only guards a short write
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise OutputError(path, exc) from None


class Tracker:
    """Record the certified rank of ``Gamma`` during training, at the steps of a schedule.

    Parameters
    ----------
    model : torch.nn.Module or keras.Model, optional
        Read at each point: a ReLU MLP (PyTorch: :func:`exactident.io.importers.objects.from_torch`, forward-checked;
        Keras: its ``Dense`` layers, :func:`exactident.track.frameworks.keras_case`).
    X : array-like ``(n, N_0)``
        The fixed probe sample (floats read exactly; a PyTorch module sees it in its dtype).
    every : int, optional
        A point at every step divisible by ``every`` (step 0 included).
    at : iterable of int, optional
        Points at these steps (with ``every``: both).
    jsonl : path, optional
        Each record is appended to this file as one JSON line as soon as it is made.
    budget : float or None
        Seconds per point for :func:`exactident.check.check` (``timeout``); None: no budget.
    weights : callable () -> (weights, biases), optional
        Instead of ``model`` (JAX, Flax, any framework): the current ``W_l`` of shape ``(N_l, N_{l-1})``
        and ``b_l`` as arrays (:meth:`exactident.io.case.Case.from_arrays`).
    forward : callable X -> outputs, optional
        With ``weights``: the framework's own outputs on the probe, checked against the exact network
        within the rounding bound (:func:`exactident.io.importers.forward_check.forward_check`).
    name : str
    check_options : dict, optional
        More keyword arguments of ``check``.
    background : bool
        Off the training's critical path: the weights are read at the step (the only work training
        waits for), the analysis runs in one worker process (forked on the first point) while training
        goes on, and each record is appended when it finishes, in order. :meth:`wait` (or leaving a
        ``with Tracker(...)`` block) waits for the points still running. Ignored where ``os.fork`` is
        missing.

    Raises
    ------
    UnsupportedCaseError
        Neither ``every`` nor ``at``; ``every < 1``; neither ``model`` nor ``weights``.

    Notes
    -----
    ``step(k)`` is the one line to add to a training loop. A point that fails (a model the importers
    refuse, an analysis process that died) is recorded with its ``error`` and training goes on; a
    broken invariant (a bug) is raised.
    """

    def __init__(self, model: Any = None, X: Any = None, *, every: int | None = None, at: Iterable[int] | None = None,
                 jsonl: str | os.PathLike[str] | None = None, budget: float | None = 60.0,
                 weights: Callable[[], Any] | None = None, forward: Callable[[Any], Any] | None = None,
                 name: str = "track", check_options: dict[str, Any] | None = None, background: bool = False) -> None:
        if every is None and at is None:
            raise UnsupportedCaseError("Tracker: give a schedule: every=N steps, or at=[steps]")
        if every is not None and (not isinstance(every, int) or every < 1):
            raise UnsupportedCaseError(f"Tracker: every must be a positive integer, not {every!r}")
        if model is None and weights is None:
            raise UnsupportedCaseError("Tracker: give the model (PyTorch, Keras) or weights= (a function returning "
                                       "the current (weights, biases))")
        if X is None:
            raise UnsupportedCaseError("Tracker: give the probe sample X")
        self.model, self.X, self.every = model, X, every
        self.at = frozenset(int(s) for s in at) if at is not None else frozenset()
        self.jsonl = None if jsonl is None else os.fspath(jsonl)
        self.budget, self.weights, self.forward, self.name = budget, weights, forward, name
        self.check_options = dict(check_options or {})
        self.background = bool(background) and hasattr(os, "fork")
        self.records: list[dict[str, Any]] = []
        self._done: set[int] = set()
        self._lock = threading.Lock()
        self._pool: Any = None
        self._pending: list[Any] = []
        self._seq = self._written = 0  # points taken, points appended
        self._ready: dict[int, dict[str, Any]] = {}

    def due(self, step: int) -> bool:
        """Whether ``step`` is on the schedule and not yet recorded."""
        on = step in self.at or (self.every is not None and step % self.every == 0)
        return on and step not in self._done

    def step(self, step: int, epoch: int | None = None) -> dict[str, Any] | None:
        """Record a point if ``step`` is on the schedule; the record, or None. The one line in a loop."""
        return self.record(step, epoch) if self.due(step) else None

    def case(self) -> Any:
        """The exact case of the model's current weights and the probe (the random states untouched)."""
        from exactident.track.frameworks import snapshot

        with untouched_state(self.model):
            return snapshot(self.model, self.X, self.weights, self.forward, self.name)

    def record(self, step: int, epoch: int | None = None) -> dict[str, Any] | None:
        """Take a point now, whatever the schedule; its record is appended to ``records`` and to the JSON Lines file.

        Returns
        -------
        dict or None
            The record; None with ``background=True`` (the record is appended when the worker finishes it).

        Raises
        ------
        OutputError
            The JSON Lines file cannot be written.
        """
        start = time.perf_counter()
        self._done.add(int(step))
        seq, self._seq = self._seq, self._seq + 1
        with untouched_state(self.model):
            try:
                from exactident.track.frameworks import snapshot

                case = snapshot(self.model, self.X, self.weights, self.forward, f"{self.name}@{step}")
                if self.background:
                    self._submit(seq, case, step, epoch, start)
                    return None
                rec = point_record(case, step, epoch=epoch, budget=self.budget, check_options=self.check_options)
            except InvariantViolation:
                raise  # a bug: never hidden in a record
            except ExactIdentError as exc:  # a refused model, an analysis process that died: training goes on
                rec = _error_record(step, epoch, str(exc), start)
        return self._finish(seq, rec)

    def _finish(self, seq: int, rec: dict[str, Any]) -> dict[str, Any]:
        """Append the record of point number ``seq`` once every earlier point is appended (step order)."""
        with self._lock:  # a background point finishes in the executor's thread
            self._ready[seq] = rec
            while self._written in self._ready:
                done = self._ready.pop(self._written)
                self._written += 1
                self.records.append(done)
                if self.jsonl is not None:
                    _append_line(self.jsonl, done)
        return rec

    def _submit(self, seq: int, case: Any, step: int, epoch: int | None, start: float) -> None:
        import concurrent.futures
        import multiprocessing

        from exactident.io.case import case_to_json

        if self._pool is None:  # fork: a spawned worker would re-run the training script's top level
            self._pool = concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"),
                                                                initializer=_quiet_worker)
        future = self._pool.submit(_worker_point, case_to_json(case), int(step), epoch, self.budget,
                                   self.check_options)

        def done(f: concurrent.futures.Future) -> None:
            exc = f.exception()
            rec = f.result() if exc is None else _error_record(step, epoch, f"{type(exc).__name__}: {exc}", start)
            try:
                self._finish(seq, rec)
            except OutputError as err:  # no caller to raise to in this thread: the record says it
                rec["error"] = str(err)

        future.add_done_callback(done)
        self._pending = [f for f in self._pending if not f.done()] + [future]

    def wait(self) -> list[dict[str, Any]]:
        """Wait for the background points still running (``background=True``) and stop the worker; the records."""
        import concurrent.futures

        if self._pending:
            concurrent.futures.wait(self._pending)
            self._pending.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        return self.records

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.wait()

    def frame(self) -> Any:
        """The records as a pandas DataFrame (:func:`records_frame`)."""
        return records_frame(self.records)


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of a tracking JSON Lines file, in order.

    A last line without its newline (a run killed during the write) is left out; any other
    malformed line is an error.

    Raises
    ------
    CaseFormatError
        The file cannot be read, or a line (named by number) is not a JSON object with a ``step``.
    """
    p = os.fspath(path)
    try:
        with open(p, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise CaseFormatError(p, "", f"cannot read: {exc}") from None
    lines = text.split("\n")
    if lines and lines[-1] != "":
        lines = lines[:-1]  # torn last line: the point was not finished
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CaseFormatError(p, f"line {n}", f"not JSON ({exc.msg})") from None
        if not isinstance(rec, dict) or not isinstance(rec.get("step"), int):
            raise CaseFormatError(p, f"line {n}", "not a tracking record (a JSON object with an integer step)")
        out.append(rec)
    return out


def records_frame(records: Iterable[dict[str, Any]]) -> Any:
    """The records as a pandas DataFrame, one row per point, columns :data:`RECORD_FIELDS`.

    Raises
    ------
    UnsupportedCaseError
        pandas is not installed (``pip install pandas``; it is no dependency of exactident).
    """
    try:
        import pandas as pd  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        raise UnsupportedCaseError("records_frame needs pandas (pip install pandas); the records are plain "
                                   "dicts without it") from None
    rows = list(records)
    return pd.DataFrame(rows, columns=list(RECORD_FIELDS) + sorted({k for r in rows for k in r} - set(RECORD_FIELDS)))
