"""Case files ``exactident-case/2``: layer graphs read, validated, written byte-stably."""

from __future__ import annotations

import copy
import json
from fractions import Fraction
from pathlib import Path

import flint
import numpy as np
import pytest
from test_architecture import _architectures, _f, reference_forward

from exactident.errors import CaseFormatError, UnsupportedCaseError
from exactident.io.case import Case, dump_case, load_case, parse_case
from exactident.model.network import pre_activations

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted((ROOT / "cases" / "architectures").glob("*.json"))


def test_the_shipped_architectures_are_there():
    assert {p.stem for p in SHIPPED} >= {"residual-mlp", "conv1d-avgpool", "leaky-mlp", "prelu-mlp"}


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_round_trip_is_byte_stable_and_forward_matches_reference(path):
    case = load_case(path)
    assert dump_case(case) == path.read_text(encoding="utf-8")
    assert case.architecture is not None and not case.is_plain
    got = pre_activations(case.compiled, case.X)[-1]
    got_f = _f(np.array(got.entries(), dtype=object)).reshape(len(case.X), -1)
    want = np.array([reference_forward(case.architecture, _f(np.array(x, dtype=object))) for x in case.X])
    np.testing.assert_allclose(got_f, want, rtol=1e-12, atol=1e-12)


def test_leaky_case_by_hand():
    """At x = 0: fc1 = (-1/2, 1/4, 1/8), leaky gives (-a/2, 1/4, 1/8), fc2 = -a/2 - 1/4 + 1/16."""
    case = load_case(ROOT / "cases" / "architectures" / "leaky-mlp.json")
    a = flint.fmpq(5368709, 536870912)
    assert Fraction(5368709, 536870912) == Fraction(float(np.float32(0.01)))
    out = pre_activations(case.compiled, [case.X[0]])[-1]
    assert case.X[0] == [0, 0] and out[0, 0] == -a / 2 - flint.fmpq(3, 16)


def test_a_non_plain_case_refuses_plain_only_steps_in_one_line():
    case = load_case(ROOT / "cases" / "architectures" / "conv1d-avgpool.json")
    with pytest.raises(UnsupportedCaseError) as err:
        case.network  # noqa: B018
    assert "convolution, average pooling" in str(err.value) and "\n" not in str(err.value)
    assert case.widths == (6, 12, 6, 1)
    assert "conv1d-avgpool" in repr(case)


PLAIN_V1 = {"format": "exactident-case/1", "name": "p", "widths": [2, 2, 1],
            "weights": [[["1", "-1"], ["1/2", "2"]], [["3", "-1"]]], "biases": [["1", "-1/2"], ["0"]],
            "sample": [["0", "1"], ["1", "0"], ["-1", "2"], ["2", "2"], ["1/2", "-1"], ["3", "1"]]}
