"""One test per item of ``docs/pitfalls.md`` that applies to the current code.

Skipped on purpose: the ``nmod_mat`` composite-modulus abort and the
``fmpz_mat.rank`` performance cliff (modular ranks are built elsewhere).
Each test first shows the trap in the library, then that exactident avoids it.
"""

from __future__ import annotations

import json
import math
import time
from decimal import Decimal
from fractions import Fraction

import flint
import numpy as np
import pytest
import sympy as sp
from _gen import case_obj

from exactident.check import check
from exactident.errors import CaseFormatError
from exactident.io.case import parse_case, read_json
from exactident.io.rationals import parse_number, to_fmpq
from exactident.linalg import exact, floating
from exactident.model.activation import activation_state, resolve_ties
from exactident.model.fixed_edges import fixed_edges
from exactident.model.gamma import gamma_exact
from exactident.numeric.block import numeric_check
from exactident.numeric.float_network import FloatNetwork
from exactident.numeric.gamma_free import float_pattern

# --------------------------------------------------------------------------- python-flint

@pytest.mark.parametrize("value", [Fraction(1, 2), np.int64(3), 0.5, np.array([1])])
def test_flint_rejects_foreign_numbers_and_to_fmpq_converts_fraction(value):
    with pytest.raises(TypeError):
        flint.fmpq(value)
    with pytest.raises(TypeError):
        flint.fmpq_mat([[value]])
    if isinstance(value, Fraction):
        assert to_fmpq(value) == flint.fmpq(1, 2)
    else:
        with pytest.raises(TypeError):
            to_fmpq(value)


def test_flint_rejects_decimal_strings_and_parse_number_reads_them():
    with pytest.raises(ValueError):
        flint.fmpq("0.5")
    assert parse_number("0.5", "a.json", "x") == flint.fmpq(1, 2)


def test_fmpz_nullspace_padding_is_dropped():
    assert not hasattr(flint.fmpq_mat, "nullspace")
    Z = flint.fmpz_mat([[1, 2, 3], [2, 4, 6]])
    K, nullity = Z.nullspace()
    assert (K.nrows(), K.ncols(), nullity) == (3, 3, 2)  # padded with a zero column
    ours = exact.nullspace(flint.fmpq_mat([[1, 2, 3], [2, 4, 6]]))
    assert (ours.nrows(), ours.ncols()) == (3, 2)
    assert exact.rank(ours) == 2


def test_rref_and_inv_return_types_differ():
    """Not used by exactident today; pinned so a future user of rref/inv is warned."""
    assert len(flint.fmpz_mat([[1, 2], [3, 4]]).rref()) == 3  # (rref, den, rank)
    assert len(flint.fmpq_mat([[1, 2], [3, 4]]).rref()) == 2  # (rref, rank)
    assert isinstance(flint.fmpz_mat([[1, 2], [3, 4]]).inv(), flint.fmpq_mat)


def test_empty_matrices_in_flint_and_in_check():
    assert flint.fmpz_mat(0, 3).rank() == 0 and flint.fmpq_mat(0, 0).rank() == 0
    assert exact.rank(flint.fmpq_mat(3, 0)) == 0
    r = check(parse_case(case_obj([2, 1], [[[1, 1]]], [[0]], [])), all_ranks=True)
    assert (r.rank_gamma, r.rank_a, r.verdict) == (0, 0, "not-identifiable")


# --------------------------------------------------------------------------- sympy

def test_oracle_ranks_use_domainmatrix_not_matrix_rank():
    from test_oracle import Oracle

    rng = np.random.default_rng(3)
    rows = [[int(v) for v in row] for row in rng.integers(-9, 10, size=(22, 22))]
    rows[21] = [a + 2 * b for a, b in zip(rows[0], rows[1])]  # rank at most 21
    start = time.perf_counter()
    r = Oracle.rank(sp.Matrix(rows))
    assert time.perf_counter() - start < 2.0  # Matrix.rank would take ~20 s
    assert r == exact.rank(flint.fmpq_mat(rows)) <= 21


