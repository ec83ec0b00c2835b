"""From an in-memory model object and a sample to an exact :class:`~exactident.io.case.Case`.

:func:`from_sklearn`, :func:`from_flax` and :func:`from_torch` read a fitted scikit-learn MLP, a Flax
parameter tree or a PyTorch module, build the exact network and end as every importer does
(:func:`exactident.io.importers.load.finish`: the sample read exactly, the framework's own forward pass
checked against the imported network, the provenance recorded).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from exactident.errors import CaseFormatError
from exactident.io.case import Case
from exactident.io.importers.common import DEFAULT_MAX_BYTES
from exactident.io.importers.load import finish, plain_case
from exactident.model.network import Network

__all__ = ["from_flax", "from_sklearn", "from_torch", "torch_document"]


def from_sklearn(model: Any, X: Any = None, *, name: str | None = None) -> Case:
    """An exact case from a fitted scikit-learn ``MLPRegressor``/``MLPClassifier`` (relu), or a ``Pipeline``
    of transformers ending with one, and a sample.

    Parameters
    ----------
    model : MLPRegressor, MLPClassifier or Pipeline
        Fitted, ``activation='relu'``.  A classifier is analysed before its output
        activation (softmax or logistic), which the provenance records.  In a Pipeline,
        scikit-learn applies the steps before the MLP to ``X`` (``pipeline[:-1].transform(X)``):
        the transformed sample is the one analysed (``provenance["sample_transform"]``).
    X : array-like ``(n, N_0)``, optional
        The sample (floats read exactly); None gives an empty sample.  The imported network
        is checked against scikit-learn's own forward pass on it
        (``provenance["forward_check"]``).

    Returns
    -------
    Case

    Raises
    ------
    CaseFormatError
        Not a fitted relu MLP, a Pipeline step before the MLP that is not a transformer (naming
        it), a sample of the wrong width, NaN/inf in the sample, outputs that differ from
        scikit-learn's.
    """
    from exactident.io.importers.sklearn_mlp import read_sklearn, split_pipeline

    mlp, X, transform = split_pipeline(model, X)
    imported, where = read_sklearn(mlp)
    provenance = {"source_file": where if mlp is model else f"{where[:-1]} in a Pipeline>"}
    if transform:
        provenance["sample_transform"] = transform
    return finish(imported, where, name or type(mlp).__name__, X, None, DEFAULT_MAX_BYTES, provenance)


def from_flax(params: Any, X: Any = None, *, reference: Any = None, layers: Any = None,
              name: str | None = None, assume_relu_mlp: bool = False) -> Case:
    """An exact case from a Flax MLP's parameters (linen ``variables``/``params``, NNX state or module).

    Parameters
    ----------
    params : mapping, nnx.State or nnx.Module
        ``{"params": {"Dense_0": {"kernel": (N_0, N_1), "bias": (N_1,)}, ...}}`` or an NNX
        state of ``kernel``/``bias`` leaves (kernels stored ``(N_{l-1}, N_l)``).
    X : array-like ``(n, N_0)``, optional
        The sample (floats read exactly).
    reference : array ``(n, N_L)`` or callable, optional
        The model's own outputs on ``X`` (``model.apply(variables, X)``), or a function
        ``X -> outputs``: the imported network is checked against it
        (``provenance["forward_check"]``).
    assume_relu_mlp : bool
        Without ``reference``: your statement that the tree is a plain Dense->ReLU chain in name order
        (a parameter tree holds no architecture); the provenance and the description record it as your
        assumption.  With neither, the tree is refused.
    layers : sequence of str, optional
        The layers' paths in the order the model applies them, when their names hold no numbers.
    name : str, optional

    Returns
    -------
    Case

    Raises
    ------
    CaseFormatError
        Not a Dense-only tree (naming the leaf), an undecidable layer order, shapes that do not
        chain, reference outputs without the sample, outputs that differ from the reference;
        neither ``reference`` nor ``assume_relu_mlp``.
    """
    from exactident.io.importers.flax_params import flax_forward, read_flax

    imported = read_flax(params, layers)
    if reference is None and not assume_relu_mlp:  # as a weights file (reference.refuse_guess)
        raise CaseFormatError("<flax params>", "architecture", "a parameter tree holds no architecture (a leaky-ReLU "
                                                               "or residual network has the same leaves), and no "
                                                               "verdict is given on a guess: give reference= "
                                                               "(model.apply's outputs on X, or a function computing "
                                                               "them), or state that it is a plain Dense→ReLU chain "
                                                               "with assume_relu_mlp=True")
    if reference is not None and not callable(reference) and X is None:
        raise CaseFormatError("<flax params>", "reference", "reference outputs need the sample X they were "
                                                            "computed on")
    imported.forward = flax_forward(reference, [t.dtype for t in imported.weights])
    return finish(imported, "<flax params>", name or "flax", X, None, DEFAULT_MAX_BYTES,
                   {"source_file": "<flax params>"})


def from_torch(module: Any, X: Any = None, *, name: str | None = None, fold_batchnorm: bool = False) -> Case:
    """An exact case from a PyTorch module and a sample; forward-checked.

    A ReLU MLP (``Linear`` with bias, ``ReLU``, ...) comes out as an ``exactident-case/1`` case: an
    ``nn.Sequential`` of built-in layers is read layer by layer
    (:mod:`~exactident.io.importers.torch_module`); any other module (a subclass with its own
    ``forward``: ``F.relu``, ``nn.ModuleList`` loops, ``x.view``) is traced with ``torch.fx``
    (:mod:`~exactident.io.importers.torch_trace`).  Any other supported network (residual ``+``,
    ``LeakyReLU``, ``PReLU``, ``Conv1d``/``Conv2d``, average pooling, ``Linear`` without bias) is read
    as a layer graph (:mod:`~exactident.io.importers.torch_graph`) into an ``exactident-case/2``
    case; its input shape is the sample's ``X.shape[1:]``.  The module is then run by PyTorch on the
    sample (in its dtype, eval mode, no gradients; 8 seeded random inputs when ``X`` is None) and
    its outputs, up to the logits, must match the imported network's within the rounding bound
    (``provenance["forward_check"]``).

    Parameters
    ----------
    fold_batchnorm : bool
        Fold ``BatchNorm1d``/``2d`` into the preceding layer in float64 (refused otherwise: the exact
        fold involves ``sqrt(var + eps)``); the provenance says the analysed network differs from
        the framework's by that rounding.

    Raises
    ------
    CaseFormatError
        An unsupported layer or op (naming the module path and op, and why), shapes that do not
        chain (naming the layer), a forward check that fails (naming the sample and output).
    """
    from exactident.io.importers.graph_case import document_case

    doc = torch_document(module, X, name=name, fold_batchnorm=fold_batchnorm)
    if isinstance(doc, Case):
        return doc
    return document_case(doc, str(doc["provenance"]["source_file"]))


def _torch_plain(module: Any, X: Any, name: str | None, rounding: dict[str, str]) -> Case | None:
    """Today's ``exactident-case/1`` import of a ReLU MLP, or None (read it as a graph).  A ``Linear`` without
    bias in such a chain is read as before: a zero bias of the format-1 case (a free parameter there)."""
    from exactident.io.importers.torch_module import is_plain_sequential, read_torch_module
    from exactident.io.importers.torch_trace import read_traced_module

    read = read_torch_module if is_plain_sequential(module) else read_traced_module
    try:
        imported, where, logits = read(module)
    except CaseFormatError:
        if not hasattr(module, "modules") or not callable(module):
            raise  # not a module at all
        return None

    def checker(net: Network, Xf: np.ndarray, sample_dtype: str | None) -> dict[str, str]:
        from exactident.io.importers.reference import torch_forward_check

        return torch_forward_check(module, logits, imported, net, Xf, where)

    return finish(imported, where, name or type(module).__name__, X, None, DEFAULT_MAX_BYTES,
                   {"source_file": where, **rounding}, checker=checker)


def torch_document(module: Any, X: Any = None, *, name: str | None = None,
                   fold_batchnorm: bool = False) -> Case | dict[str, Any]:
    """:func:`from_torch`'s result before the case reader: a format-1 :class:`~exactident.io.case.Case` for a
    ReLU MLP, else the ``exactident-case/2`` dict (see :func:`from_torch`)."""
    from exactident.io.importers.graph_case import finish_document, require_sample
    from exactident.io.importers.torch_graph import read_torch_graph, torch_reference
    from exactident.io.importers.torch_trace import module_view

    X, rounding = module_view(module, X)
    plain = _torch_plain(module, X, name, rounding)
    if plain is not None:
        return plain
    cls = type(module)
    if X is None:  # trace on 8 seeded inputs when the first layer tells the input width; the case has no sample
        first = next((m for m in module.modules() if type(m).__name__ in ("Linear", "Conv1d", "Conv2d")), None)
        if first is None:
            raise CaseFormatError(f"<{cls.__module__}.{cls.__name__}>", "forward", "no Linear or convolution layer")
        if type(first).__name__ != "Linear":
            require_sample(X, f"<{cls.__module__}.{cls.__name__}>")
        Xa = np.random.default_rng(0).standard_normal((8, int(first.in_features)))
    else:
        Xa = X.detach().cpu().numpy() if hasattr(X, "detach") else np.asarray(X)
    graph, logits, where = read_torch_graph(module, Xa, fold_batchnorm)
    ref = torch_reference(module, logits, tuple(Xa.shape[1:]), where)
    doc = finish_document(graph, name or cls.__name__, None if X is None else Xa, ref,
                          {"source_file": where, "format": "torch-module", **rounding})
    return plain_case(doc, where) if graph.plain_chain() else doc
