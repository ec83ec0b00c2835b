"""The ``gap`` family: ``R_Gamma < R_A`` and ``R_Gamma < dim`` on a clean case (neither theorem decides).

Searched for among clean random networks (sample sizes between ``dim / N_L``
and about twice that), the ranks computed exactly by
:mod:`exactident.suites.exact`.  Two architectures make the gap impossible,
and are refused at once:

- ``L = 1`` (no hidden layer): ``Gamma`` is ``alpha`` repeated for each output,
  so ``R_Gamma = R_A``;
- ``L = 2`` with ``N_L = 1``: every hidden neuron has one outgoing edge, which
  is fixed, and each column of ``Gamma`` is a column of ``alpha`` times that
  (nonzero) weight, so again ``R_Gamma = R_A``.

Elsewhere a failed search says how many draws it tried (not a proof).
"""

from __future__ import annotations

from exactident.suites.draft import Draft, n_at, network_dim, random_draft
from exactident.suites.exact import rank_a, rank_gamma
from exactident.suites.families.common import Family, clean, n_above, search
from exactident.suites.rng import HashRng

__all__ = ["FAMILIES", "gap_impossible"]


def gap_impossible(widths: list[int]) -> str | None:
    """Why ``R_Gamma < R_A`` cannot happen for these widths (None when it can).

    >>> gap_impossible([2, 3, 1])
    'L = 2 and N_L = 1: each column of Gamma is a column of alpha times a nonzero weight, so R_Gamma = R_A'
    >>> gap_impossible([2, 2, 2]) is None
    True
    """
    if len(widths) == 2:
        return "L = 1 (no hidden layer): Gamma is alpha repeated per output, so R_Gamma = R_A"
    if len(widths) == 3 and widths[-1] == 1:
        return "L = 2 and N_L = 1: each column of Gamma is a column of alpha times a nonzero weight, so R_Gamma = R_A"
    return None


def _build_gap(rng: HashRng, widths: list[int], index: int, n_samples: int | None) -> Draft:
    dim = network_dim(widths)
    sizes = list(range(n_at(widths), n_above(widths) + 1))

    def make(r: HashRng) -> Draft | None:
        n = n_samples if n_samples is not None else r.choice(sizes)
        d = random_draft(r, widths, n)
        if not clean(d):
            return None
        rg, ra = rank_gamma(d), rank_a(d)
        if not (rg < ra and rg < dim):
            return None
        d.params.update({"rank_gamma": rg, "rank_a": ra, "dim": dim})
        d.description = f"R_Gamma = {rg} < R_A = {ra} and R_Gamma < dim = {dim}"
        return d

    return search(rng, "clean network with R_Gamma < R_A and R_Gamma < dim", make)


def _verify_gap(d: Draft) -> str | None:
    dim = network_dim(d.widths)
    rg, ra = rank_gamma(d), rank_a(d)
    if not (rg < ra and rg < dim):
        return f"no gap: R_Gamma = {rg}, R_A = {ra}, dim = {dim}"
    return None if clean(d) else "ties or neurons in S"


#: The families defined here (collected in ``exactident.suites.families.FAMILIES``).
#:
#: :meta hide-value:
FAMILIES = [
    Family("gap", "a clean network with R_Gamma < R_A and R_Gamma < dim (searched for; refused where the "
           "architecture makes it impossible)", "R_Gamma < R_A and R_Gamma < dim, ranks computed exactly; no tie, "
           "no neuron in S", _build_gap, _verify_gap, gap_impossible),
]
