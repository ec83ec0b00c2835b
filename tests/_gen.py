"""Seeded generators of tiny exact cases for the tests, independent of exactident.

Everything here is plain Python ``Fraction`` arithmetic: the forward pass,
the tie test and the degenerate-set test are re-implemented so the tests do
not check the code against itself.  Cases come back as ``exactident-case/1``
objects (canonical ``"p/q"`` strings) plus the Fractions they spell.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from fractions import Fraction

__all__ = ["TinyCase", "case_obj", "forward", "fstr", "is_degenerate", "is_tie_free", "random_case"]


def fstr(q: Fraction) -> str:
    q = Fraction(q)
    return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"


@dataclass
class TinyCase:
    """``W[l-1][i][j]`` = ``W_l[i, j]``; ``b[l-1][i]`` = ``b_l[i]``; ``X[i][j]``; all Fractions."""

    widths: list[int]
    W: list[list[list[Fraction]]]
    b: list[list[Fraction]]
    X: list[list[Fraction]]
    name: str = "tiny"

    @property
    def L(self) -> int:
        return len(self.widths) - 1

    def obj(self) -> dict:
        return case_obj(self.widths, self.W, self.b, self.X, self.name)


def case_obj(widths, W, b, X, name="tiny") -> dict:
    return {"format": "exactident-case/1", "name": name, "widths": list(widths),
            "weights": [[[fstr(v) for v in row] for row in Wl] for Wl in W],
            "biases": [[fstr(v) for v in bl] for bl in b],
            "sample": [[fstr(v) for v in x] for x in X]}


def forward(W, b, x):
    """Pre-activations ``[z_1, ..., z_L]`` of one sample (lists of Fraction)."""
    h = list(x)
    zs = []
    for _l, (Wl, bl) in enumerate(zip(W, b), start=1):
        z = [sum((Wl[i][j] * h[j] for j in range(len(h))), Fraction(0)) + bl[i] for i in range(len(bl))]
        zs.append(z)
        h = [max(v, Fraction(0)) for v in z]
    return zs


def is_tie_free(W, b, X) -> bool:
    """No hidden pre-activation is exactly zero at any sample."""
    return all(v != 0 for x in X for z in forward(W, b, x)[:-1] for v in z)


def is_degenerate(W, b) -> bool:
    """Some hidden neuron has all outgoing weights zero, or all incoming weights and bias zero."""
    for l in range(1, len(W)):
        for v in range(len(b[l - 1])):
            if all(W[l][k][v] == 0 for k in range(len(W[l]))):
                return True
            if all(w == 0 for w in W[l - 1][v]) and b[l - 1][v] == 0:
                return True
    return False


def _number(rng: random.Random, rational: bool, lo: int = -3, hi: int = 3) -> Fraction:
    if rational:
        return Fraction(rng.randint(lo * 2, hi * 2), rng.choice([1, 2, 3, 4]))
    return Fraction(rng.randint(lo, hi))


def random_case(widths, seed: int, n: int, rational: bool = False, allow_ties: bool = False,
                allow_degenerate: bool = False, nonzero_weights: bool = False) -> TinyCase:
    """A seeded random tiny case, tie-free and non-degenerate unless allowed.

    Redraws (deterministically, from the same seed) until the conditions hold.
    """
    rng = random.Random(seed)
    for _ in range(10_000):
        W = []
        for l in range(1, len(widths)):
            Wl = []
            for _i in range(widths[l]):
                row = []
                for _j in range(widths[l - 1]):
                    v = _number(rng, rational)
                    while nonzero_weights and v == 0:
                        v = _number(rng, rational)
                    row.append(v)
                Wl.append(row)
            W.append(Wl)
        b = [[_number(rng, rational) for _ in range(widths[l])] for l in range(1, len(widths))]
        X = [[_number(rng, rational, -4, 4) for _ in range(widths[0])] for _ in range(n)]
        if not allow_degenerate and is_degenerate(W, b):
            continue
        if not allow_ties and not is_tie_free(W, b, X):
            continue
        return TinyCase(list(widths), W, b, X, name=f"rand-{'-'.join(map(str, widths))}-s{seed}")
    raise RuntimeError("could not draw a case")
