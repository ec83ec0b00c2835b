"""A generated network and sample in plain ``Fraction`` arithmetic, before it becomes a case file.

Generators (:mod:`exactident.suites.families`) build a :class:`Draft`, the exact
checks of :mod:`exactident.suites.exact` test its promised property, and
:func:`draft_to_case_obj` turns it into an ``exactident-case/1`` object with
canonical ``"p/q"`` strings.  ``W[l-1][i][j]`` is ``W_l[i, j]`` (shape
``(N_l, N_{l-1})``), ``b[l-1][i]`` is ``b_l[i]``, ``X[i][j]`` is ``x^i_j``; all in Q.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from exactident.suites.rng import HashRng

__all__ = ["Draft", "draft_to_case_obj", "fstr", "n_at", "network_dim", "random_draft"]

#: Number domains of generated cases: small numerators over small denominators.
WEIGHT_NUM, WEIGHT_DENS = 6, (1, 2, 3, 4)
BIAS_NUM, BIAS_DENS = 6, (1, 2, 3, 4)
SAMPLE_NUM, SAMPLE_DENS = 12, (1, 2, 3, 4, 5)


def fstr(q: Fraction | int) -> str:
    """Canonical ``"p/q"`` (``"p"`` for integers), as case files are written.

    >>> fstr(Fraction(-6, 4)), fstr(3)
    ('-3/2', '3')
    """
    q = Fraction(q)
    return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"


def network_dim(widths: list[int]) -> int:
    """``dim = N_0 N_1 + ... + N_{L-1} N_L + N_L``.

    >>> network_dim([2, 3, 1])
    10
    """
    return sum(widths[l] * widths[l + 1] for l in range(len(widths) - 1)) + widths[-1]


def n_at(widths: list[int]) -> int:
    """Smallest ``n`` with ``n N_L >= dim``: the fewest samples for which ``C_S`` can hold.

    >>> n_at([2, 3, 1]), n_at([2, 2, 2])
    (10, 5)
    """
    return -(-network_dim(widths) // widths[-1])


@dataclass
class Draft:
    """A candidate case: network, sample, and what the generator says about it.

    ``params`` go into the case's ``generator`` block (JSON-ready values);
    ``aux`` holds whatever the property check needs (a base network, a kink
    point) and is not written.  ``graph``, when set, is a layer graph
    (``{"input_shape", "layers", "output"}`` of an ``exactident-case/2`` file, numbers as
    ``"p/q"`` strings): the case is written in format 2 and ``W``, ``b`` are empty.
    """

    widths: list[int]
    W: list[list[list[Fraction]]]
    b: list[list[Fraction]]
    X: list[list[Fraction]]
    params: dict[str, Any] = field(default_factory=dict)
    aux: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    graph: dict[str, Any] | None = None

    @property
    def L(self) -> int:
        return len(self.widths) - 1

    def copy(self) -> Draft:
        return Draft(list(self.widths), [[list(r) for r in Wl] for Wl in self.W], [list(bl) for bl in self.b],
                     [list(x) for x in self.X], dict(self.params), dict(self.aux), self.description,
                     None if self.graph is None else dict(self.graph))


def random_draft(rng: HashRng, widths: list[int], n: int) -> Draft:
    """Nonzero small-denominator weights, small-denominator biases and samples (may have ties)."""
    L = len(widths) - 1
    W = [[[rng.rational(-WEIGHT_NUM, WEIGHT_NUM, WEIGHT_DENS, nonzero=True) for _ in range(widths[l])]
          for _ in range(widths[l + 1])] for l in range(L)]
    b = [[rng.rational(-BIAS_NUM, BIAS_NUM, BIAS_DENS) for _ in range(widths[l + 1])] for l in range(L)]
    X = [[rng.rational(-SAMPLE_NUM, SAMPLE_NUM, SAMPLE_DENS) for _ in range(widths[0])] for _ in range(n)]
    return Draft(list(widths), W, b, X)


def draft_to_case_obj(draft: Draft, name: str) -> dict[str, Any]:
    """The ``exactident-case/1`` object (no ``expected`` yet); ``exactident-case/2`` for a draft with a ``graph``."""
    if draft.graph is not None:
        obj2: dict[str, Any] = {"format": "exactident-case/2", "name": name}
        if draft.description:
            obj2["description"] = draft.description
        obj2.update({"input_shape": list(draft.graph["input_shape"]), "layers": draft.graph["layers"],
                     "output": draft.graph["output"], "sample": [[fstr(v) for v in x] for x in draft.X]})
        return obj2
    obj: dict[str, Any] = {"format": "exactident-case/1", "name": name}
    if draft.description:
        obj["description"] = draft.description
    obj["widths"] = list(draft.widths)
    obj["weights"] = [[[fstr(v) for v in row] for row in Wl] for Wl in draft.W]
    obj["biases"] = [[fstr(v) for v in bl] for bl in draft.b]
    obj["sample"] = [[fstr(v) for v in x] for x in draft.X]
    return obj
