"""One float Gamma_free builder for any network, and one crosscheck for any network.

Truth comes from outside the code under test:

- a forward-mode Jacobian over ``fractions.Fraction`` written here (dual numbers through the
  layers, ``d/d theta_j`` of every output, the pattern read off the exact pre-activations with the
  ``>= 0`` convention), rounded once to float64;
- the plain MLP's float ``Gamma`` as practitioners compute it, written here in plain numpy
  (per layer ``D h^T`` and ``D``, then the free columns): the engine's float ``Gamma`` must be equal
  to it bit for bit on the shipped cases (the float pipeline emulates what people run);
- hand derivations in the docstrings for the crosscheck cases.
"""

from __future__ import annotations

import glob
import json
from fractions import Fraction
from pathlib import Path

import flint
import numpy as np
import pytest

from exactident.crosscheck.core import crosscheck_case
from exactident.io.case import load_case, parse_case
from exactident.model.activation import activation_state
from exactident.model.fixed_edges import fixed_edges
from exactident.model.gamma import free_columns
from exactident.model.network import Network
from exactident.numeric.float_network import to_float_network
from exactident.numeric.gamma_free import dense_columns, gamma_free_float
from exactident.numeric.numpy_backend import float_operators
from exactident.numeric.tolerance import Policy

ROOT = Path(__file__).resolve().parents[1]
F = Fraction


def _fraction_jacobian(widths, W, b, Wi, bi, slope, si, k, X):
    """``d f(x^i) / d theta`` by forward-mode dual numbers over Fraction (rows ``i N_L + o``)."""
    L = len(widths) - 1
    rows = []
    for x in X:
        h = [F(v) for v in x]
        dh = [[F(0)] * k for _ in h]  # dh[u][j] = d h_u / d theta_j
        for l in range(1, L + 1):
            z, dz = [], []
            for v in range(widths[l]):
                zv = sum((W[l - 1][v][u] * h[u] for u in range(widths[l - 1])), F(b[l - 1][v]))
                d = [sum((W[l - 1][v][u] * dh[u][j] for u in range(widths[l - 1])), F(0)) for j in range(k)]
                for u in range(widths[l - 1]):
                    if Wi[l - 1][v][u] >= 0:
                        d[Wi[l - 1][v][u]] += h[u]
                if bi[l - 1][v] >= 0:
                    d[bi[l - 1][v]] += 1
                z.append(zv)
                dz.append(d)
            if l == L:
                rows += dz
                break
            h, dh = [], []
            for v in range(widths[l]):
                a = F(slope[l - 1][v])
                if z[v] >= 0:
                    h.append(z[v])
                    dh.append(list(dz[v]))
                else:
                    h.append(a * z[v])
                    d = [a * t for t in dz[v]]
                    if si[l - 1][v] >= 0:
                        d[si[l - 1][v]] += z[v]
                    dh.append(d)
    return np.array([[float(t) for t in row] for row in rows], dtype=np.float64).reshape(len(rows), k)


def _net(widths, W, b, Wi, bi, slope, si, k):
    q = flint.fmpq
    return Network(tuple(widths), [flint.fmpq_mat([[q(v.numerator, v.denominator) for v in row]
                                                               for row in M]) for M in W],
                              [[q(v.numerator, v.denominator) for v in vec] for vec in b],
                              [np.array(I, dtype=np.int64) for I in Wi], [np.array(I, dtype=np.int64) for I in bi],
                              [[q(v.numerator, v.denominator) for v in s] for s in slope],
                              [np.array(I, dtype=np.int64) for I in si], k)


