"""Resource limits on input (docs/case-format.md, "Limits"): checked before any work, one line, exit 2.

Small limits keep the tests fast: what matters is that a file over the size
limit is refused from its size (a device or a FIFO from its type, unread), before JSON parsing,
and that a case over its digit budget is refused at
the field that crosses it, before the big integer is built.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from decimal import Decimal

import pytest

from exactident.cli import main
from exactident.errors import CaseFormatError, ExactIdentError
from exactident.io import case as case_module
from exactident.io.case import load_case, parse_case, read_json
from exactident.io.limits import DEFAULT_LIMITS, DigitBudget, ReadLimits, parse_size, read_bounded
from exactident.io.rationals import parse_number
from exactident.io.report_file import read_report_json

BASE = {"format": "exactident-case/1", "name": "t", "widths": [1, 1, 1], "weights": [[["2"]], [["3"]]],
        "biases": [["1"], ["0"]], "sample": [["0"], ["1"], ["-1/2"]]}


def _write(tmp_path, obj, name="c.json"):
    path = tmp_path / name
    path.write_text(json.dumps(obj))
    return path


def test_big_file_with_an_error_at_the_end_is_refused_before_parsing(tmp_path, monkeypatch):
    obj = dict(BASE, sample=[["1"]] * 2000 + [[True]])  # the only error is the last entry
    path = _write(tmp_path, obj)
    size = path.stat().st_size
    assert size > 10_000

    def no_parse(*args, **kwargs):
        raise AssertionError("the file was parsed")

    monkeypatch.setattr(case_module.json, "loads", no_parse)
    with pytest.raises(CaseFormatError, match=r"c\.json: file is larger than the limit of 10000 bytes "
                                              r"\(raise it with --max-file-size\)"):
        load_case(path, ReadLimits(max_bytes=10_000))
    monkeypatch.undo()
    with pytest.raises(CaseFormatError, match=r"sample\[2000\]\[0\]: expected a number, found true"):
        load_case(path, ReadLimits(max_bytes=size))  # at the limit it is read, and the error is found


def test_the_limit_is_inclusive(tmp_path):
    path = _write(tmp_path, BASE)
    size = path.stat().st_size
    assert load_case(path, ReadLimits(max_bytes=size)).n_samples == 3
    with pytest.raises(CaseFormatError, match="larger than the limit"):
        load_case(path, ReadLimits(max_bytes=size - 1))


def test_dev_zero_is_refused_without_reading():
    with pytest.raises(CaseFormatError, match=r"/dev/zero: not a regular file \(a character device\): refused"):
        read_json("/dev/zero", ReadLimits(max_bytes=1024))


def test_dev_zero_on_the_command_line_exits_2(capsys):
    assert main(["check", "--max-file-size", "64K", "/dev/zero"]) == 2
    err = capsys.readouterr().err
    assert err == "error: /dev/zero: not a regular file (a character device): refused without reading it\n"


def test_a_pipe_is_refused_and_not_a_byte_is_read():
    # A pipe holding 20,000 bytes, named through /proc: refused from stat, all 20,000 bytes still there.
    r, w = os.pipe()
    try:
        os.write(w, b"x" * 20_000)
        os.close(w)
        with pytest.raises(CaseFormatError, match=r"not a regular file \(a FIFO\)"):
            read_bounded(f"/proc/self/fd/{r}", 5000)
        rest = b""
        while chunk := os.read(r, 65536):
            rest += chunk
        assert len(rest) == 20_000
    finally:
        os.close(r)


def _in_thread(fn):
    """Run ``fn`` in a thread; its result or exception, or "blocked" if it has not returned within 5 s."""
    out = {}

    def run():
        try:
            out["value"] = fn()
        except Exception as exc:
            out["value"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(5)
    return out.get("value", "blocked")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_with_no_writer_is_refused_without_blocking(tmp_path, capsys):
    """Opening a FIFO for reading waits for a writer forever: it must be refused from stat alone, as a case,
    a report, a model and a sample."""
    import numpy as np

    from exactident.io.importers.load import import_model

    fifo = tmp_path / "case.fifo"
    os.mkfifo(fifo)
    model = tmp_path / "m.npz"
    np.savez(model, W1=np.ones((1, 1)))
    for fn in (lambda: load_case(fifo), lambda: read_report_json(str(fifo)), lambda: import_model(fifo),
               lambda: import_model(model, fifo), lambda: import_model(fifo, fmt="keras")):
        result = _in_thread(fn)
        assert isinstance(result, CaseFormatError), result
        assert "case.fifo: not a regular file (a FIFO): refused without reading it" in str(result)
    result = _in_thread(lambda: main(["check", str(fifo)]))
    assert result == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_reports_are_read_within_the_limit_too(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"name": "t", "pad": "x" * 5000}))
    with pytest.raises(CaseFormatError, match=r"r\.json: file is larger than the limit of 1000 bytes"):
        read_report_json(str(path), 1000)
    assert read_report_json(str(path), 6000)["name"] == "t"


def test_unreadable_and_directory(tmp_path):
    with pytest.raises(CaseFormatError, match=r"cannot read file \(No such file or directory\)"):
        read_bounded(tmp_path / "missing.json", 100)
    with pytest.raises(CaseFormatError, match=r"cannot read file \(Is a directory\)"):
        read_bounded(tmp_path, 100)


def test_digit_budget_counts_exponents_before_building_the_integer():
    # "1e3999" is 6 characters but 4000 digits as an exact integer: 3 of them pass a 10,000-digit
    # budget (12,000 > 10,000 at the third), with the field named.
    obj = dict(BASE, sample=[["1e3999"], ["1e3999"], ["1e3999"]])
    with pytest.raises(CaseFormatError, match=r"sample\[2\]\[0\]: the numbers so far have 12\d{3} digits, "
                                              r"more than the limit of 10000 for one case \(raise it with "
                                              r"--max-digits\)"):
        parse_case(obj, "a.json", ReadLimits(max_digits=10_000))
    assert parse_case(obj, "a.json", ReadLimits(max_digits=13_000)).X[0][0] == 10**3999


@pytest.mark.parametrize("value, digits", [
    ("12/345", 5), ("-7", 1), (Decimal("0.25"), 4), (Decimal("1E+5"), 6), ("1.5e-3", 6), (123456, 6),
])
def test_digits_charged_per_number(value, digits):
    budget = DigitBudget(DEFAULT_LIMITS, "a.json")
    parse_number(value, "a.json", "f", budget)
    assert budget.used == digits


def test_per_number_limit_can_be_raised():
    big = "7" * 5000
    obj = dict(BASE, sample=[[big], ["1"], ["-1/2"]])
    with pytest.raises(CaseFormatError, match=r"sample\[0\]\[0\]: more than 4000 digits"):
        parse_case(obj, "a.json")
    case = parse_case(obj, "a.json", ReadLimits(max_number_digits=5000))
    assert case.X[0][0] == int(big[:2000]) * 10**3000 + int(big[2000:])
    with pytest.raises(CaseFormatError, match=r"exponent beyond ±4000"):
        parse_case(dict(BASE, sample=[["1e4500"]]), "a.json")
    assert parse_case(dict(BASE, sample=[["1e4500"]]), "a.json", ReadLimits(max_number_digits=5000)).X[0][0] \
        == 10**4500


def test_huge_in_memory_integer_is_refused_with_a_short_message():
    # 10^5000 is 1.000e5000: shown as its float and digit count, never cut in the middle
    with pytest.raises(CaseFormatError, match=r"more than 4000 digits in 1e5000 \(5001 digits\)"):
        parse_number(10**5000, "a.json", "w")


@pytest.mark.parametrize("field, value", [("max_bytes", 0), ("max_digits", -1), ("max_number_digits", True)])
def test_read_limits_must_be_positive_integers(field, value):
    with pytest.raises(ExactIdentError, match=rf"ReadLimits\.{field} must be a positive integer"):
        ReadLimits(**{field: value})


@pytest.mark.parametrize("text", ["0", "-5", "12X", "", "1.5M", "99999999999999999999"])
def test_bad_sizes_are_usage_errors(text, capsys):
    with pytest.raises(argparse.ArgumentTypeError, match="expected a size like 64M"):
        parse_size(text)
    assert main(["check", "--max-file-size", text, "x.json"]) == 2
    assert "expected a size like 64M" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--max-digits", "--max-number-digits"])
def test_bad_digit_limits_are_usage_errors(option, capsys):
    assert main(["check", option, "0", "x.json"]) == 2
    assert "expected a positive integer, found '0'" in capsys.readouterr().err


def test_cli_flags_reach_every_reader(tmp_path, capsys):
    path = _write(tmp_path, dict(BASE, sample=[["1e3999"], ["1"], ["-1/2"]]))
    assert main(["check", "--no-numeric", "--max-digits", "100", str(path)]) == 2
    assert "more than the limit of 100 for one case" in capsys.readouterr().err
    assert main(["crosscheck", "--max-digits", "100", str(path)]) == 2
    assert "more than the limit of 100 for one case" in capsys.readouterr().err
    report = tmp_path / "r.json"
    report.write_text("{}")
    assert main(["verify-certificate", "--max-digits", "100", str(path), str(report)]) == 2
    assert "more than the limit of 100 for one case" in capsys.readouterr().err
    assert main(["verify-certificate", "--max-file-size", "1", str(_write(tmp_path, BASE, "d.json")),
                 str(report)]) == 2
    assert "d.json: file is larger than the limit of 1 bytes" in capsys.readouterr().err
