"""One interface (issue 29, items 14-16): the same inputs, ``--box`` syntax and exit statuses in every command.

- every command that analyses a network takes a model file with ``--sample`` (one loader): its
  answer equals the answer on the case file ``exactident import`` writes from the same files;
- ``--box LO:HI`` in ``design``, ``audit`` and ``fdim``, negative and rational ends without ``=``;
  the old ``--box LO HI`` is a one-line usage error;
- the exit-status table of docs/cli.md: 0 answered (a ``--timeout`` that ran out included), 1
  ``equiv`` different orbits, 2 bad input, 3 invalid certificate / ``equiv`` undecided, 70 internal
  error, 130 interrupted (Ctrl-C, SIGTERM) with nothing half-written;
- long exact numbers shown as a float and a digit count, never cut in the middle;
- layer-graph reports show the user's layer widths, not the compiled carriers.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from decimal import Decimal, getcontext
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from exactident.cli import main
from exactident.io.case import Case, write_case
from exactident.io.rationals import approx_text, short_text
from exactident.model.network import Network

ROOT = Path(__file__).resolve().parents[1]
RESIDUAL = str(ROOT / "cases" / "architectures" / "residual-mlp.json")
TINY = str(ROOT / "cases" / "tiny-111-kink.json")
IRIS = str(ROOT / "cases" / "iris-mlp-4-8-8-3.json")

#: Extra options every weight-only model file (.npz) needs to state its architecture, if any: the one
#: place to change should such a statement become required.
MODEL_FLAGS: list[str] = ["--assume-relu-mlp"]


def run(capsys, argv):
    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def model(tmp_path, capsys):
    """f(x) = 2 relu(x) + relu(-x - 1) as an .npz (W1, b1, W2, b2), a sample, and the case import writes."""
    np.savez(tmp_path / "m.npz", W1=np.array([[1.0], [-1.0]]), b1=np.array([0.0, -1.0]),
             W2=np.array([[2.0, 1.0]]), b2=np.array([0.0]))
    np.save(tmp_path / "X.npy", np.array([[0.5], [-3.0], [2.0], [-2.5], [1.5], [-0.25]]))
    npz, X, case = str(tmp_path / "m.npz"), str(tmp_path / "X.npy"), str(tmp_path / "m.json")
    assert main(["import", npz, "--sample", X, "-o", case, *MODEL_FLAGS]) == 0
    capsys.readouterr()
    return npz, X, case


def _json(out: str):
    def strip(v):
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if k not in ("seconds", "time", "source")}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v
    return strip(json.loads(out))


# ------------------------------------------------------------------ 14: one set of inputs

@pytest.mark.parametrize("command", [
    ["check", "--json", "--no-numeric"], ["explain", "--json"], ["design", "--json"], ["crosscheck", "--json"],
    ["fdim", "--json", "--regions", "0", "--lines", "8"], ["canonical", "--json"], ["audit", "--json"]])
def test_a_model_file_with_sample_is_the_case_import_writes(capsys, model, command):
    npz, X, case = model
    status, out, err = run(capsys, [*command, npz, "--sample", X, *MODEL_FLAGS])
    assert status == 0, err
    from_model = _json(out)
    # the case file holds its sample (audit: the queries are given apart, as --queries)
    extra = ["--queries", X] if command[0] == "audit" else []
    status, out, err = run(capsys, [*command, case, *extra])
    assert status == 0, err
    assert from_model == _json(out)


@pytest.mark.parametrize("command", ["check", "explain", "design", "crosscheck", "fdim", "canonical", "audit",
                                     "equiv", "verify-certificate"])
def test_a_model_file_without_sample_is_one_line_naming_sample(capsys, model, command):
    npz, _, case = model
    argv = {"equiv": [command, npz, case], "verify-certificate": [command, npz, case]}.get(command, [command, npz])
    status, out, err = run(capsys, argv)
    assert status == 2 and out == "" and err.count("\n") == 1
    assert f"{npz}: --sample: a model file needs a sample" in err


def test_equiv_and_verify_certificate_take_a_model_file_with_sample(capsys, model, tmp_path):
    npz, X, case = model
    status, out, err = run(capsys, ["equiv", npz, case, "--sample", X, *MODEL_FLAGS])
    assert status == 0 and "same orbit" in out and "equal exactly" in out, err
    status, out, _ = run(capsys, ["check", "--json", "--no-numeric", case])
    (tmp_path / "r.json").write_text(out)
    status, out, err = run(capsys, ["verify-certificate", npz, str(tmp_path / "r.json"), "--sample", X, *MODEL_FLAGS])
    assert status == 0 and out.endswith("certificate VALID\n"), err


# ------------------------------------------------------------------ 14: --box LO:HI everywhere

@pytest.mark.parametrize("command", [["fdim", "--json", "--regions", "0", "--lines", "4"],
                                     ["audit", "--json", "--queries", TINY]])
def test_box_is_one_word_with_negative_and_rational_ends(capsys, command):
    # "-1/2:3/2" after --box, without "=": a value, not an unknown option; read exactly
    status, out, err = run(capsys, [*command, TINY, "--box", "-1/2:3/2"])
    assert status == 0, err
    obj = json.loads(out)
    box = [obj["domain"]["lo"], obj["domain"]["hi"]] if "domain" in obj else obj["box"]
    assert [[Fraction(v) for v in side] for side in box] == [[Fraction(-1, 2)], [Fraction(3, 2)]]


def test_design_takes_the_same_box(capsys, monkeypatch):
    import exactident.explain.design_command as design_command

    seen = {}
    real = design_command.design

    def spy(case, **kw):
        seen["box"] = kw["box"]
        return real(case, **kw)

    monkeypatch.setattr(design_command, "design", spy)
    status, _, err = run(capsys, ["design", TINY, "--box", "-3:1/4", "--budget", "0"])
    assert status == 0, err
    assert [[Fraction(str(v)) for v in side] for side in seen["box"]] == [[Fraction(-3)], [Fraction(1, 4)]]


@pytest.mark.parametrize("command", [["fdim", TINY], ["audit", TINY, "--queries", TINY], ["design", TINY]])
@pytest.mark.parametrize("box, why", [(["-1", "1"], "(--box LO HI is not accepted)"), (["1:-1"], "LO < HI"),
                                      (["0.1x:1"], "exact numbers")])
def test_bad_box_is_one_usage_line(capsys, command, box, why):
    status, out, err = run(capsys, [*command, "--box", *box])
    assert status == 2 and out == "" and err.count("\n") == 1 and "--box" in err and why in err, err


# ------------------------------------------------------------------ 15: exit statuses

def _net_case(path: Path, name: str, w2: int, b2: int = 0) -> str:
    write_case(Case(name=name, network=Network((1, 1, 1), [[[1]], [[w2]]], [[0], [b2]]), X=[]), path)
    return str(path)


def test_equiv_exit_status_is_0_same_1_different(capsys, tmp_path):
    # f_A = 2 relu(x), f_B = 3 relu(x): different functions (x = 1), so different orbits; A and A: the same
    a, b = _net_case(tmp_path / "a.json", "a", 2), _net_case(tmp_path / "b.json", "b", 3)
    assert run(capsys, ["equiv", a, a])[0] == 0
    status, out, _ = run(capsys, ["equiv", a, b])
    assert status == 1 and "different orbits" in out


def test_equiv_undecided_exits_3(capsys, tmp_path):
    # widths 1-2-3-1 (docs/symmetries.md, isolated neurons): n_1 of layer 1 is dead-in (zero row and bias);
    # in layer 2, m_1 = relu(n_1) and m_2 = relu(c n_1) are dead-in too, m_2 has a zero outgoing weight and
    # the nonzero incoming weight c: an isolated neuron.  c = 2 and c = 1 give the same function (every dead
    # unit is 0) and different canonical forms, and the forms cannot settle the orbit: neither is proved.
    def net(c):
        return Network((1, 2, 3, 1), [[[1], [0]], [[1, 0], [0, 1], [0, c]], [[1, 1, 0]]],
                       [[0, 0], [0, 0, 0], [0]])
    for name, c in (("a", 1), ("b", 2)):
        write_case(Case(name=name, network=net(c), X=[]), tmp_path / f"{name}.json")
    status, out, _ = run(capsys, ["equiv", str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    assert status == 3 and "undecided" in out


def test_verify_certificate_exit_0_valid_3_invalid(capsys, tmp_path):
    status, out, _ = run(capsys, ["check", "--json", "--no-numeric", TINY])
    report = json.loads(out)
    (tmp_path / "r.json").write_text(out)
    assert run(capsys, ["verify-certificate", TINY, str(tmp_path / "r.json")])[0] == 0
    report["verdict"] = "identifiable" if report["verdict"] != "identifiable" else "not-identifiable"
    (tmp_path / "bad.json").write_text(json.dumps(report))
    status, out, _ = run(capsys, ["verify-certificate", TINY, str(tmp_path / "bad.json")])
    assert status == 3 and out.endswith("certificate INVALID\n")


@pytest.mark.parametrize("command", [["check"], ["explain"], ["design"], ["crosscheck"], ["fdim"], ["canonical"],
                                     ["audit", "--queries", TINY], ["equiv", TINY], ["verify-certificate", TINY]])
def test_bad_input_exits_2_in_one_line(capsys, tmp_path, command):
    missing = str(tmp_path / "missing.json")
    status, out, err = run(capsys, [command[0], missing, *command[1:]] if command[0] != "verify-certificate"
                           else [*command, missing])
    assert status == 2 and out == "" and err.count("\n") == 1 and "missing.json" in err and "Traceback" not in err


@pytest.mark.parametrize("command, module, function", [
    (["fdim", TINY], "exactident.symmetry.fdim", "functional_dimension"),
    (["design", TINY], "exactident.explain.design_command", "design"),
    (["audit", TINY, "--queries", TINY], "exactident.symmetry.audit", "audit"),
    (["canonical", TINY], "exactident.symmetry.canonical", "canonical_form"),
])
def test_a_bug_exits_70(capsys, monkeypatch, command, module, function):
    def boom(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(sys.modules[module] if module in sys.modules else __import__(module, fromlist=["_"]),
                        function, boom)
    status, out, err = run(capsys, command)
    assert status == 70 and out == "" and err == "internal error: RuntimeError: boom\n"


@pytest.mark.parametrize("command", [["fdim", IRIS, "--regions", "0"], ["audit", IRIS, "--queries", IRIS]])
def test_a_timeout_that_runs_out_is_an_answer(capsys, command):
    if not hasattr(os, "fork"):
        pytest.skip("needs fork")
    status, out, err = run(capsys, [*command, "--timeout", "0.05", "--json"])
    obj = json.loads(out)
    assert status == 0 and obj["timed_out"] is True and obj["reason"].startswith("time budget exhausted at "), err


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".exactident-" in p.name)


def test_ctrl_c_exits_130_and_writes_nothing(capsys, monkeypatch, tmp_path):
    import exactident.explain.design_command as design_command

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(design_command, "design", interrupted)
    out_path = tmp_path / "new.json"
    status, out, err = run(capsys, ["design", TINY, "-o", str(out_path)])
    assert status == 130 and out == "" and err == "interrupted\n"
    assert not out_path.exists() and _leftovers(tmp_path) == []


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_while_writing_exits_130_and_keeps_the_old_file(capsys, monkeypatch, tmp_path, sig):
    # crosscheck --csv: the CSV is in its temporary file when standard output is written; a signal then
    # (Ctrl-C, or SIGTERM as a job scheduler sends it) removes the temporary file, leaves the old CSV
    import exactident.crosscheck.command as crosscheck_command

    csv = tmp_path / "out.csv"
    csv.write_text("GOOD", encoding="utf-8")

    def signalled(text):
        assert _leftovers(tmp_path) != []  # the new CSV is half-way: in its temporary file
        os.kill(os.getpid(), getattr(signal, sig))

    monkeypatch.setattr(crosscheck_command, "write_stdout", signalled)
    # a shell starts background jobs with SIGINT ignored (then Ctrl-C cannot reach them, nor this test's
    # signal): Python's own default, KeyboardInterrupt, as in a terminal
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        status, _, err = run(capsys, ["crosscheck", TINY, "--csv", str(csv)])
    finally:
        signal.signal(signal.SIGINT, previous)
    assert status == 130 and err == "interrupted\n"
    assert csv.read_text(encoding="utf-8") == "GOOD" and _leftovers(tmp_path) == []
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL or sig == "SIGINT"  # main() put it back


# ------------------------------------------------------------------ 16: numbers and widths

def test_long_numbers_are_a_float_and_a_digit_count(capsys, tmp_path):
    # N = 3797 * 10^92 + 348 has 96 digits and is 3.797...e95: its first four digits, then a 0
    N = 3797 * 10**92 + 348
    a, b = _net_case(tmp_path / "a.json", "a", 1), _net_case(tmp_path / "b.json", "b", 1, N)
    status, out, _ = run(capsys, ["equiv", a, b])
    assert status == 1 and "3.797e95 (96 digits)" in out and "..." not in out
    status, out, _ = run(capsys, ["equiv", a, b, "--json"])
    assert json.loads(out)["alignment"]["max_abs"] == str(N)  # every digit in --json


def test_approx_text_against_decimal():
    # an independent rounding: Decimal with 60 digits of precision, to 4 significant digits
    import random

    getcontext().prec = 60
    rng = random.Random(29)
    for _ in range(300):
        p = rng.randint(1, 10 ** rng.randint(1, 120)) * rng.choice((1, -1))
        q = rng.randint(1, 10 ** rng.randint(0, 120))
        d = Decimal(p) / Decimal(q)
        expected = Decimal(f"{d:.3e}")
        got = Decimal(approx_text(p, q))
        assert got == expected, (p, q, got, expected)
    assert short_text("-" + "7" * 80) == "-7.778e79 (80 digits)"
    # (10^40 - 1)/9 over (10^41 - 1)/3 is about 1/30; plain notation down to 1e-4
    assert short_text("1" * 40 + "/" + "3" * 41) == "0.03333 (a 40/41-digit fraction)"


def test_layer_graph_reports_show_the_users_widths(capsys, tmp_path):
    # residual-mlp.json: input_shape [2], fc1 weight 3 x 2, fc2 2 x 3 (+ the input: res is 2 wide), head 1 x 2;
    # the compiler carries the 2 inputs up through layer 1 with 2 carrier units (compiled widths 2, 5, 2, 1)
    users = [2, 3, 2, 1]
    status, out, _ = run(capsys, ["check", "--json", "--no-numeric", RESIDUAL])
    report = json.loads(out)
    assert status == 0 and report["widths"] == users
    (tmp_path / "r.json").write_text(out)
    assert run(capsys, ["verify-certificate", RESIDUAL, str(tmp_path / "r.json")])[0] == 0
    report["widths"] = [2, 5, 2, 1]  # the compiled widths are not the network's
    (tmp_path / "bad.json").write_text(json.dumps(report))
    assert run(capsys, ["verify-certificate", RESIDUAL, str(tmp_path / "bad.json")])[0] == 3
    for command in (["fdim", RESIDUAL, "--regions", "0", "--lines", "4"], ["audit", RESIDUAL, "--queries", RESIDUAL]):
        status, out, err = run(capsys, [*command, "--json"])
        assert status == 0 and json.loads(out)["widths"] == users, err
