"""A certificate that needs no tie resolution decides alone (exactident.verify.verdict).

A layer graph with four samples on kinks (2^4 tie resolutions) and one dead unit: a ``dead_units`` line
proves ``not-identifiable`` whatever side each tie takes, so the verifier accepts it without enumerating
the resolutions (past a cap of 8 it cannot) and without computing one rank of ``Gamma_free``.  The truth
is derived here by hand with Fractions: along ``b_1[0] - t`` the outputs on X stay the same for every
``t >= 0`` while ``f(11)`` moves, so theta and ``theta + t delta`` are not equivalent (they compute
different functions) and no neighbourhood of theta is identifiable from X.
"""

from __future__ import annotations

from fractions import Fraction

import flint
import pytest

from exactident.io.limits import WorkLimits
from exactident.model.network import Network
from exactident.verify.certificate import verify_constrained
from exactident.verify.facts import ConstrainedFacts

q = flint.fmpq

# f(x) = relu(x - 10) + relu(x - 1) + relu(x - 2) + relu(x - 3) + relu(x) on x = 0, 1, 2, 3, 4:
# unit 0 is dead on X (x - 10 < 0), units 1..4 each have one sample exactly on their kink.
CUTS = (10, 1, 2, 3, 0)
XS = (0, 1, 2, 3, 4)


def _f(x: Fraction, b0: Fraction) -> Fraction:
    """The network by hand, with unit 0's bias ``b0`` (the others as in CUTS)."""
    biases = [b0] + [Fraction(-c) for c in CUTS[1:]]
    return sum((max(x + b, Fraction(0)) for b in biases), Fraction(0))


def _case():
    net = Network((1, 5, 1), [flint.fmpq_mat([[1]] * 5), flint.fmpq_mat([[1] * 5])],
                  [[q(-c) for c in CUTS], [q(0)]])
    return net, [[q(x)] for x in XS]


def _report(verdict: str, decided_by: str, with_part: bool = True) -> dict:
    # the dead unit's line: lower b_1[0] (parameter 5: W_1 is 0..4, b_1 5..9, W_2 10..14, b_2 15)
    f0, f_eps = _f(Fraction(11), Fraction(-10)), _f(Fraction(11), Fraction(-10) - Fraction(1, 2))
    part = {"kind": "dead-units", "parameter": 5, "name": "b_1[0]", "units": [[1, 0]], "direction": "-1",
            "t0": None, "eps": "1/2", "x": ["11"], "f_0": [str(f0)], "f_eps": [str(f_eps)]}
    report = {"format": "exactident-report/1", "name": "ties", "verdict": verdict, "decided_by": decided_by,
              "widths": [1, 5, 1], "n_samples": len(XS), "rank_gamma": None, "rank_a": None, "cn": None,
              "architecture": {"features": [], "n_params": 16, "rank_t": 16, "symmetry_dim": 5, "dim_free": 11}}
    if with_part:
        report["certificate"] = {"dead_units": part}
    return report


def test_the_truth_by_hand():
    # every output on X is the same for every t >= 0 (x - 10 - t < 0 on X), f(11) = 39 - t for 0 <= t <= 1
    for t in (Fraction(0), Fraction(1, 3), Fraction(1), Fraction(50)):
        assert [_f(Fraction(x), Fraction(-10) - t) for x in XS] == [_f(Fraction(x), Fraction(-10)) for x in XS]
    assert _f(Fraction(11), Fraction(-10)) == 39
    assert _f(Fraction(11), Fraction(-10) - Fraction(1, 2)) == Fraction(77, 2)
    # four samples on kinks: 2^4 tie resolutions
    cn, X = _case()
    assert sorted(ConstrainedFacts.from_network(cn, X).ties) == [(0, 1, 4), (1, 1, 1), (2, 1, 2), (3, 1, 3)]


def test_line_decides_without_the_resolutions(monkeypatch):
    cn, X = _case()
    calls = []
    real = ConstrainedFacts.gamma_mod_p

    def counted(self, p, active=None):
        calls.append(p)
        return real(self, p, active)

    monkeypatch.setattr(ConstrainedFacts, "gamma_mod_p", counted)
    valid, msgs = verify_constrained(cn, X, _report("not-identifiable", "dead-units"))
    assert valid, msgs
    assert calls == []  # no rank of Gamma_free on any of the 16 resolutions
    # past the cap on tie resolutions (8 < 16) the line still decides: it needs none
    valid, msgs = verify_constrained(cn, X, _report("not-identifiable", "dead-units"),
                                     limits=WorkLimits(max_resolutions=8))
    assert valid, msgs


@pytest.mark.parametrize("verdict, rule", [("inconclusive", "none"), ("identifiable", "free-rank")])
def test_weaker_or_opposite_verdict_refused_past_the_cap(verdict, rule):
    cn, X = _case()
    valid, msgs = verify_constrained(cn, X, _report(verdict, rule), limits=WorkLimits(max_resolutions=8))
    assert not valid
    assert any("proves not-identifiable" in m for m in msgs), msgs


def test_not_identifiable_without_the_line_refused():
    cn, X = _case()
    assert not verify_constrained(cn, X, _report("not-identifiable", "dead-units", with_part=False),
                                  limits=WorkLimits(max_resolutions=8))[0]


