"""Verify the ``units`` and ``channels`` fields of a layer graph's report (docs/explain.md, "Constrained networks").

Each entry is recomputed from the case with the verifier's own facts
(:class:`~exactident.verify.facts.ConstrainedFacts`): sign counts, kind, slope, dead, silent,
constant, the local ranks (sympy over QQ, :func:`~exactident.verify.arith.rank_qq`), the channel's
parameters and the counts of their classes.  The plain MLP's ``neurons`` are checked by
:mod:`exactident.verify.neurons_check`.
"""

from __future__ import annotations

import itertools
import re
from fractions import Fraction
from typing import Any

import flint
import numpy as np

from exactident.verify.arith import rank_qq
from exactident.verify.facts import ConstrainedFacts

__all__ = ["INTEGER", "check_channels", "check_units", "free_parameter_names"]

#: An integer, as a report's JSON string writes it.
INTEGER = re.compile(r"-?[0-9]+", re.ASCII)
_CHANNEL = re.compile(r"^(.*)\[c=(\d+)[,\]]")


def free_parameter_names(facts: ConstrainedFacts) -> list[str]:
    """The names of the free parameters, in theta order (``theta_j`` when the case names none)."""
    cn = facts.cn
    return list(cn.param_names) if cn.param_names else [f"theta_{j}" for j in range(cn.n_params)]


def _unit_rows(facts: ConstrainedFacts, hidden: list[list[list[Fraction]]], l: int, v: int
               ) -> tuple[list[int], list[list[Fraction]]]:
    cn = facts.cn
    I, bI = cn.W_index[l - 1][v], int(cn.b_index[l - 1][v])
    params = sorted({int(j) for j in I if j >= 0} | ({bI} if bI >= 0 else set()))
    a = cn.negative_slope[l - 1][v]
    Z = facts.forward[l - 1][0].tolist()
    rows = []
    for i in range(len(facts.X)):
        z = Z[i][v]
        if z == 0 or (z < 0 and a == 0):
            continue
        row = {j: Fraction(0) for j in params}
        for kk in range(cn.widths[l - 1]):
            if I[kk] >= 0:
                row[int(I[kk])] += hidden[l - 1][i][kk]
        if bI >= 0:
            row[bI] += 1
        rows.append([row[j] for j in params])
    return params, rows


def check_units(facts: ConstrainedFacts, report: dict[str, Any], fails: list[str]) -> dict[tuple[int, int], Any]:
    """Append to ``fails`` every ``units`` entry that is not what the case gives; return each unit's parameters
    and local rows (for :func:`check_channels`)."""
    cn = facts.cn
    names = free_parameter_names(facts)
    hidden = [[[Fraction(int(x.p), int(x.q)) for x in row] for row in facts.X]]
    expected, rows_of = [], {}
    for l in range(1, cn.L):
        Z, S = facts.forward[l - 1]
        a = cn.negative_slope[l - 1]
        table = Z.tolist()
        hidden.append([[Fraction(int(z), S) * (1 if z >= 0 else Fraction(int(a[v].p), int(a[v].q)))
                        for v, z in enumerate(row)] for row in table])
        for v in range(cn.widths[l]):
            col = [row[v] for row in table]
            j = int(cn.slope_index[l - 1][v])
            kind = "prelu" if j >= 0 else "relu" if a[v] == 0 else "linear" if a[v] == 1 else "leaky"
            params, rows = _unit_rows(facts, hidden, l, v)
            rows_of[(l, v)] = (params, rows)
            r = rank_qq(rows, len(params)) if rows and params else 0
            neg = sum(1 for z in col if z < 0)
            expected.append({
                "layer": l, "unit": v, "name": cn.unit_names[l - 1][v] if cn.unit_names else f"({l},{v})",
                "kind": kind, "slope": a[v], "slope_parameter": names[j] if j >= 0 else None,
                "n_active": sum(1 for z in col if z > 0), "n_tie": sum(1 for z in col if z == 0), "n_slope_side": neg,
                "dead": kind == "relu" and neg == len(col), "silent": all(z == 0 or (z < 0 and a[v] == 0) for z in col),
                "constant": bool(col) and all(z == col[0] for z in col), "local_rank": r, "local_full": len(params),
                "pinned": r == len(params)})
    claimed = report["units"]
    if len(claimed) != len(expected):
        fails.append(f"units: {len(claimed)} entries for {len(expected)} hidden units")
        return rows_of
    for u, (c, e) in enumerate(zip(claimed, expected)):
        for key, value in e.items():
            got = c.get(key)
            if key == "slope":
                num, _, den = str(got).partition("/")
                same = bool(INTEGER.fullmatch(num)) and (not den or (den.isdigit() and int(den) > 0)) \
                    and flint.fmpq(int(num), int(den or 1)) == value
            else:
                same = type(got) is type(value) and got == value
            if not same:
                fails.append(f"units[{u}].{key}: the case gives {value!s}, the report claims {got!r}")
    return rows_of


