"""The verifier's own facts on a constrained network: forward pass, ``Gamma_free`` mod p, ``S_H``, ``dim_free``.

Independent of the engine's code paths (nothing of :mod:`exactident.model` but the
:class:`~exactident.model.constrained.ConstrainedNetwork` container and the exact polynomial
primitive :mod:`exactident.model.line_forward`, shared like a BLAS, is used): every fact
a constrained report is checked against is recomputed here from the compiled network
and the sample.

- :func:`integer_forward`: pre-activations of every sample in integers over one scale
  per layer (FLINT ``fmpz_mat`` products, as :mod:`exactident.verify.forward` for the
  plain net), each unit's negative slope applied exactly;
- :func:`gamma_free_mod_p`: ``Gamma_free = d f(X) / d theta`` mod a prime by
  backpropagation on int64 residues (tied dense entries summed per parameter, PReLU
  slopes ``d f / d h_v * min(z_v, 0)``), for any tie resolution;
- :func:`rescaling_symmetry`: the rescalings ``s`` (one log-scale per hidden unit, 0 on
  inputs, outputs and bias sources) that map the family ``W = T theta + c`` to itself for
  every ``theta`` (``s_out - s_in`` equal over each tie group, 0 across a fixed nonzero
  weight, ``s_v = 0`` under a fixed nonzero bias, 0 across a weight tied to a slope),
  their orbit tangent ``S_H`` at ``theta`` exactly over Q, widened by the affine group of linear
  units (:mod:`exactident.verify.linear_symmetry`), ``rank T`` and ``dim_free = rank T - dim S_H``;
- :func:`directional_derivative`: ``Gamma_free(s) delta`` exactly over Q (forward mode),
  to check kernel vectors;
- :func:`softmax_rank_bound`: ``k - dim(S_H + shifts)`` (shifts of every logit by one amount);
- :func:`line_along`: the pre-activations on X along ``theta + t delta`` as polynomials in ``t``
  (the shared primitive :func:`exactident.model.line_forward.line_pass`, which also decides the
  segment ``[0, t0]`` on which they hold); :func:`line_is_constant`: are the outputs on X constant
  for small ``t > 0``; :func:`outputs_at`: ``f_theta(x)`` at one input.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from math import lcm

import flint
import numpy as np

from exactident.model.constrained import ConstrainedNetwork
from exactident.model.line_forward import LinePass, line_pass

__all__ = ["ConstrainedFacts", "Symmetry", "directional_derivative", "gamma_free_mod_p", "integer_forward",
           "line_along", "line_is_constant", "outputs_at", "rank_mod_p", "rescaling_symmetry", "softmax_rank_bound",
           "verifier_primes"]


def _int_rows(M: flint.fmpq_mat) -> tuple[flint.fmpz_mat, int]:
    num, den = M.numer_denom()
    return num, int(den)


def integer_forward(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]]
                    ) -> list[tuple[flint.fmpz_mat, int]]:
    """Pre-activations ``z_l(x^i) = Z_l[i, v] / S_l`` exactly, ``l = 1..L`` (``Z_l`` integers, ``S_l > 0``).

    With ``h_{l-1} = H / S``, ``W_l = W' / d_W``, ``b_l = b' / d_b`` and ``S' = lcm(d_W S, d_b)``:
    ``Z_l = (S' / (d_W S)) H W'^T + (S' / d_b) b'``; a hidden unit with slope ``a_v = p_v / q_v``
    gives ``h = z`` for ``z >= 0`` and ``a_v z`` below, kept on the scale ``S' lcm(q)``.
    """
    n = len(X)
    N0 = cn.widths[0]
    H, S = _int_rows(flint.fmpq_mat(n, N0, [v for row in X for v in row])) if n else (flint.fmpz_mat(0, N0), 1)
    out = []
    for l in range(1, cn.L + 1):
        Wn, dW = _int_rows(cn.W[l - 1])
        bn, db = _int_rows(flint.fmpq_mat(1, cn.widths[l], list(cn.b[l - 1])))
        S_new = lcm(dW * S, db)
        if n:
            Z = H * (Wn.transpose() * (S_new // (dW * S))) \
                + flint.fmpz_mat(n, cn.widths[l], [v * (S_new // db) for v in bn.entries()] * n)
        else:
            Z = flint.fmpz_mat(0, cn.widths[l])
        out.append((Z, S_new))
        if l < cn.L:
            a = cn.negative_slope[l - 1]
            q = lcm(1, *(int(x.q) for x in a))
            up = [int(x.p) * (q // int(x.q)) for x in a]
            N = cn.widths[l]
            H = flint.fmpz_mat(n, N, [z * q if z >= 0 else z * up[c] for row in Z.tolist()
                                      for c, z in enumerate(row)]) if n else flint.fmpz_mat(0, N)
            S = S_new * q
    return out


def _res_int(values, p: int) -> np.ndarray:
    return np.array([int(v) % p for v in values], dtype=np.int64)


def _res_q(values, p: int) -> np.ndarray:
    return np.array([int(v.p) % p * pow(int(v.q), -1, p) % p for v in values], dtype=np.int64)


def _mm(A: np.ndarray, B: np.ndarray, p: int) -> np.ndarray:
    """``A @ B mod p`` (batched) for residues ``< 2**31`` and inner size ``< 2**20``, exactly, by float64 BLAS.

    ``A = A_1 2^16 + A_0`` and ``B = B_1 2^16 + B_0`` (limbs below ``2^16``): each limb product summed over
    fewer than ``2^20`` terms stays below ``2^52``, so the four float64 products are exact integers; they are
    recombined mod p in base ``2^16`` on int64.
    """
    if A.shape[-1] >= 2**20:
        raise ValueError(f"inner size {A.shape[-1]} too large for exact float64 products")
    f = np.float64
    A1, A0 = (A >> 16).astype(f), (A & 0xFFFF).astype(f)
    B1, B0 = (B >> 16).astype(f), (B & 0xFFFF).astype(f)
    hi = (A1 @ B1).astype(np.int64) % p
    mid = ((A1 @ B0).astype(np.int64) + (A0 @ B1).astype(np.int64)) % p
    lo = (A0 @ B0).astype(np.int64) % p
    return ((((((hi << 16) % p + mid) % p) << 16) % p) + lo) % p


def gamma_free_mod_p(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]],
                     forward: list[tuple[flint.fmpz_mat, int]], p: int,
                     active: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """``Gamma_free`` mod ``p``, int64 ``(n N_L, n_params)``: row ``i N_L + o`` is ``d f_o(x^i) / d theta``.

    Parameters
    ----------
    cn : ConstrainedNetwork
    X : n rows of ``N_0`` fmpq (the sample)
    forward : the output of :func:`integer_forward` on ``X``
    p : prime in ``[3, 2**31)`` dividing no denominator of the case (``pow`` raises ``ValueError`` otherwise)
    active : list of bool arrays ``(n, N_l)``, optional
        The side of every (sample, hidden unit): ``True`` slope 1, ``False`` the unit's slope.
        Default ``z >= 0``.  Only the side of a tie (``z = 0``) should differ from the sign.
    """
    n = len(X)
    L, k, N_L = cn.L, cn.n_params, cn.widths[-1]
    Zr = [(_res_int(Z.entries(), p).reshape(n, cn.widths[l + 1]) * pow(S, -1, p)) % p
          for l, (Z, S) in enumerate(forward)]
    Zsign = [np.array([1 if z > 0 else (0 if z == 0 else -1) for z in Z.entries()], dtype=np.int64)
             .reshape(n, cn.widths[l + 1]) for l, (Z, _S) in enumerate(forward[:-1])]
    slopes = [_res_q(a, p) for a in cn.negative_slope]
    sides = [Zsign[l] >= 0 if active is None else np.asarray(active[l], dtype=bool) for l in range(L - 1)]
    # h_l mod p: z on z >= 0, a z below (a tie gives 0 on either side)
    H = [_res_q([v for row in X for v in row], p).reshape(n, cn.widths[0])]
    for l in range(1, L):
        H.append(np.where(Zsign[l - 1] >= 0, Zr[l - 1], (Zr[l - 1] * slopes[l - 1][None, :]) % p))
    W = [_res_q(M.entries(), p).reshape(M.nrows(), M.ncols()) for M in cn.W]
    G = np.zeros((n, N_L, k), dtype=np.int64)
    D = np.broadcast_to(np.eye(N_L, dtype=np.int64), (n, N_L, N_L)).copy()
    for l in range(L, 0, -1):
        I, Ib = np.asarray(cn.W_index[l - 1]), np.asarray(cn.b_index[l - 1])
        wi, wj = np.nonzero(I >= 0)
        wp = I[wi, wj]
        bi = np.nonzero(Ib >= 0)[0]
        bp = Ib[bi]
        params = np.unique(np.concatenate([wp, bp]))
        if params.size and n:
            M = np.zeros((cn.widths[l], params.size, n), dtype=np.int64)
            np.add.at(M, (wi, np.searchsorted(params, wp)), H[l - 1][:, wj].T)
            np.add.at(M, (bi, np.searchsorted(params, bp)), np.ones((bi.size, n), dtype=np.int64))
            G[:, :, params] = (G[:, :, params] + _mm(D, M.transpose(2, 0, 1) % p, p)) % p
        if l > 1:
            post = _mm(D, W[l - 1], p)  # d f / d h_{l-1}
            Is = np.asarray(cn.slope_index[l - 2])
            vi = np.nonzero(Is >= 0)[0]
            if vi.size:
                neg = np.where(Zsign[l - 2][:, vi] < 0, Zr[l - 2][:, vi], 0)
                contrib = (post[:, :, vi] * neg[:, None, :]) % p
                for c, j in enumerate(Is[vi]):
                    G[:, :, j] = (G[:, :, j] + contrib[:, :, c]) % p
            deriv = np.where(sides[l - 2], 1, slopes[l - 2][None, :])
            D = (post * deriv[:, None, :]) % p
    return G.reshape(n * N_L, k)


def rank_mod_p(G: np.ndarray, p: int) -> int:
    """Rank of an int64 residue matrix over Z/pZ (FLINT ``nmod_mat``): a lower bound of its rank over Q."""
    if G.size == 0:
        return 0
    return int(flint.nmod_mat(flint.fmpz_mat(G.tolist()), p).rank())


def verifier_primes(count: int, avoid: int, seed: int = 20261202) -> list[int]:
    """``count`` distinct primes in ``[2**30, 2**31)`` dividing no denominator (``avoid``: their lcm)."""
    rng = random.Random(seed)
    out: list[int] = []
    while len(out) < count:
        q = rng.randrange(2**30, 2**31) | 1
        if flint.fmpz(q).is_prime() and avoid % q and q not in out:
            out.append(q)
    return out


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


def rescaling_symmetry(cn: ConstrainedNetwork) -> Symmetry:
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


def directional_derivative(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]], delta: Sequence[flint.fmpq],
                           active: Sequence[np.ndarray] | None = None,
                           hidden: list[flint.fmpq_mat] | None = None) -> list[flint.fmpq]:
    """``Gamma_free(s) delta`` exactly (forward mode), length ``n N_L`` (row ``i N_L + o``).

    ``active``: the side of every (sample, hidden unit) as in :func:`gamma_free_mod_p`; ``hidden``, when
    given, receives the derivatives ``d z_l . delta`` of the hidden layers (``n x N_l`` each).
    """
    n, zero = len(X), flint.fmpq(0)

    def pick(values, index, shape):
        idx = np.asarray(index).reshape(-1)
        return [delta[int(j)] if j >= 0 else zero for j in idx]

    H = flint.fmpq_mat(n, cn.widths[0], [v for row in X for v in row])
    dH = flint.fmpq_mat(n, cn.widths[0])
    for l in range(1, cn.L + 1):
        N = cn.widths[l]
        dW = flint.fmpq_mat(N, cn.widths[l - 1], pick(None, cn.W_index[l - 1], None))
        db = pick(None, cn.b_index[l - 1], None)
        Z = H * cn.W[l - 1].transpose() + flint.fmpq_mat(n, N, list(cn.b[l - 1]) * n)
        dZ = H * dW.transpose() + dH * cn.W[l - 1].transpose() + flint.fmpq_mat(n, N, db * n)
        if l == cn.L:
            return dZ.entries()
        if hidden is not None:
            hidden.append(dZ)
        a = cn.negative_slope[l - 1]
        da = pick(None, cn.slope_index[l - 1], None)
        hv, dv = [], []
        for i in range(n):
            for v in range(N):
                z, dz = Z[i, v], dZ[i, v]
                side = z >= 0 if active is None else bool(active[l - 1][i, v])
                hv.append(z if z >= 0 else a[v] * z)
                dv.append((dz if side else a[v] * dz) + (da[v] * z if z < 0 else zero))
        H, dH = flint.fmpq_mat(n, N, hv), flint.fmpq_mat(n, N, dv)
    return []


@dataclass
class ConstrainedFacts:
    """Everything the verifier derives from a compiled network and its sample (nothing from a report).

    Attributes
    ----------
    cn : ConstrainedNetwork
    X : n rows of ``N_0`` fmpq
    forward : per layer ``(Z_l, S_l)`` from :func:`integer_forward`
    symmetry : Symmetry
    ties : list of ``(sample, layer, unit)``
        ``z = 0`` at a kinked unit, ordered by layer, then sample, then unit.
    avoid : int
        The lcm of every denominator of the case (no prime dividing it is used).
    """

    cn: ConstrainedNetwork
    X: list[list[flint.fmpq]]
    forward: list[tuple[flint.fmpz_mat, int]]
    symmetry: Symmetry
    ties: list[tuple[int, int, int]]  # (sample, layer, unit) with z = 0 at a kinked unit
    avoid: int  # lcm of every denominator of the case

    @classmethod
    def from_network(cls, cn: ConstrainedNetwork, X: Sequence[Sequence[object]]) -> ConstrainedFacts:
        Xq = [[v if isinstance(v, flint.fmpq) else flint.fmpq(v) for v in row] for row in X]  # type: ignore[call-overload]
        fw = integer_forward(cn, Xq)
        ties = []
        for l in range(1, cn.L):
            kinked = [bool(int(cn.slope_index[l - 1][v]) >= 0 or cn.negative_slope[l - 1][v] != 1)
                      for v in range(cn.widths[l])]
            Z = fw[l - 1][0]
            for i in range(Z.nrows()):
                for v in range(Z.ncols()):
                    if kinked[v] and Z[i, v] == 0:
                        ties.append((i, l, v))
        dens = [int(v.q) for row in Xq for v in row] + [S for _Z, S in fw]
        dens += [int(M.numer_denom()[1]) for M in cn.W] + [int(x.q) for bl in cn.b for x in bl]
        dens += [int(x.q) for a in cn.negative_slope for x in a]
        return cls(cn, Xq, fw, rescaling_symmetry(cn), ties, lcm(1, *dens))

    def sign_pattern(self) -> list[np.ndarray]:
        """The ``z >= 0`` side of every (sample, hidden unit), bool ``(n, N_l)``."""
        return [np.array([z >= 0 for z in Z.entries()], dtype=bool).reshape(Z.nrows(), Z.ncols())
                for Z, _S in self.forward[:-1]]

    def resolution(self, sides: Sequence[bool]) -> list[np.ndarray]:
        """The pattern with tie ``t`` (in the order of ``ties``) on side ``sides[t]``."""
        pat = [P.copy() for P in self.sign_pattern()]
        for (i, l, v), s in zip(self.ties, sides):
            pat[l - 1][i, v] = bool(s)
        return pat

    def gamma_mod_p(self, p: int, active: Sequence[np.ndarray] | None = None) -> np.ndarray:
        """:func:`gamma_free_mod_p` on this sample."""
        return gamma_free_mod_p(self.cn, self.X, self.forward, p, active)


def softmax_rank_bound(cn: ConstrainedNetwork, sym: Symmetry) -> int:
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


def line_along(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]], delta: Sequence[flint.fmpq]) -> LinePass:
    """The pre-activations on ``X`` along ``theta + t delta`` as polynomials in ``t`` (exact).

    The dense direction (weights, biases, PReLU slopes) is read here from ``cn``'s index arrays
    and ``delta`` (length ``n_params``, Q); the polynomial pass is the shared primitive
    :func:`exactident.model.line_forward.line_pass` with each unit's negative-side slope.

    Raises
    ------
    ValueError
        For no sample (``X`` empty).
    """
    if not len(X):
        raise ValueError("line_along: no sample")
    zero = flint.fmpq(0)

    def pick(index) -> list[flint.fmpq]:
        return [delta[int(j)] if j >= 0 else zero for j in np.asarray(index).reshape(-1)]

    dW = [flint.fmpq_mat(cn.widths[l], cn.widths[l - 1], pick(cn.W_index[l - 1])) for l in range(1, cn.L + 1)]
    db = [pick(cn.b_index[l - 1]) for l in range(1, cn.L + 1)]
    da = [pick(cn.slope_index[l - 1]) for l in range(1, cn.L)]
    return line_pass(cn.W, cn.b, dW, db, [list(row) for row in X], slopes=cn.negative_slope, dslopes=da)


def line_is_constant(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]],
                     delta: Sequence[flint.fmpq]) -> tuple[bool, str]:
    """Are the outputs on ``X`` the same at ``theta + t delta`` for every small enough ``t > 0``? (exact)

    Every value along the line is a polynomial in ``t`` near ``0+`` (:func:`line_along`); a unit's
    side for small ``t > 0`` is the sign of its first nonzero coefficient (a unit identically 0
    outputs 0 on either side), and a PReLU slope moves too (``a + t delta_a``).  Constant means
    every output coefficient of degree ``>= 1`` is 0.

    Returns
    -------
    (bool, str)
        The answer and, when False, where the first output moves (``sample i, output o``).
    """
    if not len(X):
        return True, ""
    moving = line_along(cn, X, delta).moving()
    if moving:
        i, o, d, _c = moving[0]
        return False, f"sample {i}, output {o} moves (degree {d} in t)"
    return True, ""


def outputs_at(cn: ConstrainedNetwork, x: Sequence[flint.fmpq], theta: Sequence[flint.fmpq]) -> list[flint.fmpq]:
    """The outputs ``f_theta(x)`` at one input (exact, by :func:`integer_forward`)."""
    Z, S = integer_forward(cn.with_theta(list(theta)), [list(x)])[-1]
    return [flint.fmpq(int(z), S) for z in Z.entries()]
