"""A PyTorch tool to score against a suite: ``torch.func.jacrev`` + ``torch.linalg.matrix_rank`` (float64).

Needs torch (``pip install 'exactident[torch]'``).  Like
``examples/numpy_rank_tool.py`` it is what a practitioner would write: the
parameters rounded to float64, the network written with ``torch.relu``
(whose derivative at 0 is 0), the Jacobian of the outputs on the sample with
respect to all parameters by ``jacrev``, ranks by ``matrix_rank``'s default
tolerance (``sigma_max * max(m, n) * eps``), ``alpha`` over paths, and the
paper's rules on those float ranks::

    python examples/torch_rank_tool.py CASE.json
    exactident suite score cases/suite-v1 --tool 'python examples/torch_rank_tool.py {case}'

Each call starts Python and imports torch (about a second): for a whole suite,
``exactident.suites.score(predict, "cases/suite-v1")`` from Python is much faster.
"""

from __future__ import annotations

import json
import sys
from fractions import Fraction
from typing import Any

import torch


def _tensor(values: Any) -> torch.Tensor:
    return torch.tensor([[float(Fraction(str(v))) for v in row] for row in values], dtype=torch.float64)


def predict(path: str) -> dict[str, Any]:
    """``{"verdict", "rank_gamma", "rank_a"}`` for one case file."""
    with open(path, encoding="utf-8") as fh:
        obj = json.load(fh, parse_float=str, parse_int=str)
    widths = [int(w) for w in obj["widths"]]
    W = [_tensor(m) for m in obj["weights"]]
    b = [_tensor([v])[0] for v in obj["biases"]]
    X = _tensor(obj["sample"]).reshape(len(obj["sample"]), widths[0])
    L = len(W)
    degenerate = any(not W[l + 1][:, v].any() or (not W[l][v].any() and b[l][v] == 0)
                     for l in range(L - 1) for v in range(widths[l + 1]))
    shapes = [t.shape for pair in zip(W, b) for t in pair]
    flat = torch.cat([t.reshape(-1) for pair in zip(W, b) for t in pair])

    def f(theta: torch.Tensor) -> torch.Tensor:
        parts, k = [], 0
        for s in shapes:
            size = int(torch.Size(s).numel())
            parts.append(theta[k:k + size].reshape(s))
            k += size
        h = X
        for l in range(L):
            h = h @ parts[2 * l].T + parts[2 * l + 1]
            if l < L - 1:
                h = torch.relu(h)
        return h.reshape(-1)

    dim = flat.numel() - sum(widths[1:-1])
    if len(X):
        J = torch.func.jacrev(f)(flat)
        rank_gamma = int(torch.linalg.matrix_rank(J))
        rows, h = [], X
        feats = [X[:, j:j + 1] for j in range(widths[0])]
        for l in range(L - 1):
            z = h @ W[l].T + b[l]
            up = torch.cat(feats + [torch.ones(len(X), 1, dtype=X.dtype)], dim=1)
            feats = [up * (z[:, v:v + 1] > 0) for v in range(widths[l + 1])]
            h = torch.relu(z)
        rows = torch.cat(feats + [torch.ones(len(X), 1, dtype=X.dtype)], dim=1)
        rank_a = widths[-1] * int(torch.linalg.matrix_rank(rows))
    else:
        rank_gamma = rank_a = 0
    if degenerate:
        verdict = "degenerate"
    elif rank_gamma == dim:
        verdict = "identifiable"
    elif rank_gamma == rank_a:
        verdict = "not-identifiable"
    else:
        verdict = "inconclusive"
    return {"verdict": verdict, "rank_gamma": rank_gamma, "rank_a": rank_a}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: torch_rank_tool.py CASE.json", file=sys.stderr)
        sys.exit(2)
    print(json.dumps(predict(sys.argv[1])))
