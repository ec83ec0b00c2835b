"""The verifier's own arithmetic: Fraction forward passes, forward-mode tangents, explicit ``alpha``, QQ ranks.

Nothing here comes from the engine (:mod:`exactident.model`,
:mod:`exactident.boundary`): the verifier recomputes every fact with
``fractions.Fraction``, differentiates *forward* (the engine uses
backpropagation), enumerates paths explicitly for ``alpha`` and ranks with
sympy's ``DomainMatrix`` over QQ.  Also the strict readers of report fields
(:func:`need`, :func:`parse_fraction`); a malformed field raises
:class:`BadField` carrying its JSON path.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from fractions import Fraction
from itertools import product
from typing import Any

from exactident.io.rationals import parse_rational

__all__ = [
    "PARAMETER_NAME",
    "BadField",
    "alpha_rows",
    "as_fractions",
    "forward_tangent",
    "line_forward",
    "need",
    "parse_fraction",
    "rank_qq",
    "tie_key",
    "unknown_fields",
]


PARAMETER_NAME = re.compile(r"(W)_(\d{1,9})\[(\d{1,9}),(\d{1,9})\]|(b)_(\d{1,9})\[(\d{1,9})\]")


class BadField(Exception):
    """Malformed report (exit 2): carries the JSON path of the field."""

    def __init__(self, where: str, msg: str) -> None:
        super().__init__(msg)
        self.where = where


def need(obj: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(obj, dict):
        raise BadField(where, f"expected dict, found {type(obj).__name__}")
    if key not in obj:
        raise BadField(f"{where}.{key}" if where else key, "missing")
    value = obj[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise BadField(f"{where}.{key}" if where else key, f"expected {getattr(kind, '__name__', kind)}, "
                   f"found {type(value).__name__}")
    return value


def parse_fraction(text: Any, where: str) -> Fraction:
    if not isinstance(text, str) or not re.fullmatch(r"[+-]?\d+(/\d+)?", text.strip()):
        raise BadField(where, f"expected a rational string 'p/q', found {text!r}")
    value = parse_rational(text)  # any size: Fraction(str) stops at 4300 digits
    if value is None:
        raise BadField(where, f"zero denominator in {text!r}")
    return value


def tie_key(obj: Any, where: str) -> tuple[int, int, int]:
    return need(obj, "sample", int, where), need(obj, "layer", int, where), need(obj, "neuron", int, where)


def forward_tangent(W, b, x, active_at, dW=None, db=None):
    """Forward pass with a tangent (forward-mode derivative) along ``(dW, db)``.

    ``active_at(l, v, z)`` says whether hidden neuron ``(l, v)`` acts as the
    identity.  Returns per layer ``l = 1..L`` the lists ``z_l`` and ``dz_l``.
    """
    h, dh = list(x), [Fraction(0)] * len(x)
    L = len(W)
    zs, dzs = [], []
    for l in range(1, L + 1):
        Wl, bl = W[l - 1], b[l - 1]
        z = [sum((w * hv for w, hv in zip(row, h)), Fraction(0)) + bv for row, bv in zip(Wl, bl)]
        if dW is None:
            dz = [Fraction(0)] * len(z)
        else:
            dz = [sum((dw * hv for dw, hv in zip(drow, h)), Fraction(0))
                  + sum((w * dhv for w, dhv in zip(row, dh)), Fraction(0)) + dbv
                  for row, drow, dbv in zip(Wl, dW[l - 1], db[l - 1])]
        zs.append(z)
        dzs.append(dz)
        if l < L:
            act = [active_at(l, v, z[v]) for v in range(len(z))]
            h = [zv if a else Fraction(0) for zv, a in zip(z, act)]
            dh = [dv if a else Fraction(0) for dv, a in zip(dz, act)]
    return zs, dzs


def rank_qq(rows: list[list[Fraction]], ncols: int) -> int:
    from sympy import QQ
    from sympy.polys.matrices import DomainMatrix

    if not rows or ncols == 0:
        return 0
    M = DomainMatrix([[QQ(v.numerator, v.denominator) for v in r] for r in rows], (len(rows), ncols), QQ)
    return int(M.rank())


def alpha_rows(widths, X, act) -> list[list[Fraction]]:
    """``alpha(s)`` by enumerating every path (one neuron per layer up to ``L-1``) explicitly."""
    L = len(widths) - 1
    rows = []
    for i, x in enumerate(X):
        row = []
        for start in range(L):  # paths starting at layer `start` and ending at layer L-1
            for path in product(*(range(widths[m]) for m in range(start, L))):
                f = Fraction(1)
                for m, u in zip(range(start, L), path):
                    f *= x[u] if m == 0 else (1 if act(i, m, u) else 0)
                row.append(f)
        row.append(Fraction(1))  # the empty path beta
        rows.append(row)
    return rows


def unknown_fields(obj: dict, allowed: Sequence[str], where: str) -> list[str]:
    """Failures for keys the verifier does not understand: what is not checked is not valid."""
    return [f"{where}.{key}: unknown field, not verified" for key in sorted(set(obj) - set(allowed), key=str)]


def _poly_add(p, q):
    n = max(len(p), len(q))
    return [(p[k] if k < len(p) else 0) + (q[k] if k < len(q) else 0) for k in range(n)]


def _poly_mul(p, q):
    out = [Fraction(0)] * max(len(p) + len(q) - 1, 0)
    for a, pa in enumerate(p):
        for c, qc in enumerate(q):
            out[a + c] += pa * qc
    return out


def line_forward(W, b, dW, db, x):
    """Outputs of ``theta + eps delta`` at ``x`` as polynomials in ``eps``, for small ``eps > 0``."""
    h = [[v] for v in x]
    L = len(W)
    for l in range(1, L + 1):
        z = []
        for r in range(len(W[l - 1])):
            acc = [b[l - 1][r], db[l - 1][r]]
            for c in range(len(h)):
                acc = _poly_add(acc, _poly_mul([W[l - 1][r][c], dW[l - 1][r][c]], h[c]))
            z.append(acc)
        if l < L:  # relu for small eps > 0: the sign of the lowest nonzero coefficient
            z = [p if next((c for c in p if c != 0), 0) > 0 else [] for p in z]
        h = z
    return h


def as_fractions(case) -> tuple[list, list, list]:
    """``W``, ``b``, ``X`` of the case as nested lists of Fraction (the verifier's own arithmetic)."""
    def fr(q) -> Fraction:
        return Fraction(int(q.p), int(q.q))

    W = [[[fr(q) for q in row] for row in M.table()] for M in case.network.W]
    b = [[fr(q) for q in bl] for bl in case.network.b]
    X = [[fr(q) for q in row] for row in case.X]
    return W, b, X
