"""Plots whose legends and texts fit (issue: a legend cut to "rank 172 (righ"), drawn at the figure's own size.

Every text (titles, labels, tick labels, legend entries) and every legend must lie inside the figure,
and no legend may overlap an axes or another legend.  Right values: ``survey --plot`` draws
``min(dim, n N_L)``: for widths ``1,2,1`` (dim 7 - 2 fixed edges... computed by ``network_dim``) and
``n = 2`` samples, ``n N_L = 2 < dim``, so the bound line is at 2.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

import exactident
from exactident.crosscheck.core import summarize
from exactident.crosscheck.plot import case_figure, require_matplotlib, suite_figure

ROOT = Path(__file__).resolve().parents[1]


def _fits(fig) -> None:
    from matplotlib.legend import Legend

    plt = require_matplotlib()
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        box = fig.bbox

        def inside(bb, outer=box) -> bool:
            return outer.x0 - 1 <= bb.x0 and bb.x1 <= outer.x1 + 1 and outer.y0 - 1 <= bb.y0 and bb.y1 <= outer.y1 + 1

        # each axes with what it draws (tick labels in view, labels, title, its legend)
        assert all(inside(ax.get_tightbbox(renderer)) for ax in fig.axes), "an axes' labels leave the figure"
        texts = [*fig.texts, *([fig._suptitle] if fig._suptitle else []), *(t for ax in fig.axes for t in ax.texts)]
        out = [t.get_text() for t in texts if t.get_text().strip() and not inside(t.get_window_extent(renderer))]
        assert out == [], f"texts outside the figure: {out}"
        legends = list(fig.findobj(Legend))
        boxes = [lg.get_window_extent(renderer) for lg in legends]
        plots = [ax.bbox for ax in fig.axes]  # the plotting areas
        for k, (lg, bb) in enumerate(zip(legends, boxes)):
            assert inside(bb), "a legend leaves the figure"
            assert all(inside(t.get_window_extent(renderer), bb) for t in lg.get_texts()), "a legend entry is cut"
            assert not any(bb.overlaps(p) for p in plots), "a legend covers a plot"
            assert not any(bb.overlaps(o) for o in boxes[k + 1:]), "two legends overlap"
    finally:
        plt.close(fig)


@pytest.mark.parametrize("case", ["tiny-111-kink.json", "iris-mlp-4-8-8-3.json"])
def test_case_plot_fits_and_names_both_verdicts(case):
    result = exactident.crosscheck(ROOT / "cases" / case, progress=False)
    fig = case_figure(result)
    assert result.comparison.split(";")[0] in " ".join(fig._suptitle.get_text().split())
    _fits(fig)


def test_suite_plot_fits():
    results = [exactident.crosscheck(ROOT / "cases" / name, progress=False)
               for name in ("tiny-111-kink.json", "tiny-111-kink-plus.json", "boundary-second-layer.json")]
    _fits(suite_figure(results, summarize(results)))


def test_survey_plot_draws_the_binding_bound():
    from exactident.suites.survey import SurveyResult, plot_figure

    # widths 1,2,1: dim = 7 parameters - 2 fixed edges = 5; n = 2 samples, N_L = 1: n N_L = 2 binds
    result = SurveyResult(widths=[1, 2, 1], n_samples=2, seed=0, kind="gaussian", ranks=[2, 2, 1], requested=3)
    assert result.dim == 5 and result.bound == 2
    fig = plot_figure(result)
    xs = sorted(line.get_xdata()[0] for line in fig.axes[0].get_lines())
    labels = " ".join(t.get_text() for t in fig.axes[0].get_legend().get_texts())
    assert xs == [2, 5] and "min(dim, n N_L) = n N_L = 2" in labels
    _fits(fig)
    wide = SurveyResult(widths=[1, 2, 1], n_samples=9, seed=0, kind="gaussian", ranks=[5], requested=1)
    fig = plot_figure(wide)
    assert [line.get_xdata()[0] for line in fig.axes[0].get_lines()] == [5]
    _fits(fig)
