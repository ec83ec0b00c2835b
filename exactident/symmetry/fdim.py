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

A **layer graph** (a :class:`~exactident.model.network.Network`: convolution, pooling,
skips, leaky ReLU, PReLU) takes the same path: ``J_free`` in its free parameters, target
``dim_free = n_params - dim S_H`` (:func:`exactident.model.symmetry.rescaling_symmetry`: every
generator of the rescalings ``H`` the family keeps is in ``ker J_free`` at every tie-free point),
random points (:func:`lower_bound_graph`), the region cover and the line walk on its compiled
layered form (:mod:`exactident.symmetry.jacobian`); the domain provers and ``design``'s point search
read a plain MLP and are not run, so without a complete cover the upper bound is ``dim_free``.

Equal bounds certify ``fdim``; ``lower = dim`` certifies "no hidden symmetries".
Called by :mod:`exactident.symmetry.fdim_command` and :mod:`exactident.symmetry.glr`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from math import lcm

import flint
import numpy as np

from exactident.budget import stage
from exactident.errors import InvariantViolation, UnsupportedCaseError
from exactident.linalg.modular import random_primes, rank_mod_p, residues, to_nmod_mat
from exactident.model.activation import activation_state
from exactident.model.fixed_edges import FixedEdges, free_parameters
from exactident.model.gamma_modular import gamma_mod_p
from exactident.model.integer_forward import data_denominator
from exactident.model.network import Network
from exactident.symmetry import hidden
from exactident.symmetry.fdim_result import FdimResult, GraphFacts, scale_classes_text
from exactident.symmetry.jacobian import Layered
from exactident.symmetry.linewalk import domain_points, walk_lower_bound

__all__ = ["functional_dimension", "lower_bound", "lower_bound_graph", "upper_bound"]

_ZERO = flint.fmpq(0)
Box = tuple[Sequence[flint.fmpq], Sequence[flint.fmpq]]


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


