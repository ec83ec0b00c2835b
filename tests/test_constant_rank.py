"""Theorem 8's argument beyond the dense ReLU MLP (boundary.constant_rank, verify.constant_rank), and the
two counterexamples of docs/theory.md, "A necessary condition beyond the dense ReLU MLP".

Truth, all independent of the code under test:

- ``alpha_s`` built here by enumerating the paths of the complete layered graph in ``fractions.Fraction``, each
  unit's derivative read off this file's own forward pass (1 on ``z >= 0``, else the fixed slope);
- not-identifiable: an exhaustive search, written here, over short straight lines ``theta + t delta`` (support at
  most 2, first coefficient 1, the second from a small set of rationals): the outputs on ``X`` are compared in
  Fractions at ``L + 2`` small values of ``t`` with the pattern unchanged (so the held-pattern polynomial of degree
  ``<= L`` in ``t`` is constant) and ``f`` must differ at a probe point;
- the counterexamples: sympy Jacobians, ranks over Q, and symmetries checked as identities in ``x`` and ``t``.
"""

from __future__ import annotations

import copy
import itertools
import json
import random
from fractions import Fraction as F

import flint
import numpy as np
import pytest
import sympy as sp

from exactident.boundary.constant_rank import alpha_gram, find_constant_rank, rank_a
from exactident.boundary.rules import GRAPH_RULES
from exactident.model.gamma_free import free_state
from exactident.model.network import Network
from exactident.verify.constant_rank import check_constant_rank, rank_alpha
from exactident.verify.facts import ConstrainedFacts

Q = flint.fmpq


# ------------------------------------------------------------------ a tiny spec format, the test's own forward pass

class Spec:
    """Layers ``(W, b)``: entries an int ``j`` (``theta_j``) or a Fraction (fixed); ``slopes`` per hidden layer
    (a Fraction, or ``("p", j)`` for a PReLU slope ``theta_j``)."""

    def __init__(self, layers, slopes, theta, features):
        self.layers, self.slopes, self.theta, self.features = layers, slopes, [F(t) for t in theta], features

    def dense(self, theta):
        def val(e):
            return theta[e] if isinstance(e, int) else F(e)

        W = [[[val(e) for e in row] for row in Wl] for Wl, _b in self.layers]
        b = [[val(e) for e in bl] for _W, bl in self.layers]
        a = [[theta[s[1]] if isinstance(s, tuple) else F(s) for s in sl] for sl in self.slopes]
        return W, b, a

    def forward(self, theta, x):
        """``(z per layer, output)`` in Fractions."""
        W, b, a = self.dense(theta)
        h, Z = [F(v) for v in x], []
        for l, (Wl, bl) in enumerate(zip(W, b)):
            z = [sum((w * hv for w, hv in zip(row, h)), F(0)) + bi for row, bi in zip(Wl, bl)]
            Z.append(z)
            h = z if l == len(W) - 1 else [zv if zv >= 0 else a[l][v] * zv for v, zv in enumerate(z)]
        return Z, h

    def compiled(self):
        W, b, a = self.dense(self.theta)
        widths = (len(self.layers[0][0][0]),) + tuple(len(Wl) for Wl, _b in self.layers)

        def idx(e):
            return e if isinstance(e, int) else -1

        return Network(
            widths, [flint.fmpq_mat([[Q(v.numerator, v.denominator) for v in row] for row in Wl]) for Wl in W],
            [[Q(v.numerator, v.denominator) for v in bl] for bl in b],
            [np.array([[idx(e) for e in row] for row in Wl], dtype=np.int64) for Wl, _b in self.layers],
            [np.array([idx(e) for e in bl], dtype=np.int64) for _W, bl in self.layers],
            [[Q(v.numerator, v.denominator) for v in al] for al in a],
            [np.array([s[1] if isinstance(s, tuple) else -1 for s in sl], dtype=np.int64) for sl in self.slopes],
            len(self.theta), self.features, [f"t{j}" for j in range(len(self.theta))], [])


def _q(X):
    return [[Q(F(v).numerator, F(v).denominator) for v in x] for x in X]


