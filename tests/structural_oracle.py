"""Independent judge of line certificates: step theta(t) in Fractions and compare, nothing from exactident.

The definition of "not locally identifiable" asks for parameters arbitrarily close to
theta, not equivalent to it, with the same outputs on X.  For a certificate's line
``theta(t) = theta + t delta`` this module

- runs the network at ``theta(t)`` for a few exact ``t`` in ``(0, t0)`` (Fraction forward
  pass written here) and compares the outputs on every sample with those at theta;
- computes the multiset of path products per (start layer, input, output), the
  invariant of positive rescalings and hidden-neuron permutations (docs/boundary.md),
  at theta and at ``theta(t)``, and checks that they differ;
- re-derives the structural facts a ``structural`` part names (dead, always active,
  proportional on the sample, input zero on the sample, unpinned kernel condition).
"""

from __future__ import annotations

import re
from fractions import Fraction as F
from itertools import product

_PARAM = re.compile(r"W_(\d+)\[(\d+),(\d+)\]|b_(\d+)\[(\d+)\]")


def fractions_of(obj):
    """``(widths, W, b, X)`` of a case object as Fractions (``W[l-1][row][col]``)."""
    W = [[[F(str(v)) for v in row] for row in M] for M in obj["weights"]]
    b = [[F(str(v)) for v in row] for row in obj["biases"]]
    X = [[F(str(v)) for v in row] for row in obj["sample"]]
    return list(obj["widths"]), W, b, X


def pre_activations(W, b, x):
    """``[z_1, ..., z_L]`` at ``x`` (ReLU between layers)."""
    h, out = list(x), []
    for l, (Wl, bl) in enumerate(zip(W, b)):
        z = [sum((w * v for w, v in zip(row, h)), F(0)) + c for row, c in zip(Wl, bl)]
        out.append(z)
        h = [max(v, F(0)) for v in z] if l < len(W) - 1 else z
    return out


def outputs(W, b, X):
    return [pre_activations(W, b, x)[-1] for x in X]


def moved(widths, W, b, delta, t):
    """``theta + t delta`` (``delta``: ``{"W_1[0,0]": "p/q", ...}``)."""
    W2 = [[row[:] for row in M] for M in W]
    b2 = [row[:] for row in b]
    for name, value in delta.items():
        m = _PARAM.fullmatch(name)
        assert m, name
        if m[1]:
            W2[int(m[1]) - 1][int(m[2])][int(m[3])] += t * F(value)
        else:
            b2[int(m[4]) - 1][int(m[5])] += t * F(value)
    return W2, b2


def path_multisets(widths, W, b):
    """Sorted path products per (start layer, input or None, output): an invariant of the equivalence."""
    L = len(widths) - 1
    out = {}
    for start in range(L + 1):
        for nodes in product(*(range(widths[m]) for m in range(start, L + 1))):
            value = b[start - 1][nodes[0]] if start >= 1 else F(1)
            for m in range(start + 1, L + 1):
                value *= W[m - 1][nodes[m - start]][nodes[m - start - 1]]
            out.setdefault((start, nodes[0] if start == 0 else None, nodes[-1]), []).append(value)
    return {k: sorted(v) for k, v in out.items()}


def step_times(t0):
    """A few exact ``t`` in ``(0, t0)`` (``t0`` None: no bound)."""
    if t0 is None:
        return [F(1, 1000), F(1, 3), F(2)]
    t0 = F(t0)
    return [t0 / 1000, t0 / 3, t0 * 999 / 1000]


def confirm_line(obj, report):
    """The report's line keeps f(X) at every stepped t and changes the path-product multisets there.

    Returns the times stepped.  Raises AssertionError otherwise.
    """
    widths, W, b, X = fractions_of(obj)
    cert = report["certificate"]
    delta = cert["line"]["delta"]
    t0 = cert["structural"]["t0"] if "structural" in cert else F(1, 10**12)  # a bare line: tiny steps only
    base, inv = outputs(W, b, X), path_multisets(widths, W, b)
    times = step_times(t0)
    for t in times:
        W2, b2 = moved(widths, W, b, delta, t)
        assert outputs(W2, b2, X) == base, f"outputs move at t = {t}"
        assert path_multisets(widths, W2, b2) != inv, f"the path products do not change at t = {t}"
    return times


