"""The verifier's forward passes over every sample at once, in integer arithmetic on data scaled per layer.

Independent of the engine (:mod:`exactident.model.integer_forward` is not used): the
case's rationals are brought to integer matrices over one denominator per layer
(FLINT ``fmpq_mat.numer_denom``) and each layer is one FLINT ``fmpz_mat`` product, so
no ``Fraction`` is built except for the values a check reads
(:class:`LazyRows`).  :func:`scaled_forward` gives the pre-activations of a plain ReLU MLP,
:func:`integer_forward` those of any layer graph (each unit's negative slope applied exactly;
the facts of :mod:`exactident.verify.facts`: ties, patterns).  The ``line`` part's polynomials in ``t``
come from the primitive the engine shares, :mod:`exactident.model.line_forward`.  The
``Fraction`` versions in :mod:`exactident.verify.arith` (:func:`~exactident.verify.arith.forward_tangent`,
:func:`~exactident.verify.arith.line_forward`) are the references both are tested against.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from math import lcm
from typing import TYPE_CHECKING, Any

import flint

if TYPE_CHECKING:
    from exactident.model.network import Network

__all__ = ["LazyRows", "integer_forward", "pre_activations", "scaled_forward"]


def _lcm_den(values) -> int:
    return lcm(1, *{int(v.denominator) for v in values})  # a set: data share few denominators


def _fmpq_mat(rows, nrows: int, ncols: int) -> flint.fmpq_mat:
    """A matrix of rationals (``fmpq_mat``, or rows of Fraction / fmpq) as ``fmpq_mat``."""
    if isinstance(rows, flint.fmpq_mat):
        return rows
    return flint.fmpq_mat(nrows, ncols, [v if isinstance(v, flint.fmpq) else flint.fmpq(v.numerator, v.denominator)
                                         for row in rows for v in row])


def scaled_forward(W, b, X) -> list[tuple[list[list[Any]], int]]:
    """Pre-activations of every sample in integer arithmetic: per layer ``l = 1..L``, ``(Z_l, S_l)``
    with ``z_l(x^i)_v = Z_l[i][v] / S_l`` exactly (``Z_l`` integers, FLINT ``fmpz``; ``S_l > 0``).

    With ``h_{l-1} = H / S`` (``H`` an ``n x N_{l-1}`` integer matrix), ``W_l = W' / d_W``,
    ``b_l = b' / d_b`` (integer numerators over common denominators) and ``S' = lcm(d_W S, d_b)``::

        Z_l = (S' / (d_W S)) H W'^T + (S' / d_b) 1 b'^T,   S_l = S'

    one FLINT ``fmpz_mat`` product per layer; ``H_l = relu(Z_l)`` keeps the scale
    (``relu(0) = 0``, so ties need no side).

    Parameters
    ----------
    W : per layer an ``fmpq_mat`` ``N_l x N_{l-1}``, or rows of Fraction (``W[l-1][v][k] = W_l[v, k]``)
    b : per layer a list of Fraction or fmpq
    X : rows of Fraction or fmpq

    Examples
    --------
    ``f = 3 relu(2x + 1)`` at ``x = -1/2, 1/3``: ``z_1 = (0, 5/3)``, ``z_2 = (0, 5)``.

    >>> F = Fraction
    >>> [([[int(z) for z in row] for row in Z], S)
    ...  for Z, S in scaled_forward([[[F(2)]], [[F(3)]]], [[F(1)], [F(0)]], [[F(-1, 2)], [F(1, 3)]])]
    [([[0], [10]], 6), ([[0], [30]], 6)]
    """
    n = len(X)
    widths = [len(X[0]) if n else (W[0].ncols() if isinstance(W[0], flint.fmpq_mat) else len(W[0][0]))]
    widths += [len(bl) for bl in b]
    Hm, S_f = _fmpq_mat(X, n, widths[0]).numer_denom()
    S = int(S_f)
    out = []
    for l, (Wl, bl) in enumerate(zip(W, b), start=1):
        Wn, dW_f = _fmpq_mat(Wl, widths[l], widths[l - 1]).numer_denom()
        bn, db_f = _fmpq_mat([bl], 1, widths[l]).numer_denom()
        dW, db = int(dW_f), int(db_f)
        S_new = lcm(dW * S, db)
        bias = [v * (S_new // db) for v in bn.entries()]
        if n:
            Zm = Hm * (Wn.transpose() * (S_new // (dW * S))) + flint.fmpz_mat(n, widths[l], bias * n)
            Zl = Zm.tolist()
        else:
            Zl = []
        out.append((Zl, S_new))
        if l < len(W) and n:
            Hm = flint.fmpz_mat([[z if z > 0 else 0 for z in row] for row in Zl])
        S = S_new
    return out


def pre_activations(W, b, X) -> list[list[list[Fraction]]]:
    """``Z[i][l-1] = z_l(x^i)`` (``l = 1..L``) as Fractions, from :func:`scaled_forward`.

    Examples
    --------
    >>> F = Fraction
    >>> pre_activations([[[F(2)]], [[F(3)]]], [[F(1)], [F(0)]], [[F(-1, 2)], [F(1, 3)]])
    [[[Fraction(0, 1)], [Fraction(0, 1)]], [[Fraction(5, 3)], [Fraction(5, 1)]]]
    """
    layers = scaled_forward(W, b, X)
    return [[[Fraction(int(z), S) for z in Zl[i]] for Zl, S in layers] for i in range(len(X))]


class LazyRows(Sequence):
    """A read-only sequence of ``n`` rows, each built by ``make(i)`` on first use (then kept)."""

    def __init__(self, n: int, make) -> None:
        self._n, self._make = n, make
        self._rows: dict[int, Any] = {}

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self._n))]
        if not -self._n <= i < self._n:
            raise IndexError(i)
        i %= self._n
        if i not in self._rows:
            self._rows[i] = self._make(i)
        return self._rows[i]


def _int_rows(M: flint.fmpq_mat) -> tuple[flint.fmpz_mat, int]:
    num, den = M.numer_denom()
    return num, int(den)


def integer_forward(cn: Network, X: Sequence[Sequence[flint.fmpq]]
                    ) -> list[tuple[flint.fmpz_mat, int]]:
    """Pre-activations ``z_l(x^i) = Z_l[i, v] / S_l`` exactly, ``l = 1..L`` (``Z_l`` integers, ``S_l > 0``).

    With ``h_{l-1} = H / S``, ``W_l = W' / d_W``, ``b_l = b' / d_b`` and ``S' = lcm(d_W S, d_b)``:
    ``Z_l = (S' / (d_W S)) H W'^T + (S' / d_b) b'``; a hidden unit with slope ``a_v = p_v / q_v``
    gives ``h = z`` for ``z >= 0`` and ``a_v z`` below, kept on the scale ``S' lcm(q)``.
    """
    n = len(X)
    N0 = cn.widths[0]
    H, S = _int_rows(flint.fmpq_mat(n, N0, [v for row in X for v in row])) if n else (flint.fmpz_mat(0, N0), 1)
    out = []
    for l in range(1, cn.L + 1):
        Wn, dW = _int_rows(cn.W[l - 1])
        bn, db = _int_rows(flint.fmpq_mat(1, cn.widths[l], list(cn.b[l - 1])))
        S_new = lcm(dW * S, db)
        if n:
            Z = H * (Wn.transpose() * (S_new // (dW * S))) \
                + flint.fmpz_mat(n, cn.widths[l], [v * (S_new // db) for v in bn.entries()] * n)
        else:
            Z = flint.fmpz_mat(0, cn.widths[l])
        out.append((Z, S_new))
        if l < cn.L:
            a = cn.negative_slope[l - 1]
            q = lcm(1, *(int(x.q) for x in a))
            up = [int(x.p) * (q // int(x.q)) for x in a]
            N = cn.widths[l]
            H = flint.fmpz_mat(n, N, [z * q if z >= 0 else z * up[c] for row in Z.tolist()
                                      for c, z in enumerate(row)]) if n else flint.fmpz_mat(0, N)
            S = S_new * q
    return out

