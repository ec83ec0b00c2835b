"""From a model (file or object) and a sample to an exact :class:`~exactident.io.case.Case`.

:func:`import_model` detects the file's format (extension, then content),
reads its layers with the format's module, builds the exact network (shapes
checked along the chain, naming the layer), reads the sample, cross-checks
ONNX models against ``onnx.reference``, and records the provenance: source
file, format, sha256, weight dtype, dropped output activation, sample file.
:func:`finish` is the step every importer ends with (the in-memory models' too:
:mod:`~exactident.io.importers.objects`).
:func:`as_case` is what :func:`exactident.check.check` calls on a path.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import flint
import numpy as np

from exactident.errors import CaseFormatError
from exactident.io.case import Case, load_case
from exactident.io.importers.arrays import sample_rows
from exactident.io.importers.common import (
    DEFAULT_MAX_BYTES,
    Imported,
    check_file_size,
    framework_names,
    looks_like_pickle,
    open_zip,
    sha256_file,
)
from exactident.io.importers.formats import FORMATS, PICKLE_EXTENSIONS
from exactident.io.importers.sample import load_sample
from exactident.io.limits import check_regular
from exactident.model.network import Network

__all__ = [
    "FORMATS",
    "as_case",
    "detect_format",
    "finish",
    "import_document",
    "import_model",
    "plain_case",
]



def detect_format(path: str) -> str:
    """The format of a model file, from its extension, else from its first bytes.

    Raises
    ------
    CaseFormatError
        A pickle (``.pkl``, ``.joblib``, ... or a pickle stream outside a PyTorch file): refused,
        never unpickled; or a format that cannot be told (use ``--format``).
    """
    ext = os.path.splitext(path)[1].lower()
    if ext in PICKLE_EXTENSIONS:
        raise CaseFormatError(path, "", "pickle files are never loaded (unpickling runs code); export the model "
                                        "to ONNX, or call exactident.from_sklearn(model, X) in Python")
    for fmt, exts in FORMATS.items():
        if ext in exts:
            return fmt
    check_regular(path)  # a FIFO is refused unopened (opening it would wait for a writer)
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError as exc:
        raise CaseFormatError(path, "", f"cannot read file ({exc.strerror or exc})") from None
    if looks_like_pickle(head):
        raise CaseFormatError(path, "", "file is a pickle: refused, never unpickled")
    if head.startswith(b"\x89HDF\r\n\x1a\n"):
        return "keras"
    if head.startswith(b"PK"):
        import zipfile

        try:
            with open(path, "rb") as fh, open_zip(path, fh) as z:
                names = z.namelist()
        except (zipfile.BadZipFile, OSError):
            names = []
        if "config.json" in names:
            return "keras"
        if any(n.endswith("data.pkl") for n in names):
            return "torch"
        if names and all(n.endswith(".npy") for n in names):
            return "npz"
    if len(head) >= 9 and head[8:9] == b"{":
        return "safetensors"
    raise CaseFormatError(path, "", f"cannot tell the model format (extension {ext or 'none'!r}); "
                                    f"give --format ({', '.join(FORMATS)})")


def _read(fmt: str, path: str, max_bytes: int, config: str | None = None) -> tuple[Imported, Any]:
    if config is not None and fmt != "keras":
        raise CaseFormatError(path, "--config", f"a model config is for Keras weights files, not {fmt}")
    if fmt == "onnx":
        from exactident.io.importers.onnx_model import read_onnx

        graph = read_onnx(path, max_bytes)
        return graph.imported, graph
    if fmt == "torch":
        from exactident.io.importers.torch_state_dict import read_torch_state_dict

        return read_torch_state_dict(path, max_bytes), None
    if fmt == "safetensors":
        from exactident.io.importers.safetensors_file import read_safetensors

        return read_safetensors(path, max_bytes), None
    if fmt == "keras":
        from exactident.io.importers.keras_file import read_keras

        return read_keras(path, max_bytes, config), None
    if fmt == "npz":
        from exactident.io.importers.npz_file import read_npz

        return read_npz(path, max_bytes), None
    raise CaseFormatError(path, "--format", f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")


def _importer() -> str:
    from exactident import __version__

    return f"exactident {__version__}"


def _sample(sample: Any, n_inputs: int, rows: slice | None, max_bytes: int,
            source: str) -> tuple[list[list[flint.fmpq]], dict[str, str]]:
    if sample is None:
        return [], {}
    if isinstance(sample, (str, os.PathLike)):
        s = load_sample(sample, n_inputs, rows, max_bytes=max_bytes)
        return s.X, s.provenance()
    if rows is not None:
        sample = np.asarray(sample)[rows] if not isinstance(sample, list) else sample[rows]
    X, dtype = sample_rows(sample, source, "X", n_inputs)
    prov = {"sample_dtype": dtype}
    if rows is not None:
        prov["sample_rows"] = f"{rows.start or 0}:{'' if rows.stop is None else rows.stop}"
    return X, prov


def _float_sample(X: list[list[flint.fmpq]], n_inputs: int) -> np.ndarray:
    return np.array([[int(v.p) / int(v.q) for v in row] for row in X], dtype=np.float64).reshape(len(X), n_inputs)


#: A forward check run by :func:`finish`: (network, float sample, sample dtype) -> provenance entries.
Checker = Callable[[Network, np.ndarray, "str | None"], dict[str, str]]


#: The inputs a model sees: float64 sample ``(n, N_0)`` -> (its roundings to the model's dtype as float64, dtype name).
View = Callable[[np.ndarray], "tuple[np.ndarray, str]"]


def finish(imported: Imported, source: str, name: str, sample: Any, rows: slice | None, max_bytes: int,
            provenance: dict[str, Any], graph: Any = None, checker: Checker | None = None,
            view: View | None = None) -> Case:
    """The step every importer ends with: the exact network, the sample as the model sees it, the forward checks.

    Parameters
    ----------
    imported : Imported
        The layers read by a format's module (weights as float arrays, read exactly).
    source, name : str
        The file (or ``<object>``) named in errors and the provenance; the case name.
    sample : array-like ``(n, N_0)``, path or None
        The sample, read exactly (a float is its exact binary value); ``rows`` selects rows of it.
    provenance : dict
        Entries the importer already knows (source file, format, rounding of the sample).
    graph, checker, view : optional
        The ONNX graph to cross-check against ``onnx.reference``; a framework forward check
        (``Checker``); the inputs the model sees (``View``: a float64 sample rounded to the
        model's dtype, whose exact values are then analysed).

    Returns
    -------
    Case
        Format 1, with ``provenance`` recording every check and its outcome.

    Raises
    ------
    CaseFormatError
        Shapes that do not chain (naming the layer), a bad sample (naming the file and row), a forward
        check that fails (naming the sample and output).
    """
    net = imported.network(source)
    X, sample_prov = _sample(sample, net.widths[0], rows, max_bytes, source)
    if graph is not None:  # an ONNX model computes in its input's dtype
        seen_dtype = np.dtype(graph.input_dtype)
        view = view or (lambda Xf: (Xf.astype(seen_dtype).astype(np.float64), seen_dtype.name))
    if view is not None and X:  # the sample analysed is the one the model sees (sample.as_seen)
        from exactident.io.importers.sample import as_seen

        Xf = _float_sample(X, net.widths[0])
        Xin, seen = view(Xf)
        X, rounding = as_seen(X, Xf, Xin, sample_prov.get("sample_dtype"), seen)
        sample_prov = {**sample_prov, **rounding}
    provenance = {**provenance, "format": imported.fmt, "weight_dtype": imported.weight_dtype}
    if imported.dropped_output_activation:
        provenance["dropped_output_activation"] = imported.dropped_output_activation
    names = framework_names(imported)
    if names:
        provenance["parameter_names"] = names
    provenance.update(sample_prov)
    if graph is not None:
        from exactident.io.importers.onnx_model import crosscheck

        Xf = _float_sample(X, net.widths[0])
        if not X:  # no sample: cross-check on a few seeded random inputs instead
            Xf = np.random.default_rng(0).standard_normal((8, net.widths[0]))
        provenance["crosscheck"] = crosscheck(graph, net, Xf, source)
    if checker is not None:
        provenance.update(checker(net, _float_sample(X, net.widths[0]), sample_prov.get("sample_dtype")))
    if imported.forward is not None:
        # the framework's own outputs against the imported network: on the sample, else on seeded inputs
        Xf = _float_sample(X, net.widths[0]) if X else np.random.default_rng(0).standard_normal((8, net.widths[0]))
        provenance["forward_check"] = imported.forward(net, Xf)
    provenance["importer"] = _importer()
    dropped = imported.dropped_output_activation
    not_run = provenance.get("forward_check", "") if provenance.get("forward_check", "").startswith("not run") else ""
    description = (f"Imported from {os.path.basename(source)} ({imported.fmt}, weights {imported.weight_dtype}) "
                   "with every float read as its exact binary value"
                   + (f"; the output {dropped} was dropped: the network analysed ends at the logits" if dropped
                      else "") + (f"; forward check {not_run}" if not_run else "") + ".")
    return Case(name=name, network=net, X=X, description=description, source=source, provenance=provenance)


def import_model(path: str | os.PathLike[str], sample: Any = None, *, sample_rows: slice | None = None,
                 fmt: str | None = None, name: str | None = None, max_bytes: int | None = None,
                 reference: Any = None, config: str | os.PathLike[str] | None = None,
                 fold_batchnorm: bool = False, assume_relu_mlp: bool = False) -> Case:
    """Read a model file and a sample into an exact case.

    Parameters
    ----------
    path : str or path
        ``.onnx``, ``.pt``/``.pth`` (state dict), ``.safetensors``, ``.keras``/``.h5``, ``.npz``.
    sample : path, array-like or None
        ``.npy``/``.npz``/``.csv`` file, or an array ``(n, N_0)``; None gives an empty sample.
    sample_rows : slice, optional
        Keep only these rows of the sample.
    fmt : str, optional
        Force a format (:data:`~exactident.io.importers.formats.FORMATS`) instead of detecting it.
    name : str, optional
        Case name (default: the file's stem).
    max_bytes : int, optional
        Refuse model and sample files (and tensors) larger than this (default 64 MiB).
    reference : path, torch.nn.Module or array-like, optional
        For a weight-only file (state dict, safetensors, ``.npz``): the model to check the assumed
        ``Linear -> ReLU`` chain against, by a forward check on the sample: an ``.onnx`` file (run
        with ``onnx.reference``), a module, or the model's outputs on the sample (``.npy`` or an
        array ``(n, N_L)``, before any softmax).  A weight-only file needs a reference or
        ``assume_relu_mlp`` (:mod:`exactident.io.importers.reference`).
    config : str or path, optional
        Keras only: the architecture of a weights-only ``.weights.h5`` file, as JSON from
        ``model.to_json()`` or a ``.keras`` file whose config is used.
    fold_batchnorm : bool
        ONNX/Keras layer graphs: fold ``BatchNormalization`` into the preceding layer in float64
        (refused otherwise); the provenance says the analysed network differs by that rounding.
    assume_relu_mlp : bool
        Your statement that a weight-only file (state dict, safetensors, ``.npz``) is a plain
        ``Linear -> ReLU -> ... -> Linear`` chain (the CLI's ``--assume-relu-mlp``).  Without it, or a
        ``reference``, such a file is refused: the file holds no architecture, and no verdict is given
        on a guess.  With it (and no reference), ``provenance["architecture"]`` records it as your
        assumption.

    Returns
    -------
    Case
        With ``provenance`` (docs/case-format.md): ``exactident-case/1`` for a ReLU MLP, else
        ``exactident-case/2`` (a layer graph, :func:`import_document`).

    Raises
    ------
    CaseFormatError
        One line naming the file and the tensor, node or layer (see docs/import.md); a weight-only
        file with neither ``reference`` nor ``assume_relu_mlp``.
    UnsupportedCaseError
        The optional package the format needs is not installed.
        With a reference: the imported network's outputs differ from it (naming the sample and output).
    InvariantViolation
        An ONNX model's import does not reproduce ``onnx.reference`` (a bug).
    """
    from exactident.io.importers.graph_case import document_case

    doc = import_document(path, sample, sample_rows=sample_rows, fmt=fmt, name=name, max_bytes=max_bytes,
                          reference=reference, config=config, fold_batchnorm=fold_batchnorm,
                          assume_relu_mlp=assume_relu_mlp)
    return doc if isinstance(doc, Case) else document_case(doc, str(path))


def import_document(path: str | os.PathLike[str], sample: Any = None, *, sample_rows: slice | None = None,
                    fmt: str | None = None, name: str | None = None, max_bytes: int | None = None,
                    reference: Any = None, config: str | os.PathLike[str] | None = None,
                    fold_batchnorm: bool = False, assume_relu_mlp: bool = False) -> Case | dict[str, Any]:
    """:func:`import_model`'s result before the case reader: a format-1 :class:`~exactident.io.case.Case` for a
    ReLU MLP, else the ``exactident-case/2`` dict of a layer graph (ONNX and Keras models with skip connections,
    leaky ReLU, PReLU, convolutions, average pooling; see docs/import.md).  Same parameters and errors as
    :func:`import_model`."""
    source = str(path)
    limit = DEFAULT_MAX_BYTES if max_bytes is None else max_bytes
    check_file_size(source, limit)
    fmt = fmt or detect_format(source)
    if (fmt == "onnx" or (fmt == "keras" and zipfile.is_zipfile(source))) and config is None:
        try:
            return _import_plain(source, sample, sample_rows, fmt, name, limit, reference, config)
        except CaseFormatError as plain_error:
            from exactident.io.importers.graph_case import import_graph

            doc = import_graph(source, fmt, sample, sample_rows, name, limit, reference, fold_batchnorm,
                               plain_error)
            return plain_case(doc, source)
    return _import_plain(source, sample, sample_rows, fmt, name, limit, reference, config, assume_relu_mlp)


def _import_plain(source: str, sample: Any, sample_rows: slice | None, fmt: str, name: str | None, limit: int,
                  reference: Any, config: str | os.PathLike[str] | None, assume_relu_mlp: bool = False) -> Case:
    check_file_size(source, limit)  # before detect_format opens it: a FIFO is refused unopened
    fmt = fmt or detect_format(source)
    imported, graph = _read(fmt, source, limit, None if config is None else str(config))
    provenance = {"source_file": source, "sha256": sha256_file(source)}
    if config is not None:
        provenance["config_file"] = str(config)

    def checker(net: Network, X: np.ndarray, sample_dtype: str | None) -> dict[str, str]:
        from exactident.io.importers.reference import check_reference

        return check_reference(imported, net, X, sample_dtype, reference, sample_rows, limit, source,
                               assume_relu_mlp)

    view = None
    params = list(reference.parameters()) if hasattr(reference, "parameters") and callable(reference) else []
    if params:  # a module as reference: the sample analysed is the one it sees
        from exactident.io.importers.torch_trace import module_view

        def view(Xf: np.ndarray) -> tuple[np.ndarray, str]:
            return np.asarray(module_view(reference, Xf)[0], dtype=np.float64), str(params[0].dtype).removeprefix(
                "torch.")

    return finish(imported, source, name or Path(source).stem, sample, sample_rows, limit, provenance, graph,
                   checker, view)


def plain_case(doc: dict[str, Any], source: str) -> Case | dict[str, Any]:
    """A layer graph that turned out a plain ReLU MLP (BatchNorm folded) as the format-1 case; else the dict."""
    from exactident.io.case import parse_case
    from exactident.io.importers.graph_case import plain_document

    layers = doc["layers"]
    plain = len(doc["input_shape"]) == 1 and len(layers) % 2 == 1 and all(
        layer["op"] == ("linear" if i % 2 == 0 else "relu") and layer["inputs"] == [layers[i - 1]["name"] if i else
                                                                                    "input"]
        and (layer["op"] == "relu" or layer["bias"] is not None) for i, layer in enumerate(layers))
    return parse_case(plain_document(doc), source) if plain else doc


def _object_hint(obj: Any) -> str:
    """What to call for a model object given where a case or a path is expected."""
    kinds = [c.__module__.split(".")[0] for c in type(obj).__mro__]
    if "torch" in kinds and hasattr(obj, "parameters"):
        return "; a PyTorch module is imported with exactident.from_torch(module, X), then checked"
    if "sklearn" in kinds:
        return "; a scikit-learn model is imported with exactident.from_sklearn(model, X), then checked"
    if "keras" in kinds:
        return "; save a Keras model with model.save('m.keras') and give the file with sample=X"
    if "flax" in kinds:
        return "; Flax parameters are imported with exactident.from_flax(params, X, reference=...), then checked"
    return ""


def as_case(obj: Any, sample: Any = None, *, sample_rows: slice | None = None,
            max_bytes: int | None = None, reference: Any = None, assume_relu_mlp: bool = False) -> Case:
    """A :class:`~exactident.io.case.Case` as is, a case file (``.json``) loaded, or a model file imported
    with ``sample`` (and ``reference`` / ``assume_relu_mlp`` for a weight-only file, :func:`import_model`).

    Raises
    ------
    CaseFormatError
        A case file given together with a sample; a model file without a sample (field ``sample``:
        the analysis of an empty sample says nothing about the network); a model object (a PyTorch
        module, ...) instead of a case, with the function that imports it; any import error.
    """
    if isinstance(obj, Case):
        if sample is not None:
            raise CaseFormatError(obj.source, "sample", "a Case already holds its sample")
        return obj
    if not isinstance(obj, (str, os.PathLike)):
        raise CaseFormatError("<check>", "case", f"expected a Case or a path, found {type(obj).__name__}"
                                                 + _object_hint(obj))
    if str(obj).lower().endswith((".json", ".json.gz")):
        if sample is not None or sample_rows is not None:
            raise CaseFormatError(str(obj), "--sample", "a case file already holds its sample")
        return load_case(obj)
    if sample is None:
        if os.path.splitext(str(obj))[1].lower() in PICKLE_EXTENSIONS:
            detect_format(str(obj))  # a pickle is refused as such, not asked for a sample
        raise CaseFormatError(str(obj), "sample", "a model file needs a sample: give sample=X (an array (n, N_0), "
                                                  "or a .npy, .npz or .csv file; --sample DATA on the command line)")
    return import_model(obj, sample, sample_rows=sample_rows, max_bytes=max_bytes, reference=reference,
                        assume_relu_mlp=assume_relu_mlp)