def _explicit_alpha(spec, X):
    """alpha over the complete layered graph, paths enumerated (paths from layer 0, each hidden layer, beta).

    A fixed slope multiplies the entry (``d`` = 1 or the slope); a PReLU slope is part of the lifting instead, so
    a path's column is split by the set ``S`` of its PReLU units on their negative side at the sample."""
    widths = [len(spec.layers[0][0][0])] + [len(Wl) for Wl, _b in spec.layers]
    L = len(widths) - 1
    _W, _b, a = spec.dense(spec.theta)
    entries = []
    for x in X:
        Z, _ = spec.forward(spec.theta, x)
        row = {("beta",): F(1)}
        for start in range(L):
            for path in itertools.product(*(range(widths[m]) for m in range(start, L))):
                factor, S = (F(x[path[0]]) if start == 0 else F(1)), []
                for m in range(max(start, 1), L):  # hidden layers m on the path
                    v = path[m - start]
                    if Z[m - 1][v] >= 0:
                        continue
                    if isinstance(spec.slopes[m - 1][v], tuple):
                        S.append((m, v))
                    else:
                        factor *= a[m - 1][v]
                row[(start, path, tuple(S))] = factor
        entries.append(row)
    columns = sorted({c for row in entries for c in row}, key=repr)
    return [[row.get(c, F(0)) for c in columns] for row in entries]


def _rank(rows):
    return sp.Matrix(rows).rank() if rows else 0


# ------------------------------------------------------------------ the families

def leaky_mlp(slope=F(1, 2)):
    """1-2-1 leaky ReLU, theta = (u1, u2, b1, b2, w1, w2, c)."""
    return Spec([([[0], [1]], [2, 3]), ([[4, 5]], [6])], [[slope, slope]], [1, 1, 0, -1, 1, 2, 0], ("leaky ReLU",))


def leaky_deep():
    """1-2-2-1 leaky ReLU (slope 1/3)."""
    return Spec([([[0], [1]], [2, 3]), ([[4, 5], [6, 7]], [8, 9]), ([[10, 11]], [12])],
                [[F(1, 3)] * 2, [F(1, 3)] * 2], [1, -1, 1, 2, 1, 1, 2, -1, 1, 0, 1, 1, 0], ("leaky ReLU",))


def conv():
    """Input 3 pixels, one channel of kernel (w1, w2) and bias b shared by 2 ReLU units, then a linear head."""
    z = F(0)
    return Spec([([[0, 1, z], [z, 0, 1]], [2, 2]), ([[3, 4]], [5])], [[F(0), F(0)]], [1, -1, F(1, 2), 1, 2, 0],
                ("convolution",))


def residual():
    """y = head(relu(w x + b) + x): a ReLU unit and a linear carrier (fixed 1) added by fixed 1s, then the head."""
    one = F(1)
    return Spec([([[0], [one]], [1, F(0)]), ([[one, one]], [F(0)]), ([[2]], [3])], [[F(0), F(1)], [F(1)]],
                [2, -1, 3, 0], ("skip connection",))


def prelu():
    """1-2-1 PReLU, one slope parameter per unit: theta = (u1, u2, b1, b2, w1, w2, c, a1, a2)."""
    return Spec([([[0], [1]], [2, 3]), ([[4, 5]], [6])], [[("p", 7), ("p", 8)]],
                [1, 1, 0, -1, 1, 2, 0, F(1, 2), F(1, 3)], ("PReLU",))


def no_bias():
    """1-2-1 leaky ReLU (slope 1/4) without biases in the hidden layer."""
    return Spec([([[0], [1]], [F(0), F(0)]), ([[2, 3]], [4])], [[F(1, 4)] * 2], [1, -2, 1, 3, 0],
                ("leaky ReLU", "linear layer"))


