"""``explain``: per parameter and per neuron, what the sample determines; the kernel of ``Gamma``, readable.

Order of work: the report (:func:`exactident.check.check`, or one already made)
-> the exact kernel of ``Gamma`` at the sample's activation pattern, or of
``Gamma(s)`` for every tie resolution ``s`` the report enumerated
(:mod:`exactident.explain.kernel`) -> which kernel vectors are exact straight
lines of equal outputs -> the class of each parameter
(:mod:`exactident.explain.parameters`) -> the neuron diagnostics
(:mod:`exactident.explain.neurons`) -> readable lines.

The results go into the report as the optional fields ``parameters``,
``neurons``, ``kernel_basis`` and ``explanation`` (docs/cli.md), only when asked
(``exactident explain``, ``exactident check --explain``); every exact claim in
them is re-checked by ``exactident verify-certificate``
(:mod:`exactident.verify.explained`).

Any other network is a layer graph ``W = T theta + c`` with per-unit slopes
(:class:`~exactident.model.network.Network`; the plain MLP is
``T = I`` and takes the route above, chosen by structure, not by file format).
:func:`explain_constrained` explains it with the same engine as ``check``: the
exact forward pass and ties (:func:`exactident.model.gamma_free.free_state`),
``ker Gamma_free(s)`` in the chart across the symmetries ``S_H``
(:mod:`exactident.explain.chart`), the certificate of the report, per free
parameter (:func:`exactident.explain.parameters.classify_free`), per unit and per
channel (:mod:`exactident.explain.neurons`); fields ``parameters``, ``units``,
``channels``, ``kernel_basis``, ``explanation``, re-checked by
:func:`exactident.verify.explained.verify_free_explained`.

Called by :mod:`exactident.explain.command` and ``exactident check --explain``.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import product
from typing import Any

import flint

from exactident.budget import stage
from exactident.explain.chart import certificate_direction, chart_kernel, gauge_parameters, one_layer_lines
from exactident.explain.kernel import gamma_kernel
from exactident.explain.neurons import channel_entries, neuron_entries, unit_entries
from exactident.explain.parameters import (
    FREE_CLASSES,
    FreeBlock,
    KernelBlock,
    classify,
    classify_free,
    constant_line,
    fixed_names,
)
from exactident.explain.render import explanation_lines, free_explanation_lines, plain_rules_line
from exactident.io.case import Case
from exactident.io.report import Report
from exactident.model.activation import Tie, activation_state, resolve_ties
from exactident.model.fixed_edges import fixed_edges, free_parameters
from exactident.model.gamma_free import free_state, persistent_ties
from exactident.model.gamma_free import resolve_ties as resolve_free_ties
from exactident.model.network import Network
from exactident.model.symmetry import rescaling_symmetry

__all__ = ["MAX_CONSTRAINED_KERNEL_ENTRIES", "MAX_CONSTRAINED_RESOLUTIONS", "MAX_EXPLAIN_RESOLUTIONS",
           "ConstrainedExplanation", "Explanation", "add_explanation", "explain", "explain_constrained"]

#: On the boundary, kernels are computed for at most this many tie resolutions.
MAX_EXPLAIN_RESOLUTIONS = 64
#: A layer graph's exact kernels of ``Gamma_free`` are computed up to this many entries (rows times parameters).
MAX_CONSTRAINED_KERNEL_ENTRIES = 200_000
#: ... and for at most this many tie resolutions.
MAX_CONSTRAINED_RESOLUTIONS = 64


@dataclass
class Explanation:
    """What :func:`explain` found (docs/explain.md).

    Attributes
    ----------
    names : list of str
        The coordinates of ``tau``.
    parameters : list of dict
        Report field ``parameters`` (:func:`exactident.explain.parameters.classify`).
    neurons : list of dict
        Report field ``neurons`` (:func:`exactident.explain.neurons.neuron_entries`).
    blocks : list of KernelBlock
        Exact kernels of ``Gamma`` (one per tie resolution on the boundary).
    lines : list of str
        Readable lines (report field ``explanation``).
    seconds : float
        Time spent after the report (kernels, lines, classes, diagnostics).
    report : Report or None
        The report explained (set by :func:`explain`; its ``extra`` gets these fields
        when called as ``exactident.explain``).
    """

    names: list[str]
    parameters: list[dict[str, Any]]
    neurons: list[dict[str, Any]]
    blocks: list[KernelBlock]
    lines: list[str] = field(default_factory=list)
    seconds: float = 0.0
    report: Report | None = field(default=None, repr=False, compare=False)

    def __repr__(self) -> str:
        """One short line: the verdict, ranks, ``decided_by`` and the count of each parameter class."""
        r = self.report
        head = "" if r is None else (f"verdict={r.verdict!r}, rank_gamma={r.rank_gamma_text}, rank_a={r.rank_a}, "
                                     f"dim={r.dim}, decided_by={r.decided_by!r}, ")
        counts = {c: n for c in ("not-identifiable", "first-order-determined", "unknown", "identifiable", "fixed")
                  if (n := self.count(c))}
        return f"Explanation({head}classes={counts}, kernel_directions={sum(len(b.basis) for b in self.blocks)})"

    def _repr_html_(self) -> str:
        """The notebook view: the report's verdict and reason, the explanation, one row per parameter."""
        from exactident.io.display import html_block, parameter_rows

        r = self.report
        fields: list[tuple[str, Any]] = [] if r is None else [
            ("verdict", r.verdict), ("decided by", r.decided_by), ("rank Gamma", r.rank_gamma_text),
            ("rank A", r.rank_a), ("dim", r.dim)]
        rows = parameter_rows([] if r is None else r.widths, None if r is None else r.extra.get("provenance"),
                              self.parameters)
        lines = ([] if r is None else [r.reason]) + self.lines
        return html_block("Explanation" + ("" if r is None else f" {r.name}"), fields, lines,
                          (["parameter", "framework name", "class", "by", "why"],
                           [[e["parameter"], e["framework_name"], e["class"], e["by"], e["why"]] for e in rows]))

    def parameters_frame(self) -> Any:
        """One row per parameter (paper's and framework's names, class, witness kind) as a pandas DataFrame.

        Raises
        ------
        UnsupportedCaseError
            When pandas is not installed.
        """
        from exactident.io.display import parameter_rows, to_frame

        r = self.report
        return to_frame(parameter_rows([] if r is None else r.widths, None if r is None else r.extra.get("provenance"),
                                       self.parameters))

    def fields(self) -> dict[str, Any]:
        """The report fields, JSON-ready (kernel entries as decimal strings of any size)."""
        from exactident.io.rationals import format_int

        blocks = [{"resolution": b.resolution, "rank_gamma": b.rank,
                   "directions": [{"delta": {self.names[j]: format_int(v) for j, v in enumerate(vec) if v},
                                   **({"line": True} if line else {})}
                                  for vec, line in zip(b.basis, b.lines)]}
                  for b in self.blocks]
        return {"parameters": self.parameters, "neurons": self.neurons, "kernel_basis": blocks,
                "explanation": self.lines}

    def count(self, cls: str) -> int:
        return sum(1 for e in self.parameters if e["class"] == cls)


