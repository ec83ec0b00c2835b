"""The model's current weights, read exactly, as a :class:`~exactident.io.case.Case` on the probe sample.

- PyTorch: :func:`exactident.io.importers.objects.from_torch` (an ``nn.Sequential`` or a traced ``forward``; the
  module's own forward pass on the probe is checked against the exact network);
- Keras 3 (any backend): :func:`keras_case`, a chain of ``Dense`` layers with ReLU between them
  (``activation="relu"``, or a ``ReLU``/``Activation("relu")`` layer), ``Dropout``/``Flatten``/``Identity``
  passed over, a final ``softmax``/``sigmoid`` dropped; forward-checked with ``model(X, training=False)``;
- any other framework (JAX, Flax, ...): a function returning the current ``(weights, biases)``, and
  optionally the framework's forward pass to check them against.

Every float is its exact binary value (:mod:`exactident.io.importers.arrays`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from exactident.errors import CaseFormatError
from exactident.io.case import Case

__all__ = ["arrays_case", "is_keras_model", "is_torch_module", "keras_case", "snapshot"]

_PASS = ("InputLayer", "Dropout", "Flatten", "Identity", "GaussianNoise", "GaussianDropout", "AlphaDropout")


def is_torch_module(model: Any) -> bool:
    """Whether ``model`` is a ``torch.nn.Module`` (without importing torch when it is not loaded)."""
    import sys

    torch = sys.modules.get("torch")
    return torch is not None and isinstance(model, torch.nn.Module)


def is_keras_model(model: Any) -> bool:
    """Whether ``model`` is a Keras 3 model (a ``keras.Model``; without importing keras when it is not loaded)."""
    import sys

    keras = sys.modules.get("keras")
    return keras is not None and isinstance(model, getattr(keras, "Model", ()))


def _activation(fn: Any) -> str:
    return str(getattr(fn, "__name__", fn)).lower()


def keras_case(model: Any, X: Any, name: str = "keras") -> Case:
    """A Keras ``Dense``/ReLU chain's current weights and the probe ``X`` as an exact case, forward-checked.

    Parameters
    ----------
    model : keras.Model
        Built (its weights exist). Kernels are stored ``(N_{l-1}, N_l)``: ``W_l`` is the transpose.
    X : array-like ``(n, N_0)``
        Rounded to the model's dtype (what the layers compute with) before it is read exactly.

    Raises
    ------
    CaseFormatError
        Naming the layer: a layer other than those listed in the module docstring, an activation
        other than ReLU between ``Dense`` layers, a ``Dense`` without its ReLU, an unbuilt model; the
        forward check failing (naming the sample and output).
    """
    import keras

    from exactident.io.importers.forward_check import forward_check

    where = f"<keras {type(model).__name__} {getattr(model, 'name', '')}>"
    weights: list[np.ndarray] = []
    biases: list[np.ndarray | None] = []
    pending = False  # a Dense whose ReLU is still to come
    final: str | None = None
    for layer in model.layers:
        kind = type(layer).__name__
        field = f"{layer.name} ({kind})"
        if final is not None:
            raise CaseFormatError(where, field, f"follows the output activation {final}")
        act = None
        if kind == "Dense":
            if pending:
                raise CaseFormatError(where, field, "follows another Dense layer with no ReLU between them")
            if not layer.built:
                raise CaseFormatError(where, field, "not built: call the model on data (or build it) first")
            weights.append(np.asarray(keras.ops.convert_to_numpy(layer.kernel)).T)
            biases.append(np.asarray(keras.ops.convert_to_numpy(layer.bias)) if layer.use_bias else None)
            pending, act = True, _activation(layer.activation)
        elif kind == "Activation":
            act = _activation(layer.activation)
        elif kind == "ReLU":
            if layer.max_value is not None or float(layer.negative_slope) != 0 or float(layer.threshold) != 0:
                raise CaseFormatError(where, field, "a ReLU with max_value, negative_slope or threshold is not ReLU")
            act = "relu"
        elif kind in _PASS:
            continue
        else:
            raise CaseFormatError(where, field, "unsupported layer (supported: Dense, ReLU, Activation, Dropout, "
                                                "Flatten, Identity)")
        if act in (None, "linear"):
            continue
        if act == "relu":
            if not pending and not weights:
                raise CaseFormatError(where, field, "ReLU does not follow a Dense layer")
            pending = False
        elif act in ("softmax", "sigmoid") and pending:
            final, pending = act, False
        else:
            raise CaseFormatError(where, field, f"activation {act!r} is not ReLU")
    if not weights:
        raise CaseFormatError(where, "layers", "no Dense layer")
    if not pending and final is None:
        raise CaseFormatError(where, "layers", "ends with a ReLU: the output layer must be affine")
    dtype = weights[0].dtype if weights[0].dtype.kind == "f" else np.dtype(np.float32)  # the layers' compute dtype
    Xr = np.asarray(X, dtype=dtype)
    case = Case.from_arrays(weights, biases, Xr, name=name)
    if len(Xr):
        ref = _keras_logits(model, Xr, final)
        dtypes = [str(w.dtype) for w in weights] + [str(dtype)]
        check = forward_check(case.network, Xr.astype(np.float64), ref, dtypes, where, "keras forward")
        case.provenance = {**(case.provenance or {}), "forward_check": check}
    case.provenance = {**(case.provenance or {}), "source_file": where}
    return case


def _keras_logits(model: Any, X: np.ndarray, final: str | None) -> np.ndarray:
    """The model's outputs on ``X`` in inference mode, before a dropped final softmax or sigmoid."""
    import keras

    if final is None:
        return np.asarray(keras.ops.convert_to_numpy(model(X, training=False)), dtype=np.float64)
    # the logits: the model without its final activation (layer by layer, inference mode)
    h: Any = X
    for layer in model.layers:
        kind = type(layer).__name__
        if kind == "InputLayer":
            continue
        if kind == "Dense" and _activation(layer.activation) == final:
            h = keras.ops.matmul(h, layer.kernel) + (layer.bias if layer.use_bias else 0)
            break
        if kind == "Activation" and _activation(layer.activation) == final:
            break
        h = layer(h, training=False) if kind in _PASS else layer(h)
    return np.asarray(keras.ops.convert_to_numpy(h), dtype=np.float64)


