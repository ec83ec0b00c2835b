"""verify-certificate for constrained networks (verify.certificate.verify_constrained): facts against the sympy
oracle, genuine reports accepted, every mutated field rejected, hand-derived cases.

Genuine reports are built here from the oracle's values (tests/xverify_oracle.py: sympy
Jacobian, sympy rescaling constraints), never from exactident's own output.
"""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path

import flint
import numpy as np
import pytest
import sympy as sp
from xverify_oracle import Oracle, conv1d_net, random_constrained, residual_net

from exactident.model.network import Network
from exactident.verify.certificate import verify_constrained
from exactident.verify.facts import ConstrainedFacts
from exactident.verify.gamma import rank_mod_p, verifier_primes

q = flint.fmpq


def _ties(cn, X):
    """(sample, layer, unit) with z = 0 at a kinked unit, from the oracle's pre-activations."""
    Z = Oracle.of(cn, X).pre_activations()
    return [(i, l, v) for i in range(len(X)) for l in range(1, cn.L) for v in range(cn.widths[l])
            if Z[i][l - 1][v] == 0 and (cn.slope_index[l - 1][v] >= 0 or cn.negative_slope[l - 1][v] != 1)]


def _fstr(v) -> str:
    v = sp.Rational(v)
    return str(v.p) if v.q == 1 else f"{v.p}/{v.q}"


def _rank_mod(G: sp.Matrix, p: int) -> int:
    """Rank of the oracle's matrix mod p (FLINT nmod_mat on residues of sympy's entries)."""
    if G.rows == 0 or G.cols == 0:
        return 0
    return int(flint.nmod_mat(G.rows, G.cols, [int(v.p) * pow(int(v.q), -1, p) % p for v in G], p).rank())


PRIME = 2147483629  # a prime below 2^31 (the denominators here are tiny)


def genuine(cn, X, features=("random",)):
    """The report a correct engine writes (the engine's format), from the oracle: every tie resolution's
    rank with its certificate (lower: rank mod a prime; upper: the symmetry bound or exact kernel vectors),
    dim_free, verdict."""
    o = Oracle.of(cn, X)
    ties = _ties(cn, X)
    Z = o.pre_activations()
    k, sd = cn.n_params, o.symmetry_dim()
    dim_free = k - sd
    resolutions, patterns, worst, nonzero = [], [], None, None
    for sides in itertools.product((True, False), repeat=len(ties)):
        active = [[[Z[i][l][v] >= 0 for v in range(cn.widths[l + 1])] for i in range(len(X))]
                  for l in range(cn.L - 1)]
        for (i, l, v), s in zip(ties, sides):
            active[l - 1][i][v] = s
        G = o.gamma(active)
        r = Oracle.rank(G)
        cert = {"rank": r, "shape": [G.rows, k], "lower": {"prime": PRIME, "rank_mod_p": _rank_mod(G, PRIME)}}
        if r == dim_free:
            cert["upper"] = {"kind": "symmetry", "bound": dim_free}
        else:
            kernel = [[[i, _fstr(v)] for i, v in enumerate(col) if v != 0] for col in G.nullspace()]
            cert["upper"] = {"kind": "kernel", "bound": r, "kernel": kernel}
            nonzero = next(c for c in range(k) if any(G[:, c]))
        resolutions.append({"active": list(sides), "rank_gamma": cert})
        patterns.append({"ties": [{"sample": i, "layer": l, "neuron": v, "active": a}
                                  for (i, l, v), a in zip(ties, sides)],
                         "rank_gamma": r, "rank_a": None, "cs": r == dim_free, "cn": None})
        worst = r if worst is None else min(worst, r)
    # the report's widths are the user's layers: the compiler's skip carriers ("skip(...)") are not counted
    users = [cn.widths[0]] + [sum(not n.startswith("skip(") for n in names) for names in cn.unit_names] \
        if cn.unit_names else list(cn.widths)
    report = {"format": "exactident-report/1", "name": "c", "widths": users, "n_samples": len(X),
              "dim": dim_free, "rank_gamma": worst, "rank_a": None, "cs": worst == dim_free, "cn": None,
              "degenerate": False, "on_boundary": bool(ties), "n_ties": len(ties),
              "architecture": {"features": list(features), "n_params": k, "rank_t": k, "symmetry_dim": sd,
                               "dim_free": dim_free, "input_shape": [cn.widths[0]]},
              "certificate": {"free_rank": {"kind": "free-rank",
                                            "ties": [{"sample": i, "layer": l, "neuron": v} for i, l, v in ties],
                                            "resolutions": resolutions}}}
    if ties:
        report["patterns"] = patterns
    if worst == dim_free:
        report.update(verdict="identifiable", decided_by="free-rank")
    else:
        report.update(verdict="inconclusive", decided_by="none",
                      reason=f"C_N is not proved for {', '.join(features)}")
        report["_nonzero_column"] = nonzero
    return report


