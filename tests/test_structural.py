"""Structural certificates (docs/theory.md, "Structural certificates"): right answers, forgeries, look-alikes.

Right values come from hand derivations (tests/structural_cases.py), from an independent sympy
rank oracle (``boundary_oracle``: Theorems 8/9 leave the hand-built cases open) and from
``structural_oracle`` (Fraction steps of theta(t) along the certificate's line: same outputs on
X, different path-product multisets; the mechanism's facts re-derived).
"""

from __future__ import annotations

import copy
import json
import random
import re
from fractions import Fraction as F

import boundary_oracle as O
import pytest
import structural_cases as SC
from structural_oracle import confirm_line, fractions_of, mechanism_holds, pre_activations

from exactident.check import check
from exactident.cli import main
from exactident.errors import CaseFormatError
from exactident.io.case import parse_case
from exactident.io.report import reports_to_json
from exactident.verify.certificate import verify_certificate


def _report(obj, **options):
    case = parse_case(obj)
    return case, json.loads(reports_to_json([check(case, numeric=False, **options)], as_list=False))


def _valid(case, report):
    valid, msgs = verify_certificate(case, report, require_claims=True)
    return valid, msgs


# --- each mechanism on a hand-built case ----------------------------------------------------------

@pytest.mark.parametrize("obj", SC.HAND, ids=[o["name"] for o in SC.HAND])
def test_hand_built_mechanism_settles_the_gap(obj):
    widths, W, b, X = fractions_of(obj)
    rg, ra, dim = O.resolution_ranks(widths, W, b, X, {})  # sympy, no tie in these cases
    assert O.ties(widths, W, b, X) == [] and rg < ra and rg < dim  # Theorems 8 and 9 are silent
    mechanism, neurons = SC.MECHANISM[obj["name"]]
    case, rep = _report(obj, all_ranks=True)
    assert (rep["verdict"], rep["decided_by"], rep["cs"], rep["cn"]) == ("not-identifiable", mechanism, False, True)
    assert (rep["rank_gamma"], rep["rank_a"], rep["dim"]) == (rg, ra, dim)
    part = rep["certificate"]["structural"]
    assert part["mechanism"] == mechanism and (neurons is None or part["neurons"] in neurons)
    assert mechanism_holds(obj, part, rep["certificate"]["line"]["delta"])
    confirm_line(obj, rep)  # theta(t) in Fractions: same outputs on X, path products change
    valid, msgs = _valid(case, rep)
    assert valid, msgs
    assert any(m.startswith(f"structural part valid: {mechanism}") for m in msgs)


