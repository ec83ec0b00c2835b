"""Track the certified rank of ``Gamma`` while a small MLP trains (docs/tracking.md).

A ``[10, 12, 8, 1]`` ReLU MLP learns scikit-learn's diabetes data (standardised) with PyTorch for 300
Adam steps at a high learning rate, at which some hidden units die. Every 50 steps
``exactident.track.Tracker`` reads the weights exactly and records the certified rank of ``Gamma``
on a fixed probe of 80 training rows, ``dim``, the verdict, the dead units and the float64 rank beside
it; the records go to ``track.jsonl`` as they finish, and the plot to ``track.png`` (when matplotlib is
installed)::

    python examples/track_training.py [OUTPUT_DIR]
    exactident track-plot OUTPUT_DIR/track.jsonl

Needs torch and scikit-learn (``pip install '.[torch,sklearn,plot]'``). About 10 s on one core.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from sklearn.datasets import load_diabetes

from exactident.errors import UnsupportedCaseError
from exactident.track import Tracker, plot_tracking


def main(out: Path) -> list[dict]:
    out.mkdir(parents=True, exist_ok=True)
    jsonl = out / "track.jsonl"
    jsonl.unlink(missing_ok=True)  # a fresh run (the tracker appends)
    torch.manual_seed(0)
    torch.set_num_threads(1)  # a tiny MLP: one thread is fastest, and leaves the cores to the exact check
    data = load_diabetes()
    X = torch.tensor(data.data, dtype=torch.float32)
    X = (X - X.mean(0)) / X.std(0)
    y = torch.tensor(data.target, dtype=torch.float32).reshape(-1, 1)
    y = (y - y.mean()) / y.std()
    model = torch.nn.Sequential(torch.nn.Linear(10, 12), torch.nn.ReLU(), torch.nn.Linear(12, 8), torch.nn.ReLU(),
                                torch.nn.Linear(8, 1))
    opt = torch.optim.Adam(model.parameters(), lr=0.05)

    tracker = Tracker(model, X[:80], every=50, jsonl=jsonl, budget=30)
    tracker.step(0)  # before training
    for step in range(1, 301):
        batch = torch.randint(0, len(X), (64,))
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(X[batch]), y[batch])
        loss.backward()
        opt.step()
        tracker.step(step)  # the one line: a point every 50 steps

    print(f"{'step':>5} {'rank':>6} {'float':>6} {'dim':>4} {'dead':>4}  verdict")
    for r in tracker.records:
        rank = r["rank_gamma"] if r["rank_gamma"] is not None else r["rank_gamma_interval"]
        print(f"{r['step']:>5} {rank!s:>6} {r['float_rank_gamma']!s:>6} {r['dim']:>4} {r['dead_units']!s:>4}  "
              f"{r['verdict']}")
    try:
        plot_tracking(tracker.records, out / "track.png", title="diabetes MLP [10, 12, 8, 1], Adam lr 0.05")
        print(f"plot: {out / 'track.png'}")
    except UnsupportedCaseError as exc:  # matplotlib is not installed
        print(exc)
    return tracker.records


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("track-output"))
