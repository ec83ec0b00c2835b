"""The parts of case reading that need no :class:`~exactident.io.case.Case`: fields, JSON, folders.

:func:`parse_architecture` reads ``input_shape``, ``layers`` and ``output`` into an
:class:`~exactident.model.architecture.Architecture` (every number exact, every error naming
the JSON path, e.g. ``layers[2].weight[0][1]``); :func:`architecture_to_json` writes it back
with canonical ``"p/q"`` strings.  The shared validators (``provenance``, ``expected``) live
here too, with :func:`~exactident.io.case.read_json` (exact decimals, size limits) and the case
files of a folder (:func:`~exactident.io.case.case_files`), so :mod:`exactident.io.case` stays
one short reader for both formats (docs/case-format.md).
"""

from __future__ import annotations

import decimal
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import flint
import numpy as np

from exactident.errors import CaseFormatError
from exactident.io.limits import DEFAULT_LIMITS, DigitBudget, ReadLimits, read_text
from exactident.io.rationals import NonFinite, describe_json_value, format_fmpq, parse_number

if TYPE_CHECKING:  # the layer-graph model is loaded by the functions that read a format-2 case
    from exactident.model.architecture import Architecture, Layer

__all__ = [
    "CASE_FORMAT_2",
    "PROVENANCE_KEYS",
    "SUITE_FORMAT",
    "architecture_to_json",
    "case_files",
    "parse_architecture",
    "read_json",
    "require_case_files",
]

#: The ``format`` field of a suite manifest (``manifest.json``, docs/suites.md): never a case.
SUITE_FORMAT = "exactident-suite/1"
#: The ``format`` field of a case file holding a layer graph (docs/case-format.md, format 2).
CASE_FORMAT_2 = "exactident-case/2"
#: Keys of the optional ``provenance`` object (docs/case-format.md), written by the importers.
PROVENANCE_KEYS = ("source_file", "config_file", "format", "sha256", "weight_dtype", "dropped_output_activation",
                   "sample_file", "sample_sha256", "sample_dtype", "sample_rows", "sample_transform", "sample_rounding",
                   "crosscheck",
                   "importer", "architecture", "forward_check", "reference", "reference_sha256", "parameter_names")
_PARAMETER_KEY = re.compile(r"[Wb]_[1-9][0-9]*")
_WEIGHT_AXES = {"linear": 2, "conv1d": 3, "conv2d": 4, "prelu": 1}
_LAYER_KEYS = ("name", "op", "inputs")


def _json_int(text: str) -> int | decimal.Decimal:
    # Python refuses int(str) beyond 4300 digits; Decimal keeps any length exactly
    # and parse_number then applies the project's own digit limit with the field name.
    return int(text) if len(text) < 4000 else decimal.Decimal(text)


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(f"duplicate key {key!r} in one object")
        out[key] = value
    return out


