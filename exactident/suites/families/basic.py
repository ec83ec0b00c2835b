"""Families built by editing a random clean network: ``generic``, ``degenerate``, ``dead-neuron``,
``all-active``, ``twins``.

"Clean" means no tie (no hidden pre-activation exactly 0 on the sample) and
no neuron in the degenerate set ``S``; each family then plants one structure
and checks it exactly (:mod:`exactident.suites.exact`).
"""

from __future__ import annotations

from fractions import Fraction

from exactident.suites.draft import Draft, n_at, network_dim, random_draft
from exactident.suites.exact import (
    ZERO,
    all_active,
    dead_neurons,
    degenerate_neurons,
    forward,
    hidden_ties,
    twin_pairs,
)
from exactident.suites.families.common import (
    Family,
    clean,
    clean_draft,
    hidden_neurons,
    n_above,
    no_hidden_layer,
    search,
)
from exactident.suites.rng import HashRng

__all__ = ["FAMILIES", "REGIMES"]

#: ``generic`` cycles through these sample sizes (case index mod 3) unless ``--n-samples`` is given.
REGIMES = ("below", "at", "above")


def _regime_n(widths: list[int], regime: str) -> int:
    k = n_at(widths)
    return {"below": max(1, k - 1), "at": k, "above": n_above(widths)}[regime]


def _build_generic(rng: HashRng, widths: list[int], index: int, n_samples: int | None) -> Draft:
    regime = REGIMES[index % 3] if n_samples is None else "given"
    n = n_samples if n_samples is not None else _regime_n(widths, regime)
    d = search(rng, "clean random network", lambda r: clean_draft(r, widths, n))
    d.params.update({"regime": regime, "n_times_NL_vs_dim": _relation(n * widths[-1], network_dim(widths))})
    d.description = f"random small-denominator network, n*N_L {d.params['n_times_NL_vs_dim']} dim"
    return d


def _relation(a: int, b: int) -> str:
    return "<" if a < b else ("=" if a == b else ">")


def _verify_generic(d: Draft) -> str | None:
    if degenerate_neurons(d):
        return f"neurons in S: {degenerate_neurons(d)}"
    if hidden_ties(d):
        return f"ties: {hidden_ties(d)}"
    relation = d.params.get("n_times_NL_vs_dim")
    if relation != _relation(len(d.X) * d.widths[-1], network_dim(d.widths)):
        return f"n*N_L vs dim is not {relation!r}"
    return None


