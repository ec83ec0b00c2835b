"""Float backends against exact ranks: bands, dtypes, pattern flips, torch.

Every expected value is derived from theory or an independent computation
(FLINT ranks of known-rank constructions, hand-written Gamma rows), never from
the float code's own output.
"""

from __future__ import annotations

import random
from fractions import Fraction

import flint
import numpy as np
import pytest
from _gen import case_obj

from exactident.check import check
from exactident.errors import InvariantViolation, UnsupportedCaseError
from exactident.io.case import parse_case
from exactident.linalg import exact, floating
from exactident.model.activation import activation_state
from exactident.model.fixed_edges import fixed_edges
from exactident.model.gamma import gamma_exact
from exactident.numeric.numpy_backend import float_operators


def _case(widths, W, b, X, name="t"):
    return parse_case(case_obj(widths, W, b, X, name))


def _all_active_case():
    """[2,3,1], positive weights/biases/inputs: every neuron active at every sample.

    Then f(x) = W_2 (W_1 x + b_1) + b_2 is affine on the sample, every Gamma row is
    (W_2[v] x_j for v, j ; W_2[v] for v ; 1) and lies in the span of the
    N_0 + 1 = 3 vectors obtained from x_1, x_2, 1: rank Gamma = 3 < dim = 10
    (generic samples give exactly 3).  Weights like 1/3, 2/7 are not binary, so
    rounding to float32 leaves residual singular values near 1e-7 sigma_max.
    """
    W1 = [[Fraction(1, 3), Fraction(2, 7)], [Fraction(3, 5), Fraction(1, 9)], [Fraction(5, 11), Fraction(4, 13)]]
    b1 = [Fraction(1, 7), Fraction(2, 3), Fraction(1, 5)]
    W2 = [[Fraction(1, 3), Fraction(-5, 7), Fraction(2, 9)]]
    rng = random.Random(7)
    X = [[Fraction(rng.randint(1, 99), 37), Fraction(rng.randint(1, 99), 41)] for _ in range(12)]
    return _case([2, 3, 1], [W1, W2], [b1, [Fraction(1, 3)]], X, "all-active")


def _known_rank_matrix(m, n, r, seed):
    """Integer matrix A B with A (m x r), B (r x n) random: rank r (FLINT checks it), t-rref style."""
    rng = random.Random(seed)
    A = flint.fmpz_mat(m, r, [rng.randint(-9, 9) for _ in range(m * r)])
    B = flint.fmpz_mat(r, n, [rng.randint(-9, 9) for _ in range(r * n)])
    M = A * B
    return M, M.rank()


