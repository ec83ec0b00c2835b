"""Verdict first for constrained networks: the rank of Gamma_free as a certified interval unless exact ranks are
asked for; the verdict never changes, the interval holds the exact rank (a sympy oracle), the verifier checks it."""

from __future__ import annotations

import copy
import random
from pathlib import Path

import flint
import numpy as np
import pytest
from constrained_oracle import oracle_dim_free, oracle_rank, random_constrained, random_sample

from exactident.boundary.dead_units import zero_columns
from exactident.check import check, check_constrained
from exactident.io.case import load_case
from exactident.model.gamma_free import free_state
from exactident.model.network import Network
from exactident.verify.certificate import verify_constrained

F = flint.fmpq

# the small hand-made cases (the digits models take minutes: benchmarks and docs/performance.md)
CASES = sorted(p for p in (Path(__file__).resolve().parent.parent / "cases" / "architectures").glob("*.json")
               if not p.name.startswith("digits-"))


def _oracle_min_rank(cn, X, report) -> int:
    """The smallest sympy rank over the tie resolutions the report enumerated (its free_rank part)."""
    part = report["certificate"]["free_rank"]
    ties = [(t["sample"], t["layer"], t["neuron"]) for t in part["ties"]]
    return min(oracle_rank(cn, X, dict(zip(ties, res["active"]))) for res in part["resolutions"])


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_shipped_cases_same_verdict_fast_and_exact(path):
    case = load_case(path)
    fast, slow = check(case, numeric=False), check(case, numeric=False, exact_ranks=True)
    assert (fast.verdict, fast.decided_by, fast.dim) == (slow.verdict, slow.decided_by, slow.dim)
    lo, hi = fast.rank_gamma_interval or (fast.rank_gamma, fast.rank_gamma)
    assert lo <= slow.rank_gamma <= hi and slow.rank_gamma_interval is None


def _random_cases():
    """Random constrained nets and samples (tests/constrained_oracle.py), small enough for the sympy oracle."""
    for seed in [*range(0, 30), *range(100, 120)]:
        cn = random_constrained(seed, p_fixed=0.15)
        X = random_sample(seed, random.Random(seed).randint(1 if seed >= 100 else 2, 6), cn.widths[0])
        yield seed, cn, X


def test_random_nets_same_verdict_and_the_interval_holds_the_oracle_rank():
    intervals = 0
    for seed, cn, X in _random_cases():
        fast = check_constrained(cn, X, max_resolutions=16)
        slow = check_constrained(cn, X, max_resolutions=16, exact_ranks=True)
        assert (fast.verdict, fast.decided_by) == (slow.verdict, slow.decided_by), seed
        d = fast.to_dict()
        if "rank_gamma_interval" not in d:
            assert fast.rank_gamma == slow.rank_gamma, seed
            continue
        intervals += 1
        lo, hi = d["rank_gamma_interval"]
        true = _oracle_min_rank(cn, X, d)
        assert lo <= true <= hi and lo < hi, seed
        assert slow.rank_gamma == true and slow.rank_gamma_interval is None, seed
        # no uncertified number in rank_gamma: the Monte Carlo value is montecarlo's, inside the interval
        assert hi <= oracle_dim_free(cn) and d["rank_gamma"] is None and lo <= d["montecarlo"]["rank_gamma"] <= hi, seed
        assert d["cs"] is (False if hi < d["dim"] else None), seed
        assert fast.verdict != "identifiable", seed  # a lower end short of dim_free never says identifiable
    assert intervals >= 5  # the family has rank-deficient cases that the interval leaves open