def test_sympy_float_entries_give_wrong_ranks():
    rows = [["0.1", "0.2", "0.3"], ["0.4", "0.5", "0.6"], ["0.7", "0.8", "0.9"]]
    assert sp.Matrix([[sp.Float(v) for v in r] for r in rows]).rank() == 3  # wrong
    assert sp.Matrix([[sp.Rational(v) for v in r] for r in rows]).to_DM().rank() == 2  # right
    # the oracle builds only Rational/Integer entries
    from test_oracle import CASES, _build

    widths, seed, n, rational = CASES[5].values
    orc = _build(widths, seed, n, rational)[2]
    for M in (orc.gamma, orc.alpha, orc.phi, orc.dpsi):
        assert all(isinstance(e, sp.Rational) for e in M)


def test_symbolic_rank_is_generic_substitute_first():
    a = sp.Symbol("a")
    M = sp.Matrix([[a, 1], [1, a]])
    assert M.rank() == 2                  # generic rank
    assert M.subs(a, 1).rank() == 1       # rank at the point
    from test_oracle import CASES, _build

    orc = _build(*CASES[0].values)[2]
    assert orc.gamma.free_symbols == set() and orc.dpsi.free_symbols == set()


# --------------------------------------------------------------------------- floating point and ReLU at 0

def test_one_sided_jacobians_at_a_tie_have_different_ranks():
    """SPEC §2's kink: x = -1/2 has z = 0.  relu'(0) = 1 gives row (3x, 3, 1) = (-3/2, 3, 1),
    rank 2 with the rows of x = 0, 1; relu'(0) = 0 gives (0, 0, 1), rank 3.  So the tie is
    reported, never resolved silently."""
    case = parse_case(case_obj([1, 1, 1], [[[2]], [[3]]], [[1], [0]], [[0], [1], [Fraction(-1, 2)]]))
    net, X = case.network, case.X
    st = activation_state(net, X)
    fixed = fixed_edges(net)
    ranks = [exact.rank(gamma_exact(net, X, st.Z, resolve_ties(st.pattern, st.ties, [side]), fixed))
             for side in (True, False)]
    assert ranks == [2, 3]
    r = check(case, numeric=False)
    assert r.on_boundary and r.n_ties == 1
    assert r.verdict != "identifiable"  # the inactive side alone would have said C_S


def test_negative_zero_is_a_tie():
    """``-0.0 >= 0`` is True, so the float pattern's ``z >= 0`` marks a ``-0.0`` pre-activation
    active: the SPEC's ``>= 0`` convention at a tie.  (On this numpy, matmul accumulates from
    ``+0.0``, so ``x = -0.0, b = -0.0`` even gives ``z = +0.0``; either zero is active.)  The
    float backend has no notion of ties; the exact path reads ``-0.0`` as 0 and reports the tie.
    """
    assert (np.array([-0.0]) >= 0).tolist() == [True]
    fnet = FloatNetwork((1, 1, 1), [np.array([[1.0]]), np.array([[1.0]])], [np.array([-0.0]), np.array([0.0])])
    assert float_pattern(fnet, np.array([[-0.0], [-1.0]]))[0].tolist() == [[True], [False]]
    case = parse_case({"format": "exactident-case/1", "name": "negzero", "widths": [1, 1, 1],
                       "weights": [[[1]], [[1]]], "biases": [[Decimal("-0.0")], [0]],
                       "sample": [[Decimal("-0.0")], ["-0"], [1]]})
    assert case.X[0][0] == 0 and case.network.b[0][0] == 0
    r = check(case, numeric=False)
    assert (r.on_boundary, r.n_ties) == (True, 2)


