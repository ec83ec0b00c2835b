"""A report that lists no tie resolution records why (``resolutions_not_enumerated``), and the verifier holds the
record against the count it recomputes from the case (exactident.verify.resolutions, exactident.verify.verdict).

Before, ``verify-certificate`` accepted an ``inconclusive`` report listing no resolution whatever the case: one
that had dropped them could not be told from one past the engine's ``--max-resolutions``.  Now such a report
must record the cap it stopped at; the record must give the case's ``k`` (``2^k`` resolutions) with
``2^k > max_resolutions``; and within its own cap the verifier still enumerates the resolutions and refuses
``inconclusive`` where its own ranks prove ``C_S`` on every one (a recorded cap is a fact about the run,
which no verifier can recompute).

The truth is computed here, independently of the code under test: for ``f = 3 relu(2x + 1)`` on the sample
``0, 1, -1/2, -1`` (cases/tiny-111-kink-plus.json) the sample ``-1/2`` is on the kink (one tie, two
resolutions); Gamma over ``(w_1, b_1, b_2)`` (the outgoing weight 3 is the fixed edge) has the row
``(3x, 3, 1)`` for an active sample and ``(0, 0, 1)`` for an inactive one, so sympy gives rank 3 = dim on
both resolutions: ``C_S`` on every resolution, identifiable (docs/boundary.md).  The layer graph
``f = 3 leaky_{1/4}(2x + 1)`` on the same sample (free parameters ``(w, b, v, c)``, one rescaling,
``dim_free = 3``) has rows ``s (v x, v, z)`` and ``1`` with ``s = 1`` or ``1/4`` by side: rank 3 on both
resolutions, identifiable too.  The engine's own full enumeration
agrees (asserted beside).
"""

from __future__ import annotations

import copy
import json
from fractions import Fraction
from pathlib import Path

import pytest
import sympy as sp

from exactident.check import check
from exactident.cli import main
from exactident.io.case import load_case, parse_case
from exactident.io.limits import WorkLimits
from exactident.verify.certificate import run_verify_certificate, verify_certificate

CASE = Path(__file__).parent.parent / "cases" / "tiny-111-kink-plus.json"
XS = ("0", "1", "-1/2", "-1")
FIELD = "resolutions_not_enumerated"
CAP_1 = {"why": "cap", "max_resolutions": 1, "log2_resolutions": 1}  # 2^1 = 2 resolutions, past a cap of 1
ONE = WorkLimits(max_resolutions=1)  # a verifier that cannot enumerate the 2 resolutions: the record alone


def _mlp_ranks_by_hand() -> list[int]:
    """rank Gamma at each resolution (tie active, inactive), over (w_1, b_1, b_2), from the rows by hand."""
    out = []
    for side in (True, False):
        rows = []
        for x in map(Fraction, XS):
            z = 2 * x + 1
            rows.append([3 * x, 3, 1] if z > 0 or (z == 0 and side) else [0, 0, 1])
        out.append(sp.Matrix(rows).rank())
    return out


def _graph_ranks_by_hand() -> list[int]:
    """rank Gamma_free at each resolution over (w, b, v, c) at w = 2, b = 1, v = 3 for ``f = v leaky(w x + b) + c``
    (slope 1/4): d f / d(w, b, v, c) = (s v x, s v, s z, 1) with s = 1 on the active side, 1/4 on the other."""
    out = []
    for side in (True, False):
        rows = []
        for x in map(Fraction, XS):
            z = 2 * x + 1
            s = Fraction(1) if z > 0 or (z == 0 and side) else Fraction(1, 4)
            rows.append([s * 3 * x, s * 3, s * z, 1])
        out.append(sp.Matrix(rows).rank())
    return out


@pytest.fixture(scope="module")
def mlp():
    """The case, the engine's report with every resolution, and its report at --max-resolutions 1."""
    assert _mlp_ranks_by_hand() == [3, 3]  # dim = 1*1 + 1*1 + 1 = 3: identifiable
    case = load_case(CASE)
    full = check(case, numeric=False).to_dict()
    capped = check(case, numeric=False, max_resolutions=1).to_dict()
    assert full["verdict"] == "identifiable" and len(full["certificate"]["boundary"]["resolutions"]) == 2
    return case, full, capped


