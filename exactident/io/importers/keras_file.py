"""Keras models (``.keras`` zip and legacy ``.h5``), read with ``h5py`` and the stored config.

A ``.keras`` file (Keras 3) is a zip holding ``config.json`` (the architecture)
and ``model.weights.h5``.  Keras 3 stores each layer's weights by *position*,
not by the layer's name: the model's layers, in the order of the config, are
named after their class in snake case with a per-class counter
(``layers/dense``, ``layers/dense_1``, ... ; ``layers/re_lu`` for a ``ReLU``),
whatever the layers are called (``keras.saving.saving_lib._save_container_state``);
``vars/0`` is the kernel, ``vars/1`` the bias, and the ``vars`` group records the
layer's own name in its ``name`` attribute.  The importer reads that layout and
checks it: the groups found are exactly the positions the config implies, each
records the config's layer name (when stored), and every kernel and bias has
the shape the config's ``units`` and the previous layer imply.
A legacy ``.h5`` file holds the config in the root attribute ``model_config``
and the weights under ``model_weights/<name>/`` (named, in ``weight_names``).

Supported: a ``Sequential`` model, or a ``Functional`` model that is a linear
chain (each layer takes the previous layer's output, in config order), of
``InputLayer`` (flat input), ``Dense`` with activation ``relu`` or ``linear``,
``Activation``/``ReLU`` layers that apply a plain ReLU, ``Dropout`` (the
identity at inference), ``Flatten`` of a flat input, and a final
``softmax``/``sigmoid`` (dropped: the network analysed ends at the logits, and
the provenance says so).  Anything else is an error naming the layer and its
class.  Dense kernels are stored ``(N_{l-1}, N_l)``.  Needs ``h5py`` (the
``keras`` extra); Keras itself is imported only for the forward check
(:func:`keras_forward_check`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import sys
import warnings
import zipfile
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from exactident.errors import CaseFormatError, UnsupportedCaseError
from exactident.io.importers.arrays import Tensor
from exactident.io.importers.common import Imported, check_declared_size, check_file_size
from exactident.io.importers.forward_check import forward_check
from exactident.model.network import Network

__all__ = ["keras_forward_check", "keras_position_names", "read_keras"]

_FINAL = {"softmax": "softmax", "sigmoid": "sigmoid"}
_SKIP = {"Dropout", "SpatialDropout1D", "GaussianDropout", "GaussianNoise", "AlphaDropout"}


def _h5py() -> Any:
    try:
        import h5py
    except ImportError:
        raise UnsupportedCaseError("reading Keras files needs h5py (pip install 'exactident[keras]')") from None
    return h5py


def _activation_name(value: Any) -> str:
    if value is None:
        return "linear"
    if isinstance(value, dict):  # a serialised activation object
        value = value.get("config", {}).get("name", value.get("class_name"))
    return str(value)


def _snake(name: str) -> str:
    """``keras.src.utils.naming.to_snake_case``: ``Dense`` -> ``dense``, ``ReLU`` -> ``re_lu``."""
    name = re.sub(r"\W+", "", name)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()


def keras_position_names(class_names: list[str]) -> list[str]:
    """The names Keras 3 gives the model's layers in ``model.weights.h5``, in config order.

    Examples
    --------
    >>> keras_position_names(["InputLayer", "Dense", "ReLU", "Dense", "Dense"])
    ['input_layer', 'dense', 're_lu', 'dense_1', 'dense_2']
    """
    used: dict[str, int] = {}
    out = []
    for cls in class_names:
        base = _snake(cls)
        if base in used:
            used[base] += 1
            out.append(f"{base}_{used[base]}")
        else:
            used[base] = 0
            out.append(base)
    return out


def _history(arg: Any) -> str | None:
    """The producing layer's name of a serialised Keras 3 tensor argument."""
    if isinstance(arg, dict) and arg.get("class_name") == "__keras_tensor__":
        hist = arg.get("config", {}).get("keras_history")
        if isinstance(hist, list) and hist:
            return str(hist[0])
    return None


def _io_names(value: Any) -> list[str]:
    """``input_layers``/``output_layers``: ``[name, 0, 0]`` or a list of those."""
    if isinstance(value, list) and value and isinstance(value[0], str):
        value = [value]
    return [str(v[0]) for v in value] if isinstance(value, list) and all(isinstance(v, list) and v
                                                                          for v in value) else []


