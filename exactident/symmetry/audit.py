"""The extraction audit: can an attack's queries identify the victim, and how close is the extracted model?

:func:`audit` puts the victim network and the attack's query set into one case and reports
(docs/symmetries.md):

1. **identifiability from the queries**: :func:`exactident.check.check`'s verdict, reason and
   certificate (exact ranks, no float cross-check);
2. **per hidden neuron**: how many queries activate it, whether they pin its hyperplane, whether it
   is dead or always active on the queries, twins; ``under_determined`` from the exact kernel of
   ``Gamma`` (:func:`exactident.explain.core.explain`) when ``dim`` is at most ``explain_max_dim``;
   above it the kernel is not computed and a neuron is reported under-determined when its hyperplane
   is not pinned and no query is on its kink (then its incoming parameters move along an exact
   straight line of equal outputs on the queries, docs/explain.md);
3. **what no query set in the box can pin**: the structural obstructions of ``design``
   (:func:`exactident.explain.obstructions.obstructions`): theta in ``S``, twins, neurons dead or
   always active on the whole box (proved by exact interval bounds within ``max_boxes`` pieces);
4. **with the extracted model**: :func:`exactident.symmetry.equiv.equiv` on the victim and the
   extracted network, with the queries as the sample (same orbit, first difference, exact alignment
   error in bits, equal outputs on the queries).

A victim that is **not a plain ReLU MLP** (a layer graph, docs/symmetries.md, "Layer graphs";
:class:`GraphAudit`) gets the same questions answered by the constrained engine: (1) the verdict of
:func:`exactident.check.check_constrained` (never Theorem 8); (2) per hidden unit and
channel, :func:`exactident.explain.core.explain_constrained`'s facts plus ``under_determined``
(an incoming parameter -- weight, bias, PReLU slope -- is ``undetermined`` or ``not-identifiable`` in
explain's classes; None when the classes are ``unknown``); (3) the box obstructions are *omitted*,
with the reason (:data:`OBSTRUCTIONS_OMITTED`): they are proved for the plain ReLU MLP only; (4)
:func:`~exactident.symmetry.equiv.equiv` with the queries as the sample.  A plain MLP given in the
constrained form gets the MLP's audit.

Called by :mod:`exactident.symmetry.command` (``exactident audit``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import flint

from exactident.budget import stage
from exactident.io.case import Case
from exactident.io.rationals import format_fmpq
from exactident.io.report import Report
from exactident.model.network import Network
from exactident.symmetry.equiv import Equivalence, equiv

__all__ = ["DEFAULT_EXPLAIN_MAX_DIM", "DEFAULT_MAX_BOXES", "OBSTRUCTIONS_OMITTED", "Audit", "GraphAudit", "audit",
           "audit_fields", "check_queries", "neuron_facts"]

#: Above this many parameters the exact kernel of ``Gamma`` is not computed (per-neuron facts only).
DEFAULT_EXPLAIN_MAX_DIM = 3000
#: Sub-boxes per proof that a neuron is dead or always active on the whole box.
DEFAULT_MAX_BOXES = 32
#: Why a layer graph's audit has no box obstructions (JSON ``omitted``).
OBSTRUCTIONS_OMITTED = ("the box obstructions (theta in S, twins, units dead or always active on the whole box) are "
                        "proved for plain ReLU MLPs only: no box prover reads a layer graph")

_LOOSE = ("undetermined", "not-identifiable")


@dataclass
class Audit:
    """What :func:`audit` found (JSON view: :meth:`to_dict`, ``exactident-audit/1``).

    Attributes
    ----------
    name : str
    widths : list of int
    n_queries : int
    dim : int
    report : Report
        ``check`` on the victim and the queries.
    neurons : list of dict
        One entry per hidden neuron (the ``neurons`` fields of docs/cli.md, plus ``under_determined_by``).
    kernel : str
        ``"exact"`` (the kernel of ``Gamma`` was computed) or ``"not computed (dim > N)"``.
    obstructions : list of dict
        ``{kind, neurons, on_box, directions, text}``.
    box : (list of fmpq, list of fmpq)
    extracted : Equivalence or None
    seconds : dict of str to float
        Wall time of each stage.
    """

    name: str
    widths: list[int]
    n_queries: int
    dim: int
    report: Report
    neurons: list[dict[str, Any]]
    kernel: str
    obstructions: list[dict[str, Any]]
    box: tuple[list[flint.fmpq], list[flint.fmpq]]
    extracted: Equivalence | None = None
    seconds: dict[str, float] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """Hidden neurons that are dead, always active, unpinned, under-determined on the queries."""
        return {k: sum(1 for e in self.neurons if e.get(k)) for k in ("dead", "always_active", "under_determined")} \
            | {"unpinned": sum(1 for e in self.neurons if not e["pinned"]), "hidden": len(self.neurons)}

    def to_dict(self) -> dict[str, Any]:
        """The ``exactident-audit/1`` JSON object (docs/symmetries.md)."""
        return audit_fields(self, self.neurons, self.obstructions)


@dataclass
class GraphAudit:
    """What :func:`audit` found for a victim that is not a plain ReLU MLP.

    JSON view: :meth:`to_dict`, ``exactident-audit/1`` plus ``layer_graph`` and ``omitted``.
    """

    name: str
    widths: list[int]
    n_queries: int
    dim: int
    report: Report
    units: list[dict[str, Any]]
    channels: list[dict[str, Any]]
    classes: dict[str, int]
    kernel: str
    box: tuple[list[flint.fmpq], list[flint.fmpq]] | None
    extracted: Any = None
    seconds: dict[str, float] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """Hidden units that are dead, silent, unpinned, under-determined on the queries."""
        return {"hidden": len(self.units), "dead": sum(bool(u["dead"]) for u in self.units),
                "silent": sum(bool(u["silent"]) for u in self.units),
                "unpinned": sum(not u["pinned"] for u in self.units),
                "under_determined": sum(bool(u["under_determined"]) for u in self.units)}

    def to_dict(self) -> dict[str, Any]:
        """The ``exactident-audit/1`` JSON object (docs/symmetries.md, "Layer graphs")."""
        r = self.report
        return audit_fields(self, self.units, []) | {
            "layer_graph": {**r.extra.get("architecture", {}), "channels": self.channels,
                            "parameter_classes": self.classes,
                            "rank_gamma_interval": None if r.rank_gamma_interval is None
                            else list(r.rank_gamma_interval)},
            "omitted": [{"what": "obstructions", "why": OBSTRUCTIONS_OMITTED}]}


def check_queries(name: str, X: Sequence[Sequence[Any]], n0: int) -> None:
    """A query set must be non-empty, each query of ``n0`` inputs.

    Raises
    ------
    CaseFormatError
        Naming ``name`` and the field ``queries``.
    """
    from exactident.errors import CaseFormatError

    if not X:
        raise CaseFormatError(name, "queries", "the query set is empty")
    if any(len(x) != n0 for x in X):
        raise CaseFormatError(name, "queries", f"every query needs {n0} inputs")


def audit_fields(au: Any, neurons: list[dict[str, Any]], obstructions: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``exactident-audit/1`` fields shared by the plain and the layer-graph audits (``au`` either)."""
    r = au.report
    return {"format": "exactident-audit/1", "name": au.name, "widths": au.widths,
            "n_queries": au.n_queries, "dim": au.dim,
            "verdict": r.verdict, "reason": r.reason, "decided_by": r.decided_by, "rank_gamma": r.rank_gamma,
            "rank_a": r.rank_a, "certificate": r.certificate, "counts": au.counts(), "kernel": au.kernel,
            "neurons": neurons, "obstructions": obstructions,
            "box": None if au.box is None else [[format_fmpq(a) for a in au.box[0]],
                                                [format_fmpq(b) for b in au.box[1]]],
            "extracted": None if au.extracted is None else au.extracted.to_dict(),
            "seconds": {k: round(v, 3) for k, v in au.seconds.items()}} | ({} if r.rank_gamma_interval is None else {
                # rank_gamma is null beside a certified interval; the Monte Carlo value keeps its label
                "rank_gamma_interval": list(r.rank_gamma_interval), "montecarlo": r.montecarlo})


