"""``Gamma_free = d f(X) / d theta`` of a layer graph, the verifier's own: mod a prime, and times a direction exactly.

Independent of the engine's code paths (nothing of :mod:`exactident.model` but the
:class:`~exactident.model.network.Network` container is used):

- :func:`gamma_free_mod_p`: ``Gamma_free`` mod a prime by backpropagation on int64 residues (tied
  dense entries summed per parameter, PReLU slopes ``d f / d h_v * min(z_v, 0)``), for any tie
  resolution; :func:`rank_mod_p` its rank over Z/pZ (a lower bound of the rank over Q);
  :func:`verifier_primes` the verifier's own primes;
- :func:`directional_derivative`: ``Gamma_free(s) delta`` exactly over Q (forward mode), to check
  kernel vectors and entering directions.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import flint
import numpy as np

from exactident.model.network import Network

__all__ = ["directional_derivative", "gamma_free_mod_p", "rank_mod_p", "usable_prime", "verifier_primes"]


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


def gamma_free_mod_p(cn: Network, X: Sequence[Sequence[flint.fmpq]],
                     forward: list[tuple[flint.fmpz_mat, int]], p: int,
                     active: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """``Gamma_free`` mod ``p``, int64 ``(n N_L, n_params)``: row ``i N_L + o`` is ``d f_o(x^i) / d theta``.

    Parameters
    ----------
    cn : Network
    X : n rows of ``N_0`` fmpq (the sample)
    forward : the output of :func:`exactident.verify.forward.integer_forward` on ``X``
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



def directional_derivative(cn: Network, X: Sequence[Sequence[flint.fmpq]], delta: Sequence[flint.fmpq],
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


def usable_prime(p: int, avoid: int) -> bool:
    """A certificate's prime is usable: prime, in ``[2**20, 2**31)``, dividing no denominator (``avoid``)."""
    return 2**20 <= p < 2**31 and bool(flint.fmpz(p).is_prime()) and avoid % p != 0
