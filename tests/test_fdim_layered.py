"""fdim on layer graphs through the one path (region cover, its exact rank, line walk), against independent oracles.

Truths, all computed here with Python Fractions, never by the code under test:

- the regions: every sign pattern of the kinked units is enumerated; on a pattern every unit has a fixed
  side, so each kinked pre-activation is affine in ``x``, and the pattern is a region iff the strict system
  ``s_v z_v(x) > 0`` has a solution, decided by Fourier-Motzkin elimination on Fractions (exact for strict
  systems); the set of nonempty patterns must be the cover's;
- the functional dimension: the rank over Q of a forward-mode Jacobian in Fractions (tangents of every free
  parameter pushed through the network at the point's own sides) at points of every region: in one input,
  two points strictly inside each interval the exact breakpoints cut; in two inputs, the cover's region
  points (each re-checked here to lie in its region, the regions themselves checked by the brute force);
- a plain MLP written as a layer graph has the same regions and the same functional dimension as the MLP.
"""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import flint
import pytest
from constrained_oracle import random_constrained
from test_symmetry_graph import _case, _conv3, _residual_dead

from exactident.errors import UnsupportedCaseError
from exactident.model.network import Network
from exactident.model.symmetry import rescaling_symmetry
from exactident.symmetry.fdim import functional_dimension
from exactident.symmetry.regions import enumerate_regions

Fr = Fraction


def _net(cn):
    """The compiled form in Fractions: weights, biases, slopes, slope parameters, kinked units, parameter indices."""
    W = [[[Fr(int(M[i, j].p), int(M[i, j].q)) for j in range(M.ncols())] for i in range(M.nrows())] for M in cn.W]
    b = [[Fr(int(v.p), int(v.q)) for v in bl] for bl in cn.b]
    a = [[Fr(int(v.p), int(v.q)) for v in s] for s in cn.negative_slope]
    kinked = [[int(cn.slope_index[l][v]) >= 0 or a[l][v] != 1 for v in range(len(a[l]))] for l in range(len(a))]
    return W, b, a, kinked, cn


def _affine_layers(net, sides):
    """Per hidden layer, the pre-activations as affine maps ``(A, c)`` of ``x`` when every kinked unit has the side
    ``sides[(l, v)]`` (True: derivative 1)."""
    W, b, a, kinked, _ = net
    n0 = len(W[0][0])
    A = [[Fr(int(i == j)) for j in range(n0)] for i in range(n0)]
    c = [Fr(0)] * n0
    out = []
    for l in range(len(W) - 1):
        ZA = [[sum((W[l][i][k] * A[k][j] for k in range(len(A))), Fr(0)) for j in range(n0)] for i in range(len(W[l]))]
        Zc = [sum((W[l][i][k] * c[k] for k in range(len(c))), Fr(0)) + b[l][i] for i in range(len(W[l]))]
        out.append((ZA, Zc))
        f = [Fr(1) if not kinked[l][v] or sides[(l, v)] else a[l][v] for v in range(len(Zc))]
        A = [[f[i] * v for v in row] for i, row in enumerate(ZA)]
        c = [f[i] * v for i, v in enumerate(Zc)]
    return out


def _fm_feasible(rows):
    """Does ``a . x + e > 0`` (every row) have a solution?  Fourier-Motzkin on Fractions."""
    rows = [(list(a), e) for a, e in rows]
    n = len(rows[0][0]) if rows else 0
    for j in range(n):
        pos = [r for r in rows if r[0][j] > 0]
        neg = [r for r in rows if r[0][j] < 0]
        rows = [r for r in rows if r[0][j] == 0]
        for (ap, ep), (an, en) in itertools.product(pos, neg):
            s, t = -an[j], ap[j]  # s (P) + t (N) > 0 eliminates x_j
            rows.append(([s * u + t * v for u, v in zip(ap, an)], s * ep + t * en))
    return all(e > 0 for _a, e in rows)