def _layer_residues(rows: list[list[flint.fmpq]], rng: random.Random) -> tuple[Any, int]:
    # the rows [h_{l-1}(x^i), 1] of every query, mod one random prime (another if it divides a denominator)
    import numpy as np

    from exactident.errors import InvariantViolation
    from exactident.linalg.modular import random_primes, residues

    for _ in range(8):
        p = random_primes(1, rng=rng)[0]
        try:
            A = residues([x for r in rows for x in r], p)
        except InvariantViolation:
            continue
        return A.reshape(len(rows), len(rows[0]) if rows else 0) if rows else np.zeros((0, 0), np.int64), p
    raise InvariantViolation("no usable prime for the hyperplane ranks in 8 tries")


def neuron_facts(state: Any, X: Sequence[Sequence[flint.fmpq]], seed: int | None = 0) -> list[dict[str, Any]]:
    """Per hidden neuron, the facts of docs/explain.md that need no kernel, with modular hyperplane ranks.

    ``hyperplane_rank`` is the rank mod a random word-size prime of ``[h_{l-1}(x^i), 1]`` over the
    strictly active queries: a lower bound on the rank over Q, so ``pinned: true`` (rank mod p
    ``= N_{l-1} + 1``) is certified.  The rank over Q is at most the number of rows and of nonzero
    columns: when the rank mod p reaches that bound it is exact (``hyperplane_rank_exact``); when
    that bound is below ``N_{l-1} + 1`` (fewer active queries, or inputs zero at all of them),
    ``pinned: false`` is certified by it (the rank shown may then be a lower bound); otherwise the
    exact rank over Q is computed.
    ``under_determined`` is True when the hyperplane is not pinned and no query is on the neuron's
    kink: a change of its incoming weights and bias that keeps ``z`` at its active queries moves no
    output on the queries along a straight line (strict signs elsewhere); None (not decided) otherwise.

    Returns
    -------
    list of dict
        ``{layer, neuron, n_active, n_tie, n_inactive, hyperplane_rank, hyperplane_full,
        hyperplane_rank_exact, pinned, dead, always_active, twins, under_determined,
        under_determined_by, why}``.
    """
    from exactident.io.rationals import format_fmpq
    from exactident.linalg.exact import rank
    from exactident.model.diagnostics import hyperplane_rows, neuron_activity, proportional_twins

    rng = random.Random(seed)
    twins: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for l, u, v, c in proportional_twins(state):
        twins.setdefault((l, u), []).append({"neuron": v, "ratio": format_fmpq(c)})
        twins.setdefault((l, v), []).append({"neuron": u, "ratio": format_fmpq(1 / c)})
    import numpy as np

    from exactident.linalg.modular import rank_mod_p

    layers: dict[int, tuple[Any, Any, int]] = {}
    out = []
    for act in neuron_activity(state):
        l, v = act.l, act.v
        full = (len(X[0]) if l == 1 and X else state.Z[l - 2].ncols() if l > 1 else 0) + 1
        if l not in layers:  # residues and nonzero pattern of [h_{l-1}, 1] at every query, once per layer
            if l == 1:
                every = [list(x) + [flint.fmpq(1)] for x in X]
            else:
                prev = state.Z[l - 2].table()
                every = [[max(z, flint.fmpq(0)) for z in r] + [flint.fmpq(1)] for r in prev]
            R, p = _layer_residues(every, rng)
            layers[l] = (R, np.array([[x != 0 for x in r] for r in every], dtype=bool).reshape(R.shape), p)
        R, nz, p = layers[l]
        Z = state.Z[l - 1]
        active = [i for i in range(Z.nrows()) if Z[i, v] > 0]
        if not active:
            r, exact = 0, True
        else:
            r = rank_mod_p(R[active], p)
            # rank over Q <= min(rows, nonzero columns): reached mod p, r is exact
            upper = min(len(active), int(nz[active].any(axis=0).sum()))
            exact = r == upper
            if r < full <= upper:  # pinned or not: only the exact rank decides
                r, exact = rank(flint.fmpq_mat(hyperplane_rows(state, X, l, v))), True
        line = r < full and act.n_tie == 0
        n = len(X)
        why = (f"dead on the queries (inactive at all {n})" if act.is_dead
               else "always active on the queries (affine there)" if act.is_always_active
               else f"active at {act.n_active} of {n} queries")
        why += (f"; [h_{l - 1}, 1] has rank {r}{'' if exact else '+'} < {full} over them: {full - r} direction(s) "
                "of its hyperplane unseen" if r < full else "; its hyperplane is pinned")
        out.append({"layer": l, "neuron": v, "n_active": act.n_active, "n_tie": act.n_tie,
                    "n_inactive": act.n_inactive, "hyperplane_rank": r, "hyperplane_full": full,
                    "hyperplane_rank_exact": exact, "pinned": r == full, "dead": act.is_dead,
                    "always_active": act.is_always_active, "twins": sorted(twins.get((l, v), []),
                                                                         key=lambda t: t["neuron"]),
                    "under_determined": True if line else None,
                    "under_determined_by": "unpinned-hyperplane line" if line else None, "why": why})
    return out


