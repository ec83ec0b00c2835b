"""Time budget, stage progress, per-case JSON lines and the Monte Carlo mode (docs/cli.md).

No test measures time: a stage that never ends is simulated (a sleep), and what is
checked is the report the budget produces, and that the child's process group is gone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import flint
import pytest

import exactident.check  # noqa: F401  (the module; the package re-exports the function under the same name)
from exactident.budget import BudgetExhausted, listening, run_isolated, stage
from exactident.check import check
from exactident.cli import main
from exactident.errors import InvariantViolation
from exactident.io.case import Case, load_case
from exactident.model.network import Network

ROOT = Path(__file__).resolve().parent.parent
check_module = sys.modules["exactident.check.dense_route"]  # the MLP stages (rank_stage calls certify_ranks)


def tiny_case(samples=(0, 1, -1)) -> Case:
    net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])], [[flint.fmpq(1)], [flint.fmpq(0)]])
    return Case("tiny", net, [[flint.fmpq(s)] for s in samples])


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as fh:
            state = next(line for line in fh if line.startswith("State:"))
        return "Z" not in state.split()[1]
    except (FileNotFoundError, StopIteration):
        return False


def _stuck_ranks(pid_file: Path):
    def fake(*args, **kwargs):
        stage("ranks mod p", rows=3, cols=3)
        child = subprocess.Popen(["sleep", "120"])  # a grandchild in the analysis' process group
        pid_file.write_text(str(child.pid))
        time.sleep(120)
    return fake


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the hard budget needs fork")
def test_timeout_gives_inconclusive_and_kills_the_process_group(tmp_path, monkeypatch):
    pid_file = tmp_path / "pid"
    monkeypatch.setattr(check_module, "certify_ranks", _stuck_ranks(pid_file))
    seen = []
    r = check(tiny_case(), numeric=False, timeout=1.0, on_stage=lambda s, sizes: seen.append(s))
    assert r.verdict == "inconclusive"
    assert r.reason == "time budget exhausted at ranks mod p"
    d = r.to_dict()
    assert d["timed_out"] is True and d["stage"] == "ranks mod p"
    assert d["rank_gamma"] is None and d["rank_a"] is None and d["dim"] == 3
    assert seen[:2] == ["forward pass", "Gamma mod p"] or "forward pass" in seen
    for _ in range(50):  # SIGKILL is asynchronous
        if pid_file.exists() and not _alive(int(pid_file.read_text())):
            break
        time.sleep(0.1)
    assert pid_file.exists() and not _alive(int(pid_file.read_text()))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the hard budget needs fork")
def test_errors_in_the_child_are_raised_in_the_caller(monkeypatch):
    def broken(*args, **kwargs):
        raise InvariantViolation("planted")
    monkeypatch.setattr(check_module, "certify_ranks", broken)
    with pytest.raises(InvariantViolation, match="planted"):
        check(tiny_case(), numeric=False, timeout=60)


def test_in_process_budget_is_checked_between_stages():
    # without fork the budget is soft: stage() raises once the deadline has passed
    from exactident import budget

    budget._local.deadlines.append(time.monotonic() - 1)
    try:
        with pytest.raises(BudgetExhausted, match="time budget exhausted at kernel"):
            stage("kernel")
    finally:
        budget._local.deadlines.pop()
    with listening(lambda s, sizes: None):
        assert run_isolated(lambda: 42, None).value == 42


def test_check_reports_stages_and_same_verdict_in_a_child():
    seen = []
    r = check(tiny_case(), numeric=False, on_stage=lambda s, sizes: seen.append((s, sizes)))
    assert r.verdict == "identifiable" and seen[0][0] == "forward pass"
    if hasattr(os, "fork"):
        r2 = check(tiny_case(), numeric=False, timeout=120)
        assert (r2.verdict, r2.rank_gamma) == (r.verdict, r.rank_gamma)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the hard budget needs fork")
def test_cli_timeout_and_jsonl(tmp_path, monkeypatch, capsys):
    good = ROOT / "cases" / "tiny-111-kink-plus.json"
    jsonl = tmp_path / "out.jsonl"
    code = main(["check", "--json", "--no-numeric", "--jsonl", str(jsonl), str(good), str(good)])
    assert code == 0
    lines = jsonl.read_text().splitlines()
    assert len(lines) == 2
    printed = json.loads(capsys.readouterr().out)
    assert [json.loads(line) for line in lines] == printed  # the same reports, one per line
    pid_file = tmp_path / "pid"
    monkeypatch.setattr(check_module, "certify_ranks", _stuck_ranks(pid_file))
    code = main(["check", "--json", "--no-numeric", "--timeout", "1", str(good)])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["verdict"] == "inconclusive" and out["reason"] == "time budget exhausted at ranks mod p"


def test_cli_rejects_bad_budget_and_certify_values(capsys):
    good = str(ROOT / "cases" / "tiny-111-kink-plus.json")
    assert main(["check", "--timeout", "0", good]) == 2
    assert "expected a positive" in capsys.readouterr().err
    assert main(["check", "--certify", "maybe", good]) == 2
    assert "invalid choice" in capsys.readouterr().err
    with pytest.raises(Exception, match="certify must be"):
        check(tiny_case(), certify="maybe")


def test_jsonl_unwritable_is_bad_usage_before_any_work(tmp_path, capsys):
    """A --jsonl destination that cannot be written is found before any case runs: bad usage (exit 2)."""
    good = str(ROOT / "cases" / "tiny-111-kink-plus.json")
    assert main(["check", "--jsonl", str(tmp_path / "no" / "dir" / "x.jsonl"), good]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--jsonl: cannot write (no such directory)" in err


@pytest.mark.parametrize("name", ["diabetes-mlp-10-8-1-first10", "iris-mlp-4-8-8-3", "wine-mlp-13-8-3"])
def test_monte_carlo_mode_is_labelled_and_agrees(name, capsys):
    case = load_case(ROOT / "cases" / f"{name}.json")
    full = check(case, numeric=False)
    mc = check(case, numeric=False, certify="none")
    lo, hi = full.rank_gamma_interval or (full.rank_gamma, full.rank_gamma)  # certified: exact, or an interval
    assert mc.verdict == full.verdict and lo <= mc.rank_gamma <= hi
    d = mc.to_dict()
    assert d["certified"] is False and "certificate" not in d
    assert 0 <= d["error_probability"] <= 2.0**-40 or d["error_probability"] == 0
    if mc.rank_gamma < mc.dim:
        assert "Monte Carlo" in mc.reason
    code = main(["check", "--json", "--no-numeric", "--certify", "none", str(ROOT / "cases" / f"{name}.json")])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["certified"] is False and out["verdict"] == full.verdict


def test_monte_carlo_failure_bound_formula():
    # d primes >= lo divide a nonzero minor of size <= (sqrt(r) B)^r; with B = 1, r = 4:
    # log2 minor = 4 (0 + 1) = 4 < 20, so d = 0 and the bound is 0; with B = 2**1000, r = 10:
    # log2 minor = 10 (1000 + log2(10)/2) = 10016.6..., d = floor(10016.6 / 20) = 500 primes
    # of the 73,586 in [2**20, 2**21): one prime fails with probability <= 500 / 73586.
    from exactident.linalg.montecarlo import failure_bound

    assert failure_bound((4, 4), 1, 1, 2**20, 2**21, 1) == 0.0
    assert failure_bound((10, 12), 2**1000, 1, 2**20, 2**21, 1) == pytest.approx(500 / 73586)
    assert failure_bound((10, 12), 2**1000, 1, 2**20, 2**21, 2) == pytest.approx(500 / 73586 * 500 / 73585)


def test_prime_counts_of_the_monte_carlo_ranges():
    # pi(2**21) - pi(2**20) by a sieve (independent of FLINT)
    import numpy as np

    from exactident.linalg.montecarlo import PRIMES_IN_RANGE

    N = 2**21
    sieve = np.ones(N, dtype=bool)
    sieve[:2] = False
    for k in range(2, int(N**0.5) + 1):
        if sieve[k]:
            sieve[k * k::k] = False
    assert int(sieve[2**20:].sum()) == PRIMES_IN_RANGE[(2**20, 2**21)]


def test_progress_display_is_silent_off_a_terminal(capsys):
    good = str(ROOT / "cases" / "tiny-111-kink-plus.json")
    assert main(["check", "--no-numeric", good]) == 0
    assert capsys.readouterr().err == ""


def test_benchmark_script_writes_only_where_told(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert "--out" in out


def test_freed_pages_go_back_to_the_system_on_glibc():
    """``release_freed_memory`` finds glibc's ``malloc_trim`` on Linux/glibc (None elsewhere, then a no-op), and a
    heap freed of many small blocks shrinks when it runs: RSS after it at most what it was before."""
    import platform

    from exactident import budget

    budget.release_freed_memory()
    assert budget._TRIM and (budget._TRIM[0] is not None) == (sys.platform.startswith("linux")
                                                                and platform.libc_ver()[0] == "glibc")
    if budget._TRIM[0] is None:
        return

    def rss_kb() -> int:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))

    blocks = [bytearray(4000) for _ in range(20000)]  # 80 MB of small (brk heap) blocks, touched
    keep = blocks[-1]
    del blocks
    before = rss_kb()
    budget.release_freed_memory()
    assert rss_kb() <= before - 40_000 and keep is not None  # most of the 80 MB given back


def test_soft_deadlines_are_per_thread_nested_validated_and_survive_a_child():
    """Another thread's ``timeout=`` never bounds this thread's stages; nested deadlines all hold; a timeout
    ``check`` refuses is refused here too; ``BudgetExhausted`` comes back from a child process as it left."""
    import math
    import pickle
    import threading

    from exactident import UnsupportedCaseError
    from exactident.budget import BudgetExhausted, soft_deadline, stage

    inside, outside = threading.Event(), threading.Event()
    seen: list = []

    def other():
        with soft_deadline(1e-6):
            inside.set()
            outside.wait(5)
    t = threading.Thread(target=other)
    t.start()
    inside.wait(5)
    stage("this thread, no deadline")  # raised here when the deadline list was shared by all threads
    outside.set()
    t.join()
    with pytest.raises(BudgetExhausted) as exc, soft_deadline(1e-6), soft_deadline(3600):  # the inner, longer
        seen.append(1)  # one does not lift the outer
        __import__("time").sleep(0.001)
        stage("nested")
    assert exc.value.stage == "nested" and seen == [1]
    for bad in (0, -1, math.nan, "5", True):
        with pytest.raises(UnsupportedCaseError, match="timeout must be a number of seconds > 0"), \
                soft_deadline(bad):
            pass
    back = pickle.loads(pickle.dumps(BudgetExhausted("ranks mod p")))
    assert (back.stage, str(back)) == ("ranks mod p", "time budget exhausted at ranks mod p")
