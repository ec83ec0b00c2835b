"""Line certificates state the segment ``[0, t0]`` they proved, and the verifier checks that segment exactly.

Also the shared exact line primitive (:mod:`exactident.model.line_forward`): its first-kink search
against hand-derived roots, and its polynomials against a plain Fraction forward pass of
``theta + t delta`` at rational ``t`` inside the segment it proves (an independent computation).
"""

from __future__ import annotations

import copy
import random
from fractions import Fraction as F

import flint
import pytest

from exactident.check import check
from exactident.io.case import parse_case
from exactident.model.line_forward import LinePass, line_pass
from exactident.verify.certificate import verify_certificate

# widths [1, 2, 1]: z_A = 1 - x, z_B = x - 3, f = relu(z_A) + relu(z_B); samples 0, 2, 3, 4, 5.
# B is tied at x = 3 and pinned by its active samples 4, 5; A is active only at x = 0.
# Gamma(s) over (W_1[0,0], b_1[0], W_1[1,0], b_1[1], b_2[0]) (W_2 fixed): rows [0,1,0,0,1] (x = 0),
# [0,0,0,0,1] (x = 2, and x = 3 inactive), [0,0,x,1,1] (B active): rank 4 < dim 5 for both resolutions,
# kernel e_{W_1[0,0]}, and the tie's derivative [0,0,3,1,0] is 0 on it: nothing enters at first order.
# Along W_1[0,0] += c t, z_A = 1 - x + c t x: unchanged at x = 0 (every output on X constant while A stays
# off elsewhere) and, for c > 0, -1 + 2ct at x = 2: the first kink is t = 1/(2c) (then 2/(3c) at x = 3, ...).
# Past it f(2) = relu(-1 + 2ct) > 0 moves.
KINK = {"format": "exactident-case/1", "name": "line-kink-at-one-half", "widths": [1, 2, 1],
        "weights": [[["-1"], ["1"]], [["1", "1"]]], "biases": [["1", "-3"], ["0"]],
        "sample": [["0"], ["2"], ["3"], ["4"], ["5"]]}
W_KINK = [[[F(-1)], [F(1)]], [[F(1), F(1)]]]
B_KINK = [[F(1), F(-3)], [F(0)]]
X_KINK = [F(0), F(2), F(3), F(4), F(5)]


def _f(W, b, x):
    """Plain Fraction forward pass (relu(0) = 0): the outputs at one input."""
    h = list(x)
    for l, (Wl, bl) in enumerate(zip(W, b)):
        z = [sum((w * v for w, v in zip(row, h)), F(0)) + c for row, c in zip(Wl, bl)]
        h = z if l == len(W) - 1 else [max(v, F(0)) for v in z]
    return h


def _moved(c: F, t: F):
    W = copy.deepcopy(W_KINK)
    W[0][0][0] += c * t
    return W


@pytest.fixture(scope="module")
def kink_report():
    return check(parse_case(KINK), numeric=False).to_dict()


def test_the_line_found_on_a_boundary_states_the_first_kink(kink_report):
    rep = kink_report
    assert rep["on_boundary"] and (rep["verdict"], rep["decided_by"]) == ("not-identifiable", "line")
    line = rep["certificate"]["line"]
    moved = {k: F(v) for k, v in line["delta"].items() if F(v) != 0}
    assert set(moved) == {"W_1[0,0]"}
    c = moved["W_1[0,0]"]
    assert line["t0"] == (str(1 / (2 * c)) if c > 0 else None)  # the hand derivation above
    assert "t0 = 1/2" in rep["reason"] or c < 0
    assert verify_certificate(parse_case(KINK), rep, require_claims=True)[0]


def test_the_segment_is_true_and_ends_at_the_kink():
    # Independent of the engine: the moved network at t in [0, 1/2] computes f_theta on X; past 1/2 it does not.
    base = [_f(W_KINK, B_KINK, [x]) for x in X_KINK]
    for t in (F(1, 7), F(1, 4), F(1, 2)):
        assert [_f(_moved(F(1), t), B_KINK, [x]) for x in X_KINK] == base
    assert _f(_moved(F(1), F(3, 5)), B_KINK, [F(2)]) == [F(1, 5)] != base[1]


