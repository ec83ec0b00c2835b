"""Samples on activation boundaries: tie resolutions and the boundary rules of docs/boundary.md.

When a sample has a pre-activation exactly zero (a *tie*), theta lies on the
boundary ``Delta_X`` where the paper's Theorems 8 and 9 are silent.  Near
theta the activation operator is ``alpha(s)`` for some *tie resolution* ``s``
(each tie active or inactive), and on the piece of ``s`` the outputs are
``F_s(tau) = alpha(s) psi^theta(tau)`` with Jacobian ``Gamma(s)`` at
``tau_theta`` (:func:`exactident.model.gamma.gamma_exact` with the resolved pattern;
forward values do not depend on ``s`` because ``relu(0) = 0``).

Decisions made here (the reasoning is in ``docs/boundary.md``):

- **Invisible ties are dropped.**  A tie ``(i, l, v)`` is invisible when some
  layer ``m`` in ``l+1..L-1`` has every neuron *strictly* inactive at ``x^i``:
  every path through ``v`` then carries a zero factor, so ``alpha`` (and
  ``Gamma``) is the same on both sides, in every neighbourhood of theta.  If
  every tie is invisible, theta is not on ``Delta_X`` after all and Theorems
  8/9 apply directly.
- **No resolution is excluded.**  Proving a pattern unreachable needs more
  than first order, so the sufficient check (``identifiable``) runs over
  every resolution of the visible ties.  Reachability is only *proved*
  (first-order strict entering direction, :mod:`exactident.boundary.entering`) and is
  otherwise ``"unknown"``.
- **Grouping is for reachability only.**  Ties whose pre-activations depend on
  disjoint parameter sets (over-approximated: a layer-``l`` tie depends on its
  own neuron and every neuron of layers ``< l``) have independent first-order
  systems; each group's LP is solved once per sub-resolution and the group
  directions add up.  Ranks of ``Gamma(s)`` do not factor, so every
  resolution's rank is computed.
- **Cap.**  Beyond ``max_resolutions`` resolutions nothing is enumerated and
  the verdict is ``inconclusive`` with the count and the option to raise.
- **not-identifiable** needs an exact certificate: a resolution ``s`` with
  ``R_Gamma(s) == R_A(s) < dim`` and ``delta = K c`` in ``ker Gamma(s)``
  entering the piece of ``s`` strictly (:mod:`exactident.verify.certificate`), or,
  when no direction enters at first order, a straight-line certificate
  (:mod:`exactident.boundary.line`): a kernel direction along which the outputs on
  ``X`` are exactly constant and ``f`` changes at a probe point.

Called by :func:`exactident.check.check`; calls :mod:`exactident.model.gamma`,
:mod:`exactident.boundary.entering`, :mod:`exactident.boundary.line`, :mod:`exactident.verify.certificate`.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import product
from typing import Any

import flint

from exactident.boundary.entering import TieGradients, find_strict_direction, primitive_integer, relaxed_directions
from exactident.boundary.line import find_probe, is_constant_line, line_outputs
from exactident.boundary.nonequivalence import find_witness
from exactident.errors import InvariantViolation
from exactident.io.rationals import format_fmpq
from exactident.linalg import exact
from exactident.model.activation import ActivationState, Tie, resolve_ties
from exactident.model.conditions import (
    IDENTIFIABLE,
    INCONCLUSIVE,
    NOT_IDENTIFIABLE,
    holds_cn,
    holds_cs,
    reason_from_ranks,
    verdict_from_ranks,
)
from exactident.model.fixed_edges import FixedEdges, free_parameters
from exactident.model.gamma import gamma_exact
from exactident.model.network import Network

__all__ = [
    "DEFAULT_MAX_RESOLUTIONS",
    "BoundaryOutcome",
    "analyse_boundary",
    "invisible_ties",
    "tie_dict",
    "tie_groups",
]

DEFAULT_MAX_RESOLUTIONS = 4096
#: Resolutions (failing C_S) whose kernels are searched for a straight-line certificate.
MAX_LINE_RESOLUTIONS = 64
#: Kernel directions tried per resolution.
MAX_LINE_CANDIDATES = 24


@dataclass
class BoundaryOutcome:
    """What :func:`analyse_boundary` decides; ``check`` copies it into the report.

    Attributes
    ----------
    verdict, reason : str
    rank_gamma, rank_a : int or None
        At the resolution of smallest ``rank_gamma`` (docs/cli.md); ``None`` when
        nothing was enumerated.
    patterns : list of dict or None
        ``{ties, rank_gamma, rank_a, cs, cn, reachable}`` per resolution (docs/cli.md).
    certificate : dict or None
        ``{"boundary": ...}`` (the ties and certified ranks of every resolution; without
        ``resolutions`` past the cap), plus ``"entering"`` or ``"line"`` for
        ``not-identifiable`` (docs/boundary.md, "Certificates").
    extra : dict
        ``summary``: readable lines for the human table.
    """

    verdict: str
    reason: str
    rank_gamma: int | None = None
    rank_a: int | None = None
    patterns: list[dict[str, Any]] | None = None
    certificate: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def tie_dict(tie: Tie, active: bool | None = None) -> dict[str, Any]:
    """A tie as a report entry ``{"sample", "layer", "neuron"[, "active"]}``."""
    out: dict[str, Any] = {"sample": tie.i, "layer": tie.l, "neuron": tie.v}
    if active is not None:
        out["active"] = bool(active)
    return out


def invisible_ties(net: Network, state: ActivationState) -> list[Tie]:
    """Ties whose side cannot change ``alpha``: a later hidden layer is all strictly inactive.

    Parameters
    ----------
    net : Network
    state : ActivationState

    Returns
    -------
    list of Tie
        Tie ``(i, l, v)`` such that for some ``m`` in ``l+1..L-1`` every
        neuron of layer ``m`` has ``z_m(x^i) < 0``.  Every path through
        ``v`` at ``x^i`` then has a zero activation factor that stays zero
        near theta, so both sides give the same ``alpha`` (paper §2.2).

    Examples
    --------
    Widths ``[1, 1, 1, 1]``: the first hidden neuron is tied at ``x = 0`` and
    the second is strictly inactive there (bias ``-1``), so the tie is invisible.

    >>> from exactident.model.activation import activation_state
    >>> q = flint.fmpq_mat
    >>> net = Network((1, 1, 1, 1), [q([[1]]), q([[1]]), q([[1]])],
    ...               [[flint.fmpq(0)], [flint.fmpq(-1)], [flint.fmpq(0)]])
    >>> [str(t) for t in invisible_ties(net, activation_state(net, [[0]]))]
    ['x^0@(1,0)']
    """
    zero = flint.fmpq(0)
    out = []
    for t in state.ties:
        for m in range(t.l + 1, net.L):
            if all(z < zero for z in state.Z[m - 1].table()[t.i]):
                out.append(t)
                break
    return out


def tie_groups(ties: Sequence[Tie]) -> list[list[int]]:
    """Partition tie indices into groups with disjoint first-order supports.

    The parameters a layer-``l`` tie's pre-activation can depend on are
    over-approximated by its own neuron ``(l, v)`` (row ``v`` of ``W_l``,
    ``b_l[v]``) and every neuron of layers ``< l``; ties sharing a neuron in
    that set share a group.  Ties of different groups have ``g_t`` supported
    on disjoint parameter sets, and ``g_t(s)`` depends only on the resolution
    of upstream ties in its own group.

    Examples
    --------
    >>> tie_groups([Tie(0, 1, 0), Tie(1, 1, 0), Tie(0, 1, 1)])
    [[0, 1], [2]]
    >>> tie_groups([Tie(0, 1, 0), Tie(0, 1, 1), Tie(0, 2, 0)])
    [[0, 1, 2]]
    """
    parent = list(range(len(ties)))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    owner: dict[tuple[int, int], int] = {}
    deep_layers: list[tuple[int, int]] = []  # (l, index) for l >= 2: they own all of layers < l
    for k, t in enumerate(ties):
        key = (t.l, t.v)
        if key in owner:
            parent[find(k)] = find(owner[key])
        else:
            owner[key] = k
        if t.l >= 2:
            deep_layers.append((t.l, k))
    for l, k in deep_layers:
        for (lo, _), j in owner.items():
            if lo < l:
                parent[find(j)] = find(k)
    groups: dict[int, list[int]] = {}
    for k in range(len(ties)):
        groups.setdefault(find(k), []).append(k)
    return sorted(groups.values())


def _support_columns(net: Network, fixed: FixedEdges, ties: Sequence[Tie]) -> list[int]:
    """Columns of ``tau`` that the group's ``g_t`` can touch (see :func:`tie_groups`)."""
    top = max(t.l for t in ties)
    own = {(t.l, t.v) for t in ties}
    return [c for c, p in enumerate(free_parameters(net, fixed))
            if p.l < top or (p.l, p.i) in own]


