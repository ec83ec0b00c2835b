"""Ground truth for other tools' tests: hypothesis strategies with known exact answers, and a rank assertion.

A library that computes the rank of a ReLU network's Jacobian (``rank Gamma``
of Bona-Pellissier, Malgouyres and Bachoc, NeurIPS 2022, arXiv:2206.07424) in
floating point can test itself against exact answers:

- :func:`~exactident.testing.strategies.known_cases` draws a
  :class:`~exactident.testing.strategies.KnownCase`: a network and sample built
  by a family of ``exactident generate`` (docs/suites.md; each family's property
  is checked exactly when the case is built), the exact ranks of ``Gamma`` and
  ``A``, ``dim``, the verdict and, on an activation boundary, every tie
  resolution's ranks; the case as exact rationals and as float64/float32 arrays.
  Family, widths, seed and sample size are drawn by hypothesis from small
  ranges, so a failing example shrinks to a small network and few samples.
- :func:`~exactident.testing.agree.assert_rank_agrees` fails with an
  explanation: the exact rank, the nearest kink to the sample and the
  certified band of tolerances that give the exact rank.
- ``pytest -p exactident.testing.plugin`` (opt-in) offers the cases of a suite
  folder as the parametrised fixture ``exactident_suite_case``.

``import exactident`` does not load this package, and this package loads
hypothesis only when a strategy is used (names load on first use, PEP 562).
docs/testing.md has worked examples.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from exactident import _lazy_name
from exactident.testing.families import DEFAULT_FAMILIES, FLOAT_TRAP_FAMILIES

if TYPE_CHECKING:  # the names below load on first use (PEP 562 ``__getattr__``): hypothesis only when drawn
    from exactident.testing.agree import acceptable_ranks, assert_rank_agrees
    from exactident.testing.strategies import KnownCase, TieResolution, known_case, known_cases

__all__ = ["DEFAULT_FAMILIES", "FLOAT_TRAP_FAMILIES", "KnownCase", "TieResolution", "acceptable_ranks",
           "assert_rank_agrees", "known_case", "known_cases"]

_LAZY = {"assert_rank_agrees": "exactident.testing.agree", "acceptable_ranks": "exactident.testing.agree",
         "KnownCase": "exactident.testing.strategies",
         "TieResolution": "exactident.testing.strategies", "known_case": "exactident.testing.strategies",
         "known_cases": "exactident.testing.strategies"}


def __getattr__(name: str) -> Any:
    return _lazy_name(globals(), _LAZY, __name__, name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
