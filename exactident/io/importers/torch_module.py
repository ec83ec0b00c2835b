"""A PyTorch ``nn.Sequential`` of ``Linear`` / ``ReLU`` (and ``Flatten``), from memory.

Accepted children (nested ``Sequential`` is flattened): ``Linear`` (with or
without bias; ``weight`` is ``(N_l, N_{l-1})``), ``ReLU`` after a ``Linear``,
``Flatten``/``Identity``/``Dropout`` (the identity on a flat input at
inference), and a final ``Sigmoid``/``Softmax`` over the features, dropped
(the network analysed ends at the logits).  A single ``Linear`` is an affine
network (``L = 1``).  Anything else is an error naming the layer.

:func:`~exactident.io.importers.torch_trace.refuse_hooks_and_ties` is applied first, as to every module
import: forward hooks and tied weights are refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from exactident.errors import CaseFormatError
from exactident.io.importers.arrays import Tensor
from exactident.io.importers.common import Imported, activation_inside
from exactident.io.importers.torch_trace import refuse_hooks_and_ties

__all__ = ["is_plain_sequential", "read_torch_module"]

_SKIP = {"Flatten", "Identity", "Dropout"}


def _children(module: Any, prefix: str) -> list[tuple[str, Any]]:
    if type(module).__name__ == "Sequential":
        out = []
        for name, child in module.named_children():
            out.extend(_children(child, f"{prefix}{name}." if prefix or name else ""))
        return out
    return [(prefix.rstrip(".") or type(module).__name__, module)]


def is_plain_sequential(module: Any) -> bool:
    """An ``nn.Sequential`` (or ``nn.Linear``) of PyTorch's own layers, or not a module at all (refused here);
    any other module is traced (:mod:`exactident.io.importers.torch_trace`)."""
    if not hasattr(module, "named_children") or not callable(module):
        return True
    cls = type(module)
    if not cls.__module__.startswith("torch") or cls.__name__ not in ("Sequential", "Linear"):
        return False
    return all(type(layer).__module__.startswith("torch.") for _, layer in _children(module, ""))


def read_torch_module(module: Any) -> tuple[Imported, str, Callable[[Any], Any] | None]:
    """The layers of an ``nn.Sequential`` (or one ``nn.Linear``), a description of it, and the module up
    to its logits when a final Sigmoid/Softmax was dropped (None: the module itself).

    Raises
    ------
    CaseFormatError
        An unsupported layer, a ``ReLU`` that does not follow a ``Linear``, two ``Linear``
        without a ``ReLU`` between them, a ReLU on the output, a Softmax over another dim.
    """
    cls = type(module)
    where = f"<{cls.__module__}.{cls.__name__}>"
    if not cls.__module__.startswith("torch"):
        raise CaseFormatError(where, "", "expected a torch.nn.Sequential or torch.nn.Linear")
    refuse_hooks_and_ties(module, where)
    weights: list[Tensor] = []
    biases: list[Tensor | None] = []
    pending = False
    dropped, dropped_at = None, ""
    for name, layer in _children(module, ""):
        kind = type(layer).__name__
        field = f"layer {name} ({kind})"
        if dropped is not None:
            raise activation_inside(where, dropped_at, dropped, field)
        if kind in _SKIP:
            if kind == "Flatten" and getattr(layer, "start_dim", 1) != 1:
                raise CaseFormatError(where, field, "only Flatten(start_dim=1) of a flat input is supported")
            continue
        if kind == "Linear":
            if pending:
                raise CaseFormatError(where, field, "follows another Linear with no ReLU between them")
            weights.append(Tensor(layer.weight, where, f"{name}.weight"))
            biases.append(None if layer.bias is None else Tensor(layer.bias, where, f"{name}.bias"))
            pending = True
        elif kind in ("ReLU", "Sigmoid", "Softmax"):
            if not pending:
                raise CaseFormatError(where, field, f"{kind} does not follow a Linear layer")
            if kind == "Softmax" and getattr(layer, "dim", None) not in (1, -1):
                raise CaseFormatError(where, field, f"Softmax over dim {layer.dim} is not over the outputs")
            pending = False
            if kind != "ReLU":
                dropped, dropped_at = kind.lower(), field
        else:
            raise CaseFormatError(where, field, "unsupported layer (supported: Linear, ReLU, Flatten, Identity, "
                                                "Dropout, and a final Sigmoid or Softmax)")
    if not weights:
        raise CaseFormatError(where, "", "no Linear layer")
    if not pending and dropped is None:
        raise CaseFormatError(where, f"layer {name} (ReLU)", "the network ends with a ReLU (not a ReLU network's "
                                                             "affine output)")
    logits = None
    if dropped is not None:
        layers = [layer for _, layer in _children(module, "")][:-1]

        def logits(x: Any) -> Any:
            for layer in layers:
                x = layer(x)
            return x

    return Imported(weights, biases, "out_in", "torch-module", None, dropped), where, logits
