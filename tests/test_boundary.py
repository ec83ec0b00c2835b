"""Boundary cases (SPEC §2): ties, tie resolutions, verdicts and certificates.

Right answers come from hand derivations (written next to each case), from the
independent sympy oracle in ``tests/boundary_oracle.py`` (ranks of every
resolution), from ``verify-certificate`` (independent Fraction arithmetic),
and, for every certified case, from an explicit nearby parameter theta' with
``f_theta'(X) == f_theta(X)`` exactly and ``f_theta' != f_theta`` at a probe
point (equivalent parameters compute the same function, so theta' is not
equivalent to theta).
"""

from fractions import Fraction as F
from pathlib import Path

import boundary_oracle as O
import pytest

from exactident.boundary import entering
from exactident.boundary.analyse import tie_groups
from exactident.check import check
from exactident.io.case import parse_case
from exactident.model.activation import Tie
from exactident.verify.certificate import verify_certificate

# name: (widths, W, b, X, expected verdict, hand derivation)
CASES = {
    # SPEC §2: f = 3 relu(w x + b1) + b2, W_2 = 3 fixed, tau = (w, b1, b2), dim 3.  Active row
    # (3x, 3, 1), inactive (0, 0, 1).  Tie x = -1/2 active: rows (0,3,1), (3,3,1), (-3/2,3,1),
    # rank 2; alpha rows (x, 1, 1), rank 2: R_Gamma = R_A = 2 < 3.  Kernel: 3 dw = 0 and
    # 3 db1 + db2 = 0, so delta = (0, 1, -3); g_t = (x, 1, 0) = (-1/2, 1, 0), g_t.delta = 1 > 0
    # enters the active side: not-identifiable.
    "kink": ([1, 1, 1], [[[2]], [[3]]], [[1], [0]], [[0], [1], ["-1/2"]], "not-identifiable"),
    # + sample -1 (z = -1, row (0, 0, 1)): active rows (0,3,1), (3,3,1), (0,0,1) already have
    # rank 3 whatever the tie does: C_S for both resolutions, identifiable.
    "kink+": ([1, 1, 1], [[[2]], [[3]]], [[1], [0]], [[0], [1], ["-1/2"], [-1]], "identifiable"),
    # First-layer hyperplane in R^2: z = x1 + x2, W_2 = 1 fixed, tau = (w1, w2, b1, b2), dim 4.
    # Active rows (x1, x2, 1, 1): (1,0), (0,1), (1,1) give rank 3; (-1,-1) inactive adds (0,0,0,1):
    # rank 4 before the tie (1,-1) is even looked at, so both resolutions satisfy C_S.
    "hyperplane": ([2, 1, 1], [[[1, 1]], [[1]]], [[0], [0]],
                   [[1, 0], [0, 1], [1, 1], [-1, -1], [1, -1]], "identifiable"),
    # Two ties of one neuron, (1,-1) and (2,-2), with the same four other samples: rank 4 always,
    # 4 resolutions, identifiable.
    "several-ties-identifiable": ([2, 1, 1], [[[1, 1]], [[1]]], [[0], [0]],
                                  [[1, 0], [0, 1], [1, 1], [-1, -1], [1, -1], [2, -2]], "identifiable"),
    # Without the inactive sample: both ties active gives rows (1,-1,1,1), (2,-2,1,1), (1,0,1,1),
    # (0,1,1,1) of rank 3 (all of the form (x, 1, 1) in (w, b1+b2... ) -- b1 and b2 columns equal
    # on active rows) and alpha rank 3; delta = (0, 0, 1, -1) (raise b1, lower b2) keeps every
    # active output and raises both ties (g_t = (x1, x2, 1, 0), g_t.delta = 1): not-identifiable.
    "several-ties": ([2, 1, 1], [[[1, 1]], [[1]]], [[0], [0]], [[1, -1], [2, -2], [1, 0], [0, 1]],
                     "not-identifiable"),
    # Dead-neuron tie: neuron 1 (z = x) is <= 0 on every sample and tied at 0; neuron 0
    # (z = x + 3) is active everywhere.  Inactive side: neuron 1 is dead, its columns of Gamma
    # are zero; rows (x, 0, 1, 0, 1) over (w0, w1, b1_0, b1_1, b2) have rank 2 = R_A (alpha rows
    # (x, 0, 1, 0, 1)); delta = -e(b1_1) is in the kernel and g_t = (0, 0, 0, 1, 0) gives -1 < 0:
    # lowering the dead neuron's bias changes nothing: not-identifiable.
    "dead-neuron": ([1, 2, 1], [[[1], [1]], [[1, 1]]], [[3, 0], [0]], [[0], [-1], [-2]], "not-identifiable"),
    # Second-layer zero set: h = (relu(x), relu(-x)), z_2 = h1 + h2 - 1 = |x| - 1; solving
    # |x| = 1 gives the tie x = 1.  With samples 1, 2, 1/2, -3 the oracle gives R_Gamma = R_A
    # for both sides and the engine must certify (checked below by verify-certificate and theta').
    "second-layer": ([1, 2, 1, 1], [[[1], [-1]], [[1, 1]], [[1]]], [[0, 0], [-1], [0]],
                     [[1], [2], ["1/2"], [-3]], "not-identifiable"),
}


