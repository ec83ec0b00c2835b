"""Verify an ``entering`` certificate: a kernel direction of ``Gamma(s)`` that enters the piece of ``s`` strictly.

The claim (``docs/boundary.md``): at the tie resolution ``s``,
``R_Gamma(s) == R_A(s) < dim``, ``delta`` lies in ``ker Gamma(s)`` and
``sign_t g_t(s) . delta > 0`` for every resolved tie ``t``.  Every fact is
recomputed with :mod:`exactident.verify.arith`.
"""

from __future__ import annotations

import math
from fractions import Fraction

from exactident.errors import UnsupportedCaseError
from exactident.verify.arith import (
    PARAMETER_NAME,
    BadField,
    alpha_rows,
    as_fractions,
    forward_tangent,
    need,
    parse_fraction,
    rank_qq,
    tie_key,
    unknown_fields,
)

__all__ = ["MAX_VERIFY_ALPHA", "verify_entering"]


#: Largest ``n * |P|`` for which the verifier materialises ``alpha(s)``.
MAX_VERIFY_ALPHA = 1_000_000


_ENTERING_KEYS = ("resolution", "invisible_ties", "parameters", "delta", "derivatives", "rank_gamma",
                  "rank_a", "dim")


_TIE_KEYS = ("sample", "layer", "neuron")


