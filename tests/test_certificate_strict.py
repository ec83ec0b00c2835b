"""``verify-certificate`` says VALID only for what it checked (fresh-user report).

Every report here is a real ``exactident check --json`` report, tampered one field at a time:
``cases/tiny-111-kink.json`` (an ``entering`` certificate) and
``cases/boundary-second-order-tie.json`` (a ``line`` certificate).  Exit 0 valid, 3 not valid
(unknown or unchecked parts, missing certificate, verdict or name mismatch, incomplete
derivatives), 2 bad input (a required field missing or of the wrong type, unreadable JSON).
"""

import copy
import json
import sys
import types

import pytest

from exactident.check import check
from exactident.cli import main
from exactident.errors import CaseFormatError
from exactident.io.case import load_case
from exactident.io.report import reports_to_json
from exactident.verify.certificate import verify_certificate

KINK = "cases/tiny-111-kink.json"
KINK_PLUS = "cases/tiny-111-kink-plus.json"
SECOND_ORDER = "cases/boundary-second-order-tie.json"
MODULAR = "exactident.verify.rank"


def _check_json(path):
    """Exactly what ``exactident check --json --no-numeric PATH`` prints, parsed."""
    return json.loads(reports_to_json([check(load_case(path), numeric=False)], as_list=False))


@pytest.fixture(scope="module")
def kink_report():
    data = _check_json(KINK)
    # SPEC §2 by hand: tau = (w_1, b_1, b_2), ker Gamma(active) = span (0, 1, -3), and the tie at
    # x = -1/2 has g_t = (x, 1, 0), so g_t . delta = 1 > 0 on the active side.
    ent = data["certificate"]["entering"]
    assert data["verdict"] == "not-identifiable" and data["name"] == "tiny-111-kink"
    assert [(t["sample"], t["layer"], t["neuron"], t["active"]) for t in ent["resolution"]] == [(2, 1, 0, True)]
    assert [d["value"] for d in ent["derivatives"]] == ["1"]
    return data


@pytest.fixture(scope="module")
def line_report():
    data = _check_json(SECOND_ORDER)
    assert data["verdict"] == "not-identifiable" and set(data["certificate"]) == {"boundary", "line"}
    return data


def _run(tmp_path, capsys, report, case=KINK, text=None):
    path = tmp_path / "report.json"
    path.write_text(text if text is not None else json.dumps(report))
    rc = main(["verify-certificate", case, str(path)])
    out, err = capsys.readouterr()
    return rc, out, err, str(path)


def _assert_invalid(rc, out, why):
    assert rc == 3, out
    assert "certificate INVALID" in out and "certificate VALID" not in out
    assert why in out


def _assert_bad_input(rc, out, err, path, field):
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: ") and field in lines[0], err


def _assert_malformed(rc, out, err, path, field):
    # a malformed report is invalid (exit 3): one failure naming the field's path (docs/boundary.md)
    assert rc == 3 and err == "", (out, err)
    lines = out.strip().splitlines()
    assert lines == [lines[0], "certificate INVALID"] and field in lines[0], out


def test_real_reports_stay_valid(tmp_path, capsys, kink_report, line_report):
    rc, out, _, _ = _run(tmp_path, capsys, kink_report)
    assert rc == 0 and "certificate VALID" in out
    rc, out, _, _ = _run(tmp_path, capsys, line_report, case=SECOND_ORDER)
    assert rc == 0 and "line part valid" in out
    rc, out, _, _ = _run(tmp_path, capsys, [line_report, kink_report])  # an array: the one named like the case
    assert rc == 0


# --- 1. unknown and unchecked parts -------------------------------------------------------------

def _rank_part(report):
    """A well-formed rank part (the schema admits it; only its checker can say whether it holds)."""
    return {"rank_gamma": copy.deepcopy(report["certificate"]["boundary"]["resolutions"][0]["rank_gamma"])}


@pytest.mark.parametrize("extra", [{}, {"fixed_edges": [[1, 0, 0]]}])
def test_rank_part_without_its_verifier_is_not_valid(tmp_path, capsys, monkeypatch, kink_report, extra):
    monkeypatch.setitem(sys.modules, MODULAR, None)  # import fails: the verifier is not there
    data = copy.deepcopy(kink_report)
    data["certificate"]["rank"] = {**_rank_part(kink_report), **extra}
    rc, out, _, _ = _run(tmp_path, capsys, data)
    _assert_invalid(rc, out, "certificate.rank: could not be checked (exactident.verify.rank is not available")
    assert "certificate.boundary: could not be checked" in out  # its resolutions are rank certificates too
    assert "entering part valid" in out  # the other part is still reported


