"""``explain`` on layer graphs: the symmetries ``S_H`` named by kind, and every certified line marking the
parameters it moves as not identifiable (and the verifier re-checking those marks).

Truth: hand derivations written here (each test's docstring), with an independent Jacobian in
``fractions.Fraction`` where a count is claimed (the networks are written out as plain Python, no project
code); the project only supplies the report and the explanation under test.
"""

from __future__ import annotations

import copy
import json
import random
import re
from fractions import Fraction as F

import flint

from exactident.explain.core import ConstrainedExplanation, explain
from exactident.io.case import parse_case
from exactident.verify.certificate import verify_certificate


def _rank(rows) -> int:
    return flint.fmpq_mat([[flint.fmpq(v.numerator, v.denominator) for v in r] for r in rows]).rank()


def _kinds(ex: ConstrainedExplanation) -> tuple[dict[str, int], int]:
    """The kinds counted in the explanation's first line, and the ``dim S_H`` it states."""
    line = ex.lines[0]
    said = line.split("(S_H): ", 1)[1].split(" (dim S_H", 1)[0]
    counts = {kind: int(n) for n, kind in re.findall(r"(\d+) (rescaling|bias-translation|linear-map)s?\b", said)}
    return counts, int(re.search(r"dim S_H = (\d+)", line)[1])


def _valid(case, report) -> tuple[bool, list[str]]:
    return verify_certificate(case, json.loads(json.dumps(report)), require_claims=True)


def _explained(obj):
    case = parse_case(obj)
    report, ex = explain(case)
    assert isinstance(ex, ConstrainedExplanation)
    d = report.to_dict()
    d.update(json.loads(json.dumps(ex.fields())))
    return case, report, ex, d


# ---------------------------------------------------------------- S_H named by its kinds

