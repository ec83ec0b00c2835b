"""The functional dimension of a layer graph's theta, certified both ways (docs/symmetries.md, "Layer graphs").

A layer graph (residual, leaky/PReLU, convolution and pooling networks, compiled to a
:class:`~exactident.model.constrained.ConstrainedNetwork`: ``W = T theta + c``) has
``fdim_free(theta) = max rank J_free(X, theta)`` over finite samples ``X`` of the domain
(``R^n`` or a box) without ties, ``J_free`` the Jacobian of the outputs in the free
parameters (a tied parameter is one column: :mod:`exactident.model.gamma_free`).

- **Upper bound** ``dim_free = n_params - dim S_H`` (:func:`exactident.model.symmetry.rescaling_symmetry`).
  Every generator of ``H`` (a log-scale ``s`` the family keeps: a positively homogeneous
  unit's incoming parameters times ``e^{s}``, its outgoing ones times ``e^{-s}``) maps the family
  to itself and leaves the function unchanged for every theta, so ``t -> f(x, e^{t s} . theta)``
  is constant; at a tie-free ``x`` the outputs are differentiable in theta and the derivative at
  ``t = 0``, the ``S_H`` direction, is in ``ker J_free(x)``.  No further mechanism is proved:
  the domain provers of the plain MLP (dead, blocked, always-active neurons, twins) read a
  :class:`~exactident.model.network.Network`, none handles a constrained network, so a gap
  ``dim_free - lower`` stays unexplained rather than borrowed.
- **Lower bound** ``rank J_free mod p`` (a lower bound over Q) at the case's sample points in the
  domain without ties, then random dyadic points of the domain
  (:func:`exactident.symmetry.linewalk.domain_points`) in batches while the rank grows
  (stopping after three batches without gain, or at ``dim_free``).  The line walk and the
  design point search of the plain MLP are not run (they read a plain network).

``lower = dim_free`` certifies "no hidden symmetries" (beyond ``H``).  Called by
:mod:`exactident.symmetry.fdim_command`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from math import lcm
from typing import Any

import flint
import numpy as np

from exactident.errors import InvariantViolation, UnsupportedCaseError
from exactident.linalg.modular import random_primes, to_nmod_mat
from exactident.model.constrained import ConstrainedNetwork
from exactident.model.gamma_free import free_data_denominator, free_state, gamma_free_mod_p
from exactident.model.symmetry import log_scales, rescaling_symmetry
from exactident.symmetry.fdim import fdim_fields
from exactident.symmetry.linewalk import domain_points

__all__ = ["GraphFdimResult", "functional_dimension_graph", "lower_bound_graph", "scale_classes_text"]

Box = tuple[Sequence[flint.fmpq], Sequence[flint.fmpq]]
_ZERO = flint.fmpq(0)

#: Why the upper bound of a layer graph is ``dim_free`` (JSON ``upper_source``, docs/symmetries.md).
UPPER_SOURCE = ("dim_free = n_params - dim S_H; no domain prover of dead, blocked or always-active units reads a "
                "layer graph, so no further missing dimension is proved")


@dataclass
class GraphFdimResult:
    """A certified interval ``[lower, upper]`` for ``fdim_free(theta)`` of a layer graph (module docstring).

    Attributes
    ----------
    lower, upper : int
        ``lower <= fdim_free <= upper = dim_free``.
    dim : int
        ``dim_free = n_params - symmetry_dim``.
    n_hidden : int
        Hidden units of the user's layers (pooling units included; the compiler's skip carriers not).
    points : list of list of fmpq
        The tie-free sample at which ``rank J_free mod prime = lower`` (a witness).
    scale_classes : str
        The units rescaled together by each generator of ``H``, named (for the terminal view).
    """

    name: str
    widths: list[int]
    n_params: int
    symmetry_dim: int
    dim: int
    n_hidden: int
    lower: int
    upper: int
    box: Box | None
    prime: int
    features: list[str]
    points: list[list[flint.fmpq]] = field(default_factory=list)
    scale_classes: str = ""
    seconds: float = 0.0

    @property
    def settled(self) -> bool:
        """Bounds equal: ``fdim_free`` is certified."""
        return self.lower == self.upper

    @property
    def no_hidden_symmetries(self) -> bool:
        """``lower = dim_free``: no symmetry beyond the rescalings of ``H``."""
        return self.lower == self.dim

    def to_dict(self) -> dict[str, Any]:
        """The ``exactident-fdim/1`` JSON object (the plain fields, ``dim`` being ``dim_free``, plus
        ``dim_kind``, ``symmetry_dim``, ``features``, ``upper_source``: docs/symmetries.md)."""
        return fdim_fields(self) | {"mechanisms": [], "lower_random_points": None, "dim_kind": "dim_free",
                                    "symmetry_dim": self.symmetry_dim, "features": self.features,
                                    "upper_source": UPPER_SOURCE}

    def render(self) -> str:
        """The terminal view."""
        dom = "R^n" if self.box is None else "the box"
        lines = [f"{self.name}: functional dimension in [{self.lower}, {self.upper}] on {dom} (layer graph: "
                 f"{', '.join(self.features) or 'constrained'}; dim_free = #params - dim S_H = {self.n_params} - "
                 f"{self.symmetry_dim} = {self.dim})"]
        if self.scale_classes:
            lines.append(f"  rescalings (S_H): {self.scale_classes}")
        if self.no_hidden_symmetries:
            lines.append(f"  no hidden symmetries (certified): rank J_free = dim_free at {len(self.points)} points "
                         f"(computed mod the prime {self.prime})")
        else:
            lines.append(f"  lower bound {self.lower}: rank J_free at {len(self.points)} points, computed mod the "
                         f"prime {self.prime}")
            lines.append(f"  upper bound {self.upper} = dim_free: no further missing dimension proved (no domain "
                         "prover reads a layer graph)")
            lines.append(f"  {self.upper - self.lower} dimension(s) not settled (no proof, no sample found)")
        lines.append(f"  time {self.seconds:.1f} s")
        return "\n".join(lines) + "\n"


def scale_classes_text(cn: ConstrainedNetwork, limit: int = 4) -> str:
    """The generators of ``H`` in words: per generator the units it rescales, by the framework's names."""
    units, A, _factor = log_scales(cn)
    parts = []
    for g in range(A.ncols()):
        moved = [units[u] for u in range(len(units)) if A[u, g] != 0]
        if moved:
            parts.append("{" + cn.describe_units(moved, limit=3) + "}")
    if not parts:
        return "none (every unit's scale is pinned by a fixed weight or bias)"
    return f"{len(parts)} generator(s): " + "; ".join(parts[:limit]) + (f"; ... ({len(parts)} in all)"
                                                                         if len(parts) > limit else "")


