"""Certified intervals of R_Gamma (exactident.ranks.intervals, the verdict-first order of certify_ranks).

The exact rank each interval must contain comes from FLINT's fraction-free elimination of the
exact rational Gamma (and sympy on a tiny case), independent of the ranks mod p.
"""

from __future__ import annotations

import random

import flint
import numpy as np
import pytest

from exactident.linalg import exact
from exactident.linalg.lower_bound import modular_lower_bound
from exactident.model.activation import activation_state
from exactident.model.fixed_edges import fixed_edges
from exactident.model.gamma import gamma_exact
from exactident.model.gamma_modular import ModularData, gamma_mod_p
from exactident.model.integer_forward import data_denominator
from exactident.model.network import Network
from exactident.ranks import certify as certify_mod
from exactident.ranks.intervals import gamma_upper_bound
from exactident.ranks.kernels import semi_local_kernel, sparse_columns
from exactident.verify.rank import check_rank_certificate


def _case(seed: int, widths=(3, 6, 6, 1), n: int = 40):
    """Random small-integer/8 weights; neuron 0 of layer 1 dead (bias -1000): a structural kernel."""
    rng = np.random.default_rng(seed)
    W = [flint.fmpq_mat(widths[l + 1], widths[l], [flint.fmpq(int(v), 8) for v in
                                                   rng.integers(-9, 10, widths[l + 1] * widths[l])])
         for l in range(len(widths) - 1)]
    b = [[flint.fmpq(int(v), 8) for v in rng.integers(-5, 6, widths[l + 1])] for l in range(len(widths) - 1)]
    b[0][0] = flint.fmpq(-1000)
    X = [[flint.fmpq(int(v), 4) + flint.fmpq(1, 97) for v in row] for row in rng.integers(-12, 13, (n, widths[0]))]
    net = Network(tuple(widths), W, b)
    st = activation_state(net, X)
    return net, X, st, fixed_edges(net)


def _fraction_rank(G) -> int:
    """Rank by Gaussian elimination over Python Fractions (independent of FLINT and of primes)."""
    from fractions import Fraction

    rows = [[Fraction(int(G[i, j].p), int(G[i, j].q)) for j in range(G.ncols())] for i in range(G.nrows())]
    rank, col = 0, 0
    while rank < len(rows) and col < G.ncols():
        pivot = next((i for i in range(rank, len(rows)) if rows[i][col] != 0), None)
        if pivot is None:
            col += 1
            continue
        rows[rank], rows[pivot] = rows[pivot], rows[rank]
        for i in range(rank + 1, len(rows)):
            if rows[i][col] != 0:
                f = rows[i][col] / rows[rank][col]
                rows[i] = [a - f * b for a, b in zip(rows[i], rows[rank])]
        rank, col = rank + 1, col + 1
    return rank


def _lower(net, X, st, fixed, seed=0):
    avoid = data_denominator(net, X)
    data = ModularData(net, X)
    low = modular_lower_bound(lambda q: gamma_mod_p(net, X, st.pattern, fixed, q, avoid, data), avoid=avoid,
                              rng=random.Random(seed), stop_at=net.dim, blas=True)
    return low, avoid, data


@pytest.mark.parametrize("seed", range(6))
def test_interval_contains_exact_rank(seed):
    net, X, st, fixed = _case(seed)
    if st.ties:
        pytest.skip("tie")
    G = gamma_exact(net, X, st.Z, st.pattern, fixed)
    exact_rank = exact.rank(G)
    assert _fraction_rank(G) == exact_rank
    low, avoid, data = _lower(net, X, st, fixed, seed)
    K = semi_local_kernel(net, X, st.pattern, fixed)
    assert K, "the dead neuron gives kernel vectors"
    for drop in range(len(K)):  # fewer vectors: a wider interval, still containing the rank
        up = gamma_upper_bound(net, X, st.pattern, fixed, low, net.dim + 1, avoid=avoid, data=data,
                               rng=random.Random(seed), semi_local=lambda d=drop: K[d:])
        assert up is not None
        assert low[0] <= exact_rank <= up["bound"] == net.dim - (len(K) - drop)


