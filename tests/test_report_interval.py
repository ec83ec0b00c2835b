"""A rank certified only as an interval is reported as one everywhere (issue 29, item 10).

When the verdict does not need the exact ``R_Gamma``, ``check`` certifies ``lo <= R_Gamma <= hi``.  The
report then carries the interval and the Monte Carlo value as first-class fields
(``Report.rank_gamma_interval``, ``Report.montecarlo``) and ``rank_gamma`` is None (``null`` in JSON):
no uncertified number where a certified one is expected, in the JSON, the table, ``repr``, the HTML
view and the CLI.

Right values: the exact rank of the full Jacobian of ``f(X)`` over every weight and bias, written
here with Fractions from the two-layer formula and ranked by sympy (equal to ``rank Gamma``: each fixed
edge's column is a combination of its neuron's other columns, by positive rescaling).
"""

from __future__ import annotations

import json
import random
from fractions import Fraction

import flint
import pytest
from sympy import QQ
from sympy.polys.matrices import DomainMatrix

from exactident.check import check
from exactident.io.case import Case
from exactident.io.report import reports_to_json
from exactident.model.network import Network
from exactident.verify.certificate import verify_certificate


@pytest.fixture(autouse=True)
def _no_structural_kernel(monkeypatch):
    """The structural kernel (ranks/shifted.py) closes this file's case exactly; off here, where the interval
    and its reporting are what is tested (tests/test_shifted_kernel.py tests the kernel)."""
    from exactident.ranks.shifted import StructuralKernels

    monkeypatch.setattr(StructuralKernels, "upper", lambda self, *a: None)


def _sparse_two_layer(seed: int = 6, widths=(12, 6, 2), n: int = 20):
    """Very negative first-layer biases: each hidden neuron active on few samples, so the count of active
    blocks bounds ``rank Gamma`` below ``R_A`` and the verdict needs no exact rank (an interval)."""
    rng = random.Random(seed)
    W = [[[Fraction(rng.randint(-8, 8), 4) for _ in range(widths[l - 1])] for _ in range(widths[l])]
         for l in (1, 2)]
    b = [[Fraction(rng.randint(-40, -20) if l == 1 else rng.randint(-4, 4), 4) for _ in range(widths[l])]
         for l in (1, 2)]
    X = [[Fraction(rng.randint(0, 8), 2) for _ in range(widths[0])] for _ in range(n)]
    return widths, W, b, X


def _full_jacobian_rank(widths, W, b, X) -> int:
    """rank of d f(X) / d (W_1, b_1, W_2, b_2) by hand: f = W_2 relu(W_1 x + b_1) + b_2."""
    N0, N1, N2 = widths
    rows = []
    for x in X:
        z = [sum(W[0][v][j] * x[j] for j in range(N0)) + b[0][v] for v in range(N1)]
        a = [1 if zv >= 0 else 0 for zv in z]
        h = [zv if zv >= 0 else 0 for zv in z]
        for k in range(N2):
            row = [W[1][k][v] * a[v] * x[j] for v in range(N1) for j in range(N0)]  # d/dW_1[v,j]
            row += [W[1][k][v] * a[v] for v in range(N1)]  # d/db_1[v]
            row += [h[v] if kk == k else 0 for kk in range(N2) for v in range(N1)]  # d/dW_2[kk,v]
            row += [1 if kk == k else 0 for kk in range(N2)]  # d/db_2[kk]
            rows.append(row)
    return DomainMatrix([[QQ(v.numerator, v.denominator) for v in r] for r in rows],
                        (len(rows), len(rows[0])), QQ).rank()


def _case() -> tuple[Case, int]:
    widths, W, b, X = _sparse_two_layer()
    fq = lambda v: flint.fmpq(v.numerator, v.denominator)  # noqa: E731
    net = Network(widths, [flint.fmpq_mat([[fq(v) for v in row] for row in M]) for M in W],
                  [[fq(v) for v in bb] for bb in b])
    return Case(name="sparse-wide", network=net, X=[[fq(v) for v in x] for x in X]), _full_jacobian_rank(
        widths, W, b, X)


