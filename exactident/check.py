"""``check``: the whole analysis of one case, as a library call (the CLI is a thin layer on it).

Order of work: exact forward pass and ties -> degenerate set ``S`` ->
fixed edges -> ``Gamma`` and its rank -> ``rank_a`` -> verdict (off the
boundary by :mod:`exactident.model.conditions`, on it by :mod:`exactident.boundary.analyse`)
-> optional exact check of Props. 1 and 10 -> optional float cross-check.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from exactident.boundary.analyse import analyse_boundary
from exactident.boundary.structural import decided_by, settle
from exactident.io.case import Case
from exactident.io.report import Report
from exactident.linalg import exact
from exactident.model.activation import activation_state, alpha_exact, alpha_gram, n_paths
from exactident.model.conditions import (
    DEGENERATE,
    INCONCLUSIVE,
    NOT_IDENTIFIABLE,
    holds_cn,
    holds_cs,
    reason_from_ranks,
    verdict_from_ranks,
)
from exactident.model.fixed_edges import fixed_edges
from exactident.model.gamma import gamma_exact
from exactident.model.lifting import verify_propositions as _verify
from exactident.model.network import degenerate_neurons
from exactident.ranks.certify import certify_ranks

__all__ = ["MAX_EXPLICIT_ALPHA", "check", "rank_alpha"]

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
          modular: bool = True, seed: int | None = 0, structural: bool = True) -> Report:
    """Decide local identifiability of ``case.network`` from ``case.X``.

    Parameters
    ----------
    case : Case, or path
        A case, a case file (``.json``), or a model file (``.onnx``, ``.pt``, ``.safetensors``,
        ``.keras``/``.h5``, ``.npz``; imported exactly by :func:`exactident.io.importers.import_model`).
    sample : path or array-like, optional
        The sample for a model file (``.npy``, ``.npz``, ``.csv`` or an array ``(n, N_0)``).
    numeric : bool
        Also run the float backend and report whether it agrees; it computes in the dtype the
        weights were stored in when the case records one (float32 for float32, float16 and
        bfloat16 weights, which LAPACK lacks), else in float64.
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
    structural : bool
        Try to settle an ``inconclusive`` verdict with a structural certificate or a
        straight line (:func:`exactident.boundary.structural.settle`; docs/theory.md,
        "Structural certificates").  ``False`` keeps the verdict of the rank rules.

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
        If the lifting is too large for ``verify_propositions``.

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
    start = time.perf_counter()
    if not isinstance(case, Case) or sample is not None:
        from exactident.io.importers.load import as_case

        case = as_case(case, sample)
    net, X = case.network, case.X
    state = activation_state(net, X)
    degenerate = bool(degenerate_neurons(net))
    fixed = fixed_edges(net, fixed_choice)
    dim = net.dim
    rank_a = None
    gamma = None
    rank_certificate = None
    if modular:
        ranks = certify_ranks(net, X, state.pattern, fixed, need_rank_a=all_ranks or bool(state.ties),
                              rng=random.Random(seed))
        rank_gamma, rank_a, rank_certificate = ranks.rank_gamma, ranks.rank_a, ranks.certificate
    else:
        gamma = gamma_exact(net, X, state.Z, state.pattern, fixed)
        rank_gamma = exact.rank(gamma)
        if all_ranks or state.ties or not holds_cs(rank_gamma, dim):
            rank_a = net.widths[-1] * rank_alpha(state.pattern, X, net.widths)
    # Ranks at the >= 0 pattern: the matrices the float pipeline rounds.
    rank_gamma_pattern, rank_a_pattern = rank_gamma, rank_a
    patterns = None
    # The rank part certifies the ranks at the >= 0 pattern: the report's ranks unless tie resolutions are enumerated.
    certificate = {"rank": rank_certificate} if rank_certificate and (not state.ties or degenerate) else None
    extra: dict = {}
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
        outcome = analyse_boundary(net, X, state, fixed, max_resolutions=max_resolutions,
                                   all_ranks=all_ranks)
        verdict, reason = outcome.verdict, outcome.reason
        patterns, certificate = outcome.patterns, outcome.certificate
        if outcome.rank_gamma is not None:
            rank_gamma, rank_a = outcome.rank_gamma, outcome.rank_a
        elif rank_certificate and certificate is not None:  # nothing enumerated: the >= 0 pattern's ranks
            certificate = {**certificate, "rank": rank_certificate}
        verdict_reached = outcome.rank_gamma is not None  # None: nothing enumerated (the cap)
        extra.update(outcome.extra)
    else:
        verdict = verdict_from_ranks(rank_gamma, rank_a, dim, False)
        reason = reason_from_ranks(rank_gamma, rank_a, dim, verdict)
    rank_verdict = verdict  # what the rank rules give: the float pipeline is compared with this
    if structural and verdict == INCONCLUSIVE:
        verdict, reason, certificate = _settle(net, X, state, certificate, reason, extra)
    if verify_propositions:
        _verify(net, X, state, fixed, gamma)
    report = Report(
        name=case.name, widths=list(net.widths), n_samples=len(X), dim=dim,
        rank_gamma=rank_gamma, rank_a=rank_a, cs=holds_cs(rank_gamma, dim),
        cn=holds_cn(rank_gamma, rank_a, dim), degenerate=degenerate,
        on_boundary=bool(state.ties), n_ties=len(state.ties), verdict=verdict, reason=reason,
        patterns=patterns, certificate=certificate, extra=extra, decided_by=decided_by(verdict, certificate))
    if numeric:
        from exactident.numeric.block import numeric_block

        # agrees: same verdict, and the same ranks as the exact matrices the float ones round
        dtype = _numeric_dtype(case.provenance)
        report.numeric = numeric_block(net, X, fixed, state, degenerate, rank_verdict,
                                       (rank_gamma_pattern, rank_a_pattern), tol=tol, rtol=rtol,
                                       verdict_reached=verdict_reached, dtype=dtype)
    if case.provenance:
        report.extra["provenance"] = dict(case.provenance)
    report.pattern_ranks = (rank_gamma_pattern, rank_a_pattern)
    report.seconds = time.perf_counter() - start
    return report


def _settle(net, X, state, certificate, reason, extra) -> tuple[str, str, dict | None]:
    """An ``inconclusive`` verdict settled by a structural certificate or a line, else the searches tried."""
    visible = bool(((certificate or {}).get("boundary") or {}).get("ties"))
    found = settle(net, X, state, kernel_line=not visible)  # on the boundary analyse_boundary searched lines
    extra["summary"] = [*extra.get("summary", []), *found.summary]
    if found.certificate is None:
        return INCONCLUSIVE, f"{reason}; {found.clause}", certificate
    return NOT_IDENTIFIABLE, f"{reason}; but {found.clause}", {**(certificate or {}), **found.certificate}
