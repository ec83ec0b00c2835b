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

from collections.abc import Sequence
from typing import Any

from exactident.errors import InvariantViolation

__all__ = [
    "DEGENERATE",
    "IDENTIFIABLE",
    "INCONCLUSIVE",
    "NOT_IDENTIFIABLE",
    "VERDICTS",
    "cn_from_bounds",
    "cs_from_bounds",
    "decided_by",
    "holds_cn",
    "holds_cs",
    "reason_from_ranks",
    "too_few_samples",
    "verdict_from_ranks",
    "with_sample_size",
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


def cs_from_bounds(lower: int, upper: int, dim: int) -> bool | None:
    """``C_S`` from certified bounds ``lower <= R_Gamma <= upper``: True, False, or None (rank not settled).

    One rule for every report and architecture (``dim`` is ``dim_free`` beyond the layered ReLU MLP):
    ``C_S`` holds only when the certified *lower* bound reaches ``dim`` (an exact rank, or an interval whose
    lower end is ``dim``); it fails when the upper bound is below ``dim``.  An interval whose upper end
    reaches ``dim`` while its lower end is below proves neither: the rank is not settled, so neither
    ``identifiable`` (Theorem 9) nor ``cs: true`` nor ``cs: false`` may be claimed from it.  An upper bound
    is never evidence for ``C_S``: a structural count such as ``active-blocks`` can equal ``dim`` while the
    rank is far below.

    Examples
    --------
    >>> cs_from_bounds(5, 5, 5), cs_from_bounds(2, 4, 5), cs_from_bounds(2, 5, 5)
    (True, False, None)
    """
    if lower >= dim:
        return True
    if upper < dim:
        return False
    return None


def cn_from_bounds(upper: int, rank_a: int | None, rank_a_lower: int | None = None) -> bool | None:
    """``C_N`` from a certified upper bound ``R_Gamma <= upper``: True when ``upper`` is below ``R_A``, else None.

    ``R_A`` is the certified exact value ``rank_a`` or, when only that is known, a certified lower bound
    ``rank_a_lower``.  ``R_Gamma <= upper < R_A`` proves ``R_Gamma < R_A``, so ``C_N`` holds (Theorem 8 cannot
    say not-identifiable); otherwise the bounds leave it open (None: never False, which needs the exact
    ``R_Gamma = R_A``).  The engine and the verifier use this one rule.

    Examples
    --------
    >>> cn_from_bounds(111, 237), cn_from_bounds(111, None, 237), cn_from_bounds(111, 111), cn_from_bounds(5, None)
    (True, True, None, None)
    """
    below = rank_a if rank_a is not None else rank_a_lower
    return True if below is not None and upper < below else None


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


def too_few_samples(n_points: int, n_outputs: int, dim: int, *, free: bool = False) -> str | None:
    """The first clause of a reason when ``n N_L < dim``: no sample of this size can prove identifiability.

    ``n_points`` counts the distinct points of the sample (a repeated point repeats rows of ``Gamma``).
    ``Gamma`` has ``n N_L`` distinct rows at most, so ``rank Gamma <= n N_L < dim`` for every sample of
    ``n`` distinct points: ``C_S`` (Theorem 9) fails whatever the points; at least ``ceil(dim / N_L)``
    are needed.  With ``free`` the matrix is ``Gamma_free`` and ``dim`` is ``dim_free`` (a layer graph,
    where ``identifiable`` likewise needs ``rank Gamma_free = dim_free``).  None when ``n N_L >= dim``.

    Examples
    --------
    >>> print(too_few_samples(2, 1, 3))  # doctest: +ELLIPSIS
    2 distinct points x N_L = 2 < dim = 3: no sample of this size can prove identifiability (rank Gamma <= 2; ...
    >>> too_few_samples(3, 1, 3) is None
    True
    """
    rows = n_points * n_outputs
    if rows >= dim:
        return None
    g, d = ("Gamma_free", "dim_free") if free else ("Gamma", "dim")
    need = -(-dim // n_outputs)
    return (f"{n_points} distinct points x N_L = {rows} < {d} = {dim}: no sample of this size can prove "
            f"identifiability (rank {g} <= {rows}; at least {need} distinct points are needed)")


def with_sample_size(reason: str, X: Sequence[Sequence[Any]], n_outputs: int, dim: int, *,
                     free: bool = False) -> str:
    """``reason`` led by :func:`too_few_samples`'s clause when (distinct points of ``X``) ``* N_L < dim``
    (said first: it holds for any points), else ``reason`` unchanged.  ``X``: rows of exact numbers (Q)."""
    need = -(-dim // max(n_outputs, 1))  # distinct points that rule the clause out: counted up to there only
    distinct: set[tuple[str, ...]] = set()
    for row in X:
        distinct.add(tuple(str(v) for v in row))
        if len(distinct) >= need:
            return reason
    clause = too_few_samples(len(distinct), n_outputs, dim, free=free)
    return reason if clause is None else f"{clause}; {reason}"
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