def audit(victim: Network, queries: Sequence[Sequence[flint.fmpq]], *,
          extracted: Network | None = None, name: str = "victim",
          box: tuple[Sequence[flint.fmpq], Sequence[flint.fmpq]] | None = None, seed: int | None = 0,
          explain_max_dim: int = DEFAULT_EXPLAIN_MAX_DIM, max_boxes: int = DEFAULT_MAX_BOXES,
          input_shape: Sequence[int] | None = None) -> Audit | GraphAudit:
    """Audit an extraction: the victim's identifiability from ``queries``, per neuron, and the extracted model's error.

    Parameters
    ----------
    victim : Network
        A plain ReLU MLP (also in the constrained form) gets the MLP's audit, any other network the
        layer graph's (module docstring).
    queries : n rows of N_0 fmpq
        The attack's query set (exact; flattened inputs for a layer graph).
    extracted : Network, optional
        The extracted model (:func:`~exactident.symmetry.equiv.equiv` with the victim).
    name : str
    box : (lo, hi), optional
        Where a query set may lie (default: the queries' bounding box).
    seed : int or None
        Seed of the random primes (speed only).
    explain_max_dim : int
        Compute the exact kernel of ``Gamma`` only up to this many parameters.
    max_boxes : int
        Sub-boxes per proof on the box (plain MLP only, as ``explain_max_dim``).
    input_shape : sequence of int, optional
        The framework's input shape, for a layer graph's report.

    Returns
    -------
    Audit or GraphAudit

    Raises
    ------
    CaseFormatError
        An empty query set, or queries of the wrong width.

    Examples
    --------
    ``3 relu(2x + 1)`` queried at ``x = 0, 1``: the biases trade (not identifiable).

    >>> net = Network((1, 1, 1), [[[2]], [[3]]], [[1], [0]])
    >>> a = audit(net, [[flint.fmpq(0)], [flint.fmpq(1)]])
    >>> a.report.verdict, a.neurons[0]["under_determined"], a.neurons[0]["always_active"]
    ('not-identifiable', True, True)
    """
    if not victim.is_plain():
        return _audit_graph(victim, queries, extracted=extracted, name=name, box=box, seed=seed,
                            input_shape=input_shape)
    from exactident.check import check
    from exactident.explain.design import data_box
    from exactident.explain.obstructions import obstructions
    from exactident.model.activation import activation_state
    from exactident.model.diagnostics import neuron_activity
    from exactident.model.fixed_edges import fixed_edges, free_parameters

    X = [list(x) for x in queries]
    case = Case(name=name, network=victim, X=X)  # validates the widths of the queries
    check_queries(name, X, victim.widths[0])
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    report = check(case, numeric=False, seed=seed, exact_ranks=victim.dim <= explain_max_dim)
    seconds["check"] = time.perf_counter() - t
    stage("audit: per-neuron facts", neurons=sum(victim.widths[1:-1]), queries=len(X))
    t = time.perf_counter()
    state = activation_state(victim, X)
    fixed = fixed_edges(victim)
    params = free_parameters(victim, fixed)
    if victim.dim <= explain_max_dim:
        from exactident.explain.core import Explanation, explain

        _, ex = explain(case, report=report, seed=seed)
        assert isinstance(ex, Explanation)  # the victim is a plain MLP
        neurons = ex.neurons
        for e in neurons:
            e["under_determined_by"] = "kernel" if e.get("under_determined") else None
        kernel = "exact"
    else:
        neurons = neuron_facts(state, X, seed)
        kernel = f"not computed (dim = {victim.dim} > {explain_max_dim})"
    seconds["neurons"] = time.perf_counter() - t
    stage("audit: obstructions on the box", max_boxes=max_boxes)
    t = time.perf_counter()
    the_box = (list(box[0]), list(box[1])) if box is not None else data_box(X, victim.widths[0])
    inside = all(the_box[0][j] <= x[j] <= the_box[1][j] for x in X for j in range(victim.widths[0]))
    candidates = [(a.l, a.v, 1 if a.is_always_active else -1) for a in neuron_activity(state)
                  if a.is_always_active or a.is_dead] if inside and X else []
    obs = obstructions(victim, fixed, params, the_box, candidates, max_boxes)
    found = [{"kind": o.kind, "neurons": [list(n) for n in o.neurons], "on_box": o.box,
              "directions": len(o.deltas), "text": o.text} for o in obs]
    seconds["obstructions"] = time.perf_counter() - t
    out = Audit(name, list(victim.widths), len(X), victim.dim, report, neurons, kernel, found, the_box,
                seconds=seconds)
    if extracted is not None:
        stage("audit: equiv with the extracted model")
        t = time.perf_counter()
        same_inputs = extracted.widths[0] == victim.widths[0] and extracted.widths[-1] == victim.widths[-1]
        out.extracted = equiv(victim, extracted, X if same_inputs else None)
        seconds["equiv"] = time.perf_counter() - t
    return out


