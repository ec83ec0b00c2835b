"""An independent sympy oracle for constrained networks, and random constrained networks of every feature.

The oracle shares nothing with the engine but the Network's fields: it builds
``f(x^i)`` symbolically in ``theta`` (sympy symbols) with the activation pattern read off the
exact values at theta (a tie is resolved as asked), differentiates with sympy, and takes
the exact rank.  ``dim S_H`` is computed another way than the engine's: the log-scales
``s`` whose dense change at a *generic* theta' lies in ``image T`` (the family's tangent),
mapped to ``theta`` at the actual values; and, for the linear units (slope fixed at 1), the affine
group ``z -> M z + c`` on each layer's linear units: its Lie algebra ``(E_l, c_l)`` moves the dense
network by ``dW_l = E_l W_l - W_l E_{l-1}``, ``db_l = E_l b_l + c_l - W_l c_{l-1}`` (sympy matrices), and
a generator is kept when that move lies in ``image T`` at ``k + 1`` random points ``theta'`` (affinely
independent, so at every ``theta'``: the move is affine in ``theta'``).
"""

from __future__ import annotations

import math
import random

import flint
import numpy as np
import sympy as sp

from exactident.model.network import Network


def Q(v) -> sp.Rational:
    v = flint.fmpq(v)
    return sp.Rational(int(v.p), int(v.q))


def _entry(cn, sym, idx, val):
    return sym[idx] if idx >= 0 else Q(val)


def oracle_forward(cn: Network, x, sym, values, resolution=None):
    """Symbolic outputs at ``x`` with the pattern of ``theta = values``; ties via ``resolution`` (dict)."""
    subs = dict(zip(sym, values))
    h = [Q(v) for v in x]
    ties = []
    for l in range(1, cn.L + 1):
        z = []
        for i in range(cn.widths[l]):
            e = _entry(cn, sym, int(cn.b_index[l - 1][i]), cn.b[l - 1][i])
            for k in range(cn.widths[l - 1]):
                e += _entry(cn, sym, int(cn.W_index[l - 1][i, k]), cn.W[l - 1][i, k]) * h[k]
            z.append(sp.expand(e))
        if l == cn.L:
            return z, ties
        h = []
        for v, e in enumerate(z):
            a = _entry(cn, sym, int(cn.slope_index[l - 1][v]), cn.negative_slope[l - 1][v])
            linear = int(cn.slope_index[l - 1][v]) < 0 and cn.negative_slope[l - 1][v] == 1
            val = e.subs(subs)
            if linear or val > 0:
                h.append(e)
            elif val < 0:
                h.append(a * e)
            else:
                ties.append((l, v))
                on = (resolution or {}).get((l, v), True)
                h.append(e if on else a * e)
    raise AssertionError


def oracle_rank(cn: Network, X, resolution=None) -> int:
    """Exact rank of ``d f(X) / d theta`` by sympy; ``resolution`` maps ``(sample, l, v)`` to active."""
    sym = sp.symbols(f"t0:{cn.n_params}")
    values = [Q(v) for v in cn.theta()]
    subs = dict(zip(sym, values))
    rows = []
    for i, x in enumerate(X):
        res = {(l, v): a for (s, l, v), a in (resolution or {}).items() if s == i}
        out, _ = oracle_forward(cn, x, sym, values, res)
        for e in out:
            rows.append([sp.diff(e, t).subs(subs) for t in sym])
    return sp.Matrix(rows).rank() if rows and cn.n_params else 0


