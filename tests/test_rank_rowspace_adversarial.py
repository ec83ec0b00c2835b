"""Adversarial checks of the pattern row-space bound on ``rank alpha`` (kind ``pattern-rowspace``).

Right values: ranks by Gaussian elimination over ``fractions.Fraction`` written here (independent
of FLINT) of ``alpha_exact`` (the definition, Prop. 1), and hand derivations given in each test.
The bound must be >= ``rank alpha`` for *any* pattern (ties resolved either way, repeated,
zero or collinear samples), whichever groups are taken as full (docs/performance.md);
the engine decides fullness mod a fixed prime, the verifier over Q, so they may differ
on data built around that prime, without any effect on what is certified.
"""

from __future__ import annotations

import copy
import io
import json
import random
from contextlib import redirect_stderr, redirect_stdout
from fractions import Fraction

import flint
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_rank_rowspace import _bc_analogue

import exactident.ranks.rowspace as engine_rowspace
import exactident.verify.rank_rowspace as verifier_rowspace
from exactident.io.case import Case, write_case
from exactident.model.activation import activation_state, alpha_exact
from exactident.model.fixed_edges import fixed_edges
from exactident.model.network import Network
from exactident.ranks.certify import certify_rank_alpha, certify_ranks
from exactident.ranks.rowspace import FULL_GROUP_PRIME, pattern_rowspace_bound
from exactident.verify.rank import verify_rank_certificate
from exactident.verify.rank_rowspace import rowspace_bound


def _fraction_rank(rows: list[list[Fraction]]) -> int:
    """Rank over Q by plain Gaussian elimination in Fractions (no FLINT)."""
    A = [list(r) for r in rows]
    rank, cols = 0, len(A[0]) if A else 0
    for c in range(cols):
        piv = next((i for i in range(rank, len(A)) if A[i][c] != 0), None)
        if piv is None:
            continue
        A[rank], A[piv] = A[piv], A[rank]
        for i in range(len(A)):
            if i != rank and A[i][c] != 0:
                f = A[i][c] / A[rank][c]
                A[i] = [a - f * b for a, b in zip(A[i], A[rank])]
        rank += 1
    return rank


def _true_rank(pattern, X) -> int:
    if not X:
        return 0
    A = alpha_exact(pattern, X)
    return _fraction_rank([[Fraction(int(A[i, j].p), int(A[i, j].q)) for j in range(A.ncols())]
                           for i in range(A.nrows())])


_WIDTHS = [(1, 2, 1), (2, 2, 2), (1, 2, 1, 1), (2, 1, 2, 3), (3, 2, 1), (1, 1, 1, 1, 2)]
_VALUES = st.sampled_from([Fraction(0), Fraction(1), Fraction(-1), Fraction(1, 2), Fraction(3),
                           Fraction(FULL_GROUP_PRIME), Fraction(1, FULL_GROUP_PRIME), Fraction(10**30 + 1, 7)])


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(_WIDTHS), st.data())
def test_bound_is_never_below_the_rank_for_any_pattern(widths, data):
    # arbitrary patterns (realisable or not, as a tie resolution may be), repeated and special samples
    n = data.draw(st.integers(0, 7))
    X = [[flint.fmpq(v.numerator, v.denominator) for v in data.draw(st.lists(_VALUES, min_size=widths[0],
                                                                            max_size=widths[0]))]
         for _ in range(n)]
    if n and data.draw(st.booleans()):
        X += [list(X[0])] * data.draw(st.integers(1, 3))
    n = len(X)
    pattern = [np.array(data.draw(st.lists(st.booleans(), min_size=n * w, max_size=n * w)),
                        dtype=bool).reshape(n, w) for w in widths[1:-1]]
    true = _true_rank(pattern, X)
    engine = pattern_rowspace_bound(pattern, X, widths)
    assert engine is not None and engine[0] >= true
    verifier = rowspace_bound(pattern, X, widths)
    assert verifier is not None and true <= verifier <= engine[0]  # exact fullness: more full groups
    assert certify_rank_alpha(pattern, X, widths, rng=random.Random(n)).rank == true