def _random_case(seed, kind):
    """Widths (2, 3, 3, 1), small rational values; ``kind`` picks the structure of ``T`` and the slopes."""
    rng = np.random.default_rng(seed)
    widths = (2, 3, 3, 1)
    L = len(widths) - 1
    W = [[[F(int(rng.integers(-5, 6)), int(rng.integers(1, 4))) for _ in range(widths[l - 1])]
          for _ in range(widths[l])] for l in range(1, L + 1)]
    b = [[F(int(rng.integers(-3, 4)), int(rng.integers(1, 3))) for _ in range(widths[l])] for l in range(1, L + 1)]
    slope = [[F(0)] * widths[l] for l in range(1, L)]
    si = [[-1] * widths[l] for l in range(1, L)]
    n_dense = sum(widths[l] * (widths[l - 1] + 1) for l in range(1, L + 1))
    order = list(range(n_dense))  # dense positions in the paper's order: W_l row-major, then b_l
    if kind == "fixed-edges":  # T selects entries in order: some weights fixed
        free = [p for p in order if p % 4 != 1]
    else:
        free = order
    idx = [-1] * n_dense
    perm = list(range(len(free)))
    if kind == "permuted":  # same entries, parameters numbered in another order: not a selection in order
        perm = [int(t) for t in rng.permutation(len(free))]
    for j, p in enumerate(free):
        idx[p] = perm[j]
    k = len(free)
    if kind == "tied-slopes":  # a convolution-like tie, a leaky unit, a PReLU slope shared by two units
        idx[1] = idx[0]  # W_1[0,1] tied to W_1[0,0]
        W[0][0][1] = W[0][0][0]
        remap = sorted(set(i for i in idx if i >= 0))
        idx = [remap.index(i) if i >= 0 else -1 for i in idx]
        k = len(remap)
        slope[0][1] = F(1, 10)
        slope[1][0] = slope[1][2] = F(1, 4)
        si[1][0] = si[1][2] = k
        k += 1
    Wi, bi, pos = [], [], 0
    for l in range(1, L + 1):
        Wi.append([[idx[pos + i * widths[l - 1] + j] for j in range(widths[l - 1])] for i in range(widths[l])])
        pos += widths[l] * widths[l - 1]
        bi.append(idx[pos:pos + widths[l]])
        pos += widths[l]
    X = [[F(int(rng.integers(-4, 5)), 2), F(int(rng.integers(-4, 5)), 3)] for _ in range(7)]
    return (widths, W, b, Wi, bi, slope, si, k), X


@pytest.mark.parametrize("kind, dense", [("plain", True), ("fixed-edges", True), ("permuted", False),
                                         ("tied-slopes", False)])
@pytest.mark.parametrize("seed", range(4))
def test_float_gamma_free_is_the_rounded_forward_mode_jacobian(kind, dense, seed):
    parts, X = _random_case(seed, kind)
    cn = _net(*parts)
    fnet = to_float_network(cn)
    assert (dense_columns(fnet) is not None) == dense  # the route is chosen by the structure of T and the slopes
    Xf = np.array([[float(v) for v in row] for row in X])
    G = gamma_free_float(fnet, Xf)
    ref = _fraction_jacobian(*parts, X)
    assert G.shape == ref.shape
    assert np.allclose(G, ref, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(ref).max()))


def _practitioner_gamma(net, X, cols, dtype):
    """The plain MLP's float Gamma as people compute it: backprop per layer, the fixed columns dropped."""
    Ws = [np.array([[float(v) for v in row] for row in M.tolist()], dtype=np.float64).astype(dtype) for M in net.W]
    bs = [np.array([float(v) for v in vec], dtype=np.float64).astype(dtype) for vec in net.b]
    Xf = np.array([[float(v) for v in row] for row in X], dtype=np.float64).astype(dtype).reshape(len(X),
                                                                                                 net.widths[0])
    H, P = [Xf], []
    for l in range(1, net.L):
        z = H[-1] @ Ws[l - 1].T + bs[l - 1]
        P.append(z >= 0)
        H.append(np.maximum(z, 0))
    n, N_L = Xf.shape[0], net.widths[-1]
    D = np.broadcast_to(np.eye(N_L, dtype=dtype), (n, N_L, N_L))
    blocks = []
    for l in range(net.L, 0, -1):
        dW = (D[:, :, :, None] * H[l - 1][:, None, None, :]).reshape(n, N_L, D.shape[2] * H[l - 1].shape[1])
        blocks.append(np.concatenate([dW, D], axis=2))
        if l > 1:
            D = (D @ Ws[l - 1]) * P[l - 2][:, None, :]
    full = np.concatenate(blocks[::-1], axis=2)
    return full.reshape(n * N_L, full.shape[2])[:, cols]


