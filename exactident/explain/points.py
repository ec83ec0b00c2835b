"""New sample points that shrink ``ker Gamma``, each checked exactly (``exactident design``).

With ``K`` an exact basis of ``ker Gamma(X)`` (columns), adding a point ``x`` with no
tie gives ``ker Gamma(X + x) = ker Gamma(X) ∩ ker Gamma_x``, where ``Gamma_x`` are the
``N_L`` rows of ``x``; so the rank grows by exactly ``rank(Gamma_x K)`` (:func:`added_rank`) and
the new kernel is ``K N`` with ``N`` a basis of ``ker(Gamma_x K)`` (:func:`shrink`).  Both are computed over Q:
no candidate is accepted on a float or modular guess.  On the boundary the same holds
for every tie resolution's kernel at once (a new point without ties has the same rows
in every resolution).

Candidates are exact dyadic rationals inside the box: solutions of a linear program
(HiGHS through scipy, when installed; proposed by :mod:`exactident.explain.gamma_rows`) for an
activation pattern that switches an
under-determined neuron and its input on (floats only propose; the point is checked
exactly), or points on a grid whose step is the largest power of two at most
``(hi - lo) / 1024``:
convex combinations of samples where an under-determined neuron is active (plus a small
perturbation), perturbed samples, and uniform points; a candidate with a tie (a
pre-activation exactly 0) is refused.  The search is seeded and stops when every kernel
is zero (``C_S`` holds) or the budget is spent.

Called by :mod:`exactident.explain.design`.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import flint

from exactident.explain.kernel import readable_basis
from exactident.linalg import exact
from exactident.model.fixed_edges import FixedEdges, Parameter
from exactident.model.network import Network

if TYPE_CHECKING:
    from exactident.explain.gamma_rows import GammaRows

__all__ = ["GRID", "PointSearch", "added_rank", "search_points", "shrink", "stderr_progress"]

#: Candidate coordinates are multiples of a power of two close to ``(hi - lo) / GRID``.
GRID = 1024
_ZERO = flint.fmpq(0)


@dataclass
class PointSearch:
    """Outcome of :func:`search_points`.

    Attributes
    ----------
    points : list of list of fmpq
        The points added, in order.
    gains : list of int
        Rank gained by each (exact).
    targets : list of list of (l, v)
        The under-determined neurons each point is active at.
    nullity : list of int
        Kernel dimension per kernel (per tie resolution) after the points.
    tried : int
        Candidates evaluated.
    """

    points: list[list[flint.fmpq]] = field(default_factory=list)
    gains: list[int] = field(default_factory=list)
    targets: list[list[tuple[int, int]]] = field(default_factory=list)
    nullity: list[int] = field(default_factory=list)
    tried: int = 0


def _as_matrix(K: Sequence[Sequence[int]]) -> flint.fmpq_mat:
    """Kernel vectors as the columns of a ``(dim, k)`` matrix over Q."""
    return flint.fmpq_mat(len(K[0]), len(K), [K[c][r] for r in range(len(K[0])) for c in range(len(K))])


def added_rank(rows: flint.fmpq_mat, K: Sequence[Sequence[int]], Km: flint.fmpq_mat | None = None) -> int:
    """``rank(Gamma_x K)`` over Q: what a point with rows ``Gamma_x`` adds to ``rank Gamma`` (module docstring).

    Examples
    --------
    >>> added_rank(flint.fmpq_mat([[1, 0, 0]]), [[1, 0, 0], [0, 1, 0]])
    1
    """
    if not K:
        return 0
    return exact.rank(rows * (Km if Km is not None else _as_matrix(K)))


def shrink(rows: flint.fmpq_mat, K: Sequence[Sequence[int]]) -> list[list[int]]:
    """A basis of ``ker Gamma(X) ∩ ker Gamma_x`` as ``K N``, ``N`` a basis of ``ker(Gamma_x K)`` (exact).

    The vectors are made primitive; LLL (:func:`exactident.explain.kernel.readable_basis`) runs
    only when their entries have grown past 4096 bits.

    Examples
    --------
    >>> shrink(flint.fmpq_mat([[1, 0, 0]]), [[1, 0, 0], [0, 1, 0]])
    [[0, 1, 0]]
    """
    if not K:
        return []
    Km = _as_matrix(K)
    M = rows * Km
    if exact.rank(M) == 0:
        return [list(v) for v in K]
    newK = Km * exact.nullspace(M)
    out = []
    for c in range(newK.ncols()):
        col = [newK[i, c] for i in range(newK.nrows())]
        d = 1
        for q in col:
            d = d * int(q.q) // _gcd(d, int(q.q))
        ints = [int(q.p) * (d // int(q.q)) for q in col]
        g = 0
        for x in ints:
            g = _gcd(g, abs(x))
        ints = [v // g for v in ints] if g > 1 else ints
        out.append([-v for v in ints] if next(v for v in ints if v) < 0 else ints)
    if max((abs(v).bit_length() for vec in out for v in vec), default=0) > 4096:
        return readable_basis(out)
    return out


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


def _step(lo: flint.fmpq, hi: flint.fmpq) -> flint.fmpq:
    """The largest power of two at most ``(hi - lo) / GRID`` (``hi > lo``)."""
    w = (hi - lo) / GRID
    e = int(w.p).bit_length() - int(w.q).bit_length()
    step = flint.fmpq(2) ** e if e >= 0 else flint.fmpq(1, 2 ** -e)
    while step > w:
        step /= 2
    while step * 2 <= w:
        step *= 2
    return step


def _snap(v: flint.fmpq, lo: flint.fmpq, hi: flint.fmpq) -> flint.fmpq:
    """A multiple of :func:`_step` in ``[lo, hi]`` near ``v`` (short dyadic coordinates; exact).

    Examples
    --------
    >>> _snap(flint.fmpq(1, 3), flint.fmpq(0), flint.fmpq(1))
    341/1024
    """
    if hi <= lo:
        return lo
    step = _step(lo, hi)
    x = (v / step).floor() * step
    if x < lo:
        x = -((-lo / step).floor()) * step
    if x > hi:
        x = (hi / step).floor() * step
    return flint.fmpq(x) if lo <= x <= hi else lo


def _blend(rng: random.Random, points: Sequence[Sequence[flint.fmpq]], n0: int) -> list[flint.fmpq]:
    w = [rng.randint(1, 8) for _ in points]
    total = sum(w)
    return [sum((flint.fmpq(wk, total) * p[j] for wk, p in zip(w, points)), _ZERO) for j in range(n0)]


def _candidate(rng: random.Random, known: Sequence[Sequence[flint.fmpq]], lo, hi, on_v: Sequence[int],
               on_k: Sequence[int]) -> list:
    """A candidate near the points where the target neuron is active (``on_v``), bridging towards points
    where the target weight's input is active (``on_k``), near any known point, or uniform in the box."""
    n0 = len(lo)
    mode = rng.randrange(10)
    if on_v and on_k and mode < 3:  # between the target's region and its input's
        base = _blend(rng, [known[rng.choice(on_v)], known[rng.choice(on_k)]], n0)
        spread = flint.fmpq(rng.choice((1, 4, 16)), 256)
    elif on_v and mode < 7:  # a convex combination of points where the target is active
        base = _blend(rng, [known[rng.choice(on_v)] for _ in range(rng.randint(1, 3))], n0)
        spread = flint.fmpq(rng.choice((1, 2, 4, 8, 32)), 256)
    elif known and mode < 9:
        base, spread = list(known[rng.randrange(len(known))]), flint.fmpq(rng.choice((4, 16, 64)), 256)
    else:
        return [_snap(lo[j] + (hi[j] - lo[j]) * flint.fmpq(rng.randint(0, GRID), GRID), lo[j], hi[j])
                for j in range(n0)]
    return [_snap(base[j] + (hi[j] - lo[j]) * spread * flint.fmpq(rng.randint(-64, 64), 64), lo[j], hi[j])
            for j in range(n0)]


