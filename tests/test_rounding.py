"""Issue 13, item 4: every exact value is rounded once, correctly, to the float format.

Right values never come from :func:`round_rational` itself: they are built bit
by bit (``struct`` / ``numpy.view`` of integer patterns) from the IEEE 754 rule
"nearest, ties to the even significand, overflow to inf at max + ulp/2", or
from Python's ``int / int``, which is correctly rounded to binary64.
"""

from __future__ import annotations

import random
import struct
from fractions import Fraction

import flint
import numpy as np
import pytest

from exactident.errors import UnsupportedCaseError
from exactident.io.case import parse_case
from exactident.model.activation import activation_state
from exactident.model.fixed_edges import fixed_edges
from exactident.numeric.float_network import to_float_network
from exactident.numeric.numpy_backend import float_operators
from exactident.numeric.rounding import FORMATS, float_format, round_rational, round_values


def f32_bits(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def f16_bits(bits: int) -> float:
    return float(np.array([bits], dtype=np.uint16).view(np.float16)[0])


def bf16_bits(bits: int) -> float:
    return f32_bits(bits << 16)  # bfloat16 is the top half of a float32


BITS = {"float32": (f32_bits, 32), "float16": (f16_bits, 16), "bfloat16": (bf16_bits, 16)}


def _frac(x: float) -> Fraction:
    return Fraction(x)


def _rr(q: Fraction, fmt: str) -> float:
    return round_rational(q.numerator, q.denominator, fmt)


# --- the issue's input ------------------------------------------------------------------------

ISSUE = Fraction(1) + Fraction(1, 2**24) + Fraction(1, 2**60)


def test_issue_value_rounds_up_to_the_next_float32():
    one_plus_ulp = f32_bits(0x3F800001)  # 1 + 2^-23, from its bit pattern
    assert Fraction(one_plus_ulp) == 1 + Fraction(1, 2**23)
    assert _rr(ISSUE, "float32") == one_plus_ulp
    # The double rounding it replaces: to float64 first gives the float32 midpoint 1 + 2^-24,
    # which then rounds to even, 1.0.
    assert float(np.float32(float(ISSUE))) == 1.0


def test_issue_value_through_the_float32_pipeline():
    obj = {"format": "exactident-case/1", "name": "twice", "widths": [1, 1, 1],
           "weights": [[[f"{ISSUE.numerator}/{ISSUE.denominator}"]], [["1"]]], "biases": [["0"], ["0"]],
           "sample": [[f"{ISSUE.numerator}/{ISSUE.denominator}"], ["1"]]}
    case = parse_case(obj)
    ops = float_operators(case.network, case.X, fixed_edges(case.network),
                          activation_state(case.network, case.X).pattern, np.float32)
    assert ops.fnet is not None and ops.sample is not None
    assert ops.fnet.W[0].dtype == np.float32 and ops.fnet.W[0][0, 0] == np.float32(f32_bits(0x3F800001))
    assert ops.sample.X[0, 0] == np.float32(f32_bits(0x3F800001))


BF16_CASE = Fraction(1) + Fraction(1, 2**8) + Fraction(1, 2**60)  # the same trap one level down


def test_bfloat16_double_rounding_through_float32():
    # via float32 (the usual tensor.to(bfloat16)): 1 + 2^-8 exactly, a bfloat16 midpoint -> even 1.0
    assert Fraction(float(np.float32(float(BF16_CASE)))) == 1 + Fraction(1, 2**8)
    assert _rr(BF16_CASE, "bfloat16") == bf16_bits(0x3F81) == 1 + 2**-7


def test_issue_values_through_torch():
    torch = pytest.importorskip("torch")
    from exactident.numeric.torch_backend import build_sequential, torch_sample

    for name, value, bits in (("float32", ISSUE, 0x3F800001), ("bfloat16", BF16_CASE, 0x3F81)):
        text = f"{value.numerator}/{value.denominator}"
        case = parse_case({"format": "exactident-case/1", "name": "twice", "widths": [1, 1, 1],
                           "weights": [[[text]], [["1"]]], "biases": [["0"], ["0"]], "sample": [[text]]})
        model = build_sequential(case.network, name)
        want = f32_bits(bits) if name == "float32" else bf16_bits(bits)
        assert float(model[0].weight.detach()[0, 0]) == want
        assert float(torch_sample(case.X, 1, name)[0, 0]) == want
        # what torch's own cast from float32 gives for bfloat16: the double-rounded 1.0
        if name == "bfloat16":
            assert float(torch.tensor(float(value), dtype=torch.float32).to(torch.bfloat16)) == 1.0


# --- bit-level construction of neighbours and midpoints ----------------------------------------


def _finite_patterns(fmt: str, rng: random.Random, count: int):
    """Random finite positive bit patterns of ``fmt`` with a finite successor."""
    to_float, width = BITS[fmt]
    exp_bits = {"float32": 8, "float16": 5, "bfloat16": 8}[fmt]
    mant_bits = width - 1 - exp_bits
    top = ((1 << exp_bits) - 1) << mant_bits  # inf
    out = []
    while len(out) < count:
        bits = rng.randrange(0, top - 1)  # bits + 1 <= largest finite
        out.append(bits)
    return out, to_float


@pytest.mark.parametrize("fmt", ["float32", "float16", "bfloat16"])
def test_generated_midpoints_round_to_nearest_even(fmt):
    rng = random.Random({"float32": 1, "float16": 2, "bfloat16": 3}[fmt])
    patterns, to_float = _finite_patterns(fmt, rng, 400)
    for bits in patterns:
        lo, hi = to_float(bits), to_float(bits + 1)  # consecutive floats of the format
        mid = (_frac(lo) + _frac(hi)) / 2
        tiny = Fraction(1, 2 ** rng.randint(60, 400)) * (mid if mid else 1)
        even = lo if bits % 2 == 0 else hi  # the even significand is the even bit pattern
        for sign in (1, -1):
            assert _rr(sign * (mid - tiny), fmt) == sign * lo
            assert _rr(sign * (mid + tiny), fmt) == sign * hi
            assert _rr(sign * mid, fmt) == sign * even
        assert _rr(_frac(lo), fmt) == lo  # representable values are kept


@pytest.mark.parametrize("fmt", ["float32", "float16", "bfloat16", "float64"])
def test_overflow_threshold_and_subnormals(fmt):
    f = FORMATS[fmt]
    p, emin, emax = f.p, f.emin, f.emax
    ulp_top = Fraction(2) ** (emax - p + 1)
    largest = (2**p - 1) * ulp_top
    assert Fraction(f.max_finite) == largest
    # IEEE 754: overflow to inf iff the value is at least max + ulp/2 (the midpoint rounds to even: up).
    assert _rr(largest + ulp_top / 2, fmt) == float("inf")
    assert _rr(largest + ulp_top / 2 - Fraction(1, 2**2000), fmt) == float(largest)
    assert _rr(-largest - ulp_top, fmt) == float("-inf")
    # Subnormals: spacing 2^(emin-p+1); half of the smallest rounds to even (0), just above to it.
    sub = Fraction(2) ** (emin - p + 1)
    assert _rr(sub / 2, fmt) == 0.0 and _rr(sub / 2 + Fraction(1, 2**3000), fmt) == float(sub)
    assert _rr(3 * sub / 2, fmt) == float(2 * sub)  # tie between 1 and 2 subnormal units: 2 is even
    assert str(_rr(-sub / 4, fmt)) == "-0.0"
    # The largest subnormal and the smallest normal are neighbours.
    assert _rr(Fraction(2) ** emin - sub / 2 + Fraction(1, 2**3000), fmt) == float(Fraction(2) ** emin)


def test_float64_agrees_with_python_division():
    # int / int is correctly rounded in CPython (round-half-even); it raises past the range.
    rng = random.Random(4)
    for _ in range(3000):
        a = rng.randint(-(10 ** rng.randint(1, 40)), 10 ** rng.randint(1, 40))
        b = rng.randint(1, 10 ** rng.randint(1, 40))
        assert round_rational(a, b) == a / b
    with pytest.raises(OverflowError):
        _ = 10**400 / 1
    assert round_rational(10**400, 1) == float("inf")


def test_round_values_reports_what_rounding_did():
    vals = [flint.fmpq(1, 3), flint.fmpq(10**40), flint.fmpq(-1, 10**50), flint.fmpq(5, 4), flint.fmpq(0)]
    r = round_values(vals, "float32")
    assert r.overflow == [1] and r.underflow == [2] and r.inexact == [0, 1, 2]
    assert r.values[3] == 1.25 and str(r.values[2]) == "-0.0"


def test_format_names_and_errors():
    assert float_format(np.float16) is FORMATS["float16"] and float_format("torch.bfloat16").p == 8
    with pytest.raises(UnsupportedCaseError, match="float format 'int8' not supported"):
        float_format("int8")
    with pytest.raises(UnsupportedCaseError, match="denominator 0 is not positive"):
        round_rational(1, 0)
    with pytest.raises(UnsupportedCaseError, match="numpy has no bfloat16 arithmetic"):
        to_float_network(parse_case({"format": "exactident-case/1", "name": "t", "widths": [1, 1],
                                     "weights": [[["1"]]], "biases": [["0"]], "sample": []}).network,
                         "bfloat16")
