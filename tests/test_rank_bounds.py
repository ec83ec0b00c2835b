"""Upper bounds and kernels of issue "exact faster than float" against exact elimination.

Every bound is checked against an independent exact computation on small random
networks (FLINT's rational rank of ``gamma_exact`` / ``alpha_exact``, and the Gram
matrix ``alpha_gram``): kernel vectors must be exact kernel vectors, independent,
and the bound they give must be >= the exact rank; the certified ranks must equal
the exact ones, including cases where the cheap bounds are loose and a CRT kernel,
exact nullspace or exact elimination has to take over.  Small integer weights and
inputs make rarely active neurons, repeated samples and dependent inputs common.
"""

from __future__ import annotations

import random
import resource
import subprocess
import sys

import flint
import pytest

from exactident.io.case import Case
from exactident.linalg import exact
from exactident.model.activation import activation_state, alpha_exact, alpha_gram, alpha_row_subset, n_paths
from exactident.model.fixed_edges import fixed_edges
from exactident.model.gamma import gamma_exact
from exactident.model.gamma_modular import Scaled, alpha_mod_p
from exactident.model.integer_forward import float_forward_bounded, integer_forward
from exactident.model.network import Network, degenerate_neurons
from exactident.ranks.bounds import alpha_column_kernel
from exactident.ranks.certify import certify_ranks
from exactident.ranks.kernels import semi_local_kernel
from exactident.verify.rank import verify_rank_certificate

SHAPES = [(1, 2, 1), (2, 3, 1), (2, 3, 2), (3, 4, 1), (2, 3, 3, 1), (2, 2, 3, 2), (3, 2, 2, 2, 1)]


def random_network_case(seed: int):
    rng = random.Random(seed)
    widths = SHAPES[seed % len(SHAPES)]
    for _ in range(1000):
        W = [flint.fmpq_mat(widths[l + 1], widths[l], [rng.choice([-2, -1, 1, 1, 2, 3]) for _ in
                                                       range(widths[l] * widths[l + 1])])
             for l in range(len(widths) - 1)]
        b = [[flint.fmpq(rng.randint(-6, 6), rng.choice([1, 2])) for _ in range(widths[l + 1])]
             for l in range(len(widths) - 1)]
        net = Network(widths, W, b)
        n = rng.randint(1, 3 * widths[0] + 6)
        X = [[flint.fmpq(rng.randint(-3, 3)) for _ in range(widths[0])] for _ in range(n)]
        if rng.random() < 0.3:
            X += X[: rng.randint(1, n)]  # repeated samples
        if degenerate_neurons(net):
            continue
        st = activation_state(net, X)
        if st.ties:
            continue
        return net, X, st
    raise RuntimeError("no case")


@pytest.mark.parametrize("seed", range(60))
def test_kernels_bounds_and_certified_ranks_match_exact_elimination(seed):
    net, X, st = random_network_case(seed)
    fixed = fixed_edges(net)
    G = gamma_exact(net, X, integer_forward(net, X).Z(), st.pattern, fixed)
    rank_gamma = exact.rank(G)
    A = alpha_exact(st.pattern, X)
    rank_alpha = exact.rank(A)
    P = n_paths(net.widths)
    # semi-local kernel: exact kernel vectors of Gamma, independent over Q
    K = semi_local_kernel(net, X, st.pattern, fixed)
    if K:
        Kmat = flint.fmpq_mat(net.dim, len(K), [col.get(i, 0) for i in range(net.dim) for col in K])
        assert G * Kmat == flint.fmpq_mat(G.nrows(), len(K))
        assert exact.rank(Kmat) == len(K)
    assert net.dim - len(K) >= rank_gamma
    # column-block kernel of alpha
    Ka = alpha_column_kernel(st.pattern, X, net.widths)
    if Ka:
        Kmat = flint.fmpq_mat(P, len(Ka), [col.get(i, 0) for i in range(P) for col in Ka])
        assert A * Kmat == flint.fmpq_mat(A.nrows(), len(Ka))
        assert exact.rank(Kmat) == len(Ka)
    assert P - len(Ka) >= rank_alpha
    # grouped rows: same rank as alpha and as its Gram matrix
    assert exact.rank(alpha_gram(st.pattern, X)) == rank_alpha
    p = 1048583
    Xs = Scaled([v for row in X for v in row], (len(X), net.widths[0]))
    rows = alpha_row_subset(st.pattern, Xs.mod(p), p)
    sub = [a[rows] for a in st.pattern]
    assert exact.rank(alpha_exact(sub, [X[i] for i in rows])) == rank_alpha
    from exactident.linalg.blas_modp import rank_blas

    assert rank_blas(alpha_mod_p(sub, Xs.mod(p)[rows], p), p) == rank_alpha
    # certified ranks, all of them, and their certificate re-verifies from the case
    res = certify_ranks(net, X, st.pattern, fixed, need_rank_a=True, rng=random.Random(seed))
    assert res.rank_gamma == rank_gamma
    assert res.rank_a == net.widths[-1] * rank_alpha
    case = Case("t", net, X)
    assert verify_rank_certificate(case, res.certificate) == []
    # the shortcut: R_Gamma certified below a lower bound of R_A
    res2 = certify_ranks(net, X, st.pattern, fixed, rng=random.Random(seed), allow_rank_a_lower=True)
    assert res2.rank_gamma == rank_gamma
    if res2.rank_a is None and rank_gamma < net.dim:
        assert res2.rank_a_lower is not None and rank_gamma < res2.rank_a_lower <= net.widths[-1] * rank_alpha


