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
- **No resolution is excluded** but those splitting ties at equal sample
  points (equal points have equal pre-activations for every theta, so they
  always share a side).  Proving a pattern unreachable otherwise needs more
  than first order, so the sufficient check (``identifiable``) runs over
  every other resolution of the visible ties.  Reachability is only *proved*
  (first-order strict entering direction, :mod:`exactident.boundary.entering`) and is
  otherwise ``"unknown"``.
- **Grouping is for reachability only.**  Ties whose pre-activations depend on
  disjoint parameter sets (over-approximated: a layer-``l`` tie depends on its
  own neuron and every neuron of layers ``< l``) have independent first-order
  systems; each group's LP is solved once per sub-resolution and the group
  directions add up.  Ranks of ``Gamma(s)`` do not factor, so every
  resolution's rank is computed.
- **Cap.**  Beyond ``max_resolutions`` resolutions nothing is enumerated and
  the verdict is ``inconclusive`` with the count as ``2^k`` (and the option to
  raise only while ``k <= MAX_ADVISED_TIES``) unless a straight line is found on the
  kernel at the ``>= 0`` pattern; ``rank_gamma`` is ``None``: no resolution enumerated.  The
  report records the cap and ``k`` (``resolutions_not_enumerated``), which the verifier holds
  against the count it recomputes from the case.
- **Canonical search order** (:mod:`exactident.boundary.canonical`): ties,
  resolutions, kernel bases, LPs and probe points are taken in an order and a
  scale computed from invariants, so rescaling or permuting neurons and
  permuting or repeating samples changes neither the verdict nor what is found.
- **not-identifiable** needs an exact certificate: a resolution ``s`` with
  ``R_Gamma(s) == R_A(s) < dim`` and ``delta = K c`` in ``ker Gamma(s)``
  entering the piece of ``s`` strictly (:mod:`exactident.verify.certificate`), or,
  when no direction enters at first order, a straight-line certificate
  (:mod:`exactident.boundary.line`): a kernel direction along which the outputs on
  ``X`` are exactly constant and ``f`` changes at a probe point, or an invariant of
  the equivalence changes (:mod:`exactident.boundary.nonequivalence`).
- **Every verdict carries a certificate**: the ``boundary`` part
  (:class:`exactident.boundary.certificate.BoundaryPartBuilder`) lists the visible and
  invisible ties and, for every enumerated resolution, its rank certificate and, where
  reachability is claimed, an exactly checked first-order witness (in the case's own
  parameters).  Past the cap it has no ``resolutions``.

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

from exactident.boundary.canonical import (
    Canonical,
    canonical_form,
    canonical_nullspace,
    combine,
    full_direction,
    kernel_rows,
    to_slice,
)
from exactident.boundary.entering import TieGradients, find_strict_direction, primitive_integer
from exactident.boundary.line import find_line, line_summary, segment_text
from exactident.errors import InvariantViolation
from exactident.io.rationals import short_text
from exactident.io.report import NOT_ENUMERATED, past_the_cap
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
from exactident.model.fixed_edges import FixedEdges
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

#: Default cap on the tie resolutions enumerated (``--max-resolutions``).
DEFAULT_MAX_RESOLUTIONS = 4096
#: Beyond this many visible ties the cap message does not suggest raising --max-resolutions.
MAX_ADVISED_TIES = 20
#: Resolutions (failing C_S) whose kernels are searched for a straight-line certificate.
MAX_LINE_RESOLUTIONS = 64


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
    certificate : dict
        ``{"boundary": ...}`` (the ties and certified ranks of every resolution; without
        ``resolutions`` past the cap), plus ``"entering"`` or ``"line"`` for
        ``not-identifiable`` (docs/boundary.md, "Certificates").
    extra : dict
        ``summary``: readable lines for the human table; past the cap, ``resolutions_not_enumerated``
        (:func:`exactident.io.report.past_the_cap`).
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


