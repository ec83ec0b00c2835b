"""Train small ReLU MLPs with scikit-learn and export them as exact case files.

This is how the real networks in ``cases/`` were produced (issue 2, item 9).
Each network is trained, seeded, on a dataset that ships with scikit-learn (no
download), and its float64 parameters are written as the *exact* dyadic
rationals they are: ``fractions.Fraction(x)`` of a binary64 ``x`` is exact, so
no rounding happens anywhere between the trained model and the case file.
The sample of each case is the real training input, also converted exactly.

Usage (needs the optional extra: ``pip install '.[sklearn]'``)::

    python examples/train_sklearn_cases.py            # writes into cases/
    python examples/train_sklearn_cases.py --out DIR  # somewhere else

Before writing, the script checks that the exported network is faithful: the
exact parameters convert back to the very same float64 values, and a float64
forward pass of the exported network reproduces ``model.predict`` (regressor)
or the logits and ``predict_proba`` (classifier) to 1e-12 relative.

An ``expected`` block is added only for the sklearn version under which its
values were confirmed by the independent computation in
``tests/test_real_cases.py`` (a different sklearn may train different weights).
The same sklearn can also train different float64 weights on another CPU: lbfgs
goes through OpenBLAS, which picks its kernels (and so the order of its sums) by
CPU. The shipped cases were trained with the AVX-512 kernels OpenBLAS calls
``SkylakeX``; ``OPENBLAS_CORETYPE=SkylakeX OPENBLAS_NUM_THREADS=1 python
examples/train_sklearn_cases.py --out DIR`` reproduces them bit for bit on an
AVX-512 CPU (Intel or AMD).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import flint
import numpy as np

try:
    import exactident  # noqa: F401
except ImportError:  # run from a source checkout without installing: use the checkout's package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from exactident.io.case import Case, write_case
from exactident.io.rationals import to_fmpq
from exactident.model.network import Network

#: Relative agreement required between the exported network and sklearn.
FAITHFUL_RTOL = 1e-12

#: ``expected`` blocks, confirmed by the independent oracle of
#: tests/test_real_cases.py, valid for the weights trained by this sklearn version.
CONFIRMED_WITH_SKLEARN = "1.9.1"


def _expected(verdict: str, dim: int, rank_gamma: int, rank_a: int, decided_by: str) -> dict[str, Any]:
    return {"verdict": verdict, "decided_by": decided_by, "on_boundary": False, "degenerate": False, "n_ties": 0,
            "dim": dim, "rank_gamma": rank_gamma, "rank_a": rank_a}


# Values from the independent oracle (sympy DomainMatrix ranks of a Fraction backprop
# Jacobian and an explicitly enumerated alpha), not from exactident's own output.
# ``rank_a`` is the true N_L * rank alpha (``exactident check`` prints it when C_S
# fails, or always with --all-ranks).  ``decided_by`` is the oracle's rule too: Theorem 9 or 8, or
# for iris (where neither applies) layer-2 neurons whose active samples do not pin their hyperplane.
EXPECTED: dict[str, dict[str, Any]] = {
    "diabetes-mlp-10-8-1": _expected("identifiable", 89, 89, 89, "theorem-9"),
    "diabetes-mlp-10-8-1-first10": _expected("not-identifiable", 89, 10, 10, "theorem-8"),
    "iris-mlp-4-8-8-3": _expected("not-identifiable", 123, 109, 237, "unpinned-hyperplane"),
    "wine-mlp-13-8-3": _expected("identifiable", 131, 131, 321, "theorem-9"),
}


def _require_sklearn() -> Any:
    try:
        import sklearn
    except ImportError:
        sys.exit("this script needs scikit-learn: pip install 'exactident[sklearn]' "
                 "(or pip install scikit-learn)")
    return sklearn


def exact(x: float) -> Fraction:
    """The exact rational value of a binary64 number (a dyadic rational)."""
    return Fraction(float(x))


def export_network(coefs: Sequence[np.ndarray], intercepts: Sequence[np.ndarray]) -> Network:
    """sklearn parameters -> exact :class:`Network`.

    sklearn's ``coefs_[l]`` has shape ``(N_l, N_{l+1})`` (inputs x outputs), so
    the paper's ``W_{l+1}`` is its transpose; ``intercepts_[l]`` is ``b_{l+1}``.
    """
    widths = tuple([coefs[0].shape[0]] + [c.shape[1] for c in coefs])
    W = [flint.fmpq_mat([[to_fmpq(exact(v)) for v in row] for row in np.asarray(c, dtype=np.float64).T])
         for c in coefs]
    b = [[to_fmpq(exact(v)) for v in np.asarray(i, dtype=np.float64)] for i in intercepts]
    return Network(widths, W, b)


def export_sample(X: np.ndarray) -> list[list[flint.fmpq]]:
    """Float64 inputs ``(n, N_0)`` -> ``n`` rows of exact ``fmpq`` (no rounding)."""
    return [[to_fmpq(exact(v)) for v in row] for row in np.asarray(X, dtype=np.float64)]


def _to_float(q: flint.fmpq) -> float:
    return int(q.p) / int(q.q)  # correctly rounded; exact for dyadics that came from floats


def float_forward(net: Network, X: Sequence[Sequence[flint.fmpq]]) -> np.ndarray:
    """Float64 forward pass of the *exported* network: output of the last affine layer, ``(n, N_L)``."""
    h = np.array([[_to_float(v) for v in row] for row in X], dtype=np.float64)
    for l, (M, bl) in enumerate(zip(net.W, net.b), start=1):
        Wf = np.array([[_to_float(M[i, j]) for j in range(M.ncols())] for i in range(M.nrows())])
        h = h @ Wf.T + np.array([_to_float(v) for v in bl])
        if l < net.L:
            h = np.maximum(h, 0.0)
    return h


def _require(condition: bool, message: str) -> None:
    # Not ``assert``: the check must also run under ``python -O``.
    if not condition:
        raise AssertionError(message)


def _assert_close(ours: np.ndarray, theirs: np.ndarray, what: str) -> None:
    scale = max(float(np.max(np.abs(theirs))), 1e-300)
    err = float(np.max(np.abs(ours - theirs))) / scale
    _require(err <= FAITHFUL_RTOL, f"{what}: exported network differs from sklearn (rel. err {err:.3g})")


def check_faithful(net: Network, X_exact: Sequence[Sequence[flint.fmpq]], model: Any,
                   X: np.ndarray, kind: str) -> None:
    """Check that the exported exact case reproduces the trained float64 model.

    Parameters
    ----------
    net : Network
        The exported network (exact, Q).
    X_exact : n rows of N_0 fmpq
        The exported sample.
    model : sklearn MLPRegressor or MLPClassifier
        The trained model.
    X : ndarray, shape (n, N_0), float64
        The inputs the model was trained on (rows matching ``X_exact``).
    kind : {"regressor", "classifier", "binary"}

    Raises
    ------
    AssertionError
        If a parameter or sample value does not convert back to the same float64
        bit for bit, or if the float64 forward pass of the export differs from
        ``model.predict`` (regressor), or from the logits and ``predict_proba``
        (classifier), by more than ``FAITHFUL_RTOL`` relative.
    """
    for l, (c, i) in enumerate(zip(model.coefs_, model.intercepts_)):
        back = np.array([[_to_float(net.W[l][r, s]) for s in range(net.W[l].ncols())]
                         for r in range(net.W[l].nrows())])
        _require(np.array_equal(back, c.T), f"W_{l + 1} does not round-trip bit for bit")
        _require(np.array_equal(np.array([_to_float(v) for v in net.b[l]]), i),
                 f"b_{l + 1} does not round-trip bit for bit")
    _require(np.array_equal(np.array([[_to_float(v) for v in row] for row in X_exact]), X),
             "sample does not round-trip bit for bit")
    out = float_forward(net, X_exact)
    if kind == "regressor":
        _assert_close(out[:, 0], model.predict(X), "predict")
    else:
        # Logits in sklearn's own float order (coefs_ as given), then its probabilities.
        h = X
        for l, (c, i) in enumerate(zip(model.coefs_, model.intercepts_)):
            h = h @ c + i
            if l < len(model.coefs_) - 1:
                h = np.maximum(h, 0.0)
        _assert_close(out, h, "logits")
        if kind == "binary":  # one logit, logistic output (MLPClassifier with two classes)
            with np.errstate(over="ignore"):  # exp(-logit) = inf gives probability 0, as sklearn
                proba1 = 1.0 / (1.0 + np.exp(-out[:, 0]))
            _assert_close(proba1, model.predict_proba(X)[:, 1], "predict_proba")
            return
        z = out - out.max(axis=1, keepdims=True)
        proba = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
        _assert_close(proba, model.predict_proba(X), "predict_proba")


def _dead_and_always_on(net: Network, X: np.ndarray) -> list[tuple[int, int]]:
    # Informative only (float signs): neurons inactive / active on every sample, per hidden layer.
    out = []
    h = X
    for l in range(1, net.L):
        M = net.W[l - 1]
        Wf = np.array([[_to_float(M[i, j]) for j in range(M.ncols())] for i in range(M.nrows())])
        z = h @ Wf.T + np.array([_to_float(v) for v in net.b[l - 1]])
        out.append((int((z < 0).all(axis=0).sum()), int((z >= 0).all(axis=0).sum())))
        h = np.maximum(z, 0.0)
    return out


# ---------------------------------------------------------------------------
# The shipped cases.  Each builder trains one model and returns
# (model, X as trained on, estimator parameters, data description).

def _diabetes() -> tuple:
    from sklearn.datasets import load_diabetes
    from sklearn.neural_network import MLPRegressor
    from sklearn.preprocessing import StandardScaler

    X_raw, y = load_diabetes(return_X_y=True)
    X = StandardScaler().fit_transform(X_raw)
    y_std = (y - y.mean()) / y.std()
    params = dict(hidden_layer_sizes=(8,), activation="relu", solver="lbfgs", max_iter=2000,
                  random_state=0)
    model = MLPRegressor(**params).fit(X, y_std)
    data = ("sklearn.datasets.load_diabetes() (442 samples, 10 features), features standardised "
            "with sklearn.preprocessing.StandardScaler (the sample below is the standardised "
            "input the network was trained on), target standardised (y - mean) / std")
    return model, X, params, data


def _classifier(loader_name: str, hidden: tuple[int, ...], random_state: int) -> tuple:
    import sklearn.datasets as datasets
    from sklearn.neural_network import MLPClassifier
    from sklearn.preprocessing import StandardScaler

    X_raw, y = getattr(datasets, loader_name)(return_X_y=True)
    X = StandardScaler().fit_transform(X_raw)
    params = dict(hidden_layer_sizes=hidden, activation="relu", solver="lbfgs", max_iter=2000,
                  random_state=random_state)
    model = MLPClassifier(**params).fit(X, y)
    data = (f"sklearn.datasets.{loader_name}() ({X.shape[0]} samples, {X.shape[1]} features, "
            f"{len(model.classes_)} classes), features standardised with "
            "sklearn.preprocessing.StandardScaler (the sample below is the standardised input "
            "the network was trained on)")
    return model, X, params, data


def _params_text(est: str, params: dict[str, Any]) -> str:
    return f"{est}(" + ", ".join(f"{k}={v!r}" for k, v in params.items()) + ")"


def build_cases(sklearn_version: str) -> list[tuple[Case, Any, np.ndarray, str]]:
    """Train every shipped network; returns ``(case, model, X, kind)`` tuples."""
    out = []

    def finish(name: str, est: str, model: Any, X: np.ndarray, params: dict, data: str,
               kind: str, output: str, extra: str = "", rows: int | None = None) -> None:
        net = export_network(model.coefs_, model.intercepts_)
        Xs = X if rows is None else X[:rows]
        X_exact = export_sample(Xs)
        check_faithful(net, X_exact, model, Xs, kind)
        description = (
            f"Produced by examples/train_sklearn_cases.py with scikit-learn {sklearn_version}: "
            f"{_params_text(est, params)} fit on {data}. "
            f"Output = {output}. Weights are the exact dyadic values of the float64 parameters "
            "(fractions.Fraction(float), no rounding; W_l = coefs_[l-1].T, b_l = intercepts_[l-1]); "
            "the sample values are the exact dyadic values of the float64 inputs. "
            f"The exported network reproduces sklearn's outputs to {FAITHFUL_RTOL:g} relative "
            "in float64. " + extra).strip()
        expected = EXPECTED.get(name) if sklearn_version == CONFIRMED_WITH_SKLEARN else None
        case = Case(name=name, network=net, X=X_exact, description=description,
                    expected=dict(expected) if expected else None)
        out.append((case, model, Xs, kind))

    model, X, params, data = _diabetes()
    finish("diabetes-mlp-10-8-1", "sklearn.neural_network.MLPRegressor", model, X, params, data,
           "regressor", "the regression output (MLPRegressor.predict)",
           "Sample = all 442 training inputs. Why standardised: on the raw bundled data (features "
           "of size ~0.05, target ~150) this estimator with random_state=0 leaves 7 of the 8 "
           "hidden neurons inactive on every sample (with solver 'lbfgs' and 'adam' alike).")
    finish("diabetes-mlp-10-8-1-first10", "sklearn.neural_network.MLPRegressor", model, X, params,
           data, "regressor", "the regression output (MLPRegressor.predict)",
           "Same network as diabetes-mlp-10-8-1, deliberately under-sampled: the sample is only "
           "the first 10 training inputs, so n*N_L = 10 < dim = 89 and C_S cannot hold.", rows=10)
    model, X, params, data = _classifier("load_iris", (8, 8), 1)
    finish("iris-mlp-4-8-8-3", "sklearn.neural_network.MLPClassifier", model, X, params, data,
           "classifier", "the logits (the affine last layer, before softmax; MLPClassifier's "
           "multiclass output layer has N_L = 3 = n_classes)",
           "Sample = all 150 training inputs. Why random_state=1: with random_state=0 the same fit "
           "leaves 3 second-layer neurons inactive on every sample.")
    model, X, params, data = _classifier("load_wine", (8,), 0)
    finish("wine-mlp-13-8-3", "sklearn.neural_network.MLPClassifier", model, X, params, data,
           "classifier", "the logits (the affine last layer, before softmax; N_L = 3 = n_classes)",
           "Sample = all 178 training inputs.")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "cases"),
                        help="directory for the case files (default: the repository's cases/)")
    args = parser.parse_args(argv)
    sklearn = _require_sklearn()
    if sklearn.__version__ != CONFIRMED_WITH_SKLEARN:
        print(f"note: scikit-learn {sklearn.__version__} (expected blocks were confirmed with "
              f"{CONFIRMED_WITH_SKLEARN}): writing the cases without expected blocks", file=sys.stderr)
    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        built = build_cases(sklearn.__version__)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for case, _model, X, _kind in built:
        path = out / f"{case.name}.json"
        write_case(case, path)
        dead = _dead_and_always_on(case.network, X)
        print(f"wrote {path}: widths {list(case.widths)}, n = {case.n_samples}, "
              f"(dead, always-active) neurons per hidden layer {dead}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
