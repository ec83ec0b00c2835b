"""The ``full-jacobian`` pipeline: what practitioners rank (every parameter, fixed edges included).

Autograd tools, and the paper's authors' own code, differentiate the outputs
on the sample with respect to *all* weights and biases and take the rank of
that ``(n N_L) x N`` Jacobian, ``N = sum_l N_l (N_{l-1} + 1)``.  Exactly, its
rank is ``rank_gamma``: for each hidden neuron ``v`` positive homogeneity
gives ``sum_in w_in df/dw_in + b_v df/db_v - sum_out w_out df/dw_out = 0``, so
the column of the fixed edge (a nonzero outgoing weight) is a combination of
the others, and dropping it is exactly the passage to ``Gamma`` (Prop. 10).
In floats those ``N - dim`` columns carry rounding noise instead of an exact
dependency, so the float rank can exceed ``dim``, which no exact rank can:
a rank above ``dim`` proves the float pipeline wrong.

:func:`full_jacobian_block` ranks it with numpy's default rule in float64 and
float32, and the float32 Jacobian also as float64 (``matrix_rank(J.double())``,
the usual way a float32 autograd Jacobian reaches numpy: float64's eps on
float32 round-off); with ``torch.linalg.matrix_rank`` (``torch.func.jacrev`` of
the ``nn.Sequential``) in float64 and float32 when PyTorch is already imported
(``check`` never imports it: its start-up takes seconds).

Called by :mod:`exactident.numeric.block` (``check``'s numeric block) and
:mod:`exactident.crosscheck.core`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import flint
import numpy as np

from exactident.model.fixed_edges import FixedEdges
from exactident.model.network import Network
from exactident.numeric.float_network import all_parameters
from exactident.numeric.guard import FloatPipelineError, WarningLog
from exactident.numeric.numpy_backend import float_operators
from exactident.numeric.rounding import float_format
from exactident.numeric.tolerance import Policy

__all__ = ["NUMPY_POLICIES", "TORCH_POLICIES", "full_jacobian_block", "numpy_full_jacobian_svd", "torch_loaded"]


def torch_loaded() -> bool:
    """Has this process already imported PyTorch?  (``check`` never imports it: seconds of start-up.)"""
    return sys.modules.get("torch") is not None


#: Rank rules applied to the full Jacobian: (backend, rule) as in :mod:`exactident.numeric.tolerance`.
#: ``float32/float64-eps`` is a float32 Jacobian ranked as float64 (``matrix_rank(J.double())``).
NUMPY_POLICIES = (Policy("float64", "numpy-default"), Policy("float32", "numpy-default"),
                  Policy("float32", "float64-eps"))
#: The same rank rules for the PyTorch backend (``crosscheck --torch``).
TORCH_POLICIES = (Policy("torch-float64", "torch-default"), Policy("torch-float32", "torch-default"),
                  Policy("torch-float32", "float64-eps"))


def numpy_full_jacobian_svd(net: Network, X: Sequence[Sequence[flint.fmpq]],
                            exact_pattern: Sequence[np.ndarray], dtype: object,
                            log: WarningLog | None = None) -> tuple[np.ndarray, tuple[int, int], float]:
    """Singular values of the full float Jacobian in ``dtype`` (numpy), its shape and ``eps(dtype)``.

    Raises
    ------
    FloatPipelineError
        When the pipeline fails (:mod:`exactident.numeric.guard`).
    """
    name = float_format(dtype).name
    ops = float_operators(net, X, FixedEdges({}), exact_pattern, dtype, columns="all", log=log,
                          stage_prefix=f"full-jacobian/{name}/", with_alpha=False)
    s = ops.gamma_singular_values()
    return s.astype(np.float64), (int(ops.gamma.shape[0]), int(ops.gamma.shape[1])), float(np.finfo(ops.dtype).eps)


def _entry(pol: Policy, s: np.ndarray, shape: tuple[int, int], eps: float, rank_gamma: int,
           dim: int, native: int | None = None) -> dict[str, Any]:
    tol = pol.tolerance(s, shape, eps, "gamma")
    rank = native if native is not None and pol.rule == "torch-default" else int((s > tol).sum())
    lo, hi = min(rank, rank_gamma), max(rank, rank_gamma)
    return {"status": "ok", "rank": rank, "tol": tol, "shape": list(shape), "agrees": rank == rank_gamma,
            "exceeds_dim": rank > dim, "singular_values_near_cut": [float(v) for v in s[max(0, lo - 1):hi + 1]]}


def full_jacobian_block(net: Network, X: Sequence[Sequence[flint.fmpq]], exact_pattern: Sequence[np.ndarray],
                        rank_gamma: int, torch: bool | None = None,
                        backends: Sequence[str] | None = None) -> dict[str, Any]:
    """The ``full_jacobian`` entry of the numeric block (docs/cli.md).

    Parameters
    ----------
    net, X
        The case.
    exact_pattern : list of bool arrays
        The exact ``>= 0`` pattern (to count flips; the float pattern is used for the Jacobian).
    rank_gamma : int
        Exact ``rank Gamma`` at the ``>= 0`` pattern: the exact rank of the full Jacobian too.
    torch : bool, optional
        Add the torch pipelines; default: when this process has already imported PyTorch.
    backends : list of str, optional
        Run exactly these backends (``float64``, ``float32``, ``torch-float64``,
        ``torch-float32``; ``check --pipelines``) instead; ``torch`` is then ignored.

    Returns
    -------
    dict
        ``{"compared_with": rank_gamma, "dim", "n_parameters", "pipelines": {policy: entry}}``,
        policies :data:`NUMPY_POLICIES` (and :data:`TORCH_POLICIES`); an entry is
        ``{"status": "ok", "rank", "tol", "shape", "agrees", "exceeds_dim",
        "singular_values_near_cut"}`` (from just above the smaller of ``rank`` and
        ``rank_gamma`` to just below the larger), or the failure's
        ``{"status", "where", "message"}`` with ``agrees: false``.

    Examples
    --------
    ``f = 3 relu(2x + 1)`` at ``0, 1, -1`` (rank 3 = dim): the full Jacobian has the extra
    column ``df/dW_2 = relu(2x + 1)``, which is ``(2x df/dW_1 + df/db_1) / 3`` on the sample.

    >>> import flint
    >>> from exactident.model.activation import activation_state
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])], [[flint.fmpq(1)], [flint.fmpq(0)]])
    >>> X = [[flint.fmpq(0)], [flint.fmpq(1)], [flint.fmpq(-1)]]
    >>> b = full_jacobian_block(net, X, activation_state(net, X).pattern, 3, torch=False)
    >>> b["n_parameters"], b["pipelines"]["float64/numpy-default"]["rank"]
    (4, 3)
    """
    dim = net.dim
    pipelines: dict[str, dict[str, Any]] = {}
    log = WarningLog()
    use_torch = torch if torch is not None else torch_loaded()
    if backends is None:
        backends = ("float64", "float32", *(("torch-float64", "torch-float32") if use_torch else ()))
    for backend in backends:
        pols = [p for p in NUMPY_POLICIES + TORCH_POLICIES if p.backend == backend]
        native = None
        try:
            if backend.startswith("torch-"):
                from exactident.numeric.torch_backend import torch_full_jacobian_rank

                native, _tol, s, shape, eps = torch_full_jacobian_rank(net, X, backend.split("-")[1])
            else:
                s, shape, eps = numpy_full_jacobian_svd(net, X, exact_pattern, backend, log)
        except FloatPipelineError as exc:
            for pol in pols:
                pipelines[pol.name] = {**exc.failure.as_dict(), "agrees": False}
            continue
        for pol in pols:
            pipelines[pol.name] = _entry(pol, s, shape, eps, rank_gamma, dim, native)
    out: dict[str, Any] = {"compared_with": rank_gamma, "dim": dim, "n_parameters": len(all_parameters(net)),
                           "pipelines": pipelines}
    if log.entries:
        out["warnings"] = log.entries
    return out
