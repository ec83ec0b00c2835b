"""The one exact Gamma builder (model.backprop) against independent derivatives, entry by entry.

Truths written here, sharing nothing with the builder:

- a Fraction backpropagation, one sample at a time, over the full parameter vector (per layer
  ``W_l`` row-major then ``b_l``), the fixed edges' columns dropped by ``FixedEdges.is_fixed``
  (the convention of Prop. 10: one fixed edge per hidden neuron);
- for a compiled network, the same over its dense entries, summed per tied parameter, plus the
  slope columns ``d f / d h_v * min(z_v, 0)``;
- sympy's ``diff`` of ``f`` written symbolically (the pattern held fixed) on small nets.

Every MLP case under cases/ small enough for Fractions, and random small nets (with and without
ties resolved either way), exact and mod p: ``gamma_exact``, ``gamma_mod_p``, ``gamma_free_exact``
and ``gamma_free_mod_p`` (dense route and tied route) give the same entries as the truth.
"""

from __future__ import annotations

import glob
import os
import random
from fractions import Fraction

import flint
import pytest
import sympy as sp
from constrained_oracle import random_constrained, random_sample

from exactident.io.case import load_case
from exactident.linalg.modular import random_primes
from exactident.model import backprop
from exactident.model.activation import activation_state
from exactident.model.fixed_edges import FixedEdges, fixed_edges
from exactident.model.gamma import gamma_exact
from exactident.model.gamma_free import free_data_denominator, free_state, gamma_free_exact, gamma_free_mod_p
from exactident.model.gamma_modular import gamma_mod_p
from exactident.model.integer_forward import data_denominator
from exactident.model.network import Network

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def F(v) -> Fraction:
    v = flint.fmpq(v)
    return Fraction(int(v.p), int(v.q))


def fraction_gamma(widths, W, b, slopes, X, pattern):
    """Rows ``i N_L + k``: ``d f_k(x^i)`` w.r.t. every dense entry (per layer W row-major, b), and
    w.r.t. every hidden unit's slope (``slope_cols[l-1][row][v]``), by Fraction backprop."""
    L = len(widths) - 1
    dense, slope_cols = [], [[] for _ in range(L - 1)]
    for i, x in enumerate(X):
        h, z_all = [[F(v) for v in x]], []
        for l in range(1, L + 1):
            z = [sum((W[l - 1][u][j] * h[-1][j] for j in range(widths[l - 1])), Fraction(0)) + b[l - 1][u]
                 for u in range(widths[l])]
            z_all.append(z)
            if l < L:
                h.append([z[u] if pattern[l - 1][i][u] else slopes[l - 1][u] * z[u] for u in range(widths[l])])
        for k in range(widths[-1]):
            delta = [Fraction(int(u == k)) for u in range(widths[-1])]  # d f_k / d z_L
            per_layer, per_slope = {}, {}
            for l in range(L, 0, -1):
                per_layer[l] = [delta[u] * h[l - 1][j] for u in range(widths[l]) for j in range(widths[l - 1])] + delta
                if l > 1:
                    g = [sum((delta[u] * W[l - 1][u][j] for u in range(widths[l])), Fraction(0))
                         for j in range(widths[l - 1])]
                    zp = z_all[l - 2]
                    per_slope[l - 1] = [g[v] * (0 if pattern[l - 2][i][v] else zp[v]) for v in range(widths[l - 1])]
                    delta = [g[v] * (1 if pattern[l - 2][i][v] else slopes[l - 2][v]) for v in range(widths[l - 1])]
            dense.append([c for l in range(1, L + 1) for c in per_layer[l]])
            for l in range(1, L):
                slope_cols[l - 1].append(per_slope[l])
    return dense, slope_cols


def mlp_truth(net, X, pattern, fixed):
    """The MLP's Gamma in Fractions: dense columns minus the fixed edges (slopes 0)."""
    W = [[[F(v) for v in row] for row in M.table()] for M in net.W]
    b = [[F(v) for v in bl] for bl in net.b]
    slopes = [[Fraction(0)] * net.widths[l] for l in range(1, net.L)]
    dense, _ = fraction_gamma(net.widths, W, b, slopes, X, pattern)
    keep = []
    for l in range(1, net.L + 1):
        keep += [not fixed.is_fixed(l, i, j) for i in range(net.widths[l]) for j in range(net.widths[l - 1])]
        keep += [True] * net.widths[l]
    return [[c for c, k in zip(row, keep) if k] for row in dense]


