"""``exactident hidden-symmetries``: the survey of :mod:`exactident.symmetry.glr` as a table, JSON or a plot.

``exactident hidden-symmetries [--n0 N] [--depths 4,5,6] [--widths 5,10,15] [--trials T] [--seed S]
[--init torch|he] [--lines N] [--walk-seconds S] [--budget S] [--json] [--plot FILE] [--width-one] [--witnesses]``

Prints one markdown row per (depth, width); ``--width-one`` adds the
architectures with a width-1 hidden layer, ``--witnesses`` the exact witnesses
of full functional dimension for the small architectures (JSON only).  Exit 0,
2 on bad usage.  Called by :mod:`exactident.cli`.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Sequence
from typing import Any

from exactident.errors import OutputError
from exactident.io.argtypes import non_negative_int, positive_int, positive_seconds
from exactident.symmetry.glr import CellResult

__all__ = ["WIDTH_ONE", "add_arguments", "markdown_table", "render_plot", "run", "small_architectures"]

#: Architectures with a width-1 hidden layer surveyed by ``--width-one`` (docs/symmetries.md).
WIDTH_ONE = ((2, 1, 1), (2, 1, 2, 1), (2, 2, 1, 2, 1), (2, 1, 1, 1), (2, 3, 1, 3, 1), (2, 1, 1, 1, 1), (2, 1, 1, 1, 2))


def small_architectures(n0s: Sequence[int] = (2, 3), hidden: Sequence[int] = (2, 3), depth: int = 3,
                        outputs: Sequence[int] = (1, 2)) -> list[tuple[int, ...]]:
    """Every ``(n0, h_1, ..., h_k, out)`` with ``k <= depth`` from the given sets (widths >= 2: Grillo, Montúfar)."""
    return [(n0, *hs, o) for n0 in n0s for k in range(1, depth + 1) for hs in itertools.product(hidden, repeat=k)
            for o in outputs]


def _ints(text: str) -> list[int]:
    try:
        out = [int(t) for t in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, found {text!r}") from None
    if not out or any(v < 1 for v in out):
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, found {text!r}")
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``exactident hidden-symmetries``."""
    parser.add_argument("--n0", type=positive_int, default=None,
                        help="input width (default: the hidden width, as in the paper)")
    parser.add_argument("--depths", type=_ints, default=[4], metavar="D,...",
                        help="the paper's depths d: d layers, d - 1 of them hidden (default 4; the paper: 4,5,6)")
    parser.add_argument("--widths", type=_ints, default=[5], metavar="W,...",
                        help="hidden widths (default 5; the paper: 5,10,15)")
    parser.add_argument("--trials", type=positive_int, default=5, metavar="T", help="draws per cell (default 5)")
    parser.add_argument("--seed", type=non_negative_int, default=0, metavar="S")
    parser.add_argument("--init", choices=("torch", "he"), default="torch",
                        help="weight initialisation (default torch: nn.Linear's)")
    parser.add_argument("--max-boxes", type=positive_int, default=256, metavar="N", help="sub-boxes per sign proof")
    parser.add_argument("--lines", type=non_negative_int, default=4096, metavar="N",
                        help="per trial: at most N random lines walked for the lower bound (default 4096; 0: none)")
    parser.add_argument("--walk-seconds", type=positive_seconds, default=60.0, metavar="S",
                        help="per trial: time budget of the line walk (default 60)")
    from exactident.symmetry.fdim_command import add_region_arguments

    add_region_arguments(parser, "per trial: ")
    parser.add_argument("--budget", type=positive_seconds, default=None, metavar="S",
                        help="per cell: start no trial after S seconds")
    parser.add_argument("--width-one", action="store_true", help="also the architectures with a width-1 layer")
    parser.add_argument("--witnesses", action="store_true",
                        help="also exact witnesses of full functional dimension for small architectures (in --json)")
    parser.add_argument("--json", action="store_true", help="print the exactident-hidden-symmetries/1 object")
    parser.add_argument("--plot", metavar="FILE", help="fraction with full functional dimension by depth (matplotlib)")


def _mech_text(c: CellResult) -> str:
    return ", ".join(f"{k} {a} ({b})" for k, (a, b) in c.mechanisms().items()) or "-"


def _interval_text(c: CellResult) -> str:
    lo = sorted(c.dim - t["upper"] for t in c.trials)
    hi = sorted(c.dim - t["lower"] for t in c.trials)
    if not lo:
        return "-"
    return f"{lo[len(lo) // 2]}..{hi[len(hi) // 2]} (max {max(hi)})"


