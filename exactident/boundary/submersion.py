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

Called by :mod:`exactident.check_constrained`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import flint

from exactident.linalg.modular import random_primes, rank_mod_p
from exactident.model.constrained import ConstrainedNetwork
from exactident.model.gamma_free import free_data_denominator, free_state, gamma_free_mod_p, persistent_ties

__all__ = ["check_submersion", "find_submersion"]


def _ranks(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]], Y: Sequence[Sequence[flint.fmpq]],
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


def check_submersion(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]], Y: Sequence[Sequence[flint.fmpq]],
                     p: int) -> bool:
    """The exact check of a submersion certificate: no point of ``X`` or ``Y`` on a kink (but persistent ties),
    ``rank_p Gamma_free(X) = n N_L`` and ``rank_p Gamma_free(X + Y) > n N_L``.

    Examples
    --------
    ``f(x) = v relu(w x + b)`` seen at one point ``x = 1`` (one equation, three parameters); a second
    point ``y = 2`` adds a rank:

    >>> from exactident.model.network import Network
    >>> from exactident.model.constrained import from_network
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[1]]), flint.fmpq_mat([[1]])],
    ...               [[flint.fmpq(0)], [flint.fmpq(0)]])
    >>> check_submersion(from_network(net), [[flint.fmpq(1)]], [[flint.fmpq(2)]], 1000003)
    True
    """
    got = _ranks(cn, X, Y, p)
    rows = len(X) * cn.widths[-1]
    return got is not None and got[0] == rows and got[1] > rows


def find_submersion(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]], rng: random.Random,
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