def test_interval_tiny_against_sympy():
    sympy = pytest.importorskip("sympy")
    net, X, st, fixed = _case(1, widths=(2, 3, 1), n=6)
    G = gamma_exact(net, X, st.Z, st.pattern, fixed)
    M = sympy.Matrix(G.nrows(), G.ncols(), [sympy.Rational(int(v.p), int(v.q)) for v in G.entries()])
    low, avoid, data = _lower(net, X, st, fixed)
    K = semi_local_kernel(net, X, st.pattern, fixed)
    up = gamma_upper_bound(net, X, st.pattern, fixed, low, net.dim + 1, avoid=avoid, data=data,
                           rng=random.Random(0), semi_local=lambda: K)
    assert up is not None and low[0] <= M.rank() <= up["bound"]


def test_no_bound_when_not_below():
    net, X, st, fixed = _case(2)
    low, avoid, data = _lower(net, X, st, fixed)
    K = semi_local_kernel(net, X, st.pattern, fixed)
    # no upper bound can be below the rank mod p (a lower bound of the rank): nothing is returned
    assert gamma_upper_bound(net, X, st.pattern, fixed, low, low[0], avoid=avoid, data=data,
                             rng=random.Random(0), semi_local=lambda: K) is None


@pytest.mark.parametrize("seed", range(3))
def test_exact_ranks_gives_exact_value_and_fast_order_an_interval(seed, monkeypatch):
    net, X, st, fixed = _case(seed, widths=(3, 6, 6, 1), n=60)
    if st.ties:
        pytest.skip("tie")
    exact_rank = exact.rank(gamma_exact(net, X, st.Z, st.pattern, fixed))
    full = semi_local_kernel
    monkeypatch.setattr(certify_mod, "semi_local_kernel", lambda *a: full(*a)[1:])  # one vector short
    # the kernel path is what this test is about: the pattern-count bound (which can close these) is off
    monkeypatch.setattr(certify_mod, "active_block_bound", lambda net, *a: net.dim)
    fast = certify_mod.certify_ranks(net, X, st.pattern, fixed, rng=random.Random(0), allow_rank_a_lower=True,
                                     exact_ranks=False, verdict_first=True)
    slow = certify_mod.certify_ranks(net, X, st.pattern, fixed, rng=random.Random(0), allow_rank_a_lower=True,
                                     exact_ranks=True)
    assert slow.rank_gamma == exact_rank and slow.rank_gamma_interval is None
    assert fast.rank_gamma_interval is not None  # the semi-local kernel one vector short: an interval
    if fast.rank_gamma_interval is not None:
        lo, hi = fast.rank_gamma_interval
        assert lo <= exact_rank <= hi < net.dim
        assert lo <= fast.rank_gamma <= hi  # the Monte Carlo value
        mc = fast.montecarlo
        assert mc is not None and mc["rank_gamma"] == fast.rank_gamma and 0.0 <= mc["error_probability"] <= 1.0
        assert "rank" not in fast.certificate["rank_gamma"]
        # the verdict is the same in both orders: C_S fails, C_N holds (hi below the certified R_A)
        below = fast.rank_a if fast.rank_a is not None else fast.rank_a_lower
        assert below is not None and hi < below and slow.rank_gamma < below
    else:
        assert fast.rank_gamma == exact_rank


def _interval_part(net, X, st, fixed, K, low):
    cols = [[[i, str(v)] for i, v in sorted(col.items())] for col in K]
    return {"shape": [len(X) * net.widths[-1], net.dim], "lower": {"prime": low[1], "rank_mod_p": low[0]},
            "upper": {"kind": "kernel", "bound": net.dim - len(K), "source": "crt", "kernel": cols}}


def test_verifier_accepts_interval_and_rejects_tampering():
    from exactident.io.case import Case

    net, X, st, fixed = _case(3)
    low, _avoid, _data = _lower(net, X, st, fixed)
    K = semi_local_kernel(net, X, st.pattern, fixed)[1:]
    case = Case("t", net, X)
    part = _interval_part(net, X, st, fixed, K, low)
    problems, ranks = check_rank_certificate(case, {"rank_gamma": part}, st.pattern)
    assert problems == [] and ranks.rank_gamma_interval == (low[0], net.dim - len(K)) and ranks.rank_gamma is None
    bad = dict(part, upper=dict(part["upper"], bound=part["upper"]["bound"] - 1))
    assert check_rank_certificate(case, {"rank_gamma": bad}, st.pattern)[0]
    wrong = sparse_columns(flint.fmpq_mat(net.dim, 1, [1] * net.dim))  # not a kernel vector
    part_wrong = _interval_part(net, X, st, fixed, wrong, low)
    assert check_rank_certificate(case, {"rank_gamma": part_wrong}, st.pattern)[0]
    empty = _interval_part(net, X, st, fixed, [], low)  # no kernel vector: hi = dim proves nothing
    assert check_rank_certificate(case, {"rank_gamma": empty}, st.pattern)[0]


