"""Exact conversion of arrays to rationals, and the shape checks every importer shares.

Every float16, bfloat16, float32 and float64 number is a dyadic rational
``m 2^e``: it is read from its bits (sign, exponent, significand) and becomes
exactly that rational, never a decimal rounding of it and never a
``limit_denominator`` approximation (rounding would analyse a different
network, and can create or destroy ties).  Integers, ``Fraction``, ``fmpq``
and ``"p/q"`` strings are exact already.  NaN and infinities are errors naming
the tensor and the index.

Called by :meth:`exactident.io.case.Case.from_arrays` and by every importer of
:mod:`exactident.io.importers`; calls :mod:`exactident.io.rationals`.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any

import flint
import numpy as np

from exactident.errors import CaseFormatError
from exactident.io.rationals import MAX_DIGITS, parse_number
from exactident.model.network import Network

__all__ = [
    "Tensor",
    "bfloat16_bits_to_float32",
    "case_parts",
    "dtype_name",
    "dyadic",
    "exact_tensor",
    "join_dtypes",
    "network_from_tensors",
]

_MAX_BITS = int(MAX_DIGITS * 3.3219280948873626)  # MAX_DIGITS decimal digits, in bits

#: numpy float dtypes read from their bits (bfloat16 comes as ml_dtypes.bfloat16 or as raw bits).
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


def bfloat16_bits_to_float32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) -> the float32 numbers they are (exact: bfloat16 is float32's top half).

    Examples
    --------
    >>> bfloat16_bits_to_float32(np.array([0x3F80, 0xC040, 0x0001], dtype=np.uint16)).tolist()
    [1.0, -3.0, 9.183549615799121e-41]
    """
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def dtype_name(arr: np.ndarray) -> str:
    """``"float32"``, ``"bfloat16"``, ``"int64"``, ... (the name a user knows the dtype by)."""
    return str(arr.dtype.name)


def join_dtypes(names: Sequence[str]) -> str:
    """Distinct dtype names in first-seen order, joined by ``+`` (``"float32"``, ``"float32+float64"``)."""
    seen: list[str] = []
    for n in names:
        if n not in seen:
            seen.append(n)
    return "+".join(seen)


def dyadic(x: float) -> flint.fmpq:
    """The exact value of a finite binary64 number, from its significand and exponent.

    Examples
    --------
    >>> dyadic(0.1), dyadic(-1.5), dyadic(5e-324) == flint.fmpq(1, 2**1074)
    (3602879701896397/36028797018963968, -3/2, True)
    """
    p, q = x.as_integer_ratio()  # exact: built from the bits, no decimal step
    return flint.fmpq(p, q)


def _where(shape: tuple[int, ...], flat_index: int) -> str:
    return "[" + "][".join(str(i) for i in np.unravel_index(flat_index, shape)) + "]" if shape else ""


def _as_float64(arr: np.ndarray) -> np.ndarray | None:
    """Widen a float16/bfloat16/float32/float64 array to float64 (exact for all four), else None."""
    name = arr.dtype.name
    if name in FLOAT_DTYPES:
        return arr.astype(np.float64)
    return None


class Tensor:
    """A named array converted exactly: ``values`` (flat list of fmpq), ``shape``, ``dtype``.

    Parameters
    ----------
    value : array-like
        numpy array (float16/bfloat16/float32/float64, any integer dtype, or object holding
        exact numbers) or nested lists of int, Fraction, fmpq, "p/q" strings, floats.
    source, name : str
        File (or ``"<arrays>"``) and tensor name for error messages, e.g. ``W2`` or ``0.weight``.

    Raises
    ------
    CaseFormatError
        NaN or infinity (naming the index), ragged nesting, an unsupported dtype or element.
    """

    def __init__(self, value: Any, source: str, name: str, dtype: str | None = None) -> None:
        self.source, self.name = source, name
        arr, stored = _to_array(value, source, name)
        self.shape: tuple[int, ...] = tuple(int(s) for s in arr.shape)
        self.values, found = _exact_values(arr, source, name)
        self.dtype: str = dtype or stored or found
        #: the same numbers as float64 (exact widening), None for exact (non-float) input
        self.float64 = _as_float64(arr)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def rows(self) -> list[list[flint.fmpq]]:
        """A 2-D tensor as rows of fmpq."""
        n, m = self.shape
        return [self.values[i * m:(i + 1) * m] for i in range(n)]

    def transpose_rows(self) -> list[list[flint.fmpq]]:
        """A 2-D tensor's transpose as rows of fmpq (for ``(in, out)`` layouts)."""
        n, m = self.shape
        return [[self.values[i * m + j] for i in range(n)] for j in range(m)]


