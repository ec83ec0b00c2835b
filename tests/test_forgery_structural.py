"""Targeted forgeries of structural certificates (docs/theory.md, "Structural certificates").

``test_forgery.py`` mutates every leaf of a report by a generic rule (+-1, flip, delete, ...).
Here the mutations aim at what a structural certificate claims: the mechanism's name (with or
without ``decided_by`` following it), the neurons it names (every hidden neuron, pairs across
layers, out of range, wrong JSON types), ``t0``, ``ratio`` and ``input`` (other values, other
types, 5000-digit numbers), the line's ``delta`` (rescaled by positive and negative factors with
the witness rescaled to match, entries added, removed, zeroed, misspelled), the non-equivalence
witness (replaced, retyped, a first-layer ray of every neuron), and parts swapped between the
reports of different cases and mechanisms.

Genuine reports: one hand-built case per mechanism (``structural_cases``), mechanisms planted in
layer 2 of ``[2,2,2,2]`` and ``[2,3,2,1]`` networks (found by a seeded search; the mechanism is
re-derived below by the independent oracle, not taken from the report), and a proportional pair on
the boundary (``TWINS`` plus the sample ``1/3`` on the kink of ``z_1 = 3x - 1``).

A mutation must be *rejected* (invalid, or bad input: ``CaseFormatError``) unless every claim it
makes is still true, judged independently of exactident by ``structural_oracle``: the named facts
re-derived in Fractions, ``theta(t)`` stepped at exact ``t`` in ``(0, t0)`` with the same outputs on
``X`` and different path-product multisets, the witness's coefficients recomputed by hand, the
verdict ``not-identifiable`` and ``decided_by`` naming that mechanism or ``line``.  Any other
exception is a crash of the verifier (a failure here).
"""

from __future__ import annotations

import copy
import json
from fractions import Fraction as F

import pytest
import structural_cases as SC
from structural_oracle import confirm_line, fractions_of, mechanism_holds

from exactident.check import check
from exactident.cli import main
from exactident.errors import CaseFormatError, UnsupportedCaseError
from exactident.io.case import parse_case
from exactident.io.report import reports_to_json
from exactident.verify.certificate import verify_certificate
from exactident.verify.claims import RULES

MECHANISMS = ["dead-neuron", "untouched-input", "proportional-neurons", "always-active-block", "unpinned-hyperplane"]


def _case(name, widths, W, b, X):
    return {"format": "exactident-case/1", "name": name, "widths": widths, "weights": W, "biases": b, "sample": X}


# Mechanisms in layer 2 (seeded search over planted networks; each re-derived by the oracle below).
L2_DEAD = _case("l2-dead", [2, 2, 2, 2], [[["2", "-1/2"], ["3", "2"]], [["-3", "1/2"], ["1/2", "3/2"]],
                                           [["1", "2"], ["-2", "1/2"]]], [["1", "1"], ["-8", "-2"], ["-2", "-3"]],
                [["0", "-1"], ["-4/3", "-1/3"], ["-6", "6"], ["2", "-5"], ["4/3", "-2"], ["-4", "4"], ["5/3", "-1/3"],
                 ["-4/3", "-3"], ["-1", "-6"]])
L2_UNPINNED = _case("l2-unpinned", [2, 2, 2, 2], [[["1", "-3"], ["1", "-2"]], [["3/2", "1/2"], ["-3", "1"]],
                                                  [["-3", "1"], ["-1", "1"]]],
                    [["-2", "1/2"], ["-8", "3"], ["1/2", "3/2"]],
                    [["3", "-2"], ["0", "1"], ["2", "1/3"], ["1", "-1"], ["5", "-4"], ["-5/3", "4/3"], ["2", "4"],
                     ["-2", "5"], ["-5", "6"]])