def search_points(net: Network | None, X: Sequence[Sequence[flint.fmpq]], fixed: FixedEdges | None,
                  params: Sequence[Parameter],
                  kernels: Sequence[Sequence[Sequence[int]]], box: tuple[Sequence[flint.fmpq], Sequence[flint.fmpq]],
                  *, budget: int, rng: random.Random, batch: int = 24, patience: int = 80,
                  progress: Callable[[str], None] | None = None, floor: int = 0,
                  skip: Sequence[tuple[int, int]] = (), rows: GammaRows | None = None) -> PointSearch:
    """Add points in ``box`` until every kernel in ``kernels`` is zero or ``budget`` points were added.

    Parameters
    ----------
    net, X, fixed, params
        The case and the coordinates of ``tau``.
    kernels : list of kernel bases
        Exact bases of ``ker Gamma(s)`` (one off the boundary).
    box : (lo, hi)
        Per-coordinate bounds (Q), ``lo <= hi``.
    budget : int
        Most points added.
    rng : random.Random
        Seeded: the search is reproducible.
    batch : int
        Candidates per step; the one with the largest exact rank gain is added.
    patience : int
        Steps in a row without any gain before giving up.
    floor : int
        Stop when the kernels' dimensions add up to at most this (directions known to be
        out of reach, e.g. :mod:`exactident.explain.obstructions`).
    skip : list of (l, v)
        Neurons not to aim candidates at (known out of reach).
    progress : callable, optional
        Called with a short line after each point.
    rows : GammaRows, optional
        The network as :mod:`exactident.explain.gamma_rows` reads it (a layer graph: ``net``,
        ``fixed`` and ``params`` are then unused); default the MLP ``net``.

    Returns
    -------
    PointSearch

    Examples
    --------
    ``f = 3 relu(2x + 1)`` seen at ``x = 0`` only (kernel of dimension 2): one point on each
    side of the kink makes ``C_S`` hold.

    >>> from exactident.model.fixed_edges import fixed_edges, free_parameters
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])], [[1], [0]])
    >>> fx = fixed_edges(net)
    >>> K = [[1, 0, 0], [0, 1, -3]]
    >>> res = search_points(net, [[flint.fmpq(0)]], fx, free_parameters(net, fx), [K],
    ...                     ([flint.fmpq(-2)], [flint.fmpq(2)]), budget=5, rng=random.Random(0))
    >>> res.nullity, sum(res.gains)
    ([0], 2)
    """
    lo, hi = [flint.fmpq(v) for v in box[0]], [flint.fmpq(v) for v in box[1]]
    from exactident.explain.gamma_rows import MLPRows

    src = rows if rows is not None else MLPRows(net, fixed, params)  # the MLP's own Gamma by default
    Ks = [list(map(list, K)) for K in kernels]
    out = PointSearch()
    known = [list(x) for x in X]
    on = src.active_sets(known)
    mats = [_as_matrix(K) if K else None for K in Ks]
    L = src.L
    idle = 0
    while sum(map(len, Ks)) > floor and len(out.points) < budget and idle < patience:
        # targets: (neuron, input neuron or None) of the parameters the kernels still move
        aims = {j: src.target(j) for K in Ks for v in K for j, x in enumerate(v) if x}
        wanted = sorted({t for t in aims.values() if t is not None and (t[0], t[1]) not in set(skip)},
                        key=lambda t: (t[0], t[1], -1 if t[2] is None else t[2]))
        best: tuple[int, list, flint.fmpq_mat] | None = None
        for _ in range(batch):
            out.tried += 1
            on_v: list[int] = []
            on_k: list[int] = []
            l, v, k = 0, 0, None
            if wanted:
                l, v, k = rng.choice(wanted)
                on_v = [i for i, a in enumerate(on) if (l, v) in a]
                if k is not None and l > 1:
                    on_k = [i for i, a in enumerate(on) if (l - 1, k) in a]
            x = None
            if wanted and rng.randrange(4) == 0:  # aim at an activation pattern with an LP
                base = on[rng.choice(on_v)] if on_v else on[rng.randrange(len(on))] if on else set()
                want = [{u for (m, u) in base if m == layer} for layer in range(1, L)]
                want[l - 1].add(v)
                if k is not None and l > 1:
                    want[l - 2].add(k)
                flip = (rng.randrange(1, l + 1), None)  # and one random neuron of a layer <= l, for new regions
                if flip[0] < L:
                    u = rng.randrange(src.widths[flip[0]])
                    if (flip[0], u) not in {(l, v)} | ({(l - 1, k)} if k is not None else set()):
                        want[flip[0] - 1] ^= {u}
                x = src.lp_candidate(want, lo, hi)
                if x is not None and src.point_rows(x) is None:
                    x = None
                if x is not None:
                    snapped = [_snap(c, a, b) for c, a, b in zip(x, lo, hi)]
                    if not src.state([snapped])[1] and src.active_sets([snapped]) == src.active_sets([x]):
                        x = snapped  # short coordinates when the grid keeps the pattern
            if x is None:
                x = _candidate(rng, known, lo, hi, on_v, on_k)
            gx = src.point_rows(x)
            if gx is None:
                continue
            g = sum(added_rank(gx, K, Km) for K, Km in zip(Ks, mats))
            if g and (best is None or g > best[0]):
                best = (g, x, gx)
        if best is None:
            idle += 1
            continue
        idle = 0
        g, x, best_rows = best
        Ks = [shrink(best_rows, K) for K in Ks]
        mats = [_as_matrix(K) if K else None for K in Ks]
        known.append(x)
        on += src.active_sets([x])
        out.points.append(x)
        out.gains.append(g)
        targets = {(l, v) for l, v, _ in wanted}
        out.targets.append(sorted(t for t in on[-1] if t in targets))
        if progress is not None:
            progress(f"point {len(out.points)}: +{g} rank, kernel dimension {sum(len(K) for K in Ks)} left")
    out.nullity = [len(K) for K in Ks]
    return out


def stderr_progress(line: str) -> None:
    """Progress on a terminal only (one rewritten line)."""
    if getattr(sys.stderr, "isatty", lambda: False)():
        print(f"\rdesign: {line}\x1b[K", end="", file=sys.stderr, flush=True)  # erase a longer last line
