"""A new user's reports: each problem, with the right message or value stated here.

The networks are SPEC's worked example ``f(x) = 3 relu(2x + 1)`` (widths ``1,1,1``,
``dim = 1*1 + 1*1 + 1 = 3``) and the shipped ``boundary-dead-neuron`` case (widths
``1,2,1``, ``dim = 1*2 + 2*1 + 1 = 5``, 3 samples).
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import numpy as np
import pytest

from exactident.cli import main
from exactident.io.case import case_files
from exactident.suites import score
from exactident.verify.claims import identity_claims

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "cases"


def _case(name, X, expected=None):
    obj = {"format": "exactident-case/1", "name": name, "widths": [1, 1, 1], "weights": [[["2"]], [["3"]]],
           "biases": [["1"], ["0"]], "sample": [[x] for x in X]}
    if expected is not None:
        obj["expected"] = expected
    return obj


@pytest.fixture
def suite(tmp_path):
    """kink/A (identifiable), kink/B (on the kink: not-identifiable), scale/D (n*N_L = 2 < dim: not-identifiable)."""
    cases = {"kink/A.json": _case("A", ["0", "1", "-1"], {"verdict": "identifiable"}),
             "kink/B.json": _case("B", ["0", "1", "-1/2"], {"verdict": "not-identifiable"}),
             "scale/D.json": _case("D", ["0", "1"], {"verdict": "not-identifiable"})}
    for rel, obj in cases.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(json.dumps(obj))
    return tmp_path


def _py(code):
    return shlex.join([sys.executable, "-c", code]) + " {case}"


# 1. suite score with a tool that never answers -------------------------------------------------

@pytest.mark.parametrize(("tool", "why"), [
    ("/nonexistent/nosuchtool {case}", r"first failure: kink/A\.json: \[Errno 2\] No such file"),
    (_py("print('no json here')"), r"first failure: kink/A\.json: did not print a JSON object"),
    (_py("print('{}')"), r"it printed none of the fields verdict, rank_gamma, rank_a"),
])
def test_score_tool_without_any_usable_answer_exits_2(suite, capsys, tool, why):
    assert main(["suite", "score", str(suite), "--tool", tool]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    import re

    assert err.count("\n") == 1 and err.startswith("error: --tool: no usable answer on any of the 3 case(s) (")
    assert re.search(why, err)


def test_score_table_counts_failed_cases(suite, capsys):
    # The tool answers "identifiable" except on D where it fails: by hand, verdict right on A only;
    # B wrong; D failed, so wrong (docs/suites.md: a failure counts as wrong on every scored field).
    tool = _py("import sys; sys.exit('boom') if sys.argv[1].endswith('D.json') else "
               "print('{\"verdict\": \"identifiable\"}')")
    assert main(["suite", "score", str(suite), "--tool", tool]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == ["family", "verdict", "failed"]
    assert lines[2].split() == ["kink", "1/2", "(50%)", "0/2"]
    assert lines[3].split() == ["scale", "0/1", "(0%)", "1/1"]
    assert lines[4].split() == ["all", "1/3", "(33%)", "1/3"]
    assert "scale/D.json: tool failed: exit status 1: boom" in out
    assert main(["suite", "score", str(suite), "--tool", tool, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["failed_by_family"] == {"kink": [0, 2], "scale": [1, 1]}
    assert data["by_field"] == {"verdict": [1, 3]}


def test_score_without_failures_has_no_failed_column(suite):
    s = score(lambda path: {"verdict": "identifiable"}, suite)
    assert s.usable and s.render().splitlines()[0].split() == ["family", "verdict"]
    assert s.failed_by_family() == {"kink": [0, 2], "scale": [0, 1]}


# 2. verify-certificate with a report of another case --------------------------------------------

def test_verify_layer_graph_report_of_another_case_is_invalid_before_its_certificate(tmp_path, capsys):
    # Regression: the layer-graph verifier checked a report of another case part by part, printing
    # "verdict identifiable verified" among a dozen shape mismatches; the plain-MLP rule (identity first,
    # certificate unread) now serves both. By hand: residual-mlp (h = relu(fc2(relu(fc1 x)) + x), fc1 3x2,
    # fc2 2x3, head 1x2, with biases) has 9 + 8 + 3 = 20 parameters and 3 rescalings (the relu1 units;
    # relu2's are tied to the input by the skip): dim_free 17, layer widths [2, 3, 2, 1], 12 samples;
    # leaky-mlp 2-3-1 has 13 parameters, 3 rescalings: dim_free 10, widths [2, 3, 1], 9 samples.
    arch = CASES / "architectures"
    assert main(["check", str(arch / "residual-mlp.json"), "--json", "--no-numeric"]) == 0
    (tmp_path / "r.json").write_text(capsys.readouterr().out)
    assert main(["verify-certificate", str(arch / "leaky-mlp.json"), str(tmp_path / "r.json")]) == 3
    assert capsys.readouterr().out.splitlines() == [
        "name: the report is for case 'residual-mlp' but the case file is named 'leaky-mlp'",
        "widths: report says [2, 3, 2, 1], the case has [2, 3, 1]",
        "n_samples: report says 12, the case gives 9",
        "dim: report says 17, the case gives 10",
        "the report is not about this case: its certificate was not checked",
        "certificate INVALID"]


def test_identity_claims_by_hand():
    assert identity_claims({"name": "k", "widths": [1, 1, 1], "n_samples": 3, "dim": 3}, "k", [1, 1, 1], 3) == []
    assert identity_claims({"name": "d", "widths": [1, 2, 1], "n_samples": 4, "dim": 5}, "k", [1, 1, 1], 3) == [
        "name: the report is for case 'd' but the case file is named 'k'",
        "widths: report says [1, 2, 1], the case has [1, 1, 1]",
        "n_samples: report says 4, the case gives 3",
        "dim: report says 5, the case gives 3"]
    # wrong types are left to the structural claims (bad input there), not reported here
    assert identity_claims({"widths": "x", "dim": True}, "k", [1, 1, 1], 3) == []


def test_verify_report_of_another_case_is_invalid_before_its_certificate(tmp_path, capsys):
    assert main(["check", str(CASES / "boundary-dead-neuron.json"), "--json", "--no-numeric"]) == 0
    report = json.loads(capsys.readouterr().out)
    (tmp_path / "r.json").write_text(json.dumps(report))
    assert main(["verify-certificate", str(CASES / "tiny-111-kink.json"), str(tmp_path / "r.json")]) == 3
    out = capsys.readouterr().out.splitlines()
    assert out == ["name: the report is for case 'boundary-dead-neuron' but the case file is named 'tiny-111-kink'",
                   "widths: report says [1, 2, 1], the case has [1, 1, 1]",
                   "dim: report says 5, the case gives 3",
                   "the report is not about this case: its certificate was not checked",
                   "certificate INVALID"]
    # a malformed certificate is never read when the identity differs
    report["certificate"] = {"line": 5}
    (tmp_path / "r.json").write_text(json.dumps(report))
    assert main(["verify-certificate", str(CASES / "tiny-111-kink.json"), str(tmp_path / "r.json")]) == 3
    assert "certificate.line" not in capsys.readouterr().out
    # same identity: the malformed part makes the report invalid, naming its path
    report.update(name="tiny-111-kink", widths=[1, 1, 1], dim=3)
    (tmp_path / "r.json").write_text(json.dumps(report))
    assert main(["verify-certificate", str(CASES / "tiny-111-kink.json"), str(tmp_path / "r.json")]) == 3
    assert "certificate.line: expected dict, found int" in capsys.readouterr().out


# 3. folders holding suites -----------------------------------------------------------------------

@pytest.fixture
def nested(tmp_path):
    (tmp_path / "A.json").write_text(json.dumps(_case("A", ["0", "1", "-1"], {"verdict": "identifiable"})))
    inner = tmp_path / "inner"
    (inner / "fam").mkdir(parents=True)
    (inner / "manifest.json").write_text(json.dumps({"format": "exactident-suite/1", "exactident": "0"}))
    (inner / "fam" / "broken.json").write_text("{}")  # read as a case, it would be an error
    return tmp_path


def test_suite_run_leaves_nested_suites_out(nested, capsys):
    assert main(["suite", "run", str(nested), "--jobs", "1", "--json"]) == 0
    out, err = capsys.readouterr()
    assert [c["file"] for c in json.loads(out)["cases"]] == ["A.json"]
    assert f"note: {nested / 'inner'} is a suite of its own (its manifest.json), left out" in err
    assert case_files(nested) == ([nested / "A.json"], [nested / "inner"])


def test_folder_of_only_suites_names_them(nested, capsys):
    (nested / "A.json").unlink()
    assert main(["suite", "run", str(nested), "--jobs", "1"]) == 2
    assert f"folder holds no case files (*.json); it holds suites of their own, run each with exactident suite " \
           f"run: {nested / 'inner'}" in capsys.readouterr().err
    assert main(["check", str(nested / "inner")]) == 2
    assert "it is a suite (its cases are in sub-folders): exactident suite run" in capsys.readouterr().err


def test_manifest_is_never_a_case(nested, capsys):
    (nested / "manifest.json").write_text(json.dumps({"format": "exactident-suite/1"}))
    assert main(["check", str(nested), "--no-numeric", "--json"]) == 0  # the folder's own manifest left out
    assert [r["name"] for r in json.loads(capsys.readouterr().out)] == ["A"]
    assert main(["crosscheck", str(nested)]) == 0
    capsys.readouterr()
    assert main(["check", str(nested / "inner" / "manifest.json")]) == 2
    assert "manifest.json: this file is a suite manifest (exactident-suite/1), not a case" in capsys.readouterr().err


# 4. --sample-rows selecting nothing -------------------------------------------------------------

@pytest.mark.parametrize(("rows", "msg"), [
    ("5:2", "<args>: --sample-rows: '5:2' selects no row (a:b takes rows a to b-1: b > a)"),
    ("3:3", "<args>: --sample-rows: '3:3' selects no row"),
    ("10:20", "x.npy: --sample-rows: rows 10:20 select no row of the 4 in the sample"),
    ("4:", "x.npy: --sample-rows: rows 4: select no row of the 4 in the sample"),
])
def test_empty_sample_rows_refused(tmp_path, capsys, rows, msg):
    np.savez(tmp_path / "m.npz", W1=np.array([[2.0]]), b1=np.array([1.0]), W2=np.array([[3.0]]), b2=np.zeros(1))
    np.save(tmp_path / "x.npy", np.array([[-1.0], [0.0], [1.0], [2.0]]))
    assert main(["import", str(tmp_path / "m.npz"), "--sample", str(tmp_path / "x.npy"), "--sample-rows", rows,
                 "-o", str(tmp_path / "c.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and msg in err
    assert not (tmp_path / "c.json").exists()


@pytest.mark.parametrize(("name", "content"), [("e.npy", None), ("e.csv", "x\n")])
def test_empty_sample_file_refused_as_a_missing_sample(tmp_path, capsys, name, content):
    # Regression: a sample file with no row was analysed (rank Gamma = R_A = 0 < dim: "not-identifiable" by
    # Theorem 8, which says nothing about the network), while --sample-rows selecting no row and a missing
    # --sample are refused. 1-1-1 network; the file holds a header line only, or a (0, 1) array.
    np.savez(tmp_path / "m.npz", W1=np.array([[2.0]]), b1=np.array([1.0]), W2=np.array([[3.0]]), b2=np.zeros(1))
    if content is None:
        np.save(tmp_path / name, np.zeros((0, 1)))
    else:
        (tmp_path / name).write_text(content)
    assert main(["check", str(tmp_path / "m.npz"), "--assume-relu-mlp", "--sample", str(tmp_path / name)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{name}: sample: holds no row (0 samples)" in err


# 5. a report, a sample file, a model file given as CASE ----------------------------------------------

def test_check_recognises_reports_and_sample_files(tmp_path, capsys):
    (tmp_path / "k.json").write_text(json.dumps(_case("k", ["0", "1", "-1"])))
    assert main(["check", str(tmp_path / "k.json"), str(tmp_path / "k.json"), "--json", "--no-numeric"]) == 0
    reports = capsys.readouterr().out
    (tmp_path / "two.json").write_text(reports)  # an array of reports
    (tmp_path / "one.json").write_text(json.dumps(json.loads(reports)[0]))
    for name in ("one.json", "two.json"):
        assert main(["check", str(tmp_path / name)]) == 2
        assert capsys.readouterr().err == (f"error: {tmp_path / name}: this file is an exactident report, not a case; "
                                           "did you mean verify-certificate CASE REPORT?\n")
    np.save(tmp_path / "X.npy", np.zeros((3, 1)))
    assert main(["check", str(tmp_path / "X.npy")]) == 2
    assert "X.npy: a sample file, not a case: a sample file goes with --sample" in capsys.readouterr().err
    # the hint names the command that was run (regression: canonical and equiv were told "exactident check")
    x = tmp_path / "X.npy"
    assert main(["canonical", str(x)]) == 2
    assert capsys.readouterr().err.endswith(f"(exactident canonical MODEL --sample {x})\n")
    assert main(["equiv", str(x), str(x)]) == 2
    assert capsys.readouterr().err.endswith(f"(exactident equiv A B --sample {x})\n")
    (tmp_path / "m.onnx").write_bytes(b"\x08\x07")
    assert main(["check", str(tmp_path / "m.onnx")]) == 2
    assert "m.onnx: --sample: a model file needs a sample: --sample DATA" in capsys.readouterr().err


def test_a_pickle_without_sample_is_refused_as_a_pickle(capsys, tmp_path):
    # Regression: `exactident check model.pkl` (no --sample) asked for a sample, as if the pickle
    # could be read with one; with --sample it said pickles are never loaded.  Now the same refusal
    # both ways, naming the file (exit 2), and the file is never opened.
    (tmp_path / "m.pkl").write_bytes(b"not even read")
    for argv in (["check", str(tmp_path / "m.pkl")], ["check", str(tmp_path / "m.pkl"), "--sample", "X.npy"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {tmp_path / 'm.pkl'}: pickle files are never loaded") and err.count("\n") == 1


# 6. decided_by in the table ---------------------------------------------------------------------

def test_table_reason_line_names_the_rule(capsys):
    # tiny-111-kink: its third sample -1/2 is on the kink; the "active" resolution has an entering
    # kernel direction (docs/boundary.md): rule boundary-entering.  diabetes: C_S holds (Theorem 9).
    assert main(["check", str(CASES / "tiny-111-kink.json"), "--no-numeric"]) == 0
    lines = capsys.readouterr().out.splitlines()
    reason = next(x for x in lines if x.startswith("tiny-111-kink: "))
    assert reason.endswith("(certificate) [decided by: boundary-entering]")
    assert main(["check", str(CASES / "tiny-111-kink.json"), "--no-numeric", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["decided_by"] == "boundary-entering" and "[decided by" not in report["reason"]


# 7. docs ----------------------------------------------------------------------------------------

def test_docs_fixes():
    cli = (ROOT / "docs" / "cli.md").read_text()
    numeric = cli.split("The `numeric` block:")[1].split("\n\n")[1]
    assert sum(line.startswith("| `dtype` |") for line in numeric.splitlines()) == 1
    synopsis = cli.split("```text")[1].split("exactident import")[0]
    assert "[--expect]" in synopsis and "[--explain]" in synopsis
    for doc in ("suites.md", "import.md"):
        assert "pip install 'exactident[" not in (ROOT / "docs" / doc).read_text()


# 8. unknown options name the subcommand ----------------------------------------------------------

def test_unknown_option_names_the_subcommand(capsys):
    assert main(["check", "--bogus", "x.json"]) == 2
    assert capsys.readouterr().err == "error: exactident check: unrecognized arguments: --bogus\n"
    assert main(["suite", "score", "d", "--tool", "t {case}", "--zz"]) == 2
    assert capsys.readouterr().err == "error: exactident suite score: unrecognized arguments: --zz\n"


def test_no_command_names_the_commands(capsys):
    # Regression: a bare `exactident` said only "the following arguments are required: command".
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: exactident: a command is required: check, ") and err.count("\n") == 1
    for command in ("import", "explain", "canonical", "fdim", "hidden-symmetries"):
        assert f" {command}," in err or f" {command} (" in err


def test_verify_certificate_lists_montecarlo_in_one_parenthesis(capsys, tmp_path):
    # Regression: the line read "not verified: montecarlo (a labelled estimate inside the certified
    # interval (its value must be rank_gamma))", a parenthesis inside a parenthesis.  iris's report
    # carries a Monte Carlo rank with --verdict-first (its verdict needs no exact rank: the interval is [109, 111]).
    case = str(Path(__file__).resolve().parents[1] / "cases" / "iris-mlp-4-8-8-3.json")
    assert main(["check", case, "--json", "--no-numeric", "--verdict-first"]) == 0
    (tmp_path / "r.json").write_text(capsys.readouterr().out)
    assert main(["verify-certificate", case, str(tmp_path / "r.json")]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("not verified: montecarlo"))
    assert line.count("(") == line.count(")") == 1
