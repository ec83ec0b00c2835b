"""The verifier proves a wide ``Gamma``'s rank lower bound from a column sketch, never building ``Gamma``.

``rank_p(Gamma S) <= rank_p(Gamma)`` for every ``S``, so a sketch that reaches the claimed rank mod p
proves it as a lower bound; one that exceeds it disproves it; below, the whole ``Gamma`` decides.
"""

from __future__ import annotations

import copy
import json
import random

import flint
import pytest

import exactident.verify.rank as vrank
from exactident.check import check
from exactident.io.case import Case
from exactident.io.report import reports_to_json
from exactident.model.network import Network
from exactident.verify.certificate import verify_certificate


def _wide_case(seed: int) -> Case:
    # widths (20, 3, 1), 5 samples: Gamma is 5 x 64 (dim = 20*3 + 3*1 + 1), far wider than the
    # claim + 16 columns the sketch needs.
    rng = random.Random(seed)

    def q() -> flint.fmpq:
        return flint.fmpq(rng.randint(-9, 9), rng.randint(1, 5))

    W1 = flint.fmpq_mat(3, 20, [q() for _ in range(60)])
    W2 = flint.fmpq_mat([[flint.fmpq(rng.randint(1, 9)) for _ in range(3)]])
    net = Network((20, 3, 1), [W1, W2], [[flint.fmpq(rng.randint(1, 9)) for _ in range(3)], [q()]])
    X = [[q() for _ in range(20)] for _ in range(5)]
    return Case("wide", net, X)


def _report(case: Case) -> dict:
    return json.loads(reports_to_json([check(case, numeric=False)], as_list=False))


def _lower(rep: dict) -> dict:
    return rep["certificate"]["rank"]["rank_gamma"]["lower"]


@pytest.mark.parametrize("seed", range(4))
def test_genuine_wide_report_verifies_without_building_gamma(seed, monkeypatch):
    case = _wide_case(seed)
    rep = _report(case)
    assert rep["certificate"]["rank"]["rank_gamma"]["shape"][1] > 16 + _lower(rep)["rank_mod_p"] * 9 // 8

    def refuse(*a, **k):
        raise AssertionError("the whole Gamma mod p was built")

    monkeypatch.setattr(vrank, "gamma_mod_p", refuse)
    valid, messages = verify_certificate(case, rep, "r.json", require_claims=True)
    assert valid, messages


@pytest.mark.parametrize("shape", ["wide", "very tall"])
@pytest.mark.parametrize("delta", [-1, 1])
def test_a_wrong_rank_mod_p_is_rejected_on_either_side(shape, delta):
    """Above the rank mod p: the sketch falls short and ``Gamma mod p`` is built and eliminated.  Below it: the
    sketch's rank (a lower bound) exceeds the claim here.  (On a very tall ``Gamma``, a claim below the rank
    mod p that an unlucky sketch matched would still be a true lower bound, accepted as one, as before the
    sketch came from the backward pass.)"""
    case = _wide_case(0) if shape == "wide" else _tall_case(1)
    rep = _report(case)
    bad = copy.deepcopy(rep)
    _lower(bad)["rank_mod_p"] += delta
    valid, messages = verify_certificate(case, bad, "r.json", require_claims=True)
    assert not valid
    assert any("rank_gamma.lower.rank_mod_p" in m for m in messages), messages


def _tall_case(seed: int) -> Case:
    # widths (2, 3, 2), 150 samples: Gamma is 300 x 17, very tall (rows above 2 cols + 64)
    rng = random.Random(seed)
    W1 = flint.fmpq_mat(3, 2, [flint.fmpq(rng.randint(-9, 9) or 1, rng.randint(1, 4)) for _ in range(6)])
    W2 = flint.fmpq_mat(2, 3, [flint.fmpq(rng.randint(1, 9)) for _ in range(6)])
    net = Network((2, 3, 2), [W1, W2], [[flint.fmpq(rng.randint(-20, 20), 11) for _ in range(3)], [flint.fmpq(0)] * 2])
    X = [[flint.fmpq(rng.randint(-2000, 2000), 997) for _ in range(2)] for _ in range(150)]  # off the boundary
    return Case("tall", net, X)


@pytest.mark.parametrize("seed", range(4))
def test_genuine_very_tall_report_verifies_from_the_backward_pass_sketch(seed, monkeypatch):
    """The rank_gamma lower bound of a very tall ``Gamma`` is proved from the fused sparse sketch
    (``gamma_live_row_sketch_mod_p``): ``Gamma mod p`` is never built for it."""
    case = _tall_case(seed)
    rep = _report(case)
    built = []
    real = vrank.gamma_mod_p
    monkeypatch.setattr(vrank, "gamma_mod_p", lambda *a, **k: built.append(1) or real(*a, **k))
    valid, messages = verify_certificate(case, rep, "r.json", require_claims=True)
    assert valid, messages
    assert rep["verdict"] != "identifiable" or not built  # rank = dim: nothing else needs Gamma mod p
