"""``rank alpha`` when alpha is wide (``|P|`` above its rows): a sample of columns, else the Gram matrix.

A wide alpha whose column sample falls short of full row rank is eliminated through its Gram matrix
(``m^3`` against ``m |P| rank`` for its rows).  The rank is compared with FLINT's exact rank of
``alpha_exact`` over Q (an independent construction: explicit path products), and the certificates
with the verifier.
"""

from __future__ import annotations

import random

import flint
import pytest

from exactident.io.case import Case
from exactident.linalg import exact
from exactident.model.activation import activation_state, alpha_exact, n_paths
from exactident.model.fixed_edges import fixed_edges
from exactident.model.network import Network
from exactident.ranks.certify import certify_ranks
from exactident.ranks.rank_alpha import MAX_EXPLICIT_ALPHA_MOD_P, certify_rank_alpha
from exactident.verify.rank import verify_rank_certificate

SHAPES = [(2, 5, 5, 1), (3, 4, 4, 2), (2, 6, 4, 1), (1, 4, 4, 4, 1)]


def _case(seed: int) -> Case:
    """A random net whose alpha (10-40 rows, 82-165 paths) is wide and often rank-deficient."""
    rng = random.Random(seed)
    widths = SHAPES[seed % len(SHAPES)]
    W = [flint.fmpq_mat(widths[l + 1], widths[l], [flint.fmpq(rng.randint(-4, 4), rng.choice([1, 2, 3]))
                                                   for _ in range(widths[l] * widths[l + 1])])
         for l in range(len(widths) - 1)]
    b = [[flint.fmpq(rng.randint(-4, 4), rng.choice([1, 2])) for _ in range(widths[l + 1])]
         for l in range(len(widths) - 1)]
    X = [[flint.fmpq(rng.randint(-5, 5), rng.choice([1, 2])) for _ in range(widths[0])]
         for _ in range(rng.randint(10, 40))]
    return Case(f"wide-alpha-{seed}", Network(widths, W, b), X)


CASES = [_case(s) for s in range(48)]


def test_wide_alpha_ranks_equal_the_exact_rank_over_q():
    routes = []
    for case in CASES:
        st = activation_state(case.network, case.X)
        assert len(case.X) * n_paths(case.widths) <= MAX_EXPLICIT_ALPHA_MOD_P  # alpha itself is small enough
        low = certify_rank_alpha(st.pattern, case.X, case.widths, rng=random.Random(1), lower_only=True)
        lower = low.lower if hasattr(low, "lower") else low.certificate["lower"]
        true = exact.rank(alpha_exact(st.pattern, case.X))
        assert lower["rank_mod_p"] <= true  # a rank mod p never exceeds the rank over Q
        assert certify_rank_alpha(st.pattern, case.X, case.widths, rng=random.Random(1)).rank == true
        routes.append(lower["matrix"])
    # both routes are exercised: the column sample (alpha) and, below full row rank, the Gram matrix
    assert routes.count("gram") >= 10 and "alpha" in routes


@pytest.mark.parametrize("case", CASES[:12], ids=lambda c: c.name)
def test_wide_alpha_certificates_verify(case):
    net, X = case.network, case.X
    st = activation_state(net, X)
    res = certify_ranks(net, X, st.pattern, fixed_edges(net), need_rank_a=True, rng=random.Random(4))
    assert res.rank_a == net.widths[-1] * exact.rank(alpha_exact(st.pattern, X))
    assert verify_rank_certificate(case, res.certificate) == []
