"""The symmetries of a layer graph the verifier recomputes: ``S_H``, ``rank T``, ``dim_free``, the softmax bound.

- :func:`rescaling_symmetry`: the rescalings ``s`` (one log-scale per hidden unit, 0 on
  inputs, outputs and bias sources) that map the family ``W = T theta + c`` to itself for
  every ``theta`` (``s_out - s_in`` equal over each tie group, 0 across a fixed nonzero
  weight, ``s_v = 0`` under a fixed nonzero bias, 0 across a weight tied to a slope),
  their orbit tangent ``S_H`` at ``theta`` exactly over Q, widened by the affine group of linear
  units (:mod:`exactident.verify.linear_symmetry`), ``rank T`` and ``dim_free = rank T - dim S_H``;
- :func:`softmax_rank_bound`: ``k - dim(S_H + shifts)`` (shifts of every logit by one amount);
- :func:`gauge_spans`, :func:`into_chart`: a gauge (parameters held fixed) meeting ``S_H`` in 0, and a
  direction taken into its chart by subtracting its part in ``S_H``.

A plain ReLU MLP's ``dim`` is the same count for its family (every weight and bias free, no
linear unit): ``dim_free = n_params - (hidden units)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import flint
import numpy as np

from exactident.model.network import Network

__all__ = ["Symmetry", "gauge_spans", "into_chart", "rescaling_symmetry", "softmax_rank_bound"]


@dataclass
class Symmetry:
    """The rescaling symmetry of a constrained family at ``theta`` (module docstring).

    Attributes
    ----------
    rank_t : int
        ``rank T``: the number of distinct free parameters (each feeds disjoint 0/1 entries).
    dim_h : int
        Dimension of the group ``H`` of admissible log-scales.
    symmetry_dim : int
        ``dim S_H`` (the orbit tangent at ``theta``).
    dim_free : int
        ``rank T - dim S_H``.
    basis : fmpq_mat
        ``n_params x symmetry_dim``: columns spanning ``S_H`` (in Q).
    """

    rank_t: int
    dim_h: int
    symmetry_dim: int
    dim_free: int
    basis: flint.fmpq_mat


def rescaling_symmetry(cn: Network) -> Symmetry:
    """``H``, ``S_H`` and ``dim_free`` of ``cn`` at its current ``theta`` (exact over Q)."""
    L, k = cn.L, cn.n_params
    ids: dict[tuple[int, int], int] = {}
    for l in range(1, L):
        for v in range(cn.widths[l]):
            ids[(l, v)] = len(ids)
    ground = len(ids)
    parent = list(range(ground + 1))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def node(l: int, v: int) -> int:
        return ids.get((l, v), ground)

    groups: dict[int, list[tuple[int, int]]] = {j: [] for j in range(k)}
    pinned: set[int] = set()
    for l in range(1, L + 1):
        I, Ib, M = np.asarray(cn.W_index[l - 1]), np.asarray(cn.b_index[l - 1]), cn.W[l - 1]
        for i in range(cn.widths[l]):
            for j in range(cn.widths[l - 1]):
                idx = int(I[i, j])
                if idx >= 0:
                    groups[idx].append((node(l, i), node(l - 1, j)))
                elif M[i, j] != 0:
                    parent[find(node(l, i))] = find(node(l - 1, j))
            idx = int(Ib[i])
            if idx >= 0:
                groups[idx].append((node(l, i), ground))
            elif cn.b[l - 1][i] != 0:
                parent[find(node(l, i))] = find(ground)
    for Is in cn.slope_index:
        pinned.update(int(j) for j in np.asarray(Is) if j >= 0)  # a slope does not rescale
    g = find(ground)
    classes = sorted({find(x) for x in range(ground)} - {g})
    col = {c: m for m, c in enumerate(classes)}
    m = len(classes)

    def diff(e: tuple[int, int]) -> tuple[int, ...]:
        vec = [0] * m
        o, i = find(e[0]), find(e[1])
        if o != g:
            vec[col[o]] += 1
        if i != g:
            vec[col[i]] -= 1
        return tuple(vec)

    rows: set[tuple[int, ...]] = set()
    rep: dict[int, tuple[int, ...]] = {}
    for j, edges in groups.items():
        vecs = [diff(e) for e in edges]
        rep[j] = vecs[0] if vecs else (0,) * m
        base = (0,) * m if j in pinned else rep[j]
        for factor in vecs:
            row = tuple(a - c for a, c in zip(factor, base))
            if any(row):
                rows.add(row)
    if rows and m:
        C = flint.fmpz_mat(sorted(rows))
        Hb, nullity = C.nullspace()
        Hbasis = flint.fmpq_mat(m, int(nullity), [Hb[r, c] for r in range(m) for c in range(int(nullity))])
    else:
        nullity = m
        Hbasis = flint.fmpq_mat(m, m, [1 if r == c else 0 for r in range(m) for c in range(m)])
    theta = cn.theta()
    A = flint.fmpq_mat(k, m, [theta[j] * rep[j][c] if j not in pinned else 0 for j in range(k) for c in range(m)])
    T = A * Hbasis if m else flint.fmpq_mat(k, 0)
    rank_t = len({j for j in range(k) if groups[j]} | pinned)
    from exactident.verify.linear_symmetry import stretch_basis

    stretch = stretch_basis(cn, theta)  # the affine group of linear units (verify.linear_symmetry)
    if stretch:
        T = flint.fmpq_mat(k, T.ncols() + len(stretch),
                           [T[r, c] if c < T.ncols() else stretch[c - T.ncols()][r]
                            for r in range(k) for c in range(T.ncols() + len(stretch))])
    if T.ncols():
        R, rank = T.transpose().rref()
        basis = R.transpose()
        basis = flint.fmpq_mat(k, rank, [basis[r, c] for r in range(k) for c in range(rank)])
    else:
        rank, basis = 0, flint.fmpq_mat(k, 0)
    return Symmetry(rank_t, int(nullity), int(rank), rank_t - int(rank), basis)


def softmax_rank_bound(cn: Network, sym: Symmetry) -> int:
    """``k - dim(S_H + shifts)``: the shifts add one ``u`` to every row of ``W_L`` and one ``c`` to every ``b_L[o]``.

    A shift direction must stay in the family: a fixed entry of layer ``L`` cannot move, the
    entries tied to one parameter move together, and a parameter also feeding another layer or a
    slope cannot move.  Adding the same amount to every logit leaves the softmax unchanged.
    """
    L, N, k = cn.L, cn.widths[cn.L - 1], cn.n_params
    groups: dict[int, set[tuple[int, ...]]] = {}
    rows: set[tuple[int, ...]] = set()

    def unit(c: int) -> tuple[int, ...]:
        return tuple(int(c == m) for m in range(N + 1))
    zero = (0,) * (N + 1)
    for l in range(1, L + 1):
        I, Ib = np.asarray(cn.W_index[l - 1]), np.asarray(cn.b_index[l - 1])
        for i in range(cn.widths[l]):
            for j in range(cn.widths[l - 1]):
                f = unit(j) if l == L else zero
                (groups.setdefault(int(I[i, j]), set()).add(f) if I[i, j] >= 0 else rows.add(f))
            f = unit(N) if l == L else zero
            (groups.setdefault(int(Ib[i]), set()).add(f) if Ib[i] >= 0 else rows.add(f))
    for Is in cn.slope_index:
        for j in np.asarray(Is):
            if j >= 0:
                groups.setdefault(int(j), set()).add(zero)
    first = {j: sorted(fs)[0] for j, fs in groups.items()}
    for j, fs in groups.items():
        rows.update(tuple(a - b for a, b in zip(f, first[j])) for f in fs)
    rows.discard(zero)
    if rows:
        Nb, nullity = flint.fmpz_mat(sorted(rows)).nullspace()
        B = [[int(Nb[r, c]) for r in range(N + 1)] for c in range(int(nullity))]
    else:
        B = [list(unit(c)) for c in range(N + 1)]
    cols = [[sum((int(first[j][m]) * int(b[m]) for m in range(N + 1)), 0) if j in first else 0 for j in range(k)]
            for b in B]
    M = flint.fmpq_mat(k, sym.symmetry_dim + len(cols))
    for i in range(k):
        for c in range(sym.symmetry_dim):
            M[i, c] = sym.basis[i, c]
        for c, col in enumerate(cols):
            M[i, sym.symmetry_dim + c] = col[i]
    return k - (M.rref()[1] if M.ncols() else 0)


def gauge_spans(sym: Symmetry, gauge: list[int]) -> bool:
    """The ``gauge`` parameters' rows of the basis of ``S_H`` are a basis: ``S_H`` meets the chart in 0."""
    if len(gauge) != sym.symmetry_dim:
        return False
    if not gauge:
        return True
    rows = flint.fmpq_mat(len(gauge), sym.symmetry_dim, [sym.basis[j, c] for j in gauge
                                                         for c in range(sym.symmetry_dim)])
    return rows.rank() == len(gauge)


def into_chart(sym: Symmetry, delta: list[flint.fmpq], gauge: list[int]) -> list[flint.fmpq]:
    """``delta - sigma``, ``sigma`` in ``S_H`` with ``sigma_F = delta_F`` (the gauge has been checked by
    :func:`gauge_spans`)."""
    m = sym.symmetry_dim
    if not m:
        return delta
    B_F = flint.fmpq_mat(m, m, [sym.basis[j, c] for j in gauge for c in range(m)])
    c = B_F.solve(flint.fmpq_mat(m, 1, [delta[j] for j in gauge]))
    return [delta[j] - sum((sym.basis[j, a] * c[a, 0] for a in range(m)), flint.fmpq(0)) for j in range(len(delta))]
