"""Case files ``exactident-case/1`` (docs/case-format.md): read, validate, write.

A case is a network (widths, ``W_l``, ``b_l``) plus a sample ``X`` of shape
``(n, N_0)``, all exact rationals.  Validation happens once, here, at the
edge; every error names the file and the JSON path of the bad field.
Output goes through :func:`~exactident.io.atomic.atomic_write_text` so a failed run never leaves a
half-written file.
"""

from __future__ import annotations

import decimal
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import flint

from exactident.errors import CaseFormatError
from exactident.io.atomic import atomic_write_text
from exactident.io.limits import DEFAULT_LIMITS, DigitBudget, ReadLimits, read_text
from exactident.io.rationals import NonFinite, describe_json_value, format_fmpq, parse_number
from exactident.model.network import Network

__all__ = [
    "CASE_FORMAT",
    "PROVENANCE_KEYS",
    "SUITE_FORMAT",
    "Case",
    "ReadLimits",
    "atomic_write_text",
    "case_files",
    "case_to_json",
    "dump_case",
    "load_case",
    "parse_case",
    "read_json",
    "require_case_files",
    "write_case",
]

#: The ``format`` field of a case file (docs/case-format.md).
CASE_FORMAT = "exactident-case/1"
#: The ``format`` field of a suite manifest (``manifest.json``, docs/suites.md): never a case.
SUITE_FORMAT = "exactident-suite/1"
#: Files exactident writes that are not cases, by ``format``: what to say when one is given as a case.
_NOT_A_CASE = {
    "exactident-report/1": "this file is an exactident report, not a case; "
                           "did you mean verify-certificate CASE REPORT?",
    SUITE_FORMAT: "this file is a suite manifest (exactident-suite/1), not a case; run its folder with "
                  "exactident suite run DIR",
}
_KEYS = ("format", "name", "description", "widths", "weights", "biases", "sample", "generator", "expected",
         "provenance")
#: Keys of the optional ``provenance`` object (docs/case-format.md), written by the importers.
PROVENANCE_KEYS = ("source_file", "config_file", "format", "sha256", "weight_dtype", "dropped_output_activation",
                   "sample_file", "sample_sha256", "sample_dtype", "sample_rows", "sample_transform", "crosscheck",
                   "importer", "architecture", "forward_check", "reference", "reference_sha256", "parameter_names")
_PARAMETER_KEY = re.compile(r"[Wb]_[1-9][0-9]*")


@dataclass
class Case:
    """A network and a sample, exact.

    Attributes
    ----------
    name : str
    network : Network
        Widths ``N_0..N_L``, ``W[l-1]`` = ``W_l`` (fmpq_mat ``(N_l, N_{l-1})``),
        ``b[l-1]`` = ``b_l`` (list of fmpq, length ``N_l``).
    X : list of list of fmpq
        The sample, ``n`` rows of ``N_0`` rationals (Q).
    description : str
    expected : dict or None
        Ground-truth report fields, if the file has them.
    provenance : dict or None
        Where an imported network came from (:data:`PROVENANCE_KEYS`, string values):
        source file, format, sha256, weight dtype, dropped output activation, sample file.
    generator : dict or None
        How a generated case was made (``exactident generate``, docs/suites.md), if it was.
    """

    name: str
    network: Network
    X: list[list[flint.fmpq]]
    description: str = ""
    expected: dict[str, Any] | None = None
    source: str = field(default="<case>", compare=False)
    generator: dict[str, Any] | None = None
    provenance: dict[str, Any] | None = None

    @classmethod
    def from_arrays(cls, weights: Sequence[Any], biases: Sequence[Any] | None, X: Any, *,
                    name: str = "arrays", description: str = "") -> Case:
        """A case from in-memory arrays, converted exactly (``W_l`` of shape ``(N_l, N_{l-1})``).

        Parameters
        ----------
        weights : sequence of L matrices
            ``weights[l-1]`` is ``W_l``, shape ``(N_l, N_{l-1})``: numpy arrays of any float
            (float16, float32, float64, ml_dtypes.bfloat16) or integer dtype, or nested lists of
            ``int``, ``Fraction``, ``fmpq``, ``"p/q"`` strings or Python floats.
        biases : sequence of L vectors, or None
            ``biases[l-1]`` is ``b_l`` (length ``N_l``); a ``None`` entry (or ``None`` for all)
            means zeros.
        X : matrix of shape ``(n, N_0)``
            The sample, same number types.
        name, description : str

        Returns
        -------
        Case
            Every float is its exact binary value (a dyadic rational, read from its bits); the
            dtype is recorded in ``provenance["weight_dtype"]`` and ``["sample_dtype"]``.

        Raises
        ------
        CaseFormatError
            For a wrong shape (naming the layer, and saying when a matrix looks transposed),
            NaN or infinity (naming the tensor and index), or a value of an unsupported type.

        Examples
        --------
        >>> import numpy as np
        >>> case = Case.from_arrays([np.array([[0.1]]), np.array([[3.0]])], None, [[0.5]])
        >>> case.network.W[0][0, 0], case.provenance["weight_dtype"]
        (3602879701896397/36028797018963968, 'float64')
        >>> Case.from_arrays([np.ones((2, 3)), np.ones((2, 1))], None, [[0, 0, 0]])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        exactident.errors.CaseFormatError: <arrays>: W2: shape (2, 1) does not follow W1 ... looks transposed ...
        """
        from exactident.io.importers.arrays import case_parts

        network, sample, provenance = case_parts(weights, biases, X)
        return cls(name=name, network=network, X=sample, description=description, provenance=provenance)

    @property
    def widths(self) -> tuple[int, ...]:
        return self.network.widths

    def __repr__(self) -> str:
        """One short line (a case's numbers can run to megabytes)."""
        name = self.name if len(self.name) <= 60 else self.name[:60] + "..."
        return (f"Case(name={name!r}, widths={list(self.network.widths)}, n_samples={len(self.X)}, "
                f"dim={self.network.dim}, source={self.source!r})")

    @property
    def n_samples(self) -> int:
        return len(self.X)

    def _repr_html_(self) -> str:
        """The notebook view: widths, sample size, dim, where it came from (HTML, escaped)."""
        from exactident.io.display import html_block

        prov = self.provenance or {}
        fields = [("widths", list(self.network.widths)), ("samples", len(self.X)), ("dim", self.network.dim),
                  ("source", self.source)]
        fields += [(k, prov[k]) for k in ("format", "importer", "weight_dtype", "sample_dtype") if k in prov]
        if isinstance((self.expected or {}).get("verdict"), str):
            fields.append(("expected verdict", self.expected["verdict"]))  # type: ignore[index]
        return html_block(f"Case {self.name}", fields, [self.description] if self.description else [])


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