def test_dixon_solve_matches_flint():
    from exactident.linalg.blas_modp import inverse_blas
    from exactident.linalg.dixon import dixon_solve

    rng = np.random.default_rng(0)
    p = 1048583
    for r, k in [(1, 1), (5, 2), (20, 3)]:
        A = rng.integers(-2**40, 2**40, (r, r)).astype(object)
        R = rng.integers(-50, 50, (r, k)).astype(object)
        B = flint.fmpz_mat(r, r, [int(v) for v in A.ravel()])
        Rm = flint.fmpz_mat(r, k, [int(v) for v in R.ravel()])
        if B.det() % p == 0:
            continue
        inv = inverse_blas(np.array([[int(v) % p for v in row] for row in A], dtype=np.int64), p)
        assert dixon_solve(B, Rm, inv, p, max_steps=2000) == flint.fmpq_mat(B).solve(flint.fmpq_mat(Rm))


@pytest.mark.parametrize("seed", [0, 2, 4])
def test_dixon_vectors_are_exact_kernel_vectors(seed):
    from exactident.ranks.intervals import dixon_kernel_vectors

    net, X, st, fixed = _case(seed, widths=(3, 6, 6, 2), n=30)
    G = gamma_exact(net, X, st.Z, st.pattern, fixed)
    avoid = data_denominator(net, X)
    K = dixon_kernel_vectors(net, X, st.pattern, fixed, 3, avoid=avoid, data=ModularData(net, X),
                             rng=random.Random(seed))
    assert 1 <= len(K) <= 3
    for col in K:  # Gamma v = 0 over Q, by FLINT's rational product (independent of the integer route)
        v = flint.fmpq_mat(net.dim, 1, [col.get(i, 0) for i in range(net.dim)])
        assert any(x != 0 for x in v.entries()) and all(x == 0 for x in (G * v).entries())


def test_interval_by_dixon_when_no_structural_vector(monkeypatch):
    from exactident.io.case import Case

    net, X, st, fixed = _case(0, widths=(3, 6, 6, 1), n=120)
    exact_rank = exact.rank(gamma_exact(net, X, st.Z, st.pattern, fixed))
    from exactident.ranks import intervals

    monkeypatch.setattr(certify_mod, "semi_local_kernel", lambda *a: [])
    monkeypatch.setattr(certify_mod, "active_block_bound", lambda net, *a: net.dim)  # the kernel path only
    monkeypatch.setattr(intervals, "DIXON_FIRST_ENTRIES", 0)  # small here; the real threshold is for speed only
    fast = certify_mod.certify_ranks(net, X, st.pattern, fixed, rng=random.Random(0), allow_rank_a_lower=True,
                                     exact_ranks=False, verdict_first=True)
    part = fast.certificate["rank_gamma"]
    assert part["upper"]["source"] == "dixon"
    lo, hi = fast.rank_gamma_interval or (fast.rank_gamma, fast.rank_gamma)
    assert lo <= exact_rank <= hi < net.dim
    problems, ranks = check_rank_certificate(Case("t", net, X), {"rank_gamma": part}, st.pattern)
    assert problems == [] and ranks.rank_gamma_interval in (None, (lo, hi))


def _shipped(limit_entries: int = 400_000):
    import pathlib

    from exactident.io.case import load_case

    root = pathlib.Path(__file__).resolve().parent.parent / "cases"
    paths = sorted(root.glob("*.json")) + sorted(root.glob("suite-v1/*/*.json"))[::7]  # a sample of the suite
    out = []
    for path in paths:
        if path.name == "manifest.json":
            continue
        case = load_case(path)
        if len(case.X) * case.network.widths[-1] * case.network.dim <= limit_entries:
            out.append(path)
    return out


@pytest.mark.parametrize("path", _shipped(), ids=lambda p: p.name)
def test_verdict_same_in_fast_and_exhaustive_order(path):
    from exactident.check import check
    from exactident.io.case import load_case

    case = load_case(path)
    fast = check(case, numeric=False, structural=False, verdict_first=True)
    slow = check(case, numeric=False, structural=False, exact_ranks=True)
    assert fast.verdict == slow.verdict
    interval = fast.rank_gamma_interval
    if interval is not None:
        assert interval[0] <= slow.rank_gamma <= interval[1]
    else:
        assert fast.rank_gamma == slow.rank_gamma