def test_the_issues_dead_neuron_case(tmp_path, capsys):
    # widths [1,3,2]: z_1(x)_0 = x - 100 < 0 on 1, 2/3, 2, -4/3, 5/2.  Lowering b_1[0] keeps it dead for
    # every t > 0; the path b_1[0] -> W_2[0,0] = 3 has product 3 (-100 - t) = -300 - 3t: not constant.
    path = tmp_path / "dead.json"
    path.write_text(json.dumps(SC.DEAD))
    assert main(["check", "--json", "--no-numeric", "--all-ranks", str(path)]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert (rep["verdict"], rep["decided_by"]) == ("not-identifiable", "dead-neuron")
    assert (rep["rank_gamma"], rep["rank_a"], rep["dim"]) == (7, 8, 11)
    assert "hidden neuron (1,0) is strictly inactive on all 5 samples" in rep["reason"]
    assert rep["certificate"]["structural"] == {"mechanism": "dead-neuron", "neurons": [[1, 0]], "t0": None}
    assert rep["certificate"]["line"] == {"delta": {"b_1[0]": "-1"}, "t0": None, "nonequivalence": {
        "invariant": "path-products", "path": {"start": 1, "neurons": [0], "output": 0},
        "coefficients": ["-300", "-3"]}}
    (tmp_path / "r.json").write_text(json.dumps(rep))
    assert main(["verify-certificate", str(path), str(tmp_path / "r.json")]) == 0
    assert capsys.readouterr().out.endswith("certificate VALID\n")


def test_unpinned_t0_is_the_exact_first_sign_change():
    # z_0 = x - 9/4 active at 5/2 only; d = (dw, db) = (-2, 5) is orthogonal to [5/2, 1].  Elsewhere
    # z_0 + t (-2x + 5): at x = 2, -1/4 + t = 0 first (t = 1/4); 1: -5/4 + 3t (5/12); 2/3: 19/44; -4/3: 43/92.
    _case, rep = _report(SC.ONE_ACTIVE)
    assert rep["certificate"]["line"]["delta"] == {"W_1[0,0]": "-2", "b_1[0]": "5"}
    assert rep["certificate"]["structural"] == {"mechanism": "unpinned-hyperplane", "neurons": [[1, 0]], "t0": "1/4"}
    _widths, W, b, X = fractions_of(SC.ONE_ACTIVE)
    base = [pre_activations(W, b, x)[-1] for x in X]
    at_t0 = (W[0][0][0] - 2 * F(1, 4), b[0][0] + 5 * F(1, 4))  # at t = t0 the sample x = 2 reaches the kink ...
    W[0][0][0], b[0][0] = at_t0
    assert pre_activations(W, b, X[2])[0][0] == 0 and [pre_activations(W, b, x)[-1] for x in X] == base
    W[0][0][0], b[0][0] = at_t0[0] - 2 * F(1, 100), at_t0[1] + 5 * F(1, 100)  # ... and just past it f(X) moves
    assert [pre_activations(W, b, x)[-1] for x in X] != base


# --- look-alikes: the mechanism seems present but is not ----------------------------------------------

def _forged_dead(rep, witness_coefficients):
    bad = copy.deepcopy(rep)
    bad["verdict"], bad["decided_by"] = "not-identifiable", "dead-neuron"
    bad["certificate"]["line"] = {"delta": {"b_1[0]": "-1"}, "t0": None, "nonequivalence": {
        "invariant": "path-products", "path": {"start": 1, "neurons": [0], "output": 0},
        "coefficients": witness_coefficients}}
    bad["certificate"]["structural"] = {"mechanism": "dead-neuron", "neurons": [[1, 0]], "t0": None}
    return bad


def test_inactive_on_all_samples_but_one_is_not_dead():
    case, rep = _report(SC.ONE_ACTIVE)
    assert rep["decided_by"] == "unpinned-hyperplane"  # true, and not "dead-neuron"
    # Lowering b_1[0] by t moves z_0(5/2) = 1/4 - t: output 0 there moves by -3t.  Path: 3 (-9/4 - t).
    valid, msgs = _valid(case, _forged_dead(rep, ["-27/4", "-3"]))
    assert not valid
    assert "certificate.line: output 0 at sample 4 moves along theta + eps delta (coefficient of eps^1 is -3); " \
           "the certificate claims it is constant" in msgs
    assert "certificate.structural: neuron (1,0) is not strictly inactive on every sample (sample 4: z = 1/4)" in msgs


def test_a_neuron_on_a_kink_is_not_dead():
    # z_0 = x - 5/2 is 0 at x = 5/2: lowering b_1[0] does keep every output (the tie goes to the inactive
    # side, relu(-t) = 0 = relu(0)), so the *line* is right, but "strictly inactive on every sample" is not.
    case, rep = _report(SC.KINK)
    assert rep["on_boundary"] and rep["verdict"] == "not-identifiable" and rep["decided_by"] != "dead-neuron"
    assert "structural" not in rep["certificate"]
    forged = _forged_dead(rep, ["-15/2", "-3"])
    valid, msgs = _valid(case, forged)
    assert not valid
    assert "certificate.structural: neuron (1,0) is not strictly inactive on every sample (sample 4: z = 0)" in msgs
    assert any(m.startswith("line part valid") for m in msgs)  # the line alone is a true certificate ...
    del forged["certificate"]["structural"]
    forged["decided_by"] = "line"
    valid, msgs = _valid(case, forged)
    assert valid, msgs  # ... and verifies as one


def test_twins_whose_ratio_differs_on_one_sample_get_no_certificate():
    # z_2 / z_0 = 1 at x = -3 and 3/2 at -4: not proportional.  Every neuron's active samples pin its
    # hyperplane (z_0, z_2: two points; z_1: 3 and 2), none is dead or always active, the input is never 0.
    case, rep = _report(SC.TWINS_OFF)
    assert (rep["verdict"], rep["decided_by"]) == ("inconclusive", "none")
    assert "no structural certificate applies" in rep["reason"] and "line in ker Gamma" in rep["reason"]
    valid, msgs = _valid(case, rep)
    assert valid, msgs
    forged = copy.deepcopy(rep)
    forged["verdict"], forged["decided_by"] = "not-identifiable", "proportional-neurons"
    # h_0 = h_2 would need W_2[0,0] += t, W_2[0,2] -= t; at x = -4 output 0 moves by t (2 - 3) = -t.
    forged["certificate"]["line"] = {"delta": {"W_2[0,0]": "1", "W_2[0,2]": "-1"}, "t0": None, "probe": ["-4"]}
    forged["certificate"]["structural"] = {"mechanism": "proportional-neurons", "neurons": [[1, 0], [1, 2]],
                                           "ratio": "1", "t0": None}
    valid, msgs = _valid(case, forged)
    assert not valid
    assert any("output 0 at sample 5 moves" in m for m in msgs)
    assert any("h_0 = 1 h_2 does not hold on every sample" in m for m in msgs)


# --- tampered certificates of each kind ------------------------------------------------------------------

def _tamperings(rep):
    """(label, mutate) pairs that each make one claim of a structural certificate false."""
    part = rep["certificate"]["structural"]
    mech = part["mechanism"]
    out = []
    other = next(m for m in ("dead-neuron", "unpinned-hyperplane", "always-active-block") if m != mech)
    out.append(("decided_by", lambda r: r.__setitem__("decided_by", other)))
    out.append(("mechanism", lambda r: r["certificate"]["structural"].__setitem__("mechanism", other)))
    out.append(("neuron", lambda r: r["certificate"]["structural"]["neurons"][0].__setitem__(1, 1)))
    out.append(("t0", lambda r: r["certificate"]["structural"].__setitem__("t0", "1/1000")))
    first = sorted(rep["certificate"]["line"]["delta"])[0]
    out.append(("delta", lambda r: r["certificate"]["line"]["delta"].__setitem__(first, "7/3")))
    out.append(("no-structural", lambda r: r["certificate"].pop("structural")))
    out.append(("no-line", lambda r: r["certificate"].pop("line")))
    if mech == "proportional-neurons":
        out.append(("ratio", lambda r: r["certificate"]["structural"].__setitem__("ratio", "3")))
    if mech == "untouched-input":
        out.append(("input", lambda r: r["certificate"]["structural"].__setitem__("input", 0)))
    return out


@pytest.mark.parametrize("obj", SC.HAND, ids=[o["name"] for o in SC.HAND])
def test_tampered_structural_certificates_are_rejected(obj):
    case, rep = _report(obj)
    assert _valid(case, rep)[0]
    for label, mutate in _tamperings(rep):
        bad = copy.deepcopy(rep)
        mutate(bad)
        if bad == rep:
            continue  # e.g. the neuron index already 1
        try:
            valid = _valid(case, bad)[0]
        except CaseFormatError:
            valid = False
        assert not valid, (obj["name"], label)


@pytest.mark.parametrize("part, match", [
    ({"mechanism": "dead-neuron", "neurons": [[1, 0]]}, r"structural\.t0: missing"),
    ({"mechanism": "dead-neuron", "neurons": [1, 0], "t0": None}, r"structural\.neurons\[0\]: expected \[an int"),
    ({"mechanism": "dead-neuron", "neurons": [[1, 0]], "t0": "1/0"}, r"structural\.t0: zero denominator"),
    ({"mechanism": "dead-neuron", "neurons": [[1, 0]], "t0": 1}, r"structural\.t0: expected a rational string"),
    ([], r"structural: expected dict, found list"),
])
def test_malformed_structural_part_is_invalid(part, match):
    """A malformed part is refused by the report schema, naming its JSON path (invalid, exit 3)."""
    case, rep = _report(SC.DEAD)
    rep["certificate"]["structural"] = part
    valid, msgs = _valid(case, rep)
    assert not valid and any(re.match(r"^certificate\." + match, m) for m in msgs), msgs


def test_an_unknown_mechanism_is_not_valid():
    case, rep = _report(SC.DEAD)
    rep["certificate"]["structural"]["mechanism"] = "zombie-neuron"
    valid, msgs = _valid(case, rep)
    assert not valid and ("certificate.structural.mechanism: expected 'dead-neuron' or 'untouched-input' or "
                          "'proportional-neurons' or 'always-active-block' or 'unpinned-hyperplane', found "
                          "'zombie-neuron'") in msgs


def test_untouched_input_out_of_range_is_invalid():
    case, rep = _report(SC.UNTOUCHED)
    rep["certificate"]["structural"]["input"] = 5
    valid, msgs = _valid(case, rep)
    assert not valid and "certificate.structural.input: no input 5 (N_0 = 2)" in msgs


# --- a seeded random family with planted mechanisms ---------------------------------------------------

def _plant(rng, kind):
    """A generic network with one mechanism planted (weights in [-3, 3], samples in [-4, 4])."""
    widths = rng.choice([[3, 3, 2], [3, 4, 1], [3, 3, 3, 1]] if kind == "untouched" else
                        [[2, 3, 2], [2, 4, 1], [1, 3, 2, 1], [2, 3, 3, 1]])
    L = len(widths) - 1
    W = [[[F(rng.choice([-3, -2, -1, 1, 2, 3])) for _ in range(widths[l])] for _ in range(widths[l + 1])]
         for l in range(L)]
    b = [[F(rng.randint(-3, 3)) for _ in range(widths[l + 1])] for l in range(L)]
    X = [[F(rng.randint(-8, 8), rng.choice([1, 2])) for _ in range(widths[0])] for _ in range(rng.randint(14, 22))]
    l = rng.randint(1, L - 1)
    v = rng.randrange(widths[l])

    def z(l_, v_):
        return [pre_activations(W, b, x)[l_ - 1][v_] for x in X]

    if kind == "dead":
        b[l - 1][v] -= max(z(l, v)) + rng.randint(1, 3)
    elif kind == "always-active":
        for u in rng.sample(range(widths[l]), 2):
            b[l - 1][u] += -min(z(l, u)) + rng.randint(1, 3)
    elif kind == "unpinned":  # active on at most N_{l-1} samples: fewer points than a hyperplane needs
        zs = sorted(z(l, v), reverse=True)
        k = max((k for k in range(1, widths[l - 1] + 1) if zs[k - 1] != zs[k]), default=None)
        if k is not None:
            b[l - 1][v] -= (zs[k - 1] + zs[k]) / 2  # between the k-th and (k+1)-th largest: k samples active
    elif kind == "twins":
        u = (v + 1) % widths[l]
        c = F(rng.randint(1, 4), rng.randint(1, 3))
        W[l - 1][u] = [c * w for w in W[l - 1][v]]
        b[l - 1][u] = c * b[l - 1][v]
    elif kind == "untouched":
        for x in X:
            x[0] = F(0)
    return widths, W, b, X


@pytest.mark.parametrize("kind", ["dead", "always-active", "unpinned", "twins", "untouched"])
def test_planted_mechanisms_against_the_definition(kind):
    from _gen import case_obj, is_degenerate

    rng = random.Random(f"struct-{kind}")
    seen, settled = 0, 0
    for k in range(80):
        widths, W, b, X = _plant(rng, kind)
        if is_degenerate(W, b) or O.ties(widths, W, b, X):
            continue
        obj = case_obj(widths, W, b, X, name=f"{kind}-{k}")
        case, rep = _report(obj)
        seen += 1
        # a planted mechanism makes theta non-identifiable: C_S cannot hold
        assert rep["verdict"] == "not-identifiable", (obj, rep["reason"])
        valid, msgs = _valid(case, rep)
        assert valid, msgs
        if "structural" in rep["certificate"]:
            settled += 1
            assert rep["decided_by"] == rep["certificate"]["structural"]["mechanism"]
            assert mechanism_holds(obj, rep["certificate"]["structural"], rep["certificate"]["line"]["delta"])
            confirm_line(obj, rep)
        else:
            assert rep["decided_by"] in ("theorem-8", "line")
        if seen >= 12:
            break
    assert seen >= 10 and settled >= 2, (seen, settled)


# --- on the boundary --------------------------------------------------------------------------------------

@pytest.mark.parametrize("cap", [4096, 1])
def test_a_mechanism_settles_a_boundary_case_for_every_tie_resolution(cap):
    # TWINS plus the sample 1/3, exactly on the kink of z_1 = 3x - 1.  The twins z_0, z_2 are strictly
    # negative there (-7/3, -14/3), so h_2 = 2 h_0 still holds on every sample, and the line moves only
    # W_2: layer 1 (the tie included) does not move at all, whichever side the tie would take.  The
    # boundary rules find no entering direction and no line; past the cap (1) nothing is enumerated.
    obj = copy.deepcopy(SC.TWINS)
    obj["sample"].append(["1/3"])
    case, rep = _report(obj, max_resolutions=cap)
    assert (rep["on_boundary"], rep["n_ties"], rep["verdict"], rep["decided_by"]) == \
        (True, 1, "not-identifiable", "proportional-neurons")
    assert {"boundary", "line", "structural"} <= set(rep["certificate"])
    assert check(case, numeric=False, max_resolutions=cap, structural=False).verdict == "inconclusive"
    assert ("resolutions" in rep["certificate"]["boundary"]) == (cap > 1)
    assert mechanism_holds(obj, rep["certificate"]["structural"], rep["certificate"]["line"]["delta"])
    confirm_line(obj, rep)
    valid, msgs = _valid(case, rep)
    assert valid, msgs


def test_the_line_search_honours_its_budget(monkeypatch):
    import exactident.boundary.structural as S

    monkeypatch.setattr(S, "MAX_LINE_GAMMA_ENTRIES", 10)
    _case, rep = _report(SC.TWINS_OFF)  # 6 samples x 2 outputs x dim 11 = 132 entries of Gamma
    assert rep["verdict"] == "inconclusive"
    assert rep["reason"].endswith("line search in ker Gamma skipped (Gamma has 132 entries, more than 10)")


def test_monte_carlo_mode_settles_the_same_way_without_a_certificate():
    # --certify none: uncertified ranks, labelled; the structural search runs on the exact facts all the
    # same, but an uncertified report carries no certificate (verify-certificate never accepts one).
    _case, rep = _report(SC.DEAD, certify="none")
    assert (rep["verdict"], rep["decided_by"], rep["certified"]) == ("not-identifiable", "dead-neuron", False)
    assert "certificate" not in rep


@pytest.mark.parametrize("seed", range(30))
def test_the_pinned_pretest_agrees_with_the_exact_rank_of_the_hyperplane_rows(seed):
    """The unpinned-hyperplane finder's pre-test (rank mod a BLAS prime of the integer rows ``[d h, d]``) says
    "pinned" only when ``[h_{l-1}, 1]`` over the samples with ``z_l >= 0`` has full column rank over Q (sympy's
    exact rank of the rows read from the sympy forward pass of the oracle), and on these small integer
    examples it says so whenever that holds (p = 1048573 divides none of their minors but by chance)."""
    import flint
    import sympy

    from exactident.boundary.structural import _PinnedTest
    from exactident.model.activation import activation_state
    from exactident.model.network import Network

    rng = random.Random(seed)
    widths = [rng.randint(1, 3) for _ in range(rng.randint(3, 4))]
    W = [[[rng.randint(-3, 3) for _ in range(widths[l])] for _ in range(widths[l + 1])] for l in range(len(widths) - 1)]
    b = [[rng.randint(-2, 2) for _ in range(widths[l + 1])] for l in range(len(widths) - 1)]
    X = [[F(rng.randint(-4, 4), rng.choice([1, 2])) for _ in range(widths[0])] for _ in range(rng.randint(1, 8))]
    net = Network(tuple(widths), [flint.fmpq_mat(w) for w in W], [[flint.fmpq(v) for v in bl] for bl in b])
    Xq = [[flint.fmpq(x.numerator, x.denominator) for x in row] for row in X]
    pinned = _PinnedTest(Xq, activation_state(net, Xq))
    for l in range(1, len(widths) - 1):
        for v in range(widths[l]):
            rows = []
            for x in X:
                h = [sympy.Rational(t) for t in x]
                for k in range(1, l):
                    h = [max(sum(W[k - 1][i][j] * h[j] for j in range(len(h))) + b[k - 1][i], 0)
                         for i in range(widths[k])]
                z = sum(W[l - 1][v][j] * h[j] for j in range(len(h))) + b[l - 1][v]
                if z >= 0:
                    rows.append(h + [1])
            full = len(rows) > 0 and sympy.Matrix(rows).rank() == widths[l - 1] + 1
            assert pinned(l, v) == full, (l, v, rows)
