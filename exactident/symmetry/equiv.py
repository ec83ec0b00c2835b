"""Are two networks in the same orbit?  Where do they differ, by how much, and on a sample?

:func:`equiv` takes any two networks (docs/symmetries.md).  **Two plain ReLU MLPs** (also given in
the constrained form with ``T = I``) are compared by their canonical forms
(:mod:`exactident.symmetry.canonical`): equal forms prove the same orbit; different forms prove
different orbits unless one of them has an isolated neuron with a nonzero incoming weight (then
``same_orbit`` is None).  **Otherwise** (a layer graph on either side, docs/symmetries.md, "Layer
graphs"):

- **same orbit** (``True``): one family (same widths, index arrays, fixed entries and slopes) and
  equal forms: each form is reached by a group element (rescalings of ``H``, permutations of
  interchangeable blocks: dense units, convolution channels), so one network is the other moved;
- **different orbits** (``False``): the two networks compute different functions, shown by an exact
  output difference at a point (the sample's, or one of :data:`PROBE_POINTS` seeded random dyadic
  points): every symmetry keeps the function;
- **undecided** (``None``): the forms (or the families) differ yet the outputs agree at every point
  tried (a permutation the form does not normalise, a form not complete for ``H``, a hidden symmetry).

When they differ: **where** (the first entry at which the forms differ), the **alignment error**
(:mod:`exactident.symmetry.alignment`), and with a **sample** both networks run exactly on it; equal
outputs on ``X`` with different orbits are a certified *hidden symmetry on X* (functional equality on
``X`` not explained by the group).

Called by :mod:`exactident.symmetry.command` and :mod:`exactident.symmetry.audit`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from exactident.io.rationals import format_fmpq
from exactident.model.network import Network, pre_activations
from exactident.symmetry.alignment import (
    Alignment,
    align_greedy,
    alignment_error,
    compose,
    entry_names,
    graph_alignment,
)
from exactident.symmetry.canonical import (
    CanonicalForm,
    GraphCanonicalForm,
    canonical_form,
)
from exactident.symmetry.group import structure_key, transform

__all__ = ["PROBE_POINTS", "Equivalence", "compare_outputs", "equiv", "output_difference"]

#: Random dyadic points (seeded) at which the outputs of two layer graphs are compared to decide "different orbits".
PROBE_POINTS = 16

_ZERO = flint.fmpq(0)


def _float(q: flint.fmpq) -> float:
    try:
        return int(q.p) / int(q.q)
    except OverflowError:
        return math.inf


def _name(l: int, i: int, j: int | None) -> str:
    return f"b_{l}[{i}]" if j is None else f"W_{l}[{i},{j}]"


@dataclass
class Equivalence:
    """What :func:`equiv` found (JSON view: :meth:`to_dict`).

    Attributes
    ----------
    same_orbit : bool or None
        None: the forms differ but an isolated neuron leaves the answer open.
    reason : str
    first_difference : dict or None
        ``{layer, neuron, entry, a, b, neuron_a, neuron_b}`` in canonical indices (the original
        neurons of A and B at that position as ``neuron_a``, ``neuron_b``); for a weight from a hidden
        neuron also ``from`` (its canonical index in layer ``l - 1``), ``from_a``, ``from_b``.
    alignment : Alignment or None
    sample : dict or None
        ``{n, same_outputs, first_difference, max_abs_output_error}`` on the sample.
    hidden_symmetry_on_sample : bool
        Same outputs on the sample, different orbits.
    form_a, form_b : CanonicalForm or None
        The MLP forms (None for layer graphs: their digests are in ``reason``).
    """

    same_orbit: bool | None
    reason: str
    first_difference: dict[str, Any] | None = None
    alignment: Alignment | None = None
    sample: dict[str, Any] | None = None
    hidden_symmetry_on_sample: bool = False
    form_a: CanonicalForm | None = None
    form_b: CanonicalForm | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``exactident-equiv/1`` JSON object (docs/symmetries.md)."""
        return {"format": "exactident-equiv/1", "same_orbit": self.same_orbit, "reason": self.reason,
                "first_difference": self.first_difference,
                "alignment": None if self.alignment is None else self.alignment.to_dict(),
                "sample": self.sample, "hidden_symmetry_on_sample": self.hidden_symmetry_on_sample,
                "digest_a": None if self.form_a is None else self.form_a.digest(),
                "digest_b": None if self.form_b is None else self.form_b.digest()}