def test_interval_is_first_class_and_rank_gamma_is_none():
    case, true_rank = _case()
    r = check(case, numeric=False, structural=False, verdict_first=True)
    assert r.rank_gamma_interval is not None, "the case is built so that the verdict needs no exact rank"
    lo, hi = r.rank_gamma_interval
    assert lo <= true_rank <= hi < r.dim and lo < hi
    assert r.rank_gamma is None and r.cs is False and r.cn is True and r.verdict == "inconclusive"
    mc = r.montecarlo
    assert mc is not None and lo <= mc["rank_gamma"] <= hi and 0 <= mc["error_probability"] < 1
    assert "rank_gamma_interval" not in r.extra and "montecarlo" not in r.extra  # one place, not two
    d = json.loads(reports_to_json([r], as_list=False))
    assert (d["rank_gamma"], d["rank_gamma_interval"], d["montecarlo"]) == (None, [lo, hi], mc)
    # why an interval: asked for (verdict_first), with the kernel vectors the exact rank would still need
    assert d["rank_gamma_interval_why"] == {"why": "verdict-first", "missing_vectors": hi - lo}
    assert str(mc["rank_gamma"]) not in r.reason.split("[")[0]  # the reason cites the interval, not the value
    # the views: the interval where the rank goes, the Monte Carlo value only with its label
    row = str(r).splitlines()[2].split()
    assert row[2:4] == [f"[{lo},", f"{hi}]"]
    assert f"Monte Carlo value {mc['rank_gamma']}, not certified" in str(r)
    assert f"rank_gamma=None, rank_gamma_interval=[{lo}, {hi}]" in repr(r)
    html = r._repr_html_()
    assert f"<td>[{lo}, {hi}] (certified interval)</td>" in html
    assert f"<td>{mc['rank_gamma']}</td>" not in html
    # the genuine report verifies; a Monte Carlo value outside its interval does not
    assert verify_certificate(case, d, require_claims=True)[0]
    bad = dict(d, montecarlo=dict(mc, rank_gamma=hi + 1))
    assert not verify_certificate(case, bad, require_claims=True)[0]


def test_exact_ranks_give_the_rank_and_no_interval():
    case, true_rank = _case()
    r = check(case, numeric=False, structural=False, exact_ranks=True)
    assert (r.rank_gamma, r.rank_gamma_interval, r.montecarlo) == (true_rank, None, None)
    assert r.rank_gamma_text == str(true_rank)
    d = r.to_dict()
    assert "rank_gamma_interval" not in d and "montecarlo" not in d


def test_float_cross_check_is_held_against_the_interval():
    """The numeric block compares the float rank with the certified interval, never with the Monte Carlo value."""
    case, true_rank = _case()
    r = check(case, structural=False, verdict_first=True)
    lo, hi = r.rank_gamma_interval
    assert lo <= true_rank <= hi
    num = r.numeric
    assert num["compared_with"]["rank_gamma"] is None and num["compared_with"]["rank_gamma_interval"] == [lo, hi]
    assert num["agrees"] == (lo <= num["rank_gamma"] <= hi and num["verdict"] == num["compared_with"]["verdict"])
    assert "full_jacobian" not in num


# ---------------------------------------------------------------- issue 31, item 2: exact ranks by default when cheap

def test_default_gives_the_exact_rank_when_it_is_cheap():
    """40 x 86 entries: the exact rank costs next to nothing, so the default certifies it (no interval); the
    verdict is the verdict-first one, and the report verifies."""
    case, true_rank = _case()
    fast = check(case, numeric=False, structural=False, verdict_first=True)
    assert fast.rank_gamma_interval is not None  # the case is built so that an interval settles the verdict
    r = check(case, numeric=False, structural=False)
    assert (r.rank_gamma, r.rank_gamma_interval, r.montecarlo) == (true_rank, None, None)
    assert (r.verdict, r.cs, r.cn) == (fast.verdict, fast.cs, fast.cn)
    rep = json.loads(reports_to_json([r], as_list=False))
    assert verify_certificate(case, rep, require_claims=True)[0]