def _support_columns(canon: Canonical, ties: Sequence[Tie]) -> list[int]:
    """Search coordinates that the group's ``g_t`` can touch (see :func:`tie_groups`)."""
    top = max(t.l for t in ties)
    own = {(t.l, t.v) for t in ties}
    return canon.columns(lambda p: p.l < top or (p.l, p.i) in own)


def _progress(iterable: Iterable, total: int) -> Iterable:
    if total < 64 or not sys.stderr.isatty():
        return iterable
    try:
        from tqdm import tqdm
    except ImportError:
        return iterable
    return tqdm(iterable, total=total, desc="tie resolutions", file=sys.stderr, leave=False)


def _line_shows(line: dict[str, Any]) -> str:
    """The segment a line certificate proved and how it shows non-equivalence, for the reason."""
    return (f"for {segment_text(line['line']['t0'])}, and "
            + ("changes f at a probe point" if "probe" in line["line"] else
               "changes an invariant of the equivalence (so the parameters are not equivalent)"))


def _to_case(net: Network, canon: Canonical, fixed: FixedEdges, c: Sequence[flint.fmpq]) -> list[flint.fmpq]:
    """A direction in search coordinates on the case's own slice ``fixed`` (primitive integer).

    Positive column scales and first-order rescalings (:func:`exactident.boundary.canonical.to_slice`)
    keep every ``g_t . delta`` sign and kernel membership.
    """
    dW, db = full_direction(net, canon, canon.to_parameters(c))
    return primitive_integer(to_slice(net, fixed, dW, db))


def _power_of_two(k: int) -> str:
    """``2^k`` for a message: the decimal value too while enumerating them is within reach."""
    return f"2^{k} = {2 ** k}" if k <= MAX_ADVISED_TIES else f"2^{k}"