FAMILIES = {
    "leaky": (leaky_mlp, [[2], [3], [4], [5]]),  # every sample has both units active
    "leaky-deep": (leaky_deep, [[3], [4], [5], [6], [7]]),  # one pattern: unit (1, 1) negative, the rest active
    "conv": (conv, [[1, 0, 0], [2, 1, 0], [3, 1, 1], [2, 2, 1], [1, 1, 0], [3, 2, 0]]),  # both units active
    "residual": (residual, [[1], [2], [3], [4]]),  # the ReLU unit active everywhere
    "no-bias": (no_bias, [[1], [2], [3], [4]]),
    "prelu": (prelu, [[-3], [-2], [-1], [2], [3], [4]]),  # two pieces: both units negative, both active
}


def test_alpha_gram_is_the_explicit_alpha():
    """The engine's Gram matrix equals alpha_s alpha_s^T with alpha_s enumerated path by path here, and its rank."""
    rng = random.Random(5)
    for name, (make, X) in FAMILIES.items():
        spec = make()
        for extra in range(3):
            Xs = X + [[F(rng.randint(-6, 6), rng.choice([1, 2])) for _ in X[0]] for _ in range(extra)]
            cn = spec.compiled()
            st = free_state(cn, _q(Xs))
            alpha = _explicit_alpha(spec, Xs)
            gram = sp.Matrix(alpha) * sp.Matrix(alpha).T
            G = alpha_gram(cn, _q(Xs), st.pattern)
            assert [[F(int(G[i, j].p), int(G[i, j].q)) for j in range(len(Xs))] for i in range(len(Xs))] == \
                [[F(int(sp.fraction(gram[i, j])[0]), int(sp.fraction(gram[i, j])[1])) for j in range(len(Xs))]
                 for i in range(len(Xs))], name
            assert rank_a(cn, _q(Xs), st.pattern) == _rank(alpha), name
            assert rank_alpha(ConstrainedFacts.from_network(cn, _q(Xs))) == _rank(alpha), name  # the verifier's


# ------------------------------------------------------------------ the test's exhaustive local search

COEFFS = [F(c, d) for c in range(-3, 4) for d in (1, 2, 3, 4, 6) if c] + [F(0)]


def _same_pattern(spec, theta, theta2, X):
    for x in X:
        Z1, _ = spec.forward(theta, x)
        Z2, _ = spec.forward(theta2, x)
        for l in range(len(Z1) - 1):
            if any((z1 > 0) != (z2 > 0) or (z1 < 0) != (z2 < 0) for z1, z2 in zip(Z1[l], Z2[l])):
                return False
    return True


def line_witness(spec, X, probes, delta):
    """A probe where ``f`` moves along ``theta + t delta`` while the outputs on X stay (small t), or None."""
    theta, L = spec.theta, len(spec.layers)
    ts = [F(1, 1000 * (m + 1)) for m in range(L + 2)]
    base = [spec.forward(theta, x)[1] for x in X]
    moved = [[a + t * d for a, d in zip(theta, delta)] for t in ts]
    if not all(_same_pattern(spec, theta, th, X) and [spec.forward(th, x)[1] for x in X] == base for th in moved):
        return None
    return next((p for p in probes if spec.forward(moved[-1], p)[1] != spec.forward(theta, p)[1]), None)


def exhaustive_witness(spec, X, probes):
    """A line ``theta + t delta`` (support <= 2) with the outputs on X constant for small t and f moved at a probe,
    or None."""
    k = len(spec.theta)
    for i, j in itertools.combinations_with_replacement(range(k), 2):
        for c in (COEFFS if j != i else [F(0)]):
            delta = [F(0)] * k
            delta[i] += 1
            delta[j] += c
            p = line_witness(spec, X, probes, delta)
            if p is not None:
                return delta, p
    return None


#: Witnesses derived by hand where no line of support <= 2 exists.  PReLU on x < 0 and x > 1 only: moving the
#: kink of unit 1 (b1 += t) keeps the right piece if c -= w1 t, and the left piece if also b2 += s t with
#: w1 (a1 - 1) + w2 s (a2 - 1) = 0, i.e. s = -(1)(-1/2) / (2 (-2/3)) = -3/8, and then c -= (w1 + w2 s) t = t/4;
#: the middle piece (0 < x < 1, never sampled) moves.
HAND_LINES = {"prelu": [F(0), F(0), F(1), F(-3, 8), F(0), F(0), F(-1, 4), F(0), F(0)]}