def _ok(cn, X, report):
    report = {key: v for key, v in report.items() if not key.startswith("_")}
    return verify_constrained(cn, X, report)


@pytest.mark.parametrize("seed", range(5))
def test_facts_match_the_oracle(seed):
    cn, X = random_constrained(seed, n=8)
    o = Oracle.of(cn, X)
    facts = ConstrainedFacts.from_network(cn, X)
    assert facts.symmetry.symmetry_dim == o.symmetry_dim()
    assert facts.symmetry.dim_free == cn.n_params - o.symmetry_dim()
    assert facts.ties == sorted(_ties(cn, X), key=lambda t: (t[1], t[0], t[2]))
    G = o.gamma()
    p = verifier_primes(1, facts.avoid)[0]
    Gp = facts.gamma_mod_p(p)
    ref = np.array([int(v.p) * pow(int(v.q), -1, p) % p for v in G], dtype=np.int64).reshape(G.rows, G.cols)
    assert np.array_equal(Gp, ref)
    assert rank_mod_p(Gp, p) <= Oracle.rank(G)


def _mutations(report):
    """(label, mutated report) for every field a verifier must recompute."""
    out = []

    def mut(label, fn):
        r = copy.deepcopy(report)
        fn(r)
        out.append((label, r))

    mut("dim+1", lambda r: r.update(dim=r["dim"] + 1))
    mut("widths", lambda r: r["widths"].__setitem__(1, r["widths"][1] + 1))
    mut("n_samples", lambda r: r.update(n_samples=r["n_samples"] + 1))
    mut("rank_gamma+1", lambda r: r.update(rank_gamma=r["rank_gamma"] + 1))
    if report["rank_gamma"] > 0:
        mut("rank_gamma-1", lambda r: r.update(rank_gamma=r["rank_gamma"] - 1))
    mut("rank_a", lambda r: r.update(rank_a=0))
    mut("cn", lambda r: r.update(cn=True))
    mut("cs", lambda r: r.update(cs=not r["cs"]))
    mut("on_boundary", lambda r: r.update(on_boundary=not r["on_boundary"]))
    mut("n_ties", lambda r: r.update(n_ties=r["n_ties"] + 1))
    for key in ("n_params", "rank_t", "symmetry_dim", "dim_free"):
        mut(f"architecture.{key}", lambda r, key=key: r["architecture"].update({key: r["architecture"][key] + 1}))
    mut("features", lambda r: r["architecture"].update(features=["convolution", "PReLU"]))
    mut("unknown field", lambda r: r.update(extra=1))
    mut("degenerate", lambda r: r.update(degenerate=True))
    mut("theorem-8", lambda r: r.update(decided_by="theorem-8"))
    if report["verdict"] == "identifiable":
        mut("verdict inconclusive", lambda r: r.update(verdict="inconclusive"))
        mut("verdict not-identifiable", lambda r: r.update(verdict="not-identifiable"))
    else:
        mut("verdict identifiable", lambda r: r.update(verdict="identifiable"))
        mut("verdict not-identifiable", lambda r: r.update(verdict="not-identifiable"))
    res0 = report["certificate"]["free_rank"]["resolutions"]
    mut("lower rank_mod_p", lambda r: r["certificate"]["free_rank"]["resolutions"][0]["rank_gamma"]["lower"]
        .update(rank_mod_p=res0[0]["rank_gamma"]["lower"]["rank_mod_p"] + 1))
    mut("certified rank", lambda r: r["certificate"]["free_rank"]["resolutions"][0]["rank_gamma"]
        .update(rank=res0[0]["rank_gamma"]["rank"] + 1))
    mut("shape", lambda r: r["certificate"]["free_rank"]["resolutions"][0]["rank_gamma"]["shape"].__setitem__(1, 99))
    mut("no certificate", lambda r: r.pop("certificate"))
    if report["n_ties"]:
        mut("pattern rank", lambda r: r["patterns"][0].update(rank_gamma=r["patterns"][0]["rank_gamma"] + 1))
        mut("tie dropped", lambda r: r["certificate"]["free_rank"]["ties"].pop())
    if report["verdict"] != "identifiable":
        # no kernel vectors: only S_H is left, which bounds the rank by dim_free
        up = [res["rank_gamma"]["upper"] for res in res0 if res["rank_gamma"]["upper"]["kind"] == "kernel"]
        where = next(m for m, res in enumerate(res0) if res["rank_gamma"]["upper"]["kind"] == "kernel")
        if up[0]["kernel"]:
            mut("kernel emptied", lambda r: r["certificate"]["free_rank"]["resolutions"][where]
                ["rank_gamma"]["upper"]["kernel"].clear())
            mut("kernel vector not in the kernel", lambda r: r["certificate"]["free_rank"]["resolutions"][where]
                ["rank_gamma"]["upper"]["kernel"].__setitem__(0, [[report["_nonzero_column"], "1"]]))
        mut("upper symmetry", lambda r: r["certificate"]["free_rank"]["resolutions"][where]["rank_gamma"]
            .update(upper={"kind": "symmetry"}))
    return out


