"""Hardening round 3, process and claim items: claims past the resolution cap, orphaned children,
cost estimates, budgets for ``explain`` and ``design`` (docs/cli.md, docs/performance.md).

Right values come from hand derivations written in each test.  No test measures time: a slow
case only has to outlive the moment a signal is sent.
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

from exactident.check import check
from exactident.cli import main
from exactident.io.case import load_case, parse_case
from exactident.verify.certificate import verify_certificate

ROOT = Path(__file__).resolve().parent.parent

# f = 3 relu(2x + 1) on the samples -1/2 (on the kink), 1, -2.  Gamma rows over (w_1, b_1, b_2), the
# outgoing edge w_2 fixed: an active sample x gives (3x, 3, 1), an inactive one (0, 0, 1).
#   tie active:   (-3/2, 3, 1), (3, 3, 1), (0, 0, 1): rank 3 = dim (C_S holds at the >= 0 pattern);
#   tie inactive: (0, 0, 1), (3, 3, 1), (0, 0, 1): rank 2 < dim, and alpha then has rank 2 too.
# So the smallest R_Gamma over the two resolutions is 2: provably not identifiable, while the
# >= 0 pattern alone says 3.
KINK_MIN2 = {"format": "exactident-case/1", "name": "kink-min2", "widths": [1, 1, 1],
             "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]], "sample": [["-1/2"], ["1"], ["-2"]]}


# ---------------------------------------------------------------- 18.4: a false claim past the cap

def test_past_the_cap_the_report_claims_no_rank_and_the_verifier_refuses_one():
    case = parse_case(KINK_MIN2)
    full = check(case, numeric=False)
    assert (full.verdict, full.rank_gamma) == ("not-identifiable", 2)  # the hand derivation above
    capped = check(case, numeric=False, max_resolutions=1)
    d = capped.to_dict()
    # nothing enumerated: the smallest R_Gamma over the resolutions is unknown, so no rank, C_S, C_N claim
    assert (d["rank_gamma"], d["rank_a"], d["cs"], d["cn"]) == (None, None, None, None)
    assert d["verdict"] == "inconclusive" and "patterns" not in d
    assert verify_certificate(case, d, require_claims=True)[0]
    # the report the old code wrote: the >= 0 pattern's ranks, presented as the case's
    for forged in ({"rank_gamma": 3, "rank_a": 3, "cs": True, "cn": True}, {"cs": True}, {"cn": False},
                   {"rank_gamma": 3}, {"rank_a": 3}, {"patterns": []}):
        valid, msgs = verify_certificate(case, {**d, **forged}, require_claims=True)
        assert not valid, forged
        key = next(iter(forged))
        assert any(m.startswith(f"{key}: report") for m in msgs), msgs


def test_forged_past_the_cap_report_is_exit_3_from_the_cli(tmp_path, capsys):
    case_path = tmp_path / "case.json"
    case_path.write_text(json.dumps(KINK_MIN2))
    assert main(["check", "--json", "--no-numeric", "--max-resolutions", "1", str(case_path)]) == 0
    report = json.loads(capsys.readouterr().out)
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps({**report, "rank_gamma": 3, "rank_a": 3, "cs": True, "cn": True}))
    assert main(["verify-certificate", str(case_path), str(forged)]) == 3
    out = capsys.readouterr().out
    assert "cs: report says True" in out and out.rstrip().endswith("certificate INVALID")


# ---------------------------------------------------------------- 18.3: no orphaned analysis process

def _slow_case(path: Path, digits: int = 400) -> Path:
    # [3, 4, 4, 2] with 20 samples, every number a 400-digit fraction of mixed sign: the exact
    # ranks of Gamma and the structural search on such numbers take tens of seconds, far longer
    # than the moment the signal is sent (the test never waits for the analysis to end).
    import random

    rng = random.Random(3)

    def num() -> str:
        p, q = rng.randrange(10 ** (digits - 1), 10 ** digits), rng.randrange(10 ** (digits - 1), 10 ** digits)
        return f"{'-' if rng.random() < 0.3 else ''}{p}/{q}"
    w = [3, 4, 4, 2]
    obj = {"format": "exactident-case/1", "name": "slow", "widths": w,
           "weights": [[[num() for _ in range(w[l])] for _ in range(w[l + 1])] for l in range(3)],
           "biases": [[num() for _ in range(w[l + 1])] for l in range(3)],
           "sample": [[num() for _ in range(3)] for _ in range(20)]}
    path.write_text(json.dumps(obj))
    return path


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as fh:
            state = next(line for line in fh if line.startswith("State:"))
        return "Z" not in state.split()[1]  # a zombie has ended (nobody may reap it in a container)
    except (FileNotFoundError, ProcessLookupError, StopIteration):
        return False


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                out += [int(c) for c in fh.read().split()]
    except (FileNotFoundError, ProcessLookupError):
        pass
    return out


def _wait_for(predicate, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())


def _analysis_child(parent: subprocess.Popen) -> int:
    """The pid of the analysis child, once it has armed its death-with-parent (its watcher thread runs)."""
    found: list[int] = []

    def armed() -> bool:
        kids = [c for c in _children(parent.pid) if _alive(c)]
        for c in kids:  # own process group and a second thread: past setpgid, prctl and the pipe watcher
            try:
                if os.getpgid(c) == c and len(os.listdir(f"/proc/{c}/task")) >= 2:
                    found.append(c)
                    return True
            except (ProcessLookupError, FileNotFoundError):
                continue
        return parent.poll() is not None

    assert _wait_for(armed, 60), "no analysis child appeared"
    assert parent.poll() is None and found, "the slow case finished before it could be killed"
    return found[0]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


needs_proc = pytest.mark.skipif(not sys.platform.startswith("linux") or not hasattr(os, "fork"),
                                reason="needs fork and /proc")


@needs_proc
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_the_analysis_child_dies_with_its_parent(tmp_path, sig):
    case = _slow_case(tmp_path / "slow.json")
    parent = subprocess.Popen([sys.executable, "-m", "exactident", "check", "--timeout", "60", str(case)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env(), cwd=tmp_path)
    child = None
    try:
        child = _analysis_child(parent)
        os.kill(parent.pid, sig)
        status = parent.wait(timeout=30)
        assert _wait_for(lambda: not _alive(child), 2.0), f"analysis child {child} survived its parent"
        if sig == signal.SIGTERM:  # forwarded, then the CLI's interrupted status (docs/cli.md: 130, as Ctrl-C)
            assert status == 130
            assert parent.stderr is not None and parent.stderr.read().decode().endswith("interrupted\n")
    finally:
        for pid in (parent.pid, child):
            if pid is not None and _alive(pid):
                os.kill(pid, signal.SIGKILL)
        parent.wait(timeout=30)
        if parent.stderr is not None:
            parent.stderr.close()


_FORWARD_SCRIPT = """
import signal, subprocess, sys, time
from exactident.budget import run_isolated