def test_default_keeps_the_interval_when_the_exact_rank_is_expensive(monkeypatch):
    """With the cost model's constant made huge, the exact rank "costs" more than the verdict: the interval is
    kept and the reason gives the estimate, ``(dim - lo) rows dim`` times the constant (the model, by hand)."""
    import exactident.ranks.estimate as est

    monkeypatch.setattr(est, "_PER_KERNEL_VECTOR_ENTRY", 1.0)
    monkeypatch.setattr(est, "EXACT_FREE_SECONDS", 0.0)
    case, true_rank = _case()
    r = check(case, numeric=False, structural=False)
    lo, hi = r.rank_gamma_interval
    assert lo <= true_rank <= hi and r.rank_gamma is None
    rows, dim = len(case.X) * 2, r.dim
    seconds = (dim - lo) * rows * dim * 1.0
    assert seconds >= 2 * 86400  # shown in days (estimate.duration_text)
    assert f"exact value not computed: estimated ~{seconds / 86400:.0f} days" in r.reason
    assert "--exact-ranks computes it" in r.reason
    # the same decision as a report field (the two estimates to 3 significant digits), which the verifier
    # accepts and lists as not verified; a forged "why" outside its vocabulary is refused by the schema
    rep = json.loads(reports_to_json([r], as_list=False))
    verdict_seconds = rows * dim * (2e-8 + lo * 5e-11)  # estimate.verdict_rank_seconds, by hand
    assert rep["rank_gamma_interval_why"] == {"why": "exact-rank-costly", "missing_vectors": hi - lo,
                                              "exact_seconds": float(f"{seconds:.3g}"),
                                              "verdict_seconds": float(f"{verdict_seconds:.3g}")}
    ok, msgs = verify_certificate(case, rep, require_claims=True)
    assert ok and any(m.startswith("not verified: rank_gamma_interval_why") for m in msgs)
    forged = dict(rep, rank_gamma_interval_why=dict(rep["rank_gamma_interval_why"], why="cheap"))
    assert not verify_certificate(case, forged, require_claims=True)[0]


def test_cli_verdict_first_and_exact_ranks_refuse_each_other(tmp_path, capsys):
    from exactident.cli import main

    path = "cases/iris-mlp-4-8-8-3.json"
    assert main(["check", path, "--no-numeric", "--exact-ranks", "--verdict-first"]) == 2
    assert "--verdict-first" in capsys.readouterr().err
    assert main(["check", path, "--no-numeric", "--json", "--verdict-first"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["rank_gamma"] is None and rep["rank_gamma_interval"] is not None
    assert main(["check", path, "--no-numeric", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    # iris: 14 missing kernel vectors of a 450 x 123 Gamma, cheap: exact by default (109 = dim - nullity)
    assert rep["rank_gamma"] == 109 and "rank_gamma_interval" not in rep


def test_no_monte_carlo_value_when_its_target_is_out_of_reach(monkeypatch):
    """Issue 31, item 4: a Monte Carlo value is given only with a proven error <= the target; when no number of
    primes reaches it (a target of 0 here, unreachable while the rank is below the upper end), the report has
    the interval alone (no montecarlo field), the views say nothing of a Monte Carlo value, and it verifies."""
    import exactident.ranks.intervals as iv

    monkeypatch.setattr(iv, "MONTE_CARLO_TARGET", 0.0)
    case, true_rank = _case()
    r = check(case, numeric=False, structural=False, verdict_first=True)
    lo, hi = r.rank_gamma_interval
    assert lo <= true_rank <= hi and (r.rank_gamma, r.montecarlo) == (None, None)
    rep = json.loads(reports_to_json([r], as_list=False))
    assert rep["rank_gamma_interval"] == [lo, hi] and "montecarlo" not in rep
    from exactident.io.report import render_table

    assert "Monte Carlo" not in render_table([r]) and f"[{lo}, {hi}]" in render_table([r])
    assert verify_certificate(case, rep, require_claims=True)[0]