def mechanism_holds(obj, part, delta):
    """The structural facts ``part`` names hold for the case and the direction (independent re-derivation)."""
    widths, W, b, X = fractions_of(obj)
    L = len(widths) - 1
    zs = [pre_activations(W, b, x) for x in X]
    d = {k: F(v) for k, v in delta.items() if F(v) != 0}
    mech, neurons = part["mechanism"], [tuple(n) for n in part.get("neurons", [])]

    def row(l, v):
        return {f"W_{l}[{v},{c}]" for c in range(widths[l - 1])} | {f"b_{l}[{v}]"}

    def h(i, l):
        return X[i] if l == 1 else [max(z, F(0)) for z in zs[i][l - 2]]

    if any(not (1 <= l < L and 0 <= v < widths[l]) for l, v in neurons):
        return False
    if mech in ("dead-neuron", "unpinned-hyperplane"):
        (l, v), = neurons
        if not d or not set(d) <= row(l, v):
            return False
        if mech == "dead-neuron" and not (X and all(z[l - 1][v] < 0 for z in zs)):
            return False
        t0 = None
        for i, z in enumerate(zs):
            s = sum((d.get(f"W_{l}[{v},{c}]", F(0)) * hc for c, hc in enumerate(h(i, l))), d.get(f"b_{l}[{v}]", F(0)))
            if z[l - 1][v] >= 0 and s != 0:
                return False
            if z[l - 1][v] < 0 < s:
                t0 = min(t0, -z[l - 1][v] / s) if t0 is not None else -z[l - 1][v] / s
        return (None if part["t0"] is None else F(part["t0"])) == t0
    if part["t0"] is not None:
        return False
    if mech == "untouched-input":
        j = part["input"]
        return (all(x[j] == 0 for x in X) and bool(d)
                and set(d) <= {f"W_1[{v},{j}]" for l, v in neurons if l == 1})
    (l, u), (m, v) = neurons
    if l != m or u == v:
        return False
    zu, zv = [z[l - 1][u] for z in zs], [z[l - 1][v] for z in zs]
    if mech == "always-active-block":
        want = {f"W_{l}[{u},{c}]": W[l - 1][v][c] for c in range(widths[l - 1])}
        want[f"b_{l}[{u}]"] = b[l - 1][v]
        want.update({f"W_{l + 1}[{k},{v}]": -W[l][k][u] for k in range(widths[l + 1])})
        return bool(X) and all(a > 0 for a in zu + zv) and d == {k: x for k, x in want.items() if x != 0}
    c = F(part["ratio"])
    same = [a > 0 for a in zu] == [a > 0 for a in zv] and any(a > 0 for a in zu)
    prop = all(a == c * e for a, e in zip(zu, zv) if a > 0)
    cols = {f"W_{l + 1}[{k},{x}]" for k in range(widths[l + 1]) for x in (u, v)}
    shaped = all(d.get(f"W_{l + 1}[{k},{v}]", F(0)) == -c * d.get(f"W_{l + 1}[{k},{u}]", F(0))
                 for k in range(widths[l + 1]))
    return (c > 0 and 0 not in zu + zv and same and prop and bool(d) and set(d) <= cols and shaped)


def confirm_small_eps_line(obj, report):
    """A bare ``line`` (no ``t0``): outputs on X are constant polynomials in eps for small eps > 0 (sympy,
    ``forgery_oracle``), and some path product is a non-constant polynomial in eps (so for small eps its
    value is none of the finitely many path products at theta: the multisets differ)."""
    import sympy
    from forgery_oracle import EPS, line_outputs

    widths, W, b, X = fractions_of(obj)
    delta = report["certificate"]["line"]["delta"]
    for x in X:
        assert all(sympy.Poly(e, EPS).degree() <= 0 for e in line_outputs(widths, W, b, delta, x)), x
    L = len(widths) - 1
    d = {k: F(v) for k, v in delta.items()}
    for start in range(L + 1):
        for nodes in product(*(range(widths[m]) for m in range(start, L + 1))):
            names = [f"b_{start}[{nodes[0]}]"] if start >= 1 else []
            names += [f"W_{m}[{nodes[m - start]},{nodes[m - start - 1]}]" for m in range(start + 1, L + 1)]
            poly = sympy.Integer(1)
            for name in names:
                m = _PARAM.fullmatch(name)
                base = W[int(m[1]) - 1][int(m[2])][int(m[3])] if m[1] else b[int(m[4]) - 1][int(m[5])]
                poly *= sympy.Rational(str(base)) + EPS * sympy.Rational(str(d.get(name, 0)))
            if sympy.Poly(sympy.expand(poly), EPS).degree() >= 1:
                return
    raise AssertionError("no path product moves along the line")
