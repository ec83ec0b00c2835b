"""Verdicts on real networks before and after the structural certificates (docs/theory.md).

Usage (from the repository root; needs scikit-learn)::

    python benchmarks/structural.py            # shipped real cases + trained MLPs, about 10 minutes
    python benchmarks/structural.py --quick    # shipped real cases + iris networks only

For each network: ``check(case, numeric=False, structural=False)`` (the rank rules:
Theorems 8/9 and the boundary rules) and ``check(case, numeric=False)`` (then the
structural certificates and the line search for ``inconclusive``), the rule that decided
(``decided_by``), the time of each, and whether ``verify_certificate`` accepts the report.
Trained networks are scikit-learn ``MLPClassifier`` (relu, ``max_iter=2000``) fitted on
standardised features of iris, wine, breast cancer and digits, imported exactly with
:func:`exactident.from_sklearn` on their training data.  Prints a Markdown table and counts.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # the checkout's exactident, installed or not

# dataset, hidden layer sizes, seeds, samples used (None: all)
TRAINED = [
    ("iris", (16,), (0, 1, 2), None),
    ("iris", (16, 8), (0, 1, 2), None),
    ("iris", (8, 8), (0, 1), None),
    ("wine", (16,), (0, 1), None),
    ("wine", (8, 8), (0, 1), None),
    ("breast_cancer", (16,), (0, 1), None),
    ("breast_cancer", (8, 8), (0,), None),
    ("digits", (16,), (0,), 300),
]
QUICK = [row for row in TRAINED if row[0] == "iris"]
SHIPPED = ["diabetes-mlp-10-8-1", "diabetes-mlp-10-8-1-first10", "iris-mlp-4-8-8-3", "wine-mlp-13-8-3"]


def _trained(dataset: str, hidden: tuple[int, ...], seed: int, n: int | None):
    import warnings

    from sklearn import datasets
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier
    from sklearn.preprocessing import StandardScaler

    from exactident import from_sklearn

    X, y = getattr(datasets, f"load_{dataset}")(return_X_y=True)
    if n is not None:
        X, y = X[:n], y[:n]
    X = StandardScaler().fit_transform(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = MLPClassifier(hidden, activation="relu", max_iter=2000, random_state=seed).fit(X, y)
    widths = "-".join(map(str, [X.shape[1], *hidden, model.n_outputs_]))
    return from_sklearn(model, X, name=f"{dataset}-{widths}-s{seed}" + (f"-n{n}" if n else ""))


def _row(case) -> dict:
    from exactident.check import check
    from exactident.verify.certificate import verify_certificate

    t = time.perf_counter()
    before = check(case, numeric=False, structural=False)
    t_before = time.perf_counter() - t
    t = time.perf_counter()
    after = check(case, numeric=False)
    t_after = time.perf_counter() - t
    t = time.perf_counter()
    valid, msgs = verify_certificate(case, after.to_dict(), require_claims=True)
    t_verify = time.perf_counter() - t
    part = (after.certificate or {}).get("structural") or {}
    return {"name": case.name, "widths": "-".join(map(str, case.network.widths)), "n": len(case.X),
            "ranks": f"{after.rank_gamma} / {after.rank_a} / {after.dim}", "before": before.verdict,
            "before_rule": before.decided_by, "after": after.verdict, "rule": after.decided_by,
            "neurons": part.get("neurons"), "valid": valid, "t_before": t_before, "t_after": t_after,
            "t_verify": t_verify, "problems": [] if valid else msgs[-3:]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="shipped cases and the iris networks only")
    args = ap.parse_args(argv)
    from exactident.io.case import load_case

    rows = []
    for name in SHIPPED:
        rows.append(_row(load_case(os.path.join(ROOT, "cases", f"{name}.json"))))
        print(f"done {name}", file=sys.stderr)
    for dataset, hidden, seeds, n in QUICK if args.quick else TRAINED:
        for seed in seeds:
            case = _trained(dataset, hidden, seed, n)
            rows.append(_row(case))
            print(f"done {case.name}", file=sys.stderr)
    print("| network | n | R_Gamma / R_A / dim | before (rule) | after | decided_by | neurons | verifies | "
          "time before / after / verify |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        neurons = ", ".join(f"({l},{v})" for l, v in r["neurons"]) if r["neurons"] else ""
        print(f"| {r['name']} | {r['n']} | {r['ranks']} | {r['before']} ({r['before_rule']}) | {r['after']} | "
              f"{r['rule']} | {neurons} | {'yes' if r['valid'] else 'NO'} | "
              f"{r['t_before']:.1f} / {r['t_after']:.1f} / {r['t_verify']:.1f} s |")
    print()
    print("before:", dict(Counter(r["before"] for r in rows)))
    print("after:", dict(Counter(r["after"] for r in rows)))
    print("decided_by after:", dict(Counter(r["rule"] for r in rows)))
    bad = [r for r in rows if not r["valid"]]
    for r in bad:
        print(f"INVALID {r['name']}: {r['problems']}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
