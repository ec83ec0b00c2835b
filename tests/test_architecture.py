"""Architecture graphs and their compilation to the constrained layered form.

The compiled exact forward pass is compared with an independent float64 implementation of
each op written here (direct loops for convolution and pooling, as the frameworks define
them), on random exact parameters; small cases are derived by hand.
"""

from fractions import Fraction

import flint
import numpy as np
import pytest

from exactident.errors import CaseFormatError
from exactident.model.architecture import Architecture, Layer, exact_array
from exactident.model.compile import as_plain_network, compile_architecture
from exactident.model.network import pre_activations

# ---------------------------------------------------------------- the float64 reference


def _f(a):
    return np.vectorize(lambda v: float(Fraction(int(v.p), int(v.q))), otypes=[float])(a)


def _pad(x, pad):
    return np.pad(x, [(0, 0)] + [(p, p) for p in pad])


def _conv(x, w, b, stride, pad):
    xp = _pad(x, pad)
    ks = w.shape[2:]
    outs = [(xp.shape[1 + a] - ks[a]) // stride[a] + 1 for a in range(len(ks))]
    y = np.zeros((w.shape[0], *outs))
    for o in range(w.shape[0]):
        for pos in np.ndindex(*outs):
            acc = 0.0 if b is None else b[o]
            for i in range(w.shape[1]):
                for off in np.ndindex(*ks):
                    at = tuple(p * s + k for p, s, k in zip(pos, stride, off))
                    acc += w[(o, i, *off)] * xp[(i, *at)]
            y[(o, *pos)] = acc
    return y


def _avgpool(x, ks, stride, pad):
    xp = _pad(x, pad)
    outs = [(xp.shape[1 + a] - ks[a]) // stride[a] + 1 for a in range(len(ks))]
    y = np.zeros((x.shape[0], *outs))
    for c in range(x.shape[0]):
        for pos in np.ndindex(*outs):
            window = [xp[(c, *(p * s + k for p, s, k in zip(pos, stride, off)))] for off in np.ndindex(*ks)]
            y[(c, *pos)] = sum(window) / len(window)  # zero padding counted in the divisor
    return y


def reference_forward(arch: Architecture, x: np.ndarray) -> np.ndarray:
    env = {"input": x.reshape(arch.input_shape)}
    for layer in arch.layers:
        ins = [env[s] for s in layer.inputs]
        a = ins[0]
        w = None if layer.weight is None else _f(layer.weight)
        b = None if layer.bias is None else _f(layer.bias)
        if layer.op == "linear":
            y = w @ a + (0 if b is None else b)
        elif layer.op in ("conv1d", "conv2d"):
            y = _conv(a, w, b, layer.stride, layer.padding)
        elif layer.op in ("avgpool1d", "avgpool2d"):
            y = _avgpool(a, layer.kernel_size, layer.stride, layer.padding)
        elif layer.op == "relu":
            y = np.maximum(a, 0)
        elif layer.op == "leaky_relu":
            y = np.where(a >= 0, a, float(Fraction(str(layer.negative_slope))) * a)
        elif layer.op == "prelu":
            slope = w if a.ndim == 1 else w.reshape(-1, *([1] * (a.ndim - 1)))
            y = np.where(a >= 0, a, slope * a)
        elif layer.op == "flatten":
            y = a.reshape(-1)
        elif layer.op == "add":
            y = sum(ins)
        else:
            y = a
        env[layer.name] = y
    return env[arch.output].reshape(-1)


# ---------------------------------------------------------------- random exact architectures


def _rand(rng, shape, den=8):
    return exact_array(np.vectorize(lambda v: Fraction(int(v), den), otypes=[object])(
        rng.integers(-2 * den, 2 * den + 1, size=shape)))


def _lin(rng, name, src, n_out, n_in, bias=True):
    return Layer(name, "linear", (src,), _rand(rng, (n_out, n_in)), _rand(rng, (n_out,)) if bias else None)


def _architectures(rng):
    yield "leaky-mlp", Architecture((3,), [
        _lin(rng, "fc1", "input", 4, 3), Layer("a1", "leaky_relu", ("fc1",), negative_slope=flint.fmpq(1, 100)),
        _lin(rng, "fc2", "a1", 2, 4)], "fc2")
    yield "prelu-mlp", Architecture((3,), [
        _lin(rng, "fc1", "input", 4, 3), Layer("p1", "prelu", ("fc1",), weight=_rand(rng, (4,))),
        _lin(rng, "fc2", "p1", 3, 4), Layer("p2", "prelu", ("fc2",), weight=_rand(rng, (1,))),
        _lin(rng, "fc3", "p2", 2, 3, bias=False)], "fc3")
    yield "residual", Architecture((3,), [
        _lin(rng, "fc1", "input", 3, 3), Layer("r1", "relu", ("fc1",)), _lin(rng, "fc2", "r1", 3, 3),
        Layer("s1", "add", ("fc2", "input")), Layer("r2", "relu", ("s1",)), _lin(rng, "fc3", "r2", 3, 3),
        Layer("r3", "relu", ("fc3",)), _lin(rng, "fc4", "r3", 3, 3),
        Layer("s2", "add", ("fc4", "s1", "input")), _lin(rng, "head", "s2", 2, 3)], "head")
    yield "conv1d-pool", Architecture((2, 7), [
        Layer("conv1", "conv1d", ("input",), _rand(rng, (3, 2, 3)), _rand(rng, (3,)), stride=(1,), padding=(1,)),
        Layer("r1", "relu", ("conv1",)),
        Layer("pool", "avgpool1d", ("r1",), kernel_size=(2,), stride=(2,), padding=(1,)),
        Layer("flat", "flatten", ("pool",)), _lin(rng, "fc", "flat", 2, 12)], "fc")
    yield "conv2d-stride", Architecture((2, 5, 4), [
        Layer("conv1", "conv2d", ("input",), _rand(rng, (3, 2, 3, 2)), None, stride=(2, 1), padding=(1, 1)),
        Layer("p1", "prelu", ("conv1",), weight=_rand(rng, (3,))),
        Layer("pool", "avgpool2d", ("p1",), kernel_size=(2, 3), stride=(1, 2), padding=(1, 1)),
        Layer("conv2", "conv2d", ("pool",), _rand(rng, (2, 3, 2, 2)), _rand(rng, (2,))),
        Layer("drop", "identity", ("conv2",)), Layer("flat", "flatten", ("drop",)),
        Layer("r", "relu", ("flat",)), _lin(rng, "fc", "r", 2, 12)], "fc")
    yield "affine-skip", Architecture((3,), [
        _lin(rng, "fc1", "input", 3, 3), Layer("s", "add", ("fc1", "input")), Layer("r", "relu", ("s",)),
        _lin(rng, "fc2", "r", 3, 3), Layer("s2", "add", ("input", "fc2", "fc2")), _lin(rng, "head", "s2", 1, 3)],
        "head")
    yield "relu-on-input-and-linear-chain", Architecture((2,), [
        Layer("r0", "relu", ("input",)), _lin(rng, "fc1", "r0", 3, 2), _lin(rng, "fc2", "fc1", 2, 3),
        Layer("r2", "leaky_relu", ("fc2",), negative_slope=flint.fmpq(1, 4))], "r2")


@pytest.mark.parametrize("seed", range(3))
def test_compiled_forward_matches_float_reference(seed):
    rng = np.random.default_rng(seed)
    for label, arch in _architectures(rng):
        cn = compile_architecture(arch)
        X = [[flint.fmpq(int(v), 4) for v in rng.integers(-8, 9, size=arch.n_inputs)] for _ in range(5)]
        exact = pre_activations(cn, X)[-1]
        got = _f(np.array(exact.entries(), dtype=object)).reshape(len(X), -1)
        want = np.array([reference_forward(arch, _f(np.array(x, dtype=object))) for x in X])
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=label)
        assert cn.widths[0] == arch.n_inputs and cn.widths[-1] == len(want[0])


def _residual_1d():
    """``x + w2 relu(w1 x + b1)`` with w1 = 2, b1 = 1, w2 = 3 and fc2's bias 5."""
    return Architecture((1,), [
        Layer("fc1", "linear", ("input",), exact_array([[2]]), exact_array([1])),
        Layer("act", "relu", ("fc1",)),
        Layer("fc2", "linear", ("act",), exact_array([[3]]), exact_array([5])),
        Layer("sum", "add", ("fc2", "input"))], "sum")


def test_residual_by_hand():
    cn = compile_architecture(_residual_1d())
    # layer 1: the ReLU unit 2x + 1 and a carrier of x (slope 1, weight fixed 1, bias fixed 0)
    assert cn.widths == (1, 2, 1)
    assert cn.W[0].entries() == [2, 1] and cn.b[0] == [1, 0]
    assert cn.W_index[0].tolist() == [[0], [-1]] and cn.b_index[0].tolist() == [1, -1]
    assert cn.negative_slope[0] == [0, 1] and cn.slope_index[0].tolist() == [-1, -1]
    assert cn.kinked(1).tolist() == [True, False]
    # layer 2: 3 relu(.) + 1 * carrier + 5
    assert cn.W[1].entries() == [3, 1] and cn.W_index[1].tolist() == [[2, -1]] and cn.b_index[1].tolist() == [3]
    assert cn.param_names == ["fc1.weight[0,0]", "fc1.bias[0]", "fc2.weight[0,0]", "fc2.bias[0]"]
    assert cn.features == ("skip connection",)
    # f(x) = x + 3 relu(2x + 1) + 5: at x = -1: -1 + 0 + 5 = 4; at x = 1: 1 + 9 + 5 = 15
    assert pre_activations(cn, [[-1], [1]])[-1].entries() == [4, 15]


def test_skip_over_two_layers_is_carried_by_a_chain():
    one = exact_array([[1]])
    arch = Architecture((1,), [
        Layer("fc1", "linear", ("input",), one, exact_array([0])), Layer("r1", "relu", ("fc1",)),
        Layer("fc2", "linear", ("r1",), one, exact_array([0])), Layer("r2", "relu", ("fc2",)),
        Layer("fc3", "linear", ("r2",), one, exact_array([0])),
        Layer("sum", "add", ("fc3", "input"))], "sum")
    cn = compile_architecture(arch)
    assert cn.widths == (1, 2, 2, 1)
    assert cn.unit_names == [["fc1[0]", "skip(input[0])"], ["fc2[0]", "skip(input[0])"], ["sum[0]"]]
    assert cn.W_index[1][1].tolist() == [-1, -1] and cn.W[1][1, 1] == 1 and cn.W[1][1, 0] == 0


def test_conv_equals_dense_with_ties():
    """1 channel, 3 pixels, kernel (a, b), bias c, stride 1, no padding: two outputs."""
    arch = Architecture((1, 3), [Layer("conv", "conv1d", ("input",), exact_array([[[5, 7]]]),
                                       exact_array([-1]))], "conv")
    cn = compile_architecture(arch)
    assert cn.widths == (3, 2)
    assert cn.W_index[0].tolist() == [[0, 1, -1], [-1, 0, 1]] and cn.b_index[0].tolist() == [2, 2]
    assert cn.W[0].entries() == [5, 7, 0, 0, 5, 7]
    assert cn.param_names == ["conv.weight[0,0,0]", "conv.weight[0,0,1]", "conv.bias[0]"]
    assert cn.unit_names == [["conv[c=0,x=0]", "conv[c=0,x=1]"]]
    # with stride 2 and padding 1: windows (pad, x0), (x1, x2)
    arch = Architecture((1, 3), [Layer("conv", "conv1d", ("input",), exact_array([[[5, 7]]]), None,
                                       stride=(2,), padding=(1,))], "conv")
    cn = compile_architecture(arch)
    assert cn.W_index[0].tolist() == [[1, -1, -1], [-1, 0, 1]] and cn.b_index[0].tolist() == [-1, -1]
    assert cn.features == ("convolution", "fixed weights")


def test_pooling_counts_padding_and_a_kernel_entry_on_padding_only_is_dropped():
    arch = Architecture((1, 2), [Layer("pool", "avgpool1d", ("input",), kernel_size=(2,), stride=(2,),
                                       padding=(1,)), Layer("r", "relu", ("pool",))], "r")
    cn = compile_architecture(arch)
    # windows (pad, x0) and (x1, pad): weight 1/2 each (the pad counted), no parameter
    assert cn.n_params == 0 and cn.W[0].entries() == [flint.fmpq(1, 2), 0, 0, flint.fmpq(1, 2)]
    arch = Architecture((1, 1), [Layer("conv", "conv1d", ("input",), exact_array([[[2, 3, 4]]]),
                                       exact_array([0]), padding=(1,))], "conv")
    cn = compile_architecture(arch)
    assert cn.param_names == ["conv.weight[0,0,1]", "conv.bias[0]"]


def test_plain_mlp_is_the_plain_network_in_the_plain_order():
    rng = np.random.default_rng(7)
    arch = Architecture((3,), [_lin(rng, "fc1", "input", 4, 3), Layer("r", "relu", ("fc1",)),
                               Layer("d", "identity", ("r",)), _lin(rng, "fc2", "d", 2, 4)], "fc2")
    net = as_plain_network(arch)
    assert net is not None and net.widths == (3, 4, 2)
    cn = compile_architecture(arch)
    # the plain order (T = I): W_1 row-major (0..11), b_1 (12..15), W_2 row-major (16..23), b_2 (24, 25)
    assert [I.tolist() for I in cn.W_index] == [[[3 * i + j for j in range(3)] for i in range(4)],
                                                [[16 + 4 * i + j for j in range(4)] for i in range(2)]]
    assert [I.tolist() for I in cn.b_index] == [[12, 13, 14, 15], [24, 25]]
    assert cn.is_plain() and cn.n_params == 26 == net.dim + 4  # dim counts one fixed edge per hidden neuron
    assert cn.param_names[:2] == ["fc1.weight[0,0]", "fc1.weight[0,1]"] and cn.param_names[12] == "fc1.bias[0]"
    # no bias, a leaky slope, a final ReLU: not plain
    for layers in ([_lin(rng, "fc1", "input", 2, 3, bias=False)],
                   [_lin(rng, "fc1", "input", 2, 3), Layer("r", "relu", ("fc1",))]):
        assert as_plain_network(Architecture((3,), layers, layers[-1].name)) is None


@pytest.mark.parametrize("build, field, words", [
    (lambda: Architecture((2,), [Layer("fc", "linear", ("input",), exact_array([[1, 2, 3]]), None)], "fc"),
     "layers[0].weight", "expected rows of 2"),
    (lambda: Architecture((2,), [Layer("fc", "linear", ("inp",), exact_array([[1, 2]]), None)], "fc"),
     "layers[0].inputs[0]", "not 'input' or an earlier layer"),
    (lambda: Architecture((2,), [Layer("fc", "maxpool", ("input",))], "fc"), "layers[0].op", "unknown op"),
    (lambda: Architecture((1, 2), [Layer("c", "conv1d", ("input",), exact_array([[[1, 1, 1, 1]]]), None)], "c"),
     "layers[0].kernel_size", "larger than the padded input"),
    (lambda: Architecture((2,), [Layer("fc", "linear", ("input",), exact_array([[1, 2]]), None),
                                 Layer("fc", "relu", ("fc",))], "fc"), "layers[1].name", "used twice"),
    (lambda: Architecture((2,), [Layer("a", "relu", ("input",)), Layer("b", "relu", ("input",))], "b"),
     "layers[0]", "does not feed the output"),
    (lambda: Architecture((2,), [Layer("s", "add", ("input",))], "s"), "layers[0].inputs", "two or more"),
    (lambda: Architecture((3,), [Layer("p", "prelu", ("input",), weight=exact_array([1, 2]))], "p"),
     "layers[0].weight", "1 or 3 slopes"),
    (lambda: Architecture((1, 4), [Layer("p", "avgpool1d", ("input",), kernel_size=(2,), padding=(2,))], "p"),
     "layers[0].padding", "more than half"),
    (lambda: Architecture((2,), [Layer("fc", "linear", ("input",), np.array([[0.5, 1]], dtype=object), None)],
                          "fc"), "layers[0].weight[0][0]", "expected an exact number"),
    (lambda: Architecture((1, 2), [Layer("fc", "linear", ("input",), exact_array([[1, 2]]), None)], "fc"),
     "layers[0].inputs[0]", "add a flatten"),
    (lambda: Architecture((0,), [Layer("r", "relu", ("input",))], "r"), "input_shape", "positive"),
])
def test_bad_architectures_one_line_errors(build, field, words):
    with pytest.raises(CaseFormatError) as err:
        build()
    assert err.value.field == field and words in err.value.message and "\n" not in str(err.value)


def test_features_of_an_activation_on_the_input_and_of_an_affine_chain():
    """relu(input) is a layer of units with fixed weight 1; fc2(fc1(.)) keeps fc1 as linear units."""
    arch = Architecture((2,), [
        Layer("r0", "relu", ("input",)),
        Layer("fc1", "linear", ("r0",), [[1, 2], [3, 4], [5, 6]], [0, 0, 1]),
        Layer("fc2", "linear", ("fc1",), [[Fraction(1, 2), 1, -1]], [2]),
        Layer("r2", "leaky_relu", ("fc2",), negative_slope=Fraction(1, 4))], "r2")
    cn = compile_architecture(arch)
    assert cn.widths == (2, 2, 3, 1, 1)
    assert cn.features == ("leaky ReLU", "linear layer", "fixed weights")
    assert cn.W[0].entries() == [1, 0, 0, 1] and cn.W_index[0].tolist() == [[-1, -1], [-1, -1]]
    assert cn.negative_slope[1] == [1, 1, 1] and cn.negative_slope[2] == [flint.fmpq(1, 4)]
    # the output layer reads the leaky unit with a fixed weight 1
    assert cn.W[3].entries() == [1] and cn.W_index[3].tolist() == [[-1]]
    # f(x) = leaky(1/2 (x1' + 2 x2') + (3 x1' + 4 x2') - (5 x1' + 6 x2' + 1) + 2), x' = relu(x)
    # at x = (1, -1): x' = (1, 0): 1/2 + 3 - 6 + 2 = -1/2, leaky: -1/8
    assert pre_activations(cn, [[1, -1]])[-1].entries() == [flint.fmpq(-1, 8)]


def _random_graph(rng, n_ops=7):
    """A random layer graph on a (2, 5) input: skips between any tensors of equal shape, then a head."""
    shapes = {"input": (2, 5)}
    layers = []
    for step in range(n_ops):
        name = f"l{step}"
        src = list(shapes)[rng.integers(len(shapes))]
        shape = shapes[src]
        kind = rng.choice(["act", "act", "linear", "conv", "pool", "add", "add", "flatten", "identity"])
        if kind == "act":
            op = rng.choice(["relu", "leaky_relu", "prelu"])
            extra = {"negative_slope": flint.fmpq(int(rng.integers(1, 4)), 8)} if op == "leaky_relu" else {}
            if op == "prelu":
                extra = {"weight": _rand(rng, (int(rng.choice([1, shape[0]])),))}
            layer = Layer(name, str(op), (src,), **extra)
        elif kind == "linear" and len(shape) == 1:
            layer = _lin(rng, name, src, int(rng.integers(1, 4)), shape[0], bias=bool(rng.integers(2)))
        elif kind == "conv" and len(shape) == 2:
            k, p = int(rng.integers(1, 4)), int(rng.integers(0, 2))
            if shape[1] + 2 * p < k:
                continue
            out = int(rng.integers(1, 3))
            layer = Layer(name, "conv1d", (src,), _rand(rng, (out, shape[0], k)),
                          _rand(rng, (out,)) if rng.integers(2) else None, stride=(int(rng.integers(1, 3)),),
                          padding=(p,))
        elif kind == "pool" and len(shape) == 2 and shape[1] >= 2:
            layer = Layer(name, "avgpool1d", (src,), kernel_size=(2,), stride=(int(rng.integers(1, 3)),),
                          padding=(int(rng.integers(0, 2)),))
        elif kind == "add":
            same = [t for t in shapes if shapes[t] == shape]
            layer = Layer(name, "add", (src, same[rng.integers(len(same))]))
        elif kind in ("flatten", "identity"):
            layer = Layer(name, str(kind), (src,))
        else:
            continue
        layers.append(layer)
        shapes[name] = _shape_of(layers)
    last = list(shapes)[-1]
    if len(shapes[last]) != 1:
        layers.append(Layer("flat", "flatten", (last,)))
        last, shapes["flat"] = "flat", (int(np.prod(shapes[last])),)
    layers.append(_lin(rng, "head", last, 2, shapes[last][0]))
    used = {"head"}
    for layer in reversed(layers):
        if layer.name in used:
            used.update(layer.inputs)
    return Architecture((2, 5), [layer for layer in layers if layer.name in used], "head")


def _shape_of(layers):
    """The last layer's shape, by validating the graph with the last layer as output (others pruned)."""
    used = {layers[-1].name}
    for layer in reversed(layers):
        if layer.name in used:
            used.update(layer.inputs)
    return Architecture((2, 5), [layer for layer in layers if layer.name in used], layers[-1].name).shapes[
        layers[-1].name]


@pytest.mark.parametrize("seed", range(4))
def test_random_graphs_compile_to_the_same_function(seed):
    rng = np.random.default_rng(100 + seed)
    for _ in range(12):
        arch = _random_graph(rng)
        cn = compile_architecture(arch)
        X = [[flint.fmpq(int(v), 4) for v in rng.integers(-8, 9, size=arch.n_inputs)] for _ in range(4)]
        got = _f(np.array(pre_activations(cn, X)[-1].entries(), dtype=object)).reshape(len(X), -1)
        want = np.array([reference_forward(arch, _f(np.array(x, dtype=object))) for x in X])
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=str([ly.op for ly in arch.layers]))
        for l in range(1, cn.L):  # carriers are linear units with one fixed weight 1 and bias 0
            for v, name in enumerate(cn.unit_names[l - 1]):
                if name.startswith("skip("):
                    assert cn.negative_slope[l - 1][v] == 1 and cn.b_index[l - 1][v] == -1
                    assert sorted(cn.W[l - 1].table()[v])[-1] == 1 and (cn.W_index[l - 1][v] == -1).all()
