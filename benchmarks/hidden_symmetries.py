"""Benchmark: the hidden-symmetry experiment of Grigsby, Lindsey, Rolnick, exactly (docs/symmetries.md).

Usage (from the repository root)::

    python benchmarks/hidden_symmetries.py                      # the paper's grid, 10 trials per cell
    python benchmarks/hidden_symmetries.py --trials 4 --depths 4 --widths 5,10   # a reduced grid
    python benchmarks/hidden_symmetries.py --witnesses          # + exact witnesses for the small architectures
    python benchmarks/hidden_symmetries.py --budget 100 --witnesses   # an earlier run of docs/symmetries.md
    python benchmarks/hidden_symmetries.py --widths 5 --region-seconds 600 --walk-seconds 30 --no-width-one \
        --out benchmarks/hidden_symmetries_cover.json       # the width-5 grid settled by region covers
    python benchmarks/hidden_symmetries.py --widths 10,15 --trials-by-width 10:4,15:2 --budget 300 \
        --region-seconds 120 --walk-seconds 60 --no-width-one --out benchmarks/hidden_symmetries_cover_w10_15.json
    python benchmarks/hidden_symmetries.py --replot benchmarks/hidden_symmetries_cover.json \
        benchmarks/hidden_symmetries_cover_w10_15.json     # docs/hidden-symmetries.png

Architectures ``(n0, w x (d - 1), 1)`` with ``n0 = w`` (the paper's), depths ``d`` 4, 5, 6 (layers:
``d - 1`` hidden), widths 5, 10, 15; PyTorch's default ``nn.Linear`` initialisation (and ``--init he``),
seeded numpy, converted exactly; standard Gaussian inputs.  Prints the markdown tables of docs/symmetries.md (the
depth-by-width grid and the width-1 architectures) with times, and writes the JSON
(``--out``, default ``benchmarks/hidden_symmetries.json``; witnesses to
``benchmarks/hidden_symmetries_witnesses.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main() -> None:
    from exactident.symmetry.glr import INITS, paper_architecture, survey_cell, witness
    from exactident.symmetry.glr_command import WIDTH_ONE, markdown_table, small_architectures

    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--depths", default="4,5,6")
    ap.add_argument("--widths", default="5,10,15")
    ap.add_argument("--n0", type=int, default=None, help="input width (default: the hidden width, as in the paper)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--init", default="torch", choices=sorted(INITS))
    ap.add_argument("--budget", type=float, default=None, help="per cell: start no trial after this many seconds")
    ap.add_argument("--lines", type=int, default=4096, help="per trial: at most this many lines walked")
    ap.add_argument("--walk-seconds", type=float, default=60.0, help="per trial: time budget of the line walk")
    ap.add_argument("--regions", type=int, default=None,
                    help="per trial: at most this many regions in the exact cover (default: fdim's; 0: no cover)")
    ap.add_argument("--region-seconds", type=float, default=120.0, help="per trial: time budget of the region cover")
    ap.add_argument("--trials-by-width", default=None,
                    help="e.g. 5:10,10:5,15:3: trials per cell by width (default: --trials for all)")
    ap.add_argument("--no-width-one", action="store_true", help="skip the width-1 architectures")
    ap.add_argument("--witnesses", action="store_true")
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "hidden_symmetries.json"))
    ap.add_argument("--replot", nargs="+", metavar="JSON", default=None,
                    help="no run: plot the cells of these JSON outputs to --plot (docs/hidden-symmetries.png)")
    ap.add_argument("--plot", default=os.path.join(ROOT, "docs", "hidden-symmetries.png"))
    args = ap.parse_args()
    if args.replot:
        replot(args.replot, args.plot)
        return
    depths = [int(d) for d in args.depths.split(",")]
    widths = [int(w) for w in args.widths.split(",")]
    start = time.perf_counter()
    by_width = dict(tuple(int(v) for v in kv.split(":")) for kv in args.trials_by_width.split(",")) \
        if args.trials_by_width else {}
    cells = []
    for w in widths:
        for d in depths:
            c = survey_cell(list(paper_architecture(d, w, args.n0)), by_width.get(w, args.trials), args.seed,
                            init=args.init, budget=args.budget, lines=args.lines, walk_seconds=args.walk_seconds,
                            regions=args.regions, region_seconds=args.region_seconds,
                            progress=lambda s: print(s, file=sys.stderr, flush=True))
            cells.append(c)
            print(markdown_table([c]).splitlines()[-1], flush=True)
    ones = [] if args.no_width_one else [survey_cell(a, 20, args.seed, init=args.init) for a in WIDTH_ONE]
    budget = f" (no trial started after {args.budget:g} s in a cell)" if args.budget else ""
    trials = args.trials_by_width or f"{args.trials} trials per cell"
    print(f"\nweights: {INITS[args.init]}; seed {args.seed}; {trials}{budget}; line walk: {args.lines} lines, "
          f"{args.walk_seconds:g} s per trial\n")
    print(markdown_table(cells))
    if ones:
        print("width-1 hidden layers (20 trials each):\n")
        print(markdown_table(ones))
    total = time.perf_counter() - start
    print(f"total {total:.0f} s")
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"format": "exactident-hidden-symmetries/1", "init": args.init, "seed": args.seed,
                   "lines": args.lines, "walk_seconds": args.walk_seconds,
                   "cells": [c.to_dict() for c in cells], "width_one": [c.to_dict() for c in ones],
                   "seconds": round(total, 1)}, f, indent=1)
    if args.witnesses:
        t0 = time.perf_counter()
        wits = {"-".join(map(str, a)): witness(a, args.seed) for a in small_architectures()}
        found = sum(v is not None for v in wits.values())
        print(f"witnesses: {found} of {len(wits)} small architectures, {time.perf_counter() - t0:.0f} s")
        with open(os.path.join(ROOT, "benchmarks", "hidden_symmetries_witnesses.json"), "w", encoding="utf-8") as f:
            json.dump(wits, f, indent=0)


def replot(paths: list[str], out: str) -> None:
    """The fraction with certified full functional dimension by depth, one line per width, from saved runs."""
    from exactident.symmetry.glr import CellResult
    from exactident.symmetry.glr_command import render_plot

    cells = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for c in json.load(f)["cells"]:
                cells.append(CellResult(c["widths"], c["seed"], c["init"], c["per_trial"], c["trials_requested"]))
    with open(out, "wb") as f:
        f.write(render_plot(cells, os.path.splitext(out)[1].lstrip(".")))
    print(f"wrote {out} ({len(cells)} cells)")


if __name__ == "__main__":
    main()
