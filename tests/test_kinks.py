"""Issue 13, item 5: the float pipeline sitting on a kink is reported, with a rigorous error bound.

Right values: exact pre-activations with ``fractions``; the float ones read
back as exact rationals (``Fraction(float)``), so ``|z_hat - z| <= bound`` is
checked without rounding.  The issue's input is derived by hand below.
"""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest
from _gen import case_obj

from exactident.check import check
from exactident.crosscheck.core import crosscheck_case
from exactident.crosscheck.render import render_text
from exactident.io.case import parse_case
from exactident.io.report import render_table
from exactident.model.activation import activation_state
from exactident.model.fixed_edges import fixed_edges
from exactident.numeric.kinks import approx_decimal, near_kinks, preactivation_bounds
from exactident.numeric.numpy_backend import float_operators

W07 = Fraction(3152519739159347, 4503599627370496)  # the float64 value of 0.7


def _case(widths, W, b, X, name="t"):
    return parse_case(case_obj(widths, W, b, X, name))


def test_issue_input_exact_minus_2_pow_51_float_zero():
    assert Fraction(0.7) == W07
    z = W07 * 10 - 7
    assert z == -Fraction(1, 2**51)  # exactly: inactive
    assert 0.7 * 10 - 7 == 0.0  # in float64 the product rounds to 7.0: the pre-activation is 0
    case = _case([1, 1, 1], [[[W07]], [[1]]], [[-7], [0]], [[10], [20], [5]], "kink07")
    r = check(case, pipelines="kinks")
    num = r.numeric
    kinks = num["near_kinks"]
    assert kinks["n"] == 1 and not kinks["truncated"]
    e = kinks["entries"][0]
    assert (e["sample"], e["layer"], e["neuron"], e["kind"]) == (0, 1, 0, "float-zero")
    assert e["float"] == 0.0 and e["exact"] == "-4.44e-16" and e["float_active"] and not e["exact_active"]
    assert e["bound"] >= float(abs(z))
    # the float pattern differs, so no tolerance band is offered as advice
    assert num["pattern_differs"] is True and "band" not in num and "band_withheld" in num
    table = render_table([r])
    assert "1 at kinks" in table and "relu'(0)" in table and "-4.44e-16" in table


def test_reverse_exact_tie_float_nonzero():
    # z = 7x/3 - 63 at x = 27 is exactly 0; fl(7/3) * 27 = 63.00000000000001 in float64.
    zf = (7 / 3) * 27 - 63
    assert Fraction(7, 3) * 27 - 63 == 0 and zf != 0
    case = _case([1, 1, 1], [[[Fraction(7, 3)]], [[1]]], [[-63], [0]], [[27], [40], [0]])
    r = check(case, pipelines="kinks")
    assert r.n_ties == 1
    e = r.numeric["near_kinks"]["entries"]
    assert [(x["sample"], x["kind"]) for x in e] == [(0, "exact-tie-float-nonzero")]
    assert e[0]["exact"] == "0" and e[0]["float"] == zf and e[0]["bound"] >= abs(zf)


def test_no_kinks_away_from_them():
    case = _case([1, 2, 1], [[[1], [-1]], [[1, 1]]], [[Fraction(1, 2), Fraction(1, 3)], [0]], [[1], [2], [-3]])
    assert check(case, pipelines="kinks").numeric["near_kinks"] == {"n": 0, "entries": [], "truncated": False}


def _exact_forward(W, b, X):
    """Exact pre-activations of the hidden layers, ``Z[l][i][v]`` (Fractions)."""
    H = [list(map(Fraction, row)) for row in X]
    out = []
    for l in range(len(W) - 1):
        Z = [[sum(Fraction(w) * h for w, h in zip(Wrow, hrow)) + Fraction(bv) for Wrow, bv in zip(W[l], b[l])]
             for hrow in H]
        out.append(Z)
        H = [[max(z, Fraction(0)) for z in row] for row in Z]
    return out


def _rand_frac(rng, den_max=97):
    return Fraction(rng.randint(-60, 60), rng.randint(1, den_max))