# as started from a terminal: a launcher such as nohup leaves SIGHUP ignored, a shell's background job
# (`cmd &`) leaves SIGINT ignored, and the forwarding rightly leaves a signal its launcher ignores alone
# (exactident.budget._forwarding)
signal.signal(signal.SIGHUP, signal.SIG_DFL)
signal.signal(signal.SIGINT, signal.default_int_handler)

def work():
    grandchild = subprocess.Popen(["sleep", "120"])  # in the analysis child's process group
    open(sys.argv[1], "w").write(str(grandchild.pid))
    time.sleep(120)

run_isolated(work, 60)
"""


@needs_proc
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_the_parent_forwards_termination_to_the_whole_group(tmp_path, sig):
    # A grandchild is not covered by the child's death-with-parent: only the parent's handler,
    # which kills the child's whole process group, removes it.
    pid_file = tmp_path / "pid"
    parent = subprocess.Popen([sys.executable, "-c", _FORWARD_SCRIPT, str(pid_file)], env=_env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    grandchild = None
    try:
        assert _wait_for(lambda: pid_file.exists() and pid_file.read_text().strip() != "", 60)
        grandchild = int(pid_file.read_text())
        child = _analysis_child(parent)
        os.kill(parent.pid, sig)
        status = parent.wait(timeout=30)
        assert _wait_for(lambda: not _alive(grandchild) and not _alive(child), 2.0)
        err = parent.stderr.read().decode() if parent.stderr else ""
        if sig == signal.SIGINT:
            assert status == -signal.SIGINT and "KeyboardInterrupt" in err  # raised after the kill
        else:
            assert status == -sig
    finally:
        for pid in (parent.pid, grandchild):
            if pid is not None and _alive(pid):
                os.kill(pid, signal.SIGKILL)
        parent.wait(timeout=30)
        if parent.stderr is not None:
            parent.stderr.close()


# ---------------------------------------------------------------- 18.6 / 20.6: cost estimate and budgets

def test_the_estimate_grows_with_every_size():
    from exactident.ranks.estimate import estimate_sizes

    base = dict(widths=[3, 4, 4, 2], n=20, digits=100, n_tie_classes=0)
    bigger = [dict(base, n=40), dict(base, digits=1000), dict(base, n_tie_classes=3),
              dict(base, widths=[3, 8, 4, 2]), dict(base, widths=[3, 4, 4, 4, 2]), dict(base, widths=[3, 4, 4, 3])]
    for numeric in (True, False):
        ref = estimate_sizes(**base, numeric=numeric)
        for more in bigger:
            est = estimate_sizes(**more, numeric=numeric)
            assert est.seconds >= ref.seconds and est.worst >= ref.worst, more
    # strictly, along each axis, over a range of values
    for key, values in (("n", [1, 5, 20, 80]), ("digits", [1, 10, 100, 1000, 4000]), ("n_tie_classes", [0, 1, 4, 8])):
        worst = [estimate_sizes(**dict(base, **{key: v})).worst for v in values]
        assert worst == sorted(worst) and worst[0] < worst[-1], (key, worst)
    # the case: [3, 4, 4, 2], 20 samples, 2000-digit integers, is large; a kink-free toy is not
    assert estimate_sizes([3, 4, 4, 2], 20, 2000, 0).large
    assert not estimate_sizes([1, 1, 1], 3, 1, 0).large


def _big_case(digits: int) -> dict:
    import random

    rng = random.Random(5)
    w = [3, 4, 4, 2]

    def num() -> str:
        return str(rng.randrange(10 ** (digits - 1), 10 ** digits))
    return {"format": "exactident-case/1", "name": "big", "widths": w,
            "weights": [[[num() for _ in range(w[l])] for _ in range(w[l + 1])] for l in range(3)],
            "biases": [[num() for _ in range(w[l + 1])] for l in range(3)],
            "sample": [[num() for _ in range(3)] for _ in range(20)]}


def test_a_large_estimate_gets_the_default_budget_on_a_terminal(capsys):
    import argparse

    from exactident.ranks.estimate import TERMINAL_BUDGET
    from exactident.run_cases import _terminal_budget

    args = argparse.Namespace(no_numeric=False, all_ranks=False, max_resolutions=4096)
    big = parse_case(_big_case(2000))
    assert _terminal_budget(big, args, None) == TERMINAL_BUDGET
    err = capsys.readouterr().err
    assert err.startswith("estimate big: ~") and f"a default budget of {TERMINAL_BUDGET:.0f} s" in err
    assert _terminal_budget(big, args, 30.0) == 30.0  # --timeout wins
    assert "default budget" not in capsys.readouterr().err
    tiny = parse_case(KINK_MIN2)
    assert _terminal_budget(tiny, args, None) == float("inf")  # small: no budget (a child keeps the display live)
    assert "default budget" not in capsys.readouterr().err


def test_check_estimate_prints_and_analyses_nothing(capsys):
    assert main(["check", "--estimate", str(ROOT / "cases" / "tiny-111-kink.json")]) == 0
    out = capsys.readouterr().out
    # tiny-111-kink: one tie, so 2 resolutions, each with its ranks; the float cross-check runs by default
    assert out.startswith("estimate tiny-111-kink: ~<1 s (forward pass") and "2 tie resolutions" in out
    assert "float cross-check" in out and "verdict" not in out


def test_a_layer_graph_is_checked_on_a_terminal_as_off_it(monkeypatch, capsys):
    # The cost model reads the plain network only; on a terminal a layer graph (PReLU here) was refused
    # (exit 2) before any analysis. A terminal must change the display, never the answer.
    case = str(ROOT / "cases" / "architectures" / "prelu-mlp.json")
    assert main(["check", "--json", case]) == 0
    plain = json.loads(capsys.readouterr().out)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(["check", "--json", case]) == 0
    tty = json.loads(capsys.readouterr().out)
    for d in (plain, tty):
        d.pop("seconds", None)
    assert tty == plain
    assert main(["check", "--estimate", case]) == 2  # no cost model for it: one line saying so
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "prelu-mlp.json" in err and "without --estimate" in err


@needs_proc
def test_the_estimate_goes_to_the_terminal_not_into_json(tmp_path):
    import pty

    master, slave = pty.openpty()
    case = str(ROOT / "cases" / "tiny-111-kink.json")
    proc = subprocess.run([sys.executable, "-m", "exactident", "check", "--json", "--no-numeric", case],
                          stdout=subprocess.PIPE, stderr=slave, env=_env(), timeout=300)
    os.close(slave)
    err = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the writer is gone
            break
        if not chunk:
            break
        err += chunk
    os.close(master)
    assert proc.returncode == 0
    report = json.loads(proc.stdout)  # stdout is the report alone
    assert report["name"] == "tiny-111-kink" and b"estimate" not in proc.stdout
    assert b"estimate tiny-111-kink: ~" in err


def _slow_stage(*args, **kwargs):
    from exactident.budget import stage

    stage("kernel", rows=3, cols=3)
    time.sleep(120)


@needs_proc
def test_explain_timeout_keeps_checks_certified_verdict(capsys, monkeypatch):
    # Regression: explain --timeout turned a verdict check proves into inconclusive.  tiny-111-kink is the
    # hand-checked example of docs/theory.md: f = 3 relu(2x + 1) on 0, 1, -1/2, the last on the kink, is
    # not-identifiable (delta = (0, 1, -3) enters the active side).  The explanation never ends (a stage that
    # sleeps): the report keeps check's verdict and certificate, and says what is missing.
    import exactident.explain.command as explain_command

    monkeypatch.setattr(explain_command, "explain", _slow_stage)
    case = str(ROOT / "cases" / "tiny-111-kink.json")
    assert main(["explain", "--json", "--timeout", "1", case]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["verdict"], report["decided_by"]) == ("not-identifiable", "boundary-entering")
    assert "timed_out" not in report and not any(k in report for k in ("parameters", "neurons", "kernel_basis"))
    assert "explanation not finished: time budget exhausted at kernel" in report["reason"]
    assert "missing: per-parameter classes, neuron diagnoses and kernel bases" in report["explanation"][0]
    assert verify_certificate(load_case(case), report, require_claims=True)[0]
    assert main(["explain", "--timeout", "1", case]) == 0
    out = capsys.readouterr().out
    assert "not-identifiable" in out and "missing: per-parameter classes" in out


@needs_proc
def test_explain_timeout_before_the_verdict_is_inconclusive(capsys, monkeypatch):
    import exactident.explain.command as explain_command

    monkeypatch.setattr(explain_command, "_checked", _slow_stage)  # check's own stages never end
    case = str(ROOT / "cases" / "tiny-111-kink.json")
    assert main(["explain", "--json", "--timeout", "1", case]) == 0  # as check --timeout: exit 0, inconclusive
    report = json.loads(capsys.readouterr().out)
    assert report["timed_out"] is True and report["reason"] == "time budget exhausted at kernel"
    assert "parameters" not in report and report["rank_gamma"] is None


@needs_proc
def test_design_timeout_is_an_answer_and_writes_nothing(tmp_path, capsys, monkeypatch):
    import exactident.explain.design_command as design_command

    monkeypatch.setattr(design_command, "design", _slow_stage)
    case = str(ROOT / "cases" / "tiny-111-kink.json")
    out_path = tmp_path / "new.json"
    # a budget that ran out is an answer (exit 0), reported in the output; no -o file is written
    assert main(["design", "--timeout", "1", case, "-o", str(out_path)]) == 0
    out, err = capsys.readouterr()
    assert out == ("tiny-111-kink: time budget of 1 s exhausted at kernel: no result (give a larger --timeout)\n"
                   f"nothing written to {out_path}: time budget exhausted\n") and err == ""
    assert not out_path.exists()


def test_the_rank_deficient_bound_is_the_default_gate_not_the_whole_kernel():
    """digits 64-32-10 on 1797 samples (10-digit numbers): 'up to ~21 h' for a check of 1.5 s was the whole
    exact kernel over Q, which the default never computes at that size (exact_rank_is_cheap: the kernel runs
    only at most max(2 s, the verdict's rank stage); else the rank is a certified interval).

    By hand: rows = 1797 * 10 = 17970, cols = 64*32 + 32*10 + 10 = 2378, r = min = 2378; entries of
    (L + 1) * 10 = 30 digits, g = 0.3.  The verdict's rank stage: 17970 * 2378 * (2e-8 + 2378 * 5e-11)
    = 5.94 s; the kernel at most max(2, 5.94) * 1.3^1.5 = 8.80 s.  The structural search (rows > cols: only
    if deficient): 1797 * 32 * 2378 * 1e-7 * 1.3 = 17.78 s.
    """
    from exactident.ranks.estimate import estimate_sizes

    verdict = 17970 * 2378 * (2e-8 + 2378 * 5e-11)
    kernel = max(2.0, verdict) * 1.3 ** 1.5
    structural = 1797 * 32 * 2378 * 1e-7 * 1.3
    assert abs(verdict - 5.9356) < 1e-3 and abs(kernel - 8.798) < 1e-2
    est = estimate_sizes([64, 32, 10], 1797, 10, 0, numeric=False)
    extra = dict(est.if_deficient)
    assert abs(extra["kernel (exact)"] - kernel) < 1e-6 and abs(extra["structural search"] - structural) < 1e-6
    assert est.worst == pytest.approx(est.seconds + kernel + structural)
    assert "up to ~59 s if Gamma is rank-deficient" in est.render("digits")  # 32.6 + 8.8 + 17.8 s, not hours
    # --exact-ranks computes the whole kernel: the bound may then be (and is) far larger
    assert estimate_sizes([64, 32, 10], 1797, 10, 0, numeric=False, exact_ranks=True).worst > 3600
