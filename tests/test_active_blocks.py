"""The ``active-blocks`` upper bound on ``rank Gamma`` (ranks/active_blocks.py, verify/rank_blocks.py).

Right values: the exact rank by FLINT elimination of the exact ``Gamma`` (and sympy on a hand case);
the engine's and the verifier's counts are two separate computations of the same bound.
"""

from __future__ import annotations

import copy
import json
import random

import flint
import pytest

from exactident.check import check
from exactident.io.case import Case
from exactident.io.report import reports_to_json
from exactident.linalg import exact
from exactident.model.activation import activation_state
from exactident.model.fixed_edges import fixed_edges
from exactident.model.gamma import gamma_exact
from exactident.model.network import Network
from exactident.ranks.active_blocks import active_block_bound
from exactident.verify.certificate import verify_certificate
from exactident.verify.rank_blocks import active_blocks_bound


def _sparse_net(seed: int, widths=(12, 6, 2), n: int = 20, den: int = 2):
    """First-layer biases very negative: each first-layer neuron is active on few samples (as on MNIST)."""
    rng = random.Random(seed)
    W, b = [], []
    for l in range(1, len(widths)):
        W.append(flint.fmpq_mat([[flint.fmpq(rng.randint(-8, 8), 4) for _ in range(widths[l - 1])]
                                 for _ in range(widths[l])]))
        b.append([flint.fmpq(rng.randint(-40, -20) if l == 1 else rng.randint(-4, 4), 4) for _ in range(widths[l])])
    X = [[flint.fmpq(rng.randint(0, 4 * den), den) for _ in range(widths[0])] for _ in range(n)]
    return Network(widths, W, b), X


@pytest.mark.parametrize("widths,n", [((12, 6, 2), 20), ((3, 5, 4, 1), 30), ((4, 3, 3, 2), 8), ((2, 2, 1), 5)])
def test_bound_is_at_least_the_exact_rank(widths, n):
    checked = below = 0
    for seed in range(16):
        net, X = _sparse_net(seed, widths, n, den=97)  # a prime denominator: few ties
        st = activation_state(net, X)
        fixed = fixed_edges(net)
        for pattern in ([st.pattern] if not st.ties else []):
            r = exact.rank(gamma_exact(net, X, st.Z, pattern, fixed))
            bound = active_block_bound(net, X, pattern, fixed)
            assert r <= bound, (seed, r, bound)
            assert bound == active_blocks_bound(net, X, pattern, fixed)  # the verifier's own count
            checked += 1
            below += bound < min(n * widths[-1], net.dim)
    assert checked >= 6 and below >= 2  # the bound is not just the shape on these


def test_hand_derived_gamma():
    """``f(x) = 2 relu(x) + 3 relu(x - 5/2) + b_2`` on ``x = 1/2, 1, 3/2, 2, 3``; both output weights fixed.

    Columns (``W_1`` then ``b_1``, then ``b_2``) ``W_1[0,0], W_1[1,0], b_1[0], b_1[1], b_2[0]``:
    ``2x, 3x [x > 5/2], 2, 3 [x > 5/2], 1``.
    Neuron 0 is active on all five samples (block of 2 columns: at most 2), neuron 1 on one
    (at most 1), the output block is ``b_2`` alone (at most 1): bound 4 < min(rows, dim) = 5.  The
    exact rank is 3 (``b_1[0]`` and ``b_2`` are parallel: neuron 0 is always active).
    """
    sympy = pytest.importorskip("sympy")
    net = Network((1, 2, 1), [flint.fmpq_mat([[1], [1]]), flint.fmpq_mat([[2, 3]])],
                  [[flint.fmpq(0), flint.fmpq(-5, 2)], [flint.fmpq(0)]])
    xs = [sympy.Rational(1, 2), 1, sympy.Rational(3, 2), 2, 3]
    X = [[flint.fmpq(int(sympy.fraction(x)[0]), int(sympy.fraction(x)[1]))] for x in xs]
    st = activation_state(net, X)
    on = [1 if x > sympy.Rational(5, 2) else 0 for x in xs]
    by_hand = sympy.Matrix([[2 * x, 3 * x * a, 2, 3 * a, 1] for x, a in zip(xs, on)])
    G = gamma_exact(net, X, st.Z, st.pattern, fixed_edges(net))
    assert sympy.Matrix(5, 5, [sympy.Rational(int(v.p), int(v.q)) for v in G.entries()]) == by_hand
    assert by_hand.rank() == 3
    assert active_block_bound(net, X, st.pattern, fixed_edges(net)) == 4


def _wide_report(monkeypatch):
    """A wide ``Gamma`` (40 x 86) whose rank is bounded below ``R_A`` by the count alone (seed found by search).

    The structural kernel (ranks/shifted.py) closes this rank exactly; it is switched off here, so the
    interval ends at the count this file is about.
    """
    from exactident.ranks.shifted import StructuralKernels

    net, X = _sparse_net(6)
    case = Case(name="sparse-wide", network=net, X=X)
    with monkeypatch.context() as m:
        m.setattr(StructuralKernels, "upper", lambda self, *a: None)
        report = check(case, numeric=False, structural=False, verdict_first=True)
    return case, report, json.loads(reports_to_json([report], as_list=False))


def test_wide_verdict_from_the_count_alone_verifies(monkeypatch):
    case, report, rep = _wide_report(monkeypatch)
    net, X = case.network, case.X
    st = activation_state(net, X)
    exact_rank = exact.rank(gamma_exact(net, X, st.Z, st.pattern, fixed_edges(net)))
    lo, hi = report.rank_gamma_interval
    assert report.extra["certified_by"]["rank_gamma"] == "active-blocks"
    assert lo <= exact_rank <= hi == active_blocks_bound(net, X, st.pattern, fixed_edges(net))
    assert hi < len(X) * net.widths[-1]
    assert report.verdict == "inconclusive"  # C_S fails (rank < dim) and C_N holds (R_Gamma <= hi < R_A)
    slow = check(case, numeric=False, structural=False, exact_ranks=True)
    assert (slow.verdict, slow.rank_gamma) == (report.verdict, exact_rank)
    valid, messages = verify_certificate(case, rep, "sparse-wide", require_claims=True)
    assert valid, messages
    # with the structural kernel (the default) the same case gets the exact rank
    assert check(case, numeric=False, structural=False, verdict_first=True).rank_gamma == exact_rank


@pytest.mark.parametrize("mutate,message", [
    (lambda up: up.update(bound=up["bound"] - 1), "recomputed bound is"),
    (lambda up: up.update(kind="shape"), "an interval is bounded above by kernel vectors or active-blocks only"),
    (lambda up: up.update(source="semi-local"), "source: unknown field"),
])
def test_tampered_count_is_rejected(mutate, message, monkeypatch):
    case, _report, rep = _wide_report(monkeypatch)
    bad = copy.deepcopy(rep)
    mutate(bad["certificate"]["rank"]["rank_gamma"]["upper"])
    valid, messages = verify_certificate(case, bad, "sparse-wide", require_claims=True)
    assert not valid and any(message in m for m in messages), messages
