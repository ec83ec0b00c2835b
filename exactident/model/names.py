"""Names of a network's units and free parameters, as verdict reasons and reports show them.

:class:`Names` gives :class:`~exactident.model.network.Network` its naming methods: a unit is
``unit_names[l-1][v]`` (e.g. ``conv1[c=2,y=1,x=0]``, a skip carrier ``skip(input[3])``), else
``(l,v)``; a free parameter is ``param_names[j]`` (e.g. ``conv1.weight[2,0,1,1]``, ``W_1[0,1]``
for the plain MLP), else ``theta_j``.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["CARRIER_PREFIX", "Names"]

#: Name prefix of the carrier units that carry a skip connection up (model.compile).
CARRIER_PREFIX = "skip("


class Names:
    """Naming methods over ``widths``, ``unit_names`` and ``param_names`` (of a ``Network``)."""

    widths: tuple[int, ...]
    unit_names: list[list[str]]
    param_names: list[str]

    def is_carrier(self, l: int, v: int) -> bool:
        """Whether unit ``v`` of layer ``l`` is a skip carrier the compiler added (``skip(...)``), not the user's."""
        return 0 < l <= len(self.unit_names) and self.unit_names[l - 1][v].startswith(CARRIER_PREFIX)

    @property
    def layer_widths(self) -> list[int]:
        """``widths`` without the skip carriers: the sizes of the user's layers that reports show.

        The compiled widths carry a skip connection up layer by layer with carrier units
        (:mod:`exactident.model.compile`); those are internal and never shown as widths.

        Examples
        --------
        >>> from exactident.model.network import Network
        >>> Network((1, 2, 1), [[[1], [1]], [[1, 1]]], [[0, 0], [0]]).layer_widths
        [1, 2, 1]
        """
        return [self.widths[0]] + [sum(not self.is_carrier(l, v) for v in range(self.widths[l]))
                                   for l in range(1, len(self.widths))]

    def param_name(self, j: int) -> str:
        """The name of ``theta_j`` in the framework's terms (``param_names``), else ``theta_j``."""
        names = self.param_names
        return names[j] if 0 <= j < len(names) else f"theta_{j}"

    def unit_name(self, l: int, v: int) -> str:
        """The name of unit ``v`` of layer ``l`` (``unit_names``, e.g. ``conv1[c=2,y=1,x=0]``), else ``(l,v)``; ``x[v]``
        for an input coordinate (``l = 0``)."""
        if l == 0:
            return f"x[{v}]"
        names = self.unit_names
        return names[l - 1][v] if 0 < l <= len(names) and 0 <= v < len(names[l - 1]) else f"({l},{v})"

    def describe_units(self, units: Sequence[Sequence[int]], limit: int = 6) -> str:
        """Named units ``(l, v)`` for a reason: at most ``limit`` names, then how many in all."""
        shown = ", ".join(self.unit_name(int(l), int(v)) for l, v in units[:limit])
        return shown + (f", ... ({len(units)} units)" if len(units) > limit else "")

    def describe_params(self, params: Sequence[int], limit: int = 6) -> str:
        """Named free parameters for a reason: at most ``limit`` names, then how many in all."""
        shown = ", ".join(self.param_name(int(j)) for j in params[:limit])
        return shown + (f", ... ({len(params)} parameters)" if len(params) > limit else "")

    def describe_ties(self, ties: Sequence[Sequence[int]], active: Sequence[bool] | None = None,
                      limit: int = 4) -> str:
        """Ties ``(sample i, layer l, unit v)`` as ``x^i@<unit name>`` (with ``active``/``inactive`` when given)."""
        parts = [f"x^{int(i)}@{self.unit_name(int(l), int(v))}"
                 + ("" if active is None else " active" if active[t] else " inactive")
                 for t, (i, l, v) in enumerate(ties[:limit])]
        return ", ".join(parts) + (f", ... ({len(ties)} ties)" if len(ties) > limit else "")
