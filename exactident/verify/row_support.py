"""The rows of ``Gamma K`` that can be nonzero, and ``Gamma K = 0`` checked on them (the verifier's own).

:class:`GammaRowSupport` finds, exactly and from the case, the samples where a kernel column can
give a nonzero row of ``Gamma K`` (a neuron inactive there, or its touched inputs at their common
values, contributes nothing) and checks the product there, mod primes
(:func:`gamma_product_is_zero`, :func:`gamma_columns_mod_p`: per-sample sums, never ``Gamma``
itself) or exactly in integers on a small support (:meth:`GammaRowSupport.exactly_zero`).

Helpers of :mod:`exactident.verify.rank` and :mod:`exactident.verify.rank_kernel` (kept apart for size).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import flint
import numpy as np

from exactident.model.gamma_modular import ModularData
from exactident.model.integer_forward import common_denominator as common_denominator_of

__all__ = ["EXACT_SUPPORT_SAMPLES", "GammaRowSupport", "gamma_columns_mod_p", "gamma_product_is_zero"]


def gamma_columns_mod_p(net, X, pattern, fixed, q: int, cols: np.ndarray, avoid: int, data: list) -> np.ndarray:
    """``Gamma mod q`` on the free columns ``cols`` only (rows as ``gamma_mod_p``): ``D_l[:, v] h_{l-1}[j]``.

    The backpropagation of :func:`exactident.model.gamma_modular.gamma_mod_p` (Prop. 10), then one
    column per parameter: the cost of a kernel check on a sparse ``K`` is its support, not ``dim``.
    ``data``: a cache list, empty or holding the case's ``ModularData`` (filled on first use).
    """
    from exactident.linalg.modular import require_prime
    from exactident.model.fixed_edges import free_parameters
    from exactident.model.gamma_modular import _backprop_mod_p

    require_prime(q, avoid)
    data[:] = data or [ModularData(net, X)]
    H, D = _backprop_mod_p(net, X, pattern, q, data[0])
    params = free_parameters(net, fixed)
    N_L = net.widths[-1]
    out = np.empty((len(X) * N_L, len(cols)), dtype=np.int64)
    for t, c in enumerate(cols):
        prm = params[int(c)]
        d = D[prm.l - 1][:, prm.i]
        out[:, t] = d if prm.j is None else (d * np.repeat(H[prm.l - 1][:, prm.j], N_L)) % q
    return out


def gamma_product_is_zero(net, X, pattern, fixed, q: int, cols: list[dict[int, int]], avoid: int,
                          data: list) -> bool:
    """Is ``Gamma K_c = 0 mod q`` for every sparse integer column ``K_c`` of ``cols``?

    By Prop. 10 the row ``(i, k)`` of ``Gamma K_c`` is ``sum_v D_l[(i, k), v] u_v(i)`` with
    ``u_v(i) = sum_j h_{l-1}(x_i)[j] K_c[W_l[v, j]] + K_c[b_l[v]]`` over the neurons ``v`` that ``K_c``
    touches: ``u_v`` is one value per sample, so the cost is ``n`` per nonzero of ``K_c`` plus ``n N_L``
    per neuron, not ``n N_L`` per nonzero.  ``D`` and ``h`` mod q from the backpropagation of
    :func:`exactident.model.gamma_modular.gamma_mod_p`; ``data`` as for :func:`gamma_columns_mod_p`.
    """
    from exactident.linalg.modular import require_prime
    from exactident.model.fixed_edges import free_parameters
    from exactident.model.gamma_modular import _backprop_mod_p

    require_prime(q, avoid)
    data[:] = data or [ModularData(net, X)]
    H, D = _backprop_mod_p(net, X, pattern, q, data[0])
    return _columns_are_zero(H, D, free_parameters(net, fixed), net.widths[-1], q, cols)


def _columns_are_zero(H: list[np.ndarray], D: list[np.ndarray], params: list, N_L: int, q: int,
                      cols: list[dict[int, int]]) -> bool:
    """``sum_v D_l[:, v] u_v = 0 mod q`` for each column (the sum of :func:`gamma_product_is_zero`)."""
    return all(_plan_is_zero(_plan(col, params), H, D, N_L, q) for col in cols)


def _plan(col: dict[int, int], params: list) -> list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, list]]:
    """Per layer ``l`` a column touches: its inputs ``js`` (``-1``: the bias), neurons ``vs``, and each
    nonzero as ``(row into js, column into vs, value)``: ``u = [h_{l-1}, 1][:, js] K_l`` in one product."""
    by_layer: dict[int, tuple[list[int], list[int], list[int]]] = {}
    for c, v in col.items():
        if v:
            prm = params[c]
            js, vs, values = by_layer.setdefault(prm.l, ([], [], []))
            js.append(-1 if prm.j is None else prm.j)
            vs.append(prm.i)
            values.append(v)
    out = []
    for l, (js, vs, values) in sorted(by_layer.items()):
        j_idx, j_at = np.unique(np.array(js, dtype=np.int64), return_inverse=True)
        v_idx, v_at = np.unique(np.array(vs, dtype=np.int64), return_inverse=True)
        out.append((l, j_idx, v_idx, j_at.ravel(), v_at.ravel(), values))
    return out


def _plan_is_zero(plan: list, H: list[np.ndarray], D: list[np.ndarray], N_L: int, q: int,
                  rows: np.ndarray | None = None) -> bool:
    """``Gamma K_c = 0 mod q`` on the rows of ``D`` (of the samples ``rows`` only, when given) for a
    column planned by :func:`_plan`."""
    from exactident.linalg.modular import matmul_mod

    n = len(H[0]) if rows is None else len(rows)
    idx = None if rows is None else (rows[:, None] * N_L + np.arange(N_L)).ravel()
    total = np.zeros(n * N_L, dtype=np.int64)
    for l, j_idx, v_idx, j_at, v_at, values in plan:
        K_l = np.zeros((len(j_idx), len(v_idx)), dtype=np.int64)
        K_l[j_at, v_at] = [v % q for v in values]  # each (input, neuron) at most once: a parameter
        js = np.maximum(j_idx, 0)
        h = H[l - 1][:, js] if rows is None else H[l - 1][np.ix_(rows, js)]
        Hl = np.where(j_idx < 0, 1, h).astype(np.int64)
        U = matmul_mod(Hl, K_l, q)  # u_v(i) mod q, n x touched neurons
        d = D[l - 1][:, v_idx] if idx is None else D[l - 1][np.ix_(idx, v_idx)]
        # residues below 2^31: each product below 2^62, reduced before the sum over neurons
        total = (total + ((d * np.repeat(U, N_L, axis=0)) % q).sum(axis=1)) % q
    return not total.any()


#: A kernel column whose row support has at most this many samples is checked exactly in integers
#: (:meth:`GammaRowSupport.exactly_zero`, one block of ``Gamma``), not mod its primes (up to 120 backpropagations).
EXACT_SUPPORT_SAMPLES = 64

#: A kernel column whose bound on ``|Gamma K_c|`` needs more than this many primes is checked exactly in integers
#: too: one integer pass over its support (``Gamma``'s integers from the case, once for all columns) costs less than
#: that many backpropagations mod p (random 16x4: 25 columns of up to 75 primes, 5.6 s mod p).
EXACT_ABOVE_PRIMES = 8

#: Above this share of the samples in the supports, :meth:`GammaRowSupport.exactly_zero` runs its backward pass on
#: every sample (kept for its next call), else on those samples only (digits 64-32-32-10, supports of a few
#: samples: the whole check 0.75 -> 0.10 s).
_WHOLE_PASS_SHARE = 0.5

#: Entries of ``M Gamma`` built at a time by :meth:`GammaRowSupport.exactly_zero` (a row block: integers of
#: hundreds of bits each, a few MB, whatever the support).
_EXACT_BLOCK_ENTRIES = 1 << 15


def _int_dot(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``A @ B`` (object arrays of int or fmpz) by one FLINT product, exactly:
    the integers of numpy's object ``dot``, as ``fmpz`` objects (they mix with ints exactly).

    >>> A = np.array([[2**70, -1], [3, 0]], dtype=object); B = np.array([[1], [5]], dtype=object)
    >>> _int_dot(A, B).tolist() == A.dot(B).tolist()
    True
    """
    if 0 in A.shape or 0 in B.shape:
        return A.dot(B)
    P = flint.fmpz_mat(A.tolist()) * flint.fmpz_mat(B.tolist())
    out = np.empty((A.shape[0], B.shape[1]), dtype=object)
    out[:, :] = P.tolist()
    return out


