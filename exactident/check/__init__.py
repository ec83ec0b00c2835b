"""``check``: the whole analysis of one case, as a library call (the CLI is a thin layer on it).

``check(case, options)`` runs one pipeline of named stages (:mod:`exactident.check.pipeline`) over one
:class:`CheckOptions` (:mod:`exactident.check.options`; the keywords of ``check`` build one), on the
dense layered ReLU MLP and on a layer graph (convolution, pooling, skips, leaky ReLU, PReLU, fixed or
tied weights) alike.  Each stage states its hypotheses and runs on every network that meets them;
on another it says in one line which fails:

1. :func:`load`: the case (a model file imported exactly with its sample) and the options it implies;
2. ``forward pass``: the exact forward pass, the ties, the degenerate set ``S`` and the fixed edges
   (:func:`~exactident.check.dense_route.forward_pass`), or a layer graph's ``dim_free``
   (:func:`~exactident.check.free_route.graph_forward`);
3. ``certificates first``: with many tie resolutions, the certificates valid on every resolution
   before any is enumerated (:func:`~exactident.check.free_route.certificate_stage`);
4. ``ranks``: certified ``rank_gamma`` and ``rank_a`` at the ``>= 0`` pattern
   (:func:`~exactident.check.dense_route.rank_stage`, the stages of :mod:`exactident.ranks.certify`), or
   ``rank Gamma_free`` on every tie resolution (:func:`~exactident.check.free_route.free_rank_stage`);
5. ``verdict``: Theorems 8 and 9 or the tie resolutions (:func:`~exactident.check.verdict.decide`;
   Theorem 8 on the dense ReLU MLP only), the free-rank rule on a layer graph;
6. ``structural certificates``: certificates that settle an ``inconclusive`` verdict
   (:func:`~exactident.check.verdict.settle_structurally`,
   :func:`~exactident.check.free_route.certificate_stage`);
7. ``propositions``: the optional exact check of Props. 1 and 10 (the MLP's lifting);
8. ``report``: :func:`~exactident.check.verdict.assemble`,
   :func:`~exactident.check.free_route.graph_report`;
9. ``float cross-check``: the float pipelines beside the exact ranks
   (:func:`~exactident.check.dense_route.numeric_stage`, :func:`~exactident.check.free_route.carried_numeric`).

The stage names are what progress displays and ``--timeout`` (``time budget exhausted at <stage>``)
report.  With a budget (``timeout``) or a stage listener the analysis runs in a child process; the
report is handed to the parent as soon as the verdict is reached (:func:`exactident.budget.deliver`),
before the float cross-check, so a budget that runs out there keeps the exact verdict and marks the
``numeric`` block ``timed out`` (:func:`~exactident.check.timed_out.keep_verdict`).
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from exactident.budget import run_isolated
from exactident.check.dense_route import MAX_EXPLICIT_ALPHA, forward_pass, numeric_stage, rank_alpha, rank_stage
from exactident.check.options import CheckOptions
from exactident.check.pipeline import analyse, check_carried, check_constrained, constrained_of
from exactident.check.timed_out import keep_verdict, timed_out_report
from exactident.io.case import Case
from exactident.io.report import Report

__all__ = ["MAX_EXPLICIT_ALPHA", "CheckOptions", "analyse", "check", "check_constrained", "constrained_of",
           "forward_pass", "keep_verdict", "load", "numeric_stage", "rank_alpha", "rank_stage", "timed_out_report"]

#: The float pipelines compared with the exact rank: ``rank_gamma`` is then certified, never an interval.
_EXACT_RANK_PIPELINES = frozenset({"full-jacobian", "float32", "torch"})


def check(case: Case | str | os.PathLike[str], options: CheckOptions | None = None, **keywords: Any) -> Report:
    """Decide local identifiability of ``case.network`` from ``case.X``.

    Parameters
    ----------
    case : Case, or path
        A case, a case file (``.json``), or a model file (``.onnx``, ``.pt``, ``.safetensors``,
        ``.keras``/``.h5``, ``.npz``; imported exactly by :func:`exactident.io.importers.load.import_model`,
        with the ``sample`` option).
    options : CheckOptions, optional
        Every option of the call (:class:`~exactident.check.options.CheckOptions`, documented field
        by field); default ``CheckOptions()``.
    **keywords
        The fields of :class:`~exactident.check.options.CheckOptions` by name (``numeric=False``,
        ``seed=3``, ``timeout=60``, ...).  Given with ``options``, a keyword overrides that field
        (as ``dataclasses.replace``).

    Returns
    -------
    Report

    Raises
    ------
    CaseFormatError
        A path that cannot be read or imported (naming the file and field).
    UnsupportedCaseError
        An option outside its domain or no option at all (naming it), an unknown pipeline name;
        the lifting too large for ``verify_propositions``.
    InvariantViolation
        If ``verify_propositions`` finds an identity broken.

    Examples
    --------
    The hand-checked network of docs/theory.md with the samples ``0, 1, -1`` (kink-free):

    >>> from exactident.io.case import parse_case
    >>> case = parse_case({"format": "exactident-case/1", "name": "t", "widths": [1, 1, 1],
    ...     "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]], "sample": [[0], [1], [-1]]})
    >>> r = check(case, numeric=False, all_ranks=True)
    >>> r.verdict, r.rank_gamma, r.rank_a, r.dim
    ('identifiable', 3, 3, 3)
    >>> same = check(case, CheckOptions(numeric=False, all_ranks=True))
    >>> same.verdict, same.rank_gamma, same.rank_a
    ('identifiable', 3, 3)
    """
    options = CheckOptions.merged(options, keywords)  # validated once, before any work
    if not isinstance(case, Case) and options.sample is None and getattr(case, "constrained", None) is not None:
        return check_carried(case, options)  # an object carrying a Network
    case, options = load(case, options)  # before any budget: a timed-out report needs the case
    return _run(case, options)


def load(case: Any, options: CheckOptions) -> tuple[Case, CheckOptions]:
    """The case (a path or model file read, with ``options.sample``) and the options the rest reads.

    With ``numeric``, ``pipelines`` becomes the frozenset of names (an unknown one is refused before
    any work) and the pipelines compared with the exact rank (``full-jacobian``, ``float32``,
    ``torch``) set ``exact_ranks``: their rank is certified, never an interval.
    """
    if not isinstance(case, Case) or options.sample is not None:
        from exactident.io.importers.load import as_case

        case = as_case(case, options.sample, reference=options.reference, assume_relu_mlp=options.assume_relu_mlp)
    if options.numeric:
        from exactident.numeric.block import parse_pipelines

        pipelines = parse_pipelines(options.pipelines)
        options = replace(options, pipelines=pipelines,
                          exact_ranks=options.exact_ranks or bool(_EXACT_RANK_PIPELINES & pipelines))
    return case, replace(options, sample=None, reference=None, assume_relu_mlp=False)  # the case holds them now


def _run(case: Case, options: CheckOptions) -> Report:
    """:func:`analyse` inside the progress display and the budget the options ask for."""
    if options.progress or (options.progress is None and options.on_stage is None):
        from exactident.progress import enabled, showing

        if enabled(options.progress):
            with showing(True, case.name) as show:
                on_stage = options.on_stage

                def both(name: str, sizes: dict[str, Any]) -> None:  # a child's stages reach only on_stage
                    show(name, sizes)
                    if on_stage is not None:
                        on_stage(name, sizes)

                return _run(case, replace(options, on_stage=on_stage if options.timeout is None else both,
                                          progress=False))
    if options.timeout is not None or options.on_stage is not None:
        inner = replace(options, timeout=None, on_stage=None, on_tick=None, progress=None)
        isolated = run_isolated(lambda: _run(case, inner), options.timeout, options.on_stage, options.on_tick)
        if isolated.timed_out:
            if isolated.partial is not None:  # the verdict was reached: keep it
                return keep_verdict(isolated.partial, isolated.stage, isolated.seconds)
            return timed_out_report(case, isolated.stage, isolated.seconds)
        return isolated.value
    return analyse(case, options)
