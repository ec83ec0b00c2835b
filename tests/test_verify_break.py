"""Adversarial review of ``verify-certificate`` (issue 29): forgeries the verifier used to accept, each with the
independent reason its claim is false (hand derivations in the docstrings, Fraction arithmetic written here).

Every test builds its own tiny case, takes the engine's genuine report (which must verify), changes one claim,
and requires INVALID (exit 3 through the CLI).
"""

from __future__ import annotations

import copy
import json
import random
from fractions import Fraction

from exactident.check import check
from exactident.io.case import parse_case
from exactident.verify.certificate import run_verify_certificate, verify_certificate

# fc1 (1 -> 1) -> relu -> leaky_relu(1/4) -> fc2: the leaky unit's pre-activation is relu(w x + b), fixed weight 1
RELU_LEAKY = {"format": "exactident-case/2", "name": "relu-leaky", "input_shape": [1],
              "layers": [{"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [["1"]], "bias": ["0"]},
                         {"name": "a1", "op": "relu", "inputs": ["fc1"]},
                         {"name": "a2", "op": "leaky_relu", "inputs": ["a1"], "negative_slope": "1/4"},
                         {"name": "fc2", "op": "linear", "inputs": ["a2"], "weight": [["2"]], "bias": ["1"]}],
              "output": "fc2", "sample": [["-1"], ["1"], ["2"], ["3"]]}

# f(x) = -3/2 prelu_{1/4}(x) + 1 on a sample with x = 0 on the kink (the case)
PRELU = {"format": "exactident-case/2", "name": "prelu-111", "input_shape": [1],
         "layers": [{"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [["1"]], "bias": ["0"]},
                    {"name": "act", "op": "prelu", "inputs": ["fc1"], "weight": ["1/4"]},
                    {"name": "fc2", "op": "linear", "inputs": ["act"], "weight": [["-3/2"]], "bias": ["1"]}],
         "output": "fc2", "sample": [["0"], ["-3/2"], ["-4/5"], ["-2"], ["3/2"], ["-3"]]}


def _genuine(obj: dict, **kw):
    case = parse_case(obj)
    rep = check(case, numeric=False, **kw).to_dict()
    assert verify_certificate(case, rep, require_claims=True)[0]
    return case, rep


def _leaky_preactivation(w: Fraction, b: Fraction, x: Fraction) -> Fraction:
    """The second hidden layer's pre-activation at x for parameters (w, b) of fc1: relu(w x + b), weight 1 fixed."""
    return max(w * x + b, Fraction(0))


def test_unreachable_resolution_claimed_reachable_on_a_layer_graph(tmp_path, capsys):
    """The tie is at the leaky unit on x = -1: its pre-activation is relu(w x + b) >= 0 for *every* (w, b) (the
    weight into it is the fixed 1 of an activation on an activation), so the resolution with that tie inactive
    (z < 0) is reached by no parameter.  A layer-graph report has no reachability witness part; ``reachable:
    true`` used to be accepted unchecked on any pattern."""
    rng = random.Random(29)
    assert all(_leaky_preactivation(Fraction(rng.randint(-99, 99), 7), Fraction(rng.randint(-99, 99), 5),
                                    Fraction(-1)) >= 0 for _ in range(200))
    case, rep = _genuine(RELU_LEAKY)
    ties = [p["ties"] for p in rep["patterns"]]
    assert ties == [[{"sample": 0, "layer": 2, "neuron": 0, "active": True}],
                    [{"sample": 0, "layer": 2, "neuron": 0, "active": False}]]
    bad = copy.deepcopy(rep)
    bad["patterns"][1]["reachable"] = True
    valid, msgs = verify_certificate(case, bad, require_claims=True)
    assert not valid and any(m.startswith("patterns[1].reachable: report says true") for m in msgs), msgs
    unknown = copy.deepcopy(rep)
    unknown["patterns"][1]["reachable"] = "unknown"  # claims nothing: accepted
    assert verify_certificate(case, unknown, require_claims=True)[0]
    cp, rp = tmp_path / "c.json", tmp_path / "r.json"
    cp.write_text(json.dumps(RELU_LEAKY))
    rp.write_text(json.dumps(bad))
    assert run_verify_certificate(str(cp), str(rp)) == 3
    assert capsys.readouterr().out.rstrip().endswith("certificate INVALID")


def test_rank_a_and_cn_on_a_pattern_without_a_rank(tmp_path):
    """Without --exact-ranks the PReLU net's inactive resolution has only an interval, so its pattern carries
    ``rank_gamma: null``; ``rank_a`` and ``cn`` (Theorem 8, proved for the plain ReLU MLP only) on that pattern
    used to skip every check.  R_A is not defined for a PReLU unit (slope a parameter), and ``rank_a: 7`` exceeds
    even the number of parameters (5)."""
    case, rep = _genuine(PRELU)
    blank = [j for j, p in enumerate(rep["patterns"]) if p["rank_gamma"] is None and p["cs"] is None]
    assert blank, rep["patterns"]
    for field, value in (("rank_a", 7), ("rank_a", 0), ("cn", True), ("cn", False)):
        bad = copy.deepcopy(rep)
        bad["patterns"][blank[0]][field] = value
        valid, msgs = verify_certificate(case, bad, require_claims=True)
        assert not valid and any("cn and rank_a must be null" in m for m in msgs), (field, value, msgs)


def test_a_pattern_naming_a_tie_on_both_sides():
    """One tie listed active and inactive names no resolution (the verifier used to keep the last side)."""
    case, rep = _genuine(PRELU, exact_ranks=True)
    for j in range(len(rep["patterns"])):
        bad = copy.deepcopy(rep)
        tie = bad["patterns"][j]["ties"][0]
        bad["patterns"][j]["ties"].append(dict(tie, active=not tie["active"]))
        bad["patterns"][j].update(rank_gamma=None, cs=None)
        valid, msgs = verify_certificate(case, bad, require_claims=True)
        assert not valid and any("listed more than once" in m for m in msgs), msgs


# unit 1 (z = x - 10) is dead on x <= 3: the engine proves not-identifiable with a dead_units part only
DEAD_SKIP = {"format": "exactident-case/2", "name": "dead-skip", "input_shape": [1],
             "layers": [{"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [["1"], ["1"]],
                         "bias": ["0", "-10"]},
                        {"name": "act", "op": "relu", "inputs": ["fc1"]},
                        {"name": "fc2", "op": "linear", "inputs": ["act"], "weight": [["1", "1"]], "bias": ["0"]},
                        {"name": "res", "op": "add", "inputs": ["fc2", "input"]}],
             "output": "res", "sample": [["-2"], ["-1"], ["1"], ["2"], ["3"]]}


def test_decided_by_names_a_part_the_certificate_has():
    """decided_by says which argument proved the verdict; 'submersion' / 'entering-submersion' beside a
    certificate with no such part (only dead_units) used to be accepted for a layer graph, while the plain MLP
    refuses 'line' without a line part.  Every not-identifiable rule now needs its own verified part."""
    case, rep = _genuine(DEAD_SKIP)
    assert (rep["verdict"], rep["decided_by"]) == ("not-identifiable", "dead-units")
    assert not {"submersion", "entering_submersion"} & set(rep["certificate"])
    for rule in ("submersion", "entering-submersion", "constant-units"):
        valid, msgs = verify_certificate(case, dict(rep, decided_by=rule), require_claims=True)
        assert not valid and any(m.startswith(f"decided_by: {rule} without a verified") for m in msgs), msgs


# f(x) = 3 relu(2 x_0 + x_1) + 1: samples (1, -2) and (0, 0) are both on the kink, at different points
TWO_TIES = {"format": "exactident-case/1", "name": "two-ties", "widths": [2, 1, 1],
            "weights": [[["2", "1"]], [["3"]]], "biases": [["0"], ["1"]],
            "sample": [["1", "-2"], ["0", "0"], ["1", "1"], ["-1", "3"]]}


def test_max_resolutions_caps_the_mlp_boundary_part_too(tmp_path, capsys):
    """--max-resolutions used to bind only a layer graph's verifier: a plain MLP's boundary part was enumerated
    whatever the cap (bounded only by the report's size).  Hand count: z(1, -2) = 0 and z(0, 0) = 0 at two
    different points, so 2^2 = 4 resolutions; with a cap of 2 the claim is not verified (exit 3), with 4 it is."""
    assert [2 * int(x[0]) + int(x[1]) for x in TWO_TIES["sample"]] == [0, 0, 3, 1]
    _case, rep = _genuine(TWO_TIES)
    assert len(rep["certificate"]["boundary"]["resolutions"]) == 4
    cp, rp = tmp_path / "c.json", tmp_path / "r.json"
    cp.write_text(json.dumps(TWO_TIES))
    rp.write_text(json.dumps(rep))
    from exactident.io.limits import WorkLimits
    assert run_verify_certificate(str(cp), str(rp), work=WorkLimits(max_resolutions=2)) == 3
    out = capsys.readouterr().out
    assert "past the verifier's limit of 2 (--max-resolutions): not verified" in out
    assert out.rstrip().endswith("certificate NOT VERIFIED (past a --max-* limit of the verifier)")
    assert run_verify_certificate(str(cp), str(rp), work=WorkLimits(max_resolutions=4)) == 0
    capsys.readouterr()


# widths 5-4-2, first-layer biases very negative: few active units, so the engine certifies only an interval
def _interval_case() -> dict:
    rng = random.Random(2)
    widths = [5, 4, 2]
    W = [[[f"{rng.randint(-8, 8)}/4" for _ in range(widths[l - 1])] for _ in range(widths[l])] for l in (1, 2)]
    b = [[f"{rng.randint(-40, -20) if l == 1 else rng.randint(-4, 4)}/4" for _ in range(widths[l])] for l in (1, 2)]
    X = [[f"{rng.randint(0, 8)}/2" for _ in range(5)] for _ in range(10)]
    return {"format": "exactident-case/1", "name": "iv", "widths": widths, "weights": W, "biases": b, "sample": X}


def _mlp_rank(obj: dict) -> int:
    """rank of the Jacobian of f(x^i) over every weight and bias (forward mode, Fractions; no tie on this
    sample), eliminated by sympy: the rank of Gamma (the fixed edges' columns are combinations of the others)."""
    from sympy import Matrix, Rational

    widths = obj["widths"]
    W = [[[Fraction(v) for v in row] for row in M] for M in obj["weights"]]
    b = [[Fraction(v) for v in bb] for bb in obj["biases"]]
    params = [("W", l, r, c) for l in range(len(widths) - 1) for r in range(widths[l + 1]) for c in range(widths[l])]
    params += [("b", l, r, None) for l in range(len(widths) - 1) for r in range(widths[l + 1])]
    rows = []
    for x in obj["sample"]:
        cols = []
        for p in params:
            h, dh = [Fraction(v) for v in x], [Fraction(0)] * len(x)
            for l in range(len(widths) - 1):
                z = [sum((W[l][r][c] * h[c] for c in range(widths[l])), b[l][r]) for r in range(widths[l + 1])]
                dz = [sum((W[l][r][c] * dh[c] for c in range(widths[l])), Fraction(0)) for r in range(widths[l + 1])]
                if p[1] == l:
                    dz[p[2]] += h[p[3]] if p[0] == "W" else Fraction(1)
                if l == len(widths) - 2:
                    cols.append(dz)
                else:
                    assert all(v != 0 for v in z)  # no tie: the pattern is the sign of z
                    h = [max(v, Fraction(0)) for v in z]
                    dh = [d if v > 0 else Fraction(0) for v, d in zip(z, dz)]
        rows += [[Rational(col[k].numerator, col[k].denominator) for col in cols] for k in range(widths[-1])]
    return Matrix(rows).rank()


def test_monte_carlo_value_above_the_rank_is_refused(tmp_path):
    """The Monte Carlo value is a rank mod primes, never above R_Gamma.  On this case R_Gamma = 8 (sympy,
    above) and the certified interval is [8, 9]; a report whose montecarlo value is 9 (error 0: 'the rank is 9')
    -- or the older form with rank_gamma 9 beside it -- used to be VALID since the value was only checked to lie
    in the interval.  Now a value above the certified lower end needs the verifier's own ranks mod p to reach
    it, which they cannot (every rank mod p is <= 8)."""
    obj = _interval_case()
    case, rep = _genuine(obj, verdict_first=True)  # the interval form (the default gives the exact rank here)
    assert rep["rank_gamma"] is None and rep["rank_gamma_interval"] == [8, 9] and _mlp_rank(obj) == 8
    forged = dict(rep, montecarlo={"rank_gamma": 9, "error_probability": 0.0})
    for bad in (forged, dict(forged, rank_gamma=9)):
        valid, msgs = verify_certificate(case, bad, require_claims=True)
        assert not valid and any(m.startswith("montecarlo: its rank_gamma 9 is above the certified lower end 8")
                                 for m in msgs), msgs
    # the verifier's own ranks mod p reach the rank (8) and never 9
    from exactident.verify.facts import CaseFacts
    from exactident.verify.rank import check_rank_certificate

    problems, ranks = check_rank_certificate(case, rep["certificate"]["rank"], CaseFacts.from_case(case).pattern({}),
                                             "certificate.rank")
    assert not problems and ranks.rank_gamma_interval == (8, 9)
    assert ranks.reaches(8) and not ranks.reaches(9)
    # the true value (the lower end) stays accepted, in both forms
    honest = dict(rep, montecarlo={"rank_gamma": 8, "error_probability": 0.01})
    assert verify_certificate(case, honest, require_claims=True)[0]
    assert verify_certificate(case, dict(honest, rank_gamma=8), require_claims=True)[0]


def test_monte_carlo_value_above_the_lower_end_on_a_layer_graph():
    """The same rule for a layer graph (one rule): the PReLU net's smallest rank over its resolutions is 3
    (tests/test_verify_forgeries.py derives it by hand), the interval [3, 4]; a Monte Carlo value of 4 is
    refused.  And the shared rule accepts a value above the lower end when the verifier's own ranks reach it."""
    from exactident.verify.rank_rules import RankBounds, rank_claim_problems

    case, rep = _genuine(PRELU)
    assert rep["rank_gamma_interval"] == [3, 4]
    bad = dict(rep, montecarlo={"rank_gamma": 4, "error_probability": 0.0})
    valid, msgs = verify_certificate(case, bad, require_claims=True)
    assert not valid and any("above the certified lower end 3" in m for m in msgs), msgs
    claim = {"rank_gamma": None, "rank_gamma_interval": [3, 4], "montecarlo": {"rank_gamma": 4,
                                                                               "error_probability": 0.0}}
    assert rank_claim_problems(claim, RankBounds(3, 4), 5, reaches=lambda v: v <= 4) == []
    assert rank_claim_problems(claim, RankBounds(3, 4), 5, reaches=lambda v: v <= 3)
