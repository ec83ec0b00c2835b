"""The shipped digits architecture cases (cases/architectures, benchmarks/train_architectures.py).

Each is an ``exactident-case/2`` layer graph imported twice, from the PyTorch module and from its ONNX export:
both imports must be the same network (their float forward passes agree exactly on the sample: same
weights, same order), and every file stays small enough to ship.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from exactident.io.importers.graph_forward import graph_forward

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "cases" / "architectures"
NAMES = ["digits-resmlp", "digits-leaky", "digits-prelu", "digits-cnn"]


@pytest.mark.parametrize("name", NAMES)
def test_torch_and_onnx_imports_are_the_same_network(name):
    docs = [json.loads((FOLDER / f"{stem}.json").read_text()) for stem in (name, f"{name}-onnx")]
    for doc, path in zip(docs, (name, f"{name}-onnx")):
        assert doc["format"] == "exactident-case/2" and (FOLDER / f"{path}.json").stat().st_size < 2 * 2**20
        assert len(doc["sample"]) == 200 and "within the rounding bound" in doc["provenance"]["forward_check"]
    assert docs[0]["sample"] == docs[1]["sample"] and docs[0]["input_shape"] == docs[1]["input_shape"]
    X = np.array([[float(Fraction(v)) for v in row] for row in docs[0]["sample"]])
    # digits pixels are k/16, k = 0..16
    assert np.all((np.round(X * 16) == X * 16) & (X >= 0) & (X <= 1))
    assert np.array_equal(graph_forward(docs[0], X), graph_forward(docs[1], X))
    assert [layer["op"] for layer in docs[0]["layers"]] == [layer["op"] for layer in docs[1]["layers"]]


@pytest.mark.parametrize("name", NAMES)
def test_cases_load_and_compile_to_the_same_function(name):
    """The case reader and compiler (an independent path) compute what the importer's float evaluator computes."""
    from exactident.io.case import load_case
    from exactident.model.network import pre_activations

    case = load_case(FOLDER / f"{name}.json")
    assert case.architecture is not None and not case.is_plain
    doc = json.loads((FOLDER / f"{name}.json").read_text())
    rows = case.X[:5]
    exact = pre_activations(case.compiled, rows)[-1]
    X = np.array([[float(Fraction(int(v.p), int(v.q))) for v in row] for row in rows])
    out = graph_forward(doc, X)
    got = np.array([[float(Fraction(int(exact[i, j].p), int(exact[i, j].q))) for j in range(exact.ncols())]
                    for i in range(exact.nrows())])
    assert np.allclose(got, out, rtol=1e-12, atol=1e-12)
