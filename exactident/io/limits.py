"""Resource limits on input files, checked before any work (docs/case-format.md, "Limits").

Three limits, all raisable (CLI ``--max-file-size``, ``--max-digits``,
``--max-number-digits``; library ``ReadLimits``):

- ``max_bytes``: size of a case or report file.  Files are read in a bounded
  way (:func:`read_bounded`): only a regular file is read (a FIFO, a device, a
  socket is refused from ``stat``, without being opened for reading: a FIFO
  with no writer would block), one larger than the limit is refused from its
  size alone, and at most ``max_bytes + 1`` bytes are read (a file that grows
  meanwhile).  Nothing is parsed before the whole file is known to fit.
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
import zlib
from dataclasses import dataclass

from exactident.errors import CaseFormatError, ExactIdentError

__all__ = [
    "DEFAULT_LIMITS",
    "DEFAULT_WORK_LIMITS",
    "GZIP_MAGIC",
    "DigitBudget",
    "ReadLimits",
    "WorkLimits",
    "add_limit_arguments",
    "add_work_limit_arguments",
    "check_regular",
    "gunzip_bounded",
    "limits_from_args",
    "parse_size",
    "read_bounded",
    "read_text",
    "work_limits_from_args",
]

#: The first two bytes of a gzip stream.
GZIP_MAGIC = b"\x1f\x8b"

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


@dataclass(frozen=True)
class WorkLimits:
    """Caps on what ``verify-certificate`` recomputes (docs/boundary.md, "Limits of the verifier").

    A report names the kind of each bound and the verifier redoes that work from the case; these caps
    keep a report from asking for unbounded work.  Past a cap the part is *not verified*: one line
    naming the field and the cap, exit status 3 (never a hang).

    Attributes
    ----------
    max_exact_entries : int
        Largest matrix the verifier eliminates exactly over Q (an ``exact-elimination`` bound), in
        64-bit words: each entry of the matrix scaled to integers counts one word per 64 bits (at
        least one).  Default 200,000 (a 450 x 450 matrix of one-word entries: seconds).
    max_resolutions : int
        Most tie resolutions the verifier enumerates (``2^ties``), default 4096.

    Examples
    --------
    >>> WorkLimits(max_exact_entries=1000).max_exact_entries, DEFAULT_WORK_LIMITS.max_resolutions
    (1000, 4096)
    """

    max_exact_entries: int = 200_000
    max_resolutions: int = 4096

    def __post_init__(self) -> None:
        for name in ("max_exact_entries", "max_resolutions"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ExactIdentError(f"WorkLimits.{name} must be a positive integer, found {value!r}")


#: The verifier's caps when none are given (the CLI's defaults).
DEFAULT_WORK_LIMITS = WorkLimits()


def _size_text(n: int) -> str:
    if n >= _MiB and n % _MiB == 0:
        return f"{n // _MiB} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} bytes"


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def check_regular(path: str | os.PathLike[str], st: os.stat_result | None = None) -> os.stat_result:
    """``os.stat`` of an input file, refusing anything but a regular file without opening it.

    Raises
    ------
    CaseFormatError
        ``cannot read file (...)`` (missing, no permission, a directory), or
        ``not a regular file (a FIFO): refused without reading it`` (also a
        character or block device, a socket).

    Examples
    --------
    >>> check_regular("/dev/zero")
    Traceback (most recent call last):
    ...
    exactident.errors.CaseFormatError: /dev/zero: not a regular file (a character device): refused without reading it
    """
    source = str(path)
    try:
        st = os.stat(path) if st is None else st
    except OSError as exc:
        raise CaseFormatError(source, "", f"cannot read file ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise CaseFormatError(source, "", "cannot read file (Is a directory)")
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a file")
        raise CaseFormatError(source, "", f"not a regular file ({kind}): refused without reading it")
    return st


def read_bounded(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The bytes of a regular file ``path``, reading at most ``max_bytes + 1`` of them.

    Raises
    ------
    CaseFormatError
        Not a regular file (:func:`check_regular`: checked before opening, and
        again on the opened file), the file cannot be opened or read
        (``cannot read file (...)``), or it is larger than ``max_bytes``
        (``file is larger than the limit ...``, judged by its size before any
        byte is read, and by the bytes read if it grows meanwhile).

    Examples
    --------
    >>> read_bounded("/dev/zero", 16)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    exactident.errors.CaseFormatError: /dev/zero: not a regular file (a character device): refused without reading it
    """
    source = str(path)
    too_big = CaseFormatError(source, "", f"file is larger than the limit of {_size_text(max_bytes)} "
                              "(raise it with --max-file-size)")
    if check_regular(path).st_size > max_bytes:
        raise too_big
    try:
        # O_NONBLOCK: if a FIFO replaced the file since the stat, opening it does not wait for a writer
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise CaseFormatError(source, "", f"cannot read file ({exc.strerror or exc})") from None
    try:
        with open(fd, "rb", buffering=0) as fh:  # unbuffered: no read-ahead past the limit
            if check_regular(path, os.fstat(fh.fileno())).st_size > max_bytes:
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