@dataclass
class ConstrainedExplanation:
    """What :func:`explain_constrained` found on a layer graph; the counterpart of :class:`Explanation`.

    Attributes
    ----------
    names : list of str
        ``param_names`` (``theta_j`` when the network has none).
    parameters, units, channels : list of dict
        Report fields (docs/cli.md).
    blocks : list of FreeBlock
    gauge : list of int
        The gauge set ``F`` (:func:`exactident.explain.chart.gauge_parameters`).
    lines : list of str
        Report field ``explanation``.
    seconds : float
    report : Report or None
    """

    names: list[str]
    parameters: list[dict[str, Any]]
    units: list[dict[str, Any]]
    channels: list[dict[str, Any]]
    blocks: list[FreeBlock]
    gauge: list[int]
    lines: list[str] = field(default_factory=list)
    seconds: float = 0.0
    report: Report | None = field(default=None, repr=False, compare=False)

    def __repr__(self) -> str:
        """One short line: the verdict and the count of each parameter class."""
        r = self.report
        head = "" if r is None else f"verdict={r.verdict!r}, rank_gamma={r.rank_gamma_text}, dim={r.dim}, "
        counts = {c: n for c in FREE_CLASSES if (n := self.count(c))}
        n_dir = sum(len(b.basis) for b in self.blocks)
        return f"ConstrainedExplanation({head}classes={counts}, kernel_directions={n_dir})"

    def _repr_html_(self) -> str:
        """The notebook view: the verdict and reason, the explanation, one row per free parameter."""
        from exactident.io.display import html_block

        r = self.report
        fields: list[tuple[str, Any]] = [] if r is None else [
            ("verdict", r.verdict), ("decided by", r.decided_by), ("rank Gamma_free", r.rank_gamma_text),
            ("dim_free", r.dim)]
        rows = [[e["index"], e["name"], e["class"], e.get("by", ""), e.get("why", "")] for e in self.parameters]
        return html_block("Explanation" + ("" if r is None else f" {r.name}"), fields,
                          ([] if r is None else [r.reason]) + self.lines,
                          (["theta", "parameter", "class", "by", "why"], rows))

    def parameters_frame(self) -> Any:
        """One row per free parameter as a pandas DataFrame, with the columns of a plain MLP's
        ``Explanation.parameters_frame()`` (``parameter`` is ``theta_j``, ``framework_name`` the case's
        name), then ``witness`` and ``line`` (docs/notebook.md).

        Raises
        ------
        UnsupportedCaseError
            When pandas is not installed.
        """
        from exactident.io.display import parameter_rows, to_frame

        return to_frame(parameter_rows([], None, self.parameters, layer_graph=True))

    def count(self, cls: str) -> int:
        """Number of parameters of class ``cls``."""
        return sum(1 for e in self.parameters if e["class"] == cls)

    def fields(self) -> dict[str, Any]:
        """The report fields, JSON-ready (kernel entries as decimal strings of any size)."""
        from exactident.io.rationals import format_int

        blocks = [{"active": b.active, "rank_gamma": b.rank,
                   "directions": [{"delta": {self.names[j]: format_int(v) for j, v in enumerate(vec) if v},
                                   **({"line": True} if line else {})}
                                  for vec, line in zip(b.basis, b.lines)]}
                  for b in self.blocks]
        return {"parameters": self.parameters, "units": self.units, "channels": self.channels,
                "kernel_basis": blocks, "explanation": self.lines}


