"""Atomic output (SPEC §5): write beside the target, then ``os.replace``.

A failed run never leaves a half-written file nor overwrites a good one.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

__all__ = ["atomic_path", "atomic_write_text"]


@contextmanager
def atomic_path(path: str | os.PathLike[str], suffix: str = ".tmp") -> Iterator[str]:
    """Yield a temporary path beside ``path``; on success it replaces ``path``.

    The file gets ordinary permissions (``0666 & ~umask``), not mkstemp's 0600.
    On any exception the temporary file is removed and ``path`` is untouched.
    """
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix, dir=target.parent or ".")
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_path(path) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")
