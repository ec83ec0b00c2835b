"""Certified bounds on the smallest nonzero singular value of an exact rational matrix.

For ``A`` in ``Q^{m x n}`` of exact rank ``r`` (known from the engine),
``sigma_{r+1} = ... = 0`` exactly and ``sigma_r > 0``.  This module returns
floats ``lo <= sigma_r <= hi`` (and ``lo1 <= sigma_1 <= hi1``) that are
*proved*: floats only propose candidates, exact rational arithmetic (FLINT
``fmpq_mat``) accepts them.

Lower bound (docs/tolerances.md, "Certified conditioning").  Let ``K`` be any
rational matrix with ``A K = 0`` (checked exactly), ``c >= 0`` and ``mu > 0``
rationals, ``G = A^T A`` and ``S = G + c K K^T - mu I``.  If ``S`` is positive
definite then for every unit ``u`` in the row space of ``A`` (orthogonal to
``ker A``, so ``K^T u = 0``): ``|A u|^2 - mu = u^T S u > 0``; the minimum of
``|A u|^2`` over unit ``u`` in the row space is ``sigma_r^2``, hence
``sigma_r^2 > mu``.  Positive definiteness of the exact ``S`` is proved with a
float Cholesky factor ``L`` of ``D S D`` (``D`` a diagonal of powers of two):
with ``E = D S D - L L^T`` computed exactly,
``D S D = L (I + L^{-1} E L^{-T}) L^T`` and
``||L^{-1} E L^{-T}||_2 <= ||L^{-1}||_F^2 ||E||_F``; when that is ``< 1``
(``||L^{-1}||_F`` bounded through a float inverse and its exact residual)
``D S D``, hence ``S``, is positive definite.  Small matrices the float
Cholesky cannot resolve go to an exact LDL^T (:func:`pd_exact`).

Upper bound: for any nonzero ``u = A^T y`` (in the row space),
``sigma_r^2 <= |A u|^2 / |u|^2`` (Courant-Fischer on the row space), computed
exactly.  ``sigma_1``: ``|A v|^2/|v|^2 <= sigma_1^2`` for any ``v``, and
``sigma_1^2 < mu`` when ``mu I - G`` is positive definite (same test).

Called by :mod:`exactident.crosscheck.certified`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from exactident.errors import InvariantViolation
from exactident.linalg.exact import nullspace

__all__ = ["SigmaBounds", "certified_sigma_bounds", "float_above", "float_below", "pd_certified", "pd_exact",
           "perturbation_bound"]

#: Tightness factors tried for the lower bound candidate ``mu = ((1 - d) sigma_r_float)^2``.
_DELTAS = (1e-6, 1e-3, 0.05, 0.5, 0.9, 0.99)


@dataclass
class SigmaBounds:
    """Certified ``sigma_r`` and ``sigma_1`` bounds (floats, rounded outward).

    ``sigma_r_lo`` is ``None`` when no candidate could be certified (the
    float Cholesky could not resolve it); ``reason`` then says why.
    """

    rank: int
    shape: tuple[int, int]
    sigma_r_lo: float | None
    sigma_r_hi: float | None
    sigma_1_lo: float | None
    sigma_1_hi: float | None
    sigma_r_float: float
    sigma_1_float: float
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (``nan`` becomes ``None``: JSON has no nan)."""
        d = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in self.__dict__.items()}
        return dict(d, shape=list(self.shape))


def _q(x: float) -> flint.fmpq:
    n, d = float(x).as_integer_ratio()
    return flint.fmpq(n, d)


def _qf(q: flint.fmpq) -> float:
    """Nearest float of a rational (Python's int / int is correctly rounded)."""
    try:
        return int(q.p) / int(q.q)
    except OverflowError:
        return math.inf if q > 0 else -math.inf


def float_below(q2: flint.fmpq) -> float:
    """Largest float ``f >= 0`` found with ``f^2 <= q2`` exactly (a certified lower bound on ``sqrt(q2)``)."""
    if q2 <= 0:
        return 0.0
    f = math.sqrt(_qf(q2))
    while f > 0 and _q(f) ** 2 > q2:
        f = math.nextafter(f, 0.0)
    return f


def float_above(q2: flint.fmpq) -> float:
    """A float ``f`` with ``f^2 >= q2`` exactly (a certified upper bound on ``sqrt(q2)``)."""
    if q2 <= 0:
        return 0.0
    f = math.sqrt(_qf(q2))
    while math.isfinite(f) and _q(f) ** 2 < q2:
        f = math.nextafter(f, math.inf)
    return f


