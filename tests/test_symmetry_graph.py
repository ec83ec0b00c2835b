"""The symmetry commands (fdim, audit, canonical, equiv) on layer graphs: hand derivations, the sympy oracle, CLI."""

from __future__ import annotations

import json
import random
from pathlib import Path

import flint
import pytest
from _importers import bad_input_error
from constrained_oracle import oracle_dim_free, oracle_rank, random_constrained
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exactident.cli import main
from exactident.errors import UnsupportedCaseError
from exactident.io.case import load_case, parse_case
from exactident.model.gamma_free import free_state
from exactident.model.network import Network
from exactident.symmetry.fdim import functional_dimension as functional_dimension_graph

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
    b1 1[z > 0] and 1: they span {x 1[z > 0], 1[z > 0], 1}, fdim_free = 3.  The complete region cover settles it
    (upper = 3); without the cover (regions=0) no prover reads a layer graph and the upper bound stays dim_free = 5."""
    case = _residual_dead()
    r = functional_dimension_graph(case.compiled, case.X, seed=1)
    assert (r.n_params, r.symmetry_dim, r.dim, r.upper, r.lower) == (7, 2, 5, 3, 3)
    assert r.settled and not r.no_hidden_symmetries and r.cover["complete"]
    assert [m["kind"] for m in r.mechanisms] == ["regions"] and r.mechanisms[0]["dimensions"] == 2
    assert oracle_rank(case.compiled, r.points) == 3
    r0 = functional_dimension_graph(case.compiled, case.X, seed=1, regions=0)
    assert (r0.upper, r0.lower) == (5, 3) and r0.cover is None and r0.mechanisms == []


def test_fdim_prelu_slopes_trade_with_the_affine_part_by_hand():
    """prelu-mlp (2 inputs, 3 PReLU units with a slope each, 1 output): 16 parameters, 3 rescalings.
    prelu_a(z) = a z + (1 - a) relu(z), so f = A(x) + sum_u v_u (1 - a_u) relu(w_u x + b_u) with A affine in x
    (3 dimensions: the slopes and the output bias only move A), and each relu term has 4 parameters and one
    rescaling: fdim_free <= 3 + 3 * 3 = 12.  The slopes and the output bias are 4 parameters for those 3
    dimensions: the one left is the slope trade (docs/theory.md), counted in S_H, so dim_free = 16 - 3 - 1 = 12
    too, reached by the random points; the region cover is no longer needed for the upper bound."""
    case = load_case(ARCH / "prelu-mlp.json")
    r = functional_dimension_graph(case.compiled, case.X)
    assert (r.n_params, r.dim, r.lower, r.upper) == (16, 12, 12, 12)
    assert functional_dimension_graph(case.compiled, case.X, regions=0).upper == 12
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
    assert r.dim == oracle_dim_free(cn)
    assert r.lower <= r.upper <= r.dim
    assert r.upper == r.dim or r.cover["complete"]  # only a complete region cover goes below dim_free
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


def _equal_pool(bias="1"):
    """``h(max(a x + c, a x + c))``: a 1-pixel input padded by 1 and a kernel ``[a, a]`` give two equal pixels."""
    return {"format": "exactident-case/2", "name": "equal-pool", "input_shape": [1, 1],
            "layers": [{"name": "c", "op": "conv1d", "inputs": ["input"], "out_channels": 1, "kernel_size": [2],
                        "padding": [1], "weight": [[["1/3", "1/3"]]], "bias": ["1"]},
                       {"name": "m", "op": "maxpool1d", "inputs": ["c"], "kernel_size": [2]},
                       {"name": "fl", "op": "flatten", "inputs": ["m"]},
                       {"name": "h", "op": "linear", "inputs": ["fl"], "weight": [["2"]], "bias": [bias]}],
            "output": "h", "sample": [["1"]]}


def test_fdim_refuses_a_domain_of_ties(tmp_path, capsys):
    # Hand derivation: pixel 0 of the padded convolution is 1/3 * 0 + 1/3 x + 1, pixel 1 is 1/3 x + 1/3 * 0 + 1,
    # equal for every x, so the max pool's unit max(a, b) = b + relu(a - b) has a - b = 0 on all of R: every input
    # is a tie and J_free is defined nowhere.  "fdim = 0" (the old answer, from a complete cover with no region)
    # is false: the head bias alone moves the output, y = 2 (x/3 + 1) + bias.
    for x in (F(-7, 2), F(0), F(5, 3)):
        assert F(1, 3) * 0 + F(1, 3) * x + 1 == F(1, 3) * x + F(1, 3) * 0 + 1
    case = parse_case(_equal_pool())
    with pytest.raises(UnsupportedCaseError, match="every point of R\\^n is a tie"):
        functional_dimension_graph(case.compiled, case.X)
    # the plain MLP route too: (1,0) is dead everywhere (W = 0, b = -1), (2,0) reads only it with bias 0
    net = Network((1, 2, 1, 1), [[[0], [1]], [[5, 0]], [[1]]], [[-1, 0], [0], [0]])
    with pytest.raises(UnsupportedCaseError, match="tie"):
        functional_dimension_graph(net)
    path = tmp_path / "equal-pool.json"
    path.write_text(json.dumps(_equal_pool()))
    assert main(["fdim", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tie" in err[0]


def test_fdim_cli_on_a_layer_graph_json_and_text(capsys):
    path = str(ARCH / "conv1d-avgpool.json")
    assert main(["fdim", path, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["format"] == "exactident-fdim/1" and d["dim_kind"] == "dim_free"
    assert d["dim"] == d["n_params"] - d["symmetry_dim"] and d["lower"] <= d["upper"] == d["dim"]
    assert "convolution" in d["features"]
    assert main(["fdim", path, "--box", "0:1"]) == 0
    out = capsys.readouterr().out
    assert "layer graph" in out and "conv1[c=0" in out


def test_fdim_cli_bad_box_one_line(capsys):
    err = bad_input_error(capsys, ["fdim", str(ARCH / "leaky-mlp.json"), "--box", "1:0"])
    assert "--box" in err


# ---------------------------------------------------------------- canonical and equiv


def _rescaled(cn, seed):
    """``cn`` moved by a random element of H: every generator (a class of units) rescaled by a random positive
    rational, applied to the dense entries unit by unit (incoming times lambda, outgoing over lambda), written
    here without the code under test."""
    from exactident.model.symmetry import log_scales

    units, A, _factor = log_scales(cn)
    rng = random.Random(seed)
    mu = [F(rng.randint(1, 9), rng.randint(1, 9)) for _ in range(A.ncols())]
    lam = {}
    for u, (l, v) in enumerate(units):
        lam[(l, v)] = F(1)
        for g in range(A.ncols()):
            lam[(l, v)] *= mu[g] ** int(A[u, g].p)
    theta = [None] * cn.n_params
    for l in range(1, cn.L + 1):  # the first entry of each parameter gives its new value
        for i in range(cn.widths[l]):
            out = lam.get((l, i), F(1))
            for k in range(cn.widths[l - 1]):
                j = int(cn.W_index[l - 1][i, k])
                if j >= 0 and theta[j] is None:
                    theta[j] = cn.W[l - 1][i, k] * out / lam.get((l - 1, k), F(1))
            j = int(cn.b_index[l - 1][i])
            if j >= 0 and theta[j] is None:
                theta[j] = cn.b[l - 1][i] * out
    for l in range(1, cn.L):
        for v in range(cn.widths[l]):
            j = int(cn.slope_index[l - 1][v])
            if j >= 0 and theta[j] is None:
                theta[j] = cn.negative_slope[l - 1][v]
    return cn.with_theta(theta)


def _oracle_outputs(cn, X):
    """An independent Fraction forward pass over the dense entries."""
    from fractions import Fraction

    def fr(v):
        return Fraction(int(v.p), int(v.q))

    out = []
    for x in X:
        h = [fr(F(v)) for v in x]
        for l in range(1, cn.L + 1):
            z = [fr(cn.b[l - 1][i]) + sum(fr(cn.W[l - 1][i, k]) * h[k] for k in range(cn.widths[l - 1]))
                 for i in range(cn.widths[l])]
            h = z if l == cn.L else [zz if zz >= 0 else fr(cn.negative_slope[l - 1][v]) * zz for v, zz in enumerate(z)]
        out.append(h)
    return out


SHIPPED = ["residual-mlp", "leaky-mlp", "prelu-mlp", "conv1d-avgpool", "conv2d-avgpool"]


@pytest.mark.parametrize("name", SHIPPED)
def test_rescaled_networks_compute_the_same_function_and_have_the_same_form(name):
    from exactident.symmetry.canonical import canonical_form
    from exactident.symmetry.equiv import equiv

    case = load_case(ARCH / f"{name}.json")
    cn = case.compiled
    for seed in range(3):
        other = _rescaled(cn, seed)
        assert _oracle_outputs(other, case.X) == _oracle_outputs(cn, case.X)  # the group keeps the function
        fa, fb = canonical_form(cn), canonical_form(other)
        assert fa.complete and fa.key == fb.key and fa.digest() == fb.digest()
        e = equiv(cn, other, case.X)
        assert e.same_orbit is True and e.alignment.max_abs == 0 and e.sample["same_outputs"]
        assert not e.hidden_symmetry_on_sample


def test_the_form_is_reached_by_a_group_element_and_keeps_the_outputs():
    from exactident.symmetry.canonical import canonical_form

    case = load_case(ARCH / "conv2d-avgpool.json")
    f = canonical_form(case.compiled)
    assert _oracle_outputs(f.network, case.X) == _oracle_outputs(case.compiled, case.X)
    assert all(abs(f.theta[j]) == 1 for j in f.pivots if j is not None)


def test_hand_form_of_a_three_pixel_conv():
    """One generator (the channel, both positions): the pivot is the first nonzero parameter with exponent +-1,
    the kernel's w0 = 2, so mu = 1/2 and theta (w0, w1, b, v0, v1, c) = (2, -2, 1/2, 3, -1, 1/4) becomes
    (1, -1, 1/4, 6, -2, 1/4): incoming halved, outgoing doubled, the output bias unchanged."""
    from exactident.symmetry.canonical import canonical_form

    cn = _conv3(w=("2", "-2")).compiled
    f = canonical_form(cn)
    by_name = {cn.param_name(j): v for j, v in enumerate(f.theta)}
    assert sorted(by_name.values()) == sorted([F(1), F(-1), F(1, 4), F(6), F(-2), F(1, 4)])
    assert by_name["fc.bias[0]"] == F(1, 4) and by_name["conv.bias[0]"] == F(1, 4)


def test_perturbing_one_weight_gives_another_form_and_different_functions():
    from exactident.symmetry.canonical import canonical_form
    from exactident.symmetry.equiv import equiv

    a = _conv3().compiled
    b = _conv3(v=("3", "-1/2")).compiled
    assert canonical_form(a).key != canonical_form(b).key
    X = [[F(1), F(1), F(1)], [F(0), F(0), F(0)]]
    e = equiv(a, b, X)
    # at x = (1, 1, 1) both positions have z = 1 - 2 + 1/2 < 0 (f = c for both); at x = 0 both have z = 1/2 and
    # f differs by (v1 - v1') z = (1/2)(1/2); the forms (pivot w0 = 1 already, mu = 1) differ by |v1 - v1'| = 1/2
    assert e.same_orbit is False and "different functions" in e.reason
    assert e.sample["same_outputs"] is False
    assert e.first_difference["entry"] == "fc.weight[0,1]"
    assert e.alignment.max_abs == F(1, 2) and e.alignment.method == "canonical"  # ties keep the canonical one


def test_hidden_symmetry_on_the_sample_is_certified_when_orbits_differ():
    """Two conv nets differing in v1 only agree wherever the second position is inactive: on the sample below
    (x1 = 0, x2 = 4: w0 x1 + w1 x2 + b = -8 + 1/2 < 0) their outputs are equal (Fraction forward pass), elsewhere
    they differ, so the orbits differ and the sample shows a hidden symmetry."""
    from exactident.symmetry.equiv import equiv

    a, b = _conv3().compiled, _conv3(v=("3", "5")).compiled
    X = [[F(1), F(0), F(4)], [F(-1), F(0), F(4)]]
    assert _oracle_outputs(a, X) == _oracle_outputs(b, X)
    e = equiv(a, b, X)
    assert e.same_orbit is False and e.sample["same_outputs"] and e.hidden_symmetry_on_sample


def _leaky_mlp(W1, b1, W2, order=None, name="hand"):
    order = list(range(len(W1))) if order is None else order
    return _case([{"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [W1[i] for i in order],
                   "bias": [b1[i] for i in order]},
                  {"name": "r", "op": "leaky_relu", "inputs": ["fc1"], "negative_slope": "1/8"},
                  {"name": "fc2", "op": "linear", "inputs": ["r"], "weight": [[row[i] for i in order] for row in W2],
                   "bias": ["1"] * len(W2)}], "fc2", [["0"] * len(W1[0])], [len(W1[0])], name).compiled


def test_permuted_hidden_units_have_the_same_form():
    """Swapping the two hidden units of fc1 (rows of fc1, columns of fc2) keeps the function; both units are
    interchangeable (every weight and bias a parameter of its own, one fixed slope), so the forms agree: same orbit,
    and B taken back into A's coordinates by the forms' element (unit 0 of A is unit 1 of B) has error 0."""
    from exactident.symmetry.equiv import equiv
    from exactident.symmetry.group import interchangeable_blocks, scale_classes

    W1, b1, W2 = [["2", "1"], ["-1", "3"]], ["1", "-1/2"], [["5", "-7"]]
    a, b = _leaky_mlp(W1, b1, W2), _leaky_mlp(W1, b1, W2, [1, 0])
    units, generators, _ = scale_classes(a)
    assert interchangeable_blocks(a, units, generators) == [(1, [[(1, 0)], [(1, 1)]])]
    e = equiv(a, b, [[F(1), F(2)]])
    assert e.same_orbit is True and e.sample["same_outputs"]
    assert e.alignment.method == "canonical" and e.alignment.max_abs == 0 and e.alignment.perm == [[1, 0]]


def _two_channel_conv(order):
    """conv1d with 2 output channels (kernel 2 on 3 pixels), flatten (channel-major), linear 4 -> 1."""
    w, bias, v = [[["1", "-2"]], [["3", "1/2"]]], ["1/2", "-1"], [["3", "-1"], ["2", "5"]]
    return _case([{"name": "conv", "op": "conv1d", "inputs": ["input"], "out_channels": 2, "kernel_size": [2],
                   "stride": [1], "padding": [0], "weight": [w[c] for c in order], "bias": [bias[c] for c in order]},
                  {"name": "r", "op": "relu", "inputs": ["conv"]},
                  {"name": "flat", "op": "flatten", "inputs": ["r"]},
                  {"name": "fc", "op": "linear", "inputs": ["flat"], "weight": [[x for c in order for x in v[c]]],
                   "bias": ["0"]}], "fc", [["0", "1", "2"]], [1, 3]).compiled


def test_swapped_conv_channels_are_the_same_orbit():
    """Swapping the two output channels of a convolution (kernels, biases and the blocks of the next layer's
    columns) keeps the function (Fraction forward pass); the form permutes channels as blocks, so the forms are
    equal: the same orbit, and B taken back into A's coordinates by the forms' element has error 0."""
    from exactident.symmetry.equiv import equiv

    a, b = _two_channel_conv([0, 1]), _two_channel_conv([1, 0])
    X = _tie_free_points(a, 6, 3)
    assert _oracle_outputs(a, X) == _oracle_outputs(b, X)
    e = equiv(a, b, X)
    assert e.same_orbit is True and e.sample["same_outputs"] and not e.hidden_symmetry_on_sample
    assert e.alignment.max_abs == 0


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10**6))
def test_random_permutation_and_rescaling_of_a_dense_layer_graph_keeps_the_form_hypothesis(seed):
    """Generic leaky MLPs 3-4-2 (nonzero weights, distinct units): a random permutation of the hidden units and a
    random positive rescaling give the same form (the usual case the docs describe) and the same outputs."""
    from exactident.symmetry.canonical import canonical_form

    rng = random.Random(seed)

    def q():
        return f"{rng.choice([-1, 1]) * rng.randint(1, 9)}/{rng.randint(1, 4)}"

    W1 = [[q() for _ in range(3)] for _ in range(4)]
    b1, W2 = [q() for _ in range(4)], [[q() for _ in range(4)] for _ in range(2)]
    order = list(range(4))
    rng.shuffle(order)
    a, b = _leaky_mlp(W1, b1, W2), _leaky_mlp(W1, b1, W2, order)
    b = _rescaled(b, seed)
    X = _tie_free_points(a, 5, seed)
    assert _oracle_outputs(a, X) == _oracle_outputs(b, X)
    assert canonical_form(a).key == canonical_form(b).key


def test_canonical_and_equiv_cli_on_layer_graphs(tmp_path, capsys):
    path = str(ARCH / "residual-mlp.json")
    assert main(["canonical", path, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["format"] == "exactident-canonical/1" and d["layer_graph"]["complete"] is True
    assert len(d["layer_graph"]["parameters"]) == load_case(path).compiled.n_params
    # the three fc1 units are interchangeable (the skip's carriers are not): a permutation of layer 1
    assert [g["units"] for g in d["layer_graph"]["interchangeable"]] == [["fc1[0]", "fc1[1]", "fc1[2]"]]
    assert sorted(d["permutation"][0]) == list(range(len(d["permutation"][0])))
    assert main(["canonical", str(ARCH / "conv1d-avgpool.json"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    # the two channels (6 positions and 3 pooling units each) are interchangeable blocks
    assert [g["units"] for g in d["layer_graph"]["interchangeable"]] == [["conv1[c=0,x=0]", "conv1[c=1,x=0]"]]
    assert d["layer_graph"]["interchangeable"][0]["block_units"] == 9
    # different orbits: exit 1, as cmp/diff (docs/cli.md, "Exit status")
    assert main(["equiv", path, str(ARCH / "leaky-mlp.json"), "--json"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["format"] == "exactident-equiv/1" and d["same_orbit"] is False
    assert main(["equiv", path, path, "--sample", path]) == 0
    assert "same orbit" in capsys.readouterr().out


def test_equiv_cli_bad_sample_one_line(tmp_path, capsys):
    bad = tmp_path / "x.csv"
    bad.write_text("1,2,3\n")
    path = str(ARCH / "leaky-mlp.json")
    err = bad_input_error(capsys, ["equiv", path, path, "--sample", str(bad)])
    assert "x.csv" in err


# ---------------------------------------------------------------- audit


def test_audit_cli_on_a_layer_graph_victim(capsys):
    path = str(ARCH / "conv1d-avgpool.json")
    assert main(["audit", path, "--queries", path, "--extracted", path, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    report = load_case(path)
    from exactident.check import check

    r = check(report, numeric=False)
    assert (d["verdict"], d["reason"], d["dim"]) == (r.verdict, r.reason, r.dim)  # check's verdict, verdict-first
    assert d["obstructions"] == [] and d["omitted"][0]["what"] == "obstructions"
    assert d["counts"]["hidden"] == len(d["neurons"]) == sum(report.compiled.widths[1:-1])
    assert d["extracted"]["same_orbit"] is True and d["extracted"]["sample"]["same_outputs"]
    assert d["layer_graph"]["dim_free"] == d["dim"]


def test_audit_bad_queries_one_line(tmp_path, capsys):
    bad = tmp_path / "q.csv"
    bad.write_text("1,2\n")
    err = bad_input_error(capsys, ["audit", str(ARCH / "conv1d-avgpool.json"), "--queries", str(bad)])
    assert "q.csv" in err


def test_audit_of_an_imported_pytorch_residual_model(tmp_path, capsys):
    """End to end: a residual PyTorch module (ReLU, then a LeakyReLU branch added to it) imported as a layer graph,
    audited with a copy rescaled by powers of 2 (exact in float32) as the extracted model: the same orbit, equal
    outputs on the queries; the verdict is check's on the same case."""
    torch = pytest.importorskip("torch")
    import numpy as np
    from torch import nn

    from exactident import from_torch
    from exactident.check import check
    from exactident.io.case import dump_case

    class Res(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1, self.fc2, self.out = nn.Linear(3, 4), nn.Linear(4, 4), nn.Linear(4, 2)
            self.act = nn.LeakyReLU(0.125)

        def forward(self, x):
            h = torch.relu(self.fc1(x))
            h = h + self.act(self.fc2(h))
            return self.out(h)

    torch.manual_seed(0)
    victim = Res().eval()
    X = np.random.default_rng(0).standard_normal((12, 3)).astype(np.float32)
    case = from_torch(victim, X)
    assert not case.is_plain and "skip connection" in case.compiled.features
    stolen = Res().eval()
    lam = torch.tensor([2.0, 0.5, 4.0, 1.0])  # fc1 unit i and fc2 unit i share one scale (the skip adds them)
    with torch.no_grad():
        stolen.load_state_dict(victim.state_dict())
        stolen.fc1.weight.mul_(lam[:, None]), stolen.fc1.bias.mul_(lam)
        stolen.fc2.weight.mul_(lam[:, None] / lam[None, :]), stolen.fc2.bias.mul_(lam)
        stolen.out.weight.div_(lam[None, :])
    (tmp_path / "victim.json").write_text(dump_case(case))
    (tmp_path / "stolen.json").write_text(dump_case(from_torch(stolen, X)))
    assert main(["audit", str(tmp_path / "victim.json"), "--queries", str(tmp_path / "victim.json"),
                 "--extracted", str(tmp_path / "stolen.json"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    r = check(case, numeric=False)
    assert (d["verdict"], d["decided_by"], d["dim"]) == (r.verdict, r.decided_by, r.dim)
    assert d["extracted"]["same_orbit"] is True and d["extracted"]["sample"]["same_outputs"]
    assert d["extracted"]["alignment"]["max_abs"] == "0"
    assert main(["audit", str(tmp_path / "victim.json"), "--queries", str(tmp_path / "victim.json")]) == 0
    out = capsys.readouterr().out
    assert "obstructions on the box: omitted" in out and "layer graph" in out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6), st.integers(0, 10**6))
def test_canonical_form_is_invariant_under_random_rescalings_hypothesis(net_seed, scale_seed):
    """Random constrained nets (ties, fixed entries, leaky/PReLU/linear units; some with generators that are not one
    scale per class of units, e.g. unit exponents (2, 1, -2)) moved by a random element of H (every generator scaled
    by a random positive rational): the same function (Fraction forward pass), the same form when the form is
    complete, and in every case the form computes the function of the network."""
    from exactident.symmetry.canonical import canonical_form

    cn = random_constrained(net_seed)
    fa = canonical_form(cn)
    other = _rescaled(cn, scale_seed)
    X = [[F(v) for v in row] for row in [[1] * cn.widths[0], [-2] * cn.widths[0], list(range(cn.widths[0]))]]
    assert _oracle_outputs(other, X) == _oracle_outputs(cn, X)
    assert _oracle_outputs(fa.network, X) == _oracle_outputs(cn, X)
    fb = canonical_form(other)
    if fa.complete:
        assert fb.complete and fa.key == fb.key


def test_audit_of_a_plain_victim_with_a_layer_graph_extraction(tmp_path, capsys):
    """A plain ReLU victim (format 1) and the same network written as a layer graph with a leaky slope: the plain
    audit runs, and the extracted model is compared by equiv (different functions: the leaky unit leaks)."""
    plain = {"format": "exactident-case/1", "name": "v", "widths": [1, 1, 1], "weights": [[["2"]], [["3"]]],
             "biases": [["-1"], ["0"]], "sample": [["0"], ["1"], ["2"]]}
    graph = {"format": "exactident-case/2", "name": "g", "input_shape": [1], "layers": [
        {"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [["2"]], "bias": ["-1"]},
        {"name": "a", "op": "leaky_relu", "inputs": ["fc1"], "negative_slope": "1/10"},
        {"name": "fc2", "op": "linear", "inputs": ["a"], "weight": [["3"]], "bias": ["0"]}],
        "output": "fc2", "sample": [["0"]]}
    (tmp_path / "v.json").write_text(json.dumps(plain))
    (tmp_path / "g.json").write_text(json.dumps(graph))
    assert main(["audit", str(tmp_path / "v.json"), "--queries", str(tmp_path / "v.json"), "--extracted",
                 str(tmp_path / "g.json"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    # at x = 0: relu(-1) = 0 but leaky(-1) = -1/10, so the outputs differ by 3/10 at the first query
    assert d["extracted"]["same_orbit"] is False and d["extracted"]["sample"]["first_difference"]["sample"] == 0


def test_equiv_of_two_onnx_cnns_with_an_image_sample(tmp_path, capsys):
    """`equiv a.onnx b.onnx --sample X.npy` with X an image batch (n, C, H, W), the file `import` reads: it was
    refused as not a matrix (n, N_0). B is A with its two convolution channels swapped (kernels, biases and the
    dense layer's blocks of columns after the flatten): a relabelling of hidden units, the same function."""
    onnx = pytest.importorskip("onnx")
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    K = (rng.integers(-8, 9, (2, 1, 2, 2)) / 8).astype(np.float32)  # dyadic: exact in float32
    c = np.array([0.25, -0.5], np.float32)
    W = (rng.integers(-8, 9, (3, 2 * 2 * 2)) / 8).astype(np.float32)  # after pooling: 2 channels of 2x2
    d = np.zeros(3, np.float32)

    def save(path, K, c, W):
        inits = [numpy_helper.from_array(a, n) for a, n in ((K, "K"), (c, "c"), (W, "W"), (d, "d"))]
        nodes = [helper.make_node("Conv", ["x", "K", "c"], ["z"], name="conv"),
                 helper.make_node("Relu", ["z"], ["h"], name="relu"),
                 helper.make_node("MaxPool", ["h"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
                 helper.make_node("Flatten", ["p"], ["f"], name="flat"),
                 helper.make_node("Gemm", ["f", "W", "d"], ["out"], name="fc", transB=1)]
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1, 5, 5])],
                                  [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", 3])], inits)
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)

    save(tmp_path / "a.onnx", K, c, W)
    swap = [1, 0]
    save(tmp_path / "b.onnx", K[swap], c[swap], W.reshape(3, 2, 4)[:, swap].reshape(3, 8))
    np.save(tmp_path / "x.npy", rng.standard_normal((6, 1, 5, 5)).astype(np.float32))
    argv = ["equiv", str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), "--sample", str(tmp_path / "x.npy"), "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["same_orbit"] is True and out["sample"]["same_outputs"] is True
