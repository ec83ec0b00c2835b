"""A network and its sample rounded once to a float format: what every float pipeline starts from.

One float form for any network: the dense weights and biases ``W_l``, ``b_l`` rounded
once, correctly (:mod:`exactident.numeric.rounding`), the hidden units' negative-side
slopes (0 for ReLU) and the map from the free parameters to the dense entries
(``W = T theta + c``, as :class:`~exactident.model.network.Network`:
index ``-1`` a fixed entry, ``j >= 0`` an entry equal to ``theta_j``).  A plain
:class:`~exactident.model.network.Network` is ``T = I`` (every weight and bias free, in
the paper's order: per layer ``W_l`` row-major then ``b_l``), slopes 0; with fixed edges
``s_max`` (Prop. 10) their entries are fixed and the others keep that order.  Tied
entries hold the same rational, so they round to the same float.

Called by :mod:`exactident.numeric.gamma_free`, :mod:`exactident.numeric.numpy_backend`
and the other float pipelines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import flint
import numpy as np

from exactident.errors import UnsupportedCaseError
from exactident.model.fixed_edges import Parameter
from exactident.model.param_index import index_of_free
from exactident.numeric.rounding import FloatFormat, float_format, round_values

__all__ = [
    "FloatNetwork",
    "FloatSample",
    "all_parameters",
    "numpy_dtype",
    "round_sample",
    "to_float_network",
    "to_float_sample",
]


def numpy_dtype(dtype: object) -> type:
    """The numpy scalar type of a float format name/dtype (float64, float32, float16).

    Raises
    ------
    UnsupportedCaseError
        For bfloat16 (numpy has no bfloat16 arithmetic) or a non-float dtype.
    """
    fmt = float_format(dtype)
    if fmt.name == "bfloat16":
        raise UnsupportedCaseError("numpy has no bfloat16 arithmetic: use the torch backend for bfloat16")
    return {"float64": np.float64, "float32": np.float32, "float16": np.float16}[fmt.name]


def all_parameters(net: Any) -> list[Parameter]:
    """Every weight and bias in the full parameter order (per layer ``W_l`` row-major, then ``b_l``)."""
    out = []
    for l in range(1, len(net.widths)):
        out += [Parameter(l, i, j) for i in range(net.widths[l]) for j in range(net.widths[l - 1])]
        out += [Parameter(l, i) for i in range(net.widths[l])]
    return out


@dataclass
class FloatNetwork:
    """A network rounded to one float dtype (see the module docstring).

    Attributes
    ----------
    widths : tuple of int
    W, b : lists of float arrays ``(N_l, N_{l-1})`` and ``(N_l,)`` (dense values)
    W_err, b_err : lists of float64 arrays, same shapes
        Bounds on ``|rounded - exact|`` per entry (0 where rounding was exact).
    overflow, underflow : list of str
        Entries (``W_l[i,j]``, ``b_l[i]``, ``slope_l[v]``) rounded to ``+-inf`` / from nonzero to zero.
    slope : list of float arrays ``(N_l,)``, hidden layers ``l = 1..L-1``
        The negative-side slope of each unit; empty means every slope 0 (ReLU).
    W_index, b_index, slope_index : lists of int64 arrays
        ``T``: ``-1`` fixed, ``j >= 0`` equal to ``theta_j``; empty means ``T = I`` (every weight and
        bias free in the paper's order, no free slope).
    n_params : int or None
        The number of free parameters (None with ``T = I``: every weight and bias).
    """

    widths: tuple[int, ...]
    W: list[np.ndarray]
    b: list[np.ndarray]
    W_err: list[np.ndarray] = field(default_factory=list)
    b_err: list[np.ndarray] = field(default_factory=list)
    overflow: list[str] = field(default_factory=list)
    underflow: list[str] = field(default_factory=list)
    slope: list[np.ndarray] = field(default_factory=list)
    W_index: list[np.ndarray] = field(default_factory=list)
    b_index: list[np.ndarray] = field(default_factory=list)
    slope_index: list[np.ndarray] = field(default_factory=list)
    n_params: int | None = None

    def __post_init__(self) -> None:
        L, w = len(self.widths) - 1, self.widths
        if not self.slope:
            self.slope = [np.zeros(w[l], dtype=self.W[l - 1].dtype) for l in range(1, L)]
        if not self.W_index:  # T = I: every weight and bias free, in the paper's order
            self.W_index, self.b_index, k = [], [], 0
            for l in range(1, L + 1):
                self.W_index.append(np.arange(k, k + w[l] * w[l - 1], dtype=np.int64).reshape(w[l], w[l - 1]))
                k += w[l] * w[l - 1]
                self.b_index.append(np.arange(k, k + w[l], dtype=np.int64))
                k += w[l]
            self.n_params = k
        if not self.slope_index:
            self.slope_index = [np.full(w[l], -1, dtype=np.int64) for l in range(1, L)]
        if self.n_params is None:
            self.n_params = 1 + max([-1] + [int(I.max()) for I in self.W_index + self.b_index + self.slope_index
                                            if I.size])

    @property
    def L(self) -> int:
        return len(self.widths) - 1

    def kinked(self, l: int) -> np.ndarray:
        """Bool ``(N_l,)``: hidden units of layer ``l`` with a kink (a free slope or a fixed one other than 1)."""
        return (self.slope_index[l - 1] >= 0) | (self.slope[l - 1] != 1)


def _error_bound(values: np.ndarray, inexact: list[int], fmt: FloatFormat) -> np.ndarray:
    """Upper bounds on ``|fl(q) - q|`` (float64): 0 where exact, else ``u (1 + 2u) |fl(q)| + 2^(emin-p)``.

    ``|fl(q) - q| <= u |q|`` in the normal range and ``<= 2^(emin - p)`` (half the
    subnormal spacing) below it, and ``|q| <= |fl(q)| / (1 - u) <= (1 + 2u) |fl(q)|``.
    The three float64 operations evaluating it lose at most ``3 * 2^-53``
    relatively; the factor ``1 + 2^-49`` and a final step up cover that.
    """
    err = np.zeros(values.shape, dtype=np.float64)
    if inexact:
        idx = np.array(inexact)
        u = fmt.unit_roundoff
        with np.errstate(over="ignore"):  # inf entries are reported as overflow before any use
            v = np.abs(values.reshape(-1)[idx].astype(np.float64)) * (u * (1 + 2 * u))
            v = (v + np.ldexp(1.0, fmt.emin - fmt.p)) * (1 + 2.0**-49)
        err.reshape(-1)[idx] = np.nextafter(v, np.inf)
    return err


def to_float_network(net: Any, dtype: object = np.float64, free: Sequence[int] | None = None) -> FloatNetwork:
    """Round every dense weight, bias and slope once to the nearest float of ``dtype`` (:func:`.rounding.round_values`).

    Parameters
    ----------
    net : Network
        Exact values (Q).  Keeps its ``T`` (``W_index``, ``b_index``, ``slope_index``) and slopes
        (``T = I`` and slopes 0 for a plain MLP).
    dtype : float64, float32 or float16
    free : list of int, optional
        For a plain network: the dense positions of the free parameters (the paper's order, e.g.
        :func:`exactident.model.gamma.free_columns`; the others are fixed edges).  Default: all.

    Overflowing entries become ``+-inf`` and are named in ``overflow`` (the float pipelines refuse to go
    on with them).

    Raises
    ------
    UnsupportedCaseError
        For bfloat16 (no numpy arithmetic), or ``free`` given with a network that is not plain.
    """
    fmt = float_format(dtype)
    nd = numpy_dtype(fmt)
    W, b, W_err, b_err, over, under = [], [], [], [], [], []
    for l, (M, bl) in enumerate(zip(net.W, net.b), start=1):
        r = round_values(M.entries(), fmt)
        Wl: np.ndarray = np.array(r.values, dtype=np.float64).reshape(M.nrows(), M.ncols()).astype(nd)
        W.append(Wl)
        W_err.append(_error_bound(Wl, r.inexact, fmt))
        cols = M.ncols()
        over += [f"W_{l}[{k // cols},{k % cols}]" for k in r.overflow]
        under += [f"W_{l}[{k // cols},{k % cols}]" for k in r.underflow]
        rb = round_values(bl, fmt)
        bv: np.ndarray = np.array(rb.values, dtype=np.float64).astype(nd)
        b.append(bv)
        b_err.append(_error_bound(bv, rb.inexact, fmt))
        over += [f"b_{l}[{k}]" for k in rb.overflow]
        under += [f"b_{l}[{k}]" for k in rb.underflow]
    fnet = FloatNetwork(tuple(net.widths), W, b, W_err, b_err, over, under)
    if free is not None:
        if not net.is_plain():
            raise UnsupportedCaseError("free columns are for a plain network; a constrained one carries its own T")
        fnet.W_index, fnet.b_index = index_of_free(net.widths, free)
        fnet.n_params = len(free)
        return fnet
    for l, a in enumerate(net.negative_slope, start=1):
        r = round_values(list(a), fmt)
        fnet.slope[l - 1] = np.array(r.values, dtype=np.float64).astype(nd)
        over += [f"slope_{l}[{k}]" for k in r.overflow]
        under += [f"slope_{l}[{k}]" for k in r.underflow]
    fnet.W_index, fnet.b_index = list(net.W_index), list(net.b_index)
    fnet.slope_index, fnet.n_params = list(net.slope_index), net.n_params
    return fnet


@dataclass
class FloatSample:
    """The sample rounded once: ``X`` ``(n, N_0)`` in the dtype, ``err`` error bounds (float64).

    ``overflow``/``underflow`` name the entries (``X[i,j]``) rounded to ``+-inf`` / from nonzero to zero.
    """

    X: np.ndarray
    err: np.ndarray
    overflow: list[str]
    underflow: list[str]


def round_sample(X: Sequence[Sequence[flint.fmpq]], n_inputs: int, dtype: object = np.float64) -> FloatSample:
    """Round every sample entry once to ``dtype``; entries are named ``X[i,j]``."""
    fmt = float_format(dtype)
    r = round_values([v for row in X for v in row], fmt)
    Xf: np.ndarray = np.array(r.values, dtype=np.float64).reshape(len(X), n_inputs).astype(numpy_dtype(fmt))
    name = (lambda k: f"X[{k // n_inputs},{k % n_inputs}]") if n_inputs else str
    return FloatSample(Xf, _error_bound(Xf, r.inexact, fmt), [name(k) for k in r.overflow],
                       [name(k) for k in r.underflow])


def to_float_sample(X: Sequence[Sequence[flint.fmpq]], n_inputs: int, dtype: object = np.float64) -> np.ndarray:
    """The sample rounded once to ``dtype``, shape ``(n, N_0)`` (:func:`round_sample`)."""
    return round_sample(X, n_inputs, dtype).X
