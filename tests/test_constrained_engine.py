"""The constrained engine: Gamma_free, S_H / dim_free and the verdict, against a sympy oracle and hand derivations."""

from __future__ import annotations

import random
from itertools import product
from types import SimpleNamespace

import flint
import numpy as np
import pytest
from constrained_oracle import oracle_dim_free, oracle_rank, random_constrained, random_sample

from exactident.boundary.dead_units import check_constant_units, check_dead_units
from exactident.check import check, check_constrained
from exactident.io.case import parse_case
from exactident.linalg import exact
from exactident.model.gamma_free import free_state, gamma_free_exact, gamma_free_mod_p, resolve_ties
from exactident.model.network import Network
from exactident.model.symmetry import rescaling_symmetry
from exactident.verify.schema import validate_report

F = flint.fmpq
P = 1_000_003


def _mat(rows):
    return flint.fmpq_mat([[F(v) for v in row] for row in rows])


def _cn(widths, W, b, WI, bI, slopes, sI, k, features=("fixed weights",), names=()):
    return Network(tuple(widths), [_mat(M) for M in W], [[F(v) for v in bb] for bb in b],
                              [np.array(I, dtype=np.int64).reshape(len(M), -1) for I, M in zip(WI, W)],
                              [np.array(I, dtype=np.int64) for I in bI], [[F(v) for v in a] for a in slopes],
                              [np.array(I, dtype=np.int64) for I in sI], k, tuple(features), list(names))


def _X(rows):
    return [[F(v) for v in row] for row in rows]


def _residues(G: flint.fmpq_mat, p: int) -> np.ndarray:
    return np.array([int(v.p) * pow(int(v.q), -1, p) % p for v in G.entries()],
                    dtype=np.int64).reshape(G.nrows(), G.ncols())


# ---------------------------------------------------------------- against the sympy oracle

@pytest.mark.parametrize("seed", range(12))
def test_ranks_and_dim_free_match_the_sympy_oracle(seed):
    cn = random_constrained(seed)
    X = random_sample(seed, random.Random(seed).randint(1, 5), cn.widths[0])
    st = free_state(cn, X)
    G = gamma_free_exact(cn, X, st.pattern)
    assert exact.rank(G) == oracle_rank(cn, X)
    assert (gamma_free_mod_p(cn, X, st.pattern, P) == _residues(G, P)).all()
    assert rescaling_symmetry(cn).dim_free == oracle_dim_free(cn)


@pytest.mark.parametrize("seed", range(100, 116))
def test_dim_free_matches_the_oracle_on_constraint_heavy_networks(seed):
    cn = random_constrained(seed, p_fixed=0.4, p_tie=0.45)
    assert rescaling_symmetry(cn).dim_free == oracle_dim_free(cn)


def test_tie_resolutions_match_the_sympy_oracle():
    seen = 0
    for seed in range(200):
        cn = random_constrained(seed)
        X = random_sample(seed, random.Random(seed).randint(1, 5), cn.widths[0])
        st = free_state(cn, X)
        if not st.ties or len(st.ties) > 2:
            continue
        seen += 1
        for active in product([True, False], repeat=len(st.ties)):
            G = gamma_free_exact(cn, X, resolve_ties(st, active))
            assert exact.rank(G) == oracle_rank(cn, X, dict(zip(st.ties, active)))
        if seen == 5:
            break
    assert seen == 5


