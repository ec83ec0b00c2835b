"""The exact kernel of ``Gamma`` (Prop. 10), found mod p and checked over Q, and a readable basis of it.

Algorithm: one random prime ``p`` gives the pivot columns ``P`` of ``Gamma mod p``
and, among them, ``r = |P|`` independent rows ``R``
(:func:`exactident.linalg.modular.rref_kernel_mod_p`).  The minor ``A =
Gamma[R, P]`` is nonsingular mod p, so nonsingular over Q: ``rank Gamma >= r``.
Solving ``A Y = -Gamma[R, F]`` exactly (FLINT, ``F`` the other columns) gives
``K`` with ``K[P] = Y`` and ``K[F] = I``; it is accepted only after the exact
product ``Gamma K`` (all rows, integers) is zero.  Then ``rank Gamma <= dim -
|F| = r``: the rank is exact and ``K`` is a basis of the kernel.  An unlucky
prime (rank mod p too small) makes the check fail and another prime is tried;
after a few, FLINT's fraction-free nullspace is the fallback (checked the same
way).

The columns of ``K`` (the reduced echelon kernel basis, scaled to primitive
integer vectors) are then LLL-reduced (FLINT ``fmpz_mat.lll``) and the reduced
basis is kept when its largest entry is smaller: LLL is unimodular, so the
vectors span the same space.  Names come from
:func:`exactident.model.fixed_edges.free_parameters`.

Called by :mod:`exactident.explain.core` and :mod:`exactident.explain.design`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Context, Decimal
from math import gcd, lcm

import flint
import numpy as np

from exactident.errors import InvariantViolation
from exactident.linalg import exact
from exactident.linalg.modular import random_primes, rref_kernel_mod_p
from exactident.model.fixed_edges import FixedEdges, Parameter
from exactident.model.gamma import gamma_exact
from exactident.model.integer_forward import data_denominator, integer_forward
from exactident.model.network import Network

__all__ = [
    "MAX_LLL_BITS",
    "GammaKernel",
    "combination_text",
    "gamma_kernel",
    "integer_kernel",
    "layers_of",
    "readable_basis",
    "structured_basis",
]

#: LLL is skipped above this many bits in the largest entry times the number of vectors (time).
MAX_LLL_BITS = 2_000_000


@dataclass
class GammaKernel:
    """An exact basis of ``ker Gamma`` and the exact rank.

    Attributes
    ----------
    rank : int
        ``rank Gamma`` over Q (exact: a minor nonsingular mod ``prime`` and ``Gamma K = 0``).
    basis : list of list of int
        ``dim - rank`` integer vectors of length ``dim`` (coordinates of ``tau``), spanning the
        kernel over Q; primitive, LLL-reduced when that shrinks them.
    prime : int or None
        The prime of the nonsingular minor (None: found by the exact fallback).
    """

    rank: int
    basis: list[list[int]]
    prime: int | None = None

    def moved(self, dim: int) -> list[bool]:
        """Per coordinate ``j``: some kernel vector has a nonzero ``j``-th entry (``e_j`` not in the row space)."""
        out = [False] * dim
        for vec in self.basis:
            for j, v in enumerate(vec):
                if v:
                    out[j] = True
        return out


def _primitive(vec: Sequence[int]) -> list[int]:
    g = 0
    for v in vec:
        g = gcd(g, int(v))
    vec = [int(v) // g for v in vec] if g > 1 else [int(v) for v in vec]
    first = next((v for v in vec if v), 0)
    return [-v for v in vec] if first < 0 else vec


def _max_bits(basis: Sequence[Sequence[int]]) -> int:
    return max((abs(v).bit_length() for vec in basis for v in vec), default=0)


def readable_basis(basis: Sequence[Sequence[int]]) -> list[list[int]]:
    """Primitive integer vectors spanning the same space, LLL-reduced when that shrinks the entries.

    Parameters
    ----------
    basis : list of list of int
        Linearly independent vectors (rows), e.g. a scaled reduced-echelon kernel basis.

    Returns
    -------
    list of list of int
        As many vectors, same span over Q; the first nonzero entry of each is positive;
        sorted by their first nonzero coordinate, then by size.

    Examples
    --------
    >>> readable_basis([[5, 0, 7], [12, 1, 17]])  # LLL shrinks them
    [[1, -2, 1], [2, 1, 3]]
    >>> readable_basis([[3, 0, -7], [0, 6, -14]])  # made primitive; LLL would not shrink them
    [[3, 0, -7], [0, 3, -7]]
    """
    prim = [_primitive(v) for v in basis]
    if not prim:
        return []
    best = prim
    if len(prim) * max(_max_bits(prim), 1) <= MAX_LLL_BITS and len(prim[0]) > 0:
        reduced = [_primitive([int(x) for x in row]) for row in flint.fmpz_mat(prim).lll().tolist()]
        if _max_bits(reduced) < _max_bits(prim) or (
                _max_bits(reduced) == _max_bits(prim) and _support(reduced) < _support(prim)):
            best = reduced
    return sorted(best, key=lambda v: (next(j for j, x in enumerate(v) if x), sum(1 for x in v if x),
                                       _max_bits([v])))


def _support(basis: Sequence[Sequence[int]]) -> int:
    return sum(1 for vec in basis for v in vec if v)


def integer_kernel(G: flint.fmpz_mat, G_mod_p, *, avoid: int, rng: random.Random,
                   tries: int = 3) -> tuple[int, list[list[int]], int | None]:
    """``(rank, basis, prime)`` of an integer matrix, its kernel basis checked exactly (module docstring).

    Parameters
    ----------
    G : fmpz_mat ``(m, n)``
        The matrix (a rational matrix scaled row by row: same rank and kernel).
    G_mod_p : callable p -> int64 array ``(m, n)``
        ``G`` (or any row scaling of it by units mod p) reduced mod p.
    avoid : int
        Primes dividing it are not used (denominators of the data).

    Returns
    -------
    (int, list of list of int, int or None)
        Rank over Q, the reduced-echelon kernel basis as primitive integer vectors (not yet
        LLL-reduced), and the prime of the nonsingular minor (None after the exact fallback).

    Raises
    ------
    InvariantViolation
        If even the exact nullspace fails the check ``G K = 0`` (a bug).

    Examples
    --------
    >>> G = flint.fmpz_mat([[1, 2, 3], [2, 4, 6], [0, 1, 1]])
    >>> integer_kernel(G, lambda p: np.array(G.tolist(), dtype=np.int64) % p, avoid=1, rng=random.Random(0))
    (2, [[1, 1, -1]], ...)
    """
    m, n = G.nrows(), G.ncols()
    if m == 0 or n == 0:
        return 0, [[int(i == j) for i in range(n)] for j in range(n)], None
    used: list[int] = []
    for _ in range(tries):
        p = random_primes(1, avoid, rng, exclude=used)[0]
        used.append(p)
        image = np.ascontiguousarray(G_mod_p(p))
        P, F, _ = rref_kernel_mod_p(image, p)
        if not F:
            return n, [], p
        if not P:
            K = [[int(i == f) for i in range(n)] for f in F]
        else:
            R, _, _ = rref_kernel_mod_p(np.ascontiguousarray(image[:, P].T), p)
            rows = G.tolist()
            A = flint.fmpz_mat([[rows[i][j] for j in P] for i in R])
            B = flint.fmpz_mat([[-rows[i][j] for j in F] for i in R])
            Y = A.solve(B).table()  # A is nonsingular mod p, so over Q
            K = []
            for b, f in enumerate(F):
                d = lcm(*(int(Y[a][b].q) for a in range(len(P))))
                col = [0] * n
                col[f] = d
                for a, j in enumerate(P):
                    col[j] = int(Y[a][b].p) * (d // int(Y[a][b].q))
                K.append(_primitive(col))
        if _is_kernel(G, K):
            return n - len(K), K, p
    Kq = exact.nullspace(G)
    K = [_primitive(_scaled([Kq[i, c] for i in range(n)])) for c in range(Kq.ncols())]
    if not _is_kernel(G, K):
        raise InvariantViolation("FLINT's exact nullspace is not a kernel")
    return n - len(K), K, None


def _scaled(col: Sequence[flint.fmpq]) -> list[int]:
    d = lcm(1, *(int(v.q) for v in col))
    return [int(v.p) * (d // int(v.q)) for v in col]


def _is_kernel(G: flint.fmpz_mat, K: Sequence[Sequence[int]]) -> bool:
    if not K:
        return True
    Km = flint.fmpz_mat([list(col) for col in K]).transpose()
    return all(v == 0 for v in (G * Km).entries())


def structured_basis(G: flint.fmpz_mat, K: Sequence[Sequence[int]], groups: Sequence[Sequence[int]], *,
                     avoid: int, rng: random.Random) -> list[list[int]]:
    """A basis of ``span K`` (``K`` a kernel basis of ``G``) whose first vectors live on the column ``groups``.

    For each group ``C`` in order, the exact kernel of ``G[:, C]`` (vectors supported on ``C``,
    extended by zeros: kernel vectors of ``G``) is made readable (:func:`readable_basis`) and
    its vectors independent of those already taken are kept; ``K`` completes the basis.  With
    the incoming parameters of each neuron, then each layer, as groups, the first vectors are
    the directions of one neuron's hyperplane, then of one layer: exact straight lines off the
    boundary (:func:`exactident.explain.parameters.constant_line`).

    Independence is tested mod a prime (independent mod p implies independent over Q); if
    that leaves the basis short, the last pass tests it exactly.

    Examples
    --------
    >>> G = flint.fmpz_mat([[1, 1, 0, 0], [0, 0, 1, 1]])
    >>> structured_basis(G, [[1, -1, 1, -1], [0, 0, 1, -1]], [[0, 1]], avoid=1, rng=random.Random(0))
    [[1, -1, 0, 0], [0, 0, 1, -1]]
    """
    from exactident.linalg.modular import rank_mod_p

    target = len(K)
    if not target:
        return []
    n = G.ncols()
    rows = G.tolist()
    moved = {j for v in K for j, x in enumerate(v) if x}
    p = random_primes(1, avoid, rng)[0]
    acc: list[list[int]] = []

    def take(vectors: Sequence[Sequence[int]], exactly: bool = False) -> None:
        for v in readable_basis(vectors):
            if len(acc) == target:
                return
            trial = acc + [v]
            if exactly:
                ok = flint.fmpz_mat(trial).rank() == len(trial)
            else:
                ok = rank_mod_p(np.array([[x % p for x in w] for w in trial], dtype=np.int64), p) == len(trial)
            if ok:
                acc.append(v)

    for cols in groups:
        cols = [c for c in cols if c in moved]
        if len(acc) == target:
            break
        if not cols:
            continue
        sub = flint.fmpz_mat([[row[c] for c in cols] for row in rows]) if rows else flint.fmpz_mat(0, len(cols))
        _, Ks, _ = integer_kernel(sub, lambda q, cols=cols: np.array([[row[c] % q for c in cols] for row in rows],
                                                                      dtype=np.int64).reshape(len(rows), len(cols)),
                                  avoid=avoid, rng=rng)
        ext = []
        for v in Ks:
            full = [0] * n
            for c, x in zip(cols, v):
                full[c] = x
            ext.append(full)
        take(ext)
    take(K)
    if len(acc) < target:
        take(K, exactly=True)
    if len(acc) != target:
        raise InvariantViolation(f"structured kernel basis has {len(acc)} vectors, the kernel {target}")
    return acc


def gamma_kernel(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                 fixed: FixedEdges, *, rng: random.Random | None = None) -> GammaKernel:
    """Exact ``rank Gamma(X, theta)`` and a readable basis of ``ker Gamma`` for an activation pattern.

    The basis first holds the directions that move one neuron's incoming parameters only,
    then one layer's, then the rest (:func:`structured_basis`).

    Parameters
    ----------
    net : Network
    X : n rows of N_0 fmpq
    pattern : list of bool arrays ``(n, N_l)``
        The activation pattern (a tie resolution on the boundary).
    fixed : FixedEdges
    rng : random.Random, optional
        Source of the primes (they change the time, never the result's span).

    Returns
    -------
    GammaKernel

    Examples
    --------
    ``f = 3 relu(2x + 1)`` at ``0, 1``: ``Gamma`` rows ``(0, 3, 1)``, ``(3, 3, 1)``; the kernel is
    spanned by ``(0, 1, -3)`` (``b_1[0] - 3 b_2[0]``).

    >>> from exactident.model.activation import activation_state
    >>> from exactident.model.fixed_edges import fixed_edges
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])], [[1], [0]])
    >>> X = [[flint.fmpq(0)], [flint.fmpq(1)]]
    >>> k = gamma_kernel(net, X, activation_state(net, X).pattern, fixed_edges(net), rng=random.Random(0))
    >>> k.rank, k.basis
    (2, [[0, 1, -3]])
    """
    from exactident.model.fixed_edges import free_parameters

    rng = rng or random.Random(0)
    avoid = data_denominator(net, X)
    G = exact.to_integer_rows(gamma_exact(net, X, integer_forward(net, X).Z(), pattern, fixed))

    def mod_p(p: int) -> np.ndarray:
        from exactident.model.gamma_modular import gamma_mod_p

        return gamma_mod_p(net, X, pattern, fixed, p, avoid)

    rank, K, prime = integer_kernel(G, mod_p, avoid=avoid, rng=rng)
    params = free_parameters(net, fixed)
    neuron: dict[tuple[int, int], list[int]] = {}
    layer: dict[int, list[int]] = {}
    for j, prm in enumerate(params):
        neuron.setdefault((prm.l, prm.i), []).append(j)
        layer.setdefault(prm.l, []).append(j)
    groups = [neuron[k] for k in sorted(neuron)] + [layer[k] for k in sorted(layer)]
    return GammaKernel(rank, structured_basis(G, K, groups, avoid=avoid, rng=rng), prime)


def layers_of(vec: Sequence[int], params: Sequence[Parameter]) -> set[int]:
    """The layers ``l`` whose parameters ``W_l``, ``b_l`` a direction moves."""
    return {params[j].l for j, v in enumerate(vec) if v}


def _coefficient(v: int, first: bool, scale: int | None) -> str:
    """``"- 2 "``-style coefficient text (exact integer, or ``|v| / scale`` to 4 digits by decimal arithmetic)."""
    sign = "-" if v < 0 else "+"
    mag = abs(v)
    if scale is None or mag == scale:
        text = "" if mag == 1 or scale is not None else f"{mag} "
    else:
        text = format(Context(prec=4).divide(Decimal(mag), Decimal(scale)), "g") + " "
    if first:
        return ("-" if v < 0 else "") + text
    return f"{sign} {text}"


def combination_text(vec: Sequence[int], names: Sequence[str], max_terms: int = 6, small: int = 10**6) -> str:
    """A kernel vector as a named combination, e.g. ``2 W_1[0,0] - b_1[0]``.

    Integer coefficients are printed exactly when every one is below ``small`` in absolute
    value; otherwise they are divided by the largest and shown to 4 digits after ``~``
    (display only: the exact integers are in the JSON).  At most ``max_terms`` terms (the
    largest, in parameter order), then ``(+N more)``.

    Examples
    --------
    >>> combination_text([2, 0, -1], ["W_1[0,0]", "W_1[0,1]", "b_1[0]"])
    '2 W_1[0,0] - b_1[0]'
    >>> combination_text([10**30, -3 * 10**29, 1], ["a", "b", "c"], max_terms=2)
    '~ a - 0.3 b (+1 more)'
    """
    terms = [(j, int(v)) for j, v in enumerate(vec) if v]
    if not terms:
        return "0"
    big = max(abs(v) for _, v in terms)
    scale = None if big < small else big
    shown = terms if len(terms) <= max_terms else sorted(terms, key=lambda t: -abs(t[1]))[:max_terms]
    if len(terms) > max_terms:
        shown.sort()
    parts = [_coefficient(v, k == 0, scale) + names[j] for k, (j, v) in enumerate(shown)]
    text = " ".join(parts)
    if len(terms) > max_terms:
        text += f" (+{len(terms) - max_terms} more)"
    return ("~ " if scale is not None else "") + text
