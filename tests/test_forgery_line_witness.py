"""Forged witnesses of the dead-unit and constant-unit certificates of a layer graph are INVALID.

The network (hand-made, 1 input): ``f(x) = v2 relu(w2 h1 + b2) + v1 h1 + d`` with ``h1 = relu(w1 x + b1)``,
at ``theta = (w1, b1, w2, b2, v2, v1, d) = (1, 0, -1, -1, 2, 3, 0)``, sample ``X = {1, 2, -1}``.

Truth (hand derivation, checked below with an independent ``Fraction`` forward pass): ``h1 >= 0``, so for every
``theta'`` near ``theta`` (``w2' < 0``, ``b2' < 0``) the second unit is negative at *every* input and
``f_theta' = v1' relu(w1' x + b1') + d'``.  On ``X`` (``x = 1, 2`` active, ``x = -1`` inactive, no tie) the
outputs fix ``d'``, ``v1' w1'`` and ``v1' b1'``, hence the function: every nearby ``theta'`` with the outputs of
``theta`` on ``X`` computes ``f_theta``.  So ``theta`` is locally identifiable up to every symmetry that keeps the
function, and a verified ``not-identifiable`` would be a wrong answer.  (The rank of ``Gamma_free`` is below
``dim_free``: the dead unit's parameters are a symmetry ``S_H`` does not list, so the engine says
``inconclusive``.)

Two forgeries the verifier once accepted (it checked only ``f_0 != f_eps`` and ``delta`` outside ``S_H``):

- ``dead_units`` on ``b2`` (the line ``b2 -= t`` keeps ``f`` everywhere) with ``eps = -2``: at ``b2 = 1`` the unit
  is active at ``x = 0`` and ``f`` differs, but that point is on the other side of ``theta``;
- ``constant_units`` with ``delta = +e_b2``, ``t0 = 1`` (the outputs on X are constant on ``[0, 1]``: at
  ``x = -1``, ``z2 = -1 + t``), ``eps = 2``, ``x = -1``: ``f`` changes at ``t = 2`` but not for ``t <= 1``
  (the unit stays negative everywhere while ``b2 + t <= 0``).
"""

from __future__ import annotations

import copy
import json
from fractions import Fraction as F

import pytest

from exactident.check import check
from exactident.io.case import parse_case
from exactident.verify.certificate import verify_certificate

THETA = dict(w1=F(1), b1=F(0), w2=F(-1), b2=F(-1), v2=F(2), v1=F(3), d=F(0))
X = [F(1), F(2), F(-1)]


def _f(x, w1, b1, w2, b2, v2, v1, d):
    """The independent oracle (no project code)."""
    h1 = max(w1 * x + b1, F(0))
    return v2 * max(w2 * h1 + b2, F(0)) + v1 * h1 + d


def _case():
    t = {k: str(v) for k, v in THETA.items()}
    return parse_case({
        "format": "exactident-case/2", "name": "dead-everywhere", "input_shape": [1],
        "layers": [{"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [[t["w1"]]], "bias": [t["b1"]]},
                   {"name": "a1", "op": "relu", "inputs": ["fc1"]},
                   {"name": "fc2", "op": "linear", "inputs": ["a1"], "weight": [[t["w2"]]], "bias": [t["b2"]]},
                   {"name": "a2", "op": "relu", "inputs": ["fc2"]},
                   {"name": "fc3", "op": "linear", "inputs": ["a2"], "weight": [[t["v2"]]], "bias": None},
                   {"name": "skip", "op": "linear", "inputs": ["a1"], "weight": [[t["v1"]]], "bias": [t["d"]]},
                   {"name": "sum", "op": "add", "inputs": ["fc3", "skip"]}],
        "output": "sum", "sample": [[str(x)] for x in X]})


@pytest.fixture(scope="module")
def engine():
    case = _case()
    return case, check(case, numeric=False).to_dict()


def _valid(case, report) -> bool:
    ok, _msgs = verify_certificate(case, json.loads(json.dumps(report)), require_claims=True)
    return ok


def _forged(report, key, part):
    bad = copy.deepcopy(report)
    rule = key.replace("_", "-")
    bad["verdict"], bad["decided_by"] = "not-identifiable", rule
    bad["rules"] = [dict(e, status="decided") if e["rule"] == rule else e for e in bad["rules"]]
    bad["certificate"][key] = part
    return bad


def test_the_engine_does_not_call_it_not_identifiable(engine):
    case, report = engine
    assert report["verdict"] != "not-identifiable"
    assert _valid(case, report)
    # the hand derivation: moving b2 (down, or up to 0) or v2 changes nothing anywhere
    for x in [F(k, 4) for k in range(-40, 41)]:
        for change in ({"b2": F(-5)}, {"b2": F(0)}, {"v2": F(7)}, {"w2": F(-1, 3)}):
            assert _f(x, **{**THETA, **change}) == _f(x, **THETA)


def test_dead_units_witness_with_negative_eps_is_invalid(engine):
    case, report = engine
    cn = case.compiled
    j = [cn.param_name(k) for k in range(cn.n_params)].index("fc2.bias[0]")
    # the oracle: at b2 = -1 - (-2)(-1) = 1 the function differs at x = 0 (the values the forger writes)
    f0, f1 = _f(F(0), **THETA), _f(F(0), **{**THETA, "b2": F(1)})
    assert (f0, f1) == (0, 2)
    part = {"kind": "dead-units", "parameter": j, "name": "fc2.bias[0]", "units": [[2, 0]], "direction": "-1",
            "t0": None, "eps": "-2", "x": ["0"], "f_0": [str(f0)], "f_eps": [str(f1)]}
    assert not _valid(case, _forged(report, "dead_units", part))


def test_constant_units_witness_past_the_change_is_invalid(engine):
    case, report = engine
    cn = case.compiled
    j = [cn.param_name(k) for k in range(cn.n_params)].index("fc2.bias[0]")
    # the oracle: along b2 + t the outputs on X hold on [0, 1]; f changes at t = 2, x = -1, and nowhere for t <= 1
    for t in (F(1, 3), F(1)):
        assert [_f(x, **{**THETA, "b2": THETA["b2"] + t}) for x in X] == [_f(x, **THETA) for x in X]
        assert all(_f(F(k, 4), **{**THETA, "b2": THETA["b2"] + t}) == _f(F(k, 4), **THETA) for k in range(-40, 41))
    f0, f1 = _f(F(-1), **THETA), _f(F(-1), **{**THETA, "b2": F(1)})
    assert f0 != f1
    part = {"kind": "constant-units", "units": [[2, 0]], "value": "0", "delta": [[j, "1"]], "names": ["fc2.bias[0]"],
            "t0": "1", "eps": "2", "x": ["-1"], "f_0": [str(f0)], "f_eps": [str(f1)]}
    assert not _valid(case, _forged(report, "constant_units", part))
