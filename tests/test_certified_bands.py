"""Certified singular-value bounds (exactident.linalg.sigma_bounds) and crosscheck's certified conditioning."""

from __future__ import annotations

import math

import flint
import numpy as np
import pytest
import sympy

from exactident.crosscheck.certified import boundary_distance, certified_conditioning
from exactident.io.case import parse_case
from exactident.linalg.sigma_bounds import (
    certified_sigma_bounds,
    float_above,
    float_below,
    pd_exact,
    perturbation_bound,
)


def _rank_deficient(rng: np.random.Generator, m: int, n: int, r: int) -> np.ndarray:
    return rng.integers(-4, 5, (m, r)) @ rng.integers(-4, 5, (r, n))


@pytest.mark.parametrize("seed", range(6))
def test_bounds_contain_sympy_exact_singular_values(seed: int) -> None:
    # sigma_k^2 are the exact eigenvalues of A^T A (sympy, algebraic numbers evaluated to 40 digits).
    rng = np.random.default_rng(seed)
    m, n = int(rng.integers(3, 6)), int(rng.integers(2, 5))
    r = int(rng.integers(1, min(m, n) + 1))
    A = _rank_deficient(rng, m, n, r)
    exact_r = sympy.Matrix(A.tolist()).rank()
    gram = sympy.Matrix(A.T.tolist()) * sympy.Matrix(A.tolist())
    eig = sorted((sympy.re(sympy.N(e, 40)) for e, mult in gram.eigenvals().items() for _ in range(mult)),
                 reverse=True)
    sigma_r, sigma_1 = sympy.sqrt(eig[exact_r - 1]), sympy.sqrt(eig[0])
    b = certified_sigma_bounds(flint.fmpq_mat(A.tolist()), exact_r)
    assert b is not None and b.sigma_r_lo is not None
    assert b.sigma_r_lo <= sigma_r <= b.sigma_r_hi
    assert b.sigma_1_lo <= sigma_1 <= b.sigma_1_hi
    assert b.sigma_r_lo > 0


def test_hand_diagonal_and_rational() -> None:
    # diag(1/3, 2, 0, 0): sigma_1 = 2, sigma_2 = 1/3, rank 2.
    M = flint.fmpq_mat([[flint.fmpq(1, 3), 0, 0, 0], [0, 2, 0, 0], [0, 0, 0, 0]])
    b = certified_sigma_bounds(M, 2)
    assert b.sigma_r_lo <= 1 / 3 <= b.sigma_r_hi and b.sigma_r_lo > 0.33
    assert b.sigma_1_lo <= 2 <= b.sigma_1_hi


def test_wrong_rank_is_an_invariant_violation() -> None:
    from exactident.errors import InvariantViolation

    with pytest.raises(InvariantViolation):
        certified_sigma_bounds(flint.fmpq_mat([[1, 0], [0, 1]]), 1)


