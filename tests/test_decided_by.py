"""The report fields ``decided_by`` and ``provenance``: what check writes and what verify-certificate accepts.

Right values: the rules of docs/theory.md ("Verdict rules") applied by hand to each case, and the
case file's own ``provenance`` object.
"""

from __future__ import annotations

import copy
import json
import warnings

import pytest
import structural_cases as SC

from exactident.check import check
from exactident.cli import main
from exactident.io.case import load_case, parse_case
from exactident.io.report import reports_to_json
from exactident.verify.certificate import verify_certificate


def _spec(sample):
    # f = 3 relu(2x + 1) (docs/theory.md): 0, 1, -1 -> C_S (3 = dim); 0, 1, 2 -> R_Gamma = R_A = 2 < 3.
    return {"format": "exactident-case/1", "name": "t", "widths": [1, 1, 1], "weights": [[["2"]], [["3"]]],
            "biases": [["1"], ["0"]], "sample": [[x] for x in sample]}


DEGENERATE = {"format": "exactident-case/1", "name": "dead", "widths": [1, 2, 1],
              "weights": [[["1"], ["2"]], [["3", "0"]]], "biases": [["1", "1"], ["0"]], "sample": [["1"], ["2"]]}

# (case, verdict, decided_by) by hand: C_S off the boundary; C_N failing; the kink -1/2 has an entering
# direction (docs/boundary.md, worked example); tiny-111-kink-plus adds -1, C_S on both resolutions;
# neuron (1,1) of DEGENERATE has no outgoing weight; the dead neuron; the look-alike twins (nothing).
RULES = [
    (_spec(["0", "1", "-1"]), "identifiable", "theorem-9"),
    (_spec(["0", "1", "2"]), "not-identifiable", "theorem-8"),
    ("cases/tiny-111-kink.json", "not-identifiable", "boundary-entering"),
    ("cases/tiny-111-kink-plus.json", "identifiable", "boundary-cs"),
    (DEGENERATE, "degenerate", "degenerate"),
    (SC.DEAD, "not-identifiable", "dead-neuron"),
    (SC.TWINS_OFF, "inconclusive", "none"),
]


def _report(source):
    case = load_case(source) if isinstance(source, str) else parse_case(source)
    return case, json.loads(reports_to_json([check(case, numeric=False)], as_list=False))


@pytest.mark.parametrize("source, verdict, rule", RULES, ids=[r[2] for r in RULES])
def test_each_rule_is_named_and_verified(source, verdict, rule):
    case, rep = _report(source)
    assert (rep["verdict"], rep["decided_by"]) == (verdict, rule)
    assert verify_certificate(case, rep, require_claims=True)[0]
    # any other rule is rejected: it gives another verdict, or its proof is not in the certificate
    # (a structural certificate *is* a line certificate with its mechanism named: "line" is true too)
    also_true = {rule, "line"} if "structural" in rep["certificate"] else {rule}
    for other in ("theorem-9", "theorem-8", "boundary-cs", "boundary-entering", "line", "dead-neuron",
                  "always-active-block", "degenerate", "none"):
        if other not in also_true:
            valid, msgs = verify_certificate(case, dict(rep, decided_by=other), require_claims=True)
            assert not valid and any(m.startswith(f"decided_by: report says {other}") for m in msgs), other


