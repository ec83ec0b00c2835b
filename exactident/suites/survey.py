"""``survey``: the distribution of ``R_Gamma`` (the batch functional dimension) over random parameters.

Each trial draws the parameters and a sample of ``n`` inputs, either Gaussian
float64 values converted *exactly* to rationals (``Fraction`` of a binary64
is exact) or small-denominator rationals, and computes ``R_Gamma = rank
Gamma(X, theta)`` exactly (:func:`exactident.check`, certified modular ranks)
at the ``z >= 0`` activation pattern -- the rank a float tool approximates.
``R_Gamma = dim`` is ``C_S`` (Theorem 9); ``min(dim, n N_L)`` is the largest
possible value.  Trials are keyed by hashing (widths, n, seed, trial index,
kind): the same arguments give the same parameters (up to the platform's
``log``/``cos`` for Gaussian draws) and the same table.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from exactident.suites.draft import Draft, draft_to_case_obj, n_at, network_dim
from exactident.suites.rng import HashRng

__all__ = ["KINDS", "SurveyResult", "draw_network", "plot_figure", "render_plot", "survey"]

#: What the parameters and samples are drawn from.
KINDS = {"gaussian": "Gaussian float64 values (standard normal), converted exactly to rationals",
         "rational": "small-denominator rationals p/q, |p| <= 6, q in 1..4 (samples |p| <= 12, q in 1..5)"}


@dataclass
class SurveyResult:
    """The ranks a :func:`survey` found, with what it drew them from.

    Attributes
    ----------
    widths : list of int
        ``N_0, ..., N_L``.
    n_samples : int
        ``n``, the sample size of every trial.
    seed : int
    kind : str
        A key of :data:`KINDS`.
    ranks : list of int
        ``R_Gamma`` of each trial that ran, in order (exact, between 0 and :attr:`bound`).
    ties : int
        Trials whose sample had a tie (the rank is the one of the ``z >= 0`` pattern).
    requested : int
        Trials requested (more than ``len(ranks)`` when the budget stopped the survey).
    seconds : float
        Wall-clock time.
    """

    widths: list[int]
    n_samples: int
    seed: int
    kind: str
    ranks: list[int] = field(default_factory=list)
    ties: int = 0
    requested: int = 0
    seconds: float = 0.0

    @property
    def dim(self) -> int:
        """``dim``, the number of free parameters (``rank Gamma <= dim``)."""
        return network_dim(self.widths)

    @property
    def bound(self) -> int:
        """``min(dim, n N_L)``: the largest possible ``R_Gamma``."""
        return min(self.dim, self.n_samples * self.widths[-1])

    def distribution(self) -> dict[int, int]:
        """Rank -> number of trials, by increasing rank."""
        return dict(sorted(Counter(self.ranks).items()))

    @property
    def reaching_dim(self) -> int:
        """Trials with ``R_Gamma = dim`` (``C_S``, Theorem 9)."""
        return sum(r == self.dim for r in self.ranks)

    def to_dict(self) -> dict[str, Any]:
        """The ``exactident-survey/1`` JSON object (``survey --json``)."""
        return {"format": "exactident-survey/1", "widths": self.widths, "n_samples": self.n_samples,
                "seed": self.seed, "draws": self.kind, "draws_description": KINDS[self.kind], "dim": self.dim,
                "bound": self.bound, "trials": len(self.ranks), "trials_requested": self.requested,
                "distribution": {str(k): v for k, v in self.distribution().items()},
                "reaching_dim": self.reaching_dim, "trials_with_ties": self.ties, "ranks": self.ranks}

    def render(self) -> str:
        """The terminal table of the distribution."""
        from exactident.suites.render import table

        t = len(self.ranks)
        lines = [f"survey: widths {','.join(map(str, self.widths))} (dim {self.dim}), n = {self.n_samples} samples, "
                 f"{t} trials{'' if t == self.requested else f' of {self.requested} (budget reached)'}, "
                 f"seed {self.seed}",
                 f"draws: {KINDS[self.kind]}", ""]
        lines += table(["R_Gamma", "trials", "fraction"],
                       [[str(r), str(c), f"{c / t:.3f}"] for r, c in self.distribution().items()])
        frac = f"{self.reaching_dim / t:.3f}" if t else "-"
        lines += ["", f"reaching dim = {self.dim}: {self.reaching_dim}/{t} ({frac}); "
                  f"largest possible min(dim, n*N_L) = {self.bound}; trials with ties: {self.ties}",
                  f"time {self.seconds:.1f} s"]
        return "\n".join(lines) + "\n"


def draw_network(widths: list[int], n: int, seed: int, trial: int, kind: str) -> Draft:
    """The parameters and sample of one trial (exact rationals)."""
    rng = HashRng("exactident-survey/1", list(widths), n, seed, trial, kind)
    if kind == "gaussian":
        def num() -> Fraction:
            return Fraction(rng.gauss())

        def sample() -> Fraction:
            return num()
    else:
        def num() -> Fraction:
            return rng.rational(-6, 6, (1, 2, 3, 4))

        def sample() -> Fraction:
            return rng.rational(-12, 12, (1, 2, 3, 4, 5))
    L = len(widths) - 1
    W = [[[num() for _ in range(widths[l])] for _ in range(widths[l + 1])] for l in range(L)]
    b = [[num() for _ in range(widths[l + 1])] for l in range(L)]
    X = [[sample() for _ in range(widths[0])] for _ in range(n)]
    return Draft(list(widths), W, b, X)


def survey(widths: list[int], trials: int, n_samples: int | None = None, seed: int = 0, kind: str = "gaussian",
           budget: float | None = None, progress: Callable[[int, str], Any] | None = None) -> SurveyResult:
    """Draw ``trials`` random networks and samples, and collect ``R_Gamma`` exactly.

    Parameters
    ----------
    widths : list of int
    trials : int
    n_samples : int, optional
        Default: the smallest ``n`` with ``n N_L >= dim``.
    seed : int
    kind : {"gaussian", "rational"}
    budget : float, optional
        Seconds; no trial starts after it (the result says how many ran).

    Examples
    --------
    >>> r = survey([1, 1, 1], trials=3, seed=0, kind="rational", progress=lambda total, desc: None)
    >>> r.dim, len(r.ranks), all(0 <= x <= 3 for x in r.ranks)
    (3, 3, True)
    """
    from exactident.check import check
    from exactident.io.case import parse_case
    from exactident.suites.progress import Progress

    n = n_samples if n_samples is not None else n_at(widths)
    result = SurveyResult(list(widths), n, seed, kind, requested=trials)
    start = time.perf_counter()
    bar = (progress or (lambda total, desc: Progress(total, desc)))(trials, "survey")
    try:
        for t in range(trials):
            if budget is not None and time.perf_counter() - start > budget:
                break
            case = parse_case(draft_to_case_obj(draw_network(widths, n, seed, t, kind), f"survey-{t}"))
            report = check(case, numeric=False, max_resolutions=1, exact_ranks=True)
            rank = report.pattern_ranks[0] if report.pattern_ranks else report.rank_gamma
            if rank is None:  # exact_ranks=True certifies every rank of a plain MLP
                from exactident.errors import InvariantViolation

                raise InvariantViolation(f"survey trial {t}: check(exact_ranks=True) returned no rank")
            result.ranks.append(int(rank))
            result.ties += report.on_boundary
            if bar is not None:
                bar.update()
    finally:
        if bar is not None:
            bar.close()
    result.seconds = time.perf_counter() - start
    return result


def render_plot(result: SurveyResult, fmt: str) -> bytes:
    """A bar chart of the ``R_Gamma`` distribution with ``dim`` and the binding bound ``min(dim, n N_L)``
    marked (needs matplotlib)."""
    import io

    from exactident.crosscheck.plot import require_matplotlib

    plt = require_matplotlib()
    fig = plot_figure(result)
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=120)  # constrained layout: legend and title already inside
    plt.close(fig)
    return buf.getvalue()


def plot_figure(result: SurveyResult):
    """The matplotlib figure of :func:`render_plot`: bars, ``dim`` and ``min(dim, n N_L)`` (the largest
    possible ``R_Gamma``; one line when they are equal), the legend to the right."""
    from exactident.crosscheck.plot import require_matplotlib

    plt = require_matplotlib()
    dist = result.distribution()
    fig, ax = plt.subplots(figsize=(8, 3.5), layout="constrained")
    ax.bar(list(dist), list(dist.values()), color="tab:blue", width=0.8, label="trials with this R_Gamma")
    nN = result.n_samples * result.widths[-1]
    if result.bound < result.dim:  # the sample is too small: n N_L rows bind before dim
        ax.axvline(result.bound, color="tab:orange", linestyle="-", lw=2,
                   label=f"bound min(dim, n N_L) = n N_L = {result.bound}")
        ax.axvline(result.dim, color="tab:red", linestyle="--", label=f"dim = {result.dim} (out of reach)")
    else:
        ax.axvline(result.dim, color="tab:red", linestyle="--",
                   label=f"bound min(dim, n N_L) = dim = {result.dim} (n N_L = {nN})")
    ax.set_xlabel("R_Gamma (batch functional dimension)")
    ax.set_ylabel("trials")
    ax.set_title(f"widths {','.join(map(str, result.widths))}, n = {result.n_samples}, {result.kind} draws",
                 fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return fig