def compiled_truth(cn, X, pattern):
    """A compiled network's Gamma_free in Fractions: dense entries summed per parameter, slope columns."""
    W = [[[F(v) for v in row] for row in M.table()] for M in cn.W]
    b = [[F(v) for v in bl] for bl in cn.b]
    slopes = [[F(v) for v in a] for a in cn.negative_slope]
    dense, slope_cols = fraction_gamma(cn.widths, W, b, slopes, X, pattern)
    owner = []
    for l in range(1, cn.L + 1):
        owner += [int(cn.W_index[l - 1][i, j]) for i in range(cn.widths[l]) for j in range(cn.widths[l - 1])]
        owner += [int(cn.b_index[l - 1][i]) for i in range(cn.widths[l])]
    out = []
    for r, row in enumerate(dense):
        g = [Fraction(0)] * cn.n_params
        for c, j in zip(row, owner):
            if j >= 0:
                g[j] += c
        for l in range(1, cn.L):
            for v in range(cn.widths[l]):
                j = int(cn.slope_index[l - 1][v])
                if j >= 0:
                    g[j] += slope_cols[l - 1][r][v]
        out.append(g)
    return out


def as_fractions(G: flint.fmpq_mat) -> list[list[Fraction]]:
    return [[F(v) for v in row] for row in G.table()]


def mod_p(rows, p):
    return [[c.numerator * pow(c.denominator, -1, p) % p for c in row] for row in rows]


def _q(rng, dyadic):
    if dyadic:  # a float64 draw, converted exactly (huge power-of-two denominators)
        f = Fraction(rng.gauss(0, 1))
        return flint.fmpq(f.numerator, f.denominator)
    return flint.fmpq(rng.randint(-6, 6), rng.choice([1, 2, 3, 5]))


def random_mlp(seed):
    rng = random.Random(seed)
    dyadic = seed % 4 == 0
    L = rng.randint(1, 3)
    w = tuple(rng.randint(1, 3) for _ in range(L + 1))
    W = [flint.fmpq_mat(w[l + 1], w[l], [_q(rng, dyadic) for _ in range(w[l] * w[l + 1])]) for l in range(L)]
    b = [[_q(rng, dyadic) for _ in range(w[l + 1])] for l in range(L)]
    X = [[_q(rng, dyadic) for _ in range(w[0])] for _ in range(rng.randint(0, 6))]
    if seed % 5 == 1 and X and L >= 2:  # a tie: sample 0 on the zero set of unit (1, 0)
        b[0][0] = -sum((c * v for c, v in zip(W[0].table()[0], X[0])), flint.fmpq(0))
    return Network(w, W, b), X


def _small_cases():
    """``(plain, compiled)``: the MLP cases and the layer-graph cases under cases/ small enough for Fractions."""
    plain, compiled = [], []
    for path in sorted(glob.glob(os.path.join(ROOT, "cases", "**", "*.json"), recursive=True)):
        try:
            case = load_case(path)
            cn = case.compiled
        except Exception:  # manifests and deliberately broken files are not cases
            continue
        rows = len(case.X) * cn.widths[-1]
        if case.is_plain and rows * case.network.dim <= 100_000:
            plain.append(pytest.param(case, id=os.path.relpath(path, ROOT)))
        elif not case.is_plain and rows * sum(w * (v + 1) for v, w in zip(cn.widths, cn.widths[1:])) <= 60_000:
            compiled.append(pytest.param(case, id=os.path.relpath(path, ROOT)))
    return plain, compiled


MLP_CASES, COMPILED_CASES = _small_cases()


def _patterns(st):
    """The ``>= 0`` pattern, and (when there are ties) every tie resolved inactive."""
    yield st.pattern
    if st.ties:
        pat = [p.copy() for p in st.pattern]
        for t in st.ties:
            pat[t.l - 1][t.i, t.v] = False
        yield pat


def _check_mlp(net, X, seed):
    st = activation_state(net, X)
    fixed = fixed_edges(net)
    avoid = data_denominator(net, X)
    p = random_primes(1, avoid, random.Random(seed))[0]
    for pattern in _patterns(st):
        truth = mlp_truth(net, X, pattern, fixed)
        G = gamma_exact(net, X, st.Z, pattern, fixed)
        assert (G.nrows(), G.ncols()) == (len(X) * net.widths[-1], net.dim)
        assert as_fractions(G) == truth
        assert gamma_mod_p(net, X, pattern, fixed, p, avoid).tolist() == mod_p(truth, p)