@pytest.mark.parametrize("seed", [*range(12, 24), *range(100, 112)])
def test_verdict_follows_the_oracle(seed):
    """identifiable iff the oracle's rank reaches its dim_free at every resolution; a not-identifiable
    verdict carries a dead-unit certificate that the exact checker accepts."""
    cn = random_constrained(seed, p_fixed=0.15)
    X = random_sample(seed, random.Random(seed).randint(1 if seed >= 100 else 2, 6), cn.widths[0])
    st = free_state(cn, X)
    r = check_constrained(cn, X, max_resolutions=16)
    assert validate_report(r.to_dict()) is None
    if len(st.ties) > 4:
        assert r.verdict in ("inconclusive", "not-identifiable")
        return
    df = oracle_dim_free(cn)
    full = all(oracle_rank(cn, X, dict(zip(st.ties, a))) == df for a in product([True, False], repeat=len(st.ties)))
    assert r.dim == df
    assert (r.verdict == "identifiable") == full
    if r.decided_by == "dead-units":
        d = r.certificate["dead_units"]
        assert check_dead_units(cn, X, d["parameter"], [F(v) for v in d["x"]], F(d["eps"])) is not None
    elif r.decided_by == "constant-units":
        c = r.certificate["constant_units"]
        (j, _), (jb, _) = c["delta"]
        assert check_constant_units(cn, X, j, jb, [F(v) for v in c["x"]], F(c["eps"])) is not None
    elif r.decided_by == "entering-submersion":
        from exactident.boundary.submersion import check_entering_submersion

        e = r.certificate["entering_submersion"]
        delta = [F(0)] * cn.n_params
        for j, q in e["delta"]:
            delta[j] = F(q)
        assert check_entering_submersion(cn, X, e["active"], delta, [F(v) for v in e["y"]], e["prime"])
        # the oracle: full row rank on that resolution
        assert oracle_rank(cn, X, dict(zip(st.ties, e["active"]))) == len(X) * cn.widths[-1]
    elif r.decided_by == "submersion":
        s = r.certificate["submersion"]
        # the oracle: full row rank on X, and X plus the point y has a larger rank
        assert oracle_rank(cn, X) == len(X) * cn.widths[-1] < oracle_rank(cn, X + [[F(v) for v in s["y"][0]]])


# ---------------------------------------------------------------- hand derivations

def _residual(w1, b1, w2):
    """``f(x) = x + w2 relu(w1 x + b1)`` as a layered net: hidden unit 0 = relu(w1 x + b1) (free), hidden
    unit 1 = a linear carrier of x (fixed weight 1, bias 0, slope 1); output weights (w2, 1 fixed), no bias."""
    return _cn((1, 2, 1), [[[w1], [1]], [[w2, 1]]], [[b1, 0], [0]], [[[0], [-1]], [[2, -1]]], [[1, -1], [-1]],
               [[0, 1]], [[-1, -1]], 3, ("skip connection",), ["w1", "b1", "w2"])


def test_residual_keeps_one_rescaling():
    """The ReLU unit's rescaling (w1, b1, w2) -> (l w1, l b1, w2 / l) keeps the family: S_H = span (w1, b1, -w2).
    The carrier's would change its fixed incoming weight 1: lost.  dim_free = 3 - 1 = 2.  With w1 = 1, b1 = 0,
    w2 = 2 at x = 1, 2 (active): rows (d/dw1, d/db1, d/dw2) = (w2 x, w2, w1 x + b1) = (2, 2, 1), (4, 2, 2): rank 2."""
    cn = _residual(1, 0, 2)
    sym = rescaling_symmetry(cn)
    assert (sym.symmetry_dim, sym.dim_free) == (1, 2)
    (v,) = sym.basis  # proportional to (w1, b1, -w2) = (1, 0, -2)
    assert v.get(1, 0) == 0 and v[2] == -2 * v[0] != 0
    G = gamma_free_exact(cn, _X([[1], [2]]), free_state(cn, _X([[1], [2]])).pattern)
    assert _mat([[2, 2, 1], [4, 2, 2]]) == G
    r = check_constrained(cn, _X([[1], [2]]))
    assert (r.verdict, r.rank_gamma, r.dim, r.decided_by) == ("identifiable", 2, 2, "free-rank")
    # one active sample: rows (2, 2, 1) only: rank 1 < 2, no dead unit.  C_N is never borrowed; the line
    # (w1, b1) += t (1, -1) keeps z(1) = w1 + b1 = 1 and z(-3) = -3 - 4t < 0 for every t >= 0 (outputs on X
    # constant) while f(2) = 2 + 2 relu(2 + 3t) moves: not identifiable, decided by the line rule
    r1 = check_constrained(cn, _X([[1], [-3]]), exact_ranks=True)  # by default only an interval: [1, 2]
    assert (r1.verdict, r1.rank_gamma, r1.decided_by) == ("not-identifiable", 1, "line")
    line = r1.certificate["line"]
    assert sorted(line["delta"]) in ([[0, "1"], [1, "-1"]], [[0, "-1"], [1, "1"]])
    assert any(e["rule"] == "theorem-8" and e["status"] == "not-applicable" for e in r1.to_dict()["rules"])


