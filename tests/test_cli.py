"""The CLI contract (SPEC §4, §5): exit codes, one-line errors, report fields.

Verdict/rank values asserted here are the hand-derived ones of
``tests/test_hand.py`` (SPEC §2's [1,1,1] network).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _gen import case_obj

from exactident.cli import main
from exactident.model import lifting

REPORT_FIELDS = ["format", "name", "widths", "n_samples", "dim", "rank_gamma", "rank_a", "cs", "cn",
                 "degenerate", "on_boundary", "n_ties", "verdict", "reason", "decided_by"]
NUMERIC_FIELDS = {"rank_gamma", "rank_a", "verdict", "tol", "agrees", "singular_values_near_cut"}


def spec_111(tmp_path, name, sample):
    obj = {"format": "exactident-case/1", "name": name, "widths": [1, 1, 1],
           "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]], "sample": [[s] for s in sample]}
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps(obj), encoding="utf-8")
    return str(p)


@pytest.fixture
def good(tmp_path):
    # 0, 1, -1: identifiable (rank 3 = dim); 0, 1, 2: not-identifiable (2 = 2 < 3)
    return spec_111(tmp_path, "ident", ["0", "1", "-1"]), spec_111(tmp_path, "notident", ["0", "1", "2"])


def run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# --------------------------------------------------------------------------- exit 0

def test_table(capsys, good):
    code, out, err = run(capsys, ["check", *good])
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split() == ["case", "verdict", "rank_gamma", "rank_a", "dim", "n*N_L", "ties", "float", "time"]
    assert lines[2].split()[:8] == ["ident", "identifiable", "3", "-", "3", "3", "0", "agrees"]
    assert lines[3].split()[:8] == ["notident", "not-identifiable", "2", "2", "3", "3", "0", "agrees"]
    assert "Theorem 9" in out and "Theorem 8" in out


def test_json_single_object_with_spec_fields(capsys, good):
    code, out, err = run(capsys, ["check", "--json", good[1]])
    assert code == 0 and err == ""
    data = json.loads(out)
    assert isinstance(data, dict)
    assert list(data)[:len(REPORT_FIELDS)] == REPORT_FIELDS
    assert set(data) == set(REPORT_FIELDS) | {"numeric", "certificate", "certified_by"}  # the rank certificate
    assert data["format"] == "exactident-report/1" and data["name"] == "notident"
    assert (data["widths"], data["n_samples"], data["dim"]) == ([1, 1, 1], 3, 3)
    assert (data["rank_gamma"], data["rank_a"], data["cs"], data["cn"]) == (2, 2, False, False)
    assert (data["degenerate"], data["on_boundary"], data["n_ties"]) == (False, False, 0)
    assert data["verdict"] == "not-identifiable" and data["decided_by"] == "theorem-8"
    assert set(data["numeric"]) >= NUMERIC_FIELDS
    assert data["numeric"]["agrees"] is True and data["numeric"]["rank_gamma"] == 2


def test_json_array_for_several_cases(capsys, good):
    code, out, _ = run(capsys, ["check", "--json", "--no-numeric", "--all-ranks", *good])
    assert code == 0
    data = json.loads(out)
    assert isinstance(data, list) and [d["name"] for d in data] == ["ident", "notident"]
    assert [d["verdict"] for d in data] == ["identifiable", "not-identifiable"]
    assert [d["rank_a"] for d in data] == [3, 2]
    assert all("numeric" not in d for d in data)


def test_tol_and_verify_propositions(capsys, good):
    code, out, _ = run(capsys, ["check", "--json", "--tol", "1e-3", "--verify-propositions", good[0]])
    assert code == 0
    data = json.loads(out)
    assert data["numeric"]["tol"] == 1e-3 and data["verdict"] == "identifiable"
    # rank_a is not needed when C_S holds
    assert data["rank_a"] is None and data["cn"] is True


def test_boundary_case_exits_zero(capsys):
    shipped = Path(__file__).resolve().parent.parent / "cases" / "tiny-111-kink.json"
    code, out, _ = run(capsys, ["check", "--json", str(shipped)])
    assert code == 0
    data = json.loads(out)
    assert (data["on_boundary"], data["n_ties"]) == (True, 1)


# --------------------------------------------------------------------------- exit 2

def assert_one_line_error(err, *needles):
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def test_bad_field_names_file_and_field(capsys, tmp_path, good):
    obj = json.loads(Path(good[0]).read_text())
    obj["weights"][1][0][0] = True
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(obj))
    code, out, err = run(capsys, ["check", good[0], str(bad)])
    assert code == 2 and out == ""  # every file is validated before any work
    assert_one_line_error(err, str(bad), "weights[1][0][0]", "expected a number, found true")


@pytest.mark.parametrize("content,needle", [
    (b"{", "not valid JSON"),
    (b"\xff\xfe", "not UTF-8"),
    (b'{"format": "exactident-case/1", "name": "x", "widths": [1, 1], "weights": [[[NaN]]], '
     b'"biases": [[0]], "sample": []}', "weights[0][0][0]: expected a finite number, found NaN"),
    (b'{"format": "nope"}', "format"),
])
def test_bad_files_exit_2(capsys, tmp_path, content, needle):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    code, out, err = run(capsys, ["check", str(bad)])
    assert code == 2 and out == ""
    assert_one_line_error(err, str(bad), needle)


def test_missing_file_exit_2(capsys, tmp_path):
    code, _, err = run(capsys, ["check", str(tmp_path / "missing.json")])
    assert code == 2
    assert_one_line_error(err, "missing.json", "cannot read file")


@pytest.mark.parametrize("argv,needle", [
    ([], "required"),
    (["check"], "required"),
    (["check", "--tol", "-1", "x.json"], "expected a positive finite number, found '-1'"),
    (["check", "--tol", "0", "x.json"], "found '0'"),
    (["check", "--tol", "nan", "x.json"], "found 'nan'"),
    (["check", "--tol", "inf", "x.json"], "found 'inf'"),
    (["check", "--tol", "abc", "x.json"], "expected a positive finite number, found 'abc'"),
    (["check", "--rtol", "-1e-9", "x.json"], "--rtol"),
    (["check", "--bogus", "x.json"], "unrecognized arguments: --bogus"),
    (["frobnicate"], "invalid choice"),
])
def test_usage_errors_exit_2(capsys, argv, needle):
    code, out, err = run(capsys, argv)
    assert code == 2 and out == ""
    assert_one_line_error(err, needle)


def _big_case(tmp_path):
    # widths [1, 20, 20, 20, 1]: |P| = 8000 + 8000 + 400 + 20 + 1 = 16421, dim = 841,
    # Dpsi would have 16421 * 841 > 5e6 entries.  Positive weights, biases and input: no tie.
    widths = [1, 20, 20, 20, 1]
    W = [[[1 + (i + j) % 3 for j in range(widths[l - 1])] for i in range(widths[l])] for l in range(1, 5)]
    obj = case_obj(widths, W, [[1] * widths[l] for l in range(1, 5)], [[1], [2]], name="big")
    p = tmp_path / "big.json"
    p.write_text(json.dumps(obj))
    return str(p)


def test_lifting_too_large_for_verify_propositions_exit_2(capsys, tmp_path):
    big = _big_case(tmp_path)
    code, out, err = run(capsys, ["check", "--no-numeric", "--verify-propositions", big])
    assert code == 2 and out == ""
    assert_one_line_error(err, big, "|P| = 16421", "limit")
    # without the flag the same case is analysed
    code, out, _ = run(capsys, ["check", "--no-numeric", "--json", big])
    assert code == 0 and json.loads(out)["n_ties"] == 0


# --------------------------------------------------------------------------- exit 70: internal error (a bug)

def test_broken_proposition_1_exits_70(capsys, monkeypatch, good):
    real_phi = lifting.phi

    def wrong_phi(net):
        P = real_phi(net)
        P[0, 0] = P[0, 0] + 1
        return P

    monkeypatch.setattr(lifting, "phi", wrong_phi)
    code, out, err = run(capsys, ["check", "--verify-propositions", good[1]])
    assert code == 70 and out == ""
    assert_one_line_error(err, "invariant violated", "Proposition 1")
    # without --verify-propositions the broken phi is never consulted
    assert run(capsys, ["check", good[1]])[0] == 0


def test_broken_proposition_10_exits_70(capsys, monkeypatch, good):
    real = lifting.dpsi

    def wrong(net, fixed):
        D = real(net, fixed)
        D[0, 0] = D[0, 0] + 1
        return D

    monkeypatch.setattr(lifting, "dpsi", wrong)
    code, _, err = run(capsys, ["check", "--verify-propositions", good[0]])
    assert code == 70
    assert_one_line_error(err, "Proposition 10")


def test_unexpected_exception_exits_70(capsys, monkeypatch, good):
    check_mod = sys.modules["exactident.check.dense_route"]  # the MLP stages (rank_stage calls certify_ranks)

    def crash(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(check_mod, "certify_ranks", crash)
    code, _, err = run(capsys, ["check", good[0]])
    assert code == 70
    assert_one_line_error(err, "internal error: RuntimeError: boom")


# --------------------------------------------------------------------------- python -m

def test_python_dash_m(tmp_path):
    path = spec_111(tmp_path, "ident", ["0", "1", "-1"])
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run([sys.executable, "-m", "exactident", "check", "--json", path],
                          cwd=root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["verdict"] == "identifiable"
    proc = subprocess.run([sys.executable, "-m", "exactident", "check", "--tol", "-1", path],
                          cwd=root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
