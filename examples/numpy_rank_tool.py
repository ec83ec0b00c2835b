"""A typical float tool, to score against a suite: numpy SVD ranks with numpy's default tolerance.

This is deliberately *not* exactident: it is what a practitioner writes.  It
reads a case file, rounds every number to float64 (or float32 with
``--float32``), computes the Jacobian of the outputs on the sample with
respect to *all* parameters by backpropagation (ReLU'(0) = 0, as in most
frameworks), the activation operator ``alpha`` over paths, and their ranks
with ``numpy.linalg.matrix_rank`` (default tolerance ``sigma_max * max(m, n) *
eps`` of the array's dtype).  In exact arithmetic the full Jacobian has the
rank of ``Gamma`` (each hidden neuron's rescaling direction is in its kernel),
and ``dim`` = number of parameters - number of hidden neurons.  The verdict
follows the paper's rules from those float ranks.  It prints one JSON object::

    python examples/numpy_rank_tool.py CASE.json            # float64
    python examples/numpy_rank_tool.py --float32 CASE.json  # float32 throughout
    exactident suite score cases/suite-v1 --tool 'python examples/numpy_rank_tool.py {case}'

In Python: ``exactident.suites.score(predict, "cases/suite-v1")`` (or
``functools.partial(predict, dtype="float32")``).
"""

from __future__ import annotations

import json
import sys
from fractions import Fraction
from typing import Any

import numpy as np


def load_network(path: str, dtype: Any = np.float64) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
    """``(W, b, X)`` as arrays of ``dtype``; numbers parsed exactly, then rounded once."""
    with open(path, encoding="utf-8") as fh:
        obj = json.load(fh, parse_float=str, parse_int=str)

    def arr(values: Any) -> np.ndarray:
        return np.array([[float(Fraction(str(v))) for v in row] for row in values], dtype=np.float64).astype(dtype)

    W = [arr(m) for m in obj["weights"]]
    b = [arr([v])[0] for v in obj["biases"]]
    X = arr(obj["sample"]).reshape(len(obj["sample"]), int(obj["widths"][0]))
    return W, b, X


def jacobian(W: list[np.ndarray], b: list[np.ndarray], X: np.ndarray) -> np.ndarray:
    """Jacobian of ``f(X)`` (rows ``i N_L + k``) w.r.t. every weight and bias, layer by layer."""
    L, n_out = len(W), W[-1].shape[0]
    rows = []
    for x in X:
        hs, acts = [x], []
        for l in range(L):
            z = W[l] @ hs[-1] + b[l]
            if l < L - 1:
                acts.append((z > 0).astype(X.dtype))
                hs.append(np.maximum(z, 0).astype(X.dtype))
        for k in range(n_out):
            delta = np.zeros(n_out, dtype=X.dtype)
            delta[k] = 1
            grads = []
            for l in range(L - 1, -1, -1):
                grads.append(np.concatenate([np.outer(delta, hs[l]).ravel(), delta]))
                if l > 0:
                    delta = (W[l].T @ delta) * acts[l - 1]
            rows.append(np.concatenate(grads[::-1]))
    return np.array(rows, dtype=X.dtype).reshape(len(rows), -1)


def alpha(W: list[np.ndarray], b: list[np.ndarray], X: np.ndarray) -> np.ndarray:
    """Activation operator: per sample, path features ``x_{v_0} prod a`` / ``prod a``, then 1 (empty path)."""
    rows = []
    for x in X:
        feats, h = [np.array([v]) for v in x], x
        for l in range(len(W) - 1):
            z = W[l] @ h + b[l]
            up = np.concatenate(feats + [np.ones(1, dtype=X.dtype)])
            feats = [up * (z[v] > 0) for v in range(len(z))]
            h = np.maximum(z, 0)
        rows.append(np.concatenate(feats + [np.ones(1, dtype=X.dtype)]))
    return np.array(rows, dtype=X.dtype)


def predict(path: str, dtype: Any = "float64") -> dict[str, Any]:
    """``{"verdict", "rank_gamma", "rank_a"}`` for one case file."""
    W, b, X = load_network(path, np.dtype(dtype))
    hidden = sum(m.shape[0] for m in W[:-1])
    dim = sum(m.size + v.size for m, v in zip(W, b)) - hidden
    degenerate = any(not W[l + 1][:, v].any() or (not W[l][v].any() and b[l][v] == 0)
                     for l in range(len(W) - 1) for v in range(W[l].shape[0]))
    rank_gamma = int(np.linalg.matrix_rank(jacobian(W, b, X))) if len(X) else 0
    rank_a = W[-1].shape[0] * (int(np.linalg.matrix_rank(alpha(W, b, X))) if len(X) else 0)
    if degenerate:
        verdict = "degenerate"
    elif rank_gamma == dim:
        verdict = "identifiable"
    elif rank_gamma == rank_a:
        verdict = "not-identifiable"
    else:
        verdict = "inconclusive"
    return {"verdict": verdict, "rank_gamma": rank_gamma, "rank_a": rank_a}


def main(argv: list[str]) -> int:
    args = [a for a in argv if a != "--float32"]
    if len(args) != 1:
        print("usage: numpy_rank_tool.py [--float32] CASE.json", file=sys.stderr)
        return 2
    print(json.dumps(predict(args[0], "float32" if "--float32" in argv else "float64")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