@pytest.mark.parametrize("m,n,r,seed", [(8, 6, 3, 1), (12, 10, 9, 2), (5, 5, 5, 3), (6, 9, 1, 4)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_band_reproduces_exact_rank_at_both_ends(m, n, r, seed, dtype):
    M, r_exact = _known_rank_matrix(m, n, r, seed)
    Mf = np.array([[int(M[i, j]) for j in range(n)] for i in range(m)], dtype=dtype)
    s = floating.rank(Mf).singular_values
    lo, hi = floating.consistent_band(s, r_exact)
    assert lo < hi
    # Step to the neighbouring float *of the matrix's dtype*: numpy compares a float32
    # array with a Python float in float32 (NEP 50), so a float64 step can vanish.
    def below(v):
        return float(np.nextafter(dtype(v), dtype(0)))

    # Inside, at both ends: [lo, hi) is half-open because rank counts s > tol.
    assert floating.rank(Mf, tol=lo).rank == r_exact
    assert floating.rank(Mf, tol=below(hi)).rank == r_exact
    # Just outside, at both ends.
    assert floating.rank(Mf, tol=hi).rank == r_exact - 1
    if lo > 0:
        assert floating.rank(Mf, tol=below(lo)).rank == r_exact + 1


def test_band_on_gamma_of_a_rank_deficient_case():
    case = _all_active_case()
    net, X = case.network, case.X
    st = activation_state(net, X)
    fixed = fixed_edges(net)
    r = exact.rank(gamma_exact(net, X, st.Z, st.pattern, fixed))
    assert r == 3  # N_0 + 1, see _all_active_case
    G = float_operators(net, X, fixed, st.pattern, np.float64).gamma
    lo, hi = floating.consistent_band(floating.rank(G).singular_values, r)
    assert floating.rank(G, tol=lo).rank == r and floating.rank(G, tol=hi).rank == r - 1
    assert floating.rank(G, tol=float(np.nextafter(lo, 0))).rank == r + 1


def test_band_conventions_and_error():
    s = np.array([3.0, 2.0, 0.0])
    assert floating.consistent_band(s, 0) == (3.0, float("inf"))
    assert floating.consistent_band(s, 3) == (0.0, 0.0)  # empty: a zero singular value can't count
    assert floating.consistent_band(np.array([3.0, 2.0]), 2) == (0.0, 2.0)
    with pytest.raises(InvariantViolation, match="rank 4 outside"):
        floating.consistent_band(s, 4)


def test_float32_with_float64_eps_over_counts():
    case = _all_active_case()
    net, X = case.network, case.X
    st = activation_state(net, X)
    ops = float_operators(net, X, fixed_edges(net), st.pattern, np.float32)
    assert ops.gamma.dtype == np.float32
    s = ops.gamma_singular_values()
    m, n = ops.gamma.shape
    eps32, eps64 = np.finfo(np.float32).eps, np.finfo(np.float64).eps
    right = int((s > s[0] * max(m, n) * eps32).sum())
    pitfall = int((s > s[0] * max(m, n) * eps64).sum())
    assert right == 3  # the exact rank (derivation in _all_active_case)
    assert pitfall > 3  # float32 round-off (~1e-7 relative) counted as rank


def test_gamma_float64_matches_exact_gamma():
    case = _all_active_case()
    net, X = case.network, case.X
    st = activation_state(net, X)
    fixed = fixed_edges(net)
    Ge = gamma_exact(net, X, st.Z, st.pattern, fixed)
    Ge_f = np.array([[int(Ge[i, j].p) / int(Ge[i, j].q) for j in range(Ge.ncols())] for i in range(Ge.nrows())])
    for dtype, rel in ((np.float64, 1e-13), (np.float32, 1e-5)):
        G = float_operators(net, X, fixed, st.pattern, dtype).gamma
        assert G.shape == (12, 10)
        assert np.allclose(G, Ge_f, rtol=rel, atol=rel)


def _kink_case(x3):
    """SPEC §2 network f = 3 relu(2x + 1), samples 0, 1, x3 (kink at -1/2)."""
    return _case([1, 1, 1], [[[2]], [[3]]], [[1], [0]], [[0], [1], [x3]])


@pytest.mark.parametrize("offset,flips64,flips32", [
    # -1/2 - 1e-12: binary64 spacing near 1/2 is 2^-53 ~ 1.1e-16, so the side survives;
    # binary32 spacing 2^-25 ~ 3e-8 rounds it to -1/2: z = 0 counts as active (flip).
    (Fraction(-1, 10**12), 0, 1),
    # -1/2 - 1e-17 rounds to -1/2 even in binary64.
    (Fraction(-1, 10**17), 1, 1),
    # +1e-12 is active exactly; rounding to -1/2 gives z = 0, still active: no flip.
    (Fraction(1, 10**12), 0, 0),
])
def test_pattern_flips_near_a_kink(offset, flips64, flips32):
    case = _kink_case(Fraction(-1, 2) + offset)
    st = activation_state(case.network, case.X)
    fixed = fixed_edges(case.network)
    assert float_operators(case.network, case.X, fixed, st.pattern, np.float64).n_pattern_flips == flips64
    assert float_operators(case.network, case.X, fixed, st.pattern, np.float32).n_pattern_flips == flips32


def test_check_numeric_block_band_and_agrees():
    """SPEC §2 network, samples 0, 1, 2: rank 2 exactly; numpy's default gets it (agrees)."""
    r = check(_case([1, 1, 1], [[[2]], [[3]]], [[1], [0]], [[0], [1], [2]]))
    num = r.numeric
    assert r.verdict == "not-identifiable" and num["agrees"] is True
    lo, hi = num["band"]["abs"]
    assert num["band"]["rank"] == 2 and lo <= num["tol"] < hi and num["band"]["tol_inside"]
    # Rows (0,3,1), (3,3,1), (6,3,1): sigma_2 is of order 1, far above the cut.
    assert hi > 0.5 and num["band"]["rel"][1] == pytest.approx(hi / np.linalg.svd(
        np.array([[0, 3, 1], [3, 3, 1], [6, 3, 1.0]]), compute_uv=False)[0])


# --- PyTorch backend --------------------------------------------------------------------------


def test_torch_missing_is_a_clear_error(monkeypatch):
    import sys

    from exactident.numeric.torch_backend import import_torch

    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(UnsupportedCaseError, match="needs PyTorch"):
        import_torch()


def test_torch_gamma_matches_numpy_and_exact():
    torch = pytest.importorskip("torch")
    from exactident.model.gamma import free_columns
    from exactident.numeric.torch_backend import build_sequential, gamma_torch

    case = _all_active_case()
    net, X = case.network, case.X
    st = activation_state(net, X)
    fixed = fixed_edges(net)
    model = build_sequential(net, "float64")
    Xt = torch.tensor([[int(v.p) / int(v.q) for v in row] for row in X], dtype=torch.float64)
    G = gamma_torch(model, Xt, free_columns(net, fixed)).numpy()
    Ge = gamma_exact(net, X, st.Z, st.pattern, fixed)
    Ge_f = np.array([[int(Ge[i, j].p) / int(Ge[i, j].q) for j in range(Ge.ncols())] for i in range(Ge.nrows())])
    assert G.shape == (12, 10) and np.allclose(G, Ge_f, rtol=1e-12, atol=1e-12)


def test_torch_relu_derivative_at_a_tie_is_zero():
    """At x = -1/2 (z = 0 exactly, also in floats) autograd's relu'(0) = 0: inactive.

    Exact >= 0 pattern: active (rows (3x, 3, 1), rank 2).  Torch's row for x = -1/2 is
    (0, 0, 1), so its Gamma has rank 3 and its pattern differs at one entry.
    """
    pytest.importorskip("torch")
    from exactident.numeric.torch_backend import torch_spectra

    case = _kink_case(Fraction(-1, 2))
    st = activation_state(case.network, case.X)
    sp = torch_spectra(case.network, case.X, fixed_edges(case.network), st.pattern, "float64")
    assert sp.n_pattern_flips == 1
    assert sp.native_default == (3, 3)


@pytest.mark.parametrize("name", ["boundary-dead-neuron", "boundary-second-layer", "tiny-111-kink"])
def test_agrees_on_the_boundary_compares_the_same_matrices(name):
    # A float tool computes Gamma and alpha at the >= 0 pattern; `agrees` must compare its
    # ranks with the exact ranks of exactly those matrices (rational reference path here),
    # not with the report's top-level ranks, which belong to another tie resolution.
    from pathlib import Path

    from exactident.io.case import load_case
    from exactident.model.activation import alpha_exact

    case = load_case(Path(__file__).resolve().parent.parent / "cases" / f"{name}.json")
    r = check(case, all_ranks=True)
    st = activation_state(case.network, case.X)
    fixed = fixed_edges(case.network)
    rg = exact.rank(gamma_exact(case.network, case.X, st.Z, st.pattern, fixed))
    ra = case.network.widths[-1] * exact.rank(alpha_exact(st.pattern, case.X))
    num = r.numeric
    assert num["compared_with"] == {"rank_gamma": rg, "rank_a": ra, "verdict": r.verdict}
    assert num["agrees"] == (num["verdict"] == r.verdict and num["rank_gamma"] == rg and num["rank_a"] == ra)
