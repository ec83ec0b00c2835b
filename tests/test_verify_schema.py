"""One schema for every report field (exactident.verify.schema): a malformed report is invalid (exit 3)
and the failure names the field's JSON path; the verifier never crashes on one (docs/boundary.md).

The walk takes genuine reports of every kind ``verify-certificate`` reads (``check``, ``check
--all-ranks``, past the resolution cap, ``explain``), puts a value of the wrong JSON type at every
leaf and every container in turn, and expects exactly one failure that starts with that path.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from exactident.check import check
from exactident.cli import main
from exactident.explain.command import explain_reports
from exactident.io.case import load_case, parse_case
from exactident.verify import schema as S
from exactident.verify.certificate import verify_certificate

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import kernel_cases as KC  # noqa: E402
import structural_cases as SC  # noqa: E402

CASES = ROOT / "cases"
#: Not walked: the float cross-check is not verified (any object), ``provenance`` is compared whole.
OPAQUE = ("numeric", "provenance")


def _reports() -> list[tuple[Any, dict]]:
    """Genuine reports: every certificate part, every explain field, capped and uncapped boundaries."""
    out = []
    named = ["tiny-111-kink", "boundary-dead-neuron", "boundary-invisible-tie", "boundary-second-order-tie",
             "boundary-origin-zero-biases"]
    objs = [json.loads((CASES / f"{n}.json").read_text()) for n in named] + [SC.DEAD, SC.TWINS, SC.UNTOUCHED,
                                                                             KC.CRT_LOWER]
    for obj in objs:
        case = parse_case(obj)
        for kw in ({}, {"all_ranks": True}, {"max_resolutions": 1}):
            out.append((case, check(case, numeric=False, **kw).to_dict()))
        report = check(case, numeric=False)
        explain_reports([case], [report])
        out.append((case, report.to_dict()))
    # a rank-deficient trained network whose verdict needs only a certified interval of R_Gamma
    # (rank_gamma_interval, montecarlo, the interval form of the rank part)
    iris = load_case(CASES / "iris-mlp-4-8-8-3.json")
    out.append((iris, check(iris, numeric=False, verdict_first=True).to_dict()))
    return out


@pytest.fixture(scope="module")
def reports():
    return _reports()


def _wrong(value: Any) -> Any:
    """A value of another JSON type than ``value``."""
    if isinstance(value, bool):
        return "true"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return [value]
    if value is None:
        return {}
    return "x"  # a list or an object


def _representatives(items: list) -> list[int]:
    """Indices of one entry per shape (its keys, or its type) and the first two: the schema is per shape."""
    seen: dict[Any, int] = {}
    for k, item in enumerate(items):
        shape = frozenset(item) if isinstance(item, dict) else type(item).__name__
        seen.setdefault(shape, k)
    return sorted({*seen.values(), *range(min(2, len(items)))})


def _paths(value: Any, where: str = "") -> list[tuple[str, tuple]]:
    """Every (JSON path, key path) below ``value``, containers included, in the schema's spelling
    (in each list, the entries of :func:`_representatives`)."""
    out = []
    if isinstance(value, dict):
        for key, item in value.items():
            if not where and key in OPAQUE:
                continue
            at = (f"{where}[{key!r}]" if S.PARAMETER_NAME.fullmatch(key) else f"{where}.{key}" if where else key)
            out.append((at, (key,)))
            out += [(p, (key, *k)) for p, k in _paths(item, at)]
    elif isinstance(value, list):
        for k in _representatives(value):
            item = value[k]
            at = f"{where}[{k}]"
            out.append((at, (k,)))
            out += [(p, (k, *ks)) for p, ks in _paths(item, at)]
    return out


class _Swapped:
    """``report`` with ``value`` at ``keys`` for the duration of the block (no copy: reports are large)."""

    def __init__(self, report: dict, keys: tuple, value: Any) -> None:
        self.node: Any = report
        for k in keys[:-1]:
            self.node = self.node[k]
        self.key, self.value = keys[-1], value

    def __enter__(self) -> None:
        self.old = self.node[self.key]
        self.node[self.key] = self.value

    def __exit__(self, *exc: Any) -> None:
        self.node[self.key] = self.old


def _get(report: dict, keys: tuple) -> Any:
    node: Any = report
    for k in keys:
        node = node[k]
    return node


def test_every_genuine_report_fits_the_schema_and_verifies(reports):
    for case, rep in reports:
        assert S.validate_report(rep) is None, rep["name"]
        valid, msgs = verify_certificate(case, rep, require_claims=True)
        assert valid, (rep["name"], msgs)


def test_every_field_of_the_schema_is_walked(reports):
    # the reports above exercise every field the schema names (so the walk below reaches each)
    def spec_paths(spec: S.Spec, where: str) -> set[str]:
        if isinstance(spec, S.Obj):
            return {p for k, v in spec.fields().items() if not (where == "" and k in OPAQUE)
                    for p in {f"{where}.{k}".lstrip("."), *spec_paths(v, f"{where}.{k}".lstrip("."))}}
        if isinstance(spec, (S.List,)):
            return spec_paths(spec.item, f"{where}[]")
        if isinstance(spec, S.Tuple):
            return {p for item in spec.items for p in spec_paths(item, f"{where}[]")}
        if isinstance(spec, (S.Null,)):
            return spec_paths(spec.spec, where)
        if isinstance(spec, S.AnyOf):
            return {p for s in spec.specs for p in spec_paths(s, where)}
        return set()

    def norm(path: str) -> str:
        import re

        return re.sub(r"\[\d+\]", "[]", re.sub(r"\['[^']*'\]", "", path))

    seen = {norm(p) for _, rep in reports for p, _ in _paths(rep)}
    # fields only written by other modes (Monte Carlo, timed out) or other networks: checked by name below
    elsewhere = {"certified", "error_probability", "timed_out", "stage", "certificate.entering.invisible_ties[].sample",
                 "certificate.entering.invisible_ties[].layer", "certificate.entering.invisible_ties[].neuron",
                 "certificate.rank.rank_gamma.rank_a", "certificate.rank.rank_gamma.rank_a_lower",
                 "certificate.boundary.resolutions[].rank_gamma.rank_a",
                 "certificate.boundary.resolutions[].rank_gamma.rank_a_lower",
                 "certificate.boundary.resolutions[].rank_a.rank_a_lower",
                 "certificate.boundary.resolutions[].rank_gamma.lower.matrix",
                 "certificate.boundary.resolutions[].rank_gamma.lower.rows",
                 "certificate.rank.rank_gamma.lower.matrix", "certificate.rank.rank_gamma.lower.rows",
                 "certificate.line.nonequivalence.neuron", "certificate.entering.nonequivalence.neuron",
                 "certificate.boundary.resolutions[].rank_gamma.upper.source",
                 "certificate.boundary.resolutions[].rank_gamma.upper.nullity",
                 "certificate.boundary.resolutions[].rank_gamma.upper.primes",
                 "certificate.boundary.resolutions[].rank_gamma.upper.kernel",
                 "certificate.boundary.resolutions[].rank_a.upper.source",
                 "certificate.boundary.resolutions[].rank_a.upper.nullity",
                 "certificate.boundary.resolutions[].rank_a.upper.primes",
                 "certificate.boundary.resolutions[].rank_a.upper.kernel",
                 "certificate.rank.rank_a.upper.source", "certificate.rank.rank_a.upper.nullity",
                 "certificate.rank.rank_a.upper.primes", "certificate.rank.rank_a.upper.kernel",
                 "certificate.rank.rank_gamma.upper.nullity", "certificate.rank.rank_gamma.upper.primes",
                 "certificate.degenerate", "certificate.degenerate.layer", "certificate.degenerate.neuron",
                 "certificate.degenerate.why", "rank_a_lower_bound", "certified_by.rank_a",
                 # constrained networks' fields (their reports: tests/test_constrained_engine.py)
                 "architecture", "certificate.free_rank", "certificate.dead_units", "certificate.constant_units",
                 "certificate.submersion", "certificate.entering_submersion", "rules", "certificate.line.kind",
                 "certificate.line.names",
                 "certificate.slope_lines",  # tests/test_linear_symmetry.py
                 "certificate.constant_rank",  # tests/test_constant_rank.py
                 # only when the cost model keeps an interval (large Gamma): tests/test_report_interval.py
                 "rank_gamma_interval_why.exact_seconds", "rank_gamma_interval_why.verdict_seconds",
                 "rank_gamma_interval_why.budget_seconds"}
    missing = sorted(p for p in spec_paths(S.REPORT, "") if norm(p) not in seen and norm(p) not in elsewhere
                     and not any(norm(p).startswith(e + ".") or norm(p).startswith(e + "[") for e in elsewhere))
    assert not missing, missing


def test_a_wrong_type_anywhere_is_invalid_with_its_path(reports):
    tried = 0
    for case, rep in reports:
        for path, keys in _paths(rep):
            with _Swapped(rep, keys, _wrong(_get(rep, keys))):
                valid, msgs = verify_certificate(case, rep, "r.json", require_claims=True)
            # the path itself, or a path inside the wrong value when it has the shape of an alternative
            assert not valid and len(msgs) == 1 and msgs[0].startswith(path) and msgs[0][len(path)] in ":[", \
                (rep["name"], path, msgs)
            tried += 1
    assert tried > 500


def test_an_unknown_field_anywhere_is_invalid_with_its_path(reports):
    for case, rep in reports:
        for path, keys in [("", ()), *_paths(rep)]:
            node = _get(rep, keys)
            if not isinstance(node, dict) or (path and S.PARAMETER_NAME.fullmatch(str(keys[-1]))):
                continue
            if path.endswith(("delta", "reachable.delta")) and isinstance(node, dict):
                continue  # a map of parameter names: a bad key is a bad name (below)
            target = _get(rep, keys)
            target["zzz"] = 1
            try:
                valid, msgs = verify_certificate(case, rep, require_claims=True)
            finally:
                del target["zzz"]
            at = f"{path}.zzz" if path else "zzz"
            assert not valid and msgs[0].startswith(f"{at}: unknown"), (rep["name"], at, msgs)


def test_explain_coupled_neuron_as_a_string_is_invalid_not_a_crash(tmp_path, capsys):
    # issue: neurons[k].coupled[j].neuron a string gave "internal error: TypeError" (exit 1)
    case_path = CASES / "boundary-origin-zero-biases.json"
    case = load_case(case_path)
    report = check(case, numeric=False)
    explain_reports([case], [report])
    rep = report.to_dict()
    k, j = next((k, j) for k, n in enumerate(rep["neurons"]) for j, _ in enumerate(n["coupled"]))
    for value, why in (("1", "expected int, found str"), (-1, "expected a nonnegative int, found -1")):
        bad = copy.deepcopy(rep)
        bad["neurons"][k]["coupled"][j]["neuron"] = value
        path = tmp_path / "r.json"
        path.write_text(json.dumps(bad))
        assert main(["verify-certificate", str(case_path), str(path)]) == 3
        out, err = capsys.readouterr()
        assert out == f"neurons[{k}].coupled[{j}].neuron: {why}\ncertificate INVALID\n" and err == ""
    bad = copy.deepcopy(rep)
    bad["neurons"][k]["coupled"][j]["extra"] = 0  # unknown fields inside coupled entries were accepted
    assert verify_certificate(case, bad, require_claims=True) == (
        False, [f"neurons[{k}].coupled[{j}].extra: unknown field, not verified"])


def test_bad_parameter_name_in_a_delta_names_it():
    case = parse_case(json.loads((CASES / "tiny-111-kink.json").read_text()))
    rep = check(case, numeric=False).to_dict()
    bad = copy.deepcopy(rep)
    bad["certificate"]["entering"]["delta"]["bias"] = "1"
    assert verify_certificate(case, bad, require_claims=True) == (
        False, ["certificate.entering.delta['bias']: expected a parameter name W_l[row,col] or b_l[row]"])


def test_a_design_report_is_refused_by_its_format(tmp_path, capsys):
    case = str(CASES / "tiny-111-kink.json")
    assert main(["design", "--json", case]) == 0
    path = tmp_path / "d.json"
    path.write_text(capsys.readouterr().out)
    assert main(["verify-certificate", case, str(path)]) == 3
    out = capsys.readouterr().out
    assert out.startswith("format: report says 'exactident-design/1', expected 'exactident-report/1'")


@pytest.mark.parametrize("field, value, why", [
    ("certified", "no", "expected bool, found str"), ("timed_out", 1, "expected bool, found int"),
    ("error_probability", 2, "expected a number in [0, 1], found int"), ("stage", 3, "expected str, found int"),
    ("rank_a_lower_bound", -1, "expected a nonnegative int, found -1"),
])
def test_fields_of_other_modes_are_typed(field, value, why):
    case = parse_case(json.loads((CASES / "tiny-111-kink.json").read_text()))
    rep = check(case, numeric=False).to_dict()
    valid, msgs = verify_certificate(case, dict(rep, **{field: value}), require_claims=True)
    assert not valid and msgs[0].startswith(f"{field}: ") and why in msgs[0], msgs