def gunzip_bounded(data: bytes, source: str, max_bytes: int) -> bytes:
    """Decompress a gzip stream (members one after another), producing at most ``max_bytes + 1`` bytes.

    Raises
    ------
    CaseFormatError
        The decompressed text would pass ``max_bytes`` (a gzip bomb stops there), or the
        stream is damaged or truncated, or followed by something else than gzip members.

    Examples
    --------
    >>> import gzip
    >>> gunzip_bounded(gzip.compress(b"{}"), "c.json.gz", 100)
    b'{}'
    >>> gunzip_bounded(gzip.compress(bytes(10_000)), "c.json.gz", 1000)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    exactident.errors.CaseFormatError: c.json.gz: decompressed text is larger than the limit of 1000 bytes ...
    """
    out: list[bytes] = []
    left = max_bytes + 1
    rest = data
    try:
        while rest:
            d = zlib.decompressobj(wbits=31)  # gzip framing only
            pending = rest
            while True:
                chunk = d.decompress(pending, left)
                out.append(chunk)
                left -= len(chunk)
                if left <= 0:
                    raise CaseFormatError(source, "", f"decompressed text is larger than the limit of "
                                          f"{_size_text(max_bytes)} (raise it with --max-file-size)")
                if d.eof:
                    break
                pending = d.unconsumed_tail
                if not pending:
                    raise CaseFormatError(source, "", "gzip data is truncated")
            rest = d.unused_data
            if rest and not rest.startswith(GZIP_MAGIC):
                raise CaseFormatError(source, "", "gzip data is followed by something else")
    except zlib.error as exc:
        raise CaseFormatError(source, "", f"damaged gzip data ({exc})") from None
    return b"".join(out)


def read_text(path: str | os.PathLike[str], max_bytes: int) -> str:
    """The text of a case or report file: :func:`read_bounded`, gunzipped if gzip, decoded as UTF-8.

    A file starting with the gzip magic bytes ``1f 8b`` is decompressed within the same
    ``max_bytes`` (:func:`gunzip_bounded`); a leading UTF-8 byte order mark is dropped.

    Raises
    ------
    CaseFormatError
        See :func:`read_bounded` and :func:`gunzip_bounded`; ``file is not UTF-8 text``.
    """
    source = str(path)
    data = read_bounded(path, max_bytes)
    if data.startswith(GZIP_MAGIC):
        data = gunzip_bounded(data, source, max_bytes)
    try:
        return data.decode("utf-8-sig")  # a leading BOM is dropped
    except UnicodeDecodeError as exc:
        raise CaseFormatError(source, "", f"file is not UTF-8 text (byte {exc.start})") from None


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


def add_work_limit_arguments(parser: argparse.ArgumentParser) -> None:
    """``--max-exact-entries``, ``--max-resolutions``: the caps of :class:`WorkLimits` (docs/cli.md)."""
    d = DEFAULT_WORK_LIMITS
    parser.add_argument("--max-exact-entries", type=_count, default=d.max_exact_entries, metavar="N",
                        help="do not redo an exact elimination over Q of a matrix larger than N 64-bit words "
                             f"(the part is then not verified; default {d.max_exact_entries})")
    parser.add_argument("--max-resolutions", type=_count, default=d.max_resolutions, metavar="N",
                        help="do not enumerate more than N tie resolutions (a claim needing more is not verified; "
                             f"default {d.max_resolutions})")


def work_limits_from_args(args: argparse.Namespace) -> WorkLimits:
    """The :class:`WorkLimits` of parsed :func:`add_work_limit_arguments` options."""
    return WorkLimits(args.max_exact_entries, args.max_resolutions)


def limits_from_args(args: argparse.Namespace) -> ReadLimits:
    """The :class:`ReadLimits` of parsed :func:`add_limit_arguments` options."""
    return ReadLimits(args.max_file_size, args.max_digits, args.max_number_digits)
