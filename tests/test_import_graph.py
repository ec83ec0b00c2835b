"""Layer graphs (exactident-case/2) from PyTorch, ONNX and Keras: residual MLPs, leaky ReLU, PReLU, small CNNs.

Each importer reads a model built here, saved (ONNX, Keras) or in memory (PyTorch); the imported dict's numbers
are the framework's floats exactly, and its float forward pass agrees with the framework's own within the
rounding bound (run by the importer: provenance.forward_check).  Refusals are one line, exit 2 from the CLI.
"""

from __future__ import annotations

import contextlib
import io
import json
import warnings
from fractions import Fraction

import numpy as np
import pytest
from _importers import bad_input_error

from exactident import CaseFormatError
from exactident.cli import main
from exactident.io.importers.graph_forward import graph_bound, graph_forward

RNG = np.random.default_rng(21)


def _fr(x):
    return Fraction(float(x))


def _ops(doc):
    return [layer["op"] for layer in doc["layers"]]


# -- the float evaluator against hand derivations -------------------------------------------------------------
def _doc(input_shape, layers, output):
    return {"format": "exactident-case/2", "name": "t", "input_shape": input_shape, "layers": layers,
            "output": output, "sample": []}


def test_evaluator_hand_derived_conv1d_pool_leaky_residual():
    # x = (1, 2, 3) on one channel; conv1d kernel (1, -1, 2), bias 1/2, zero padding 1, stride 1:
    # padded (0, 1, 2, 3, 0): y0 = 0 - 1 + 4 + 1/2 = 7/2, y1 = 1 - 2 + 6 + 1/2 = 11/2, y2 = 2 - 3 + 0 + 1/2 = -1/2
    # leaky 1/4: (7/2, 11/2, -1/8); avgpool k=2 s=1 pad 0: (9/2, 43/16); flatten; + skip of itself
    layers = [
        {"name": "c", "op": "conv1d", "inputs": ["input"], "out_channels": 1, "kernel_size": [3], "stride": [1],
         "padding": [1], "weight": [[["1", "-1", "2"]]], "bias": ["1/2"]},
        {"name": "a", "op": "leaky_relu", "inputs": ["c"], "negative_slope": "1/4"},
        {"name": "p", "op": "avgpool1d", "inputs": ["a"], "kernel_size": [2], "stride": [1], "padding": [0]},
        {"name": "f", "op": "flatten", "inputs": ["p"]},
        {"name": "s", "op": "add", "inputs": ["f", "f"]},
    ]
    out = graph_forward(_doc([1, 3], layers, "s"), np.array([[1.0, 2.0, 3.0]]))
    assert out.tolist() == [[9.0, 2 * 43 / 16]]


def test_evaluator_hand_derived_conv2d_stride_padding_prelu_per_channel():
    # a 2x2 image (1, 2; 3, 4), two 1x1 channels with weights 1 and -1, padding 1, stride 2: the 4x4 padded
    # image sampled at (0, 0), (0, 2), (2, 0), (2, 2) is (0, 0; 0, 4); channel 1 gives (0, 0; 0, -4);
    # PReLU slopes (1/2, 1/3): channel 1 -> (0, 0; 0, -4/3)
    layers = [
        {"name": "c", "op": "conv2d", "inputs": ["input"], "out_channels": 2, "kernel_size": [1, 1],
         "stride": [2, 2], "padding": [1, 1], "weight": [[[["1"]]], [[["-1"]]]], "bias": None},
        {"name": "a", "op": "prelu", "inputs": ["c"], "weight": ["1/2", "1/3"]},
        {"name": "f", "op": "flatten", "inputs": ["a"]},
    ]
    out = graph_forward(_doc([1, 2, 2], layers, "f"), np.array([[1.0, 2.0, 3.0, 4.0]]))
    assert np.allclose(out, [[0, 0, 0, 4, 0, 0, 0, -4 / 3]], rtol=0, atol=1e-15)


def test_bound_covers_float32_evaluation():
    """A float32 evaluation of a random graph stays within the bound of the float64 one."""
    W = RNG.standard_normal((6, 5)).astype(np.float32)
    layers = [{"name": "l", "op": "linear", "inputs": ["input"], "weight": [[str(_fr(v)) for v in r] for r in W],
               "bias": None},
              {"name": "a", "op": "leaky_relu", "inputs": ["l"], "negative_slope": "1/100"},
              {"name": "s", "op": "add", "inputs": ["a", "l"]}]
    X = RNG.standard_normal((20, 5)).astype(np.float32)
    h32 = X @ W.T
    h32 = np.where(h32 > 0, h32, np.float32(0.01) * h32) + h32
    h, bound = graph_bound(_doc([5], layers, "s"), X.astype(np.float64), ["float32"])
    assert np.all(np.abs(h32 - h) <= bound) and bound.max() < 1e-4


