"""Per hidden neuron: the data it sees, and why its parameters are under-determined (report field ``neurons``).

The facts come from :mod:`exactident.model.diagnostics` (exact signs, ratios and
ranks of the pre-activations on the sample); the link to ``C_S`` comes from the
exact kernel of ``Gamma`` (:mod:`exactident.explain.kernel`): a neuron is
*under-determined* when some kernel direction moves one of its incoming weights
or its bias.  Neurons of one layer moved by the same kernel direction are
*coupled* (read off the kernel directions that move one layer only, which are
exact straight lines of equal outputs); for each coupled pair the counts of samples where both, or only one,
are strictly active say how little the data separate them.

Called by :mod:`exactident.explain.core`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flint

from exactident.io.rationals import format_fmpq
from exactident.model.activation import ActivationState
from exactident.model.diagnostics import hyperplane_rank, neuron_activity, proportional_twins
from exactident.model.fixed_edges import Parameter

__all__ = ["coactivity", "neuron_entries", "neuron_reason"]

_ZERO = flint.fmpq(0)


def coactivity(state: ActivationState, l: int, u: int, v: int) -> tuple[int, int, int]:
    """``(both, only u, only v)``: samples where hidden neurons ``(l, u)`` and ``(l, v)`` are strictly active.

    Examples
    --------
    >>> from exactident.model.activation import activation_state
    >>> from exactident.model.network import Network
    >>> net = Network((1, 2, 1), [[[1], [1]], [[1, 1]]], [[0, -2], [0]])
    >>> coactivity(activation_state(net, [[1], [3], [-1]]), 1, 0, 1)
    (1, 1, 0)
    """
    Z = state.Z[l - 1]
    both = only_u = only_v = 0
    for i in range(Z.nrows()):
        a, b = Z[i, u] > _ZERO, Z[i, v] > _ZERO
        both += a and b
        only_u += a and not b
        only_v += b and not a
    return both, only_u, only_v


def _incoming(params: Sequence[Parameter], basis: Sequence[Sequence[int]], L: int) -> list[dict[tuple[int, int], int]]:
    """Per one-layer direction: hidden neuron ``(l, v)`` -> number of its incoming parameters it moves."""
    out = []
    for vec in basis:
        if len({params[j].l for j, x in enumerate(vec) if x}) != 1:
            continue  # coupling is read off one-layer directions only
        moved: dict[tuple[int, int], int] = {}
        for j, x in enumerate(vec):
            if x and params[j].l < L:
                key = (params[j].l, params[j].i)
                moved[key] = moved.get(key, 0) + 1
        out.append(moved)
    return out


def neuron_entries(state: ActivationState, X: Sequence[Sequence[flint.fmpq]], widths: Sequence[int],
                   params: Sequence[Parameter],
                   bases: Sequence[Sequence[Sequence[int]]] | None) -> list[dict[str, Any]]:
    """One entry per hidden neuron (docs/cli.md, field ``neurons``).

    Parameters
    ----------
    state : ActivationState
        Exact pre-activations on the sample.
    X : n rows of N_0 fmpq
    widths : list of int
    params : list of Parameter
        The coordinates of ``tau`` (:func:`exactident.model.fixed_edges.free_parameters`).
    bases : list of kernel bases, or None
        Exact kernel bases of ``Gamma`` (one per tie resolution on the boundary); None when the
        kernel was not computed (``under_determined`` and ``coupled`` are then left out).

    Returns
    -------
    list of dict
        ``{layer, neuron, n_active, n_tie, n_inactive, hyperplane_rank, hyperplane_full, pinned,
        dead, always_active, twins, [under_determined, n_moved, coupled], why}``.

    Examples
    --------
    ``relu(x)`` seen only at ``x = 1`` (and ``-1``): one active sample cannot pin a line.

    >>> from exactident.model.activation import activation_state
    >>> from exactident.model.network import Network
    >>> from exactident.model.fixed_edges import fixed_edges, free_parameters
    >>> net = Network((1, 1, 1), [[[1]], [[1]]], [[0], [0]])
    >>> X = [[flint.fmpq(1)], [flint.fmpq(-1)]]
    >>> params = free_parameters(net, fixed_edges(net))
    >>> e = neuron_entries(activation_state(net, X), X, net.widths, params, [[[1, -1, 0]]])[0]
    >>> e["n_active"], e["hyperplane_rank"], e["hyperplane_full"], e["under_determined"], e["why"]
    (1, 1, 2, True, 'active at 1 of 2 samples, where [h_0, 1] has rank 1 < 2: 1 direction(s) of its hyperplane unseen')
    """
    L = len(widths) - 1
    twins: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for l, u, v, c in proportional_twins(state):
        twins.setdefault((l, u), []).append({"neuron": v, "ratio": format_fmpq(c)})
        twins.setdefault((l, v), []).append({"neuron": u, "ratio": format_fmpq(1 / c)})
    moved_count: dict[tuple[int, int], int] = {}
    partners: dict[tuple[int, int], set[int]] = {}
    local: set[tuple[int, int]] = set()  # moved by some one-layer direction
    if bases is not None:
        moved = {j for basis in bases for vec in basis for j, x in enumerate(vec) if x}
        for j in moved:
            if params[j].l < L:
                key = (params[j].l, params[j].i)
                moved_count[key] = moved_count.get(key, 0) + 1
        for basis in bases:
            for touched in _incoming(params, basis, L):
                local.update(touched)
                for l, v in touched:
                    partners.setdefault((l, v), set()).update(u for (m, u) in touched if m == l and u != v)
    out = []
    for act in neuron_activity(state):
        l, v = act.l, act.v
        r, full = hyperplane_rank(state, X, l, v)
        e: dict[str, Any] = {
            "layer": l, "neuron": v, "n_active": act.n_active, "n_tie": act.n_tie, "n_inactive": act.n_inactive,
            "hyperplane_rank": r, "hyperplane_full": full, "pinned": r == full,
            "dead": act.is_dead, "always_active": act.is_always_active,
            "twins": sorted(twins.get((l, v), []), key=lambda t: t["neuron"]),
        }
        if bases is not None:
            e["under_determined"] = (l, v) in moved_count
            e["n_moved"] = moved_count.get((l, v), 0)
            e["coupled"] = [dict(zip(("neuron", "both", "only_this", "only_other"),
                                     (u, *coactivity(state, l, v, u))))
                            for u in sorted(partners.get((l, v), ()))]
        e["why"] = neuron_reason(e, len(X))
        if e.get("under_determined") and (l, v) not in local:
            e["why"] += ("; its parameters move only together with other layers' (a kernel direction across "
                         "layers)")
        out.append(e)
    return out


def neuron_reason(e: dict[str, Any], n: int) -> str:
    """One readable line: what the data show of this neuron (from an entry of :func:`neuron_entries`)."""
    l = e["layer"]
    parts = []
    if e["dead"]:
        parts.append(f"dead on the sample (inactive at all {n} samples): its incoming parameters never reach "
                     "the outputs")
    elif e["always_active"]:
        parts.append("active at every sample (affine on the data)")
    else:
        ties = f" (+{e['n_tie']} at its kink)" if e["n_tie"] else ""
        parts.append(f"active at {e['n_active']} of {n} samples{ties}")
    if not e["dead"] and not e["pinned"]:
        gap = e["hyperplane_full"] - e["hyperplane_rank"]
        parts[-1] += (f", where [h_{l - 1}, 1] has rank {e['hyperplane_rank']} < {e['hyperplane_full']}: "
                      f"{gap} direction(s) of its hyperplane unseen")
    for t in e["twins"]:
        parts.append(f"proportional to ({l},{t['neuron']}) on the data (h = {t['ratio']} h_{t['neuron']})")
    for c in e.get("coupled", []):
        parts.append(f"moves with ({l},{c['neuron']}) in the kernel (both active at {c['both']} samples, "
                     f"apart at {c['only_this']} + {c['only_other']})")
    return "; ".join(parts)
