"""safetensors, Keras (.keras and .h5, via h5py) and .npz import, and scikit-learn MLPs in memory.

Right values: weights decoded from their bits in the test (``tests/_importers.py``);
framework outputs from numpy evaluating the stored arrays in their own dtype, from
Keras itself (real files in ``tests/data/keras`` written by
``examples/make_keras_fixture.py``, with Keras' predictions), and from scikit-learn's
``predict``/``predict_proba``.  Each block skips cleanly when its extra is absent.
"""

from __future__ import annotations

import io
import json
import struct
import zipfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from _importers import (
    FORMATS_BITS,
    UNIT_ROUNDOFF,
    assert_network_equals,
    decode_array,
    float_forward,
    write_weights_npz,
)
from _importers import bad_input_error as _err

from exactident import CaseFormatError, check, from_sklearn, import_model
from exactident.cli import main

RNG = np.random.default_rng(11)
DATA = Path(__file__).parent / "data" / "keras"


@pytest.fixture(autouse=True)
def _no_keras(monkeypatch):
    """The Keras files here are written with h5py (configs Keras itself would not load): the reader is
    tested as without Keras; tests/test_import_keras.py runs the forward check with Keras."""
    from exactident.io.importers import keras_forward

    monkeypatch.setattr(keras_forward, "_import_keras", lambda: None)


def _numpy_forward(Ws, bs, X, dtype):
    """The stored network evaluated by numpy in the stored dtype (W as (N_l, N_{l-1}))."""
    h = X.astype(dtype)
    for l, (W, b) in enumerate(zip(Ws, bs)):
        h = h @ W.T.astype(dtype) + b.astype(dtype)
        if l < len(Ws) - 1:
            h = np.maximum(h, 0)
    return h.astype(np.float64)


def _close(case, theirs, X, fmt):
    ours, bound = float_forward(case.network, X, UNIT_ROUNDOFF[fmt])
    assert np.all(np.abs(ours - theirs) <= bound + UNIT_ROUNDOFF[fmt] * np.abs(theirs))


# ------------------------------------------------------------------------------------------ safetensors

def _write_safetensors(path, tensors):
    """The safetensors layout written by hand: u64 header length, JSON header, raw little-endian data."""
    header, blobs, offset = {}, [], 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    Path(path).write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


ST = {"float16": "F16", "bfloat16": "BF16", "float32": "F32", "float64": "F64"}


@pytest.mark.parametrize("fmt", list(ST))
def test_safetensors_every_dtype(tmp_path, fmt):
    pytest.importorskip("safetensors")
    view = FORMATS_BITS[fmt][2]
    shapes = {"net.0.weight": (5, 3), "net.0.bias": (5,), "net.2.weight": (2, 5), "net.2.bias": (2,)}
    if fmt == "bfloat16":  # random finite bit patterns of small magnitude
        arrays = {k: (RNG.integers(0x3C00, 0x4000, s) | (RNG.integers(0, 2, s) << 15)).astype(np.uint16)
                  for k, s in shapes.items()}
        floats = {k: (v.astype(np.uint32) << 16).view(np.float32) for k, v in arrays.items()}
    else:
        floats = {k: RNG.standard_normal(s).astype(fmt) for k, s in shapes.items()}
        arrays = {k: v.view(view) for k, v in floats.items()}
    _write_safetensors(tmp_path / "m.safetensors",
                       {k: (ST[fmt], v.shape, v.astype(v.dtype.newbyteorder("<")).tobytes())
                        for k, v in arrays.items()})
    X = RNG.standard_normal((6, 3))
    case = import_model(tmp_path / "m.safetensors", X, assume_relu_mlp=True)
    assert_network_equals(case.network, [decode_array(arrays["net.0.weight"], fmt),
                                         decode_array(arrays["net.2.weight"], fmt)],
                          [decode_array(arrays["net.0.bias"], fmt)[0], decode_array(arrays["net.2.bias"], fmt)[0]])
    assert case.provenance["weight_dtype"] == fmt
    calc = np.float32 if fmt == "bfloat16" else fmt
    _close(case, _numpy_forward([floats["net.0.weight"], floats["net.2.weight"]],
                                [floats["net.0.bias"], floats["net.2.bias"]], X.astype(calc), calc),
           X.astype(calc).astype(np.float64), fmt)


