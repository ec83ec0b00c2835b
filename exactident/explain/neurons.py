"""Per hidden neuron: the data it sees, and why its parameters are under-determined (report field ``neurons``).

The facts come from :mod:`exactident.model.diagnostics` (exact signs, ratios and
ranks of the pre-activations on the sample); the link to ``C_S`` comes from the
exact kernel of ``Gamma`` (:mod:`exactident.explain.kernel`): a neuron is
*under-determined* when some kernel direction moves one of its incoming weights
or its bias.  Neurons of one layer moved by the same kernel direction are
*coupled* (read off the kernel directions that move one layer only, which are
exact straight lines of equal outputs); for each coupled pair the counts of samples where both, or only one,
are strictly active say how little the data separate them.

The same facts for a layer graph (:func:`unit_entries`, :func:`channel_entries`): its hidden units
are neurons with a slope, tied parameters and channels, and the link to the kernel goes through the
free parameters (the hyperplane rank becomes the rank of ``d z_v / d theta`` over the parameters
entering ``z_v``).  Twins and couplings are read off the plain MLP's kernel only.  The layer graph's
report fields are ``units`` and ``channels`` (docs/explain.md, "Constrained networks"):

Per unit ``(l, v)`` (named by ``unit_names``, e.g. ``conv1[c=0,x=3]``): its kind (``relu``, ``leaky``,
``prelu``, ``linear``), the samples where ``z > 0`` (active), ``z = 0`` (tie) and ``z < 0`` (the slope
side: inactive for ReLU, ``a z`` for leaky ReLU and PReLU), and

- ``dead``: a ReLU unit (slope fixed 0) with ``z < 0`` at every sample.  A leaky or PReLU unit on its slope
  side at every sample is *not* dead: it passes ``a z`` on, so its incoming parameters reach the outputs;
- ``silent``: its output is 0 at every sample; ``constant``: the same ``z`` at every sample;
- ``local_rank`` of the matrix ``d z_v(x^i) / d theta_j`` over the samples where the unit's derivative is
  nonzero (``z > 0``, or ``z < 0`` with a nonzero slope) and the parameters ``j`` that enter ``z_v``
  directly (its weights, summed over tied entries, and its bias), against ``local_full`` (their number).
  When it is short, that unit alone does not pin its parameters (``pinned: false``); tying can still pin
  them: a channel stacks the rows of all its positions.

Per channel (units named ``name[c=K,...]`` of a layer with kinked units or parameters): its positions,
the sums of their counts, its dead positions, the parameters that enter only its units (its tied kernel,
bias and PReLU slope) with the count of each class, and the channel's ``local_rank`` over all positions
against ``local_full``, beside the best single position's.  All exact (Q, FLINT ranks).

Called by :mod:`exactident.explain.core`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import flint
import numpy as np

from exactident.io.rationals import format_fmpq
from exactident.linalg import exact
from exactident.model.activation import ActivationState
from exactident.model.diagnostics import hyperplane_rank, neuron_activity, proportional_twins
from exactident.model.fixed_edges import Parameter
from exactident.model.gamma_free import FreeState
from exactident.model.network import Network

__all__ = ["channel_entries", "coactivity", "neuron_entries", "neuron_reason", "unit_entries"]

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


_CHANNEL = re.compile(r"^(.*)\[c=(\d+)[,\]]")


def _kind(cn: Network, l: int, v: int) -> str:
    a, j = cn.negative_slope[l - 1][v], int(cn.slope_index[l - 1][v])
    if j >= 0:
        return "prelu"
    return "relu" if a == 0 else "linear" if a == 1 else "leaky"


def _hidden(cn: Network, X: Sequence[Sequence[flint.fmpq]], state: FreeState) -> list[list[list]]:
    """``h_0 = X``, ``h_l`` (hidden values with each unit's slope), as row lists."""
    out = [[list(row) for row in X]]
    for l in range(1, cn.L):
        a = cn.negative_slope[l - 1]
        out.append([[z if z >= 0 else a[v] * z for v, z in enumerate(row)] for row in state.Z[l - 1].table()])
    return out


def _local_rows(cn: Network, H: list[list[list]], state: FreeState, l: int, v: int
                ) -> tuple[list[int], list[list[flint.fmpq]]]:
    """The direct parameters of unit ``(l, v)``, and the rows ``d z_v(x^i) / d theta`` where its derivative is not 0."""
    I, bI = cn.W_index[l - 1][v], int(cn.b_index[l - 1][v])
    params = sorted({int(j) for j in I[I >= 0]} | ({bI} if bI >= 0 else set()))
    col = {j: c for c, j in enumerate(params)}
    a = cn.negative_slope[l - 1][v]
    rows = []
    zero = flint.fmpq(0)
    for i, zrow in enumerate(state.Z[l - 1].table()):
        z = zrow[v]
        if z == zero or (z < zero and a == zero):
            continue
        row = [zero] * len(params)
        for k in np.flatnonzero(I >= 0):
            row[col[int(I[k])]] += H[l - 1][i][int(k)]
        if bI >= 0:
            row[col[bI]] += 1
        rows.append(row)
    return params, rows


def _rank(rows: list[list[flint.fmpq]], n_cols: int) -> int:
    return exact.rank(flint.fmpq_mat(rows)) if rows and n_cols else 0


def unit_entries(cn: Network, X: Sequence[Sequence[flint.fmpq]], state: FreeState) -> list[dict[str, Any]]:
    """One entry per hidden unit (module docstring; docs/cli.md, field ``units``).

    Returns
    -------
    list of dict
        ``{layer, unit, name, kind, slope, slope_parameter, n_active, n_tie, n_slope_side, dead, silent, constant,
        local_rank, local_full, pinned}``.

    Examples
    --------
    A ReLU unit below zero at both samples is dead; with slope 1/10 it is not.

    >>> from exactident.model.gamma_free import free_state
    >>> from exactident.model.network import Network
    >>> cn = Network((1, 1, 1), [flint.fmpq_mat([[1]]), flint.fmpq_mat([[2]])], [[-5], [0]])
    >>> X = [[flint.fmpq(0)], [flint.fmpq(1)]]
    >>> e = unit_entries(cn, X, free_state(cn, X))[0]; (e["kind"], e["dead"], e["local_rank"], e["local_full"])
    ('relu', True, 0, 2)
    >>> cn.negative_slope[0][0] = flint.fmpq(1, 10)
    >>> e = unit_entries(cn, X, free_state(cn, X))[0]; (e["kind"], e["dead"], e["local_rank"], e["local_full"])
    ('leaky', False, 2, 2)
    """
    H = _hidden(cn, X, state)
    names = cn.param_names
    zero = flint.fmpq(0)
    out = []
    for l in range(1, cn.L):
        table = state.Z[l - 1].table()
        for v in range(cn.widths[l]):
            col = [row[v] for row in table]
            kind = _kind(cn, l, v)
            a, j = cn.negative_slope[l - 1][v], int(cn.slope_index[l - 1][v])
            params, rows = _local_rows(cn, H, state, l, v)
            r = _rank(rows, len(params))
            neg = sum(1 for z in col if z < zero)
            out.append({
                "layer": l, "unit": v,
                "name": cn.unit_names[l - 1][v] if cn.unit_names else f"({l},{v})",
                "kind": kind, "slope": format_fmpq(a),
                "slope_parameter": (names[j] if names else f"theta_{j}") if j >= 0 else None,
                "n_active": sum(1 for z in col if z > zero), "n_tie": sum(1 for z in col if z == zero),
                "n_slope_side": neg,
                "dead": kind == "relu" and neg == len(col),
                "silent": all(z == zero or (z < zero and a == zero) for z in col),
                "constant": bool(col) and all(z == col[0] for z in col),
                "local_rank": r, "local_full": len(params), "pinned": r == len(params),
            })
    return out


def _parameter_units(cn: Network) -> list[set[tuple[int, int]]]:
    """Per parameter: the hidden or output units ``(l, i)`` whose weights, bias or slope it is."""
    out: list[set[tuple[int, int]]] = [set() for _ in range(cn.n_params)]
    for l in range(1, cn.L + 1):
        for i, _k in zip(*np.nonzero(cn.W_index[l - 1] >= 0)):
            out[int(cn.W_index[l - 1][i, _k])].add((l, int(i)))
        for i in np.flatnonzero(cn.b_index[l - 1] >= 0):
            out[int(cn.b_index[l - 1][i])].add((l, int(i)))
        if l < cn.L:
            for v in np.flatnonzero(cn.slope_index[l - 1] >= 0):
                out[int(cn.slope_index[l - 1][v])].add((l, int(v)))
    return out


def channel_entries(cn: Network, X: Sequence[Sequence[flint.fmpq]], state: FreeState,
                    units: Sequence[dict[str, Any]], parameters: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per channel of a layer with kinked units or parameters (module docstring; field ``channels``).

    Parameters
    ----------
    cn, X, state
        As for :func:`unit_entries`.
    units : from :func:`unit_entries`
    parameters : the report field ``parameters`` (:func:`exactident.explain.parameters.classify_free`), in theta order

    Returns
    -------
    list of dict
        ``{name, layer, channel, n_units, n_active, n_tie, n_slope_side, n_dead, all_dead, parameters,
        classes, local_rank, local_full, best_position_rank, pinned}``.
    """
    groups: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for u in units:
        m = _CHANNEL.match(u["name"])
        if m is not None:
            groups.setdefault((u["layer"], m[1], int(m[2])), []).append(u)
    if not groups:
        return []
    owner: dict[tuple[int, int], tuple[int, str, int]] = {(u["layer"], u["unit"]): key
                                                           for key, us in groups.items() for u in us}
    members: dict[tuple[int, str, int], list[int]] = {}
    for j, where in enumerate(_parameter_units(cn)):
        keys = {owner.get(u) for u in where}
        if len(keys) == 1 and None not in keys:
            members.setdefault(keys.pop(), []).append(j)  # type: ignore[arg-type]
    rows_of = {(u["layer"], u["unit"]): u for u in units}
    H = _hidden(cn, X, state)
    out = []
    for key, us in groups.items():
        l, name, c = key
        params = members.get(key, [])
        if not params and all(u["kind"] == "linear" for u in us):
            continue  # a pooling or carrier channel: nothing of its own to determine
        classes: dict[str, int] = {}
        for j in params:
            classes[parameters[j]["class"]] = classes.get(parameters[j]["class"], 0) + 1
        local_rank, local_full, best = _channel_rank(cn, H, state, us, rows_of)
        out.append({"name": f"{name}[c={c}]", "layer": l, "channel": c, "n_units": len(us),
                    "n_active": sum(u["n_active"] for u in us), "n_tie": sum(u["n_tie"] for u in us),
                    "n_slope_side": sum(u["n_slope_side"] for u in us),
                    "n_dead": sum(u["dead"] for u in us), "all_dead": all(u["dead"] for u in us),
                    "parameters": [parameters[j]["name"] for j in params], "classes": classes,
                    "local_rank": local_rank, "local_full": local_full, "best_position_rank": best,
                    "pinned": local_rank == local_full})
    return out


def _channel_rank(cn: Network, H: list[list[list]], state: FreeState, us: Sequence[dict[str, Any]],
                  rows_of: dict[tuple[int, int], dict[str, Any]]) -> tuple[int, int, int]:
    """The channel's local rank (rows of every position stacked), its width, and the best single position's rank."""
    cols: dict[int, int] = {}
    stacked: list[list[flint.fmpq]] = []
    per = []
    for u in us:
        params, rows = _local_rows(cn, H, state, u["layer"], u["unit"])
        for j in params:
            cols.setdefault(j, len(cols))
        per.append((params, rows))
    zero = flint.fmpq(0)
    for params, rows in per:
        for row in rows:
            full = [zero] * len(cols)
            for c, j in enumerate(params):
                full[cols[j]] = row[c]
            stacked.append(full)
    best = max((rows_of[(u["layer"], u["unit"])]["local_rank"] for u in us), default=0)
    return _rank(stacked, len(cols)), len(cols), best
