"""exactident.track: the certified rank of Gamma recorded during real short training runs.

Truth: every recorded rank and dead-unit count is re-derived here from the weights the model had at
that step, with Fraction arithmetic (the Jacobian of the outputs on the probe in *all* weights and
biases, by hand-written backpropagation, and its rank by Fraction Gaussian elimination): no code of
exactident. Its rank equals the paper's rank Gamma off the boundary when no hidden neuron is in S
(the rescaling directions are in the kernel of the full Jacobian; docs/testing.md). The training runs
are repeated with the same seed without the tracker: parameters and the next random draws must be
identical, bit for bit.
"""

from __future__ import annotations

import json
import random
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from exactident.errors import CaseFormatError, UnsupportedCaseError  # noqa: E402
from exactident.track import RECORD_FIELDS, Tracker, read_records  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------------------
# the independent oracle (Fractions, no exactident)

def _frac_rank(rows: list[list[Fraction]]) -> int:
    M = [list(r) for r in rows]
    rank, ncols = 0, len(M[0]) if M else 0
    for c in range(ncols):
        piv = next((i for i in range(rank, len(M)) if M[i][c] != 0), None)
        if piv is None:
            continue
        M[rank], M[piv] = M[piv], M[rank]
        for i in range(rank + 1, len(M)):
            if M[i][c] != 0:
                f = M[i][c] / M[rank][c]
                M[i] = [a - f * b for a, b in zip(M[i], M[rank])]
        rank += 1
    return rank


def _oracle(Ws: list[np.ndarray], bs: list[np.ndarray], X: np.ndarray) -> tuple[int, int, bool]:
    """(rank of the full Jacobian, dead hidden units, some pre-activation exactly 0), from the floats' exact values."""
    W = [[[Fraction(float(v)) for v in row] for row in w] for w in Ws]
    b = [[Fraction(float(v)) for v in vec] for vec in bs]
    L = len(W)
    rows, tie = [], False
    negative: list[list[bool]] = [[True] * len(b[l]) for l in range(L - 1)]
    for x in X:
        h = [[Fraction(float(v)) for v in x]]
        zs = []
        for l in range(L):
            z = [sum((W[l][i][j] * h[-1][j] for j in range(len(h[-1]))), Fraction(0)) + b[l][i]
                 for i in range(len(b[l]))]
            zs.append(z)
            if l < L - 1:
                tie |= any(v == 0 for v in z)
                negative[l] = [n and v < 0 for n, v in zip(negative[l], z)]
                h.append([max(v, Fraction(0)) for v in z])
        for k in range(len(b[-1])):
            delta = [Fraction(int(i == k)) for i in range(len(b[-1]))]
            grads: list[list[Fraction]] = []
            for l in range(L - 1, -1, -1):
                gW = [d * hv for d in delta for hv in h[l]]
                grads = gW + delta + grads
                if l:
                    back = [sum((W[l][i][j] * delta[i] for i in range(len(delta))), Fraction(0))
                            for j in range(len(h[l]))]
                    delta = [g if zs[l - 1][j] > 0 else Fraction(0) for j, g in enumerate(back)]
            rows.append(grads)
    return _frac_rank(rows), sum(sum(layer) for layer in negative), tie


def _torch_weights(model) -> tuple[list[np.ndarray], list[np.ndarray]]:
    lin = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    return ([m.weight.detach().numpy().copy() for m in lin], [m.bias.detach().numpy().copy() for m in lin])


def _check_against_oracle(rec: dict, Ws, bs, X) -> None:
    rank, dead, tie = _oracle(Ws, bs, X)
    assert rec["dead_units"] == dead
    if tie:
        return  # on the boundary the full Jacobian depends on relu'(0): not the oracle's question
    assert rec["on_boundary"] is False
    if rec["rank_gamma"] is not None:
        assert rec["rank_gamma"] == rank
    else:
        lo, hi = rec["rank_gamma_interval"]
        assert lo <= rank <= hi


# ---------------------------------------------------------------------------------------------
# PyTorch: a hand-written loop

