"""The exact simplex for strict systems, against Fourier-Motzkin (an independent exact method) and by hand."""

from __future__ import annotations

import json
import os

import flint
from hypothesis import given, settings
from hypothesis import strategies as st

from exactident.boundary.entering import find_strict_direction
from exactident.linalg.exact_lp import is_certificate, strict_solution

q = flint.fmpq


def _fm_feasible(rows) -> bool:
    """Fourier-Motzkin on the homogenised system (a, e).(x, s) > 0, s > 0 (exactident.boundary.entering)."""
    n = len(rows[0][0])
    c, how = find_strict_direction([list(a) + [e] for a, e in rows] + [[q(0)] * n + [q(1)]])
    assert c is not None or how in ("zero row", "infeasible (exact Fourier-Motzkin)")
    return c is not None


def _check(rows):
    x, y = strict_solution(rows)
    assert (x is None) != (y is None)
    if x is not None:
        assert all(sum((u * v for u, v in zip(a, x)), q(0)) + e > 0 for a, e in rows)
    else:
        assert is_certificate(rows, y)
    return x is not None


def test_by_hand():
    # x > 0, y > 0, x + y < 1: the open triangle
    assert _check([([q(1), q(0)], q(0)), ([q(0), q(1)], q(0)), ([q(-1), q(-1)], q(1))])
    # x > 0, y > 0, x + y < 0: empty; y = (1, 1, 1) is a certificate (degenerate: three lines through 0)
    rows = [([q(1), q(0)], q(0)), ([q(0), q(1)], q(0)), ([q(-1), q(-1)], q(0))]
    assert not _check(rows)
    assert is_certificate(rows, [q(1), q(1), q(1)]) and not is_certificate(rows, [q(1), q(1), q(0)])
    # x > y and y > x: empty, touching
    assert not _check([([q(1), q(-1)], q(0)), ([q(-1), q(1)], q(0))])
    # far away: x > 10^9 and x < 10^9 + 10^-9 (a thin slab far from the origin)
    assert _check([([q(1)], -q(10**9)), ([q(-1)], q(10**9) + q(1, 10**9))])


_c = st.integers(-3, 3)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_c, _c, _c, _c), min_size=1, max_size=9))
def test_agrees_with_fourier_motzkin(raw):
    rows = [([q(a), q(b), q(c)], q(e)) for a, b, c, e in raw if (a, b, c) != (0, 0, 0)]
    if rows:
        assert _check(rows) == _fm_feasible(rows)


def test_a_node_floats_cannot_decide():
    # tests/data/region_node_nearly_parallel.json: the node where the float LP's duals gave no certificate
    path = os.path.join(os.path.dirname(__file__), "data", "region_node_nearly_parallel.json")
    with open(path, encoding="utf-8") as f:
        rows = [([q(v) for v in r["a"]], q(r["e"])) for r in json.load(f)["rows"]]
    x, y = strict_solution(rows)
    assert x is None and is_certificate(rows, y)
    # the certificate needs more rows than the two nearly antiparallel ones the floats saw
    assert sum(1 for v in y if v != 0) > 2


def test_degenerate_and_constant_rows():
    # zero rows: 1 > 0 holds everywhere, 0 > 0 and -1 > 0 nowhere (the certificate is that row alone)
    assert _check([([q(0), q(0)], q(1)), ([q(1), q(0)], q(0))])
    for e in (q(0), q(-1)):
        x, y = strict_solution([([q(1), q(0)], q(0)), ([q(0), q(0)], e)])
        assert x is None and is_certificate([([q(1), q(0)], q(0)), ([q(0), q(0)], e)], y)
    # no variable at all (n = 0): the constants decide
    assert _check([([], q(1)), ([], q(2))]) and not _check([([], q(1)), ([], q(0))])
    # Beale's cycling example (the textbook rule cycles on it) as strict rows: its 3 constraints, x > 0,
    # and the objective above 0; the degenerate vertex 0 ties every row, Bland's rule must still end
    beale = [[q(-1, 4), q(8), q(1), q(-9)], [q(-1, 2), q(12), q(1, 2), q(-3)], [q(0), q(0), q(-1), q(0)]]
    rows = [(a, q(0)) for a in beale[:2]] + [(beale[2], q(1))]
    rows += [([q(int(i == j)) for j in range(4)], q(0)) for i in range(4)]
    rows.append(([q(3, 4), q(-20), q(1, 2), q(-6)], q(0)))
    assert _check(rows) == _fm_feasible(rows)
    rows[-1] = (rows[-1][0], q(-5, 4))  # objective > 5/4: Beale's optimum is 5/4 (x = (1, 0, 1, 0)), empty
    assert not _check(rows) and not _fm_feasible(rows)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_c, _c, _c), min_size=1, max_size=4),
       st.lists(st.tuples(st.integers(0, 3), st.sampled_from([-30, 0, 0, 30]), st.booleans(), _c),
                min_size=1, max_size=8))
def test_twins_scales_and_zero_rows_agree_with_fourier_motzkin(base, picks):
    # rows drawn from a few base rows: repeated, scaled by 10^+-30, negated with a shifted constant; zero rows too
    rows = []
    for i, k, neg, shift in picks:
        a1, a2, e = base[i % len(base)]
        s = q(10) ** k * (-1 if neg else 1)
        rows.append(([s * a1, s * a2], s * e + (shift if neg else 0)))
    feasible = _check(rows)
    if all(v == 0 for a, _ in rows for v in a):
        assert feasible == all(e > 0 for _, e in rows)
    elif any(all(v == 0 for v in a) and e <= 0 for a, e in rows):
        assert not feasible
    else:
        live = [r for r in rows if any(v != 0 for v in r[0])]
        assert feasible == _fm_feasible(live)