def compare_outputs(a: Network, b: Network,
                    X: Sequence[Sequence[flint.fmpq]]) -> dict[str, Any]:
    """Exact forward passes of ``a`` and ``b`` on ``X``: equal outputs?  The first difference, the largest one."""
    if not X:
        return output_difference(None, None, 0, a.widths[-1])
    return output_difference(pre_activations(a, X)[-1], pre_activations(b, X)[-1], len(X), a.widths[-1])


def output_difference(Fa: Any, Fb: Any, n: int, n_out: int) -> dict[str, Any]:
    """The ``sample`` object of ``exactident-equiv/1`` from the exact outputs ``Fa``, ``Fb`` (``n x n_out``, Q)."""
    first = None
    worst = _ZERO
    for i in range(n):
        for k in range(n_out):
            d = abs(Fa[i, k] - Fb[i, k])
            if d != _ZERO and first is None:
                first = {"sample": i, "output": k, "a": format_fmpq(Fa[i, k]), "b": format_fmpq(Fb[i, k])}
            worst = max(worst, d)
    return {"n": n, "same_outputs": first is None, "first_difference": first,
            "max_abs_output_error": format_fmpq(worst), "max_abs_output_error_float": _float(worst)}


def equiv(a: Network, b: Network,
          sample: Sequence[Sequence[flint.fmpq]] | None = None, *, seed: int = 0) -> Equivalence:
    """Decide whether ``a`` and ``b`` are in the same orbit; where they differ, by how much; outputs on a sample.

    Parameters
    ----------
    a, b : Network
        Two plain ReLU MLPs are compared by their canonical forms; otherwise see the module docstring.
    sample : n rows of N_0 fmpq, optional
        Run both networks on it exactly.
    seed : int
        Seeds the probe points (layer graphs only).

    Returns
    -------
    Equivalence

    Raises
    ------
    UnsupportedCaseError
        Too many tie orders in a canonical form (:data:`~exactident.symmetry.canonical.MAX_BRANCHES`).

    Examples
    --------
    >>> a = Network((1, 2, 1), [[[1], [2]], [[3, 4]]], [[0, 1], [5]])
    >>> b = Network((1, 2, 1), [[[4], [3]], [[2, 1]]], [[2, 0], [5]])   # swapped, rescaled by 2 and 3
    >>> equiv(a, b).same_orbit
    True
    >>> c = Network((1, 2, 1), [[[4], [3]], [[2, 1]]], [[2, 0], [6]])
    >>> e = equiv(a, c, [[flint.fmpq(1)]])
    >>> e.same_orbit, e.first_difference["entry"], e.sample["same_outputs"]
    (False, 'b_2[0]', False)
    """
    if not (a.is_plain() and b.is_plain()):
        return _equiv_graph(a, b, sample, seed)
    if a.widths != b.widths:
        return Equivalence(False, f"different widths: {list(a.widths)} and {list(b.widths)}")
    ca, cb = canonical_form(a), canonical_form(b)
    assert isinstance(ca, CanonicalForm) and isinstance(cb, CanonicalForm)
    va, vb = ca.key, cb.key
    out = Equivalence(True, "equal canonical forms", form_a=ca, form_b=cb)
    if va != vb:
        k = next(t for t, (x, y) in enumerate(zip(va, vb)) if x != y)
        l, i, j = entry_names(a.widths)[k]
        hidden = l < a.L
        out.first_difference = {"layer": l, "neuron": i, "entry": _name(l, i, j), "a": format_fmpq(va[k]),
                                "b": format_fmpq(vb[k]),
                                "neuron_a": ca.perm[l - 1][i] if hidden else i,
                                "neuron_b": cb.perm[l - 1][i] if hidden else i}
        if j is not None and l > 1:  # the weight's source neuron, in layer l - 1
            out.first_difference.update({"from": j, "from_a": ca.perm[l - 2][j], "from_b": cb.perm[l - 2][j]})
        if ca.isolated or cb.isolated:
            out.same_orbit, out.reason = None, ("different canonical forms, but an isolated neuron (dead-in, zero "
                                                "outgoing column, a nonzero incoming weight) leaves the orbit open")
        else:
            out.same_orbit, out.reason = False, f"canonical forms differ first at {out.first_difference['entry']}"
    candidates = []
    perm, scale = compose(ca, cb)
    candidates.append(alignment_error(a, transform(b, perm, scale), "canonical", perm, scale))
    if va != vb:
        gp, gs = align_greedy(a, b)
        candidates.append(alignment_error(a, transform(b, gp, gs), "greedy", gp, gs))
    out.alignment = min(candidates, key=lambda al: al.max_abs)
    if sample is not None:
        out.sample = compare_outputs(a, b, sample)
        out.hidden_symmetry_on_sample = bool(out.sample["same_outputs"] and out.same_orbit is False)
    return out


