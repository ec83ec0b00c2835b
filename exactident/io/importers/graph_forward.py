"""A float64 forward pass of an ``exactident-case/2`` dict, with a rigorous rounding bound; the forward check.

Independent of the compiler: it reads the dict's layers (``"p/q"`` strings to
float64: every imported number is a float widened exactly, so nothing is rounded)
and evaluates them on a batch in numpy.  Along the way it propagates the forward
rounding-error bound of a framework computing the same graph in a lower precision
``u`` (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed.,
Sec. 3.5): an affine output with ``k`` terms per entry (linear, convolution,
average pooling) is off by at most ``gamma_{k+3} (|W| |h| + |b|)`` plus the input
error through ``|W|``; max pooling rounds nothing and is 1-Lipschitz (the largest input error of the
window); ReLU is 1-Lipschitz, a leaky ReLU or PReLU of slope ``a``
is ``max(1, |a|)``-Lipschitz with one more rounding; an add of ``m`` tensors adds
``gamma_m`` times their magnitudes.  The bound is doubled to cover both sides and
any summation order, as :func:`~exactident.io.importers.forward_check.forward_bound`
does for plain MLPs.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from exactident.errors import CaseFormatError
from exactident.io.importers.forward_check import UNIT_ROUNDOFF, compare_outputs

__all__ = ["graph_bound", "graph_forward", "graph_forward_check"]


def _num(v: Any) -> float:
    return float(Fraction(str(v)))  # correctly rounded (exact for every imported float)


def _array(value: Any) -> np.ndarray:
    return np.vectorize(_num, otypes=[np.float64])(np.array(value, dtype=object))


def _windows(x: np.ndarray, k: list[int], s: list[int], p: list[int]) -> tuple[np.ndarray, list[int]]:
    """Zero-pad ``x`` (n, C, *spatial) and give the output size of each spatial axis."""
    pad = [(0, 0), (0, 0)] + [(pi, pi) for pi in p]
    xp = np.pad(x, pad)
    out = [(x.shape[2 + i] + 2 * p[i] - k[i]) // s[i] + 1 for i in range(len(k))]
    return xp, out


def _conv(x: np.ndarray, W: np.ndarray, s: list[int], p: list[int]) -> np.ndarray:
    """Cross-correlation (PyTorch's ``conv``): ``y[n,o,i,j] = sum W[o,c,a,b] x[n,c,i s+a, j s+b]``."""
    d = W.ndim - 2
    k = list(W.shape[2:])
    xp, out = _windows(x, k, s, p)
    y = np.zeros((x.shape[0], W.shape[0], *out))
    for offset in np.ndindex(*k):
        idx = tuple(slice(offset[i], offset[i] + s[i] * (out[i] - 1) + 1, s[i]) for i in range(d))
        patch = xp[(slice(None), slice(None), *idx)]
        y += np.einsum("nc...,oc->no...", patch, W[(slice(None), slice(None), *offset)])
    return y


def _pool(x: np.ndarray, k: list[int], s: list[int], p: list[int]) -> np.ndarray:
    d = len(k)
    xp, out = _windows(x, k, s, p)
    y = np.zeros((x.shape[0], x.shape[1], *out))
    for offset in np.ndindex(*k):
        idx = tuple(slice(offset[i], offset[i] + s[i] * (out[i] - 1) + 1, s[i]) for i in range(d))
        y += xp[(slice(None), slice(None), *idx)]
    return y / float(np.prod(k))


def _maxpool(x: np.ndarray, layer: dict[str, Any], fill: float) -> np.ndarray:
    """Max pooling of ``x`` (n, C, *spatial); padded positions hold ``fill`` (``-inf``: they never win)."""
    k, s = list(layer["kernel_size"]), list(layer["stride"])
    d = len(k)
    pads = list(layer.get("padding", [0] * d))
    begin, end = (pads[:d], pads[d:]) if len(pads) == 2 * d else (pads, pads)
    dil = list(layer.get("dilation", [1] * d))
    out = []
    for i in range(d):
        span = x.shape[2 + i] + begin[i] + end[i] - dil[i] * (k[i] - 1) - 1
        m = (-(-span // s[i]) if layer.get("ceil_mode") else span // s[i]) + 1
        if layer.get("ceil_mode") and (m - 1) * s[i] >= x.shape[2 + i] + begin[i]:
            m -= 1  # a window starting in the end padding is dropped
        out.append(m)
    extra = [max(0, (out[i] - 1) * s[i] + dil[i] * (k[i] - 1) + 1 - x.shape[2 + i] - begin[i]) for i in range(d)]
    xp = np.pad(x, [(0, 0), (0, 0)] + [(begin[i], extra[i]) for i in range(d)], constant_values=fill)
    y = np.full((x.shape[0], x.shape[1], *out), -np.inf)
    for offset in np.ndindex(*k):
        idx = tuple(slice(offset[i] * dil[i], offset[i] * dil[i] + s[i] * (out[i] - 1) + 1, s[i]) for i in range(d))
        y = np.maximum(y, xp[(slice(None), slice(None), *idx)])
    return y


def _channel(a: np.ndarray, h: np.ndarray) -> np.ndarray:
    """A per-channel vector broadcast along axis 1 of ``h``."""
    return a.reshape((1, a.size) + (1,) * (h.ndim - 2)) if a.size > 1 else a.reshape(())


def graph_bound(doc: dict[str, Any], X: np.ndarray, dtypes: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Outputs of the graph on ``X`` and the bound on a framework's difference from them.

    Parameters
    ----------
    doc : dict
        An ``exactident-case/2`` dict (:meth:`~exactident.io.importers.graph.LayerGraph.document`).
    X : float64 ndarray ``(n, prod(input_shape))``
    dtypes : sequence of str
        The dtypes the framework computes in (the largest unit roundoff is used).

    Returns
    -------
    (outputs, bound) : float64 ndarrays ``(n, N_L)``
    """
    u = max([UNIT_ROUNDOFF.get(n, 2.0**-24) for n in dtypes] or [2.0**-53]) + 2.0**-53

    def gamma(k: int) -> float:
        return k * u / (1 - k * u)

    n = X.shape[0]
    x0 = np.asarray(X, dtype=np.float64).reshape(n, *doc["input_shape"])
    val: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {"input": (x0, np.abs(x0), np.zeros_like(x0))}
    for layer in doc["layers"]:
        op = layer["op"]
        ins = [val[name] for name in layer["inputs"]]
        h, mag, err = ins[0]
        if op in ("linear", "conv1d", "conv2d"):
            W = _array(layer["weight"])
            b = np.zeros(W.shape[0]) if layer["bias"] is None else _array(layer["bias"])
            s, p = list(layer.get("stride", [])), list(layer.get("padding", []))

            def f(z: np.ndarray, M: np.ndarray, op: str = op, s: list[int] = s, p: list[int] = p) -> np.ndarray:
                return z @ M.T if op == "linear" else _conv(z, M, s, p)

            y = f(h, W)
            bb = _channel(b, y) if op != "linear" else b
            k = int(np.prod(W.shape[1:])) + 3
            absW = np.abs(W)
            mag_new = f(mag, absW) + np.abs(bb)
            val[layer["name"]] = (y + bb, mag_new, f(err, absW) + gamma(k) * mag_new)
        elif op in ("avgpool1d", "avgpool2d"):
            k_, s, p = list(layer["kernel_size"]), list(layer["stride"]), list(layer["padding"])
            mag_new = _pool(mag, k_, s, p)
            val[layer["name"]] = (_pool(h, k_, s, p), mag_new,
                                  _pool(err, k_, s, p) + gamma(int(np.prod(k_)) + 3) * mag_new)
        elif op in ("maxpool1d", "maxpool2d"):  # a max of floats rounds nothing and is 1-Lipschitz
            val[layer["name"]] = (_maxpool(h, layer, -np.inf), _maxpool(mag, layer, 0.0), _maxpool(err, layer, 0.0))
        elif op == "relu":
            val[layer["name"]] = (np.maximum(h, 0), mag, err)
        elif op in ("leaky_relu", "prelu"):
            a = np.array([_num(layer["negative_slope"])]) if op == "leaky_relu" else _array(layer["weight"])
            a_b = _channel(a, h)
            c = max(1.0, float(np.abs(a).max()))
            val[layer["name"]] = (np.where(h > 0, h, a_b * h), c * mag, c * err + gamma(1) * c * mag)
        elif op == "flatten":
            val[layer["name"]] = (h.reshape(n, -1), mag.reshape(n, -1), err.reshape(n, -1))
        elif op == "add":
            mag_new = np.sum([m for _, m, _ in ins], axis=0)
            val[layer["name"]] = (np.sum([v for v, _, _ in ins], axis=0), mag_new,
                                  np.sum([e for _, _, e in ins], axis=0) + gamma(len(ins)) * mag_new)
        elif op == "identity":
            val[layer["name"]] = ins[0]
        else:
            raise CaseFormatError(str(doc.get("name", "<case>")), f"layers.{layer['name']}.op",
                                  f"unknown op {op!r}")
    h, _, err = val[doc["output"]]
    return h.reshape(n, -1), 2 * err.reshape(n, -1) + np.finfo(np.float64).tiny


def graph_forward(doc: dict[str, Any], X: np.ndarray) -> np.ndarray:
    """The graph's outputs on ``X`` (float64, ``(n, N_L)``)."""
    return graph_bound(doc, X, ["float64"])[0]


def graph_forward_check(doc: dict[str, Any], X: np.ndarray, reference: np.ndarray, dtypes: Sequence[str],
                        source: str, what: str) -> str:
    """Compare the framework's outputs ``reference`` on ``X`` with the graph's, within the rounding bound.

    Returns
    -------
    str
        A one-line summary for ``provenance["forward_check"]``.

    Raises
    ------
    CaseFormatError
        Shapes differ, or an output differs past the bound (naming the first sample and output).
    """
    h, bound = graph_bound(doc, X, dtypes)
    return compare_outputs(h, bound, np.asarray(reference, dtype=np.float64).reshape(len(X), -1), source, what)
