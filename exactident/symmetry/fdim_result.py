"""The certified interval of the functional dimension: result, JSON object, terminal view (docs/symmetries.md).

One result for every network :func:`exactident.symmetry.fdim.functional_dimension` reads: a plain
ReLU MLP (target ``dim = #params - #hidden``, ``J`` in all the weights and biases) or a layer graph
(target ``dim_free = n_params - dim S_H``, ``J_free`` in the free parameters; the JSON object adds
``dim_kind: "dim_free"``, ``symmetry_dim``, ``features`` and ``upper_source``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import flint

from exactident.io.rationals import format_fmpq
from exactident.model.network import Network
from exactident.model.symmetry import log_scales

__all__ = ["FdimResult", "GraphFacts", "fdim_fields", "scale_classes_text"]

Box = tuple[Sequence[flint.fmpq], Sequence[flint.fmpq]]

#: Why the upper bound of a layer graph is ``dim_free`` when no complete region cover lowered it.
UPPER_SOURCE = ("dim_free = n_params - dim S_H; no domain prover of dead, blocked or always-active units reads a "
                "layer graph, so no further missing dimension is proved without a complete region cover")
#: The upper bound of a layer graph settled by a complete region cover.
UPPER_SOURCE_COVER = "the rank of J_free on every region of the complete region cover (exact kernel)"


@dataclass
class GraphFacts:
    """What a layer graph's result adds: ``n_params``, ``dim S_H``, its features, the generators of ``H`` in words."""

    n_params: int
    symmetry_dim: int
    features: list[str]
    scale_classes: str = ""


