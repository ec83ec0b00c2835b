"""An independent oracle for tiny networks: sympy differentiation and explicit path enumeration.

Nothing here reuses exactident's arithmetic.  For each seeded tiny case:

- ``Gamma_oracle``: the forward expression is built with a sympy Symbol for
  every parameter and the activation pattern fixed at theta (each ReLU is
  multiplication by its 0/1 indicator, computed with Fractions at theta);
  it is differentiated symbolically w.r.t. the free parameters (the fixed
  edges chosen here: largest |weight|, lowest index on ties, SPEC §1), then
  theta is substituted.  Columns are keyed by the SPEC names ``W_l[i,j]`` /
  ``b_l[i]`` and matched to exactident's order by name only.
- ``alpha_oracle``: paths enumerated with ``networkx.all_simple_paths`` on a
  graph built here; entry = ``x_{v_0} prod a`` or ``prod a``, ``beta`` = 1.
- ``phi_oracle``: path products with sympy, ``Dpsi_oracle`` by sympy diff.
- ranks with ``DomainMatrix.rank`` over QQ; the verdict from SPEC §2 (Theorems 8/9).
  Where the theorems leave it ``inconclusive`` and the engine settles it with a
  structural certificate, the certificate is judged by ``structural_oracle``: its
  facts re-derived, theta(t) stepped in Fractions (same outputs on X, different
  path-product multisets).
"""

from __future__ import annotations

import functools

import networkx as nx
import numpy as np
import pytest
import sympy as sp
from _gen import forward, random_case
from structural_oracle import confirm_line, confirm_small_eps_line, mechanism_holds

from exactident.check import check
from exactident.io.case import parse_case
from exactident.model.activation import activation_state, alpha_exact
from exactident.model.fixed_edges import fixed_edges, free_parameters
from exactident.model.gamma import free_columns, gamma_exact
from exactident.model.lifting import dpsi, paths, phi, verify_propositions
from exactident.numeric.float_network import to_float_network, to_float_sample
from exactident.numeric.gamma_free import gamma_float
from exactident.verify.certificate import verify_certificate

# ----------------------------------------------------------------------------- the oracle

def oracle_fixed(W):
    """``{(l, v): k}``: the outgoing edge of largest |weight|, lowest ``k`` on ties (SPEC §1)."""
    out = {}
    for l in range(1, len(W)):
        W_next = W[l]  # W_{l+1}, rows k, columns v
        for v in range(len(W_next[0])):
            best = 0
            for k in range(1, len(W_next)):
                if abs(W_next[k][v]) > abs(W_next[best][v]):
                    best = k
            out[(l, v)] = best
    return out


def symbols_of(widths):
    """Symbols ``W[l][i][j]`` and ``b[l][i]`` (paper layer ``l = 1..L``, stored at ``l - 1``)."""
    Ws = [[[sp.Symbol(f"W_{l}[{i},{j}]") for j in range(widths[l - 1])] for i in range(widths[l])]
          for l in range(1, len(widths))]
    bs = [[sp.Symbol(f"b_{l}[{i}]") for i in range(widths[l])] for l in range(1, len(widths))]
    return Ws, bs


