"""The functional dimension of theta, certified both ways (docs/symmetries.md).

``fdim(theta) = max rank J(X, theta)`` over finite samples ``X`` of the domain (a
box, or ``R^n``) without ties, ``J`` the Jacobian of the outputs in all the
parameters (Grigsby, Lindsey, Rolnick).  For theta not in ``S`` it is ``max rank
Gamma(X, theta)`` (the fixed-edge chart: the rescalings, in ``ker J``, account for
the fixed-edge columns); in ``S`` a fixed edge is 0, the chart is not one, and
``J`` is what is ranked.  ``fdim <= dim = #params - #hidden``; theta has *hidden
symmetries* when ``fdim < dim``.

- **Lower bound.**  ``rank J(X) mod p`` at a sample ``X`` (a lower bound over Q;
  ``J`` mod p is ``Gamma`` mod p with no edge fixed): the case's sample (its
  points in the domain without ties), then random
  dyadic points of the domain (Gaussian for ``R^n``, uniform in a box) while the
  rank grows, then random lines walked through every activation region they cross
  (:mod:`exactident.symmetry.linewalk`, points kept by exact rank gain), then ``design``'s point search
  (:func:`exactident.explain.points.search_points`: candidates aimed at the
  neurons the kernel moves, kept by exact rank gain).
- **Upper bound.**  The mechanisms of :mod:`exactident.symmetry.hidden` (dead,
  blocked and always-active neurons on the domain, width-1 bottlenecks, twins) and
  :mod:`exactident.symmetry.conditional` (weights never seen, co-active neurons),
  proved exactly; their directions, with the rescalings, span a space in
  ``ker J(X)`` for every sample ``X`` of the domain: ``fdim <= #params - its
  dimension`` (:func:`exactident.symmetry.hidden.kernel_dimension`).  Each direction is also checked against the
  Jacobian at the sample used for the lower bound (a failure is a bug).

Equal bounds certify ``fdim``; ``lower = dim`` certifies "no hidden symmetries".
Called by :mod:`exactident.symmetry.fdim_command` and :mod:`exactident.symmetry.glr`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import flint
import numpy as np

from exactident.budget import stage
from exactident.errors import InvariantViolation, UnsupportedCaseError
from exactident.io.rationals import format_fmpq
from exactident.linalg.modular import random_primes, rank_mod_p, residues
from exactident.model.activation import activation_state
from exactident.model.fixed_edges import FixedEdges, free_parameters
from exactident.model.gamma_modular import gamma_mod_p
from exactident.model.integer_forward import data_denominator
from exactident.model.network import Network
from exactident.symmetry import hidden
from exactident.symmetry.linewalk import domain_points, walk_lower_bound

__all__ = ["FdimResult", "fdim_fields", "functional_dimension", "lower_bound", "upper_bound"]

_ZERO = flint.fmpq(0)
Box = tuple[Sequence[flint.fmpq], Sequence[flint.fmpq]]


@dataclass
class FdimResult:
    """A certified interval ``[lower, upper]`` for ``fdim(theta)`` (module docstring).

    Attributes
    ----------
    lower, upper : int
        ``lower <= fdim <= upper <= dim``, both certified.
    mechanisms : list of dict
        ``{"kind", "neurons", "dimensions", "text"}``: the missing dimensions ``dim - upper``,
        attributed in order (each mechanism counts what it adds to the ones before).
    points : list of list of fmpq
        The sample at which ``rank Gamma mod prime = lower`` (a witness).
    lower_random : int or None
        The lower bound from the starting sample and the random points alone, before the region cover
        and the line walk (None when neither ran).
    cover : dict or None
        The region cover, when one was tried: ``regions`` (found), ``complete``, ``reason`` (why not
        complete), ``empty`` (children proved empty), ``lps``, ``seconds``.
    """

    name: str
    widths: list[int]
    dim: int
    n_hidden: int
    lower: int
    upper: int
    box: Box | None
    prime: int
    points: list[list[flint.fmpq]] = field(default_factory=list)
    mechanisms: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    lower_random: int | None = None
    cover: dict[str, Any] | None = None

    @property
    def n_params(self) -> int:
        """``#params``, weights and biases (``dim + #hidden``)."""
        return self.dim + self.n_hidden

    @property
    def settled(self) -> bool:
        """Bounds equal: ``fdim`` is certified."""
        return self.lower == self.upper

    @property
    def no_hidden_symmetries(self) -> bool:
        """``lower = dim``: certified full functional dimension."""
        return self.lower == self.dim

    def to_dict(self) -> dict[str, Any]:
        """The ``exactident-fdim/1`` JSON object (docs/symmetries.md)."""
        return fdim_fields(self) | {"mechanisms": self.mechanisms, "lower_random_points": self.lower_random,
                                    "cover": self.cover}

    def render(self) -> str:
        """The terminal view."""
        dom = "R^n" if self.box is None else "the box"
        head = (f"{self.name}: functional dimension in [{self.lower}, {self.upper}] on {dom} "
                f"(dim = #params - #hidden = {self.n_params} - {self.n_hidden} = {self.dim})")
        lines = [head]
        if self.no_hidden_symmetries:
            lines.append(f"  no hidden symmetries (certified): rank J = dim at {len(self.points)} points "
                         f"(computed mod the prime {self.prime})")
        else:
            how = f"computed mod the prime {self.prime}" if self.prime else "over Q (exact nullspace)"
            lines.append(f"  lower bound {self.lower}: rank J at {len(self.points)} points, {how}")
            lines.append(f"  upper bound {self.upper}: {self.dim - self.upper} missing dimension(s) proved")
            for m in self.mechanisms:
                lines.append(f"    -{m['dimensions']}: {m['text']}")
            if not self.settled:
                lines.append(f"  {self.upper - self.lower} dimension(s) not settled (no proof, no sample found)")
        if self.cover is not None:
            c = self.cover
            lines.append(f"  region cover: {c['regions']} activation regions, " +
                         ("complete (every other sign pattern proved empty: "
                          f"{c['empty']} exact certificates)" if c["complete"] else f"not complete ({c['reason']})"))
        lines.append(f"  time {self.seconds:.1f} s")
        return "\n".join(lines) + "\n"


