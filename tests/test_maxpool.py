"""Max pooling (``maxpool1d``/``maxpool2d``): compiled forward, ties, verdicts, bad input.

The truth here is independent of exactident's compiler and engine: an exact ``Fraction``
forward pass written below from the PyTorch/ONNX definition (a padded position never wins;
``floor`` or ``ceil`` of ``(n + begin + end - dilation (k - 1) - 1) / s`` plus one windows, a
``ceil`` window that would start in the end padding dropped), carried with forward-mode
derivatives in the parameters for the Jacobian, whose rank is taken by Fraction elimination.
``dim_free`` of conv -> ReLU -> max pooling -> linear is derived by hand: one positive rescaling
per convolution channel (its kernel and bias times ``t``, the linear weights reading the channel
divided by ``t``; a max commutes with a positive scale), nothing else, so ``dim_free = k - C``.
"""

from __future__ import annotations

import copy
import itertools
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from _importers import bad_input_error

from exactident.check import check
from exactident.errors import CaseFormatError
from exactident.io.case import Case, parse_case
from exactident.model.architecture import Architecture, Layer, exact_array
from exactident.model.compile import compile_architecture
from exactident.model.network import pre_activations

RNG = np.random.default_rng(32)


# ----------------------------------------------------------------------- an exact reference, with derivatives
class D:
    """A value with its gradient in the parameters (forward mode, Fractions)."""

    def __init__(self, v, g=None):
        self.v, self.g = Fraction(v), g or {}

    def __add__(self, o):
        g = dict(self.g)
        for j, x in o.g.items():
            g[j] = g.get(j, 0) + x
        return D(self.v + o.v, g)

    def __mul__(self, o):
        g = {j: x * o.v for j, x in self.g.items()}
        for j, x in o.g.items():
            g[j] = g.get(j, 0) + x * self.v
        return D(self.v * o.v, g)


