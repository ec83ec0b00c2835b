"""Exact numbers at the edge: parse JSON values to ``fmpq``, print them back.

Case files (docs/case-format.md): a number is a JSON integer, a JSON decimal read as the exact decimal
it spells, or a string ``"p/q"``, ``"-7"``, ``"1.25e-3"``.  Floats never enter:
the JSON reader must be called with ``parse_float=decimal.Decimal`` (see
:func:`exactident.io.case.read_json`).  Writers emit canonical reduced ``"p/q"``
(or ``"p"`` for integers), so a round trip is byte-stable.

Any size: Python refuses ``int(str)`` and ``str(int)`` beyond 4300 digits (an
interpreter-wide limit, ``sys.set_int_max_str_digits``, which a library must not
change for its caller).  Every conversion here goes through FLINT's ``fmpz``
(``fmpz(text)``, ``str(fmpz)``: no such limit, and quasi-linear time), so numbers
of any size the input limits allow are read and written; :func:`short_text`
abbreviates them in messages.
"""

from __future__ import annotations

import argparse
import re
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING

import flint

from exactident.errors import CaseFormatError

if TYPE_CHECKING:
    from exactident.io.limits import DigitBudget

__all__ = [
    "BOX_HELP",
    "MAX_DIGITS",
    "MAX_EXPONENT",
    "NonFinite",
    "add_box_argument",
    "approx_text",
    "describe_json_value",
    "format_fmpq",
    "format_int",
    "parse_box",
    "parse_number",
    "parse_rational",
    "parse_row",
    "short_text",
    "to_fmpq",
]

#: Largest decimal exponent accepted; beyond it the exact integer would be huge.
MAX_EXPONENT = 4000
#: Most digits accepted in one integer or decimal (numerator and denominator each for p/q).
MAX_DIGITS = 4000

# re.ASCII: without it \d also matches other scripts' digits ("٣/٤", fullwidth "３").
_DECIMAL = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_RATIO = re.compile(r"([+-]?\d+)/(\d+)", re.ASCII)
_SMALL_INT = re.compile(r"[+-]?\d+", re.ASCII)


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
    if isinstance(value, int):
        return f"number {short_text(format_int(value))}"
    if isinstance(value, Decimal):
        return f"number {short_text(str(value))}"
    if isinstance(value, str):
        return "string " + repr(value[:40]) + ("..." if len(value) > 40 else "")
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _digits(n: int) -> int:
    """Decimal digits of ``|n|`` (any size; no ``str(int)``)."""
    n = abs(n)
    if n.bit_length() < 13_000:  # < 3914 digits: within Python's own str() limit
        return len(str(n))
    return len(str(flint.fmpz(n)))


def _from_decimal(value: Decimal, source: str, field: str, shown: str, budget: DigitBudget | None) -> flint.fmpq:
    per = budget.per_number if budget is not None else MAX_DIGITS
    if not value.is_finite():
        raise CaseFormatError(source, field, f"expected a finite number, found {value}")
    _sign, digits, exponent = value.as_tuple()
    if len(digits) <= 18 and -18 <= int(exponent) <= 0:  # fast path: short decimals like 0.25
        if budget is not None:
            budget.charge(len(digits) - int(exponent), field)
        m = int(value.scaleb(-int(exponent)))
        return flint.fmpq(m, 10 ** -int(exponent))
    if len(digits) > per:
        raise CaseFormatError(source, field, f"more than {per} digits in {shown[:40]}...")
    if value and abs(value.adjusted()) > per:
        raise CaseFormatError(source, field, f"exponent beyond ±{per} in {shown[:40]}")
    if budget is not None:  # before the exact integer (10^|exponent|) is built
        budget.charge(len(digits) + abs(int(exponent)), field)
    return to_fmpq(Fraction(value))


