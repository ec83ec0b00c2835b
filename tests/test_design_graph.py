"""``design`` on layer graphs (exactident-case/2): the same prefix, subsample and point search as for the MLP,
with ``Gamma_free`` and the target ``dim_free``; every rank compared with an independent exact Jacobian."""

from __future__ import annotations

import random
from fractions import Fraction

import flint
import pytest
import sympy as sp
from constrained_oracle import oracle_rank

from exactident.check import check
from exactident.cli import main
from exactident.explain.design import design, small_subsample, smallest_prefix
from exactident.explain.gamma_rows import GraphRows, rows_of
from exactident.io.case import load_case, parse_case

F = flint.fmpq
SLOPE = Fraction(1, 10)
# leaky 2-3-1: W1, b1, W2, b2 (13 parameters)
W1 = [[Fraction(1), Fraction(2)], [Fraction(-1), Fraction(1, 2)], [Fraction(1, 4), Fraction(-1)]]
B1 = [Fraction(-1, 2), Fraction(1, 4), Fraction(1, 8)]
W2 = [Fraction(1), Fraction(-1), Fraction(1, 2)]


def _leaky_case(X):
    s = str
    return parse_case({"format": "exactident-case/2", "name": "leaky-231", "input_shape": [2], "layers": [
        {"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [[s(v) for v in r] for r in W1],
         "bias": [s(v) for v in B1]},
        {"name": "act1", "op": "leaky_relu", "inputs": ["fc1"], "negative_slope": s(SLOPE)},
        {"name": "fc2", "op": "linear", "inputs": ["act1"], "weight": [[s(v) for v in W2]], "bias": ["0"]}],
        "output": "fc2", "sample": [[s(v) for v in x] for x in X]})


def _leaky_jacobian_rank(X) -> int:
    """rank d f(X) / d (W1, b1, W2, b2) by hand: df/dW1[v,k] = W2[v] g_v x_k, df/db1[v] = W2[v] g_v,
    df/dW2[v] = leaky(z_v), df/db2 = 1, with g_v = 1 (z_v > 0) or SLOPE (z_v < 0); Fractions, sympy rank."""
    rows = []
    for x in X:
        z = [sum(W1[v][k] * x[k] for k in range(2)) + B1[v] for v in range(3)]
        assert all(zv != 0 for zv in z)  # no tie: one pattern
        g = [Fraction(1) if zv > 0 else SLOPE for zv in z]
        row = [W2[v] * g[v] * x[k] for v in range(3) for k in range(2)] + [W2[v] * g[v] for v in range(3)]
        row += [zv * gv for zv, gv in zip(z, g)] + [Fraction(1)]
        rows.append([sp.Rational(q.numerator, q.denominator) for q in row])
    return sp.Matrix(rows).rank() if rows else 0


def _points(n, seed):
    rng = random.Random(seed)
    return [[Fraction(rng.randint(-64, 64), 16), Fraction(rng.randint(-64, 64), 16)] for _ in range(n)]


def test_leaky_prefix_and_subsample_reach_dim_free_by_an_independent_jacobian():
    X = _points(24, 3)
    case = _leaky_case(X)
    src = rows_of(case)
    assert isinstance(src, GraphRows)
    # 13 parameters, one positive rescaling per hidden unit (leaky ReLU is positively homogeneous): 13 - 3
    assert src.dim == 10 and src.dim_name == "dim_free"
    assert _leaky_jacobian_rank(X) == 10
    d = design(case)
    assert d.verdict == "identifiable" and d.dim == 10 and d.dim_name == "dim_free"
    m = d.prefix["length"]
    assert _leaky_jacobian_rank(X[:m]) == 10 and _leaky_jacobian_rank(X[:m - 1]) < 10
    shorter = d.prefix["shorter"]
    assert shorter.get("rank_gamma", _leaky_jacobian_rank(X[:m - 1])) == _leaky_jacobian_rank(X[:m - 1])
    idx = d.subsample["indices"]
    assert _leaky_jacobian_rank([X[i] for i in idx]) == 10 and d.subsample["lower_bound"] == 10  # N_L = 1
    assert d.new_case is not None and d.new_report.verdict == "identifiable"
    assert any("rank Gamma_free = dim_free" in s for s in d.statement)


def test_prefix_and_subsample_functions_take_the_graph_interface():
    X = _points(16, 5)
    case = _leaky_case(X)
    src = rows_of(case)
    pattern, ties = src.state(case.X)
    assert not ties
    pre = smallest_prefix(src, case.X, pattern, rng=random.Random(1))
    assert pre is not None and _leaky_jacobian_rank(X[:pre["length"]]) == 10
    sub = small_subsample(src, case.X, pattern, rng=random.Random(1))
    assert sub is not None and _leaky_jacobian_rank([X[i] for i in sub["indices"]]) == 10


