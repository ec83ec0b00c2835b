"""The chart ``{delta_F = 0}`` across the symmetries ``S_H``: the gauge ``F``, kernels of ``Gamma_free`` in it, and a
certificate's direction taken into it (docs/explain.md, "Constrained networks").

``S_H`` (:func:`exactident.model.symmetry.rescaling_symmetry`: the rescalings the family keeps, and the bias
translations and linear maps of its linear units) is in ``ker Gamma_free(s)`` for every tie resolution ``s``,
so a parameter moved by ``S_H`` is never pinned by any sample.  As the plain engine fixes one outgoing edge
per neuron, a *gauge* set ``F`` of ``dim S_H`` parameters is held at its values: greedily, output layer first,
weights before biases, largest ``|theta_j|`` first, ``j`` joins ``F`` when the rows ``F`` of a basis of
``S_H`` gain rank (exact over Q).  Then ``S_H`` meets the chart only in 0 and
``ker Gamma_free(s) = S_H (+) K_F(s)``, ``K_F(s) = ker Gamma_free(s) ∩ {delta_F = 0}`` of dimension
``dim_free - rank Gamma_free(s)``.  For a plain MLP (``T = I``) ``F`` is the plain engine's fixed edges.

Called by :mod:`exactident.explain.core`.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import flint
import numpy as np

from exactident.explain.kernel import integer_kernel, structured_basis
from exactident.linalg import exact
from exactident.model.gamma_free import free_data_denominator, gamma_free_exact
from exactident.model.network import Network
from exactident.model.symmetry import Symmetry

__all__ = ["CERTIFIED_LINES", "certificate_direction", "chart_kernel", "gauge_parameters", "into_chart",
           "one_layer_lines"]

#: The certificate parts with a direction in ``theta`` (report key -> ``by`` of the parameters it moves):
#: a straight line of equal outputs on ``X`` (every kind but the entering submersion, whose direction is
#: the tangent of a curve of its piece).  ``submersion`` has no direction.
CERTIFIED_LINES = {"dead_units": "dead-units", "constant_units": "constant-units", "slope_lines": "slope-lines",
                   "line": "line", "entering_submersion": "entering-submersion"}


def gauge_parameters(cn: Network, sym: Symmetry) -> list[int]:
    """The gauge set ``F`` (module docstring): ``dim S_H`` parameters whose rows of the ``S_H`` basis are independent.

    Parameters
    ----------
    cn : Network
    sym : Symmetry
        ``S_H`` of ``cn`` at its theta (exact basis over Q).

    Returns
    -------
    list of int
        Sorted indices into ``theta``, ``len == sym.symmetry_dim``.

    Examples
    --------
    ``3 relu(2x - 1)`` (parameters ``W_1, b_1, W_2, b_2``): the output weight is the gauge, as the plain
    engine's fixed edge.

    >>> from exactident.model.network import Network
    >>> from exactident.model.symmetry import rescaling_symmetry
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])], [[-1], [0]])
    >>> cn = net
    >>> gauge_parameters(cn, rescaling_symmetry(cn))
    [2]
    """
    m = len(sym.basis)
    if not m:
        return []
    layer, kind = _occurrence_layers(cn)
    theta = cn.theta()
    order = sorted(range(cn.n_params), key=lambda j: (-layer[j], kind[j], -abs(theta[j]), j))
    rows: list[list[flint.fmpq]] = []
    out: list[int] = []
    zero = flint.fmpq(0)
    for j in order:
        row = [col.get(j, zero) for col in sym.basis]
        if all(v == zero for v in row):
            continue
        trial = rows + [row]
        if exact.rank(flint.fmpq_mat(trial)) == len(trial):
            rows.append(row)
            out.append(j)
            if len(out) == m:
                break
    return sorted(out)


def _occurrence_layers(cn: Network) -> tuple[list[int], list[int]]:
    """Per parameter: the highest layer it occurs in, and 0 weight / 1 bias / 2 slope (the gauge order)."""
    layer, kind = [0] * cn.n_params, [2] * cn.n_params
    for l in range(1, cn.L + 1):
        for j in cn.W_index[l - 1][cn.W_index[l - 1] >= 0]:
            layer[j], kind[j] = max(layer[j], l), min(kind[j], 0)
        for j in cn.b_index[l - 1][cn.b_index[l - 1] >= 0]:
            layer[j], kind[j] = max(layer[j], l), min(kind[j], 1)
        if l < cn.L:
            for j in cn.slope_index[l - 1][cn.slope_index[l - 1] >= 0]:
                layer[j] = max(layer[j], l)
    return layer, kind


def one_layer_lines(cn: Network, basis: Sequence[Sequence[int]], smooth: bool) -> list[bool]:
    """Per kernel vector: an exact line of equal outputs on ``X`` by the one-layer lemma.

    With no tie but persistent ones (``smooth``), a vector moving one layer's weights and biases only, or one
    layer's slopes only, keeps the pattern for small ``|t|``, and the outputs are affine in those parameters:
    constant to first order means constant (docs/explain.md, "Straight lines").
    """
    layer_of = _one_layer(cn)
    out = []
    for vec in basis:
        where = {layer_of[j] for j, v in enumerate(vec) if v}
        out.append(smooth and len(where) == 1 and next(iter(where))[1] > 0)
    return out


def _one_layer(cn: Network) -> list[tuple[str, int]]:
    """Per parameter: ``("wb", l)`` when every occurrence is a weight or bias of layer ``l``, ``("a", l)`` for slopes
    of layer ``l`` only, ``("", -1)`` otherwise."""
    seen: list[set[tuple[str, int]]] = [set() for _ in range(cn.n_params)]
    for l in range(1, cn.L + 1):
        for I in (cn.W_index[l - 1], cn.b_index[l - 1]):
            for j in I[I >= 0]:
                seen[j].add(("wb", l))
        if l < cn.L:
            for j in cn.slope_index[l - 1][cn.slope_index[l - 1] >= 0]:
                seen[j].add(("a", l))
    return [next(iter(s)) if len(s) == 1 else ("", -1) for s in seen]


def chart_kernel(cn: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                 gauge: Sequence[int], names: Sequence[str], rng: random.Random) -> tuple[int, list[list[int]]]:
    """``(rank Gamma_free(s), integer basis of K_F(s))``, exact (the columns outside the gauge).

    Parameters
    ----------
    cn : Network
    X : n rows of N_0 fmpq
    pattern : activation pattern of the tie resolution ``s``
    gauge : the gauge set ``F``
    names : parameter names (directions of one named tensor are grouped, for a readable basis)
    rng : the primes' random stream (speed only)

    Returns
    -------
    (int, list of list of int)
        The rank over Q (a minor nonsingular mod p and ``Gamma K = 0`` over Q:
        :func:`exactident.explain.kernel.integer_kernel`) and ``dim_free - rank`` vectors over ``theta``,
        zero on the gauge.
    """
    fixed = set(gauge)
    cols = [j for j in range(cn.n_params) if j not in fixed]
    G = gamma_free_exact(cn, X, pattern)
    sub = flint.fmpq_mat(G.nrows(), len(cols), [G[i, j] for i in range(G.nrows()) for j in cols])
    Gi = exact.to_integer_rows(sub) if sub.nrows() else flint.fmpz_mat(0, len(cols))
    rows = Gi.tolist()

    def mod_p(p: int) -> np.ndarray:
        return np.array([[int(v) % p for v in row] for row in rows], dtype=np.int64).reshape(len(rows), len(cols))

    avoid = free_data_denominator(cn, X)
    rank, K, _ = integer_kernel(Gi, mod_p, avoid=avoid, rng=rng)
    groups: dict[str, list[int]] = {}
    for c, j in enumerate(cols):  # readable: directions of one named tensor first
        groups.setdefault(names[j].split("[")[0], []).append(c)
    if K and rows:
        K = structured_basis(Gi, K, list(groups.values()), avoid=avoid, rng=rng)
    basis = []
    for vec in K:
        full = [0] * cn.n_params
        for c, j in enumerate(cols):
            full[j] = int(vec[c])
        basis.append(full)
    return rank, basis


def certificate_direction(certificate: Mapping[str, Any] | None, sym: Symmetry, gauge: Sequence[int], k: int
                          ) -> tuple[str, list[flint.fmpq]] | None:
    """The direction of a report's ``certificate`` in ``theta``, taken into the chart (:func:`into_chart`).

    Every part of :data:`CERTIFIED_LINES` has one: ``-e_j`` for a dead-unit line (``parameter``, the bias or
    weight lowered), ``+e_j`` for a slope line (the PReLU slope moved), the listed ``delta`` for a
    constant-unit line, a ``line`` and an entering submersion.

    Returns
    -------
    (str, list of fmpq) or None
        ``(by, delta - sigma)`` (``by`` the certificate's kind, e.g. ``"line"``; entries in Q), or None when
        the certificate has no such part (a submersion certificate has no direction).

    Examples
    --------
    >>> from exactident.model.symmetry import Symmetry
    >>> cert = {"line": {"kind": "line", "delta": [[1, "1"], [3, "-2"]]}}
    >>> by, delta = certificate_direction(cert, Symmetry(4, 4, 0, 4), [], 4)
    >>> by, [str(v) for v in delta]
    ('line', ['0', '1', '0', '-2'])
    """
    cert = certificate or {}
    zero = flint.fmpq(0)
    for key, by in CERTIFIED_LINES.items():
        part = cert.get(key)
        if not isinstance(part, dict):
            continue
        delta = [zero] * k
        if key in ("dead_units", "slope_lines"):
            delta[int(part["parameter"])] = flint.fmpq(-1 if key == "dead_units" else 1)
        else:
            for j, v in part["delta"]:
                num, _, den = str(v).partition("/")
                delta[int(j)] = flint.fmpq(int(num), int(den or 1))
        return by, into_chart(delta, sym, gauge) if gauge else delta
    return None


def into_chart(delta: list[flint.fmpq], sym: Symmetry, gauge: Sequence[int]) -> list[flint.fmpq]:
    """``delta - sigma`` with ``sigma`` in ``S_H`` and ``sigma_F = delta_F``.

    It is the tangent at ``t = 0`` of ``g(t) . theta(t)``, ``theta(t)`` the certificate's curve and ``g(t)`` in
    ``H`` the symmetry that keeps the gauge at its values (it exists near ``t = 0`` as ``S_H`` maps onto the
    gauge coordinates).  ``H`` keeps the function, so the new curve keeps the outputs on ``X`` and realises the
    certificate's other functions.
    """
    zero = flint.fmpq(0)
    m = len(sym.basis)
    B_F = flint.fmpq_mat(m, m, [col.get(j, zero) for j in gauge for col in sym.basis])
    c = B_F.solve(flint.fmpq_mat(m, 1, [delta[j] for j in gauge]))
    out = list(delta)
    for a, col in enumerate(sym.basis):
        for j, v in col.items():
            out[j] -= c[a, 0] * v
    return out
