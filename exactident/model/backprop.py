"""The one exact builder of ``Gamma_free = d f(X) / d theta``, over Q or Z/pZ, for any network (Prop. 10).

Every exact Jacobian of the package comes from :func:`gamma_free_columns`: the MLP's ``Gamma``
(:func:`exactident.model.gamma.gamma_exact`, :func:`exactident.model.gamma_modular.gamma_mod_p`)
and a compiled layer graph's ``Gamma_free`` (:func:`exactident.model.gamma_free.gamma_free_exact`,
:func:`exactident.model.gamma_free.gamma_free_mod_p`), through :func:`jacobian_exact` and
:func:`jacobian_mod_p`.  A network is its :class:`Layout` (``W = T theta + c``: which free
parameter each dense weight, bias and slope is; a plain MLP's ``T`` selects every weight and
bias but its fixed edges, :mod:`exactident.model.fixed_edges`) and its values in the ring.

With the activation pattern held fixed (every kinked unit's derivative ``1`` or its
negative slope ``a``), ``f(X)`` is a polynomial in ``theta`` and its Jacobian is one
forward pass and one backpropagation (the paper's Prop. 10, with slopes): with
``D_l = d f / d z_l`` (rows ``i N_L + k``) and ``h_{l-1}`` the hidden values,

- the column of a parameter ``theta_j`` feeding weight entries ``W_l[i, k]`` and bias
  entries ``b_l[i]`` is ``sum D_l[:, i] * h_{l-1}[:, k] + sum D_l[:, i]`` over them
  (a tied parameter *sums* its dense columns: ``Gamma_free = Gamma_dense T``);
- the column of a PReLU slope ``theta_j = a_v`` is ``sum_v G_l[:, v] * min(z_v, 0)``,
  ``G_l = d f / d h_l``.

The structure chooses the route, not the type (as :mod:`exactident.numeric.gamma_free` does
for floats): when ``T`` only selects dense entries and every slope is 0 (the MLP, with its
fixed edges dropped, or a layer graph of that structure), the dense columns ``D_l (x) h_{l-1}``
and ``D_l`` are written straight into the free columns in row blocks; otherwise each block of
rows sums its entries straight into the parameter columns (the dense Jacobian of a
convolution is never built).  The same code runs on numpy object arrays of ``fmpq`` (Q,
matrix products by FLINT) and on int64 residues mod p (products by
:func:`exactident.linalg.modular.matmul_mod`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from exactident.errors import InvariantViolation
from exactident.linalg.modular import matmul_mod, require_prime
from exactident.model.integer_forward import common_denominator
from exactident.model.param_index import index_of_free

__all__ = [
    "Layout",
    "ModularData",
    "Scaled",
    "column_blocks",
    "gamma_free_columns",
    "hidden_and_backprop_mod_p",
    "jacobian_exact",
    "jacobian_mod_p",
    "layout",
]


#: Limbs of :class:`Scaled`: ``|x| = sum_j L_j 2^(31 j)`` with int64 limbs ``0 <= L_j < 2^31``.
_LIMB_BITS = 31


class Scaled:
    """A rational matrix as ``ints / den`` (object array of Python ints), reduced mod p on demand.

    The integers are also kept as int64 limbs in base ``2^31`` (with a sign), so each
    reduction mod p is a few numpy operations (Horner on the limbs), not one Python-int
    operation per entry.

    Examples
    --------
    ``(-2^70 - 4) / 3`` and ``1 / 2`` mod 101, against Python's own modular arithmetic:

    >>> s = Scaled([flint.fmpq(-(2**70) - 4, 3), flint.fmpq(1, 2)], (1, 2))
    >>> s.mod(101).tolist() == [[(-(2**70) - 4) * pow(3, -1, 101) % 101, pow(2, -1, 101)]]
    True
    """

    def __init__(self, values: Sequence[Any], shape: tuple[int, int]) -> None:
        values = [flint.fmpq(v) for v in values]
        self.den = common_denominator(values)
        ints = [int(v.p) * (self.den // int(v.q)) for v in values]
        self.ints = np.array(ints or [0], dtype=object)[:len(values)].reshape(shape)
        mags = [abs(x) for x in ints]
        n_limbs = max(1, -(-max(mags, default=0).bit_length() // _LIMB_BITS))
        mask = (1 << _LIMB_BITS) - 1
        self._negative = np.array([x < 0 for x in ints], dtype=bool).reshape(shape)
        self._limbs = [np.array([(m >> (_LIMB_BITS * j)) & mask for m in mags] or [0],
                                dtype=np.int64)[:len(ints)].reshape(shape) for j in range(n_limbs)]

    def take(self, rows: Sequence[int] | np.ndarray) -> Scaled:
        """These rows (first axis), over the same ``den``: no entry is rescaled or re-read."""
        idx = np.asarray(rows, dtype=np.int64)
        out = object.__new__(Scaled)
        out.den, out.ints, out._negative = self.den, self.ints[idx], self._negative[idx]
        out._limbs = [limb[idx] for limb in self._limbs]
        return out

    def mod(self, p: int) -> np.ndarray:
        if self.den % p == 0:
            raise InvariantViolation(f"prime {p} divides a denominator of the data")
        require_prime(p)  # p < 2^31: every product below is < 2^62
        base = pow(2, _LIMB_BITS, p)
        acc = np.zeros(self._negative.shape, dtype=np.int64)
        for limb in reversed(self._limbs):  # Horner: acc < p, acc * base < 2^62
            acc = (acc * base + limb % p) % p
        acc = np.where(self._negative, (p - acc) % p, acc)
        return acc * pow(self.den, -1, p) % p


class ModularData:
    """``X``, ``W_l``, ``b_l`` (and a compiled network's slopes) scaled to integers once, for many primes.

    Speed only: :func:`exactident.model.backprop.jacobian_mod_p` reduces these mod each prime.  ``a`` is None for a
    plain :class:`~exactident.model.network.Network` (every slope 0).
    """

    def __init__(self, net: Any, X: Sequence[Sequence[flint.fmpq]]) -> None:
        self.X = Scaled([v for row in X for v in row], (len(X), net.widths[0]))
        self.W = [Scaled(W.entries(), (W.nrows(), W.ncols())) for W in net.W]
        self.b = [Scaled(b, (1, len(b))) for b in net.b]
        # a ReLU-only network: every slope 0, the fast path without slope arrays
        self.a = None if net.is_relu_only() else [Scaled(a, (1, len(a))) for a in net.negative_slope]

    def take(self, rows: Sequence[int] | np.ndarray) -> ModularData:
        """The same data on the samples ``X[rows]`` (:meth:`Scaled.take`: ``X`` keeps its denominator)."""
        out = object.__new__(ModularData)
        out.X, out.W, out.b, out.a = self.X.take(rows), self.W, self.b, self.a
        return out


@dataclass
class Layout:
    """``T`` of ``W = T theta + c``: which free parameter each dense entry is (``-1``: a fixed entry).

    Attributes
    ----------
    widths : tuple of int
    W_index, b_index : lists of int64 arrays ``(N_l, N_{l-1})`` and ``(N_l,)``, ``l = 1..L``
    slope_index : list of int64 arrays ``(N_l,)``, hidden layers
        ``-1``: the slope is a fixed value; ``j >= 0``: it is ``theta_j``.
    n_params : int
        Columns of ``Gamma_free``.
    dense : int64 array or None
        The dense positions of the free parameters (per layer ``W_l`` row-major then ``b_l``) when
        ``T`` only selects entries, in that order, and no slope is free; else None.  With every
        fixed slope 0 as well, ``Gamma_free`` is these columns of the dense Jacobian
        (the MLP's route, :func:`exactident.model.backprop.gamma_free_columns`).
    """

    widths: tuple[int, ...]
    W_index: list[np.ndarray]
    b_index: list[np.ndarray]
    slope_index: list[np.ndarray]
    n_params: int
    dense: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.dense is not None or any((s >= 0).any() for s in self.slope_index):
            return
        idx = np.concatenate([I.reshape(-1) for l in range(len(self.W_index))
                              for I in (self.W_index[l], self.b_index[l])] or [np.zeros(0, dtype=np.int64)])
        free = np.flatnonzero(idx >= 0)
        if free.size == self.n_params and np.array_equal(idx[free], np.arange(free.size)):
            self.dense = free

    @property
    def L(self) -> int:
        return len(self.widths) - 1


def layout(net: Any, free: Sequence[int] | None = None) -> Layout:
    """The :class:`Layout` of a network: a compiled one's own ``T``; a plain one's ``free`` dense positions.

    Parameters
    ----------
    net : Network
    free : list of int, optional
        For a plain network: the dense positions of its free parameters
        (:func:`exactident.model.gamma.free_columns`: every weight and bias but the fixed edges).
        Default: all of them.
    """
    widths = tuple(net.widths)
    if not net.is_plain():  # a layer graph: its own T (a plain network's T is given by ``free``)
        return Layout(widths, list(net.W_index), list(net.b_index), list(net.slope_index), int(net.n_params))
    if free is None:
        free = range(sum(widths[l] * (widths[l - 1] + 1) for l in range(1, len(widths))))
    W_index, b_index = index_of_free(widths, free)
    slope_index = [np.full(widths[l], -1, dtype=np.int64) for l in range(1, len(widths) - 1)]
    # a plain network's T selects its free entries in the paper's order: the dense route's columns
    return Layout(widths, W_index, b_index, slope_index, len(free), np.asarray(free, dtype=np.int64))


class _Ring:
    """The arrays' ring: Q (numpy object arrays of ``fmpq``) or Z/pZ (int64 residues in ``[0, p)``)."""

    def __init__(self, p: int | None) -> None:
        self.p = p
        self.dtype: Any = object if p is None else np.int64
        self.zero: Any = flint.fmpq(0) if p is None else 0
        self.one: Any = flint.fmpq(1) if p is None else 1

    def red(self, a: np.ndarray) -> np.ndarray:
        return a if self.p is None else a % self.p

    def mm(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        if self.p is not None:
            return matmul_mod(np.ascontiguousarray(A), np.ascontiguousarray(B), self.p)
        # FLINT's product: numpy's object dot would call fmpq.__mul__/__add__ per term
        M = _fmpq_mat(A) * _fmpq_mat(B)
        return _object_array(M.entries(), (A.shape[0], B.shape[1]))

    def eye_rows(self, n: int, N_L: int) -> np.ndarray:
        """``n`` copies of the ``N_L x N_L`` identity stacked (``d f / d z_L``, rows ``i N_L + k``)."""
        E = np.tile(np.eye(N_L, dtype=np.int64), (n, 1))
        return E if self.p is not None else np.where(E == 1, self.one, self.zero)


def _all_zero(a: np.ndarray) -> bool:
    """Every entry 0 (int64 residues or ``fmpq``): a ReLU layer."""
    return not bool(np.any(a != 0))


def _fmpq_mat(A: np.ndarray) -> flint.fmpq_mat:
    return flint.fmpq_mat(A.shape[0], A.shape[1], A.ravel().tolist())


def _object_array(values: Sequence[Any], shape: tuple[int, ...]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out.reshape(shape)


def _exact_values(net: Any, X: Sequence[Sequence[Any]]) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray],
                                                                  list[np.ndarray]]:
    """``X``, ``W_l``, ``b_l`` and the slopes (none for a plain network: every slope 0) as object arrays of ``fmpq``."""
    n, w = len(X), net.widths
    Xv = _object_array([flint.fmpq(v) for row in X for v in row], (n, w[0]))
    Wv = [_object_array(W.entries(), (W.nrows(), W.ncols())) for W in net.W]
    bv = [_object_array([flint.fmpq(v) for v in b], (len(b),)) for b in net.b]
    av = [] if net.is_relu_only() else [_object_array([flint.fmpq(v) for v in a], (len(a),))
                                        for a in net.negative_slope]
    return Xv, Wv, bv, av


def _modular_values(net: Any, X: Sequence[Sequence[flint.fmpq]], p: int, data: ModularData | None
                    ) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """The same, as int64 residues mod p (from ``data``, scaled once)."""
    data = data or ModularData(net, X)
    av = [] if data.a is None else [a.mod(p)[0] for a in data.a]
    return data.X.mod(p), [W.mod(p) for W in data.W], [b.mod(p)[0] for b in data.b], av


class _Pass:
    """One forward pass in a ring with the pattern held fixed, then backpropagation (Prop. 10).

    ``H[l] = h_l`` (``n x N_l``, ``l = 0..L-1``), ``Zneg[l-1]`` the hidden pre-activations where the
    pattern is on the slope side (0 elsewhere: ``d h_v / d a_v = min(z_v, 0)``), and :meth:`backward`
    yields ``(l, D_l, G_{l-1})`` from the output layer down: ``D_l = d f / d z_l`` and
    ``G_{l-1} = D_l W_l = d f / d h_{l-1}`` (None at ``l = 1``), rows ``i N_L + k``.
    """

    def __init__(self, widths: Sequence[int], Xv: np.ndarray, Wv: list[np.ndarray], bv: list[np.ndarray],
                 av: list[np.ndarray], pattern: Sequence[np.ndarray], ring: _Ring,
                 H: list[np.ndarray] | None = None, with_zneg: bool = True) -> None:
        self.widths, self.Wv, self.ring = tuple(widths), Wv, ring
        n, L = Xv.shape[0], len(widths) - 1
        self.n = n
        self.masks = [np.asarray(pattern[l - 1], dtype=bool).reshape(n, widths[l]) for l in range(1, L)]
        # a layer whose slopes are all 0 (ReLU; no slopes given: every layer) backpropagates by a mask
        self.factor = [None if not av or _all_zero(av[l - 1]) else
                       np.where(self.masks[l - 1], ring.one, av[l - 1][None, :]).astype(ring.dtype)
                       for l in range(1, L)]
        self.Zneg: list[np.ndarray] = []
        if H is not None:  # hidden values given (the exact MLP: relu(Z) of its caller); no slope columns
            self.H = H
            return
        self.H = [Xv]
        for l in range(1, L):
            Z = ring.red(ring.mm(self.H[-1], Wv[l - 1].T) + bv[l - 1][None, :])
            m = self.masks[l - 1]
            if with_zneg:
                self.Zneg.append(np.where(m, ring.zero, Z).astype(ring.dtype))
            f = self.factor[l - 1]
            self.H.append(np.where(m, Z, ring.zero).astype(ring.dtype) if f is None else ring.red(Z * f))

    def backward(self) -> Iterator[tuple[int, np.ndarray, np.ndarray | None]]:
        ring, N_L, L = self.ring, self.widths[-1], len(self.widths) - 1
        D = ring.eye_rows(self.n, N_L)
        for l in range(L, 0, -1):
            G = ring.mm(D, self.Wv[l - 1]) if l > 1 else None
            yield l, D, G
            if G is not None:
                f = self.factor[l - 2]
                mask = np.repeat(self.masks[l - 2], N_L, axis=0)
                D = np.where(mask, G, ring.zero).astype(ring.dtype) if f is None else \
                    ring.red(G * np.repeat(f, N_L, axis=0))


#: Entries of the per-block temporaries (rows are taken in blocks of about this size).
_BLOCK_ENTRIES = 1 << 22


def column_blocks(widths: Sequence[int], free: np.ndarray
                  ) -> Iterator[tuple[int, int, int, np.ndarray, np.ndarray]]:
    """Per layer ``l``: ``(l, lo, hi, local, bias_local)``: the free ``W_l`` columns are output columns
    ``lo:hi`` (``local``: their indices inside ``W_l``, row-major), and the free ``b_l`` columns follow
    (``bias_local``: their units); ``free``: sorted dense positions of the free parameters."""
    offset = 0
    for l in range(1, len(widths)):
        width = widths[l] * widths[l - 1]
        lo, hi, end = (int(x) for x in np.searchsorted(free, [offset, offset + width, offset + width + widths[l]]))
        yield l, lo, hi, free[lo:hi] - offset, free[hi:end] - offset - width
        offset += width + widths[l]


def _dense_route(lay: Layout, fp: _Pass) -> np.ndarray:
    """The MLP's route: ``D_l (x) h_{l-1}`` and ``D_l`` written straight into the free columns, in row
    blocks (no full-width temporaries, no concatenated copy of all dense columns: one copy of Gamma)."""
    assert lay.dense is not None
    ring, w, n, N_L = fp.ring, lay.widths, fp.n, lay.widths[-1]
    rows = n * N_L
    out = np.empty((rows, lay.n_params), dtype=ring.dtype)
    # all of D first, then the columns in their order (first layer first): faster than writing each
    # layer as the backward pass reaches it (memory: D is n N_L x sum N_l, small beside Gamma)
    Ds = {l: D for l, D, _G in fp.backward()}
    for l, lo, hi, local, bias in column_blocks(w, lay.dense):
        D = Ds[l]
        every_bias = bias.size == w[l]  # the MLP: every bias free, D_l is their columns as it is
        width = w[l] * w[l - 1]
        step = max(N_L, (_BLOCK_ENTRIES // max(width, 1)) // N_L * N_L)
        for r0 in range(0, rows, step):
            r1 = min(rows, r0 + step)
            if hi > lo:
                Hrep = np.repeat(fp.H[l - 1][r0 // N_L:r1 // N_L], N_L, axis=0)
                dW = ring.red(D[r0:r1, :, None] * Hrep[:, None, :])
                out[r0:r1, lo:hi] = np.take(dW.reshape(r1 - r0, width), local, axis=1)
            out[r0:r1, hi:hi + bias.size] = D[r0:r1] if every_bias else np.take(D[r0:r1], bias, axis=1)
    return out


def _tied_route(lay: Layout, fp: _Pass) -> np.ndarray:
    """The general route: per row block, each layer's dense entries summed straight into their
    parameters' columns (``Gamma_dense T``, never built), and the free slopes' columns."""
    ring, n, N_L = fp.ring, fp.n, lay.widths[-1]
    rows = n * N_L
    out = np.full((rows, lay.n_params), ring.zero, dtype=ring.dtype)
    for l, D, G in fp.backward():
        wr, wc = np.nonzero(lay.W_index[l - 1] >= 0)
        wj = lay.W_index[l - 1][wr, wc]
        br = np.flatnonzero(lay.b_index[l - 1] >= 0)
        su = np.flatnonzero(lay.slope_index[l - 2] >= 0) if l > 1 else np.zeros(0, dtype=np.int64)
        ids = np.concatenate([wj, lay.b_index[l - 1][br], lay.slope_index[l - 2][su] if l > 1 else su])
        if not ids.size:
            continue
        order = np.argsort(ids, kind="stable")
        uniq, starts = np.unique(ids[order], return_index=True)
        step = max(N_L, (_BLOCK_ENTRIES // ids.size) // N_L * N_L)
        for r0 in range(0, rows, step):
            r1 = min(rows, r0 + step)
            Hrep = np.repeat(fp.H[l - 1][r0 // N_L:r1 // N_L], N_L, axis=0)
            parts = [ring.red(D[r0:r1][:, wr] * Hrep[:, wc]), D[r0:r1][:, br]]
            if su.size:
                assert G is not None
                Zrep = np.repeat(fp.Zneg[l - 2][r0 // N_L:r1 // N_L], N_L, axis=0)
                parts.append(ring.red(G[r0:r1][:, su] * Zrep[:, su]))
            vals = np.concatenate(parts, axis=1)[:, order]
            sums = np.add.reduceat(vals, starts, axis=1)
            out[r0:r1, uniq] = ring.red(out[r0:r1, uniq] + ring.red(sums))
    return out


def gamma_free_columns(lay: Layout, Xv: np.ndarray, Wv: list[np.ndarray], bv: list[np.ndarray],
                       av: list[np.ndarray], pattern: Sequence[np.ndarray], p: int | None = None,
                       H: list[np.ndarray] | None = None) -> np.ndarray:
    """The one builder: ``Gamma_free = Gamma_dense T`` (plus the free slopes' columns) from one backward pass.

    The route is chosen by structure: when ``T`` only selects dense entries (``lay.dense``) and every
    slope is 0 (ReLU), the dense Jacobian's free columns are written in row blocks (the MLP's
    route, with its fixed edges dropped: Prop. 10); otherwise tied entries are summed per parameter
    and the free slopes get their columns.

    Parameters
    ----------
    lay : Layout
    Xv, Wv, bv, av : arrays in the ring
        The sample ``(n, N_0)``, ``W_l``, ``b_l`` and the hidden layers' slopes (an empty ``av``: every
        slope 0): object arrays of ``fmpq`` (``p`` None, Q) or int64 residues in ``[0, p)``.
    pattern : list of bool arrays ``(n, N_l)``, hidden layers
        True: the unit's derivative is 1; False: its slope.
    p : int or None
        The prime (Z/pZ) or None (Q).
    H : list of arrays, optional
        The hidden values ``[h_0, ..., h_{L-1}]`` in the ring, if the caller has them (the dense route
        only); default: the forward pass with the pattern.

    Returns
    -------
    numpy.ndarray ``(n N_L, lay.n_params)``: object (``fmpq``) or int64 in ``[0, p)``
        Row ``i N_L + k`` is ``d f_k(x^i) / d theta``.
    """
    ring = _Ring(p)
    dense = lay.dense is not None and all(_all_zero(a) for a in av)  # no slopes given: all 0
    fp = _Pass(lay.widths, Xv, Wv, bv, av, pattern, ring, H if dense else None, with_zneg=not dense)
    return _dense_route(lay, fp) if dense else _tied_route(lay, fp)


def hidden_and_backprop_mod_p(net: Any, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray], p: int,
                              data: ModularData | None = None) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """``H = [h_0, ..., h_{L-1}]`` (``n x N_l``) and ``D[l - 1] = d f / d z_l`` (``n N_L x N_l``, row
    ``i N_L + k``), int64 residues mod p, from the builder's pass: every column of ``Gamma`` is built
    from ``D[l-1] (x) h_{l-1}`` and ``D[l-1]`` (for sketches and kernel products that never build it)."""
    fp = _Pass(net.widths, *_modular_values(net, X, p, data), pattern, _Ring(p), with_zneg=False)
    D: list[np.ndarray] = [np.zeros((0, 0), dtype=np.int64)] * net.L
    for l, Dl, _G in fp.backward():
        D[l - 1] = Dl
    return fp.H, D


def jacobian_exact(net: Any, X: Sequence[Sequence[Any]], pattern: Sequence[np.ndarray],
                   free: Sequence[int] | None = None,
                   hidden: Sequence[flint.fmpq_mat] | None = None) -> flint.fmpq_mat:
    """``Gamma_free(X, theta)`` over Q of any network (:func:`gamma_free_columns` on its :func:`layout`).

    Parameters
    ----------
    net : Network
    X : n rows of N_0 rationals
    pattern : list of bool arrays ``(n, N_l)``, hidden layers
    free : list of int, optional
        A plain network's free dense positions (:func:`exactident.model.gamma.free_columns`).
    hidden : list of fmpq_mat, optional
        ``[h_0, ..., h_{L-1}]`` when the caller has them and every slope is 0
        (:func:`exactident.model.gamma.gamma_exact`: ``relu(Z)``).

    Returns
    -------
    fmpq_mat, shape ``(n N_L, n_params)``

    Examples
    --------
    ``f = 3 relu(2x + 1)`` at ``x = 0, 1``, every parameter free: ``(3x, 3, 2x + 1, 1)``.

    >>> from exactident.model.network import Network
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])],
    ...               [[flint.fmpq(1)], [flint.fmpq(0)]])
    >>> jacobian_exact(net, [[0], [1]], [np.array([[True], [True]])]).entries()
    [0, 3, 1, 1, 3, 3, 3, 1]
    """
    lay = layout(net, free)
    H = None if hidden is None else [_object_array(h.entries(), (h.nrows(), h.ncols())) for h in hidden]
    out = gamma_free_columns(lay, *_exact_values(net, X), pattern, H=H)
    return flint.fmpq_mat(out.shape[0], lay.n_params, out.ravel().tolist())


def jacobian_mod_p(net: Any, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray], p: int,
                   data: ModularData | None = None, free: Sequence[int] | None = None) -> np.ndarray:
    """:func:`jacobian_exact` mod p: int64 residues in ``[0, p)``, shape ``(n N_L, n_params)``.

    ``p`` must be a prime dividing no denominator of the data (the callers check it with
    :func:`exactident.linalg.modular.require_prime`); ``data`` the data pre-scaled (many primes).

    Raises
    ------
    InvariantViolation
        If ``p`` divides a denominator of the data.
    """
    return gamma_free_columns(layout(net, free), *_modular_values(net, X, p, data), pattern, p)
