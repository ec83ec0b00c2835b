"""The verdict rules shared by every network: the smallest verdict over the tie resolutions, no weaker verdict,
and certificates that need no tie resolution first.

One rule for the plain ReLU MLP (:mod:`exactident.verify.claims`) and the layer graph
(:func:`exactident.verify.certificate.verify_constrained`):

**Resolution-free certificates first.**  A line of constant outputs on X (the MLP's ``line``, a layer
graph's ``line``, ``dead_units``, ``constant_units``, ``slope_lines``) is checked by one polynomial pass
in ``t`` over Q that decides every unit's side along the segment itself (a tie at 0 takes the side of
its first nonzero coefficient, and no kinked pre-activation may cross 0 inside the segment), so it
proves ``not-identifiable`` whatever side each tie would take: it needs no tie resolution.  So do the
certificates that name their one resolution (the MLP's ``entering``, a graph's ``entering_submersion``)
or need none (``submersion``: no sample on a kink).  These parts are checked before anything that
enumerates resolutions; when one of them proves ``not-identifiable``, the verifier does not compute
its own ranks on the ``2^k`` resolutions (:func:`identifiable_proved` is then asked only what the
certified bounds say): soundly, since ``C_S`` on every resolution would prove the opposite verdict,
which a valid line excludes.  Rank claims the report makes beside it (``rank_gamma``, an
interval, a ``free_rank`` or ``boundary`` part) are claims too and are still checked, which may need
every resolution: a report decided by a line that claims no rank needs none.

**The smallest verdict over the resolutions.**  ``identifiable`` needs ``C_S`` (``R_Gamma = dim``,
``dim_free`` for a layer graph) on every tie resolution the verifier enumerates itself
(:mod:`exactident.verify.resolutions`); one resolution where it is certified to fail (an upper bound
below ``dim``) settles that it is not proved, without looking at the others.

**No weaker verdict** (:func:`verdict_strength_problems`).  A report may not claim less than what is
proved, nor the opposite: ``inconclusive`` (or ``not-identifiable``) where ``identifiable`` is proved,
``inconclusive`` (or ``identifiable``) where ``not-identifiable`` is proved.  What counts as proved is
the stricter of what the two verifiers used to apply, now for both kinds:

- ``not-identifiable``: a verified part of the report's certificate (a line, ``entering``,
  ``submersion``, ...) or, for the plain MLP only, certified ``R_Gamma = R_A < dim`` (Theorem 8);
- ``identifiable``: ``C_S`` on every resolution from the certified bounds *or from the verifier's own
  ranks mod its primes* (a rank mod p never exceeds the rank over Q), within ``--max-resolutions``
  (:func:`own_ranks_count`): asked against every ``inconclusive`` verdict with nothing proving
  ``not-identifiable``, whether or not the report analysed the tie resolutions.

**A report past its cap gets no shield.**  A report that enumerated no resolution records the cap it
stopped at (``resolutions_not_enumerated``: ``max_resolutions`` and ``log2_resolutions = k``); the
verifier recomputes ``k`` and refuses a record with another ``k`` or with ``2^k`` within the cap, and an
``inconclusive`` report that lists none and records no cap
(:func:`exactident.verify.resolutions.not_enumerated_problems`).  The cap itself is a fact about the
engine's run, not about the case: no verifier can recompute it, and a report could record any cap below
``2^k``.  So a consistent record is not enough for ``inconclusive``: when ``2^k`` is within the
verifier's own ``--max-resolutions`` the verifier enumerates the resolutions itself, and where its own
ranks mod p reach ``dim`` on every one it refuses the weaker verdict, as for any report (the work is
what it spends on a report that lists them; a report made with a smaller ``--max-resolutions`` is
verified under the same option, or re-made with a larger one).  Past the verifier's own cap the
consistent record is all it checks: ``inconclusive`` is then the weakest claim, and it is not false.
(Before, a report listing no resolution was accepted as ``inconclusive`` whatever the case: one that had
dropped them could not be told from one past the engine's cap.)  A run whose time budget ended writes
``timed_out: true`` and no certificate: never valid (it proves nothing, and the verifier does not
redo the engine's search to find what it would have decided).

Pure functions of what the caller certified or recomputed; nothing here reads the report.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from exactident.verify.constant_rank import check_constant_rank
from exactident.verify.facts import ConstrainedFacts
from exactident.verify.line import check_graph_line, check_line_part
from exactident.verify.rank_rules import RankBounds, proves_identifiable
from exactident.verify.submersion import check_entering_submersion, check_submersion

__all__ = ["GRAPH_RULES", "RESOLUTION_FREE", "graph_verdict_problems", "identifiable_proved", "own_ranks_count",
           "past_cap_note", "resolution_free_proof", "verdict_strength_problems"]

#: A layer graph's certificate parts that prove ``not-identifiable`` and need no enumeration of the tie
#: resolutions (module docstring), in the order they are checked; the plain MLP's are ``line`` and ``entering``.
RESOLUTION_FREE = ("dead_units", "constant_units", "slope_lines", "submersion", "entering_submersion", "line",
                   "constant_rank")

#: ``decided_by`` values a layer graph's report may carry, with the verdict each gives (the plain MLP's:
#: :data:`exactident.verify.claims.RULES`).
GRAPH_RULES = {"free-rank": "identifiable", "theorem-9": "identifiable", "dead-units": "not-identifiable",
               "constant-units": "not-identifiable", "slope-lines": "not-identifiable",
               "submersion": "not-identifiable",
               "entering-submersion": "not-identifiable", "line": "not-identifiable",
               "constant-rank": "not-identifiable", "none": "inconclusive"}


def own_ranks_count(verdict: str | None, not_identifiable: bool) -> bool:
    """Do the verifier's own ranks mod p count towards ``identifiable`` (module docstring)?

    Yes for an ``identifiable`` verdict (they may prove it; a plain MLP's verdict is then still checked
    against its certificate), and against every ``inconclusive`` one, whether the report enumerated the
    tie resolutions or stopped at its cap (a recorded cap is no proof of anything about the case);
    never past a valid proof of ``not-identifiable`` (no resolution is then enumerated).

    Examples
    --------
    >>> own_ranks_count("inconclusive", False), own_ranks_count("inconclusive", True)
    (True, False)
    >>> own_ranks_count("identifiable", False), own_ranks_count("not-identifiable", False)
    (True, False)
    """
    if not_identifiable:
        return False
    return verdict in ("identifiable", "inconclusive")


def past_cap_note(capped: Mapping | None, everyone: Sequence | None) -> str:
    """What to add to the proof of ``identifiable`` against a report that stopped at the cap it records.

    Examples
    --------
    >>> past_cap_note({"why": "cap", "max_resolutions": 1, "log2_resolutions": 1}, [(True,), (False,)])
    '; the report stopped at its cap of 1 (resolutions_not_enumerated), the verifier enumerated all 2'
    >>> past_cap_note(None, [(True,)])
    ''
    """
    if not isinstance(capped, Mapping) or everyone is None:
        return ""
    return (f"; the report stopped at its cap of {capped.get('max_resolutions')} (resolutions_not_enumerated), "
            f"the verifier enumerated all {len(everyone)}")


def identifiable_proved(everyone: Sequence[tuple[bool, ...]] | None, dim: int,
                        certified: Mapping[tuple[bool, ...], RankBounds | None],
                        own_reaches: Callable[[tuple[bool, ...], int], bool] | None) -> bool:
    """``C_S`` on every tie resolution: the smallest verdict over the resolutions is ``identifiable``.

    Parameters
    ----------
    everyone : list of sides, or None
        Every tie resolution, enumerated by the verifier (:func:`exactident.verify.resolutions.every_resolution`);
        None past its cap (then nothing is proved).
    dim : int
        ``dim`` (``dim_free`` for a layer graph).
    certified : dict sides -> RankBounds
        Certified bounds on ``R_Gamma(s)`` (missing or None: not certified).
    own_reaches : callable ``(sides, target) -> bool``, or None
        The verifier's own ranks mod its primes reach ``target`` at ``sides``; None: use only ``certified``.

    Examples
    --------
    >>> identifiable_proved([(True,), (False,)], 3, {(True,): RankBounds(3, 3)}, lambda s, v: True)
    True
    >>> identifiable_proved([(True,), (False,)], 3, {(True,): RankBounds(3, 3)}, None)
    False
    >>> identifiable_proved([(True,), (False,)], 3, {(False,): RankBounds(1, 2)}, lambda s, v: 1 / 0)
    False
    """
    if everyone is None or not everyone:
        return False
    # one resolution certified below dim settles it (no own rank is computed)
    if any((b := certified.get(s)) is not None and b.hi < dim for s in everyone):
        return False
    for s in everyone:
        if proves_identifiable(certified.get(s), dim):
            continue
        if own_reaches is None or not own_reaches(s, dim):
            return False
    return True


def verdict_strength_problems(verdict: str | None, identifiable: bool, not_identifiable: bool,
                              why_identifiable: str = "", why_not: str = "") -> list[str]:
    """A verdict weaker than, or opposite to, what the report's own verified certificate proves.

    ``identifiable`` / ``not_identifiable``: what the verifier proved from the report's certificate (and the
    case).  ``inconclusive`` beside a proof is a downgrade; the opposite verdict beside a proof is false.
    (Whether the claimed verdict itself is proved is checked by the caller.)

    Examples
    --------
    >>> verdict_strength_problems("inconclusive", False, True, why_not="a valid dead_units part")
    ['verdict: report says inconclusive, but the certificate proves not-identifiable (a valid dead_units part)']
    """
    proved = [(name, why) for name, ok, why in (("identifiable", identifiable, why_identifiable),
                                                ("not-identifiable", not_identifiable, why_not)) if ok]
    if len(proved) == 2:
        return [f"verdict: the certificate proves both identifiable ({why_identifiable}) and not-identifiable "
                f"({why_not}): a contradiction, nothing is valid"]
    if not proved or verdict is None or verdict == proved[0][0]:
        return []
    name, why = proved[0]
    return [f"verdict: report says {verdict}, but the certificate proves {name}" + (f" ({why})" if why else "")]


def graph_verdict_problems(verdict: str | None, rule: str | None, proofs: Mapping[str, bool], identifiable: bool,
                           dim_free: int, features: str, note: str = "") -> tuple[list[str], list[str]]:
    """``(failures, messages)`` of a layer graph's ``verdict`` and ``decided_by``.

    ``proofs``: each resolution-free part present and whether it was verified; ``identifiable``: what
    :func:`identifiable_proved` gave; ``note``: added to its proof in a message (:func:`past_cap_note`).
    ``decided_by`` must be a rule of :data:`GRAPH_RULES` giving the verdict, backed by its part; the
    verdict must be proved; no weaker verdict (:func:`verdict_strength_problems`, the plain MLP's rule).
    """
    fails: list[str] = []
    msgs: list[str] = []
    not_identifiable = any(proofs.values())
    if rule is not None and (rule not in GRAPH_RULES or (verdict is not None and GRAPH_RULES[rule] != verdict)):
        why = "Theorem 8 (C_N) is not proved for " + features if rule == "theorem-8" else \
            f"not a rule giving {verdict} for a constrained network"
        fails.append(f"decided_by: {rule!r}: {why}")
    # every not-identifiable rule names its part (as the plain MLP's line / entering / structural rules do)
    if rule in GRAPH_RULES and GRAPH_RULES[rule] == "not-identifiable" and not proofs.get(rule.replace("-", "_")):
        fails.append(f"decided_by: {rule} without a verified {rule.replace('-', '_')} part")
    if verdict == "identifiable":
        if not identifiable:
            fails.append(f"verdict: identifiable needs rank Gamma_free = dim_free = {dim_free} on every tie "
                         "resolution; the verifier finds less")
        else:
            msgs.append("verdict identifiable verified: rank Gamma_free = dim_free on every tie resolution")
    elif verdict == "not-identifiable":
        if not not_identifiable:
            fails.append(f"verdict: not-identifiable needs an exact certificate for {features} (dead_units, "
                         "constant_units, slope_lines, submersion, entering_submersion, line or constant_rank), "
                         "verified")
    elif verdict == "degenerate":
        fails.append("verdict: no degenerate rule is proved for constrained networks")
    fails += verdict_strength_problems(
        verdict, identifiable, not_identifiable, "rank Gamma_free = dim_free on every tie resolution" + note,
        "a valid " + " / ".join(k for k, ok in proofs.items() if ok) + " part")
    return fails, msgs


def resolution_free_proof(facts: ConstrainedFacts, key: str, part: dict) -> tuple[list[str], str]:
    """Failures of one part of :data:`RESOLUTION_FREE` in a layer graph's certificate, and what it shows when valid.

    Each part is re-checked by its own module from the verifier's facts (:mod:`~exactident.verify.line`,
    :mod:`~exactident.verify.submersion`, :mod:`~exactident.verify.constant_rank`).
    """
    if key in ("line", "dead_units", "constant_units", "slope_lines"):
        bad = check_graph_line(facts, part) if key == "line" else check_line_part(facts, key, part)
        t0 = part["t0"]
        segment = "every t >= 0" if t0 is None else f"0 <= t <= t0 = {t0}"
        return bad, (f"the outputs on X are constant along theta + t delta for {segment}"
                     + (" and f(x*) moves at the probe" if key == "line"
                        else ", delta is not in S_H, and f(x) changes"))
    if key == "constant_rank":
        return check_constant_rank(facts, part), ("rank Gamma_free = rank A with alpha constant near theta: the "
                                                  "rank is constant there, and a direction of the fibre moves f(y)")
    bad = (check_submersion if key == "submersion" else check_entering_submersion)(facts, part)
    return bad, "Gamma_free has full row rank and a direction of its fiber moves f(y)"
