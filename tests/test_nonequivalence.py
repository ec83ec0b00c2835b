"""Non-equivalence by invariants (docs/boundary.md, "Non-equivalence by invariants").

The invariants (path-product multisets, first-layer rays) are checked to be invariant
under positive rescalings and hidden-neuron permutations with hypothesis; the
function-preserving tie of the issue and a seeded family like it get ``not-identifiable``
with a line certificate whose non-equivalence is shown by the invariant, the right
verdict being derived here: ``f`` is compared on a grid at ``theta + t delta`` for
several ``t`` with Fractions, and the invariant computed by hand.
"""

import random
from fractions import Fraction as F

import flint
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exactident.boundary.nonequivalence import find_witness
from exactident.check import check
from exactident.io.case import parse_case
from exactident.model.network import Network
from exactident.verify.arith import BadField
from exactident.verify.certificate import verify_certificate
from exactident.verify.nonequivalence import check_nonequivalence, first_layer_rays, path_factors, path_products

FN_PRESERVING = {"format": "exactident-case/1", "name": "fn-preserving-tie-2", "widths": [1, 2, 1, 1],
                 "weights": [[["1/2"], ["1/4"]], [["1", "-3"]], [["1"]]],
                 "biases": [["0", "0"], ["1/4"], ["0"]],
                 "sample": [["1"], ["-1"], ["-2"], ["1/2"], ["1/4"], ["3"], ["5"]]}


def _f(W, b, x):
    """The network's output at a scalar or vector x (Fractions), relu hidden layers."""
    h = list(x)
    for l, (Wl, bl) in enumerate(zip(W, b)):
        z = [sum((w * v for w, v in zip(row, h)), F(0)) + bv for row, bv in zip(Wl, bl)]
        h = z if l == len(W) - 1 else [max(v, F(0)) for v in z]
    return h


def _fr(obj):
    return ([[[F(v) for v in row] for row in M] for M in obj["weights"]], [[F(v) for v in r] for r in obj["biases"]],
            [[F(v) for v in r] for r in obj["sample"]])


# --- the invariants are invariants -----------------------------------------------------------

@st.composite
def networks(draw):
    widths = draw(st.sampled_from([[1, 2, 1], [2, 2, 1], [1, 3, 2], [2, 2, 2, 1], [1, 2, 3, 2]]))
    num = st.integers(-4, 4)
    W = [[[F(draw(num), draw(st.integers(1, 3))) for _ in range(widths[l])] for _ in range(widths[l + 1])]
         for l in range(len(widths) - 1)]
    b = [[F(draw(num), draw(st.integers(1, 3))) for _ in range(widths[l + 1])] for l in range(len(widths) - 1)]
    return widths, W, b


def _rescale(W, b, l, v, lam):
    W = [[list(r) for r in M] for M in W]
    b = [list(r) for r in b]
    W[l - 1][v] = [w * lam for w in W[l - 1][v]]
    b[l - 1][v] *= lam
    for row in W[l]:
        row[v] /= lam
    return W, b


def _permute(W, b, l, perm):
    W = [[list(r) for r in M] for M in W]
    b = [list(r) for r in b]
    W[l - 1] = [W[l - 1][p] for p in perm]
    b[l - 1] = [b[l - 1][p] for p in perm]
    W[l] = [[row[p] for p in perm] for row in W[l]]
    return W, b


@settings(max_examples=60, deadline=None)
@given(networks(), st.data())
def test_invariants_are_invariant_under_rescaling_and_permutation(net, data):
    widths, W, b = net
    L = len(widths) - 1
    W2, b2 = W, b
    for _ in range(data.draw(st.integers(1, 4))):
        l = data.draw(st.integers(1, L - 1))
        if data.draw(st.booleans()):
            lam = F(data.draw(st.integers(1, 9)), data.draw(st.integers(1, 9)))
            W2, b2 = _rescale(W2, b2, l, data.draw(st.integers(0, widths[l] - 1)), lam)
        else:
            W2, b2 = _permute(W2, b2, l, data.draw(st.permutations(list(range(widths[l])))))
    # The function is the same (sanity of the transformations), and so are both invariants.
    for x in ([F(k, 2)] * widths[0] for k in range(-4, 5)):
        assert _f(W, b, x) == _f(W2, b2, x)
    assert path_products(W, b) == path_products(W2, b2)
    assert first_layer_rays(W, b) == first_layer_rays(W2, b2)


