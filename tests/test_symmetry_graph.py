"""The symmetry commands (fdim, audit, canonical, equiv) on layer graphs: hand derivations, the sympy oracle, CLI."""

from __future__ import annotations

import json
import random
from pathlib import Path

import flint
import pytest
from _importers import bad_input_error
from constrained_oracle import oracle_dim_free, oracle_rank, random_constrained

from exactident.cli import main
from exactident.errors import UnsupportedCaseError
from exactident.io.case import load_case, parse_case
from exactident.model.gamma_free import free_state
from exactident.symmetry.fdim_graph import functional_dimension_graph

F = flint.fmpq
ROOT = Path(__file__).resolve().parent.parent
ARCH = ROOT / "cases" / "architectures"


def _case(layers, output, sample, input_shape, name="hand"):
    return parse_case({"format": "exactident-case/2", "name": name, "input_shape": input_shape,
                       "layers": layers, "output": output, "sample": sample})


def _residual_dead(v2="5"):
    """``f(x) = 3 relu(2x - 1) + v2 relu(0 x - 1) + 1/2 + x``: a residual 1-2-1 net whose second unit is dead."""
    return _case([{"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [["2"], ["0"]], "bias": ["-1", "-1"]},
                  {"name": "r", "op": "relu", "inputs": ["fc1"]},
                  {"name": "fc2", "op": "linear", "inputs": ["r"], "weight": [["3", v2]], "bias": ["1/2"]},
                  {"name": "sum", "op": "add", "inputs": ["fc2", "input"]}], "sum", [["0"], ["1"]], [1])


def _conv3(w=("1", "-2"), b="1/2", v=("3", "-1"), c="1/4"):
    """A 3-pixel conv1d: ``f(x) = v0 relu(w0 x0 + w1 x1 + b) + v1 relu(w0 x1 + w1 x2 + b) + c``."""
    return _case([{"name": "conv", "op": "conv1d", "inputs": ["input"], "out_channels": 1, "kernel_size": [2],
                   "stride": [1], "padding": [0], "weight": [[list(w)]], "bias": [b]},
                  {"name": "r", "op": "relu", "inputs": ["conv"]},
                  {"name": "flat", "op": "flatten", "inputs": ["r"]},
                  {"name": "fc", "op": "linear", "inputs": ["flat"], "weight": [list(v)], "bias": [c]}],
                 "fc", [["0", "1", "2"], ["1", "-1", "1/2"]], [1, 3])


def _tie_free_points(cn, n, seed):
    rng = random.Random(seed)
    pts = [[F(rng.randint(-16, 16), rng.choice([1, 2, 4])) for _ in range(cn.widths[0])] for _ in range(n)]
    bad = {i for i, _l, _v in free_state(cn, pts).ties}
    return [x for i, x in enumerate(pts) if i not in bad]


# ---------------------------------------------------------------- fdim


def test_fdim_residual_net_with_a_dead_unit_by_hand():
    """Parameters (w1, w2, b1, b2, v1, v2, c): 7; S_H has the two ReLU units' rescalings (the skip's carrier is
    pinned by its fixed weight 1), dim_free = 5.  Unit 2 has z = -1 on all of R: its w2, b2, v2 columns of J_free are
    0, and f = v1 relu(w1 x + b1) + c + x, so the columns are v1 x 1[z > 0], v1 1[z > 0], relu(z) = w1 x 1[z > 0] +
    b1 1[z > 0] and 1: they span {x 1[z > 0], 1[z > 0], 1}, fdim_free = 3.  No prover reads a layer graph on the
    domain: the upper bound stays dim_free = 5."""
    case = _residual_dead()
    r = functional_dimension_graph(case.compiled, case.X, seed=1)
    assert (r.n_params, r.symmetry_dim, r.dim, r.upper, r.lower) == (7, 2, 5, 5, 3)
    assert not r.settled and not r.no_hidden_symmetries
    assert oracle_rank(case.compiled, r.points) == 3


def test_fdim_prelu_slopes_trade_with_the_affine_part_by_hand():
    """prelu-mlp (2 inputs, 3 PReLU units with a slope each, 1 output): 16 parameters, 3 rescalings, dim_free = 13.
    prelu_a(z) = a z + (1 - a) relu(z), so f = A(x) + sum_u v_u (1 - a_u) relu(w_u x + b_u) with A affine in x
    (3 dimensions: the slopes and the output bias only move A), and each relu term has 4 parameters and one
    rescaling: fdim_free <= 3 + 3 * 3 = 12, reached by the random points (a hidden symmetry beyond S_H)."""
    case = load_case(ARCH / "prelu-mlp.json")
    r = functional_dimension_graph(case.compiled, case.X)
    assert (r.n_params, r.dim, r.lower, r.upper) == (16, 13, 12, 13)
    assert oracle_rank(case.compiled, r.points) == 12


def test_fdim_three_pixel_conv_reaches_dim_free_and_matches_the_oracle():
    """6 parameters (w0, w1, b, v0, v1, c), one rescaling (both positions share the channel's scale: the tie of w0,
    w1, b across positions), dim_free = 5; generic: the exact sympy rank over many random points is 5 too."""
    case = _conv3()
    r = functional_dimension_graph(case.compiled, case.X)
    assert (r.n_params, r.symmetry_dim, r.dim, r.lower) == (6, 1, 5, 5) and r.no_hidden_symmetries
    assert oracle_rank(case.compiled, _tie_free_points(case.compiled, 12, 0)) == 5
    assert oracle_dim_free(case.compiled) == 5


@pytest.mark.parametrize("seed", range(12))
def test_fdim_lower_bound_against_the_sympy_oracle(seed):
    """On random constrained nets (ties, fixed entries, leaky, PReLU, linear units): the lower bound is the exact
    rank at its witness points, never above dim_free (also computed by the oracle), and the oracle's rank over many
    random tie-free points never exceeds the upper bound."""
    cn = random_constrained(seed)
    try:
        r = functional_dimension_graph(cn, seed=seed)
    except UnsupportedCaseError:  # a constant unit: no tie-free point exists
        return
    assert r.upper == r.dim == oracle_dim_free(cn)
    assert r.lower <= r.upper
    assert oracle_rank(cn, r.points) == r.lower
    many = oracle_rank(cn, _tie_free_points(cn, 3 * cn.n_params // max(1, cn.widths[-1]) + 4, seed))
    assert many <= r.upper
    if many == r.dim:  # generic: the random batches reach it too
        assert r.lower == r.dim


def test_fdim_on_a_box_keeps_the_points_inside():
    case = _conv3()
    lo, hi = F(-1), F(1, 2)
    r = functional_dimension_graph(case.compiled, case.X, box=([lo] * 3, [hi] * 3))
    assert all(lo <= v <= hi for x in r.points for v in x) and r.lower <= r.upper == 5


def test_fdim_refuses_a_constant_unit_in_one_line():
    case = _case([{"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [["0"]], "bias": ["0"]},
                  {"name": "r", "op": "leaky_relu", "inputs": ["fc1"], "negative_slope": "1/10"},
                  {"name": "fc2", "op": "linear", "inputs": ["r"], "weight": [["3"]], "bias": ["1"]}],
                 "fc2", [["1"]], [1])
    with pytest.raises(UnsupportedCaseError, match=r"fc1\[0\] has zero incoming weights and bias"):
        functional_dimension_graph(case.compiled, case.X)


def test_fdim_cli_on_a_layer_graph_json_and_text(capsys):
    path = str(ARCH / "conv1d-avgpool.json")
    assert main(["fdim", path, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["format"] == "exactident-fdim/1" and d["dim_kind"] == "dim_free"
    assert d["dim"] == d["n_params"] - d["symmetry_dim"] and d["lower"] <= d["upper"] == d["dim"]
    assert d["mechanisms"] == [] and "convolution" in d["features"]
    assert main(["fdim", path, "--box", "0", "1"]) == 0
    out = capsys.readouterr().out
    assert "layer graph" in out and "conv1[c=0" in out


def test_fdim_cli_bad_box_one_line(capsys):
    err = bad_input_error(capsys, ["fdim", str(ARCH / "leaky-mlp.json"), "--box", "1", "0"])
    assert "--box" in err
