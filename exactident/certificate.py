"""Non-identifiability certificates on the boundary, and ``exactident verify-certificate`` (SPEC §2, §4).

A certificate ``{"entering": {...}}`` claims: at the tie resolution ``s``,
``R_Gamma(s) == R_A(s) < dim`` and ``delta`` lies in ``ker Gamma(s)`` and
enters the piece of ``s`` strictly (``sign_t g_t(s) . delta > 0``).  By the
constant-rank argument of ``docs/boundary.md`` (paper Theorem 8's proof on
the piece of ``s``) nearby non-equivalent parameters then give the same
outputs on ``X``.

:func:`build_entering_certificate` (called by :mod:`exactident.boundary`)
writes it.  :func:`verify_certificate` re-checks it **independently** of the
code that produced it: it uses only the case file (parsed by
:func:`exactident.case.load_case`, the validated edge) and its own arithmetic
over ``fractions.Fraction``: its own forward pass and ties, its own check of
the invisible ties and of the free-parameter set (one nonzero fixed outgoing
edge per hidden neuron), ``Gamma(s)`` and ``g_t . delta`` by *forward-mode*
differentiation (the engine uses backpropagation), ``alpha(s)`` by explicit
path enumeration, and ranks by sympy's ``DomainMatrix`` over QQ.

A ``line`` part ``{"delta": {name: "p/q"}, "probe": [x*]}`` (from
:mod:`exactident.line`) claims that ``f_{theta + eps delta}(X) = f_theta(X)``
for all small ``eps > 0`` and that ``f`` changes at ``x*``; the verifier
re-runs the network on polynomials in ``eps`` over Fractions.

Entering part keys: ``resolution`` (ties with ``active``), ``invisible_ties``,
``parameters`` (names of ``tau``'s coordinates, in order), ``delta``
(``name -> "p/q"``), ``derivatives`` (``g_t . delta`` per resolved tie),
``rank_gamma``, ``rank_a``, ``dim``.  A ``rank`` part (modular rank
certificates) is checked by ``exactident.linalg.modular.verify_rank_certificate``;
while that function does not exist the part counts as not checked, hence not
valid.  Nothing is valid unless it was checked: unknown parts or fields, a
missing certificate, a report whose ``verdict`` or ``name`` disagrees with the
certificate or the case are all rejected (exit 3); malformed fields are bad
input (exit 2).
"""

from __future__ import annotations

import json
import math
import re
import sys
from fractions import Fraction
from itertools import product
from typing import Any, Sequence

import flint

from .activation import Tie
from .errors import CaseFormatError, InvariantViolation, UnsupportedCaseError
from .fixed_edges import FixedEdges, free_parameters
from .network import Network
from .rationals import format_fmpq

__all__ = ["build_entering_certificate", "verify_certificate", "run_verify_certificate",
           "MAX_VERIFY_ALPHA"]

#: Largest ``n * |P|`` for which the verifier materialises ``alpha(s)``.
MAX_VERIFY_ALPHA = 1_000_000

_ZERO = flint.fmpq(0)


def build_entering_certificate(net: Network, fixed: FixedEdges, ties: Sequence[Tie], invisible: Sequence[Tie],
                               active: Sequence[bool], delta: Sequence[flint.fmpq], gamma: flint.fmpq_mat,
                               g_rows: Sequence[Sequence[flint.fmpq]], rank_gamma: int,
                               rank_a: int | None) -> dict[str, Any]:
    """Check a found direction exactly and package it as ``{"entering": {...}}``.

    Parameters
    ----------
    net, fixed
        The network and its fixed edges (``tau``'s coordinates).
    ties, active
        The visible ties and their sides in resolution ``s``.
    invisible : list of Tie
        Ties whose side does not change ``alpha`` (left unconstrained).
    delta : list of fmpq, length ``dim``
    gamma : fmpq_mat ``(n N_L, dim)``
        ``Gamma(s)``.
    g_rows : list of list of fmpq
        ``g_t(s)`` per tie.
    rank_gamma, rank_a : int

    Raises
    ------
    InvariantViolation
        If ``Gamma(s) delta != 0``, a sign is not strict, or the ranks do not
        satisfy ``R_Gamma == R_A < dim`` (a bug in the caller).
    """
    dim = net.dim
    col = flint.fmpq_mat(dim, 1, list(delta))
    if any(v != _ZERO for v in (gamma * col).entries()):
        raise InvariantViolation("certificate delta is not in ker Gamma(s)")
    values = [sum((g * d for g, d in zip(row, delta)), _ZERO) for row in g_rows]
    if any((v <= _ZERO) if a else (v >= _ZERO) for v, a in zip(values, active)):
        raise InvariantViolation("certificate delta does not enter the piece strictly")
    if not (rank_a is not None and rank_gamma == rank_a < dim):
        raise InvariantViolation("certificate requested for a resolution where C_N holds")
    names = [p.name for p in free_parameters(net, fixed)]
    res = [{"sample": t.i, "layer": t.l, "neuron": t.v, "active": bool(a)} for t, a in zip(ties, active)]
    return {"entering": {
        "resolution": res,
        "invisible_ties": [{"sample": t.i, "layer": t.l, "neuron": t.v} for t in invisible],
        "parameters": names,
        "delta": {name: format_fmpq(d) for name, d in zip(names, delta)},
        "derivatives": [dict(r, value=format_fmpq(v)) for r, v in zip(res, values)],
        "rank_gamma": rank_gamma, "rank_a": rank_a, "dim": dim,
    }}


