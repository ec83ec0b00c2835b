"""Kernel vectors of ``Gamma`` from inputs that are constant except on a few samples: the ``shifted`` kernel.

Standardised image data (scikit-learn's digits after ``StandardScaler``) have border pixels that take one
value ``c_j`` on almost every sample (the standardised zero) and another value on a handful of samples
``T_j``.  By Prop. 10 the column of ``Gamma`` of the weight ``W_l[v, j]`` (``j`` an input of layer ``l``)
is ``delta_{k,v}(x_i) h_{l-1}(x_i)[j]`` on row ``(i, k)`` and that of the bias ``b_l[v]`` is
``delta_{k,v}(x_i)``, so the *shifted* column

    ``e_{W_l[v, j]} - c_j e_{b_l[v]}``  has  ``Gamma``-image  ``delta_{k,v}(x_i) (h_{l-1}(x_i)[j] - c_j)``,

zero on every row of a sample outside ``T_j``, for every neuron ``v`` of layer ``l`` at once.  The shifted
columns of all neurons ``v`` (active somewhere on ``T_j``) form a block of ``|T_j| N_L`` rows; when it has
more columns than rows, its exact kernel (FLINT, checked ``block K = 0`` over Q) extends by zeros to
kernel vectors of ``Gamma``.  The per-neuron input-local kernel
(:func:`exactident.ranks.kernels.input_local_kernel`) sees one neuron at a time, so it misses these
vectors, which combine many neurons on the few rows of ``T_j`` (the 5 vectors between the semi-local
kernel and the rank mod p on the digits 64-32-10 network of docs/performance.md).  On a hidden layer
``c_j`` is usually 0 and ``T_j`` the samples where neuron ``j`` is active (the rarely active neurons of
the semi-local kernel); the same construction applies.

:func:`structural_kernel` returns the semi-local kernel completed by these blocks (an independent subset
mod a fixed prime, so the verifier rebuilds the same vectors: :mod:`exactident.verify.rank`, source
``"shifted"``).  :func:`kernel_upper` turns such vectors into the ``upper`` part of a rank certificate.
Called by :mod:`exactident.ranks.certify`.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from math import lcm
from typing import Any

import flint
import numpy as np

from exactident.model.fixed_edges import FixedEdges, free_parameters
from exactident.model.integer_forward import integer_forward
from exactident.model.network import Network

__all__ = ["MAX_SHIFTED_BITS", "MAX_SHIFTED_ROWS", "StructuralKernels", "kernel_upper", "shifted_families",
           "structural_kernel"]

#: A coordinate is *rare* when it differs from its most common value on at most this many samples.
MAX_SHIFTED_ROWS = 64
#: A block kernel vector whose integer form has an entry above ``2^MAX_SHIFTED_BITS`` is dropped: its check
#: ``Gamma K = 0`` would need more than the verifier's 120 primes of 30 bits (with ``Gamma``'s entry bound).
MAX_SHIFTED_BITS = 3200


def shifted_families(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                     fixed: FixedEdges) -> list[tuple[list[int], list[dict[int, flint.fmpq]]]]:
    """The blocks ``(T_j, shifted columns)`` of the module docstring, one per rare input ``j`` of each layer.

    Parameters
    ----------
    net, X, pattern, fixed
        As for :func:`exactident.model.gamma.gamma_exact` (``pattern``: bool arrays ``(n, N_l)``,
        hidden ``l = 1..L-1``).

    Returns
    -------
    list of (samples, columns)
        ``samples``: the sorted sample indices ``T_j`` where ``h_{l-1}[j]`` differs from its most common
        value ``c_j`` (at most :data:`MAX_SHIFTED_ROWS`); ``columns``: for each neuron ``v`` of layer ``l``
        active on some sample of ``T_j`` with ``W_l[v, j]`` free, ``{W_l[v, j]: 1, b_l[v]: -c_j}``
        (indices into :func:`~exactident.model.fixed_edges.free_parameters`; the bias term only when
        ``c_j != 0``).  Every column is zero on the rows of samples outside ``T_j`` (exact, Prop. 10).
    """
    params = free_parameters(net, fixed)
    index = {(prm.l, prm.i, prm.j): c for c, prm in enumerate(params)}
    n = len(X)
    if n == 0:
        return []
    fw = integer_forward(net, X)
    out: list[tuple[list[int], list[dict[int, flint.fmpq]]]] = []
    for l in range(1, net.L + 1):
        width_in = net.widths[l - 1]
        H = np.array([int(v) for v in fw.H_int[l - 1].entries()], dtype=object).reshape(n, width_in)
        den = int(fw.den[l - 1])  # h_{l-1} = H / den exactly
        live = np.asarray(pattern[l - 1], dtype=bool) if l < net.L else np.ones((n, net.widths[l]), dtype=bool)
        for j in range(width_in):
            mode, count = Counter(H[:, j].tolist()).most_common(1)[0]
            if not 0 < n - count <= MAX_SHIFTED_ROWS:
                continue
            T = np.flatnonzero(H[:, j] != mode)
            c = flint.fmpq(int(mode), den)
            cols = []
            for v in range(net.widths[l]):
                if (l, v, j) not in index or not live[T, v].any():
                    continue  # a fixed edge, or a column already zero on T (input-local kernel)
                col = {index[(l, v, j)]: flint.fmpq(1)}
                if c != 0:
                    col[index[(l, v, None)]] = -c
                cols.append(col)
            out.append(([int(i) for i in T], cols))
    return out


def structural_kernel(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                      fixed: FixedEdges, semi: Sequence[dict[int, flint.fmpq]] | None = None,
                      data: Any = None) -> list[dict[int, flint.fmpq]]:
    """The semi-local kernel completed by the shifted blocks: independent exact vectors of ``ker Gamma``.

    Parameters
    ----------
    net, X, pattern, fixed
        As for :func:`shifted_families`.
    semi : list, optional
        :func:`exactident.ranks.kernels.semi_local_kernel` of the same arguments, if already built.
    data : ModularData, optional
        :class:`exactident.model.gamma_modular.ModularData` of ``net`` and ``X``, if already built
        (speed only: the blocks take their samples' rows of it).

    Returns
    -------
    list of dict index -> fmpq
        ``semi`` (all of it, first; on a ``Gamma`` of more than
        :data:`~exactident.linalg.certified.MAX_EXACT_CHECK_ENTRIES` entries only its vectors of at most
        ``MAX_SHIFTED_BITS`` bits) then the shifted blocks' vectors, in primitive integer form
        (:func:`exactident.ranks.kernels.primitive`), that are independent of the
        earlier ones mod a fixed prime (so independent over Q; deterministic, so the verifier
        rebuilds the same list).  Each block kernel is exact (FLINT nullspace, ``block K = 0``
        checked over Q) and valid for ``Gamma`` by the structure of the block; a block vector with
        an entry above ``2^MAX_SHIFTED_BITS`` (scaled to integers) is left out.
    """
    from exactident.linalg.certified import MAX_EXACT_CHECK_ENTRIES
    from exactident.ranks.kernels import _merged, independent_subset, primitive, semi_local_kernel

    base = list(semi) if semi is not None else semi_local_kernel(net, X, pattern, fixed)
    if len(X) * net.widths[-1] * net.dim > MAX_EXACT_CHECK_ENTRIES:
        # Gamma too large for one exact product: every vector must be checkable mod at most 120 primes (one
        # semi-local vector of 3,736 bits on digits 64-40-20-10 used to void all 251 of them)
        base = [v for v in base if _bits(v) <= MAX_SHIFTED_BITS]
    N_L = net.widths[-1]
    families = shifted_families(net, X, pattern, fixed)
    cache: list[Any] = [] if data is None else [data]  # the case's ModularData, built once when needed
    fits = _may_have_kernel(net, X, pattern, fixed, cache)
    vectors: list[dict[int, flint.fmpq]] = []
    for rows, cols in families:
        if fits(rows, cols):
            vectors += _shifted_block_kernel(net, X, pattern, fixed, rows, cols, cache)
    # blocks whose rows overlap: jointly they may have more kernel than apart
    for rows, cols in _merged(families, N_L, fits):
        vectors += _shifted_block_kernel(net, X, pattern, fixed, rows, cols, cache)
    small = [v for v in primitive(vectors) if _bits(v) <= MAX_SHIFTED_BITS]
    if not small:
        return base
    return independent_subset(base + small, net.dim)


def _may_have_kernel(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                     fixed: FixedEdges, cache: list[Any]
                     ) -> Callable[[Sequence[int], Sequence[dict[int, flint.fmpq]]], bool]:
    """``fits(rows, cols)``: is a bound on the rank of the shifted block below its column count?

    The rows of sample ``x_i`` of a shifted column of neuron ``v`` (layer ``l``) are
    ``delta_{k,v}(x_i)`` times a scalar (module docstring), and ``delta(x_i)[:, V] =
    W_L D_{L-1} ... W_{l+1} D_l[:, V]`` has rank at most ``N_L``, the active neurons of each layer
    ``l' > l`` at ``x_i``, and the neurons of ``V`` active at ``x_i`` (``|V|`` on the output layer).
    So the block's rank is at most the sum over its samples (and layers) of those minima.  When that
    bound is not below the column count, the block's rank mod the fixed prime of
    :func:`~exactident.ranks.kernels.independent_subset` decides (a rank mod p is at most the rank over
    Q, so a block of full column rank mod p has no kernel): a block taller than wide (a few samples of
    a deep net) may still have a kernel (digits 64-32-32-16-10: the border pixels 24, 31, 40, 48 and 56
    on 2 to 84 samples, 840 rows for 183 columns and 13 kernel vectors).
    """
    from exactident.linalg.blas_modp import pivots_blas
    from exactident.model.gamma_modular import ModularData, gamma_mod_p
    from exactident.model.integer_forward import data_denominator
    from exactident.ranks.kernels import _SELECT_PRIME

    p = _SELECT_PRIME
    avoid = data_denominator(net, X)

    params = free_parameters(net, fixed)
    N_L, L = net.widths[-1], net.L
    live = [np.asarray(a, dtype=bool) for a in pattern]
    # deep[l][i]: min over hidden layers l' > l of the active count at x_i (N_L when none)
    deep = [np.full(len(live[0]) if live else 0, N_L) for _ in range(L + 1)]
    for l in range(L - 2, -1, -1):
        deep[l] = np.minimum(deep[l + 1], live[l].sum(axis=1)) if l + 1 <= L - 1 else deep[l + 1]

    def fits(rows: Sequence[int], cols: Sequence[dict[int, flint.fmpq]]) -> bool:
        neurons: dict[int, set[int]] = {}
        for col in cols:
            prm = next(params[c] for c in col if params[c].j is not None)
            neurons.setdefault(prm.l, set()).add(prm.i)
        bound = 0
        for i in rows:
            r = 0
            for l, V in neurons.items():
                active = len(V) if l == L else int(live[l - 1][i, sorted(V)].sum())
                r += min(N_L, active, int(deep[l][i]) if len(deep[l]) else N_L)
            bound += min(r, N_L)
        if bound < len(cols):
            return True
        if avoid % p == 0:
            return False
        S = [int(i) for i in rows]
        if not cache:
            cache.append(ModularData(net, X))
        G = gamma_mod_p(net, [X[i] for i in S], [a[S] for a in live], fixed, p, avoid, cache[0].take(S))
        block = np.zeros((G.shape[0], len(cols)), dtype=np.int64)
        for t, col in enumerate(cols):
            for c, v in col.items():
                block[:, t] = (block[:, t] + G[:, c] * (int(v.p) % p * pow(int(v.q), -1, p) % p)) % p
        return len(pivots_blas(block, p)[1]) < len(cols)
    return fits


def _shifted_block_kernel(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                          fixed: FixedEdges, rows: Sequence[int], cols: Sequence[dict[int, flint.fmpq]],
                          cache: list[Any]) -> list[dict[int, flint.fmpq]]:
    """Exact kernel of ``Gamma[rows of samples S, combinations cols]``, from the columns the block uses only.

    The same block as :func:`exactident.ranks.kernels._block_kernel` (the same exact matrix, so the same
    nullspace), without the whole ``Gamma`` of the samples: the column of ``W_l[v, j]`` (``b_l[v]``) on
    the rows of sample ``x_i`` is ``D_l[:, v] H_{l-1}[i, j] / (c_l e_{l-1})`` (``e_{l-1}`` for the bias)
    in the integer backpropagation of :func:`exactident.model.gamma_modular.gamma_integer`, computed
    here down to the lowest layer the block touches.  ``cache``: holds the case's
    :class:`~exactident.model.gamma_modular.ModularData` once built.
    """
    from exactident.errors import InvariantViolation
    from exactident.model.gamma_modular import ModularData

    if not cache:
        cache.append(ModularData(net, X))
    data = cache[0]
    params = free_parameters(net, fixed)
    needed = sorted({c for col in cols for c in col})
    L, N_L = net.L, net.widths[-1]
    idx = np.asarray([int(i) for i in rows], dtype=np.int64)
    n = len(idx)
    dw = [w.den for w in data.W]
    db = [b.den for b in data.b]
    H = [data.X.ints[idx]]
    e = [data.X.den]
    masks = [np.asarray(a, dtype=bool)[idx].reshape(n, net.widths[l + 1]) for l, a in enumerate(pattern)]
    for l in range(1, L):
        Z = H[-1].dot(data.W[l - 1].ints.T) * db[l - 1] + data.b[l - 1].ints[0] * (e[-1] * dw[l - 1])
        H.append(np.where(masks[l - 1], Z, 0).astype(object))
        e.append(e[-1] * dw[l - 1] * db[l - 1])
    lowest = min(params[c].l for c in needed)
    D = np.tile(np.eye(N_L, dtype=np.int64), (n, 1)).astype(object)
    scale = 1
    m = n * N_L
    C = np.empty((m, len(needed)), dtype=object)  # column c of Gamma on these rows is C[:, c] / den[c]
    den: dict[int, int] = {}
    at = {c: t for t, c in enumerate(needed)}
    for l in range(L, lowest - 1, -1):
        for c in needed:
            prm = params[c]
            if prm.l == l:
                C[:, at[c]] = D[:, prm.i] * (np.repeat(H[l - 1][:, prm.j], N_L) if prm.j is not None else e[l - 1])
                den[c] = scale * e[l - 1]
        if l > lowest:
            D = np.where(np.repeat(masks[l - 2], N_L, axis=0), D.dot(data.W[l - 1].ints), 0).astype(object)
            scale *= dw[l - 1]
    # column t of the block is sum_c C[:, c] w_c (w_c = cols[t][c] / den[c]): integer columns over one
    # denominator each (object arrays: a few vector operations per column, not an fmpq sum per entry)
    terms = [[(at[c], v / den[c]) for c, v in col.items()] for col in cols]
    dens = [lcm(1, *(int(w.q) for _k, w in tt)) for tt in terms]
    ints = np.zeros((m, len(cols)), dtype=object)
    for t, tt in enumerate(terms):
        for k, w in tt:
            ints[:, t] += C[:, k] * (int(w.p) * (dens[t] // int(w.q)))
    block = flint.fmpq_mat(m, len(cols), [flint.fmpq(x, d) for row in ints.tolist() for x, d in zip(row, dens)])
    K, checked = _nullspace_on_pivot_rows(block, _residues(C, terms))
    if not checked and block * K != flint.fmpq_mat(block.nrows(), K.ncols()):
        raise InvariantViolation("exact nullspace of a shifted Gamma block is not a kernel")
    Kt = K.table()
    out = []
    for t in range(K.ncols()):
        vec: dict[int, flint.fmpq] = {}
        for r, col in enumerate(cols):
            if Kt[r][t] != 0:
                for c, v in col.items():
                    vec[c] = vec.get(c, flint.fmpq(0)) + Kt[r][t] * v
        vec = {c: v for c, v in vec.items() if v != 0}
        if vec:
            out.append(vec)
    return out


def _residues(C: np.ndarray, terms: list[list[tuple[int, flint.fmpq]]]) -> np.ndarray | None:
    """``C V mod _SELECT_PRIME``, ``V[k, t]`` the ``w`` of ``(k, w)`` in ``terms[t]`` (``C`` integers, ``w``
    rationals), or None when p divides a denominator of a ``w``."""
    from exactident.linalg.modular import matmul_mod
    from exactident.ranks.kernels import _SELECT_PRIME

    p = _SELECT_PRIME
    if C.size == 0 or any(int(w.q) % p == 0 for tt in terms for _k, w in tt):
        return None
    Vp = np.zeros((C.shape[1], len(terms)), dtype=np.int64)
    for t, tt in enumerate(terms):
        for k, w in tt:
            Vp[k, t] = (Vp[k, t] + int(w.p) % p * pow(int(w.q), -1, p)) % p
    return matmul_mod((C % p).astype(np.int64), Vp, p)


def _nullspace_on_pivot_rows(block: flint.fmpq_mat, res: np.ndarray | None = None
                             ) -> tuple[flint.fmpq_mat, bool]:
    """The exact nullspace of ``block``, from its rows independent mod a fixed prime when that is a kernel.

    The rows ``R`` of a maximal independent set mod p give ``ker block[R] ⊇ ker block`` with equality when
    the rank mod p is the rank; the nullspace of the short ``block[R]`` (FLINT, deterministic) is kept when
    ``block K = 0`` holds exactly, else the nullspace of the whole block is taken (digits 64-64-10: 840 rows,
    354 columns, 336 pivot rows).  Returns ``(K, checked)``: ``checked`` when ``block K = 0`` was proved here.
    ``res``: ``block`` mod that prime, if already known (else read from its entries).
    """
    from exactident.linalg import exact
    from exactident.linalg.blas_modp import pivots_blas
    from exactident.ranks.kernels import _SELECT_PRIME

    p = _SELECT_PRIME
    m, c = block.nrows(), block.ncols()
    if m <= c:
        return exact.nullspace(block), False
    if res is None:
        entries = block.entries()
        inverse: dict[int, int] = {}
        for v in entries:
            q = int(v.q)
            if q not in inverse:
                if q % p == 0:
                    return exact.nullspace(block), False
                inverse[q] = pow(q, -1, p)
        res = np.array([int(v.p) % p * inverse[int(v.q)] % p for v in entries], dtype=np.int64).reshape(m, c)
    R = pivots_blas(res, p)[0]
    if not len(R):
        return exact.nullspace(block), False
    rows = block.table()
    K = exact.nullspace(flint.fmpq_mat(len(R), c, [v for r in R for v in rows[int(r)]]))
    if K.ncols() == 0 or block * K == flint.fmpq_mat(m, K.ncols()):
        return K, True  # (no kernel on rows R: none on all rows either)
    return exact.nullspace(block), False


def _bits(v: dict[int, flint.fmpq]) -> int:
    """Bits of the largest entry of ``v`` scaled to integers (by its denominators' lcm)."""
    from exactident.linalg.certified import kernel_to_integer_columns

    return max((abs(x) for x in kernel_to_integer_columns([v])[0].values()), default=0).bit_length()


def kernel_upper(K: Sequence[dict[int, flint.fmpq]], source: str, dim: int, shape: tuple[int, int],
                 entry_bound: int, lower: tuple[int, int, np.ndarray | None], avoid: int,
                 rng: random.Random, image_mod_p: Any) -> dict[str, Any] | None:
    """The ``upper`` part ``{"kind": "kernel", "bound": dim - k, "source", "nullity": k}`` for exact vectors ``K``.

    ``K`` are exact kernel vectors by construction; here they are only required to be of full column
    rank mod a prime (so independent over Q), checkable by the verifier within its caps
    (:func:`exactident.linalg.certified.kernel_is_checkable`), and ``Gamma K = 0`` mod one prime as a
    guard against a construction bug (the verifier proves ``Gamma K = 0`` with primes of its own).
    The guard uses the lower bound's image when it is ``Gamma`` mod its prime or a stack of row
    combinations of it (same kernel), else ``image_mod_p`` of a fresh prime.  None when ``K`` is
    empty or a check fails.
    """
    from exactident.linalg.blas_modp import matmul_blas, to_symmetric
    from exactident.linalg.certified import (
        _zero_guard,
        has_full_column_rank,
        kernel_is_checkable,
        kernel_to_integer_columns,
    )
    from exactident.linalg.modular import random_primes

    if not K:
        return None
    K_int = kernel_to_integer_columns(K)
    q = random_primes(1, avoid, rng, exclude=[lower[1]])[0]
    if not has_full_column_rank(K_int, dim, q) or not kernel_is_checkable(K_int, shape, entry_bound):
        return None
    image = lower[2]
    if image is not None and image.shape[1] == dim:
        p = lower[1]
        Kp = np.zeros((dim, len(K_int)), dtype=np.int64)
        for c, col in enumerate(K_int):
            for i, v in col.items():
                Kp[i, c] = v % p
        Ks = to_symmetric(Kp, p)
        step = max(1, (1 << 18) // max(1, dim))  # row blocks: no float copy of the whole image beside it
        if any(matmul_blas(to_symmetric(np.asarray(image[r:r + step]), p), Ks, p).any()
               for r in range(0, image.shape[0], step)):
            return None
    elif not _zero_guard(image_mod_p, dim, K_int, avoid, rng, [lower[1], q]):
        return None
    return {"kind": "kernel", "bound": dim - len(K), "source": source, "nullity": len(K)}


class StructuralKernels:
    """The semi-local kernel and :func:`structural_kernel` of one pattern, each built at most once.

    ``semi()`` and ``vectors()`` return the vectors, ``source()`` the name the verifier rebuilds them
    by (``"semi-local"`` when the shifted blocks add nothing, else ``"shifted"``), ``upper(...)`` the
    checked ``upper`` part of :func:`kernel_upper`, and ``built`` says whether ``vectors()`` ran.
    With ``closes`` (``dim`` minus a rank mod p, so at least the nullity of ``Gamma``): when the
    semi-local kernel alone has that many vectors, all kept by :func:`structural_kernel`, no vector can
    be added to it, and ``vectors()`` is the semi-local kernel without the shifted blocks (source
    ``"semi-local"``, which the verifier rebuilds).
    """

    def __init__(self, net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                 fixed: FixedEdges, semi_local: Callable[[], list[dict[int, flint.fmpq]]] | None = None,
                 closes: int | None = None, data: Any = None) -> None:
        self.net, self.X, self.pattern, self.fixed, self.closes = net, X, pattern, fixed, closes
        self.data = data  # the case's ModularData when already built (speed only)
        self._build_semi = semi_local  # default: exactident.ranks.kernels.semi_local_kernel of the pattern
        self._semi: list[dict[int, flint.fmpq]] | None = None
        self._all: list[dict[int, flint.fmpq]] | None = None
        self._bound: int | None = None

    def entry_bound(self) -> int:
        """:func:`exactident.model.gamma_modular.gamma_entry_bound` of the case (an exact forward pass: once)."""
        from exactident.model.gamma_modular import gamma_entry_bound

        if self._bound is None:
            self._bound = gamma_entry_bound(self.net, self.X)
        return self._bound

    @property
    def built(self) -> bool:
        """Has :meth:`vectors` been built?"""
        return self._all is not None

    def semi(self) -> list[dict[int, flint.fmpq]]:
        """:func:`exactident.ranks.kernels.semi_local_kernel` of the pattern."""
        from exactident.ranks.kernels import semi_local_kernel

        if self._semi is None:
            self._semi = self._build_semi() if self._build_semi else \
                semi_local_kernel(self.net, self.X, self.pattern, self.fixed)
        return self._semi

    def vectors(self) -> list[dict[int, flint.fmpq]]:
        """:func:`structural_kernel` of the pattern (the semi-local vectors first)."""
        if self._all is None and self.closes is not None and len(self.semi()) >= self.closes:
            from exactident.linalg.certified import MAX_EXACT_CHECK_ENTRIES

            net = self.net
            if len(self.X) * net.widths[-1] * net.dim <= MAX_EXACT_CHECK_ENTRIES or \
                    all(_bits(v) <= MAX_SHIFTED_BITS for v in self.semi()):
                self._all = self.semi()  # independent, as many as the nullity can be: the shifted blocks add none
        if self._all is None:
            self._all = structural_kernel(self.net, self.X, self.pattern, self.fixed, self.semi(), self.data)
        return self._all

    def source(self) -> str:
        """``"semi-local"`` when :meth:`vectors` equals :meth:`semi`, else ``"shifted"``.

        Compared vector by vector: on a large ``Gamma`` :func:`structural_kernel` leaves out semi-local
        vectors above ``2^MAX_SHIFTED_BITS``, so equal counts do not mean equal lists.
        """
        vectors, semi = self.vectors(), self.semi()
        return "semi-local" if len(vectors) == len(semi) and all(a is b for a, b in zip(vectors, semi)) \
            else "shifted"

    def upper(self, lower: tuple[int, int, np.ndarray | None], avoid: int, rng: random.Random,
              data: Any) -> dict[str, Any] | None:
        """:func:`kernel_upper` of :meth:`vectors` (``data``: the case's ``ModularData``).

        Raises
        ------
        InvariantViolation
            When the vectors bound the rank below the rank mod p ``lower[0]`` (a construction bug).
        """
        from exactident.errors import InvariantViolation
        from exactident.model.gamma_modular import gamma_mod_p

        net, X, pattern, fixed = self.net, self.X, self.pattern, self.fixed
        dim = net.dim
        up = kernel_upper(self.vectors(), self.source(), dim, (len(X) * net.widths[-1], dim),
                          self.entry_bound(), lower, avoid, rng,
                          lambda q: gamma_mod_p(net, X, pattern, fixed, q, avoid, data))
        if up is not None and up["bound"] < lower[0]:
            raise InvariantViolation(f"{up['nullity']} independent kernel vectors of Gamma, but its rank mod "
                                     f"{lower[1]} is {lower[0]} > dim - {up['nullity']}")
        return up
