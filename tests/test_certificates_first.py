"""Certificates first: a layer graph with many ties is settled by a certificate valid on every tie
resolution before any resolution is enumerated, with the verdict and certificate of the enumeration.

The network (by hand): ``f(x) = 2 leaky(x1) + 3 relu(x2) + 5 relu(x1 + x2 - 10) + 1``, leaky slope 1/10
on the first unit.  Five samples lie exactly on a kink (``x1 = 0`` three times, ``x2 = 0`` twice): five
ties, ``2^5 = 32`` tie resolutions, more than ``ENUMERATE_FIRST``.  The third unit is dead on the sample
(``x1 + x2 <= 6 < 10``), so lowering its bias keeps every output on X and changes ``f`` where the unit
is active: theta is not locally identifiable, whatever the resolution of the ties.
"""

from __future__ import annotations

from fractions import Fraction as F

import flint

from exactident.check import check_constrained
from exactident.check import pipeline as pipeline_module
from exactident.model.network import Network

X = [[0, 1], [0, 2], [0, 3], [1, 0], [2, 0], [1, 1], [2, 3], [3, 1], [1, 4], [4, 2]]


def _f(x, b3=F(-10)):
    """The network by hand, in Fractions (leaky slope 1/10 on the first unit)."""
    def relu(z):
        return max(z, F(0))

    def leaky(z):
        return z if z >= 0 else z / 10

    x1, x2 = F(x[0]), F(x[1])
    return 2 * leaky(x1) + 3 * relu(x2) + 5 * relu(x1 + x2 + b3) + 1


def _graph():
    q = flint.fmpq
    net = Network((2, 3, 1), [flint.fmpq_mat([[1, 0], [0, 1], [1, 1]]), flint.fmpq_mat([[2, 3, 5]])],
                  [[q(0), q(0), q(-10)], [q(1)]])
    cn = net
    cn.negative_slope[0][0] = q(1, 10)
    cn.features = ("leaky ReLU",)
    return cn


def test_many_ties_a_certificate_first_same_verdict_and_certificate(monkeypatch):
    # the truth, by hand: five samples on a kink; the third unit dead on X, alive at (5, 6)
    ties = [x for x in X if x[0] == 0 or x[1] == 0]
    assert len(ties) == 5 and 2 ** len(ties) > pipeline_module.ENUMERATE_FIRST
    for eps in (F(1, 8), F(1, 2), F(3)):
        assert all(_f(x, F(-10) - eps) == _f(x) for x in X)  # lowering b_1[2]: same outputs on X
    assert _f([5, 6]) == 34 and _f([5, 6], F(-10) - F(1, 8)) == F(267, 8)  # ... and another function

    first = check_constrained(_graph(), X).to_dict()
    monkeypatch.setattr(pipeline_module, "ENUMERATE_FIRST", 10 ** 9)  # every resolution enumerated first
    enumerated = check_constrained(_graph(), X).to_dict()

    assert first["n_ties"] == enumerated["n_ties"] == 5
    assert first["verdict"] == enumerated["verdict"] == "not-identifiable"
    assert first["decided_by"] == enumerated["decided_by"] == "dead-units"
    assert first["certificate"]["dead_units"] == enumerated["certificate"]["dead_units"]
    part = first["certificate"]["dead_units"]
    assert part["name"] == "b_1[2]" and part["units"] == [[1, 2]]
    x, eps = [F(v) for v in part["x"]], F(part["eps"])
    assert [F(v) for v in part["f_0"]] == [_f(x)]
    assert [F(v) for v in part["f_eps"]] == [_f(x, F(-10) + F(part["direction"]) * eps)]
    # nothing was enumerated first: no resolution's rank, and the rule of the ranks says why it did not run
    assert first["patterns"] == [] and len(enumerated["patterns"]) == 32
    assert "free_rank" not in first["certificate"]
    rules = {e["rule"]: e for e in first["rules"]}
    assert rules["free-rank"]["status"] == "not-run" and "first" in rules["free-rank"]["why"]
    assert rules["theorem-8"]["status"] == "not-applicable"


def test_few_ties_the_resolutions_come_first():
    """Two ties (4 resolutions, at most ENUMERATE_FIRST): every resolution's rank is reported, as before."""
    X2 = [[0, 1], [1, 0], [1, 1], [2, 3], [3, 1], [1, 4], [4, 2], [2, 2], [3, 3], [1, 2]]
    report = check_constrained(_graph(), X2).to_dict()
    assert report["n_ties"] == 2 and len(report["patterns"]) == 4
    assert report["verdict"] == "not-identifiable" and report["decided_by"] == "dead-units"
    assert "free_rank" in report["certificate"]


def test_every_stage_runs_or_says_in_one_line_which_hypothesis_fails():
    """One pipeline for both kinds of network: a stage that does not run names the hypothesis that fails."""
    from exactident.check.options import CheckOptions
    from exactident.check.pipeline import STAGES, Work, run_stages
    from exactident.io.case import parse_case

    options = CheckOptions(numeric=False, progress=False)
    graph = Work(name="g", X=[[flint.fmpq(v) for v in x] for x in X], options=options, cn=_graph())
    assert run_stages(graph).decided_by == "dead-units"
    # the layer graph: its certificate came first (five ties), Props. 1 and 10 are the MLP's lifting
    assert set(graph.not_run) == {"structural certificates", "propositions", "float cross-check"}
    assert "layer graph" in graph.not_run["propositions"]
    assert "certificates first" in graph.not_run["structural certificates"]

    case = parse_case({"format": "exactident-case/1", "name": "t", "widths": [1, 1, 1], "weights": [[["2"]], [["3"]]],
                       "biases": [["1"], ["0"]], "sample": [[0], [1], [-1]]})
    mlp = Work(name="t", X=case.X, options=options, net=case.network, case=case)
    assert run_stages(mlp).verdict == "identifiable"  # kink-free, rank Gamma = dim = 3 (docs/theory.md)
    assert set(mlp.not_run) == {"certificates first", "structural certificates", "propositions", "float cross-check"}
    assert "MLP" in mlp.not_run["certificates first"]
    for work in (graph, mlp):
        assert set(work.not_run) <= {s.name for s in STAGES}
        assert all(why and "\n" not in why for why in work.not_run.values())
