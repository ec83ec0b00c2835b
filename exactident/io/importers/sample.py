"""Samples from files: ``.npy``, ``.npz`` and ``.csv``, read exactly, optionally sliced.

``.npy``/``.npz`` arrays are read with ``allow_pickle=False`` after their
header's shape and dtype were checked against the size limit; floats become
their exact binary values (:mod:`exactident.io.importers.arrays`).  A ``.csv``
holds one sample per line, comma separated, an optional header line (any
line whose fields are not all numbers is taken as the header only when it is
the first); its numbers are read as the exact decimals they spell, the way
case files read JSON decimals (``0.1`` is 1/10), never through a float.
"""

from __future__ import annotations

import csv
import io
import os
import zipfile
from dataclasses import dataclass

import flint
import numpy as np

from exactident.errors import CaseFormatError
from exactident.io.importers.arrays import sample_rows
from exactident.io.importers.common import (
    ZipBudget,
    check_declared_size,
    check_file_size,
    check_zip,
    looks_like_pickle,
    open_zip,
    sha256_file,
)
from exactident.io.rationals import parse_number

__all__ = ["FLOAT_DTYPES", "Sample", "as_seen", "load_array", "load_sample", "parse_rows", "rounding_note"]


@dataclass
class Sample:
    """An exact sample read from a file: ``X`` rows of fmpq, plus provenance."""

    X: list[list[flint.fmpq]]
    source: str
    dtype: str
    sha256: str
    rows: str | None = None

    def provenance(self) -> dict[str, str]:
        out = {"sample_file": self.source, "sample_sha256": self.sha256, "sample_dtype": self.dtype}
        if self.rows is not None:
            out["sample_rows"] = self.rows
        return out


def parse_rows(text: str | None) -> slice | None:
    """``"a:b"`` (either end optional, non-negative) as a slice; None for None.

    Raises
    ------
    CaseFormatError
        Anything else (field ``--sample-rows``).

    Examples
    --------
    >>> parse_rows("10:20"), parse_rows(":5")
    (slice(10, 20, None), slice(None, 5, None))
    >>> parse_rows("5")
    Traceback (most recent call last):
    ...
    exactident.errors.CaseFormatError: <args>: --sample-rows: expected a:b (e.g. 0:100), found '5'
    >>> parse_rows("5:2")
    Traceback (most recent call last):
    ...
    exactident.errors.CaseFormatError: <args>: --sample-rows: '5:2' selects no row (a:b takes rows a to b-1: b > a)
    """
    if text is None:
        return None
    a, sep, b = text.partition(":")
    try:
        if not sep or ":" in b:
            raise ValueError
        start = int(a) if a.strip() else None
        stop = int(b) if b.strip() else None
        if (start is not None and start < 0) or (stop is not None and stop < 0):
            raise ValueError
    except ValueError:
        raise CaseFormatError("<args>", "--sample-rows", f"expected a:b (e.g. 0:100), found {text!r}") from None
    if stop is not None and stop <= (start or 0):
        raise CaseFormatError("<args>", "--sample-rows", f"{text!r} selects no row (a:b takes rows a to b-1: b > a)")
    return slice(start, stop)


def _npy_header(f: io.BufferedIOBase | zipfile.ZipExtFile, source: str, name: str,
                max_bytes: int) -> tuple[tuple[int, ...], np.dtype]:
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, _fortran, dtype = np.lib.format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, _fortran, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise ValueError(f"unsupported .npy version {version}")
    except (ValueError, OSError, EOFError) as exc:
        raise CaseFormatError(source, name, f"not a valid .npy array ({exc})") from None
    if dtype.hasobject:
        raise CaseFormatError(source, name, "array holds Python objects (a pickle): refused, never unpickled")
    check_declared_size(source, name, int(np.prod(shape, dtype=np.int64)) * dtype.itemsize, max_bytes)
    return shape, dtype


def _load_npy(path: str, max_bytes: int) -> np.ndarray:
    with open(path, "rb") as f:
        _npy_header(f, path, "", max_bytes)
    return _np_load(path, path, "")