def test_rank_only_certificate_without_its_verifier_is_not_valid(tmp_path, capsys, monkeypatch, kink_report):
    monkeypatch.setitem(sys.modules, MODULAR, None)
    data = copy.deepcopy(kink_report)
    data["certificate"] = {"rank": _rank_part(kink_report)}
    rc, out, _, _ = _run(tmp_path, capsys, data)
    _assert_invalid(rc, out, "could not be checked")


def _fake_modular(monkeypatch, behaviour, ranks=(None, None)):
    from exactident.verify.rank import CertifiedRanks

    calls = []

    def check_rank_certificate(case, rank_certificate, pattern, where, limits=None):  # the real signature
        calls.append((case.name, rank_certificate, where))
        return behaviour(), CertifiedRanks(*ranks)

    module = types.ModuleType(MODULAR)
    module.check_rank_certificate = check_rank_certificate
    monkeypatch.setitem(sys.modules, MODULAR, module)
    return calls


def _raise(exc):
    def go():
        raise exc
    return go


@pytest.mark.parametrize("behaviour, rc_expected, why", [
    (lambda: ["R_Gamma claimed 3, modular rank 2"], 3, "R_Gamma claimed 3, modular rank 2"),
    (lambda: True, 3, "certificate.rank: could not be checked (the rank checker returned bool"),
    (_raise(TypeError("string indices")), 3, "certificate.rank: could not be checked (the rank checker raised "
                                             "TypeError"),
])
def test_rank_part_uses_the_problem_list(tmp_path, capsys, monkeypatch, kink_report, behaviour, rc_expected, why):
    calls = _fake_modular(monkeypatch, behaviour)
    data = copy.deepcopy(kink_report)
    data["certificate"]["rank"] = _rank_part(kink_report)
    rc, out, _, _ = _run(tmp_path, capsys, data)
    assert ("tiny-111-kink", _rank_part(kink_report), "certificate.rank") in calls
    assert [c[2] for c in calls if c[2] != "certificate.rank"] == [  # and each resolution of the boundary part
        "certificate.boundary.resolutions[0]", "certificate.boundary.resolutions[1]"]
    _assert_invalid(rc, out, why)


def _off_boundary(tmp_path):
    # SPEC §2's network at x = 0, 1, 2 (all active, no tie): rows (3x, 3, 1) give
    # rank Gamma = 2, alpha rows (x, 1, 1) give rank A = 2 < dim = 3: not-identifiable.
    path = tmp_path / "off.json"
    path.write_text(json.dumps({"format": "exactident-case/1", "name": "off", "widths": [1, 1, 1],
                                "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]],
                                "sample": [["0"], ["1"], ["2"]]}))
    report = check(load_case(path), numeric=False).to_dict()
    assert (report["rank_gamma"], report["rank_a"], report["verdict"]) == (2, 2, "not-identifiable")
    return str(path), report


def test_empty_problem_list_is_valid(tmp_path, capsys, monkeypatch):
    case, report = _off_boundary(tmp_path)
    _fake_modular(monkeypatch, lambda: [], ranks=(2, 2))
    rc, out, _, _ = _run(tmp_path, capsys, report, case=case)
    assert rc == 0 and "rank part valid" in out and "certificate VALID" in out


@pytest.mark.parametrize("field, value, why", [
    ("rank_gamma", 3, "rank_gamma: report says 3, the certificate certifies 2"),
    ("rank_a", 1, "rank_a: report says 1, the certificate certifies 2"),
    ("dim", 2, "dim: report says 2, the case gives 3"),
    ("verdict", "identifiable", "verdict: report says identifiable, but the certificate does not prove C_S on every "
                                "tie resolution (certified R_Gamma = 2, R_A = 2, dim = 3)"),
    ("cs", True, "cs: report says True, the certified ranks give False (R_Gamma = 2, dim = 3)"),
    ("cn", True, "cn: report says True, the certified ranks give False (R_Gamma = 2, R_A = 2)"),
    ("on_boundary", True, "on_boundary: report says True, the case gives False (ties: [])"),
    ("n_ties", 1, "n_ties: report says 1, the case gives 0"),
    ("degenerate", True, "degenerate: report says True, the case gives False (neurons in S: [])"),
])
def test_report_claims_must_match_the_certified_ranks(tmp_path, capsys, field, value, why):
    # A genuine rank certificate does not vouch for a report that contradicts it.
    case, report = _off_boundary(tmp_path)
    rc, out, _, _ = _run(tmp_path, capsys, report, case=case)
    assert rc == 0 and "certificate VALID" in out
    bad = copy.deepcopy(report)
    bad[field] = value
    rc, out, _, _ = _run(tmp_path, capsys, bad, case=case)
    _assert_invalid(rc, out, why)


