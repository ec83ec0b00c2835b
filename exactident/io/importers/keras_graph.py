"""A Keras 3 ``.keras`` Functional (or Sequential) model as a layer graph: ``Add``, ``LeakyReLU``, ``PReLU``,
``Conv1D``/``Conv2D``, ``AveragePooling1D``/``2D``, ``MaxPooling1D``/``2D``.

The config and weights are read with h5py from the archive, with the same safety
checks as :mod:`~exactident.io.importers.keras_file` (weights by position).  Keras
tensors are channels-last, the layer graph is channel-first: a convolution kernel
``(kh, kw, in, out)`` becomes ``(out, in, kh, kw)``; the sample (given as Keras takes
it, ``(n, H, W, C)`` or flat in that order) is stored permuted to ``(C, H, W)``
(an exact reordering, ``LayerGraph.sample_permutation``); and a ``Flatten`` of
channels-last data is read as the channel-first flatten followed by its consumers
(``Dense`` only) with their kernel rows permuted to match, so that the network
computes exactly what Keras computes.  Supported: ``InputLayer``, ``Dense`` (bias
or not; activation ``relu``, ``leaky_relu``, ``linear``, final ``softmax``/
``sigmoid`` dropped), ``Conv1D``/``Conv2D`` (``channels_last``, dilation 1, groups
1, ``valid`` or symmetric ``same`` padding), ``AveragePooling1D``/``2D`` (``valid``),
``GlobalAveragePooling1D``/``2D``, ``MaxPooling1D``/``2D`` (``valid`` or ``same``: the padded
positions never win the max), ``GlobalMaxPooling1D``/``2D``, ``ReLU`` (plain), ``LeakyReLU`` (its slope in
float32), ``PReLU`` (one slope per feature or, with ``shared_axes`` over the spatial
axes, per channel), ``Activation``, ``Add``, ``Flatten``, ``Dropout`` and its
variants; ``BatchNormalization`` after a ``Dense``/convolution folded in float64 with
``fold_batchnorm``.  Refused in one line naming the layer: ``BatchNormalization`` otherwise
(irrational fold), non-piecewise-linear activations, recurrent and attention layers, anything
else.
"""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import numpy as np

from exactident.errors import CaseFormatError
from exactident.io.importers.common import ZipBudget, check_zip, clean_message, open_zip, read_limited
from exactident.io.importers.graph import LayerGraph, exact_slope
from exactident.io.importers.keras_file import (
    _activation_name,
    _h5py,
    _io_names,
    check_self_contained,
    keras_position_names,
)
from exactident.io.importers.keras_forward import DROPOUT_LAYERS

__all__ = ["read_keras_graph"]

_SUPPORTED = ("supported: InputLayer, Dense, Conv1D, Conv2D, AveragePooling1D/2D, GlobalAveragePooling1D/2D, "
              "MaxPooling1D/2D, GlobalMaxPooling1D/2D, ReLU, "
              "LeakyReLU, PReLU, Activation, Add, Flatten, Dropout")
_NOT_PL = "not piecewise linear (exactident decides piecewise-linear networks only)"
REFUSED = {"BatchNormalization": "exact folding is impossible (sqrt(var + eps) is irrational); fold it in float64 "
                                 "with --fold-batchnorm",
           "MultiHeadAttention": "attention is not piecewise linear", "LSTM": "recurrent layers are not supported",
           "GRU": "recurrent layers are not supported", "SimpleRNN": "recurrent layers are not supported",
           "ELU": _NOT_PL, "Softmax": _NOT_PL}


def _history(arg: Any) -> list[str]:
    if isinstance(arg, dict) and arg.get("class_name") == "__keras_tensor__":
        hist = arg.get("config", {}).get("keras_history")
        return [str(hist[0])] if isinstance(hist, list) and hist else []
    if isinstance(arg, list):
        return [name for a in arg for name in _history(a)]
    return []


def _dtype(cfg: dict[str, Any]) -> str:
    d = cfg.get("dtype")
    name = d.get("config", {}).get("name") if isinstance(d, dict) else d
    return "float64" if name == "float64" else "float32"