def _to_float(M: flint.fmpq_mat) -> np.ndarray:
    return np.array([[_qf(v) for v in row] for row in M.table()], dtype=np.float64).reshape(M.nrows(), M.ncols())


def _from_float(a: np.ndarray) -> flint.fmpq_mat:
    return flint.fmpq_mat(a.shape[0], a.shape[1], [_q(v) for v in a.ravel()])


def pd_certified(S: flint.fmpq_mat) -> bool:
    """Proof that the exact symmetric ``S`` is positive definite (``False``: not proved).

    A float Cholesky ``L`` of ``D S D`` (``D`` powers of two equilibrating the
    diagonal) is accepted when ``||L^{-1}||_F^2 ||D S D - L L^T||_F < 1``
    (residual exact in Q; ``||L^{-1}||_F <= ||Y||_F / (1 - ||I - L Y||_F)`` for a
    float inverse ``Y``, also exact).
    """
    n = S.nrows()
    if n == 0:
        return True
    diag = [S[i, i] for i in range(n)]
    if any(d <= 0 for d in diag):
        return False
    # d_i = 2^-round(log2 sqrt(S_ii)): exact, keeps the scaled diagonal near 1.
    exps = [-round(math.log2(max(_qf(d), 1e-300)) / 2) for d in diag]
    scale = [flint.fmpq(2) ** e if e >= 0 else flint.fmpq(1, 2 ** (-e)) for e in exps]
    Dm = flint.fmpq_mat(n, n, [scale[i] if i == j else 0 for i in range(n) for j in range(n)])
    T = Dm * S * Dm
    try:
        L = np.linalg.cholesky(_to_float(T))
    except np.linalg.LinAlgError:
        return False
    if not np.all(np.isfinite(L)) or np.any(np.diag(L) <= 0):
        return False
    Lq = _from_float(L)
    E = T - Lq * Lq.transpose()
    e2 = sum((v * v for v in E.entries()), flint.fmpq(0))
    # ||L^{-1}||_F <= ||Y||_F / (1 - ||I - L Y||_F) for the float inverse Y (all in Q).
    Y = np.linalg.inv(L)
    if not np.all(np.isfinite(Y)):
        return False
    Yq = _from_float(Y)
    R = _identity(n, flint.fmpq(1)) - Lq * Yq
    rho2 = sum((v * v for v in R.entries()), flint.fmpq(0))
    if rho2 >= 1:
        return False
    y2 = sum((v * v for v in Yq.entries()), flint.fmpq(0))
    # Need y2 / (1 - rho)^2 * sqrt(e2) < 1, i.e. y2^2 e2 < (1 - rho)^4: bound rho above by a float.
    rho = _q(float_above(rho2))
    if rho >= 1:
        return False
    return y2 * y2 * e2 < (1 - rho) ** 4


def _pow2(e: int) -> flint.fmpq:
    return flint.fmpq(2 ** e) if e >= 0 else flint.fmpq(1, 2 ** (-e))


def _scale_columns(K: flint.fmpq_mat) -> flint.fmpq_mat:
    """``K`` with each column multiplied by a power of two so that its largest entry is in ``[1, 2)``."""
    n, k = K.nrows(), K.ncols()
    t = K.table()
    scale = []
    for j in range(k):
        big = max((abs(t[i][j]) for i in range(n)), default=flint.fmpq(0))
        e = 0 if big == 0 else int(big.p).bit_length() - int(big.q).bit_length()
        scale.append(_pow2(-e))
    return flint.fmpq_mat(n, k, [t[i][j] * scale[j] for i in range(n) for j in range(k)])


def pd_exact(S: flint.fmpq_mat) -> bool:
    """Exact test: symmetric ``S`` is positive definite iff every pivot of its LDL^T (no pivoting) is ``> 0``.

    (The pivots are the ratios of consecutive leading principal minors: Sylvester's criterion.)
    """
    n = S.nrows()
    a = [list(row) for row in S.table()]
    for k in range(n):
        p = a[k][k]
        if p <= 0:
            return False
        for i in range(k + 1, n):
            f = a[i][k] / p
            if f != 0:
                ai, ak = a[i], a[k]
                for j in range(k + 1, n):
                    ai[j] -= f * ak[j]
    return True


def _pd(S: flint.fmpq_mat, exact_limit: int) -> bool:
    return pd_certified(S) or (S.nrows() <= exact_limit and pd_exact(S))


