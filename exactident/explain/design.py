"""``design``: which samples already identify theta, and which new points would (docs/explain.md).

- **Smallest prefix.**  ``rank Gamma(x^1..x^m)`` never decreases with ``m``, so the
  smallest identifying prefix is where the greedy row basis of ``Gamma`` (the pivot
  rows of ``Gamma^T`` mod p, in sample order) completes.  It is certified at both
  ends: ``rank_p = dim`` on the first ``m`` samples (a lower bound that meets
  ``dim``), and ``rank < dim`` on the first ``m - 1`` (by shape, ``(m - 1) N_L < dim``,
  or by an exact kernel vector, :func:`exactident.explain.kernel.integer_kernel`).  An
  unlucky prime (``rank_p < rank``) can only make ``m`` too large; the exact check at
  ``m - 1`` catches that and an exact bisection below ``m`` takes over.
- **A small identifying subsample.**  The samples of the pivot rows (in a few
  orders), pruned while ``rank_p`` stays ``dim``: certified by its rank mod p, set
  against the lower bound ``ceil(dim / N_L)`` (each sample adds at most ``N_L`` rows).
- **New points** (:mod:`exactident.explain.points`) when ``C_S`` fails on the whole
  sample, unless a direction no sample can remove exists
  (:mod:`exactident.explain.obstructions`); the augmented case is re-checked by
  :func:`exactident.check.check`.

Every network goes through one interface (:mod:`exactident.explain.gamma_rows`): the MLP's
``Gamma`` and ``dim``, or a layer graph's ``Gamma_free`` and ``dim_free`` (the rank rule
``rank Gamma_free = dim_free``; Theorem 8 is never used on a layer graph).

Called by :mod:`exactident.explain.design_command`.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from math import ceil
from typing import Any

import flint
import numpy as np

from exactident.budget import stage
from exactident.errors import InvariantViolation
from exactident.explain.gamma_rows import GammaRows, MLPRows, rows_of
from exactident.explain.kernel import combination_text
from exactident.explain.obstructions import Obstruction
from exactident.explain.points import search_points
from exactident.io.case import Case
from exactident.io.rationals import format_fmpq
from exactident.io.report import Report
from exactident.linalg.modular import rank_mod_p, rref_kernel_mod_p
from exactident.model.fixed_edges import FixedEdges
from exactident.model.network import Network, degenerate_neurons

__all__ = ["DEFAULT_BUDGET", "MAX_GRAPH_KERNEL_ENTRIES", "Design", "data_box", "design", "small_subsample",
           "smallest_prefix"]

#: Default most new points.
DEFAULT_BUDGET = 256
#: A layer graph's ``Gamma_free`` gets an exact kernel (no certified rank in the report) up to this many entries:
#: the engine's own cap on exact elimination (:data:`exactident.check.free_rank.MAX_EXACT_FREE_ENTRIES`);
#: imported float weights make the rationals long (digits-leaky, 2000 x 1482: past 5 GB in 300 s).
MAX_GRAPH_KERNEL_ENTRIES = 400_000


@dataclass
class Design:
    """What :func:`design` found; :meth:`to_dict` is the ``exactident-design/1`` JSON (docs/cli.md).

    ``verdict`` is ``check``'s verdict when it was run (identifiable cases, the boundary, every
    layer graph), else None: ``C_S`` fails (``rank_gamma < dim``, exact) and the finer verdict,
    which needs ``rank A``, is not needed here.  On a layer graph ``dim`` is ``dim_free``
    (``dim_name``) and ``rank_gamma`` is ``rank Gamma_free``.
    """

    name: str
    widths: list[int]
    n_samples: int
    dim: int
    rank_gamma: int | None  # None: a layer graph past MAX_GRAPH_KERNEL_ENTRIES without a certified rank
    verdict: str | None
    lower_bound: int
    prefix: dict[str, Any] | None = None
    subsample: dict[str, Any] | None = None
    obstructions: list[dict[str, Any]] = field(default_factory=list)
    points: dict[str, Any] | None = None
    new_case: Case | None = None
    new_report: Report | None = None
    statement: list[str] = field(default_factory=list)
    seconds: float = 0.0
    dim_name: str = "dim"

    def __repr__(self) -> str:
        """One short line: the verdict, ranks, lower bound, prefix, subsample and points found."""
        return (f"Design(name={self.name[:60]!r}, verdict={self.verdict!r}, rank_gamma={self.rank_gamma}, "
                f"dim={self.dim}, lower_bound={self.lower_bound}, "
                f"prefix={None if self.prefix is None else self.prefix.get('length')}, "
                f"subsample={None if self.subsample is None else self.subsample.get('size')}, "
                f"new_points={None if self.points is None else len(self.points.get('added', []))})")

    def _repr_html_(self) -> str:
        """The notebook view: ranks, the smallest sizes found, the statement (HTML, escaped)."""
        from exactident.io.display import html_block

        new = self.new_report
        g = "Gamma" if self.dim_name == "dim" else "Gamma_free"
        fields = [("verdict", self.verdict), (f"rank {g}", self.rank_gamma), (self.dim_name, self.dim),
                  ("samples", self.n_samples), ("lower bound on samples", self.lower_bound),
                  ("identifying prefix", None if self.prefix is None else self.prefix.get("length")),
                  ("identifying subsample", None if self.subsample is None else self.subsample.get("size")),
                  ("new points", None if self.points is None else len(self.points.get("added", []))),
                  ("new case's verdict", None if new is None else f"{new.verdict} (rank Gamma {new.rank_gamma})")]
        return html_block(f"Design {self.name}", fields, self.statement)

    def to_dict(self) -> dict[str, Any]:
        """This design as the ``exactident-design/1`` JSON object (docs/cli.md)."""
        out: dict[str, Any] = {
            "format": "exactident-design/1", "name": self.name, "widths": self.widths, "n_samples": self.n_samples,
            "dim": self.dim, "dim_name": self.dim_name, "rank_gamma": self.rank_gamma, "verdict": self.verdict,
            "lower_bound": self.lower_bound,
            "prefix": self.prefix, "subsample": self.subsample, "obstructions": self.obstructions,
            "points": self.points, "new_case": None, "statement": self.statement,
        }
        if self.new_case is not None and self.new_report is not None:
            nr = self.new_report
            out["new_case"] = {"name": self.new_case.name, "n_samples": nr.n_samples, "verdict": nr.verdict,
                               "rank_gamma": nr.rank_gamma, "rank_a": nr.rank_a, "dim": nr.dim, "reason": nr.reason}
        return out


def data_box(X: Sequence[Sequence[flint.fmpq]], n0: int) -> tuple[list[flint.fmpq], list[flint.fmpq]]:
    """The bounding box of the sample (exact), ``[0, 0]`` per coordinate for an empty sample.

    Examples
    --------
    >>> data_box([[flint.fmpq(1), flint.fmpq(-2)], [flint.fmpq(3), flint.fmpq(5)]], 2)
    ([1, -2], [3, 5])
    """
    if not X:
        return [flint.fmpq(0)] * n0, [flint.fmpq(0)] * n0
    return [min(row[j] for row in X) for j in range(n0)], [max(row[j] for row in X) for j in range(n0)]


def _source(net: Network | GammaRows, fixed: FixedEdges | None) -> GammaRows:
    """The network as :mod:`exactident.explain.gamma_rows` reads it (an MLP ``net`` is wrapped)."""
    return net if isinstance(net, GammaRows) else MLPRows(net, fixed)


def smallest_prefix(net: Network | GammaRows, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                    fixed: FixedEdges | None = None, *, rng: random.Random) -> dict[str, Any] | None:
    """The smallest ``m`` with ``rank Gamma(x^1..x^m) = dim``, certified at ``m`` and ``m - 1`` (module docstring).

    Off the boundary (``pattern`` the sample's own, no ties).  None when the whole sample does
    not reach ``dim``.  ``net`` is an MLP (with ``fixed``) or any
    :class:`~exactident.explain.gamma_rows.GammaRows` (a layer graph: ``Gamma_free`` and ``dim_free``).

    Returns
    -------
    dict or None
        ``{"length": m, "prime": p, "rank_mod_p": dim, "shorter": {"length": m - 1, "rank_gamma"
        or "rank_gamma_at_most": r, "proof": "shape" | "exact"}}``.

    Examples
    --------
    ``f = 3 relu(2x + 1)`` at ``0, 1, -1, 2``: ``dim = 3`` and the first three samples suffice.

    >>> from exactident.model.activation import activation_state
    >>> from exactident.model.fixed_edges import fixed_edges
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])], [[1], [0]])
    >>> X = [[flint.fmpq(x)] for x in (0, 1, -1, 2)]
    >>> r = smallest_prefix(net, X, activation_state(net, X).pattern, fixed_edges(net), rng=random.Random(0))
    >>> r["length"], r["shorter"]["proof"]
    (3, 'shape')
    """
    src = _source(net, fixed)
    dim, N_L = src.dim, src.N_L
    for _ in range(3):
        p, G = src.residues(X, pattern, rng)
        piv = rref_kernel_mod_p(np.ascontiguousarray(G.T), p)[0] if len(X) else []
        if len(piv) == dim:
            break
    else:
        if src.exact_rank(X, pattern, rng) < dim:
            return None
        piv, p = list(range(len(X) * N_L)), 0  # every prime unlucky: bisect over the whole sample
    m = piv[-1] // N_L + 1 if p else len(X)

    def prefix_rank(k: int) -> int:
        return src.exact_rank(X[:k], [a[:k] for a in pattern], rng)

    lo = -(-dim // N_L) - 1  # (lo) N_L < dim: fails by shape
    if (m - 1) * N_L >= dim and prefix_rank(m - 1) == dim:  # an unlucky prime: exact bisection below m
        hi = m - 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if prefix_rank(mid) == dim:
                hi = mid
            else:
                lo = mid
        m, p = hi, 0
    certified: dict[str, Any] = {"length": m}
    if p:
        certified.update({"prime": p, "rank_mod_p": dim})
    else:
        certified.update({"rank_gamma": dim, "proof": "exact"})
    if (m - 1) * N_L < dim:
        certified["shorter"] = {"length": m - 1, "rank_gamma_at_most": (m - 1) * N_L, "proof": "shape"}
    else:
        r = prefix_rank(m - 1)
        if r >= dim:
            raise InvariantViolation(f"prefix {m - 1} reaches rank {r} = dim after the bisection")
        certified["shorter"] = {"length": m - 1, "rank_gamma": r, "proof": "exact"}
    return certified


def small_subsample(net: Network | GammaRows, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                    fixed: FixedEdges | None = None, *, rng: random.Random, tries: int = 4) -> dict[str, Any] | None:
    """A small set of samples with ``rank Gamma = dim`` (certified mod p), from pivot rows, pruned.

    ``net`` as for :func:`smallest_prefix`.  The rank mod p is a lower bound; meeting the proven
    upper bound ``dim`` (``dim_free``) it is the rank.

    Returns
    -------
    dict or None
        ``{"size", "indices", "prime", "rank_mod_p", "lower_bound", "pruned": True}``; None when
        no set was found (``rank_p < dim`` for the whole sample).

    Examples
    --------
    >>> from exactident.model.activation import activation_state
    >>> from exactident.model.fixed_edges import fixed_edges
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])], [[1], [0]])
    >>> X = [[flint.fmpq(x)] for x in (0, 1, 3, -1, 2)]
    >>> small_subsample(net, X, activation_state(net, X).pattern, fixed_edges(net), rng=random.Random(0))["size"]
    3
    """
    src = _source(net, fixed)
    dim, N_L, n = src.dim, src.N_L, len(X)
    if n == 0:
        return None
    p, G = src.residues(X, pattern, rng)
    lower = -(-dim // N_L)

    def rows(samples: Sequence[int]) -> np.ndarray:
        return G[[i * N_L + k for i in samples for k in range(N_L)]]

    best: list[int] | None = None
    order = list(range(n))
    for t in range(tries):
        if t:
            rng.shuffle(order)
        piv = rref_kernel_mod_p(np.ascontiguousarray(rows(order).T), p)[0]
        if len(piv) < dim:
            return None
        S = sorted({order[r // N_L] for r in piv})
        if len(S) > lower:
            for i in sorted(S, reverse=True):
                trial = [s for s in S if s != i]
                if len(trial) * N_L >= dim and rank_mod_p(rows(trial), p) == dim:
                    S = trial
        if best is None or len(S) < len(best):
            best = S
        if len(best) == lower:
            break
    assert best is not None
    return {"size": len(best), "indices": best, "prime": p, "rank_mod_p": dim, "lower_bound": lower}


def design(case: Case | str | os.PathLike[str], *, budget: int = DEFAULT_BUDGET,
           box: tuple[Sequence[flint.fmpq], Sequence[flint.fmpq]] | None = None, seed: int | None = 0,
           report: Report | None = None, progress: Callable[[str], None] | None = None) -> Design:
    """Prefix, subsample and new points for ``case`` (module docstring).

    Parameters
    ----------
    case : Case, or path
    budget : int
        Most new points added.
    box : (lo, hi), optional
        Where new points may lie (default: the sample's bounding box, :func:`data_box`).
    seed : int or None
        Seeds the primes and the point search (the result is reproducible).
    report : Report, optional
        ``check``'s report on the case.  Without it, off the boundary, ``check`` runs only when
        ``C_S`` holds (or theta is in ``S``); otherwise the exact kernel of ``Gamma`` decides.
    progress : callable, optional
        Called with a short line after each new point.

    Returns
    -------
    Design

    Raises
    ------
    CaseFormatError
        A path that cannot be read.
    InvariantViolation
        A structural direction that is not in ``ker Gamma`` (a bug).

    Examples
    --------
    >>> from exactident.io.case import parse_case
    >>> case = parse_case({"format": "exactident-case/1", "name": "t", "widths": [1, 1, 1],
    ...     "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]], "sample": [[0], [1], [-1], [2]]})
    >>> d = design(case)
    >>> d.prefix["length"], d.subsample["size"], d.lower_bound
    (3, 3, 3)
    """
    from exactident.check import check

    start = time.perf_counter()
    if not isinstance(case, Case):
        from exactident.io.importers.load import as_case

        case = as_case(case)
    X = case.X
    src = rows_of(case)  # the MLP's Gamma and dim, or a layer graph's Gamma_free and dim_free
    rng = random.Random(seed)
    pattern0, ties0 = src.state(X)
    names, dim, N_L, g = src.names, src.dim, src.N_L, src.gamma_name
    degenerate = bool(degenerate_neurons(case.network)) if src.plain else False
    kernel0: tuple[int, list[list[int]]] | None = None
    if report is None and not ties0 and src.plain:
        # C_S is decided by the exact kernel; check (whose C_N test needs rank A) runs only when C_S holds
        # (theta in S: the verdict is degenerate whatever the ranks)
        # announced: the exact kernel can take minutes, and a --timeout names the stage it stopped at
        stage("design: exact kernel of Gamma", rows=len(X) * N_L, cols=dim)
        kernel0 = src.kernel(X, pattern0, rng)
        if kernel0[0] == dim and not degenerate:
            report = check(case, numeric=False, seed=seed)
    elif report is None:  # a layer graph: its engine certifies rank Gamma_free mod p first (verdict first)
        report = check(case, numeric=False, seed=seed)
    if kernel0 is not None:
        rank = kernel0[0]
    elif report is not None and report.rank_gamma is not None:
        rank = report.rank_gamma
    elif not src.plain and len(X) * N_L * src.n_cols > MAX_GRAPH_KERNEL_ENTRIES:
        assert report is not None
        out = Design(case.name, list(src.widths), len(X), dim, None, report.verdict, ceil(dim / N_L),
                     dim_name=src.dim_name)
        lo_hi = report.rank_gamma_interval
        out.statement.append(f"rank {g} is certified only in [{lo_hi[0]}, {lo_hi[1]}] by check" if lo_hi else
                             f"check did not certify rank {g}")
        out.statement.append(f"its exact kernel ({len(X) * N_L} x {src.n_cols}) is past the "
                             f"{MAX_GRAPH_KERNEL_ENTRIES} entries design computes exactly on a layer graph: no "
                             "prefix, subsample or point search")
        out.seconds = time.perf_counter() - start
        return out
    else:  # no certified rank in the report (an interval, or past the resolution cap): the design needs one
        stage(f"design: exact kernel of {g}", rows=len(X) * N_L, cols=src.n_cols)
        kernel0 = src.kernel(X, pattern0, rng)
        rank = kernel0[0]
    verdict = report.verdict if report is not None else "degenerate" if degenerate else None
    out = Design(case.name, list(src.widths), len(X), dim, rank, verdict, ceil(dim / N_L), dim_name=src.dim_name)
    box = box or data_box(X, src.n0)
    if verdict == "identifiable":
        if not ties0:
            stage("design: smallest prefix", samples=len(X))
            out.prefix = smallest_prefix(src, X, pattern0, rng=rng)
            stage("design: small subsample", samples=len(X))
            out.subsample = small_subsample(src, X, pattern0, rng=rng)
            if out.prefix:
                out.statement.append(f"the first {out.prefix['length']} of the {len(X)} samples already identify "
                                     f"theta ({src.rule}); the first {out.prefix['length'] - 1} do not")
            if out.subsample:
                s = out.subsample
                gap = "the minimum" if s["size"] == out.lower_bound else f"{s['size'] - out.lower_bound} above it"
                out.statement.append(f"a subsample of {s['size']} samples identifies theta (certified: rank {g} "
                                     f"= {src.dim_name} mod p = {s['prime']}); lower bound ceil({src.dim_name} / N_L) "
                                     f"= {out.lower_bound}: {gap}")
            if out.subsample and out.subsample["size"] < len(X):
                idx = out.subsample["indices"]
                sub = _with_sample(case, f"{case.name}-subsample", [list(X[i]) for i in idx],
                                   f"The {len(idx)} samples {_ranges(idx)} of {case.name}: an identifying "
                                   "subsample found by exactident design.")
                out.new_case, out.new_report = sub, check(sub, numeric=False, seed=seed)
        else:
            out.statement.append("theta is identifiable; prefixes and subsamples are not searched on the boundary")
        out.seconds = time.perf_counter() - start
        return out
    inside = all(box[0][j] <= x[j] <= box[1][j] for x in X for j in range(len(box[0])))
    obs = src.obstructions(X, box, inside)
    if src.limits:
        out.statement.append(src.limits)
    _record(out, obs, names, src.exact_matrix(X, pattern0) if obs and not ties0 else None, inside)
    if any(not o.box for o in obs):
        out.statement.append("no finite sample anywhere can make theta identifiable:")
        out.statement += [_obstruction_line(o, names) for o in obs if not o.box]
        out.seconds = time.perf_counter() - start
        return out
    patterns = src.resolutions(X, report) if report is not None else [pattern0]
    if patterns is None:
        out.statement.append("the tie resolutions were not enumerated: no kernel to shrink")
        out.seconds = time.perf_counter() - start
        return out
    kernels = ([kernel0[1]] if kernel0 is not None and len(patterns) == 1 and not ties0
               else [src.kernel(X, pat, rng)[1] for pat in patterns])
    # directions in every kernel whatever the sample: S_H and ker T of a layer graph (none for the MLP)
    base = src.n_cols - dim
    before = [len(K) - base for K in kernels]
    skip = [o.neurons[0] for o in obs]
    n_out = sum(len(o.deltas) for o in obs)
    stage("design: new points", budget=budget)
    found = search_points(None, X, None, [], kernels, box, budget=budget, rng=rng, progress=progress,
                          floor=(n_out + base) * len(kernels), skip=skip, rows=src)
    found.nullity = [k - base for k in found.nullity]
    if inside and len(kernels) == 1 and found.nullity[0] and isinstance(src, MLPRows):
        more = src.unseen_on_box(X, found.points, obs, box, rng)  # single weights still unseen: out of reach?
        _record(out, more, names, None, inside)
        obs += more
    out.points = {"box": [[format_fmpq(a), format_fmpq(b)] for a, b in zip(*box)],
                  "added": [{"x": [format_fmpq(v) for v in x], "gain": g, "active": [list(t) for t in tg]}
                            for x, g, tg in zip(found.points, found.gains, found.targets)],
                  "nullity_before": before, "nullity_after": found.nullity, "budget": budget,
                  "tried": found.tried, "seed": seed}
    if found.points:
        new = _with_sample(case, f"{case.name}-designed", [list(x) for x in X] + found.points,
                           f"{case.name} with {len(found.points)} points added by exactident design "
                           f"(seed {seed}) inside the box; the first {len(X)} samples are the original ones.")
        out.new_case, out.new_report = new, check(new, numeric=False, seed=seed)
    deficit = "kernel dimension" if src.plain else f"{src.dim_name} - rank {g} ="  # S_H: in a graph's kernel
    over = f", summed over the {len(kernels)} tie resolutions" if len(kernels) > 1 else ""
    out.statement.append(f"{src.rule} fails on the whole sample ({deficit} {sum(before)}{over}): no "
                         "prefix or subsample identifies theta")
    gained = f"{len(found.points)} new point(s) in the box (+{sum(found.gains)} rank)"
    if not any(found.nullity):
        out.statement.append(f"{gained} make {src.rule} hold"
                             + (f"; check on the new case: {out.new_report.verdict}" if out.new_report else ""))
    elif obs:
        out.statement.append(f"{gained} leave {_left(src, sum(found.nullity))}; no finite "
                             "sample in the box can make theta identifiable:")
        out.statement += [_obstruction_line(o, names) for o in obs]
        n_out = sum(len(o.deltas) for o in obs) * len(kernels)
        if sum(found.nullity) > n_out:
            out.statement.append(f"  and {sum(found.nullity) - n_out} more direction(s) were not "
                                 f"removed within the budget ({found.tried} candidates tried)")
    else:
        out.statement.append(f"{gained} leave {_left(src, sum(found.nullity))}: the budget ran "
                             f"out or no candidate in the box helped ({found.tried} candidates tried)")
    out.seconds = time.perf_counter() - start
    return out


def _left(src: GammaRows, n: int) -> str:
    return f"a kernel of dimension {n}" if src.plain else f"{src.dim_name} - rank {src.gamma_name} = {n}"


def _with_sample(case: Case, name: str, X: list[list[flint.fmpq]], description: str) -> Case:
    """``case``'s network (an MLP, or the same layer graph) with the sample ``X``."""
    if case.is_plain:
        return Case(name=name, network=case.network, X=X, description=description, provenance=case.provenance)
    return Case(name=name, X=X, description=description, provenance=case.provenance, architecture=case.architecture)


def _record(out: Design, obs: Sequence[Obstruction], names: Sequence[str], G: flint.fmpq_mat | None,
            inside: bool) -> None:
    """Check each direction against ``Gamma(X)`` (when given) and add it to ``out.obstructions``."""
    for o in obs:
        for delta in o.deltas:
            if G is not None and (not o.box or inside) and any(
                    v != 0 for v in (G * flint.fmpq_mat(len(delta), 1, delta)).entries()):
                raise InvariantViolation(f"structural direction ({o.kind}) is not in ker Gamma")
        out.obstructions.append({"kind": o.kind, "neurons": [list(v) for v in o.neurons], "box": o.box,
                                 "directions": [{names[j]: format_fmpq(d) for j, d in enumerate(delta) if d != 0}
                                                for delta in o.deltas],
                                 "text": o.text})


def _obstruction_line(o: Obstruction, names: Sequence[str]) -> str:
    more = f" (and {len(o.deltas) - 1} more)" if len(o.deltas) > 1 else ""
    return f"  {o.text}; direction {combination_text(_ints(o.delta), names)}{more}"


def _ints(delta: Sequence[flint.fmpq]) -> list[int]:
    d = 1
    for v in delta:
        d = d * int(v.q) // _gcd(d, int(v.q))
    return [int(v.p) * (d // int(v.q)) for v in delta]


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


def _ranges(idx: Sequence[int]) -> str:
    """``0..83, 86, 88..91`` for sorted indices."""
    out, start = [], None
    for k, v in enumerate(idx):
        start = v if start is None else start
        if k + 1 == len(idx) or idx[k + 1] != v + 1:
            out.append(str(v) if v == start else f"{start}..{v}")
            start = None
    return ", ".join(out)
