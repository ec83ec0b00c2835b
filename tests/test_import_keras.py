"""Keras 3 files written by Keras itself: weights by position, Functional chains, the forward check.

Right values: each imported weight equals the Keras layer's own kernel/bias (a float32 read
exactly with ``Fraction``), and Keras computes the outputs the forward check compares with.
The models are built *after* other models in the same session, so Keras names their layers
``dense_3``, ... while ``model.weights.h5`` stores them as ``layers/dense``, ``layers/dense_1``:
the case that used to fail or, with some names, swap two layers' kernels silently.
"""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from _importers import bad_input_error, rows_of

from exactident import CaseFormatError, import_model
from exactident.cli import main
from exactident.io.importers import keras_file, keras_forward


@pytest.fixture(scope="module")
def keras():
    pytest.importorskip("h5py")
    k = keras_forward._import_keras()
    if k is None or isinstance(k, str):
        pytest.skip(k or "keras is not installed")
    k.utils.set_random_seed(3)
    for _ in range(3):  # other models first, as in a notebook: the next layers are dense_3, ...
        k.Sequential([k.Input((2,)), k.layers.Dense(2)])
    return k


def _exact(a) -> list[list[Fraction]]:
    return [[Fraction(float(v)) for v in row] for row in np.atleast_2d(np.asarray(a))]


def _assert_weights(case, dense_layers):
    """W_l is the transpose of Keras' kernel (stored (N_{l-1}, N_l)), b_l its bias, bit for bit."""
    assert len(case.network.W) == len(dense_layers)
    for l, layer in enumerate(dense_layers):
        kernel, bias = (np.asarray(v) for v in layer.get_weights())
        assert rows_of(case.network.W[l]) == _exact(kernel.T), f"W_{l + 1}"
        assert [Fraction(int(v.p), int(v.q)) for v in case.network.b[l]] == _exact(bias)[0], f"b_{l + 1}"


X = np.random.default_rng(5).standard_normal((6, 3))
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # Keras on NumPy 2, in the tests own calls


def test_sequential_after_other_models_custom_names(keras, tmp_path):
    L = keras.layers
    model = keras.Sequential([keras.Input((3,)), L.Dense(4, name="hidden"), L.ReLU(), L.Dropout(0.3),
                              L.Dense(4, activation="relu"), L.Dense(2, activation="softmax", name="out")])
    assert model.layers[3].name.startswith("dense_")  # not the first model of the session
    for ext in ("keras", "h5"):
        model.save(tmp_path / f"m.{ext}")
        case = import_model(tmp_path / f"m.{ext}", X)
        _assert_weights(case, [model.layers[0], model.layers[3], model.layers[4]])
        prov = case.provenance
        assert prov["forward_check"].startswith("Keras ") and "within the rounding bound" in prov["forward_check"]
        assert prov["dropped_output_activation"] == "softmax"
    # the names users know: Keras' kernel is (in, out), so W_1[i,j] is kernel[j,i]
    names = import_model(tmp_path / "m.keras", X).provenance["parameter_names"]
    assert names["W_1"] == "layers/dense/kernel[j,i]" and names["b_3"] == "layers/dense_2/bias[i]"
    assert names["W_2"] == "layers/dense_1/kernel[j,i]"
    assert sorted(names) == ["W_1", "W_2", "W_3", "b_1", "b_2", "b_3"]


def test_swapped_names_regression(keras, tmp_path):
    """Config names dense_1 then dense: the weights file holds the first layer at layers/dense; reading
    by name gave the first layer the second layer's (same-shape) kernel with no error."""
    L = keras.layers
    model = keras.Sequential([keras.Input((3,)), L.Dense(3, activation="relu", name="dense_1"),
                              L.Dense(3, name="dense")])
    model.save(tmp_path / "swap.keras")
    case = import_model(tmp_path / "swap.keras", X)
    _assert_weights(case, model.layers)
    assert "within the rounding bound" in case.provenance["forward_check"]


