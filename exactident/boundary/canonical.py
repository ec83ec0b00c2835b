"""A canonical presentation of a case, so that the boundary searches do not depend on how it is written.

The same network can be written in many equivalent ways: hidden neurons in
any order, each rescaled by a positive factor (incoming weights and bias
times ``a``, outgoing weights divided by ``a``), the samples in any order,
some repeated.  The verdict must not change, and neither should anything the
searches of :mod:`exactident.boundary.analyse` find: which tie resolutions
come first, which kernel directions are tried, which LP is solved.  This
module computes, from invariants only,

- **sample classes**: equal sample points form one class; classes are
  ordered by their exact coordinates (lexicographic);
- **neuron scales** ``a_{l,v}``: layer by layer, the factor that makes the
  neuron's incoming weights and bias (after rescaling the layer below) have
  largest absolute value 1; the rescaled ("normalised") network is the same
  for every positive rescaling of the input network;
- **neuron ranks** inside each hidden layer: colour refinement on the
  normalised network (a neuron's colour is refined by its normalised
  pre-activations on the sample classes, its incoming weights and bias with
  the colours they come from, and its outgoing weights with the colours they
  go to; input and output neurons are anchored).  Neurons refinement cannot
  tell apart keep their input order among themselves;
- **a canonical slice**: the fixed outgoing edge of each hidden neuron is the
  one of largest normalised ``|weight|``, lowest canonical rank on ties;
- **search coordinates**: the free parameters of that slice in canonical
  order (layer, weights before biases, canonical neuron ranks), each scaled
  to the normalised network.

Matrices handed to the searches (``Gamma(s)``, tie derivatives ``g_t(s)``)
are expressed in search coordinates, so equivalent inputs give identical
matrices, hence identical kernels (:func:`canonical_nullspace` is the
reduced-echelon basis, unique for a row space), identical LPs and identical
candidates.  Results are mapped back to the input's own parameters
(:meth:`Canonical.to_parameters`, :func:`to_slice`) before certificates are
built, and every certificate is re-checked exactly there.

Called by :mod:`exactident.boundary.analyse`; the reasoning is in
docs/boundary.md (section "Presentation invariance").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import gcd

import flint

from exactident.model.activation import Tie
from exactident.model.fixed_edges import FixedEdges, Parameter, fixed_edges, free_parameters
from exactident.model.network import Network

__all__ = ["Canonical", "canonical_form", "canonical_nullspace", "combine", "full_direction", "kernel_rows", "to_slice"]

_ZERO = flint.fmpq(0)
_ONE = flint.fmpq(1)


@dataclass
class Canonical:
    """Canonical labels, scales and search coordinates of one case (see the module docstring).

    Attributes
    ----------
    sample_class : list of int
        Class of each sample (classes numbered in the order of their points).
    points : list of list of fmpq
        One point per class, in class order.
    rank : dict (l, v) -> int
        Canonical rank of hidden neuron ``v`` inside layer ``l``.
    scale : dict (l, v) -> fmpq
        ``a_{l,v} > 0``; the normalised network has ``W'_l[v,u] = a_{l,v} W_l[v,u] / a_{l-1,u}``.
    fixed : FixedEdges
        The canonical slice, in the input's labels.
    params : list of Parameter
        ``free_parameters(net, fixed)`` (the input's labels).
    order : list of int
        Search coordinate ``k`` is ``params[order[k]]``.
    col_scale : list of fmpq
        ``col_scale[j]``: search value of ``params[j]`` = ``col_scale[j]`` times its input value.
    """

    sample_class: list[int]
    points: list[list[flint.fmpq]]
    rank: dict[tuple[int, int], int]
    scale: dict[tuple[int, int], flint.fmpq]
    fixed: FixedEdges
    params: list[Parameter]
    order: list[int]
    col_scale: list[flint.fmpq]

    def tie_key(self, tie: Tie) -> tuple[int, int, int]:
        """Sort key of a tie: (sample class, layer, canonical neuron rank)."""
        return self.sample_class[tie.i], tie.l, self.rank[(tie.l, tie.v)]

    def search_matrix(self, M: flint.fmpq_mat) -> flint.fmpq_mat:
        """Columns of ``M`` (one per ``params``) reordered and scaled to search coordinates."""
        rows = M.table()
        out = [[row[j] / self.col_scale[j] for j in self.order] for row in rows]
        return flint.fmpq_mat(M.nrows(), M.ncols(), [v for r in out for v in r])

    def search_row(self, g: Sequence[flint.fmpq], tie: Tie) -> list[flint.fmpq]:
        """``g_t`` (over ``params``) as the derivative of the normalised network's ``z_t``."""
        a = self.scale[(tie.l, tie.v)]
        return [a * g[j] / self.col_scale[j] for j in self.order]

    def to_parameters(self, c: Sequence[flint.fmpq]) -> list[flint.fmpq]:
        """A direction in search coordinates back over ``params`` (the input's labels and scale)."""
        out = [_ZERO] * len(c)
        for k, j in enumerate(self.order):
            out[j] = c[k] / self.col_scale[j]
        return out

    def columns(self, keep) -> list[int]:
        """Search coordinates ``k`` whose parameter satisfies ``keep(Parameter)``, in search order."""
        return [k for k, j in enumerate(self.order) if keep(self.params[j])]


def _normalised(net: Network) -> tuple[dict[tuple[int, int], flint.fmpq], list[list[list[flint.fmpq]]],
                                       list[list[flint.fmpq]]]:
    """Scales ``a_{l,v}`` and the normalised ``W'``, ``b'`` (a neuron with all-zero inputs keeps scale 1)."""
    L = net.L
    scale: dict[tuple[int, int], flint.fmpq] = {}

    def a(l: int, v: int) -> flint.fmpq:
        return scale.get((l, v), _ONE)  # input and output neurons are never rescaled

    Wn: list[list[list[flint.fmpq]]] = []
    bn: list[list[flint.fmpq]] = []
    for l in range(1, L + 1):
        W = net.W[l - 1].table()
        rows = [[W[v][u] / a(l - 1, u) for u in range(net.widths[l - 1])] for v in range(net.widths[l])]
        bias = list(net.b[l - 1])
        if l < L:
            for v in range(net.widths[l]):
                m = max([abs(x) for x in rows[v]] + [abs(bias[v])])
                if m != _ZERO:
                    scale[(l, v)] = 1 / m
                    rows[v] = [x / m for x in rows[v]]
                    bias[v] = bias[v] / m
                else:
                    scale[(l, v)] = _ONE
        Wn.append(rows)
        bn.append(bias)
    return scale, Wn, bn


def _compress(signatures: dict[tuple[int, int], tuple]) -> dict[tuple[int, int], int]:
    """Colours: the rank of each neuron's signature among the distinct signatures of its layer.

    By sorting and comparing neighbours, never by hashing: a hash of an ``fmpq`` goes through
    ``fractions.Fraction`` and dominated the canonical form on many samples.
    """
    out: dict[tuple[int, int], int] = {}
    by_layer: dict[int, list[tuple[tuple, int]]] = {}
    for (l, v), sig in signatures.items():
        by_layer.setdefault(l, []).append((sig, v))
    for l, items in by_layer.items():
        items.sort(key=lambda item: item[0])
        colour = -1
        for k, (sig, v) in enumerate(items):
            if k == 0 or sig != items[k - 1][0]:
                colour += 1
            out[(l, v)] = colour
    return out


def _neuron_ranks(net: Network, Wn, bn, colour: dict[tuple[int, int], int]) -> dict[tuple[int, int], int]:
    """Canonical ranks of the hidden neurons, refined from the colours of their pre-activation signatures."""
    L = net.L
    hidden = [(l, v) for l in net.hidden_layers() for v in range(net.widths[l])]

    def col(l: int, v: int) -> int:
        return v if l in (0, L) else colour[(l, v)]  # inputs and outputs are anchored

    for _ in range(len(hidden) + 1):
        sig = {}
        for l, v in hidden:
            incoming = tuple(sorted((Wn[l - 1][v][u], col(l - 1, u)) for u in range(net.widths[l - 1])))
            outgoing = tuple(sorted((Wn[l][k][v], col(l + 1, k)) for k in range(net.widths[l + 1])))
            sig[(l, v)] = (colour[(l, v)], bn[l - 1][v], incoming, outgoing)
        new = _compress(sig)
        stable = len({(h[0], c) for h, c in new.items()}) == len({(h[0], c) for h, c in colour.items()})
        colour = new  # refinement only splits classes (the old colour is part of the signature)
        if stable:
            break
    rank: dict[tuple[int, int], int] = {}
    for l in net.hidden_layers():
        for r, v in enumerate(sorted(range(net.widths[l]), key=lambda v: (colour[(l, v)], v))):
            rank[(l, v)] = r
    return rank


def canonical_form(net: Network, X: Sequence[Sequence[flint.fmpq]], Z: Sequence[flint.fmpq_mat]) -> Canonical:
    """The canonical presentation of ``(net, X)`` (module docstring).

    Parameters
    ----------
    net : Network
        Not in the degenerate set ``S`` (every hidden neuron has a nonzero outgoing weight).
    X : n rows of N_0 fmpq
    Z : list of fmpq_mat
        Pre-activations ``z_l(X)`` (:func:`exactident.model.activation.activation_state`).

    Returns
    -------
    Canonical

    Examples
    --------
    Two presentations of ``f = 3 relu(2x + 1) + relu(-x)``: neurons swapped and one rescaled.
    Both get the same normalised scales and the same canonical order.

    >>> from exactident.model.activation import activation_state
    >>> q, M = flint.fmpq, flint.fmpq_mat
    >>> X = [[q(0)], [q(-1, 2)], [q(1)], [q(0)]]
    >>> a = Network((1, 2, 1), [M([[2], [-1]]), M([[3, 1]])], [[q(1), q(0)], [q(0)]])
    >>> b = Network((1, 2, 1), [M([[-5], [4]]), M([[q(1, 5), q(3, 2)]])], [[q(0), q(2)], [q(0)]])
    >>> ca = canonical_form(a, X, activation_state(a, X).Z)
    >>> cb = canonical_form(b, X, activation_state(b, X).Z)
    >>> sorted(ca.rank.items()), sorted(cb.rank.items())
    ([((1, 0), 0), ((1, 1), 1)], [((1, 0), 1), ((1, 1), 0)])
    >>> ca.sample_class, [[str(v) for v in p] for p in ca.points]
    ([1, 0, 2, 1], [['-1/2'], ['0'], ['1']])
    """
    # Classes by sorting the points and comparing neighbours (no fmpq hash, see _compress).
    rows = [list(x) for x in X]
    by_point = sorted(range(len(rows)), key=lambda i: rows[i])
    sample_class = [0] * len(rows)
    distinct: list[list[flint.fmpq]] = []
    first: dict[int, int] = {}
    for k, i in enumerate(by_point):
        if k == 0 or rows[i] != rows[by_point[k - 1]]:
            first[len(distinct)] = i
            distinct.append(rows[i])
        sample_class[i] = len(distinct) - 1
    scale, Wn, bn = _normalised(net)
    colour: dict[tuple[int, int], int] = {}
    reps = [first[c] for c in range(len(distinct))]
    for l in net.hidden_layers():
        # scale[(l, v)] * z_l[i, v] on the distinct samples, as one exact FLINT product (Z diag(scale)): the same
        # rationals as entry by entry, without a Python multiplication per entry
        N = net.widths[l]
        D = flint.fmpq_mat(N, N)
        for v in range(N):
            D[v, v] = scale[(l, v)]
        Zl = (Z[l - 1] * D).table()
        # coloured layer by layer: one layer's signatures alive at a time (every pre-activation as an fmpq object)
        colour.update(_compress({(l, v): tuple(Zl[i][v] for i in reps) for v in range(N)}))
        del Zl
    rank = _neuron_ranks(net, Wn, bn, colour)
    L = net.L

    def out_rank(l: int, k: int) -> int:
        return k if l == L else rank[(l, k)]

    choice = {}
    for l in net.hidden_layers():
        for v in range(net.widths[l]):
            ks = [k for k in range(net.widths[l + 1]) if Wn[l][k][v] != _ZERO]
            if ks:
                choice[(l, v)] = min(ks, key=lambda k: (-abs(Wn[l][k][v]), out_rank(l + 1, k)))
    fixed = fixed_edges(net, choice)
    params = free_parameters(net, fixed)

    def a(l: int, v: int) -> flint.fmpq:
        return scale.get((l, v), _ONE)

    def key(p: Parameter) -> tuple[int, int, int, int]:
        if p.j is None:
            return p.l, 1, out_rank(p.l, p.i), 0
        return p.l, 0, out_rank(p.l, p.i), (p.j if p.l == 1 else rank[(p.l - 1, p.j)])

    col_scale = [a(p.l, p.i) / a(p.l - 1, p.j) if p.j is not None else a(p.l, p.i) for p in params]
    order = sorted(range(len(params)), key=lambda j: key(params[j]))
    return Canonical(sample_class, distinct, rank, scale, fixed, params, order, col_scale)


def canonical_nullspace(M: flint.fmpq_mat) -> list[list[flint.fmpq]]:
    """The reduced-echelon basis of ``ker M``, each vector primitive integer, positive at its free coordinate.

    It depends only on the row space of ``M`` and the column order (not on the
    rows' order, repetition or scaling), unlike an arbitrary kernel basis.

    Returns
    -------
    list of list of fmpq
        One vector (length ``ncols``) per free column, in column order.

    Examples
    --------
    >>> M = flint.fmpq_mat([[1, 2, 3], [2, 4, 6]])
    >>> canonical_nullspace(M) == canonical_nullspace(flint.fmpq_mat([[-4, -8, -12]]))
    True
    >>> [[str(v) for v in c] for c in canonical_nullspace(M)]
    [['-2', '1', '0'], ['-3', '0', '1']]
    """
    from exactident.linalg.exact import to_integer_rows

    n = M.ncols()
    if M.nrows() == 0:
        R, den, r = flint.fmpz_mat(0, n), flint.fmpz(1), 0
    else:
        R, den, r = to_integer_rows(M).rref()
    r = int(r)
    pivots = []
    for i in range(r):
        pivots.append(next(c for c in range(n) if R[i, c] != 0))
    free = [c for c in range(n) if c not in set(pivots)]
    out = []
    for f in free:
        v = [0] * n
        v[f] = int(den)
        for i, p in enumerate(pivots):
            v[p] = -int(R[i, f])
        if v[f] < 0:
            v = [-x for x in v]
        g = 0
        for x in v:
            g = gcd(g, x)
        out.append([flint.fmpq(x // g) for x in v])
    return out


def to_slice(net: Network, target: FixedEdges, dW: Sequence[Sequence[Sequence[flint.fmpq]]],
             db: Sequence[Sequence[flint.fmpq]]) -> list[flint.fmpq]:
    """Move a direction over all weights and biases onto the slice ``target`` by positive-rescaling directions.

    Rescaling hidden neuron ``u`` to first order adds ``lambda_u r_u`` with
    ``r_u`` = (+its incoming weights, +its bias, -its outgoing weights).  The
    path products (hence every ``F_s`` and ``Gamma(s)``) are invariant under
    rescaling, and a tie's pre-activation only scales with its own neuron
    (it is 0), so ``r_u`` is in every ``ker Gamma(s)`` over all parameters
    and ``g_t . r_u = 0``: subtracting rescalings keeps kernel membership and
    every tie derivative.  The ``lambda_u`` are chosen, from the last hidden
    layer down, so that the result vanishes on every fixed edge of ``target``.

    Returns
    -------
    list of fmpq
        The direction over ``free_parameters(net, target)``.
    """
    L = net.L
    lam: dict[tuple[int, int], flint.fmpq] = {}
    for l in range(L - 1, 0, -1):
        W_out = net.W[l]
        for v in range(net.widths[l]):
            k = target.s_max[(l, v)]
            above = lam.get((l + 1, k), _ZERO)
            lam[(l, v)] = above - dW[l][k][v] / W_out[k, v]
    out = []
    for p in free_parameters(net, target):
        own = lam.get((p.l, p.i), _ZERO)
        if p.j is None:
            out.append(db[p.l - 1][p.i] - own * net.b[p.l - 1][p.i])
        else:
            w = net.W[p.l - 1][p.i, p.j]
            below = lam.get((p.l - 1, p.j), _ZERO)
            out.append(dW[p.l - 1][p.i][p.j] - own * w + below * w)
    return out


def full_direction(net: Network, canon: Canonical, delta: Sequence[flint.fmpq]) -> tuple[list, list]:
    """A direction over ``canon.params`` as ``(dW, db)`` over all weights and biases (nested lists)."""
    dW = [[[flint.fmpq(0)] * net.widths[l - 1] for _ in range(net.widths[l])] for l in range(1, net.L + 1)]
    db = [[flint.fmpq(0)] * net.widths[l] for l in range(1, net.L + 1)]
    for p, d in zip(canon.params, delta):
        if p.j is not None:
            dW[p.l - 1][p.i][p.j] = d
        else:
            db[p.l - 1][p.i] = d
    return dW, db


def kernel_rows(K: list[list[flint.fmpq]], rows: Sequence[Sequence[flint.fmpq]]) -> list[list[flint.fmpq]]:
    """``row . K`` for each row (kernel coordinates), exactly."""
    zero = flint.fmpq(0)
    return [[sum((a * b for a, b in zip(row, col) if a != zero), zero) for col in K] for row in rows]


def combine(K: list[list[flint.fmpq]], c: Sequence[flint.fmpq]) -> list[flint.fmpq]:
    """``K c`` for kernel basis vectors ``K`` (a list of columns)."""
    zero = flint.fmpq(0)
    n = len(K[0]) if K else 0
    return [sum((col[r] * x for col, x in zip(K, c) if x != zero), zero) for r in range(n)]
