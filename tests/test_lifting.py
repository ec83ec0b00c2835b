"""``exactident.model.lifting``: the path set, psi at tau_theta, and the size guard (values: test_oracle.py)."""

from __future__ import annotations

import flint
import pytest
from _gen import random_case

from exactident.errors import UnsupportedCaseError
from exactident.io.case import parse_case
from exactident.model.activation import activation_state, n_paths
from exactident.model.fixed_edges import fixed_edges
from exactident.model.lifting import MAX_LIFTING_ENTRIES, dpsi, paths, phi, psi, tau_of, verify_propositions
from exactident.model.network import Network


def test_paths_order_and_count():
    # [2,2,1]: from layer 0: (j, v) for j, v in {0,1}^2, v-major within j; from layer 1: (v,); beta
    assert paths((2, 2, 1)) == [(0, (0, 0)), (0, (0, 1)), (0, (1, 0)), (0, (1, 1)), (1, (0,)), (1, (1,)), (2, ())]
    for widths in [(1, 1, 1), (2, 3, 2), (3, 2), (1, 2, 2, 1), (2, 2, 2, 2)]:
        assert len(paths(widths)) == n_paths(widths) == len(set(paths(widths)))


def test_psi_at_tau_theta_is_phi_and_moves_only_free_parameters():
    tc = random_case((1, 2, 2, 1), 2, 3, rational=True)
    net = parse_case(tc.obj()).network
    fixed = fixed_edges(net)
    tau = tau_of(net, fixed)
    assert psi(net, fixed, tau) == phi(net)
    # psi = phi o rho_theta: doubling tau doubles every parameter except the fixed edges
    other = net.copy()
    for l in range(1, net.L + 1):
        for i in range(net.widths[l]):
            other.b[l - 1][i] *= 2
            for j in range(net.widths[l - 1]):
                if fixed.s_max.get((l - 1, j)) != i:
                    other.W[l - 1][i, j] *= 2
    assert psi(net, fixed, [t * 2 for t in tau]) == phi(other) != phi(net)
    assert tau_of(net, fixed) == tau  # psi did not modify net


def _wide():
    widths = (1, 20, 20, 20, 1)
    W = [flint.fmpq_mat(widths[l], widths[l - 1], [1] * (widths[l] * widths[l - 1])) for l in range(1, 5)]
    return Network(widths, W, [[flint.fmpq(1)] * widths[l] for l in range(1, 5)])


def test_size_guard():
    net = _wide()
    assert n_paths(net.widths) * net.dim > MAX_LIFTING_ENTRIES
    for call in (lambda: phi(net), lambda: dpsi(net, fixed_edges(net)),
                 lambda: verify_propositions(net, [[flint.fmpq(1)]], activation_state(net, [[flint.fmpq(1)]]),
                                             fixed_edges(net))):
        with pytest.raises(UnsupportedCaseError, match=r"\|P\| = 16421 paths: Dpsi would have 13810061 entries"):
            call()
