"""The rank pipelines people run, emulated, and each disagreement with the exact rank explained.

``exactident crosscheck --pipeline NAME`` (docs/tolerances.md, "Emulated
pipelines").  Every pipeline differentiates the network outputs with respect
to *every* weight and bias (the full Jacobian, ``n N_L x N``, whose exact rank
is ``rank_gamma``: the fixed-edge columns are combinations of the others by
positive homogeneity) in a float dtype, then applies a library's rank rule.

- ``numpy``: float64 Jacobian, ``S > S.max() * max(M, N) * eps(float64)``
  (``numpy.linalg.matrix_rank``; ``S`` the singular values, ``(M, N)`` the shape);
- ``torch-float32``, ``torch-float64``: Jacobian in that dtype,
  ``S > max(atol, rtol * S.max())`` with ``atol = 0``, ``rtol = max(M, N) eps(dtype)``
  (``torch.linalg.matrix_rank``);
- ``jax``: float32 Jacobian (JAX computes in float32 unless ``jax_enable_x64``),
  ``S > S.max() * max(M, N) * eps(float32)`` (``jnp.linalg.matrix_rank``);
- ``functional-dimension[:B]``: float32 Jacobian of the softmax outputs, the last
  partial batch of ``B`` samples (default 32) dropped, then numpy's rule with
  float64's eps (``matrix_rank`` of the float32 matrix taken to float64).

ReLU's derivative at ``z = 0``: 1 for ``numpy`` (the ``>= 0`` indicator of
the paper, as :mod:`exactident.numeric.numpy_backend`), 0 for ``torch-*``,
``jax`` and ``functional-dimension`` (autograd's ``relu'(0) = 0``).

Every value of the case is rounded once to the dtype
(:mod:`exactident.numeric.rounding`), the forward pass and backpropagation
run in the dtype (numpy), and the singular values come from numpy's LAPACK
in that dtype.  The emulation is the library's *rule* on numpy's
Jacobian; the libraries' own SVD routines may differ in the last bits.

The exact side: ``rank_gamma`` on the whole sample; for
``functional-dimension`` also the exact rank on the kept samples and the exact
rank after softmax, which is that of the centred Jacobian ``(I - 11^T/N_L) J``
per sample (softmax's Jacobian ``diag(p) - p p^T`` is symmetric with kernel
exactly ``span(1)`` when every ``p_k > 0``, so it has the row space of the
centring projection), at most ``dim - 1 - N_{L-1}`` (softmax ignores adding
``c 1`` to ``b_L`` and ``1 w^T`` to ``W_L``).

Called by :mod:`exactident.crosscheck.core`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from exactident.errors import CaseFormatError
from exactident.io.case import Case
from exactident.linalg.exact import rank as exact_rank
from exactident.linalg.sigma_bounds import perturbation_bound
from exactident.model.activation import activation_state
from exactident.model.fixed_edges import FixedEdges
from exactident.model.gamma import gamma_exact
from exactident.numeric.float_network import round_sample, to_float_network

__all__ = ["PIPELINE_NAMES", "Pipeline", "emulate", "emulate_all", "parse_pipeline", "pipeline_matrix", "rank_rule",
           "render_pipeline"]

#: Names accepted by ``--pipeline`` (``functional-dimension:B`` sets the batch size).
PIPELINE_NAMES = ("numpy", "torch-float32", "torch-float64", "jax", "functional-dimension")
DEFAULT_BATCH = 32
#: Largest Jacobian (entries) compared exactly with its float version (``delta``).
MAX_EXACT_ENTRIES = 200_000


@dataclass(frozen=True)
class Pipeline:
    """One emulated pipeline (see the module table)."""

    name: str
    dtype: str
    rule: str
    relu_prime_zero: int
    softmax: bool = False
    batch: int | None = None


def parse_pipeline(text: str) -> Pipeline:
    """``--pipeline`` value to a :class:`Pipeline`.

    Raises
    ------
    CaseFormatError
        An unknown name or a batch size that is not a positive integer.
    """
    name, _, arg = text.partition(":")
    if name == "functional-dimension":
        if arg and not (arg.isdigit() and int(arg) > 0):
            raise CaseFormatError("<command line>", "--pipeline",
                                  f"batch size must be a positive integer, found {arg!r}")
        return Pipeline(text if arg else name, "float32", "numpy-eps64", 0, True, int(arg) if arg else DEFAULT_BATCH)
    table = {"numpy": Pipeline("numpy", "float64", "numpy", 1),
             "torch-float32": Pipeline("torch-float32", "float32", "torch", 0),
             "torch-float64": Pipeline("torch-float64", "float64", "torch", 0),
             "jax": Pipeline("jax", "float32", "jax", 0)}
    if name not in table or arg:
        raise CaseFormatError("<command line>", "--pipeline",
                              f"unknown pipeline {text!r} (one of {', '.join(PIPELINE_NAMES)}[:BATCH])")
    return table[name]


def rank_rule(S: np.ndarray, shape: tuple[int, int], dtype: Any, rule: str) -> tuple[int, float]:
    """Rank and tolerance of a library's default rule on singular values ``S`` (descending) of a ``shape`` matrix.

    ``rule``: ``numpy`` (``S.max() * max(M, N) * eps(dtype)``), ``torch``
    (``max(0, max(M, N) eps(dtype) * S.max())``), ``jax`` (as numpy, eps of
    ``S``'s dtype), ``numpy-eps64`` (numpy's rule with float64's eps on any
    dtype).

    Examples
    --------
    >>> rank_rule(np.array([2.0, 1e-20]), (2, 2), np.float64, "numpy")[0]
    1
    """
    if S.size == 0:
        return 0, 0.0
    m = max(shape)
    smax = S.max()
    if rule == "torch":  # rtol = max(M, N) eps as a tensor of S's dtype, times S.max(), in that dtype
        tol = S.dtype.type(m * np.finfo(dtype).eps) * smax
    else:  # numpy/jax: S.max() * max(M, N) * eps, a scalar of S's dtype (float64 with float64's eps)
        eps = np.finfo(np.float64 if rule == "numpy-eps64" else dtype).eps
        tol = smax * m * eps
    return int(np.count_nonzero(tol < S)), float(tol)


def pipeline_matrix(case: Case, pipeline: Pipeline | str) -> np.ndarray:
    """The float matrix ``pipeline`` ranks: full Jacobian ``(n' N_L, N)`` in its dtype (``n'`` kept samples).

    Examples
    --------
    >>> from exactident.io.case import parse_case
    >>> c = parse_case({"format": "exactident-case/1", "name": "t", "widths": [1, 1, 1],
    ...     "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]], "sample": [[0], [1]]})
    >>> pipeline_matrix(c, "numpy").tolist()  # columns W_1, b_1, W_2, b_2; rows (3x, 3, 2x+1, 1)
    [[0.0, 3.0, 1.0, 1.0], [3.0, 3.0, 3.0, 1.0]]
    """
    p = parse_pipeline(pipeline) if isinstance(pipeline, str) else pipeline
    n = len(case.X)
    return _float_jacobian(case, p, (n // p.batch) * p.batch if p.batch else n)[0]


def _float_jacobian(case: Case, p: Pipeline, n_kept: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """Float full Jacobian ``(n_kept N_L, N)`` (softmax applied when asked) and the float activation masks."""
    net = case.network
    dt = np.dtype(p.dtype).type
    fnet = to_float_network(net, dt)
    Xf = round_sample(case.X[:n_kept], net.widths[0], dt).X
    H, masks = [Xf], []
    with np.errstate(all="ignore"):
        for l in range(1, net.L + 1):
            Z = H[-1] @ fnet.W[l - 1].T + fnet.b[l - 1]
            if l < net.L:
                masks.append((Z > 0) | ((Z == 0) & bool(p.relu_prime_zero)))
                H.append(np.maximum(Z, 0).astype(dt))
        out = Z
        n, N_L = Xf.shape[0], net.widths[-1]
        D = np.broadcast_to(np.eye(N_L, dtype=dt), (n, N_L, N_L))
        blocks = []
        for l in range(net.L, 0, -1):
            h = H[l - 1]
            dW = (D[:, :, :, None] * h[:, None, None, :]).reshape(n, N_L, D.shape[2] * h.shape[1])
            blocks.append(np.concatenate([dW, D], axis=2))
            if l > 1:
                D = (D @ fnet.W[l - 1]) * masks[l - 2][:, None, :]
        J = np.concatenate(blocks[::-1], axis=2).astype(dt)
        if p.softmax:
            e = np.exp(out - out.max(axis=1, keepdims=True))
            prob = (e / e.sum(axis=1, keepdims=True)).astype(dt)
            Js = (np.einsum("ij,jk->ijk", prob, np.eye(N_L, dtype=dt)) - prob[:, :, None] * prob[:, None, :]).astype(dt)
            J = np.matmul(Js, J).astype(dt)
    return J.reshape(n * N_L, J.shape[2]), masks


def _centred(G: flint.fmpq_mat, N_L: int) -> flint.fmpq_mat:
    rows = G.table()
    out: list[list[flint.fmpq]] = []
    for s in range(0, len(rows), N_L):
        block = rows[s:s + N_L]
        mean = [sum(col, flint.fmpq(0)) / N_L for col in zip(*block)]
        out.extend([v - m for v, m in zip(r, mean)] for r in block)
    return flint.fmpq_mat(G.nrows(), G.ncols(), [v for r in out for v in r])


def emulate(case: Case, pipeline: Pipeline | str, rank_gamma: int, dim: int) -> dict[str, Any]:
    """Run ``pipeline`` on ``case`` and explain its rank against the exact one.

    Parameters
    ----------
    case : Case
    pipeline : Pipeline or its ``--pipeline`` name
    rank_gamma : int
        Exact rank of ``Gamma`` (= of the full Jacobian) at the ``>= 0`` pattern.
    dim : int

    Returns
    -------
    dict (JSON-ready): ``pipeline``, ``rank`` (the pipeline's), ``tol``,
    ``exact_target`` (the exact rank of the matrix the pipeline rounds),
    ``singular_values_near_cut``, ``explanation`` (list of sentences), and for
    ``functional-dimension`` ``kept_samples``, ``exact_rank_kept``, ``exact_rank_softmax``,
    ``softmax_bound``.
    """
    p = parse_pipeline(pipeline) if isinstance(pipeline, str) else pipeline
    net, X = case.network, case.X
    n, N_L = len(X), net.widths[-1]
    n_kept = (n // p.batch) * p.batch if p.batch else n
    J, masks = _float_jacobian(case, p, n_kept)
    if p.rule == "numpy-eps64":  # the float32 matrix taken to float64, then numpy's matrix_rank
        J = J.astype(np.float64)
    failed = {"pipeline": p.name, "rank": None, "explanation": ["the float pipeline produced inf/nan"]}
    if not np.all(np.isfinite(J)):  # LAPACK given inf/nan may not return (docs/tolerances.md)
        return failed
    try:
        S = np.linalg.svd(J, compute_uv=False) if J.size else np.zeros(0, dtype=J.dtype)
    except np.linalg.LinAlgError:
        return dict(failed, explanation=["the float SVD did not converge"])
    if not np.all(np.isfinite(S)):
        return failed
    r_float, tol = rank_rule(S, J.shape, J.dtype, p.rule)
    why: list[str] = []
    out: dict[str, Any] = {"pipeline": p.name, "dtype": p.dtype, "rule": p.rule, "shape": list(J.shape),
                           "rank": r_float, "tol": tol, "exact_rank_gamma": rank_gamma, "dim": dim}
    target = rank_gamma
    st = activation_state(net, X[:n_kept]) if n_kept else None
    flips = 0 if st is None else int(sum(int(np.sum(a != b)) for a, b in zip(masks, st.pattern)))
    out["n_pattern_flips"] = flips
    if flips:
        why.append(f"{flips} activation(s) differ from the exact >= 0 pattern (rounded onto the other side"
                   f"{', or relu' + chr(39) + '(0) = 0 at a tie' if not p.relu_prime_zero else ''}): "
                   "the pipeline ranks the Jacobian of another pattern")
    if p.softmax:
        if st is None:
            r_kept = r_soft = 0
        else:
            G = gamma_exact(net, X[:n_kept], st.Z, st.pattern, FixedEdges({}))
            r_kept = exact_rank(G)
            r_soft = exact_rank(_centred(G, N_L))
        bound = dim - 1 - net.widths[-2]
        out.update(kept_samples=n_kept, dropped_samples=n - n_kept, exact_rank_kept=r_kept,
                   exact_rank_softmax=r_soft, softmax_bound=bound)
        if n_kept < n:
            why.append(f"the last partial batch is dropped: {n - n_kept} of {n} samples "
                       f"(rows {n_kept * N_L}..{n * N_L - 1}); exact rank on the kept samples {r_kept}"
                       f"{'' if r_kept == rank_gamma else f' (not {rank_gamma})'}")
        if r_soft != r_kept:
            why.append(f"softmax outputs: exact rank {r_soft} < {r_kept} (softmax ignores b_L + c 1 and "
                       f"W_L + 1 w^T: at most dim - 1 - N_(L-1) = {bound})")
        target = r_soft
    elif st is not None and J.size <= MAX_EXACT_ENTRIES:
        # The exact matrix this pipeline rounds; Weyl: |sigma_k(J_hat) - sigma_k(J)| <= ||J_hat - J||_2.
        out["delta"] = perturbation_bound(gamma_exact(net, X, st.Z, st.pattern, FixedEdges({})), J)
    out["exact_target"] = target
    k0, k1 = max(min(r_float, target) - 1, 0), min(max(r_float, target) + 1, S.size)
    out["singular_values_near_cut"] = {str(k + 1): float(S[k]) for k in range(k0, k1)}
    if r_float < target:
        lost = ", ".join(f"sigma_{k + 1} = {S[k]:.3g}" for k in range(r_float, min(target, r_float + 3)))
        why.append(f"tolerance {tol:.3g} cuts {target - r_float} singular value(s) of an exactly rank-"
                   f"{target} matrix ({lost}{', ...' if target - r_float > 3 else ''})")
    elif r_float > target:
        kept = ", ".join(f"sigma_{k + 1} = {S[k]:.3g}" for k in range(target, min(r_float, target + 3)))
        why.append(f"tolerance {tol:.3g} counts {r_float - target} singular value(s) that are exactly 0 "
                   f"({kept}{', ...' if r_float - target > 3 else ''}): {p.dtype} round-off"
                   + (f" (by Weyl at most ||J_hat - J|| <= {out['delta']:.3g})" if "delta" in out else "")
                   + (" judged with float64's eps" if p.rule == "numpy-eps64" else ""))
    if r_float > dim:
        why.append(f"rank {r_float} > dim = {dim}: impossible exactly")
    out["agrees"] = r_float == rank_gamma
    out["explanation"] = why or ["same rank as exact"]
    return out


def render_pipeline(d: dict[str, Any]) -> list[str]:
    """Text lines for :func:`emulate`'s result."""
    shape = d.get("shape") or [0, 0]
    head = (f"  pipeline {d['pipeline']}: rank {d['rank']}"
            + (f" (tol {d['tol']:.3g}, {d['dtype']} {shape[0]}x{shape[1]})" if d.get("rank") is not None else "")
            + f"; exact rank_gamma {d.get('exact_rank_gamma')}"
            + ("" if d.get("exact_target") in (None, d.get("exact_rank_gamma"))
               else f", exact rank of what it rounds {d['exact_target']}"))
    return [head] + [f"    - {s}" for s in d["explanation"]]


def emulate_all(case: Case, names: Sequence[str], rank_gamma: int, dim: int) -> list[dict[str, Any]]:
    """:func:`emulate` for each name."""
    return [emulate(case, nm, rank_gamma, dim) for nm in names]
