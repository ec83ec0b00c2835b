"""``explain`` for a constrained network (convolution, pooling, skips, leaky ReLU, PReLU): per free parameter,
per unit and per channel, what the sample determines (docs/explain.md, "Constrained networks").

The same engine as ``check`` (nothing recomputed another way): the exact forward pass and ties
(:func:`exactident.model.gamma_free.free_state`), ``Gamma_free(s)`` over Q
(:func:`exactident.model.gamma_free.gamma_free_exact`), the rescaling symmetries ``S_H``
(:func:`exactident.model.symmetry.rescaling_symmetry`) and the certificates of the report.

**The chart.**  ``S_H`` is in ``ker Gamma_free(s)`` for every tie resolution, so a parameter moved by
a rescaling is never pinned by any sample; as the plain engine fixes one outgoing edge per neuron,
a *gauge* set ``F`` of ``dim S_H`` parameters is held at its values: greedily, output layer first,
weights before biases, largest ``|theta_j|`` first, ``j`` joins ``F`` when the rows ``F`` of a basis of
``S_H`` gain rank (exact over Q).  Then ``S_H`` meets the chart ``{delta_F = 0}`` only in 0 and
``ker Gamma_free(s) = S_H (+) K_F(s)``, ``K_F(s) = ker Gamma_free(s) ∩ {delta_F = 0}`` of dimension
``dim_free - rank Gamma_free(s)``.  For a plain MLP ``F`` is the plain engine's fixed edges.

**Classes** of a free parameter ``theta_j`` (report field ``parameters``):

- ``gauge``: in ``F`` (known only up to the rescalings);
- ``identifiable`` (``by: free-rank``): the verdict is identifiable;
- ``not-identifiable`` (``by``: the certificate's kind): the verified certificate's direction
  (a dead-unit or constant-unit line, or an entering-submersion direction), taken into the chart
  by subtracting its part in ``S_H``, moves ``theta_j``: arbitrarily close to ``theta`` a
  parameter of the chart with the outputs of ``theta`` on ``X``, another function and another ``theta_j``;
- ``first-order-determined``: no vector of ``K_F(s)`` moves it, for every tie resolution ``s``;
- ``undetermined``: a vector of some ``K_F(s)`` moves it (a first-order statement: the sample does
  not pin it modulo ``S_H``; a symmetry the family has beyond ``S_H`` could keep the function);
- ``unknown``: the kernels were not computed (too large, or too many tie resolutions).

Called by :func:`exactident.explain.core.explain` for a case that is not a plain ReLU MLP.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import product
from typing import Any

import flint
import numpy as np

from exactident.budget import stage
from exactident.explain.kernel import integer_kernel, structured_basis
from exactident.explain.neurons import channel_entries, unit_entries
from exactident.io.report import Report
from exactident.linalg import exact
from exactident.model.constrained import ConstrainedNetwork
from exactident.model.gamma_free import (
    free_data_denominator,
    free_state,
    gamma_free_exact,
    persistent_ties,
    resolve_ties,
)
from exactident.model.symmetry import Symmetry, rescaling_symmetry

__all__ = [
    "MAX_CONSTRAINED_KERNEL_ENTRIES",
    "MAX_CONSTRAINED_RESOLUTIONS",
    "ConstrainedExplanation",
    "FreeBlock",
    "explain_constrained",
    "gauge_parameters",
    "plain_rules_line",
]

#: Exact kernels of ``Gamma_free`` are computed up to this many entries (rows times parameters).
MAX_CONSTRAINED_KERNEL_ENTRIES = 200_000
#: ... and for at most this many tie resolutions.
MAX_CONSTRAINED_RESOLUTIONS = 64


@dataclass
class FreeBlock:
    """An exact basis of ``K_F(s) = ker Gamma_free(s) ∩ {delta_F = 0}`` for one tie resolution.

    Attributes
    ----------
    active : list of bool or None
        The side of each tie (the report's ``certificate.free_rank.ties`` order); None without ties.
    rank : int
        ``rank Gamma_free(s)`` over Q (exact: a minor nonsingular mod p and ``Gamma K = 0`` over Q).
    basis : list of list of int
        ``dim_free - rank`` integer vectors over ``theta`` (zero on the gauge).
    lines : list of bool
        Per vector: the outputs on ``X`` are exactly constant along ``theta + t delta`` for small ``|t|``
        (one-layer lemma: no tie but persistent ones, the vector moves one layer's weights and biases,
        or one layer's slopes, only).
    """

    active: list[bool] | None
    rank: int
    basis: list[list[int]]
    lines: list[bool] = field(default_factory=list)


@dataclass
class ConstrainedExplanation:
    """What :func:`explain_constrained` found; the counterpart of :class:`exactident.explain.core.Explanation`.

    Attributes
    ----------
    names : list of str
        ``param_names`` (``theta_j`` when the network has none).
    parameters, units, channels : list of dict
        Report fields (docs/cli.md).
    blocks : list of FreeBlock
    gauge : list of int
        The gauge set ``F``.
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
        classes = ("not-identifiable", "undetermined", "first-order-determined", "unknown", "identifiable", "gauge")
        counts = {c: n for c in classes if (n := self.count(c))}
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


def gauge_parameters(cn: ConstrainedNetwork, sym: Symmetry) -> list[int]:
    """The gauge set ``F`` (module docstring): ``dim S_H`` parameters whose rows of the ``S_H`` basis are independent.

    Examples
    --------
    ``3 relu(2x - 1)`` (parameters ``W_1, b_1, W_2, b_2``): the output weight is the gauge, as the plain
    engine's fixed edge.

    >>> from exactident.model.constrained import from_network
    >>> from exactident.model.network import Network
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])], [[-1], [0]])
    >>> cn = from_network(net)
    >>> gauge_parameters(cn, rescaling_symmetry(cn))
    [2]
    """
    m = len(sym.basis)
    if not m:
        return []
    layer, kind = _occurrence_layers(cn)
    theta = cn.theta()
    order = sorted(range(cn.n_params), key=lambda j: (-layer[j], kind[j], -abs(theta[j]), j))
    rows: list[list[flint.fmpq]] = []
    out: list[int] = []
    zero = flint.fmpq(0)
    for j in order:
        row = [col.get(j, zero) for col in sym.basis]
        if all(v == zero for v in row):
            continue
        trial = rows + [row]
        if exact.rank(flint.fmpq_mat(trial)) == len(trial):
            rows.append(row)
            out.append(j)
            if len(out) == m:
                break
    return sorted(out)


def _occurrence_layers(cn: ConstrainedNetwork) -> tuple[list[int], list[int]]:
    """Per parameter: the highest layer it occurs in, and 0 weight / 1 bias / 2 slope (the gauge order)."""
    layer, kind = [0] * cn.n_params, [2] * cn.n_params
    for l in range(1, cn.L + 1):
        for j in cn.W_index[l - 1][cn.W_index[l - 1] >= 0]:
            layer[j], kind[j] = max(layer[j], l), min(kind[j], 0)
        for j in cn.b_index[l - 1][cn.b_index[l - 1] >= 0]:
            layer[j], kind[j] = max(layer[j], l), min(kind[j], 1)
        if l < cn.L:
            for j in cn.slope_index[l - 1][cn.slope_index[l - 1] >= 0]:
                layer[j] = max(layer[j], l)
    return layer, kind


def _one_layer(cn: ConstrainedNetwork) -> list[tuple[str, int]]:
    """Per parameter: ``("wb", l)`` when every occurrence is a weight or bias of layer ``l``, ``("a", l)`` for slopes
    of layer ``l`` only, ``("", -1)`` otherwise."""
    seen: list[set[tuple[str, int]]] = [set() for _ in range(cn.n_params)]
    for l in range(1, cn.L + 1):
        for I in (cn.W_index[l - 1], cn.b_index[l - 1]):
            for j in I[I >= 0]:
                seen[j].add(("wb", l))
        if l < cn.L:
            for j in cn.slope_index[l - 1][cn.slope_index[l - 1] >= 0]:
                seen[j].add(("a", l))
    return [next(iter(s)) if len(s) == 1 else ("", -1) for s in seen]


def _chart_kernel(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                  gauge: Sequence[int], names: Sequence[str], rng: random.Random) -> tuple[int, list[list[int]]]:
    """``(rank Gamma_free(s), integer basis of K_F(s))`` exactly (columns outside the gauge)."""
    cols = [j for j in range(cn.n_params) if j not in set(gauge)]
    G = gamma_free_exact(cn, X, pattern)
    sub = flint.fmpq_mat(G.nrows(), len(cols), [G[i, j] for i in range(G.nrows()) for j in cols])
    Gi = exact.to_integer_rows(sub) if sub.nrows() else flint.fmpz_mat(0, len(cols))
    rows = Gi.tolist()

    def mod_p(p: int) -> np.ndarray:
        return np.array([[int(v) % p for v in row] for row in rows], dtype=np.int64).reshape(len(rows), len(cols))

    avoid = free_data_denominator(cn, X)
    rank, K, _ = integer_kernel(Gi, mod_p, avoid=avoid, rng=rng)
    groups: dict[str, list[int]] = {}
    for c, j in enumerate(cols):  # readable: directions of one named tensor first
        groups.setdefault(names[j].split("[")[0], []).append(c)
    if K and rows:
        K = structured_basis(Gi, K, list(groups.values()), avoid=avoid, rng=rng)
    basis = []
    for vec in K:
        full = [0] * cn.n_params
        for c, j in enumerate(cols):
            full[j] = int(vec[c])
        basis.append(full)
    return rank, basis


def _certificate_direction(report: Report, sym: Symmetry, gauge: Sequence[int], k: int) -> tuple[str, list] | None:
    """The verified certificate's direction in theta, taken into the chart (:func:`_into_chart`); ``(kind, delta)``
    or None (a submersion certificate has no direction)."""
    cert = report.certificate or {}
    zero = flint.fmpq(0)
    for key in ("dead_units", "constant_units", "entering_submersion"):
        if key not in cert:
            continue
        delta = [zero] * k
        if key == "dead_units":
            delta[int(cert[key]["parameter"])] = flint.fmpq(-1)
        else:
            for j, v in cert[key]["delta"]:
                num, _, den = str(v).partition("/")
                delta[int(j)] = flint.fmpq(int(num), int(den or 1))
        return key.replace("_", "-"), _into_chart(delta, sym, gauge) if gauge else delta
    return None


def _into_chart(delta: list[flint.fmpq], sym: Symmetry, gauge: Sequence[int]) -> list[flint.fmpq]:
    """``delta - sigma`` with ``sigma`` in ``S_H`` and ``sigma_F = delta_F``: the tangent at ``t = 0`` of
    ``g(t) . theta(t)``, ``theta(t)`` the certificate's curve and ``g(t)`` in ``H`` the rescaling that keeps the
    gauge at its values (it exists near ``t = 0`` as ``S_H`` maps onto the gauge coordinates).  ``H`` keeps the
    function, so the new curve keeps the outputs on ``X`` and realises the certificate's other functions."""
    zero = flint.fmpq(0)
    m = len(sym.basis)
    B_F = flint.fmpq_mat(m, m, [col.get(j, zero) for j in gauge for col in sym.basis])
    c = B_F.solve(flint.fmpq_mat(m, 1, [delta[j] for j in gauge]))
    out = list(delta)
    for a, col in enumerate(sym.basis):
        for j, v in col.items():
            out[j] -= c[a, 0] * v
    return out


def _classify(names, gauge, report: Report, blocks: Sequence[FreeBlock], covers_all: bool,
              why_none: str, cert: tuple[str, list] | None) -> list[dict[str, Any]]:
    out = []
    zero = flint.fmpq(0)
    for j, name in enumerate(names):
        e: dict[str, Any] = {"name": name, "index": j}
        moved = next(((b, d) for b, blk in enumerate(blocks) for d, vec in enumerate(blk.basis) if vec[j]), None)
        line = next(((b, d) for b, blk in enumerate(blocks) for d, vec in enumerate(blk.basis)
                     if vec[j] and blk.lines[d]), None)
        if j in gauge:
            e.update({"class": "gauge", "why": "held at its value to remove the rescalings S_H (the chart)"})
        elif cert is not None and cert[1][j] != zero:
            e.update({"class": "not-identifiable", "by": cert[0], "witness": "certificate"})
        elif report.verdict == "identifiable":
            e.update({"class": "identifiable", "by": "free-rank"})
        elif moved is not None:
            w = line or moved
            e.update({"class": "undetermined", "witness": list(w), **({"line": True} if line else {})})
        elif blocks and covers_all:
            e["class"] = "first-order-determined"
        else:
            e.update({"class": "unknown", "why": why_none if not blocks else
                      "the tie resolutions were not all enumerated, so no kernel covers every piece near theta"})
        out.append(e)
    return out


def explain_constrained(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]], report: Report, *,
                        seed: int | None = 0) -> ConstrainedExplanation:
    """Explain ``report`` (``check``'s report on ``cn`` and ``X``): classes, units, channels, kernel directions.

    Parameters
    ----------
    cn : ConstrainedNetwork
    X : n rows of N_0 fmpq
    report : Report
        The constrained engine's report on this case (its verdict and certificate are used).
    seed : int or None
        Seed of the primes (speed only, never the result).

    Returns
    -------
    ConstrainedExplanation

    Examples
    --------
    ``2 leaky(x - 5)`` (slope 1/10, no output bias) seen at ``x = 0, 1``: the unit is on its slope side at
    both samples, yet it is not dead and its weight and bias are identifiable (the output weight is the gauge).

    >>> from exactident.check_constrained import check_constrained
    >>> from exactident.model.constrained import ConstrainedNetwork
    >>> cn = ConstrainedNetwork((1, 1, 1), [flint.fmpq_mat([[1]]), flint.fmpq_mat([[2]])],
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
            layer_of = _one_layer(cn)
            smooth = not free_ties
            for sides in product([True, False], repeat=len(free_ties)):
                active = [True] * len(state.ties)
                for t, side in zip(free_ties, sides):
                    active[t] = side
                stage("explain: exact kernel of Gamma_free", resolutions=2 ** len(free_ties), cols=cn.n_params)
                rank, basis = _chart_kernel(cn, X, resolve_ties(state, active), gauge, names, rng)
                lines = [smooth and len({layer_of[j] for j, v in enumerate(vec) if v}) == 1
                         and layer_of[next(j for j, v in enumerate(vec) if v)][1] > 0 for vec in basis]
                blocks.append(FreeBlock(active if state.ties else None, rank, basis, lines))
    cert = _certificate_direction(report, sym, gauge, cn.n_params) if report.verdict == "not-identifiable" else None
    stage("explain: parameter classes", parameters=cn.n_params)
    parameters = _classify(names, gauge, report, blocks, covers_all, why_none, cert)
    stage("explain: units and channels", units=sum(cn.widths[1:-1]))
    units = unit_entries(cn, X, state)
    channels = channel_entries(cn, X, state, units, parameters)
    ex = ConstrainedExplanation(names, parameters, units, channels, blocks, gauge, report=report)
    ex.lines = _lines(report, ex, sym) + [plain_rules_line(cn)]
    ex.seconds = time.perf_counter() - start
    return ex


def plain_rules_line(cn: ConstrainedNetwork) -> str:
    """The one line saying which hypothesis of the plain MLP's rules fails on ``cn`` (so they are not applied).

    ``C_N`` (Theorem 8), ``rank A`` and the per-neuron twins and couplings read off ``ker Gamma`` assume a
    layered ReLU MLP with every weight and bias a free parameter; ``cn.features`` says what this network has
    instead.

    Examples
    --------
    >>> from exactident.model.constrained import ConstrainedNetwork
    >>> cn = ConstrainedNetwork((1, 1, 1), [flint.fmpq_mat([[1]]), flint.fmpq_mat([[2]])],
    ...     [[flint.fmpq(-5)], [flint.fmpq(0)]], [np.array([[0]]), np.array([[2]])], [np.array([1]), np.array([-1])],
    ...     [[flint.fmpq(1, 10)]], [np.array([-1])], 3, ("leaky ReLU", "fixed weights"))
    >>> plain_rules_line(cn)
    'not applied: C_N (Theorem 8), rank A and per-neuron twins and couplings need a layered ReLU MLP with every \
weight and bias free; this network has leaky ReLU, fixed weights'
    """
    why = ", ".join(cn.features) if cn.features else "weights that are not all free and distinct"
    return ("not applied: C_N (Theorem 8), rank A and per-neuron twins and couplings need a layered ReLU MLP "
            f"with every weight and bias free; this network has {why}")


def _lines(report: Report, ex: ConstrainedExplanation, sym: Symmetry) -> list[str]:
    """The readable lines of the report field ``explanation`` (prose, not verified)."""
    out = [f"{sym.n_params} free parameters, {sym.symmetry_dim} rescaling(s) kept by the family (S_H), "
           f"dim_free = {sym.dim_free}; gauge (held to remove S_H): "
           + (", ".join(ex.names[j] for j in ex.gauge[:8]) + (" ..." if len(ex.gauge) > 8 else "")
              if ex.gauge else "none")]
    if report.verdict == "identifiable":
        out.append(f"rank Gamma_free = dim_free on every tie resolution: all {sym.dim_free} parameters outside the "
                   "gauge are identifiable (up to S_H)")
    if len(ex.blocks) == 1:
        blk = ex.blocks[0]
        moved = sum(1 for j in range(sym.n_params) if any(vec[j] for vec in blk.basis))
        out.append(f"ker Gamma_free in the chart (K_F) has dimension {len(blk.basis)} (rank {blk.rank}, dim_free = "
                   f"{sym.dim_free}; exact basis, Gamma_free K = 0 checked over Q) and moves {moved} parameters"
                   + (f"; {sum(blk.lines)} direction(s) keep the outputs on X exactly along a straight line"
                      if any(blk.lines) else ""))
    elif ex.blocks:
        dims = sorted({len(b.basis) for b in ex.blocks})
        moved = sum(1 for j in range(sym.n_params) if any(vec[j] for b in ex.blocks for vec in b.basis))
        out.append(f"ker Gamma_free in the chart (K_F(s)) on each of the {len(ex.blocks)} tie resolutions s: dimension "
                   f"{'/'.join(map(str, dims))} (exact bases, Gamma_free K = 0 checked over Q); together they move "
                   f"{moved} parameters")
    if report.verdict != "identifiable":
        out.append(f"parameters: {ex.count('not-identifiable')} not identifiable (certificate), "
                   f"{ex.count('undetermined')} undetermined (first order), {ex.count('first-order-determined')} "
                   f"determined to first order, {ex.count('unknown')} unknown, {ex.count('gauge')} gauge")
    dead = [u["name"] for u in ex.units if u["dead"]]
    if dead:
        out.append(f"dead units ({len(dead)}): " + ", ".join(dead[:8]) + (" ..." if len(dead) > 8 else ""))
    const = [u["name"] for u in ex.units if u["constant"] and not u["dead"]]
    if const:
        out.append(f"constant units ({len(const)}): " + ", ".join(const[:8]) + (" ..." if len(const) > 8 else ""))
    for c in ex.channels:
        out.append(f"channel {c['name']}: {c['n_units']} positions, {c['n_dead']} dead; local rank {c['local_rank']} "
                   f"of {c['local_full']} over all positions (best single position {c['best_position_rank']}); "
                   + ", ".join(f"{n} {k}" for k, n in c["classes"].items()))
    return out