@pytest.mark.parametrize("seed", [0, 1, 4, 7])
def test_genuine_reports_accepted_and_mutations_rejected(seed):
    cn, X = random_constrained(seed, n=8)
    report = genuine(cn, X)
    valid, msgs = _ok(cn, X, report)
    assert valid, msgs
    for label, bad in _mutations(report):
        valid, msgs = _ok(cn, X, bad)
        assert not valid, (label, msgs)


def test_rank_deficient_report_with_kernel_accepted_and_mutated():
    # 4 samples where the conv net's second unit is never active: rank drops below dim_free = 5
    cn = conv1d_net(1, -1, 1, 2, 3, 0)
    X = [[q(v) for v in row] for row in [[1, 0, 2], [2, 1, 3], [3, 3, 5], [1, 2, 4], [0, 1, 2]]]
    report = genuine(cn, X, ("convolution",))
    assert report["verdict"] == "inconclusive" and report["rank_gamma"] < report["dim"]
    assert _ok(cn, X, report)[0], _ok(cn, X, report)[1]
    for label, bad in _mutations(report):
        assert not _ok(cn, X, bad)[0], label


def test_residual_net_by_hand_identifiable():
    # f = x + w2 relu(w1 x + b1): the carrier's rescaling is pinned by its fixed weight 1, the ReLU unit's is
    # kept: S_H = span (w1, b1, -w2), dim_free = 3 - 1 = 2; at x = 1, 2 (active) the rows (w2 x, w2, z) have rank 2
    cn = residual_net(1, 0, 2)
    X = [[q(1)], [q(2)], [q(-1)]]
    facts = ConstrainedFacts.from_network(cn, X)
    assert (facts.symmetry.rank_t, facts.symmetry.symmetry_dim, facts.symmetry.dim_free) == (3, 1, 2)
    report = genuine(cn, X, ("skip connection",))
    assert report["verdict"] == "identifiable"
    assert _ok(cn, X, report)[0]


def test_conv_channel_keeps_one_rescaling():
    # the tied kernel forces s_y0 = s_y1: one rescaling for the channel, dim S_H = 1, dim_free = 6 - 1
    facts = ConstrainedFacts.from_network(conv1d_net(1, -1, 1, 2, 3, 0), [[q(1), q(0), q(2)]])
    assert (facts.symmetry.dim_h, facts.symmetry.symmetry_dim, facts.symmetry.dim_free) == (1, 1, 5)


def _dead_net(slope):
    # f = 3 act(2 x - 10) + relu(x) + 1 with act a ReLU (slope 0) or leaky; x in [0, 4]: unit 0 never active.
    # Parameters: w1 = 2, b1 = -10, v0 = 3, v1 = 1 (unit 1's input weight 1 and the output bias 1 fixed)
    return Network((1, 2, 1), [flint.fmpq_mat([[2], [1]]), flint.fmpq_mat([[3, 1]])],
                              [[q(-10), q(0)], [q(1)]],
                              [np.array([[0], [-1]]), np.array([[2, 3]])], [np.array([1, -1]), np.array([-1])],
                              [[slope, q(0)]], [np.array([-1, -1])], 4, ("fixed weights",),
                              ["w1", "b1", "v0", "v1"])