def _out_size(n, k, s, begin, end, dil, ceil):
    span = n + begin + end - dil * (k - 1) - 1
    m = (-(-span // s) if ceil else span // s) + 1
    if ceil and (m - 1) * s >= n + begin:
        m -= 1
    return m


def _maxpool(x, pool, pick=None):
    """``x``: dict channel-first index tuple -> D, shape ``(C, *spatial)``; ``pick(window)``: the winner on a tie."""
    shape, k, s, begin, end, dil, ceil = pool
    d = len(shape) - 1
    sizes = [_out_size(shape[1 + a], k[a], s[a], begin[a], end[a], dil[a], ceil) for a in range(d)]
    out = {}
    for c in range(shape[0]):
        for pos in itertools.product(*(range(m) for m in sizes)):
            axes = [[p * s[a] - begin[a] + j * dil[a] for j in range(k[a])
                     if 0 <= p * s[a] - begin[a] + j * dil[a] < shape[1 + a]] for a, p in enumerate(pos)]
            window = [x[(c, *at)] for at in itertools.product(*axes)]
            top = max(e.v for e in window)
            winners = [e for e in window if e.v == top]
            out[(c, *pos)] = winners[0] if len(winners) == 1 or pick is None else pick(window, winners)
    return out, (shape[0], *sizes)


def _forward(net, x, params=False, pick=None):
    """The net of :func:`_net` on one sample ``x`` (flat Fractions): outputs as D (gradients when ``params``)."""
    shape, W, b, act, pool, V, c = net["input_shape"], net["W"], net["b"], net["act"], net["pool"], net["V"], net["c"]
    idx = itertools.count()

    def var(v):
        return D(v, {next(idx): Fraction(1)}) if params else D(v)

    Wd = {i: var(v) for i, v in np.ndenumerate(W)}
    bd = [var(v) for v in b]
    Vd = {i: var(v) for i, v in np.ndenumerate(V)}
    cd = [var(v) for v in c]
    X = np.array(x, dtype=object).reshape(shape)
    ks = W.shape[2:]
    conv_shape = (W.shape[0], *(n - k + 1 for n, k in zip(shape[1:], ks)))
    h = {}
    for o, *pos in itertools.product(*(range(n) for n in conv_shape)):
        z = bd[o]
        for i, *off in itertools.product(range(W.shape[1]), *(range(k) for k in ks)):
            z = z + Wd[(o, i, *off)] * D(X[(i, *(p + q for p, q in zip(pos, off)))])
        if act == "relu" and z.v <= 0:  # ReLU: 0 and derivative 0 on z <= 0 (no sample ties here)
            z = D(0)
        h[(o, *pos)] = z
    pooled, pshape = _maxpool(h, (conv_shape, *pool), pick)
    flat = [pooled[i] for i in itertools.product(*(range(n) for n in pshape))]
    outs = []
    for r in range(V.shape[0]):
        y = cd[r]
        for j, e in enumerate(flat):
            y = y + Vd[(r, j)] * e
        outs.append(y)
    return outs


def _rank(rows):
    M = [list(r) for r in rows]
    rank, col, ncols = 0, 0, len(M[0]) if M else 0
    while rank < len(M) and col < ncols:
        p = next((i for i in range(rank, len(M)) if M[i][col] != 0), None)
        if p is None:
            col += 1
            continue
        M[rank], M[p] = M[p], M[rank]
        for i in range(len(M)):
            if i != rank and M[i][col] != 0:
                f = M[i][col] / M[rank][col]
                M[i] = [a - f * b_ for a, b_ in zip(M[i], M[rank])]
        rank, col = rank + 1, col + 1
    return rank


def _jacobian_rank(net, X, n_params, pick=None):
    rows = [[y.g.get(j, Fraction(0)) for j in range(n_params)] for x in X for y in _forward(net, x, True, pick)]
    return _rank(rows)


def _fr(rng, shape, den=4):
    return np.vectorize(lambda v: Fraction(int(v), den), otypes=[object])(rng.integers(-3 * den, 3 * den + 1, shape))


def _net(rng, input_shape, channels, kernel, act, pool, n_out=1):
    """conv (stride 1, no padding) -> act -> max pooling -> flatten -> linear, random rational parameters."""
    W = _fr(rng, (channels, input_shape[0], *kernel))
    while any(w == 0 for w in W.ravel()):
        W = _fr(rng, W.shape)
    conv_shape = (channels, *(n - k + 1 for n, k in zip(input_shape[1:], kernel)))
    k, s, begin, end, dil, ceil = pool
    sizes = [_out_size(conv_shape[1 + a], k[a], s[a], begin[a], end[a], dil[a], ceil) for a in range(len(k))]
    n_flat = channels * int(np.prod(sizes))
    return {"input_shape": input_shape, "W": W, "b": _fr(rng, (channels,)), "act": act, "pool": pool,
            "V": _fr(rng, (n_out, n_flat)), "c": _fr(rng, (n_out,))}


def _arch(net):
    d = len(net["input_shape"]) - 1
    k, s, begin, end, dil, ceil = net["pool"]
    layers = [Layer("conv", f"conv{d}d", ("input",), exact_array(net["W"]), exact_array(net["b"]))]
    src = "conv"
    if net["act"] == "relu":
        layers.append(Layer("act", "relu", ("conv",)))
        src = "act"
    layers += [Layer("pool", f"maxpool{d}d", (src,), kernel_size=tuple(k), stride=tuple(s),
                     padding=tuple(begin) + tuple(end), dilation=tuple(dil), ceil_mode=ceil),
               Layer("flat", "flatten", ("pool",)),
               Layer("fc", "linear", ("flat",), exact_array(net["V"]), exact_array(net["c"]))]
    return Architecture(tuple(net["input_shape"]), layers, "fc")


# pools: (kernel, stride, pad begin, pad end, dilation, ceil_mode)
POOLS_1D = [((3,), (2,), (1,), (1,), (1,), False), ((4,), (1,), (0,), (0,), (1,), False),
            ((3,), (3,), (0,), (0,), (1,), True), ((3,), (2,), (1,), (1,), (2,), True),
            ((2,), (2,), (0,), (1,), (1,), False), ((4,), (3,), (2,), (0,), (1,), False)]
POOLS_2D = [((2, 2), (1, 1), (0, 0), (0, 0), (1, 1), False), ((3, 2), (2, 1), (1, 0), (1, 0), (1, 1), False),
            ((2, 2), (2, 2), (0, 0), (1, 1), (1, 1), False), ((2, 3), (2, 2), (0, 1), (0, 1), (1, 1), True),
            ((2, 2), (1, 2), (0, 0), (0, 0), (2, 1), False)]


@pytest.mark.parametrize("act", ["relu", None])
@pytest.mark.parametrize("pool", POOLS_1D + POOLS_2D)
def test_compiled_forward_is_the_exact_max_pool(pool, act):
    rng = np.random.default_rng(sum(map(ord, f"{pool}{act}")))
    input_shape = (2, 9) if len(pool[0]) == 1 else (1, 6, 6)
    kernel = (2,) if len(pool[0]) == 1 else (2, 2)
    net = _net(rng, input_shape, 2, kernel, act, pool, n_out=2)
    cn = compile_architecture(_arch(net))
    assert "max pooling" in cn.features
    # the compiled pairwise maxima use linear units and carry b up, but the architecture (conv, act, pool,
    # linear) has no skip and no linear layer of its own: the features describe the user's network
    assert "skip connection" not in cn.features and "linear layer" not in cn.features, cn.features
    X = [list(_fr(rng, (int(np.prod(input_shape)),), den=3)) for _ in range(4)]
    X.append([Fraction(1)] * int(np.prod(input_shape)))  # a constant input: every window a tie of its inputs
    got = pre_activations(cn, X)[-1]
    for i, x in enumerate(X):
        want = [y.v for y in _forward(net, x)]
        assert [Fraction(int(got[i, j].p), int(got[i, j].q)) for j in range(got.ncols())] == want


def test_every_pair_unit_has_fixed_weights_and_no_new_parameter():
    net = _net(np.random.default_rng(1), (1, 8), 1, (2,), "relu", ((4,), (2,), (0,), (0,), (1,), False))
    cn = compile_architecture(_arch(net))
    assert cn.n_params == net["W"].size + 1 + net["V"].size + 1  # the convolution's and the linear's only
    pair_units = [(l, v) for l in range(1, cn.L) for v in range(cn.widths[l])
                  if ">" in cn.unit_name(l, v) and not cn.is_carrier(l, v)]
    # windows {0..3}, {2..5}: pairs (0,1), (2,3), (4,5) (shared (2,3)), then their two maxima: 5 units
    assert len(pair_units) == 5
    for l, v in pair_units:
        assert all(int(i) < 0 for i in cn.W_index[l - 1][v]) and int(cn.b_index[l - 1][v]) < 0
        assert cn.kinked(l)[v] and cn.negative_slope[l - 1][v] == 0
        assert sorted(cn.W[l - 1][v, j] for j in range(cn.widths[l - 1]) if cn.W[l - 1][v, j] != 0)[0] == -1


def _case(net, X):
    return Case.from_architecture(_arch(net), X, name="maxpool")


def test_a_tie_inside_a_window_is_on_boundary_with_both_resolutions():
    """conv (weight 2, bias 1) -> ReLU -> max over windows of 2: the sample's first window holds 3, 3."""
    net = {"input_shape": (1, 4), "W": np.array([[[Fraction(2)]]], dtype=object), "b": np.array([Fraction(1)],
                                                                                                dtype=object),
           "act": "relu", "pool": ((2,), (2,), (0,), (0,), (1,), False),
           "V": np.array([[Fraction(1), Fraction(-2)]], dtype=object), "c": np.array([Fraction(1, 2)], dtype=object)}
    X = [[Fraction(v) for v in row] for row in ([1, 1, 2, 0], [3, -1, 0, 2], [1, 2, 5, 1], [-1, 0, 2, 3],
                                                [2, 1, 1, 4], [0, 3, 4, 2], [-2, -3, 1, 0], [0, 1, -2, -4])]
    r = check(_case(net, X), numeric=False, exact_ranks=True)
    assert r.on_boundary and r.n_ties == 1
    tie = r.patterns[0]["ties"][0]
    assert (tie["sample"], tie["layer"]) == (0, 2)
    cn = _case(net, X).compiled
    assert cn.unit_name(tie["layer"], tie["neuron"]) == "pool[c=0,x=0>x=1]"
    assert len(r.patterns) == 2 and {p["ties"][0]["active"] for p in r.patterns} == {True, False}
    n_params = 5  # conv weight and bias, two linear weights and a bias
    for p in r.patterns:
        first = p["ties"][0]["active"]  # active: the first position wins (the pair unit relu(a - b) passes a - b)
        want = _jacobian_rank(net, X, n_params, pick=lambda window, winners, first=first: window[0 if first else 1])
        assert p["rank_gamma"] == want
    assert r.dim == n_params - 1  # one channel: one rescaling
    assert (r.verdict == "identifiable") == all(p["rank_gamma"] == r.dim for p in r.patterns)
    assert r.verdict == "identifiable"  # dead windows in the last two samples: the oracle's rank is 4 both ways


def _no_ties(net, X):
    """No conv pre-activation at 0 and no two equal pre-activations in any window (exact values): then
    neither the pooled values (ReLU or not) nor any pairwise maximum of them tie."""
    for x in X:
        shape, W, b = net["input_shape"], net["W"], net["b"]
        Xa = np.array(x, dtype=object).reshape(shape)
        ks = W.shape[2:]
        conv_shape = (W.shape[0], *(n - k + 1 for n, k in zip(shape[1:], ks)))
        h = {}
        for o, *pos in itertools.product(*(range(n) for n in conv_shape)):
            z = b[o] + sum(W[(o, i, *off)] * Xa[(i, *(p + q for p, q in zip(pos, off)))]
                           for i, *off in itertools.product(range(W.shape[1]), *(range(k) for k in ks)))
            if z == 0:
                return False
            h[(o, *pos)] = D(z)
        d = len(shape) - 1
        k, s, begin, _end, dil, _ceil = net["pool"]
        _, pshape = _maxpool(h, (conv_shape, *net["pool"]))
        for c, *pos in itertools.product(*(range(n) for n in pshape)):
            axes = [[p * s[a] - begin[a] + j * dil[a] for j in range(k[a])
                     if 0 <= p * s[a] - begin[a] + j * dil[a] < conv_shape[1 + a]] for a, p in enumerate(pos)]
            values = [h[(c, *at)].v for at in itertools.product(*axes)]
            if len(set(values)) < len(values) or d < 1:
                return False
    return True


@pytest.mark.parametrize("input_shape, kernel, pool", [
    ((1, 7), (2,), ((3,), (2,), (0,), (0,), (1,), False)),
    ((1, 4, 4), (2, 2), ((2, 2), (1, 1), (0, 0), (0, 0), (1, 1), False)),
])
def test_verdict_is_the_independent_jacobian_rank_against_k_minus_channels(input_shape, kernel, pool):
    rng = np.random.default_rng(7)
    channels = 2 if len(input_shape) == 2 else 1
    net = _net(rng, input_shape, channels, kernel, "relu", pool)
    n_params = net["W"].size + channels + net["V"].size + 1
    while True:
        X = [list(_fr(rng, (int(np.prod(input_shape)),), den=2)) for _ in range(n_params + 3)]
        if _no_ties(net, X):
            break
    for n in (3, len(X)):
        r = check(_case(net, X[:n]), numeric=False, exact_ranks=True)
        rank = _jacobian_rank(net, X[:n], n_params)
        assert r.dim == n_params - channels and not r.on_boundary
        assert r.rank_gamma == rank
        assert (r.verdict == "identifiable") == (rank == n_params - channels)
    assert rank == n_params - channels  # generic data, enough points: the full rank (the oracle's count)


# ----------------------------------------------------------------------- bad input, one line naming the field
ROOT = Path(__file__).resolve().parent.parent
GOOD = {"format": "exactident-case/2", "name": "mp", "input_shape": [1, 5], "layers": [
    {"name": "conv", "op": "conv1d", "inputs": ["input"], "weight": [[["1", "-1"]]], "bias": ["0"]},
    {"name": "pool", "op": "maxpool1d", "inputs": ["conv"], "kernel_size": [2], "stride": [1]},
    {"name": "flat", "op": "flatten", "inputs": ["pool"]},
    {"name": "fc", "op": "linear", "inputs": ["flat"], "weight": [["1", "2", "3"]], "bias": ["0"]}],
    "output": "fc", "sample": [["1", "2", "3", "4", "6"]]}


def _bad(key, value):
    obj = copy.deepcopy(GOOD)
    obj["layers"][1][key] = value
    return obj


BAD = [
    (_bad("dilation", [0]), "layers[1].dilation[0]", "expected a positive integer"),
    (_bad("dilation", [1, 1]), "layers[1].dilation", "expected 1 entries"),
    (_bad("padding", [0, 0, 0]), "layers[1].padding", "expected 1 entries (both sides) or 2 (begins, then ends)"),
    (_bad("padding", [-1]), "layers[1].padding[0]", "expected a non-negative integer"),
    (_bad("padding", [2, 0]), "layers[1].padding", "window 0 along axis 0 holds only padding"),
    (_bad("ceil_mode", 1), "layers[1].ceil_mode", "expected true or false"),
    (_bad("ceil_mode", "yes"), "layers[1].ceil_mode", "expected true or false"),
    (_bad("kernel_size", [9]), "layers[1].kernel_size", "larger than the padded input"),
    (_bad("kernel_size", [0]), "layers[1].kernel_size[0]", "expected a positive integer"),
    (_bad("stride", [0]), "layers[1].stride[0]", "expected a positive integer"),
    (_bad("weight", [["1"]]), "layers[1].weight", "unknown field for maxpool1d"),
]


@pytest.mark.parametrize("obj, field, words", BAD, ids=[f"{f}-{i}" for i, (_, f, _) in enumerate(BAD)])
def test_bad_maxpool_fields_one_line(obj, field, words):
    with pytest.raises(CaseFormatError) as err:
        parse_case(obj, "bad.json")
    assert (err.value.source, err.value.field) == ("bad.json", field)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_dilation_and_ceil_mode_belong_to_max_pooling_only():
    for op, key, value in (("avgpool1d", "dilation", [2]), ("avgpool1d", "ceil_mode", True),
                           ("conv1d", "ceil_mode", False)):
        obj = copy.deepcopy(GOOD)
        layer = obj["layers"][1] if op == "avgpool1d" else obj["layers"][0]
        if op == "avgpool1d":
            layer["op"] = op
        layer[key] = value
        with pytest.raises(CaseFormatError, match=f"unknown field for {op}"):
            parse_case(obj, "bad.json")
    with pytest.raises(CaseFormatError, match=r"layers\[0\]\.dilation.*not a field of avgpool1d"):
        Architecture((1, 4), [Layer("p", "avgpool1d", ("input",), kernel_size=(2,), dilation=(1,))], "p")


def test_cli_bad_maxpool_field_exit_2(tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_bad("dilation", [0])))
    err = bad_input_error(capsys, ["check", str(path)])
    assert "bad.json" in err and "layers[1].dilation[0]" in err


def test_round_trip_keeps_every_field():
    from exactident.io.case import dump_case

    obj = _bad("padding", [1, 0])
    obj["layers"][1].update(dilation=[2], ceil_mode=True, kernel_size=[2], stride=[2])
    obj["layers"][3]["weight"] = [["1", "2"]]  # windows {1} (the padded position left out) and {1, 3}
    case = parse_case(obj, "mp.json")
    back = json.loads(dump_case(case))
    assert {k: back["layers"][1][k] for k in ("kernel_size", "stride", "padding", "dilation", "ceil_mode")} == \
        {"kernel_size": [2], "stride": [2], "padding": [1, 0], "dilation": [2], "ceil_mode": True}
    assert parse_case(back, "mp.json").architecture == case.architecture


def test_dead_relu_outputs_in_a_window_are_no_tie():
    """conv (weight 1, bias -10) -> ReLU -> max over pairs, on inputs in [0, 4]: every ReLU output is 0 (dead), so
    each window compares 0 with 0; near theta both stay 0, no kink of the network, and the compiled network
    (the ReLU applied after the max of the distinct pre-activations) has no tie at all."""
    net = {"input_shape": (1, 4), "W": np.array([[[Fraction(1)]]], dtype=object),
           "b": np.array([Fraction(-10)], dtype=object), "act": "relu", "pool": ((2,), (2,), (0,), (0,), (1,), False),
           "V": np.array([[Fraction(1), Fraction(1)]], dtype=object), "c": np.array([Fraction(0)], dtype=object)}
    X = [[Fraction(v) for v in row] for row in ([0, 1, 2, 3], [4, 3, 2, 1], [1, 3, 0, 2])]
    case = _case(net, X)
    r = check(case, numeric=False)
    assert not r.on_boundary and r.n_ties == 0
    assert [y.v for x in X for y in _forward(net, x)] == [0, 0, 0]
    Z = pre_activations(case.compiled, X)[-1]
    assert [Z[i, 0] for i in range(3)] == [0, 0, 0]
