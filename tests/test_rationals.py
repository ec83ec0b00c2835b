"""``exactident.io.rationals``: exact parsing of case-file numbers, canonical printing, ``to_fmpq``.

Every ``raise`` of ``parse_number`` has a ``pytest.raises(..., match=...)`` test
below that also checks the field path; the right values come from the
decimal/fraction each string spells (written by hand).
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from fractions import Fraction

import flint
import numpy as np
import pytest

from exactident.errors import CaseFormatError
from exactident.io.rationals import MAX_DIGITS, MAX_EXPONENT, format_fmpq, parse_number, to_fmpq

F = "weights[1][0][2]"


def parse(value):
    return parse_number(value, "a.json", F)


# --------------------------------------------------------------------------- exact values

@pytest.mark.parametrize("value,expected", [
    (0, flint.fmpq(0)),
    (-7, flint.fmpq(-7)),
    (Decimal("0.1"), flint.fmpq(1, 10)),             # JSON 0.1 is 1/10, not the nearest binary64
    (Decimal("1e-400"), flint.fmpq(1, 10**400)),     # would underflow to 0.0 as a float
    (Decimal("-2.50"), flint.fmpq(-5, 2)),
    (Decimal("1.25E+3"), flint.fmpq(1250)),
    ("-6/4", flint.fmpq(-3, 2)),
    ("+3/9", flint.fmpq(1, 3)),
    ("0/5", flint.fmpq(0)),
    ("  -7 ", flint.fmpq(-7)),
    ("1.25e-3", flint.fmpq(1, 800)),
    ("-.5", flint.fmpq(-1, 2)),
    ("5.", flint.fmpq(5)),
    ("1E2", flint.fmpq(100)),
    ("1e-400", flint.fmpq(1, 10**400)),
    (f"1e{MAX_EXPONENT}", flint.fmpq(10**MAX_EXPONENT)),
])
def test_exact_values(value, expected):
    assert parse(value) == expected


def test_long_integers_and_decimals_survive():
    big = 12345678901234567890123456789012345678901234567890123456789
    assert parse(big) == flint.fmpq(big)
    assert parse(str(-big)) == flint.fmpq(-big)
    digits = "0.1234567890123456789012345678901234567890123456789"
    assert parse(Decimal(digits)) == flint.fmpq(1234567890123456789012345678901234567890123456789, 10**49)
    assert parse(digits) == parse(Decimal(digits))
    assert parse(f"{big}/{big * 3 + 1}") == flint.fmpq(big, big * 3 + 1)


def test_fraction_of_a_float_is_not_one_tenth():
    """PITFALLS: ``Fraction(0.1)`` is the binary value; the exact path reads ``0.1`` as 1/10."""
    assert to_fmpq(Fraction(0.1)) == flint.fmpq(3602879701896397, 36028797018963968)
    assert parse(Decimal("0.1")) != to_fmpq(Fraction(0.1))
    with pytest.raises(TypeError, match=r"inexact or boolean value 0\.1 on the exact path"):
        to_fmpq(0.1)


# --------------------------------------------------------------------------- to_fmpq

def test_to_fmpq_accepts_exact_types():
    assert to_fmpq(Fraction(-6, 4)) == flint.fmpq(-3, 2)
    assert to_fmpq(5) == flint.fmpq(5)
    assert to_fmpq(flint.fmpz(7)) == flint.fmpq(7)
    q = flint.fmpq(2, 3)
    assert to_fmpq(q) is q


@pytest.mark.parametrize("value,match", [
    (True, "inexact or boolean value True"),
    (0.5, "inexact or boolean value 0.5"),
    (np.float64(0.5), "inexact or boolean value"),       # np.float64 is a float subclass
    (np.int64(3), "cannot convert int64 to fmpq"),       # numpy ints are rejected, clearly
    ("1/2", "cannot convert str to fmpq"),
    (Decimal("0.5"), "cannot convert Decimal to fmpq"),
])
def test_to_fmpq_rejects_inexact_and_foreign_types(value, match):
    with pytest.raises(TypeError, match=match):
        to_fmpq(value)


# --------------------------------------------------------------------------- every raise of parse_number

@pytest.mark.parametrize("value,match", [
    (True, r"expected a number, found true"),
    (False, r"expected a number, found false"),
    (Decimal("NaN"), r"expected a finite number, found NaN"),
    (Decimal("Infinity"), r"expected a finite number, found Infinity"),
    (Decimal("-Infinity"), r"expected a finite number, found -Infinity"),
    (Decimal(f"1e{MAX_EXPONENT + 1}"), rf"exponent beyond ±{MAX_EXPONENT} in 1E\+{MAX_EXPONENT + 1}"),
    (Decimal(f"1e-{MAX_EXPONENT + 1}"), rf"exponent beyond ±{MAX_EXPONENT}"),
    ("1/0", r"zero denominator in '1/0'"),
    ("-3/00", r"zero denominator in '-3/00'"),
    (f"1e{MAX_EXPONENT + 1}", rf"exponent beyond ±{MAX_EXPONENT} in '1e{MAX_EXPONENT + 1}'"),
    ("1e99999999999999999999", rf"exponent beyond ±{MAX_EXPONENT}"),
    ("1" * 5000 + "/3", rf"more than {MAX_DIGITS} digits in"),
    ("1" * 5000, rf"more than {MAX_DIGITS} digits in"),
    ("", r"expected a number like 3, -7/2 or 1.25e-3, found ''"),
    ("abc", r"found 'abc'"),
    ("NaN", r"found 'NaN'"),
    ("Infinity", r"found 'Infinity'"),
    ("inf", r"found 'inf'"),
    ("1/-2", r"found '1/-2'"),
    ("1/2/3", r"found '1/2/3'"),
    ("3 / 4", r"found '3 / 4'"),
    ("1.5/2", r"found '1.5/2'"),
    ("0x10", r"found '0x10'"),
    ("1_000", r"found '1_000'"),
    ("٣/٤", r"found '٣/٤'"),          # non-ASCII digits
    ("３", r"found '３'"),              # fullwidth digit
    (0.1, r"float 0.1 is not exact; parse JSON with Decimal"),
    (np.float64(0.25), r"float (np\.float64\()?0\.25\)? is not exact"),
    (None, r"expected a number, found null"),
    ([1], r"expected a number, found a list of 1"),
    ({"p": 1}, r"expected a number, found an object"),
    (np.int64(3), r"expected a number, found int64 (np\.int64\()?3"),
])
def test_parse_number_errors_name_file_and_field(value, match):
    with pytest.raises(CaseFormatError, match=match) as info:
        parse(value)
    err = info.value
    assert (err.source, err.field) == ("a.json", F)
    assert str(err).startswith(f"a.json: {F}: ")
    assert "\n" not in str(err)


# --------------------------------------------------------------------------- printing

@pytest.mark.parametrize("q,text", [
    (flint.fmpq(6, -4), "-3/2"),
    (flint.fmpq(3), "3"),
    (flint.fmpq(0), "0"),
    (flint.fmpq(-1, 10**30), "-1/" + "1" + "0" * 30),
    (flint.fmpz(5), "5"),
])
def test_format_fmpq_is_canonical(q, text):
    assert format_fmpq(q) == text
    assert parse(text) == to_fmpq(q)


# --------------------------------------------------------------------------- parse_row: parse_number, faster

_ROW_ENTRIES = ["3/4", "-6/4", "+3/9", "0/5", "-0/7", "7", "-7", "+7", "007", "0", "-0", "1/0", "-1/00", "1/",
                "/3", "/", "", "+", "-", "+-5", "--5", "5/-3", "5/+3", "1//2", "1/2/3", " 1/2", "1/2 ", " 7",
                "\u0663/4", "\uff13", "\u00b2", "1_000", "1_0/3", "1.5", "1e3", "NaN", "12345678901234567",
                "123456789012345678", "1234567890123456789", "-123456789012345678", "0" * 30 + "1",
                "3605131911341389/4503599627370496", "9" * 40 + "/" + "7" * 40, "9" * 41 + "/3", "1/" + "3" * 90,
                0, -12, 10**30, True, None, 1.5, Decimal("0.25"), Decimal("-1e-3"), [1], {"a": 1}]


def _one_by_one(values, where, budget):
    out = []
    for j, v in enumerate(values):
        out.append(parse_number(v, "a.json", f"{where}[{j}]", budget))
    return out


@pytest.mark.parametrize("per_number, max_digits", [(4000, 10**6), (5, 10**6), (40, 60), (4000, 3)])
@pytest.mark.parametrize("entry", _ROW_ENTRIES, ids=repr)
def test_parse_row_is_parse_number_entry_by_entry(entry, per_number, max_digits):
    # The truth: parse_number on each entry with the same budget (the reference, tested above by hand):
    # the same values, the same digits charged, the same error naming the same field.
    from exactident.io.limits import DEFAULT_LIMITS, DigitBudget
    from exactident.io.rationals import parse_row

    limits = dataclasses.replace(DEFAULT_LIMITS, max_number_digits=per_number, max_digits=max_digits)
    row = ["1/2", entry, "-3"]
    results = []
    for parse in (lambda b: parse_row(row, "a.json", "sample[4]", b), lambda b: _one_by_one(row, "sample[4]", b)):
        budget = DigitBudget(limits, "a.json")
        try:
            results.append(("ok", parse(budget), budget.used))
        except CaseFormatError as exc:
            results.append(("error", str(exc), budget.used))
    assert results[0] == results[1]


def test_parse_row_values_by_hand():
    from exactident.io.limits import DEFAULT_LIMITS, DigitBudget
    from exactident.io.rationals import parse_row

    budget = DigitBudget(DEFAULT_LIMITS, "a.json")
    got = parse_row(["-6/4", "+3/9", "007", "3605131911341389/4503599627370496"], "a.json", "b[0]", budget)
    assert [Fraction(int(q.p), int(q.q)) for q in got] == [Fraction(-3, 2), Fraction(1, 3), Fraction(7),
                                                           Fraction(3605131911341389, 2**52)]
    assert budget.used == (1 + 1) + (1 + 1) + 3 + (16 + 16)  # digits as written: sign not counted, zeros counted
