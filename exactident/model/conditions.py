"""The conditions ``C_S`` (Theorem 9) and ``C_N`` (Theorem 8) and the verdict rules (docs/theory.md, verdict rules).

For ``theta`` outside ``S`` and off the boundary ``Delta_X``:

- ``C_S``: ``rank_gamma == dim`` -> **identifiable** (Theorem 9);
- ``C_N`` fails: ``rank_gamma == rank_a < dim`` -> **not-identifiable** (Theorem 8);
- otherwise (``rank_gamma < rank_a`` and ``< dim``) -> **inconclusive**.

``theta`` in ``S`` -> **degenerate**: a neuron can be removed and the
theorems do not apply.  Boundary cases (ties) are decided in
:mod:`exactident.boundary.analyse`.
"""

from __future__ import annotations

from typing import Any

from exactident.errors import InvariantViolation

__all__ = [
    "DEGENERATE",
    "IDENTIFIABLE",
    "INCONCLUSIVE",
    "NOT_IDENTIFIABLE",
    "VERDICTS",
    "decided_by",
    "holds_cn",
    "holds_cs",
    "reason_from_ranks",
    "verdict_from_ranks",
]

#: Verdict: ``C_S`` holds (``rank_gamma == dim``, Theorem 9): theta is locally identifiable from X.
IDENTIFIABLE = "identifiable"
#: Verdict: ``C_N`` fails (``rank_gamma == rank_a < dim``, Theorem 8): theta is not locally identifiable.
NOT_IDENTIFIABLE = "not-identifiable"
#: Verdict: neither rule decides (off the boundary: ``rank_gamma < rank_a`` and ``rank_gamma < dim``).
INCONCLUSIVE = "inconclusive"
#: Verdict: theta is in ``S`` (a neuron can be removed); the theorems do not apply.
DEGENERATE = "degenerate"
#: Every verdict, in the order above.
VERDICTS = (IDENTIFIABLE, NOT_IDENTIFIABLE, INCONCLUSIVE, DEGENERATE)


def holds_cs(rank_gamma: int, dim: int) -> bool:
    """``C_S``: ``rank Gamma(X, theta) = |F_theta| + |B| = dim`` (Theorem 9)."""
    return rank_gamma == dim


def holds_cn(rank_gamma: int, rank_a: int | None, dim: int) -> bool:
    """``C_N``, in the form of docs/theory.md: it fails exactly when ``rank_gamma == rank_a < dim`` (Theorem 8).

    ``rank_a`` may be ``None`` only when ``C_S`` holds (then ``C_N`` holds too).
    """
    if rank_a is None:
        if rank_gamma != dim:
            raise InvariantViolation("rank_a is needed to decide C_N when C_S fails")
        return True
    return not (rank_gamma == rank_a and rank_gamma < dim)


def verdict_from_ranks(rank_gamma: int, rank_a: int | None, dim: int, degenerate: bool) -> str:
    """Verdict off the boundary (docs/theory.md, verdict rules).

    ``rank_a`` may be ``None`` when ``C_S`` holds (it is then not needed).

    Examples
    --------
    >>> verdict_from_ranks(3, 3, 3, False), verdict_from_ranks(2, 2, 3, False)
    ('identifiable', 'not-identifiable')
    >>> verdict_from_ranks(2, 3, 3, False), verdict_from_ranks(3, 3, 3, True)
    ('inconclusive', 'degenerate')
    """
    if degenerate:
        return DEGENERATE
    if holds_cs(rank_gamma, dim):
        return IDENTIFIABLE
    if rank_a is not None and not holds_cn(rank_gamma, rank_a, dim):
        return NOT_IDENTIFIABLE
    return INCONCLUSIVE


def reason_from_ranks(rank_gamma: int, rank_a: int | None, dim: int, verdict: str) -> str:
    """One line citing the theorem behind an off-boundary verdict."""
    if verdict == IDENTIFIABLE:
        return f"C_S holds: rank Gamma = {rank_gamma} = dim (Theorem 9)"
    if verdict == NOT_IDENTIFIABLE:
        return f"C_N fails: rank Gamma = rank A = {rank_gamma} < dim = {dim} (Theorem 8)"
    if verdict == INCONCLUSIVE:
        return (f"neither theorem applies: rank Gamma = {rank_gamma} < rank A = {rank_a} "
                f"and rank Gamma < dim = {dim}")
    raise InvariantViolation(f"no off-boundary reason for verdict {verdict!r}")


def decided_by(verdict: str, certificate: dict[str, Any] | None) -> str:
    """The rule that decided a verdict, read off its certificate (one of :data:`exactident.boundary.structural.RULES`).

    Examples
    --------
    >>> decided_by("identifiable", {"rank": {}}), decided_by("not-identifiable", {"rank": {}})
    ('theorem-9', 'theorem-8')
    >>> decided_by("not-identifiable", {"line": {}, "structural": {"mechanism": "dead-neuron"}})
    'dead-neuron'
    """
    cert = certificate or {}
    if verdict == DEGENERATE:
        return "degenerate"
    if verdict == INCONCLUSIVE:
        return "none"
    if "structural" in cert:
        return str(cert["structural"]["mechanism"])
    if "entering" in cert:
        return "boundary-entering"
    if "line" in cert:
        return "line"
    visible = bool((cert.get("boundary") or {}).get("ties"))
    if verdict == IDENTIFIABLE:
        return "boundary-cs" if visible else "theorem-9"
    return "theorem-8"
