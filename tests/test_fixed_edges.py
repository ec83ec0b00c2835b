"""``exactident.model.fixed_edges``: s_max, F_theta, parameter order and names, and its errors."""

from __future__ import annotations

import pytest
from _gen import random_case

from exactident.check import check
from exactident.errors import UnsupportedCaseError
from exactident.io.case import parse_case
from exactident.model.fixed_edges import fixed_edges, free_parameters


def net_of(widths, W, b):
    return parse_case({"format": "exactident-case/1", "name": "f", "widths": widths, "weights": W,
                       "biases": b, "sample": []}).network


NET = net_of([1, 2, 3], [[[1], [1]], [[1, 0], [-4, 2], [4, -2]]], [[0, 0], [0, 0, 0]])


def test_default_is_largest_abs_lowest_index():
    # neuron (1,0): |1|, |-4|, |4| -> k = 1 (lowest of the tied 4s); neuron (1,1): |0|, |2|, |-2| -> k = 1
    assert dict(fixed_edges(NET).s_max) == {(1, 0): 1, (1, 1): 1}


def test_parameter_order_and_names():
    names = [p.name for p in free_parameters(NET, fixed_edges(NET))]
    assert names == ["W_1[0,0]", "W_1[1,0]", "b_1[0]", "b_1[1]",
                     "W_2[0,0]", "W_2[0,1]", "W_2[2,0]", "W_2[2,1]", "b_2[0]", "b_2[1]", "b_2[2]"]
    assert len(names) == NET.dim == 1 * 2 + 2 * 3 + 3


def test_choice_overrides():
    fixed = fixed_edges(NET, {(1, 0): 0, (1, 1): 2})
    assert dict(fixed.s_max) == {(1, 0): 0, (1, 1): 2}
    assert fixed.is_fixed(2, 0, 0) and fixed.is_fixed(2, 2, 1) and not fixed.is_fixed(2, 1, 0)


@pytest.mark.parametrize("choice,match", [
    ({(1, 1): 0}, r"fixed edge \(1,1\)->0: weight W_2\[0,1\] is zero"),
    ({(1, 5): 0}, r"fixed edge \(1,5\)->0: no such hidden neuron or edge"),
    ({(2, 0): 0}, r"no such hidden neuron or edge"),     # layer 2 is the output layer
    ({(0, 0): 0}, r"no such hidden neuron or edge"),     # layer 0 is the input layer
    ({(1, 0): 3}, r"fixed edge \(1,0\)->3: no such hidden neuron or edge"),
    ({(1, 0): -1}, r"no such hidden neuron or edge"),
])
def test_bad_choices(choice, match):
    with pytest.raises(UnsupportedCaseError, match=match):
        fixed_edges(NET, choice)


def test_bad_choice_through_check():
    tc = random_case((1, 2, 1), 0, 3)
    with pytest.raises(UnsupportedCaseError, match="no such hidden neuron"):
        check(parse_case(tc.obj()), fixed_choice={(1, 9): 0})


def test_dead_neuron_gets_edge_zero():
    net = net_of([1, 1, 2], [[[1]], [[0], [0]]], [[1], [0, 0]])
    assert dict(fixed_edges(net).s_max) == {(1, 0): 0}


def test_affine_case_has_no_fixed_edge():
    net = net_of([2, 2], [[[1, 2], [3, 4]]], [[0, 0]])
    assert dict(fixed_edges(net).s_max) == {}
    assert [p.name for p in free_parameters(net, fixed_edges(net))] == \
        ["W_1[0,0]", "W_1[0,1]", "W_1[1,0]", "W_1[1,1]", "b_1[0]", "b_1[1]"]
