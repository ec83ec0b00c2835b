"""The float ``Gamma_free = d f(X) / d theta`` of any network: the float twin of :mod:`exactident.model.gamma_free`.

One builder, :func:`gamma_free_float`, for every network in the float form of
:mod:`exactident.numeric.float_network` (``W = T theta + c``, per-unit negative slopes):

- a float forward pass with the ``>= 0`` convention (a unit's derivative is 1 at
  ``z >= 0`` and its negative slope ``a`` below, so at ``z = 0`` it is 1, the paper's
  indicator; ``-0.0 >= 0`` is True), or the derivative pattern of an exact activation
  pattern passed in;
- backpropagation (Prop. 10 of the paper, with the pattern's entries 1 or the slope):
  ``D_l = d f / d z_l`` and, per layer, the columns of the parameters it holds as
  ``D_l(x^i) M_l(x^i)`` with ``M_l[v, j] = sum of h_{l-1}(x^i)_u`` over the dense entries
  ``(v, u)`` tied to ``theta_j`` (so ``Gamma_free = Gamma_dense T``; the dense Jacobian of a
  convolution is never built), and a PReLU slope's column ``d f / d h_v * min(z_v, 0)``.

The structure chooses the route, not the type: when ``T`` only selects dense entries
(every free parameter feeds one weight or bias, in the paper's order) and every slope is
a fixed 0 (ReLU), ``Gamma_free`` is the dense Jacobian's columns, computed as a float tool
does for an MLP (:func:`gamma_float`: per layer ``D_l h_{l-1}^T`` and ``D_l``, every product a
numpy ufunc).  That is the plain MLP (with its fixed edges dropped: Prop. 10) and any
layer graph of the same structure.

The float verdict (:func:`float_verdict_free`) reads ``identifiable`` iff the rank reaches
``dim_free`` (``rank T - dim S_H``; for the plain MLP, ``dim``).  The float matrix has a
column per free parameter, often more than ``dim_free`` (the rescalings are in its exact
kernel), so rounding can count a rank above ``dim_free``: a float tool still reads full rank.
"""

from __future__ import annotations

from collections.abc import Sequence

import flint
import numpy as np

from exactident.linalg import floating
from exactident.numeric.float_network import FloatNetwork, numpy_dtype, round_sample, to_float_network
from exactident.numeric.guard import WarningLog, require_finite, safe_svdvals

__all__ = [
    "dense_columns",
    "float_flips",
    "float_forward",
    "float_pattern",
    "float_verdict_free",
    "free_float_rank",
    "gamma_float",
    "gamma_free_float",
]

#: Samples per batch of the per-sample products ``D_i M_i`` (bounds the memory of ``M``).
_BATCH_ENTRIES = 20_000_000


def float_verdict_free(rank: int, dim_free: int) -> str:
    """What a float rank tool reads from a rank of ``Gamma_free``: ``identifiable`` iff it reaches ``dim_free``.

    The float matrix has ``n_params >= dim_free`` columns, so its rank may exceed ``dim_free``
    (singular values of the rescaling directions above the tolerance); that is still full rank.

    Examples
    --------
    >>> [float_verdict_free(r, 161) for r in (155, 161, 163)]
    ['not-identifiable', 'identifiable', 'identifiable']
    """
    return "identifiable" if rank >= dim_free else "not-identifiable"


def _relu_layer(fnet: FloatNetwork, l: int) -> bool:
    """Hidden layer ``l`` is plain ReLU: every slope a fixed 0."""
    return not (fnet.slope_index[l - 1] >= 0).any() and not (fnet.slope[l - 1] != 0).any()


def float_forward(fnet: FloatNetwork, Xf: np.ndarray, active: Sequence[np.ndarray] | None = None,
                  with_deriv: bool = True) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """Float forward pass: ``H = [h_0 = X, ..., h_{L-1}]``, ``Z = [z_1, ..., z_L]`` and the derivatives.

    Parameters
    ----------
    fnet : FloatNetwork
    Xf : float array ``(n, N_0)`` in the network's dtype
    active : list of bool arrays ``(n, N_l)``, optional
        The side of each (sample, hidden unit) (``True``: slope 1); default the float
        ``z >= 0`` (``-0.0 >= 0`` is True: a tie is active, the paper's convention).
        Passing the exact pattern makes the float ``Gamma`` round the exact matrix even
        where rounding moved a sample across a kink.
    with_deriv : bool
        ``False``: skip the derivatives (``deriv`` is empty).

    Returns
    -------
    (H, Z, deriv)
        ``deriv[l-1]`` ``(n, N_l)``: the derivative of unit ``v``'s activation, 1 on the active
        side and the unit's slope on the other.  ``h = z`` on the active side, ``a z`` on the
        other (computed from the float ``z``, whatever ``active`` says, as a float tool does;
        ``max(z, 0)`` on a ReLU layer).
    """
    H, Z, deriv = [Xf], [], []
    for l in range(1, fnet.L + 1):
        z = H[-1] @ fnet.W[l - 1].T + fnet.b[l - 1]
        Z.append(z)
        if l < fnet.L:
            a = fnet.slope[l - 1]
            pos = z >= 0
            if with_deriv:
                side = pos if active is None else np.asarray(active[l - 1], dtype=bool)
                deriv.append(np.where(side, np.ones_like(z), a[None, :]).astype(z.dtype))
            H.append(np.maximum(z, 0) if _relu_layer(fnet, l) else np.where(pos, z, a[None, :] * z).astype(z.dtype))
    return H, Z, deriv


