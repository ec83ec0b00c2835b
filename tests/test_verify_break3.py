"""Adversarial review of what the verifier learned on 7 December: the ``constant_rank`` part, and kernel
vectors checked on their exact row support (``verify.rank_kernel.GammaRowSupport``).

No forgery found was accepted with a false claim; these tests keep the strongest refused ones refused and
pin the row-support rule against an independent Jacobian.  Truth, all independent of the code under test:

- the row support: the free-parameter Jacobian of a one-hidden-layer ReLU net written out by hand in
  Fractions (``_oracle_gamma`` of tests/test_shifted_kernel.py: ``d f_k / d W1[v, j] = W2[k, v] [z_v > 0] x_j``);
  a column ``K`` the verifier calls zero on its support must be in the kernel of that matrix;
- constant_rank: the rank of ``alpha`` enumerated path by path in Fractions (``_explicit_alpha`` of
  tests/test_constant_rank.py, rank by sympy), and kinks read off the hand forward pass of that file.
"""

from __future__ import annotations

import copy
import random
from collections import Counter
from fractions import Fraction as F

import flint
import numpy as np
import pytest
from test_constant_rank import FAMILIES, _explicit_alpha, _q, _rank, leaky_mlp
from test_shifted_kernel import _fr, _oracle_gamma

from exactident.model.fixed_edges import fixed_edges, free_parameters
from exactident.model.integer_forward import data_denominator
from exactident.model.network import Network
from exactident.verify.constant_rank import check_constant_rank
from exactident.verify.facts import ConstrainedFacts
from exactident.verify.rank_kernel import GammaRowSupport

Q = flint.fmpq
PRIME = 1_000_003


def _net(seed: int, near: bool):
    """One hidden layer; input 0 is ``-1/3`` on most samples (the "most common value"), and on two samples it is
    ``-1/3 + 1/10^6`` (``near``: equal only approximately) or far from it; a sample on a kink of neuron 0."""
    rng = random.Random(seed)
    N0, N1, N2, n = 3, 5, 2, 12
    W1 = [[Q(rng.randint(-6, 6), 4) for _ in range(N0)] for _ in range(N1)]
    W1[0][1] = Q(1)
    W2 = flint.fmpq_mat([[Q(rng.choice([-5, -3, -2, -1, 1, 2, 3, 5]), 3) for _ in range(N1)] for _ in range(N2)])
    b = [[Q(rng.randint(2, 9), 2) for _ in range(N1)], [Q(rng.randint(-3, 3), 5) for _ in range(N2)]]
    X = []
    for i in range(n):
        row = [Q(rng.randint(-9, 9), 7) + Q(1, 101) for _ in range(N0)]
        row[0] = Q(-1, 3) + (Q(1, 10**6) if near else Q(5 + i, 2)) if i < 2 else Q(-1, 3)
        X.append(row)
    # sample n-1 on the kink of neuron 0: choose its input 1 so that z_0 = 0 exactly
    x = X[-1]
    x[1] = -(W1[0][0] * x[0] + W1[0][2] * x[2] + b[0][0])
    return Network((N0, N1, N2), [flint.fmpq_mat(W1), W2], b), X


def _columns(net, X, rng):
    """Sparse integer columns touching one or two hidden neurons, most built so that ``r_v = 0`` (the bias
    cancels the inputs' most common values): the columns whose support is a few samples."""
    params = free_parameters(net, fixed_edges(net))
    by_neuron: dict[tuple[int, int], list] = {}
    for c, prm in enumerate(params):
        by_neuron.setdefault((prm.l, prm.i), []).append((c, prm.j))
    common = [Counter(F(int(x[j].p), int(x[j].q)) for x in X).most_common(1)[0][0] for j in range(net.widths[0])]
    out = []
    for _ in range(300):
        col: dict[int, F] = {}
        for (l, _v), entries in rng.sample(sorted(by_neuron.items()), rng.choice([1, 1, 2])):
            ws = [(c, j) for c, j in entries if j is not None]
            bias = [c for c, j in entries if j is None]
            pick = rng.sample(ws, min(len(ws), rng.randint(1, 2)))
            for c, _j in pick:
                col[c] = F(rng.choice([-3, -2, -1, 1, 2, 3]))
            if l == 1 and bias and rng.random() < 0.8:
                col[bias[0]] = -sum(common[j] * col[c] for c, j in pick)
        den = 1
        for v in col.values():
            den = den * v.denominator // np.gcd(den, v.denominator)
        out.append({c: int(v * den) for c, v in col.items() if v})
    return out


