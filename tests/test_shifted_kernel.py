"""The shifted-input kernel of ``Gamma`` (ranks/shifted.py) and its certificate (source ``shifted``).

Truth: the Jacobian of a one-hidden-layer ReLU network written out in this file with Python
``Fraction`` (``d f_k / d W_1[v, j] = W_2[k, v] a_v x_j``, ``d f_k / d b_1[v] = W_2[k, v] a_v``,
``d f_k / d W_2[k', v] = [k = k'] relu(z_v)``, ``d f_k / d b_2[k'] = [k = k']``; the fixed edges
dropped), its rank by Fraction elimination; every kernel vector is checked against it by exact
products and counted by that same elimination.
"""

from __future__ import annotations

import copy
import json
import math
import random
from fractions import Fraction

import flint
import pytest

from exactident.check import check
from exactident.io.case import Case
from exactident.io.report import reports_to_json
from exactident.model.activation import activation_state
from exactident.model.fixed_edges import fixed_edges, free_parameters
from exactident.model.network import Network
from exactident.ranks.kernels import semi_local_kernel
from exactident.ranks.shifted import shifted_families, structural_kernel
from exactident.verify.certificate import verify_certificate
from exactident.verify.rank import verify_rank_certificate


def _fr(v) -> Fraction:
    return Fraction(int(v.p), int(v.q))


def _rank(rows: list[list[Fraction]]) -> int:
    rows = [list(r) for r in rows]
    rank, col, ncols = 0, 0, len(rows[0]) if rows else 0
    while rank < len(rows) and col < ncols:
        piv = next((i for i in range(rank, len(rows)) if rows[i][col] != 0), None)
        if piv is None:
            col += 1
            continue
        rows[rank], rows[piv] = rows[piv], rows[rank]
        for i in range(rank + 1, len(rows)):
            if rows[i][col] != 0:
                f = rows[i][col] / rows[rank][col]
                rows[i] = [a - f * b for a, b in zip(rows[i], rows[rank])]
        rank, col = rank + 1, col + 1
    return rank


def _oracle_gamma(net: Network, X) -> list[list[Fraction]]:
    """The free-parameter Jacobian of a one-hidden-layer net on ``X``, by hand (module docstring)."""
    N0, N1, N2 = net.widths
    W1 = [[_fr(net.W[0][v, j]) for j in range(N0)] for v in range(N1)]
    W2 = [[_fr(net.W[1][k, v]) for v in range(N1)] for k in range(N2)]
    b1 = [_fr(v) for v in net.b[0]]
    params = free_parameters(net, fixed_edges(net))
    rows = []
    for x in X:
        x = [_fr(v) for v in x]
        z = [sum(W1[v][j] * x[j] for j in range(N0)) + b1[v] for v in range(N1)]
        a = [1 if zv > 0 else 0 for zv in z]
        for k in range(N2):
            row = []
            for prm in params:
                if prm.l == 1:
                    d = W2[k][prm.i] * a[prm.i]
                    row.append(d * (x[prm.j] if prm.j is not None else 1))
                elif prm.j is None:
                    row.append(Fraction(int(prm.i == k)))
                else:
                    row.append(Fraction(int(prm.i == k)) * max(z[prm.j], 0))
            rows.append(row)
    return rows


def _rare_net(seed: int, N0: int = 3, N1: int = 6, N2: int = 2, n: int = 14, rare: int = 1):
    """Input 0 equals ``-1/3`` on every sample but ``rare`` of them (a standardised blank pixel);
    biases positive enough that most neurons are active on those samples."""
    rng = random.Random(seed)
    W1 = flint.fmpq_mat([[flint.fmpq(rng.randint(-6, 6), 4) for _ in range(N0)] for _ in range(N1)])
    W2 = flint.fmpq_mat([[flint.fmpq(rng.choice([-5, -3, -2, -1, 1, 2, 3, 5]), 3) for _ in range(N1)]
                         for _ in range(N2)])
    b = [[flint.fmpq(rng.randint(2, 9), 2) for _ in range(N1)], [flint.fmpq(rng.randint(-3, 3), 5) for _ in range(N2)]]
    X = []
    for i in range(n):
        row = [flint.fmpq(rng.randint(-9, 9), 7) + flint.fmpq(1, 101) for _ in range(N0)]
        row[0] = flint.fmpq(5 + i, 2) if i < rare else flint.fmpq(-1, 3)
        X.append(row)
    return Network((N0, N1, N2), [W1, W2], b), X


def _in_kernel(G: list[list[Fraction]], vec: dict) -> bool:
    return all(sum(row[c] * _fr(v) for c, v in vec.items()) == 0 for row in G)


def test_shifted_blocks_fire_and_are_exact_kernel_vectors():
    fired = 0
    for seed in range(12):
        net, X = _rare_net(seed)
        st = activation_state(net, X)
        if st.ties:
            continue
        fixed = fixed_edges(net)
        G = _oracle_gamma(net, X)
        true_rank = _rank(G)
        semi = semi_local_kernel(net, X, st.pattern, fixed)
        K = structural_kernel(net, X, st.pattern, fixed)
        assert K[:len(semi)] == semi  # the semi-local vectors first, unchanged
        assert all(_in_kernel(G, v) for v in K)
        vecs = [[_fr(v.get(c, flint.fmpq(0))) for c in range(net.dim)] for v in K]
        assert _rank(vecs) == len(K)  # independent over Q (the oracle's own elimination)
        assert net.dim - len(K) >= true_rank
        # the family's columns vanish outside T exactly (oracle rows of the other samples)
        for T, cols in shifted_families(net, X, st.pattern, fixed):
            for i in set(range(len(X))) - set(T):
                for k in range(net.widths[-1]):
                    assert all(sum(G[i * net.widths[-1] + k][c] * _fr(v) for c, v in col.items()) == 0 for col in cols)
        fired += len(K) > len(semi)
    assert fired >= 6


