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
