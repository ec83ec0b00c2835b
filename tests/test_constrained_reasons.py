"""Reasons of constrained reports name units and parameters as the framework does (unit_names, param_names)."""

from __future__ import annotations

from pathlib import Path

import flint
import numpy as np

from exactident.check import check, check_constrained
from exactident.io.case import load_case
from exactident.model.network import Network

F = flint.fmpq
ARCH = Path(__file__).resolve().parent.parent / "cases" / "architectures"


def test_entering_submersion_reason_names_the_ties_and_the_parameters():
    # prelu-mlp: two ties at fc1[1]; the reason lists each as x^i@fc1[1] with its side, and names the parameters
    # the kernel direction moves, in the order of the certificate's delta
    case = load_case(ARCH / "prelu-mlp.json")
    r = check(case, numeric=False)
    cert = r.certificate["entering_submersion"]
    ties = r.certificate["free_rank"]["ties"]
    assert r.decided_by == "entering-submersion" and "++" not in r.reason and "+-" not in r.reason
    for t, side in zip(ties, cert["active"]):
        unit = case.compiled.unit_names[t["layer"] - 1][t["neuron"]]
        assert f"x^{t['sample']}@{unit} {'active' if side else 'inactive'}" in r.reason
    first = case.compiled.param_names[cert["delta"][0][0]]
    assert first.startswith("fc1.") and f"moving {first}," in r.reason


def _residual(b1, unit_names):
    """f(x) = x + w2 relu(w1 x + b1): hidden unit 0 = relu(w1 x + b1) (free), unit 1 a linear carrier of x."""
    mat = lambda rows: flint.fmpq_mat([[F(v) for v in row] for row in rows])  # noqa: E731
    return Network((1, 2, 1), [mat([[1], [1]]), mat([[2, 1]])], [[F(b1), F(0)], [F(0)]],
                              [np.array([[0], [-1]]), np.array([[2, -1]])], [np.array([1, -1]), np.array([-1])],
                              [[F(0), F(1)]], [np.array([-1, -1])], 3, ("skip connection",),
                              ["fc1.weight[0,0]", "fc1.bias[0]", "head.weight[0,0]"], unit_names)


def test_dead_unit_reason_names_the_unit_and_the_parameter():
    # relu(x - 10) is dead on x = 1, 2: its bias, incoming weight and outgoing weight have zero columns
    X = [[F(1)], [F(2)]]
    r = check_constrained(_residual(-10, [["fc1[0]", "skip(input[0])"], ["head[0]"]]), X)
    assert r.decided_by == "dead-units"
    assert "unit(s) fc1[0] are dead on every sample" in r.reason
    assert f"lowering {r.certificate['dead_units']['name']} keeps" in r.reason
    # the same network without names falls back to (l,v) and theta_j
    bare = Network(*[getattr(_residual(-10, []), f) for f in (
        "widths", "W", "b", "W_index", "b_index", "negative_slope", "slope_index", "n_params", "features")])
    r = check_constrained(bare, X)
    assert "unit(s) (1,0) are dead" in r.reason and "lowering theta_" in r.reason


def test_describe_truncates_long_lists():
    cn = _residual(-10, [["fc1[0]", "skip(input[0])"], ["head[0]"]])
    assert cn.describe_params([0, 1, 2], limit=2) == "fc1.weight[0,0], fc1.bias[0], ... (3 parameters)"
    assert cn.describe_units([(1, 1), (2, 0)]) == "skip(input[0]), head[0]"
    assert cn.describe_ties([(0, 1, 0), (4, 1, 1)], [False, True], limit=1) == "x^0@fc1[0] inactive, ... (2 ties)"
    assert cn.unit_name(3, 0) == "(3,0)" and cn.param_name(7) == "theta_7"
