"""The forward check of a Keras import: Keras itself computes the outputs.

Keras is imported only here, only when installed, with its backend chosen when
the user has not chosen one (TensorFlow, else jax, torch, numpy), and with its
warnings and log lines kept off stderr.  Called by
:func:`~exactident.io.importers.keras_file.read_keras`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from exactident.errors import CaseFormatError
from exactident.io.importers.common import clean_message
from exactident.io.importers.forward_check import forward_check
from exactident.model.network import Network

__all__ = ["DROPOUT_LAYERS", "keras_forward_check"]

#: Layers that are the identity at inference (the dropout and noise layers of Keras).
DROPOUT_LAYERS = frozenset({"Dropout", "SpatialDropout1D", "GaussianDropout", "GaussianNoise", "AlphaDropout"})
_KERAS_SKIP = DROPOUT_LAYERS | {"Flatten", "InputLayer"}


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Keep third-party warnings and log lines (Keras, TensorFlow, JAX, absl) off stderr."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            os.dup2(null.fileno(), 2)
            with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
                yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _import_keras() -> Any:
    """Keras, None when it is not installed, or why it cannot be imported (a str).  When the user
    has not chosen a backend and TensorFlow (Keras' default) is absent, the first installed of jax,
    torch is used, else numpy."""
    if importlib.util.find_spec("keras") is None:
        return None
    if "keras" not in sys.modules and not os.environ.get("KERAS_BACKEND") \
            and importlib.util.find_spec("tensorflow") is None:
        os.environ["KERAS_BACKEND"] = next((b for b in ("jax", "torch") if importlib.util.find_spec(b)), "numpy")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    # importing Keras takes seconds (7 s with the torch backend, measured): say so on a terminal,
    # then erase the line (nothing on a pipe or file)
    tty = "keras" not in sys.modules and getattr(sys.stderr, "isatty", lambda: False)()
    if tty:
        print("importing Keras for the forward check ...", end="", file=sys.stderr, flush=True)
    try:
        with _quiet():
            import keras
    except Exception as exc:  # e.g. KERAS_BACKEND names a backend that is not installed
        text = clean_message(exc)
        return f"keras could not be imported ({type(exc).__name__}: {text})"
    finally:
        if tty:
            print("\r\x1b[K", end="", file=sys.stderr, flush=True)
    return keras


def keras_forward_check(path: str, dropped: str | None, config: Any = None) -> Callable[[Network, np.ndarray], str]:
    """The forward check of a Keras file: Keras itself loads the file
    (``keras.saving.load_model(safe_mode=True)``, so no code is deserialised; a weights file
    with its ``config``: ``keras.saving.deserialize_keras_object(config, safe_mode=True)`` then
    ``load_weights``) and computes the outputs (logits: a dropped final activation is set to
    linear on the loaded copy), compared with the imported network by
    :func:`~exactident.io.importers.forward_check.forward_check`.

    Returns
    -------
    callable
        ``run(net, X) -> summary`` (``X`` float64 ``(n, N_0)``); the summary is
        ``"not run: keras is not installed"`` when Keras is absent.  ``run`` raises
        ``CaseFormatError`` when Keras cannot load the file, or when its outputs differ from
        the imported network's (naming the first differing sample and output).
    """

    def run(net: Network, X: np.ndarray) -> str:
        keras = _import_keras()
        if keras is None or isinstance(keras, str):
            return f"not run: {keras or 'keras is not installed'}"
        try:
            with _quiet():
                if config is None:
                    model = keras.saving.load_model(path, compile=False, safe_mode=True)
                else:
                    model = keras.saving.deserialize_keras_object(config, safe_mode=True)
                    model.load_weights(path)
        except Exception as exc:  # any Keras failure is a refusal, in one line
            text = clean_message(exc)
            raise CaseFormatError(path, "forward check", f"Keras {keras.__version__} cannot load this file to check "
                                                         f"the import ({text})") from None
        layers = [x for x in model.layers if type(x).__name__ not in _KERAS_SKIP]
        if dropped and layers:  # analyse the logits: the final activation off, on Keras' own copy
            layers[-1].activation = keras.activations.get("linear")
        inputs = getattr(model, "inputs", None)
        in_dtype = str(inputs[0].dtype) if inputs else "float32"
        Xin = np.asarray(X, dtype=np.float64).astype(in_dtype)
        with _quiet():
            # a tensor of the input's declared dtype: a numpy array would be converted to floatx()
            out = keras.ops.convert_to_numpy(model(keras.ops.convert_to_tensor(Xin, dtype=in_dtype), training=False))
        # the dtypes Keras declares, those the backend really used (JAX without x64 computes a float64
        # model in float32), and floatx(): the torch backend was measured to compute a float64 model
        # with float32 rounding errors, so no Keras output is trusted beyond floatx
        dtypes = [in_dtype, str(np.asarray(out).dtype), str(keras.config.floatx())]
        dtypes += [str(d) for x in layers for d in (x.compute_dtype, x.variable_dtype)]
        dtypes += [str(keras.ops.convert_to_numpy(w).dtype) for w in model.weights]
        what = f"Keras {keras.__version__} ({keras.backend.backend()}) forward"
        return forward_check(net, Xin.astype(np.float64), np.asarray(out), dtypes, path, what)

    return run
