"""Families with a sample on, or near, a kink: ``boundary`` and ``near-kink``.

``boundary`` puts one sample exactly on a hidden neuron's zero set.  The point
is solved exactly on the affine piece of an existing sample (one coordinate
moved, :func:`~exactident.suites.families.common.solve_on_kink`), so deeper
layers are reached as easily as the first.  Variants cycle with the case
index: ``layer-1`` (a first-layer neuron), ``deep`` (a neuron of layer ``l >= 2``,
when the network has one) and ``fn-preserving``: the tie sits on (or right
after) a pair of *twin* neurons with proportional incoming weights and bias
(factor ``c > 0``), so moving the twins' outgoing weights along
``(c delta, -delta)`` changes neither ``f`` (on any input) nor the tied
pre-activation.  ``near-kink`` moves such a point by ``10^-k`` along one
coordinate: within ``10^-k`` of the kink, not on it.
"""

from __future__ import annotations

from fractions import Fraction

from exactident.suites.draft import Draft, random_draft
from exactident.suites.exact import degenerate_neurons, forward, hidden_ties
from exactident.suites.families.common import (
    Family,
    clean,
    hidden_neurons,
    n_above,
    no_hidden_layer,
    search,
    solve_on_kink,
)
from exactident.suites.rng import HashRng

__all__ = ["FAMILIES", "NEAR_K", "boundary_variants"]

#: ``near-kink`` distances ``10^-k`` (case index mod 6): the last two are below float64's resolution near 1.
NEAR_K = (3, 6, 9, 12, 15, 18)


def boundary_variants(widths: list[int]) -> list[str]:
    """The ``boundary`` variants the architecture allows, in the order the case index cycles through."""
    out = ["layer-1"]
    if len(widths) >= 4:
        out.append("deep")
    if widths[1] >= 2:
        out.append("fn-preserving")
    return out


def _make_twins(r: HashRng, d: Draft, l: int) -> tuple[int, int, Fraction]:
    u, w = r.sample_indices(d.widths[l], 2)
    c = r.choice([Fraction(1, 2), Fraction(2), Fraction(3, 2), Fraction(1, 3)])
    d.W[l - 1][w] = [c * x for x in d.W[l - 1][u]]
    d.b[l - 1][w] = c * d.b[l - 1][u]
    return u, w, c