def _probes(n_in):
    pts = [F(v, 2) for v in range(-8, 9)]
    if n_in == 1:
        return [[p] for p in pts]
    rng = random.Random(11)
    return [[rng.choice(pts) for _ in range(n_in)] for _ in range(40)]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_rule_not_identifiable_agrees_with_exhaustive_search(family):
    """On each family the rule proves not-identifiable: its certificate is re-checked by the verifier, and the
    exhaustive search written here (or, for PReLU, a line derived by hand) finds another parameter arbitrarily
    close with the outputs on X and another function (the truth).  rank A = N_L rank alpha from the explicit alpha."""
    make, X = FAMILIES[family]
    spec = make()
    cn = spec.compiled()
    Xq = _q(X)
    assert all(g.fails(cn) is None for g in GRAPH_RULES if g.name == "constant-rank")
    found, why = find_constant_rank(cn, Xq, free_state(cn, Xq), random.Random(0))
    assert found is not None, why
    assert found["rank_a"] == _rank(_explicit_alpha(spec, X)) == found["rank_x"] < len(X)
    assert found["rank_xy"] > found["rank_a"]
    facts = ConstrainedFacts.from_network(cn, Xq)
    assert check_constant_rank(facts, found) == []
    if family in HAND_LINES:
        assert line_witness(spec, X, _probes(len(X[0])), HAND_LINES[family]) is not None
    else:
        assert exhaustive_witness(spec, X, _probes(len(X[0]))) is not None


def test_forged_constant_rank_parts_fail():
    make, X = FAMILIES["leaky"]
    cn = make().compiled()
    Xq = _q(X)
    found, _ = find_constant_rank(cn, Xq, free_state(cn, Xq), random.Random(0))
    facts = ConstrainedFacts.from_network(cn, Xq)
    for change in ({"rank_a": found["rank_a"] + 1}, {"rank_x": found["rank_x"] - 1}, {"rank_xy": found["rank_a"]},
                   {"y": [["3"]]},  # a point in the samples' region: the rank does not rise
                   {"y": [["1"]]},  # on the kink of unit 1 (z = x - 1)
                   {"prime": 4}):
        bad = dict(copy.deepcopy(found), **change)
        assert check_constant_rank(facts, bad), change


def test_hypotheses_fail_where_they_fail():
    """A sample on a kink: no certificate; an identifiable network (rank Gamma_free = rank A = dim_free): no point
    raises the rank, no certificate.  (The network hypothesis holds on every layer graph, PReLU included: the
    PReLU counterexample below checks that the rule certifies nothing there either.)"""
    spec = leaky_mlp()
    cn = spec.compiled()
    tie = _q([[1], [2], [3]])  # z_2(1) = 1 - 1 = 0
    found, why = find_constant_rank(cn, tie, free_state(cn, tie), random.Random(0))
    assert found is None and "kink" in why
    # x = -2, -1, 1/4, 3/4, 2, 3: both units seen on both sides, rank Gamma_free = 5 = dim_free = rank A:
    # identifiable (free-rank), and the rule finds no point raising the rank (nothing to certify there)
    X = [[-2], [-1], [F(1, 4)], [F(3, 4)], [2], [3]]
    found, why = find_constant_rank(cn, _q(X), free_state(cn, _q(X)), random.Random(0))
    assert found is None and _rank(_explicit_alpha(spec, X)) == 5 and "no point y" in why


def test_sample_cap(monkeypatch):
    """Past MAX_GRAM_SAMPLES the rule does not run (the exact Gram rank would be too costly) and says so."""
    import exactident.boundary.constant_rank as constant_rank

    make, X = FAMILIES["leaky"]
    cn = make().compiled()
    monkeypatch.setattr(constant_rank, "MAX_GRAM_SAMPLES", 3)
    found, why = find_constant_rank(cn, _q(X), free_state(cn, _q(X)), random.Random(0))
    assert found is None and "cap of 3" in why


