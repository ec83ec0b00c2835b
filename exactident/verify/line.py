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

A layer graph's lines are checked by the same pass (:func:`line_along`, with each unit's
negative-side slope and the PReLU slopes moving): :func:`check_graph_line` (a ``line`` part: a
``probe`` where ``f`` moves) and :func:`check_line_part` (the ``dead_units``, ``constant_units``
and ``slope_lines`` parts, whose units are re-derived by :mod:`exactident.verify.structural`,
``delta`` outside ``S_H`` and a witness ``f(x)`` that moves).  No line certificate depends on a
tie resolution: the pass decides every unit's side along the segment itself, so a valid one proves
``not-identifiable`` whatever side each tie takes (:mod:`exactident.verify.verdict`).

``dead_units`` ``{parameter, name, units, direction: "-1", t0, eps, x, f_0, f_eps}`` and ``constant_units``
    ``{units, value, delta, names, t0, eps, x, f_0, f_eps}``
    A line ``theta + t delta`` (``delta = -e_parameter`` for ``dead_units``): the units listed output
    0 (``value``) on every sample; the outputs on X are the same for every ``t`` in the segment
    ``[0, t0]`` the part states (``t0`` null: every ``t >= 0``): re-run as polynomials in ``t``
    with each unit's negative-side slope (:func:`line_along`,
    the shared primitive), every output polynomial constant and no kinked unit's pre-activation on
    X with a root in ``(0, t0)`` (Descartes, a coefficient bound, else Sturm; exact), so every
    unit keeps its side on the open segment; ``delta`` is not in ``S_H``, so for small ``t`` the point is not
    a rescaling of ``theta`` (the rescaling orbit is an embedded manifold whose tangent is ``S_H``):
    theta is not locally identifiable.  The witness ``f(x)`` at ``t = 0`` and ``t = eps`` is
    recomputed and must be what the report says, and differ; ``eps > 0``, and ``f(x)`` along the
    line, run as polynomials in ``t`` (the shared primitive), is not constant for small ``t > 0``:
    so every ``theta + t delta`` with small ``t > 0`` computes another function (``delta`` outside
    ``S_H`` alone would not show it: a unit dead on every input, or any other symmetry the family has
    and ``S_H`` does not list, moves theta and keeps the function).