def test_semi_local_kernel_catches_rescaling_through_a_rare_neuron():
    # Both layer-1 neurons have their fixed edge into layer-2 neuron w = (2, 0), active at x = 4
    # only; no neuron-local block has a kernel (each has more active rows than columns), but the
    # block {w's incoming weights and bias, rho_u for both u} lives on the single row of x = 4
    # (5 columns, rank <= 1): the semi-local construction finds kernel vectors the neuron-local
    # one misses, and they are exact (checked against gamma_exact).
    net = Network((1, 2, 2, 1),
                  [flint.fmpq_mat([[1], [-1]]), flint.fmpq_mat([[3, 1], [1, 1]]), flint.fmpq_mat([[1, 1]])],
                  [[flint.fmpq(0), flint.fmpq(0)], [flint.fmpq(-11), flint.fmpq(1)], [flint.fmpq(0)]])
    X = [[flint.fmpq(k)] for k in (-3, -2, -1, 1, 2, 4)]
    st = activation_state(net, X)
    assert not st.ties and st.pattern[1][:, 0].tolist() == [False] * 5 + [True]
    fixed = fixed_edges(net)
    assert {fixed.s_max[(1, 0)], fixed.s_max[(1, 1)]} == {0}
    from exactident.ranks.kernels import neuron_local_kernel

    G = gamma_exact(net, X, st.Z, st.pattern, fixed)
    K = semi_local_kernel(net, X, st.pattern, fixed)
    assert neuron_local_kernel(net, X, st.pattern, fixed) == [] and len(K) >= 2
    Kmat = flint.fmpq_mat(net.dim, len(K), [col.get(i, 0) for i in range(net.dim) for col in K])
    assert G * Kmat == flint.fmpq_mat(G.nrows(), len(K)) and exact.rank(Kmat) == len(K)
    assert net.dim - len(K) >= exact.rank(G)


def test_float_pattern_bound_is_sound_near_kinks():
    # Samples at, and 2**-60 away from, the kink of relu(x - 1/3): the float pass must leave
    # them uncertain (1/3 is not a float) and the exact pass decides; others are certain.
    net = Network((1, 1, 1), [flint.fmpq_mat([[1]]), flint.fmpq_mat([[1]])], [[flint.fmpq(-1, 3)], [flint.fmpq(0)]])
    X = [[flint.fmpq(1, 3)], [flint.fmpq(1, 3) + flint.fmpq(1, 2**60)], [flint.fmpq(1, 3) - flint.fmpq(1, 2**60)],
         [flint.fmpq(5)], [flint.fmpq(-5)]]
    _pattern, uncertain = float_forward_bounded(net, X)
    assert uncertain.tolist() == [True, True, True, False, False]
    st = activation_state(net, X)
    assert st.pattern[0][:, 0].tolist() == [True, True, False, True, False]
    assert [(t.i, t.l, t.v) for t in st.ties] == [(0, 1, 0)]
    # values beyond float range: the exact pass does everything
    big = [[flint.fmpq(10) ** 400], [flint.fmpq(1)]]
    assert float_forward_bounded(net, big) is None
    assert activation_state(net, big).pattern[0][:, 0].tolist() == [True, True]


