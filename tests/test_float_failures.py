"""Issue 13, item 1: numbers outside float range make the float pipeline fail, never exactident.

Each failure is reported in the ``numeric`` block (``status``, ``where``,
``agrees: false``), ``crosscheck`` scores it as a float failure and finishes
the folder, and numpy's ``RuntimeWarning``s are captured, never printed.
Right values: the exact verdicts are derived by hand below (determinants with
``fractions``); the statuses follow from the float formats' ranges
(float64 max ``(2 - 2^-52) 2^1023 ~ 1.8e308``, smallest subnormal ``2^-1074 ~ 4.9e-324``;
float32 max ``~3.4e38``).
"""

from __future__ import annotations

import json
import random
import warnings
from fractions import Fraction

import numpy as np
import pytest

from exactident.check import check
from exactident.cli import main
from exactident.crosscheck.core import FLOAT_FAILED, crosscheck_case, summarize
from exactident.io.case import parse_case
from exactident.numeric import guard
from exactident.numeric.guard import FloatPipelineError, safe_svdvals

F64_MAX = float(np.finfo(np.float64).max)


def _case(widths, W, b, X, name="t"):
    return {"format": "exactident-case/1", "name": name, "widths": widths, "weights": W, "biases": b,
            "sample": X}


def _det3(rows):
    (a, b, c), (d, e, f), (g, h, i) = [[Fraction(v) for v in r] for r in rows]
    return a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g)


ISSUE_1E350 = _case([1, 1, 1], [[["1"]], [["1e350"]]], [["0"], ["0"]], [["1"], ["2"], ["-1"]], "issue-1e350")


