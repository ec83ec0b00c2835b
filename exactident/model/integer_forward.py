"""Exact forward pass in integers: ``z_l(X) = Z_int[l-1] / den[l-1]`` (paper §2.1).

The rational forward pass of :mod:`exactident.model.network` is exact but pays a
gcd per entry and per operation.  Here every layer is scaled once by common
denominators, so a pre-activation matrix is one integer matrix (FLINT
``fmpz_mat``) and one positive integer ``den``: products are ``fmpz_mat``
products, signs (and so the activation pattern and the ties) are read off
integers, and nothing is ever reduced to lowest terms.

With ``X = X_int / s_0``, ``W_l = W_int / dW_l`` and ``b_l = b_int / db_l``
(common denominators), and ``h_{l-1} = H_int / s_{l-1}``::

    z_l = (H_int W_int^T) / (s_{l-1} dW_l) + b_int / db_l,
    s_l = lcm(s_{l-1} dW_l, db_l),
    Z_int = (H_int W_int^T) (s_l / (s_{l-1} dW_l)) + 1 b_int^T (s_l / db_l).

Called by :mod:`exactident.model.activation` (the activation state) and by
:mod:`exactident.model.gamma_modular` (entry bounds of the scaled ``Gamma``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from math import lcm

import flint
import numpy as np

from exactident.model.network import Network

__all__ = [
    "IntegerForward",
    "common_denominator",
    "data_denominator",
    "float_forward_bounded",
    "integer_forward",
    "scaled_rows",
]


@dataclass
class IntegerForward:
    """Integer pre-activations and hidden values.

    Attributes
    ----------
    Z_int : list of fmpz_mat
        ``Z_int[l-1]``, shape ``(n, N_l)``, ``l = 1..L``; ``z_l(X) = Z_int[l-1] / den[l]``.
    H_int : list of fmpz_mat
        ``H_int[l]`` for ``l = 0..L-1``: ``h_0 = X``, ``h_l = relu(z_l)``; ``h_l = H_int[l] / den[l]``.
    den : list of int
        ``den[l] = s_l > 0`` for ``l = 0..L`` (``s_0`` is the common denominator of ``X``).
    """

    Z_int: list[flint.fmpz_mat]
    H_int: list[flint.fmpz_mat]
    den: list[int]

    def Z(self) -> list[flint.fmpq_mat]:
        """``z_l(X)`` as ``fmpq_mat`` (Q), ``l = 1..L``."""
        return [flint.fmpq_mat(Zi) / flint.fmpq(self.den[l + 1]) for l, Zi in enumerate(self.Z_int)]


def common_denominator(values: Iterable[flint.fmpq]) -> int:
    """``lcm`` of the denominators (1 for no values).

    Examples
    --------
    >>> common_denominator([flint.fmpq(1, 4), flint.fmpq(5, 6), flint.fmpq(2)])
    12
    """
    return lcm(1, *{int(v.q) for v in values})  # a set: data share few denominators


def data_denominator(net: Network, X: Sequence[Sequence[flint.fmpq]]) -> int:
    """``lcm`` of every denominator of ``W``, ``b`` and ``X``.

    A prime dividing it cannot be used to reduce the data mod p
    (:mod:`exactident.linalg.modular`).

    Examples
    --------
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[flint.fmpq(2, 3)]]), flint.fmpq_mat([[3]])],
    ...               [[flint.fmpq(1, 5)], [flint.fmpq(0)]])
    >>> data_denominator(net, [[flint.fmpq(1, 7)]])
    105
    """
    d = common_denominator(v for row in X for v in row)
    for W, b in zip(net.W, net.b):
        d = lcm(d, common_denominator(W.entries()), common_denominator(b))
    return d


def scaled_rows(values: Sequence[flint.fmpq], d: int) -> list[int]:
    """``d * v`` as Python ints (``d`` must be a multiple of every denominator)."""
    return [int(v.p) * (d // int(v.q)) for v in values]


def integer_forward(net: Network, X: Sequence[Sequence[flint.fmpq]]) -> IntegerForward:
    """Exact pre-activations of ``X`` with integer matrices.

    Parameters
    ----------
    net : Network
    X : n rows of N_0 fmpq

    Returns
    -------
    IntegerForward
        ``Z_int[l-1] / den[l] == z_l(X)`` exactly for ``l = 1..L``.

    Examples
    --------
    The hand-checked network of docs/theory.md ``f = 3 relu(2x + 1)`` at ``0, 1, -1/2``:

    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])],
    ...               [[flint.fmpq(1)], [flint.fmpq(0)]])
    >>> fw = integer_forward(net, [[0], [1], [flint.fmpq(-1, 2)]])
    >>> [Z.entries() for Z in fw.Z_int], fw.den
    ([[2, 6, 0], [6, 18, 0]], [2, 2, 2])
    >>> [Z.entries() for Z in fw.Z()]
    [[1, 3, 0], [3, 9, 0]]
    """
    n, N0 = len(X), net.widths[0]
    flat = [flint.fmpq(v) for row in X for v in row]
    if len(flat) > _REMEMBER_ENTRIES:  # a large sample: not kept alive (memory), computed each time
        return _integer_forward(net, flat, n, N0)
    key = (tuple(net.widths), flat, [flint.fmpq_mat(W) for W in net.W], [[flint.fmpq(v) for v in b] for b in net.b])
    for t, (k, fw) in enumerate(_LAST):
        if k == key:  # the same network and sample by value (compared, not trusted by identity)
            _LAST.insert(0, _LAST.pop(t))
            return IntegerForward(list(fw.Z_int), list(fw.H_int), list(fw.den))
    fw = _integer_forward(net, flat, n, N0)
    _LAST.insert(0, (key, fw))
    del _LAST[_REMEMBERED:]
    return IntegerForward(list(fw.Z_int), list(fw.H_int), list(fw.den))


#: The last ``(key, result)`` pairs of :func:`integer_forward`, most recent first: one case's stages (activation
#: state, entry bounds, semi-local and shifted kernels, structural search) ask for the same forward pass up to
#: six times, between passes on subsets of the sample.
_LAST: list = []
_REMEMBERED = 4
#: Samples of more entries than this are not remembered (the key and the result would stay in memory).
_REMEMBER_ENTRIES = 200_000


def _integer_forward(net: Network, flat: list[flint.fmpq], n: int, N0: int) -> IntegerForward:
    """:func:`integer_forward` on the flattened sample (uncached)."""
    # numerators over the lcm of the denominators, in C (the same integers as scaled_rows(flat, lcm))
    H, s_f = flint.fmpq_mat(n, N0, flat).numer_denom() if n and N0 else (flint.fmpz_mat(n, N0), 1)
    s = int(s_f)
    H_int, Z_int, den = [H], [], [s]
    ones = flint.fmpz_mat(n, 1, [1] * n)  # (an n x 1 column; unused when n = 0)
    for l in range(1, net.L + 1):
        W, b = net.W[l - 1], net.b[l - 1]
        dW = common_denominator(W.entries())
        db = common_denominator(b)
        W_int = flint.fmpz_mat(W.nrows(), W.ncols(), scaled_rows(W.entries(), dW))
        s_new = lcm(s * dW, db)
        Z = (H * W_int.transpose()) * (s_new // (s * dW))
        bias = scaled_rows(b, s_new)
        if n and any(bias):
            Z = Z + ones * flint.fmpz_mat(1, len(bias), bias)  # the bias row on every sample, one C product
        Z_int.append(Z)
        s = s_new
        den.append(s)
        if l < net.L:
            zero = flint.fmpz(0)
            H = flint.fmpz_mat(n, len(bias), [z if z > zero else zero for z in Z.entries()])
            H_int.append(H)
    return IntegerForward(Z_int, H_int, den)


#: Unit roundoff of binary64.
_U = 2.0**-53


def _to_float_array(values: Sequence[flint.fmpq], shape: tuple[int, int]) -> np.ndarray | None:
    """Correctly rounded float64 values (``int / int``), or None if one is out of range."""
    try:
        fracs = [flint.fmpq(v) for v in values]
        out = np.array([int(v.p) / int(v.q) for v in fracs] or [0.0], dtype=np.float64)[:len(values)]
    except OverflowError:
        return None
    if not np.all(np.isfinite(out)):
        return None
    return out.reshape(shape)


def float_forward_bounded(net: Network, X: Sequence[Sequence[flint.fmpq]],
                          ) -> tuple[list[np.ndarray], np.ndarray] | None:
    """Activation pattern from a float64 forward pass, with the samples it cannot vouch for.

    With ``x^ = fl(x)`` (correctly rounded, ``|x^ - x| <= u' |x^|``, ``u' = u / (1 - u)``,
    ``u = 2**-53``) and any summation order in the products, the error of the
    computed pre-activation is bounded componentwise by (Higham, *Accuracy and
    Stability of Numerical Algorithms*, §3.1, ``gamma_k = k u / (1 - k u)``)::

        e_l <= gamma_{k+3} (|W^| |h^| + |b^|) + (1 + u') |W^| e_{l-1},   e_0 = u' |X^|,

    ``k = N_{l-1}``, because ``|z^ - z| <= |fl(W^ h^ + b^) - (W^ h^ + b^)| + |W^ - W| |h^|
    + |W| |h^ - h| + |b^ - b|`` and ReLU is 1-Lipschitz (``|h^ - h| <= e``).  The bound
    is itself computed in floats, so it is inflated by ``1 + 2**-20`` (far above the
    relative rounding of its few operations) plus an absolute ``2**-1000`` (underflow);
    subnormal inputs and weights, whose conversion error is absolute (``<= 2**-1075``),
    add ``2**-1074`` to ``e_0`` and ``2**-1074 (sum |h^| + 1)`` per layer.
    A sample is *certain* when every hidden pre-activation satisfies ``|z^| > e``: its
    sign is then the exact one (and it is no tie).

    Returns
    -------
    (pattern, uncertain) or None
        ``pattern[l-1]`` bool ``(n, N_l)`` for hidden layers, valid on certain samples;
        ``uncertain`` bool ``(n,)``.  None when a value does not fit in a float64
        (the caller then uses the exact pass for everything).
    """
    n = len(X)
    h = _to_float_array([v for row in X for v in row], (n, net.widths[0]))
    if h is None:
        return None
    tiny = 2.0**-1074  # conversion error of a subnormal value is absolute, up to half of this
    e = np.abs(h) * (_U / (1 - _U)) + tiny
    uncertain = np.zeros(n, dtype=bool)
    pattern = []
    for l in net.hidden_layers():
        W = _to_float_array(list(net.W[l - 1].entries()), (net.widths[l], net.widths[l - 1]))
        b = _to_float_array([flint.fmpq(v) for v in net.b[l - 1]], (1, net.widths[l]))
        if W is None or b is None:
            return None
        k = net.widths[l - 1]
        gamma = (k + 3) * _U / (1 - (k + 3) * _U)
        with np.errstate(over="ignore", invalid="ignore"):
            z = h @ W.T + b
            absW = np.abs(W)
            # the last term: subnormal W^ and b^ (absolute conversion errors) times |h^|
            e = (gamma * (np.abs(h) @ absW.T + np.abs(b)) + (1 + 2 * _U) * (e @ absW.T)
                 + tiny * (np.abs(h).sum(axis=1, keepdims=True) + 1)) * (1 + 2.0**-20) + 2.0**-1000
        if not (np.all(np.isfinite(z)) and np.all(np.isfinite(e))):
            return None
        uncertain |= (np.abs(z) <= e).any(axis=1)
        pattern.append(z >= 0)
        h = np.maximum(z, 0.0)
    return pattern, uncertain