def test_decided_by_messages():
    case, rep = _report(_spec(["0", "1", "2"]))
    valid, msgs = verify_certificate(case, dict(rep, decided_by="boundary-cs"), require_claims=True)
    assert msgs[-1] == ("decided_by: report says boundary-cs, which gives identifiable, but the verdict is "
                        "not-identifiable")
    valid, msgs = verify_certificate(case, dict(rep, decided_by="line"), require_claims=True)
    assert msgs[-1] == "decided_by: report says line, but the certificate has no valid line part"
    valid, msgs = verify_certificate(case, dict(rep, decided_by="magic"), require_claims=True)
    assert not valid and msgs == ["decided_by: expected 'theorem-9' or 'boundary-cs' or 'theorem-8' or "
                                  "'boundary-entering' or 'line' or 'dead-neuron' or 'untouched-input' or "
                                  "'proportional-neurons' or 'always-active-block' or 'unpinned-hyperplane' or "
                                  "'degenerate' or 'none' or 'free-rank' or 'dead-units' or 'constant-units' or "
                                  "'slope-lines' or 'submersion' or 'entering-submersion' or 'constant-rank', "
                                  "found 'magic'"]
    valid, msgs = verify_certificate(case, dict(rep, decided_by=8), "r.json", require_claims=True)
    assert not valid and len(msgs) == 1 and msgs[0].startswith("decided_by: expected 'theorem-9'")
    assert msgs[0].endswith(", found 8")


def test_a_degenerate_case_is_decided_by_the_degenerate_rule_only():
    case, rep = _report(DEGENERATE)
    valid, msgs = verify_certificate(case, dict(rep, verdict="not-identifiable", decided_by="theorem-8"),
                                     require_claims=True)
    assert not valid and "decided_by: report says theorem-8, but the certificate has no certified R_Gamma = R_A " \
                         "< dim with no visible tie" in msgs


# --- provenance ---------------------------------------------------------------------------------------

PROVENANCE = {"source_file": "model.onnx", "format": "onnx", "weight_dtype": "float32"}


def test_provenance_of_an_imported_case_verifies(tmp_path, capsys):
    obj = dict(_spec(["0", "1", "2"]), provenance=PROVENANCE)
    path = tmp_path / "c.json"
    path.write_text(json.dumps(obj))
    assert main(["check", "--json", "--no-numeric", str(path)]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["provenance"] == PROVENANCE
    (tmp_path / "r.json").write_text(json.dumps(rep))
    assert main(["verify-certificate", str(path), str(tmp_path / "r.json")]) == 0
    assert capsys.readouterr().out.endswith("certificate VALID\n")
    case = parse_case(obj)
    bad = copy.deepcopy(rep)
    bad["provenance"]["weight_dtype"] = "float64"
    valid, msgs = verify_certificate(case, bad, require_claims=True)
    assert not valid and msgs[-1] == "provenance.weight_dtype: report says 'float64', the case's is 'float32'"
    # a provenance claimed for a case file that has none, or not even an object
    plain, _ = _report(_spec(["0", "1", "2"]))
    valid, msgs = verify_certificate(plain, rep, require_claims=True)
    assert not valid and msgs[-1].startswith("provenance: report says") and msgs[-1].endswith("the case's is None")
    valid, msgs = verify_certificate(case, dict(rep, provenance="onnx"), require_claims=True)
    assert not valid and msgs[-1].startswith("provenance: report says 'onnx'")


def test_provenance_from_sklearn_round_trip(tmp_path):
    sklearn = pytest.importorskip("sklearn")
    del sklearn
    import numpy as np
    from sklearn.neural_network import MLPRegressor

    from exactident import from_sklearn

    X = np.array([[0.0, 1.0], [1.0, 0.5], [-1.0, 2.0], [0.5, -0.5], [2.0, 1.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # not converged after 50 iterations: any fitted weights will do
        model = MLPRegressor(hidden_layer_sizes=(3,), activation="relu", max_iter=50, random_state=0).fit(X, X[:, 0])
    case = from_sklearn(model, X, name="mlp")
    rep = json.loads(reports_to_json([check(case, numeric=False)], as_list=False))
    assert rep["provenance"] == dict(case.provenance)
    assert verify_certificate(case, rep, require_claims=True)[0]


def test_the_verifier_knows_the_engines_rules():
    # kept apart on purpose (the verifier imports nothing of the engine): they must not drift
    from exactident.boundary import structural as engine
    from exactident.verify import claims
    from exactident.verify import structural as verifier

    assert claims.RULES == engine.RULES and verifier.MECHANISMS == engine.MECHANISMS
