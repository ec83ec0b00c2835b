"""``check``: the whole analysis of one case, as a library call (the CLI is a thin layer on it).

Order of work: exact forward pass and ties -> degenerate set ``S`` ->
fixed edges -> ``Gamma`` and its rank -> ``rank_a`` -> verdict (off the
boundary by :mod:`exactident.model.conditions`, on it by :mod:`exactident.boundary.analyse`)
-> optional exact check of Props. 1 and 10 -> optional float cross-check.

With a budget (``timeout``) the analysis runs in a child process; the report is
handed to the parent as soon as the verdict is reached
(:func:`exactident.budget.deliver`), before the float cross-check, so a budget
that runs out there keeps the exact verdict and marks the ``numeric`` block
``timed out`` (:func:`keep_verdict`).

A case whose network is more than the layered ReLU MLP (a layer graph with convolution, pooling,
skips, leaky ReLU, PReLU or fixed weights: :func:`constrained_of`) is analysed by
:func:`exactident.check_constrained.check_constrained` instead, inside the same budget and progress
display; Theorem 8 is never used for it.
"""

from __future__ import annotations

import copy
import os
import random
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

import numpy as np

from exactident.budget import deliver, run_isolated, stage
from exactident.errors import InvariantViolation, UnsupportedCaseError
from exactident.io.case import Case
from exactident.io.report import Report
from exactident.linalg import exact
from exactident.model.activation import activation_state, alpha_exact, alpha_gram, n_paths
from exactident.model.conditions import (
    DEGENERATE,
    INCONCLUSIVE,
    NOT_IDENTIFIABLE,
    cn_from_bounds,
    cs_from_bounds,
    decided_by,
    holds_cn,
    holds_cs,
    reason_from_ranks,
    verdict_from_ranks,
    with_sample_size,
)
from exactident.model.fixed_edges import fixed_edges
from exactident.model.gamma import gamma_exact
from exactident.model.lifting import verify_propositions as _verify
from exactident.model.network import degenerate_neurons
from exactident.ranks.certify import certified_by, certify_ranks

__all__ = ["MAX_EXPLICIT_ALPHA", "check", "constrained_of", "keep_verdict", "rank_alpha", "timed_out_report"]

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