def test_safetensors_errors(tmp_path, capsys):
    pytest.importorskip("safetensors")
    _write_safetensors(tmp_path / "b.safetensors", {"a.weight": ("BOOL", (1, 1), b"\x01")})
    assert "a.weight: unsupported dtype BOOL" in _err(capsys, ["import", str(tmp_path / "b.safetensors")])
    _write_safetensors(tmp_path / "ok.safetensors", {"a.weight": ("F32", (2, 2), np.ones(4, "<f4").tobytes())})
    data = (tmp_path / "ok.safetensors").read_bytes()
    (tmp_path / "cut.safetensors").write_bytes(data[:-3])
    assert "cut.safetensors: corrupted or not a safetensors file" in _err(
        capsys, ["import", str(tmp_path / "cut.safetensors")])
    nan = np.ones(4, "<f4")
    nan[3] = np.inf
    _write_safetensors(tmp_path / "inf.safetensors", {"a.weight": ("F32", (2, 2), nan.tobytes())})
    assert "inf.safetensors: a.weight[1][1]: expected a finite number, found inf (float32)" in _err(
        capsys, ["import", str(tmp_path / "inf.safetensors")])


# ---------------------------------------------------------------------------------------------------- npz

@pytest.mark.parametrize("fmt", ["float16", "float32", "float64"])
def test_npz_every_dtype(tmp_path, fmt):
    Ws = [RNG.standard_normal((4, 3)).astype(fmt), RNG.standard_normal((2, 4)).astype(fmt)]
    bs = [RNG.standard_normal(4).astype(fmt), RNG.standard_normal(2).astype(fmt)]
    np.savez(tmp_path / "m.npz", W1=Ws[0], b1=bs[0], W2=Ws[1], b2=bs[1])
    X = RNG.standard_normal((5, 3))
    case = import_model(tmp_path / "m.npz", X, assume_relu_mlp=True)
    view = FORMATS_BITS[fmt][2]
    assert_network_equals(case.network, [decode_array(W.view(view), fmt) for W in Ws],
                          [decode_array(b.view(view), fmt)[0] for b in bs])
    calc = np.float32 if fmt == "float16" else fmt  # numpy's float16 matmul is not what a user runs
    _close(case, _numpy_forward(Ws, bs, X, calc), X.astype(calc).astype(np.float64), fmt)


def test_npz_errors(tmp_path, capsys):
    np.savez(tmp_path / "o.npz", W1=np.array([[{}]], dtype=object))
    assert "o.npz: W1: array holds Python objects (a pickle): refused" in _err(capsys, ["import",
                                                                                        str(tmp_path / "o.npz")])
    np.savez(tmp_path / "gap.npz", W1=np.ones((2, 2)), W3=np.ones((2, 2)))
    assert "gap.npz: W2: missing (W3 is present)" in _err(capsys, ["import", str(tmp_path / "gap.npz")])
    np.savez(tmp_path / "other.npz", W1=np.ones((2, 2)), weights=np.ones(2))
    assert "other.npz: weights: unexpected array" in _err(capsys, ["import", str(tmp_path / "other.npz")])
    np.savez(tmp_path / "nob.npz", b1=np.ones(2))
    assert "nob.npz: W1: missing" in _err(capsys, ["import", str(tmp_path / "nob.npz")])
    np.savez(tmp_path / "b3.npz", W1=np.ones((2, 2)), b3=np.ones(2))
    assert "b3.npz: b3: bias without W3" in _err(capsys, ["import", str(tmp_path / "b3.npz")])
    np.savez(tmp_path / "t.npz", W1=np.ones((4, 3)), W2=np.ones((4, 2)))
    assert "t.npz: W2: shape (4, 2) does not follow W1" in _err(capsys, ["import", str(tmp_path / "t.npz")])
    (tmp_path / "bad.npz").write_bytes(b"PK\x03\x04 not a zip")
    assert "bad.npz: corrupted or not an .npz file" in _err(capsys, ["import", str(tmp_path / "bad.npz")])
    (tmp_path / "what.model").write_bytes(b"\x00\x01\x02")
    assert "cannot tell the model format" in _err(capsys, ["import", str(tmp_path / "what.model")])
    assert "no.npz: cannot read file" in _err(capsys, ["import", str(tmp_path / "no.npz")])
    assert "case files hold their own sample" in _err(capsys, ["check", str(DATA / "README.json"),
                                                               "--sample", "x.npy"])