# -- PyTorch -------------------------------------------------------------------------------------------------
torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional


class _ResMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.out = nn.Linear(6, 5), nn.Linear(5, 5), nn.Linear(5, 3)
        self.act = nn.LeakyReLU()

    def forward(self, x):
        h = self.act(self.fc1(x))
        h = h + F.relu(self.fc2(h))
        return torch.softmax(self.out(h), dim=1)


def _cnn():
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.PReLU(4), nn.AvgPool2d(2), nn.Flatten(),
                         nn.Linear(4 * 2 * 2, 10, bias=False))


def test_torch_residual_leaky_mlp_exact_and_forward_checked():
    from exactident.io.importers.objects import torch_document

    torch.manual_seed(0)
    m = _ResMlp()
    X = RNG.standard_normal((12, 6)).astype(np.float32)
    doc = torch_document(m, X)
    assert doc["format"] == "exactident-case/2" and doc["input_shape"] == [6]
    assert _ops(doc) == ["linear", "leaky_relu", "linear", "relu", "add", "linear"]
    assert doc["layers"][4]["inputs"] == ["act", "relu"]
    # float32 0.01 is 0.00999999977648258209228515625 exactly
    assert Fraction(doc["layers"][1]["negative_slope"]) == Fraction("0.00999999977648258209228515625")
    fc1 = doc["layers"][0]
    assert [[Fraction(v) for v in row] for row in fc1["weight"]] == [[_fr(v) for v in row]
                                                                     for row in m.fc1.weight.detach().numpy()]
    assert [Fraction(v) for v in doc["sample"][3]] == [_fr(v) for v in X[3]]
    prov = doc["provenance"]
    assert prov["dropped_output_activation"] == "softmax" and "within the rounding bound" in prov["forward_check"]
    # an independent check: the module's logits against the evaluator of the dict
    with torch.no_grad():
        logits = m.out(m.fc2(m.act(m.fc1(torch.as_tensor(X)))).relu() + m.act(m.fc1(torch.as_tensor(X)))).numpy()
    h, bound = graph_bound(doc, X.astype(np.float64), ["float32"])
    assert np.all(np.abs(h - logits) <= bound)


def test_torch_cnn_conv_prelu_avgpool_bias_free_linear():
    from exactident.io.importers.objects import torch_document

    torch.manual_seed(1)
    m = _cnn()
    X = RNG.random((5, 3, 4, 4)).astype(np.float32)
    doc = torch_document(m, X)
    assert doc["input_shape"] == [3, 4, 4] and _ops(doc) == ["conv2d", "prelu", "avgpool2d", "flatten", "linear"]
    conv = doc["layers"][0]
    assert conv["out_channels"] == 4 and conv["padding"] == [1, 1] and conv["stride"] == [1, 1]
    assert Fraction(conv["weight"][2][1][0][2]) == _fr(m[0].weight[2, 1, 0, 2])
    assert doc["layers"][2]["kernel_size"] == [2, 2] and doc["layers"][-1]["bias"] is None
    assert [Fraction(v) for v in doc["layers"][1]["weight"]] == [_fr(v) for v in m[1].weight.detach().numpy()]
    # the sample in C-order of (C, H, W)
    assert [Fraction(v) for v in doc["sample"][2]] == [_fr(v) for v in X[2].ravel()]
    with torch.no_grad():
        ref = m(torch.as_tensor(X)).numpy()
    h, bound = graph_bound(doc, X.reshape(5, -1).astype(np.float64), ["float32"])
    assert np.all(np.abs(h - ref) <= bound)