def test_residual_seen_at_one_point_is_a_submersion():
    """At x = 1 alone Gamma_free = (2, 2, 1): full row rank 1 < dim_free = 2, so the outputs on X are a submersion
    near theta; any second active point y adds the row (w2 y, w2, w1 y + b1) = (2y, 2, y), independent of
    (2, 2, 1) for y != 1: the fiber through theta moves f(y).  Not identifiable."""
    from exactident.boundary.submersion import check_submersion

    cn = _residual(1, 0, 2)
    r = check_constrained(cn, _X([[1]]))
    assert (r.verdict, r.rank_gamma, r.dim, r.decided_by) == ("not-identifiable", 1, 2, "submersion")
    s = r.certificate["submersion"]
    assert (s["rank_x"], s["rank_xy"]) == (1, 2)
    assert check_submersion(cn, _X([[1]]), [[F(v) for v in s["y"][0]]], s["prime"])
    assert not check_submersion(cn, _X([[1]]), _X([[1]]), s["prime"])  # the same point adds nothing
    assert validate_report(r.to_dict()) is None


def test_residual_dead_unit_is_certified():
    """relu(x - 10) is dead on x = 1, 2: lowering b1 keeps f = x on the sample, but at x* > 10, f(x*) moves."""
    cn = _residual(1, -10, 2)
    r = check_constrained(cn, _X([[1], [2]]))
    assert (r.verdict, r.decided_by) == ("not-identifiable", "dead-units")
    d = r.certificate["dead_units"]
    assert d["name"] == "b1" and d["units"] == [[1, 0]]
    x, eps = F(d["x"][0]), F(d["eps"])
    assert x - 10 - eps > 0  # active at both ends: f(x*) = x* + 2 (x* - 10 - t), slope -2 in t
    assert [F(v) for v in d["f_eps"]] == [x + 2 * (x - 10 - eps)]


def _conv(k0, k1, c, v0, v1, d=0):
    """One channel, kernel 2, on 3 pixels: y_p = k0 x_p + k1 x_{p+1} + c (p = 0, 1), relu, then v0 y0 + v1 y1 + d.
    Dense W_1 = [[k0, k1, 0], [0, k0, k1]] with the zeros fixed, b_1 = (c, c): ties."""
    return _cn((3, 2, 1), [[[k0, k1, 0], [0, k0, k1]], [[v0, v1]]], [[c, c], [d]],
               [[[0, 1, -1], [-1, 0, 1]], [[3, 4]]], [[2, 2], [5]], [[0, 0]], [[-1, -1]], 6, ("convolution",))