def _chain(config: Any, source: str) -> list[dict]:
    """The config's layers, checked to be evaluated one after the other in config order."""
    if not isinstance(config, dict) or "class_name" not in config:
        raise CaseFormatError(source, "config", "no model config found")
    cls = config["class_name"]
    if cls not in ("Sequential", "Functional"):
        raise CaseFormatError(source, "config", f"model class {cls!r} is not supported "
                                                "(only Sequential models and Functional chains of Dense/ReLU layers)")
    layers = config.get("config", {}).get("layers")
    if not isinstance(layers, list) or not all(isinstance(x, dict) for x in layers):
        raise CaseFormatError(source, "config.layers", "missing")
    if cls == "Functional":
        inputs = _io_names(config["config"].get("input_layers"))
        outputs = _io_names(config["config"].get("output_layers"))
        names = [str(x.get("name", x.get("config", {}).get("name"))) for x in layers]
        if len(inputs) != 1 or len(outputs) != 1 or not names or inputs[0] != names[0] or outputs[0] != names[-1]:
            raise CaseFormatError(source, "config", f"Functional model with inputs {inputs} and outputs {outputs} is "
                                                    "not a linear chain (one input layer first, one output last)")
        for prev, layer, name in zip(names, layers[1:], names[1:]):
            nodes = layer.get("inbound_nodes")
            args = nodes[0].get("args") if isinstance(nodes, list) and len(nodes) == 1 and \
                isinstance(nodes[0], dict) else None
            if not isinstance(args, list) or len(args) != 1 or _history(args[0]) != prev or nodes[0].get("kwargs"):
                raise CaseFormatError(source, f"layer {name!r} ({layer.get('class_name')})",
                                      f"the Functional model is not a linear chain: this layer does not take "
                                      f"exactly the output of {prev!r}, the layer before it")
    return layers


def _plan(config: Any, source: str) -> tuple[list[tuple[str, str, int | None, bool]], int | None, str | None]:
    """Dense layers ``(config name, position name, units, use_bias)`` in order, ``N_0`` if stated,
    the dropped final activation."""
    layers = _chain(config, source)
    positions = keras_position_names([str(x.get("class_name")) for x in layers])
    dense: list[tuple[str, str, int | None, bool]] = []
    n_inputs: int | None = None
    pending_linear = False  # the last Dense is affine, waiting for a ReLU (or the end)
    dropped: str | None = None
    for layer, position in zip(layers, positions):
        cls, cfg = layer.get("class_name"), layer.get("config", {})
        name = str(cfg.get("name", cls))
        where = f"layer {name!r} ({cls})"
        if dropped is not None:
            raise CaseFormatError(source, where, f"follows the {dropped} output activation")
        if cls == "InputLayer":
            shape = cfg.get("batch_shape", cfg.get("batch_input_shape"))
            if not isinstance(shape, list) or len(shape) != 2:
                raise CaseFormatError(source, where, f"input shape {shape} is not flat (batch, N_0)")
            n_inputs = shape[1]
            continue
        if cls in _SKIP or cls == "Flatten":  # identity at inference / on a flat input
            continue
        act = None
        if cls == "Dense":
            if pending_linear:
                raise CaseFormatError(source, where, "follows a linear Dense layer with no ReLU between them")
            units = cfg.get("units")
            dense.append((name, position, units if isinstance(units, int) else None, bool(cfg.get("use_bias", True))))
            act = _activation_name(cfg.get("activation"))
            pending_linear = True
        elif cls == "Activation":
            act = _activation_name(cfg.get("activation"))
        elif cls == "ReLU":
            if cfg.get("max_value") is not None or cfg.get("negative_slope", 0) or cfg.get("threshold", 0):
                raise CaseFormatError(source, where, "only a plain ReLU (no max_value, negative_slope, threshold)")
            act = "relu"
        else:
            raise CaseFormatError(source, where, "unsupported layer (supported: InputLayer, Dense, Activation, "
                                                 "ReLU, Dropout, Flatten of a flat input)")
        if act == "linear":
            continue
        if not pending_linear:
            raise CaseFormatError(source, where, f"activation {act!r} does not follow a linear Dense layer")
        if act == "relu":
            pending_linear = False
        elif act in _FINAL:
            dropped = _FINAL[act]
            pending_linear = False
        else:
            raise CaseFormatError(source, where, f"unsupported activation {act!r} (supported: relu, linear, "
                                                 "and a final softmax or sigmoid)")
    if not dense:
        raise CaseFormatError(source, "config.layers", "no Dense layer")
    if not pending_linear and dropped is None:
        raise CaseFormatError(source, f"layer {dense[-1][0]!r} (Dense)", "the output layer ends with a ReLU "
                                      "(not a ReLU network's affine output)")
    return dense, n_inputs, dropped


