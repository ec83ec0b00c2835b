"""Deterministic randomness for generated suites: seeds derived by hashing, draws by SHA-256.

A generated case must be byte-identical whatever the process, the platform or
the numpy version.  numpy's global stream and ``random.Random``'s algorithms
are not promised stable across versions, so every draw here comes from
SHA-256 in counter mode over a key that hashes the request (family, widths,
seed, case index, ...): :class:`HashRng`.  Integers are drawn by rejection
sampling (no modulo bias), rationals are built from integers, so no float
enters a generated case.  Only :meth:`HashRng.gauss` uses floating point (the
survey's Gaussian draws, which are then converted exactly).

Used by :mod:`exactident.suites.families` and :mod:`exactident.suites.survey`.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, TypeVar

__all__ = ["HashRng", "derive_key"]

T = TypeVar("T")


def derive_key(*parts: Any) -> bytes:
    """SHA-256 of the canonical JSON of ``parts`` (the seed of one stream).

    Examples
    --------
    >>> derive_key("x", 1) == hashlib.sha256(b'["x",1]').digest()
    True
    """
    text = json.dumps(list(parts), separators=(",", ":"), sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).digest()


class HashRng:
    """A reproducible stream of integers: SHA-256(key || counter) blocks, consumed in order.

    Parameters
    ----------
    *parts
        Anything JSON-serialisable; the stream is a function of these alone.

    Examples
    --------
    >>> a, b = HashRng("x", 1), HashRng("x", 1)
    >>> [a.below(10) for _ in range(5)] == [b.below(10) for _ in range(5)]
    True
    >>> q = HashRng("x", 1).rational(-3, 3, (1, 2))
    >>> -3 <= q <= 3 and (2 * q).denominator == 1
    True
    """

    def __init__(self, *parts: Any) -> None:
        self._key = derive_key(*parts)
        self._counter = 0
        self._pool = 0
        self._bits = 0

    def child(self, *parts: Any) -> HashRng:
        """An independent stream keyed by this stream's key and ``parts``."""
        return HashRng(self._key.hex(), *parts)

    def _take(self, k: int) -> int:
        while self._bits < k:
            block = hashlib.sha256(self._key + self._counter.to_bytes(8, "big")).digest()
            self._counter += 1
            self._pool = (self._pool << 256) | int.from_bytes(block, "big")
            self._bits += 256
        self._bits -= k
        out = self._pool >> self._bits
        self._pool &= (1 << self._bits) - 1
        return out

    def below(self, n: int) -> int:
        """Uniform integer in ``[0, n)`` (``n >= 1``), by rejection sampling."""
        if n <= 1:
            return 0
        k = (n - 1).bit_length()
        while True:
            r = self._take(k)
            if r < n:
                return r

    def randint(self, lo: int, hi: int) -> int:
        """Uniform integer in ``[lo, hi]``."""
        return lo + self.below(hi - lo + 1)

    def choice(self, seq: Sequence[T]) -> T:
        return seq[self.below(len(seq))]

    def sample_indices(self, n: int, k: int) -> list[int]:
        """``k`` distinct indices of ``range(n)``, in increasing order (partial Fisher-Yates)."""
        pool = list(range(n))
        for i in range(min(k, n)):
            j = i + self.below(n - i)
            pool[i], pool[j] = pool[j], pool[i]
        return sorted(pool[: min(k, n)])

    def rational(self, lo: int, hi: int, dens: Sequence[int], nonzero: bool = False) -> Fraction:
        """``p / q`` with ``p`` uniform in ``[lo, hi]`` and ``q`` from ``dens`` (reduced)."""
        while True:
            value = Fraction(self.randint(lo, hi), self.choice(dens))
            if value or not nonzero:
                return value

    def uniform01(self) -> float:
        """A float in ``(0, 1)``: 53 random bits, centred in their interval."""
        return (self._take(53) + 0.5) / 2.0**53

    def gauss(self) -> float:
        """A standard Gaussian float64 (Box-Muller; uses libm, so not promised bit-stable across platforms)."""
        u, v = self.uniform01(), self.uniform01()
        return math.sqrt(-2.0 * math.log(u)) * math.cos(2.0 * math.pi * v)
