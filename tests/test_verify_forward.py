"""The verifier's forward pass in integer arithmetic on scaled data agrees with an independent
Fraction evaluation (tests/_gen.forward: plain Fraction arithmetic, layer by layer) on seeded random
networks, ties and negative/zero values included; and the facts built on it (ties, pattern) match."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from _gen import case_obj, forward

from exactident.io.case import parse_case
from exactident.verify.facts import CaseFacts
from exactident.verify.forward import pre_activations, scaled_forward


def _rat(rng: random.Random) -> Fraction:
    # small numerators over assorted denominators (powers of 2, 3, 7, 10), zero included
    return Fraction(rng.randint(-9, 9), rng.choice([1, 2, 3, 4, 7, 10, 1024, 3**7]))


def _random_net(rng: random.Random):
    widths = [rng.randint(1, 4) for _ in range(rng.randint(2, 5))]
    W = [[[_rat(rng) for _ in range(widths[l - 1])] for _ in range(widths[l])] for l in range(1, len(widths))]
    b = [[_rat(rng) for _ in range(widths[l])] for l in range(1, len(widths))]
    X = [[_rat(rng) for _ in range(widths[0])] for _ in range(rng.randint(0, 6))]
    if X and rng.random() < 0.5:  # plant a tie at the first hidden neuron: b_1[0] = -W_1[0] . x^0
        b[0][0] = -sum((w * x for w, x in zip(W[0][0], X[0])), Fraction(0))
    return widths, W, b, X


@pytest.mark.parametrize("seed", range(60))
def test_scaled_forward_agrees_with_fraction_forward(seed):
    rng = random.Random(seed)
    widths, W, b, X = _random_net(rng)
    expected = [forward(W, b, x) for x in X]  # independent: Fraction arithmetic, relu(z) = max(z, 0)
    assert pre_activations(W, b, X) == expected
    layers = scaled_forward(W, b, X)
    assert len(layers) == len(widths) - 1
    for l, (Zl, S) in enumerate(layers):
        assert S > 0 and len(Zl) == len(X)
        assert all(Fraction(int(z), S) == expected[i][l][v] for i, row in enumerate(Zl) for v, z in enumerate(row))


@pytest.mark.parametrize("seed", range(20))
def test_facts_ties_and_pattern_from_the_integer_pass(seed):
    rng = random.Random(1000 + seed)
    widths, W, b, X = _random_net(rng)
    facts = CaseFacts.from_case(parse_case(case_obj(widths, W, b, X)))
    Z = [forward(W, b, x) for x in X]
    ties = sorted((i, l, v) for i in range(len(X)) for l in range(1, len(widths) - 1)
                  for v in range(widths[l]) if Z[i][l - 1][v] == 0)
    assert facts.ties == ties
    assert [facts.Z[i] for i in range(len(X))] == Z and [facts.X[i] for i in range(len(X))] == X
    sides = {t: bool(k % 2) for k, t in enumerate(ties)}
    for l, a in enumerate(facts.pattern(sides), start=1):
        for i in range(len(X)):
            for v in range(widths[l]):
                z = Z[i][l - 1][v]
                assert a[i, v] == (sides[(i, l, v)] if z == 0 else z > 0)


@pytest.mark.parametrize("seed", range(10))
def test_scaled_reduction_mod_p_by_limbs_agrees_with_python_ints(seed):
    # Scaled.mod reduces by int64 limbs in base 2^31; the reference is Python's own p/q mod p
    import flint
    import numpy as np

    from exactident.model.gamma_modular import Scaled

    rng = random.Random(seed)
    vals = [flint.fmpq(rng.randint(-2 ** rng.randint(0, 300), 2 ** rng.randint(0, 300)),
                       rng.randint(1, 2 ** rng.randint(0, 80))) for _ in range(20)]
    s = Scaled(vals, (4, 5))
    for p in (3, 7, 1_133_477, 2**31 - 1):
        if s.den % p:
            ref = np.array([int(v.p) * pow(int(v.q), -1, p) % p for v in vals]).reshape(4, 5)
            assert (s.mod(p) == ref).all()


@pytest.mark.parametrize("seed", range(40))
def test_line_outputs_agree_with_the_fraction_polynomial_pass(seed):
    # the shared line_outputs (integers, all samples at once) against line_forward (Fraction polynomials, one sample)
    from exactident.model.line_forward import line_outputs
    from exactident.verify.arith import line_forward

    rng = random.Random(500 + seed)
    widths, W, b, X = _random_net(rng)
    dW = [[[_rat(rng) if rng.random() < 0.5 else Fraction(0) for _ in row] for row in Wl] for Wl in W]
    db = [[_rat(rng) if rng.random() < 0.5 else Fraction(0) for _ in bl] for bl in b]
    got = line_outputs(W, b, dW, db, X)
    assert len(got) == len(X)
    for x, polys in zip(X, got):
        ref = line_forward(W, b, dW, db, x)
        assert len(polys) == len(ref) == widths[-1]
        for p, q in zip(polys, ref):
            width = max(len(p), len(q))
            assert p + [0] * (width - len(p)) == q + [0] * (width - len(q))
