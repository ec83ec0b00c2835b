"""Hypothesis properties of the theory (STYLE.md item 8).

- Positive rescaling of a hidden neuron (incoming weights and bias times
  ``c > 0``, outgoing weights divided by ``c``) leaves ``f_theta`` unchanged;
  the ranks and the verdict must not change either (paper §3: the rescaling
  symmetry is what the fixed edges remove).
- Permuting the hidden neurons of a layer is another symmetry: same ranks.
- The fixed edge of a neuron can be any nonzero outgoing edge: same ranks.
- ``rank_gamma <= min(rank_a, dim)`` (Gamma = A Dpsi, Prop. 10; Gamma has dim columns).
- Case files round-trip byte-stably and exactly.

Cases are drawn tie-free and non-degenerate by ``_gen.random_case`` (Fraction
arithmetic, independent of exactident).  Examples are few (each runs exact ranks).
"""

from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction

from _gen import case_obj, forward, is_tie_free, random_case
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exactident.check import check
from exactident.io.case import dump_case, load_case, parse_case, write_case

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

HIDDEN_WIDTHS = [(1, 2, 1), (2, 2, 1), (2, 3, 2), (1, 2, 2, 1), (2, 2, 2, 2), (3, 3, 1)]
ALL_WIDTHS = HIDDEN_WIDTHS + [(3, 2), (2, 1)]


@st.composite
def tiny_cases(draw, widths_pool=HIDDEN_WIDTHS, nonzero_weights=False):
    widths = draw(st.sampled_from(widths_pool))
    seed = draw(st.integers(0, 10**6))
    n = draw(st.integers(0, 12))
    rational = draw(st.booleans())
    return random_case(widths, seed, n, rational=rational, nonzero_weights=nonzero_weights)


def ranks(tc, **kw):
    r = check(parse_case(tc.obj()), numeric=False, all_ranks=True, **kw)
    return r.rank_gamma, r.rank_a, r.dim, r.verdict


positive = st.builds(Fraction, st.integers(1, 12), st.integers(1, 12))


@SETTINGS
@given(tiny_cases(), st.data(), positive)
def test_positive_rescaling_invariance(tc, data, c):
    l = data.draw(st.integers(1, tc.L - 1), label="layer")
    v = data.draw(st.integers(0, tc.widths[l] - 1), label="neuron")
    W = [[list(r) for r in Wl] for Wl in tc.W]
    b = [list(bl) for bl in tc.b]
    W[l - 1][v] = [w * c for w in W[l - 1][v]]
    b[l - 1][v] *= c
    for k in range(tc.widths[l + 1]):
        W[l][k][v] /= c
    scaled = type(tc)(tc.widths, W, b, tc.X)
    # the function is unchanged (Fraction forward pass), and so are the ranks
    assert all(forward(W, b, x)[-1] == forward(tc.W, tc.b, x)[-1] for x in tc.X)
    assert is_tie_free(W, b, tc.X)
    assert ranks(scaled) == ranks(tc)


@SETTINGS
@given(tiny_cases(), st.data())
def test_hidden_permutation_invariance(tc, data):
    l = data.draw(st.integers(1, tc.L - 1), label="layer")
    perm = data.draw(st.permutations(range(tc.widths[l])), label="perm")
    W = [[list(r) for r in Wl] for Wl in tc.W]
    b = [list(bl) for bl in tc.b]
    W[l - 1] = [tc.W[l - 1][p] for p in perm]
    b[l - 1] = [tc.b[l - 1][p] for p in perm]
    W[l] = [[row[p] for p in perm] for row in tc.W[l]]
    permuted = type(tc)(tc.widths, W, b, tc.X)
    assert all(forward(W, b, x)[-1] == forward(tc.W, tc.b, x)[-1] for x in tc.X)
    assert ranks(permuted) == ranks(tc)


