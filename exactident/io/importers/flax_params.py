"""JAX / Flax parameters: a Flax linen ``params`` tree or a Flax NNX state (or module), from memory.

A linen MLP's variables are ``{"params": {"Dense_0": {"kernel", "bias"}, "Dense_1": ...}}``;
an NNX model's ``nnx.state(model, nnx.Param)`` nests the same ``kernel``/``bias`` leaves under
its attribute names (``layers/0``, ``l1``, ...).  Both store kernels ``(N_{l-1}, N_l)``.  A
parameter tree holds no architecture: the layers are taken in the order of the numbers in their
names (``Dense_2`` before ``Dense_10``; linen numbers a module's submodules in creation order,
which a nested call such as ``nn.Dense(2)(nn.Dense(8)(x))`` reverses) or in the order given by
``layers=``, and the network is *assumed* to be the chain
``Dense -> ReLU -> ... -> Dense``: a forward check against the framework's own outputs
(``reference=``) confirms it, or the user states it (``assume_relu_mlp=True``, recorded as their
assumption); with neither, the tree is refused, as a weights file is
(:func:`~exactident.io.importers.reference.refuse_guess`).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from exactident.errors import CaseFormatError
from exactident.io.importers.arrays import Tensor
from exactident.io.importers.common import Imported, natural_key
from exactident.io.importers.forward_check import forward_check
from exactident.model.network import Network

__all__ = ["ASSUMED", "flax_forward", "read_flax"]

#: What a parameter tree without a reference is taken to be (provenance and summary).
ASSUMED = ("not run: no reference outputs given; architecture assumed by the user (assume_relu_mlp=True): "
           "Dense->ReLU chain in the order of the layer names, not checked against the model (pass "
           "reference=model.apply(variables, X))")

_SOURCE = "<flax params>"


def _tree(params: Any) -> Mapping:
    """A plain nested mapping of the parameters (linen variables or params, NNX state or module)."""
    with warnings.catch_warnings():  # Flax's deprecation notices about its own State class
        warnings.simplefilter("ignore")
        if hasattr(params, "to_pure_dict"):  # nnx.State
            return params.to_pure_dict()
        if isinstance(params, Mapping):
            return params
        if any(c.__module__.startswith("flax.nnx") for c in type(params).__mro__):  # an nnx.Module
            from flax import nnx

            return nnx.state(params, nnx.Param).to_pure_dict()
    raise CaseFormatError(_SOURCE, "params", f"expected a Flax parameter tree (a dict such as "
                                             f"{{'params': {{'Dense_0': ...}}}}) or an NNX state, found "
                                             f"{type(params).__name__}")


def _leaves(tree: Mapping, prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out += _leaves(value, path + "/")
        else:
            out.append((path, getattr(value, "value", value)))  # an nnx.Variable holds its array in .value
    return out


def read_flax(params: Any, layers: Sequence[str] | None = None) -> Imported:
    """The Dense layers of a Flax parameter tree, in order.

    Parameters
    ----------
    params : mapping, nnx.State or nnx.Module
        Linen ``variables`` (``{"params": {...}}``) or ``params``; an NNX state or module.
    layers : sequence of str, optional
        The layers' paths in the order the model applies them (e.g. ``["params/hidden",
        "params/out"]``, or without the ``params/``); default: the numbers in their names.

    Raises
    ------
    CaseFormatError
        Another variable collection (``batch_stats``) or a leaf other than ``kernel``/``bias``
        (naming its path), a layer without kernel, names without numbers to order them by
        and no ``layers=``, a ``layers=`` entry not in the tree.
    """
    tree = _tree(params)
    others = [k for k in tree if k != "params"]
    if "params" in tree and others:
        raise CaseFormatError(_SOURCE, str(others[0]), "a variable collection other than params (BatchNorm "
                                                       "statistics?): fold it into the Dense layers first "
                                                       "(docs/import.md, BatchNorm)")
    groups: dict[str, dict[str, Any]] = {}
    for path, value in _leaves(tree):
        parent, _, leaf = path.rpartition("/")
        if leaf not in ("kernel", "bias"):
            raise CaseFormatError(_SOURCE, path, "only Dense layers (kernel, bias) are supported; a BatchNorm or "
                                                 "LayerNorm must be folded into the Dense layers first")
        groups.setdefault(parent, {})[leaf] = value
    if not groups:
        raise CaseFormatError(_SOURCE, "params", "no Dense layer (kernel) found")
    if layers is not None:
        strip = {p.removeprefix("params/"): p for p in groups}
        order = [g if g in groups else strip.get(g, g) for g in layers]
        missing = [g for g in order if g not in groups]
        if missing or len(set(order)) != len(groups):
            raise CaseFormatError(_SOURCE, "layers", f"{missing[0]!r} is not a layer of the tree" if missing else
                                  f"lists {len(set(order))} of the {len(groups)} layers {sorted(groups)}")
    else:
        if len(groups) > 1 and not all(re.search(r"\d", g.rsplit("/", 1)[-1]) for g in groups):
            raise CaseFormatError(_SOURCE, "params", f"cannot tell the layer order from the names {sorted(groups)}: "
                                                     "give it with layers=[...]")
        order = sorted(groups, key=natural_key)
    weights: list[Tensor] = []
    biases: list[Tensor | None] = []
    for g in order:
        if "kernel" not in groups[g]:
            raise CaseFormatError(_SOURCE, g, "a layer without kernel")
        shape, prev = np.shape(groups[g]["kernel"]), weights[-1].shape if weights else None
        if prev is not None and len(shape) == 2 and len(prev) == 2 and shape[0] != prev[1]:
            raise CaseFormatError(_SOURCE, f"{g}/kernel", f"shape {shape} does not follow {weights[-1].name} of "
                                  f"shape {prev} in {'the order given' if layers is not None else 'name order'}"
                                  + ("" if layers is not None else
                                     " (linen numbers submodules in creation order, which is not always the order "
                                     "they are applied: nn.Dense(2)(nn.Dense(8)(x)) creates the outer one first); "
                                     "give the order with layers=[...]"))
        weights.append(Tensor(np.asarray(groups[g]["kernel"]), _SOURCE, f"{g}/kernel"))
        b = groups[g].get("bias")
        biases.append(None if b is None else Tensor(np.asarray(b), _SOURCE, f"{g}/bias"))
    return Imported(weights, biases, "in_out", "flax")


def flax_forward(reference: Any, dtypes: list[str]) -> Callable[[Network, np.ndarray], str]:
    """The forward check against ``reference``: outputs ``(n, N_L)`` on the sample, or a function
    ``X -> outputs`` (e.g. ``lambda X: model.apply(variables, X)``); without one, :data:`ASSUMED`."""

    def run(net: Network, X: np.ndarray) -> str:
        if reference is None:
            return ASSUMED
        if not callable(reference):  # computed by the user on the sample as given
            return forward_check(net, X, np.asarray(reference, dtype=np.float64), dtypes + ["float32"], _SOURCE,
                                 "the reference outputs")
        # JAX computes in float32 unless x64 is on: hand it the sample rounded as it would round it
        Xin = np.asarray(X, dtype=np.float64 if "float64" in dtypes else np.float32)
        out = np.asarray(reference(Xin), dtype=np.float64)
        return forward_check(net, Xin.astype(np.float64), out, dtypes + [str(Xin.dtype)], _SOURCE,
                             "the reference function")

    return run
