"""Certified intervals for ``R_Gamma``: the verdict first, the exact rank only when it is cheap.

The rank rules need less than ``R_Gamma`` itself: ``C_S`` fails as soon as one
certified kernel vector of ``Gamma`` exists, and ``C_N`` holds as soon as an upper
bound on ``R_Gamma`` is below a lower bound on ``R_A`` (Theorems 8-9, Prop. 11).
:func:`gamma_upper_bound` looks for such an upper bound among the cheap certified
kernel vectors (the semi-local kernel, :func:`exactident.ranks.kernels.semi_local_kernel`,
then single kernel vectors by p-adic lifting, :mod:`exactident.linalg.dixon`); the
rank is then reported as the certified interval ``[rank_p Gamma, dim - k]`` beside a
Monte Carlo value with its proven error bound (:func:`monte_carlo_gamma`).

Called by :mod:`exactident.ranks.certify`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import flint
import numpy as np

from exactident.budget import stage
from exactident.linalg.certified import (
    _zero_guard,
    has_full_column_rank,
    kernel_is_checkable,
    kernel_to_integer_columns,
)
from exactident.linalg.modular import random_primes
from exactident.model.fixed_edges import FixedEdges
from exactident.model.gamma_modular import ModularData, gamma_entry_bound, gamma_mod_p
from exactident.model.network import Network

__all__ = ["gamma_upper_bound", "monte_carlo_gamma"]


def gamma_upper_bound(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                      fixed: FixedEdges, lower: tuple[int, int, np.ndarray], below: int, *,
                      avoid: int, data: ModularData, rng: random.Random,
                      semi_local: Callable[[], list[dict[int, flint.fmpq]]]) -> dict[str, Any] | None:
    """A certified upper bound ``dim - k < below`` on ``rank Gamma`` from cheap kernel vectors, or None.

    Parameters
    ----------
    net, X, pattern, fixed
        As for :func:`exactident.model.gamma.gamma_exact`.
    lower : (rank, prime, image)
        ``rank Gamma mod p`` (a lower bound, :func:`exactident.linalg.certified.modular_lower_bound`).
    below : int
        The bound must be below this (a certified lower bound on ``R_A``, or ``dim``).
    semi_local : callable
        The semi-local kernel (exact vectors of ``ker Gamma`` over Q), built once by the caller.

    Returns
    -------
    dict or None
        The ``upper`` part of a rank certificate: ``{"kind": "kernel", "bound": dim - k,
        "source": "semi-local", "nullity": k}`` (rebuilt and checked by the verifier), or
        ``{"kind": "kernel", "bound", "source": "dixon", "kernel", "primes"}`` (explicit
        vectors, checked like a CRT kernel).  None when no cheap bound is below ``below``.
    """
    dim = net.dim
    shape = (len(X) * net.widths[-1], dim)
    K = semi_local()
    if K and dim - len(K) < below:
        K_int = kernel_to_integer_columns(K)
        q = random_primes(1, avoid, rng, exclude=[lower[1]])[0]
        image = lambda p: gamma_mod_p(net, X, pattern, fixed, p, avoid, data)  # noqa: E731
        if has_full_column_rank(K_int, dim, q) and kernel_is_checkable(K_int, shape, gamma_entry_bound(net, X)) \
                and _zero_guard(image, dim, K_int, avoid, rng, [lower[1], q]):
            return {"kind": "kernel", "bound": dim - len(K), "source": "semi-local", "nullity": len(K)}
    return None


def monte_carlo_gamma(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                      fixed: FixedEdges, lower: tuple[int, int, np.ndarray], upper: int, *, avoid: int,
                      data: ModularData, rng: random.Random, max_primes: int = 1) -> dict[str, Any]:
    """The Monte Carlo value of ``rank Gamma`` inside a certified interval, and its proven error bound.

    ``max_primes`` uniform primes are drawn (:func:`exactident.linalg.montecarlo.monte_carlo_rank`);
    the value is the largest rank seen (the interval's lower end counts too), capped by nothing:
    it never exceeds the certified upper bound since a rank mod p is a lower bound.

    Returns
    -------
    dict
        ``{"rank_gamma": value, "error_probability": e}``: ``e`` bounds the probability that
        ``value`` is below the exact rank (0 when ``value`` reaches the certified upper bound).
    """
    from exactident.linalg.montecarlo import monte_carlo_rank

    stage("ranks mod p (Monte Carlo)", rows=len(X) * net.widths[-1], cols=net.dim)
    if lower[0] >= upper:
        return {"rank_gamma": lower[0], "error_probability": 0.0}
    value, err = monte_carlo_rank(lambda q: gamma_mod_p(net, X, pattern, fixed, q, avoid, data),
                                  (len(X) * net.widths[-1], net.dim), avoid, lambda: gamma_entry_bound(net, X),
                                  rng, first=lower, max_primes=max_primes)
    return {"rank_gamma": value, "error_probability": 0.0 if value >= upper else err}
