"""Verify a ``line`` certificate: ``f_{theta + eps delta}(X) = f_theta(X)`` for small ``eps > 0``, and ``f`` changes.

The network is re-run on polynomials in ``eps`` over Fractions
(:func:`exactident.verify.arith.line_forward`).
"""

from __future__ import annotations

from fractions import Fraction

from exactident.verify.arith import PARAMETER_NAME, as_fractions, line_forward, need, parse_fraction, unknown_fields

__all__ = ["verify_line"]


def verify_line(case, line: dict) -> tuple[bool, list[str]]:
    where = "certificate.line"
    unknown = unknown_fields(line, ("delta", "probe"), where)
    net = case.network
    widths = list(net.widths)
    L = len(widths) - 1
    W, b, X = as_fractions(case)
    delta = {k: parse_fraction(v, f"{where}.delta[{k!r}]") for k, v in need(line, "delta", dict, where).items()}
    probe = [parse_fraction(v, f"{where}.probe[{k}]") for k, v in enumerate(need(line, "probe", list, where))]
    dW = [[[Fraction(0)] * widths[l - 1] for _ in range(widths[l])] for l in range(1, L + 1)]
    db = [[Fraction(0)] * widths[l] for l in range(1, L + 1)]
    fails = []
    for name, d in delta.items():
        m = PARAMETER_NAME.fullmatch(name)
        if m and m[1] and 1 <= int(m[2]) <= L and int(m[3]) < widths[int(m[2])] and int(m[4]) < widths[int(m[2]) - 1]:
            dW[int(m[2]) - 1][int(m[3])][int(m[4])] = d
        elif m and m[5] and 1 <= int(m[6]) <= L and int(m[7]) < widths[int(m[6])]:
            db[int(m[6]) - 1][int(m[7])] = d
        else:
            fails.append(f"delta: {name!r} is not a weight or bias of this network")
    if len(probe) != widths[0]:
        fails.append(f"probe has {len(probe)} coordinates, expected N_0 = {widths[0]}")
    fails += unknown
    if fails:
        return False, fails
    for i, x in enumerate(X):
        if any(c != 0 for p in line_forward(W, b, dW, db, x) for c in p[1:]):
            fails.append(f"sample {i}: the outputs change along theta + eps delta")
    if all(c == 0 for p in line_forward(W, b, dW, db, probe) for c in p[1:]):
        fails.append("the probe point does not show a change of f: non-equivalence not proved")
    if fails:
        return False, fails
    return True, ["line part valid: f_{theta + eps delta}(X) = f_theta(X) for all small eps > 0, "
                  "and f changes at the probe point"]
