"""Explain and design on a breast-cancer-sized network (docs/explain.md, "A breast-cancer network").

Trains a 30-16-1 ReLU MLP on scikit-learn's bundled breast-cancer data (569 samples, no
download), seeded, converts it exactly (the float64 weights as the dyadic rationals they
are, :func:`exactident.from_sklearn`), then runs ``explain`` and ``design`` and prints
their terminal views.  The case file (about 650 KB) is written only with ``--out``.

Usage (needs the optional extra: ``pip install '.[sklearn]'``)::

    python examples/explain_breast_cancer.py [--out bc.json] [--seed 0]

``check`` itself (inside ``explain``) dominates the time: it certifies ``rank A`` for the
verdict; ``design`` needs only the exact kernel of ``Gamma`` while ``C_S`` fails.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

try:
    import exactident  # noqa: F401
except ImportError:  # a source checkout that is not installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from exactident import from_sklearn
from exactident.explain.core import explain
from exactident.explain.design import design
from exactident.explain.design_command import render_design
from exactident.explain.render import render_explanation
from exactident.io.case import write_case


def train(seed: int):
    """The seeded 30-16-1 MLPClassifier on the standardised breast-cancer data, and its inputs."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.neural_network import MLPClassifier
    from sklearn.preprocessing import StandardScaler

    X_raw, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X_raw)
    model = MLPClassifier(hidden_layer_sizes=(16,), activation="relu", solver="lbfgs", max_iter=2000,
                          random_state=seed).fit(X, y)
    return model, X


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="also write the case file here")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    model, X = train(args.seed)
    case = from_sklearn(model, X, name="breast-cancer-mlp-30-16-1")
    if args.out:
        write_case(case, args.out)
    start = time.perf_counter()
    d = design(case, seed=args.seed)
    print(render_design(d))
    print(f"design: {time.perf_counter() - start:.1f}s")
    start = time.perf_counter()
    report, ex = explain(case, seed=args.seed)
    print(render_explanation(report, ex, max_directions=3))
    print(f"explain: {time.perf_counter() - start:.1f}s in all, {ex.seconds:.1f}s after check's report")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
