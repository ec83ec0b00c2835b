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

Candidates ``delta`` come from the kernels of ``Gamma(s)`` (:func:`find_line`, called by
:mod:`exactident.boundary.analyse`); the check here does not trust them.  Instead of (or
besides) a probe point, non-equivalence may be shown by an invariant of the equivalence
that changes along the line (:func:`exactident.boundary.nonequivalence.find_witness`).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product
from typing import Any

import flint

from exactident.boundary.canonical import Canonical, combine, kernel_rows
from exactident.boundary.entering import primitive_integer, relaxed_directions
from exactident.boundary.nonequivalence import find_witness
from exactident.io.rationals import format_fmpq, short_text
from exactident.model.network import Network

__all__ = ["MAX_LINE_CANDIDATES", "Poly", "find_line", "find_probe", "is_constant_line", "line_outputs",
           "line_summary"]

#: Kernel directions tried per resolution.
MAX_LINE_CANDIDATES = 24

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


def _line_candidates(K: list[list[flint.fmpq]], signed: list) -> list[list[flint.fmpq]]:
    """Kernel directions of ``Gamma(s)`` worth a straight-line check (search coordinates): basis
    vectors, both signs, and float LP points of ``{c : sign_t g_t K c >= 0, c_j = +-1}`` (rationalised)."""
    k = len(K)
    out = [c for col in K for c in (col, [-v for v in col])]
    if len(out) < MAX_LINE_CANDIDATES:  # otherwise the basis fills the list: no LP needed
        for c in relaxed_directions(kernel_rows(K, signed), k):
            out.append(combine(K, c))
    return out[:MAX_LINE_CANDIDATES]


def find_line(net: Network, canon: Canonical, pool: Sequence[tuple[list, list]]) -> dict[str, Any] | None:
    """A ``line`` certificate from the kernels in ``pool``, exactly checked, or ``None``.

    Parameters
    ----------
    net : Network
    canon : Canonical
        The case's canonical presentation (:func:`exactident.boundary.canonical.canonical_form`).
    pool : list of (K, signed)
        Kernel bases of ``Gamma(s)`` and the signed tie derivatives, in search coordinates.

    Returns
    -------
    dict or None
        ``{"line": {"delta", "probe"?, "nonequivalence"?}}``: ``delta`` over the free
        parameters of ``canon.fixed`` in the case's own names and scale (a positive
        rescaling maps straight lines to straight lines), at least one of a probe point
        (from the canonical sample points and a fixed grid) and an invariant witness.
    """
    params = canon.params
    seen: set[tuple] = set()
    for K, signed in pool:
        for cand in _line_candidates(K, signed):
            cand = primitive_integer(cand)
            key = tuple(cand)
            if key in seen or not any(cand):
                continue
            seen.add(key)
            delta = canon.to_parameters(cand)
            dW = [flint.fmpq_mat(net.widths[l], net.widths[l - 1]) for l in range(1, net.L + 1)]
            db = [[flint.fmpq(0)] * net.widths[l] for l in range(1, net.L + 1)]
            for p, d in zip(params, delta):
                if p.j is not None:
                    dW[p.l - 1][p.i, p.j] = d
                else:
                    db[p.l - 1][p.i] = d
            if not all(is_constant_line(line_outputs(net, dW, db, x)) for x in canon.points):  # = on all of X
                continue
            probe = find_probe(net, dW, db, canon.points)
            witness = find_witness(net, dW, db, first_order=False)
            if probe is not None or witness is not None:  # either shows non-equivalence (docs/boundary.md)
                line: dict[str, Any] = {"delta": {p.name: format_fmpq(d) for p, d in zip(params, delta)}}
                if probe is not None:
                    line["probe"] = [format_fmpq(v) for v in probe]
                if witness is not None:
                    line["nonequivalence"] = witness
                return {"line": line}
    return None


def line_summary(line: dict[str, Any]) -> str:
    """The readable line for a straight-line certificate (long numbers abbreviated)."""
    part = line["line"]
    text = "line certificate delta: " + ", ".join(f"{k} = {short_text(v)}" for k, v in part["delta"].items()
                                                  if v != "0")
    if "probe" in part:
        text += f"; probe x* = ({', '.join(short_text(v) for v in part['probe'])})"
    if "nonequivalence" in part:
        text += f"; {part['nonequivalence']['invariant']} invariant changes"
    return text