def _build_degenerate(rng: HashRng, widths: list[int], index: int, n_samples: int | None) -> Draft:
    hidden = hidden_neurons(widths)
    how = ("outgoing", "incoming")[index % 2]
    l, v = hidden[(index // 2) % len(hidden)]
    n = n_samples if n_samples is not None else n_above(widths)
    d = random_draft(rng, widths, n)
    if how == "outgoing":
        for k in range(widths[l + 1]):
            d.W[l][k][v] = ZERO
    else:
        d.W[l - 1][v] = [ZERO] * widths[l - 1]
        d.b[l - 1][v] = ZERO
    d.params.update({"neuron": [l, v], "zero": how})
    d.description = f"hidden neuron ({l},{v}) has all {how} weights{' and bias' if how == 'incoming' else ''} zero"
    d.aux["neuron"] = (l, v)
    return d


def _verify_degenerate(d: Draft) -> str | None:
    l, v = d.params["neuron"]
    return None if (l, v) in degenerate_neurons(d) else f"neuron ({l},{v}) is not in S"


def _build_dead(rng: HashRng, widths: list[int], index: int, n_samples: int | None) -> Draft:
    hidden = hidden_neurons(widths)
    l, v = hidden[index % len(hidden)]
    n = n_samples if n_samples is not None else n_above(widths)

    def make(r: HashRng) -> Draft | None:
        d = random_draft(r, widths, n)
        # Only (l, v)'s pre-activation depends on its bias, and downstream it contributes relu(z) = 0 either way.
        d.b[l - 1][v] = ZERO
        top = max(forward(d.W, d.b, x)[l - 1][v] for x in d.X)
        d.b[l - 1][v] = -top - r.choice([Fraction(1, 2), Fraction(1), Fraction(2)])
        return d if clean(d) else None

    d = search(rng, f"clean network with neuron ({l},{v}) dead", make)
    d.params["neuron"] = [l, v]
    d.description = f"hidden neuron ({l},{v}) strictly inactive on every sample"
    return d


def _verify_dead(d: Draft) -> str | None:
    l, v = d.params["neuron"]
    if (l, v) not in dead_neurons(d):
        return f"neuron ({l},{v}) is active on some sample"
    return None if clean(d) else "ties or neurons in S"


def _build_all_active(rng: HashRng, widths: list[int], index: int, n_samples: int | None) -> Draft:
    n = n_samples if n_samples is not None else n_above(widths)
    d = random_draft(rng, widths, n)
    for l in range(1, len(widths) - 1):  # biases layer by layer: every z_l >= margin > 0
        for v in range(widths[l]):
            d.b[l - 1][v] = ZERO
            low = min(forward(d.W, d.b, x)[l - 1][v] for x in d.X) if d.X else ZERO
            d.b[l - 1][v] = -low + rng.choice([Fraction(1, 2), Fraction(1), Fraction(3, 2)])
    d.description = "every hidden neuron strictly active on every sample: f is affine on the data"
    return d


def _verify_all_active(d: Draft) -> str | None:
    if degenerate_neurons(d):
        return "neurons in S"
    return None if all_active(d) else "some hidden neuron is not strictly active on some sample"


def _twins_impossible(widths: list[int]) -> str | None:
    if no_hidden_layer(widths):
        return no_hidden_layer(widths)
    return None if any(w >= 2 for w in widths[1:-1]) else "every hidden layer has one neuron: no pair to make twins"


def _build_twins(rng: HashRng, widths: list[int], index: int, n_samples: int | None) -> Draft:
    layers = [l for l in range(1, len(widths) - 1) if widths[l] >= 2]
    l = layers[index % len(layers)]
    n = n_samples if n_samples is not None else n_above(widths)

    def make(r: HashRng) -> Draft | None:
        d = random_draft(r, widths, n)
        u, w = sorted(r.sample_indices(widths[l], 2))
        c = r.choice([Fraction(1, 2), Fraction(2, 3), Fraction(1), Fraction(3, 2), Fraction(2), Fraction(3)])
        d.W[l - 1][w] = [c * x for x in d.W[l - 1][u]]
        d.b[l - 1][w] = c * d.b[l - 1][u]
        if not clean(d) or not any(forward(d.W, d.b, x)[l - 1][u] > 0 for x in d.X):
            return None
        d.params.update({"neurons": [[l, u], [l, w]], "factor": f"{c.numerator}/{c.denominator}"})
        d.description = f"hidden neurons ({l},{u}) and ({l},{w}): incoming weights and bias proportional (factor {c})"
        return d

    return search(rng, f"clean network with twins in layer {l}", make)


def _verify_twins(d: Draft) -> str | None:
    (l, u), (_, w) = d.params["neurons"]
    if not any(t[:3] == (l, u, w) for t in twin_pairs(d)):
        return f"neurons ({l},{u}) and ({l},{w}) are not proportional on the data"
    return None if clean(d) else "ties or neurons in S"


#: The families defined here (collected in ``exactident.suites.families.FAMILIES``).
#:
#: :meta hide-value:
FAMILIES = [
    Family("generic", "random small-denominator rational weights and samples, no tie; n below / at / above "
           "dim / N_L (cycling) unless --n-samples is given",
           "no tie, no neuron in S, and n*N_L below / equal to / above dim as recorded", _build_generic,
           _verify_generic, lambda widths: None),
    Family("degenerate", "a hidden neuron in S (all outgoing weights zero, or all incoming weights and bias "
           "zero; alternating)", "the recorded neuron is in S", _build_degenerate, _verify_degenerate,
           no_hidden_layer),
    Family("dead-neuron", "a hidden neuron inactive on every sample (its bias pushed down)",
           "the recorded neuron has z < 0 on every sample; no tie, no neuron in S", _build_dead, _verify_dead,
           no_hidden_layer),
    Family("all-active", "every hidden neuron active on every sample: the network is affine on the data",
           "every hidden pre-activation is > 0 on every sample; no neuron in S", _build_all_active,
           _verify_all_active, no_hidden_layer),
    Family("twins", "two hidden neurons of one layer with proportional incoming weights and bias (factor c > 0)",
           "relu(z_w) = c relu(z_u) on every sample, not all zero; no tie, no neuron in S", _build_twins,
           _verify_twins, _twins_impossible),
]