def _mod_p_case():
    # 1-2-1-1, h_1 on for x >= 0, h_2 on for x <= 10 p, the last neuron always on (bias 100 p);
    # three groups of two samples x, x + p (p the engine's prime): [X_g, 1] = [[x, 1], [x + p, 1]] has
    # determinant -p, full over Q, singular mod p.
    p, q = FULL_GROUP_PRIME, flint.fmpq
    net = Network((1, 2, 1, 1), [flint.fmpq_mat([[1], [-1]]), flint.fmpq_mat([[1, 1]]), flint.fmpq_mat([[1]])],
                  [[q(0), q(10 * p)], [q(100 * p)], [q(0)]])
    X = [[q(x0 + k * p)] for x0 in (-1 - 3 * p, 1, 10 * p + 1) for k in range(2)]
    return net, X


def test_groups_full_over_q_but_singular_mod_the_engine_prime():
    # alpha(x) = [x a_1, x a_2, a_1, a_2, 1, 1] (paths x->h->g, h->g, g, beta; g always on), with
    # a = (0, 1), (1, 1), (1, 0) on the three groups.  Row space: x-block span{(0,1), (1,1)} (dim 2),
    # the rest span{(0,1,1,1), (1,1,1,1), (1,0,1,1)} (dim 3): rank 5.  Over Q all three groups are
    # full, so the bound is dim W_F = 5; mod p none is, and the engine's bound adds
    # rank([X_g, 1] M_g) = 2 per group: 6 (valid, loose).
    net, X = _mod_p_case()
    st_ = activation_state(net, X)
    assert not st_.ties
    assert _true_rank(st_.pattern, X) == 5
    assert pattern_rowspace_bound(st_.pattern, X, net.widths) == (6, 0)
    assert rowspace_bound(st_.pattern, X, net.widths) == 5
    res = certify_ranks(net, X, st_.pattern, fixed_edges(net), need_rank_a=True, rng=random.Random(0))
    assert res.rank_a == 5
    case = Case("t", net, X)
    assert verify_rank_certificate(case, res.certificate) == []
    # a pattern-rowspace claim of 5 is true, and the verifier (exact fullness) accepts it
    cert = copy.deepcopy(res.certificate)
    cert["rank_a"]["upper"] = {"kind": "pattern-rowspace", "bound": 5}
    assert verify_rank_certificate(case, cert) == []


def test_engine_falls_back_when_its_mod_p_bound_is_loose(monkeypatch):
    # without the column-block kernel the engine's loose bound 6 cannot close rank 5: the Gram route does
    net, X = _mod_p_case()
    pattern = activation_state(net, X).pattern
    import exactident.ranks.rank_alpha as rank_alpha

    monkeypatch.setattr(rank_alpha, "alpha_column_kernel", lambda *a: [])
    res = certify_rank_alpha(pattern, X, net.widths, rng=random.Random(0))
    assert res.rank == 5
    assert res.certificate["upper"]["kind"] != "pattern-rowspace"


def test_verifier_refuses_a_pattern_rowspace_claim_past_the_engine_cap(monkeypatch):
    # the verifier's route costs ~0.5 s and (N_0 + 1) |P| rationals per group (30-16-16-1: 20 groups
    # 10 s); past the engine's cap the engine never claims the bound, so a claim there is refused
    # instead of recomputed (a forged report must not cost minutes and gigabytes).
    net, X = _mod_p_case()
    pattern = activation_state(net, X).pattern
    res = certify_ranks(net, X, pattern, fixed_edges(net), need_rank_a=True, rng=random.Random(0))
    cert = copy.deepcopy(res.certificate)
    cert["rank_a"]["upper"] = {"kind": "pattern-rowspace", "bound": 5}
    case = Case("t", net, X)
    work = 3 * 2 * 6  # groups x (N_0 + 1) x |P|
    monkeypatch.setattr(verifier_rowspace, "MAX_ROWSPACE_WORK", work)
    assert verify_rank_certificate(case, cert) == []
    monkeypatch.setattr(verifier_rowspace, "MAX_ROWSPACE_WORK", work - 1)
    assert rowspace_bound(pattern, X, net.widths) is None
    problems = verify_rank_certificate(case, cert)
    assert problems and "size cap: not verified" in " ".join(problems)
    # the engine's cap is the same test: at that cap it does not claim the bound
    monkeypatch.setattr(engine_rowspace, "MAX_ROWSPACE_WORK", work - 1)
    assert pattern_rowspace_bound(pattern, X, net.widths) is None