def _report(case, **kw):
    r = check(case, numeric=False, structural=False, **kw)
    return r, json.loads(reports_to_json([r], as_list=False))


@pytest.mark.parametrize("seed", range(6))
def test_interval_contains_the_true_rank_and_verifies(seed):
    """Random small nets with a rare input, verdict-first (interval) and default (exact when cheap)."""
    net, X = _rare_net(seed, N0=3, N1=7, N2=2, n=12, rare=1 + seed % 2)
    st = activation_state(net, X)
    if st.ties:
        pytest.skip("a tie")
    true_rank = _rank(_oracle_gamma(net, X))
    case = Case(name=f"rare-{seed}", network=net, X=X)
    for kw in ({"verdict_first": True}, {}, {"exact_ranks": True}):
        r, rep = _report(case, **kw)
        if r.rank_gamma_interval is not None:
            lo, hi = r.rank_gamma_interval
            assert lo <= true_rank <= hi, (kw, r.rank_gamma_interval, true_rank)
        else:
            assert r.rank_gamma == true_rank, (kw, r.rank_gamma, true_rank)
        ok, msgs = verify_certificate(case, rep, "x", require_claims=True)
        assert ok, msgs


def _shifted_certificate():
    """A case where the shifted blocks add vectors, its report, and the report's rank certificate with its
    ``rank_gamma`` part ending at the ``shifted`` kernel (interval form, or exact when it closes)."""
    for seed in range(40):
        net, X = _rare_net(seed)
        st = activation_state(net, X)
        if st.ties:
            continue
        fixed = fixed_edges(net)
        K = structural_kernel(net, X, st.pattern, fixed)
        if len(K) == len(semi_local_kernel(net, X, st.pattern, fixed)):
            continue
        case = Case(name=f"rare-{seed}", network=net, X=X)
        _r, rep = _report(case)
        cert = copy.deepcopy(rep["certificate"]["rank"])
        low = cert["rank_gamma"]["lower"]
        up = {"kind": "kernel", "bound": net.dim - len(K), "source": "shifted", "nullity": len(K)}
        cert["rank_gamma"] = {"shape": cert["rank_gamma"]["shape"], "lower": low, "upper": up}
        if up["bound"] == low["rank_mod_p"]:
            cert["rank_gamma"]["rank"] = up["bound"]
        return case, rep, cert, _oracle_gamma(net, X)
    pytest.fail("no case where the shifted blocks add a vector")


def test_verifier_rejects_forged_shifted_and_explicit_kernels():
    case, rep, rank_cert, G = _shifted_certificate()
    assert verify_rank_certificate(case, rank_cert) == []
    up = rank_cert["rank_gamma"]["upper"]
    # one more vector claimed than the construction gives
    forged = copy.deepcopy(rank_cert)
    forged["rank_gamma"]["upper"].update(nullity=up["nullity"] + 1, bound=up["bound"] - 1)
    forged["rank_gamma"].pop("rank", None)
    forged["rank_gamma"]["lower"]["rank_mod_p"] = min(forged["rank_gamma"]["lower"]["rank_mod_p"], up["bound"] - 2)
    assert any("nullity" in m for m in verify_rank_certificate(case, forged))
    # explicit vectors: the true ones pass, a vector outside the kernel or a repeated one does not
    net, X = case.network, case.X
    st = activation_state(net, X)
    K = structural_kernel(net, X, st.pattern, fixed_edges(net))
    cols = [[[i, str(_fr(v))] for i, v in sorted(col.items())] for col in K]
    explicit = copy.deepcopy(rank_cert)
    explicit["rank_gamma"]["upper"] = {"kind": "kernel", "bound": up["bound"], "source": "dixon", "kernel": cols}
    assert verify_rank_certificate(case, explicit) == []
    not_kernel = next(c for c in range(net.dim) if not _in_kernel(G, {c: flint.fmpq(1)}))
    bad = copy.deepcopy(explicit)
    bad["rank_gamma"]["upper"]["kernel"][-1] = [[not_kernel, "1"]]
    assert any("M K is not 0" in m or "not of full column rank" in m for m in verify_rank_certificate(case, bad))
    dup = copy.deepcopy(explicit)
    dup["rank_gamma"]["upper"]["kernel"][-1] = cols[0]
    assert any("full column rank" in m for m in verify_rank_certificate(case, dup))
    # the forged report as a whole is INVALID
    whole = copy.deepcopy(rep)
    whole["certificate"]["rank"] = forged
    ok, _msgs = verify_certificate(case, whole, "x", require_claims=True)
    assert not ok


def test_verifier_columns_of_gamma_mod_p_match_the_whole_image():
    """The verifier's column-restricted ``Gamma mod q`` against the oracle Jacobian reduced mod q."""
    import numpy as np

    from exactident.model.integer_forward import data_denominator
    from exactident.verify.row_support import gamma_columns_mod_p

    net, X = _rare_net(3)
    st = activation_state(net, X)
    q = 1_000_003
    G = _oracle_gamma(net, X)
    cols = np.array([0, 5, net.dim - 1, 7, 2])
    got = gamma_columns_mod_p(net, X, st.pattern, fixed_edges(net), q, cols, data_denominator(net, X), [])
    want = [[(row[c].numerator * pow(row[c].denominator, -1, q)) % q for c in cols] for row in G]
    assert got.tolist() == want