def test_torch_conv1d_adaptive_pool_and_view_of_the_input():
    from exactident.io.importers.objects import torch_document

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.pool, self.fc = nn.Conv1d(2, 3, 3, stride=2, padding=1), nn.AdaptiveAvgPool1d(2), \
                nn.Linear(6, 2)

        def forward(self, x):
            x = x.view(-1, 2, 8)
            return self.fc(torch.flatten(self.pool(F.leaky_relu(self.conv(x), 0.2)), 1))

    torch.manual_seed(2)
    doc = torch_document(Net(), RNG.standard_normal((4, 16)).astype(np.float32))
    assert doc["input_shape"] == [2, 8] and _ops(doc) == ["conv1d", "leaky_relu", "avgpool1d", "flatten", "linear"]
    assert doc["layers"][2]["kernel_size"] == [2] and doc["layers"][2]["stride"] == [2]
    assert Fraction(doc["layers"][1]["negative_slope"]) == _fr(np.float32(0.2))


@pytest.mark.parametrize("layer, why", [
    (nn.Softplus(), "(Softplus): not piecewise linear"),
    (nn.GELU(), "(GELU): not piecewise linear"),
    (nn.Tanh(), "(Tanh): not piecewise linear"),
    (nn.BatchNorm1d(4), "(BatchNorm1d): exact folding is impossible (sqrt(var + eps) is irrational)"),
])
def test_torch_refusals_one_line(layer, why):
    from exactident import from_torch

    m = nn.Sequential(nn.Conv1d(1, 4, 3), layer, nn.Flatten(), nn.Linear(4 * 6, 1))
    with pytest.raises(CaseFormatError) as info:
        from_torch(m, np.ones((2, 1, 8), np.float32))
    assert why in str(info.value) and "\n" not in str(info.value)


def test_torch_fold_batchnorm_says_so():
    from exactident.io.importers.objects import torch_document

    torch.manual_seed(3)
    m = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.LeakyReLU(), nn.Linear(4, 1)).eval()
    m[1].running_mean += 0.5
    m[1].running_var *= 3.0
    X = RNG.standard_normal((6, 4)).astype(np.float32)
    doc = torch_document(m, X, fold_batchnorm=True)
    assert _ops(doc) == ["linear", "leaky_relu", "linear"]
    assert "folded into 0 in float64" in doc["provenance"]["architecture"]
    assert "differs from the framework's by that rounding" in doc["description"]
    s = m[1].weight.detach().double().numpy() / np.sqrt(m[1].running_var.double().numpy() + m[1].eps)
    W = s[:, None] * m[0].weight.detach().double().numpy()
    assert [[Fraction(v) for v in row] for row in doc["layers"][0]["weight"]] == [[_fr(v) for v in row] for row in W]


def test_torch_plain_relu_mlp_is_still_format_1():
    from exactident import from_torch

    case = from_torch(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)), RNG.standard_normal((5, 3)))
    assert case.widths == (3, 4, 2)


# -- ONNX ----------------------------------------------------------------------------------------------------
def _export(m, X, path, dynamo):
    quiet = contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO())
    kw = {"dynamo": True} if dynamo else {"dynamo": False, "input_names": ["x"], "dynamic_axes": {"x": {0: "n"}}}
    with warnings.catch_warnings(), quiet[0], quiet[1]:
        warnings.simplefilter("ignore")
        torch.onnx.export(m.eval(), (torch.as_tensor(X[:2]),), str(path), **kw)


@pytest.mark.parametrize("dynamo", [False, True])
def test_onnx_exports_of_residual_and_cnn(tmp_path, dynamo):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxscript") if dynamo else None
    from exactident.io.importers.load import import_document

    torch.manual_seed(4)
    for name, m, X, ops in [
        ("res", _ResMlp(), RNG.standard_normal((7, 6)).astype(np.float32),
         ["linear", "leaky_relu", "linear", "relu", "add", "linear"]),
        ("cnn", _cnn(), RNG.random((5, 3, 4, 4)).astype(np.float32),
         ["conv2d", "prelu", "avgpool2d", "flatten", "linear"]),
    ]:
        _export(m, X, tmp_path / f"{name}.onnx", dynamo)
        np.save(tmp_path / f"{name}.npy", X)
        doc = import_document(tmp_path / f"{name}.onnx", str(tmp_path / f"{name}.npy"))
        assert _ops(doc) == ops, (name, _ops(doc))
        assert "onnx.reference.ReferenceEvaluator" in doc["provenance"]["forward_check"]
        with torch.no_grad():
            ref = (m.out(m.fc2(m.act(m.fc1(torch.as_tensor(X)))).relu() + m.act(m.fc1(torch.as_tensor(X))))
                   if name == "res" else m(torch.as_tensor(X))).numpy()
        h, bound = graph_bound(doc, X.reshape(len(X), -1).astype(np.float64), ["float32"])
        assert np.all(np.abs(h - ref) <= bound)


