"""The rules that turn certified rank bounds into accepted claims and verdicts, for every architecture.

One mechanism for the plain ReLU MLP (:mod:`exactident.verify.claims`, :mod:`exactident.verify.boundary`)
and for layer graphs (:func:`exactident.verify.certificate.verify_constrained`), so that a forgery refused for
one is refused for the other (docs/boundary.md, "What VALID means"):

- **every tie resolution, enumerated by the verifier** (:mod:`exactident.verify.resolutions`): a
  certificate's resolutions are compared with the verifier's own enumeration of the case's resolutions;
- **the smallest rank over the resolutions** (:func:`smallest`): ``rank_gamma`` means ``min_s R_Gamma(s)``,
  bounded by ``[min_s lo_s, min_s hi_s]`` from the certified bounds ``lo_s <= R_Gamma(s) <= hi_s``;
- **an interval is never evidence for C_S** (:func:`rank_claim_problems`,
  :func:`exactident.model.conditions.cs_from_bounds`): ``cs: true``, ``identifiable`` and Theorem 9 need the
  certified *lower* bound to reach ``dim``; an interval whose upper end reaches ``dim`` with its lower end
  below is "rank not settled": ``cs`` must be null, and so must ``rank_gamma`` (its Monte Carlo value is
  labelled in ``montecarlo``); a claimed ``rank_gamma_interval`` must be the certified bounds;
- **no weaker verdict** (:mod:`exactident.verify.verdict`).

Pure functions of numbers the verifier has already certified; nothing here reads the report's certificate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from exactident.model.conditions import cs_from_bounds

__all__ = ["OWN_PRIMES", "RankBounds", "own_ranks_reach", "proves_identifiable", "rank_claim_problems", "smallest"]


@dataclass(frozen=True)
class RankBounds:
    """Certified ``lo <= R_Gamma <= hi`` (``lo == hi``: the exact rank).

    Examples
    --------
    >>> RankBounds(3, 3).exact, RankBounds(2, 5).exact, RankBounds(2, 5).text
    (3, None, '[2, 5]')
    """

    lo: int
    hi: int

    @property
    def exact(self) -> int | None:
        """The rank when the bounds meet, else None."""
        return self.lo if self.lo == self.hi else None

    @property
    def text(self) -> str:
        return str(self.lo) if self.lo == self.hi else f"[{self.lo}, {self.hi}]"


def smallest(bounds: Iterable[RankBounds | None]) -> RankBounds | None:
    """Bounds on ``min_s R_Gamma(s)`` from bounds on each ``R_Gamma(s)``; None if one is unknown or none given.

    ``min_s lo_s <= min_s R(s) <= min_s hi_s`` (each ``R(s) >= lo_s``; the smallest ``R(s)`` is at most any
    ``hi_s``).

    Examples
    --------
    >>> smallest([RankBounds(4, 4), RankBounds(3, 3)]), smallest([RankBounds(8, 9), RankBounds(7, 10)])
    (RankBounds(lo=3, hi=3), RankBounds(lo=7, hi=9))
    >>> smallest([RankBounds(4, 4), None]) is None, smallest([]) is None
    (True, True)
    """
    got = list(bounds)
    if not got or any(b is None for b in got):
        return None
    return RankBounds(min(b.lo for b in got if b is not None), min(b.hi for b in got if b is not None))


def proves_identifiable(bounds: RankBounds | None, dim: int) -> bool:
    """``C_S`` certified: the certified lower bound reaches ``dim`` (never an upper bound)."""
    return bounds is not None and cs_from_bounds(bounds.lo, bounds.hi, dim) is True


def rank_claim_problems(report: Mapping[str, Any], bounds: RankBounds | None, dim: int,
                        what: str = "R_Gamma", reaches: Callable[[int], bool] | None = None) -> list[str]:
    """``rank_gamma``, ``cs``, ``rank_gamma_interval``, ``montecarlo`` of ``report`` against certified ``bounds``.

    ``bounds`` bound the smallest rank over every tie resolution (the one pattern off the boundary), None
    when nothing is certified.  Rules (one for every architecture):

    - nothing certified: the four fields must be null or absent;
    - ``rank_gamma`` (an int) must be the exact rank; with an interval it is null (its Monte Carlo value
      goes in ``montecarlo``); reports written before that rule carry the Monte Carlo value in both, which
      is accepted only labelled so and inside the interval;
    - ``rank_gamma_interval`` ``[lo, hi]``: ``lo < hi``, and exactly the certified bounds (a tighter one is
      not proved; a looser one, or an interval beside a certified exact rank, hides what was proved);
    - ``montecarlo``'s value is a rank mod primes, never above the rank: one above the certified lower end
      is accepted only if ``reaches(value)`` (the verifier's own ranks mod its primes reach it, so
      ``R_Gamma >= value``); else nothing shows the value is not above the rank (a forged Monte Carlo value
      at the interval's upper end would say the rank is settled there);
    - ``cs`` (non-null) must be what the certified bounds settle
      (:func:`exactident.model.conditions.cs_from_bounds`): true only when the lower bound is ``dim``; when
      the rank is not settled, ``cs`` must be null.

    Examples
    --------
    The issue-29 forgery: an interval ``[2, 5]`` (upper end an ``active-blocks`` count) with ``dim = 5``:

    >>> rank_claim_problems({"rank_gamma": None, "cs": True, "rank_gamma_interval": [2, 5]}, RankBounds(2, 5), 5)
    ['cs: report says True, but R_Gamma is certified only in [2, 5] with dim = 5: the rank is not settled, cs \
must be null']
    """
    fails: list[str] = []
    rg, cs = report.get("rank_gamma"), report.get("cs")
    claimed, mc = report.get("rank_gamma_interval"), report.get("montecarlo")
    if bounds is None:
        return [f"{key}: report says {report[key]}, but the certificate certifies no {what} to check it against"
                for key in ("rank_gamma", "cs", "rank_gamma_interval", "montecarlo") if report.get(key) is not None]
    shown = f"{what} {'= ' + bounds.text if bounds.exact is not None else 'in ' + bounds.text}"
    if claimed is not None:
        lo, hi = claimed
        if not lo < hi:
            fails.append(f"rank_gamma_interval: report says {claimed}: an interval needs lower < upper "
                         "(equal bounds are the exact rank_gamma)")
        elif [lo, hi] != [bounds.lo, bounds.hi]:
            fails.append(f"rank_gamma_interval: report says {claimed}, but the certificate proves {shown} "
                         "(the interval reported is the one certified)")
    if mc is not None:
        value = mc.get("rank_gamma") if isinstance(mc, Mapping) else None
        if claimed is None:
            fails.append("montecarlo: a Monte Carlo value is reported only beside a rank_gamma_interval")
        elif not (isinstance(value, int) and claimed[0] <= value <= claimed[1]):
            fails.append(f"montecarlo: its rank_gamma {value!r} is outside the reported interval {claimed}")
        elif value > bounds.lo and not (reaches is not None and reaches(value)):
            fails.append(f"montecarlo: its rank_gamma {value} is above the certified lower end {bounds.lo}, and the "
                         f"verifier's own ranks mod p do not reach it: a rank mod a prime never exceeds {what}, "
                         "so nothing shows the value is not above the rank")
    if rg is not None:
        if claimed is not None:  # an older report: the Monte Carlo value shown as rank_gamma, labelled
            if not (isinstance(mc, Mapping) and mc.get("rank_gamma") == rg):
                fails.append("montecarlo: a rank_gamma beside a certified interval must be its Monte Carlo value, "
                             "labelled by a montecarlo block holding it (null is the certified form)")
        elif bounds.exact is None:
            fails.append(f"rank_gamma: report says {rg}, but the certificate proves only {shown}: it must be null "
                         "with a rank_gamma_interval")
        elif rg != bounds.exact:
            fails.append(f"rank_gamma: report says {rg}, the certificate certifies {bounds.exact}")
    if cs is not None:
        truth = cs_from_bounds(bounds.lo, bounds.hi, dim)
        if truth is None:
            fails.append(f"cs: report says {cs}, but {what} is certified only in {bounds.text} with dim = {dim}: "
                         "the rank is not settled, cs must be null")
        elif cs != truth:
            fails.append(f"cs: report says {cs}, the certified ranks give {truth} ({shown}, dim = {dim})")
    return fails


#: Primes the verifier draws itself to test a Monte Carlo value above a certificate's lower end.
OWN_PRIMES = 3


def own_ranks_reach(shape: tuple[int, int], avoid: int, image: Callable[[int], Any],
                    sketch: Callable[[int, int, int], Any] | None, seed: int) -> Callable[[int], bool]:
    """``reaches(v)``: some rank of ``M`` mod one of the verifier's own primes is ``>= v`` (then ``rank M >= v``).

    A rank mod p never exceeds the rank over Q, so reaching ``v`` proves ``rank M >= v``; failing to reach
    it proves nothing (the value is then refused as unproved, never as false).

    Parameters
    ----------
    shape : (int, int)
        The shape of ``M`` (rows, columns).
    avoid : int
        Primes dividing it are never drawn (a denominator of the data).
    image : callable
        ``image(q)``: ``M mod q`` as an int64 array in ``[0, q)``.
    sketch : callable or None
        ``sketch(q, k, seed)``: ``M S mod q`` for a random ``k``-column ``S`` (``rank_q(M S) <= rank_q(M)``):
        used for a wide ``M`` instead of building it whole.
    seed : int
        The verifier's own seed of the sketch (never taken from a report).

    Returns
    -------
    callable
        ``reaches(v) -> bool``.  The primes are drawn uniformly from the BLAS range with a fixed seed.
    """
    def reaches(v: int) -> bool:
        import random

        from exactident.linalg.blas_modp import BLAS_PRIME_HI, BLAS_PRIME_LO, rank_blas
        from exactident.linalg.montecarlo import uniform_prime

        rng, used = random.Random(1), set[int]()
        k = v + 16
        for _ in range(OWN_PRIMES):
            q = uniform_prime(rng, BLAS_PRIME_LO, BLAS_PRIME_HI, avoid, used)
            used.add(q)
            wide = sketch is not None and shape[1] > k + k // 8
            if rank_blas(sketch(q, k, seed) if wide and sketch is not None else image(q), q) >= v:
                return True
        return False
    return reaches