def _unit_parameters(cn: Network, l: int, v: int) -> list[int]:
    """The free parameters entering unit ``(l, v)``: its incoming weights, its bias, its PReLU slope."""
    js = cn.W_index[l - 1][v]
    out = set(js[js >= 0].tolist())
    if cn.b_index[l - 1][v] >= 0:
        out.add(int(cn.b_index[l - 1][v]))
    if l < cn.L and cn.slope_index[l - 1][v] >= 0:
        out.add(int(cn.slope_index[l - 1][v]))
    return sorted(out)


def _audit_graph(cn: Network, queries: Sequence[Sequence[flint.fmpq]], *, extracted: Any, name: str,
                 box: tuple[Sequence[flint.fmpq], Sequence[flint.fmpq]] | None, seed: int | None,
                 input_shape: Sequence[int] | None) -> GraphAudit:
    """:func:`audit` of a victim that is not a plain ReLU MLP (module docstring)."""
    from exactident.check import check_constrained
    from exactident.explain.core import explain_constrained

    X = [[flint.fmpq(v) for v in x] for x in queries]
    check_queries(name, X, cn.widths[0])
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    report = check_constrained(cn, X, name=name, seed=seed, input_shape=input_shape)
    seconds["check"] = time.perf_counter() - t
    stage("audit: per-unit facts", units=sum(cn.layer_widths[1:-1]), queries=len(X))
    t = time.perf_counter()
    ex = explain_constrained(cn, X, report, seed=seed)
    classes = [p["class"] for p in ex.parameters]
    units = []
    for u in ex.units:
        own = [classes[j] for j in _unit_parameters(cn, u["layer"], u["unit"])]
        loose = any(c in _LOOSE for c in own)
        units.append({**u, "under_determined": True if loose else None if "unknown" in own else False})
    counted: dict[str, int] = {}
    for c in classes:
        counted[c] = counted.get(c, 0) + 1
    kernel = "exact" if ex.blocks else ("not needed (identifiable)" if report.verdict == "identifiable"
                                        else "not computed")
    seconds["units"] = time.perf_counter() - t
    the_box = None if box is None else (list(box[0]), list(box[1]))
    out = GraphAudit(name, cn.layer_widths, len(X), int(report.dim), report, units, ex.channels, counted, kernel,
                     the_box, seconds=seconds)
    if extracted is not None:
        stage("audit: equiv with the extracted model")
        t = time.perf_counter()
        out.extracted = equiv(cn, extracted, X)
        seconds["equiv"] = time.perf_counter() - t
    return out
