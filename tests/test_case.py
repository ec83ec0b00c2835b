"""``exactident.io.case``: reading, validating and writing ``exactident-case/1`` (SPEC §3).

Every validator ``raise`` in case.py has a test here that checks the message
*and* the field path; file-level errors are tested through real files.
"""

from __future__ import annotations

import copy
import json
import os
from decimal import Decimal

import flint
import pytest

from exactident.errors import CaseFormatError
from exactident.io.atomic import atomic_write_text
from exactident.io.case import CASE_FORMAT, dump_case, load_case, parse_case, read_json, write_case

BASE = {
    "format": "exactident-case/1",
    "name": "t",
    "description": "d",
    "widths": [3, 2, 1],
    "weights": [[["1", "2", "3"], ["4", "5", "6"]], [["7", "8"]]],
    "biases": [["1", "2"], ["3"]],
    "sample": [["1", "2", "3"], ["0", "0", "1/2"]],
    "expected": {"verdict": "identifiable"},
}


def mutate(path, value=None, delete=False):
    obj = copy.deepcopy(BASE)
    target = obj
    for key in path[:-1]:
        target = target[key]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return obj


def test_base_case_is_valid_and_exact():
    case = parse_case(BASE, "a.json")
    assert case.widths == (3, 2, 1) and case.n_samples == 2 and case.name == "t"
    assert case.network.W[1][0, 1] == 8 and case.network.b[0][1] == 2
    assert case.X[1][2] == flint.fmpq(1, 2)
    assert case.expected == {"verdict": "identifiable"} and case.description == "d"


# (mutation, field, message regex)
INVALID = [
    (mutate(["weights", 1, 0, 1], True), "weights[1][0][1]", r"expected a number, found true"),
    (mutate(["weights", 0, 1, 2], "1/0"), "weights[0][1][2]", r"zero denominator"),
    (mutate(["weights", 0, 1, 2], "two"), "weights[0][1][2]", r"expected a number like"),
    (mutate(["biases", 1, 0], None), "biases[1][0]", r"expected a number, found null"),
    (mutate(["sample", 1, 0], False), "sample[1][0]", r"found false"),
    (mutate(["sample", 0, 2], Decimal("1e5000")), "sample[0][2]", r"exponent beyond"),
    (mutate(["sample", 0, 2], Decimal("NaN")), "sample[0][2]", r"expected a finite number"),
    # shapes
    (mutate(["weights"], [[["1", "2", "3"], ["4", "5", "6"]]]), "weights", r"expected 2 entries, found 1"),
    (mutate(["weights"], "W"), "weights", r"expected a list of 2 matrices, found string 'W'"),
    (mutate(["weights", 0], [["1", "2", "3"]]), "weights[0]", r"expected 2 entries, found 1"),
    (mutate(["weights", 0], {"a": 1}), "weights[0]", r"expected a list of 2 rows, found an object"),
    (mutate(["weights", 1, 0], ["7"]), "weights[1][0]", r"expected 2 entries, found 1"),
    (mutate(["weights", 1, 0], "7"), "weights[1][0]", r"expected a list of 2 numbers, found string '7'"),
    (mutate(["weights", 0, 1], ["4", "5", "6", "7"]), "weights[0][1]", r"expected 3 entries, found 4"),
    (mutate(["biases"], [["1", "2"]]), "biases", r"expected 2 entries, found 1"),
    (mutate(["biases"], 3), "biases", r"expected a list of 2 vectors, found number 3"),
    (mutate(["biases", 0], ["1"]), "biases[0]", r"expected 2 entries, found 1"),
    (mutate(["biases", 1], "3"), "biases[1]", r"expected a list of 1 numbers, found string '3'"),
    (mutate(["sample"], {"x": 1}), "sample", r"expected a list, found an object"),
    (mutate(["sample", 1], ["0", "0"]), "sample[1]", r"expected 3 entries, found 2"),
    (mutate(["sample", 0], None), "sample[0]", r"expected a list of 3 numbers, found null"),
    # missing / unknown fields, format, name, description, expected
    (mutate(["weights"], delete=True), "weights", r"missing required field"),
    (mutate(["format"], delete=True), "format", r"missing required field"),
    (mutate(["name"], delete=True), "name", r"missing required field"),
    (mutate(["widths"], delete=True), "widths", r"missing required field"),
    (mutate(["biases"], delete=True), "biases", r"missing required field"),
    (mutate(["sample"], delete=True), "sample", r"missing required field"),
    (mutate(["weigths"], []), "weigths", r"unknown field \(allowed: format, name"),
    (mutate(["format"], "exactident-case/3"), "format",
     r"expected 'exactident-case/1' or 'exactident-case/2', found 'exactident-case/3'"),
    (mutate(["format"], 1), "format", r"expected 'exactident-case/1' or 'exactident-case/2', found 1"),
    (mutate(["name"], ""), "name", r"expected a non-empty string, found string ''"),
    (mutate(["name"], 5), "name", r"expected a non-empty string, found number 5"),
    (mutate(["description"], ["x"]), "description", r"expected a string, found a list of 1"),
    (mutate(["expected"], "identifiable"), "expected", r"expected an object, found string"),
    # widths
    (mutate(["widths"], [3]), "widths", r"expected at least 2 widths \(N_0, ..., N_L\), found 1"),
    (mutate(["widths"], []), "widths", r"found 0"),
    (mutate(["widths"], "3,2,1"), "widths", r"expected a list, found string"),
    (mutate(["widths", 1], 0), "widths[1]", r"expected a positive integer, found number 0"),
    (mutate(["widths", 1], -2), "widths[1]", r"expected a positive integer, found number -2"),
    (mutate(["widths", 2], True), "widths[2]", r"expected a positive integer, found true"),
    (mutate(["widths", 0], Decimal("3.0")), "widths[0]", r"expected a positive integer, found number 3.0"),
    (mutate(["widths", 0], "3"), "widths[0]", r"expected a positive integer, found string '3'"),
]


