"""``verify-certificate`` derives every fact from the case: hand-written forgeries, strict numbers, messages.

Right values come from hand derivations in each test (docs/boundary.md gives the rules).
"""

import copy
import json
import re

import pytest
from kernel_cases import CRT_LOWER
from structural_cases import DEAD as DEAD_NEURON

from exactident.check import check
from exactident.cli import main
from exactident.errors import CaseFormatError
from exactident.io.case import load_case, parse_case
from exactident.io.report import reports_to_json
from exactident.io.report_file import parse_report_rational
from exactident.verify.certificate import verify_certificate

KINK = "cases/tiny-111-kink.json"
KINK_PLUS = "cases/tiny-111-kink-plus.json"
SECOND_ORDER = "cases/boundary-second-order-tie.json"
DIABETES = "cases/diabetes-mlp-10-8-1.json"

# f = 3 relu(2x + 1) at -1/2 (on the kink), 1, -2; W_1 += t, b_1 -= t keeps the outputs (the tie goes
# inactive, x = 1 gives 3 (3 + t - t)... ), so the case is not identifiable.
FORGERY_CASE = {"format": "exactident-case/1", "name": "kink-forgery", "widths": [1, 1, 1],
                "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]], "sample": [["-1/2"], ["1"], ["-2"]]}
FORGERY_REPORT = {"name": "kink-forgery", "verdict": "identifiable", "certificate": {"rank": {"rank_gamma": {
    "rank": 3, "shape": [3, 3], "lower": {"prime": 1073741827, "rank_mod_p": 3},
    "upper": {"kind": "shape", "bound": 3}}}}}


def _report(path_or_obj):
    case = load_case(path_or_obj) if isinstance(path_or_obj, str) else parse_case(path_or_obj)
    return case, json.loads(reports_to_json([check(case, numeric=False)], as_list=False))


def _write(tmp_path, name, data):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def _cli(tmp_path, capsys, case, report, text=None):
    case_path = case if isinstance(case, str) else _write(tmp_path, "case.json", case)
    path = _write(tmp_path, "report.json", text if text is not None else report)
    rc = main(["verify-certificate", case_path, path])
    out, err = capsys.readouterr()
    return rc, out, err, path


# --- forged verdicts -------------------------------------------------------------------------------

def test_kink_forgery_is_rejected(tmp_path, capsys):
    # The rank certificate is genuine (rank Gamma = 3 at the >= 0 pattern: rows (3x, 3, 1) at x = -1/2, 1
    # and (0, 0, 1) at -2), but the sample -1/2 is a visible tie: the inactive resolution has rows
    # (0,0,1), (3,3,1), (0,0,1), rank 2 < 3, so C_S is not certified on every resolution.
    rc, out, _, _ = _cli(tmp_path, capsys, FORGERY_CASE, FORGERY_REPORT)
    assert rc == 3 and out.splitlines() == [
        "rank part valid: at the >= 0 pattern R_Gamma = 3",
        "verdict: report says identifiable, but the certificate does not prove C_S on every tie resolution (the "
        "tie resolutions are not certified, dim = 3)",
        "certificate INVALID"]
    # and check proves the truth: not identifiable, with a certificate that verifies
    case, genuine = _report(FORGERY_CASE)
    assert genuine["verdict"] == "not-identifiable"
    assert verify_certificate(case, genuine, require_claims=True)[0]


def test_degenerate_claim_does_not_switch_off_the_verdict_check():
    case, rep = _report(KINK)
    bad = dict(rep, degenerate=True, verdict="banana")
    valid, msgs = verify_certificate(case, bad, require_claims=True)
    assert not valid
    assert msgs == ["verdict: expected 'identifiable' or 'not-identifiable' or 'inconclusive' or 'degenerate', "
                    "found 'banana'"]  # the schema first (docs/boundary.md)
    valid, msgs = verify_certificate(case, dict(bad, verdict=rep["verdict"]), require_claims=True)
    assert not valid and "degenerate: report says True, the case gives False (neurons in S: [])" in msgs


def test_rank_certificate_of_the_ge0_pattern_does_not_decide_a_boundary_case():
    # tiny-111-kink at the >= 0 pattern (tie active): rows (0,3,1), (3,3,1), (-3/2,3,1), rank 2 = R_A < 3 -- it
    # would say not-identifiable off the boundary, but the tie is visible: only entering/line certify that.
    case, rep = _report(KINK)
    from exactident.model.activation import activation_state
    from exactident.model.fixed_edges import fixed_edges
    from exactident.ranks.certify import certify_ranks

    st = activation_state(case.network, case.X)
    ranks = certify_ranks(case.network, case.X, st.pattern, fixed_edges(case.network), need_rank_a=True)
    assert (ranks.rank_gamma, ranks.rank_a) == (2, 2)
    forged = {"name": rep["name"], "verdict": "not-identifiable", "certificate": {"rank": ranks.certificate}}
    valid, msgs = verify_certificate(case, forged, require_claims=True)
    assert not valid and msgs[-1].startswith("verdict: report says not-identifiable, but no valid entering or line "
                                             "part proves it")


@pytest.mark.parametrize("path, field, value, why", [
    (KINK, "cs", True, "cs: report says True, the certified ranks give False (R_Gamma = 2, dim = 3)"),
    (KINK, "cn", True, "cn: report says True, the certified ranks give False (R_Gamma = 2, R_A = 2)"),
    (KINK, "dim", 4, "dim: report says 4, the case gives 3"),
    (KINK, "degenerate", True, "degenerate: report says True, the case gives False"),
    (KINK, "on_boundary", False, "on_boundary: report says False, the case gives True (ties: [(2, 1, 0)])"),
    (KINK, "n_ties", 2, "n_ties: report says 2, the case gives 1"),
    (KINK, "rank_gamma", 3, "rank_gamma: report says 3, the certificate certifies 2"),
    (KINK, "widths", [1, 2, 1], "widths: report says [1, 2, 1], the case has [1, 1, 1]"),
    (KINK, "n_samples", 4, "n_samples: report says 4, the case gives 3"),
    (KINK, "format", "exactident-report/2", "format: report says 'exactident-report/2', expected"),
    (KINK, "confidence", "high", "confidence: unknown report field, not verified"),
    (SECOND_ORDER, "cs", True, "cs: report says True, the certified ranks give False"),
    (SECOND_ORDER, "n_ties", 1, "n_ties: report says 1, the case gives 2"),
    (SECOND_ORDER, "on_boundary", False, "on_boundary: report says False, the case gives True"),
])
def test_entering_and_line_reports_have_every_claim_checked(path, field, value, why):
    case, rep = _report(path)
    assert verify_certificate(case, rep, require_claims=True)[0]
    bad = dict(rep, **{field: value})
    valid, msgs = verify_certificate(case, bad, require_claims=True)
    assert not valid and any(m.startswith(why) for m in msgs), msgs


def test_pattern_claims_are_checked():
    # tiny-111-kink: active resolution R_Gamma = R_A = 2 (docs/boundary.md worked example), inactive 3.
    case, rep = _report(KINK)
    assert [(p["rank_gamma"], p["rank_a"], p["cs"], p["cn"]) for p in rep["patterns"]] == [(2, 2, False, False),
                                                                                           (3, None, True, True)]
    for j, field, value, why in [
            (0, "rank_gamma", 3, "patterns[0].rank_gamma: report says 3, the certificate certifies 2"),
            (1, "rank_a", 3, "patterns[1].rank_a: report says 3, the certificate certifies no R_A"),
            (0, "cn", True, "patterns[0].cn: report says True, the certified ranks give False"),
            (0, "reachable", "yes", "patterns[0].reachable: expected True or 'unknown', found 'yes'"),
            (0, "ties", [{"sample": 2, "layer": 1, "neuron": 0, "active": False}], "patterns[0].ties: report says")]:
        bad = copy.deepcopy(rep)
        bad["patterns"][j][field] = value
        valid, msgs = verify_certificate(case, bad, require_claims=True)
        assert not valid and any(m.startswith(why) for m in msgs), msgs
    # reachable: true needs a witness in the certificate
    bad = copy.deepcopy(rep)
    del bad["certificate"]["boundary"]["resolutions"][1]["reachable"]
    valid, msgs = verify_certificate(case, bad, require_claims=True)
    assert not valid and msgs[-1] == ("patterns[1].reachable: report says true, but the certificate has no "
                                      "reachability witness for this resolution")


def test_identifiable_boundary_certificate_needs_every_resolution():
    case, rep = _report(KINK_PLUS)
    assert verify_certificate(case, rep, require_claims=True)[0]
    bad = copy.deepcopy(rep)
    bad["certificate"]["boundary"]["resolutions"].pop()
    valid, msgs = verify_certificate(case, bad, require_claims=True)
    assert not valid and "certificate.boundary.resolutions: the certificate lists 1 resolution(s), the 1 visible " \
                         "tie(s) have 2" in msgs


def test_forged_identifiable_resolution_names_found_and_claimed():
    # tiny-111-kink, active resolution: rank Gamma(s) = 2 (worked example); claiming rank 3 = dim there.
    case, rep = _report(KINK)
    bad = copy.deepcopy(rep)
    bad["verdict"] = "identifiable"
    del bad["certificate"]["entering"]
    res = bad["certificate"]["boundary"]["resolutions"][0]
    assert res["active"] == [True]
    res["rank_gamma"].update(rank=3, lower=dict(res["rank_gamma"]["lower"], rank_mod_p=3),
                             upper={"kind": "shape", "bound": 3})
    valid, msgs = verify_certificate(case, bad, require_claims=True)
    p = res["rank_gamma"]["lower"]["prime"]
    assert not valid and (f"certificate.boundary.resolutions[0].rank_gamma.lower.rank_mod_p: certificate says 3, "
                          f"recomputed rank mod {p} is 2") in msgs


def test_tampered_rank_mod_p_names_both_values():
    # diabetes-mlp-10-8-1 is identifiable: rank Gamma = dim = 89 (docs/cli.md table).
    case, rep = _report(DIABETES)
    low = rep["certificate"]["rank"]["rank_gamma"]["lower"]
    assert low["rank_mod_p"] == 89
    bad = copy.deepcopy(rep)
    bad["certificate"]["rank"]["rank_gamma"]["lower"]["rank_mod_p"] = 88
    valid, msgs = verify_certificate(case, bad, require_claims=True)
    assert not valid and (f"certificate.rank.rank_gamma.lower.rank_mod_p: certificate says 88, recomputed rank mod "
                          f"{low['prime']} is 89") in msgs


@pytest.mark.parametrize("mutate, why", [
    (lambda u: u.update(bound=2), "certificate.rank.rank_gamma.upper.bound: certificate says 2, the rank it must "
                                  "bound is 3"),
    (lambda u: u.update(kind="paths"), "certificate.rank.rank_gamma.upper.kind: 'paths' is not an upper bound "
                                       "available for this matrix"),
    (lambda u: u.update(extra=1), "certificate.rank.rank_gamma.upper.extra: unknown field, not verified"),
])
def test_every_bound_is_checked(mutate, why):
    # f = 3 relu(2x + 1) at 0, 1, -1 (no tie): rows (0,3,1), (3,3,1), (0,0,1), rank 3 = dim: shape bound 3.
    obj = dict(FORGERY_CASE, name="off", sample=[["0"], ["1"], ["-1"]])
    case, rep = _report(obj)
    assert rep["certificate"]["rank"]["rank_gamma"]["upper"] == {"kind": "shape", "bound": 3}
    bad = copy.deepcopy(rep)
    mutate(bad["certificate"]["rank"]["rank_gamma"]["upper"])
    valid, msgs = verify_certificate(case, bad, require_claims=True)
    assert not valid and any(why in m for m in msgs), msgs


def test_structural_bound_value_is_recomputed():
    # rank 2 with a claimed shape bound of 2 on a 3 x 3 Gamma: the shape bound is 3.
    obj = dict(FORGERY_CASE, name="off2", sample=[["0"], ["1"], ["2"]])  # all active: rows (3x, 3, 1): rank 2
    case, rep = _report(obj)
    bad = copy.deepcopy(rep)
    bad["certificate"]["rank"]["rank_gamma"]["upper"] = {"kind": "shape", "bound": 2}
    valid, msgs = verify_certificate(case, bad, require_claims=True)
    assert not valid and ("certificate.rank.rank_gamma.upper.bound: certificate says shape bounds the rank by 2, "
                          "recomputed bound is 3") in msgs


def test_degenerate_verdict_needs_the_neuron_named_and_checked():
    # widths [1,2,1], neuron (1,1) has outgoing weight 0: theta in S.
    obj = {"format": "exactident-case/1", "name": "dead", "widths": [1, 2, 1],
           "weights": [[["1"], ["2"]], [["3", "0"]]], "biases": [["1", "1"], ["0"]], "sample": [["1"], ["2"]]}
    case, rep = _report(obj)
    assert rep["verdict"] == "degenerate" and rep["certificate"]["degenerate"] == {"layer": 1, "neuron": 1,
                                                                                   "why": "outgoing"}
    assert verify_certificate(case, rep, require_claims=True)[0]
    bad = copy.deepcopy(rep)
    bad["certificate"]["degenerate"]["neuron"] = 0
    valid, msgs = verify_certificate(case, bad, require_claims=True)
    assert not valid and "certificate.degenerate: neuron (1,0) has outgoing weights ['3']; the certificate claims " \
                         "they are all zero" in msgs
    bad = copy.deepcopy(rep)
    del bad["certificate"]["degenerate"]
    valid, msgs = verify_certificate(case, bad, require_claims=True)
    assert not valid and msgs[-1] == ("verdict: report says degenerate, but the certificate has no valid degenerate "
                                      "part naming the neuron")
    bad = dict(copy.deepcopy(rep), verdict="not-identifiable")
    valid, msgs = verify_certificate(case, bad, require_claims=True)
    assert not valid and "theta is in S (hidden neuron (1,1), outgoing weights all zero)" in msgs[-1]


def test_report_past_the_resolution_cap_verifies():
    # Widths [2,3,3,1], zero biases, sample at the origin: 6 visible ties, 64 resolutions > cap 16.
    # Nothing is enumerated; a straight line (it needs no enumeration) is found on the kernel at the
    # >= 0 pattern (tests/test_boundary.py derives it by hand), so the verdict is not-identifiable.
    W = [[["1", "2"], ["-1", "1"], ["2", "-3"]], [["1", "-1", "2"], ["2", "1", "1"], ["-1", "3", "1"]],
         [["1", "2", "-1"]]]
    obj = {"format": "exactident-case/1", "name": "origin", "widths": [2, 3, 3, 1], "weights": W,
           "biases": [["0", "0", "0"], ["0", "0", "0"], ["0"]], "sample": [["0", "0"], ["1", "2"], ["-1", "1"]]}
    case = parse_case(obj)
    rep = json.loads(reports_to_json([check(case, numeric=False, max_resolutions=16)], as_list=False))
    assert rep["verdict"] == "not-identifiable" and set(rep["certificate"]) == {"boundary", "rank", "line"}
    assert "resolutions" not in rep["certificate"]["boundary"]
    assert verify_certificate(case, rep, require_claims=True)[0]
    valid, msgs = verify_certificate(case, dict(rep, verdict="identifiable"), require_claims=True)
    assert not valid and msgs[-1].endswith("(the tie resolutions are not certified, dim = 19)")
    valid, msgs = verify_certificate(case, dict(rep, verdict="inconclusive"), require_claims=True)
    assert not valid
    assert msgs[-1].startswith("verdict: report says inconclusive, but the certificate proves not-identifiable")
    # Without the line, inconclusive is what the certificate allows (and the top-level ranks are the
    # >= 0 pattern's, certified by the rank part).
    bare = copy.deepcopy(rep)
    del bare["certificate"]["line"]
    assert not verify_certificate(case, bare, require_claims=True)[0]
    assert verify_certificate(case, dict(bare, verdict="inconclusive", decided_by="none"), require_claims=True)[0]


# f = 3 relu(2x + 1) with the kink sample -1/2 given twice: two ties at one point.
REPEATED = {"format": "exactident-case/1", "name": "repeated-kink", "widths": [1, 1, 1],
            "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]],
            "sample": [["0"], ["1"], ["-1/2"], ["-1/2"]]}


def test_ties_at_equal_points_share_a_side():
    # Samples 2 and 3 are the same point, so z_1 is the same there for every theta: the two ties are
    # always on the same side. The resolutions that exist are both active and both inactive (2^1, not
    # 2^2); the verifier derives this from the case, and the report lists exactly those.
    case, rep = _report(REPEATED)
    part = rep["certificate"]["boundary"]
    assert [[t["sample"] for t in part["ties"]], [r["active"] for r in part["resolutions"]]] == \
        [[2, 3], [[True, True], [False, False]]]
    assert verify_certificate(case, rep, require_claims=True)[0]
    # A resolution splitting them is unreachable, not a resolution: listing one instead is not valid.
    split = copy.deepcopy(rep)
    split["certificate"]["boundary"]["resolutions"][1]["active"] = [False, True]
    valid, msgs = verify_certificate(case, split, require_claims=True)
    assert not valid and ("certificate.boundary.resolutions[1].active: ties [(2, 1, 0), (3, 1, 0)] are at equal "
                          "sample points (equal pre-activations), the certificate puts them on different sides: "
                          "not a resolution (unreachable)") in msgs
    # Listing the split ones as well (2^2 entries) is not the set that exists either.
    more = copy.deepcopy(rep)
    res = more["certificate"]["boundary"]["resolutions"]
    res += [dict(copy.deepcopy(res[0]), active=[True, False]), dict(copy.deepcopy(res[1]), active=[False, True])]
    valid, msgs = verify_certificate(case, more, require_claims=True)
    assert not valid and ("certificate.boundary.resolutions: the certificate lists 4 resolution(s), the 2 visible "
                          "tie(s) at 1 distinct (sample point, neuron) pairs have 2") in msgs


# Widths [1,1,2,1]: z_1 = -x is tied at x = 0; two resolutions with the same smallest R_Gamma but
# different R_A (found by a seeded random search).
TWO_MINIMA = {"format": "exactident-case/1", "name": "two-minima", "widths": [1, 1, 2, 1],
              "weights": [[["-1"]], [["0"], ["1"]], [["1", "-2"]]], "biases": [["0"], ["1", "-1"], ["0"]],
              "sample": [["-2"], ["1"], ["0"]]}


def test_top_level_rank_a_is_the_smallest_among_the_resolutions_of_smallest_rank_gamma():
    from fractions import Fraction

    import boundary_oracle as O

    case, rep = _report(TWO_MINIMA)
    # The ranks of each resolution by the independent sympy oracle.
    W = [[[Fraction(v) for v in row] for row in M] for M in TWO_MINIMA["weights"]]
    b = [[Fraction(v) for v in row] for row in TWO_MINIMA["biases"]]
    X = [[Fraction(v) for v in row] for row in TWO_MINIMA["sample"]]
    ties = O.ties(TWO_MINIMA["widths"], W, b, X)
    ranks = [O.resolution_ranks(TWO_MINIMA["widths"], W, b, X, {ties[0]: a})[:2] for a in (True, False)]
    low = min(rg for rg, _ in ranks)
    minimal = sorted(ra for rg, ra in ranks if rg == low)
    assert len(minimal) == 2 and minimal[0] < minimal[1]
    assert (rep["rank_gamma"], rep["rank_a"]) == (low, minimal[0])
    assert verify_certificate(case, rep, require_claims=True)[0]
    # The other minimal resolution's R_A is certified too, but it is not what the rule gives.
    valid, msgs = verify_certificate(case, dict(rep, rank_a=minimal[1]), require_claims=True)
    assert not valid and (f"rank_a: report says {minimal[1]}, the certificate certifies {minimal[0]} (the smallest "
                          "R_A among the resolutions of smallest R_Gamma)") in msgs


# --- strict reading --------------------------------------------------------------------------------

@pytest.fixture()
def kink_text():
    _, rep = _report(KINK)
    return json.dumps(rep)


@pytest.mark.parametrize("old, new, field", [
    ('"dim": 3', '"dim": NaN', "dim: expected a finite number, found NaN"),
    ('"dim": 3', '"dim": Infinity', "dim: expected a finite number, found Infinity"),
    ('"dim": 3', '"dim": -Infinity', "dim: expected a finite number, found -Infinity"),
    ('"dim": 3', '"dim": 1e100000', "dim: exponent beyond ±4000"),
    ('"dim": 3', '"dim": 3.0', "dim: expected int, found Decimal"),
    ('"dim": 3', '"dim": "3"', "dim: expected int, found str"),
    ('"dim": 3', '"dim": true', "dim: expected int, found bool"),
    ('"dim": 3', '"dim": ' + "9" * 4500, "dim: more than 4000 digits"),
    ('"b_2[0]": "-3"', '"b_2[0]": "-\\u0663"', "certificate.entering.delta['b_2[0]']: expected a rational string 'p/q' "
                                              "(ASCII digits)"),
    ('"b_2[0]": "-3"', '"b_2[0]": "-3.0"', "certificate.entering.delta['b_2[0]']: expected a rational string"),
    ('"rank_gamma": 2, "rank_a": 2, "dim": 3', '"rank_gamma": 2.0, "rank_a": 2, "dim": 3',
     "certificate.entering.rank_gamma: expected int, found Decimal"),
])
def test_numbers_in_reports_are_read_strictly(tmp_path, capsys, kink_text, old, new, field):
    assert old in kink_text
    rc, out, err, path = _cli(tmp_path, capsys, KINK, None, text=kink_text.replace(old, new, 1))
    if "dim: expected int" in field or "delta[" in field or "rank_gamma: expected" in field:
        # a JSON value of the wrong type: the schema refuses the report (exit 3, the field's path)
        assert rc == 3 and field in out and out.endswith("certificate INVALID\n"), out
    else:  # not JSON the reader takes (NaN, huge exponents, too many digits): bad input
        assert rc == 2 and out == "" and err.startswith(f"error: {path}: ") and field in err, err


def test_parse_report_rational():
    assert parse_report_rational("12/-3".replace("-", ""), "r", "f") == 4
    assert parse_report_rational("7" * 5000, "r", "f").denominator == 1  # any size: FLINT converts the digits
    for bad in ("1/0", " 1", "0x10", "1e3", "\uff13", None, 3):
        with pytest.raises(CaseFormatError, match=r"^r: f: "):
            parse_report_rational(bad, "r", "f")


def test_swapped_case_and_report_are_named(tmp_path, capsys):
    _, rep = _report(KINK)
    report_path = _write(tmp_path, "report.json", rep)
    rc = main(["verify-certificate", report_path, KINK])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and err == (f"error: {report_path}: this file is a report (exactident-report/1), "
                                             "not a case: the arguments are CASE then REPORT\n")
    rc = main(["verify-certificate", KINK, KINK])
    out, err = capsys.readouterr()
    assert rc == 2 and err == (f"error: {KINK}: this file is a case (exactident-case/1), not a report: the "
                               "arguments are CASE then REPORT\n")


def test_every_shipped_report_verifies(tmp_path, capsys):
    # exit 3 only for certificates that fail: every report check writes (all verdicts) verifies.
    for path in (KINK, KINK_PLUS, SECOND_ORDER, "cases/boundary-invisible-tie.json", "cases/iris-mlp-4-8-8-3.json"):
        _case, rep = _report(path)
        rc, out, _, _ = _cli(tmp_path, capsys, path, rep)
        assert rc == 0 and out.endswith("certificate VALID\n"), (path, out)


# --- malformed fields of the parts make the report invalid (exit 3), each naming its field -------------

DEGENERATE = {"format": "exactident-case/1", "name": "dead", "widths": [1, 2, 1],
              "weights": [[["1"], ["2"]], [["3", "0"]]], "biases": [["1", "1"], ["0"]], "sample": [["1"], ["2"]]}


def _set(path, value):
    def go(d):
        node = d
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
    return go


B, R = ["certificate", "boundary"], ["certificate", "rank", "rank_gamma"]


@pytest.mark.parametrize("source, mutate, match", [
    (KINK, _set([*B], []), r"certificate\.boundary: expected dict, found list"),
    (KINK, _set([*B, "resolutions", 0], 1), r"certificate\.boundary\.resolutions\[0\]: expected dict, found int"),
    (KINK, _set([*B, "resolutions", 0, "active"], [1]), r"resolutions\[0\]\.active\[0\]: expected bool, found int"),
    (KINK, _set([*B, "resolutions", 0, "reachable"], []), r"resolutions\[0\]\.reachable: expected dict, found list"),
    (KINK, _set([*B, "resolutions", 0, "reachable", "delta"], {"W_01[0,0]": "1"}),
     r"reachable\.delta\['W_01\[0,0\]'\]: parameter name 'W_01\[0,0\]' is not spelled canonically \('W_1\[0,0\]'\)"),
    (KINK, _set([*B, "fixed_edges", 0], [1, 0]), r"fixed_edges\[0\]: expected \[an int >= 1, .*, found 2 entries"),
    (KINK, _set([*B, "resolutions", 0, "rank_gamma"], []), r"resolutions\[0\]\.rank_gamma: expected dict, found list"),
    (KINK, _set([*B, "resolutions", 0, "rank_gamma", "rank"], -1),
     r"resolutions\[0\]\.rank_gamma\.rank: expected a nonnegative int, found -1"),
    (KINK, _set(["certificate", "entering", "nonequivalence"], "path"),
     r"certificate\.entering\.nonequivalence: expected dict, found str"),
    (KINK, _set(["certificate", "entering", "nonequivalence", "path", "neurons"], ["0"]),
     r"nonequivalence\.path\.neurons\[0\]: expected int, found str"),
    (KINK, _set(["certificate", "entering", "nonequivalence", "path", "neurons"], [5]),
     r"nonequivalence\.path: neuron 5 does not exist in layer 1 \(width 1\)"),
    (KINK, _set(["certificate", "entering", "nonequivalence", "coefficients"], ["3", "x"]),
     r"nonequivalence\.coefficients\[1\]: expected a rational string"),
    (KINK, _set(["certificate", "entering", "nonequivalence"], {"invariant": "first-layer-rays", "neuron": 3}),
     r"nonequivalence\.neuron: no hidden neuron 3 in layer 1"),
    (KINK, _set(["patterns"], {}), r"patterns: expected list, found dict"),
    (KINK, _set(["patterns", 0], "x"), r"patterns\[0\]: expected dict, found str"),
    (KINK, lambda d: d["patterns"][0].pop("ties"), r"patterns\[0\]\.ties: missing"),
    (DEGENERATE, _set(["certificate", "degenerate"], 1), r"certificate\.degenerate: expected dict, found int"),
    (DEGENERATE, _set(["certificate", "degenerate", "why"], "dead"),
     r"certificate\.degenerate\.why: expected 'outgoing' or 'incoming', found 'dead'"),
    (CRT_LOWER, _set([*R, "upper", "kernel", 0], "1"), r"upper\.kernel\[0\]: expected list, found str"),
    (CRT_LOWER, _set([*R, "upper", "kernel", 0, 0], [0]),
     r"upper\.kernel\[0\]\[0\]: expected \[a nonnegative int, .*, found 1 entries"),
    (CRT_LOWER, _set([*R, "upper", "kernel", 0, 0], [0, "1/0"]), r"upper\.kernel\[0\]\[0\]\[1\]: zero denominator"),
    (CRT_LOWER, _set([*R, "upper", "kernel", 0, 0], ["0", "1"]), r"upper\.kernel\[0\]\[0\]\[0\]: expected int"),
    (DEAD_NEURON, _set(["certificate", "rank"], "rank"), r"certificate\.rank: expected dict, found str"),
    (DEAD_NEURON, _set(["certificate", "rank", "fixed_edges"], {}),
     r"certificate\.rank\.fixed_edges: expected list, found dict"),
    (CRT_LOWER, _set([*R, "upper", "primes"], [True]), r"upper\.primes\[0\]: expected int, found bool"),
])
def test_malformed_part_fields_are_invalid(source, mutate, match):
    case, rep = _report(source)
    assert verify_certificate(case, rep, require_claims=True)[0]
    bad = copy.deepcopy(rep)
    mutate(bad)
    valid, msgs = verify_certificate(case, bad, "r.json", require_claims=True)
    assert not valid and len(msgs) == 1 and re.search(r"^\S*" + match, msgs[0]), msgs


def test_report_exponent_decimal_refuses_is_bad_input(tmp_path, capsys):
    _, rep = _report(KINK)
    text = json.dumps(rep).replace('"dim": 3', '"dim": 1E+9999999999999999999', 1)
    rc, out, err, path = _cli(tmp_path, capsys, KINK, None, text=text)
    assert rc == 2 and out == "" and err.startswith(f"error: {path}: ") and "exponent" in err, err


def test_report_array_needs_exactly_one_report_for_the_case(tmp_path, capsys):
    _, rep = _report(KINK)
    rc, _out, err, path = _cli(tmp_path, capsys, KINK, [rep, rep])
    assert rc == 2 and err == f"error: {path}: expected one report named 'tiny-111-kink', found 2\n"


def test_booleans_are_not_integers_in_claims():
    # Python's True == 1: a widths or a pattern's tie spelled with true must not pass for 1.
    case, rep = _report(KINK)
    bad = dict(rep, widths=[True, 1, 1])
    valid, msgs = verify_certificate(case, bad, require_claims=True)
    assert not valid and msgs == ["widths[0]: expected int, found bool"]
    bad = copy.deepcopy(rep)
    bad["patterns"][1]["ties"][0]["layer"] = True
    valid, msgs = verify_certificate(case, bad, require_claims=True)
    assert not valid and msgs == ["patterns[1].ties[0].layer: expected int, found bool"]