def _to_array(value: Any, source: str, name: str) -> tuple[np.ndarray, str | None]:
    """The value as an array, and its dtype's name when the array does not carry it."""
    if isinstance(value, np.ndarray):
        return value, None
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor
        t = value.detach().cpu()
        if str(t.dtype) == "torch.bfloat16":
            return t.float().numpy(), "bfloat16"  # float() is exact for bfloat16 (float32's top half)
        return np.asarray(t.numpy()), None
    try:
        arr = np.array(value, dtype=object)
    except ValueError as exc:
        raise CaseFormatError(source, name, f"not a rectangular array ({exc})") from None
    if arr.dtype == object and arr.size and all(type(v) is float for v in arr.flat):
        return arr.astype(np.float64), None  # Python floats are binary64
    return arr, None


def _exact_values(arr: np.ndarray, source: str, name: str) -> tuple[list[flint.fmpq], str]:
    wide = _as_float64(arr)
    if wide is not None:
        bad = np.flatnonzero(~np.isfinite(wide))
        if bad.size:
            i = int(bad[0])
            raise CaseFormatError(source, name + _where(arr.shape, i),
                                  f"expected a finite number, found {wide.flat[i]} ({dtype_name(arr)})")
        # float64 is exact for all four dtypes; as_integer_ratio reads sign, exponent, significand.
        return [dyadic(float(v)) for v in wide.ravel().tolist()], dtype_name(arr)
    if arr.dtype.kind in "iu":
        return [flint.fmpq(int(v)) for v in arr.ravel().tolist()], dtype_name(arr)
    if arr.dtype.kind == "b":
        raise CaseFormatError(source, name, "expected numbers, found a boolean array")
    if arr.dtype.kind != "O":
        raise CaseFormatError(source, name, f"unsupported dtype {arr.dtype} (expected float16, bfloat16, "
                                            "float32, float64 or an integer type)")
    out = []
    kinds = set()
    for i, v in enumerate(arr.ravel().tolist()):
        q, kind = _exact_scalar(v, source, name + _where(arr.shape, i))
        out.append(q)
        kinds.add(kind)
    return out, "+".join(sorted(kinds)) if kinds else "exact"


def _exact_scalar(v: Any, source: str, where: str) -> tuple[flint.fmpq, str]:
    if isinstance(v, (bool, np.bool_)):
        raise CaseFormatError(source, where, f"expected a number, found {v}")
    if isinstance(v, (float, np.floating)):
        wide = np.float64(v) if np.dtype(type(v)).name in FLOAT_DTYPES else None
        if wide is None:
            raise CaseFormatError(source, where, f"unsupported float type {type(v).__name__}")
        if not np.isfinite(wide):
            raise CaseFormatError(source, where, f"expected a finite number, found {v}")
        return dyadic(float(wide)), np.dtype(type(v)).name if not isinstance(v, float) else "float64"
    if isinstance(v, (int, np.integer, Fraction, flint.fmpz, flint.fmpq)):
        p, q = (int(v.p), int(v.q)) if isinstance(v, flint.fmpq) else (
            (v.numerator, v.denominator) if isinstance(v, Fraction) else (int(v), 1))
        if max(abs(p).bit_length(), q.bit_length()) > _MAX_BITS:  # the case format's digit limit
            raise CaseFormatError(source, where, f"more than {MAX_DIGITS} digits in numerator or denominator")
        return flint.fmpq(p, q), "exact"
    if isinstance(v, (str, Decimal)):
        return parse_number(v, source, where), "exact"  # the case format's own limits and messages
    if isinstance(v, (list, tuple, np.ndarray)):
        raise CaseFormatError(source, where, "ragged rows: not a rectangular array")
    raise CaseFormatError(source, where, f"expected a number, found {type(v).__name__}")


def exact_tensor(value: Any, source: str, name: str) -> Tensor:
    """Shorthand for :class:`Tensor`."""
    return Tensor(value, source, name)


