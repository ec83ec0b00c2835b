"""``exactident track-plot FILE.jsonl [-o IMAGE]``: the picture of a tracking run's records (docs/tracking.md)."""

from __future__ import annotations

import argparse
import os

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``track-plot``."""
    parser.add_argument("jsonl", help="tracking records (JSON Lines, written by exactident.track)")
    parser.add_argument("-o", "--output", default=None,
                        help="image file (png, svg, pdf, ...; default: FILE with the extension .png)")
    parser.add_argument("--title", default=None, help="the figure's title")


def run(args: argparse.Namespace) -> int:
    """Read the records, plot them, print the image's path; exit 0.

    Raises
    ------
    CaseFormatError
        The file cannot be read or a line is not a record (naming the line); an unsupported image format.
    UnsupportedCaseError
        matplotlib is missing; no records.
    """
    from exactident.track.core import read_records
    from exactident.track.plot import plot_tracking

    records = read_records(args.jsonl)
    out = args.output or os.path.splitext(args.jsonl)[0] + ".png"
    plot_tracking(records, out, title=args.title)
    print(f"{out}: {len(records)} points")
    return 0