L2_TWINS = _case("l2-twins", [2, 2, 2, 2], [[["-3", "1/2"], ["-1", "-3"]], [["3", "-2"], ["2", "-4/3"]],
                                            [["-2", "-1/2"], ["3", "1"]]],
                 [["-1", "-1/2"], ["-1/2", "-1/3"], ["2", "1"]],
                 [["5", "0"], ["-5", "-6"], ["-3", "-2"], ["1/3", "-2"], ["1/3", "1"], ["-1/3", "1"], ["-3", "4"],
                  ["-5/3", "0"], ["-4/3", "-5/3"]])
L2_BLOCK = _case("l2-block", [2, 3, 2, 1], [[["3", "1"], ["-2", "-3/2"], ["-1", "-2"]],
                                            [["-2", "3/2", "2"], ["-1/2", "-2", "-2"]], [["1", "1"]]],
                 [["3/2", "1", "1/2"], ["199/2", "99"], ["2"]],
                 [["1", "4/3"], ["1", "2"], ["-2", "2"], ["3", "4/3"], ["0", "1/3"], ["-4", "1"], ["5", "3"],
                  ["1", "-2"], ["-1", "5"], ["-2/3", "-2"], ["4/3", "-2"], ["3", "-6"]])
UNTOUCHED_DEEP = _case("untouched-deep", [2, 2, 2, 2], [[["1", "2"], ["3", "1"]], [["1/2", "2"], ["1", "-3"]],
                                                        [["-3", "1"], ["-1", "-3/2"]]],
                       [["-2", "3"], ["3/2", "1"], ["2", "2"]],
                       [["0", "-1"], ["0", "-2"], ["0", "-6"], ["0", "0"], ["0", "2"], ["0", "3"], ["0", "-2/3"],
                        ["0", "-1"], ["0", "6"]])
TWINS_ON_KINK = copy.deepcopy(SC.TWINS) | {"name": "twins-on-kink"}
TWINS_ON_KINK["sample"] = SC.TWINS["sample"] + [["1/3"]]

#: case -> (mechanism, layer of its neurons)
EXPECTED = {"dead-neuron-inconclusive": ("dead-neuron", 1), "one-active-sample": ("unpinned-hyperplane", 1),
            "untouched-input": ("untouched-input", 1), "proportional-neurons": ("proportional-neurons", 1),
            "always-active-block": ("always-active-block", 1), "l2-dead": ("dead-neuron", 2),
            "l2-unpinned": ("unpinned-hyperplane", 2), "l2-twins": ("proportional-neurons", 2),
            "l2-block": ("always-active-block", 2), "untouched-deep": ("untouched-input", 1),
            "twins-on-kink": ("proportional-neurons", 1)}
CASES = {c["name"]: c for c in SC.HAND + [L2_DEAD, L2_UNPINNED, L2_TWINS, L2_BLOCK, UNTOUCHED_DEEP, TWINS_ON_KINK]}


