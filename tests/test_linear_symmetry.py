"""Symmetries of linear units (mixing maps, bias translations) against an independent Jacobian.

Truth: the networks are re-written here as plain Python functions of a dict of parameters named
as the framework names them (``fc1.weight[0,1]``); the Jacobian is computed by forward-mode dual
numbers over Fractions (no project code), its rank by FLINT over Q.  Hand counts:

- a leaky ReLU MLP ``2-3-2`` with slope exactly 1 is the affine map ``W2 W1 x + W2 b1 + b2``: 6
  degrees of freedom (the affine maps ``R^2 -> R^2``), so ``dim_free = 6`` of 17 parameters;
- the residual block without an activation after the add, ``head(fc2 relu(fc1 x) + x)`` with ``d = m = 2``
  and ``h = 2``: ``f = H W2 relu(W1 x + b1) + H x + (H b2 + b3)``; with ``H`` invertible, each ReLU unit
  gives its hyperplane (``d`` numbers up to its rescaling) and its output column ``H W2[:, v]`` (``m``),
  the affine part gives ``H`` and ``H b2 + b3``: ``h (d + m) + m d + m = 14`` of 18 parameters, i.e. the
  ``h`` rescalings and the ``d`` translations of ``b2`` through the add's linear units.
"""

from __future__ import annotations

import random
import re
from collections import Counter
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

    def __mul__(self, o):
        o = o if isinstance(o, D) else D(o)
        return D(self.a * o.a, self.a * o.b + self.b * o.a)

    __rmul__ = __mul__


def _relu(z: D, slope=Fr(0)) -> D:
    return z if z.a > 0 else slope * z


def _affine(P, name, h, n_out):
    return [sum((P[f"{name}.weight[{i},{k}]"] * h[k] for k in range(len(h))), D(0)) + P.get(f"{name}.bias[{i}]", D(0))
            for i in range(n_out)]


def f_leaky(P, x):
    h = [_relu(z, Fr(1)) for z in _affine(P, "fc1", x, 3)]
    return _affine(P, "fc2", h, 2)


def f_residual(P, x):
    h = [_relu(z) for z in _affine(P, "fc1", x, 2)]
    r = [a + b for a, b in zip(_affine(P, "fc2", h, 2), x)]
    return _affine(P, "head", r, 2)


def jacobian(f, names, theta, X):
    """Rows ``d f_o(x) / d theta`` over every sample (Fractions, forward mode), columns in ``names`` order."""
    rows = []
    for x in X:
        cols = []
        for j in range(len(names)):
            P = {n: D(t, Fr(int(i == j))) for i, (n, t) in enumerate(zip(names, theta))}
            cols.append([o.b for o in f(P, [D(v) for v in x])])
        rows += [[cols[j][o] for j in range(len(names))] for o in range(len(cols[0]))]
    return rows


def _rank(rows) -> int:
    return flint.fmpq_mat([[flint.fmpq(v.numerator, v.denominator) for v in r] for r in rows]).rank()


def _q(v) -> str:
    return Fr(v).limit_denominator(97)


def _leaky_arch(rng):
    w = lambda r, c: exact_array([[_q(rng.uniform(-2, 2)) for _ in range(c)] for _ in range(r)])  # noqa: E731
    v = lambda n: exact_array([_q(rng.uniform(-1, 1)) for _ in range(n)])  # noqa: E731
    return Architecture((2,), [Layer("fc1", "linear", ("input",), w(3, 2), v(3)),
                               Layer("act", "leaky_relu", ("fc1",), negative_slope=flint.fmpq(1)),
                               Layer("fc2", "linear", ("act",), w(2, 3), v(2))], "fc2")


def _residual_arch(rng):
    w = lambda r, c: exact_array([[_q(rng.uniform(-2, 2)) for _ in range(c)] for _ in range(r)])  # noqa: E731
    v = lambda n: exact_array([_q(rng.uniform(-1, 1)) for _ in range(n)])  # noqa: E731
    return Architecture((2,), [Layer("fc1", "linear", ("input",), w(2, 2), v(2)),
                               Layer("relu1", "relu", ("fc1",)),
                               Layer("fc2", "linear", ("relu1",), w(2, 2), v(2)),
                               Layer("res", "add", ("fc2", "input")),
                               Layer("head", "linear", ("res",), w(2, 2), v(2))], "head")


CASES = [("leaky slope 1", _leaky_arch, f_leaky, 17, 6), ("residual, no activation after the add", _residual_arch,
                                                          f_residual, 18, 14)]


def _sample(rng, n):
    return [[Fr(rng.randint(-40, 40), rng.randint(1, 9)) for _ in range(2)] for _ in range(n)]


