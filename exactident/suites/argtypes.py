"""argparse types shared by the suite commands (each error names the expectation and the value found)."""

from __future__ import annotations

import argparse

__all__ = ["non_negative_int", "parse_widths", "positive_int", "positive_seconds"]


def parse_widths(text: str) -> list[int]:
    """``"2,3,1"`` -> ``[2, 3, 1]``: positive integers, at least two.

    >>> parse_widths("2,3,1")
    [2, 3, 1]
    >>> parse_widths("2")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected at least two positive integers (N_0,...,N_L), found '2'
    """
    try:
        widths = [int(t) for t in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers like 2,3,1, found {text!r}"
                                         ) from None
    if len(widths) < 2 or any(w < 1 for w in widths):
        raise argparse.ArgumentTypeError(f"expected at least two positive integers (N_0,...,N_L), found {text!r}")
    return widths


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, found {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, found {text!r}")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, found {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, found {text!r}")
    return value


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, found {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, found {text!r}")
    return value