# ---------------------------------------------------------------------------------------------------------
# the rule against weaker verdicts, one for both kinds: the verifier's own ranks count against `inconclusive`
# within its --max-resolutions, on the tie resolutions the report analysed and past the cap a report records
# alike (a recorded cap is a fact about the run, which no verifier can recompute); a report that lists none
# and records no cap is refused (tests/test_verify_resolution_cap.py has the engine's own reports)

XS_FULL = ("-1/2", "1", "2", "-1")  # f = 3 relu(2 x + 1): sample -1/2 on the kink, -1 inactive


def _gamma_free_rank_by_hand(tie_active: bool) -> int:
    # Gamma_free over (w, b, v, c) at w = 2, b = 1, v = 3: an active sample gives (v x, v, w x + b, 1), an
    # inactive one (0, 0, 0, 1); the tie (x = -1/2) takes the side of the resolution
    import sympy as sp

    rows = []
    for x in map(Fraction, XS_FULL):
        z = 2 * x + 1
        rows.append([3 * x, 3, z, 1] if z > 0 or (z == 0 and tie_active) else [0, 0, 0, 1])
    return sp.Matrix(rows).rank()


def _graph_report(patterns: bool) -> dict:
    report = {"format": "exactident-report/1", "name": "k", "verdict": "inconclusive", "decided_by": "none",
              "widths": [1, 1, 1], "n_samples": 4, "rank_gamma": None, "rank_a": None, "cn": None,
              "architecture": {"features": [], "n_params": 4, "rank_t": 4, "symmetry_dim": 1, "dim_free": 3}}
    if patterns:  # the resolutions the report says it analysed, with no rank certified
        report["patterns"] = [{"ties": [{"sample": 0, "layer": 1, "neuron": 0, "active": a}], "rank_gamma": None,
                               "rank_a": None, "cs": None, "cn": None} for a in (True, False)]
    return report


CAP_1 = {"why": "cap", "max_resolutions": 1, "log2_resolutions": 1}  # 2^1 resolutions past a cap of 1


def test_inconclusive_on_analysed_resolutions_refused_where_own_ranks_prove_cs():
    # dim_free = 4 parameters - 1 rescaling = 3, and Gamma_free has rank 3 on both resolutions: C_S everywhere
    assert [_gamma_free_rank_by_hand(side) for side in (True, False)] == [3, 3]
    net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])], [[q(1)], [q(0)]])
    cn, X = net, [[q(Fraction(x).numerator, Fraction(x).denominator)] for x in XS_FULL]
    valid, msgs = verify_constrained(cn, X, _graph_report(patterns=True))
    assert not valid and any("proves identifiable" in m for m in msgs), msgs
    # nothing enumerated and no cap recorded: it may have dropped them (and the verifier's ranks prove C_S)
    valid, msgs = verify_constrained(cn, X, _graph_report(patterns=False))
    assert not valid and any(m.startswith("resolutions_not_enumerated: missing") for m in msgs), msgs
    # a cap recorded: consistent with the case (2^1 > 1), but the verifier enumerates the 2 resolutions itself
    capped = dict(_graph_report(patterns=False), resolutions_not_enumerated=CAP_1)
    valid, msgs = verify_constrained(cn, X, capped)
    assert not valid and any("proves identifiable" in m and "cap of 1" in m for m in msgs), msgs
    # past the verifier's own cap too, the consistent record is all it can check: inconclusive is not false
    valid, msgs = verify_constrained(cn, X, capped, limits=WorkLimits(max_resolutions=1))
    assert valid, msgs


def test_mlp_inconclusive_past_the_engine_cap():
    import sympy as sp

    from exactident.io.case import parse_case
    from exactident.verify.certificate import verify_certificate

    # the plain MLP's Gamma over (w, b, c) (v = 3 the fixed edge): (v x, v, 1) active, (0, 0, 1) inactive
    ranks = [sp.Matrix([[3 * x, 3, 1] if 2 * x + 1 > 0 or (2 * x + 1 == 0 and side) else [0, 0, 1]
                        for x in map(Fraction, XS_FULL)]).rank() for side in (True, False)]
    assert ranks == [3, 3]  # dim = 1 + 1 + 1: C_S on both resolutions, identifiable
    case = parse_case({"format": "exactident-case/1", "name": "k", "widths": [1, 1, 1],
                       "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]], "sample": [[x] for x in XS_FULL]})
    report = {"name": "k", "verdict": "inconclusive", "on_boundary": True, "n_ties": 1,
              "certificate": {"boundary": {"ties": [{"sample": 0, "layer": 1, "neuron": 0}], "invisible_ties": []}}}
    valid, msgs = verify_certificate(case, report, limits=WorkLimits(max_resolutions=1))
    assert not valid and msgs[-1].startswith("resolutions_not_enumerated: missing"), msgs
    report["resolutions_not_enumerated"] = CAP_1
    assert verify_certificate(case, report, limits=WorkLimits(max_resolutions=1))[0]
    valid, msgs = verify_certificate(case, report)
    assert not valid and "proves identifiable" in msgs[-1], msgs