def _data(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(48, 2, generator=g)
    y = (X[:, :1] * X[:, 1:]).abs()
    return X, y


def _train(track: bool, tmp_path: Path | None = None, steps: int = 200, fail_at: int | None = None, **kw):
    torch.manual_seed(1)
    np.random.seed(1)
    random.seed(1)
    X, y = _data()
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Dropout(0.1),
                                torch.nn.Linear(3, 2), torch.nn.ReLU(), torch.nn.Linear(2, 1))
    model[2].eval()  # a submodule in another mode than its parent: restored as it was
    model[0].bias.requires_grad_(False)  # a frozen parameter stays frozen
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    if tmp_path is not None:
        tmp_path.mkdir(exist_ok=True)
    tracker = Tracker(model, X[:6], every=50, jsonl=None if tmp_path is None else tmp_path / "t.jsonl",
                      budget=30, **kw) if track else None
    seen = {}
    if tracker is not None and tracker.due(0):
        seen[0] = _torch_weights(model)
        tracker.step(0)
    for step in range(1, steps + 1):
        idx = torch.randint(0, len(X), (16,))  # the torch RNG drives the batches and the dropout
        opt.zero_grad()
        loss = ((model(X[idx]) - y[idx]) ** 2).mean()
        loss.backward()
        opt.step()
        if fail_at == step:
            raise RuntimeError("interrupted")
        if tracker is not None:
            grads = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
            if tracker.due(step):
                seen[step] = _torch_weights(model)
                tracker.step(step)
                assert all((g is None and p.grad is None) or torch.equal(g, p.grad)
                           for g, p in zip(grads, model.parameters()))  # no gradient side effect
    draws = (torch.rand(3).tolist(), np.random.rand(3).tolist(), random.random())
    return model, tracker, seen, draws, X


def test_torch_loop_records_match_the_oracle_and_change_nothing(tmp_path):
    model, tracker, seen, draws, X = _train(True, tmp_path)
    base, _, _, base_draws, _ = _train(False)
    for (n, p), (n0, p0) in zip(model.named_parameters(), base.named_parameters()):
        assert n == n0 and torch.equal(p, p0), n  # bit for bit
    assert draws == base_draws  # the next random draws: torch, numpy, python
    assert model.training and not model[2].training  # modes as they were
    assert model[0].bias.requires_grad is False and model[0].weight.requires_grad is True
    recs = tracker.records
    assert [r["step"] for r in recs] == [0, 50, 100, 150, 200]
    assert all(list(r) == list(RECORD_FIELDS) and r["error"] is None for r in recs)
    # dim = sum N_l (N_{l-1} + 1) - hidden units (the rescalings): 9 + 8 + 3 - 5
    assert {r["dim"] for r in recs} == {15}
    assert read_records(tmp_path / "t.jsonl") == recs  # written as they finished, re-readable
    for r in recs:
        _check_against_oracle(r, *seen[r["step"]], X[:6].numpy())
        assert r["verdict"] == "not-identifiable"  # 6 outputs < dim 15: rank Gamma < dim (Theorem 8)
        assert 0 <= r["float_rank_gamma"] <= 6


def test_background_points_are_the_same_and_change_nothing(tmp_path):
    # the analysis in a worker process while training goes on: same records, same training
    model, tracker, seen, draws, X = _train(True, tmp_path, background=True)
    recs = tracker.wait()
    base, fore, _, base_draws, _ = _train(True, tmp_path / "fore")
    for (n, p), (_, p0) in zip(model.named_parameters(), base.named_parameters()):
        assert torch.equal(p, p0), n
    assert draws == base_draws and model.training and not model[2].training
    drop = ("seconds",)
    assert [{k: v for k, v in r.items() if k not in drop} for r in recs] == \
        [{k: v for k, v in r.items() if k not in drop} for r in fore.records]
    assert read_records(tmp_path / "t.jsonl") == recs
    for r in recs:
        _check_against_oracle(r, *seen[r["step"]], X[:6].numpy())