def test_engine_reaches_the_rule_and_the_verifier_accepts():
    """check_constrained tries the rule last; on this 2-2-2-1 leaky network (found by a seeded search) no dead unit,
    submersion or straight line among the candidates settles it, the constant-rank certificate does, and
    verify-certificate's constrained verifier accepts the report."""
    from exactident.check import check_constrained
    from exactident.verify.certificate import verify_constrained

    rng = random.Random(0)
    for _trial in range(400):
        widths = (2, 2, 2, 1)
        layers, j = [], 0
        for l in range(3):
            W = [[j + widths[l] * i + kk for kk in range(widths[l])] for i in range(widths[l + 1])]
            j += widths[l] * widths[l + 1]
            b = list(range(j, j + widths[l + 1]))
            j += widths[l + 1]
            layers.append((W, b))
        theta = [rng.choice([-3, -2, -1, 1, 2, 3]) if m % 3 else F(rng.randint(-3, 3), 2) for m in range(j)]
        spec = Spec(layers, [[F(1, 2)] * 2, [F(1, 2)] * 2], theta, ("leaky ReLU",))
        X = [[F(rng.randint(-6, 6), rng.choice([1, 2, 3])) for _ in range(2)] for _ in range(rng.randint(6, 11))]
        cn = spec.compiled()
        r = check_constrained(cn, _q(X))
        if r.decided_by != "constant-rank":
            continue
        ok, msgs = verify_constrained(cn, _q(X), json.loads(json.dumps(r.to_dict())))
        assert ok, msgs
        rules = {e["rule"]: e["status"] for e in r.to_dict()["rules"]}
        assert rules["constant-rank"] == "decided" and rules["theorem-8"] == "not-applicable"
        part = r.certificate["constant_rank"]
        assert part["rank_a"] == _rank(_explicit_alpha(spec, X)) == part["rank_x"] < len(X)
        return
    pytest.fail("no case reached the constant-rank rule")


# ------------------------------------------------------------------ counterexample 1: PReLU, rank = rank A < dim_free

def _prelu_symbolic():
    u1, u2, b1, b2, w1, w2, c, a1, a2, x = sp.symbols("u1 u2 b1 b2 w1 w2 c a1 a2 x")
    return (u1, u2, b1, b2, w1, w2, c, a1, a2), x


PRELU_THETA = [1, 1, 0, -1, 1, 2, 0, F(1, 2), F(1, 3)]
PRELU_X = [-3, -2, -1, F(1, 4), F(1, 2), F(3, 4), 2, 3, 4]  # three regions, three samples each


def _prelu_f(th, x, sides):
    u1, u2, b1, b2, w1, w2, c, a1, a2 = th
    z1, z2 = u1 * x + b1, u2 * x + b2
    return w1 * (z1 if sides[0] else a1 * z1) + w2 * (z2 if sides[1] else a2 * z2) + c


