"""Composition moves through linear units, slope trades of PReLU layers, the shift through a max pool.

Truth: each network is written out here as a plain Python function of a dict of parameters named as the
framework names them (``c1.weight[0,0,1]``); tangents and Jacobians are forward-mode dual numbers over
Fractions (no project code), ranks by FLINT over Q.  Hand counts:

- ``conv1d 1 -> 2`` (kernel 2) then ``conv1d 2 -> 2`` (kernel 2), no activation between, then ReLU and a
  linear head on 5 inputs: the two convolutions compose to one ``1 -> 2`` convolution with kernel 3
  (6 taps, 2 biases), the ReLU channels rescale (2), the head has 6 + 1 parameters: ``8 + 7 - 2 = 13``
  of 23 parameters;
- PReLU ``2-3-1``: ``f = A(x) + sum_u v_u (1 - a_u) relu(w_u x + b_u)``, ``A`` affine (3 numbers), each ReLU
  term 4 parameters less its rescaling: ``3 + 3 * 3 = 12`` of 16; PReLU ``1-3-1``: ``2 + 3 * 2 = 8`` of 13;
- ``conv1d 1 -> 2`` (kernel 2) on 5 inputs, ``maxpool`` 2, linear head: per channel the pool reads
  ``max(k . x_window + b)``: the head's 4 weights and bias, the 2 x 2 taps, the channel biases (absorbed by
  the head bias: ``max(a + c, b + c) = max(a, b) + c``) and the channel scales (positive, through the max)
  leave ``4 + 1 + 4 - 2 = 7`` of 11; with a ReLU after the pool the biases are not absorbed: ``9``.
"""

from __future__ import annotations

import random
from fractions import Fraction as Fr

import flint
import numpy as np
import pytest

from exactident.check import check_constrained
from exactident.model.architecture import Architecture, Layer, exact_array
from exactident.model.compile import compile_architecture
from exactident.model.symmetry import rescaling_symmetry
from exactident.verify.certificate import verify_constrained


class D:
    """A dual number ``a + b eps`` over Fractions (forward mode)."""

    def __init__(self, a, b=Fr(0)):
        self.a, self.b = Fr(a), Fr(b)

    def __add__(self, o):
        o = o if isinstance(o, D) else D(o)
        return D(self.a + o.a, self.b + o.b)

    __radd__ = __add__

    def __sub__(self, o):
        o = o if isinstance(o, D) else D(o)
        return D(self.a - o.a, self.b - o.b)

    def __mul__(self, o):
        o = o if isinstance(o, D) else D(o)
        return D(self.a * o.a, self.a * o.b + self.b * o.a)

    __rmul__ = __mul__


def _conv(P, name, x, c_out, c_in, k):
    """Valid 1-D convolution: ``x[i]`` a list of positions per input channel."""
    n = len(x[0]) - k + 1
    return [[sum((P[f"{name}.weight[{c},{i},{r}]"] * x[i][p + r] for i in range(c_in) for r in range(k)), D(0))
             + P[f"{name}.bias[{c}]"] for p in range(n)] for c in range(c_out)]


def _linear(P, name, h, n_out):
    return [sum((P[f"{name}.weight[{i},{j}]"] * h[j] for j in range(len(h))), D(0)) + P[f"{name}.bias[{i}]"]
            for i in range(n_out)]


def _relu(z):
    return z if z.a > 0 else D(0)


def f_conv_conv(P, x):
    h = _conv(P, "c2", _conv(P, "c1", [x], 2, 1, 2), 2, 2, 2)
    return _linear(P, "h", [_relu(z) for ch in h for z in ch], 1)


def _max(a, b):
    return a if a.a >= b.a else b


