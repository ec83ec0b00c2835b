"""The verifier's own symmetries of linear units: ``S_H`` widened by the affine group of linear units.

Recomputed from the compiled network alone, by another route than the engine's
(:mod:`exactident.model.linear_symmetry` solves bilinear forms entry by entry): here every *unit*
generator (one entry of a mixing matrix ``E_l``, or of a translation ``c_l``) is applied entry by entry
to the fixed part ``C`` of the network (with its constant move ``b_l[Lin[a]] += 1``) and to every column
``T_j`` it reads, and its *defect* there (the moves of fixed entries, and of each tied entry against the
first entry of its parameter) is a column of one matrix.  The field is affine in ``theta'``
(``delta(g; C) + sum_j theta'_j delta_1(g; T_j)``), so a generator keeps the family ``W = T theta + c`` for
every ``theta'`` exactly when all these defects vanish: the admissible generators are the nullspace of
that matrix (exact, Q).  Their fields at ``theta``, pulled back to ``theta``, are added to the
rescalings' ``S_H``.

A linear unit has its slope fixed at 1; the mixing matrix of a layer is used only when it has at most
``MAX_MIXED_UNITS`` (24) linear units, as the engine's rule says.

:func:`composition_basis` adds the moves of the weights out of the linear units of a layer ``l`` into
its next layer's kinked units (or the outputs) along the left kernel of ``[W_l[Lin, :] | b_l[Lin]]``
(docs/theory.md, "Kernel of a composition through linear units"): here each eligible parameter's move
``e_j`` is pushed through that block as one column of a matrix (its image on ``z_{l+1}`` as an affine
map of ``h_{l-1}``), and the admissible directions are that matrix's nullspace; the engine instead
writes one equation per pre-activation.

:func:`slope_trade_basis` adds the slope trades of PReLU layers (docs/theory.md, "Slope trades of PReLU
layers"): one column per slope parameter holding the defects of its unit trade (the change of the affine
map ``h_{l-1} -> z_{l+1}``, the moves of fixed entries, the gaps between tied entries), the admissible
trades being the nullspace; the engine solves equations row by row with union-find first.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import lcm

import flint
import numpy as np

from exactident.model.network import Network

__all__ = ["MAX_MIXED_UNITS", "composition_basis", "slope_trade_basis", "stretch_basis"]

#: The engine's rule (docs/theory.md): layers with more linear units get translations only.
MAX_MIXED_UNITS = 24


def _linear(cn: Network) -> dict[int, list[int]]:
    out = {}
    for l in range(1, cn.L):
        lin = [v for v in range(cn.widths[l])
               if int(cn.slope_index[l - 1][v]) < 0 and cn.negative_slope[l - 1][v] == 1]
        if lin:
            out[l] = lin
    return out


def _dense_at(cn: Network, theta: Sequence[flint.fmpq] | None, only: int | None = None):
    """Accessors ``W(l, i, k)``, ``b(l, i)`` of the dense network: at ``theta``, or (``theta`` None) the fixed
    part ``C`` (free entries 0), or the column ``T_only`` (1 where the entry is ``theta_only``, else 0)."""
    zero, one = flint.fmpq(0), flint.fmpq(1)

    def value(idx: int, fixed: flint.fmpq) -> flint.fmpq:
        if only is not None:
            return one if idx == only else zero
        if idx < 0:
            return fixed
        return theta[idx] if theta is not None else zero

    def W(l: int, i: int, k: int) -> flint.fmpq:
        return value(int(cn.W_index[l - 1][i, k]), cn.W[l - 1][i, k])

    def b(l: int, i: int) -> flint.fmpq:
        return value(int(cn.b_index[l - 1][i]), cn.b[l - 1][i])
    return W, b


def _field(cn: Network, lin: dict[int, list[int]], gen: tuple, Ws, bs,
           const: bool = True) -> dict[tuple, flint.fmpq]:
    """The dense move of one unit generator at the network ``(Ws, bs)`` (accessors): ``("E", l, a, b)`` or
    ``("c", l, a)``; ``const`` adds the move that does not depend on the network (``b_l[Lin[a]] += 1``)."""
    out: dict[tuple, flint.fmpq] = {}

    def add(key: tuple, value: flint.fmpq) -> None:
        if value != 0:
            out[key] = out.get(key, flint.fmpq(0)) + value

    l = gen[1]
    units = lin[l]
    if gen[0] == "E":  # E = e_a e_b^T: row Lin[a] of W_l, b_l gains row Lin[b]; column Lin[b] of W_{l+1} loses
        # column Lin[a]
        _, _, a, b = gen
        src, dst = units[b], units[a]
        for k in range(cn.widths[l - 1]):
            add(("W", l, dst, k), Ws(l, src, k))
        add(("b", l, dst), bs(l, src))
        for i in range(cn.widths[l + 1]):
            add(("W", l + 1, i, src), -Ws(l + 1, i, dst))
    else:  # c = e_a: b_l[Lin[a]] += 1, b_{l+1} -= W_{l+1}[:, Lin[a]]
        _, _, a = gen
        if const:
            add(("b", l, units[a]), flint.fmpq(1))
        for i in range(cn.widths[l + 1]):
            add(("b", l + 1, i), -Ws(l + 1, i, units[a]))
    return out


def _param(cn: Network, key: tuple) -> int:
    if key[0] == "W":
        return int(cn.W_index[key[1] - 1][key[2], key[3]])
    return int(cn.b_index[key[1] - 1][key[2]])


def composition_basis(cn: Network) -> list[list[flint.fmpq]]:
    """Directions in ``theta`` (dense lists, Q) moving the weights out of linear units inside the left kernel
    of the weights into them, with the next biases compensating; ``cn`` at its current ``theta``.

    Layer ``l`` with linear units ``Lin``, rows ``R`` the kinked units of layer ``l + 1`` (all of them when it
    is the output layer): a parameter is eligible when every entry of it is in ``W_{l+1}[R, Lin]`` or
    ``b_{l+1}[R]`` (counted from the index arrays).  Its unit move changes ``z_{l+1}[R]`` by the affine map
    ``h -> E_j [W_l[Lin, :] h + b_l[Lin]] + e_j(b)``: the column of ``j`` lists that map's coefficients.
    """
    lin = _linear(cn)
    k = cn.n_params
    out: list[list[flint.fmpq]] = []
    count = np.zeros(k, dtype=np.int64)
    for I in [*cn.W_index, *cn.b_index, *cn.slope_index]:
        I = np.asarray(I)
        count += np.bincount(I[I >= 0], minlength=k)
    for l, units in lin.items():
        one = flint.fmpq(1)
        if l + 1 == cn.L:
            rows = list(range(cn.widths[l + 1]))
        else:
            rows = [i for i in range(cn.widths[l + 1])
                    if int(cn.slope_index[l][i]) >= 0 or cn.negative_slope[l][i] != one]
        I = np.asarray(cn.W_index[l])[rows][:, units]
        Ib = np.asarray(cn.b_index[l])[rows]
        inside = np.bincount(I[I >= 0], minlength=k) + np.bincount(Ib[Ib >= 0], minlength=k)
        eligible = sorted(j for j in {*I[I >= 0].tolist(), *Ib[Ib >= 0].tolist()} if inside[j] == count[j])
        if not eligible:
            continue
        cols_in = cn.widths[l - 1]
        Wl, bl = cn.W[l - 1], cn.b[l - 1]
        coord: dict[tuple[int, int], int] = {}  # (row of R, column of [W_l | b_l]) -> index of the column's entry
        columns = []
        for j in eligible:
            col: dict[int, flint.fmpq] = {}
            for r in range(len(rows)):
                for a, u in enumerate(units):
                    if int(I[r, a]) != j:
                        continue
                    for kk in range(cols_in + 1):
                        value = Wl[u, kk] if kk < cols_in else bl[u]
                        if value != 0:
                            key = coord.setdefault((r, kk), len(coord))
                            col[key] = col.get(key, flint.fmpq(0)) + value
                if int(Ib[r]) == j:
                    key = coord.setdefault((r, cols_in), len(coord))
                    col[key] = col.get(key, flint.fmpq(0)) + 1
            columns.append(col)
        M = flint.fmpq_mat(max(len(coord), 1), len(eligible))
        for c, col in enumerate(columns):
            for key, value in col.items():
                M[key, c] = value
        R, rank = M.rref()
        pivots, r = [], 0
        for c in range(len(eligible)):
            if r < rank and R[r, c] != 0:
                pivots.append(c)
                r += 1
        for f in range(len(eligible)):
            if f in pivots:
                continue
            direction = [flint.fmpq(0)] * k
            direction[eligible[f]] = flint.fmpq(1)
            for row, c in enumerate(pivots):
                direction[eligible[c]] = -R[row, f]
            out.append(direction)
    return out


def stretch_basis(cn: Network, theta: Sequence[flint.fmpq]) -> list[list[flint.fmpq]]:
    """Directions in ``theta`` spanning the admissible linear-unit symmetries' tangents at ``theta`` (Q).

    Every returned direction moves no fixed entry and ties' entries alike (checked: a direction that would
    not is dropped, which only makes ``dim_free`` larger).  The moves of :func:`composition_basis` follow.
    """
    lin = _linear(cn)
    out = _stretch(cn, theta, lin) + composition_basis(cn) if lin else []
    return out + slope_trade_basis(cn)


def slope_trade_basis(cn: Network) -> list[list[flint.fmpq]]:
    """Tangents in ``theta`` (dense lists, Q) of the slope trades of PReLU layers at the current ``theta``.

    The unit trade of slope parameter ``g`` of layer ``l`` moves, for every unit ``v`` of layer ``l`` whose
    slope is ``theta_g``: ``a_v`` by ``1 - a_v``, ``W_{l+1}[:, v]`` by itself, ``b_{l+1}`` by
    ``-W_{l+1}[:, v] b_l[v]``.  A combination is kept when it changes no coefficient of the affine map
    ``h_{l-1} -> sum_v s_v W_{l+1}[:, v] W_l[v, :]``, moves no fixed entry and moves every parameter's
    entries alike (its entries outside the move stay).
    """
    k = cn.n_params
    zero = flint.fmpq(0)
    count = np.zeros(k, dtype=np.int64)
    for I in [*cn.W_index, *cn.b_index, *cn.slope_index]:
        I = np.asarray(I)
        count += np.bincount(I[I >= 0], minlength=k)
    out: list[list[flint.fmpq]] = []
    for l in range(1, cn.L):
        SI = np.asarray(cn.slope_index[l - 1])
        groups = sorted({int(j) for j in SI if j >= 0})
        if not groups:
            continue
        Wn, Wl, bl = cn.W[l], cn.W[l - 1], cn.b[l - 1]
        fields = []  # per group: dense entry -> move
        for g in groups:
            f: dict[tuple, flint.fmpq] = {}
            for v in (int(u) for u in np.flatnonzero(np.equal(SI, g))):
                f[("a", l, v)] = 1 - cn.negative_slope[l - 1][v]
                for i in range(cn.widths[l + 1]):
                    w = Wn[i, v]
                    if w != 0:
                        f[("W", l + 1, i, v)] = f.get(("W", l + 1, i, v), zero) + w
                        f[("b", l + 1, i)] = f.get(("b", l + 1, i), zero) - w * bl[v]
            fields.append(f)
        defects: dict[tuple, dict[int, flint.fmpq]] = {}
        for c, g in enumerate(groups):
            prod: dict[tuple[int, int], flint.fmpq] = {}
            for u in np.flatnonzero(np.equal(SI, g)):
                for i in range(cn.widths[l + 1]):
                    w = Wn[i, int(u)]
                    if w == 0:
                        continue
                    for kk in range(cn.widths[l - 1]):
                        if Wl[int(u), kk] != 0:
                            prod[(i, kk)] = prod.get((i, kk), zero) + w * Wl[int(u), kk]
            for key, value in prod.items():
                if value != 0:
                    defects.setdefault(("map", *key), {})[c] = value
            for key, value in fields[c].items():
                if _param_a(cn, key) < 0 and value != 0:  # a fixed entry must not move
                    defects.setdefault(("fixed", key), {})[c] = value
        rows = _tie_rows(cn, l, fields, count) + list(defects.values())
        _nullity, basis = _nullspace_q(rows, len(groups))
        for col in basis:
            dense: dict[tuple, flint.fmpq] = {}
            for c, coef in enumerate(col):
                if coef != 0:
                    for key, value in fields[c].items():
                        dense[key] = dense.get(key, zero) + coef * value
            direction = [zero] * k
            for key, value in dense.items():
                j = _param_a(cn, key)
                if j >= 0 and value != 0:
                    direction[j] = value
            if any(v != 0 for v in direction):
                out.append(direction)
    return out


def _param_a(cn: Network, key: tuple) -> int:
    """The parameter of a dense weight, bias or slope (``("a", l, v)``) entry; -1 when fixed."""
    return int(cn.slope_index[key[1] - 1][key[2]]) if key[0] == "a" else _param(cn, key)


def _tie_rows(cn: Network, l: int, fields: list[dict[tuple, flint.fmpq]],
              count: np.ndarray) -> list[dict[int, flint.fmpq]]:
    """Rows ``sum_c s_c (move_c(e) - move_c(e_0)) = 0`` for the entries ``e`` of each moved parameter."""
    zero = flint.fmpq(0)
    entries: dict[int, set[tuple]] = {}
    for f in fields:
        for key in f:
            j = _param_a(cn, key)
            if j >= 0:
                entries.setdefault(j, set()).add(key)
    rows = []
    for j, keys in entries.items():
        ordered = sorted(keys)
        if len(ordered) < count[j]:  # an entry outside every move stays: every entry must stay
            for key in ordered:
                row = {c: f[key] for c, f in enumerate(fields) if f.get(key, zero) != 0}
                if row:
                    rows.append(row)
            continue
        for key in ordered[1:]:
            row = {c: f.get(key, zero) - f.get(ordered[0], zero) for c, f in enumerate(fields)}
            row = {c: v for c, v in row.items() if v != 0}
            if row:
                rows.append(row)
    return rows


def _nullspace_q(rows: list[dict[int, flint.fmpq]], n: int) -> tuple[int, list[list[flint.fmpq]]]:
    """A basis of ``{s in Q^n : row . s = 0}`` by FLINT's rref."""
    if not rows:
        return n, [[flint.fmpq(int(i == c)) for i in range(n)] for c in range(n)]
    M = flint.fmpq_mat(len(rows), n)
    for r, entries in enumerate(rows):
        for c, value in entries.items():
            M[r, c] = value
    R, rank = M.rref()
    pivots, r = [], 0
    for c in range(n):
        if r < rank and R[r, c] != 0:
            pivots.append(c)
            r += 1
    basis = []
    for f in range(n):
        if f in pivots:
            continue
        vec = [flint.fmpq(0)] * n
        vec[f] = flint.fmpq(1)
        for row, c in enumerate(pivots):
            vec[c] = -R[row, f]
        basis.append(vec)
    return n - rank, basis