def check(case: Case | str | os.PathLike[str], *, sample: Any = None, numeric: bool = True, tol: float | None = None,
          rtol: float | None = None, verify_propositions: bool = False,
          max_resolutions: int = 4096, all_ranks: bool = False,
          fixed_choice: Mapping[tuple[int, int], int] | None = None,
          modular: bool = True, seed: int | None = 0, certify: str = "full",
          timeout: float | None = None,
          on_stage: Callable[[str, dict[str, Any]], None] | None = None,
          on_tick: Callable[[], None] | None = None, structural: bool = True,
          exact_ranks: bool = False, verdict_first: bool = False,
          pipelines: str | Collection[str] | None = None,
          progress: bool | None = None, reference: Any = None, assume_relu_mlp: bool = False) -> Report:
    """Decide local identifiability of ``case.network`` from ``case.X``.

    Parameters
    ----------
    case : Case, or path
        A case, a case file (``.json``), or a model file (``.onnx``, ``.pt``, ``.safetensors``,
        ``.keras``/``.h5``, ``.npz``; imported exactly by :func:`exactident.io.importers.load.import_model`).
    sample : path or array-like
        The sample for a model file (``.npy``, ``.npz``, ``.csv`` or an array ``(n, N_0)``); required
        with a model file (refused without it, naming ``sample``).
    reference : path, torch.nn.Module or array-like, optional
        For a weight-only model file (state dict, safetensors, ``.npz``): the model it was saved from,
        or its outputs on the sample (:func:`~exactident.io.importers.load.import_model`).
    assume_relu_mlp : bool
        For a weight-only model file without ``reference``: your statement that it is a plain
        ``Linear -> ReLU`` chain (else it is refused); the report's provenance records it.
    numeric : bool
        Also run the float64 pipeline (backprop ``Gamma`` + SVD rank, the float ``alpha``
        only when the float verdict needs ``R_A``) and report whether it agrees.
    pipelines : str or collection of str, optional
        More float pipelines in the ``numeric`` block (``"stored-dtype"``: the same in the
        dtype the weights were stored in, float32 for float32, float16 and bfloat16 weights;
        ``"kinks"``, ``"full-jacobian"``, ``"float32"``, ``"torch"``, or ``"all"``;
        :data:`exactident.numeric.block.OPTIONAL_PIPELINES`, docs/cli.md).
    tol : float, optional
        Absolute SVD tolerance for the float ``Gamma`` (default: numpy's rule).
    rtol : float, optional
        Relative SVD tolerance (``rtol * sigma_max``); ignored when ``tol`` is given.
    verify_propositions : bool
        Check Props. 1 and 10 exactly (small networks only).
    max_resolutions : int
        Cap on the tie resolutions enumerated on the boundary.
    all_ranks : bool
        Compute ``rank_a`` even when ``C_S`` already decides (otherwise it is
        ``None`` in that case: the verdict does not need it).
    fixed_choice : dict (l, v) -> k, optional
        Override the fixed outgoing edge of some hidden neurons.
    modular : bool
        Certified modular ranks (:mod:`exactident.model.gamma_modular`; the default,
        with a rank certificate under ``certificate["rank"]`` off the boundary),
        or ``False`` for the rational reference path (``gamma_exact`` + FLINT rank).
    seed : int or None
        Seed of the random primes (None: fresh randomness).  Primes only
        affect speed and the certificate, never the ranks.
    certify : {"full", "none"}
        ``"full"`` (default): every rank is certified.  ``"none"``: Monte Carlo ranks
        mod random primes, labelled in the report (``certified: false`` and
        ``error_probability``, a proven bound on the chance that a rank is too low;
        docs/modular.md); boundary cases stay certified.
    timeout : float, optional
        Seconds of wall time.  The analysis then runs in a child process that is
        killed (with its whole process group) at the deadline; the report is then
        ``inconclusive`` with reason ``time budget exhausted at <stage>``, unless the
        verdict was already reached: then the exact report is kept and its ``numeric``
        block is ``{"status": "timed out", ...}`` (:func:`keep_verdict`).
    on_stage : callable (stage, sizes), optional
        Called at each stage of the analysis (progress display).
    on_tick : callable (), optional
        Called about twice a second while a child process works (``timeout`` given).
    structural : bool
        Try to settle an ``inconclusive`` verdict with a structural certificate or a
        straight line (:func:`exactident.boundary.structural.settle`; docs/theory.md,
        "Structural certificates").  ``False`` keeps the verdict of the rank rules.
    exact_ranks : bool
        Certify ``rank_gamma`` exactly even when the verdict does not need it and it is expensive.
        By default (``False``, and ``all_ranks``, ``verdict_first`` off) ``rank_gamma`` is exact whenever
        its estimated cost is small (:func:`exactident.ranks.estimate.exact_rank_is_cheap`: at most 2 s, or at
        most the verdict's rank stage); a rank-deficient ``Gamma`` whose exact rank would cost more, and
        whose cheap certified kernel vectors already prove ``C_S`` false and ``C_N`` true, is reported as
        a certified interval (``Report.rank_gamma_interval``; the reason gives the estimate),
        ``rank_gamma`` is then None and the Monte Carlo value is ``Report.montecarlo``, labelled, with a
        proven error bound (docs/modular.md, "Verdict first").  For a constrained network
        ``rank Gamma_free`` is certified exactly only with ``exact_ranks`` (or ``all_ranks``); otherwise
        a lower bound mod p short of ``dim_free`` is reported as the interval.
    verdict_first : bool
        The interval whenever it settles the verdict, however cheap the exact rank (ignored with
        ``exact_ranks`` or ``all_ranks``).
    progress : bool or None
        Show the stages as they run (``tqdm.auto``: a notebook widget or a line on stderr;
        :mod:`exactident.progress`).  None (default): on in a Jupyter kernel or a terminal,
        unless ``on_stage`` is given (the caller shows progress itself); off otherwise.

    Returns
    -------
    Report

    Raises
    ------
    CaseFormatError
        A path that cannot be read or imported (naming the file and field).
    InvariantViolation
        If ``verify_propositions`` finds an identity broken.
    UnsupportedCaseError
        If the lifting is too large for ``verify_propositions``; an unknown pipeline name.

    Examples
    --------
    The hand-checked network of docs/theory.md with the samples ``0, 1, -1`` (kink-free):

    >>> from exactident.io.case import parse_case
    >>> case = parse_case({"format": "exactident-case/1", "name": "t", "widths": [1, 1, 1],
    ...     "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]], "sample": [[0], [1], [-1]]})
    >>> r = check(case, numeric=False, all_ranks=True)
    >>> r.verdict, r.rank_gamma, r.rank_a, r.dim
    ('identifiable', 3, 3, 3)
    """
    if certify not in ("full", "none"):
        raise UnsupportedCaseError(f"certify must be 'full' or 'none', not {certify!r}")
    if not isinstance(case, Case) and sample is None and getattr(case, "constrained", None) is not None:
        return _check_carried(case, max_resolutions, seed, structural,  # an object carrying a ConstrainedNetwork
                              exact_ranks or all_ranks)
    if not isinstance(case, Case) or sample is not None:  # before any budget: a timed-out report needs the case
        from exactident.io.importers.load import as_case

        case = as_case(case, sample, reference=reference, assume_relu_mlp=assume_relu_mlp)
    if numeric:
        from exactident.numeric.block import parse_pipelines

        pipelines = parse_pipelines(pipelines)  # an unknown name is refused before any work
        # the full-Jacobian pipelines are compared with the exact rank: certify it, never an interval
        exact_ranks = exact_ranks or bool({"full-jacobian", "float32", "torch"} & set(pipelines))
    if progress or (progress is None and on_stage is None):
        from exactident.progress import enabled, showing

        if enabled(progress):
            with showing(True, case.name) as show:
                def both(name: str, sizes: dict[str, Any]) -> None:  # a child's stages reach only on_stage
                    show(name, sizes)
                    if on_stage is not None:
                        on_stage(name, sizes)

                return check(case, numeric=numeric, tol=tol, rtol=rtol, verify_propositions=verify_propositions,
                             max_resolutions=max_resolutions, all_ranks=all_ranks, fixed_choice=fixed_choice,
                             modular=modular, seed=seed, certify=certify, timeout=timeout,
                             on_stage=on_stage if timeout is None else both, on_tick=on_tick,
                             structural=structural, exact_ranks=exact_ranks, verdict_first=verdict_first,
                             pipelines=pipelines, progress=False)
    if timeout is not None or on_stage is not None:
        def work() -> Report:
            return check(case, numeric=numeric, tol=tol, rtol=rtol, verify_propositions=verify_propositions,
                         max_resolutions=max_resolutions, all_ranks=all_ranks, fixed_choice=fixed_choice,
                         modular=modular, seed=seed, certify=certify, structural=structural,
                         exact_ranks=exact_ranks, verdict_first=verdict_first, pipelines=pipelines)

        isolated = run_isolated(work, timeout, on_stage, on_tick)
        if isolated.timed_out:
            if isolated.partial is not None:  # the verdict was reached: keep it
                return keep_verdict(isolated.partial, isolated.stage, isolated.seconds)
            return timed_out_report(case, isolated.stage, isolated.seconds)
        return isolated.value
    cn = constrained_of(case)
    if cn is not None:  # beyond the layered ReLU MLP: the constrained engine, never Theorem 8
        report = _check_carried(case, max_resolutions, seed, structural, exact_ranks or all_ranks)
        if numeric:  # the float cross-check: Gamma_free in float64 beside the exact rank
            from exactident.numeric.block import parse_pipelines
            from exactident.numeric.constrained import report_numeric_block

            with_torch = "torch" in parse_pipelines(pipelines)  # the only optional pipeline for these networks
            deliver(copy.copy(report))  # the verdict is reached: a budget running out from here keeps it
            stage("float cross-check", rows=len(case.X) * report.widths[-1], cols=report.dim)
            report.numeric = report_numeric_block(cn, case.X, report, tol=tol, rtol=rtol, torch=with_torch)
        return report
    start = time.perf_counter()
    net, X = case.network, case.X
    stage("forward pass", samples=len(X), widths="-".join(map(str, net.widths)))
    state = activation_state(net, X)
    degenerate = bool(degenerate_neurons(net))
    fixed = fixed_edges(net, fixed_choice)
    dim = net.dim
    rank_a = None
    rank_a_lower = None
    interval = None
    exact_estimate = None
    gamma = None
    rank_certificate = None
    if modular:
        ranks = certify_ranks(net, X, state.pattern, fixed, need_rank_a=all_ranks or bool(state.ties),
                              rng=random.Random(seed), certify="none" if certify == "none" and not state.ties
                              else "full", allow_rank_a_lower=not state.ties and not degenerate,
                              exact_ranks=exact_ranks or all_ranks, verdict_first=verdict_first)
        rank_gamma, rank_a, rank_certificate = ranks.rank_gamma, ranks.rank_a, ranks.certificate
        rank_a_lower = ranks.rank_a_lower
        interval = ranks.rank_gamma_interval
        exact_estimate = ranks.exact_estimate
    else:
        gamma = gamma_exact(net, X, state.Z, state.pattern, fixed)
        rank_gamma = exact.rank(gamma)
        if all_ranks or state.ties or not holds_cs(rank_gamma, dim):
            rank_a = net.widths[-1] * rank_alpha(state.pattern, X, net.widths)
    # Ranks at the >= 0 pattern: the matrices the float pipeline rounds.
    rank_gamma_pattern, rank_a_pattern = rank_gamma, rank_a
    patterns = None
    extra: dict = {}
    if rank_certificate and rank_certificate.get("certified") is False:  # Monte Carlo: labelled, no certificate
        extra.update(certified=False, error_probability=rank_certificate["error_probability"])
        rank_certificate = None
    elif rank_certificate and not state.ties:
        extra["certified_by"] = certified_by(rank_certificate)
    montecarlo = None
    if interval is not None:  # the verdict did not need the exact R_Gamma: no certified number to show
        montecarlo = dict(ranks.montecarlo) if ranks.montecarlo else None  # None: no value worth its label
        rank_gamma = rank_gamma_pattern = None  # type: ignore[assignment]  # the Monte Carlo value is montecarlo's
    # The rank part certifies the ranks at the >= 0 pattern: the report's ranks unless tie resolutions are enumerated.
    certificate = {"rank": rank_certificate} if rank_certificate and (not state.ties or degenerate) else None
    verdict_reached = True
    if degenerate:
        verdict = DEGENERATE
        dead = degenerate_neurons(net)
        bad = ", ".join(f"({l},{v}) {why}" for l, v, why in dead[:8])
        bad += f", ... ({len(dead)} in all)" if len(dead) > 8 else ""
        reason = f"theta is in S: hidden neuron(s) {bad} all zero; the theorems do not apply"
        from exactident.boundary.certificate import build_degenerate_part

        certificate = {**(certificate or {}), "degenerate": build_degenerate_part(net) or {}}
    elif state.ties:
        from exactident.boundary.analyse import analyse_boundary  # only with ties: keeps start-up light

        outcome = analyse_boundary(net, X, state, fixed, max_resolutions=max_resolutions,
                                   all_ranks=all_ranks)
        verdict, reason = outcome.verdict, outcome.reason
        patterns, certificate = outcome.patterns, outcome.certificate
        if outcome.rank_gamma is not None:
            rank_gamma, rank_a = outcome.rank_gamma, outcome.rank_a
        else:  # nothing enumerated (the cap): the smallest R_Gamma over the resolutions is unknown
            if rank_certificate and certificate is not None:  # the rank part: the >= 0 pattern's ranks
                certificate = {**certificate, "rank": rank_certificate}
            rank_gamma = rank_a = None  # type: ignore[assignment]  # and cs, cn: null (docs/cli.md)
        verdict_reached = outcome.rank_gamma is not None  # None: nothing enumerated (the cap)
        extra.update(outcome.extra)
    elif rank_a is None and rank_a_lower is not None:
        # R_Gamma < N_L rank_p(alpha) <= R_A and R_Gamma < dim: C_S fails and C_N holds
        verdict = "inconclusive"
        reason = (f"R_Gamma {_rank_text(rank_gamma, interval, exact_estimate)} < dim = {dim} and "
                  f"R_A >= {rank_a_lower} > R_Gamma (C_S fails, C_N holds); R_A itself not computed (use --all-ranks)")
        # the rank part certifies R_Gamma and the lower bound (its rank_a part has no upper bound)
        extra["rank_a_lower_bound"] = rank_a_lower
    else:
        stage("verdict", rank_gamma=rank_gamma, dim=dim)
        if interval is not None:  # hi < dim and hi < R_A: every rank in the interval gives this verdict
            verdict = verdict_from_ranks(interval[1], rank_a, dim, False)
            reason = (f"neither theorem applies: R_Gamma {_rank_text(rank_gamma, interval, exact_estimate)} "
                      f"< rank A = {rank_a} and < dim = {dim}")
        else:
            verdict = verdict_from_ranks(rank_gamma, rank_a, dim, False)
            reason = reason_from_ranks(rank_gamma, rank_a, dim, verdict)
        if extra.get("certified") is False:
            reason += f" (Monte Carlo ranks, not certified: error probability <= {extra['error_probability']:.3g})"
    rank_verdict = verdict  # what the rank rules give: the float pipeline is compared with this
    settled_by = None  # the mechanism or "line" that settled an inconclusive verdict
    if structural and verdict == INCONCLUSIVE:
        verdict, reason, certificate, settled_by = _settle(net, X, state, certificate, reason, extra,
                                                           attach=extra.get("certified") is not False)
    if verify_propositions:
        _verify(net, X, state, fixed, gamma)
    cs: bool | None = None if rank_gamma is None else holds_cs(rank_gamma, dim)
    if interval is not None and not state.ties:
        # one rule with the verifier (model.conditions.cs_from_bounds): C_S from the certified bounds, never
        # from the Monte Carlo value; verdict first reports an interval only when it settles C_S false
        cs = cs_from_bounds(interval[0], interval[1], dim)
        if cs is not False:
            raise InvariantViolation(f"a verdict-first interval {list(interval)} must lie below dim = {dim}")
    report = Report(
        name=case.name, widths=list(net.widths), n_samples=len(X), dim=dim,
        rank_gamma=rank_gamma, rank_a=rank_a,
        cs=cs,  # type: ignore[arg-type]  # null: no rank (past the cap, timed out)
        cn=(cn_from_bounds(interval[1], rank_a, rank_a_lower) if interval is not None and not state.ties  # type: ignore[arg-type]
            else None if rank_gamma is None
            else True if rank_a_lower is not None and rank_a is None else holds_cn(rank_gamma, rank_a, dim)),
        degenerate=degenerate,
        on_boundary=bool(state.ties), n_ties=len(state.ties), verdict=verdict,
        reason=with_sample_size(reason, X, net.widths[-1], dim),
        patterns=patterns, certificate=certificate, extra=extra,
        decided_by=settled_by or decided_by(verdict, certificate),
        rank_gamma_interval=interval, montecarlo=montecarlo)
    if case.provenance:
        report.extra["provenance"] = dict(case.provenance)
    report.pattern_ranks = (rank_gamma_pattern, rank_a_pattern)
    report.seconds = time.perf_counter() - start
    if numeric:
        from exactident.numeric.block import numeric_block

        deliver(copy.copy(report))  # the verdict is reached: a budget running out from here keeps it
        stage("float cross-check", rows=len(X) * net.widths[-1], cols=dim)
        # agrees: same verdict, and the same ranks as the exact matrices the float ones round
        report.numeric = numeric_block(net, X, fixed, state, degenerate, rank_verdict,
                                       (rank_gamma_pattern, rank_a_pattern), tol=tol, rtol=rtol,
                                       verdict_reached=verdict_reached, pipelines=pipelines or (),
                                       stored_dtype=_numeric_dtype(case.provenance), interval=interval)
        report.seconds = time.perf_counter() - start
    return report


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


