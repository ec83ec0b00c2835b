"""Benchmark: certified lower bounds of the functional dimension, random points vs the line walk, equal time.

Usage (from the repository root)::

    python benchmarks/fdim_lower_bounds.py                         # depths d = 4-6, widths 5 and 10
    python benchmarks/fdim_lower_bounds.py --widths 5 --trials 10 --seconds 10

Per trial: the network and the Gaussian batch of the hidden-symmetry survey
(:mod:`exactident.symmetry.glr`, same seeds and architectures: ``(w, w x (d - 1), 1)``), then three exact
lower bounds of ``fdim`` on ``R^n``, each ``rank J(X) mod p`` at an exact sample started from the batch:

- ``old``: the random points of :func:`exactident.symmetry.fdim.lower_bound` (Gaussian times ``2^k``,
  ``k`` in ``0..12``, at most 8 batches, stopping after 3 without gain): the lower bound before this work;
- ``random``: the same random points, but for ``--seconds`` seconds, kept by exact rank gain
  (:class:`exactident.symmetry.linewalk.GreedyRank`);
- ``walk``: the ``old`` random points, then random lines walked through every region they cross
  (:func:`exactident.symmetry.linewalk.walk_lower_bound`) for the rest of the same ``--seconds``
  (what ``exactident fdim`` does).

Prints one markdown row per cell: trials whose bound reaches ``dim`` and the median bound, per method,
and writes the JSON (``--out``, default ``benchmarks/fdim_lower_bounds.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _random_greedy(net, X, seconds: float, seed: int) -> int:
    import numpy as np

    from exactident.linalg.modular import random_primes
    from exactident.model.integer_forward import data_denominator
    from exactident.symmetry.linewalk import SMALL_PRIME_RANGE, GreedyRank, domain_points

    p = random_primes(1, data_denominator(net, X), random.Random(seed), lo=SMALL_PRIME_RANGE[0],
                      hi=SMALL_PRIME_RANGE[1])[0]
    g = GreedyRank(net, p)
    g.offer(X)
    gen = np.random.default_rng(seed)
    start = time.perf_counter()
    while g.rank < net.dim and time.perf_counter() - start < seconds:
        g.offer(domain_points(gen, 64, net.widths[0], None))
    return g.rank


def main() -> None:
    import numpy as np

    from exactident.model.fixed_edges import FixedEdges
    from exactident.symmetry.fdim import lower_bound
    from exactident.symmetry.glr import gaussian_batch, paper_architecture, torch_default_network
    from exactident.symmetry.linewalk import walk_lower_bound

    ap = argparse.ArgumentParser()
    ap.add_argument("--depths", default="4,5,6")
    ap.add_argument("--widths", default="5,10")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=None, help="per trial and method (default: 2 s per width unit)")
    ap.add_argument("--n0", type=int, default=None, help="input width (default: the hidden width)")
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "fdim_lower_bounds.json"))
    args = ap.parse_args()
    rows, out = [], []
    print("| widths | dim | trials | s per method | old: = dim (median) | random: = dim (median) "
          "| walk: = dim (median) |\n|---|---|---|---|---|---|---|", flush=True)
    for w in [int(v) for v in args.widths.split(",")]:
        for d in [int(v) for v in args.depths.split(",")]:
            widths = list(paper_architecture(d, w, args.n0))
            seconds = args.seconds if args.seconds is not None else 2.0 * w
            res = []
            for t in range(args.trials):
                rng = np.random.default_rng([0, widths[0], d - 1, w, t])  # the survey's seeds
                net = torch_default_network(widths, rng)
                X = gaussian_batch(widths[0], net.dim + 10, rng)
                t0 = time.perf_counter()
                old, _, pts = lower_bound(net, X, None, FixedEdges({}), seed=0)
                t1 = time.perf_counter()
                rnd = _random_greedy(net, X, seconds, 0)
                t2 = time.perf_counter()
                walk, _, _ = walk_lower_bound(net, pts, seed=0, max_lines=10**6, patience=10**9,
                                              seconds=max(0.0, seconds - (t1 - t0)))
                t3 = time.perf_counter()
                res.append({"trial": t, "old": old, "old_seconds": round(t1 - t0, 2), "random": rnd,
                            "random_seconds": round(t2 - t1, 2), "walk": walk,
                            "walk_seconds": round(t3 - t2 + t1 - t0, 2)})
            dim = net.dim
            cell = {"widths": widths, "dim": dim, "seconds": seconds, "trials": res}
            out.append(cell)

            def show(k: str, res: list = res, dim: int = dim) -> str:
                return f"{sum(r[k] == dim for r in res)} ({statistics.median(r[k] for r in res):g})"

            row = (f"| {'-'.join(map(str, widths))} | {dim} | {len(res)} | {seconds:g} | {show('old')} "
                   f"| {show('random')} | {show('walk')} |")
            rows.append(row)
            print(row, flush=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"format": "exactident-fdim-lower-bounds/1", "cells": out}, f, indent=1)


if __name__ == "__main__":
    main()
