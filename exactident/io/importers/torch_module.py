"""A PyTorch ``nn.Sequential`` of ``Linear`` / ``ReLU`` (and ``Flatten``), from memory.

Accepted children (nested ``Sequential`` is flattened): ``Linear`` (with or
without bias; ``weight`` is ``(N_l, N_{l-1})``), ``ReLU`` after a ``Linear``,
``Flatten``/``Identity``/``Dropout`` (the identity on a flat input at
inference), and a final ``Sigmoid``/``Softmax`` over the features, dropped
(the network analysed ends at the logits).  A single ``Linear`` is an affine
network (``L = 1``).  Anything else is an error naming the layer.

:func:`refuse_hooks_and_ties` holds for every module import (this one, the ``torch.fx`` trace of
:mod:`~exactident.io.importers.torch_trace` and :mod:`~exactident.io.importers.torch_graph`, and a module given
as ``reference=``): a forward hook changes what ``module(x)`` computes but is invisible to the trace, and
a tensor used by two layers (one ``Linear`` applied twice, two layers sharing a weight) is one parameter,
not two independent ones; both are refused rather than analysing another network.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from exactident.errors import CaseFormatError
from exactident.io.importers.arrays import Tensor
from exactident.io.importers.common import Imported

__all__ = ["is_plain_sequential", "read_torch_module", "refuse_hooks_and_ties"]

_SKIP = {"Flatten", "Identity", "Dropout"}


def _children(module: Any, prefix: str) -> list[tuple[str, Any]]:
    if type(module).__name__ == "Sequential":
        out = []
        for name, child in module.named_children():
            out.extend(_children(child, f"{prefix}{name}." if prefix or name else ""))
        return out
    return [(prefix.rstrip(".") or type(module).__name__, module)]


def _hook_kind(m: Any) -> str | None:
    if getattr(m, "_forward_pre_hooks", None):
        return "a forward pre-hook"
    if getattr(m, "_forward_hooks", None):
        return "a forward hook"
    return None


def refuse_hooks_and_ties(module: Any, where: str, gm: Any = None) -> None:
    """Refuse a module whose forward pass is not the layers read from it.

    Forward hooks and pre-hooks (on ``module``, on any submodule, or global ones registered with
    ``torch.nn.modules.module.register_module_forward_hook`` / ``register_module_forward_pre_hook``)
    run in ``module(x)`` but not in a ``torch.fx`` trace, so the forward check could pass on the
    sample while the analysed network differs elsewhere.  Tied weights: a parameter tensor used by
    more than one layer (one ``Linear`` applied twice; two layers holding the same tensor) is a
    single free parameter; importing each use as its own ``W_l`` would analyse the untied network,
    which has more parameters than the trained one.

    Parameters
    ----------
    module : torch.nn.Module
    where : str
        The module's description for messages, e.g. ``<model.Net>``.
    gm : torch.fx.GraphModule, optional
        The traced graph: each use of a parameter in it is counted (a module called twice uses its
        weight twice).  Without it, the names under which each tensor is registered are counted.

    Raises
    ------
    CaseFormatError
        One line naming the hooked module (or the global hook), or the parameter used twice.
    """
    import torch.nn.modules.module as torch_module

    if getattr(torch_module, "_global_forward_pre_hooks", None) or getattr(torch_module, "_global_forward_hooks",
                                                                            None):
        raise CaseFormatError(where, "forward", "a global forward hook is registered (torch.nn.modules.module."
                                                "register_module_forward_hook or _pre_hook): it runs inside every "
                                                "module but torch.fx does not trace it; remove it (handle.remove()) "
                                                "before importing")
    for name, m in module.named_modules(remove_duplicate=False):
        kind = _hook_kind(m)
        if kind:
            label = f"{name} ({type(m).__name__})" if name else f"the module ({type(m).__name__})"
            raise CaseFormatError(where, label, f"has {kind}: it changes what the module computes but torch.fx "
                                                "does not trace it; remove it (handle.remove()) before importing")
    uses: dict[int, list[str]] = {}

    def use(tensor: Any, name: str) -> None:
        if tensor is not None and tensor.numel():
            uses.setdefault(tensor.untyped_storage().data_ptr(), []).append(name)

    if gm is None:
        for name, p in module.named_parameters(remove_duplicate=False):
            use(p, name)
    else:
        for node in gm.graph.nodes:
            if node.op == "call_module":
                sub = gm.get_submodule(node.target)
                for pname, p in sub.named_parameters(recurse=False):
                    use(p, f"{node.target}.{pname}")
            elif node.op == "get_attr":
                value: Any = gm
                for part in str(node.target).split("."):
                    value = getattr(value, part, None)
                if hasattr(value, "untyped_storage"):
                    for _ in range(max(1, len(node.users))):
                        use(value, str(node.target))
    for names in uses.values():
        if len(names) > 1:
            what = (f"{names[0]} is used {len(names)} times" if len(set(names)) == 1
                    else f"{' and '.join(dict.fromkeys(names))} are one tensor")
            raise CaseFormatError(where, names[0], f"tied weights: {what} (one parameter feeding several layers); "
                                                   "tied networks are not supported (importing each use as its own "
                                                   "layer would analyse the untied network, which has more "
                                                   "parameters)")


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
    dropped = None
    for name, layer in _children(module, ""):
        kind = type(layer).__name__
        field = f"layer {name} ({kind})"
        if dropped is not None:
            raise CaseFormatError(where, field, f"follows the output activation {dropped}")
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
                dropped = kind.lower()
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
