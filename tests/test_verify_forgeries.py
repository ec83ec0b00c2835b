"""Issue 29, the verifier: forged reports of each kind are INVALID, and a seeded mutation campaign over genuine
interval-form and layer-graph reports in which every mutant the verifier accepts is checked against the truth.

The truth never comes from exactident: ranks are those of Jacobians written here with ``fractions.Fraction``
(forward mode over every weight and bias, the activation pattern of each tie resolution chosen here) and
eliminated by sympy's DomainMatrix over QQ, or hand-derived in the docstrings; layer graphs use the sympy oracle
of tests/constrained_oracle.py.  The full Jacobian over every parameter has the rank of ``Gamma`` (the columns of
the fixed edges are combinations of the others: positive homogeneity of each hidden neuron, on every piece).
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import random
import time
from collections.abc import Iterable
from fractions import Fraction

import pytest

sympy = pytest.importorskip("sympy")

from constrained_oracle import oracle_dim_free, oracle_rank, random_constrained, random_sample  # noqa: E402

from exactident.check import check, check_constrained  # noqa: E402
from exactident.io.case import load_case, parse_case  # noqa: E402
from exactident.io.limits import WorkLimits  # noqa: E402
from exactident.io.report import reports_to_json  # noqa: E402
from exactident.verify.certificate import (  # noqa: E402
    run_verify_certificate,
    verify_certificate,
    verify_constrained,
)

# ----------------------------------------------------------------------------------------------------------
# the independent truth for plain MLPs: Fraction Jacobians over every parameter, sympy ranks


def _rank(rows: list[list[Fraction]]) -> int:
    if not rows or not rows[0]:
        return 0
    from sympy.polys.domains import QQ
    from sympy.polys.matrices import DomainMatrix

    return DomainMatrix([[QQ(v.numerator, v.denominator) for v in r] for r in rows], (len(rows), len(rows[0])),
                        QQ).rank()


def _net(obj: dict):
    W = [[[Fraction(v) for v in row] for row in M] for M in obj["weights"]]
    b = [[Fraction(v) for v in bb] for bb in obj["biases"]]
    X = [[Fraction(v) for v in x] for x in obj["sample"]]
    return obj["widths"], W, b, X


def _pre(widths, W, b, x):
    """Pre-activations of every hidden layer at x (ReLU at 0 is 0, whatever the side)."""
    h, Z = x, []
    for l in range(len(widths) - 2):
        z = [sum((W[l][r][c] * h[c] for c in range(widths[l])), b[l][r]) for r in range(widths[l + 1])]
        Z.append(z)
        h = [max(v, Fraction(0)) for v in z]
    return Z


def _jacobian_rows(widths, W, b, x, side) -> list[list[Fraction]]:
    """d f(x) / d (every W then every b), forward mode; ``side[(l, v)]`` is the derivative of a tied unit."""
    params = [("W", l, r, c) for l in range(len(widths) - 1) for r in range(widths[l + 1]) for c in range(widths[l])]
    params += [("b", l, r, None) for l in range(len(widths) - 1) for r in range(widths[l + 1])]
    cols = []
    for p in params:
        h, dh = list(x), [Fraction(0)] * len(x)
        for l in range(len(widths) - 1):
            z = [sum((W[l][r][c] * h[c] for c in range(widths[l])), b[l][r]) for r in range(widths[l + 1])]
            dz = [sum((W[l][r][c] * dh[c] for c in range(widths[l])), Fraction(0)) for r in range(widths[l + 1])]
            if p[1] == l:
                r = p[2]
                dz[r] += h[p[3]] if p[0] == "W" else Fraction(1)
            if l == len(widths) - 2:
                cols.append(dz)
                break
            act = [(z[v] > 0) if z[v] != 0 else side.get((l + 1, v), True) for v in range(len(z))]
            h = [z[v] if act[v] else Fraction(0) for v in range(len(z))]
            dh = [dz[v] if act[v] else Fraction(0) for v in range(len(z))]
    return [[cols[j][k] for j in range(len(params))] for k in range(widths[-1])]


def _mlp_ties(widths, W, b, X):
    return [(i, l + 1, v) for i, x in enumerate(X) for l, z in enumerate(_pre(widths, W, b, x))
            for v in range(len(z)) if z[v] == 0]


def mlp_rank(obj: dict, sides: dict | None = None) -> int:
    """rank d f(X) / d theta at the resolution ``sides`` ((sample, layer, neuron) -> active; others active)."""
    widths, W, b, X = _net(obj)
    rows = []
    for i, x in enumerate(X):
        side = {(l, v): a for (s, l, v), a in (sides or {}).items() if s == i}
        rows += _jacobian_rows(widths, W, b, x, side)
    return _rank(rows)


def mlp_truth(obj: dict) -> tuple[int, int, dict]:
    """(smallest rank over every tie resolution, dim, rank per resolution), enumerated here.

    Ties at equal sample points (same layer, neuron) take one side: near theta their pre-activations are equal.
    """
    widths, W, b, X = _net(obj)
    ties = _mlp_ties(widths, W, b, X)
    classes: dict = {}
    for t in ties:
        classes.setdefault((tuple(X[t[0]]), t[1], t[2]), []).append(t)
    keys = list(classes)
    per: dict = {}
    for sides in itertools.product((True, False), repeat=len(keys)):
        res = {t: s for k, s in zip(keys, sides) for t in classes[k]}
        per[tuple(sorted(res.items()))] = mlp_rank(obj, res)
    dim = sum(widths[l] * widths[l + 1] for l in range(len(widths) - 1)) + widths[-1]
    return min(per.values()), dim, per


def _report(obj: dict, **kw) -> tuple:
    case = parse_case(obj)
    return case, json.loads(reports_to_json([check(case, numeric=False, **kw)], as_list=False))


# ----------------------------------------------------------------------------------------------------------
# 1. an interval's upper end is not a rank

TWINS = {"format": "exactident-case/1", "name": "twins-121", "widths": [1, 2, 1],
         "weights": [[["1"], ["2"]], [["3", "5"]]], "biases": [["1", "1"], ["0"]],
         "sample": [[str(x)] for x in range(1, 8)]}


def _forge_interval(rep: dict) -> dict:
    """The issue's forgery: the rank part's rank_gamma in interval form, lower rank mod p 2, upper the
    active-blocks count 5 = dim, with verdict identifiable decided by theorem-9."""
    bad = copy.deepcopy(rep)
    g = bad["certificate"]["rank"]["rank_gamma"]
    bad["certificate"]["rank"]["rank_gamma"] = {"shape": g["shape"], "lower": g["lower"],
                                                "upper": {"kind": "active-blocks", "bound": 5}}
    bad.update(verdict="identifiable", decided_by="theorem-9", rank_gamma_interval=[2, 5], rank_gamma=5,
               montecarlo={"rank_gamma": 5, "error_probability": 0.001}, cs=False, cn=None)
    bad.pop("certified_by", None)
    return bad


def test_interval_upper_end_is_never_evidence_for_identifiable(tmp_path, capsys):
    """Both hidden units are active on x = 1..7 (z = x + 1, 2x + 1 > 0).  Gamma's columns (free parameters
    W_1[0], W_1[1], b_1[0], b_1[1], b_2; the outgoing edges are fixed) are 3x, 5x, 3, 5, 1: rank 2 < dim 5."""
    assert mlp_truth(TWINS)[:2] == (2, 5)
    case, rep = _report(TWINS)
    assert rep["verdict"] == "not-identifiable" and verify_certificate(case, rep, require_claims=True)[0]
    bad = _forge_interval(rep)
    valid, msgs = verify_certificate(case, bad, require_claims=True)
    assert not valid
    assert any(m.startswith("verdict: report says identifiable, but the certificate does not prove C_S") for m in msgs)
    assert any(m.startswith("decided_by: report says theorem-9") for m in msgs)
    # the rank not settled ([2, 5], dim 5): cs must be null, rank_gamma null (or the labelled Monte Carlo value)
    for claims in ({"cs": True}, {"cs": False}, {"rank_gamma": 5, "montecarlo": None}):
        quiet = dict(bad, verdict="inconclusive", decided_by="none", **claims)
        quiet = {k: v for k, v in quiet.items() if v is not None or k in ("rank_gamma", "cs")}
        assert not verify_certificate(case, quiet, require_claims=True)[0], claims
    # inconclusive off the boundary says C_S fails: an upper end at dim does not prove that either
    quiet = dict(bad, verdict="inconclusive", decided_by="none", cs=None)
    valid, msgs = verify_certificate(case, quiet, require_claims=True)
    assert not valid and any("does not certify the ranks that would show C_S failing" in m for m in msgs)
    path, rp = tmp_path / "c.json", tmp_path / "r.json"
    path.write_text(json.dumps(TWINS))
    rp.write_text(json.dumps(bad))
    assert run_verify_certificate(str(path), str(rp)) == 3
    assert capsys.readouterr().out.rstrip().endswith("certificate INVALID")


# ----------------------------------------------------------------------------------------------------------
# 2 and 4. layer graphs: every tie resolution, the smallest rank

PRELU = {"format": "exactident-case/2", "name": "prelu-111", "input_shape": [1],
         "layers": [{"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [["1"]], "bias": ["0"]},
                    {"name": "act", "op": "prelu", "inputs": ["fc1"], "weight": ["1/4"]},
                    {"name": "fc2", "op": "linear", "inputs": ["act"], "weight": [["-3/2"]], "bias": ["1"]}],
         "output": "fc2", "sample": [["0"], ["-3/2"], ["-4/5"], ["-2"], ["3/2"], ["-3"]]}


def _prelu_rank(active_at_0: bool) -> int:
    """f(x) = c prelu_a(w x + b) + d at w = 1, b = 0, a = 1/4, c = -3/2, d = 1; parameters (w, b, a, c, d).

    z > 0: (c x, c, 0, z, 1); z < 0: (c a x, c a, c z, a z, 1); the tie x = 0 (z = 0): (0, c, 0, 0, 1) active,
    (0, c a, 0, 0, 1) inactive.  Rows from x = 3/2 and the negative samples span w, b, a, c, d directions except
    that the inactive tie row is in the span of the negative ones: ranks 4 and 3 (dim_free = 5 - 1 = 4, the
    rescaling of the unit).
    """
    w, b, a, c = Fraction(1), Fraction(0), Fraction(1, 4), Fraction(-3, 2)
    rows = []
    for x in (Fraction(0), Fraction(-3, 2), Fraction(-4, 5), Fraction(-2), Fraction(3, 2), Fraction(-3)):
        z = w * x + b
        on = z > 0 or (z == 0 and active_at_0)
        rows.append([c * x, c, Fraction(0), z, Fraction(1)] if on else [c * a * x, c * a, c * z, a * z, Fraction(1)])
    return _rank(rows)


def _case_file(tmp_path, obj, name="c.json"):
    path = tmp_path / name
    path.write_text(json.dumps(obj))
    return path


def test_dropped_tie_resolution_is_invalid(tmp_path, capsys):
    assert (_prelu_rank(True), _prelu_rank(False)) == (4, 3)
    path = _case_file(tmp_path, PRELU)
    case = load_case(path)
    rep = check(case, numeric=False).to_dict()
    assert rep["dim"] == 4 and verify_certificate(case, rep, require_claims=True)[0]
    # the forgery: the inactive resolution (rank 3) deleted, rank_gamma 4, cs true
    bad = copy.deepcopy(rep)
    res = bad["certificate"]["free_rank"]["resolutions"]
    keep = [j for j, r in enumerate(res) if r["active"] == [True]]
    bad["certificate"]["free_rank"]["resolutions"] = [res[j] for j in keep]
    bad["patterns"] = [bad["patterns"][j] for j in keep]
    bad.update(rank_gamma=4, cs=True)
    bad.pop("rank_gamma_interval", None)
    bad.pop("montecarlo", None)
    valid, msgs = verify_certificate(case, bad, require_claims=True)
    assert not valid and any("missing: [False]" in m for m in msgs), msgs
    rp = _case_file(tmp_path, bad, "r.json")
    assert run_verify_certificate(str(path), str(rp)) == 3
    capsys.readouterr()


def test_rank_gamma_is_the_smallest_over_the_resolutions(tmp_path):
    """The engine enumerates every resolution (it used to stop at the first one short of dim_free): on the PReLU
    net the smallest is 3 (hand derivation above), whatever the order; exact ranks give exactly 3."""
    case = load_case(_case_file(tmp_path, PRELU))
    fast, slow = check(case, numeric=False), check(case, numeric=False, exact_ranks=True)
    lo, hi = fast.rank_gamma_interval or (fast.rank_gamma, fast.rank_gamma)
    assert lo <= 3 <= hi and slow.rank_gamma == 3 and slow.cs is False
    assert [p["rank_gamma"] for p in slow.to_dict()["patterns"]] == [4, 3]


@pytest.mark.parametrize("seed", [4, 27])  # 27: the first resolution short of dim_free has rank 4, another 3
def test_rank_gamma_minimum_on_random_layer_graphs(seed):
    """Random layer graphs with ties (tests/constrained_oracle.py): the engine's rank_gamma (exact ranks) is the
    sympy minimum over every tie resolution, and the verifier refuses the report claiming any other resolution's."""
    cn, X, _report_fast, per = _layer_graph_with_ties(seed)
    true_min = min(per.values())
    slow = check_constrained(cn, X, max_resolutions=16, exact_ranks=True).to_dict()
    assert slow["rank_gamma"] == true_min
    assert verify_constrained(cn, X, slow)[0]
    for other in sorted(set(per.values()) - {true_min}):
        assert not verify_constrained(cn, X, dict(slow, rank_gamma=other))[0]


