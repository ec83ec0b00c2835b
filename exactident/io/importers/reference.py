"""The framework's own outputs for the forward check, and the assumed architecture of weight-only files.

A state dict, a safetensors file or an ``.npz`` holds weights, not the
network's graph: exactident reads them as a ``Linear -> ReLU -> ... -> Linear``
chain (:data:`ASSUMED`).  That chain is a guess (a leaky-ReLU or residual MLP
saves the same tensors), and no verdict is given on a guess: without a
reference the import is refused (:func:`refuse_guess`) unless the user states
the architecture (:data:`~exactident.io.importers.formats.ASSUME_OPTION`, ``assume_relu_mlp=True`` in Python);
the case's ``provenance["architecture"]`` then records it as the user's
assumption.  With a
reference (``--reference model.onnx`` run by ``onnx.reference``, an
``nn.Module`` run by PyTorch, or the reference outputs ``Y.npy`` of shape
``(n, N_L)``), the imported network's outputs on the sample are compared with
the reference's within the rigorous rounding bound
(:func:`~exactident.io.importers.forward_check.forward_check`): a mismatch is a
one-line error naming the first differing sample and output.  A model as
reference (ONNX, a module) is also read as a graph by its own importer, which
refuses any op other than affine layers and ReLU, and must have exactly the
file's weights: outputs alone cannot tell a ReLU from a leaky ReLU of tiny
slope.

:func:`run_module` runs a PyTorch module (or a function of it) in its own dtype,
in eval mode and without gradients; :func:`~exactident.io.importers.objects.from_torch` uses it for its own
forward check.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from exactident.errors import CaseFormatError
from exactident.io.importers.common import Imported, check_file_size, sha256_file
from exactident.io.importers.formats import ASSUME_OPTION
from exactident.io.importers.forward_check import forward_check
from exactident.model.network import Network

__all__ = ["ASSUMED", "ASSUME_OPTION", "assumed_architecture", "check_reference", "refuse_guess", "run_module",
           "torch_forward_check"]

#: The architecture a weight-only format is read as (format name -> words).
ASSUMED = {
    "torch-state-dict": "Linear→ReLU chain in key order",
    "safetensors": "Linear→ReLU chain in natural key order",
    "npz": "Linear→ReLU chain W1, b1, W2, b2, ... in index order",
}


def _same_network(reference: Network, net: Network, ref_name: str, source: str) -> None:
    """Refuse unless ``reference`` (the model's own graph, read by its importer) has exactly the widths,
    weights and biases of ``net`` (the weight-only file read as the assumed chain).

    Outputs alone cannot tell a ReLU from a leaky ReLU of tiny slope, or a skipped connection of tiny
    weight: a model reference is therefore also read as a graph, which refuses every other op.
    """
    if list(reference.widths) != list(net.widths):
        raise CaseFormatError(source, "--reference", f"{ref_name} has widths {list(reference.widths)}, the file "
                                                     f"read as the assumed chain {list(net.widths)}")
    for l in range(1, net.L + 1):
        if reference.W[l - 1] != net.W[l - 1] or list(reference.b[l - 1]) != list(net.b[l - 1]):
            raise CaseFormatError(source, "--reference", f"{ref_name}: W_{l} or b_{l} differs from the file's "
                                                         "(not the same network)")




#: Layer-graph ops (:mod:`exactident.io.importers.graph`) that a weights file read as a chain cannot express.
_BEYOND_CHAIN = {"add": "a residual (skip) connection", "leaky_relu": "a leaky ReLU", "prelu": "a PReLU",
                 "conv1d": "a convolution", "conv2d": "a convolution", "avgpool1d": "average pooling",
                 "avgpool2d": "average pooling", "maxpool1d": "max pooling", "maxpool2d": "max pooling"}


def _reference_is_a_graph(ops: set[str], ref_name: str, source: str, import_it: str) -> CaseFormatError:
    """The refusal of a reference that is a layer graph beyond the chain a weights file is read as."""
    kinds = ", ".join(dict.fromkeys(_BEYOND_CHAIN[op] for op in sorted(ops) if op in _BEYOND_CHAIN))
    return CaseFormatError(source, "--reference", f"{ref_name} is a network with {kinds}, which a weights file "
                                                  f"(read as a plain Linear→ReLU chain) cannot express: import "
                                                  f"{import_it} directly instead of this file")


def _reference_graph_ops(reference: Any, X: np.ndarray, max_bytes: int) -> set[str] | None:
    """The ops of ``reference`` read as a layer graph (ONNX file or torch module), None if that fails too."""
    try:
        if isinstance(reference, (str, os.PathLike)):
            from exactident.io.importers.onnx_graph import read_onnx_graph

            graph = read_onnx_graph(str(reference), max_bytes).graph
        else:
            from exactident.io.importers.torch_graph import read_torch_graph

            graph = read_torch_graph(reference, X)[0]
    except CaseFormatError:
        return None
    return {layer.op for layer in graph.layers}


def assumed_architecture(fmt: str) -> str:
    """``provenance["architecture"]`` of a weight-only file imported on the user's statement, without a reference."""
    return (f"assumed by the user ({ASSUME_OPTION}, assume_relu_mlp=True): {ASSUMED[fmt]}; not checked against "
            "the model")


def refuse_guess(source: str) -> CaseFormatError:
    """The one-line refusal of a weight-only file given with neither a reference nor the user's statement."""
    ways = ("check it against the model with --reference (an .onnx export or its outputs on the sample as .npy; "
            "reference=module or outputs in Python), ")
    return CaseFormatError(source, "architecture", "a weights file holds no architecture (a leaky-ReLU or "
                                                   "residual network saves the same tensors as a plain ReLU MLP), "
                                                   "and no verdict is given on a guess: import the model itself "
                                                   "(its ONNX export; from_torch(module, X) in Python), "
                                                   f"{ways}or state that it is a plain Linear→ReLU chain with "
                                                   f"{ASSUME_OPTION} (assume_relu_mlp=True in Python)")


def run_module(module: Any, X: np.ndarray, fn: Callable[[Any], Any] | None = None) -> tuple[np.ndarray, np.ndarray,
                                                                                           str]:
    """Run a PyTorch module on ``X`` in its parameters' dtype, in eval mode, under ``torch.no_grad``.

    Parameters
    ----------
    module : torch.nn.Module
    X : float64 ndarray ``(n, N_0)``
    fn : callable, optional
        What to run on the input tensor (default: ``module`` itself), e.g. the module up to its logits.

    Returns
    -------
    (outputs, inputs, dtype)
        The outputs as float64 ``(n, N_L)``, the inputs as the module saw them (rounded to its dtype,
        widened to float64) and the dtype's name.
    """
    import torch

    params = list(module.parameters())
    dtype = params[0].dtype if params else torch.float32
    was = module.training
    module.eval()
    try:
        with torch.no_grad():
            Xt = torch.as_tensor(np.ascontiguousarray(X, dtype=np.float64)).to(dtype)
            Y = (fn or module)(Xt)
    finally:
        module.train(was)
    if not isinstance(Y, torch.Tensor):
        raise CaseFormatError(f"<{type(module).__name__}>", "forward", f"returns {type(Y).__name__}, not a tensor")
    return Y.detach().double().cpu().numpy(), Xt.double().numpy(), str(dtype).removeprefix("torch.")


def _dtypes(*names: str | None) -> list[str]:
    return [d for name in names if name for d in name.split("+")]


def torch_forward_check(module: Any, fn: Callable[[Any], Any] | None, imported: Imported, net: Network,
                        X: np.ndarray, source: str) -> dict[str, str]:
    """:func:`~exactident.io.importers.objects.from_torch`'s forward check: the module run by PyTorch on the
    sample (8 seeded random inputs when it is empty) against the imported network.

    Returns
    -------
    dict
        ``{"forward_check": summary}``.

    Raises
    ------
    CaseFormatError
        The outputs differ past the rounding bound (naming the sample and output).
    """
    if X.shape[0] == 0:
        X = np.random.default_rng(0).standard_normal((8, net.widths[0]))
    Y, Xin, dtype = run_module(module, X, fn)
    return {"forward_check": forward_check(net, Xin, Y, _dtypes(imported.weight_dtype, dtype), source,
                                           f"torch forward of {type(module).__name__}")}


def _module_logits(module: Any) -> Callable[[Any], Any] | None:
    """An ``nn.Sequential`` ending with Softmax/Sigmoid is compared before that layer (the logits)."""
    if type(module).__name__ == "Sequential" and len(module) and type(module[-1]).__name__ in ("Softmax", "Sigmoid"):
        return module[:-1]  # type: ignore[no-any-return,unused-ignore]
    return None


def _onnx_outputs(path: str, X: np.ndarray, max_bytes: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    from exactident.io.importers.onnx_load import load_onnx, np_dtype, onnx_module

    onnx = onnx_module()
    model = load_onnx(path, max_bytes)
    consts = {t.name: t for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in consts]
    if len(inputs) != 1 or len(model.graph.output) != 1:
        raise CaseFormatError(path, "graph", f"expected one data input and one output, found {len(inputs)} and "
                                             f"{len(model.graph.output)}")
    in_dtype = np_dtype(onnx, inputs[0].type.tensor_type.elem_type)
    Xin = X.astype(in_dtype)
    out = model.graph.output[0].name
    last = [n for n in model.graph.node if out in n.output]
    if last and last[0].op_type in ("Softmax", "Sigmoid", "LogSoftmax"):
        out = last[0].input[0]  # compared before the output activation, as the import drops it
    from onnx.reference import ReferenceEvaluator

    try:
        results: Any = ReferenceEvaluator(model).run(None, {inputs[0].name: np.ascontiguousarray(Xin)},
                                                     intermediate=True)
    except Exception as exc:  # the reference evaluator refuses the model or the input
        from exactident.io.importers.common import clean_message

        raise CaseFormatError(path, "", f"onnx.reference cannot run the model on the sample "
                                        f"({type(exc).__name__}: {clean_message(exc)})") from None
    dtypes = [str(np.dtype(in_dtype).name)] + [onnx.helper.tensor_dtype_to_np_dtype(t.data_type).name
                                               for t in consts.values() if t.data_type != onnx.TensorProto.BFLOAT16]
    return np.asarray(results[out]).astype(np.float64), Xin.astype(np.float64), dtypes


def _npy_outputs(path: str, rows: slice | None, max_bytes: int) -> tuple[np.ndarray, str]:
    from exactident.io.importers.sample import load_array

    check_file_size(path, max_bytes)
    Y = load_array(path, max_bytes)
    if rows is not None:
        Y = Y[rows]
    if Y.dtype.kind not in "fiu":
        raise CaseFormatError(path, "", f"reference outputs of dtype {Y.dtype} (expected floats)")
    return Y.astype(np.float64), str(Y.dtype.name)


def check_reference(imported: Imported, net: Network, X: np.ndarray, sample_dtype: str | None, reference: Any,
                    rows: slice | None, max_bytes: int, source: str,
                    assume_relu_mlp: bool = False) -> dict[str, str]:
    """Forward-check an imported weight-only file against ``reference``; the provenance entries it adds.

    Parameters
    ----------
    imported, net : the layers read and the exact network built from them
    X : float64 ndarray ``(n, N_0)``
        The sample (``n = 0``: 8 seeded random inputs for a model reference).
    sample_dtype : str or None
        The sample's stored dtype.
    reference : path, ``torch.nn.Module``, array-like or None
        ``.onnx`` (run by ``onnx.reference``), ``.npy`` (the reference outputs ``(n, N_L)`` on the
        sample, before any softmax), a module, or the outputs as an array.  None: nothing is checked,
        and a weight-only format needs ``assume_relu_mlp``.
    rows : slice or None
        The rows of the sample kept (applied to reference outputs too).
    assume_relu_mlp : bool
        The user's statement that a weight-only file is a plain ``Linear -> ReLU`` chain: without a
        reference, recorded as their assumption (:func:`assumed_architecture`).

    Returns
    -------
    dict
        ``architecture``, and with a reference ``reference`` and ``forward_check``.

    Raises
    ------
    CaseFormatError
        The reference cannot be read or run, or its outputs differ from the imported network's
        (the first differing sample and output named; the architecture is not the assumed one);
        a weight-only file with neither a reference nor ``assume_relu_mlp`` (:func:`refuse_guess`).
    """
    chain = ASSUMED.get(imported.fmt)
    if reference is None:
        if chain and not assume_relu_mlp:
            raise refuse_guess(source)
        return {"architecture": assumed_architecture(imported.fmt)} if chain else {}
    is_onnx = isinstance(reference, (str, os.PathLike)) and str(reference).lower().endswith(".onnx")
    if X.shape[0] == 0 and (is_onnx or hasattr(reference, "parameters")):
        X = np.random.default_rng(0).standard_normal((8, net.widths[0]))
    dtypes = _dtypes(imported.weight_dtype, sample_dtype)
    out: dict[str, str] = {}
    if isinstance(reference, (str, os.PathLike)):
        ref = str(reference)
        ext = os.path.splitext(ref)[1].lower()
        if ext == ".onnx":
            from exactident.io.importers.onnx_model import read_onnx

            # the graph itself: an op other than an affine layer or ReLU is refused, naming it
            try:
                ref_net = read_onnx(ref, max_bytes).imported.network(ref)
            except CaseFormatError:
                ops = _reference_graph_ops(ref, X, max_bytes)
                if ops and ops & set(_BEYOND_CHAIN):
                    raise _reference_is_a_graph(ops, os.path.basename(ref), source,
                                                f"the ONNX model (exactident check {ref} --sample DATA)") from None
                raise
            _same_network(ref_net, net, os.path.basename(ref), source)
            Y, X, more = _onnx_outputs(ref, X, max_bytes)
            dtypes += more
            what = f"onnx.reference on {os.path.basename(ref)}"
        elif ext == ".npy":
            if X.shape[0] == 0:
                raise CaseFormatError(ref, "--reference", "reference outputs need the sample they were computed "
                                                          "on (--sample)")
            Y, ydtype = _npy_outputs(ref, rows, max_bytes)
            dtypes.append(ydtype)
            what = f"the reference outputs {os.path.basename(ref)}"
        else:
            raise CaseFormatError(ref, "--reference", f"unknown reference {ext or '(no extension)'!r} (expected a "
                                                      ".onnx model or the reference outputs as .npy)")
        out = {"reference": ref, "reference_sha256": sha256_file(ref)}
    elif hasattr(reference, "parameters") and callable(reference):
        from exactident.io.importers.torch_module import is_plain_sequential, read_torch_module
        from exactident.io.importers.torch_trace import read_traced_module

        # the module's graph, as from_torch reads it: an op other than Linear/ReLU is refused, naming it
        read = read_torch_module if is_plain_sequential(reference) else read_traced_module
        try:
            traced, where, _ = read(reference)
        except CaseFormatError:
            ops = _reference_graph_ops(reference, X, max_bytes)
            if ops and ops & set(_BEYOND_CHAIN):
                raise _reference_is_a_graph(ops, type(reference).__name__, source,
                                            "the module (exactident.from_torch(module, X))") from None
            raise
        _same_network(traced.network(where), net, type(reference).__name__, source)
        Y, X, dtype = run_module(reference, X, _module_logits(reference))
        dtypes.append(dtype)
        what = f"torch forward of {type(reference).__name__}"
        out = {"reference": f"<{type(reference).__module__}.{type(reference).__name__}>"}
    else:
        Y = np.asarray(reference, dtype=np.float64)
        if rows is not None:
            Y = Y[rows]
        what = "the reference outputs"
        out = {"reference": "<array>"}
    try:
        out["forward_check"] = forward_check(net, X, Y, dtypes, source, what)
    except CaseFormatError as exc:
        if chain:
            raise CaseFormatError(source, exc.field, f"{exc.message}: the model is not the assumed {chain}") from None
        raise
    model_ref = is_onnx or hasattr(reference, "parameters")
    how = ("checked against the reference's graph (same layers and weights) and by the forward check" if model_ref
           else "its outputs checked against the reference outputs within the rounding bound (outputs alone "
                "cannot tell a ReLU from a leaky ReLU of tiny slope: a model as reference also checks the graph)")
    out["architecture"] = f"{chain}, {how}" if chain else f"as stored in the file, {how}"
    return out