def test_forward_check_catches_a_wrong_import(keras, tmp_path, monkeypatch):
    """Were the reader to swap the kernels (the old defect), Keras' own outputs refuse the import."""
    L = keras.layers
    model = keras.Sequential([keras.Input((3,)), L.Dense(3, activation="relu"), L.Dense(3)])
    model.save(tmp_path / "w.keras")
    real = keras_file._weights_keras

    def swapped(*args):
        kernels, biases = real(*args)
        return kernels[::-1], biases

    monkeypatch.setattr(keras_file, "_weights_keras", swapped)
    with pytest.raises(CaseFormatError, match=r"w.keras: forward check: the imported network differs from "
                                              r"Keras .* forward at sample \d+, output \d+"):
        import_model(tmp_path / "w.keras", X)


def test_functional_chain(keras, tmp_path):
    L = keras.layers
    inp = keras.Input((3,))
    d1, d2, d3 = L.Dense(5, name="a"), L.Dense(4, activation="relu"), L.Dense(2)
    out = d3(d2(L.Activation("relu")(d1(inp))))
    model = keras.Model(inp, out)
    for ext in ("keras", "h5"):
        model.save(tmp_path / f"f.{ext}")
        case = import_model(tmp_path / f"f.{ext}", X)
        assert case.widths == (3, 5, 4, 2)
        _assert_weights(case, [d1, d2, d3])
        assert "within the rounding bound" in case.provenance["forward_check"]
    # no sample: checked on seeded inputs
    assert "on 8 rows" in import_model(tmp_path / "f.keras").provenance["forward_check"]


def test_functional_residual_is_a_layer_graph_an_lstm_refused(keras, tmp_path, capsys):
    L = keras.layers
    inp = keras.Input((3,))
    h = L.Dense(3, activation="relu")(inp)
    out = L.Dense(2)(L.Add()([h, inp]))  # a residual connection
    keras.Model(inp, out).save(tmp_path / "res.keras")
    assert main(["import", str(tmp_path / "res.keras"), "-o", str(tmp_path / "res.json")]) == 0  # a layer graph
    doc = json.loads((tmp_path / "res.json").read_text())
    assert doc["format"] == "exactident-case/2" and [layer["op"] for layer in doc["layers"]] == [
        "linear", "relu", "add", "linear"]
    inp = keras.Input((6, 2))  # refused: a recurrent layer
    keras.Model(inp, L.Dense(1)(L.LSTM(2)(inp))).save(tmp_path / "rnn.keras")
    err = bad_input_error(capsys, ["import", str(tmp_path / "rnn.keras")])
    assert "layer 'lstm' (LSTM): recurrent layers are not supported" in err
    assert "Traceback" not in err and "\x1b" not in err


def test_cli_stderr_holds_only_the_summary(keras, tmp_path, capfd):
    """No Keras/JAX/absl warning text reaches stderr (file descriptor 2), on success or refusal."""
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(3, activation="relu"), keras.layers.Dense(1)])
    model.save(tmp_path / "q.keras")
    np.save(tmp_path / "X.npy", X)
    assert main(["import", str(tmp_path / "q.keras"), "--sample", str(tmp_path / "X.npy"),
                 "-o", str(tmp_path / "q.json")]) == 0
    out, err = capfd.readouterr()
    assert err == "" and out.count("\n") == 1 and "widths [3, 3, 1]" in out
    model.save_weights(tmp_path / "q.weights.h5")
    assert main(["import", str(tmp_path / "q.weights.h5")]) == 2
    out, err = capfd.readouterr()
    assert err.count("\n") == 1 and "give its architecture with --config model.json" in err


