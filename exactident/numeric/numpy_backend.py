"""Float backend: what a practitioner computes (backprop Jacobian + SVD rank).

Mirrors the exact path module for module: float forward pass with the
``>= 0`` convention (so ``relu'(0) = 1``, as the paper's indicator), ``Gamma`` by
backpropagation skipping the fixed edges, ``alpha`` from float signs, ranks
by SVD with numpy's default tolerance (:mod:`exactident.linalg.floating`).
Rationals are rounded to the nearest float here and only here; whether that
moved a sample across a kink is recorded (``pattern_differs``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import flint
import numpy as np

from exactident.linalg import floating
from exactident.model.activation import n_paths
from exactident.model.conditions import verdict_from_ranks
from exactident.model.fixed_edges import FixedEdges
from exactident.model.gamma import free_columns
from exactident.model.network import Network

__all__ = [
    "MAX_ALPHA_ENTRIES",
    "FloatNetwork",
    "FloatOperators",
    "NumericResult",
    "alpha_float",
    "alpha_float_gram",
    "float_operators",
    "float_pattern",
    "gamma_float",
    "numeric_check",
    "to_float_network",
    "to_float_sample",
]

#: Above this many entries ``alpha`` is not materialised; its Gram matrix is used.
MAX_ALPHA_ENTRIES = 20_000_000


def _f(q: flint.fmpq) -> float:
    # int / int is correctly rounded in Python; float(fmpq) is too, but be explicit.
    return int(q.p) / int(q.q)


@dataclass
class FloatNetwork:
    """``W[l-1]`` float arrays ``(N_l, N_{l-1})``, ``b[l-1]`` float arrays ``(N_l,)``."""

    widths: tuple[int, ...]
    W: list[np.ndarray]
    b: list[np.ndarray]

    @property
    def L(self) -> int:
        return len(self.widths) - 1


def to_float_network(net: Network, dtype: type = np.float64) -> FloatNetwork:
    """Round every parameter to the nearest float of ``dtype``."""
    W: list[np.ndarray] = [np.array([[_f(M[i, j]) for j in range(M.ncols())] for i in range(M.nrows())],
                  dtype=np.float64).reshape(M.nrows(), M.ncols()).astype(dtype) for M in net.W]
    b: list[np.ndarray] = [np.array([_f(v) for v in bl], dtype=np.float64).astype(dtype) for bl in net.b]
    return FloatNetwork(net.widths, W, b)


def to_float_sample(X: Sequence[Sequence[flint.fmpq]], n_inputs: int, dtype: type = np.float64) -> np.ndarray:
    """The sample rounded to ``dtype`` (via the nearest float64, then ``astype``), shape ``(n, N_0)``."""
    return np.array([[_f(v) for v in row] for row in X], dtype=np.float64).reshape(len(X), n_inputs).astype(dtype)


def _forward(fnet: FloatNetwork, Xf: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    H = [Xf]
    pattern = []
    for l in range(1, fnet.L + 1):
        Z = H[-1] @ fnet.W[l - 1].T + fnet.b[l - 1]
        if l < fnet.L:
            pattern.append(Z >= 0)  # -0.0 >= 0 is True: -0.0 is a tie
            H.append(np.maximum(Z, 0))
    return H, pattern


def float_pattern(fnet: FloatNetwork, Xf: np.ndarray) -> list[np.ndarray]:
    """Float activation pattern (``z >= 0``), bool arrays ``(n, N_l)``."""
    return _forward(fnet, Xf)[1]


def gamma_float(fnet: FloatNetwork, Xf: np.ndarray, fixed: FixedEdges,
                cols: Sequence[int]) -> np.ndarray:
    """Float ``Gamma``, shape ``(n N_L, dim)``, by backpropagation (Prop. 10)."""
    H, pattern = _forward(fnet, Xf)
    n, N_L = Xf.shape[0], fnet.widths[-1]
    D = np.broadcast_to(np.eye(N_L, dtype=Xf.dtype), (n, N_L, N_L))
    per_layer = []
    for l in range(fnet.L, 0, -1):
        # D: (n, N_L, N_l) = d f / d z_l
        # explicit sizes: reshape(..., -1) fails on an empty sample (n = 0)
        dW = np.einsum("nkr,nc->nkrc", D, H[l - 1]).reshape(n, N_L, D.shape[2] * H[l - 1].shape[1])
        per_layer.append(np.concatenate([dW, D], axis=2))
        if l > 1:
            D = (D @ fnet.W[l - 1]) * pattern[l - 2][:, None, :]
    blocks = per_layer[::-1]
    full = np.concatenate(blocks, axis=2)
    full = full.reshape(n * N_L, full.shape[2])
    return full[:, list(cols)]


def alpha_float(pattern: Sequence[np.ndarray], Xf: np.ndarray) -> np.ndarray:
    """Float ``alpha``, shape ``(n, |P|)`` (same column order as the exact one)."""
    n = Xf.shape[0]
    tail = np.ones((n, 1), dtype=Xf.dtype)
    blocks = []
    for p in reversed(pattern):
        tail = (p[:, :, None] * tail[:, None, :]).reshape(n, p.shape[1] * tail.shape[1]).astype(Xf.dtype)
        blocks.append(tail)
    blocks.reverse()
    first = (Xf[:, :, None] * tail[:, None, :]).reshape(n, Xf.shape[1] * tail.shape[1])
    return np.concatenate([first, *blocks, np.ones((n, 1), dtype=Xf.dtype)], axis=1)


@dataclass
class FloatOperators:
    """``Gamma`` and ``alpha`` of the rounded case in one float dtype.

    Attributes
    ----------
    dtype : numpy dtype
        float64 or float32: every parameter, sample and operation is in it.
    gamma : ndarray, shape ``(n N_L, dim)``
    alpha : ndarray, shape ``(n, |P|)``, or its Gram matrix ``(n, n)`` when ``alpha_is_gram``
    alpha_is_gram : bool
    alpha_shape : (int, int)
        ``(n, |P|)`` (the shape a rank rule must use, even for the Gram route).
    pattern : list of bool ndarray ``(n, N_l)``
        Float activation pattern (``z >= 0`` computed in ``dtype``).
    n_pattern_flips : int
        Entries where it differs from the exact pattern (0 = same pattern).
    """

    dtype: np.dtype
    gamma: np.ndarray
    alpha: np.ndarray
    alpha_is_gram: bool
    alpha_shape: tuple[int, int]
    pattern: list[np.ndarray]
    n_pattern_flips: int

    @property
    def pattern_differs(self) -> bool:
        return self.n_pattern_flips > 0

    def gamma_singular_values(self) -> np.ndarray:
        """Descending singular values of ``gamma`` (in ``dtype``'s LAPACK routine)."""
        return _svdvals(self.gamma)

    def alpha_singular_values(self) -> np.ndarray:
        """Descending singular values of ``alpha``; square roots of the Gram's eigenvalues on that route.

        The Gram route squares the condition number, so small singular values
        come out less accurate than from ``alpha`` itself.
        """
        s = _svdvals(self.alpha)
        return np.sqrt(np.clip(s, 0, None)) if self.alpha_is_gram else s


def _svdvals(M: np.ndarray) -> np.ndarray:
    if M.size == 0:
        return np.zeros(0, dtype=M.dtype)
    return np.linalg.svd(M, compute_uv=False)


def float_operators(net: Network, X: Sequence[Sequence[flint.fmpq]], fixed: FixedEdges,
                    exact_pattern: Sequence[np.ndarray], dtype: type = np.float64) -> FloatOperators:
    """Round the case to ``dtype`` and build the float ``Gamma`` and ``alpha`` (Props. 10, 1).

    Parameters
    ----------
    net : Network
        Exact parameters (Q); rounded to the nearest ``dtype`` value here.
    X : n rows of N_0 fmpq
    fixed : FixedEdges
        The fixed edges of the *exact* network (a float tool would choose the
        same ones: rounding keeps the order of ``|weights|`` up to ties).
    exact_pattern : list of bool arrays ``(n, N_l)``
        From :func:`exactident.model.activation.activation_state`, to count flips.
    dtype : numpy.float64 or numpy.float32

    Returns
    -------
    FloatOperators
    """
    fnet = to_float_network(net, dtype)
    Xf = to_float_sample(X, net.widths[0], dtype)
    pattern = float_pattern(fnet, Xf)
    flips = int(sum(int(np.sum(a != b)) for a, b in zip(pattern, exact_pattern)))
    G = gamma_float(fnet, Xf, fixed, free_columns(net, fixed))
    n_p = n_paths(net.widths)
    A: np.ndarray
    if not X:
        A, gram = np.zeros((0, n_p), dtype=dtype), False
    elif len(X) * n_p <= MAX_ALPHA_ENTRIES:
        A, gram = alpha_float(pattern, Xf), False
    else:
        A, gram = alpha_float_gram(pattern, Xf), True
    return FloatOperators(np.dtype(dtype), G, A, gram, (len(X), n_p), pattern, flips)


@dataclass
class NumericResult:
    """The float verdict beside the exact one (the report's ``numeric`` block, docs/cli.md)."""

    rank_gamma: int
    rank_a: int
    verdict: str
    tol: float
    singular_values_near_cut: list[float]
    pattern_differs: bool
    gamma_rank: floating.FloatRank

    def as_dict(self, exact_rank_gamma: int, exact_rank_a: int | None, exact_verdict: str,
                band_rank: int | None = None) -> dict:
        """The report's ``numeric`` block (docs/cli.md), plus ``pattern_differs`` and ``band``.

        ``agrees``: the float verdict equals the exact verdict and the float
        ranks equal ``exact_rank_gamma``/``exact_rank_a``, which the caller
        passes at the exact ``>= 0`` pattern (on the boundary the report's
        top-level ranks are those of another tie resolution; a float tool
        only ever sees the ``>= 0`` one).

        ``band_rank`` is the exact rank of ``Gamma`` at the exact ``>= 0``
        pattern (the matrix the float one rounds); when given, ``band`` holds the
        absolute and relative tolerance intervals ``[lo, hi)`` that reproduce it
        (:func:`exactident.linalg.floating.consistent_band`).
        """
        agrees = (self.rank_gamma == exact_rank_gamma and self.verdict == exact_verdict
                  and (exact_rank_a is None or self.rank_a == exact_rank_a))
        out = {"rank_gamma": self.rank_gamma, "rank_a": self.rank_a, "verdict": self.verdict,
               "tol": self.tol, "agrees": agrees,
               "compared_with": {"rank_gamma": exact_rank_gamma, "rank_a": exact_rank_a},
               "singular_values_near_cut": self.singular_values_near_cut,
               "pattern_differs": self.pattern_differs}
        if band_rank is not None:
            s = self.gamma_rank.singular_values
            lo, hi = floating.consistent_band(s, band_rank)
            smax = float(s[0]) if s.size and s[0] > 0 else 1.0
            out["band"] = {"rank": band_rank, "abs": [lo, _json_float(hi)],
                           "rel": [lo / smax, _json_float(hi / smax)],
                           "tol_inside": lo <= self.tol < hi}
        return out


def _json_float(v: float) -> float | None:
    # JSON has no infinity: an unbounded end is null.
    return None if v == float("inf") else v


def numeric_check(net: Network, X: Sequence[Sequence[flint.fmpq]], fixed: FixedEdges,
                  exact_pattern: Sequence[np.ndarray], degenerate: bool,
                  tol: float | None = None, dtype: type = np.float64,
                  rtol: float | None = None) -> NumericResult:
    """Run the float pipeline on the rounded case.

    Parameters
    ----------
    tol : float, optional
        Absolute SVD threshold for ``Gamma`` (default: numpy's rule).  ``alpha``
        always uses numpy's rule.
    rtol : float, optional
        Relative threshold ``rtol * sigma_max`` for ``Gamma`` when ``tol`` is None.

    Returns
    -------
    NumericResult
        ``verdict`` comes from the float ranks with the no-tie verdict rules (docs/theory.md)
        (a float tool does not see ties).
    """
    ops = float_operators(net, X, fixed, exact_pattern, dtype)
    g = floating.rank(ops.gamma, tol, rtol)
    r_alpha = floating.rank(ops.alpha).rank
    rank_a = net.widths[-1] * r_alpha
    verdict = verdict_from_ranks(g.rank, rank_a, net.dim, degenerate)
    return NumericResult(g.rank, rank_a, verdict, g.tol, g.near_cut(), ops.pattern_differs, g)


def alpha_float_gram(pattern: Sequence[np.ndarray], Xf: np.ndarray) -> np.ndarray:
    """Float Gram matrix ``alpha alpha^T`` ``(n, n)`` (see :func:`exactident.model.activation.alpha_gram`)."""
    n = Xf.shape[0]
    prod_c = np.ones((n, n), dtype=Xf.dtype)
    suffix = np.zeros((n, n), dtype=Xf.dtype)
    for p in reversed(pattern):
        A = p.astype(Xf.dtype)
        prod_c = prod_c * (A @ A.T)
        suffix = suffix + prod_c
    return (Xf @ Xf.T) * prod_c + suffix + 1
