"""``exactident canonical``, ``equiv`` and ``audit``: exit codes, import paths, and an audit of a trained victim."""

from __future__ import annotations

import json
import random
from fractions import Fraction
from pathlib import Path

import flint
import numpy as np
import pytest

from exactident.cli import main
from exactident.io.case import Case, load_case, write_case
from exactident.model.network import Network
from exactident.symmetry.audit import audit

ROOT = Path(__file__).resolve().parents[1]
IRIS = str(ROOT / "cases" / "iris-mlp-4-8-8-3.json")
DIABETES = str(ROOT / "cases" / "diabetes-mlp-10-8-1.json")
FIRST10 = str(ROOT / "cases" / "diabetes-mlp-10-8-1-first10.json")


def run(capsys, argv):
    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def shuffled_rescaled(net: Network, rng: random.Random) -> Network:
    """A random permutation and positive rational rescaling of the hidden neurons (written here)."""
    widths = net.widths
    P = [list(range(widths[0]))] + [rng.sample(range(w), w) for w in widths[1:-1]] + [list(range(widths[-1]))]
    S = [[flint.fmpq(1)] * widths[0]] + [[flint.fmpq(rng.randint(1, 9), rng.randint(1, 9)) for _ in range(w)]
                                         for w in widths[1:-1]] + [[flint.fmpq(1)] * widths[-1]]
    W = [[[S[l][i] * net.W[l - 1][P[l][i], P[l - 1][j]] / S[l - 1][j] for j in range(widths[l - 1])]
          for i in range(widths[l])] for l in range(1, net.L + 1)]
    b = [[S[l][i] * net.b[l - 1][P[l][i]] for i in range(widths[l])] for l in range(1, net.L + 1)]
    return Network(widths, W, b)


def test_canonical_prints_the_form_and_json(capsys):
    status, out, _ = run(capsys, ["canonical", IRIS])
    assert status == 0 and "canonical form" in out and "digest" in out
    status, out, _ = run(capsys, ["canonical", IRIS, "--json"])
    obj = json.loads(out)
    assert status == 0 and obj["format"] == "exactident-canonical/1" and obj["widths"] == [4, 8, 8, 3]
    # every normalised live incoming vector starts with +-1
    for row, bias in zip(obj["weights"][0], obj["biases"][0]):
        first = next(Fraction(v) for v in row + [bias] if Fraction(v) != 0)
        assert abs(first) == 1


def test_equiv_of_a_shuffled_rescaled_copy_is_the_same_orbit(tmp_path, capsys):
    case = load_case(IRIS)
    copy = Case(name="copy", network=shuffled_rescaled(case.network, random.Random(3)), X=case.X)
    write_case(copy, tmp_path / "copy.json")
    status, out, _ = run(capsys, ["equiv", IRIS, str(tmp_path / "copy.json"), "--sample", IRIS, "--json"])
    obj = json.loads(out)
    assert status == 0 and obj["same_orbit"] is True and obj["sample"]["same_outputs"] is True
    assert obj["alignment"]["max_abs"] == "0"


def test_equiv_reads_a_model_file(tmp_path, capsys):
    # the same network as an .npz (W1, b1, ...): float64 weights read exactly, so the same orbit
    rng = np.random.default_rng(0)
    W = [rng.standard_normal((3, 2)), rng.standard_normal((1, 3))]
    b = [rng.standard_normal(3), rng.standard_normal(1)]
    np.savez(tmp_path / "m.npz", W1=W[0], b1=b[0], W2=W[1], b2=b[1])
    case = Case.from_arrays(W, b, np.zeros((0, 2)), name="m")
    write_case(Case(name="m2", network=shuffled_rescaled(case.network, random.Random(0)), X=[]),
               tmp_path / "m2.json")
    np.save(tmp_path / "X.npy", rng.standard_normal((5, 2)))
    status, out, err = run(capsys, ["equiv", str(tmp_path / "m.npz"), str(tmp_path / "m2.json"),
                                    "--sample", str(tmp_path / "X.npy"), "--assume-relu-mlp"])
    assert status == 0 and "same orbit" in out and "equal exactly" in out, err
    # a model file is imported with its sample, as check does: without one, one line naming --sample
    status, out, err = run(capsys, ["equiv", str(tmp_path / "m.npz"), str(tmp_path / "m2.json"), "--assume-relu-mlp"])
    assert status == 2 and out == "" and "m.npz: --sample: a model file needs a sample" in err