def _tie_free(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]]) -> list[list[flint.fmpq]]:
    if not X:
        return []
    bad = {i for i, _l, _v in free_state(cn, X).ties}
    return [list(x) for i, x in enumerate(X) if i not in bad]


def _gamma(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]], p: int) -> np.ndarray:
    """``J_free(X) mod p`` at tie-free points (the ``>= 0`` pattern is then the only one)."""
    if not X:
        return np.zeros((0, cn.n_params), dtype=np.int64)
    return gamma_free_mod_p(cn, X, free_state(cn, X).pattern, p, free_data_denominator(cn, X))


def lower_bound_graph(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]], box: Box | None, target: int, *,
                      seed: int = 0, rounds: int = 8) -> tuple[int, int, list[list[flint.fmpq]]]:
    """``(rank, prime, points)``: ``rank J_free(points) mod prime = rank``, a lower bound on ``fdim_free``.

    Starts from the points of ``X`` in the domain without ties, then adds random dyadic points of
    the domain while the rank grows (at most ``rounds`` batches of at least ``target / (2 N_L)``
    points, as for MLPs; stops after three batches without gain, or at ``target``).  After each
    batch only the points owning an independent row are kept (the witness stays small).  One prime
    for every batch (dyadic points add only powers of 2 to the denominators; primes are odd), so the
    residues of the batches are stacked.
    """
    rng = random.Random(seed)
    gen = np.random.default_rng(seed)
    inside = [x for x in X if box is None or all(box[0][j] <= x[j] <= box[1][j] for j in range(len(x)))]
    pts = _tie_free(cn, inside)
    p = random_primes(1, lcm(free_data_denominator(cn, pts), 2), rng)[0]
    N_L = cn.widths[-1]
    r, pts, G = _keep(_gamma(cn, pts, p), pts, N_L, p)
    stale = 0
    for t in range(rounds):
        if r >= target or stale >= 3:
            break
        need = (max(4, -(-(target - r) // N_L) + 2, target // (2 * N_L)) if t
                else max(4, -(-target // N_L) + 2 - len(pts)))
        new = _tie_free(cn, domain_points(gen, need, cn.widths[0], box))
        if not new:
            stale += 1
            continue
        r2, pts2, G2 = _keep(np.vstack([G, _gamma(cn, new, p)]), pts + new, N_L, p)
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


def _constant_units(cn: ConstrainedNetwork) -> list[tuple[int, int]]:
    """Kinked hidden units with zero incoming weights and bias: ``z = 0`` everywhere, every point is a tie."""
    out = []
    for l in range(1, cn.L):
        kinked = cn.kinked(l)
        W, b = cn.W[l - 1], cn.b[l - 1]
        for v in np.flatnonzero(kinked).tolist():
            if b[v] == _ZERO and all(W[v, j] == _ZERO for j in range(cn.widths[l - 1])):
                out.append((l, v))
    return out


def functional_dimension_graph(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]] = (), *,
                               box: Box | None = None, seed: int = 0, rounds: int = 8,
                               name: str = "theta") -> GraphFdimResult:
    """Certified ``[lower, dim_free]`` for ``fdim_free(theta)`` on ``box`` (None: ``R^n``) (module docstring).

    Parameters
    ----------
    cn : ConstrainedNetwork
    X : list of points (Q, flattened inputs), optional
        The sample to start from (the case's sample).
    box : (lo, hi), optional
    seed : int
        Seeds the prime and the random points (the result is reproducible).
    rounds : int
        Batches of random points at most.

    Raises
    ------
    UnsupportedCaseError
        A kinked hidden unit with zero incoming weights and bias (its pre-activation is 0 everywhere:
        no sample is tie-free and the Jacobian is not defined).
    InvariantViolation
        A lower bound above ``dim_free`` (a bug).

    Examples
    --------
    ``f = 3 leaky(2x - 1) + c`` (slope 1/10): 4 parameters, one rescaling, ``fdim_free = 3``.

    >>> from exactident.model.network import Network
    >>> from exactident.model.constrained import from_network
    >>> cn = from_network(Network((1, 1, 1), [[[2]], [[3]]], [[-1], [0]]))
    >>> cn.negative_slope[0][0] = flint.fmpq(1, 10); cn.features = ("leaky ReLU",)
    >>> r = functional_dimension_graph(cn)
    >>> (r.lower, r.upper, r.dim, r.symmetry_dim)
    (3, 3, 3, 1)
    """
    start = time.perf_counter()
    const = _constant_units(cn)
    if const:
        raise UnsupportedCaseError(f"hidden unit {cn.describe_units(const)} has zero incoming weights and bias: its "
                                   "pre-activation is 0 everywhere and the Jacobian is not defined")
    sym = rescaling_symmetry(cn)
    lower, p, pts = lower_bound_graph(cn, [[flint.fmpq(v) for v in row] for row in X], box, sym.dim_free,
                                      seed=seed, rounds=rounds)
    if lower > sym.dim_free:
        raise InvariantViolation(f"rank J_free mod p = {lower} above dim_free = {sym.dim_free}")
    out = GraphFdimResult(name, cn.layer_widths, cn.n_params, sym.symmetry_dim, sym.dim_free,
                          sum(cn.layer_widths[1:-1]), lower, sym.dim_free, box, p, list(cn.features), pts,
                          scale_classes_text(cn))
    out.seconds = time.perf_counter() - start
    return out
