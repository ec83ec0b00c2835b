"""Path set ``P``, lifting ``phi(theta)``, local lifting ``psi^theta`` and ``Dpsi^theta`` (paper §3.1-3.2).

A path is ``(l, (v_l, ..., v_{L-1}))``: it starts at neuron ``v_l`` of layer
``l in [0, L-1]`` and visits one neuron per layer down to ``L-1``; the empty
path ``beta`` is ``(L, ())``.  ``phi(theta)`` is a ``|P| x N_L`` matrix:

- ``phi_{p,k} = prod_{m=l+1}^{L-1} W_m[v_m, v_{m-1}] * W_L[k, v_{L-1}]``, times
  ``b_l[v_l]`` when ``l >= 1``;
- ``phi_{beta,k} = b_L[k]``.

Proposition 1: ``f_theta(X) = alpha(X, theta) phi(theta)``.  Proposition 10:
``Gamma = (alpha ⊗ I_{N_L}) Dpsi^theta(tau_theta)`` (rows ``i N_L + k``).
:func:`verify_propositions` checks both exactly.  ``|P|`` is exponential in
depth: everything here refuses networks above :data:`MAX_LIFTING_ENTRIES`.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

import flint

from exactident.errors import InvariantViolation, UnsupportedCaseError
from exactident.model.activation import ActivationState, alpha_exact, n_paths
from exactident.model.fixed_edges import FixedEdges, Parameter, free_parameters
from exactident.model.gamma import gamma_exact
from exactident.model.network import Network

__all__ = ["MAX_LIFTING_ENTRIES", "Path", "dpsi", "paths", "phi", "psi", "tau_of", "verify_propositions"]

#: A path of ``P``: ``(l, (v_l, ..., v_{L-1}))``, the empty path ``beta`` being ``(L, ())``.
Path = tuple[int, tuple[int, ...]]

#: Refuse to materialise ``Dpsi`` with more entries than this.
MAX_LIFTING_ENTRIES = 5_000_000


def _check_size(net: Network) -> None:
    size = n_paths(net.widths) * net.widths[-1] * net.dim
    if size > MAX_LIFTING_ENTRIES:
        raise UnsupportedCaseError(
            f"|P| = {n_paths(net.widths)} paths: Dpsi would have {size} entries "
            f"(limit {MAX_LIFTING_ENTRIES}); the lifting is only materialised for small networks")


def paths(widths: Sequence[int]) -> list[Path]:
    """The path set ``P`` in the column order of ``alpha``.

    Examples
    --------
    >>> paths((2, 1, 1))
    [(0, (0, 0)), (0, (1, 0)), (1, (0,)), (2, ())]
    """
    L = len(widths) - 1
    out: list[Path] = []
    for l in range(L):
        tuples: list[tuple[int, ...]] = [()]
        for m in range(l, L):
            tuples = [t + (v,) for t in tuples for v in range(widths[m])]
        out.extend((l, t) for t in tuples)
    out.append((L, ()))
    return out


def _path_factors(net: Network, path: Path, k: int) -> list[tuple[Parameter | None, flint.fmpq]]:
    """The factors of ``phi_{p,k}`` with the parameter each one is."""
    l, vs = path
    L = net.L
    if l == L:
        return [(Parameter(L, k), net.b[L - 1][k])]
    factors: list[tuple[Parameter | None, flint.fmpq]] = []
    if l >= 1:
        factors.append((Parameter(l, vs[0]), net.b[l - 1][vs[0]]))
    for m in range(l + 1, L):
        i, j = vs[m - l], vs[m - l - 1]
        factors.append((Parameter(m, i, j), net.W[m - 1][i, j]))
    factors.append((Parameter(L, k, vs[-1]), net.W[L - 1][k, vs[-1]]))
    return factors


def phi(net: Network) -> flint.fmpq_mat:
    """``phi(theta)``, shape ``(|P|, N_L)``, over Q.

    Raises
    ------
    UnsupportedCaseError
        If the lifting is too large to materialise.
    """
    _check_size(net)
    P = paths(net.widths)
    N_L = net.widths[-1]
    return flint.fmpq_mat(len(P), N_L, [prod((v for _, v in _path_factors(net, p, k)), start=flint.fmpq(1))
                                        for p in P for k in range(N_L)])


def tau_of(net: Network, fixed: FixedEdges) -> list[flint.fmpq]:
    """``tau_theta``: the values of the free parameters, length ``dim``."""
    return [net.W[p.l - 1][p.i, p.j] if p.j is not None else net.b[p.l - 1][p.i] for p in free_parameters(net, fixed)]


def psi(net: Network, fixed: FixedEdges, tau: Sequence[flint.fmpq]) -> flint.fmpq_mat:
    """``psi^theta(tau) = phi(rho_theta(tau))``: the fixed edges keep theta's values."""
    other = net.copy()
    for p, value in zip(free_parameters(net, fixed), tau):
        if p.j is not None:
            other.W[p.l - 1][p.i, p.j] = value
        else:
            other.b[p.l - 1][p.i] = value
    return phi(other)


def dpsi(net: Network, fixed: FixedEdges) -> flint.fmpq_mat:
    """``Dpsi^theta(tau_theta)``, shape ``(|P| N_L, dim)``, over Q; row ``p N_L + k``.

    Each ``phi_{p,k}`` is a product of distinct parameters, so its partial
    derivative is the product of the other factors (0 for a parameter off the path).
    """
    _check_size(net)
    params = free_parameters(net, fixed)
    index = {p: c for c, p in enumerate(params)}
    N_L = net.widths[-1]
    P = paths(net.widths)
    D = flint.fmpq_mat(len(P) * N_L, len(params))
    for r, (p, k) in enumerate((p, k) for p in P for k in range(N_L)):
        factors = _path_factors(net, p, k)
        for s, (param, _) in enumerate(factors):
            c = index.get(param) if param is not None else None
            if c is not None:
                D[r, c] = prod((v for t, (_, v) in enumerate(factors) if t != s), start=flint.fmpq(1))
    return D


def _kron_identity(A: flint.fmpq_mat, n: int) -> flint.fmpq_mat:
    m, p = A.nrows(), A.ncols()
    out = flint.fmpq_mat(m * n, p * n)
    for i in range(m):
        for j in range(p):
            a = A[i, j]
            if a != 0:
                for k in range(n):
                    out[i * n + k, j * n + k] = a
    return out


def verify_propositions(net: Network, X: Sequence[Sequence[flint.fmpq]], state: ActivationState,
                        fixed: FixedEdges, gamma: flint.fmpq_mat | None = None) -> None:
    """Check Prop. 1 (``f_theta(X) = alpha phi``) and Prop. 10 (``Gamma = A Dpsi``) exactly.

    Raises
    ------
    InvariantViolation
        If either identity fails (a bug in exactident).
    UnsupportedCaseError
        If the lifting is too large to materialise.
    """
    _check_size(net)
    alpha = alpha_exact(state.pattern, X)
    if len(X):
        if alpha * phi(net) != state.Z[-1]:
            raise InvariantViolation("Proposition 1 failed: f_theta(X) != alpha(X, theta) phi(theta)")
        G = gamma if gamma is not None else gamma_exact(net, X, state.Z, state.pattern, fixed)
        if _kron_identity(alpha, net.widths[-1]) * dpsi(net, fixed) != G:
            raise InvariantViolation("Proposition 10 failed: Gamma != A(X, theta) o Dpsi(tau_theta)")
