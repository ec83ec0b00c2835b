"""Case files ``exactident-case/1`` (docs/case-format.md): read, validate, write.

A case is a network (widths, ``W_l``, ``b_l``) plus a sample ``X`` of shape
``(n, N_0)``, all exact rationals.  Validation happens once, here, at the
edge; every error names the file and the JSON path of the bad field.
Output goes through :func:`~exactident.io.atomic.atomic_write_text` so a failed run never leaves a
half-written file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import flint

from exactident.errors import CaseFormatError, UnsupportedCaseError
from exactident.io.atomic import atomic_write_text
from exactident.io.case_parts import (
    CASE_FORMAT_2,
    PROVENANCE_KEYS,
    SUITE_FORMAT,
    _is_text,
    _list,
    architecture_to_json,
    case_files,
    parse_architecture,
    plain_json,
    provenance,
    read_json,
    require_case_files,
)
from exactident.io.limits import DEFAULT_LIMITS, DigitBudget, ReadLimits
from exactident.io.rationals import describe_json_value, format_fmpq, parse_row
from exactident.model.network import Network

if TYPE_CHECKING:  # a format-2 case's layer graph: loaded by exactident.io.case_parts when one is read
    from exactident.model.architecture import Architecture

__all__ = [
    "CASE_FORMAT",
    "CASE_FORMAT_2",
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
#: Files exactident writes that are not cases, by ``format``: what to say when one is given as a case.
_NOT_A_CASE = {
    "exactident-report/1": "this file is an exactident report, not a case; "
                           "did you mean verify-certificate CASE REPORT?",
    SUITE_FORMAT: "this file is a suite manifest (exactident-suite/1), not a case; run its folder with "
                  "exactident suite run DIR",
}
_KEYS = ("format", "name", "description", "widths", "weights", "biases", "sample", "generator", "expected",
         "provenance")
_REQUIRED = ("format", "name", "widths", "weights", "biases", "sample")
#: Fields of a format-2 case, in the order they are written.
_KEYS_2 = ("format", "name", "description", "input_shape", "layers", "output", "sample", "generator", "expected",
           "provenance")
_REQUIRED_2 = ("format", "name", "input_shape", "layers", "output", "sample")


@dataclass(init=False)
class Case:
    """A network and a sample, exact.

    A case holds either a plain ReLU MLP (format 1; ``architecture`` is None) or a layer
    graph (format 2, :class:`~exactident.model.architecture.Architecture`).  A layer graph
    that is a plain MLP has ``network`` too, so the plain engine analyses it.

    Attributes
    ----------
    name : str
    network : Network
        Widths ``N_0..N_L``, ``W[l-1]`` = ``W_l`` (fmpq_mat ``(N_l, N_{l-1})``),
        ``b[l-1]`` = ``b_l`` (list of fmpq, length ``N_l``).  Reading it on a case whose
        architecture is more than a plain ReLU MLP raises
        :class:`~exactident.errors.UnsupportedCaseError` (use ``compiled``).
    X : list of list of fmpq
        The sample, ``n`` rows of ``N_0`` rationals (Q); a layer graph's input is flattened in
        C-order.
    description : str
    expected : dict or None
        Ground-truth report fields, if the file has them.
    provenance : dict or None
        Where an imported network came from (:data:`~exactident.io.case_parts.PROVENANCE_KEYS`, string values):
        source file, format, sha256, weight dtype, dropped output activation, sample file.
    generator : dict or None
        How a generated case was made (``exactident generate``, docs/suites.md), if it was.
    architecture : Architecture or None
        The layer graph of a format-2 case; None for format 1.
    """

    name: str
    X: list[list[flint.fmpq]]
    description: str
    expected: dict[str, Any] | None
    source: str = field(compare=False)
    generator: dict[str, Any] | None
    provenance: dict[str, Any] | None
    architecture: Architecture | None
    plain_network: Network | None

    def __init__(self, name: str, network: Network | None = None, X: list[list[flint.fmpq]] | None = None,
                 description: str = "", expected: dict[str, Any] | None = None, source: str = "<case>",
                 generator: dict[str, Any] | None = None, provenance: dict[str, Any] | None = None,
                 architecture: Architecture | None = None) -> None:
        if network is None and architecture is None:
            raise CaseFormatError(source, "", "a case needs a network or an architecture")
        self._compiled: Network | None = None
        if network is None and architecture is not None:
            # the layer-graph compiler loads with the first layer graph (start-up of a plain case)
            from exactident.model.compile import compile_architecture

            self._compiled = compile_architecture(architecture)
            network = self._compiled if self._compiled.is_plain() else None
        self.name, self.plain_network, self.X = name, network, X if X is not None else []
        self.description, self.expected, self.source = description, expected, source
        self.generator, self.provenance, self.architecture = generator, provenance, architecture

    @property
    def network(self) -> Network:
        """The plain network (see the class docstring); UnsupportedCaseError for anything more."""
        if self.plain_network is None:
            features = ", ".join(self.compiled.features) or "a layer graph"
            raise UnsupportedCaseError(f"{self.source}: the architecture has {features}, and this command works on "
                                       "plain ReLU MLPs only (check, explain, design, crosscheck, verify-certificate, "
                                       "fdim, audit, canonical and equiv analyse it)")
        return self.plain_network

    @property
    def compiled(self) -> Network:
        """The network in the compiled layered form (:mod:`exactident.model.compile`), for every case.

        A plain case without a layer graph is its :attr:`network` (``T = I``, slopes 0).
        """
        if self._compiled is None:
            from exactident.model.compile import compile_architecture

            self._compiled = (compile_architecture(self.architecture) if self.architecture is not None
                              else self.network)
        return self._compiled

    @property
    def is_plain(self) -> bool:
        """True when the plain engine analyses this case (a plain ReLU MLP)."""
        return self.plain_network is not None

    def as_format1(self) -> Case:
        """The same plain case without its layer graph (written as format 1), ``W_l`` named in provenance.

        Raises
        ------
        UnsupportedCaseError
            When the graph is more than a plain ReLU MLP.
        """
        prov = dict(self.provenance or {})
        if self.architecture is not None:
            from exactident.model.compile import plain_parameter_names

            prov.setdefault("parameter_names", plain_parameter_names(self.architecture))
        return Case(self.name, self.network, self.X, self.description, self.expected, self.source,
                    self.generator, prov or None)

    @classmethod
    def from_architecture(cls, architecture: Architecture, X: Any, *, name: str = "architecture",
                          description: str = "", provenance: dict[str, Any] | None = None) -> Case:
        """A format-2 case from a layer graph and a sample of ``prod(input_shape)``-entry rows (C-order).

        Raises
        ------
        CaseFormatError
            When a sample row has the wrong length or an inexact entry (``sample[i][j]``).
        """
        from exactident.model.architecture import exact_array

        rows = []
        for i, row in enumerate(X):
            try:
                values = list(exact_array(row, (architecture.n_inputs,)))
            except CaseFormatError as exc:
                raise CaseFormatError("<architecture>", f"sample[{i}]{exc.field}", exc.message) from None
            rows.append(values)
        return cls(name=name, X=rows, description=description, provenance=provenance, architecture=architecture)

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
        """``N_0..N_L`` of the plain network, or of the compiled one (carriers included)."""
        return self.plain_network.widths if self.plain_network is not None else self.compiled.widths

    def _size(self) -> tuple[str, int]:
        # A plain MLP's dim (parameters - rescalings) is known here; a layer graph's dim_free needs its
        # rescaling symmetries (check computes them), so its parameter count is shown, named as such.
        if self.plain_network is not None:
            return "dim", self.plain_network.dim
        return "params", self.compiled.n_params

    def __repr__(self) -> str:
        """One short line (a case's numbers can run to megabytes)."""
        name = self.name if len(self.name) <= 60 else self.name[:60] + "..."
        key, size = self._size()
        widths = self.plain_network.widths if self.plain_network is not None else self.compiled.layer_widths
        return (f"Case(name={name!r}, widths={list(widths)}, n_samples={len(self.X)}, "
                f"{key}={size}, source={self.source!r})")

    @property
    def n_samples(self) -> int:
        return len(self.X)

    def _repr_html_(self) -> str:
        """The notebook view: widths, sample size, dim, where it came from (HTML, escaped)."""
        from exactident.io.display import html_block

        prov = self.provenance or {}
        fields = [("widths", list(self.widths)), ("samples", len(self.X)), self._size(),
                  ("source", self.source)]
        fields += [(k, prov[k]) for k in ("format", "importer", "weight_dtype", "sample_dtype") if k in prov]
        if isinstance((self.expected or {}).get("verdict"), str):
            fields.append(("expected verdict", self.expected["verdict"]))  # type: ignore[index]
        return html_block(f"Case {self.name}", fields, [self.description] if self.description else [])


def _matrix(value: Any, source: str, where: str, rows: int, cols: int,
            budget: DigitBudget) -> list[list[flint.fmpq]]:
    out = []
    for i, row in enumerate(_list(value, source, where, rows, f"a list of {rows} rows")):
        entries = _list(row, source, f"{where}[{i}]", cols, f"a list of {cols} numbers")
        out.append(parse_row(entries, source, f"{where}[{i}]", budget))
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
    v2 = obj.get("format") == CASE_FORMAT_2
    keys, required = (_KEYS_2, _REQUIRED_2) if v2 else (_KEYS, _REQUIRED)
    for key in obj:
        if key not in keys:
            raise CaseFormatError(source, str(key), f"unknown field (allowed: {', '.join(keys)})")
    for key in required:
        if key not in obj:
            raise CaseFormatError(source, key, "missing required field")
    if obj["format"] not in (CASE_FORMAT, CASE_FORMAT_2):
        raise CaseFormatError(source, "format", f"expected {CASE_FORMAT!r} or {CASE_FORMAT_2!r}, "
                                                f"found {obj['format']!r}")
    name = obj["name"]
    if not _is_text(name) or not name:
        raise CaseFormatError(source, "name", f"expected a non-empty string, found {describe_json_value(name)}")
    description = obj.get("description", "")
    if not _is_text(description):
        raise CaseFormatError(source, "description", f"expected a string, found {describe_json_value(description)}")
    budget = DigitBudget(limits or DEFAULT_LIMITS, source)
    architecture, network = None, None
    if v2:
        architecture = parse_architecture(obj, source, budget)
        n_inputs = architecture.n_inputs
    else:
        network = _network(obj, source, budget)
        n_inputs = network.widths[0]
    sample = _list(obj["sample"], source, "sample")
    X = [parse_row(_list(row, source, f"sample[{i}]", n_inputs, f"a list of {n_inputs} numbers"), source,
                   f"sample[{i}]", budget) for i, row in enumerate(sample)]
    expected = obj.get("expected")
    if expected is not None and not isinstance(expected, dict):
        raise CaseFormatError(source, "expected", f"expected an object, found {describe_json_value(expected)}")
    prov = provenance(obj.get("provenance"), source)
    generator = obj.get("generator")
    if generator is not None and not isinstance(generator, dict):
        raise CaseFormatError(source, "generator", f"expected an object, found {describe_json_value(generator)}")
    return Case(name=name, network=network, X=X, description=description, expected=plain_json(expected),
                source=source, generator=plain_json(generator), provenance=prov, architecture=architecture)


def _network(obj: dict[str, Any], source: str, budget: DigitBudget) -> Network:
    """``widths``, ``weights``, ``biases`` of a format-1 case."""
    widths = _list(obj["widths"], source, "widths")
    if len(widths) < 2:
        raise CaseFormatError(source, "widths", f"expected at least 2 widths (N_0, ..., N_L), found {len(widths)}")
    for i, w in enumerate(widths):
        if isinstance(w, bool) or not isinstance(w, int) or w < 1:
            found = describe_json_value(w)
            raise CaseFormatError(source, f"widths[{i}]", f"expected a positive integer, found {found}")
    L = len(widths) - 1
    weights = _list(obj["weights"], source, "weights", L, f"a list of {L} matrices")
    biases = _list(obj["biases"], source, "biases", L, f"a list of {L} vectors")
    W = []
    b = []
    for l in range(1, L + 1):
        rows = _matrix(weights[l - 1], source, f"weights[{l - 1}]", widths[l], widths[l - 1], budget)
        W.append(flint.fmpq_mat(widths[l], widths[l - 1], [v for row in rows for v in row]))
        vec = _list(biases[l - 1], source, f"biases[{l - 1}]", widths[l], f"a list of {widths[l]} numbers")
        b.append(parse_row(vec, source, f"biases[{l - 1}]", budget))
    return Network(tuple(widths), W, b)


def load_case(path: str | os.PathLike[str], limits: ReadLimits | None = None) -> Case:
    """Read and validate a case file, within ``limits`` (size, digits; docs/case-format.md).

    Raises
    ------
    CaseFormatError
        Naming the file and field (see :func:`read_json`, :func:`parse_case`).
    """
    return parse_case(read_json(path, limits), str(path), limits)


def case_to_json(case: Case) -> dict[str, Any]:
    """The case as a JSON-ready dict with canonical ``"p/q"`` strings."""
    obj: dict[str, Any] = {"format": CASE_FORMAT if case.architecture is None else CASE_FORMAT_2, "name": case.name}
    if case.description:
        obj["description"] = case.description
    if case.architecture is not None:
        obj.update(architecture_to_json(case.architecture))
    else:
        net = case.network
        obj["widths"] = list(net.widths)
        obj["weights"] = [[[format_fmpq(W[i, j]) for j in range(W.ncols())] for i in range(W.nrows())]
                          for W in net.W]
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