def _brute_force_regions(net, box=None):
    """Every nonempty region, as the tuple of sides of the kinked units in layer order."""
    _W, _b, _a, kinked, _ = net
    units = [(l, v) for l in range(len(kinked)) for v in range(len(kinked[l])) if kinked[l][v]]
    n0 = len(net[0][0][0])
    found = set()
    for signs in itertools.product((True, False), repeat=len(units)):
        sides = dict(zip(units, signs))
        layers = _affine_layers(net, sides)
        rows = [([(1 if s else -1) * v for v in layers[l][0][u]], (1 if s else -1) * layers[l][1][u])
                for (l, u), s in sides.items()]
        if box is not None:
            for j in range(n0):
                rows.append(([Fr(int(i == j)) for i in range(n0)], -box[0]))
                rows.append(([-Fr(int(i == j)) for i in range(n0)], box[1]))
        if _fm_feasible(rows):
            found.add(signs)
    return found, units


def _cover_sides(cover, units):
    return {tuple(r.pattern[l][v] for l, v in units) for r in cover.regions}


def _jacobian_rows(net, x):
    """Forward mode in Fractions: ``d f_k(x) / d theta_j`` for every free parameter ``j`` at a tie-free ``x``."""
    W, b, a, kinked, cn = net
    rows = [[Fr(0)] * cn.n_params for _ in range(len(W[-1]))]
    for j in range(cn.n_params):
        h, dh = list(x), [Fr(0)] * len(x)
        for l in range(len(W)):
            z = [sum((W[l][i][k] * h[k] for k in range(len(h))), Fr(0)) + b[l][i] for i in range(len(W[l]))]
            dz = [sum((W[l][i][k] * dh[k] + (h[k] if cn.W_index[l][i, k] == j else 0) for k in range(len(h))),
                      Fr(0)) + (1 if cn.b_index[l][i] == j else 0) for i in range(len(W[l]))]
            if l == len(W) - 1:
                for k in range(len(z)):
                    rows[k][j] = dz[k]
                break
            assert not any(kinked[l][v] and z[v] == 0 for v in range(len(z))), "a tie"
            h = [z[v] if z[v] > 0 else a[l][v] * z[v] for v in range(len(z))]
            dh = [dz[v] if z[v] > 0 else a[l][v] * dz[v] + (z[v] if cn.slope_index[l][v] == j else 0)
                  for v in range(len(z))]
    return rows


def _rank(rows):
    """Rank over Q by Gaussian elimination on Fractions."""
    M = [list(r) for r in rows]
    rank, col = 0, 0
    n = len(M[0]) if M else 0
    while rank < len(M) and col < n:
        piv = next((i for i in range(rank, len(M)) if M[i][col] != 0), None)
        if piv is None:
            col += 1
            continue
        M[rank], M[piv] = M[piv], M[rank]
        for i in range(rank + 1, len(M)):
            if M[i][col]:
                f = M[i][col] / M[rank][col]
                M[i] = [u - f * v for u, v in zip(M[i], M[rank])]
        rank += 1
        col += 1
    return rank


def _points_1d(net, box=None):
    """Two points strictly inside each piece of a one-input network: exact breakpoints of every region's interval."""
    regions, units = _brute_force_regions(net, box)
    pts = []
    for signs in regions:
        layers = _affine_layers(net, dict(zip(units, signs)))
        lo = None if box is None else box[0]
        hi = None if box is None else box[1]
        for (l, u), s in zip(units, signs):
            slope, c = layers[l][0][u][0] * (1 if s else -1), layers[l][1][u] * (1 if s else -1)
            if slope > 0:
                lo = -c / slope if lo is None else max(lo, -c / slope)
            elif slope < 0:
                hi = -c / slope if hi is None else min(hi, -c / slope)
        if lo is None and hi is None:
            lo, hi = Fr(-1), Fr(1)
        elif lo is None:
            lo = hi - 2
        elif hi is None:
            hi = lo + 2
        pts += [[lo + (hi - lo) / 3], [lo + 2 * (hi - lo) / 3]]
    return pts


