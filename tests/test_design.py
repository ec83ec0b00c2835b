"""``design``: smallest prefix, identifying subsample, new points, and the cases where no sample helps.

Right values: ranks of the independent oracles (tests/test_oracle.py's sympy Gamma for tiny
networks, tests/test_real_cases.py's Fraction backpropagation + DomainMatrix for diabetes);
prefix minimality is checked by the prefix one shorter failing; the designed case's verdict is
re-derived by ``check`` and by the oracle.
"""

from __future__ import annotations

import json
import random
from fractions import Fraction
from math import ceil
from pathlib import Path

import pytest
import sympy as sp
from _gen import TinyCase, is_tie_free, random_case
from test_oracle import Oracle

from exactident.check import check
from exactident.explain.design import design
from exactident.io.case import dump_case, load_case, parse_case

ROOT = Path(__file__).resolve().parent.parent


def _rank_of(tc: TinyCase, rows) -> int:
    sub = TinyCase(tc.widths, tc.W, tc.b, [tc.X[i] for i in rows])
    return Oracle(sub, lifting=False).ranks()[0] if rows else 0


@pytest.mark.parametrize("widths,seed", [((1, 2, 1), 4), ((2, 2, 2), 4), ((2, 2, 2, 1), 2), ((2, 3, 1), 6)])
def test_prefix_and_subsample_against_the_oracle(widths, seed):
    dim = sum(widths[l] * widths[l + 1] for l in range(len(widths) - 1)) + widths[-1]
    n = 3 * ceil(dim / widths[-1]) + 2
    tc = random_case(widths, seed, n, rational=True)
    d = design(parse_case(tc.obj()))
    assert d.verdict == "identifiable"  # seeds chosen so (check and the oracle agree: test_oracle.py)
    m = d.prefix["length"]
    assert _rank_of(tc, range(m)) == dim
    assert _rank_of(tc, range(m - 1)) < dim  # minimal: the prefix one shorter fails
    s = d.subsample
    assert _rank_of(tc, s["indices"]) == dim
    assert s["size"] >= d.lower_bound == ceil(dim / widths[-1])
    if widths[-1] == 1:
        assert s["size"] == dim  # one row per sample: the pivot rows are a minimum
    assert d.new_report is None or d.new_report.verdict == "identifiable"


def test_diabetes_prefix_is_minimal():
    from test_real_cases import _parse, oracle

    case = load_case(ROOT / "cases" / "diabetes-mlp-10-8-1.json")
    d = design(case)
    m = d.prefix["length"]
    obj = json.loads(dump_case(case))
    for k, full in ((m, True), (m - 1, False)):
        truth = oracle(_parse(json.dumps(dict(obj, sample=obj["sample"][:k]))))
        assert (truth["rank_gamma"] == truth["dim"]) is full
    assert d.subsample["size"] == d.lower_bound == 89


def test_designed_case_verdict_is_rederived():
    # relu(x) and relu(1 - x) seen at -2 and 3 only: C_S fails (2 rows, dim 5); points of the box
    # [-2, 3] where both, or one, are active make it hold.
    tc, case = _tiny([1, 2, 1], [[[1], [-1]], [[1, 2]]], [[0, 1], [0]], [[-2], [3]])
    d = design(case, seed=3)
    assert d.verdict is None and d.rank_gamma < d.dim
    assert d.points and d.points["nullity_after"] == [0]
    assert d.new_report.verdict == "identifiable"
    assert check(d.new_case, numeric=False).verdict == "identifiable"
    new = [[Fraction(int(v.p), int(v.q)) for v in row] for row in d.new_case.X]
    assert new[:len(tc.X)] == tc.X  # the original samples come first
    assert is_tie_free(tc.W, tc.b, new)
    lo, hi = min(x[0] for x in tc.X), max(x[0] for x in tc.X)
    assert all(lo <= x[0] <= hi for x in new)
    truth = Oracle(TinyCase(tc.widths, tc.W, tc.b, new), lifting=False)
    assert truth.ranks()[0] == truth.dim


def _tiny(widths, W, b, X) -> tuple[TinyCase, object]:
    tc = TinyCase(widths, [[[Fraction(v) for v in r] for r in Wl] for Wl in W], [[Fraction(v) for v in bl] for bl in b],
                  [[Fraction(v) for v in x] for x in X])
    return tc, parse_case(tc.obj())


def test_twins_no_sample_can_help():
    # relu(x) and relu(2x): h_0 = 1/2 h_1 on every input.  The direction design gives must be in
    # ker Gamma for any sample: checked with the oracle's Gamma on a fresh random sample.
    tc, case = _tiny([1, 2, 1], [[[1], [2]], [[1, 3]]], [[0, 0], [1]], [[1], [2], [-1]])
    d = design(case)
    assert [o["kind"] for o in d.obstructions] == ["twins"] and d.points is None
    assert "no finite sample anywhere" in d.statement[0]
    rng = random.Random(0)
    fresh = [[Fraction(rng.randint(-40, 40), 7)] for _ in range(12)]
    orc = Oracle(TinyCase(tc.widths, tc.W, tc.b, fresh), lifting=False)
    for direction in d.obstructions[0]["directions"]:
        delta = sp.Matrix([sp.Rational(direction.get(nm, "0")) for nm in orc.names])
        assert any(delta) and orc.gamma * delta == sp.zeros(orc.gamma.rows, 1)
    assert orc.ranks()[0] < orc.dim


