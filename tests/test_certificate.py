"""``exactident verify-certificate``: accepts real certificates, rejects tampered ones (exit 3)
and malformed reports (exit 2, one line naming file and field)."""

import copy
import json

import pytest

from exactident.cli import main
from exactident.io.case import load_case
from exactident.verify.certificate import verify_certificate

KINK = "cases/tiny-111-kink.json"


@pytest.fixture()
def report(tmp_path, capsys):
    assert main(["check", "--json", "--no-numeric", KINK]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] == "not-identifiable"
    return data


def _write(tmp_path, data):
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return str(path)


def test_real_certificate_is_valid(tmp_path, report, capsys):
    assert main(["verify-certificate", KINK, _write(tmp_path, report)]) == 0
    out = capsys.readouterr().out
    assert "certificate VALID" in out and "R_Gamma(s) = R_A(s) = 2 < dim = 3" in out


def _tampered(report, how):
    data = copy.deepcopy(report)
    ent = data["certificate"]["entering"]
    if how == "delta entry":  # (0, 1, -2) is not in ker Gamma(active): row (0, 3, 1) gives 1
        ent["delta"]["b_2[0]"] = "-2"
    elif how == "flipped side":  # g_t.delta = 1 > 0 cannot certify the inactive side
        ent["resolution"][0]["active"] = False
    elif how == "parameter name":  # the case has no W_2[0,0] among the free parameters
        ent["delta"]["W_2[0,0]"] = ent["delta"].pop("W_1[0,0]")
    elif how == "claimed rank":
        ent["rank_a"] = 3
    elif how == "claimed derivative":
        ent["derivatives"][0]["value"] = "2"
    elif how == "fixed edge not free":  # W_2[0,0] is the fixed edge: listing it breaks tau
        ent["parameters"][0] = "W_2[0,0]"
    return data


@pytest.mark.parametrize("how", ["delta entry", "flipped side", "parameter name", "claimed rank",
                                 "claimed derivative", "fixed edge not free"])
def test_tampered_certificate_is_rejected(tmp_path, report, capsys, how):
    assert main(["verify-certificate", KINK, _write(tmp_path, _tampered(report, how))]) == 3
    assert "certificate INVALID" in capsys.readouterr().out


def test_certificate_for_another_case_is_rejected(tmp_path, report, capsys):
    # Adding sample -1 makes the case identifiable: the same certificate must fail.
    with open(KINK) as fh:
        case = json.load(fh)
    case["sample"].append(["-1"])
    path = tmp_path / "case.json"
    path.write_text(json.dumps(case))
    assert main(["verify-certificate", str(path), _write(tmp_path, report)]) == 3


def test_report_that_is_not_json_exits_2(tmp_path, capsys):
    path = _write(tmp_path, "{not json")
    assert main(["verify-certificate", KINK, path]) == 2  # not a report at all: bad input
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and path in err and "not valid JSON" in err


@pytest.mark.parametrize("data, field", [
    ({"name": "tiny-111-kink", "verdict": "not-identifiable", "certificate": "yes"},
     "certificate: expected dict, found str"),
    ({"verdict": "not-identifiable", "certificate": {"line": {}}}, "name: missing"),
    ({"name": "tiny-111-kink", "certificate": {"line": {}}}, "verdict: missing"),
    ({"name": "tiny-111-kink", "verdict": "not-identifiable", "certificate": {"entering": {"resolution": []}}},
     "certificate.entering.invisible_ties: missing"),
])
def test_malformed_report_exits_3(tmp_path, capsys, data, field):
    path = _write(tmp_path, data)
    assert main(["verify-certificate", KINK, path]) == 3  # invalid, naming the field's path
    out = capsys.readouterr().out.strip()
    assert out.splitlines() == [out.splitlines()[0], "certificate INVALID"] and field in out


def test_bad_delta_value_names_the_field(report):
    data = copy.deepcopy(report)
    data["certificate"]["entering"]["delta"]["b_1[0]"] = "0.5"
    valid, msgs = verify_certificate(load_case(KINK), data, "r.json")
    assert not valid and msgs == ["certificate.entering.delta['b_1[0]']: expected a rational string 'p/q' "
                                  "(ASCII digits), found '0.5'"]


def test_bad_parameter_name_names_the_field(report):
    data = copy.deepcopy(report)
    data["certificate"]["entering"]["parameters"][1] = "bias one"
    valid, msgs = verify_certificate(load_case(KINK), data, "r.json")
    assert not valid and len(msgs) == 1 and msgs[0].startswith("certificate.entering.parameters[1]: expected a "
                                                                "parameter name like")