def check_channels(facts: ConstrainedFacts, report: dict[str, Any], rows_of: dict[tuple[int, int], Any],
              fails: list[str]) -> None:
    """Append to ``fails`` the first ``channels`` entry that is not what the units (checked) and the case give."""
    cn, units = facts.cn, report["units"]
    groups: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for u in units:
        m = _CHANNEL.match(str(u.get("name")))
        if m is not None:
            groups.setdefault((u["layer"], m[1], int(m[2])), []).append(u)
    owner = {(u["layer"], u["unit"]): key for key, us in groups.items() for u in us}
    touches: list[set] = [set() for _ in range(cn.n_params)]
    for l in range(1, cn.L + 1):
        for I in (cn.W_index[l - 1], cn.b_index[l - 1]) + ((cn.slope_index[l - 1],) if l < cn.L else ()):
            for idx, j in np.ndenumerate(I):
                if j >= 0:
                    touches[int(j)].add((l, int(idx[0])))
    members: dict[Any, list[int]] = {}
    for j, where in enumerate(touches):
        keys = {owner.get(u) for u in where}
        if len(keys) == 1 and None not in keys:
            members.setdefault(keys.pop(), []).append(j)
    classes = [e["class"] for e in report.get("parameters", [])]
    names = free_parameter_names(facts)
    expected = []
    for key, us in groups.items():
        params = members.get(key, [])
        if not params and all(u["kind"] == "linear" for u in us):
            continue
        cols: dict[int, int] = {}
        for u in us:
            for j in rows_of[(u["layer"], u["unit"])][0]:
                cols.setdefault(j, len(cols))
        stacked = []
        for u in us:
            ps, rows = rows_of[(u["layer"], u["unit"])]
            for row in rows:
                full = [Fraction(0)] * len(cols)
                for c, j in enumerate(ps):
                    full[cols[j]] = row[c]
                stacked.append(full)
        r = rank_qq(stacked, len(cols)) if stacked and cols else 0
        count: dict[str, int] = {}
        for j in params:
            if j < len(classes):
                count[classes[j]] = count.get(classes[j], 0) + 1
        expected.append({"name": f"{key[1]}[c={key[2]}]", "layer": key[0], "channel": key[2], "n_units": len(us),
                         "n_active": sum(u["n_active"] for u in us), "n_tie": sum(u["n_tie"] for u in us),
                         "n_slope_side": sum(u["n_slope_side"] for u in us), "n_dead": sum(u["dead"] for u in us),
                         "all_dead": all(u["dead"] for u in us), "parameters": [names[j] for j in params],
                         "classes": count, "local_rank": r, "local_full": len(cols),
                         "best_position_rank": max((u["local_rank"] for u in us), default=0),
                         "pinned": r == len(cols)})
    if report["channels"] != expected:
        bad = next((c for c, (x, y) in enumerate(itertools.zip_longest(report["channels"], expected)) if x != y), 0)
        fails.append(f"channels[{bad}]: the case gives {expected[bad] if bad < len(expected) else None}, the report "
                     f"claims {report['channels'][bad] if bad < len(report['channels']) else None}")
