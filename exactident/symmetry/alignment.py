"""The exact alignment error: one network brought into another's coordinates by a group element, entry by entry.

B is moved by an element of the group (docs/symmetries.md) and compared with A parameter by
parameter, exactly: the largest absolute error ``max |a - b'|``, the largest relative error
``max |a - b'| / |a|`` over the entries with ``a != 0`` (entries with ``a = 0 != b'`` are counted
apart), and ``bits = -log2(max relative error)``.  The errors are exact *for that alignment*: an
upper bound on the best alignment's, 0 exactly when the element maps B onto A.

- **Plain ReLU MLP** (entries ``W_l[i,j]``, ``b_l[i]``): the element the two canonical forms give
  (:func:`compose`: B to its form, then A's form back to A) and a greedy matching layer by layer
  (:func:`align_greedy`; floats only rank the candidate pairs, each pair's scale is an exact ratio).
- **Any other network** (entries named by the framework's parameters, :func:`graph_alignment`): the
  element the two forms give (B's form taken back by the inverse of A's: method ``canonical``, with
  its unit permutation) and the rescalings alone (method ``rescaling``).

Called by :mod:`exactident.symmetry.equiv`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from exactident.io.rationals import format_fmpq
from exactident.model.network import Network
from exactident.symmetry.canonical import CanonicalForm, GraphCanonicalForm, parameter_vector
from exactident.symmetry.group import apply_scales, unit_scales

__all__ = ["Alignment", "align_greedy", "alignment_error", "bits", "compose", "entry_names", "graph_alignment"]

_ZERO = flint.fmpq(0)
_ONE = flint.fmpq(1)


def entry_names(widths: Sequence[int]) -> list[tuple[int, int, int | None]]:
    """``(l, i, j)`` for each entry of :func:`~exactident.symmetry.canonical.parameter_vector` (``j`` None: bias)."""
    out: list[tuple[int, int, int | None]] = []
    for l in range(1, len(widths)):
        out += [(l, i, j) for i in range(widths[l]) for j in range(widths[l - 1])]
        out += [(l, i, None) for i in range(widths[l])]
    return out


def _name(l: int, i: int, j: int | None) -> str:
    return f"b_{l}[{i}]" if j is None else f"W_{l}[{i},{j}]"


def bits(rel: flint.fmpq) -> float:
    """``-log2(rel)`` as a float (``inf`` for 0), from the exact numerator and denominator."""
    if rel == _ZERO:
        return math.inf
    return math.log2(int(rel.q)) - math.log2(int(rel.p))


@dataclass
class Alignment:
    """B in A's coordinates and the exact entrywise errors.

    Attributes
    ----------
    method : str
        ``"canonical"`` or ``"greedy"``.
    perm, scale : per hidden layer
        The group element applied to B (``perm[l-1][i]``: B's neuron put at A's position ``i``).
    max_abs : fmpq
    max_rel : fmpq or None
        None when every entry of A is 0.  ``bits`` (JSON) is ``-log2(max_rel)``, null when it is 0 or None.
    where_abs, where_rel : str
        The entries where they are reached (paper names in A's indices).
    zero_mismatch : int
        Entries with ``a = 0`` and ``b' != 0`` (infinite relative error, not in ``max_rel``).
    """

    method: str
    perm: list[list[int]]
    scale: list[list[flint.fmpq]]
    max_abs: flint.fmpq
    max_rel: flint.fmpq | None
    where_abs: str
    where_rel: str
    zero_mismatch: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: exact rationals as strings, with float views and ``bits``."""
        return {"method": self.method, "perm": self.perm,
                "scale": [[format_fmpq(s) for s in row] for row in self.scale],
                "max_abs": format_fmpq(self.max_abs), "max_abs_float": _float(self.max_abs),
                "where_abs": self.where_abs,
                "max_rel": None if self.max_rel is None else format_fmpq(self.max_rel),
                "max_rel_float": None if self.max_rel is None else _float(self.max_rel),
                "bits": None if not self.max_rel else bits(self.max_rel), "where_rel": self.where_rel,
                "zero_mismatch": self.zero_mismatch}


def _float(q: flint.fmpq) -> float:
    try:
        return int(q.p) / int(q.q)
    except OverflowError:
        return math.inf


def alignment_error(a: Network, b_aligned: Network, method: str, perm: list[list[int]],
                    scale: list[list[flint.fmpq]]) -> Alignment:
    """Exact entrywise errors of ``b_aligned`` against ``a`` (same widths)."""
    names = entry_names(a.widths)
    max_abs, max_rel = _ZERO, None
    where_abs = where_rel = ""
    mismatch = 0
    for k, (x, y) in enumerate(zip(parameter_vector(a), parameter_vector(b_aligned))):
        d = abs(x - y)
        if k == 0 or d > max_abs:
            max_abs, where_abs = d, _name(*names[k])
        if x == _ZERO:
            mismatch += d != _ZERO
            continue
        r = d / abs(x)
        if max_rel is None or r > max_rel:
            max_rel, where_rel = r, _name(*names[k])
    return Alignment(method, perm, scale, max_abs, max_rel, where_abs, where_rel, mismatch)


def align_greedy(a: Network, b: Network) -> tuple[list[list[int]], list[list[flint.fmpq]]]:
    """A group element that brings ``b`` close to ``a``, layer by layer (greedy matching).

    For each hidden layer, every pair (A's neuron ``i``, B's neuron ``p``) gets the exact scale
    ``s = a_k / b_k`` at ``k``, A's largest incoming entry (columns already aligned; the bias
    counts), and the float cost ``max |a - s b| / max |a|``; pairs with ``s <= 0`` or ``b_k = 0`` are
    last.  Pairs are taken by increasing cost.  Neurons of A with zero incoming vector get scale 1.
    """
    perm: list[list[int]] = []
    scale: list[list[flint.fmpq]] = []
    prev_p: list[int] = list(range(a.widths[0]))
    prev_s: list[flint.fmpq] = [_ONE] * a.widths[0]
    for l in range(1, a.L):
        n_prev = a.widths[l - 1]
        ra = [[a.W[l - 1][i, j] for j in range(n_prev)] + [a.b[l - 1][i]] for i in range(a.widths[l])]
        rb = [[b.W[l - 1][p, prev_p[j]] / prev_s[j] for j in range(n_prev)] + [b.b[l - 1][p]]
              for p in range(b.widths[l])]
        fa = [[_float(x) for x in r] for r in ra]
        fb = [[_float(x) for x in r] for r in rb]
        pairs = []
        for i, r in enumerate(ra):
            k = max(range(len(r)), key=lambda t: abs(r[t]))
            top = abs(fa[i][k])
            for p, q in enumerate(rb):
                if r[k] == _ZERO:
                    s, cost = _ONE, max(abs(x) for x in fb[p])
                elif q[k] == _ZERO or r[k] / q[k] <= _ZERO:
                    s, cost = _ONE, math.inf
                else:
                    s = r[k] / q[k]
                    fs = _float(s)
                    cost = max(abs(x - fs * y) for x, y in zip(fa[i], fb[p])) / top
                pairs.append((cost, i, p, s))
        pairs.sort(key=lambda t: (t[0], t[1], t[2]))
        got_i: dict[int, tuple[int, flint.fmpq]] = {}
        used: set[int] = set()
        for _, i, p, s in pairs:
            if i not in got_i and p not in used:
                got_i[i] = (p, s)
                used.add(p)
        prev_p = [got_i[i][0] for i in range(a.widths[l])]
        prev_s = [got_i[i][1] for i in range(a.widths[l])]
        perm.append(prev_p)
        scale.append(prev_s)
    return perm, scale


def compose(ca: CanonicalForm, cb: CanonicalForm) -> tuple[list[list[int]], list[list[flint.fmpq]]]:
    """B -> canonical(B) = canonical(A) -> A: the group element the two MLP forms give (``perm``, ``scale``)."""
    # B -> canonical(B) = canonical(A) -> A: position i of A is A's canonical position t with
    # ca.perm[t] = i, filled by B's neuron cb.perm[t] with scale cb.scale[t] / ca.scale[t]
    perm, scale = [], []
    for pa, sa, pb, sb in zip(ca.perm, ca.scale, cb.perm, cb.scale):
        pos = {p: t for t, p in enumerate(pa)}
        perm.append([pb[pos[i]] for i in range(len(pa))])
        scale.append([sb[pos[i]] / sa[pos[i]] for i in range(len(pa))])
    return perm, scale


def _errors(cn_a: Network, ta: Sequence[flint.fmpq], tb: Sequence[flint.fmpq], method: str,
            perm: list[list[int]], scale: list[list[flint.fmpq]]) -> Alignment:
    """Exact parameter-by-parameter errors of B's aligned theta ``tb`` against A's ``ta`` (as for MLPs)."""
    max_abs, max_rel, where_abs, where_rel, mismatch = _ZERO, None, "", "", 0
    for j, (x, y) in enumerate(zip(ta, tb)):
        d = abs(x - y)
        if j == 0 or d > max_abs:
            max_abs, where_abs = d, cn_a.param_name(j)
        if x == _ZERO:
            mismatch += d != _ZERO
            continue
        r = d / abs(x)
        if max_rel is None or r > max_rel:
            max_rel, where_rel = r, cn_a.param_name(j)
    return Alignment(method, perm, scale, max_abs, max_rel, where_abs, where_rel, mismatch)


def _by_layer(cn: Network, units: Sequence[tuple[int, int]], values: Sequence[Any]) -> list[list[Any]]:
    out: list[list[Any]] = [[] for _ in range(1, cn.L)]
    for (l, _v), x in zip(units, values):
        out[l - 1].append(x)
    return out


def _undo(form: GraphCanonicalForm, net: Network) -> list[flint.fmpq]:
    """``net`` (in the coordinates of ``form``'s positions) taken back by the inverse of the element reaching
    ``form``: at A's position ``a`` of layer ``l``, the unit at the form's position ``p`` with ``perm[p] = a``,
    its scale ``lambda_p`` removed (``W_l[a, c] = W'_l[p, q] lambda_{l-1, q} / lambda_{l, p}``)."""
    L = net.L
    pos = {u: r for r, u in enumerate(form.units)}
    inv = [list(range(net.widths[0]))]
    lam = [[_ONE] * net.widths[0]]
    for l in range(1, L):
        perm = form.perm[l - 1] if form.perm is not None else list(range(net.widths[l]))
        back = [0] * net.widths[l]
        for p, a in enumerate(perm):
            back[a] = p
        inv.append(back)
        lam.append([form.scale[pos[(l, p)]] for p in range(net.widths[l])])
    inv.append(list(range(net.widths[L])))
    lam.append([_ONE] * net.widths[L])
    theta: list[flint.fmpq | None] = [None] * net.n_params
    for l in range(1, L + 1):
        WI, bI = net.W_index[l - 1], net.b_index[l - 1]
        for a, c in zip(*(x.tolist() for x in np.nonzero(WI >= 0))):
            j = int(WI[a, c])
            if theta[j] is None:
                p, q = inv[l][a], inv[l - 1][c]
                theta[j] = net.W[l - 1][p, q] * lam[l - 1][q] / lam[l][p]
        for a in np.flatnonzero(bI >= 0).tolist():
            j = int(bI[a])
            if theta[j] is None:
                theta[j] = net.b[l - 1][inv[l][a]] / lam[l][inv[l][a]]
        if l < L:
            sI = net.slope_index[l - 1]
            for a in np.flatnonzero(sI >= 0).tolist():
                j = int(sI[a])
                if theta[j] is None:
                    theta[j] = net.negative_slope[l - 1][inv[l][a]]
    return [t if t is not None else _ZERO for t in theta]


def graph_alignment(a: GraphCanonicalForm, b: GraphCanonicalForm, cn_a: Network,
               cn_b: Network) -> Alignment:
    """B in A's coordinates, exact errors: by the element the two forms give (B's form taken back by the inverse
    of A's: method ``canonical``) and by the rescalings alone (method ``rescaling``); the smaller largest absolute
    error is kept."""
    ta = cn_a.theta()
    canonical = _undo(a, b.network)
    pos = {u: r for r, u in enumerate(a.units)}
    perm, scale = [], []
    for l in range(1, cn_a.L):
        pa = a.perm[l - 1] if a.perm is not None else list(range(cn_a.widths[l]))
        pb = b.perm[l - 1] if b.perm is not None else list(range(cn_a.widths[l]))
        row, srow = [0] * cn_a.widths[l], [_ONE] * cn_a.widths[l]
        for p, orig in enumerate(pa):  # A's unit orig sits at form position p, where B's unit pb[p] sits
            row[orig] = pb[p]
            srow[orig] = b.scale[pos[(l, p)]] / a.scale[pos[(l, p)]]
        perm.append(row)
        scale.append(srow)
    first = _errors(cn_a, ta, canonical, "canonical", perm, scale)
    mu = [mb / ma for ma, mb in zip(a.mu, b.mu)]
    rescaled = apply_scales(cn_b.theta(), b.exponents, mu)
    ratio = [sb / sa for sa, sb in zip(unit_scales(len(a.units), a.generators, a.mu),
                                       unit_scales(len(b.units), b.generators, b.mu))]
    second = _errors(cn_a, ta, rescaled, "rescaling", [], _by_layer(cn_a, a.units, ratio))
    return first if first.max_abs <= second.max_abs else second
