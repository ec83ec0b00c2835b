"""The cases :func:`exactident.check.check` hands to the constrained engine (layer graphs).

A case whose network is more than the layered ReLU MLP (a layer graph with convolution, pooling,
skips, leaky ReLU, PReLU or fixed weights: :func:`constrained_of`) is analysed by
:func:`exactident.check_constrained.check_constrained` (:func:`check_carried`), inside the same
budget and progress display as an MLP; Theorem 8 is never used for it.  Its float cross-check
(:func:`carried_numeric`) holds the float64 ``Gamma_free`` against the exact rank.
"""

from __future__ import annotations

import copy
from typing import Any

from exactident.budget import deliver, stage
from exactident.check.options import CheckOptions
from exactident.io.report import Report

__all__ = ["carried_numeric", "check_carried", "constrained_of"]


def constrained_of(case: Any) -> Any:
    """The :class:`~exactident.model.constrained.ConstrainedNetwork` a case carries, or None for a plain MLP.

    A case object exposing ``constrained`` (a ConstrainedNetwork) or ``architecture`` (compiled by
    ``exactident.model.compile.compile_architecture``) goes to the constrained engine, unless it
    compiles to the plain layered ReLU MLP (``is_plain()``): that one keeps the plain engine.
    """
    cn = getattr(case, "constrained", None)
    arch = getattr(case, "architecture", None)
    if cn is None and arch is not None:
        if hasattr(case, "compiled"):  # the case keeps its compiled form
            cn = case.compiled
        else:
            from exactident.model.compile import compile_architecture  # type: ignore[import-not-found,unused-ignore]

            cn = compile_architecture(arch)
    if cn is None or cn.is_plain():
        return None
    return cn


def check_carried(case: Any, options: CheckOptions) -> Report:
    """:func:`exactident.check_constrained.check_constrained` on a case carrying a constrained network.

    Reads ``max_resolutions``, ``seed``, ``structural`` and ``exact_ranks or all_ranks`` of
    ``options`` (the constrained engine has no other option); no float cross-check.
    """
    from exactident.check_constrained import check_constrained

    shape = getattr(getattr(case, "architecture", None), "input_shape", None)
    return check_constrained(constrained_of(case), case.X, name=case.name, max_resolutions=options.max_resolutions,
                             seed=options.seed, structural=options.structural, input_shape=shape,
                             provenance=getattr(case, "provenance", None),
                             exact_ranks=options.exact_ranks or options.all_ranks)


def carried_numeric(case: Any, cn: Any, report: Report, options: CheckOptions) -> Report:
    """``report`` with its float cross-check: ``Gamma_free`` in float64 beside the exact rank (stage
    ``float cross-check``).  The verdict is delivered first, so a budget running out here keeps it."""
    from exactident.numeric.block import parse_pipelines, report_numeric_block

    with_torch = "torch" in parse_pipelines(options.pipelines)  # the only optional pipeline for these networks
    deliver(copy.copy(report))
    stage("float cross-check", rows=len(case.X) * report.widths[-1], cols=report.dim)
    report.numeric = report_numeric_block(cn, case.X, report, tol=options.tol, rtol=options.rtol, torch=with_torch)
    return report