def _case(name, widths, W, b, X):
    return parse_case({"format": "exactident-case/1", "name": name, "widths": widths,
                       "weights": [[[str(v) for v in r] for r in M] for M in W],
                       "biases": [[str(v) for v in r] for r in b], "sample": [[str(v) for v in r] for r in X]})


def _fr(widths, W, b, X):
    return ([[[F(str(v)) for v in r] for r in M] for M in W], [[F(str(v)) for v in r] for r in b],
            [[F(str(v)) for v in r] for r in X])


def _apply(widths, W, b, names, delta, t):
    """theta + t * delta over Fractions (delta keyed by parameter names)."""
    W2 = [[list(r) for r in M] for M in W]
    b2 = [list(r) for r in b]
    for name in names:
        d = F(delta[name]) * t
        if name.startswith("W"):
            l, rest = name[2:].split("[")
            r, c = rest.rstrip("]").split(",")
            W2[int(l) - 1][int(r)][int(c)] += d
        else:
            l, rest = name[2:].split("[")
            b2[int(l) - 1][int(rest.rstrip("]"))] += d
    return W2, b2


PROBES = [[F(k, 3)] for k in range(-9, 10)]


def _probes(widths):
    if widths[0] == 1:
        return PROBES
    return [[F(a, 2), F(c, 2)] for a in range(-4, 5) for c in range(-4, 5)]


@pytest.mark.parametrize("name", list(CASES), ids=list(CASES))
def test_boundary_family(name):
    widths, W, b, X, expected = CASES[name]
    report = check(_case(name, widths, W, b, X), numeric=False)
    assert report.on_boundary and report.verdict == expected
    Wf, bf, Xf = _fr(widths, W, b, X)
    oracle = O.all_resolution_ranks(widths, Wf, bf, Xf)
    T = O.ties(widths, Wf, bf, Xf)
    assert [(t["sample"], t["layer"], t["neuron"]) for t in report.patterns[0]["ties"]] == T
    # Every resolution's ranks agree with the oracle; rank_gamma <= min(rank_a, dim).
    for p in report.patterns:
        s = tuple(t["active"] for t in p["ties"])
        rg, ra, dim = oracle[s]
        assert p["rank_gamma"] == rg and p["cs"] == (rg == dim)
        assert p["rank_a"] in (None, ra) and rg <= min(ra, dim)
    assert len(report.patterns) == 2 ** len(T)
    assert report.rank_gamma == min(r[0] for r in oracle.values())
    case = _case(name, widths, W, b, X)
    if expected == "identifiable":
        assert all(rg == dim for rg, _, dim in oracle.values())
        # the natural certificate: C_S certified (rank mod p = dim) on every tie resolution
        assert set(report.certificate) == {"boundary"}
        assert all(r["rank_gamma"]["lower"]["rank_mod_p"] == dim
                   for r in report.certificate["boundary"]["resolutions"])
        valid, msgs = verify_certificate(case, report.to_dict(), require_claims=True)
        assert valid, msgs
    if expected == "not-identifiable":
        ent = report.certificate["entering"]
        valid, msgs = verify_certificate(_case(name, widths, W, b, X), report.to_dict())
        assert valid, msgs
        # A nearby parameter, exactly: theta' = theta + t delta (these fibers are straight).
        for t in (F(1, 10), F(1, 1000)):
            W2, b2 = _apply(widths, Wf, bf, ent["parameters"], ent["delta"], t)
            assert O.outputs(widths, W2, b2, Xf) == O.outputs(widths, Wf, bf, Xf)
            assert O.outputs(widths, W2, b2, _probes(widths)) != O.outputs(widths, Wf, bf, _probes(widths))


