"""Write the real Keras files the importer tests read (tests/data/keras/), with Keras itself.

exactident reads Keras files with h5py and the stored config, never importing
Keras; these fixtures, written by Keras 3 (any backend), pin that reading to
the real layout.  The test compares the imported network with the
predictions Keras made here (``tiny_predict.npy``).

Usage (needs keras and a backend, e.g. ``KERAS_BACKEND=torch``)::

    KERAS_BACKEND=torch python examples/make_keras_fixture.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "keras"


def main() -> int:
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(6, activation="relu"),
                              keras.layers.Dropout(0.5), keras.layers.Dense(5), keras.layers.Activation("relu"),
                              keras.layers.Dense(3)])
    X = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
    OUT.mkdir(parents=True, exist_ok=True)
    model.save(OUT / "tiny.keras")
    model.save(OUT / "tiny.h5")
    np.save(OUT / "tiny_X.npy", X)
    np.save(OUT / "tiny_predict.npy", np.asarray(model.predict(X, verbose=0)))
    (OUT / "README.json").write_text(json.dumps({"keras": keras.__version__, "backend": keras.backend.backend(),
                                                 "made_by": "examples/make_keras_fixture.py"}) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
