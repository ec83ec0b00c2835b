"""Max pooling through the PyTorch, ONNX and Keras importers, against each framework's own outputs.

Truth: the framework runs its model (PyTorch in float64 on the same module, ONNX exported from it,
Keras in float32) on the sample; the imported case's exact compiled network, evaluated in
rationals, must agree within the framework dtype's rounding (relative ``1e-12`` for float64,
``1e-5`` for float32 logits of these small nets).
"""

from __future__ import annotations

import contextlib
import io
import itertools
import warnings
from fractions import Fraction

import numpy as np
import pytest
from _importers import bad_input_error

from exactident.errors import CaseFormatError
from exactident.io.case import parse_case
from exactident.model.network import pre_activations

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional
RNG = np.random.default_rng(323)


def _exact_outputs(doc):
    case = parse_case(doc, "imported")
    Z = pre_activations(case.compiled, case.X)[-1]
    return np.array([[float(Fraction(int(Z[i, j].p), int(Z[i, j].q))) for j in range(Z.ncols())]
                     for i in range(Z.nrows())])


def _ops(doc):
    return [layer["op"] for layer in doc["layers"]]


class _Functional(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.fc = nn.Conv2d(2, 3, 2), nn.Linear(3 * 3 * 2, 2)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv(x)), (3, 2), stride=(2, 2), padding=(1, 0), ceil_mode=True)
        return self.fc(torch.flatten(h, 1))


TORCH_NETS = [
    ("k3s2p1", lambda: nn.Sequential(nn.Conv1d(2, 3, 3), nn.ReLU(), nn.MaxPool1d(3, stride=2, padding=1),
                                     nn.Flatten(), nn.LazyLinear(2)), (2, 11)),
    ("k4s1", lambda: nn.Sequential(nn.Conv1d(2, 3, 2), nn.MaxPool1d(4, stride=1), nn.Flatten(), nn.LazyLinear(1)),
     (2, 9)),
    ("dilated-ceil", lambda: nn.Sequential(nn.Conv1d(1, 2, 2), nn.LeakyReLU(0.25),
                                           nn.MaxPool1d(3, stride=2, dilation=2, padding=1, ceil_mode=True),
                                           nn.Flatten(), nn.LazyLinear(2)), (1, 10)),
    ("2d", lambda: nn.Sequential(nn.Conv2d(1, 2, 2), nn.ReLU(), nn.MaxPool2d((2, 3), stride=(1, 2)), nn.Flatten(),
                                 nn.LazyLinear(2)), (1, 6, 7)),
    ("2d-functional", _Functional, (2, 6, 5)),
    ("adaptive", lambda: nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.AdaptiveMaxPool2d(2), nn.Flatten(),
                                       nn.LazyLinear(1)), (1, 6, 6)),
]


def _module(make, shape, seed):
    torch.manual_seed(seed)
    m = make()
    with torch.no_grad():
        m(torch.zeros((1, *shape)))  # materialise the lazy layers
    return m.eval()


@pytest.mark.parametrize("label, make, shape", TORCH_NETS, ids=[t[0] for t in TORCH_NETS])
def test_torch_import_matches_torch_float64(label, make, shape):
    from exactident.io.importers.objects import torch_document

    m = _module(make, shape, 5)
    X = RNG.standard_normal((6, *shape)).astype(np.float32)
    doc = torch_document(m, X)
    assert any(op.startswith("maxpool") for op in _ops(doc)), _ops(doc)
    assert "within the rounding bound" in doc["provenance"]["forward_check"]
    with torch.no_grad():
        ref = m.double()(torch.as_tensor(X.astype(np.float64))).numpy()  # the float32 weights widened exactly
    np.testing.assert_allclose(_exact_outputs(doc), ref.reshape(len(X), -1), rtol=1e-12, atol=1e-12)


def test_torch_return_indices_refused_in_one_line():
    from exactident import from_torch

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 1)

        def forward(self, x):
            y, _ = F.max_pool1d(x, 2, return_indices=True)
            return self.fc(torch.flatten(y, 1))

    with pytest.raises(CaseFormatError) as info:
        from_torch(Net(), np.ones((2, 1, 4), np.float32))
    assert "return_indices=True is not supported" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("dynamo", [False, True])