def _progress(iterable: Iterable, total: int) -> Iterable:
    if total < 64 or not sys.stderr.isatty():
        return iterable
    try:
        from tqdm import tqdm
    except ImportError:
        return iterable
    return tqdm(iterable, total=total, desc="tie resolutions", file=sys.stderr, leave=False)


def _fmt_res(ties: Sequence[Tie], active: Sequence[bool], limit: int = 6) -> str:
    text = ", ".join(f"{t} {'active' if a else 'inactive'}" for t, a in list(zip(ties, active))[:limit])
    return text + (f", ... ({len(ties)} ties)" if len(ties) > limit else "")


def _line_candidates(gamma: flint.fmpq_mat, signed: list) -> list[list[flint.fmpq]]:
    """Kernel directions of ``Gamma(s)`` worth a straight-line check: basis vectors, both signs,
    and float LP points of ``{c : sign_t g_t K c >= 0, c_j = +-1}`` (rationalised)."""
    K = exact.nullspace(gamma)
    k = K.ncols()
    cols = [[K[r, j] for r in range(K.nrows())] for j in range(k)]
    out = [c for col in cols for c in (col, [-v for v in col])]
    rows = [(flint.fmpq_mat([row]) * K).entries() for row in signed]
    for c in relaxed_directions(rows, k):
        out.append((K * flint.fmpq_mat(k, 1, c)).entries())
    return out[:MAX_LINE_CANDIDATES]


