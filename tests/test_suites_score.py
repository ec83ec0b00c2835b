"""``suite score`` and ``exactident.suites.score``: counts derived by hand on a four-case suite.

The network is SPEC's worked example ``f(x) = 3 relu(2x + 1)`` (``W_1 = 2, b_1 = 1,
W_2 = 3, b_2 = 0``; ``dim = 3``: ``W_2`` is the fixed edge), with ground truth by hand:

- ``kink/A``, sample ``0, 1, -1``: identifiable, ``rank_gamma = rank_a = 3`` (SPEC §2).
- ``kink/B``, sample ``0, 1, -1/2`` (on the kink): not-identifiable, ``rank_gamma = rank_a = 2``
  (SPEC §2: the "active" resolution, the smallest rank_gamma).
- ``scale/C``: A with the hidden neuron rescaled by ``s = 10^8`` (``W_1 = 2e8, b_1 = 1e8,
  W_2 = 3e-8``): same exact answer as A (positive homogeneity).
- ``scale/D``, sample ``0, 1``: ``n N_L = 2 < dim``; both active, rows of ``Gamma`` ``(3x, 3, 1)`` and of
  ``alpha`` ``(x, 1, 1)`` span 2 dimensions: not-identifiable, ``rank_gamma = rank_a = 2`` (Theorem 8).

The numpy adapter (``examples/numpy_rank_tool.py``: float64, ReLU'(0) = 0, full
Jacobian, numpy's default tolerance) on each, by hand:

- A: Jacobian rows ``(W_2 x a, W_2 a, h, 1)`` = ``(0,3,1,1), (3,3,3,1), (0,0,0,1)``: rank 3 = dim;
  ``alpha`` rows ``(0,1,1), (1,1,1), (0,0,1)``: rank 3.  All right.
- B: at ``x = -1/2`` the float pre-activation is exactly 0 and ReLU'(0) = 0, so the row is ``(0,0,0,1)``:
  the rows of A again -> identifiable, 3, 3.  All three wrong (expected not-identifiable, 2, 2).
- C: rows ``(0, 3e-8, 1e8, 1), (3e-8, 3e-8, 3e8, 1), (0, 0, 0, 1)``.  Call ``E`` the two ``3e-8``
  columns (``||E|| <= ||E||_F = sqrt(3) 3e-8 < 5.2e-8``) and ``M0`` the matrix without them: its columns
  ``a = (1e8, 3e8, 0)`` and ``c = (1, 1, 1)`` give ``sigma_1 sigma_2 = sqrt(|a|^2 |c|^2 - (a.c)^2) = 3.74e8``
  and ``3.16e8 <= sigma_1 <= ||M0||_F < 3.17e8``, so ``sigma_2(M0) > 1.18``, ``sigma_3(M0) = 0``.  numpy's
  tolerance ``sigma_max * 4 * 2.22e-16`` lies in ``[2.8e-7, 2.9e-7]``; by Weyl ``sigma_3 < 5.2e-8`` is cut and
  ``sigma_2 > 1.18 - 5.2e-8`` stays: rank 2.  ``alpha`` does not see the scale: rank 3.  So inconclusive,
  2, 3: verdict and rank_gamma wrong, rank_a right.
- D: rows ``(0,3,1,1), (3,3,3,1)``: rank 2; ``alpha`` rank 2 -> not-identifiable, 2, 2.  All right.

Hence verdict 2/4, rank_gamma 2/4, rank_a 3/4; per family kink 1/2, 1/2, 1/2 and scale 1/2, 1/2, 2/2.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from exactident.cli import main
from exactident.suites import score

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))

from numpy_rank_tool import predict  # noqa: E402


def _case(name, W1, b1, W2, X, expected):
    return {"format": "exactident-case/1", "name": name, "widths": [1, 1, 1], "weights": [[[W1]], [[W2]]],
            "biases": [[b1], ["0"]], "sample": [[x] for x in X], "expected": expected}


def _exp(verdict, rank_gamma, rank_a):
    return {"verdict": verdict, "rank_gamma": rank_gamma, "rank_a": rank_a, "dim": 3}


@pytest.fixture
def hand_suite(tmp_path):
    cases = {
        "kink/A.json": _case("A", "2", "1", "3", ["0", "1", "-1"], _exp("identifiable", 3, 3)),
        "kink/B.json": _case("B", "2", "1", "3", ["0", "1", "-1/2"], _exp("not-identifiable", 2, 2)),
        "scale/C.json": _case("C", "200000000", "100000000", "3/100000000", ["0", "1", "-1"],
                              _exp("identifiable", 3, 3)),
        "scale/D.json": _case("D", "2", "1", "3", ["0", "1"], _exp("not-identifiable", 2, 2)),
    }
    for rel, obj in cases.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(json.dumps(obj))
    return tmp_path


def test_hand_suite_ground_truth_is_the_engines_too(hand_suite, capsys):
    assert main(["suite", "run", str(hand_suite), "--jobs", "1"]) == 0
    capsys.readouterr()


def test_numpy_adapter_counts_by_hand(hand_suite):
    s = score(predict, hand_suite)
    assert s.fields == ("verdict", "rank_gamma", "rank_a")
    assert s.by_field() == {"verdict": [2, 4], "rank_gamma": [2, 4], "rank_a": [3, 4]}
    assert s.by_family() == {"kink": {"verdict": [1, 2], "rank_gamma": [1, 2], "rank_a": [1, 2]},
                             "scale": {"verdict": [1, 2], "rank_gamma": [1, 2], "rank_a": [2, 2]}}
    wrong = {c["file"]: c["wrong"] for c in s.wrong_cases()}
    assert wrong == {"kink/B.json": [["verdict", "not-identifiable", "identifiable"], ["rank_gamma", 2, 3],
                                     ["rank_a", 2, 3]],
                     "scale/C.json": [["verdict", "identifiable", "inconclusive"], ["rank_gamma", 3, 2]]}


def test_cli_score_runs_the_command_per_case(hand_suite, capsys):
    tool = shlex.join([sys.executable, str(ROOT / "examples" / "numpy_rank_tool.py")]) + " {case}"
    assert main(["suite", "score", str(hand_suite), "--tool", tool, "--jobs", "2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["by_field"] == {"verdict": [2, 4], "rank_gamma": [2, 4], "rank_a": [3, 4]}
    assert main(["suite", "score", str(hand_suite), "--tool", tool]) == 0
    out = capsys.readouterr().out
    assert "all     2/4 (50%)  2/4 (50%)   3/4 (75%)" in out
    assert 'scale/C.json: verdict: expected "identifiable", got "inconclusive"' in out


def test_fields_never_reported_are_not_scored_and_failures_count_wrong(hand_suite):
    def verdict_only(path):
        if path.endswith("D.json"):
            raise RuntimeError("tool crashed")
        return {"verdict": "identifiable"}

    s = score(verdict_only, hand_suite)
    # A and C are identifiable (right), B is not (wrong), D failed (wrong): 2/4, and no rank field is scored.
    assert s.fields == ("verdict",) and s.by_field() == {"verdict": [2, 4]}
    failed = [c for c in s.cases if c["error"]]
    assert [c["file"] for c in failed] == ["scale/D.json"] and "tool crashed" in failed[0]["error"]


def test_command_failures_are_reported_per_case(hand_suite, capsys):
    # fails on the kink cases, answers on the scale ones (a tool failing everywhere: exit 2, tests/test_ux.py)
    tool = shlex.join([sys.executable, "-c", "import sys; sys.exit('bad input ' + sys.argv[1][-6:]) if 'kink' in "
                       "sys.argv[1] else print('{\"verdict\": \"identifiable\"}')"]) + " {case}"
    assert main(["suite", "score", str(hand_suite), "--tool", tool, "--json"]) == 0
    cases = json.loads(capsys.readouterr().out)["cases"]
    assert [c["error"] for c in cases[:2]] == ["exit status 1: bad input A.json", "exit status 1: bad input B.json"]
    assert [c["error"] for c in cases[2:]] == [None, None]
    silent = shlex.join([sys.executable, "-c", "import sys; print('no json here') if 'D.json' in sys.argv[1] else "
                         "print('{\"verdict\": \"identifiable\"}')"]) + " {case}"
    assert main(["suite", "score", str(hand_suite), "--tool", silent, "--json"]) == 0
    assert "did not print a JSON object" in capsys.readouterr().out


@pytest.mark.parametrize(("tool", "match"), [("mytool --json", r"must contain \{case\}"),
                                             ("mytool '{case}", r"cannot split")])
def test_bad_tool_template_exits_2(hand_suite, capsys, tool, match):
    assert main(["suite", "score", str(hand_suite), "--tool", tool]) == 2
    assert __import__("re").search(match, capsys.readouterr().err)


def test_float32_adapter_loses_the_rescaled_case(hand_suite):
    import functools

    s = score(functools.partial(predict, dtype="float32"), [hand_suite / "scale" / "C.json"])
    # float32 eps = 1.19e-7: the tolerance exceeds 3.16e8 * 4 * 1.19e-7 > 150.  The 3e-8 columns go as in
    # float64, and so does sigma_2 <= sigma_1 sigma_2 / sigma_1 + 5.2e-8 <= 3.74e8 / 3.16e8 + 5.2e-8 < 1.2 (the
    # column of ones): rank 1.  sigma_1 >= 3.16e8 stays.  alpha (entries 0 and 1) keeps rank 3.
    assert s.cases[0]["got"] == {"verdict": "inconclusive", "rank_gamma": 1, "rank_a": 3}


def test_torch_adapter_matches_numpy_on_the_hand_suite(hand_suite):
    pytest.importorskip("torch")
    from torch_rank_tool import predict as torch_predict

    assert score(torch_predict, hand_suite).by_field() == score(predict, hand_suite).by_field()
