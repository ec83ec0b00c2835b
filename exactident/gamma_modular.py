"""``Gamma`` and the Gram matrix of ``alpha`` mod p, and certified ``R_Gamma``, ``R_A`` (Props. 10-11, Theorems 8-9).

With the exact activation pattern fixed (from the integer forward pass of
:mod:`exactident.integer_forward`), every entry of ``Gamma`` is a polynomial
in the data, so ``Gamma mod p`` is backpropagation in Z/pZ: the same
recursion as :func:`exactident.gamma.gamma_exact`, vectorised over samples
with int64 residues.  ``rank alpha`` is the rank of the ``n x n`` Gram matrix
``alpha alpha^T`` (entries from counts of co-active neurons,
:func:`exactident.activation.alpha_gram`), so ``|P|`` columns are never built.

:func:`certify_ranks` turns ranks mod p into exact ranks with the bounds of
:mod:`exactident.linalg.modular`, computing only what the verdict needs:
``rank_a`` is skipped when ``C_S`` holds, and ``rank Gamma <= R_A`` (Prop. 11)
closes the gap for free in the common not-identifiable case.  When no
certificate is found it falls back to exact elimination (the reference path).

Called by :mod:`exactident.check`; :func:`verify_rank_certificate` is called
through :func:`exactident.linalg.modular.verify_rank_certificate`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from math import ceil, lcm, prod
from typing import Any, Mapping, Sequence

import flint
import numpy as np

from .activation import alpha_gram, n_paths
from .errors import InvariantViolation
from .fixed_edges import FixedEdges, fixed_edges
from .gamma import free_columns, gamma_exact
from .integer_forward import common_denominator, data_denominator, integer_forward
from .linalg import exact
from .linalg.modular import (CertifiedRank, certified_rank, kernel_is_zero_mod, modular_lower_bound,
                             random_primes, rank_mod_p, require_prime)
from .network import Network

__all__ = ["ModularData", "gamma_mod_p", "gram_counts", "gram_mod_p", "gamma_entry_bound", "gram_entry_bound", "certify_rank_gamma",
           "certify_rank_alpha", "pattern_rank_bound", "neuron_local_kernel", "RankResult", "certify_ranks", "verify_rank_certificate"]


class _Scaled:
    """A rational matrix as ``ints / den`` (object array of Python ints), reduced mod p on demand."""

    def __init__(self, values: Sequence[Any], shape: tuple[int, int]) -> None:
        values = [flint.fmpq(v) for v in values]
        self.den = common_denominator(values)
        self.ints = np.array([int(v.p) * (self.den // int(v.q)) for v in values] or [0],
                             dtype=object)[:len(values)].reshape(shape)

    def mod(self, p: int) -> np.ndarray:
        if self.den % p == 0:
            raise InvariantViolation(f"prime {p} divides a denominator of the data")
        return (self.ints % p).astype(np.int64) * pow(self.den, -1, p) % p


class ModularData:
    """``X``, ``W_l``, ``b_l`` scaled to integers once, for many primes (speed only)."""

    def __init__(self, net: Network, X: Sequence[Sequence[flint.fmpq]]) -> None:
        self.X = _Scaled([v for row in X for v in row], (len(X), net.widths[0]))
        self.W = [_Scaled(W.entries(), (W.nrows(), W.ncols())) for W in net.W]
        self.b = [_Scaled(b, (1, len(b))) for b in net.b]


def gamma_mod_p(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                fixed: FixedEdges, p: int, avoid: int = 1, data: "ModularData | None" = None) -> np.ndarray:
    """``Gamma(X, theta) mod p`` by backpropagation in Z/pZ (Prop. 10).

    Parameters
    ----------
    net, X, pattern, fixed
        As for :func:`exactident.gamma.gamma_exact`.
    p : int
        A prime in ``[3, 2**31)`` dividing no denominator of the data.
    avoid : int
        The data's denominator (:func:`exactident.integer_forward.data_denominator`).
    data : ModularData, optional
        The same data pre-scaled to integers (saves time over many primes).

    Returns
    -------
    numpy.ndarray of int64, shape ``(n * N_L, dim)``, entries in ``[0, p)``
        Row ``i * N_L + k``, columns as :func:`exactident.fixed_edges.free_parameters`;
        equal to ``gamma_exact(...)`` reduced mod p.

    Raises
    ------
    InvariantViolation
        If ``p`` is not a usable prime (composite, or divides a denominator).

    Examples
    --------
    SPEC §2's network at ``0, 1``: exact rows ``(0, 3, 1)``, ``(3, 3, 1)``.

    >>> from exactident.activation import activation_state
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])],
    ...               [[flint.fmpq(1)], [flint.fmpq(0)]])
    >>> X = [[flint.fmpq(0)], [flint.fmpq(1)]]
    >>> gamma_mod_p(net, X, activation_state(net, X).pattern, fixed_edges(net), 7).tolist()
    [[0, 3, 1], [3, 3, 1]]
    """
    require_prime(p, avoid)
    n, N_L, L = len(X), net.widths[-1], net.L
    data = data or ModularData(net, X)
    Xp = data.X.mod(p)
    Wp = [W.mod(p) for W in data.W]
    bp = [b.mod(p)[0] for b in data.b]
    masks = [np.asarray(a, dtype=np.int64).reshape(n, net.widths[l + 1]) for l, a in enumerate(pattern)]
    from .linalg.modular import matmul_mod

    H = [Xp]
    for l in range(1, L):
        Z = (matmul_mod(H[-1], Wp[l - 1].T.copy(), p) + bp[l - 1]) % p
        H.append(Z * masks[l - 1])
    # D = d f / d z_l, stacked over samples: row i * N_L + k.
    D = np.tile(np.eye(N_L, dtype=np.int64), (n, 1))
    blocks: list[np.ndarray] = []
    for l in range(L, 0, -1):
        Hrep = np.repeat(H[l - 1], N_L, axis=0)
        dW = (D[:, :, None] * Hrep[:, None, :]) % p
        blocks.append(D)
        blocks.append(dW.reshape(n * N_L, net.widths[l] * net.widths[l - 1]))
        if l > 1:
            D = matmul_mod(D, Wp[l - 1], p) * np.repeat(masks[l - 2], N_L, axis=0)
    full = np.concatenate(blocks[::-1], axis=1) if blocks else np.zeros((n * N_L, 0), dtype=np.int64)
    return np.ascontiguousarray(full[:, free_columns(net, fixed)])


def gram_counts(pattern: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``c_l = A_l A_l^T`` (int64, exact: counts ``<= N_l``), deepest layer first."""
    return [np.asarray(a, dtype=np.int64) @ np.asarray(a, dtype=np.int64).T for a in reversed(pattern)]