def test_convolution_on_three_pixels():
    """The tie of k0 over both output pixels forces s_0 = s_1: one rescaling, dim_free = 6 - 1 = 5.
    Where both pixels are active f = v0 k0 x0 + (v0 k1 + v1 k0) x1 + v1 k1 x2 + (v0 + v1) c + d: four
    functions of theta whose Jacobian at k = (1, 1), c = 0, v = (1, 2) has rows (1,0,0,1,0,0), (2,1,0,1,1,0),
    (0,2,0,0,1,0), (0,0,3,0,0,1): rank 4.  Samples that all keep both pixels active give rank 4 < 5."""
    cn = _conv(1, 1, 0, 1, 2)
    sym = rescaling_symmetry(cn)
    assert (sym.symmetry_dim, sym.dim_free) == (1, 5)
    X = _X([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1], [2, 1, 3]])
    r = check_constrained(cn, X, exact_ranks=True, structural=False)  # by default only the interval [4, 5]
    assert (r.verdict, r.rank_gamma, r.dim) == ("inconclusive", 4, 5)
    assert "C_N is not proved for convolution" in r.reason
    # the line rule settles it: c += t, d -= (v0 + v1) t = 3t keeps f on X (every pre-activation on X is >= 0 and
    # only grows; the tie z_1(1, 0, 0) = 0 goes active), while at x* = (-1, -2, -2) both pixels are off, f = d - 3t
    r = check_constrained(cn, X, exact_ranks=True)
    assert (r.verdict, r.rank_gamma, r.decided_by) == ("not-identifiable", 4, "line")
    assert r.certificate["line"]["delta"] in ([[2, "1"], [5, "-3"]], [[2, "-1"], [5, "3"]])
    # one column of Gamma_free = the sum of its dense columns: d f / d k0 at x = (1, 1, 1) is v0 x0 + v1 x1 = 3
    G = gamma_free_exact(cn, _X([[1, 1, 1]]), free_state(cn, _X([[1, 1, 1]])).pattern)
    assert _mat([[3, 3, 3, 2, 2, 1]]) == G
    # pixel 0 off, pixel 1 on, and the reverse, add the pieces of the relus: rank 5 = dim_free
    more = X + _X([[-5, 1, 1], [1, 1, -5], [-4, 2, 1], [1, 2, -4]])
    assert oracle_rank(cn, more) == 5
    assert check_constrained(cn, more).verdict == "identifiable"


def test_channel_rescaling_and_permutation_invariance():
    """Rescaling the channel (k, c) -> 2 (k, c), v -> v / 2 keeps the function: same ranks, same verdicts."""
    X = _X([[1, 0, 0], [0, 1, 0], [-5, 1, 1], [1, 1, -5], [-4, 2, 1], [1, 2, -4], [1, 1, 1]])
    a = check_constrained(_conv(1, 1, 0, 1, 2), X)
    b = check_constrained(_conv(2, 2, 0, F(1, 2), 1), X)
    assert (a.verdict, a.rank_gamma, a.dim) == (b.verdict, b.rank_gamma, b.dim)
    # flipping the pixel order of input and output (a permutation of units) is the kernel (k1, k0)
    Xr = [row[::-1] for row in X]
    c = check_constrained(_conv(1, 1, 0, 2, 1), Xr)
    assert (c.verdict, c.rank_gamma, c.dim) == (a.verdict, a.rank_gamma, a.dim)


def _two_units(slope):
    """f = v0 relu(x) + v1 act(x - 10), no output bias (fixed 0): act is ReLU (slope 0) or leaky."""
    return _cn((1, 2, 1), [[[1], [1]], [[1, 1]]], [[0, -10], [0]], [[[0], [2]], [[4, 5]]], [[1, 3], [-1]],
               [[0, slope]], [[-1, -1]], 6, ("leaky ReLU",) if slope else ("fixed weights",),
               ["w0", "b0", "w1", "b1", "v0", "v1"])


def test_leaky_unit_is_not_dead():
    """Samples -2, -1, 1, 2: unit 1 is negative on all.  ReLU: its three columns vanish, rank 2 < dim_free = 4
    (6 params, 2 rescalings) and lowering b1 is a dead-unit line: not-identifiable.  Leaky (slope a): unit 1
    contributes a v1 (x - 10) exactly, its columns span {x, 1}; unit 0 spans {x 1[x>0], 1[x>0]}; the four
    functions are independent on the sample: rank 4 = dim_free, identifiable."""
    X = _X([[-2], [-1], [1], [2]])
    relu = check_constrained(_two_units(0), X)
    assert (relu.verdict, relu.rank_gamma, relu.dim, relu.decided_by) == ("not-identifiable", 2, 4, "dead-units")
    leaky = check_constrained(_two_units(F(1, 10)), X)
    assert (leaky.verdict, leaky.rank_gamma, leaky.dim) == ("identifiable", 4, 4)