@dataclass
class FdimResult:
    """A certified interval ``[lower, upper]`` for ``fdim(theta)`` (:mod:`exactident.symmetry.fdim`).

    Attributes
    ----------
    lower, upper : int
        ``lower <= fdim <= upper <= dim``, both certified.
    dim : int
        ``dim = #params - #hidden`` for a plain MLP; ``dim_free = n_params - dim S_H`` for a layer graph.
    n_hidden : int
        Hidden neurons (a layer graph: the hidden units of its layers, pooling units included, not the
        compiler's skip carriers).
    mechanisms : list of dict
        ``{"kind", "neurons", "dimensions", "text"}``: the missing dimensions ``dim - upper``,
        attributed in order (each mechanism counts what it adds to the ones before).
    points : list of list of fmpq
        The sample at which ``rank J mod prime = lower`` (a witness).
    lower_random : int or None
        The lower bound from the starting sample and the random points alone, before the region cover
        and the line walk (None when neither ran).
    cover : dict or None
        The region cover, when one was tried: ``regions`` (found), ``complete``, ``reason`` (why not
        complete), ``empty`` (children proved empty), ``lps``, ``seconds``.
    graph : GraphFacts or None
        Set for a layer graph.
    """

    name: str
    widths: list[int]
    dim: int
    n_hidden: int
    lower: int
    upper: int
    box: Box | None
    prime: int
    points: list[list[flint.fmpq]] = field(default_factory=list)
    mechanisms: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    lower_random: int | None = None
    cover: dict[str, Any] | None = None
    graph: GraphFacts | None = None

    @property
    def n_params(self) -> int:
        """``#params``: weights and biases (``dim + #hidden``) of a plain MLP, the free parameters of a layer graph."""
        return self.graph.n_params if self.graph is not None else self.dim + self.n_hidden

    @property
    def symmetry_dim(self) -> int:
        """``dim S_H`` of a layer graph (the rescalings: ``#hidden`` for a plain MLP)."""
        return self.graph.symmetry_dim if self.graph is not None else self.n_hidden

    @property
    def features(self) -> list[str]:
        """What makes a layer graph more than a plain MLP (empty for a plain MLP)."""
        return self.graph.features if self.graph is not None else []

    @property
    def settled(self) -> bool:
        """Bounds equal: ``fdim`` is certified."""
        return self.lower == self.upper

    @property
    def no_hidden_symmetries(self) -> bool:
        """``lower = dim``: certified full functional dimension (a layer graph: none beyond the rescalings ``H``)."""
        return self.lower == self.dim

    def to_dict(self) -> dict[str, Any]:
        """The ``exactident-fdim/1`` JSON object (docs/symmetries.md)."""
        out = fdim_fields(self) | {"mechanisms": self.mechanisms, "lower_random_points": self.lower_random,
                                   "cover": self.cover}
        if self.graph is not None:
            by_cover = self.cover is not None and self.cover["complete"]
            out |= {"dim_kind": "dim_free", "symmetry_dim": self.graph.symmetry_dim, "features": self.graph.features,
                    "upper_source": UPPER_SOURCE_COVER if by_cover else UPPER_SOURCE}
        return out

    def render(self) -> str:
        """The terminal view."""
        dom = "R^n" if self.box is None else "the box"
        g = self.graph
        J = "J" if g is None else "J_free"
        if g is None:
            head = (f"{self.name}: functional dimension in [{self.lower}, {self.upper}] on {dom} "
                    f"(dim = #params - #hidden = {self.n_params} - {self.n_hidden} = {self.dim})")
        else:
            head = (f"{self.name}: functional dimension in [{self.lower}, {self.upper}] on {dom} (layer graph: "
                    f"{', '.join(g.features) or 'constrained'}; dim_free = #params - dim S_H = {g.n_params} - "
                    f"{g.symmetry_dim} = {self.dim})")
        lines = [head]
        if g is not None and g.scale_classes:
            lines.append(f"  rescalings (S_H): {g.scale_classes}")
        if self.no_hidden_symmetries:
            lines.append(f"  no hidden symmetries (certified): rank {J} = {'dim' if g is None else 'dim_free'} at "
                         f"{len(self.points)} points (computed mod the prime {self.prime})")
        else:
            how = f"computed mod the prime {self.prime}" if self.prime else "over Q (exact nullspace)"
            lines.append(f"  lower bound {self.lower}: rank {J} at {len(self.points)} points, {how}")
            if g is not None and not self.mechanisms:
                lines.append(f"  upper bound {self.upper} = dim_free: no further missing dimension proved (no domain "
                             "prover reads a layer graph, and no complete region cover)")
            else:
                lines.append(f"  upper bound {self.upper}: {self.dim - self.upper} missing dimension(s) proved")
            for m in self.mechanisms:
                lines.append(f"    -{m['dimensions']}: {m['text']}")
            if not self.settled:
                lines.append(f"  {self.upper - self.lower} dimension(s) not settled (no proof, no sample found)")
        if self.cover is not None:
            c = self.cover
            lines.append(f"  region cover: {c['regions']} activation regions, " +
                         ("complete (every other sign pattern proved empty: "
                          f"{c['empty']} exact certificates)" if c["complete"] else f"not complete ({c['reason']})"))
        lines.append(f"  time {self.seconds:.1f} s")
        return "\n".join(lines) + "\n"


def fdim_fields(r: FdimResult) -> dict[str, Any]:
    """The fields of ``exactident-fdim/1`` every result has (docs/symmetries.md)."""
    return {"format": "exactident-fdim/1", "name": r.name, "widths": r.widths, "n_params": r.n_params,
            "n_hidden": r.n_hidden, "dim": r.dim, "lower": r.lower, "upper": r.upper,
            "settled": r.settled, "no_hidden_symmetries": r.no_hidden_symmetries,
            "domain": ("R^n" if r.box is None else
                       {"lo": [format_fmpq(a) for a in r.box[0]], "hi": [format_fmpq(b) for b in r.box[1]]}),
            "n_points": len(r.points), "prime": r.prime, "unexplained": r.upper - r.lower,
            "seconds": round(r.seconds, 3)}


def scale_classes_text(cn: Network, limit: int = 4) -> str:
    """The generators of ``H`` in words: per generator the units it rescales, by the framework's names."""
    units, A, _factor = log_scales(cn)
    parts = []
    for g in range(A.ncols()):
        moved = [units[u] for u in range(len(units)) if A[u, g] != 0]
        if moved:
            parts.append("{" + cn.describe_units(moved, limit=3) + "}")
    if not parts:
        return "none (every unit's scale is pinned by a fixed weight or bias)"
    return f"{len(parts)} generator(s): " + "; ".join(parts[:limit]) + (f"; ... ({len(parts)} in all)"
                                                                         if len(parts) > limit else "")