def _pattern_of(state, entry: dict[str, Any]):
    ties = [Tie(t["sample"], t["layer"], t["neuron"]) for t in entry["ties"]]
    return resolve_ties(state.pattern, ties, [bool(t["active"]) for t in entry["ties"]])


def _certificate_deltas(report: Report) -> tuple[dict[str, dict[str, str]], list | None]:
    cert = report.certificate or {}
    deltas = {k: dict(cert[k]["delta"]) for k in ("line", "entering") if isinstance(cert.get(k), dict)}
    resolution = cert["entering"].get("resolution") if "entering" in deltas else None
    return deltas, resolution


def explain(case: Case | str | os.PathLike[str], *, report: Report | None = None, seed: int | None = 0,
            sample: Any = None) -> tuple[Report, Explanation | ConstrainedExplanation]:
    """Explain the verdict on ``case``: parameter classes, neuron diagnostics, kernel directions.

    A case beyond the plain ReLU MLP (a layer graph with convolution, pooling, skips, leaky ReLU or
    PReLU) gets a :class:`ConstrainedExplanation` instead: per free parameter, per unit and per
    channel (:func:`explain_constrained`).

    Parameters
    ----------
    case : Case, or path
        As for :func:`exactident.check.check`.
    report : Report, optional
        The report of ``check`` on this case (computed here, without the float
        cross-check, when not given).
    seed : int or None
        Seed of the primes (speed only, never the result).
    sample : optional
        The sample of a model file (as for ``check``).

    Returns
    -------
    (Report, Explanation or ConstrainedExplanation)

    Raises
    ------
    CaseFormatError
        A path that cannot be read or imported.

    Examples
    --------
    ``f = 3 relu(2x + 1)`` at ``0, 1``: ``W_1[0,0]`` is pinned (first order), the two biases trade
    along an exact line (``b_1[0] - 3 b_2[0]``) and are not identifiable.

    >>> from exactident.io.case import parse_case
    >>> case = parse_case({"format": "exactident-case/1", "name": "t", "widths": [1, 1, 1],
    ...     "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]], "sample": [[0], [1]]})
    >>> report, ex = explain(case)
    >>> report.verdict, [(e["name"], e["class"]) for e in ex.parameters]
    ('not-identifiable', [('W_2[0,0]', 'fixed'), ('W_1[0,0]', 'first-order-determined'), \
('b_1[0]', 'not-identifiable'), ('b_2[0]', 'not-identifiable')])
    """
    if not isinstance(case, Case) or sample is not None:
        from exactident.io.importers.load import as_case

        case = as_case(case, sample)
    if not case.is_plain:  # the constrained engine's report and kernels, never the plain engine's
        from exactident.check import check

        # exact ranks where explain computes exact kernels (as for the plain MLP): the header then
        # states the rank its kernel bases complete; past the cap the certified interval is kept
        cn = case.compiled
        small = len(case.X) * cn.widths[-1] * cn.n_params <= MAX_CONSTRAINED_KERNEL_ENTRIES
        report = report if report is not None else check(case, numeric=False, seed=seed, exact_ranks=small)
        return report, explain_constrained(cn, case.X, report, seed=seed)
    if report is None:
        from exactident.check import check

        # exact ranks: the kernel bases explain writes are complete only against the exact R_Gamma
        report = check(case, numeric=False, seed=seed, exact_ranks=True)
    start = time.perf_counter()
    net, X = case.network, case.X
    state = activation_state(net, X)
    fixed = fixed_edges(net)
    params = free_parameters(net, fixed)
    names = [p.name for p in params]
    rng = random.Random(seed)
    blocks: list[KernelBlock] = []
    covers_all = True
    ties = bool(state.ties)
    if report.verdict != "identifiable":
        if not ties or report.degenerate or report.patterns == []:
            patterns: list[tuple[int | None, Any]] = [(None, state.pattern)]
        elif report.patterns and len(report.patterns) <= MAX_EXPLAIN_RESOLUTIONS:
            patterns = [(k, _pattern_of(state, p)) for k, p in enumerate(report.patterns)]
        else:
            patterns, covers_all = [], False
        for res, pattern in patterns:
            stage("explain: exact kernel of Gamma", resolutions=len(patterns), samples=len(X), dim=net.dim)
            k = gamma_kernel(net, X, pattern, fixed, rng=rng)
            lines = [not report.degenerate and constant_line(net, X, fixed, params, vec, ties=ties)
                     for vec in k.basis]
            blocks.append(KernelBlock(res, k.rank, k.basis, lines))
    deltas, ent_res = _certificate_deltas(report)
    entering_block = next((b for b, blk in enumerate(blocks) if blk.resolution is not None and ent_res is not None
                           and report.patterns and report.patterns[blk.resolution]["ties"] == ent_res), None)
    cn_fails = (not ties and not report.degenerate and report.rank_a is not None
                and report.rank_gamma == report.rank_a < report.dim and bool(blocks))
    stage("explain: parameter classes", parameters=len(names))
    parameters = classify(names, fixed_names(net, fixed), verdict=report.verdict, degenerate=report.degenerate,
                          blocks=blocks, covers_all=covers_all and bool(blocks), cn_fails=cn_fails,
                          entering_block=entering_block, certificate_deltas=deltas)
    stage("explain: neuron diagnostics", neurons=sum(net.widths[1:-1]))
    neurons = neuron_entries(state, X, net.widths, params,
                             [b.basis for b in blocks] if blocks or report.verdict == "identifiable" else None)
    ex = Explanation(names, parameters, neurons, blocks, report=report)
    ex.lines = explanation_lines(report, ex, deltas)
    ex.seconds = time.perf_counter() - start
    return report, ex


