"""Samples on activation boundaries (SPEC §2, ties).  Placeholder: full analysis in issue 3."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .conditions import INCONCLUSIVE

__all__ = ["BoundaryOutcome", "analyse_boundary"]


@dataclass
class BoundaryOutcome:
    verdict: str
    reason: str
    rank_gamma: int | None = None
    rank_a: int | None = None
    patterns: list[dict[str, Any]] | None = None
    certificate: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def analyse_boundary(net, X, state, fixed, max_resolutions: int = 4096) -> BoundaryOutcome:
    ties = ", ".join(str(t) for t in state.ties[:8]) + (" ..." if len(state.ties) > 8 else "")
    return BoundaryOutcome(INCONCLUSIVE, f"theta is on the boundary Delta_X ({len(state.ties)} ties: {ties}); "
                           "Theorems 8/9 do not apply there")
