"""Issue 33, part 2: ``exactident.testing`` (strategies with known exact answers, ``assert_rank_agrees``).

Right values: the declared answers of drawn cases are re-derived by ``check`` on the case read back from
its JSON, and the rank of ``Gamma`` (per tie resolution) by an independent Fraction Jacobian in every
parameter with hand-written backpropagation (tests/_jacobian_oracle.py); the float arrays are checked
against ``Fraction -> float`` rounding; the nearest kink against the sample the ``near-kink`` family
recorded; the docs examples are executed from docs/testing.md.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from _jacobian_oracle import full_jacobian, network_from_json, rank
from hypothesis import HealthCheck, find, given, settings

from exactident.check import check
from exactident.io.case import case_to_json, parse_case
from exactident.suites.compare import DEFAULT_FIELDS, compare
from exactident.testing import (
    DEFAULT_FAMILIES,
    acceptable_ranks,
    assert_rank_agrees,
    known_case,
    known_cases,
)

ROOT = Path(__file__).resolve().parents[1]
FAST = settings(max_examples=12, deadline=None, database=None, derandomize=True,  # the same draws in every CI run
                suppress_health_check=[HealthCheck.too_slow])
TINY = known_cases(max_inputs=2, max_width=2, max_hidden_layers=2, max_outputs=2, max_samples=6)


def _oracle_rank(known, relu_prime_at_zero):
    W, b, X = network_from_json(case_to_json(known.case))
    return rank(full_jacobian(W, b, X, relu_prime_at_zero))


@FAST
@given(known_cases())
def test_declared_answers_are_rederived_by_check(known):
    obj = case_to_json(known.case)
    obj.pop("expected")
    report = check(parse_case(obj), numeric=False, all_ranks=True).to_dict()
    assert compare(known.expected, report, DEFAULT_FIELDS) == []
    assert (known.rank_gamma, known.rank_a, known.verdict, known.dim) == (
        report["rank_gamma"], report["rank_a"], report["verdict"], report["dim"])
    assert known.dim == sum(a * b for a, b in zip(known.widths, known.widths[1:])) + known.widths[-1]
    # resolutions are listed when some tie is visible; when every tie is invisible (every resolution gives
    # the same alpha) theta is not on Delta_X after all and the report says so (SPEC's boundary rule)
    assert not known.resolutions or known.on_boundary
    if known.on_boundary and not known.resolutions:
        assert "not on Delta_X after all" in report["reason"]


@FAST
@given(TINY)
def test_rank_gamma_matches_an_independent_fraction_jacobian(known):
    # relu'(0) = 0 is the all-inactive tie resolution, relu'(0) = 1 the all-active one
    inactive, active = _oracle_rank(known, 0), _oracle_rank(known, 1)
    assert inactive in acceptable_ranks(known, tie_convention="inactive")
    assert active in acceptable_ranks(known, tie_convention="active")
    if not known.resolutions:  # off the boundary, or every tie invisible: one alpha, so one Gamma (Prop. 10)
        assert inactive == active == known.rank_gamma
    else:
        assert known.rank_gamma == min(r.rank_gamma for r in known.resolutions)


def test_a_boundary_case_whose_ties_are_all_invisible():
    """Found by hypothesis: a tie whose side changes no alpha (SPEC: theta is then not on Delta_X after all)
    lists no resolution, and relu'(0) = 0 and relu'(0) = 1 give the same rank, by the independent oracle."""
    known = known_case("boundary", (1, 1, 1, 1), seed=1, index=0)
    assert known.on_boundary and known.resolutions == ()
    assert _oracle_rank(known, 0) == _oracle_rank(known, 1) == known.rank_gamma
    assert acceptable_ranks(known, tie_convention="inactive") == {known.rank_gamma}
    obj = case_to_json(known.case)
    obj.pop("expected")
    assert "not on Delta_X after all" in check(parse_case(obj), numeric=False).reason


def test_boundary_tie_resolutions_match_the_fraction_jacobian():
    known = known_case("boundary", (2, 2, 1), index=4)  # one first-layer tie, resolutions of ranks 6 and 7
    assert known.on_boundary and len(known.resolutions) == 2
    by_side = {r.ties[0][3]: r.rank_gamma for r in known.resolutions}
    assert by_side == {False: _oracle_rank(known, 0), True: _oracle_rank(known, 1)}
    assert_rank_agrees(_oracle_rank(known, 0), known, tie_convention="inactive")
    if by_side[False] != by_side[True]:
        with pytest.raises(AssertionError, match="tie resolution"):
            assert_rank_agrees(_oracle_rank(known, 1), known, tie_convention="inactive")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_arrays_are_the_nearest_floats(dtype):
    known = known_case("generic", (2, 3, 1), index=2)
    W, b, X = known.arrays(dtype)
    Wq, bq, Xq = network_from_json(case_to_json(known.case))
    assert [w.shape for w in W] == [(3, 2), (1, 3)] and [v.shape for v in b] == [(3,), (1,)]
    assert X.shape == (known.n_samples, 2) and X.dtype == dtype and W[0].dtype == dtype

    def nearest(f, q):  # no float of the dtype is closer to q than f
        up, down = np.nextafter(f, dtype(np.inf)), np.nextafter(f, dtype(-np.inf))
        return all(abs(Fraction(float(f)) - q) <= abs(Fraction(float(g)) - q) for g in (up, down))

    pairs = [(W[l][i, j], Wq[l][i][j]) for l in range(2) for i in range(len(Wq[l])) for j in range(len(Wq[l][0]))]
    pairs += [(b[l][i], bq[l][i]) for l in range(2) for i in range(len(bq[l]))]
    pairs += [(X[i, j], Xq[i][j]) for i in range(len(Xq)) for j in range(2)]
    assert all(nearest(f, q) for f, q in pairs)


def test_a_failing_property_shrinks_to_a_small_case():
    # "rank Gamma < 4" is false only for wide enough networks: the minimal counterexample has dim >= 4, and
    # shrinking goes to the first family and the smallest architecture with rank 4 (N_0 + 2 N_1 + 1 >= 4 ...).
    smallest = find(known_cases(), lambda k: k.rank_gamma >= 4,
                    settings=settings(max_examples=300, database=None, deadline=None, derandomize=True,
                                      suppress_health_check=list(HealthCheck)))
    assert smallest.rank_gamma >= 4
    assert smallest.family == DEFAULT_FAMILIES[0]
    assert len(smallest.widths) == 3 and sum(smallest.widths) <= 5
    assert smallest.n_samples <= 6


def test_a_failing_given_test_reports_its_shrunk_example():
    seen = []

    @settings(max_examples=30, database=None, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(known_cases())
    def prop(known):
        seen.append(known)
        assert known.rank_gamma < 3

    with pytest.raises(AssertionError):
        prop()
    last = seen[-1]  # hypothesis replays the minimal failing example last
    assert last.rank_gamma >= 3 and last.family == "generic" and sum(last.widths) <= 5


def test_assert_rank_agrees_passes_on_the_right_rank_and_explains_a_wrong_one():
    known = known_case("near-kink", (2, 3, 1), index=4)  # index 4: a sample within 10^-15 of a kink
    right = _oracle_rank(known, 0)
    assert_rank_agrees(right, known, tolerance=1e-10)
    assert_rank_agrees(right, known.case)  # a Case works too
    with pytest.raises(AssertionError) as err:
        assert_rank_agrees(right - 1, known, tolerance=1e-10)
    text = str(err.value)
    assert f"the tool says {right - 1}, the exact rank is {right}" in text
    recorded = known.case.generator["parameters"]["sample"]  # the family's own sample near the kink
    assert f"nearest kink: sample {recorded}," in text
    m = re.search(r"sigma_r in \[([0-9.e+-]+), ([0-9.e+-]+)\]", text)
    assert m and 0 < float(m.group(1)) <= float(m.group(2))
    assert "tolerance 1e-10 is inside the band" in text
    with pytest.raises(AssertionError, match="exceeds min"):
        assert_rank_agrees(known.dim + 1, known)


def test_rank_of_a_and_bad_arguments():
    known = known_case("gap", (2, 2, 2))
    assert acceptable_ranks(known, "a") == {known.rank_a} and known.rank_a > known.rank_gamma  # the gap promise
    assert_rank_agrees(known.rank_a, known, matrix="a")
    with pytest.raises(ValueError, match="matrix"):
        acceptable_ranks(known, "gram")
    with pytest.raises(ValueError, match="tie_convention"):
        acceptable_ranks(known, tie_convention="half")
    with pytest.raises(ValueError, match="degenerate"):
        assert_rank_agrees(1, known_case("degenerate", (1, 1, 1)))


def test_import_loads_hypothesis_only_for_the_strategy():
    code = ("import sys, exactident.testing\nassert 'hypothesis' not in sys.modules\n"
            "from exactident.testing import known_case, assert_rank_agrees\nassert 'hypothesis' not in sys.modules\n"
            "from exactident.testing import known_cases\nknown_cases()\nassert 'hypothesis' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def _doc_example(tag):
    text = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if b.startswith(f"# example: {tag}\n")]
    assert len(blocks) == 1
    namespace: dict = {"__name__": f"docs_testing_{tag}"}
    exec(compile(blocks[0], f"docs/testing.md[{tag}]", "exec"), namespace)
    tests = [v for k, v in namespace.items() if k.startswith("test_") and callable(v)]
    assert tests
    for test in tests:
        test()


def test_docs_example_float_backend():
    _doc_example("float-backend")


def test_docs_example_torch():
    pytest.importorskip("torch")
    _doc_example("torch")


_PLUGIN_TEST = '''
import json, pathlib
SHIPPED = pathlib.Path({shipped!r})

def test_case(exactident_suite_case):
    known = exactident_suite_case
    shipped = json.loads((SHIPPED / known.family / (known.case.name + ".json")).read_text())
    assert known.expected == shipped["expected"]
    assert known.family == "dead-neuron" and known.rank_gamma == shipped["expected"]["rank_gamma"]
'''


def test_plugin_offers_the_shipped_suite(tmp_path):
    # pytest's root is tmp_path, which has no cases/suite-v1: suite-v1's requests, built on use, must equal
    # the shipped files (one test per file of the family, counted here by glob).
    shipped = ROOT / "cases" / "suite-v1"
    (tmp_path / "test_plugged.py").write_text(_PLUGIN_TEST.format(shipped=str(shipped)), encoding="utf-8")
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "exactident.testing.plugin",
            "--rootdir", str(tmp_path), "--exactident-families", "dead-neuron", str(tmp_path / "test_plugged.py")]
    out = subprocess.run(args, capture_output=True, text=True, cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stdout + out.stderr
    n_files = len(list((shipped / "dead-neuron").glob("*.json")))
    assert n_files > 0 and f"{n_files} passed" in out.stdout


def test_plugin_reads_a_suite_folder():
    from exactident.testing.plugin import _params

    class Config:  # the two options and the root directory, as pytest gives them
        rootpath = ROOT

        def __init__(self, opts):
            self.opts = opts

        def getoption(self, name):
            return self.opts.get(name)

    shipped = ROOT / "cases" / "suite-v1"
    params = _params(Config({"--exactident-suite": str(shipped), "--exactident-families": "twins,gap"}))
    want = sorted(p for f in ("twins", "gap") for p in (shipped / f).glob("*.json"))
    assert sorted(p.values[0] for p in params) == want
    assert len(_params(Config({}))) == len(list(shipped.glob("*/*.json")))  # the root's cases/suite-v1