DEAD_X = [[q(v)] for v in (0, 1, 2, 4)]


def _dead_report(part):
    # S_H: unit 0 keeps its rescaling (tangent (w1, b1, -v0, 0) = (2, -10, -3, 0)); unit 1 is pinned by its
    # fixed input weight 1: dim S_H = 1, dim_free = 3.  Gamma_free: only v1's column (relu(x)) is nonzero on X,
    # so rank 1 (x = 0 makes unit 1 a tie: z = 0, output 0 on either side).
    return {"format": "exactident-report/1", "name": "d", "verdict": "not-identifiable", "widths": [1, 2, 1],
            "n_samples": 4, "dim": 3, "rank_gamma": None, "rank_a": None, "cn": None, "decided_by": part["kind"],
            "architecture": {"features": ["fixed weights"], "n_params": 4, "rank_t": 4, "symmetry_dim": 1,
                             "dim_free": 3, "softmax_rank_bound": 1},
            "certificate": {part["kind"].replace("-", "_"): part}}


def test_dead_unit_lines_by_hand():
    cn = _dead_net(q(0))
    facts = ConstrainedFacts.from_network(cn, DEAD_X)
    assert (facts.symmetry.symmetry_dim, facts.symmetry.dim_free) == (1, 3)
    # lowering b1 keeps unit 0 dead on X; at x* = 11/2 it is active: f = 3 (11 - 10) + 11/2 + 1 = 19/2, and
    # with b1 = -10 - 1/8: 3 (7/8) + 11/2 + 1 = 73/8
    bias = {"kind": "dead-units", "parameter": 1, "name": "b1", "units": [[1, 0]], "direction": "-1", "t0": None,
            "eps": "1/8", "x": ["11/2"], "f_0": ["19/2"], "f_eps": ["73/8"]}
    valid, msgs = verify_constrained(cn, DEAD_X, _dead_report(bias))
    assert valid, msgs
    # lowering v0 (the dead unit's outgoing weight) by 1: f(11/2) = 2 + 11/2 + 1 = 17/2
    out = dict(bias, parameter=2, name="v0", eps="1", f_eps=["17/2"])
    assert verify_constrained(cn, DEAD_X, _dead_report(out))[0]
    for label, bad in [("live unit's weight", dict(bias, parameter=3, name="v1", f_eps=["85/8"])),
                       ("wrong name", dict(bias, name="w1")),
                       ("live unit listed", dict(bias, units=[[1, 1]])),
                       ("f_eps", dict(bias, f_eps=["9"])),
                       ("f_0", dict(bias, f_0=["9"])),
                       ("eps", dict(bias, eps="1/4")),
                       ("witness without change", dict(bias, x=["0"], f_0=["1"], f_eps=["1"]))]:
        assert not verify_constrained(cn, DEAD_X, _dead_report(bad))[0], label
    # a leaky unit outputs a z != 0 below its kink: no longer dead, the certificate is refused
    valid, msgs = verify_constrained(_dead_net(q(1, 10)), DEAD_X, _dead_report(bias))
    assert not valid and any("outputs -1 on sample 0, not 0" in m for m in msgs)
    # not-identifiable without a line: refused
    none = _dead_report(bias)
    del none["certificate"], none["decided_by"]
    assert not verify_constrained(cn, DEAD_X, none)[0]


def test_constant_unit_line_by_hand():
    # plain 2-2-1 net; unit 1 = relu(x1 + 2) is the constant 2 on samples with x1 = 0: raising its outgoing
    # weight v1 by t and lowering the output bias c by 2 t keeps f on X; at x* = (0, 1) unit 1 is 3, so f moves by t
    from exactident.model.network import Network

    net = Network((2, 2, 1), [flint.fmpq_mat([[1, 0], [0, 1]]), flint.fmpq_mat([[1, 1]])],
                  [[q(0), q(2)], [q(0)]])
    cn = net  # parameters W_1 row-major (0..3), b_1 (4, 5), W_2 (6, 7), b_2 (8)
    X = [[q(v), q(0)] for v in (1, 2, -1, 3)]
    part = {"kind": "constant-units", "units": [[1, 1]], "value": "2", "delta": [[7, "1"], [8, "-2"]],
            "names": ["W_2[0,1]", "b_2[0]"], "t0": None, "eps": "1", "x": ["0", "1"], "f_0": ["3"], "f_eps": ["4"]}
    report = {"format": "exactident-report/1", "name": "k", "verdict": "not-identifiable", "widths": [2, 2, 1],
              "n_samples": 4, "dim": 7, "rank_a": None, "cn": None, "decided_by": "constant-units",
              "architecture": {"features": [], "n_params": 9, "rank_t": 9, "symmetry_dim": 2, "dim_free": 7},
              "certificate": {"constant_units": part}}
    valid, msgs = verify_constrained(cn, X, report)
    assert valid, msgs
    for bad in (dict(part, value="3"), dict(part, delta=[[7, "1"], [8, "-3"]]), dict(part, units=[[1, 0]])):
        report["certificate"] = {"constant_units": bad}
        assert not verify_constrained(cn, X, report)[0], bad


