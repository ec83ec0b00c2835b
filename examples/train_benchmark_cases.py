"""Train the rank-deficient scikit-learn MLPs of the benchmarks and write them as exact case files.

Three cases, the "trained network" rows of docs/performance.md:

- ``breast-cancer-mlp-30-16-1``: ``MLPClassifier(hidden_layer_sizes=(16,))`` on
  ``load_breast_cancer`` (569 samples, 30 features; binary, so ``N_L = 1``: the logit),
  sample = all 569 training rows;
- ``digits-mlp-64-16-10-first200``: ``MLPClassifier(hidden_layer_sizes=(16,))`` on
  ``load_digits`` (1797 samples, 64 features, 10 classes), sample = the first 200 rows;
- ``digits-mlp-64-16-10``: the same network, sample = all 1797 rows.

Features are standardised with ``StandardScaler`` (constant pixels of the digits become
exact zero columns).  Every parameter and input is written as the *exact* dyadic value of
its float64 (``fractions.Fraction(x)``, no rounding), and the export is checked to
reproduce sklearn's logits and probabilities (:func:`train_sklearn_cases.check_faithful`).
Training is seeded (``random_state=0``, ``solver="lbfgs"``), so the same scikit-learn
version gives the same weights.

Usage (needs the optional extra: ``pip install '.[sklearn]'``)::

    python examples/train_benchmark_cases.py --out DIR
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # reuse the shipped cases' exporter
try:
    import exactident  # noqa: F401
except ImportError:  # source checkout without install
    sys.path.insert(0, str(HERE.parent))

from train_sklearn_cases import (  # noqa: E402
    FAITHFUL_RTOL,
    _classifier,
    _params_text,
    _require_sklearn,
    check_faithful,
    export_network,
    export_sample,
)

from exactident.io.case import Case, write_case  # noqa: E402

#: name -> (loader, hidden layer sizes, random_state, number of sample rows or None for all)
CASES: dict[str, tuple[str, tuple[int, ...], int, int | None]] = {
    "breast-cancer-mlp-30-16-1": ("load_breast_cancer", (16,), 0, None),
    "digits-mlp-64-16-10-first200": ("load_digits", (16,), 0, 200),
    "digits-mlp-64-16-10": ("load_digits", (16,), 0, None),
}


def build(names: Sequence[str] | None = None) -> list[Case]:
    """Train (once per distinct model) and export the requested cases, faithfulness checked."""
    sklearn = _require_sklearn()
    from sklearn.exceptions import ConvergenceWarning

    models: dict[tuple, tuple] = {}
    out = []
    for name in names or list(CASES):
        loader, hidden, seed, rows = CASES[name]
        key = (loader, hidden, seed)
        if key not in models:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                models[key] = _classifier(loader, hidden, seed)
        model, X, params, data = models[key]
        Xs = X if rows is None else X[:rows]
        net = export_network(model.coefs_, model.intercepts_)
        X_exact = export_sample(Xs)
        check_faithful(net, X_exact, model, Xs, "classifier" if len(model.classes_) > 2 else "binary")
        sample = "all training inputs" if rows is None else f"the first {rows} training inputs"
        description = (
            f"Produced by examples/train_benchmark_cases.py with scikit-learn {sklearn.__version__}: "
            f"{_params_text('sklearn.neural_network.MLPClassifier', params)} fit on {data}. "
            f"Output = the logits (affine last layer). Sample = {sample}. Weights and sample are the "
            "exact dyadic values of the float64 parameters and inputs (fractions.Fraction(float)); "
            f"the export reproduces sklearn's outputs to {FAITHFUL_RTOL:g} relative in float64.")
        out.append(Case(name=name, network=net, X=X_exact, description=description))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="directory for the case files")
    parser.add_argument("names", nargs="*", choices=[*CASES, []], metavar="NAME",
                        help=f"cases to write (default: all of {', '.join(CASES)})")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cases: list[Any] = build(args.names or None)
    for case in cases:
        path = out / f"{case.name}.json"
        write_case(case, path)
        print(f"wrote {path}: widths {list(case.widths)}, n = {case.n_samples}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
