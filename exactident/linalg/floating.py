"""Float64 rank and kernel by SVD, mirroring :mod:`exactident.linalg.exact`.

Tolerance rule (numpy's ``matrix_rank`` default): singular values
``> sigma_max * max(m, n) * eps`` count, ``eps`` the machine epsilon of the
matrix's dtype.  A user may pass an absolute ``tol`` instead.  The functions
also return the tolerance used and the singular values, so reports can show
how close the cut was.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["FloatRank", "consistent_band", "default_tol", "nullspace", "rank"]


@dataclass
class FloatRank:
    """Result of a float rank: ``rank``, ``tol`` used, all singular values (descending)."""

    rank: int
    tol: float
    singular_values: np.ndarray

    def near_cut(self, count: int = 2) -> list[float]:
        """Up to ``count`` singular values on each side of the cut."""
        s = self.singular_values
        lo, hi = max(0, self.rank - count), min(len(s), self.rank + count)
        return [float(v) for v in s[lo:hi]]


def default_tol(singular_values: np.ndarray, shape: tuple[int, int], dtype: np.dtype) -> float:
    """``sigma_max * max(m, n) * eps`` (numpy's ``matrix_rank`` default)."""
    if singular_values.size == 0:
        return 0.0
    return float(singular_values[0] * max(shape) * np.finfo(dtype).eps)


def rank(M: np.ndarray, tol: float | None = None, rtol: float | None = None) -> FloatRank:
    """SVD rank of a float matrix.

    Parameters
    ----------
    M : ndarray, shape (m, n), float64 or float32
    tol : float, optional
        Absolute threshold; default :func:`default_tol`.
    rtol : float, optional
        Relative threshold ``rtol * sigma_max``, used when ``tol`` is None.

    Returns
    -------
    FloatRank

    Examples
    --------
    >>> rank(np.array([[1.0, 2.0], [2.0, 4.0]])).rank
    1
    """
    if M.size == 0:
        return FloatRank(0, 0.0 if tol is None else float(tol), np.zeros(0))
    s = np.linalg.svd(M, compute_uv=False)
    if tol is not None:
        t = float(tol)
    elif rtol is not None:
        t = float(rtol * s[0])
    else:
        t = default_tol(s, M.shape, M.dtype)
    return FloatRank(int((s > t).sum()), t, s)


def consistent_band(singular_values: np.ndarray, r: int) -> tuple[float, float]:
    """Absolute tolerances that make :func:`rank` return ``r``: ``[sigma_{r+1}, sigma_r)``.

    :func:`rank` counts singular values ``> tol``, so the count is ``r``
    exactly when ``sigma_{r+1} <= tol < sigma_r`` (1-based, descending).
    Conventions: ``sigma_{r+1} = 0`` when ``r`` is the number of singular
    values, ``sigma_0 = inf``.  The band is empty when ``lo >= hi``.

    Parameters
    ----------
    singular_values : ndarray, shape (k,), descending, float
    r : int, ``0 <= r <= k``
        Usually the exact rank (over Q) of the matrix the float one rounds.

    Returns
    -------
    (lo, hi) : (float, float)
        Divide both by ``sigma_1`` for the relative (``rtol``) form.

    Raises
    ------
    InvariantViolation
        If ``r`` is outside ``[0, k]`` (an exact rank larger than the matrix: a bug).

    Examples
    --------
    >>> consistent_band(np.array([4.0, 1.0, 1e-17]), 2)
    (1e-17, 1.0)
    >>> rank(np.diag([4.0, 1.0, 1e-17]), tol=1e-17).rank, rank(np.diag([4.0, 1.0, 1e-17]), tol=1.0).rank
    (2, 1)
    """
    from exactident.errors import InvariantViolation

    s = np.asarray(singular_values)
    k = s.shape[0]
    if not 0 <= r <= k:
        raise InvariantViolation(f"rank {r} outside [0, {k}] for {k} singular values")
    lo = float(s[r]) if r < k else 0.0
    hi = float(s[r - 1]) if r > 0 else float("inf")
    return lo, hi


def nullspace(M: np.ndarray, tol: float | None = None) -> np.ndarray:
    """Float kernel basis (columns) from the SVD; a *candidate* only, never a proof."""
    _m, n = M.shape
    if M.size == 0:
        return np.eye(n)
    _, _s, vt = np.linalg.svd(M)
    r = rank(M, tol).rank
    return vt[r:].T.copy()
