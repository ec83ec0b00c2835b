"""Stage progress for library calls: ``progress=`` of ``check``, ``explain``, ``design``, ``crosscheck``.

The analysis announces its stages with :func:`exactident.budget.stage` (``"forward pass"``,
``"ranks mod p"``, ``"structural certificates"``, ...: the names the terminal progress line
shows).  :func:`showing` listens to them and shows the current stage, its sizes and the
elapsed time: in a Jupyter kernel one display output updated in place (so a saved notebook and
its HTML export keep one line), elsewhere a ``tqdm`` line on stderr.  ``progress=None`` (the
default) means on in a Jupyter kernel or when stderr is a terminal, off otherwise (scripts,
pipes, tests); ``True``/``False`` force it.

Standard library only at import; tqdm is imported when a display is shown.
"""

from __future__ import annotations

import contextlib
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from exactident.budget import listening

__all__ = ["Listener", "enabled", "showing"]

#: A stage listener: ``listener(stage_name, sizes)`` (as :func:`exactident.budget.listening` takes).
Listener = Callable[[str, dict[str, Any]], None]
#: A stage that reports its own progress (design's new points) is redrawn at most this often.
REDRAW_SECONDS = 5.0
_active = [0]  # displays open now: a call inside a shown call (explain -> check) shows nothing more


def _in_kernel() -> bool:
    shell = sys.modules.get("IPython")
    get = getattr(shell, "get_ipython", None)
    return get is not None and "ipykernel" in sys.modules and get() is not None


def enabled(progress: bool | None) -> bool:
    """``progress`` itself when given; for None, whether this is a Jupyter kernel or stderr is a terminal.

    Examples
    --------
    >>> enabled(True), enabled(False)
    (True, False)
    """
    if _active[0]:
        return False
    if progress is not None:
        return bool(progress)
    if _in_kernel():
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def _nothing(name: str, sizes: dict[str, Any]) -> None:
    return None


def _clock(seconds: float) -> str:
    """``mm:ss`` (``h:mm:ss`` past an hour), as tqdm's elapsed time."""
    m, sec = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m:02d}:{sec:02d}"


class _NotebookLine:
    """One display output in a Jupyter cell, updated in place (an IPython display id).

    A text progress bar on stderr redraws with carriage returns, which a saved notebook keeps
    one per redraw (a static HTML export shows them all); an updated display keeps one line:
    the last one, which names the stages passed and the time taken.
    """

    def __init__(self, title: str) -> None:
        from IPython.display import display

        self.title, self.start = title, time.monotonic()
        self.stages: list[str] = []
        self.handle = display({"text/plain": f"{title}: start [00:00]"}, raw=True, display_id=True)

    def set(self, text: str, stage: str | None = None) -> None:
        if stage is not None and (not self.stages or self.stages[-1] != stage):
            self.stages.append(stage)
        if self.handle is not None:
            self.handle.update({"text/plain": f"{text} [{_clock(time.monotonic() - self.start)}]"}, raw=True)

    def close(self) -> None:
        passed = list(dict.fromkeys(self.stages))  # each stage once, in order
        shown = ", ".join(passed[:12]) + (f", ... ({len(passed)} stages)" if len(passed) > 12 else "")
        self.set(f"{self.title}: done" + (f" ({shown})" if shown else ""))


class _TextLine:
    """The tqdm.auto display (a widget, or a text line on stderr) of :func:`showing`."""

    def __init__(self, title: str) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tqdm.auto warns when ipywidgets is missing, then falls back to text
            from tqdm.auto import tqdm

            self.bar = tqdm(total=None, file=sys.stderr, bar_format="{desc} [{elapsed}]", dynamic_ncols=True,
                            mininterval=0.2, desc=f"{title}: start")
        self.title = title

    def set(self, text: str, stage: str | None = None, refresh: bool = True) -> None:
        self.bar.set_description_str(text, refresh=refresh)

    def close(self) -> None:
        self.bar.set_description_str(f"{self.title}: done", refresh=False)  # close() draws the last line
        self.bar.close()


@contextlib.contextmanager
def showing(progress: bool | None, title: str) -> Iterator[Listener]:
    """Show the stages announced inside the block (nothing when :func:`enabled` is False).

    The line reads ``TITLE: STAGE (sizes) [elapsed]``; it is left on screen when the block
    ends, so a notebook cell keeps the last stage and the time taken.  In a Jupyter kernel it
    is one display output updated in place, so a saved notebook (or its static HTML export)
    keeps one line, ``TITLE: done (stages passed) [elapsed]``, not one per redraw; elsewhere
    a tqdm line on stderr.  The block receives the display's listener, to be handed to a child
    process's ``on_stage`` (:func:`exactident.budget.run_isolated`), whose stages are not
    announced here.
    """
    if not enabled(progress):
        yield _nothing
        return
    line: _NotebookLine | _TextLine = _NotebookLine(title) if _in_kernel() else _TextLine(title)
    last = ["start"]
    drawn = [time.monotonic()]

    def show(name: str, sizes: dict[str, Any]) -> None:
        size = " ".join(f"{k}={v}" for k, v in sizes.items())
        # redrawn when the stage changes, and within a stage every REDRAW_SECONDS at most (design's
        # points: minutes in one stage)
        now = time.monotonic()
        redraw = name != last[0] or now - drawn[0] >= REDRAW_SECONDS
        text = f"{title}: {name}" + (f" ({size})" if size else "")
        if isinstance(line, _TextLine):
            line.set(text, name, refresh=redraw)
        elif redraw:
            line.set(text, name)
        last[0] = name
        if redraw:
            drawn[0] = now

    _active[0] += 1
    try:
        with listening(show):
            yield show
    finally:
        _active[0] -= 1
        line.close()
