"""Outputs under faults (docs/cli.md, "Output files"): killed writers, failing renames, bad targets.

Expectations from POSIX semantics and the documented protocol: temporary files
are written and fsynced first, then renamed together; a failure before the
renames replaces nothing; SIGTERM/SIGINT remove the temporary files and the
process still dies by the signal; SIGKILL can leave only files named
``.<target>.<random>.exactident-tmp`` (hidden, never ``*.json``/``*.csv``),
never a half-written target.
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

from exactident.cli import main
from exactident.errors import OutputError
from exactident.io import atomic
from exactident.io.atomic import TEMP_SUFFIX, write_outputs

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL") or not hasattr(os, "symlink"), reason="POSIX")

ROOT = Path(__file__).resolve().parents[1]

# A writer in a child process: it writes its outputs slowly (so a signal lands mid-write) and says
# when it has started.  MODE "path" uses atomic_path (a temporary file being filled); MODE "outputs"
# uses write_outputs, sleeping in last_step (all temporary files written, nothing renamed yet).
WRITER = r"""
import signal, sys, time
from exactident.io.atomic import atomic_path, write_outputs
# Ctrl-C as on a terminal: a job started with `&` by a non-interactive shell inherits SIGINT ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)
mode, a, b = sys.argv[1], sys.argv[2], sys.argv[3]
if mode == "path":
    with atomic_path(a) as tmp, open(tmp, "wb") as fh:
        fh.write(b"NEW-HALF")
        fh.flush()
        print("writing", flush=True)
        for _ in range(600):
            fh.write(b"x" * 1000)
            time.sleep(0.05)
else:
    def wait():
        print("writing", flush=True)
        time.sleep(30)
    write_outputs([(a, b"NEW-A"), (b, b"NEW-B")], last_step=wait)