def add_explanation(case: Case, report: Report, *, seed: int | None = 0) -> Explanation | ConstrainedExplanation:
    """Run :func:`explain` on an existing report and add its fields to ``report.extra``."""
    _, ex = explain(case, report=report, seed=seed)
    report.extra.update(ex.fields())
    return ex



def explain_constrained(cn: Network, X: Sequence[Sequence[flint.fmpq]], report: Report, *,
                        seed: int | None = 0) -> ConstrainedExplanation:
    """Explain ``report`` (``check``'s report on the layer graph ``cn`` and ``X``): classes, units, channels,
    kernel directions in the chart (docs/explain.md, "Constrained networks").

    Parameters
    ----------
    cn : Network
    X : n rows of N_0 fmpq
    report : Report
        ``check``'s report on this case (its verdict and certificate are used).
    seed : int or None
        Seed of the primes (speed only, never the result).

    Returns
    -------
    ConstrainedExplanation

    Examples
    --------
    ``2 leaky(x - 5)`` (slope 1/10, no output bias) seen at ``x = 0, 1``: the unit is on its slope side at
    both samples, yet it is not dead and its weight and bias are identifiable (the output weight is the gauge).

    >>> import numpy as np
    >>> from exactident.check import check_constrained
    >>> cn = Network((1, 1, 1), [flint.fmpq_mat([[1]]), flint.fmpq_mat([[2]])],
    ...     [[flint.fmpq(-5)], [flint.fmpq(0)]], [np.array([[0]]), np.array([[2]])], [np.array([1]), np.array([-1])],
    ...     [[flint.fmpq(1, 10)]], [np.array([-1])], 3, ("leaky ReLU",), ["fc1.weight[0,0]", "fc1.bias[0]",
    ...     "fc2.weight[0,0]"], [["fc1[0]"], ["fc2[0]"]])
    >>> X = [[flint.fmpq(0)], [flint.fmpq(1)]]
    >>> ex = explain_constrained(cn, X, check_constrained(cn, X))
    >>> [(e["name"], e["class"]) for e in ex.parameters]
    [('fc1.weight[0,0]', 'identifiable'), ('fc1.bias[0]', 'identifiable'), ('fc2.weight[0,0]', 'gauge')]
    >>> u = ex.units[0]; (u["kind"], u["n_active"], u["n_slope_side"], u["dead"])
    ('leaky', 0, 2, False)
    """
    start = time.perf_counter()
    X = [[flint.fmpq(v) for v in row] for row in X]
    rng = random.Random(seed)
    names = list(cn.param_names) if cn.param_names else [f"theta_{j}" for j in range(cn.n_params)]
    state = free_state(cn, X)
    sym = rescaling_symmetry(cn)
    gauge = gauge_parameters(cn, sym)
    persistent = set(persistent_ties(cn, X, state))
    free_ties = [t for t in range(len(state.ties)) if t not in persistent]
    entries = len(X) * cn.widths[-1] * cn.n_params
    blocks: list[FreeBlock] = []
    covers_all, why_none = True, ""
    if report.verdict != "identifiable":
        if entries > MAX_CONSTRAINED_KERNEL_ENTRIES:
            interval = report.rank_gamma_interval
            known = f"rank Gamma_free = {report.rank_gamma}" if report.rank_gamma is not None else \
                f"rank Gamma_free in {list(interval)}" if interval else "rank Gamma_free not certified"
            why_none = (f"Gamma_free has {entries} entries, more than {MAX_CONSTRAINED_KERNEL_ENTRIES}: no exact "
                        f"kernel computed ({known}, dim_free = {sym.dim_free})")
        elif 2 ** len(free_ties) > MAX_CONSTRAINED_RESOLUTIONS:
            covers_all = False
            why_none = (f"{len(free_ties)} ties: 2^{len(free_ties)} tie resolutions exceed "
                        f"{MAX_CONSTRAINED_RESOLUTIONS}; no kernel computed")
        else:
            for sides in product([True, False], repeat=len(free_ties)):
                active = [True] * len(state.ties)
                for t, side in zip(free_ties, sides):
                    active[t] = side
                stage("explain: exact kernel of Gamma_free", resolutions=2 ** len(free_ties), cols=cn.n_params)
                rank, basis = chart_kernel(cn, X, resolve_free_ties(state, active), gauge, names, rng)
                lines = one_layer_lines(cn, basis, smooth=not free_ties)
                blocks.append(FreeBlock(active if state.ties else None, rank, basis, lines))
    certified = certificate_direction(report.certificate, sym, gauge, cn.n_params) \
        if report.verdict == "not-identifiable" else None
    stage("explain: parameter classes", parameters=cn.n_params)
    parameters = classify_free(names, gauge, verdict=report.verdict, blocks=blocks, covers_all=covers_all,
                               why_none=why_none, certified=certified)
    stage("explain: units and channels", units=sum(cn.widths[1:-1]))
    units = unit_entries(cn, X, state)
    channels = channel_entries(cn, X, state, units, parameters)
    ex = ConstrainedExplanation(names, parameters, units, channels, blocks, gauge, report=report)
    ex.lines = free_explanation_lines(report, ex, sym) + [plain_rules_line(cn)]
    ex.seconds = time.perf_counter() - start
    return ex
