"""From a :class:`~exactident.io.importers.graph.LayerGraph` and a sample to the ``exactident-case/2`` dict.

Shared by the PyTorch, ONNX and Keras graph readers: reads the sample exactly
(rows in C-order of the input shape), runs the forward check (the framework's
own outputs against :func:`~exactident.io.importers.graph_forward.graph_forward_check`
of the dict, within the rounding bound), records the provenance and the
description, and turns the dict into a :class:`~exactident.io.case.Case` when
the case reader knows the format (:func:`document_case`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from exactident.errors import CaseFormatError
from exactident.io.importers.arrays import sample_rows
from exactident.io.importers.graph import LayerGraph
from exactident.io.importers.graph_forward import graph_forward_check

__all__ = ["Reference", "document_case", "finish_document"]

#: The framework's own forward pass: float64 inputs ``(n, prod(input_shape))`` -> (outputs ``(n, N_L)``,
#: the inputs as the framework saw them (rounded to its dtype), the dtype names it computed in, who).
Reference = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, list[str], str]]


def _importer() -> str:
    from exactident import __version__

    return f"exactident {__version__}"


def finish_document(graph: LayerGraph, name: str, X: Any, reference: Reference | None,
                    provenance: dict[str, Any], sample_prov: dict[str, str] | None = None,
                    X_exact: list[list[Any]] | None = None) -> dict[str, Any]:
    """The case dict: exact sample, forward check, provenance, description.

    Parameters
    ----------
    graph : LayerGraph
        With its output set.
    X : array-like ``(n, *input_shape)`` or ``(n, prod(input_shape))``, or None
        The sample (floats read exactly); ignored when ``X_exact`` is given.
    reference : callable or None
        The framework's forward pass (:data:`Reference`); None: ``forward_check`` says it was not run.
    provenance : dict
        Entries known to the reader (``source_file``, ``sha256``, ``format``, ...).
    sample_prov, X_exact
        A sample already read from a file: its provenance entries and exact rows.

    Raises
    ------
    CaseFormatError
        A sample of the wrong size, an output activation, a forward check that fails.
    """
    n_in = int(np.prod(graph.input_shape))
    if X_exact is None:
        sample_prov = {}
        rows: list[list[Any]] = []
        if X is not None:
            arr = X.detach().cpu().numpy() if hasattr(X, "detach") else X
            arr = np.asarray(arr) if not isinstance(arr, list) else np.array(arr, dtype=object)
            if arr.ndim >= 2 and int(np.prod(arr.shape[1:])) == n_in:
                arr = arr.reshape(arr.shape[0], n_in)
            rows, dtype = sample_rows(arr, graph.source, "X", n_in)
            sample_prov = {"sample_dtype": dtype}
        X_exact = rows
    if graph.sample_permutation is not None:  # the framework's layout (channels-last) to the graph's, exactly
        X_exact = [[row[i] for i in graph.sample_permutation] for row in X_exact]
    Xf = np.array([[int(v.p) / int(v.q) for v in row] for row in X_exact], dtype=np.float64).reshape(-1, n_in)
    prov = {**provenance, "weight_dtype": graph.weight_dtype(), **(sample_prov or {})}
    if graph.dropped:
        prov["dropped_output_activation"] = graph.dropped
    if graph.notes:
        prov["architecture"] = "; ".join(graph.notes)
    doc = graph.document(name, X_exact, "", {})
    if reference is not None:
        Xc = Xf if len(Xf) else np.random.default_rng(0).standard_normal((8, n_in))
        Y, Xin, dtypes, who = reference(Xc)
        prov["forward_check"] = graph_forward_check(doc, Xin, Y, dtypes, graph.source, who)
        if len(Xf) and graph.sample_permutation is None and "sample_rounding" not in prov:
            # the sample the framework saw (rounded to its input dtype) is the one analysed
            from exactident.io.importers.sample import as_seen

            seen_rows, rounding = as_seen(X_exact, Xf, Xin, prov.get("sample_dtype"), "+".join(dict.fromkeys(dtypes)))
            if rounding:
                prov.update(rounding)
                doc["sample"] = graph.document(name, seen_rows, "", {})["sample"]
    else:
        prov["forward_check"] = "not run: no framework forward pass available"
    prov["importer"] = _importer()
    ops = sorted({layer["op"] for layer in doc["layers"]})
    dropped = graph.dropped
    not_run = prov["forward_check"] if prov["forward_check"].startswith("not run") else ""
    doc["description"] = (f"Imported from {os.path.basename(graph.source)} ({prov.get('format')}, weights "
                          f"{graph.weight_dtype()}; layers: {', '.join(ops)}) with every float read as its exact "
                          "binary value"
                          + (f"; the output {dropped} was dropped: the network analysed ends at the logits"
                             if dropped else "")
                          + ("; " + "; ".join(graph.notes) if graph.notes else "")
                          + (f"; forward check {not_run}" if not_run else "") + ".")
    doc = {k: doc[k] for k in ("format", "name", "description", "input_shape", "layers", "output", "sample")}
    doc["provenance"] = prov
    return doc


def document_case(doc: dict[str, Any], source: str) -> Any:
    """The dict as a :class:`~exactident.io.case.Case` (through the case reader).

    Raises
    ------
    CaseFormatError
        The case reader does not read ``exactident-case/2`` (an installation without it).
    """
    from exactident.io.case import parse_case

    return parse_case(doc, source)


def require_sample(X: Any, source: str) -> None:
    """A layer graph's input shape comes from the sample: refuse an import without one."""
    if X is None:
        raise CaseFormatError(source, "X", "a sample is needed to read this network (its input shape comes from "
                                           "the sample)")


