"""Build an ``entering`` certificate (docs/boundary.md): checked exactly before it is written.

Called by :mod:`exactident.boundary.analyse`; verified independently by
:mod:`exactident.verify.entering`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flint

from exactident.errors import InvariantViolation
from exactident.io.rationals import format_fmpq
from exactident.model.activation import Tie
from exactident.model.fixed_edges import FixedEdges, free_parameters
from exactident.model.network import Network

__all__ = ["build_entering_certificate"]


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
    res = [{"sample": t.i, "layer": t.l, "neuron": t.v, "active": bool(a)} for t, a in zip(ties, active)]
    return {"entering": {
        "resolution": res,
        "invisible_ties": [{"sample": t.i, "layer": t.l, "neuron": t.v} for t in invisible],
        "parameters": names,
        "delta": {name: format_fmpq(d) for name, d in zip(names, delta)},
        "derivatives": [dict(r, value=format_fmpq(v)) for r, v in zip(res, values)],
        "rank_gamma": rank_gamma, "rank_a": rank_a, "dim": dim,
    }}