def _bc_boundary_case():
    # three tight clusters (full groups) and scattered samples, plus samples exactly on the
    # boundary of two neurons (repeated), x = 0 and the unit inputs: check() certifies several
    # tie resolutions' rank alpha by pattern-rowspace
    net, X = _bc_analogue(29)
    W = net.W
    for k in range(2):
        j = next(j for j in range(3) if W[0][k, j] != 0)
        x = [flint.fmpq(0)] * 3
        x[j] = -net.b[0][k] / W[0][k, j]
        X += [x, list(x)]
    X += [[flint.fmpq(0)] * 3] + [[flint.fmpq(int(i == j)) for i in range(3)] for j in range(3)]
    return Case("bcb29", net, X)


def _verify(tmp_path, case_path, report) -> int:
    from exactident.cli import main

    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        return main(["verify-certificate", str(case_path), str(path)])


def _rowspace_parts(obj, path=()):
    if isinstance(obj, dict):
        if isinstance(obj.get("upper"), dict) and obj["upper"].get("kind") == "pattern-rowspace":
            yield path
        for k, v in obj.items():
            yield from _rowspace_parts(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _rowspace_parts(v, path + (i,))


def _at(obj, path):
    for k in path:
        obj = obj[k]
    return obj


def test_boundary_report_pattern_rowspace_mutations(tmp_path):
    from exactident.cli import main

    case_path = tmp_path / "case.json"
    write_case(_bc_boundary_case(), case_path)
    with redirect_stdout(io.StringIO()) as out:
        assert main(["check", str(case_path), "--json", "--no-numeric"]) == 0
    report = json.loads(out.getvalue())
    assert report["on_boundary"]
    parts = list(_rowspace_parts(report))
    assert len(parts) >= 4
    assert _verify(tmp_path, case_path, report) == 0
    path = parts[0]
    R = _at(report, path)["rank"]
    false_claims = [
        lambda c: c["upper"].__setitem__("bound", R + 1),
        lambda c: (c["upper"].__setitem__("bound", R - 1), c.__setitem__("rank", R - 1),
                   c.__setitem__("rank_a", R - 1)),
        lambda c: (c["upper"].__setitem__("bound", R + 1), c.__setitem__("rank", R + 1),
                   c.__setitem__("rank_a", R + 1)),
        lambda c: c.__setitem__("shape", c["shape"][::-1]),
        lambda c: c["lower"].__setitem__("rows", c["lower"]["rows"][:-1] + [c["lower"]["rows"][0]]),
        lambda c: c["upper"].__setitem__("full_groups", 3),
        lambda c: c["upper"].__setitem__("kind", "pattern-rowspaces"),
    ]
    for mutate in false_claims:
        bad = copy.deepcopy(report)
        mutate(_at(bad, path))
        assert _verify(tmp_path, case_path, bad) == 3, _at(bad, path)
    malformed = [
        lambda c: c["upper"].__setitem__("bound", str(R)),
        lambda c: c["upper"].__setitem__("bound", True),
        lambda c: c["upper"].__setitem__("bound", -1),
        lambda c: c["upper"].__setitem__("kind", None),
        lambda c: c["lower"].__setitem__("prime", "3"),
        lambda c: c["lower"].__setitem__("rows", [[0]]),
        lambda c: c.__setitem__("upper", ["pattern-rowspace", R]),
    ]
    for mutate in malformed:
        bad = copy.deepcopy(report)
        mutate(_at(bad, path))
        assert _verify(tmp_path, case_path, bad) == 3, _at(bad, path)  # malformed: invalid, naming the field
