"""scikit-learn ``MLPRegressor`` / ``MLPClassifier`` with ``activation='relu'``, alone or last in a
``Pipeline``, from memory (never from a pickle).

``coefs_[l-1]`` has shape ``(N_{l-1}, N_l)``, so ``W_l = coefs_[l-1].T``;
``intercepts_[l-1]`` is ``b_l``.  A classifier's output activation
(``softmax`` for several classes, ``logistic`` for two classes or multilabel)
is dropped: the network analysed is the map to the logits, and the case's
provenance (hence the report) says so.  In a ``Pipeline``, the steps before the
MLP must be transformers: scikit-learn applies them to the sample
(``pipeline[:-1].transform(X)``, in the sample's float dtype), and the
transformed sample, which is what the MLP sees, is the sample analysed.
The forward check compares the imported network with scikit-learn's own
forward pass (``_forward_pass_fast`` with the output activation set to the
identity on a shallow copy of the estimator: the logits).  scikit-learn is not
imported: the model object brings its own code.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np

from exactident.errors import CaseFormatError
from exactident.io.importers.arrays import Tensor
from exactident.io.importers.common import Imported, clean_message
from exactident.io.importers.forward_check import forward_check
from exactident.model.network import Network

__all__ = ["read_sklearn", "split_pipeline"]

_OUT = {"identity": None, "softmax": "softmax", "logistic": "sigmoid"}


def _where(obj: Any) -> str:
    cls = type(obj)
    return f"<{cls.__module__}.{cls.__name__}>"


def split_pipeline(model: Any, X: Any) -> tuple[Any, Any, str | None]:
    """The MLP of a ``Pipeline`` and the sample as the MLP sees it (the leading steps applied by
    scikit-learn), with a description of those steps; ``(model, X, None)`` for a bare estimator.

    Raises
    ------
    CaseFormatError
        A step before the last is not a transformer (no ``transform``), naming it; a step fails
        on the sample.
    """
    cls = type(model)
    if cls.__name__ != "Pipeline" or not cls.__module__.startswith("sklearn"):
        return model, X, None
    where = _where(model)
    steps = list(getattr(model, "steps", []))
    if not steps:
        raise CaseFormatError(where, "steps", "the Pipeline has no steps")
    used = []
    for name, step in steps[:-1]:
        if step is None or step == "passthrough":
            continue
        if not hasattr(step, "transform"):
            raise CaseFormatError(where, f"steps[{name!r}]", f"{type(step).__name__} is not a transformer (no "
                                  "transform): only transformers may come before the MLP")
        used.append(type(step).__name__)
    mlp = steps[-1][1]
    if X is None or not used:
        return mlp, X, None
    Xa = np.asarray(X)
    if Xa.dtype.kind not in "fiu":
        raise CaseFormatError(where, "X", f"a Pipeline's sample must be a numeric array (found dtype {Xa.dtype}): "
                                          "scikit-learn transforms it in floating point")
    try:
        Xt = model[:-1].transform(Xa)
    except Exception as exc:  # the user's transformer failing on the sample: a refusal, in one line
        raise CaseFormatError(where, "X", f"the Pipeline's steps before the MLP fail on the sample "
                                          f"({clean_message(exc)})") from None
    if hasattr(Xt, "toarray"):  # a sparse result
        Xt = Xt.toarray()
    Xt = np.asarray(Xt)
    text = (f"sample transformed by {' then '.join(used)} in {Xt.dtype} by scikit-learn before the MLP "
            "(the transformed sample is the one analysed)")
    return mlp, Xt, text


def _sklearn_forward(model: Any, where: str, dtypes: list[str]) -> Callable[[Network, np.ndarray], str]:
    def run(net: Network, X: np.ndarray) -> str:
        if not hasattr(model, "_forward_pass_fast"):
            return "not run: this scikit-learn version has no _forward_pass_fast"
        logits_model = copy.copy(model)  # shallow: shares coefs_, only out_activation_ differs
        logits_model.out_activation_ = "identity"
        ref = logits_model._forward_pass_fast(np.asarray(X, dtype=np.float64), check_input=False)
        return forward_check(net, X, np.asarray(ref), dtypes + ["float64"], where,
                             f"scikit-learn {type(model).__name__} forward (logits)")

    return run


def read_sklearn(model: Any) -> tuple[Imported, str]:
    """The layers of a fitted MLP and its description ``"<sklearn.neural_network...MLPClassifier>"``.

    Raises
    ------
    CaseFormatError
        Not an MLPRegressor/MLPClassifier, not fitted, an activation other than relu, or an
        output activation other than identity/softmax/logistic.
    """
    cls = type(model)
    where = _where(model)
    if cls.__name__ not in ("MLPRegressor", "MLPClassifier") or not cls.__module__.startswith("sklearn"):
        raise CaseFormatError(where, "", "expected a scikit-learn MLPRegressor or MLPClassifier, or a Pipeline "
                                         "ending with one")
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
    imported = Imported(weights, biases, "in_out", "sklearn", n_in, _OUT[out])
    imported.forward = _sklearn_forward(model, where, [t.dtype for t in weights])
    return imported, where