def gram_mod_p(pattern: Sequence[np.ndarray], X: Sequence[Sequence[flint.fmpq]], p: int,
               avoid: int = 1, counts: Sequence[np.ndarray] | None = None,
               X_scaled: "_Scaled | None" = None) -> np.ndarray:
    """``alpha alpha^T mod p``, shape ``(n, n)`` (see :func:`exactident.activation.alpha_gram`).

    ``<alpha(x^i), alpha(x^j)> = (x^i . x^j) prod_l c_l + sum_l prod_{l' >= l} c_l' + 1``,
    ``c_l(i, j)`` = number of neurons of hidden layer ``l`` active at both samples.

    Examples
    --------
    >>> gram_mod_p([np.array([[True], [False]])], [[flint.fmpq(2)], [flint.fmpq(-1, 2)]], 7).tolist()
    [[6, 1], [1, 1]]
    """
    from .linalg.modular import matmul_mod

    n = len(X)
    if n == 0:
        require_prime(p, avoid)
        return np.zeros((0, 0), dtype=np.int64)
    require_prime(p, avoid)
    Xp = (X_scaled or _Scaled([v for row in X for v in row], (n, len(X[0])))).mod(p)
    prod_c = np.ones((n, n), dtype=np.int64)
    suffix = np.zeros((n, n), dtype=np.int64)
    for c in (counts if counts is not None else gram_counts(pattern)):
        prod_c = prod_c * (c % p) % p
        suffix = (suffix + prod_c) % p
    XX = matmul_mod(Xp, Xp.T.copy(), p)
    return (XX * prod_c % p + suffix + 1) % p