def _with_t0(rep, t0):
    forged = copy.deepcopy(rep)
    forged["certificate"]["line"]["delta"] = {"W_1[0,0]": "1"}
    forged["certificate"]["line"]["t0"] = t0
    return forged


@pytest.mark.parametrize("t0", ["1/2", "1/4", "1/1000"])
def test_a_segment_up_to_the_kink_verifies(kink_report, t0):
    # 1/2 itself: the kink is the segment's end, where z_A(2) = 0 and relu(0) = 0 still gives f(2) = 0.
    valid, msgs = verify_certificate(parse_case(KINK), _with_t0(kink_report, t0), require_claims=True)
    assert valid, msgs
    assert any(f"for 0 <= t <= t0 = {t0}" in m for m in msgs)


@pytest.mark.parametrize("t0", ["3/5", "2", None])
def test_a_forged_segment_beyond_the_kink_is_refused(kink_report, t0):
    valid, msgs = verify_certificate(parse_case(KINK), _with_t0(kink_report, t0), require_claims=True)
    assert not valid
    # z_1(x^1)_0 = z_A(2) = -1 + t changes sign at t = 1/2, inside (0, t0)
    assert any(m.startswith("certificate.line.t0: z_1(x^1)_0 changes sign for some t in (0, ") for m in msgs), msgs


@pytest.mark.parametrize("t0", ["0", "-1/2"])
def test_a_segment_that_is_not_positive_is_malformed(kink_report, t0):
    valid, msgs = verify_certificate(parse_case(KINK), _with_t0(kink_report, t0))
    assert (valid, msgs) == (False, [f"certificate.line.t0: {t0} is not positive"])


def test_a_line_part_without_its_segment_is_refused(kink_report):
    forged = copy.deepcopy(kink_report)
    del forged["certificate"]["line"]["t0"]
    assert verify_certificate(parse_case(KINK), forged) == (False, ["certificate.line.t0: missing"])


# --- the primitive's first kink against hand-derived roots ----------------------------------------------


def _one_unit(*coeffs: int) -> LinePass:
    """A LinePass whose one hidden pre-activation is ``sum coeffs[k] t^k`` (output constant)."""
    Z = [[flint.fmpz_mat([[c]]) for c in coeffs], [flint.fmpz_mat([[0]])]]
    return LinePass(Z, [1, 1])


def test_first_kink_rational_roots_are_exact():
    # 2t^2 - 7t + 3 = (2t - 1)(t - 3): first root 1/2
    lp = _one_unit(3, -7, 2)
    assert lp.segment_end() == flint.fmpq(1, 2)
    assert lp.failures_below(flint.fmpq(1, 2)) == [] and lp.failures_below(flint.fmpq(3, 5)) == [(0, 1, 0)]
    # t (t - 1/3) (t - 5) = t^3 - 16/3 t^2 + 5/3 t, times 3: a unit tied at 0 that crosses at 1/3
    assert _one_unit(0, 5, -16, 3).segment_end() == flint.fmpq(1, 3)


def test_first_kink_irrational_root_is_bounded_below_tightly():
    # t^2 - 2: first positive root sqrt(2)
    lp = _one_unit(-2, 0, 1)
    r = lp.segment_end()
    assert r * r < 2 < (r * (1 + flint.fmpq(1, 2 ** 29))) ** 2
    assert lp.failures_below(r) == [] and lp.failures_below(flint.fmpq(3, 2)) == [(0, 1, 0)]
    assert lp.failures_below(flint.fmpq(7, 5)) == []  # (7/5)^2 = 1.96 < 2


