"""Building blocks shared by the families: searches, sample counts, solving for a point on a kink.

Every search is a bounded loop over independent child streams of the case's
:class:`~exactident.suites.rng.HashRng`, so a case is a function of its
request alone; when the bound is reached the request is refused with
:class:`Unmet` (the CLI says so and exits 2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from exactident.errors import UnsupportedCaseError
from exactident.suites.draft import Draft, n_at, random_draft
from exactident.suites.exact import ZERO, degenerate_neurons, forward, hidden_ties
from exactident.suites.rng import HashRng

__all__ = [
    "ATTEMPTS",
    "Family",
    "Unmet",
    "affine_piece",
    "clean",
    "clean_draft",
    "hidden_neurons",
    "n_above",
    "no_hidden_layer",
    "search",
    "solve_on_kink",
]

#: Draws tried before a request is declared unmeetable.
ATTEMPTS = 400


@dataclass(frozen=True)
class Family:
    """One family of generated cases.

    Attributes
    ----------
    name : str
    summary : str
        What the cases are (one line, for ``generate --list``).
    promise : str
        The property every case of the family has, checked exactly when generating.
    build : callable (rng, widths, index, n_samples or None) -> Draft
        Raises :class:`~exactident.suites.families.common.Unmet` when nothing is found.
    verify : callable Draft -> str or None
        None when the property holds, else what is wrong.
    impossible : callable widths -> str or None
        Why the architecture cannot have the property (None when it can).
    needs : str or None
        An optional module the family imports (``sklearn``).
    """

    name: str
    summary: str
    promise: str
    build: Callable[[HashRng, list[int], int, int | None], Draft]
    verify: Callable[[Draft], str | None]
    impossible: Callable[[list[int]], str | None]
    needs: str | None = None


class Unmet(UnsupportedCaseError):
    """A family cannot produce the requested case (impossible architecture, or nothing found)."""


def hidden_neurons(widths: list[int]) -> list[tuple[int, int]]:
    """``(l, v)`` for every hidden neuron, layer by layer (paper layers ``1..L-1``)."""
    return [(l, v) for l in range(1, len(widths) - 1) for v in range(widths[l])]


def no_hidden_layer(widths: list[int]) -> str | None:
    """Why ``widths`` cannot have the property of a family about hidden neurons (``L = 1``), else None."""
    return "the network has no hidden neuron (L = 1)" if len(widths) < 3 else None


def n_above(widths: list[int]) -> int:
    """A sample size comfortably above ``dim / N_L``."""
    k = n_at(widths)
    return k + max(2, k // 2)


def clean(d: Draft) -> bool:
    """No tie and no neuron in ``S``."""
    return not degenerate_neurons(d) and not hidden_ties(d)


def search(rng: HashRng, what: str, make: Callable[[HashRng], Draft | None], attempts: int = ATTEMPTS) -> Draft:
    """First ``make(child)`` that is not None over ``attempts`` child streams, else :class:`Unmet`."""
    for k in range(attempts):
        d = make(rng.child("attempt", k))
        if d is not None:
            d.params.setdefault("attempts", k + 1)
            return d
    raise Unmet(f"no {what} found in {attempts} draws")


def clean_draft(rng: HashRng, widths: list[int], n: int) -> Draft | None:
    """A random draft (:func:`exactident.suites.draft.random_draft`, ``n`` samples) if it is clean, else None."""
    d = random_draft(rng, widths, n)
    return d if clean(d) else None


def affine_piece(d: Draft, x: list[Fraction], l: int, v: int) -> tuple[list[Fraction], Fraction] | None:
    """``(g, e)`` with ``z_{l,v}(y) = g.y + e`` on the activation region of ``x`` (None if ``x`` is on a
    kink below layer ``l``)."""
    zs = forward(d.W, d.b, x)
    n0 = d.widths[0]
    A = [[Fraction(int(i == j)) for j in range(n0)] for i in range(n0)]  # h_0 = I x + 0
    c = [ZERO] * n0
    for m in range(1, l + 1):
        Wm, bm = d.W[m - 1], d.b[m - 1]
        A2 = [[sum((Wm[i][k] * A[k][j] for k in range(len(A))), ZERO) for j in range(n0)] for i in range(len(Wm))]
        c2 = [sum((Wm[i][k] * c[k] for k in range(len(c))), ZERO) + bm[i] for i in range(len(Wm))]
        if m == l:
            return A2[v], c2[v]
        if any(z == 0 for z in zs[m - 1]):
            return None
        act = [z > 0 for z in zs[m - 1]]
        A = [row if a else [ZERO] * n0 for row, a in zip(A2, act)]
        c = [ci if a else ZERO for ci, a in zip(c2, act)]
    return None


def solve_on_kink(rng: HashRng, d: Draft, i: int, l: int, v: int) -> list[Fraction] | None:
    """A point on the zero set of neuron ``(l, v)``, reached from sample ``i`` along one coordinate.

    Solved exactly on the affine piece of ``x^i``; None when that piece has no
    such point (the caller checks the result by a forward pass anyway).
    """
    piece = affine_piece(d, d.X[i], l, v)
    if piece is None:
        return None
    g, e = piece
    coords = [j for j, gj in enumerate(g) if gj != 0]
    if not coords:
        return None
    j = rng.choice(coords)
    x = list(d.X[i])
    rest = sum((g[k] * x[k] for k in range(len(x)) if k != j), ZERO) + e
    x[j] = -rest / g[j]
    return x if forward(d.W, d.b, x)[l - 1][v] == 0 else None
