"""Resource limits on input files, checked before any work (docs/case-format.md, "Limits").

Three limits, all raisable (CLI ``--max-file-size``, ``--max-digits``,
``--max-number-digits``; library ``ReadLimits``):

- ``max_bytes``: size of a case or report file.  Files are read in a bounded
  way (:func:`read_bounded`): a regular file larger than the limit is refused
  from its size alone, anything else (``/dev/zero``, a FIFO, a pipe) is read
  up to ``max_bytes + 1`` bytes and refused there.  Nothing is parsed before
  the whole file is known to fit.
- ``max_digits``: decimal digits of all the numbers of one case: ``p/q`` counts
  the digits of ``p`` and ``q``, an integer its digits, a decimal its mantissa
  digits plus ``|exponent|`` (``1e4000`` counts 4001, ``0.25`` counts 4).
  Charged number by number as the case is validated, before the exact integer
  is built, so a few bytes spelling huge numbers cannot blow up.
- ``max_number_digits``: digits of one number (numerator or denominator) and
  the largest decimal exponent magnitude.

Every refusal is one line naming the file (and field), exit status 2 in the CLI.
"""

from __future__ import annotations

import argparse
import os
import stat
from dataclasses import dataclass

from exactident.errors import CaseFormatError, ExactIdentError

__all__ = [
    "DEFAULT_LIMITS",
    "DigitBudget",
    "ReadLimits",
    "add_limit_arguments",
    "limits_from_args",
    "parse_size",
    "read_bounded",
]

_MiB = 2**20


@dataclass(frozen=True)
class ReadLimits:
    """Limits on one input file (docs/case-format.md, "Limits").

    Attributes
    ----------
    max_bytes : int
        Largest file size accepted, in bytes (default 8 MiB: about 48 times the
        largest shipped case; validating a file of that size takes seconds
        and a few hundred MB at worst).
    max_digits : int
        Largest total of decimal digits over all numbers of one case (default
        10,000,000: a plain-text case under ``max_bytes`` cannot exceed it, so it
        only stops numbers whose exponent spells thousands of digits in a few bytes).
    max_number_digits : int
        Largest number of digits of one numerator or denominator, and largest
        ``|exponent|`` of a decimal (default 4000).

    Examples
    --------
    >>> ReadLimits(max_bytes=1024).max_bytes, DEFAULT_LIMITS.max_number_digits
    (1024, 4000)
    """

    max_bytes: int = 8 * _MiB
    max_digits: int = 10_000_000
    max_number_digits: int = 4000

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_digits", "max_number_digits"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ExactIdentError(f"ReadLimits.{name} must be a positive integer, found {value!r}")


#: The limits used when none are given (the CLI's defaults).
DEFAULT_LIMITS = ReadLimits()


def _size_text(n: int) -> str:
    if n >= _MiB and n % _MiB == 0:
        return f"{n // _MiB} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} bytes"


def read_bounded(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The bytes of ``path``, reading at most ``max_bytes + 1`` of them.

    Raises
    ------
    CaseFormatError
        The file cannot be opened or read (``cannot read file (...)``), or it is
        larger than ``max_bytes`` (``file is larger than the limit ...``): a
        regular file is judged by its size before any byte is read; a device,
        FIFO or pipe after ``max_bytes + 1`` bytes.

    Examples
    --------
    >>> read_bounded("/dev/zero", 16)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    exactident.errors.CaseFormatError: /dev/zero: file is larger than the limit of 16 bytes (raise it with ...)
    """
    source = str(path)
    too_big = CaseFormatError(source, "", f"file is larger than the limit of {_size_text(max_bytes)} "
                              "(raise it with --max-file-size)")
    try:
        with open(path, "rb", buffering=0) as fh:  # unbuffered: no read-ahead past the limit
            st = os.fstat(fh.fileno())
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(21, "Is a directory")
            if stat.S_ISREG(st.st_mode) and st.st_size > max_bytes:
                raise too_big
            chunks = []
            left = max_bytes + 1
            while left > 0:
                chunk = fh.read(min(left, _MiB))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
    except OSError as exc:
        raise CaseFormatError(source, "", f"cannot read file ({exc.strerror or exc})") from None
    if left <= 0:
        raise too_big
    return b"".join(chunks)


class DigitBudget:
    """Counts the digits of a case's numbers against :class:`ReadLimits` (one per file)."""

    def __init__(self, limits: ReadLimits, source: str) -> None:
        self.limits = limits
        self.source = source
        self.used = 0

    @property
    def per_number(self) -> int:
        return self.limits.max_number_digits

    def charge(self, digits: int, field: str) -> None:
        """Add ``digits``; refuse (naming the field) once the total passes ``max_digits``."""
        self.used += digits
        if self.used > self.limits.max_digits:
            raise CaseFormatError(self.source, field, f"the numbers so far have {self.used} digits, more than the "
                                  f"limit of {self.limits.max_digits} for one case (raise it with --max-digits)")


def parse_size(text: str) -> int:
    """``"16M"``, ``"512K"``, ``"2G"`` or a plain byte count, for ``--max-file-size``.

    Examples
    --------
    >>> parse_size("16M"), parse_size("512k"), parse_size("1000")
    (16777216, 524288, 1000)
    """
    units = {"k": 2**10, "m": 2**20, "g": 2**30}
    t = text.strip().lower().removesuffix("b").removesuffix("i")
    factor = units.get(t[-1:], 1)
    digits = t[:-1] if t[-1:] in units else t
    if not digits.isascii() or not digits.isdigit() or len(digits) > 18 or int(digits) * factor < 1:
        raise argparse.ArgumentTypeError(f"expected a size like 64M, 512K or 1000000 (bytes), found {text!r}")
    return int(digits) * factor


def _count(text: str) -> int:
    if not text.isascii() or not text.isdigit() or len(text) > 18 or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, found {text!r}")
    return int(text)


def add_limit_arguments(parser: argparse.ArgumentParser) -> None:
    """``--max-file-size``, ``--max-digits``, ``--max-number-digits`` (docs/cli.md)."""
    d = DEFAULT_LIMITS
    parser.add_argument("--max-file-size", type=parse_size, default=d.max_bytes, metavar="SIZE",
                        help=f"refuse input files larger than SIZE (default {_size_text(d.max_bytes)})")
    parser.add_argument("--max-digits", type=_count, default=d.max_digits, metavar="N",
                        help=f"refuse a case whose numbers have more than N digits in all (default {d.max_digits})")
    parser.add_argument("--max-number-digits", type=_count, default=d.max_number_digits, metavar="N",
                        help="refuse a number with more than N digits, or a decimal exponent beyond N "
                             f"(default {d.max_number_digits})")


def limits_from_args(args: argparse.Namespace) -> ReadLimits:
    """The :class:`ReadLimits` of parsed :func:`add_limit_arguments` options."""
    return ReadLimits(args.max_file_size, args.max_digits, args.max_number_digits)
