"""Verify a ``structural`` part: the mechanism a line certificate names, re-derived from the case.

A structural certificate is a ``line`` part (checked by :mod:`exactident.verify.line`:
constant outputs on ``X`` along ``theta + eps delta`` and a non-equivalence witness)
plus a ``structural`` part ``{"mechanism", "neurons", ["input"], ["ratio"], "t0"}``
that says *why* the line keeps ``f(X)`` (docs/theory.md, "Structural certificates").
Each claimed fact is recomputed here with the verifier's own Fraction forward pass
(:class:`exactident.verify.facts.CaseFacts`), and the line's ``delta`` must have the
mechanism's shape:

``dead-neuron``
    the neuron is strictly inactive on every sample (at least one); ``delta`` moves only
    its incoming weights and bias;
``unpinned-hyperplane``
    ``delta`` moves only the neuron's incoming weights and bias, and
    ``[h_{l-1}(x^i), 1] . d = 0`` on every sample where ``z_l(x^i)_v >= 0``;
``untouched-input``
    input ``j`` is 0 on every sample; ``delta`` moves only ``W_1[v, j]`` of the named neurons;
``proportional-neurons``
    no tie at either neuron, the same nonempty strict activation set, ``z_u = c z_v`` there
    (``c = ratio > 0``); ``delta`` moves only columns ``u`` and ``v`` of ``W_{l+1}``, with
    ``dW[:, v] = -c dW[:, u]``;
``always-active-block``
    both neurons strictly active on every sample; ``delta`` is exactly
    ``(E W_l, E b_l, -W_{l+1} E)`` with ``E = e_i e_j^T``.

``t0`` must equal the exact supremum of the ``t > 0`` for which every sign the mechanism
relies on holds (``null``: no bound); only the two row mechanisms have a bound.

The same mechanisms on a layer graph (:class:`~exactident.verify.facts.ConstrainedFacts`) are the
units a ``dead_units``, ``constant_units`` or ``slope_lines`` line names
(:func:`check_units_output`: every unit listed outputs one value on every sample;
:func:`check_slope_units`: every unit listed carries the PReLU slope moved and is ``>= 0``
on every sample), recomputed with the verifier's own integer forward pass; the line itself is
checked by :func:`exactident.verify.line.check_line_part`.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from math import lcm
from typing import Any

import flint

from exactident.verify.arith import BadField, ParamKey, need, parse_fraction, parse_parameter, show, unknown_fields
from exactident.verify.facts import CaseFacts, ConstrainedFacts

__all__ = ["MECHANISMS", "check_slope_units", "check_units_output", "line_delta", "verify_structural"]

#: The mechanisms a ``structural`` certificate part may name (docs/boundary.md).
MECHANISMS = ("dead-neuron", "untouched-input", "proportional-neurons", "always-active-block",
              "unpinned-hyperplane")
_KEYS = {"dead-neuron": ("mechanism", "neurons", "t0"), "unpinned-hyperplane": ("mechanism", "neurons", "t0"),
         "untouched-input": ("mechanism", "input", "neurons", "t0"),
         "proportional-neurons": ("mechanism", "neurons", "ratio", "t0"),
         "always-active-block": ("mechanism", "neurons", "t0")}
_COUNT = {"dead-neuron": 1, "unpinned-hyperplane": 1, "proportional-neurons": 2, "always-active-block": 2}


def line_delta(line: dict, widths: list[int]) -> dict[ParamKey, Fraction]:
    """The nonzero entries of a line part's ``delta``.

    The names were already checked by :func:`~exactident.verify.line.verify_line`.
    """
    out = {}
    for name, v in need(line, "delta", dict, "certificate.line").items():
        key = parse_parameter(name, widths, f"certificate.line.delta[{name!r}]")
        value = parse_fraction(v, f"certificate.line.delta[{name!r}]")
        if key is not None and value != 0:
            out[key] = value
    return out


def _neurons(part: dict, facts: CaseFacts, where: str) -> list[tuple[int, int]]:
    raw = need(part, "neurons", list, where)
    out = []
    for k, item in enumerate(raw):
        if not (isinstance(item, list) and len(item) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) for x in item)):
            raise BadField(f"{where}.neurons[{k}]", f"expected [layer, neuron] of ints, found {item!r}"[:200])
        out.append((item[0], item[1]))
    return out


def _row(l: int, v: int, facts: CaseFacts) -> set[ParamKey]:
    return {("W", l, v, c) for c in range(facts.widths[l - 1])} | {("b", l, v, None)}


def _row_facts(facts: CaseFacts, l: int, v: int, delta: dict, dead: bool,
               where: str) -> tuple[list[str], Fraction | None]:
    """Problems with a move of ``(l, v)``'s incoming row, and the exact ``t0`` it allows.

    In integers on the verifier's own forward pass (``z_l = Z_l / S_l``, ``h_{l-1} = relu(Z_{l-1}) / S_{l-1}``)
    and ``delta`` over one denominator ``D``: the rate ``s = num / (D S_{l-1})`` per sample, no ``Fraction`` but
    the values a message or ``t0`` shows.
    """
    fails = []
    Zl, S = facts.scaled[l - 1]
    zs = [int(Zl[i][v]) for i in range(facts.n)]  # z_l(x^i)_v = zs[i] / S, S > 0: same signs
    if dead and (not zs or any(z >= 0 for z in zs)):
        bad = next((i for i, z in enumerate(zs) if z >= 0), None)
        fails.append(f"{where}: neuron ({l},{v}) is not strictly inactive on every sample "
                     + (f"(sample {bad}: z = {show(Fraction(zs[bad], S))})" if bad is not None
                        else "(there is no sample)"))
    n_in = facts.widths[l - 1]
    coef = [Fraction(delta.get(("W", l, v, c), Fraction(0))) for c in range(n_in)]
    coef_b = Fraction(delta.get(("b", l, v, None), Fraction(0)))
    D = lcm(coef_b.denominator, *(q.denominator for q in coef))
    dn = [int(q * D) for q in coef]
    moved = [c for c in range(n_in) if dn[c]]
    if l == 1:  # h_0 = x: rows of Fraction over their own denominators
        H = [[facts.X[i][c] for c in moved] for i in range(facts.n)]
        S_h = lcm(1, *(x.denominator for row in H for x in row))
        H = [[int(x * S_h) for x in row] for row in H]
    else:
        Zh, S_h = facts.scaled[l - 2]
        H = [[max(int(Zh[i][c]), 0) for c in moved] for i in range(facts.n)]
    db = int(coef_b * D) * S_h
    dm = [dn[c] for c in moved]
    scale = D * S_h  # s(x^i) = num_i / scale
    t0 = None
    for i, z in enumerate(zs):
        num = sum(d * h for d, h in zip(dm, H[i])) + db
        if z >= 0 and num != 0:
            fails.append(f"{where}: delta changes z_{l}(x^{i})_{v} = {show(Fraction(z, S))} (>= 0) at rate "
                         f"{show(Fraction(num, scale))}; the mechanism keeps it unchanged where the neuron is "
                         "active or tied")
            break
        if z < 0 < num:
            t = Fraction(-z * scale, S * num)  # -z / s
            t0 = t if t0 is None or t < t0 else t0
    return fails, t0


def _claims(part: dict, facts: CaseFacts, mech: str, delta: dict, where: str) -> tuple[list[str], Fraction | None]:
    """Problems with the mechanism's facts and ``delta``'s shape; the ``t0`` they allow."""
    L, widths = facts.L, facts.widths
    neurons = _neurons(part, facts, where)
    fails = unknown_fields(part, _KEYS[mech], where)
    if mech in _COUNT and len(neurons) != _COUNT[mech]:
        return fails + [f"{where}.neurons: {mech} names {_COUNT[mech]} neuron(s), found {len(neurons)}"], None
    for l, v in neurons:
        if not (1 <= l < L and 0 <= v < widths[l]):
            return fails + [f"{where}.neurons: ({l},{v}) is not a hidden neuron of this network (widths {widths})"], \
                None
    moved = set(delta)
    if not moved:
        return fails + [f"{where}: delta is 0"], None
    if mech in ("dead-neuron", "unpinned-hyperplane"):
        (l, v), = neurons
        if not moved <= _row(l, v, facts):
            return fails + [f"{where}: delta moves {_names(moved - _row(l, v, facts))}, outside the incoming weights "
                            f"and bias of neuron ({l},{v})"], None
        more, t0 = _row_facts(facts, l, v, delta, mech == "dead-neuron", where)
        return fails + more, t0
    if mech == "untouched-input":
        j = need(part, "input", int, where)
        if not 0 <= j < widths[0]:
            raise BadField(f"{where}.input", f"no input {j} (N_0 = {widths[0]})")
        allowed = {("W", 1, v, j) for l, v in neurons if l == 1}
        if any(l != 1 for l, _ in neurons):
            fails.append(f"{where}.neurons: untouched-input names layer-1 neurons, found {neurons}")
        bad = next((i for i, x in enumerate(facts.X) if x[j] != 0), None)
        if bad is not None:
            fails.append(f"{where}: input {j} is {show(facts.X[bad][j])} at sample {bad}, not 0 on every sample")
        if not moved <= allowed:
            fails.append(f"{where}: delta moves {_names(moved - allowed)}, not only W_1[v,{j}] of the named neurons")
        return fails, None
    (l, a), (m, c) = neurons
    if l != m or a == c:
        return fails + [f"{where}.neurons: two distinct neurons of one hidden layer expected, found {neurons}"], None
    za = [facts.Z[i][l - 1][a] for i in range(facts.n)]
    zc = [facts.Z[i][l - 1][c] for i in range(facts.n)]
    if mech == "always-active-block":
        if not za or any(z <= 0 for z in za + zc):
            fails.append(f"{where}: neurons ({l},{a}) and ({l},{c}) are not both strictly active on every sample")
        W, b = facts.W, facts.b
        want: dict[ParamKey, Fraction] = {("W", l, a, k): W[l - 1][c][k] for k in range(widths[l - 1])}
        want[("b", l, a, None)] = b[l - 1][c]
        want.update({("W", l + 1, k, c): -W[l][k][a] for k in range(widths[l + 1])})
        want = {k: x for k, x in want.items() if x != 0}
        if delta != want:
            fails.append(f"{where}: delta is not (E W_{l}, E b_{l}, -W_{l + 1} E) with E = e_{a} e_{c}^T (it moves "
                         f"{_names(moved)}; expected {_names(set(want))} with those values)")
        return fails, None
    ratio = parse_fraction(need(part, "ratio", str, where), f"{where}.ratio")
    active = [z > 0 for z in za]
    if ratio <= 0:
        fails.append(f"{where}.ratio: {show(ratio)} is not positive")
    elif (any(z == 0 for z in za + zc) or active != [z > 0 for z in zc] or not any(active)
          or any(x != ratio * y for x, y, on in zip(za, zc, active) if on)):
        fails.append(f"{where}: h_{a} = {show(ratio)} h_{c} does not hold on every sample of layer {l} (same strict "
                     "activation set, no tie, proportional pre-activations there)")
    allowed = {("W", l + 1, k, x) for k in range(widths[l + 1]) for x in (a, c)}
    if not moved <= allowed:
        fails.append(f"{where}: delta moves {_names(moved - allowed)}, outside columns {a} and {c} of W_{l + 1}")
    elif any(delta.get(("W", l + 1, k, c), Fraction(0)) != -ratio * delta.get(("W", l + 1, k, a), Fraction(0))
             for k in range(widths[l + 1])):
        fails.append(f"{where}: delta's column {c} of W_{l + 1} is not -{show(ratio)} times its column {a}")
    return fails, None


def _names(keys) -> str:
    shown = sorted(f"W_{k[1]}[{k[2]},{k[3]}]" if k[0] == "W" else f"b_{k[1]}[{k[2]}]" for k in keys)
    return ", ".join(shown[:6]) + (f", ... ({len(shown)})" if len(shown) > 6 else "")


def verify_structural(part: Any, line: Any, facts: CaseFacts) -> tuple[list[str], list[str], str | None]:
    """Check a ``structural`` part against the case and the ``line`` part it names.

    Parameters
    ----------
    part : dict
        ``certificate.structural``.
    line : dict or None
        ``certificate.line`` (its own proof is checked by :func:`exactident.verify.line.verify_line`).
    facts : CaseFacts

    Returns
    -------
    (failures, messages, mechanism)
        ``mechanism`` is the verified mechanism, or None when anything failed.

    Raises
    ------
    BadField
        Malformed part (wrong JSON types, a malformed ``t0`` or ``ratio``).
    """
    where = "certificate.structural"
    if not isinstance(part, dict):
        raise BadField(where, f"expected dict, found {type(part).__name__}")
    mech = need(part, "mechanism", str, where)
    if mech not in MECHANISMS:  # a claim the verifier cannot check: not valid (like an unknown part)
        return [f"{where}.mechanism: {mech!r}"[:200] + f" is not one of {list(MECHANISMS)}: not verified"], [], None
    if "t0" not in part:
        raise BadField(f"{where}.t0", "missing")
    claimed = None if part["t0"] is None else parse_fraction(part["t0"], f"{where}.t0")
    if not isinstance(line, dict):
        return [f"{where}: no line part: a mechanism needs the line it moves theta along"], [], None
    fails, t0 = _claims(part, facts, mech, line_delta(line, facts.widths), where)
    if not fails and claimed != t0:
        fails.append(f"{where}.t0: certificate says {'null' if claimed is None else show(claimed)}, the signs "
                     f"hold for 0 < t < {'infinity (null)' if t0 is None else show(t0)}")
    if fails:
        return fails, [], None
    named = ", ".join(f"({l},{v})" for l, v in _neurons(part, facts, where))
    bound = "every t > 0" if t0 is None else f"0 < t < {show(t0)}"
    return [], [f"structural part valid: {mech} ({named or 'input ' + str(part.get('input'))}) recomputed from the "
                f"case; delta has the mechanism's shape; the signs hold for {bound}"], mech


def check_units_output(facts: ConstrainedFacts, units: Sequence[Sequence[int]], value: flint.fmpq,
                       where: str) -> list[str]:
    """Failures unless every unit listed is hidden, or an input coordinate (``l = 0``), and outputs ``value`` on every
    sample."""
    cn, fails = facts.cn, []
    for u, (l, v) in enumerate(units):
        if l == 0 and 0 <= v < cn.widths[0]:
            bad = [i for i, row in enumerate(facts.X) if flint.fmpq(row[v]) != value]
            if bad:
                fails.append(f"{where}[{u}]: input x[{v}] is {flint.fmpq(facts.X[bad[0]][v])} on sample {bad[0]}, "
                             f"not {value}")
            continue
        if not (1 <= l < cn.L and v < cn.widths[l]):
            fails.append(f"{where}[{u}]: ({l}, {v}) is not a hidden unit or an input")
            continue
        Z, S = facts.forward[l - 1]
        a = cn.negative_slope[l - 1][v]
        for i in range(Z.nrows()):
            z = flint.fmpq(int(Z[i, v]), S)
            if (z if z >= 0 else a * z) != value:
                fails.append(f"{where}[{u}]: unit ({l}, {v}) outputs {z if z >= 0 else a * z} on sample {i}, "
                             f"not {value}")
                break
    return fails


def check_slope_units(facts: ConstrainedFacts, units: Sequence[Sequence[int]], j: int, where: str) -> list[str]:
    """Failures unless every listed unit has the PReLU slope ``theta_j`` and ``z >= 0`` on every sample."""
    cn, fails = facts.cn, []
    for u, (l, v) in enumerate(units):
        if not (1 <= l < cn.L and 0 <= v < cn.widths[l]) or int(cn.slope_index[l - 1][v]) != j:
            fails.append(f"{where}[{u}]: ({l}, {v}) is not a unit with the slope theta_{j}")
            continue
        Z, _S = facts.forward[l - 1]
        if any(Z[i, v] < 0 for i in range(Z.nrows())):
            fails.append(f"{where}[{u}]: unit ({l}, {v}) is negative on some sample")
    return fails
