"""Benchmark: exact certified check vs float64 SVD vs sympy, in one run; writes docs/performance.md.

Usage (from the repository root)::

    python benchmarks/run.py            # full table (about 10 minutes on 2 cores)
    python benchmarks/run.py --quick    # small and 1600 x 1231 sizes only

Every measurement runs in its own subprocess (fresh interpreter, so peak RSS
from ``resource.getrusage`` is that measurement's own), with a timeout.  The
case is built before the clock starts; what is timed:

- ``exact``: ``exactident.check(case, numeric=False)`` -- exact forward pass,
  ``Gamma mod p``, certified ranks (and ``R_A`` when the verdict needs it);
- ``float``: float64 network and sample, ``Gamma`` by backprop, ``numpy.linalg.matrix_rank``
  (plus the float Gram rank of ``alpha`` for the ``R_A`` case);
- ``sympy``: ``sympy.Matrix(Gamma).rank()`` on the exact rational ``Gamma``
  (building ``Gamma`` is not timed), and ``dm``: ``Matrix.to_DM().rank()``;
- ``fmpq``: ``check(case, numeric=False, modular=False)``, the rational reference path;
- ``ra``: the certified ``R_A`` alone (Gram matrix mod p, no ``alpha``), and
  ``ra_float``: the float Gram matrix + ``matrix_rank``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from fractions import Fraction

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # the checkout's exactident, installed or not

# name, widths, n, weights ("dyadic": float64 draws converted exactly; "int": small integers), methods
CONFIGS = [
    ("s0-dyadic", (2, 3, 3, 1), 30, "dyadic", 0, ["exact", "float", "float1", "sympy", "dm", "fmpq"]),
    ("s0-int", (2, 3, 3, 1), 30, "int", 0, ["exact", "float", "float1", "sympy", "dm", "fmpq"]),
    ("s05-dyadic", (3, 4, 4, 1), 40, "dyadic", 0, ["exact", "float", "float1", "sympy", "dm", "fmpq"]),
    ("s05-int", (3, 4, 4, 1), 40, "int", 0, ["exact", "float", "float1", "sympy", "dm", "fmpq"]),
    ("s1-dyadic", (3, 5, 5, 1), 60, "dyadic", 0, ["exact", "float", "float1", "sympy", "dm", "fmpq"]),
    ("s1-int", (3, 5, 5, 1), 60, "int", 0, ["exact", "float", "float1", "sympy", "dm", "fmpq"]),
    ("s2-dyadic", (4, 8, 8, 1), 150, "dyadic", 0, ["exact", "float", "float1", "dm", "fmpq"]),
    ("s2-int", (4, 8, 8, 1), 150, "int", 0, ["exact", "float", "float1", "dm", "fmpq"]),
    ("s3-dyadic", (6, 12, 12, 1), 400, "dyadic", 0, ["exact", "float", "float1", "dm", "fmpq"]),
    ("s3-int", (6, 12, 12, 1), 400, "int", 0, ["exact", "float", "float1", "dm", "fmpq"]),
    # seed 5: full rank (C_S holds); seed 0: two layer-2 neurons active on 14 and 19 samples
    # and one structurally zero column, rank 1201 < 1231 (the inconclusive, kernel-certified case)
    ("m-dyadic", (10, 30, 30, 1), 1600, "dyadic", 5, ["exact", "float", "float1", "fmpq"]),
    ("m-dyadic-deficient", (10, 30, 30, 1), 1600, "dyadic", 0, ["exact", "float"]),
    ("m-int", (10, 30, 30, 1), 1600, "int", 0, ["exact", "float", "float1", "fmpq"]),
    ("l-dyadic", (20, 50, 40, 1), 4000, "dyadic", 0, ["exact", "float"]),
    ("deep-dyadic", (10, 32, 32, 32, 32, 32, 1), 2000, "dyadic", 0, ["exact", "float", "float1", "ra", "ra_float"]),
]
QUICK = {"s0-dyadic", "s0-int", "s2-dyadic", "s2-int", "m-dyadic", "m-int"}
TIMEOUT = {"sympy": 120, "dm": 60, "fmpq": 60}


def build_case(widths, n, kind, seed=0):
    """A random case; small-integer networks are redrawn until no sample is on a kink (no ties)."""
    from exactident.model.activation import activation_state

    while True:
        case = _draw_case(widths, n, kind, seed)
        if not activation_state(case.network, case.X).ties:
            return case
        seed += 1000


def _draw_case(widths, n, kind, seed):
    import flint
    import numpy as np

    from exactident.io.case import Case
    from exactident.model.network import Network

    rng = np.random.default_rng(seed)

    def q(x):
        f = Fraction(int(x)) if kind == "int" else Fraction(float(x))  # exact binary64 value
        return flint.fmpq(f.numerator, f.denominator)

    def draw(shape, scale):
        if kind == "int":
            return rng.integers(-4, 5, size=shape)
        return rng.standard_normal(shape) * scale

    W = [flint.fmpq_mat(widths[l + 1], widths[l], [q(v) for v in draw((widths[l + 1], widths[l]),
                                                                      widths[l] ** -0.5).ravel()])
         for l in range(len(widths) - 1)]
    if kind == "int":
        # nonzero integer weights (never degenerate); b_l = odd / 2**l, so that z_l lies in
        # odd/2**l + Z/2**(l-1) and is never 0: no ties, whatever the draw
        W = [flint.fmpq_mat(M.nrows(), M.ncols(), [v if v != 0 else 1 for v in M.entries()]) for M in W]
        b = [[flint.fmpq(2 * int(v) + 1, 2 ** (l + 1)) for v in draw(widths[l + 1], 0)]
             for l in range(len(widths) - 1)]
    else:
        b = [[q(v) for v in draw(widths[l + 1], 0.3)] for l in range(len(widths) - 1)]
    X = [[q(v) for v in row] for row in draw((n, widths[0]), 1.0)]
    return Case(f"bench-{kind}", Network(tuple(widths), W, b), X)


def measure(method, name):
    cfg = next(c for c in CONFIGS if c[0] == name)
    _, widths, n, kind, seed, _ = cfg
    case = build_case(widths, n, kind, seed)
    out = {}
    if method in ("sympy", "dm"):
        import sympy

        from exactident.model.activation import activation_state
        from exactident.model.fixed_edges import fixed_edges
        from exactident.model.gamma import gamma_exact

        st = activation_state(case.network, case.X)
        G = gamma_exact(case.network, case.X, st.Z, st.pattern, fixed_edges(case.network))
        M = sympy.Matrix(G.nrows(), G.ncols(),
                         [sympy.Rational(int(v.p), int(v.q)) for v in G.entries()])
        t = time.perf_counter()
        out["rank_gamma"] = int(M.rank()) if method == "sympy" else int(M.to_DM().rank())
    elif method == "exact":
        from exactident.check import check

        t = time.perf_counter()
        r = check(case, numeric=False)
        out.update(rank_gamma=r.rank_gamma, rank_a=r.rank_a, verdict=r.verdict)
    elif method == "fmpq":
        from exactident.check import check

        t = time.perf_counter()
        r = check(case, numeric=False, modular=False)
        out.update(rank_gamma=r.rank_gamma, rank_a=r.rank_a, verdict=r.verdict)
    elif method in ("float", "float1", "ra_float"):
        import numpy as np

        from exactident.model.fixed_edges import fixed_edges
        from exactident.model.gamma import free_columns
        from exactident.numeric.numpy_backend import (
            alpha_float_gram,
            float_pattern,
            gamma_float,
            to_float_network,
            to_float_sample,
        )

        fixed = fixed_edges(case.network)
        cols = free_columns(case.network, fixed)
        t = time.perf_counter()
        fnet = to_float_network(case.network)
        Xf = to_float_sample(case.X, widths[0])
        if method in ("float", "float1"):
            out["rank_gamma"] = int(np.linalg.matrix_rank(gamma_float(fnet, Xf, fixed, cols)))
        if method == "ra_float" or (method in ("float", "float1") and name.startswith("deep")):
            out["rank_a"] = widths[-1] * int(np.linalg.matrix_rank(alpha_float_gram(float_pattern(fnet, Xf), Xf)))
    elif method == "ra":
        import random

        from exactident.model.activation import activation_state
        from exactident.ranks.certify import certify_rank_alpha

        t = time.perf_counter()
        st = activation_state(case.network, case.X)
        res = certify_rank_alpha(st.pattern, case.X, widths, rng=random.Random(0))
        out.update(rank_a=widths[-1] * res.rank, upper=res.certificate["upper"]["kind"])
    else:
        raise SystemExit(f"unknown method {method}")
    out["seconds"] = time.perf_counter() - t
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def run_one(method, name):
    limit = TIMEOUT.get(method, 900)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if method == "float1":  # one BLAS thread: immune to oversubscription on a shared machine
        env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    try:
        proc = subprocess.run([sys.executable, __file__, "--measure", method, name], capture_output=True,
                              text=True, timeout=limit, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"timeout": limit}
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fmt_t(r):
    if r is None:
        return "-"
    if "timeout" in r:
        return f"> {r['timeout']} s (timeout)"
    if "error" in r:
        return "error"
    return f"{r['seconds']:.3g} s / {r['peak_mb']:.0f} MB"


def ratio(a, b):
    if not a or not b or "seconds" not in a:
        return "-"
    if "timeout" in b:
        return f"> {b['timeout'] / a['seconds']:.3g}x"
    if "seconds" not in b:
        return "-"
    return f"{b['seconds'] / a['seconds']:.3g}x"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--measure", nargs=2, metavar=("METHOD", "CONFIG"), help=argparse.SUPPRESS)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "performance.md"))
    args = ap.parse_args(argv)
    if args.measure:
        measure(*args.measure)
        return 0
    from exactident.model.activation import n_paths

    rows = []
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for name, widths, n, kind, _seed, methods in CONFIGS:
        if args.quick and name not in QUICK:
            continue
        res = {}
        for m in methods:
            res[m] = run_one(m, name)
            print(name, m, res[m], flush=True)
        dim = sum(widths[l] * widths[l + 1] for l in range(len(widths) - 1)) + widths[-1]
        rows.append((name, widths, n, kind, dim, n_paths(widths), res))
    lines = [
        "# Performance: exact certified ranks vs float64 vs sympy",
        "",
        f"Generated by `python benchmarks/run.py{' --quick' if args.quick else ''}` on {started}, "
        f"on this project's 2-core machine ({os.cpu_count()} CPUs visible); single runs, so "
        "compare within a row.",
        "",
        "Each cell is wall time / peak RSS of a fresh subprocess (the interpreter, numpy and FLINT "
        "included, ~60-80 MB). Building the case is not timed. *exact* = the whole certified "
        "`check(case, numeric=False)`; *float* = float64 `Gamma` by backprop + `numpy.linalg.matrix_rank`; "
        "*sympy* = `Matrix(Gamma).rank()` and *DomainMatrix* = `Matrix.to_DM().rank()` on the exact "
        "`Gamma` (building it not timed); *fmpq ref* = the rational reference path "
        "(`modular=False`: `gamma_exact` + FLINT `fmpz_mat.rank`).",
        "",
        "| case | widths | n | weights | Gamma shape | exact certified | float64 | exact / float | "
        "float64, 1 BLAS thread | exact / float 1-thread | "
        "sympy Matrix.rank | sympy / exact | DomainMatrix | fmpq ref | ranks (exact; float) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, widths, n, kind, dim, _P, res in rows:
        ex, fl = res.get("exact"), res.get("float")
        er = f"{ex.get('rank_gamma')}, R_A {ex.get('rank_a')}, {ex.get('verdict')}" if ex and "seconds" in ex else "-"
        fr = f"{fl.get('rank_gamma')}" + (f", R_A {fl['rank_a']}" if fl and "rank_a" in fl else "") \
            if fl and "seconds" in fl else "-"
        ef = (f"{ex['seconds'] / fl['seconds']:.2f}" if ex and fl and "seconds" in ex and "seconds" in fl else "-")
        f1 = res.get("float1")
        ef1 = (f"{ex['seconds'] / f1['seconds']:.2f}" if ex and f1 and "seconds" in ex and "seconds" in f1
               else "-")
        lines.append(f"| {name} | {','.join(map(str, widths))} | {n} | {kind} | {n * widths[-1]} x {dim} | "
                     f"{fmt_t(ex)} | {fmt_t(fl)} | {ef} | {fmt_t(f1)} | {ef1} | {fmt_t(res.get('sympy'))} | "
                     f"{ratio(ex, res.get('sympy'))} | {fmt_t(res.get('dm'))} | {fmt_t(res.get('fmpq'))} | "
                     f"{er}; {fr} |")
    ra_rows = [(name, widths, n, P, res) for name, widths, n, kind, dim, P, res in rows if "ra" in res]
    if ra_rows:
        lines += ["", "## R_A without materialising alpha", "",
                  "| case | widths | n | paths |P| | certified R_A (Gram mod p) | float Gram + matrix_rank | "
                  "R_A (exact; float) | upper bound used |", "|---|---|---|---|---|---|---|---|"]
        for name, widths, n, P, res in ra_rows:
            ra, rf = res["ra"], res.get("ra_float", {})
            lines.append(f"| {name} | {','.join(map(str, widths))} | {n} | {P:.3e} | {fmt_t(ra)} | {fmt_t(rf)} | "
                         f"{ra.get('rank_a')}; {rf.get('rank_a')} | {ra.get('upper')} |")
    text = "\n".join(lines) + "\n"
    # Hand-written analysis below the marker survives a rerun.
    marker = "<!-- notes: kept by benchmarks/run.py -->"
    if os.path.exists(args.out):
        with open(args.out) as fh:
            old = fh.read()
        if marker in old:
            text += "\n" + marker + old.split(marker, 1)[1]
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    tmp = args.out + ".tmp"
    with open(tmp, "w") as fh:
        fh.write(text)
    os.replace(tmp, args.out)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
