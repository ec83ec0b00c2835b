"""Hypothesis strategies drawing networks and samples whose exact answers are known.

A case comes from one family of ``exactident generate``
(:mod:`exactident.suites.families`): the family builds it and checks its
property exactly (no tie, a dead neuron, twin neurons, a sample exactly on a
kink, ...), then :func:`exactident.check` with exact ranks gives the report
(:func:`exactident.suites.generate.generate_case`).  Nothing here builds a
network any other way.  hypothesis draws only the *request* (family, widths,
seed, case index, sample size) from small ranges, so shrinking a failing
example moves it toward the first family, narrow layers and few samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from exactident.io.case import Case
from exactident.suites.families import get_family
from exactident.suites.families.common import Unmet
from exactident.suites.generate import Request, generate_case
from exactident.testing.families import DEFAULT_FAMILIES, FLOAT_TRAP_FAMILIES, FREE_SAMPLE_SIZE

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["DEFAULT_FAMILIES", "FLOAT_TRAP_FAMILIES", "FREE_SAMPLE_SIZE", "KnownCase", "TieResolution", "known_case",
           "known_cases"]

@dataclass(frozen=True)
class TieResolution:
    """One resolution of the ties of a boundary case (paper §6: a sample on a kink).

    Attributes
    ----------
    ties : tuple of (sample, layer, neuron, active)
        Each tied hidden pre-activation (``z = 0`` exactly) and the side it is resolved to
        (``active`` True: the neuron counts as active, as with ``relu'(0) = 1``).
    rank_gamma, rank_a : int
        Exact ranks of ``Gamma`` and ``A`` with this activation pattern.
    reachable : bool or None
        Whether parameters arbitrarily near ``theta`` realise the pattern (None: not decided).
    """

    ties: tuple[tuple[int, int, int, bool], ...]
    rank_gamma: int
    rank_a: int
    reachable: bool | None

    @property
    def all_inactive(self) -> bool:
        """Every tie resolved inactive: the pattern of ``relu'(0) = 0`` (PyTorch, JAX, TensorFlow autodiff)."""
        return not any(t[3] for t in self.ties)

    @property
    def all_active(self) -> bool:
        """Every tie resolved active: the pattern of ``relu'(0) = 1``."""
        return all(t[3] for t in self.ties)


@dataclass(frozen=True)
class KnownCase:
    """A generated network and sample with its exact answers.

    Attributes
    ----------
    case : Case
        The network and sample in Q (FLINT ``fmpq``), with ``expected`` (the exact report fields)
        and ``generator`` (family, widths, seed, index, the family's promise).
    family : str
    widths : tuple of int
        ``N_0, ..., N_L``.
    dim : int
        ``N_0 N_1 + ... + N_{L-1} N_L + N_L``: the parameter count minus one per hidden neuron.
    rank_gamma, rank_a : int
        Exact ranks of ``Gamma`` and ``A`` (on a boundary case, at the resolution of smallest ``rank_gamma``).
    verdict : str
        ``identifiable``, ``not-identifiable``, ``inconclusive`` or ``degenerate``.
    degenerate : bool
        A hidden neuron is in ``S`` (all outgoing weights zero, or all incoming weights and bias zero).
    on_boundary : bool
        Some hidden pre-activation is exactly 0 on the sample.
    resolutions : tuple of TieResolution
        Every tie resolution with its ranks (empty when ``on_boundary`` is False).
    """

    case: Case
    family: str
    widths: tuple[int, ...]
    dim: int
    rank_gamma: int
    rank_a: int
    verdict: str
    degenerate: bool
    on_boundary: bool
    resolutions: tuple[TieResolution, ...]

    @property
    def expected(self) -> dict[str, Any]:
        """The exact report fields (the case's ``expected`` block)."""
        return dict(self.case.expected or {})

    @property
    def n_samples(self) -> int:
        return len(self.case.X)

    @property
    def n_parameters(self) -> int:
        """Every weight and bias: ``dim`` plus one per hidden neuron (the rescalings)."""
        return self.dim + sum(self.widths[1:-1])

    def arrays(self, dtype: Any = np.float64) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
        """``(W, b, X)`` rounded once to the nearest float of ``dtype`` (float64 or float32).

        ``W[l-1]`` has shape ``(N_l, N_{l-1})``, ``b[l-1]`` shape ``(N_l,)``, ``X`` shape ``(n, N_0)``.
        The exact answers are those of the rational case: rounding may move a sample across a kink
        or change a rank (the ``near-kink``, ``rescaled`` and ``float32-trap`` families are built so
        that it can); :func:`~exactident.testing.agree.assert_rank_agrees` says when that is the cause.
        """
        from exactident.numeric.float_network import to_float_network, to_float_sample

        net = self.case.network
        fnet = to_float_network(net, dtype)
        return list(fnet.W), list(fnet.b), to_float_sample(self.case.X, net.widths[0], dtype)

    def __repr__(self) -> str:
        return (f"KnownCase({self.case.name}: widths {list(self.widths)}, n = {self.n_samples}, dim = {self.dim}, "
                f"rank_gamma = {self.rank_gamma}, rank_a = {self.rank_a}, {self.verdict}"
                f"{', on a boundary' if self.on_boundary else ''})")


def _from_case(case: Case, family: str) -> KnownCase:
    e = case.expected or {}
    resolutions = tuple(
        TieResolution(tuple((t["sample"], t["layer"], t["neuron"], bool(t["active"])) for t in p["ties"]),
                      p["rank_gamma"], p["rank_a"], p.get("reachable"))
        for p in e.get("patterns") or ())
    return KnownCase(case, family, tuple(case.network.widths), e["dim"], e["rank_gamma"], e["rank_a"], e["verdict"],
                     bool(e.get("degenerate")), bool(e["on_boundary"]), resolutions)


@lru_cache(maxsize=512)  # hypothesis replays requests while shrinking; a case is a function of its request
def _generate(req: Request) -> KnownCase:
    return _from_case(generate_case(req), req.family)


def known_case(family: str, widths: tuple[int, ...] | list[int], seed: int = 0, index: int = 0,
               n_samples: int | None = None) -> KnownCase:
    """One generated case, without hypothesis (the same case ``exactident generate`` writes for this request).

    Parameters
    ----------
    family : str
        A family name (``exactident generate --list``).
    widths : sequence of int
        ``N_0, ..., N_L``.
    seed, index : int
        The case's random stream is keyed by family, widths, seed, index and ``n_samples``.
    n_samples : int, optional
        None lets the family choose.

    Raises
    ------
    UnsupportedCaseError
        Unknown family, or the family cannot build this request (the message says why).
    """
    fam = get_family(family)
    why = fam.impossible(list(widths))
    if why:
        raise Unmet(f"family {family!r} cannot produce widths {list(widths)}: {why}")
    return _generate(Request(family, tuple(widths), seed, index, n_samples))


def known_cases(families: tuple[str, ...] | list[str] = DEFAULT_FAMILIES, *, max_inputs: int = 3, max_width: int = 3,
                max_hidden_layers: int = 2, max_outputs: int = 2, max_samples: int = 12, max_seed: int = 20
                ) -> SearchStrategy[KnownCase]:
    """A hypothesis strategy of :class:`KnownCase`.

    Draws a family of ``families`` (shrinking toward the first), ``N_0`` in ``[1, max_inputs]``,
    1 to ``max_hidden_layers`` hidden layers of widths in ``[1, max_width]``, ``N_L`` in
    ``[1, max_outputs]``, a seed in ``[0, max_seed]``, a case index in ``[0, 11]`` (families cycle
    their variants with it) and, for the families that accept any, a sample size in
    ``[1, max_samples]`` or the family's own (shrinking toward the family's own, which grows with
    ``dim``).  Requests the family cannot meet (an impossible architecture, or nothing found by its
    bounded search) are rejected.  Building a case takes milliseconds to about a second (a
    ``boundary`` tie in a deep layer); cases are cached per request.

    Raises
    ------
    ImportError
        hypothesis is not installed (``pip install 'exactident[testing]'``).
    UnsupportedCaseError
        An unknown family name.
    """
    from hypothesis import strategies as st

    names = tuple(families)
    for name in names:
        get_family(name)

    @st.composite
    def draw(data: Any) -> KnownCase:
        family = data(st.sampled_from(names))
        widths = (data(st.integers(1, max_inputs)),
                  *data(st.lists(st.integers(1, max_width), min_size=1, max_size=max_hidden_layers)),
                  data(st.integers(1, max_outputs)))
        if get_family(family).impossible(list(widths)):
            from hypothesis import reject

            reject()
        seed, index = data(st.integers(0, max_seed)), data(st.integers(0, 11))
        n = data(st.none() | st.integers(1, max_samples))  # drawn for every family: shrinking may switch family
        n = n if family in FREE_SAMPLE_SIZE else None
        try:
            return _generate(Request(family, widths, seed, index, n))
        except Unmet:
            from hypothesis import reject

            reject()

    return draw()