def _identity(n: int, mu: flint.fmpq) -> flint.fmpq_mat:
    return flint.fmpq_mat(n, n, [mu if i == j else 0 for i in range(n) for j in range(n)])


def _rayleigh(A: flint.fmpq_mat, u: flint.fmpq_mat) -> flint.fmpq | None:
    den = (u.transpose() * u)[0, 0]
    if den == 0:
        return None
    Au = A * u
    return (Au.transpose() * Au)[0, 0] / den


def _row_space_rayleigh(A: flint.fmpq_mat, K: flint.fmpq_mat, Vt: np.ndarray, r: int,
                        exhaustive: bool) -> flint.fmpq | None:
    """Smallest exact Rayleigh quotient of the float right singular vectors projected on ``ker(A)``'s
    orthogonal complement (``v_r`` first; every row when ``exhaustive``, else the first that is not 0)."""
    n = Vt.shape[1]
    best = None
    for i in [r - 1, *range(r, n), *range(r - 2, -1, -1)]:
        v = _from_float(Vt[i:i + 1, :].T)
        if K.ncols():
            v = v - K * (K.transpose() * K).solve(K.transpose() * v)
        R = _rayleigh(A, v)
        if R is not None and (best is None or best > R):
            best = R
            if not exhaustive:
                break
    return best


def certified_sigma_bounds(M: flint.fmpq_mat, r: int, max_size: int = 300,
                           exact_limit: int = 60, refine_limit: int = 24) -> SigmaBounds | None:
    """Certified bounds on ``sigma_r`` (smallest nonzero) and ``sigma_1`` of the exact ``M``.

    Parameters
    ----------
    M : fmpq_mat, shape ``(m, n)``, entries in Q
    r : int
        The exact rank of ``M`` (checked: the exact kernel must have dimension ``n - r``).
    max_size : int
        Gram matrices larger than this (``min(m, n)``) are not attempted.
    exact_limit : int
        When the float Cholesky certificate fails, Gram matrices up to this size
        are tested by exact rational LDL^T (:func:`pd_exact`).
    refine_limit : int
        Gram matrices up to this size have ``sigma_r``'s bounds narrowed to a
        relative width ``1e-6`` (in ``sigma_r^2``) by bisection with exact LDL^T.

    Returns
    -------
    SigmaBounds, or None when ``min(m, n) > max_size`` or ``r == 0``.

    Raises
    ------
    InvariantViolation
        ``r`` is not the exact rank of ``M``.

    Examples
    --------
    ``diag(3, 4, 0)`` has rank 2, ``sigma_1 = 4``, ``sigma_2 = 3``:

    >>> b = certified_sigma_bounds(flint.fmpq_mat([[3, 0, 0], [0, 4, 0], [0, 0, 0]]), 2)
    >>> b.sigma_r_lo <= 3 <= b.sigma_r_hi, b.sigma_1_lo <= 4 <= b.sigma_1_hi
    (True, True)
    """
    A = M.transpose() if M.nrows() < M.ncols() else M  # Gram of the smaller side
    n = A.ncols()
    if r == 0 or n > max_size:
        return None
    K = nullspace(A)
    if K.ncols() != n - r:
        raise InvariantViolation(f"exact rank {n - K.ncols()} is not the rank {r} given")
    Af = _to_float(A)
    if not np.all(np.isfinite(Af)):
        return SigmaBounds(r, (M.nrows(), M.ncols()), None, None, None, None, math.nan, math.nan,
                           "entries beyond float64's range")
    try:
        _, s, Vt = np.linalg.svd(Af, full_matrices=False)
    except np.linalg.LinAlgError:
        return SigmaBounds(r, (M.nrows(), M.ncols()), None, None, None, None, math.nan, math.nan,
                           "the float SVD did not converge")
    s_r, s_1 = float(s[r - 1]), float(s[0])
    out = SigmaBounds(r, (M.nrows(), M.ncols()), None, None, None, None, s_r, s_1)
    # Upper bounds / sigma_1 lower bound: exact Rayleigh quotients of rounded float vectors.
    # The row space is ker(A)'s orthogonal complement: project the float v_r on it exactly.
    # Any nonzero v in the row space gives |A v|^2 / |v|^2 >= sigma_r^2.  LAPACK may return, for a
    # round-off sigma_r, a v_r inside ker(A) (its projection is 0): then try the other singular vectors.
    R = _row_space_rayleigh(A, K, Vt, r, exhaustive=n <= exact_limit)
    if R is not None:
        out.sigma_r_hi = float_above(R)
    R1 = _rayleigh(A, _from_float(Vt[0:1, :].T))
    if R1 is not None:
        out.sigma_1_lo = float_below(R1)
    G = A.transpose() * A
    for d in (1e-6, 1e-3, 0.05, 0.5):
        mu = _q((s_1 * (1 + d)) ** 2)
        if _pd(_identity(n, mu) - G, exact_limit):
            out.sigma_1_hi = float_above(mu)
            break
    # Lower bound on sigma_r: S = G + c K' K'^T - mu I positive definite, K' = K T spans ker A
    # with nearly orthonormal columns (T from a float QR; any T keeps A K' = 0).
    KK = flint.fmpq_mat(n, n)
    c = _q(s_1 * s_1)
    KtK = flint.fmpq_mat(0, 0)
    if n > r:
        K = _scale_columns(K)
        Kf = _to_float(K)
        _, Rk = np.linalg.qr(Kf)
        try:
            T = np.linalg.inv(Rk)
        except np.linalg.LinAlgError:
            T = None
        # Any K' with A K' = 0 is sound; the rescaled one only makes the Cholesky certificate easier.
        Kp = K * _from_float(T) if T is not None and np.all(np.isfinite(T)) else K
        if any(v != 0 for v in (A * Kp).entries()):
            raise InvariantViolation("kernel basis not in the kernel")
        KK = c * (Kp * Kp.transpose())
        KtK = Kp.transpose() * Kp
    lo_mu = None
    for d in _DELTAS:
        mu = _q((s_r * (1 - d)) ** 2)
        if mu > 0 and _pd(G + KK - _identity(n, mu), exact_limit):
            lo_mu = mu
            break
    else:
        # Small and beyond float64 (the float sigma_r is round-off): step down from the
        # certified upper bound, 2^-8 at a time in sigma_r^2, with exact LDL^T.
        if n <= exact_limit and out.sigma_r_hi:
            mu = _q(out.sigma_r_hi) ** 2
            for _ in range(128):
                mu /= 256
                if pd_exact(G + KK - _identity(n, mu)):
                    lo_mu = mu
                    break
        if lo_mu is None:
            out.reason = (f"float64 Cholesky could not certify any candidate (too ill-conditioned), "
                          f"exact LDL^T only up to size {exact_limit}")
            return out
    if n <= refine_limit and out.sigma_r_hi is not None:
        lo_mu, hi_mu = _refine(G + KK, c, KtK, lo_mu, _q(out.sigma_r_hi) ** 2)
        out.sigma_r_hi = min(out.sigma_r_hi, float_above(hi_mu))
    out.sigma_r_lo = float_below(lo_mu)
    return out


