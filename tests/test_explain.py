"""``explain``: parameter classes against the definition, exact kernel directions, neuron diagnostics.

Right values come from the independent sympy oracle of tests/test_oracle.py (symbolic
differentiation, ``nullspace`` over QQ): a parameter is moved by ``ker Gamma`` iff its
coordinate is nonzero in some vector of the oracle's nullspace basis.  Straight lines
are re-checked with tests/_gen.py's Fraction forward pass at ``theta + t delta``.
Neuron diagnostics are checked on hand-built networks whose facts are derived in the
comments.
"""

from __future__ import annotations

import functools
from fractions import Fraction

import pytest
import sympy as sp
from _gen import forward, random_case
from hypothesis import given, settings
from hypothesis import strategies as st
from test_oracle import Oracle

from exactident.explain.core import explain
from exactident.explain.kernel import combination_text, readable_basis
from exactident.explain.render import compress_names
from exactident.io.case import parse_case

# (widths, seed, n): small samples so that C_S fails and kernels are non-trivial
CASES = [((1, 2, 1), 11, 2), ((1, 2, 1), 12, 3), ((2, 3, 1), 13, 4), ((2, 3, 1), 14, 6), ((2, 2, 2), 15, 3),
         ((1, 2, 2, 1), 16, 3), ((1, 2, 2, 1), 17, 5), ((2, 2, 2, 2), 18, 4), ((1, 3, 1), 19, 2), ((3, 2), 20, 2),
         # inconclusive, with kernel directions that are not straight lines (parameters "unknown")
         ((1, 2, 3, 1), 61, 5), ((1, 3, 2, 2), 31, 5)]


@functools.cache
def _build(widths, seed, n):
    tc = random_case(widths, seed, n, rational=True)
    return tc, parse_case(tc.obj()), Oracle(tc, lifting=False)


def _oracle_moved(orc) -> set[str]:
    basis = orc.gamma.nullspace()
    return {orc.names[j] for vec in basis for j in range(orc.dim) if vec[j] != 0}


def _moved(ex) -> set[str]:
    return {ex.names[j] for blk in ex.blocks for vec in blk.basis for j, x in enumerate(vec) if x}


@pytest.mark.parametrize("widths,seed,n", CASES, ids=[f"{'-'.join(map(str, w))}-s{s}-n{n}" for w, s, n in CASES])
def test_classes_match_the_definition(widths, seed, n):
    _tc, case, orc = _build(widths, seed, n)
    _report, ex = explain(case)
    classes = {e["name"]: e for e in ex.parameters}
    assert set(classes) == set(orc.names) | {e["name"] for e in ex.parameters if e["class"] == "fixed"}
    assert {e["name"] for e in ex.parameters if e["class"] == "fixed"} == {
        f"W_{l + 1}[{k},{v}]" for (l, v), k in orc.fixed.items()}
    moved = _oracle_moved(orc)
    r_gamma, r_a = orc.ranks()
    if r_gamma == orc.dim:
        assert all(classes[nm]["class"] == "identifiable" for nm in orc.names)
        return
    assert _moved(ex) == moved  # the same kernel, by the definition
    cn_fails = r_gamma == r_a
    for nm in orc.names:
        cls = classes[nm]["class"]
        if nm not in moved:
            assert cls == "first-order-determined", nm  # e_j in the row space
        elif cn_fails:
            assert cls == "not-identifiable", nm  # Theorem 8's fibre moves it
        else:
            assert cls in ("not-identifiable", "unknown"), nm
            assert cls == "unknown" or classes[nm]["by"] == "line"


def _theta_plus(tc, names, delta, t):
    W = [[list(r) for r in Wl] for Wl in tc.W]
    b = [list(bl) for bl in tc.b]
    for j, d in enumerate(delta):
        if not d:
            continue
        nm = names[j]
        l = int(nm[2:nm.index("[")])
        idx = [int(s) for s in nm[nm.index("[") + 1:-1].split(",")]
        if nm[0] == "W":
            W[l - 1][idx[0]][idx[1]] += t * d
        else:
            b[l - 1][idx[0]] += t * d
    return W, b


