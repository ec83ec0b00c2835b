"""A time budget and stage progress for long analyses (standard library only).

Two pieces, both usable from any layer:

- :func:`stage` names the stage a computation is in (``"forward pass"``,
  ``"ranks mod p"``, ``"bounds"``, ``"kernel"``, ...) with the sizes involved.  It
  is a no-op unless a listener is installed (:func:`listening`): the terminal
  display of the CLI, or the pipe to a parent process.
- :func:`run_isolated` runs a function in a forked child process with a hard
  deadline.  A single FLINT call cannot be interrupted by a Python signal
  handler, so the only budget that always holds is a separate process that is
  killed: the child is made leader of its own process group and the whole
  group is killed (``SIGKILL``) at the deadline or on Ctrl-C.  The parent learns
  the last stage the child reported, which is what a timed-out report names.

The child never outlives the parent: on Linux it asks the kernel for ``SIGKILL`` when
its parent dies (``prctl(PR_SET_PDEATHSIG)``, then re-checks that the parent is still
the one that forked it, for a parent that died in between), and everywhere a thread
of the child watches a pipe from the parent and kills the child's process group when
the pipe closes (the parent died, however).  While the child runs, the parent turns
SIGTERM and SIGHUP into killing the child's whole group and then terminating as the
signal asks (the CLI turns SIGTERM into ``KeyboardInterrupt``: exit 130); SIGINT kills the
group and raises ``KeyboardInterrupt``.

Without ``fork`` (not POSIX) :func:`run_isolated` runs the function in-process and
the budget is checked between stages only (:class:`BudgetExhausted` is raised by
:func:`stage` once the deadline has passed).
"""

from __future__ import annotations

import contextlib
import numbers
import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from exactident.errors import ExactIdentError, UnsupportedCaseError

__all__ = ["PR_SET_PDEATHSIG", "BudgetExhausted", "Outcome", "deliver", "die_with_parent",
           "listening", "run_command_work", "run_isolated", "soft_deadline", "stage", "timed_out_output"]

Listener = Callable[[str, dict[str, Any]], None]
_listeners: list[Listener] = []
_sinks: list[Callable[[Any], None]] = []  # where deliver() sends a finished part (innermost last)
_last_stage: list[str] = ["start"]


class _PerThread(threading.local):
    def __init__(self) -> None:
        self.deadlines: list[float] = []  # this thread's in-process soft deadlines (another thread's never bound it)


_local = _PerThread()


class BudgetExhausted(ExactIdentError):
    """The time budget ran out; ``stage`` is where the computation was."""

    def __init__(self, stage: str) -> None:
        super().__init__(f"time budget exhausted at {stage}")
        self.stage = stage

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return BudgetExhausted, (self.stage,)  # from a child process: the stage, not the message, is the argument


def stage(name: str, **sizes: Any) -> None:
    """Announce that the computation enters stage ``name`` (sizes are for display).

    Raises
    ------
    BudgetExhausted
        If an in-process deadline (see :func:`run_isolated` without fork) has passed.

    Examples
    --------
    >>> seen = []
    >>> with listening(lambda s, sizes: seen.append((s, sizes))):
    ...     stage("ranks mod p", rows=10, cols=3)
    >>> seen
    [('ranks mod p', {'rows': 10, 'cols': 3})]
    """
    _last_stage[0] = name
    for listener in list(_listeners):
        listener(name, sizes)
    deadlines = _local.deadlines
    if deadlines and time.monotonic() > min(deadlines):  # nested deadlines: the earliest bounds them all
        raise BudgetExhausted(name)


def deliver(value: Any) -> None:
    """Hand a finished part of the result (``check``: the report at its verdict) to :func:`run_isolated`.

    If the budget runs out afterwards, :func:`run_isolated`'s outcome carries it as ``partial``
    instead of nothing.  Outside :func:`run_isolated` it does nothing.  ``value`` must be picklable.
    """
    if _sinks:
        _sinks[-1](value)