def test_format_detected_from_content(tmp_path):
    np.savez(tmp_path / "m.npz", W1=np.ones((1, 2)))
    (tmp_path / "m.weights").write_bytes((tmp_path / "m.npz").read_bytes())
    assert import_model(tmp_path / "m.weights", assume_relu_mlp=True).provenance["format"] == "npz"


# -------------------------------------------------------------------------------------------------- Keras

def test_keras_real_files_match_keras_predict():
    pytest.importorskip("h5py")
    X = np.load(DATA / "tiny_X.npy")
    predicted = np.load(DATA / "tiny_predict.npy").astype(np.float64)
    for name in ("tiny.keras", "tiny.h5"):
        case = import_model(DATA / name, X)
        assert case.widths == (4, 6, 5, 3) and case.provenance["weight_dtype"] == "float32"
        _close(case, predicted, X.astype(np.float64), "float32")


def _keras_config(layers):
    return {"class_name": "Sequential", "config": {"name": "s", "layers": layers}}


def _dense(name, units, activation, use_bias=True):
    return {"class_name": "Dense", "config": {"name": name, "units": units, "activation": activation,
                                              "use_bias": use_bias}}


def _write_keras(path, config, weights):
    """The .keras layout (config.json + model.weights.h5 with layers/<position>/vars/<i>), written with h5py.

    ``weights`` is keyed by the position name Keras 3 gives a layer (``dense``, ``dense_1``, ...: the
    class in snake case, counted per class in config order), whatever the layer's config name."""
    h5py = pytest.importorskip("h5py")
    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:
        for name, arrays in weights.items():
            g = f.create_group(f"layers/{name}/vars")
            for i, a in enumerate(arrays):
                g.create_dataset(str(i), data=a)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("config.json", json.dumps(config))
        z.writestr("metadata.json", "{}")
        z.writestr("model.weights.h5", buf.getvalue())


@pytest.mark.parametrize("fmt", ["float16", "float32", "float64"])
def test_keras_every_dtype_and_dropped_softmax(tmp_path, fmt):
    K1, b1 = RNG.standard_normal((3, 4)).astype(fmt), RNG.standard_normal(4).astype(fmt)
    K2 = RNG.standard_normal((4, 2)).astype(fmt)
    config = _keras_config([{"class_name": "InputLayer", "config": {"name": "in", "batch_shape": [None, 3]}},
                            _dense("d1", 4, "relu"), {"class_name": "Dropout", "config": {"name": "drop"}},
                            _dense("d2", 2, "softmax", use_bias=False)])
    _write_keras(tmp_path / "m.keras", config, {"dense": [K1, b1], "dense_1": [K2]})
    X = RNG.standard_normal((5, 3))
    case = import_model(tmp_path / "m.keras", X)
    view = FORMATS_BITS[fmt][2]
    # Keras kernels are (N_{l-1}, N_l): W_l is the transpose
    assert_network_equals(case.network, [decode_array(K1.T.copy().view(view), fmt),
                                         decode_array(K2.T.copy().view(view), fmt)],
                          [decode_array(b1.view(view), fmt)[0], [Fraction(0)] * 2])
    assert case.provenance["dropped_output_activation"] == "softmax"
    calc = np.float32 if fmt == "float16" else fmt
    _close(case, _numpy_forward([K1.T, K2.T], [b1, np.zeros(2, fmt)], X, calc),
           X.astype(calc).astype(np.float64), fmt)


