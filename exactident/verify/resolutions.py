"""The tie resolutions of a case, enumerated by the verifier from the case alone: one rule for every network.

A *tie* is a sample on the kink of a hidden unit (``z = 0`` at a unit whose two sides differ: ReLU,
leaky ReLU, PReLU).  Near theta each tie can be on either side, so a claim about "every tie
resolution" (``C_S`` on each, the smallest ``R_Gamma`` over them, the identifiable verdict on the
boundary) needs all of them.  The report's own list is never trusted to be complete: the verifier
enumerates them here (:func:`every_resolution`) and compares the list a certificate gives with it
(:func:`cover_problems`): one missing, one listed twice or one that is not a resolution of the case
is not valid.  The verdict on the boundary is the smallest over the resolutions: ``identifiable``
needs ``C_S`` on every one of them (:func:`exactident.verify.verdict.identifiable_proved`).

Which sides are free, recomputed from the case (:class:`~exactident.verify.facts.CaseFacts`,
:class:`~exactident.verify.facts.ConstrainedFacts`):

- a plain ReLU MLP: the *visible* ties (a tie whose sample leaves every unit of a later hidden layer
  strictly inactive changes nothing), ties at equal sample points one class taking one side (near
  theta the pre-activation is a function of the point): ``2^(classes)`` resolutions;
- a layer graph: the *persistent* ties (:func:`persistent_ties`: a first-layer unit with a fixed bias
  whose free weights all meet a zero input: its pre-activation stays 0 and no column of
  ``Gamma_free`` depends on its side) are enumerated active only: ``2^(ties - persistent)``
  resolutions, in the engine's order (the pure rule
  :func:`exactident.model.gamma_free.tie_resolutions` on the ties the verifier recomputed).

Past ``--max-resolutions`` the verifier enumerates nothing (:func:`every_resolution` returns None)
and a claim that needs every resolution is not verified.  A certificate that does not depend on a
resolution (a line of constant outputs) is checked without them (:mod:`exactident.verify.verdict`).

A report that lists no resolution says why in ``resolutions_not_enumerated`` (the engine's cap
``max_resolutions`` and ``log2_resolutions = k``); :func:`not_enumerated_problems` holds it against
the ``k`` recomputed here: the record must give the case's ``k`` and ``2^k > max_resolutions``, and an
``inconclusive`` report on a case with resolutions to enumerate that lists none and records no cap
is refused (it may just have dropped them).  Whether the verifier's own ranks then prove a stronger
verdict is :mod:`exactident.verify.verdict`'s rule.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

from exactident.io.report import NOT_ENUMERATED
from exactident.model.gamma_free import persistent_tie_indices, tie_resolutions
from exactident.verify.facts import CaseFacts, ConstrainedFacts

__all__ = ["NOT_ENUMERATED", "cover_problems", "every_resolution", "n_free_sides", "not_enumerated_problems",
           "persistent_ties"]


def persistent_ties(facts: ConstrainedFacts) -> set[tuple[int, int, int]]:
    """The ties ``(sample, layer, unit)`` of a layer graph that are persistent (module docstring): the engine's
    rule (:func:`exactident.model.gamma_free.persistent_tie_indices`, a pure function) on the verifier's own
    ties."""
    return {facts.ties[k] for k in persistent_tie_indices(facts.cn, facts.X, facts.ties)}


def n_free_sides(facts: CaseFacts | ConstrainedFacts) -> int:
    """``k``: the case has ``2^k`` tie resolutions (module docstring)."""
    if isinstance(facts, ConstrainedFacts):
        return len(facts.ties) - len(persistent_ties(facts))
    return len(facts.classes)


def every_resolution(facts: CaseFacts | ConstrainedFacts, max_resolutions: int,
                     order: Sequence[tuple[int, int, int]] | None = None) -> list[tuple[bool, ...]] | None:
    """Every tie resolution of the case, as sides in tie order; None past ``max_resolutions``.

    Parameters
    ----------
    facts : CaseFacts or ConstrainedFacts
        The verifier's own facts.
    max_resolutions : int
        The verifier's cap (``--max-resolutions``).
    order : list of ties, optional
        A plain MLP's visible ties in the order the keys use (default: sorted); a layer graph's keys
        follow ``facts.ties`` (persistent ties active).

    Examples
    --------
    ``f = 3 relu(2x + 1)`` at ``-1/2, 1, -1/2``: two ties at one point, one class, two resolutions.

    >>> from exactident.io.case import parse_case
    >>> case = parse_case({"format": "exactident-case/1", "name": "k", "widths": [1, 1, 1],
    ...                    "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]],
    ...                    "sample": [["-1/2"], ["1"], ["-1/2"]]})
    >>> every_resolution(CaseFacts.from_case(case), 1024)
    [(True, True), (False, False)]
    >>> every_resolution(CaseFacts.from_case(case), 1) is None
    True
    """
    if 2 ** n_free_sides(facts) > max_resolutions:
        return None
    if isinstance(facts, ConstrainedFacts):
        persistent = persistent_ties(facts)
        return list(tie_resolutions(len(facts.ties), [k for k, t in enumerate(facts.ties) if t in persistent]))
    ties = list(order) if order is not None else list(facts.visible)
    class_of = {t: k for k, members in enumerate(facts.classes) for t in members}
    return [tuple(side[class_of[t]] for t in ties)
            for side in itertools.product((True, False), repeat=len(facts.classes))]


def cover_problems(listed: Iterable[Hashable], everyone: Iterable[Hashable], where: str,
                   show: Any = repr) -> list[str]:
    """The certificate's resolutions against the verifier's own enumeration: each exactly once, no other.

    Parameters
    ----------
    listed : the resolutions the certificate lists, in its order (keys in the verifier's tie order)
    everyone : every tie resolution of the case, enumerated by the verifier
    where : JSON path of the list, for messages
    show : how a key is printed

    Examples
    --------
    >>> cover_problems([(True,)], [(True,), (False,)], "r")
    ['r: the certificate lists 1 of the 2 tie resolutions; missing: (False,) (a claim about the smallest rank \
over the resolutions needs every one)']
    """
    listed, everyone = list(listed), list(everyone)
    fails = []
    seen: set = set()
    twice = [s for s in listed if s in seen or seen.add(s)]  # type: ignore[func-returns-value]
    if twice:
        fails.append(f"{where}: resolution {show(twice[0])} is listed twice")
    known = set(everyone)
    other = [s for s in seen if s not in known]
    if other:
        fails.append(f"{where}: {show(other[0])} is not a tie resolution of the case")
    missing = [s for s in everyone if s not in seen]
    if missing:
        fails.append(f"{where}: the certificate lists {len(seen & known)} of the {len(everyone)} tie resolutions; "
                     f"missing: {show(missing[0])}{f' and {len(missing) - 1} more' if len(missing) > 1 else ''} "
                     "(a claim about the smallest rank over the resolutions needs every one)")
    return fails


def _power(k: int) -> str:
    """``2^k``, with its value when short."""
    return f"2^{k} = {2 ** k}" if k <= 64 else f"2^{k}"


def not_enumerated_problems(report: Any, facts: CaseFacts | ConstrainedFacts,
                            part: str) -> tuple[list[str], list[str]]:
    """The report's ``resolutions_not_enumerated`` against the tie resolutions the verifier counts (module docstring).

    Parameters
    ----------
    report : dict
        The report (already checked against the schema: the field, when present, is
        ``{"why": "cap", "max_resolutions": int, "log2_resolutions": int}``).
    facts : CaseFacts or ConstrainedFacts
        The verifier's own facts; ``k = n_free_sides(facts)``.
    part : str
        The certificate part that lists the resolutions (``boundary`` for a plain MLP, ``free_rank`` for a
        layer graph); its ``resolutions`` or the report's ``patterns`` list them.

    Returns
    -------
    (failures, messages) : (list of str, list of str)
        One line per failure, naming the field (none when the record, or its absence, is consistent
        with the case); what a consistent record showed.

    Examples
    --------
    ``f = 3 relu(2x + 1)`` with the sample ``-1/2`` on the kink: one class of ties, ``2^1`` resolutions.

    >>> from exactident.io.case import parse_case
    >>> facts = CaseFacts.from_case(parse_case({"format": "exactident-case/1", "name": "k", "widths": [1, 1, 1],
    ...     "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]], "sample": [["-1/2"], ["1"]]}))
    >>> record = {"why": "cap", "max_resolutions": 1, "log2_resolutions": 1}
    >>> not_enumerated_problems({"verdict": "inconclusive", NOT_ENUMERATED: record}, facts, "boundary")[0]
    []
    >>> not_enumerated_problems({"verdict": "inconclusive"}, facts, "boundary")[0][0][:71]
    'resolutions_not_enumerated: missing: the verdict is inconclusive and th'
    >>> not_enumerated_problems({NOT_ENUMERATED: dict(record, max_resolutions=2)}, facts, "boundary")[0][0][:66]
    'resolutions_not_enumerated.max_resolutions: the case has 2^1 = 2 t'
    """
    if not isinstance(report, dict):
        return [], []
    found = (report.get("certificate") or {}).get(part)
    listed = (isinstance(found, dict) and bool(found.get("resolutions"))) or bool(report.get("patterns"))
    k = n_free_sides(facts)
    record = report.get(NOT_ENUMERATED)
    if record is None:
        # something to enumerate: a plain MLP's visible ties (theta not in S), a layer graph's ties
        to_resolve = bool(facts.ties) if isinstance(facts, ConstrainedFacts) else bool(facts.visible and
                                                                                       not facts.degenerate)
        if report.get("verdict") == "inconclusive" and to_resolve and not listed:
            return [f"{NOT_ENUMERATED}: missing: the verdict is inconclusive and the report lists none of the "
                    f"case's {_power(k)} tie resolutions without recording the cap it stopped at (it may have "
                    "dropped them)"], []
        return [], []
    if listed:
        return [f"{NOT_ENUMERATED}: the report says its tie resolutions were not enumerated, but it lists them"], []
    claimed, cap = record["log2_resolutions"], record["max_resolutions"]
    if claimed != k:
        return [f"{NOT_ENUMERATED}.log2_resolutions: report says {claimed}, the case has {_power(k)} tie "
                "resolutions"], []
    if k <= cap.bit_length() - 1:  # 2^k <= cap, without building 2^k
        return [f"{NOT_ENUMERATED}.max_resolutions: the case has {_power(k)} tie resolutions, within the recorded "
                f"cap of {cap}: they were not past it"], []
    return [], [f"{NOT_ENUMERATED} consistent with the case: {_power(k)} tie resolutions, past the report's cap "
                f"of {cap}"]
