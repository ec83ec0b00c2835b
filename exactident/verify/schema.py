"""The one schema of ``exactident-report/1``: every field's JSON type and range, unknown fields refused.

``verify-certificate`` checks a report against :data:`REPORT` before it reads any
field (:func:`validate_report`): a field of the wrong type, out of range, missing
when required, or not in the schema is reported with its JSON path
(``neurons[0].coupled[1].neuron: expected int, found str``), and the
report is invalid (exit 3).  The checkers of :mod:`exactident.verify` then read
fields that are known to have the right shape; which *values* are true is theirs
to decide.  The schema is declarative (a few combinators below, no dependency);
docs/boundary.md ("What VALID means") lists the rules.  A layer graph's report (with
``architecture``) is checked against ``GRAPH_REPORT``.

What the schema leaves open, on purpose: ``numeric`` and ``provenance`` are JSON
objects of any content (the float cross-check is not verified; ``provenance`` must
equal the case file's, compared as a whole); which keys a rank bound may carry for
its ``kind`` and ``source`` is the rank checker's rule (it refuses the others).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from exactident.verify.arith import PARAMETER_NAME

__all__ = ["GRAPH_REPORT", "REPORT", "AnyOf", "Anything", "Enum", "Int", "List", "Null", "Number", "Obj", "ParamMap",
           "Rational", "SchemaError", "Spec", "Tuple", "Type", "validate", "validate_report"]


class SchemaError(Exception):
    """A report field that does not fit the schema; ``where`` is its JSON path."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where or '<report>'}: {message}")
        self.where = where


def _found(value: Any) -> str:
    """The JSON type of ``value`` as the readers name it (``int``, ``str``, ``Decimal`` for a JSON fraction)."""
    return "null" if value is None else type(value).__name__


def _shown(value: Any) -> str:
    """A short scalar as itself (``'dead'``, ``True``), anything else by its type."""
    return repr(value) if isinstance(value, (str, bool, int)) and len(repr(value)) <= 60 else _found(value)


def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


class Spec:
    """One node of the schema: ``check(value, where)`` raises :class:`SchemaError` or returns."""

    what = "a value"

    def check(self, value: Any, where: str) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


class Int(Spec):
    """A JSON integer (``true`` is not one) in ``[lo, hi]``."""

    def __init__(self, lo: int | None = 0, hi: int | None = None) -> None:
        self.lo, self.hi = lo, hi
        self.what = "a nonnegative int" if lo == 0 and hi is None else "an int" if lo is None else f"an int >= {lo}"

    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, int) or isinstance(value, bool):
            raise SchemaError(where, f"expected int, found {_found(value)}")
        if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
            raise SchemaError(where, f"expected {self.what}, found {value}")


class Number(Spec):
    """A finite JSON number in ``[lo, hi]``."""

    def __init__(self, lo: float, hi: float) -> None:
        self.lo, self.hi = lo, hi
        self.what = f"a number in [{lo}, {hi}]"

    def check(self, value: Any, where: str) -> None:
        if (not isinstance(value, (int, float, Decimal)) or isinstance(value, bool) or not math.isfinite(value)
                or not self.lo <= value <= self.hi):
            raise SchemaError(where, f"expected {self.what}, found {_found(value)}")


class Type(Spec):
    """A value of one JSON type: ``bool``, ``str``, or (contents unchecked) ``dict``."""

    def __init__(self, kind: type) -> None:
        self.kind = kind
        self.what = kind.__name__

    def check(self, value: Any, where: str) -> None:
        if type(value) is not self.kind:
            raise SchemaError(where, f"expected {self.what}, found {_found(value)}")


class Anything(Spec):
    """Any JSON value (a field compared as a whole by its checker, or not verified)."""

    what = "any JSON value"

    def check(self, value: Any, where: str) -> None:
        return None


class Enum(Spec):
    """One of a few JSON values (compared with their type: ``true`` is not ``1``)."""

    def __init__(self, *values: Any) -> None:
        self.values = values
        self.what = " or ".join(repr(v) for v in values)

    def check(self, value: Any, where: str) -> None:
        if not any(type(value) is type(v) and value == v for v in self.values):
            raise SchemaError(where, f"expected {self.what}, found {_shown(value)}")


