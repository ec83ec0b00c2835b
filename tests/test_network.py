"""``exactident.model.network``: forward pass (vs a Fraction forward pass), graph, degenerate set, dim."""

from __future__ import annotations

from fractions import Fraction

import flint
import pytest
from _gen import forward, random_case

from exactident.errors import CaseFormatError
from exactident.io.case import parse_case
from exactident.model.graph import network_graph
from exactident.model.network import Network, degenerate_neurons, is_degenerate, pre_activations


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


def test_network_refuses_inexact_or_misshaped_parameters():
    # Floats and numpy arrays must not reach the exact path: one error naming the layer.
    np = pytest.importorskip("numpy")
    message = r"<Network>: W_1: expected an fmpq_mat .* found ndarray .*Case.from_arrays"
    with pytest.raises(CaseFormatError, match=message):
        Network((1, 1, 1), [np.array([[2.0]]), np.array([[3.0]])], [[1], [0]])
    with pytest.raises(CaseFormatError, match=r"<Network>: W_2\[0\]\[0\]: expected an exact number .* found 0.5"):
        Network((1, 1, 1), [[[2]], [[0.5]]], [[1], [0]])
    with pytest.raises(CaseFormatError, match=r"<Network>: W_2: expected shape \(1, 1\), found \(1, 2\)"):
        Network((1, 1, 1), [[[2]], [[3, 1]]], [[1], [0]])
    with pytest.raises(CaseFormatError, match=r"<Network>: b_1: expected 1 entries, found 2"):
        Network((1, 1, 1), [[[2]], [[3]]], [[1, 2], [0]])
    with pytest.raises(CaseFormatError, match=r"<Network>: widths: expected at least two positive integers"):
        Network((1, 0, 1), [[[2]], [[3]]], [[1], [0]])
    with pytest.raises(CaseFormatError, match=r"<Network>: W: expected 2 layers"):
        Network((1, 1, 1), [[[2]]], [[1], [0]])


def test_network_converts_exact_entries():
    net = Network([1, 1, 1], [[[Fraction(1, 2)]], flint.fmpz_mat([[3]])], [[flint.fmpz(1)], [0]])
    assert net.widths == (1, 1, 1)
    assert net.W[0][0, 0] == flint.fmpq(1, 2) and isinstance(net.W[1], flint.fmpq_mat)
    assert all(isinstance(v, flint.fmpq) for bl in net.b for v in bl)