print("finished", flush=True)
"""


def _start(mode, a, b):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-c", WRITER, mode, str(a), str(b)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, text=True)
    line = proc.stdout.readline()
    assert line == "writing\n", proc.stderr.read()
    return proc


def _leftovers(folder):
    return sorted(p.name for p in Path(folder).iterdir() if p.name.startswith("."))


@pytest.mark.parametrize("mode", ["path", "outputs"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_or_sigint_mid_write_leaves_old_outputs_and_no_temporary_file(tmp_path, mode, sig):
    a, b = tmp_path / "a.csv", tmp_path / "b.png"
    a.write_bytes(b"OLD-A")
    proc = _start(mode, a, b)
    assert _leftovers(tmp_path)  # a temporary file exists while writing
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert "finished" not in out
    if sig == signal.SIGTERM:
        assert proc.returncode == -signal.SIGTERM  # it still dies by the signal
    else:
        assert proc.returncode != 0 and "KeyboardInterrupt" in err
    assert a.read_bytes() == b"OLD-A" and not b.exists()
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("mode", ["path", "outputs"])
def test_sigkill_mid_write_leaves_only_recognisable_temporary_files(tmp_path, mode):
    a, b = tmp_path / "a.json", tmp_path / "b.csv"
    a.write_bytes(b"OLD-A")
    proc = _start(mode, a, b)
    proc.kill()
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert a.read_bytes() == b"OLD-A" and not b.exists()  # targets never half-written
    left = _leftovers(tmp_path)
    assert left and all(name.endswith(TEMP_SUFFIX) for name in left)
    assert sorted(p.name for p in tmp_path.glob("*.json")) == ["a.json"]  # never taken for an output
    assert sorted(p.name for p in tmp_path.glob("*.csv")) == []


def _case(path, name):
    path.write_text(json.dumps({"format": "exactident-case/1", "name": name, "widths": [1, 1, 1],
                                "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]],
                                "sample": [["0"], ["1"], ["-1"]]}))
    return path


def test_crosscheck_killed_at_any_moment_never_mixes_old_and_new_outputs(tmp_path):
    # A real run with --csv and --json to stdout is killed (SIGTERM) after increasing delays: each time the
    # CSV is either the old one or the complete new one, and no temporary file is left.
    folder = tmp_path / "suite"
    folder.mkdir()
    for k in range(3):
        _case(folder / f"c{k}.json", f"c{k}")
    csv = tmp_path / "out.csv"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "exactident", "crosscheck", str(folder), "--csv", str(csv)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    new = csv.read_bytes()
    for delay in (0.2, 0.6, 1.0, 1.5, 2.5):
        csv.write_bytes(b"OLD")
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        assert csv.read_bytes() in (b"OLD", new)
        assert _leftovers(tmp_path) == [] and _leftovers(folder) == []


def test_a_failing_rename_rolls_back_the_earlier_ones(tmp_path, monkeypatch):
    a, b, c = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "c.png"
    a.write_bytes(b"OLD-A")
    c.write_bytes(b"OLD-C")
    real_replace = os.replace
    calls = []

    def replace(src, dst):
        calls.append(Path(dst).name)
        if len(calls) == 3 and str(src).endswith(TEMP_SUFFIX):  # the third output's rename fails
            raise OSError(28, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(atomic.os, "replace", replace)
    with pytest.raises(OutputError, match=r"cannot write .*c\.png: No space left on device"):
        write_outputs([(str(a), b"NEW-A"), (str(b), b"NEW-B"), (str(c), b"NEW-C")])
    assert a.read_bytes() == b"OLD-A" and not b.exists() and c.read_bytes() == b"OLD-C"
    assert _leftovers(tmp_path) == []


def test_a_failing_last_step_replaces_nothing(tmp_path):
    a = tmp_path / "a.csv"
    a.write_bytes(b"OLD")

    def stdout_broken():
        raise OutputError("<stdout>", OSError(32, "Broken pipe"))

    with pytest.raises(OutputError, match="<stdout>: Broken pipe"):
        write_outputs([(str(a), b"NEW")], last_step=stdout_broken)
    assert a.read_bytes() == b"OLD" and _leftovers(tmp_path) == []


def test_crosscheck_plot_failing_to_write_leaves_the_csv(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    case = _case(tmp_path / "x.json", "x")
    csv = tmp_path / "good.csv"
    csv.write_bytes(b"GOOD")
    real_mkstemp = atomic.tempfile.mkstemp

    def mkstemp(prefix="", suffix="", dir=None):
        if prefix.startswith(".p.png"):
            raise OSError(28, "No space left on device")
        return real_mkstemp(prefix=prefix, suffix=suffix, dir=dir)

    monkeypatch.setattr(atomic.tempfile, "mkstemp", mkstemp)
    assert main(["crosscheck", str(case), "--csv", str(csv), "--plot", str(tmp_path / "p.png")]) == 2
    assert capsys.readouterr().err.endswith("p.png: No space left on device\n")
    assert csv.read_bytes() == b"GOOD" and not (tmp_path / "p.png").exists() and _leftovers(tmp_path) == []


def test_crosscheck_stdout_failing_leaves_the_csv(tmp_path, capsys, monkeypatch):
    case = _case(tmp_path / "x.json", "x")
    csv = tmp_path / "good.csv"
    csv.write_bytes(b"GOOD")

    class Full:
        def write(self, text):
            raise OSError(28, "No space left on device")

        def flush(self):
            pass

    monkeypatch.setattr(sys, "stdout", Full())
    assert main(["crosscheck", str(case), "--csv", str(csv)]) == 2
    monkeypatch.undo()
    assert capsys.readouterr().err == "error: cannot write <stdout>: No space left on device\n"
    assert csv.read_bytes() == b"GOOD" and _leftovers(tmp_path) == []


def test_symlink_loop_as_csv_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    import exactident.crosscheck.command as cc

    case = _case(tmp_path / "x.json", "x")
    loop = tmp_path / "loop.csv"
    loop.symlink_to(tmp_path / "loop.csv")

    def no_work(*a, **k):
        raise AssertionError("computation started before the output was checked")

    monkeypatch.setattr(cc, "crosscheck_case", no_work)
    assert main(["crosscheck", str(case), "--csv", str(loop)]) == 2
    assert capsys.readouterr().err == (f"error: {loop}: --csv: cannot write (Too many levels of symbolic "
                                       "links)\n")


def test_unwritable_directory_is_refused_before_any_work(tmp_path, capsys):
    if os.geteuid() == 0:
        pytest.skip("root writes anywhere")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        assert main(["crosscheck", str(_case(tmp_path / "x.json", "x")), "--csv", str(ro / "o.csv")]) == 2
        assert "no permission to create files" in capsys.readouterr().err
    finally:
        ro.chmod(0o700)


def test_crosscheck_json_is_byte_reproducible_without_timings(tmp_path, capsys):
    case = _case(tmp_path / "x.json", "x")
    outs = []
    for _ in range(2):
        assert main(["crosscheck", "--json", str(case)]) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] and '"seconds"' not in outs[0]
    assert main(["crosscheck", "--json", "--timings", str(case)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert isinstance(data["cases"][0]["seconds"], float)
