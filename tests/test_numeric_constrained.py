"""The float Gamma_free of layer graphs (exactident.numeric.gamma_free, .block) against independent answers.

Right values come from the sympy oracle (tests/xverify_oracle.py: symbolic theta,
symbolic differentiation), from the plain engine's float backend (a plain MLP is the
constrained form with every entry free), and from hand derivations written below.
"""

from __future__ import annotations

import random

import flint
import numpy as np
import pytest
from xverify_oracle import F32_001, Oracle, conv1d_net, random_constrained, residual_net

from exactident.model.network import Network
from exactident.numeric.block import free_numeric_block
from exactident.numeric.float_network import FloatNetwork, to_float_network
from exactident.numeric.gamma_free import float_forward, free_float_rank, gamma_free_float
from exactident.numeric.torch_backend import gamma_free_torch

q = flint.fmpq


def _floats(X):
    return np.array([[float(v.p) / float(v.q) for v in row] for row in X], dtype=np.float64)


def _oracle_float(cn, X, active=None):
    G = Oracle.of(cn, X).gamma(active)
    return np.array(G.tolist(), dtype=np.float64).reshape(G.rows, G.cols)


@pytest.mark.parametrize("seed", range(6))
def test_float_gamma_matches_sympy_on_random_constrained_nets(seed):
    cn, X = random_constrained(seed, n=8)
    G = gamma_free_float(to_float_network(cn), _floats(X))
    exact = Oracle.of(cn, X).gamma()
    ref = np.array(exact.tolist(), dtype=np.float64)
    assert G.shape == ref.shape == (8 * 2, cn.n_params)
    assert np.allclose(G, ref, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(ref).max()))
    # well separated singular values on these small integer-like nets: the SVD rank is the exact rank
    assert free_float_rank(cn, X)[0].rank == Oracle.rank(exact)


def test_plain_mlp_is_the_plain_backend():
    rng = random.Random(3)
    w = (3, 4, 2)
    W = [flint.fmpq_mat(w[l + 1], w[l], [q(rng.randint(-4, 4), rng.randint(1, 3)) for _ in range(w[l] * w[l + 1])])
         for l in range(2)]
    b = [[q(rng.randint(-4, 4), 2) for _ in range(w[l + 1])] for l in range(2)]
    net = Network(w, W, b)
    X = [[q(rng.randint(-5, 5), 3) for _ in range(3)] for _ in range(6)]
    from exactident.numeric.gamma_free import gamma_float

    full = gamma_float(to_float_network(net), _floats(X), None, None)  # every weight and bias, same order
    assert np.array_equal(gamma_free_float(to_float_network(net), _floats(X)), full)


def test_residual_net_by_hand():
    # f(x) = x + w2 relu(w1 x + b1), w1 = 1, b1 = 0, w2 = 2 at x = 1, 2, -1:
    # d/dw1 = w2 x [z > 0], d/db1 = w2 [z > 0], d/dw2 = relu(z): rows (2, 2, 1), (4, 2, 2), (0, 0, 0)
    cn = residual_net(1, 0, 2)
    X = [[q(1)], [q(2)], [q(-1)]]
    G = gamma_free_float(to_float_network(cn), _floats(X))
    assert np.array_equal(G, np.array([[2.0, 2, 1], [4, 2, 2], [0, 0, 0]]))
    # one rescaling survives (the ReLU unit's; the carrier's is pinned by its fixed weight 1): dim_free = 2
    block = free_numeric_block(cn, X, 2, [np.array([[True, True], [True, True], [False, True]])], 2,
                                      "identifiable")
    assert (block["rank_gamma"], block["verdict"], block["agrees"], block["pattern_differs"]) == \
        (2, "identifiable", True, False)


