"""Are two parameter settings in the same orbit?  Where do they differ, by how much, and on a sample?

:func:`equiv` compares the canonical forms (:mod:`exactident.symmetry.canonical`): equal forms
prove the same orbit; different forms prove different orbits unless one of the networks has an
isolated neuron with a nonzero incoming weight (then ``same_orbit`` is None).  When they differ:

- **where**: the first entry, in the order ``W_1`` row by row, ``b_1``, ``W_2``, ..., at which the
  canonical forms differ, with the original neuron of each network at that canonical position;
- **alignment error**: B brought into A's coordinates by a group element (a permutation and positive
  scales per hidden layer) and compared entry by entry, exactly: the largest absolute error
  ``max |a - b'|``, the largest relative error ``max |a - b'| / |a|`` over the entries with
  ``a != 0`` (entries with ``a = 0 != b'`` are counted apart), and ``bits = -log2(max relative
  error)``.  Two alignments are tried, the one the canonical forms give and a greedy matching layer
  by layer (floats only rank the candidate pairs: each pair's scale is the exact ratio of the
  entries at A's largest incoming entry); the one with the smaller exact largest absolute error is
  kept.  Its errors are exact for that alignment, an upper bound on the best alignment's;
- **sample**: both networks run exactly on ``X``; equal outputs on ``X`` with different orbits are a
  certified *hidden symmetry on X* (functional equality on ``X`` not explained by the group).

Called by :mod:`exactident.symmetry.command` and :mod:`exactident.symmetry.audit`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import flint

from exactident.io.rationals import format_fmpq
from exactident.model.network import Network, pre_activations
from exactident.symmetry.canonical import CanonicalForm, canonical_form, parameter_vector, transform

__all__ = ["Alignment", "Equivalence", "align_greedy", "alignment_error", "entry_names", "equiv", "output_difference"]

_ZERO = flint.fmpq(0)
_ONE = flint.fmpq(1)


def entry_names(widths: Sequence[int]) -> list[tuple[int, int, int | None]]:
    """``(l, i, j)`` for each entry of :func:`~exactident.symmetry.canonical.parameter_vector` (``j`` None: bias)."""
    out: list[tuple[int, int, int | None]] = []
    for l in range(1, len(widths)):
        out += [(l, i, j) for i in range(widths[l]) for j in range(widths[l - 1])]
        out += [(l, i, None) for i in range(widths[l])]
    return out


def _name(l: int, i: int, j: int | None) -> str:
    return f"b_{l}[{i}]" if j is None else f"W_{l}[{i},{j}]"


def bits(rel: flint.fmpq) -> float:
    """``-log2(rel)`` as a float (``inf`` for 0), from the exact numerator and denominator."""
    if rel == _ZERO:
        return math.inf
    return math.log2(int(rel.q)) - math.log2(int(rel.p))


@dataclass
class Alignment:
    """B in A's coordinates and the exact entrywise errors.

    Attributes
    ----------
    method : str
        ``"canonical"`` or ``"greedy"``.
    perm, scale : per hidden layer
        The group element applied to B (``perm[l-1][i]``: B's neuron put at A's position ``i``).
    max_abs : fmpq
    max_rel : fmpq or None
        None when every entry of A is 0.  ``bits`` (JSON) is ``-log2(max_rel)``, null when it is 0 or None.
    where_abs, where_rel : str
        The entries where they are reached (paper names in A's indices).
    zero_mismatch : int
        Entries with ``a = 0`` and ``b' != 0`` (infinite relative error, not in ``max_rel``).
    """

    method: str
    perm: list[list[int]]
    scale: list[list[flint.fmpq]]
    max_abs: flint.fmpq
    max_rel: flint.fmpq | None
    where_abs: str
    where_rel: str
    zero_mismatch: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: exact rationals as strings, with float views and ``bits``."""
        return {"method": self.method, "perm": self.perm,
                "scale": [[format_fmpq(s) for s in row] for row in self.scale],
                "max_abs": format_fmpq(self.max_abs), "max_abs_float": _float(self.max_abs),
                "where_abs": self.where_abs,
                "max_rel": None if self.max_rel is None else format_fmpq(self.max_rel),
                "max_rel_float": None if self.max_rel is None else _float(self.max_rel),
                "bits": None if not self.max_rel else bits(self.max_rel), "where_rel": self.where_rel,
                "zero_mismatch": self.zero_mismatch}


def _float(q: flint.fmpq) -> float:
    try:
        return int(q.p) / int(q.q)
    except OverflowError:
        return math.inf


def alignment_error(a: Network, b_aligned: Network, method: str, perm: list[list[int]],
                    scale: list[list[flint.fmpq]]) -> Alignment:
    """Exact entrywise errors of ``b_aligned`` against ``a`` (same widths)."""
    names = entry_names(a.widths)
    max_abs, max_rel = _ZERO, None
    where_abs = where_rel = ""
    mismatch = 0
    for k, (x, y) in enumerate(zip(parameter_vector(a), parameter_vector(b_aligned))):
        d = abs(x - y)
        if k == 0 or d > max_abs:
            max_abs, where_abs = d, _name(*names[k])
        if x == _ZERO:
            mismatch += d != _ZERO
            continue
        r = d / abs(x)
        if max_rel is None or r > max_rel:
            max_rel, where_rel = r, _name(*names[k])
    return Alignment(method, perm, scale, max_abs, max_rel, where_abs, where_rel, mismatch)


def align_greedy(a: Network, b: Network) -> tuple[list[list[int]], list[list[flint.fmpq]]]:
    """A group element that brings ``b`` close to ``a``, layer by layer (greedy matching).

    For each hidden layer, every pair (A's neuron ``i``, B's neuron ``p``) gets the exact scale
    ``s = a_k / b_k`` at ``k``, A's largest incoming entry (columns already aligned; the bias
    counts), and the float cost ``max |a - s b| / max |a|``; pairs with ``s <= 0`` or ``b_k = 0`` are
    last.  Pairs are taken by increasing cost.  Neurons of A with zero incoming vector get scale 1.
    """
    perm: list[list[int]] = []
    scale: list[list[flint.fmpq]] = []
    prev_p: list[int] = list(range(a.widths[0]))
    prev_s: list[flint.fmpq] = [_ONE] * a.widths[0]
    for l in range(1, a.L):
        n_prev = a.widths[l - 1]
        ra = [[a.W[l - 1][i, j] for j in range(n_prev)] + [a.b[l - 1][i]] for i in range(a.widths[l])]
        rb = [[b.W[l - 1][p, prev_p[j]] / prev_s[j] for j in range(n_prev)] + [b.b[l - 1][p]]
              for p in range(b.widths[l])]
        fa = [[_float(x) for x in r] for r in ra]
        fb = [[_float(x) for x in r] for r in rb]
        pairs = []
        for i, r in enumerate(ra):
            k = max(range(len(r)), key=lambda t: abs(r[t]))
            top = abs(fa[i][k])
            for p, q in enumerate(rb):
                if r[k] == _ZERO:
                    s, cost = _ONE, max(abs(x) for x in fb[p])
                elif q[k] == _ZERO or r[k] / q[k] <= _ZERO:
                    s, cost = _ONE, math.inf
                else:
                    s = r[k] / q[k]
                    fs = _float(s)
                    cost = max(abs(x - fs * y) for x, y in zip(fa[i], fb[p])) / top
                pairs.append((cost, i, p, s))
        pairs.sort(key=lambda t: (t[0], t[1], t[2]))
        got_i: dict[int, tuple[int, flint.fmpq]] = {}
        used: set[int] = set()
        for _, i, p, s in pairs:
            if i not in got_i and p not in used:
                got_i[i] = (p, s)
                used.add(p)
        prev_p = [got_i[i][0] for i in range(a.widths[l])]
        prev_s = [got_i[i][1] for i in range(a.widths[l])]
        perm.append(prev_p)
        scale.append(prev_s)
    return perm, scale


def _compose(ca: CanonicalForm, cb: CanonicalForm) -> tuple[list[list[int]], list[list[flint.fmpq]]]:
    # B -> canonical(B) = canonical(A) -> A: position i of A is A's canonical position t with
    # ca.perm[t] = i, filled by B's neuron cb.perm[t] with scale cb.scale[t] / ca.scale[t]
    perm, scale = [], []
    for pa, sa, pb, sb in zip(ca.perm, ca.scale, cb.perm, cb.scale):
        pos = {p: t for t, p in enumerate(pa)}
        perm.append([pb[pos[i]] for i in range(len(pa))])
        scale.append([sb[pos[i]] / sa[pos[i]] for i in range(len(pa))])
    return perm, scale


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


def compare_outputs(a: Network, b: Network, X: Sequence[Sequence[flint.fmpq]]) -> dict[str, Any]:
    """Exact forward passes of ``a`` and ``b`` on ``X``: equal outputs?  The first difference, the largest one."""
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


def equiv(a: Network, b: Network, sample: Sequence[Sequence[flint.fmpq]] | None = None) -> Equivalence:
    """Decide whether ``a`` and ``b`` are in the same orbit; where they differ, by how much; outputs on a sample.

    Parameters
    ----------
    a, b : Network
    sample : n rows of N_0 fmpq, optional
        Run both networks on it exactly.

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
    if a.widths != b.widths:
        return Equivalence(False, f"different widths: {list(a.widths)} and {list(b.widths)}")
    ca, cb = canonical_form(a), canonical_form(b)
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
    perm, scale = _compose(ca, cb)
    candidates.append(alignment_error(a, transform(b, perm, scale), "canonical", perm, scale))
    if va != vb:
        gp, gs = align_greedy(a, b)
        candidates.append(alignment_error(a, transform(b, gp, gs), "greedy", gp, gs))
    out.alignment = min(candidates, key=lambda al: al.max_abs)
    if sample is not None:
        out.sample = compare_outputs(a, b, sample)
        out.hidden_symmetry_on_sample = bool(out.sample["same_outputs"] and out.same_orbit is False)
    return out