def _shape_text(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + (",)" if len(shape) == 1 else ")")


def network_from_tensors(weights: Sequence[Tensor], biases: Sequence[Tensor | None], source: str,
                         n_inputs: int | None = None, layout: str = "out_in") -> Network:
    """Check shapes along the chain and build the exact :class:`~exactident.model.network.Network`.

    Parameters
    ----------
    weights : L tensors
        ``W_l`` as stored: ``(N_l, N_{l-1})`` when ``layout == "out_in"`` (the paper's, PyTorch's),
        ``(N_{l-1}, N_l)`` when ``layout == "in_out"`` (scikit-learn's ``coefs_``, Keras' kernel).
    biases : L tensors or None
        ``b_l`` of length ``N_l``; None means zeros (a layer without bias).
    n_inputs : int, optional
        ``N_0`` when known (from the graph input), checked against ``W_1``.

    Raises
    ------
    CaseFormatError
        Naming the layer's tensor: not 2-D, a width that does not follow its neighbour (with a
        "looks transposed" hint when the transpose fits), a bias of the wrong length.
    """
    if not weights:
        raise CaseFormatError(source, "", "no weight matrix found")
    out_axis, in_axis = (0, 1) if layout == "out_in" else (1, 0)
    expect = "(N_l, N_{l-1})" if layout == "out_in" else "(N_{l-1}, N_l)"
    widths: list[int] = []
    for l, (Wt, bt) in enumerate(zip(weights, biases), start=1):
        if Wt.ndim != 2:
            raise CaseFormatError(source, Wt.name, f"expected a matrix {expect}, found shape {_shape_text(Wt.shape)}")
        n_in, n_out = Wt.shape[in_axis], Wt.shape[out_axis]
        prev = widths[-1] if widths else n_inputs
        if prev is not None and n_in != prev:
            what = (f"does not follow {weights[l - 2].name} of shape {_shape_text(weights[l - 2].shape)}"
                    if widths else f"does not match the input width {prev}")
            want = f"(N_{l}, {prev})" if layout == "out_in" else f"({prev}, N_{l})"
            hint = ""
            if n_out == prev:
                hint = f"; {Wt.name} looks transposed (its transpose {_shape_text(Wt.shape[::-1])} fits)"
            elif l == 2 and weights[0].shape[in_axis] == n_in:
                hint = f"; {weights[0].name} looks transposed (its transpose would give N_1 = {n_in})"
            raise CaseFormatError(source, Wt.name, f"shape {_shape_text(Wt.shape)} {what} (expected {want}){hint}")
        if not widths:
            widths.append(n_in)
        if bt is not None and (bt.ndim != 1 or bt.shape[0] != n_out):
            hint = ""
            if bt.ndim == 1 and bt.shape[0] == n_in and n_in != n_out:
                hint = f"; {Wt.name} looks transposed (the bias has length N_{l - 1} = {n_in})"
            raise CaseFormatError(source, bt.name, f"expected a vector of length {n_out} (N_{l}, the rows of "
                                  f"{Wt.name}), found shape {_shape_text(bt.shape)}{hint}")
        widths.append(n_out)
    for Wt in weights:
        if 0 in Wt.shape:
            raise CaseFormatError(source, Wt.name, f"empty matrix of shape {_shape_text(Wt.shape)}")
    W = []
    b = []
    for l, (Wt, bt) in enumerate(zip(weights, biases), start=1):
        rows = Wt.rows() if layout == "out_in" else Wt.transpose_rows()
        W.append(flint.fmpq_mat(widths[l], widths[l - 1], [v for row in rows for v in row]))
        b.append(list(bt.values) if bt is not None else [flint.fmpq(0)] * widths[l])
    return Network(tuple(widths), W, b)


def sample_rows(value: Any, source: str, name: str, n_inputs: int,
                images: bool = False) -> tuple[list[list[flint.fmpq]], str]:
    """A sample ``(n, N_0)`` (or one row ``(N_0,)``) as exact rows, and its dtype name; with ``images``, also
    ``(n, C, H, W)`` (or any ``(n, ...)`` of ``N_0`` entries a row), read in C-order.

    Raises
    ------
    CaseFormatError
        Naming ``source`` and ``name``: not 2-D, or rows not of length ``N_0``.
    """
    t = Tensor(value, source, name)
    if images and t.ndim > 2 and int(np.prod(t.shape[1:])) == n_inputs:  # images (n, C, H, W): rows in C-order
        t.shape = (t.shape[0], n_inputs)
    if t.ndim == 1 and t.shape[0] == n_inputs:
        t.shape = (1, n_inputs)
    if t.ndim == 2 and t.shape[0] == 0:
        return [], t.dtype
    if t.ndim != 2:
        raise CaseFormatError(source, name, f"expected a matrix (n, N_0) = (n, {n_inputs}), "
                                            f"found shape {_shape_text(t.shape)}")
    if t.shape[1] != n_inputs:
        hint = " (transposed?)" if t.shape[0] == n_inputs else ""
        raise CaseFormatError(source, name, f"rows have {t.shape[1]} entries, the network takes N_0 = "
                                            f"{n_inputs}{hint}")
    return t.rows(), t.dtype


def case_parts(weights: Sequence[Any], biases: Sequence[Any] | None, X: Any,
               source: str = "<arrays>") -> tuple[Network, list[list[flint.fmpq]], dict[str, str]]:
    """The pieces of :meth:`~exactident.io.case.Case.from_arrays`: network, exact sample, provenance."""
    if isinstance(weights, np.ndarray) or not isinstance(weights, Sequence):
        raise CaseFormatError(source, "weights", "expected a list of L matrices W_1..W_L")
    L = len(weights)
    if biases is None:
        biases = [None] * L
    if len(biases) != L:
        raise CaseFormatError(source, "biases", f"expected {L} vectors (one per weight matrix), found {len(biases)}")
    Ws = [Tensor(w, source, f"W{l}") for l, w in enumerate(weights, start=1)]
    bs = [None if v is None else Tensor(v, source, f"b{l}") for l, v in enumerate(biases, start=1)]
    net = network_from_tensors(Ws, bs, source)
    sample, sample_dtype = sample_rows(X, source, "X", net.widths[0])
    provenance = {"format": "arrays",
                  "weight_dtype": join_dtypes([t.dtype for t in Ws] + [t.dtype for t in bs if t is not None]),
                  "sample_dtype": sample_dtype}
    return net, sample, provenance
