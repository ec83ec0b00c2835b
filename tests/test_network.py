"""``exactident.model.network``: forward pass (vs a Fraction forward pass), graph, degenerate set, dim."""

from __future__ import annotations

from fractions import Fraction

import pytest
from _gen import forward, random_case

from exactident.io.case import parse_case
from exactident.model.graph import network_graph
from exactident.model.network import degenerate_neurons, is_degenerate, pre_activations


@pytest.mark.parametrize("widths", [(1, 1, 1), (2, 3, 2), (3, 2), (1, 2, 2, 1), (2, 2, 2, 2)])
def test_pre_activations_match_fraction_forward(widths):
    tc = random_case(widths, 9, 5, rational=True, allow_ties=True)
    net = parse_case(tc.obj()).network
    Z = pre_activations(net, parse_case(tc.obj()).X)
    for i, x in enumerate(tc.X):
        for l, z in enumerate(forward(tc.W, tc.b, x)):
            assert [Fraction(int(q.p), int(q.q)) for q in Z[l].table()[i]] == z
    assert net.dim == sum(widths[l] * widths[l + 1] for l in range(len(widths) - 1)) + widths[-1]


def test_graph_has_paper_nodes_and_weighted_edges():
    tc = random_case((2, 3, 2), 1, 0)
    net = parse_case(tc.obj()).network
    G = network_graph(net)
    assert G.number_of_nodes() == 7 and G.number_of_edges() == 2 * 3 + 3 * 2
    w = lambda q: Fraction(int(q.p), int(q.q))  # noqa: E731
    assert w(G.edges[(0, 1), (1, 2)]["weight"]) == tc.W[0][2][1]
    assert w(G.edges[(1, 0), (2, 1)]["weight"]) == tc.W[1][1][0]


def _net(W, b):
    return parse_case({"format": "exactident-case/1", "name": "d", "widths": [1, 2, 2, 1],
                       "weights": W, "biases": b, "sample": []}).network


def test_degenerate_set():
    ok = _net([[[1], [2]], [[1, 0], [0, 1]], [[1, 1]]], [[0, 0], [0, 0], [0]])
    assert degenerate_neurons(ok) == [] and not is_degenerate(ok)
    dead_out = _net([[[1], [2]], [[1, 0], [1, 0]], [[1, 1]]], [[0, 0], [0, 0], [0]])
    assert degenerate_neurons(dead_out) == [(1, 1, "outgoing")]
    dead_in = _net([[[1], [2]], [[1, 1], [0, 0]], [[1, 1]]], [[0, 0], [0, 0], [0]])
    assert degenerate_neurons(dead_in) == [(2, 1, "incoming")]
    # zero incoming weights but a nonzero bias: a constant neuron, not in S
    const = _net([[[0], [2]], [[1, 0], [0, 1]], [[1, 1]]], [[1, 0], [0, 0], [0]])
    assert degenerate_neurons(const) == []