def test_constant_unit_line():
    """f = v0 relu(x0) + v1 relu(x1 + 1) + d on samples with x1 = 2: unit 1 outputs 3 on every sample, so
    (v1, d) -> (v1 + t, d - 3t) keeps f(X) while f(x*) moves by t (h1(x*) - 3) where h1(x*) != 3."""
    cn = _cn((2, 2, 1), [[[1, 0], [0, 1]], [[1, 1]]], [[0, 1], [0]], [[[0, -1], [-1, 1]], [[3, 4]]],
             [[2, -1], [5]], [[0, 0]], [[-1, -1]], 6, ("fixed weights",), ["w0", "b0", "w1", "v0", "v1", "d"])
    X = _X([[-1, 2], [1, 2], [2, 2], [3, 2]])
    r = check_constrained(cn, X)
    assert (r.verdict, r.decided_by) == ("not-identifiable", "constant-units")
    c = r.certificate["constant_units"]
    assert c["delta"] == [[4, "1"], [5, "-3"]] and c["value"] == "3" and c["names"] == ["v1", "d"]
    x, eps = [F(v) for v in c["x"]], F(c["eps"])
    h1 = x[1] + 1
    assert h1 > 0 and h1 != 3
    assert [F(v) - F(w) for v, w in zip(c["f_eps"], c["f_0"])] == [eps * (h1 - 3)]
    assert check_constant_units(cn, X, 4, 5, x, eps) is not None
    assert validate_report(r.to_dict()) is None


def test_silent_linear_unit_line():
    """relu(w1 x) (no bias) is dead on x < 0; a linear unit copies it (fixed weight 1, bias 0), so it is silent
    too: its outgoing weight w3 is free on the sample (column 0) and moving it changes f at x* > 0.  Rank: only
    b3's column, 1; dim_free = 3 params (w1, w3, b3) - 1 rescaling (w1, w3) = 2."""
    cn = _cn((1, 1, 1, 1), [[[1]], [[1]], [[2]]], [[0], [0], [1]], [[[0]], [[-1]], [[1]]], [[-1], [-1], [2]],
             [[0], [1]], [[-1], [-1]], 3, ("fixed weights",), ["w1", "w3", "b3"])
    r = check_constrained(cn, _X([[-1], [-2], [-3]]))
    assert (r.verdict, r.rank_gamma, r.dim, r.decided_by) == ("not-identifiable", 1, 2, "dead-units")
    d = r.certificate["dead_units"]
    assert d["name"] == "w3" and F(d["x"][0]) > 0


def test_prelu_slope_column():
    """PReLU f = v prelu_a(w x + b): d f / d a = v min(w x + b, 0); with w = 1, b = 0, v = 2, a = 1/4 at x = -2:
    columns (w, b, a, v) = (v a x, v a, v z, a z) = (-1, 1/2, -4, -1/2)."""
    cn = _cn((1, 1, 1), [[[1]], [[2]]], [[0], [0]], [[[0]], [[3]]], [[1], [-1]], [[F(1, 4)]], [[2]], 4, ("PReLU",))
    G = gamma_free_exact(cn, _X([[-2]]), free_state(cn, _X([[-2]])).pattern)
    assert _mat([[-1, F(1, 2), -4, F(-1, 2)]]) == G
    assert rescaling_symmetry(cn).dim_free == 3  # the slope is not rescaled: one rescaling of (w, b, v)


# ---------------------------------------------------------------- against the plain engine

