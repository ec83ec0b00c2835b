"""Benchmark: the cost estimate of ``check`` against measured times (docs/performance.md, "What will be slow").

Usage (from the repository root)::

    python benchmarks/estimate_calibration.py [--budget SECONDS]   # a few minutes on 2 cores

For [3, 4, 4, 2] networks with 20 samples whose every number is a fraction of two
D-digit integers of mixed sign (D = 5 ... 500), and a few wider networks, it prints
the estimate of :mod:`exactident.ranks.estimate` (likely and worst case) beside the CPU time
of ``check`` (exact only, then with the float cross-check), each case in a fresh child
process with a budget (``--budget``, default 300 s per case).  The constants of
``exactident/ranks/estimate.py`` were fitted by eye on this table; the estimate is meant to
tell seconds from minutes from hours.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SHAPES = [([3, 4, 4, 2], 20, d) for d in (5, 25, 50, 100, 250, 500)] + [([3, 8, 8, 2], 40, 25), ([3, 8, 8, 2], 40, 100),
                                                                          ([4, 8, 8, 8, 2], 40, 25)]


def make(widths: list[int], n: int, digits: int, seed: int = 3) -> dict:
    rng = random.Random(seed)

    def num() -> str:
        p, q = rng.randrange(10 ** (digits - 1), 10 ** digits), rng.randrange(10 ** (digits - 1), 10 ** digits)
        return f"{'-' if rng.random() < 0.3 else ''}{p}/{q}"
    L = len(widths) - 1
    return {"format": "exactident-case/1", "name": f"{'-'.join(map(str, widths))}-n{n}-d{digits}", "widths": widths,
            "weights": [[[num() for _ in range(widths[l])] for _ in range(widths[l + 1])] for l in range(L)],
            "biases": [[num() for _ in range(widths[l + 1])] for l in range(L)],
            "sample": [[num() for _ in range(widths[0])] for _ in range(n)]}


def cpu_seconds(case, numeric: bool, budget: float) -> str:
    from exactident.budget import run_isolated
    from exactident.check import check

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = run_isolated(lambda: check(case, numeric=numeric).verdict, budget)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return f"> {budget:.0f} s (at {out.stage})" if out.timed_out else f"{used:.1f} s ({out.value})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=300.0)
    args = parser.parse_args()
    from exactident.io.case import parse_case
    from exactident.ranks.estimate import estimate

    print("| case | estimate (likely / worst) | exact CPU | with float cross-check |")
    print("|---|---|---|---|")
    for widths, n, digits in SHAPES:
        case = parse_case(make(widths, n, digits))
        est = estimate(case)
        print(f"| {case.name} | {est.seconds:.1f} s / {est.worst:.1f} s | {cpu_seconds(case, False, args.budget)} "
              f"| {cpu_seconds(case, True, args.budget)} |", flush=True)


if __name__ == "__main__":
    main()
