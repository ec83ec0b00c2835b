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

from exactident.model.network import Network

__all__ = [
    "IntegerForward",
    "common_denominator",
    "data_denominator",
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
    return lcm(1, *(int(v.q) for v in values))


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
    s = common_denominator(flat)
    H = flint.fmpz_mat(n, N0, scaled_rows(flat, s))
    H_int, Z_int, den = [H], [], [s]
    for l in range(1, net.L + 1):
        W, b = net.W[l - 1], net.b[l - 1]
        dW = common_denominator(W.entries())
        db = common_denominator(b)
        W_int = flint.fmpz_mat(W.nrows(), W.ncols(), scaled_rows(W.entries(), dW))
        s_new = lcm(s * dW, db)
        Z = (H * W_int.transpose()) * (s_new // (s * dW))
        bias = scaled_rows(b, s_new)
        if n and any(bias):
            Z = Z + flint.fmpz_mat(n, len(bias), bias * n)
        Z_int.append(Z)
        s = s_new
        den.append(s)
        if l < net.L:
            zero = flint.fmpz(0)
            H = flint.fmpz_mat(n, len(bias), [z if z > zero else zero for z in Z.entries()])
            H_int.append(H)
    return IntegerForward(Z_int, H_int, den)
