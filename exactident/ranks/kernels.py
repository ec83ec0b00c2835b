"""Exact kernel vectors of ``Gamma`` found from the network's structure (paper Prop. 10).

A neuron active on few samples has incoming-parameter columns of ``Gamma``
that vanish outside those samples' rows; the small block's exact kernel
extends by zeros to kernel vectors of ``Gamma``.  These give the upper bound
on ``rank Gamma`` without reconstructing a kernel mod many primes.

Called by :mod:`exactident.ranks.certify` and :mod:`exactident.verify.rank`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flint
import numpy as np

from exactident.errors import InvariantViolation
from exactident.linalg import exact
from exactident.linalg.draws import Draws
from exactident.model.fixed_edges import FixedEdges
from exactident.model.gamma import gamma_exact
from exactident.model.integer_forward import integer_forward
from exactident.model.network import Network

__all__ = ["independent_subset", "input_local_kernel", "neuron_local_kernel", "primitive", "semi_local_kernel",
           "sparse_columns"]


def sparse_columns(K: flint.fmpq_mat) -> list[dict[int, flint.fmpq]]:
    """The columns of an exact matrix as sparse dicts: the form kernels take in this module.

    Parameters
    ----------
    K : flint.fmpq_mat
        Shape ``(m, k)``, entries in Q (typically a kernel basis, one vector per column).

    Returns
    -------
    list of dict int -> flint.fmpq
        ``k`` dicts, column ``c`` as ``{row: K[row, c]}`` over its nonzero entries.

    Examples
    --------
    >>> import flint
    >>> sparse_columns(flint.fmpq_mat(3, 2, [1, 0, 0, flint.fmpq(-1, 2), 2, 0]))
    [{0: 1, 2: 2}, {1: -1/2}]
    """
    rows = K.table()
    return [{i: rows[i][c] for i in range(K.nrows()) if rows[i][c] != 0} for c in range(K.ncols())]


def neuron_local_kernel(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                        fixed: FixedEdges) -> list[dict[int, flint.fmpq]]:
    """Exact kernel vectors of ``Gamma`` supported on one hidden neuron's incoming parameters.

    A hidden neuron ``v`` of layer ``l`` inactive at sample ``x^i`` has
    ``d f(x^i) / d (W_l[v, :], b_l[v]) = 0`` (the ReLU derivative ``a_v(x^i)``
    is a factor), so the columns ``C_v`` of its incoming parameters vanish
    outside the rows of its active samples ``S_v``.  When ``|S_v| N_L < |C_v|``
    (a neuron active on few samples), every vector of the exact kernel of the
    small block ``Gamma[S_v, C_v]`` (extended by zeros) is in ``ker Gamma``.

    Returns
    -------
    list of dict index -> fmpq
        Sparse columns (indices into :func:`exactident.model.fixed_edges.free_parameters`);
        disjoint supports, so they are independent.
    """
    from exactident.model.fixed_edges import free_parameters

    params = free_parameters(net, fixed)
    cols: dict[tuple[int, int], list[int]] = {}
    for c, prm in enumerate(params):
        cols.setdefault((prm.l, prm.i), []).append(c)
    N_L, n = net.widths[-1], len(X)
    fw = integer_forward(net, X)
    # h_{l-1}(x^i)_j != 0, exactly (inputs, then strictly positive pre-activations)
    h_nonzero = [np.array([v != 0 for v in H.entries()], dtype=bool).reshape(n, net.widths[l])
                 for l, H in enumerate(fw.H_int)]
    out: list[dict[int, flint.fmpq]] = []
    for (l, v), C in sorted(cols.items()):
        active = pattern[l - 1][:, v] if l < net.L else np.ones(n, dtype=bool)
        S = [i for i in range(n) if active[i]]
        if l == net.L or len(S) * N_L >= len(C):
            # Too many rows for a small block: keep only the structurally zero columns
            # (W_l[v, j] with h_{l-1, j} = 0 wherever v is active; b_l[v] if v is never active).
            for c in C:
                prm = params[c]
                zero = not active.any() if prm.j is None else not (active & h_nonzero[l - 1][:, prm.j]).any()
                if zero:
                    out.append({c: flint.fmpq(1)})
            continue
        X_S = [X[i] for i in S]
        G = gamma_exact(net, X_S, integer_forward(net, X_S).Z(), [a[S] for a in pattern], fixed)
        block = flint.fmpq_mat(G.nrows(), len(C), [G[r, c] for r in range(G.nrows()) for c in C])
        K = exact.nullspace(block)
        if block * K != flint.fmpq_mat(block.nrows(), K.ncols()):
            raise InvariantViolation("exact nullspace of a Gamma block is not a kernel")
        rows = K.table()
        for j in range(K.ncols()):
            out.append({C[r]: rows[r][j] for r in range(len(C)) if rows[r][j] != 0})
    return out


#: A fixed prime for choosing an independent subset of kernel vectors: deterministic, so the
#: verifier rebuilds the very same vectors (an unlucky prime only makes the set smaller).
_SELECT_PRIME = 1048583


def _full_column_rank_sketch(M_res: np.ndarray, p: int) -> bool:
    """Is ``rank_p(A M) = ncols`` for a fixed pseudo-random ``A`` of ``ncols + 8`` rows (then ``M`` has full column
    rank over Q: ``rank_p(A M) <= rank_p M <= rank_Q M``)?  False says nothing.  A tall ``M`` costs one product.

    Examples
    --------
    >>> M = np.array([[1, 0], [0, 1], [1, 1]] * 8, dtype=np.int64)
    >>> _full_column_rank_sketch(M, 1048583), _full_column_rank_sketch(M[:, [0, 0]], 1048583)
    (True, False)
    """
    from exactident.linalg.blas_modp import matmul_blas, rank_blas, to_symmetric

    m, c = M_res.shape
    A = Draws(m * 1_000_003 + c).integers(-(p // 2), p // 2 + 1, (c + 8, m)).astype(np.float64)
    return rank_blas(matmul_blas(A, to_symmetric(M_res, p), p), p) == c


def _integer_kernel(M: np.ndarray, M_res: np.ndarray | None = None) -> list[list[int]]:
    """Exact kernel basis (integer columns) of an integer matrix (object array), via a modular row subset.

    Rows ``R`` of a maximal independent set mod p give ``ker M[R] ⊇ ker M``; the
    kernel of the small ``M[R]`` is accepted after ``M K = 0`` is checked exactly, else
    FLINT's nullspace of ``M`` itself is used.  ``M_res``: ``M mod p`` if already known.
    """
    from exactident.linalg.blas_modp import pivots_blas

    m, c = M.shape
    if c == 0:
        return []
    if m == 0:
        return [[int(i == j) for i in range(c)] for j in range(c)]
    p = _SELECT_PRIME
    if M_res is None:
        M_res = (M % p).astype(np.int64)
    if m > 2 * c + 8 and _full_column_rank_sketch(M_res, p):
        return []  # rank_Q M >= rank_p(A M) = c: no kernel (the same answer as the pivots below, sooner)
    R, C, _ = pivots_blas(M_res, p)
    if len(C) == c:
        return []
    K: Any = None
    if R:
        Kf, nullity = flint.fmpz_mat(M[R].tolist()).nullspace()
        K = np.array([[int(Kf[i, j]) for j in range(int(nullity))] for i in range(c)], dtype=object).reshape(c, -1)
    else:
        K = np.eye(c, dtype=np.int64).astype(object)
    if K.shape[1] == 0 or (M.dot(K) != 0).any():
        Kf, nullity = flint.fmpz_mat(M.tolist()).nullspace()
        K = np.array([[int(Kf[i, j]) for j in range(int(nullity))] for i in range(c)], dtype=object).reshape(c, -1)
    out = [[int(K[i, j]) for i in range(c)] for j in range(K.shape[1])]
    if max((abs(v) for k in out for v in k), default=0).bit_length() > REDUCE_KERNEL_BITS:
        return _reduced_kernel(M[R] if R else M, out)
    return out


#: Integer kernels of :func:`_integer_kernel` with an entry above ``2^REDUCE_KERNEL_BITS`` are LLL-reduced: the
#: zero check of a vector needs primes for its bits, and the verifier allows at most 120 of 30 bits.
REDUCE_KERNEL_BITS = 3200


def _reduced_kernel(M: np.ndarray, K: list[list[int]]) -> list[list[int]]:
    """A basis of short vectors of the integer kernel lattice of ``M`` (LLL), or ``K`` when that fails.

    FLINT's nullspace gives multiples of ``r x r`` minors (digits 64-40-20-10: 3,736 bits after the
    content, a neuron of layer 2 on 32 samples); the lattice ``ker M ∩ Z^c`` has a basis of about a
    ``k``-th of those bits (470).  LLL of the rows ``[N M^T | I_c]`` puts that basis first, with a zero
    left part, when ``N`` exceeds the short vectors by the LLL factor (here ``2^(bits/k + c + 64)``).
    The result is kept only when it has ``len(K)`` such rows and ``M k = 0`` holds exactly for each
    (else ``K``): deterministic, so the verifier rebuilds the same vectors.
    """
    m, c = M.shape
    bits = max(abs(v) for k in K for v in k).bit_length()
    N = 1 << (bits // max(len(K), 1) + c + 64)
    E = flint.fmpz_mat([[N * int(M[i, r]) for i in range(m)] + [int(r == t) for t in range(c)]
                        for r in range(c)]).lll(False, 0.75)  # 0.75: a third faster than 0.99, the same 471 bits
    short = [[int(E[r, m + t]) for t in range(c)] for r in range(c) if all(E[r, i] == 0 for i in range(m))]
    if len(short) != len(K) or any(any(sum(int(M[i, t]) * k[t] for t in range(c) if k[t]) for i in range(m))
                                   for k in short):
        return K
    return short


def input_local_kernel(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                       fixed: FixedEdges) -> list[dict[int, flint.fmpq]]:
    """Kernel vectors of ``Gamma`` on one neuron's incoming parameters, from its inputs alone.

    For a neuron ``v`` of layer ``l`` (hidden or output) with free incoming edges
    ``J_v`` and active samples ``S_v`` (every sample for an output neuron), the
    columns ``C_v = (W_l[v, J_v], b_l[v])`` of ``Gamma`` are
    ``Gamma[(i, k), C_v] = d f_k(x^i) / d z_l(x^i)_v [h_{l-1}(x^i)_{J_v}, 1]``,
    and ``d f / d z_l(x^i)_v = 0`` for ``i`` outside ``S_v`` (Prop. 10, the ReLU
    derivative is a factor).  So every ``u`` in ``ker [h_{l-1}(X_{S_v})_{J_v}, 1]``
    (extended by zeros) is in ``ker Gamma``.  This covers inputs that are zero or
    dependent on the samples where a neuron is active (zero pixels of images, dead
    neurons: ``S_v`` empty gives all of ``C_v``).

    Returns
    -------
    list of dict index -> fmpq
        Sparse exact kernel vectors (indices into ``free_parameters``); vectors of
        different neurons have disjoint supports.
    """
    from exactident.model.fixed_edges import free_parameters

    params = free_parameters(net, fixed)
    cols: dict[tuple[int, int], list[int]] = {}
    for c, prm in enumerate(params):
        cols.setdefault((prm.l, prm.i), []).append(c)
    n = len(X)
    fw = integer_forward(net, X)
    # [h_{l-1}, 1] scaled by s_{l-1}: integers (object arrays), and their residues for the rank tests
    H = [np.concatenate([np.array([int(x) for x in Hl.entries()] + [0], dtype=object)[:n * net.widths[l]]
                         .reshape(n, net.widths[l]), np.full((n, 1), int(fw.den[l]), dtype=object)], axis=1)
         for l, Hl in enumerate(fw.H_int)]
    H_res = [(Hl % _SELECT_PRIME).astype(np.int64) for Hl in H]
    out: list[dict[int, flint.fmpq]] = []
    for (l, v), C in sorted(cols.items()):
        active = pattern[l - 1][:, v] if l < net.L else np.ones(n, dtype=bool)
        S = np.flatnonzero(active)
        J = [int(j) for j in (params[c].j for c in C) if j is not None] + [net.widths[l - 1]]  # + the 1
        K = _integer_kernel(H[l - 1][np.ix_(S, np.asarray(J))], H_res[l - 1][np.ix_(S, np.asarray(J))])
        for k in K:
            out.append({C[r]: flint.fmpq(k[r]) for r in range(len(C)) if k[r] != 0})
    return out


def semi_local_kernel(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                      fixed: FixedEdges) -> list[dict[int, flint.fmpq]]:
    """Independent exact kernel vectors of ``Gamma`` from input-local and semi-local blocks.

    Besides :func:`input_local_kernel`, for each hidden neuron ``w`` (layer ``l``)
    active on few samples ``S_w``, the columns of ``Gamma`` that vanish outside the
    rows of ``S_w`` form a small block whose exact kernel is in ``ker Gamma``:

    - its free incoming parameters ``W_l[w, :]``, ``b_l[w]`` (factor ``a_w``);
    - its free outgoing weights ``W_{l+1}[k, w]`` (factor ``h_w``, zero off ``S_w``);
    - for each neuron ``u`` of layer ``l - 1`` whose *fixed* edge enters ``w``
      (``s_max(u) = w``) and whose nonzero incoming weights are all free, the
      rescaling direction ``rho_u``: ``+W_{l-1}[u, j]``,
      ``+b_{l-1}[u]`` on ``u``'s incoming parameters and ``-W_l[k, u]`` on its free
      outgoing weights.  The full rescaling of ``u`` leaves ``f`` unchanged (positive
      homogeneity of ReLU), so ``Gamma rho_u`` equals ``W_l[w, u]`` times the
      derivative along the fixed weight ``W_l[w, u]``, which carries the factor
      ``a_w``: zero off ``S_w``.

    A kernel vector of the block ``Gamma[S_w rows, these columns]`` (exact, small)
    is therefore a kernel vector of ``Gamma``.  Pairs of last-hidden-layer neurons
    with almost equal active sets add the vectors of ``_pair_kernel``.  All vectors found are exact; an
    independent subset is kept (rank mod a fixed prime: deterministic, so a verifier
    rebuilds the same set; independence mod p implies independence over Q).

    Returns
    -------
    list of dict index -> fmpq
    """
    from exactident.model.fixed_edges import free_parameters

    params = free_parameters(net, fixed)
    index = {(prm.l, prm.i, prm.j): c for c, prm in enumerate(params)}
    N_L, n = net.widths[-1], len(X)
    vectors = input_local_kernel(net, X, pattern, fixed)
    families: list[tuple[Any, list[dict[int, flint.fmpq]]]] = []  # (sample rows, column combinations)
    for l in net.hidden_layers():
        for w in range(net.widths[l]):
            S = [i for i in range(n) if pattern[l - 1][i, w]]
            cols: list[dict[int, flint.fmpq]] = []  # block columns as combinations of Gamma columns
            cols += [{index[(l, w, j)]: flint.fmpq(1)} for j in range(net.widths[l - 1]) if (l, w, j) in index]
            cols.append({index[(l, w, None)]: flint.fmpq(1)})
            cols += [{index[(l + 1, k, w)]: flint.fmpq(1)} for k in range(net.widths[l + 1])
                     if (l + 1, k, w) in index]
            if l > 1:
                for u in range(net.widths[l - 1]):
                    if fixed.s_max.get((l - 1, u)) != w:
                        continue
                    if any(net.W[l - 2][u, j] != 0 and (l - 1, u, j) not in index
                           for j in range(net.widths[l - 2])):
                        continue  # a fixed incoming edge: the rescaling of u is not a free direction
                    rho = {index[(l - 1, u, j)]: net.W[l - 2][u, j] for j in range(net.widths[l - 2])
                           if (l - 1, u, j) in index and net.W[l - 2][u, j] != 0}
                    if net.b[l - 2][u] != 0:
                        rho[index[(l - 1, u, None)]] = flint.fmpq(net.b[l - 2][u])
                    for k in range(net.widths[l]):
                        if (l, k, u) in index and net.W[l - 1][k, u] != 0:
                            rho[index[(l, k, u)]] = -net.W[l - 1][k, u]
                    if rho:
                        cols.append(rho)
            if len(S) * N_L < len(cols):
                families.append((S, cols))
    families += _pair_families(net, pattern, fixed, index)
    for rows, cols in families:
        if len(rows) * N_L < len(cols):
            vectors += _block_kernel(net, X, pattern, fixed, rows, cols)
    # Families whose row sets overlap: together they may have more kernel than apart
    # (fewer rows than the sum); one joint block per connected group that is still small.
    for rows, cols in _merged(families, N_L):
        vectors += _block_kernel(net, X, pattern, fixed, rows, cols)
    return independent_subset(primitive(vectors), net.dim)


def primitive(vectors: Sequence[dict[int, flint.fmpq]]) -> list[dict[int, flint.fmpq]]:
    """Each vector scaled to its primitive integer form: coprime integer entries (same span, each one).

    FLINT's integer nullspace returns multiples of determinants (a one-entry kernel vector
    ``{c: 2^4085}`` on the digits 64-40-20-10 network): a kernel vector scaled by a nonzero
    rational is still one, and the zero check ``Gamma K = 0`` needs primes for the bits of
    ``K``'s largest entry, so the smallest integer multiple is kept.

    Examples
    --------
    >>> import flint
    >>> primitive([{0: flint.fmpq(6), 3: flint.fmpq(-4, 3)}, {2: flint.fmpq(2**100)}])
    [{0: 9, 3: -2}, {2: 1}]
    """
    from math import gcd

    out = []
    for col in vectors:
        den = 1
        for v in col.values():
            den = den * int(v.q) // gcd(den, int(v.q))
        ints = {i: int(v.p) * (den // int(v.q)) for i, v in col.items()}
        g = 0
        for x in ints.values():
            g = gcd(g, x)
        g = max(g, 1)
        out.append({i: flint.fmpq(x // g) for i, x in ints.items()})
    return out


def _merged(families, N_L: int, fits: Any = None) -> list[tuple[list[int], list[dict[int, flint.fmpq]]]]:
    """Unions of families with overlapping rows (connected groups of two or more), if still small.

    ``fits(rows, cols)``: may the block have a kernel (default: fewer rows ``|rows| N_L`` than columns)?
    """
    parent = list(range(len(families)))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    owner: dict[int, int] = {}
    for f, (rows, _cols) in enumerate(families):
        for i in rows:
            if i in owner:
                parent[find(f)] = find(owner[i])
            else:
                owner[i] = f
    groups: dict[int, list[int]] = {}
    for f in range(len(families)):
        groups.setdefault(find(f), []).append(f)
    out = []
    for members in groups.values():
        if len(members) < 2:
            continue
        rows = sorted({int(i) for f in members for i in families[f][0]})
        cols = [c for f in members for c in families[f][1]]
        if (fits(rows, cols) if fits is not None else len(rows) * N_L < len(cols)):
            out.append((rows, cols))
    return out


def _block_kernel(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                  fixed: FixedEdges, rows: Sequence[int],
                  cols: Sequence[dict[int, flint.fmpq]]) -> list[dict[int, flint.fmpq]]:
    """Exact kernel of ``Gamma[rows of samples S, combinations cols]``, as combinations of free columns.

    Valid for ``Gamma`` only when every combination in ``cols`` is zero outside the rows
    of ``S`` (the callers' families are built so).
    """
    S = [int(i) for i in rows]
    N_L = net.widths[-1]
    X_S = [X[i] for i in S]
    G = gamma_exact(net, X_S, integer_forward(net, X_S).Z(), [a[S] for a in pattern], fixed) \
        if S else flint.fmpq_mat(0, net.dim)
    Gt = G.table()
    block = flint.fmpq_mat(len(S) * N_L, len(cols), [sum((Gt[r][c] * v for c, v in col.items()), flint.fmpq(0))
                                                     for r in range(len(S) * N_L) for col in cols])
    K = exact.nullspace(block)
    if block * K != flint.fmpq_mat(block.nrows(), K.ncols()):
        raise InvariantViolation("exact nullspace of a semi-local Gamma block is not a kernel")
    Kt = K.table()
    out = []
    for j in range(K.ncols()):
        vec: dict[int, flint.fmpq] = {}
        for r, col in enumerate(cols):
            if Kt[r][j] != 0:
                for c, v in col.items():
                    vec[c] = vec.get(c, flint.fmpq(0)) + Kt[r][j] * v
        vec = {c: v for c, v in vec.items() if v != 0}
        if vec:
            out.append(vec)
    return out


def _edge_column(net: Network, fixed: FixedEdges, index: dict, l: int, v: int,
                 j: int | None) -> dict[int, flint.fmpq] | None:
    """The edge ``j -> v`` of layer ``l`` (``j`` None: the bias) as a combination of free columns.

    A free edge is its own column; a fixed edge ``u -> v`` (``s_max(u) = v``) is
    ``rho_u / W_l[v, u]`` (see :func:`semi_local_kernel`: ``Gamma rho_u`` is ``W_l[v, u]``
    times the derivative along the fixed weight).  None if that weight is zero.
    """
    if (l, v, j) in index:
        return {index[(l, v, j)]: flint.fmpq(1)}
    assert j is not None
    w_vu = flint.fmpq(net.W[l - 1][v, j])
    if w_vu == 0 or l < 2:
        return None
    if any(net.W[l - 2][j, k] != 0 and (l - 1, j, k) not in index for k in range(net.widths[l - 2])):
        return None  # an incoming edge of j is fixed: the rescaling of j is not a free direction
    rho = {index[(l - 1, j, k)]: flint.fmpq(net.W[l - 2][j, k]) / w_vu for k in range(net.widths[l - 2])
           if (l - 1, j, k) in index and net.W[l - 2][j, k] != 0}
    if net.b[l - 2][j] != 0:
        rho[index[(l - 1, j, None)]] = flint.fmpq(net.b[l - 2][j]) / w_vu
    for k in range(net.widths[l]):
        if (l, k, j) in index and net.W[l - 1][k, j] != 0:
            rho[index[(l, k, j)]] = -flint.fmpq(net.W[l - 1][k, j]) / w_vu
    return rho


def _pair_families(net: Network, pattern: Sequence[np.ndarray], fixed: FixedEdges,
                   index: dict) -> list[tuple[Any, list[dict[int, flint.fmpq]]]]:
    """Kernel vectors of ``Gamma`` from pairs of last-hidden-layer neurons with almost equal active sets.

    For neurons ``v, w`` of layer ``l = L - 1`` whose output weights are proportional,
    ``W_L[:, v] = c_v t`` and ``W_L[:, w] = c_w t`` (always so when ``N_L = 1``), the
    derivative along the edge ``j -> v`` is ``c_v a_v(x) h_j(x) t`` (``h_j = 1`` for the
    bias).  So ``e_j(v) / c_v - e_j(w) / c_w`` (edge columns, fixed edges written
    through the rescaling directions, :func:`_edge_column`) has ``Gamma``-image
    ``(a_v - a_w) h_j t``: zero outside ``T = S_v Δ S_w``.  Kernel vectors of the small
    block ``Gamma[T rows, those differences]`` are kernel vectors of ``Gamma``.  Returns
    the families ``(T, differences)``.
    """
    L = net.L
    l = L - 1
    if l < 1:
        return []
    N_L = net.widths[-1]
    WL = net.W[L - 1]
    a = np.asarray(pattern[l - 1], dtype=bool)
    inputs: list[int | None] = [*range(net.widths[l - 1]), None]
    out: list[tuple[Any, list[dict[int, flint.fmpq]]]] = []
    for v in range(net.widths[l]):
        for w in range(v + 1, net.widths[l]):
            T = np.flatnonzero(a[:, v] ^ a[:, w])
            if not (a[:, v] & a[:, w]).any() or T.size * N_L >= 2 * len(inputs):
                continue  # (a family up to twice too tall may still help a joint block)
            k0 = next((k for k in range(N_L) if WL[k, v] != 0), None)
            if k0 is None or WL[k0, w] == 0:
                continue
            c_v, c_w = flint.fmpq(WL[k0, v]), flint.fmpq(WL[k0, w])
            if any(WL[k, v] * c_w != WL[k, w] * c_v for k in range(N_L)):
                continue  # output weights not proportional
            cols = []
            for j in inputs:
                ev, ew = _edge_column(net, fixed, index, l, v, j), _edge_column(net, fixed, index, l, w, j)
                if ev is None or ew is None:
                    continue
                diff = {c: x / c_v for c, x in ev.items()}
                for c, x in ew.items():
                    diff[c] = diff.get(c, flint.fmpq(0)) - x / c_w
                cols.append({c: x for c, x in diff.items() if x != 0})
            if T.size * N_L >= 2 * len(cols):
                continue
            out.append((T, cols))
    return out


def independent_subset(vectors: Sequence[dict[int, flint.fmpq]], dim: int) -> list[dict[int, flint.fmpq]]:
    """A maximal subset independent mod a fixed prime (so independent over Q), in order."""
    if not vectors:
        return []
    from exactident.linalg.blas_modp import pivots_blas
    from exactident.linalg.certified import kernel_to_integer_columns

    p = _SELECT_PRIME
    K = np.zeros((dim, len(vectors)))  # float64 symmetric residues, eliminated as they are (no int64 copy)
    for c, col in enumerate(kernel_to_integer_columns(vectors)):
        for i, v in col.items():
            r = v % p
            K[i, c] = r - p if r > p // 2 else r
    _R, C, _ = pivots_blas(K, p)
    return [vectors[c] for c in C]