def _stretch(cn: Network, theta: Sequence[flint.fmpq], lin: dict[int, list[int]]) -> list[list[flint.fmpq]]:
    """The linear-unit generators' admissible directions (module docstring)."""
    k = cn.n_params
    gens: list[tuple] = []
    for l, units in lin.items():
        m = len(units)
        if m <= MAX_MIXED_UNITS:
            gens += [("E", l, a, b) for a in range(m) for b in range(m)]
        gens += [("c", l, a) for a in range(m)]
    count = np.zeros(k, dtype=np.int64)  # entries per parameter, slopes included (they never move)
    for I in [*cn.W_index, *cn.b_index, *cn.slope_index]:
        I = np.asarray(I)
        count += np.bincount(I[I >= 0], minlength=k)
    touching: set[int] = set()
    for l, units in lin.items():
        for I in (np.asarray(cn.W_index[l - 1])[units, :], np.asarray(cn.b_index[l - 1])[units],
                  np.asarray(cn.W_index[l])[:, units], np.asarray(cn.b_index[l])):
            touching.update(int(j) for j in I.ravel() if j >= 0)
    # the field is affine in theta': delta(g; C) + sum_j theta'_j delta_1(g; T_j); in image T for every theta'
    # iff the part at C (with the constant move) and every delta_1(g; T_j) are.  delta_1(g; T_j) is 0 unless
    # theta_j has an entry that g reads: row Lin[b] of W_l or b_l (E[a, b]), column Lin[a] of W_{l+1} (both)
    reads: dict[int, set[int]] = {}
    for g, gen in enumerate(gens):
        l, units = gen[1], lin[gen[1]]
        if gen[0] == "E":
            row, col = units[gen[3]], units[gen[2]]
            ids = [*np.asarray(cn.W_index[l - 1])[row, :], np.asarray(cn.b_index[l - 1])[row],
                   *np.asarray(cn.W_index[l])[:, col]]
        else:
            ids = list(np.asarray(cn.W_index[l])[:, units[gen[2]]])
        for j in ids:
            if j >= 0:
                reads.setdefault(int(j), set()).add(g)
    entries: dict[int, list[tuple]] = {}  # every entry of the parameters a field can move
    for l in range(1, cn.L + 1):
        for (i, kk), j in np.ndenumerate(np.asarray(cn.W_index[l - 1])):
            if j >= 0 and int(j) in touching:
                entries.setdefault(int(j), []).append(("W", l, i, kk))
        for i, j in enumerate(np.asarray(cn.b_index[l - 1])):
            if j >= 0 and int(j) in touching:
                entries.setdefault(int(j), []).append(("b", l, i))
    for l in range(1, cn.L):
        for v, j in enumerate(np.asarray(cn.slope_index[l - 1])):
            if j >= 0 and int(j) in touching:
                entries.setdefault(int(j), []).append(("a", l, v))
    points = [(None, range(len(gens)))] + [(j, sorted(reads[j])) for j in sorted(reads)]
    defects: dict[tuple, dict[int, flint.fmpq]] = {}  # defect coordinate -> {generator: value}
    for p, (only, which) in enumerate(points):
        Ws, bs = _dense_at(cn, None, only)
        for g in which:
            field = _field(cn, lin, gens[g], Ws, bs, const=only is None)
            moved: set[int] = set()
            for key, value in field.items():
                j = _param(cn, key)
                if j < 0:  # a fixed entry must not move
                    defects.setdefault((p, key), {})[g] = value
                else:
                    moved.add(j)
            for j in moved:  # every entry of theta_j moves as its first one (slopes and far entries: 0)
                es = sorted(entries[j])
                first = field.get(es[0], flint.fmpq(0))
                for key in es[1:]:
                    d = field.get(key, flint.fmpq(0)) - first
                    if d != 0:
                        defects.setdefault((p, j, key), {})[g] = d
    rows = list(defects.values())
    if rows:
        D = flint.fmpz_mat(len(rows), len(gens))
        for r, row in enumerate(rows):  # each row scaled to integers: the nullspace is the same
            scale = lcm(*(int(q.q) for q in row.values()))
            for g, q in row.items():
                D[r, g] = int(q * scale)
        N, nullity = D.nullspace()
        admissible = [[flint.fmpq(N[g, c]) for g in range(len(gens))] for c in range(int(nullity))]
    else:
        admissible = [[flint.fmpq(int(g == c)) for g in range(len(gens))] for c in range(len(gens))]
    Ws, bs = _dense_at(cn, theta)
    fields = [_field(cn, lin, gen, Ws, bs) for gen in gens]
    out = []
    for coeffs in admissible:
        dense: dict[tuple, flint.fmpq] = {}
        for g, c in enumerate(coeffs):
            if c != 0:
                for key, value in fields[g].items():
                    dense[key] = dense.get(key, flint.fmpq(0)) + c * value
        direction = [flint.fmpq(0)] * k
        ok = True
        seen: dict[int, flint.fmpq] = {}
        for key, value in dense.items():
            if value == 0:
                continue
            j = _param(cn, key)
            if j < 0 or seen.get(j, value) != value:
                ok = False
                break
            seen[j] = value
            direction[j] = value
        if ok and any(len([1 for key, v in dense.items() if v != 0 and _param(cn, key) == j]) < count[j]
                      for j in seen):
            ok = False  # an entry of theta_j that does not move (a slope, or outside the blocks)
        if ok and seen:
            out.append(direction)
    return out