def _max_abs(values) -> flint.fmpq:
    return max((abs(flint.fmpq(v)) for v in values), default=flint.fmpq(0))


def gamma_entry_bound(net: Network, X: Sequence[Sequence[flint.fmpq]]) -> int:
    """An integer ``B >= |S Gamma|`` entrywise, for an integer ``S`` made of the data's denominators.

    ``S Gamma`` is an integer matrix for ``S = lcm_l(e_l s_{l-1})``, ``e_l = prod_{j>l}``
    (denominator of ``W_j``), ``s_l`` the denominator of ``h_l``; ``|d f / d z_l|``
    is at most ``prod_{j>l} max_r sum_k |W_j[k, r]|``.  Whatever the pattern.
    """
    fw = integer_forward(net, X)
    L = net.L
    dW = [common_denominator(W.entries()) for W in net.W]
    colsum = []
    for W in net.W:
        rows = W.table()
        colsum.append(max((sum((abs(rows[k][r]) for k in range(W.nrows())), flint.fmpq(0))
                           for r in range(W.ncols())), default=flint.fmpq(0)))
    S = 1
    worst = flint.fmpq(0)
    D_abs = flint.fmpq(1)
    e = 1
    for l in range(L, 0, -1):
        S = lcm(S, e * fw.den[l - 1])
        h_max = _max_abs(fw.H_int[l - 1].entries()) / fw.den[l - 1]
        worst = max(worst, D_abs * max(h_max, flint.fmpq(1)))
        D_abs *= colsum[l - 1]
        e *= dW[l - 1]
    return int(ceil(flint.fmpq(S) * worst)) + 1


def gram_entry_bound(X: Sequence[Sequence[flint.fmpq]], widths: Sequence[int]) -> int:
    """An integer ``B >= |d^2 alpha alpha^T|`` entrywise, ``d`` the denominator of ``X``."""
    d = common_denominator(v for row in X for v in row)
    x_max = int(_max_abs(v for row in X for v in row) * d)
    L = len(widths) - 1
    hidden = list(widths[1:L])
    tail = sum(prod(hidden[l:]) for l in range(len(hidden)))
    return widths[0] * x_max * x_max * prod(hidden) + d * d * (tail + 1)


def pattern_rank_bound(pattern: Sequence[np.ndarray], X: Sequence[Sequence[flint.fmpq]]) -> int:
    """``rank alpha <= sum_g rank [X_g, 1]`` over groups ``g`` of samples with the same pattern.

    Samples with one activation pattern have ``alpha`` rows ``(x ⊗ t, c)`` with
    ``t, c`` fixed, linear in ``(x, 1)``; rank is subadditive over row groups.
    Exact (small ``fmpq`` ranks).

    Examples
    --------
    >>> X = [[flint.fmpq(k)] for k in range(5)]
    >>> pattern_rank_bound([np.array([[True]] * 5)], X)
    2
    """
    groups: dict[tuple, list[int]] = {}
    n = len(X)
    for i in range(n):
        rows = [np.asarray(a[i], dtype=bool) for a in pattern]
        dead = [m for m, a in enumerate(rows) if not a.any()]
        if dead:
            # a whole layer m inactive: every path through it is 0, the row no longer depends
            # on x nor on the layers before m -- one fixed row for the group (rank <= 1)
            key = ("dead", dead[-1]) + tuple(a.tobytes() for a in rows[dead[-1] + 1:])
        else:
            key = ("live",) + tuple(a.tobytes() for a in rows)
        groups.setdefault(key, []).append(i)
    total = 0
    for key, rows_g in groups.items():
        if key[0] == "dead":
            total += 1
            continue
        M = flint.fmpq_mat(len(rows_g), len(X[0]) + 1, [v for i in rows_g for v in list(X[i]) + [flint.fmpq(1)]])
        total += exact.rank(M)
    return total