``slope_lines`` ``{parameter, name, units, direction: "1", t0, eps, x, f_0, f_eps}``
    The same line check with ``delta = +e_parameter``, a PReLU slope: the units listed carry that slope and
    are ``>= 0`` on every sample (the verifier's own forward pass).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flint
import numpy as np

from exactident.model.line_forward import LinePass, line_pass
from exactident.verify.arith import (
    BadField,
    direction,
    need,
    parse_fraction,
    parse_parameter,
    rational,
    show,
    unknown_fields,
)
from exactident.verify.facts import CaseFacts, ConstrainedFacts
from exactident.verify.forward import integer_forward
from exactident.verify.nonequivalence import check_nonequivalence
from exactident.verify.structural import check_slope_units, check_units_output

__all__ = ["check_graph_line", "check_line_part", "line_along", "line_is_constant", "outputs_at", "verify_line"]


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
    along = line_pass(W, b, dW, db, facts.X_q or X) if X else None  # the case's fmpq rows: no conversion
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


def line_along(cn: Any, X: Sequence[Sequence[flint.fmpq]], delta: Sequence[flint.fmpq]) -> LinePass:
    """The pre-activations on ``X`` along ``theta + t delta`` as polynomials in ``t`` (exact).

    ``cn`` is a :class:`~exactident.model.network.Network` (its container only: this module
    imports nothing of the engine but the line primitive).

    The dense direction (weights, biases, PReLU slopes) is read here from ``cn``'s index arrays
    and ``delta`` (length ``n_params``, Q); the polynomial pass is the shared primitive
    :func:`exactident.model.line_forward.line_pass` with each unit's negative-side slope.

    Raises
    ------
    ValueError
        For no sample (``X`` empty).
    """
    if not len(X):
        raise ValueError("line_along: no sample")
    zero = flint.fmpq(0)

    def pick(index) -> list[flint.fmpq]:
        return [delta[int(j)] if j >= 0 else zero for j in np.asarray(index).reshape(-1)]

    dW = [flint.fmpq_mat(cn.widths[l], cn.widths[l - 1], pick(cn.W_index[l - 1])) for l in range(1, cn.L + 1)]
    db = [pick(cn.b_index[l - 1]) for l in range(1, cn.L + 1)]
    da = [pick(cn.slope_index[l - 1]) for l in range(1, cn.L)]
    return line_pass(cn.W, cn.b, dW, db, [list(row) for row in X], slopes=cn.negative_slope, dslopes=da)


def line_is_constant(cn: Any, X: Sequence[Sequence[flint.fmpq]],
                     delta: Sequence[flint.fmpq]) -> tuple[bool, str]:
    """Are the outputs on ``X`` the same at ``theta + t delta`` for every small enough ``t > 0``? (exact)

    Every value along the line is a polynomial in ``t`` near ``0+`` (:func:`line_along`); a unit's
    side for small ``t > 0`` is the sign of its first nonzero coefficient (a unit identically 0
    outputs 0 on either side), and a PReLU slope moves too (``a + t delta_a``).  Constant means
    every output coefficient of degree ``>= 1`` is 0.

    Returns
    -------
    (bool, str)
        The answer and, when False, where the first output moves (``sample i, output o``).
    """
    if not len(X):
        return True, ""
    moving = line_along(cn, X, delta).moving()
    if moving:
        i, o, d, _c = moving[0]
        return False, f"sample {i}, output {o} moves (degree {d} in t)"
    return True, ""


def outputs_at(cn: Any, x: Sequence[flint.fmpq], theta: Sequence[flint.fmpq]) -> list[flint.fmpq]:
    """The outputs ``f_theta(x)`` at one input (exact, by :func:`exactident.verify.forward.integer_forward`)."""
    Z, S = integer_forward(cn.with_theta(list(theta)), [list(x)])[-1]
    return [flint.fmpq(int(z), S) for z in Z.entries()]


def _name(facts: ConstrainedFacts, j: int) -> str:
    names = facts.cn.param_names
    return names[j] if names else f"theta_{j}"


def _sparse_direction(facts: ConstrainedFacts, part: dict[str, Any], where: str,
                      delta: list[flint.fmpq]) -> tuple[list[str], bool]:
    """Fill ``delta`` (length ``n_params``) from ``part["delta"]`` (pairs ``(j, c)``) and check ``part["names"]``.

    Returns the failures and whether they are fatal (an index out of range: nothing after it can be read)."""
    k = facts.cn.n_params
    fails: list[str] = []
    if len(part["names"]) != len(part["delta"]):
        fails.append(f"{where}.names: {len(part['names'])} names for {len(part['delta'])} entries of delta")
    for m, (j, c) in enumerate(part["delta"]):
        if j >= k:
            return [f"{where}.delta[{m}]: {j} is not a parameter (n_params = {k})"], True
        delta[j] = rational(c)
        if m < len(part["names"]) and part["names"][m] != _name(facts, j):
            fails.append(f"{where}.names[{m}]: theta_{j} is {_name(facts, j)!r}, the certificate says "
                         f"{part['names'][m]!r}")
    return fails, False


def _constant_on_sample(facts: ConstrainedFacts, part: dict[str, Any], delta: list[flint.fmpq],
                        where: str) -> list[str]:
    """Failures of "the outputs on X are the same for every t in [0, t0]" (``part["t0"]`` null: every t >= 0),
    by the shared polynomial pass: no output moves, and no kinked pre-activation on X changes side before t0."""
    t0 = None if part["t0"] is None else rational(part["t0"])
    if t0 is not None and t0 <= 0:
        return [f"{where}.t0: {t0} is not positive"]
    along = line_along(facts.cn, facts.X, delta)
    moving = along.moving()
    if moving:
        i, o, d, _c = moving[0]
        return [f"{where}: the outputs on X change along the line: sample {i}, output {o} moves (degree {d} in t)"]
    crossing = along.failures_below(t0)
    if crossing:
        i, l, v = crossing[0]
        return [f"{where}.t0: unit ({l}, {v}) changes side on sample {i} for some t in "
                f"(0, {'oo' if t0 is None else t0}): the segment the certificate states is not proved"
                + (f" ({len(crossing)} such pre-activations)" if len(crossing) > 1 else "")]
    return []


def check_line_part(facts: ConstrainedFacts, key: str, part: dict[str, Any]) -> list[str]:
    """Failures of a ``dead_units``, ``constant_units`` or ``slope_lines`` part (empty: theta is not locally
    identifiable)."""
    cn, k, where = facts.cn, facts.cn.n_params, f"certificate.{key}"
    zero = flint.fmpq(0)
    delta = [zero] * k
    if key in ("dead_units", "slope_lines"):
        j = part["parameter"]
        if j >= k:
            return [f"{where}.parameter: {j} is not a parameter (n_params = {k})"]
        if part["name"] != _name(facts, j):
            return [f"{where}.name: theta_{j} is {_name(facts, j)!r}, the certificate says {part['name']!r}"]
        if key == "slope_lines":
            delta[j] = flint.fmpq(1)
            fails = check_slope_units(facts, part["units"], j, f"{where}.units")
        else:
            delta[j] = flint.fmpq(-1)
            fails = check_units_output(facts, part["units"], zero, f"{where}.units")
    else:
        fails, fatal = _sparse_direction(facts, part, where, delta)
        if fatal:
            return fails
        fails += check_units_output(facts, part["units"], rational(part["value"]), f"{where}.units")
    if fails:
        return fails
    if not any(d != 0 for d in delta):
        return [f"{where}: the direction is 0"]
    if facts.X:
        fails = _constant_on_sample(facts, part, delta, where)
        if fails:
            return fails
    sym = facts.symmetry
    M = flint.fmpq_mat(k, sym.symmetry_dim + 1)
    for i in range(k):
        for c in range(sym.symmetry_dim):
            M[i, c] = sym.basis[i, c]
        M[i, sym.symmetry_dim] = delta[i]
    if M.rref()[1] == sym.symmetry_dim:
        return [f"{where}: the direction is in S_H (a rescaling of theta, not a new point)"]
    x = [rational(v) for v in part["x"]]
    if len(x) != cn.widths[0]:
        return [f"{where}.x: {len(x)} entries for {cn.widths[0]} inputs"]
    theta = cn.theta()
    eps = rational(part["eps"])
    if eps <= 0:
        return [f"{where}.eps: {eps} is not positive (the witness must lie on the segment's side t > 0)"]
    # f(x) must move for every small t > 0 (a nonconstant polynomial there): f_0 != f_eps alone proves nothing
    # about small t (the point theta + eps delta may be far, or the function may change only past a kink)
    if not line_along(cn, [x], delta).moving():
        return [f"{where}.x: f(x) is constant along the line for small t > 0: no change of function shown"]
    f0 = outputs_at(cn, x, theta)
    f1 = outputs_at(cn, x, [t + eps * d for t, d in zip(theta, delta)])
    for label, found, claimed in (("f_0", f0, part["f_0"]), ("f_eps", f1, part["f_eps"])):
        if [str(v) for v in found] != [str(rational(c)) for c in claimed]:
            fails.append(f"{where}.{label}: the case gives {[str(v) for v in found]}, the certificate says {claimed}")
    if not fails and f0 == f1:
        fails.append(f"{where}: f_0 = f_eps: the witness shows no change")
    return fails


def check_graph_line(facts: ConstrainedFacts, part: dict[str, Any]) -> list[str]:
    """Failures of a ``line`` part ``{kind: "line", delta, names, t0, probe}`` (empty: not locally identifiable).

    Recomputed from the case alone with the shared polynomial pass
    (:func:`~line_along`): the direction is over the free parameters
    (names as the case gives them) and nonzero; every output on X is constant along ``theta + t delta`` and no
    kinked pre-activation on X has a root in ``(0, t0)``; at the probe ``x*`` some output is not constant for
    small ``t > 0``.  Then every ``theta + t delta`` with small ``t > 0`` has the outputs of ``theta`` on X and
    computes another function, so no symmetry relates it to ``theta``: only exact evaluation is used, valid for
    every layer graph.
    """
    cn, k, where = facts.cn, facts.cn.n_params, "certificate.line"
    zero = flint.fmpq(0)
    delta = [zero] * k
    fails, _fatal = _sparse_direction(facts, part, where, delta)
    if fails:
        return fails
    if not any(d != 0 for d in delta):
        return [f"{where}: the direction is 0"]
    if not facts.X:
        return [f"{where}: no sample"]
    fails = _constant_on_sample(facts, part, delta, where)
    if fails:
        return fails
    probe = [rational(v) for v in part["probe"]]
    if len(probe) != cn.widths[0]:
        return [f"{where}.probe: {len(probe)} entries for {cn.widths[0]} inputs"]
    if not line_along(cn, [probe], delta).moving():
        return [f"{where}.probe: f(x*) is constant along the line for small t > 0: no change of function shown"]
    return []
