"""The hidden-symmetry survey of Grigsby, Lindsey, Rolnick (ICML 2023), exactly (docs/symmetries.md).

Architectures :func:`paper_architecture`: ``(n0, w, ..., w, 1)`` with ``n0 = w`` and ``d`` layers
(the paper's depth ``d``: ``d - 1`` hidden layers of width ``w``);
weights and biases at PyTorch's default initialisation of ``nn.Linear``
(``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` for both, as float32), drawn by a seeded
numpy generator and converted exactly to rationals; a batch of ``dim + 10``
standard Gaussian inputs (float64, converted exactly).  Per trial:

- ``batch``: ``rank J`` at the Gaussian batch (mod a prime; the *batch functional
  dimension* a float tool estimates);
- ``[lower, upper]``: :func:`exactident.symmetry.fdim.functional_dimension` on
  ``R^n``, started from the batch (random points at scales up to ``2^12``, then
  random lines walked through every activation region they cross, no point
  search), with the mechanisms of the missing dimensions; ``lower_random`` is the
  lower bound before the line walk.

Each trial's generator is seeded by ``(seed, n0, depth, width, trial)``: the same
arguments give the same parameters and the same table on every platform (numpy's
``PCG64`` and ``uniform``/``standard_normal`` are bit-stable).

Also: exact rational witnesses ``(theta, X)`` with ``rank J = dim`` for small
architectures (:func:`witness`) and the survey of architectures with a width-1
hidden layer (:func:`survey_architectures`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import flint
import numpy as np

from exactident.errors import UnsupportedCaseError
from exactident.model.fixed_edges import FixedEdges
from exactident.model.network import Network
from exactident.symmetry.fdim import functional_dimension, lower_bound

__all__ = ["INITS", "PAPER_DEPTHS", "PAPER_WIDTHS", "CellResult", "exact", "gaussian_batch", "paper_architecture",
           "survey_architectures", "survey_cell", "torch_default_network", "witness"]

#: The depths of the paper's grid: ``d`` layers (affine maps), ``d - 1`` of them hidden.
PAPER_DEPTHS = (4, 5, 6)
#: The hidden widths of the paper's grid.
PAPER_WIDTHS = (5, 10, 15)


def paper_architecture(depth: int, width: int, n0: int | None = None) -> tuple[int, ...]:
    """The paper's ``(n0, n1, ..., n_d)`` with ``n0 = n1 = ... = n_{d-1} = width`` and ``n_d = 1``.

    ``depth`` is the paper's ``d``, the number of layers (affine maps): ``d - 1`` hidden layers.
    ``n0`` overrides the input width.

    Examples
    --------
    >>> paper_architecture(4, 5)
    (5, 5, 5, 5, 1)
    """
    return (width if n0 is None else n0, *([width] * (depth - 1)), 1)


def exact(v: float) -> flint.fmpq:
    """A binary float as the exact rational it is.

    Examples
    --------
    >>> exact(0.1)
    3602879701896397/36028797018963968
    """
    p, q = Fraction(float(v)).as_integer_ratio()
    return flint.fmpq(p, q)


#: Weight initialisations: name -> description (the bias is ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` in both).
INITS = {"torch": "PyTorch's nn.Linear default: W ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (kaiming_uniform_, a = sqrt(5))",
         "he": "He (Kaiming) uniform for ReLU: W ~ U(-sqrt(6/fan_in), sqrt(6/fan_in))"}


def torch_default_network(widths: Sequence[int], rng: np.random.Generator, init: str = "torch") -> Network:
    """Weights as :data:`INITS` says, ``b ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))``, as float32, converted exactly.

    (``kaiming_uniform_(a=sqrt(5))``, PyTorch's default, gives the weight bound ``sqrt(6 / ((1 + 5)
    fan_in)) = 1/sqrt(fan_in)``; He's gain ``sqrt(2)`` gives ``sqrt(6 / fan_in)``.)
    """
    W: list[flint.fmpq_mat] = []
    b: list[list[flint.fmpq]] = []
    for l in range(len(widths) - 1):
        bound = 1.0 / np.sqrt(widths[l])
        wbound = bound if init == "torch" else np.sqrt(6.0 / widths[l])
        Wl = rng.uniform(-wbound, wbound, (widths[l + 1], widths[l])).astype(np.float32)
        bl = rng.uniform(-bound, bound, widths[l + 1]).astype(np.float32)
        W.append(flint.fmpq_mat([[exact(v) for v in row] for row in Wl]))
        b.append([exact(v) for v in bl])
    return Network(tuple(widths), W, b)


def gaussian_batch(n0: int, n: int, rng: np.random.Generator) -> list[list[flint.fmpq]]:
    """``n`` standard Gaussian points (float64), exactly."""
    return [[exact(v) for v in row] for row in rng.standard_normal((n, n0))]


@dataclass
class CellResult:
    """The trials of one architecture.

    Attributes
    ----------
    widths : list of int
    trials : list of dict
        ``{"batch", "lower", "upper", "mechanisms": {kind: dimensions}, "seconds"}`` per trial.
    """

    widths: list[int]
    seed: int
    init: str = "torch"
    trials: list[dict[str, Any]] = field(default_factory=list)
    requested: int = 0
    seconds: float = 0.0

    @property
    def dim(self) -> int:
        """``#params - #hidden``."""
        w = self.widths
        return sum(w[l] * w[l + 1] for l in range(len(w) - 1)) + w[-1]

    def count(self, what: str) -> int:
        """Trials with ``batch`` / ``lower`` / ``lower_random`` = dim (``"batch"``, ``"full"``, ``"random"``),
        ``upper < dim`` (``"hidden"``), bounds equal (``"settled"``), a complete region cover (``"covered"``)."""
        d = self.dim
        test: dict[str, Callable[[dict[str, Any]], bool]] = {
            "batch": lambda t: t["batch"] == d, "full": lambda t: t["lower"] == d,
            "random": lambda t: t.get("lower_random", t["lower"]) == d,
            "hidden": lambda t: t["upper"] < d, "settled": lambda t: t["lower"] == t["upper"],
            "covered": lambda t: bool(t.get("cover") and t["cover"]["complete"])}
        return sum(1 for t in self.trials if test[what](t))

    def mechanisms(self) -> dict[str, tuple[int, int]]:
        """Kind -> (trials where it appears, total dimensions it proves missing)."""
        trials: Counter[str] = Counter()
        dims: Counter[str] = Counter()
        for t in self.trials:
            for k, d in t["mechanisms"].items():
                trials[k] += 1
                dims[k] += d
        return {k: (trials[k], dims[k]) for k in sorted(trials)}

    def to_dict(self) -> dict[str, Any]:
        """JSON object of the cell (docs/symmetries.md)."""
        n = len(self.trials)
        return {"widths": self.widths, "depth": len(self.widths) - 2, "layers": len(self.widths) - 1,
                "width": self.widths[1], "dim": self.dim,
                "seed": self.seed, "init": self.init, "trials": n, "trials_requested": self.requested,
                "full_at_batch": self.count("batch"), "full_random_points": self.count("random"),
                "full_certified": self.count("full"),
                "hidden_proved": self.count("hidden"), "settled": self.count("settled"),
                "covered": self.count("covered"),
                "fraction_full": self.count("full") / n if n else None,
                "mechanisms": {k: {"trials": a, "dimensions": b} for k, (a, b) in self.mechanisms().items()},
                "per_trial": self.trials, "seconds": round(self.seconds, 2)}


