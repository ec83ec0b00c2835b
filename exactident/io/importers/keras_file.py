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
(:func:`~exactident.io.importers.keras_forward.keras_forward_check`).

Only data inside the file is ever read.  The HDF5 file is opened from its bytes in
memory (so no file driver named in the file can reach other files), and before any
attribute or dataset is read every link of the file is walked
(:func:`check_self_contained`): an external link, a soft link, a dataset with external
raw storage, a virtual dataset, a compressed dataset (HDF5 inflates a chunk without
bound) or a filter that is not built into HDF5 (a plugin would be loaded from disk) is
refused, naming it.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from typing import Any

from exactident.errors import CaseFormatError, UnsupportedCaseError
from exactident.io.importers.arrays import Tensor
from exactident.io.importers.common import (
    Imported,
    ZipBudget,
    check_declared_size,
    check_zip,
    clean_message,
    open_zip,
    read_limited,
)
from exactident.io.importers.keras_forward import DROPOUT_LAYERS, keras_forward_check

__all__ = ["check_self_contained", "keras_position_names", "read_keras"]

_FINAL = {"softmax": "softmax", "sigmoid": "sigmoid"}
_SKIP = DROPOUT_LAYERS


def _h5py() -> Any:
    try:
        import h5py
    except ImportError:
        raise UnsupportedCaseError("reading Keras files needs h5py (pip install 'exactident[keras]')") from None
    return h5py


#: The HDF5 filters read: shuffle (2) and fletcher32 (3) keep a chunk's size.  A compressing filter (deflate,
#: szip, lzf, ...) is refused: HDF5 inflates a chunk into a buffer that grows with the data, whatever the
#: dataset declares (a 400 KB deflate chunk of a 32-byte dataset took 400 MB), and any other would be loaded
#: as a plugin from disk.  Keras never compresses its weights.
_SIZE_KEEPING_FILTERS = {2: "shuffle", 3: "fletcher32"}
_FILTER_NAMES = {1: "deflate", 4: "szip", 5: "nbit", 6: "scaleoffset", 32000: "lzf"}


def check_self_contained(h5: Any, source: str) -> None:
    """Refuse an HDF5 file any of whose data is not stored inside it, before any data is read.

    Every link is visited (``visit_links``: links are listed, never followed): only hard
    links are accepted (they name objects of this file); each dataset must keep its raw
    data in the file (no external storage, not virtual) and be uncompressed (only the
    shuffle and fletcher32 filters, which keep a chunk's size).

    Raises
    ------
    CaseFormatError
        Naming the link or dataset: an external link (another file), a soft or
        user-defined link, external raw storage (a file on disk), a virtual dataset
        (data mapped from other datasets or files), a compressed dataset (deflate, szip,
        lzf, ...: a decompression bomb cannot be told from its declared size), a filter
        that needs a plugin.
    """
    h5py = _h5py()

    def problem(name: str) -> CaseFormatError | None:
        link = h5.get(name, getlink=True)
        if isinstance(link, h5py.ExternalLink):
            return CaseFormatError(source, name, f"external link to {link.filename!r}: refused (an HDF5 model "
                                                "file must hold its data itself)")
        if not isinstance(link, h5py.HardLink):
            kind = "soft link" if isinstance(link, h5py.SoftLink) else "user-defined link"
            return CaseFormatError(source, name, f"{kind}: refused (only plain members are read)")
        obj = h5.get(name)
        if not isinstance(obj, h5py.Dataset):
            return None
        dcpl = obj.id.get_create_plist()
        if dcpl.get_external_count():
            where = dcpl.get_external(0)[0]
            where = where.decode("utf-8", "replace") if isinstance(where, bytes) else str(where)
            return CaseFormatError(source, name, f"dataset stored in external file {where!r}: "
                                                "refused (an HDF5 model file must hold its data itself)")
        if obj.is_virtual:
            return CaseFormatError(source, name, "virtual dataset (data mapped from elsewhere): refused")
        for i in range(dcpl.get_nfilters()):
            code = dcpl.get_filter(i)[0]
            if code in _FILTER_NAMES:
                return CaseFormatError(source, name, f"compressed dataset ({_FILTER_NAMES[code]}): refused, its "
                                                     "decompressed size cannot be bounded before reading (store "
                                                     "the weights uncompressed, as Keras does)")
            if code not in _SIZE_KEEPING_FILTERS:
                return CaseFormatError(source, name, f"HDF5 filter {code} is not built in (it would load a "
                                                     "plugin): refused")
        return None

    # an exception raised inside the visit callback does not cross h5py's C layer cleanly:
    # the callback returns the refusal, which stops the walk
    def guarded(name: str) -> CaseFormatError | None:
        try:
            return problem(name)
        except Exception as exc:  # a damaged object header: refuse the file, not crash in the C callback
            return CaseFormatError(source, name, f"corrupted HDF5 member ({type(exc).__name__})")

    found = h5.visit_links(guarded)
    if found is not None:
        raise found


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


