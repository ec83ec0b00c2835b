"""Verify a ``line`` certificate: ``f_{theta + t delta}(X) = f_theta(X)`` for ``t`` in ``[0, t0]``, and non-equivalence.

The network is re-run on polynomials in ``t`` over Q, every sample at once
(:func:`exactident.model.line_forward.line_pass`: integers on data scaled per layer, the
primitive the engine uses too; ``theta``, ``delta`` and ``X`` are read here from the case
and the report).  The segment ``t0`` the certificate states is checked exactly: no hidden
pre-activation on ``X`` has a root in ``(0, t0)`` (``t0 = null``: in ``(0, oo)``), so every
unit keeps the side it takes just after 0 and the outputs on ``X`` are the computed
polynomials on ``[0, t0]``, all constant.  Non-equivalence of ``theta + t delta`` to theta
(small ``t > 0``) is shown by a ``probe`` point where ``f`` changes (equivalent parameters
compute the same function), by a ``nonequivalence`` witness (an invariant of the
equivalence that changes, :mod:`exactident.verify.nonequivalence`), or both; at least one
is required and each one given must hold.
"""

from __future__ import annotations

import flint

from exactident.model.line_forward import line_pass
from exactident.verify.arith import BadField, direction, need, parse_fraction, parse_parameter, show, unknown_fields
from exactident.verify.facts import CaseFacts
from exactident.verify.nonequivalence import check_nonequivalence

__all__ = ["verify_line"]


def verify_line(case, line: dict, facts: CaseFacts | None = None) -> tuple[bool, list[str]]:
    """Check a ``line`` certificate part against the case alone.

    The claim (docs/boundary.md, "Beyond first order: straight-line certificates"):
    along ``theta + t delta`` every output on X equals its value at ``t = 0`` for every
    ``t`` in ``[0, t0]`` (every ``t >= 0`` when ``t0`` is null): each output is re-run as a
    polynomial in ``t`` over Q, with the ReLU on the side of the lowest nonzero coefficient,
    and no hidden pre-activation on X may have a root in ``(0, t0)``; and the moved
    parameters are not equivalent to theta for small ``t > 0``: ``f`` changes at the
    ``probe`` point, or a ``nonequivalence`` invariant changes
    (:mod:`exactident.verify.nonequivalence`).  So theta is not locally identifiable from X.

    Parameters
    ----------
    case : exactident.io.case.Case
        The case the report is about (network in Q, sample ``X`` of shape ``(n, N_0)`` in Q).
    line : dict
        The report's ``line`` object (JSON): ``delta`` (``{"W_l[r,c]": "p/q", ...}``,
        nonzero, absent parameters are 0), ``t0`` (a positive rational string, or null),
        and ``probe`` (``N_0`` rational strings) and/or ``nonequivalence``.
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
        parameter name, ``t0`` not positive).
    """
    where = "certificate.line"
    facts = facts or CaseFacts.from_case(case)
    widths, W, b, X = facts.widths, facts.W, facts.b, facts.X
    fails = unknown_fields(line, ("delta", "t0", "probe", "nonequivalence"), where)
    if "t0" not in line:
        raise BadField(f"{where}.t0", "missing: a line certificate states the segment [0, t0] it proved "
                       "(null: every t >= 0)")
    t0 = None if line["t0"] is None else parse_fraction(line["t0"], f"{where}.t0")
    if t0 is not None and t0 <= 0:
        raise BadField(f"{where}.t0", f"{show(t0)} is not positive")
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
    along = line_pass(W, b, dW, db, X) if X else None
    for i, k, d, c in along.moving() if along else []:
        fails.append(f"{where}: output {k} at sample {i} moves along theta + eps delta (coefficient of "
                     f"eps^{d} is {show(c)}); the certificate claims it is constant")
    for i, l, v in (along.failures_below(None if t0 is None else flint.fmpq(t0.numerator, t0.denominator))
                    if along else [])[:5]:
        fails.append(f"{where}.t0: z_{l}(x^{i})_{v} changes sign for some t in (0, "
                     f"{'oo' if t0 is None else show(t0)}): the segment the certificate states is not proved")
    shown = []
    if probe is not None:
        if line_pass(W, b, dW, db, [probe]).is_constant():
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
    segment = "every t >= 0" if t0 is None else f"0 <= t <= t0 = {show(t0)}"
    return True, [f"line part valid: f_{{theta + t delta}}(X) = f_theta(X) for {segment}, and "
                  + " and ".join(shown) + " (small t > 0)"]