def load_array(path: str, max_bytes: int) -> np.ndarray:
    """One ``.npy`` array, its header size-checked first, read with ``allow_pickle=False``.

    Raises
    ------
    CaseFormatError
        Not a valid ``.npy``, an object (pickle) array, over the limit.
    """
    check_file_size(path, max_bytes)
    return _load_npy(path, max_bytes)


def _np_load(target: str | io.BytesIO, source: str, name: str) -> np.ndarray:
    try:
        out = np.load(target, allow_pickle=False)
    except ValueError as exc:  # object arrays need pickle: refused
        raise CaseFormatError(source, name, f"refused ({exc})") from None
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        raise CaseFormatError(source, name, f"corrupted or not a NumPy file ({exc})") from None
    return np.asarray(out)


def npz_arrays(path: str, max_bytes: int) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` (names without ``.npy``), headers size-checked before loading.

    The archive's declared total is bounded before anything is decompressed, and the bytes
    decompressed are counted (:func:`~exactident.io.importers.common.check_zip`, ``ZipBudget``).

    Raises
    ------
    CaseFormatError
        Not a zip of ``.npy`` files, an object (pickle) array, a member over the limit, members
        that decompress past the limit in all (a decompression bomb).
    """
    size = check_file_size(path, max_bytes)
    out: dict[str, np.ndarray] = {}
    try:
        with open(path, "rb") as fh, open_zip(path, fh) as z:
            check_zip(z, path, max_bytes, size)
            budget = ZipBudget(path, max_bytes)
            for info in z.infolist():
                name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                check_declared_size(path, name, info.file_size, max_bytes)
                with z.open(info) as f:
                    _npy_header(f, path, name, max_bytes)  # type: ignore[arg-type]
                out[name] = _np_load(io.BytesIO(budget.read(z, info)), path, name)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise CaseFormatError(path, "", f"corrupted or not an .npz file ({exc})") from None
    return out


def _load_csv(path: str, max_bytes: int) -> list[list[flint.fmpq]]:
    check_file_size(path, max_bytes)
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            lines = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise CaseFormatError(path, "", f"cannot read as CSV text ({exc})") from None
    rows = [r for r in lines if r and any(c.strip() for c in r)]
    out = []
    for i, row in enumerate(rows):
        try:
            out.append([parse_number(c, path, f"line {i + 1} column {j + 1}") for j, c in enumerate(row)])
        except CaseFormatError:
            if i == 0:  # a header line
                continue
            raise
    lengths = {len(r) for r in out}
    if len(lengths) > 1:
        first = len(out[0])
        bad = next(k for k, r in enumerate(out) if len(r) != first)
        raise CaseFormatError(path, f"row {bad + 1}", f"has {len(out[bad])} values, the first row has {first}")
    return out


def load_sample(path: str | os.PathLike[str], n_inputs: int, rows: slice | None = None, *,
                max_bytes: int | None = None, key: str | None = None, images: bool = False) -> Sample:
    """Read a sample file exactly: ``.npy``, ``.npz`` (array ``key``, ``X``, or its only array), ``.csv``.

    Parameters
    ----------
    path : str or path
    n_inputs : int
        ``N_0``: every row must have this many values.
    rows : slice, optional
        Keep only these rows (``--sample-rows a:b``).
    max_bytes : int, optional
        Size limit (default :data:`~exactident.io.importers.formats.DEFAULT_MAX_BYTES`).
    images : bool
        Also accept ``(n, C, H, W)`` (any ``(n, ...)`` of ``n_inputs`` entries a row), read in C-order
        (the sample of a layer graph).

    Returns
    -------
    Sample

    Raises
    ------
    CaseFormatError
        Naming the file (and array, row, column): unknown extension, a pickle, a corrupted file,
        NaN/inf, rows of the wrong length, a file over the limit, a sample with no row (or ``rows``
        selecting none).
    """
    from exactident.io.importers.common import DEFAULT_MAX_BYTES

    source = str(path)
    limit = DEFAULT_MAX_BYTES if max_bytes is None else max_bytes
    check_file_size(source, limit)
    with open(source, "rb") as f:
        head = f.read(8)
    ext = os.path.splitext(source)[1].lower()
    name = ""
    if looks_like_pickle(head):
        raise CaseFormatError(source, "", "file is a pickle: refused, never unpickled (save the sample as .npy)")
    if ext == ".npy":
        data: object = _load_npy(source, limit)
        dtype = None
    elif ext == ".npz":
        arrays = npz_arrays(source, limit)
        if key is None:
            key = "X" if "X" in arrays else (next(iter(arrays)) if len(arrays) == 1 else None)
        if key is None or key not in arrays:
            raise CaseFormatError(source, key or "", f"cannot tell which array is the sample "
                                  f"(arrays: {', '.join(sorted(arrays)) or 'none'}; name one X)")
        data, name, dtype = arrays[key], key, None
    elif ext in (".csv", ".txt"):
        data, dtype = _load_csv(source, limit), "decimal"
    else:
        raise CaseFormatError(source, "", f"unknown sample format {ext or '(no extension)'!r} "
                                          "(expected .npy, .npz or .csv)")
    rows_text = None if rows is None else f"{rows.start or 0}:{'' if rows.stop is None else rows.stop}"
    if rows is not None:
        total = len(data)  # type: ignore[arg-type]
        data = data[rows]  # type: ignore[index]
        if not len(data):  # type: ignore[arg-type]
            raise CaseFormatError(source, "--sample-rows", f"rows {rows_text} select no row of the {total} in "
                                  "the sample")
    elif not len(data):  # type: ignore[arg-type]
        # as a missing --sample: rank Gamma = 0 and a "not-identifiable" that says nothing about the network
        raise CaseFormatError(source, name or "sample", "holds no row (0 samples): a verdict on an empty sample "
                              "says nothing about the network; give the rows to analyse")
    X, found = sample_rows(data, source, name or "sample", n_inputs, images)
    return Sample(X, source, dtype or found, sha256_file(source), rows_text)


#: Sample dtypes that are binary floats (a sample of another dtype: exact numbers, CSV decimals, integers).
FLOAT_DTYPES = ("float64", "float32", "float16", "bfloat16")


def rounding_note(found: str, seen: str, who: str = "model") -> str:
    """``provenance["sample_rounding"]`` when a sample was rounded to the dtype the model computes in."""
    return (f"{found} sample rounded to {seen}, the dtype the {who} computes in: the analysed sample is the one "
            f"the {who} sees")


def as_seen(X: list[list[flint.fmpq]], Xf: np.ndarray, Xin: np.ndarray, sample_dtype: str | None,
            seen: str) -> tuple[list[list[flint.fmpq]], dict[str, str]]:
    """The exact sample replaced by the values the model sees, when it rounds a float sample.

    A framework computes on its inputs converted to its own dtype: a float64 sample given to a
    float32 model is seen as its float32 roundings.  Those values (exact dyadic rationals) are the
    sample the model is evaluated at, so they are the sample analysed.

    Parameters
    ----------
    X : list of rows of fmpq, shape ``(n, N_0)``
        The sample read exactly.
    Xf : float64 ndarray ``(n, N_0)``
        ``X`` as float64 (exact for a binary-float sample).
    Xin : float64 ndarray ``(n, N_0)``
        The inputs as the framework saw them (rounded to its dtype, widened exactly to float64).
    sample_dtype : str or None
        The sample's stored dtype; only a binary-float sample (:data:`FLOAT_DTYPES`) is replaced: exact
        numbers and CSV decimals are analysed as given (the provenance says so when the model rounds them).
    seen : str
        The name of the dtype the model computes in.

    Returns
    -------
    (X, provenance)
        The rows to analyse and ``{"sample_rounding": ...}`` (empty when nothing was rounded).
    """
    Xin = np.asarray(Xin, dtype=np.float64).reshape(Xf.shape)
    if Xf.size == 0 or np.array_equal(Xin, Xf):
        return X, {}
    if sample_dtype not in FLOAT_DTYPES:
        return X, {"sample_rounding": f"not rounded: the sample ({sample_dtype}) is analysed exactly as given; the "
                                      f"model computes in {seen} and sees it rounded"}
    from exactident.io.importers.arrays import Tensor

    return Tensor(Xin, "<sample>", "X").rows(), {"sample_rounding": rounding_note(sample_dtype, seen)}
