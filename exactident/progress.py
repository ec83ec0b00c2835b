"""Stage progress for library calls: ``progress=`` of ``check``, ``explain``, ``design``, ``crosscheck``.

The analysis announces its stages with :func:`exactident.budget.stage` (``"forward pass"``,
``"ranks mod p"``, ``"structural certificates"``, ...: the names the terminal progress line
shows).  :func:`showing` listens to them and shows the current stage, its sizes and the
elapsed time with ``tqdm.auto``: a widget in Jupyter when ipywidgets is installed, a text line on
stderr otherwise.  ``progress=None`` (the default) means on in a Jupyter kernel or when
stderr is a terminal, off otherwise (scripts, pipes, tests); ``True``/``False`` force it.

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


@contextlib.contextmanager
def showing(progress: bool | None, title: str) -> Iterator[Listener]:
    """Show the stages announced inside the block (nothing when :func:`enabled` is False).

    The line reads ``TITLE: STAGE (sizes) [elapsed]``; it is left on screen when the block
    ends, so a notebook cell keeps the last stage and the time taken.  The block receives
    the display's listener, to be handed to a child process's ``on_stage``
    (:func:`exactident.budget.run_isolated`), whose stages are not announced here.
    """
    if not enabled(progress):
        yield _nothing
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tqdm.auto warns when ipywidgets is missing, then falls back to text
        from tqdm.auto import tqdm

        bar = tqdm(total=None, file=sys.stderr, bar_format="{desc} [{elapsed}]", dynamic_ncols=True,
                   mininterval=0.2, desc=f"{title}: start")

    last = ["start"]
    drawn = [time.monotonic()]

    def show(name: str, sizes: dict[str, Any]) -> None:
        size = " ".join(f"{k}={v}" for k, v in sizes.items())
        # redrawn when the stage changes (a notebook keeps every redraw of a text line), and within a
        # stage every REDRAW_SECONDS at most (design's points: minutes in one stage)
        now = time.monotonic()
        redraw = name != last[0] or now - drawn[0] >= REDRAW_SECONDS
        bar.set_description_str(f"{title}: {name}" + (f" ({size})" if size else ""), refresh=redraw)
        last[0] = name
        if redraw:
            drawn[0] = now

    _active[0] += 1
    try:
        with listening(show):
            yield show
        bar.set_description_str(f"{title}: done", refresh=False)  # close() draws the last line
    finally:
        _active[0] -= 1
        bar.close()
