"""``gamma_row_sketch_mod_p`` against the sketches of the built ``Gamma mod p``.

The fused sketch must hold the residues of ``sketch_rows_sparse(Gamma, k, p, seed=p)`` stacked over
``sketch_rows(Gamma, 16, p, random.Random(p))`` exactly (the lower bound's stack, and the image it returns),
with ``Gamma`` from ``gamma_mod_p`` (itself checked against ``gamma_exact`` in tests/test_gamma_modular.py):
random plain networks, one to three outputs, dead neurons, a fixed edge other than the default one, more
buckets than rows per bucket and the reverse.  And the lower bound that uses it returns what the built image
gives.
"""

from __future__ import annotations

import random

import flint
import numpy as np
import pytest

from exactident.linalg.blas_modp import rank_blas, sketch_rows, sketch_rows_sparse, symmetric_rows
from exactident.linalg.lower_bound import modular_lower_bound
from exactident.model.activation import activation_state
from exactident.model.fixed_edges import fixed_edges
from exactident.model.gamma_modular import ModularData, gamma_mod_p
from exactident.model.gamma_row_sketch import gamma_row_sketch_mod_p
from exactident.model.integer_forward import data_denominator
from exactident.model.network import Network

P = 1048573  # a prime below 2**21 (the BLAS range)


def _net(seed: int) -> tuple[Network, list[list[flint.fmpq]]]:
    rng = random.Random(seed)
    widths = [rng.randint(1, 4) for _ in range(rng.randint(2, 4))] + [rng.randint(1, 3)]
    W = [flint.fmpq_mat(widths[l + 1], widths[l], [flint.fmpq(rng.randint(-7, 7) or 1, rng.choice([1, 2, 3]))
                                                   for _ in range(widths[l] * widths[l + 1])])
         for l in range(len(widths) - 1)]
    b = [[flint.fmpq(rng.randint(-3, 3), rng.choice([1, 4])) for _ in range(widths[l + 1])]
         for l in range(len(widths) - 1)]
    if len(widths) > 2 and seed % 3 == 0:  # a dead neuron
        b[0][0] = flint.fmpq(-1000)
    X = [[flint.fmpq(rng.randint(-5, 5), rng.choice([1, 2, 7])) for _ in range(widths[0])]
         for _ in range(rng.randint(1, 60))]
    return Network(tuple(widths), W, b), X


def _built(net, X, pattern, fixed, k: int) -> np.ndarray:
    G = gamma_mod_p(net, X, pattern, fixed, P, data_denominator(net, X))
    dense = symmetric_rows(sketch_rows(G, 16, P, random.Random(P)), range(16), P, np.empty((16, G.shape[1])))
    return np.vstack([sketch_rows_sparse(G, k, P, seed=P), dense])


@pytest.mark.parametrize("seed", range(40))
def test_the_fused_row_sketch_has_the_residues_of_the_built_gammas_sketches(seed):
    net, X = _net(seed)
    pattern = activation_state(net, X).pattern
    fixed = fixed_edges(net)
    if seed % 2 and net.L > 1:  # another nonzero outgoing edge fixed (the verifier accepts any)
        (l, v), k0 = next(iter(fixed.s_max.items()))
        column = [flint.fmpq(net.W[l].table()[u][v]) for u in range(net.widths[l + 1])]
        others = [u for u, w in enumerate(column) if w != 0 and u != k0]
        if others:
            fixed = fixed_edges(net, {(l, v): others[0]})
    dim = len(gamma_mod_p(net, X, pattern, fixed, P)[0]) if X else 0
    for k in sorted({1, dim + 16, 3 * len(X) * net.widths[-1] + 5}):
        got = gamma_row_sketch_mod_p(net, X, pattern, fixed, P, k, 16, data=ModularData(net, X))
        want = _built(net, X, pattern, fixed, k)
        assert got.shape == want.shape
        assert np.array_equal(got.astype(np.int64) % P, want.astype(np.int64) % P)
        assert np.abs(got).max(initial=0) <= P // 2 + 1  # symmetric residues


@pytest.mark.parametrize("seed", range(6))
def test_the_lower_bound_with_the_fused_sketch_equals_the_one_with_the_image(seed):
    """A very tall ``Gamma`` (samples times outputs above ``2 dim + 64``): the same rank, prime and image."""
    rng = random.Random(seed)
    widths = (2, rng.randint(1, 3), rng.randint(1, 2))
    W = [flint.fmpq_mat(widths[l + 1], widths[l], [flint.fmpq(rng.randint(-4, 4) or 1) for _ in
                                                   range(widths[l] * widths[l + 1])]) for l in range(2)]
    b = [[flint.fmpq(rng.randint(-2, 2)) for _ in range(w)] for w in widths[1:]]
    net = Network(widths, W, b)
    X = [[flint.fmpq(rng.randint(-9, 9), 3), flint.fmpq(rng.randint(-9, 9))] for _ in range(150)]
    pattern, fixed = activation_state(net, X).pattern, fixed_edges(net)
    avoid = data_denominator(net, X)

    def image(q: int) -> np.ndarray:
        return gamma_mod_p(net, X, pattern, fixed, q, avoid)

    shape = (len(X) * widths[-1], net.dim)
    common = dict(avoid=avoid, stop_at=net.dim, blas=True, shape=shape, uniform=True, sparse_rows=True)
    built = modular_lower_bound(image, rng=random.Random(seed), **common)
    fused = modular_lower_bound(image, rng=random.Random(seed), **common,
                                row_sketch=lambda q, k: gamma_row_sketch_mod_p(net, X, pattern, fixed, q, k, 16, avoid))
    assert fused[:2] == built[:2]
    assert np.array_equal(fused[2], built[2])
    assert fused[0] == rank_blas(image(fused[1]), fused[1])  # and it is the rank of the whole image here


@pytest.mark.parametrize("seed", range(30))
def test_the_live_sketch_is_the_verifiers_sketch_of_the_built_gamma(seed):
    """``gamma_live_row_sketch_mod_p``: the nonzero columns of ``Gamma mod p`` (``nonzero_columns``) and
    ``sketch_rows_sparse(Gamma, len(live) + 16, p, seed, cols=live)``, the same residues."""
    from exactident.linalg.blas_modp import nonzero_columns
    from exactident.model.gamma_row_sketch import gamma_live_row_sketch_mod_p

    net, X = _net(seed)
    pattern, fixed = activation_state(net, X).pattern, fixed_edges(net)
    G = gamma_mod_p(net, X, pattern, fixed, P, data_denominator(net, X))
    live, S = gamma_live_row_sketch_mod_p(net, X, pattern, fixed, P, 20261207 + seed)
    assert live.tolist() == nonzero_columns(G).tolist()
    want = sketch_rows_sparse(G, len(live) + 16, P, 20261207 + seed, cols=live)
    assert np.array_equal(S.astype(np.int64) % P, want.astype(np.int64) % P)
