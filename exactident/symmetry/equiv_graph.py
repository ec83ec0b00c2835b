"""Are two layer graphs in the same orbit?  Where do they differ, by how much, and on a sample?

The layer-graph form of :mod:`exactident.symmetry.equiv` (docs/symmetries.md, "Layer graphs"), on
the normal forms under the rescaling group ``H`` (:mod:`exactident.symmetry.canonical_graph`):

- **same orbit** (``True``): one architecture (the same compiled family) and equal forms: each form
  is reached by an element of ``H``, so one network is the other rescaled;
- **different orbits** (``False``): the two networks compute different functions, shown by an exact
  output difference at a point (the sample's, or one of ``PROBE_POINTS`` random dyadic points):
  every element of the group (rescalings, permutations, any symmetry at all) keeps the function;
- **undecided** (``None``): the forms differ (or the families do) yet the outputs agree at every
  point tried: a permutation the form does not normalise (convolution channels, units touched by
  skips or ties), a form not complete for ``H``, or a hidden symmetry could map one to the other.

When the families are equal the **alignment error** compares B brought into A's coordinates,
parameter by parameter, exactly (as for MLPs), by two group elements: the one the two forms give
(B's form taken back by the inverse of A's: method ``"canonical"``, with its permutation) and the
rescalings alone (method ``"rescaling"``); the smaller largest absolute error is kept.
``--sample``: both networks run exactly
(:func:`exactident.model.constrained.constrained_pre_activations`); equal outputs on the sample
with different orbits are a certified *hidden symmetry on the sample*.

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
from exactident.symmetry.canonical_graph import (
    GraphCanonicalForm,
    apply_scales,
    canonical_form_graph,
    structure_key,
    unit_scales,
)
from exactident.symmetry.equiv import Alignment, Equivalence, output_difference

__all__ = ["PROBE_POINTS", "as_constrained", "compare_outputs_graph", "equiv_graph"]

#: Random dyadic points (seeded) at which the outputs are compared to decide "different orbits".
PROBE_POINTS = 16

_ZERO = flint.fmpq(0)
_ONE = flint.fmpq(1)


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
    if not X:
        return output_difference(None, None, 0, a.widths[-1])
    return output_difference(constrained_pre_activations(a, X)[-1], constrained_pre_activations(b, X)[-1], len(X),
                             a.widths[-1])


def _errors(cn_a: ConstrainedNetwork, ta: Sequence[flint.fmpq], tb: Sequence[flint.fmpq], method: str,
            perm: list[list[int]], scale: list[list[flint.fmpq]]) -> Alignment:
    """Exact parameter-by-parameter errors of B's aligned theta ``tb`` against A's ``ta`` (as for MLPs)."""
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
    return Alignment(method, perm, scale, max_abs, max_rel, where_abs, where_rel, mismatch)


def _by_layer(cn: ConstrainedNetwork, units: Sequence[tuple[int, int]], values: Sequence[Any]) -> list[list[Any]]:
    out: list[list[Any]] = [[] for _ in range(1, cn.L)]
    for (l, _v), x in zip(units, values):
        out[l - 1].append(x)
    return out


def _undo(form: GraphCanonicalForm, net: ConstrainedNetwork) -> list[flint.fmpq]:
    """``net`` (in the coordinates of ``form``'s positions) taken back by the inverse of the element reaching
    ``form``: at A's position ``a`` of layer ``l``, the unit at the form's position ``p`` with ``perm[p] = a``,
    its scale ``lambda_p`` removed (``W_l[a, c] = W'_l[p, q] lambda_{l-1, q} / lambda_{l, p}``)."""
    L = net.L
    pos = {u: r for r, u in enumerate(form.units)}
    inv = [list(range(net.widths[0]))]
    lam = [[_ONE] * net.widths[0]]
    for l in range(1, L):
        perm = form.perm[l - 1] if form.perm is not None else list(range(net.widths[l]))
        back = [0] * net.widths[l]
        for p, a in enumerate(perm):
            back[a] = p
        inv.append(back)
        lam.append([form.scale[pos[(l, p)]] for p in range(net.widths[l])])
    inv.append(list(range(net.widths[L])))
    lam.append([_ONE] * net.widths[L])
    theta: list[flint.fmpq | None] = [None] * net.n_params
    for l in range(1, L + 1):
        WI, bI = net.W_index[l - 1], net.b_index[l - 1]
        for a, c in zip(*(x.tolist() for x in np.nonzero(WI >= 0))):
            j = int(WI[a, c])
            if theta[j] is None:
                p, q = inv[l][a], inv[l - 1][c]
                theta[j] = net.W[l - 1][p, q] * lam[l - 1][q] / lam[l][p]
        for a in np.flatnonzero(bI >= 0).tolist():
            j = int(bI[a])
            if theta[j] is None:
                theta[j] = net.b[l - 1][inv[l][a]] / lam[l][inv[l][a]]
        if l < L:
            sI = net.slope_index[l - 1]
            for a in np.flatnonzero(sI >= 0).tolist():
                j = int(sI[a])
                if theta[j] is None:
                    theta[j] = net.negative_slope[l - 1][inv[l][a]]
    return [t if t is not None else _ZERO for t in theta]


def _alignment(a: GraphCanonicalForm, b: GraphCanonicalForm, cn_a: ConstrainedNetwork,
               cn_b: ConstrainedNetwork) -> Alignment:
    """B in A's coordinates, exact errors: by the element the two forms give (B's form taken back by the inverse
    of A's: method ``canonical``) and by the rescalings alone (method ``rescaling``); the smaller largest absolute
    error is kept."""
    ta = cn_a.theta()
    canonical = _undo(a, b.network)
    pos = {u: r for r, u in enumerate(a.units)}
    perm, scale = [], []
    for l in range(1, cn_a.L):
        pa = a.perm[l - 1] if a.perm is not None else list(range(cn_a.widths[l]))
        pb = b.perm[l - 1] if b.perm is not None else list(range(cn_a.widths[l]))
        row, srow = [0] * cn_a.widths[l], [_ONE] * cn_a.widths[l]
        for p, orig in enumerate(pa):  # A's unit orig sits at form position p, where B's unit pb[p] sits
            row[orig] = pb[p]
            srow[orig] = b.scale[pos[(l, p)]] / a.scale[pos[(l, p)]]
        perm.append(row)
        scale.append(srow)
    first = _errors(cn_a, ta, canonical, "canonical", perm, scale)
    mu = [mb / ma for ma, mb in zip(a.mu, b.mu)]
    rescaled = apply_scales(cn_b.theta(), b.exponents, mu)
    ratio = [sb / sa for sa, sb in zip(unit_scales(len(a.units), a.generators, a.mu),
                                       unit_scales(len(b.units), b.generators, b.mu))]
    second = _errors(cn_a, ta, rescaled, "rescaling", [], _by_layer(cn_a, a.units, ratio))
    return first if first.max_abs <= second.max_abs else second


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
            group = "the rescalings and permutations of interchangeable units" if fa.groups else "the rescalings"
            out.same_orbit, out.reason = True, f"equal canonical forms under {group} (digest {fa.digest()})"
        else:
            j = next(t for t, (x, y) in enumerate(zip(fa.key, fb.key)) if x != y)
            out.first_difference = {"entry": ca.param_name(j), "parameter": j, "a": format_fmpq(fa.key[j]),
                                    "b": format_fmpq(fb.key[j])}
            why_open = (f"the canonical forms under the rescalings differ first at {ca.param_name(j)}"
                        + ("" if fa.complete and fb.complete else " (a form is not complete for H)")
                        + "; permutations are normalised for interchangeable dense units only, not for "
                          "convolution channels or units touched by skips or ties")
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
