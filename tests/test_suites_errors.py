"""Every refusal of the suite code names what is wrong (one ``pytest.raises``/exit-2 test per validator)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from exactident.cli import main
from exactident.errors import CaseFormatError, InvariantViolation, UnsupportedCaseError
from exactident.io.case import parse_case
from exactident.suites import run as run_module
from exactident.suites import score
from exactident.suites.compare import parse_fields
from exactident.suites.families import FAMILIES
from exactident.suites.generate import Request, generate_case, plan_requests
from exactident.suites.manifest import read_manifest
from exactident.suites.run import run_suite

ROOT = Path(__file__).resolve().parent.parent
KINK = json.loads((ROOT / "cases" / "tiny-111-kink.json").read_text())


class _Quiet:
    def update(self, note=""):
        pass

    def close(self):
        pass


def _folder(tmp_path, objs: dict) -> Path:
    for rel, obj in objs.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return tmp_path


def test_parse_fields_refuses_empty_and_unknown():
    with pytest.raises(UnsupportedCaseError, match=r"--fields: expected a comma-separated list"):
        parse_fields(" , ")
    with pytest.raises(UnsupportedCaseError, match=r"unknown report field 'numeric'"):
        parse_fields("verdict,numeric")


def test_manifest_format_and_fields_are_validated(tmp_path):
    _folder(tmp_path, {"manifest.json": {"format": "something-else"}})
    with pytest.raises(CaseFormatError, match=r"manifest.json: format: expected 'exactident-suite/1'"):
        read_manifest(tmp_path)
    _folder(tmp_path, {"manifest.json": {"format": "exactident-suite/1", "compared_fields": ["verdict", "colour"]}})
    with pytest.raises(CaseFormatError, match=r"manifest.json: compared_fields: expected a list of report fields"):
        read_manifest(tmp_path)
    assert read_manifest(tmp_path / "nowhere") is None


def test_manifest_fields_are_the_default_comparison(tmp_path):
    bad = dict(KINK, expected={"verdict": "identifiable", "on_boundary": True})  # wrong verdict, right on_boundary
    _folder(tmp_path, {"k.json": bad, "manifest.json": {"format": "exactident-suite/1",
                                                        "compared_fields": ["on_boundary"]}})
    assert run_suite(str(tmp_path), jobs=1, progress=lambda n, d: _Quiet()).ok
    assert not run_suite(str(tmp_path), jobs=1, fields=["verdict"], progress=lambda n, d: _Quiet()).ok


def test_suite_folder_without_cases(tmp_path):
    with pytest.raises(CaseFormatError, match=r"folder holds no case files"):
        run_suite(str(tmp_path), jobs=1)
    with pytest.raises(CaseFormatError, match=r"folder holds no case files"):
        score(lambda p: {}, tmp_path)
    with pytest.raises(CaseFormatError, match=r"no such file or folder"):
        score(lambda p: {}, tmp_path / "nowhere")


def test_out_may_not_be_a_folder(tmp_path):
    _folder(tmp_path / "s", {"k.json": KINK})
    (tmp_path / "r").mkdir()
    with pytest.raises(CaseFormatError, match=r"r: --out: is a folder"):
        run_suite(str(tmp_path / "s"), jobs=1, out=str(tmp_path / "r"))


def test_score_needs_expected_blocks(tmp_path):
    obj = dict(KINK)
    del obj["expected"]
    _folder(tmp_path, {"k.json": obj})
    with pytest.raises(CaseFormatError, match=r"k.json: expected: missing: scoring needs"):
        score(lambda p: {}, tmp_path)


def test_unreachable_scheduler(tmp_path, monkeypatch, capsys):
    pytest.importorskip("distributed")
    monkeypatch.setattr(run_module, "CONNECT_TIMEOUT", "0.5s")
    _folder(tmp_path, {"k.json": KINK})
    assert main(["suite", "run", str(tmp_path), "--scheduler", "tcp://127.0.0.1:9"]) == 2
    assert "--scheduler tcp://127.0.0.1:9: cannot connect" in capsys.readouterr().err


def test_family_needing_a_missing_module(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)
    with pytest.raises(UnsupportedCaseError, match=r"family 'trained' needs sklearn"):
        plan_requests("trained", [2, 3, 1], 1, 0, None)


def test_a_broken_promise_is_an_internal_error(monkeypatch):
    fam = FAMILIES["generic"]
    monkeypatch.setitem(FAMILIES, "generic", type(fam)(fam.name, fam.summary, fam.promise, fam.build,
                                                       lambda d: "made up problem", fam.impossible))
    with pytest.raises(InvariantViolation, match=r"generic-2x2x1-s0-000 breaks the generic promise: made up problem"):
        generate_case(Request("generic", (2, 2, 1), 0, 0))


def test_generator_block_must_be_an_object():
    with pytest.raises(CaseFormatError, match=r"a.json: generator: expected an object, found a list"):
        parse_case(dict(KINK, generator=[1]), "a.json")


@pytest.mark.parametrize(("argv", "match"), [
    (["suite", "score", "{dir}", "--tool", "x {case}", "--timeout", "0"], r"positive number of seconds"),
    (["survey", "--widths", "2,1", "--budget", "soon"], r"positive number of seconds"),
    (["survey", "--widths", "2,1", "--trials", "0"], r"positive integer"),
    (["survey", "--trials", "3"], r"--widths"),
])
def test_bad_option_values_exit_2(tmp_path, capsys, argv, match):
    _folder(tmp_path, {"k.json": KINK})
    assert main([a.replace("{dir}", str(tmp_path)) for a in argv]) == 2
    assert __import__("re").search(match, capsys.readouterr().err)