def oracle_dim_free(cn: Network, seed: int = 0) -> int:
    """``k - dim S_H``: rescalings whose dense change at a generic theta' lies in the family's tangent."""
    rng = random.Random(seed)
    k = cn.n_params
    generic = [sp.Rational(rng.randint(1, 10**6), rng.randint(1, 10**6)) for _ in range(k)]
    units = [(l, v) for l in range(1, cn.L) for v in range(cn.widths[l])]
    pos = {u: n for n, u in enumerate(units)}
    s = sp.symbols(f"s0:{len(units)}") if units else ()
    c = sp.symbols(f"c0:{k}") if k else ()

    def scale(l, i):
        return s[pos[(l, i)]] if (l, i) in pos else 0

    def dense(values):
        out = []  # (index, value, log-factor)
        for l in range(1, cn.L + 1):
            for i in range(cn.widths[l]):
                for kk in range(cn.widths[l - 1]):
                    j = int(cn.W_index[l - 1][i, kk])
                    out.append((j, values[j] if j >= 0 else Q(cn.W[l - 1][i, kk]), scale(l, i) - scale(l - 1, kk)))
                j = int(cn.b_index[l - 1][i])
                out.append((j, values[j] if j >= 0 else Q(cn.b[l - 1][i]), scale(l, i)))
        for l in range(1, cn.L):
            for v in range(cn.widths[l]):
                j = int(cn.slope_index[l - 1][v])
                out.append((j, values[j] if j >= 0 else Q(cn.negative_slope[l - 1][v]), 0))
        return out

    # A: change f * value at generic theta' equals T c for some c (fixed entries: 0; tied: c_j)
    eqs = [f * val - (c[j] if j >= 0 else 0) for j, val, f in dense(generic)]
    if not units:
        return k
    sol = sp.linsolve(eqs, list(s) + list(c))
    (point,) = sol
    free = sorted(set().union(*[sp.sympify(p).free_symbols for p in point]), key=str)
    svals = point[:len(units)]
    actual = [Q(v) for v in cn.theta()]
    cols = []
    for f_sym in free:  # one generator of A per free symbol of the solution
        sub = {g: (1 if g == f_sym else 0) for g in free}
        sv = [sp.sympify(x).subs(sub) for x in svals]
        svec = dict(zip(s, sv))
        col = [0] * k
        for j, val, f in dense(actual):
            if j >= 0:
                col[j] = sp.sympify(f).subs(svec) * val
        cols.append(col)
    cols += oracle_stretch_directions(cn, seed) + oracle_composition_directions(cn) + oracle_slope_trades(cn)
    dim_sh = sp.Matrix(cols).rank() if cols else 0
    return k - dim_sh


def _linear_units(cn):
    return {l: [v for v in range(cn.widths[l]) if int(cn.slope_index[l - 1][v]) < 0
                and cn.negative_slope[l - 1][v] == 1] for l in range(1, cn.L)}


def _weights_at(cn, values):
    """``(W, b)`` of the family at ``theta = values`` (FLINT matrices over Q; fixed entries from ``cn``)."""
    def ent(idx, val):
        return flint.fmpq(values[idx]) if idx >= 0 else flint.fmpq(val)

    W = [flint.fmpq_mat(cn.widths[l], cn.widths[l - 1],
                        [ent(int(cn.W_index[l - 1][i, kk]), cn.W[l - 1][i, kk])
                         for i in range(cn.widths[l]) for kk in range(cn.widths[l - 1])])
         for l in range(1, cn.L + 1)]
    b = [flint.fmpq_mat(cn.widths[l], 1, [ent(int(cn.b_index[l - 1][i]), cn.b[l - 1][i]) for i in range(cn.widths[l])])
         for l in range(1, cn.L + 1)]
    return W, b


def _stretch_move(cn, Wb, E, c):
    """``(dW, db)`` of the generator ``(E, c)`` at the weights ``Wb = _weights_at(cn, theta)`` (FLINT
    matrices over Q, module docstring)."""
    W, b = Wb
    dW, db = [], []
    for l in range(1, cn.L + 1):
        El = E.get(l, flint.fmpq_mat(cn.widths[l], cn.widths[l]))
        Eb = E.get(l - 1, flint.fmpq_mat(cn.widths[l - 1], cn.widths[l - 1]))
        cl = c.get(l, flint.fmpq_mat(cn.widths[l], 1))
        cb = c.get(l - 1, flint.fmpq_mat(cn.widths[l - 1], 1))
        dW.append(El * W[l - 1] - W[l - 1] * Eb)
        db.append(El * b[l - 1] + cl - W[l - 1] * cb)
    return dW, db


