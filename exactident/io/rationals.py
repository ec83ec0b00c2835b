"""Exact numbers at the edge: parse JSON values to ``fmpq``, print them back.

Case files (docs/case-format.md): a number is a JSON integer, a JSON decimal read as the exact decimal
it spells, or a string ``"p/q"``, ``"-7"``, ``"1.25e-3"``.  Floats never enter:
the JSON reader must be called with ``parse_float=decimal.Decimal`` (see
:func:`exactident.io.case.read_json`).  Writers emit canonical reduced ``"p/q"``
(or ``"p"`` for integers), so a round trip is byte-stable.
"""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction

import flint

__all__ = [
    "MAX_DIGITS",
    "MAX_EXPONENT",
    "NonFinite",
    "describe_json_value",
    "format_fmpq",
    "parse_number",
    "to_fmpq",
]

#: Largest decimal exponent accepted; beyond it the exact integer would be huge.
MAX_EXPONENT = 4000
#: Most digits accepted in one integer or decimal (numerator and denominator each for p/q).
MAX_DIGITS = 4000

# re.ASCII: without it \d also matches other scripts' digits ("٣/٤", fullwidth "３").
_DECIMAL = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_RATIO = re.compile(r"([+-]?\d+)/(\d+)", re.ASCII)


def to_fmpq(value: int | Fraction | flint.fmpq | flint.fmpz) -> flint.fmpq:
    """Convert an exact Python number to ``fmpq`` (python-flint rejects Fraction).

    Parameters
    ----------
    value : int, Fraction, fmpz or fmpq
        Any exact rational.  ``bool`` and ``float`` are refused.

    Returns
    -------
    fmpq

    Raises
    ------
    TypeError
        For floats, bools and other inexact types (a programming error, not
        bad input: user input goes through :func:`parse_number`).

    Examples
    --------
    >>> to_fmpq(Fraction(-6, 4))
    -3/2
    """
    if isinstance(value, flint.fmpq):
        return value
    if isinstance(value, (bool, float)):
        raise TypeError(f"inexact or boolean value {value!r} on the exact path")
    if isinstance(value, (int, flint.fmpz)):
        return flint.fmpq(value)
    if isinstance(value, Fraction):
        return flint.fmpq(value.numerator, value.denominator)
    raise TypeError(f"cannot convert {type(value).__name__} to fmpq")


class NonFinite(str):
    """A JSON ``NaN``/``Infinity``/``-Infinity`` token, kept so the error can name its field."""


def describe_json_value(value: object) -> str:
    """Short user-facing description of a decoded JSON value, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, NonFinite):
        return str(value)
    if isinstance(value, (int, Decimal)):
        return f"number {value}"
    if isinstance(value, str):
        return "string " + repr(value[:40]) + ("..." if len(value) > 40 else "")
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _from_decimal(value: Decimal, source: str, field: str, shown: str | None = None) -> flint.fmpq:
    from exactident.errors import CaseFormatError

    if not value.is_finite():
        raise CaseFormatError(source, field, f"expected a finite number, found {value}")
    if len(value.as_tuple().digits) > MAX_DIGITS:
        raise CaseFormatError(source, field, f"more than {MAX_DIGITS} digits in {(shown or str(value))[:40]}...")
    if value and abs(value.adjusted()) > MAX_EXPONENT:
        raise CaseFormatError(source, field, f"exponent beyond ±{MAX_EXPONENT} in {(shown or str(value))[:40]}")
    return to_fmpq(Fraction(value))


def parse_number(value: object, source: str, field: str) -> flint.fmpq:
    """Read one number of a case file exactly.

    Parameters
    ----------
    value : int, decimal.Decimal or str
        As produced by ``json.loads(..., parse_float=Decimal)``.
    source, field : str
        File name and JSON path, used in the error message.

    Returns
    -------
    fmpq
        The exact rational the value spells (``0.1`` is 1/10).

    Raises
    ------
    CaseFormatError
        For booleans, floats, NaN, infinities, zero denominators, malformed
        strings and exponents beyond :data:`MAX_EXPONENT`.

    Examples
    --------
    >>> parse_number(Decimal("0.1"), "a.json", "sample[0][0]")
    1/10
    >>> parse_number("-6/4", "a.json", "b")
    -3/2
    >>> parse_number("1/0", "a.json", "biases[0][1]")
    Traceback (most recent call last):
    ...
    exactident.errors.CaseFormatError: a.json: biases[0][1]: zero denominator in '1/0'
    """
    from exactident.errors import CaseFormatError

    if isinstance(value, NonFinite):
        raise CaseFormatError(source, field, f"expected a finite number, found {value}")
    if isinstance(value, bool) or value is None:
        raise CaseFormatError(source, field, f"expected a number, found {describe_json_value(value)}")
    if isinstance(value, int):
        return flint.fmpq(value)
    if isinstance(value, Decimal):
        return _from_decimal(value, source, field)
    if isinstance(value, str):
        text = value.strip()
        ratio = _RATIO.fullmatch(text)
        if ratio:
            if max(len(ratio.group(1)), len(ratio.group(2))) > MAX_DIGITS + 1:
                raise CaseFormatError(source, field, f"more than {MAX_DIGITS} digits in {value[:40]!r}...")
            p, q = int(ratio.group(1)), int(ratio.group(2))
            if q == 0:
                raise CaseFormatError(source, field, f"zero denominator in {value!r}")
            return flint.fmpq(p, q)
        if _DECIMAL.fullmatch(text):
            _, _, exponent = text.lower().partition("e")
            if len(exponent.lstrip("+-")) > 9:  # Decimal itself refuses such exponents
                raise CaseFormatError(source, field, f"exponent beyond ±{MAX_EXPONENT} in {value[:40]!r}")
            return _from_decimal(Decimal(text), source, field, repr(value))
        raise CaseFormatError(
            source, field, f"expected a number like 3, -7/2 or 1.25e-3, found {value[:40]!r}"
        )
    if isinstance(value, float):
        raise CaseFormatError(source, field, f"float {value!r} is not exact; parse JSON with Decimal (or build "
                                             "the case with Case.from_arrays, which reads floats exactly)")
    if isinstance(value, (list, dict)):
        raise CaseFormatError(source, field, f"expected a number, found {describe_json_value(value)}")
    raise CaseFormatError(source, field, f"expected a number, found {type(value).__name__} {value!r}"[:200]
                          + " (Case.from_arrays takes Fraction, fmpq, floats and numpy arrays)")


def format_fmpq(q: flint.fmpq) -> str:
    """Canonical text of a rational: ``"p/q"`` reduced, ``"p"`` when an integer.

    Examples
    --------
    >>> format_fmpq(flint.fmpq(6, -4)), format_fmpq(flint.fmpq(3))
    ('-3/2', '3')
    """
    q = to_fmpq(q)
    return str(q.p) if q.q == 1 else f"{q.p}/{q.q}"
