"""Hardening round 3, process and claim items: claims past the resolution cap, orphaned children,
cost estimates, budgets for ``explain`` and ``design`` (docs/cli.md, docs/performance.md).

Right values come from hand derivations written in each test.  No test measures time: a slow
case only has to outlive the moment a signal is sent.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from exactident.check import check
from exactident.cli import main
from exactident.io.case import parse_case
from exactident.verify.certificate import verify_certificate

ROOT = Path(__file__).resolve().parent.parent

# f = 3 relu(2x + 1) on the samples -1/2 (on the kink), 1, -2.  Gamma rows over (w_1, b_1, b_2), the
# outgoing edge w_2 fixed: an active sample x gives (3x, 3, 1), an inactive one (0, 0, 1).
#   tie active:   (-3/2, 3, 1), (3, 3, 1), (0, 0, 1): rank 3 = dim (C_S holds at the >= 0 pattern);
#   tie inactive: (0, 0, 1), (3, 3, 1), (0, 0, 1): rank 2 < dim, and alpha then has rank 2 too.
# So the smallest R_Gamma over the two resolutions is 2: provably not identifiable, while the
# >= 0 pattern alone says 3.
KINK_MIN2 = {"format": "exactident-case/1", "name": "kink-min2", "widths": [1, 1, 1],
             "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]], "sample": [["-1/2"], ["1"], ["-2"]]}


# ---------------------------------------------------------------- 18.4: a false claim past the cap

def test_past_the_cap_the_report_claims_no_rank_and_the_verifier_refuses_one():
    case = parse_case(KINK_MIN2)
    full = check(case, numeric=False)
    assert (full.verdict, full.rank_gamma) == ("not-identifiable", 2)  # the hand derivation above
    capped = check(case, numeric=False, max_resolutions=1)
    d = capped.to_dict()
    # nothing enumerated: the smallest R_Gamma over the resolutions is unknown, so no rank, C_S, C_N claim
    assert (d["rank_gamma"], d["rank_a"], d["cs"], d["cn"]) == (None, None, None, None)
    assert d["verdict"] == "inconclusive" and "patterns" not in d
    assert verify_certificate(case, d, require_claims=True)[0]
    # the report the old code wrote: the >= 0 pattern's ranks, presented as the case's
    for forged in ({"rank_gamma": 3, "rank_a": 3, "cs": True, "cn": True}, {"cs": True}, {"cn": False},
                   {"rank_gamma": 3}, {"rank_a": 3}, {"patterns": []}):
        valid, msgs = verify_certificate(case, {**d, **forged}, require_claims=True)
        assert not valid, forged
        key = next(iter(forged))
        assert any(m.startswith(f"{key}: report") for m in msgs), msgs


def test_forged_past_the_cap_report_is_exit_3_from_the_cli(tmp_path, capsys):
    case_path = tmp_path / "case.json"
    case_path.write_text(json.dumps(KINK_MIN2))
    assert main(["check", "--json", "--no-numeric", "--max-resolutions", "1", str(case_path)]) == 0
    report = json.loads(capsys.readouterr().out)
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps({**report, "rank_gamma": 3, "rank_a": 3, "cs": True, "cn": True}))
    assert main(["verify-certificate", str(case_path), str(forged)]) == 3
    out = capsys.readouterr().out
    assert "cs: report says True" in out and out.rstrip().endswith("certificate INVALID")