def _fmt_res(ties: Sequence[Tie], active: Sequence[bool], limit: int = 6) -> str:
    text = ", ".join(f"{t} {'active' if a else 'inactive'}" for t, a in list(zip(ties, active))[:limit])
    return text + (f", ... ({len(ties)} ties)" if len(ties) > limit else "")


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
    n_samples_tied = len({t.i for t in state.ties})
    summary = [f"{len(state.ties)} tie(s) on {n_samples_tied} sample(s)"
               + (f", {len(hidden)} invisible (a later layer is all strictly inactive)" if hidden else "")]
    # Canonical order (docs/boundary.md, "Presentation invariance"): ties sorted by (sample point,
    # layer, canonical neuron); ties at equal sample points form one class and always share a side
    # (equal points have equal pre-activations for every theta, so split sides are unreachable).
    canon = canonical_form(net, X, state.Z)
    ties = sorted((t for t in state.ties if t not in hidden), key=lambda t: (canon.tie_key(t), t.i))
    classes: list[list[int]] = []
    for k, t in enumerate(ties):
        if classes and canon.tie_key(ties[classes[-1][0]]) == canon.tie_key(t):
            classes[-1].append(k)
        else:
            classes.append([k])

    # The certificate's boundary part lists the ties in this order; every resolution it lists gives
    # one side per class (the verifier derives the classes from the case: equal points).
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

    n_cls = len(classes)
    if n_cls > max_resolutions.bit_length() - 1:  # 2^n_cls > max_resolutions, without building 2^n_cls
        raise_hint = (f"raise it with --max-resolutions {2 ** n_cls}" if n_cls <= MAX_ADVISED_TIES
                      else "too many to enumerate at any setting")
        reason = (f"the visible ties at {n_cls} distinct (sample point, neuron) pairs give {_power_of_two(n_cls)} "
                  f"tie resolutions, more than the limit {max_resolutions}")
        # A straight line needs no enumeration: try the kernel of Gamma at the >= 0 pattern.
        K0 = canonical_nullspace(canon.search_matrix(gamma_exact(net, X, state.Z, state.pattern, canon.fixed)))
        line = find_line(net, canon, [(K0, [])]) if K0 else None
        part = {"boundary": builder.part(enumerated=False)}  # check adds the rank part (>= 0 pattern)
        # the cap the resolutions were left at, for the verifier to hold against the count it recomputes
        capped = {NOT_ENUMERATED: past_the_cap(max_resolutions, n_cls)}
        if line is None:
            reason += f"; nothing was enumerated, so no exact verdict was reached ({raise_hint})"
            return BoundaryOutcome(INCONCLUSIVE, reason, certificate=part, extra={"summary": summary, **capped})
        reason += (" (none enumerated), but the segment theta + t delta (a kernel direction of Gamma at the "
                   f">= 0 pattern) keeps every output on X exactly {_line_shows(line)} "
                   "(straight-line certificate)")
        summary.append(line_summary(line))
        return BoundaryOutcome(NOT_IDENTIFIABLE, reason, certificate={**part, **line},
                               extra={"summary": summary, **capped})
    n_res = 2 ** n_cls

    grads = TieGradients(net, X, state.Z, fixed)
    # The searches run in canonical coordinates (canonical slice, order and scale).
    grads_c = grads if canon.fixed == fixed else TieGradients(net, X, state.Z, canon.fixed)
    reps = [ties[c[0]] for c in classes]
    groups = tie_groups(reps)
    group_cols = [_support_columns(canon, [reps[k] for k in g]) for g in groups]
    reach_cache: dict[tuple[int, tuple[bool, ...]], list | None] = {}

    patterns: list[dict[str, Any]] = []
    line_pool: list[tuple[list, list]] = []
    certificate = None
    cert_res: tuple[bool, ...] = ()
    n_reach = n_cs_fail = n_cn_fail = 0
    for sides in _progress(product((True, False), repeat=n_cls), n_res):
        active = [False] * len(ties)
        for members, a in zip(classes, sides):
            for k in members:
                active[k] = a
        pattern = resolve_ties(state.pattern, ties, active)
        # Certified modular ranks; the rational Gamma(s) is built only where a
        # kernel (entering or line certificate) is looked for.
        ranks = certify_ranks(net, X, pattern, fixed, need_rank_a=all_ranks, rng=rng)
        rg, ra = ranks.rank_gamma, ranks.rank_a
        cs = holds_cs(rg, dim)
        cn = holds_cn(rg, ra, dim)
        # One derivative row per class (equal points, equal rows), in search coordinates.
        signed = []
        for t, a in zip(reps, sides):
            g = canon.search_row(grads_c.gradient(pattern, t), t)
            signed.append(g if a else [-x for x in g])
        reachable = True
        combined = [flint.fmpq(0)] * len(canon.params)  # group directions on disjoint columns, added up
        for gi, (members, cols) in enumerate(zip(groups, group_cols)):
            key = (gi, tuple(sides[k] for k in members))
            if key not in reach_cache:
                rows = [[signed[k][c] for c in cols] for k in members]
                reach_cache[key] = find_strict_direction(rows)[0]
            reachable = reachable and reach_cache[key] is not None
            for col, v in zip(cols, reach_cache[key] or []):
                combined[col] += v
        entering_delta = None
        g_rows = [grads.gradient(pattern, t) for t in ties]  # case coordinates: certificates, witness check
        K = None  # kernel of Gamma(s) in search coordinates, built only where a certificate is sought
        if not cs and certificate is None and (not cn or len(line_pool) < MAX_LINE_RESOLUTIONS):
            K = canonical_nullspace(canon.search_matrix(gamma_exact(net, X, state.Z, pattern, canon.fixed)))
        if not cn and certificate is None and K is not None:  # not cn implies not cs: K is built
            c, _how = find_strict_direction(kernel_rows(K, signed))
            if c is not None:
                # Back to the case's own parameters and slice; positive scaling keeps kernel
                # membership and strict signs: report it primitive.
                delta = _to_case(net, canon, fixed, combine(K, c))
                gamma = gamma_exact(net, X, state.Z, pattern, fixed)
                certificate = build_entering_certificate(net, fixed, ties, sorted(hidden), active, delta,
                                                         gamma, g_rows, rg, ra)
                cert_res = tuple(active)
                entering_delta = delta  # the entering kernel direction is itself a first-order witness
        # `reachable` is claimed only with a witness that passes the exact check in the case's own
        # parameters (the verifier re-checks it): candidates found in search coordinates are mapped back.
        case_signed = [g if a else [-x for x in g] for g, a in zip(g_rows, active)]
        witness = builder.witness(case_signed, [_to_case(net, canon, fixed, combined) if reachable else None,
                                                entering_delta])
        if witness is None and reachable:
            c_all = find_strict_direction(signed)[0]
            witness = builder.witness(case_signed, [None if c_all is None else _to_case(net, canon, fixed, c_all)])
        reachable = witness is not None
        builder.add(active, ranks.certificate, witness)
        if K is not None and certificate is None and len(line_pool) < MAX_LINE_RESOLUTIONS:
            line_pool.append((K, signed))
        n_reach += reachable
        n_cs_fail += not cs
        n_cn_fail += not cn
        patterns.append({"ties": [tie_dict(t, a) for t, a in zip(ties, active)], "rank_gamma": rg,
                         "rank_a": ra, "cs": cs, "cn": cn, "reachable": True if reachable else "unknown"})
    # The top-level ranks: smallest rank_gamma, then smallest rank_a (a rule on the multiset of
    # pattern ranks, so it does not depend on the enumeration order).
    best = min(((p["rank_gamma"], p["rank_a"]) for p in patterns),
               key=lambda r: (r[0], r[1] if r[1] is not None else dim + 1), default=None)
    # Invariants: len(patterns) == n_res; best holds the smallest rank_gamma; a certificate
    # exists only for a resolution with rank_gamma == rank_a < dim.
    pairs = "" if len(ties) == n_cls else f" at {n_cls} distinct (sample point, neuron) pairs"
    summary.append(f"{n_res} resolution(s) of {len(ties)} visible tie(s){pairs}, {n_reach} proved reachable, "
                   f"{n_res - n_reach} unknown; C_S fails for {n_cs_fail}, C_N fails for {n_cn_fail}"
                   + (f"; {len(groups)} independent tie groups" if len(groups) > 1 else ""))
    if certificate is not None:
        ent = certificate["entering"]
        verdict = NOT_IDENTIFIABLE
        reason = (f"resolution [{_fmt_res(ties, cert_res)}] has rank Gamma = rank A = {ent['rank_gamma']} "
                  f"< dim = {dim} and a kernel direction delta enters its piece strictly: nearby "
                  "non-equivalent parameters give the same outputs (certificate)")
        nz = {k: v for k, v in ent["delta"].items() if v != "0"}
        summary.append("certificate delta: " + ", ".join(f"{k} = {short_text(v)}" for k, v in nz.items()))
    elif n_cs_fail and (line := find_line(net, canon, line_pool)) is not None:
        certificate = line
        verdict = NOT_IDENTIFIABLE
        reason = (f"C_S fails for {n_cs_fail} of {n_res} tie resolutions and no kernel direction enters "
                  "strictly to first order, but the segment theta + t delta keeps every output on X "
                  f"exactly {_line_shows(line)} (straight-line certificate)")
        summary.append(line_summary(line))
    elif n_cs_fail == 0:
        verdict = IDENTIFIABLE
        excluded = ("none excluded" if len(ties) == n_cls
                    else "only those splitting ties at equal sample points excluded, as unreachable")
        reason = (f"C_S holds for all {n_res} tie resolutions ({excluded}): rank Gamma(s) = dim = {dim} "
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
