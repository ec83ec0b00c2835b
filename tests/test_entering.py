"""The exact strict-direction search (``entering.find_strict_direction``) without the float LP.

Right answers by construction:
- feasible systems: rows oriented so that a chosen ``d0`` satisfies every ``row . d0 > 0``;
- infeasible systems (Gordan's alternative): the last row is minus a positive
  combination of the others, so no ``c`` can make every row positive.
"""

from __future__ import annotations

import json
import random

import flint
import pytest

from exactident.boundary import entering
from exactident.check import check
from exactident.io.case import parse_case

q = flint.fmpq


@pytest.fixture
def no_float_lp(monkeypatch):
    monkeypatch.setattr(entering, "_float_candidates", lambda rows: [])


def _feasible(rng: random.Random, m: int, k: int) -> list[list[flint.fmpq]]:
    d0 = [rng.randint(-3, 3) for _ in range(k)]
    d0[0] = d0[0] or 1  # a nonzero d0, so rows with row . d0 != 0 exist
    rows = []
    while len(rows) < m:
        row = [q(rng.randint(-4, 4), rng.randint(1, 3)) for _ in range(k)]
        dot = sum((a * d for a, d in zip(row, d0)), q(0))
        if dot != 0:
            rows.append(row if dot > 0 else [-a for a in row])
    return rows


def _infeasible(rng: random.Random, m: int, k: int) -> list[list[flint.fmpq]]:
    rows = [[q(rng.randint(-4, 4), rng.randint(1, 3)) for _ in range(k)] for _ in range(m - 1)]
    weights = [rng.randint(1, 5) for _ in rows]
    rows.append([-sum((w * r[j] for w, r in zip(weights, rows)), q(0)) for j in range(k)])
    return rows


@pytest.mark.parametrize("seed", range(40))
def test_feasible_systems_get_an_exactly_checked_direction(no_float_lp, seed):
    rng = random.Random(seed)
    rows = _feasible(rng, rng.randint(1, 6), rng.randint(1, 4))
    c, how = entering.find_strict_direction(rows)
    assert how == "exact Fourier-Motzkin"
    assert all(sum((a * x for a, x in zip(row, c)), q(0)) > 0 for row in rows)


@pytest.mark.parametrize("seed", range(40))
def test_infeasible_systems_are_proved_infeasible(no_float_lp, seed):
    rng = random.Random(1000 + seed)
    rows = _infeasible(rng, rng.randint(2, 6), rng.randint(1, 4))
    c, how = entering.find_strict_direction(rows)
    assert c is None and how in ("infeasible (exact Fourier-Motzkin)", "zero row")


def test_row_growth_is_bounded(no_float_lp, monkeypatch):
    monkeypatch.setattr(entering, "MAX_FM_ROWS", 3)
    rows = [[q(1), q(1)], [q(1), q(-1)], [q(-1), q(2)], [q(-1), q(3)]]  # 2 positive x 2 negative in x_0
    assert entering.find_strict_direction(rows) == (None, "too large for the exact Fourier-Motzkin fallback")


def test_degenerate_duplicate_tie_case_terminates():
    # Found by review: sympy's exact simplex never returned on this case's infeasible
    # resolutions (the duplicated sample (2, 2) resolved both ways).  Derivation of the
    # verdict: neuron 0 is strictly inactive at all samples (3x - 5y - 3/2 < 0 there),
    # neuron 1 is tied at all three (-2/3 x + 3/2 y - 5/3 = 0 at (4, 26/9) and (2, 2)).
    # With every tie inactive, f = b_2 on X: Gamma(s) has only the b_2 column, rank 1,
    # and rank A = rank of rows (0,...,0,1) = 1 < dim = 7, so C_N fails on that piece and
    # -e(b_1[1]) is a kernel direction lowering every tied pre-activation: not-identifiable.
    case = parse_case(json.loads('''{"format": "exactident-case/1", "name": "dup-tie", "widths": [2, 2, 1],
        "weights": [[["3", "-5"], ["-2/3", "3/2"]], [["-3", "5/2"]]], "biases": [["-3/2", "-5/3"], ["-3"]],
        "sample": [["4", "26/9"], ["2", "2"], ["2", "2"]]}'''))
    report = check(case, numeric=False)
    assert report.verdict == "not-identifiable" and report.n_ties == 3
    assert report.certificate["entering"]["rank_gamma"] == report.certificate["entering"]["rank_a"] < 7
