"""``exactident suite run`` and ``check --expect``: agreement, corrupted expectations, resume, Dask.

The suites here are generated into tmp folders; a corrupted ``expected``
value must be caught (exit 3), an interrupted run must resume without
recomputing what it finished, and the Dask paths (LocalCluster, existing
scheduler, a worker that crashes) must give the same results as ``--jobs 1``.
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
from exactident.suites import run as run_module
from exactident.suites.run import check_case_text, run_suite

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    out = tmp_path_factory.mktemp("suite") / "s"
    for family, widths in [("generic", "2,2,1"), ("boundary", "2,2,2,1"), ("gap", "2,2,2"), ("degenerate", "1,2,1"),
                           ("float32-trap", "1,2,1")]:
        assert main(["generate", "--family", family, "--widths", widths, "--count", "2", "--out", str(out)]) == 0
    return out


def _copy(src: Path, dst: Path) -> Path:
    for p in src.rglob("*"):
        if p.is_file():
            (dst / p.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
            (dst / p.relative_to(src)).write_bytes(p.read_bytes())
    return dst


def _corrupt(path: Path, field: str, value) -> None:
    obj = json.loads(path.read_text())
    obj["expected"][field] = value
    path.write_text(json.dumps(obj))


def test_a_generated_suite_agrees(suite, capsys):
    assert main(["suite", "run", str(suite), "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "10 cases: 10 agree, 0 differ, 0 errors (in-process" in out
    assert "compared fields: verdict, rank_gamma, rank_a, dim, on_boundary, n_ties, degenerate" in out


@pytest.mark.parametrize(("field", "delta"), [("rank_gamma", 1), ("verdict", "identifiable-ish"), ("n_ties", 5)])
def test_a_corrupted_expected_value_exits_3(suite, tmp_path, capsys, field, delta):
    s = _copy(suite, tmp_path / "s")
    victim = sorted((s / "gap").glob("*.json"))[0]
    value = json.loads(victim.read_text())["expected"][field]
    bad = value + delta if isinstance(delta, int) else delta
    _corrupt(victim, field, bad)
    assert main(["suite", "run", str(s), "--jobs", "1"]) == 3
    out = capsys.readouterr().out
    assert f"gap/{victim.name}: {field}: expected {json.dumps(bad)}, got {json.dumps(value)}" in out
    assert "10 cases: 9 agree, 1 differ" in out
    assert main(["check", "--expect", "--no-numeric", str(victim)]) == 3
    assert f"{field}: expected {json.dumps(bad)}, got {json.dumps(value)}" in capsys.readouterr().err


def test_fields_option_limits_the_comparison(suite, tmp_path, capsys):
    s = _copy(suite, tmp_path / "s")
    _corrupt(sorted((s / "generic").glob("*.json"))[0], "rank_a", 999)
    assert main(["suite", "run", str(s), "--jobs", "1", "--fields", "verdict,rank_gamma"]) == 0
    assert main(["suite", "run", str(s), "--jobs", "1"]) == 3
    capsys.readouterr()


def test_check_expect_on_single_files(suite, capsys):
    files = [str(p) for p in sorted(suite.rglob("*-000.json"))]
    assert main(["check", "--expect", "--no-numeric", *files]) == 0
    assert "5 case(s) agree" in capsys.readouterr().err
    # a hand-written case with a partial expected block (verdict, on_boundary: SPEC's worked example)
    assert main(["check", "--expect", str(ROOT / "cases" / "tiny-111-kink.json")]) == 0
    capsys.readouterr()


def test_check_expect_needs_an_expected_block(tmp_path, capsys):
    obj = json.loads((ROOT / "cases" / "tiny-111-kink.json").read_text())
    del obj["expected"]
    (tmp_path / "c.json").write_text(json.dumps(obj))
    assert main(["check", "--expect", str(tmp_path / "c.json")]) == 2
    assert "c.json: expected: missing: --expect needs" in capsys.readouterr().err


def test_results_file_has_one_keyed_line_per_case(suite, tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    assert main(["suite", "run", str(suite), "--jobs", "1", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 10 and len({r["key"] for r in rows}) == 10
    import hashlib

    for r in rows:
        assert r["key"] == hashlib.sha256((suite / r["file"]).read_bytes()).hexdigest()[:24]
        assert r["status"] == "agree" and r["report"]["verdict"] == json.loads((suite / r["file"]).read_text()
                                                                                  )["expected"]["verdict"]
    # --out again without --resume would mix two runs: refused
    assert main(["suite", "run", str(suite), "--jobs", "1", "--out", str(out)]) == 2
    assert "already holds results" in capsys.readouterr().err


class _Interrupt:
    def __init__(self, after: int):
        self.after, self.calls = after, 0

    def __call__(self, text, source):
        if self.calls == self.after:
            raise KeyboardInterrupt
        self.calls += 1
        return check_case_text(text, source)


def test_resume_after_an_interrupted_run_skips_finished_cases(suite, tmp_path):
    out = tmp_path / "r.jsonl"
    with pytest.raises(KeyboardInterrupt):
        run_suite(str(suite), jobs=1, out=str(out), work=_Interrupt(4), progress=lambda n, d: _Quiet())
    assert len(out.read_text().splitlines()) == 4
    with out.open("a") as fh:
        fh.write('{"format": "exactident-suite-result/1", "key": "torn')  # a write cut by the kill
    counter = _Interrupt(-1)
    result = run_suite(str(suite), jobs=1, out=str(out), resume=True, work=counter, progress=lambda n, d: _Quiet())
    assert counter.calls == 6 and result.resumed == 4 and result.ok and len(result.rows) == 10
    lines = out.read_text().splitlines()
    assert len(lines) == 10 and len({json.loads(line)["key"] for line in lines}) == 10


def test_resume_after_a_killed_process(tmp_path, monkeypatch, capsys):
    suite = ROOT / "cases" / "suite-v1"
    out = tmp_path / "r.jsonl"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "exactident", "suite", "run", str(suite), "--jobs", "1",
                             "--out", str(out)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and out.read_text().count("\n") >= 5:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.005)
    proc.wait()
    finished = {json.loads(line)["key"] for line in out.read_text().splitlines() if line.endswith("}")}
    total = len(list(suite.rglob("*.json"))) - 1
    calls = []
    monkeypatch.setattr(run_module, "check_case_text", lambda text, source: calls.append(source) or
                        check_case_text(text, source))
    assert main(["suite", "run", str(suite), "--jobs", "1", "--out", str(out), "--resume"]) == 0
    assert len(calls) == total - len(finished) and len(finished) >= 5
    keys = [json.loads(line)["key"] for line in out.read_text().splitlines()]
    assert len(keys) == total == len(set(keys))
    capsys.readouterr()


class _Quiet:
    def update(self, note=""):
        pass

    def close(self):
        pass


@pytest.mark.parametrize(("argv", "match"), [
    (["suite", "run", "nowhere"], r"nowhere: no such folder"),
    (["suite", "run", "{suite}", "--resume"], r"--resume: needs --out FILE"),
    (["suite", "run", "{suite}", "--fields", "verdict,colour"], r"unknown report field 'colour'"),
    (["suite", "run", "{suite}", "--jobs", "0"], r"positive integer"),
])
def test_bad_suite_run_usage_exits_2(suite, capsys, argv, match):
    assert main([a.replace("{suite}", str(suite)) for a in argv]) == 2
    assert __import__("re").search(match, capsys.readouterr().err)


def test_suite_cases_need_expected_and_unique_names(suite, tmp_path, capsys):
    s = _copy(suite, tmp_path / "s")
    victim = sorted((s / "gap").glob("*.json"))[0]
    obj = json.loads(victim.read_text())
    twin = dict(obj)
    (s / "gap" / "copy.json").write_text(json.dumps(twin))
    assert main(["suite", "run", str(s), "--jobs", "1"]) == 2
    assert "appears twice" in capsys.readouterr().err
    (s / "gap" / "copy.json").unlink()
    del obj["expected"]
    victim.write_text(json.dumps(obj))
    assert main(["suite", "run", str(s), "--jobs", "1"]) == 2
    assert "expected: missing" in capsys.readouterr().err


def test_worker_errors_are_recorded_not_fatal(suite):
    result = run_suite(str(suite), jobs=1, work=lambda text, source: {"error": "boom"}, progress=lambda n, d: _Quiet())
    assert not result.ok and {r["status"] for r in result.rows} == {"error"}
    assert check_case_text("{not json", "x.json")["error"].startswith("JSONDecodeError")


def _comparable(rows):
    return {r["key"]: (r["status"], r["report"]) for r in rows}


def test_dask_scheduler_gives_the_jobs_1_results(suite, capsys):
    distributed = pytest.importorskip("distributed")
    reference = run_suite(str(suite), jobs=1, progress=lambda n, d: _Quiet())
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        on_dask = run_suite(str(suite), scheduler=cluster.scheduler_address, progress=lambda n, d: _Quiet())
        assert main(["suite", "run", str(suite), "--scheduler", cluster.scheduler_address]) == 0
    assert on_dask.mode.startswith("dask scheduler") and _comparable(on_dask.rows) == _comparable(reference.rows)
    assert "10 cases: 10 agree" in capsys.readouterr().out


def test_dask_local_cluster_retries_a_crashed_worker(suite, tmp_path, monkeypatch):
    pytest.importorskip("distributed")
    import suite_crash

    monkeypatch.setenv("EXACTIDENT_TEST_CRASH_DIR", str(tmp_path))
    reference = run_suite(str(suite), jobs=1, progress=lambda n, d: _Quiet())
    result = run_suite(str(suite), jobs=2, work=suite_crash.crash_once, progress=lambda n, d: _Quiet())
    assert (tmp_path / "crashed").exists()  # a worker did die
    assert result.mode.startswith("dask LocalCluster, 2 worker processes started in") and result.ok
    assert _comparable(result.rows) == _comparable(reference.rows)


def test_without_dask_jobs_above_1_is_refused(suite, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import fails as if not installed
    assert main(["suite", "run", str(suite), "--jobs", "2"]) == 2
    assert "needs dask[distributed]" in capsys.readouterr().err
    assert main(["suite", "run", str(suite)]) == 0  # default jobs: falls back to this process, says so
    assert "note: dask[distributed] is not installed" in capsys.readouterr().out


def test_check_expect_refuses_a_misspelt_field(tmp_path, capsys):
    """A misspelt key (``rank_gama``) would compare nothing and pass: bad input instead, naming file and field."""
    obj = json.loads((ROOT / "cases" / "tiny-111-kink.json").read_text())
    obj["expected"]["rank_gama"] = 3
    (tmp_path / "c.json").write_text(json.dumps(obj))
    assert main(["check", "--expect", str(tmp_path / "c.json")]) == 2
    err = capsys.readouterr().err
    assert "c.json: expected.rank_gama: not a report field" in err and err.count("\n") == 1