def _check_carried(case: Any, max_resolutions: int, seed: int | None, structural: bool,
                   exact_ranks: bool = False) -> Report:
    """:func:`exactident.check_constrained.check_constrained` on a case carrying a constrained network."""
    from exactident.check_constrained import check_constrained

    shape = getattr(getattr(case, "architecture", None), "input_shape", None)
    return check_constrained(constrained_of(case), case.X, name=case.name, max_resolutions=max_resolutions,
                             seed=seed, structural=structural, input_shape=shape,
                             provenance=getattr(case, "provenance", None), exact_ranks=exact_ranks)


def _rank_text(rank_gamma: int | None, interval: tuple[int, int] | None,
               exact_estimate: Mapping[str, float] | None = None) -> str:
    """``R_Gamma`` for a reason: ``= r`` when exact, else the certified interval (never the Monte Carlo value),
    with the estimated cost of the exact value when that is why it was not computed."""
    if interval is None:
        return f"= {rank_gamma}"
    if exact_estimate:
        from exactident.ranks.estimate import duration_text

        cost, verdict_cost = duration_text(exact_estimate["seconds"]), duration_text(exact_estimate["verdict_seconds"])
        return (f"certified in [{interval[0]}, {interval[1]}] (exact value not computed: estimated ~{cost} against "
                f"~{verdict_cost} for the ranks of the verdict; --exact-ranks computes it)")
    return f"certified in [{interval[0]}, {interval[1]}] (exact value: --exact-ranks)"


