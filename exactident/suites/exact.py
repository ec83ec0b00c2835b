"""Exact checks of the properties generated cases promise, in plain ``Fraction`` arithmetic.

These are deliberately independent of the engine (:func:`exactident.check`):
a generated case's *promised property* (a tie, a dead neuron, a rank gap, a
float32 rounding that crosses a kink, ...) is a fact about the network and
the sample, established here before the engine computes the case's
``expected`` verdict.  Ranks use python-flint's exact ``fmpq_mat.rank`` on
matrices built here: the Jacobian of the outputs with respect to the free
parameters (``Gamma``, Prop. 10, fixed edges as in docs/theory.md: the
largest ``|weight|`` outgoing edge, lowest index on ties) and the activation
operator ``alpha`` (Prop. 1) by its recursion over paths.  Activation
indicators use ``z >= 0`` (the paper's ``a_v``).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import flint

from exactident.suites.draft import Draft

__all__ = [
    "activation_flips_f32",
    "all_active",
    "dead_neurons",
    "degenerate_neurons",
    "forward",
    "gamma_rows",
    "hidden_ties",
    "rank",
    "rank_a",
    "rank_gamma",
    "round_binary",
    "round_draft_f32",
    "twin_pairs",
]

ZERO = Fraction(0)


def forward(W, b, x) -> list[list[Fraction]]:
    """Pre-activations ``[z_1(x), ..., z_L(x)]`` (the last is ``f_theta(x)``), exactly.

    >>> forward([[[Fraction(2)]], [[Fraction(3)]]], [[Fraction(1)], [Fraction(0)]], [Fraction(-1, 2)])
    [[Fraction(0, 1)], [Fraction(0, 1)]]
    """
    h = list(x)
    zs = []
    for Wl, bl in zip(W, b):
        z = [sum((Wl[i][j] * h[j] for j in range(len(h))), ZERO) + bl[i] for i in range(len(bl))]
        zs.append(z)
        h = [v if v > 0 else ZERO for v in z]
    return zs


def hidden_ties(d: Draft) -> list[tuple[int, int, int]]:
    """Ties ``(i, l, v)``: sample ``i``, hidden layer ``l`` (1-based), neuron ``v`` with ``z = 0``."""
    out = []
    for i, x in enumerate(d.X):
        zs = forward(d.W, d.b, x)
        out += [(i, l, v) for l in range(1, d.L) for v, z in enumerate(zs[l - 1]) if z == 0]
    return out


def degenerate_neurons(d: Draft) -> list[tuple[int, int]]:
    """Hidden ``(l, v)`` with all outgoing weights zero, or all incoming weights and bias zero (``S``)."""
    out = []
    for l in range(1, d.L):
        for v in range(d.widths[l]):
            if all(d.W[l][k][v] == 0 for k in range(d.widths[l + 1])) or (
                    all(w == 0 for w in d.W[l - 1][v]) and d.b[l - 1][v] == 0):
                out.append((l, v))
    return out


def dead_neurons(d: Draft) -> list[tuple[int, int]]:
    """Hidden ``(l, v)`` strictly inactive (``z < 0``) on every sample (none for an empty sample)."""
    if not d.X:
        return []
    zs = [forward(d.W, d.b, x) for x in d.X]
    return [(l, v) for l in range(1, d.L) for v in range(d.widths[l]) if all(z[l - 1][v] < 0 for z in zs)]


def all_active(d: Draft) -> bool:
    """Every hidden neuron strictly active (``z > 0``) on every sample: ``f`` is affine on the data."""
    return all(v > 0 for x in d.X for z in forward(d.W, d.b, x)[:-1] for v in z)


def twin_pairs(d: Draft) -> list[tuple[int, int, int, Fraction]]:
    """Hidden ``(l, u, v, c)``, ``u < v``: ``relu(z_v) = c relu(z_u)`` on every sample, ``c > 0``, not all zero."""
    post = [[[max(z, ZERO) for z in zl] for zl in forward(d.W, d.b, x)[:-1]] for x in d.X]
    out = []
    for l in range(1, d.L):
        for u in range(d.widths[l]):
            for v in range(u + 1, d.widths[l]):
                hu = [p[l - 1][u] for p in post]
                hv = [p[l - 1][v] for p in post]
                k = next((i for i, h in enumerate(hu) if h != 0), None)
                if k is None or hv[k] == 0:
                    continue
                c = hv[k] / hu[k]
                if all(hv[i] == c * hu[i] for i in range(len(hu))):
                    out.append((l, u, v, c))
    return out


def _fixed_edges(d: Draft) -> set[tuple[int, int, int]]:
    """``(l, k, v)``: the fixed edge ``W_{l+1}[k, v]`` of hidden neuron ``(l, v)`` (largest |w|, lowest k)."""
    out = set()
    for l in range(1, d.L):
        for v in range(d.widths[l]):
            col = [abs(d.W[l][k][v]) for k in range(d.widths[l + 1])]
            out.add((l, col.index(max(col)), v))
    return out


def gamma_rows(d: Draft) -> list[list[Fraction]]:
    """``Gamma(X, theta)``: rows ``i N_L + k``, one column per free parameter (weights then bias, layer by layer).

    Backpropagation with ``a_v = [z >= 0]`` (Prop. 10: the Jacobian of the
    outputs w.r.t. ``tau``); fixed edges are left out.
    """
    fixed = _fixed_edges(d)
    rows = []
    for x in d.X:
        zs = forward(d.W, d.b, x)
        hs = [list(x)] + [[v if v > 0 else ZERO for v in z] for z in zs[:-1]]
        acts = [[1 if v >= 0 else 0 for v in z] for z in zs[:-1]]
        for k in range(d.widths[-1]):
            delta = [Fraction(int(i == k)) for i in range(d.widths[-1])]
            grads: list[list[Fraction]] = [[] for _ in range(d.L)]
            for l in range(d.L, 0, -1):  # paper layer l: W_l, b_l
                h = hs[l - 1]
                g = [delta[i] * h[j] for i in range(d.widths[l]) for j in range(d.widths[l - 1])
                     if (l - 1, i, j) not in fixed]
                grads[l - 1] = g + list(delta)
                if l > 1:
                    back = [sum((d.W[l - 1][i][j] * delta[i] for i in range(d.widths[l])), ZERO)
                            for j in range(d.widths[l - 1])]
                    delta = [back[j] * acts[l - 2][j] for j in range(d.widths[l - 1])]
            rows.append([g for gl in grads for g in gl])
    return rows


def _alpha_row(d: Draft, x: Sequence[Fraction]) -> list[Fraction]:
    # Path features ending at each neuron of layer l: a_v(x) times (features ending upstream, or 1 for a path
    # starting at v); layer 0's are the inputs.  alpha(x) = those ending at layer L-1, then beta = 1 (Prop. 1).
    zs = forward(d.W, d.b, x)
    feats: list[list[Fraction]] = [[xj] for xj in x]
    for l in range(1, d.L):
        upstream = [f for fv in feats for f in fv]
        feats = [[f * (1 if zs[l - 1][v] >= 0 else 0) for f in upstream + [Fraction(1)]]
                 for v in range(d.widths[l])]
    return [f for fv in feats for f in fv] + [Fraction(1)]


def rank(rows: list[list[Fraction]]) -> int:
    """Exact rank over Q (FLINT)."""
    if not rows or not rows[0]:
        return 0
    M = flint.fmpq_mat(len(rows), len(rows[0]), [flint.fmpq(v.numerator, v.denominator) for r in rows for v in r])
    return int(M.rank())


def rank_gamma(d: Draft) -> int:
    """``R_Gamma = rank Gamma(X, theta)`` at the ``z >= 0`` activation pattern."""
    return rank(gamma_rows(d))


def rank_a(d: Draft) -> int:
    """``R_A = N_L rank alpha(X, theta)`` (Prop. 11)."""
    return d.widths[-1] * rank([_alpha_row(d, x) for x in d.X])


def round_binary(q: Fraction, precision: int = 24, emin: int = -126) -> Fraction:
    """``q`` rounded to the nearest binary floating-point number (ties to even), exactly.

    ``precision=24, emin=-126`` is IEEE binary32 (float32), subnormals included;
    overflow is not handled (generated numbers are small).

    >>> round_binary(Fraction(1, 3))
    Fraction(11184811, 33554432)
    >>> round_binary(Fraction(1, 4))
    Fraction(1, 4)
    """
    if q == 0:
        return ZERO
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if a < Fraction(2) ** e:
        e -= 1
    quantum = Fraction(2) ** (max(e, emin) - (precision - 1))
    m = round(a / quantum)  # Fraction.__round__: half to even
    return (m * quantum) if q > 0 else -(m * quantum)


def round_draft_f32(d: Draft) -> Draft:
    """Every weight, bias and sample coordinate rounded to float32 (what a float32 tool computes with)."""
    r = round_binary
    return Draft(list(d.widths), [[[r(v) for v in row] for row in Wl] for Wl in d.W],
                 [[r(v) for v in bl] for bl in d.b], [[r(v) for v in x] for x in d.X])


def activation_flips_f32(d: Draft) -> list[tuple[int, int, int]]:
    """``(i, l, v)`` whose indicator ``z >= 0`` changes when all numbers are rounded to float32 (exact arithmetic)."""
    r = round_draft_f32(d)
    out = []
    for i, (x, x32) in enumerate(zip(d.X, r.X)):
        zs, zs32 = forward(d.W, d.b, x), forward(r.W, r.b, x32)
        out += [(i, l, v) for l in range(1, d.L) for v in range(d.widths[l])
                if (zs[l - 1][v] >= 0) != (zs32[l - 1][v] >= 0)]
    return out