def test_interrupted_run_keeps_the_finished_records(tmp_path):
    with pytest.raises(RuntimeError, match="interrupted"):
        _train(True, tmp_path, fail_at=120)
    recs = read_records(tmp_path / "t.jsonl")
    assert [r["step"] for r in recs] == [0, 50, 100]
    # a point killed during its write leaves a torn last line: it is left out, the others kept
    with open(tmp_path / "t.jsonl", "a", encoding="utf-8") as fh:
        fh.write('{"step": 150, "verd')
    assert [r["step"] for r in read_records(tmp_path / "t.jsonl")] == [0, 50, 100]


def test_read_records_names_a_bad_line(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"step": 0}\n[1, 2]\n', encoding="utf-8")
    with pytest.raises(CaseFormatError, match="line 2"):
        read_records(p)


def test_schedule_and_arguments():
    X, _ = _data()
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU(), torch.nn.Linear(2, 1))
    t = Tracker(model, X[:4], at=[3, 7], every=5, budget=None)
    assert [s for s in range(12) if t.due(s)] == [0, 3, 5, 7, 10]
    t.step(3)
    assert not t.due(3) and [r["step"] for r in t.records] == [3]
    for bad in ({}, {"every": 0}):
        with pytest.raises(UnsupportedCaseError):
            Tracker(model, X, **bad)
    with pytest.raises(UnsupportedCaseError):
        Tracker(None, X, every=1)


def test_a_refused_model_is_an_error_record_and_training_goes_on():
    X, _ = _data()
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Tanh(), torch.nn.Linear(2, 1))
    rec = Tracker(model, X[:4], every=1, budget=None).step(0)
    assert rec["verdict"] == "error" and "Tanh" in rec["error"] and rec["rank_gamma"] is None


def test_a_budget_that_runs_out_gives_an_inconclusive_point():
    X, _ = _data()
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    rec = Tracker(model, X[:8], every=1, budget=1e-6).step(0)
    assert rec["timed_out"] is True and rec["verdict"] == "inconclusive" and rec["rank_gamma"] is None


# ---------------------------------------------------------------------------------------------
# weights + forward (any framework): numpy here

def test_weights_function_with_a_forward_check():
    rng = np.random.default_rng(3)
    W = [rng.standard_normal((3, 2)), rng.standard_normal((1, 3))]
    b = [rng.standard_normal(3), rng.standard_normal(1)]
    X = rng.standard_normal((5, 2))

    def forward(x):
        return W[1] @ np.maximum(W[0] @ x.T + b[0][:, None], 0) + b[1][:, None]

    rec = Tracker(weights=lambda: (W, b), X=X, forward=lambda x: forward(x).T, every=1, budget=None).step(0)
    _check_against_oracle(rec, W, b, X)
    wrong = Tracker(weights=lambda: (W, b), X=X, forward=lambda x: forward(x).T + 1, every=1, budget=None).step(0)
    assert wrong["verdict"] == "error" and "forward check" in wrong["error"]


def test_background_records_stay_in_step_order_with_an_error_between(tmp_path):
    rng = np.random.default_rng(4)
    W = [rng.standard_normal((4, 3)), rng.standard_normal((2, 4))]
    b = [rng.standard_normal(4), rng.standard_normal(2)]
    X = rng.standard_normal((12, 3))
    step = [0]

    def weights():  # at step 1 a matrix that does not chain: refused at the step, in this process
        return ([W[0], W[1].T], b) if step[0] == 1 else (W, b)

    with Tracker(weights=weights, X=X, every=1, jsonl=tmp_path / "o.jsonl", background=True) as tracker:
        for step[0] in range(3):
            tracker.step(step[0])
    assert [(r["step"], r["verdict"] == "error") for r in tracker.records] == [(0, False), (1, True), (2, False)]
    assert read_records(tmp_path / "o.jsonl") == tracker.records
    _check_against_oracle(tracker.records[2], W, b, X)


# ---------------------------------------------------------------------------------------------
# Keras 3 (the torch backend here)

