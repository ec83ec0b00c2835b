"""``Gamma(X, theta) = A(X, theta) o Dpsi^theta(tau_theta)`` of the MLP over Q (Prop. 10).

Proposition 10 of the paper says ``Gamma`` is the Jacobian of
``tau -> f_{rho_theta(tau)}(X)``: ordinary backpropagation through the
network with the activation pattern held fixed, where the fixed edges
(:mod:`exactident.model.fixed_edges`) are not parameters.  Working from the pattern
(rather than from signs of ``z``) lets the boundary analysis build
``Gamma(s)`` for each tie resolution ``s``.

Row ``i * N_L + k`` is output ``k`` at sample ``x^i``; columns follow
:func:`exactident.model.fixed_edges.free_parameters`.  The matrix is built by the one
exact builder (:func:`exactident.model.backprop.jacobian_exact`) with the MLP's
:class:`~exactident.model.backprop.Layout` (``T`` selects every weight and bias but the
fixed edges, slopes 0), which takes the dense route.
"""

from __future__ import annotations

from collections.abc import Sequence

import flint
import numpy as np

from exactident.model.backprop import jacobian_exact
from exactident.model.fixed_edges import FixedEdges
from exactident.model.network import Network, relu_fmpq_mat, sample_matrix

__all__ = ["free_columns", "gamma_exact", "hidden_values"]


def free_columns(net: Network, fixed: FixedEdges) -> list[int]:
    """Indices of the free parameters inside the full parameter vector.

    The full vector lists, for ``l = 1..L``, all of ``W_l`` row-major then ``b_l``.
    """
    cols: list[int] = []
    offset = 0
    for l in range(1, net.L + 1):
        n_out, n_in = net.widths[l], net.widths[l - 1]
        cols.extend(offset + i * n_in + j for i in range(n_out) for j in range(n_in)
                    if not fixed.is_fixed(l, i, j))
        offset += n_out * n_in
        cols.extend(range(offset, offset + n_out))
        offset += n_out
    return cols


def hidden_values(net: Network, X: Sequence[Sequence[flint.fmpq]], Z: Sequence[flint.fmpq_mat]) -> list[flint.fmpq_mat]:
    """``[h_0 = X, h_1, ..., h_{L-1}]`` as fmpq_mat ``(n, N_l)``; ``h_l = relu(z_l)``.

    ReLU is 0 at a tie whichever side the tie resolves to, so these do not
    depend on the pattern.
    """
    return [sample_matrix(X, net.widths[0])] + [relu_fmpq_mat(Z[l - 1]) for l in net.hidden_layers()]


def gamma_exact(
    net: Network,
    X: Sequence[Sequence[flint.fmpq]],
    Z: Sequence[flint.fmpq_mat],
    pattern: Sequence[np.ndarray],
    fixed: FixedEdges,
) -> flint.fmpq_mat:
    """Exact ``Gamma(X, theta)`` for a given activation pattern.

    Parameters
    ----------
    net : Network
    X : n rows of N_0 fmpq
    Z : list of fmpq_mat
        Pre-activations from :func:`exactident.model.activation.activation_state`.
    pattern : list of bool arrays ``(n, N_l)``, ``l = 1..L-1``
        Activation pattern (possibly with ties resolved).
    fixed : FixedEdges

    Returns
    -------
    fmpq_mat, shape ``(n * N_L, dim)``, entries in Q

    Examples
    --------
    The hand-checked network of docs/theory.md at the samples ``0, 1``: ``f = 3 relu(2x + 1) + b_2`` with
    ``W_2`` fixed, so the row of sample ``x`` is ``(3x, 3, 1)``.

    >>> from exactident.model.activation import activation_state
    >>> from exactident.model.fixed_edges import fixed_edges
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])],
    ...               [[flint.fmpq(1)], [flint.fmpq(0)]])
    >>> X = [[flint.fmpq(0)], [flint.fmpq(1)]]
    >>> st = activation_state(net, X)
    >>> gamma_exact(net, X, st.Z, st.pattern, fixed_edges(net))
    [0, 3, 1]
    [3, 3, 1]
    """
    # the hidden values are relu(Z) of the caller's Z, whatever the pattern says (a tie's relu is 0)
    return jacobian_exact(net, X, pattern, free_columns(net, fixed), hidden_values(net, X, Z))