def markdown_table(cells: Sequence[CellResult]) -> str:
    """One row per cell: trials full at the Gaussian batch, with the random points, certified full (after the region
    cover and the line walk), proved hidden, settled, settled by a complete region cover, mechanisms."""
    head = ("| widths | dim | trials | full at batch | full (random points) | full (certified) | hidden (proved) "
            "| settled | complete covers | median deficit [proved..possible] | mechanisms: trials (dims) | s/trial |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    rows = []
    for c in cells:
        n = len(c.trials)
        per = c.seconds / n if n else 0.0
        rows.append(f"| {'-'.join(map(str, c.widths))} | {c.dim} | {n} | {c.count('batch')} | {c.count('random')} "
                    f"| {c.count('full')} "
                    f"({c.count('full') / n if n else 0:.2f}) | {c.count('hidden')} | {c.count('settled')} "
                    f"| {c.count('covered')} | {_interval_text(c)} | {_mech_text(c)} | {per:.1f} |")
    return head + "\n".join(rows) + "\n"


def render_plot(cells: Sequence[CellResult], fmt: str) -> bytes:
    """Fraction of trials with certified full functional dimension (and at the batch) by depth, one line per width."""
    import io

    from exactident.crosscheck.plot import require_matplotlib

    plt = require_matplotlib()
    fig, ax = plt.subplots(figsize=(6, 3.5), layout="constrained")
    by_width: dict[int, list[CellResult]] = {}
    for c in cells:
        by_width.setdefault(c.widths[1], []).append(c)
    for w, cs in sorted(by_width.items()):
        cs = sorted(cs, key=lambda c: len(c.widths))
        depths = [len(c.widths) - 1 for c in cs]
        line = ax.plot(depths, [c.count("full") / max(len(c.trials), 1) for c in cs], marker="o",
                       label=f"width {w}: certified")[0]
        ax.plot(depths, [c.count("batch") / max(len(c.trials), 1) for c in cs], marker="x", linestyle=":",
                color=line.get_color(), label=f"width {w}: at the Gaussian batch")
    ax.set_xticks(sorted({len(c.widths) - 1 for c in cells}))
    ax.set_xlabel("depth d (layers; d - 1 hidden)")
    ax.set_ylabel("fraction with fdim = dim")
    ax.set_ylim(-0.05, 1.05)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=120)
    plt.close(fig)
    return buf.getvalue()


def run(args: argparse.Namespace) -> int:
    """Run ``exactident hidden-symmetries``; errors propagate to :func:`exactident.cli.main`."""
    from exactident.io.atomic import atomic_write_bytes, write_stdout
    from exactident.symmetry.glr import INITS, paper_architecture, survey_architectures, witness

    fmt = ""
    if args.plot:
        from exactident.crosscheck.plot import plot_format

        fmt = plot_format(args.plot)
    archs = [paper_architecture(d, w, args.n0) for d in args.depths for w in args.widths]
    kw: dict[str, Any] = {"init": args.init, "max_boxes": args.max_boxes, "budget": args.budget,
                          "lines": args.lines, "walk_seconds": args.walk_seconds, "regions": args.regions,
                          "region_seconds": args.region_seconds}
    cells = survey_architectures(archs, args.trials, args.seed, **kw)
    ones = survey_architectures(WIDTH_ONE, args.trials, args.seed, **kw) if args.width_one else []
    wits = {"-".join(map(str, a)): witness(a, args.seed) for a in small_architectures()} if args.witnesses else {}
    if args.plot:
        try:
            atomic_write_bytes(args.plot, render_plot(cells, fmt))
        except OSError as exc:
            raise OutputError(args.plot, exc) from None
    if args.json:
        obj = {"format": "exactident-hidden-symmetries/1", "init": args.init, "init_description": INITS[args.init],
               "inputs": "standard Gaussian float64, converted exactly; dim + 10 per trial",
               "cells": [c.to_dict() for c in cells], "width_one": [c.to_dict() for c in ones],
               "witnesses": wits}
        write_stdout(json.dumps(obj, indent=1) + "\n")
    else:
        text = (f"weights: {INITS[args.init]}; inputs: standard Gaussian, dim + 10 per trial; seed {args.seed}; "
                f"architectures (n0, w x (d - 1), 1), n0 = {args.n0 or 'w'}\n\n")
        text += markdown_table(cells)
        if ones:
            text += "\nwidth-1 hidden layers:\n\n" + markdown_table(ones)
        write_stdout(text)
    return 0