@contextlib.contextmanager
def soft_deadline(seconds: float | None) -> Iterator[None]:
    """In this process, make :func:`stage` raise :class:`BudgetExhausted` once ``seconds`` have passed.

    Checked when a stage begins (a long FLINT call ends first); None: no deadline.  This thread's only; nested
    ones all hold.  ``explain`` and ``design`` run under it (``timeout=``); ``check`` and the commands run in
    a child process killed at the deadline instead (:func:`run_isolated`).

    Raises
    ------
    UnsupportedCaseError
        ``seconds`` is not None nor a number > 0 (as ``check``'s ``timeout``).
    BudgetExhausted
        From the first stage begun past the deadline.

    Examples
    --------
    >>> with soft_deadline(1e-9):
    ...     time.sleep(0.001)
    ...     stage("ranks mod p")
    Traceback (most recent call last):
    ...
    exactident.budget.BudgetExhausted: time budget exhausted at ranks mod p
    """
    if seconds is None:
        yield
        return
    if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real) or not seconds > 0:  # nan is not > 0
        raise UnsupportedCaseError(f"timeout must be a number of seconds > 0 or None, not {seconds!r}")
    _local.deadlines.append(time.monotonic() + seconds)
    try:
        yield
    finally:
        _local.deadlines.pop()


@contextlib.contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Install ``listener(stage_name, sizes)`` for the duration of the block."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


@dataclass
class Outcome:
    """What :func:`run_isolated` returns: the value, or the stage where the budget ran out."""

    value: Any = None
    timed_out: bool = False
    stage: str = "start"
    seconds: float = 0.0
    stages: list[str] = field(default_factory=list)
    partial: Any = None  # the last value passed to deliver() before the deadline (timed out only)


#: ``prctl`` option asking for a signal when the parent dies (linux/prctl.h).
PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> bool:
    """In a forked child: get ``SIGKILL`` when the parent dies (Linux), exit now if it already has.

    Returns whether the kernel took the request (False off Linux or when ``prctl`` fails;
    the pipe the child watches still covers it then).
    """
    armed = False
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            armed = libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
        except (OSError, AttributeError):
            armed = False
    if os.getppid() != parent_pid:  # the parent died before the request: nobody would send the signal
        os._exit(1)
    return armed


def release_freed_memory() -> None:
    """Give the pages a finished stage freed back to the system: glibc's ``malloc_trim(0)``, a no-op elsewhere.

    A stage frees large numpy arrays and many FLINT integers, but glibc keeps freed heap pages that lie
    below live small objects, so the next stage's peak would add to what the last one left (peak RSS of
    ``check`` on a random 16-16-16-16-1 net with 1,000 samples: 86 MB without, 81 MB with; a few ms).
    """
    if not _TRIM:
        trim = None
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                trim = ctypes.CDLL(None).malloc_trim
            except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
                trim = None
        _TRIM.append(trim)
    if _TRIM[0] is not None:
        _TRIM[0](0)


_TRIM: list = []  # glibc's malloc_trim, or None: looked up once


def _watch_parent(fd: int) -> None:  # pragma: no cover - runs in the child
    """A daemon thread of the child: the parent's end of ``fd`` closes when it dies; kill our group."""
    import threading

    def watch() -> None:
        try:
            while os.read(fd, 1):
                pass
        except OSError:
            pass
        with contextlib.suppress(OSError):
            os.killpg(0, signal.SIGKILL)
        os._exit(1)

    threading.Thread(target=watch, name="exactident-parent-watch", daemon=True).start()


