"""Exact rank and kernel over Q with FLINT.

Algorithm choice: a rational matrix is scaled row by row to an integer
matrix (same rank, same kernel), and FLINT's ``fmpz_mat`` routines do the
fraction-free elimination.  ``fmpq_mat`` has no ``nullspace`` and
``fmpz_mat.nullspace`` pads with zero columns (``docs/pitfalls.md``), both handled here.
"""

from __future__ import annotations

from math import lcm

import flint

__all__ = ["nullspace", "rank", "to_integer_rows"]


def to_integer_rows(M: flint.fmpq_mat) -> flint.fmpz_mat:
    """Scale each row of ``M`` by the lcm of its denominators.

    Returns
    -------
    fmpz_mat, same shape; same rank and same right kernel as ``M``.
    """
    m, n = M.nrows(), M.ncols()
    rows = M.table()
    out: list[int] = []
    for row in rows:
        d = lcm(*(int(v.q) for v in row)) if row else 1
        out.extend(int(v.p) * (d // int(v.q)) for v in row)
    return flint.fmpz_mat(m, n, out)


def rank(M: flint.fmpq_mat | flint.fmpz_mat) -> int:
    """Exact rank over Q.

    Examples
    --------
    >>> rank(flint.fmpq_mat([[1, flint.fmpq(1, 2)], [2, 1]])), rank(flint.fmpq_mat(0, 3))
    (1, 0)
    """
    if M.nrows() == 0 or M.ncols() == 0:
        return 0
    Z = M if isinstance(M, flint.fmpz_mat) else to_integer_rows(M)
    return int(Z.rank())


def nullspace(M: flint.fmpq_mat | flint.fmpz_mat) -> flint.fmpq_mat:
    """A basis of the right kernel ``{v : M v = 0}`` as columns, over Q.

    Returns
    -------
    fmpq_mat, shape ``(ncols, nullity)``

    Examples
    --------
    >>> nullspace(flint.fmpq_mat([[1, 2, 3], [2, 4, 6]])).ncols()
    2
    """
    n = M.ncols()
    if M.nrows() == 0:
        return flint.fmpq_mat(n, n, [int(i == j) for i in range(n) for j in range(n)])
    Z = M if isinstance(M, flint.fmpz_mat) else to_integer_rows(M)
    K, nullity = Z.nullspace()
    nullity = int(nullity)
    return flint.fmpq_mat(n, nullity, [K[i, j] for i in range(n) for j in range(nullity)])