def test_residual_net_symmetries_are_named_by_kind():
    """``head(fc2 relu(fc1 x) + x)``, one input, all widths 1: ``f = H w2 relu(w1 x + b1) + H x + (H b2 + c)``
    (``H`` = head.weight, ``c`` = head.bias).  By hand, ``S_H``: the ReLU unit's rescaling (``w1, b1`` by ``e^s``,
    ``w2`` by ``e^-s``); the add's unit is linear, and translating its value (``b2 += t, c -= H t``) keeps ``f``
    (one bias translation); it has no rescaling or linear map of its own, as the skip's weight into it is the
    fixed 1; the carrier of ``x`` has fixed weight and bias.  So 1 rescaling + 1 bias translation, ``dim S_H = 2``,
    ``dim_free = 6 - 2 = 4``: the function has 4 numbers (``H w2 w1``, the kink ``-b1/w1``, ``H``, ``H b2 + c``),
    confirmed below by the rank of an independent Jacobian on samples on both sides of the kink."""
    w1, b1, w2, b2, H, c = F(2), F(-1), F(3), F(1, 2), F(5), F(-1)
    xs = [F(-2), F(-1), F(1), F(2), F(3)]
    obj = {"format": "exactident-case/2", "name": "res-1", "input_shape": [1],
           "layers": [{"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [[str(w1)]], "bias": [str(b1)]},
                      {"name": "relu1", "op": "relu", "inputs": ["fc1"]},
                      {"name": "fc2", "op": "linear", "inputs": ["relu1"], "weight": [[str(w2)]], "bias": [str(b2)]},
                      {"name": "res", "op": "add", "inputs": ["fc2", "input"]},
                      {"name": "head", "op": "linear", "inputs": ["res"], "weight": [[str(H)]], "bias": [str(c)]}],
           "output": "head", "sample": [[str(x)] for x in xs]}
    case, report, ex, d = _explained(obj)
    counts, dim_sh = _kinds(ex)
    assert counts == {"rescaling": 1, "bias-translation": 1} and dim_sh == 2
    assert "through linear units" in ex.lines[0] and "rescaling(s)" not in ex.lines[0]
    # the independent Jacobian in (w1, b1, w2, b2, H, c): rank 4 = 6 - dim S_H
    rows = []
    for x in xs:
        on = w1 * x + b1 > 0
        z = (w1 * x + b1) if on else F(0)
        rows.append([H * w2 * x * on, H * w2 * on, H * z, H, w2 * z + x + b2, F(1)])
    assert _rank(rows) == 4 == report.dim
    assert _valid(case, d)[0]


def test_linear_units_mixed_symmetries_are_named_by_kind():
    """A 1-2-1 leaky ReLU net with slope exactly 1: both hidden units are linear, ``f`` is an affine map
    ``R -> R`` (2 numbers) of 7 parameters, so the symmetries keeping ``f`` span ``7 - 2 = 5`` directions.  By
    hand: one rescaling per unit (2, independent: each moves its own weights), one translation per linear unit
    (``b1[v] += t``, ``b2 -= W2[0,v] t``: 2 more, independent of the rescalings as they move ``b2``), and the
    linear maps mixing the two units add the one direction left (the engine keeps rescalings, then
    translations, then maps).  The independent Jacobian confirms ``rank = 2``."""
    W1, b1, W2, b2 = [F(2), F(-3)], [F(1), F(1, 2)], [F(1), F(4)], F(-1)
    obj = {"format": "exactident-case/2", "name": "leaky1-121", "input_shape": [1],
           "layers": [{"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [[str(w)] for w in W1],
                       "bias": [str(b) for b in b1]},
                      {"name": "act", "op": "leaky_relu", "inputs": ["fc1"], "negative_slope": "1"},
                      {"name": "fc2", "op": "linear", "inputs": ["act"], "weight": [[str(w) for w in W2]],
                       "bias": [str(b2)]}],
           "output": "fc2", "sample": [["-1"], ["1"], ["2"]]}
    case, report, ex, d = _explained(obj)
    counts, dim_sh = _kinds(ex)
    assert counts == {"rescaling": 2, "bias-translation": 2, "linear-map": 1} and dim_sh == 5
    # f(x) = sum_v W2[v] (W1[v] x + b1[v]) + b2; columns (W1[0], W1[1], b1[0], b1[1], W2[0], W2[1], b2)
    rows = [[W2[0] * x, W2[1] * x, W2[0], W2[1], W1[0] * x + b1[0], W1[1] * x + b1[1], F(1)]
            for x in (F(-1), F(1), F(2))]
    assert _rank(rows) == 2 == 7 - dim_sh == report.dim
    assert report.verdict == "identifiable" and _valid(case, d)[0]


# ---------------------------------------------------------------- a certified line marks what it moves

LEAKY = {"format": "exactident-case/2", "name": "leaky-1-1-1", "input_shape": [1],
         "layers": [{"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [["1"]], "bias": ["0"]},
                    {"name": "act", "op": "leaky_relu", "inputs": ["fc1"], "negative_slope": "1/10"},
                    {"name": "fc2", "op": "linear", "inputs": ["act"], "weight": [["2"]], "bias": ["0"]}],
         "output": "fc2", "sample": [["1"], ["2"], ["3"]]}


def test_a_line_certificate_marks_the_parameters_it_moves():
    """``f = v leaky(w x + b) + d`` at ``(w, b, v, d) = (1, 0, 2, 0)``, seen at ``x = 1, 2, 3`` (unit active).
    Along ``theta + t delta`` the outputs on X are ``2x + t (dv x + 2 dw x + 2 db + dd) + t^2 (dv dw x + dv db)``;
    constant for the three x iff ``2 dw + dv = 0``, ``2 db + dd = 0``, ``dv dw = dv db = 0``, so ``dv = 0``
    (else ``dw = db = 0`` and ``dv = -2 dw = 0``), ``dw = 0``: every certified line is ``delta = s (0, 1, 0, -2)``.
    ``S_H`` is the unit's rescaling ``(1, 0, -2, 0)``, moving ``v`` and ``w``; the gauge is the output weight
    ``v`` (the plain engine's fixed edge), which ``delta`` leaves, so the line is already in the chart: it moves
    exactly ``b`` and ``d``, which are not identifiable (``by: line``); ``w`` is first-order determined
    (``ker Gamma_free`` in the chart is ``delta`` alone)."""
    case, report, ex, d = _explained(LEAKY)
    assert (report.verdict, report.decided_by) == ("not-identifiable", "line")
    part = {j: F(v) for j, v in report.certificate["line"]["delta"]}
    s = part.get(1)
    assert s and part == {1: s, 3: -2 * s}  # the hand form of every certified line
    cls = {e["name"]: (e["class"], e.get("by"), e.get("witness")) for e in ex.parameters}
    assert cls == {"fc1.weight[0,0]": ("first-order-determined", None, None),
                   "fc1.bias[0]": ("not-identifiable", "line", "certificate"),
                   "fc2.weight[0,0]": ("gauge", None, None),
                   "fc2.bias[0]": ("not-identifiable", "line", "certificate")}
    assert any("2 not identifiable (certificate: line)" in line for line in ex.lines)
    valid, msgs = _valid(case, d)
    assert valid, msgs
    forged = copy.deepcopy(d)  # the weight is not moved by the line: marking it is refused
    forged["parameters"][0] = {"name": "fc1.weight[0,0]", "index": 0, "class": "not-identifiable", "by": "line",
                               "witness": "certificate"}
    assert not _valid(case, forged)[0]


def _prelu_case():
    """``fc2(prelu(fc1 x))``, 2 -> 3 -> 1; unit 0 has bias 50 and ``|x_i| <= 9``, so ``z_0 = x_1 + 2 x_2 + 50 > 0``
    at every sample."""
    rng = random.Random(3)
    X = [[str(F(rng.randint(-9, 9), rng.randint(1, 3))) for _ in range(2)] for _ in range(30)]
    return {"format": "exactident-case/2", "name": "prelu-231", "input_shape": [2],
            "layers": [{"name": "fc1", "op": "linear", "inputs": ["input"],
                        "weight": [["1", "2"], ["3", "-1"], ["-2", "1"]], "bias": ["50", "1", "1/2"]},
                       {"name": "act", "op": "prelu", "inputs": ["fc1"], "weight": ["1/4", "1/8", "3/8"]},
                       {"name": "fc2", "op": "linear", "inputs": ["act"], "weight": [["2", "-1", "3"]], "bias": ["1"]}],
            "output": "fc2", "sample": X}


def test_a_slope_line_marks_its_slope_and_the_verifier_checks_it():
    """Unit 0 is ``> 0`` at every sample, so its output is ``z_0`` whatever its PReLU slope ``a_0``
    (``h = z + a min(z, 0)``): along ``a_0 += t`` the outputs on X stay.  Rescalings never move a slope and the
    net has no linear unit, so ``S_H`` has no slope coordinate: the line is in the chart and moves ``a_0``
    (act.weight[0]) only; ``a_0`` is not identifiable (``by: slope-lines``) and no other parameter gets that mark."""
    case, report, ex, d = _explained(_prelu_case())
    assert (report.verdict, report.decided_by) == ("not-identifiable", "slope-lines")
    marked = {e["name"]: e.get("by") for e in ex.parameters if e["class"] == "not-identifiable"}
    assert marked == {"act.weight[0]": "slope-lines"}
    valid, msgs = _valid(case, d)
    assert valid, msgs
    names = [e["name"] for e in d["parameters"]]
    for other in ("act.weight[1]", "fc2.bias[0]", "fc1.bias[0]"):  # forged marks: the line does not move them
        forged = copy.deepcopy(d)
        j = names.index(other)
        if forged["parameters"][j]["class"] == "gauge":
            continue
        forged["parameters"][j] = {"name": other, "index": j, "class": "not-identifiable", "by": "slope-lines",
                                   "witness": "certificate"}
        assert not _valid(case, forged)[0], other
    forged = copy.deepcopy(d)  # the true mark with another certificate's kind, which the report does not have
    forged["parameters"][names.index("act.weight[0]")]["by"] = "dead-units"
    assert not _valid(case, forged)[0]
