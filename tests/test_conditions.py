"""``exactident.model.conditions``: the SPEC §2 verdict table and its guards."""

from __future__ import annotations

import pytest

from exactident.errors import InvariantViolation
from exactident.model.conditions import (
    DEGENERATE,
    IDENTIFIABLE,
    INCONCLUSIVE,
    NOT_IDENTIFIABLE,
    holds_cn,
    holds_cs,
    reason_from_ranks,
    verdict_from_ranks,
)


@pytest.mark.parametrize("rank_gamma,rank_a,dim,degenerate,verdict", [
    (5, 5, 5, False, IDENTIFIABLE),        # C_S (Theorem 9)
    (5, None, 5, False, IDENTIFIABLE),     # rank_a not needed
    (5, 8, 5, False, IDENTIFIABLE),        # R_A may exceed dim
    (4, 4, 5, False, NOT_IDENTIFIABLE),    # C_N fails (Theorem 8)
    (0, 0, 3, False, NOT_IDENTIFIABLE),    # empty sample
    (3, 4, 5, False, INCONCLUSIVE),        # R_Gamma < R_A, < dim
    (3, None, 5, False, INCONCLUSIVE),     # cannot decide C_N without R_A
    (5, 5, 5, True, DEGENERATE),           # S wins first
    (4, 4, 5, True, DEGENERATE),
])
def test_verdict_table(rank_gamma, rank_a, dim, degenerate, verdict):
    assert verdict_from_ranks(rank_gamma, rank_a, dim, degenerate) == verdict


def test_conditions():
    assert holds_cs(3, 3) and not holds_cs(2, 3)
    assert not holds_cn(2, 2, 3) and holds_cn(2, 3, 3) and holds_cn(3, 3, 3) and holds_cn(3, None, 3)


def test_cn_needs_rank_a_when_cs_fails():
    with pytest.raises(InvariantViolation, match="rank_a is needed to decide C_N when C_S fails"):
        holds_cn(2, None, 3)


def test_reasons_cite_the_theorems():
    assert "Theorem 9" in reason_from_ranks(3, 3, 3, IDENTIFIABLE)
    assert "Theorem 8" in reason_from_ranks(2, 2, 3, NOT_IDENTIFIABLE)
    assert "rank A = 3" in reason_from_ranks(2, 3, 3, INCONCLUSIVE)
    with pytest.raises(InvariantViolation, match="no off-boundary reason for verdict 'degenerate'"):
        reason_from_ranks(3, 3, 3, DEGENERATE)
