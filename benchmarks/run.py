"""Benchmark: certified exact check vs the float64 pipeline (one BLAS thread) vs sympy, in one run.

Usage (from the repository root; writes nothing unless told where)::

    python benchmarks/run.py --out results.md [--json results.json] [--quick]

Every measurement runs in a fresh subprocess (its own session, so a timed-out
run is killed with its whole process group) and reports its *CPU time*
(user + system of that process, from ``resource.getrusage``), wall time and
peak RSS.  CPU time is the headline on a shared machine; ratios are CPU-time
ratios against the float64 pipeline with one BLAS thread (threaded BLAS on a
busy 2-core machine spin-waits and its times swing by 10x).  The case is built
(or loaded) before the clock starts.  Methods:

- ``exact``: ``exactident.check(case, numeric=False, structural=False)`` -- certified ranks
  and the rank rules' verdict (Theorems 8-9, the boundary rules), what the float pipeline
  computes; also records which bound certified each rank (``certified_by``);
- ``structural``: ``exactident.check(case, numeric=False)``, the default: the same, then
  the structural certificates and the line search when the rank rules leave the case
  ``inconclusive`` (no float pipeline gives those verdicts; shown in its own column);
- ``float1`` / ``float``: float64 ``Gamma`` by backprop + ``numpy.linalg.matrix_rank``,
  plus the float rank of ``alpha`` (explicit, or its Gram matrix) when ``rank Gamma < dim``
  (the verdict needs ``R_A``), with one BLAS thread / the default threads;
- ``sympy``: ``sympy.Matrix(Gamma).rank()`` on the exact rational ``Gamma`` (small cases).

Cases: random networks with dyadic weights (float64 draws, converted exactly),
identifiable; *planted* rank-deficient ones (two last-hidden-layer neurons made
active on 12 and 17 samples by their biases); the scikit-learn MLPs of
``examples/train_benchmark_cases.py`` (breast cancer 30-16-1 on 569 rows, digits
64-16-10 on 200 and 1797 rows); a 1-1-1 network on 600,000 samples (two points,
repeated).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from fractions import Fraction

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # the checkout's exactident, installed or not

# name, kind, parameters, methods
CONFIGS = [
    ("s2-dyadic", "random", ((4, 8, 8, 1), 150, 0), ["exact", "float1", "float", "sympy"]),
    ("s3-dyadic", "random", ((6, 12, 12, 1), 400, 0), ["exact", "float1", "float"]),
    ("m-dyadic", "random", ((10, 30, 30, 1), 1600, 5), ["exact", "float1", "float"]),
    ("l-dyadic", "random", ((20, 50, 40, 1), 4000, 0), ["exact", "float1", "float"]),
    ("planted-800", "planted", ((9, 20, 20, 1), 800, 1), ["exact", "float1", "float"]),
    ("planted-1600", "planted", ((10, 30, 30, 1), 1600, 1), ["exact", "float1", "float"]),
    ("breast-cancer-30-16-1", "sklearn", ("breast-cancer-mlp-30-16-1",), ["exact", "float1", "float"]),
    ("digits-64-16-10-first200", "sklearn", ("digits-mlp-64-16-10-first200",), ["exact", "float1", "float"]),
    ("digits-64-16-10", "sklearn", ("digits-mlp-64-16-10",), ["exact", "float1", "float"]),
    ("tiny-111-600k", "repeated", (600_000,), ["exact", "float1"]),
]
QUICK = {"s2-dyadic", "m-dyadic", "planted-800", "breast-cancer-30-16-1", "digits-64-16-10-first200"}
TIMEOUT = {"sympy": 120}
DEFAULT_TIMEOUT = 900


def _q(x: float):
    import flint

    f = Fraction(float(x))  # the exact binary64 value
    return flint.fmpq(f.numerator, f.denominator)


def random_case(widths, n, seed, name="bench"):
    import flint
    import numpy as np

    from exactident.io.case import Case
    from exactident.model.network import Network

    rng = np.random.default_rng(seed)
    W = [flint.fmpq_mat(widths[l + 1], widths[l], [_q(v) for v in (rng.standard_normal(
        (widths[l + 1], widths[l])) * widths[l] ** -0.5).ravel()]) for l in range(len(widths) - 1)]
    b = [[_q(v) for v in rng.standard_normal(widths[l + 1]) * 0.3] for l in range(len(widths) - 1)]
    X = [[_q(v) for v in row] for row in rng.standard_normal((n, widths[0]))]
    return Case(name, Network(tuple(widths), W, b), X)


def planted_case(widths, n, seed, active=(12, 17)):
    """Random dyadic network; two last-hidden-layer neurons get biases that leave them active on few samples."""
    import numpy as np

    from exactident.io.case import Case
    from exactident.model.network import Network
    from exactident.numeric.float_network import to_float_network, to_float_sample

    case = random_case(widths, n, seed)
    fnet = to_float_network(case.network)
    h = to_float_sample(case.X, widths[0])
    for l in range(len(widths) - 3):
        h = np.maximum(h @ fnet.W[l].T + fnet.b[l], 0.0)
    L2 = len(widths) - 3  # index of the last hidden layer's weights
    z = h @ fnet.W[L2].T  # without bias
    b = [list(row) for row in case.network.b]
    for v, k in enumerate(active):
        top = np.sort(z[:, v])[::-1]
        b[L2][v] = _q(-(top[k - 1] + top[k]) / 2)  # exactly k samples above the cut (generically)
    return Case(f"planted-{n}", Network(case.network.widths, case.network.W, b), case.X)


def repeated_case(n):
    import flint

    from exactident.io.case import Case
    from exactident.model.network import Network

    net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])], [[flint.fmpq(1)], [flint.fmpq(0)]])
    X = [[flint.fmpq(1)] if i % 2 else [flint.fmpq(2)] for i in range(n)]
    return Case("tiny-111-600k", net, X)


def build(name):
    _, kind, params, _ = next(c for c in CONFIGS if c[0] == name)
    if kind == "random":
        return random_case(*params, name=name)
    if kind == "planted":
        return planted_case(*params)
    if kind == "repeated":
        return repeated_case(*params)
    from exactident.io.case import load_case

    path = os.path.join(os.environ["EXACTIDENT_BENCH_CASES"], params[0] + ".json")
    return load_case(path)


def _cpu():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def float_ranks(case) -> dict:
    """The float64 pipeline people run: backprop ``Gamma`` and ``numpy.linalg.matrix_rank``, plus ``alpha``
    when the verdict needs ``R_A`` (``rank_gamma < dim``); ``{"rank_gamma", ["rank_a"]}``."""
    import numpy as np

    from exactident.model.activation import n_paths
    from exactident.model.fixed_edges import fixed_edges
    from exactident.model.gamma import free_columns
    from exactident.numeric.float_network import to_float_network, to_float_sample
    from exactident.numeric.gamma_free import float_pattern, gamma_float
    from exactident.numeric.numpy_backend import alpha_float, alpha_float_gram

    fixed = fixed_edges(case.network)
    fnet = to_float_network(case.network)
    Xf = to_float_sample(case.X, case.network.widths[0])
    out = {"rank_gamma": int(np.linalg.matrix_rank(gamma_float(fnet, Xf, fixed, free_columns(case.network, fixed))))}
    if out["rank_gamma"] < case.network.dim:  # the verdict needs R_A
        pat = float_pattern(fnet, Xf)
        A = alpha_float(pat, Xf) if len(Xf) * n_paths(case.network.widths) <= 20_000_000 else alpha_float_gram(pat, Xf)
        out["rank_a"] = case.network.widths[-1] * int(np.linalg.matrix_rank(A))
    return out


def measure(method, name):
    case = build(name)
    out = {}
    if method == "sympy":
        import sympy

        from exactident.model.activation import activation_state
        from exactident.model.fixed_edges import fixed_edges
        from exactident.model.gamma import gamma_exact

        st = activation_state(case.network, case.X)
        G = gamma_exact(case.network, case.X, st.Z, st.pattern, fixed_edges(case.network))
        M = sympy.Matrix(G.nrows(), G.ncols(), [sympy.Rational(int(v.p), int(v.q)) for v in G.entries()])
        c0, t0 = _cpu(), time.perf_counter()
        out["rank_gamma"] = int(M.rank())
    elif method in ("exact", "structural"):
        from exactident.check import check

        c0, t0 = _cpu(), time.perf_counter()
        r = check(case, numeric=False, structural=method == "structural")
        out.update(rank_gamma=r.rank_gamma, rank_a=r.rank_a, verdict=r.verdict, decided_by=r.decided_by,
                   certified_by=r.extra.get("certified_by"), rank_a_lower_bound=r.extra.get("rank_a_lower_bound"))
    elif method in ("float", "float1"):
        c0, t0 = _cpu(), time.perf_counter()
        out.update(float_ranks(case))
    else:
        raise SystemExit(f"unknown method {method}")
    out["wall"] = time.perf_counter() - t0
    out["cpu"] = _cpu() - c0
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def run_one(method, name, cases_dir):
    limit = TIMEOUT.get(method, DEFAULT_TIMEOUT)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               EXACTIDENT_BENCH_CASES=cases_dir)
    if method != "float":  # one BLAS thread (the exact path's BLAS elimination too)
        env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, __file__, "--measure", method, name], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the whole group: no orphan keeps the CPU
        proc.communicate()
        return {"timeout": limit}
    if proc.returncode != 0:
        return {"error": stderr.strip().splitlines()[-1] if stderr.strip() else f"exit {proc.returncode}"}
    return json.loads(stdout.strip().splitlines()[-1])


def fmt(r):
    if r is None:
        return "-"
    if "timeout" in r:
        return f"> {r['timeout']} s (killed)"
    if "error" in r:
        return "error: " + r["error"][:60]
    return f"{r['cpu']:.3g} s cpu, {r['wall']:.3g} s wall, {r['peak_mb']:.0f} MB"


def ratio(ex, fl):
    if not ex or not fl or "cpu" not in ex or "cpu" not in fl or fl["cpu"] <= 0:
        return "-"
    return f"{ex['cpu'] / fl['cpu']:.2f}x"


def _load() -> str:
    try:
        with open("/proc/loadavg") as fh:
            return " ".join(fh.read().split()[:3])
    except OSError:
        return "?"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=False, help="markdown table to write (nothing is written without it)")
    ap.add_argument("--json", default=None, help="raw results as JSON")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", nargs="*", default=None, help="configuration names")
    ap.add_argument("--cases", default=None, help="directory with the scikit-learn cases (made if missing)")
    ap.add_argument("--methods", nargs="*", default=None,
                    help="only these methods (exact, structural, float1, float, sympy)")
    ap.add_argument("--measure", nargs=2, metavar=("METHOD", "CONFIG"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.measure:
        measure(*args.measure)
        return 0
    cases_dir = args.cases or tempfile.mkdtemp(prefix="exactident-bench-")
    names = [c[0] for c in CONFIGS if (not args.quick or c[0] in QUICK) and (not args.only or c[0] in args.only)]
    if any(next(c for c in CONFIGS if c[0] == nm)[1] == "sklearn" for nm in names):
        missing = [c[2][0] for c in CONFIGS if c[1] == "sklearn"
                   and not os.path.exists(os.path.join(cases_dir, c[2][0] + ".json"))]
        if missing:
            subprocess.run([sys.executable, os.path.join(ROOT, "examples", "train_benchmark_cases.py"),
                            "--out", cases_dir, *missing], check=True)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    results = {}
    loads = [_load()]
    for name in names:
        methods = [*next(c for c in CONFIGS if c[0] == name)[3], "structural"]
        methods = [m for m in methods if not args.methods or m in args.methods]
        results[name] = {}
        for m in methods:
            results[name][m] = run_one(m, name, cases_dir)
            print(name, m, results[name][m], flush=True)
        loads.append(_load())
    lines = [
        f"Run of `python benchmarks/run.py` started {started}; load average (1, 5, 15 min) at the start "
        f"and after each case: {'; '.join(loads)}.",
        "",
        "| case | Gamma | exact certified | float64, 1 BLAS thread | exact / float (CPU) | float64, threaded | "
        "sympy | verdict, ranks (exact; float) | certified by | with structural certificates |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        res = results[name]
        ex, f1 = res.get("exact"), res.get("float1")
        if ex and "cpu" in ex:
            ranks = f"{ex['verdict']}, {ex['rank_gamma']}, R_A {ex['rank_a']}"
            if ex.get("rank_a_lower_bound"):
                ranks += f" (>= {ex['rank_a_lower_bound']})"
        else:
            ranks = "-"
        if f1 and "cpu" in f1:
            ranks += f"; {f1['rank_gamma']}" + (f", R_A {f1['rank_a']}" if "rank_a" in f1 else "")
        by = ", ".join(f"{k}: {v}" for k, v in (ex or {}).get("certified_by", {}).items()) \
            if ex and ex.get("certified_by") else "-"
        shape = _shape(name)
        lines.append(f"| {name} | {shape} | {fmt(ex)} | {fmt(f1)} | {ratio(ex, f1)} | {fmt(res.get('float'))} | "
                     f"{fmt(res.get('sympy'))} | {ranks} | {by} | {_structural(res.get('structural'))} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        from exactident.io.atomic import atomic_write_text

        atomic_write_text(args.out, text)
    if args.json:
        from exactident.io.atomic import atomic_write_text

        atomic_write_text(args.json, json.dumps({"started": started, "loads": loads, "results": results}, indent=1))
    return 0


def _structural(r):
    if not r or "cpu" not in r:
        return fmt(r)
    return f"{r['verdict']} (`{r.get('decided_by')}`), {r['cpu']:.3g} s cpu"


def _shape(name):
    _, kind, params, _ = next(c for c in CONFIGS if c[0] == name)
    if kind in ("random", "planted"):
        widths, n = params[0], params[1]
    elif kind == "repeated":
        widths, n = (1, 1, 1), params[0]
    else:
        widths = {"breast": (30, 16, 1), "digits": (64, 16, 10)}[params[0].split("-")[0]]
        n = 200 if params[0].endswith("first200") else (569 if params[0].startswith("breast") else 1797)
    dim = sum(widths[l] * widths[l + 1] for l in range(len(widths) - 1)) + widths[-1]
    return f"{n * widths[-1]} x {dim}"


if __name__ == "__main__":
    sys.exit(main())