def test_path_products_by_hand():
    # widths [1,2,1]: paths from input 0: W_2[0,v] W_1[v,0]; from layer 1: b_1[v] W_2[0,v]; beta: b_2[0]
    W, b = [[[F(2)], [F(-1)]], [[F(3), F(5)]]], [[F(1), F(4)], [F(7)]]
    assert path_products(W, b) == {(0, 0, 0): [F(-5), F(6)], (1, None, 0): [F(3), F(20)], (2, None, 0): [F(7)]}
    assert path_factors([1, 2, 1], 1, [1], 0) == [("b", 1, 1), ("W", 2, 0, 1)]
    with pytest.raises(BadField, match="neuron 2 does not exist in layer 1"):
        path_factors([1, 2, 1], 0, [0, 2], 0)
    with pytest.raises(BadField, match="a path starting at layer 0 has 2 neurons, found 1"):
        path_factors([1, 2, 1], 0, [0], 0)


def _zero_like(W, b):
    return [[[F(0)] * len(r) for r in M] for M in W], [[F(0)] * len(r) for r in b]


def test_check_nonequivalence_accepts_and_rejects():
    # f = 3 relu(2x + 1): delta = (db_1, db_2) = (1, -3) moves the path product b_1 W_2 from 3 to 3 + 3 eps.
    W, b = [[[F(2)]], [[F(3)]]], [[F(1)], [F(0)]]
    dW, db = _zero_like(W, b)
    db[0][0], db[1][0] = F(1), F(-3)
    good = {"invariant": "path-products", "path": {"start": 1, "neurons": [0], "output": 0},
            "coefficients": ["3", "3"]}
    assert check_nonequivalence([1, 1, 1], W, b, dW, db, good, "w", first_order=True)[0] == []
    assert check_nonequivalence([1, 1, 1], W, b, dW, db, good, "w", first_order=False)[0] == []
    wrong = dict(good, coefficients=["3", "4"])
    assert check_nonequivalence([1, 1, 1], W, b, dW, db, wrong, "w", first_order=True)[0] == [
        "w.coefficients: certificate says [3, 4], the path product along delta has coefficients [3, 3]"]
    # the empty path beta: b_2 moves from 0 to -3 eps
    beta = {"invariant": "path-products", "path": {"start": 2, "neurons": [], "output": 0},
            "coefficients": ["0", "-3"]}
    assert check_nonequivalence([1, 1, 1], W, b, dW, db, beta, "w", first_order=False)[0] == []
    # the input path W_2 W_1 = 6 does not move: constant, so no proof
    flat = {"invariant": "path-products", "path": {"start": 0, "neurons": [0, 0], "output": 0},
            "coefficients": ["6"]}
    problems = check_nonequivalence([1, 1, 1], W, b, dW, db, flat, "w", first_order=False)[0]
    assert problems == ["w: the path product is constant (6) along the line (claimed non-constant): it does not "
                        "show non-equivalence"]
    # rays: (W_1[0,:], b_1[0]) = (2, 1) moved along (0, 1) leaves its line; along (2, 1) it does not
    assert check_nonequivalence([1, 1, 1], W, b, dW, db, {"invariant": "first-layer-rays", "neuron": 0}, "w",
                                first_order=False)[0] == []
    db[0][0], dW[0][0][0] = F(1), F(2)
    assert check_nonequivalence([1, 1, 1], W, b, dW, db, {"invariant": "first-layer-rays", "neuron": 0}, "w",
                                first_order=True)[0] == [
        "w: neuron (1,0) has incoming vector ['2', '1'] and direction ['2', '1']: not a nonzero vector moved off "
        "its line (claimed)"]
    with pytest.raises(BadField, match="expected one of"):
        check_nonequivalence([1, 1, 1], W, b, dW, db, {"invariant": "weights"}, "w", first_order=True)


@settings(max_examples=40, deadline=None)
@given(networks(), st.data())
def test_engine_witnesses_are_accepted_by_the_verifier(net, data):
    widths, W, b = net
    dW = [[[F(data.draw(st.integers(-2, 2))) for _ in r] for r in M] for M in W]
    db = [[F(data.draw(st.integers(-2, 2))) for _ in r] for r in b]
    q = flint.fmpq
    network = Network(tuple(widths),
                      [flint.fmpq_mat([[q(v.numerator, v.denominator) for v in r] for r in M]) for M in W],
                      [[q(v.numerator, v.denominator) for v in r] for r in b])
    fdW = [flint.fmpq_mat([[q(v.numerator, v.denominator) for v in r] for r in M]) for M in dW]
    fdb = [[q(v.numerator, v.denominator) for v in r] for r in db]
    for first_order in (True, False):
        witness = find_witness(network, fdW, fdb, first_order=first_order)
        if witness is not None:
            assert check_nonequivalence(widths, W, b, dW, db, witness, "w", first_order=first_order)[0] == []
        # and a found witness is right: an invariant changes for a small step along the line
        if witness is not None and not first_order:
            t = F(1, 10**6)
            W2 = [[[w + t * d for w, d in zip(r, dr)] for r, dr in zip(M, dM)] for M, dM in zip(W, dW)]
            b2 = [[v + t * d for v, d in zip(r, dr)] for r, dr in zip(b, db)]
            assert path_products(W, b) != path_products(W2, b2) or first_layer_rays(W, b) != first_layer_rays(W2, b2)


