"""Benchmark: ``exactident explain`` and ``exactident design`` on the shipped real cases (docs/explain.md).

Usage (from the repository root)::

    python benchmarks/explain_design.py                    # about 30 s on 2 cores
    python benchmarks/explain_design.py --breast-cancer    # adds the 30-16-1 network (about 12 min: check's rank A)

Each command runs in a fresh process (wall clock, Python start-up included).  For each case:
the verdict, the kernel dimension, the smallest identifying prefix, the subsample found and
the lower bound ``ceil(dim / N_L)``, or the points ``design`` adds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = ["diabetes-mlp-10-8-1", "wine-mlp-13-8-3", "iris-mlp-4-8-8-3", "diabetes-mlp-10-8-1-first10"]


def _timed(argv: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "exactident", *argv], capture_output=True, text=True, cwd=ROOT,
                          check=True)
    return time.perf_counter() - start, proc.stdout


def row(path: str, extra: list[str] = ()) -> str:
    t_explain, out = _timed(["explain", "--json", path])
    report = json.loads(out)
    nullity = sum(report["dim"] - b["rank_gamma"] for b in report["kernel_basis"])
    t_design, out = _timed(["design", "--json", path, *extra])
    d = json.loads(out)
    prefix = d["prefix"]["length"] if d["prefix"] else "-"
    sub = d["subsample"]["size"] if d["subsample"] else "-"
    pts = len(d["points"]["added"]) if d["points"] else 0
    return (f"{os.path.basename(path):34s} {report['verdict']:17s} kernel {nullity:3d}  prefix {prefix!s:>4}  "
            f"subsample {sub!s:>4} / lower bound {d['lower_bound']:4d}  points {pts:3d}  "
            f"explain {t_explain:6.1f}s  design {t_design:5.1f}s  new case: "
            f"{(d['new_case'] or {}).get('verdict', '-')}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--breast-cancer", action="store_true", help="also the 30-16-1 breast-cancer network")
    args = parser.parse_args()
    for name in CASES:
        print(row(os.path.join(ROOT, "cases", f"{name}.json")), flush=True)
    print(row(os.path.join(ROOT, "cases", "iris-mlp-4-8-8-3.json"), ["--box=-20:20"]) + "  (--box=-20:20)")
    if args.breast_cancer:
        sys.path.insert(0, os.path.join(ROOT, "examples"))
        from explain_breast_cancer import train

        from exactident import from_sklearn
        from exactident.io.case import write_case

        model, X = train(0)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "breast-cancer-mlp-30-16-1.json")
            write_case(from_sklearn(model, X, name="breast-cancer-mlp-30-16-1"), path)
            print(row(path), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
