"""Stage ``ranks mod p`` of a layer graph: the certified rank of ``Gamma_free`` at one tie resolution.

``Gamma_free(s) = d f(X) / d theta`` over the free parameters (:mod:`exactident.model.gamma_free`), at
the tie resolution ``s``; its rank is certified mod random primes with the proven upper bound
``dim_free`` (the rescalings ``S_H`` the family keeps lie in its kernel, :mod:`exactident.model.symmetry`).
:func:`free_rank` gives the rank or, when the verdict does not need more, a certified interval beside
its Monte Carlo value; :func:`line_kernel` lowers the interval's upper end by exact kernel vectors
from dead, silent or constant units (valid for every tie resolution).

Called by :mod:`exactident.check.free_route` (the layer-graph stages of :func:`exactident.check.check`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import flint
import numpy as np

from exactident.linalg import exact
from exactident.linalg.certified import certified_rank
from exactident.model.gamma_free import (
    FreeModularData,
    FreeState,
    free_data_denominator,
    gamma_free_entry_bound,
    gamma_free_exact,
    gamma_free_mod_p,
)
from exactident.model.network import Network
from exactident.model.symmetry import Symmetry

__all__ = ["MAX_EXACT_FREE_ENTRIES", "MC_PRIMES", "FreeRank", "free_rank", "line_kernel"]

#: Uniformly drawn primes for the Monte Carlo value inside a certified interval (each lowers its error bound).
MC_PRIMES = 3
#: ``Gamma_free`` is eliminated exactly over Q (after the modular route failed) up to this many entries.
MAX_EXACT_FREE_ENTRIES = 400_000


class FreeRank:
    """The rank of ``Gamma_free`` at one pattern: exact with its certificate, or a certified interval.

    ``rank`` is None for an interval; ``certificate`` is then in the *interval* form (``shape``,
    ``lower``, ``upper``, no ``rank``) and ``montecarlo`` holds the Monte Carlo value inside it.
    """

    def __init__(self, rank: int | None, certificate: dict[str, Any] | None, interval: tuple[int, int],
                 montecarlo: dict[str, Any] | None = None) -> None:
        self.rank, self.certificate, self.interval, self.montecarlo = rank, certificate, interval, montecarlo

    @property
    def value(self) -> int:
        """The exact rank, else the Monte Carlo value (else the certified lower bound)."""
        if self.rank is not None:
            return self.rank
        return int((self.montecarlo or {}).get("rank_gamma", self.interval[0]))


def free_rank(cn: Network, X: Sequence[Sequence[flint.fmpq]], pattern, sym: Symmetry,
              rng: random.Random, data: FreeModularData | None = None, avoid: int | None = None,
              exact_ranks: bool = False) -> FreeRank:
    """Certified ``rank Gamma_free`` at ``pattern``, with the upper bound ``dim_free`` (``S_H`` is in its kernel).

    The lower bound is a rank mod a random word-size prime.  When it meets the proven upper bound
    (``dim_free``, or the number of rows) the rank is exact.  Otherwise (verdict first) the rank is
    the certified interval ``[lower, min(dim_free, rows)]`` beside its Monte Carlo value (up to
    :data:`MC_PRIMES` uniformly drawn primes, :func:`exactident.linalg.montecarlo.monte_carlo_rank`):
    no verdict needs more, since ``identifiable`` needs the lower bound to reach ``dim_free`` and ``not-identifiable``
    needs a certificate.  With ``exact_ranks`` an exact kernel (CRT reconstruction checked exactly,
    or FLINT's nullspace for small matrices) closes the gap, as before; when neither works the rank
    is the interval all the same.

    Returns
    -------
    FreeRank
        ``certificate`` in the rank-certificate form of :func:`exactident.linalg.certified.certified_rank`
        (``upper.kind`` is ``"symmetry"`` when the bound ``dim_free`` was met), or its interval form.
    """
    from exactident.linalg.lower_bound import modular_lower_bound

    avoid = avoid if avoid is not None else free_data_denominator(cn, X)
    data = data or FreeModularData(cn, X)
    shape = (len(X) * cn.widths[-1], cn.n_params)
    bounds = {"shape": min(shape), "symmetry": sym.dim_free}
    ub_kind = min(bounds, key=lambda k: bounds[k])
    ub = bounds[ub_kind]

    def image(p: int):
        return gamma_free_mod_p(cn, X, pattern, p, avoid, data)

    def entry_bound() -> int:
        return gamma_free_entry_bound(cn, X)

    def monte_carlo(lower: tuple[int, int, Any]) -> tuple[tuple[int, int, Any], dict[str, Any]]:
        from exactident.linalg.montecarlo import monte_carlo_rank

        value, err = monte_carlo_rank(image, shape, avoid, entry_bound, rng, first=lower, max_primes=MC_PRIMES)
        if value > lower[0]:  # the first prime was unlucky: a certified lower bound as high as the value
            again = modular_lower_bound(image, avoid=avoid, rng=rng, n_primes=3, stop_at=value)
            lower = max(lower, again, key=lambda t: t[0])
        return lower, {"rank_gamma": value, "error_probability": 0.0 if value >= ub else err}

    lower = modular_lower_bound(image, avoid=avoid, rng=rng, n_primes=2 if exact_ranks else 1, stop_at=ub)
    montecarlo = None
    if lower[0] < ub and not exact_ranks:
        lower, montecarlo = monte_carlo(lower)
    if lower[0] >= ub or exact_ranks:
        small = shape[0] * shape[1] <= MAX_EXACT_FREE_ENTRIES

        def exact_kernel():
            from exactident.ranks.kernels import sparse_columns

            return sparse_columns(exact.nullspace(gamma_free_exact(cn, X, pattern)))

        cr = certified_rank(image, shape, avoid=avoid, entry_bound=entry_bound,
                            upper_bounds={"symmetry": sym.dim_free}, rng=rng, lower=lower,
                            exact_kernel=exact_kernel if small else None)
        if cr is not None:
            return FreeRank(cr.rank, cr.certificate, (cr.rank, cr.rank))
        if small:
            r = exact.rank(gamma_free_exact(cn, X, pattern))
            return FreeRank(r, {"rank": r, "shape": list(shape), "upper": {"kind": "exact-elimination"}}, (r, r))
        lower, montecarlo = monte_carlo(lower)  # no exact kernel: the interval after all
    r_low, prime, _image = lower
    cert = {"shape": list(shape), "lower": {"prime": prime, "rank_mod_p": r_low},
            "upper": {"kind": ub_kind, "bound": ub}}
    return FreeRank(None, cert, (r_low, ub), montecarlo)


def line_kernel(cn: Network, state: FreeState, sym: Symmetry, rng: random.Random,
                max_columns: int = 64) -> tuple[int, list[dict[int, flint.fmpq]]] | None:
    """An upper bound ``k - rank [K | S_H]`` on ``rank Gamma_free(s)`` from exact kernel vectors, or None.

    ``K``: ``e_j`` for a parameter whose column of ``Gamma_free(s)`` is 0 by the structure (entering a
    dead unit, leaving a silent one: :func:`exactident.boundary.dead_units.zero_columns`), and the
    constant-unit lines ``e_j - h e_jb`` (:func:`~exactident.boundary.dead_units.constant_lines`: a unit
    with the same output ``h`` on every sample), along which the outputs on ``X`` are constant.  Each
    is in ``ker Gamma_free(s)`` whatever the tie resolution ``s``, and so is ``S_H``.
    ``rank [K | S_H]`` is bounded below by its rank mod a prime: the bound is valid either way.
    At most ``max_columns`` directions (the verifier checks each by an exact forward pass).

    Returns
    -------
    (bound, K) or None
        None when the directions add nothing to ``S_H`` (the bound would not be below ``dim_free``).
    """
    from exactident.boundary.dead_units import constant_lines, zero_columns
    from exactident.linalg.certified import kernel_to_integer_columns
    from exactident.linalg.modular import random_primes, rank_mod_p

    one = flint.fmpq(1)
    K: list[dict[int, flint.fmpq]] = [{j: one} for j in zero_columns(cn, state)]
    K += [{j: one, jb: -h} for j, jb, _unit, _z, h in constant_lines(cn, state)]
    K = K[:max_columns]
    if not K:
        return None
    k = cn.n_params
    cols = kernel_to_integer_columns(K) + kernel_to_integer_columns(list(sym.basis))
    p = random_primes(1, 1, rng)[0]
    M = np.zeros((k, len(cols)), dtype=np.int64)
    for c, col in enumerate(cols):
        for i, v in col.items():
            M[i, c] = v % p
    bound = k - rank_mod_p(M, p)
    return (bound, K) if bound < sym.dim_free else None
