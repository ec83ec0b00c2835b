"""Emulated rank pipelines (exactident.numeric.pipelines) against the real libraries."""

from __future__ import annotations

import json

import numpy as np
import pytest

from exactident.check import check
from exactident.errors import CaseFormatError
from exactident.io.case import parse_case
from exactident.linalg.exact import rank as exact_rank
from exactident.model.activation import activation_state
from exactident.model.fixed_edges import FixedEdges
from exactident.model.gamma import gamma_exact
from exactident.numeric.pipelines import _centred, emulate, parse_pipeline, pipeline_matrix, rank_rule


def _random_case(seed: int, widths: list[int], n: int) -> dict:
    rng = np.random.default_rng(seed)
    W = [[[f"{int(v)}/8" for v in row] for row in rng.integers(-16, 17, (widths[l + 1], widths[l]))]
         for l in range(len(widths) - 1)]
    b = [[f"{int(v)}/8" for v in rng.integers(-8, 9, widths[l + 1])] for l in range(len(widths) - 1)]
    X = [[f"{int(v)}/16" for v in row] for row in rng.integers(-32, 33, (n, widths[0]))]
    return {"format": "exactident-case/1", "name": f"r{seed}", "widths": widths, "weights": W, "biases": b,
            "sample": X}


def _spectrum_matrix(rng: np.random.Generator, m: int, n: int, dtype: type) -> np.ndarray:
    # Singular values spread over 20 decades: some fall on each side of every default threshold.
    k = min(m, n)
    U, _ = np.linalg.qr(rng.standard_normal((m, k)))
    V, _ = np.linalg.qr(rng.standard_normal((n, k)))
    s = 10.0 ** rng.uniform(-20, 1, k)
    return ((U * s) @ V.T).astype(dtype)


