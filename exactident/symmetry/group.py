"""The group acting on a network's parameters: rescalings ``H`` and the permutations of interchangeable blocks.

For any network in the constrained form ``W = T theta + c`` (a plain ReLU MLP is ``T = I``, ``c = 0``,
slopes 0: :meth:`~exactident.model.network.Network.is_plain`), docs/symmetries.md:

- **a plain ReLU MLP**: per hidden layer a permutation and positive rational scales of its neurons
  (:func:`transform`, docs/symmetries.md, "The orbit");
- **rescalings** ``H`` (:func:`exactident.model.symmetry.log_scales`): generator ``g`` with scale
  ``mu_g > 0`` multiplies hidden unit ``u`` by ``mu_g^{e_u}`` and ``theta_j`` by ``mu_g^{c_j[g]}``
  (:func:`scale_classes`, :func:`apply_scales`, :func:`unit_scales`);
- **permutations of blocks**: a *block* is the set of units of a generator with every exponent ``1``
  (a dense unit alone; a convolution channel with all its positions and its pooling units).  Two
  blocks are *interchangeable* when exchanging their units (in order: the ``k``-th unit of one with
  the ``k``-th of the other, layer by layer) maps the family to itself: every fixed entry (weight,
  bias, slope) goes to a fixed entry of the same value and the free parameters are relabelled by a
  bijection ``sigma`` (:func:`block_permutation`, checked exactly on the index arrays).  Such an
  exchange keeps the function (units are relabelled, inputs and outputs are not), so it is an
  element of the group.  Interchangeability is an equivalence relation (a composition of exchanges
  mapping the family to itself maps it to itself): :func:`interchangeable_blocks` lists its classes.

Called by :mod:`exactident.symmetry.canonical`, :mod:`exactident.symmetry.alignment`, :mod:`exactident.symmetry.equiv`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import flint
import numpy as np

from exactident.errors import UnsupportedCaseError
from exactident.io.rationals import format_fmpq
from exactident.model.network import Network
from exactident.model.symmetry import log_scales

__all__ = ["FamilyCodes", "apply_scales", "block_key", "block_permutation", "complete_for",
           "interchangeable_blocks", "normalise", "permute_theta", "scale_classes", "structure_key", "transform",
           "unit_scales"]

_ZERO = flint.fmpq(0)
_ONE = flint.fmpq(1)

#: A class of interchangeable blocks: ``(layer of the first unit, [block, ...])``, each block a list of ``(l, v)``.
_Blocks = tuple[int, list[list[tuple[int, int]]]]


def structure_key(cn: Network) -> str:
    """A digest of everything but theta: widths, index arrays, fixed values, fixed slopes (equal: one family)."""
    h = hashlib.sha256(repr(tuple(cn.widths)).encode())
    for l in range(1, cn.L + 1):
        WI, bI = cn.W_index[l - 1], cn.b_index[l - 1]
        h.update(WI.tobytes() + bI.tobytes())
        W = cn.W[l - 1]
        rows, cols = (WI < 0).nonzero()
        h.update(",".join(format_fmpq(W[int(i), int(j)]) for i, j in zip(rows, cols)).encode())
        h.update(",".join(format_fmpq(cn.b[l - 1][int(i)]) for i in (bI < 0).nonzero()[0]).encode())
        if l < cn.L:
            sI = cn.slope_index[l - 1]
            h.update(sI.tobytes())
            h.update(",".join(format_fmpq(cn.negative_slope[l - 1][int(i)]) for i in (sI < 0).nonzero()[0]).encode())
    return h.hexdigest()[:16]


def scale_classes(cn: Network) -> tuple[list[tuple[int, int]], list[dict[int, int]], list[dict[int, int]]]:
    """``(units, generators, exponents)``: the generators of ``H`` and each parameter's exponents.

    ``generators[g]`` maps a unit row ``u`` to the integer ``e``: the generator with scale ``mu``
    multiplies unit ``u`` by ``mu^e`` (``e = 1`` on a class of units sharing one scale, the usual
    case); ``exponents[j] = {g: c_j[g]}``, ``theta_j -> theta_j prod_g mu_g^{c_j[g]}``.
    """
    units, A, factor = log_scales(cn)
    generators: list[dict[int, int]] = [{} for _ in range(A.ncols())]
    for u in range(len(units)):
        for g in range(A.ncols()):
            if A[u, g] != 0:
                generators[g][u] = int(A[u, g].p)  # integer entries (log_scales)
    exponents: list[dict[int, int]] = []
    for j in range(cn.n_params):
        e: dict[int, int] = {}
        for u, c in factor.get(j, {}).items():
            for g in range(A.ncols()):
                if c and A[u, g] != 0:
                    e[g] = e.get(g, 0) + c * int(A[u, g].p)
        exponents.append({g: c for g, c in e.items() if c})
    return units, generators, exponents


def apply_scales(theta: Sequence[flint.fmpq], exponents: Sequence[dict[int, int]],
                 mu: Sequence[flint.fmpq]) -> list[flint.fmpq]:
    """``theta_j prod_g mu_g^{c_j[g]}``: the element of ``H`` with class scales ``mu`` applied to theta (exact)."""
    out = []
    for t, e in zip(theta, exponents):
        for g, c in e.items():
            t = t * mu[g] ** c
        out.append(t)
    return out


def unit_scales(n_units: int, generators: Sequence[dict[int, int]], mu: Sequence[flint.fmpq]) -> list[flint.fmpq]:
    """Per unit row, ``prod_g mu_g^{e_u}``: the scale the element of ``H`` with generator scales ``mu`` gives it."""
    scale = [_ONE] * n_units
    for g, gen in enumerate(generators):
        for u, e in gen.items():
            scale[u] *= mu[g] ** e
    return scale


class FamilyCodes:
    """Per layer, the index arrays with each fixed value coded ``-1 - id(value)`` (free entries keep ``j >= 0``)."""

    def __init__(self, cn: Network):
        ids: dict[str, int] = {"0": 0}  # fixed 0 is code -1 (most fixed entries: no lookup for them)

        def code(index: np.ndarray, values: Sequence[flint.fmpq]) -> np.ndarray:
            out = index.astype(np.int64).ravel().copy()
            for p in np.flatnonzero(out < 0).tolist():
                v = values[p]
                out[p] = -1 - (ids.setdefault(str(v), len(ids)) if v else 0)
            return out.reshape(index.shape)

        self.W = [code(cn.W_index[l], cn.W[l].entries()) for l in range(cn.L)]
        self.b = [code(cn.b_index[l], cn.b[l]) for l in range(cn.L)]
        self.a = [code(cn.slope_index[l], cn.negative_slope[l]) for l in range(cn.L - 1)]
        self.n_params = cn.n_params
        self.widths = cn.widths


def block_permutation(codes: FamilyCodes, pi: Sequence[np.ndarray]) -> np.ndarray | None:
    """The relabelling ``sigma`` of the free parameters under the unit permutation ``pi``, or None.

    ``pi[l][a]`` is the new position of unit ``a`` of layer ``l`` (the identity on inputs and outputs).
    The network with unit ``a`` moved to ``pi(a)`` is in the family iff the entry ``(pi a, pi c)`` holds
    the same fixed value as ``(a, c)``, or the free parameter ``sigma(j)`` where ``(a, c)`` holds
    ``theta_j``, for one bijection ``sigma`` (also for biases and slopes).
    """
    src, dst = [], []
    pairs = [(codes.W[l], codes.W[l][np.ix_(pi[l + 1], pi[l])]) for l in range(len(codes.W))]
    pairs += [(codes.b[l], codes.b[l][pi[l + 1]]) for l in range(len(codes.b))]
    pairs += [(codes.a[l], codes.a[l][pi[l + 1]]) for l in range(len(codes.a))]
    # (a, c) -> (pi a, pi c): the value at (a, c) must appear at (pi a, pi c), i.e. the code C[a, c] maps to
    # C[pi a, pi c]; C[np.ix_(pi, pi)][a, c] is exactly C[pi a, pi c]
    for C, D in pairs:
        fixed = (C < 0) | (D < 0)
        if (C[fixed] != D[fixed]).any():
            return None
        src.append(C[~fixed].ravel())
        dst.append(D[~fixed].ravel())
    s, d = np.concatenate(src), np.concatenate(dst)
    pairs_u = np.unique(np.stack([s, d], axis=1), axis=0) if len(s) else np.zeros((0, 2), np.int64)
    if len(np.unique(pairs_u[:, 0])) != len(pairs_u) or len(np.unique(pairs_u[:, 1])) != len(pairs_u):
        return None
    sigma = np.arange(codes.n_params, dtype=np.int64)
    sigma[pairs_u[:, 0]] = pairs_u[:, 1]
    return sigma


def _moves(widths: Sequence[int], mapping: dict[tuple[int, int], tuple[int, int]]) -> list[np.ndarray]:
    pi = [np.arange(n, dtype=np.int64) for n in widths]
    for (l, a), (_l, b) in mapping.items():
        pi[l][a] = b
    return pi


def interchangeable_blocks(cn: Network, units: Sequence[tuple[int, int]],
                           generators: Sequence[dict[int, int]], codes: FamilyCodes | None = None) -> list[_Blocks]:
    """The classes (of at least two blocks) of interchangeable blocks (module docstring), by their first unit.

    Examples
    --------
    Two ReLU units of a plain ``1-2-1`` MLP are interchangeable blocks of one unit each:

    >>> from exactident.model.network import Network
    >>> cn = Network((1, 2, 1), [[[1], [2]], [[3, 4]]], [[0, 1], [5]])
    >>> u, gens, _ = scale_classes(cn)
    >>> interchangeable_blocks(cn, u, gens)
    [(1, [[(1, 0)], [(1, 1)]])]
    """
    codes = codes or FamilyCodes(cn)
    owner: dict[int, int] = {}
    for gen in generators:
        for u in gen:
            owner[u] = owner.get(u, 0) + 1
    blocks = [sorted(units[u] for u in gen) for gen in generators
              if gen and all(e == 1 and owner[u] == 1 for u, e in gen.items())]
    blocks.sort()
    classes: list[list[list[tuple[int, int]]]] = []
    for blk in blocks:
        shape = [l for l, _v in blk]
        for cls in classes:
            ref = cls[0]
            if [l for l, _v in ref] != shape:
                continue
            swap = dict(zip(blk, ref)) | dict(zip(ref, blk))
            if block_permutation(codes, _moves(cn.widths, swap)) is not None:
                cls.append(blk)
                break
        else:
            classes.append([blk])
    return [(cls[0][0][0], cls) for cls in classes if len(cls) > 1]


def block_key(cn: Network, theta: Sequence[flint.fmpq], block: Sequence[tuple[int, int]],
              outgoing: bool = True) -> tuple[Any, ...]:
    """The sort key of a block: its free parameters' values (exact), each once, in the order met scanning its
    units' incoming weights (by column), bias and slope, then (``outgoing``) their outgoing weights (by row).

    For a dense unit this is (incoming weights, bias, slope, outgoing weights); for a convolution channel
    its kernel, bias, then the next layer's weights reading it.
    """
    seen: set[int] = set()
    out = []

    def take(idx: np.ndarray) -> None:
        for j in idx[idx >= 0].tolist():
            if j not in seen:
                seen.add(j)
                out.append(theta[j])

    for l, v in block:
        take(cn.W_index[l - 1][v])
        take(cn.b_index[l - 1][v:v + 1])
        if l < cn.L:
            take(cn.slope_index[l - 1][v:v + 1])
    for l, v in block:
        if outgoing and l < cn.L:
            take(cn.W_index[l][:, v])
    return tuple(out)


def permute_theta(cn: Network, theta: Sequence[flint.fmpq], blocks: Sequence[Sequence[tuple[int, int]]],
                  order: Sequence[int], codes: FamilyCodes | None = None) -> tuple[list[flint.fmpq], list[np.ndarray]]:
    """Block ``blocks[i]`` takes the values of block ``blocks[order[i]]``: a group element (module docstring).

    Returns ``(theta', pi)``: the parameters after the move and the unit permutation (``pi[l][a]``: where
    unit ``a`` of layer ``l`` went).
    """
    mapping: dict[tuple[int, int], tuple[int, int]] = {}
    for dst, src in enumerate(order):
        mapping.update(zip(blocks[src], blocks[dst]))
    pi = _moves(cn.widths, mapping)
    sigma = block_permutation(codes or FamilyCodes(cn), pi)
    if sigma is None:  # never: the blocks' exchanges were checked (interchangeable_blocks)
        from exactident.errors import InvariantViolation

        raise InvariantViolation("a permutation of interchangeable blocks does not map the family to itself")
    out = list(theta)
    for j, k in enumerate(sigma.tolist()):
        out[k] = theta[j]
    return out, pi


def transform(net: Network, perm: Sequence[Sequence[int]], scale: Sequence[Sequence[flint.fmpq]]) -> Network:
    """Apply the group element ``(sigma, lambda)`` of docs/symmetries.md, "The orbit", to ``net``.

    Parameters
    ----------
    net : Network
    perm : per hidden layer, a permutation (``perm[l-1][i]`` = original index at position ``i``)
    scale : per hidden layer, positive rationals (indexed by new position)

    Returns
    -------
    Network
        The transformed parameters; the same function as ``net``.

    Raises
    ------
    UnsupportedCaseError
        A scale that is not positive, or a permutation of the wrong size.

    Examples
    --------
    >>> net = Network((1, 2, 1), [[[1], [2]], [[3, 4]]], [[0, 1], [5]])
    >>> t = transform(net, [[1, 0]], [[flint.fmpq(1, 2), flint.fmpq(2)]])
    >>> t.W[0].entries(), t.b[0], t.W[1].entries()
    ([1, 2], [1/2, 0], [8, 3/2])
    """
    widths = net.widths
    L = net.L
    P = [list(range(widths[0]))] + [list(p) for p in perm] + [list(range(widths[-1]))]
    S = [[_ONE] * widths[0]] + [list(s) for s in scale] + [[_ONE] * widths[-1]]
    for l in range(1, L):
        if sorted(P[l]) != list(range(widths[l])) or len(S[l]) != widths[l] or any(s <= _ZERO for s in S[l]):
            raise UnsupportedCaseError(f"layer {l}: not a permutation with positive scales")
    W, b = [], []
    for l in range(1, L + 1):
        M = net.W[l - 1]
        W.append(flint.fmpq_mat([[S[l][i] * M[P[l][i], P[l - 1][j]] / S[l - 1][j] for j in range(widths[l - 1])]
                                 for i in range(widths[l])]) if widths[l - 1] else flint.fmpq_mat(widths[l], 0))
        b.append([S[l][i] * net.b[l - 1][P[l][i]] for i in range(widths[l])])
    return Network(widths, W, b)


def normalise(k: int, theta: list[flint.fmpq], generators: Sequence[dict[int, int]],
               exponents: Sequence[dict[int, int]]) -> tuple[list[flint.fmpq], list[flint.fmpq], list[int | None],
                                                             set[int]]:
    """Normalise theta by ``H``: ``(theta, mu, pivots, generators left without a pivot)``.

    Repeatedly, the first generator ``g`` (by its first unit) having a *pivot* -- the first parameter ``j``
    with ``theta_j != 0``, ``c_j[g] = +-1`` and ``c_j[g'] = 0`` for every generator not yet normalised --
    gets ``mu_g = |theta_j|^{-c_j[g]}``, so ``|theta_j| = 1`` (exact, Q; docs/symmetries.md, "Layer graphs").
    """
    n = len(generators)
    mu = [_ONE] * n
    pivots: list[int | None] = [None] * n
    left = set(range(n))
    progress = True
    while progress and left:
        progress = False
        for g in sorted(left, key=lambda g: min(generators[g], default=0)):
            others = left - {g}
            j = next((j for j in range(k) if theta[j] != _ZERO and exponents[j].get(g) in (1, -1)
                      and not any(h in exponents[j] for h in others)), None)
            if j is None:
                continue
            m = abs(theta[j]) ** (-exponents[j][g])
            step = [_ONE] * n
            step[g] = m
            theta = apply_scales(theta, exponents, step)
            mu[g] *= m
            pivots[g] = j
            left.discard(g)
            progress = True
            break
    return theta, mu, pivots, left


def complete_for(theta: Sequence[flint.fmpq], exponents: Sequence[dict[int, int]], left: set[int]) -> bool:
    """No generator left without a pivot moves a nonzero parameter."""
    return not any(theta[j] != _ZERO and g in exponents[j] for g in left for j in range(len(theta)))