PLAIN_V2 = {"format": "exactident-case/2", "name": "p", "input_shape": [2], "layers": [
    {"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [["1", "-1"], ["1/2", "2"]], "bias": ["1", "-1/2"]},
    {"name": "r", "op": "relu", "inputs": ["fc1"]},
    {"name": "drop", "op": "identity", "inputs": ["r"]},
    {"name": "fc2", "op": "linear", "inputs": ["drop"], "weight": [["3", "-1"]], "bias": ["0"]}],
    "output": "fc2", "sample": PLAIN_V1["sample"]}


def test_a_plain_graph_is_the_plain_network_and_gets_the_plain_report():
    from exactident.check import check

    v1, v2 = parse_case(PLAIN_V1), parse_case(copy.deepcopy(PLAIN_V2))
    assert v2.is_plain and v2.network == v1.network and v2.compiled.is_plain()
    r1, r2 = check(v1, numeric=False).to_dict(), check(v2, numeric=False).to_dict()
    assert r1 == r2
    back = v2.as_format1()
    assert back.architecture is None and back.network == v1.network
    assert back.provenance == {"parameter_names": {"W_1": "fc1.weight[i,j]", "b_1": "fc1.bias[i]",
                                                   "W_2": "fc2.weight[i,j]", "b_2": "fc2.bias[i]"}}
    assert json.loads(dump_case(back))["format"] == "exactident-case/1"
    with pytest.raises(UnsupportedCaseError):
        load_case(SHIPPED[0]).as_format1()


def test_from_architecture_round_trip():
    rng = np.random.default_rng(3)
    for label, arch in _architectures(rng):
        X = [[Fraction(int(v), 3) for v in rng.integers(-5, 6, size=arch.n_inputs)] for _ in range(2)]
        case = Case.from_architecture(arch, X, name=label)
        text = dump_case(case)
        back = parse_case(json.loads(text), label)
        assert back.architecture == arch and back.X == case.X and dump_case(back) == text
    with pytest.raises(CaseFormatError, match=r"sample\[0\]: expected shape \(2,\), found \(3,\)"):
        Case.from_architecture(arch, [[1, 2, 3]])


def _mutate(path, value, delete=False):
    obj = copy.deepcopy(json.loads((ROOT / "cases" / "architectures" / "conv1d-avgpool.json").read_text()))
    node = obj
    for key in path[:-1]:
        node = node[key]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return obj


BAD = [
    (_mutate(["layers", 0, "op"], "batchnorm1d"), "layers[0].op", "'batchnorm1d': batch normalisation is refused"),
    (_mutate(["layers", 0, "op"], "conv3d"), "layers[0].op", "unknown op 'conv3d' (known: linear, conv1d"),
    (_mutate(["layers", 0, "op"], 3), "layers[0].op", "expected an op name, found number 3"),
    (_mutate(["layers", 0, "dilation"], [2]), "layers[0].dilation", "unknown field for conv1d"),
    (_mutate(["layers", 1, "weight"], ["1"]), "layers[1].weight", "unknown field for relu"),
    (_mutate(["layers", 0, "weight", 1, 0], ["1", "2"]), "layers[0].weight[1][0]", "expected 3 entries, found 2"),
    (_mutate(["layers", 0, "weight", 0, 0, 1], "x"), "layers[0].weight[0][0][1]", "expected a number"),
    (_mutate(["layers", 0, "weight", 0, 0, 1], True), "layers[0].weight[0][0][1]", "found true"),
    (_mutate(["layers", 0, "bias"], ["1"]), "layers[0].bias", "expected 2 entries"),
    (_mutate(["layers", 0, "bias"], None, delete=True), "layers[0].bias", "missing required field"),
    (_mutate(["layers", 0, "out_channels"], 3), "layers[0].out_channels", "differs from the weight's 2"),
    (_mutate(["layers", 0, "stride"], [1, 1]), "layers[0].stride", "expected 1 entries, found 2"),
    (_mutate(["layers", 0, "padding"], [-1]), "layers[0].padding[0]", "non-negative integer"),
    (_mutate(["layers", 2, "kernel_size"], None, delete=True), "layers[2].kernel_size", "missing required field"),
    (_mutate(["layers", 3, "inputs"], ["pool2"]), "layers[3].inputs[0]", "not 'input' or an earlier layer"),
    (_mutate(["layers", 4, "weight", 0], ["1"]), "layers[4].weight", "expected rows of 6 entries"),
    (_mutate(["output"], "relu9"), "output", "expected the name of a layer"),
    (_mutate(["input_shape"], [1, 2, 3, 4]), "input_shape", "expected 1 to 3 axes"),
    (_mutate(["input_shape"], [1, 5]), "layers[4].weight", "expected rows of 4 entries"),  # pool floors 5/2
    (_mutate(["sample", 0], ["1"]), "sample[0]", "expected 6 entries, found 1"),
    (_mutate(["layers"], None, delete=True), "layers", "missing required field"),
    (_mutate(["widths"], [6, 1]), "widths", "unknown field (allowed: format, name, description, input_shape"),
    (_mutate(["layers", 1], "relu"), "layers[1]", "expected an object, found string"),
]


@pytest.mark.parametrize("obj, field, words", BAD, ids=[f for _, f, _ in BAD])
def test_bad_format2_files_one_line_errors(obj, field, words):
    with pytest.raises(CaseFormatError) as err:
        parse_case(obj, "bad.json")
    assert (err.value.source, err.value.field) == ("bad.json", field)
    assert words in err.value.message and "\n" not in str(err.value)


def test_a_huge_graph_in_a_small_file_is_refused_before_compiling():
    obj = {"format": "exactident-case/2", "name": "huge", "input_shape": [1, 100000, 1000], "layers": [
        {"name": "pool", "op": "avgpool2d", "inputs": ["input"], "kernel_size": [2, 2]}], "output": "pool",
        "sample": []}
    with pytest.raises(UnsupportedCaseError, match=r"^big.json: layers\[0\] \(pool\) compiles to a dense "
                                                   r"25000000 x 100000000 block"):
        parse_case(obj, "big.json")


def test_design_takes_a_layer_graph_and_network_still_names_every_command(capsys):
    # design was the last command that refused layer graphs (tests/test_design_graph.py tests it in depth);
    # a library caller that reads case.network on a layer graph still gets one line naming the commands
    from exactident.cli import main
    from exactident.io.case import load_case

    path = str(ROOT / "cases" / "architectures" / "leaky-mlp.json")
    assert main(["design", path]) == 0
    out = capsys.readouterr().out
    assert "dim_free = 10" in out  # 13 parameters - 3 positive rescalings (one per hidden unit)
    with pytest.raises(UnsupportedCaseError, match="leaky ReLU") as err:
        _ = load_case(path).network
    assert "check, explain, design, crosscheck, verify-certificate, fdim, audit, canonical and equiv" in str(
        err.value)
