"""The ``trained`` family: small ReLU MLPs trained with scikit-learn on its bundled data sets, weights exact.

Needs the optional extra (``pip install 'exactident[suites]'``).  Inputs are the
first ``N_0`` standardised features of a bundled data set with enough of them
(diabetes, iris, wine; no download); targets are diabetes' disease progression
(``N_L = 1``) or one-hot classes (``N_L <= 3``).  An ``MLPRegressor`` (ReLU, lbfgs,
seed derived from the request) is trained on every row; its float64 parameters
become the exact dyadic rationals they are (``Fraction(x)`` of a binary64 is
exact), and the sample is a hashed choice of training rows, converted the
same way.  Training is float arithmetic: the same request gives the same case
only with the same scikit-learn (recorded in the ``generator`` block) and BLAS.
"""

from __future__ import annotations

import warnings
from fractions import Fraction
from typing import Any

from exactident.suites.draft import Draft
from exactident.suites.exact import degenerate_neurons, round_binary
from exactident.suites.families.common import Family, Unmet, n_above
from exactident.suites.rng import HashRng

__all__ = ["FAMILIES"]

#: (name, loader, number of features, outputs it can provide)
_DATASETS = (("diabetes", "load_diabetes", 10, 1), ("iris", "load_iris", 4, 3), ("wine", "load_wine", 13, 3))


def _trained_impossible(widths: list[int]) -> str | None:
    if len(widths) < 3:
        return "scikit-learn's MLPs have at least one hidden layer (L >= 2)"
    if not _eligible(widths):
        return f"no bundled data set has >= {widths[0]} features and >= {widths[-1]} outputs"
    return None


def _eligible(widths: list[int]) -> list[tuple[str, str, int, int]]:
    return [d for d in _DATASETS if d[2] >= widths[0] and d[3] >= widths[-1]]


def _import_sklearn() -> Any:
    try:
        import sklearn
        from sklearn import datasets, neural_network
    except ImportError:
        raise Unmet("the trained family needs scikit-learn: pip install 'exactident[suites]'") from None
    return sklearn, datasets, neural_network


def _build_trained(rng: HashRng, widths: list[int], index: int, n_samples: int | None) -> Draft:
    import numpy as np

    sklearn, datasets, neural_network = _import_sklearn()
    name, loader, _, _ = (options := _eligible(widths))[index % len(options)]
    data = getattr(datasets, loader)()
    X = np.asarray(data.data, dtype=np.float64)[:, : widths[0]]
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    if name == "diabetes":
        y = np.asarray(data.target, dtype=np.float64)
        Y = ((y - y.mean()) / y.std()).reshape(-1, 1)
    else:
        Y = np.eye(3)[np.asarray(data.target)][:, : widths[-1]]
    seed = rng.below(2**31)
    model = neural_network.MLPRegressor(hidden_layer_sizes=tuple(widths[1:-1]), activation="relu", solver="lbfgs",
                                        max_iter=400, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning: a partly trained network is still a network
        model.fit(X, Y if widths[-1] > 1 else Y.ravel())
    n = n_samples if n_samples is not None else n_above(widths)
    rows = rng.sample_indices(len(X), n)
    W = [[[Fraction(float(v)) for v in row] for row in np.asarray(c).T] for c in model.coefs_]
    b = [[Fraction(float(v)) for v in c] for c in model.intercepts_]
    sample = [[Fraction(float(v)) for v in X[i]] for i in rows]
    d = Draft(list(widths), W, b, sample)
    # Faithful export: the exact network's float64 forward pass reproduces model.predict.
    h = np.array([[float(v) for v in x] for x in sample]).reshape(len(sample), widths[0])
    for l, (Wl, bl) in enumerate(zip(W, b)):
        h = h @ np.array([[float(v) for v in r] for r in Wl]).T + np.array([float(v) for v in bl])
        if l < len(W) - 1:
            h = np.maximum(h, 0.0)
    pred = np.asarray(model.predict(X[rows])).reshape(len(rows), -1)
    if not np.allclose(h, pred, rtol=1e-12, atol=1e-12):
        raise Unmet("the exported network does not reproduce scikit-learn's predictions")
    d.params.update({"dataset": name, "rows": rows, "sklearn": sklearn.__version__, "random_state": seed})
    d.description = (f"MLPRegressor{tuple(widths[1:-1])} trained on {name} (first {widths[0]} standardised "
                     f"features), weights exact; sample = {n} training rows")
    return d


def _verify_trained(d: Draft) -> str | None:
    numbers = [v for Wl in d.W for r in Wl for v in r] + [v for bl in d.b for v in bl] + [v for x in d.X for v in x]
    if any(round_binary(v, 53, -1022) != v for v in numbers):
        return "a parameter or sample value is not a float64 value"
    return "neurons in S" if degenerate_neurons(d) else None


#: The families defined here (collected in ``exactident.suites.families.FAMILIES``).
#:
#: :meta hide-value:
FAMILIES = [
    Family("trained", "small MLPs trained with scikit-learn on its bundled data sets (diabetes, iris, wine), "
           "weights exact (needs scikit-learn)", "every weight, bias and sample value is exactly a float64 of the "
           "trained model, whose predictions the exact network reproduces; no neuron in S", _build_trained,
           _verify_trained, _trained_impossible, needs="sklearn"),
]