def f_conv_pool(relu_after):
    def f(P, x):
        h = _conv(P, "c1", [x], 2, 1, 2)
        m = [_max(ch[2 * p], ch[2 * p + 1]) for ch in h for p in range(len(ch) // 2)]
        return _linear(P, "h", [_relu(z) for z in m] if relu_after else m, 1)
    return f


def f_prelu(width_in, width):
    def f(P, x):
        z = _linear(P, "fc1", x, width)
        h = [zv if zv.a > 0 else P[f"a.weight[{v}]"] * zv for v, zv in enumerate(z)]
        return _linear(P, "fc2", h, 1)
    return f


def _q(rng):
    return Fr(rng.randint(-12, 12) or 1, rng.randint(1, 5))


def _w(rng, *shape):
    return exact_array(np.array([_q(rng) for _ in range(int(np.prod(shape)))], dtype=object).reshape(shape))


def _conv_layer(rng, name, src, shape):
    return Layer(name, "conv1d", (src,), _w(rng, *shape), _w(rng, shape[0]), kernel_size=(shape[2],), stride=(1,),
                 padding=(0,))


def arch_conv_conv(rng):
    return Architecture((1, 5), [_conv_layer(rng, "c1", "input", (2, 1, 2)), _conv_layer(rng, "c2", "c1", (2, 2, 2)),
                                 Layer("r", "relu", ("c2",)), Layer("fl", "flatten", ("r",)),
                                 Layer("h", "linear", ("fl",), _w(rng, 1, 6), _w(rng, 1))], "h")


def arch_conv_pool(relu_after):
    def make(rng):
        layers = [_conv_layer(rng, "c1", "input", (2, 1, 2)), Layer("m", "maxpool1d", ("c1",), kernel_size=(2,))]
        src = "m"
        if relu_after:
            layers.append(Layer("r", "relu", ("m",)))
            src = "r"
        return Architecture((1, 5), layers + [Layer("fl", "flatten", (src,)),
                                              Layer("h", "linear", ("fl",), _w(rng, 1, 4), _w(rng, 1))], "h")
    return make


def arch_prelu(width_in, width):
    def make(rng):
        slopes = exact_array([Fr(rng.randint(1, 7), 8) for _ in range(width)])
        return Architecture((width_in,), [Layer("fc1", "linear", ("input",), _w(rng, width, width_in), _w(rng, width)),
                                          Layer("a", "prelu", ("fc1",), slopes),
                                          Layer("fc2", "linear", ("a",), _w(rng, 1, width), _w(rng, 1))], "fc2")
    return make


#: (label, architecture, function, parameters, dim_free by hand, the kind that must be counted or None)
CASES = [
    ("conv-conv", arch_conv_conv, f_conv_conv, 23, 13, "composition-kernel"),
    ("prelu 2-3-1", arch_prelu(2, 3), f_prelu(2, 3), 16, 12, "slope-trade"),
    ("prelu 1-3-1", arch_prelu(1, 3), f_prelu(1, 3), 13, 8, "slope-trade"),
    ("conv-maxpool", arch_conv_pool(False), f_conv_pool(False), 11, 7, "bias-translation"),
    ("conv-maxpool-relu", arch_conv_pool(True), f_conv_pool(True), 11, 9, None),
]


def _point(P0, names, v=None):
    return {n: D(P0[n], v.get(n, 0) if v else 0) for n in names}


def _jacobian(f, names, theta, X):
    P0 = dict(zip(names, theta))
    rows = []
    for x in X:
        cols = [f(_point(P0, names, {n: 1}), [D(t) for t in x]) for n in names]
        rows += [[cols[j][o].b for j in range(len(names))] for o in range(len(cols[0]))]
    return rows


def _rank(rows) -> int:
    return flint.fmpq_mat([[flint.fmpq(v.numerator, v.denominator) for v in r] for r in rows]).rank()


def _inputs(rng, n, d):
    return [[Fr(rng.randint(-100, 100), rng.choice([1, 3, 16, 17])) for _ in range(d)] for _ in range(n)]


@pytest.mark.parametrize("label,arch,f,k,dim_free,kind", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("seed", range(2))
def test_new_symmetries_are_exact_and_dim_free_is_the_generic_rank(label, arch, f, k, dim_free, kind, seed):
    rng = random.Random(seed)
    cn = compile_architecture(arch(rng))
    names = list(cn.param_names)
    theta = [Fr(int(t.p), int(t.q)) for t in cn.theta()]
    sym = rescaling_symmetry(cn)
    assert (cn.n_params, sym.dim_free) == (k, dim_free), sym.counts()
    if kind is None:
        assert set(sym.kinds) == {"rescaling"}
    else:
        assert kind in sym.kinds
    P0 = dict(zip(names, theta))
    for vec, what in zip(sym.basis, sym.kinds):  # d/dt F(theta + t v)(x) = 0 at fresh random inputs
        v = {names[j]: Fr(int(c.p), int(c.q)) for j, c in vec.items()}
        for x in _inputs(rng, 8, cn.widths[0]):
            assert all(o.b == 0 for o in f(_point(P0, names, v), [D(t) for t in x])), what
    # many generic inputs: the Jacobian's rank is the functional rank, and nothing is missing from S_H
    assert _rank(_jacobian(f, names, theta, _inputs(rng, 150 if cn.widths[0] <= 2 else 40, cn.widths[0]))) == dim_free


@pytest.mark.parametrize("label,arch,f,k,dim_free,kind", CASES[:3], ids=[c[0] for c in CASES[:3]])
def test_the_verifier_counts_them_and_refuses_a_larger_symmetry(label, arch, f, k, dim_free, kind):
    rng = random.Random(7)
    cn = compile_architecture(arch(rng))
    X = _inputs(rng, 30, cn.widths[0])
    Xq = [[flint.fmpq(v.numerator, v.denominator) for v in x] for x in X]
    report = check_constrained(cn, Xq)
    d = report.to_dict()
    assert d["architecture"]["dim_free"] == dim_free
    rank = _rank(_jacobian(f, list(cn.param_names), [Fr(int(t.p), int(t.q)) for t in cn.theta()], X))
    assert (report.verdict == "identifiable") == (rank == dim_free)
    valid, msgs = verify_constrained(cn, Xq, d)
    assert valid, msgs
    for s in (1, -1):  # one symmetry more (a forged S_H) or one less (the old count): both refused
        forged = dict(d, architecture=dict(d["architecture"], symmetry_dim=d["architecture"]["symmetry_dim"] + s,
                                           dim_free=dim_free - s), dim=dim_free - s)
        assert not verify_constrained(cn, Xq, forged)[0], s
