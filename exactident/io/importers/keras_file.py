"""Keras models (``.keras`` zip and legacy ``.h5``), read with ``h5py`` and the stored config, no Keras import.

A ``.keras`` file is a zip holding ``config.json`` (the architecture) and
``model.weights.h5`` (``layers/<name>/vars/0`` = kernel, ``vars/1`` = bias).
A legacy ``.h5`` file holds the config in the root attribute ``model_config``
and the weights under ``model_weights/<name>/`` (names in ``weight_names``).
Supported: a ``Sequential`` model of ``InputLayer`` (flat input), ``Dense``
with activation ``relu`` or ``linear``, ``Activation``/``ReLU`` layers that
apply a plain ReLU, ``Dropout`` (the identity at inference), ``Flatten`` of a
flat input, and a final ``softmax``/``sigmoid`` (dropped: the network analysed
ends at the logits, and the provenance says so).  Anything else is an error
naming the layer and its class.  Dense kernels are stored ``(N_{l-1}, N_l)``.
Needs ``h5py`` (the ``keras`` extra).

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
import zipfile
from typing import Any

from exactident.errors import CaseFormatError, UnsupportedCaseError
from exactident.io.importers.arrays import Tensor
from exactident.io.importers.common import Imported, ZipBudget, check_declared_size, check_zip, open_zip, read_limited

__all__ = ["check_self_contained", "read_keras"]

_FINAL = {"softmax": "softmax", "sigmoid": "sigmoid"}
_SKIP = {"Dropout", "SpatialDropout1D", "GaussianDropout", "GaussianNoise", "AlphaDropout"}


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


def _plan(config: Any, source: str) -> tuple[list[tuple[str, bool]], int | None, str | None]:
    """Dense layers ``(name, use_bias)`` in order, ``N_0`` if stated, the dropped final activation."""
    if not isinstance(config, dict) or "class_name" not in config:
        raise CaseFormatError(source, "config", "no model config found")
    if config["class_name"] != "Sequential":
        raise CaseFormatError(source, "config", f"model class {config['class_name']!r} is not supported "
                                                "(only Sequential models of Dense/ReLU layers)")
    layers = config.get("config", {}).get("layers")
    if not isinstance(layers, list):
        raise CaseFormatError(source, "config.layers", "missing")
    dense: list[tuple[str, bool]] = []
    n_inputs: int | None = None
    pending_linear = False  # the last Dense is affine, waiting for a ReLU (or the end)
    dropped: str | None = None
    for layer in layers:
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
            dense.append((name, bool(cfg.get("use_bias", True))))
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


def _weights_keras(h5: Any, dense: list[tuple[str, bool]], source: str, budget: list[int]) -> tuple[list, list]:
    kernels, biases = [], []
    for name, use_bias in dense:
        group = h5.get(f"layers/{name}/vars")
        if group is None or "0" not in group:
            raise CaseFormatError(source, f"layers/{name}/vars", "weights of this Dense layer not found")
        kernels.append(_read(group["0"], source, f"{name}.kernel", budget))
        biases.append(_read(group["1"], source, f"{name}.bias", budget) if use_bias and "1" in group else None)
    return kernels, biases


def _weights_h5(h5: Any, dense: list[tuple[str, bool]], source: str, budget: list[int]) -> tuple[list, list]:
    kernels, biases = [], []
    for name, use_bias in dense:
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


def read_keras(path: str, max_bytes: int) -> Imported:
    """Read a Keras ``Sequential`` model of Dense/ReLU layers, without importing Keras.

    Raises
    ------
    UnsupportedCaseError
        h5py is not installed.
    CaseFormatError
        Over the size limit, corrupted, not a Keras file, an unsupported layer or activation
        (naming the layer), weights missing or of the wrong shape (naming the layer).
    """
    data = read_limited(path, max_bytes)
    h5py = _h5py()
    try:
        if zipfile.is_zipfile(io.BytesIO(data)):
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
                kernels, biases = _weights_keras(h5, dense, path, [max_bytes, max_bytes])
        else:
            with h5py.File(io.BytesIO(data), "r") as h5:
                check_self_contained(h5, path)
                raw = h5.attrs.get("model_config")
                if raw is None:
                    raise CaseFormatError(path, "model_config", "missing: not a Keras model file "
                                                                "(a weights-only file has no architecture)")
                config = json.loads(raw.decode() if isinstance(raw, bytes) else raw)
                dense, n_inputs, dropped = _plan(config, path)
                kernels, biases = _weights_h5(h5, dense, path, [max_bytes, max_bytes])
    except (OSError, zipfile.BadZipFile, KeyError, ValueError, EOFError) as exc:
        text = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise CaseFormatError(path, "", f"corrupted or not a Keras file ({text})") from None
    return Imported(kernels, biases, "in_out", "keras", n_inputs if isinstance(n_inputs, int) else None, dropped)