def test_unknown_field_in_rank_part_is_not_valid(tmp_path, capsys):
    case, report = _off_boundary(tmp_path)
    bad = copy.deepcopy(report)
    bad["certificate"]["rank"]["zzz"] = 1
    rc, out, _, _ = _run(tmp_path, capsys, bad, case=case)
    _assert_invalid(rc, out, "certificate.rank.zzz: unknown field")


def test_malformed_rank_part_reported_by_its_verifier_is_invalid(tmp_path, capsys, monkeypatch, kink_report):
    _fake_modular(monkeypatch, _raise(CaseFormatError("<rank>", "primes[0]", "expected an int, found str")))
    data = copy.deepcopy(kink_report)
    data["certificate"]["rank"] = _rank_part(kink_report)
    rc, out, err, path = _run(tmp_path, capsys, data)
    _assert_malformed(rc, out, err, path, "certificate.rank.primes[0]: expected an int")
    data["certificate"]["rank"] = {"primes": ["p"]}  # the schema refuses it before any checker runs
    rc, out, err, path = _run(tmp_path, capsys, data)
    _assert_malformed(rc, out, err, path, "certificate.rank.primes: unknown field, not verified")


@pytest.mark.parametrize("where, why", [
    (lambda d: d["certificate"], "certificate.zzz: unknown certificate part"),
    (lambda d: d["certificate"]["entering"], "certificate.entering.zzz: unknown field"),
    (lambda d: d["certificate"]["entering"]["resolution"][0], "certificate.entering.resolution[0].zzz: unknown"),
    (lambda d: d["certificate"]["entering"]["derivatives"][0], "certificate.entering.derivatives[0].zzz: unknown"),
])
def test_unknown_fields_are_not_valid(tmp_path, capsys, kink_report, where, why):
    data = copy.deepcopy(kink_report)
    where(data)["zzz"] = {"anything": 1}
    rc, out, _, _ = _run(tmp_path, capsys, data)
    _assert_invalid(rc, out, why)


def test_unknown_field_in_a_line_part_is_not_valid(tmp_path, capsys, line_report):
    data = copy.deepcopy(line_report)
    data["certificate"]["line"]["eps"] = "1/10"
    rc, out, _, _ = _run(tmp_path, capsys, data, case=SECOND_ORDER)
    _assert_invalid(rc, out, "certificate.line.eps: unknown field")


@pytest.mark.parametrize("certificate", ["missing", None, {}])
def test_no_certificate_is_not_valid(tmp_path, capsys, kink_report, certificate):
    data = copy.deepcopy(kink_report)
    if certificate == "missing":
        del data["certificate"]
    else:
        data["certificate"] = certificate
    rc, out, _, _ = _run(tmp_path, capsys, data)
    _assert_invalid(rc, out, "no certificate to verify")


