"""Train the rank-deficient networks of the kernel benchmark and write them as exact case files.

Seeded, so the same library versions give the same weights.  Cases (``NAME``):

- ``digits-64-32-10``, ``digits-64-64-10`` (scikit-learn ``MLPClassifier``, ``lbfgs``) and
  ``digits-64-32-32-10`` (``adam``) on all 1797 standardised ``load_digits`` rows
  (``random_state=0``, ``max_iter=2000`` / 500); sample = all 1797 training rows;
- ``torch-bc-30-12-6-2``: a PyTorch MLP 30-12-6-2 (two logits) trained with Adam in float32
  (``torch.manual_seed(0)``, lr 1e-2, 3000 full-batch steps, cross-entropy) on the
  standardised breast-cancer data (569 rows, float32); sample = the 569 float32 rows;
- ``torch-digits-64-40-20-10``: the same on the 1797 standardised digits rows (seed 70531,
  lr 1e-2, 1500 steps; a seed used in no test); sample = the 1797 float32 rows;
- ``random-16x4-1``, ``random-16x3-1``: randomly initialised 16-16-16-16-16-1 / 16-16-16-16-1
  nets (``benchmarks/run.py::random_case``, seeds 2 and 0) on 1302 / 1000 Gaussian inputs, with
  dead neurons;
- fresh nets of 2026-12-07 (seeds used in no test, in each name): scikit-learn digits 64-48-10 and
  64-40-20-10 (``lbfgs``), 64-32-32-16-10 (``adam``, 500 iterations); a PyTorch/Adam float32
  64-40-20-10 (as ``torch-digits-64-40-20-10``); a random 16-16-16-16-1 (seed 80717).

Every weight and input is written as the exact binary value of its float (no rounding).

Usage::

    python benchmarks/train_deficient.py --out DIR [NAME ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

SKLEARN = {
    "digits-64-32-10": ((32,), "lbfgs", 2000),
    "digits-64-64-10": ((64,), "lbfgs", 2000),
    "digits-64-32-32-10": ((32, 32), "adam", 500),
    # fresh nets (2026-12-07; random_state used in no test): hidden widths, solver, iterations, seed
    "digits-64-48-10-s80713": ((48,), "lbfgs", 2000, 80713),
    "digits-64-40-20-10-s80714": ((40, 20), "lbfgs", 2000, 80714),
    "digits-64-32-32-16-10-s80715": ((32, 32, 16), "adam", 500, 80715),
}
RANDOM = {"random-16x4-1": ((16, 16, 16, 16, 16, 1), 1302, 2), "random-16x3-1": ((16, 16, 16, 16, 1), 1000, 0),
          "random-16x3-1-s80717": ((16, 16, 16, 16, 1), 1000, 80717)}
#: PyTorch MLPs trained with Adam in float32, full batch: data set, widths, seed, learning rate, steps.
TORCH = {
    "torch-bc-30-12-6-2": ("breast_cancer", (30, 12, 6, 2), 0, 1e-2, 3000),
    # a fresh digits net (seed used nowhere in the tests): Gamma 17970 x 3570, tall
    "torch-digits-64-40-20-10": ("digits", (64, 40, 20, 10), 70531, 1e-2, 1500),
    "torch-digits-64-40-20-10-s80716": ("digits", (64, 40, 20, 10), 80716, 1e-2, 1500),
}
NAMES = [*SKLEARN, *TORCH, *RANDOM]


def sklearn_case(name: str):
    import sklearn
    from sklearn.datasets import load_digits
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier
    from sklearn.preprocessing import StandardScaler
    from train_sklearn_cases import check_faithful, export_network, export_sample

    from exactident.io.case import Case

    hidden, solver, iters, *seed = SKLEARN[name]
    state = seed[0] if seed else 0
    X_raw, y = load_digits(return_X_y=True)
    X = StandardScaler().fit_transform(X_raw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = MLPClassifier(hidden_layer_sizes=hidden, solver=solver, max_iter=iters, random_state=state).fit(X, y)
    net = export_network(model.coefs_, model.intercepts_)
    X_exact = export_sample(X)
    check_faithful(net, X_exact, model, X, "classifier")
    return Case(name=name, network=net, X=X_exact,
                description=f"benchmarks/train_deficient.py, scikit-learn {sklearn.__version__}: "
                            f"MLPClassifier({hidden}, solver={solver!r}, random_state={state}) on standardised "
                            "load_digits, all 1797 rows; logits; exact float64 values")


def torch_case(name: str):
    import flint
    import numpy as np
    import torch
    from sklearn.datasets import load_breast_cancer, load_digits
    from sklearn.preprocessing import StandardScaler

    from exactident.io.case import Case
    from exactident.model.network import Network

    data, widths, seed, lr, steps = TORCH[name]
    X_raw, y = (load_breast_cancer if data == "breast_cancer" else load_digits)(return_X_y=True)
    X = StandardScaler().fit_transform(X_raw).astype(np.float32)
    torch.manual_seed(seed)
    layers: list = []
    for k in range(1, len(widths)):
        layers += [torch.nn.Linear(widths[k - 1], widths[k])] + ([torch.nn.ReLU()] if k < len(widths) - 1 else [])
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y.astype(np.int64))
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(Xt), yt)
        loss.backward()
        opt.step()

    def q(v: float):
        from fractions import Fraction

        f = Fraction(float(v))  # a float32 is exact in float64
        return flint.fmpq(f.numerator, f.denominator)

    lin = [m for m in model if isinstance(m, torch.nn.Linear)]
    W = [flint.fmpq_mat([[q(v) for v in row] for row in m.weight.detach().numpy()]) for m in lin]
    b = [[q(v) for v in m.bias.detach().numpy()] for m in lin]
    net = Network(widths, W, b)
    arch = "-".join(map(str, widths))
    return Case(name=name, network=net, X=[[q(v) for v in row] for row in X],
                description=f"benchmarks/train_deficient.py: PyTorch {torch.__version__} MLP {arch}, Adam "
                            f"lr {lr:g}, {steps} float32 steps (seed {seed}) on standardised {data} (final loss "
                            f"{float(loss.detach()):.2e}); exact float32 values")


def build(name: str):
    if name in SKLEARN:
        return sklearn_case(name)
    if name.startswith("torch"):
        return torch_case(name)
    from run import random_case

    widths, n, seed = RANDOM[name]
    return random_case(widths, n, seed, name=name)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("names", nargs="*", choices=[*NAMES, []], metavar="NAME")
    args = ap.parse_args(argv)
    from exactident.io.case import write_case

    os.makedirs(args.out, exist_ok=True)
    for name in args.names or NAMES:
        case = build(name)
        path = os.path.join(args.out, name + ".json")
        write_case(case, path)
        print(f"wrote {path}: widths {list(case.widths)}, n = {case.n_samples}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