def test_spec_certificate_delta_is_0_1_minus3():
    # Derivation in CASES["kink"]: the kernel of Gamma(active) is the line through (0, 1, -3),
    # oriented by g_t.delta > 0 with g_t = (-1/2, 1, 0); the certificate is primitive.
    widths, W, b, X, _ = CASES["kink"]
    ent = check(_case("kink", widths, W, b, X), numeric=False).certificate["entering"]
    assert ent["delta"] == {"W_1[0,0]": "0", "b_1[0]": "1", "b_2[0]": "-3"}
    assert ent["resolution"] == [{"sample": 2, "layer": 1, "neuron": 0, "active": True}]
    assert ent["derivatives"][0]["value"] == "1"
    assert (ent["rank_gamma"], ent["rank_a"], ent["dim"]) == (2, 2, 3)


def test_curved_fiber_needs_a_solved_correction():
    """Widths [1,2,2] (found by a seeded random search of certified cases whose straight line fails).

    h0 = relu(0 x + b1_0) = 1 + db1_0 (active everywhere), h1 = relu(-x + 2 + db1_1), tie at x = 2.
    Fixed edges: W_2[0,0] = -1 (neuron 0) and W_2[1,1] = -2 (neuron 1); free c = W_2[1,0] = 0 and
    W_2[0,1] = 1.  f0 = -h0 + h1 + b2_0,  f1 = c h0 - 2 h1 + b2_1.
    Along delta = (db1_0, db1_1, dc) = (1, 1, 2): f0 changes by -t + t = 0, f1 by
    2t (1 + t) - 2t = 2t^2: delta is tangent to the fiber (in ker Gamma(active)), the line is not
    in it.  Solving c' (1 + t) - 2t = 0 gives c' = 2t / (1 + t): exactly on the fiber, and the tie
    x = 2 has h1 = t > 0 (active side).  At x = 3 (h1 = 0) f1 changes from -1 to 2t - 1: not
    equivalent.
    """
    widths, W, b, X = [1, 2, 2], [[[0], [-1]], [[-1, 1], [0, -2]]], [[1, 2], [-2, -1]], [[-2], [0], [2]]
    case = _case("curved", widths, W, b, X)
    report = check(case, numeric=False)
    assert report.verdict == "not-identifiable"
    assert verify_certificate(case, report.to_dict())[0]
    ent = dict(report.certificate["entering"])
    assert ent["resolution"] == [{"sample": 2, "layer": 1, "neuron": 1, "active": True}]
    ent["delta"] = {name: "0" for name in ent["parameters"]}
    ent["delta"].update({"b_1[0]": "1", "b_1[1]": "1", "W_2[1,0]": "2"})
    # the tie is z = W_1[1,:] x + b_1[1]; delta moves only b_1[1] among its inputs: g_t . delta = 1
    ent["derivatives"] = [dict(ent["resolution"][0], value="1")]
    assert verify_certificate(case, {"certificate": {"entering": ent}})[0]  # hand delta certifies too
    Wf, bf, Xf = _fr(widths, W, b, X)
    f_theta = O.outputs(widths, Wf, bf, Xf)
    for t in (F(1, 10), F(1, 1000)):
        W2, b2 = _apply(widths, Wf, bf, ent["parameters"], ent["delta"], t)
        assert [o[1] - f[1] for o, f in zip(O.outputs(widths, W2, b2, Xf), f_theta)] == [2 * t * t] * 3
        W2[1][1][0] = 2 * t / (1 + t)
        assert O.outputs(widths, W2, b2, Xf) == f_theta
        assert O.outputs(widths, W2, b2, [[F(3)]])[0][1] == 2 * t - 1 != O.outputs(widths, Wf, bf, [[F(3)]])[0][1]


