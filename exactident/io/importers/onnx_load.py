"""Loading an ONNX file safely, with the external data ``torch.onnx.export`` writes beside it.

Since PyTorch 2.9 the default exporter (``dynamo=True``) stores every tensor over
about 1 KB in a sibling file ``model.onnx.data``.  A tensor's ``external_data``
gives a ``location`` (a file name), an ``offset`` and a ``length``.  The data is
read only when the location is a relative path inside the model's own folder:
no absolute path, no ``..`` component, no symlink resolving outside the folder,
a regular file within the size limit, ``offset + length`` within the file and
``length`` equal to the tensor's declared size (and the sum of all external
tensors within the limit).  Anything else is a one-line error naming the
tensor and the reason.  The bytes are then embedded in the in-memory model
(``raw_data``), which ``onnx.checker`` validates as a whole.  Needs the ``onnx`` extra.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from exactident.errors import CaseFormatError, UnsupportedCaseError
from exactident.io.importers.common import check_file_size, clean_message, read_limited

__all__ = ["data_input", "load_onnx", "np_dtype", "onnx_module"]


def onnx_module() -> Any:
    """The ``onnx`` package, or a one-line error saying which extra to install."""
    try:
        import onnx
    except ImportError:
        raise UnsupportedCaseError("reading ONNX files needs onnx (pip install 'exactident[onnx]')") from None
    return onnx


def np_dtype(onnx: Any, elem: int) -> Any:
    """The numpy dtype of an ONNX element type (bfloat16 as ``ml_dtypes.bfloat16``)."""
    if elem == onnx.TensorProto.BFLOAT16:
        import ml_dtypes  # an onnx dependency

        return ml_dtypes.bfloat16
    return onnx.helper.tensor_dtype_to_np_dtype(elem)


def _external_file(path: str, where: str, location: str) -> str:
    """The external data file of one tensor, when it lies inside the model's folder."""
    folder = os.path.dirname(os.path.abspath(path))
    if not location:
        raise CaseFormatError(path, where, "external data without a location")
    parts = location.replace("\\", "/").split("/")
    if os.path.isabs(location) or location.startswith(("/", "\\")) or (len(location) > 1 and location[1] == ":"):
        raise CaseFormatError(path, where, f"external data location {location!r} is an absolute path (refused: only "
                                           "files in the model's own folder are read)")
    if ".." in parts:
        raise CaseFormatError(path, where, f"external data location {location!r} leaves the model's folder "
                                           "(refused: '..' in the path)")
    target = os.path.join(folder, *parts)
    real, real_folder = os.path.realpath(target), os.path.realpath(folder)
    if os.path.commonpath([real, real_folder]) != real_folder:
        raise CaseFormatError(path, where, f"external data location {location!r} is a link that leaves the model's "
                                           "folder (refused)")
    return target


def _embed_external(model: Any, onnx: Any, path: str, max_bytes: int) -> None:
    total = 0
    for t in model.graph.initializer:
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        where = f"initializer {t.name!r}"
        info = {e.key: e.value for e in t.external_data}
        target = _external_file(path, where, info.get("location", ""))
        size = check_file_size(target, max_bytes)
        try:
            offset = int(info.get("offset", 0))
            length = int(info["length"]) if "length" in info else size - offset
        except ValueError:
            raise CaseFormatError(path, where, f"external data offset/length not integers ({info})") from None
        if t.data_type in (onnx.TensorProto.STRING, onnx.TensorProto.UNDEFINED):
            raise CaseFormatError(path, where, "external data of a non-numeric tensor")
        item = np.dtype(np_dtype(onnx, t.data_type)).itemsize
        expected = int(np.prod([int(d) for d in t.dims], dtype=np.int64)) * item
        if offset < 0 or length < 0 or offset + length > size:
            raise CaseFormatError(path, where, f"external data offset {offset} + length {length} is past the end "
                                               f"of {info['location']!r} ({size} bytes)")
        if length != expected:
            raise CaseFormatError(path, where, f"external data length {length} is not the tensor's size {expected} "
                                               f"bytes (shape {tuple(int(d) for d in t.dims)})")
        total += length
        if total > max_bytes:
            raise CaseFormatError(path, where, f"external data over the limit of {max_bytes} bytes in all (raise it "
                                               "with --max-bytes / max_bytes=)")
        try:
            with open(target, "rb") as f:
                f.seek(offset)
                raw = f.read(length)
        except OSError as exc:
            raise CaseFormatError(path, where, f"cannot read external data ({exc.strerror or exc})") from None
        if len(raw) != length:
            raise CaseFormatError(path, where, "external data file shorter than declared")
        t.raw_data = raw
        t.data_location = onnx.TensorProto.DEFAULT
        del t.external_data[:]


def load_onnx(path: str, max_bytes: int) -> Any:
    """Read, embed the external data of (see the module docstring), and validate an ONNX model.

    Raises
    ------
    UnsupportedCaseError
        onnx is not installed.
    CaseFormatError
        Over the size limit, corrupted or invalid, external data outside the model's folder,
        past its file's end, or of the wrong size (naming the tensor and the reason).
    """
    onnx = onnx_module()
    data = read_limited(path, max_bytes)
    try:
        model = onnx.load_model_from_string(data)
    except Exception as exc:  # DecodeError: damaged or not ONNX
        raise CaseFormatError(path, "", f"corrupted or not a valid ONNX model ({clean_message(exc)})") from None
    _embed_external(model, onnx, path, max_bytes)
    try:
        onnx.checker.check_model(model)
    except Exception as exc:  # ValidationError
        raise CaseFormatError(path, "", f"corrupted or not a valid ONNX model ({clean_message(exc)})") from None
    return model


def data_input(graph: Any, consts: Any, path: str) -> tuple[Any, Any, list[int | None]]:
    """The graph's one data input (not an initializer): ``(input, its tensor type, its dims)`` (None: symbolic).

    Raises
    ------
    CaseFormatError
        Not exactly one data input and one output (one line naming the file).
    """
    inputs = [i for i in graph.input if i.name not in consts]
    if len(inputs) != 1 or len(graph.output) != 1:
        raise CaseFormatError(path, "graph", f"expected one data input and one output, found {len(inputs)} "
                                             f"and {len(graph.output)}")
    inp = inputs[0]
    ttype = inp.type.tensor_type
    return inp, ttype, [d.dim_value if d.HasField("dim_value") else None for d in ttype.shape.dim]
