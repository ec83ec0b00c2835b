"""``check``: the whole analysis of one case, as a library call (the CLI is a thin layer on it).

``check(case, options)`` is a pipeline of named stages over one :class:`CheckOptions`
(:mod:`exactident.check.options`; the keywords of ``check`` build one), each a small function:

1. :func:`load`: the case (a model file imported exactly with its sample) and the options it implies;
2. :func:`forward_pass` (stage ``forward pass``): the exact forward pass, the ties, the degenerate
   set ``S``, the fixed edges;
3. :func:`rank_stage` (stages ``bounds``, ``ranks mod p``, ... of :mod:`exactident.ranks.certify`):
   certified ``rank_gamma`` and ``rank_a`` at the ``>= 0`` pattern, or their certified bounds;
4. :func:`~exactident.check.verdict.decide` (stage ``verdict``; on the boundary the stages of
   :mod:`exactident.boundary.analyse`): the verdict by Theorems 8 and 9 or the tie resolutions;
5. :func:`~exactident.check.verdict.settle_structurally` (stage ``structural certificates``):
   certificates that settle an ``inconclusive`` verdict;
6. the optional exact check of Props. 1 and 10, and the report
   (:func:`~exactident.check.verdict.assemble`);
7. :func:`numeric_stage` (stage ``float cross-check``): the float pipelines beside the exact ranks.

The stage names are what progress displays and ``--timeout`` (``time budget exhausted at <stage>``)
report.  With a budget (``timeout``) or a stage listener the analysis runs in a child process; the
report is handed to the parent as soon as the verdict is reached (:func:`exactident.budget.deliver`),
before the float cross-check, so a budget that runs out there keeps the exact verdict and marks the
``numeric`` block ``timed out`` (:func:`~exactident.check.timed_out.keep_verdict`).

A case whose network is more than the layered ReLU MLP (a layer graph:
:func:`~exactident.check.constrained.constrained_of`) is analysed by
:func:`exactident.check_constrained.check_constrained` instead, inside the same budget and progress
display; Theorem 8 is never used for it.
"""

from __future__ import annotations

import copy
import os
import random
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from exactident.budget import deliver, run_isolated, stage
from exactident.check.constrained import carried_numeric, check_carried, constrained_of
from exactident.check.options import CheckOptions
from exactident.check.timed_out import keep_verdict, timed_out_report
from exactident.check.verdict import Forward, Ranks, assemble, decide, settle_structurally
from exactident.io.case import Case
from exactident.io.report import Report
from exactident.linalg import exact
from exactident.model.activation import activation_state, alpha_exact, alpha_gram, n_paths
from exactident.model.conditions import INCONCLUSIVE, holds_cs
from exactident.model.fixed_edges import fixed_edges
from exactident.model.gamma import gamma_exact
from exactident.model.lifting import verify_propositions as _verify
from exactident.model.network import Network, degenerate_neurons
from exactident.ranks.certify import certified_by, certify_ranks
from exactident.ranks.intervals import interval_why

__all__ = ["MAX_EXPLICIT_ALPHA", "CheckOptions", "analyse", "check", "constrained_of", "forward_pass",
           "keep_verdict", "load", "numeric_stage", "rank_alpha", "rank_stage", "timed_out_report"]

#: The float pipelines compared with the exact rank: ``rank_gamma`` is then certified, never an interval.
_EXACT_RANK_PIPELINES = frozenset({"full-jacobian", "float32", "torch"})

#: ``alpha`` is materialised when it has at most this many entries, else the Gram route.
MAX_EXPLICIT_ALPHA = 2_000_000


def rank_alpha(pattern, X, widths) -> int:
    """``rank alpha(X, theta)`` over Q, explicit for small ``|P|``, else by the Gram matrix."""
    if not X:
        return 0
    if len(X) * n_paths(widths) <= MAX_EXPLICIT_ALPHA:
        return exact.rank(alpha_exact(pattern, X))
    return exact.rank(alpha_gram(pattern, X))


def _numeric_dtype(provenance: Mapping[str, str] | None) -> type:
    """float32 when every weight was stored in float32 or narrower (LAPACK has no float16/bfloat16)."""
    stored = (provenance or {}).get("weight_dtype", "")
    narrow = {"float32", "float16", "bfloat16"}
    return np.float32 if stored and set(stored.split("+")) <= narrow else np.float64


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
        return check_carried(case, options)  # an object carrying a ConstrainedNetwork
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