def test_weights_file_with_a_config(keras, tmp_path, capsys):
    L = keras.layers
    model = keras.Sequential([keras.Input((3,)), L.Dense(4, activation="relu", name="x"), L.Dense(2)])
    model.save_weights(tmp_path / "w.weights.h5")
    (tmp_path / "model.json").write_text(model.to_json())
    model.save(tmp_path / "m.keras")
    for config in ("model.json", "m.keras"):
        case = import_model(tmp_path / "w.weights.h5", X, config=tmp_path / config)
        _assert_weights(case, [model.layers[0], model.layers[1]])
        assert "within the rounding bound" in case.provenance["forward_check"]
        assert case.provenance["config_file"].endswith(config)
    np.save(tmp_path / "X.npy", X)
    assert main(["import", str(tmp_path / "w.weights.h5"), "--config", str(tmp_path / "model.json"),
                 "--sample", str(tmp_path / "X.npy"), "-o", str(tmp_path / "w.json")]) == 0
    err = bad_input_error(capsys, ["import", str(tmp_path / "m.keras"), "--format", "npz", "--config",
                                   str(tmp_path / "model.json")])
    assert "--config: a model config is for Keras weights files, not npz" in err
    err = bad_input_error(capsys, ["import", str(tmp_path / "m.keras"), "--config", str(tmp_path / "model.json")])
    assert "m.keras: --config: a .keras file holds its own config" in err
    (tmp_path / "bad.json").write_text("{not json")
    err = bad_input_error(capsys, ["import", str(tmp_path / "w.weights.h5"), "--config", str(tmp_path / "bad.json")])
    assert "bad.json: not a Keras model config" in err


def test_without_keras_the_summary_says_so(keras, tmp_path, monkeypatch):
    keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]).save(tmp_path / "n.keras")
    monkeypatch.setattr(keras_forward, "_import_keras", lambda: None)
    case = import_model(tmp_path / "n.keras", X)
    assert case.provenance["forward_check"] == "not run: keras is not installed"
    assert "forward check not run: keras is not installed" in case.description
    monkeypatch.setattr(keras_forward, "_import_keras", lambda: "keras could not be imported (ImportError: x)")
    assert import_model(tmp_path / "n.keras", X).provenance["forward_check"] == (
        "not run: keras could not be imported (ImportError: x)")


def test_float64_and_mixed_precision_models(keras, tmp_path):
    """A float64 model is computed by some backends in float32 (JAX without x64; torch measured with
    float32-sized errors): the bound must cover what Keras really does, not the declared dtype (this
    refused a correct import before). Mixed float16 layers compute in float16: a wider bound."""
    L = keras.layers
    f64 = keras.Sequential([keras.Input((3,), dtype="float64"), L.Dense(4, activation="relu", dtype="float64"),
                            L.Dense(2, dtype="float64")])
    f64.save(tmp_path / "f64.keras")
    assert "within the rounding bound" in import_model(tmp_path / "f64.keras", X).provenance["forward_check"]
    mixed = keras.Sequential([keras.Input((3,)), L.Dense(4, activation="relu", dtype="mixed_float16"),
                              L.Dense(2, dtype="mixed_float16")])
    mixed.save(tmp_path / "mixed.keras")
    case = import_model(tmp_path / "mixed.keras", X)
    _assert_weights(case, mixed.layers)  # variables stay float32 under mixed_float16
    assert "within the rounding bound" in case.provenance["forward_check"]


def test_importing_keras_says_so_on_a_terminal_only(capsys, monkeypatch):
    # Regression: `exactident canonical k.keras` sat silent for 8-10 s on a terminal, most of it
    # `import keras` (7 s with the torch backend) for the forward check.  On a terminal one line
    # says so and is erased after the import; off a terminal (pytest's capture) nothing is written.
    pytest.importorskip("keras")
    import sys

    for tty in (False, True):
        monkeypatch.delitem(sys.modules, "keras")  # the first import of this process
        monkeypatch.setattr(sys.stderr, "isatty", lambda tty=tty: tty)
        assert keras_forward._import_keras() is sys.modules["keras"]
        err = capsys.readouterr().err
        if tty:
            assert err == "importing Keras for the forward check ...\r\x1b[K"
        else:
            assert err == ""