def _read(dataset: Any, source: str, name: str, max_bytes: int) -> Tensor:
    check_declared_size(source, name, int(dataset.size) * dataset.dtype.itemsize, max_bytes)
    return Tensor(dataset[()], source, name)


def _check_shapes(source: str, name: str, kernel: Any, bias: Any, n_in: int | None, units: int | None) -> None:
    """The stored shapes against the config: kernel ``(n_in, units)``, bias ``(units,)``."""
    want = (n_in if n_in is not None else kernel.shape[0] if kernel.ndim == 2 else None,
            units if units is not None else kernel.shape[-1])
    if tuple(kernel.shape) != want:
        raise CaseFormatError(source, f"{name}/vars/0", f"kernel of shape {tuple(kernel.shape)}, the config "
                                                        f"implies {want} (input width, units)")
    if bias is not None and tuple(bias.shape) != (want[1],):
        raise CaseFormatError(source, f"{name}/vars/1", f"bias of shape {tuple(bias.shape)}, the config "
                                                        f"implies ({want[1]},)")


def _weights_keras(h5: Any, dense: list[tuple[str, str, int | None, bool]], n_inputs: int | None, source: str,
                   max_bytes: int) -> tuple[list, list]:
    root = h5.get("layers")
    if root is None:
        raise CaseFormatError(source, "model.weights.h5", "no 'layers' group: not written by Keras 3 "
                                                          "(re-save the model with Keras 3: model.save('m.keras'))")
    expected = {position for _, position, _, _ in dense}
    stored = {k for k in root if "vars" in root[k] and len(root[k]["vars"])}
    if stored - expected:
        raise CaseFormatError(source, "model.weights.h5", f"weights stored for layers/{sorted(stored - expected)[0]}, "
                                                          "which the config's layer order does not give a Dense layer")
    kernels, biases = [], []
    n_in = n_inputs
    for name, position, units, use_bias in dense:
        path = f"layers/{position}"
        group = h5.get(f"{path}/vars")
        if group is None or "0" not in group:
            raise CaseFormatError(source, f"{path}/vars", f"weights of Dense layer {name!r} not found "
                                                          "(Keras 3 stores them by position, not by name)")
        recorded = group.attrs.get("name")
        recorded = recorded.decode() if isinstance(recorded, bytes) else recorded
        if recorded is not None and str(recorded) != name:
            raise CaseFormatError(source, f"{path}/vars", f"records layer {recorded!r}, the config has {name!r} at "
                                                          "this position")
        want = {"0", "1"} if use_bias else {"0"}
        if set(group.keys()) != want:
            raise CaseFormatError(source, f"{path}/vars", f"holds {sorted(group.keys())}, a Dense layer "
                                                          f"{'with' if use_bias else 'without'} bias stores "
                                                          f"{sorted(want)}")
        _check_shapes(source, path, group["0"], group["1"] if use_bias else None, n_in, units)
        kernels.append(_read(group["0"], source, f"{path}/kernel", max_bytes))
        biases.append(_read(group["1"], source, f"{path}/bias", max_bytes) if use_bias else None)
        n_in = kernels[-1].shape[1]
    return kernels, biases


def _weights_h5(h5: Any, dense: list[tuple[str, str, int | None, bool]], source: str,
                max_bytes: int) -> tuple[list, list]:
    kernels, biases = [], []
    for name, _, _, use_bias in dense:
        group = h5.get(f"model_weights/{name}")
        if group is None:
            raise CaseFormatError(source, f"model_weights/{name}", "weights of this Dense layer not found")
        found = {}
        for wname in group.attrs.get("weight_names", []):
            wname = wname.decode() if isinstance(wname, bytes) else str(wname)
            found[wname.rsplit("/", 1)[-1].split(":")[0]] = wname
        if "kernel" not in found:
            raise CaseFormatError(source, f"model_weights/{name}", "no kernel in weight_names")
        kernels.append(_read(group[found["kernel"]], source, found["kernel"].split(":")[0], max_bytes))
        biases.append(_read(group[found["bias"]], source, found["bias"].split(":")[0], max_bytes)
                      if use_bias and "bias" in found else None)
    return kernels, biases


