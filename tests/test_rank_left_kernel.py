"""Left kernel vectors of Gamma from the last hidden layer: checked by an exact product with gamma_exact."""

from __future__ import annotations

import random

import flint
import pytest

from exactident.linalg import exact
from exactident.model.activation import activation_state
from exactident.model.fixed_edges import fixed_edges
from exactident.model.gamma import gamma_exact
from exactident.model.network import Network
from exactident.ranks.left_kernel import last_layer_left_kernel


def _check(net, X):
    st = activation_state(net, X)
    fixed = fixed_edges(net)
    G = gamma_exact(net, X, st.Z, st.pattern, fixed)
    ys = last_layer_left_kernel(net, X, st.pattern, fixed)
    rows = G.nrows()
    if ys:
        Y = flint.fmpq_mat(len(ys), rows)
        for j, y in enumerate(ys):
            for r, v in y.items():
                Y[j, r] = v
        assert not any(v != 0 for v in (Y * G).entries())  # y^T Gamma = 0 over Q
        assert exact.rank(Y) == len(ys)  # independent
    assert exact.rank(G) <= rows - len(ys)
    return G, ys


def _net(rng, widths, scale=4):
    W = [flint.fmpq_mat(widths[l + 1], widths[l],
                        [rng.randint(-scale, scale) for _ in range(widths[l] * widths[l + 1])])
         for l in range(len(widths) - 1)]
    b = [[flint.fmpq(rng.randint(-scale, scale), rng.choice([1, 2, 3])) for _ in range(widths[l + 1])]
         for l in range(len(widths) - 1)]
    return Network(widths, W, b)


@pytest.mark.parametrize("seed", range(25))
def test_left_kernel_vectors_are_exact_and_independent(seed):
    rng = random.Random(seed)
    L = rng.randint(1, 3)
    widths = tuple([rng.randint(1, 4)] + [rng.randint(1, 4) for _ in range(L)])
    net = _net(rng, widths)
    X = [[flint.fmpq(rng.randint(-5, 5), rng.choice([1, 2])) for _ in range(widths[0])]
         for _ in range(rng.randint(0, 9))]
    _check(net, X)


def test_last_layer_with_fewer_active_neurons_than_outputs_gives_the_whole_deficiency():
    """3 outputs fed by 2 hidden neurons: every sample's 3 rows have a combination c with
    c^T W_2 = 0, and its image c (x) (h, 1) lies in a 1 x 3 space; 8 samples give 8 unknowns and
    at most 3 equations: at least 5 vectors, and here exactly rows - rank Gamma (FLINT)."""
    rng = random.Random(3)
    net = _net(rng, (2, 2, 3))
    X = [[flint.fmpq(rng.randint(-5, 5)), flint.fmpq(rng.randint(-5, 5))] for _ in range(8)]
    G, ys = _check(net, X)
    assert len(ys) >= 5
    assert len(ys) == G.nrows() - exact.rank(G)
