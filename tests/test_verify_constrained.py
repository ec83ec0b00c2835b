"""verify-certificate for constrained networks (exactident.verify.constrained): facts against the sympy
oracle, genuine reports accepted, every mutated field rejected, hand-derived cases.

Genuine reports are built here from the oracle's values (tests/xverify_oracle.py: sympy
Jacobian, sympy rescaling constraints), never from exactident's own output.
"""

from __future__ import annotations

import copy
import itertools

import flint
import numpy as np
import pytest
import sympy as sp
from xverify_oracle import Oracle, conv1d_net, random_constrained, residual_net

from exactident.model.constrained import ConstrainedNetwork
from exactident.verify.constrained import verify_constrained
from exactident.verify.constrained_facts import ConstrainedFacts, rank_mod_p, verifier_primes

q = flint.fmpq


def _ties(cn, X):
    """(sample, layer, unit) with z = 0 at a kinked unit, from the oracle's pre-activations."""
    Z = Oracle.of(cn, X).pre_activations()
    return [(i, l, v) for i in range(len(X)) for l in range(1, cn.L) for v in range(cn.widths[l])
            if Z[i][l - 1][v] == 0 and (cn.slope_index[l - 1][v] >= 0 or cn.negative_slope[l - 1][v] != 1)]


def _fstr(v) -> str:
    v = sp.Rational(v)
    return str(v.p) if v.q == 1 else f"{v.p}/{v.q}"


def genuine(cn, X, features=("random",)):
    """The report a correct engine writes, from the oracle: ranks, dim_free, verdict, kernel vectors."""
    o = Oracle.of(cn, X)
    ties = _ties(cn, X)
    best = None
    for sides in itertools.product((True, False), repeat=len(ties)):
        Z = o.pre_activations()
        active = [[[Z[i][l][v] >= 0 for v in range(cn.widths[l + 1])] for i in range(len(X))]
                  for l in range(cn.L - 1)]
        for (i, l, v), s in zip(ties, sides):
            active[l - 1][i][v] = s
        G = o.gamma(active)
        r = Oracle.rank(G)
        if best is None or r < best[0]:
            best = (r, G)
    r, G = best
    k, sd = cn.n_params, o.symmetry_dim()
    dim_free = k - sd
    report = {"format": "exactident-report/1", "name": "c", "widths": list(cn.widths), "n_samples": len(X),
              "dim": dim_free, "rank_gamma": r, "rank_a": None, "cs": r == dim_free, "cn": None,
              "on_boundary": bool(ties), "n_ties": len(ties),
              "architecture": {"features": list(features), "n_params": k, "rank_t": k, "symmetry_dim": sd,
                               "dim_free": dim_free}}
    if r == dim_free:
        report.update(verdict="identifiable", decided_by="theorem-9")
    else:
        report.update(verdict="inconclusive", reason=f"C_N is not proved for {', '.join(features)}")
        if r < len(X) * cn.widths[-1]:
            kernel = [[[i, _fstr(v)] for i, v in enumerate(col) if v != 0] for col in G.nullspace()]
            report["_nonzero_column"] = next(c for c in range(k) if any(G[:, c]))
            report["certificate"] = {"rank": {"rank_gamma": {"shape": [G.rows, k],
                                                             "upper": {"kind": "kernel", "kernel": kernel}}}}
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
    kernel = report.get("certificate", {}).get("rank", {}).get("rank_gamma", {}).get("upper", {}).get("kernel")
    if kernel:
        # one kernel vector fewer: the bound it proves is rank_gamma + 1
        mut("kernel column dropped", lambda r: r["certificate"]["rank"]["rank_gamma"]["upper"]["kernel"].pop())

        def bump(r):  # a vector that is not in the kernel (Gamma_free e_j != 0 for a column j of Gamma_free)
            r["certificate"]["rank"]["rank_gamma"]["upper"]["kernel"][0] = [[nonzero_column, "1"]]
        nonzero_column = report["_nonzero_column"]
        mut("kernel vector not in the kernel", bump)
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
    # f = 3 act(2 x - 10) + w3 relu(x) + 1 with act a ReLU (slope 0) or leaky; x in [0, 4]: unit 0 never active
    return ConstrainedNetwork((1, 2, 1), [flint.fmpq_mat([[2], [1]]), flint.fmpq_mat([[3, 1]])],
                              [[q(-10), q(0)], [q(1)]],
                              [np.array([[0], [-1]]), np.array([[2, 3]])], [np.array([1, -1]), np.array([-1])],
                              [[slope, q(0)]], [np.array([-1, -1])], 4, ("fixed weights",),
                              ["w1", "b1", "v0", "v1"])


def test_dead_unit_line_accepted_for_relu_and_refused_for_leaky():
    X = [[q(v)] for v in (0, 1, 2, 4)]
    cn = _dead_net(q(0))
    facts = ConstrainedFacts.from_network(cn, X)
    # S_H: unit 0 free (w1, b1, -v0 tangent), unit 1 pinned by its fixed weight 1 -> dim 1, dim_free 3
    assert facts.symmetry.dim_free == 3
    base = {"format": "exactident-report/1", "name": "d", "verdict": "not-identifiable", "widths": [1, 2, 1],
            "n_samples": 4, "dim": 3, "rank_a": None, "cn": None,
            "architecture": {"features": ["fixed weights"], "n_params": 4, "rank_t": 4, "symmetry_dim": 1,
                             "dim_free": 3},
            "certificate": {"line": {"kind": "dead-units", "units": [[1, 0]], "delta": {"v0": "1"}}}}
    valid, msgs = verify_constrained(cn, X, base)
    assert valid, msgs
    # the direction (w1, b1, -v0) = (2, -10, -3) is the rescaling of the dead unit: not a new point
    bad = copy.deepcopy(base)
    bad["certificate"]["line"]["delta"] = {"w1": "2", "b1": "-10", "v0": "-3"}
    assert not verify_constrained(cn, X, bad)[0]
    # moving v1 (the live unit's outgoing weight) changes the outputs
    bad["certificate"]["line"]["delta"] = {"v1": "1"}
    assert not verify_constrained(cn, X, bad)[0]
    # a leaky unit outputs a z != 0 below its kink: no longer dead, the line is refused
    leaky = _dead_net(q(1, 10))
    valid, msgs = verify_constrained(leaky, X, base)
    assert not valid and any("not a ReLU unit" in m for m in msgs)
    # not-identifiable without the line: refused
    none = copy.deepcopy(base)
    del none["certificate"]
    assert not verify_constrained(cn, X, none)[0]


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