def _child(fn: Callable[[], Any], conn: Any, parent_pid: int = 0,
           watch_fd: int | None = None, close_fd: int | None = None) -> None:  # pragma: no cover - in the child
    os.setpgid(0, 0)  # own process group: the parent kills it whole
    if close_fd is not None:
        os.close(close_fd)  # the parent's write end: only the parent may hold it open
    if parent_pid:
        die_with_parent(parent_pid)
    if watch_fd is not None:
        _watch_parent(watch_fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    for name in ("SIGTERM", "SIGHUP"):  # the parent's forwarding handlers are not ours
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)

    def send(name: str, sizes: dict[str, Any]) -> None:
        conn.send(("stage", name, {k: v for k, v in sizes.items() if isinstance(v, (int, float, str))}))

    _listeners[:] = [send]
    _sinks[:] = [lambda value: conn.send(("partial", value))]
    try:
        value = fn()
        conn.send(("done", value))
    except BaseException as exc:
        try:
            conn.send(("error", exc))
        except (pickle.PicklingError, TypeError, AttributeError):
            conn.send(("error", ExactIdentError(f"{type(exc).__name__}: {exc}")))
    finally:
        conn.close()


def _kill_group(pid: int) -> None:
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill()


def _drain(conn: Any, partial: list[Any]) -> None:
    """Read the messages a killed child left in the pipe, keeping the last ``partial`` one."""
    with contextlib.suppress(Exception):  # a message cut by the kill ends the reading
        while conn.poll(0):
            msg = conn.recv()
            if msg[0] == "partial":
                partial[0] = msg[1]


_FORWARDED = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP", "SIGINT") if hasattr(signal, n))


@contextlib.contextmanager
def _forwarding(pid: int) -> Iterator[None]:
    """While the block runs (main thread only): a SIGTERM/SIGHUP/SIGINT kills the child's group first.

    Then SIGINT raises ``KeyboardInterrupt``; SIGTERM and SIGHUP go to the handler that was there
    before: a Python one is called (the CLI's raises ``KeyboardInterrupt`` for SIGTERM: exit 130),
    the default terminates (status ``128 + signal``).
    """
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}

    def handler(signum: int, frame: Any) -> None:
        _kill_group(pid)
        before = previous.get(signum)
        for sig, old in previous.items():
            signal.signal(sig, old)
        previous.clear()
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        if callable(before):  # a Python handler (the CLI's: SIGTERM -> KeyboardInterrupt, exit 130)
            before(signum, frame)
        os.kill(os.getpid(), signum)  # the previous handler (default: terminate) takes it from here
        raise SystemExit(128 + signum)  # a Python handler that returned

    for sig in _FORWARDED:
        current = signal.getsignal(sig)
        if current is None or current == signal.SIG_IGN:  # set outside Python, or ignored: leave it
            continue
        with contextlib.suppress(OSError, ValueError):
            previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def run_isolated(fn: Callable[[], Any], timeout: float | None,
                 on_stage: Listener | None = None, on_tick: Callable[[], None] | None = None) -> Outcome:
    """Run ``fn()`` with a hard deadline of ``timeout`` seconds (None: no deadline, in-process).

    Parameters
    ----------
    fn : callable () -> picklable value
    timeout : float or None
    on_stage : callable (stage, sizes), optional
        Called in this process for every stage the child announces.
    on_tick : callable (), optional
        Called about twice a second while the child works (to refresh a display).
        ``timeout = math.inf`` runs in a child without a deadline (so a display stays live).

    Returns
    -------
    Outcome
        ``timed_out`` with the last announced ``stage`` when the deadline passed (the
        child's whole process group has then been killed), with ``partial``, the last
        value ``fn`` passed to :func:`deliver` (None if none); else ``value``.

    Raises
    ------
    Exception
        Whatever ``fn`` raised (re-raised here); ``KeyboardInterrupt`` after killing the child.
    """
    start = time.monotonic()
    stages: list[str] = []

    def note(name: str, sizes: dict[str, Any]) -> None:
        stages.append(name)
        if on_stage is not None:
            on_stage(name, sizes)

    partial: list[Any] = [None]
    if timeout is None or not hasattr(os, "fork"):
        if timeout is not None:
            _local.deadlines.append(start + timeout)
        _sinks.append(lambda value: partial.__setitem__(0, value))
        try:
            with listening(note):
                return Outcome(value=fn(), seconds=time.monotonic() - start, stages=stages)
        except BudgetExhausted as exc:
            return Outcome(timed_out=True, stage=exc.stage, seconds=time.monotonic() - start, stages=stages,
                           partial=partial[0])
        finally:
            _sinks.pop()
            if timeout is not None:
                _local.deadlines.pop()
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    watch_r, watch_w = os.pipe()  # the child watches watch_r: EOF when this process is gone
    proc = ctx.Process(target=_child, args=(fn, child, os.getpid(), watch_r, watch_w), daemon=True)
    try:
        proc.start()
    except BaseException:
        os.close(watch_w)
        raise
    finally:
        os.close(watch_r)
        child.close()
    deadline = start + timeout
    last = "start"
    stack = contextlib.ExitStack()
    try:
        stack.enter_context(_forwarding(proc.pid))  # type: ignore[arg-type]
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not parent.poll(min(left, 0.5)):
                if on_tick is not None:
                    on_tick()
                if time.monotonic() >= deadline:
                    _kill_group(proc.pid)  # type: ignore[arg-type]
                    proc.join()
                    _drain(parent, partial)  # a verdict sent just before the deadline still counts
                    return Outcome(timed_out=True, stage=last, seconds=time.monotonic() - start, stages=stages,
                                   partial=partial[0])
                if not proc.is_alive() and not parent.poll():
                    raise ExactIdentError(f"analysis process died (exit status {proc.exitcode}) at {last}")
                continue
            try:
                msg = parent.recv()
            except EOFError:
                proc.join()
                raise ExactIdentError(f"analysis process died (exit status {proc.exitcode}) at {last}") from None
            if msg[0] == "stage":
                last = msg[1]
                note(msg[1], msg[2])
            elif msg[0] == "partial":
                partial[0] = msg[1]
            elif msg[0] == "done":
                proc.join()
                return Outcome(value=msg[1], stage=last, seconds=time.monotonic() - start, stages=stages)
            else:
                proc.join()
                raise msg[1]
    except BaseException:
        if proc.is_alive():
            _kill_group(proc.pid)  # type: ignore[arg-type]
            proc.join()
        raise
    finally:
        stack.close()
        parent.close()
        os.close(watch_w)


