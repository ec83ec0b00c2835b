"""Verify a ``boundary`` part: the case's ties, which are invisible, and certified ranks on every tie resolution.

Part (written by :class:`exactident.boundary.certificate.BoundaryPartBuilder`)::

    {"ties": [{"sample", "layer", "neuron"}, ...],           # the visible ties, in order
     "invisible_ties": [{"sample", "layer", "neuron", "blocked_by": m}, ...],
     "fixed_edges": [[l, v, k], ...],                       # with "resolutions"
     "resolutions": [{"active": [bool, ...],                 # one per tie of "ties"
                      "rank_gamma": {...}, "rank_a": {...},  # rank certificates at that resolution
                      "reachable": {"delta": {name: "p/q"}}}, ...]}

``resolutions`` (absent when the resolutions were not enumerated) must list
every one of the ``2^k`` resolutions exactly once, ``k`` the number of classes of
visible ties (``classes`` of :class:`~exactident.verify.facts.CaseFacts`, derived here
from the case): ties at equal sample points are one class and take one side in
every listed resolution.  A resolution splitting them is not a resolution: near
theta the pre-activation is a function of the point, so equal points are on the
same side of every neuron, and such a pattern is never reached; listing one is
not valid.
Each rank certificate is checked by :func:`exactident.verify.rank.check_rank_certificate`
at the pattern of its resolution, derived here from the case; a ``reachable``
witness is a direction (over all weights and biases) along which every visible
tie moves strictly to its side, to first order (forward-mode tangent).  With
no visible tie there is one resolution (``active: []``): the common ``alpha``
of every tie resolution, on which Theorems 8 and 9 apply directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from exactident.io.limits import DEFAULT_WORK_LIMITS
from exactident.verify.arith import (
    BadField,
    direction,
    forward_tangent,
    need,
    parse_fraction,
    parse_parameter,
    show,
    tie_key,
    unknown_fields,
)
from exactident.verify.facts import CaseFacts, Tie
from exactident.verify.rank_rules import RankBounds
from exactident.verify.resolutions import cover_problems, every_resolution

__all__ = ["BoundaryResult", "Resolution", "verify_boundary"]

_PART_KEYS = ("ties", "invisible_ties", "fixed_edges", "resolutions")
_TIE_KEYS = ("sample", "layer", "neuron")


@dataclass
class Resolution:
    """One verified resolution: its sides, certified ranks and whether reachability was proved."""

    active: tuple[bool, ...]
    rank_gamma: int | None
    rank_a: int | None
    reachable: bool
    interval: tuple[int, int] | None = None  # certified (lo, hi) when the rank_gamma part is the interval form

    @property
    def bounds(self) -> RankBounds | None:
        """Certified bounds on ``R_Gamma`` at this resolution (None: not certified)."""
        if self.rank_gamma is not None:
            return RankBounds(self.rank_gamma, self.rank_gamma)
        return RankBounds(*self.interval) if self.interval is not None else None


@dataclass
class BoundaryResult:
    """Outcome of :func:`verify_boundary`."""

    fails: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    ties: list[Tie] = field(default_factory=list)
    resolutions: list[Resolution] | None = None  # None: not enumerated (or not verifiable)


class _TieRates:
    """First-order rates ``d z_t / d eps`` of the ties along witnesses, per sample.

    The tangent of a tie of sample ``i`` depends only on the sides of that sample's
    ties.  When a sample has few such local resolutions compared with the number of
    witnesses, the gradients (one forward-mode pass per parameter) are computed once
    per local resolution and cached; otherwise one tangent pass along each witness.
    """

    def __init__(self, facts: CaseFacts, n_witnesses: int) -> None:
        self.facts = facts
        w = facts.widths
        self.params: list[tuple] = [("W", l, r, c) for l in range(1, facts.L + 1) for r in range(w[l])
                                    for c in range(w[l - 1])]
        self.params += [("b", l, r, None) for l in range(1, facts.L + 1) for r in range(w[l])]
        self.n_witnesses = n_witnesses
        self.cache: dict[tuple, dict[Tie, dict]] = {}

    def rates(self, i: int, sides: dict[Tie, bool], vec: dict) -> dict[Tie, Fraction]:
        f = self.facts
        local = {t: a for t, a in sides.items() if t[0] == i}
        act = f.active(local)(i)
        if 2 ** len(local) * len(self.params) >= self.n_witnesses:  # direct: one pass along the witness
            _, dz = forward_tangent(f.W, f.b, f.X[i], act, *direction(f.widths, vec))
            return {t: dz[t[1] - 1][t[2]] for t in local}
        key = (i, tuple(sorted(local.items())))
        if key not in self.cache:
            grads: dict[Tie, dict] = {t: {} for t in local}
            for p in self.params:
                _, dz = forward_tangent(f.W, f.b, f.X[i], act, *direction(f.widths, {p: Fraction(1)}))
                for (_, l, v) in local:
                    if dz[l - 1][v] != 0:
                        grads[(i, l, v)][p] = dz[l - 1][v]
            self.cache[key] = grads
        return {t: sum((c * vec[p] for p, c in g.items() if p in vec), Fraction(0))
                for t, g in self.cache[key].items()}


def _witness_problems(rates: _TieRates, sides: dict[Tie, bool], part: Any, where: str) -> list[str]:
    """``reachable``: every visible tie moves strictly to its side along the witness, to first order."""
    facts = rates.facts
    if not isinstance(part, dict):
        raise BadField(where, f"expected dict, found {type(part).__name__}")
    fails = unknown_fields(part, ("delta",), where)
    vec = {}
    for name, v in need(part, "delta", dict, where).items():
        key = parse_parameter(name, facts.widths, f"{where}.delta[{name!r}]")
        value = parse_fraction(v, f"{where}.delta[{name!r}]")
        if key is None:
            fails.append(f"{where}.delta[{name!r}]: not a parameter of this network (widths {facts.widths})")
        vec[key] = value
    if fails:
        return fails
    for i in sorted({t[0] for t in sides}):
        for t, rate in rates.rates(i, sides, vec).items():
            if (rate <= 0) if sides[t] else (rate >= 0):
                fails.append(f"{where}: tie {t} moves at rate {show(rate)} along the witness; the certificate claims "
                             f"it enters the {'active' if sides[t] else 'inactive'} side strictly")
    return fails


def verify_boundary(case: Any, part: Any, facts: CaseFacts, check_rank: Any,
                    max_resolutions: int = DEFAULT_WORK_LIMITS.max_resolutions) -> BoundaryResult:
    """Check a ``boundary`` part against the case (see the module docstring).

    ``check_rank`` is :func:`exactident.verify.rank.check_rank_certificate` (passed in so
    that the caller decides what an unavailable or crashing rank checker means).
    ``max_resolutions`` is the verifier's cap (``--max-resolutions``, the layer graph's too): past
    ``2^k`` resolutions the part is not verified (one line), whatever the report lists.

    Returns
    -------
    BoundaryResult
        ``fails`` empty when every field holds; ``resolutions`` lists what each
        verified resolution proves (None when the part has none).

    Raises
    ------
    BadField
        Malformed fields (bad input, exit 2).
    """
    where = "certificate.boundary"
    if not isinstance(part, dict):
        raise BadField(where, f"expected dict, found {type(part).__name__}")
    out = BoundaryResult(fails=unknown_fields(part, _PART_KEYS, where))
    ties = []
    for k, r in enumerate(need(part, "ties", list, where)):
        ties.append(tie_key(r, f"{where}.ties[{k}]"))
        out.fails += unknown_fields(r, _TIE_KEYS, f"{where}.ties[{k}]")
    out.ties = ties
    if len(set(ties)) != len(ties) or sorted(ties) != facts.visible:
        out.fails.append(f"{where}.ties: the certificate lists {ties}, the case's visible ties are {facts.visible}")
    invisible: dict[Tie, int] = {}
    for k, r in enumerate(need(part, "invisible_ties", list, where)):
        at = f"{where}.invisible_ties[{k}]"
        key = tie_key(r, at)
        m = need(r, "blocked_by", int, at)
        out.fails += unknown_fields(r, (*_TIE_KEYS, "blocked_by"), at)
        if key in invisible:
            out.fails.append(f"{at}: tie {key} is listed twice")
        invisible[key] = m
        i, l, _v = key
        if key not in facts.ties:
            out.fails.append(f"{at}: {key} is not a tie of the case (the case's ties are {facts.ties})")
        elif not (l < m < facts.L and all(z < 0 for z in facts.Z[i][m - 1])):
            zs = facts.Z[i][m - 1] if l < m < facts.L else None
            out.fails.append(f"{at}: the certificate says layer {m} blocks the tie (all strictly inactive at "
                             f"sample {i}); found {'no such later hidden layer' if zs is None else 'pre-activations '}"
                             f"{'' if zs is None else [show(z) for z in zs]}")
    if sorted(invisible) != sorted(facts.blocked_by):
        out.fails.append(f"{where}.invisible_ties: the certificate lists {sorted(invisible)}, the case's invisible "
                         f"ties are {sorted(facts.blocked_by)}")
    if "resolutions" not in part:
        if "fixed_edges" in part:
            out.fails.append(f"{where}.fixed_edges: given without resolutions, not verified")
        out.messages.append(f"boundary part: {len(ties)} visible and {len(invisible)} invisible tie(s) checked; "
                            "no resolution enumerated")
        return out
    resolutions = need(part, "resolutions", list, where)
    fixed = need(part, "fixed_edges", list, where)
    if out.fails:
        return out
    n_cls = len(facts.classes)
    pairs = "" if n_cls == len(ties) else f" at {n_cls} distinct (sample point, neuron) pairs"
    if 2 ** n_cls > max_resolutions:  # the cap of the layer graph's verifier, same message
        out.fails.append(f"{where}.resolutions: 2^{n_cls} tie resolutions are past the verifier's limit of "
                         f"{max_resolutions} (--max-resolutions): not verified")
        return out
    if len(resolutions) != 2 ** n_cls:
        out.fails.append(f"{where}.resolutions: the certificate lists {len(resolutions)} resolution(s), the "
                         f"{len(ties)} visible tie(s){pairs} have {2 ** n_cls if n_cls <= 64 else f'2^{n_cls}'}")
        return out
    listed: list[tuple[bool, ...]] = []
    verified: list[Resolution] = []
    rates = _TieRates(facts, sum(isinstance(r, dict) and "reachable" in r for r in resolutions))
    for j, res in enumerate(resolutions):
        at = f"{where}.resolutions[{j}]"
        if not isinstance(res, dict):
            raise BadField(at, f"expected dict, found {type(res).__name__}")
        out.fails += unknown_fields(res, ("active", "rank_gamma", "rank_a", "reachable"), at)
        active = need(res, "active", list, at)
        if len(active) != len(ties) or not all(isinstance(a, bool) for a in active):
            raise BadField(f"{at}.active", f"expected {len(ties)} booleans, found {active!r}"[:200])
        listed.append(tuple(active))
        sides = dict(zip(ties, active))
        split = [c for c in facts.classes if len({sides[t] for t in c}) > 1]
        if split:
            out.fails.append(f"{at}.active: ties {split[0]} are at equal sample points (equal pre-activations), "
                             f"the certificate puts them on different sides: not a resolution (unreachable)")
            continue
        cert = {"fixed_edges": fixed, **{k: res[k] for k in ("rank_gamma", "rank_a") if k in res}}
        problems, ranks = check_rank(case, cert, facts.pattern(sides), at)
        out.fails += problems
        reachable = False
        if "reachable" in res:
            wit = _witness_problems(rates, sides, res["reachable"], f"{at}.reachable")
            out.fails += wit
            reachable = not wit
        verified.append(Resolution(tuple(active), ranks.rank_gamma, ranks.rank_a, reachable,
                                   getattr(ranks, "rank_gamma_interval", None)))
    # the verifier's own enumeration (each class of equal sample points on one side; the count was checked
    # above, so it is within the cap), against which the listed ones are compared by the rule shared with
    # layer graphs: every resolution once, no other
    everyone = every_resolution(facts, max_resolutions, order=ties) or []
    out.fails += cover_problems(listed, everyone, f"{where}.resolutions", show=list)
    if not out.fails:
        out.resolutions = verified
        n_cs = sum(r.rank_gamma == facts.dim for r in verified)
        out.messages.append(f"boundary part valid: {len(ties)} visible tie(s){pairs} and {len(invisible)} "
                            "invisible tie(s); "
                            f"certified ranks on all {len(verified)} resolution(s), C_S on {n_cs}; "
                            f"{sum(r.reachable for r in verified)} proved reachable")
    return out