def read_json(path: str | os.PathLike[str], limits: ReadLimits | None = None) -> Any:
    """Parse a JSON file with decimals kept exact (``decimal.Decimal``), size-limited.

    Parameters
    ----------
    path : path-like
        A regular file of UTF-8 text (a leading byte order mark is dropped), possibly
        gzip-compressed: at most ``limits.max_bytes + 1`` bytes are read, and as many
        decompressed (:func:`exactident.io.limits.read_text`).
    limits : ReadLimits, optional
        Default :data:`exactident.io.limits.DEFAULT_LIMITS`.

    Raises
    ------
    CaseFormatError
        If the file cannot be read, is larger than the limit, is not UTF-8 JSON,
        repeats a key in one object, or nests too deeply.  ``NaN``/``Infinity``
        tokens are kept as :class:`~exactident.io.rationals.NonFinite` so the
        error can name the field.
    """
    source = str(path)
    text = read_text(path, (limits or DEFAULT_LIMITS).max_bytes)  # gunzipped if gzip, BOM dropped
    try:
        return json.loads(text, parse_float=decimal.Decimal, parse_int=_json_int,
                          parse_constant=NonFinite, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise CaseFormatError(source, "", f"not valid JSON ({where}: {exc.msg})") from None
    except _DuplicateKey as exc:
        raise CaseFormatError(source, "", f"not valid JSON for exactident ({exc})") from None
    except RecursionError:
        raise CaseFormatError(source, "", "not valid JSON (nested too deeply)") from None


def _list(value: Any, source: str, where: str, length: int | None = None, what: str = "a list") -> list[Any]:
    if not isinstance(value, list):
        raise CaseFormatError(source, where, f"expected {what}, found {describe_json_value(value)}")
    if length is not None and len(value) != length:
        raise CaseFormatError(source, where, f"expected {length} entries, found {len(value)}")
    return value


def _is_text(value: Any) -> bool:
    # A bare JSON NaN/Infinity decodes to NonFinite (a str subclass, so numbers can name their
    # field); it is not text where a string is expected.
    return isinstance(value, str) and not isinstance(value, NonFinite)


def _ints(value: Any, source: str, where: str, low: int, length: int | None = None) -> tuple[int, ...]:
    items = _list(value, source, where, length, "a list of integers")
    for i, v in enumerate(items):
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            kind = "a positive integer" if low > 0 else "a non-negative integer"
            raise CaseFormatError(source, f"{where}[{i}]", f"expected {kind}, found {describe_json_value(v)}")
    return tuple(items)


def _array(value: Any, source: str, where: str, ndim: int, budget: DigitBudget) -> np.ndarray:
    """A rectangular nested list of ``ndim`` axes of numbers, as an object array of fmpq."""
    shape: list[int] = []
    node = value
    for axis in range(ndim):
        items = _list(node, source, where + "[0]" * axis, None, f"a list ({ndim - axis} nested axes)")
        if not items:
            raise CaseFormatError(source, where + "[0]" * axis, "expected a non-empty list")
        shape.append(len(items))
        node = items[0]
    flat: list[flint.fmpq] = []

    def walk(node: Any, axis: int, at: str) -> None:
        if axis == ndim:
            flat.append(parse_number(node, source, at, budget))
            return
        what = f"a list of {shape[axis]} {'numbers' if axis == ndim - 1 else 'lists'}"
        for i, v in enumerate(_list(node, source, at, shape[axis], what)):
            walk(v, axis + 1, f"{at}[{i}]")

    walk(value, 0, where)
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(shape)


def _layer(obj: Any, source: str, where: str, budget: DigitBudget) -> Layer:
    from exactident.model.architecture import OPS, Layer, unknown_op_message

    if not isinstance(obj, dict):
        raise CaseFormatError(source, where, f"expected an object, found {describe_json_value(obj)}")
    for key in _LAYER_KEYS:
        if key not in obj:
            raise CaseFormatError(source, f"{where}.{key}", "missing required field")
    op = obj["op"]
    if not _is_text(op) or op not in OPS:
        what = unknown_op_message(op) if _is_text(op) else f"expected an op name, found {describe_json_value(op)}"
        raise CaseFormatError(source, f"{where}.op", what)
    required, optional = OPS[op]
    for key in obj:
        if key not in _LAYER_KEYS + required + optional:
            allowed = ", ".join(_LAYER_KEYS + required + optional)
            raise CaseFormatError(source, f"{where}.{key}", f"unknown field for {op} (allowed: {allowed})")
    for key in required:
        if key not in obj:
            raise CaseFormatError(source, f"{where}.{key}", "missing required field")
    name = obj["name"]
    if not _is_text(name):
        raise CaseFormatError(source, f"{where}.name", f"expected a string, found {describe_json_value(name)}")
    inputs = _list(obj["inputs"], source, f"{where}.inputs", None, "a list of layer names")
    for i, v in enumerate(inputs):
        if not _is_text(v):
            raise CaseFormatError(source, f"{where}.inputs[{i}]", f"expected a string, found {describe_json_value(v)}")
    layer = Layer(name, op, tuple(inputs))
    if "weight" in obj:
        layer.weight = _array(obj["weight"], source, f"{where}.weight", _WEIGHT_AXES[op], budget)
    if obj.get("bias") is not None:
        layer.bias = _array(obj["bias"], source, f"{where}.bias", 1, budget)
    if "negative_slope" in obj:
        layer.negative_slope = parse_number(obj["negative_slope"], source, f"{where}.negative_slope", budget)
    axes = 1 if op.endswith("1d") else 2
    for key, low in (("kernel_size", 1), ("stride", 1), ("padding", 0), ("dilation", 1)):
        if key in obj:
            length: int | None = axes
            if op.startswith("maxpool") and key == "padding":  # symmetric, or every begin then every end
                length = len(_list(obj[key], source, f"{where}.{key}", None, "a list of integers"))
                if length not in (axes, 2 * axes):
                    raise CaseFormatError(source, f"{where}.{key}", f"expected {axes} entries (both sides) or "
                                                                    f"{2 * axes} (begins, then ends), found {length}")
            setattr(layer, key, _ints(obj[key], source, f"{where}.{key}", low, length))
    if "ceil_mode" in obj:
        if not isinstance(obj["ceil_mode"], bool):
            raise CaseFormatError(source, f"{where}.ceil_mode", f"expected true or false, found "
                                                                f"{describe_json_value(obj['ceil_mode'])}")
        layer.ceil_mode = obj["ceil_mode"]
    if "out_channels" in obj:
        n = _ints([obj["out_channels"]], source, f"{where}.out_channels", 1)[0]
        if layer.weight is not None and n != layer.weight.shape[0]:
            raise CaseFormatError(source, f"{where}.out_channels",
                                  f"{n} differs from the weight's {layer.weight.shape[0]} output channels (axis 0)")
    return layer


def parse_architecture(obj: dict[str, Any], source: str, budget: DigitBudget) -> Architecture:
    """``input_shape``, ``layers``, ``output`` of a format-2 case, validated.

    Raises
    ------
    CaseFormatError
        Naming ``source`` and the JSON path (``layers[2].weight[0][1]``, ``layers[3].stride``).
    """
    from exactident.model.architecture import Architecture

    shape = _ints(obj["input_shape"], source, "input_shape", 1)
    if not 1 <= len(shape) <= 3:
        raise CaseFormatError(source, "input_shape", f"expected 1 to 3 axes ((N,), (C, L), (C, H, W)), "
                                                     f"found {len(shape)}")
    layers = [_layer(v, source, f"layers[{i}]", budget)
              for i, v in enumerate(_list(obj["layers"], source, "layers", None, "a list of layers"))]
    if not layers:
        raise CaseFormatError(source, "layers", "expected at least one layer")
    output = obj["output"]
    if not _is_text(output):
        raise CaseFormatError(source, "output", f"expected a layer name, found {describe_json_value(output)}")
    return Architecture(shape, layers, output, source=source)


def _nested(arr: np.ndarray) -> Any:
    if arr.ndim == 1:
        return [format_fmpq(v) for v in arr]
    return [_nested(a) for a in arr]


def architecture_to_json(arch: Architecture) -> dict[str, Any]:
    """``{"input_shape": ..., "layers": [...], "output": ...}`` with canonical numbers and defaults written."""
    layers = []
    for layer in arch.layers:
        out: dict[str, Any] = {"name": layer.name, "op": layer.op, "inputs": list(layer.inputs)}
        if layer.op.startswith("conv") and layer.weight is not None:
            out["out_channels"] = int(layer.weight.shape[0])
        if layer.kernel_size:
            out.update(kernel_size=list(layer.kernel_size), stride=list(layer.stride), padding=list(layer.padding))
        if layer.op.startswith("maxpool"):
            out.update(dilation=list(layer.dilation), ceil_mode=layer.ceil_mode)
        if layer.weight is not None:
            out["weight"] = _nested(layer.weight)
        if layer.op in ("linear", "conv1d", "conv2d"):
            out["bias"] = None if layer.bias is None else _nested(layer.bias)
        if layer.negative_slope is not None:
            out["negative_slope"] = format_fmpq(layer.negative_slope)
        layers.append(out)
    return {"input_shape": list(arch.input_shape), "layers": layers, "output": arch.output}


def parameter_names(value: Any, source: str) -> None:
    """``provenance.parameter_names``: an object ``{"W_1": "fc1.weight[i,j]", "b_1": "fc1.bias[i]", ...}``."""
    if not isinstance(value, dict):
        raise CaseFormatError(source, "provenance.parameter_names", f"expected an object, found "
                                                                    f"{describe_json_value(value)}")
    for key, v in value.items():
        if not _PARAMETER_KEY.fullmatch(key):
            raise CaseFormatError(source, f"provenance.parameter_names.{key}", "expected a key W_l or b_l")
        if not _is_text(v):
            raise CaseFormatError(source, f"provenance.parameter_names.{key}",
                                  f"expected a string, found {describe_json_value(v)}")


def provenance(value: Any, source: str) -> dict[str, Any] | None:
    """The validated ``provenance`` object (string values, :data:`PROVENANCE_KEYS`), or None."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise CaseFormatError(source, "provenance", f"expected an object, found {describe_json_value(value)}")
    for key, v in value.items():
        if key not in PROVENANCE_KEYS:
            raise CaseFormatError(source, f"provenance.{key}",
                                  f"unknown field (allowed: {', '.join(PROVENANCE_KEYS)})")
        if key == "parameter_names":
            parameter_names(v, source)
        elif not _is_text(v):
            raise CaseFormatError(source, f"provenance.{key}", f"expected a string, found {describe_json_value(v)}")
    return dict(value)


def plain_json(value: Any) -> Any:
    """Decimals in ``expected`` become exact strings (never floats)."""
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dict):
        return {k: plain_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_json(v) for v in value]
    return value


def _is_suite_manifest(path: Path) -> bool:
    if path.name != "manifest.json" or not path.is_file():
        return False
    try:
        obj = read_json(path)
    except CaseFormatError:
        return False  # not a manifest; loading it as a case will say what is wrong
    return isinstance(obj, dict) and obj.get("format") == SUITE_FORMAT


def case_files(folder: str | os.PathLike[str], recursive: bool = True) -> tuple[list[Path], list[Path]]:
    """The case files of a folder, and the nested suites left out: ``(files, nested)``, in path order.

    A suite folder (``suite run DIR``, ``suite score DIR``; ``recursive``) means
    every ``*.json`` below it (family sub-folders included, hidden names
    skipped) except suite manifests (``manifest.json`` with ``format``
    ``exactident-suite/1``) and the sub-folders holding one: a nested suite is
    run on its own.  ``check DIR`` and ``crosscheck DIR`` (not ``recursive``)
    take the ``*.json`` files of the folder itself, suite manifests left out.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> for rel in ("a.json", "fam/b.json", "inner/manifest.json", "inner/fam/c.json"):
    ...     (root / rel).parent.mkdir(parents=True, exist_ok=True)
    ...     _ = (root / rel).write_text('{"format": "exactident-suite/1"}')
    >>> files, nested = case_files(root)
    >>> [f.relative_to(root).as_posix() for f in files], [n.relative_to(root).as_posix() for n in nested]
    (['a.json', 'fam/b.json'], ['inner'])
    >>> [f.relative_to(root).as_posix() for f in case_files(root, recursive=False)[0]]
    ['a.json']
    """
    root = Path(folder)

    def hidden(p: Path) -> bool:
        return any(part.startswith(".") for part in p.relative_to(root).parts)

    nested = sorted(m.parent for m in root.rglob("manifest.json")
                    if m.parent != root and not hidden(m) and _is_suite_manifest(m))
    files = sorted(p for p in (root.rglob("*.json") if recursive else root.glob("*.json"))
                   if p.is_file() and not hidden(p) and not any(n in p.parents for n in nested)
                   and not (p.name == "manifest.json" and _is_suite_manifest(p)))
    return files, nested


def require_case_files(folder: str | os.PathLike[str], recursive: bool = True) -> list[Path]:
    """:func:`case_files`, refusing a folder without any (naming its nested suites, if it has some).

    Raises
    ------
    CaseFormatError
        The folder holds no case file.
    """
    files, nested = case_files(folder, recursive)
    if not files:
        hint = ("; it holds suites of their own, run each with exactident suite run: "
                + ", ".join(str(n) for n in nested)) if nested else ""
        if not recursive and _is_suite_manifest(Path(folder) / "manifest.json"):
            hint = f"; it is a suite (its cases are in sub-folders): exactident suite run {folder}"
        raise CaseFormatError(str(folder), "", f"folder holds no case files (*.json){hint}")
    return files