def test_onnx_cli_import_refusals_and_fold(tmp_path, capsys):
    pytest.importorskip("onnx")
    X = RNG.standard_normal((4, 1, 6)).astype(np.float32)
    np.save(tmp_path / "x.npy", X)
    mp = nn.Sequential(nn.Conv1d(1, 2, 3), nn.Tanh(), nn.Flatten(), nn.Linear(8, 1))
    _export(mp, X, tmp_path / "mp.onnx", False)
    err = bad_input_error(capsys, ["import", str(tmp_path / "mp.onnx"), "--sample", str(tmp_path / "x.npy")])
    assert "(Tanh): not piecewise linear" in err
    bn = nn.Sequential(nn.Conv1d(1, 2, 3), nn.BatchNorm1d(2), nn.ReLU(), nn.Flatten(), nn.Linear(8, 1)).eval()
    bn[1].running_var *= 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(bn, (torch.as_tensor(X[:2]),), str(tmp_path / "bn.onnx"), dynamo=False,
                          do_constant_folding=False, input_names=["x"], dynamic_axes={"x": {0: "n"}})
    err = bad_input_error(capsys, ["import", str(tmp_path / "bn.onnx"), "--sample", str(tmp_path / "x.npy")])
    assert "(BatchNormalization): exact folding is impossible" in err
    out = tmp_path / "bn.json"
    assert main(["import", str(tmp_path / "bn.onnx"), "--sample", str(tmp_path / "x.npy"), "--fold-batchnorm",
                 "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["format"] == "exactident-case/2" and _ops(doc) == ["conv1d", "relu", "flatten", "linear"]
    assert "folded" in doc["provenance"]["architecture"] and "within the rounding bound" in \
        doc["provenance"]["forward_check"]


# -- Keras ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def keras():
    import os

    os.environ.setdefault("KERAS_BACKEND", "torch")
    return pytest.importorskip("keras")


def test_keras_cnn_channels_last_permuted_exactly(keras, tmp_path):
    from exactident.io.importers.load import import_document

    L = keras.layers
    inp = keras.Input((4, 4, 3))
    h = L.Conv2D(2, 3, padding="same", activation="relu")(inp)
    h = L.AveragePooling2D(2)(h)
    h = L.Flatten()(h)
    d = L.Dense(5)(h)
    a = L.LeakyReLU()(d)
    r = L.Add()([a, L.Dense(5)(a)])
    out = L.Dense(2, activation="softmax")(L.PReLU()(r))
    keras.Model(inp, out).save(tmp_path / "k.keras")
    X = RNG.random((6, 4, 4, 3)).astype(np.float32)
    doc = import_document(tmp_path / "k.keras", X)
    assert doc["input_shape"] == [3, 4, 4]
    assert _ops(doc) == ["conv2d", "relu", "avgpool2d", "flatten", "linear", "leaky_relu", "linear", "add",
                         "prelu", "linear"]
    # the sample stored channel-first: row = X[i].transpose(2, 0, 1) in C-order, exactly
    assert [Fraction(v) for v in doc["sample"][1]] == [_fr(v) for v in X[1].transpose(2, 0, 1).ravel()]
    # the kernel (kh, kw, in, out) stored as (out, in, kh, kw)
    model = keras.saving.load_model(tmp_path / "k.keras")
    K = keras.ops.convert_to_numpy(model.layers[1].kernel)
    assert Fraction(doc["layers"][0]["weight"][1][2][0][1]) == _fr(K[0, 1, 2, 1])
    assert Fraction(doc["layers"][5]["negative_slope"]) == _fr(np.float32(0.3))
    assert "within the rounding bound" in doc["provenance"]["forward_check"]
    assert doc["provenance"]["dropped_output_activation"] == "softmax"
    model.layers[-1].activation = keras.activations.get("linear")
    ref = keras.ops.convert_to_numpy(model(X))
    h, bound = graph_bound(doc, np.array([[float(Fraction(v)) for v in row] for row in doc["sample"]]), ["float32"])
    assert np.all(np.abs(h - ref) <= bound)


def test_keras_refusals_one_line(keras, tmp_path, capsys):
    L = keras.layers
    inp = keras.Input((6,))
    keras.Model(inp, L.Dense(1)(L.BatchNormalization()(L.Dense(3)(inp)))).save(tmp_path / "bn.keras")
    err = bad_input_error(capsys, ["import", str(tmp_path / "bn.keras")])
    assert "(BatchNormalization): exact folding is impossible" in err
    keras.Model(inp, L.Dense(1, activation="gelu")(inp)).save(tmp_path / "g.keras")
    err = bad_input_error(capsys, ["import", str(tmp_path / "g.keras")])
    assert "activation 'gelu': not piecewise linear" in err


def test_from_torch_returns_a_case_that_compiles_to_the_module():
    from exactident import from_torch
    from exactident.model.network import pre_activations

    torch.manual_seed(5)
    m = _cnn()
    X = RNG.random((3, 3, 4, 4)).astype(np.float32)
    case = from_torch(m, X)
    assert case.architecture is not None and case.compiled.widths[0] == 48
    out = pre_activations(case.compiled, case.X)[-1]
    with torch.no_grad():
        ref = m(torch.as_tensor(X)).double().numpy()
    got = np.array([[int(out[i, j].p) / int(out[i, j].q) for j in range(out.ncols())] for i in range(out.nrows())])
    assert np.allclose(got, ref, rtol=0, atol=1e-5)


def test_torch_functional_pooling():
    from exactident.io.importers.objects import torch_document

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c, self.f = nn.Conv2d(2, 3, 3, padding=1), nn.Linear(12, 2)

        def forward(self, x):
            h = F.avg_pool2d(F.relu(self.c(x)), 2, padding=1)  # 6x6 -> 4x4, the padding counted
            return self.f(F.adaptive_avg_pool2d(h, (2, 2)).flatten(1))

    torch.manual_seed(6)
    doc = torch_document(Net(), RNG.random((4, 2, 6, 6)).astype(np.float32))
    pools = [(layer["kernel_size"], layer["stride"], layer["padding"]) for layer in doc["layers"]
             if layer["op"] == "avgpool2d"]
    assert pools == [([2, 2], [2, 2], [1, 1]), ([2, 2], [2, 2], [0, 0])]
    assert "within the rounding bound" in doc["provenance"]["forward_check"]


def test_keras_fold_batchnorm(keras, tmp_path):
    from exactident.io.importers.load import import_document

    L = keras.layers
    inp = keras.Input((5, 5, 2))
    h = L.BatchNormalization(epsilon=0.01)(L.Conv2D(3, 3)(inp))
    model = keras.Model(inp, L.Dense(2)(L.Flatten()(L.LeakyReLU()(h))))
    bn = model.layers[2]
    bn.moving_mean.assign(np.array([0.1, -0.2, 0.3], np.float32))
    bn.moving_variance.assign(np.array([0.5, 2.0, 3.0], np.float32))
    model.save(tmp_path / "bn.keras")
    X = RNG.random((4, 5, 5, 2)).astype(np.float32)
    with pytest.raises(CaseFormatError, match=r"\(BatchNormalization\): exact folding is impossible"):
        import_document(tmp_path / "bn.keras", X)
    doc = import_document(tmp_path / "bn.keras", X, fold_batchnorm=True)
    assert _ops(doc) == ["conv2d", "leaky_relu", "flatten", "linear"] and "folded" in doc["description"]
    K = keras.ops.convert_to_numpy(model.layers[1].kernel).astype(np.float64)
    # gamma = 1: s = 1 / sqrt(var + eps) in float64 (eps as the config stores it), W' = s W per output channel
    s = 1.0 / np.sqrt(np.array([0.5, 2.0, 3.0], np.float32).astype(np.float64) + 0.01)
    assert Fraction(doc["layers"][0]["weight"][2][1][0][2]) == _fr(K[0, 2, 1, 2] * s[2])


def test_imported_residual_is_analysed_end_to_end():
    """``b(x + relu(a x))``: the ReLU units feed the sum through a fixed weight 1, so no rescaling survives
    (symmetry_dim 0) and every one of the 3*3 + 3 + 2*3 + 2 = 20 parameters is free."""
    from exactident import check, from_torch

    class Res(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(3, 3), nn.Linear(3, 2)

        def forward(self, x):
            return self.b(x + torch.relu(self.a(x)))

    torch.manual_seed(0)
    case = from_torch(Res(), np.random.default_rng(0).standard_normal((30, 3)).astype(np.float32))
    arch = check(case).to_dict()["architecture"]
    assert arch["features"] == ["skip connection"] and arch["input_shape"] == [3]
    assert arch["n_params"] == 20 and arch["symmetry_dim"] == 0 and arch["dim_free"] == 20
