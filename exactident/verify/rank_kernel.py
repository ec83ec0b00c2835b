"""``M K = 0`` for the kernel columns of a rank certificate: mod primes, or over Q.

Helpers of :mod:`exactident.verify.rank` (kept apart for size).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flint
import numpy as np

__all__: list[str] = []


def _zero_mod(image: Callable[[int], np.ndarray], K_int: list[dict[int, int]], primes: list[int]) -> bool:
    """``M K = 0`` mod every prime, column by column on the support of ``K`` (cost: rows x nonzeros)."""
    for q in primes:
        Mq = np.asarray(image(q), dtype=np.int64)
        for col in K_int:
            if not col:
                continue
            idx = np.fromiter(col.keys(), dtype=np.int64, count=len(col))
            vals = np.array([v % q for v in col.values()], dtype=np.int64)
            # residues below 2^31: each product below 2^62, reduced before the sum
            if (((Mq[:, idx] * vals) % q).sum(axis=1) % q).any():
                return False
    return True


def _product_is_zero(M: Any, K: list[dict[int, flint.fmpq]]) -> bool:
    """``M K = 0`` over Q, column by column on the support of ``K`` (cost: rows x nonzeros of ``K``)."""
    if not K:
        return True
    A = np.array(M.table(), dtype=object).reshape(M.nrows(), M.ncols())
    for col in K:
        idx = sorted(col)
        if idx and any(v != 0 for v in A[:, idx].dot(np.array([col[i] for i in idx], dtype=object))):
            return False
    return True
