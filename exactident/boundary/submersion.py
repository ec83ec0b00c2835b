"""The submersion certificate of non-identifiability for a constrained network (any architecture).

Suppose no sample is on a kink (no tie at a kinked unit, except persistent ties:
:func:`~exactident.model.gamma_free.persistent_ties`, which stay ties near theta) and ``Gamma_free(X, theta)`` has full
row rank ``n N_L``.  Near ``theta`` the outputs ``F_X`` are a polynomial map (the pattern is
locally constant) of constant rank ``n N_L``, a submersion, so its fiber
``M = F_X^{-1}(F_X(theta))`` is, near ``theta``, a manifold with tangent space
``ker Gamma_free(X)``.  Take more points ``y`` (none on a kink either).  If
``rank [Gamma_free(X); Gamma_free(y)] > n N_L``, some ``v`` in ``ker Gamma_free(X)`` has
``Gamma_free(y) v != 0``, so ``F_y`` is not constant on ``M`` near ``theta``: in every
neighbourhood of ``theta`` there is a ``theta'`` with the outputs of ``theta`` on ``X`` and other
outputs at ``y``, a different function.  ``theta`` is not locally identifiable, for every
architecture of the constrained form (docs/theory.md, "Beyond the layered ReLU MLP").

Both ranks are *lower* bounds mod a prime (a rank mod p never exceeds the rank over Q), which is
all the argument needs: ``rank_p Gamma_free(X) = n N_L`` proves full row rank, and
``rank_p [Gamma_free(X); Gamma_free(y)] > n N_L`` proves the increase.

Called by :mod:`exactident.check.free_route` (the layer-graph stages of :func:`exactident.check.check`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from itertools import product
from typing import Any

import flint
import numpy as np

from exactident.linalg.modular import random_primes, rank_mod_p
from exactident.model.gamma_free import (
    free_data_denominator,
    free_state,
    gamma_free_exact,
    gamma_free_mod_p,
    persistent_ties,
    resolve_ties,
)
from exactident.model.network import Network

__all__ = ["check_entering_submersion", "check_submersion", "find_entering_submersion", "find_submersion", "tangent"]


def _ranks(cn: Network, X: Sequence[Sequence[flint.fmpq]], Y: Sequence[Sequence[flint.fmpq]],
           p: int) -> tuple[int, int] | None:
    """``(rank_p Gamma_free(X), rank_p Gamma_free(X + Y))``, or None when a point of ``X + Y`` is on a kink
    (persistent ties excepted: they stay ties near theta, so ``F`` stays smooth)."""
    rows = [list(r) for r in X] + [list(r) for r in Y]
    st = free_state(cn, rows)
    if len(persistent_ties(cn, rows, st)) != len(st.ties):
        return None
    avoid = free_data_denominator(cn, rows)
    if avoid % p == 0:
        return None
    G = gamma_free_mod_p(cn, rows, st.pattern, p, avoid)
    return rank_mod_p(G[:len(X) * cn.widths[-1]], p), rank_mod_p(G, p)


def check_submersion(cn: Network, X: Sequence[Sequence[flint.fmpq]], Y: Sequence[Sequence[flint.fmpq]],
                     p: int) -> bool:
    """The exact check of a submersion certificate: no point of ``X`` or ``Y`` on a kink (but persistent ties),
    ``rank_p Gamma_free(X) = n N_L`` and ``rank_p Gamma_free(X + Y) > n N_L``.

    Examples
    --------
    ``f(x) = v relu(w x + b)`` seen at one point ``x = 1`` (one equation, three parameters); a second
    point ``y = 2`` adds a rank:

    >>> from exactident.model.network import Network
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[1]]), flint.fmpq_mat([[1]])],
    ...               [[flint.fmpq(0)], [flint.fmpq(0)]])
    >>> check_submersion(net, [[flint.fmpq(1)]], [[flint.fmpq(2)]], 1000003)
    True
    """
    got = _ranks(cn, X, Y, p)
    rows = len(X) * cn.widths[-1]
    return got is not None and got[0] == rows and got[1] > rows


def find_submersion(cn: Network, X: Sequence[Sequence[flint.fmpq]], rng: random.Random,
                    tries: int = 6) -> dict[str, Any] | None:
    """A checked submersion certificate ``{"kind": "submersion", "y", "prime", "rank_x", "rank_xy", "why"}``, or None.

    The extra points are drawn as random small integers (spread like the sample), one at a time.
    """
    rows = len(X) * cn.widths[-1]
    if rows >= cn.n_params or not X:
        return None  # no room: full row rank and a rank increase would exceed the number of parameters
    flat = [abs(v) for row in X for v in row]
    span = max(2, int(max(flat, default=flint.fmpq(1))) + 1)
    avoid = free_data_denominator(cn, X)
    for _ in range(tries):
        p = random_primes(1, avoid, rng)[0]
        y = [flint.fmpq(rng.randint(-span, span), rng.choice([1, 2, 3])) for _ in range(cn.widths[0])]
        got = _ranks(cn, X, [y], p)
        if got is None:
            continue
        r_x, r_xy = got
        if r_x != rows:
            return None  # not of full row rank mod p (this prime, or at all): no certificate of this kind
        if r_xy > rows:
            return {"kind": "submersion", "y": [[str(v) for v in y]], "prime": p, "rank_x": r_x, "rank_xy": r_xy,
                    "why": (f"Gamma_free has full row rank {rows} (a submersion near theta) and one more point y "
                            f"raises it to {r_xy}: the fiber of the outputs on X moves f(y) (submersion "
                            "certificate)")}
    return None


def tangent(cn: Network, x: Sequence[flint.fmpq], pattern_row: Sequence[Sequence[bool]],
            delta: Sequence[flint.fmpq]) -> tuple[list[list[flint.fmpq]], list[list[flint.fmpq]]]:
    """Exact forward mode at one input with the pattern held: ``(z_l, d z_l / d theta . delta)`` for ``l = 1..L``.

    ``pattern_row[l-1][v]``: True where unit ``v`` of hidden layer ``l`` has derivative 1, False for its slope.
    """
    zero = flint.fmpq(0)
    h, dh = [flint.fmpq(v) for v in x], [zero] * len(x)
    Z, dZ = [], []
    for l in range(1, cn.L + 1):
        W, I, b, bI = cn.W[l - 1].table(), cn.W_index[l - 1], cn.b[l - 1], cn.b_index[l - 1]
        z, dz = [], []
        for i in range(cn.widths[l]):
            acc = b[i]
            dacc = delta[int(bI[i])] if bI[i] >= 0 else zero
            for k in range(cn.widths[l - 1]):
                acc += W[i][k] * h[k]
                dacc += W[i][k] * dh[k] + (delta[int(I[i, k])] * h[k] if I[i, k] >= 0 else zero)
            z.append(acc)
            dz.append(dacc)
        Z.append(z)
        dZ.append(dz)
        if l < cn.L:
            a, aI = cn.negative_slope[l - 1], cn.slope_index[l - 1]
            h = [zv if on else a[v] * zv for v, (zv, on) in enumerate(zip(z, pattern_row[l - 1]))]
            dh = [dzv if on else a[v] * dzv + (delta[int(aI[v])] * zv if aI[v] >= 0 else zero)
                  for v, (zv, dzv, on) in enumerate(zip(z, dz, pattern_row[l - 1]))]
    return Z, dZ


def _row(pattern: Sequence[np.ndarray], i: int) -> list[list[bool]]:
    return [[bool(b) for b in P[i]] for P in pattern]


def check_entering_submersion(cn: Network, X: Sequence[Sequence[flint.fmpq]], active: Sequence[bool],
                              delta: Sequence[flint.fmpq], y: Sequence[flint.fmpq], p: int) -> bool:
    """The exact check of an entering submersion (ties on ``X``; docs/theory.md): for the resolution ``active`` of
    the ties, ``rank_p Gamma_free(s) = n N_L``, ``Gamma_free(s) delta = 0`` exactly, every non-persistent tie's
    pre-activation moves along ``delta`` strictly to its side, ``y`` is on no kink (but persistent ties) and
    ``f(y)`` moves along ``delta``."""
    st = free_state(cn, X)
    if len(active) != len(st.ties) or len(delta) != cn.n_params:
        return False
    avoid = free_data_denominator(cn, X)
    if avoid % p == 0:
        return False
    pattern = resolve_ties(st, active)
    if rank_mod_p(gamma_free_mod_p(cn, X, pattern, p, avoid), p) != len(X) * cn.widths[-1]:
        return False
    zero = flint.fmpq(0)
    persistent = set(persistent_ties(cn, X, st))
    for i in range(len(X)):
        _, dZ = tangent(cn, X[i], _row(pattern, i), delta)
        if any(d != zero for d in dZ[-1]):
            return False
        for t, (ti, l, v) in enumerate(st.ties):
            if ti == i and t not in persistent and not (dZ[l - 1][v] > zero if active[t] else dZ[l - 1][v] < zero):
                return False
    sy = free_state(cn, [list(y)])
    if len(persistent_ties(cn, [list(y)], sy)) != len(sy.ties):
        return False
    _, dY = tangent(cn, y, _row(sy.pattern, 0), delta)
    return any(d != zero for d in dY[-1])


def _enters(cn, X, st, pattern, active, free, delta) -> bool:
    """Only the tied samples: does ``delta`` move every free tie strictly to its side?  (A cheap pre-check.)"""
    zero = flint.fmpq(0)
    for i in sorted({st.ties[t][0] for t in free}):
        _, dZ = tangent(cn, X[i], _row(pattern, i), delta)
        for t in free:
            ti, l, v = st.ties[t]
            if ti == i and not (dZ[l - 1][v] > zero if active[t] else dZ[l - 1][v] < zero):
                return False
    return True


def find_entering_submersion(cn: Network, X: Sequence[Sequence[flint.fmpq]], rng: random.Random,
                             max_entries: int = 200_000, max_free_ties: int = 6,
                             tries: int = 12) -> dict[str, Any] | None:
    """A checked entering-submersion certificate for a sample with ties, or None (small cases only: exact kernels).

    ``{"kind": "entering-submersion", "active", "delta", "y", "prime", "rank_x", "why"}``.
    """
    from exactident.linalg import exact

    rows, k = len(X) * cn.widths[-1], cn.n_params
    st = free_state(cn, X)
    persistent = set(persistent_ties(cn, X, st))
    free = [t for t in range(len(st.ties)) if t not in persistent]
    if not X or rows >= k or rows * k > max_entries or not free or len(free) > max_free_ties:
        return None
    avoid = free_data_denominator(cn, X)
    p = random_primes(1, avoid, rng)[0]
    span = max(2, int(max((abs(v) for row in X for v in row), default=flint.fmpq(1))) + 1)
    for sides in product([True, False], repeat=len(free)):
        active = [True] * len(st.ties)
        for t, side in zip(free, sides):
            active[t] = side
        pattern = resolve_ties(st, active)
        if rank_mod_p(gamma_free_mod_p(cn, X, pattern, p, avoid), p) != rows:
            continue
        K = exact.nullspace(gamma_free_exact(cn, X, pattern))
        for _ in range(tries):
            c = [rng.randint(-3, 3) for _ in range(K.ncols())]
            delta = [sum((K[j, q] * c[q] for q in range(K.ncols())), flint.fmpq(0)) for j in range(k)]
            y = [flint.fmpq(rng.randint(-span, span), rng.choice([1, 2, 3])) for _ in range(cn.widths[0])]
            if _enters(cn, X, st, pattern, active, free, delta) \
                    and check_entering_submersion(cn, X, active, delta, y, p):
                return {"kind": "entering-submersion", "active": active,
                        "delta": [[j, str(d)] for j, d in enumerate(delta) if d != 0], "y": [str(v) for v in y],
                        "prime": p, "rank_x": rows,
                        "why": (f"on the tie resolution ({cn.describe_ties(st.ties, active)}) Gamma_free has "
                                f"full row rank {rows} and a kernel direction (moving "
                                f"{cn.describe_params([j for j, d in enumerate(delta) if d != 0], 4)}) enters that "
                                "piece and moves f(y): outputs on X kept, another function (entering-submersion "
                                "certificate)")}
    return None
