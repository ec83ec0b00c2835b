"""argparse types shared by every command: each error names the expectation and the value found.

Plain standard library, so the CLI can import it at start-up.  Numbers of
options are read with ``int()``/``float()``: they are counts, seeds and
seconds, never parameters of a network (those are read exactly, in
:mod:`exactident.io.rationals`, as ``--box`` is: :func:`exactident.io.rationals.parse_box`).
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from typing import TypeVar

__all__ = ["any_int", "looks_like_number", "non_negative_int", "parse_widths", "positive_int", "positive_number",
           "positive_seconds"]

T = TypeVar("T")


def _checked(text: str, convert: Callable[[str], T], ok: Callable[[T], bool], expected: str) -> T:
    """``convert(text)`` if it parses and passes ``ok``, else :class:`argparse.ArgumentTypeError`."""
    try:
        value = convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, found {text!r}") from None
    if not ok(value):
        raise argparse.ArgumentTypeError(f"expected {expected}, found {text!r}")
    return value


def parse_widths(text: str) -> list[int]:
    """``"2,3,1"`` -> ``[2, 3, 1]``: positive integers, at least two.

    >>> parse_widths("2,3,1")
    [2, 3, 1]
    >>> parse_widths("2")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected at least two positive integers (N_0,...,N_L), found '2'
    """
    widths = _checked(text, lambda t: [int(w) for w in t.split(",")], lambda _: True,
                      "comma-separated positive integers like 2,3,1")
    if len(widths) < 2 or any(w < 1 for w in widths):
        raise argparse.ArgumentTypeError(f"expected at least two positive integers (N_0,...,N_L), found {text!r}")
    return widths


def positive_int(text: str) -> int:
    """A count ``>= 1``.

    >>> positive_int("3")
    3
    >>> positive_int("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected a positive integer, found '0'
    """
    return _checked(text, int, lambda v: v >= 1, "a positive integer")


def non_negative_int(text: str) -> int:
    """A count or seed ``>= 0``.

    >>> non_negative_int("0")
    0
    """
    return _checked(text, int, lambda v: v >= 0, "a non-negative integer")


def any_int(text: str) -> int:
    """Any integer (a seed).

    >>> any_int("-7")
    -7
    """
    return _checked(text, int, lambda _: True, "an integer")


def positive_number(text: str) -> float:
    """A positive finite number (a tolerance), float64.

    >>> positive_number("1e-6")
    1e-06
    >>> positive_number("inf")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected a positive finite number, found 'inf'
    """
    return _checked(text, float, lambda v: v > 0 and math.isfinite(v), "a positive finite number")


def positive_seconds(text: str) -> float:
    """A positive finite number of seconds (a budget or timeout).

    >>> positive_seconds("2.5")
    2.5
    """
    return _checked(text, float, lambda v: v > 0 and math.isfinite(v), "a positive number of seconds")


#: A command-line word that is a number or a ``LO:HI`` box (``-3``, ``-1/2:3/2``, ``-.5e3``), not an option.
_NUMBER_WORD = re.compile(r"-[0-9.][0-9./:eE+-]*")


def looks_like_number(word: str) -> bool:
    """Whether a word starting with ``-`` is a negative number or box (an argument), not an option.

    argparse alone reads ``-3:3`` and ``-1/2`` as unknown options; no option of exactident
    starts with a digit, so the CLI's parser takes such words as values (``--box -3:3``).

    >>> looks_like_number("-3:3"), looks_like_number("-1/2"), looks_like_number("--json")
    (True, True, False)
    """
    return _NUMBER_WORD.fullmatch(word) is not None
