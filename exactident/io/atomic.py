"""Atomic output (docs/cli.md, "Output files"): temporary files beside the targets, fsynced, then renamed.

A failed run never leaves a half-written file nor overwrites a good one, and
the outputs of one run are replaced together or not at all
(:func:`write_outputs`):

1. every output is written to a temporary file beside its target and fsynced;
2. outputs that cannot be renamed over (FIFOs, devices) are written directly;
3. the caller's last step runs (e.g. printing the report on standard output);
4. only then are the temporary files renamed over their targets, in one burst.
   An existing target is first hard-linked to a backup name, so a rename that
   fails in this burst rolls the earlier ones back; the backups are then removed.

A failure before step 4 replaces nothing.  Temporary files are named
``.<target>.<random>.exactident-tmp`` (backups ``....exactident-old``): hidden,
never matching ``*.json`` or ``*.csv``, so a leftover from a killed run (SIGKILL
cannot be caught) is recognisable and never mistaken for an output.  While
outputs are written, SIGTERM and SIGINT (and SIGHUP) remove the temporary files
before the process stops as it would have (SIGTERM and SIGHUP are delivered
again with the previous handler; SIGINT becomes ``KeyboardInterrupt``).

A symlink is followed: the temporary file goes beside the link's resolved
target, which is replaced (the link stays a link).  A target that exists and is
not a regular file (a FIFO, a character device such as ``/dev/stdout`` or
``/dev/null``) cannot be replaced by rename without destroying it, so it is
written directly.  Called by :mod:`exactident.io.case`,
:mod:`exactident.crosscheck.command` and :mod:`exactident.crosscheck.plot`.
"""

from __future__ import annotations

import os
import signal
import stat
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from exactident.errors import OutputError

__all__ = [
    "BACKUP_SUFFIX",
    "TEMP_SUFFIX",
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_writable",
    "write_outputs",
    "write_stdout",
]

#: Ending of every temporary output file (``.<target>.<random>.exactident-tmp``).
TEMP_SUFFIX = ".exactident-tmp"
#: Ending of the short-lived backups taken just before the renames.
BACKUP_SUFFIX = ".exactident-old"

_LIVE: set[str] = set()  # temporary files and backups that exist right now (removed on signals)
_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, name))


class _Interrupted(BaseException):
    """A signal arrived while outputs were written: unwind (cleaning up), then stop as the signal asked."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _discard(path: str) -> None:
    with suppress(OSError):
        os.unlink(path)
    _LIVE.discard(path)


@contextmanager
def _signals_clean_up() -> Iterator[None]:
    """Turn SIGTERM/SIGINT/SIGHUP into an exception while the block runs (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}

    def handler(signum, frame):
        raise _Interrupted(signum)

    for sig in _SIGNALS:
        current = signal.getsignal(sig)
        if current is None or current == signal.SIG_IGN:  # set outside Python, or ignored: leave it
            continue
        with suppress(OSError, ValueError):
            previous[sig] = signal.signal(sig, handler)
    try:
        yield
    except _Interrupted as exc:
        for path in list(_LIVE):  # the finally blocks below already ran; be thorough
            _discard(path)
        before = previous.get(exc.signum)
        for sig, old in previous.items():
            signal.signal(sig, old)
        previous = {}
        if exc.signum == getattr(signal, "SIGINT", None):
            raise KeyboardInterrupt from None
        if callable(before):  # a Python handler (the CLI's: SIGTERM -> KeyboardInterrupt, exit 130)
            before(exc.signum, None)
        os.kill(os.getpid(), exc.signum)  # the previous handler (default: terminate) takes it from here
        raise SystemExit(128 + exc.signum) from None  # a Python handler that returned
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _new_temp(target: Path, suffix: str = TEMP_SUFFIX) -> str:
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix, dir=target.parent)
    _LIVE.add(tmp)
    os.close(fd)
    return tmp


def _mode_for(st: os.stat_result | None) -> int:
    if st is not None:
        return stat.S_IMODE(st.st_mode)
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    with suppress(OSError):  # not every file system lets a directory be opened or synced
        _fsync_path(str(path))


def _stat(path: str | os.PathLike[str]) -> os.stat_result | None:
    try:
        return os.stat(path)  # follows symlinks, /proc "magic" links to pipes included
    except FileNotFoundError:
        return None