def _sparse_columns(K: flint.fmpq_mat) -> list[dict[int, flint.fmpq]]:
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
        Sparse columns (indices into :func:`exactident.fixed_edges.free_parameters`);
        disjoint supports, so they are independent.
    """
    from .fixed_edges import free_parameters

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


def certify_rank_gamma(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                       fixed: FixedEdges, *, rng: random.Random | None = None,
                       upper_bounds: Mapping[str, int] | None = None,
                       lower: tuple[int, int, np.ndarray] | None = None) -> CertifiedRank:
    """Exact ``R_Gamma = rank Gamma`` with a certificate (falls back to exact elimination)."""
    avoid = data_denominator(net, X)
    shape = (len(X) * net.widths[-1], net.dim)
    data = ModularData(net, X)
    res = certified_rank(lambda q: gamma_mod_p(net, X, pattern, fixed, q, avoid, data), shape, avoid=avoid,
                         entry_bound=lambda: gamma_entry_bound(net, X), upper_bounds=upper_bounds,
                         rng=rng, lower=lower, local_kernel=lambda: neuron_local_kernel(net, X, pattern, fixed),
                         exact_kernel=lambda: _sparse_columns(exact.nullspace(
                             gamma_exact(net, X, integer_forward(net, X).Z(), pattern, fixed))))
    if res is not None:
        return res
    r = exact.rank(gamma_exact(net, X, integer_forward(net, X).Z(), pattern, fixed))
    return CertifiedRank(r, {"rank": r, "shape": list(shape), "upper": {"kind": "exact-elimination"}})


def certify_rank_alpha(pattern: Sequence[np.ndarray], X: Sequence[Sequence[flint.fmpq]],
                       widths: Sequence[int], *, rng: random.Random | None = None) -> CertifiedRank:
    """Exact ``rank alpha`` (= rank of its Gram matrix over Q) with a certificate; ``R_A = N_L`` times it."""
    avoid = common_denominator(v for row in X for v in row)
    n = len(X)
    counts = gram_counts(pattern)
    Xs = _Scaled([v for row in X for v in row], (n, widths[0]))
    res = certified_rank(lambda q: gram_mod_p(pattern, X, q, avoid, counts, Xs), (n, n), avoid=avoid,
                         entry_bound=lambda: gram_entry_bound(X, widths),
                         upper_bounds={"paths": n_paths(widths), "patterns": pattern_rank_bound(pattern, X)},
                         rng=rng, exact_kernel=lambda: _sparse_columns(exact.nullspace(alpha_gram(pattern, X))))
    if res is not None:
        return res
    r = exact.rank(alpha_gram(pattern, X)) if n else 0
    return CertifiedRank(r, {"rank": r, "shape": [n, n], "upper": {"kind": "exact-elimination"}})


@dataclass
class RankResult:
    """``rank_gamma`` (exact), ``rank_a`` (exact, or None when ``C_S`` made it unnecessary), certificate."""

    rank_gamma: int
    rank_a: int | None
    certificate: dict[str, Any]


def certify_ranks(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                  fixed: FixedEdges, *, need_rank_a: bool = False,
                  rng: random.Random | None = None) -> RankResult:
    """Certified ``R_Gamma`` and, when needed, ``R_A = N_L rank alpha`` (Prop. 11).

    Only what the verdict needs: one prime whose rank mod p is ``dim`` proves
    ``C_S`` (Theorem 9) and ``R_A`` is then skipped unless ``need_rank_a``.
    Otherwise ``R_A`` is certified first and used as an upper bound on
    ``R_Gamma`` (``Gamma = A o Dpsi``); only if that leaves a gap is a kernel
    of ``Gamma`` reconstructed.

    Returns
    -------
    RankResult
        ``certificate`` is ``{"fixed_edges": [[l, v, k], ...], "rank_gamma": {...},
        "rank_a": {...}}`` (``rank_a`` absent when skipped), checked by
        :func:`verify_rank_certificate`.

    Examples
    --------
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])],
    ...               [[flint.fmpq(1)], [flint.fmpq(0)]])
    >>> X = [[flint.fmpq(0)], [flint.fmpq(1)], [flint.fmpq(2)]]
    >>> from exactident.activation import activation_state
    >>> res = certify_ranks(net, X, activation_state(net, X).pattern, fixed_edges(net))
    >>> res.rank_gamma, res.rank_a, res.certificate["rank_gamma"]["upper"]["kind"]
    (2, 2, 'rank_a')
    """
    rng = rng or random.Random()
    avoid = data_denominator(net, X)
    dim, N_L = net.dim, net.widths[-1]
    rows = len(X) * N_L
    cert: dict[str, Any] = {"fixed_edges": [[l, v, k] for (l, v), k in sorted(fixed.s_max.items())]}
    data = ModularData(net, X)
    lower = modular_lower_bound(lambda q: gamma_mod_p(net, X, pattern, fixed, q, avoid, data), avoid=avoid,
                                rng=rng, stop_at=min(dim, rows))
    rank_a = None
    bounds: dict[str, int] = {}
    if need_rank_a or lower[0] < dim:
        ra = certify_rank_alpha(pattern, X, net.widths, rng=rng)
        rank_a = N_L * ra.rank
        cert["rank_a"] = dict(ra.certificate, rank_a=rank_a)
        bounds["rank_a"] = rank_a
    g = certify_rank_gamma(net, X, pattern, fixed, rng=rng, upper_bounds=bounds, lower=lower)
    cert["rank_gamma"] = g.certificate
    if rank_a is not None and g.rank > rank_a:
        raise InvariantViolation(f"rank Gamma = {g.rank} > R_A = {rank_a}, contradicting Prop. 11")
    return RankResult(g.rank, rank_a, cert)


def _check_one(problems: list[str], what: str, c: Mapping[str, Any], image, shape, avoid, bound_fn,
               structural: Mapping[str, int], exact_rank, local_kernel=None) -> int | None:
    """Check one matrix's certificate; returns the certified rank or None."""
    try:
        r = int(c["rank"])
        if list(c["shape"]) != list(shape):
            problems.append(f"{what}: shape {c['shape']} != {list(shape)}")
            return None
        up = c["upper"]
        kind = up["kind"]
        if kind == "exact-elimination":
            true = exact_rank()
            if true != r:
                problems.append(f"{what}: exact rank is {true}, certificate says {r}")
                return None
            return r
        p = require_prime(int(c["lower"]["prime"]), avoid)
        rp = rank_mod_p(image(p), p)
        if rp != r or int(c["lower"]["rank_mod_p"]) != r:
            problems.append(f"{what}: rank mod {p} is {rp}, certificate says {r}")
            return None
        if kind in structural:
            if int(up["bound"]) != structural[kind] or structural[kind] != r:
                problems.append(f"{what}: upper bound {kind} is {structural[kind]}, not {r}")
                return None
            return r
        if kind != "kernel":
            problems.append(f"{what}: unknown upper bound kind {kind!r}")
            return None
        from .linalg.modular import _full_column_rank, kernel_to_integer_columns

        if up.get("source") == "local" and "kernel" not in up:
            if local_kernel is None:
                problems.append(f"{what}: no local kernel construction for this matrix")
                return None
            K = local_kernel()  # rebuilt from the case, then checked like any other K
            if len(K) != int(up["nullity"]):
                problems.append(f"{what}: local kernel has {len(K)} vectors, certificate says {up['nullity']}")
                return None
        else:
            K = [{int(i): flint.fmpq(*(int(t) for t in str(v).split("/"))) for i, v in col}
                 for col in up["kernel"]]
        n = shape[1]
        if any(not 0 <= i < n for col in K for i in col) or shape[1] - len(K) != r:
            problems.append(f"{what}: kernel has {len(K)} columns or bad indices; rank {r} needs {n - r}")
            return None
        K_int = kernel_to_integer_columns(K)
        bound = n * bound_fn() * max((abs(v) for col in K_int for v in col.values()), default=0)
        if "primes" in up:
            primes = [require_prime(int(q), avoid) for q in up["primes"]]
        else:  # no primes given: draw our own, enough of them
            primes = []
            while prod(primes) <= bound:
                primes += random_primes(1, avoid, random.Random(len(primes)), exclude=primes)
        if len(set(primes)) != len(primes) or not primes:
            problems.append(f"{what}: kernel check primes must be distinct and nonempty")
            return None
        if prod(primes) <= bound:
            problems.append(f"{what}: product of check primes does not exceed the bound on |M K|")
            return None
        if not _full_column_rank(K_int, n, primes[0]):
            problems.append(f"{what}: kernel basis is not of full column rank")
            return None
        if not kernel_is_zero_mod(image, n, K_int, primes, avoid):
            problems.append(f"{what}: M K != 0")
            return None
        return r
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        problems.append(f"{what}: malformed certificate ({exc!r})")
    except InvariantViolation as exc:
        problems.append(f"{what}: {exc}")
    return None