def _no_raw_warnings(fn, *args, **kwargs):
    """Run ``fn`` with every warning turned into an error: nothing may escape to the user."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn(*args, **kwargs)


def test_issue_input_1e350_is_a_float_overflow_not_a_crash():
    # W_2 = 10^350 is the fixed edge; Gamma rows (W_2 x a, W_2 a, 1): x = 1, 2 active, -1 inactive.
    w2 = Fraction(10) ** 350
    rows = [(w2 * 1, w2, 1), (w2 * 2, w2, 1), (0, 0, 1)]
    assert _det3(rows) != 0  # rank 3 = dim: identifiable
    r = _no_raw_warnings(check, parse_case(ISSUE_1E350), pipelines="full-jacobian,float32")
    assert (r.verdict, r.rank_gamma, r.dim) == ("identifiable", 3, 3)
    num = r.numeric
    assert num["status"] == "overflow" and num["agrees"] is False
    assert num["where"] == {"stage": "parameters", "entries": ["W_2[0,0]"], "n_entries": 1}
    assert num["rank_gamma"] is None and num["verdict"] is None
    full = num["full_jacobian"]["pipelines"]
    assert all(p["status"] == "overflow" and p["agrees"] is False for p in full.values())


def test_issue_input_through_the_cli(tmp_path, capsys):
    path = tmp_path / "big.json"
    path.write_text(json.dumps(ISSUE_1E350))
    assert main(["check", str(path)]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "FAILED (overflow)" in out and "W_2[0,0]" in out
    assert main(["check", "--json", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["numeric"]["status"] == "overflow"


def test_products_that_overflow_are_caught_in_the_forward_pass():
    # 1e200 in two layers: z_2 = 1e200 relu(1e200 x + 1) + ... = 1e400 x: finite inputs, inf product.
    obj = _case([1, 2, 1], [[["1e200"], ["1"]], [["1e200", "1"]]], [["1", "1"], ["1"]],
                [["1"], ["2"], ["-1"], ["3"]])
    r = _no_raw_warnings(check, parse_case(obj))
    num = r.numeric
    assert num["status"] == "overflow" and num["where"]["stage"] == "forward"
    # samples 0, 1, 3 have z_2 ~ 1e400 x > max float64; sample 2 (x = -1) has z_2 = 1e200 * 0 + 1 * 0 + 1
    assert num["where"]["entries"] == [f"z_2[sample {i}, neuron 0]" for i in (0, 1, 3)]
    assert any("overflow" in w["message"] and w["stage"] == "forward" for w in num["warnings"])


def test_singular_values_beyond_float64_are_an_overflow_at_the_svd():
    # W_2 = 1e308 (fixed): Gamma column W_1 = (1e308, 1.5e308, 0), b_1 = (1e308, 1e308, 0) are finite,
    # but sigma_1 >= the norm of the first column = 1e308 sqrt(1 + 2.25) > max float64.
    assert Fraction(10**308) ** 2 * Fraction(13, 4) > Fraction(F64_MAX) ** 2
    obj = _case([1, 1, 1], [[["1"]], [["1e308"]]], [["0"], ["0"]], [["1"], ["1.5"], ["-1"]])
    num = _no_raw_warnings(check, parse_case(obj)).numeric
    assert num["status"] == "overflow" and num["where"]["stage"] == "svd-gamma"


def test_svd_that_does_not_converge_is_svd_failed(monkeypatch):
    def failing(*args, **kwargs):
        raise np.linalg.LinAlgError("SVD did not converge")

    monkeypatch.setattr(np.linalg, "svd", failing)
    num = check(parse_case(_case([1, 1, 1], [[["2"]], [["3"]]], [["1"], ["0"]], [["0"], ["1"], ["-1"]]))).numeric
    assert num["status"] == "svd-failed" and num["where"]["stage"] == "svd-gamma" and num["agrees"] is False
    assert "did not converge" in num["message"]


def test_non_finite_matrices_never_reach_lapack(monkeypatch):
    # LAPACK on inf/nan returns nan, raises, or (seen here: a 5x3 matrix with one inf, full SVD) does
    # not return: the guard refuses before calling it.
    called = []
    monkeypatch.setattr(np.linalg, "svd", lambda *a, **k: called.append(1))
    M = np.ones((5, 3))
    M[0, 0] = np.inf
    with pytest.raises(FloatPipelineError) as exc:
        safe_svdvals(M, "svd-gamma")
    assert exc.value.failure.status == "overflow" and called == []
    M[0, 0] = np.nan
    with pytest.raises(FloatPipelineError) as exc:
        safe_svdvals(M, "svd-gamma")
    assert exc.value.failure.status == "non-finite" and exc.value.failure.entries == ["[0, 0]"]


def test_nan_from_zero_times_inf_is_non_finite():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        M = np.array([[0.0, 1.0]]) * np.array([[np.inf, 1.0]])
        with pytest.raises(FloatPipelineError) as exc:
            guard.require_finite(M, "gamma", str)
    assert exc.value.failure.status == "non-finite"


def test_parameters_underflowing_to_zero():
    # W_1 = 1e-400 < 2^-1075 (half the smallest subnormal) rounds to 0: the float network is f = 0.
    assert Fraction(1, 10**400) < Fraction(1, 2**1075)
    obj = _case([1, 1, 1], [[["1e-400"]], [["1"]]], [["0"], ["0"]], [["1"], ["2"], ["-1"]])
    w1 = Fraction(1, 10**400)
    assert _det3([(1, 1, 1), (2, 1, 1), (0, 0, 1)]) != 0  # exact rows (x, 1, 1) active, (0, 0, 1): rank 3
    r = _no_raw_warnings(check, parse_case(obj))
    assert r.verdict == "identifiable" and w1 > 0
    num = r.numeric
    assert num["status"] == "underflow-to-zero" and num["agrees"] is False
    assert num["where"]["entries"] == ["W_1[0,0]"] and "band" not in num and "band_withheld" in num


def test_products_underflowing_to_zero_in_gamma():
    # [1,1,1,1], every weight 1e-200: free columns W_1 (W_3 W_2 x) and b_1 (W_3 W_2) are 1e-400 x and
    # 1e-400 exactly, below 2^-1075: float zero.  Columns b_2 (W_3 = 1e-200) and b_3 (1) survive.
    obj = _case([1, 1, 1, 1], [[["1e-200"]], [["1e-200"]], [["1e-200"]]], [["0"], ["0"], ["0"]],
                [["1"], ["2"], ["3"]])
    num = _no_raw_warnings(check, parse_case(obj)).numeric
    assert num["status"] == "underflow-to-zero" and num["where"]["stage"] == "gamma"
    expected = [f"Gamma[sample {i}, output 0, {p}]" for i in range(3) for p in ("W_1[0,0]", "b_1[0]")]
    assert num["where"]["entries"] == expected and num["where"]["n_entries"] == 6
    assert any("underflow" in w["message"] for w in num["warnings"])


def test_crosscheck_scores_failures_and_finishes_the_folder(tmp_path, capsys):
    (tmp_path / "a-big.json").write_text(json.dumps(ISSUE_1E350))
    # 1e39 fits float64 but not float32 (max ~3.4e38): only the float32 backends fail.
    (tmp_path / "b-f32.json").write_text(json.dumps(
        _case([1, 1, 1], [[["1"]], [["1e39"]]], [["0"], ["0"]], [["1"], ["2"], ["-1"]], "f32-only")))
    (tmp_path / "c-fine.json").write_text(json.dumps(
        _case([1, 1, 1], [[["2"]], [["3"]]], [["1"], ["0"]], [["0"], ["1"], ["-1"]], "fine")))
    assert main(["crosscheck", "--json", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "Warning" not in err
    data = json.loads(out)
    cases = {c["name"]: c for c in data["cases"]}
    assert set(cases) == {"issue-1e350", "f32-only", "fine"}
    big = cases["issue-1e350"]
    assert all(s["status"] == "overflow" for s in big["spectra"].values())
    assert all(p["verdict"] == FLOAT_FAILED and not p["right_verdict"] for p in big["policies"])
    f32 = cases["f32-only"]
    assert f32["spectra"]["float64"]["status"] == "ok" and f32["spectra"]["float32"]["status"] == "overflow"
    assert data["summary"]["float_failed"]["float32"] == ["issue-1e350", "f32-only"]
    assert data["summary"]["bands"]["float64"]["excluded_float_failed"] == ["issue-1e350"]
    conf = data["summary"]["confusion"]["float32/numpy-default"]
    assert conf["identifiable"][FLOAT_FAILED] == 2
    assert main(["crosscheck", str(tmp_path)]) == 0  # the text rendering too
    assert "left out (float pipeline failed): issue-1e350, f32-only" in capsys.readouterr().out


def _random_out_of_range(rng: random.Random):
    """A [2,2,1] case with one entry at 10^e, |e| in the ranges that leave float64 or float32."""
    W = [[[str(rng.randint(1, 9)), str(-rng.randint(1, 9))], [str(rng.randint(1, 9)), str(rng.randint(1, 9))]],
         [[str(rng.randint(1, 9)), str(rng.randint(1, 9))]]]
    b = [[str(rng.randint(-3, 3)), str(rng.randint(-3, 3))], [str(rng.randint(-3, 3))]]
    X = [[str(rng.randint(-5, 5)) for _ in range(2)] for _ in range(6)]
    kind = rng.choice(["over64", "under64", "over32"])
    e = {"over64": rng.randint(309, 4000), "under64": -rng.randint(325, 4000), "over32": rng.randint(39, 300)}[kind]
    value = f"{rng.choice(['', '-'])}{rng.randint(1, 9)}e{e}"
    where = rng.choice(["W", "b", "X"])
    if where == "W":
        l, i, j = rng.choice([(0, 0, 0), (0, 1, 1), (1, 0, 1)])
        W[l][i][j], name = value, f"W_{l + 1}[{i},{j}]"
    elif where == "b":
        b[0][1], name = value, "b_1[1]"
    else:
        X[3][0], name = value, "X[3,0]"
    return _case([2, 2, 1], W, b, X, f"rand-{kind}-{where}"), kind, name


@pytest.mark.parametrize("seed", range(24))
def test_generated_out_of_range_exponents(seed):
    obj, kind, name = _random_out_of_range(random.Random(seed))
    case = parse_case(obj)
    r = _no_raw_warnings(check, case, pipelines="full-jacobian,float32")  # never raises, never prints
    num = r.numeric
    full = num["full_jacobian"]["pipelines"]
    stage = "sample" if name.startswith("X") else "parameters"
    if kind == "over64":  # beyond float64 and float32: every pipeline reports the entry
        assert num["status"] == "overflow" and num["where"]["stage"] == stage
        assert num["where"]["entries"] == [name] and num["agrees"] is False
        assert all(p["status"] == "overflow" for p in full.values())
    elif kind == "under64":  # a nonzero value below 2^-1075 becomes 0 in every format
        assert num["status"] == "underflow-to-zero" and num["where"]["entries"] == [name]
        assert num["agrees"] is False
    else:  # 1e39..1e300: fine in float64 (status may still be a product overflow), float32 overflows
        assert num["status"] in ("ok", "overflow", "non-finite")
        assert full["float32/numpy-default"]["status"] == "overflow"
        assert full["float32/numpy-default"]["where"]["entries"] == [name]
    res = _no_raw_warnings(crosscheck_case, case)
    assert res.spectra["float32"].failure is not None
    assert summarize([res]).n_cases == 1


def test_torch_backends_report_failures_too():
    pytest.importorskip("torch")
    from exactident.numeric.tolerance import default_policies

    res = _no_raw_warnings(crosscheck_case, parse_case(ISSUE_1E350), default_policies(torch=True))
    for backend in ("torch-float64", "torch-float32", "torch-full-jacobian-float32"):
        failure = res.spectra[backend].failure
        assert failure is not None and failure.status == "overflow" and failure.entries == ["W_2[0,0]"]
    assert all(o.verdict == FLOAT_FAILED for o in res.outcomes)
