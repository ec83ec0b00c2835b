"""The engine's constrained reports through verify-certificate: genuine ones VALID, mutated ones INVALID;
the float numeric block and crosscheck beside them.

The engine (exactident.check, its layer-graph stages) and the verifier (exactident.verify) share no
code path; the cases are the shipped format-2 cases and random constrained networks.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from xverify_oracle import random_constrained

check_constrained = pytest.importorskip("exactident.check").check_constrained
pytest.importorskip("exactident.model.compile")

from exactident.check import check  # noqa: E402
from exactident.io.case import load_case  # noqa: E402
from exactident.verify.certificate import (  # noqa: E402
    run_verify_certificate,
    verify_certificate,
    verify_constrained,
)

# the small hand-made cases: the trained digits models (cases/architectures/digits-*, 700-1,500 parameters on
# 200 rows) take minutes per check and are far past the sympy oracle; tests/test_architecture_cases.py loads them
CASES = sorted(p for p in (Path(__file__).resolve().parent.parent / "cases" / "architectures").glob("*.json")
               if not p.name.startswith("digits-"))


def _mutations(report):
    """(label, mutated report): each changes a claim the verifier recomputes (none can stay true)."""
    out = []

    def mut(label, fn):
        r = copy.deepcopy(report)
        fn(r)
        out.append((label, r))

    mut("dim", lambda r: r.update(dim=r["dim"] + 1))
    mut("widths", lambda r: r["widths"].__setitem__(0, r["widths"][0] + 1))
    mut("n_samples", lambda r: r.update(n_samples=r["n_samples"] + 1))
    mut("cn", lambda r: r.update(cn=False))
    mut("rank_a", lambda r: r.update(rank_a=1))
    mut("n_ties", lambda r: r.update(n_ties=r["n_ties"] + 1))
    mut("on_boundary", lambda r: r.update(on_boundary=not r["on_boundary"]))
    mut("decided_by theorem-8", lambda r: r.update(decided_by="theorem-8"))
    mut("degenerate", lambda r: r.update(degenerate=True))
    for key in ("n_params", "rank_t", "symmetry_dim", "dim_free", "softmax_rank_bound"):
        if key in report["architecture"]:
            mut(f"architecture.{key}", lambda r, key=key: r["architecture"].update({key: r["architecture"][key] + 1}))
    mut("features", lambda r: r["architecture"].update(features=r["architecture"]["features"] + ["PReLU?"]))
    if report["rank_gamma"] is not None:
        mut("rank_gamma", lambda r: r.update(rank_gamma=r["rank_gamma"] + 1))
        mut("cs", lambda r: r.update(cs=not r["cs"] if r["cs"] is not None else True))
    mut("verdict", lambda r: r.update(verdict="identifiable" if r["verdict"] != "identifiable" else "inconclusive",
                                      decided_by="free-rank" if r["verdict"] != "identifiable" else "none"))
    cert = report.get("certificate") or {}
    if "free_rank" in cert:
        res = cert["free_rank"]["resolutions"]
        mut("rank_mod_p", lambda r: r["certificate"]["free_rank"]["resolutions"][0]["rank_gamma"]["lower"]
            .update(rank_mod_p=res[0]["rank_gamma"]["lower"]["rank_mod_p"] + 1))
        last = res[-1]["rank_gamma"]
        if "rank" in last:
            mut("certified rank", lambda r: r["certificate"]["free_rank"]["resolutions"][-1]["rank_gamma"]
                .update(rank=last["rank"] + 1))
        else:  # the interval form: claiming the lower end exact, with no upper bound that proves it
            mut("interval form closed", lambda r: r["certificate"]["free_rank"]["resolutions"][-1]["rank_gamma"]
                .update(rank=last["lower"]["rank_mod_p"]))
    if "rank_gamma_interval" in report:
        lo, hi = report["rank_gamma_interval"]
        mut("interval lower end + 1", lambda r: r.update(rank_gamma_interval=[lo + 1, hi]))
        mut("interval upper end below the lower", lambda r: r.update(rank_gamma_interval=[lo, lo - 1]))
        mut("montecarlo value", lambda r: r["montecarlo"].update(rank_gamma=hi + 1))  # outside the interval
        # (dropping montecarlo claims less: rank_gamma is null beside the interval, so it is no mutation)
        mut("interval dropped", lambda r: r.pop("rank_gamma_interval"))
        if cert["free_rank"]["ties"]:
            mut("ties", lambda r: r["certificate"]["free_rank"]["ties"].pop())
    for key in ("dead_units", "constant_units"):
        if key in cert:
            mut(f"{key}.f_eps", lambda r, key=key: r["certificate"][key].update(f_eps=["12345"] * len(
                r["certificate"][key]["f_eps"])))
            mut(f"{key}.eps", lambda r, key=key: r["certificate"][key].update(eps="1/1000"))
            mut(f"{key} dropped", lambda r, key=key: r["certificate"].pop(key))
    return out


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_shipped_architecture_reports_verify_and_mutations_fail(path, tmp_path, capsys):
    case = load_case(path)
    report = check(case).to_dict()
    assert report["numeric"]["rank_gamma"] is not None and report["numeric"]["rank_a"] is None
    valid, msgs = verify_certificate(case, report, require_claims=True)
    assert valid, msgs
    rp = tmp_path / "r.json"
    rp.write_text(json.dumps(report))
    assert run_verify_certificate(str(path), str(rp)) == 0
    for label, bad in _mutations(report):
        valid, msgs = verify_certificate(case, bad, require_claims=True)
        assert not valid, (label, msgs)
    rp.write_text(json.dumps(dict(report, cn=True)))
    assert run_verify_certificate(str(path), str(rp)) == 3
    assert "Theorem 8 (C_N) is not proved for" in capsys.readouterr().out


@pytest.mark.parametrize("seed", [0, 1, 4, 7, 11])
def test_engine_reports_on_random_constrained_nets(seed):
    cn, X = random_constrained(seed, n=8)
    report = check_constrained(cn, X, name="r").to_dict()
    valid, msgs = verify_constrained(cn, X, report)
    assert valid, msgs
    for label, bad in _mutations(report):
        assert not verify_constrained(cn, X, bad)[0], label


def test_crosscheck_of_a_constrained_case():
    from exactident.crosscheck.core import crosscheck_case

    case = load_case(CASES[0])
    c = crosscheck_case(case)
    exact = check(case, numeric=False)
    assert c.pattern_rank_gamma == exact.pattern_ranks[0] and c.dim == exact.dim
    assert all(o.rank_a is None for o in c.outcomes)
    assert not any("full-jacobian" in o.policy for o in c.outcomes)
    assert c.outcome("float64/numpy-default").right_ranks


def test_engine_reports_of_every_certificate_kind_verify():
    # the engine's own random family (tests/constrained_oracle.py, B1): 80 cases give every verdict and every
    # certificate kind (free-rank, dead-units, constant-units, slope-lines, submersion, entering-submersion, line,
    # constant-rank); all VALID
    import random

    engine_oracle = pytest.importorskip("constrained_oracle")
    kinds = set()
    for seed in [*range(0, 40), *range(100, 140)]:
        cn = engine_oracle.random_constrained(seed, p_fixed=0.15)
        X = engine_oracle.random_sample(seed, random.Random(seed).randint(1 if seed >= 100 else 2, 6), cn.widths[0])
        report = check_constrained(cn, X, max_resolutions=16).to_dict()
        valid, msgs = verify_constrained(cn, X, report)
        assert valid, (seed, msgs)
        kinds.add(report["decided_by"])
        if report["verdict"] == "not-identifiable":  # the certificate is what makes it so
            assert not verify_constrained(cn, X, dict(report, certificate=None))[0], seed
    assert kinds == {"none", "free-rank", "dead-units", "constant-units", "slope-lines", "submersion",
                     "entering-submersion", "line", "constant-rank"}


def test_check_torch_pipeline_on_a_constrained_case():
    pytest.importorskip("torch")
    case = load_case(CASES[0])
    block = check(case, pipelines="torch").numeric
    assert block["pipelines"] == ["float64", "torch"]
    assert block["torch"]["rank_gamma"] == block["rank_gamma"] == check(case, numeric=False).pattern_ranks[0]