def verify_rank_certificate(case: Any, rank_certificate: Mapping[str, Any]) -> list[str]:
    """Re-check ``certificate["rank"]`` from the case alone; list of problems (empty = valid).

    Recomputes the exact activation pattern, the images mod the certificate's
    primes, the entry bounds, and checks every claim: primes are primes not
    dividing a denominator, the ranks mod p, the structural bounds, and for
    kernel bounds ``M K = 0`` (mod primes whose product exceeds the bound on
    ``|M K|``) with ``K`` of full column rank.
    """
    from .activation import activation_state

    problems: list[str] = []
    net, X = case.network, case.X
    try:
        default = fixed_edges(net).s_max
        choice = {(int(l), int(v)): int(k) for l, v, k in rank_certificate.get("fixed_edges", [])}
        fixed = fixed_edges(net, {key: k for key, k in choice.items() if default.get(key) != k})
    except Exception as exc:  # malformed input: report, do not raise
        return [f"fixed_edges: malformed ({exc!r})"]
    state = activation_state(net, X)
    pattern = state.pattern
    avoid = data_denominator(net, X)
    n, N_L, dim = len(X), net.widths[-1], net.dim
    rank_a = None
    if "rank_a" in rank_certificate:
        c = rank_certificate["rank_a"]
        avoid_x = common_denominator(v for row in X for v in row)
        r = _check_one(problems, "rank_a", c, lambda q: gram_mod_p(pattern, X, q, avoid_x), (n, n), avoid_x,
                       lambda: gram_entry_bound(X, net.widths),
                       {"shape": n, "paths": n_paths(net.widths), "patterns": pattern_rank_bound(pattern, X)},
                       lambda: exact.rank(alpha_gram(pattern, X)) if n else 0)
        if r is not None:
            rank_a = N_L * r
            if c.get("rank_a") != rank_a:
                problems.append(f"rank_a: R_A = N_L rank alpha = {rank_a}, certificate says {c.get('rank_a')}")
    if "rank_gamma" not in rank_certificate:
        problems.append("rank_gamma: missing")
        return problems
    structural = {"shape": min(n * N_L, dim)}
    if rank_a is not None:
        structural["rank_a"] = rank_a
    _check_one(problems, "rank_gamma", rank_certificate["rank_gamma"],
               lambda q: gamma_mod_p(net, X, pattern, fixed, q, avoid), (n * N_L, dim), avoid,
               lambda: gamma_entry_bound(net, X), structural,
               lambda: exact.rank(gamma_exact(net, X, state.Z, pattern, fixed)),
               lambda: neuron_local_kernel(net, X, pattern, fixed))
    return problems
