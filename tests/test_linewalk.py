"""The line walk's lower bound of ``fdim`` against independent exact ranks and hand-derived breakpoints.

Right values: the rank of the full Jacobian in Fractions at the walk's own points (tests/test_fdim.py's
backpropagation and elimination, independent of the engine: no primes, no activation-state code), the
certified upper bound of ``exactident fdim`` (proved mechanisms) and ``dim``; breakpoints of tiny
networks along a line derived by hand.
"""

from __future__ import annotations

import random
from fractions import Fraction

import flint
import numpy as np
import pytest
from test_fdim import CASES, _net, _random_net, _tie_free, case_net, fraction_rank, full_jacobian_rows

from exactident.linalg.modular import random_primes
from exactident.model.network import Network
from exactident.symmetry.fdim import functional_dimension
from exactident.symmetry.glr import gaussian_batch, torch_default_network
from exactident.symmetry.linewalk import SMALL_PRIME_RANGE, GreedyRank, line_pieces, walk_lower_bound


def _fr(x):
    return [Fraction(int(v.p), int(v.q)) for v in x]


def _fractions(net):
    W = [[[Fraction(int(M[i, j].p), int(M[i, j].q)) for j in range(M.ncols())] for i in range(M.nrows())]
         for M in net.W]
    return W, [[Fraction(int(v.p), int(v.q)) for v in bl] for bl in net.b]


def _pieces(ts, breaks):
    """Index of the piece of each t (breakpoints sorted); None if t is on a breakpoint."""
    out = []
    for t in ts:
        if any(t == c for c in breaks):
            out.append(None)
        else:
            out.append(sum(t > c for c in breaks))
    return out


def test_line_pieces_by_hand():
    # z_1 = x - 1, z_2 = 1 - relu(z_1): kinks at x = 1 (z_1 = 0) and x = 2 (z_2 = 0, on the right ray of the
    # first layer): three pieces, one point strictly inside each.
    W = [np.array([[1.0]]), np.array([[-1.0]]), np.array([[1.0]])]
    b = [np.array([-1.0]), np.array([1.0]), np.array([0.0])]
    ts = line_pieces(W, b, np.array([0.0]), np.array([1.0]))
    assert _pieces(ts, [1, 2]) == [0, 1, 2]
    # the same on the segment [0, 3/2] of a box: only the breakpoint 1 inside, two pieces
    ts = line_pieces(W, b, np.array([0.0]), np.array([1.0]), (0.0, 1.5))
    assert _pieces(ts, [1]) == [0, 1] and all(0 < t < 1.5 for t in ts)
    # z_1 = (x, -x), z_2 = h_1 + h_2 - 3 = |x| - 3: kinks at -3, 0, 3, the outer two on the rays
    W = [np.array([[1.0], [-1.0]]), np.array([[1.0, 1.0]]), np.array([[1.0]])]
    b = [np.array([0.0, 0.0]), np.array([-3.0]), np.array([0.0])]
    ts = line_pieces(W, b, np.array([5.0]), np.array([-2.0]))  # x = 5 - 2t: kinks at t = 4, 5/2, 1
    assert _pieces(ts, [1, 2.5, 4]) == [0, 1, 2, 3]


@pytest.mark.parametrize("widths,seed", CASES)
@pytest.mark.parametrize("boxed", [False, True])
def test_walk_bound_is_the_rank_at_its_points(widths, seed, boxed):
    rng, W, b, net, box = case_net(widths, seed, boxed)
    start = [[flint.fmpq(rng.randint(-8, 16), 8) for _ in range(widths[0])] for _ in range(3)]
    r, _, pts = walk_lower_bound(net, start, box, seed=seed, max_lines=64)
    X = [_fr(x) for x in pts]
    assert all(_tie_free(W, b, x) for x in X)
    if boxed:
        assert all(-1 <= v <= 2 for x in X for v in x)
    # the kept rows are independent mod p, hence over Q; a point is kept only when one of its rows is new
    assert r == fraction_rank([row for x in X for row in full_jacobian_rows(W, b, x)])
    assert len(X) <= r and (widths[-1] > 1 or len(X) == r)
    res = functional_dimension(net, box=box, seed=seed, max_boxes=512, lines=0)
    assert r <= res.upper <= net.dim