@pytest.mark.parametrize("seed", range(8))
def test_numpy_rule_is_numpys(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for dtype in (np.float64, np.float32):
        A = _spectrum_matrix(rng, int(rng.integers(3, 30)), int(rng.integers(3, 30)), dtype)
        S = np.linalg.svd(A, compute_uv=False)
        assert rank_rule(S, A.shape, A.dtype, "numpy")[0] == np.linalg.matrix_rank(A)


@pytest.mark.parametrize("seed", range(8))
def test_torch_rule_is_torchs(seed: int) -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(seed)
    for dtype, tdt in ((np.float64, torch.float64), (np.float32, torch.float32)):
        A = _spectrum_matrix(rng, int(rng.integers(3, 30)), int(rng.integers(3, 30)), dtype)
        t = torch.tensor(A, dtype=tdt)
        S = torch.linalg.svdvals(t).numpy()
        assert rank_rule(S, A.shape, A.dtype, "torch")[0] == int(torch.linalg.matrix_rank(t))


@pytest.mark.parametrize("seed", range(4))
def test_jax_rule_is_jaxs(seed: int) -> None:
    jnp = pytest.importorskip("jax.numpy")
    rng = np.random.default_rng(seed)
    A = _spectrum_matrix(rng, int(rng.integers(3, 30)), int(rng.integers(3, 30)), np.float32)
    a = jnp.asarray(A)
    assert a.dtype == jnp.float32  # JAX's default precision: the pipeline's dtype
    S = np.asarray(jnp.linalg.svd(a, compute_uv=False))
    assert rank_rule(S, A.shape, S.dtype, "jax")[0] == int(jnp.linalg.matrix_rank(a))


_NETS = [([2, 3, 1], 12), ([3, 4, 2], 10), ([2, 4, 3, 3], 9), ([4, 5, 3], 40)]


@pytest.mark.parametrize("seed", range(len(_NETS)))
def test_emulated_pipelines_match_the_libraries_on_the_pipeline_matrix(seed: int) -> None:
    widths, n = _NETS[seed]
    case = parse_case(_random_case(seed, widths, n))
    rg = check(case, numeric=False, all_ranks=True, structural=False).pattern_ranks[0]
    J = pipeline_matrix(case, "numpy")
    assert emulate(case, "numpy", rg, case.network.dim)["rank"] == np.linalg.matrix_rank(J)
    fd = pipeline_matrix(case, "functional-dimension:4")
    assert fd.dtype == np.float32 and fd.shape[0] == (n // 4) * 4 * widths[-1]
    # The authors' rule: numpy's matrix_rank of the float32 matrix taken to float64 (float64's eps).
    assert emulate(case, "functional-dimension:4", rg, case.network.dim)["rank"] == \
        np.linalg.matrix_rank(fd.astype(np.float64))
    torch = pytest.importorskip("torch")
    for name, tdt in (("torch-float32", torch.float32), ("torch-float64", torch.float64)):
        M = pipeline_matrix(case, name)
        assert emulate(case, name, rg, case.network.dim)["rank"] == \
            int(torch.linalg.matrix_rank(torch.tensor(M, dtype=tdt)))


def test_pipeline_matrix_is_torchs_jacobian() -> None:
    # The emulated Jacobian is the one torch.func.jacrev computes for the same float32 network.
    torch = pytest.importorskip("torch")
    case = parse_case(_random_case(7, [3, 4, 2], 6))
    net = case.network
    layers = []
    for l in range(net.L):
        lin = torch.nn.Linear(net.widths[l], net.widths[l + 1]).to(torch.float32)
        with torch.no_grad():
            lin.weight.copy_(torch.tensor([[float(v) for v in row] for row in net.W[l].table()]))
            lin.bias.copy_(torch.tensor([float(v) for v in net.b[l]]))
        layers += [lin, torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1])
    params = dict(model.named_parameters())
    X = torch.tensor([[float(v) for v in x] for x in case.X], dtype=torch.float32)
    jac = torch.func.jacrev(lambda p: torch.func.functional_call(model, p, (X,)))(params)
    J = torch.cat([jac[k].reshape(X.shape[0] * net.widths[-1], -1) for k in params], dim=1).detach().numpy()
    assert np.allclose(J, pipeline_matrix(case, "torch-float32"), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("seed", range(4))
def test_softmax_rank_bound(seed: int) -> None:
    # Softmax ignores b_L + c 1 and W_L + 1 w^T: the centred Jacobian has rank <= dim - 1 - N_{L-1}.
    widths, n = [[2, 3, 3], [3, 4, 2], [2, 3, 3, 4], [2, 2, 3]][seed], 30
    case = parse_case(_random_case(50 + seed, widths, n))
    net, X = case.network, case.X
    st = activation_state(net, X)
    G = gamma_exact(net, X, st.Z, st.pattern, FixedEdges({}))
    r_soft = exact_rank(_centred(G, widths[-1]))
    assert r_soft <= net.dim - 1 - widths[-2]
    # The invariance directions themselves: b_L + 1 and W_L + 1 e_j^T move every output of a sample by
    # the same amount, so the centred rows annihilate them (columns: per layer W_l row-major, then b_l).
    import flint

    N = G.ncols()
    n_out, n_in = widths[-1], widths[-2]
    offset = N - n_out - n_out * n_in
    directions = [[int(c >= N - n_out) for c in range(N)]]
    directions += [[int(offset <= c < offset + n_out * n_in and (c - offset) % n_in == j) for c in range(N)]
                   for j in range(n_in)]
    C = _centred(G, widths[-1])
    for v in directions:
        assert all(e == 0 for e in (C * flint.fmpq_mat(N, 1, v)).entries())
    d = emulate(case, "functional-dimension:10", exact_rank(G), net.dim)
    assert d["exact_rank_softmax"] == r_soft and d["kept_samples"] == 30


def test_dropped_batch_explained() -> None:
    case = parse_case(_random_case(3, [2, 3, 2], 13))
    rg = check(case, numeric=False, all_ranks=True, structural=False).pattern_ranks[0]
    d = emulate(case, "functional-dimension:4", rg, case.network.dim)
    assert d["kept_samples"] == 12 and d["dropped_samples"] == 1
    assert any("partial batch" in s for s in d["explanation"])


def test_bad_pipeline_names() -> None:
    for bad in ("numpyy", "functional-dimension:0", "functional-dimension:x", "numpy:3"):
        with pytest.raises(CaseFormatError):
            parse_pipeline(bad)


def test_cli_flags(tmp_path, capsys) -> None:
    from exactident.cli import main

    path = tmp_path / "c.json"
    path.write_text(json.dumps(_random_case(11, [2, 3, 2], 9)))
    assert main(["crosscheck", str(path), "--json", "--certified-bands", "--pipeline", "numpy",
                 "--pipeline", "functional-dimension:4"]) == 0
    data = json.loads(capsys.readouterr().out)["cases"][0]
    assert data["certified"]["gamma"]["rank"] == data["exact"]["pattern_rank_gamma"]
    assert [p["pipeline"] for p in data["pipelines"]] == ["numpy", "functional-dimension:4"]
    assert main(["crosscheck", str(path), "--certified-bands", "--pipeline", "jax"]) == 0
    out = capsys.readouterr().out
    assert "certified gamma" in out and "pipeline jax" in out
    assert main(["crosscheck", str(path), "--pipeline", "nope"]) == 2
    assert "--pipeline" in capsys.readouterr().err


@pytest.mark.parametrize("seed", range(3))
def test_weyl_bound_on_the_exactly_zero_singular_values(seed: int) -> None:
    # The full Jacobian has exact rank rank_gamma < N; its float32 version's singular values beyond
    # rank_gamma are round-off, at most ||J_hat - J||_2 <= delta (Weyl), up to the float SVD's own error.
    widths, n = [[2, 3, 1], [3, 4, 2], [2, 3, 3, 2]][seed], 12
    raw = json.loads(json.dumps(_random_case(70 + seed, widths, n)).replace("/8", "/7"))  # not dyadic
    case = parse_case(raw)
    rg = check(case, numeric=False, all_ranks=True, structural=False).pattern_ranks[0]
    d = emulate(case, "torch-float32", rg, case.network.dim)
    J = pipeline_matrix(case, "torch-float32").astype(np.float64)
    S = np.linalg.svd(J, compute_uv=False)  # float64 SVD: its own error ~1e-15 S[0], far below delta
    assert d["n_pattern_flips"] == 0 and d["delta"] > 0
    assert np.all(S[rg:] <= d["delta"] + 1e-13 * S[0])


def test_tie_under_relu_prime_zero_is_explained() -> None:
    # f = 3 relu(2x + 1) at x = -1/2 (a tie): autograd's relu'(0) = 0 makes that sample inactive,
    # the exact >= 0 pattern counts it active: one flip, explained.
    case = parse_case({"format": "exactident-case/1", "name": "t", "widths": [1, 1, 1],
                       "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]],
                       "sample": [[0], [1], ["-1/2"]]})
    torch_like = emulate(case, "torch-float64", 2, 3)
    numpy_like = emulate(case, "numpy", 2, 3)
    assert torch_like["n_pattern_flips"] == 1 and numpy_like["n_pattern_flips"] == 0
    assert any("relu'(0) = 0" in s for s in torch_like["explanation"])
    # Rows (3x, 3, 2x+1, 1) at x = 0, 1 plus (0, 0, 0, 1) for torch: rank 3; numpy's row (-3/2, 3, 0, 1): rank 2.
    assert torch_like["rank"] == 3 and numpy_like["rank"] == 2