@pytest.mark.parametrize("widths,seed,n", CASES, ids=[f"{'-'.join(map(str, w))}-s{s}-n{n}" for w, s, n in CASES])
def test_kernel_directions_are_exact(widths, seed, n):
    tc, case, orc = _build(widths, seed, n)
    _report, ex = explain(case)
    for blk in ex.blocks:
        assert len(blk.basis) == orc.dim - orc.ranks()[0]
        M = sp.Matrix([[sp.Integer(v) for v in vec] for vec in blk.basis]).T if blk.basis else None
        if M is None:
            continue
        order = [orc.names.index(nm) for nm in ex.names]
        G = orc.gamma.extract(list(range(orc.gamma.rows)), order)
        assert sp.zeros(G.rows, M.cols) == G * M  # Gamma delta = 0 with the oracle's Gamma
        assert M.rank() == M.cols
        for vec, line in zip(blk.basis, blk.lines):
            coeffs = _line_polynomials(tc, ex.names, vec)
            for poly in coeffs:
                assert poly[1] == 0  # f moves only at second order along delta: Gamma delta = 0
                if line:
                    assert all(c == 0 for c in poly[1:])  # exactly constant along the line


def _line_polynomials(tc, names, vec):
    """Coefficients in t of each output ``f(theta + t delta)(x^i)_k`` near t = 0, by exact interpolation.

    On the sample's pattern (kept for tiny t, no tie) each output is a polynomial in t of degree <= L:
    L + 1 values at t = k 2^-60 determine it (Vandermonde, over QQ).
    """
    D = tc.L
    ts = [Fraction(k, 2**60) for k in range(1, D + 2)]
    values = []
    for t in ts:
        W, b = _theta_plus(tc, names, vec, t)
        values.append([v for x in tc.X for v in forward(W, b, x)[-1]])
    V = sp.Matrix([[sp.Rational(t.numerator, t.denominator) ** p for p in range(D + 1)] for t in ts])
    out = []
    for k in range(len(values[0])):
        y = sp.Matrix([sp.Rational(v[k].numerator, v[k].denominator) for v in values])
        out.append(list(V.LUsolve(y)))
    return out


def test_hand_example_classes_and_line():
    # f = 3 relu(2x + 1) at 0, 1: Gamma rows (0, 3, 1), (3, 3, 1); kernel (0, 1, -3): the biases trade
    # along a line (C_N fails: rank 2 = rank A), W_1[0,0] is pinned to first order.
    case = parse_case({"format": "exactident-case/1", "name": "t", "widths": [1, 1, 1], "weights": [[["2"]], [["3"]]],
                       "biases": [["1"], ["0"]], "sample": [[0], [1]]})
    report, ex = explain(case)
    assert report.verdict == "not-identifiable"
    assert {e["name"]: e["class"] for e in ex.parameters} == {
        "W_2[0,0]": "fixed", "W_1[0,0]": "first-order-determined", "b_1[0]": "not-identifiable",
        "b_2[0]": "not-identifiable"}
    assert ex.blocks[0].basis == [[0, 1, -3]] and ex.blocks[0].lines == [True]
    assert combination_text([0, 1, -3], ex.names) == "b_1[0] - 3 b_2[0]"


def test_identifiable_case_has_every_parameter_identifiable():
    case = parse_case({"format": "exactident-case/1", "name": "t", "widths": [1, 1, 1], "weights": [[["2"]], [["3"]]],
                       "biases": [["1"], ["0"]], "sample": [[0], [1], [-1]]})
    _report, ex = explain(case)
    assert [e["class"] for e in ex.parameters] == ["fixed", "identifiable", "identifiable", "identifiable"]
    assert ex.blocks == []


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([(1, 2, 1), (2, 2, 1), (1, 2, 2, 1)]), st.integers(2, 6),
       st.randoms(use_true_random=False))
def test_classes_do_not_depend_on_the_order_of_samples(seed, widths, n, rnd):
    # Gamma's rows are permuted with the samples: same kernel, same classes.
    tc = random_case(widths, seed, n, rational=True)
    _r, ex = explain(parse_case(tc.obj()))
    perm = list(range(n))
    rnd.shuffle(perm)
    obj = tc.obj()
    obj["sample"] = [obj["sample"][i] for i in perm]
    _r2, ex2 = explain(parse_case(obj))
    assert [(e["name"], e["class"]) for e in ex.parameters] == [(e["name"], e["class"]) for e in ex2.parameters]


