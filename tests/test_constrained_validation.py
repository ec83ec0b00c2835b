"""Network's index checks (numpy, no loop over the dense entries) against a plain loop over the entries.

The reference below is the entry-by-entry loop the constructor used before: for every weight ``W_l[i][j]``
(then ``b_l[i]``) row by row, layer by layer, then every slope, the first entry whose index is outside
``-1..k-1`` or whose value differs from the first entry tied to the same parameter is the error; then the
first unused parameter.  Random networks are corrupted in each of these ways; the numpy checks must raise
the same error (field and message), or none when the reference finds none.
"""

from __future__ import annotations

import random

import flint
import numpy as np
import pytest
from constrained_oracle import random_constrained

from exactident.errors import CaseFormatError
from exactident.model.network import Network

F = flint.fmpq


def _reference(widths, W, b, WI, bI, slopes, sI, k):
    """(field, message) of the first failure of the entry-by-entry loop, or None."""
    L = len(widths) - 1

    def entries():
        for l in range(1, L + 1):
            for i in range(widths[l]):
                for j in range(widths[l - 1]):
                    yield f"W_{l}[{i}][{j}]", int(WI[l - 1][i, j]), W[l - 1][i, j]
                yield f"b_{l}[{i}]", int(bI[l - 1][i]), b[l - 1][i]
        for l in range(1, L):
            for v in range(widths[l]):
                yield f"slope_{l}[{v}]", int(sI[l - 1][v]), slopes[l - 1][v]

    values = {}
    for where, idx, val in entries():
        if idx < -1 or idx >= k:
            return where, f"parameter index {idx} outside -1..{k - 1}"
        if idx >= 0 and values.setdefault(idx, val) != val:
            return where, f"tied to theta_{idx} = {values[idx]} but holds {val}"
    if len(values) != k:
        return "n_params", f"theta_{min(set(range(k)) - set(values))} feeds no weight, bias or slope"
    return None


def _parts(cn):
    return [tuple(cn.widths), [flint.fmpq_mat(M) for M in cn.W], [list(v) for v in cn.b],
            [I.copy() for I in cn.W_index], [I.copy() for I in cn.b_index], [list(a) for a in cn.negative_slope],
            [I.copy() for I in cn.slope_index], cn.n_params]


def _corrupt(parts, rng):
    """One random corruption (or none) of the constructor's arguments, in place."""
    widths, W, b, WI, bI, slopes, sI, k = parts
    L = len(widths) - 1
    blocks = [("W", l) for l in range(L)] + [("b", l) for l in range(L)] + [("a", l) for l in range(L - 1)]
    blocks = [(kind, l) for kind, l in blocks
              if {"W": WI, "b": bI, "a": sI}[kind][l].size]
    what = rng.choice(["none", "range", "range", "value", "value", "unused", "extra"])
    if what == "extra":
        parts[7] = k + rng.randint(1, 2)  # parameters that feed nothing
        return
    if what == "none" or not blocks:
        return
    for _ in range(rng.randint(1, 3)):  # several faults: the first in the entries' order must be named
        kind, l = rng.choice(blocks)
        I = {"W": WI, "b": bI, "a": sI}[kind][l]
        flat = np.unravel_index(rng.randrange(I.size), I.shape)
        if what == "range":
            I[flat] = rng.choice([-2, -7, k, k + 3])
        elif what == "value":
            free = [tuple(p) for p in np.argwhere(I >= 0)]
            if not free:
                continue
            pos = rng.choice(free)
            new = F(rng.randint(-9, 9), rng.choice([1, 3]))
            if kind == "W":
                W[l][pos[0], pos[1]] = new
            elif kind == "b":
                b[l][pos[0]] = new
            else:
                slopes[l][pos[0]] = new
        else:  # a parameter's occurrences all made fixed
            j = int(I[flat]) if I[flat] >= 0 else 0
            for J in WI + bI + sI:
                J[np.equal(J, j)] = -1


@pytest.mark.parametrize("seed", range(60))
def test_index_checks_match_the_entry_loop(seed):
    rng = random.Random(seed)
    cn = random_constrained(seed, p_fixed=0.2, p_tie=0.4)
    parts = _parts(cn)
    _corrupt(parts, rng)
    expected = _reference(*parts)
    try:
        Network(*parts)
        found = None
    except CaseFormatError as e:
        found = (e.field, e.message)
    assert found == expected


def test_tie_error_names_the_first_entry_in_order():
    """theta_0 feeds W_1[0][0] = 1, b_1[0] = 2 and W_1[1][0] = 3: the first mismatch in order is b_1[0]."""
    W = [flint.fmpq_mat([[1], [3]]), flint.fmpq_mat([[1, 1]])]
    with pytest.raises(CaseFormatError) as e:
        Network((1, 2, 1), W, [[F(2), F(0)], [F(0)]],
                           [np.array([[0], [0]]), np.array([[1, 2]])], [np.array([0, -1]), np.array([-1])],
                           [[F(0), F(0)]], [np.array([-1, -1])], 3)
    assert (e.value.field, e.value.message) == ("b_1[0]", "tied to theta_0 = 1 but holds 2")


@pytest.mark.parametrize("seed", range(20))
def test_theta_and_with_theta_match_the_entries(seed):
    cn = random_constrained(seed, p_tie=0.4)
    theta = [None] * cn.n_params
    for l in range(1, cn.L + 1):  # the reference: every entry, in order
        for (i, j), idx in np.ndenumerate(cn.W_index[l - 1]):
            if idx >= 0:
                theta[idx] = theta[idx] or cn.W[l - 1][i, j]
        for i, idx in enumerate(cn.b_index[l - 1]):
            if idx >= 0:
                theta[idx] = theta[idx] or cn.b[l - 1][i]
    for l in range(1, cn.L):
        for v, idx in enumerate(cn.slope_index[l - 1]):
            if idx >= 0:
                theta[idx] = theta[idx] or cn.negative_slope[l - 1][v]
    assert cn.theta() == theta
    moved = cn.with_theta([t + 1 for t in theta])
    for l in range(1, cn.L + 1):
        for (i, j), idx in np.ndenumerate(cn.W_index[l - 1]):
            assert moved.W[l - 1][i, j] == (theta[idx] + 1 if idx >= 0 else cn.W[l - 1][i, j])
    assert moved.theta() == [t + 1 for t in theta]