@pytest.mark.parametrize("path", sorted(glob.glob(str(ROOT / "cases" / "*.json"))))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_plain_mlp_float_gamma_is_what_practitioners_compute_bit_for_bit(path, dtype):
    # Every sample value and weight of the shipped cases is a short decimal or small rational: float() of the
    # Fraction rounds correctly, as the engine's rounding does, so the inputs are the same floats.
    case = load_case(path)
    net, X = case.network, case.X
    fixed = fixed_edges(net)
    ops = float_operators(net, X, fixed, activation_state(net, X).pattern, dtype, with_alpha=False)
    ref = _practitioner_gamma(net, X, free_columns(net, fixed), dtype)
    assert ops.gamma.dtype == ref.dtype and np.array_equal(ops.gamma, ref)


def _layer_graph_of(case_path):
    """The format-1 MLP at ``case_path`` written by hand as a format-2 layer graph (linear, relu, ..., linear)."""
    obj = json.loads(Path(case_path).read_text())
    layers, prev = [], "input"
    L = len(obj["weights"])
    for l in range(1, L + 1):
        layers.append({"name": f"fc{l}", "op": "linear", "inputs": [prev], "weight": obj["weights"][l - 1],
                       "bias": obj["biases"][l - 1]})
        prev = f"fc{l}"
        if l < L:
            layers.append({"name": f"relu{l}", "op": "relu", "inputs": [prev]})
            prev = f"relu{l}"
    return {"format": "exactident-case/2", "name": obj["name"], "input_shape": [obj["widths"][0]],
            "layers": layers, "output": prev, "sample": obj["sample"]}


@pytest.mark.parametrize("name", ["iris-mlp-4-8-8-3", "tiny-111-kink", "boundary-second-layer"])
def test_crosscheck_of_a_hand_written_t_identity_layer_graph_is_the_mlp_crosscheck(name):
    path = ROOT / "cases" / f"{name}.json"
    mlp = crosscheck_case(load_case(path))
    graph = crosscheck_case(parse_case(_layer_graph_of(path), source=str(path)))
    a, b = mlp.to_dict(), graph.to_dict()
    for d in (a, b):
        d.pop("seconds")
        d.pop("expected_verdict")
    assert a == b


def test_a_layer_graph_is_crosschecked_against_dim_free_not_the_parameter_count():
    """f(x) = c + v leaky_{1/10}(w x + b), w = 2, b = -1, v = 3, c = 0, at x = 1, 2, 3, 4 (w x + b > 0) and
    x = -1, -2, -3 (< 0).  By hand, the rows of Gamma_free over (w, b, v, c) are (v x, v, w x + b, 1) =
    (3x, 3, 2x - 1, 1) on the active side and (a v x, a v, a (w x + b), 1) = (3x, 3, 2x - 1, 10) / 10 on the
    other: the span of (3, 0, 2, 0), (0, 3, -1, 1) and (0, 3, -1, 10), rank 3.  The one positive rescaling
    (w, b, v) -> (s w, s b, v / s) keeps the function: dim_free = 4 - 1 = 3 < 4 parameters.  So the exact
    rank reaches dim_free (identifiable), and a float rank of 3 must read identifiable; held against the
    parameter count (4) it would read not-identifiable."""
    obj = {"format": "exactident-case/2", "name": "leaky-both-sides", "input_shape": [1],
           "layers": [{"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [["2"]], "bias": ["-1"]},
                      {"name": "act", "op": "leaky_relu", "inputs": ["fc1"], "negative_slope": "1/10"},
                      {"name": "fc2", "op": "linear", "inputs": ["act"], "weight": [["3"]], "bias": ["0"]}],
           "output": "fc2", "sample": [[str(x)] for x in (1, 2, 3, 4, -1, -2, -3)]}
    policy = Policy("float64", "rtol", 1e-8)
    c = crosscheck_case(parse_case(obj), [policy])
    assert c.spectra["float64"].gamma_shape == (7, 4)  # one column per free parameter
    assert (c.dim, c.pattern_rank_gamma, c.verdict, c.pattern_rank_a) == (3, 3, "identifiable", None)
    o = c.outcome(policy.name)
    assert (o.rank_gamma, o.rank_a, o.verdict, o.right_verdict, o.right_ranks) == (3, None, "identifiable", True,
                                                                                   True)
