"""scikit-learn Pipelines (transformers, then an MLP) and the forward check against scikit-learn.

Right values: the transformed sample is computed here by the transformer itself (``scaler.transform``),
every imported weight equals ``coefs_``/``intercepts_`` read with ``Fraction`` (exact for a float64),
and the logits are scikit-learn's (``predict`` for a regressor; for a classifier, ``predict_proba``
must equal the softmax of the imported logits).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from _importers import rows_of

from exactident import CaseFormatError, from_sklearn

pytestmark = pytest.mark.filterwarnings("ignore:Stochastic Optimizer")


def _data():
    sk = pytest.importorskip("sklearn")
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    return sk, X * 10, y  # scaled up: the scaler matters


def _exact_rows(a):
    return [[Fraction(float(v)) for v in row] for row in np.atleast_2d(a)]


def test_pipeline_scaler_then_classifier():
    _, X, y = _data()
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    pipe = make_pipeline(StandardScaler(), MLPClassifier(hidden_layer_sizes=(5,), max_iter=300, random_state=0))
    pipe.fit(X, y)
    case = from_sklearn(pipe, X[:12])
    scaler, mlp = pipe[0], pipe[-1]
    # the sample analysed is what the MLP sees: the scaled sample, bit for bit
    assert [[Fraction(int(v.p), int(v.q)) for v in row] for row in case.X] == _exact_rows(scaler.transform(X[:12]))
    assert rows_of(case.network.W[0]) == _exact_rows(mlp.coefs_[0].T)
    prov = case.provenance
    assert prov["sample_transform"].startswith("sample transformed by StandardScaler in float64 by scikit-learn")
    assert "within the rounding bound" in prov["forward_check"] and prov["dropped_output_activation"] == "softmax"
    assert prov["parameter_names"]["W_1"] == "coefs_[0][j,i]"  # coefs_ is (in, out): W_1[i,j] = coefs_[0][j,i]
    assert prov["parameter_names"]["b_2"] == "intercepts_[1][i]"
    # independent: softmax of the imported logits (float64) is scikit-learn's predict_proba
    Xt = scaler.transform(X[:12])
    W = [np.array(rows_of(M), dtype=float) for M in case.network.W]
    b = [np.array([float(Fraction(int(v.p), int(v.q))) for v in bl]) for bl in case.network.b]
    z = np.maximum(Xt @ W[0].T + b[0], 0) @ W[1].T + b[1]
    p = np.exp(z - z.max(axis=1, keepdims=True))
    assert np.allclose(p / p.sum(axis=1, keepdims=True), pipe.predict_proba(X[:12]), rtol=0, atol=1e-12)


def test_pipeline_regressor_passthrough_and_refusal(capsys):
    _, X, y = _data()
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LinearRegression
    from sklearn.neural_network import MLPRegressor
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import MinMaxScaler

    pipe = Pipeline([("scale", MinMaxScaler()), ("skip", "passthrough"), ("pca", PCA(3, random_state=0)),
                     ("mlp", MLPRegressor(hidden_layer_sizes=(4,), max_iter=200, random_state=0))]).fit(X, y)
    case = from_sklearn(pipe, X[:7])
    assert case.widths == (3, 4, 1)
    assert "MinMaxScaler then PCA" in case.provenance["sample_transform"]
    assert "within the rounding bound" in case.provenance["forward_check"]
    bad = Pipeline([("lr", LinearRegression()), ("mlp", MLPRegressor(hidden_layer_sizes=(2,), max_iter=5))])
    with pytest.raises(CaseFormatError, match=r"steps\['lr'\]: LinearRegression is not a transformer"):
        from_sklearn(bad, X[:3])


def test_forward_check_catches_a_wrong_import(monkeypatch):
    """Were a weight read wrongly, scikit-learn's own logits refuse the import (sample and output named)."""
    _, X, y = _data()
    from sklearn.neural_network import MLPRegressor

    from exactident.io.importers import sklearn_mlp

    model = MLPRegressor(hidden_layer_sizes=(3,), max_iter=50, random_state=0).fit(X, y)
    real = sklearn_mlp.Tensor

    def off_by_one_ulp(value, source, name, *a):  # the first intercept nudged by one float64 ulp
        if name == "intercepts_[1]":
            value = np.nextafter(value, np.inf)
        return real(value, source, name, *a)

    monkeypatch.setattr(sklearn_mlp, "Tensor", off_by_one_ulp)
    from_sklearn(model, X[:5])  # one ulp is within the rounding bound: not a different network
    monkeypatch.setattr(sklearn_mlp, "Tensor", lambda v, s, n, *a: real(v * 1.001 if n == "coefs_[0]" else v, s, n))
    with pytest.raises(CaseFormatError, match=r"forward check: the imported network differs from scikit-learn "
                                              r"MLPRegressor forward \(logits\) at sample 0, output 0"):
        from_sklearn(model, X[:5])
