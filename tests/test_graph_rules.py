"""The layer-graph engine's rules with their hypotheses (boundary.rules) and the line rule
(boundary.kernel_line, verified by verify.line.check_graph_line).

Truth: hand derivations written here, checked with an independent forward pass in ``fractions.Fraction``
(``_f`` below: the three-layer graph ``f(x) = v leaky(w x + b) + d`` evaluated directly, no project code).
"""

from __future__ import annotations

import copy
import json
from fractions import Fraction as F

import pytest

from exactident.check import check
from exactident.io.case import parse_case
from exactident.verify.certificate import verify_certificate

SLOPE = F(1, 10)


def _case(w="1", b="0", v="2", d="0", xs=(1, 2, 3), act=None):
    act = act or {"name": "act", "op": "leaky_relu", "inputs": ["fc1"], "negative_slope": "1/10"}
    obj = {"format": "exactident-case/2", "name": "leaky-1-1-1", "input_shape": [1],
           "layers": [{"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [[w]], "bias": [b]}, act,
                      {"name": "fc2", "op": "linear", "inputs": ["act"], "weight": [[v]], "bias": [d]}],
           "output": "fc2", "sample": [[str(x)] for x in xs]}
    return parse_case(obj)


def _f(theta, x, slope=SLOPE):
    """The independent oracle: ``v leaky(w x + b) + d`` in Fractions (theta = (w, b, v, d))."""
    w, b, v, d = theta
    z = w * x + b
    return v * (z if z >= 0 else slope * z) + d


def _moved(theta, delta, t):
    return [a + t * F(delta.get(j, 0)) for j, a in enumerate(theta)]


def test_line_rule_where_its_hypotheses_hold():
    """On x = 1, 2, 3 the unit is active: f = v (w x + b) + d on X is affine in x, Gamma_free has rank 2 < dim_free
    = 3 (4 parameters, one rescaling) with 3 rows: no submersion, no dead or constant unit.  The line rule needs
    only exact evaluation, so it runs: e.g. b += t, d -= v t keeps f on X; at x* < -b the unit is negative and
    f(x*) = v/10 (w x* + b + t) + d - v t moves with slope -9v/10.  Whatever line the engine finds, the oracle
    confirms: f on X unchanged at several t in (0, t0], f(probe) changed."""
    case = _case()
    r = check(case, numeric=False)
    assert (r.verdict, r.decided_by) == ("not-identifiable", "line")
    part = r.certificate["line"]
    delta = {j: F(q) for j, q in part["delta"]}
    theta = [F(1), F(0), F(2), F(0)]
    t0 = F(part["t0"]) if part["t0"] is not None else F(1)
    for t in (t0, t0 / 2, t0 / 7, t0 / 1000):
        assert [_f(_moved(theta, delta, t), x) for x in (1, 2, 3)] == [_f(theta, x) for x in (1, 2, 3)]
    probe = F(part["probe"][0])
    assert _f(_moved(theta, delta, t0 / 1000), probe) != _f(theta, probe)
    rules = {e["rule"]: e for e in r.to_dict()["rules"]}
    assert rules["line"]["status"] == "decided"
    assert rules["theorem-8"]["status"] == "not-applicable" and "leaky ReLU" in rules["theorem-8"]["why"]
    valid, msgs = verify_certificate(case, r.to_dict(), require_claims=True)
    assert valid, msgs


def test_line_rule_does_not_fire_on_an_identifiable_case():
    """x = -2, -1, 1, 2 see both sides of the kink: rows (v x s, v s, s (w x + b), 1) with s = 1 or 1/10 have
    rank 3 = dim_free (hand: the slope breaks the affine dependence), so free-rank decides and no line is sought."""
    r = check(_case(xs=(-2, -1, 1, 2)), numeric=False)
    assert (r.verdict, r.decided_by, r.rank_gamma, r.dim) == ("identifiable", "free-rank", 3, 3)
    rules = {e["rule"]: e for e in r.to_dict()["rules"]}
    assert rules["line"]["status"] == "not-run" and "line" not in (r.certificate or {})


def test_line_rule_stopped_by_its_size_cap(monkeypatch):
    """The one condition of the line rule a network can fail is the size of the exact kernel: past the cap the rule
    does not run and the report says why in one line.  The case is then settled by the rule tried after it,
    constant-rank (x = 1, 2, 3 all active: alpha rows (x, 1, 1) have rank 2 = rank Gamma_free < 3 rows, and a
    point on the slope side raises the rank), never by a guess: the verifier accepts the report."""
    import exactident.boundary.kernel_line as graph_line

    monkeypatch.setattr(graph_line, "MAX_LINE_ENTRIES", 5)
    case = _case()
    r = check(case, numeric=False)
    assert (r.verdict, r.decided_by) == ("not-identifiable", "constant-rank")
    assert r.certificate["constant_rank"]["rank_a"] == 2
    assert verify_certificate(case, r.to_dict(), require_claims=True)[0]
    rules = {e["rule"]: e for e in r.to_dict()["rules"]}
    assert rules["line"]["status"] == "not-run" and "cap of 5" in rules["line"]["why"]


def test_rules_say_when_the_certificate_search_is_off():
    from exactident.check import check_constrained

    case = _case()
    r = check_constrained(case.compiled, case.X, structural=False)
    assert (r.verdict, r.decided_by) == ("inconclusive", "none")
    rules = {e["rule"]: e for e in r.to_dict()["rules"]}
    assert rules["line"]["status"] == "not-run" and "structural=False" in rules["line"]["why"]
    assert rules["free-rank"]["status"] == "tried"


def test_theorem_8_never_applies_to_a_layer_graph():
    """C_N (Theorem 8) is proved for the dense ReLU MLP with every weight free only: its hypothesis fails on any
    constrained network with a feature, and holds on the plain MLP's constrained form."""
    from exactident.boundary.rules import GRAPH_RULES
    from exactident.model.network import Network

    rule = {g.name: g for g in GRAPH_RULES}["theorem-8"]
    plain = Network((1, 1, 1), [[[1]], [[2]]], [[0], [0]])
    assert rule.fails(plain) is None
    leaky = _case().compiled
    assert "leaky ReLU" in (rule.fails(leaky) or "")
    assert all(g.fails(leaky) is None for g in GRAPH_RULES if g.name != "theorem-8")  # exact evaluation only
    prelu = _case(act={"name": "act", "op": "prelu", "inputs": ["fc1"], "weight": ["1/4"]}).compiled
    assert "PReLU" in (rule.fails(prelu) or "")


# ---------------------------------------------------------------- forgeries: a tampered line part is INVALID

@pytest.fixture(scope="module")
def line_report():
    case = _case()
    return case, check(case, numeric=False).to_dict()


def _invalid(case, report):
    valid, _msgs = verify_certificate(case, json.loads(json.dumps(report)), require_claims=True)
    return not valid


def test_line_forgeries_are_invalid(line_report):
    case, report = line_report
    assert not _invalid(case, report)
    part = report["certificate"]["line"]

    def forged(**change):
        bad = copy.deepcopy(report)
        bad["certificate"]["line"].update(change)
        return bad

    # the weight w alone: f on X moves (v x t): not a line of constant outputs
    assert _invalid(case, forged(delta=[[0, "1"]], names=["fc1.weight[0,0]"]))
    # a coefficient changed: the compensation no longer cancels on X
    assert _invalid(case, forged(delta=[[j, str(F(q) * (2 if m == 0 else 1))] for m, (j, q) in
                                        enumerate(part["delta"])]))
    assert _invalid(case, forged(delta=[[j, "0"] for j, _q in part["delta"]]))  # the zero direction
    assert _invalid(case, forged(names=["fc2.bias[0]"] * len(part["names"])))  # names of other parameters
    assert _invalid(case, forged(delta=[[9, "1"]], names=["x"]))  # not a parameter
    assert _invalid(case, forged(probe=["2"]))  # x* = 2 is a sample: f(2) is constant along the line
    assert _invalid(case, forged(probe=["1", "2"]))  # wrong length
    assert _invalid(case, forged(t0="-1"))
    no_part = copy.deepcopy(report)
    del no_part["certificate"]["line"]
    assert _invalid(case, no_part)  # decided_by line without its part
    rules = copy.deepcopy(report)
    rules["rules"] = [dict(e, status="decided") if e["rule"] == "theorem-8" else e for e in rules["rules"]]
    assert _invalid(case, rules)  # Theorem 8 said to decide a leaky network


def test_line_t0_past_a_kink_is_invalid(line_report):
    """Hand-made line b -= t, d += v t (v = 2): z(1) = 1 - t reaches 0 at t = 1, so f on X is constant on [0, 1]
    (the oracle: at t = 1 and 1/2 the outputs on X are unchanged) but not beyond (t = 3/2: z(1) < 0)."""
    case, report = line_report
    theta = [F(1), F(0), F(2), F(0)]
    delta = {1: F(-1), 3: F(2)}
    for t in (F(1), F(1, 2)):
        assert [_f(_moved(theta, delta, t), x) for x in (1, 2, 3)] == [_f(theta, x) for x in (1, 2, 3)]
    assert _f(_moved(theta, delta, F(3, 2)), 1) != _f(theta, 1)
    good = copy.deepcopy(report)
    good["certificate"]["line"] = {"kind": "line", "delta": [[1, "-1"], [3, "2"]],
                                   "names": ["fc1.bias[0]", "fc2.bias[0]"], "t0": "1", "probe": ["-5"]}
    assert not _invalid(case, good)
    for t0 in ("3/2", None):
        bad = copy.deepcopy(good)
        bad["certificate"]["line"]["t0"] = t0
        assert _invalid(case, bad), t0


def test_graph_line_part_on_a_plain_mlp_is_invalid():
    """A plain MLP's line names parameters; the index form of a layer graph's line is refused there."""
    from exactident.io.case import parse_case as parse

    obj = {"format": "exactident-case/1", "name": "plain", "widths": [1, 1, 1], "weights": [[["1"]], [["2"]]],
           "biases": [["0"], ["0"]], "sample": [["1"], ["2"], ["3"]]}
    case = parse(obj)
    report = check(case, numeric=False).to_dict()
    report = dict(report, verdict="not-identifiable", decided_by="line",
                  certificate={"line": {"kind": "line", "delta": [[1, "1"], [3, "-2"]], "names": ["a", "b"],
                                        "t0": None, "probe": ["-5"]}})
    assert not verify_certificate(case, report, require_claims=True)[0]
    for part in ({"delta": [[1, "1"]], "t0": None, "probe": ["-5"]}, {"delta": {}, "t0": None, "names": ["a"]}):
        ok, msgs = verify_certificate(case, dict(report, certificate={"line": part}), require_claims=True)
        assert not ok and any("layer graph's line" in m for m in msgs), msgs
