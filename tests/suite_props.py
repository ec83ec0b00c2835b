"""Independent checks of the generated families' promised properties (tests only).

Nothing here uses exactident.suites: numbers are read from the case file as
Fractions, pre-activations come from ``_gen.forward``, ranks from the sympy
oracle of ``boundary_oracle``, float32 rounding from numpy.  One function per
family, each returning a list of problems (empty when the promise holds).
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
from _gen import forward, is_degenerate, is_tie_free
from boundary_oracle import resolution_ranks

__all__ = ["PROPERTIES", "load_fractions"]


def load_fractions(path: Path):
    obj = json.loads(Path(path).read_text(encoding="utf-8"))
    W = [[[Fraction(v) for v in row] for row in Wl] for Wl in obj["weights"]]
    b = [[Fraction(v) for v in bl] for bl in obj["biases"]]
    X = [[Fraction(v) for v in x] for x in obj["sample"]]
    return obj, obj["widths"], W, b, X


def _hidden(W, b, x):
    return forward(W, b, x)[:-1]


def _dim(widths):
    return sum(widths[l] * widths[l + 1] for l in range(len(widths) - 1)) + widths[-1]


def _clean(W, b, X):
    return [] if (is_tie_free(W, b, X) and not is_degenerate(W, b)) else ["ties or a neuron in S"]


def generic(obj, widths, W, b, X):
    rel = obj["generator"]["parameters"]["n_times_NL_vs_dim"]
    a, d = len(X) * widths[-1], _dim(widths)
    ok = {"<": a < d, "=": a == d, ">": a > d}[rel]
    return _clean(W, b, X) + ([] if ok else [f"n*N_L = {a} is not {rel} dim = {d}"])


def boundary(obj, widths, W, b, X):
    p = obj["generator"]["parameters"]
    i, l, v = p["tie"]["sample"], p["tie"]["layer"], p["tie"]["neuron"]
    out = [] if _hidden(W, b, X[i])[l - 1][v] == 0 else ["no tie at the recorded neuron"]
    out += ["degenerate"] if is_degenerate(W, b) else []
    if p["variant"] == "deep" and l < 2:
        out.append("not a deeper layer")
    if "twins" in p:
        u, w = p["twins"]["neurons"]
        # The function-preserving direction: outgoing weights of the twins along (c delta, -delta).
        c = Fraction(p["twins"]["factor"])
        W2 = [[list(r) for r in Wl] for Wl in W]
        for k in range(widths[2]):
            W2[1][k][u] += c * Fraction(k + 1, 7)
            W2[1][k][w] -= Fraction(k + 1, 7)
        probes = X + [[Fraction(j - 3, 2)] * widths[0] for j in range(7)]
        for x in probes:
            if forward(W2, b, x)[-1] != forward(W, b, x)[-1]:
                out.append("moving the twins' outgoing weights changed f")
                break
        if l >= 2 and _hidden(W2, b, X[i])[l - 1][v] != 0:
            out.append("the tie does not persist along the function-preserving direction")
    return out


def degenerate(obj, widths, W, b, X):
    return [] if is_degenerate(W, b) else ["not in S"]


def dead_neuron(obj, widths, W, b, X):
    l, v = obj["generator"]["parameters"]["neuron"]
    dead = all(_hidden(W, b, x)[l - 1][v] < 0 for x in X)
    return _clean(W, b, X) + ([] if dead else ["the neuron is active somewhere"])


def all_active(obj, widths, W, b, X):
    ok = all(z > 0 for x in X for zl in _hidden(W, b, x) for z in zl)
    return ([] if ok else ["a hidden neuron is not strictly active"]) + (["degenerate"] if is_degenerate(W, b) else [])


def twins(obj, widths, W, b, X):
    (l, u), (_, w) = obj["generator"]["parameters"]["neurons"]
    hu = [max(_hidden(W, b, x)[l - 1][u], 0) for x in X]
    hw = [max(_hidden(W, b, x)[l - 1][w], 0) for x in X]
    k = next((i for i, h in enumerate(hu) if h), None)
    if k is None:
        return ["the twins are never active"]
    c = hw[k] / hu[k]
    ok = c > 0 and all(hw[i] == c * hu[i] for i in range(len(X)))
    return _clean(W, b, X) + ([] if ok else ["not proportional"])


def gap(obj, widths, W, b, X):
    rg, ra, dim = resolution_ranks(widths, W, b, X, {})
    return _clean(W, b, X) + ([] if rg < ra and rg < dim else [f"no gap: {rg}, {ra}, {dim}"])


def rescaled(obj, widths, W, b, X):
    """Undo the recorded scaling: same outputs on the sample and on probes (the function is unchanged)."""
    p = obj["generator"]["parameters"]
    (l, v), s = p["neuron"], Fraction(10) ** p["k"]
    W0 = [[list(r) for r in Wl] for Wl in W]
    b0 = [list(bl) for bl in b]
    W0[l - 1][v] = [x / s for x in W0[l - 1][v]]
    b0[l - 1][v] /= s
    for row in W0[l]:
        row[v] *= s
    probes = X + [[Fraction(j - 5, 3)] * widths[0] for j in range(11)]
    same = all(forward(W0, b0, x)[-1] == forward(W, b, x)[-1] for x in probes)
    return _clean(W, b, X) + ([] if same else ["the unscaled network computes another function"])


def near_kink(obj, widths, W, b, X):
    p = obj["generator"]["parameters"]
    i, (l, v), k = p["sample"], p["neuron"], p["k"]
    kink = [Fraction(q) for q in p["kink_point"]]
    out = [] if _hidden(W, b, kink)[l - 1][v] == 0 else ["kink point not on the zero set"]
    if max(abs(a - c) for a, c in zip(X[i], kink)) > Fraction(1, 10**k):
        out.append("too far")
    return _clean(W, b, X) + out


def _f32(q: Fraction) -> Fraction:
    # float64 then float32: exact here, since no generated p/q (q <= 4) lies on a float32 rounding midpoint
    return Fraction(float(np.float32(float(q))))


def float32_trap(obj, widths, W, b, X):
    p = obj["generator"]["parameters"]
    i, (l, v) = p["sample"], p["neuron"]
    if any(_f32(x) != x for row in X for x in row):
        return ["a sample value is not a float32"]
    W32 = [[[_f32(w) for w in r] for r in Wl] for Wl in W]
    b32 = [[_f32(c) for c in bl] for bl in b]
    flips = (_hidden(W, b, X[i])[l - 1][v] >= 0) != (_hidden(W32, b32, X[i])[l - 1][v] >= 0)
    return _clean(W, b, X) + ([] if flips else ["float32 rounding does not cross the kink"])


def trained(obj, widths, W, b, X):
    values = [v for Wl in W for r in Wl for v in r] + [v for bl in b for v in bl] + [v for x in X for v in x]
    exact = all(Fraction(float(v)) == v for v in values)
    return ([] if exact else ["not float64 values"]) + (["degenerate"] if is_degenerate(W, b) else [])


PROPERTIES = {"generic": generic, "boundary": boundary, "degenerate": degenerate, "dead-neuron": dead_neuron,
              "all-active": all_active, "twins": twins, "gap": gap, "rescaled": rescaled, "near-kink": near_kink,
              "float32-trap": float32_trap, "trained": trained}