def test_the_shipped_cases_are_found():
    assert len(MLP_CASES) >= 300 and len(COMPILED_CASES) >= 5


@pytest.mark.parametrize("case", MLP_CASES)
def test_mlp_gamma_on_every_small_case_equals_the_fraction_backprop(case):
    _check_mlp(case.network, case.X, 1)


@pytest.mark.parametrize("seed", range(40))
def test_mlp_gamma_on_random_nets_equals_the_fraction_backprop(seed):
    net, X = random_mlp(seed)
    _check_mlp(net, X, seed)


@pytest.mark.parametrize("seed", range(6))
def test_mlp_gamma_equals_sympy_diff(seed):
    """f written symbolically in every weight and bias (pattern held fixed), differentiated by sympy."""
    rng = random.Random(100 + seed)
    w = (2, 3, 2, 1) if seed % 2 else (2, 2, 2)
    L = len(w) - 1
    net = Network(w, [flint.fmpq_mat(w[l + 1], w[l], [_q(rng, False) for _ in range(w[l] * w[l + 1])])
                      for l in range(L)], [[_q(rng, False) for _ in range(w[l + 1])] for l in range(L)])
    X = [[_q(rng, False) for _ in range(w[0])] for _ in range(4)]
    st = activation_state(net, X)
    fixed = fixed_edges(net)
    syms, values, cols = [], {}, []
    Ws, bs = [], []
    for l in range(1, L + 1):
        M = sp.zeros(w[l], w[l - 1])
        for i in range(w[l]):
            for j in range(w[l - 1]):
                s = sp.Symbol(f"W{l}_{i}_{j}")
                M[i, j] = s
                values[s] = sp.Rational(*map(int, (net.W[l - 1][i, j].p, net.W[l - 1][i, j].q)))
                if not fixed.is_fixed(l, i, j):
                    cols.append(s)
        Ws.append(M)
        bv = sp.Matrix([sp.Symbol(f"b{l}_{i}") for i in range(w[l])])
        for i in range(w[l]):
            values[bv[i]] = sp.Rational(int(net.b[l - 1][i].p), int(net.b[l - 1][i].q))
            cols.append(bv[i])
        bs.append(bv)
        syms += list(M) + list(bv)
    rows = []
    for i, x in enumerate(X):
        h = sp.Matrix([sp.Rational(int(v.p), int(v.q)) for v in x])
        for l in range(1, L + 1):
            z = Ws[l - 1] * h + bs[l - 1]
            h = z if l == L else sp.Matrix([z[u] * int(st.pattern[l - 1][i, u]) for u in range(w[l])])
        rows += [[sp.diff(h[k], c).subs(values) for c in cols] for k in range(w[-1])]
    G = gamma_exact(net, X, st.Z, st.pattern, fixed)
    assert [[sp.Rational(int(v.p), int(v.q)) for v in row] for row in G.table()] == rows


@pytest.mark.parametrize("seed", range(30))
def test_compiled_gamma_free_equals_the_fraction_truth(seed):
    """Tied weights, fixed entries, leaky and free (PReLU) slopes: the tied route, exact and mod p."""
    cn = random_constrained(seed)
    X = random_sample(seed, 4, cn.widths[0], ties_with=cn)
    st = free_state(cn, X)
    p = random_primes(1, free_data_denominator(cn, X), random.Random(seed))[0]
    for pattern in [st.pattern] + ([[m.copy() for m in st.pattern]] if st.ties else []):
        for i, l, v in st.ties[:1]:
            pattern[l - 1][i, v] = False
        truth = compiled_truth(cn, X, pattern)
        assert as_fractions(gamma_free_exact(cn, X, pattern)) == truth
        assert gamma_free_mod_p(cn, X, pattern, p).tolist() == mod_p(truth, p)


@pytest.mark.parametrize("case", COMPILED_CASES)
def test_compiled_gamma_free_on_every_small_layer_graph_case_equals_the_fraction_truth(case):
    cn, X = case.compiled, case.X
    st = free_state(cn, X)
    p = random_primes(1, free_data_denominator(cn, X), random.Random(2))[0]
    truth = compiled_truth(cn, X, st.pattern)
    assert as_fractions(gamma_free_exact(cn, X, st.pattern)) == truth
    assert gamma_free_mod_p(cn, X, st.pattern, p).tolist() == mod_p(truth, p)