def test_conv1d_by_hand():
    # one channel, kernel (u1, u2), bias c on pixels (x0, x1, x2); units y0 = u1 x0 + u2 x1 + c,
    # y1 = u1 x1 + u2 x2 + c; f = v1 relu(y0) + v2 relu(y1) + d.  With a_k = [y_k > 0]:
    # d/du1 = v1 a0 x0 + v2 a1 x1, d/du2 = v1 a0 x1 + v2 a1 x2, d/dc = v1 a0 + v2 a1,
    # d/dv1 = relu(y0), d/dv2 = relu(y1), d/dd = 1.
    u1, u2, c, v1, v2, d = 1, -1, 1, 2, 3, 0
    cn = conv1d_net(u1, u2, c, v1, v2, d)
    X = [[1, 0, 2], [0, 1, 0], [2, 1, 3], [3, 3, 1], [1, 2, 0]]
    rows = []
    for x0, x1, x2 in X:
        y0, y1 = u1 * x0 + u2 * x1 + c, u1 * x1 + u2 * x2 + c
        a0, a1 = int(y0 >= 0), int(y1 >= 0)
        rows.append([v1 * a0 * x0 + v2 * a1 * x1, v1 * a0 * x1 + v2 * a1 * x2, v1 * a0 + v2 * a1,
                     max(y0, 0), max(y1, 0), 1])
    Xq = [[q(v) for v in row] for row in X]
    assert np.array_equal(gamma_free_float(to_float_network(cn), _floats(Xq)), np.array(rows, dtype=float))


def test_relu_at_zero_is_active_in_floats_and_the_exact_pattern_can_be_passed():
    # a tie (z = 0 exactly, also in floats): the float pipeline takes the active side, as the paper's indicator
    cn = residual_net(1, -1, 2)
    X = [[q(1)], [q(3)]]
    G = gamma_free_float(to_float_network(cn), _floats(X))
    assert np.array_equal(G[0], [2.0, 2.0, 0.0])  # d/dw1 = w2 x, d/db1 = w2: active at z = 0; d/dw2 = relu(0) = 0
    inactive = [np.array([[False, True], [True, True]])]
    G_off = gamma_free_float(to_float_network(cn), _floats(X), inactive)
    assert np.array_equal(G_off[0], [0.0, 0.0, 0.0])
    assert np.allclose(G_off, _oracle_float(cn, X, [[[False, True], [True, True]]]))


def test_rounding_across_a_kink_is_seen_and_the_exact_pattern_repairs_it():
    # z = 3 * (1/3) - 1 - 10^-30 < 0 exactly, but 0.0 in float64 (b rounds to -1, 3 * fl(1/3) to 1): active in floats
    cn = residual_net(3, q(-1) - q(1, 10**30), 2)
    X = [[q(1, 3)], [q(1)]]
    exact = [np.array([[False, True], [True, True]])]
    fl_z = float_forward(to_float_network(cn), _floats(X))[1][0]
    assert fl_z[0, 0] == 0.0
    block = free_numeric_block(cn, X, 2, exact, 1, "inconclusive")
    assert block["pattern_differs"] is True and "band" not in block
    G = gamma_free_float(to_float_network(cn), _floats(X), exact)
    assert np.allclose(G, _oracle_float(cn, X), rtol=1e-12)


def test_leaky_slope_float32_is_not_one_hundredth():
    # PyTorch's LeakyReLU(0.01) stores float32(0.01) = 0.00999999977648258209228515625: its Gamma differs
    # from the one with slope 1/100 by ~2e-8 relative, far above float64 noise; the pipeline keeps the stored one
    def net(slope):
        return Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])], [[q(1)], [q(0)]],
                                  [np.array([[0]]), np.array([[2]])], [np.array([1]), np.array([-1])],
                                  [[slope]], [np.array([-1])], 3, ("leaky ReLU",))

    X = [[q(-3)], [q(-2)], [q(1)]]
    stored = net(q(int(F32_001.p), int(F32_001.q)))
    G32 = gamma_free_float(to_float_network(stored), _floats(X))
    assert np.allclose(G32, _oracle_float(stored, X), rtol=1e-15, atol=0)
    G100 = _oracle_float(net(q(1, 100)), X)
    rel = np.abs(G32[0] - G100[0]).max() / np.abs(G100[0]).max()
    assert 1e-8 < rel < 1e-7  # |float32(0.01) - 0.01| / 0.01 = 2.2e-8
    # d f / d w2 on the negative side is a z: the leaky unit is not dead
    assert G32[0, 2] == pytest.approx(float(F32_001) * -5)


