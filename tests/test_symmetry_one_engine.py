"""One ``canonical``, ``equiv``, ``audit`` for any network (docs/symmetries.md, "Layer graphs").

Truth comes from outside the code under test:

- a plain MLP written by hand as a constrained network (``T = I``, ``c = 0``, slopes 0, its parameters
  numbered in an order of our own) gets the MLP's canonical form, derived by hand below, the MLP's
  equiv verdict and the MLP's audit numbers (hand derivations);
- a convolutional net whose channels are permuted and rescaled by hand (the permuted weights built
  here) computes the same function (a Fraction forward pass of the convolution written here) and
  must be ``equiv`` to the original with the same canonical form;
- a net that differs by one weight is not equivalent, with the first difference located by hand.
"""

from __future__ import annotations

import copy
import json
from fractions import Fraction as Fr
from pathlib import Path

import flint
import numpy as np

from exactident.cli import main
from exactident.io.case import parse_case
from exactident.model.network import Network
from exactident.symmetry.audit import audit
from exactident.symmetry.canonical import canonical_form
from exactident.symmetry.equiv import equiv

F = flint.fmpq
ARCH = Path(__file__).resolve().parent.parent / "cases" / "architectures"


def _hand_constrained_mlp(W1, b1, W2, b2):
    """A 1-2-1 ReLU MLP as a constrained network written here: every weight and bias free, numbered biases first
    (b1[0], b1[1], b2[0], then W1 row by row, then W2), no fixed entry, slopes 0 (T = I up to the numbering)."""
    W_index = [np.array([[3], [4]]), np.array([[5, 6]])]
    b_index = [np.array([0, 1]), np.array([2])]
    return Network((1, 2, 1), [flint.fmpq_mat(W1), flint.fmpq_mat(W2)], [list(map(F, b1)), list(map(F, b2))],
                              W_index, b_index, [[F(0), F(0)]], [np.array([-1, -1])], 7)


def test_an_mlp_written_as_a_constrained_network_gets_the_mlp_form_by_hand():
    """W1 = [[-2], [3]], b1 = [4, 0], W2 = [[5, 7]], b2 = [1].  Neuron 0: incoming vector (-2, 4), first nonzero -2,
    scale 1/2 -> (-1, 2); neuron 1: (3, 0), scale 1/3 -> (1, 0).  Sorted: (-1, 2) < (1, 0), order [0, 1].  Outgoing
    weights divided by the scales: W2 = [10, 21]; b2 unchanged."""
    cn = _hand_constrained_mlp([[-2], [3]], [4, 0], [[5, 7]], [1])
    f = canonical_form(cn)
    assert f.network.W[0].entries() == [F(-1), F(1)] and f.network.b[0] == [F(2), F(0)]
    assert f.network.W[1].entries() == [F(10), F(21)] and f.network.b[1] == [F(1)]
    assert f.perm == [[0, 1]] and f.scale == [[F(1, 2), F(1, 3)]]
    plain = canonical_form(Network((1, 2, 1), [[[-2], [3]], [[5, 7]]], [[4, 0], [1]]))
    assert f.digest() == plain.digest()


def test_an_mlp_written_as_a_constrained_network_gets_the_mlp_equiv_verdict():
    """B = A with its two neurons swapped and rescaled by hand: B's neuron 0 is A's neuron 1 times 2 (w 6, b 0,
    outgoing 7/2), B's neuron 1 is A's neuron 0 times 3 (w -6, b 12, outgoing 5/3): the same orbit, alignment
    error 0.  B with b2 = 2 instead of 1 differs at b_2[0] (the output bias, never rescaled); at x = 0 the outputs
    are 5 relu(4) + 7 relu(0) + 1 = 21 and 22."""
    a = _hand_constrained_mlp([[-2], [3]], [4, 0], [[5, 7]], [1])
    b = _hand_constrained_mlp([[6], [-6]], [0, 12], [[F(7, 2), F(5, 3)]], [1])
    e = equiv(a, b, [[F(0)], [F(1)]])
    assert e.same_orbit is True and e.alignment.max_abs == 0 and e.sample["same_outputs"]
    assert e.to_dict()["digest_a"] == e.to_dict()["digest_b"]  # the MLP's object, with its digests
    c = _hand_constrained_mlp([[6], [-6]], [0, 12], [[F(7, 2), F(5, 3)]], [2])
    e = equiv(a, c, [[F(0)]])
    assert e.same_orbit is False and e.first_difference["entry"] == "b_2[0]"
    assert (e.first_difference["a"], e.first_difference["b"]) == ("1", "2")
    assert e.sample["first_difference"] == {"sample": 0, "output": 0, "a": "21", "b": "22"}  # 5 relu(4) + 1 = 21


