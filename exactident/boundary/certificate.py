"""Build certificates (docs/boundary.md): each is checked exactly before it is written.

- ``entering`` (:func:`build_entering_certificate`): a kernel direction entering a
  tie resolution's piece strictly, with a ``nonequivalence`` witness when one is found;
- ``boundary`` (:class:`BoundaryPartBuilder`): the visible and invisible ties and the
  rank certificate of every tie resolution (with a reachability witness where proved);
- ``degenerate`` (:func:`build_degenerate_part`): the hidden neuron putting theta in ``S``.

Called by :mod:`exactident.boundary.analyse` and :mod:`exactident.check`; verified
independently by :mod:`exactident.verify` (entering, boundary, claims).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flint

from exactident.boundary.entering import is_strictly_entering
from exactident.boundary.nonequivalence import find_witness
from exactident.errors import InvariantViolation
from exactident.io.rationals import format_fmpq
from exactident.model.activation import Tie
from exactident.model.fixed_edges import FixedEdges, free_parameters
from exactident.model.network import Network

__all__ = ["BoundaryPartBuilder", "build_degenerate_part", "build_entering_certificate", "direction_of",
           "tie_entry"]


_ZERO = flint.fmpq(0)


def build_entering_certificate(net: Network, fixed: FixedEdges, ties: Sequence[Tie], invisible: Sequence[Tie],
                               active: Sequence[bool], delta: Sequence[flint.fmpq], gamma: flint.fmpq_mat,
                               g_rows: Sequence[Sequence[flint.fmpq]], rank_gamma: int,
                               rank_a: int | None) -> dict[str, Any]:
    """Check a found direction exactly and package it as ``{"entering": {...}}``.

    Parameters
    ----------
    net, fixed
        The network and its fixed edges (``tau``'s coordinates).
    ties, active
        The visible ties and their sides in resolution ``s``.
    invisible : list of Tie
        Ties whose side does not change ``alpha`` (left unconstrained).
    delta : list of fmpq, length ``dim``
    gamma : fmpq_mat ``(n N_L, dim)``
        ``Gamma(s)``.
    g_rows : list of list of fmpq
        ``g_t(s)`` per tie.
    rank_gamma, rank_a : int

    Raises
    ------
    InvariantViolation
        If ``Gamma(s) delta != 0``, a sign is not strict, or the ranks do not
        satisfy ``R_Gamma == R_A < dim`` (a bug in the caller).
    """
    dim = net.dim
    col = flint.fmpq_mat(dim, 1, list(delta))
    if any(v != _ZERO for v in (gamma * col).entries()):
        raise InvariantViolation("certificate delta is not in ker Gamma(s)")
    values = [sum((g * d for g, d in zip(row, delta)), _ZERO) for row in g_rows]
    if any((v <= _ZERO) if a else (v >= _ZERO) for v, a in zip(values, active)):
        raise InvariantViolation("certificate delta does not enter the piece strictly")
    if not (rank_a is not None and rank_gamma == rank_a < dim):
        raise InvariantViolation("certificate requested for a resolution where C_N holds")
    names = [p.name for p in free_parameters(net, fixed)]
    res = [tie_entry(t, a) for t, a in zip(ties, active)]
    part: dict[str, Any] = {
        "resolution": res,
        "invisible_ties": [tie_entry(t) for t in invisible],
        "parameters": names,
        "delta": {name: format_fmpq(d) for name, d in zip(names, delta)},
        "derivatives": [dict(r, value=format_fmpq(v)) for r, v in zip(res, values)],
        "rank_gamma": rank_gamma, "rank_a": rank_a, "dim": dim,
    }
    witness = find_witness(net, *direction_of(net, fixed, delta), first_order=True)
    if witness is not None:
        part["nonequivalence"] = witness
    return {"entering": part}


def tie_entry(tie: Tie, active: bool | None = None) -> dict[str, Any]:
    """A tie as a certificate entry ``{"sample", "layer", "neuron"[, "active"]}``."""
    out: dict[str, Any] = {"sample": tie.i, "layer": tie.l, "neuron": tie.v}
    if active is not None:
        out["active"] = bool(active)
    return out


def direction_of(net: Network, fixed: FixedEdges, delta: Sequence[flint.fmpq]
                 ) -> tuple[list[flint.fmpq_mat], list[list[flint.fmpq]]]:
    """``(dW, db)`` over all weights and biases from ``delta`` over ``tau`` (fixed edges get 0)."""
    dW = [flint.fmpq_mat(net.widths[l], net.widths[l - 1]) for l in range(1, net.L + 1)]
    db = [[_ZERO] * net.widths[l] for l in range(1, net.L + 1)]
    for p, d in zip(free_parameters(net, fixed), delta):
        if p.j is not None:
            dW[p.l - 1][p.i, p.j] = d
        else:
            db[p.l - 1][p.i] = d
    return dW, db


def build_degenerate_part(net: Network) -> dict[str, Any] | None:
    """``{"layer", "neuron", "why"}`` for the first hidden neuron putting theta in ``S`` (None if none)."""
    from exactident.model.network import degenerate_neurons

    dead = degenerate_neurons(net)
    if not dead:
        return None
    l, v, why = dead[0]
    return {"layer": l, "neuron": v, "why": why}


def _blocking_layer(net: Network, Z: Sequence[flint.fmpq_mat], tie: Tie) -> int:
    for m in range(tie.l + 1, net.L):
        if all(z < _ZERO for z in Z[m - 1].table()[tie.i]):
            return m
    raise InvariantViolation(f"tie {tie} is not invisible: no later hidden layer is all strictly inactive")


class BoundaryPartBuilder:
    """Collects the ``boundary`` part while :func:`exactident.boundary.analyse.analyse_boundary` enumerates.

    Parameters
    ----------
    net, fixed
        The network and its fixed edges (``tau``'s coordinates).
    Z : list of fmpq_mat
        Pre-activations (to name the layer blocking each invisible tie).
    ties, invisible : list of Tie
        The visible ties (the order of every ``active`` list) and the invisible ones.

    Notes
    -----
    The resolutions added are exactly those enumerated: one side per class of ties at
    equal sample points (docs/boundary.md, "Presentation invariance"), ``2^k`` for ``k``
    classes.  Reachability witnesses and rank certificates are over the case's own
    parameters and fixed edges ``fixed``.

    Examples
    --------
    >>> from exactident.model.activation import activation_state
    >>> from exactident.model.fixed_edges import fixed_edges
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])],
    ...               [[flint.fmpq(1)], [flint.fmpq(0)]])
    >>> st = activation_state(net, [[flint.fmpq(-1, 2)]])
    >>> b = BoundaryPartBuilder(net, fixed_edges(net), st.Z, st.ties, [])
    >>> b.part(enumerated=False)
    {'ties': [{'sample': 0, 'layer': 1, 'neuron': 0}], 'invisible_ties': []}
    """

    def __init__(self, net: Network, fixed: FixedEdges, Z: Sequence[flint.fmpq_mat], ties: Sequence[Tie],
                 invisible: Sequence[Tie]) -> None:
        self.net, self.fixed, self.ties = net, fixed, list(ties)
        self.names = [p.name for p in free_parameters(net, fixed)]
        self.invisible = [dict(tie_entry(t), blocked_by=_blocking_layer(net, Z, t)) for t in invisible]
        self.resolutions: list[dict[str, Any]] = []
        self.fixed_entries: list | None = None

    def witness(self, signed_rows: Sequence[Sequence[flint.fmpq]],
                candidates: Sequence[Sequence[flint.fmpq] | None]) -> list[flint.fmpq] | None:
        """The first candidate ``delta`` (over tau) entering every tie strictly, exactly checked."""
        for c in candidates:
            if c is not None and is_strictly_entering(signed_rows, c):
                return list(c)
        return None

    def add(self, active: Sequence[bool], rank_certificate: dict[str, Any],
            witness: Sequence[flint.fmpq] | None) -> None:
        """Record one resolution: its rank certificate (from ``certify_ranks``) and reachability witness."""
        cert = dict(rank_certificate)
        fixed_entries = cert.pop("fixed_edges")
        if self.fixed_entries is None:
            self.fixed_entries = fixed_entries
        elif fixed_entries != self.fixed_entries:
            raise InvariantViolation("the resolutions' rank certificates use different fixed edges")
        entry: dict[str, Any] = {"active": [bool(a) for a in active], **cert}
        if witness is not None:
            entry["reachable"] = {"delta": {n: format_fmpq(d) for n, d in zip(self.names, witness) if d != _ZERO}}
        self.resolutions.append(entry)

    def part(self, enumerated: bool = True) -> dict[str, Any]:
        """The ``boundary`` part (``resolutions`` only when every resolution was enumerated)."""
        out: dict[str, Any] = {"ties": [tie_entry(t) for t in self.ties], "invisible_ties": self.invisible}
        if enumerated:
            out["fixed_edges"] = self.fixed_entries if self.fixed_entries is not None else []
            out["resolutions"] = self.resolutions
        return out