def _dropped(full: dict, record: dict | None = None) -> dict:
    """The forgery: the genuine identifiable report with its resolutions dropped and the verdict inconclusive."""
    bad = copy.deepcopy(full)
    del bad["certificate"]["boundary"]["resolutions"]
    del bad["certificate"]["boundary"]["fixed_edges"]
    bad.pop("patterns", None)
    bad.update(verdict="inconclusive", decided_by="none", rank_gamma=None, rank_a=None, cs=None, cn=None)
    if record is not None:
        bad[FIELD] = record
    return bad


def test_the_engine_records_the_cap_only_when_it_stopped_at_it(mlp, tmp_path, capsys):
    _case, full, capped = mlp
    assert FIELD not in full  # every resolution enumerated: the report is as before
    assert capped["verdict"] == "inconclusive" and "resolutions" not in capped["certificate"]["boundary"]
    assert capped[FIELD] == CAP_1
    assert main(["check", "--json", "--no-numeric", "--max-resolutions", "1", str(CASE)]) == 0
    assert json.loads(capsys.readouterr().out)[FIELD] == CAP_1


def test_genuine_reports_verify(mlp):
    case, full, capped = mlp
    assert verify_certificate(case, full, require_claims=True)[0]
    valid, msgs = verify_certificate(case, capped, require_claims=True, limits=ONE)
    assert valid, msgs
    assert any(m.startswith(f"{FIELD} consistent with the case: 2^1 = 2 tie resolutions") for m in msgs)


def test_a_verifier_that_can_enumerate_refuses_the_weaker_verdict(mlp):
    # the engine's own capped report: true to its limits, but the verifier enumerates the 2 resolutions within
    # its default cap and its ranks reach dim = 3 on both (the truth by hand): inconclusive says too little
    case, _full, capped = mlp
    valid, msgs = verify_certificate(case, capped, require_claims=True)
    assert not valid and msgs[-1].startswith("verdict: report says inconclusive, but the certificate proves "
                                             "identifiable") and "stopped at its cap of 1" in msgs[-1], msgs


def test_resolutions_dropped_without_a_record_are_refused(mlp, tmp_path, capsys):
    case, full, _capped = mlp
    bad = _dropped(full)
    for limits in (ONE, WorkLimits()):  # by the missing record alone, whatever the verifier's cap
        valid, msgs = verify_certificate(case, bad, require_claims=True, limits=limits)
        assert not valid and any(m.startswith(f"{FIELD}: missing: the verdict is inconclusive and the report "
                                              "lists none of the case's 2^1 = 2 tie resolutions") for m in msgs)
    rp = tmp_path / "r.json"
    rp.write_text(json.dumps(bad))
    assert run_verify_certificate(str(CASE), str(rp), work=ONE) == 3
    out = capsys.readouterr().out
    assert f"{FIELD}: missing" in out and out.rstrip().endswith("certificate INVALID")


@pytest.mark.parametrize("record, where", [
    (dict(CAP_1, log2_resolutions=0), f"{FIELD}.log2_resolutions: report says 0, the case has 2^1 = 2"),
    (dict(CAP_1, log2_resolutions=5), f"{FIELD}.log2_resolutions: report says 5, the case has 2^1 = 2"),
    (dict(CAP_1, max_resolutions=2), f"{FIELD}.max_resolutions: the case has 2^1 = 2 tie resolutions, within"),
    (dict(CAP_1, max_resolutions=4096), f"{FIELD}.max_resolutions: the case has 2^1 = 2 tie resolutions, within"),
])
def test_a_record_the_case_contradicts_is_refused(mlp, record, where):
    case, full, _capped = mlp
    valid, msgs = verify_certificate(case, _dropped(full, record), require_claims=True, limits=ONE)
    assert not valid and any(m.startswith(where) for m in msgs), msgs


def test_a_record_beside_listed_resolutions_is_refused(mlp):
    case, full, _capped = mlp
    valid, msgs = verify_certificate(case, dict(full, **{FIELD: CAP_1}), require_claims=True)
    assert not valid and f"{FIELD}: the report says its tie resolutions were not enumerated, but it lists them" in msgs


def test_a_consistent_forged_record_meets_the_verifiers_own_ranks(mlp):
    # the forgery now records a cap of 1 (consistent with the case): the default verifier enumerates the two
    # resolutions itself and refuses; a verifier capped at 1 has nothing more to check (inconclusive is the
    # weakest claim, not a false one), as with the engine's own capped report
    case, full, _capped = mlp
    bad = _dropped(full, CAP_1)
    valid, msgs = verify_certificate(case, bad, require_claims=True)
    assert not valid and "proves identifiable" in msgs[-1], msgs
    assert verify_certificate(case, bad, require_claims=True, limits=ONE)[0]