def test_boundary_case_uses_the_entering_resolution():
    # SPEC's example: sample -1/2 on the kink.  Resolution "active": rank 2 = rank A < 3 and the entering
    # certificate (0, 1, -3); resolution "inactive": rank 3.  Both biases move in ker Gamma(active).
    case = parse_case({"format": "exactident-case/1", "name": "k", "widths": [1, 1, 1], "weights": [[["2"]], [["3"]]],
                       "biases": [["1"], ["0"]], "sample": [[0], [1], ["-1/2"]]})
    report, ex = explain(case)
    assert report.on_boundary and len(ex.blocks) == 2
    cls = {e["name"]: e for e in ex.parameters}
    assert cls["b_1[0]"]["class"] == cls["b_2[0]"]["class"] == "not-identifiable"
    assert cls["W_1[0,0]"]["class"] == "first-order-determined"  # unmoved in both resolutions
    # the kernel direction of resolution "active" keeps f on X exactly along theta + t delta, t > 0:
    # 3 relu(2x + 1 + t) - 3t = 3 (2x + 1) at x = 0, 1 and 3 relu(t) - 3t = 0 at the kink x = -1/2
    tc = _gen_case(case)
    (vec,) = ex.blocks[0].basis
    for t in (Fraction(1, 2**40), Fraction(1, 7)):
        W, b = _theta_plus(tc, ex.names, vec, t)
        assert [forward(W, b, x)[-1] for x in tc.X] == [forward(tc.W, tc.b, x)[-1] for x in tc.X]


def _gen_case(case):
    from _gen import TinyCase

    fr = lambda q: Fraction(int(q.p), int(q.q))  # noqa: E731
    net = case.network
    return TinyCase(list(net.widths), [[[fr(q) for q in row] for row in M.table()] for M in net.W],
                    [[fr(q) for q in bl] for bl in net.b], [[fr(q) for q in x] for x in case.X])


# ------------------------------------------------------------------------------------------- neurons

def _case(widths, W, b, X, name="hand"):
    return parse_case({"format": "exactident-case/1", "name": name, "widths": widths, "weights": W, "biases": b,
                       "sample": X})


def test_neuron_diagnostics_dead_always_active_and_unpinned():
    # Layer 1: n0 = x - 10 < 0 on {1, 2, 3} (dead); n1 = x + 1 > 0 (always active, affine);
    # n2 = x - 5/2: active at 3 only, where [x, 1] = (3, 1) has rank 1 < 2 (hyperplane not pinned).
    case = _case([1, 3, 1], [[["1"], ["1"], ["1"]], [["1", "1", "1"]]], [["-10", "1", "-5/2"], ["0"]],
                 [["1"], ["2"], ["3"]])
    _report, ex = explain(case)
    n0, n1, n2 = ex.neurons
    assert (n0["dead"], n0["n_active"], n0["under_determined"]) == (True, 0, True)
    assert "dead on the sample" in n0["why"]
    assert (n1["always_active"], n1["n_active"], n1["pinned"]) == (True, 3, True)
    assert (n2["n_active"], n2["hyperplane_rank"], n2["hyperplane_full"], n2["pinned"]) == (1, 1, 2, False)
    assert "1 direction(s) of its hyperplane unseen" in n2["why"]
    cls = {e["name"]: e["class"] for e in ex.parameters}
    # the dead neuron's incoming parameters have zero columns: each e_j is an exact line
    assert cls["W_1[0,0]"] == cls["b_1[0]"] == "not-identifiable"


def test_neuron_diagnostics_twins_are_named():
    # n0 = x - 1 and n1 = 3x - 3 = 3 n0: h_0 = 1/3 h_1 on samples avoiding x = 1 (twins).
    case = _case([1, 2, 1], [[["1"], ["3"]], [["1", "2"]]], [["-1", "-3"], ["0"]], [["2"], ["3"], ["0"], ["5"]])
    _report, ex = explain(case)
    n0, n1 = ex.neurons
    assert n0["twins"] == [{"neuron": 1, "ratio": "1/3"}] and n1["twins"] == [{"neuron": 0, "ratio": "3"}]
    assert "proportional to (1,1)" in n0["why"]


def test_readable_basis_and_names():
    assert readable_basis([[5, 0, 7], [12, 1, 17]]) == [[1, -2, 1], [2, 1, 3]]
    assert readable_basis([[0, -2, 4]]) == [[0, 1, -2]]
    # several runs of columns are braced, apart from the row index (regression: "W_1[0,0..1,3]" read as 3 indices)
    assert compress_names(["W_1[0,0]", "W_1[0,1]", "W_1[0,3]", "b_1[0]"]) == "W_1[0,{0..1,3}], b_1[0]"
    assert compress_names(["W_1[0,2]", "W_1[0,3]", "b_1[0]", "b_1[2]"]) == "W_1[0,2..3], b_1[0,2]"
    assert combination_text([10**30, 0, -(10**30)], ["a", "b", "c"]) == "~ a - c"