def _read(dataset: Any, source: str, name: str, budget: list[int]) -> Tensor:
    """``budget = [limit, left]``: the tensors of one file are bounded in all, by their declared sizes."""
    n_bytes = int(dataset.size) * dataset.dtype.itemsize
    check_declared_size(source, name, n_bytes, budget[0])
    budget[1] -= n_bytes
    if budget[1] < 0:
        raise CaseFormatError(source, name, f"the tensors read so far pass the limit of {budget[0]} bytes in all "
                                            "(raise it with --max-bytes / max_bytes=)")
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
                   budget: list[int]) -> tuple[list, list]:
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
        kernels.append(_read(group["0"], source, f"{path}/kernel", budget))
        biases.append(_read(group["1"], source, f"{path}/bias", budget) if use_bias else None)
        n_in = kernels[-1].shape[1]
    return kernels, biases


def _weights_h5(h5: Any, dense: list[tuple[str, str, int | None, bool]], source: str,
                budget: list[int]) -> tuple[list, list]:
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
        kernels.append(_read(group[found["kernel"]], source, f"{name}.kernel", budget))
        biases.append(_read(group[found["bias"]], source, f"{name}.bias", budget)
                      if use_bias and "bias" in found else None)
    return kernels, biases


def _config_file(config_path: str, max_bytes: int) -> Any:
    """The model config of ``--config``: a JSON file (``model.to_json()``) or a ``.keras`` file's ``config.json``."""
    data = read_limited(config_path, max_bytes)
    try:
        if zipfile.is_zipfile(io.BytesIO(data)):
            with open_zip(config_path, io.BytesIO(data)) as z:
                if "config.json" not in z.namelist():
                    raise CaseFormatError(config_path, "", "not a .keras file (no config.json)")
                check_declared_size(config_path, "config.json", z.getinfo("config.json").file_size, max_bytes)
                return json.loads(ZipBudget(config_path, max_bytes).read(z, "config.json"))
        return json.loads(data)
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        text = clean_message(exc)
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
    data = read_limited(path, max_bytes)
    h5py = _h5py()
    try:
        if zipfile.is_zipfile(io.BytesIO(data)):
            if config_path is not None:
                raise CaseFormatError(path, "--config", "a .keras file holds its own config; --config is for a "
                                                        "weights-only .weights.h5 file")
            with open_zip(path, io.BytesIO(data)) as z:
                names = z.namelist()
                if "config.json" not in names or "model.weights.h5" not in names:
                    raise CaseFormatError(path, "", "not a .keras file (no config.json and model.weights.h5)")
                check_zip(z, path, max_bytes, len(data))  # the whole archive, before decompressing
                budget = ZipBudget(path, max_bytes)
                config = json.loads(budget.read(z, "config.json"))
                weights = io.BytesIO(budget.read(z, "model.weights.h5"))
            dense, n_inputs, dropped = _plan(config, path)
            with h5py.File(weights, "r") as h5:
                check_self_contained(h5, f"{path}: model.weights.h5")
                kernels, biases = _weights_keras(h5, dense, n_inputs, path, [max_bytes, max_bytes])
        elif config_path is not None:
            config = _config_file(config_path, max_bytes)
            dense, n_inputs, dropped = _plan(config, config_path)
            with h5py.File(io.BytesIO(data), "r") as h5:
                check_self_contained(h5, path)
                kernels, biases = _weights_keras(h5, dense, n_inputs, path, [max_bytes, max_bytes])
        else:
            with h5py.File(io.BytesIO(data), "r") as h5:
                check_self_contained(h5, path)
                raw = h5.attrs.get("model_config")
                if raw is None:
                    hint = (" (a Keras 3 .weights.h5 file: give its architecture with --config model.json, "
                            "or save the whole model with model.save('m.keras'))"
                            if "layers" in h5 else " (a weights-only file has no architecture)")
                    raise CaseFormatError(path, "model_config", "missing: not a Keras model file" + hint)
                config = json.loads(raw.decode() if isinstance(raw, bytes) else raw)
                dense, n_inputs, dropped = _plan(config, path)
                kernels, biases = _weights_h5(h5, dense, path, [max_bytes, max_bytes])
    except (OSError, zipfile.BadZipFile, KeyError, ValueError, EOFError) as exc:
        text = clean_message(exc)
        raise CaseFormatError(path, "", f"corrupted or not a Keras file ({text})") from None
    imported = Imported(kernels, biases, "in_out", "keras", n_inputs if isinstance(n_inputs, int) else None, dropped)
    imported.forward = keras_forward_check(path, dropped, None if config_path is None else config)
    return imported