def _config_file(config_path: str, max_bytes: int) -> Any:
    """The model config of ``--config``: a JSON file (``model.to_json()``) or a ``.keras`` file's ``config.json``."""
    check_file_size(config_path, max_bytes)
    try:
        if zipfile.is_zipfile(config_path):
            with zipfile.ZipFile(config_path) as z:
                if "config.json" not in z.namelist():
                    raise CaseFormatError(config_path, "", "not a .keras file (no config.json)")
                check_declared_size(config_path, "config.json", z.getinfo("config.json").file_size, max_bytes)
                return json.loads(z.read("config.json"))
        with open(config_path, "rb") as f:
            return json.loads(f.read(max_bytes + 1))
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        text = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise CaseFormatError(config_path, "", f"not a Keras model config (JSON from model.to_json(), or a .keras "
                                               f"file) ({text})") from None


def read_keras(path: str, max_bytes: int, config_path: str | None = None) -> Imported:
    """Read a Keras ``Sequential`` model or ``Functional`` chain of Dense/ReLU layers (h5py, no Keras).

    Parameters
    ----------
    path : str
        ``.keras``, legacy ``.h5``, or (with ``config_path``) a Keras 3 ``.weights.h5``.
    max_bytes : int
    config_path : str, optional
        The architecture of a weights-only file: JSON from ``model.to_json()``, or a ``.keras``
        file whose ``config.json`` is used.

    Raises
    ------
    UnsupportedCaseError
        h5py is not installed.
    CaseFormatError
        Over the size limit, corrupted, not a Keras file, an unsupported layer or activation
        (naming the layer), a Functional model that is not a linear chain, weights missing, stored
        for other layers than the config's, or of the wrong shape (naming the layer).
    """
    check_file_size(path, max_bytes)
    h5py = _h5py()
    try:
        if zipfile.is_zipfile(path):
            if config_path is not None:
                raise CaseFormatError(path, "--config", "a .keras file holds its own config; --config is for a "
                                                        "weights-only .weights.h5 file")
            with zipfile.ZipFile(path) as z:
                names = z.namelist()
                if "config.json" not in names or "model.weights.h5" not in names:
                    raise CaseFormatError(path, "", "not a .keras file (no config.json and model.weights.h5)")
                for member in ("config.json", "model.weights.h5"):
                    check_declared_size(path, member, z.getinfo(member).file_size, max_bytes)
                config = json.loads(z.read("config.json"))
                weights = io.BytesIO(z.read("model.weights.h5"))
            dense, n_inputs, dropped = _plan(config, path)
            with h5py.File(weights, "r") as h5:
                kernels, biases = _weights_keras(h5, dense, n_inputs, path, max_bytes)
        elif config_path is not None:
            config = _config_file(config_path, max_bytes)
            dense, n_inputs, dropped = _plan(config, config_path)
            with h5py.File(path, "r") as h5:
                kernels, biases = _weights_keras(h5, dense, n_inputs, path, max_bytes)
        else:
            with h5py.File(path, "r") as h5:
                raw = h5.attrs.get("model_config")
                if raw is None:
                    hint = (" (a Keras 3 .weights.h5 file: give its architecture with --config model.json, "
                            "or save the whole model with model.save('m.keras'))"
                            if "layers" in h5 else " (a weights-only file has no architecture)")
                    raise CaseFormatError(path, "model_config", "missing: not a Keras model file" + hint)
                config = json.loads(raw.decode() if isinstance(raw, bytes) else raw)
                dense, n_inputs, dropped = _plan(config, path)
                kernels, biases = _weights_h5(h5, dense, path, max_bytes)
    except (OSError, zipfile.BadZipFile, KeyError, ValueError, EOFError) as exc:
        text = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise CaseFormatError(path, "", f"corrupted or not a Keras file ({text})") from None
    imported = Imported(kernels, biases, "in_out", "keras", n_inputs if isinstance(n_inputs, int) else None, dropped)
    imported.forward = keras_forward_check(path, dropped, None if config_path is None else config)
    return imported