def test_onnx_export_import_matches_the_module(tmp_path, dynamo):
    pytest.importorskip("onnx")
    if dynamo:
        pytest.importorskip("onnxscript")
    from exactident.io.importers.load import import_document

    nets = (TORCH_NETS[0], TORCH_NETS[2], TORCH_NETS[4])  # 1-D padded, dilated + ceil, 2-D
    for label, make, shape in nets[1:] if dynamo else nets:  # the dynamo exporter is slow: two nets
        m = _module(make, shape, 6)
        X = RNG.standard_normal((5, *shape)).astype(np.float32)
        path = tmp_path / f"{label}.onnx"
        kw = {"dynamo": True} if dynamo else {"dynamo": False, "input_names": ["x"], "dynamic_axes": {"x": {0: "n"}}}
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            torch.onnx.export(m, (torch.as_tensor(X[:2]),), str(path), **kw)
        np.save(tmp_path / f"{label}.npy", X)
        doc = import_document(path, str(tmp_path / f"{label}.npy"))
        assert any(op.startswith("maxpool") for op in _ops(doc)), (label, _ops(doc))
        assert "onnx.reference.ReferenceEvaluator" in doc["provenance"]["forward_check"]
        with torch.no_grad():
            ref = m.double()(torch.as_tensor(X.astype(np.float64))).numpy()
        np.testing.assert_allclose(_exact_outputs(doc), ref.reshape(len(X), -1), rtol=1e-12, atol=1e-12)


@pytest.fixture(scope="module")
def keras():
    import os

    os.environ.setdefault("KERAS_BACKEND", "torch")
    return pytest.importorskip("keras")


def test_keras_max_pooling_valid_same_global(keras, tmp_path):
    from exactident.io.importers.load import import_document

    L = keras.layers
    models = [
        ((9, 2), lambda h: L.MaxPooling1D(3, strides=2, padding="same")(L.Conv1D(3, 2, activation="relu")(h))),
        ((6, 7, 2), lambda h: L.MaxPooling2D((2, 3), strides=(1, 2), padding="same")(L.Conv2D(2, 2)(h))),
        ((6, 6, 1), lambda h: L.GlobalMaxPooling2D()(L.Conv2D(3, 3, activation="relu")(h))),
    ]
    for i, (shape, body) in enumerate(models):
        inp = keras.Input(shape)
        h = body(inp)
        out = L.Dense(2)(L.Flatten()(h) if len(h.shape) > 2 else h)
        model = keras.Model(inp, out)
        model.save(tmp_path / f"m{i}.keras")
        X = RNG.standard_normal((5, *shape)).astype(np.float32)
        doc = import_document(tmp_path / f"m{i}.keras", X)
        assert any(op.startswith("maxpool") for op in _ops(doc)), _ops(doc)
        ref = np.asarray(model.predict(X, verbose=0)).reshape(len(X), -1)  # Keras' own float32 forward
        np.testing.assert_allclose(_exact_outputs(doc), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attrs, outputs, words", [
    ({"kernel_shape": [2]}, ["y", "idx"], "node 'pool' (MaxPool): the Indices output is not supported"),
    ({"kernel_shape": [2], "auto_pad": "SAME_MIDDLE"}, ["y"], "node 'pool' (MaxPool): unknown auto_pad 'SAME_MIDDLE'"),
    ({"kernel_shape": [4], "pads": [4, 0]}, ["y"], "(MaxPool): pooling window [4], stride [1], padding [4, 0]"),
])
def test_onnx_bad_maxpool_nodes_exit_2_one_line(tmp_path, capsys, attrs, outputs, words):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    W = numpy_helper.from_array(np.ones((1, 3), np.float32), "W")
    nodes = [helper.make_node("MaxPool", ["x"], outputs, name="pool", **attrs),
             helper.make_node("Flatten", ["y"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "W"], ["out"], name="fc", transB=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1, 6])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", 1])], [W])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", RNG.standard_normal((3, 1, 6)).astype(np.float32))
    err = bad_input_error(capsys, ["import", str(tmp_path / "m.onnx"), "--sample", str(tmp_path / "x.npy")])
    assert words in err, err


