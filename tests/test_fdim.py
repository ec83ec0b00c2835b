"""``fdim``: the certified interval of the functional dimension against an independent exact rank.

Right values: the rank of the *full* Jacobian of ``theta -> f_theta(X)`` (all weights and
biases), computed here by a plain Fraction forward/backward pass and Fraction elimination,
independent of the engine (no fixed edges, no primes).  Its rank equals ``rank Gamma`` (the
rescalings span the difference, docs/symmetries.md), so for every sample ``X`` of the domain it
is at most the certified upper bound, and at the witness points it is at least the lower bound.
Hand derivations for a dead neuron on a box and on ``R^n``.
"""

from __future__ import annotations

import json
import random
from fractions import Fraction

import flint
import pytest

from exactident.cli import main
from exactident.model.network import Network
from exactident.symmetry.fdim import functional_dimension


def _forward(W, b, x):
    """Pre-activations z_1..z_L and hidden values h_0..h_{L-1} (Fractions)."""
    h = [list(x)]
    zs = []
    for l in range(len(W)):
        z = [sum((W[l][i][j] * h[-1][j] for j in range(len(h[-1]))), Fraction(0)) + b[l][i] for i in range(len(W[l]))]
        zs.append(z)
        if l < len(W) - 1:
            h.append([max(v, Fraction(0)) for v in z])
    return zs, h


def full_jacobian_rows(W, b, x):
    """Rows d f_k(x) / d (all W_l row-major, then b_l), by backpropagation in Fractions."""
    zs, h = _forward(W, b, x)
    L = len(W)
    n_out = len(W[-1])
    rows = []
    for k in range(n_out):
        delta = [Fraction(int(i == k)) for i in range(n_out)]  # d f_k / d z_L
        grads = [None] * L
        for l in range(L - 1, -1, -1):
            gW = [[delta[i] * h[l][j] for j in range(len(h[l]))] for i in range(len(delta))]
            grads[l] = [v for row in gW for v in row] + list(delta)
            if l:
                delta = [sum((W[l][i][j] * delta[i] for i in range(len(delta))), Fraction(0))
                         * (1 if zs[l - 1][j] > 0 else 0) for j in range(len(W[l][0]))]
        rows.append([v for g in grads for v in g])
    return rows


def fraction_rank(rows) -> int:
    M = [list(r) for r in rows]
    rank, col = 0, 0
    ncols = len(M[0]) if M else 0
    while rank < len(M) and col < ncols:
        piv = next((i for i in range(rank, len(M)) if M[i][col] != 0), None)
        if piv is None:
            col += 1
            continue
        M[rank], M[piv] = M[piv], M[rank]
        for i in range(rank + 1, len(M)):
            if M[i][col] != 0:
                f = M[i][col] / M[rank][col]
                M[i] = [a - f * c for a, c in zip(M[i], M[rank])]
        rank += 1
        col += 1
    return rank


def _tie_free(W, b, x) -> bool:
    zs, _ = _forward(W, b, x)
    return all(v != 0 for z in zs[:-1] for v in z)


def _random_net(widths, rng):
    W = [[[Fraction(rng.randint(-4, 4), rng.randint(1, 3)) for _ in range(widths[l])] for _ in range(widths[l + 1])]
         for l in range(len(widths) - 1)]
    b = [[Fraction(rng.randint(-4, 4), rng.randint(1, 3)) for _ in range(widths[l + 1])]
         for l in range(len(widths) - 1)]
    for l in range(len(widths) - 2):  # no identically-zero neuron
        for i in range(widths[l + 1]):
            if all(w == 0 for w in W[l][i]) and b[l][i] == 0:
                b[l][i] = Fraction(1)
    return W, b


def _net(W, b, widths):
    return Network(tuple(widths), [[[flint.fmpq(v.numerator, v.denominator) for v in row] for row in M] for M in W],
                   [[flint.fmpq(v.numerator, v.denominator) for v in r] for r in b])


def _sample(rng, n0, lo, hi):
    return [Fraction(rng.randint(lo * 8, hi * 8), 8) + Fraction(1, rng.choice([3, 5, 7, 11])) for _ in range(n0)]


CASES = ([((1, 2, 1), s) for s in range(4)] + [((2, 2, 1), s) for s in range(4)] + [((1, 2, 2, 1), s) for s in range(4)]
         + [((2, 3, 2), s) for s in range(2)] + [((1, 1, 1, 1), s) for s in range(3)])


def case_net(widths, seed: int, boxed: bool):
    """The seeded random network of a CASES entry, its weights (Fractions), and the box ``[-1, 2]^n0`` or None."""
    rng = random.Random(1000 * seed + len(widths))
    W, b = _random_net(widths, rng)
    box = ([flint.fmpq(-1)] * widths[0], [flint.fmpq(2)] * widths[0]) if boxed else None
    return rng, W, b, _net(W, b, widths), box