@pytest.mark.parametrize("seed", range(8))
def test_plain_mlp_matches_the_plain_engine(seed):
    """rank Gamma_free on net = the plain engine's rank Gamma and dim_free = its dim (the fixed
    edges' columns are in the span through the rescalings when theta is not degenerate): same verdict where
    C_S decides."""
    rng = random.Random(seed)
    widths = [rng.randint(1, 3), rng.randint(1, 3), rng.randint(1, 3), 1]
    weights = [[[str(rng.choice([-3, -2, -1, 1, 2, 3])) for _ in range(widths[l - 1])] for _ in range(widths[l])]
               for l in range(1, 4)]
    biases = [[str(rng.choice([-1, 1, 2])) for _ in range(widths[l])] for l in range(1, 4)]
    sample = [[F(rng.randint(-6, 6), rng.randint(1, 3)) for _ in range(widths[0])] for _ in range(rng.randint(2, 8))]
    case = parse_case({"format": "exactident-case/1", "name": "p", "widths": widths, "weights": weights,
                       "biases": biases, "sample": [[str(v) for v in row] for row in sample]})
    plain = check(case, numeric=False, structural=False, all_ranks=True)
    if plain.degenerate or plain.on_boundary:
        pytest.skip("degenerate or on the boundary")
    cn = case.network
    mine = check_constrained(cn, case.X, structural=False, exact_ranks=True)  # plain: all_ranks, exact
    assert (mine.rank_gamma, mine.dim) == (plain.rank_gamma, plain.dim)
    assert (mine.verdict == "identifiable") == (plain.verdict == "identifiable")


def test_ties_are_dense_columns_times_T():
    """The convolution as dense-with-ties and as a plain net with every entry free: Gamma_free = Gamma_plain T."""
    tied = _conv(1, -1, F(1, 2), 2, 3, 1)
    dense = _cn((3, 2, 1), [[[1, -1, 0], [0, 1, -1]], [[2, 3]]], [[F(1, 2), F(1, 2)], [1]],
                [[[0, 1, 2], [3, 4, 5]], [[8, 9]]], [[6, 7], [10]], [[0, 0]], [[-1, -1]], 11)
    X = _X([[1, 2, 0], [-1, 3, 1], [2, -2, 5]])
    G_tied = gamma_free_exact(tied, X, free_state(tied, X).pattern)
    G_dense = gamma_free_exact(dense, X, free_state(dense, X).pattern)
    T = flint.fmpq_mat(11, 6)
    for dense_j, tied_j in enumerate([0, 1, None, None, 0, 1, 2, 2, 3, 4, 5]):
        if tied_j is not None:
            T[dense_j, tied_j] = 1
    # the fixed zeros of W_1 (dense 2, 3) have no column in the tied family
    assert G_tied == G_dense * T
    assert exact.rank(G_tied) <= exact.rank(G_dense)


def test_check_dispatches_a_constrained_case():
    """check() sends a case carrying a non-plain Network to the constrained engine, a plain one not."""
    cn = _residual(1, 0, 2)
    X = _X([[1], [2]])
    case = SimpleNamespace(name="res", X=X, constrained=cn, provenance=None, network=None)
    r = check(case, numeric=False, progress=False)
    assert (r.verdict, r.decided_by, r.extra["architecture"]["dim_free"]) == ("identifiable", "free-rank", 2)
    assert r.rank_a is None and r.cn is None
    assert validate_report(r.to_dict()) is None


def test_timed_out_report_of_a_constrained_case():
    """A budget that runs out before the verdict: the compiled widths and dim_free, no claim."""
    from exactident.check import timed_out_report

    case = SimpleNamespace(name="res", X=_X([[1], [2]]), constrained=_residual(1, 0, 2), provenance=None)
    r = timed_out_report(case, "ranks mod p", 1.0)
    assert (r.widths, r.dim, r.rank_gamma, r.verdict) == ([1, 2, 1], 2, None, "inconclusive")