def _matrix(value: Any, source: str, where: str, rows: int, cols: int,
            budget: DigitBudget) -> list[list[flint.fmpq]]:
    out = []
    for i, row in enumerate(_list(value, source, where, rows, f"a list of {rows} rows")):
        entries = _list(row, source, f"{where}[{i}]", cols, f"a list of {cols} numbers")
        out.append([parse_number(v, source, f"{where}[{i}][{j}]", budget) for j, v in enumerate(entries)])
    return out


def parse_case(obj: Any, source: str = "<case>", limits: ReadLimits | None = None) -> Case:
    """Validate a decoded ``exactident-case/1`` object and build a :class:`Case`.

    Parameters
    ----------
    obj : dict
        As returned by :func:`read_json` (decimals as ``Decimal``).
    source : str
        File name for error messages.
    limits : ReadLimits, optional
        Digit limits (total and per number); default
        :data:`exactident.io.limits.DEFAULT_LIMITS`.

    Returns
    -------
    Case

    Raises
    ------
    CaseFormatError
        Naming ``source`` and the field, for every deviation from docs/case-format.md
        and for numbers beyond the digit limits.

    Examples
    --------
    >>> case = parse_case({"format": "exactident-case/1", "name": "t", "widths": [1, 1],
    ...     "weights": [[["1/2"]]], "biases": [["0"]], "sample": [[1]]})
    >>> case.network.W[0][0, 0]
    1/2
    >>> parse_case({"format": "exactident-case/1", "name": "t", "widths": [1, 1],
    ...     "weights": [[[True]]], "biases": [["0"]], "sample": []}, "a.json")
    Traceback (most recent call last):
    ...
    exactident.errors.CaseFormatError: a.json: weights[0][0][0]: expected a number, found true
    """
    first = obj[0] if isinstance(obj, list) and obj else obj  # check --json of several cases: an array
    if isinstance(first, dict) and first.get("format") in _NOT_A_CASE:
        raise CaseFormatError(source, "", _NOT_A_CASE[first["format"]])
    if not isinstance(obj, dict):
        raise CaseFormatError(source, "", f"expected a JSON object, found {describe_json_value(obj)}")
    for key in obj:
        if key not in _KEYS:
            raise CaseFormatError(source, str(key), f"unknown field (allowed: {', '.join(_KEYS)})")
    for key in ("format", "name", "widths", "weights", "biases", "sample"):
        if key not in obj:
            raise CaseFormatError(source, key, "missing required field")
    if obj["format"] != CASE_FORMAT:
        raise CaseFormatError(source, "format", f"expected {CASE_FORMAT!r}, found {obj['format']!r}")
    name = obj["name"]
    if not _is_text(name) or not name:
        raise CaseFormatError(source, "name", f"expected a non-empty string, found {describe_json_value(name)}")
    description = obj.get("description", "")
    if not _is_text(description):
        raise CaseFormatError(source, "description", f"expected a string, found {describe_json_value(description)}")
    widths = _list(obj["widths"], source, "widths")
    if len(widths) < 2:
        raise CaseFormatError(source, "widths", f"expected at least 2 widths (N_0, ..., N_L), found {len(widths)}")
    for i, w in enumerate(widths):
        if isinstance(w, bool) or not isinstance(w, int) or w < 1:
            found = describe_json_value(w)
            raise CaseFormatError(source, f"widths[{i}]", f"expected a positive integer, found {found}")
    L = len(widths) - 1
    budget = DigitBudget(limits or DEFAULT_LIMITS, source)
    weights = _list(obj["weights"], source, "weights", L, f"a list of {L} matrices")
    biases = _list(obj["biases"], source, "biases", L, f"a list of {L} vectors")
    W = []
    b = []
    for l in range(1, L + 1):
        rows = _matrix(weights[l - 1], source, f"weights[{l - 1}]", widths[l], widths[l - 1], budget)
        W.append(flint.fmpq_mat(widths[l], widths[l - 1], [v for row in rows for v in row]))
        vec = _list(biases[l - 1], source, f"biases[{l - 1}]", widths[l], f"a list of {widths[l]} numbers")
        b.append([parse_number(v, source, f"biases[{l - 1}][{i}]", budget) for i, v in enumerate(vec)])
    sample = _list(obj["sample"], source, "sample")
    X = [
        [parse_number(v, source, f"sample[{i}][{j}]", budget) for j, v in enumerate(
            _list(row, source, f"sample[{i}]", widths[0], f"a list of {widths[0]} numbers"))]
        for i, row in enumerate(sample)
    ]
    expected = obj.get("expected")
    if expected is not None and not isinstance(expected, dict):
        raise CaseFormatError(source, "expected", f"expected an object, found {describe_json_value(expected)}")
    provenance = _provenance(obj.get("provenance"), source)
    generator = obj.get("generator")
    if generator is not None and not isinstance(generator, dict):
        raise CaseFormatError(source, "generator", f"expected an object, found {describe_json_value(generator)}")
    return Case(name=name, network=Network(tuple(widths), W, b), X=X, description=description,
                expected=_plain(expected), source=source, generator=_plain(generator), provenance=provenance)