def _find_line(net: Network, X, fixed: FixedEdges, pool: list) -> dict[str, Any] | None:
    params = free_parameters(net, fixed)
    seen: set[tuple] = set()
    for gamma, signed in pool:
        for delta in _line_candidates(gamma, signed):
            delta = primitive_integer(delta)
            key = tuple(delta)
            if key in seen or not any(delta):
                continue
            seen.add(key)
            dW = [flint.fmpq_mat(net.widths[l], net.widths[l - 1]) for l in range(1, net.L + 1)]
            db = [[flint.fmpq(0)] * net.widths[l] for l in range(1, net.L + 1)]
            for p, d in zip(params, delta):
                if p.j is not None:
                    dW[p.l - 1][p.i, p.j] = d
                else:
                    db[p.l - 1][p.i] = d
            if not all(is_constant_line(line_outputs(net, dW, db, x)) for x in X):
                continue
            probe = find_probe(net, dW, db, X)
            witness = find_witness(net, dW, db, first_order=False)
            if probe is not None or witness is not None:  # either shows non-equivalence (docs/boundary.md)
                line: dict[str, Any] = {"delta": {p.name: format_fmpq(d) for p, d in zip(params, delta)}}
                if probe is not None:
                    line["probe"] = [format_fmpq(v) for v in probe]
                if witness is not None:
                    line["nonequivalence"] = witness
                return {"line": line}
    return None