def test_prelu_counterexample_identifiable_with_rank_equal_rank_a_below_dim_free():
    """f(x) = w1 prelu_{a1}(u1 x + b1) + w2 prelu_{a2}(u2 x + b2) + c at theta = (1, 1, 0, -1, 1, 2, 0, 1/2, 1/3) on
    nine samples, three in each region (x < 0, 0 < x < 1, x > 1).

    - rank Gamma_free = 6 (sympy Jacobian at theta) and rank A~ = 6 for the lifting that carries the PReLU slopes
      (columns (path, set of negative PReLU units): F_X = A~ phi~ exactly), so the rank is constant near theta;
    - counting the two rescalings only, dim_free would be 9 - 2 = 7: rank Gamma_free = rank A~ < 7;
    - yet theta is locally identifiable: the fibre of F_X is a 3-manifold near theta (constant rank), and the
      3-dimensional family (two rescalings, and the trade w_v a_v += t c_v at fixed w_v (1 - a_v), sum_v c_v u_v = 0,
      c -= t sum_v c_v b_v) keeps f for every input (checked here as an identity in x and t on every sign pattern),
      with independent tangents at theta; an immersed 3-manifold inside a 3-manifold is open in it, so every
      theta' near theta with the outputs on X is in the family and realises f.
    The naive analogue "rank Gamma_free = rank A < dim_free => not identifiable", with a count that misses the
    trade, is therefore false; the constant-rank rule (which needs a point y raising the rank) gives no
    certificate. The trade is the slope trade the engine counts in S_H: its dim_free is 9 - 3 = 6 = rank, so it
    says identifiable (rank = dim_free)."""
    syms, x = _prelu_symbolic()
    at = dict(zip(syms, [sp.Rational(F(v).numerator, F(v).denominator) for v in PRELU_THETA]))
    rows = []
    for xv in PRELU_X:
        z1, z2 = F(xv) + 0, F(xv) - 1
        f = _prelu_f(syms, sp.Rational(F(xv).numerator, F(xv).denominator), (z1 >= 0, z2 >= 0))
        rows.append([sp.diff(f, s).subs(at) for s in syms])
    assert sp.Matrix(rows).rank() == 6
    # A~: columns (u1 w1, u1 w1 a1, u2 w2, u2 w2 a2, b1 w1, b1 w1 a1, b2 w2, b2 w2 a2, c)
    u1, u2, b1, b2, w1, w2, c, a1, a2 = syms
    phi = [u1 * w1, u1 * w1 * a1, u2 * w2, u2 * w2 * a2, b1 * w1, b1 * w1 * a1, b2 * w2, b2 * w2 * a2, c]
    A = []
    for xv in PRELU_X:
        s1, s2 = F(xv) >= 0, F(xv) - 1 >= 0
        xs = sp.Rational(F(xv).numerator, F(xv).denominator)
        s1, s2 = int(s1), int(s2)
        row = [xs * s1, xs * (1 - s1), xs * s2, xs * (1 - s2), s1, 1 - s1, s2, 1 - s2, 1]
        assert sp.expand(sum(r * p for r, p in zip(row, phi)) - _prelu_f(syms, xs, (s1, s2))) == 0  # F_X = A~ phi~
        A.append(row)
    assert sp.Matrix(A).rank() == 6
    # the three symmetries keep f identically (every sign pattern), and their tangents at theta are independent
    t = sp.Symbol("t")
    rescale1 = dict(zip(syms, [u1 * sp.exp(t), u2, b1 * sp.exp(t), b2, w1 * sp.exp(-t), w2, c, a1, a2]))
    rescale2 = dict(zip(syms, [u1, u2 * sp.exp(t), b1, b2 * sp.exp(t), w1, w2 * sp.exp(-t), c, a1, a2]))
    # trade: g_v = w_v a_v -> g_v + t c_v with m_v = w_v (1 - a_v) kept; c_v = (u2, -u1) so sum c_v u_v = 0
    g1, g2 = w1 * a1 + t * u2, w2 * a2 - t * u1
    m1, m2 = w1 * (1 - a1), w2 * (1 - a2)
    trade = dict(zip(syms, [u1, u2, b1, b2, g1 + m1, g2 + m2, c - t * (u2 * b1 - u1 * b2), g1 / (g1 + m1),
                            g2 / (g2 + m2)]))
    for flow in (rescale1, rescale2, trade):
        for sides in itertools.product([True, False], repeat=2):
            assert sp.simplify(_prelu_f([flow[s] for s in syms], x, sides) - _prelu_f(syms, x, sides)) == 0
    tangents = [[sp.diff(flow[s], t).subs(t, 0).subs(at) for s in syms] for flow in (rescale1, rescale2, trade)]
    assert sp.Matrix(tangents).rank() == 3 == 9 - 6
    # the engine: never the naive analogue's not-identifiable; with the slope trade in S_H (the three tangents
    # above span the symmetries), dim_free = 9 - 3 = 6 = rank Gamma_free: identifiable
    from exactident.check import check_constrained

    spec = Spec([([[0], [1]], [2, 3]), ([[4, 5]], [6])], [[("p", 7), ("p", 8)]], PRELU_THETA, ("PReLU",))
    r = check_constrained(spec.compiled(), _q([[v] for v in PRELU_X]))
    assert r.dim == 9 - 3 and r.rank_gamma == 6 and r.verdict == "identifiable"
    # and the rule itself finds no witness y: every direction of the fibre is a symmetry
    cn = spec.compiled()
    Xq = _q([[v] for v in PRELU_X])
    found, why = find_constant_rank(cn, Xq, free_state(cn, Xq), random.Random(0))
    assert found is None and "no point y" in why
    # the rule's own rank A~ (Gram route) is the one written out above
    assert rank_a(cn, Xq, free_state(cn, Xq).pattern) == 6 == _rank(_explicit_alpha(spec, [[v] for v in PRELU_X]))