def test_an_mlp_written_as_a_constrained_network_gets_the_mlp_audit_numbers():
    """``3 relu(2x + 1)`` queried at x = 0, 1: the neuron is active at both (z = 1, 3), so f = 6x + 3 on the queries;
    4 parameters, one rescaling: dim = 3; Gamma has 2 rows (x = 0: (0, 3, 1, 1), x = 1: (3, 3, 3, 1) for
    (w, b, v, c)), independent: rank 2 < 3, not identifiable; the neuron is always active, its hyperplane
    [x, 1] over 2 queries has rank 2 = N_0 + 1 (pinned), yet it is under-determined (the kernel of Gamma moves it)."""
    W_index, b_index = [np.array([[0]]), np.array([[2]])], [np.array([1]), np.array([3])]
    cn = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])], [[F(1)], [F(0)]],
                            W_index, b_index, [[F(0)]], [np.array([-1])], 4)
    X = [[F(0)], [F(1)]]
    got = audit(cn, X, extracted=cn)
    assert (got.report.verdict, got.report.rank_gamma, got.dim) == ("not-identifiable", 2, 3)
    n = got.neurons[0]
    assert (n["n_active"], n["always_active"], n["pinned"], n["under_determined"]) == (2, True, True, True)
    assert got.extracted.same_orbit is True
    plain = audit(Network((1, 1, 1), [[[2]], [[3]]], [[1], [0]]), X, extracted=cn)
    strip = {"seconds"}
    assert ({k: v for k, v in got.to_dict().items() if k not in strip}
            == {k: v for k, v in plain.to_dict().items() if k not in strip})


# ---------------------------------------------------------------- convolution channels as blocks

KERNELS = [[1, 2], [-1, 1], [2, 1]]  # conv1d, 1 input channel, 3 output channels, kernel 2 on 4 pixels
BIASES = [Fr(1, 2), Fr(-1, 4), Fr(1)]
FC = [[3, -1, 2, 1, 4, -2, Fr(1, 2), 5, -3], [1, 1, -1, 2, 0, 3, -1, Fr(1, 3), 2]]  # 2 outputs x (3 channels x 3)
FC_BIAS = [Fr(1, 8), -1]


def _conv_case(kernels, biases, fc, fc_bias):
    return parse_case(_case_json((kernels, biases, fc, fc_bias)))


def _permuted(order, scales, kernels=KERNELS, biases=BIASES, fc=FC, fc_bias=FC_BIAS):
    """Channel k of the result is channel order[k] of the input, its kernel and bias times scales[order[k]] and its
    three columns of fc (channel-major flattening) divided by it."""
    K = [[Fr(w) * scales[c] for w in kernels[c]] for c in order]
    B = [Fr(biases[c]) * scales[c] for c in order]
    V = [[Fr(row[3 * c + p]) / scales[c] for c in order for p in range(3)] for row in fc]
    return K, B, V, list(fc_bias)