def test_600k_samples_rank_a_in_linear_memory():
    # 1-1-1 network on 200,000 samples (two points repeated) under a 1.5 GB address-space limit:
    # an n x n Gram matrix would need 320 GB.  Right values by hand: f = 3 relu(2x + 1), both
    # points active, Gamma rows (3x, 3, 1) at x = 1, 2 -> rank 2; alpha rows (x, 1, 1) -> rank 2;
    # R_Gamma = R_A = 2 < dim = 3: not identifiable (Theorem 8).
    code = (
        "import resource; resource.setrlimit(resource.RLIMIT_AS, (1536 * 2**20, 1536 * 2**20))\n"
        "import flint\n"
        "from exactident.io.case import Case\nfrom exactident.model.network import Network\n"
        "from exactident.check import check\n"
        "net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])], [[flint.fmpq(1)], [flint.fmpq(0)]])\n"
        "X = [[flint.fmpq(1 + i % 2)] for i in range(200000)]\n"
        "r = check(Case('big', net, X), numeric=False)\n"
        "print(r.verdict, r.rank_gamma, r.rank_a)\n")
    env = {"OPENBLAS_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["not-identifiable", "2", "2"]
    assert resource.RLIMIT_AS  # the limit exists on this platform


def test_new_certificate_kinds_verify_and_tampering_is_rejected():
    # breast-cancer-like structure in miniature: two hidden neurons with nested active sets
    # (S_0 = all 5 samples, S_1 = {x >= 0}): alpha = [x a_0, x a_1, a_0, a_1, 1] has the kernel
    # vector e(a_0 path) - e(beta) (neuron 0 always active) -> rank alpha <= 4 (column blocks).
    net = Network((1, 2, 1), [flint.fmpq_mat([[1], [1]]), flint.fmpq_mat([[1, 2]])],
                  [[flint.fmpq(10), flint.fmpq(1, 2)], [flint.fmpq(0)]])
    X = [[flint.fmpq(k)] for k in (-2, -1, 0, 1, 2)]
    st = activation_state(net, X)
    fixed = fixed_edges(net)
    res = certify_ranks(net, X, st.pattern, fixed, need_rank_a=True, rng=random.Random(1))
    A = alpha_exact(st.pattern, X)
    assert res.rank_a == exact.rank(A) == 4
    ra = res.certificate["rank_a"]
    assert ra["lower"]["matrix"] == "alpha" and ra["shape"] == [5, 5]
    case = Case("t", net, X)
    assert verify_rank_certificate(case, res.certificate) == []
    import copy

    for mutate in (lambda c: c["rank_a"].__setitem__("rank", 5),
                   lambda c: c["rank_a"]["lower"].__setitem__("rank_mod_p", 3),
                   lambda c: c["rank_a"]["lower"].__setitem__("rows", [0, 0]),
                   lambda c: c["rank_a"]["lower"].__setitem__("matrix", "beta"),
                   lambda c: c["rank_a"].__setitem__("shape", [5, 4]),
                   lambda c: c["rank_a"]["upper"].__setitem__("kind", "made-up"),
                   lambda c: c["rank_a"].__setitem__("rank_a", 5)):
        bad = copy.deepcopy(res.certificate)
        mutate(bad)
        assert verify_rank_certificate(case, bad), bad


def test_kernel_check_is_capped_and_huge_entries_fall_back_to_the_rational_path():
    # issue: thousands of check primes for entries of thousands of digits.  A candidate whose
    # zero check would need more than MAX_CHECK_PRIMES primes is dropped before any prime is used.
    from exactident.linalg.certified import MAX_CHECK_PRIMES, _check_kernel

    def no_image(q):
        raise AssertionError("no prime should be tried")

    K = [{0: flint.fmpq(1)}]
    assert _check_kernel(K, no_image, 1, 1, 2 ** (30 * MAX_CHECK_PRIMES + 64), random.Random(0), []) is None
    # End to end: 3-layer networks with ~1500-digit rationals (entries of Gamma of thousands of digits, far
    # above the cap's 30 MAX_CHECK_PRIMES + 64 bits) give the ranks of the rational path.  (4000 digits took
    # the rational path 35 s for the same three checks.)
    rng = random.Random(5)
    from exactident.check import check

    def big():
        return flint.fmpq(rng.randint(-10**1500, 10**1500), rng.randint(1, 10**1500))

    for _ in range(3):
        widths = (2, 3, 3, 1)
        W = [flint.fmpq_mat(widths[l + 1], widths[l], [big() for _ in range(widths[l] * widths[l + 1])])
             for l in range(3)]
        b = [[big() for _ in range(widths[l + 1])] for l in range(3)]
        X = [[flint.fmpq(rng.randint(-3, 3)), flint.fmpq(rng.randint(-3, 3))] for _ in range(25)]
        case = Case("huge", Network(widths, W, b), X)
        fast, ref = check(case, numeric=False, all_ranks=True), check(case, numeric=False, modular=False,
                                                                         all_ranks=True)
        assert (fast.verdict, fast.rank_gamma, fast.rank_a) == (ref.verdict, ref.rank_gamma, ref.rank_a)
