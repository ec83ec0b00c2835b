"""Are two layer graphs in the same orbit?  Where do they differ, by how much, and on a sample?

The layer-graph form of :mod:`exactident.symmetry.equiv` (docs/symmetries.md, "Layer graphs"), on
the normal forms under the rescaling group ``H`` (:mod:`exactident.symmetry.canonical_graph`):

- **same orbit** (``True``): one architecture (the same compiled family) and equal forms: each form
  is reached by an element of ``H``, so one network is the other rescaled;
- **different orbits** (``False``): the two networks compute different functions, shown by an exact
  output difference at a point (the sample's, or one of ``PROBE_POINTS`` random dyadic points):
  every element of the group (rescalings, permutations, any symmetry at all) keeps the function;
- **undecided** (``None``): the forms differ (or the families do) yet the outputs agree at every
  point tried: a permutation of interchangeable units (not normalised here), a form not complete
  for ``H``, or a hidden symmetry could map one to the other.

When the families are equal the **alignment error** compares B brought into A's coordinates by the
element of ``H`` the forms give (method ``"rescaling"``, no permutation), parameter by parameter,
exactly (as for MLPs).  ``--sample``: both networks run exactly
(:func:`exactident.model.constrained.constrained_pre_activations`); equal outputs on the sample with
different orbits are a certified *hidden symmetry on the sample*.

Called by :mod:`exactident.symmetry.command` and :mod:`exactident.symmetry.audit_graph`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flint
import numpy as np

from exactident.io.rationals import format_fmpq
from exactident.model.constrained import ConstrainedNetwork, constrained_pre_activations, from_network
from exactident.model.network import Network
from exactident.symmetry.canonical_graph import GraphCanonicalForm, apply_scales, canonical_form_graph, structure_key
from exactident.symmetry.equiv import Alignment, Equivalence

__all__ = ["PROBE_POINTS", "as_constrained", "compare_outputs_graph", "equiv_graph"]

#: Random dyadic points (seeded) at which the outputs are compared to decide "different orbits".
PROBE_POINTS = 16

_ZERO = flint.fmpq(0)


def _float(q: flint.fmpq) -> float:
    try:
        return int(q.p) / int(q.q)
    except OverflowError:
        return float("inf")


def as_constrained(net: ConstrainedNetwork | Network) -> ConstrainedNetwork:
    """A plain network as a constrained one (:func:`~exactident.model.constrained.from_network`); else itself."""
    return net if isinstance(net, ConstrainedNetwork) else from_network(net)


def compare_outputs_graph(a: ConstrainedNetwork, b: ConstrainedNetwork,
                          X: Sequence[Sequence[flint.fmpq]]) -> dict[str, Any]:
    """Exact forward passes of ``a`` and ``b`` on ``X``: equal outputs?  The first difference, the largest one."""
    Fa = constrained_pre_activations(a, X)[-1] if X else None
    Fb = constrained_pre_activations(b, X)[-1] if X else None
    first = None
    worst = _ZERO
    for i in range(len(X)):
        assert Fa is not None and Fb is not None
        for k in range(a.widths[-1]):
            d = abs(Fa[i, k] - Fb[i, k])
            if d != _ZERO and first is None:
                first = {"sample": i, "output": k, "a": format_fmpq(Fa[i, k]), "b": format_fmpq(Fb[i, k])}
            worst = max(worst, d)
    return {"n": len(X), "same_outputs": first is None, "first_difference": first,
            "max_abs_output_error": format_fmpq(worst), "max_abs_output_error_float": _float(worst)}


def _alignment(a: GraphCanonicalForm, b: GraphCanonicalForm, cn_a: ConstrainedNetwork,
               cn_b: ConstrainedNetwork) -> Alignment:
    """B in A's coordinates by the element of ``H`` the forms give (generator scales ``mu_b / mu_a``), exact errors."""
    mu = [mb / ma for ma, mb in zip(a.mu, b.mu)]
    tb = apply_scales(cn_b.theta(), b.exponents, mu)
    ta = cn_a.theta()
    max_abs, max_rel, where_abs, where_rel, mismatch = _ZERO, None, "", "", 0
    for j, (x, y) in enumerate(zip(ta, tb)):
        d = abs(x - y)
        if j == 0 or d > max_abs:
            max_abs, where_abs = d, cn_a.param_name(j)
        if x == _ZERO:
            mismatch += d != _ZERO
            continue
        r = d / abs(x)
        if max_rel is None or r > max_rel:
            max_rel, where_rel = r, cn_a.param_name(j)
    by_layer: dict[int, list[flint.fmpq]] = {}
    for (l, _v), sa, sb in zip(a.units, a.scale, b.scale):
        by_layer.setdefault(l, []).append(sb / sa)
    return Alignment("rescaling", [], [by_layer.get(l, []) for l in range(1, cn_a.L)], max_abs, max_rel,
                     where_abs, where_rel, mismatch)