def _settle(net, X, state, certificate, reason, extra, attach: bool) -> tuple[str, str, dict | None, str | None]:
    """An ``inconclusive`` verdict settled by a structural certificate or a line, else the searches tried.

    ``attach=False`` (Monte Carlo ranks): the verdict is settled the same way, but the report carries
    no certificate, like every uncertified report.
    """
    from exactident.boundary.structural import settle

    visible = bool(((certificate or {}).get("boundary") or {}).get("ties"))
    stage("structural certificates", samples=len(X), neurons=sum(net.widths[1:-1]))
    found = settle(net, X, state, kernel_line=not visible)  # on the boundary analyse_boundary searched lines
    extra["summary"] = [*extra.get("summary", []), *found.summary]
    if found.certificate is None:
        return INCONCLUSIVE, f"{reason}; {found.clause}", certificate, None
    settled = {**(certificate or {}), **found.certificate} if attach else certificate
    return NOT_IDENTIFIABLE, f"{reason}; but {found.clause}", settled, found.decided_by


def keep_verdict(report: Report, at_stage: str, seconds: float) -> Report:
    """The exact report of a case whose budget ran out after its verdict: ``numeric`` marked ``timed out``.

    Only the float cross-check runs after the verdict is delivered, so that is what
    did not finish; the exact part (verdict, ranks, certificate) is complete and verifies.

    Examples
    --------
    >>> from exactident.io.case import parse_case
    >>> case = parse_case({"format": "exactident-case/1", "name": "t", "widths": [1, 1, 1],
    ...     "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]], "sample": [[0], [1], [-1]]})
    >>> r = keep_verdict(check(case, numeric=False), "float cross-check", 2.0)
    >>> r.verdict, r.numeric["status"], r.numeric["stage"], r.numeric["agrees"]
    ('identifiable', 'timed out', 'float cross-check', None)
    """
    rg, ra = report.pattern_ranks or (report.rank_gamma, report.rank_a)
    report.numeric = {"status": "timed out", "stage": at_stage, "dtype": "float64", "rank_gamma": None,
                      "rank_a": None, "verdict": None, "tol": None, "agrees": None,
                      "compared_with": {"rank_gamma": rg, "rank_a": ra, "verdict": None},
                      "singular_values_near_cut": [], "pattern_differs": None, "warnings": [],
                      "message": f"time budget exhausted at {at_stage}, after the exact verdict"}
    report.seconds = seconds
    return report