def _leaky_1d():
    """``f(x) = 2 leaky(x - 1) - leaky(-x - 1) + 3 leaky(leaky(x - 1) + leaky(-x - 1) - 1/2)`` (slopes 1/10, 1/5)."""
    return _case([{"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [["1"], ["-1"]], "bias": ["-1", "-1"]},
                  {"name": "r1", "op": "leaky_relu", "inputs": ["fc1"], "negative_slope": "1/10"},
                  {"name": "fc2", "op": "linear", "inputs": ["r1"], "weight": [["2", "-1"], ["1", "1"]],
                   "bias": ["0", "-1/2"]},
                  {"name": "r2", "op": "leaky_relu", "inputs": ["fc2"], "negative_slope": "1/5"},
                  {"name": "fc3", "op": "linear", "inputs": ["r2"], "weight": [["1", "3"]], "bias": ["1/4"]}],
                 "fc3", [["0"], ["3"]], [1])


def _residual_2d():
    """A residual block on two inputs: ``y = relu(W1 x + b1)``, ``f = v . relu(W2 y + b2) + u . x + c`` (a skip)."""
    return _case([{"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [["1", "-1"], ["2", "1"], ["-1", "1"]],
                   "bias": ["0", "-1", "1/2"]},
                  {"name": "r1", "op": "relu", "inputs": ["fc1"]},
                  {"name": "fc2", "op": "linear", "inputs": ["r1"], "weight": [["1", "-2", "1"], ["-1", "1", "1"]],
                   "bias": ["1/2", "-1"]},
                  {"name": "r2", "op": "relu", "inputs": ["fc2"]},
                  {"name": "fc3", "op": "linear", "inputs": ["r2"], "weight": [["2", "-1"], ["1", "1"]],
                   "bias": ["0", "0"]},
                  {"name": "sum", "op": "add", "inputs": ["fc3", "input"]},
                  {"name": "out", "op": "linear", "inputs": ["sum"], "weight": [["1", "-1"]], "bias": ["1/3"]}],
                 "out", [["0", "0"], ["1", "-1"]], [2])


def _prelu_2d():
    """prelu on two inputs: ``f = sum_u v_u prelu_{a_u}(w_u . x + b_u) + c``."""
    return _case([{"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [["1", "2"], ["-1", "1"], ["1", "-3"]],
                   "bias": ["1", "0", "-1/2"]},
                  {"name": "p", "op": "prelu", "inputs": ["fc1"], "weight": ["1/4", "1/2", "3/4"]},
                  {"name": "fc2", "op": "linear", "inputs": ["p"], "weight": [["1", "-2", "3"]], "bias": ["1/2"]}],
                 "fc2", [["0", "0"]], [2])


HAND = {"leaky-1d": _leaky_1d, "residual-1d": _residual_dead, "conv1d-3px": _conv3, "residual-2d": _residual_2d,
        "prelu-2d": _prelu_2d}


@pytest.mark.parametrize("name", sorted(HAND))
def test_region_cover_is_the_brute_force_set_of_regions(name):
    cn = HAND[name]().compiled
    net = _net(cn)
    truth, units = _brute_force_regions(net)
    cover = enumerate_regions(cn)
    assert cover.complete and len(cover.regions) == len(truth)
    assert _cover_sides(cover, units) == truth


@pytest.mark.parametrize("seed", range(10))
def test_region_cover_of_random_layer_graphs_against_the_brute_force(seed):
    """Random compiled nets with ties, fixed entries, leaky, PReLU and linear units, one or two inputs, on R^n and
    on a box."""
    cn = random_constrained(seed, widths=[1 + seed % 2, 3, 2, 1])
    net = _net(cn)
    for box in (None, (Fr(-1), Fr(2))):
        truth, units = _brute_force_regions(net, box)
        fbox = None if box is None else ([flint.fmpq(-1)] * cn.widths[0], [flint.fmpq(2)] * cn.widths[0])
        cover = enumerate_regions(cn, fbox)
        assert cover.complete
        assert _cover_sides(cover, units) == truth


def _fdim_oracle_1d(cn, box=None):
    net = _net(cn)
    return _rank([row for x in _points_1d(net, box) for row in _jacobian_rows(net, x)])


@pytest.mark.parametrize("name", ["leaky-1d", "residual-1d"])
def test_fdim_of_one_input_layer_graphs_is_the_fraction_rank_on_every_region(name):
    cn = HAND[name]().compiled
    r = functional_dimension(cn, HAND[name]().X, lines=0)
    truth = _fdim_oracle_1d(cn)
    assert r.lower == r.upper == truth and r.cover["complete"]
    assert r.dim == rescaling_symmetry(cn).dim_free and r.upper <= r.dim
    box = (Fr(-1, 2), Fr(3, 2))
    rb = functional_dimension(cn, box=([flint.fmpq(-1, 2)], [flint.fmpq(3, 2)]), lines=0)
    assert rb.lower == rb.upper == _fdim_oracle_1d(cn, box)


@pytest.mark.parametrize("seed", range(8))
def test_fdim_of_random_one_input_layer_graphs_against_the_fraction_rank(seed):
    cn = random_constrained(100 + seed, widths=[1, 3, 2, 1])
    try:
        r = functional_dimension(cn, seed=seed, lines=0)
    except UnsupportedCaseError:  # a kinked unit with zero weights and bias: no tie-free point
        return
    assert r.lower == r.upper == _fdim_oracle_1d(cn)


@pytest.mark.parametrize("name", ["conv1d-3px", "residual-2d", "prelu-2d"])
def test_fdim_of_layer_graphs_is_the_fraction_rank_at_points_of_every_region(name):
    """The cover's region points (each checked here to lie in its brute-force region, one region per pattern,
    every region present) carry the whole Jacobian of their region; their Fraction rank is fdim."""
    cn = HAND[name]().compiled
    net = _net(cn)
    truth, units = _brute_force_regions(net)
    cover = enumerate_regions(cn)
    rows = []
    for reg in cover.regions:
        sides = {u: reg.pattern[u[0]][u[1]] for u in units}
        layers = _affine_layers(net, sides)
        for x in reg.points:
            xf = [Fr(int(v.p), int(v.q)) for v in x]
            for (l, u), s in sides.items():
                z = sum((c * xv for c, xv in zip(layers[l][0][u], xf)), layers[l][1][u])
                assert (z > 0) == s and z != 0
            rows += _jacobian_rows(net, xf)
    assert _cover_sides(cover, units) == truth
    r = functional_dimension(cn, HAND[name]().X, lines=0)
    assert r.lower == r.upper == _rank(rows)


def test_prelu_2d_hidden_symmetry_settled_by_the_cover():
    """prelu_a(z) = a z + (1 - a) relu(z): the slopes and the output bias only move an affine function of x (3
    dimensions), each relu term has 4 parameters and one rescaling: fdim = 3 + 3 * 3 = 12.  The 4th of those
    parameters is the slope trade, counted in S_H: dim_free = 16 - 3 - 1 = 12 as well."""
    r = functional_dimension(_prelu_2d().compiled)
    assert (r.n_params, r.dim, r.lower, r.upper) == (16, 12, 12, 12)


def _random_mlp(seed, widths):
    rng = random.Random(seed)
    W = [[[Fr(rng.randint(-3, 3), rng.choice([1, 2])) for _ in range(widths[l - 1])] for _ in range(widths[l])]
         for l in range(1, len(widths))]
    b = [[Fr(rng.randint(-3, 3), rng.choice([1, 2])) for _ in range(widths[l])] for l in range(1, len(widths))]
    return Network(tuple(widths), W, b)


@pytest.mark.parametrize("seed", range(6))
def test_an_mlp_through_the_layer_graph_route_gives_the_mlp_result(seed):
    net = _random_mlp(seed, [2, 3, 2, 1] if seed % 2 else [1, 3, 3, 1])
    try:
        plain = functional_dimension(net, seed=seed, lines=0, search=False, regions=50_000)
    except UnsupportedCaseError:
        return
    # the layer-graph route, forced (a plain MLP goes the MLP route): J_free in the free parameters against
    # dim_free, by random points and by the region cover
    from exactident.symmetry.fdim import lower_bound_graph
    from exactident.symmetry.jacobian import Layered
    from exactident.symmetry.region_fdim import cover_rank

    dim_free = rescaling_symmetry(net).dim_free
    assert dim_free == plain.dim and net.n_params == plain.n_params
    lower, _, _ = lower_bound_graph(net, [], None, dim_free, seed=seed)
    cover = enumerate_regions(net, max_regions=50_000)
    cr = cover_rank(Layered(net), cover, seed=seed)
    assert cover.complete and cr.complete
    assert lower <= cr.rank == plain.lower == plain.upper
    assert _cover_sides(enumerate_regions(net), _brute_force_regions(_net(net))[1]) == \
        _brute_force_regions(_net(net))[0]