@pytest.mark.parametrize("label,arch,f,k,dim_free", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("seed", range(3))
def test_dim_free_is_the_hand_count_and_the_independent_rank(label, arch, f, k, dim_free, seed):
    rng = random.Random(seed)
    while True:  # a generic draw: the sample sees every sign pattern of fc1's ReLU units twice or more
        cn = compile_architecture(arch(rng))
        names = list(cn.param_names)
        theta = [Fr(int(t.p), int(t.q)) for t in cn.theta()]
        P = {n: D(t) for n, t in zip(names, theta)}
        X = _sample(rng, 16)
        if f is f_leaky:
            break
        seen = Counter(tuple(z.a > 0 for z in _affine(P, "fc1", [D(v) for v in x], 2)) for x in X)
        if len(seen) == 4 and min(seen.values()) >= 2:
            break
    assert all(re.fullmatch(r"\w+\.(weight|bias)\[[\d,]+\]", n) for n in names)
    sym = rescaling_symmetry(cn)
    assert (cn.n_params, sym.dim_free) == (k, dim_free), sym.kinds
    J = jacobian(f, names, theta, X)
    assert _rank(J) == dim_free  # the functional rank on a generic sample: nothing is missing
    for vec, kind in zip(sym.basis, sym.kinds):  # every direction is an exact kernel vector, on fresh inputs too
        for x in _sample(rng, 6):
            Jx = jacobian(f, names, theta, [x])
            assert all(sum((r[j] * Fr(int(v.p), int(v.q)) for j, v in vec.items()), Fr(0)) == 0 for r in Jx), kind
    report = check_constrained(cn, [[flint.fmpq(v.numerator, v.denominator) for v in x] for x in X])
    assert report.verdict == "identifiable" and report.rank_gamma == _rank(J) == report.dim
    valid, msgs = verify_constrained(cn, [[flint.fmpq(v.numerator, v.denominator) for v in x] for x in X],
                                     report.to_dict())
    assert valid, msgs


def test_kinds_name_the_symmetries():
    cn = compile_architecture(_residual_arch(random.Random(0)))
    sym = rescaling_symmetry(cn)
    assert sym.counts() == {"rescaling": 2, "bias-translation": 2}  # the skip's identity pins every mixing map
    cn = compile_architecture(_leaky_arch(random.Random(0)))
    counts = rescaling_symmetry(cn).counts()
    # the affine group of 3 linear units: orbit of dimension 9 - 1 (stabilizer I + a b^T, a in ker W2,
    # b orthogonal to col W1) + 3 translations = 11 = 17 - 6; the 3 rescalings are among the maps
    assert sum(counts.values()) == 11 and counts["rescaling"] == 3


def test_verifier_refuses_the_old_count():
    """A report claiming the rescalings only (dim_free too large) is refused by the verifier's own count."""
    rng = random.Random(5)
    cn = compile_architecture(_residual_arch(rng))
    X = [[flint.fmpq(v.numerator, v.denominator) for v in x] for x in _sample(rng, 12)]
    d = check_constrained(cn, X).to_dict()
    d["architecture"] = dict(d["architecture"], symmetry_dim=2, dim_free=16)
    d["dim"] = 16
    assert not verify_constrained(cn, X, d)[0]


# ---------------------------------------------------------------- slope lines (a PReLU unit >= 0 on every sample)

def _prelu_arch():
    """``fc2(prelu(fc1 x))``, 2 -> 3 -> 1; unit 0 has bias 50, so ``z_0 > 0`` on the sample below."""
    return Architecture((2,), [
        Layer("fc1", "linear", ("input",), exact_array([[1, 2], [3, -1], [-2, 1]]), exact_array([50, 1, Fr(1, 2)])),
        Layer("act", "prelu", ("fc1",), exact_array([Fr(1, 4), Fr(1, 8), Fr(3, 8)])),
        Layer("fc2", "linear", ("act",), exact_array([[2, -1, 3]]), exact_array([1]))], "fc2")


def f_prelu(P, x):
    z = _affine(P, "fc1", x, 3)
    h = [zv if zv.a >= 0 else P[f"act.weight[{v}]"] * zv for v, zv in enumerate(z)]
    return _affine(P, "fc2", h, 1)


def test_a_prelu_slope_unused_on_the_sample_is_a_verified_line_and_forgeries_fail():
    import copy

    cn = compile_architecture(_prelu_arch())
    rng = random.Random(3)
    X = [[Fr(rng.randint(-9, 9), rng.randint(1, 3)) for _ in range(2)] for _ in range(30)]
    Xq = [[flint.fmpq(v.numerator, v.denominator) for v in x] for x in X]
    report = check_constrained(cn, Xq)
    assert (report.verdict, report.decided_by) == ("not-identifiable", "slope-lines"), report.reason
    part = report.certificate["slope_lines"]
    names = list(cn.param_names)
    assert part["name"] == "act.weight[0]" and names[part["parameter"]] == "act.weight[0]"
    # the truth, independently: the outputs on X do not move with the slope; f(x*) does
    theta = {n: Fr(int(t.p), int(t.q)) for n, t in zip(names, cn.theta())}
    eps = Fr(part["eps"])
    moved = dict(theta, **{"act.weight[0]": theta["act.weight[0]"] + eps})

    def run(params, x):
        return [o.a for o in f_prelu({n: D(v) for n, v in params.items()}, [D(v) for v in x])]
    assert all(run(theta, x) == run(moved, x) for x in X)
    xs = [Fr(v) for v in part["x"]]
    assert run(theta, xs) != run(moved, xs) and [str(v) for v in run(moved, xs)] == part["f_eps"]
    d = report.to_dict()
    valid, msgs = verify_constrained(cn, Xq, d)
    assert valid, msgs
    forged = [
        dict(copy.deepcopy(d["certificate"]["slope_lines"]), parameter=names.index("act.weight[1]"),
             name="act.weight[1]", units=[[1, 1]]),  # a unit negative on the sample: the outputs move
        dict(copy.deepcopy(d["certificate"]["slope_lines"]), f_eps=part["f_0"]),  # no change shown
        dict(copy.deepcopy(d["certificate"]["slope_lines"]), parameter=names.index("fc2.bias[0]"),
             name="fc2.bias[0]"),  # not a slope
    ]
    for bad in forged:
        m = copy.deepcopy(d)
        m["certificate"]["slope_lines"] = bad
        assert not verify_constrained(cn, Xq, m)[0], bad


# ---------------------------------------------------------------- every verdict against the independent Jacobian

def f_mlp(act, widths):
    """An MLP with ``act`` in {"prelu", "leaky1"} written out (framework names ``fc{l}``, ``act{l}.weight[v]``)."""
    def f(P, x):
        h = x
        for l in range(1, len(widths)):
            z = _affine(P, f"fc{l}", h, widths[l])
            if l == len(widths) - 1:
                return z
            h = [zv if zv.a >= 0 or act == "leaky1" else P[f"act{l}.weight[{v}]"] * zv for v, zv in enumerate(z)]
    return f


def _mlp_arch(rng, widths, act):
    layers, src = [], "input"
    for l in range(1, len(widths)):
        layers.append(Layer(f"fc{l}", "linear", (src,),
                            exact_array([[Fr(rng.randint(-6, 6) or 1, rng.randint(1, 3)) for _ in range(widths[l - 1])]
                                         for _ in range(widths[l])]),
                            exact_array([Fr(rng.randint(-6, 6), rng.randint(1, 3)) for _ in range(widths[l])])))
        src = f"fc{l}"
        if l < len(widths) - 1:
            if act == "prelu":
                layers.append(Layer(f"act{l}", "prelu", (src,),
                                    exact_array([Fr(rng.randint(1, 3), 8) for _ in range(widths[l])])))
            else:
                layers.append(Layer(f"act{l}", "leaky_relu", (src,), negative_slope=flint.fmpq(1)))
            src = f"act{l}"
    return Architecture((widths[0],), layers, src)


@pytest.mark.parametrize("act,widths", [("prelu", [2, 3, 1]), ("prelu", [1, 2, 1]), ("leaky1", [2, 2, 3, 1]),
                                        ("residual", [2, 2, 2])])
@pytest.mark.parametrize("seed", range(4))
def test_every_verdict_agrees_with_the_independent_rank(act, widths, seed):
    """``rank <= dim_free`` always (every S_H direction is a kernel vector); identifiable iff they meet."""
    rng = random.Random(100 * seed + len(widths))
    if act == "residual":
        cn, f = compile_architecture(_residual_arch(rng)), f_residual
    else:
        cn, f = compile_architecture(_mlp_arch(rng, widths, act)), f_mlp(act, widths)
    names = list(cn.param_names)
    theta = [Fr(int(t.p), int(t.q)) for t in cn.theta()]
    X = [[Fr(rng.randint(-30, 30), rng.randint(1, 7)) for _ in range(cn.widths[0])]
         for _ in range(rng.choice([2, 4, 12]))]
    rank = _rank(jacobian(f, names, theta, X))  # no sample on a kink with these denominators, or a tie:
    report = check_constrained(cn, [[flint.fmpq(v.numerator, v.denominator) for v in x] for x in X])
    if report.n_ties:
        pytest.skip("a sample on a kink: the independent Jacobian is one-sided")
    assert rank <= report.dim
    assert (report.verdict == "identifiable") == (rank == report.dim), (report.verdict, rank, report.dim)
    if report.decided_by == "slope-lines":  # the slope's column is 0 on X, independently
        j = report.certificate["slope_lines"]["parameter"]
        assert all(row[j] == 0 for row in jacobian(f, names, theta, X))


def _dense(cn, theta):
    """The compiled network's dense ``W``, ``b``, slopes at ``theta`` (Fractions)."""
    c = cn.with_theta([flint.fmpq(t.numerator, t.denominator) for t in theta])
    q = lambda v: Fr(int(v.p), int(v.q))  # noqa: E731
    return ([[[q(M[i, k]) for k in range(M.ncols())] for i in range(M.nrows())] for M in c.W],
            [[q(v) for v in bl] for bl in c.b], [[q(v) for v in sl] for sl in c.negative_slope])


def _tangent(cn, theta, v, x):
    """``d/dt F_{theta + t v}(x)`` at ``t = 0`` by a dual-number pass over the dense layers; None on a kink."""
    (W, b, s), (W1, b1, s1), (W0, b0, s0) = (_dense(cn, theta), _dense(cn, v), _dense(cn, [Fr(0)] * len(theta)))
    h = [D(t) for t in x]
    for l in range(len(W)):
        z = [sum((D(W[l][i][k], W1[l][i][k] - W0[l][i][k]) * h[k] for k in range(len(h))), D(0))
             + D(b[l][i], b1[l][i] - b0[l][i]) for i in range(len(W[l]))]
        if l == len(W) - 1:
            return [o.b for o in z]
        if any(zi.a == 0 and s[l][i] != 1 for i, zi in enumerate(z)):
            return None
        h = [zi if zi.a > 0 else D(s[l][i], s1[l][i] - s0[l][i]) * zi for i, zi in enumerate(z)]


def _pooled_archs(rng):
    w = lambda *shape: exact_array(np.array([_q(rng.uniform(-2, 2)) for _ in range(int(np.prod(shape)))],  # noqa: E731
                                            dtype=object).reshape(shape))
    conv = lambda name, src, shape: Layer(name, "conv1d", (src,), w(*shape), w(shape[0]), kernel_size=(shape[2],),  # noqa: E731
                                          stride=(1,), padding=(0,))
    return [Architecture((1, 5), [conv("c1", "input", (2, 1, 2)), conv("c2", "c1", (2, 2, 2)),
                                  Layer("r", "relu", ("c2",)), Layer("fl", "flatten", ("r",)),
                                  Layer("h", "linear", ("fl",), w(1, 6), w(1))], "h"),
            Architecture((1, 3), [conv("c1", "input", (2, 1, 2)), Layer("m", "maxpool1d", ("c1",), kernel_size=(2,)),
                                  Layer("fl", "flatten", ("m",)), Layer("h", "linear", ("fl",), w(2, 2), w(2))], "h"),
            Architecture((2,), [Layer("f1", "linear", ("input",), w(3, 2), w(3)),
                                Layer("f2", "linear", ("f1",), w(2, 3), None), Layer("r", "relu", ("f2",)),
                                Layer("h", "linear", ("r",), w(1, 2), w(1))], "h")]


def test_linear_unit_symmetries_of_convolutions_pools_and_stacked_layers_are_exact_kernel_vectors():
    # conv -> conv (weight sharing), conv -> max pool (fixed pair weights), linear -> linear with no bias (fixed 0):
    # every S_H direction must keep the function, d/dt F_{theta + t v}(x) = 0 at every input (dual numbers over
    # the dense layers, not the symmetry code), and the rank of that Jacobian never exceeds dim_free
    rng = random.Random(11)
    for arch in _pooled_archs(rng):
        cn = compile_architecture(arch)
        sym = rescaling_symmetry(cn)
        assert any(kind != "rescaling" for kind in sym.kinds)  # linear-unit symmetries are exercised
        theta = [Fr(int(t.p), int(t.q)) for t in cn.theta()]
        X = [[Fr(rng.randint(-40, 40), rng.randint(1, 7)) for _ in range(cn.widths[0])] for _ in range(10)]
        for vec in sym.basis:
            v = [Fr(0)] * cn.n_params
            for j, c in vec.items():
                v[j] = Fr(int(c.p), int(c.q))
            assert all(d is None or not any(d) for d in (_tangent(cn, theta, v, x) for x in X))
        rows = []
        for x in X:
            cols = [_tangent(cn, theta, [Fr(int(i == j)) for i in range(cn.n_params)], x) for j in range(cn.n_params)]
            if cols[0] is not None:
                rows += [[cols[j][o] for j in range(cn.n_params)] for o in range(len(cols[0]))]
        assert _rank(rows) <= sym.dim_free