@pytest.mark.parametrize("argv, where", [
    (["canonical", "missing.json"], "missing.json"),
    (["equiv", IRIS, "missing.npz"], "missing.npz"),
    (["equiv", IRIS, DIABETES, "--sample", IRIS], "inputs"),
    (["audit", DIABETES, "--queries", IRIS], "sample"),
    (["audit", DIABETES], "--queries"),
    (["audit", DIABETES, "--queries", str(ROOT / "tests" / "data" / "missing-queries.npy")], "missing-queries.npy"),
    (["canonical", str(ROOT / "tests" / "test_symmetry.py")], "test_symmetry.py"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, where):
    status, out, err = run(capsys, argv)
    assert status == 2 and out == "" and err.count("\n") == 1 and where in err, err


def test_audit_refuses_an_empty_query_set(tmp_path, capsys):
    case = load_case(DIABETES)
    write_case(Case(name="empty", network=case.network, X=[]), tmp_path / "empty.json")
    status, out, err = run(capsys, ["audit", DIABETES, "--queries", str(tmp_path / "empty.json")])
    assert status == 2 and out == "" and err.count("\n") == 1 and "empty" in err


def test_audit_refuses_an_extracted_model_with_other_inputs_as_equiv_does(tmp_path, capsys):
    # a 1-input extracted copy cannot be run on the victim's 10-input queries: one line, exit 2 (it used to
    # exit 0 and drop the output comparison silently)
    other = Network((1, 1, 1), [flint.fmpq_mat([[1]]), flint.fmpq_mat([[1]])], [[0], [0]])
    write_case(Case(name="other", network=other, X=[[0]]), tmp_path / "other.json")
    status, out, err = run(capsys, ["audit", DIABETES, "--queries", FIRST10, "--extracted",
                                    str(tmp_path / "other.json")])
    assert status == 2 and out == "" and err.count("\n") == 1 and "1 inputs" in err and "10" in err


def test_audit_of_the_first_ten_samples_names_every_unpinned_neuron(capsys):
    # 10 queries for a 10-8-1 network: each first-layer hyperplane has 11 degrees of freedom and at
    # most 10 active queries, so none is pinned; rank Gamma <= 10 < dim = 89: never identifiable
    status, out, err = run(capsys, ["audit", DIABETES, "--queries", FIRST10, "--json"])
    obj = json.loads(out)
    assert status == 0, err
    assert obj["format"] == "exactident-audit/1" and obj["verdict"] != "identifiable"
    assert obj["rank_gamma"] <= 10 and obj["dim"] == 89 and obj["kernel"] == "exact"
    assert obj["counts"]["unpinned"] == 8 and obj["counts"]["hidden"] == 8
    assert all(e["hyperplane_full"] == 11 and not e["pinned"] for e in obj["neurons"])


def test_audit_facts_without_the_kernel_agree_with_explain():
    case = load_case(FIRST10)
    full, fast = audit(case.network, case.X), audit(case.network, case.X, explain_max_dim=1)
    assert fast.kernel.startswith("not computed")
    for a, b in zip(full.neurons, fast.neurons):
        assert (a["hyperplane_rank"], a["pinned"], a["dead"], a["always_active"]) == \
            (b["hyperplane_rank"], b["pinned"], b["dead"], b["always_active"])
        if b["under_determined"]:  # an exact line (no query on the kink) is in the kernel explain computes
            assert a["under_determined"]


@pytest.mark.filterwarnings("ignore:Stochastic Optimizer")
def test_audit_of_a_trained_victim_and_a_perturbed_extracted_copy(tmp_path, capsys):
    sklearn = pytest.importorskip("sklearn.neural_network")
    from exactident.io.importers.objects import from_sklearn

    rng = np.random.default_rng(0)
    Xf = rng.standard_normal((200, 3))
    y = np.sin(Xf[:, 0]) + Xf[:, 1] * Xf[:, 2]
    model = sklearn.MLPRegressor(hidden_layer_sizes=(4, 4), activation="relu", max_iter=300, random_state=0).fit(Xf, y)
    victim = from_sklearn(model, Xf[:60])
    # extracted: every weight and bias times (1 + e), |e| <= 2^-20, then a random permutation and rescaling
    eps = flint.fmpq(1, 2**20)
    rr = random.Random(1)
    net = victim.network
    W = [[[net.W[l][i, j] * (1 + eps * flint.fmpq(rr.choice([-1, 1]))) for j in range(net.widths[l])]
          for i in range(net.widths[l + 1])] for l in range(net.L)]
    b = [[x * (1 + eps * flint.fmpq(rr.choice([-1, 1]))) for x in v] for v in net.b]
    extracted = shuffled_rescaled(Network(net.widths, W, b), rr)
    write_case(victim, tmp_path / "victim.json")
    write_case(Case(name="extracted", network=extracted, X=[]), tmp_path / "extracted.json")
    status, out, err = run(capsys, ["audit", str(tmp_path / "victim.json"), "--queries",
                                    str(tmp_path / "victim.json"), "--extracted", str(tmp_path / "extracted.json"),
                                    "--json"])
    assert status == 0, err
    obj = json.loads(out)
    ex = obj["extracted"]
    assert ex["same_orbit"] is False
    # aligned entry = a (1+e1)(1+e2)/(1+e3) at worst (its own error, the two neurons' scales):
    # relative error below 2^-20 * 8, so more than 17 bits; and not 0
    rel = Fraction(ex["alignment"]["max_rel"])
    assert 0 < rel < Fraction(8, 2**20) and ex["alignment"]["bits"] > 17
    assert ex["sample"]["n"] == 60
    assert obj["verdict"] in ("identifiable", "not-identifiable", "inconclusive")
    assert len(obj["neurons"]) == 8
    status, out, _ = run(capsys, ["audit", str(tmp_path / "victim.json"), "--queries", str(tmp_path / "victim.json"),
                                  "--extracted", str(tmp_path / "extracted.json")])
    assert status == 0 and "extracted model" in out and "bits" in out


def test_audit_and_equiv_read_a_torch_state_dict(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    torch.save(model.state_dict(), tmp_path / "victim.pt")
    np.save(tmp_path / "queries.npy", np.random.default_rng(0).standard_normal((20, 2)))
    status, out, err = run(capsys, ["audit", str(tmp_path / "victim.pt"), "--queries", str(tmp_path / "queries.npy"),
                                    "--extracted", str(tmp_path / "victim.pt"), "--json", "--assume-relu-mlp"])
    assert status == 0, err
    obj = json.loads(out)
    # 20 queries, dim = 2*3 + 3*1 + 1 = 10 <= 20 rows of Gamma; the copy is the victim itself
    assert obj["dim"] == 10 and obj["n_queries"] == 20 and obj["extracted"]["same_orbit"] is True
    assert obj["extracted"]["sample"]["same_outputs"] is True


def test_canonical_json_of_a_hand_example(tmp_path, capsys):
    # h_0 = relu(-2x + 4), h_1 = relu(3x): normalised incoming (-1, 2) and (1, 0); sorted (-1, 2) < (1, 0);
    # outgoing 5 * 2 = 10 and 7 * 3 = 21
    write_case(Case(name="hand", network=Network((1, 2, 1), [[[3], [-2]], [[7, 5]]], [[0, 4], [1]]), X=[]),
               tmp_path / "hand.json")
    status, out, _ = run(capsys, ["canonical", str(tmp_path / "hand.json"), "--json"])
    obj = json.loads(out)
    assert status == 0
    assert obj["weights"] == [[["-1"], ["1"]], [["10", "21"]]] and obj["biases"] == [["2", "0"], ["1"]]
    assert obj["permutation"] == [[1, 0]] and obj["scale"] == [["1/2", "1/3"]]


def test_fast_hyperplane_ranks_with_a_dead_input_agree_with_sympy():
    # neuron (1,0) is dead on every query (bias -100), so every row [h_1, 1] of layer 2 has a zero column:
    # rank at most 3 of 4, reached by the modular rank and then exact without an exact elimination
    sympy = pytest.importorskip("sympy")
    from exactident.model.activation import activation_state
    from exactident.model.diagnostics import hyperplane_rows
    from exactident.symmetry.audit import neuron_facts

    net = Network((2, 3, 3, 1), [[[1, 2], [3, -1], [-2, 1]], [[1, 1, 1], [2, -1, 1], [1, 3, -2]], [[1, 1, 1]]],
                  [[-100, 1, 2], [1, 0, 3], [0]])
    rr = random.Random(0)
    X = [[flint.fmpq(rr.randint(-20, 20), rr.randint(1, 5)) for _ in range(2)] for _ in range(40)]
    state = activation_state(net, X)
    for e in neuron_facts(state, X):
        rows = hyperplane_rows(state, X, e["layer"], e["neuron"])
        truth = sympy.Matrix([[sympy.Rational(int(x.p), int(x.q)) for x in r] for r in rows]).rank() if rows else 0
        assert e["hyperplane_rank"] == truth and e["hyperplane_rank_exact"]
        if e["layer"] == 2:
            assert e["hyperplane_rank"] <= 3


def test_audit_reads_a_keras_victim_and_equiv_finds_it_equal_to_its_npz_weights(tmp_path, capsys):
    pytest.importorskip("h5py")
    from exactident.io.importers import keras_forward

    k = keras_forward._import_keras()
    if k is None or isinstance(k, str):
        pytest.skip(k or "keras is not installed")
    k.utils.set_random_seed(0)
    model = k.Sequential([k.Input((3,)), k.layers.Dense(4, activation="relu"), k.layers.Dense(1)])
    model.save(tmp_path / "victim.keras")
    # the same weights as an .npz (W_l of shape (N_l, N_{l-1}): Keras kernels transposed), float32 read exactly
    d1, d2 = model.layers
    np.savez(tmp_path / "same.npz", W1=d1.kernel.numpy().T, b1=d1.bias.numpy(), W2=d2.kernel.numpy().T,
             b2=d2.bias.numpy())
    np.save(tmp_path / "q.npy", np.random.default_rng(1).standard_normal((30, 3)).astype(np.float32))
    status, out, err = run(capsys, ["audit", str(tmp_path / "victim.keras"), "--queries", str(tmp_path / "q.npy"),
                                    "--extracted", str(tmp_path / "same.npz"), "--json", "--assume-relu-mlp"])
    assert status == 0, err
    obj = json.loads(out)
    assert obj["widths"] == [3, 4, 1] and obj["extracted"]["same_orbit"] is True
    assert obj["extracted"]["alignment"]["max_abs"] == "0"


def test_audit_of_the_full_diabetes_sample_is_identifiable(capsys):
    # the shipped case's expected block: identifiable by Theorem 9 (rank Gamma = dim = 89)
    status, out, _ = run(capsys, ["audit", DIABETES, "--queries", DIABETES, "--json"])
    obj = json.loads(out)
    assert status == 0 and obj["verdict"] == "identifiable" and obj["rank_gamma"] == obj["dim"] == 89
    assert obj["counts"]["under_determined"] == 0


def test_audit_names_twins_no_query_set_can_separate():
    # h_0 = relu(x + 1) and h_1 = relu(2x + 2) = 2 h_0 on every input: twins (design's obstruction)
    net = Network((1, 2, 1), [[[1], [2]], [[3, 5]]], [[1, 2], [0]])
    au = audit(net, [[flint.fmpq(k)] for k in range(-3, 4)])
    assert au.report.verdict != "identifiable"
    assert [o["kind"] for o in au.obstructions if o["kind"] == "twins"] == ["twins"]
    assert any(o["neurons"] == [[1, 0], [1, 1]] for o in au.obstructions)


def test_audit_past_its_time_budget_is_an_answer_exit_0(capsys):
    # a budget that ran out is an answer, reported in the output (docs/cli.md, "Exit status")
    status, out, err = run(capsys, ["audit", IRIS, "--queries", IRIS, "--timeout", "0.05"])
    assert status == 0 and err == "" and out.count("\n") == 1 and "time budget of 0.05 s exhausted" in out
    status, out, err = run(capsys, ["audit", IRIS, "--queries", IRIS, "--timeout", "0.05", "--json"])
    obj = json.loads(out)
    assert status == 0 and obj["format"] == "exactident-audit/1" and obj["timed_out"] is True
    assert obj["reason"] == f"time budget exhausted at {obj['stage']}"


@pytest.mark.parametrize("argv", [["fdim", "cases/tiny-111-kink.json", "--json"],
                                  ["audit", "cases/tiny-111-kink.json", "--queries", "cases/tiny-111-kink.json",
                                   "--json"]])
def test_on_a_terminal_fdim_and_audit_run_in_a_child(capsys, monkeypatch, argv):
    # Regression (a new user's trial): on a terminal, Ctrl-C during a long `audit` waited 57 s for the running
    # FLINT call to return; `check`, `explain` and `design` run in a child process there.  Now `fdim` and
    # `audit` do too (run_isolated(..., inf): no deadline), with the same answer as off a terminal.
    import math
    import sys

    import exactident.budget as budget

    root = Path(__file__).resolve().parent.parent
    argv = [str(root / a) if a.startswith("cases/") else a for a in argv]
    assert main(argv) == 0
    plain = json.loads(capsys.readouterr().out)
    timeouts = []
    real = budget.run_isolated

    def spy(fn, timeout, **kw):
        timeouts.append(timeout)
        return real(fn, timeout, **kw)

    monkeypatch.setattr(budget, "run_isolated", spy)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(argv) == 0
    tty = json.loads(capsys.readouterr().out)
    assert timeouts == [math.inf]
    for d in (plain, tty):
        d.pop("seconds", None)
    assert tty == plain
