"""The constant-rank certificate: Theorem 8's argument (``C_N``) carried to layer graphs, with a witness point.

Let no sample be on a kink (persistent ties excepted, which stay ties near ``theta``). Near ``theta`` the
pattern on ``X`` is constant, so each unit's derivative ``d_v(x^i)`` is 1 on the active side and its negative
slope otherwise, and Proposition 1 of the paper holds for the dense network ``W = T theta + c`` with these
derivatives: ``F_X(theta') = (alpha_s ⊗ I_{N_L}) phi(T theta' + c)``, ``phi`` the lifting over the complete
layered graph and ``alpha_s`` the paper's ``alpha`` with ``d_v`` in place of the 0/1 indicator. A PReLU slope
``a_v`` is a parameter, so it goes into the lifting instead: columns indexed by (path ``p``, set ``S`` of the
PReLU units of ``p`` on their negative side), ``phi~_{p,S} = phi_p prod_{v in S} a_v`` and ``alpha~`` the
indicator that ``S`` is the negative set at ``x^i`` times the fixed slopes' ``d``. Either way
``F_X = A psi(theta')`` with ``A`` linear and constant near ``theta``, hence
``rank Gamma_free(theta') <= rank A`` for every ``theta'`` near ``theta``. If
``rank Gamma_free(theta) = rank A`` the rank is constant near ``theta`` (it cannot drop nearby either), so
the fibre ``M = F_X^{-1}(F_X(theta))`` is, near ``theta``, a manifold with tangent ``ker Gamma_free(X)``
(constant rank theorem). One more point ``y`` (on no kink) with
``rank [Gamma_free(X); Gamma_free(y)] > rank A`` gives a tangent direction of ``M`` that moves ``f(y)``:
arbitrarily close to ``theta`` another function has the outputs of ``theta`` on ``X``.

This is the paper's proof of Theorem 8 with the last step changed: the paper concludes from
``rank A < dim`` and its knowledge of the dense MLP's equivalence classes; a layer graph may have
symmetries no one has listed (docs/theory.md, "A necessary condition beyond the dense ReLU MLP", gives
a PReLU network with ``rank Gamma_free = rank A < dim_free`` that is identifiable), so the witness ``y``
replaces that step. When ``rank A = n N_L`` this is the submersion certificate.

Ranks: ``rank A = N_L rank alpha`` is computed exactly over Q from the Gram matrix ``alpha alpha^T``
(``n x n``, a product formula over the layers, :func:`alpha_gram`); ``rank_p Gamma_free`` is a lower
bound of the rank over Q, so ``rank_p Gamma_free(X) = rank A`` proves ``rank Gamma_free(X) = rank A`` and
``rank_p [Gamma_free(X); Gamma_free(y)] > rank A`` proves the increase.

Called by :func:`exactident.check.free_route.certificate_stage` after the other certificates.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import flint
import numpy as np

from exactident.linalg.modular import random_primes
from exactident.model.gamma_free import FreeState, free_data_denominator, persistent_ties
from exactident.model.network import Network

__all__ = ["MAX_GRAM_SAMPLES", "alpha_gram", "find_constant_rank", "rank_a", "try_constant_rank"]


#: Largest sample (rows of ``alpha``) whose exact Gram rank the rule computes; past it the rule does not run.
MAX_GRAM_SAMPLES = 300


def _layer_rows(cn: Network, pattern: Sequence[np.ndarray], l: int, n: int) -> flint.fmpq_mat:
    """``D_l`` with ``D_l D_l^T = s_l``: per sample, ``d_v`` for a fixed slope (1 on the active side, the slope
    else), and the two indicators (active, negative) for a PReLU unit, whose inner product is ``[same side]``."""
    P, a, idx = pattern[l - 1], cn.negative_slope[l - 1], cn.slope_index[l - 1]
    one, zero = flint.fmpq(1), flint.fmpq(0)
    rows = []
    for i in range(n):
        row = []
        for v in range(cn.widths[l]):
            on = bool(P[i, v])
            if int(idx[v]) >= 0:
                row += [one if on else zero, zero if on else one]
            else:
                row.append(one if on else a[v])
        rows.append(row)
    return flint.fmpq_mat(rows)


def alpha_gram(cn: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray]
               ) -> flint.fmpq_mat:
    """``alpha_s alpha_s^T`` (``n x n``, Q) for the lifting over the complete layered graph (``alpha~`` with PReLU).

    With ``s_m(i, j) = sum_v c_v(i, j)`` (hidden layer ``m``; ``c_v = d_v(x^i) d_v(x^j)`` for a fixed slope,
    ``[v on the same side at x^i and x^j]`` for a PReLU unit), the paths from the inputs give
    ``<x^i, x^j> prod_{m=1}^{L-1} s_m``, the paths from hidden layer ``l`` give ``prod_{m=l}^{L-1} s_m`` and
    the empty path ``beta`` gives 1.

    Examples
    --------
    One hidden ReLU unit, ``x = 1`` active and ``x = -1`` dead: rows ``(1, 1, 1)`` and ``(0, 0, 1)``.

    >>> from exactident.model.network import Network
    >>> cn = Network((1, 1, 1), [[[1]], [[1]]], [[0], [0]])
    >>> pat = [np.array([[True], [False]])]
    >>> print(alpha_gram(cn, [[flint.fmpq(1)], [flint.fmpq(-1)]], pat))
    [3, 1]
    [1, 1]
    """
    n, L = len(X), cn.L
    if n == 0:
        return flint.fmpq_mat(0, 0)
    Xm = flint.fmpq_mat([[flint.fmpq(v) for v in row] for row in X])
    inputs = (Xm * Xm.transpose()).entries()
    P = [flint.fmpq(1)] * (n * n)  # P_l entrywise, from l = L (the empty product) down to 1
    total = [flint.fmpq(1)] * (n * n)  # beta
    for m in range(L - 1, 0, -1):
        D = _layer_rows(cn, pattern, m, n)
        S = (D * D.transpose()).entries()
        P = [p * q for p, q in zip(P, S)]
        total = [t + p for t, p in zip(total, P)]  # the paths from hidden layer m
    return flint.fmpq_mat(n, n, [t + x * p for t, x, p in zip(total, inputs, P)])


def rank_a(cn: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray]) -> int:
    """``rank A = N_L rank alpha`` over Q (Prop. 11 of the paper; ``alpha_s``, or ``alpha~`` with PReLU slopes)."""
    if not X:
        return 0
    return cn.widths[-1] * alpha_gram(cn, X, pattern).rank()


def find_constant_rank(cn: Network, X: Sequence[Sequence[flint.fmpq]], state: FreeState,
                       rng: random.Random, tries: int = 12) -> tuple[dict[str, Any] | None, str]:
    """A checked constant-rank certificate, or None and why not (one line).

    ``{"kind": "constant-rank", "y", "prime", "rank_a", "rank_x", "rank_xy", "why"}``. The extra point is drawn
    one at a time, alternately the midpoint of two random samples and random small rationals spread like the
    sample.
    """
    from exactident.boundary.submersion import _ranks

    if len(persistent_ties(cn, X, state)) != len(state.ties):
        return None, "a sample is on a kink: F_X is not smooth at theta"
    rows = len(X) * cn.widths[-1]
    if len(X) > MAX_GRAM_SAMPLES:
        return None, f"{len(X)} samples: past the cap of {MAX_GRAM_SAMPLES} for the exact rank of alpha"
    ra = rank_a(cn, X, state.pattern)
    if ra >= rows:
        return None, f"rank A = {ra} = n N_L: the submersion rule covers this sample"
    if ra >= cn.n_params:
        return None, f"rank A = {ra} >= {cn.n_params} parameters: no room for a fibre"
    span = max(2, int(max((abs(v) for row in X for v in row), default=flint.fmpq(1))) + 1)
    avoid = free_data_denominator(cn, X)
    for attempt in range(tries):
        p = random_primes(1, avoid, rng)[0]
        if attempt % 2 == 0 and len(X) > 1:  # between two samples: where an unseen piece of f often is
            i, j = rng.sample(range(len(X)), 2)
            y = [(a + b) / 2 for a, b in zip(X[i], X[j])]
        else:
            y = [flint.fmpq(rng.randint(-span, span), rng.choice([1, 2, 3])) for _ in range(cn.widths[0])]
        got = _ranks(cn, X, [y], p)
        if got is None:
            continue
        r_x, r_xy = got
        if r_x != ra:
            return None, f"rank Gamma_free = {r_x} mod p < rank A = {ra} (C_N's equality fails)"
        if r_xy > ra:
            return {"kind": "constant-rank", "y": [[str(v) for v in y]], "prime": p, "rank_a": ra, "rank_x": r_x,
                    "rank_xy": r_xy,
                    "why": (f"rank Gamma_free = rank A = {ra} < n N_L = {rows} (alpha constant near theta), so the "
                            "rank is constant near theta and the fibre of the outputs on X is a manifold; one more "
                            f"point y raises the rank to {r_xy}: the fibre moves f(y) (constant-rank certificate, "
                            "Theorem 8's argument)")}, ""
    return None, f"rank Gamma_free = rank A = {ra}, but no point y tried moved f(y) along the fibre"


def try_constant_rank(cn: Network, X: Sequence[Sequence[flint.fmpq]], state: FreeState,
                      rng: random.Random, tried: dict[str, str]) -> dict[str, Any] | None:
    """:func:`find_constant_rank` as the engine's last rule: the certificate, or None with ``tried`` noted."""
    found, why = find_constant_rank(cn, X, state, rng)
    if found is None:
        tried["constant-rank"] = why
    return found