_PLANS: dict = {}  # id(cn) -> (cn, plan): the plan of each network read once (cn kept, so the id stays its own)


def _entry_plan(cn):
    """Per layer ``l``: the parameter index of ``W_l[i, k]`` then ``b_l[i]``, row by row, and the position of
    each of these entries in ``W_l.entries() + b_l.entries()`` (the order :func:`_in_image_t` reads them)."""
    if id(cn) not in _PLANS:
        plan = []
        for l in range(1, cn.L + 1):
            n_out, n_in = cn.widths[l], cn.widths[l - 1]
            index, order = [], []
            for i in range(n_out):
                index += [int(cn.W_index[l - 1][i, kk]) for kk in range(n_in)] + [int(cn.b_index[l - 1][i])]
                order += [i * n_in + kk for kk in range(n_in)] + [n_out * n_in + i]
            plan.append((index, order))
        _PLANS[id(cn)] = (cn, plan)
    return _PLANS[id(cn)][1]


def _in_image_t(cn, dW, db, da=None):
    """The defects of the move ``(dW, db)`` (and slopes ``da[l-1][v]``, default still) from ``image T`` (fixed
    entries, tied entries against the first) and its pull-back ``delta`` (first entries)."""
    defects, first = [], {}
    zero = flint.fmpq(0)

    def put(j, e):
        if j < 0:
            defects.append(e)
        elif j in first:
            defects.append(e - first[j])
        else:
            first[j] = e
    for l, (index, order) in enumerate(_entry_plan(cn), start=1):
        values = dW[l - 1].entries() + db[l - 1].entries()
        for j, t in zip(index, order):  # row by row: W_l[i, :], then b_l[i]
            put(j, values[t])
    for l in range(1, cn.L):
        for v in range(cn.widths[l]):
            j = int(cn.slope_index[l - 1][v])
            move = da[l - 1][v] if da is not None else zero
            if j >= 0:  # slopes never move, but in a slope trade
                put(j, move)
            elif move != 0:
                defects.append(move)
    return defects, first


def _dense_now(cn):
    W = [flint.fmpq_mat(cn.W[l]) for l in range(cn.L)]
    b = [flint.fmpq_mat(cn.widths[l + 1], 1, list(cn.b[l])) for l in range(cn.L)]
    return W, b


def _null(cols):
    """A basis of the nullspace of the matrix with these columns (FLINT over Z, rows scaled)."""
    n = len(cols)
    rows = []
    for r in range(len(cols[0]) if cols else 0):
        row = [flint.fmpq(cols[g][r]) for g in range(n)]
        m = math.lcm(*(int(v.q) for v in row))
        rows.append([int(v * m) for v in row])
    if not rows:
        return [[int(a == c) for a in range(n)] for c in range(n)]
    N, nullity = flint.fmpz_mat(rows).nullspace()
    return [[N[g, c] for g in range(n)] for c in range(int(nullity))]