def test_column_sketch_reaches_the_rank_where_a_random_subset_does_not():
    """Wide, Kronecker-structured: 91% of the columns are X ⊗ a (rank 4), the other 9% are needed."""
    from exactident.linalg.blas_modp import rank_blas, sketch_columns_sparse

    p = 1048583
    rng = np.random.default_rng(0)
    m = 40
    Xs = rng.integers(-5, 6, (m, 4))
    a = rng.integers(-3, 4, (2, 46))
    first = np.einsum("ij,kl->ijkl", Xs, a).reshape(m, -1)  # 40 x 368: rank 4 (rows x_i ⊗ vec(a))
    rest = rng.integers(-9, 10, (m, 36))  # the columns a full row rank needs
    A = np.concatenate([first, rest], axis=1) % p
    assert rank_blas(A, p) == m
    picks = random.Random(1)
    subset_ranks = [rank_blas(A[:, sorted(picks.sample(range(A.shape[1]), m + 16))], p) for _ in range(20)]
    assert max(subset_ranks) < m  # a plain random subset of m + 16 columns misses the rank
    # a sparse sketch of as many columns reaches it on a good share of its draws (about 60 %: each of the 36
    # needed columns lands in 2 of 56 buckets), and a lower bound keeps drawing until it does
    sketch_ranks = [rank_blas(sketch_columns_sparse(A, m + 16, p, seed=s), p) for s in range(20)]
    assert max(sketch_ranks) == m and sum(r == m for r in sketch_ranks) >= 6
    lower = modular_lower_bound(lambda q: A % q, avoid=1, rng=random.Random(0), stop_at=m, blas=True)
    assert lower[0] == m


def test_uniform_lower_primes_are_primes_of_the_blas_range():
    from exactident.linalg.blas_modp import BLAS_PRIME_HI, BLAS_PRIME_LO

    net, X, st, fixed = _case(0)
    avoid, data = data_denominator(net, X), ModularData(net, X)
    for seed in range(5):
        r, p, _img = modular_lower_bound(lambda q: gamma_mod_p(net, X, st.pattern, fixed, q, avoid, data), avoid=avoid,
                                         rng=random.Random(seed), blas=True, uniform=True)
        assert BLAS_PRIME_LO <= p < BLAS_PRIME_HI and flint.fmpz(p).is_prime() and avoid % p != 0
        assert r <= exact.rank(gamma_exact(net, X, st.Z, st.pattern, fixed))  # a rank mod p: a lower bound


@pytest.mark.parametrize("seed", range(3))
def test_monte_carlo_label_is_the_uniform_lower_sample(seed, monkeypatch):
    """The interval's Monte Carlo value counts the lower bound's own rank as its first sample (its prime was
    drawn uniformly from the BLAS range), draws as many more as the bound needs to reach 1e-6 (issue 31,
    item 4), and lies in the interval, below the exact rank (sympy-free: FLINT's exact rank over Q)."""
    import exactident.linalg.montecarlo as mc_mod

    net, X, st, fixed = _case(seed, widths=(3, 6, 6, 1), n=60)
    if st.ties:
        pytest.skip("tie")
    full = semi_local_kernel
    monkeypatch.setattr(certify_mod, "semi_local_kernel", lambda *a: full(*a)[1:])  # one vector short
    monkeypatch.setattr(certify_mod, "active_block_bound", lambda net, *a: net.dim)
    calls = []
    real = mc_mod.monte_carlo_rank

    def spy(*a, **k):
        calls.append(k)
        return real(*a, **k)

    monkeypatch.setattr(mc_mod, "monte_carlo_rank", spy)
    fast = certify_mod.certify_ranks(net, X, st.pattern, fixed, rng=random.Random(0), allow_rank_a_lower=True,
                                     exact_ranks=False, verdict_first=True)
    exact_rank = exact.rank(gamma_exact(net, X, st.Z, st.pattern, fixed))
    if fast.rank_gamma_interval is None:
        assert fast.rank_gamma == exact_rank
        return
    lo, hi = fast.rank_gamma_interval
    assert lo <= fast.montecarlo["rank_gamma"] == fast.rank_gamma <= exact_rank <= hi
    assert 0.0 <= fast.montecarlo["error_probability"] <= 1e-6
    assert len(calls) == 1 and calls[0]["first_uniform"] is True and calls[0]["target"] == 1e-6


