"""Issue 13, item 8: the ``full-jacobian`` pipeline (every parameter, fixed edges included).

Right values: the exact rank of the full Jacobian is computed independently
(``gamma_exact`` with no fixed edge, FLINT rank) and equals ``rank_gamma``
(positive homogeneity, derived by hand on the [1,1,1] example); a float rank
above ``dim`` is wrong because no exact rank can exceed ``dim``.
"""

from __future__ import annotations

import json
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from _gen import random_case

from exactident.check import check
from exactident.cli import main
from exactident.crosscheck.core import crosscheck_case
from exactident.io.case import load_case, parse_case
from exactident.linalg import exact
from exactident.model.activation import activation_state
from exactident.model.fixed_edges import FixedEdges, fixed_edges
from exactident.model.gamma import gamma_exact
from exactident.numeric.float_network import to_float_network, to_float_sample
from exactident.numeric.full_jacobian import full_jacobian_block, numpy_full_jacobian_svd
from exactident.numeric.gamma_free import gamma_float

ROOT = Path(__file__).resolve().parents[1]


def _hand_case():
    # f = 3 relu(2x + 1) + b_2 at 0, 1, -1.  Full Jacobian columns (W_1, b_1, W_2, b_2):
    # x = 0: (0, 3, 1, 1); x = 1: (3, 3, 3, 1); x = -1 (inactive): (0, 0, 0, 1).
    return parse_case({"format": "exactident-case/1", "name": "hand", "widths": [1, 1, 1],
                       "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]], "sample": [["0"], ["1"], ["-1"]]})


def test_hand_example_full_jacobian_by_hand():
    case = _hand_case()
    net, X = case.network, case.X
    st = activation_state(net, X)
    J = gamma_exact(net, X, st.Z, st.pattern, FixedEdges({}))
    rows = [[Fraction(int(J[i, j].p), int(J[i, j].q)) for j in range(4)] for i in range(3)]
    assert rows == [[0, 3, 1, 1], [3, 3, 3, 1], [0, 0, 0, 1]]
    # column W_2 = (2x * col W_1 / 3 ... ) : relu(2x + 1) = (x col_W1 + col_b1 / 3 * 1) on active rows
    for x, r in zip((0, 1), rows[:2]):
        assert r[2] == Fraction(2 * x * 3 + 3, 3) == (2 * r[0] + r[1]) / 3
    block = full_jacobian_block(net, X, st.pattern, 3, torch=False)
    assert block["n_parameters"] == 4 and block["dim"] == 3
    assert {k: v["rank"] for k, v in block["pipelines"].items()} == {
        "float64/numpy-default": 3, "float32/numpy-default": 3, "float32/float64-eps": 3}


@pytest.mark.parametrize("widths", [(1, 2, 1), (2, 3, 2), (2, 2, 2, 1), (3, 2, 2, 2)])
def test_exact_rank_of_the_full_jacobian_is_rank_gamma(widths):
    tc = random_case(widths, 5, 10, rational=True)
    case = parse_case(tc.obj())
    net, X = case.network, case.X
    st = activation_state(net, X)
    full = exact.rank(gamma_exact(net, X, st.Z, st.pattern, FixedEdges({})))
    assert full == exact.rank(gamma_exact(net, X, st.Z, st.pattern, fixed_edges(net)))
    # and the float64 full Jacobian is the rounded exact one
    J = gamma_exact(net, X, st.Z, st.pattern, FixedEdges({}))
    Jf = gamma_float(to_float_network(net), to_float_sample(X, widths[0]), FixedEdges({}), None)
    Je = np.array([[int(J[i, j].p) / int(J[i, j].q) for j in range(J.ncols())] for i in range(J.nrows())])
    assert Jf.shape == Je.shape and np.allclose(Jf, Je, rtol=1e-12, atol=1e-12)


def test_float32_full_jacobian_over_counts_on_the_published_diabetes_network():
    # exact: rank_gamma = 89 = dim (identifiable); the full Jacobian has 97 columns, 8 of them
    # (one per hidden neuron) exact combinations of the others.  In float32 those 8 columns carry
    # round-off ~1e-7 relative: ranked as float64 (matrix_rank(J.double())) they count.
    case = load_case(ROOT / "cases" / "diabetes-mlp-10-8-1.json")
    r = check(case, pipelines="full-jacobian,float32")
    assert (r.verdict, r.rank_gamma, r.dim) == ("identifiable", 89, 89)
    full = r.numeric["full_jacobian"]
    assert (full["compared_with"], full["dim"], full["n_parameters"]) == (89, 89, 97)
    p = full["pipelines"]
    assert p["float64/numpy-default"]["rank"] == 89 and p["float64/numpy-default"]["agrees"]
    bad = p["float32/float64-eps"]
    assert bad["rank"] > 89 and bad["exceeds_dim"] and not bad["agrees"]
    # ... while crosscheck's free-parameter Gamma makes every float32 policy look right
    res = crosscheck_case(case)
    assert all(o.right_ranks for o in res.outcomes if o.policy.startswith("float32/"))
    wrong = [o.policy for o in res.outcomes if o.policy.startswith("full-jacobian-float32/") and not o.right_ranks]
    assert "full-jacobian-float32/float64-eps" in wrong
    assert res.outcome("full-jacobian-float32/float64-eps").rank_gamma > res.dim
    assert "full Jacobian" in str(r) and "> dim" in str(r)


def test_full_jacobian_rank_above_dim_reads_identifiable_on_iris():
    # iris 4-8-8-3: exact rank_gamma 109 < dim 123, inconclusive.  A float32 full Jacobian ranked with
    # float64's eps reaches dim: a practitioner reads identifiable, a false positive.
    case = load_case(ROOT / "cases" / "iris-mlp-4-8-8-3.json")
    res = crosscheck_case(case)
    assert (res.verdict, res.pattern_rank_gamma, res.dim) == ("inconclusive", 109, 123)
    o = res.outcome("full-jacobian-float32/float64-eps")
    assert o.rank_gamma is not None and o.rank_gamma >= res.dim and o.verdict == "identifiable"
    assert not o.right_verdict


def test_cli_crosscheck_lists_full_jacobian_policies(capsys):
    assert main(["crosscheck", "--json", str(ROOT / "cases" / "tiny-111-kink.json")]) == 0
    data = json.loads(capsys.readouterr().out)
    names = [p["policy"] for p in data["cases"][0]["policies"]]
    assert "full-jacobian-float64/numpy-default" in names and "full-jacobian-float32/float64-eps" in names
    assert data["cases"][0]["spectra"]["full-jacobian-float64"]["gamma_shape"] == [3, 4]


def test_numpy_full_jacobian_svd_shape_and_eps():
    case = _hand_case()
    s, shape, eps = numpy_full_jacobian_svd(case.network, case.X, activation_state(case.network, case.X).pattern,
                                            "float32")
    assert shape == (3, 4) and eps == float(np.finfo(np.float32).eps) and s.shape == (3,)


def test_torch_full_jacobian_pipelines():
    torch = pytest.importorskip("torch")
    from exactident.numeric.torch_backend import gamma_torch, torch_full_jacobian_rank, torch_sample

    case = load_case(ROOT / "cases" / "diabetes-mlp-10-8-1-first10.json")
    net, X = case.network, case.X
    rank, _tol, _s, shape, eps = torch_full_jacobian_rank(net, X, "float64")
    assert shape == (10, 97) and rank == 10 and eps == float(torch.finfo(torch.float64).eps)
    from exactident.numeric.torch_backend import build_sequential

    Jt = gamma_torch(build_sequential(net, "float64"), torch_sample(X, 10, "float64"), range(97)).numpy()
    st = activation_state(net, X)
    J = gamma_exact(net, X, st.Z, st.pattern, FixedEdges({}))
    Je = np.array([[int(J[i, j].p) / int(J[i, j].q) for j in range(J.ncols())] for i in range(J.nrows())])
    assert np.allclose(Jt, Je, rtol=1e-10, atol=1e-12)
    # check(pipelines="torch") adds the torch pipelines
    assert "torch" in sys.modules
    p = check(case, pipelines="torch")
    pipes = p.numeric["full_jacobian"]["pipelines"]
    assert pipes["torch-float64/torch-default"]["rank"] == 10
    assert {"torch-float32/torch-default", "torch-float32/float64-eps"} <= set(pipes)


def test_check_does_not_import_torch():
    import subprocess

    code = ("import sys, exactident as e; from exactident.io.case import parse_case;"
            "e.check(parse_case({'format': 'exactident-case/1', 'name': 't', 'widths': [1, 1, 1],"
            "'weights': [[['2']], [['3']]], 'biases': [['1'], ['0']], 'sample': [['0'], ['1']]}));"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
