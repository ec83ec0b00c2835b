"""Straight-line certificates: a segment ``theta + eps delta`` of constant outputs (beyond first order).

The entering test of :mod:`exactident.boundary.entering` needs every tie to move
strictly to first order.  When it fails (e.g. every kernel direction keeps a
tied pre-activation at exactly zero), a simpler witness may still exist: a
direction ``delta`` such that, for every small ``eps > 0``,

- ``f_{theta + eps delta}(X) = f_theta(X)`` (same outputs on the sample), and
- ``f_{theta + eps delta}(x*) != f_theta(x*)`` at a *probe* point ``x*``.

Equivalent parameters (permutations, positive rescalings) compute the same
function everywhere, so the second item proves ``theta + eps delta`` is not
equivalent to ``theta``; with ``eps -> 0`` theta is not locally identifiable.
No rank condition is needed.

Both items are decided exactly by running the network on polynomials in
``eps``: every pre-activation is a polynomial ``p(eps)`` with rational
coefficients, and for small ``eps > 0`` ``relu(p) = p`` when the lowest nonzero
coefficient is positive, ``0`` otherwise (``p = 0`` gives ``0`` either way).

Candidates ``delta`` come from the kernels of ``Gamma(s)`` (called by
:mod:`exactident.boundary.analyse`); the check here does not trust them.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product
from typing import Any

import flint

from exactident.model.network import Network

__all__ = ["Poly", "find_probe", "is_constant_line", "line_outputs"]

Poly = list  # coefficients [c_0, c_1, ...] in Q (fmpq), lowest degree first

_ZERO = flint.fmpq(0)


def _add(p: Poly, q: Poly) -> Poly:
    n = max(len(p), len(q))
    return [(p[k] if k < len(p) else _ZERO) + (q[k] if k < len(q) else _ZERO) for k in range(n)]


def _mul(p: Poly, q: Poly) -> Poly:
    if not p or not q:
        return []
    out = [_ZERO] * (len(p) + len(q) - 1)
    for a, pa in enumerate(p):
        if pa != _ZERO:
            for c, qc in enumerate(q):
                out[a + c] += pa * qc
    return out


def _relu_small_eps(p: Poly) -> Poly:
    for c in p:
        if c != _ZERO:
            return p if c > _ZERO else []
    return []


def line_outputs(net: Network, dW: Sequence[flint.fmpq_mat], db: Sequence[Sequence[flint.fmpq]],
                 x: Sequence[flint.fmpq]) -> list[Poly]:
    """Outputs of ``theta + eps delta`` at ``x`` as polynomials in ``eps`` (valid for small ``eps > 0``).

    Parameters
    ----------
    net : Network
    dW, db : like ``net.W``, ``net.b``
        The direction ``delta`` over all weights and biases (Q).
    x : N_0 fmpq

    Returns
    -------
    list of Poly, length ``N_L``

    Examples
    --------
    ``f = 3 relu(2x + 1)`` moved along ``(dw, db_1, db_2) = (0, 1, -3)`` at the kink
    ``x = -1/2``: ``3 relu(eps) - 3 eps = 0``.

    >>> q = flint.fmpq
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])], [[q(1)], [q(0)]])
    >>> out = line_outputs(net, [flint.fmpq_mat([[0]]), flint.fmpq_mat([[0]])], [[q(1)], [q(-3)]], [q(-1, 2)])
    >>> [c for c in out[0] if c != 0]
    []
    """
    h: list[Poly] = [[v] for v in x]
    for l in range(1, net.L + 1):
        W, dWl = net.W[l - 1].table(), dW[l - 1].table()
        z = []
        for r in range(net.widths[l]):
            acc: Poly = [net.b[l - 1][r], db[l - 1][r]]
            for c in range(net.widths[l - 1]):
                acc = _add(acc, _mul([W[r][c], dWl[r][c]], h[c]))
            z.append(acc)
        h = z if l == net.L else [_relu_small_eps(p) for p in z]
    return h


def is_constant_line(outs: Sequence[Poly]) -> bool:
    """Every polynomial has zero coefficients of degree >= 1."""
    return all(c == _ZERO for p in outs for c in p[1:])


def _probe_points(net: Network, X: Sequence[Sequence[flint.fmpq]]) -> list[list[flint.fmpq]]:
    n0 = net.widths[0]
    grid = range(-3, 4)
    pts: list[list[Any]]
    if n0 <= 2:
        pts = [list(p) for p in product(grid, repeat=n0)]
    else:
        pts = [[k if j == m else 0 for j in range(n0)] for m in range(n0) for k in grid]
    pts += [[v + k for v in x] for x in X for k in (-2, -1, 1, 2)]
    pts += [[flint.fmpq(2 * k + 1, 4) for _ in range(n0)] for k in range(-6, 6)]
    return [[flint.fmpq(v) for v in p] for p in pts]


def find_probe(net: Network, dW, db, X) -> list[flint.fmpq] | None:
    """A point where the outputs along the line are not constant (``None`` if none tried works)."""
    for x in _probe_points(net, X):
        if not is_constant_line(line_outputs(net, dW, db, x)):
            return x
    return None
