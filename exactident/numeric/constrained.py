"""Float backend for constrained networks (``W = T theta + c``): what a practitioner computes.

The float wing's second implementation of ``Gamma_free = d f(X) / d theta`` for a
:class:`~exactident.model.constrained.ConstrainedNetwork` (convolution, pooling, skips,
leaky ReLU, PReLU, layers without bias), independent of the exact engine:

- every weight, bias and slope rounded once, correctly, to the float format
  (:mod:`exactident.numeric.rounding`), the sample too;
- a float forward pass with the ``>= 0`` convention (a unit's derivative is 1 at
  ``z >= 0`` and its negative slope ``a`` below, so at ``z = 0`` it is 1, the
  paper's indicator), or the derivative pattern of an exact activation pattern
  passed in;
- ``Gamma_free`` by backpropagation, the tied dense entries of one parameter summed
  per sample (``Gamma_i = D_i M_i`` with ``M_i[v, j] = sum of h_{l-1}(x^i)_u`` over
  the entries ``(v, u)`` tied to ``theta_j``): the dense Jacobian of a convolution is
  never built; a PReLU slope's column is ``d f / d h_v * min(z_v, 0)``;
- the rank by SVD with numpy's default tolerance ``sigma_1 max(m, n) eps``
  (:mod:`exactident.linalg.floating`), or the user's ``tol``/``rtol``.

The float verdict follows the exact rule for these networks (:func:`float_verdict_free`):
``identifiable`` iff the rank reaches ``dim_free``; below it a float tool reads ``not-identifiable``.
The float ``Gamma_free`` has one column per free parameter, more than ``dim_free`` (the
rescalings are in its exact kernel), so rounding can count a rank above ``dim_free``: a float
tool still reads full rank there.
:func:`gamma_free_torch` is a second float pipeline (``torch.func.jacrev`` of the
outputs with respect to ``theta``), loaded only when PyTorch is installed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import flint
import numpy as np

from exactident.errors import UnsupportedCaseError
from exactident.linalg import floating
from exactident.model.constrained import ConstrainedNetwork
from exactident.numeric.guard import FloatPipelineError, WarningLog, require_finite, safe_svdvals
from exactident.numeric.rounding import float_format, round_values

__all__ = [
    "FloatConstrained",
    "constrained_float_rank",
    "constrained_numeric_block",
    "float_forward",
    "float_verdict_free",
    "gamma_free_float",
    "gamma_free_torch",
    "report_numeric_block",
    "to_float_constrained",
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


def _dtype(dtype: object) -> type:
    fmt = float_format(dtype)
    if fmt.name == "bfloat16":
        raise UnsupportedCaseError("numpy has no bfloat16 arithmetic: use float64, float32 or float16")
    return {"float64": np.float64, "float32": np.float32, "float16": np.float16}[fmt.name]


@dataclass
class FloatConstrained:
    """A :class:`~exactident.model.constrained.ConstrainedNetwork` rounded to one float dtype.

    Attributes
    ----------
    widths : tuple of int
    W, b : lists of float arrays ``(N_l, N_{l-1})`` and ``(N_l,)`` (dense current values)
    slope : list of float arrays ``(N_l,)``, hidden layers ``l = 1..L-1``
    W_index, b_index, slope_index : int64 arrays, as in the constrained network
        (``-1`` fixed, ``j >= 0`` tied to ``theta_j``)
    n_params : int
    overflow, underflow : list of str
        Dense entries (``W_l[i,j]``, ``b_l[i]``, ``slope_l[v]``) rounded to ``+-inf`` / from nonzero to zero.
    """

    widths: tuple[int, ...]
    W: list[np.ndarray]
    b: list[np.ndarray]
    slope: list[np.ndarray]
    W_index: list[np.ndarray]
    b_index: list[np.ndarray]
    slope_index: list[np.ndarray]
    n_params: int
    overflow: list[str] = field(default_factory=list)
    underflow: list[str] = field(default_factory=list)

    @property
    def L(self) -> int:
        return len(self.widths) - 1


def _round(values: list, shape: tuple[int, ...], nd: type, name: str, fnet_over: list[str],
           fnet_under: list[str], fmt: Any) -> np.ndarray:
    r = round_values(values, fmt)
    cols = shape[1] if len(shape) == 2 else 1

    def at(k: int) -> str:
        return f"{name}[{k // cols},{k % cols}]" if len(shape) == 2 else f"{name}[{k}]"
    fnet_over += [at(k) for k in r.overflow]
    fnet_under += [at(k) for k in r.underflow]
    return np.array(r.values, dtype=np.float64).reshape(shape).astype(nd)


def to_float_constrained(cn: ConstrainedNetwork, dtype: object = np.float64) -> FloatConstrained:
    """Round every dense weight, bias and slope of ``cn`` once to the nearest float of ``dtype``.

    Tied entries hold the same rational, so they round to the same float.

    Raises
    ------
    UnsupportedCaseError
        For bfloat16 (no numpy arithmetic).
    """
    fmt = float_format(dtype)
    nd = _dtype(fmt)
    over: list[str] = []
    under: list[str] = []
    W = [_round(M.entries(), (M.nrows(), M.ncols()), nd, f"W_{l}", over, under, fmt)
         for l, M in enumerate(cn.W, start=1)]
    b = [_round(list(v), (len(v),), nd, f"b_{l}", over, under, fmt) for l, v in enumerate(cn.b, start=1)]
    s = [_round(list(a), (len(a),), nd, f"slope_{l}", over, under, fmt)
         for l, a in enumerate(cn.negative_slope, start=1)]
    return FloatConstrained(tuple(cn.widths), W, b, s, list(cn.W_index), list(cn.b_index),
                            list(cn.slope_index), cn.n_params, over, under)


def float_forward(fcn: FloatConstrained, Xf: np.ndarray, active: Sequence[np.ndarray] | None = None
                  ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """Float forward pass: ``H = [h_0 = X, ..., h_{L-1}]``, ``Z = [z_1, ..., z_L]`` and the derivatives.

    Parameters
    ----------
    fcn : FloatConstrained
    Xf : float array ``(n, N_0)`` in the network's dtype
    active : list of bool arrays ``(n, N_l)``, optional
        The side of each (sample, hidden unit) (``True``: slope 1); default the float
        ``z >= 0`` (``-0.0 >= 0`` is True: a tie is active, the paper's convention).
        Passing the exact pattern makes the float ``Gamma`` round the exact matrix even
        where rounding moved a sample across a kink.

    Returns
    -------
    (H, Z, deriv)
        ``deriv[l-1]`` ``(n, N_l)``: the derivative of unit ``v``'s activation, 1 on the active
        side and the unit's slope on the other.  ``h = z`` on the active side, ``a z`` on the
        other (computed from the float ``z``, whatever ``active`` says, as a float tool does).
    """
    H, Z, deriv = [Xf], [], []
    for l in range(1, fcn.L + 1):
        z = H[-1] @ fcn.W[l - 1].T + fcn.b[l - 1]
        Z.append(z)
        if l < fcn.L:
            a = fcn.slope[l - 1]
            pos = z >= 0
            side = pos if active is None else np.asarray(active[l - 1], dtype=bool)
            deriv.append(np.where(side, np.ones_like(z), a[None, :]).astype(z.dtype))
            H.append(np.where(pos, z, a[None, :] * z).astype(z.dtype))
    return H, Z, deriv


def _entries(index: np.ndarray) -> tuple[np.ndarray, ...]:
    """``(positions..., parameter)`` of the free entries of one index array."""
    pos = np.nonzero(index >= 0)
    return (*pos, index[pos])


def gamma_free_float(fcn: FloatConstrained, Xf: np.ndarray, active: Sequence[np.ndarray] | None = None
                     ) -> np.ndarray:
    """Float ``Gamma_free``, shape ``(n N_L, n_params)``: row ``i N_L + o`` is ``d f_o(x^i) / d theta``.

    Backpropagation (Prop. 10 of the paper, with the pattern's entries 1 or the slope):
    ``D_l = d f / d z_l`` and, per layer, the columns of the parameters it holds as
    ``D_l(x^i) M_l(x^i)``, tied entries summed in ``M`` (no dense Jacobian is built).
    ``active``: see :func:`float_forward`.
    """
    H, Z, deriv = float_forward(fcn, Xf, active)
    n, N_L, k = Xf.shape[0], fcn.widths[-1], fcn.n_params
    dt = Xf.dtype
    G = np.zeros((n, N_L, k), dtype=dt)
    D = np.broadcast_to(np.eye(N_L, dtype=dt), (n, N_L, N_L))
    for l in range(fcn.L, 0, -1):
        wi, wj, wp = _entries(fcn.W_index[l - 1])
        (bi, bp) = _entries(fcn.b_index[l - 1])
        params = np.unique(np.concatenate([wp, bp]))
        if params.size:
            col = np.searchsorted(params, wp)
            bcol = np.searchsorted(params, bp)
            N_l = fcn.widths[l]
            step = max(1, _BATCH_ENTRIES // max(1, N_l * params.size))
            for s in range(0, n, step):
                Hs = H[l - 1][s:s + step]
                M = np.zeros((N_l, params.size, Hs.shape[0]), dtype=dt)
                np.add.at(M, (wi, col), Hs[:, wj].T)
                np.add.at(M, (bi, bcol), np.ones((bi.size, Hs.shape[0]), dtype=dt))
                G[s:s + step][:, :, params] += np.matmul(D[s:s + step], M.transpose(2, 0, 1))
        if l > 1:
            post = D @ fcn.W[l - 1]  # d f / d h_{l-1}
            vi, vp = _entries(fcn.slope_index[l - 2])
            if vi.size:
                neg = np.minimum(Z[l - 2][:, vi], 0)  # d h_v / d a_v = min(z_v, 0)
                contrib = post[:, :, vi] * neg[:, None, :]
                for c, p in enumerate(vp):
                    G[:, :, p] += contrib[:, :, c]
            D = post * deriv[l - 2][:, None, :]
    return G.reshape(n * N_L, k)


def gamma_free_torch(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]], dtype: str = "float64") -> np.ndarray:
    """``Gamma_free`` by ``torch.func.jacrev`` of the outputs with respect to ``theta`` (a second pipeline).

    The dense weights are built from ``theta`` by gathering (``W = T theta + c``), the units
    apply ``torch.where(z >= 0, z, a z)`` (derivative 1 at ``z = 0``, as the ``>= 0`` convention).

    Returns
    -------
    ndarray, shape ``(n N_L, n_params)``, in ``dtype``

    Raises
    ------
    UnsupportedCaseError
        Without PyTorch.
    """
    try:
        import torch
        from torch.func import jacrev
    except ImportError:
        raise UnsupportedCaseError("the torch pipeline needs PyTorch (pip install torch)") from None
    tdt = {"float64": torch.float64, "float32": torch.float32}[float_format(dtype).name]
    fcn = to_float_constrained(cn, dtype)
    theta0 = torch.tensor(np.array(round_values(cn.theta(), float_format(dtype)).values), dtype=tdt)
    Xf = torch.tensor(np.array(round_values([v for r in X for v in r], float_format(dtype)).values,
                               dtype=np.float64).reshape(len(X), cn.widths[0]), dtype=tdt)

    def gathered(values: np.ndarray, index: np.ndarray, theta: Any) -> Any:
        fixed = torch.tensor(np.where(index >= 0, 0, values).astype(np.float64), dtype=tdt)
        idx = torch.tensor(np.where(index >= 0, index, 0), dtype=torch.long)
        mask = torch.tensor(index >= 0)
        return torch.where(mask, theta[idx], fixed)

    def f(theta: Any) -> Any:
        h = Xf
        for l in range(1, cn.L + 1):
            Wl = gathered(fcn.W[l - 1], np.asarray(cn.W_index[l - 1]), theta)
            bl = gathered(fcn.b[l - 1], np.asarray(cn.b_index[l - 1]), theta)
            z = h @ Wl.T + bl
            if l == cn.L:
                return z
            a = gathered(fcn.slope[l - 1], np.asarray(cn.slope_index[l - 1]), theta)
            h = torch.where(z >= 0, z, a * z)
        return h

    J = jacrev(f)(theta0)  # (n, N_L, k)
    return J.detach().cpu().numpy().reshape(len(X) * cn.widths[-1], cn.n_params)


def constrained_float_rank(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]], *,
                           active: Sequence[np.ndarray] | None = None, tol: float | None = None,
                           rtol: float | None = None, dtype: object = np.float64,
                           log: WarningLog | None = None) -> tuple[floating.FloatRank, np.ndarray, FloatConstrained]:
    """SVD rank of the float ``Gamma_free`` of the rounded case.

    Returns
    -------
    (FloatRank, gamma, FloatConstrained)
        The rank with the tolerance used (numpy's default unless ``tol``/``rtol``), the float
        matrix, and the rounded network (its ``overflow``/``underflow`` lists).

    Raises
    ------
    FloatPipelineError
        A non-finite value or an SVD that fails (:mod:`exactident.numeric.guard`).
    """
    log = log or WarningLog()
    fcn = to_float_constrained(cn, dtype)
    nd = _dtype(dtype)
    fmt = float_format(dtype)
    Xf: np.ndarray = np.array(round_values([v for row in X for v in row], fmt).values,
                  dtype=np.float64).reshape(len(X), cn.widths[0]).astype(nd)
    with log.stage("gamma"):
        G = gamma_free_float(fcn, Xf, active)
    require_finite(G, "gamma", lambda idx: f"Gamma_free[{idx[0]}, {idx[1]}]")
    if G.size == 0:
        return floating.FloatRank(0, 0.0, np.zeros(0)), G, fcn
    with log.stage("svd-gamma"):
        s = safe_svdvals(G.astype(np.float32) if G.dtype == np.float16 else G, "svd-gamma")
    t = float(tol) if tol is not None else float(rtol * s[0]) if rtol is not None else \
        floating.default_tol(s, G.shape, G.dtype)
    return floating.FloatRank(int((s > t).sum()), t, s), G, fcn


def constrained_numeric_block(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]], dim_free: int,
                              exact_pattern: Sequence[np.ndarray], exact_rank_gamma: int | None,
                              exact_verdict: str | None, *, tol: float | None = None,
                              rtol: float | None = None, dtype: object = "float64",
                              torch: bool = False, interval: tuple[int, int] | None = None) -> dict[str, Any]:
    """The report's ``numeric`` block for a constrained case (fields as for the plain one, docs/cli.md).

    Parameters
    ----------
    cn, X
        The compiled network and the sample (Q).
    dim_free : int
        ``rank T - dim S_H`` (the exact target of the rank).
    exact_pattern : list of bool arrays ``(n, N_l)``
        The exact ``>= 0`` pattern of the hidden layers: ``pattern_differs`` says whether the
        float side of a (sample, kinked unit) pair differs from it.
    exact_rank_gamma : int or None
        Exact rank of ``Gamma_free`` at that pattern (``compared_with``); None if unknown: ``agrees``
        is then held against ``interval``, or null without one.
    exact_verdict : str or None
        None when the exact analysis reached no verdict (``agrees`` is then null).
    torch : bool
        Add ``torch``: the rank of the ``torch.func.jacrev`` matrix by the same rule
        (skipped with a note when PyTorch is missing).
    interval : (int, int), optional
        The certified ``lo <= rank Gamma_free <= hi`` at that pattern when ``exact_rank_gamma`` is None:
        ``agrees`` then means the float rank lies in ``[lo, hi]`` and gives the exact answer to
        "identifiable?" (``compared_with.rank_gamma_interval``), the rule of the plain MLP's block.

    Returns
    -------
    dict
        ``status``, ``dtype``, ``rank_gamma``, ``rank_a`` (always null), ``verdict``
        (``identifiable`` iff ``rank_gamma >= dim_free``, :func:`float_verdict_free`), ``tol``,
        ``agrees`` (same rank as the exact one and the same answer to "identifiable?"),
        ``compared_with``, ``singular_values_near_cut``, ``pattern_differs``, ``band``,
        ``warnings``, ``pipelines``.
    """
    log = WarningLog()
    block: dict[str, Any] = {"status": "ok", "dtype": np.dtype(_dtype(dtype)).name, "dim_free": dim_free}
    compared: dict[str, Any] = {"rank_gamma": exact_rank_gamma, "rank_a": None, "verdict": exact_verdict}
    try:
        g, _G, fcn = constrained_float_rank(cn, X, tol=tol, rtol=rtol, dtype=dtype, log=log)
    except FloatPipelineError as exc:
        block.update(exc.failure.as_dict())
        block.update({"rank_gamma": None, "rank_a": None, "verdict": None, "tol": None, "agrees": False,
                      "compared_with": compared, "singular_values_near_cut": [], "pattern_differs": None})
    else:
        verdict = float_verdict_free(g.rank, dim_free)
        Xf: np.ndarray = np.array(round_values([v for row in X for v in row], float_format(dtype)).values,
                      dtype=np.float64).reshape(len(X), cn.widths[0]).astype(_dtype(dtype))
        _H, Z, _d = float_forward(fcn, Xf)
        # only a kinked unit's side matters (a linear unit has slope 1 on both sides)
        flips = sum(int((((z >= 0) != np.asarray(p, dtype=bool)) & ((si >= 0) | (a != 1))[None, :]).sum())
                    for z, p, si, a in zip(Z[:-1], exact_pattern, fcn.slope_index, fcn.slope))
        agrees = (exact_rank_gamma is not None and g.rank == exact_rank_gamma
                  and (verdict == "identifiable") == (exact_verdict == "identifiable"))
        block.update({"rank_gamma": g.rank, "rank_a": None, "verdict": verdict, "tol": g.tol, "agrees": agrees,
                      "compared_with": compared, "singular_values_near_cut": g.near_cut(),
                      "pattern_differs": flips > 0})
        if fcn.underflow or fcn.overflow:
            block["underflow"] = list(fcn.underflow)
            block["agrees"] = False
        if exact_rank_gamma is not None and flips == 0 and not fcn.underflow and g.singular_values.size:
            s = g.singular_values
            lo, hi = floating.consistent_band(s, min(exact_rank_gamma, s.size))
            smax = float(s[0]) if s[0] > 0 else 1.0
            block["band"] = {"rank": exact_rank_gamma, "abs": [lo, None if hi == float("inf") else hi],
                             "rel": [lo / smax, None if hi == float("inf") else hi / smax],
                             "tol_inside": lo <= g.tol < hi}
    if exact_rank_gamma is None and interval is not None:  # the float rank is held against the certified interval
        lo, hi = interval
        compared["rank_gamma_interval"] = [lo, hi]
        frg = block.get("rank_gamma")
        block["agrees"] = (block.get("status", "ok") == "ok" and "underflow" not in block and frg is not None
                           and lo <= frg <= hi
                           and (block["verdict"] == "identifiable") == (exact_verdict == "identifiable"))
    if exact_verdict is None or (exact_rank_gamma is None and interval is None):  # nothing exact to agree with
        block["agrees"] = None
    pipelines = [block["dtype"]]
    if torch:
        pipelines.append("torch")
        try:
            Gt = gamma_free_torch(cn, X, "float64")
            r = floating.rank(Gt, tol=tol, rtol=rtol)
            block["torch"] = {"rank_gamma": r.rank, "tol": r.tol,
                              "verdict": float_verdict_free(r.rank, dim_free)}
        except UnsupportedCaseError as exc:
            block["torch"] = {"status": "skipped", "message": str(exc)}
    block["warnings"] = log.entries
    block["pipelines"] = pipelines
    return block


def report_numeric_block(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]], report: Any, *,
                         tol: float | None = None, rtol: float | None = None, torch: bool = False) -> dict[str, Any]:
    """:func:`constrained_numeric_block` beside a constrained report of ``check``.

    The exact side is read from ``report``: ``dim`` (``dim_free``), ``pattern_ranks[0]`` (the
    certified rank of ``Gamma_free`` at the ``>= 0`` pattern, the matrix the float one rounds;
    None past the tie cap or for an interval), ``pattern_interval`` (that certified interval) and
    ``verdict``; the exact ``>= 0`` pattern is recomputed
    (:func:`exactident.model.constrained.constrained_pre_activations`).
    """
    from exactident.model.constrained import constrained_pre_activations

    Z = constrained_pre_activations(cn, X)
    pattern = [np.array([z >= 0 for z in M.entries()], dtype=bool).reshape(M.nrows(), M.ncols()) for M in Z[:-1]]
    ranks = getattr(report, "pattern_ranks", None)
    return constrained_numeric_block(cn, X, report.dim, pattern, ranks[0] if ranks else None, report.verdict,
                                     tol=tol, rtol=rtol, torch=torch,
                                     interval=getattr(report, "pattern_interval", None))