def import_graph(source: str, fmt: str, sample: Any, rows: slice | None, name: str | None, limit: int,
                 reference: Any, fold_batchnorm: bool, plain_error: CaseFormatError) -> dict[str, Any]:
    """An ONNX or Keras file that is not a plain ReLU MLP, read as a layer graph into the case dict.

    Raises
    ------
    CaseFormatError
        ``plain_error`` when the file is a plain ReLU chain after all (the plain reader's error is
        about something else: the sample, the shapes); else the layer graph's own refusal.
    """
    from pathlib import Path

    from exactident.io.importers.common import sha256_file
    from exactident.io.importers.sample import load_sample

    try:
        if fmt == "onnx":
            from exactident.io.importers.onnx_graph import onnx_graph_reference, read_onnx_graph

            og = read_onnx_graph(source, limit, fold_batchnorm)
            graph, ref = og.graph, onnx_graph_reference(og, source)
        else:
            from exactident.io.importers.keras_graph import read_keras_graph

            graph, ref = read_keras_graph(source, limit, fold_batchnorm)
    except CaseFormatError:
        if not architecture_refusal(plain_error):
            raise plain_error from None  # the chain reader's error is about the file, not the architecture
        raise
    if graph.plain_chain() and not graph.notes:
        raise plain_error
    if reference is not None:
        raise CaseFormatError(source, "--reference", f"is for weight-only files; a {fmt} model is checked against "
                                                     "its own forward pass")
    n_in = int(np.prod(graph.input_shape))
    provenance = {"source_file": source, "sha256": sha256_file(source), "format": fmt}
    stem = name or Path(source).stem
    if isinstance(sample, (str, os.PathLike)):
        s = load_sample(sample, n_in, rows, max_bytes=limit, images=True)
        return finish_document(graph, stem, None, ref, provenance, s.provenance(), s.X)
    if sample is not None and rows is not None:
        sample = np.asarray(sample)[rows]
    return finish_document(graph, stem, sample, ref, provenance)


def plain_document(doc: dict[str, Any]) -> dict[str, Any]:
    """A layer graph that is the plain ``Linear(bias) -> ReLU -> ... -> Linear(bias)`` chain (e.g. after
    folding BatchNorm) as the ``exactident-case/1`` dict: ``widths``, ``weights``, ``biases``."""
    linears = [layer for layer in doc["layers"] if layer["op"] == "linear"]
    widths = [doc["input_shape"][0]] + [len(layer["weight"]) for layer in linears]
    out = {"format": "exactident-case/1", "name": doc["name"], "description": doc["description"], "widths": widths,
           "weights": [layer["weight"] for layer in linears], "biases": [layer["bias"] for layer in linears],
           "sample": doc["sample"]}
    if "provenance" in doc:
        out["provenance"] = doc["provenance"]
    return out


#: Words of the chain readers' refusals that are about the architecture (a layer graph may read it).
_ARCHITECTURE_WORDS = ("unsupported", "linear chain", "single data path", "follows another", "follows a linear",
                       "does not follow", "combines the data", "ends with a ReLU", "output is a Relu", "not flat",
                       "flat input", "Reshape to", "flat data", "reshaped", "transposed", "output activation",
                       "not the end of the data path", "adds a constant", "topology")


def architecture_refusal(exc: CaseFormatError) -> bool:
    """Whether a chain reader refused the file for its architecture (then the layer graph's error is shown);
    else (a weight, a shape, the file itself) the chain reader's error is the precise one."""
    return any(word in exc.message for word in _ARCHITECTURE_WORDS)