@pytest.mark.parametrize("obj,field,match", INVALID, ids=[f"{f}:{m[:25]}" for _, f, m in INVALID])
def test_every_validation_error_names_the_field(obj, field, match):
    with pytest.raises(CaseFormatError, match=match) as info:
        parse_case(obj, "bad.json")
    assert info.value.source == "bad.json" and info.value.field == field
    assert str(info.value).startswith(f"bad.json: {field}: ") and "\n" not in str(info.value)


@pytest.mark.parametrize("obj,match", [
    ([BASE], r"expected a JSON object, found a list of 1"),
    ("case", r"expected a JSON object, found string 'case'"),
    (None, r"expected a JSON object, found null"),
])
def test_top_level_must_be_an_object(obj, match):
    with pytest.raises(CaseFormatError, match=match) as info:
        parse_case(obj, "bad.json")
    assert info.value.field == "" and str(info.value).startswith("bad.json: expected")


# --------------------------------------------------------------------------- files

def write(tmp_path, name, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return p


@pytest.mark.parametrize("data,match", [
    (b"\xff\xfe{ not utf8", r"file is not UTF-8 text"),
    (b'{"format": ', r"not valid JSON \(line 1, column 12: Expecting value\)"),
    (b"", r"not valid JSON \(line 1, column 1"),
    (b'{"name": "t", "name": "u"}', r"not valid JSON for exactident \(duplicate key 'name' in one object\)"),
    (b"[" * 100_000 + b"]" * 100_000, r"not valid JSON \(nested too deeply\)"),
])
def test_bad_files(tmp_path, data, match):
    p = write(tmp_path, "bad.json", data)
    with pytest.raises(CaseFormatError, match=match) as info:
        load_case(p)
    assert info.value.source == str(p) and info.value.field == ""
    assert str(info.value).startswith(f"{p}: ") and "\n" not in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(CaseFormatError, match=r"cannot read file \(No such file or directory\)"):
        read_json(tmp_path / "nope.json")


def test_directory_is_not_a_file(tmp_path):
    with pytest.raises(CaseFormatError, match=r"cannot read file"):
        read_json(tmp_path)


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_tokens_name_their_field(tmp_path, token):
    # SPEC §3: NaN and infinities are errors that name the field.
    text = json.dumps(BASE).replace('"5"', token)
    message = rf"c\.json: weights\[0\]\[1\]\[1\]: expected a finite number, found {token}"
    with pytest.raises(CaseFormatError, match=message):
        load_case(write(tmp_path, "c.json", text.encode()))


def test_long_json_integers_are_exact_up_to_the_digit_limit(tmp_path):
    # Python's int() refuses > 4300 digits; a 3999-digit integer must survive exactly,
    # a 5000-digit one is refused with the field named (not Python's message).
    big = "7" * 3999
    text = json.dumps(BASE).replace('"5"', big)
    case = load_case(write(tmp_path, "c.json", text.encode()))
    assert case.network.W[0][1, 1] == int(big)
    text = json.dumps(BASE).replace('"5"', "7" * 5000)
    with pytest.raises(CaseFormatError, match=r"weights\[0\]\[1\]\[1\]: more than 4000 digits"):
        load_case(write(tmp_path, "d.json", text.encode()))


def test_utf8_bom_is_accepted(tmp_path):
    p = write(tmp_path, "c.json", b"\xef\xbb\xbf" + json.dumps(BASE).encode())
    assert load_case(p).name == BASE["name"]


def test_field_path_from_a_file(tmp_path):
    obj = mutate(["weights", 1, 0, 1], True)
    p = write(tmp_path, "c.json", json.dumps(obj).encode())
    with pytest.raises(CaseFormatError, match=r"c\.json: weights\[1\]\[0\]\[1\]: expected a number, found true"):
        load_case(p)


def test_json_decimals_are_exact_in_files(tmp_path):
    """``0.1`` is 1/10, ``1e-400`` is not 0, long integers/decimals survive (SPEC §3)."""
    big = "123456789012345678901234567890123456789"
    text = json.dumps(BASE)
    text = text.replace('["1", "2", "3"], ["0", "0", "1/2"]',
                        f'[0.1, 1e-400, {big}], [0.1234567890123456789012345678901, -0.0, 2.5E3]')
    case = load_case(write(tmp_path, "c.json", text.encode()))
    assert case.X[0] == [flint.fmpq(1, 10), flint.fmpq(1, 10**400), flint.fmpq(int(big))]
    assert case.X[1] == [flint.fmpq(1234567890123456789012345678901, 10**31), 0, 2500]


def test_expected_decimals_stay_exact_strings():
    case = parse_case(mutate(["expected"], {"numeric": {"tol": Decimal("1e-400")}, "k": [Decimal("0.1")]}))
    assert case.expected == {"numeric": {"tol": "1E-400"}, "k": ["0.1"]}


# --------------------------------------------------------------------------- writing

def test_dump_is_canonical_and_round_trips(tmp_path):
    obj = copy.deepcopy(BASE)
    obj["weights"][0][0] = [Decimal("0.50"), "6/4", 3]
    case = parse_case(obj)
    text = dump_case(case)
    data = json.loads(text)
    assert data["format"] == CASE_FORMAT
    assert data["weights"][0][0] == ["1/2", "3/2", "3"]
    assert data["sample"][1] == ["0", "0", "1/2"]
    assert parse_case(json.loads(text, parse_float=Decimal)) == case
    write_case(case, tmp_path / "c.json")
    assert (tmp_path / "c.json").read_text(encoding="utf-8") == text
    assert load_case(tmp_path / "c.json") == case


def test_dump_omits_empty_optional_fields():
    obj = copy.deepcopy(BASE)
    del obj["description"], obj["expected"]
    data = json.loads(dump_case(parse_case(obj)))
    assert "description" not in data and "expected" not in data
    assert list(data) == ["format", "name", "widths", "weights", "biases", "sample"]


def test_atomic_write_leaves_the_old_file_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "c.json"
    target.write_text("GOOD", encoding="utf-8")

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_text(target, "NEW")
    assert target.read_text(encoding="utf-8") == "GOOD"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.json"]  # no temp file left


def test_atomic_write_replaces(tmp_path):
    atomic_write_text(tmp_path / "x.txt", "one")
    atomic_write_text(tmp_path / "x.txt", "two ünïcode")
    assert (tmp_path / "x.txt").read_text(encoding="utf-8") == "two ünïcode"
    assert [p.name for p in tmp_path.iterdir()] == ["x.txt"]


@pytest.mark.parametrize("field, token", [("name", "NaN"), ("description", "Infinity"), ("name", "-Infinity")])
def test_bare_nan_is_not_a_string(tmp_path, field, token):
    # A bare NaN token is a number-like JSON constant, not the text "NaN": where a string is
    # expected it is refused like any other non-string.
    text = json.dumps(BASE).replace(f'"{field}": "{BASE[field]}"', f'"{field}": {token}')
    with pytest.raises(CaseFormatError, match=rf"c\.json: {field}: expected a (non-empty )?string, found {token}"):
        load_case(write(tmp_path, "c.json", text.encode()))