@pytest.mark.parametrize("seed", range(4))
def test_deeper_nets_kernel_vectors_against_the_exact_gamma(seed):
    """Two hidden layers (shifted blocks on layer 1 and on rarely active neurons of layer 2): every vector
    is in the kernel of the exact Gamma (FLINT over Q, products checked entry by entry) and they are
    independent (Fraction elimination of this file)."""
    from exactident.model.gamma import gamma_exact

    rng = random.Random(100 + seed)
    widths = (3, 5, 5, 2)
    W = [flint.fmpq_mat([[flint.fmpq(rng.randint(-6, 6), 4) for _ in range(widths[l])] for _ in range(widths[l + 1])])
         for l in range(3)]
    b = [[flint.fmpq(rng.randint(1, 8), 2) for _ in range(widths[1])],
         [flint.fmpq(rng.randint(-6, 2), 2) for _ in range(widths[2])],
         [flint.fmpq(rng.randint(-3, 3), 5) for _ in range(widths[3])]]
    X = []
    for i in range(16):
        row = [flint.fmpq(rng.randint(-9, 9), 7) + flint.fmpq(1, 101) for _ in range(widths[0])]
        row[0] = flint.fmpq(3 + i, 2) if i < 2 else flint.fmpq(-1, 3)
        X.append(row)
    net = Network(widths, W, b)
    st = activation_state(net, X)
    if st.ties:
        pytest.skip("a tie")
    fixed = fixed_edges(net)
    G = gamma_exact(net, X, st.Z, st.pattern, fixed)
    rows = [[_fr(G[i, c]) for c in range(G.ncols())] for i in range(G.nrows())]
    K = structural_kernel(net, X, st.pattern, fixed)
    assert all(_in_kernel(rows, v) for v in K)
    assert _rank([[_fr(v.get(c, flint.fmpq(0))) for c in range(net.dim)] for v in K]) == len(K)
    assert net.dim - len(K) >= _rank(rows)