def parse_number(value: object, source: str, field: str, budget: DigitBudget | None = None) -> flint.fmpq:
    """Read one number of a case file exactly.

    Parameters
    ----------
    value : int, decimal.Decimal or str
        As produced by ``json.loads(..., parse_float=Decimal)``.
    source, field : str
        File name and JSON path, used in the error message.
    budget : DigitBudget, optional
        The case's digit budget (:class:`exactident.io.limits.DigitBudget`):
        its per-number limit replaces :data:`MAX_DIGITS` / :data:`MAX_EXPONENT`
        and the number's digits are charged to it before the integer is built.

    Returns
    -------
    fmpq
        The exact rational the value spells (``0.1`` is 1/10), of any size.

    Raises
    ------
    CaseFormatError
        For booleans, floats, NaN, infinities, zero denominators, malformed
        strings, more digits or a larger exponent than allowed, and a case
        over its digit budget.

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
    per = budget.per_number if budget is not None else MAX_DIGITS
    if isinstance(value, NonFinite):
        raise CaseFormatError(source, field, f"expected a finite number, found {value}")
    if isinstance(value, bool) or value is None:
        raise CaseFormatError(source, field, f"expected a number, found {describe_json_value(value)}")
    if isinstance(value, int):
        n = _digits(value)
        if n > per:
            raise CaseFormatError(source, field, f"more than {per} digits in {short_text(format_int(value))}")
        if budget is not None:
            budget.charge(n, field)
        return flint.fmpq(value)
    if isinstance(value, Decimal):
        return _from_decimal(value, source, field, str(value)[:41], budget)
    if isinstance(value, str):
        text = value.strip()
        if len(text) <= 18 and _SMALL_INT.fullmatch(text):  # fast path: most entries of real cases
            if budget is not None:
                budget.charge(len(text.lstrip("+-")), field)
            return flint.fmpq(int(text))
        ratio = _RATIO.fullmatch(text)
        if ratio:
            p_text, q_text = ratio.group(1).lstrip("+"), ratio.group(2)
            if max(len(p_text.lstrip("-")), len(q_text)) > per:
                raise CaseFormatError(source, field, f"more than {per} digits in {value[:40]!r}...")
            if budget is not None:
                budget.charge(len(p_text.lstrip("-")) + len(q_text), field)
            p, q = flint.fmpz(p_text), flint.fmpz(q_text)  # no 4300-digit limit, unlike int()
            if q == 0:
                raise CaseFormatError(source, field, f"zero denominator in {value!r}")
            return flint.fmpq(p, q)
        if _DECIMAL.fullmatch(text):
            _, _, exponent = text.lower().partition("e")
            if len(exponent.lstrip("+-")) > 9:  # Decimal itself refuses such exponents
                raise CaseFormatError(source, field, f"exponent beyond ±{per} in {value[:40]!r}")
            return _from_decimal(Decimal(text), source, field, repr(value), budget)
        raise CaseFormatError(
            source, field, f"expected a number like 3, -7/2 or 1.25e-3, found {value[:40]!r}"
        )
    if isinstance(value, float):
        raise CaseFormatError(source, field, f"float {value!r} is not exact; parse JSON with Decimal (or build "
                                             "the case with Case.from_arrays, which reads floats exactly)")
    if isinstance(value, (list, dict)):
        raise CaseFormatError(source, field, f"expected a number, found {describe_json_value(value)}")
    raise CaseFormatError(source, field, f"expected a number, found {type(value).__name__} {short_text(repr(value))}"
                          " (Case.from_arrays takes Fraction, fmpq, floats and numpy arrays)")


#: Longest string :func:`parse_row` reads itself (the 17-digit ``"p/q"`` of a float64 has 36 characters);
#: a longer one goes through :func:`parse_number`, whose ``fmpz`` reads any size.
_ROW_FAST_CHARS = 80
_SIGNS = ("+", "-")


def parse_row(values: list[object], source: str, where: str, budget: DigitBudget) -> list[flint.fmpq]:
    """:func:`parse_number` of every entry of a list (a weight row, a bias vector, a sample point), faster.

    The canonical strings of the case format (``"p/q"`` and ``"p"``, short and well formed) are read
    here directly and charged to ``budget`` as :func:`parse_number` charges them; every other value
    (JSON numbers, decimals, anything malformed, over a limit or making the budget overflow) goes
    through :func:`parse_number` itself with its field ``where[j]``, so the values, the digits charged
    and every error are exactly :func:`parse_number`'s.

    Parameters
    ----------
    values : list
        Decoded JSON values (``json.loads(..., parse_float=Decimal)``).
    source, where : str
        File name and the JSON path of the list (entry ``j`` is ``where[j]`` in messages).
    budget : DigitBudget
        The case's digit budget (:class:`exactident.io.limits.DigitBudget`).

    Returns
    -------
    list of fmpq
        One exact rational per entry, in order.

    Raises
    ------
    CaseFormatError
        As :func:`parse_number`, naming the first bad entry.

    Examples
    --------
    >>> from exactident.io.limits import DEFAULT_LIMITS, DigitBudget
    >>> budget = DigitBudget(DEFAULT_LIMITS, "a.json")
    >>> parse_row(["-6/4", "+7", 3, Decimal("0.25")], "a.json", "sample[0]", budget), budget.used
    ([-3/2, 7, 3, 1/4], 8)
    >>> parse_row(["1/2", "1/0"], "a.json", "sample[1]", budget)
    Traceback (most recent call last):
    ...
    exactident.errors.CaseFormatError: a.json: sample[1][1]: zero denominator in '1/0'
    """
    per, most = budget.per_number, budget.limits.max_digits
    used = budget.used  # kept in a local while the entries are short canonical strings
    fmpq = flint.fmpq
    out = []
    for j, v in enumerate(values):
        # ``type(v) is str``: not NonFinite (a str subclass); isascii: isdigit then means 0-9 only
        if type(v) is str and len(v) <= _ROW_FAST_CHARS and v.isascii():
            p, ratio, q = v.partition("/")
            magnitude = p[1:] if p[:1] in _SIGNS else p
            if ratio:  # parse_number's "p/q": [+-]?digits/digits, q nonzero, each part within ``per``
                if magnitude.isdigit() and q.isdigit():
                    n = len(magnitude) + len(q)
                    if len(magnitude) <= per and len(q) <= per and used + n <= most:
                        den = int(q)
                        if den:
                            used += n
                            out.append(fmpq(int(p), den))
                            continue
            elif len(v) <= 18 and magnitude.isdigit() and used + len(magnitude) <= most:
                used += len(magnitude)  # parse_number's short integer: no per-number test
                out.append(fmpq(int(p)))
                continue
        budget.used = used
        out.append(parse_number(v, source, f"{where}[{j}]", budget))  # everything else, and every error
        used = budget.used
    budget.used = used
    return out


def parse_rational(text: str) -> Fraction | None:
    """The exact value of a canonical ``"p"`` / ``"p/q"`` string (report fields), any size; ``None`` if malformed.

    ``Fraction(text)`` refuses numerators and denominators beyond 4300 digits
    (Python's ``int(str)`` limit); this does not.  A zero denominator is malformed.

    Examples
    --------
    >>> parse_rational("-6/4"), parse_rational("7"), parse_rational("1/0"), parse_rational("0.5")
    (Fraction(-3, 2), Fraction(7, 1), None, None)
    >>> parse_rational("1" * 5000).numerator % 10**6
    111111
    """
    ratio = _RATIO.fullmatch(text.strip())
    if ratio:
        p, q = int(flint.fmpz(ratio.group(1).lstrip("+"))), int(flint.fmpz(ratio.group(2)))
    elif re.fullmatch(r"[+-]?\d+", text.strip(), re.ASCII):
        p, q = int(flint.fmpz(text.strip().lstrip("+"))), 1
    else:
        return None
    return None if q == 0 else Fraction(p, q)


def format_int(n: int | flint.fmpz) -> str:
    """Decimal text of an integer of any size (``str(int)`` stops at 4300 digits).

    Examples
    --------
    >>> len(format_int(10**5000))
    5001
    """
    return str(flint.fmpz(n))


def approx_text(p: int | flint.fmpz, q: int | flint.fmpz = 1, digits: int = 4) -> str:
    """``p/q`` as a readable float, ``3.797e95`` or ``-0.25``, for any size (never cut in the middle).

    ``digits`` significant digits, rounded from the exact value by integer arithmetic (so numbers far
    beyond the float64 range are shown too); plain notation from 1e-4 to 10^digits.

    Examples
    --------
    >>> approx_text(3797 * 10**92 + 348), approx_text(-1, 4), approx_text(10**5000 + 1, 3)
    ('3.797e95', '-0.25', '3.333e4999')
    >>> approx_text(0), approx_text(2, 3 * 10**400)
    ('0', '6.667e-401')
    """
    p, q = flint.fmpz(p), flint.fmpz(q)
    if q < 0:
        p, q = -p, -q
    if p == 0:
        return "0"
    sign, a = ("-" if p < 0 else ""), abs(p)
    ten = flint.fmpz(10)

    def scaled(k: int) -> tuple[flint.fmpz, flint.fmpz]:  # a/q * 10^k as num/den, integers
        return (a * ten ** k, q) if k >= 0 else (a, q * ten ** (-k))

    E = len(str(a)) - len(str(q))  # 10^(E-1) < a/q < 10^(E+1): find 10^E <= a/q < 10^(E+1) exactly
    num, den = scaled(-E)
    if num < den:
        E -= 1
    shift = digits - 1 - E
    num, den = scaled(shift)
    m = (2 * num + den) // (2 * den)  # rounded once, half up
    if m >= ten ** digits:  # 9.9996e3 -> 10.00e3: the carry is exact, 1.000e4
        m, shift = m // 10, shift - 1
    exponent = digits - 1 - shift
    mantissa = str(m)
    if -4 <= exponent < digits:  # plain notation, trailing zeros dropped
        value = int(mantissa) * Fraction(10) ** (exponent - digits + 1)
        text = f"{float(value):.{max(digits - 1 - exponent, 0)}f}"
        text = text.rstrip("0").rstrip(".") if "." in text else text
        return sign + text
    head = mantissa[0] + ("." + mantissa[1:].rstrip("0") if mantissa[1:].rstrip("0") else "")
    return f"{sign}{head}e{exponent}"


_RATIONAL_TEXT = re.compile(r"(-?)(\d+)(?:/(\d+))?", re.ASCII)


def short_text(text: str, keep: int = 20) -> str:
    """``text`` for a message: an exact number too long to read becomes its float and its digit count.

    A number (``"p"`` or ``"p/q"``) longer than ``3 * keep`` characters is shown as
    ``3.797e95 (96 digits)`` (a fraction: ``... (a 70/30-digit fraction)``), never cut in the
    middle; the whole number stays in ``--json``.  Other long text becomes ``first...last``.

    Examples
    --------
    >>> short_text(str(3797 * 10**92 + 348))
    '3.797e95 (96 digits)'
    >>> short_text("-" + "1" * 70 + "/" + "3" * 30)
    '-3.333e39 (a 70/30-digit fraction)'
    >>> short_text("12/7")
    '12/7'
    """
    if len(text) <= 3 * keep:
        return text
    m = _RATIONAL_TEXT.fullmatch(text.strip())
    if m is not None:
        sign, p, q = m.group(1), flint.fmpz(m.group(2)), flint.fmpz(m.group(3) or 1)
        if q != 0:
            value = approx_text(-p if sign else p, q)
            if m.group(3) is None:
                return f"{value} ({len(m.group(2).lstrip('0') or '0')} digits)"
            return f"{value} (a {len(m.group(2))}/{len(m.group(3))}-digit fraction)"
    digits = sum(c.isdigit() for c in text)
    return f"{text[:keep]}...{text[-keep:]} ({digits} digits)"


def format_fmpq(q: flint.fmpq) -> str:
    """Canonical text of a rational: ``"p/q"`` reduced, ``"p"`` when an integer.

    Examples
    --------
    >>> format_fmpq(flint.fmpq(6, -4)), format_fmpq(flint.fmpq(3))
    ('-3/2', '3')
    """
    q = to_fmpq(q)
    return str(q.p) if q.q == 1 else f"{q.p}/{q.q}"  # fmpz to str: no 4300-digit limit


def parse_box(text: str) -> tuple[flint.fmpq, flint.fmpq]:
    """``"LO:HI"`` -> exact ``(lo, hi)``, ``lo < hi`` (integers, ``p/q`` or decimals; ``flint.fmpq``).

    One syntax for ``--box`` in every command (``design``, ``audit``, ``fdim``): one word, so a
    negative ``LO`` needs no ``=`` (``--box -3:3``) and rationals stay unambiguous
    (``--box -1/2:3/2``).  The old ``--box LO HI`` is refused with a one-line hint.

    Raises
    ------
    argparse.ArgumentTypeError
        Not two exact numbers separated by ``:``, or ``LO >= HI`` (a usage error, exit status 2).

    Examples
    --------
    >>> parse_box("-3:1/2")
    (-3, 1/2)
    >>> parse_box("2:1")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected LO:HI with LO < HI, found '2:1'
    >>> parse_box("-1")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected LO:HI as one word (e.g. --box -1:1), found '-1' (--box LO HI is not accepted)
    """
    parts = text.split(":")
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(f"expected LO:HI as one word (e.g. --box -1:1), found {text!r}"
                                         + (" (--box LO HI is not accepted)" if len(parts) == 1 else ""))
    try:
        lo, hi = (parse_number(p.strip(), "--box", "box") for p in parts)
    except CaseFormatError:
        raise argparse.ArgumentTypeError(f"expected LO:HI with exact numbers (3, -1/2, 0.25), found {text!r}") from None
    if not lo < hi:
        raise argparse.ArgumentTypeError(f"expected LO:HI with LO < HI, found {text!r}")
    return lo, hi


#: The help text of ``--box`` (every command says the same).
BOX_HELP = "every coordinate in [LO, HI]: one word LO:HI, exact numbers (--box -3:3, --box -1/2:3/2)"


def add_box_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """``--box LO:HI`` (:func:`parse_box`), the same in every command; ``what`` says what the box bounds."""
    parser.add_argument("--box", type=parse_box, default=None, metavar="LO:HI", help=f"{what}: {BOX_HELP}")