@contextmanager
def atomic_path(path: str | os.PathLike[str], suffix: str = TEMP_SUFFIX) -> Iterator[str]:
    """Yield a path to write to; on success the written data ends up at ``path``.

    For a new or regular file (symlinks followed): a temporary file beside the
    resolved target, fsynced and renamed over it on success; it gets the old
    file's permissions, or ordinary ones (``0666 & ~umask``) for a new file.
    On any exception or on SIGTERM/SIGINT the temporary file is removed and the
    target is untouched.  For an existing non-regular target (FIFO, device):
    ``path`` itself, written directly (no temporary file, no rename).

    Raises
    ------
    OSError
        The target cannot be resolved (e.g. a symlink loop) or the temporary
        file cannot be created (e.g. missing directory).
    """
    st = _stat(path)
    if st is not None and not stat.S_ISREG(st.st_mode):
        yield os.fspath(path)  # a FIFO or device: renaming over it would replace it
        return
    target = Path(os.path.realpath(path))  # through symlinks, dangling ones included
    with _signals_clean_up():
        tmp = _new_temp(target, suffix)
        try:
            os.chmod(tmp, _mode_for(st))
            yield tmp
            _fsync_path(tmp)
            os.replace(tmp, target)
            _LIVE.discard(tmp)
            _fsync_dir(target.parent)
        finally:
            if tmp in _LIVE:
                _discard(tmp)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (see :func:`atomic_path`)."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_path`)."""
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        fh.write(data)


def check_writable(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot be an output, or ``None``: checked before any work.

    Catches what would otherwise fail only at the end: a symlink loop or a
    path through a non-directory (``stat`` fails), a directory, a missing or
    unwritable parent directory of the (resolved) target.

    Examples
    --------
    >>> check_writable("/nonexistent-dir/out.csv")
    'cannot write (no such directory)'
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:  # ELOOP, ENOTDIR, EACCES, ENAMETOOLONG
        return f"cannot write ({exc.strerror or exc})"
    if st is not None and stat.S_ISDIR(st.st_mode):
        return "is a directory"
    if st is not None and not stat.S_ISREG(st.st_mode):
        return None  # FIFO or device: written directly
    parent = Path(os.path.realpath(path)).parent
    if not parent.is_dir():
        return "cannot write (no such directory)"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot write (no permission to create files in {parent})"
    return None


def write_outputs(outputs: Sequence[tuple[str, bytes]], last_step: Callable[[], None] | None = None) -> None:
    """Write several outputs together or not at all (module docstring, steps 1-4).

    Parameters
    ----------
    outputs : list of (path, bytes)
    last_step : callable, optional
        Run after every temporary file is written and before any rename (e.g.
        writing standard output); if it raises, nothing is replaced.

    Raises
    ------
    OutputError
        Naming the output that could not be written; no target was replaced
        (a failure while renaming rolls back the renames already done).
    """
    regular: list[tuple[str, Path, str]] = []  # (shown path, resolved target, temporary file)
    with _signals_clean_up():
        try:
            direct: list[tuple[str, bytes]] = []
            for path, data in outputs:
                try:
                    st = _stat(path)
                    if st is not None and not stat.S_ISREG(st.st_mode):
                        direct.append((path, data))
                        continue
                    target = Path(os.path.realpath(path))
                    tmp = _new_temp(target)
                    regular.append((path, target, tmp))
                    os.chmod(tmp, _mode_for(st))
                    with open(tmp, "wb") as fh:
                        fh.write(data)
                        fh.flush()
                        os.fsync(fh.fileno())
                except OSError as exc:
                    raise OutputError(path, exc) from None
            for path, data in direct:
                try:
                    with open(path, "wb") as fh:
                        fh.write(data)
                except OSError as exc:
                    raise OutputError(path, exc) from None
            if last_step is not None:
                last_step()
            _commit(regular)
        finally:
            for _, _, tmp in regular:
                if tmp in _LIVE:
                    _discard(tmp)


def _commit(regular: Sequence[tuple[str, Path, str]]) -> None:
    """Rename every temporary file over its target; on a failure, put the earlier targets back."""
    prior: dict[Path, tuple[bool, str | None]] = {}  # target -> (existed, hard-linked backup)
    try:
        for _, target, _ in regular:
            if target in prior:
                continue
            backup = None
            existed = target.exists()
            if existed:
                backup = _new_temp(target, BACKUP_SUFFIX)
                try:
                    os.unlink(backup)
                    os.link(target, backup)  # same inode: the old contents, kept until all renames are done
                except OSError:
                    _discard(backup)
                    backup = None  # no hard links here: this target cannot be rolled back
            prior[target] = (existed, backup)
        done: list[Path] = []
        try:
            for path, target, tmp in regular:
                try:
                    os.replace(tmp, target)
                except OSError as exc:
                    raise OutputError(path, exc) from None
                _LIVE.discard(tmp)
                done.append(target)
        except BaseException:
            for target in reversed(done):
                existed, backup = prior[target]
                with suppress(OSError):
                    if backup is not None:
                        os.replace(backup, target)
                        _LIVE.discard(backup)
                    elif not existed:
                        os.unlink(target)  # it did not exist before this run
            raise
        for target in {t for _, t, _ in regular}:
            _fsync_dir(target.parent)
    finally:
        for _, backup in prior.values():
            if backup is not None and backup in _LIVE:
                _discard(backup)


def write_stdout(text: str) -> None:
    """Write ``text`` to standard output and flush it.

    Raises
    ------
    OutputError
        Standard output cannot be written (disk full, closed pipe): CLI exit 1
        with ``error: cannot write <stdout>: ...``.
    """
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as exc:
        raise OutputError("<stdout>", exc) from None
