"""Verify a ``line`` certificate: ``f_{theta + eps delta}(X) = f_theta(X)`` for small ``eps > 0``, and non-equivalence.

The network is re-run on polynomials in ``eps`` over Q, every sample at once
(:func:`exactident.verify.forward.line_outputs`: integers on data scaled per layer).  Non-equivalence of
``theta + eps delta`` to theta is shown by a ``probe`` point where ``f``
changes (equivalent parameters compute the same function), by a
``nonequivalence`` witness (an invariant of the equivalence that changes,
:mod:`exactident.verify.nonequivalence`), or both; at least one is required
and each one given must hold.
"""

from __future__ import annotations

from exactident.verify.arith import direction, need, parse_fraction, parse_parameter, show, unknown_fields
from exactident.verify.facts import CaseFacts
from exactident.verify.forward import line_outputs
from exactident.verify.nonequivalence import check_nonequivalence

__all__ = ["verify_line"]


def verify_line(case, line: dict, facts: CaseFacts | None = None) -> tuple[bool, list[str]]:
    """Check a ``line`` certificate part against the case alone.

    The claim (docs/boundary.md, "Beyond first order: straight-line certificates"):
    along ``theta + eps delta`` every output on X is constant for all small
    ``eps > 0`` (each output is re-run as a polynomial in ``eps`` over Q, with the
    ReLU decided by the sign of the lowest nonzero coefficient), and the moved
    parameters are not equivalent to theta: ``f`` changes at the ``probe`` point,
    or a ``nonequivalence`` invariant changes (:mod:`exactident.verify.nonequivalence`).
    So theta is not locally identifiable from X.

    Parameters
    ----------
    case : exactident.io.case.Case
        The case the report is about (network in Q, sample ``X`` of shape ``(n, N_0)`` in Q).
    line : dict
        The report's ``line`` object (JSON): ``delta`` (``{"W_l[r,c]": "p/q", ...}``,
        nonzero, absent parameters are 0), and ``probe`` (``N_0`` rational strings)
        and/or ``nonequivalence``.
    facts : CaseFacts, optional
        The facts of ``case``, when the caller already computed them.

    Returns
    -------
    valid : bool
        Every claim holds.
    messages : list of str
        One message per failure, or the one line of success.

    Raises
    ------
    exactident.verify.arith.BadField
        A field is malformed (missing, wrong JSON type, not a rational string or
        parameter name).
    """
    where = "certificate.line"
    facts = facts or CaseFacts.from_case(case)
    widths, W, b, X = facts.widths, facts.W, facts.b, facts.X
    fails = unknown_fields(line, ("delta", "probe", "nonequivalence"), where)
    vec: dict = {}
    for name, v in need(line, "delta", dict, where).items():
        at = f"{where}.delta[{name!r}]"
        value = parse_fraction(v, at)
        key = parse_parameter(name, widths, at)
        if key is None:
            fails.append(f"{at}: {name!r} is not a weight or bias of this network (widths {widths})")
        else:
            vec[key] = value
    probe = None
    if "probe" in line:
        probe = [parse_fraction(v, f"{where}.probe[{k}]") for k, v in enumerate(need(line, "probe", list, where))]
        if len(probe) != widths[0]:
            fails.append(f"{where}.probe: {len(probe)} coordinates, the input has N_0 = {widths[0]}")
    if probe is None and "nonequivalence" not in line:
        fails.append(f"{where}: neither a probe point nor a nonequivalence witness: non-equivalence not shown")
    if not any(vec.values()):
        fails.append(f"{where}.delta: delta is 0 (claimed a nonzero direction)")
    if fails:
        return False, fails
    dW, db = direction(widths, vec)
    for i, outputs in enumerate(line_outputs(W, b, dW, db, X)):
        for k, p in enumerate(outputs):
            moving = [(d, c) for d, c in enumerate(p) if d >= 1 and c != 0]
            if moving:
                d, c = moving[0]
                fails.append(f"{where}: output {k} at sample {i} moves along theta + eps delta (coefficient of "
                             f"eps^{d} is {show(c)}); the certificate claims it is constant")
    shown = []
    if probe is not None:
        if all(c == 0 for p in line_outputs(W, b, dW, db, [probe])[0] for c in p[1:]):
            fails.append(f"{where}.probe: f is constant along the line at the probe point "
                         f"({', '.join(show(v) for v in probe)}); the certificate claims it changes")
        else:
            shown.append("f changes at the probe point")
    if "nonequivalence" in line:
        problems, summary = check_nonequivalence(widths, W, b, dW, db, line["nonequivalence"],
                                                 f"{where}.nonequivalence", first_order=False)
        fails += problems
        shown.append(summary)
    if fails:
        return False, fails
    return True, ["line part valid: f_{theta + eps delta}(X) = f_theta(X) for all small eps > 0, and "
                  + " and ".join(shown)]