def float_flips(fnet: FloatNetwork, Xf: np.ndarray, exact_pattern: Sequence[np.ndarray]) -> int:
    """(sample, kinked unit) pairs whose float ``z >= 0`` side differs from ``exact_pattern`` (a linear unit has
    slope 1 on both sides: its side changes nothing)."""
    Z = float_forward(fnet, Xf, with_deriv=False)[1]
    return sum(int((((z >= 0) != np.asarray(p, dtype=bool)) & fnet.kinked(l)[None, :]).sum())
               for l, (z, p) in enumerate(zip(Z[:-1], exact_pattern), start=1))


def float_pattern(fnet: FloatNetwork, Xf: np.ndarray) -> list[np.ndarray]:
    """Float activation pattern (``z >= 0``), bool arrays ``(n, N_l)``."""
    return [z >= 0 for z in float_forward(fnet, Xf, with_deriv=False)[1][:-1]]


def gamma_float(fnet: FloatNetwork, Xf: np.ndarray, fixed: object = None,
                cols: Sequence[int] | np.ndarray | None = None,
                pattern: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """Float dense ``Gamma`` of a ReLU network, shape ``(n N_L, len(cols))``, by backpropagation (Prop. 10).

    The route of :func:`gamma_free_float` when ``T`` selects dense entries and every slope is 0.
    ``cols`` selects columns of the full Jacobian (every ``W_l`` row-major then ``b_l``, per layer);
    ``None`` keeps them all (the full Jacobian).  ``fixed`` is ignored (the columns say it).
    ``pattern``: the sides of the hidden units (default the float ``z >= 0``).
    Products are numpy ufuncs, so floating-point flags (overflow, underflow)
    are reported (``einsum`` would not report them).
    """
    H, Z, _d = float_forward(fnet, Xf, with_deriv=False)
    if pattern is None:
        pattern = [z >= 0 for z in Z[:-1]]  # -0.0 >= 0 is True: -0.0 is a tie
    n, N_L = Xf.shape[0], fnet.widths[-1]
    D = np.broadcast_to(np.eye(N_L, dtype=Xf.dtype), (n, N_L, N_L))
    per_layer = []
    for l in range(fnet.L, 0, -1):
        # D: (n, N_L, N_l) = d f / d z_l
        # explicit sizes: reshape(..., -1) fails on an empty sample (n = 0)
        dW = (D[:, :, :, None] * H[l - 1][:, None, None, :]).reshape(n, N_L, D.shape[2] * H[l - 1].shape[1])
        per_layer.append(np.concatenate([dW, D], axis=2))
        if l > 1:
            D = (D @ fnet.W[l - 1]) * np.asarray(pattern[l - 2], dtype=bool)[:, None, :]
    blocks = per_layer[::-1]
    full = np.concatenate(blocks, axis=2)
    full = full.reshape(n * N_L, full.shape[2])
    return full if cols is None else full[:, list(cols)]


def dense_columns(fnet: FloatNetwork) -> np.ndarray | None:
    """The dense positions of the free parameters when ``T`` only selects entries and every slope is 0, else None.

    "Selects": every free parameter feeds exactly one weight or bias, numbered in the paper's
    order (per layer ``W_l`` row-major then ``b_l``), no free slope, every fixed slope 0.  Then
    ``Gamma_free`` is the dense Jacobian's columns at these positions.
    """
    if any(not _relu_layer(fnet, l) for l in range(1, fnet.L)):
        return None
    idx = np.concatenate([I.reshape(-1) for l in range(fnet.L) for I in (fnet.W_index[l], fnet.b_index[l])])
    free = np.flatnonzero(idx >= 0)
    if free.size != fnet.n_params or not np.array_equal(idx[free], np.arange(free.size)):
        return None
    return free


def _entries(index: np.ndarray) -> tuple[np.ndarray, ...]:
    """``(positions..., parameter)`` of the free entries of one index array."""
    pos = np.nonzero(index >= 0)
    return (*pos, index[pos])


def _gamma_tied(fnet: FloatNetwork, Xf: np.ndarray, active: Sequence[np.ndarray] | None) -> np.ndarray:
    """``Gamma_free`` with tied entries summed per parameter and slope columns (the general route)."""
    H, Z, deriv = float_forward(fnet, Xf, active)
    n, N_L, k = Xf.shape[0], fnet.widths[-1], int(fnet.n_params or 0)
    dt = Xf.dtype
    G = np.zeros((n, N_L, k), dtype=dt)
    D = np.broadcast_to(np.eye(N_L, dtype=dt), (n, N_L, N_L))
    for l in range(fnet.L, 0, -1):
        wi, wj, wp = _entries(fnet.W_index[l - 1])
        (bi, bp) = _entries(fnet.b_index[l - 1])
        params = np.unique(np.concatenate([wp, bp]))
        if params.size:
            col = np.searchsorted(params, wp)
            bcol = np.searchsorted(params, bp)
            N_l = fnet.widths[l]
            step = max(1, _BATCH_ENTRIES // max(1, N_l * params.size))
            for s in range(0, n, step):
                Hs = H[l - 1][s:s + step]
                M = np.zeros((N_l, params.size, Hs.shape[0]), dtype=dt)
                np.add.at(M, (wi, col), Hs[:, wj].T)
                np.add.at(M, (bi, bcol), np.ones((bi.size, Hs.shape[0]), dtype=dt))
                G[s:s + step][:, :, params] += np.matmul(D[s:s + step], M.transpose(2, 0, 1))
        if l > 1:
            post = D @ fnet.W[l - 1]  # d f / d h_{l-1}
            vi, vp = _entries(fnet.slope_index[l - 2])
            if vi.size:
                neg = np.minimum(Z[l - 2][:, vi], 0)  # d h_v / d a_v = min(z_v, 0)
                contrib = post[:, :, vi] * neg[:, None, :]
                for c, p in enumerate(vp):
                    G[:, :, p] += contrib[:, :, c]
            D = post * deriv[l - 2][:, None, :]
    return G.reshape(n * N_L, k)


def gamma_free_float(fnet: FloatNetwork, Xf: np.ndarray, active: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """Float ``Gamma_free``, shape ``(n N_L, n_params)``: row ``i N_L + o`` is ``d f_o(x^i) / d theta``.

    The one float builder for any network (see the module docstring): the dense route of
    :func:`gamma_float` when :func:`dense_columns` finds the structure, the tied route otherwise.
    ``active``: see :func:`float_forward`.
    """
    cols = dense_columns(fnet)
    if cols is None:
        return _gamma_tied(fnet, Xf, active)
    n_dense = sum(fnet.widths[l] * (fnet.widths[l - 1] + 1) for l in range(1, fnet.L + 1))
    return gamma_float(fnet, Xf, None, None if cols.size == n_dense else cols, active)


def free_float_rank(net: object, X: Sequence[Sequence[flint.fmpq]], *,
                    active: Sequence[np.ndarray] | None = None, tol: float | None = None,
                    rtol: float | None = None, dtype: object = np.float64,
                    log: WarningLog | None = None) -> tuple[floating.FloatRank, np.ndarray, FloatNetwork]:
    """SVD rank of the float ``Gamma_free`` of the rounded case (any network).

    Returns
    -------
    (FloatRank, gamma, FloatNetwork)
        The rank with the tolerance used (numpy's default ``sigma_1 max(m, n) eps`` unless
        ``tol``/``rtol``), the float matrix, and the rounded network (its ``overflow``/``underflow`` lists).

    Raises
    ------
    FloatPipelineError
        A non-finite value or an SVD that fails (:mod:`exactident.numeric.guard`).
    UnsupportedCaseError
        For bfloat16 (no numpy arithmetic).
    """
    log = log or WarningLog()
    nd = numpy_dtype(dtype)
    fnet = to_float_network(net, nd)
    Xf = round_sample(X, fnet.widths[0], nd).X
    with log.stage("gamma"):
        G = gamma_free_float(fnet, Xf, active)
    require_finite(G, "gamma", lambda idx: f"Gamma_free[{idx[0]}, {idx[1]}]")
    if G.size == 0:
        return floating.FloatRank(0, 0.0, np.zeros(0)), G, fnet
    with log.stage("svd-gamma"):
        s = safe_svdvals(G.astype(np.float32) if G.dtype == np.float16 else G, "svd-gamma")
    t = float(tol) if tol is not None else float(rtol * s[0]) if rtol is not None else \
        floating.default_tol(s, G.shape, G.dtype)
    return floating.FloatRank(int((s > t).sum()), t, s), G, fnet
