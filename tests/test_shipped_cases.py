"""Every shipped case through every entry point, against its ``expected`` block.

The ``expected`` values were derived independently when each case was made
(hand derivations for the boundary cases, the Fraction/sympy oracle of
``test_real_cases.py`` for the trained networks, rescaling invariance and hand
derivations for ``cases/tolerance``); the tests that establish them live beside
each family.  Here one table (ids = case names) drives the library ``check()``
and the CLI ``--json`` and requires both to reproduce every expected field.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from exactident.check import check
from exactident.cli import main
from exactident.io.case import load_case

ROOT = Path(__file__).resolve().parent.parent
CASE_FILES = sorted((ROOT / "cases").glob("*.json")) + sorted((ROOT / "cases" / "tolerance").glob("*.json"))
CASES = [load_case(p) for p in CASE_FILES]


def _exact_fields(expected: dict) -> dict:
    # 'numeric' expectations are the float backend's business (test_crosscheck.py)
    return {k: v for k, v in expected.items() if k != "numeric" and not isinstance(v, dict)}


def test_the_table_is_not_empty():
    assert len(CASES) >= 10 and all(c.expected for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_library_check_reproduces_expected(case):
    fields = _exact_fields(case.expected)
    report = check(case, numeric=False, all_ranks="rank_a" in fields).to_dict()
    assert {k: report[k] for k in fields} == fields


@pytest.mark.parametrize("path", CASE_FILES[:: max(1, len(CASE_FILES) // 8)], ids=lambda p: p.stem)
def test_cli_json_reproduces_expected(path, capsys):
    case = load_case(path)
    fields = _exact_fields(case.expected)
    argv = ["check", "--json", "--no-numeric", str(path)] + (["--all-ranks"] if "rank_a" in fields else [])
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert {k: report[k] for k in fields} == fields