def _keras_run(track: bool, tmp_path: Path):
    keras = pytest.importorskip("keras")
    from exactident.track import keras_callback

    keras.utils.set_random_seed(2)
    X, y = _data(5)
    X, y = X.numpy(), y.numpy()
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3, activation="relu"), keras.layers.Dropout(0.1),
                              keras.layers.Dense(2), keras.layers.ReLU(), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    cb = keras_callback(X[:5], every=12, jsonl=tmp_path / "k.jsonl", budget=30) if track else None
    model.fit(X, y, batch_size=8, epochs=4, verbose=0, callbacks=[cb] if cb else [])  # 6 batches an epoch
    draws = (torch.rand(3).tolist(), np.random.rand(3).tolist(), random.random())
    return model, cb, draws, X


def test_keras_callback(tmp_path):
    model, cb, draws, X = _keras_run(True, tmp_path)
    base, _, base_draws, _ = _keras_run(False, tmp_path)
    for w, w0 in zip(model.get_weights(), base.get_weights()):
        assert np.array_equal(w, w0)
    assert draws == base_draws
    recs = cb.records
    assert [r["step"] for r in recs] == [0, 12, 24] and [r["epoch"] for r in recs] == [0, 1, 3]
    assert read_records(tmp_path / "k.jsonl") == recs
    dense = [layer for layer in model.layers if type(layer).__name__ == "Dense"]
    Ws = [np.asarray(layer.kernel.numpy()).T for layer in dense]
    bs = [np.asarray(layer.bias.numpy()) for layer in dense]
    assert all(r["error"] is None and r["dim"] == 15 for r in recs)
    _check_against_oracle(recs[-1], Ws, bs, X[:5].astype(np.float32))  # step 24: the model after training


def test_keras_callback_per_epoch(tmp_path):
    keras = pytest.importorskip("keras")
    from exactident.track import keras_callback

    keras.utils.set_random_seed(3)
    X, y = _data(6)
    X, y = X.numpy(), y.numpy()
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2, activation="relu"), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    cb = keras_callback(X[:4], every=1, per="epoch", budget=None)
    model.fit(X, y, batch_size=16, epochs=2, verbose=0, callbacks=[cb])
    assert [(r["step"], r["epoch"]) for r in cb.records] == [(0, 0), (1, 1), (2, 2)]
    dense = [layer for layer in model.layers if type(layer).__name__ == "Dense"]
    _check_against_oracle(cb.records[-1], [np.asarray(d.kernel.numpy()).T for d in dense],
                          [np.asarray(d.bias.numpy()) for d in dense], X[:4])
    with pytest.raises(UnsupportedCaseError):
        keras_callback(X, every=1, per="batch")


def test_keras_refuses_a_non_relu_chain():
    keras = pytest.importorskip("keras")
    from exactident.track.frameworks import keras_case

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3, activation="tanh"), keras.layers.Dense(1)])
    with pytest.raises(CaseFormatError, match="tanh"):
        keras_case(model, np.zeros((2, 2), dtype=np.float32))


# ---------------------------------------------------------------------------------------------
# Lightning (skipped unless installed)

def test_lightning_callback(tmp_path):
    pl = pytest.importorskip("lightning.pytorch")
    from exactident.track import lightning_callback

    X, y = _data()

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))

        def training_step(self, batch, i):
            return ((self.net(batch[0]) - batch[1]) ** 2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    def run(track):
        pl.seed_everything(4)
        m = Module()
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, y), batch_size=8, shuffle=True)
        cb = lightning_callback(X[:5], every=6, jsonl=tmp_path / "l.jsonl", module=lambda m: m.net) if track else None
        pl.Trainer(max_epochs=2, callbacks=[cb] if cb else [], logger=False, enable_checkpointing=False,
                   enable_progress_bar=False, enable_model_summary=False).fit(m, loader)
        return m, cb, torch.rand(3).tolist()

    m, cb, draw = run(True)
    m0, _, draw0 = run(False)
    assert all(torch.equal(p, q) for p, q in zip(m.parameters(), m0.parameters())) and draw == draw0
    assert [r["step"] for r in cb.records] == [0, 6, 12] and read_records(tmp_path / "l.jsonl") == cb.records
    _check_against_oracle(cb.records[-1], *_torch_weights(m.net), X[:5].numpy())


# ---------------------------------------------------------------------------------------------
# the plot, the CLI, pandas, the example