@pytest.mark.parametrize("seed", range(20))
def test_the_route_is_chosen_by_structure_and_both_routes_agree(seed):
    """A compiled MLP (T = I, slopes 0) takes the dense route like the plain one; forcing the tied
    route on the same layout gives the same matrix; a leaky slope sends it to the tied route."""
    net, X = random_mlp(seed)
    cn = net
    st = activation_state(net, X)
    lay = backprop.layout(cn)
    assert lay.dense is not None and lay.dense.tolist() == list(range(lay.n_params))
    truth = mlp_truth(net, X, st.pattern, FixedEdges({}))  # no fixed edge: every entry free
    assert as_fractions(gamma_free_exact(cn, X, st.pattern)) == truth
    vals = backprop._exact_values(cn, X)
    tied = backprop.Layout(lay.widths, lay.W_index, lay.b_index, lay.slope_index, lay.n_params)
    tied.dense = None
    out = backprop.gamma_free_columns(tied, *vals, st.pattern)
    assert [[F(v) for v in row] for row in out.tolist()] == truth
    p = random_primes(1, data_denominator(net, X), random.Random(seed))[0]
    res = backprop._modular_values(cn, X, p, None)
    assert backprop.gamma_free_columns(tied, *res, st.pattern, p).tolist() == mod_p(truth, p)
    if net.L >= 2:
        cn.negative_slope[0][0] = flint.fmpq(1, 10)
        leaky = backprop._exact_values(cn, X)
        assert backprop.layout(cn).dense is not None  # T still selects, but a slope is not 0: tied route
        want = compiled_truth(cn, X, st.pattern)
        assert [[F(v) for v in row] for row in backprop.gamma_free_columns(lay, *leaky, st.pattern).tolist()] == want


@pytest.mark.parametrize("seed", range(12))
def test_dense_route_with_fixed_biases_and_edges_equals_the_fraction_truth(seed):
    """``T`` selecting entries in order with some weights *and biases* fixed (not the MLP's convention):
    still the dense route, its columns those of the full Fraction Jacobian at the free positions."""
    net, X = random_mlp(seed)
    rng = random.Random(seed)
    total = sum(net.widths[l] * (net.widths[l - 1] + 1) for l in range(1, net.L + 1))
    free = sorted(rng.sample(range(total), rng.randint(0, total)))
    st = activation_state(net, X)
    assert backprop.layout(net, free).dense.tolist() == free
    slopes = [[Fraction(0)] * net.widths[l] for l in range(1, net.L)]
    W = [[[F(v) for v in row] for row in M.table()] for M in net.W]
    b = [[F(v) for v in bl] for bl in net.b]
    dense, _ = fraction_gamma(net.widths, W, b, slopes, X, st.pattern)
    truth = [[row[c] for c in free] for row in dense]
    assert as_fractions(backprop.jacobian_exact(net, X, st.pattern, free)) == truth
    p = random_primes(1, data_denominator(net, X), random.Random(seed))[0]
    assert backprop.jacobian_mod_p(net, X, st.pattern, p, None, free).tolist() == mod_p(truth, p)


@pytest.mark.parametrize("seed", range(8))
def test_scaled_rows_taken_over_the_full_denominator_reduce_like_the_rows_alone(seed):
    """``Scaled.take`` / ``ModularData.take``: rows of the whole sample's scaling, mod p, equal the rows'
    values mod p by Python's own modular arithmetic (``v = a / q`` is ``a q^-1``), and ``Gamma mod p`` of the
    taken rows equals that of the rows scaled on their own."""
    rng = random.Random(seed)
    net = random_mlp(seed)[0]
    X = [[flint.fmpq(rng.randint(-2**80, 2**80), rng.choice([1, 3, 7, 2**40 + 15])) for _ in range(net.widths[0])]
         for _ in range(rng.randint(2, 6))]
    S = sorted(rng.sample(range(len(X)), rng.randint(1, len(X))))
    data = backprop.ModularData(net, X)
    avoid = data_denominator(net, X)
    for p in random_primes(2, avoid, rng):
        want = [[int(v.p) * pow(int(v.q), -1, p) % p for v in X[i]] for i in S]
        assert data.X.take(S).mod(p).tolist() == want
        pattern = activation_state(net, [X[i] for i in S]).pattern
        assert (gamma_mod_p(net, [X[i] for i in S], pattern, fixed_edges(net), p, avoid, data.take(S)) ==
                gamma_mod_p(net, [X[i] for i in S], pattern, fixed_edges(net), p, avoid)).all()
