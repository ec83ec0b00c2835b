"""The network as a layered directed graph ``(V, E)`` (paper §2.1), for users and plots.

networkx is imported here only, on first use: the exact engine never needs
the graph (path counts are products of widths, :func:`exactident.model.activation.n_paths`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from exactident.model.network import Network

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["network_graph"]


def network_graph(net: Network) -> nx.DiGraph:
    """The graph ``(V, E)`` of paper §2.1: nodes ``(l, v)``, edges carry ``weight``.

    Parameters
    ----------
    net : Network

    Returns
    -------
    networkx.DiGraph
        Nodes ``(l, v)`` for ``0 <= l <= L``, ``0 <= v < N_l`` with attribute
        ``layer``; an edge ``(l-1, j) -> (l, i)`` per entry ``W_l[i, j]``
        (attribute ``weight``, an ``fmpq``), zero weights included.

    Examples
    --------
    >>> import flint
    >>> net = Network((1, 2, 1), [flint.fmpq_mat([[1], [2]]), flint.fmpq_mat([[3, 4]])],
    ...               [[flint.fmpq(0), flint.fmpq(0)], [flint.fmpq(0)]])
    >>> G = network_graph(net)
    >>> G.number_of_nodes(), G.number_of_edges(), G.edges[(1, 1), (2, 0)]["weight"]
    (4, 4, 4)
    """
    import networkx as nx

    G = nx.DiGraph()
    for l, n_l in enumerate(net.widths):
        G.add_nodes_from(((l, v) for v in range(n_l)), layer=l)
    for l in range(1, net.L + 1):
        W = net.W[l - 1]
        for i in range(W.nrows()):
            for j in range(W.ncols()):
                G.add_edge((l - 1, j), (l, i), weight=W[i, j])
    return G