# ------------------------------------------------------------------------------------------ forward check

_KERAS_SKIP = _SKIP | {"Flatten", "InputLayer"}


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Keep third-party warnings and log lines (Keras, TensorFlow, JAX, absl) off stderr."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            os.dup2(null.fileno(), 2)
            with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
                yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _import_keras() -> Any:
    """Keras, None when it is not installed, or why it cannot be imported (a str).  When the user
    has not chosen a backend and TensorFlow (Keras' default) is absent, the first installed of jax,
    torch is used, else numpy."""
    if importlib.util.find_spec("keras") is None:
        return None
    if "keras" not in sys.modules and not os.environ.get("KERAS_BACKEND") \
            and importlib.util.find_spec("tensorflow") is None:
        os.environ["KERAS_BACKEND"] = next((b for b in ("jax", "torch") if importlib.util.find_spec(b)), "numpy")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        with _quiet():
            import keras
    except Exception as exc:  # e.g. KERAS_BACKEND names a backend that is not installed
        text = (str(exc).strip().splitlines() or [""])[0][:160]
        return f"keras could not be imported ({type(exc).__name__}: {text})"
    return keras


def keras_forward_check(path: str, dropped: str | None, config: Any = None) -> Callable[[Network, np.ndarray], str]:
    """The forward check of a Keras file: Keras itself loads the file
    (``keras.saving.load_model(safe_mode=True)``, so no code is deserialised; a weights file
    with its ``config``: ``keras.saving.deserialize_keras_object(config, safe_mode=True)`` then
    ``load_weights``) and computes the outputs (logits: a dropped final activation is set to
    linear on the loaded copy), compared with the imported network by
    :func:`~exactident.io.importers.forward_check.forward_check`.

    Returns
    -------
    callable
        ``run(net, X) -> summary`` (``X`` float64 ``(n, N_0)``); the summary is
        ``"not run: keras is not installed"`` when Keras is absent.  ``run`` raises
        ``CaseFormatError`` when Keras cannot load the file, or when its outputs differ from
        the imported network's (naming the first differing sample and output).
    """

    def run(net: Network, X: np.ndarray) -> str:
        keras = _import_keras()
        if keras is None or isinstance(keras, str):
            return f"not run: {keras or 'keras is not installed'}"
        try:
            with _quiet():
                if config is None:
                    model = keras.saving.load_model(path, compile=False, safe_mode=True)
                else:
                    model = keras.saving.deserialize_keras_object(config, safe_mode=True)
                    model.load_weights(path)
        except Exception as exc:  # any Keras failure is a refusal, in one line
            text = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise CaseFormatError(path, "forward check", f"Keras {keras.__version__} cannot load this file to check "
                                                         f"the import ({text})") from None
        layers = [x for x in model.layers if type(x).__name__ not in _KERAS_SKIP]
        if dropped and layers:  # analyse the logits: the final activation off, on Keras' own copy
            layers[-1].activation = keras.activations.get("linear")
        inputs = getattr(model, "inputs", None)
        in_dtype = str(inputs[0].dtype) if inputs else "float32"
        Xin = np.asarray(X, dtype=np.float64).astype(in_dtype)
        with _quiet():
            # a tensor of the input's declared dtype: a numpy array would be converted to floatx()
            out = keras.ops.convert_to_numpy(model(keras.ops.convert_to_tensor(Xin, dtype=in_dtype), training=False))
        # the dtypes Keras declares, those the backend really used (JAX without x64 computes a float64
        # model in float32), and floatx(): the torch backend was measured to compute a float64 model
        # with float32 rounding errors, so no Keras output is trusted beyond floatx
        dtypes = [in_dtype, str(np.asarray(out).dtype), str(keras.config.floatx())]
        dtypes += [str(d) for x in layers for d in (x.compute_dtype, x.variable_dtype)]
        dtypes += [str(keras.ops.convert_to_numpy(w).dtype) for w in model.weights]
        what = f"Keras {keras.__version__} ({keras.backend.backend()}) forward"
        return forward_check(net, Xin.astype(np.float64), np.asarray(out), dtypes, path, what)

    return run