def test_identifiable_boundary_report_is_certified(tmp_path, capsys):
    # sample -1 added: rows (0,0,1) and the tie's row give rank 3 = dim on both sides (docs/boundary.md),
    # so the certificate is a rank mod p equal to dim on each of the 2 resolutions.
    data = _check_json(KINK_PLUS)
    assert data["verdict"] == "identifiable" and set(data["certificate"]) == {"boundary"}
    assert [r["rank_gamma"]["lower"]["rank_mod_p"] for r in data["certificate"]["boundary"]["resolutions"]] == [3, 3]
    rc, out, _, _ = _run(tmp_path, capsys, data, case=KINK_PLUS)
    assert rc == 0 and "C_S on 2" in out and "certificate VALID" in out
    del data["certificate"]
    rc, out, _, _ = _run(tmp_path, capsys, data, case=KINK_PLUS)
    _assert_invalid(rc, out, "no certificate to verify (the report has no 'certificate'): the verdict identifiable "
                             "is not backed")


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d["certificate"].update(entering="garbage"), "certificate.entering: expected dict, found str"),
    (lambda d: d["certificate"]["entering"].update(rank_gamma="2"), "certificate.entering.rank_gamma: expected int"),
    (lambda d: d["certificate"]["entering"]["resolution"].__setitem__(0, "x"),
     "certificate.entering.resolution[0]: expected dict, found str"),
    (lambda d: d["certificate"]["entering"]["resolution"][0].update(active=1),
     "certificate.entering.resolution[0].active: expected bool"),
    (lambda d: d["certificate"]["entering"]["derivatives"][0].update(value=1),
     "certificate.entering.derivatives[0].value: expected a rational string"),
    (lambda d: d["certificate"]["entering"]["delta"].update({"b_1[0]": "\u0661"}),
     "certificate.entering.delta['b_1[0]']: expected a rational string 'p/q' (ASCII digits), found '\u0661'"),
    (lambda d: d["certificate"]["entering"]["delta"].update({"b_1[0]": "1/0"}),
     "certificate.entering.delta['b_1[0]']: zero denominator in '1/0'"),
    (lambda d: d["certificate"]["entering"]["delta"].update({"b_1[0]": " 1"}),
     "certificate.entering.delta['b_1[0]']: expected a rational string"),
    (lambda d: d["certificate"]["entering"].pop("derivatives"), "certificate.entering.derivatives: missing"),
    (lambda d: d.update(verdict=["not-identifiable"]), "verdict: expected str, found list"),
    (lambda d: d.pop("name"), "name: missing"),
])
def test_malformed_fields_are_invalid(tmp_path, capsys, kink_report, mutate, field):
    data = copy.deepcopy(kink_report)
    mutate(data)
    rc, out, err, path = _run(tmp_path, capsys, data)
    _assert_malformed(rc, out, err, path, field)


def test_malformed_line_part_is_invalid(tmp_path, capsys, line_report):
    data = copy.deepcopy(line_report)
    data["certificate"]["line"] = ["-3"]
    rc, out, err, path = _run(tmp_path, capsys, data, case=SECOND_ORDER)
    _assert_malformed(rc, out, err, path, "certificate.line: expected dict, found list")


# --- 2. the report's verdict and name -----------------------------------------------------------

@pytest.mark.parametrize("verdict, why", [
    ("identifiable", "but the certificate does not prove C_S on every tie resolution (C_S fails on 1 of 2"),
    ("inconclusive", "but the certificate proves not-identifiable"),
    ("degenerate", "but no hidden neuron of the case puts theta in S"),
])
def test_entering_certificate_contradicting_the_verdict(tmp_path, capsys, kink_report, verdict, why):
    data = copy.deepcopy(kink_report)
    data["verdict"] = verdict
    rc, out, _, _ = _run(tmp_path, capsys, data)
    _assert_invalid(rc, out, f"verdict: report says {verdict}, {why}")
    assert "entering part valid" in out  # the certificate itself is fine: the report's claim is not
    data["verdict"] = ""  # not a verdict at all: the schema refuses it
    rc, out, _, _ = _run(tmp_path, capsys, data)
    _assert_invalid(rc, out, "verdict: expected 'identifiable' or 'not-identifiable' or 'inconclusive' or "
                             "'degenerate', found ''")


def test_line_certificate_contradicting_the_verdict(tmp_path, capsys, line_report):
    data = copy.deepcopy(line_report)
    data["verdict"] = "identifiable"
    rc, out, _, _ = _run(tmp_path, capsys, data, case=SECOND_ORDER)
    _assert_invalid(rc, out, "verdict: report says identifiable, but the certificate does not prove C_S")


def test_report_for_another_case_name(tmp_path, capsys, kink_report):
    data = copy.deepcopy(kink_report)
    data["name"] = "tiny-111-kink-plus"
    rc, out, _, _ = _run(tmp_path, capsys, data)
    _assert_invalid(rc, out, "name: the report is for case 'tiny-111-kink-plus' but the case file is named "
                             "'tiny-111-kink'")