@pytest.mark.parametrize("seed,near", [(0, True), (1, True), (2, False), (3, False)])
def test_row_support_never_hides_a_nonzero_row(seed, near):
    """``GammaRowSupport`` says ``Gamma K = 0`` only for ``K`` in the kernel of the hand-written Jacobian, including
    columns nonzero only on samples whose input is the common value up to ``10^-6`` and on a sample on a kink;
    and such columns (nonzero, support not every sample) do occur, so the rule is exercised."""
    net, X = _net(seed, near)
    G = _oracle_gamma(net, X)
    Z = [sum((_fr(net.W[0][v, j]) * _fr(X[i][j]) for j in range(3)), F(0)) + _fr(net.b[0][v]) for i in range(len(X))
         for v in range(5)]
    assert any(z == 0 for z in Z)  # the kink is there
    pattern = [np.array([[z > 0 for z in Z[5 * i:5 * i + 5]] for i in range(len(X))]), np.ones((len(X), 2), bool)]
    support = GammaRowSupport(net, X, pattern, fixed_edges(net), data_denominator(net, X))
    exercised = 0
    for col in _columns(net, X, random.Random(seed)):
        product = [sum((row[c] * v for c, v in col.items()), F(0)) for row in G]
        nonzero = any(p != 0 for p in product)
        exactly = not any(p.numerator % PRIME == 0 and p != 0 for p in product)  # no accidental zero mod q
        if support(PRIME, [col]):
            assert not nonzero or not exactly, col
        elif nonzero and not support.support(col).all():
            exercised += 1
    assert exercised > 0


def test_constant_rank_part_refused_where_its_claims_are_false():
    """The genuine leaky 1-2-1 part (samples 2..5, both units active) moved to other samples or with another prime.

    ``f = w1 lr(x) + w2 lr(x - 1) + c`` with slope 1/2 at theta = (1, 1, 0, -1, 1, 2, 0).
    """
    make, X = FAMILIES["leaky"]
    spec = make()
    cn = spec.compiled()
    from exactident.boundary.constant_rank import find_constant_rank
    from exactident.model.gamma_free import free_state

    part, _ = find_constant_rank(cn, _q(X), free_state(cn, _q(X)), random.Random(0))
    assert part["rank_a"] == _rank(_explicit_alpha(spec, X)) == 2

    # an identifiable sample (both units seen on both sides): rank alpha = 5 = dim_free, so rank_a = 2 is false,
    # and no y can raise rank Gamma_free above dim_free = 5 (the rescaling of each unit keeps f)
    ident = [[-2], [-1], [F(1, 4)], [F(3, 4)], [2], [3]]
    assert _rank(_explicit_alpha(spec, ident)) == 5
    assert check_constant_rank(ConstrainedFacts.from_network(cn, _q(ident)), copy.deepcopy(part))
    forged = dict(copy.deepcopy(part), rank_a=5, rank_x=5, rank_xy=6)
    assert check_constant_rank(ConstrainedFacts.from_network(cn, _q(ident)), forged)

    facts = ConstrainedFacts.from_network(cn, _q(X))
    # x = 1 is a sample on the kink of unit 2 (z = x - 1): F_X is not smooth there, the part must be refused
    on_kink = [[1], [2], [3], [4]]
    assert any(z == 0 for zs in (spec.forward(spec.theta, x)[0][0] for x in on_kink) for z in zs)
    assert check_constant_rank(ConstrainedFacts.from_network(cn, _q(on_kink)), copy.deepcopy(part))
    # y = 0 is on the kink of unit 1 (z = x): f(y) is not differentiable there, a rank there proves nothing
    assert spec.forward(spec.theta, [0])[0][0][0] == 0
    assert check_constant_rank(facts, dict(copy.deepcopy(part), y=[["0"]]))
    # primes the rule excludes: small, composite, dividing a denominator (2: the slope 1/2), 2^31 and above
    for p in (3, 1 << 20, 2, 2**31 + 11, 1_048_583 * 3):
        assert check_constant_rank(facts, dict(copy.deepcopy(part), prime=p)), p
    # a sample point as y cannot raise the rank (its rows are already in Gamma_free(X))
    assert check_constant_rank(facts, dict(copy.deepcopy(part), y=[["2"]], rank_xy=3))


def test_constant_rank_alpha_from_the_verifiers_pattern_not_the_reports():
    """The same network on samples in another region: ``rank alpha`` there (hand paths) is what the verifier uses,
    so a ``rank_a`` copied from the first region is refused when the two differ."""
    spec = leaky_mlp()
    cn = spec.compiled()
    X1, X2 = [[2], [3], [4], [5]], [[-5], [-4], [F(1, 2)], [F(3, 4)], [2], [3]]
    r1, r2 = _rank(_explicit_alpha(spec, X1)), _rank(_explicit_alpha(spec, X2))
    assert (r1, r2) == (2, 5)
    from exactident.boundary.constant_rank import find_constant_rank
    from exactident.model.gamma_free import free_state

    part, _ = find_constant_rank(cn, _q(X1), free_state(cn, _q(X1)), random.Random(0))
    bad = check_constant_rank(ConstrainedFacts.from_network(cn, _q(X2)), part)
    assert bad and "rank_a" in bad[0]
