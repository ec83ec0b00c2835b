"""Verify a report's ``neurons`` field: every per-neuron fact recomputed with Fractions (docs/cli.md).

Sign counts, hyperplane ranks (sympy over QQ, :func:`exactident.verify.arith.rank_qq`),
the dead / always-active flags and the proportional twins come from the case alone
(:class:`exactident.verify.facts.CaseFacts`); ``under_determined``, ``n_moved`` and
``coupled`` come from the kernel directions that :mod:`exactident.verify.explained`
verified (complete bases are required).  ``why`` is prose and is not checked.

Called by :mod:`exactident.verify.explained`.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from exactident.verify.arith import BadField, need, parse_fraction, rank_qq, unknown_fields
from exactident.verify.facts import CaseFacts

__all__ = ["check_neurons"]

_KEYS = ("layer", "neuron", "n_active", "n_tie", "n_inactive", "hyperplane_rank", "hyperplane_full", "pinned",
         "dead", "always_active", "twins", "under_determined", "n_moved", "coupled", "why")
_NAME = re.compile(r"(?:W_(\d+)\[(\d+),\d+\]|b_(\d+)\[(\d+)\])")


def _owner(name: str) -> tuple[int, int]:
    m = _NAME.fullmatch(name)
    assert m is not None
    return (int(m[1]), int(m[2])) if m[1] else (int(m[3]), int(m[4]))


def _twins(facts: CaseFacts, l: int) -> dict[int, dict[int, Fraction]]:
    """``w -> {x: r}`` with ``h_w = r h_x`` on the sample (same strict active set, no tie, one ratio)."""
    cols = [[facts.Z[i][l - 1][v] for i in range(facts.n)] for v in range(facts.widths[l])]
    out: dict[int, dict[int, Fraction]] = {}
    for u, zu in enumerate(cols):
        for v, zv in enumerate(cols):
            if u == v or any(z == 0 for z in zu) or any(z == 0 for z in zv):
                continue
            S = [i for i in range(facts.n) if zu[i] > 0]
            if not S or [i for i in range(facts.n) if zv[i] > 0] != S:
                continue
            r = zu[S[0]] / zv[S[0]]
            if all(zu[i] == r * zv[i] for i in S):
                out.setdefault(u, {})[v] = r
    return out


def _expected(facts: CaseFacts, l: int, v: int) -> dict[str, Any]:
    z = [facts.Z[i][l - 1][v] for i in range(facts.n)]
    act = sum(1 for x in z if x > 0)
    tie = sum(1 for x in z if x == 0)
    rows = []
    for i in range(facts.n):
        if z[i] > 0:
            h = facts.X[i] if l == 1 else [max(x, Fraction(0)) for x in facts.Z[i][l - 2]]
            rows.append([*h, Fraction(1)])
    full = facts.widths[l - 1] + 1
    r = rank_qq(rows, full)
    return {"n_active": act, "n_tie": tie, "n_inactive": facts.n - act - tie, "hyperplane_rank": r,
            "hyperplane_full": full, "pinned": r == full,
            "dead": facts.n - act - tie > 0 and act == 0 and tie == 0,
            "always_active": act > 0 and act == facts.n}


def check_neurons(entries: list, facts: CaseFacts, names: list[str], blocks: list,
                  trivial_kernel: bool = False) -> list[str]:
    """Failures of the ``neurons`` entries (empty: valid).

    ``blocks`` are the verified kernel blocks (None for one that failed); ``trivial_kernel``:
    ``C_S`` is proved, so no direction moves anything.
    """
    fails: list[str] = []
    hidden = [(l, v) for l in range(1, facts.L) for v in range(facts.widths[l])]
    if len(entries) != len(hidden):
        return [f"neurons: {len(entries)} entries, the network has {len(hidden)} hidden neurons"]
    complete = trivial_kernel or (bool(blocks) and all(b is not None and b.complete for b in blocks))
    moved = {j for b in blocks if b is not None for vec in b.vectors for j in vec}
    twins = {l: _twins(facts, l) for l in range(1, facts.L)}
    partners: dict[tuple[int, int], set[int]] = {}
    for b in blocks:
        for vec in (b.vectors if b is not None else []):
            owners = {_owner(names[j]) for j in vec}
            if len({l for l, _ in owners}) != 1:
                continue
            for l, v in owners:
                if l < facts.L:
                    partners.setdefault((l, v), set()).update(u for m, u in owners if m == l and u != v)
    for k, ((l, v), e) in enumerate(zip(hidden, entries)):
        at = f"neurons[{k}]"
        if not isinstance(e, dict):
            raise BadField(at, f"expected dict, found {type(e).__name__}")
        fails += unknown_fields(e, _KEYS, at)
        if (need(e, "layer", int, at), need(e, "neuron", int, at)) != (l, v):
            fails.append(f"{at}: names ({e['layer']},{e['neuron']}), expected ({l},{v}) (layer by layer, in order)")
            continue
        for key, value in _expected(facts, l, v).items():
            got = need(e, key, type(value), at)
            if got != value:
                fails.append(f"{at}.{key}: report says {got}, the case gives {value}")
        want = twins[l].get(v, {})
        got_twins = {}
        for t in need(e, "twins", list, at):
            if not isinstance(t, dict):
                raise BadField(f"{at}.twins", f"expected objects {{neuron, ratio}}, found {type(t).__name__}")
            got_twins[need(t, "neuron", int, f"{at}.twins")] = parse_fraction(need(t, "ratio", str, f"{at}.twins"),
                                                                                f"{at}.twins")
        if got_twins != want:
            fails.append(f"{at}.twins: report says {sorted(got_twins)}, the case gives {sorted(want)} "
                         "(neurons with h proportional on the sample)")
        if any(key in e for key in ("under_determined", "n_moved", "coupled")):
            if not complete:
                fails.append(f"{at}: under_determined / n_moved / coupled need complete verified kernel bases")
                continue
            mine = {j for j in moved if _owner(names[j]) == (l, v)}
            if e.get("under_determined") is not bool(mine) or e.get("n_moved") != len(mine):
                fails.append(f"{at}: report says under_determined {e.get('under_determined')}, n_moved "
                             f"{e.get('n_moved')}; the kernel moves {len(mine)} of its incoming parameters")
            fails += _coupled(e.get("coupled"), facts, l, v, partners.get((l, v), set()), at)
    return fails


def _coupled(got: Any, facts: CaseFacts, l: int, v: int, want: set[int], at: str) -> list[str]:
    if not isinstance(got, list) or not all(isinstance(c, dict) for c in got):
        raise BadField(f"{at}.coupled", "expected a list of objects {neuron, both, only_this, only_other}")
    fails = []
    if sorted(str(c.get("neuron")) for c in got if isinstance(c, dict)) != sorted(str(u) for u in want):
        return [f"{at}.coupled: report says {[c.get('neuron') for c in got if isinstance(c, dict)]}, the verified "
                f"one-layer kernel directions couple it with {sorted(want)}"]
    for c in got:
        u = c["neuron"]
        both = sum(1 for i in range(facts.n) if facts.Z[i][l - 1][v] > 0 and facts.Z[i][l - 1][u] > 0)
        this = sum(1 for i in range(facts.n) if facts.Z[i][l - 1][v] > 0 and not facts.Z[i][l - 1][u] > 0)
        other = sum(1 for i in range(facts.n) if facts.Z[i][l - 1][u] > 0 and not facts.Z[i][l - 1][v] > 0)
        if (c.get("both"), c.get("only_this"), c.get("only_other")) != (both, this, other):
            fails.append(f"{at}.coupled ({l},{u}): report says {c.get('both')}/{c.get('only_this')}/"
                         f"{c.get('only_other')}, the case gives {both}/{this}/{other}")
    return fails