@pytest.mark.parametrize("widths,seed", CASES)
@pytest.mark.parametrize("boxed", [False, True])
def test_bounds_against_independent_ranks(widths, seed, boxed):
    rng, W, b, net, box = case_net(widths, seed, boxed)
    res = functional_dimension(net, box=box, seed=seed, max_boxes=512)
    assert 0 <= res.lower <= res.upper <= net.dim
    if res.lower == net.dim:
        assert res.no_hidden_symmetries
    # the witness: the exact rank at the points reported is at least the lower bound (mod p ranks are lower bounds)
    pts = [[Fraction(int(v.p), int(v.q)) for v in x] for x in res.points]
    rows = [r for x in pts for r in full_jacobian_rows(W, b, x)]
    witness = fraction_rank(rows)
    assert res.lower <= witness <= res.upper
    # the upper bound is never exceeded by any sampled rank; the lower one is reached by some sample
    lo, hi = (-1, 2) if boxed else (-12, 12)
    best = 0
    n_rows = net.dim + 3
    for _ in range(12):
        X = [x for x in (_sample(rng, widths[0], lo, hi) for _ in range(n_rows)) if _tie_free(W, b, x)]
        r = fraction_rank([row for x in X for row in full_jacobian_rows(W, b, x)])
        assert r <= res.upper
        best = max(best, r)
    assert max(best, witness) >= res.lower


def test_dead_neuron_on_a_box_by_hand():
    # f = 2 relu(x) + relu(-x - 1) + d.  On [0, 1]: neuron (1,1) has z = -x - 1 <= -1 (dead), neuron (1,0) has
    # z = x >= 0 (active), so f = 2 (w x + b) + d there: the Jacobian in (w, b, d) has rows (2x, 2, 1): rank 2.
    # dim = 7 - 2 = 5; missing 3 = 2 (w_1, b_1 of the dead neuron; its outgoing weight is its fixed edge)
    # + 1 (b_1[0] trades with b_2 when (1,0) is affine).
    net = Network((1, 2, 1), [[[1], [-1]], [[2, 1]]], [[0, -1], [0]])
    res = functional_dimension(net, box=([flint.fmpq(0)], [flint.fmpq(1)]))
    assert (res.lower, res.upper, res.dim) == (2, 2, 5)
    kinds = {m["kind"]: m["dimensions"] for m in res.mechanisms}
    assert kinds == {"dead": 2, "active": 1}
    # on R^n both neurons switch: rows (2x, 0, 2, 0, 1) for x > 0 and (0, -x, 0, 1, 1) for x < -1: rank 5
    assert (functional_dimension(net).lower, functional_dimension(net).upper) == (5, 5)


def test_dead_on_rn_by_the_sign_argument():
    # neuron (1,1) has zero incoming weight and bias -1: dead everywhere; f = 3 relu(x) + 0 + d: Jacobian in
    # (W_1[0,0], W_1[1,0], b_1[0], b_1[1], b_2) is (3x 1[x>0], 0, 3 1[x>0], 0, 1): rank 3 = dim - 2
    net = Network((1, 2, 1), [[[1], [0]], [[3, 1]]], [[0, -1], [0]])
    res = functional_dimension(net)
    assert (res.lower, res.upper) == (3, 3)
    assert [m["kind"] for m in res.mechanisms] == ["dead"]


def test_always_active_layer_on_rn_gl_mixing():
    # layer 2 of width 2 with positive weights and biases on h_1 >= 0: both neurons active on R^n (sign argument),
    # so W_3[:,S] (W_2[S,:] h + b_2[S]) loses |S|^2 + |S| - |S| = 4 dimensions beyond the rescalings, unless
    # the product's own rank bounds bind: here W_3 is 1 x 2, so A B (1 x 2 matrix) + A c + d: the 2 neurons'
    # 2*2 + 2 + 2 + 1 = 9 parameters (minus 2 rescalings = 7) reach only the 2 + 1 = 3 numbers of the
    # affine map: 4 directions lost.
    net = Network((1, 2, 2, 1), [[[1], [-1]], [[1, 2], [3, 1]], [[1, 1]]], [[0, 1], [1, 2], [0]])
    res = functional_dimension(net)
    assert res.upper == res.lower == res.dim - 4


