"""scikit-learn ``MLPRegressor`` / ``MLPClassifier`` with ``activation='relu'``, from memory (never from a pickle).

``coefs_[l-1]`` has shape ``(N_{l-1}, N_l)``, so ``W_l = coefs_[l-1].T``;
``intercepts_[l-1]`` is ``b_l``.  A classifier's output activation
(``softmax`` for several classes, ``logistic`` for two classes or multilabel)
is dropped: the network analysed is the map to the logits, and the case's
provenance (hence the report) says so.  scikit-learn itself is not imported.
"""

from __future__ import annotations

from typing import Any

from exactident.errors import CaseFormatError
from exactident.io.importers.arrays import Tensor
from exactident.io.importers.common import Imported

__all__ = ["read_sklearn"]

_OUT = {"identity": None, "softmax": "softmax", "logistic": "sigmoid"}


def read_sklearn(model: Any) -> tuple[Imported, str]:
    """The layers of a fitted MLP and its description ``"sklearn.neural_network.MLPClassifier"``.

    Raises
    ------
    CaseFormatError
        Not an MLPRegressor/MLPClassifier, not fitted, an activation other than relu, or an
        output activation other than identity/softmax/logistic.
    """
    cls = type(model)
    where = f"<{cls.__module__}.{cls.__name__}>"
    if cls.__name__ not in ("MLPRegressor", "MLPClassifier") or not cls.__module__.startswith("sklearn"):
        raise CaseFormatError(where, "", "expected a scikit-learn MLPRegressor or MLPClassifier")
    if not hasattr(model, "coefs_"):
        raise CaseFormatError(where, "coefs_", "the model is not fitted (call fit first)")
    if model.activation != "relu":
        raise CaseFormatError(where, "activation", f"expected 'relu', found {model.activation!r}")
    out = getattr(model, "out_activation_", "identity")
    if out not in _OUT:
        raise CaseFormatError(where, "out_activation_", f"unsupported output activation {out!r}")
    weights = [Tensor(c, where, f"coefs_[{i}]") for i, c in enumerate(model.coefs_)]
    biases: list[Tensor | None] = [Tensor(b, where, f"intercepts_[{i}]") for i, b in enumerate(model.intercepts_)]
    n_in = getattr(model, "n_features_in_", None)
    return Imported(weights, biases, "in_out", "sklearn", n_in, _OUT[out]), where
