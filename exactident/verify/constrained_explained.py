"""Verify the explain fields of a constrained network's report: ``kernel_basis``, ``parameters``, ``units``,
``channels`` (docs/explain.md, "Constrained networks").

Nothing is trusted; from the compiled network and the sample, with the verifier's own facts
(:mod:`exactident.verify.constrained_facts`):

- the gauge (the ``parameters`` of class ``gauge``) has ``dim S_H`` parameters whose rows of the
  verifier's own basis of ``S_H`` are independent (exact over Q), so ``S_H`` meets the chart in 0;
- each ``kernel_basis`` block: its directions (integers) are zero on the gauge, in ``ker Gamma_free(s)``
  (``Gamma_free(s) delta = 0`` exactly, forward mode, for the block's tie resolution ``s``) and
  independent (exact rank); its ``rank_gamma`` is proved from both sides: a rank mod p at least
  that large (a lower bound), and ``k - dim S_H - (number of directions)`` equal to it (the
  directions and ``S_H`` span independent parts of the kernel, an upper bound), which also makes the
  block a complete basis of the kernel in the chart; ``line: true`` is re-checked by the verifier's
  polynomial forward pass in ``t`` (:func:`~exactident.verify.constrained_facts.line_is_constant`) along
  ``delta`` and ``-delta``;
- each ``parameters`` entry's class against its witness: ``identifiable`` needs the identifiable
  verdict (itself verified); ``not-identifiable`` a verified certificate part of its ``by`` whose
  direction (``-e_j`` for a dead-unit line, ``+e_j`` for a slope line, the listed ``delta`` otherwise),
  taken into the chart by subtracting its part in ``S_H``, moves the parameter;
  ``first-order-determined`` complete blocks for every tie resolution, none moving it;
  ``undetermined`` a verified direction (its ``witness``) moving it;
- each ``units`` and ``channels`` entry recomputed: sign counts, kind, slope, dead, silent, constant,
  the local ranks (sympy over QQ, :func:`~exactident.verify.arith.rank_qq`), the channel's parameters
  and the counts of their classes.

Called by :mod:`exactident.verify.constrained`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import flint
import numpy as np

from exactident.verify.arith import rank_qq
from exactident.verify.constrained_facts import ConstrainedFacts, directional_derivative, line_is_constant

__all__ = ["verify_constrained_explained"]

_INT = re.compile(r"-?[0-9]+", re.ASCII)
_CHANNEL = re.compile(r"^(.*)\[c=(\d+)[,\]]")


def _names(facts: ConstrainedFacts) -> list[str]:
    cn = facts.cn
    return list(cn.param_names) if cn.param_names else [f"theta_{j}" for j in range(cn.n_params)]


def _gauge_ok(facts: ConstrainedFacts, gauge: list[int]) -> bool:
    sym = facts.symmetry
    if len(gauge) != sym.symmetry_dim:
        return False
    if not gauge:
        return True
    rows = flint.fmpq_mat(len(gauge), sym.symmetry_dim, [sym.basis[j, c] for j in gauge
                                                         for c in range(sym.symmetry_dim)])
    return rows.rank() == len(gauge)


class _Block:
    def __init__(self, sides: tuple[bool, ...], vectors: list[list[flint.fmpq]], lines: list[bool],
                 complete: bool) -> None:
        self.sides, self.vectors, self.lines, self.complete = sides, vectors, lines, complete


def _blocks(facts: ConstrainedFacts, blocks: list[dict[str, Any]], gauge: list[int] | None, persistent: set,
            rank_at: Callable[[tuple[bool, ...], int], int], fails: list[str]) -> list[_Block]:
    cn, k = facts.cn, facts.cn.n_params
    index = {name: j for j, name in enumerate(_names(facts))}
    zero = flint.fmpq(0)
    out = []
    for b, blk in enumerate(blocks):
        where = f"kernel_basis[{b}]"
        active = blk["active"]
        if (active is None) != (not facts.ties) or (active is not None and len(active) != len(facts.ties)):
            fails.append(f"{where}.active: expected {'null' if not facts.ties else f'{len(facts.ties)} sides'}")
            out.append(_Block((), [], [], False))
            continue
        sides = tuple(True if t in persistent else bool(a) for t, a in zip(facts.ties, active or []))
        pattern = facts.resolution(sides) if facts.ties else None
        vectors, lines, ok = [], [], True
        for d, direction in enumerate(blk["directions"]):
            vec = [zero] * k
            for name, value in direction["delta"].items():
                if name not in index or not isinstance(value, str) or not _INT.fullmatch(value) or int(value) == 0:
                    fails.append(f"{where}.directions[{d}].delta[{name!r}]: not a parameter with a nonzero integer")
                    ok = False
                    break
                vec[index[name]] = flint.fmpq(int(value))
            if not ok:
                break
            if gauge is not None and any(vec[j] != zero for j in gauge):
                fails.append(f"{where}.directions[{d}]: moves a gauge parameter")
                ok = False
            elif any(v != zero for v in directional_derivative(cn, facts.X, vec, pattern)):
                fails.append(f"{where}.directions[{d}]: Gamma_free(s) delta != 0 (not a kernel vector)")
                ok = False
            line = bool(direction.get("line"))
            if ok and line and not (line_is_constant(cn, facts.X, vec)[0]
                                    and line_is_constant(cn, facts.X, [-v for v in vec])[0]):
                fails.append(f"{where}.directions[{d}].line: the outputs on X move along theta + t delta")
                ok = False
            vectors.append(vec)
            lines.append(line)
        if ok and vectors and flint.fmpq_mat(vectors).rank() != len(vectors):
            fails.append(f"{where}.directions: not independent")
            ok = False
        rank = blk["rank_gamma"]
        if ok and (gauge is None or k - facts.symmetry.symmetry_dim - len(vectors) != rank
                   or rank_at(sides, rank) < rank):
            fails.append(f"{where}.rank_gamma: {rank} is not proved (a rank mod p at least {rank}, and "
                         f"k - dim S_H - {len(vectors)} directions = {k - facts.symmetry.symmetry_dim - len(vectors)})")
            ok = False
        out.append(_Block(sides, vectors if ok else [], lines if ok else [], ok))
    return out


def _chart(delta: list[flint.fmpq], facts: ConstrainedFacts, gauge: list[int]) -> list[flint.fmpq]:
    """``delta - sigma``, ``sigma`` in ``S_H`` with ``sigma_F = delta_F`` (the gauge has been checked)."""
    sym = facts.symmetry
    m = sym.symmetry_dim
    if not m:
        return delta
    B_F = flint.fmpq_mat(m, m, [sym.basis[j, c] for j in gauge for c in range(m)])
    c = B_F.solve(flint.fmpq_mat(m, 1, [delta[j] for j in gauge]))
    return [delta[j] - sum((sym.basis[j, a] * c[a, 0] for a in range(m)), flint.fmpq(0)) for j in range(len(delta))]


def _moved_by_certificate(facts: ConstrainedFacts, cert: dict[str, Any], key: str, gauge: list[int]) -> set[int]:
    part = cert.get(key)
    if not isinstance(part, dict):
        return set()
    k = facts.cn.n_params
    delta = [flint.fmpq(0)] * k
    single = key in ("dead_units", "slope_lines")  # one parameter moved: lowered (dead unit), raised (slope)
    if single and 0 <= int(part["parameter"]) < k:
        delta[int(part["parameter"])] = flint.fmpq(-1 if key == "dead_units" else 1)
    for j, v in part.get("delta", []) if not single else []:
        if 0 <= j < k:
            num, _, den = str(v).partition("/")
            delta[j] = flint.fmpq(int(num), int(den or 1))
    return {j for j, v in enumerate(_chart(delta, facts, gauge)) if v != 0}


def _parameters(facts: ConstrainedFacts, report: dict[str, Any], blocks: list[_Block], gauge: list[int],
                verified_parts: dict[str, bool], everyone: list[tuple[bool, ...]], fails: list[str]) -> None:
    names = _names(facts)
    entries = report["parameters"]
    if [(e["index"], e["name"]) for e in entries] != list(enumerate(names)):
        fails.append("parameters: not one entry per free parameter in theta order with its name")
        return
    covered = {b.sides for b in blocks if b.complete}
    cert = report.get("certificate") or {}
    for j, e in enumerate(entries):
        where, cls = f"parameters[{j}]", e["class"]
        moved_any = any(b.vectors[d][j] != 0 for b in blocks for d in range(len(b.vectors)))
        if cls == "identifiable" and report.get("verdict") != "identifiable":
            fails.append(f"{where}: identifiable needs the identifiable verdict")
        elif cls == "not-identifiable":
            key = str(e.get("by", "")).replace("-", "_")
            if not verified_parts.get(key) or j not in _moved_by_certificate(facts, cert, key, gauge):
                fails.append(f"{where}: not-identifiable needs a verified certificate part {key!r} moving it")
        elif cls == "first-order-determined" and (moved_any or not everyone or not set(everyone) <= covered):
            fails.append(f"{where}: first-order-determined needs complete kernel blocks of every tie resolution, "
                         "none moving it")
        elif cls == "undetermined":
            w = e.get("witness")
            ok = isinstance(w, list) and len(w) == 2 and 0 <= w[0] < len(blocks) \
                and 0 <= w[1] < len(blocks[w[0]].vectors) and blocks[w[0]].vectors[w[1]][j] != 0
            if ok and e.get("line") and not blocks[w[0]].lines[w[1]]:
                ok = False
            if not ok:
                fails.append(f"{where}: undetermined needs a verified kernel direction (its witness) moving it")


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


def _units(facts: ConstrainedFacts, report: dict[str, Any], fails: list[str]) -> dict[tuple[int, int], Any]:
    cn = facts.cn
    names = _names(facts)
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
                same = bool(_INT.fullmatch(num)) and (not den or (den.isdigit() and int(den) > 0)) \
                    and flint.fmpq(int(num), int(den or 1)) == value
            else:
                same = type(got) is type(value) and got == value
            if not same:
                fails.append(f"units[{u}].{key}: the case gives {value!s}, the report claims {got!r}")
    return rows_of


def _channels(facts: ConstrainedFacts, report: dict[str, Any], rows_of: dict[tuple[int, int], Any],
              fails: list[str]) -> None:
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
    names = _names(facts)
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


def verify_constrained_explained(facts: ConstrainedFacts, report: dict[str, Any], *, persistent: set,
                                 everyone: list[tuple[bool, ...]], rank_at: Callable[[tuple[bool, ...], int], int],
                                 verified_parts: dict[str, bool]) -> tuple[list[str], list[str]]:
    """``(failures, messages)`` for the explain fields of a constrained report (module docstring).

    Parameters
    ----------
    facts : ConstrainedFacts
        The verifier's own facts on the case.
    report : dict
        The report, already validated by the schema.
    persistent : set of (sample, layer, unit)
        The persistent ties (their side changes nothing; taken active).
    everyone : list of tuple of bool
        Every tie resolution (persistent ties active); empty past the verifier's cap.
    rank_at : callable (sides, target) -> int
        The verifier's largest rank mod p of ``Gamma_free(s)`` over its primes.
    verified_parts : dict str -> bool
        The certificate parts verified (``dead_units``, ``constant_units``, ``slope_lines``, ``line``,
        ``submersion``, ``entering_submersion``).
    """
    fails: list[str] = []
    shown = [k for k in ("parameters", "units", "channels", "kernel_basis") if k in report]
    if not shown:
        return [], []
    gauge = None
    if "parameters" in report:
        gauge = [j for j, e in enumerate(report["parameters"]) if e.get("class") == "gauge"]
        if not _gauge_ok(facts, gauge):
            fails.append(f"parameters: the gauge ({len(gauge)} parameters) does not meet S_H (dim "
                         f"{facts.symmetry.symmetry_dim}) in a basis of its rows")
            gauge = None
    blocks = _blocks(facts, report.get("kernel_basis", []), gauge, persistent, rank_at, fails)
    if "parameters" in report and gauge is not None:
        _parameters(facts, report, blocks, gauge, verified_parts, everyone, fails)
    rows_of = _units(facts, report, fails) if "units" in report else {}
    if "channels" in report:
        if "units" not in report or "parameters" not in report:
            fails.append("channels: checked against units and parameters, which the report lacks")
        elif not any(f.startswith("units") for f in fails):
            _channels(facts, report, rows_of, fails)
    msgs = [] if fails else [f"explain fields valid: {', '.join(shown)} recomputed from the case"
                             + (f" ({sum(len(b.vectors) for b in blocks)} kernel directions checked exactly)"
                                if blocks else "")]
    return fails, msgs
