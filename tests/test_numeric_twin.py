"""``exactident.numeric.numpy_backend``: the float twin against the exact objects (values from the oracle cases)."""

from __future__ import annotations

import numpy as np
import pytest
from _gen import random_case

from exactident.check import check
from exactident.io.case import parse_case
from exactident.model.activation import activation_state, alpha_exact
from exactident.numeric.float_network import to_float_network, to_float_sample
from exactident.numeric.gamma_free import float_pattern
from exactident.numeric.numpy_backend import alpha_float, alpha_float_gram


@pytest.mark.parametrize("widths", [(1, 1, 1), (2, 3, 2), (3, 2), (1, 2, 2, 1), (2, 2, 2, 2)])
def test_float_pattern_alpha_and_verdict(widths):
    tc = random_case(widths, 4, 8, rational=True)
    case = parse_case(tc.obj())
    st = activation_state(case.network, case.X)
    fnet = to_float_network(case.network)
    Xf = to_float_sample(case.X, widths[0])
    pattern = float_pattern(fnet, Xf)
    assert all(np.array_equal(a, b) for a, b in zip(pattern, st.pattern))
    A = np.array([[float(q) for q in row] for row in alpha_exact(st.pattern, case.X).table()])
    assert np.allclose(alpha_float(pattern, Xf), A, rtol=1e-15, atol=0)
    assert np.allclose(alpha_float_gram(pattern, Xf), A @ A.T, rtol=1e-12)
    r = check(case, all_ranks=True)
    # small well-conditioned integer-ish cases: the float pipeline agrees
    assert r.numeric["agrees"] is True and r.numeric["pattern_differs"] is False
    # The float verdict is compared with the rank rules' (Theorems 8/9), not with a structural certificate's.
    by_ranks = ("identifiable" if r.rank_gamma == r.dim else "not-identifiable" if r.rank_gamma == r.rank_a
                else "inconclusive")
    assert (r.numeric["rank_gamma"], r.numeric["rank_a"], r.numeric["verdict"]) == (r.rank_gamma, r.rank_a, by_ranks)
    assert r.numeric["compared_with"]["verdict"] == by_ranks


def test_rounding_is_nearest():
    tc = random_case((1, 1, 1), 0, 1)
    case = parse_case({**tc.obj(), "biases": [["1/3"], ["-2/3"]], "sample": [["1/10"]]})
    fnet = to_float_network(case.network)
    assert fnet.b[0][0] == 1 / 3 and fnet.b[1][0] == -2 / 3
    assert to_float_sample(case.X, 1)[0, 0] == 0.1
    assert to_float_sample([], 3).shape == (0, 3)