def test_track_plot_cli(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from exactident.cli import main

    recs = [{"step": 0, "verdict": "identifiable", "rank_gamma": 5, "rank_gamma_interval": None, "dim": 5,
             "float_rank_gamma": 5, "dead_units": 0, "always_active_units": 1},
            {"step": 10, "verdict": "inconclusive", "rank_gamma": None, "rank_gamma_interval": [3, 5], "dim": 5,
             "float_rank_gamma": 4, "dead_units": 1, "always_active_units": 0}]
    src = tmp_path / "r.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    assert main(["track-plot", str(src)]) == 0
    assert (tmp_path / "r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["track-plot", str(src), "-o", str(tmp_path / "r.svg")]) == 0
    assert b"<svg" in (tmp_path / "r.svg").read_bytes()[:500]
    assert main(["track-plot", str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl" in capsys.readouterr().err


def test_track_plot_ticks_count_whole_units():
    # dead and always-active units (right axis) and ranks (left) are integers: a tick at 1.25 units means nothing
    pytest.importorskip("matplotlib")
    from exactident.track.plot import tracking_figure

    recs = [{"step": s, "verdict": "not-identifiable", "rank_gamma": 578 + s, "rank_gamma_interval": None, "dim": 898,
             "float_rank_gamma": 578 + s, "dead_units": 2, "always_active_units": a}
            for s, a in ((0, 2), (50, 0), (100, 1))]
    fig = tracking_figure(recs)
    for ax in fig.axes:
        ticks = [t for t in ax.get_yticks() if ax.get_ylim()[0] <= t <= ax.get_ylim()[1]]
        assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks), ticks


def test_records_frame():
    pd = pytest.importorskip("pandas")
    from exactident.track import records_frame

    df = records_frame([{"step": 0, "rank_gamma": 3}, {"step": 5, "rank_gamma": 2}])
    assert isinstance(df, pd.DataFrame) and list(df["step"]) == [0, 5] and list(df.columns[:2]) == ["step", "epoch"]


def test_example_trains_and_tracks(tmp_path):
    pytest.importorskip("sklearn")
    import importlib.util

    spec = importlib.util.spec_from_file_location("track_training", ROOT / "examples" / "track_training.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    threads = torch.get_num_threads()
    try:
        recs = mod.main(tmp_path)
    finally:
        torch.set_num_threads(threads)  # the example sets one thread for its tiny MLP
    assert [r["step"] for r in recs] == list(range(0, 301, 50))
    assert read_records(tmp_path / "track.jsonl") == recs
    # 80 probe rows and one output: rank Gamma <= 80 < dim = 225 (12*11 + 8*13 + 9 - 20), so never identifiable
    assert all(r["dim"] == 225 and r["verdict"] == "not-identifiable" and r["rank_gamma"] <= 80 for r in recs)
    assert recs[-1]["dead_units"] > recs[0]["dead_units"]  # units die at this learning rate


def test_the_background_worker_writes_nothing_to_the_parents_streams(tmp_path, monkeypatch, capfd):
    """Forked from a Jupyter kernel, a worker writing to the kernel's streams makes ipykernel log every message
    ("attempted to send message from fork"): the worker's streams are closed to it.  A point that prints (as
    a library's warning would) reaches neither the parent's stdout nor its stderr, and its record arrives."""
    import exactident.track.core as core

    real = core.point_record

    def noisy(*args, **kwargs):
        print("LEAK from the worker")
        print("LEAK on stderr", file=sys.stderr)
        return real(*args, **kwargs)

    monkeypatch.setattr(core, "point_record", noisy)  # the worker is forked after this: it runs noisy
    rng = np.random.default_rng(5)
    W, b = [rng.standard_normal((3, 2)), rng.standard_normal((1, 3))], [rng.standard_normal(3), rng.standard_normal(1)]
    X = rng.standard_normal((8, 2))
    capfd.readouterr()
    with Tracker(weights=lambda: (W, b), X=X, every=1, background=True) as tracker:
        tracker.step(0)
    out, err = capfd.readouterr()
    assert "LEAK" not in out and "LEAK" not in err, (out, err)
    assert [r["step"] for r in tracker.records] == [0] and tracker.records[0]["verdict"] != "error"