def test_ill_conditioned_small_case_goes_exact() -> None:
    # [[1, 1], [1, 1 + 1e-12]]: sigma_2 = 1e-12 / (2 + ...) roughly 5e-13, beyond a float64 Cholesky of A^T A.
    e = flint.fmpq(1, 10**12)
    M = flint.fmpq_mat([[1, 1], [1, 1 + e]])
    b = certified_sigma_bounds(M, 2)
    # det = e, sigma_1 sigma_2 = e, sigma_1 ~ 2: sigma_2 ~ e/2.
    assert b.sigma_r_lo is not None and 0.49e-12 < b.sigma_r_lo <= 0.5e-12 * (1 + 1e-9)
    s1 = b.sigma_1_hi
    assert b.sigma_r_lo <= 1e-12 / b.sigma_1_lo and b.sigma_r_hi >= 1e-12 / s1 * (1 - 1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_certified_band_reproduces_rank_in_float64(seed: int) -> None:
    # Integer matrices are exact in float64 (delta = 0): any tol inside (0, sigma_r_lo) well above the
    # SVD's own error gives the exact rank; a tol above sigma_r_hi loses it.
    rng = np.random.default_rng(100 + seed)
    m, n, r = 12, 9, int(rng.integers(2, 8))
    A = _rank_deficient(rng, m, n, r)
    b = certified_sigma_bounds(flint.fmpq_mat(A.tolist()), r)
    af = A.astype(np.float64)
    assert np.linalg.matrix_rank(af, tol=b.sigma_r_lo / 2) == r
    assert np.linalg.matrix_rank(af, tol=b.sigma_r_lo * (1 - 1e-6)) == r
    assert np.linalg.matrix_rank(af, tol=b.sigma_r_hi * 1.01) < r


def test_pd_exact() -> None:
    assert pd_exact(flint.fmpq_mat([[2, 1], [1, 2]]))
    assert not pd_exact(flint.fmpq_mat([[1, 2], [2, 1]]))  # det -3
    assert not pd_exact(flint.fmpq_mat([[1, 1], [1, 1]]))  # singular
    assert pd_exact(flint.fmpq_mat([[flint.fmpq(1, 10**30), 0], [0, 1]]))


def test_float_sqrt_bounds_are_directed() -> None:
    for q in (flint.fmpq(2), flint.fmpq(1, 3), flint.fmpq(10**40 + 1, 7)):
        lo, hi = float_below(q), float_above(q)
        assert flint.fmpq(*lo.as_integer_ratio()) ** 2 <= q <= flint.fmpq(*hi.as_integer_ratio()) ** 2
        assert math.nextafter(lo, math.inf) >= hi or hi - lo <= 2 * math.ulp(hi)


def test_perturbation_bound_is_an_upper_bound() -> None:
    M = flint.fmpq_mat([[flint.fmpq(1, 3), flint.fmpq(2, 7)]])
    approx = np.array([[1 / 3, 2 / 7]], dtype=np.float32)
    exact = math.sqrt(sum((float(flint.fmpq(*float(a).as_integer_ratio()) - q) ** 2
                           for a, q in zip(approx.ravel(), M.entries()))))
    assert perturbation_bound(M, approx) >= exact
    assert perturbation_bound(M, approx) <= 2 ** -24  # each entry is within half a float32 ulp


# f = 3 relu(2x + 1): samples 0 and 1 give z = 1 and 3, so |z| / ||[x, 1]|| = 1 and 3/sqrt(2):
# the minimum is 1 at sample 0; distance to the kink x = -1/2 in input space is |z|/|w| = 1/2.
_TINY = {"format": "exactident-case/1", "name": "t", "widths": [1, 1, 1], "weights": [[["2"]], [["3"]]],
         "biases": [["1"], ["0"]], "sample": [[0], [1], [2]]}


def test_boundary_distance_by_hand() -> None:
    d = boundary_distance(parse_case(_TINY))
    assert d is not None
    assert d["sample"] == 0 and d["layer"] == 1 and d["neuron"] == 0
    assert d["parameter_distance"] <= 1.0 and d["parameter_distance"] > 1 - 1e-15
    assert d["input_distance_layer1"] <= 0.5 and d["input_distance_layer1"] > 0.5 - 1e-15


def test_boundary_distance_zero_on_a_kink() -> None:
    case = dict(_TINY, sample=[[0], [1], ["-1/2"]])
    d = boundary_distance(parse_case(case))
    assert d["on_kink"] and d["parameter_distance"] == 0.0 and d["sample"] == 2


def test_certified_conditioning_rank_deficient_case() -> None:
    # Samples 0, 1, 2 all active: Gamma rows (3x, 3, 1) have rank 2 < dim 3; sigma_2 certified > 0.
    c = parse_case(_TINY)
    d = certified_conditioning(c, 2, 2, 3)
    g = d["gamma"]
    G = sympy.Matrix([[0, 3, 1], [3, 3, 1], [6, 3, 1]])
    eig = sorted((sympy.N(e, 40) for e in (G.T * G).eigenvals()), reverse=True)
    assert g["sigma_r_lo"] <= sympy.sqrt(eig[1]) <= g["sigma_r_hi"] and g["rank"] == 2
    assert d["alpha"]["rank"] == 2  # alpha rows (x, 1, 1): rank 2, used since rank_gamma < dim
    assert d["rounding"]["float64"]["resolvable"] and d["rounding"]["float64"]["delta"] == 0.0


@pytest.mark.parametrize("with_kernel", [False, True])
def test_tiny_sigma_beyond_float64_is_bracketed_exactly(with_kernel: bool) -> None:
    # [[1, 1], [1, 1 + e]], e = 10^-30: sigma_2 ~ e/2, far below float64's resolution of sigma_1 ~ 2
    # (the float SVD returns round-off); the exact bisection brackets it to 1e-6 relative.
    e = flint.fmpq(1, 10**30)
    rows = [[1, 1, 0], [1, 1 + e, 0], [0, 0, 0]] if with_kernel else [[1, 1], [1, 1 + e]]
    b = certified_sigma_bounds(flint.fmpq_mat(rows), 2)
    two = sympy.Matrix([[1, 1], [1, 1 + sympy.Rational(1, 10**30)]])
    eig = sorted((sympy.N(v, 80) for v in (two.T * two).eigenvals()), reverse=True)
    sigma_2 = sympy.sqrt(eig[1])
    assert b.sigma_r_lo <= sigma_2 <= b.sigma_r_hi
    assert b.sigma_r_hi <= b.sigma_r_lo * (1 + 1e-6)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_float_band_gives_the_exact_rank_on_the_float_gamma(dtype: str) -> None:
    # all-active network (rank_gamma = rank_a = 3 < dim 10, hand-derivable: f is affine on the sample).
    from exactident.model.activation import activation_state
    from exactident.model.fixed_edges import fixed_edges
    from exactident.numeric.numpy_backend import float_operators

    rng = np.random.default_rng(5)
    W1 = [[f"{int(v)}/4" for v in row] for row in rng.integers(1, 9, (3, 2))]
    case = parse_case({"format": "exactident-case/1", "name": "a", "widths": [2, 3, 1], "weights":
                       [W1, [["1/3", "2/7", "-5/11"]]], "biases": [["1", "2", "3"], ["0"]],
                       "sample": [[f"{i}/7", f"{(3 * i) % 5}/3"] for i in range(1, 13)]})
    d = certified_conditioning(case, 3, 3, 10)
    e = d["rounding"][dtype]
    assert e["resolvable"] and not e["pattern_differs"]
    lo, hi = e["float_band_abs"]
    net, X = case.network, case.X
    st = activation_state(net, X)
    G = float_operators(net, X, fixed_edges(net), st.pattern, dtype, with_alpha=False).gamma
    # Weyl bounds the exact singular values of G; the float64 SVD below adds at most ~ max(m, n) u sigma_1.
    svd_err = 12 * 2.0**-52 * d["gamma"]["sigma_1_hi"] * 4
    lo, hi = lo + svd_err, hi - svd_err
    for t in (lo * 1.01, math.sqrt(lo * hi), hi * 0.99):
        assert np.linalg.matrix_rank(G.astype(np.float64), tol=t) == 3


def test_out_of_float_range_is_not_certified_and_renders() -> None:
    # 10^400 has no float64: no candidate, a reason, JSON-ready (no nan), and the text still renders.
    import json

    from exactident.crosscheck.certified import render_certified

    b = certified_sigma_bounds(flint.fmpq_mat([[flint.fmpq(10) ** 400, 0], [0, 1]]), 2)
    assert b.sigma_r_lo is None and b.reason
    d = b.as_dict()
    json.dumps(d, allow_nan=False)
    assert "not certified" in render_certified({"gamma": d, "rounding": {}})[0]


def test_stored_dtype_is_named() -> None:
    from exactident.crosscheck.certified import render_certified

    case = parse_case(dict(_TINY, provenance={"weight_dtype": "float32"}))
    d = certified_conditioning(case, 2, 2, 3)
    assert d["stored_dtype"] == "float32"
    text = "\n".join(render_certified(d))
    assert "float32 (the model's stored dtype) rounding" in text and "float64 rounding" in text


def test_sigma_r_upper_bound_when_lapack_returns_a_kernel_vector_as_v_r(monkeypatch) -> None:
    # [[1, 1, 0], [1, 1 + e, 0], [0, 0, 0]]: float64 sees sigma_2 = sigma_3 = 0, and which unit
    # vector of that 2-dimensional singular space LAPACK returns as v_2 is its choice.  Forced here
    # to e_3, which spans ker A: its projection on the row space is 0, and the bound must still be
    # found (from the other singular vectors); by hand sigma_2 ~ e / 2 with e = 10^-30.
    real_svd = np.linalg.svd

    def svd_kernel_first(a, full_matrices=True):
        u = real_svd(a, full_matrices=full_matrices)[0]
        vt = np.array([[-2 ** -0.5, -2 ** -0.5, 0.0], [0.0, 0.0, 1.0], [-2 ** -0.5, 2 ** -0.5, 0.0]])
        return u, np.array([2.0, 0.0, 0.0]), vt

    monkeypatch.setattr(np.linalg, "svd", svd_kernel_first)
    e = flint.fmpq(1, 10**30)
    b = certified_sigma_bounds(flint.fmpq_mat([[1, 1, 0], [1, 1 + e, 0], [0, 0, 0]]), 2)
    assert b.sigma_r_lo is not None and b.sigma_r_hi is not None
    assert b.sigma_r_lo <= 0.5e-30 * (1 + 1e-6) and b.sigma_r_hi >= 0.5e-30 * (1 - 1e-6)
    assert b.sigma_r_hi <= 1e-29