SECOND_ORDER = "cases/boundary-second-order-tie.json"


@pytest.fixture()
def line_report(capsys):
    assert main(["check", "--json", "--no-numeric", SECOND_ORDER]) == 0
    return json.loads(capsys.readouterr().out)


def test_line_certificate_for_a_tie_never_entered_at_first_order(tmp_path, line_report, capsys):
    """f = relu(-2x + b0) + relu(x + b1) - 2 with b0 = 0, b1 = 2; samples -1, 1, -2, 0, 2, 1.

    Ties: neuron 0 at x = 0 (z = b0) and neuron 1 at x = -2.  On the all-active resolution the
    rows (w0 x a0, w1... ) give ker Gamma = span (db1, db2) = (1, -1) (derivation: rows at 1 and 2
    force dw1 = 0, then db1 + db2 = 0, the tie row at 0 forces db0 = 0, the row at -1 dw0 = 0):
    every kernel direction keeps z = b0 at the tie x = 0 exactly, so no direction enters strictly.
    But along delta = (db1, db2) = (1, -1): f changes by relu(x + 2 + eps) - relu(x + 2) - eps,
    which is 0 for every x >= -2 (all samples, the tie -2 included) and -eps at x = -3.
    """
    cert = line_report["certificate"]
    assert line_report["verdict"] == "not-identifiable" and "entering" not in cert
    assert main(["verify-certificate", SECOND_ORDER, _write(tmp_path, line_report)]) == 0
    hand = {"name": "boundary-second-order-tie", "verdict": "not-identifiable",
            "certificate": {"line": {"delta": {"b_1[1]": "1", "b_2[0]": "-1"}, "t0": None, "probe": ["-3"]}}}
    assert verify_certificate(load_case(SECOND_ORDER), hand)[0]


@pytest.mark.parametrize("change, why", [
    # x = 1: relu(3 + eps) - 3 - eps = 0
    ({"probe": ["1"]}, "f is constant along the line at the probe point (1); the certificate claims it changes"),
    ({"delta": {"b_1[1]": "1", "b_2[0]": "-2"}}, "output 0 at sample 0 moves along theta + eps delta"),
    ({"delta": {"b_3[0]": "1"}}, "not a weight or bias"),
])
def test_tampered_line_certificate_is_rejected(change, why):
    line = {"delta": {"b_1[1]": "1", "b_2[0]": "-1"}, "t0": None, "probe": ["-3"]}
    line.update(change)
    report = {"name": "boundary-second-order-tie", "verdict": "not-identifiable", "certificate": {"line": line}}
    valid, msgs = verify_certificate(load_case(SECOND_ORDER), report)
    assert not valid and any(why in m for m in msgs)


def test_invisible_ties_are_checked(tmp_path):
    """z1 = x, z2 = relu(z1) - 1, f = relu(z2); samples 0, 1, 3.

    x = 0 ties neuron (1,0) but z2(0) = -1 < 0: invisible.  x = 1 ties the layer-2 neuron
    (z2 = 0): visible.  Inactive side: only x = 3 reaches the output, rows over
    (w1, b1, b2, b3): (3,1,1,1), (0,0,0,1), (0,0,0,1): rank 2 = rank A < 4; the certificate
    must list x^0 as invisible and resolve x^1.  Claiming the visible tie invisible is rejected.
    """
    case_path = tmp_path / "case.json"
    case_path.write_text(json.dumps({"format": "exactident-case/1", "name": "inv2", "widths": [1, 1, 1, 1],
                                     "weights": [[["1"]], [["1"]], [["1"]]], "biases": [["0"], ["-1"], ["0"]],
                                     "sample": [["0"], ["1"], ["3"]]}))
    from exactident.check import check
    case = load_case(str(case_path))
    data = check(case, numeric=False).to_dict()
    ent = data["certificate"]["entering"]
    assert ent["invisible_ties"] == [{"sample": 0, "layer": 1, "neuron": 0}]
    assert [(t["sample"], t["layer"]) for t in ent["resolution"]] == [(1, 2)]
    assert verify_certificate(case, data)[0]
    bad = copy.deepcopy(data)
    bad_ent = bad["certificate"]["entering"]
    bad_ent["invisible_ties"].append({"sample": 1, "layer": 2, "neuron": 0})
    bad_ent["resolution"] = []
    bad_ent["derivatives"] = []
    valid, msgs = verify_certificate(case, bad)
    assert not valid and any("invisible_ties: the certificate lists [(0, 1, 0), (1, 2, 0)], the case's invisible "
                                 "ties (a later hidden layer all strictly inactive) are [(0, 1, 0)]" in m for m in msgs)
