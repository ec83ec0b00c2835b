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
``eps``, every sample at once (:mod:`exactident.model.line_forward`, the primitive the
verifier uses too): every pre-activation is a polynomial ``p(eps)`` with rational
coefficients, and for small ``eps > 0`` ``relu(p) = p`` when the lowest nonzero
coefficient is positive, ``0`` otherwise (``p = 0`` gives ``0`` either way).

The certificate states the segment it proved, ``t0``: no hidden pre-activation on ``X``
has a root in ``(0, t0)``, so every unit keeps the side it takes just after 0 there and
``f_{theta + t delta}(X) = f_theta(X)`` for every ``t`` in ``[0, t0]`` (``t0 = None``:
every ``t >= 0``).  ``t0`` is the first kink the line meets on ``X`` when that is rational,
else a rational just below it.

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
from exactident.model.line_forward import LinePass, line_pass
from exactident.model.network import Network

__all__ = ["MAX_LINE_CANDIDATES", "PROBE_BATCH", "find_line", "find_probe", "line_along", "line_summary",
           "segment_text"]

#: Kernel directions tried per resolution.
MAX_LINE_CANDIDATES = 24

#: Probe points run along the line in one batch (the first batch with a moving output decides).
PROBE_BATCH = 64


def line_along(net: Network, dW: Sequence[Any], db: Sequence[Sequence[flint.fmpq]],
               points: Sequence[Sequence[flint.fmpq]]) -> LinePass:
    """``net`` run along ``theta + t delta`` on every point at once (:func:`exactident.model.line_forward.line_pass`).

    Parameters
    ----------
    net : Network
    dW, db : like ``net.W``, ``net.b`` (``fmpq_mat`` or rows of fmpq)
        The direction ``delta`` over all weights and biases (Q).
    points : n >= 1 rows of N_0 fmpq

    Returns
    -------
    LinePass

    Examples
    --------
    ``f = 3 relu(2x + 1)`` moved along ``(dw, db_1, db_2) = (0, 1, -3)`` at the kink
    ``x = -1/2``: ``3 relu(t) - 3 t = 0`` for every ``t > 0``.

    >>> q = flint.fmpq
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])], [[q(1)], [q(0)]])
    >>> lp = line_along(net, [flint.fmpq_mat([[0]]), flint.fmpq_mat([[0]])], [[q(1)], [q(-3)]], [[q(-1, 2)]])
    >>> lp.is_constant(), lp.segment_end()
    (True, None)
    """
    return line_pass(net.W, net.b, dW, db, points)


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
    """The first point (in a fixed order) where the outputs along the line are not constant for small
    ``t > 0`` (``None`` if none tried works); points run in batches of :data:`PROBE_BATCH`."""
    pts = _probe_points(net, X)
    for start in range(0, len(pts), PROBE_BATCH):
        batch = pts[start:start + PROBE_BATCH]
        moving = line_along(net, dW, db, batch).moving()
        if moving:
            return batch[moving[0][0]]
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
        ``{"line": {"delta", "t0", "probe"?, "nonequivalence"?}}``: ``delta`` over the free
        parameters of ``canon.fixed`` in the case's own names and scale (a positive
        rescaling maps straight lines to straight lines); ``t0`` the segment proved
        (:meth:`exactident.model.line_forward.LinePass.segment_end`: the outputs on ``X`` are
        ``f_theta(X)`` for every ``t`` in ``[0, t0]``, ``None``: every ``t >= 0``); at least one
        of a probe point (from the canonical sample points and a fixed grid) and an
        invariant witness.
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
            lp = line_along(net, dW, db, canon.points)  # the distinct points of X: f on X
            if not lp.is_constant():
                continue
            probe = find_probe(net, dW, db, canon.points)
            witness = find_witness(net, dW, db, first_order=False)
            if probe is not None or witness is not None:  # either shows non-equivalence (docs/boundary.md)
                t0 = lp.segment_end()
                line: dict[str, Any] = {"delta": {p.name: format_fmpq(d) for p, d in zip(params, delta)},
                                        "t0": None if t0 is None else format_fmpq(t0)}
                if probe is not None:
                    line["probe"] = [format_fmpq(v) for v in probe]
                if witness is not None:
                    line["nonequivalence"] = witness
                return {"line": line}
    return None


def segment_text(t0: str | None) -> str:
    """The segment ``[0, t0]`` of a line, for the readable lines."""
    return "every t >= 0" if t0 is None else f"0 <= t <= t0 = {short_text(t0)}"


def line_summary(line: dict[str, Any]) -> str:
    """The readable line for a straight-line certificate (long numbers abbreviated)."""
    part = line["line"]
    text = "line certificate delta: " + ", ".join(f"{k} = {short_text(v)}" for k, v in part["delta"].items()
                                                  if v != "0")
    text += f"; f(X) constant for {segment_text(part.get('t0'))}"
    if "probe" in part:
        text += f"; probe x* = ({', '.join(short_text(v) for v in part['probe'])})"
    if "nonequivalence" in part:
        text += f"; {part['nonequivalence']['invariant']} invariant changes"
    return text