def test_dropping_some_resolutions_is_refused(mlp):
    """The mirror case: a list shorter than the case's resolutions (already refused: tests/test_verify_trust.py,
    tests/test_verify_forgeries.py::test_dropped_tie_resolution_is_invalid), with or without a record."""
    case, full, _capped = mlp
    for record in (None, CAP_1):
        bad = copy.deepcopy(full)
        bad["certificate"]["boundary"]["resolutions"].pop()
        bad["patterns"].pop()
        bad.update(verdict="inconclusive", decided_by="none", rank_gamma=None, rank_a=None, cs=None, cn=None)
        if record is not None:
            bad[FIELD] = record
        valid, msgs = verify_certificate(case, bad, require_claims=True)
        assert not valid and any("certificate.boundary.resolutions: the certificate lists 1 resolution(s), the 1 "
                                 "visible tie(s) have 2" in m for m in msgs), msgs


@pytest.mark.parametrize("value, where", [
    ({"why": "budget", "max_resolutions": 1, "log2_resolutions": 1}, f"{FIELD}.why"),
    ({"why": "cap", "max_resolutions": -1, "log2_resolutions": 1}, f"{FIELD}.max_resolutions"),
    ({"why": "cap", "max_resolutions": 1}, f"{FIELD}.log2_resolutions"),
    ({"why": "cap", "max_resolutions": 1, "log2_resolutions": True}, f"{FIELD}.log2_resolutions"),
])
def test_a_malformed_record_names_its_path(mlp, value, where):
    case, _full, capped = mlp
    valid, msgs = verify_certificate(case, dict(capped, **{FIELD: value}), require_claims=True, limits=ONE)
    assert not valid and len(msgs) == 1 and msgs[0].startswith(where), msgs


# ------------------------------------------------------------------------------------------ the layer graph

# f = 3 leaky_{1/4}(2x + 1) on the same sample: the same tie, a layer graph (the leaky unit)
LEAKY = {"format": "exactident-case/2", "name": "leaky-kink", "input_shape": [1],
         "layers": [{"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [["2"]], "bias": ["1"]},
                    {"name": "act", "op": "leaky_relu", "inputs": ["fc1"], "negative_slope": "1/4"},
                    {"name": "fc2", "op": "linear", "inputs": ["act"], "weight": [["3"]], "bias": ["0"]}],
         "output": "fc2", "sample": [[x] for x in XS]}


def test_layer_graph_records_and_verifies_the_cap():
    assert _graph_ranks_by_hand() == [3, 3]  # dim_free = 4 - 1 = 3 on both resolutions: identifiable
    case = parse_case(LEAKY)
    full = check(case, numeric=False).to_dict()
    assert full["verdict"] == "identifiable" and full["dim"] == 3 and FIELD not in full
    assert verify_certificate(case, full, require_claims=True)[0]
    capped = check(case, numeric=False, max_resolutions=1).to_dict()
    assert capped["verdict"] == "inconclusive" and capped[FIELD] == CAP_1 and not capped.get("patterns")
    valid, msgs = verify_certificate(case, capped, require_claims=True, limits=ONE)
    assert valid, msgs
    valid, msgs = verify_certificate(case, capped, require_claims=True)
    assert not valid and any("proves identifiable" in m and "stopped at its cap of 1" in m for m in msgs), msgs
    # the forgery: the capped report without its record (a report that just dropped its resolutions)
    bad = {k: v for k, v in capped.items() if k != FIELD}
    valid, msgs = verify_certificate(case, bad, require_claims=True, limits=ONE)
    assert not valid and any(m.startswith(f"{FIELD}: missing") for m in msgs), msgs
    # a record the case contradicts
    valid, msgs = verify_certificate(case, dict(capped, **{FIELD: dict(CAP_1, max_resolutions=2)}),
                                     require_claims=True, limits=ONE)
    assert not valid and any(m.startswith(f"{FIELD}.max_resolutions") for m in msgs), msgs
    # the forgery from the identifiable report: free_rank part and patterns dropped, verdict inconclusive
    dropped = copy.deepcopy(full)
    dropped["certificate"] = {k: v for k, v in dropped["certificate"].items() if k != "free_rank"} or None
    dropped.update(patterns=[], verdict="inconclusive", decided_by="none", rank_gamma=None, cs=None)
    dropped.pop("rules", None)
    for limits in (ONE, WorkLimits()):
        valid, msgs = verify_certificate(case, dropped, require_claims=True, limits=limits)
        assert not valid and any(m.startswith(f"{FIELD}: missing") for m in msgs), msgs