@pytest.mark.parametrize("steps", [None, 0])
def test_default_closes_by_capped_lifting_or_keeps_the_interval(steps, monkeypatch):
    """Issue 31, item 2: by default a cheap exact rank is certified by Dixon vectors whose lifting is capped at the
    budget (``intervals.close_within``); when the lifting does not end within it (``steps = 0`` forced here), the
    interval is kept and says why (``lifting-capped``).  Right value: the rank of Gamma by Fraction elimination."""
    from exactident.ranks import intervals

    net, X, st, fixed = _case(0, widths=(3, 6, 6, 1), n=120)
    true_rank = _fraction_rank(gamma_exact(net, X, st.Z, st.pattern, fixed))
    monkeypatch.setattr(certify_mod, "semi_local_kernel", lambda *a: [])
    monkeypatch.setattr(certify_mod, "active_block_bound", lambda net, *a: net.dim)  # the kernel path only
    monkeypatch.setattr(intervals, "DIXON_FIRST_ENTRIES", 0)  # small here; the real threshold is for speed only
    if steps is not None:
        monkeypatch.setattr(intervals, "lifting_steps", lambda *a: steps)
    res = certify_mod.certify_ranks(net, X, st.pattern, fixed, rng=random.Random(0), allow_rank_a_lower=True,
                                    exact_ranks=False)
    if steps is None:
        assert (res.rank_gamma, res.rank_gamma_interval) == (true_rank, None)
        assert res.certificate["rank_gamma"]["upper"]["source"] == "dixon"
        return
    lo, hi = res.rank_gamma_interval
    assert lo <= true_rank <= hi < net.dim and lo < hi
    why = intervals.interval_why((lo, hi), res.exact_estimate)
    assert why["why"] == "lifting-capped" and why["missing_vectors"] == hi - lo and why["budget_seconds"] >= 2.0


def test_default_prices_the_lifting_by_the_solution_bits_and_does_not_start_it(monkeypatch):
    """Issue 31: the lifting is priced before it starts (``lifting_seconds``: the solution's bits per pivot
    row over the bits of a step, times the step's cost); when that exceeds the budget the capped lifting
    (``close_within``) is not started and the interval says ``exact-rank-costly`` with the lifting's
    estimate.  Right value: the rank of Gamma by Fraction elimination lies in the interval."""
    from exactident.ranks import intervals

    net, X, st, fixed = _case(0, widths=(3, 6, 6, 1), n=120)
    true_rank = _fraction_rank(gamma_exact(net, X, st.Z, st.pattern, fixed))
    monkeypatch.setattr(certify_mod, "semi_local_kernel", lambda *a: [])
    monkeypatch.setattr(certify_mod, "active_block_bound", lambda net, *a: net.dim)  # the kernel path only
    monkeypatch.setattr(intervals, "DIXON_FIRST_ENTRIES", 0)
    monkeypatch.setattr(intervals, "SOLUTION_BITS_PER_PIVOT", 1e9)  # a solution no budget can lift
    calls = []
    monkeypatch.setattr(intervals, "close_within", lambda *a, **k: calls.append(1))  # the capped lifting
    res = certify_mod.certify_ranks(net, X, st.pattern, fixed, rng=random.Random(0), allow_rank_a_lower=True,
                                    exact_ranks=False)
    lo, hi = res.rank_gamma_interval
    assert lo <= true_rank <= hi < net.dim and lo < hi and not calls
    why = intervals.interval_why((lo, hi), res.exact_estimate)
    assert why["why"] == "exact-rank-costly" and why["exact_seconds"] > 2.0 and "budget_seconds" not in why


def test_lifting_seconds_grows_with_the_block_and_the_right_hand_sides():
    """The model is monotone: a larger block or more right-hand sides never costs less (steps: the next
    reconstruction attempt after ``4.5 r / 20`` bits, schedule 1, 2, 3, 4, 6, 9, ... of ``dixon_solve``)."""
    from exactident.ranks.intervals import PER_LIFT_STEP, lifting_seconds

    assert lifting_seconds(10, 1) == 3 * PER_LIFT_STEP * 100  # ceil(4.5 * 10 / 20) = 3 steps, an attempt at 3
    assert lifting_seconds(760, 3) == 211 * PER_LIFT_STEP * 760 ** 2 * 3  # 171 bits-steps: the attempt at 211
    for r in (5, 50, 500):
        assert lifting_seconds(r, 2) <= lifting_seconds(r + 1, 2) and lifting_seconds(r, 2) <= lifting_seconds(r, 3)
