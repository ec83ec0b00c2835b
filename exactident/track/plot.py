"""``plot_tracking``: the certified rank of ``Gamma`` against the training step (optional extra ``plot``).

One panel: the certified ``rank_gamma`` (a certified interval ``[lo, hi]`` drawn as a bar), the float64
rank beside it (dashed), ``dim`` (the rank that identifiability needs, dotted), the verdict as coloured
bands behind the curves (each point's verdict holds from halfway to the previous point to halfway to the
next), and on a second axis at the right the hidden units dead on the probe (and those always active).

matplotlib is imported on first call with the Agg backend (no screen needed); missing, it is an
:class:`~exactident.errors.UnsupportedCaseError` (CLI exit 2).
"""

from __future__ import annotations

import io
import itertools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from exactident.errors import CaseFormatError, UnsupportedCaseError

__all__ = ["VERDICT_COLORS", "plot_tracking", "tracking_figure"]

#: Background colour of each verdict band.
VERDICT_COLORS = {"identifiable": "tab:green", "not-identifiable": "tab:red", "inconclusive": "tab:gray",
                  "error": "black"}


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise UnsupportedCaseError("plotting needs matplotlib: pip install 'exactident[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def tracking_figure(records: Sequence[dict[str, Any]], title: str | None = None) -> Any:
    """The figure of :func:`plot_tracking` (a ``matplotlib.figure.Figure``), not saved.

    Raises
    ------
    UnsupportedCaseError
        matplotlib is not installed; no records.
    """
    plt = _pyplot()
    recs = sorted(records, key=lambda r: r["step"])
    if not recs:
        raise UnsupportedCaseError("no tracking records to plot")
    steps = [r["step"] for r in recs]
    fig, ax = plt.subplots(figsize=(8, 4.5), layout="constrained")
    # verdict bands: each point's verdict from halfway to its neighbours
    edges = [steps[0] - 0.5] + [(a + b) / 2 for a, b in itertools.pairwise(steps)] + [steps[-1] + 0.5]
    seen: set[str] = set()
    for r, lo, hi in zip(recs, edges, edges[1:]):
        v = r.get("verdict") or "error"
        ax.axvspan(lo, hi, color=VERDICT_COLORS.get(v, "tab:gray"), alpha=0.12, lw=0,
                   label=None if v in seen else f"verdict: {v}")
        seen.add(v)
    exact = [(r["step"], r["rank_gamma"]) for r in recs if r.get("rank_gamma") is not None]
    if exact:
        ax.plot(*zip(*exact), "o-", color="tab:blue", ms=4, label="rank Gamma (certified)")
    intervals = [(r["step"], *r["rank_gamma_interval"]) for r in recs if r.get("rank_gamma_interval")]
    if intervals:
        s, lo, hi = zip(*intervals)
        ax.vlines(s, lo, hi, color="tab:blue", lw=3, alpha=0.6, label="rank Gamma (certified interval)")
    floats = [(r["step"], r["float_rank_gamma"]) for r in recs if r.get("float_rank_gamma") is not None]
    if floats:
        ax.plot(*zip(*floats), "x--", color="tab:orange", ms=5, label="float64 rank (default tolerance)")
    dims = [(r["step"], r["dim"]) for r in recs if r.get("dim") is not None]
    if dims:
        ax.plot(*zip(*dims), ":", color="black", drawstyle="steps-mid", label="dim")
    ax.set_xlabel("step")
    ax.set_ylabel("rank")
    ax.set_ylim(bottom=0)
    ax2 = ax.twinx()
    dead = [(r["step"], r["dead_units"]) for r in recs if r.get("dead_units") is not None]
    always = [(r["step"], r["always_active_units"]) for r in recs if r.get("always_active_units") is not None]
    if dead:
        ax2.plot(*zip(*dead), "s-", color="tab:red", ms=3, lw=1, label="dead units")
    if always:
        ax2.plot(*zip(*always), "^-", color="tab:purple", ms=3, lw=1, alpha=0.6, label="always-active units")
    ax2.set_ylabel("hidden units")
    ax2.set_ylim(bottom=0)
    from matplotlib.ticker import MaxNLocator

    for a in (ax, ax2):  # ranks and unit counts are integers: no tick at 1.25 units
        a.yaxis.set_major_locator(MaxNLocator(integer=True))
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    fig.legend(h1 + h2, l1 + l2, loc="outside right upper", fontsize="small")
    ax.set_title(title or "certified rank of Gamma during training")
    return fig


def plot_tracking(records: Sequence[dict[str, Any]], path: str | os.PathLike[str] | None = None,
                  title: str | None = None) -> Any:
    """Plot tracking records: rank and float rank against step, ``dim``, verdict bands, dead units.

    Parameters
    ----------
    records : sequence of dict
        :class:`~exactident.track.core.Tracker` records (or :func:`~exactident.track.core.read_records`).
    path : path, optional
        Write the image there (format from the extension: png, svg, pdf, ...), atomically.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    UnsupportedCaseError
        matplotlib is not installed; no records.
    CaseFormatError
        An image format matplotlib cannot write (naming the path).
    OutputError
        The image cannot be written.
    """
    fig = tracking_figure(records, title)
    if path is not None:
        from exactident.io.atomic import atomic_write_bytes

        fmt = Path(path).suffix.lstrip(".").lower() or "png"
        if fmt not in fig.canvas.get_supported_filetypes():
            raise CaseFormatError(os.fspath(path), "--output", f"unsupported image format {fmt!r}")
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=120)
        atomic_write_bytes(path, buf.getvalue())
    return fig