@pytest.fixture(scope="module")
def reports():
    return {name: json.loads(reports_to_json([check(parse_case(obj), numeric=False)], as_list=False))
            for name, obj in CASES.items()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_genuine_structural_reports(reports, name):
    obj, rep = CASES[name], reports[name]
    mechanism, layer = EXPECTED[name]
    cert = rep["certificate"]
    assert (rep["verdict"], rep["decided_by"], cert["structural"]["mechanism"]) == \
        ("not-identifiable", mechanism, mechanism)
    assert all(lv[0] == layer for lv in cert["structural"]["neurons"])
    assert rep["on_boundary"] == (name == "twins-on-kink")
    # the oracle re-derives the mechanism and steps theta(t) in Fractions (nothing from exactident)
    assert mechanism_holds(obj, cert["structural"], cert["line"]["delta"])
    confirm_line(obj, rep)
    assert verify_certificate(parse_case(obj), rep, require_claims=True)[0]


# ---------------------------------------------------------------------------------------------
# Mutations

BIG = "7" * 5000
ODD = [None, 0, 1, -1, True, 1.5, "x", "", [], {}, [[]], [1], BIG, "1/0", "-0", "+1", 10 ** 40]


def _scale(x, fac):
    line = x["certificate"]["line"]
    line["delta"] = {k: _fmt(F(v) * fac) for k, v in line["delta"].items()}
    witness = line.get("nonequivalence") or {}
    if "coefficients" in witness:  # c_k eps^k along delta -> c_k fac^k along fac delta
        witness["coefficients"] = [_fmt(F(c) * fac ** k) for k, c in enumerate(witness["coefficients"])]


def _fmt(q):
    q = F(q)
    return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"


def mutations(rep, others):
    """``(label, mutated report)``: the families of the module docstring."""
    out = []

    def m(label, fn):
        x = copy.deepcopy(rep)
        fn(x)
        out.append((label, x))

    def st(x):
        return x["certificate"]["structural"]

    def ln(x):
        return x["certificate"]["line"]

    widths = rep["widths"]
    L = len(widths) - 1
    for rule in RULES:
        m(f"decided_by={rule}", lambda x, rule=rule: x.__setitem__("decided_by", rule))
    for verdict in ("identifiable", "inconclusive", "degenerate"):
        m(f"verdict={verdict}", lambda x, verdict=verdict: x.__setitem__("verdict", verdict))
    for mech in MECHANISMS + ["line", "Dead-Neuron"]:
        m(f"mechanism={mech}", lambda x, mech=mech: st(x).__setitem__("mechanism", mech))
        m(f"mechanism+decided_by={mech}",
          lambda x, mech=mech: (st(x).__setitem__("mechanism", mech), x.__setitem__("decided_by", mech)))
    for key in list(rep["certificate"]["structural"]) + ["input", "ratio", "zzz"]:
        m(f"del structural.{key}", lambda x, key=key: st(x).pop(key, None))
        for val in ODD:
            m(f"structural.{key}={val!r:.12}", lambda x, key=key, val=val: st(x).__setitem__(key, val))
    hidden = [[l, v] for l in range(1, L) for v in range(widths[l])]
    for n in hidden + [[0, 0], [L, 0], [1, widths[1]], [-1, 0], [1, -1]]:
        m(f"neurons=[{n}]", lambda x, n=n: st(x).__setitem__("neurons", [n]))
        for n2 in hidden:
            m(f"neurons=[{n},{n2}]", lambda x, n=n, n2=n2: st(x).__setitem__("neurons", [n, n2]))
    for bad in ([[True, 0]], [[1.0, 0]], [["1", "0"]], [[1, 0, 0]], [1, 0], [[1]], [[1, 10 ** 40]], [None]):
        m(f"neurons={bad!r:.20}", lambda x, bad=bad: st(x).__setitem__("neurons", bad))
    for t0 in (None, "0", "1", "-1", "1/4", "1/3", "8/9", "1/" + BIG):
        m(f"t0={t0!r:.12}", lambda x, t0=t0: st(x).__setitem__("t0", t0))
    for j in range(-1, widths[0] + 1):
        m(f"input={j}", lambda x, j=j: st(x).__setitem__("input", j))
    for q in ("1", "2", "1/2", "2/3", "3/2", "-2", "0"):
        m(f"ratio={q}", lambda x, q=q: st(x).__setitem__("ratio", q))
    for fac in (F(2), F(1, 3), F(-1), F(-2), F(10 ** 50)):
        m(f"delta*{fac}", lambda x, fac=fac: _scale(x, fac))
    names = [f"W_{l}[{i},{j}]" for l in range(1, L + 1) for i in range(widths[l]) for j in range(widths[l - 1])]
    names += [f"b_{l}[{i}]" for l in range(1, L + 1) for i in range(widths[l])]
    for name in names:
        for val in ("1", "-1", "0"):
            m(f"delta[{name}]={val}", lambda x, name=name, val=val: ln(x)["delta"].__setitem__(name, val))
    for key in list(rep["certificate"]["line"]["delta"]):
        m(f"del delta[{key}]", lambda x, key=key: ln(x)["delta"].pop(key))
    for name in ("W_1[0,0 ]", "W_0[0,0]", f"b_{L + 1}[0]", "b_1[99]", "W_01[0,0]"):
        for val in ("1", 1, 1.0, None, BIG):
            m(f"delta[{name}]={val!r:.8}", lambda x, name=name, val=val: ln(x)["delta"].__setitem__(name, val))
    for val in ODD:
        m(f"structural={val!r:.12}", lambda x, val=val: x["certificate"].__setitem__("structural", val))
        m(f"line={val!r:.12}", lambda x, val=val: x["certificate"].__setitem__("line", val))
        m(f"delta={val!r:.12}", lambda x, val=val: ln(x).__setitem__("delta", val))
        m(f"nonequivalence={val!r:.12}", lambda x, val=val: ln(x).__setitem__("nonequivalence", val))
        for key in ("start", "neurons", "output"):
            m(f"path.{key}={val!r:.12}",
              lambda x, key=key, val=val: ln(x)["nonequivalence"]["path"].__setitem__(key, val))
        m(f"coefficients={val!r:.12}", lambda x, val=val: ln(x)["nonequivalence"].__setitem__("coefficients", val))
    for v in range(widths[1]):
        m(f"nonequivalence=ray({v})", lambda x, v=v: ln(x).__setitem__(
            "nonequivalence", {"invariant": "first-layer-rays", "neuron": v}))
    m("del line", lambda x: x["certificate"].pop("line"))
    m("del structural", lambda x: x["certificate"].pop("structural"))
    m("del nonequivalence", lambda x: ln(x).pop("nonequivalence"))
    m("probe at 0", lambda x: ln(x).__setitem__("probe", ["0"] * widths[0]))
    for name, other in others.items():
        oc = other["certificate"]
        m(f"structural<-{name}", lambda x, oc=oc: x["certificate"].__setitem__("structural",
                                                                             copy.deepcopy(oc["structural"])))
        m(f"structural+decided_by<-{name}", lambda x, oc=oc: (
            x["certificate"].__setitem__("structural", copy.deepcopy(oc["structural"])),
            x.__setitem__("decided_by", oc["structural"]["mechanism"])))
        m(f"line<-{name}", lambda x, oc=oc: x["certificate"].__setitem__("line", copy.deepcopy(oc["line"])))
        m(f"certificate<-{name}", lambda x, oc=oc: x.__setitem__("certificate", copy.deepcopy(oc)))
    return out


def still_true(obj, mutated):
    """Every claim of the accepted ``mutated`` report holds, by the independent oracle (or False)."""
    try:
        cert = mutated["certificate"]
        part, line = cert["structural"], cert["line"]
        if mutated.get("verdict") != "not-identifiable" or mutated.get("decided_by") not in (part["mechanism"], "line"):
            return False
        if not mechanism_holds(obj, part, line["delta"]):
            return False
        confirm_line(obj, mutated)
        witness = line.get("nonequivalence")
        if witness is not None:
            widths, W, b, _X = fractions_of(obj)
            delta = {k: F(v) for k, v in line["delta"].items()}
            if witness["invariant"] == "first-layer-rays":  # a nonzero row of W_1 | b_1 moved off its line
                v = witness["neuron"]
                w = [*W[0][v], b[0][v]]
                d = [delta.get(f"W_1[{v},{j}]", F(0)) for j in range(widths[0])] + [delta.get(f"b_1[{v}]", F(0))]
                return any(w) and any(w[j] * d[k] != w[k] * d[j] for j in range(len(w)) for k in range(len(w)))
            if witness["invariant"] != "path-products":
                return False
            delta = {k: F(v) for k, v in line["delta"].items()}
            path = witness["path"]
            L = len(widths) - 1
            start, seq = path["start"], [*path["neurons"], path["output"]]
            factors = [(b[start - 1][seq[0]], delta.get(f"b_{start}[{seq[0]}]", F(0)))] if start >= 1 else []
            for k in range(start + 1, L + 1):
                r, c = seq[k - start], seq[k - start - 1]
                factors.append((W[k - 1][r][c], delta.get(f"W_{k}[{r},{c}]", F(0))))
            poly = [F(1)]
            for a, d in factors:
                poly = [(poly[k] if k < len(poly) else 0) * a + (poly[k - 1] * d if k >= 1 else 0)
                        for k in range(len(poly) + 1)]
            while len(poly) > 1 and poly[-1] == 0:
                poly.pop()
            if len(poly) < 2 or [F(c) for c in witness["coefficients"]] != poly:
                return False
        return witness is not None or "probe" in line
    except (AssertionError, KeyError, TypeError, ValueError, IndexError, ZeroDivisionError):
        return False


@pytest.mark.parametrize("name", sorted(CASES))
def test_targeted_structural_mutations(reports, name, capsys):
    obj, rep = CASES[name], reports[name]
    case = parse_case(obj)
    others = {k: r for k, r in reports.items() if k != name}
    tried, rejected, accepted, crashes, forged = 0, 0, 0, [], []
    for label, mutated in mutations(rep, others):
        tried += 1
        try:
            valid, _msgs = verify_certificate(case, mutated, "r.json", require_claims=True)
        except (CaseFormatError, UnsupportedCaseError):
            valid = False
        except Exception as exc:  # any other exception is a crash of the verifier
            crashes.append((label, repr(exc)[:200]))
            continue
        if not valid:
            rejected += 1
        elif still_true(obj, mutated):
            accepted += 1
        else:
            forged.append(label)
    assert not crashes, crashes
    assert not forged, f"accepted, with claims the oracle does not confirm: {forged}"
    assert tried > 300 and rejected > tried * 0.8
    with capsys.disabled():
        print(f"\n{name}: {tried} structural mutations, {rejected} rejected, {accepted} accepted as still true")


def test_swapping_the_mechanism_name_is_rejected_unless_still_true(reports):
    # The mechanisms differ in delta's shape or in the facts they name, so no genuine line fits another
    # name, with one exception from the theory: a dead neuron is an unpinned hyperplane with no row
    # (T empty), and lowering its bias is a move of its incoming row with nothing to keep (t0 none).
    for name, rep in reports.items():
        case = parse_case(CASES[name])
        for mech in MECHANISMS:
            if mech == rep["decided_by"]:
                continue
            if (rep["decided_by"], mech) == ("dead-neuron", "unpinned-hyperplane"):
                x = copy.deepcopy(rep)
                x["certificate"]["structural"]["mechanism"] = x["decided_by"] = mech
                assert verify_certificate(case, x, require_claims=True)[0] and still_true(CASES[name], x)
                continue
            x = copy.deepcopy(rep)
            x["certificate"]["structural"]["mechanism"] = x["decided_by"] = mech
            try:
                valid = verify_certificate(case, x, require_claims=True)[0]
            except CaseFormatError:
                valid = False
            assert not valid, (name, mech)


@pytest.mark.parametrize("text, field", [
    ('"t0": NaN', "certificate.structural.t0"),
    ('"t0": 1e999', "certificate.structural.t0"),
    ('"t0": null, "t0": "1"', "duplicate key 't0'"),
    ('"t0": ' + "[" * 50000 + "]" * 50000, "nested too deeply"),
    ('"t0": "1/3", "zzz": ' + "9" * 5000, "more than 4000 digits"),
])
def test_malformed_structural_json_is_bad_input(tmp_path, capsys, text, field):
    rep = json.loads(reports_to_json([check(parse_case(SC.DEAD), numeric=False)], as_list=False))
    raw = json.dumps(rep)
    structural_t0 = '"neurons": [[1, 0]], "t0": null'  # the structural part's (the line part has its own t0)
    assert raw.count(structural_t0) == 1
    (tmp_path / "c.json").write_text(json.dumps(SC.DEAD))
    (tmp_path / "r.json").write_text(raw.replace(structural_t0, '"neurons": [[1, 0]], ' + text))
    rc = main(["verify-certificate", str(tmp_path / "c.json"), str(tmp_path / "r.json")])
    out, err = capsys.readouterr()
    if text == '"t0": 1e999':  # valid JSON, a number where a rational string belongs: the schema refuses it
        assert rc == 3 and out.startswith(f"{field}: expected a rational string"), out
        return
    assert rc == 2
    err = err.strip()
    assert err.count("\n") == 0 and "r.json" in err and field in err, err