def test_keras_errors(tmp_path, capsys):
    pytest.importorskip("h5py")
    inp = {"class_name": "InputLayer", "config": {"name": "in", "batch_shape": [None, 3]}}
    w = {"dense": [np.ones((3, 4), np.float32), np.ones(4, np.float32)], "dense_1": [np.ones((4, 2), np.float32)]}

    def err(layers, weights=w, name="e.keras"):
        _write_keras(tmp_path / name, _keras_config(layers), weights)
        return _err(capsys, ["import", str(tmp_path / name)])

    conv = {"class_name": "Conv2D", "config": {"name": "c"}}
    assert "layer 'c' (Conv2D): weights layers/conv2d/vars/0 not found" in err([inp, conv])
    assert "layer 'd1' (Dense): activation 'tanh': not piecewise linear" in err([inp, _dense("d1", 4, "tanh")])
    wb = {"dense": w["dense"], "dense_1": [np.ones((4, 2), np.float32), np.ones(2, np.float32)]}
    _write_keras(tmp_path / "two.keras", _keras_config([inp, _dense("d1", 4, "linear"), _dense("d2", 2, "linear")]),
                 wb)
    assert main(["import", str(tmp_path / "two.keras"), "-o", str(tmp_path / "two.json")]) == 0  # linear units
    capsys.readouterr()
    assert "d2_activation: the network ends with an activation (relu)" in err(
        [inp, _dense("d1", 4, "relu"), _dense("d2", 2, "relu")], wb)
    assert "layer 'd1' (Dense): activation 'softmax': not piecewise linear" in err(
        [inp, _dense("d1", 4, "softmax"), _dense("d2", 2, "linear")], wb)
    assert "config.layers: no Dense or convolution layer" in err(
        [{"class_name": "InputLayer", "config": {"name": "in", "batch_shape": [None, 3, 3]}}])
    assert "layers/dense_1/vars: weights of Dense layer 'd2' not found" in err(
        [inp, _dense("d1", 4, "relu"), _dense("d2", 2, None)], {"dense": w["dense"]})
    assert "layers/dense_1/vars/0: kernel of shape (3, 2), the config implies (4, 2)" in err(
        [inp, _dense("d1", 4, "relu"), _dense("d2", 2, None, use_bias=False)],
        {"dense": w["dense"], "dense_1": [np.ones((3, 2), np.float32)]})
    assert "layers/dense/vars/0: kernel of shape (3, 4), the config implies (5, 4)" in err(
        [{"class_name": "InputLayer", "config": {"name": "in", "batch_shape": [None, 5]}},
         _dense("d1", 4, "relu"), _dense("d2", 2, None, use_bias=False)], w)
    assert "config: Functional model with inputs [] and outputs [] (exactly one input and one output" in _err(
        capsys, ["import", _functional(tmp_path)])
    (tmp_path / "junk.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + b"\x00" * 50)
    assert "junk.h5: corrupted or not a Keras file" in _err(capsys, ["import", str(tmp_path / "junk.h5")])
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "weights_only.h5", "w") as f:
        f.create_dataset("x", data=np.ones(2))
    assert "weights_only.h5: model_config: missing" in _err(capsys, ["import", str(tmp_path / "weights_only.h5")])


def _functional(tmp_path):
    _write_keras(tmp_path / "f.keras", {"class_name": "Functional", "config": {"layers": []}}, {})
    return str(tmp_path / "f.keras")


# ------------------------------------------------------------------------------------------- scikit-learn

@pytest.mark.filterwarnings("ignore:Stochastic Optimizer")
def test_sklearn_classifier_exact_and_probabilities():
    pytest.importorskip("sklearn")
    from sklearn.datasets import load_iris
    from sklearn.neural_network import MLPClassifier

    X, y = load_iris(return_X_y=True)
    model = MLPClassifier(hidden_layer_sizes=(5,), activation="relu", max_iter=300, random_state=0).fit(X, y)
    case = from_sklearn(model, X[:40])
    assert_network_equals(case.network, [[[Fraction(float(v)) for v in row] for row in c.T] for c in model.coefs_],
                          [[Fraction(float(v)) for v in b] for b in model.intercepts_])
    assert case.provenance["dropped_output_activation"] == "softmax"
    logits, _ = float_forward(case.network, X[:40], 2.0**-53)
    z = np.exp(logits - logits.max(axis=1, keepdims=True))
    assert np.allclose(z / z.sum(axis=1, keepdims=True), model.predict_proba(X[:40]), rtol=1e-12, atol=1e-15)
    report = check(case)
    assert report.extra["provenance"]["dropped_output_activation"] == "softmax"
    assert report.numeric["dtype"] == "float64"  # float64 weights: float64 check


