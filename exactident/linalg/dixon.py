"""Dixon's p-adic lifting: ``B X = R`` over Q from one inverse of ``B`` mod p, stopping early.

``x_0 = B^{-1} R mod p``, ``R_1 = (R - B x_0) / p`` (exact in Z), ``x_1 = B^{-1} R_1 mod p``, ...
gives ``X = sum_i p^i x_i mod p^k``; rational reconstruction of that residue is tried after
1, 2, 3, 4, 6, 9, ... steps and accepted only when ``B X = R`` holds exactly over Q, so a small
solution (the usual kernel vectors of a network's ``Gamma``) costs a few steps where a solver
that iterates to the Hadamard bound would take thousands.  The inverse is a BLAS inverse mod a
prime below ``2**21`` (:mod:`exactident.linalg.blas_modp`); the products ``B x_i`` are FLINT
``fmpz_mat`` products.

Called by :mod:`exactident.ranks.intervals`.
"""

from __future__ import annotations

import flint
import numpy as np

from exactident.linalg.blas_modp import matmul_blas, to_symmetric
from exactident.linalg.modular import rational_reconstruction

__all__ = ["dixon_solve"]


def dixon_solve(B: flint.fmpz_mat, R: flint.fmpz_mat, B_inv: np.ndarray, p: int,
                max_steps: int = 400) -> flint.fmpq_mat | None:
    """The solution of ``B X = R`` over Q, or None within ``max_steps`` lifting steps.

    Parameters
    ----------
    B : fmpz_mat, ``r x r``, nonsingular mod p
    R : fmpz_mat, ``r x k``
    B_inv : int64 array ``r x r``
        ``B^{-1} mod p``.
    p : int
        A prime below ``2**21``.

    Returns
    -------
    fmpq_mat or None
        ``X`` with ``B X = R`` checked exactly (None: not found within the steps).

    Examples
    --------
    >>> B = flint.fmpz_mat([[2, 1], [1, 3]]); R = flint.fmpz_mat([[1], [2]])
    >>> p = 1048583
    >>> from exactident.linalg.blas_modp import inverse_blas
    >>> import numpy as np
    >>> dixon_solve(B, R, inverse_blas(np.array([[2, 1], [1, 3]]), p), p)
    [1/5]
    [3/5]
    """
    r, k = R.nrows(), R.ncols()
    Binv = to_symmetric(B_inv, p)
    b = R
    acc = np.zeros((r, k), dtype=object)
    modulus = 1
    next_try = 1
    Bq = flint.fmpq_mat(B)
    Rq = flint.fmpq_mat(R)
    for step in range(1, max_steps + 1):
        b_np = np.array([int(v) for v in b.entries()], dtype=object).reshape(r, k)
        x = matmul_blas(Binv, to_symmetric((b_np % p).astype(np.int64), p), p).astype(np.int64)
        acc = acc + x.astype(object) * modulus
        modulus *= p
        diff = b - B * flint.fmpz_mat(r, k, [int(v) for v in x.ravel()])
        b = flint.fmpz_mat(r, k, [int(v) // p for v in diff.entries()])  # exact: B x = b mod p
        if step < next_try and step < max_steps:  # the last step tries too (a capped lift wastes no steps)
            continue
        next_try = max(step + 1, int(step * 1.5))
        entries = []
        for v in acc.ravel():
            rr = rational_reconstruction(int(v), modulus)
            if rr is None:
                break
            entries.append(flint.fmpq(*rr))
        else:
            X = flint.fmpq_mat(r, k, entries)
            if Bq * X == Rq:
                return X
    return None
