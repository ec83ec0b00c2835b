"""A blank input coordinate (0 on every sample) is a certificate of non-identifiability for any activation.

Hand derivation: in the 2-3-1 leaky ReLU MLP of cases/architectures/leaky-mlp.json, sampled only on the line
``x[1] = 0``, each weight ``fc1.weight[i, 1]`` multiplies ``x[1] = 0`` on every sample, so the outputs on X do
not depend on it (a straight line of parameters with the same outputs on X).  The line leaves the rescaling
orbit: rescaling unit ``i`` moves its whole row ``(fc1.weight[i, 0], fc1.weight[i, 1], fc1.bias[i])``, all
nonzero here, not one entry.  Off the sample (``x*[1] != 0``) the output moves, since a leaky unit always
passes a nonzero slope (1 or 0.01) and fc2's weights are nonzero.  Leaky units are never dead, so before
blank inputs counted as silent units no certificate applied and the verdict was inconclusive.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from exactident.check import check
from exactident.io.case import parse_case
from exactident.verify.certificate import verify_certificate

ROOT = Path(__file__).resolve().parents[1]


def _blank_case():
    obj = json.loads((ROOT / "cases" / "architectures" / "leaky-mlp.json").read_text())
    obj["name"] = "leaky-blank-input"
    obj["sample"] = [[t, "0"] for t in ("-2", "-1", "-1/2", "1/3", "1", "2", "3")]
    obj.pop("expected", None)
    return parse_case(obj, "leaky-blank-input.json")


def test_blank_input_decides_not_identifiable_and_verifies():
    case = _blank_case()
    report = check(case, numeric=False)
    assert (report.verdict, report.decided_by) == ("not-identifiable", "dead-units")
    part = report.certificate["dead_units"]
    assert part["units"] == [[0, 1]] and part["name"].startswith("fc1.weight[") and part["name"].endswith(",1]")
    assert "input(s) x[1] are 0 on every sample" in report.reason
    assert json.loads(json.dumps(part["x"])) and part["x"][1] != "0"  # the witness leaves the blank line
    assert part["f_0"] != part["f_eps"]
    valid, messages = verify_certificate(case, report.to_dict(), "leaky-blank-input", require_claims=True)
    assert valid, messages


@pytest.mark.parametrize("mutate,message", [
    (lambda part: part.update(units=[[0, 0]]), "input x[0] is"),
    (lambda part: part.update(units=[[0, 7]]), "is not a hidden unit or an input"),
])
def test_blank_input_mutations_are_rejected(mutate, message):
    case = _blank_case()
    rep = check(case, numeric=False).to_dict()
    bad = copy.deepcopy(rep)
    mutate(bad["certificate"]["dead_units"])
    valid, messages = verify_certificate(case, bad, "leaky-blank-input", require_claims=True)
    assert not valid and any(message in m for m in messages), messages