def _trial(widths: Sequence[int], rng: np.random.Generator, seed: int, max_boxes: int, init: str,
           lines: int, walk_seconds: float | None, regions: int | None, region_seconds: float | None
           ) -> dict[str, Any]:
    start = time.perf_counter()
    net = torch_default_network(widths, rng, init)
    X = gaussian_batch(widths[0], net.dim + 10, rng)
    batch, _, _ = lower_bound(net, X, None, FixedEdges({}), seed=seed, rounds=0)
    r = functional_dimension(net, X, seed=seed, search=False, max_boxes=max_boxes, lines=lines,
                             walk_seconds=walk_seconds, regions=regions, region_seconds=region_seconds)
    mech: Counter[str] = Counter()
    for m in r.mechanisms:
        mech[m["kind"]] += m["dimensions"]
    return {"batch": batch, "lower_random": r.lower if r.lower_random is None else r.lower_random,
            "lower": r.lower, "upper": r.upper, "mechanisms": dict(mech),
            "cover": None if r.cover is None else {k: r.cover[k] for k in ("regions", "complete", "seconds")},
            "seconds": round(time.perf_counter() - start, 2)}


def survey_cell(widths: Sequence[int], trials: int, seed: int = 0, *, init: str = "torch", max_boxes: int = 256,
                budget: float | None = None, lines: int = 4096, walk_seconds: float | None = 60.0,
                regions: int | None = None, region_seconds: float | None = 120.0,
                progress: Callable[[str], None] | None = None) -> CellResult:
    """``trials`` draws of one architecture (module docstring); no trial starts after ``budget`` seconds.

    ``lines`` and ``walk_seconds`` bound the line walk of each trial's lower bound
    (:func:`exactident.symmetry.linewalk.walk_lower_bound`; ``lines = 0``: none); ``regions`` and
    ``region_seconds`` the exact region cover (:mod:`exactident.symmetry.regions`; ``regions = 0``:
    none), as in :func:`exactident.symmetry.fdim.functional_dimension`.

    Examples
    --------
    >>> c = survey_cell([2, 2, 1], 2, seed=0)
    >>> c.dim, len(c.trials), all(t["lower"] <= t["upper"] <= c.dim for t in c.trials)
    (7, 2, True)
    """
    out = CellResult(list(widths), seed, init, requested=trials)
    start = time.perf_counter()
    for t in range(trials):
        if budget is not None and time.perf_counter() - start > budget:
            break
        rng = np.random.default_rng([seed, widths[0], len(widths) - 2, widths[1], t])
        out.trials.append(_trial(widths, rng, seed, max_boxes, init, lines, walk_seconds, regions, region_seconds))
        if progress is not None:
            progress(f"{widths}: trial {t + 1}/{trials}")
    out.seconds = time.perf_counter() - start
    return out


