"""The report's ``numeric`` block: the float pipelines beside the exact answer (docs/cli.md).

Three things a float tool does are set beside the exact ranks and verdict:

- the float64 pipeline on ``Gamma`` over the free parameters (the exact
  path's matrix, rounded): ranks, verdict, ``agrees``, the tolerance ``band``;
- where it could not place a sample on the right side of a kink
  (``near_kinks``, :mod:`exactident.numeric.kinks`);
- the ``full-jacobian`` pipelines practitioners run: every weight and bias
  differentiated, fixed edges included, ranked by numpy's (or torch's) default
  rule in float64 and float32 (:mod:`exactident.numeric.full_jacobian`).

A float pipeline that fails (a value beyond the format's range, ``nan``, an
SVD that does not converge) is a finding, not an error: the block carries
``status``, ``where`` and ``message`` (:mod:`exactident.numeric.guard`), and
``agrees`` is ``false``.  numpy's ``RuntimeWarning`` warnings are listed in ``warnings``.

Called by :func:`exactident.check.check`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from exactident.linalg import floating
from exactident.model.activation import ActivationState
from exactident.model.conditions import verdict_from_ranks
from exactident.model.fixed_edges import FixedEdges
from exactident.model.network import Network
from exactident.numeric.guard import FloatPipelineError, WarningLog, safe_svdvals
from exactident.numeric.kinks import near_kinks
from exactident.numeric.numpy_backend import FloatOperators, float_operators, numpy_dtype

__all__ = ["NumericResult", "float_ranks", "numeric_block", "numeric_check"]


def float_ranks(ops: FloatOperators, tol: float | None = None,
                rtol: float | None = None) -> tuple[floating.FloatRank, floating.FloatRank]:
    """Float ranks of ``ops.gamma`` (``tol``, ``rtol`` or numpy's rule) and of ``ops.alpha`` (numpy's rule).

    On the Gram route the rank of the Gram matrix is taken, as
    :func:`exactident.linalg.floating.rank` would.

    Raises
    ------
    FloatPipelineError
        From the SVD (:func:`exactident.numeric.guard.safe_svdvals`).
    """
    s = ops.gamma_singular_values()
    if tol is not None:
        t = float(tol)
    elif rtol is not None:
        t = float(rtol * s[0]) if s.size else 0.0
    else:  # eps of the pipeline's dtype (float16: LAPACK ran in float32, the data is float16)
        t = floating.default_tol(s, ops.gamma.shape, ops.dtype)
    g = floating.FloatRank(int((s > t).sum()), t, s)
    with ops.log.stage(ops.stage_prefix + "svd-alpha"):
        sa = safe_svdvals(ops.alpha.astype(np.float32) if ops.dtype == np.float16 else ops.alpha,
                          ops.stage_prefix + "svd-alpha")
    ta = floating.default_tol(sa, ops.alpha.shape, ops.dtype) if sa.size else 0.0
    return g, floating.FloatRank(int((sa > ta).sum()), ta, sa)


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


def _result(ops: FloatOperators, net: Network, degenerate: bool, tol: float | None,
            rtol: float | None) -> NumericResult:
    g, a = float_ranks(ops, tol, rtol)
    rank_a = net.widths[-1] * a.rank
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
                  pattern_ranks: tuple[int, int | None], *, tol: float | None = None,
                  rtol: float | None = None, verdict_reached: bool = True,
                  dtype: object = "float64", full_jacobian: bool = True) -> dict[str, Any]:
    """The ``numeric`` block of a report (fields in docs/cli.md).

    Parameters
    ----------
    net, X, fixed
        The case and its fixed edges.
    state : ActivationState
        Exact pre-activations, ``>= 0`` pattern and ties.
    degenerate : bool
    exact_verdict : str
    pattern_ranks : (int, int or None)
        Exact ``rank_gamma``, ``rank_a`` at the ``>= 0`` pattern (the matrices
        the float ones round).
    tol, rtol : float, optional
        The user's tolerance for ``Gamma`` (see :func:`numeric_check`).
    verdict_reached : bool
        ``False`` when the exact analysis stopped without a verdict (the
        resolution cap): ``agrees`` is then ``null``, not ``false``.
    dtype : float format of the main pipeline (float64 by default; float32, float16)
    full_jacobian : bool
        Add the ``full_jacobian`` entry.

    Returns
    -------
    dict
        JSON-ready.
    """
    numpy_dtype(dtype)  # refuse bfloat16 up front, before any work
    rg_p, ra_p = pattern_ranks
    log = WarningLog()
    block: dict[str, Any] = {"status": "ok", "dtype": np.dtype(numpy_dtype(dtype)).name}
    try:
        ops = float_operators(net, X, fixed, state.pattern, dtype, log=log)
        res = _result(ops, net, degenerate, tol, rtol)
    except FloatPipelineError as exc:
        block.update(exc.failure.as_dict())
        block.update({"rank_gamma": None, "rank_a": None, "verdict": None, "tol": None, "agrees": False,
                      "compared_with": {"rank_gamma": rg_p, "rank_a": ra_p},
                      "singular_values_near_cut": [], "pattern_differs": None})
    else:
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
        block["near_kinks"] = near_kinks(ops, state)
    block["compared_with"]["verdict"] = exact_verdict if verdict_reached else None
    if not verdict_reached:
        block["agrees"] = None
    block["warnings"] = log.entries
    if full_jacobian:
        from exactident.numeric.full_jacobian import full_jacobian_block

        block["full_jacobian"] = full_jacobian_block(net, X, state.pattern, rg_p)
    return block