def test_dead_and_always_active_on_the_box():
    # n0 = x - 10: dead on the data box [0, 3]; n1 = x + 1: active on all of it (affine: b_1[1] trades
    # with b_2[0]); n2 = -x + 1/2 splits the box.  Neither direction can be removed inside [0, 3].
    tc, case = _tiny([1, 3, 1], [[[1], [1], [-1]], [[1, 2, 1]]], [[-10, 1, Fraction(1, 2)], [0]],
                     [[0], [1], [2], [3]])
    d = design(case, budget=20)
    kinds = sorted(o["kind"] for o in d.obstructions)
    assert kinds == ["active-on-box", "inactive-on-box"]
    # each direction is in ker Gamma for a fresh sample inside the box (oracle)
    rng = random.Random(1)
    fresh = [[Fraction(rng.randint(0, 300), 100)] for _ in range(15)]
    fresh = [x for x in fresh if x[0] not in (Fraction(1, 2),)]
    orc = Oracle(TinyCase(tc.widths, tc.W, tc.b, fresh), lifting=False)
    for o in d.obstructions:
        for direction in o["directions"]:
            delta = sp.Matrix([sp.Rational(direction.get(nm, "0")) for nm in orc.names])
            assert orc.gamma * delta == sp.zeros(orc.gamma.rows, 1)
    assert [len(o["directions"]) for o in sorted(d.obstructions, key=lambda o: o["kind"])] == [1, 2]


def test_degenerate_says_theta_in_S():
    _tc, case = _tiny([1, 2, 1], [[[1], [1]], [[0, 1]]], [[0, 1], [0]], [[1], [2], [3]])
    d = design(case)
    assert d.verdict == "degenerate" and d.obstructions[0]["kind"] == "degenerate"
    assert "theta is in S" in d.statement[1]


def _tiny_of(case) -> TinyCase:
    fr = lambda q: Fraction(int(q.p), int(q.q))  # noqa: E731
    net = case.network
    return TinyCase(list(net.widths), [[[fr(q) for q in row] for row in M.table()] for M in net.W],
                    [[fr(q) for q in bl] for bl in net.b], [[fr(q) for q in x] for x in case.X])


@pytest.mark.parametrize("name", ["twins-2x2x2x1-s1-001", "twins-2x2x2x1-s1-003", "twins-1x2x1-s1-000",
                                  "twins-2x3x2-s1-002"])
def test_suite_twins_directions_are_function_preserving(name):
    # Twins of a deeper layer have fixed edges among their incoming weights: the direction must
    # stay in tau (no fixed edge moves) and be in ker Gamma for a fresh sample (oracle).
    case = load_case(ROOT / "cases" / "suite-v1" / "twins" / f"{name}.json")
    d = design(case, budget=5)
    tc = _tiny_of(case)
    rng = random.Random(2)
    fresh = [[Fraction(rng.randint(-30, 30), 7) for _ in range(tc.widths[0])] for _ in range(20)]
    fresh = [x for x in fresh if is_tie_free(tc.W, tc.b, [x])]
    orc = Oracle(TinyCase(tc.widths, tc.W, tc.b, fresh), lifting=False)
    for o in d.obstructions:
        if o["box"]:
            continue
        for direction in o["directions"]:
            assert set(direction) <= set(orc.names)  # free parameters only
            delta = sp.Matrix([sp.Rational(direction.get(nm, "0")) for nm in orc.names])
            assert orc.gamma * delta == sp.zeros(orc.gamma.rows, 1)


def test_design_announces_its_exact_kernel_stage():
    # Regression: design's first exact kernel of Gamma (minutes on a 8-16-16-1 MLP with 200
    # samples) announced no stage, so `design --timeout` said "exhausted at start" and a terminal
    # showed nothing.  f(x) = 3 relu(2x + 1) at x = 0, 1, -1, 2 (no tie: 2x + 1 != 0): Gamma has
    # n N_L = 4 rows and dim = 4 parameters - 1 rescaling = 3 columns.
    from exactident.budget import listening

    case = parse_case({"format": "exactident-case/1", "name": "t", "widths": [1, 1, 1],
                       "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]], "sample": [[0], [1], [-1], [2]]})
    seen = []
    with listening(lambda name, sizes: seen.append((name, sizes))):
        design(case)
    assert seen[0] == ("design: exact kernel of Gamma", {"rows": 4, "cols": 3})


def test_the_library_calls_honour_a_timeout():
    """``explain`` and ``design`` take ``timeout=`` as the commands take ``--timeout``: past it, the first stage
    begun raises ``BudgetExhausted`` naming itself (a deadline already passed: the first stage); a generous
    one changes nothing."""
    import exactident

    for call in (exactident.design, exactident.explain):
        with pytest.raises(exactident.BudgetExhausted) as exc:
            call(str(ROOT / "cases" / "iris-mlp-4-8-8-3.json"), timeout=1e-6, progress=False)
        assert exc.value.stage and str(exc.value) == f"time budget exhausted at {exc.value.stage}"
    tiny = str(ROOT / "cases" / "tiny-111-kink.json")
    a, b = exactident.explain(tiny, progress=False), exactident.explain(tiny, timeout=3600, progress=False)
    assert a.parameters == b.parameters and a.report.verdict == b.report.verdict