def verify_entering(case, ent: dict) -> tuple[bool, list[str]]:
    where = "certificate.entering"
    net = case.network
    widths = list(net.widths)
    L = len(widths) - 1
    W, b, X = as_fractions(case)
    n = len(X)

    fails: list[str] = unknown_fields(ent, _ENTERING_KEYS, where)
    resolution = need(ent, "resolution", list, where)
    sides: dict[tuple[int, int, int], bool] = {}
    for k, r in enumerate(resolution):
        key = tie_key(r, f"{where}.resolution[{k}]")
        if key in sides:
            fails.append(f"{where}.resolution[{k}]: tie {key} is resolved twice")
        sides[key] = need(r, "active", bool, f"{where}.resolution[{k}]")
        fails += unknown_fields(r, _TIE_KEYS + ("active",), f"{where}.resolution[{k}]")
    invisible = []
    for k, r in enumerate(need(ent, "invisible_ties", list, where)):
        invisible.append(tie_key(r, f"{where}.invisible_ties[{k}]"))
        fails += unknown_fields(r, _TIE_KEYS, f"{where}.invisible_ties[{k}]")
    names = need(ent, "parameters", list, where)
    delta_in = need(ent, "delta", dict, where)
    delta = {k: parse_fraction(v, f"{where}.delta[{k!r}]") for k, v in delta_in.items()}
    claimed = {k: need(ent, k, int, where) for k in ("rank_gamma", "rank_a", "dim")}
    # One claimed g_t . delta per resolved tie, on the same side: the certificate must show every sign.
    claimed_values: dict[tuple[int, int, int], Fraction] = {}
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
        fails += unknown_fields(r, _TIE_KEYS + ("active", "value"), at)
    for key in sides:
        if key not in claimed_values:
            fails.append(f"derivatives: no g_t.delta for the resolved tie (sample {key[0]}, layer {key[1]}, "
                         f"neuron {key[2]})")

    # 1. Own forward pass and ties; theta must not be in S.
    Z = [forward_tangent(W, b, x, lambda l, v, z: z > 0)[0] for x in X]
    ties = {(i, l, v) for i in range(n) for l in range(1, L) for v in range(widths[l]) if Z[i][l - 1][v] == 0}
    for l in range(1, L):
        for v in range(widths[l]):
            if all(W[l][k][v] == 0 for k in range(widths[l + 1])) or (
                    all(w == 0 for w in W[l - 1][v]) and b[l - 1][v] == 0):
                fails.append(f"theta is in S (hidden neuron ({l},{v})): the argument does not apply")
    listed = list(sides) + invisible  # duplicates within `resolution` are reported above
    if len(set(listed)) != len(listed) or set(listed) != ties:
        fails.append(f"the certificate's ties {sorted(listed)} are not the case's ties {sorted(ties)}")
    for (i, l, v) in invisible:
        if not (0 <= i < n and 1 <= l < L) or not any(all(z < 0 for z in Z[i][m - 1]) for m in range(l + 1, L)):
            fails.append(f"tie (sample {i}, layer {l}, neuron {v}) is listed invisible but no later "
                         "hidden layer is all strictly inactive at that sample")
    # 2. The coordinates tau: every weight and bias except one nonzero outgoing edge per hidden neuron.
    parsed = []
    for k, name in enumerate(names):
        m = PARAMETER_NAME.fullmatch(name) if isinstance(name, str) else None
        if m is None:
            raise BadField(f"{where}.parameters[{k}]", f"expected a name like 'W_1[0,0]' or 'b_1[0]', found {name!r}")
        parsed.append(("W", int(m[2]), int(m[3]), int(m[4])) if m[1] else ("b", int(m[6]), int(m[7]), None))
    everything: list[tuple[str, int, int, int | None]]
    everything = [("W", l, r, c) for l in range(1, L + 1) for r in range(widths[l]) for c in range(widths[l - 1])]
    everything += [("b", l, r, None) for l in range(1, L + 1) for r in range(widths[l])]
    missing = set(everything) - set(parsed)
    dim = sum(widths[l] * widths[l + 1] for l in range(L)) + widths[-1]
    if len(set(parsed)) != len(parsed) or not set(parsed) <= set(everything):
        fails.append("parameters: duplicate or unknown parameter names")
    elif any(p[0] == "b" for p in missing):
        fails.append("parameters: a bias is missing")
    else:
        for l in range(1, L):
            for v in range(widths[l]):
                held = [r for (kind, ll, r, c) in missing if ll == l + 1 and c == v]
                if len(held) != 1 or W[l][held[0]][v] == 0:
                    fails.append(f"parameters: hidden neuron ({l},{v}) must hold exactly one nonzero "
                                 f"outgoing edge fixed, found {len(held)}")
        if len(missing) != sum(widths[1:L]):
            fails.append("parameters: weights other than one outgoing edge per hidden neuron are missing")
    if len(parsed) != dim or claimed["dim"] != dim:
        fails.append(f"dim: {len(parsed)} parameters and claimed dim {claimed['dim']}, expected {dim}")
    bad_keys = sorted(set(delta) - set(names)) + sorted(set(names) - set(delta))
    if bad_keys:
        fails.append(f"delta: keys {bad_keys} do not match the parameters")
    if fails:
        return False, fails

    # 3. The pattern of s, then Gamma(s) and z_t along delta by forward-mode differentiation.
    def active_at_sample(i):
        def act(l, v, z):
            key = (i, l, v)
            return sides.get(key, key in ties or z > 0)
        return act

    def direction(vec: dict[tuple, Fraction]):
        dW = [[[vec.get(("W", l, r, c), Fraction(0)) for c in range(widths[l - 1])] for r in range(widths[l])]
              for l in range(1, L + 1)]
        db = [[vec.get(("b", l, r, None), Fraction(0)) for r in range(widths[l])] for l in range(1, L + 1)]
        return dW, db

    dvec = {p: delta[name] for p, name in zip(parsed, names)}
    dW, db = direction(dvec)
    out_tangent, tie_values = [], {}
    for i, x in enumerate(X):
        _, dz = forward_tangent(W, b, x, active_at_sample(i), dW, db)
        out_tangent.extend(dz[-1])
        for (ti, l, v) in sides:
            if ti == i:
                tie_values[(ti, l, v)] = dz[l - 1][v]
    if any(t != 0 for t in out_tangent):
        fails.append("Gamma(s) delta != 0: delta is not in the kernel")
    for key, a in sides.items():
        val = tie_values[key]
        if (val <= 0) if a else (val >= 0):
            fails.append(f"tie (sample {key[0]}, layer {key[1]}, neuron {key[2]}): g_t.delta = {val} "
                         f"does not have the strict sign of the {'active' if a else 'inactive'} side")
        if key in claimed_values and claimed_values[key] != val:
            fails.append(f"tie {key}: claimed g_t.delta {claimed_values[key]} but it is {val}")
    columns = []
    for p in parsed:
        cW, cb = direction({p: Fraction(1)})
        col = []
        for i, x in enumerate(X):
            col.extend(forward_tangent(W, b, x, active_at_sample(i), cW, cb)[1][-1])
        columns.append(col)
    gamma_rows = [list(r) for r in zip(*columns)] if columns else []
    rg = rank_qq(gamma_rows, dim)
    n_p = sum(math.prod(widths[m:L]) for m in range(L)) + 1
    if n * n_p > MAX_VERIFY_ALPHA:
        raise UnsupportedCaseError(f"alpha(s) has {n} x {n_p} entries: too large for verify-certificate")
    ra = widths[-1] * rank_qq(alpha_rows(widths, X, lambda i, m, u: active_at_sample(i)(m, u, Z[i][m - 1][u])),
                               n_p)
    if (rg, ra) != (claimed["rank_gamma"], claimed["rank_a"]):
        fails.append(f"ranks: claimed R_Gamma = {claimed['rank_gamma']}, R_A = {claimed['rank_a']}; "
                     f"recomputed {rg}, {ra}")
    if not rg == ra < dim:
        fails.append(f"R_Gamma(s) = {rg}, R_A(s) = {ra}, dim = {dim}: not R_Gamma == R_A < dim")
    if fails:
        return False, fails
    return True, [f"entering part valid: {len(sides)} tie(s) entered strictly, Gamma(s) delta = 0, "
                  f"R_Gamma(s) = R_A(s) = {rg} < dim = {dim}"]
