"""``exactident explain``, ``design`` and ``check --explain`` from the command line, and the verifier on their fields.

Every report ``explain --json`` writes verifies; each tampered claim (a class, a count, a
kernel direction, a line) is caught by ``verify-certificate`` (exit 3) with a message
naming it.  Bad usage exits 2 with one line.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from exactident.cli import main

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "cases"


def _run(capsys, argv):
    status = main(argv)
    out = capsys.readouterr()
    return status, out.out, out.err


def _explained(capsys, tmp_path, name):
    status, out, _ = _run(capsys, ["explain", "--json", str(CASES / f"{name}.json")])
    assert status == 0
    return json.loads(out)


def _verify(capsys, tmp_path, name, report):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report))
    return _run(capsys, ["verify-certificate", str(CASES / f"{name}.json"), str(path)])


@pytest.mark.parametrize("name", ["tiny-111-kink", "iris-mlp-4-8-8-3", "diabetes-mlp-10-8-1-first10",
                                  "boundary-dead-neuron", "diabetes-mlp-10-8-1", "boundary-two-ties-one-neuron",
                                  "suite-v1/degenerate/degenerate-1x2x1-s1-001", "suite-v1/twins/twins-2x2x2x1-s1-001",
                                  "suite-v1/gap/gap-2x2x2x1-s1-000"])
def test_explain_reports_verify(capsys, tmp_path, name):
    report = _explained(capsys, tmp_path, name)
    assert {"parameters", "neurons", "kernel_basis", "explanation"} <= set(report)
    status, out, _ = _verify(capsys, tmp_path, name, report)
    assert status == 0 and "certificate VALID" in out
    assert "parameters valid" in out and "neurons valid" in out


def _first(report, cls):
    return next(e for e in report["parameters"] if e["class"] == cls)


def test_tampered_claims_are_caught(capsys, tmp_path):
    good = _explained(capsys, tmp_path, "iris-mlp-4-8-8-3")
    bad = []
    r = copy.deepcopy(good)  # a pinned parameter claimed not identifiable, with a witness that does not move it
    e = _first(r, "first-order-determined")
    e.update({"class": "not-identifiable", "by": "line", "witness": [0, 0]})
    bad.append((r, "does not move it"))
    r = copy.deepcopy(good)  # a parameter moved by the kernel claimed determined to first order
    e = next(e for e in r["parameters"] if e["class"] == "unknown")
    e["class"] = "first-order-determined"
    bad.append((r, "a kernel direction moves it"))
    r = copy.deepcopy(good)  # a moved parameter claimed by C_N: C_N holds on iris (rank A = 237 > 109)
    e = next(e for e in r["parameters"] if e["class"] == "unknown")
    e.update({"class": "not-identifiable", "by": "C_N", "witness": [0, 12]})
    bad.append((r, "C_N failing"))
    r = copy.deepcopy(good)  # a count changed
    r["neurons"][10]["n_active"] += 1
    bad.append((r, "n_active"))
    r = copy.deepcopy(good)  # the hyperplane of (2,2) claimed pinned
    r["neurons"][10]["pinned"] = True
    bad.append((r, "pinned"))
    r = copy.deepcopy(good)  # a direction that is not in the kernel
    r["kernel_basis"][0]["directions"][0]["delta"] = {"W_1[0,0]": "1"}
    bad.append((r, "not independent vectors of ker Gamma"))
    r = copy.deepcopy(good)  # a multi-layer direction claimed to be a straight line
    d = next(d for d in r["kernel_basis"][0]["directions"] if "line" not in d)
    d["line"] = True
    bad.append((r, "claims a straight line"))
    r = copy.deepcopy(good)  # a parameter left out
    r["parameters"].pop()
    bad.append((r, "do not list every parameter once"))
    r = copy.deepcopy(good)  # an unknown field in an entry
    r["neurons"][0]["note"] = 1
    bad.append((r, "unknown field"))
    for report, needle in bad:
        status, out, _ = _verify(capsys, tmp_path, "iris-mlp-4-8-8-3", report)
        assert status == 3 and "certificate INVALID" in out, needle
        assert needle in out, (needle, out[-800:])


def test_check_report_unchanged_without_explain(capsys):
    status, out, _ = _run(capsys, ["check", "--json", "--no-numeric", str(CASES / "tiny-111-kink.json")])
    assert status == 0 and not {"parameters", "neurons", "kernel_basis", "explanation"} & set(json.loads(out))
    status, out, _ = _run(capsys, ["check", "--json", "--no-numeric", "--explain", str(CASES / "tiny-111-kink.json")])
    assert status == 0 and {"parameters", "neurons", "kernel_basis"} <= set(json.loads(out))
    status, out, _ = _run(capsys, ["check", "--no-numeric", "--explain", str(CASES / "tiny-111-kink.json")])
    assert status == 0 and "parameters by class:" in out and "s0.d0 = b_1[0] - 3 b_2[0]  [line]" in out


def test_explain_text_names_the_under_determined_neurons(capsys):
    status, out, _ = _run(capsys, ["explain", str(CASES / "iris-mlp-4-8-8-3.json")])
    assert status == 0
    assert "under-determined neuron (2,2): active at 3 of 150 samples" in out
    assert "under-determined neuron (2,4): active at 5 of 150 samples" in out


def test_design_writes_the_subsample_and_rederives_its_verdict(capsys, tmp_path):
    out_path = tmp_path / "sub.json"
    status, out, _ = _run(capsys, ["design", str(CASES / "diabetes-mlp-10-8-1.json"), "-o", str(out_path)])
    assert status == 0 and "smallest identifying prefix: the first" in out
    assert "check says identifiable" in out and out_path.exists()
    status, out, _ = _run(capsys, ["check", "--json", "--no-numeric", str(out_path)])
    assert json.loads(out)["verdict"] == "identifiable" and json.loads(out)["n_samples"] == 89


def test_design_json_and_new_points(capsys, tmp_path):
    out_path = tmp_path / "new.json"
    status, out, _ = _run(capsys, ["design", "--json", "--box=-20:20", str(CASES / "iris-mlp-4-8-8-3.json"),
                                   "-o", str(out_path)])
    assert status == 0
    d = json.loads(out)
    assert d["format"] == "exactident-design/1" and d["prefix"] is None and d["subsample"] is None
    assert d["points"]["nullity_before"] == [14]
    assert d["new_case"]["n_samples"] == 150 + len(d["points"]["added"])
    status, out, _ = _run(capsys, ["check", "--json", "--no-numeric", str(out_path)])
    assert json.loads(out)["rank_gamma"] == d["new_case"]["rank_gamma"]


@pytest.mark.parametrize("argv, needle", [
    (["design", "--box", "2:1", "CASE"], "LO < HI"),
    (["design", "--box", "a:b", "CASE"], "exact numbers"),
    (["design", "--budget", "-1", "CASE"], "non-negative integer"),
    (["design", "CASE", "-o", "CASE"], "is also the input CASE"),
    (["design", "CASE", "-o", "/nonexistent-dir/x.json"], "no such directory"),
    (["explain", "/nonexistent.json"], "/nonexistent.json"),
])
def test_bad_usage_exits_2(capsys, argv, needle):
    case = str(CASES / "tiny-111-kink.json")
    argv = [case if a == "CASE" else a for a in argv]
    status, out, err = _run(capsys, argv)
    assert status == 2 and needle in err and out == ""


def test_malformed_explain_field_is_invalid(capsys, tmp_path):
    report = _explained(capsys, tmp_path, "tiny-111-kink")
    report["kernel_basis"][0]["directions"][0] = "b_1[0] - 3 b_2[0]"
    status, out, _err = _verify(capsys, tmp_path, "tiny-111-kink", report)
    assert status == 3 and "kernel_basis[0].directions[0]: expected dict, found str" in out


@pytest.mark.parametrize("command", ["explain", "design"])
def test_on_a_terminal_explain_and_design_run_in_a_child(capsys, monkeypatch, command):
    # Regression: on a terminal, Ctrl-C during a long `exactident explain` (or `design`) waited for
    # the running FLINT call to return (48 s on a 8-16-16-1 MLP with 200 samples), while `check`
    # runs in a child process there and stops at once.  Now both run in a child without a deadline
    # (run_isolated(..., math.inf)) on a terminal, with the same output as off a terminal.
    import math
    import re
    import sys

    import exactident.budget as budget

    case = str(CASES / "tiny-111-kink.json")
    status, plain, _ = _run(capsys, [command, case])
    assert status == 0
    timeouts = []
    real = budget.run_isolated

    def spy(fn, timeout, **kw):
        timeouts.append(timeout)
        return real(fn, timeout, **kw)

    monkeypatch.setattr(budget, "run_isolated", spy)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    status, tty, _ = _run(capsys, [command, case])
    assert status == 0 and timeouts == [math.inf]

    def untimed(text):
        return re.sub(r"[0-9.]+s\b", "", text)

    assert untimed(tty) == untimed(plain)
    if command == "explain":
        # f(x) = 3 relu(2x + 1): at the tie x = -1/2 resolved active, f = 6x + 3, and
        # (b_1, b_2) -> (b_1 + t, b_2 - 3t) keeps 3 (2x + 1 + t) - 3t: the direction b_1[0] - 3 b_2[0]
        assert "b_1[0] - 3 b_2[0]" in tty


def test_explain_takes_a_model_file_with_its_sample(capsys, tmp_path):
    # Regression: `exactident explain model.npz --sample X.npy` was a usage error (explain took case
    # files only) although `exactident.explain(path, sample=...)` and `check` take model files.
    # The model is tiny-111-kink's network f(x) = 3 relu(2x + 1) and its sample 0, 1, -1/2 (exact in
    # binary): at the tie x = -1/2 resolved active, (b_1, b_2) -> (b_1 + t, b_2 - 3t) keeps the
    # outputs, the kernel direction b_1[0] - 3 b_2[0].
    import numpy as np

    np.savez(tmp_path / "m.npz", W1=np.array([[2.0]]), b1=np.array([1.0]), W2=np.array([[3.0]]), b2=np.array([0.0]))
    np.save(tmp_path / "X.npy", np.array([[0.0], [1.0], [-0.5]]))
    status, out, err = _run(capsys, ["explain", str(tmp_path / "m.npz"), "--sample", str(tmp_path / "X.npy"),
                                     "--assume-relu-mlp"])
    assert status == 0 and err == ""
    assert out.startswith("m: not-identifiable") and "b_1[0] - 3 b_2[0]" in out
    status, _, err = _run(capsys, ["explain", str(tmp_path / "m.npz")])  # a model file needs its sample
    assert status == 2 and "m.npz: --sample: a model file needs a sample" in err
