"""Benchmark: certified verdicts on rank-deficient trained networks vs the single-thread float64 pipeline.

Usage (from the repository root; writes nothing unless told where)::

    python benchmarks/deficient.py [--cases DIR] [--only NAME ...] [--out results.md] [--json results.json]

The networks are trained by ``benchmarks/train_deficient.py`` (seeded) into ``--cases``
(made when missing): scikit-learn digits 64-32-10, 64-64-10 (lbfgs), 64-32-32-10 (adam) on
all 1797 rows, PyTorch MLPs trained with Adam in float32 (30-12-6-2 on breast cancer, a fresh
64-40-20-10 on digits), and
randomly initialised 16-16x k-1 nets with dead neurons.

Each cell is a fresh subprocess with ``OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=1`` reporting its
CPU time (user + system, ``getrusage``), wall time and peak RSS (``ru_maxrss`` of that child);
the case is loaded before the clock starts.  Methods:

- ``exact``: ``check(case, numeric=False, structural=False)``, the certified verdict of the rank
  rules (what the float pipeline computes), with the certified ``rank_gamma`` interval when the
  verdict did not need the exact rank;
- ``exact-ranks``: the same with ``exact_ranks=True`` (``--with-exact-ranks``; slow rows killed
  at ``--timeout``);
- ``verify``: ``verify_certificate`` on the report the ``exact`` cell wrote beside the case
  (``CASE.exact.report.json``), claims required, as ``exactident verify-certificate`` does;
- ``float1``: float64 ``Gamma`` by backpropagation + ``numpy.linalg.matrix_rank``, plus the rank
  of ``alpha`` (or its Gram matrix) when ``rank Gamma < dim``;
- ``torch``: what a PyTorch user runs: the per-sample Jacobian of the outputs in the parameters by
  ``torch.vmap(torch.func.jacrev(f))`` in float64 (``torch.set_num_threads(1)``), its free columns
  (the fixed edges dropped, as in ``Gamma``), ``torch.linalg.matrix_rank``, plus the rank of the same
  ``alpha`` when ``rank Gamma < dim`` (skipped with ``--no-torch``).

CPU time and peak RSS of a cell come from the same child process (one run).

``--whole`` measures what a user waits for instead: each cell is a whole process, imports and
reading the case file included, its CPU time and peak RSS read by ``os.wait4`` on that child:

- ``cli``: ``python -m exactident check CASE --json --no-numeric`` (the default certified check:
  rank rules, structural certificates, the report written), its report kept beside the case as
  ``CASE.cli.report.json``;
- ``cli-verify``: ``python -m exactident verify-certificate CASE CASE.cli.report.json``;
- ``float1-whole`` / ``torch-whole``: the ``float1`` / ``torch`` cells above as whole processes (the
  case read by the same exact reader, then converted to float64).

The package's bytecode is compiled once before the first cell (``compileall``) and every cell runs
without ``PYTHONDONTWRITEBYTECODE``, as an installed package runs: otherwise each process would
compile the modules it imports again (0.1-0.15 s of every cell).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
NAMES = ["digits-64-32-10", "digits-64-64-10", "digits-64-32-32-10", "torch-bc-30-12-6-2",
         "torch-digits-64-40-20-10", "random-16x4-1", "random-16x3-1",
         # fresh nets (2026-12-07, benchmarks/train_deficient.py)
         "digits-64-48-10-s80713", "digits-64-40-20-10-s80714", "digits-64-32-32-16-10-s80715",
         "torch-digits-64-40-20-10-s80716", "random-16x3-1-s80717"]


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def torch_ranks(case) -> dict:
    """``rank_gamma`` (and ``rank_a`` when below ``dim``) by ``torch.func.jacrev`` + ``torch.linalg.matrix_rank``."""
    import numpy as np
    import torch

    from exactident.model.activation import n_paths
    from exactident.model.fixed_edges import fixed_edges
    from exactident.model.gamma import free_columns
    from exactident.numeric.float_network import to_float_network, to_float_sample
    from exactident.numeric.gamma_free import float_pattern
    from exactident.numeric.numpy_backend import alpha_float, alpha_float_gram

    torch.set_num_threads(1)
    net = case.network
    fnet = to_float_network(net)
    Xf = to_float_sample(case.X, net.widths[0])
    shapes = [(net.widths[l], net.widths[l - 1]) for l in range(1, net.L + 1)]
    # the parameter vector of free_columns: every W_l row-major then b_l, layer by layer
    theta = torch.cat([torch.cat([torch.from_numpy(np.asarray(W, dtype=np.float64)).reshape(-1),
                                  torch.from_numpy(np.asarray(b, dtype=np.float64)).reshape(-1)])
                       for W, b in zip(fnet.W, fnet.b)])

    def f(t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        h, at = x, 0
        for l, (o, i) in enumerate(shapes):
            W, b = t[at:at + o * i].reshape(o, i), t[at + o * i:at + o * i + o]
            at += o * i + o
            h = W @ h + b
            if l < len(shapes) - 1:
                h = torch.relu(h)
        return h

    J = torch.vmap(torch.func.jacrev(f), in_dims=(None, 0))(theta, torch.from_numpy(Xf))  # (n, N_L, P)
    J = J.reshape(-1, theta.numel())[:, free_columns(net, fixed_edges(net))]
    out = {"rank_gamma": int(torch.linalg.matrix_rank(J))}
    del J
    if out["rank_gamma"] < net.dim:
        pat = float_pattern(fnet, Xf)
        A = alpha_float(pat, Xf) if len(Xf) * n_paths(net.widths) <= 20_000_000 else alpha_float_gram(pat, Xf)
        out["rank_a"] = net.widths[-1] * int(torch.linalg.matrix_rank(torch.from_numpy(A)))
    return out


def measure(method: str, path: str) -> None:
    from exactident.io.case import load_case
    from exactident.io.limits import ReadLimits

    # the MNIST steps past 6,000 rows are 18-47 MB of exact decimals: above the default input limits
    case = load_case(path, ReadLimits(max_bytes=1 << 30, max_digits=10**9))
    out: dict = {}
    if method in ("exact", "exact-ranks"):
        from exactident.check import check

        c0, t0 = _cpu(), time.perf_counter()
        r = check(case, numeric=False, structural=False, exact_ranks=method == "exact-ranks")
        out.update(verdict=r.verdict, rank_gamma=r.rank_gamma, rank_a=r.rank_a,
                   interval=None if r.rank_gamma_interval is None else list(r.rank_gamma_interval),
                   montecarlo=r.montecarlo,
                   rank_a_lower_bound=r.extra.get("rank_a_lower_bound"), certified_by=r.extra.get("certified_by"))
        if method == "exact":  # the report the verify cell checks (written after the clock is read below)
            from exactident.io.report import reports_to_json

            report_text = reports_to_json([r], as_list=False)
    elif method == "verify":
        from exactident.verify.certificate import verify_certificate

        with open(path + ".exact.report.json", encoding="utf-8") as f:
            report = json.load(f)
        c0, t0 = _cpu(), time.perf_counter()
        valid, messages = verify_certificate(case, report, os.path.basename(path), require_claims=True)
        out.update(valid=valid, problems=[] if valid else messages[-3:])
    elif method == "torch":
        import torch  # noqa: F401  # loaded before the clock, like the case

        c0, t0 = _cpu(), time.perf_counter()
        out.update(torch_ranks(case))
    else:
        from run import float_ranks  # benchmarks/run.py: the same float64 pipeline in both tables

        c0, t0 = _cpu(), time.perf_counter()
        out.update(float_ranks(case))
    out["wall"] = time.perf_counter() - t0
    out["cpu"] = _cpu() - c0
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if method == "exact":
        with open(path + ".exact.report.json", "w", encoding="utf-8") as f:
            f.write(report_text)
    print(json.dumps(out))


def run_one(method: str, path: str, timeout: float) -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, __file__, "--measure", method, path], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"timeout": timeout}
    if proc.returncode != 0:
        return {"error": stderr.strip().splitlines()[-1] if stderr.strip() else f"exit {proc.returncode}"}
    return json.loads(stdout.strip().splitlines()[-1])


WHOLE_COMMANDS = {
    "cli": lambda path: [sys.executable, "-m", "exactident", "check", path, "--json", "--no-numeric",
                         "--max-file-size", "1GiB"],
    "cli-verify": lambda path: [sys.executable, "-m", "exactident", "verify-certificate", path,
                                path + ".cli.report.json", "--max-file-size", "1GiB"],
    "float1-whole": lambda path: [sys.executable, __file__, "--measure", "float1", path],
    "torch-whole": lambda path: [sys.executable, __file__, "--measure", "torch", path],
}


def _whole_env() -> dict:
    """One BLAS thread; bytecode caches read (an installed package has them; see :func:`compile_sources`)."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def compile_sources() -> None:
    """Write the bytecode of the package and of this script once, before any whole process is timed."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(ROOT, "exactident"),
                    os.path.join(ROOT, "benchmarks")], check=True, env=_whole_env())


def run_whole(method: str, path: str, timeout: float) -> dict:
    """One whole child process: its CPU time (user + system) and peak RSS from ``os.wait4``."""
    import tempfile
    import threading

    env = _whole_env()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(WHOLE_COMMANDS[method](path), stdout=out, stderr=err, env=env, cwd=ROOT,
                                start_new_session=True)
        timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
        timer.start()
        _, status, ru = os.wait4(proc.pid, 0)
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if wall >= timeout:
        return {"timeout": timeout}
    res: dict = {"cpu": ru.ru_utime + ru.ru_stime, "wall": wall, "peak_mb": ru.ru_maxrss / 1024,
                 "exit": proc.returncode}
    if method == "cli":
        report = json.loads(stdout)
        report = report[0] if isinstance(report, list) else report
        res.update(verdict=report["verdict"], rank_gamma=report["rank_gamma"],
                   interval=report.get("rank_gamma_interval"), dim=report["dim"],
                   certified_by=(report.get("certified_by") or {}).get("rank_gamma"),
                   montecarlo=report.get("montecarlo"))
        from exactident.io.atomic import atomic_write_text

        atomic_write_text(path + ".cli.report.json", stdout)
    elif method == "cli-verify":
        res["valid"] = proc.returncode == 0
        if proc.returncode != 0:
            res["problems"] = (stdout + stderr).strip().splitlines()[-3:]
    elif proc.returncode == 0:
        res.update({k: v for k, v in json.loads(stdout.strip().splitlines()[-1]).items()
                    if k in ("rank_gamma", "rank_a")})
    else:
        res["error"] = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit {proc.returncode}"
    return res


def whole_table(results: dict) -> str:
    """The markdown table of a ``--whole`` run."""
    lines = ["| network | dim | exactident check (verdict; rank_gamma, closed by) | verify-certificate | "
             "float64 numpy | torch jacrev | check / numpy (CPU; peak RSS) | check / torch (CPU; peak RSS) | "
             "verify / check | interval width, % of dim |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, res in results.items():
        ex, ve = res.get("cli") or {}, res.get("cli-verify") or {}
        fl, th = res.get("float1-whole") or {}, res.get("torch-whole") or {}
        if "verdict" in ex:
            iv = ex.get("interval")
            rg = f"[{iv[0]}, {iv[1]}]" if iv else f"{ex['rank_gamma']} exact"
            width = f"{iv[1] - iv[0]} ({100 * (iv[1] - iv[0]) / ex['dim']:.2f} %)" if iv else "0 (exact)"
            head = f"{_cell(ex)} ({ex['verdict']}; {rg}, `{ex.get('certified_by')}`)"
        else:
            head, width = _cell(ex), "-"
        rk = f" (rank {fl['rank_gamma']})" if "rank_gamma" in fl else ""
        rt = f" (rank {th['rank_gamma']})" if "rank_gamma" in th else ""
        lines.append(f"| {name} | {ex.get('dim', '-')} | {head} | {verify_cell(ve)} | {_cell(fl)}{rk} | "
                     f"{_cell(th)}{rt} | {_ratio(ex, fl)} | {_ratio(ex, th)} | {_ratio(ve, ex)} | {width} |")
    return "\n".join(lines) + "\n"


def _cell(r: dict | None) -> str:
    if not r:
        return "-"
    if "timeout" in r:
        return f"> {r['timeout']:.0f} s (killed)"
    if "error" in r:
        return "error: " + r["error"][:60]
    return f"{r['cpu']:.3g} s cpu, {r['peak_mb']:.0f} MB"


def _ratio(a: dict, b: dict) -> str:
    """``CPU ratio; peak RSS ratio`` of two cells (``-`` when one is missing)."""
    if "cpu" not in a or "cpu" not in b or b["cpu"] <= 0:
        return "-"
    return f"{a['cpu'] / b['cpu']:.2f}x; {a['peak_mb'] / b['peak_mb']:.2f}x"


def verify_cell(r: dict | None) -> str:
    """``valid/INVALID, CPU, peak MB`` of a ``verify`` cell."""
    if not r or "cpu" not in r:
        return _cell(r)
    return ("valid" if r.get("valid") else "INVALID") + ", " + _cell(r)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=None, help="directory of the trained cases (made if missing)")
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--with-exact-ranks", action="store_true")
    ap.add_argument("--no-torch", action="store_true", help="skip the torch column")
    ap.add_argument("--whole", action="store_true",
                    help="whole processes: the exactident CLI against the float pipelines as scripts")
    ap.add_argument("--measure", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.measure:
        measure(*args.measure)
        return 0
    if args.cases is None:
        import tempfile

        args.cases = tempfile.mkdtemp(prefix="exactident-deficient-")
    names = [n for n in NAMES if not args.only or n in args.only]
    missing = [n for n in names if not os.path.exists(os.path.join(args.cases, n + ".json"))]
    if missing:
        subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "train_deficient.py"), "--out", args.cases,
                        *missing], check=True)
    if args.whole:
        methods = ["cli", "cli-verify", "float1-whole"] + ([] if args.no_torch else ["torch-whole"])
        compile_sources()
        results = {}
        for name in names:
            path = os.path.join(args.cases, name + ".json")
            results[name] = {}
            for m in methods:
                print(f"{name} {m} start {time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.1f}", flush=True)
                results[name][m] = run_whole(m, path, args.timeout)
            print(name, results[name], flush=True)
        _write(args, whole_table(results), results)
        return 0
    methods = ["exact", "verify", "float1"] + ([] if args.no_torch else ["torch"]) + \
        (["exact-ranks"] if args.with_exact_ranks else [])
    results: dict = {}
    for name in names:
        path = os.path.join(args.cases, name + ".json")
        results[name] = {m: run_one(m, path, args.timeout) for m in methods}
        print(name, results[name], flush=True)
    lines = ["| network | exact certified (verdict) | float64 numpy, 1 thread | torch jacrev, 1 thread | exact / "
             "numpy (CPU; peak RSS) | exact / torch (CPU; peak RSS) | rank_gamma certified (Monte Carlo; numpy; torch) "
             "| exact ranks | verify-certificate |", "|---|---|---|---|---|---|---|---|---|"]
    for name, res in results.items():
        ex, fl, th = res.get("exact") or {}, res.get("float1") or {}, res.get("torch") or {}
        if "cpu" in ex:
            iv = ex.get("interval")
            rg = f"[{iv[0]}, {iv[1]}] ({(ex.get('montecarlo') or {}).get('rank_gamma')}" if iv \
                else f"{ex['rank_gamma']} (exact"
            rg += f"; {fl.get('rank_gamma', '-')}; {th.get('rank_gamma', '-')})"
            verdict = ex["verdict"]
        else:
            rg, verdict = "-", "-"
        lines.append(f"| {name} | {_cell(ex)} ({verdict}) | {_cell(fl)} | {_cell(th)} | {_ratio(ex, fl)} | "
                     f"{_ratio(ex, th)} | {rg} | {_cell(res.get('exact-ranks'))} | {verify_cell(res.get('verify'))} |")
    _write(args, "\n".join(lines) + "\n", results)
    return 0


def _write(args, text: str, results: dict) -> None:
    print(text)
    if args.out:
        from exactident.io.atomic import atomic_write_text

        atomic_write_text(args.out, text)
    if args.json:
        from exactident.io.atomic import atomic_write_text

        atomic_write_text(args.json, json.dumps(results, indent=1))


if __name__ == "__main__":
    sys.exit(main())