def test_cn_value_refused_with_the_theorem_named():
    cn = residual_net(1, 0, 2)
    X = [[q(1)], [q(2)], [q(-1)]]
    report = genuine(cn, X, ("skip connection",))
    report["cn"] = False
    valid, msgs = verify_constrained(cn, X, report)
    assert not valid and any("Theorem 8 (C_N) is not proved for skip connection" in m for m in msgs)


def test_malformed_report_names_the_field():
    cn = residual_net(1, 0, 2)
    X = [[q(1)], [q(2)]]
    report = genuine(cn, X, ("skip connection",))
    report["architecture"]["dim_free"] = "2"
    valid, msgs = verify_constrained(cn, X, report)
    assert not valid and msgs == ["architecture.dim_free: expected int, found str"]


def test_timed_out_report_is_not_valid():
    cn = residual_net(1, 0, 2)
    X = [[q(1)], [q(2)], [q(-1)]]
    report = genuine(cn, X, ("skip connection",))
    report.update(timed_out=True, stage="ranks mod p", verdict="inconclusive", decided_by="none")
    valid, msgs = verify_constrained(cn, X, report)
    assert not valid and msgs[0].startswith("timed_out: the report says its analysis ran out of time")


def test_rank_interval_lower_end_is_checked():
    # without a free_rank part the verifier bounds the smallest rank over *every* tie resolution by its own
    # ranks mod p (below) and min(rows, dim_free) (above); a claimed interval must contain that.  The first
    # resolution (all ties active) has rank 4, another one less: the oracle's minimum over all of them is what
    # rank_gamma means (issue 29: [4, 5], the first resolution's, was accepted before)
    cn = conv1d_net(1, -1, 1, 2, 3, 0)
    X = [[q(v) for v in row] for row in [[1, 0, 2], [2, 1, 3], [3, 3, 5], [1, 2, 4], [0, 1, 2]]]
    report = genuine(cn, X, ("convolution",))
    first, low, dim = report["patterns"][0]["rank_gamma"], report["rank_gamma"], report["dim"]
    assert (first, dim) == (4, 5) and low < first  # low: the sympy minimum over every resolution
    for key in ("certificate", "_nonzero_column"):
        report.pop(key, None)
    # the resolution enumerated is listed without a rank (only the interval is certified)
    report["patterns"] = [dict(report["patterns"][0], rank_gamma=None, cs=None)]
    report.update(rank_gamma=None, cs=None, rank_gamma_interval=[low, dim])
    valid, msgs = _ok(cn, X, report)
    assert valid, msgs
    for bad in ([first, dim], [low + 1, dim], [low, dim + 1], [low, dim - 1]):
        assert not _ok(cn, X, dict(report, rank_gamma_interval=bad))[0], bad
    wrong_ties = [dict(report["patterns"][0], ties=report["patterns"][0]["ties"][1:])]
    assert not _ok(cn, X, dict(report, patterns=wrong_ties))[0]


# the small hand-made cases: the trained digits models (cases/architectures/digits-*, 700-1,500 parameters on
# 200 rows) take minutes per check and are far past the sympy oracle; tests/test_architecture_cases.py loads them
ARCH_CASES = sorted(p for p in (Path(__file__).resolve().parent.parent / "cases" / "architectures").glob("*.json")
               if not p.name.startswith("digits-"))