def _refine(GK: flint.fmpq_mat, c: flint.fmpq, KtK: flint.fmpq_mat, lo: flint.fmpq,
            hi: flint.fmpq) -> tuple[flint.fmpq, flint.fmpq]:
    """Bisect ``lo < sigma_r^2 <= hi`` with exact LDL^T (small Gram matrices whose float SVD is poor).

    ``GK = G + c K K^T``.  ``GK - mu I`` positive definite proves ``mu < sigma_r^2``.
    Its eigenvalues are ``sigma_1^2..sigma_r^2`` (row space) and ``c eig(K^T K)`` (kernel),
    so when ``c K^T K - mu I`` is positive definite (checked), ``GK - mu I`` *not* positive
    definite proves ``sigma_r^2 <= mu``.
    """
    n = GK.nrows()
    for _ in range(60):
        if hi <= lo * (1 + flint.fmpq(1, 10**6)):
            break
        mid = _q(math.sqrt(_qf(lo) * _qf(hi)))
        if not lo < mid < hi:
            break
        if pd_exact(GK - _identity(n, mid)):
            lo = mid
        elif KtK.nrows() == 0 or pd_exact(c * KtK - _identity(KtK.nrows(), mid)):
            hi = mid
        else:
            break
    return lo, hi


def perturbation_bound(exact: flint.fmpq_mat, approx: np.ndarray) -> float:
    """Certified upper bound on ``||approx - exact||_F`` (hence on the 2-norm), computed exactly.

    Examples
    --------
    >>> perturbation_bound(flint.fmpq_mat([[flint.fmpq(1, 3)]]), np.array([[0.25]])) >= 1 / 12
    True
    """
    total = flint.fmpq(0)
    for q, f in zip(exact.entries(), np.asarray(approx, dtype=np.float64).ravel()):
        d = _q(float(f)) - q
        total += d * d
    return float_above(total)
