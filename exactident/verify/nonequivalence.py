"""Non-equivalence by exact invariants of the equivalence (positive rescalings, hidden-neuron permutations).

Two parameter vectors are *equivalent* (paper §3) when one is obtained from the
other by positive rescalings of hidden neurons and permutations of the neurons
of hidden layers.  An *invariant* is a function of theta that equivalence
preserves; if it differs, the parameters are not equivalent.  Two invariants
are used (proofs in ``docs/boundary.md``, "Non-equivalence by invariants"):

``path-products``
    For each start (layer ``l``; the input coordinate ``u`` when ``l = 0``) and
    each output ``k``, the multiset of the path products ``phi_{p,k}(theta)`` over
    the paths ``p`` with that start (the lifting of paper §2.2).
``first-layer-rays``
    The multiset over the neurons ``v`` of layer 1 of the ray
    ``{c (W_1[v, :], b_1[v]) : c > 0}`` (the zero vector being its own class).

A certificate moves theta along ``theta + eps delta`` (a straight line,
``line`` certificates) or along a curve tangent to ``delta`` (``entering``
certificates) and names one witness:

- ``{"invariant": "path-products", "path": {"start", "neurons", "output"},
  "coefficients": ["c0", "c1", ...]}``: the product along that path is the
  polynomial ``c0 + c1 eps + ...`` along the line; the claim is that it is
  non-constant (line) or that ``c1 != 0`` (curve: only ``c0, c1`` are given).
  Then for all small ``eps > 0`` the product takes a value that no path of
  the same start and output has at theta, so the multisets differ.
- ``{"invariant": "first-layer-rays", "neuron": v}``: ``(W_1[v,:], b_1[v])`` is
  nonzero and ``delta`` moves it off its line (the two rows have rank 2), so
  its ray at ``theta + eps delta`` is none of the finitely many rays at theta.

Everything is recomputed here in ``fractions.Fraction`` arithmetic from the
case; the engine's twin :mod:`exactident.boundary.nonequivalence` finds
witnesses.  Kept separate so that other certificates (e.g. structural ones
for dead neurons) can reuse :func:`check_nonequivalence`.
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from itertools import product
from typing import Any

from exactident.verify.arith import BadField, need, parse_fraction, show, unknown_fields

__all__ = ["INVARIANTS", "check_nonequivalence", "first_layer_rays", "path_factors", "path_polynomial",
           "path_products"]

#: The invariants a non-equivalence witness may name (module docstring).
INVARIANTS = ("path-products", "first-layer-rays")


def path_factors(widths: list[int], start: int, neurons: list[int], output: int) -> list[tuple]:
    """The parameters whose product is ``phi_{p,k}``: ``("b", l, v)`` or ``("W", l, row, col)``.

    ``neurons`` lists the path's neuron per layer ``start..L-1`` (an input
    coordinate at layer 0); ``start = L`` is the empty path ``beta`` (``b_L[k]``).

    Raises
    ------
    BadField
        If the path does not exist in a network of these widths.

    Examples
    --------
    >>> path_factors([1, 2, 1, 1], 0, [0, 1, 0], 0)
    [('W', 1, 1, 0), ('W', 2, 0, 1), ('W', 3, 0, 0)]
    >>> path_factors([1, 2, 1, 1], 2, [0], 0)
    [('b', 2, 0), ('W', 3, 0, 0)]
    """
    L = len(widths) - 1
    if not 0 <= start <= L or len(neurons) != L - start:
        raise BadField("path", f"a path starting at layer {start} has {max(L - start, 0)} neurons, "
                               f"found {len(neurons)}")
    seq = [*neurons, output]
    for m, v in zip(range(start, L + 1), seq):
        if not 0 <= v < widths[m]:
            raise BadField("path", f"neuron {v} does not exist in layer {m} (width {widths[m]})")
    out: list[tuple] = [("b", start, seq[0])] if start >= 1 else []
    for m in range(start + 1, L + 1):
        out.append(("W", m, seq[m - start], seq[m - start - 1]))
    return out


def _value(W, b, f: tuple) -> Fraction:
    return b[f[1] - 1][f[2]] if f[0] == "b" else W[f[1] - 1][f[2]][f[3]]


def path_polynomial(W, b, dW, db, factors: list[tuple]) -> list[Fraction]:
    """``prod (theta_f + eps delta_f)`` over the factors, as coefficients (lowest degree first)."""
    poly = [Fraction(1)]
    for f in factors:
        a, d = _value(W, b, f), _value(dW, db, f)
        nxt = [Fraction(0)] * (len(poly) + 1)
        for k, c in enumerate(poly):
            nxt[k] += c * a
            nxt[k + 1] += c * d
        poly = nxt
    while len(poly) > 1 and poly[-1] == 0:
        poly.pop()
    return poly


def path_products(W, b) -> dict[tuple[int, int | None, int], list[Fraction]]:
    """The invariant ``path-products`` of theta: sorted products per (start layer, input, output).

    Examples
    --------
    Rescaling the hidden neuron by 2 leaves it unchanged:

    >>> F = Fraction
    >>> path_products([[[F(1)]], [[F(3)]]], [[F(1)], [F(0)]]) == path_products(
    ...     [[[F(2)]], [[F(3, 2)]]], [[F(2)], [F(0)]])
    True
    """
    widths = [len(W[0][0])] + [len(Wl) for Wl in W]
    L = len(widths) - 1
    zero = [[[Fraction(0)] * len(r) for r in Wl] for Wl in W], [[Fraction(0)] * len(bl) for bl in b]
    out: dict[tuple[int, int | None, int], list[Fraction]] = {}
    for start in range(L + 1):
        for neurons in product(*(range(widths[m]) for m in range(start, L))):
            for k in range(widths[-1]):
                key = (start, neurons[0] if start == 0 else None, k)
                poly = path_polynomial(W, b, *zero, path_factors(widths, start, list(neurons), k))
                out.setdefault(key, []).append(poly[0])
    return {key: sorted(v) for key, v in out.items()}


def _ray(vec: list[Fraction]) -> tuple[Fraction, ...]:
    lead = next((abs(v) for v in vec if v != 0), None)
    return tuple(vec) if lead is None else tuple(v / lead for v in vec)


def first_layer_rays(W, b) -> Counter:
    """The invariant ``first-layer-rays``: multiset of normalised ``(W_1[v,:], b_1[v])`` over layer-1 neurons.

    Only meaningful with at least one hidden layer (layer 1 hidden).

    Examples
    --------
    >>> F = Fraction
    >>> first_layer_rays([[[F(2)], [F(-1)]], [[F(1), F(1)]]], [[F(4), F(0)], [F(0)]]) == first_layer_rays(
    ...     [[[F(-3)], [F(1)]], [[F(1), F(1)]]], [[F(0), F(2)], [F(0)]])
    True
    """
    return Counter(_ray([*W[0][v], b[0][v]]) for v in range(len(b[0])))


def check_nonequivalence(widths: list[int], W, b, dW, db, part: Any, where: str, *,
                         first_order: bool) -> tuple[list[str], str]:
    """Check a non-equivalence witness for ``theta + eps delta`` (line) or a curve tangent to ``delta``.

    Parameters
    ----------
    widths : list of int
    W, b : theta (Fractions, ``W[l-1][row][col]``, ``b[l-1][row]``)
    dW, db : delta, same shapes (zeros where delta has no entry)
    part : dict
        The witness (see the module docstring).
    where : str
        Its JSON path, for messages.
    first_order : bool
        True for a curve tangent to ``delta`` (only the first-order change counts),
        False for the straight line ``theta + eps delta``.

    Returns
    -------
    (problems, summary) : (list of str, str)
        ``problems`` empty when the witness proves non-equivalence for all small ``eps > 0``;
        each problem names the value found and the value claimed.

    Raises
    ------
    BadField
        Malformed witness (wrong JSON types, a path that does not exist).
    """
    if not isinstance(part, dict):
        raise BadField(where, f"expected dict, found {type(part).__name__}")
    kind = need(part, "invariant", str, where)
    L = len(widths) - 1
    if kind == "path-products":
        problems = unknown_fields(part, ("invariant", "path", "coefficients"), where)
        path = need(part, "path", dict, where)
        problems += unknown_fields(path, ("start", "neurons", "output"), f"{where}.path")
        start = need(path, "start", int, f"{where}.path")
        neurons = need(path, "neurons", list, f"{where}.path")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in neurons):
            raise BadField(f"{where}.path.neurons", "expected a list of ints")
        output = need(path, "output", int, f"{where}.path")
        try:
            factors = path_factors(widths, start, neurons, output)
        except BadField as exc:
            raise BadField(f"{where}.path", str(exc)) from None
        raw = need(part, "coefficients", list, where)
        claimed = [parse_fraction(c, f"{where}.coefficients[{k}]") for k, c in enumerate(raw)]
        poly = path_polynomial(W, b, dW, db, factors)
        poly = poly + [Fraction(0)] * (2 - len(poly)) if first_order else poly
        expect = poly[:2] if first_order else poly
        shown = ", ".join(show(c) for c in expect)
        if claimed != expect:
            problems.append(f"{where}.coefficients: certificate says [{', '.join(show(c) for c in claimed)}], "
                            f"the path product along delta has coefficients [{shown}]")
        elif first_order and expect[1] == 0:
            problems.append(f"{where}: the path product's first-order change is 0 (claimed nonzero): "
                            "it does not show non-equivalence")
        elif not first_order and all(c == 0 for c in expect[1:]):
            problems.append(f"{where}: the path product is constant ({show(expect[0])}) along the line (claimed "
                            "non-constant): it does not show non-equivalence")
        return problems, f"path product changes ({shown} in eps)"
    if kind == "first-layer-rays":
        problems = unknown_fields(part, ("invariant", "neuron"), where)
        v = need(part, "neuron", int, where)
        if L < 2 or not 0 <= v < widths[1]:
            raise BadField(f"{where}.neuron", f"no hidden neuron {v} in layer 1")
        w = [*W[0][v], b[0][v]]
        d = [*dW[0][v], db[0][v]]
        independent = any(w[j] * d[k] != w[k] * d[j] for j in range(len(w)) for k in range(j + 1, len(w)))
        if not any(w) or not independent:
            problems.append(f"{where}: neuron (1,{v}) has incoming vector {[show(x) for x in w]} and direction "
                            f"{[show(x) for x in d]}: not a nonzero vector moved off its line (claimed)")
        return problems, f"the ray of neuron (1,{v})'s incoming weights changes"
    raise BadField(f"{where}.invariant", f"expected one of {list(INVARIANTS)}, found {kind!r}")