def oracle_composition_directions(cn: Network) -> list[list]:
    """Moves of ``W_{l+1}[R, Lin]`` (``R`` kinked rows, or every row of the output layer) with the biases
    ``b_{l+1}[R]`` compensating, in the left kernel of ``[W_l[Lin, :] | b_l[Lin]]``: every parameter is a
    unit move of all its entries; defects: entries moved outside that block, and the change of the affine map
    ``h -> z_{l+1}`` (dense FLINT products)."""
    W, b = _dense_now(cn)
    k, out = cn.n_params, []
    for l, lin in _linear_units(cn).items():
        if not lin:
            continue
        rows = [i for i in range(cn.widths[l + 1]) if l + 1 == cn.L or int(cn.slope_index[l][i]) >= 0
                or cn.negative_slope[l][i] != 1]
        params = sorted({int(cn.W_index[l][i, u]) for i in rows for u in lin if cn.W_index[l][i, u] >= 0}
                        | {int(cn.b_index[l][i]) for i in rows if cn.b_index[l][i] >= 0})
        if not params:
            continue
        B = flint.fmpq_mat(len(lin), cn.widths[l - 1] + 1,
                           [W[l - 1][u, kk] if kk < cn.widths[l - 1] else b[l - 1][u, 0]
                            for u in lin for kk in range(cn.widths[l - 1] + 1)])
        cols, moves = [], []
        for j in params:
            dW = [flint.fmpq_mat(cn.widths[m + 1], cn.widths[m]) for m in range(cn.L)]
            db = [flint.fmpq_mat(cn.widths[m + 1], 1) for m in range(cn.L)]
            outside = []
            for m in range(cn.L):
                for i in range(cn.widths[m + 1]):
                    for kk in range(cn.widths[m]):
                        if cn.W_index[m][i, kk] == j:
                            dW[m][i, kk] = 1
                            outside.append(int(not (m == l and i in rows and kk in lin)))
                    if cn.b_index[m][i] == j:
                        db[m][i, 0] = 1
                        outside.append(int(not (m == l and i in rows)))
            outside.append(int(j in {int(a) for S in cn.slope_index for a in S}))
            A = flint.fmpq_mat(len(rows), len(lin), [dW[l][i, u] for i in rows for u in lin])
            change = A * B
            for r, i in enumerate(rows):
                change[r, cn.widths[l - 1]] += db[l][i, 0]
            # one row per parameter: how many of its entries lie outside the block (must be none)
            cols.append([flint.fmpq(sum(outside) if p == j else 0) for p in params] + list(change.entries()))
            moves.append(j)
        for vec in _null(cols):
            d = [Q(0)] * k
            for g, j in enumerate(moves):
                d[j] = Q(int(vec[g]))
            if any(d):
                out.append(d)
    return out


def oracle_slope_trades(cn: Network) -> list[list]:
    """Slope trades (docs/theory.md): per slope parameter ``g`` of layer ``l`` the unit move ``da_v = 1 - a_v``,
    ``dW_{l+1}[:, v] = W_{l+1}[:, v]``, ``db_{l+1} = -W_{l+1}[:, v] b_l[v]`` (units ``v`` with slope ``g``);
    kept combinations: ``sum_v s_v W_{l+1}[:, v] W_l[v, :] = 0`` (dense FLINT products) and the move in
    ``image T``."""
    W, b = _dense_now(cn)
    k, out = cn.n_params, []
    for l in range(1, cn.L):
        groups = sorted({int(j) for j in cn.slope_index[l - 1] if j >= 0})
        if not groups:
            continue
        cols, moves = [], []
        for g in groups:
            units = [v for v in range(cn.widths[l]) if int(cn.slope_index[l - 1][v]) == g]
            dW = [flint.fmpq_mat(cn.widths[m + 1], cn.widths[m]) for m in range(cn.L)]
            db = [flint.fmpq_mat(cn.widths[m + 1], 1) for m in range(cn.L)]
            da = [[flint.fmpq(0)] * cn.widths[m] for m in range(1, cn.L)]
            S = flint.fmpq_mat(cn.widths[l], cn.widths[l])
            for v in units:
                S[v, v] = 1
                da[l - 1][v] = 1 - flint.fmpq(cn.negative_slope[l - 1][v])
            dW[l] = W[l] * S
            db[l] = -(W[l] * S * b[l - 1])
            defects, _ = _in_image_t(cn, dW, db, da)
            cols.append(defects + list((W[l] * S * W[l - 1]).entries()))
            moves.append((dW, db, da))
        for vec in _null(cols):
            dW = [sum((moves[c][0][m] * int(vec[c]) for c in range(len(groups))),
                      flint.fmpq_mat(cn.widths[m + 1], cn.widths[m])) for m in range(cn.L)]
            db = [sum((moves[c][1][m] * int(vec[c]) for c in range(len(groups))),
                      flint.fmpq_mat(cn.widths[m + 1], 1)) for m in range(cn.L)]
            da = [[sum((moves[c][2][m][v] * int(vec[c]) for c in range(len(groups))), flint.fmpq(0))
                   for v in range(cn.widths[m + 1])] for m in range(cn.L - 1)]
            defects, first = _in_image_t(cn, dW, db, da)
            assert all(d == 0 for d in defects)
            d = [Q(first.get(j, 0)) for j in range(k)]
            if any(d):
                out.append(d)
    return out


