"""Seeded pseudo-random draws for the finders: uniform integers, permutations, normal floats.

Randomness in exactident only *finds* (the coefficients of a sketch, a row sample, a starting
point for a search); an exact check accepts what it finds.  The draws come from Python's
Mersenne Twister (``random.Random(seed)``) read as 64-bit words, not from numpy's ``Generator``:
importing ``numpy.random`` loads ``secrets`` and OpenSSL's ``libcrypto`` through ``hashlib``,
6.5 MB of resident memory that the float pipelines do not load (6 % of ``check``'s peak on a
16-16-16-16-1 net).

Python's generator costs about 60 ns a 64-bit word against numpy's 13 ns a bounded integer, so a draw
of :data:`NUMPY_FROM` values or more (its output alone 2 MB) is handed to numpy's ``Generator``
(PCG64), seeded from the stream: the import is paid only where it is small next to the draw (the
digits nets' sketches draw millions of values; a 16-16-16-16-1 net's draws are all below it).

Integers are exactly uniform (Python's: 64-bit words at or above the largest multiple of the span are
drawn again; numpy's: Lemire's rejection), so a Schwartz-Zippel error bound computed for uniform
entries holds as stated.  The draws depend on the seed and the sizes asked only: the same calls give
the same arrays, below :data:`NUMPY_FROM` on every platform and Python version (words read
little-endian), from it as long as numpy keeps PCG64's stream (numpy does not promise that across
versions).  Nothing in a report depends on them: the verifier draws nothing from the engine's seeds.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from math import prod
from typing import overload

import numpy as np

__all__ = ["NUMPY_FROM", "Draws"]

#: 64-bit words drawn per call of ``randbytes`` (bounds the temporary bytes and Python int).
_WORDS_PER_CALL = 1 << 18

#: Draws of at least this many values come from numpy's ``Generator`` (``numpy.random`` imported then).
NUMPY_FROM = 1 << 18


class Draws:
    """Seeded draws with the part of numpy's ``Generator`` interface the finders use.

    Parameters
    ----------
    seed : int
        Any Python int (``random.Random(seed)``, which reads ``abs(seed)``: ``-s`` and ``s`` draw alike).

    Examples
    --------
    >>> d = Draws(7)
    >>> a = d.integers(-3, 4, (2, 5))
    >>> a.shape, a.dtype.name, bool(((a >= -3) & (a < 4)).all())
    ((2, 5), 'int64', True)
    >>> bool((Draws(7).integers(-3, 4, (2, 5)) == a).all())
    True
    >>> sorted(Draws(1).permutation(5).tolist())
    [0, 1, 2, 3, 4]
    """

    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)

    def words(self, count: int) -> np.ndarray:
        """``count`` uniform 64-bit words, ``uint64`` array of shape ``(count,)``."""
        out = np.empty(count, dtype=np.uint64)
        for s in range(0, count, _WORDS_PER_CALL):
            k = min(_WORDS_PER_CALL, count - s)
            out[s:s + k] = np.frombuffer(self._random.randbytes(8 * k), dtype="<u8")
        return out

    def below(self, span: int, count: int) -> np.ndarray:
        """``count`` integers uniform in ``[0, span)``, ``uint64`` (``1 <= span <= 2**64``)."""
        if not 1 <= span <= 1 << 64:
            raise ValueError(f"span {span} outside [1, 2**64]")
        w = self.words(count)
        if (1 << 64) % span:  # not a power of two: redraw the words of the incomplete top range
            limit = np.uint64((1 << 64) - (1 << 64) % span)
            bad = np.flatnonzero(w >= limit)
            while bad.size:
                w[bad] = self.words(bad.size)
                bad = bad[w[bad] >= limit]
        return w % np.uint64(span) if span < 1 << 64 else w

    @overload
    def integers(self, low: int, high: int | None = None, size: None = None) -> int: ...

    @overload
    def integers(self, low: int, high: int | None, size: int | Sequence[int]) -> np.ndarray: ...

    def integers(self, low: int, high: int | None = None,
                 size: int | Sequence[int] | None = None) -> np.ndarray | int:
        """Uniform integers in ``[low, high)`` (``[0, low)`` when ``high`` is None), int64 array of shape
        ``size`` (an int when ``size`` is None), as numpy's ``Generator.integers``.

        Raises
        ------
        ValueError
            If the range is empty or does not fit in int64.
        """
        if high is None:
            low, high = 0, low
        low, high = int(low), int(high)  # numpy ints would overflow in the 2**64 arithmetic below
        if not (-(1 << 63) <= low < high <= 1 << 63):
            raise ValueError(f"empty or too wide range [{low}, {high})")
        shape = () if size is None else (int(size),) if isinstance(size, (int, np.integer)) else tuple(size)
        if prod(shape) >= NUMPY_FROM:
            return self._numpy().integers(low, high, shape, dtype=np.int64)
        u = self.below(high - low, prod(shape))
        out = (u + np.uint64(low % (1 << 64))).view(np.int64)  # two's complement: low + u, no overflow
        return int(out[0]) if size is None else out.reshape(shape)

    def permutation(self, n: int) -> np.ndarray:
        """A random permutation of ``range(n)``, int64 (the order of ``n`` random 64-bit keys: uniform up to
        ties among the keys, which have probability below ``n**2 / 2**65``)."""
        if n >= NUMPY_FROM:
            return self._numpy().permutation(n).astype(np.int64)
        return np.argsort(self.words(n), kind="stable").astype(np.int64)

    def _numpy(self) -> np.random.Generator:
        """numpy's generator for one large draw, seeded by the next 128 bits of the stream."""
        import numpy.random  # here: it loads secrets and OpenSSL (6.5 MB resident)

        return numpy.random.default_rng(self._random.getrandbits(128))

    @overload
    def normal(self, loc: float = 0.0, scale: float = 1.0, size: None = None) -> float: ...

    @overload
    def normal(self, loc: float, scale: float, size: int) -> np.ndarray: ...

    def normal(self, loc: float = 0.0, scale: float = 1.0, size: int | None = None) -> np.ndarray | float:
        """Normal floats (Box-Muller on two uniform 53-bit fractions), float64 array of ``size`` entries."""
        count = 1 if size is None else int(size)
        u = (self.words(2 * count) >> np.uint64(11)).astype(np.float64) * 2.0**-53
        z = np.sqrt(-2.0 * np.log1p(-u[:count])) * np.cos(2.0 * np.pi * u[count:])
        out = loc + scale * z
        return float(out[0]) if size is None else out
