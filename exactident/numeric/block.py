"""The report's ``numeric`` block: the float pipelines beside the exact answer (docs/cli.md).

What a float tool does is set beside the exact ranks and verdict.  By default ONE
pipeline runs (it is what ``check`` pays for on every case):

- the float64 pipeline on ``Gamma`` over the free parameters (the exact
  path's matrix, rounded, by backpropagation) ranked by an SVD: ranks, verdict,
  ``agrees``, the tolerance ``band``; the float ``alpha`` only when the float
  verdict needs ``R_A`` (float ``rank_gamma < dim``) or the exact ``rank_a`` was
  computed (to compare with).

The others run on request (:data:`OPTIONAL_PIPELINES`, ``check --pipelines``):

- ``stored-dtype``: the same pipeline in the dtype the weights were stored in
  (float32 for float32, float16 and bfloat16 weights), as ``stored_dtype``;
- ``kinks``: where it could not place a sample on the right side of a kink
  (``near_kinks``, :mod:`exactident.numeric.kinks`);
- ``full-jacobian``, ``float32``, ``torch``: the pipelines practitioners run: every
  weight and bias differentiated, fixed edges included, ranked by numpy's default
  rule in float64 (``full-jacobian``), in float32 (``float32``), and by
  ``torch.func.jacrev`` + ``torch.linalg`` (``torch``)
  (:mod:`exactident.numeric.full_jacobian`).

A float pipeline that fails (a value beyond the format's range, ``nan``, an
SVD that does not converge) is a finding, not an error: the block carries
``status``, ``where`` and ``message`` (:mod:`exactident.numeric.guard`), and
``agrees`` is ``false``.  numpy's ``RuntimeWarning`` warnings are listed in ``warnings``.

A network beyond the plain ReLU MLP (a layer graph: ``W = T theta + c``, negative slopes) has
no ``alpha`` (Theorem 8 is not used beyond the plain MLP): :func:`free_numeric_block` ranks the
float ``Gamma_free`` (:mod:`exactident.numeric.gamma_free`, the same builder) against ``dim_free``,
with ``torch`` (``torch.func.jacrev`` with respect to ``theta``) the only optional pipeline.

Called by :func:`exactident.check.check`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from exactident.errors import UnsupportedCaseError
from exactident.linalg import floating
from exactident.model.activation import ActivationState
from exactident.model.conditions import verdict_from_ranks
from exactident.model.fixed_edges import FixedEdges
from exactident.model.network import Network
from exactident.numeric.float_network import numpy_dtype, round_sample
from exactident.numeric.guard import FloatPipelineError, WarningLog, safe_svdvals
from exactident.numeric.numpy_backend import (
    MAX_ALPHA_ENTRIES,
    FloatOperators,
    alpha_float,
    alpha_float_gram,
    float_operators,
)

__all__ = ["OPTIONAL_PIPELINES", "NumericResult", "float_ranks", "free_numeric_block", "numeric_block",
           "numeric_check", "parse_pipelines", "report_numeric_block"]

#: Pipelines of the numeric block beyond the default float64 one, run on request (``check --pipelines``).
OPTIONAL_PIPELINES = ("stored-dtype", "kinks", "full-jacobian", "float32", "torch")


def parse_pipelines(names: str | Collection[str] | None) -> frozenset[str]:
    """The optional pipelines named (a comma-separated string or a collection; ``all``: every one).

    Raises
    ------
    UnsupportedCaseError
        For a name not in :data:`OPTIONAL_PIPELINES` (``float64`` is accepted: it always runs).

    Examples
    --------
    >>> sorted(parse_pipelines("kinks,float32"))
    ['float32', 'kinks']
    >>> parse_pipelines(None) == frozenset(), parse_pipelines("all") == frozenset(OPTIONAL_PIPELINES)
    (True, True)
    """
    if names is None:
        return frozenset()
    items = [n.strip() for n in names.split(",")] if isinstance(names, str) else [str(n) for n in names]
    out: set[str] = set()
    for name in items:
        if name == "all":
            out.update(OPTIONAL_PIPELINES)
        elif name in OPTIONAL_PIPELINES:
            out.add(name)
        elif name not in ("float64", ""):
            raise UnsupportedCaseError(f"unknown float pipeline {name!r} (expected some of float64, "
                                       f"{', '.join(OPTIONAL_PIPELINES)}, or all)")
    return frozenset(out)


def float_ranks(ops: FloatOperators, tol: float | None = None,
                rtol: float | None = None) -> tuple[floating.FloatRank, floating.FloatRank]:
    """Float ranks of ``ops.gamma`` (``tol``, ``rtol`` or numpy's rule) and of ``ops.alpha`` (numpy's rule).

    On the Gram route the rank of the Gram matrix is taken, as
    :func:`exactident.linalg.floating.rank` would.  ``ops.alpha`` must have been built
    (``float_operators(..., with_alpha=True)``).

    Raises
    ------
    FloatPipelineError
        From the SVD (:func:`exactident.numeric.guard.safe_svdvals`).
    """
    return _gamma_rank(ops, tol, rtol), _alpha_rank(ops)


def _gamma_rank(ops: FloatOperators, tol: float | None, rtol: float | None) -> floating.FloatRank:
    s = ops.gamma_singular_values()
    if tol is not None:
        t = float(tol)
    elif rtol is not None:
        t = float(rtol * s[0]) if s.size else 0.0
    else:  # eps of the pipeline's dtype (float16: LAPACK ran in float32, the data is float16)
        t = floating.default_tol(s, ops.gamma.shape, ops.dtype)
    return floating.FloatRank(int((s > t).sum()), t, s)


def _alpha_rank(ops: FloatOperators) -> floating.FloatRank:
    with ops.log.stage(ops.stage_prefix + "svd-alpha"):
        sa = safe_svdvals(ops.alpha.astype(np.float32) if ops.dtype == np.float16 else ops.alpha,
                          ops.stage_prefix + "svd-alpha")
    ta = floating.default_tol(sa, ops.alpha.shape, ops.dtype) if sa.size else 0.0
    return floating.FloatRank(int((sa > ta).sum()), ta, sa)


def _with_alpha(ops: FloatOperators) -> None:
    """Build ``ops.alpha`` (explicit, or its Gram matrix past :data:`MAX_ALPHA_ENTRIES`) from the float pattern.

    Raises
    ------
    FloatPipelineError
        ``overflow``/``non-finite`` entries (:func:`exactident.numeric.guard.require_finite`).
    """
    from exactident.numeric.guard import require_finite

    n, n_p = ops.alpha_shape
    Xf = ops.sample.X if ops.sample is not None else np.zeros((0, 0))
    with ops.log.stage(ops.stage_prefix + "alpha"):
        if n == 0:
            ops.alpha, ops.alpha_is_gram = np.zeros((0, n_p), dtype=ops.dtype), False
        elif n * n_p <= MAX_ALPHA_ENTRIES:
            ops.alpha, ops.alpha_is_gram = alpha_float(ops.pattern, Xf), False
        else:
            ops.alpha, ops.alpha_is_gram = alpha_float_gram(ops.pattern, Xf), True
    require_finite(ops.alpha, ops.stage_prefix + "alpha", lambda idx: f"alpha[{idx[0]}, {idx[1]}]")


@dataclass
class NumericResult:
    """The float verdict beside the exact one (the report's ``numeric`` block, docs/cli.md)."""

    rank_gamma: int
    rank_a: int | None  # None: not computed (the float verdict did not need R_A)
    verdict: str
    tol: float
    singular_values_near_cut: list[float]
    pattern_differs: bool
    gamma_rank: floating.FloatRank

    def as_dict(self, exact_rank_gamma: int | None, exact_rank_a: int | None, exact_verdict: str,
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
        out: dict[str, Any] = {"rank_gamma": self.rank_gamma, "rank_a": self.rank_a, "verdict": self.verdict,
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


def _result(ops: FloatOperators, net: Network, degenerate: bool, tol: float | None,
            rtol: float | None, alpha: bool | None = True) -> NumericResult:
    """Ranks and verdict of one float pipeline.  ``alpha=None``: the float ``alpha`` only when the
    float verdict needs ``R_A`` (float ``rank_gamma < dim``, theta not in S); ``rank_a`` is ``None`` otherwise."""
    g = _gamma_rank(ops, tol, rtol)
    rank_a = None
    if alpha or (alpha is None and g.rank < net.dim and not degenerate):
        if ops.alpha.shape[1] == 0 and ops.alpha_shape[1] > 0:  # built without alpha: build it now
            _with_alpha(ops)
        rank_a = net.widths[-1] * _alpha_rank(ops).rank
    verdict = verdict_from_ranks(g.rank, rank_a, net.dim, degenerate)
    return NumericResult(g.rank, rank_a, verdict, g.tol, g.near_cut(), ops.pattern_differs, g)


def numeric_check(net: Network, X: Sequence[Sequence[flint.fmpq]], fixed: FixedEdges,
                  exact_pattern: Sequence[np.ndarray], degenerate: bool,
                  tol: float | None = None, dtype: object = np.float64,
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

    Raises
    ------
    FloatPipelineError
        When the float pipeline fails (:mod:`exactident.numeric.guard`).
    """
    ops = float_operators(net, X, fixed, exact_pattern, dtype)
    return _result(ops, net, degenerate, tol, rtol)


def numeric_block(net: Network, X: Sequence[Sequence[flint.fmpq]], fixed: FixedEdges,
                  state: ActivationState, degenerate: bool, exact_verdict: str,
                  pattern_ranks: tuple[int | None, int | None], *, tol: float | None = None,
                  rtol: float | None = None, verdict_reached: bool = True,
                  dtype: object = "float64", pipelines: Collection[str] = frozenset(),
                  stored_dtype: object = "float64", interval: tuple[int, int] | None = None) -> dict[str, Any]:
    """The ``numeric`` block of a report (fields in docs/cli.md).

    Parameters
    ----------
    net, X, fixed
        The case and its fixed edges.
    state : ActivationState
        Exact pre-activations, ``>= 0`` pattern and ties.
    degenerate : bool
    exact_verdict : str
    pattern_ranks : (int or None, int or None)
        Exact ``rank_gamma``, ``rank_a`` at the ``>= 0`` pattern (the matrices
        the float ones round); ``rank_gamma`` None when only a certified interval is known
        (``interval``), and the full-Jacobian pipelines, which need the exact rank, are then left out.
    tol, rtol : float, optional
        The user's tolerance for ``Gamma`` (see :func:`numeric_check`).
    verdict_reached : bool
        ``False`` when the exact analysis stopped without a verdict (the
        resolution cap): ``agrees`` is then ``null``, not ``false``.
    dtype : float format of the main pipeline (float64 by default; float32, float16)
    pipelines : collection of str
        Optional pipelines to add (:data:`OPTIONAL_PIPELINES`; see :func:`parse_pipelines`).
        Empty (the default): the main pipeline only, with the float ``alpha`` only when
        the float verdict needs ``R_A`` or the exact ``rank_a`` is known.
    stored_dtype : float format the weights were stored in (the ``stored-dtype`` pipeline)
    interval : (int, int), optional
        The certified ``lo <= rank Gamma <= hi`` when ``pattern_ranks[0]`` is None: ``agrees`` then
        means the float verdict is the exact one and the float rank lies in ``[lo, hi]``
        (``compared_with.rank_gamma_interval``); without either, ``agrees`` is null.

    Returns
    -------
    dict
        JSON-ready.

    Raises
    ------
    UnsupportedCaseError
        For an unknown pipeline name, or ``torch`` without PyTorch installed.
    """
    numpy_dtype(dtype)  # refuse bfloat16 up front, before any work
    chosen = parse_pipelines(pipelines)
    rg_p, ra_p = pattern_ranks
    log = WarningLog()
    block: dict[str, Any] = {"status": "ok", "dtype": np.dtype(numpy_dtype(dtype)).name}
    underflow = None
    try:
        ops = float_operators(net, X, fixed, state.pattern, dtype, log=log, with_alpha=False)
        res = _result(ops, net, degenerate, tol, rtol, alpha=True if ra_p is not None else None)
    except FloatPipelineError as exc:
        block.update(exc.failure.as_dict())
        block.update({"rank_gamma": None, "rank_a": None, "verdict": None, "tol": None, "agrees": False,
                      "compared_with": {"rank_gamma": rg_p, "rank_a": ra_p},
                      "singular_values_near_cut": [], "pattern_differs": None})
    else:
        underflow = ops.underflow
        other_matrix = ops.pattern_differs or ops.underflow is not None
        block.update(res.as_dict(rg_p, ra_p, exact_verdict, band_rank=None if other_matrix else rg_p))
        if ops.pattern_differs:
            block["band_withheld"] = (f"the float activation pattern differs from the exact one at "
                                      f"{ops.n_pattern_flips} (sample, neuron) pair(s): the float Gamma "
                                      "rounds another matrix, so no tolerance on it is advice")
        elif ops.underflow is not None:
            block["band_withheld"] = ("exactly nonzero values are zero in floats (underflow-to-zero): the "
                                      "float Gamma is another matrix, so no tolerance on it is advice")
        if ops.underflow is not None:
            block.update(ops.underflow.as_dict())
            block["agrees"] = False
        if "kinks" in chosen:
            from exactident.numeric.kinks import near_kinks  # an optional pipeline: loaded when asked for

            block["near_kinks"] = near_kinks(ops, state)
    block["compared_with"]["verdict"] = exact_verdict if verdict_reached else None
    if rg_p is None and interval is not None:  # the float rank is held against the certified interval
        lo, hi = interval
        block["compared_with"]["rank_gamma_interval"] = [lo, hi]
        frg, ra = block.get("rank_gamma"), block.get("rank_a")
        block["agrees"] = (block.get("status", "ok") == "ok" and underflow is None and frg is not None
                           and lo <= frg <= hi and block["verdict"] == exact_verdict
                           and (ra_p is None or ra == ra_p))
    if not verdict_reached or (rg_p is None and interval is None):  # no verdict, or no exact rank, to agree with
        block["agrees"] = None
    block["warnings"] = log.entries
    block["pipelines"] = [block["dtype"], *sorted(chosen)]
    stored = np.dtype(numpy_dtype(stored_dtype)).name
    if "stored-dtype" in chosen and stored != block["dtype"]:
        block["stored_dtype"] = numeric_block(net, X, fixed, state, degenerate, exact_verdict, pattern_ranks,
                                              tol=tol, rtol=rtol, verdict_reached=verdict_reached,
                                              dtype=stored, interval=interval)
        del block["stored_dtype"]["pipelines"]
    backends = [b for b, name in (("float64", "full-jacobian"), ("float32", "float32"),
                                  ("torch-float64", "torch"), ("torch-float32", "torch")) if name in chosen]
    if backends and rg_p is not None:
        from exactident.numeric.full_jacobian import full_jacobian_block

        block["full_jacobian"] = full_jacobian_block(net, X, state.pattern, rg_p, backends=backends)
    return block


def free_numeric_block(net: Any, X: Sequence[Sequence[flint.fmpq]], dim_free: int,
                       exact_pattern: Sequence[np.ndarray], exact_rank_gamma: int | None,
                       exact_verdict: str | None, *, tol: float | None = None,
                       rtol: float | None = None, dtype: object = "float64",
                       torch: bool = False, interval: tuple[int, int] | None = None) -> dict[str, Any]:
    """The report's ``numeric`` block for a layer graph (fields as for the plain one, docs/cli.md).

    Parameters
    ----------
    net, X
        The compiled network (:class:`~exactident.model.network.Network`) and the sample (Q).
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
        (``identifiable`` iff ``rank_gamma >= dim_free``,
        :func:`~exactident.numeric.gamma_free.float_verdict_free`), ``tol``,
        ``agrees`` (same rank as the exact one and the same answer to "identifiable?"),
        ``compared_with``, ``singular_values_near_cut``, ``pattern_differs``, ``band``,
        ``warnings``, ``pipelines``.
    """
    from exactident.numeric.gamma_free import float_flips, float_verdict_free, free_float_rank  # layer graphs only

    log = WarningLog()
    block: dict[str, Any] = {"status": "ok", "dtype": np.dtype(numpy_dtype(dtype)).name, "dim_free": dim_free}
    compared: dict[str, Any] = {"rank_gamma": exact_rank_gamma, "rank_a": None, "verdict": exact_verdict}
    try:
        g, _G, fnet = free_float_rank(net, X, tol=tol, rtol=rtol, dtype=dtype, log=log)
    except FloatPipelineError as exc:
        block.update(exc.failure.as_dict())
        block.update({"rank_gamma": None, "rank_a": None, "verdict": None, "tol": None, "agrees": False,
                      "compared_with": compared, "singular_values_near_cut": [], "pattern_differs": None})
    else:
        verdict = float_verdict_free(g.rank, dim_free)
        flips = float_flips(fnet, round_sample(X, fnet.widths[0], numpy_dtype(dtype)).X, exact_pattern)
        agrees = (exact_rank_gamma is not None and g.rank == exact_rank_gamma
                  and (verdict == "identifiable") == (exact_verdict == "identifiable"))
        block.update({"rank_gamma": g.rank, "rank_a": None, "verdict": verdict, "tol": g.tol, "agrees": agrees,
                      "compared_with": compared, "singular_values_near_cut": g.near_cut(),
                      "pattern_differs": flips > 0})
        if fnet.underflow or fnet.overflow:
            block["underflow"] = list(fnet.underflow)
            block["agrees"] = False
        if exact_rank_gamma is not None and flips == 0 and not fnet.underflow and g.singular_values.size:
            sv = g.singular_values
            lo, hi = floating.consistent_band(sv, min(exact_rank_gamma, sv.size))
            smax = float(sv[0]) if sv[0] > 0 else 1.0
            block["band"] = {"rank": exact_rank_gamma, "abs": [lo, None if hi == float("inf") else hi],
                             "rel": [lo / smax, None if hi == float("inf") else hi / smax],
                             "tol_inside": lo <= g.tol < hi}
    if exact_rank_gamma is None and interval is not None:  # the float rank is held against the certified interval
        lo_i, hi_i = interval
        compared["rank_gamma_interval"] = [lo_i, hi_i]
        frg = block.get("rank_gamma")
        block["agrees"] = (block.get("status", "ok") == "ok" and "underflow" not in block and frg is not None
                           and lo_i <= frg <= hi_i
                           and (block["verdict"] == "identifiable") == (exact_verdict == "identifiable"))
    if exact_verdict is None or (exact_rank_gamma is None and interval is None):  # nothing exact to agree with
        block["agrees"] = None
    pipelines = [block["dtype"]]
    if torch:
        from exactident.numeric.torch_backend import gamma_free_torch

        pipelines.append("torch")
        try:
            Gt = gamma_free_torch(net, X, "float64")
            r = floating.rank(Gt, tol=tol, rtol=rtol)
            block["torch"] = {"rank_gamma": r.rank, "tol": r.tol, "verdict": float_verdict_free(r.rank, dim_free)}
        except UnsupportedCaseError as exc:
            block["torch"] = {"status": "skipped", "message": str(exc)}
    block["warnings"] = log.entries
    block["pipelines"] = pipelines
    return block


def report_numeric_block(net: Any, X: Sequence[Sequence[flint.fmpq]], report: Any, *,
                         tol: float | None = None, rtol: float | None = None, torch: bool = False) -> dict[str, Any]:
    """:func:`free_numeric_block` beside a layer graph's report of ``check``.

    The exact side is read from ``report``: ``dim`` (``dim_free``), ``pattern_ranks[0]`` (the
    certified rank of ``Gamma_free`` at the ``>= 0`` pattern, the matrix the float one rounds;
    None past the tie cap or for an interval), ``pattern_interval`` (that certified interval) and
    ``verdict``; the exact ``>= 0`` pattern is recomputed
    (:func:`exactident.model.network.pre_activations`).
    """
    from exactident.model.network import pre_activations

    Z = pre_activations(net, X)
    pattern = [np.array([z >= 0 for z in M.entries()], dtype=bool).reshape(M.nrows(), M.ncols()) for M in Z[:-1]]
    ranks = getattr(report, "pattern_ranks", None)
    return free_numeric_block(net, X, report.dim, pattern, ranks[0] if ranks else None, report.verdict,
                              tol=tol, rtol=rtol, torch=torch, interval=getattr(report, "pattern_interval", None))