def test_invisible_ties_mean_theta_is_not_on_the_boundary():
    """Widths [1,1,1,1], z1 = x, z2 = relu(z1) - 1, f = relu(z2); all later weights 1 (fixed).

    x = 0 ties neuron 1 but z2(0) = -1 < 0 strictly: both sides give the same alpha, so the
    theorems apply directly.  tau = (w1, b1, b2, b3); rows: x = 2, 3 fully active give
    (x, 1, 1, 1); x = 0 gives (0, 0, 0, 1).  Rank 3; alpha rows (x, 1, 1, 1), (0, 0, 0, 1): rank 3.
    R_Gamma = R_A = 3 < 4: Theorem 8, not-identifiable.
    """
    case = _case("inv", [1, 1, 1, 1], [[[1]], [[1]], [[1]]], [[0], [-1], [0]], [[0], [2], [3]])
    r = check(case, numeric=False)
    assert (r.verdict, r.rank_gamma, r.rank_a, r.n_ties) == ("not-identifiable", 3, 3, 1)
    assert "not on Delta_X after all" in r.reason and "Theorem 8" in r.reason
    assert r.patterns == [] and set(r.certificate) == {"boundary"}
    # Theorem 8 on the common alpha, the tie shown invisible (layer 2 strictly inactive at x = 0).
    part = r.certificate["boundary"]
    assert part["ties"] == [] and part["invisible_ties"] == [{"sample": 0, "layer": 1, "neuron": 0, "blocked_by": 2}]
    assert [res["active"] for res in part["resolutions"]] == [[]]
    valid, msgs = verify_certificate(case, r.to_dict(), require_claims=True)
    assert valid, msgs


def test_zero_biases_at_the_origin_hit_the_cap():
    # Widths [2,3,3,1], zero biases: at x = 0 every hidden pre-activation is 0 (layer 2 sees
    # relu(0) = 0): 6 ties, none invisible, 2^6 = 64 resolutions > cap 16.
    W = [[[1, 2], [-1, 1], [2, -3]], [[1, -1, 2], [2, 1, 1], [-1, 3, 1]], [[1, 2, -1]]]
    case = _case("origin", [2, 3, 3, 1], W, [[0, 0, 0], [0, 0, 0], [0]], [[0, 0], [1, 2], [-1, 1]])
    r = check(case, numeric=False, max_resolutions=16)
    assert r.n_ties == 6 and "2^6 = 64 tie resolutions, more than the limit 16" in r.reason
    # Past the cap a straight line is still sought (it needs no enumeration).  By hand: moving W_1[2,0]
    # changes z_(1,2) by eps x_0, which is 0 at the origin and leaves z_(1,2) = -4, -5 < 0 at (1,2) and
    # (-1,1): the outputs on X stay put, while at x = (-3,-3) the neuron turns on and f changes.
    assert r.verdict == "not-identifiable" and r.patterns is None
    assert {k: v for k, v in r.certificate["line"]["delta"].items() if v != "0"} == {"W_1[2,0]": "3"}
    assert set(r.certificate) == {"boundary", "rank", "line"} and "resolutions" not in r.certificate["boundary"]
    assert verify_certificate(case, r.to_dict(), require_claims=True)[0]
    assert check(case, numeric=False, max_resolutions=64).patterns is not None
    # The float verdict is not marked against a verdict that was not reached.
    num = check(case, max_resolutions=16).numeric
    assert num["agrees"] is None and num["compared_with"]["verdict"] is None