def test_summation_order_and_rounding_can_flip_a_pattern():
    # 1e16 - 1 - 1e16 is -1, but left-to-right float64 gives 0.0 (1e16 - 1 rounds to 1e16)
    assert (1e16 + -1.0) + -1e16 == 0.0 and math.fsum([1e16, -1.0, -1e16]) == -1.0
    # the exact path has z = -1 (inactive) for that neuron
    case = parse_case(case_obj([3, 1, 1], [[[10**16, -1, -10**16]], [[1]]], [[0], [0]], [[1, 1, 1]]))
    assert activation_state(case.network, case.X).Z[0].entries() == [-1]
    # rounding the input: x = 1/10 - 10^-30 rounds to fl(0.1); with b = -1/10, the exact
    # z = -10^-30 < 0 (inactive) becomes float 0.0 (active): the report says so.
    x = Fraction(1, 10) - Fraction(1, 10**30)
    case = parse_case(case_obj([1, 1, 1], [[[1]], [[1]]], [[Fraction(-1, 10)], [0]], [[x], [1]]))
    st = activation_state(case.network, case.X)
    assert st.pattern[0].ravel().tolist() == [False, True] and st.ties == []
    res = numeric_check(case.network, case.X, fixed_edges(case.network), st.pattern, False)
    assert res.pattern_differs is True
    assert check(case).numeric["pattern_differs"] is True


def test_numpy_default_tolerance_formula_and_tall_matrices():
    M = np.diag([1.0, 1e-14])
    for m in (2, 100, 10_000):
        T = np.zeros((m, 2))
        T[:2] = M
        r = floating.rank(T)
        assert r.tol == pytest.approx(1.0 * m * np.finfo(np.float64).eps)
        assert r.rank == np.linalg.matrix_rank(T)
    # the same well-separated singular value 1e-14 counts with 2 rows, not with 100
    assert [floating.rank(np.vstack([M, np.zeros((m - 2, 2))])).rank for m in (2, 100)] == [2, 1]


def test_float32_judged_with_float64_eps_overcounts():
    rng = np.random.default_rng(0)
    A = (rng.standard_normal((200, 3)) @ rng.standard_normal((3, 20))).astype(np.float32)  # rank 3
    r = floating.rank(A)  # dtype-aware: float32 eps
    assert r.rank == 3 and r.tol == pytest.approx(float(r.singular_values[0]) * 200 * np.finfo(np.float32).eps)
    wrong = floating.rank(A, tol=float(r.singular_values[0]) * 200 * np.finfo(np.float64).eps)
    assert wrong.rank > 3


def test_fraction_of_float_and_mixing_with_float():
    assert Fraction(0.1) == Fraction(3602879701896397, 36028797018963968) != Fraction(1, 10)
    mixed = Fraction(1, 10) + 0.1
    assert isinstance(mixed, float)
    with pytest.raises(TypeError, match="inexact"):
        to_fmpq(mixed)
    with pytest.raises(CaseFormatError, match="is not exact"):
        parse_number(0.1, "a.json", "sample[0][0]")


def test_snapping_a_float_weight_can_create_a_false_tie():
    """0.3333333 is a dyadic rational close to, but not, 1/3.  With b = -1/3 the exact sample
    0.3333333 is off the kink; snapping it (limit_denominator) analyses a different network
    whose sample sits on the kink.  exactident never snaps: Fraction(float) is exact."""
    x = Fraction(0.3333333)
    snapped = x.limit_denominator(10)
    assert snapped == Fraction(1, 3) and x != snapped
    exact_case = parse_case(case_obj([1, 1, 1], [[[1]], [[1]]], [[Fraction(-1, 3)], [0]], [[x]]))
    snapped_case = parse_case(case_obj([1, 1, 1], [[[1]], [[1]]], [[Fraction(-1, 3)], [0]], [[snapped]]))
    assert check(exact_case, numeric=False).n_ties == 0
    assert check(snapped_case, numeric=False).n_ties == 1