class GammaRowSupport:
    """``Gamma K_c = 0 mod q`` checked on the samples where ``Gamma K_c`` can be nonzero, found exactly.

    Row ``(i, k)`` of ``Gamma K_c`` is ``sum D_l[(i, k), v] u_v(i)`` over the neurons ``(l, v)`` that
    ``K_c`` touches (Prop. 10, :func:`gamma_product_is_zero`), and ``D_l[:, v]`` is zero on the rows of
    a sample where hidden neuron ``v`` is inactive.  Let ``c_j`` be the most common value of
    ``h_{l-1}[j]`` over the sample (exact, from the integer forward pass of the case) and
    ``r_v = K_c[b_l[v]] + sum_j c_j K_c[W_l[v, j]]`` (exact integers): when ``r_v = 0``,
    ``u_v(i) = sum_j (h_{l-1}(x_i)[j] - c_j) K_c[W_l[v, j]]`` vanishes on every sample where each input
    ``j`` that ``K_c`` touches at ``v`` takes its common value.  So sample ``i``'s rows of ``Gamma K_c``
    are zero unless some touched ``(l, v)`` is active at ``x_i`` (output neurons always are) and either
    ``r_v != 0`` or a touched ``h_{l-1}(x_i)[j] != c_j``: the *row support* of ``K_c``.  That is what
    makes the shifted kernel vectors of :mod:`exactident.ranks.shifted` cheap to check: their shifted
    columns cancel ``r_v`` by construction, so their support is the few samples ``T_j`` of their block,
    and ``Gamma K_c = 0`` is checked mod q on those rows only (rows of ``Gamma`` for a sample depend on that
    sample alone, so the sub-case of those samples gives them), never on all ``n N_L`` rows.  A column whose
    ``r_v`` does not vanish is checked on the samples where its neurons are active, hence everywhere at worst.

    Everything is recomputed from the case (``net``, ``X``) and the caller's ``pattern``; if the pattern
    disagrees with the sign of a nonzero pre-activation (then ``Gamma``'s ``h = z * pattern`` is not
    ``relu(z)``), every sample is in every support.  Called as ``product_is_zero(q, cols)`` by
    :func:`~exactident.verify.rank_kernel.zero_by_columns` (integer columns: a positive multiple of ``K_c``
    has the same support).
    """

    def __init__(self, net, X, pattern, fixed, avoid: int, data: list | None = None) -> None:
        from exactident.model.fixed_edges import free_parameters

        self.net, self.X, self.fixed, self.avoid = net, X, fixed, avoid
        self.pattern = [np.asarray(a, dtype=bool) for a in pattern]
        self.params = free_parameters(net, fixed)
        self.n = len(X)
        self._fw: Any = None
        self._H: dict[int, np.ndarray] = {}
        self._Zs: dict[int, np.ndarray] = {}
        self._moved: dict[tuple[int, int], tuple[int, np.ndarray]] = {}
        self._consistent: bool | None = None
        self._support: dict[int, tuple[dict, bytes]] = {}  # id(col) -> (col kept alive, support mask)
        self._subcases: dict[bytes, tuple[np.ndarray, Any, list, list]] = {}
        self._full: list = [] if data is None else data  # the case's ModularData, built once (may be shared)
        self._plan_of: dict[int, tuple[dict, list]] = {}
        self._bp: Any = None

    def _forward(self):
        if self._fw is None:
            from exactident.model.integer_forward import integer_forward

            self._fw = integer_forward(self.net, self.X)
        return self._fw

    def _Z(self, l: int) -> np.ndarray:
        """``Z_int[l-1]`` of the exact forward pass as an ``(n, N_l)`` object array of ``fmpz`` (built once)."""
        if l not in self._Zs:
            Z = np.empty((self.n, self.net.widths[l]), dtype=object)
            if Z.size:
                Z[:, :] = self._forward().Z_int[l - 1].tolist()
            self._Zs[l] = Z
        return self._Zs[l]

    def _pattern_is_relu(self) -> bool:
        """Does the pattern agree with the sign of every nonzero hidden pre-activation (so ``h = relu(z)``)?"""
        if self._consistent is None:
            ok = True
            for l in range(1, self.net.L):
                Z = self._Z(l)
                mask = self.pattern[l - 1]
                if mask.shape != Z.shape or (mask & (Z < 0)).any() or (~mask & (Z > 0)).any():
                    ok = False
                    break
            self._consistent = ok
        return self._consistent

    def _common(self, l: int, j: int) -> tuple[int, np.ndarray]:
        """``(C_j, moved)``: the most common integer ``H_int[l-1][:, j]`` and the samples where it differs."""
        key = (l, j)
        if key not in self._moved:
            if l not in self._H:
                fw, n = self._forward(), self.n
                self._H[l] = np.array([int(v) for v in fw.H_int[l - 1].entries()],
                                      dtype=object).reshape(n, self.net.widths[l - 1])
            column = self._H[l][:, j]
            mode = Counter(column.tolist()).most_common(1)[0][0] if self.n else 0
            self._moved[key] = (mode, column != mode)
        return self._moved[key]

    def _plans(self, col: dict[int, int]) -> list:
        hit = self._plan_of.get(id(col))
        if hit is None or hit[0] is not col:
            hit = self._plan_of[id(col)] = (col, _plan(col, self.params))
        return hit[1]

    def support(self, col: dict[int, int]) -> np.ndarray:
        """The row support of ``col`` (class docstring): a bool mask over the samples."""
        hit = self._support.get(id(col))
        if hit is not None and hit[0] is col:
            return np.frombuffer(hit[1], dtype=bool)
        n, L = self.n, self.net.L
        by_neuron: dict[tuple[int, int], dict[int | None, int]] = {}
        for c, v in col.items():
            if v:
                prm = self.params[c]
                by_neuron.setdefault((prm.l, prm.i), {})[prm.j] = v
        S = np.zeros(n, dtype=bool)
        for (l, v), entries in by_neuron.items():
            active = self.pattern[l - 1][:, v] if l < L else np.ones(n, dtype=bool)
            if l > 1 and not self._pattern_is_relu():
                S |= active
                continue
            den = self._forward().den[l - 1]  # h_{l-1} = H_int[l-1] / den exactly
            weights = [(j, w) for j, w in entries.items() if j is not None]
            if entries.get(None, 0) * den + sum(self._common(l, j)[0] * w for j, w in weights) != 0:
                S |= active  # r_v != 0
                continue
            moved = np.zeros(n, dtype=bool)
            for j, _w in weights:
                moved |= self._common(l, j)[1]
            S |= active & moved
        self._support[id(col)] = (col, S.tobytes())
        return S

    def _backprop_int(self, lowest: int = 1, samples: np.ndarray | None = None
                      ) -> tuple[list[np.ndarray], list[int], list[np.ndarray], list[int]]:
        """Exact integers ``D_l = Dint_l / e_l`` (rows ``(i, k)``) and ``h_{l-1} = Hint_{l-1} / s_{l-1}``, ``l = 1..L``.

        ``h_{l-1}`` is ``z_{l-1}`` where the pattern is on and 0 elsewhere (as ``Gamma`` reads it), ``D_L`` the
        identity on each sample's ``N_L`` rows and ``D_l = (D_{l+1} W_{l+1}) * pattern_l`` (Prop. 10).
        ``D_l`` and ``Hint_{l-1}`` for ``l >= lowest`` only (the layers the columns touch: the deepest ``D_l``
        have the most bits), ``e`` and ``s`` for every layer.  With ``samples`` (sorted indices), on those
        samples only, in that order (a sample's rows depend on that sample alone); else on all of them, kept
        for the next call.
        """
        net, n, L = self.net, self.n, self.net.L
        if self._bp is None:
            e, dW = [1] * L, [1] * L
            for l in range(L - 1, 0, -1):  # W_{l+1} = Wint / dW_{l+1}
                dW[l] = common_denominator_of(net.W[l].entries())
                e[l - 1] = e[l] * dW[l]
            self._bp = ([None] * L, e, [None] * L, [int(self._forward().den[l]) for l in range(L)], dW)
        D, e, H, s, dW = self._bp
        if samples is not None:  # a fresh pass on the subset, not kept
            D, H = [None] * L, [None] * L
        take = slice(None) if samples is None else samples
        m = n if samples is None else len(samples)
        N_L = net.widths[-1]
        if D[L - 1] is None:
            D[L - 1] = np.tile(np.eye(N_L, dtype=np.int64), (m, 1)).astype(object)
        for l in range(L - 1, lowest - 1, -1):
            if D[l - 1] is None:
                W = net.W[l]
                Wint = np.array([int(v.p) * (dW[l] // int(v.q)) for v in W.entries()], dtype=object)
                mask = np.repeat(self.pattern[l - 1][take], N_L, axis=0)
                D[l - 1] = np.where(mask, _int_dot(D[l], Wint.reshape(W.nrows(), W.ncols())), 0).astype(object)
        for l in range(max(lowest, 1), L + 1):
            if H[l - 1] is None:
                if l == 1:
                    H0 = np.array([int(v) for v in self._forward().H_int[0].entries()] or [0], dtype=object)
                    H[0] = H0[:n * net.widths[0]].reshape(n, net.widths[0])[take]
                else:
                    H[l - 1] = np.where(self.pattern[l - 2][take], self._Z(l - 1)[take], 0).astype(object)
        return D, e, H, s  # filled for the layers asked

    def exactly_zero(self, cols: list[dict[int, int]]) -> bool:
        """``Gamma K_c = 0`` exactly over Z for every column, on the rows of its row support (no prime).

        Row ``(i, k)`` of ``Gamma K_c`` is ``sum_l sum_v D_l[(i, k), v] (sum_j h_{l-1}(x_i)[j] K_c[W_l[v, j]] +
        K_c[b_l[v]])`` (Prop. 10), computed in integers from the exact forward pass of the case
        (``_backprop_int``, on the samples of the supports only) and scaled by one positive integer.  Only the
        samples of :meth:`support` are computed: outside them every row is zero exactly (class docstring).  For
        the columns whose bound on ``|Gamma K_c|`` needs more than ``EXACT_ABOVE_PRIMES`` primes, or whose row
        support has at most ``EXACT_SUPPORT_SAMPLES`` samples.
        """
        if not any(cols):
            return True
        from math import lcm

        L = self.net.L
        groups: dict[bytes, list[dict[int, int]]] = {}
        for col in cols:
            S = self.support(col)
            if S.any():  # an empty support: Gamma K_c = 0 exactly
                groups.setdefault(S.tobytes(), []).append(col)
        if not groups:
            return True
        union = np.zeros(self.n, dtype=bool)
        for key in groups:
            union |= np.frombuffer(key, dtype=bool)
        needed = np.flatnonzero(union)
        samples = None if len(needed) > _WHOLE_PASS_SHARE * self.n else needed  # most samples: the whole pass (kept)
        lowest = min((self.params[c].l for col in cols for c, v in col.items() if v), default=L)
        D, e, H, s = self._backprop_int(lowest, samples)
        M = lcm(*(e[l - 1] * s[l - 1] for l in range(1, L + 1)))
        at = np.arange(self.n) if samples is None else np.searchsorted(needed, np.arange(self.n))
        return all(self._group_is_zero(at[np.flatnonzero(np.frombuffer(key, dtype=bool))], todo, D, e, H, s, M)
                   for key, todo in groups.items())

    def _group_is_zero(self, rows: np.ndarray, todo: list[dict[int, int]], D: list, e: list, H: list, s: list,
                       M: int) -> bool:
        """``Gamma K = 0`` exactly on the rows of the samples ``rows`` for the columns ``todo`` (one row support).

        ``Gamma`` restricted to those rows and to the parameters the columns touch is built in integers,
        ``Dint_l[(i, k), v] Hint_{l-1}(x_i)[j] = e_l s_{l-1} D_l[(i, k), v] h_{l-1}(x_i)[j]`` (``h_{l-1}[j]``
        read as 1 for the bias; Prop. 10), in blocks of rows, and multiplied in one FLINT product per block
        by ``K`` with the rows of layer ``l`` scaled by ``M / (e_l s_{l-1})``: the product is ``M Gamma K``.
        The entries of ``K`` (thousands of bits on trained nets) enter C products only.
        """
        N_L = self.net.widths[-1]
        entries = [(t, (self.params[c].l, self.params[c].i, -1 if self.params[c].j is None else self.params[c].j), v)
                   for t, col in enumerate(todo) for c, v in col.items() if v]  # (column, (l, v, j or -1), value)
        at = {key: k for k, key in enumerate(sorted({key for _, key, _ in entries}))}  # by layer, neuron, input
        layers = []
        for l in sorted({l for l, _, _ in at}):
            keys = [key for key in at if key[0] == l]  # consecutive in ``at``, in its order
            layers.append((l, np.array([v for _, v, _ in keys]), np.array([j for _, _, j in keys])))
        K = np.zeros((len(at), len(todo)), dtype=object)
        for t, key, v in entries:  # M / (e_l s_{l-1}) on the few entries of K, not on the block's
            K[at[key], t] += int(v) * (M // (e[key[0] - 1] * s[key[0] - 1]))
        K_flint = flint.fmpz_mat(K.tolist())
        step = max(1, _EXACT_BLOCK_ENTRIES // max(1, len(at) * N_L))
        for r0 in range(0, len(rows), step):
            block = rows[r0:r0 + step]
            idx = (block[:, None] * N_L + np.arange(N_L)).ravel()
            parts = []
            for l, vs, js in layers:
                # Dint_l[:, v] * (Hint_{l-1}[:, j], or s_{l-1} for the bias) = e_l s_{l-1} Gamma's entries
                hj = np.where(js[None, :] < 0, s[l - 1], H[l - 1][np.ix_(block, np.maximum(js, 0))])
                parts.append(D[l - 1][np.ix_(idx, vs)] * np.repeat(hj, N_L, axis=0))
            G = np.concatenate(parts, axis=1)
            if not (flint.fmpz_mat(G.tolist()) * K_flint).is_zero():
                return False
        return True

    def __call__(self, q: int, cols: list[dict[int, int]]) -> bool:
        """``Gamma K_c = 0 mod q`` for every column, each on its row support only."""
        from exactident.linalg.modular import require_prime
        from exactident.model.gamma_modular import ModularData, _backprop_mod_p

        require_prime(q, self.avoid)
        groups: dict[bytes, list[dict[int, int]]] = {}
        for col in cols:
            S = self.support(col)
            if S.any():  # an empty support: Gamma K_c = 0 exactly, nothing to check
                groups.setdefault(S.tobytes(), []).append(col)
        if not groups:
            return True
        N_L = self.net.widths[-1]
        rows_total = sum(int(np.frombuffer(key, dtype=bool).sum()) for key in groups)
        full = None
        self._full[:] = self._full or [ModularData(self.net, self.X)]
        if rows_total >= self.n:  # one backpropagation on every sample, sliced, costs less
            full = _backprop_mod_p(self.net, self.X, self.pattern, q, self._full[0])
        for key, todo in groups.items():
            rows = np.flatnonzero(np.frombuffer(key, dtype=bool))
            if full is not None:
                H, D, sub = full[0], full[1], rows
            else:
                if key not in self._subcases:
                    X_S = [self.X[int(i)] for i in rows]
                    self._subcases[key] = (rows, self._full[0].take(rows), X_S, [a[rows] for a in self.pattern])
                _rows, data, X_S, pattern_S = self._subcases[key]
                H, D = _backprop_mod_p(self.net, X_S, pattern_S, q, data)
                sub = None
            if not all(_plan_is_zero(self._plans(col), H, D, N_L, q, sub) for col in todo):
                return False
        return True