# ---------------------------------------------------------------------------------------------
# Independent verifier: Fraction arithmetic only, nothing from boundary/gamma/entering/activation.

_NAME = re.compile(r"(W)_(\d{1,9})\[(\d{1,9}),(\d{1,9})\]|(b)_(\d{1,9})\[(\d{1,9})\]")


class _Bad(Exception):
    """Malformed report (exit 2): carries the JSON path of the field."""

    def __init__(self, where: str, msg: str) -> None:
        super().__init__(msg)
        self.where = where


def _need(obj: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(obj, dict):
        raise _Bad(where, f"expected dict, found {type(obj).__name__}")
    if key not in obj:
        raise _Bad(f"{where}.{key}" if where else key, "missing")
    value = obj[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise _Bad(f"{where}.{key}" if where else key, f"expected {getattr(kind, '__name__', kind)}, "
                   f"found {type(value).__name__}")
    return value


def _frac(text: Any, where: str) -> Fraction:
    if not isinstance(text, str) or not re.fullmatch(r"[+-]?\d+(/\d+)?", text.strip()):
        raise _Bad(where, f"expected a rational string 'p/q', found {text!r}")
    try:
        return Fraction(text.strip())
    except ZeroDivisionError:
        raise _Bad(where, f"zero denominator in {text!r}") from None
    except ValueError as exc:  # more digits than int() accepts
        raise _Bad(where, f"not a usable rational ({exc})") from None


def _tie_key(obj: Any, where: str) -> tuple[int, int, int]:
    return tuple(_need(obj, k, int, where) for k in ("sample", "layer", "neuron"))  # type: ignore[return-value]


def _forward(W, b, x, active_at, dW=None, db=None):
    """Forward pass with a tangent (forward-mode derivative) along ``(dW, db)``.

    ``active_at(l, v, z)`` says whether hidden neuron ``(l, v)`` acts as the
    identity.  Returns per layer ``l = 1..L`` the lists ``z_l`` and ``dz_l``.
    """
    h, dh = list(x), [Fraction(0)] * len(x)
    L = len(W)
    zs, dzs = [], []
    for l in range(1, L + 1):
        Wl, bl = W[l - 1], b[l - 1]
        z = [sum((w * hv for w, hv in zip(row, h)), Fraction(0)) + bv for row, bv in zip(Wl, bl)]
        if dW is None:
            dz = [Fraction(0)] * len(z)
        else:
            dz = [sum((dw * hv for dw, hv in zip(drow, h)), Fraction(0))
                  + sum((w * dhv for w, dhv in zip(row, dh)), Fraction(0)) + dbv
                  for row, drow, dbv in zip(Wl, dW[l - 1], db[l - 1])]
        zs.append(z)
        dzs.append(dz)
        if l < L:
            act = [active_at(l, v, z[v]) for v in range(len(z))]
            h = [zv if a else Fraction(0) for zv, a in zip(z, act)]
            dh = [dv if a else Fraction(0) for dv, a in zip(dz, act)]
    return zs, dzs


def _rank_qq(rows: list[list[Fraction]], ncols: int) -> int:
    from sympy import QQ
    from sympy.polys.matrices import DomainMatrix

    if not rows or ncols == 0:
        return 0
    M = DomainMatrix([[QQ(v.numerator, v.denominator) for v in r] for r in rows], (len(rows), ncols), QQ)
    return int(M.rank())


def _alpha_rows(widths, X, act) -> list[list[Fraction]]:
    """``alpha(s)`` by enumerating every path (one neuron per layer up to ``L-1``) explicitly."""
    L = len(widths) - 1
    rows = []
    for i, x in enumerate(X):
        row = []
        for start in range(L):  # paths starting at layer `start` and ending at layer L-1
            for path in product(*(range(widths[m]) for m in range(start, L))):
                f = Fraction(1)
                for m, u in zip(range(start, L), path):
                    f *= x[u] if m == 0 else (1 if act(i, m, u) else 0)
                row.append(f)
        row.append(Fraction(1))  # the empty path beta
        rows.append(row)
    return rows


def verify_certificate(case, report: Any, source: str = "<report>", *,
                       require_claims: bool = False) -> tuple[bool, list[str]]:
    """Re-check a report's certificate from the case alone.

    Valid only if every part present (``entering``, ``line``, ``rank``) is
    verified, the report's ``name`` is the case's name and, with an
    ``entering`` or ``line`` part, its ``verdict`` is ``not-identifiable``
    (what those parts prove, ``docs/boundary.md``).  Unknown parts or fields,
    a part that cannot be checked, and a report without a certificate are
    *not valid*.

    Parameters
    ----------
    case : Case
    report : dict
        An ``exactident-report/1`` object with a ``certificate``.
    source : str
        Report file name for error messages.
    require_claims : bool
        Require the report's ``name`` and ``verdict`` (the CLI does).  If
        False a bare ``{"certificate": ...}`` is accepted; ``name`` and
        ``verdict`` are still checked when present.

    Returns
    -------
    (valid, messages) : (bool, list of str)
        ``messages`` says what was checked, then what failed (each failure names its field).

    Raises
    ------
    CaseFormatError
        If the report lacks a required field or has one of the wrong type (names the field).
    UnsupportedCaseError
        If ``alpha(s)`` is too large to materialise for the rank check.

    Examples
    --------
    >>> from exactident.case import parse_case
    >>> case = parse_case({"format": "exactident-case/1", "name": "k", "widths": [1, 1, 1],
    ...                    "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]],
    ...                    "sample": [["0"], ["1"], ["-1/2"]]})
    >>> verify_certificate(case, {"name": "k", "verdict": "not-identifiable"})
    (False, ["no certificate to verify (the report has no 'certificate')"])
    >>> line = {"delta": {"b_1[0]": "1", "b_2[0]": "-3"}, "probe": ["-1"]}
    >>> verify_certificate(case, {"name": "k", "verdict": "identifiable", "certificate": {"line": line}})[0]
    False
    """
    try:
        return _verify(case, report, require_claims)
    except _Bad as exc:
        raise CaseFormatError(source, exc.where, str(exc)) from None


_PARTS = ("entering", "line", "rank")
_ENTERING_KEYS = ("resolution", "invisible_ties", "parameters", "delta", "derivatives", "rank_gamma",
                  "rank_a", "dim")
_TIE_KEYS = ("sample", "layer", "neuron")


def _unknown(obj: dict, allowed: Sequence[str], where: str) -> list[str]:
    """Failures for keys the verifier does not understand: what is not checked is not valid."""
    return [f"{where}.{key}: unknown field, not verified" for key in sorted(set(obj) - set(allowed), key=str)]


def _verify(case, report: Any, require_claims: bool) -> tuple[bool, list[str]]:
    if not isinstance(report, dict):
        raise _Bad("", f"expected a JSON object (exactident-report/1), found {type(report).__name__}")
    cert = report.get("certificate")
    if cert is None:  # e.g. an `identifiable` or `inconclusive` report: nothing is proved
        return False, ["no certificate to verify (the report has no 'certificate')"]
    if not isinstance(cert, dict):
        raise _Bad("certificate", f"expected dict, found {type(cert).__name__}")
    if not cert:
        return False, ["no certificate to verify (the report's 'certificate' is empty)"]
    name, verdict = (_need(report, k, str, "") if require_claims or k in report else None
                     for k in ("name", "verdict"))
    fails: list[str] = [f"certificate.{key}: unknown certificate part, not verified"
                        for key in sorted(set(cert) - set(_PARTS), key=str)]
    msgs: list[str] = []
    if name is not None and name != case.name:
        fails.append(f"name: the report is for case {name!r} but the case file is named {case.name!r}")
    if verdict is not None and ("entering" in cert or "line" in cert) and verdict != "not-identifiable":
        fails.append(f"verdict: report says {verdict} but the certificate proves not-identifiable")
    if "rank" in cert:
        fails_rank, msgs_rank = _verify_rank(case, cert["rank"])
        if not fails_rank:
            fails_rank = _rank_claims(case, report, cert["rank"])
        fails, msgs = fails + fails_rank, msgs + msgs_rank
    for part, check in (("entering", _verify_entering), ("line", _verify_line)):
        if part in cert:
            good, more = check(case, _need(cert, part, dict, "certificate"))
            (msgs if good else fails).extend(more)
    return not fails, msgs + fails


_RANK_KEYS = ("fixed_edges", "rank_gamma", "rank_a")


def _rank_claims(case, report: dict, part: dict) -> list[str]:
    """The report's own ranks, ``cs``/``cn`` and verdict must be what the verified ranks give.

    ``part`` has passed ``verify_rank_certificate``; rank certificates exist only
    off the boundary, where SPEC §2's rule is a function of the ranks.
    """
    fails = _unknown(part, _RANK_KEYS, "certificate.rank")
    if not isinstance(part.get("rank_gamma"), dict) or not isinstance(part["rank_gamma"].get("rank"), int):
        return fails + ["certificate.rank.rank_gamma: no certified rank to compare the report with"]
    widths = list(case.network.widths)
    dim = sum(widths[l] * widths[l + 1] for l in range(len(widths) - 1)) + widths[-1]
    rg = part["rank_gamma"]["rank"]
    ra = part["rank_a"].get("rank_a") if isinstance(part.get("rank_a"), dict) else None
    cs = rg == dim
    cn = None if ra is None and not cs else not (ra is not None and rg == ra and rg < dim)
    claims = {"dim": dim, "rank_gamma": rg, "cs": cs}
    if ra is not None:
        claims["rank_a"] = ra
    if cn is not None:
        claims["cn"] = cn
    if report.get("on_boundary") is True:
        fails.append("certificate.rank: a rank certificate does not decide a boundary case")
    elif report.get("degenerate") is not True and "verdict" in report:
        verdict = ("identifiable" if cs else "not-identifiable" if cn is False
                   else "inconclusive" if cn else None)
        if verdict is None:
            fails.append("certificate.rank: rank_a is missing, so the ranks do not decide the verdict")
        else:
            claims["verdict"] = verdict
    for key, value in claims.items():
        if key in report and report[key] != value:
            fails.append(f"{key}: report says {report[key]!r} but the certified ranks give {value!r}")
    return fails


def _verify_rank(case, part: Any) -> tuple[list[str], list[str]]:
    """The ``rank`` part, by ``exactident.linalg.modular.verify_rank_certificate`` (problems; [] = valid)."""
    try:
        from .linalg.modular import verify_rank_certificate  # type: ignore[attr-defined]
    except ImportError:
        return ["rank part could not be checked (exactident.linalg.modular.verify_rank_certificate "
                "is not available): not verified"], []
    try:
        problems = verify_rank_certificate(case, part)
    except CaseFormatError as exc:  # malformed rank part: bad input, like the other parts
        field = exc.field if exc.field.startswith("[") or not exc.field else f".{exc.field}"
        raise _Bad(f"certificate.rank{field}", exc.message) from None
    except InvariantViolation as exc:
        problems = [str(exc)]
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:  # a crash proves nothing
        return [f"rank part could not be checked (verify_rank_certificate raised "
                f"{type(exc).__name__}: {exc})"], []
    if not isinstance(problems, list) or not all(isinstance(p, str) for p in problems):
        return [f"rank part could not be checked (verify_rank_certificate returned "
                f"{type(problems).__name__}, expected a list of problems)"], []
    if problems:
        return [f"rank part: {p}" for p in problems], []
    return [], ["rank part valid"]


def _poly_add(p, q):
    n = max(len(p), len(q))
    return [(p[k] if k < len(p) else 0) + (q[k] if k < len(q) else 0) for k in range(n)]


def _poly_mul(p, q):
    out = [Fraction(0)] * max(len(p) + len(q) - 1, 0)
    for a, pa in enumerate(p):
        for c, qc in enumerate(q):
            out[a + c] += pa * qc
    return out


def _line_forward(W, b, dW, db, x):
    """Outputs of ``theta + eps delta`` at ``x`` as polynomials in ``eps``, for small ``eps > 0``."""
    h = [[v] for v in x]
    L = len(W)
    for l in range(1, L + 1):
        z = []
        for r in range(len(W[l - 1])):
            acc = [b[l - 1][r], db[l - 1][r]]
            for c in range(len(h)):
                acc = _poly_add(acc, _poly_mul([W[l - 1][r][c], dW[l - 1][r][c]], h[c]))
            z.append(acc)
        if l < L:  # relu for small eps > 0: the sign of the lowest nonzero coefficient
            z = [p if next((c for c in p if c != 0), 0) > 0 else [] for p in z]
        h = z
    return h


def _as_fractions(case) -> tuple[list, list, list]:
    """``W``, ``b``, ``X`` of the case as nested lists of Fraction (the verifier's own arithmetic)."""
    def fr(q) -> Fraction:
        return Fraction(int(q.p), int(q.q))

    W = [[[fr(q) for q in row] for row in M.table()] for M in case.network.W]
    b = [[fr(q) for q in bl] for bl in case.network.b]
    X = [[fr(q) for q in row] for row in case.X]
    return W, b, X


def _verify_line(case, line: dict) -> tuple[bool, list[str]]:
    where = "certificate.line"
    unknown = _unknown(line, ("delta", "probe"), where)
    net = case.network
    widths = list(net.widths)
    L = len(widths) - 1
    W, b, X = _as_fractions(case)
    delta = {k: _frac(v, f"{where}.delta[{k!r}]") for k, v in _need(line, "delta", dict, where).items()}
    probe = [_frac(v, f"{where}.probe[{k}]") for k, v in enumerate(_need(line, "probe", list, where))]
    dW = [[[Fraction(0)] * widths[l - 1] for _ in range(widths[l])] for l in range(1, L + 1)]
    db = [[Fraction(0)] * widths[l] for l in range(1, L + 1)]
    fails = []
    for name, d in delta.items():
        m = _NAME.fullmatch(name)
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
        if any(c != 0 for p in _line_forward(W, b, dW, db, x) for c in p[1:]):
            fails.append(f"sample {i}: the outputs change along theta + eps delta")
    if all(c == 0 for p in _line_forward(W, b, dW, db, probe) for c in p[1:]):
        fails.append("the probe point does not show a change of f: non-equivalence not proved")
    if fails:
        return False, fails
    return True, ["line part valid: f_{theta + eps delta}(X) = f_theta(X) for all small eps > 0, "
                  "and f changes at the probe point"]


def _verify_entering(case, ent: dict) -> tuple[bool, list[str]]:
    where = "certificate.entering"
    net = case.network
    widths = list(net.widths)
    L = len(widths) - 1
    W, b, X = _as_fractions(case)
    n = len(X)

    fails: list[str] = _unknown(ent, _ENTERING_KEYS, where)
    resolution = _need(ent, "resolution", list, where)
    sides: dict[tuple[int, int, int], bool] = {}
    for k, r in enumerate(resolution):
        key = _tie_key(r, f"{where}.resolution[{k}]")
        if key in sides:
            fails.append(f"{where}.resolution[{k}]: tie {key} is resolved twice")
        sides[key] = _need(r, "active", bool, f"{where}.resolution[{k}]")
        fails += _unknown(r, _TIE_KEYS + ("active",), f"{where}.resolution[{k}]")
    invisible = []
    for k, r in enumerate(_need(ent, "invisible_ties", list, where)):
        invisible.append(_tie_key(r, f"{where}.invisible_ties[{k}]"))
        fails += _unknown(r, _TIE_KEYS, f"{where}.invisible_ties[{k}]")
    names = _need(ent, "parameters", list, where)
    delta_in = _need(ent, "delta", dict, where)
    delta = {k: _frac(v, f"{where}.delta[{k!r}]") for k, v in delta_in.items()}
    claimed = {k: _need(ent, k, int, where) for k in ("rank_gamma", "rank_a", "dim")}
    # One claimed g_t . delta per resolved tie, on the same side: the certificate must show every sign.
    claimed_values: dict[tuple[int, int, int], Fraction] = {}
    for k, r in enumerate(_need(ent, "derivatives", list, where)):
        at = f"{where}.derivatives[{k}]"
        key = _tie_key(r, at)
        value = _frac(_need(r, "value", str, at), f"{at}.value")
        if key in claimed_values:
            fails.append(f"{at}: tie {key} has two derivatives")
        claimed_values[key] = value
        if key not in sides:
            fails.append(f"{at}: tie {key} is not in the resolution")
        elif "active" in r and _need(r, "active", bool, at) != sides[key]:
            fails.append(f"{at}: side {r['active']} differs from the resolution's {sides[key]}")
        fails += _unknown(r, _TIE_KEYS + ("active", "value"), at)
    for key in sides:
        if key not in claimed_values:
            fails.append(f"derivatives: no g_t.delta for the resolved tie (sample {key[0]}, layer {key[1]}, "
                         f"neuron {key[2]})")

    # 1. Own forward pass and ties; theta must not be in S.
    Z = [_forward(W, b, x, lambda l, v, z: z > 0)[0] for x in X]
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
        m = _NAME.fullmatch(name) if isinstance(name, str) else None
        if m is None:
            raise _Bad(f"{where}.parameters[{k}]", f"expected a name like 'W_1[0,0]' or 'b_1[0]', found {name!r}")
        parsed.append(("W", int(m[2]), int(m[3]), int(m[4])) if m[1] else ("b", int(m[6]), int(m[7]), None))
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
            return sides[key] if key in sides else (True if key in ties else z > 0)
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
        _, dz = _forward(W, b, x, active_at_sample(i), dW, db)
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
            col.extend(_forward(W, b, x, active_at_sample(i), cW, cb)[1][-1])
        columns.append(col)
    gamma_rows = [list(r) for r in zip(*columns)] if columns else []
    rg = _rank_qq(gamma_rows, dim)
    n_p = sum(math.prod(widths[m:L]) for m in range(L)) + 1
    if n * n_p > MAX_VERIFY_ALPHA:
        raise UnsupportedCaseError(f"alpha(s) has {n} x {n_p} entries: too large for verify-certificate")
    ra = widths[-1] * _rank_qq(_alpha_rows(widths, X, lambda i, m, u: active_at_sample(i)(m, u, Z[i][m - 1][u])),
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


def run_verify_certificate(case_path: str, report_path: str) -> int:
    """CLI body of ``exactident verify-certificate CASE REPORT.json``.

    Returns
    -------
    int
        0 valid, 3 invalid (each failure printed), 2 bad input (one line naming file and field).
    """
    from .case import load_case

    try:
        try:
            case = load_case(case_path)
        except RecursionError:
            raise CaseFormatError(case_path, "", "not valid JSON (nested too deeply)") from None
        report = _read_report(report_path)
        if isinstance(report, list):  # several cases: take the one named like the case
            named = [r for r in report if isinstance(r, dict) and r.get("name") == case.name]
            if len(named) != 1:
                raise CaseFormatError(report_path, "", f"expected one report named {case.name!r}, found {len(named)}")
            report = named[0]
        valid, msgs = verify_certificate(case, report, source=report_path, require_claims=True)
    except (CaseFormatError, UnsupportedCaseError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for m in msgs:
        print(m)
    print("certificate VALID" if valid else "certificate INVALID")
    return 0 if valid else 3


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:  # json keeps the last value silently; a reader might see the first
            raise _DuplicateKey(key)
        out[key] = value
    return out


class _DuplicateKey(Exception):
    """A JSON object with a repeated key (carries the key)."""


def _read_report(path: str) -> Any:
    """The report file as plain JSON; every failure is a one-line :class:`CaseFormatError`."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise CaseFormatError(path, "", f"cannot read file ({exc})") from None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise CaseFormatError(path, "", f"not valid JSON ({exc.msg}, line {exc.lineno})") from None
    except RecursionError:
        raise CaseFormatError(path, "", "not valid JSON (nested too deeply)") from None
    except _DuplicateKey as exc:
        raise CaseFormatError(path, "", f"not valid JSON (duplicate key {exc.args[0]!r})") from None
    except ValueError as exc:  # e.g. an integer with more digits than int() accepts
        raise CaseFormatError(path, "", f"not valid JSON ({exc})") from None