def test_json_decimals(tmp_path):
    p = tmp_path / "n.json"
    p.write_text('{"a": 0.1, "b": 1e-400, "c": 123456789012345678901234567890, "d": 0.12345678901234567890123}')
    data = read_json(p)
    assert json.loads(p.read_text())["b"] == 0.0  # the plain float reader loses it
    assert parse_number(data["a"], "n", "a") == flint.fmpq(1, 10)
    assert parse_number(data["b"], "n", "b") == flint.fmpq(1, 10**400)
    assert parse_number(data["c"], "n", "c") == flint.fmpq(123456789012345678901234567890)
    assert parse_number(data["d"], "n", "d") == flint.fmpq(12345678901234567890123, 10**23)
    p.write_text('{"a": NaN}')
    with pytest.raises(CaseFormatError, match=r"n: a: expected a finite number, found NaN"):
        parse_number(read_json(p)["a"], "n", "a")


# --- floating point: range and rounding (issue 13) ----------------------------------------------


def test_int_division_overflows_where_floats_saturate():
    """``int / int`` raises OverflowError past float64's range (the crash behind issue 13, item 1),
    while the float operations return inf; exactident's rounding returns inf."""
    from exactident.numeric.rounding import round_rational

    with pytest.raises(OverflowError):
        _ = 10**350 / 1
    assert float("inf") == 1e308 * 10 and round_rational(10**350, 1) == float("inf")


def test_lapack_on_non_finite_input():
    """LAPACK's SVD given nan raises LinAlgError, given inf returns nan (a full SVD of a 5 x 3 matrix
    with one inf did not return here: never call it on non-finite input)."""
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.svd(np.array([[np.nan, 1.0], [1.0, 1.0]]), compute_uv=False)
    assert np.isnan(np.linalg.svd(np.array([[np.inf, 1.0], [1.0, 1.0]]), compute_uv=False)).all()


def test_einsum_is_silent_on_overflow_ufuncs_are_not():
    """``np.einsum`` does not report floating-point flags; ``*`` (a ufunc) does: the float backend
    uses broadcasting products so overflow and underflow are seen."""
    import warnings

    a = np.array([[1e200]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.einsum("ij,jk->ik", a, a)[0, 0] == np.inf
        with pytest.raises(RuntimeWarning, match="overflow"):
            _ = a * a


def test_double_rounding_through_float64():
    """Rational -> float64 -> float32 rounds twice: 1 + 2^-24 + 2^-60 lands on a float32 midpoint
    and goes to 1.0; correctly rounded it is 1 + 2^-23."""
    from exactident.numeric.rounding import round_rational

    q = Fraction(1) + Fraction(1, 2**24) + Fraction(1, 2**60)
    assert float(np.float32(float(q))) == 1.0
    assert round_rational(q.numerator, q.denominator, "float32") == 1 + 2**-23


def test_float32_jacobian_ranked_as_float64_counts_the_fixed_edge_columns():
    """The full Jacobian (fixed edges included) of f = 3 relu(2x + 1) has an exactly dependent column
    (df/dW_2 = (2x df/dW_1 + df/db_1) / 3 on active samples); non-binary weights leave float32
    round-off in it, which float64's eps counts as rank."""
    obj = case_obj([1, 1, 1], [[[Fraction(2, 3)]], [[Fraction(3, 7)]]], [[Fraction(1, 5)], [0]],
                   [[Fraction(k, 3)] for k in range(-3, 4)])
    case = parse_case(obj)
    st = activation_state(case.network, case.X)
    from exactident.model.fixed_edges import FixedEdges
    from exactident.numeric.full_jacobian import numpy_full_jacobian_svd

    s, shape, eps32 = numpy_full_jacobian_svd(case.network, case.X, st.pattern, "float32")
    exact_rank = exact.rank(gamma_exact(case.network, case.X, st.Z, st.pattern, FixedEdges({})))
    # active rows x (W_2, 0, w_1, 0) + (0, W_2, b_1, 1) span 2 dimensions, inactive ones add (0, 0, 0, 1)
    assert exact_rank == 3 and shape == (7, 4)
    assert int((s > s[0] * max(shape) * eps32).sum()) == 3
    assert int((s > s[0] * max(shape) * np.finfo(np.float64).eps).sum()) == 4
