"""Benchmark: ``verify-certificate`` against ``check``, CPU time, on the same cases (docs/performance.md).

Usage (from the repository root; writes nothing)::

    python benchmarks/verify.py                       # shipped cases (cases/*.json) and cases/suite-v1
    python benchmarks/verify.py --bench               # + the random/planted cases of benchmarks/run.py
    python benchmarks/verify.py --cases DIR           # + the case files in DIR (e.g. the scikit-learn
                                                      #   MLPs of examples/train_benchmark_cases.py)

For each case: CPU time (``time.process_time``, this process, one BLAS thread advised:
``OPENBLAS_NUM_THREADS=1``) of ``check(case, numeric=False)`` and of
``verify_certificate(case, report, require_claims=True)`` on that report (after a JSON
round trip), and whether the report verifies.  The case is built before the clock
starts; a warm-up case runs first (imports).  Prints one line per case and totals;
the suite is summarised (total, worst ratio) rather than listed.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # the checkout's exactident, installed or not


def measure(case) -> tuple[float, float, bool]:
    from exactident.check import check
    from exactident.verify.certificate import verify_certificate

    t = time.process_time()
    report = check(case, numeric=False)
    t_check = time.process_time() - t
    d = json.loads(json.dumps(report.to_dict()))
    t = time.process_time()
    ok, _ = verify_certificate(case, d, require_claims=True)
    return t_check, time.process_time() - t, ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", action="store_true", help="add the random and planted cases of benchmarks/run.py")
    ap.add_argument("--cases", default=None, help="a folder of more case files")
    ap.add_argument("--no-suite", action="store_true", help="skip cases/suite-v1")
    args = ap.parse_args(argv)
    from exactident.io.case import load_case

    measure(load_case(os.path.join(ROOT, "cases", "tiny-111-kink.json")))  # warm-up: imports
    named = [(os.path.basename(p)[:-5], lambda p=p: load_case(p))
             for p in sorted(glob.glob(os.path.join(ROOT, "cases", "*.json")))]
    if args.cases:
        named += [(os.path.basename(p)[:-5], lambda p=p: load_case(p))
                  for p in sorted(glob.glob(os.path.join(args.cases, "*.json")))]
    if args.bench:
        sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
        import run as bench_run  # the benchmark's own case builders

        named += [(name, lambda name=name: bench_run.build(name)) for name, kind, _, _ in bench_run.CONFIGS
                  if kind in ("random", "planted", "repeated")]
    print("| case | check | verify | verify / check | verifies |")
    print("|---|---|---|---|---|")
    for name, build in named:
        tc, tv, ok = measure(build())
        print(f"| {name} | {tc:.3g} s | {tv:.3g} s | {tv / max(tc, 1e-9):.2f}x | {ok} |", flush=True)
    if not args.no_suite:
        paths = sorted(p for p in glob.glob(os.path.join(ROOT, "cases", "suite-v1", "*", "*.json")))
        rows = [measure(load_case(p)) for p in paths]
        tc, tv = sum(r[0] for r in rows), sum(r[1] for r in rows)
        worst = max(r[1] / max(r[0], 1e-9) for r in rows)
        print(f"| suite-v1 ({len(rows)} cases, total) | {tc:.3g} s | {tv:.3g} s | {tv / tc:.2f}x "
              f"(worst case {worst:.1f}x) | {sum(r[2] for r in rows)} of {len(rows)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