@pytest.mark.parametrize("path", ARCH_CASES, ids=[p.stem for p in ARCH_CASES])
def test_verify_certificate_on_format2_cases(path, tmp_path, capsys):
    # the verifier compiles the case itself (Case.compiled) and checks an oracle-built report
    from exactident.io.case import load_case
    from exactident.verify.certificate import run_verify_certificate, verify_certificate

    case = load_case(path)
    cn = case.compiled
    report = genuine(cn, case.X, cn.features)
    report = {k: v for k, v in report.items() if not k.startswith("_")}
    report.update(name=case.name, architecture=dict(report["architecture"], input_shape=list(
        case.architecture.input_shape)))
    if case.provenance:
        report["provenance"] = case.provenance
    valid, msgs = verify_certificate(case, report, require_claims=True)
    assert valid, msgs
    rp = tmp_path / "r.json"
    rp.write_text(json.dumps(report))
    assert run_verify_certificate(str(path), str(rp)) == 0
    for label, bad in [("cn", dict(report, cn=True)), ("dim", dict(report, dim=report["dim"] + 1)),
                       ("input_shape", dict(report, architecture=dict(report["architecture"], input_shape=[99]))),
                       ("plain report", {k: v for k, v in report.items() if k != "architecture"})]:
        rp.write_text(json.dumps(bad))
        assert run_verify_certificate(str(path), str(rp)) == 3, label
    out = capsys.readouterr().out
    assert "Theorem 8 (C_N) is not proved for" in out and "architecture: missing" in out


P31 = 2147483629


def _part_report(cn, X, key, part, dim):
    return {"format": "exactident-report/1", "name": "s", "verdict": "not-identifiable", "widths": list(cn.widths),
            "n_samples": len(X), "dim": dim, "rank_gamma": None, "rank_a": None, "cn": None,
            "decided_by": part["kind"],
            "architecture": {"features": list(cn.features), "n_params": cn.n_params, "rank_t": cn.n_params,
                             "symmetry_dim": cn.n_params - dim, "dim_free": dim},
            "certificate": {key: part}}


def test_submersion_by_hand():
    # f = x + 2 relu(x) at x = 1: Gamma_free = (w2 x, w2, z) = (2, 2, 1), full row rank 1 < dim_free 2; the point
    # y = 2 adds the row (4, 2, 2), independent: rank 2 > 1, so the fiber through theta moves f(2)
    cn, X = residual_net(1, 0, 2), [[q(1)]]
    part = {"kind": "submersion", "y": [["2"]], "prime": P31, "rank_x": 1, "rank_xy": 2}
    valid, msgs = verify_constrained(cn, X, _part_report(cn, X, "submersion", part, 2))
    assert valid, msgs
    for bad in (dict(part, y=[["1"]], rank_xy=1),  # the same point adds nothing
                dict(part, rank_xy=3), dict(part, rank_x=0),
                dict(part, y=[["0"]]),  # z = w1 0 + b1 = 0: on the kink
                dict(part, prime=2**31 - 3)):  # not a prime
        assert not verify_constrained(cn, X, _part_report(cn, X, "submersion", bad, 2))[0], bad
    # with a non-persistent tie at the sample the argument does not apply
    tie = [[q(0)]]
    assert not verify_constrained(cn, tie, _part_report(cn, tie, "submersion", part, 2))[0]


def test_entering_submersion_by_hand():
    # f = relu(w x + b) + d, w = 1, b = -1, d = 0 (outgoing weight fixed 1: no rescaling, dim_free = 3) at x = 1:
    # a tie.  Active side:
    # Gamma_free = (x, 1, 1) = (1, 1, 1), full row rank; delta = (1, 0, -1) is in its kernel and raises z
    # (x dw + db = 1 > 0): it enters the active piece; at y = 2, d f . delta = y dw + dd = 1 != 0
    cn = Network((1, 1, 1), [flint.fmpq_mat([[1]]), flint.fmpq_mat([[1]])], [[q(-1)], [q(0)]],
                            [np.array([[0]]), np.array([[-1]])], [np.array([1]), np.array([2])], [[q(0)]],
                            [np.array([-1])], 3, ("fixed weights",))
    X = [[q(1)]]
    part = {"kind": "entering-submersion", "active": [True], "delta": [[0, "1"], [2, "-1"]], "y": ["2"],
            "prime": P31, "rank_x": 1}
    valid, msgs = verify_constrained(cn, X, _part_report(cn, X, "entering_submersion", part, 3))
    assert valid, msgs
    for bad in (dict(part, delta=[[0, "1"], [1, "-1"]]),  # z stays 0: not strictly entering
                dict(part, active=[False]),  # Gamma_free = (0, 0, 1) there: delta not in its kernel
                dict(part, y=["1"]),  # on the kink
                dict(part, delta=[[0, "1"], [2, "-2"]]),  # not in the kernel
                dict(part, rank_x=2)):
        assert not verify_constrained(cn, X, _part_report(cn, X, "entering_submersion", bad, 3))[0], bad