def oracle_stretch_directions(cn: Network, seed: int = 0) -> list[list]:
    """Tangents at theta of the affine group of linear units that keeps the family (module docstring)."""
    lin = {l: us for l, us in _linear_units(cn).items() if us}
    if not lin:
        return []
    rng = random.Random(seed + 1)
    k = cn.n_params
    unknowns = []  # ("E", l, a, b) or ("c", l, a)
    for l, us in lin.items():
        for a in us:
            if len(us) <= 24:  # the engine's rule: mixing only in layers of at most 24 linear units
                unknowns += [("E", l, a, bb) for bb in us]
            unknowns.append(("c", l, a))

    def generator(u):
        E, c = {}, {}
        if u[0] == "E":
            E[u[1]] = flint.fmpq_mat(cn.widths[u[1]], cn.widths[u[1]])
            E[u[1]][u[2], u[3]] = 1
        else:
            c[u[1]] = flint.fmpq_mat(cn.widths[u[1]], 1)
            c[u[1]][u[2], 0] = 1
        return E, c

    points = [[flint.fmpq(rng.randint(-10**6, 10**6), rng.randint(1, 10**6)) for _ in range(k)] for _ in range(k + 1)]
    assert flint.fmpq_mat([[1] + p for p in points]).rank() == k + 1  # affinely independent
    weights = [_weights_at(cn, p) for p in points]

    def kernel(at: list) -> tuple:
        """``(N, nullity)``: the generator combinations whose defects vanish at the weights ``at``."""
        cols: list[list] = [[] for _ in unknowns]  # cols[g]: the defects of generator g, point by point
        for Wb in at:
            for g, u in enumerate(unknowns):
                cols[g] += _in_image_t(cn, *_stretch_move(cn, Wb, *generator(u)))[0]
        rows = []  # each nonzero row scaled to integers (the nullspace is unchanged)
        for row in zip(*cols):
            if any(row):  # most defects are fixed entries that no generator moves
                m = math.lcm(*(int(v.q) for v in row))
                rows.append([int(v * m) for v in row])
        n = len(cols)
        return flint.fmpz_mat(rows).nullspace() if rows else (
            flint.fmpz_mat(n, n, [int(a == b) for a in range(n) for b in range(n)]), n)

    def combination(N, n: int) -> tuple:
        """The generator ``sum_g N[g, n] (E_g, c_g)`` (a move is linear in the generator)."""
        E: dict = {}
        c: dict = {}
        for g, u in enumerate(unknowns):
            if N[g, n] != 0:
                for part, acc in zip(generator(u), (E, c)):
                    for l, M in part.items():
                        acc[l] = acc[l] + M * int(N[g, n]) if l in acc else M * int(N[g, n])
        return E, c

    # The kernel at 3 of the points contains the kernel at all k + 1; it is that kernel when each of its
    # vectors has no defect at the other points (checked, else the kernel of all k + 1 points is computed).
    N, nullity = kernel(weights[:3])
    if not all(d == 0 for n in range(int(nullity)) for Wb in weights[3:]
               for d in _in_image_t(cn, *_stretch_move(cn, Wb, *combination(N, n)))[0]):
        N, nullity = kernel(weights)
    actual = cn.theta()
    at_theta = _weights_at(cn, actual)
    moves = [_stretch_move(cn, at_theta, *generator(u)) for u in unknowns]
    out = []
    for n in range(int(nullity)):
        dW = [sum((moves[g][0][l] * N[g, n] for g in range(len(unknowns))),
                  flint.fmpq_mat(cn.widths[l + 1], cn.widths[l])) for l in range(cn.L)]
        db = [sum((moves[g][1][l] * N[g, n] for g in range(len(unknowns))), flint.fmpq_mat(cn.widths[l + 1], 1))
              for l in range(cn.L)]
        defects, first = _in_image_t(cn, dW, db)
        assert all(d == 0 for d in defects)  # the move is in image T at theta too
        out.append([Q(first.get(j, 0)) for j in range(k)])
    return out