def test_cli_exit_codes(tmp_path, capsys):
    case = tmp_path / "c.json"
    case.write_text(json.dumps({"format": "exactident-case/1", "name": "c", "widths": [1, 2, 1],
                                "weights": [[["1"], ["-1"]], [["2", "1"]]], "biases": [["0", "-1"], ["0"]],
                                "sample": [["1/2"], ["-3"]]}))
    assert main(["fdim", str(case), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["format"] == "exactident-fdim/1" and out["lower"] == out["upper"] == out["dim"] == 5
    assert main(["fdim", str(case), "--lines", "0", "--no-search", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["lower_random_points"] is None  # no walk ran
    assert main(["fdim", str(case), "--box", "0:1"]) == 0
    assert "[2, 2]" in capsys.readouterr().out
    assert main(["fdim", str(case), "--box", "1:0"]) == 2
    assert main(["fdim", str(tmp_path / "missing.json")]) == 2
    assert main(["fdim", str(case), "--box", "x:1"]) == 2
    assert main(["fdim", str(case), "--lines", "-1"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err


def test_unseen_weight_on_rn_by_hand():
    # h_1 = (relu(x), relu(-x)); z_{2,0} = -2 relu(x) + relu(-x) - 1 is -2x - 1 < 0 wherever relu(x) > 0, so the
    # column of W_2[0,0] (= dF/dz_{2,0} * relu(x)) is zero at every input: a unit direction of ker J everywhere.
    # z_{2,1} = relu(x) + relu(-x) + 1 = |x| + 1 > 0: always active, its bias trades with b_3.
    net = Network((1, 2, 2, 1), [[[1], [-1]], [[-2, 1], [1, 1]], [[1, 1]]], [[0, 0], [-1, 1], [0]])
    res = functional_dimension(net, regions=0)
    kinds = {m["kind"]: m["dimensions"] for m in res.mechanisms}
    assert kinds == {"active": 1, "unseen": 1} and res.upper == res.dim - 2
    # the independent rank never exceeds it: f is a function of one variable with kinks at 0 and -1 only,
    # 3 slopes + 1 value + 2 kinks = 6 numbers, so fdim <= 6 < upper = 7 (a bound no named mechanism proves;
    # the complete region cover does: the last dimension is in the kernel on its three regions)
    settled = functional_dimension(net)
    kinds = {m["kind"]: m["dimensions"] for m in settled.mechanisms}
    assert kinds == {"active": 1, "unseen": 1, "regions": 1} and settled.lower == settled.upper == 6
    W = [[[Fraction(1)], [Fraction(-1)]], [[Fraction(-2), Fraction(1)], [Fraction(1), Fraction(1)]],
         [[Fraction(1), Fraction(1)]]]
    b = [[Fraction(0), Fraction(0)], [Fraction(-1), Fraction(1)], [Fraction(0)]]
    X = [[Fraction(k, 7)] for k in range(-40, 40) if k % 7]
    assert fraction_rank([r for x in X for r in full_jacobian_rows(W, b, x)]) == 6 == res.lower


def test_cli_reads_a_model_file(tmp_path, capsys):
    # an .npz of W1, b1, W2, b2 (the import convention): f = 2 relu(x) + relu(-x - 1), as in the hand case
    import numpy as np

    np.savez(tmp_path / "m.npz", W1=np.array([[1.0], [-1.0]]), b1=np.array([0.0, -1.0]), W2=np.array([[2.0, 1.0]]),
             b2=np.array([0.0]))
    np.save(tmp_path / "X.npy", np.array([[0.5], [-3.0]]))
    assert main(["fdim", str(tmp_path / "m.npz"), "--sample", str(tmp_path / "X.npy"), "--box", "0:1"]) == 2
    assert "m.npz: architecture: a weights file holds no architecture" in capsys.readouterr().err
    assert main(["fdim", str(tmp_path / "m.npz"), "--sample", str(tmp_path / "X.npy"), "--assume-relu-mlp",
                 "--box", "0:1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["lower"], out["upper"], out["dim"]) == (2, 2, 5)
    assert main(["fdim", str(tmp_path / "nothing.npz"), "--sample", str(tmp_path / "X.npy")]) == 2
    # a model file is imported with its sample, as check does: without one, one line naming --sample
    assert main(["fdim", str(tmp_path / "m.npz")]) == 2
    assert "m.npz: --sample: a model file needs a sample" in capsys.readouterr().err


def test_the_library_has_the_commands_time_budgets():
    """``functional_dimension`` from Python stops its searches where ``exactident fdim`` does (120 s each,
    docs/symmetries.md), not never."""
    import argparse
    import inspect

    from exactident.symmetry.fdim_command import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    defaults = vars(parser.parse_args(["case.json"]))
    params = inspect.signature(functional_dimension).parameters
    for name in ("walk_seconds", "region_seconds"):
        assert params[name].default == defaults[name] == 120.0, name
