"""The float cross-check's pipelines: one float64 pipeline by default, the others on request
(``check --pipelines``), and a budget running out in the cross-check keeps the exact verdict (docs/cli.md).

No test measures time: a cross-check that never ends is simulated (a sleep), and what is
checked is the report the budget produces.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import exactident.check  # noqa: F401  (the module; the package re-exports the function under the same name)
import exactident.numeric.block as block_module
from exactident.budget import deliver, run_isolated, stage
from exactident.check import check
from exactident.cli import main
from exactident.io.case import Case, load_case
from exactident.verify.certificate import verify_certificate

ROOT = Path(__file__).resolve().parent.parent
check_module = sys.modules["exactident.check.dense_route"]  # the MLP stages (rank_stage calls certify_ranks)
IRIS = ROOT / "cases" / "iris-mlp-4-8-8-3.json"    # R_Gamma 109 < dim 123: the float verdict needs R_A
WINE = ROOT / "cases" / "wine-mlp-13-8-3.json"     # R_Gamma = dim: identifiable, no R_A needed


def _float32_case() -> Case:
    # 1-2-1 with float32-stored weights (every value exact in float32): provenance says float32
    W1 = np.array([[1.5], [-0.75]], dtype=np.float32)
    W2 = np.array([[2.0, 1.0]], dtype=np.float32)
    b1, b2 = np.array([0.5, 1.0], dtype=np.float32), np.array([0.0], dtype=np.float32)
    X = np.array([[0.0], [1.0], [-1.0], [2.0], [0.25]], dtype=np.float32)
    return Case.from_arrays([W1, W2], [b1, b2], X, name="f32")


def _count_calls(monkeypatch, module, name):
    calls = []
    real = getattr(module, name)

    def spy(*args, **kwargs):
        calls.append(kwargs.get("dtype", args[4] if len(args) > 4 else None))
        return real(*args, **kwargs)
    monkeypatch.setattr(module, name, spy)
    return calls


def test_default_runs_exactly_one_float64_pipeline(monkeypatch):
    calls = _count_calls(monkeypatch, block_module, "float_operators")
    case = _float32_case()
    num = check(case).numeric
    assert len(calls) == 1  # one float pipeline built
    assert num["dtype"] == "float64" and num["pipelines"] == ["float64"]  # float64 even for float32 weights
    for optional in ("near_kinks", "full_jacobian", "stored_dtype"):
        assert optional not in num


def test_alpha_only_when_the_verdict_needs_it():
    # identifiable (C_S): the float verdict needs no R_A, and no exact one was computed
    wine = check(load_case(WINE)).numeric
    assert wine["verdict"] == "identifiable" and wine["rank_a"] is None and wine["agrees"] is True
    # R_Gamma < dim: the float verdict needs R_A; iris' R_A is 3 * 79 = 237 (the exact --all-ranks value)
    iris = check(load_case(IRIS)).numeric
    assert iris["rank_gamma"] == 109 and iris["rank_a"] == 237
    # the exact R_A computed (--all-ranks): the float one is computed to compare with it
    full = check(load_case(WINE), all_ranks=True)
    assert full.rank_a is not None and full.numeric["rank_a"] == full.rank_a


def test_pipelines_select_what_runs(monkeypatch):
    case = load_case(IRIS)
    kinks = check(case, pipelines="kinks").numeric
    assert "near_kinks" in kinks and "full_jacobian" not in kinks
    assert kinks["pipelines"] == ["float64", "kinks"]
    fj = check(case, pipelines=["full-jacobian"]).numeric
    assert "near_kinks" not in fj and set(fj["full_jacobian"]["pipelines"]) == {"float64/numpy-default"}
    f32 = check(case, pipelines="float32").numeric
    assert set(f32["full_jacobian"]["pipelines"]) == {"float32/numpy-default", "float32/float64-eps"}
    both = check(case, pipelines="full-jacobian,float32").numeric["full_jacobian"]["pipelines"]
    assert set(both) == {"float64/numpy-default", "float32/numpy-default", "float32/float64-eps"}
    # stored-dtype: a second main pipeline in the dtype the weights were stored in
    calls = _count_calls(monkeypatch, block_module, "float_operators")
    stored = check(_float32_case(), pipelines="stored-dtype").numeric
    assert calls == ["float64", np.float32] or [np.dtype(c).name for c in calls] == ["float64", "float32"]
    assert stored["dtype"] == "float64" and stored["stored_dtype"]["dtype"] == "float32"
    assert stored["stored_dtype"]["compared_with"] == stored["compared_with"]
    # float64 weights: nothing to add
    assert "stored_dtype" not in check(case, pipelines="stored-dtype").numeric


def test_unknown_pipeline_is_refused(capsys):
    from exactident.errors import UnsupportedCaseError

    with pytest.raises(UnsupportedCaseError, match="unknown float pipeline 'bogus'"):
        check(load_case(WINE), pipelines="bogus")
    assert main(["check", "--pipelines", "kinks,bogus", str(WINE)]) == 2
    err = capsys.readouterr().err
    assert "unknown float pipeline 'bogus'" in err and len(err.strip().splitlines()) == 1
    assert main(["check", "--pipelines", "kinks", "--no-numeric", str(WINE)]) == 2
    assert "--no-numeric" in capsys.readouterr().err


def _stuck_cross_check(*args, **kwargs):
    stage("float cross-check (stuck)")
    time.sleep(120)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the hard budget needs fork")
def test_budget_out_in_the_cross_check_keeps_the_verdict(monkeypatch):
    monkeypatch.setattr(block_module, "numeric_block", _stuck_cross_check)
    case = load_case(WINE)
    r = check(case, timeout=3.0)  # tiny against the stuck cross-check; the exact part takes < 0.1 s
    assert r.verdict == "identifiable" and r.decided_by == "theorem-9"
    assert r.rank_gamma == r.dim == 131 and r.certificate is not None
    num = r.numeric
    assert num["status"] == "timed out" and num["agrees"] is None and num["stage"] == "float cross-check (stuck)"
    d = json.loads(json.dumps(r.to_dict()))
    assert "timed_out" not in d  # the report is not a timed-out one: its verdict is complete
    valid, msgs = verify_certificate(case, d, require_claims=True)
    assert valid, msgs


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the hard budget needs fork")
def test_cli_table_says_timed_out(monkeypatch, capsys):
    monkeypatch.setattr(block_module, "numeric_block", _stuck_cross_check)
    assert main(["check", "--timeout", "3", str(WINE)]) == 0
    out = capsys.readouterr().out
    row = out.splitlines()[2]
    assert "identifiable" in row and "timed out" in row


def test_budget_before_the_verdict_still_gives_inconclusive(monkeypatch):
    def stuck(*args, **kwargs):
        stage("ranks mod p")
        time.sleep(120)
    monkeypatch.setattr(check_module, "certify_ranks", stuck)
    if not hasattr(os, "fork"):
        pytest.skip("the hard budget needs fork")
    r = check(load_case(WINE), timeout=1.0)
    assert r.verdict == "inconclusive" and r.to_dict()["timed_out"] is True and r.numeric is None


def test_run_isolated_returns_what_was_delivered(monkeypatch):
    def work():
        deliver("verdict")
        time.sleep(0.05)
        stage("optional")  # in-process budget: raises here, past the deadline
        return "all"
    # the in-process (soft) budget, as without fork
    monkeypatch.delattr(os, "fork", raising=False)
    out = run_isolated(work, 0.01)
    assert out.timed_out and out.partial == "verdict" and out.stage == "optional"
    assert run_isolated(work, 60).value == "all"