def test_library_call_gives_the_same_answers(kink_report):
    case = load_case(KINK)
    assert verify_certificate(case, kink_report)[0]
    data = copy.deepcopy(kink_report)
    data["verdict"] = "identifiable"
    valid, msgs = verify_certificate(case, data)
    assert not valid and msgs[-1].startswith("verdict: report says identifiable, but the certificate does not prove")
    assert verify_certificate(case, {"verdict": "not-identifiable", "certificate": {"line": {}}}, "r.json",
                              require_claims=True) == (False, ["name: missing"])
    # A bare certificate (library use) is checked without the report's claims; present claims still count.
    bare = {"certificate": copy.deepcopy(kink_report["certificate"])}
    assert verify_certificate(case, bare)[0]
    assert verify_certificate(case, dict(bare, name="tiny-111-kink"), "r.json",
                              require_claims=True) == (False, ["verdict: missing"])
    assert not verify_certificate(case, dict(bare, name="other"))[0]
    assert verify_certificate(case, [], "r.json") == (False, ["<report>: expected a JSON object "
                                                              "(exactident-report/1), found list"])


# --- 3. derivatives cover every visible tie -----------------------------------------------------

def _tie(sample, layer=1, neuron=0, **more):
    return dict(sample=sample, layer=layer, neuron=neuron, **more)


@pytest.mark.parametrize("mutate, why", [
    (lambda e: e.update(derivatives=[]), "no g_t.delta for the resolved tie (sample 2, layer 1, neuron 0)"),
    (lambda e: e["derivatives"].append(dict(e["derivatives"][0])), "tie (2, 1, 0) has two derivatives"),
    # sample 0 (x = 0, z = 1 > 0) is not a tie of the case at all
    (lambda e: e["derivatives"].append(_tie(0, active=True, value="1")), "tie (0, 1, 0) is not in the resolution"),
    (lambda e: e["derivatives"][0].update(active=False), "side False differs from the resolution's True"),
    (lambda e: e["resolution"].append(_tie(2, active=False)), "tie (2, 1, 0) is resolved twice"),
    # g_t . delta = 1 by hand (module fixture): a claimed -1 is a wrong value, and of the wrong sign
    (lambda e: e["derivatives"][0].update(value="-1"), "certificate says g_t.delta = -1, recomputed 1"),
    # the only tie of the case dropped everywhere: the certificate no longer covers the case's ties
    (lambda e: e.update(resolution=[], derivatives=[]),
     "the certificate resolves the ties [], the case's visible ties are [(2, 1, 0)]"),
    # L = 2: no later hidden layer can block the tie, so it cannot be invisible
    (lambda e: e.update(resolution=[], derivatives=[], invisible_ties=[_tie(2)]),
     "invisible_ties: the certificate lists [(2, 1, 0)], the case's invisible ties (a later hidden layer all "
     "strictly inactive) are []"),
])
def test_entering_certificate_must_cover_every_visible_tie(tmp_path, capsys, kink_report, mutate, why):
    data = copy.deepcopy(kink_report)
    mutate(data["certificate"]["entering"])
    rc, out, _, _ = _run(tmp_path, capsys, data)
    _assert_invalid(rc, out, why)


# --- 4. unreadable JSON -------------------------------------------------------------------------

def test_deeply_nested_report_is_bad_input(tmp_path, capsys):
    text = "[" * 100_000 + "]" * 100_000
    rc, out, err, path = _run(tmp_path, capsys, None, text=text)
    assert rc == 2 and out == "" and err == f"error: {path}: not valid JSON (nested too deeply)\n"


def test_deeply_nested_case_is_bad_input(tmp_path, capsys, kink_report):
    case = tmp_path / "case.json"
    case.write_text('{"a": ' * 100_000 + "1" + "}" * 100_000)
    rc, out, err, _ = _run(tmp_path, capsys, kink_report, case=str(case))
    assert rc == 2 and out == "" and err.startswith(f"error: {case}: ") and "nested too deeply" in err


def test_duplicate_key_is_bad_input(tmp_path, capsys, kink_report):
    # json keeps the last "verdict" silently; a human reading the file sees the first
    body = json.dumps(kink_report)[1:]
    rc, out, err, path = _run(tmp_path, capsys, None, text='{"verdict": "identifiable", ' + body)
    _assert_bad_input(rc, out, err, path, "not valid JSON (duplicate key 'verdict')")


def test_integer_too_long_for_python_is_bad_input(tmp_path, capsys, kink_report):
    body = json.dumps(kink_report)[1:]
    rc, out, err, path = _run(tmp_path, capsys, None, text='{"n_samples": ' + "9" * 5000 + ", " + body)
    _assert_bad_input(rc, out, err, path, "not valid JSON (")