def test_no_positive_root_means_every_t():
    # t^2 - t + 1 has a sign change but no real root; 1 + t + t^2 none; t (t + 1) a tie that goes positive
    for coeffs in ((1, -1, 1), (1, 1, 1), (0, 1, 1)):
        lp = _one_unit(*coeffs)
        assert lp.segment_end() is None and lp.failures_below(None) == []
    assert _one_unit(-1, 1).failures_below(None) == [(0, 1, 0)]


# --- the primitive against a plain Fraction forward pass, at rational t inside its segment ------------------


def _rand(rng):
    return F(rng.randint(-6, 6), rng.randint(1, 4))


@pytest.mark.parametrize("seed", range(25))
def test_polynomials_are_the_network_on_the_segment(seed):
    rng = random.Random(9100 + seed)
    widths = [rng.randint(1, 3) for _ in range(rng.randint(3, 4))]
    W = [[[_rand(rng) for _ in range(widths[l - 1])] for _ in range(widths[l])] for l in range(1, len(widths))]
    b = [[_rand(rng) for _ in range(widths[l])] for l in range(1, len(widths))]
    X = [[F(rng.randint(-4, 4)) for _ in range(widths[0])] for _ in range(6)]
    dW = [[[_rand(rng) if rng.random() < 0.4 else F(0) for _ in row] for row in Wl] for Wl in W]
    db = [[_rand(rng) if rng.random() < 0.4 else F(0) for _ in bl] for bl in b]
    lp = line_pass(W, b, dW, db, X)
    t0 = lp.segment_end()
    end = F(1) if t0 is None else F(int(t0.p), int(t0.q))
    polys = lp.output_polys()
    for t in (end / 3, end / 2, end):
        Wt = [[[w + t * d for w, d in zip(r, dr)] for r, dr in zip(Wl, dl)] for Wl, dl in zip(W, dW)]
        bt = [[c + t * d for c, d in zip(bl, dl)] for bl, dl in zip(b, db)]
        for x, per_output in zip(X, polys):
            assert _f(Wt, bt, x) == [sum((c * t ** k for k, c in enumerate(p)), F(0)) for p in per_output]


def test_a_structural_line_cannot_claim_more_than_its_mechanism():
    # A shipped unpinned-hyperplane case: the structural part's t0 is the exact supremum -z/s of the moved
    # neuron's first crossing (docs/theory.md, recomputed by verify.structural); the line part states the same
    # segment, and a line part claiming twice as far is refused by the generic segment check.
    import json
    from pathlib import Path

    from exactident.io.case import load_case

    path = Path(__file__).resolve().parent.parent / "cases" / "suite-v1" / "gap" / "gap-2x2x2x1-s1-000.json"
    case, rep = load_case(str(path)), check(load_case(str(path)), numeric=False).to_dict()
    assert json.loads(path.read_text())["expected"]["decided_by"] == rep["decided_by"] == "unpinned-hyperplane"
    t0 = F(rep["certificate"]["structural"]["t0"])
    assert F(rep["certificate"]["line"]["t0"]) == t0
    assert verify_certificate(case, rep, require_claims=True)[0]
    forged = copy.deepcopy(rep)
    forged["certificate"]["line"]["t0"] = str(2 * t0)
    valid, msgs = verify_certificate(case, forged, require_claims=True)
    assert not valid and any(m.startswith("certificate.line.t0: ") and "changes sign" in m for m in msgs), msgs


def _f_graph(W, b, slopes, x):
    """Fraction forward pass of the layer-graph form: hidden unit v outputs z (z >= 0) or slopes[l][v] * z."""
    h = list(x)
    for l, (Wl, bl) in enumerate(zip(W, b)):
        z = [sum((w * v for w, v in zip(row, h)), F(0)) + c for row, c in zip(Wl, bl)]
        h = z if l == len(W) - 1 else [v if v >= 0 else a * v for v, a in zip(z, slopes[l])]
    return h