def test_onnx_reference_failure_is_one_line_not_an_internal_error(tmp_path, capsys):
    """A padded MaxPool (kernel 2, stride 1, pads [1, 1]) after a leaky ReLU of negative slope (not moved after the
    pooling): onnx 1.23's ReferenceEvaluator indexes past its own output on it (IndexError).  The import cannot be
    forward-checked then, so it is refused in one line (exit 2), never an internal error (exit 70); where the
    evaluator runs, the import must succeed and match it."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    W = numpy_helper.from_array(np.ones((1, 6), np.float32), "W")
    nodes = [helper.make_node("LeakyRelu", ["x"], ["a"], name="act", alpha=-0.5),
             helper.make_node("MaxPool", ["a"], ["y"], name="pool", kernel_shape=[2], strides=[1], pads=[1, 1]),
             helper.make_node("Flatten", ["y"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "W"], ["out"], name="fc", transB=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1, 5])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", 1])], [W])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, tmp_path / "m.onnx")
    X = RNG.standard_normal((3, 1, 5)).astype(np.float32)
    np.save(tmp_path / "x.npy", X)
    argv = ["import", str(tmp_path / "m.onnx"), "--sample", str(tmp_path / "x.npy"), "-o", str(tmp_path / "m.json")]
    try:
        ReferenceEvaluator(model).run(None, {"x": X})
    except Exception:  # the evaluator's own failure (onnx 1.23.2)
        err = bad_input_error(capsys, argv)
        assert "onnx.reference cannot run the model on the sample" in err, err
    else:
        from exactident.cli import main

        assert main(argv) == 0


def test_keras_unknown_padding_mode_is_named(keras, tmp_path, capsys):
    import zipfile

    L = keras.layers
    inp = keras.Input((6, 1))
    keras.Model(inp, L.Dense(1)(L.Flatten()(L.MaxPooling1D(2)(inp)))).save(tmp_path / "m.keras")
    with zipfile.ZipFile(tmp_path / "m.keras") as z:  # the same file with padding 'causal' in its config
        files = {n: z.read(n) for n in z.namelist()}
    files["config.json"] = files["config.json"].replace(b'"padding": "valid"', b'"padding": "causal"')
    with zipfile.ZipFile(tmp_path / "bad.keras", "w") as z:
        for n, data in files.items():
            z.writestr(n, data)
    err = bad_input_error(capsys, ["import", str(tmp_path / "bad.keras")])
    assert "(MaxPooling1D): padding 'causal' (expected 'valid' or 'same')" in err, err


def test_window_rule_is_pytorchs_on_every_small_config():
    """Sizes and values of ``F.max_pool1d`` (float64) for every small config it accepts, ceil mode included."""
    from exactident.model.architecture import pool_out_size, pool_window

    gen = torch.Generator().manual_seed(0)
    checked = 0
    for n, k, s, p, d, ceil in itertools.product(range(1, 9), range(1, 5), range(1, 4), range(3), range(1, 3),
                                                (False, True)):
        if 2 * p > k:
            continue  # PyTorch: padding at most half the kernel
        x = torch.randn(1, 1, n, dtype=torch.float64, generator=gen)
        try:
            y = F.max_pool1d(x, k, s, p, d, ceil).ravel().tolist()
        except RuntimeError:
            continue  # an output size below 1: refused by PyTorch
        m = pool_out_size(n, k, s, p, p, d, ceil)
        assert m == len(y), (n, k, s, p, d, ceil)
        xs = x.ravel().tolist()
        for o in range(m):
            window = pool_window(o, k, s, p, d, n)
            assert (max(xs[i] for i in window) if window else float("-inf")) == y[o], (n, k, s, p, d, ceil, o)
        checked += 1
    assert checked > 600
