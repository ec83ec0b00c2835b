"""Families that are easy exactly and hard in floating point: ``rescaled`` and ``float32-trap``.

``rescaled``: a clean network (full rank ``Gamma`` when one is found within a
few draws: well conditioned) with one hidden neuron rescaled by ``s = 10^k``
or ``10^-k`` (incoming weights and bias times ``s``, outgoing weights divided
by ``s``).  Positive homogeneity of ReLU keeps ``f`` and the activation
pattern, and the exact verdict does not change (paper §2.2), but the float
``Gamma`` gets columns ``s^2`` apart.

``float32-trap``: a first-layer neuron's bias is chosen so that one sample
sits a hair off its kink, on the side opposite to where float32 rounding of
the weights and biases puts it.  Samples are dyadic (exact in float32), so
the crossing comes from the parameters' rounding alone.
"""

from __future__ import annotations

from fractions import Fraction

from exactident.suites.draft import SAMPLE_NUM, Draft, random_draft
from exactident.suites.exact import ZERO, activation_flips_f32, forward, rank_gamma, round_binary
from exactident.suites.families.common import (
    Family,
    Unmet,
    clean,
    hidden_neurons,
    n_above,
    no_hidden_layer,
    search,
)
from exactident.suites.rng import HashRng

__all__ = ["FAMILIES"]

RESCALE_K = (4, 8, 12, 16)
#: Draws searched for a full-rank base before settling for the first clean one.
BASE_ATTEMPTS = 60


def _build_rescaled(rng: HashRng, widths: list[int], index: int, n_samples: int | None) -> Draft:
    hidden = hidden_neurons(widths)
    l, v = hidden[index % len(hidden)]
    k = RESCALE_K[index % len(RESCALE_K)] * (1 if (index // len(RESCALE_K)) % 2 == 0 else -1)
    n = n_samples if n_samples is not None else n_above(widths)
    dim = sum(widths[m] * widths[m + 1] for m in range(len(widths) - 1)) + widths[-1]
    candidates: list[Draft] = []

    def make(r: HashRng) -> Draft | None:
        d = random_draft(r, widths, n)
        if not clean(d):
            return None
        candidates.append(d)
        return d if rank_gamma(d) == dim else None

    try:
        base, full = search(rng, "full-rank clean network", make, attempts=BASE_ATTEMPTS), True
    except Unmet:
        if not candidates:
            raise Unmet(f"no clean network found in {BASE_ATTEMPTS} draws") from None
        base, full = candidates[0], False
    s = Fraction(10) ** k
    d = base.copy()
    d.W[l - 1][v] = [s * w for w in d.W[l - 1][v]]
    d.b[l - 1][v] = s * d.b[l - 1][v]
    for row in d.W[l]:
        row[v] = row[v] / s
    d.params = {"neuron": [l, v], "k": k, "base_full_rank": full}
    d.aux["base"] = base
    d.description = f"hidden neuron ({l},{v}) rescaled by 10^{k} (incoming and bias times, outgoing divided)"
    return d


def _verify_rescaled(d: Draft) -> str | None:
    base: Draft | None = d.aux.get("base")
    if base is None:
        return "no base network to compare with"
    (l, v), s = d.params["neuron"], Fraction(10) ** d.params["k"]
    for x in d.X:
        z, z0 = forward(d.W, d.b, x), forward(base.W, base.b, x)
        if z[-1] != z0[-1]:
            return "the outputs differ from the unscaled network's"
        for m in range(1, d.L):
            want = [s * t if (m, u) == (l, v) else t for u, t in enumerate(z0[m - 1])]
            if z[m - 1] != want:
                return f"layer {m} pre-activations are not those of the unscaled network (neuron scaled by s)"
    return None if clean(d) else "ties or neurons in S"


def _build_f32(rng: HashRng, widths: list[int], index: int, n_samples: int | None) -> Draft:
    v = index % widths[1]
    n = n_samples if n_samples is not None else n_above(widths)

    def make(r: HashRng) -> Draft | None:
        d = random_draft(r, widths, n)
        d.X = [[Fraction(r.randint(-4 * SAMPLE_NUM, 4 * SAMPLE_NUM), r.choice([1, 2, 4, 8])) for _ in x] for x in d.X]
        if not d.X:
            return None
        i = r.below(len(d.X))
        w32 = [round_binary(w) for w in d.W[0][v]]
        exact = sum((w * x for w, x in zip(d.W[0][v], d.X[i])), ZERO)
        rounded = sum((w * x for w, x in zip(w32, d.X[i])), ZERO)
        if exact == rounded:
            return None
        mid = -(exact + rounded) / 2  # the bias putting the kink halfway between the two sums
        for b in (mid, round_binary(mid)):
            d.b[0][v] = b
            flips = activation_flips_f32(d)
            if any(f[0] == i and f[1:] == (1, v) for f in flips) and clean(d):
                z = forward(d.W, d.b, d.X[i])[0][v]
                d.params.update({"sample": i, "neuron": [1, v], "z": str(z)})
                d.description = (f"float32 rounding of the parameters moves sample {i} across the kink of "
                                 f"hidden neuron (1,{v}) (exact z = {z})")
                return d
        return None

    return search(rng, f"float32 trap on neuron (1,{v})", make)


def _verify_f32(d: Draft) -> str | None:
    i, (l, v) = d.params["sample"], d.params["neuron"]
    if any(round_binary(x) != x for row in d.X for x in row):
        return "a sample coordinate is not exact in float32"
    if (i, l, v) not in activation_flips_f32(d):
        return f"float32 rounding does not move sample {i} across the kink of ({l},{v})"
    return None if clean(d) else "ties or neurons in S"


#: The families defined here (collected in ``exactident.suites.families.FAMILIES``).
#:
#: :meta hide-value:
FAMILIES = [
    Family("rescaled", "a well-conditioned clean network with one hidden neuron rescaled by 10^k or 10^-k "
           "(k = 4, 8, 12, 16): same function and exact verdict, hard for floats",
           "outputs equal the unscaled network's and the neuron's pre-activations are s times its; no tie, "
           "no neuron in S", _build_rescaled, _verify_rescaled, no_hidden_layer),
    Family("float32-trap", "a first-layer bias set so that float32 rounding of the weights and biases moves a "
           "sample across that neuron's kink (samples exact in float32)",
           "the activation of the recorded (sample, neuron) differs between the exact parameters and their "
           "float32 roundings (evaluated exactly); no tie, no neuron in S", _build_f32, _verify_f32,
           no_hidden_layer),
]