def test_persistent_tie():
    # one channel, kernel (1, 2), no bias (fixed 0): at x = (0, 0, 1) pixel 0 sees (0, 0): z = 0 for every theta
    from exactident.verify.resolutions import persistent_ties

    cn = Network((3, 2, 1), [flint.fmpq_mat([[1, 2, 0], [0, 1, 2]]), flint.fmpq_mat([[1, -1]])],
                            [[q(0), q(0)], [q(1)]], [np.array([[0, 1, -1], [-1, 0, 1]]), np.array([[2, 3]])],
                            [np.array([-1, -1]), np.array([4])], [[q(0), q(0)]], [np.array([-1, -1])], 5,
                            ("convolution",))
    X = [[q(v) for v in row] for row in [[0, 0, 1], [1, 2, 3], [2, -3, 1], [-1, 3, 2], [3, 1, -2], [1, -2, 2]]]
    facts = ConstrainedFacts.from_network(cn, X)
    assert facts.ties == [(0, 1, 0)] and persistent_ties(facts) == {(0, 1, 0)}
    o = Oracle.of(cn, X)
    assert Oracle.rank(o.gamma([[[True, True]] + [[z >= 0 for z in Z[0]] for Z in o.pre_activations()[1:]]])) == \
        Oracle.rank(o.gamma([[[False, True]] + [[z >= 0 for z in Z[0]] for Z in o.pre_activations()[1:]]]))
    report = genuine(cn, X, ("convolution",))
    report = {k: v for k, v in report.items() if not k.startswith("_")}
    fr = report["certificate"]["free_rank"]
    one = copy.deepcopy(report)  # the engine lists the active side only
    one["certificate"]["free_rank"] = dict(fr, resolutions=fr["resolutions"][:1], persistent=[0])
    one["patterns"] = report["patterns"][:1]
    valid, msgs = verify_constrained(cn, X, one)
    assert valid, msgs
    bad = copy.deepcopy(one)
    bad["certificate"]["free_rank"]["persistent"] = [1]
    assert not verify_constrained(cn, X, bad)[0]


def _kink_net():
    # widths (2, 2, 2, 1), x = (x1, x2).  Layer 1: A = relu(x2 + 2) (theta_0 = 1 its weight, theta_1 = 2 its
    # bias), B = leaky_{1/10}(x1) (theta_2 = 1; bias fixed 0).  Layer 2: C = relu(A - 3) (theta_3 = 1,
    # theta_4 = -3), D = B, a linear carrier (fixed weight 1, slope 1).  f = 2 C + D + 1 (theta_5, 6, 7).
    # S_H: A and C keep a rescaling each; the fixed weight 1 from B to D forces s_B = s_D, one more rescaling
    # (theta_2 up, theta_6 down; B's bias is a fixed 0): dim S_H = 3, dim_free = 8 - 3 = 5.
    W = [flint.fmpq_mat([[0, 1], [1, 0]]), flint.fmpq_mat([[1, 0], [0, 1]]), flint.fmpq_mat([[2, 1]])]
    b = [[q(2), q(0)], [q(-3), q(0)], [q(1)]]
    W_index = [np.array([[-1, 0], [2, -1]]), np.array([[3, -1], [-1, -1]]), np.array([[5, 6]])]
    b_index = [np.array([1, -1]), np.array([4, -1]), np.array([7])]
    return Network((2, 2, 2, 1), W, b, W_index, b_index, [[q(0), q(1, 10)], [q(0), q(1)]],
                              [np.array([-1, -1]), np.array([-1, -1])], 8, ("leaky ReLU", "fixed weights"),
                              [f"theta_{j}" for j in range(8)])


# x2 = 0 on X: A = 2 and C = relu(-1) = 0 (dead) on every sample; B = leaky(x1) != 0, no tie.
KINK_X = [[q(v), q(0)] for v in (-2, -1, 1, 3)]


