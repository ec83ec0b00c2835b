"""Exact rationals to binary floating point, rounded once (IEEE 754 round-to-nearest-even).

Every float backend turns the case's rationals into floats here and only here.
A float format is ``(p, emin, emax)``: ``p`` significand bits (hidden bit
included), normal numbers ``m 2^(e-p+1)`` with ``2^(p-1) <= m < 2^p`` and
``emin <= e <= emax``, subnormals ``m 2^(emin-p+1)`` with ``0 < m < 2^(p-1)``.

Rounding is done once, from the exact rational, in integer arithmetic:
rational -> float64 -> float32 rounds *twice* and can differ from the correct
float32 (``1 + 2^-24 + 2^-60`` rounds to ``1 + 2^-24`` in float64, a float32
midpoint, which then rounds to even, ``1.0``; the correctly rounded float32 is
``1 + 2^-23``).  Overflow goes to ``inf`` as IEEE 754 prescribes: a value whose
rounding with an unbounded exponent exceeds the largest finite number; below
half the smallest subnormal the result is a (signed) zero.

The result is returned as a Python float (binary64), which holds every value
of the four formats exactly (their ``p <= 53`` and exponent ranges fit), so
``numpy.float32(x)`` / ``numpy.float16(x)`` / ``torch.tensor(x, dtype=torch.bfloat16)``
of the result is exact.

Called by :mod:`exactident.numeric.numpy_backend` and :mod:`exactident.numeric.torch_backend`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import flint

from exactident.errors import UnsupportedCaseError

__all__ = ["FORMATS", "FloatFormat", "Rounded", "float_format", "round_fmpq", "round_rational", "round_values"]


@dataclass(frozen=True)
class FloatFormat:
    """A binary IEEE 754 interchange format (or bfloat16, same shape).

    Attributes
    ----------
    name : str
    p : int
        Significand precision in bits, the hidden bit included (float64: 53).
    emin, emax : int
        Exponent range of normal numbers.
    """

    name: str
    p: int
    emin: int
    emax: int

    @property
    def unit_roundoff(self) -> float:
        """``u = 2^-p``: ``|fl(x) - x| <= u |x|`` for ``x`` in the normal range."""
        return math.ldexp(1.0, -self.p)

    @property
    def max_finite(self) -> float:
        """``(2^p - 1) 2^(emax - p + 1)``."""
        return math.ldexp((1 << self.p) - 1, self.emax - self.p + 1)

    @property
    def smallest_subnormal(self) -> float:
        """``2^(emin - p + 1)``: the spacing of the subnormals."""
        return math.ldexp(1.0, self.emin - self.p + 1)

    @property
    def smallest_normal(self) -> float:
        """``2^emin``."""
        return math.ldexp(1.0, self.emin)


#: The IEEE 754 binary formats by name (precision with the hidden bit, ``emin``, ``emax``).
FORMATS: dict[str, FloatFormat] = {
    "float64": FloatFormat("float64", 53, -1022, 1023),
    "float32": FloatFormat("float32", 24, -126, 127),
    "float16": FloatFormat("float16", 11, -14, 15),
    "bfloat16": FloatFormat("bfloat16", 8, -126, 127),
}


def float_format(dtype: Any) -> FloatFormat:
    """The :class:`FloatFormat` of a dtype given as a name, a numpy dtype/type or a torch dtype.

    Raises
    ------
    UnsupportedCaseError
        For anything that is not float64, float32, float16 or bfloat16.

    Examples
    --------
    >>> import numpy as np
    >>> float_format(np.float32).p, float_format("bfloat16").p
    (24, 8)
    >>> float_format("int8")
    Traceback (most recent call last):
    ...
    exactident.errors.UnsupportedCaseError: float format 'int8' not supported (float64, float32, float16, bfloat16)
    """
    if isinstance(dtype, FloatFormat):
        return dtype
    name = str(dtype)
    name = name.removeprefix("torch.")
    if name not in FORMATS:
        try:
            import numpy as np

            name = np.dtype(dtype).name
        except TypeError:
            pass
    if name not in FORMATS:
        raise UnsupportedCaseError(f"float format {str(dtype)!r} not supported "
                                   f"({', '.join(FORMATS)})")
    return FORMATS[name]


def round_rational(num: int, den: int, fmt: FloatFormat | str = "float64") -> float:
    """The float of ``fmt`` nearest to ``num / den`` (ties to even), as an exact Python float.

    Parameters
    ----------
    num, den : int
        The rational ``num / den`` (Z), ``den > 0``; any size.
    fmt : FloatFormat or str

    Returns
    -------
    float
        The correctly rounded value; ``+-inf`` on overflow, ``+-0.0`` on
        underflow to zero (the sign of the rational is kept).

    Raises
    ------
    UnsupportedCaseError
        If ``den <= 0`` or ``fmt`` is unknown.

    Notes
    -----
    With ``e = floor(log2 |q|)`` and the quantum ``2^k``, ``k = max(e, emin) - p + 1``,
    the result is ``m 2^k`` where ``m`` is ``|q| / 2^k`` rounded to the nearest
    integer, ties to even (integer division and a comparison of twice the
    remainder with the divisor).  ``m = 2^p`` (rounding up into the next binade)
    is still exact; the overflow test is applied to ``m 2^k`` afterwards.

    Examples
    --------
    >>> round_rational(2**60 + 2**36 + 1, 2**60, "float32") == 1 + 2**-23
    True
    >>> round_rational(1, 3, "float64") == 1 / 3
    True
    >>> round_rational(10**400, 1), round_rational(-1, 10**400)
    (inf, -0.0)
    """
    return _round(num, den, float_format(fmt))[0]


def _round(num: int, den: int, fmt: FloatFormat) -> tuple[float, bool]:
    """``(round_rational(num, den, fmt), exact)``; ``exact`` when no rounding happened."""
    if den <= 0:
        raise UnsupportedCaseError(f"denominator {den} is not positive")
    if num == 0:
        return 0.0, True
    sign = -1.0 if num < 0 else 1.0
    a = -num if num < 0 else num
    # e = floor(log2(a / den)): a guess from bit lengths, off by at most one.
    e = a.bit_length() - den.bit_length()
    if (a << -e if e < 0 else a) < (den << e if e > 0 else den):
        e -= 1
    if e > fmt.emax:
        return sign * math.inf, False
    k = max(e, fmt.emin) - fmt.p + 1
    top, bottom = (a, den << k) if k >= 0 else (a << -k, den)
    m, r = divmod(top, bottom)
    if 2 * r > bottom or (2 * r == bottom and m & 1):
        m += 1
    if m == 0:
        return sign * 0.0, False
    # m <= 2^p, so m 2^k has at most p significant bits or is a power of two: it is
    # a float64 and ldexp is exact.  It exceeds the largest finite value only as
    # m = 2^p at the top binade (the rounding carried into exponent emax + 1).
    if m.bit_length() + k - 1 > fmt.emax:
        return sign * math.inf, False
    return sign * math.ldexp(m, k), r == 0


def round_fmpq(q: flint.fmpq | int, fmt: FloatFormat | str = "float64") -> float:
    """:func:`round_rational` of an ``fmpq`` (or an int)."""
    if isinstance(q, int):
        return round_rational(q, 1, fmt)
    return round_rational(int(q.p), int(q.q), fmt)


@dataclass
class Rounded:
    """Values rounded once to a format, with what rounding did to them.

    Attributes
    ----------
    values : list of float
        ``round_fmpq(q, fmt)`` per input value.
    overflow : list of int
        Indices rounded to ``+-inf``.
    underflow : list of int
        Indices of nonzero values rounded to zero.
    inexact : list of int
        Indices where the float differs from the rational (overflow and underflow included).
    """

    values: list[float]
    overflow: list[int]
    underflow: list[int]
    inexact: list[int]


def round_values(values: Iterable[flint.fmpq | int], fmt: FloatFormat | str = "float64") -> Rounded:
    """Round every value once (:func:`round_rational`) and record overflow, underflow and inexactness.

    Examples
    --------
    >>> import flint
    >>> r = round_values([flint.fmpq(1, 3), flint.fmpq(10**40), flint.fmpq(1, 10**50), flint.fmpq(1, 2)], "float32")
    >>> r.overflow, r.underflow, r.inexact
    ([1], [2], [0, 1, 2])
    """
    fmt = float_format(fmt)
    out = Rounded([], [], [], [])
    small = 1 << fmt.p
    for k, q in enumerate(values):
        num, den = (q, 1) if isinstance(q, int) else (int(q.p), int(q.q))
        if den == 1 and -small <= num <= small:
            v, exact = float(num), True  # integers up to 2^p are exact in the format
        else:
            v, exact = _round(num, den, fmt)
        if math.isinf(v):
            out.overflow.append(k)
        elif v == 0 and num != 0:
            out.underflow.append(k)
        if not exact:
            out.inexact.append(k)
        out.values.append(v)
    return out
