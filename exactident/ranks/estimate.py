"""A rough cost estimate of ``check`` before the work: which stages will run and about how long.

Computed from the case alone, cheaply: the shape (``Gamma`` is ``n N_L x dim``), the
number of visible ties (``2^k`` tie resolutions on the boundary, each with its own
ranks), and the digit sizes of the numbers (an entry of ``Gamma`` is a sum of products
of ``L`` weights and one input, so it has about ``(L + 1)`` times the digits of one
number).  The exact forward pass is run to find the ties (a small part of the work).
The model is deliberately simple (docs/performance.md, "What will be slow"): it is
monotone in every size and meant to tell seconds from minutes from hours, not to
predict a time.  On a terminal, ``check`` prints it before the work and applies a
default budget when it is large (:data:`TERMINAL_BUDGET`, docs/cli.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ESTIMATE_LARGE", "EXACT_FREE_SECONDS", "TERMINAL_BUDGET", "Estimate", "duration_text", "estimate",
           "estimate_sizes", "exact_rank_is_cheap", "exact_rank_seconds", "verdict_rank_seconds"]

#: An estimate above this many seconds is "large": on a terminal a default budget then applies.
ESTIMATE_LARGE = 60.0
#: The default budget (seconds per case) of ``check`` on a terminal when the estimate is large.
TERMINAL_BUDGET = 600.0

# Seconds per unit of work, fitted on [3, 4, 4, 2] networks with 20 samples of 5- to
# 500-digit fractions (benchmarks/estimate_calibration.py, docs/performance.md) on one
# core, then the per-entry and per-operation constants brought down to the times of
# trained networks of a few thousand rows and columns (a 30-40-20-3 net on 1000 rows checks
# in under 5 s; digits 64-32-10 on 1797 rows in 17 s, its float64 pipeline in 15 s), where
# the elimination mod p and the SVD run in BLAS; rough by design.
_PER_ENTRY = 2e-7          # reading one entry of Gamma mod p / the forward pass, per 100 digits
_PER_RANK_OP = 2e-10       # one multiply-add of an elimination mod p (BLAS, float64 products)
_PER_EXACT_OP = 4.6e-8     # rows x cols x rank^2 of an exact kernel, per (100 digits)^1.5 of the entries
_PER_FLOAT_OP = 6e-11      # one multiply-add of a float64 SVD
_FLOAT_FIXED = 0.3         # the float pipeline's fixed cost (one Jacobian, rounding bounds)
_PER_STRUCTURAL = 1e-7     # one (sample, neuron) sign check of the structural search, per 100 digits


# The exact rank once a certified interval settles the verdict (ranks/certify.py, "verdict first"):
# ``cols - rank_p`` kernel vectors over Q (semi-local, Dixon, CRT), each checked exactly on every row.
# Fitted on a trained scikit-learn digits net (17,970 x 2,378; benchmarks/train_deficient.py, 64-32-10):
# 202 missing vectors, about 20 s CPU (semi-local kernel, Dixon solve, exact check on every row).
_PER_KERNEL_VECTOR_ENTRY = 2.4e-9
# The rank stage that gives the interval (Gamma mod p, its rank mod p by BLAS, a tall Gamma stacked):
# per entry plus per entry and pivot, fitted on the same net (about 5 s CPU for 42.7 M entries, rank 2176).
_PER_LOWER_ENTRY = 2e-8
_PER_LOWER_OP = 5e-11
#: An exact rank estimated below this many seconds is always computed (whatever the verdict cost).
EXACT_FREE_SECONDS = 2.0


def exact_rank_seconds(rows: int, cols: int, rank_mod_p: int) -> float:
    """Rough CPU seconds to certify ``rank Gamma`` exactly when ``rank_p(Gamma) = rank_mod_p < cols``.

    The missing ``cols - rank_mod_p`` kernel vectors over Q, each checked on all ``rows x cols``
    entries; monotone in every argument's gap.  Not a prediction (see the module docstring).

    Examples
    --------
    >>> exact_rank_seconds(450, 123, 109) < 0.01  # iris 4-8-8-3: 14 vectors
    True
    >>> round(exact_rank_seconds(17970, 2378, 2176))  # digits 64-32-10: 202 vectors
    21
    """
    return max(cols - rank_mod_p, 0) * rows * cols * _PER_KERNEL_VECTOR_ENTRY


def verdict_rank_seconds(rows: int, cols: int, rank_mod_p: int) -> float:
    """Rough CPU seconds of the rank mod p behind a certified interval (the verdict's rank stage)."""
    return rows * cols * (_PER_LOWER_ENTRY + max(rank_mod_p, 1) * _PER_LOWER_OP)


def exact_rank_is_cheap(rows: int, cols: int, rank_mod_p: int) -> tuple[bool, float, float]:
    """Is the exact rank worth computing by default?  ``(cheap, exact_seconds, verdict_seconds)``.

    Cheap when its estimate is at most :data:`EXACT_FREE_SECONDS` or at most the verdict's own rank
    stage (:func:`verdict_rank_seconds`): the exact rank then at most doubles the work.  Both sides
    are models of the sizes, not clocks, so a report does not depend on the machine's load.

    Examples
    --------
    >>> exact_rank_is_cheap(450, 123, 109)[0], exact_rank_is_cheap(17970, 2378, 2176)[0]
    (True, False)
    """
    exact = exact_rank_seconds(rows, cols, rank_mod_p)
    verdict = verdict_rank_seconds(rows, cols, rank_mod_p)
    return exact <= max(EXACT_FREE_SECONDS, verdict), exact, verdict


@dataclass
class Estimate:
    """Stages with their rough seconds, the total, and notes on the expensive options."""

    stages: list[tuple[str, float]] = field(default_factory=list)
    #: Stages that run only if ``Gamma`` turns out rank-deficient (not known before the ranks mod p).
    if_deficient: list[tuple[str, float]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sizes: dict[str, Any] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        """The stages that will run."""
        return sum(s for _, s in self.stages)

    @property
    def worst(self) -> float:
        """Also the stages that run if ``Gamma`` is rank-deficient."""
        return self.seconds + sum(s for _, s in self.if_deficient)

    @property
    def large(self) -> bool:
        """The worst case exceeds :data:`ESTIMATE_LARGE` (a default budget applies on a terminal)."""
        return self.worst > ESTIMATE_LARGE

    def render(self, name: str) -> str:
        """One line (plus one per note): ``estimate NAME: ~T (stage ~t, ...), up to ~W if ...``."""
        parts = ", ".join(f"{s} ~{duration_text(t)}" for s, t in self.stages)
        line = f"estimate {name}: ~{duration_text(self.seconds)} ({parts})"
        if self.if_deficient and duration_text(self.worst) != duration_text(self.seconds):
            more = ", ".join(f"{s} ~{duration_text(t)}" for s, t in self.if_deficient)
            line += f", up to ~{duration_text(self.worst)} if Gamma is rank-deficient ({more})"
        return "\n".join([line, *(f"  {note}" for note in self.notes)])


def duration_text(seconds: float) -> str:
    """A rough duration for people: ``<1 s``, ``21 s``, ``3 min``, ``2 h``, ``4 days``."""
    if seconds < 1:
        return "<1 s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"


def estimate_sizes(widths: Sequence[int], n: int, digits: int, n_tie_classes: int, *, numeric: bool = True,
                   all_ranks: bool = False, max_resolutions: int = 4096, exact_ranks: bool = False) -> Estimate:
    """The estimate from the sizes alone.

    Parameters
    ----------
    widths : sequence of int
        ``[N_0, ..., N_L]``.
    n : int
        Number of samples.
    digits : int
        Decimal digits of the largest number of the case (numerator and denominator together).
    n_tie_classes : int
        Distinct (sample point, neuron) pairs among the visible ties (``2^k`` resolutions).
    numeric, all_ranks, max_resolutions, exact_ranks
        As for :func:`exactident.check.check`.

    The ``kernel (exact)`` stage (``if_deficient``) is the exact kernel over Q of a rank-deficient
    ``Gamma``.  By default it runs only where :func:`exact_rank_is_cheap` says it costs at most
    ``max(EXACT_FREE_SECONDS, verdict_rank_seconds(rows, cols, r))`` (else the rank is a certified
    interval); with ``exact_ranks`` or ``all_ranks`` it always runs (``rows cols r^2`` operations on
    entries of ``100 g`` digits, each costing ``(1 + g)^1.5``).  The default bound is multiplied by
    ``(1 + g)^1.5`` too (the size model of the gate ignores digits) and never exceeds the forced one.

    Returns
    -------
    Estimate
        ``seconds`` and ``worst`` are non-decreasing in ``n``, ``digits``, ``n_tie_classes``
        (below the resolution cap), each width and the depth.

    Examples
    --------
    >>> small = estimate_sizes([1, 1, 1], 3, 1, 0)
    >>> small.seconds < 1, [s for s, _ in small.stages][:2]
    (True, ['forward pass', 'ranks mod p'])
    >>> estimate_sizes([3, 4, 4, 2], 20, 1000, 0).seconds > estimate_sizes([3, 4, 4, 2], 20, 100, 0).seconds
    True
    """
    L = len(widths) - 1
    N_L = widths[-1]
    dim = sum(widths[l] * widths[l + 1] for l in range(L)) + N_L
    m = n * N_L
    r = min(m, dim)
    g = max(digits, 1) * (L + 1) / 100  # hundreds of digits of an entry of Gamma
    neurons = sum(widths[1:-1])
    paths = sum(math.prod(widths[l:L]) for l in range(L)) + 1
    resolutions = 2 ** n_tie_classes if n_tie_classes <= max_resolutions.bit_length() - 1 else 1
    est = Estimate(sizes={"rows": m, "cols": dim, "entry_digits": round(g * 100), "resolutions": resolutions,
                          "paths": paths})
    est.stages.append(("forward pass", n * (dim + neurons) * _PER_ENTRY * (1 + g)))
    per_pattern = m * dim * _PER_ENTRY * (1 + g) + m * dim * r * _PER_RANK_OP
    # A rank below min(rows, cols) needs a certified upper bound: often a kernel over Q, whose
    # entries grow with the rank (CRT over more primes).  Not knowable before the ranks mod p.
    # With fewer rows than parameters C_S fails for sure, and the structural search runs.
    deficient = m < dim
    digit_factor = (1 + g) ** 1.5
    exact = m * dim * r * r * _PER_EXACT_OP * digit_factor  # the whole kernel over Q (--exact-ranks)
    # By default the exact kernel runs only where the size model finds it cheap (exact_rank_is_cheap): at
    # most the larger of EXACT_FREE_SECONDS and the verdict's own rank stage; else the rank is an interval.
    kernel = exact if exact_ranks or all_ranks else \
        min(exact, max(EXACT_FREE_SECONDS, verdict_rank_seconds(m, dim, r)) * digit_factor)
    est.stages.append(("ranks mod p", per_pattern * resolutions))
    est.if_deficient.append(("kernel (exact)", kernel * resolutions))
    if resolutions > 1:
        est.notes.append(f"{resolutions} tie resolutions, each with its own ranks")
    elif n_tie_classes:
        est.notes.append(f"2^{n_tie_classes} tie resolutions: past --max-resolutions {max_resolutions}, "
                         "none enumerated")
    (est.stages if deficient else est.if_deficient).append(
        ("structural search", n * neurons * dim * _PER_STRUCTURAL * (1 + g)))
    alpha_exact = n * paths * min(n, paths) ** 2 * _PER_EXACT_OP * (1 + g) ** 1.5
    if all_ranks or resolutions > 1:
        est.stages.append(("rank alpha (exact)", alpha_exact * resolutions))
    elif alpha_exact > ESTIMATE_LARGE:
        est.notes.append(f"--all-ranks would be expensive: the exact rank of alpha ({n} x {paths} entries of "
                         f"~{round(g * 100)} digits) ~{duration_text(alpha_exact)}")
    if exact > ESTIMATE_LARGE:
        est.notes.append(f"exact ranks are the expensive part: Gamma is {m} x {dim} with entries of "
                         f"~{round(g * 100)} digits, a certified rank below min({m}, {dim}) needs a kernel over Q "
                         "when the verdict needs it (--exact-ranks always; --timeout SECONDS bounds it; --certify none "
                         "gives Monte Carlo ranks)")
    if numeric:
        est.stages.append(("float cross-check", _FLOAT_FIXED + m * dim * r * _PER_FLOAT_OP * 4))
    return est


def _digits(q: Any) -> int:
    """Decimal digits of a rational's numerator and denominator together (from their bit lengths)."""
    bits = int(q.p).bit_length() + int(q.q).bit_length()
    return max(1, math.ceil(bits * math.log10(2)))


def estimate(case: Any, *, numeric: bool = True, all_ranks: bool = False, max_resolutions: int = 4096,
             exact_ranks: bool = False) -> Estimate:
    """:func:`estimate_sizes` for a :class:`~exactident.io.case.Case` (runs its exact forward pass for the ties).

    Examples
    --------
    >>> from exactident.io.case import parse_case
    >>> case = parse_case({"format": "exactident-case/1", "name": "t", "widths": [1, 1, 1],
    ...     "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]], "sample": [[0], [1], ["-1/2"]]})
    >>> estimate(case).sizes["resolutions"]
    2
    """
    from exactident.model.activation import activation_state

    net, X = case.network, case.X
    numbers = [x for row in X for x in row]
    for W in net.W:
        numbers += [W[i, j] for i in range(W.nrows()) for j in range(W.ncols())]
    numbers += [v for b in net.b for v in b]
    digits = max((_digits(x) for x in numbers), default=1)
    state = activation_state(net, X)
    classes = {(tuple(X[t.i]), t.l, t.v) for t in state.ties}
    return estimate_sizes(list(net.widths), len(X), digits, len(classes), numeric=numeric, all_ranks=all_ranks,
                          max_resolutions=max_resolutions, exact_ranks=exact_ranks)