def _equiv_graph(ca: Network, cb: Network, sample: Sequence[Sequence[flint.fmpq]] | None,
                 seed: int) -> Equivalence:
    """:func:`equiv` when a layer graph is on either side (module docstring)."""
    from exactident.symmetry.linewalk import domain_points

    if (ca.widths[0], ca.widths[-1]) != (cb.widths[0], cb.widths[-1]):
        return Equivalence(False, f"different numbers of inputs or outputs: {ca.widths[0]} -> {ca.widths[-1]} and "
                                  f"{cb.widths[0]} -> {cb.widths[-1]}")
    same_family = ca.widths == cb.widths and ca.n_params == cb.n_params and structure_key(ca) == structure_key(cb)
    out = Equivalence(None, "")
    why_open = "different architectures (the compiled families differ): no form to compare"
    if same_family:
        fa, fb = canonical_form(ca), canonical_form(cb)
        assert isinstance(fa, GraphCanonicalForm) and isinstance(fb, GraphCanonicalForm)  # not plain: same family
        out.alignment = graph_alignment(fa, fb, ca, cb)
        if fa.key == fb.key:
            group = "the rescalings and permutations of interchangeable blocks" if fa.groups else "the rescalings"
            out.same_orbit, out.reason = True, f"equal canonical forms under {group} (digest {fa.digest()})"
        else:
            j = next(t for t, (x, y) in enumerate(zip(fa.key, fb.key)) if x != y)
            out.first_difference = {"entry": ca.param_name(j), "parameter": j, "a": format_fmpq(fa.key[j]),
                                    "b": format_fmpq(fb.key[j])}
            why_open = (f"the canonical forms differ first at {ca.param_name(j)}"
                        + ("" if fa.complete and fb.complete else " (a form is not complete for H)")
                        + "; permutations are normalised for interchangeable blocks (dense units, convolution "
                          "channels) only, not for units touched by skips or ties")
    if sample is not None:
        out.sample = compare_outputs(ca, cb, sample)
    if out.same_orbit is None:
        probes = domain_points(np.random.default_rng(seed), PROBE_POINTS, ca.widths[0], None)
        seen = out.sample if out.sample is not None and not out.sample["same_outputs"] else None
        if seen is not None:
            f = seen["first_difference"]
            out.same_orbit, out.reason = False, (f"different functions: outputs differ at sample {f['sample']} output "
                                                 f"{f['output']} ({why_open})")
        else:
            probe = compare_outputs(ca, cb, probes)
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