def _kink_report(part):
    return {"format": "exactident-report/1", "name": "kink", "verdict": "not-identifiable", "widths": [2, 2, 2, 1],
            "n_samples": 4, "dim": 5, "rank_gamma": None, "rank_a": None, "cn": None, "decided_by": part["kind"],
            "architecture": {"features": ["leaky ReLU", "fixed weights"], "n_params": 8, "rank_t": 8,
                             "symmetry_dim": 3, "dim_free": 5},
            "certificate": {part["kind"].replace("-", "_"): part}}


def test_layer_graph_line_parts_state_their_segment():
    # Along theta_3 += t, theta_4 -= c t the pre-activation of C on X is 2 (1 + t) - 3 - c t = -1 + (2 - c) t.
    # c = 2 (A's constant output, the constant-unit line): C never moves, t0 = null.  c = 1: C reaches its kink
    # at t = 1 and f = 2 relu(-1 + t) + ... moves past it, so the outputs on X are proved on [0, 1] only.
    # Witness x* = (1, 2): A = 4, C = relu(4 - 3) = 1, f = 2 + 1 + 1 = 4; at t = 1 with c = 2, C = relu(8 - 5) = 3,
    # f = 8; with c = 1, C = relu(8 - 4) = 4, f = 10.
    cn, X = _kink_net(), KINK_X
    line = {"kind": "constant-units", "units": [[1, 0]], "value": "2", "delta": [[3, "1"], [4, "-2"]],
            "names": ["theta_3", "theta_4"], "t0": None, "eps": "1", "x": ["1", "2"], "f_0": ["4"], "f_eps": ["8"]}
    valid, msgs = verify_constrained(cn, X, _kink_report(line))
    assert valid, msgs
    assert any("for every t >= 0" in m for m in msgs)
    kink = dict(line, delta=[[3, "1"], [4, "-1"]], f_eps=["10"])
    for t0 in ("1", "1/2"):  # the segment up to the kink, or a part of it
        valid, msgs = verify_constrained(cn, X, _kink_report(dict(kink, t0=t0)))
        assert valid, (t0, msgs)
    for t0 in ("2", "101/100", None):  # beyond the kink at t = 1: refused, naming the unit (2, 0) that turns
        valid, msgs = verify_constrained(cn, X, _kink_report(dict(kink, t0=t0)))
        assert not valid and any("certificate.constant_units.t0: unit (2, 0) changes side" in m for m in msgs), t0
    for t0 in ("0", "-1"):
        assert not verify_constrained(cn, X, _kink_report(dict(kink, t0=t0)))[0], t0
    missing = {k: v for k, v in line.items() if k != "t0"}
    valid, msgs = verify_constrained(cn, X, _kink_report(missing))
    assert not valid and msgs == ["certificate.constant_units.t0: missing"]
    # the dead unit C: lowering theta_4 (its bias) keeps it dead on X for every t; at x* = (1, 2), eps = 1/2:
    # C = relu(4 - 7/2) = 1/2, f = 1 + 1 + 1 = 3
    dead = {"kind": "dead-units", "parameter": 4, "name": "theta_4", "units": [[2, 0]], "direction": "-1",
            "t0": None, "eps": "1/2", "x": ["1", "2"], "f_0": ["4"], "f_eps": ["3"]}
    valid, msgs = verify_constrained(cn, X, _kink_report(dead))
    assert valid, msgs
    dead_missing = {k: v for k, v in dead.items() if k != "t0"}
    assert verify_constrained(cn, X, _kink_report(dead_missing))[1] == ["certificate.dead_units.t0: missing"]


def test_layer_graph_engine_states_t0_and_it_verifies():
    # the engine on the same leaky graph: C is dead on X (and A constant), so its certificate's line keeps every
    # pre-activation on X fixed: t0 = null (derivation above), and the verifier accepts it
    from exactident.check import check_constrained

    cn, X = _kink_net(), KINK_X
    r = check_constrained(cn, X)
    assert r.verdict == "not-identifiable" and r.decided_by in ("dead-units", "constant-units")
    part = r.certificate[r.decided_by.replace("-", "_")]
    assert part["t0"] is None
    report = json.loads(json.dumps(r.to_dict()))
    valid, msgs = verify_constrained(cn, X, report)
    assert valid, msgs
    report["certificate"][r.decided_by.replace("-", "_")]["t0"] = "1"  # a finite t0 is also proved (a sub-segment)
    assert verify_constrained(cn, X, report)[0]