def arrays_case(weights: Callable[[], Any], X: Any, forward: Callable[[Any], Any] | None = None,
                name: str = "weights") -> Case:
    """The case of ``weights()`` (``(W, b)``: ``W_l`` of shape ``(N_l, N_{l-1})``) on ``X``; forward-checked
    against ``forward(X)`` when given.

    Raises
    ------
    CaseFormatError
        ``weights()`` not a pair, shapes that do not chain (:meth:`exactident.io.case.Case.from_arrays`),
        the outputs of ``forward`` differing from the exact network's beyond the rounding bound.
    """
    from exactident.io.importers.forward_check import forward_check

    got = weights()
    if not (isinstance(got, (tuple, list)) and len(got) == 2):
        raise CaseFormatError("<weights>", "weights()", "expected a pair (weights, biases)")
    Ws = [np.asarray(w) for w in got[0]]
    bs = None if got[1] is None else [None if b is None else np.asarray(b) for b in got[1]]
    case = Case.from_arrays(Ws, bs, X, name=name)
    if forward is not None and case.X:
        Xf = np.asarray(X, dtype=np.float64)
        dtypes = [str(w.dtype) for w in Ws if w.dtype.kind == "f"] + ([str(np.asarray(X).dtype)]
                                                                     if np.asarray(X).dtype.kind == "f" else [])
        ref = np.asarray(forward(X), dtype=np.float64)
        check = forward_check(case.network, Xf, ref, dtypes or ["float64"], "<weights>", "forward")
        case.provenance = {**(case.provenance or {}), "forward_check": check}
    case.provenance = {**(case.provenance or {}), "source_file": "<weights>"}
    return case


def snapshot(model: Any, X: Any, weights: Callable[[], Any] | None = None,
             forward: Callable[[Any], Any] | None = None, name: str = "track") -> Case:
    """The exact case of the current weights (PyTorch module, Keras model, or ``weights()``) on ``X``.

    Raises
    ------
    CaseFormatError
        The model is none of these, or its importer refuses it (naming the layer).
    """
    if weights is not None:
        return arrays_case(weights, X, forward, name)
    if is_keras_model(model):  # first: with the torch backend a Keras model is a torch.nn.Module too
        return keras_case(model, X, name)
    if is_torch_module(model):
        from exactident.io.importers.objects import from_torch

        return from_torch(model, X, name=name)
    raise CaseFormatError(f"<{type(model).__name__}>", "model", "not a torch.nn.Module nor a keras.Model: give "
                                                                "weights= (a function returning (weights, biases))")