def test_verifier_product_by_samples_matches_the_oracle():
    """``Gamma K_c mod q`` through per-sample sums (the verifier's check) against the oracle's own product."""
    from exactident.model.integer_forward import data_denominator
    from exactident.verify.row_support import gamma_product_is_zero

    net, X = _rare_net(5)
    st = activation_state(net, X)
    fixed = fixed_edges(net)
    G = _oracle_gamma(net, X)
    q = 1_000_003
    rng = random.Random(1)
    K = structural_kernel(net, X, st.pattern, fixed)
    cols = [{i: int(v.p) * (lcm // int(v.q)) for i, v in col.items()}
            for col in K for lcm in [math.lcm(*(int(v.q) for v in col.values()))]]
    avoid = data_denominator(net, X)
    for col in cols:
        assert gamma_product_is_zero(net, X, st.pattern, fixed, q, [col], avoid, [])
    for _ in range(20):
        col = {rng.randrange(net.dim): rng.randint(-5, 5) for _ in range(4)}
        oracle_zero = all(sum(row[c] * v for c, v in col.items()) == 0 for row in G)  # over Q (mod q: same here)
        assert gamma_product_is_zero(net, X, st.pattern, fixed, q, [col], avoid, []) == oracle_zero


# --- the verifier's row support (verify/rank_kernel.py::GammaRowSupport) and forgeries aimed at it ---


def _oracle_rows(G, N_L: int, vec: dict) -> set[int]:
    """Samples ``i`` with a nonzero row ``(i, k)`` of ``G K`` (exact Fraction products)."""
    return {r // N_L for r, row in enumerate(G) if sum(row[c] * _fr(v) for c, v in vec.items()) != 0}


def _int_col(vec: dict) -> dict[int, int]:
    d = math.lcm(*(int(v.q) for v in vec.values()))
    return {c: int(v.p) * (d // int(v.q)) for c, v in vec.items()}


def _support(net, X, col):
    from exactident.model.integer_forward import data_denominator
    from exactident.verify.row_support import GammaRowSupport

    st = activation_state(net, X)
    g = GammaRowSupport(net, X, st.pattern, fixed_edges(net), data_denominator(net, X))
    return g, set(int(i) for i in g.support(col).nonzero()[0])


@pytest.mark.parametrize("seed", range(6))
def test_row_support_holds_every_nonzero_row_of_the_oracle(seed):
    """Soundness of the row support: each sample with a nonzero row of the oracle's ``Gamma K`` is in it,
    for random sparse columns, random combinations of shifted columns ``e_W[v, 0] + (1/3) e_b[v]`` (input 0
    is ``-1/3`` except on the rare samples: support within them, by Prop. 10) and the structural kernel
    vectors (oracle product zero); the verifier's product mod q agrees with the oracle's zero test."""
    net, X = _rare_net(seed, rare=2)
    st = activation_state(net, X)
    if st.ties:
        pytest.skip("a tie")
    G, N_L = _oracle_gamma(net, X), net.widths[-1]
    params = free_parameters(net, fixed_edges(net))
    index = {(p.l, p.i, p.j): c for c, p in enumerate(params)}
    rare = {0, 1}  # _rare_net: x[0] != -1/3 exactly on samples 0 .. rare-1
    rng = random.Random(seed)
    cands = [({rng.randrange(net.dim): flint.fmpq(rng.randint(-5, 5) or 1) for _ in range(3)}, False)
             for _ in range(15)]
    for _ in range(10):
        vec: dict = {}
        for v in rng.sample(range(net.widths[1]), 3):
            if (1, v, 0) in index:
                t = flint.fmpq(rng.randint(1, 4))
                vec[index[(1, v, 0)]] = t
                vec[index[(1, v, None)]] = t / 3
        cands.append((vec, True))
    cands += [(vec, False) for vec in structural_kernel(net, X, st.pattern, fixed_edges(net))]
    q = 1_000_003
    for vec, shifted in cands:
        vec = {c: v for c, v in vec.items() if v != 0}
        if not vec:
            continue
        col = _int_col(vec)
        g, support = _support(net, X, col)
        nonzero = _oracle_rows(G, N_L, vec)
        assert nonzero <= support
        if shifted:
            assert support <= rare  # a combination of shifted columns: only the rare samples
        # Gamma K mod q from the oracle's exact rows (Fraction -> residue), against the verifier's product
        residues = [sum(row[c] * _fr(v) for c, v in vec.items()) for row in G]
        zero_mod_q = all(r.numerator * pow(r.denominator, -1, q) % q == 0 for r in residues)
        assert g(q, [col]) == zero_mod_q


def _explicit_certificate(rank_cert, vectors):
    """``rank_cert`` with its ``rank_gamma`` upper part replaced by explicit kernel columns (source dixon)."""
    cert = copy.deepcopy(rank_cert)
    cols = [[[i, str(_fr(v))] for i, v in sorted(col.items())] for col in vectors]
    cert["rank_gamma"]["upper"] = {"kind": "kernel", "bound": cert["rank_gamma"]["upper"]["bound"],
                                   "source": "dixon", "kernel": cols}
    return cert


def _nullspace(rows: list[list[Fraction]]) -> list[list[Fraction]]:
    """A basis of ``{y : rows y = 0}`` by Fraction elimination (reduced echelon form)."""
    ncols = len(rows[0])
    R = [list(r) for r in rows]
    pivots: list[int] = []
    r = 0
    for c in range(ncols):
        piv = next((i for i in range(r, len(R)) if R[i][c] != 0), None)
        if piv is None:
            continue
        R[r], R[piv] = R[piv], R[r]
        R[r] = [a / R[r][c] for a in R[r]]
        for i in range(len(R)):
            if i != r and R[i][c] != 0:
                R[i] = [a - R[i][c] * b for a, b in zip(R[i], R[r])]
        pivots.append(c)
        r += 1
    basis = []
    for free in (c for c in range(ncols) if c not in pivots):
        y = [Fraction(0)] * ncols
        y[free] = Fraction(1)
        for i, pc in enumerate(pivots):
            y[pc] = -R[i][free]
        basis.append(y)
    return basis


def _forge(K, forged, net, G):
    """``K`` with its last vector replaced by ``forged``, after checking with the oracle that the set is
    still independent (so the refusal must come from ``Gamma K != 0``)."""
    vectors = K[:-1] + [{c: v for c, v in forged.items() if v != 0}]
    assert _rank([[_fr(v.get(c, flint.fmpq(0))) for c in range(net.dim)] for v in vectors]) == len(vectors)
    return vectors


def test_verifier_refuses_forged_vectors_aimed_at_the_row_support():
    """Three forgeries of a shifted kernel vector, each given as explicit columns (checked through the row
    support); the oracle shows each is not in ``ker Gamma`` and where it is nonzero, so the verifier must
    answer "M K is not 0":

    - a wrong block kernel vector: a combination of shifted columns (nonzero only on the rare rows, by
      Prop. 10) that is not in the block's kernel;
    - a true block vector plus a column that vanishes on the block rows but not outside them
      (``e_W[v, 1] - x_t[1] e_b[v]`` with ``t`` the rare sample: zero at ``t``, input 1 varies elsewhere);
    - a "block" on a non-constant input: input 1 shifted by ``c = x_1[1]`` as if it were constant except on
      sample 0, the exact kernel of that block's rows (zero on sample 0, nonzero where input 1 differs).
    """
    case, _rep, rank_cert, G = _shifted_certificate()
    net, X = case.network, case.X
    st = activation_state(net, X)
    fixed = fixed_edges(net)
    K = structural_kernel(net, X, st.pattern, fixed)
    N_L, n = net.widths[-1], len(X)
    params = free_parameters(net, fixed)
    index = {(p.l, p.i, p.j): c for c, p in enumerate(params)}
    rare = {0}  # _rare_net(seed) with rare=1: x[0] = -1/3 on every sample but sample 0
    assert [i for i in range(n) if X[i][0] != flint.fmpq(-1, 3)] == [0]
    assert verify_rank_certificate(case, _explicit_certificate(rank_cert, K)) == []
    last = K[-1]
    assert _oracle_rows(G, N_L, last) == set()
    live = [v for v in range(net.widths[1]) if st.pattern[0][0, v] and (1, v, 0) in index and (1, v, 1) in index]
    # (a) a wrong block kernel vector
    wrong = None
    for v in live:
        cand = dict(last)
        for c, d in ((index[(1, v, 0)], flint.fmpq(1)), (index[(1, v, None)], flint.fmpq(1, 3))):
            cand[c] = cand.get(c, flint.fmpq(0)) + d
        rows = _oracle_rows(G, N_L, cand)
        if rows:
            assert rows <= rare  # only the block's rows: a block forgery, not an outside one
            wrong = cand
            break
    assert wrong is not None
    # (b) a column nonzero outside the block rows (zero on them)
    outside = None
    for v in live:
        cand = dict(last)
        x01 = X[0][1]
        for c, d in ((index[(1, v, 1)], flint.fmpq(1)), (index[(1, v, None)], -x01)):
            cand[c] = cand.get(c, flint.fmpq(0)) + d
        rows = _oracle_rows(G, N_L, cand)
        if rows:
            assert not rows & rare and rows  # zero on the block's rows, nonzero outside
            outside = cand
            break
    assert outside is not None
    # (c) a claimed block on the non-constant input 1 (c = x_1[1], "rare" sample 0)
    c1 = X[1][1]
    assert len({X[i][1] for i in range(n)}) > 2  # input 1 is not constant off sample 0
    cols = [{index[(1, v, 1)]: flint.fmpq(1), index[(1, v, None)]: -c1} for v in live]
    block = [[sum(G[r][c] * _fr(w) for c, w in col.items()) for col in cols] for r in range(N_L)]  # sample 0
    fake = None
    for y in _nullspace(block):
        cand: dict = {}
        for coef, col in zip(y, cols):
            for c, w in col.items():
                cand[c] = cand.get(c, flint.fmpq(0)) + flint.fmpq(coef.numerator, coef.denominator) * w
        cand = {c: v for c, v in cand.items() if v != 0}
        rows = _oracle_rows(G, N_L, cand)
        if cand and rows:
            assert 0 not in rows  # the block's own rows are zero: only the rows outside betray it
            fake = cand
            break
    assert fake is not None
    for forged in (wrong, outside, fake):
        msgs = verify_rank_certificate(case, _explicit_certificate(rank_cert, _forge(K, forged, net, G)))
        assert any("M K is not 0" in m for m in msgs), msgs
        _g, support = _support(net, X, _int_col(forged))
        assert _oracle_rows(G, N_L, forged) <= support  # the rows that betray it are checked


def test_tall_lower_bound_refuses_a_wrong_rank_mod_p():
    """A tall ``Gamma`` (rows > 2 dim + 64, rank near ``dim``: the verifier's row sample and row sketch, not
    its column sketch): the claimed rank mod p is compared with the rank mod p of the oracle's exact rows
    (reduced mod p in the test, FLINT's ``nmod_mat`` rank); one above it must be refused."""
    from exactident.linalg.modular import rank_mod_p

    rng = random.Random(7)
    W1 = flint.fmpq_mat([[flint.fmpq(rng.randint(-6, 6) or 1, 4) for _ in range(2)] for _ in range(3)])
    W2 = flint.fmpq_mat([[flint.fmpq(rng.choice([-3, -1, 1, 2]), 3) for _ in range(3)]])
    b = [[flint.fmpq(rng.randint(-4, 4), 3) for _ in range(3)], [flint.fmpq(1, 5)]]
    net = Network((2, 3, 1), [W1, W2], b)
    X = [[flint.fmpq(rng.randint(-40, 40), 17) for _ in range(2)] for _ in range(100)]
    st = activation_state(net, X)
    if st.ties:
        pytest.skip("a tie")
    case = Case(name="tall", network=net, X=X)
    _r, rep = _report(case)
    cert = copy.deepcopy(rep["certificate"]["rank"])
    G = _oracle_gamma(net, X)
    assert len(G) > 2 * net.dim + 64
    p = cert["rank_gamma"]["lower"]["prime"]
    import numpy as np

    Gp = np.array([[(v.numerator * pow(v.denominator, -1, p)) % p for v in row] for row in G], dtype=np.int64)
    true_p = rank_mod_p(Gp, p)
    assert cert["rank_gamma"]["lower"]["rank_mod_p"] == true_p
    assert verify_rank_certificate(case, cert) == []
    # above the rank mod p: no lower bound can reach it (the row sample and sketch fall short, then the
    # full elimination gives true_p)
    bad = copy.deepcopy(cert)
    bad["rank_gamma"]["lower"]["rank_mod_p"] = true_p + 1
    msgs = verify_rank_certificate(case, bad)
    assert any("rank_mod_p" in m and f"says {true_p + 1}" in m for m in msgs), msgs
    if "rank" in cert["rank_gamma"]:  # exact form: a lower claim is a weaker bound, and no longer the rank
        bad = copy.deepcopy(cert)
        bad["rank_gamma"]["lower"]["rank_mod_p"] = true_p - 1
        assert verify_rank_certificate(case, bad) != []


@pytest.mark.parametrize("seed", range(4))
def test_exact_column_check_matches_the_oracle(seed):
    """``GammaRowSupport.exactly_zero`` (integers from the exact forward and backward pass, no prime) says
    ``Gamma K_c = 0`` exactly when the hand-written oracle's Fraction product is zero: random sparse columns
    (mostly nonzero products), the structural kernel vectors (zero), and each kernel vector plus a unit vector."""
    from exactident.model.integer_forward import data_denominator
    from exactident.verify.row_support import GammaRowSupport

    net, X = _rare_net(seed, rare=2)
    st = activation_state(net, X)
    G = _oracle_gamma(net, X)
    g = GammaRowSupport(net, X, st.pattern, fixed_edges(net), data_denominator(net, X))
    rng = random.Random(seed)
    cands = [{rng.randrange(net.dim): flint.fmpq(rng.randint(-5, 5) or 1) for _ in range(3)} for _ in range(15)]
    for vec in structural_kernel(net, X, st.pattern, fixed_edges(net)):
        cands.append(vec)
        moved = dict(vec)
        c = rng.randrange(net.dim)
        moved[c] = moved.get(c, flint.fmpq(0)) + 1
        cands.append(moved)
    seen = set()
    for vec in cands:
        vec = {c: v for c, v in vec.items() if v != 0}
        if not vec:
            continue
        zero = _in_kernel(G, vec)
        seen.add(zero)
        assert g.exactly_zero([_int_col(vec)]) == zero
    assert seen == {True, False}


def _random_net_and_gamma(rng: random.Random, widths: tuple[int, ...], n: int):
    """A random rational net of ``widths`` with ``n`` samples, its pattern, fixed edges, the exact ``Gamma`` over Q
    (``gamma_exact``) and its exact nullspace."""
    from exactident.linalg import exact
    from exactident.model.gamma import gamma_exact
    from exactident.model.integer_forward import integer_forward

    def q() -> flint.fmpq:
        return flint.fmpq(rng.randint(-9, 9), rng.randint(1, 5))
    W = [flint.fmpq_mat([[q() for _ in range(widths[l])] for _ in range(widths[l + 1])])
         for l in range(len(widths) - 1)]
    b = [[q() for _ in range(widths[l + 1])] for l in range(len(widths) - 1)]
    net = Network(widths, W, b)
    X = [[q() for _ in range(widths[0])] for _ in range(n)]
    st = activation_state(net, X)
    fixed = fixed_edges(net)
    G = gamma_exact(net, X, integer_forward(net, X).Z(), st.pattern, fixed)
    return net, X, st, fixed, G, exact.nullspace(G)


def test_exact_column_check_on_deeper_nets_against_the_exact_gamma():
    """The same on two- and three-hidden-layer nets (several outputs, fixed edges), against the product with the
    exact ``Gamma`` over Q (``gamma_exact``): its nullspace vectors are zero, each of them moved off is not."""
    from exactident.model.integer_forward import data_denominator
    from exactident.verify.row_support import GammaRowSupport

    rng = random.Random(3)
    for widths in [(3, 4, 3, 2), (3, 5, 4, 4, 1)]:
        net, X, st, fixed, G, K = _random_net_and_gamma(rng, widths, 6)
        g = GammaRowSupport(net, X, st.pattern, fixed, data_denominator(net, X))
        assert K.ncols() > 0
        for j in range(K.ncols()):
            vec = {i: K[i, j] for i in range(K.nrows()) if K[i, j] != 0}
            assert g.exactly_zero([_int_col(vec)])
            moved = dict(vec)
            c = rng.randrange(net.dim)
            moved[c] = moved.get(c, flint.fmpq(0)) + 1
            moved = {i: v for i, v in moved.items() if v != 0}
            column = flint.fmpq_mat([[moved.get(i, flint.fmpq(0))] for i in range(net.dim)])
            zero = all(v == 0 for v in (G * column).entries())
            assert g.exactly_zero([_int_col(moved)]) == zero



@pytest.mark.parametrize("share", [0.0, 1.0])
@pytest.mark.parametrize("block", [1, 7, 1 << 15])
def test_exact_column_check_of_many_columns_at_once(monkeypatch, block, share):
    """Columns checked together (grouped by row support, ``M Gamma`` built in row blocks of every size down to
    one entry's row; the backward pass on every sample or on the supports' samples only) give the conjunction
    of the single checks: the whole nullspace of the exact ``Gamma`` is zero; with one of its vectors moved off
    the kernel anywhere in the list, not zero."""
    from exactident.model.integer_forward import data_denominator
    from exactident.verify import row_support
    from exactident.verify.row_support import GammaRowSupport

    monkeypatch.setattr(row_support, "_EXACT_BLOCK_ENTRIES", block)
    monkeypatch.setattr(row_support, "_WHOLE_PASS_SHARE", share)
    rng = random.Random(5)
    seen = set()
    for widths in [(2, 4, 3, 1), (3, 4, 3, 2)]:
        net, X, st, fixed, G, K = _random_net_and_gamma(rng, widths, 5)
        assert K.ncols() > 1
        cols = [_int_col({i: K[i, j] for i in range(K.nrows()) if K[i, j] != 0}) for j in range(K.ncols())]
        g = GammaRowSupport(net, X, st.pattern, fixed, data_denominator(net, X))
        assert g.exactly_zero(cols)
        for t in range(len(cols)):
            moved = [dict(c) for c in cols]
            c = rng.randrange(net.dim)
            moved[t][c] = moved[t].get(c, 0) + 1
            column = flint.fmpq_mat([[flint.fmpq(moved[t].get(i, 0))] for i in range(net.dim)])
            zero = all(v == 0 for v in (G * column).entries())
            g = GammaRowSupport(net, X, st.pattern, fixed, data_denominator(net, X))
            assert g.exactly_zero(moved) == zero
            seen.add(zero)
    assert False in seen  # a moved vector off the kernel was caught


def _int_bits(vec: dict) -> int:
    """Bits of the largest entry of ``vec`` scaled to integers by its denominators' lcm (Fractions)."""
    fr = [_fr(v) for v in vec.values()]
    den = math.lcm(*(f.denominator for f in fr))
    return max(abs(f.numerator * (den // f.denominator)) for f in fr).bit_length()


def test_primitive_form_of_kernel_vectors():
    """Scaling to coprime integers keeps each vector in the kernel (hand matrix) and undoes determinant factors."""
    from exactident.ranks.kernels import primitive

    M = [[1, 2, 0], [2, 4, 0]]  # kernel spanned by (2, -1, 0) and (0, 0, 1), by hand
    vecs = [{0: flint.fmpq(2**101, 3), 1: flint.fmpq(-2**100, 3)}, {2: flint.fmpq(7**40)}, {0: flint.fmpq(-4, 9),
                                                                                          1: flint.fmpq(2, 9)}]
    got = primitive(vecs)
    assert got == [{0: 2, 1: -1}, {2: 1}, {0: -2, 1: 1}]
    assert all(sum(row[c] * _fr(v) for c, v in vec.items()) == 0 for vec in got for row in M)


def test_semi_local_vectors_are_primitive_and_in_the_oracle_kernel():
    for seed in range(4):
        net, X = _rare_net(seed)
        st = activation_state(net, X)
        if st.ties:
            continue
        G = _oracle_gamma(net, X)
        for vec in semi_local_kernel(net, X, st.pattern, fixed_edges(net)):
            assert _in_kernel(G, vec)
            fr = [_fr(v) for v in vec.values()]
            assert all(f.denominator == 1 for f in fr) and math.gcd(*(f.numerator for f in fr)) == 1


def test_large_gamma_leaves_out_wide_semi_local_vectors(monkeypatch):
    """On a Gamma too large for one exact product (cap patched to 0) the semi-local vectors above the bit cap
    (patched to the smallest size found) are left out: the rest stay exact kernel vectors (oracle), the source
    becomes ``shifted`` (the semi-local list is no longer the whole), and the verifier, rebuilding under the
    same caps, accepts the bound."""
    import exactident.linalg.certified as certified
    import exactident.ranks.shifted as shifted
    from exactident.ranks.shifted import StructuralKernels

    for seed in range(40):
        net, X = _rare_net(seed)
        st = activation_state(net, X)
        if st.ties:
            continue
        fixed = fixed_edges(net)
        semi = semi_local_kernel(net, X, st.pattern, fixed)
        sizes = sorted({_int_bits(v) for v in semi})
        if len(sizes) < 2:
            continue
        case = Case(name=f"rare-{seed}", network=net, X=X)
        _r, rep = _report(case)
        cap = sizes[0]
        monkeypatch.setattr(certified, "MAX_EXACT_CHECK_ENTRIES", 0)
        monkeypatch.setattr(shifted, "MAX_SHIFTED_BITS", cap)
        K = structural_kernel(net, X, st.pattern, fixed)
        G = _oracle_gamma(net, X)
        kept = [v for v in semi if _int_bits(v) <= cap]
        assert len(kept) < len(semi) and K[:len(kept)] == kept
        assert all(_int_bits(v) <= cap and _in_kernel(G, v) for v in K)
        assert _rank([[_fr(v.get(c, flint.fmpq(0))) for c in range(net.dim)] for v in K]) == len(K)
        assert net.dim - len(K) >= _rank(G)
        assert StructuralKernels(net, X, st.pattern, fixed).source() == "shifted"
        cert = copy.deepcopy(rep["certificate"]["rank"])
        low = cert["rank_gamma"]["lower"]
        assert net.dim - len(K) >= low["rank_mod_p"]  # a rank mod p is at most the rank
        cert["rank_gamma"] = {"shape": cert["rank_gamma"]["shape"], "lower": low,
                              "upper": {"kind": "kernel", "bound": net.dim - len(K), "source": "shifted",
                                        "nullity": len(K)}}
        if net.dim - len(K) == low["rank_mod_p"]:
            cert["rank_gamma"]["rank"] = low["rank_mod_p"]
        assert verify_rank_certificate(case, cert) == []
        wrong = copy.deepcopy(cert)  # the unfiltered count is not what the construction gives under the caps
        wrong["rank_gamma"]["upper"].update(nullity=len(K) + 1, bound=net.dim - len(K) - 1)
        wrong["rank_gamma"].pop("rank", None)
        assert verify_rank_certificate(case, wrong) != []
        return
    pytest.fail("no case with semi-local vectors of two sizes")


def _poly_derivative_gamma(net: Network, X, u: dict) -> list[Fraction]:
    """``Gamma u`` without any backpropagation: ``f(x_i; theta + t u)`` is, for ``t`` small enough that no
    pre-activation changes sign, a polynomial of degree at most ``L`` in ``t``; its coefficient of ``t``
    (Lagrange interpolation at ``L + 1`` exact points, the sign pattern checked equal at each) is ``Gamma u``."""
    params = free_parameters(net, fixed_edges(net))
    L = net.L

    def forward(t: Fraction, x):
        W = [[[_fr(Wl[r, c]) for c in range(Wl.ncols())] for r in range(Wl.nrows())] for Wl in net.W]
        b = [[_fr(v) for v in bl] for bl in net.b]
        for c, v in u.items():
            prm = params[c]
            if prm.j is None:
                b[prm.l - 1][prm.i] += t * _fr(v)
            else:
                W[prm.l - 1][prm.i][prm.j] += t * _fr(v)
        h, signs = [_fr(v) for v in x], []
        for l in range(L):
            z = [sum(W[l][r][c] * h[c] for c in range(len(h))) + b[l][r] for r in range(len(W[l]))]
            if l < L - 1:
                assert all(v != 0 for v in z)
                signs.append(tuple(v > 0 for v in z))
                h = [max(v, Fraction(0)) for v in z]
            else:
                h = z
        return h, signs

    ts = [Fraction(k, 10**30) for k in range(L + 1)]
    out = []
    for x in X:
        vals = [forward(t, x) for t in ts]
        assert all(s == vals[0][1] for _v, s in vals)  # one linear region for every t used
        for k in range(net.widths[-1]):
            # d/dt of the Lagrange polynomial through (t_m, f_k(t_m)) at t = 0
            d = Fraction(0)
            for m, tm in enumerate(ts):
                lag = Fraction(0)  # derivative at 0 of prod_{q != m} (t - t_q) / (t_m - t_q)
                for r in range(len(ts)):
                    if r == m:
                        continue
                    term = Fraction(1)
                    for q in range(len(ts)):
                        if q not in (m, r):
                            term *= -ts[q]
                    lag += term
                for q in range(len(ts)):
                    if q != m:
                        lag /= tm - ts[q]
                d += lag * vals[m][0][k]
            out.append(d)
    return out


@pytest.mark.parametrize("seed", range(4))
def test_tall_shifted_block_of_a_deep_narrow_net(seed):
    """A rare input on 2 samples of a 3-4-1-2 net: the shifted block has 2 N_L = 4 rows for at most 4 columns,
    so the old size rule skipped it, but the single neuron of layer 2 makes each sample's rows rank 1 (by hand:
    ``delta(x_i)[:, v] = W_3 D_2 W_2[:, v]`` with ``W_3 D_2`` of rank 1): a kernel of at least 2.  Every vector is
    checked by the polynomial oracle above (no backpropagation), their independence and the rank bound by
    Fraction elimination."""
    rng = random.Random(500 + seed)
    widths = (3, 4, 1, 2)
    W = [flint.fmpq_mat([[flint.fmpq(rng.randint(-6, 6), 4) for _ in range(widths[l])] for _ in range(widths[l + 1])])
         for l in range(3)]
    W[1] = flint.fmpq_mat([[flint.fmpq(rng.randint(1, 6), 4) for _ in range(4)]])  # layer 2 sees every neuron
    b = [[flint.fmpq(rng.randint(4, 9), 2) for _ in range(4)], [flint.fmpq(1, 3)],
         [flint.fmpq(rng.randint(-3, 3), 5) for _ in range(2)]]
    X = []
    for i in range(10):
        row = [flint.fmpq(rng.randint(-9, 9), 7) + flint.fmpq(1, 101) for _ in range(3)]
        row[0] = flint.fmpq(3 + i, 2) if i < 2 else flint.fmpq(-1, 3)
        X.append(row)
    net = Network(widths, W, b)
    st = activation_state(net, X)
    if st.ties or not st.pattern[1][:2].all() or not st.pattern[0][:2].all():
        pytest.skip("a tie, or the rare samples not active everywhere")
    fixed = fixed_edges(net)
    K = structural_kernel(net, X, st.pattern, fixed)
    T, cols = next((T, cols) for T, cols in shifted_families(net, X, st.pattern, fixed) if T == [0, 1])
    assert len(T) * net.widths[-1] >= len(cols)  # taller than wide: the old rule skipped it
    assert all(v == 0 for vec in K for v in _poly_derivative_gamma(net, X, vec))
    assert _rank([[_fr(v.get(c, flint.fmpq(0))) for c in range(net.dim)] for v in K]) == len(K)
    G = [[*col] for col in zip(*[_poly_derivative_gamma(net, X, {c: flint.fmpq(1)}) for c in range(net.dim)])]
    assert net.dim - len(K) >= _rank(G)
    # the block (4 columns of per-sample rank 1 on 2 samples) gives at least 2 vectors supported on its columns
    block_kernel = [vec for vec in K if set(vec) <= {c for col in cols for c in col}]
    assert len(block_kernel) >= len(cols) - 2


def test_reduced_kernel_is_a_basis_of_the_whole_integer_kernel():
    """LLL of a huge kernel basis of a primitive row ``a``: the result is in the kernel, and its Gram
    determinant is ``a . a`` (the integer lattice ``a^perp ∩ Z^n`` of a primitive ``a`` has volume ``|a|``, by
    hand), so it is a basis of the whole lattice, not of the sublattice the huge vectors span."""
    import numpy as np

    from exactident.ranks.kernels import _reduced_kernel

    a = [10**12 + 39, 7**15, 2**41 + 1, 3**20]
    assert math.gcd(*a) == 1
    # a kernel basis of Q-rank 3 scaled far past any zero-check budget
    big = 2**4000 + 1
    K = [[a[1] * big, -a[0] * big, 0, 0], [a[2] * big, 0, -a[0] * big, 0], [a[3] * big, 0, 0, -a[0] * big]]
    M = np.array([a], dtype=object)
    R = _reduced_kernel(M, K)
    assert len(R) == 3 and all(sum(x * y for x, y in zip(a, k)) == 0 for k in R)
    gram = [[Fraction(sum(x * y for x, y in zip(u, v))) for v in R] for u in R]
    det = gram[0][0] * (gram[1][1] * gram[2][2] - gram[1][2] * gram[2][1]) \
        - gram[0][1] * (gram[1][0] * gram[2][2] - gram[1][2] * gram[2][0]) \
        + gram[0][2] * (gram[1][0] * gram[2][1] - gram[1][1] * gram[2][0])
    assert det == sum(x * x for x in a)
    assert max(abs(v) for k in R for v in k).bit_length() < 64



def test_structural_kernels_skip_the_shifted_blocks_when_the_semi_local_kernel_closes():
    """``StructuralKernels(closes=dim - rank)``: when the semi-local kernel alone has ``dim - rank`` vectors
    (the oracle's exact Fraction rank of ``Gamma``), no kernel vector can be added to it, so ``vectors()`` is that
    list (source ``semi-local``, what the verifier rebuilds) and :func:`structural_kernel` (shifted blocks
    included) finds no more; one vector short of ``closes`` (a lower ``rank_mod_p``), the blocks are built.
    Nets 3-5-2 on 60 samples with a constant input 0 (its first-layer weights give input-local vectors)."""
    from exactident.ranks.shifted import StructuralKernels

    seen = 0
    for seed in range(8):
        rng = random.Random(seed)
        W1 = flint.fmpq_mat([[flint.fmpq(rng.randint(-6, 6) or 1, 4) for _ in range(3)] for _ in range(5)])
        W2 = flint.fmpq_mat([[flint.fmpq(rng.choice([-5, -3, -2, -1, 1, 2, 3, 5]), 3) for _ in range(5)]
                             for _ in range(2)])
        b = [[flint.fmpq(rng.randint(-3, 3), 5) for _ in range(width)] for width in (5, 2)]
        X = [[flint.fmpq(-1, 3)] + [flint.fmpq(rng.randint(-9, 9), 7) + flint.fmpq(1, 101) for _ in range(2)]
             for _ in range(60)]
        net = Network((3, 5, 2), [W1, W2], b)
        st = activation_state(net, X)
        if st.ties:
            continue
        fixed = fixed_edges(net)
        semi = semi_local_kernel(net, X, st.pattern, fixed)
        G = _oracle_gamma(net, X)
        nullity = net.dim - _rank(G)
        if len(semi) != nullity:
            continue
        seen += 1
        kernels = StructuralKernels(net, X, st.pattern, fixed, closes=nullity)
        assert kernels.vectors() == semi and kernels.source() == "semi-local"
        assert all(_in_kernel(G, v) for v in semi)
        full = structural_kernel(net, X, st.pattern, fixed)
        assert len(full) == nullity
        assert StructuralKernels(net, X, st.pattern, fixed, closes=nullity + 1).vectors() == full
    assert seen >= 3