def timed_out_output(fmt: str, name: str, timeout: float, outcome: Outcome, as_json: bool) -> str:
    """What a command prints when its ``--timeout`` ran out: an answer saying so (exit status 0).

    ``fmt`` is the command's JSON format (``"exactident-fdim/1"``, ...); the JSON object has
    ``timed_out: true``, the ``stage`` the budget ran out at and the ``timeout`` in seconds.

    Examples
    --------
    >>> timed_out_output("exactident-fdim/1", "net", 2.0, Outcome(timed_out=True, stage="kernel"), False)
    'net: time budget of 2 s exhausted at kernel: no result (give a larger --timeout)\\n'
    """
    if as_json:
        import json

        return json.dumps({"format": fmt, "name": name, "timed_out": True, "stage": outcome.stage,
                           "timeout": timeout, "reason": f"time budget exhausted at {outcome.stage}"},
                          indent=1) + "\n"
    shown = name if name.isprintable() else repr(name)[1:-1]  # no control characters on the terminal
    return (f"{shown}: time budget of {timeout:g} s exhausted at {outcome.stage}: no result "
            "(give a larger --timeout)\n")


def run_command_work(work: Callable[[], Any], timeout: float | None,
                     on_stage: Listener | None = None) -> Outcome:
    """Run a command's ``work()`` as ``design``, ``fdim``, ``audit`` and ``explain`` do.

    With ``timeout``, in a child process killed at the deadline (:func:`run_isolated`). On a
    terminal, in a child process even without ``timeout`` (no deadline then), as ``check`` does:
    Ctrl-C (or SIGTERM) kills it at once instead of waiting for a long FLINT call to return.
    Otherwise in this process. The caller prints :func:`timed_out_output` when ``timed_out``.
    """
    import math

    tty = getattr(sys.stderr, "isatty", lambda: False)()
    budget = timeout if timeout is not None or not tty else math.inf
    if budget is None:
        return Outcome(value=work())
    return run_isolated(work, budget, on_stage=on_stage)