def equiv_graph(a: ConstrainedNetwork | Network, b: ConstrainedNetwork | Network,
                sample: Sequence[Sequence[flint.fmpq]] | None = None, *, seed: int = 0) -> Equivalence:
    """Same orbit, different orbits or undecided, for two layer graphs (module docstring).

    Parameters
    ----------
    a, b : ConstrainedNetwork or Network
    sample : n rows of N_0 fmpq, optional
        Run both networks on it exactly.
    seed : int
        Seeds the probe points.

    Returns
    -------
    Equivalence
        ``form_a``/``form_b`` stay None (the layer-graph forms are in ``first_difference`` and the digests
        in ``reason``); ``first_difference`` is ``{entry, parameter, a, b}`` in the normal forms.

    Examples
    --------
    ``3 leaky(2x - 1)`` and its rescaling ``(3/2) leaky(4x - 2)``: the same orbit; ``3 leaky(2x - 1) + 1`` differs.

    >>> from exactident.model.network import Network
    >>> def net(w, b, v, c):
    ...     cn = from_network(Network((1, 1, 1), [[[w]], [[v]]], [[b], [c]]))
    ...     cn.negative_slope[0][0] = flint.fmpq(1, 10); cn.features = ("leaky ReLU",)
    ...     return cn
    >>> equiv_graph(net(2, -1, 3, 0), net(4, -2, flint.fmpq(3, 2), 0)).same_orbit
    True
    >>> equiv_graph(net(2, -1, 3, 0), net(2, -1, 3, 1)).same_orbit
    False
    """
    from exactident.symmetry.linewalk import domain_points

    ca, cb = as_constrained(a), as_constrained(b)
    if (ca.widths[0], ca.widths[-1]) != (cb.widths[0], cb.widths[-1]):
        return Equivalence(False, f"different numbers of inputs or outputs: {ca.widths[0]} -> {ca.widths[-1]} and "
                                  f"{cb.widths[0]} -> {cb.widths[-1]}")
    same_family = ca.widths == cb.widths and ca.n_params == cb.n_params and structure_key(ca) == structure_key(cb)
    out = Equivalence(None, "")
    fa = fb = None
    why_open = ""
    if same_family:
        fa, fb = canonical_form_graph(ca), canonical_form_graph(cb)
    if fa is not None and fb is not None:
        out.alignment = _alignment(fa, fb, ca, cb)
        if fa.key == fb.key:
            out.same_orbit, out.reason = True, f"equal canonical forms under the rescalings (digest {fa.digest()})"
        else:
            j = next(t for t, (x, y) in enumerate(zip(fa.key, fb.key)) if x != y)
            out.first_difference = {"entry": ca.param_name(j), "parameter": j, "a": format_fmpq(fa.key[j]),
                                    "b": format_fmpq(fb.key[j])}
            why_open = (f"the canonical forms under the rescalings differ first at {ca.param_name(j)}"
                        + ("" if fa.complete and fb.complete else " (a form is not complete for H)")
                        + "; permutations of interchangeable units are not normalised")
    elif not why_open:
        why_open = "different architectures (the compiled families differ): no form to compare"
    if sample is not None:
        out.sample = compare_outputs_graph(ca, cb, sample)
    if out.same_orbit is None:
        probes = domain_points(np.random.default_rng(seed), PROBE_POINTS, ca.widths[0], None)
        seen = out.sample if out.sample is not None and not out.sample["same_outputs"] else None
        if seen is not None:
            f = seen["first_difference"]
            out.same_orbit, out.reason = False, (f"different functions: outputs differ at sample {f['sample']} output "
                                                 f"{f['output']} ({why_open})")
        else:
            probe = compare_outputs_graph(ca, cb, probes)
            if not probe["same_outputs"]:
                f = probe["first_difference"]
                out.same_orbit, out.reason = False, (f"different functions: outputs differ at random point "
                                                     f"{f['sample']} (seed {seed}) output {f['output']} ({why_open})")
            else:
                out.reason = (f"undecided: {why_open}, and the outputs agree at {PROBE_POINTS} random points"
                              + (" and on the sample" if out.sample is not None else ""))
    out.hidden_symmetry_on_sample = bool(out.sample is not None and out.sample["same_outputs"]
                                         and out.same_orbit is False)
    return out
