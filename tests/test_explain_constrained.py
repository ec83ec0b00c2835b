"""``explain`` on constrained networks: per free parameter, per unit, per channel (hand derivations, the plain
engine, the sympy oracle) and the command line on format-2 cases."""

from __future__ import annotations

import json
import random
from pathlib import Path

import flint
import pytest
import sympy as sp
from constrained_oracle import Q, oracle_forward, oracle_rank, random_constrained, random_sample

from exactident.check import check_constrained
from exactident.cli import main
from exactident.explain.core import Explanation, explain, explain_constrained
from exactident.io.case import parse_case
from exactident.model.gamma_free import free_state
from exactident.model.symmetry import rescaling_symmetry

F = flint.fmpq
ROOT = Path(__file__).resolve().parent.parent


def _case(layers, output, sample, input_shape):
    return parse_case({"format": "exactident-case/2", "name": "hand", "input_shape": input_shape,
                       "layers": layers, "output": output, "sample": sample})


def _mlp(act, *, out_bias):
    """``fc2(act(fc1 x))`` with ``fc1 = x - 5``, ``fc2 = 2 h (+ 0)``, one input, one unit."""
    act_layer = {"name": "act", "op": act, "inputs": ["fc1"]}
    if act == "leaky_relu":
        act_layer["negative_slope"] = "1/10"
    return [{"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [["1"]], "bias": ["-5"]}, act_layer,
            {"name": "fc2", "op": "linear", "inputs": ["act"], "weight": [["2"]], "bias": ["0"] if out_bias else None}]


def _classes(ex):
    return {e["name"]: e["class"] for e in ex.parameters}


def test_leaky_unit_inactive_everywhere_is_not_dead_and_its_weights_are_identifiable():
    """``2 leaky(w x + b)`` (slope 1/10, w = 1, b = -5, no output bias) at x = 0, 1: z = -5, -4, both on the slope
    side.  By hand: f = v a (w x + b), Gamma_free rows (v a x, v a, a (w x + b)) = (0, 1/5, -1/2), (1/5, 1/5, -2/5),
    rank 2; S_H is spanned by (w, b, -v) = (1, -5, -2) (it kills both rows), dim_free = 3 - 1 = 2 = rank: w and b
    are identifiable, v (the only output weight) is the gauge.  The unit is not dead, and its rows [x, 1] over both
    samples have rank 2."""
    report, ex = explain(_case(_mlp("leaky_relu", out_bias=False), "fc2", [["0"], ["1"]], [1]))
    assert (report.verdict, report.rank_gamma, report.dim) == ("identifiable", 2, 2)
    assert _classes(ex) == {"fc1.weight[0,0]": "identifiable", "fc1.bias[0]": "identifiable",
                            "fc2.weight[0,0]": "gauge"}
    (u,) = ex.units
    assert (u["name"], u["kind"], u["n_active"], u["n_tie"], u["n_slope_side"]) == ("fc1[0]", "leaky", 0, 0, 2)
    assert (u["dead"], u["silent"], u["local_rank"], u["local_full"], u["pinned"]) == (False, False, 2, 2, True)


def test_the_same_relu_unit_is_dead():
    """The ReLU twin: h = 0 at both samples, Gamma_free = 0 (rank 0, dim_free 2).  The chart (v held) has kernel
    span(e_w, e_b): b is the dead unit's bias, lowered by the dead-unit certificate (not-identifiable); w is moved
    by the kernel along a one-layer straight line (undetermined, line)."""
    report, ex = explain(_case(_mlp("relu", out_bias=False), "fc2", [["0"], ["1"]], [1]))
    assert (report.verdict, report.rank_gamma, report.dim, report.decided_by) == ("not-identifiable", 0, 2,
                                                                                  "dead-units")
    assert _classes(ex) == {"fc1.weight[0,0]": "undetermined", "fc1.bias[0]": "not-identifiable",
                            "fc2.weight[0,0]": "gauge"}
    assert ex.parameters[0]["line"] is True and ex.parameters[1]["by"] == "dead-units"
    (u,) = ex.units
    assert (u["kind"], u["dead"], u["silent"], u["local_rank"], u["local_full"]) == ("relu", True, True, 0, 2)
    (blk,) = ex.blocks
    assert sorted(blk.basis) == [[0, 1, 0], [1, 0, 0]]


def test_leaky_incoming_weight_determined_bias_trades_with_the_output_bias():
    """With an output bias c: f = v a (w x + b) + c at x = 0, 1, 2 (all on the slope side).  By hand the rows
    (v a x, v a, a (w x + b), 1) = (0, 1/5, -1/2, 1), (1/5, 1/5, -2/5, 1), (2/5, 1/5, -3/10, 1) have rank 2, and
    dim_free = 4 - 1 = 3.  In the chart (v held): v a x dw + v a db + dc = 0 for x = 0, 1, 2 gives dw = 0 and
    dc = -db / 5: the kernel is spanned by (0, 5, 0, -1).  w is determined to first order; b and c are not."""
    report, ex = explain(_case(_mlp("leaky_relu", out_bias=True), "fc2", [["0"], ["1"], ["2"]], [1]))
    assert (report.rank_gamma, report.dim) == (2, 3) and report.verdict != "identifiable"
    cls = _classes(ex)
    assert cls["fc1.weight[0,0]"] == "first-order-determined" and cls["fc2.weight[0,0]"] == "gauge"
    assert cls["fc1.bias[0]"] in ("undetermined", "not-identifiable")
    assert cls["fc2.bias[0]"] in ("undetermined", "not-identifiable")
    (blk,) = ex.blocks
    assert blk.basis == [[0, 5, 0, -1]] and blk.lines == [False]  # two layers: no one-layer line
    assert ex.fields()["kernel_basis"][0]["directions"] == [{"delta": {"fc1.bias[0]": "5", "fc2.bias[0]": "-1"}}]


CONV = [{"name": "conv1", "op": "conv1d", "inputs": ["input"], "out_channels": 2, "kernel_size": [1], "stride": [1],
         "padding": [0], "weight": [[["1"]], [["1"]]], "bias": ["-1", "-10"]},
        {"name": "relu1", "op": "relu", "inputs": ["conv1"]},
        {"name": "pool1", "op": "avgpool1d", "inputs": ["relu1"], "kernel_size": [2], "stride": [2], "padding": [0]},
        {"name": "flat", "op": "flatten", "inputs": ["pool1"]}]


def test_conv_channel_tied_weight_determined_though_no_position_alone_is():
    """Two channels of a 1x1 convolution on two pixels, averaged: f_c = (relu(w_c x_0 + b_c) + relu(w_c x_1 + b_c))/2,
    w = (1, 1), b = (-1, -10), samples A = (2, 0), B = (0, 3).

    Channel 0: z = (1, -1) at A, (-1, 2) at B; position 0 is active at A only (row [x_0, 1] = [2, 1]), position 1 at
    B only ([3, 1]): each has local rank 1 < 2, the channel's stacked rows [[2, 1], [3, 1]] rank 2.  Gamma_free rows of
    f_0 are (1, 1/2) at A and (3/2, 1/2) at B in (w_0, b_0): rank 2; channel 1 is dead (z <= -7), its columns are 0.
    The pooling weights 1/2 are fixed and nonzero, so no rescaling survives: dim S_H = 0, dim_free = 4 > rank 2.
    Kernel = span(e_{w_1}, e_{b_1}): w_0 and b_0 are determined to first order; b_1 (the dead channel's bias) is
    lowered by the dead-unit certificate; w_1 is undetermined, on a one-layer line."""
    report, ex = explain(_case(CONV, "flat", [["2", "0"], ["0", "3"]], [1, 2]))
    assert (report.rank_gamma, report.dim, report.verdict) == (2, 4, "not-identifiable")
    assert ex.gauge == []
    assert _classes(ex) == {"conv1.weight[0,0,0]": "first-order-determined", "conv1.weight[1,0,0]": "undetermined",
                            "conv1.bias[0]": "first-order-determined", "conv1.bias[1]": "not-identifiable"}
    units = {u["name"]: u for u in ex.units}
    for name, row in (("conv1[c=0,x=0]", (1, 0, 1)), ("conv1[c=0,x=1]", (1, 0, 1))):
        u = units[name]
        assert (u["n_active"], u["n_tie"], u["n_slope_side"]) == row
        assert (u["local_rank"], u["local_full"], u["pinned"], u["dead"]) == (1, 2, False, False)
    assert all(units[f"conv1[c=1,x={x}]"]["dead"] for x in (0, 1))
    ch = {c["name"]: c for c in ex.channels}
    assert set(ch) == {"conv1[c=0]", "conv1[c=1]"}  # the pooling channels have nothing of their own
    c0, c1 = ch["conv1[c=0]"], ch["conv1[c=1]"]
    assert (c0["n_units"], c0["n_active"], c0["n_slope_side"], c0["n_dead"]) == (2, 2, 2, 0)
    assert (c0["local_rank"], c0["local_full"], c0["best_position_rank"], c0["pinned"]) == (2, 2, 1, True)
    assert c0["parameters"] == ["conv1.weight[0,0,0]", "conv1.bias[0]"]
    assert c0["classes"] == {"first-order-determined": 2}
    assert (c1["all_dead"], c1["n_dead"], c1["local_rank"]) == (True, 2, 0)
    assert c1["classes"] == {"undetermined": 1, "not-identifiable": 1}


@pytest.mark.parametrize("seed", range(6))
def test_plain_mlp_through_the_constrained_route_matches_plain_explain(seed):
    """The plain MLP in the constrained engine: the gauge is the plain engine's fixed edges, the
    first-order-determined parameters and the parameters the kernel moves are the same (off the boundary,
    theta not degenerate)."""
    rng = random.Random(seed)
    widths = [rng.randint(1, 2), rng.randint(1, 3), rng.randint(1, 2)]
    weights = [[[str(rng.choice([-3, -2, -1, 1, 2, 3])) for _ in range(widths[l - 1])] for _ in range(widths[l])]
               for l in (1, 2)]
    biases = [[str(rng.choice([-1, 1, 2])) for _ in range(widths[l])] for l in (1, 2)]
    sample = [[str(F(rng.randint(-6, 6), rng.randint(1, 3))) for _ in range(widths[0])]
              for _ in range(rng.randint(1, 4))]
    case = parse_case({"format": "exactident-case/1", "name": "p", "widths": widths, "weights": weights,
                       "biases": biases, "sample": sample})
    report, plain = explain(case)
    assert isinstance(plain, Explanation)
    if report.degenerate or report.on_boundary:
        pytest.skip("degenerate or on the boundary")
    cn = case.network
    mine = explain_constrained(cn, case.X, check_constrained(cn, case.X, structural=False))
    pc = {e["name"]: e["class"] for e in plain.parameters}
    mc = _classes(mine)
    assert {n for n, c in pc.items() if c == "fixed"} == {n for n, c in mc.items() if c == "gauge"}
    if report.verdict == "identifiable":
        assert {c for n, c in mc.items() if c != "gauge"} <= {"identifiable"}
        return
    assert {n for n, c in pc.items() if c == "first-order-determined"} == \
        {n for n, c in mc.items() if c == "first-order-determined"}
    assert {n for n, c in pc.items() if c not in ("fixed", "first-order-determined")} == \
        {n for n, c in mc.items() if c not in ("gauge", "first-order-determined")}


def _oracle_jacobian(cn, X, active):
    sym = sp.symbols(f"t0:{cn.n_params}")
    values = [Q(v) for v in cn.theta()]
    subs = dict(zip(sym, values))
    rows = []
    for i, x in enumerate(X):
        res = {(l, v): a for (s, l, v), a in active.items() if s == i}
        out, _ = oracle_forward(cn, x, sym, values, res)
        rows += [[sp.diff(e, t).subs(subs) for t in sym] for e in out]
    return sp.Matrix(rows) if rows else sp.zeros(0, cn.n_params)


@pytest.mark.parametrize("seed", range(10))
def test_kernel_blocks_against_the_sympy_oracle(seed):
    """Every block: its rank is the oracle's rank of d f(X) / d theta at that tie resolution, its directions are
    zero on the gauge, in the oracle's kernel and independent, dim_free - rank of them, and they move the parameters
    the oracle's own kernel in the chart moves; the gauge meets S_H in 0; the classes follow (no certificate asked)."""
    cn = random_constrained(seed)
    X = random_sample(seed, random.Random(seed).randint(1, 4), cn.widths[0])
    report = check_constrained(cn, X, structural=False)
    ex = explain_constrained(cn, X, report)
    sym = rescaling_symmetry(cn)
    assert len(ex.gauge) == sym.symmetry_dim
    if sym.basis:
        B = sp.Matrix([[Q(col.get(j, 0)) for col in sym.basis] for j in ex.gauge])
        assert B.rank() == sym.symmetry_dim
    if report.verdict == "identifiable":
        assert not ex.blocks
        return
    ties = free_state(cn, X).ties
    for blk in ex.blocks:
        active = dict(zip(ties, blk.active)) if blk.active is not None else {}
        J = _oracle_jacobian(cn, X, active)
        assert blk.rank == oracle_rank(cn, X, active)
        assert len(blk.basis) == sym.dim_free - blk.rank
        for vec in blk.basis:
            assert all(vec[j] == 0 for j in ex.gauge)
            assert J * sp.Matrix(vec) == sp.zeros(J.rows, 1)
        if blk.basis:
            assert sp.Matrix(blk.basis).rank() == len(blk.basis)
        cols = [j for j in range(cn.n_params) if j not in ex.gauge]  # the oracle's own kernel in the chart
        null = J[:, cols].nullspace() if J.rows else [sp.eye(len(cols))[:, c] for c in range(len(cols))]
        assert len(null) == len(blk.basis)
        assert {cols[c] for v in null for c in range(len(cols)) if v[c] != 0} == \
            {j for vec in blk.basis for j, x in enumerate(vec) if x}
    moved = {j for blk in ex.blocks for vec in blk.basis for j, x in enumerate(vec) if x}
    for j, e in enumerate(ex.parameters):
        assert e["class"] == ("gauge" if j in ex.gauge else "undetermined" if j in moved else "first-order-determined")
    assert len(ex.parameters) == cn.n_params


def test_cli_explain_on_a_format2_case(capsys, tmp_path):
    """``explain`` text and ``--json`` on a format-2 case; verify-certificate re-checks the explain fields."""
    path = tmp_path / "conv.json"
    path.write_text(json.dumps({"format": "exactident-case/2", "name": "conv", "input_shape": [1, 2],
                                "layers": CONV, "output": "flat", "sample": [["2", "0"], ["0", "3"]]}))
    assert main(["explain", str(path)]) == 0
    out = capsys.readouterr().out
    assert "conv1[c=0,x=1] [relu]: 1 / 0 / 1 of 2; local rank 1 of 2; not pinned alone" in out
    assert "channel conv1[c=0]: 2 positions, 0 dead; local rank 2 of 2" in out
    assert main(["explain", "--json", str(path)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {"parameters", "units", "channels", "kernel_basis", "explanation"} <= set(report)
    rpath = tmp_path / "r.json"
    rpath.write_text(json.dumps(report))
    assert main(["verify-certificate", str(path), str(rpath)]) == 0
    out = capsys.readouterr().out
    assert "explain fields valid: parameters, units, channels, kernel_basis" in out
    assert "not verified: explanation (prose)" in out


@pytest.mark.parametrize("name", ["conv1d-avgpool", "leaky-mlp", "prelu-mlp", "residual-mlp"])
def test_shipped_hand_cases_explained(name):
    """Every free parameter gets one class under its framework name; the certificate's parameters are
    not-identifiable; each PReLU unit names its slope parameter."""
    from exactident.io.case import load_case

    case = load_case(ROOT / "cases" / "architectures" / f"{name}.json")
    report, ex = explain(case)
    assert [e["name"] for e in ex.parameters] == case.compiled.param_names
    assert len(ex.units) == sum(case.compiled.widths[1:-1])
    assert ex.count("gauge") == report.extra["architecture"]["symmetry_dim"]
    if name == "prelu-mlp":
        assert [u["slope_parameter"] for u in ex.units] == ["act1.weight[0]", "act1.weight[1]", "act1.weight[2]"]


def _explained_report(layers, output, sample, input_shape):
    case = _case(layers, output, sample, input_shape)
    report, ex = explain(case)
    report.extra.update(ex.fields())
    return case, json.loads(json.dumps(report.to_dict()))


def _tamper_cases():
    def cls(name, new, extra=None):
        def f(r):
            e = next(e for e in r["parameters"] if e["name"] == name)
            for k in ("by", "witness", "line", "why"):
                e.pop(k, None)
            e.update({"class": new, **(extra or {})})
        return f

    def unit(key, value):
        def f(r):
            r["units"][0][key] = value
        return f

    def direction(r):
        r["kernel_basis"][0]["directions"][0]["delta"]["conv1.weight[0,0,0]"] = "1"

    def rank(r):
        r["kernel_basis"][0]["rank_gamma"] = 1

    def drop(r):
        r["kernel_basis"][0]["directions"].pop()

    def channel(r):
        r["channels"][0]["local_rank"] = 1

    def classes(r):
        r["channels"][1]["classes"] = {"undetermined": 2}

    return [
        ("determined-claimed-undetermined", cls("conv1.bias[0]", "undetermined", {"witness": [0, 0]}), "parameters[2]"),
        ("moved-claimed-determined", cls("conv1.weight[1,0,0]", "first-order-determined"), "parameters[1]"),
        ("determined-claimed-not-identifiable", cls("conv1.weight[0,0,0]", "not-identifiable",
                                                    {"by": "dead-units", "witness": "certificate"}), "parameters[0]"),
        ("false-gauge", cls("conv1.weight[0,0,0]", "gauge"), "gauge"),
        ("active-count", unit("n_active", 2), "units[0].n_active"),
        ("dead-flag", unit("dead", True), "units[0].dead"),
        ("local-rank", unit("local_rank", 2), "units[0].local_rank"),
        ("not-a-kernel-vector", direction, "not a kernel vector"),
        ("block-rank", rank, "rank_gamma"),
        ("incomplete-block", drop, "rank_gamma"),
        ("channel-rank", channel, "channels[0]"),
        ("channel-classes", classes, "channels[1]"),
    ]


@pytest.mark.parametrize(("what", "tamper", "field"), _tamper_cases(), ids=[t[0] for t in _tamper_cases()])
def test_verifier_catches_tampered_explain_fields(what, tamper, field):
    """The conv case of the hand test above: the genuine explain fields verify; each tampered claim is refused,
    the failure naming the field."""
    from exactident.verify.certificate import verify_certificate

    case, report = _explained_report(CONV, "flat", [["2", "0"], ["0", "3"]], [1, 2])
    ok, msgs = verify_certificate(case, report, require_claims=True)
    assert ok, msgs
    bad = json.loads(json.dumps(report))
    tamper(bad)
    ok, msgs = verify_certificate(case, bad, require_claims=True)
    assert not ok
    assert any(field in m for m in msgs), msgs


def test_verifier_checks_a_gauge_and_an_identifiable_explanation():
    """The leaky case: identifiable classes need the verdict; the gauge must be the output weight (the only
    parameter the rescaling moves with a nonzero row); a bias claimed as gauge is refused."""
    from exactident.verify.certificate import verify_certificate

    case, report = _explained_report(_mlp("leaky_relu", out_bias=False), "fc2", [["0"], ["1"]], [1])
    assert verify_certificate(case, report, require_claims=True)[0]
    bad = json.loads(json.dumps(report))
    bad["parameters"][1]["class"], bad["parameters"][2]["class"] = "gauge", "identifiable"
    ok, msgs = verify_certificate(case, bad, require_claims=True)
    assert ok  # any parameter set whose rows of S_H are independent is a valid gauge: (1, -5, -2) has b = -5
    bad["parameters"][1]["class"] = "identifiable"
    ok, msgs = verify_certificate(case, bad, require_claims=True)
    assert not ok and any("gauge" in m for m in msgs)


def test_verifier_refuses_a_false_line():
    """prelu-mlp (shipped hand case): its first kernel direction moves weights, slopes and biases of both layers and
    the outputs on X move along it at second order; claiming it a straight line is refused (the verifier's own
    polynomial forward pass in t)."""
    from exactident.io.case import load_case
    from exactident.verify.certificate import verify_certificate

    case = load_case(ROOT / "cases" / "architectures" / "prelu-mlp.json")
    report, ex = explain(case)
    report.extra.update(ex.fields())
    good = json.loads(json.dumps(report.to_dict()))
    assert verify_certificate(case, good, require_claims=True)[0]
    d0 = good["kernel_basis"][0]["directions"][0]
    assert "line" not in d0 and len({k.split(".")[0] for k in d0["delta"]}) > 1
    d0["line"] = True
    ok, msgs = verify_certificate(case, good, require_claims=True)
    assert not ok and any("kernel_basis[0].directions[0].line" in m for m in msgs)


def test_notebook_view_of_a_constrained_explanation():
    """``exactident.explain`` on a format-2 file: the report carries the fields, the HTML names every parameter."""
    import exactident

    ex = exactident.explain(ROOT / "cases" / "architectures" / "leaky-mlp.json", progress=False)
    assert {"parameters", "units", "channels", "kernel_basis"} <= set(ex.report.extra)
    html = ex._repr_html_()
    assert all(e["name"] in html for e in ex.parameters) and "gauge" in html


def test_constant_unit_certificate_is_taken_into_the_chart(monkeypatch):
    """fc1 = [[0, 1], [1, 1]] x + (1, -1/2), leaky slope 1/10, fc2 = 2 h_0 + 3 h_1, samples (x_0, 0): unit 0 has
    z = x_1 + 1 = 1 at every sample (a constant unit), and the constant-unit certificate moves v_0 = fc2.weight[0,0]
    by +1 and c = fc2.bias[0] by -1.  v_0 is unit 0's gauge (the output layer first), so the direction is taken into
    the chart by hand: unit 0's rescaling moves (w_00, w_01, b_0, v_0) by (0, 1, 1, -2) s (w_00 = 0); sigma with
    sigma_{v_0} = 1 is (0, -1/2, -1/2, 1), and delta - sigma moves w_01 and b_0 by +1/2 and c by -1, v_0 not at all.
    So fc1.weight[0,1], fc1.bias[0] and fc2.bias[0] are not-identifiable (constant-units); fc1.weight[0,0] (value 0,
    its column v_0 x_0) is not moved by it."""
    import dataclasses

    import exactident.boundary.dead_units as dead_units
    from exactident.verify.certificate import verify_certificate

    # x_1 = 0 on every sample also makes x_1 a blank input, whose dead-units line (fc1.weight[., 1]) the engine would
    # try first; this test is about the constant-unit certificate, so blank inputs are not offered here
    silent = dead_units._silent
    monkeypatch.setattr(dead_units, "_silent", lambda cn, st: silent(cn, dataclasses.replace(st, zero_inputs=None)))
    layers = [{"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [["0", "1"], ["1", "1"]],
               "bias": ["1", "-1/2"]},
              {"name": "r", "op": "leaky_relu", "negative_slope": "1/10", "inputs": ["fc1"]},
              {"name": "fc2", "op": "linear", "inputs": ["r"], "weight": [["2", "3"]], "bias": ["0"]}]
    case, report = _explained_report(layers, "fc2", [["-2", "0"], ["-1", "0"], ["1", "0"], ["2", "0"], ["3", "0"]],
                                     [2])
    assert (report["verdict"], report["decided_by"]) == ("not-identifiable", "constant-units")
    cls = {e["name"]: (e["class"], e.get("by")) for e in report["parameters"]}
    assert cls["fc2.weight[0,0]"] == ("gauge", None) and cls["fc2.weight[0,1]"] == ("gauge", None)
    for name in ("fc1.weight[0,1]", "fc1.bias[0]", "fc2.bias[0]"):
        assert cls[name] == ("not-identifiable", "constant-units")
    assert cls["fc1.weight[0,0]"][0] != "not-identifiable"
    assert report["units"][0]["constant"] and not report["units"][0]["dead"]
    assert verify_certificate(case, report, require_claims=True)[0]


def test_past_the_kernel_cap_classes_are_unknown_and_say_why(monkeypatch):
    """With the exact kernel out of budget, every parameter outside the gauge is unknown (no kernel claimed), the
    reason names the size, and the report still verifies."""
    import exactident.explain.core as mod
    from exactident.verify.certificate import verify_certificate

    monkeypatch.setattr(mod, "MAX_CONSTRAINED_KERNEL_ENTRIES", 3)
    case, report = _explained_report(_mlp("leaky_relu", out_bias=True), "fc2", [["0"], ["1"], ["2"]], [1])
    assert report["kernel_basis"] == []
    cls = {e["name"]: e for e in report["parameters"]}
    assert cls["fc2.weight[0,0]"]["class"] == "gauge"
    for name in ("fc1.weight[0,0]", "fc1.bias[0]", "fc2.bias[0]"):
        assert cls[name]["class"] in ("unknown", "not-identifiable")
    assert any("entries, more than 3" in e.get("why", "") for e in report["parameters"])
    assert verify_certificate(case, report, require_claims=True)[0]


def test_header_shows_an_uncertified_rank_as_its_interval():
    # Regression: `exactident explain` on a layer graph printed "rank Gamma_free = 57" in its header
    # while the report's rank was only a Monte Carlo value in the certified interval [57, 73] (the
    # reason line under it said so).  Whenever the report carries rank_gamma_interval, the header
    # shows the interval and labels the Monte Carlo value.
    from exactident.explain.render import render_constrained

    report, ex = explain(ROOT / "cases" / "architectures" / "leaky-mlp.json")
    assert "rank Gamma_free = 9," in render_constrained(report, ex).splitlines()[0]  # 9 rows: full row rank
    report.rank_gamma, report.rank_gamma_interval = None, (9, 10)
    report.montecarlo = {"rank_gamma": 9, "error_probability": 0.0}
    head = render_constrained(report, ex).splitlines()[0]
    assert "rank Gamma_free certified in [9, 10], Monte Carlo value 9, dim_free = 10" in head
    assert "rank Gamma_free =" not in head