def fdim_fields(r: Any) -> dict[str, Any]:
    """The fields of ``exactident-fdim/1`` shared by the plain and the layer-graph results (``r`` either)."""
    return {"format": "exactident-fdim/1", "name": r.name, "widths": r.widths, "n_params": r.n_params,
            "n_hidden": r.n_hidden, "dim": r.dim, "lower": r.lower, "upper": r.upper,
            "settled": r.settled, "no_hidden_symmetries": r.no_hidden_symmetries,
            "domain": ("R^n" if r.box is None else
                       {"lo": [format_fmpq(a) for a in r.box[0]], "hi": [format_fmpq(b) for b in r.box[1]]}),
            "n_points": len(r.points), "prime": r.prime, "unexplained": r.upper - r.lower,
            "seconds": round(r.seconds, 3)}


def _tie_free(net: Network, X: Sequence[Sequence[flint.fmpq]]) -> list[list[flint.fmpq]]:
    if not X:
        return []
    bad = {t.i for t in activation_state(net, X).ties}
    return [list(x) for i, x in enumerate(X) if i not in bad]


def _rank(net: Network, X, fixed: FixedEdges, rng: random.Random) -> tuple[int, int]:
    if not X:
        return 0, 0
    avoid = data_denominator(net, X)
    p = random_primes(1, avoid, rng)[0]
    G = gamma_mod_p(net, X, activation_state(net, X).pattern, fixed, p, avoid)
    return rank_mod_p(G, p), p