RESIDUAL = {"format": "exactident-case/2", "name": "res-small", "input_shape": [2], "layers": [
    {"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [["1", "-1/2"], ["1/2", "1"], ["-1", "1/4"]],
     "bias": ["1/4", "-1/8", "1/2"]},
    {"name": "relu1", "op": "relu", "inputs": ["fc1"]},
    {"name": "fc2", "op": "linear", "inputs": ["relu1"], "weight": [["1/2", "-1", "1/4"], ["-1/4", "1/2", "1"]],
     "bias": ["0", "1/8"]},
    {"name": "res", "op": "add", "inputs": ["fc2", "input"]},
    {"name": "relu2", "op": "relu", "inputs": ["res"]},
    {"name": "head", "op": "linear", "inputs": ["relu2"], "weight": [["1", "-3/4"]], "bias": ["1/16"]}],
    "output": "head", "sample": [["3", "1"], ["-3", "2"], ["2", "-3"], ["5/2", "5/2"]]}


def test_residual_too_small_sample_gets_points_and_the_written_case_is_identifiable(tmp_path, capsys):
    src_path, out = tmp_path / "res.json", tmp_path / "res-designed.json"
    case = parse_case(RESIDUAL)
    src_path.write_text(__import__("json").dumps(RESIDUAL))
    cn = case.compiled
    assert oracle_rank(cn, case.X) < rows_of(case).dim  # 4 samples, N_L = 1: rank <= 4 < dim_free
    assert main(["design", str(src_path), "--box", "-4:4", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "make rank Gamma_free = dim_free hold" in text
    new = load_case(out)
    assert new.architecture is not None and new.X[:4] == case.X
    report = check(new, numeric=False)
    assert report.verdict == "identifiable" and report.dim == rows_of(case).dim
    assert not rows_of(new).state(new.X)[1]  # new points avoid kinks; these four samples have none
    assert oracle_rank(new.compiled, new.X) == report.dim  # the independent sympy Jacobian agrees


def _prelu_case(X):
    # fc1: z0 = x + 2 (>= 1 on [-1, 1]: its PReLU slope is never used there), z1 = x (kinks at 0)
    return parse_case({"format": "exactident-case/2", "name": "prelu-unused", "input_shape": [1], "layers": [
        {"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [["1"], ["1"]], "bias": ["2", "0"]},
        {"name": "act1", "op": "prelu", "inputs": ["fc1"], "weight": ["1/4", "1/4"]},
        {"name": "fc2", "op": "linear", "inputs": ["act1"], "weight": [["1", "-1"]], "bias": ["1/8"]}],
        "output": "fc2", "sample": [[str(v)] for v in X]})


def test_prelu_slope_unused_on_the_box_is_why_no_sample_can():
    case = _prelu_case(["1/2", "-1/2", "3/4"])
    d = design(case, box=([F(-1)], [F(1)]))
    assert [o["kind"] for o in d.obstructions] == ["slope-unused-on-box"]
    assert d.obstructions[0]["directions"] == [{"act1.weight[0]": "1"}]
    assert any("never used on the box" in s for s in d.statement)
    # by hand: theta = (W1 2, b1 2, a 2, W2 2, b2) = 9 parameters, 2 rescalings and 1 slope trade (2 slopes
    # against the 1 x 1 condition s_0 W2[0] W1[0] + s_1 W2[1] W1[1] = 0): dim_free 6.  On [-1, 1] unit 0 is
    # linear, so f = alpha x + beta + gamma relu(x - kappa) there: 4 degrees of freedom, rank <= 4 for every
    # sample in the box, deficit >= 2 (the slope is one of those directions; the other is unit 0's affine line)
    assert d.dim == 6 and d.points["nullity_after"] == [2]
    assert any("1 more direction(s) were not removed" in s for s in d.statement)
    X_new = [list(x) for x in d.new_case.X]
    assert oracle_rank(case.compiled, X_new) == 4


def test_prelu_slope_used_outside_the_box_is_no_obstruction():
    # on [-3, 1] unit 0 goes negative (x < -2): the interval bound does not prove the slope unused
    case = _prelu_case(["1/2", "-1/2", "3/4"])
    d = design(case, box=([F(-3)], [F(1)]))
    assert d.obstructions == []


@pytest.mark.parametrize("path", ["cases/architectures/leaky-mlp.json"])
def test_library_call_and_json_name_dim_free(path):
    import exactident

    d = exactident.design(path, progress=False)
    assert d.to_dict()["dim_name"] == "dim_free" and d.dim == 10  # 13 parameters - 3 rescalings
    assert "dim_free" in d._repr_html_()


def test_a_large_graph_without_a_certified_rank_says_so_instead_of_an_exact_kernel(monkeypatch):
    # a report whose rank is only an interval (as on digits-leaky, 2000 x 1482): past the cap, design stops
    # with one line instead of eliminating Gamma_free over Q (gigabytes there)
    import exactident.explain.design as design_module

    case = _leaky_case(_points(6, 7))
    report = check(case, numeric=False)
    report.rank_gamma, report.rank_gamma_interval = None, (5, 6)
    monkeypatch.setattr(design_module, "MAX_GRAPH_KERNEL_ENTRIES", 10)
    d = design(case, report=report)
    assert d.rank_gamma is None and d.points is None and d.new_case is None
    assert d.statement[0] == "rank Gamma_free is certified only in [5, 6] by check"
    assert "past the 10 entries" in d.statement[1]