def _oracle(kernels, biases, fc, fc_bias, x):
    """The convolution net on one input, with Fractions: h[c, p] = relu(k_c . x[p:p+2] + b_c), f = fc h + c."""
    h = [max(Fr(0), sum(Fr(w) * Fr(x[p + t]) for t, w in enumerate(kernels[c])) + Fr(biases[c]))
         for c in range(len(kernels)) for p in range(3)]
    return [sum(Fr(v) * y for v, y in zip(row, h)) + Fr(c) for row, c in zip(fc, fc_bias)]


SAMPLE = [[0, 1, 2, 3], [1, -1, Fr(1, 2), 2], [-2, 1, 3, -1], [Fr(3, 2), 0, -1, 1]]


def test_permuted_and_rescaled_conv_channels_are_equivalent_with_the_same_form():
    parts = _permuted([2, 0, 1], [Fr(2), Fr(1, 3), Fr(5)])
    for x in SAMPLE:  # the group keeps the function (the oracle, not the code under test)
        assert _oracle(*parts, x) == _oracle(KERNELS, BIASES, FC, FC_BIAS, x)
    a, b = _conv_case(KERNELS, BIASES, FC, FC_BIAS).compiled, _conv_case(*parts).compiled
    fa, fb = canonical_form(a), canonical_form(b)
    assert fa.key == fb.key and fa.digest() == fb.digest() and fa.complete
    # normalised kernels (first entry +-1): (1, 2), (-1, 1), (1, 1/2); sorted (-1, 1) < (1, 1/2) < (1, 2): the form's
    # channels are A's channels 1, 2, 0, i.e. B's channels 2, 0, 1 (B's channel k is A's order[k] = [2, 0, 1][k])
    assert [fa.perm[0][3 * k] // 3 for k in range(3)] == [1, 2, 0]
    assert [fb.perm[0][3 * k] // 3 for k in range(3)] == [2, 0, 1]
    X = [[F(Fr(v).numerator, Fr(v).denominator) for v in x] for x in SAMPLE]
    e = equiv(a, b, X)
    assert e.same_orbit is True and e.sample["same_outputs"] and e.alignment.max_abs == 0


def test_one_changed_weight_is_not_equivalent_and_the_difference_is_located(tmp_path, capsys):
    """A with fc.weight[0, 0] (channel 0, position 0) raised by 1, then permuted and rescaled as above.  Channel 0
    is the form's channel 2 (previous test) and its scale is 1 (kernel (1, 2) already starts with 1), so the forms
    first differ at fc.weight[0, 6] (canonical channel 2, position 0): 3 against 4.  At x = (0, 1, 2, 3) channel 0
    has z = 1 * 0 + 2 * 1 + 1/2 = 5/2 > 0 at position 0, so output 0 differs by relu(z) = 5/2, output 1 not."""
    fc = copy.deepcopy(FC)
    fc[0][0] = Fr(fc[0][0]) + 1
    parts = _permuted([2, 0, 1], [Fr(2), Fr(1, 3), Fr(5)], fc=fc)
    a, b = _conv_case(KERNELS, BIASES, FC, FC_BIAS).compiled, _conv_case(*parts).compiled
    X = [[F(v) for v in SAMPLE[0]]]
    e = equiv(a, b, X)
    assert e.same_orbit is False
    assert (e.first_difference["entry"], e.first_difference["a"], e.first_difference["b"]) == ("fc.weight[0,6]", "3",
                                                                                               "4")
    want_a, want_b = _oracle(KERNELS, BIASES, FC, FC_BIAS, SAMPLE[0]), _oracle(*parts, SAMPLE[0])
    assert want_b[0] - want_a[0] == Fr(5, 2) and want_b[1] == want_a[1]
    s = e.sample["first_difference"]
    assert (s["output"], Fr(s["a"]), Fr(s["b"])) == (0, want_a[0], want_b[0])
    # the CLI: exit 1 (different orbits), 0 for the equivalent pair
    for name, case_parts in (("a", (KERNELS, BIASES, FC, FC_BIAS)), ("b", parts),
                             ("c", _permuted([1, 2, 0], [Fr(1, 2), Fr(3), Fr(7, 4)]))):
        (tmp_path / f"{name}.json").write_text(json.dumps(_case_json(case_parts)))
    assert main(["equiv", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 1
    assert "fc.weight[0,6]" in capsys.readouterr().out
    assert main(["equiv", str(tmp_path / "a.json"), str(tmp_path / "c.json"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["same_orbit"] is True


def _case_json(parts):
    kernels, biases, fc, fc_bias = parts
    s = str
    return {"format": "exactident-case/2", "name": "conv", "input_shape": [1, 4], "output": "fc",
            "sample": [["0", "1", "2", "3"]],
            "layers": [{"name": "conv", "op": "conv1d", "inputs": ["input"], "out_channels": 3, "kernel_size": [2],
                        "stride": [1], "padding": [0], "weight": [[[s(w) for w in k]] for k in kernels],
                        "bias": [s(x) for x in biases]},
                       {"name": "r", "op": "relu", "inputs": ["conv"]},
                       {"name": "flat", "op": "flatten", "inputs": ["r"]},
                       {"name": "fc", "op": "linear", "inputs": ["flat"],
                        "weight": [[s(v) for v in row] for row in fc], "bias": [s(c) for c in fc_bias]}]}


def test_conv2d_channels_with_prelu_and_pooling_permuted_by_hand_are_the_same_orbit():
    """conv2d-avgpool (2 channels, a PReLU slope per channel, 2x2 average pooling, fc without bias): swap the two
    channels (kernels, biases, slopes, and the 9 fc columns each pooled channel feeds) and rescale them by 4 and
    1/2 (slopes unchanged: PReLU is positively homogeneous): equal forms, the same orbit."""
    d = json.loads((ARCH / "conv2d-avgpool.json").read_text())
    conv, act, fc = d["layers"][0], d["layers"][1], d["layers"][-1]
    scales = [Fr(4), Fr(1, 2)]
    order = [1, 0]

    def scaled(v, c):
        return str(Fr(v) * scales[c])

    def scale_nested(w, c):
        return [scale_nested(x, c) for x in w] if isinstance(w, list) else scaled(w, c)

    other = copy.deepcopy(d)
    other["layers"][0]["weight"] = [scale_nested(conv["weight"][c], c) for c in order]
    other["layers"][0]["bias"] = [scaled(conv["bias"][c], c) for c in order]
    other["layers"][1]["weight"] = [act["weight"][c] for c in order]
    size = len(fc["weight"][0]) // 2
    other["layers"][-1]["weight"] = [[str(Fr(row[c * size + p]) / scales[c]) for c in order for p in range(size)]
                                     for row in fc["weight"]]
    a, b = parse_case(d).compiled, parse_case(other).compiled
    assert canonical_form(a).key == canonical_form(b).key
    e = equiv(a, b, parse_case(d).X)
    assert e.same_orbit is True and e.sample["same_outputs"]


def _forward(cn, x):
    """A Fraction forward pass over the compiled dense entries, each unit with its negative slope."""
    def fr(v):
        return Fr(int(v.p), int(v.q))

    h = [Fr(v) for v in x]
    for l in range(1, cn.L + 1):
        z = [fr(cn.b[l - 1][i]) + sum(fr(cn.W[l - 1][i, k]) * h[k] for k in range(cn.widths[l - 1]))
             for i in range(cn.widths[l])]
        h = z if l == cn.L else [v if v >= 0 else fr(cn.negative_slope[l - 1][u]) * v for u, v in enumerate(z)]
    return h


def test_every_permutation_of_interchangeable_blocks_keeps_the_function_on_random_constrained_nets():
    """Random constrained nets (ties, fixed entries, leaky, PReLU and linear units): every class of blocks the group
    calls interchangeable, rotated by one, gives a network of the family computing the same outputs (Fraction
    forward pass written here) at three points; and the canonical form computes them too."""
    from constrained_oracle import random_constrained

    from exactident.symmetry.group import interchangeable_blocks, permute_theta, scale_classes

    moved = 0
    variants = [{}, {"p_fixed": 0.0, "p_tie": 0.0}, {"p_fixed": 0.0, "p_tie": 0.3, "leaky": False, "prelu": False}]
    for seed, kw in ((seed, kw) for seed in range(30) for kw in variants):
        cn = random_constrained(seed, **kw)
        X = [[1] * cn.widths[0], [-2] * cn.widths[0], list(range(cn.widths[0]))]
        want = [_forward(cn, x) for x in X]
        units, generators, _ = scale_classes(cn)
        for _l, blocks in interchangeable_blocks(cn, units, generators):
            order = list(range(1, len(blocks))) + [0]
            theta, _pi = permute_theta(cn, cn.theta(), blocks, order)
            assert [_forward(cn.with_theta(theta), x) for x in X] == want
            moved += 1
        assert [_forward(canonical_form(cn).network, x) for x in X] == want
    assert moved > 0  # the draws do contain interchangeable blocks


def _leaky_2_layers(W2, b2, W3):
    """2 inputs, two leaky layers of 2 units (slope 1/8), 1 output; layer 1 has twins (equal rows and biases)."""
    s = str
    layers = [{"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [["1", "2"], ["1", "2"]],
               "bias": ["1", "1"]},
              {"name": "a1", "op": "leaky_relu", "inputs": ["fc1"], "negative_slope": "1/8"},
              {"name": "fc2", "op": "linear", "inputs": ["a1"], "weight": [[s(v) for v in r] for r in W2],
               "bias": [s(v) for v in b2]},
              {"name": "a2", "op": "leaky_relu", "inputs": ["fc2"], "negative_slope": "1/8"},
              {"name": "fc3", "op": "linear", "inputs": ["a2"], "weight": [[s(v) for v in r] for r in W3],
               "bias": ["0"]}]
    return parse_case({"format": "exactident-case/2", "name": "twins", "input_shape": [2], "layers": layers,
                       "output": "fc3", "sample": [["0", "0"]]}).compiled


def test_twin_units_are_ordered_by_every_order_not_by_the_next_layer_order():
    """Layer 1 has twins (equal incoming weights and bias) whose outgoing columns (3, 1) and (1, 3) are swapped when
    layer 2's units are swapped (B below, built by hand: rows of fc2 and its biases swapped, columns of fc3 swapped):
    the same function (Fraction forward pass) and, ties being tried in every order, the same form."""
    a = _leaky_2_layers([[3, 1], [1, 3]], [1, -2], [[5, 7]])
    b = _leaky_2_layers([[1, 3], [3, 1]], [-2, 1], [[7, 5]])
    for x in ([0, 0], [1, -3], [-2, 1], [Fr(1, 2), 4]):
        assert _forward(a, x) == _forward(b, x)
    assert canonical_form(a).key == canonical_form(b).key
    assert equiv(a, b).same_orbit is True


def test_audit_of_a_conv_victim_finds_its_permuted_rescaled_extraction_in_the_orbit():
    """The conv victim audited with the channel-permuted, rescaled copy as the extracted model: the same orbit and,
    on the queries, the same outputs (the Fraction oracle agrees); the verdict is the constrained engine's."""
    from exactident.check import check

    case = _conv_case(KERNELS, BIASES, FC, FC_BIAS)
    parts = _permuted([1, 2, 0], [Fr(3), Fr(1, 4), Fr(2)])
    X = [[F(Fr(v).numerator, Fr(v).denominator) for v in x] for x in SAMPLE]
    got = audit(case.compiled, X, extracted=_conv_case(*parts).compiled)
    assert got.extracted.same_orbit is True and got.extracted.sample["same_outputs"]
    assert all(_oracle(*parts, x) == _oracle(KERNELS, BIASES, FC, FC_BIAS, x) for x in SAMPLE)
    case.X = X
    assert got.report.verdict == check(case, numeric=False).verdict
    assert got.to_dict()["omitted"][0]["what"] == "obstructions"
