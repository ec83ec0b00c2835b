"""Atomic output (docs/cli.md): write beside the target, then ``os.replace``.

A failed run never leaves a half-written file nor overwrites a good one.
A symlink is followed: the temporary file goes beside the link's resolved
target, which is replaced (the link stays a link).  A target that exists and
is not a regular file (a FIFO, a character device such as ``/dev/stdout`` or
``/dev/null``) cannot be replaced by rename without destroying it, so it is
written directly.  Called by :mod:`exactident.io.case`,
:mod:`exactident.crosscheck` and :mod:`exactident.crosscheck.plot`.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from exactident.errors import OutputError

__all__ = ["atomic_path", "atomic_write_bytes", "atomic_write_text", "write_stdout"]


@contextmanager
def atomic_path(path: str | os.PathLike[str], suffix: str = ".tmp") -> Iterator[str]:
    """Yield a path to write to; on success the written data ends up at ``path``.

    For a new or regular file (symlinks followed): a temporary file beside the
    resolved target, which replaces it on success; it gets the old file's
    permissions, or ordinary ones (``0666 & ~umask``) for a new file.  On any
    exception the temporary file is removed and the target is untouched.  For
    an existing non-regular target (FIFO, device): ``path`` itself, written
    directly (no temporary file, no rename).

    Raises
    ------
    OSError
        The temporary file cannot be created (e.g. missing directory).
    """
    try:
        st = os.stat(path)  # follows symlinks, /proc "magic" links to pipes included
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        yield os.fspath(path)  # a FIFO or device: renaming over it would replace it
        return
    target = Path(os.path.realpath(path))  # through symlinks, dangling ones included
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix, dir=target.parent)
    os.close(fd)
    if st is not None:
        mode = stat.S_IMODE(st.st_mode)
    else:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    try:
        os.chmod(tmp, mode)
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (see :func:`atomic_path`)."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_path`)."""
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        fh.write(data)


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
