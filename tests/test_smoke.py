"""Smoke test of SPEC §2's hand example off the boundary (derivation in the docstring).

f(x) = 3 relu(2x + 1) + b_2 with W_2 fixed (the only outgoing edge), so
tau = (w_1, b_1, b_2) and the Gamma row of an active sample x is (3x, 3, 1).
Samples 0, 1, 2 are all active: rows (0,3,1), (3,3,1), (6,3,1) have rank 2,
and alpha rows (x, 1, 1) also rank 2, so R_Gamma = R_A = 2 < 3: C_N fails.
Samples 0, 1, -1: x = -1 is inactive (z = -1), row (0, 0, 1); rank 3 = dim.
"""

from exactident.check import check
from exactident.io.case import parse_case


def _case(sample):
    return parse_case({"format": "exactident-case/1", "name": "t", "widths": [1, 1, 1],
                       "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]],
                       "sample": [[s] for s in sample]})


def test_all_active_is_not_identifiable():
    r = check(_case(["0", "1", "2"]))
    assert (r.rank_gamma, r.rank_a, r.dim, r.verdict) == (2, 2, 3, "not-identifiable")


def test_one_inactive_sample_makes_it_identifiable():
    r = check(_case(["0", "1", "-1"]), verify_propositions=True, all_ranks=True)
    assert (r.rank_gamma, r.rank_a, r.verdict) == (3, 3, "identifiable")