@SETTINGS
@given(tiny_cases(), st.data())
def test_choice_of_fixed_edge_invariance(tc, data):
    choice = {}
    for l in range(1, tc.L):
        for v in range(tc.widths[l]):
            nonzero = [k for k in range(tc.widths[l + 1]) if tc.W[l][k][v] != 0]
            if nonzero and data.draw(st.booleans(), label=f"override ({l},{v})"):
                choice[(l, v)] = data.draw(st.sampled_from(nonzero), label=f"k for ({l},{v})")
    assert ranks(tc, fixed_choice=choice) == ranks(tc)


@SETTINGS
@given(tiny_cases(ALL_WIDTHS))
def test_rank_gamma_at_most_rank_a_and_dim(tc):
    r = check(parse_case(tc.obj()), numeric=False, all_ranks=True)
    assert r.rank_gamma <= min(r.rank_a, r.dim)
    assert r.rank_a % tc.widths[-1] == 0  # R_A = N_L rank(alpha) (Prop. 11)
    assert r.rank_gamma <= tc.widths[-1] * len(tc.X)


# --------------------------------------------------------------------------- round trip

def _spellings(q: Fraction):
    """Several exact spellings of q accepted by SPEC §3 (JSON int, Decimal, strings)."""
    out = [f"{q.numerator * 3}/{q.denominator * 3}", f"{q.numerator}/{q.denominator}"]
    if q.denominator == 1:
        out += [q.numerator, f"{q.numerator}.000e0"]
    if q.denominator in (2, 4, 5, 8, 10, 20, 25, 125):
        m = q.numerator * (10**6 // q.denominator)  # q = m / 10^6 exactly
        out += [Decimal(f"{m}e-6"), f"{m}e-6", f"{m * 1000}E-9", Decimal(f"{m}0e-7")]
    return out


rationals = st.builds(Fraction, st.integers(-10**30, 10**30), st.sampled_from([1, 2, 3, 4, 5, 7, 8, 10**25 + 7]))


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(ALL_WIDTHS), st.data())
def test_case_round_trip_is_byte_stable_and_exact(widths, data):
    L = len(widths) - 1
    W = [[[data.draw(rationals) for _ in range(widths[l - 1])] for _ in range(widths[l])] for l in range(1, L + 1)]
    b = [[data.draw(rationals) for _ in range(widths[l])] for l in range(1, L + 1)]
    n = data.draw(st.integers(0, 4))
    X = [[data.draw(rationals) for _ in range(widths[0])] for _ in range(n)]
    obj = case_obj(widths, W, b, X, name=data.draw(st.text(min_size=1, max_size=8)))
    # respell every number in a random accepted form
    spell = lambda q: data.draw(st.sampled_from(_spellings(q)))  # noqa: E731
    obj["weights"] = [[[spell(q) for q in row] for row in Wl] for Wl in W]
    obj["biases"] = [[spell(q) for q in bl] for bl in b]
    obj["sample"] = [[spell(q) for q in x] for x in X]
    if data.draw(st.booleans()):
        obj["description"] = data.draw(st.text(max_size=20))
    if data.draw(st.booleans()):
        obj["expected"] = {"verdict": "identifiable", "rank_gamma": 3, "tol": Decimal("0.1")}
    case = parse_case(obj)
    # load == the rationals generated, exactly
    for l in range(L):
        assert [[Fraction(int(q.p), int(q.q)) for q in case.network.W[l].table()[i]]
                for i in range(widths[l + 1])] == W[l]
        assert [Fraction(int(q.p), int(q.q)) for q in case.network.b[l]] == b[l]
    assert [[Fraction(int(q.p), int(q.q)) for q in x] for x in case.X] == X
    text = dump_case(case)
    again = parse_case(json.loads(text, parse_float=Decimal))
    assert again == case
    assert dump_case(again) == text


def test_round_trip_through_files(tmp_path):
    tc = random_case((2, 3, 2), 5, 4, rational=True)
    case = parse_case(tc.obj())
    write_case(case, tmp_path / "a.json")
    loaded = load_case(tmp_path / "a.json")
    assert loaded == case
    write_case(loaded, tmp_path / "b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