def _kink_sample(rng, W, b, widths):
    """A sample whose first-layer pre-activation at a random neuron is 0, or within 2^-k of it."""
    v = rng.randrange(widths[1])
    x = [_rand_frac(rng) for _ in range(widths[0])]
    j = next((j for j in range(widths[0]) if W[0][v][j] != 0), None)
    if j is None:
        return x
    rest = sum(Fraction(W[0][v][k]) * x[k] for k in range(widths[0]) if k != j) + Fraction(b[0][v])
    eps = rng.choice([Fraction(0), Fraction(1, 2 ** rng.randint(40, 70)), -Fraction(1, 2 ** rng.randint(40, 70))])
    x[j] = (eps - rest) / Fraction(W[0][v][j])
    return x


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("seed", range(12))
def test_generated_samples_at_kinks_bound_holds_and_report_is_complete(seed, dtype):
    rng = random.Random(1000 + seed)
    widths = rng.choice([(1, 2, 1), (2, 3, 1), (2, 3, 3, 1), (3, 2, 2, 2)])
    W = [[[_rand_frac(rng) for _ in range(widths[l])] for _ in range(widths[l + 1])] for l in range(len(widths) - 1)]
    b = [[_rand_frac(rng) for _ in range(widths[l + 1])] for l in range(len(widths) - 1)]
    X = [_kink_sample(rng, W, b, widths) for _ in range(6)] + [[_rand_frac(rng) for _ in range(widths[0])]
                                                               for _ in range(3)]
    case = _case(list(widths), W, b, X)
    st = activation_state(case.network, case.X)
    ops = float_operators(case.network, case.X, fixed_edges(case.network), st.pattern, dtype)
    bounds = preactivation_bounds(ops)
    Z = _exact_forward(W, b, X)
    expected = set()
    for l, (E, Zl) in enumerate(zip(bounds, Z), start=1):
        for i, row in enumerate(Zl):
            for v, z in enumerate(row):
                zf = Fraction(float(ops.Z[l - 1][i, v]))
                bound = Fraction(float(E[i, v]))
                assert abs(zf - z) <= bound, (l, i, v)  # the bound is rigorous
                if z != 0 and (zf == 0 or abs(zf) <= bound):
                    expected.add((i, l, v, "float-zero" if zf == 0 else "float-within-bound"))
                elif z == 0 and zf != 0:
                    expected.add((i, l, v, "exact-tie-float-nonzero"))
    got = near_kinks(ops, st)
    assert got["n"] == len(expected)
    assert {(e["sample"], e["layer"], e["neuron"], e["kind"]) for e in got["entries"]} == expected


def test_bound_is_not_vacuous():
    # f = relu(x/3 - 1/3) at x = 4: z = 1, every quantity O(1): bound a few float64 ulps.
    case = _case([1, 1, 1], [[[Fraction(1, 3)]], [[1]]], [[Fraction(-1, 3)], [0]], [[4]])
    st = activation_state(case.network, case.X)
    ops = float_operators(case.network, case.X, fixed_edges(case.network), st.pattern)
    E = preactivation_bounds(ops)[0][0, 0]
    assert abs(float(ops.Z[0][0, 0]) - 1) <= E < 1e-14


def test_crosscheck_text_gives_no_band_when_the_pattern_differs():
    case = _case([1, 1, 1], [[[W07]], [[1]]], [[-7], [0]], [[10], [20], [5]], "kink07")
    res = crosscheck_case(case)
    text = render_text([res], None)  # type: ignore[arg-type]  (one case: no summary used)
    line = next(x for x in text.splitlines() if x.strip().startswith("float64:"))
    assert "no band" in line and "band abs" not in line
    assert res.to_dict()["spectra"]["float64"]["band_applies"] is False


@pytest.mark.parametrize("q,text", [(Fraction(999, 1000), "9.99e-01"), (Fraction(9995, 10000), "1.00e+00"),
                                    (Fraction(-2, 3), "-6.67e-01"), (Fraction(1, 10**400), "1.00e-400"),
                                    (Fraction(10**5000 + 1, 7), "1.43e+4999"), (Fraction(0), "0")])
def test_approx_decimal(q, text):
    import flint

    assert approx_decimal(flint.fmpq(q.numerator, q.denominator)) == text
