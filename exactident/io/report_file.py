"""Read a report file (``exactident-report/1`` JSON) strictly, numbers included.

Duplicate keys, deep nesting, unreadable files and files over the size limit (read bounded,
gunzipped if gzip, a leading BOM dropped, as case files: :func:`exactident.io.limits.read_text`)
are bad input (:class:`exactident.errors.CaseFormatError`).
Numbers are read as strictly as in case files (:func:`exactident.io.rationals.parse_number`):
``NaN``/``Infinity`` tokens, exponents beyond ``MAX_EXPONENT`` (``1e100000``) and
numbers with more than ``MAX_DIGITS`` digits are rejected with the JSON path of the
field; JSON decimals are kept as exact ``decimal.Decimal`` (never ``float``).  The
rational strings of a certificate (``"p/q"``) are read by :func:`parse_report_rational`:
ASCII digits only (``"٣/٤"`` and fullwidth digits are refused), no blanks, nonzero
denominator.
"""

from __future__ import annotations

import decimal
import json
import re
from fractions import Fraction
from typing import Any

import flint

from exactident.errors import CaseFormatError
from exactident.io.limits import DEFAULT_LIMITS, DigitBudget, ReadLimits, read_text
from exactident.io.rationals import NonFinite, parse_number

__all__ = ["looks_like_case", "looks_like_report", "parse_report_rational", "read_report_json"]

# re.ASCII: without it \d also matches other scripts' digits.
_RATIONAL = re.compile(r"([+-]?[0-9]+)(?:/([0-9]+))?", re.ASCII)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:  # json keeps the last value silently; a reader might see the first
            raise _DuplicateKey(key)
        out[key] = value
    return out


class _DuplicateKey(Exception):
    """A JSON object with a repeated key (carries the key)."""


def _json_int(text: str) -> int | decimal.Decimal:
    # int() refuses more than 4300 digits; Decimal keeps them so the digit limit names the field
    return int(text) if len(text) < 4000 else decimal.Decimal(text)


def _check_numbers(value: Any, source: str, where: str, budget: DigitBudget | None) -> None:
    """Every non-integer number (and every huge integer) passes the case-file rules, or an error names it."""
    stack = [(value, where)]
    while stack:
        v, at = stack.pop()
        if isinstance(v, dict):
            stack.extend((item, f"{at}.{key}" if at else str(key)) for key, item in v.items())
        elif isinstance(v, list):
            stack.extend((item, f"{at}[{k}]") for k, item in enumerate(v))
        elif isinstance(v, (NonFinite, decimal.Decimal)):
            parse_number(v, source, at, budget)  # raises CaseFormatError naming the field


def read_report_json(path: str, max_bytes: int | None = None, *, limits: ReadLimits | None = None) -> Any:
    """The report file as plain JSON; every failure is a one-line :class:`~exactident.errors.CaseFormatError`.

    Parameters
    ----------
    path : str
    max_bytes : int, optional
        At most ``max_bytes + 1`` bytes are read (default: ``limits.max_bytes``, else the
        case-file limit of :data:`exactident.io.limits.DEFAULT_LIMITS`); a larger file is refused.
    limits : ReadLimits, optional
        When given, its per-number digit limit (and digit budget) replaces ``MAX_DIGITS``
        for the report's JSON numbers, as for a case file read with the same limits.

    Returns
    -------
    dict or list
        JSON decimals as ``decimal.Decimal`` (exact), integers as ``int``.

    Raises
    ------
    CaseFormatError
        Unreadable file, a file over the size limit, invalid JSON, a duplicate key, nesting too deep, or a
        number a case file would refuse (``NaN``, ``Infinity``, ``1e100000``,
        more than ``MAX_DIGITS`` digits), naming its JSON path.
    """
    # the same rules as a case file: gunzipped if gzip (within the same limit), a leading BOM dropped
    text = read_text(path, max_bytes or (limits or DEFAULT_LIMITS).max_bytes)
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_float=decimal.Decimal,
                          parse_int=_json_int, parse_constant=NonFinite)
    except json.JSONDecodeError as exc:
        raise CaseFormatError(path, "", f"not valid JSON ({exc.msg}, line {exc.lineno})") from None
    except RecursionError:
        raise CaseFormatError(path, "", "not valid JSON (nested too deeply)") from None
    except _DuplicateKey as exc:
        raise CaseFormatError(path, "", f"not valid JSON (duplicate key {exc.args[0]!r})") from None
    except (ValueError, decimal.InvalidOperation) as exc:  # e.g. an exponent Decimal refuses
        raise CaseFormatError(path, "", f"not valid JSON ({exc})") from None
    _check_numbers(data, path, "", DigitBudget(limits, path) if limits is not None else None)
    return data


def parse_report_rational(text: Any, source: str, field: str) -> Fraction:
    """A certificate's rational string ``"p/q"`` or ``"p"``, read strictly.

    Parameters
    ----------
    text : object
        The decoded JSON value.
    source, field : str
        Report file name and JSON path, for the error.

    Returns
    -------
    Fraction
        Any size (the digits are converted by FLINT, not by ``int(str)``).

    Raises
    ------
    CaseFormatError
        Not a string, not ASCII ``[+-]digits[/digits]`` exactly (blanks, decimals,
        ``NaN``, other scripts' digits), or a zero denominator.

    Examples
    --------
    >>> parse_report_rational("-6/4", "r.json", "delta")
    Fraction(-3, 2)
    >>> parse_report_rational("\\u0663/\\u0664", "r.json", "delta")
    Traceback (most recent call last):
    ...
    exactident.errors.CaseFormatError: r.json: delta: expected a rational string 'p/q' (ASCII digits), found '٣/٤'
    """
    m = _RATIONAL.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        shown = repr(text[:40]) if isinstance(text, str) else type(text).__name__
        raise CaseFormatError(source, field, f"expected a rational string 'p/q' (ASCII digits), found {shown}")
    num = int(flint.fmpz(m.group(1).lstrip("+")))
    den = int(flint.fmpz(m.group(2))) if m.group(2) is not None else 1
    if den == 0:
        raise CaseFormatError(source, field, f"zero denominator in {text[:40]!r}")
    return Fraction(num, den)


def looks_like_case(data: Any) -> bool:
    """A decoded JSON object that is a case file (``exactident-case/1``) rather than a report."""
    return isinstance(data, dict) and (data.get("format") == "exactident-case/1"
                                       or ("weights" in data and "verdict" not in data))


def looks_like_report(data: Any) -> bool:
    """A decoded JSON value that is a report (``exactident-report/1``, or an array of them) rather than a case."""
    if isinstance(data, list):
        return bool(data) and all(looks_like_report(d) for d in data)
    return isinstance(data, dict) and (data.get("format") == "exactident-report/1"
                                       or ("verdict" in data and "weights" not in data)
                                       or ("certificate" in data and "weights" not in data))
