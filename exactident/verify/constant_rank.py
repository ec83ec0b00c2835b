"""The ``constant_rank`` part of a layer graph's report, re-checked from the case.

``constant_rank`` ``{y, prime, rank_a, rank_x, rank_xy}``
    No sample is on a kink (persistent ties excepted). Then near theta ``F_X(theta') = A psi(theta')`` with
    ``A = alpha ⊗ I`` constant (the paper's ``alpha`` with each unit's derivative, 1 or its fixed slope; a
    PReLU slope is moved into the lifting, ``alpha`` then records which side each PReLU unit is on), so
    ``rank Gamma_free <= rank A`` near theta. ``rank A = N_L rank alpha_s`` is recomputed here exactly
    over Q (from the Gram matrix ``alpha_s alpha_s^T``, written out below); ``rank Gamma_free(X) = rank_a``
    mod ``prime`` (a lower bound over Q) proves the rank constant near theta, so the fibre of ``F_X`` is a
    manifold with tangent ``ker Gamma_free(X)``; the points ``y`` are on no kink and
    ``rank [Gamma_free(X); Gamma_free(y)] = rank_xy > rank_a`` mod ``prime``: a direction of the fibre moves
    ``f(y)``, so arbitrarily close to theta another function has the outputs on X (docs/theory.md,
    "A necessary condition beyond the dense ReLU MLP").

Shares with the engine only the primitives (the modular ``Gamma_free`` of the verifier's facts, FLINT
ranks), not its Gram matrix.
"""

from __future__ import annotations

import flint

from exactident.verify.facts import ConstrainedFacts
from exactident.verify.submersion import ranks_with_points, smooth_at_x

__all__ = ["check_constant_rank", "rank_alpha"]


def rank_alpha(facts: ConstrainedFacts) -> int:
    """``rank alpha`` over Q on the ``z >= 0`` pattern of ``facts`` (``alpha~`` where a slope is a PReLU parameter).

    ``(alpha alpha^T)[i, j] = <x^i, x^j> P_1 + P_1 + ... + P_{L-1} + 1`` with
    ``P_l = prod_{m=l}^{L-1} sum_v c_v(x^i, x^j)``: the paths from the inputs, from each hidden layer, and
    the empty path; ``c_v`` is ``d_v(x^i) d_v(x^j)`` for a fixed slope (``d_v`` 1 on ``z >= 0``, the slope
    else) and 1 or 0 for a PReLU unit (on the same side at both samples or not: its slope is in the lifting).
    """
    cn, X = facts.cn, facts.X
    n, L = len(X), cn.L
    if n == 0:
        return 0
    one, zero = flint.fmpq(1), flint.fmpq(0)
    signs = facts.sign_pattern()

    def columns(m: int, i: int) -> list[flint.fmpq]:
        """Sample ``i``'s entries at hidden layer ``m``: ``d_v``, or (same side) one-hot pairs for PReLU units."""
        out: list[flint.fmpq] = []
        for v in range(cn.widths[m]):
            s = bool(signs[m - 1][i, v])
            if int(cn.slope_index[m - 1][v]) >= 0:
                out += [one, zero] if s else [zero, one]
            else:
                out.append(one if s else cn.negative_slope[m - 1][v])
        return out

    P = [one] * (n * n)
    total = [one] * (n * n)  # the empty path
    for m in range(L - 1, 0, -1):
        D = flint.fmpq_mat([columns(m, i) for i in range(n)])
        P = [p * q for p, q in zip(P, (D * D.transpose()).entries())]
        total = [t + p for t, p in zip(total, P)]  # the paths from hidden layer m
    Xm = flint.fmpq_mat(X)
    G = flint.fmpq_mat(n, n, [t + x * p for t, x, p in zip(total, (Xm * Xm.transpose()).entries(), P)])
    return int(G.rank())


def check_constant_rank(facts: ConstrainedFacts, part: dict) -> list[str]:
    """Failures of a ``constant_rank`` part (empty: theta is not locally identifiable)."""
    where, cn, p = "certificate.constant_rank", facts.cn, part["prime"]
    rows = len(facts.X) * cn.widths[-1]
    bad = smooth_at_x(facts, p, where)
    if bad:
        return bad
    ra = cn.widths[-1] * rank_alpha(facts)
    if ra != part["rank_a"] or ra >= rows:
        return [f"{where}.rank_a: rank A is {ra} for {rows} rows, the certificate says {part['rank_a']} "
                "(fewer than n N_L needed; n N_L is the submersion part)"]
    ranks = ranks_with_points(facts, part, where)
    if isinstance(ranks, str):
        return [ranks]
    r_x, r_xy = ranks
    fails = []
    if r_x != part["rank_x"] or r_x != ra:
        fails.append(f"{where}.rank_x: Gamma_free(X) has rank {r_x} mod {p}, the certificate says {part['rank_x']} "
                     f"(rank A = {ra} needed: the rank is then constant near theta)")
    if r_xy != part["rank_xy"] or r_xy <= ra:
        fails.append(f"{where}.rank_xy: [Gamma_free(X); Gamma_free(y)] has rank {r_xy} mod {p}, the certificate "
                     f"says {part['rank_xy']} (more than {ra} needed)")
    return fails