class Oracle:
    def __init__(self, tc, fixed=None, acts=None, lifting=True):
        """``acts[i][l-1][v]`` in {0, 1} overrides the indicators (a tie resolution)."""
        self.tc = tc
        widths, W, b, X = tc.widths, tc.W, tc.b, tc.X
        L = len(widths) - 1
        if acts is None:
            acts = [[[1 if z >= 0 else 0 for z in zl] for zl in forward(W, b, x)[:-1]] for x in X]
        self.fixed = oracle_fixed(W) if fixed is None else fixed
        Ws, bs = symbols_of(widths)
        self.theta = {}
        for l in range(1, L + 1):
            for i in range(widths[l]):
                self.theta[bs[l - 1][i]] = sp.Rational(b[l - 1][i].numerator, b[l - 1][i].denominator)
                for j in range(widths[l - 1]):
                    q = W[l - 1][i][j]
                    self.theta[Ws[l - 1][i][j]] = sp.Rational(q.numerator, q.denominator)
        fixed_syms = {Ws[l][k][v] for (l, v), k in self.fixed.items()}  # W_{l+1}[k, v]
        self.free = [s for s in self.theta if s not in fixed_syms]
        self.dim = len(self.free)
        # Gamma: rows i*N_L + k, columns keyed by symbol name.
        rows = []
        self.outputs = []
        for x, a in zip(X, acts):
            zs = forward(W, b, x)
            h = [sp.Rational(v.numerator, v.denominator) for v in x]
            for l in range(1, L + 1):
                z = [sum((Ws[l - 1][i][j] * h[j] for j in range(len(h))), sp.Integer(0)) + bs[l - 1][i]
                     for i in range(widths[l])]
                if l < L:
                    h = [z[i] * a[l - 1][i] for i in range(widths[l])]
            for k in range(widths[-1]):
                rows.append([sp.diff(z[k], s).subs(self.theta) for s in self.free])
                self.outputs.append(sp.Rational(zs[-1][k].numerator, zs[-1][k].denominator))
        self.gamma = sp.Matrix(len(rows), self.dim, [e for r in rows for e in r])
        self.names = [s.name for s in self.free]
        # alpha by explicit path enumeration on a graph built here.
        G = nx.DiGraph()
        for l in range(L):
            G.add_nodes_from((l, v) for v in range(widths[l]))
        for l in range(1, L):
            G.add_edges_from(((l - 1, j), (l, i)) for i in range(widths[l]) for j in range(widths[l - 1]))
        targets = [(L - 1, v) for v in range(widths[L - 1])]
        self.paths = []
        for l in range(L):
            for v in range(widths[l]):
                src = (l, v)
                if l == L - 1:
                    self.paths.append((l, (v,)))
                    continue
                for t in targets:
                    for p in nx.all_simple_paths(G, src, t):
                        self.paths.append((l, tuple(node[1] for node in p)))
        self.paths.append((L, ()))
        arows = []
        for x, a in zip(X, acts):
            row = []
            for l, vs in self.paths:
                if l == L:
                    row.append(sp.Integer(1))
                    continue
                val = sp.Integer(1)
                for m, v in enumerate(vs, start=l):
                    if m >= 1:
                        val *= a[m - 1][v]
                if l == 0:
                    val *= sp.Rational(x[vs[0]].numerator, x[vs[0]].denominator)
                row.append(val)
            arows.append(row)
        self.alpha = sp.Matrix(len(X), len(self.paths), [e for r in arows for e in r])
        if lifting:
            self._lifting(widths, Ws, bs)

    def _lifting(self, widths, Ws, bs):
        """phi with symbols, then Dpsi by differentiation (independent of the pattern)."""
        L = len(widths) - 1
        N_L = widths[-1]
        phis = []
        for l, vs in self.paths:
            for k in range(N_L):
                if l == L:
                    phis.append(bs[L - 1][k])
                    continue
                e = bs[l - 1][vs[0]] if l >= 1 else sp.Integer(1)
                for m in range(1, len(vs)):
                    e *= Ws[l + m - 1][vs[m]][vs[m - 1]]
                e *= Ws[L - 1][k][vs[-1]]
                phis.append(e)
        self.phi = sp.Matrix(len(self.paths), N_L, [e.subs(self.theta) for e in phis])
        self.dpsi = sp.Matrix(len(phis), self.dim, [sp.diff(e, s).subs(self.theta) for e in phis for s in self.free])

    @staticmethod
    def rank(M: sp.Matrix) -> int:
        if M.rows == 0 or M.cols == 0:
            return 0
        return M.to_DM().convert_to(sp.QQ).rank()

    def ranks(self):
        r_gamma = self.rank(self.gamma)
        r_alpha = self.rank(self.alpha) if self.alpha.rows else 0
        return r_gamma, self.tc.widths[-1] * r_alpha

    def verdict(self):
        r_gamma, r_a = self.ranks()
        if r_gamma == self.dim:
            return "identifiable"
        if r_gamma == r_a:
            return "not-identifiable"
        return "inconclusive"


