"""Verify an ``entering`` certificate: a kernel direction of ``Gamma(s)`` that enters the piece of ``s`` strictly.

The claim (``docs/boundary.md``): at the tie resolution ``s`` of the visible
ties, ``R_Gamma(s) == R_A(s) < dim``, ``delta`` lies in ``ker Gamma(s)`` and
``sign_t g_t(s) . delta > 0`` for every resolved tie ``t``.  Every fact is
recomputed from the case (:class:`exactident.verify.facts.CaseFacts`, the
arithmetic of :mod:`exactident.verify.arith`); an optional ``nonequivalence``
witness (:mod:`exactident.verify.nonequivalence`) shows that the curve tangent
to ``delta`` leaves the equivalence class of theta.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from exactident.errors import UnsupportedCaseError
from exactident.verify.arith import (
    alpha_rows,
    direction,
    forward_tangent,
    need,
    parse_fraction,
    parse_parameter,
    rank_qq,
    show,
    tie_key,
    unknown_fields,
)
from exactident.verify.facts import CaseFacts, Tie
from exactident.verify.nonequivalence import check_nonequivalence

__all__ = ["MAX_VERIFY_ALPHA", "EnteringResult", "tau_problems", "verify_entering"]


#: Largest ``n * |P|`` for which the verifier materialises ``alpha(s)``.
MAX_VERIFY_ALPHA = 1_000_000


_ENTERING_KEYS = ("resolution", "invisible_ties", "parameters", "delta", "derivatives", "rank_gamma",
                  "rank_a", "dim", "nonequivalence")


_TIE_KEYS = ("sample", "layer", "neuron")


@dataclass
class EnteringResult:
    """Outcome of :func:`verify_entering`: validity, messages, and what it proved."""

    valid: bool
    messages: list[str]
    sides: dict[Tie, bool]
    rank_gamma: int | None = None
    rank_a: int | None = None


def tau_problems(facts: CaseFacts, keys: list, where: str) -> list[str]:
    """``keys`` must be a valid tau: all weights and biases but one nonzero outgoing edge per hidden neuron."""
    widths, L, W = facts.widths, facts.L, facts.W
    everything: set[tuple] = {("W", l, r, c) for l in range(1, L + 1) for r in range(widths[l])
                              for c in range(widths[l - 1])}
    everything |= {("b", l, r, None) for l in range(1, L + 1) for r in range(widths[l])}
    missing = everything - set(keys)
    fails = []
    if len(set(keys)) != len(keys):
        fails.append(f"{where}: {len(keys) - len(set(keys))} duplicate parameter name(s)")
    if any(p[0] == "b" for p in missing):
        fails.append(f"{where}: bias {sorted(p for p in missing if p[0] == 'b')[0]} is missing (biases are free)")
    for l in range(1, L):
        for v in range(widths[l]):
            held = [r for (kind, ll, r, c) in missing if kind == "W" and ll == l + 1 and c == v]
            if len(held) != 1 or W[l][held[0]][v] == 0:
                fails.append(f"{where}: hidden neuron ({l},{v}) holds {len(held)} outgoing edge(s) fixed "
                             f"{'(a zero one) ' if len(held) == 1 else ''}; exactly one nonzero edge is required")
    others = [p for p in missing if p[0] == "W" and p[1] == 1] if L >= 1 else []
    if others:
        fails.append(f"{where}: first-layer weight {others[0]} is missing (only outgoing edges of hidden "
                     "neurons can be fixed)")
    if len(set(keys)) != facts.dim:
        fails.append(f"{where}: {len(set(keys))} parameters, but dim = {facts.dim}")
    return fails


def verify_entering(case, ent: dict, facts: CaseFacts | None = None) -> EnteringResult:
    """Check the ``entering`` part of a certificate against the case alone.

    The argument of Theorem 8 at a tie resolution ``s`` (docs/boundary.md, "Why the
    entering test certifies non-identifiability"): if ``R_Gamma(s) == R_A(s) < dim``
    and some ``delta`` in ``ker Gamma(s)`` has ``sign_t g_t(s) . delta > 0`` at every
    resolved tie ``t``, parameters that enter the piece of ``s`` strictly compute the
    same outputs on X without being equivalent to theta.  Every fact is recomputed in
    Q with ``fractions.Fraction``: the ties (visible and invisible), the coordinates
    ``tau`` (:func:`tau_problems`), ``Gamma(s) delta`` and the ``g_t(s) . delta`` by
    forward-mode differentiation, ``R_Gamma(s)`` and ``R_A(s)`` by :func:`~exactident.verify.arith.rank_qq`,
    and the optional ``nonequivalence`` witness (to first order).

    Parameters
    ----------
    case : exactident.io.case.Case
        The case the report is about (network in Q, sample ``X`` of shape ``(n, N_0)`` in Q).
    ent : dict
        The report's ``certificate.entering`` object (JSON): ``resolution``,
        ``invisible_ties``, ``parameters``, ``delta`` (rational strings),
        ``derivatives``, ``rank_gamma``, ``rank_a``, ``dim`` and optionally ``nonequivalence``.
    facts : CaseFacts, optional
        The facts of ``case``, when the caller already computed them.

    Returns
    -------
    EnteringResult
        ``valid`` only if every claim holds; ``messages`` names each failure (or the one
        line of success); the resolution's ``sides`` and the recomputed ranks when reached.

    Raises
    ------
    exactident.verify.arith.BadField
        A field is malformed (missing, wrong JSON type, not a rational string).
    exactident.errors.UnsupportedCaseError
        ``alpha(s)`` has more than :data:`MAX_VERIFY_ALPHA` entries.
    """
    where = "certificate.entering"
    facts = facts or CaseFacts.from_case(case)
    widths, L, W, b, X, n = facts.widths, facts.L, facts.W, facts.b, facts.X, facts.n

    fails: list[str] = unknown_fields(ent, _ENTERING_KEYS, where)
    resolution = need(ent, "resolution", list, where)
    sides: dict[Tie, bool] = {}
    for k, r in enumerate(resolution):
        key = tie_key(r, f"{where}.resolution[{k}]")
        if key in sides:
            fails.append(f"{where}.resolution[{k}]: tie {key} is resolved twice")
        sides[key] = need(r, "active", bool, f"{where}.resolution[{k}]")
        fails += unknown_fields(r, (*_TIE_KEYS, "active"), f"{where}.resolution[{k}]")
    invisible = []
    for k, r in enumerate(need(ent, "invisible_ties", list, where)):
        invisible.append(tie_key(r, f"{where}.invisible_ties[{k}]"))
        fails += unknown_fields(r, _TIE_KEYS, f"{where}.invisible_ties[{k}]")
    names = need(ent, "parameters", list, where)
    delta_in = need(ent, "delta", dict, where)
    delta = {k: parse_fraction(v, f"{where}.delta[{k!r}]") for k, v in delta_in.items()}
    claimed = {k: need(ent, k, int, where) for k in ("rank_gamma", "rank_a", "dim")}
    # One claimed g_t . delta per resolved tie, on the same side: the certificate must show every sign.
    claimed_values: dict[Tie, Fraction] = {}
    for k, r in enumerate(need(ent, "derivatives", list, where)):
        at = f"{where}.derivatives[{k}]"
        key = tie_key(r, at)
        value = parse_fraction(need(r, "value", str, at), f"{at}.value")
        if key in claimed_values:
            fails.append(f"{at}: tie {key} has two derivatives")
        claimed_values[key] = value
        if key not in sides:
            fails.append(f"{at}: tie {key} is not in the resolution")
        elif "active" in r and need(r, "active", bool, at) != sides[key]:
            fails.append(f"{at}: side {r['active']} differs from the resolution's {sides[key]}")
        fails += unknown_fields(r, (*_TIE_KEYS, "active", "value"), at)
    for key in sides:
        if key not in claimed_values:
            fails.append(f"{where}.derivatives: no g_t.delta for the resolved tie (sample {key[0]}, layer {key[1]}, "
                         f"neuron {key[2]})")

    # 1. Ties from the verifier's own forward pass; theta must not be in S.
    for (l, v, why) in facts.degenerate:
        fails.append(f"theta is in S (hidden neuron ({l},{v}), {why} weights all zero): the argument does not apply")
    if sorted(sides) != facts.visible:
        fails.append(f"{where}.resolution: the certificate resolves the ties {sorted(sides)}, the case's visible "
                     f"ties are {facts.visible}")
    if len(set(invisible)) != len(invisible) or sorted(invisible) != sorted(facts.blocked_by):
        fails.append(f"{where}.invisible_ties: the certificate lists {sorted(invisible)}, the case's invisible "
                     f"ties (a later hidden layer all strictly inactive) are {sorted(facts.blocked_by)}")
    # 2. The coordinates tau.
    keys = [parse_parameter(name, widths, f"{where}.parameters[{k}]") for k, name in enumerate(names)]
    if None in keys:
        fails.append(f"{where}.parameters[{keys.index(None)}]: {names[keys.index(None)]!r} is not a parameter "
                     f"of this network (widths {widths})")
    else:
        fails += tau_problems(facts, keys, f"{where}.parameters")
    if claimed["dim"] != facts.dim:
        fails.append(f"{where}.dim: certificate says {claimed['dim']}, the case has dim = {facts.dim}")
    bad_keys = sorted(set(delta) - set(names)) + sorted(set(names) - set(delta))
    if bad_keys:
        fails.append(f"{where}.delta: keys {bad_keys[:4]} do not match the parameters")
    if fails:
        return EnteringResult(False, fails, sides)

    # 3. The pattern of s, then Gamma(s) and z_t along delta by forward-mode differentiation.
    act = facts.active(sides)
    dvec = {p: delta[name] for p, name in zip(keys, names)}
    dW, db = direction(widths, dvec)
    tie_values: dict[Tie, Fraction] = {}
    for i, x in enumerate(X):
        _, dz = forward_tangent(W, b, x, act(i), dW, db)
        for k, t in enumerate(dz[-1]):
            if t != 0:
                fails.append(f"{where}.delta: Gamma(s) delta is {show(t)} at sample {i}, output {k}; the certificate "
                             "claims 0 (delta in ker Gamma(s))")
        for key in sides:
            if key[0] == i:
                tie_values[key] = dz[key[1] - 1][key[2]]
    if not any(dvec.values()):
        fails.append(f"{where}.delta: delta is 0 (claimed a nonzero direction)")
    for key, a in sides.items():
        val = tie_values[key]
        if claimed_values[key] != val:
            fails.append(f"{where}.derivatives: tie {key}: certificate says g_t.delta = {show(claimed_values[key])}, "
                         f"recomputed {show(val)}")
        elif (val <= 0) if a else (val >= 0):
            fails.append(f"{where}.derivatives: tie {key}: g_t.delta = {show(val)} does not have the strict sign of "
                         f"the {'active' if a else 'inactive'} side the certificate claims")
    if "nonequivalence" in ent:
        problems, _ = check_nonequivalence(widths, W, b, dW, db, ent["nonequivalence"], f"{where}.nonequivalence",
                                           first_order=True)
        fails += problems
    columns = []
    for p in keys:
        cW, cb = direction(widths, {p: Fraction(1)})
        col = []
        for i, x in enumerate(X):
            col.extend(forward_tangent(W, b, x, act(i), cW, cb)[1][-1])
        columns.append(col)
    gamma_rows = [list(r) for r in zip(*columns)] if columns else []
    rg = rank_qq(gamma_rows, facts.dim)
    n_p = sum(math.prod(widths[m:L]) for m in range(L)) + 1
    if n * n_p > MAX_VERIFY_ALPHA:
        raise UnsupportedCaseError(f"alpha(s) has {n} x {n_p} entries: too large for verify-certificate")
    Z = facts.Z
    ra = widths[-1] * rank_qq(alpha_rows(widths, X, lambda i, m, u: act(i)(m, u, Z[i][m - 1][u])), n_p)
    for field, got in (("rank_gamma", rg), ("rank_a", ra)):
        if claimed[field] != got:
            fails.append(f"{where}.{field}: certificate says {claimed[field]}, recomputed {got}")
    if not rg == ra < facts.dim:
        fails.append(f"{where}: R_Gamma(s) = {rg}, R_A(s) = {ra}, dim = {facts.dim}: the certificate claims "
                     "R_Gamma(s) == R_A(s) < dim")
    if fails:
        return EnteringResult(False, fails, sides, rg, ra)
    more = ", and the invariant shows non-equivalence" if "nonequivalence" in ent else ""
    return EnteringResult(True, [f"entering part valid: {len(sides)} tie(s) entered strictly, Gamma(s) delta = 0, "
                                 f"R_Gamma(s) = R_A(s) = {rg} < dim = {facts.dim}{more}"], sides, rg, ra)