def _read_archive(path: str, max_bytes: int) -> tuple[Any, bytes]:
    data = read_limited(path, max_bytes)
    if not zipfile.is_zipfile(io.BytesIO(data)):
        raise CaseFormatError(path, "", "a Keras model with skip connections, convolutions or leaky ReLU is read "
                                        "from a Keras 3 .keras file only (model.save('m.keras'))")
    try:
        with open_zip(path, io.BytesIO(data)) as z:
            names = z.namelist()
            if "config.json" not in names or "model.weights.h5" not in names:
                raise CaseFormatError(path, "", "not a .keras file (no config.json and model.weights.h5)")
            check_zip(z, path, max_bytes, len(data))
            budget = ZipBudget(path, max_bytes)
            return json.loads(budget.read(z, "config.json")), budget.read(z, "model.weights.h5")
    except (OSError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise CaseFormatError(path, "", f"corrupted or not a Keras file ({clean_message(exc)})") from None


class _KerasWalk:
    def __init__(self, path: str, h5: Any, max_bytes: int, fold_bn: bool = False) -> None:
        self.path, self.h5, self.fold_bn = path, h5, fold_bn
        self.left = max_bytes
        self.g: LayerGraph | None = None
        self.val: dict[str, str] = {}
        self.last: set[str] = set()  # graph tensors in Keras' channels-last layout (rank > 1)
        self.flat_perm: dict[str, np.ndarray] = {}  # Flatten outputs -> row permutation for their consumers
        self.dropped: str | None = None

    def var(self, position: str, index: int, where: str) -> np.ndarray:
        ds = self.h5.get(f"layers/{position}/vars/{index}")
        if ds is None:
            raise CaseFormatError(self.path, where, f"weights layers/{position}/vars/{index} not found")
        self.left -= int(ds.size) * ds.dtype.itemsize
        if self.left < 0:
            raise CaseFormatError(self.path, where, "the tensors pass the size limit (raise it with --max-bytes)")
        return np.asarray(ds[()])

    def activation(self, name: str, src: str, act: str, where: str, final: bool, dtype: str) -> str:
        g = self.g
        assert g is not None
        if act == "linear":
            return src
        if act == "relu":
            return g.activation(name, src, "relu")
        if act == "leaky_relu":
            return g.activation(name, src, "leaky_relu", exact_slope(0.2, dtype))
        if act in ("softmax", "sigmoid") and final:
            self.dropped = act
            return src
        raise CaseFormatError(self.path, where, f"activation {act!r}: {_NOT_PL}")

    def layer(self, layer: dict[str, Any], position: str, final: bool) -> None:
        cls, cfg = str(layer.get("class_name")), layer.get("config", {})
        name = str(cfg.get("name", layer.get("name", cls)))
        where = f"layer {name!r} ({cls})"
        if cls == "InputLayer":
            shape = [int(s) for s in cfg.get("batch_shape", [None])[1:]]
            first = tuple(shape[-1:] + shape[:-1]) if len(shape) > 1 else tuple(shape)  # channel-first
            self.g = LayerGraph(self.path, first)
            if len(shape) > 1:
                self.last.add("input")
                idx = np.arange(int(np.prod(shape))).reshape(shape)
                self.g.sample_permutation = np.moveaxis(idx, -1, 0).ravel().tolist()
                self.g.notes.append(f"channels-last input {shape}: the sample is stored channel-first {list(first)}")
            self.val[name] = "input"
            return
        g = self.g
        if g is None:
            raise CaseFormatError(self.path, where, "comes before the InputLayer")
        if cls in REFUSED and not (cls == "BatchNormalization" and self.fold_bn):
            raise CaseFormatError(self.path, where, REFUSED[cls])
        nodes = layer.get("inbound_nodes") or []
        if len(nodes) != 1 or _history(list((nodes[0].get("kwargs") or {}).values())):
            raise CaseFormatError(self.path, where, "called more than once or with tensors as keyword arguments")
        srcs = [self.val[s] for s in _history(nodes[0].get("args"))] if all(
            s in self.val for s in _history(nodes[0].get("args"))) else None
        if not srcs:
            raise CaseFormatError(self.path, where, "its inputs are not layers of the model")
        src = srcs[0]
        if cfg.get("data_format", "channels_last") != "channels_last":
            raise CaseFormatError(self.path, where, "only data_format='channels_last' (Keras' default) is supported")
        dtype = _dtype(cfg)
        out: str
        if cls == "Dense":
            if src in self.last:
                raise CaseFormatError(self.path, where, "Dense on a tensor that is not flat (flatten first)")
            K = self.var(position, 0, where)
            W = K.T
            if src in self.flat_perm:
                W = W[:, self.flat_perm[src]]
            b = self.var(position, 1, where) if cfg.get("use_bias", True) else None
            out = g.linear(name, src, W, b, f"{name}.kernel", f"{name}.bias")
            out = self.activation(f"{name}_activation", out, _activation_name(cfg.get("activation")), where, final,
                                  dtype)
        elif cls in ("Conv1D", "Conv2D"):
            K = self.var(position, 0, where)
            d = K.ndim - 2
            if int(cfg.get("groups", 1)) != 1 or any(int(x) != 1 for x in np.atleast_1d(cfg.get("dilation_rate", 1))):
                raise CaseFormatError(self.path, where, "only groups 1 and dilation 1 are supported")
            W = np.transpose(K, (d + 1, d, *range(d)))
            s = [int(x) for x in np.atleast_1d(cfg.get("strides", 1))] * (1 if np.ndim(cfg.get("strides", 1)) else d)
            pad = self.padding(str(cfg.get("padding", "valid")), g.shape(src)[1:], list(K.shape[:d]), s, where)
            b = self.var(position, 1, where) if cfg.get("use_bias", True) else None
            out = g.conv(name, src, W, b, s, pad, f"{name}.kernel", f"{name}.bias")
            self.last.add(out)
            out = self.activation(f"{name}_activation", out, _activation_name(cfg.get("activation")), where, final,
                                  dtype)
        elif cls in ("AveragePooling1D", "AveragePooling2D"):
            if cfg.get("padding", "valid") != "valid":
                raise CaseFormatError(self.path, where, "only padding='valid' (Keras' 'same' leaves the padding out "
                                                        "of the divisor)")
            k = cfg.get("pool_size")
            out = g.avgpool(name, src, k, cfg.get("strides") or k, 0)
        elif cls in ("MaxPooling1D", "MaxPooling2D"):
            shp = g.shape(src)
            k = [int(x) for x in np.atleast_1d(cfg.get("pool_size"))] * (1 if np.ndim(cfg.get("pool_size")) else
                                                                         len(shp) - 1)
            s = cfg.get("strides") or k
            s = [int(x) for x in np.atleast_1d(s)] * (1 if np.ndim(s) else len(k))
            mode = str(cfg.get("padding", "valid")).lower()
            if mode not in ("valid", "same"):
                raise CaseFormatError(self.path, where, f"padding {mode!r} (expected 'valid' or 'same')")
            # 'same': ceil(n / s) windows, the odd padded position at the end; it never wins the max
            total = [max(0, (-(-n // si) - 1) * si + ki - n) if mode == "same" else 0
                     for n, ki, si in zip(shp[1:], k, s)]
            out = g.maxpool(name, src, k, s, [t // 2 for t in total] + [t - t // 2 for t in total])
        elif cls in ("GlobalAveragePooling1D", "GlobalAveragePooling2D", "GlobalMaxPooling1D", "GlobalMaxPooling2D"):
            spatial = list(g.shape(src)[1:])
            out = g.global_avgpool(name, src) if "Average" in cls else g.maxpool(name, src, spatial, spatial, 0)
            if not cfg.get("keepdims", False):
                out = g.flatten(f"{name}_flat", out)  # (C, 1, 1) -> (C,): the same order in both layouts
        elif cls == "ReLU":
            if cfg.get("max_value") is not None or cfg.get("negative_slope", 0) or cfg.get("threshold", 0):
                raise CaseFormatError(self.path, where, "only a plain ReLU (no max_value, negative_slope, threshold)")
            out = g.activation(name, src, "relu")
        elif cls == "LeakyReLU":
            slope = cfg.get("negative_slope", cfg.get("alpha", 0.3))
            out = g.activation(name, src, "leaky_relu", exact_slope(float(slope), dtype))
        elif cls == "PReLU":
            out = self.prelu(name, src, position, cfg, where)
        elif cls == "Activation":
            out = self.activation(name, src, _activation_name(cfg.get("activation")), where, final, dtype)
        elif cls == "Add":
            out = g.add(name, srcs)
        elif cls == "Flatten":
            out = g.flatten(name, src)
            if src in self.last:  # Keras flattens (H, W, C); the graph (C, H, W): permute the consumers' rows
                shp = g.shape(src)
                idx = np.arange(int(np.prod(shp))).reshape(shp[1:] + shp[:1])  # Keras' flat position, (H, W, C)
                self.flat_perm[out] = np.moveaxis(idx, -1, 0).ravel()  # ... of each channel-first entry
        elif cls in DROPOUT_LAYERS:
            out = src
        elif cls == "BatchNormalization":
            out = self.batchnorm(src, position, cfg, where)
        else:
            raise CaseFormatError(self.path, where, f"unsupported layer ({_SUPPORTED})")
        if src in self.last and cls not in ("Flatten", "Dense") and not cls.startswith("Global"):
            self.last.add(out)
        if src in self.flat_perm and cls != "Dense" and out != src:
            raise CaseFormatError(self.path, where, "follows a Flatten of channels-last data (only Dense may)")
        self.val[name] = out

    def batchnorm(self, src: str, position: str, cfg: dict[str, Any], where: str) -> str:
        """Fold into the Dense/convolution just before, in float64 (``--fold-batchnorm``)."""
        g = self.g
        assert g is not None
        layer = g.layers[-1] if g.layers else None
        axis = cfg.get("axis", -1)
        if layer is None or layer.name != src or layer.op not in ("linear", "conv1d", "conv2d") or \
                layer.weight is None or layer.weight.float64 is None or axis not in (-1, [-1], len(g.shape(src))):
            raise CaseFormatError(self.path, where, "BatchNormalization is folded only right after a Dense or "
                                                    "convolution without activation, over the channel axis")
        k = 0
        n = layer.weight.shape[0]
        gamma = self.var(position, k, where).astype(np.float64) if cfg.get("scale", True) else np.ones(n)
        k += bool(cfg.get("scale", True))
        beta = self.var(position, k, where).astype(np.float64) if cfg.get("center", True) else np.zeros(n)
        k += bool(cfg.get("center", True))
        mean, var = (self.var(position, k + i, where).astype(np.float64) for i in (0, 1))
        s = gamma / np.sqrt(var + float(cfg.get("epsilon", 1e-3)))
        W = layer.weight.float64.reshape(layer.weight.shape)
        b = np.zeros(n) if layer.bias is None or layer.bias.float64 is None else layer.bias.float64
        layer.weight = g._tensor(W * s.reshape((-1,) + (1,) * (W.ndim - 1)), f"{where} (folded)")
        layer.bias = g._tensor(s * (b - mean) + beta, f"{where} (folded bias)")
        g.notes.append(f"BatchNormalization {where} folded into {src} in float64 (the analysed network differs "
                       "from the framework's by that rounding)")
        return src

    def padding(self, mode: str, size: tuple[int, ...], k: list[int], s: list[int], where: str) -> list[int]:
        if mode == "valid":
            return [0] * len(k)
        total = [max((-(-n // si) - 1) * si + ki - n, 0) for n, ki, si in zip(size, k, s)]
        if mode != "same" or any(t % 2 for t in total):
            raise CaseFormatError(self.path, where, f"padding {mode!r} is not symmetric here (Keras pads more on one "
                                                    "side)")
        return [t // 2 for t in total]

    def prelu(self, name: str, src: str, position: str, cfg: dict[str, Any], where: str) -> str:
        assert self.g is not None
        a = self.var(position, 0, where)
        shp = self.g.shape(src)
        if len(shp) == 1 or (a.size == a.shape[-1] and a.ndim == len(shp)):
            slopes = a.reshape(-1)
        else:
            raise CaseFormatError(self.path, where, "slopes per pixel (share them over the spatial axes with "
                                                    "shared_axes)")
        return self.g.activation(name, src, "prelu", weight=slopes, wname=f"{name}.alpha")


def read_keras_graph(path: str, max_bytes: int, fold_batchnorm: bool = False) -> tuple[LayerGraph, Any]:
    """The layer graph of a ``.keras`` file and its forward-check reference (Keras itself, when installed).

    Raises
    ------
    CaseFormatError
        One line naming the layer: refused or unsupported layer (and why), several inputs/outputs.
    UnsupportedCaseError
        h5py is not installed.
    """
    config, weights = _read_archive(path, max_bytes)
    if not isinstance(config, dict) or "class_name" not in config:
        raise CaseFormatError(path, "config", "no model config found")
    if config.get("class_name") not in ("Functional", "Sequential"):
        raise CaseFormatError(path, "config", "only Functional and Sequential models are supported")
    layers = config.get("config", {}).get("layers")
    if not isinstance(layers, list) or not all(isinstance(x, dict) for x in layers):
        raise CaseFormatError(path, "config.layers", "missing")
    positions = keras_position_names([str(x.get("class_name")) for x in layers])
    out_layer = None
    if config["class_name"] == "Functional":
        ins, outs = (_io_names(config["config"].get(k)) for k in ("input_layers", "output_layers"))
        if len(ins) != 1 or len(outs) != 1:
            raise CaseFormatError(path, "config", f"Functional model with inputs {ins} and outputs {outs} (exactly "
                                                  "one input and one output are supported)")
        out_layer = outs[0]
    h5py = _h5py()
    with h5py.File(io.BytesIO(weights), "r") as h5:
        check_self_contained(h5, f"{path}: model.weights.h5")
        w = _KerasWalk(path, h5, max_bytes, fold_batchnorm)
        if config["class_name"] == "Sequential":
            layers = _sequential_as_functional(layers, path)
        for i, (layer, position) in enumerate(zip(layers, positions)):
            w.layer(layer, position, i == len(layers) - 1)
    if w.g is None or not any(x.op in ("linear", "conv1d", "conv2d") for x in w.g.layers):
        raise CaseFormatError(path, "config.layers", "no Dense or convolution layer")
    last = out_layer or str(layers[-1].get("config", {}).get("name", layers[-1].get("name")))
    if last not in w.val:
        raise CaseFormatError(path, "config", f"the output layer {last!r} is not a layer of the model")
    w.g.output = w.val[last]
    w.g.dropped = w.dropped
    return w.g, _keras_reference(path, w.g, w.dropped)


def _sequential_as_functional(layers: list[dict[str, Any]], path: str) -> list[dict[str, Any]]:
    out = []
    prev = None
    for layer in layers:
        layer = dict(layer)
        name = str(layer.get("config", {}).get("name"))
        if prev is not None:
            layer["inbound_nodes"] = [{"args": [{"class_name": "__keras_tensor__",
                                                 "config": {"keras_history": [prev, 0, 0]}}], "kwargs": {}}]
        elif layer.get("class_name") != "InputLayer":
            raise CaseFormatError(path, f"layer {name!r}", "a Sequential model without an input shape")
        prev = name
        out.append(layer)
    return out


def _keras_reference(path: str, g: LayerGraph, dropped: str | None) -> Any:
    from exactident.io.importers.keras_forward import _import_keras, _quiet

    keras = _import_keras()
    if keras is None or isinstance(keras, str):
        return None
    perm = g.sample_permutation

    def run(Xf: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str], str]:
        try:
            with _quiet():
                model = keras.saving.load_model(path, compile=False, safe_mode=True)
        except Exception as exc:
            raise CaseFormatError(path, "forward check", f"Keras {keras.__version__} cannot load this file "
                                                         f"({clean_message(exc)})") from None
        if dropped:
            model.layers[-1].activation = keras.activations.get("linear")
        in_dtype = str(model.inputs[0].dtype)
        Xin = Xf.astype(in_dtype)
        shape = tuple(int(s) for s in model.inputs[0].shape[1:])
        keras_x = Xin
        if perm is not None:  # the graph's channel-first rows back to Keras' channels-last order
            inverse = np.argsort(np.asarray(perm))
            keras_x = Xin[:, inverse]
        with _quiet():
            out = keras.ops.convert_to_numpy(model(keras.ops.convert_to_tensor(keras_x.reshape(len(Xf), *shape),
                                                                                dtype=in_dtype), training=False))
        dtypes = [in_dtype, str(keras.config.floatx())] + [str(keras.ops.convert_to_numpy(v).dtype)
                                                            for v in model.weights]
        return (np.asarray(out, dtype=np.float64).reshape(len(Xf), -1), Xin.astype(np.float64), dtypes,
                f"Keras {keras.__version__} ({keras.backend.backend()}) forward")

    return run
