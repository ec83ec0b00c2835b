"""Compile an :class:`~exactident.model.architecture.Architecture` to the one layered form.

:func:`compile_architecture` returns a
:class:`~exactident.model.network.Network`: dense ``W_l, b_l`` whose entries are
either fixed or equal to one free parameter ``theta_j``, per-unit negative slopes, layered.

How each op compiles (docs/case-format.md, "How a format-2 case is compiled"):

- Affine ops (``linear``, ``conv1d``/``conv2d``, ``avgpool``, ``add``) build, for every element
  of their output, an affine expression in the outputs of earlier *units*: a convolution
  weight ``w[o,i,ky,kx]`` is one parameter feeding every output position (tied entries), a
  window position in the zero padding is a fixed 0 entry (not drawn), a pooling weight is the
  fixed ``1/k`` (``k`` counts padded positions), a missing bias is fixed 0.
- An activation (``relu`` slope 0, ``leaky_relu`` slope ``a``, ``prelu`` slope = the channel's
  parameter) turns the expression it follows into one layer of units with that slope.  An
  expression that cannot be composed exactly with the next affine op (it holds a parameter
  or a fixed non-unit weight, and the next op multiplies it by another weight) becomes a
  layer of *linear* units (slope 1, no kink) first.  ``add`` sums expressions directly when
  no entry would become a sum of two parameters (``x + W2 relu(W1 x + b1)`` stays 2 layers).
- Max pooling (``maxpool1d``/``maxpool2d``) takes each window (padded positions left out: they
  never win) as a tree of pairwise maxima, ``max(a, b) = b + relu(a - b)``, pairing neighbours
  level by level (depth ``ceil(log2 k)`` for ``k`` positions): each pair is one ReLU unit with
  fixed weights ``+1, -1`` (no new parameter), kinked exactly where ``a = b``, named
  ``pool[c=0,x=2>x=3]`` (active where the first wins); ``b`` is carried up.  Inputs holding a
  parameter are made linear units first; a pair shared by overlapping windows is one unit.  A
  ReLU or leaky ReLU (slope ``>= 0``) read only by the pooling is applied after it, on the
  pooled pre-activations (``max(s(a), s(b)) = s(max(a, b))`` for a nondecreasing ``s``: the same
  network), so two dead ReLU outputs in one window are no tie; its units are named after the
  pooled element they activate (``pool[c=0,x=1]``), as every activation's units are.
- The output expression becomes the affine output layer ``L``.
- A unit read by a layer more than one layer above it is carried up by *carrier* units:
  linear units with fixed incoming weight 1 and bias 0 (``skip(input[3])``), one per layer.
- ``flatten`` and ``identity`` only rename elements (C-order).

Parameters are numbered per layer in graph order, weight (C-order) then bias, then PReLU
slopes; a kernel entry that only ever meets zero padding feeds no dense entry and is not a
parameter of the compiled network.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product
from math import prod

import flint
import numpy as np

from exactident.errors import InvariantViolation, UnsupportedCaseError
from exactident.model.architecture import Architecture, Layer, pool_pads, pool_window
from exactident.model.network import CARRIER_PREFIX, Network

__all__ = [
    "FEATURES",
    "MAX_DENSE_ENTRIES",
    "as_plain_network",
    "compile_architecture",
    "plain_parameter_names",
]

#: Feature words of ``Network.features``, in the order they are listed.
FEATURES = ("convolution", "average pooling", "max pooling", "skip connection", "leaky ReLU", "PReLU", "linear layer",
            "fixed weights")
#: The compiled network is dense: an op whose output and input sizes multiply beyond this is refused.
MAX_DENSE_ENTRIES = 20_000_000
_ZERO = flint.fmpq(0)
_ONE = flint.fmpq(1)
_FIXED0 = (-1, _ZERO)
Coef = tuple[int, flint.fmpq]  # (parameter index or -1 for fixed, value)


@dataclass
class _Elem:
    terms: dict[int, Coef]
    bias: Coef
    name: str

    def pure(self) -> bool:
        return self.bias == _FIXED0 and len(self.terms) == 1 and next(iter(self.terms.values())) == (-1, _ONE)


@dataclass
class _Unit:
    depth: int
    name: str
    terms: dict[int, Coef] = field(default_factory=dict)
    bias: Coef = _FIXED0
    slope: Coef | None = None  # None: input or output unit


class _Compiler:
    def __init__(self, arch: Architecture) -> None:
        self.arch = arch
        self.units: list[_Unit] = []
        self.params: list[tuple[str, flint.fmpq]] = []
        self.features: set[str] = set()
        self.cache: dict[str, list[_Elem]] = {}
        self.carriers: dict[tuple[int, int], int] = {}

    def param(self, name: str, value: flint.fmpq) -> int:
        self.params.append((name, value))
        return len(self.params) - 1

    def new_unit(self, unit: _Unit) -> int:
        self.units.append(unit)
        return len(self.units) - 1

    def materialize(self, elems: list[_Elem], slopes: list[Coef] | None) -> list[_Elem]:
        """One layer of units computing ``elems`` (slopes None: the output layer)."""
        depth = 1 + max((self.units[u].depth for e in elems for u in e.terms), default=0)
        out = []
        for k, e in enumerate(elems):
            slope = None if slopes is None else slopes[k]
            u = self.new_unit(_Unit(depth, e.name, dict(e.terms), e.bias, slope))
            out.append(_Elem({u: (-1, _ONE)}, _FIXED0, e.name))
        return out

    def linear_units(self, key: str, elems: list[_Elem], feature: bool = True) -> list[_Elem]:
        """``elems`` as pure references to units (linear units when they are not already).

        ``feature=False``: units the compilation of another layer needs (max pooling's inputs), not
        a "linear layer" of the architecture.
        """
        if all(e.pure() for e in elems):
            return elems
        if key not in self.cache:
            if feature and any(c[0] >= 0 for e in elems for c in [*e.terms.values(), e.bias]):
                self.features.add("linear layer")
            self.cache[key] = self.materialize(elems, [(-1, _ONE)] * len(elems))
        return self.cache[key]

    def run(self) -> Network:
        arch = self.arch
        names = _element_names("input", arch.input_shape)
        for k in range(arch.n_inputs):
            self.new_unit(_Unit(0, names[k]))
        env = {"input": [_Elem({k: (-1, _ONE)}, _FIXED0, names[k]) for k in range(arch.n_inputs)]}
        swapped = _pooled_activations(arch)
        for layer in arch.layers:
            if layer.name in swapped:  # applied after the max pooling that reads it (below)
                env[layer.name] = env[layer.inputs[0]]
                continue
            act = arch.layer(layer.inputs[0]) if layer.inputs[0] in swapped else None
            env[layer.name] = self.layer(layer, [env[s] for s in layer.inputs],
                                         [arch.shapes[s] for s in layer.inputs], arch.shapes[layer.name])
            if act is not None:  # max(s(a), s(b)) = s(max(a, b)) for a nondecreasing activation s
                shape = arch.shapes[layer.name]
                env[layer.name] = self.materialize(env[layer.name], self.slopes(act, shape))
        if all(e.pure() for e in env[arch.output]):  # the graph ends with an activation: output weights 1
            self.features.add("fixed weights")
        self.materialize(env[arch.output], None)
        return self.build()

    def layer(self, layer: Layer, ins: list[list[_Elem]], shapes: list[tuple[int, ...]],
              shape: tuple[int, ...]) -> list[_Elem]:
        op, name = layer.op, layer.name
        if op in ("flatten", "identity"):
            return ins[0]
        if op == "add":
            return self.add(name, ins, shape)
        if op.startswith("maxpool"):
            self.features.add("max pooling")
            return self.maxpool(layer, ins[0], shapes[0], shape)
        if op in ("relu", "leaky_relu", "prelu"):
            if all(e.pure() for e in ins[0]):  # on the input or another activation: units with weight 1
                self.features.add("fixed weights")
            return self.materialize(ins[0], self.slopes(layer, shape))
        src = self.linear_units(layer.inputs[0], ins[0])
        refs = [next(iter(e.terms)) for e in src]
        names = _element_names(name, shape)
        if op == "linear":
            return self.dense(layer, refs, names)
        if op.startswith("conv"):
            self.features.add("convolution")
        else:
            self.features.add("average pooling")
        return self.windows(layer, refs, shapes[0], shape, names)

    def bias_params(self, layer: Layer, n: int) -> list[Coef]:
        if layer.bias is None:
            self.features.add("fixed weights")
            return [_FIXED0] * n
        return [(self.param(f"{layer.name}.bias[{o}]", layer.bias[o]), layer.bias[o]) for o in range(n)]

    def dense(self, layer: Layer, refs: list[int], names: list[str]) -> list[_Elem]:
        w = layer.weight
        assert w is not None
        pw = [[(self.param(f"{layer.name}.weight[{o},{i}]", w[o, i]), w[o, i]) for i in range(w.shape[1])]
              for o in range(w.shape[0])]
        pb = self.bias_params(layer, w.shape[0])
        return [_Elem({refs[i]: pw[o][i] for i in range(w.shape[1])}, pb[o], names[o]) for o in range(w.shape[0])]

    def windows(self, layer: Layer, refs: list[int], in_shape: tuple[int, ...], shape: tuple[int, ...],
                names: list[str]) -> list[_Elem]:
        """Convolution and average pooling: each output element reads one window per channel."""
        conv = layer.op.startswith("conv")
        ks, st, pad = layer.kernel_size, layer.stride, layer.padding
        spatial_in = in_shape[1:]
        if conv:
            w = layer.weight
            assert w is not None
            pw = np.empty(w.shape, dtype=object)
            for idx, value in np.ndenumerate(w):
                pw[idx] = (self.param(f"{layer.name}.weight[{','.join(map(str, idx))}]", value), value)
            pb = self.bias_params(layer, w.shape[0])
        else:
            fixed = (-1, flint.fmpq(1, prod(ks)))
        out = []
        for k, (c, *pos) in enumerate(product(*(range(n) for n in shape))):
            terms: dict[int, Coef] = {}
            for off in product(*(range(n) for n in ks)):
                at = [p * s - q + o for p, s, q, o in zip(pos, st, pad, off)]
                if any(a < 0 or a >= n for a, n in zip(at, spatial_in)):
                    continue  # zero padding: a fixed 0 entry
                flat_pos = int(np.ravel_multi_index(at, spatial_in)) if at else 0
                per_channel = prod(spatial_in)
                if conv:
                    for i in range(in_shape[0]):
                        terms[refs[i * per_channel + flat_pos]] = pw[(c, i, *off)]
                else:
                    u = refs[c * per_channel + flat_pos]
                    terms[u] = (-1, terms[u][1] + fixed[1]) if u in terms else fixed
            out.append(_Elem(terms, pb[c] if conv else _FIXED0, names[k]))
        return out

    def maxpool(self, layer: Layer, elems: list[_Elem], in_shape: tuple[int, ...],
                shape: tuple[int, ...]) -> list[_Elem]:
        """Max pooling: each window a tree of pairwise maxima ``max(a, b) = b + relu(a - b)``, fixed weights.

        A padded position is left out of its window (it never wins the max).  The inputs are first
        made linear units when they hold a parameter (``a - b`` must be a fixed combination).  A
        pair met by several windows (overlapping windows) is one unit, so one tie is one kink.
        """
        if any(c[0] >= 0 for e in elems for c in [*e.terms.values(), e.bias]):
            elems = self.linear_units(layer.inputs[0], elems, feature=False)
        spatial = in_shape[1:]
        d, per_channel = len(spatial), prod(spatial)
        memo: dict[tuple[int, object, object], tuple[object, _Elem]] = {}
        out = []
        for k, (c, *pos) in enumerate(product(*(range(n) for n in shape))):
            axes = [pool_window(pos[a], layer.kernel_size[a], layer.stride[a], pool_pads(layer.padding, a, d)[0],
                                layer.dilation[a], spatial[a]) for a in range(d)]
            level: list[tuple[object, _Elem]] = []
            for at in product(*axes):
                label = ",".join(f"{axis}={i}" for axis, i in zip(("y", "x")[2 - d:], at))
                level.append((label if d == 1 else f"({label})",
                              elems[c * per_channel + int(np.ravel_multi_index(at, spatial))]))
            while len(level) > 1:
                pairs = [self.max2(layer.name, c, level[i], level[i + 1], memo) for i in range(0, len(level) - 1, 2)]
                level = pairs + level[len(level) - len(level) % 2:]
            out.append(_Elem(dict(level[0][1].terms), level[0][1].bias, _element_names(layer.name, shape)[k]))
        return out

    def max2(self, name: str, c: int, a: tuple[object, _Elem], b: tuple[object, _Elem],
             memo: dict[tuple[int, object, object], tuple[object, _Elem]]) -> tuple[object, _Elem]:
        """``max(a, b) = b + relu(a - b)``: one ReLU unit with fixed weights, kinked where ``a = b``."""
        key = (c, a[0], b[0])  # labels name positions within channel c
        if key not in memo:
            ea, eb = a[1], b[1]
            terms = dict(ea.terms)
            for u, (_, v) in eb.terms.items():
                terms[u] = (-1, terms[u][1] - v) if u in terms else (-1, -v)
            terms = {u: cv for u, cv in terms.items() if cv[1] != _ZERO}
            bias = ea.bias[1] - eb.bias[1]
            label = f"max({a[0]};{b[0]})"
            if not terms:  # a - b is a constant: the max is one of them everywhere, no kink
                memo[key] = (label, ea if bias >= _ZERO else eb)
            else:
                depth = 1 + max(self.units[u].depth for u in terms)
                r = self.new_unit(_Unit(depth, f"{name}[c={c},{a[0]}>{b[0]}]", terms, (-1, bias), _FIXED0))
                memo[key] = (label, _Elem({**eb.terms, r: (-1, _ONE)}, eb.bias, label))
        return memo[key]

    def slopes(self, layer: Layer, shape: tuple[int, ...]) -> list[Coef]:
        n = prod(shape)
        if layer.op == "relu":
            return [_FIXED0] * n
        if layer.op == "leaky_relu":
            assert layer.negative_slope is not None
            self.features.add("leaky ReLU")
            return [(-1, layer.negative_slope)] * n
        self.features.add("PReLU")
        w = layer.weight
        assert w is not None
        ps = [(self.param(f"{layer.name}.weight[{c}]", w[c]), w[c]) for c in range(w.shape[0])]
        per_channel = n // shape[0]
        return [ps[0] if len(ps) == 1 else ps[k // per_channel] for k in range(n)]

    def add(self, name: str, ins: list[list[_Elem]], shape: tuple[int, ...]) -> list[_Elem]:
        self.features.add("skip connection")
        names = _element_names(name, shape)
        acc = [_Elem(dict(e.terms), e.bias, names[k]) for k, e in enumerate(ins[0])]
        for j, term in enumerate(ins[1:], 1):
            if _clash(acc, term):
                term = self.linear_units(f"{name}#{j}", term)
            if _clash(acc, term):
                acc = self.linear_units(f"{name}#acc{j}", acc)
            acc = [_sum(a, t, names[k]) for k, (a, t) in enumerate(zip(acc, term))]
        return acc

    def carrier(self, u: int, depth: int) -> int:
        """Unit ``u`` carried up to ``depth`` by linear units with fixed weight 1 (cached)."""
        if self.units[u].depth == depth:
            return u
        if (u, depth) not in self.carriers:
            below = self.carrier(u, depth - 1)  # a skip's or a max pooling's (b carried up): add() names skips
            self.carriers[(u, depth)] = self.new_unit(
                _Unit(depth, f"{CARRIER_PREFIX}{self.units[u].name})", {below: (-1, _ONE)}, _FIXED0, (-1, _ONE)))
        return self.carriers[(u, depth)]

    def build(self) -> Network:
        L = max(unit.depth for unit in self.units)
        k = 0
        while k < len(self.units):  # carriers are appended while resolving; they need none themselves
            unit = self.units[k]
            unit.terms = {self.carrier(u, unit.depth - 1): c for u, c in unit.terms.items()}
            k += 1
        layers: list[list[int]] = [[] for _ in range(L + 1)]
        for u, unit in enumerate(self.units):
            layers[unit.depth].append(u)
        position = {u: i for members in layers for i, u in enumerate(members)}
        if any(self.units[u].slope is not None for u in layers[L]):
            raise InvariantViolation("compile: a hidden unit reached the output layer")
        used = sorted({c[0] for unit in self.units for c in [*unit.terms.values(), unit.bias, unit.slope or _FIXED0]
                       if c[0] >= 0})
        renumber = {j: n for n, j in enumerate(used)}
        widths = tuple(len(m) for m in layers)
        W, b, W_index, b_index, slopes, slope_index, unit_names = [], [], [], [], [], [], []
        for l in range(1, L + 1):
            rows, cols = widths[l], widths[l - 1]
            Wl = [[_ZERO] * cols for _ in range(rows)]
            Il = np.full((rows, cols), -1, dtype=np.int64)
            bl, bi, sl, si = [], np.full(rows, -1, dtype=np.int64), [], np.full(rows, -1, dtype=np.int64)
            for i, u in enumerate(layers[l]):
                unit = self.units[u]
                for src, (j, value) in unit.terms.items():
                    Wl[i][position[src]] = value
                    Il[i, position[src]] = renumber.get(j, -1)
                bl.append(unit.bias[1])
                bi[i] = renumber.get(unit.bias[0], -1)
                if l < L:
                    assert unit.slope is not None
                    sl.append(unit.slope[1])
                    si[i] = renumber.get(unit.slope[0], -1)
            W.append(flint.fmpq_mat(rows, cols, [v for row in Wl for v in row]))
            b.append(bl)
            W_index.append(Il)
            b_index.append(bi)
            if l < L:
                slopes.append(sl)
                slope_index.append(si)
            unit_names.append([self.units[u].name for u in layers[l]])
        features = tuple(f for f in FEATURES if f in self.features)
        return Network(widths, W, b, W_index, b_index, slopes, slope_index, len(used), features,
                                  [self.params[j][0] for j in used], unit_names)


def _pooled_activations(arch: Architecture) -> set[str]:
    """ReLU and leaky ReLU layers (fixed slope >= 0) read only by one max pooling: compiled after it.

    ``max(s(a), s(b)) = s(max(a, b))`` for every nondecreasing ``s``, so the family is the same;
    the max then compares pre-activations, and two dead ReLU outputs (both 0 on a sample) make no
    tie, since locally they are no kink of the network.
    """
    readers: dict[str, list[Layer]] = {}
    for layer in arch.layers:
        for src in layer.inputs:
            readers.setdefault(src, []).append(layer)
    out = set()
    for layer in arch.layers:
        users = readers.get(layer.name, [])
        if (layer.op == "relu" or (layer.op == "leaky_relu" and layer.negative_slope is not None
                                   and layer.negative_slope >= 0)) \
                and layer.name != arch.output and len(users) == 1 and users[0].op.startswith("maxpool"):
            out.add(layer.name)
    return out


def _clash(acc: list[_Elem], term: list[_Elem]) -> bool:
    """Would summing make an entry the sum of a parameter and something else?"""
    for a, t in zip(acc, term):
        if any(u in a.terms and (a.terms[u][0] >= 0 or c[0] >= 0) for u, c in t.terms.items()):
            return True
        if (a.bias[0] >= 0 and t.bias != _FIXED0) or (t.bias[0] >= 0 and a.bias != _FIXED0):
            return True
    return False


def _sum(a: _Elem, t: _Elem, name: str) -> _Elem:
    terms = dict(a.terms)
    for u, c in t.terms.items():
        terms[u] = (-1, terms[u][1] + c[1]) if u in terms else c
    bias = t.bias if a.bias == _FIXED0 else a.bias if t.bias == _FIXED0 else (-1, a.bias[1] + t.bias[1])
    return _Elem(terms, bias, name)


def _element_names(name: str, shape: tuple[int, ...]) -> list[str]:
    """``fc1[3]``; ``conv1[c=2,x=1]``; ``conv1[c=2,y=1,x=0]`` (C-order)."""
    if len(shape) == 1:
        return [f"{name}[{k}]" for k in range(shape[0])]
    axes = ("c", "x") if len(shape) == 2 else ("c", "y", "x")
    return [f"{name}[{','.join(f'{a}={i}' for a, i in zip(axes, idx))}]" for idx in product(*(range(n) for n in shape))]


def compile_architecture(arch: Architecture) -> Network:
    """The layered constrained network computing ``arch`` exactly (see the module docstring).

    Parameters
    ----------
    arch : Architecture
        A validated layer graph with exact (Q) parameters.

    Returns
    -------
    Network
        Widths ``N_0 = prod(input_shape)``, ..., ``N_L = prod(shape of the output)``; inputs and
        outputs in C-order of their tensors; ``param_names`` in framework terms
        (``conv1.weight[o,i,ky,kx]``, ``fc1.bias[3]``, ``pr.weight[c]``), ``unit_names`` like
        ``conv1[c=2,y=1,x=0]`` or ``skip(input[3])``.

    Raises
    ------
    UnsupportedCaseError
        When one op's output size times its input size exceeds :data:`MAX_DENSE_ENTRIES` (the
        compiled matrices are dense).

    Examples
    --------
    ``x + w2 relu(w1 x + b1)`` on one input: a ReLU unit and a carrier, then the output.

    >>> from exactident.model.architecture import Layer, exact_array
    >>> arch = Architecture((1,), [
    ...     Layer("fc1", "linear", ("input",), exact_array([[2]]), exact_array([1])),
    ...     Layer("act", "relu", ("fc1",)),
    ...     Layer("fc2", "linear", ("act",), exact_array([[3]]), None),
    ...     Layer("sum", "add", ("fc2", "input"))], "sum")
    >>> cn = compile_architecture(arch)
    >>> cn.widths, cn.unit_names
    ((1, 2, 1), [['fc1[0]', 'skip(input[0])'], ['sum[0]']])
    >>> cn.param_names, cn.features
    (['fc1.weight[0,0]', 'fc1.bias[0]', 'fc2.weight[0,0]'], ('skip connection', 'fixed weights'))
    """
    for i, layer in enumerate(arch.layers):
        n_out = prod(arch.shapes[layer.name])
        n_in = sum(prod(arch.shapes[s]) for s in layer.inputs)
        if layer.op not in ("flatten", "identity") and n_out * n_in > MAX_DENSE_ENTRIES:
            raise UnsupportedCaseError(f"{arch.source}: layers[{i}] ({layer.name}) compiles to a dense {n_out} x "
                                       f"{n_in} block, more than the {MAX_DENSE_ENTRIES:,} entries exactident "
                                       f"handles per layer")
    return _Compiler(arch).run()


def as_plain_network(arch: Architecture) -> Network | None:
    """The plain layered ReLU MLP ``arch`` is, or None when it is anything more.

    Plain means: its compiled form has every weight and bias free and distinct and every
    hidden slope 0 (``linear``/``relu`` alternation with biases, ``identity`` and ``flatten``
    allowed, ending with ``linear``).  Such a case is analysed by the plain engine.
    """
    net = compile_architecture(arch)
    return net if net.is_plain() else None


def plain_parameter_names(arch: Architecture) -> dict[str, str]:
    """For a plain ``arch``: ``{"W_1": "fc1.weight[i,j]", "b_1": "fc1.bias[i]", ...}`` (provenance)."""
    linear = [layer for layer in arch.layers if layer.op == "linear"]
    out = {}
    for l, layer in enumerate(linear, 1):
        out[f"W_{l}"] = f"{layer.name}.weight[i,j]"
        out[f"b_{l}"] = f"{layer.name}.bias[i]"
    return out
