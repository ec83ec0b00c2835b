"""The functional dimension from a complete cover of the domain by activation regions (docs/symmetries.md).

On one activation region the row ``J(x)`` of the Jacobian of the outputs in the
parameters is affine in ``x``, so ``n0 + 1`` affinely independent points of the
region span all its rows; over a complete cover
(:func:`exactident.symmetry.regions.enumerate_regions`) their rank is therefore
``max rank J(X)`` over every finite tie-free sample ``X`` of the domain: the
functional dimension itself, both bounds at once.  :func:`cover_rank` computes it
exactly (a greedy selection mod a prime, then an exact nullspace over Z checked
against every point of every region); :func:`settle_by_regions` feeds it to
:func:`exactident.symmetry.fdim.functional_dimension` with the mechanisms the cover
proves: neurons inactive (active) on every region, parameters whose column is zero
on every region, and the rest of the exact kernel.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import flint
import numpy as np

from exactident.budget import stage
from exactident.errors import InvariantViolation
from exactident.model.network import Network
from exactident.symmetry import hidden
from exactident.symmetry.jacobian import Layered
from exactident.symmetry.regions import Box, RegionCover, enumerate_regions

__all__ = ["CoverRank", "cover_rank", "settle_by_regions"]


@dataclass
class CoverRank:
    """``rank J`` over Q at the points of a cover's regions (:func:`cover_rank`).

    Attributes
    ----------
    rank : int
        ``rank J(points)`` over Q at the kept points (exact: a nullspace over Z), a lower bound of
        ``fdim``; when ``complete``, ``rank J`` at every point of every region, which is ``fdim``.
    prime : int
        A prime ``q`` with ``rank J(points) mod q = rank`` (the greedy selection's, or another when the
        exact kernel check added points); 0 in the unlikely case none of 8 random primes reaches it.
    points : list of list of fmpq
        The kept points (at most ``rank`` of them per output row).
    kernel : list of dict
        When ``complete``: a basis of ``ker J`` on every region, sparse ``{full index: fmpq}``.
    zero_columns : list of int
        When ``complete``: the parameters (full indices) whose column of ``J`` is 0 on every region.
    complete : bool
        The exact kernel check covered every point of a complete cover.
    """

    rank: int
    prime: int
    points: list[list[flint.fmpq]]
    kernel: list[dict[int, flint.fmpq]] = field(default_factory=list)
    zero_columns: list[int] = field(default_factory=list)
    complete: bool = False


def cover_rank(net: Network | Layered, cover: RegionCover, *, seed: int = 0,
               chunk: int = 2048) -> CoverRank:
    """``rank J`` over Q on the regions of ``cover``: ``fdim`` itself when the cover is complete.

    ``J`` is the Jacobian of :class:`~exactident.symmetry.jacobian.Layered` (all weights and biases of a
    plain MLP; the free parameters of a layer graph).  The points of the regions are checked exactly
    (no tie; each has its region's pattern: else InvariantViolation).  A greedy selection mod a prime
    ``p < 2^21`` (:class:`exactident.symmetry.linewalk.GreedyRank`) keeps the points whose rows raise the
    rank; the exact integer Jacobian at them (:meth:`~exactident.symmetry.jacobian.Layered.integer_rows`,
    ``D J diag(s)``, ``D, s > 0``) has a nullspace ``K`` over Z, so ``rank = #columns - dim K`` exactly.
    When the cover is complete, ``J diag(s) K = 0`` is checked exactly at every point of every region
    (a point that fails is kept and ``K`` recomputed): then ``ker J`` on the whole domain is
    ``diag(s) K`` and ``fdim = rank``.

    Parameters
    ----------
    net : Network or Layered
    cover : RegionCover
    seed : int
        Seeds the prime.

    Returns
    -------
    CoverRank

    Raises
    ------
    InvariantViolation
        A region point with a tie or with another pattern than its region's (a bug).
    """
    from exactident.linalg.modular import random_primes
    from exactident.symmetry.linewalk import SMALL_PRIME_RANGE, GreedyRank

    J = Layered.of(net)
    pts = [p for r in cover.regions for p in r.points]
    n_full = J.n_cols
    if not pts:  # no tie-free input at all (a pre-activation is 0 on the whole domain): J is defined nowhere
        return CoverRank(0, 0, [], [{c: flint.fmpq(1)} for c in range(n_full)] if cover.complete else [],
                         list(range(n_full)) if cover.complete else [], cover.complete)
    pattern, tied = J.state(pts)
    if tied:
        raise InvariantViolation("a region point has a tie")
    k = 0
    for r in cover.regions:
        for _ in r.points:
            if any(bool(pattern[l][k, v]) != r.pattern[l][v] for l in range(len(r.pattern))
                   for v in range(len(r.pattern[l]))):
                raise InvariantViolation("a region point has another activation pattern than its region")
            k += 1
    avoid = J.denominator(pts)
    p = random_primes(1, avoid, random.Random(seed), lo=SMALL_PRIME_RANGE[0], hi=SMALL_PRIME_RANGE[1])[0]
    greedy = GreedyRank(J, p)
    for i in range(0, len(pts), chunk):
        stage("rank on the regions", points=len(pts), done=i, rank=greedy.rank)
        greedy.offer(pts[i:i + chunk])
    where = {tuple(x): i for i, x in enumerate(pts)}
    kept = [where[tuple(x)] for x in greedy.points]
    data = _modular_data(J, pts)
    N_L = J.widths[-1]
    while True:
        G, s = J.integer_rows(pts, pattern, kept, data)
        N, nullity = flint.fmpz_mat(G.tolist()).nullspace()
        rank = n_full - nullity
        K = flint.fmpz_mat(n_full, nullity, [N[i, j] for i in range(n_full) for j in range(nullity)])
        if not cover.complete:
            return CoverRank(rank, _certifying_prime(J, [pts[i] for i in kept], rank, greedy.rank, p, seed),
                             [pts[i] for i in kept])
        bad: list[int] = []
        seen = np.zeros(n_full, dtype=bool)
        for i in range(0, len(pts), chunk):
            stage("exact kernel check", points=len(pts), done=i)
            idx = list(range(i, min(i + chunk, len(pts))))
            Gc, _ = J.integer_rows(pts, pattern, idx, data)
            seen |= np.any(Gc != 0, axis=0)
            if nullity:
                R = flint.fmpz_mat(Gc.tolist()) * K
                bad += [idx[r // N_L] for r in range(R.nrows()) if any(R[r, c] != 0 for c in range(nullity))]
        if not bad:
            break
        kept = sorted(set(kept) | set(bad[:max(1, nullity)]))
    kernel = [{c: flint.fmpq(int(s[c])) * flint.fmpq(N[c, j]) for c in range(n_full) if N[c, j] != 0}
              for j in range(nullity)]
    kept_pts = [pts[i] for i in kept]
    return CoverRank(rank, _certifying_prime(J, kept_pts, rank, greedy.rank, p, seed), kept_pts, kernel,
                     [c for c in range(n_full) if not seen[c]], True)


def _modular_data(J: Layered, pts: list[list[flint.fmpq]]) -> object:
    """The plain engine's data scaled once (a plain MLP), reused by every chunk; None for a layer graph."""
    if J.net is None:
        return None
    from exactident.model.gamma_modular import ModularData

    return ModularData(J.net, pts)


def _certifying_prime(J: Layered, pts: list[list[flint.fmpq]], rank: int, greedy_rank: int, p: int,
                      seed: int) -> int:
    """A prime ``q`` with ``rank J(pts) mod q = rank`` (the witness a reader re-checks); 0 if none of 8 tries."""
    if greedy_rank == rank:
        return p
    from exactident.linalg.modular import random_primes, rank_mod_p

    avoid = J.denominator(pts)
    pattern, _ = J.state(pts)
    for q in random_primes(8, avoid, random.Random(seed + 1)):
        if rank_mod_p(J.mod_p(pts, pattern, q, avoid), q) == rank:
            return q
    return 0


def _param_name(widths: Sequence[int], c: int) -> tuple[str, list[tuple[int, int]]]:
    """The name of full index ``c`` (:func:`exactident.symmetry.hidden.full_index`) and its hidden neurons."""
    off = 0
    for l in range(1, len(widths)):
        n_w = widths[l] * widths[l - 1]
        if c < off + n_w + widths[l]:
            r = c - off
            hid = [] if l == len(widths) - 1 else [(l, r // widths[l - 1] if r < n_w else r - n_w)]
            if r >= n_w:
                return f"b_{l}[{r - n_w}]", hid
            i, j = divmod(r, widths[l - 1])
            return f"W_{l}[{i},{j}]", hid + ([(l - 1, j)] if l > 1 else [])
        off += n_w + widths[l]
    raise InvariantViolation(f"parameter index {c} out of range")


def _cover_mechanisms(net: Network, cover: RegionCover, cr: CoverRank) -> list[hidden.Mechanism]:
    """The mechanisms a complete cover proves, in order: dead, active, unseen, then the rest of ``ker J``."""
    n = len(cover.regions)
    mechs = []
    # no region at all (every input a tie): "inactive on every region" and "active on every region" would both hold
    for li, l in enumerate(net.hidden_layers() if n else []):
        for v in range(net.widths[l]):
            if not any(r.pattern[li][v] for r in cover.regions):
                mechs.append(hidden.Mechanism("dead", [(l, v)], hidden.dead_directions(net, l, v),
                                              f"neuron ({l},{v}) is inactive on all {n} activation regions "
                                              "(complete cover, exact)"))
        S = [v for v in range(net.widths[l]) if all(r.pattern[li][v] for r in cover.regions)]
        if S:
            mechs.append(hidden.Mechanism("active", [(l, v) for v in S], hidden.active_directions(net, l, S),
                                          f"neuron(s) {', '.join(f'({l},{v})' for v in S)} active on all {n} "
                                          "activation regions (complete cover, exact): affine there"))
    if cr.zero_columns:
        named = [_param_name(net.widths, c) for c in cr.zero_columns]
        neurons = sorted({v for _, hid in named for v in hid})
        shown = ", ".join(name for name, _ in named[:8]) + (", ..." if len(named) > 8 else "")
        mechs.append(hidden.Mechanism("unseen", neurons, [{c: flint.fmpq(1)} for c in cr.zero_columns],
                                      f"{len(named)} parameter(s) ({shown}) with a zero column of J on all {n} "
                                      "activation regions: never seen by the outputs"))
    mechs.append(hidden.Mechanism("regions", [], cr.kernel,
                                  f"the rest of ker J on all {n} activation regions (exact kernel of the complete "
                                  "cover): hidden symmetries no named mechanism explains"))
    return mechs


def settle_by_regions(net: Network, box: Box | None, state: tuple[int, int, int, list, list],
                      max_regions: int, seconds: float | None, seed: int
                      ) -> tuple[int, int, int, list, list, dict[str, Any]]:
    """The cover stage of :func:`exactident.symmetry.fdim.functional_dimension`.

    ``state`` is ``(lower, upper, prime, points, mechanisms)`` before it; returns the same after it
    and the cover's summary (``regions``, ``complete``, ``reason``, ``empty``, ``lps``, ``seconds``).
    The lower bound rises to the exact rank at the kept region points when that is higher; a
    complete cover makes ``upper`` equal to it, the mechanisms the cover proves appended
    (attributed after the proved ones: each counts what it adds).  On a layer graph (``net`` a
    :class:`~exactident.model.network.Network`) the upper bound before it is ``dim_free``
    and a complete cover appends one mechanism, ``regions``: the exact kernel of ``J_free`` on every region
    beyond ``S_H`` (``dim_free - rank`` dimensions); ``S_H`` is in that kernel, so a rank above ``dim_free``
    is a bug.

    Raises
    ------
    InvariantViolation
        A complete cover whose rank is below the lower bound, or whose attributed kernel does not
        give its rank (a bug).
    """
    lower, upper, p, pts, mechs = state
    stage("activation regions", regions=0)
    cover = enumerate_regions(net, box, max_regions=max_regions, seconds=seconds)
    cr = cover_rank(net, cover, seed=seed)
    summary = {"regions": len(cover.regions), "complete": cover.complete, "reason": cover.reason,
               "empty": cover.empty, "lps": cover.lps, "seconds": round(cover.seconds, 3)}
    if cr.rank > lower:
        lower, p, pts = cr.rank, cr.prime, cr.points
    if cr.complete:
        if cr.rank < lower:
            raise InvariantViolation(f"the complete cover's rank {cr.rank} is below the lower bound {lower}")
        if not net.is_plain():
            if cr.rank > upper:
                raise InvariantViolation(f"the complete cover's rank {cr.rank} is above dim_free = {upper}")
            mechs = list(mechs) + [_graph_mechanism(net, cover, cr, upper)] if cr.rank < upper else list(mechs)
            return lower, cr.rank, p, pts, mechs, summary
        upper, mechs = hidden.attribute(net, list(mechs) + _cover_mechanisms(net, cover, cr))
        if upper != cr.rank:
            raise InvariantViolation(f"the cover's kernel gives {upper}, its rank is {cr.rank}")
    return lower, upper, p, pts, mechs, summary


def _graph_mechanism(cn: Network, cover: RegionCover, cr: CoverRank, dim_free: int) -> hidden.Mechanism:
    """The missing dimensions of a layer graph's complete cover: ``ker J_free`` on every region beyond ``S_H``."""
    n = len(cover.regions)
    dead = [(l + 1, v) for l, layer in enumerate(cn.kinked(l) for l in range(1, cn.L)) for v in range(len(layer))
            if layer[v] and n and not any(r.pattern[l][v] for r in cover.regions)]
    zero = ", ".join(cn.param_name(c) for c in cr.zero_columns[:6]) + (", ..." if len(cr.zero_columns) > 6 else "")
    text = (f"ker J_free on all {n} activation regions (exact kernel of the complete cover) beyond the rescalings "
            "S_H: hidden symmetries of the layer graph"
            + (f"; units on the slope side on every region: {cn.describe_units(dead)}" if dead else "")
            + (f"; parameters never seen by the outputs: {zero}" if cr.zero_columns else ""))
    return hidden.Mechanism("regions", sorted(dead), cr.kernel, text, dim_free - cr.rank)