def timed_out_report(case: Case, at_stage: str, seconds: float) -> Report:
    """The report of a case whose time budget ran out: ``inconclusive``, ranks unknown (``null``).

    Examples
    --------
    >>> from exactident.io.case import parse_case
    >>> case = parse_case({"format": "exactident-case/1", "name": "t", "widths": [1, 1, 1],
    ...     "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]], "sample": [[0], [1]]})
    >>> r = timed_out_report(case, "ranks mod p", 2.0)
    >>> r.verdict, r.reason.split("; ")[-1], r.to_dict()["rank_gamma"], r.to_dict()["timed_out"]
    ('inconclusive', 'time budget exhausted at ranks mod p', None, True)
    """
    cn = constrained_of(case)
    if cn is not None:  # a constrained network: its layers' widths (no carriers) and dim_free, no degenerate set
        from exactident.model.symmetry import rescaling_symmetry

        widths, dim, degenerate = cn.layer_widths, rescaling_symmetry(cn).dim_free, False
    else:
        widths, dim, degenerate = list(case.network.widths), case.network.dim, bool(degenerate_neurons(case.network))
    report = Report(name=case.name, widths=widths, n_samples=len(case.X), dim=dim,
                    rank_gamma=None, rank_a=None, cs=None, cn=None,  # type: ignore[arg-type]  # no claim
                    degenerate=degenerate, on_boundary=None,  # type: ignore[arg-type]
                    n_ties=None,  # type: ignore[arg-type]
                    verdict="inconclusive", reason=with_sample_size(f"time budget exhausted at {at_stage}",
                                                                    case.X, widths[-1], dim, free=cn is not None),
                    extra={"timed_out": True, "stage": at_stage}, decided_by="none")
    report.seconds = seconds
    return report