# ------------------------------------------------------------------ counterexample 2: Theorem 8 on the dense expansion

CONV_X = [[-2, 1, 1], [-2, -1, 1], [0, 2, 1], [-3, 1, -3], [3, 0, -1]]


def test_weight_sharing_removes_the_curve_of_the_dense_expansion():
    """The convolution of ``conv()`` (theta = (w1, w2, b, v1, v2, c) = (1, -1, 1/2, 1, 2, 0)) on five points.
    Its dense expansion, the 3-2-1 ReLU MLP with the same values and every weight free, has rank Gamma = rank A = 5
    < dim = 9: Theorem 8 says that MLP is not locally identifiable.  The convolution has rank Gamma_free = 5 =
    6 parameters - 1 channel rescaling = dim_free: identifiable (the immersion argument).  So Theorem 8 cannot be
    read off a layer graph's dense expansion: the ties between entries remove the dense fibre's curve."""
    w1, w2, b, v1, v2, c = sp.symbols("w1 w2 b v1 v2 c")
    dense = sp.symbols("W00 W01 W02 W10 W11 W12 b0 b1 V0 V1 d")
    theta = {w1: 1, w2: -1, b: sp.Rational(1, 2), v1: 1, v2: 2, c: 0}
    tied = [w1, w2, 0, 0, w1, w2, b, b, v1, v2, c]
    at_dense = dict(zip(dense, [sp.sympify(e).subs(theta) for e in tied]))

    def out(p, xv):
        W00, W01, W02, W10, W11, W12, b0, b1, V0, V1, d = p
        z0 = W00 * xv[0] + W01 * xv[1] + W02 * xv[2] + b0
        z1 = W10 * xv[0] + W11 * xv[1] + W12 * xv[2] + b1
        v0, v1 = sp.sympify(z0).subs(at_dense), sp.sympify(z1).subs(at_dense)
        assert v0 != 0 and v1 != 0  # no tie
        s0, s1 = bool(v0 > 0), bool(v1 > 0)
        return V0 * (z0 if s0 else 0) + V1 * (z1 if s1 else 0) + d, (s0, s1)

    J_dense, alpha, J_free = [], [], []
    for xv in CONV_X:
        f, (s0, s1) = out(dense, xv)
        J_dense.append([sp.diff(f, s).subs(at_dense) for s in dense])
        alpha.append([xi * s0 for xi in xv] + [xi * s1 for xi in xv] + [int(s0), int(s1), 1])
        f_tied = f.subs(dict(zip(dense, tied)), simultaneous=True)
        J_free.append([sp.diff(f_tied, s).subs(theta) for s in (w1, w2, b, v1, v2, c)])
    # dense dim = 3*2 + 2*1 + 1 (one fixed edge per hidden neuron pays for its bias) = 9
    assert sp.Matrix(J_dense).rank() == sp.Matrix(alpha).rank() == 5 < 9
    assert sp.Matrix(J_free).rank() == 5 == 6 - 1
    from exactident.check import check_constrained

    spec = conv()
    cn = spec.compiled()
    r = check_constrained(cn, _q(CONV_X))
    assert (r.verdict, r.decided_by, r.dim) == ("identifiable", "free-rank", 5)
    # the constant-rank rule's hypotheses hold (rank Gamma_free = rank A = 5 < n N_L? no: 5 = n N_L) and it finds
    # nothing to certify: rank A = n N_L is the submersion's case, and no point can raise the rank past dim_free
    found, why = find_constant_rank(cn, _q(CONV_X), free_state(cn, _q(CONV_X)), random.Random(0))
    assert found is None and "submersion" in why