def test_prelu_slope_column():
    # f = 3 prelu_a(2 x + 1): d f / d a = 3 min(z, 0); a shared by the hidden unit; a = 1/4
    cn = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])], [[q(1)], [q(0)]],
                            [np.array([[-1]]), np.array([[-1]])], [np.array([-1]), np.array([-1])],
                            [[q(1, 4)]], [np.array([0])], 1, ("PReLU",))
    X = [[q(-2)], [q(1)]]
    G = gamma_free_float(to_float_network(cn), _floats(X))
    assert np.array_equal(G[:, 0], [3.0 * -3, 0.0])


def test_torch_pipeline_matches():
    pytest.importorskip("torch")
    for seed in range(3):
        cn, X = random_constrained(seed, n=6)
        G = gamma_free_float(to_float_network(cn), _floats(X))
        assert np.allclose(gamma_free_torch(cn, X), G, rtol=1e-12, atol=1e-12)
    block = free_numeric_block(residual_net(1, 0, 2), [[q(1)], [q(2)]], 2,
                                      [np.array([[True, True], [True, True]])], 2, "identifiable", torch=True)
    assert block["torch"]["rank_gamma"] == 2 and block["pipelines"] == ["float64", "torch"]


def test_a_float_zero_of_either_sign_is_a_tie_on_the_active_side():
    # z = (-1) * 0.0 + (-0.0) is a zero (BLAS may give +0.0 or -0.0); -0.0 >= 0 is True: slope 1 either way
    fcn = FloatNetwork((1, 1, 1), [np.array([[-1.0]]), np.array([[2.0]])], [np.array([-0.0]), np.array([0.0])],
                       slope=[np.array([0.25])], W_index=[np.array([[0]]), np.array([[1]])],
                       b_index=[np.array([-1]), np.array([-1])], slope_index=[np.array([-1])], n_params=2)
    _H, Z, deriv = float_forward(fcn, np.array([[0.0]]))
    assert Z[0][0, 0] == 0.0 and deriv[0][0, 0] == 1.0
    fcn.W[0] = np.array([[1.0]])  # z = 1 * (-0.0) + (-0.0)
    assert float_forward(fcn, np.array([[-0.0]]))[2][0][0, 0] == 1.0
    assert np.array_equal(gamma_free_float(fcn, np.array([[0.0]])), [[0.0, 0.0]])  # d/dw1 = 2 x = 0, d/dv = h = 0


def test_rescaling_the_channel_changes_no_rank():
    # (u1, u2, c) * 2 and (v1, v2) / 2 is the channel's rescaling: same function, same ranks, same dim_free
    from exactident.verify.facts import ConstrainedFacts
    from exactident.verify.gamma import rank_mod_p, verifier_primes

    X = [[q(v) for v in row] for row in [[1, 0, 2], [0, 1, 0], [2, 1, 3], [3, 3, 1], [1, 2, 0], [2, 0, 1]]]
    a, b = conv1d_net(1, -1, 1, 2, 3, 0), conv1d_net(2, -2, 2, 1, q(3, 2), 0)
    fa, fb = ConstrainedFacts.from_network(a, X), ConstrainedFacts.from_network(b, X)
    assert fa.symmetry.dim_free == fb.symmetry.dim_free == 5 and fa.ties == fb.ties
    p = verifier_primes(1, fa.avoid * fb.avoid)[0]
    assert rank_mod_p(fa.gamma_mod_p(p), p) == rank_mod_p(fb.gamma_mod_p(p), p) == Oracle.rank(Oracle.of(a, X).gamma())
    assert free_float_rank(a, X)[0].rank == free_float_rank(b, X)[0].rank