@pytest.mark.parametrize("seed", range(30, 36))
def test_entry_bound_holds(seed):
    """S Gamma_free is an integer matrix bounded by gamma_free_entry_bound, S the product of the denominators."""
    from exactident.model.gamma_free import gamma_free_entry_bound
    from exactident.model.integer_forward import common_denominator

    cn = random_constrained(seed)
    X = random_sample(seed, 4, cn.widths[0])
    S = common_denominator(v for row in X for v in row)
    for W, b in zip(cn.W, cn.b):
        S *= common_denominator(W.entries()) * common_denominator(b)
    for a in cn.negative_slope:
        S *= common_denominator(a)
    B = gamma_free_entry_bound(cn, X)
    for resolution in (free_state(cn, X).pattern,):
        for v in gamma_free_exact(cn, X, resolution).entries():
            assert (v * S).q == 1 and abs(v * S) <= B


@pytest.mark.parametrize("seed", range(40, 46))
def test_modular_route_without_exact_fallback(monkeypatch, seed):
    """With the exact fallback switched off the certified rank (ranks mod p, CRT kernel checked exactly) is the
    exact rank."""
    from exactident.check import free_rank as cc

    monkeypatch.setattr(cc, "MAX_EXACT_FREE_ENTRIES", 0)
    cn = random_constrained(seed)
    X = random_sample(seed, 3, cn.widths[0])
    st = free_state(cn, X)
    fr = cc.free_rank(cn, X, st.pattern, rescaling_symmetry(cn), random.Random(seed))
    exact_rank = exact.rank(gamma_free_exact(cn, X, st.pattern))
    if fr.rank is None:
        lo, hi = fr.interval
        assert lo <= exact_rank <= hi
    else:
        assert fr.rank == exact_rank


def _conv2(kA, cA, kB, cB, v):
    """Two channels A, B, kernel 2 on 3 pixels (units A0, A1, B0, B1), ReLU, then sum_u v_u h_u + d."""
    W1 = [[kA[0], kA[1], 0], [0, kA[0], kA[1]], [kB[0], kB[1], 0], [0, kB[0], kB[1]]]
    I1 = [[0, 1, -1], [-1, 0, 1], [3, 4, -1], [-1, 3, 4]]
    return _cn((3, 4, 1), [W1, [v]], [[cA, cA, cB, cB], [0]], [I1, [[6, 7, 8, 9]]], [[2, 2, 5, 5], [10]],
               [[0] * 4], [[-1] * 4], 11, ("convolution",))


def test_channel_permutation_invariance():
    """Swapping the two channels (kernels, biases and their output weights) relabels the units: same ranks,
    dim_free (11 params - 2 channel rescalings = 9) and verdict."""
    X = _X([[1, 0, 2], [0, 1, -1], [-2, 1, 1], [1, -3, 2], [2, 2, -1], [-1, -1, 3], [3, -1, 0], [0, 2, 2],
            [1, 1, 1], [-2, 3, -1]])
    a = check_constrained(_conv2((1, -1), F(1, 2), (2, 1), -1, [1, 2, -1, 3]), X)
    b = check_constrained(_conv2((2, 1), -1, (1, -1), F(1, 2), [-1, 3, 1, 2]), X)
    assert a.dim == 9
    assert (a.verdict, a.rank_gamma, a.dim) == (b.verdict, b.rank_gamma, b.dim)
    assert a.rank_gamma == oracle_rank(_conv2((1, -1), F(1, 2), (2, 1), -1, [1, 2, -1, 3]), X)


def _conv_nobias(k0, k1, v0, v1, d=0):
    """_conv without the convolution's bias (fixed 0): a zero receptive field gives z = 0 for every theta."""
    return _cn((3, 2, 1), [[[k0, k1, 0], [0, k0, k1]], [[v0, v1]]], [[0, 0], [d]],
               [[[0, 1, -1], [-1, 0, 1]], [[2, 3]]], [[-1, -1], [4]], [[0, 0]], [[-1, -1]], 5, ("convolution",))