def test_interval_reports_verify_and_interval_mutations_fail():
    """The lower end one too high, or the upper end below the rank (sympy), are refused; the genuine is VALID."""
    checked = 0
    for seed, cn, X in _random_cases():
        d = check_constrained(cn, X, max_resolutions=16).to_dict()
        if "rank_gamma_interval" not in d:
            continue
        checked += 1
        valid, msgs = verify_constrained(cn, X, d)
        assert valid, (seed, msgs)
        lo, hi = d["rank_gamma_interval"]
        true = _oracle_min_rank(cn, X, d)
        assert lo <= true <= hi
        for interval in ([lo + 1, hi], [min(lo, true - 1), true - 1]):  # lower end too high, upper below the rank
            mutated = dict(copy.deepcopy(d), rank_gamma_interval=interval)
            assert not verify_constrained(cn, X, mutated)[0], (seed, interval)
        res = d["certificate"]["free_rank"]["resolutions"][-1]["rank_gamma"]
        if res["upper"]["kind"] != "kernel":  # the interval form's upper end is dim_free (or the rows)
            m = copy.deepcopy(d)
            m["certificate"]["free_rank"]["resolutions"][-1]["rank_gamma"]["upper"]["bound"] = true - 1
            assert not verify_constrained(cn, X, m)[0], seed
        if checked == 6:
            break
    assert checked >= 3


def _cn(widths, W, b, WI, bI, slopes, sI, k, features, names):
    mat = lambda rows: flint.fmpq_mat([[F(v) for v in row] for row in rows])  # noqa: E731
    return Network(tuple(widths), [mat(M) for M in W], [[F(v) for v in bb] for bb in b],
                              [np.array(I, dtype=np.int64).reshape(len(M), -1) for I, M in zip(WI, W)],
                              [np.array(I, dtype=np.int64) for I in bI], [[F(v) for v in a] for a in slopes],
                              [np.array(I, dtype=np.int64) for I in sI], k, tuple(features), list(names))


def _two_units():
    """f = v0 relu(w0 x + b0) + v1 relu(w1 x + b1) (no output bias) at w = 1, b = (0, -10), v = 1."""
    return _cn((1, 2, 1), [[[1], [1]], [[1, 1]]], [[0, -10], [0]], [[[0], [2]], [[4, 5]]], [[1, 3], [-1]],
               [[0, 0]], [[-1, -1]], 6, ("fixed weights",), ["w0", "b0", "w1", "b1", "v0", "v1"])


def test_dead_unit_columns_close_the_interval():
    """On x = -2, -1, 1, 2 unit 1 (x - 10) is dead: its incoming w1, b1 and outgoing v1 have zero columns.  S_H is
    spanned by the rescalings (w0, b0, -v0) and (w1, b1, -v1) (theta coordinates (1, 0, 0, 0, -1, 0) and
    (0, 0, 1, -10, 0, -1)); with e_2, e_3, e_5 they span 4 dimensions: rank <= 6 - 4 = 2.  Unit 0 alone gives
    the rows (v0 x, v0, x) on x = 1, 2 and 0 on x < 0: rank 2.  So the lines close the gap: exact 2 < dim_free 4."""
    cn = _two_units()
    X = [[F(v)] for v in (-2, -1, 1, 2)]
    assert zero_columns(cn, free_state(cn, X)) == [2, 3, 5]
    r = check_constrained(cn, X)
    d = r.to_dict()
    assert (r.verdict, r.decided_by, r.rank_gamma, r.dim, r.cs) == ("not-identifiable", "dead-units", 2, 4, False)
    assert oracle_rank(cn, X) == 2 and "rank_gamma_interval" not in d
    assert "exact kernel vectors from dead, silent or constant units, moving w1, b1, v1" in r.reason
    up = d["certificate"]["free_rank"]["resolutions"][0]["rank_gamma"]["upper"]
    assert up["kind"] == "kernel" and up["source"] == "lines" and up["bound"] == 2
    assert sorted(col[0][0] for col in up["kernel"]) == [2, 3, 5]
    assert verify_constrained(cn, X, d)[0]
    m = copy.deepcopy(d)  # a column that is not in the kernel (v0's: h_0 = x on x > 0)
    m["certificate"]["free_rank"]["resolutions"][0]["rank_gamma"]["upper"]["kernel"][0] = [[4, "1"]]
    assert not verify_constrained(cn, X, m)[0]
    m = copy.deepcopy(d)  # a bound below what the columns prove
    m["certificate"]["free_rank"]["resolutions"][0]["rank_gamma"]["upper"]["bound"] = 1
    assert not verify_constrained(cn, X, m)[0]