def analyse(case: Case, options: CheckOptions) -> Report:
    """The stages of :func:`check` on a loaded case, in order, in this process (no budget, no display)."""
    cn = constrained_of(case)
    if cn is not None:  # beyond the layered ReLU MLP: the constrained engine, never Theorem 8
        report = check_carried(case, options)
        return carried_numeric(case, cn, report, options) if options.numeric else report
    start = time.perf_counter()
    net, X = case.network, case.X
    forward = forward_pass(net, X, options)
    ranks = rank_stage(net, X, forward, options)
    decided = decide(net, X, forward, ranks, options.max_resolutions, options.all_ranks)
    if options.structural and decided.verdict == INCONCLUSIVE:
        decided = settle_structurally(net, X, forward.state, decided)
    if options.verify_propositions:
        _verify(net, X, forward.state, forward.fixed, ranks.gamma)
    report = assemble(case.name, net, X, forward, ranks, decided)
    if case.provenance:
        report.extra["provenance"] = dict(case.provenance)
    report.pattern_ranks = (ranks.rank_gamma, ranks.rank_a)  # the >= 0 pattern's: what a float tool rounds
    report.seconds = time.perf_counter() - start
    if options.numeric:
        numeric_stage(case, forward, ranks, decided.rank_verdict, decided.reached, report, options)
        report.seconds = time.perf_counter() - start
    return report


def forward_pass(net: Network, X: Any, options: CheckOptions) -> Forward:
    """Stage ``forward pass``: the exact activation state and ties, the degenerate set, the fixed edges."""
    stage("forward pass", samples=len(X), widths="-".join(map(str, net.widths)))
    return Forward(state=activation_state(net, X), degenerate=bool(degenerate_neurons(net)),
                   fixed=fixed_edges(net, options.fixed_choice))


def rank_stage(net: Network, X: Any, forward: Forward, options: CheckOptions) -> Ranks:
    """``R_Gamma`` and ``R_A`` at the ``>= 0`` pattern: certified mod p (its stages), or over Q.

    Monte Carlo ranks (``certify="none"``, off the boundary) are labelled ``certified: false`` with
    their error bound and carry no certificate; a certified interval (the verdict did not need the
    exact ``R_Gamma``) leaves ``rank_gamma`` None and keeps the labelled Monte Carlo value.
    """
    state = forward.state
    rank_gamma: int | None
    gamma = rank_a_lower = interval = exact_estimate = certificate = found = None
    if options.modular:
        found = certify_ranks(net, X, state.pattern, forward.fixed, need_rank_a=options.all_ranks or bool(state.ties),
                              rng=random.Random(options.seed),
                              certify="none" if options.certify == "none" and not state.ties else "full",
                              allow_rank_a_lower=not state.ties and not forward.degenerate,
                              exact_ranks=options.exact_ranks or options.all_ranks,
                              verdict_first=options.verdict_first)
        rank_gamma, rank_a, certificate = found.rank_gamma, found.rank_a, found.certificate
        rank_a_lower, interval, exact_estimate = found.rank_a_lower, found.rank_gamma_interval, found.exact_estimate
    else:
        gamma = gamma_exact(net, X, state.Z, state.pattern, forward.fixed)
        rank_gamma, rank_a = exact.rank(gamma), None
        if options.all_ranks or state.ties or not holds_cs(rank_gamma, net.dim):
            rank_a = net.widths[-1] * rank_alpha(state.pattern, X, net.widths)
    labels: dict[str, Any] = {}
    if certificate and certificate.get("certified") is False:  # Monte Carlo: labelled, no certificate
        labels.update(certified=False, error_probability=certificate["error_probability"])
        certificate = None
    elif certificate and not state.ties:
        labels["certified_by"] = certified_by(certificate)
    montecarlo = None
    if interval is not None:  # the verdict did not need the exact R_Gamma: no certified number to show
        montecarlo = dict(found.montecarlo) if found is not None and found.montecarlo else None
        rank_gamma = None  # the Monte Carlo value is montecarlo's
        labels["rank_gamma_interval_why"] = interval_why(interval, exact_estimate)
    return Ranks(rank_gamma=rank_gamma, rank_a=rank_a, rank_a_lower=rank_a_lower, interval=interval,
                 exact_estimate=exact_estimate, certificate=certificate, labels=labels, montecarlo=montecarlo,
                 gamma=gamma)


def numeric_stage(case: Case, forward: Forward, ranks: Ranks, rank_verdict: str, verdict_reached: bool,
                  report: Report, options: CheckOptions) -> Report:
    """Stage ``float cross-check``: ``report.numeric``, the float pipelines beside the exact ranks.

    The report is delivered first (:func:`exactident.budget.deliver`): a budget running out from here
    keeps the exact verdict.  The float pipeline agrees when it gives ``rank_verdict`` (the rank rules'
    verdict) and the exact ranks of the ``>= 0`` pattern it rounds.
    """
    from exactident.numeric.block import numeric_block

    net, X = case.network, case.X
    deliver(copy.copy(report))
    stage("float cross-check", rows=len(X) * net.widths[-1], cols=net.dim)
    report.numeric = numeric_block(net, X, forward.fixed, forward.state, forward.degenerate, rank_verdict,
                                   (ranks.rank_gamma, ranks.rank_a), tol=options.tol, rtol=options.rtol,
                                   verdict_reached=verdict_reached, pipelines=options.pipelines or (),
                                   stored_dtype=_numeric_dtype(case.provenance), interval=ranks.interval)
    return report