def test_persistent_ties_need_one_side():
    """At x = (0, 0, 1) pixel 0 sees (0, 0) with no bias: z_0 = 0 for every theta (a persistent tie).  Its side
    changes nothing: the oracle's ranks agree on both sides, and the engine enumerates one side only."""
    from exactident.model.gamma_free import persistent_ties

    cn = _conv_nobias(1, 2, 1, -1, 1)
    X = _X([[0, 0, 1], [1, 2, 3], [2, -3, 1], [-1, 3, 2], [3, 1, -2], [1, -2, 2]])
    st = free_state(cn, X)
    assert st.ties == [(0, 1, 0)] and persistent_ties(cn, X, st) == [0]
    ranks = {oracle_rank(cn, X, {(0, 1, 0): side}) for side in (True, False)}
    assert len(ranks) == 1
    assert gamma_free_exact(cn, X, resolve_ties(st, [True])) == gamma_free_exact(cn, X, resolve_ties(st, [False]))
    r = check_constrained(cn, X)
    assert len(r.certificate["free_rank"]["resolutions"]) == 1 and r.certificate["free_rank"]["persistent"] == [0]
    assert (r.rank_gamma, r.dim) == (ranks.pop(), oracle_dim_free(cn))
    assert validate_report(r.to_dict()) is None
    # two samples, one with a persistent tie: rows 2 < dim_free 4, full row rank: the submersion still applies
    small = check_constrained(cn, X[:2])
    assert (small.verdict, small.decided_by) == ("not-identifiable", "submersion")


def test_unit_on_its_kink_at_the_only_sample():
    """f = relu(w x + b) + d (outgoing weight fixed 1) with w = 1, b = -1, d = 0 at x = 1: a tie.  On the active side
    Gamma_free = (x, 1, 1) = (1, 1, 1), full row rank 1; delta = (1, 0, -1) is in its kernel and raises the tied
    pre-activation (d z / d delta = x dw + db = 1 > 0), so it enters the active piece; at y = 2 (active)
    d f(y) . delta = y dw + dd = 2 - 1 = 1 != 0: same output at x = 1, another function.  delta = (1, -1, 0) keeps
    z = 0 (not strictly entering) and is refused, and so is the inactive side (Gamma_free = (0, 0, 1) there).
    (With the outgoing weight free, moving it alone is a dead-unit line: the unit outputs 0 at x = 1.)"""
    from exactident.boundary.submersion import check_entering_submersion

    cn = _cn((1, 1, 1), [[[1]], [[1]]], [[-1], [0]], [[[0]], [[-1]]], [[1], [2]], [[0]], [[-1]], 3, ("fixed weights",))
    X = _X([[1]])
    r = check_constrained(cn, X)
    assert (r.verdict, r.decided_by, r.n_ties) == ("not-identifiable", "entering-submersion", 1)
    assert check_entering_submersion(cn, X, [True], [F(1), F(0), F(-1)], [F(2)], P)
    assert not check_entering_submersion(cn, X, [True], [F(1), F(-1), F(0)], [F(2)], P)
    assert not check_entering_submersion(cn, X, [False], [F(1), F(0), F(-1)], [F(2)], P)
    assert validate_report(r.to_dict()) is None


def test_softmax_bound_of_a_plain_mlp():
    """Adding c to every logit (b_L += c 1, W_L += 1 u^T) keeps the softmax: N_{L-1} + 1 more kernel directions
    beyond the N_1 + ... + N_{L-1} rescalings, so the bound is dim - 1 - N_{L-1} (widths 2-3-2: 17 - 3 - 1 - 3 = 10)."""
    from exactident.model.network import Network

    net = Network((2, 3, 2), [_mat([[1, 2], [-1, 1], [2, -3]]), _mat([[1, -1, 2], [3, 1, -2]])],
                  [[F(1), F(-1), F(2)], [F(0), F(1)]])
    sym = rescaling_symmetry(net)
    assert (sym.dim_free, sym.softmax_rank_bound) == (14, 10)
