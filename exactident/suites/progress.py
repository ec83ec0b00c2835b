"""Progress on a terminal for the suite commands (tqdm when installed, a counter otherwise, silence in logs)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

__all__ = ["Progress", "progress_iter"]

T = TypeVar("T")


def _tty() -> bool:
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


class Progress:
    """A counter of finished items, drawn on stderr only when stderr is a terminal."""

    def __init__(self, total: int, desc: str, enabled: bool | None = None) -> None:
        self.total, self.desc, self.done = total, desc, 0
        self.enabled = _tty() if enabled is None else enabled
        self._bar: Any = None
        if self.enabled and total > 1:
            try:
                from tqdm import tqdm

                self._bar = tqdm(total=total, desc=desc, unit="case", file=sys.stderr)
            except ImportError:
                self._bar = None

    def update(self, note: str = "") -> None:
        self.done += 1
        if not self.enabled or self.total <= 1:
            return
        if self._bar is not None:
            self._bar.update(1)
            if note:
                self._bar.set_postfix_str(note, refresh=False)
        else:
            print(f"\r{self.desc}: {self.done}/{self.total} {note}", end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self.enabled and self.total > 1:
            print(file=sys.stderr)


def progress_iter(items: Iterable[T], total: int, desc: str) -> Iterator[T]:
    """Yield ``items``, advancing a :class:`Progress` after each."""
    bar = Progress(total, desc)
    try:
        for item in items:
            yield item
            bar.update()
    finally:
        bar.close()