def test_prelu_slope_moving_ends_the_segment_at_the_hand_derived_kink():
    # x = -1: u = w x + b = -1 with PReLU slope a = 1/4 moving as 1/4 + t: h_u = -(1/4 + t);
    # z_2 = -4 h_u - 2 = -1 + 4 t reaches its kink at t = 1/4; f = relu(z_2) = 0 on [0, 1/4] (constant)
    lp = line_pass([[[F(1)]], [[F(-4)]], [[F(1)]]], [[F(0)], [F(-2)], [F(0)]],
                   [[[F(0)]], [[F(0)]], [[F(0)]]], [[F(0)], [F(0)], [F(0)]], [[F(-1)]],
                   slopes=[[F(1, 4)], [F(0)]], dslopes=[[F(1)], [F(0)]])
    assert lp.segment_end() == flint.fmpq(1, 4) and lp.is_constant()
    assert lp.failures_below(flint.fmpq(1, 4)) == [] and lp.failures_below(flint.fmpq(1, 3)) == [(0, 2, 0)]
    # the second layer's pre-activation as a polynomial: -1 + 4 t (its scale den[1])
    assert [int(Zk[0, 0]) / lp.den[1] for Zk in lp.Z[1]] == [-1, 4]


def test_a_linear_unit_changing_sign_ends_no_segment():
    # z = -1 + t at x = 1 (db = 1): through a linear unit (slope 1, no kink) f = -1 + t for every t, no segment
    # end; the same unit as a ReLU reaches its kink at t = 1
    args = ([[[F(1)]], [[F(1)]]], [[F(-2)], [F(0)]], [[[F(0)]], [[F(0)]]], [[F(1)], [F(0)]], [[F(1)]])
    linear = line_pass(*args, slopes=[[F(1)]])
    assert linear.segment_end() is None and linear.failures_below(None) == []
    assert linear.output_polys() == [[[F(-1), F(1)]]]
    assert line_pass(*args).segment_end() == 1


@pytest.mark.parametrize("seed", range(20))
def test_layer_graph_polynomials_are_the_network_on_the_segment(seed):
    # leaky, PReLU (moving slope), linear and ReLU units mixed; the polynomials against _f_graph at rational t
    rng = random.Random(7300 + seed)
    widths = [rng.randint(1, 3) for _ in range(rng.randint(3, 4))]
    L = len(widths) - 1
    W = [[[_rand(rng) for _ in range(widths[l - 1])] for _ in range(widths[l])] for l in range(1, L + 1)]
    b = [[_rand(rng) for _ in range(widths[l])] for l in range(1, L + 1)]
    slopes = [[rng.choice([F(0), F(1, 10), F(1), F(rng.randint(-3, 3), 4)]) for _ in range(widths[l])]
              for l in range(1, L)]
    dslopes = [[_rand(rng) if rng.random() < 0.4 else F(0) for _ in sl] for sl in slopes]
    X = [[F(rng.randint(-4, 4)) for _ in range(widths[0])] for _ in range(6)]
    dW = [[[_rand(rng) if rng.random() < 0.4 else F(0) for _ in row] for row in Wl] for Wl in W]
    db = [[_rand(rng) if rng.random() < 0.4 else F(0) for _ in bl] for bl in b]
    lp = line_pass(W, b, dW, db, X, slopes=slopes, dslopes=dslopes)
    t0 = lp.segment_end()
    end = F(1) if t0 is None else F(int(t0.p), int(t0.q))
    polys = lp.output_polys()
    for t in (end / 3, end / 2, end):
        Wt = [[[w + t * d for w, d in zip(r, dr)] for r, dr in zip(Wl, dl)] for Wl, dl in zip(W, dW)]
        bt = [[c + t * d for c, d in zip(bl, dl)] for bl, dl in zip(b, db)]
        st = [[a + t * d for a, d in zip(sl, dl)] for sl, dl in zip(slopes, dslopes)]
        for x, per_output in zip(X, polys):
            assert _f_graph(Wt, bt, st, x) == [sum((c * t ** k for k, c in enumerate(p)), F(0)) for p in per_output]