def test_float32_default_tolerance_loses_rank_on_a_tall_gamma():
    # f = x + 2 relu(x) at 2000 points x = 1 + i 2^-22 (exact in float32): Gamma_free rows (2x, 2, x), so
    # column 3 = column 1 / 2 and columns 1, 2 are independent (x varies): exact rank 2.  sigma_2 / sigma_1 is
    # about 7e-5, below float32's default cut 2000 eps_32 = 2.4e-4 but far above float64's 4.4e-13
    cn = residual_net(1, 0, 2)
    X = [[q(1) + q(i, 2**22)] for i in range(2000)]
    assert free_float_rank(cn, X, dtype="float64")[0].rank == 2
    r32 = free_float_rank(cn, X, dtype="float32")[0]
    assert r32.rank == 1 and r32.singular_values[1] < r32.tol


def _residual_dead_case():
    """Residual ReLU net res = relu1 + relu2(fc2 relu1), fc1 unit 2 dead (bias -10, |fc1 row 2 . x| <= 4 on the
    sample), head 1x3. By hand: 6 + 3 + 9 + 3 + 3 + 1 = 25 parameters, 3 rescalings (each relu1 unit with its
    stream coordinate and relu2 unit), dim_free = 22; 16 samples x 1 output bound the rank by 16."""
    import itertools

    from exactident import parse_case

    sample = [[a, b] for a, b in itertools.product([-2, -1, 0, 1, 2], [-2, -1, 1, 2])][:16]
    return parse_case({
        "format": "exactident-case/2", "name": "res-dead", "input_shape": [2], "output": "head", "sample": sample,
        "layers": [
            {"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [[1, 2], [-1, "1/2"], [1, 1]],
             "bias": ["1/3", "1/4", -10]},
            {"name": "relu1", "op": "relu", "inputs": ["fc1"]},
            {"name": "fc2", "op": "linear", "inputs": ["relu1"],
             "weight": [[1, -1, 2], ["1/2", 1, -1], [-1, "1/3", 1]], "bias": ["1/5", "-1/7", "1/2"]},
            {"name": "relu2", "op": "relu", "inputs": ["fc2"]},
            {"name": "res", "op": "add", "inputs": ["relu1", "relu2"]},
            {"name": "head", "op": "linear", "inputs": ["res"], "weight": [[1, -2, "1/2"]], "bias": [0]}]})


def test_float_rank_is_held_against_a_certified_interval_as_for_the_plain_mlp():
    # Regression: beside a certified interval of rank Gamma_free (a dead unit decides the verdict, the exact
    # rank is not needed) the layer graph's float block said agrees = null, shown as
    # "not-identifiable (exact not reached)" (the resolution cap's wording), where the plain MLP's block
    # holds the float rank against the interval. The exact rank (exact_ranks=True) is the independent value.
    import exactident
    from exactident.io.report import _float_cell

    case = _residual_dead_case()
    exact = exactident.check(case, numeric=False, exact_ranks=True, progress=False)
    assert exact.dim == 22 and exact.verdict == "not-identifiable"
    r = exactident.check(case, progress=False)
    assert r.rank_gamma is None and r.verdict == "not-identifiable"
    lo, hi = r.rank_gamma_interval
    assert lo <= exact.rank_gamma <= hi <= 16
    num = r.numeric
    assert num["compared_with"]["rank_gamma_interval"] == [lo, hi]
    assert num["rank_gamma"] == exact.rank_gamma  # a small well-conditioned Gamma_free: float64 finds it
    assert num["agrees"] is True and _float_cell(num) == "agrees"