def to_sympy(M) -> sp.Matrix:
    """fmpq_mat -> sympy Matrix of Rationals (only to compare)."""
    return sp.Matrix(M.nrows(), M.ncols(), [sp.Rational(int(q.p), int(q.q)) for q in M.entries()])


def kron_identity(A: sp.Matrix, n: int) -> sp.Matrix:
    return sp.kronecker_product(A, sp.eye(n))


# ----------------------------------------------------------------------------- the cases

WIDTHS = [(1, 1, 1), (2, 2, 1), (2, 3, 2), (1, 2, 2, 1), (2, 2, 2, 2), (3, 2)]


def _cases():
    out = []
    for widths in WIDTHS:
        dim = sum(widths[l] * widths[l + 1] for l in range(len(widths) - 1)) + widths[-1]
        n_big = -(-dim // widths[-1]) + 2  # enough rows for rank dim to be possible
        for seed, n, rational in [(1, n_big, False), (2, n_big, True), (3, max(1, n_big // 2), False),
                                  (4, n_big + 3, True)]:
            out.append(pytest.param(widths, seed, n, rational,
                                    id=f"{'-'.join(map(str, widths))}-s{seed}-n{n}{'-q' if rational else ''}"))
    return out


CASES = _cases()


@functools.cache
def _build(widths, seed, n, rational):
    """The case and its oracle, built once per parameter set (sympy is the slow part)."""
    tc = random_case(widths, seed * 7919 + sum(widths), n, rational=rational)
    case = parse_case(tc.obj())
    return tc, case, Oracle(tc)


@pytest.mark.parametrize("widths,seed,n,rational", CASES)
def test_engine_matches_oracle(widths, seed, n, rational):
    _tc, case, orc = _build(widths, seed, n, rational)
    net, X = case.network, case.X
    fixed = fixed_edges(net)
    assert dict(fixed.s_max) == orc.fixed
    params = free_parameters(net, fixed)
    names = [p.name for p in params]
    assert sorted(names) == sorted(orc.names) and len(names) == net.dim == orc.dim
    state = activation_state(net, X)
    assert state.ties == []
    G = to_sympy(gamma_exact(net, X, state.Z, state.pattern, fixed))
    # reorder the oracle's columns into exactident's order, by name
    order = [orc.names.index(nm) for nm in names]
    G_orc = orc.gamma.extract(list(range(orc.gamma.rows)), order)
    assert G.shape == G_orc.shape == (n * widths[-1], net.dim)
    assert G_orc == G
    # alpha: same path set, same entries once the columns are matched
    code_paths = paths(widths)
    assert sorted(code_paths) == sorted(orc.paths)
    A = to_sympy(alpha_exact(state.pattern, X))
    A_orc = orc.alpha.extract(list(range(n)), [orc.paths.index(p) for p in code_paths])
    assert A_orc == A
    # ranks and verdict
    r_gamma, r_a = orc.ranks()
    rep = check(case, numeric=False, all_ranks=True)
    assert (rep.rank_gamma, rep.rank_a, rep.dim) == (r_gamma, r_a, orc.dim)
    if rep.decided_by in ("theorem-9", "theorem-8"):
        assert rep.verdict == orc.verdict()
    else:  # the theorems leave a gap; a structural certificate or a straight line closes it
        report = rep.to_dict()
        cert = report["certificate"]
        assert orc.verdict() == "inconclusive" and rep.verdict == "not-identifiable"
        if rep.decided_by == "line":
            assert "structural" not in cert
            confirm_small_eps_line(_tc.obj(), report)
        else:
            assert rep.decided_by == cert["structural"]["mechanism"]
            assert mechanism_holds(_tc.obj(), cert["structural"], cert["line"]["delta"])
            confirm_line(_tc.obj(), report)
        assert verify_certificate(case, report, require_claims=True)[0]
    assert rep.cs == (r_gamma == orc.dim)
    assert rep.on_boundary is False and rep.n_ties == 0 and rep.degenerate is False


@pytest.mark.parametrize("widths,seed,n,rational", CASES)
def test_propositions_1_and_10_with_independent_lifting(widths, seed, n, rational):
    _tc, case, orc = _build(widths, seed, n, rational)
    # Prop 1: f_theta(X) = alpha phi (both sides computed here)
    f = sp.Matrix(n, widths[-1], orc.outputs)
    assert orc.alpha * orc.phi == f
    # Prop 10: Gamma = (alpha ⊗ I_{N_L}) Dpsi (rows i*N_L + k, p*N_L + k)
    assert kron_identity(orc.alpha, widths[-1]) * orc.dpsi == orc.gamma
    # exactident's phi / Dpsi equal the oracle's (rows and columns matched by key)
    net = case.network
    fixed = fixed_edges(net)
    code_paths = paths(widths)
    prow = [orc.paths.index(p) for p in code_paths]
    assert to_sympy(phi(net)) == orc.phi.extract(prow, list(range(widths[-1])))
    names = [p.name for p in free_parameters(net, fixed)]
    N_L = widths[-1]
    drows = [r * N_L + k for r in prow for k in range(N_L)]
    assert to_sympy(dpsi(net, fixed)) == orc.dpsi.extract(drows, [orc.names.index(nm) for nm in names])
    # and the library's own check passes (it raises InvariantViolation otherwise)
    state = activation_state(net, case.X)
    verify_propositions(net, case.X, state, fixed)


@pytest.mark.parametrize("widths,seed,n,rational", CASES)
def test_float_gamma_matches_exact(widths, seed, n, rational):
    _tc, case, orc = _build(widths, seed, n, rational)
    net = case.network
    fixed = fixed_edges(net)
    Gf = gamma_float(to_float_network(net), to_float_sample(case.X, widths[0]), fixed, free_columns(net, fixed))
    order = [orc.names.index(p.name) for p in free_parameters(net, fixed)]
    G_orc = np.array(orc.gamma.extract(list(range(orc.gamma.rows)), order).tolist(), dtype=float)
    scale = max(1.0, float(np.abs(G_orc).max()))
    assert Gf.shape == G_orc.shape
    assert np.abs(Gf - G_orc).max() <= 1e-12 * scale


def test_oracle_respects_a_non_default_fixed_edge():
    """With the other outgoing edge fixed, the oracle and the engine still agree (names differ)."""
    tc = random_case((1, 2, 2), 11, 6, nonzero_weights=True)
    default = oracle_fixed(tc.W)
    other = {key: 1 - k for key, k in default.items()}
    orc = Oracle(tc, fixed=other)
    case = parse_case(tc.obj())
    rep = check(case, numeric=False, all_ranks=True, fixed_choice=other)
    assert (rep.rank_gamma, rep.rank_a) == orc.ranks()
    fixed = fixed_edges(case.network, other)
    names = [p.name for p in free_parameters(case.network, fixed)]
    assert sorted(names) == sorted(orc.names)
    state = activation_state(case.network, case.X)
    G = to_sympy(gamma_exact(case.network, case.X, state.Z, state.pattern, fixed))
    assert orc.gamma.extract(list(range(orc.gamma.rows)), [orc.names.index(nm) for nm in names]) == G


def test_oracle_table_covers_both_theorems():
    """The seeded table is not trivial: it reaches Theorem 9, Theorem 8 and the gap between them."""
    verdicts = set()
    for param in CASES:
        widths, seed, n, rational = param.values
        verdicts.add(_build(widths, seed, n, rational)[2].verdict())
    assert verdicts == {"identifiable", "not-identifiable", "inconclusive"}


# ----------------------------------------------------------------------------- ties: every resolution

def _own_ties(tc):
    return [(i, l + 1, v) for i, x in enumerate(tc.X) for l, z in enumerate(forward(tc.W, tc.b, x)[:-1])
            for v, val in enumerate(z) if val == 0]


# (widths, seed): seeded draws with 1..4 ties, several in layer 2 (found by _own_ties)
TIED = [((1, 2, 2, 1), 1), ((1, 2, 2, 1), 4), ((2, 2, 2, 2), 1), ((2, 2, 2, 2), 11), ((1, 1, 1, 1), 4),
        ((1, 1, 1, 1), 5)]


@pytest.mark.parametrize("widths,seed", TIED, ids=[f"{'-'.join(map(str, w))}-s{s}" for w, s in TIED])
def test_every_tie_resolution_matches_oracle(widths, seed):
    """Gamma(s) and alpha(s) for each resolution s of the ties, incl. ties in deeper layers.

    At a tie h = relu(0) = 0 whichever side, so only the derivative factor changes; the
    oracle multiplies the symbolic pre-activation by the resolved 0/1 indicator.
    """
    from itertools import product

    from exactident.model.activation import resolve_ties

    tc = random_case(widths, seed, 5, allow_ties=True)
    ties = _own_ties(tc)
    assert 1 <= len(ties) <= 4
    case = parse_case(tc.obj())
    net, X = case.network, case.X
    st = activation_state(net, X)
    assert [(t.i, t.l, t.v) for t in st.ties] == ties
    fixed = fixed_edges(net)
    names = [p.name for p in free_parameters(net, fixed)]
    base = [[[1 if z >= 0 else 0 for z in zl] for zl in forward(tc.W, tc.b, x)[:-1]] for x in tc.X]
    for sides in product([True, False], repeat=len(ties)):
        acts = [[list(row) for row in a] for a in base]
        for (i, l, v), side in zip(ties, sides):
            acts[i][l - 1][v] = int(side)
        orc = Oracle(tc, acts=acts, lifting=False)
        pattern = resolve_ties(st.pattern, st.ties, sides)
        G = to_sympy(gamma_exact(net, X, st.Z, pattern, fixed))
        assert orc.gamma.extract(list(range(orc.gamma.rows)), [orc.names.index(nm) for nm in names]) == G
        A = to_sympy(alpha_exact(pattern, X))
        assert orc.alpha.extract(list(range(len(X))), [orc.paths.index(p) for p in paths(widths)]) == A
        assert exact_rank(gamma_exact(net, X, st.Z, pattern, fixed)) == orc.ranks()[0]


def exact_rank(M):
    from exactident.linalg import exact

    return exact.rank(M)


@pytest.mark.parametrize("widths,seed,n,rational", CASES[::3])
def test_gram_route_gives_rank_alpha(widths, seed, n, rational, monkeypatch):
    """rank(alpha alpha^T) = rank(alpha) over Q; check's Gram fallback agrees with the oracle."""
    import sys

    from exactident.model.activation import alpha_gram

    _tc, case, orc = _build(widths, seed, n, rational)
    st = activation_state(case.network, case.X)
    r_alpha = orc.ranks()[1] // widths[-1]
    assert exact_rank(alpha_gram(st.pattern, case.X)) == r_alpha
    check_mod = sys.modules["exactident.check.dense_route"]  # the MLP stages (rank_alpha)
    monkeypatch.setattr(check_mod, "MAX_EXPLICIT_ALPHA", 0)  # force the Gram route
    assert check_mod.rank_alpha(st.pattern, case.X, widths) == r_alpha