# --- function-preserving ties --------------------------------------------------------------------

def _same_function_along(obj, delta, grid):
    """f(theta + t delta) == f(theta) on the grid for several t (Fractions), and the path-product
    invariant moves: theta + t delta is not equivalent to theta."""
    W, b, _ = _fr(obj)
    names = {f"W_{l + 1}[{r},{c}]": (l, r, c) for l in range(len(W)) for r in range(len(W[l]))
             for c in range(len(W[l][r]))}
    for t in (F(1, 1000), F(1, 10**6), F(-1, 10**5)):  # small: the first-layer weights stay positive
        W2 = [[list(r) for r in M] for M in W]
        for name, d in delta.items():
            l, r, c = names[name]
            W2[l][r][c] += t * F(d)
        assert all(_f(W, b, [x]) == _f(W2, b, [x]) for x in grid)
        assert path_products(W, b) != path_products(W2, b)


def test_function_preserving_tie_is_not_identifiable():
    """``W_1`` along ``(3, 1)``: for x > 0, z_2 = (1/2 + 3t) x - 3 (1/4 + t) x + 1/4 = 1/4 - x/4; for x <= 0 both
    first-layer neurons are off.  f is the same on every input, the product W_3 W_2[0,0] W_1[0,0] moves from
    1/2 to 1/2 + 3t: not equivalent, so theta is not locally identifiable (the engine used to say inconclusive)."""
    grid = [F(k, 4) for k in range(-40, 41)]
    _same_function_along(FN_PRESERVING, {"W_1[0,0]": 3, "W_1[1,0]": 1}, grid)
    case = parse_case(FN_PRESERVING)
    report = check(case, numeric=False).to_dict()
    assert report["verdict"] == "not-identifiable" and set(report["certificate"]) == {"boundary", "line"}
    line = report["certificate"]["line"]
    assert "probe" not in line and line["nonequivalence"]["invariant"] == "path-products"
    assert line["t0"] is None  # the derivation above holds for every t >= 0: no unit changes side
    assert verify_certificate(case, report, require_claims=True)[0]
    # the hand certificate verifies; a probe cannot show anything since f is unchanged everywhere
    hand = {"delta": {"W_1[0,0]": "3", "W_1[1,0]": "1"}, "t0": None,
            "nonequivalence": {"invariant": "path-products", "path": {"start": 0, "neurons": [0, 0, 0], "output": 0},
                               "coefficients": ["1/2", "3"]}}
    assert verify_certificate(case, {"certificate": {"line": hand}})[0]
    probe_only = {"delta": hand["delta"], "t0": None, "probe": ["2"]}
    valid, msgs = verify_certificate(case, {"certificate": {"line": probe_only}})
    assert not valid and msgs == ["certificate.line.probe: f is constant along the line at the probe point (2); "
                                  "the certificate claims it changes"]


def _fn_preserving_family(seed):
    """Widths [1,2,1,1], zero first-layer biases, a W_2 with p a + q c = -k < 0, a tie of the layer-2 neuron at
    x0 > 0 (b_2 = k x0), samples on both sides: (dW_1[0,0], dW_1[1,0]) = (q, -p) keeps p a + q c, so f."""
    rng = random.Random(seed)
    while True:
        a, c = F(rng.randint(1, 6), rng.randint(1, 4)), F(rng.randint(1, 6), rng.randint(1, 4))
        p, k = F(rng.choice([-3, -2, -1, 1, 2, 3])), F(rng.randint(1, 5), rng.randint(1, 3))
        q = (-k - p * a) / c
        if q != 0:
            break
    x0 = F(rng.randint(2, 8), rng.randint(1, 2))
    X = sorted({x0} | {x0 * F(j, 4) for j in (1, 2, 6, 8)} | {-F(rng.randint(1, 8), rng.randint(1, 3))
                                                              for _ in range(2)})
    s = str
    obj = {"format": "exactident-case/1", "name": f"fp{seed}", "widths": [1, 2, 1, 1],
           "weights": [[[s(a)], [s(c)]], [[s(p), s(q)]], [[s(F(rng.choice([1, 2, 3])))]]],
           "biases": [["0", "0"], [s(k * x0)], ["0"]], "sample": [[s(x)] for x in X]}
    return obj, {"W_1[0,0]": q, "W_1[1,0]": -p}


@pytest.mark.parametrize("seed", range(6))
def test_function_preserving_family_is_not_identifiable(seed):
    obj, delta = _fn_preserving_family(seed)
    _same_function_along(obj, delta, [F(k, 3) for k in range(-30, 31)])
    case = parse_case(obj)
    report = check(case, numeric=False).to_dict()
    assert report["verdict"] == "not-identifiable" and report["n_ties"] == 1
    valid, msgs = verify_certificate(case, report, require_claims=True)
    assert valid, msgs