def test_greedy_rank_keeps_only_gains():
    rng = random.Random(3)
    W, b = _random_net((2, 3, 2, 1), rng)
    net = _net(W, b, (2, 3, 2, 1))
    p = random_primes(1, 1, random.Random(0), lo=SMALL_PRIME_RANGE[0], hi=SMALL_PRIME_RANGE[1])[0]
    g = GreedyRank(net, p)
    offered = [[flint.fmpq(rng.randint(-40, 40), 4) + flint.fmpq(1, 7) for _ in range(2)] for _ in range(40)]
    g.offer(offered[:20])
    g.offer(offered[20:])
    assert g.offer(offered) == 0  # nothing new the second time
    X = [_fr(x) for x in offered]
    X = [x for x in X if _tie_free(W, b, x)]
    assert g.rank == len(g.points) == fraction_rank([row for x in X for row in full_jacobian_rows(W, b, x)])


def test_deep_narrow_net_where_the_gaussian_batch_falls_short():
    # 2-2-2-2-1 at PyTorch's default initialisation (seeded numpy, bit-stable): the survey's Gaussian batch of
    # dim + 10 = 25 points reaches rank 4 of dim = 15 (Fractions, below); the line walk reaches 15 = dim, so this
    # theta has no hidden symmetries, certified by 15 exact points.
    rng = np.random.default_rng([5, 22])
    net = torch_default_network([2, 2, 2, 2, 1], rng)
    X = gaussian_batch(2, net.dim + 10, rng)
    W, b = _fractions(net)
    batch = [x for x in (_fr(x) for x in X) if _tie_free(W, b, x)]
    assert net.dim == 15
    assert fraction_rank([row for x in batch for row in full_jacobian_rows(W, b, x)]) == 4
    r, _, pts = walk_lower_bound(net, X, seed=0, max_lines=400)
    walked = [_fr(x) for x in pts]
    assert all(_tie_free(W, b, x) for x in walked)
    assert r == fraction_rank([row for x in walked for row in full_jacobian_rows(W, b, x)]) == 15
    res = functional_dimension(net, X, seed=0, search=False)
    assert res.no_hidden_symmetries and res.lower_random is not None and res.lower_random < 15


def test_network_without_hidden_layers_walk():
    # an affine map: no breakpoints, the whole line is one piece; fdim = dim = n0 + 1
    net = Network((2, 1), [[[1, 2]]], [[3]])
    r, _, pts = walk_lower_bound(net, [], seed=0, max_lines=4)
    assert r == 3 == net.dim and len(pts) == 3


def _greedy_mod_p(rows, p):
    """Rows kept by a one-at-a-time pass mod p (each kept iff independent of the kept ones), by hand."""
    basis, kept = [], []  # basis: (pivot, row normalised to 1 at its pivot)
    for i, r in enumerate(rows):
        v = [int(x) % p for x in r]
        for c, b in basis:
            if v[c]:
                f = v[c]
                v = [(x - f * y) % p for x, y in zip(v, b)]
        if any(v):
            c = next(j for j, x in enumerate(v) if x)
            inv = pow(v[c], -1, p)
            basis.append((c, [x * inv % p for x in v]))
            kept.append(i)
    return kept


@pytest.mark.parametrize("seed", range(6))
def test_greedy_batch_keeps_the_rows_a_one_at_a_time_pass_keeps(seed):
    """A batch ranked at once (FLINT's reduced echelon form of its transpose) keeps exactly the rows, in order, that
    a one-at-a-time elimination mod p keeps, also after earlier batches (dependent rows made by hand)."""
    rng = np.random.default_rng(seed)
    net = Network((2, 3, 1), [[[1, 2], [3, -4], [5, 6]], [[1, -1, 1]]], [[0, 1, -1], [0]])  # only its 13 columns count
    n = 13
    p = random_primes(1, 1, random.Random(seed), lo=SMALL_PRIME_RANGE[0], hi=SMALL_PRIME_RANGE[1])[0]
    g = GreedyRank(net, p)
    seen: list[list[int]] = []
    for _ in range(3):
        base = rng.integers(0, p, size=(3, n))
        mix = rng.integers(0, 3, size=(4, 3))
        batch = np.concatenate([base, (mix @ base) % p, rng.integers(0, p, size=(2, n))])[rng.permutation(9)]
        residual = g._reduce(batch.astype(np.float64))
        live = np.flatnonzero(residual.any(axis=1))
        got = [int(live[i]) for i in g._extend(residual[live])] if live.size else []
        before = len(_greedy_mod_p(seen, p))
        expect = [i - len(seen) for i in _greedy_mod_p(seen + batch.tolist(), p)[before:]]
        assert got == expect
        seen += batch.tolist()
        assert g.rank == len(_greedy_mod_p(seen, p))
        assert all(g.B[k, c] == 1 and not np.delete(g.B[:, c], k).any() for k, c in enumerate(g.pivots))