def _build_boundary(rng: HashRng, widths: list[int], index: int, n_samples: int | None) -> Draft:
    variants = boundary_variants(widths)
    variant = variants[index % len(variants)]
    n = n_samples if n_samples is not None else n_above(widths)
    deep_layers = list(range(2, len(widths) - 1))

    def make(r: HashRng) -> Draft | None:
        d = random_draft(r, widths, n)
        twins = None
        if variant == "fn-preserving":
            twins = _make_twins(r, d, 1)
        if not clean(d) or not d.X:
            return None
        i = r.below(len(d.X))
        if variant == "layer-1" or (variant == "fn-preserving" and len(widths) == 3):
            l = 1
            v = twins[0] if twins else r.below(widths[1])
        else:
            l = deep_layers[(index // len(variants)) % len(deep_layers)] if variant == "deep" else 2
            v = r.below(widths[l])
        x = solve_on_kink(r, d, i, l, v)
        if x is None:
            return None
        d.X[i] = x
        ties = hidden_ties(d)
        allowed = {(i, l, v)} | ({(i, 1, twins[1])} if twins and l == 1 else set())
        if not ties or set(ties) - allowed or degenerate_neurons(d):
            return None
        if twins and l == 2 and not all(forward(d.W, d.b, x)[0][t] > 0 for t in twins[:2]):
            return None  # the twins must feed the tie
        d.params.update({"variant": variant, "tie": {"sample": i, "layer": l, "neuron": v}})
        d.description = f"sample {i} exactly on the zero set of hidden neuron ({l},{v})"
        if twins:
            u, w, c = twins
            d.params["twins"] = {"layer": 1, "neurons": [u, w], "factor": f"{c.numerator}/{c.denominator}"}
            d.description += f"; twins (1,{u}), (1,{w}) (factor {c}) make a function-preserving direction"
        return d

    return search(rng, f"{variant} tie", make)


def _verify_boundary(d: Draft) -> str | None:
    tie = d.params["tie"]
    i, l, v = tie["sample"], tie["layer"], tie["neuron"]
    if forward(d.W, d.b, d.X[i])[l - 1][v] != 0:
        return f"sample {i} is not on the zero set of ({l},{v})"
    if degenerate_neurons(d):
        return "neurons in S"
    if d.params["variant"] == "deep" and l < 2:
        return "the tie is not in a deeper layer"
    twins = d.params.get("twins")
    if twins:
        u, w = twins["neurons"]
        c = Fraction(twins["factor"])
        if not (c > 0 and d.W[0][w] == [c * x for x in d.W[0][u]] and d.b[0][w] == c * d.b[0][u]):
            return "the twins' parameters are not proportional"
        z1 = forward(d.W, d.b, d.X[i])[0]
        if l == 2 and not (z1[u] > 0 and z1[w] > 0):
            return "the twins are not active at the tie"
        if l == 1 and v not in (u, w):
            return "the tie is not on a twin"
    return None


def _build_near_kink(rng: HashRng, widths: list[int], index: int, n_samples: int | None) -> Draft:
    hidden = hidden_neurons(widths)
    l, v = hidden[index % len(hidden)]
    k = NEAR_K[index % len(NEAR_K)]
    n = n_samples if n_samples is not None else n_above(widths)

    def make(r: HashRng) -> Draft | None:
        d = random_draft(r, widths, n)
        if not clean(d) or not d.X:
            return None
        i = r.below(len(d.X))
        kink = solve_on_kink(r, d, i, l, v)
        if kink is None:
            return None
        j = r.below(widths[0])
        x = list(kink)
        x[j] += r.choice([-1, 1]) * Fraction(1, 10**k)
        d.X[i] = x
        if not clean(d):
            return None
        d.params.update({"sample": i, "neuron": [l, v], "k": k, "kink_point": [str(q) for q in kink]})
        d.description = f"sample {i} within 10^-{k} (one coordinate) of the zero set of hidden neuron ({l},{v})"
        return d

    return search(rng, f"sample near the kink of ({l},{v})", make)


def _verify_near_kink(d: Draft) -> str | None:
    i, (l, v), k = d.params["sample"], d.params["neuron"], d.params["k"]
    kink = [Fraction(q) for q in d.params["kink_point"]]
    if forward(d.W, d.b, kink)[l - 1][v] != 0:
        return "the recorded kink point is not on the zero set"
    if max(abs(a - b) for a, b in zip(d.X[i], kink)) > Fraction(1, 10**k):
        return f"sample {i} is farther than 10^-{k} from the kink point"
    return None if clean(d) else "ties or neurons in S"


#: The families defined here (collected in ``exactident.suites.families.FAMILIES``).
#:
#: :meta hide-value:
FAMILIES = [
    Family("boundary", "a sample exactly on a hidden neuron's zero set (first layer, deeper layers, and "
           "function-preserving ties on twin neurons; cycling)",
           "the recorded sample has z = 0 exactly at the recorded neuron (and no other tie, except the twin's "
           "in the one-hidden-layer fn-preserving variant); no neuron in S", _build_boundary, _verify_boundary,
           no_hidden_layer),
    Family("near-kink", "a sample within 10^-k of a hidden neuron's kink but not on it (k = 3, 6, ..., 18)",
           "the recorded kink point has z = 0 exactly and the sample is within 10^-k of it (max norm); no tie, "
           "no neuron in S", _build_near_kink, _verify_near_kink, no_hidden_layer),
]