def functional_dimension(net: Network, X: Sequence[Sequence[flint.fmpq]] = (), *,
                         box: Box | None = None, seed: int = 0, rounds: int = 8, search: bool = True,
                         max_boxes: int = 2048, lines: int = 256, walk_seconds: float | None = 120.0,
                         regions: int | None = None, region_seconds: float | None = 120.0,
                         name: str = "theta") -> FdimResult:
    """Certified ``[lower, upper]`` for ``fdim(theta)`` on ``box`` (None: ``R^n``) (module docstring).

    Parameters
    ----------
    net : Network
        A plain ReLU MLP (``J`` in all its weights and biases, target ``dim``) or a layer graph in its
        compiled form (``J_free`` in its free parameters, target ``dim_free``).
    X : list of points (Q), optional
        The sample to start from.
    box : (lo, hi), optional
        ``lo < hi`` in every coordinate.
    seed : int
        Seeds the primes and the random points (the result is reproducible).
    search : bool
        Run ``design``'s point search when the bounds differ after the random points and the line walk
        (a plain MLP only: the search reads a plain network).
    max_boxes : int
        Sub-boxes per sign proof (a plain MLP only).
    lines : int
        At most this many random lines walked (:func:`exactident.symmetry.linewalk.walk_lower_bound`)
        when the bounds differ after the random points, stopping after ``max(64, lines / 8)`` lines
        in a row without gain; 0: no line walk.
    walk_seconds : float, optional
        Time budget of the line walk (default 120 s, as ``exactident fdim --walk-seconds``; None: no
        limit).  A budget only stops the walk early: the bounds stay certified, possibly wider.
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
        A kinked hidden unit with zero incoming weights and bias (its pre-activation is 0 everywhere:
        no sample is tie-free), or a box with ``lo >= hi`` in some coordinate.
    InvariantViolation
        A lower bound above the proved upper bound (a bug).

    Examples
    --------
    ``f = relu(x) - relu(-x - 1)``: no hidden symmetry (``dim = 5``).

    >>> net = Network((1, 2, 1), [[[1], [-1]], [[1, -1]]], [[0, -1], [0]])
    >>> r = functional_dimension(net)
    >>> (r.lower, r.upper, r.dim)
    (5, 5, 5)

    ``f = 3 leaky(2x - 1) + c`` (slope 1/10), a layer graph: 4 parameters, one rescaling, ``fdim = 3``.

    >>> cn = Network((1, 1, 1), [[[2]], [[3]]], [[-1], [0]])
    >>> cn.negative_slope[0][0] = flint.fmpq(1, 10); cn.features = ("leaky ReLU",)
    >>> r = functional_dimension(cn)
    >>> (r.lower, r.upper, r.dim, r.symmetry_dim)
    (3, 3, 3, 1)
    """
    start = time.perf_counter()
    if box is not None and any(lo >= hi for lo, hi in zip(box[0], box[1])):  # the open box is empty
        raise UnsupportedCaseError("the box needs lo < hi in every coordinate")
    _refuse_constant_units(net)
    rng = random.Random(seed)
    graph: GraphFacts | None = None
    mechs: list[hidden.Mechanism] = []
    if not net.is_plain():  # a layer graph: target dim_free, upper bound dim_free before the cover
        from exactident.model.symmetry import rescaling_symmetry

        sym = rescaling_symmetry(net)
        dim, widths, n_hidden = sym.dim_free, net.layer_widths, sum(net.layer_widths[1:-1])
        graph = GraphFacts(net.n_params, sym.symmetry_dim, list(net.features), scale_classes_text(net))
        stage("random points", dim=dim)
        lower, p, pts = lower_bound_graph(net, [[flint.fmpq(v) for v in row] for row in X], box, dim, seed=seed,
                                          rounds=rounds)
        upper = dim
    else:
        fixed = FixedEdges({})  # no edge fixed: J, the full Jacobian
        dim, widths, n_hidden = net.dim, list(net.widths), sum(net.widths[1:-1])
        stage("random points", dim=dim)
        lower, p, pts = lower_bound(net, X, box, fixed, seed=seed, rounds=rounds)
        stage("upper bound proofs", lower=lower)
        upper, mechs = (dim, []) if lower == dim else upper_bound(net, fixed, box, pts, max_boxes=max_boxes)
    lower_random, cover = None, None
    max_regions = _cover_size(net.widths[0], regions)
    if max_regions and lower < upper:
        from exactident.symmetry.region_fdim import settle_by_regions

        lower_random = lower
        lower, upper, p, pts, mechs, cover = settle_by_regions(net, box, (lower, upper, p, pts, mechs), max_regions,
                                                               region_seconds, seed)
        if cover["complete"] and not cover["regions"]:
            _refuse_tie_domain(net, box)
    if lines and lower < upper:
        stage("line walk", lower=lower, upper=upper)
        lower_random = lower if lower_random is None else lower_random
        r, q, walked = walk_lower_bound(net, pts, box, seed=seed, target=upper, max_lines=lines,
                                        patience=max(64, lines // 8), seconds=walk_seconds)
        if r > lower:
            lower, p, pts = r, q, walked
    if net.is_plain():
        if search and lower < upper:
            stage("point search", lower=lower, upper=upper)
            lower, p, pts = _search(net, pts, box, fixed, lower, p, upper, rng)
        _check_directions(net, pts, mechs, rng)
    if lower > upper:
        raise InvariantViolation(f"lower bound {lower} above the proved upper bound {upper}")
    out = FdimResult(name, list(widths), dim, n_hidden, lower, upper, box, p, pts,
                     [{"kind": m.kind, "neurons": [list(v) for v in m.neurons],
                       "dimensions": m.dimensions, "text": m.text} for m in mechs], lower_random=lower_random,
                     cover=cover, graph=graph)
    out.seconds = time.perf_counter() - start
    return out


def _refuse_constant_units(net: Network) -> None:
    """A kinked hidden unit with zero incoming weights and bias: ``z = 0`` everywhere, every point is a tie."""
    J = Layered.of(net)
    const = [(l, v) for l, v in J.kinked_units() if J.cn.b[l - 1][v] == _ZERO
             and all(J.cn.W[l - 1][v, j] == _ZERO for j in range(J.cn.widths[l - 1]))]
    if not const:
        return
    if J.net is not None:
        l, v = const[0]
        raise UnsupportedCaseError(f"hidden neuron ({l},{v}) has zero incoming weights and bias: its "
                                   "pre-activation is 0 everywhere and the Jacobian is not defined")
    raise UnsupportedCaseError(f"hidden unit {J.cn.describe_units(const)} has zero incoming weights and bias: its "
                               "pre-activation is 0 everywhere and the Jacobian is not defined")


def _refuse_tie_domain(net: Network, box: Box | None) -> None:
    """A complete cover with no region: every input is a tie, so ``J`` is defined nowhere.

    Some kinked unit's pre-activation is then 0 on an open set although its incoming weights need not
    be 0 (two equal linear units compared by a max pool, a unit fed only by dead units); "rank 0" would
    claim that no parameter moves the function, while the output biases do.
    """
    where = "R^n" if box is None else "the box"
    raise UnsupportedCaseError(f"every point of {where} is a tie (a kinked unit's pre-activation is 0 on an open set, "
                               "e.g. fed only by dead units or comparing two equal values): the Jacobian is "
                               "defined nowhere")


def _tie_free_graph(cn: Network, X: Sequence[Sequence[flint.fmpq]]) -> list[list[flint.fmpq]]:
    if not X:
        return []
    _, bad = Layered(cn).state(X)
    return [list(x) for i, x in enumerate(X) if i not in bad]


def lower_bound_graph(cn: Network, X: Sequence[Sequence[flint.fmpq]], box: Box | None, target: int, *,
                      seed: int = 0, rounds: int = 8) -> tuple[int, int, list[list[flint.fmpq]]]:
    """``(rank, prime, points)`` of a layer graph: ``rank J_free(points) mod prime = rank``, a lower bound on ``fdim``.

    Starts from the points of ``X`` in the domain without ties, then adds random dyadic points of
    the domain while the rank grows (at most ``rounds`` batches of at least ``target / (2 N_L)``
    points, as for MLPs; stops after three batches without gain, or at ``target``).  After each
    batch only the points owning an independent row are kept (the witness stays small: a layer
    graph's parameters can be many).  One prime for every batch (dyadic points add only powers of 2
    to the denominators; primes are odd), so the residues of the batches are stacked.
    """
    J = Layered(cn)
    rng = random.Random(seed)
    gen = np.random.default_rng(seed)
    inside = [x for x in X if box is None or all(box[0][j] <= x[j] <= box[1][j] for j in range(len(x)))]
    pts = _tie_free_graph(cn, inside)
    p = random_primes(1, lcm(J.denominator(pts), 2), rng)[0]
    N_L = cn.widths[-1]

    def rows(Y: list[list[flint.fmpq]]) -> np.ndarray:
        return J.mod_p(Y, J.state(Y)[0], p, J.denominator(Y)) if Y else np.zeros((0, cn.n_params), dtype=np.int64)

    r, pts, G = _keep(rows(pts), pts, N_L, p)
    stale = 0
    for t in range(rounds):
        if r >= target or stale >= 3:
            break
        need = (max(4, -(-(target - r) // N_L) + 2, target // (2 * N_L)) if t
                else max(4, -(-target // N_L) + 2 - len(pts)))
        new = _tie_free_graph(cn, domain_points(gen, need, cn.widths[0], box))
        if not new:
            stale += 1
            continue
        r2, pts2, G2 = _keep(np.vstack([G, rows(new)]), pts + new, N_L, p)
        stale = stale + 1 if r2 <= r else 0
        if r2 > r:
            r, pts, G = r2, pts2, G2
    return r, p, pts


def _keep(G: np.ndarray, pts: list[list[flint.fmpq]], N_L: int, p: int) -> tuple[int, list[list[flint.fmpq]],
                                                                                  np.ndarray]:
    """``(rank, points, rows)``: only the points owning a pivot row of ``G mod p`` (rows ``i N_L .. i N_L + N_L - 1``
    belong to point ``i``), with all their rows: the rank is kept, the witness and the next batch's matrix shrink."""
    if not pts:
        return 0, [], G
    R, rank = to_nmod_mat(np.ascontiguousarray(G.T) % p, p).rref()
    rows, c = [], 0
    for j in range(int(rank)):  # the pivot columns of G^T are independent rows of G
        while int(R[j, c]) == 0:
            c += 1
        rows.append(c)
        c += 1
    owners = sorted({row // N_L for row in rows})
    keep = np.concatenate([np.arange(i * N_L, (i + 1) * N_L) for i in owners]) if owners else np.zeros(0, np.int64)
    return int(rank), [pts[i] for i in owners], G[keep]


def _cover_size(n0: int, regions: int | None) -> int:
    """The cover's region budget: ``regions`` itself, or the automatic choice (docstring of the caller)."""
    if regions is not None:
        return regions
    from exactident.symmetry.region_lp import lp_solver_installed

    return 50_000 if n0 <= 16 and lp_solver_installed() else 0


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