def analyse_boundary(net: Network, X: Sequence[Sequence[flint.fmpq]], state: ActivationState,
                     fixed: FixedEdges, max_resolutions: int = DEFAULT_MAX_RESOLUTIONS,
                     all_ranks: bool = False) -> BoundaryOutcome:
    """Decide a boundary case (theta has ties, theta not in ``S``) by the rules of docs/boundary.md.

    Parameters
    ----------
    net : Network
    X : n rows of N_0 fmpq
    state : ActivationState
        With ``state.ties`` nonempty.
    fixed : FixedEdges
    max_resolutions : int
        Enumerate at most this many tie resolutions.
    all_ranks : bool
        Compute ``rank_a(s)`` also where ``C_S`` holds (it is not needed there).

    Returns
    -------
    BoundaryOutcome
        ``identifiable`` when ``C_S`` holds for every resolution of the
        visible ties; ``not-identifiable`` with an exact certificate;
        otherwise ``inconclusive`` with the reason.

    Raises
    ------
    InvariantViolation
        If a certificate fails its own exact re-check (a bug).

    Examples
    --------
    The hand-checked example of docs/theory.md: ``f = 3 relu(2x + 1)``, samples ``0, 1, -1/2``.

    >>> from exactident.model.activation import activation_state
    >>> from exactident.model.fixed_edges import fixed_edges
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])],
    ...               [[flint.fmpq(1)], [flint.fmpq(0)]])
    >>> X = [[flint.fmpq(0)], [flint.fmpq(1)], [flint.fmpq(-1, 2)]]
    >>> out = analyse_boundary(net, X, activation_state(net, X), fixed_edges(net))
    >>> out.verdict, out.certificate["entering"]["delta"]
    ('not-identifiable', {'W_1[0,0]': '0', 'b_1[0]': '1', 'b_2[0]': '-3'})
    """
    from exactident.boundary.certificate import BoundaryPartBuilder, build_entering_certificate
    from exactident.ranks.certify import certify_ranks

    rng = random.Random(0)  # primes affect speed only, never the ranks

    dim = net.dim
    hidden = set(invisible_ties(net, state))
    ties = [t for t in state.ties if t not in hidden]
    n_samples_tied = len({t.i for t in state.ties})
    summary = [f"{len(state.ties)} tie(s) on {n_samples_tied} sample(s)"
               + (f", {len(hidden)} invisible (a later layer is all strictly inactive)" if hidden else "")]

    builder = BoundaryPartBuilder(net, fixed, state.Z, ties, sorted(hidden))
    if not ties:
        ranks = certify_ranks(net, X, state.pattern, fixed, need_rank_a=True, rng=rng)
        builder.add([], ranks.certificate, None)  # the one alpha of every resolution: Theorems 8/9 directly
        rg, ra = ranks.rank_gamma, ranks.rank_a
        verdict = verdict_from_ranks(rg, ra, dim, False)
        reason = ("theta is not on Delta_X after all: every tie resolution gives the same alpha "
                  "(all ties invisible), so the theorems apply directly; "
                  + reason_from_ranks(rg, ra, dim, verdict))
        return BoundaryOutcome(verdict, reason, rg, ra, patterns=[], certificate={"boundary": builder.part()},
                               extra={"summary": summary})

    n_res = 2 ** len(ties)
    if n_res > max_resolutions:
        reason = (f"{len(ties)} visible ties give {n_res} tie resolutions, more than the limit "
                  f"{max_resolutions}; nothing was enumerated (raise it with --max-resolutions {n_res})")
        return BoundaryOutcome(INCONCLUSIVE, reason, certificate={"boundary": builder.part(enumerated=False)},
                               extra={"summary": summary})

    grads = TieGradients(net, X, state.Z, fixed)
    groups = tie_groups(ties)
    group_cols = [_support_columns(net, fixed, [ties[k] for k in g]) for g in groups]
    reach_cache: dict[tuple[int, tuple[bool, ...]], list | None] = {}

    patterns: list[dict[str, Any]] = []
    line_pool: list[tuple[flint.fmpq_mat, list]] = []
    certificate = None
    cert_res: tuple[bool, ...] = ()
    best: tuple[int, int | None] | None = None
    n_reach = n_cs_fail = n_cn_fail = 0
    for active in _progress(product((True, False), repeat=len(ties)), n_res):
        pattern = resolve_ties(state.pattern, ties, active)
        # Certified modular ranks; the rational Gamma(s) is built only where a
        # kernel (entering or line certificate) is looked for.
        ranks = certify_ranks(net, X, pattern, fixed, need_rank_a=all_ranks, rng=rng)
        rg, ra = ranks.rank_gamma, ranks.rank_a
        cs = holds_cs(rg, dim)
        cn = holds_cn(rg, ra, dim)
        gamma = None if cs else gamma_exact(net, X, state.Z, pattern, fixed)
        g_rows = [grads.gradient(pattern, t) for t in ties]
        signed = [g if a else [-x for x in g] for g, a in zip(g_rows, active)]
        reachable = True
        combined = [flint.fmpq(0)] * dim  # group directions on disjoint columns, added up
        for gi, (members, cols) in enumerate(zip(groups, group_cols)):
            key = (gi, tuple(active[k] for k in members))
            if key not in reach_cache:
                rows = [[signed[k][c] for c in cols] for k in members]
                reach_cache[key] = find_strict_direction(rows)[0]
            reachable = reachable and reach_cache[key] is not None
            for col, v in zip(cols, reach_cache[key] or []):
                combined[col] += v
        entering_delta = None
        if not cn and certificate is None and gamma is not None:  # not cn implies not cs: gamma is built
            K = exact.nullspace(gamma)
            rows = [(flint.fmpq_mat([row]) * K).entries() for row in signed]
            c, _how = find_strict_direction(rows)
            if c is not None:
                # Positive scaling keeps kernel membership and strict signs: report it primitive.
                delta = primitive_integer((K * flint.fmpq_mat(len(c), 1, c)).entries())
                certificate = build_entering_certificate(net, fixed, ties, sorted(hidden), active, delta,
                                                         gamma, g_rows, rg, ra)
                cert_res = active
                entering_delta = delta  # the entering kernel direction is itself a first-order witness
        # `reachable` is claimed only with a witness that passes the exact check (the verifier re-checks it).
        candidates = [combined if reachable else None, entering_delta]
        witness = builder.witness(signed, candidates)
        if witness is None and reachable:
            witness = builder.witness(signed, [find_strict_direction(signed)[0]])
        reachable = witness is not None
        builder.add(active, ranks.certificate, witness)
        if gamma is not None and certificate is None and len(line_pool) < MAX_LINE_RESOLUTIONS:
            line_pool.append((gamma, signed))
        n_reach += reachable
        n_cs_fail += not cs
        n_cn_fail += not cn
        if best is None or rg < best[0]:
            best = (rg, ra)
        patterns.append({"ties": [tie_dict(t, a) for t, a in zip(ties, active)], "rank_gamma": rg,
                         "rank_a": ra, "cs": cs, "cn": cn, "reachable": True if reachable else "unknown"})
    # Invariants: len(patterns) == n_res; best holds the smallest rank_gamma; a certificate
    # exists only for a resolution with rank_gamma == rank_a < dim.
    summary.append(f"{n_res} resolution(s) of {len(ties)} visible tie(s), {n_reach} proved reachable, "
                   f"{n_res - n_reach} unknown; C_S fails for {n_cs_fail}, C_N fails for {n_cn_fail}"
                   + (f"; {len(groups)} independent tie groups" if len(groups) > 1 else ""))
    if certificate is not None:
        ent = certificate["entering"]
        verdict = NOT_IDENTIFIABLE
        reason = (f"resolution [{_fmt_res(ties, cert_res)}] has rank Gamma = rank A = {ent['rank_gamma']} "
                  f"< dim = {dim} and a kernel direction delta enters its piece strictly: nearby "
                  "non-equivalent parameters give the same outputs (certificate)")
        nz = {k: v for k, v in ent["delta"].items() if v != "0"}
        summary.append("certificate delta: " + ", ".join(f"{k} = {v}" for k, v in nz.items()))
    elif n_cs_fail and (line := _find_line(net, X, fixed, line_pool)) is not None:
        certificate = line
        verdict = NOT_IDENTIFIABLE
        shown = ("changes f at a probe point" if "probe" in line["line"] else
                 "changes an invariant of the equivalence (so the parameters are not equivalent)")
        reason = (f"C_S fails for {n_cs_fail} of {n_res} tie resolutions and no kernel direction enters "
                  "strictly to first order, but the segment theta + eps delta keeps every output on X "
                  f"exactly and {shown} (straight-line certificate)")
        summary.append("line certificate delta: " + ", ".join(
            f"{k} = {v}" for k, v in line["line"]["delta"].items() if v != "0")
            + (f"; probe x* = ({', '.join(line['line']['probe'])})" if "probe" in line["line"] else "")
            + (f"; {line['line']['nonequivalence']['invariant']} invariant changes"
               if "nonequivalence" in line["line"] else ""))
    elif n_cs_fail == 0:
        verdict = IDENTIFIABLE
        reason = (f"C_S holds for all {n_res} tie resolutions (none excluded): rank Gamma(s) = dim = {dim} "
                  "on every resolution, a superset of the patterns reachable near theta")
    else:
        verdict = INCONCLUSIVE
        why = ("none of them fails C_N with an entering kernel direction" if n_cn_fail
               else "C_N holds for each of them")
        reason = (f"C_S fails for {n_cs_fail} of {n_res} tie resolutions and {why}: "
                  "no entering kernel direction found")
    if best is None:
        raise InvariantViolation("no tie resolution was enumerated")
    certificate = {"boundary": builder.part(), **(certificate or {})}
    return BoundaryOutcome(verdict, reason, best[0], best[1], patterns, certificate, {"summary": summary})
