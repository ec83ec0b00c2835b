"""Pictures for ``exactident crosscheck --plot`` (optional extra ``plot``: matplotlib).

One case: singular values of the float ``Gamma`` (float64 and float32) on a
log scale, the exact rank's cut marked, the consistent band shaded, and each
policy's tolerance as a horizontal line, so a wrong tolerance is seen to fall
outside the band.  One panel per backend, stacked, each with its legend to its
right, and a title that says which exact verdict the policies are compared with
(the rank rules') and ``check``'s beside it; the figure is laid out so that every
legend and text lies inside it (``constrained`` layout, checked by the tests at the
figure's own size).  A suite: per case, the relative band ``[lo, hi)`` as an
interval on a log axis, the named relative policies and the chosen common
tolerance as vertical lines.

matplotlib is imported lazily (Agg backend, no screen needed); a missing
install is an :class:`~exactident.errors.UnsupportedCaseError` (CLI exit 2).
Called by :mod:`exactident.crosscheck`.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from exactident.crosscheck.core import CaseCrosscheck, SuiteSummary
from exactident.errors import CaseFormatError, UnsupportedCaseError
from exactident.io.atomic import atomic_write_bytes

__all__ = ["case_figure", "plot_case", "plot_format", "plot_suite", "render_case", "render_suite",
           "require_matplotlib", "suite_figure"]

_COLORS = ["tab:purple", "tab:orange", "tab:brown", "tab:pink", "tab:olive", "tab:cyan", "black"]
_STYLE = {"numpy-default": "-", "rtol": "--", "float64-eps": ":", "atol": "-.", "torch-default": "-"}


def require_matplotlib():
    """Import ``matplotlib.pyplot`` with the Agg backend, or raise naming the extra."""
    try:
        import matplotlib
    except ImportError:
        raise UnsupportedCaseError("--plot needs matplotlib: pip install 'exactident[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_format(path: str | os.PathLike[str], option: str = "--plot") -> str:
    """The image format named by ``path``'s extension (``png`` when it has none).

    Checked against the formats matplotlib's Agg canvas can write, so a bad
    name is refused before any computation.

    Raises
    ------
    CaseFormatError
        An extension matplotlib cannot write (CLI exit 2).
    UnsupportedCaseError
        matplotlib is not installed.
    """
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    formats = FigureCanvasAgg.get_supported_filetypes()
    if fmt not in formats:
        raise CaseFormatError(os.fspath(path), option, f"unsupported image format {fmt!r} "
                              f"(supported: {', '.join(sorted(formats))})")
    return fmt


def _render(fig, fmt: str) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=120)  # the layout already fits (no "tight" crop that could cut a legend)
    return buf.getvalue()


def _wrapped(text: str, width: int) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width=width, break_on_hyphens=False))


def plot_case(result: CaseCrosscheck, path: str | os.PathLike[str]) -> None:
    """Draw :func:`render_case` into ``path`` (format from its extension), atomically."""
    atomic_write_bytes(path, render_case(result, plot_format(path)))


def plot_suite(results: Sequence[CaseCrosscheck], summary: SuiteSummary,
               path: str | os.PathLike[str], backend: str = "float64") -> None:
    """Draw :func:`render_suite` into ``path`` (format from its extension), atomically."""
    atomic_write_bytes(path, render_suite(results, summary, plot_format(path), backend))


def render_case(result: CaseCrosscheck, fmt: str = "png") -> bytes:
    """Singular values of ``Gamma`` per backend, the exact cut, the band and each policy's tolerance.

    Returns the image in format ``fmt`` (one :func:`plot_format` accepts).
    """
    plt = require_matplotlib()
    fig = case_figure(result)
    try:
        return _render(fig, fmt)
    finally:
        plt.close(fig)


def case_figure(result: CaseCrosscheck):
    """The matplotlib figure of :func:`render_case` (one stacked panel per backend, legends to the right)."""
    plt = require_matplotlib()
    backends = list(result.spectra)
    fig, axes = plt.subplots(len(backends), 1, figsize=(9.5, 3.1 * len(backends) + 0.9), squeeze=False,
                             layout="constrained")
    r = result.pattern_rank_gamma
    for ax, key in zip(axes[:, 0], backends):
        sp = result.spectra[key]
        s = sp.gamma_sv
        if sp.failure is not None:
            ax.text(0.5, 0.5, f"float pipeline failed:\n{sp.failure.status} at {sp.failure.stage}", ha="center",
                    va="center", transform=ax.transAxes)
            ax.set_title(key, fontsize=9)
            continue
        if s.size == 0:
            ax.text(0.5, 0.5, "Gamma is empty: no singular values", ha="center", va="center", transform=ax.transAxes)
            ax.set_title(f"Gamma {sp.gamma_shape[0]}x{sp.gamma_shape[1]}, {key}", fontsize=9)
            continue
        floor = max(float(s[s > 0].min()) if np.any(s > 0) else 1e-300, 1e-300)
        shown = np.where(s > 0, s, floor)
        idx = np.arange(1, len(s) + 1)
        ax.semilogy(idx[:r], shown[:r], "o", ms=4, color="tab:blue", label=f"sigma_k, k <= exact rank {r}")
        ax.semilogy(idx[r:], shown[r:], "o", ms=4, color="tab:red", label="sigma_k, k > exact rank (exact 0)")
        if 0 < r < len(s):
            ax.axvline(r + 0.5, color="black", lw=1, label=f"exact cut after k = {r}")
        lo, hi = sp.band(r, result.rank_alpha)["gamma_abs"]
        if lo < hi and not sp.n_pattern_flips:  # another matrix when the pattern differs: no advice
            ax.axhspan(max(lo, floor / 10), hi if math.isfinite(hi) else shown.max() * 10,
                       color="tab:green", alpha=0.12, label="band: tolerances giving rank r")
        mine = [o for o in result.outcomes if o.policy.startswith(key + "/")]
        for o, color in zip(mine, _COLORS):
            if o.tol_gamma is None:
                continue
            rule = o.policy.split("/", 1)[1]
            ax.axhline(max(o.tol_gamma, floor / 10), ls=_STYLE.get(rule.split("=")[0], "-"), color=color,
                       lw=1.4, label=f"tol {rule}: rank {o.rank_gamma} ({'right' if o.right_ranks else 'WRONG'})")
        ax.set_title(f"Gamma {sp.gamma_shape[0]}x{sp.gamma_shape[1]}, {key}", fontsize=9)
        ax.set_xlabel("k")
        ax.set_ylabel("sigma_k of float Gamma", fontsize=8)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    fig.suptitle(_wrapped(f"{result.name}: {result.comparison}; exact rank {r} of dim {result.dim} "
                          "(policies marked against the rank rules)", 110), fontsize=9)
    return fig


def render_suite(results: Sequence[CaseCrosscheck], summary: SuiteSummary, fmt: str = "png",
                 backend: str = "float64") -> bytes:
    """Per-case relative bands (``rtol``) on a log axis, the policies and the chosen common ``rtol``.

    Returns the image in format ``fmt`` (one :func:`plot_format` accepts).
    """
    plt = require_matplotlib()
    fig = suite_figure(results, summary, backend)
    try:
        return _render(fig, fmt)
    finally:
        plt.close(fig)


def suite_figure(results: Sequence[CaseCrosscheck], summary: SuiteSummary, backend: str = "float64"):
    """The matplotlib figure of :func:`render_suite` (legend and notes inside the figure)."""
    plt = require_matplotlib()
    rows = [(r.name, r.spectra[backend].band(r.pattern_rank_gamma, r.rank_alpha)["rel"], r)
            for r in results if backend in r.spectra and r.spectra[backend].failure is None]
    fig, ax = plt.subplots(figsize=(10, 0.32 * len(rows) + 2.2), layout="constrained")
    ends = [v for _, band, _ in rows for v in band if 0 < v < math.inf]
    left = min(ends + [1e-18]) / 10
    right = 10.0
    for y, (_name, (lo, hi), r) in enumerate(rows):
        a, b = max(lo, left), min(hi, right)
        color = "tab:blue" if lo < hi else "tab:red"
        ax.plot([a, b], [y, y], color=color, lw=5, solid_capstyle="butt")
        sp = r.spectra[backend]
        ax.plot([max(sp.gamma_shape) * sp.eps], [y], "|", color="black", ms=10,
                label="numpy-default rtol = max(m,n) eps" if y == 0 else None)
        if not r.fixable:
            ax.text(right, y, "  no tolerance fixes the verdict", va="center", fontsize=7, color="tab:red",
                    clip_on=True)
        elif sp.n_pattern_flips:
            ax.text(right, y, "  float pattern differs: left out", va="center", fontsize=7, color="tab:orange",
                    clip_on=True)
    lines = {"rtol=1e-6": 1e-6, "rtol=1e-9": 1e-9}
    for label, x in lines.items():
        ax.axvline(x, ls="--", color="gray", lw=1)
        ax.text(x, -0.8, label, fontsize=7, va="bottom", ha="center", color="gray")
    entry = summary.bands.get(backend)
    if entry and entry["exists"]:
        ax.axvline(entry["chosen"], color="tab:green", lw=2, label=f"chosen common rtol {entry['chosen']:.2g}")
    elif entry:
        ax.set_title(_wrapped("no common band: " + entry["conflict"]["needs_rtol_at_least"]["case"] + " vs "
                              + entry["conflict"]["needs_rtol_below"]["case"], 90), fontsize=9, color="tab:red")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_xscale("log")
    ax.set_xlim(left, right * 1e3)
    ax.set_ylim(len(rows) - 0.5, -1.3)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([name for name, _, _ in rows], fontsize=7)
    ax.set_xlabel(f"relative tolerance rtol = tol / sigma_max ({backend}); bar = [sigma_(r+1), sigma_r) / sigma_1")
    return fig
