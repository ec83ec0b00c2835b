"""Output safety (SPEC §5): atomic writes, never clobbering inputs or special files, clean errors.

Expectations come from SPEC §5 and POSIX file semantics: an atomic write is a
temp file + rename beside the *real* file (a symlink stays a link, its target
gets the data); a FIFO or device cannot be renamed over without destroying it,
so it is written in place; an output that is also an input is bad usage
(exit 2); a failed write is an error (exit 1) and leaves good files as they
were.  Nothing here touches /dev.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
from pathlib import Path

import pytest

from exactident.check import check
from exactident.cli import main
from exactident.io.atomic import atomic_write_bytes, atomic_write_text
from exactident.io.case import parse_case
from exactident.io.report import escape_nonprintable, render_table, reports_to_json

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo") or not hasattr(os, "symlink"),
                                reason="POSIX file semantics")


def _case_obj(name, sample=("0", "1", "-1")):
    # SPEC §2: f = 3 relu(2x + 1); samples 0, 1, -1 give rank 3 = dim (identifiable).
    return {"format": "exactident-case/1", "name": name, "widths": [1, 1, 1],
            "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]], "sample": [[s] for s in sample]}


def _write_case(path, name, sample=("0", "1", "-1")):
    path.write_text(json.dumps(_case_obj(name, sample)), encoding="utf-8")
    return path


def _hidden(folder):
    return sorted(p.name for p in Path(folder).iterdir() if p.name.startswith("."))


# --- atomic.py -------------------------------------------------------------------------------


def test_symlink_stays_a_link_and_its_target_gets_the_data(tmp_path):
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    real = real_dir / "out.txt"
    real.write_text("OLD", encoding="utf-8")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    atomic_write_text(link, "NEW")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text(encoding="utf-8") == "NEW"
    assert _hidden(tmp_path) == [] and _hidden(real_dir) == []  # no temp file left anywhere


def test_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "link.csv"
    link.symlink_to(tmp_path / "new.csv")
    atomic_write_bytes(link, b"a,b\n")
    assert link.is_symlink() and (tmp_path / "new.csv").read_bytes() == b"a,b\n"


def test_failed_write_through_symlink_leaves_target(tmp_path, monkeypatch):
    real = tmp_path / "real.txt"
    real.write_text("GOOD", encoding="utf-8")
    link = tmp_path / "link.txt"
    link.symlink_to(real)

    def boom(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="No space"):
        atomic_write_text(link, "NEW")
    assert link.is_symlink() and real.read_text(encoding="utf-8") == "GOOD" and _hidden(tmp_path) == []


def test_existing_file_keeps_its_permissions(tmp_path):
    f = tmp_path / "f.txt"
    f.write_text("x", encoding="utf-8")
    os.chmod(f, 0o640)
    atomic_write_text(f, "y")
    assert stat.S_IMODE(os.stat(f).st_mode) == 0o640 and f.read_text(encoding="utf-8") == "y"


def _read_fifo(path, out):
    with open(path, "rb") as fh:
        out.append(fh.read())


@pytest.mark.parametrize("via_link", [False, True])
def test_fifo_is_written_in_place_not_replaced(tmp_path, via_link):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    target = fifo
    if via_link:
        target = tmp_path / "pipe-link"
        target.symlink_to(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=_read_fifo, args=(fifo, got), daemon=True)
    reader.start()
    atomic_write_text(target, "through the pipe\n")
    reader.join(timeout=10)
    assert got == [b"through the pipe\n"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still a FIFO, not a regular file
    assert not via_link or target.is_symlink()
    assert _hidden(tmp_path) == []


def test_magic_link_to_a_pipe_is_written_in_place(tmp_path):
    """/proc/self/fd/N of a pipe resolves to no real path (``pipe:[...]``): it must still be written."""
    r, w = os.pipe()
    try:
        path = f"/proc/self/fd/{w}"
        if not os.path.exists(path):
            pytest.skip("no /proc/self/fd")
        atomic_write_text(path, "piped\n")  # well under the pipe buffer: no reader needed
        assert os.read(r, 100) == b"piped\n"
    finally:
        os.close(r)
        os.close(w)


# --- crosscheck outputs ----------------------------------------------------------------------


def test_csv_onto_an_input_case_is_refused(tmp_path, capsys):
    case = _write_case(tmp_path / "x.json", "x")
    before = case.read_bytes()
    link = tmp_path / "alias.csv"
    link.symlink_to(case)
    for out in (case, link):
        assert main(["crosscheck", str(case), "--csv", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(out) in err and "input case file" in err
    assert main(["crosscheck", str(tmp_path), "--csv", str(case)]) == 2  # input given as a folder
    assert case.read_bytes() == before


def test_jsonl_onto_an_input_case_is_refused(tmp_path, capsys):
    """``check --jsonl`` truncates its file first: naming an input case (or a link to it) would destroy it."""
    case = _write_case(tmp_path / "x.json", "x")
    before = case.read_bytes()
    link = tmp_path / "alias.jsonl"
    link.symlink_to(case)
    for out in (case, link):
        assert main(["check", str(case), "--no-numeric", "--jsonl", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--jsonl: is also an input of this command" in err
    assert case.read_bytes() == before
    assert main(["check", str(case), "--jsonl", str(tmp_path / "no-such-dir" / "r.jsonl")]) == 2
    assert "--jsonl: cannot write (no such directory)" in capsys.readouterr().err


def test_import_onto_its_own_model_or_sample_is_refused(tmp_path, capsys):
    """``import -o`` naming the model or the sample would replace the trained network by a case file."""
    import numpy as np

    np.savez(tmp_path / "m.npz", W1=np.array([[2.0]]), b1=np.array([1.0]), W2=np.array([[3.0]]), b2=np.array([0.0]))
    np.save(tmp_path / "X.npy", np.array([[0.0], [1.0]]))
    for target, what in ((tmp_path / "m.npz", "MODEL"), (tmp_path / "X.npy", "--sample")):
        before = target.read_bytes()
        assert main(["import", str(tmp_path / "m.npz"), "--sample", str(tmp_path / "X.npy"), "-o", str(target)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"-o: is also the input {what}; refusing to overwrite it" in err
        assert target.read_bytes() == before


def test_csv_and_plot_naming_one_file_is_refused(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    case = _write_case(tmp_path / "x.json", "x")
    out = tmp_path / "o.png"
    assert main(["crosscheck", str(case), "--csv", str(out), "--plot", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--plot" in err and not out.exists()


def test_bad_plot_format_refused_before_any_work(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    import exactident.crosscheck.command as cc

    case = _write_case(tmp_path / "x.json", "x")
    good = tmp_path / "good.csv"
    good.write_text("GOOD", encoding="utf-8")

    def no_work(*a, **k):
        raise AssertionError("computation started before the --plot format was checked")

    monkeypatch.setattr(cc, "crosscheck_case", no_work)
    assert main(["crosscheck", str(case), "--csv", str(good), "--plot", str(tmp_path / "bad.xyz")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.xyz" in err and "--plot" in err and "'xyz'" in err
    assert good.read_text(encoding="utf-8") == "GOOD"


def test_failing_plot_leaves_existing_csv(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    import exactident.crosscheck.plot as plot

    case = _write_case(tmp_path / "x.json", "x")
    good = tmp_path / "good.csv"
    good.write_text("GOOD", encoding="utf-8")

    def broken(*a, **k):
        raise RuntimeError("renderer broke")

    monkeypatch.setattr(plot, "render_case", broken)
    # an unexpected exception is a bug: internal error, exit 70, nothing replaced
    assert main(["crosscheck", str(case), "--csv", str(good), "--plot", str(tmp_path / "p.png")]) == 70
    assert good.read_text(encoding="utf-8") == "GOOD" and not (tmp_path / "p.png").exists()


def test_write_error_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    case = _write_case(tmp_path / "x.json", "x")
    out = tmp_path / "o.csv"
    out.write_text("GOOD", encoding="utf-8")

    def full(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    assert main(["crosscheck", str(case), "--csv", str(out)]) == 2
    assert capsys.readouterr().err == f"error: cannot write {out}: No space left on device\n"
    assert out.read_text(encoding="utf-8") == "GOOD" and _hidden(tmp_path) == []


class _FullStdout:
    def write(self, text):
        raise OSError(28, "No space left on device")

    def flush(self):
        pass


@pytest.mark.parametrize("command", [["check", "--no-numeric"], ["crosscheck"]])
def test_stdout_write_error_is_one_line_exit_2(tmp_path, capsys, monkeypatch, command):
    case = _write_case(tmp_path / "x.json", "x")
    monkeypatch.setattr(sys, "stdout", _FullStdout())
    assert main([command[0], str(case), *command[1:]]) == 2
    monkeypatch.undo()
    assert capsys.readouterr().err == "error: cannot write <stdout>: No space left on device\n"


def test_duplicate_case_name_names_both_files(tmp_path, capsys):
    a = _write_case(tmp_path / "a.json", "same")
    b = _write_case(tmp_path / "b.json", "same", ("0", "1", "2"))
    assert main(["crosscheck", str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(a) in err and str(b) in err and "'same'" in err


def test_progress_without_a_tty_is_one_line_per_case(tmp_path, capsys):
    for name in ("p", "q", "r"):
        _write_case(tmp_path / f"{name}.json", name)
    assert main(["crosscheck", str(tmp_path)]) == 0
    err = capsys.readouterr().err  # capsys's stderr is not a tty
    assert "\r" not in err
    lines = err.splitlines()
    assert len(lines) == 3 and [ln.split()[0] for ln in lines] == ["[1/3]", "[2/3]", "[3/3]"]


# --- cli ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["0", "-3", "2.5", "many"])
def test_max_resolutions_must_be_a_positive_integer(tmp_path, capsys, value):
    case = _write_case(tmp_path / "x.json", "x")
    assert main(["check", str(case), f"--max-resolutions={value}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--max-resolutions" in err and "positive integer" in err


def test_max_resolutions_one_is_accepted(tmp_path, capsys):
    case = _write_case(tmp_path / "x.json", "x")
    assert main(["check", str(case), "--max-resolutions", "1", "--no-numeric"]) == 0


# --- report: control characters --------------------------------------------------------------


EVIL = "evil\x1b[2J\x07name\nsecond"


def test_table_escapes_control_characters_json_keeps_them():
    report = check(parse_case(_case_obj(EVIL)), numeric=False)
    table = render_table([report])
    assert "\x1b" not in table and "\x07" not in table
    assert r"evil\x1b[2J\x07name\nsecond" in table
    assert all(not line.startswith("second") for line in table.splitlines())  # no injected line
    assert json.loads(reports_to_json([report], as_list=False))["name"] == EVIL


def test_crosscheck_text_escapes_control_characters(tmp_path, capsys):
    _write_case(tmp_path / "a.json", EVIL)
    _write_case(tmp_path / "b.json", "plain", ("0", "1", "2"))
    assert main(["crosscheck", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and r"evil\x1b[2J" in out


@pytest.mark.parametrize("text,expected", [
    ("plain é name", "plain é name"),      # printable (non-ASCII too) unchanged
    ("a\tb", "a\\tb"),
    ("\x9b31m", "\\x9b31m"),              # the 8-bit CSI is a control character too
])
def test_escape_nonprintable(text, expected):
    assert escape_nonprintable(text) == expected
