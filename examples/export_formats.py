"""Train a real network with scikit-learn, save it in every format exactident imports, time file -> verdict.

The network: ``MLPClassifier(hidden_layer_sizes=(8,), activation='relu', solver='lbfgs',
random_state=0)`` on scikit-learn's bundled wine data (178 samples, 13 standardised
features, 3 classes), the same recipe as ``cases/wine-mlp-13-8-3.json``.  Its
weights are saved as

- ``wine.onnx``        ONNX ``Gemm, Relu, Gemm, Softmax`` (float32 initializers; with torch
                       installed, written by ``torch.onnx.export``, else by ``onnx.helper``);
- ``wine.pt``          a PyTorch ``nn.Sequential`` state dict (float32; needs torch);
- ``wine.safetensors`` the same state dict in safetensors (bfloat16, read from its bits);
- ``wine.keras``       a Keras Sequential (float32; written by Keras when installed, else the
                       same layout with h5py);
- ``wine.npz``         ``W1, b1, W2, b2`` (float64);

with the sample ``wine_X.npy`` (float64) beside them.  Then, for each file, the
time from the model file to the verdict: ``exactident check FILE --sample
wine_X.npy`` in a fresh process (``cli``: Python start-up, import, exact analysis,
float cross-check), and in-process ``exactident.check(FILE, sample=...)``
(``library``).  ``sklearn`` times ``check(from_sklearn(model, X))``.

Usage (extras: sklearn, onnx, safetensors, keras; torch optional)::

    python examples/export_formats.py [--out DIR]
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
import time
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

try:
    import exactident  # noqa: F401
except ImportError:  # run from a source checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from exactident import check, from_sklearn


def train() -> tuple[Any, np.ndarray]:
    from sklearn.datasets import load_wine
    from sklearn.neural_network import MLPClassifier
    from sklearn.preprocessing import StandardScaler

    X_raw, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X_raw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = MLPClassifier(hidden_layer_sizes=(8,), activation="relu", solver="lbfgs", max_iter=2000,
                              random_state=0).fit(X, y)
    return model, X


def save_onnx(path: Path, Ws: list[np.ndarray], bs: list[np.ndarray]) -> str:
    try:
        import torch

        net = _torch_net(Ws, bs)
        torch.onnx.export(torch.nn.Sequential(net, torch.nn.Softmax(dim=1)), torch.zeros(1, Ws[0].shape[1]),
                          str(path), dynamo=False, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "n"}, "y": {0: "n"}})
        return "torch.onnx.export"
    except ImportError:
        pass
    from onnx import TensorProto, helper, numpy_helper, save

    inits, nodes, cur = [], [], "x"
    for l, (W, b) in enumerate(zip(Ws, bs), start=1):
        inits += [numpy_helper.from_array(W.astype(np.float32), f"W{l}"),
                  numpy_helper.from_array(b.astype(np.float32), f"b{l}")]
        nodes.append(helper.make_node("Gemm", [cur, f"W{l}", f"b{l}"], [f"z{l}"], name=f"gemm{l}", transB=1))
        cur = f"z{l}"
        if l < len(Ws):
            nodes.append(helper.make_node("Relu", [cur], [f"h{l}"], name=f"relu{l}"))
            cur = f"h{l}"
    nodes.append(helper.make_node("Softmax", [cur], ["y"], name="softmax", axis=1))
    graph = helper.make_graph(nodes, "wine", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 13])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])], inits)
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return "onnx.helper"


def _torch_net(Ws: list[np.ndarray], bs: list[np.ndarray]) -> Any:
    import torch

    layers: list[Any] = []
    for l, (W, b) in enumerate(zip(Ws, bs)):
        lin = torch.nn.Linear(W.shape[1], W.shape[0])
        with torch.no_grad():
            lin.weight.copy_(torch.tensor(W, dtype=torch.float32))
            lin.bias.copy_(torch.tensor(b, dtype=torch.float32))
        layers += [lin] + ([torch.nn.ReLU()] if l < len(Ws) - 1 else [])
    return torch.nn.Sequential(*layers)


def save_safetensors_bf16(path: Path, Ws: list[np.ndarray], bs: list[np.ndarray]) -> None:
    """Round to bfloat16 (nearest even, through ml_dtypes) and write with safetensors."""
    import ml_dtypes
    from safetensors.numpy import save_file

    tensors = {}
    for l, (W, b) in enumerate(zip(Ws, bs)):
        for name, a in ((f"{2 * l}.weight", W), (f"{2 * l}.bias", b)):
            tensors[name] = a.astype(ml_dtypes.bfloat16).view(np.uint16)
    save_file(tensors, str(path))
    # safetensors' numpy API has no bfloat16: the bits were saved as U16; relabel the header's dtype
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    for name, info in header.items():
        if name != "__metadata__":
            info["dtype"] = "BF16"
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # data offsets are relative to the end of the header: unchanged
    path.write_bytes(len(text).to_bytes(8, "little") + text + data[8 + n:])


def save_keras(path: Path, Ws: list[np.ndarray], bs: list[np.ndarray]) -> str:
    try:
        import keras

        model = keras.Sequential([keras.Input((Ws[0].shape[1],)), keras.layers.Dense(Ws[0].shape[0], "relu"),
                                  keras.layers.Dense(Ws[1].shape[0], "softmax")])
        for layer, W, b in zip(model.layers, Ws, bs):
            layer.set_weights([W.T.astype(np.float32), b.astype(np.float32)])
        model.save(path)
        return f"keras {keras.__version__}"
    except ImportError:
        pass
    import h5py

    layers = [{"class_name": "InputLayer", "config": {"name": "input", "batch_shape": [None, Ws[0].shape[1]]}}]
    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:
        for l, (W, b) in enumerate(zip(Ws, bs)):
            # Keras 3 stores weights by position: the class in snake case, counted (dense, dense_1, ...)
            position = "dense" if l == 0 else f"dense_{l}"
            layers.append({"class_name": "Dense", "config": {"name": f"dense_{l}", "units": W.shape[0],
                                                             "use_bias": True,
                                                             "activation": "relu" if l < len(Ws) - 1 else "softmax"}})
            f.create_dataset(f"layers/{position}/vars/0", data=W.T.astype(np.float32))
            f.create_dataset(f"layers/{position}/vars/1", data=b.astype(np.float32))
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("config.json", json.dumps({"class_name": "Sequential", "config": {"layers": layers}}))
        z.writestr("metadata.json", "{}")
        z.writestr("model.weights.h5", buf.getvalue())
    return "h5py (Keras' .keras layout)"


#: Weights files hold no architecture: this script wrote them from a plain ReLU MLP, and says so.
WEIGHTS_ONLY = ("torch", "safetensors", "npz")


def _cli_seconds(path: Path, sample: Path, assume: bool) -> tuple[float, str]:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "exactident", "check", str(path), "--sample", str(sample), "--json"]
                         + (["--assume-relu-mlp"] if assume else []), capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if out.returncode != 0:
        return seconds, f"exit {out.returncode}: {out.stderr.strip()}"
    return seconds, json.loads(out.stdout)["verdict"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="folder for the files (default: a temporary one)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per file; the best time is shown")
    args = parser.parse_args(argv)
    out = Path(args.out or tempfile.mkdtemp(prefix="exactident-formats-"))
    out.mkdir(parents=True, exist_ok=True)
    model, X = train()
    Ws = [c.T for c in model.coefs_]
    bs = list(model.intercepts_)
    np.save(out / "wine_X.npy", X)
    files: dict[str, Path] = {}
    notes = {"onnx": save_onnx(out / "wine.onnx", Ws, bs)}
    files["onnx"] = out / "wine.onnx"
    try:
        import torch

        torch.save(_torch_net(Ws, bs).state_dict(), out / "wine.pt")
        files["torch"] = out / "wine.pt"
    except ImportError:
        print("torch not installed: no .pt file", file=sys.stderr)
    save_safetensors_bf16(out / "wine.safetensors", Ws, bs)
    files["safetensors"] = out / "wine.safetensors"
    notes["keras"] = save_keras(out / "wine.keras", Ws, bs)
    files["keras"] = out / "wine.keras"
    np.savez(out / "wine.npz", **{f"W{l}": W for l, W in enumerate(Ws, 1)}, **{f"b{l}": b for l, b in enumerate(bs, 1)})
    files["npz"] = out / "wine.npz"
    print(f"files in {out}; onnx written by {notes['onnx']}, keras by {notes['keras']}")
    print(f"{'format':12} {'weights':9} {'verdict':14} {'cli s':>6} {'library s':>9}")
    sample = out / "wine_X.npy"
    for fmt, path in files.items():
        lib = cli = float("inf")
        for _ in range(args.repeat):  # the machine is shared: keep the best of a few runs
            start = time.perf_counter()
            report = check(str(path), sample=str(sample), assume_relu_mlp=fmt in WEIGHTS_ONLY)
            lib = min(lib, time.perf_counter() - start)
            seconds, verdict = _cli_seconds(path, sample, fmt in WEIGHTS_ONLY)
            cli = min(cli, seconds)
        prov = report.extra["provenance"]
        assert verdict == report.verdict, (verdict, report.verdict)
        print(f"{fmt:12} {prov['weight_dtype']:9} {report.verdict:14} {cli:6.2f} {lib:9.2f}")
    lib = float("inf")
    for _ in range(args.repeat):
        start = time.perf_counter()
        report = check(from_sklearn(model, X))
        lib = min(lib, time.perf_counter() - start)
    print(f"{'sklearn':12} {'float64':9} {report.verdict:14} {'-':>6} {lib:9.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