def _is_text(value: Any) -> bool:
    # A bare JSON NaN/Infinity decodes to NonFinite (a str subclass, so numbers can name their
    # field); it is not text where a string is expected.
    return isinstance(value, str) and not isinstance(value, NonFinite)


def _parameter_names(value: Any, source: str) -> None:
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


def _provenance(value: Any, source: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise CaseFormatError(source, "provenance", f"expected an object, found {describe_json_value(value)}")
    for key, v in value.items():
        if key not in PROVENANCE_KEYS:
            raise CaseFormatError(source, f"provenance.{key}",
                                  f"unknown field (allowed: {', '.join(PROVENANCE_KEYS)})")
        if key == "parameter_names":
            _parameter_names(v, source)
        elif not _is_text(v):
            raise CaseFormatError(source, f"provenance.{key}", f"expected a string, found {describe_json_value(v)}")
    return dict(value)


def _plain(value: Any) -> Any:
    """Decimals in ``expected`` become exact strings (never floats)."""
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def load_case(path: str | os.PathLike[str], limits: ReadLimits | None = None) -> Case:
    """Read and validate a case file, within ``limits`` (size, digits; docs/case-format.md).

    Raises
    ------
    CaseFormatError
        Naming the file and field (see :func:`read_json`, :func:`parse_case`).
    """
    return parse_case(read_json(path, limits), str(path), limits)


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


def case_to_json(case: Case) -> dict[str, Any]:
    """The case as a JSON-ready dict with canonical ``"p/q"`` strings."""
    net = case.network
    obj: dict[str, Any] = {"format": CASE_FORMAT, "name": case.name}
    if case.description:
        obj["description"] = case.description
    obj["widths"] = list(net.widths)
    obj["weights"] = [[[format_fmpq(W[i, j]) for j in range(W.ncols())] for i in range(W.nrows())] for W in net.W]
    obj["biases"] = [[format_fmpq(v) for v in bl] for bl in net.b]
    obj["sample"] = [[format_fmpq(v) for v in row] for row in case.X]
    if case.generator is not None:
        obj["generator"] = case.generator
    if case.expected is not None:
        obj["expected"] = case.expected
    if case.provenance:
        obj["provenance"] = {k: case.provenance[k] for k in PROVENANCE_KEYS if k in case.provenance}
    return obj


def _dump(value: Any, indent: int) -> str:
    # Lists of scalars stay on one line so matrices read as rows.
    pad = "  " * (indent + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{pad}{json.dumps(k)}: {_dump(v, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * indent + "}"
    if isinstance(value, list) and any(isinstance(v, (list, dict)) for v in value):
        items = [pad + _dump(v, indent + 1) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + "  " * indent + "]"
    return json.dumps(value, ensure_ascii=False)


def dump_case(case: Case) -> str:
    """Canonical text of a case; ``dump_case(load(dump_case(c))) == dump_case(c)``."""
    return _dump(case_to_json(case), 0) + "\n"


def write_case(case: Case, path: str | os.PathLike[str]) -> None:
    """Write a case file atomically in canonical form."""
    atomic_write_text(path, dump_case(case))