def _layer_graph_with_ties(seed: int, max_ties: int = 3):
    """The first random constrained net from ``seed`` on whose sample some kinked unit has a tie."""
    for s in range(seed, seed + 200):
        cn = random_constrained(s, p_fixed=0.15)
        X = random_sample(s, random.Random(s).randint(2, 6), cn.widths[0])
        report = check_constrained(cn, X, max_resolutions=16).to_dict()
        part = (report.get("certificate") or {}).get("free_rank")
        if not part or not 1 <= len(part["ties"]) <= max_ties:
            continue
        ties = [(t["sample"], t["layer"], t["neuron"]) for t in part["ties"]]
        per = {tuple(r["active"]): oracle_rank(cn, X, dict(zip(ties, r["active"]))) for r in part["resolutions"]}
        if len(set(per.values())) > 1:
            return cn, X, report, per
    pytest.skip("no random layer graph with ties of different ranks")


# ----------------------------------------------------------------------------------------------------------
# 3. no weaker verdict beside a proof, for a layer graph as for the MLP

DEAD = {"format": "exactident-case/2", "name": "dead-skip", "input_shape": [1],
        "layers": [{"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [["1"], ["1"]], "bias": ["0", "-10"]},
                   {"name": "act", "op": "relu", "inputs": ["fc1"]},
                   {"name": "fc2", "op": "linear", "inputs": ["act"], "weight": [["1", "1"]], "bias": ["0"]},
                   {"name": "res", "op": "add", "inputs": ["fc2", "input"]}],
        "output": "res", "sample": [["-2"], ["-1"], ["1"], ["2"], ["3"]]}


def test_weaker_verdict_refused_for_a_layer_graph(tmp_path):
    """Unit 1 (z = x - 10) is dead on x <= 3: lowering its bias changes nothing on X but changes f at x = 20, so
    theta is not locally identifiable; the engine proves it with a dead_units part.  'inconclusive' beside that
    valid part is a downgrade, refused as the MLP verifier refuses it."""
    case = load_case(_case_file(tmp_path, DEAD))
    rep = check(case, numeric=False).to_dict()
    assert (rep["verdict"], rep["decided_by"]) == ("not-identifiable", "dead-units")
    assert verify_certificate(case, rep, require_claims=True)[0]
    weaker = dict(rep, verdict="inconclusive", decided_by="none")
    valid, msgs = verify_certificate(case, weaker, require_claims=True)
    assert not valid and any(m.startswith("verdict: report says inconclusive, but the certificate proves "
                                          "not-identifiable") for m in msgs), msgs


def test_weaker_verdict_refused_for_an_mlp():
    case, rep = _report(TWINS)
    valid, msgs = verify_certificate(case, dict(rep, verdict="inconclusive", decided_by="none"), require_claims=True)
    assert not valid and any("but the certificate proves not-identifiable" in m for m in msgs)


# ----------------------------------------------------------------------------------------------------------
# 5. capped verification


def test_exact_elimination_past_the_cap_is_not_verified_quickly(tmp_path, capsys):
    """The same exact-elimination rank part is VALID under the default caps and 'not verified' past a small one;
    a Gamma far past the default cap (600 x 551) is refused before it is built, within seconds."""
    case, rep = _report(TWINS)
    g = rep["certificate"]["rank"]["rank_gamma"]
    rep["certificate"]["rank"]["rank_gamma"] = {"rank": g["rank"], "shape": g["shape"],
                                                "upper": {"kind": "exact-elimination"}}
    rep.pop("certified_by")
    assert verify_certificate(case, rep, require_claims=True)[0]
    valid, msgs = verify_certificate(case, rep, require_claims=True, limits=WorkLimits(max_exact_entries=10))
    assert not valid and any("past the verifier's limit of 10 words (--max-exact-entries): not verified" in m
                             for m in msgs)
    path, rp = _case_file(tmp_path, TWINS), _case_file(tmp_path, rep, "r.json")
    from exactident.cli import main

    assert main(["verify-certificate", str(path), str(rp), "--max-exact-entries", "10"]) == 3
    assert capsys.readouterr().out.rstrip().endswith("certificate NOT VERIFIED (past a --max-* limit of the verifier)")
    # widths 10-50-1 on 600 samples: dim 500 + 50 + 1 = 551, Gamma 600 x 551 = 330,600 entries > 200,000
    rng = random.Random(5)
    big = {"format": "exactident-case/1", "name": "big", "widths": [10, 50, 1],
           "weights": [[[f"{rng.randint(-99, 99)}/{rng.randint(1, 97)}" for _ in range(10)] for _ in range(50)],
                       [[f"{rng.choice([-1, 1]) * rng.randint(1, 99)}/7" for _ in range(50)]]],
           "biases": [[f"{rng.randint(-9, 9)}/{rng.randint(1, 13)}" for _ in range(50)], ["1/3"]],
           "sample": [[f"{rng.randint(-99, 99)}/{rng.randint(1, 89)}" for _ in range(10)] for _ in range(600)]}
    forged = {"name": "big", "verdict": "identifiable", "decided_by": "theorem-9", "rank_gamma": 551,
              "certificate": {"rank": {"rank_gamma": {"rank": 551, "shape": [600, 551],
                                                      "upper": {"kind": "exact-elimination"}}}}}
    path, rp = _case_file(tmp_path, big, "big.json"), _case_file(tmp_path, forged, "big-r.json")
    start = time.perf_counter()
    assert run_verify_certificate(str(path), str(rp)) == 3
    assert time.perf_counter() - start < 20  # answered, not eliminated (the elimination took minutes)
    out = capsys.readouterr().out
    assert "(--max-exact-entries): not verified" in out
    assert out.rstrip().endswith("certificate NOT VERIFIED (past a --max-* limit of the verifier)")


def test_layer_graph_caps(tmp_path, capsys):
    """exact-elimination on a layer graph's resolution, and more tie resolutions than --max-resolutions."""
    path = _case_file(tmp_path, PRELU)
    case = load_case(path)
    rep = check(case, numeric=False, exact_ranks=True).to_dict()
    for res in rep["certificate"]["free_rank"]["resolutions"]:
        res["rank_gamma"] = {"rank": res["rank_gamma"]["rank"], "shape": res["rank_gamma"]["shape"],
                             "upper": {"kind": "exact-elimination"}}
    assert verify_certificate(case, rep, require_claims=True)[0]
    valid, msgs = verify_certificate(case, rep, require_claims=True, limits=WorkLimits(max_exact_entries=10))
    assert not valid and any("(--max-exact-entries): not verified" in m for m in msgs)
    valid, msgs = verify_certificate(case, rep, require_claims=True, limits=WorkLimits(max_resolutions=1))
    assert not valid and any("(--max-resolutions): not verified" in m for m in msgs)
    from exactident.cli import main

    assert main(["verify-certificate", str(path), str(_case_file(tmp_path, rep, "r.json")),
                 "--max-resolutions", "1"]) == 3
    assert "NOT VERIFIED" in capsys.readouterr().out


# ----------------------------------------------------------------------------------------------------------
# the mutation campaign


def _interval_mlp(seed: int) -> dict:
    """Widths 5-4-2 on 10 samples, first-layer biases very negative: few active neurons, so the active-blocks
    count bounds R_Gamma below R_A and the engine reports an interval (as on MNIST)."""
    rng = random.Random(seed)
    widths = [5, 4, 2]
    W = [[[f"{rng.randint(-8, 8)}/4" for _ in range(widths[l - 1])] for _ in range(widths[l])] for l in (1, 2)]
    b = [[f"{rng.randint(-40, -20) if l == 1 else rng.randint(-4, 4)}/4" for _ in range(widths[l])] for l in (1, 2)]
    X = [[f"{rng.randint(0, 8)}/2" for _ in range(5)] for _ in range(10)]
    return {"format": "exactident-case/1", "name": f"iv-{seed}", "widths": widths, "weights": W, "biases": b,
            "sample": X}


def _tie_mlp(seed: int) -> dict:
    """Widths 1-2-1 or 2-2-1, small integer weights; one sample on a first-layer kink (x = -b/w)."""
    rng = random.Random(seed)
    n0 = rng.choice([1, 2])
    widths = [n0, 2, 1]
    W1 = [[rng.choice([-3, -2, -1, 1, 2, 3]) for _ in range(n0)] for _ in range(2)]
    b1 = [rng.randint(-3, 3) for _ in range(2)]
    W2 = [[rng.choice([-2, -1, 1, 2, 3]) for _ in range(2)]]
    X = [[Fraction(rng.randint(-6, 6), 2) for _ in range(n0)] for _ in range(rng.randint(2, 5))]
    v = rng.randrange(2)
    kink = [Fraction(0)] * n0
    kink[0] = Fraction(-b1[v], W1[v][0])
    X.append(kink)
    rng.shuffle(X)
    return {"format": "exactident-case/1", "name": f"tie-{seed}", "widths": widths,
            "weights": [[[str(w) for w in row] for row in W1], [[str(w) for w in row] for row in W2]],
            "biases": [[str(v) for v in b1], [str(rng.randint(-2, 2))]],
            "sample": [[str(v) for v in x] for x in X]}


def _mutants(rep: dict, layer_graph: bool):
    """(kind, mutated report): the kinds of the issue; each a claim the certificate does not prove, or a weaker
    verdict, or a listed resolution removed."""
    out = []

    def mut(kind, fn):
        r = copy.deepcopy(rep)
        if fn(r) is not False:
            out.append((kind, r))

    iv = rep.get("rank_gamma_interval")
    if iv:
        lo, hi = iv
        mut("too tight", lambda r: r.update(rank_gamma_interval=[lo + 1, hi]) if lo + 1 < hi else False)
        mut("too tight", lambda r: r.update(rank_gamma_interval=[lo, hi - 1]) if lo < hi - 1 else False)
        mut("closed", lambda r: r.update(rank_gamma_interval=None, montecarlo=None, rank_gamma=lo))
        mut("closed", lambda r: r.update(rank_gamma_interval=None, montecarlo=None, rank_gamma=hi))
        for k in (1, 2, 3):
            mut("lower above truth", lambda r, k=k: r.update(rank_gamma_interval=[lo + k, hi + k]))
            mut("upper below truth", lambda r, k=k: r.update(rank_gamma_interval=[max(lo - k, 0), hi - k])
                if hi - k > max(lo - k, 0) else False)
        mut("cs flipped", lambda r: r.update(cs=not r["cs"]) if r.get("cs") is not None else r.update(cs=True))
    elif rep.get("rank_gamma") is not None:
        rg = rep["rank_gamma"]
        for k in (-1, 1):
            mut("rank off by one", lambda r, k=k: r.update(rank_gamma=rg + k))
        mut("interval invented", lambda r: r.update(rank_gamma=None, rank_gamma_interval=[rg, rg + 1],
                                                    montecarlo={"rank_gamma": rg, "error_probability": 0.0}))
        mut("cs flipped", lambda r: r.update(cs=not r["cs"]) if r.get("cs") is not None else False)
    # a true, weaker claim: rank_gamma and cs dropped (null claims nothing); must be accepted
    mut("claim dropped", lambda r: r.update(rank_gamma=None, cs=None))
    # the verdict flipped, with its rule
    rules = ({"identifiable": "free-rank", "not-identifiable": "dead-units", "inconclusive": "none"} if layer_graph
             else {"identifiable": "theorem-9", "not-identifiable": "theorem-8", "inconclusive": "none"})
    for verdict, rule in rules.items():
        if verdict != rep["verdict"]:
            kind = "weaker verdict" if verdict == "inconclusive" else "verdict flipped"
            mut(kind, lambda r, verdict=verdict, rule=rule: r.update(verdict=verdict, decided_by=rule))
    cert = rep.get("certificate") or {}
    listed = (cert.get("free_rank") or {}).get("resolutions") if layer_graph else \
        (cert.get("boundary") or {}).get("resolutions")
    for j in range(len(listed or [])):
        def drop(r, j=j):
            part = r["certificate"]["free_rank" if layer_graph else "boundary"]
            part["resolutions"].pop(j)
            if r.get("patterns") and len(r["patterns"]) > j:
                r["patterns"].pop(j)
        mut("resolution dropped", drop)

        def drop_and_reclaim(r, j=j):  # the forgery: the claims recomputed over the resolutions kept
            drop(r, j)
            kept = [p.get("rank_gamma") for p in r.get("patterns") or []]
            if not kept or None in kept:
                return False
            low = min(kept)  # the verdict kept, as in the PReLU forgery
            r.update(rank_gamma=low, cs=low == r["dim"], rank_gamma_interval=None, montecarlo=None)
            return None
        mut("resolution dropped, claims recomputed", drop_and_reclaim)
    return out


def _claims_true(r: dict, true_min: int, dim: int, per_pattern: list[int | None]) -> bool:
    """Every rank claim and the verdict of an accepted report, against the independent truth."""
    ok = True
    iv = r.get("rank_gamma_interval")
    if iv is not None:
        ok &= iv[0] <= true_min <= iv[1]
    elif r.get("rank_gamma") is not None:
        ok &= r["rank_gamma"] == true_min
    if r.get("cs") is not None:
        ok &= r["cs"] == (true_min == dim)
    ok &= (r["verdict"] == "identifiable") == (true_min == dim)
    for p, truth in zip(r.get("patterns") or [], per_pattern):
        if p.get("rank_gamma") is not None:
            ok &= p["rank_gamma"] == truth
        if p.get("cs") is not None:
            ok &= p["cs"] == (truth == dim)
    return bool(ok)


def _campaign(n_mlp: int, n_graph: int, seed: int = 0, interval_seeds: Iterable[int] | None = None) -> dict:
    """Counts per kind: tried, refused, accepted and true, accepted and false (must stay 0).

    ``interval_seeds``: the seeds of :func:`_interval_mlp` to try (default: counting up from a seeded start).
    """
    rng = random.Random(seed)
    counts: dict[str, list[int]] = {}
    sources = {"mlp interval": 0, "mlp ties": 0, "layer graph": 0}

    def tally(kind, accepted, true):
        c = counts.setdefault(kind, [0, 0, 0, 0])
        c[0] += 1
        c[1] += not accepted
        c[2] += accepted and true
        c[3] += accepted and not true

    def run_mlp(obj, case, rep, label):
        if not verify_certificate(case, rep, require_claims=True)[0]:
            raise AssertionError(f"genuine report not valid: {obj['name']}")
        true_min, dim, _per = mlp_truth(obj)
        sources[label] += 1
        at: dict = {}  # the truth at each resolution a pattern names (visible ties; the others do not matter)
        for kind, bad in _mutants(rep, layer_graph=False):
            bad = {k: v for k, v in bad.items() if v is not None or k in ("rank_gamma", "rank_a", "cs", "cn")}
            accepted = verify_certificate(case, bad, require_claims=True)[0]
            pats = []
            for p in (bad.get("patterns") or []) if accepted else []:
                key = tuple(((t["sample"], t["layer"], t["neuron"]), t["active"]) for t in p["ties"])
                if key not in at:
                    at[key] = mlp_rank(obj, dict(key))
                pats.append(at[key])
            tally(kind, accepted, accepted and _claims_true(bad, true_min, dim, pats))

    found = 0
    start = rng.randrange(1000)  # drawn either way: the other families' seeds do not depend on interval_seeds
    for s in itertools.count(start) if interval_seeds is None else interval_seeds:
        if found >= n_mlp:
            break
        obj = _interval_mlp(s)
        case, rep = _report(obj, verdict_first=True)  # the interval the campaign mutates
        iv = rep.get("rank_gamma_interval")
        if iv and iv[1] - iv[0] >= 2:  # wide enough for every mutant ("too tight" at both ends)
            run_mlp(obj, case, rep, "mlp interval")
            found += 1
    found = 0
    for s in itertools.count(rng.randrange(1000)):
        if found >= n_mlp:
            break
        obj = _tie_mlp(s)
        if not _mlp_ties(*_net(obj)):
            continue
        run_mlp(obj, *_report(obj), "mlp ties")
        found += 1
    found = 0
    for s in itertools.count(rng.randrange(1000)):
        if found >= n_graph:
            break
        cn = random_constrained(s, p_fixed=0.15)
        X = random_sample(s, random.Random(s).randint(2, 6), cn.widths[0])
        rep = check_constrained(cn, X, max_resolutions=16).to_dict()
        part = (rep.get("certificate") or {}).get("free_rank")
        if not part or not (part["ties"] or rep.get("rank_gamma_interval")) or len(part["ties"]) > 3:
            continue
        found += 1
        sources["layer graph"] += 1
        assert verify_constrained(cn, X, rep)[0], s
        ties = [(t["sample"], t["layer"], t["neuron"]) for t in part["ties"]]
        # every side of every tie, enumerated here (not the resolutions the report lists)
        per = {sides: oracle_rank(cn, X, dict(zip(ties, sides)))
               for sides in itertools.product((True, False), repeat=len(ties))}
        dim = oracle_dim_free(cn)
        for kind, bad in _mutants(rep, layer_graph=True):
            bad = {k: v for k, v in bad.items() if v is not None or k in ("rank_gamma", "rank_a", "cs", "cn")}
            accepted = verify_constrained(cn, X, bad)[0]
            pats = [per.get(tuple(t["active"] for t in p["ties"])) for p in bad.get("patterns") or []]
            tally(kind, accepted, accepted and _claims_true(bad, min(per.values()), dim, pats))
    return {"sources": sources, "counts": counts}


def test_mutation_campaign_small():
    """Seeded, small (seconds): no mutant the verifier accepts is false; the issue's kinds are all refused
    (each changes a claim beyond what the certificate proves, or drops a resolution)."""
    # The first three nets of _interval_mlp, counting up from seed 561 (what seed=29 draws), whose interval is
    # at least 2 wide under verdict_first: the structural kernel closes the interval on all but about 1 in
    # 1,100 of them, so the search itself took 3,416 checks (70 s).  Given here; each is still required to be wide.
    result = _campaign(n_mlp=3, n_graph=4, seed=29, interval_seeds=(767, 1774, 3976))
    counts = result["counts"]
    assert sum(c[3] for c in counts.values()) == 0, counts
    for kind in ("too tight", "lower above truth", "upper below truth", "resolution dropped", "weaker verdict",
                 "verdict flipped", "cs flipped", "resolution dropped, claims recomputed"):
        assert kind in counts and counts[kind][0] > 0, (kind, counts)
        assert counts[kind][1] == counts[kind][0], (kind, counts)  # all refused
    assert all(n > 0 for n in result["sources"].values()), result
    assert result["sources"]["mlp interval"] == 3, result  # each given seed still has a wide interval
    assert counts["claim dropped"][2] == counts["claim dropped"][0] > 0, counts  # accepted, and true


@pytest.mark.skipif(not os.environ.get("EXACTIDENT_MUTATION_CAMPAIGN"), reason="the big run: set "
                    "EXACTIDENT_MUTATION_CAMPAIGN=N (sources per family)")
def test_mutation_campaign_big():
    n = int(os.environ["EXACTIDENT_MUTATION_CAMPAIGN"])
    result = _campaign(n_mlp=n, n_graph=n, seed=2029)
    print(json.dumps(result))
    assert sum(c[3] for c in result["counts"].values()) == 0, result
