"""Train the four digits architectures of issue 21 and write them as exact layer-graph cases, from PyTorch and ONNX.

On scikit-learn's digits (8x8 images, 1797 rows, pixel values 0..16 divided by 16: exact dyadic inputs),
seeded (``torch.manual_seed(SEED)``), PyTorch float32, Adam (lr 1e-2, full batch, cross-entropy), trained
on rows ``ROWS:`` and sampled on the first ``ROWS`` rows (default 200: each case stays well under 2 MB):

- ``digits-resmlp``: ``64 -> H relu -> (+ skip: H -> H relu, added to it) -> 10`` (residual MLP);
- ``digits-leaky``: ``64 -> H LeakyReLU -> H LeakyReLU -> 10`` (PyTorch's default slope, float32 0.01);
- ``digits-prelu``: ``64 -> H PReLU(H) -> 10``;
- ``digits-cnn``: ``Conv2d(1, 4, 3, padding=1) -> ReLU -> AvgPool2d(2) -> Flatten -> Linear(64, 10)``.

``H`` is 16 by default (``--hidden``): with 200 rows and 10 outputs, ``n N_L = 2000`` is larger than the
number of parameters of every model (a rank deficit by counting alone would say nothing).  Each model is
imported with ``from_torch`` (``NAME.json``) and exported with ``torch.onnx.export(dynamo=False)`` and
imported again (``NAME-onnx.json``); both imports are forward-checked against the framework, and the two
cases' float forward passes are compared here.  Prints one line per case (train accuracy, size, check).

Usage::

    python benchmarks/train_architectures.py --out cases/architectures [--rows 200] [--hidden 16] [NAME ...]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
import time
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SEED = 0
NAMES = ("digits-resmlp", "digits-leaky", "digits-prelu", "digits-cnn")


def build(name: str, hidden: int):
    import torch
    from torch import nn

    class ResMlp(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1, self.fc2, self.out = nn.Linear(64, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = torch.relu(self.fc1(x))
            h = h + torch.relu(self.fc2(h))
            return self.out(h)

    torch.manual_seed(SEED)
    if name == "digits-resmlp":
        return ResMlp()
    if name == "digits-leaky":
        return nn.Sequential(nn.Linear(64, hidden), nn.LeakyReLU(), nn.Linear(hidden, hidden), nn.LeakyReLU(),
                             nn.Linear(hidden, 10))
    if name == "digits-prelu":
        return nn.Sequential(nn.Linear(64, hidden), nn.PReLU(hidden), nn.Linear(hidden, 10))
    return nn.Sequential(nn.Unflatten(1, (1, 8, 8)), nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2),
                         nn.Flatten(), nn.Linear(64, 10))


def train(model, X: np.ndarray, y: np.ndarray, steps: int) -> float:
    import torch

    torch.manual_seed(SEED)
    Xt, yt = torch.as_tensor(X), torch.as_tensor(y)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(Xt), yt)
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        return float((model(Xt).argmax(1) == yt).float().mean())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--rows", type=int, default=200, help="sample rows (the first ROWS digits; trained on "
                                                                "the rest)")
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("names", nargs="*", default=list(NAMES))
    args = parser.parse_args(argv)
    import torch
    from sklearn.datasets import load_digits

    from exactident.io.case import dump_case, parse_case
    from exactident.io.importers.graph_forward import graph_forward
    from exactident.io.importers.load import import_document, torch_document

    digits = load_digits()
    X = (digits.data / 16.0).astype(np.float32)  # k/16: exact in float32
    y = digits.target.astype(np.int64)
    sample, Xtrain, ytrain = X[:args.rows], X[args.rows:], y[args.rows:]
    os.makedirs(args.out, exist_ok=True)
    for name in args.names:
        t0 = time.perf_counter()
        model = build(name, args.hidden)
        acc = train(model, Xtrain, ytrain, args.steps)
        docs = {}
        doc = torch_document(model, sample, name=name)
        assert isinstance(doc, dict), name
        docs[name] = doc
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, f"{name}.onnx")
            quiet = contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO())
            with warnings.catch_warnings(), quiet[0], quiet[1]:
                warnings.simplefilter("ignore")
                torch.onnx.export(model, (torch.as_tensor(sample[:2]),), path, dynamo=False, input_names=["x"],
                                  dynamic_axes={"x": {0: "n"}})
            np.save(os.path.join(tmp, "X.npy"), sample)
            onnx_doc = import_document(path, os.path.join(tmp, "X.npy"), name=f"{name}-onnx")
        assert isinstance(onnx_doc, dict), name
        for key in ("source_file", "sample_file"):  # temporary paths: keep the file names only
            if key in onnx_doc["provenance"]:
                onnx_doc["provenance"][key] = os.path.basename(onnx_doc["provenance"][key])
        onnx_doc["description"] = onnx_doc["description"].replace(tmp, "")
        docs[f"{name}-onnx"] = onnx_doc
        a, b = graph_forward(doc, sample.astype(np.float64)), graph_forward(onnx_doc, sample.astype(np.float64))
        same = float(np.abs(a - b).max())
        for case_name, d in docs.items():
            text = dump_case(parse_case(d, case_name))  # checked by the case reader, canonical
            with open(os.path.join(args.out, f"{case_name}.json"), "w") as f:
                f.write(text)
            ops = sorted({layer["op"] for layer in d["layers"]})
            print(f"{case_name}: train accuracy {acc:.3f}, {len(d['sample'])} rows, layers {', '.join(ops)}, "
                  f"{len(text) / 1024:.0f} KiB; {d['provenance']['forward_check']}")
        print(f"{name}: PyTorch and ONNX imports agree to {same:.2g} (float64 forward of both cases); "
              f"{time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