def _affine_on_sample_case(tmp_path):
    """fc1 (1 -> 2, leaky 1/10) then fc2 (2 -> 1): 7 parameters, 2 rescalings, dim_free = 5.  On x = 1..6 both units
    are active (z = x and 2x + 1), so f = (v0 + 2 v1) x + (v1 + d) is affine in x on the sample: every column of
    Gamma_free is a combination of the columns x and 1 of the sample, rank 2 < 5 with 6 rows: an interval.  Not
    identifiable (the line rule): b0 += t, d -= t keeps z0 = x + t > 0 and f on the sample, and f(x) changes
    where unit 0 is negative (slope 1/10)."""
    import json

    obj = {"format": "exactident-case/2", "name": "affine-on-sample", "input_shape": [1],
           "layers": [{"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [["1"], ["2"]],
                       "bias": ["0", "1"]},
                      {"name": "act", "op": "leaky_relu", "inputs": ["fc1"], "negative_slope": "1/10"},
                      {"name": "fc2", "op": "linear", "inputs": ["act"], "weight": [["1", "-1"]], "bias": ["0"]}],
           "output": "fc2", "sample": [[str(v)] for v in range(1, 7)]}
    path = tmp_path / "affine.json"
    path.write_text(json.dumps(obj))
    return path


def test_interval_report_through_verify_certificate(tmp_path, capsys):
    import json

    from exactident.verify.certificate import run_verify_certificate, verify_certificate

    path = _affine_on_sample_case(tmp_path)
    case = load_case(path)
    report = check(case, numeric=False).to_dict()
    assert (report["verdict"], report["rank_gamma_interval"], report["dim"]) == ("not-identifiable", [2, 5], 5)
    assert report["decided_by"] == "line"
    # no uncertified number where the certified rank goes: rank_gamma is null, the Monte Carlo value labelled
    assert report["rank_gamma"] is None and report["cs"] is None and report["montecarlo"]["rank_gamma"] == 2
    assert check(case, numeric=False, exact_ranks=True).rank_gamma == 2
    valid, msgs = verify_certificate(case, report, require_claims=True)
    assert valid, msgs
    rp = tmp_path / "r.json"
    rp.write_text(json.dumps(report))
    assert run_verify_certificate(str(path), str(rp)) == 0
    for bad in ([3, 5], [1, 1], [2, 4]):  # lower end too high, upper below the rank, upper not proved
        rp.write_text(json.dumps(dict(report, rank_gamma_interval=bad)))
        assert run_verify_certificate(str(path), str(rp)) == 3, bad
    capsys.readouterr()


def test_cli_exact_ranks_for_a_constrained_case(tmp_path, capsys):
    import json

    from exactident.cli import main

    path = str(_affine_on_sample_case(tmp_path))
    assert main(["check", path, "--no-numeric", "--json"]) == 0
    fast = json.loads(capsys.readouterr().out)
    assert main(["check", path, "--no-numeric", "--json", "--exact-ranks"]) == 0
    slow = json.loads(capsys.readouterr().out)
    fast, slow = (r[0] if isinstance(r, list) else r for r in (fast, slow))
    assert fast["rank_gamma_interval"] == [2, 5] and "montecarlo" in fast
    assert slow["rank_gamma"] == 2 and "rank_gamma_interval" not in slow and "montecarlo" not in slow
    assert slow["verdict"] == fast["verdict"] == "not-identifiable" and slow["cs"] is False


def test_certificate_search_does_not_depend_on_the_rank_order():
    """Regression: the submersion certificate's random points came from the rank stage's stream, so the exact-ranks
    order (more primes drawn first) missed the certificate the verdict-first order found on this generated leaky
    1-2-1 network (1-D input: few random points raise the rank).  Both orders now search with streams of their own."""
    import exactident.suites.generate as g
    from exactident.io.case import parse_case
    from exactident.suites.families import get_family
    from exactident.suites.rng import HashRng

    req = g.Request("leaky-mlp", (1, 2, 1), 5, 1)
    draft = get_family(req.family).build(HashRng(g.STREAM, req.family, list(req.widths), req.seed, req.index,
                                                 req.n_samples), list(req.widths), req.index, req.n_samples)
    case = parse_case(g.draft_to_case_obj(draft, "leaky"))
    fast, slow = check(case, numeric=False), check(case, numeric=False, exact_ranks=True)
    assert fast.verdict == slow.verdict == "not-identifiable" and fast.decided_by == slow.decided_by
