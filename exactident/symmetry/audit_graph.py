"""The extraction audit of a layer-graph victim (docs/symmetries.md, "Layer graphs").

The same questions as :mod:`exactident.symmetry.audit`, answered by the constrained engine only:

1. **identifiability from the queries**: :func:`exactident.check_constrained.check_constrained`'s
   verdict, reason and certificate (verdict first, as ``check`` runs a format-2 case; never Theorem 8);
2. **per hidden unit and channel**: :func:`exactident.explain.constrained.explain_constrained` (how
   many queries put each unit on each side, dead, silent, constant, the local rank of its incoming
   parameters, pinned), plus ``under_determined``: an incoming parameter of the unit (weight, bias or
   PReLU slope) is ``undetermined`` or ``not-identifiable`` in explain's classes (None when the
   classes are ``unknown``: no exact kernel was computed);
3. **what no query set in the box can pin**: *omitted*, with the reason in the output: the box
   obstructions of ``design`` (theta in ``S``, twins, neurons dead or always active on the whole box)
   are proved for the plain ReLU MLP and no box prover reads a layer graph;
4. **with the extracted model**: :func:`exactident.symmetry.equiv_graph.equiv_graph` with the
   queries as the sample.

Called by :mod:`exactident.symmetry.command` (``exactident audit``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import flint

from exactident.budget import stage
from exactident.io.report import Report
from exactident.model.constrained import ConstrainedNetwork
from exactident.symmetry.audit import audit_fields, check_queries

__all__ = ["OBSTRUCTIONS_OMITTED", "GraphAudit", "audit_graph"]

#: Why a layer graph's audit has no box obstructions (JSON ``omitted``).
OBSTRUCTIONS_OMITTED = ("the box obstructions (theta in S, twins, units dead or always active on the whole box) are "
                        "proved for plain ReLU MLPs only: no box prover reads a layer graph")

_LOOSE = ("undetermined", "not-identifiable")


@dataclass
class GraphAudit:
    """What :func:`audit_graph` found (JSON view: :meth:`to_dict`, ``exactident-audit/1`` plus ``layer_graph``)."""

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


def _unit_parameters(cn: ConstrainedNetwork, l: int, v: int) -> list[int]:
    """The free parameters entering unit ``(l, v)``: its incoming weights, its bias, its PReLU slope."""
    js = cn.W_index[l - 1][v]
    out = set(js[js >= 0].tolist())
    if cn.b_index[l - 1][v] >= 0:
        out.add(int(cn.b_index[l - 1][v]))
    if l < cn.L and cn.slope_index[l - 1][v] >= 0:
        out.add(int(cn.slope_index[l - 1][v]))
    return sorted(out)


def audit_graph(cn: ConstrainedNetwork, queries: Sequence[Sequence[flint.fmpq]], *, extracted: Any = None,
                name: str = "victim", box: tuple[Sequence[flint.fmpq], Sequence[flint.fmpq]] | None = None,
                seed: int | None = 0, input_shape: Sequence[int] | None = None) -> GraphAudit:
    """Audit an extraction from a layer-graph victim (module docstring).

    Parameters
    ----------
    cn : ConstrainedNetwork
        The victim, compiled.
    queries : n rows of N_0 fmpq
        The attack's query set (flattened inputs, exact).
    extracted : ConstrainedNetwork or Network, optional
        The extracted model (:func:`exactident.symmetry.equiv_graph.equiv_graph`).
    box : (lo, hi), optional
        Reported as given (no obstruction is searched on a layer graph).
    seed : int or None
        Seed of the random primes (speed only).
    input_shape : sequence of int, optional
        The framework's input shape, for the report.

    Raises
    ------
    CaseFormatError
        An empty query set, or queries of the wrong width.

    Examples
    --------
    ``3 leaky(2x - 1)`` (slope 1/10) queried at ``x = 0, 1, 2``: identifiable, nothing loose.

    >>> from exactident.model.network import Network
    >>> from exactident.model.constrained import from_network
    >>> cn = from_network(Network((1, 1, 1), [[[2]], [[3]]], [[-1], [0]]))
    >>> cn.negative_slope[0][0] = flint.fmpq(1, 10); cn.features = ("leaky ReLU",)
    >>> a = audit_graph(cn, [[flint.fmpq(0)], [flint.fmpq(1)], [flint.fmpq(2)]])
    >>> a.report.verdict, a.units[0]["kind"], a.units[0]["under_determined"]
    ('identifiable', 'leaky', False)
    """
    from exactident.check_constrained import check_constrained
    from exactident.explain.constrained import explain_constrained

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
        from exactident.symmetry.equiv_graph import equiv_graph

        stage("audit: equiv with the extracted model")
        t = time.perf_counter()
        out.extracted = equiv_graph(cn, extracted, X)
        seconds["equiv"] = time.perf_counter() - t
    return out
