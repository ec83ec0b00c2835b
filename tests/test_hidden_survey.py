"""The hidden-symmetry survey against an independent re-computation, width-1 networks, witnesses, the CLI.

Right values: the rank of the full Jacobian in Fractions (tests/test_fdim.py's backpropagation
and elimination, independent of the engine), at the survey's own Gaussian batch and at random
points drawn here; the width-1 deficit from the case analysis of docs/symmetries.md.
"""

from __future__ import annotations

import json
import random
from fractions import Fraction
from math import gcd

import flint
import numpy as np
import pytest
from test_fdim import fraction_rank, full_jacobian_rows

from exactident.cli import main
from exactident.symmetry.fdim import functional_dimension
from exactident.symmetry.glr import gaussian_batch, survey_cell, torch_default_network, witness


def _fractions(net):
    W = [[[Fraction(int(M[i, j].p), int(M[i, j].q)) for j in range(M.ncols())] for i in range(M.nrows())]
         for M in net.W]
    b = [[Fraction(int(v.p), int(v.q)) for v in bl] for bl in net.b]
    return W, b


def _tie_free(W, b, x):
    h = list(x)
    for l in range(len(W) - 1):
        z = [sum((W[l][i][j] * h[j] for j in range(len(h))), Fraction(0)) + b[l][i] for i in range(len(W[l]))]
        if any(v == 0 for v in z):
            return False
        h = [max(v, Fraction(0)) for v in z]
    return True


def test_survey_cell_against_an_independent_recomputation():
    widths, trials = [3, 4, 4, 1], 8
    cell = survey_cell(widths, trials, seed=0)
    rng_points = random.Random(7)
    indep_full = 0
    for t, res in enumerate(cell.trials):
        # the same draw as the survey's (seeded generator of the module docstring)
        rng = np.random.default_rng([0, widths[0], len(widths) - 2, widths[1], t])
        net = torch_default_network(widths, rng)
        X = gaussian_batch(widths[0], net.dim + 10, rng)
        W, b = _fractions(net)
        batch = [[Fraction(int(v.p), int(v.q)) for v in x] for x in X]
        batch = [x for x in batch if _tie_free(W, b, x)]
        assert fraction_rank([r for x in batch for r in full_jacobian_rows(W, b, x)]) == res["batch"]
        extra = []
        while len(extra) < 300:
            s = 2 ** rng_points.randint(0, 12)
            x = [Fraction(rng_points.randint(-64 * s, 64 * s), 64) for _ in range(widths[0])]
            if _tie_free(W, b, x):
                extra.append(x)
        r = fraction_rank([row for x in batch + extra for row in full_jacobian_rows(W, b, x)])
        assert res["lower"] <= res["upper"] <= cell.dim
        assert r <= res["upper"]
        if res["lower"] == res["upper"]:  # fdim known: the independent ranks reach dim exactly when the survey says
            assert (r == cell.dim) == (res["lower"] == cell.dim)
            indep_full += r == cell.dim
    assert cell.count("settled") >= trials - 2
    assert indep_full == cell.count("full") >= 4


@pytest.mark.parametrize("seed", range(6))
def test_three_consecutive_width_one_layers_always_have_hidden_symmetries(seed):
    # docs/symmetries.md: each pair of consecutive width-1 layers is in one of four sign cases; all but
    # (c < 0, d > 0) give an always-active, dead or bottleneck mechanism, and two pairs in that case make the
    # third neuron always active or the first a bottleneck.  So the proved upper bound is below dim.
    rng = np.random.default_rng([99, seed])
    net = torch_default_network([2, 1, 1, 1, 1], rng, "he")
    res = functional_dimension(net, seed=seed)
    assert res.upper < res.dim and res.lower == res.upper


def test_witness_is_exact_and_independent():
    w = witness([2, 2, 2, 1], seed=0)
    assert w is not None
    W = [[[Fraction(v) for v in row] for row in M] for M in w["weights"]]
    b = [[Fraction(v) for v in bl] for bl in w["biases"]]
    X = [[Fraction(v) for v in x] for x in w["sample"]]
    assert all(_tie_free(W, b, x) for x in X)
    assert fraction_rank([r for x in X for r in full_jacobian_rows(W, b, x)]) == w["dim"]


def test_hidden_symmetries_cli(tmp_path, capsys):
    assert main(["hidden-symmetries", "--n0", "2", "--depths", "2", "--widths", "2", "--trials", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["format"] == "exactident-hidden-symmetries/1" and out["cells"][0]["trials"] == 2
    # the paper's depth d = 2: two layers, one hidden, input width = hidden width
    assert out["cells"][0]["widths"] == [2, 2, 1] and out["cells"][0]["layers"] == 2
    assert main(["hidden-symmetries", "--n0", "3", "--depths", "3", "--widths", "2", "--trials", "1", "--lines", "0",
                 "--regions", "0", "--json"]) == 0
    cell = json.loads(capsys.readouterr().out)["cells"][0]
    assert cell["widths"] == [3, 2, 2, 1]
    assert all(t["lower_random"] == t["lower"] for t in cell["per_trial"])  # no line walk, no cover
    assert main(["hidden-symmetries", "--n0", "3", "--depths", "3", "--widths", "2", "--trials", "2", "--json"]) == 0
    cell = json.loads(capsys.readouterr().out)["cells"][0]
    # a cover of these small networks completes: every trial settled (lower = upper)
    assert cell["settled"] == 2 and all(t["cover"] is None or t["cover"]["complete"] for t in cell["per_trial"])
    assert main(["hidden-symmetries", "--widths", "0"]) == 2
    assert main(["hidden-symmetries", "--init", "xavier"]) == 2


def test_every_shipped_witness_has_full_rank_independently():
    # benchmarks/hidden_symmetries_witnesses.json: for every architecture with input and hidden widths in {2, 3}
    # (Grillo-Montufar: an open set without hidden symmetries exists), theta and X with rank J(X) = dim; re-checked
    # here with the Fraction Jacobian of test_fdim (no exactident code), and the recorded prime too
    import os

    path = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "hidden_symmetries_witnesses.json")
    with open(path, encoding="utf-8") as f:
        wits = json.load(f)
    assert len(wits) == 56 and all(w is not None for w in wits.values())
    for name, w in wits.items():
        widths = [int(v) for v in name.split("-")]
        dim = sum(widths[l] * widths[l + 1] for l in range(len(widths) - 1)) + widths[-1]
        assert w["widths"] == widths and w["dim"] == dim
        W = [[[Fraction(v) for v in row] for row in M] for M in w["weights"]]
        b = [[Fraction(v) for v in bl] for bl in w["biases"]]
        X = [[Fraction(v) for v in x] for x in w["sample"]]
        assert all(_tie_free(W, b, x) for x in X)
        rows = [r for x in X for r in full_jacobian_rows(W, b, x)]
        assert fraction_rank(rows) == dim, name
        p = int(w["prime"])
        assert flint.fmpz(p).is_prime()
        den = 1
        for r in rows:
            for v in r:
                den = den * v.denominator // gcd(den, v.denominator)
        assert den % p
        M = flint.nmod_mat(len(rows), len(rows[0]), [int(v * den) % p for r in rows for v in r], p)
        assert M.rank() == dim, name
