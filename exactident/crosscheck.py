"""``exactident crosscheck``: float tolerances against exact ranks (issue 4; placeholder)."""

from __future__ import annotations

import argparse

from .errors import UnsupportedCaseError

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH")


def run(args: argparse.Namespace) -> int:
    raise UnsupportedCaseError("crosscheck is not implemented yet")