def lower_bound(net: Network, X: Sequence[Sequence[flint.fmpq]], box: Box | None, fixed: FixedEdges, *,
                seed: int = 0, rounds: int = 8, target: int | None = None) -> tuple[int, int, list[list[flint.fmpq]]]:
    """``(rank, prime, points)``: ``rank Gamma(points) mod prime = rank``, a lower bound on ``fdim``.

    Starts from the points of ``X`` in the domain without ties, adds random points of the
    domain while the rank grows (at most ``rounds`` batches of at least ``dim / (2 N_L)`` points,
    stops after three without gain or
    at ``target``, default ``dim``).
    """
    rng = random.Random(seed)
    gen = np.random.default_rng(seed)
    target = net.dim if target is None else target
    inside = [x for x in X if box is None or all(box[0][j] <= x[j] <= box[1][j] for j in range(len(x)))]
    pts = _tie_free(net, inside)
    r, p = _rank(net, pts, fixed, rng)
    N_L = net.widths[-1]
    stale = 0
    for t in range(rounds):
        if r >= target or stale >= 3:
            break
        need = (max(4, -(-(target - r) // N_L) + 2, net.dim // (2 * N_L)) if t
                else max(4, -(-net.dim // N_L) + 2 - len(pts)))
        pts += _tie_free(net, domain_points(gen, need, net.widths[0], box))
        r2, p2 = _rank(net, pts, fixed, rng)
        stale = stale + 1 if r2 <= r else 0
        if r2 > r:
            r, p = r2, p2
    return r, p, pts


def _candidates(net: Network, pts) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Neurons inactive at every point, and active at every point (strictly; no ties among ``pts``)."""
    dead, active = [], []
    if not pts:
        return ([(l, v) for l in net.hidden_layers() for v in range(net.widths[l])], [])
    Z = activation_state(net, pts).Z
    for l in net.hidden_layers():
        T = Z[l - 1].table()
        for v in range(net.widths[l]):
            col = [row[v] for row in T]
            if all(z < _ZERO for z in col):
                dead.append((l, v))
            elif all(z > _ZERO for z in col):
                active.append((l, v))
    return dead, active


def upper_bound(net: Network, fixed: FixedEdges, box: Box | None, pts: Sequence[Sequence[flint.fmpq]], *,
                max_boxes: int = 2048) -> tuple[int, list[hidden.Mechanism]]:
    """``(upper, mechanisms)`` with ``fdim <= upper`` proved by the mechanisms (module docstring).

    Candidates come from ``pts`` (neurons inactive, or active, at all of them); each is proved
    on the whole domain or dropped.
    """
    dead_c, active_c = _candidates(net, pts)
    mechs: list[hidden.Mechanism] = []
    dead = {(l, v) for l, v in dead_c if hidden.proved_sign(net, l, v, -1, box, max_boxes)}
    where = "on R^n" if box is None else "on the box"
    for l, v in sorted(dead):
        mechs.append(hidden.Mechanism("dead", [(l, v)], hidden.dead_directions(net, l, v),
                                      f"neuron ({l},{v}) is inactive {where} (proved exactly): its incoming and "
                                      "outgoing parameters never reach the outputs"))
    blocked, dirs = hidden.blocked_directions(net, dead)
    if dirs:
        mechs.append(hidden.Mechanism("blocked", blocked, dirs,
                                      f"neuron(s) {_names(blocked)} reach the outputs only through dead neurons or "
                                      "zero weights; weights into or out of dead neurons" if blocked else
                                      "weights into or out of dead neurons never reach the outputs"))
    by_layer: dict[int, list[int]] = {}
    for l, v in active_c:
        if (l, v) not in dead and hidden.proved_sign(net, l, v, 1, box, max_boxes):
            by_layer.setdefault(l, []).append(v)
    for l, S in sorted(by_layer.items()):
        mechs.append(hidden.Mechanism("active", [(l, v) for v in S], hidden.active_directions(net, l, S),
                                      f"neuron(s) {_names([(l, v) for v in S])} active {where} (proved exactly): "
                                      f"affine there, the layer {l + 1} sees a product W_{l + 1}[:,S] (W_{l}[S,:] h + "
                                      f"b_{l}[S]) invariant under GL({len(S)}), and b_{l}[S] trades with b_{l + 1}"))
    for l in net.hidden_layers():
        d = hidden.bottleneck_direction(net, l)
        if d is not None:
            mechs.append(hidden.Mechanism("bottleneck", [(l, 0)], [d],
                                          f"layer {l} has width 1 and, where its neuron is inactive, the outputs do "
                                          f"not see z_{l + 1} along W_{l + 1}[:,0]: its kink is invisible, b_{l}[0] "
                                          f"trades with b_{l + 1}"))
    for l in net.hidden_layers():
        rows = [[net.W[l - 1][v, j] for j in range(net.widths[l - 1])] + [net.b[l - 1][v]]
                for v in range(net.widths[l])]
        for u in range(len(rows)):
            for v in range(u + 1, len(rows)):
                c = _ratio(rows[u], rows[v])
                if c is not None:
                    mechs.append(hidden.Mechanism("twins", [(l, u), (l, v)], hidden.twin_directions(net, l, u, v, c),
                                                  f"neurons ({l},{u}) and ({l},{v}) are twins (h_{u} = {c} h_{v} "
                                                  "everywhere): only a combination of their outgoing weights counts"))
    from exactident.symmetry.conditional import conditional_mechanisms

    mechs += conditional_mechanisms(net, box, pts, dead | set(blocked), max_boxes)
    return hidden.attribute(net, mechs)


def _names(neurons: Sequence[tuple[int, int]]) -> str:
    return ", ".join(f"({l},{v})" for l, v in neurons)


def _ratio(a: Sequence[flint.fmpq], b: Sequence[flint.fmpq]) -> flint.fmpq | None:
    k = next((i for i, x in enumerate(b) if x != _ZERO), None)
    if k is None or a[k] == _ZERO:
        return None
    c = a[k] / b[k]
    return c if c > _ZERO and all(x == c * y for x, y in zip(a, b)) else None


def _check_directions(net: Network, pts, mechs: Sequence[hidden.Mechanism], rng: random.Random) -> None:
    """Every proved direction is in the kernel of the full Jacobian at ``pts`` (mod a prime): else a bug."""
    if not pts or not mechs:
        return
    avoid = data_denominator(net, pts)
    p = random_primes(1, avoid, rng)[0]
    J = gamma_mod_p(net, pts, activation_state(net, pts).pattern, FixedEdges({}), p, avoid)
    for m in mechs:
        for d in m.directions:
            cols = sorted(d)
            vec = residues([d[c] for c in cols], p, avoid)
            if np.any((J[:, cols] % p).astype(object).dot(vec.astype(object)) % p):
                raise InvariantViolation(f"a {m.kind} direction is not in the kernel of the Jacobian")


def functional_dimension(net: Network, X: Sequence[Sequence[flint.fmpq]] = (), *, box: Box | None = None,
                         seed: int = 0, rounds: int = 8, search: bool = True, max_boxes: int = 2048,
                         lines: int = 256, walk_seconds: float | None = None, regions: int | None = None,
                         region_seconds: float | None = 120.0, name: str = "theta") -> FdimResult:
    """Certified ``[lower, upper]`` for ``fdim(theta)`` on ``box`` (None: ``R^n``) (module docstring).

    Parameters
    ----------
    net : Network
    X : list of points (Q), optional
        The sample to start from.
    box : (lo, hi), optional
        ``lo < hi`` in every coordinate.
    seed : int
        Seeds the primes and the random points (the result is reproducible).
    search : bool
        Run ``design``'s point search when the bounds differ after the random points and the line walk.
    max_boxes : int
        Sub-boxes per sign proof.
    lines : int
        At most this many random lines walked (:func:`exactident.symmetry.linewalk.walk_lower_bound`)
        when the bounds differ after the random points, stopping after ``max(64, lines / 8)`` lines
        in a row without gain; 0: no line walk.
    walk_seconds : float, optional
        Time budget of the line walk.
    regions : int, optional
        At most this many activation regions in the exact cover of the domain
        (:mod:`exactident.symmetry.regions`), tried when the bounds differ after the random points;
        a complete cover settles ``fdim``.  None: 50,000 when ``n0 <= 16`` and an LP solver (highspy
        or scipy) is installed, else no cover; 0: no cover.
    region_seconds : float, optional
        Time budget of the cover (default 120 s; None: no limit).

    Raises
    ------
    UnsupportedCaseError
        A hidden neuron with zero incoming weights and bias (its pre-activation is 0 everywhere), or a
        box with ``lo >= hi`` in some coordinate.

    Examples
    --------
    ``f = relu(x) - relu(-x - 1)``: no hidden symmetry (``dim = 5``).

    >>> net = Network((1, 2, 1), [[[1], [-1]], [[1, -1]]], [[0, -1], [0]])
    >>> r = functional_dimension(net)
    >>> (r.lower, r.upper, r.dim)
    (5, 5, 5)
    """
    start = time.perf_counter()
    if box is not None and any(lo >= hi for lo, hi in zip(box[0], box[1])):  # the open box is empty
        raise UnsupportedCaseError("the box needs lo < hi in every coordinate")
    for l in net.hidden_layers():
        for v in range(net.widths[l]):
            if all(net.W[l - 1][v, j] == _ZERO for j in range(net.widths[l - 1])) and net.b[l - 1][v] == _ZERO:
                raise UnsupportedCaseError(f"hidden neuron ({l},{v}) has zero incoming weights and bias: its "
                                           "pre-activation is 0 everywhere and the Jacobian is not defined")
    fixed = FixedEdges({})  # no edge fixed: J, the full Jacobian
    n_hidden = sum(net.widths[1:-1])
    rng = random.Random(seed)
    stage("random points", dim=net.dim)
    lower, p, pts = lower_bound(net, X, box, fixed, seed=seed, rounds=rounds)
    stage("upper bound proofs", lower=lower)
    upper, mechs = (net.dim, []) if lower == net.dim else upper_bound(net, fixed, box, pts, max_boxes=max_boxes)
    lower_random, cover = None, None
    max_regions = _cover_size(net, regions)
    if max_regions and lower < upper:
        from exactident.symmetry.region_fdim import settle_by_regions

        lower_random = lower
        lower, upper, p, pts, mechs, cover = settle_by_regions(net, box, (lower, upper, p, pts, mechs), max_regions,
                                                               region_seconds, seed)
    if lines and lower < upper:
        stage("line walk", lower=lower, upper=upper)
        lower_random = lower if lower_random is None else lower_random
        r, q, walked = walk_lower_bound(net, pts, box, seed=seed, target=upper, max_lines=lines,
                                        patience=max(64, lines // 8), seconds=walk_seconds)
        if r > lower:
            lower, p, pts = r, q, walked
    if search and lower < upper:
        stage("point search", lower=lower, upper=upper)
        lower, p, pts = _search(net, pts, box, fixed, lower, p, upper, rng)
    _check_directions(net, pts, mechs, rng)
    if lower > upper:
        raise InvariantViolation(f"lower bound {lower} above the proved upper bound {upper}")
    out = FdimResult(name, list(net.widths), net.dim, n_hidden, lower, upper, box, p, pts,
                     [{"kind": m.kind, "neurons": [list(v) for v in m.neurons],
                       "dimensions": m.dimensions, "text": m.text} for m in mechs], lower_random=lower_random,
                     cover=cover)
    out.seconds = time.perf_counter() - start
    return out


def _cover_size(net: Network, regions: int | None) -> int:
    """The cover's region budget: ``regions`` itself, or the automatic choice (docstring of the caller)."""
    if regions is not None:
        return regions
    from exactident.symmetry.regions import lp_solver_installed

    return 50_000 if net.widths[0] <= 16 and lp_solver_installed() else 0


def _search(net: Network, pts, box: Box | None, fixed: FixedEdges, lower: int, p: int, upper: int,
            rng: random.Random) -> tuple[int, int, list[list[flint.fmpq]]]:
    """``design``'s point search for the rank still missing below ``upper``."""
    from exactident.explain.design import data_box
    from exactident.explain.kernel import gamma_kernel
    from exactident.explain.points import search_points

    if box is None:
        lo, hi = data_box(pts, net.widths[0])
        lo = [min(a, flint.fmpq(-4096)) for a in lo]
        hi = [max(b, flint.fmpq(4096)) for b in hi]
        box = (lo, hi)
    from exactident.model.fixed_edges import fixed_edges
    from exactident.model.network import degenerate_neurons

    # the chart's Gamma when theta is not in S (the rescalings are not searched for), else J
    chart = FixedEdges({}) if degenerate_neurons(net) else fixed_edges(net)
    n_cols = len(free_parameters(net, chart))
    params = free_parameters(net, chart)
    K = gamma_kernel(net, pts, activation_state(net, pts).pattern, chart, rng=rng).basis
    found = search_points(net, pts, chart, params, [K], box, budget=max(16, 2 * (upper - lower)), rng=rng,
                          patience=12, floor=n_cols - upper)
    if not found.points:
        return lower, p, pts
    new = pts + _tie_free(net, found.points)
    r, q = _rank(net, new, fixed, rng)
    return (r, q, new) if r > lower else (lower, p, pts)
