"""Independent judges for the forgery suite: sympy on symbolic networks, nothing from exactident.

Used only to decide whether a mutated report that ``verify-certificate`` *accepted*
still makes true claims: a reachability witness or an entering direction still
enters (tangents by sympy differentiation of the network frozen at the resolution's
pattern), a probe point still shows a change (the network run on polynomials in
``eps`` with sympy's ``Poly``), a fixed edge is nonzero.
"""

from fractions import Fraction

import sympy
from boundary_oracle import forward
from sympy import Rational

EPS = sympy.Symbol("eps")


def _q(v):
    v = Fraction(v)
    return Rational(v.numerator, v.denominator)


def param_symbols(widths):
    """``{name: Symbol}`` for every weight and bias, named like the reports (``W_1[0,0]``, ``b_1[0]``)."""
    out = {}
    for l in range(1, len(widths)):
        for r in range(widths[l]):
            for c in range(widths[l - 1]):
                out[f"W_{l}[{r},{c}]"] = sympy.Symbol(f"W_{l}[{r},{c}]")
            out[f"b_{l}[{r}]"] = sympy.Symbol(f"b_{l}[{r}]")
    return out


def _point(widths, W, b, syms):
    pt = {}
    for l in range(1, len(widths)):
        for r in range(widths[l]):
            for c in range(widths[l - 1]):
                pt[syms[f"W_{l}[{r},{c}]"]] = _q(W[l - 1][r][c])
            pt[syms[f"b_{l}[{r}]"]] = _q(b[l - 1][r])
    return pt


def _frozen(widths, syms, x, active):
    """Pre-activations (symbolic) of the network frozen at a pattern: ``active(l, v) -> bool``."""
    L = len(widths) - 1
    h = [_q(v) for v in x]
    zs = []
    for l in range(1, L + 1):
        z = [sum(syms[f"W_{l}[{r},{c}]"] * h[c] for c in range(widths[l - 1])) + syms[f"b_{l}[{r}]"]
             for r in range(widths[l])]
        zs.append(z)
        if l < L:
            h = [z[v] if active(l, v) else 0 for v in range(widths[l])]
    return zs


def _directional(expr, syms, pt, delta):
    return sum((sympy.diff(expr, syms[n]).subs(pt) * _q(d) for n, d in delta.items()), Rational(0))


def tangents(widths, W, b, X, sides, delta):
    """Per sample, ``(output tangents, {tie: tangent})`` along ``delta`` at the pattern of ``sides``.

    ``sides``: ``{(i, l, v): active}``; other neurons by ``z > 0`` (ties not in ``sides``: active).
    """
    syms = param_symbols(widths)
    pt = _point(widths, W, b, syms)
    out = []
    for i, x in enumerate(X):
        z_exact = forward(widths, W, b, x)

        def active(l, v, i=i, z_exact=z_exact):
            z = z_exact[l - 1][v]
            return sides.get((i, l, v), True) if z == 0 else z > 0

        zs = _frozen(widths, syms, x, active)
        outs = [_directional(e, syms, pt, delta) for e in zs[-1]]
        ties = {t: _directional(zs[t[1] - 1][t[2]], syms, pt, delta) for t in sides if t[0] == i}
        out.append((outs, ties))
    return out


def enters(widths, W, b, X, sides, delta, kernel=False):
    """Every tie of ``sides`` moves strictly to its side along ``delta`` (and, with ``kernel``, outputs do not)."""
    for outs, ties in tangents(widths, W, b, X, sides, delta):
        if kernel and any(o != 0 for o in outs):
            return False
        if any((r <= 0) if sides[t] else (r >= 0) for t, r in ties.items()):
            return False
    return True


def _relu_small_eps(p):
    """``relu(p(eps))`` for small ``eps > 0``: p if its lowest nonzero coefficient is positive, else 0."""
    poly = sympy.Poly(sympy.expand(p), EPS)
    coeffs = list(reversed(poly.all_coeffs()))  # lowest degree first
    low = next((c for c in coeffs if c != 0), 0)
    return p if low > 0 else Rational(0)


def line_outputs(widths, W, b, delta, x):
    """Outputs of ``theta + eps delta`` at ``x`` (sympy expressions in ``eps``, small ``eps > 0``)."""
    L = len(widths) - 1

    def val(name, base):
        return _q(base) + EPS * _q(delta.get(name, 0))

    h = [_q(v) for v in x]
    for l in range(1, L + 1):
        z = [sum(val(f"W_{l}[{r},{c}]", W[l - 1][r][c]) * h[c] for c in range(widths[l - 1]))
             + val(f"b_{l}[{r}]", b[l - 1][r]) for r in range(widths[l])]
        h = z if l == L else [_relu_small_eps(e) for e in z]
    return [sympy.expand(e) for e in h]


def changes_at(widths, W, b, delta, x):
    """``f_{theta + eps delta}(x)`` is not constant in ``eps`` (small ``eps > 0``)."""
    return any(sympy.Poly(e, EPS).degree() >= 1 for e in line_outputs(widths, W, b, delta, x))
