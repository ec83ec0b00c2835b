"""Find a non-equivalence witness for a direction ``delta`` (engine side).

Verified independently by :mod:`exactident.verify.nonequivalence`.

Parameters moved along ``theta + eps delta`` (or a curve tangent to ``delta``)
are not equivalent to theta (positive rescalings, hidden-neuron permutations)
when an invariant of the equivalence changes (proofs in ``docs/boundary.md``):

- ``path-products``: some path product ``phi_{p,k}`` is a non-constant polynomial
  in ``eps`` along the line (its first-order coefficient is nonzero, for a curve);
- ``first-layer-rays``: the incoming vector ``(W_1[v,:], b_1[v])`` of a layer-1
  neuron is nonzero and ``delta`` moves it off its line.

Paths are searched depth first, pruning factors that are identically zero, up
to :data:`MAX_PATHS` complete paths.  Called by :mod:`exactident.boundary.analyse`
and :mod:`exactident.boundary.certificate`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flint

from exactident.io.rationals import format_fmpq
from exactident.model.network import Network

__all__ = ["MAX_PATHS", "find_witness"]

#: Most complete paths whose product is computed before the path search gives up.
MAX_PATHS = 20_000

_ZERO = flint.fmpq(0)


def _poly_times(poly: list[flint.fmpq], a: flint.fmpq, d: flint.fmpq) -> list[flint.fmpq]:
    out = [_ZERO] * (len(poly) + 1)
    for k, c in enumerate(poly):
        out[k] += c * a
        out[k + 1] += c * d
    return out


def _path_witness(net: Network, dW: Sequence[flint.fmpq_mat], db: Sequence[Sequence[flint.fmpq]],
                  first_order: bool) -> dict[str, Any] | None:
    widths, L = net.widths, net.L
    W = [M.table() for M in net.W]
    D = [M.table() for M in dW]
    budget = [MAX_PATHS]

    def changes(poly: list[flint.fmpq]) -> bool:
        return (len(poly) > 1 and poly[1] != _ZERO) if first_order else any(c != _ZERO for c in poly[1:])

    def extend(m: int, node: int, poly: list[flint.fmpq], seq: list[int], start: int):
        """Paths continuing from ``node`` of layer ``m`` (product so far ``poly``)."""
        if m == L:
            budget[0] -= 1
            if changes(poly):
                return {"start": start, "neurons": seq[:-1], "output": seq[-1]}, poly
            return None
        for nxt in range(widths[m + 1]):
            if budget[0] <= 0:
                return None
            a, d = W[m][nxt][node], D[m][nxt][node]
            if a == _ZERO and d == _ZERO:
                continue  # the product would be identically zero
            found = extend(m + 1, nxt, _poly_times(poly, a, d), [*seq, nxt], start)
            if found:
                return found
        return None

    for start in range(L + 1):
        for node in range(widths[start]):
            if start == 0:
                poly = [flint.fmpq(1)]
            elif start == L:
                poly = _poly_times([flint.fmpq(1)], net.b[L - 1][node], db[L - 1][node])
                budget[0] -= 1
                if changes(poly):
                    return _as_part({"start": L, "neurons": [], "output": node}, poly, first_order)
                continue
            else:
                a, d = net.b[start - 1][node], db[start - 1][node]
                if a == _ZERO and d == _ZERO:
                    continue
                poly = _poly_times([flint.fmpq(1)], a, d)
            found = extend(start, node, poly, [node], start)
            if found:
                return _as_part(found[0], found[1], first_order)
            if budget[0] <= 0:
                return None
    return None


def _as_part(path: dict[str, Any], poly: list[flint.fmpq], first_order: bool) -> dict[str, Any]:
    while len(poly) > 1 and poly[-1] == _ZERO:
        poly = poly[:-1]
    coeffs = (poly + [_ZERO])[:2] if first_order else poly
    return {"invariant": "path-products", "path": path, "coefficients": [format_fmpq(c) for c in coeffs]}


def _ray_witness(net: Network, dW, db) -> dict[str, Any] | None:
    if net.L < 2:
        return None
    for v in range(net.widths[1]):
        w = [net.W[0][v, j] for j in range(net.widths[0])] + [net.b[0][v]]
        d = [dW[0][v, j] for j in range(net.widths[0])] + [db[0][v]]
        if any(x != _ZERO for x in w) and any(w[j] * d[k] != w[k] * d[j]
                                              for j in range(len(w)) for k in range(j + 1, len(w))):
            return {"invariant": "first-layer-rays", "neuron": v}
    return None


def find_witness(net: Network, dW: Sequence[flint.fmpq_mat], db: Sequence[Sequence[flint.fmpq]], *,
                 first_order: bool) -> dict[str, Any] | None:
    """A witness that ``theta + eps delta`` (or a curve tangent to ``delta``) is not equivalent to theta.

    Parameters
    ----------
    net : Network
    dW, db : like ``net.W``, ``net.b``
        ``delta`` over all weights and biases (Q).
    first_order : bool
        Only the first-order change counts (a curve tangent to ``delta``).

    Returns
    -------
    dict or None
        A ``nonequivalence`` witness (``path-products`` first, then ``first-layer-rays``),
        or None when none was found (within :data:`MAX_PATHS` paths).

    Examples
    --------
    ``fn-preserving-tie-2``: moving ``W_1`` along ``(3, 1)`` changes the product of the
    path through neuron (1,0) from ``1/2`` to ``1/2 + 3 eps``.

    >>> q = flint.fmpq
    >>> net = Network((1, 2, 1, 1), [flint.fmpq_mat([[q(1, 2)], [q(1, 4)]]), flint.fmpq_mat([[1, -3]]),
    ...               flint.fmpq_mat([[1]])], [[q(0), q(0)], [q(1, 4)], [q(0)]])
    >>> dW = [flint.fmpq_mat([[3], [1]]), flint.fmpq_mat(1, 2), flint.fmpq_mat(1, 1)]
    >>> db = [[q(0), q(0)], [q(0)], [q(0)]]
    >>> find_witness(net, dW, db, first_order=False)["coefficients"]
    ['1/2', '3']
    """
    return _path_witness(net, dW, db, first_order) or _ray_witness(net, dW, db)
