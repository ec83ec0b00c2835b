"""Fixed edges ``s_max``, free edges ``F_theta`` and the parameter order (paper §3.2).

For each hidden neuron ``v`` of layer ``l`` the outgoing edge ``v -> s_max(v)``
of largest ``|weight|`` is held fixed; ties are broken by the lowest index
(docs/theory.md).  Fixing one nonzero outgoing edge per neuron removes the positive
rescaling symmetry; any nonzero edge would do, and the verdict does not depend
on the choice (tested in ``tests/test_properties.py``), so callers may
override it.

Parameter order (columns of ``Gamma``, coordinates of ``tau``): for
``l = 1..L``, the free entries of ``W_l`` row-major, then ``b_l``.  Names are
``W_l[i,j]`` and ``b_l[i]`` with the paper's 1-based ``l`` and 0-based ``i, j``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from exactident.errors import UnsupportedCaseError
from exactident.model.network import Network

__all__ = ["FixedEdges", "Parameter", "fixed_edges", "free_parameters"]


@dataclass(frozen=True)
class Parameter:
    """One coordinate of ``tau``: a weight ``W_l[i,j]`` (``j`` set) or a bias ``b_l[i]``."""

    l: int
    i: int
    j: int | None = None

    @property
    def name(self) -> str:
        return f"W_{self.l}[{self.i},{self.j}]" if self.j is not None else f"b_{self.l}[{self.i}]"


@dataclass(frozen=True)
class FixedEdges:
    """``s_max`` per hidden neuron.

    Attributes
    ----------
    s_max : dict (l, v) -> k
        Hidden neuron ``v`` of layer ``l`` keeps ``W_{l+1}[k, v]`` fixed.
    """

    s_max: Mapping[tuple[int, int], int]

    def is_fixed(self, l: int, i: int, j: int) -> bool:
        """Is the weight ``W_l[i, j]`` (edge ``(l-1, j) -> (l, i)``) fixed?"""
        return self.s_max.get((l - 1, j)) == i


def fixed_edges(net: Network, choice: Mapping[tuple[int, int], int] | None = None) -> FixedEdges:
    """Choose the fixed outgoing edge of every hidden neuron.

    Parameters
    ----------
    net : Network
    choice : dict (l, v) -> k, optional
        Override for some neurons; the chosen weight ``W_{l+1}[k, v]`` must be
        nonzero.

    Returns
    -------
    FixedEdges
        Default ``s_max(v)``: largest ``|W_{l+1}[k, v]|``, lowest ``k`` on ties.
        A neuron whose outgoing weights are all zero (degenerate) gets ``k = 0``.

    Raises
    ------
    UnsupportedCaseError
        If ``choice`` names a zero weight or a neuron that does not exist.

    Examples
    --------
    >>> import flint
    >>> net = Network((1, 2, 2), [flint.fmpq_mat([[1], [1]]),
    ...     flint.fmpq_mat([[1, -5], [-3, 5]])], [[0, 0], [0, 0]])
    >>> dict(fixed_edges(net).s_max)
    {(1, 0): 1, (1, 1): 0}
    """
    s_max: dict[tuple[int, int], int] = {}
    for l in net.hidden_layers():
        W_out = net.W[l]
        for v in range(net.widths[l]):
            col = [abs(W_out[k, v]) for k in range(W_out.nrows())]
            s_max[(l, v)] = max(range(len(col)), key=lambda k: (col[k], -k))
    for (l, v), k in (choice or {}).items():
        if (l, v) not in s_max or not 0 <= k < net.widths[l + 1]:
            raise UnsupportedCaseError(f"fixed edge ({l},{v})->{k}: no such hidden neuron or edge")
        if net.W[l][k, v] == 0:
            raise UnsupportedCaseError(f"fixed edge ({l},{v})->{k}: weight W_{l + 1}[{k},{v}] is zero")
        s_max[(l, v)] = k
    return FixedEdges(s_max)


def free_parameters(net: Network, fixed: FixedEdges) -> list[Parameter]:
    """The coordinates of ``tau`` (``F_theta`` then biases, layer by layer).

    Returns
    -------
    list of Parameter
        Length ``net.dim``.

    Examples
    --------
    >>> import flint
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])], [[1], [0]])
    >>> [p.name for p in free_parameters(net, fixed_edges(net))]
    ['W_1[0,0]', 'b_1[0]', 'b_2[0]']
    """
    params = []
    for l in range(1, net.L + 1):
        for i in range(net.widths[l]):
            for j in range(net.widths[l - 1]):
                if not fixed.is_fixed(l, i, j):
                    params.append(Parameter(l, i, j))
        params.extend(Parameter(l, i) for i in range(net.widths[l]))
    return params
