"""``crosscheck`` on a constrained network (convolution, pooling, skips, leaky ReLU, PReLU).

The float pipelines rank ``Gamma_free = d f(X) / d theta`` (:mod:`exactident.numeric.constrained`:
numpy backpropagation in float64 and float32, ``torch.func.jacrev`` for the torch backends) under
each tolerance policy; the exact side is ``check``'s: ``rank Gamma_free`` at the ``>= 0`` pattern and
``dim_free``.  There is no ``alpha`` (Theorem 8 is not used beyond the plain MLP), so ``rank_a`` is
``null`` and a policy's verdict is ``identifiable`` iff its rank reaches ``dim_free`` (else
``not-identifiable``, what a float rank tool reads; a float rank above ``dim_free``, which rounding
can give since the float matrix has a column per free parameter, reads full rank too:
:func:`~exactident.numeric.constrained.float_verdict_free`); it is marked right when it agrees with the
exact answer to "is ``rank Gamma_free = dim_free`` on every tie resolution?".  The full-Jacobian
policies (every dense weight differentiated) are not run: the free parameters are what the
architecture has.

Called by :func:`exactident.crosscheck.core.crosscheck_case`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from exactident.errors import UnsupportedCaseError
from exactident.model.conditions import IDENTIFIABLE
from exactident.numeric.constrained import (
    constrained_float_rank,
    float_forward,
    float_verdict_free,
    gamma_free_torch,
    to_float_constrained,
)
from exactident.numeric.guard import FloatPipelineError, WarningLog, safe_svdvals
from exactident.numeric.rounding import float_format, round_values
from exactident.numeric.spectra import Spectra
from exactident.numeric.tolerance import Policy, backend_dtype, is_full_jacobian

__all__ = ["crosscheck_constrained"]


def _flips(cn, X, dtype: str, exact_pattern) -> int:
    fcn = to_float_constrained(cn, dtype)
    Xf = np.array(round_values([v for row in X for v in row], float_format(dtype)).values,
                  dtype=np.float64).reshape(len(X), cn.widths[0]).astype(fcn.W[0].dtype)
    Z = float_forward(fcn, Xf)[1]
    return sum(int((((z >= 0) != p) & ((si >= 0) | (a != 1))[None, :]).sum())
               for z, p, si, a in zip(Z[:-1], exact_pattern, fcn.slope_index, fcn.slope))


def _spectra(cn, X, backend: str, exact_pattern) -> Spectra:
    dtype = backend_dtype(backend)
    eps = float(np.finfo(np.dtype(dtype)).eps)
    log = WarningLog()
    try:
        if backend.startswith("torch-"):
            G = gamma_free_torch(cn, X, dtype)
            s = safe_svdvals(G, f"{backend}/svd-gamma") if G.size else np.zeros(0)
        else:
            fr, G, _f = constrained_float_rank(cn, X, dtype=dtype, log=log)
            s = fr.singular_values
    except FloatPipelineError as exc:
        return Spectra.failed(backend, eps, exc.failure, log.entries)
    return Spectra(backend, eps, np.asarray(s, dtype=np.float64), G.shape, np.zeros(0), (len(X), 0),
                   _flips(cn, X, dtype, exact_pattern), warnings=log.entries)


def crosscheck_constrained(case: Any, cn: Any, policies: Sequence[Policy], report: Any
                           ) -> tuple[dict[str, Spectra], list[tuple], int, str]:
    """Float ranks of a constrained case under each policy, marked against ``check``'s exact ones.

    Parameters
    ----------
    case : Case
    cn : ConstrainedNetwork
        ``case``'s compilation.
    policies : list of Policy
        Full-Jacobian policies are dropped (see the module docstring).
    report : Report
        ``check(case)``'s report (``dim`` is ``dim_free``; ``pattern_ranks[0]`` the exact rank at the
        ``>= 0`` pattern).

    Returns
    -------
    (spectra, outcomes, pattern_rank_gamma, pattern_verdict)
        ``outcomes``: per policy kept, the fields of :class:`~exactident.crosscheck.core.PolicyOutcome`
        (``rank_a`` None).
    """
    from exactident.model.constrained import constrained_pre_activations

    X = case.X
    dim_free = report.dim  # a constrained report's dim is dim_free (rank T - dim S_H), not the parameter count
    Z = constrained_pre_activations(cn, X)
    exact_pattern = [np.array([[z >= 0 for z in row] for row in M.table()], dtype=bool).reshape(M.nrows(), M.ncols())
                     for M in Z[:-1]]
    p_rank = report.pattern_ranks[0] if report.pattern_ranks else report.rank_gamma
    if p_rank is None:  # floats are marked against a certified rank, never a Monte Carlo value
        raise UnsupportedCaseError(f"{case.name}: rank Gamma_free at the >= 0 pattern is certified only in an "
                                   "interval (no exact kernel within the limits): crosscheck needs the exact rank")
    exact_identifiable = report.verdict == IDENTIFIABLE
    # the rank rule at the >= 0 pattern: same answer as check's (fixable) unless that pattern decides otherwise
    p_full = p_rank is not None and p_rank >= dim_free
    p_verdict = report.verdict if p_full == exact_identifiable else (IDENTIFIABLE if p_full else "inconclusive")
    kept = [p for p in policies if not is_full_jacobian(p.backend)]
    spectra = {b: _spectra(cn, X, b, exact_pattern) for b in dict.fromkeys(p.backend for p in kept)}
    outcomes: list[tuple] = []
    for pol in kept:
        sp = spectra[pol.backend]
        if sp.failure is not None:
            outcomes.append((pol.name, None, None, None, "float-failed", False, False))
            continue
        tg = pol.tolerance(sp.gamma_sv, sp.gamma_shape, sp.eps, "gamma")
        rg = int((sp.gamma_sv > tg).sum())
        v = float_verdict_free(rg, dim_free)
        outcomes.append((pol.name, tg, rg, None, v, (v == IDENTIFIABLE) == exact_identifiable, rg == p_rank))
    return spectra, outcomes, p_rank, p_verdict