def random_constrained(seed: int, widths=None, p_fixed=0.2, p_tie=0.3, leaky=True, prelu=True,
                       linear=True) -> Network:
    """A random constrained network with ties, fixed (zero and nonzero) entries, leaky/PReLU/linear units."""
    rng = random.Random(seed)
    widths = widths or [rng.randint(1, 3)] + [rng.randint(1, 3) for _ in range(rng.randint(1, 2))] + [rng.randint(1, 2)]
    L = len(widths) - 1
    params: list[flint.fmpq] = []

    def new(v):
        params.append(v)
        return len(params) - 1

    def val():
        return flint.fmpq(rng.choice([-3, -2, -1, 1, 2, 3]), rng.choice([1, 1, 2]))

    W, b, WI, bI = [], [], [], []
    for l in range(1, L + 1):
        M = flint.fmpq_mat(widths[l], widths[l - 1])
        I = np.full((widths[l], widths[l - 1]), -1, dtype=np.int64)
        for i in range(widths[l]):
            for k in range(widths[l - 1]):
                r = rng.random()
                if r < p_fixed:
                    M[i, k] = rng.choice([0, 1, val()])
                elif r < p_fixed + p_tie and params:
                    j = rng.randrange(len(params))
                    I[i, k], M[i, k] = j, params[j]
                else:
                    v = val()
                    I[i, k], M[i, k] = new(v), v
        bb, bi = [], np.full(widths[l], -1, dtype=np.int64)
        for i in range(widths[l]):
            r = rng.random()
            if r < p_fixed:
                bb.append(flint.fmpq(rng.choice([0, 0, 1])))
            else:
                v = val()
                bi[i] = new(v)
                bb.append(v)
        W.append(M)
        b.append(bb)
        WI.append(I)
        bI.append(bi)
    slopes, sI = [], []
    prelu_param = None
    for l in range(1, L):
        a, ai = [], np.full(widths[l], -1, dtype=np.int64)
        for v in range(widths[l]):
            r = rng.random()
            if prelu and r < 0.2:
                if prelu_param is None or rng.random() < 0.5:
                    prelu_param = new(flint.fmpq(rng.choice([1, 2, 3]), 4))
                ai[v] = prelu_param
                a.append(params[prelu_param])
            elif leaky and r < 0.4:
                a.append(flint.fmpq(1, 10))
            elif linear and r < 0.5:
                a.append(flint.fmpq(1))
            else:
                a.append(flint.fmpq(0))
        slopes.append(a)
        sI.append(ai)
    used = sorted({int(j) for I in WI + bI + sI for j in I.ravel() if j >= 0})
    remap = {j: n for n, j in enumerate(used)}
    re = np.vectorize(lambda j: remap.get(int(j), -1), otypes=[np.int64])
    WI = [re(I) if I.size else I for I in WI]
    bI = [re(I) if I.size else I for I in bI]
    sI = [re(I) if I.size else I for I in sI]
    return Network(tuple(widths), W, b, WI, bI, slopes, sI, len(used), ("fixed weights",))


def random_sample(seed: int, n: int, N0: int, ties_with: Network | None = None):
    rng = random.Random(seed)
    return [[flint.fmpq(rng.randint(-4, 4), rng.choice([1, 2])) for _ in range(N0)] for _ in range(n)]
