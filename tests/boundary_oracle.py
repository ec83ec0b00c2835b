"""Independent oracle for boundary tests: sympy symbolic networks, nothing from exactident's engine.

For a tie resolution, the network on the piece is a polynomial in the
parameters (active neurons = identity, inactive = zero); its Jacobian w.r.t.
the free parameters is ``Gamma(s)`` (Prop. 10).  The oracle fixes, for every
hidden neuron, its *first nonzero* outgoing edge (the engine fixes the
largest one: the rank does not depend on the choice), and builds ``alpha(s)``
by explicit path enumeration.
"""

from fractions import Fraction
from itertools import product

import sympy
from sympy import QQ, Rational
from sympy.polys.matrices import DomainMatrix


def fr(x):
    return Fraction(x)


def forward(widths, W, b, x, act=None):
    """Exact forward pass (Fractions); ``act(l, v, z)`` overrides ReLU's side (default z > 0)."""
    h = list(x)
    zs = []
    L = len(widths) - 1
    for l in range(1, L + 1):
        z = [sum((W[l - 1][r][c] * h[c] for c in range(widths[l - 1])), Fraction(0)) + b[l - 1][r]
             for r in range(widths[l])]
        zs.append(z)
        if l < L:
            h = [zv if (act(l, v, zv) if act else zv > 0) else Fraction(0) for v, zv in enumerate(z)]
    return zs


def outputs(widths, W, b, X):
    return [forward(widths, W, b, x)[-1] for x in X]


def ties(widths, W, b, X):
    L = len(widths) - 1
    out = []
    for i, x in enumerate(X):
        zs = forward(widths, W, b, x)
        out += [(i, l, v) for l in range(1, L) for v in range(widths[l]) if zs[l - 1][v] == 0]
    return sorted(out)


def _rank(rows, ncols):
    if not rows or not ncols:
        return 0
    return DomainMatrix([[QQ(Rational(v).p, Rational(v).q) for v in r] for r in rows], (len(rows), ncols), QQ).rank()


def resolution_ranks(widths, W, b, X, sides):
    """``(R_Gamma(s), R_A(s), dim)`` for ``sides = {(i, l, v): active}`` (others by ``z > 0``)."""
    L = len(widths) - 1
    Ws = [[[sympy.Symbol(f"W{l}_{r}_{c}") for c in range(widths[l - 1])] for r in range(widths[l])]
          for l in range(1, L + 1)]
    bs = [[sympy.Symbol(f"b{l}_{r}") for r in range(widths[l])] for l in range(1, L + 1)]
    point = {}
    for l in range(L):
        for r in range(widths[l + 1]):
            point[bs[l][r]] = Rational(b[l][r].numerator, b[l][r].denominator)
            for c in range(widths[l]):
                point[Ws[l][r][c]] = Rational(W[l][r][c].numerator, W[l][r][c].denominator)
    fixed = set()
    for l in range(1, L):
        for v in range(widths[l]):
            k = next(k for k in range(widths[l + 1]) if W[l][k][v] != 0)
            fixed.add(Ws[l][k][v])
    free = [s for l in range(L) for s in [w for row in Ws[l] for w in row] + bs[l] if s not in fixed]
    rows = []
    for i, x in enumerate(X):
        zs = forward(widths, W, b, x)
        h = [Rational(v.numerator, v.denominator) for v in x]
        for l in range(1, L + 1):
            z = [sum(Ws[l - 1][r][c] * h[c] for c in range(widths[l - 1])) + bs[l - 1][r] for r in range(widths[l])]
            if l < L:
                h = [z[v] if sides.get((i, l, v), zs[l - 1][v] > 0) else 0 for v in range(widths[l])]
        for out in z:
            rows.append([sympy.diff(out, p).subs(point) for p in free])
    alpha = alpha_matrix(widths, W, b, X, sides)
    return _rank(rows, len(free)), widths[-1] * _rank(alpha, len(alpha[0]) if alpha else 0), len(free)


def alpha_matrix(widths, W, b, X, sides):
    """``alpha(s)`` (Fractions, one row per sample) by explicit path enumeration, ``sides`` as above."""
    L = len(widths) - 1
    alpha = []
    for i, x in enumerate(X):
        zs = forward(widths, W, b, x)

        def act(l, v, i=i, zs=zs):
            return sides.get((i, l, v), zs[l - 1][v] > 0)

        row = []
        for start in range(L):
            for path in product(*(range(widths[m]) for m in range(start, L))):
                f = Fraction(1)
                for m, u in zip(range(start, L), path):
                    f *= x[u] if m == 0 else int(act(m, u))
                row.append(f)
        alpha.append(row + [Fraction(1)])
    return alpha


def rank_mod_p(rows, ncols, p):
    """Rank of a Fraction matrix mod the prime ``p`` (sympy over GF(p); ``p`` divides no denominator)."""
    if not rows or not ncols:
        return 0
    F = sympy.GF(p)
    return DomainMatrix([[F(int(v.numerator) * pow(int(v.denominator), -1, p)) for v in r] for r in rows],
                        (len(rows), ncols), F).rank()


def all_resolution_ranks(widths, W, b, X):
    """``{resolution tuple: (R_Gamma, R_A, dim)}`` over every side of every tie."""
    T = ties(widths, W, b, X)
    return {s: resolution_ranks(widths, W, b, X, dict(zip(T, s))) for s in product((True, False), repeat=len(T))}