_RATIONAL = re.compile(r"[+-]?[0-9]+(?:/([0-9]+))?", re.ASCII)


class Rational(Spec):
    """A rational string ``"p/q"`` or ``"p"`` (ASCII digits, nonzero denominator)."""

    what = "a rational string 'p/q'"

    def check(self, value: Any, where: str) -> None:
        m = _RATIONAL.fullmatch(value) if isinstance(value, str) else None
        if m is None:
            shown = repr(value[:60]) if isinstance(value, str) else _found(value)
            raise SchemaError(where, f"expected a rational string 'p/q' (ASCII digits), found {shown}")
        if m.group(1) is not None and not m.group(1).strip("0"):
            raise SchemaError(where, f"zero denominator in {value[:60]!r}")


class Null(Spec):
    """``null`` or a value of ``spec``."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.what = f"null or {spec.what}"

    def check(self, value: Any, where: str) -> None:
        if value is not None:
            self.spec.check(value, where)


class AnyOf(Spec):
    """A value of one of ``specs`` (told apart by JSON type first: the message names the closest)."""

    def __init__(self, *specs: Spec) -> None:
        self.specs = specs
        self.what = " or ".join(s.what for s in specs)

    def check(self, value: Any, where: str) -> None:
        errors = []
        for spec in self.specs:
            try:
                spec.check(value, where)
                return
            except SchemaError as exc:
                errors.append(exc)
        deeper = [e for e in errors if e.where != where]
        if len(deeper) == 1:  # the value had the right shape for one alternative: its inner error says most
            raise deeper[0]
        raise SchemaError(where, f"expected {self.what}, found {_shown(value)}")


class List(Spec):
    """A JSON array of ``item`` (``length``: exactly that many)."""

    def __init__(self, item: Spec, length: int | None = None) -> None:
        self.item, self.length = item, length
        self.what = "list"

    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, list):
            raise SchemaError(where, f"expected list, found {_found(value)}")
        if self.length is not None and len(value) != self.length:
            raise SchemaError(where, f"expected a list of {self.length} entries, found {len(value)}")
        for k, item in enumerate(value):
            self.item.check(item, f"{where}[{k}]")


class Tuple(Spec):
    """A JSON array of exactly ``len(items)`` entries, entry ``k`` of ``items[k]``."""

    def __init__(self, *items: Spec) -> None:
        self.items = items
        self.what = "[" + ", ".join(s.what for s in items) + "]"

    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, list) or len(value) != len(self.items):
            shown = f"{len(value)} entries" if isinstance(value, list) else _found(value)
            raise SchemaError(where, f"expected {self.what}, found {shown}")
        for k, (item, spec) in enumerate(zip(value, self.items)):
            spec.check(item, f"{where}[{k}]")


class Obj(Spec):
    """A JSON object with the ``required`` and ``optional`` fields only (unknown fields refused)."""

    what = "dict"

    def __init__(self, required: Mapping[str, Spec], optional: Mapping[str, Spec] | None = None) -> None:
        self.required, self.optional = dict(required), dict(optional or {})

    def fields(self) -> dict[str, Spec]:
        return {**self.required, **self.optional}

    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise SchemaError(where, f"expected dict, found {_found(value)}")
        known = self.fields()
        for key in value:
            if key not in known:
                what = {"": "report field", "certificate": "certificate part"}.get(where, "field")
                raise SchemaError(_at(where, str(key)), f"unknown {what}, not verified")
        for key in self.required:
            if key not in value:
                raise SchemaError(_at(where, key), "missing")
        for key, item in value.items():
            known[key].check(item, _at(where, key))


class ParamMap(Spec):
    """An object ``{parameter name: rational string}`` (names ``W_l[row,col]``, ``b_l[row]``)."""

    what = "dict"

    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise SchemaError(where, f"expected {self.what}, found {_found(value)}")
        for key, item in value.items():
            at = f"{where}[{key!r}]"
            if not PARAMETER_NAME.fullmatch(key):
                raise SchemaError(at, "expected a parameter name W_l[row,col] or b_l[row]")
            Rational().check(item, at)


# ---------------------------------------------------------------- the report

NAT, BOOL, STR, RAT = Int(), Type(bool), Type(str), Rational()
LAYER = Int(1)
TIE = Obj({"sample": NAT, "layer": LAYER, "neuron": NAT})
SIDED_TIE = Obj({"sample": NAT, "layer": LAYER, "neuron": NAT, "active": BOOL})
FIXED_EDGES = List(Tuple(LAYER, NAT, NAT))
#: One matrix's rank certificate (docs/modular.md); which bound keys go with which kind is the rank checker's.
RANK_ONE = Obj({"shape": List(NAT, 2)},
               {"rank": NAT, "rank_a": NAT, "rank_a_lower": NAT,
                "lower": Obj({"prime": NAT, "rank_mod_p": NAT},
                             {"matrix": STR, "rows": AnyOf(Enum("all"), List(NAT))}),
                "upper": Obj({"kind": STR}, {"bound": NAT, "source": STR, "nullity": NAT, "primes": List(NAT),
                                              "kernel": List(List(Tuple(NAT, RAT)))})})
RANK_PART = Obj({"rank_gamma": RANK_ONE}, {"fixed_edges": FIXED_EDGES, "rank_a": RANK_ONE})
NONEQUIVALENCE = Obj({"invariant": Enum("path-products", "first-layer-rays")},
                     {"path": Obj({"start": NAT, "neurons": List(NAT), "output": NAT}),
                      "coefficients": List(RAT), "neuron": NAT})
CERTIFICATE = Obj({}, {
    "rank": RANK_PART,
    "boundary": Obj({"ties": List(TIE), "invisible_ties": List(Obj({"sample": NAT, "layer": LAYER, "neuron": NAT,
                                                                     "blocked_by": LAYER}))},
                    {"fixed_edges": FIXED_EDGES,
                     "resolutions": List(Obj({"active": List(BOOL), "rank_gamma": RANK_ONE},
                                             {"rank_a": RANK_ONE, "reachable": Obj({"delta": ParamMap()})}))}),
    "entering": Obj({"resolution": List(SIDED_TIE), "invisible_ties": List(TIE), "parameters": List(STR),
                     "delta": ParamMap(), "derivatives": List(Obj({"sample": NAT, "layer": LAYER, "neuron": NAT,
                                                                   "value": RAT}, {"active": BOOL})),
                     "rank_gamma": NAT, "rank_a": NAT, "dim": NAT}, {"nonequivalence": NONEQUIVALENCE}),
    # the plain MLP's line (delta by name), or a layer graph's (kind, delta by index, names; the strict form is
    # exactident.verify.schema.GRAPH_REPORT's, and the plain verifier refuses a part with a kind)
    "line": Obj({"delta": AnyOf(ParamMap(), List(Tuple(NAT, RAT))), "t0": Null(RAT)},
                {"probe": List(RAT), "nonequivalence": NONEQUIVALENCE, "kind": Enum("line"), "names": List(STR)}),
    "structural": Obj({"mechanism": Enum("dead-neuron", "untouched-input", "proportional-neurons",
                                         "always-active-block", "unpinned-hyperplane"),
                       "neurons": List(Tuple(LAYER, NAT)), "t0": Null(RAT)},
                      {"input": NAT, "ratio": RAT}),
    "degenerate": Obj({"layer": LAYER, "neuron": NAT, "why": Enum("outgoing", "incoming")}),
    "free_rank": Obj({"kind": Enum("free-rank"), "ties": List(TIE),
                      "resolutions": List(Obj({"active": List(BOOL), "rank_gamma": RANK_ONE}))},
                     {"persistent": List(NAT)}),
    "dead_units": Obj({"kind": Enum("dead-units"), "parameter": NAT, "name": STR, "units": List(Tuple(LAYER, NAT)),
                       "direction": Enum("-1"), "t0": Null(RAT), "eps": RAT, "x": List(RAT), "f_0": List(RAT),
                       "f_eps": List(RAT)}),
    "submersion": Obj({"kind": Enum("submersion"), "y": List(List(RAT)), "prime": NAT, "rank_x": NAT,
                       "rank_xy": NAT}),
    "entering_submersion": Obj({"kind": Enum("entering-submersion"), "active": List(BOOL),
                                "delta": List(Tuple(NAT, RAT)), "y": List(RAT), "prime": NAT, "rank_x": NAT}),
    "constant_rank": Obj({"kind": Enum("constant-rank"), "y": List(List(RAT)), "prime": NAT, "rank_a": NAT,
                          "rank_x": NAT, "rank_xy": NAT}),
    "slope_lines": Obj({"kind": Enum("slope-lines"), "parameter": NAT, "name": STR, "units": List(Tuple(LAYER, NAT)),
                        "direction": Enum("1"), "t0": Null(RAT), "eps": RAT, "x": List(RAT), "f_0": List(RAT),
                        "f_eps": List(RAT)}),
    "constant_units": Obj({"kind": Enum("constant-units"), "units": List(Tuple(LAYER, NAT)), "value": RAT,
                           "delta": List(Tuple(NAT, RAT)), "names": List(STR), "t0": Null(RAT), "eps": RAT,
                           "x": List(RAT),
                           "f_0": List(RAT), "f_eps": List(RAT)}),
})
PATTERN = Obj({"ties": List(SIDED_TIE), "rank_gamma": Null(NAT), "rank_a": Null(NAT), "cs": Null(BOOL),
               "cn": Null(BOOL)},
              {"reachable": AnyOf(Enum(True), Enum("unknown"))})
PARAMETER = Obj({"name": STR, "class": Enum("fixed", "identifiable", "not-identifiable", "first-order-determined",
                                            "unknown")},
                {"by": Enum("C_S", "C_N", "line", "entering"), "witness": AnyOf(Tuple(NAT, NAT), Enum("certificate")),
                 "why": STR})
NEURON = Obj({"layer": LAYER, "neuron": NAT, "n_active": NAT, "n_tie": NAT, "n_inactive": NAT,
              "hyperplane_rank": NAT, "hyperplane_full": NAT, "pinned": BOOL, "dead": BOOL, "always_active": BOOL,
              "twins": List(Obj({"neuron": NAT, "ratio": RAT})), "under_determined": BOOL, "n_moved": NAT,
              "coupled": List(Obj({"neuron": NAT, "both": NAT, "only_this": NAT, "only_other": NAT})), "why": STR})
KERNEL_BLOCK = Obj({"resolution": Null(NAT), "rank_gamma": NAT,
                    "directions": List(Obj({"delta": ParamMap()}, {"line": BOOL}))})
VERDICT = Enum("identifiable", "not-identifiable", "inconclusive", "degenerate")
#: Why no tie resolution was enumerated: the engine's ``--max-resolutions`` and ``k`` of the ``2^k`` resolutions.
NOT_ENUMERATED = Obj({"why": Enum("cap"), "max_resolutions": NAT, "log2_resolutions": NAT})
RULE = Enum("theorem-9", "boundary-cs", "theorem-8", "boundary-entering", "line", "dead-neuron", "untouched-input",
            "proportional-neurons", "always-active-block", "unpinned-hyperplane", "degenerate", "none", "free-rank",
            "dead-units", "constant-units", "slope-lines", "submersion", "entering-submersion", "constant-rank")
#: ``exactident-report/1`` as ``check --json`` and ``explain --json`` write it (docs/cli.md).
REPORT = Obj({}, {"name": STR, "verdict": VERDICT,
    "format": Enum("exactident-report/1"), "widths": List(Int(1)), "n_samples": NAT, "dim": NAT,
    "rank_gamma": Null(NAT), "rank_a": Null(NAT), "cs": Null(BOOL), "cn": Null(BOOL), "degenerate": BOOL,
    "on_boundary": Null(BOOL), "n_ties": Null(NAT), "reason": STR, "decided_by": RULE, "patterns": List(PATTERN),
    "numeric": Type(dict), "certificate": Null(CERTIFICATE), "summary": List(STR),
    "certified_by": Obj({}, {"rank_gamma": STR, "rank_a": STR}), "rank_a_lower_bound": Null(NAT),
    "provenance": Anything(), "certified": BOOL, "error_probability": Number(0, 1), "timed_out": BOOL,
    "stage": STR, "parameters": List(PARAMETER), "neurons": List(NEURON), "kernel_basis": List(KERNEL_BLOCK),
    "explanation": List(STR), "rank_gamma_interval": List(NAT, 2),
    "montecarlo": Obj({"rank_gamma": NAT, "error_probability": Number(0, 1)}),
    "rank_gamma_interval_why": Obj({"why": Enum("exact-rank-costly", "lifting-capped", "verdict-first"),
                                    "missing_vectors": NAT},
                                   {"exact_seconds": Number(0, math.inf), "verdict_seconds": Number(0, math.inf),
                                    "budget_seconds": Number(0, math.inf)}),
    "architecture": Obj({"features": List(STR), "n_params": NAT, "rank_t": NAT, "symmetry_dim": NAT, "dim_free": NAT,
                         "input_shape": List(NAT), "softmax_rank_bound": NAT}),
    "resolutions_not_enumerated": NOT_ENUMERATED,
    "rules": List(Obj({"rule": STR, "status": Enum("decided", "tried", "not-applicable", "not-run"), "why": STR}))})


def validate(value: Any, spec: Spec, where: str = "") -> str | None:
    """``None`` when ``value`` fits ``spec``, else one line ``path: what is wrong``.

    Examples
    --------
    >>> validate({"neuron": "1"}, Obj({"neuron": NAT}))
    'neuron: expected int, found str'
    >>> validate({"neuron": 1, "extra": 0}, Obj({"neuron": NAT}))
    'extra: unknown report field, not verified'
    """
    try:
        spec.check(value, where)
    except SchemaError as exc:
        return str(exc)
    return None


def validate_report(report: Any, require_claims: bool = True) -> str | None:
    """:func:`validate` against :data:`REPORT` (``exactident-report/1``).

    ``require_claims``: ``name`` and ``verdict`` must be present (the CLI's rule); without it a
    bare ``{"certificate": ...}`` fits.
    """
    if isinstance(report, dict) and report.get("format") not in (None, "exactident-report/1"):
        fmt = report["format"]
        return (f"format: report says {fmt!r}, expected 'exactident-report/1'"
                + (" (a design report has no certificate to verify)" if fmt == "exactident-design/1" else ""))
    if isinstance(report, dict) and require_claims:
        for key in ("name", "verdict"):
            if key not in report:
                return f"{key}: missing"
    return validate(report, REPORT)

#: A layer graph's rank certificate of ``Gamma_free(s)`` (no ``R_A``: Theorem 8 is not proved for it).
FREE_RANK_ONE = Obj({"shape": List(NAT, 2)},
                    {"rank": NAT, "lower": Obj({"prime": NAT, "rank_mod_p": NAT},
                                                    {"matrix": STR, "rows": AnyOf(Enum("all"), List(NAT))}),
                     "upper": Obj({"kind": STR}, {"bound": NAT, "source": STR, "nullity": NAT, "primes": List(NAT),
                                                   "kernel": List(List(Tuple(NAT, RAT)))})})
WITNESS = {"eps": RAT, "x": List(RAT), "f_0": List(RAT), "f_eps": List(RAT)}
UNITS = List(Tuple(NAT, NAT))  # (layer, unit); layer 0 is an input coordinate (a blank input, dead_units)
#: The schema of a layer graph's report (``exactident-report/1`` with ``architecture``).
GRAPH_REPORT = Obj({"architecture": Obj({"features": List(STR), "n_params": NAT, "rank_t": NAT,
                                          "symmetry_dim": NAT, "dim_free": NAT},
                                         {"input_shape": List(NAT), "softmax_rank_bound": NAT})}, {
    "name": STR, "verdict": Enum("identifiable", "not-identifiable", "inconclusive", "degenerate"),
    "format": Enum("exactident-report/1"), "widths": List(Int(1)), "n_samples": NAT, "dim": NAT,
    "rank_gamma": Null(NAT), "rank_a": AnyOf(Type(type(None)), NAT), "cs": Null(BOOL),
    "cn": AnyOf(Type(type(None)), BOOL), "degenerate": BOOL, "on_boundary": Null(BOOL), "n_ties": Null(NAT),
    "reason": STR, "decided_by": STR, "numeric": Type(dict), "summary": List(STR), "provenance": Anything(),
    "certified": BOOL, "timed_out": BOOL, "stage": STR, "error_probability": Number(0, 1),
    "rank_gamma_interval": List(NAT, 2), "resolutions_not_enumerated": NOT_ENUMERATED,
    "montecarlo": Obj({"rank_gamma": NAT, "error_probability": Number(0, 1)}),
    "parameters": List(Obj({"name": STR, "index": NAT, "class": Enum(
        "gauge", "identifiable", "not-identifiable", "first-order-determined", "undetermined", "unknown")},
        {"by": STR, "witness": AnyOf(Enum("certificate"), List(NAT, 2)), "line": Enum(True), "why": STR})),
    "units": List(Obj({key: Anything() for key in (
        "layer", "unit", "name", "kind", "slope", "slope_parameter", "n_active", "n_tie", "n_slope_side", "dead",
        "silent", "constant", "local_rank", "local_full", "pinned")})),
    "channels": List(Type(dict)),
    "kernel_basis": List(Obj({"active": AnyOf(Type(type(None)), List(BOOL)), "rank_gamma": NAT,
                              "directions": List(Obj({"delta": Type(dict)}, {"line": Enum(True)}))})),
    "explanation": List(STR),
    "patterns": List(Obj({"ties": List(Obj({"sample": NAT, "layer": Int(1), "neuron": NAT, "active": BOOL})),
                          "rank_gamma": Null(NAT), "rank_a": Null(NAT), "cs": Null(BOOL), "cn": Null(BOOL)},
                         {"reachable": AnyOf(Enum(True), Enum("unknown"))})),
    "certificate": Null(Obj({}, {
        "free_rank": Obj({"kind": Enum("free-rank"), "ties": List(TIE),
                          "resolutions": List(Obj({"active": List(BOOL), "rank_gamma": FREE_RANK_ONE}))},
                         {"persistent": List(NAT)}),
        "submersion": Obj({"kind": Enum("submersion"), "y": List(List(RAT)), "prime": NAT, "rank_x": NAT,
                           "rank_xy": NAT}),
        "entering_submersion": Obj({"kind": Enum("entering-submersion"), "active": List(BOOL),
                                    "delta": List(Tuple(NAT, RAT)), "y": List(RAT), "prime": NAT,
                                    "rank_x": NAT}),
        "constant_rank": Obj({"kind": Enum("constant-rank"), "y": List(List(RAT)), "prime": NAT,
                              "rank_a": NAT, "rank_x": NAT, "rank_xy": NAT}),
        "dead_units": Obj({"kind": Enum("dead-units"), "parameter": NAT, "name": STR, "units": UNITS,
                           "direction": Enum("-1"), "t0": Null(RAT), **WITNESS}),
        "slope_lines": Obj({"kind": Enum("slope-lines"), "parameter": NAT, "name": STR, "units": UNITS,
                            "direction": Enum("1"), "t0": Null(RAT), **WITNESS}),
        "constant_units": Obj({"kind": Enum("constant-units"), "units": UNITS, "value": RAT,
                               "delta": List(Tuple(NAT, RAT)), "names": List(STR), "t0": Null(RAT),
                               **WITNESS}),
        "line": Obj({"kind": Enum("line"), "delta": List(Tuple(NAT, RAT)), "names": List(STR),
                     "t0": Null(RAT), "probe": List(RAT)})})),
    "rules": List(Obj({"rule": STR, "status": Enum("decided", "tried", "not-applicable", "not-run"), "why": STR}))})