@pytest.mark.filterwarnings("ignore:Stochastic Optimizer")
def test_sklearn_regressor_and_errors():
    pytest.importorskip("sklearn")
    from sklearn.datasets import load_diabetes
    from sklearn.linear_model import LinearRegression
    from sklearn.neural_network import MLPClassifier, MLPRegressor

    X, y = load_diabetes(return_X_y=True)
    model = MLPRegressor(hidden_layer_sizes=(4,), max_iter=50, random_state=0).fit(X[:50], y[:50])
    case = from_sklearn(model, X[:10])
    out, bound = float_forward(case.network, X[:10], 2.0**-53)
    assert np.all(np.abs(out[:, 0] - model.predict(X[:10])) <= bound[:, 0] + 1e-12 * np.abs(out[:, 0]))
    assert "dropped_output_activation" not in case.provenance
    binary = MLPClassifier(hidden_layer_sizes=(3,), max_iter=50, random_state=0).fit(X[:50], y[:50] > 150)
    assert from_sklearn(binary).provenance["dropped_output_activation"] == "sigmoid"
    with pytest.raises(CaseFormatError, match=r"activation: expected 'relu', found 'tanh'"):
        from_sklearn(MLPRegressor(hidden_layer_sizes=(4,), activation="tanh", max_iter=5).fit(X[:20], y[:20]))
    with pytest.raises(CaseFormatError, match=r"coefs_: the model is not fitted"):
        from_sklearn(MLPRegressor())
    with pytest.raises(CaseFormatError, match=r"expected a scikit-learn MLPRegressor or MLPClassifier"):
        from_sklearn(LinearRegression().fit(X, y))
    with pytest.raises(CaseFormatError, match=r"X: rows have 3 entries, the network takes N_0 = 10"):
        from_sklearn(model, X[:5, :3])


def test_more_keras_validators(tmp_path, capsys):
    pytest.importorskip("h5py")
    inp = {"class_name": "InputLayer", "config": {"name": "in", "batch_shape": [None, 3]}}
    w = {"dense": [np.ones((3, 2), np.float32), np.ones(2, np.float32)]}
    cases = [
        ([], "config.layers: no Dense layer"),
        ([inp, {"class_name": "Activation", "config": {"name": "a", "activation": "relu"}}],
         "config.layers: no Dense or convolution layer"),
        ([inp, _dense("d1", 2, "linear"), {"class_name": "ReLU", "config": {"name": "r", "max_value": 6.0}}],
         "layer 'r' (ReLU): only a plain ReLU"),
    ]
    for k, (layers, message) in enumerate(cases):
        _write_keras(tmp_path / f"k{k}.keras", _keras_config(layers), w)
        err = _err(capsys, ["import", str(tmp_path / f"k{k}.keras")])
        assert message in err, err
    _write_keras(tmp_path / "nl.keras", {"class_name": "Sequential", "config": {}}, w)
    assert "config.layers: missing" in _err(capsys, ["import", str(tmp_path / "nl.keras")])
    _write_keras(tmp_path / "nc.keras", [1, 2], w)
    assert "config: no model config found" in _err(capsys, ["import", str(tmp_path / "nc.keras")])
    with zipfile.ZipFile(tmp_path / "z.keras", "w") as z:
        z.writestr("other.txt", "x")
    assert "z.keras: not a .keras file (no config.json" in _err(capsys, ["import", str(tmp_path / "z.keras")])
    _write_keras(tmp_path / "big.keras", _keras_config([inp, _dense("d1", 2, None)]),
                 {"dense": [np.ones((3, 2), np.float32), np.ones(2, np.float32)]})
    assert "larger than the limit" in _err(capsys, ["import", str(tmp_path / "big.keras"), "--max-bytes", "16"])
    # legacy .h5 whose weight_names lack a kernel
    import h5py

    with h5py.File(tmp_path / "nok.h5", "w") as f:
        f.attrs["model_config"] = json.dumps(_keras_config([inp, _dense("d1", 2, None)]))
        f.create_group("model_weights/d1").attrs["weight_names"] = [b"d1/bias:0"]
    assert "model_weights/d1: no kernel in weight_names" in _err(capsys, ["import", str(tmp_path / "nok.h5")])
    with h5py.File(tmp_path / "nog.h5", "w") as f:
        f.attrs["model_config"] = json.dumps(_keras_config([inp, _dense("d1", 2, None)]))
    assert "model_weights/d1: weights of this Dense layer not found" in _err(capsys, ["import",
                                                                                     str(tmp_path / "nog.h5")])


@pytest.mark.filterwarnings("ignore:Stochastic Optimizer")
def test_sklearn_unknown_output_activation():
    pytest.importorskip("sklearn")
    from sklearn.neural_network import MLPRegressor

    model = MLPRegressor(hidden_layer_sizes=(2,), max_iter=5).fit(np.ones((4, 2)), np.ones(4))
    model.out_activation_ = "tanh"
    with pytest.raises(CaseFormatError, match=r"out_activation_: unsupported output activation 'tanh'"):
        from_sklearn(model)


# ------------------------------------------------------------------ model-file options of the analysing commands