def survey_architectures(archs: Sequence[Sequence[int]], trials: int, seed: int = 0, **kw: Any) -> list[CellResult]:
    """:func:`survey_cell` for each architecture (e.g. the width-1 ones of docs/symmetries.md)."""
    return [survey_cell(a, trials, seed, **kw) for a in archs]


def witness(widths: Sequence[int], seed: int = 0, tries: int = 16) -> dict[str, Any] | None:
    """Exact ``(theta, X)`` with ``rank J(X, theta) = dim`` certified mod a prime, or None after ``tries`` thetas.

    Try ``t`` draws ``theta`` with the generator seeded by ``(seed, *widths, t)``: for ``t <
    tries / 2`` small rationals ``p/q`` (``|p| <= 4``, ``q <= 3``), then dyadics with denominator
    8: He-scaled Gaussian weights ``N(0, 2 / fan_in)`` and ``N(0, 1/4)`` biases, rounded (up to
    ``3 tries / 4``), then weights of size ``1/2..2`` whose signs alternate (``(-1)^(i+j)``) between
    hidden layers and biases in ``[-1/2, 1/2]``.  ``X``:
    the dyadic points of :func:`exactident.symmetry.fdim.functional_dimension`.
    """
    for t in range(tries):
        rng = np.random.default_rng([seed, *widths, t])
        if t < tries // 2:
            W = [[[flint.fmpq(int(rng.integers(-4, 5)), int(rng.integers(1, 4))) for _ in range(widths[l])]
                  for _ in range(widths[l + 1])] for l in range(len(widths) - 1)]
            b = [[flint.fmpq(int(rng.integers(-4, 5)), int(rng.integers(1, 4))) for _ in range(widths[l + 1])]
                 for l in range(len(widths) - 1)]
        elif t < 3 * tries // 4:
            W = [[[flint.fmpq(int(v), 8) for v in row] for row in
                  np.rint(rng.standard_normal((widths[l + 1], widths[l])) * np.sqrt(2.0 / widths[l]) * 8)]
                 for l in range(len(widths) - 1)]
            b = [[flint.fmpq(int(v), 8) for v in np.rint(rng.standard_normal(widths[l + 1]) * 4)]
                 for l in range(len(widths) - 1)]
        else:  # hidden-to-hidden weights with alternating signs: every neuron can switch far out
            W = []
            for l in range(len(widths) - 1):
                M = rng.integers(4, 17, size=(widths[l + 1], widths[l]))
                S = (rng.choice([-1, 1], size=M.shape) if l in (0, len(widths) - 2) else
                     np.array([[1 - 2 * ((i + j) % 2) for j in range(widths[l])] for i in range(widths[l + 1])]))
                W.append([[flint.fmpq(int(v), 8) for v in row] for row in M * S])
            b = [[flint.fmpq(int(v), 8) for v in rng.integers(-4, 5, size=widths[l + 1])]
                 for l in range(len(widths) - 1)]
        if any(all(w == 0 for w in W[l][i]) and b[l][i] == 0 for l in range(len(widths) - 2)
               for i in range(widths[l + 1])):
            continue
        net = Network(tuple(widths), [flint.fmpq_mat(M) for M in W], b)
        try:
            r = functional_dimension(net, seed=t, search=False, max_boxes=64)
        except UnsupportedCaseError:  # every input a tie (a neuron fed only by dead ones): try another draw
            continue
        if not r.no_hidden_symmetries and r.lower < r.upper:
            r = functional_dimension(net, seed=t, search=True, max_boxes=64)
        if r.no_hidden_symmetries and r.prime:  # a prime that certifies rank J(X) = dim, as the witness says
            return {"widths": list(widths), "dim": net.dim, "prime": r.prime, "try": t,
                    "weights": [[[str(v) for v in row] for row in Wl] for Wl in W],
                    "biases": [[str(v) for v in bl] for bl in b],
                    "sample": [[str(v) for v in x] for x in r.points]}
    return None
