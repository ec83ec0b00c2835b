"""Seeded random constrained networks and a sympy oracle, independent of exactident's constrained code.

The generator ties, fixes and zeroes dense entries at random and gives every hidden unit
a ReLU, leaky, linear (carrier-like) or PReLU activation, so every feature of the
compiled form (convolution ties, fixed pooling weights, carriers, biases fixed at 0,
leaky slopes, shared PReLU slopes) occurs.  The oracle builds the network with sympy
symbols for ``theta``, differentiates the outputs on the sample symbolically (for a given
side of every unit), and solves the rescaling constraints with sympy's dense linear
algebra: none of exactident's forward passes, backpropagation, union-find or FLINT code.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import flint
import numpy as np
import sympy as sp

from exactident.model.network import Network

__all__ = ["Oracle", "conv1d_net", "random_constrained", "residual_net"]

F32_001 = sp.Rational(5368709, 2**29)  # float32(0.01) = 0.00999999977648258209228515625, exactly


def _q(v: sp.Rational) -> flint.fmpq:
    return flint.fmpq(int(v.p), int(v.q))


def random_constrained(seed: int, widths=(3, 3, 3, 2), n: int = 5) -> tuple[Network, list[list[flint.fmpq]]]:
    """A random constrained network of ``widths`` and a sample of ``n`` points (exact, small rationals)."""
    rng = random.Random(seed)

    def val() -> sp.Rational:
        return sp.Rational(rng.randint(-6, 6), rng.randint(1, 3))

    values: list[sp.Rational] = []

    def entry() -> tuple[int, sp.Rational]:
        u = rng.random()
        if u < 0.15:
            return -1, sp.Integer(0)  # fixed zero (a convolution's missing edge, a Linear without bias)
        if u < 0.3:
            return -1, sp.Rational(rng.choice([1, 1, 2]), rng.choice([1, 2]))  # fixed (pooling, carrier)
        if u < 0.5 and values:
            j = rng.randrange(len(values))  # tied to an earlier parameter
            return j, values[j]
        values.append(val())
        return len(values) - 1, values[-1]

    L = len(widths) - 1
    W, Wi, b, bi, a, ai = [], [], [], [], [], []
    for l in range(1, L + 1):
        cells = [[entry() for _ in range(widths[l - 1])] for _ in range(widths[l])]
        Wi.append(np.array([[c[0] for c in row] for row in cells], dtype=np.int64))
        W.append([[c[1] for c in row] for row in cells])
        bc = [entry() for _ in range(widths[l])]
        bi.append(np.array([c[0] for c in bc], dtype=np.int64))
        b.append([c[1] for c in bc])
        if l < L:
            sl, si = [], []
            for _v in range(widths[l]):
                kind = rng.choice(["relu", "relu", "leaky", "f32", "linear", "prelu"])
                if kind == "prelu":
                    shared = [j for j in si if j >= 0]
                    if shared and rng.random() < 0.5:
                        si.append(shared[0])
                        sl.append(values[shared[0]])
                        continue
                    values.append(sp.Rational(rng.randint(1, 4), 8))
                    si.append(len(values) - 1)
                    sl.append(values[-1])
                else:
                    si.append(-1)
                    sl.append({"relu": sp.Integer(0), "leaky": sp.Rational(1, 10), "f32": F32_001,
                               "linear": sp.Integer(1)}[kind])
            a.append(sl)
            ai.append(np.array(si, dtype=np.int64))
    # keep only used parameters (ties may have left none unused, but renumber anyway)
    used = sorted({int(j) for A in Wi + bi + ai for j in A.ravel() if j >= 0})
    ren = {j: k for k, j in enumerate(used)}
    re = np.vectorize(lambda j: ren[int(j)] if j >= 0 else -1, otypes=[np.int64])
    cn = Network(
        tuple(widths),
        [flint.fmpq_mat(widths[l + 1], widths[l], [_q(v) for row in W[l] for v in row]) for l in range(L)],
        [[_q(v) for v in bl] for bl in b],
        [re(A) if A.size else A for A in Wi], [re(A) if A.size else A for A in bi],
        [[_q(v) for v in sl] for sl in a], [re(A) if A.size else A for A in ai],
        len(used), ("random",))
    X = [[flint.fmpq(rng.randint(-6, 6), rng.randint(1, 3)) for _ in range(widths[0])] for _ in range(n)]
    return cn, X


def residual_net(w1, b1, w2) -> Network:
    """``f(x) = x + w2 relu(w1 x + b1)`` compiled: hidden (relu unit, carrier of x), output ``w2 h + 1 c``."""
    q = flint.fmpq
    return Network(
        (1, 2, 1), [flint.fmpq_mat([[q(w1)], [1]]), flint.fmpq_mat([[q(w2), 1]])], [[q(b1), q(0)], [q(0)]],
        [np.array([[0], [-1]]), np.array([[2, -1]])], [np.array([1, -1]), np.array([-1])],
        [[q(0), q(1)]], [np.array([-1, -1])], 3, ("skip connection",), ["w1", "b1", "w2"])


def conv1d_net(u1, u2, c, v1, v2, d) -> Network:
    """One channel, kernel 2, stride 1 on 3 pixels (two ReLU units), then ``v . h + d``: 6 parameters."""
    q = flint.fmpq
    return Network(
        (3, 2, 1), [flint.fmpq_mat([[q(u1), q(u2), 0], [0, q(u1), q(u2)]]), flint.fmpq_mat([[q(v1), q(v2)]])],
        [[q(c), q(c)], [q(d)]],
        [np.array([[0, 1, -1], [-1, 0, 1]]), np.array([[3, 4]])], [np.array([2, 2]), np.array([5])],
        [[q(0), q(0)]], [np.array([-1, -1])], 6, ("convolution",), ["u1", "u2", "c", "v1", "v2", "d"])


@dataclass
class Oracle:
    """sympy's view of a constrained network: symbolic ``theta``, values, slopes, sample."""

    cn: Network
    X: list[list[sp.Rational]]

    @classmethod
    def of(cls, cn: Network, X) -> Oracle:
        return cls(cn, [[sp.Rational(int(v.p), int(v.q)) for v in row] for row in X])

    def _dense(self, theta):
        cn = self.cn
        rat = lambda v: sp.Rational(int(v.p), int(v.q))  # noqa: E731
        W = [[[theta[int(cn.W_index[l][i, j])] if cn.W_index[l][i, j] >= 0 else rat(cn.W[l][i, j])
               for j in range(cn.widths[l])] for i in range(cn.widths[l + 1])] for l in range(cn.L)]
        b = [[theta[int(cn.b_index[l][i])] if cn.b_index[l][i] >= 0 else rat(cn.b[l][i])
              for i in range(cn.widths[l + 1])] for l in range(cn.L)]
        a = [[theta[int(cn.slope_index[l][v])] if cn.slope_index[l][v] >= 0 else rat(cn.negative_slope[l][v])
              for v in range(cn.widths[l + 1])] for l in range(cn.L - 1)]
        return W, b, a

    def theta(self) -> list[sp.Rational]:
        return [sp.Rational(int(t.p), int(t.q)) for t in self.cn.theta()]

    def pre_activations(self) -> list[list[list[sp.Rational]]]:
        """``Z[i][l-1][v]`` at the current theta (sympy Rationals)."""
        W, b, a = self._dense(self.theta())
        out = []
        for x in self.X:
            h, zs = list(x), []
            for l in range(self.cn.L):
                z = [sum(W[l][i][j] * h[j] for j in range(len(h))) + b[l][i] for i in range(len(b[l]))]
                zs.append(z)
                if l < self.cn.L - 1:
                    h = [zv if zv >= 0 else a[l][v] * zv for v, zv in enumerate(z)]
            out.append(zs)
        return out

    def gamma(self, active=None) -> sp.Matrix:
        """Exact ``Gamma_free`` (rows ``i N_L + o``) by sympy differentiation, ``active[l-1][i][v]`` the sides."""
        k = self.cn.n_params
        t = sp.symbols(f"t0:{k}") if k else ()
        W, b, a = self._dense(list(t))
        Z = self.pre_activations()
        rows = []
        for i, x in enumerate(self.X):
            h = list(x)
            for l in range(self.cn.L):
                z = [sum(W[l][r][j] * h[j] for j in range(len(h))) + b[l][r] for r in range(len(b[l]))]
                if l < self.cn.L - 1:
                    side = [Z[i][l][v] >= 0 if active is None else bool(active[l][i][v]) for v in range(len(z))]
                    h = [zv if s else a[l][v] * zv for v, (zv, s) in enumerate(zip(z, side))]
            for f in z:
                rows.append([sp.diff(f, tj) for tj in t])
        sub = dict(zip(t, self.theta()))
        return sp.Matrix(len(rows), k, lambda r, c: sp.sympify(rows[r][c]).xreplace(sub))

    @staticmethod
    def rank(M: sp.Matrix) -> int:
        """Exact rank over Q of a sympy matrix (FLINT's fraction-free elimination: sympy's is slow here)."""
        if M.rows == 0 or M.cols == 0:
            return 0
        return int(flint.fmpq_mat(M.rows, M.cols, [_q(v) for v in M]).rank())

    def symmetry_dim(self) -> int:
        """``dim S_H`` by sympy: the rescaling constraints solved densely, with the linear units' affine group
        (:func:`constrained_oracle.oracle_stretch_directions`), the orbit tangent's rank."""
        cn = self.cn
        units = [(l, v) for l in range(1, cn.L) for v in range(cn.widths[l])]
        s = sp.symbols(f"s0:{len(units)}") if units else ()
        sym = {u: s[m] for m, u in enumerate(units)}
        scale = lambda l, v: sym.get((l, v), 0)  # noqa: E731
        groups: dict[int, list] = {}
        eqs = []
        for l in range(1, cn.L + 1):
            for i in range(cn.widths[l]):
                for j in range(cn.widths[l - 1]):
                    fac = scale(l, i) - scale(l - 1, j)
                    idx = int(cn.W_index[l - 1][i, j])
                    if idx >= 0:
                        groups.setdefault(idx, []).append(fac)
                    elif cn.W[l - 1][i, j] != 0:
                        eqs.append(fac)
                idx = int(cn.b_index[l - 1][i])
                if idx >= 0:
                    groups.setdefault(idx, []).append(scale(l, i))
                elif cn.b[l - 1][i] != 0:
                    eqs.append(scale(l, i))
        for l in range(1, cn.L):
            for v in range(cn.widths[l]):
                if cn.slope_index[l - 1][v] >= 0:
                    groups.setdefault(int(cn.slope_index[l - 1][v]), []).append(sp.Integer(0))
        for facs in groups.values():
            eqs += [f - facs[0] for f in facs[1:]]
        if not s:
            return 0
        A = sp.Matrix([[sp.diff(e, si) for si in s] for e in eqs]) if eqs else sp.zeros(0, len(s))
        basis = A.nullspace() if eqs else [sp.eye(len(s))[:, m] for m in range(len(s))]
        theta = self.theta()
        cols = []
        for vec in basis:
            sub = dict(zip(s, vec))
            cols.append([sp.sympify(groups[j][0]).subs(sub) * theta[j] for j in range(cn.n_params)])
        from constrained_oracle import (  # the linear units' group, composition moves, slope trades (test oracle)
            oracle_composition_directions,
            oracle_slope_trades,
            oracle_stretch_directions,
        )

        cols += oracle_stretch_directions(cn) + oracle_composition_directions(cn) + oracle_slope_trades(cn)
        return self.rank(sp.Matrix(cols)) if cols else 0