def test_past_the_cap_without_a_line_is_inconclusive_and_says_how_to_raise_it():
    # f = 3 relu(2x + 1) with samples 0, 1, -1/2, -1: C_S holds at the >= 0 pattern (rank 3 = dim),
    # so no kernel direction exists there; one tie gives 2^1 = 2 resolutions > 1.
    case = _case("kp", [1, 1, 1], [[[2]], [[3]]], [[1], [0]], [[0], [1], ["-1/2"], [-1]])
    r = check(case, numeric=False, max_resolutions=1)
    # Nothing enumerated: the certificate backs only the ties and the >= 0 pattern's ranks (no resolution);
    # the report records the cap it stopped at.
    assert r.verdict == "inconclusive" and set(r.certificate) == {"boundary", "rank"}
    assert "resolutions" not in r.certificate["boundary"]
    assert r.to_dict()["resolutions_not_enumerated"] == {"why": "cap", "max_resolutions": 1, "log2_resolutions": 1}
    from exactident.io.limits import WorkLimits

    assert verify_certificate(case, r.to_dict(), require_claims=True, limits=WorkLimits(max_resolutions=1))[0]
    # the verifier's own cap (4096) lets it enumerate both resolutions: its ranks prove C_S on each (rows
    # (0,3,1), (3,3,1), (0,0,1) over (w_1, b_1, b_2) on either side of the tie), so inconclusive is too weak
    valid, msgs = verify_certificate(case, r.to_dict(), require_claims=True)
    assert not valid and "but the certificate proves identifiable" in msgs[-1]
    assert "2^1 = 2 tie resolutions, more than the limit 1" in r.reason and "--max-resolutions 2" in r.reason


def test_tie_groups_follow_parameter_supports():
    # Same neuron -> same group; different first-layer neurons -> separate; a layer-2 tie
    # depends on every first-layer neuron, so it joins everything.
    assert tie_groups([Tie(0, 1, 0), Tie(3, 1, 0), Tie(1, 1, 1)]) == [[0, 1], [2]]
    assert tie_groups([Tie(0, 1, 0), Tie(1, 1, 1), Tie(2, 2, 0)]) == [[0, 1, 2]]


def test_exact_lp_fallback(monkeypatch):
    # Without the float LP, exact Fourier-Motzkin must find the SPEC example's certificate.
    monkeypatch.setattr(entering, "_float_candidates", lambda rows: [])
    widths, W, b, X, _ = CASES["kink"]
    r = check(_case("kink", widths, W, b, X), numeric=False)
    assert r.verdict == "not-identifiable"
    assert r.certificate["entering"]["delta"] == {"W_1[0,0]": "0", "b_1[0]": "1", "b_2[0]": "-3"}


def test_strict_direction_infeasible_and_zero_row():
    q = entering.flint.fmpq
    infeasible = (None, "infeasible (exact Fourier-Motzkin)")
    assert entering.find_strict_direction([[q(1), q(2)], [q(-1), q(-2)]]) == infeasible
    assert entering.find_strict_direction([[q(0), q(0)]]) == (None, "zero row")


def _transform(widths, W, b, X, how):
    """Permute layer-1 neurons (reverse) or rescale neuron (1, 0) by 3/2: equivalent parameters."""
    Wf, bf, Xf = _fr(widths, W, b, X)
    if how == "permute":
        perm = list(reversed(range(widths[1])))
        Wf[0] = [Wf[0][p] for p in perm]
        bf[0] = [bf[0][p] for p in perm]
        Wf[1] = [[row[p] for p in perm] for row in Wf[1]]
    else:
        lam = F(3, 2)
        Wf[0][0] = [w * lam for w in Wf[0][0]]
        bf[0][0] *= lam
        for row in Wf[1]:
            row[0] /= lam
    return widths, Wf, bf, Xf


