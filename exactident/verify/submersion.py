"""The ``submersion`` and ``entering_submersion`` parts of a layer graph's report, re-checked.

On the verifier's own facts (:class:`~exactident.verify.facts.ConstrainedFacts`); the persistent ties
are :func:`exactident.verify.resolutions.persistent_ties`.  ``submersion`` needs no tie resolution (no
sample on a kink), ``entering_submersion`` names its one resolution: neither enumerates them.

Persistent tie
    A tie at a first-layer unit whose bias is fixed and whose free weights all meet a zero input at
    that sample: its pre-activation is constant in ``theta`` (it stays 0 nearby) and no column of
    ``Gamma_free`` depends on its side (the free weights' columns carry the zero inputs, there is no
    bias column, a slope column carries ``min(z, 0) = 0``, there is no earlier layer).  One side of it
    is enough.
``submersion`` ``{y, prime, rank_x, rank_xy}``
    No sample on a kink (persistent ties excepted), ``rank Gamma_free(X) = n N_L`` mod ``prime``
    (full row rank: ``F_X`` is a submersion near theta, its fiber a manifold with tangent
    ``ker Gamma_free(X)``), the points ``y`` on no kink either, and
    ``rank [Gamma_free(X); Gamma_free(y)] = rank_xy > n N_L`` mod ``prime``: some tangent direction of
    the fiber moves ``f(y)``, so arbitrarily close to theta another function has the outputs on X.
    Ranks mod a prime are lower bounds, which is all the argument needs.
``entering_submersion`` ``{active, delta, y, prime, rank_x}``
    With ties: at the resolution ``active``, ``Gamma_free`` has full row rank ``rank_x = n N_L`` mod
    ``prime``; ``Gamma_free(active) delta = 0`` exactly; along ``delta`` (pattern held) every
    non-persistent tied pre-activation moves strictly to its side of ``active``; at ``y`` (on no
    kink, persistent ties excepted) ``d f(y) . delta != 0``.  A curve in the fiber of ``F_active``
    tangent to ``delta`` stays in that piece, keeps the outputs on X and moves ``f(y)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import flint

from exactident.verify.arith import rational
from exactident.verify.facts import ConstrainedFacts
from exactident.verify.gamma import directional_derivative, rank_mod_p, usable_prime
from exactident.verify.resolutions import persistent_ties

__all__ = ["check_entering_submersion", "check_submersion", "ranks_with_points", "smooth_at_x"]


def _with_points(facts: ConstrainedFacts, Y: Sequence[Sequence[flint.fmpq]], where: str
                 ) -> tuple[ConstrainedFacts | None, str]:
    """Facts of ``X`` followed by ``Y``; None (and why) when a point of ``Y`` is on a kink (persistent excepted)."""
    cn = facts.cn
    if any(len(y) != cn.widths[0] for y in Y):
        return None, f"{where}: a point without {cn.widths[0]} entries"
    both = ConstrainedFacts.from_network(cn, [*facts.X, *Y])
    extra = [t for t in both.ties if t[0] >= len(facts.X)]
    if set(extra) - persistent_ties(both):
        i, l, v = sorted(set(extra) - persistent_ties(both))[0]
        return None, f"{where}: point {i - len(facts.X)} is on the kink of unit ({l}, {v})"
    return both, ""


def smooth_at_x(facts: ConstrainedFacts, p: int, where: str) -> list[str]:
    """Failures of the hypotheses a submersion-like part (``submersion``, ``constant_rank``) needs at ``X``.

    No sample on a kink (persistent ties excepted: ``F_X`` is smooth near theta) and ``p`` a prime in
    ``[2^20, 2^31)`` dividing no denominator of the case.
    """
    if set(facts.ties) - persistent_ties(facts):
        return [f"{where}: a sample is on a kink (a non-persistent tie): F_X is not smooth there"]
    if not usable_prime(p, facts.avoid):
        return [f"{where}.prime: {p} is not a prime in [2^20, 2^31) dividing no denominator"]
    return []


def ranks_with_points(facts: ConstrainedFacts, part: dict, where: str) -> tuple[int, int] | str:
    """``(rank_p Gamma_free(X), rank_p [Gamma_free(X); Gamma_free(y)])`` for the part's points ``y`` and prime.

    Recomputed from the case with the verifier's own forward pass; a string (why) when a point of ``y``
    is malformed or on a kink, or the prime divides a denominator of the points.
    """
    p = part["prime"]
    Y = [[rational(v) for v in y] for y in part["y"]]
    both, why = _with_points(facts, Y, f"{where}.y")
    if both is None:
        return why
    if not usable_prime(p, both.avoid):
        return f"{where}.prime: {p} divides a denominator of the points y"
    G = both.gamma_mod_p(p)
    rows = len(facts.X) * facts.cn.widths[-1]
    return rank_mod_p(G[:rows], p), rank_mod_p(G, p)


def check_submersion(facts: ConstrainedFacts, part: dict) -> list[str]:
    """Failures of a ``submersion`` part (empty: theta is not locally identifiable)."""
    where, cn, p = "certificate.submersion", facts.cn, part["prime"]
    rows = len(facts.X) * cn.widths[-1]
    bad = smooth_at_x(facts, p, where)
    if bad:
        return bad
    ranks = ranks_with_points(facts, part, where)
    if isinstance(ranks, str):
        return [ranks]
    r_x, r_xy = ranks
    fails = []
    if r_x != part["rank_x"] or r_x != rows:
        fails.append(f"{where}.rank_x: Gamma_free(X) has rank {r_x} mod {p} for {rows} rows, the certificate says "
                     f"{part['rank_x']} (full row rank needed)")
    if r_xy != part["rank_xy"] or r_xy <= rows:
        fails.append(f"{where}.rank_xy: [Gamma_free(X); Gamma_free(y)] has rank {r_xy} mod {p}, the certificate "
                     f"says {part['rank_xy']} (more than {rows} needed)")
    return fails


def check_entering_submersion(facts: ConstrainedFacts, part: dict) -> list[str]:
    """Failures of an ``entering_submersion`` part (empty: theta is not locally identifiable)."""
    where, cn = "certificate.entering_submersion", facts.cn
    k, rows = cn.n_params, len(facts.X) * cn.widths[-1]
    if len(part["active"]) != len(facts.ties):
        return [f"{where}.active: {len(part['active'])} sides for the case's {len(facts.ties)} ties"]
    p = part["prime"]
    if not usable_prime(p, facts.avoid):
        return [f"{where}.prime: {p} is not a prime in [2^20, 2^31) dividing no denominator"]
    sides = tuple(bool(a) for a in part["active"])
    pattern = facts.resolution(sides) if sides else None
    r = rank_mod_p(facts.gamma_mod_p(p, pattern), p)
    if r != part["rank_x"] or r != rows:
        return [f"{where}.rank_x: Gamma_free(active) has rank {r} mod {p} for {rows} rows, the certificate says "
                f"{part['rank_x']} (full row rank needed)"]
    delta = [flint.fmpq(0)] * k
    for m, (j, c) in enumerate(part["delta"]):
        if j >= k:
            return [f"{where}.delta[{m}]: {j} is not a parameter (n_params = {k})"]
        delta[j] = rational(c)
    hidden: list[flint.fmpq_mat] = []
    if any(d != 0 for d in directional_derivative(cn, facts.X, delta, pattern, hidden)):
        return [f"{where}.delta: Gamma_free(active) delta is not 0 (exact)"]
    persistent = persistent_ties(facts)
    for (i, l, v), side in zip(facts.ties, sides):
        if (i, l, v) in persistent:
            continue
        dz = hidden[l - 1][i, v]
        if not (dz > 0 if side else dz < 0):
            return [f"{where}.delta: the tie of unit ({l}, {v}) at sample {i} moves by {dz} along delta, not "
                    f"strictly to its {'active' if side else 'inactive'} side"]
    y = [rational(v) for v in part["y"]]
    both, why = _with_points(facts, [y], f"{where}.y")
    if both is None:
        return [why]
    at_y = directional_derivative(cn, [y], delta)
    if all(d == 0 for d in at_y):
        return [f"{where}.y: f(y) does not move along delta (d f(y) . delta = 0)"]
    return []