def test_check_reads_a_keras_weights_file_with_its_config(tmp_path, capsys):
    """The error for a bare ``.weights.h5`` says ``--config``: ``check`` takes it, as ``import`` does, and gives
    the network of the whole ``.keras`` file (the same config and weight bytes, taken apart here)."""
    with zipfile.ZipFile(DATA / "tiny.keras") as z:
        (tmp_path / "config.json").write_bytes(z.read("config.json"))
        (tmp_path / "tiny.weights.h5").write_bytes(z.read("model.weights.h5"))
    X = str(DATA / "tiny_X.npy")
    assert "--config model.json" in _err(capsys, ["check", str(tmp_path / "tiny.weights.h5"), "--sample", X])
    whole = import_model(DATA / "tiny.keras", X)
    for command in (["check", "--no-numeric"], ["explain"]):
        assert main([*command, str(tmp_path / "tiny.weights.h5"), "--config", str(tmp_path / "config.json"),
                     "--sample", X, "--json"]) == 0, command
        rep = json.loads(capsys.readouterr().out)
        assert (rep["widths"], rep["dim"]) == (list(whole.widths), whole.network.dim)
    parts = import_model(tmp_path / "tiny.weights.h5", X, config=tmp_path / "config.json")
    assert parts.network.W == whole.network.W and parts.network.b == whole.network.b


@pytest.mark.parametrize("option", [["--config", "c.json"], ["--assume-relu-mlp"], ["--fold-batchnorm"],
                                    ["--sample-rows", "0:3"], ["--reference", "r.onnx"]])
def test_model_file_options_with_a_case_file_are_refused_by_name(option, capsys):
    case = str(Path(__file__).parent.parent / "cases" / "tiny-111-kink.json")
    err = _err(capsys, ["check", case, *option])
    assert f"tiny-111-kink.json: {option[0]}: case files hold their" in err, err


def test_a_case_file_and_a_model_file_in_one_command(tmp_path, monkeypatch, capsys):
    """``equiv A B`` and ``audit VICTIM --extracted MODEL`` read two networks: the model options are for the
    model file among them and are not refused for the case file (they are when both are case files);
    ``verify-certificate CASE REPORT`` refuses them as ``check`` does."""
    write_weights_npz(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["import", "m.npz", "--sample", "X.npy", "--assume-relu-mlp", "-o", "m.json"]) == 0
    assert main(["equiv", "m.json", "m.npz", "--sample", "X.npy", "--assume-relu-mlp"]) == 0  # the same network
    assert main(["equiv", "m.npz", "m.json", "--sample", "X.npy", "--assume-relu-mlp"]) == 0
    assert main(["audit", "m.json", "--extracted", "m.npz", "--sample", "X.npy", "--assume-relu-mlp"]) == 0
    capsys.readouterr()
    assert "m.json: --assume-relu-mlp: case files hold" in _err(capsys, ["equiv", "m.json", "m.json",
                                                                        "--assume-relu-mlp"])
    assert main(["check", "m.json", "--json", "--no-numeric"]) == 0
    (tmp_path / "r.json").write_text(capsys.readouterr().out)
    for option in (["--config", "c.json"], ["--assume-relu-mlp"], ["--fold-batchnorm"], ["--sample-rows", "0:3"]):
        assert f"m.json: {option[0]}: case files hold their" in _err(
            capsys, ["verify-certificate", "m.json", "r.json", *option])
    assert main(["verify-certificate", "m.json", "r.json"]) == 0


def test_outputs_never_overwrite_the_config_input(tmp_path, capsys):
    """``--config`` is an input like ``--sample``: ``crosscheck --csv``, ``check --jsonl`` and ``design -o``
    naming it are refused before any work, and the file is left as it was."""
    with zipfile.ZipFile(DATA / "tiny.keras") as z:
        (tmp_path / "cfg.json").write_bytes(z.read("config.json"))
        (tmp_path / "tiny.weights.h5").write_bytes(z.read("model.weights.h5"))
    before = (tmp_path / "cfg.json").read_bytes()
    model, cfg, X = str(tmp_path / "tiny.weights.h5"), str(tmp_path / "cfg.json"), str(DATA / "tiny_X.npy")
    for argv in (["crosscheck", model, "--config", cfg, "--sample", X, "--csv", cfg],
                 ["check", model, "--config", cfg, "--sample", X, "--jsonl", cfg],
                 ["design", model, "--config", cfg, "--sample", X, "-o", cfg]):
        assert "cfg.json" in _err(capsys, argv), argv
        assert (tmp_path / "cfg.json").read_bytes() == before, argv