def _pattern_summary(report):
    return sorted((p["rank_gamma"], p["cs"], p["cn"]) for p in report.patterns)


@pytest.mark.parametrize("how", ["permute", "rescale"])
@pytest.mark.parametrize("name", list(CASES), ids=list(CASES))
def test_boundary_verdicts_are_invariant(name, how):
    # Equivalent parameters (paper §3: permutations, positive rescalings) have the same ties
    # (pre-activations are permuted / scaled by 3/2 > 0), so the same verdict and pattern ranks.
    widths, W, b, X, expected = CASES[name]
    base = check(_case(name, widths, W, b, X), numeric=False)
    w2, W2, b2, X2 = _transform(widths, W, b, X, how)
    case2 = _case(name, w2, W2, b2, X2)
    other = check(case2, numeric=False)
    assert other.verdict == base.verdict == expected and other.n_ties == base.n_ties
    assert _pattern_summary(other) == _pattern_summary(base)
    if other.certificate:
        assert verify_certificate(case2, other.to_dict())[0]


def test_boundary_verdict_does_not_depend_on_the_fixed_edge():
    # Widths [2,3,3,1] at the origin (6 ties, 64 resolutions): every hidden neuron of layer 1
    # has 3 nonzero outgoing edges; fixing another one changes tau's coordinates, not the ranks.
    W = [[[1, 2], [-1, 1], [2, -3]], [[1, -1, 2], [2, 1, 1], [-1, 3, 1]], [[1, 2, -1]]]
    case = _case("origin", [2, 3, 3, 1], W, [[0, 0, 0], [0, 0, 0], [0]], [[0, 0], [1, 2], [-1, 1], [2, -1]])
    base = check(case, numeric=False)
    for choice in ({(1, 0): 0, (1, 1): 0, (1, 2): 0}, {(1, 0): 1, (1, 1): 2, (1, 2): 1}):
        other = check(case, numeric=False, fixed_choice=choice)
        assert other.verdict == base.verdict and _pattern_summary(other) == _pattern_summary(base)


BOUNDARY_FILES = ["tiny-111-kink", "tiny-111-kink-plus", "boundary-hyperplane-2d", "boundary-two-ties-one-neuron",
                  "boundary-dead-neuron", "boundary-second-layer", "boundary-invisible-tie",
                  "boundary-origin-zero-biases", "boundary-second-order-tie"]


@pytest.mark.parametrize("name", BOUNDARY_FILES, ids=BOUNDARY_FILES)
def test_shipped_boundary_cases_match_expected(name):
    # The `expected` blocks were derived by hand (see each case's description).
    from exactident.io.case import load_case

    case = load_case(f"cases/{name}.json")
    got = check(case, numeric=False).to_dict()
    assert {k: got[k] for k in case.expected} == case.expected
    valid, msgs = verify_certificate(case, got, require_claims=True)  # every verdict is certified
    assert valid, msgs


def test_all_ranks_fills_rank_a_on_every_resolution():
    # tiny-111-kink-plus: f = 3 relu(2x + 1) + b_2 at x = 0, 1, -1/2 (tie), -1.
    # alpha rows are (x, 1, 1) for an active sample and (0, 0, 1) for an inactive one.
    # tie active:   (0,1,1), (1,1,1), (-1/2,1,1), (0,0,1) -> rank 3
    # tie inactive: (0,1,1), (1,1,1), (0,0,1),    (0,0,1) -> rank 3
    # so with all_ranks every pattern reports rank_a = N_L * 3 = 3 (C_S holds in both).
    from exactident.io.case import load_case

    case = load_case(Path(__file__).parent.parent / "cases" / "tiny-111-kink-plus.json")
    lazy = check(case, numeric=False)
    assert lazy.verdict == "identifiable" and all(p["rank_a"] is None for p in lazy.patterns)
    full = check(case, numeric=False, all_ranks=True)
    assert full.verdict == "identifiable"
    assert [p["rank_a"] for p in full.patterns] == [3, 3] and full.rank_a == 3
