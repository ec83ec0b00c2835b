"""Verdicts of the layer-graph engine on generated layer graphs, against an independent exact truth.

Usage (from the repository root)::

    python benchmarks/layer_graph_verdicts.py --out benchmarks/layer_graph_verdicts_after.json

Cases: layer graphs built like ``exactident generate``'s architecture families
(:mod:`exactident.suites.families.architectures`: ``leaky-mlp``, ``prelu-mlp``, ``residual-mlp``,
``conv1d-pool``) plus three variants the families do not draw (``prelu-layer``: one PReLU slope per
layer; ``residual-linear``: no ReLU after the add; ``*-kink``: the first sample moved onto the kink
of a first-layer unit), fixed seeds, three sample sizes per network (about half, once and twice
``ceil(k / m)`` points for ``k`` parameters and ``m`` outputs).  Each case is run through
``exactident.check`` (``numeric=False, seed=0``).

The truth is computed here, in ``fractions.Fraction``, from the layer graph itself (its own
interpreter of ``linear, relu, leaky_relu, prelu, add, conv1d, avgpool1d, flatten``; no code of the
engine):

- ``identifiable`` when, for every resolution of the ties (each tied unit active or inactive), the
  forward-mode Jacobian ``d F_X / d theta`` has rank ``k - s``, ``s`` the dimension of the positive
  rescalings of hidden units (solved here from the graph: weight ``w`` from unit ``u`` to ``v`` moves
  by ``(lambda_v - lambda_u) w``, a bias by ``lambda_v b``, shared entries must move alike, pooled
  and added units share a scale, inputs and outputs keep theirs), plus the slope trades of a PReLU
  between two linear layers (:func:`slope_trades`, derived again here from the graph).  Rank ``k - s``
  on every piece makes ``F_X`` an immersion modulo those symmetries: locally identifiable up to them.
- ``not-identifiable`` when a direction ``delta`` (a coordinate ``e_j`` or a kernel vector of the
  Jacobian) keeps every output on ``X`` constant for small ``t > 0`` -- ``F_X(theta + t delta)`` is
  computed as an exact polynomial in ``t`` (the sign of a pre-activation for small ``t > 0`` is the
  sign of its first nonzero coefficient) -- while the output on some probe input changes (a nonzero
  coefficient of positive degree): then every neighbourhood of ``theta`` holds a parameter with the
  same outputs on ``X`` and another function.
- ``undecided`` otherwise (the truth is then not used to judge the engine).

A *wrong* verdict is a decided engine verdict opposite to a decided truth.  Prints a table per family
and writes every case to ``--out`` (JSON).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from collections import Counter
from fractions import Fraction
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # the checkout's exactident, installed or not

MAX_TRUTH_TIES = 6

# ----------------------------------------------------------------------------- the independent interpreter


def _q(s: Any) -> Fraction:
    return Fraction(s)


def _params(graph: dict[str, Any]) -> list[tuple[str, str, tuple[int, ...]]]:
    """Every number of every weight and bias of the graph, in layer order: (layer, field, index)."""
    out = []
    for layer in graph["layers"]:
        for fld in ("weight", "bias"):
            if fld not in layer:
                continue

            _walk(layer[fld], (), layer["name"], fld, out)
    return out


def _walk(v: Any, idx: tuple[int, ...], name: str, fld: str, out: list) -> None:
    if isinstance(v, list):
        for i, x in enumerate(v):
            _walk(x, idx + (i,), name, fld, out)
    else:
        out.append((name, fld, idx))


class Num:
    """Number systems the interpreter runs on: values with tangents (Jacobian) or polynomials in t."""


class Tangent(Num):
    """(value, {j: d value / d theta_j}); ties resolved by ``side[(sample, layer, index)]``."""

    def __init__(self, side: dict[tuple[int, str, int], bool] | None = None) -> None:
        self.side = side or {}
        self.ties: list[tuple[int, str, int]] = []

    def const(self, q: Fraction):
        return (q, {})

    def param(self, j: int, q: Fraction):
        return (q, {j: Fraction(1)})

    def add(self, a, b):
        g = dict(a[1])
        for j, v in b[1].items():
            g[j] = g.get(j, 0) + v
        return (a[0] + b[0], g)

    def mul(self, a, b):
        g = {j: v * b[0] for j, v in a[1].items()} if b[0] else {}
        if a[0]:
            for j, v in b[1].items():
                g[j] = g.get(j, 0) + a[0] * v
        return (a[0] * b[0], g)

    def scale(self, a, q: Fraction):
        return (a[0] * q, {j: v * q for j, v in a[1].items()})

    def positive(self, z, key) -> bool:
        if z[0] != 0:
            return z[0] > 0
        self.ties.append(key)
        return self.side.get(key, True)


class Poly(Num):
    """Polynomials in ``t`` (coefficient lists), for ``theta + t delta``; signs for small ``t > 0``."""

    def __init__(self, delta: dict[int, Fraction]) -> None:
        self.delta = delta

    def const(self, q: Fraction):
        return [q]

    def param(self, j: int, q: Fraction):
        return [q, self.delta[j]] if self.delta.get(j) else [q]

    def add(self, a, b):
        n = max(len(a), len(b))
        return [(a[i] if i < len(a) else 0) + (b[i] if i < len(b) else 0) for i in range(n)]

    def mul(self, a, b):
        out = [Fraction(0)] * (len(a) + len(b) - 1)
        for i, x in enumerate(a):
            if x:
                for k, y in enumerate(b):
                    out[i + k] += x * y
        return out

    def scale(self, a, q: Fraction):
        return [x * q for x in a]

    def positive(self, z, key) -> bool:
        for c in z:
            if c:
                return c > 0
        return True  # identically 0: either side gives 0


def forward(graph: dict[str, Any], x: list[Fraction], num: Num, sample: int):
    """The graph's output on ``x`` in the number system ``num`` (flat list)."""
    pidx = {key: j for j, key in enumerate(_params(graph))}

    def P(layer: str, fld: str, idx: tuple[int, ...], value: Any):
        return num.param(pidx[(layer, fld, idx)], _q(value))

    shape = list(graph["input_shape"])
    env: dict[str, tuple[list[int], list[Any]]] = {"input": (shape, [num.const(_q(v)) for v in x])}
    zero = num.const(Fraction(0))
    for layer in graph["layers"]:
        op, name = layer["op"], layer["name"]
        ins = [env[s] for s in layer["inputs"]]
        sh, v = ins[0]
        if op == "linear":
            W = layer["weight"]
            out = []
            for i, row in enumerate(W):
                acc = P(name, "bias", (i,), layer["bias"][i])
                for jj, w in enumerate(row):
                    acc = num.add(acc, num.mul(P(name, "weight", (i, jj), w), v[jj]))
                out.append(acc)
            env[name] = ([len(W)], out)
        elif op in ("relu", "leaky_relu", "prelu"):
            out = []
            C = sh[0] if len(sh) > 1 else len(v)
            per = len(v) // C if len(sh) > 1 else 1
            for u, z in enumerate(v):
                if num.positive(z, (sample, name, u)):
                    out.append(z)
                elif op == "relu":
                    out.append(zero)
                elif op == "leaky_relu":
                    out.append(num.scale(z, _q(layer["negative_slope"])))
                else:
                    w = layer["weight"]
                    c = 0 if len(w) == 1 else u // per
                    out.append(num.mul(P(name, "weight", (c,), w[c]), z))
            env[name] = (sh, out)
        elif op == "add":
            out = v
            for _sh2, v2 in ins[1:]:
                out = [num.add(a, b) for a, b in zip(out, v2)]
            env[name] = (sh, out)
        elif op == "conv1d":
            cin, n = sh
            K, pad = layer["kernel_size"][0], layer["padding"][0]
            W = layer["weight"]
            out = []
            for c in range(layer["out_channels"]):
                for p in range(n + 2 * pad - K + 1):
                    acc = P(name, "bias", (c,), layer["bias"][c])
                    for ci in range(cin):
                        for r in range(K):
                            q = p + r - pad
                            if 0 <= q < n:
                                acc = num.add(acc, num.mul(P(name, "weight", (c, ci, r), W[c][ci][r]),
                                                           v[ci * n + q]))
                    out.append(acc)
            env[name] = ([layer["out_channels"], n + 2 * pad - K + 1], out)
        elif op == "avgpool1d":
            C, n = sh
            K = layer["kernel_size"][0]
            out = []
            for c in range(C):
                for p in range(n // K):
                    acc = zero
                    for r in range(K):
                        acc = num.add(acc, v[c * n + p * K + r])
                    out.append(num.scale(acc, Fraction(1, K)))
            env[name] = ([C, n // K], out)
        elif op == "flatten":
            env[name] = ([len(v)], v)
        else:
            raise SystemExit(f"layer_graph_verdicts: op {op} not interpreted")
    return env[graph["output"]][1]


# ----------------------------------------------------------------------------- exact linear algebra (Fractions)


def rank_and_kernel(rows: list[list[Fraction]], k: int) -> tuple[int, list[list[Fraction]]]:
    """Rank of a matrix with ``k`` columns, and a basis of its kernel (Gauss-Jordan over Q)."""
    M = [list(r) for r in rows]
    piv: list[int] = []
    r = 0
    for c in range(k):
        p = next((i for i in range(r, len(M)) if M[i][c] != 0), None)
        if p is None:
            continue
        M[r], M[p] = M[p], M[r]
        inv = 1 / M[r][c]
        M[r] = [a * inv for a in M[r]]
        for i in range(len(M)):
            if i != r and M[i][c] != 0:
                f = M[i][c]
                M[i] = [a - f * b for a, b in zip(M[i], M[r])]
        piv.append(c)
        r += 1
    kernel = []
    for f in (c for c in range(k) if c not in piv):
        vec = [Fraction(0)] * k
        vec[f] = Fraction(1)
        for i, c in enumerate(piv):
            vec[c] = -M[i][f]
        kernel.append(vec)
    return r, kernel


def symmetry_dim(graph: dict[str, Any]) -> int:
    """``s``: dimension of the positive rescalings of hidden units that keep the function (see the docstring)."""
    params = _params(graph)
    pidx = {key: j for j, key in enumerate(params)}
    nvar = [0]
    scale: dict[str, list[Any]] = {}  # node -> per unit: a linear form {var: coeff} of lambda

    def fresh() -> dict[int, Fraction]:
        nvar[0] += 1
        return {nvar[0] - 1: Fraction(1)}

    constraints: list[dict[int, Fraction]] = []
    occ: dict[int, list[dict[int, Fraction]]] = {}  # parameter -> the moves of its occurrences

    def diff(a, b, q: Fraction) -> dict[int, Fraction]:
        out = {i: c * q for i, c in a.items()}
        for i, c in b.items():
            out[i] = out.get(i, 0) - c * q
        return out

    shapes: dict[str, list[int]] = {"input": list(graph["input_shape"])}
    n_in = 1
    for s in graph["input_shape"]:
        n_in *= s
    scale["input"] = [{} for _ in range(n_in)]
    for layer in graph["layers"]:
        op, name = layer["op"], layer["name"]
        src = layer["inputs"][0]
        lam_in, sh = scale[src], shapes[src]
        if op == "linear":
            out = [fresh() for _ in layer["weight"]]
            for i, row in enumerate(layer["weight"]):
                occ.setdefault(pidx[(name, "bias", (i,))], []).append(diff(out[i], {}, _q(layer["bias"][i])))
                for jj, w in enumerate(row):
                    occ.setdefault(pidx[(name, "weight", (i, jj))], []).append(diff(out[i], lam_in[jj], _q(w)))
            scale[name], shapes[name] = out, [len(out)]
        elif op in ("relu", "leaky_relu", "prelu"):
            scale[name], shapes[name] = lam_in, sh
            if op == "prelu":
                for c in range(len(layer["weight"])):
                    occ.setdefault(pidx[(name, "weight", (c,))], []).append({})
        elif op == "add":
            for other in layer["inputs"][1:]:
                for a, b in zip(lam_in, scale[other]):
                    constraints.append(diff(a, b, Fraction(1)))
            scale[name], shapes[name] = lam_in, sh
        elif op == "conv1d":
            cin, n = sh
            K, pad = layer["kernel_size"][0], layer["padding"][0]
            n_out = n + 2 * pad - K + 1
            out = [fresh() for _ in range(layer["out_channels"] * n_out)]
            for c in range(layer["out_channels"]):
                for p in range(n_out):
                    o = out[c * n_out + p]
                    occ.setdefault(pidx[(name, "bias", (c,))], []).append(diff(o, {}, _q(layer["bias"][c])))
                    for ci in range(cin):
                        for r in range(K):
                            q = p + r - pad
                            if 0 <= q < n:
                                occ.setdefault(pidx[(name, "weight", (c, ci, r))], []).append(
                                    diff(o, lam_in[ci * n + q], _q(layer["weight"][c][ci][r])))
            scale[name], shapes[name] = out, [layer["out_channels"], n_out]
        elif op == "avgpool1d":
            C, n = sh
            K = layer["kernel_size"][0]
            out = []
            for c in range(C):
                for p in range(n // K):
                    window = [lam_in[c * n + p * K + r] for r in range(K)]
                    for w in window[1:]:
                        constraints.append(diff(window[0], w, Fraction(1)))
                    out.append(window[0])
            scale[name], shapes[name] = out, [C, n // K]
        elif op == "flatten":
            scale[name], shapes[name] = lam_in, [len(lam_in)]
    for form in scale[graph["output"]]:
        constraints.append(form)  # outputs keep their scale
    moves: list[dict[int, Fraction]] = []
    for j in range(len(params)):
        first, *rest = occ[j]
        for o in rest:
            constraints.append(diff(first, o, Fraction(1)))
        moves.append(first)
    nv = nvar[0]
    _r, basis = rank_and_kernel([[c.get(i, Fraction(0)) for i in range(nv)] for c in constraints], nv)
    D = [[sum((m.get(i, 0) * vec[i] for i in m), Fraction(0)) for m in moves] for vec in basis]
    D += slope_trades(graph)
    r, _ = rank_and_kernel(D, len(params))
    return r


def slope_trades(graph: dict[str, Any]) -> list[list[Fraction]]:
    """Tangents of the slope trades of ``linear A -> prelu -> linear B`` (B the prelu's only reader).

    ``prelu_a(z) = a z + (1 - a) relu(z)``: scaling column ``v`` of ``B`` by ``1 + s_v`` and setting
    ``a_v -> 1 - (1 - a_v) / (1 + s_v)`` keeps ``(1 - a_v) B[:, v]`` and adds ``s_v B[:, v]`` to ``a_v B[:, v]``;
    with ``b_B -= sum_v s_v B[:, v] b_A[v]`` the output of ``B`` is unchanged for every input of ``A`` when
    ``sum_v s_v B[:, v] A[v, :] = 0`` (``s_v`` common to the units sharing a slope).  Tangent:
    ``da_v = s_v (1 - a_v)``, ``dB[:, v] = s_v B[:, v]``, ``db_B = -sum_v s_v B[:, v] b_A[v]``.
    """
    params = _params(graph)
    pidx = {key: j for j, key in enumerate(params)}
    layers = {layer["name"]: layer for layer in graph["layers"]}
    out = []
    for p in graph["layers"]:
        if p["op"] != "prelu" or layers.get(p["inputs"][0], {}).get("op") != "linear":
            continue
        readers = [layer for layer in graph["layers"] if p["name"] in layer["inputs"]]
        if len(readers) != 1 or readers[0]["op"] != "linear" or graph["output"] == p["name"]:
            continue
        A, B, slopes = layers[p["inputs"][0]], readers[0], p["weight"]
        n = len(A["weight"])
        group = [0 if len(slopes) == 1 else v for v in range(n)]
        ng = len(slopes)
        # the conditions sum_v s_g(v) B[i, v] A[v, k] = 0, one row per (i, k), one column per slope
        rows = [[sum((_q(B["weight"][i][v]) * _q(A["weight"][v][k]) for v in range(n) if group[v] == g), Fraction(0))
                 for g in range(ng)] for i in range(len(B["weight"])) for k in range(len(A["weight"][0]))]
        _r, ker = rank_and_kernel(rows, ng)
        for sig in ker:
            move = [Fraction(0)] * len(params)
            for g in range(ng):
                move[pidx[(p["name"], "weight", (g,))]] = sig[g] * (1 - _q(slopes[g]))
            for i, row in enumerate(B["weight"]):
                for v in range(n):
                    move[pidx[(B["name"], "weight", (i, v))]] = sig[group[v]] * _q(row[v])
                move[pidx[(B["name"], "bias", (i,))]] = -sum((sig[group[v]] * _q(row[v]) * _q(A["bias"][v])
                                                              for v in range(n)), Fraction(0))
            out.append(move)
    return out


def jacobian(graph: dict[str, Any], X: list[list[Fraction]], side: dict | None = None):
    """Rows ``d F_X / d theta`` (one per sample and output) and the ties met."""
    k = len(_params(graph))
    num = Tangent(side)
    rows = []
    for i, x in enumerate(X):
        for out in forward(graph, x, num, i):
            rows.append([out[1].get(j, Fraction(0)) for j in range(k)])
    return rows, num.ties


def _moves_outputs(graph, X, delta) -> bool:
    """Whether some output on ``X`` has a nonzero coefficient of positive degree along ``theta + t delta``."""
    num = Poly(delta)
    return any(any(c != 0 for c in out[1:]) for i, x in enumerate(X) for out in forward(graph, x, num, i))


def truth(graph: dict[str, Any], X: list[list[Fraction]], probes: list[list[Fraction]],
          extra: list[dict[int, Fraction]] = ()) -> tuple[str, str]:
    """The independent verdict (``identifiable``, ``not-identifiable`` or ``undecided``) and why.

    ``extra``: more candidate directions (the engine's line, in the engine's parameter order, which is this
    script's: layer by layer, weights then biases): each is checked here like any other.
    """
    k = len(_params(graph))
    s = symmetry_dim(graph)
    _rows, ties = jacobian(graph, X)
    ties = sorted(set(ties))
    kernels: list[list[Fraction]] = []
    if len(ties) <= MAX_TRUTH_TIES:
        ranks = []
        for sides in itertools.product((True, False), repeat=len(ties)):
            J, _ = jacobian(graph, X, dict(zip(ties, sides)))
            r, ker = rank_and_kernel(J, k)
            if r > k - s:
                raise SystemExit(f"layer_graph_verdicts: rank {r} > k - s = {k - s}: the rescalings are wrong")
            ranks.append(r)
            kernels += ker
        if min(ranks) == k - s:
            return "identifiable", f"rank {k - s} = k - s on all {len(ranks)} tie resolutions"
    directions = [{j: Fraction(1)} for j in range(k)] + [{j: Fraction(-1)} for j in range(k)] + list(extra)
    for vec in kernels[:4 * k]:
        d = {j: v for j, v in enumerate(vec) if v}
        directions += [d, {j: -v for j, v in d.items()}]
    for d in directions:
        if not _moves_outputs(graph, X, d) and _moves_outputs(graph, probes, d):
            return "not-identifiable", f"line along {sorted(d)[:4]} keeps F_X, moves the function"
    return "undecided", f"{len(ties)} ties" if len(ties) > MAX_TRUTH_TIES else "rank below k - s, no line found"


# ----------------------------------------------------------------------------- the cases


def _families():
    from exactident.suites.families import architectures as A

    def prelu_layer(rng, widths):
        layers = A._mlp(rng, widths, "prelu")
        for layer in layers:
            if layer["op"] == "prelu":
                layer["weight"] = layer["weight"][:1]
        return layers

    def residual_linear(rng, widths):
        layers = A._residual(rng, widths)
        layers = [layer for layer in layers if layer["name"] != "relu2"]
        layers[-1]["inputs"] = ["res"]
        return layers

    mlp_shape, conv_shape = (lambda w: [w[0]]), (lambda w: [1, w[0]])
    mlp_out = lambda w: f"fc{len(w) - 1}"  # noqa: E731
    return {
        "leaky-mlp": (lambda r, w: A._mlp(r, w, "leaky_relu"), mlp_shape, mlp_out,
                      [[2, 3, 1], [2, 2, 2], [3, 2, 1], [1, 3, 1], [2, 2, 2, 1]]),
        "prelu-mlp": (lambda r, w: A._mlp(r, w, "prelu"), mlp_shape, mlp_out,
                      [[2, 3, 1], [2, 2, 2], [1, 3, 1], [3, 2, 1]]),
        "prelu-layer": (prelu_layer, mlp_shape, mlp_out, [[2, 3, 1], [2, 2, 2], [1, 3, 1]]),
        "residual-mlp": (A._residual, mlp_shape, lambda w: "head", [[2, 2, 1], [2, 3, 1], [1, 2, 1]]),
        "residual-linear": (residual_linear, mlp_shape, lambda w: "head", [[2, 2, 1], [2, 3, 1], [1, 2, 1]]),
        "conv1d-pool": (A._conv, conv_shape, lambda w: "fc", [[4, 2, 1], [4, 1, 1], [2, 2, 1]]),
    }


def _on_kink(graph: dict[str, Any], x: list[Fraction]) -> list[Fraction]:
    """``x`` moved (one coordinate) onto the kink of the first unit of the first layer."""
    first = graph["layers"][0]
    x = list(x)
    if first["op"] == "linear":
        w, b = [_q(v) for v in first["weight"][0]], _q(first["bias"][0])
        x[-1] = -(b + sum(wi * xi for wi, xi in zip(w[:-1], x[:-1]))) / w[-1]
    else:  # conv1d, channel 0 at position 1: the centre tap multiplies x[1]
        w, b = [_q(v) for v in first["weight"][0][0]], _q(first["bias"][0])
        rest = w[0] * x[0] + (w[2] * x[2] if len(x) > 2 else 0)
        x[1] = -(b + rest) / w[1]
    return x


def _pname(graph: dict[str, Any], j: int) -> str:
    layer, fld, _idx = _params(graph)[j]
    return f"{layer}.{fld}"


def cases(seed: int = 0):
    """(family, widths, n, graph, X) for every case, deterministic."""
    from exactident.suites.draft import SAMPLE_DENS, SAMPLE_NUM
    from exactident.suites.families.architectures import _n_params
    from exactident.suites.rng import HashRng

    for fam, (make, shape, output, widths_list) in _families().items():
        for widths in widths_list:
            rng = HashRng("layer-graph-verdicts", seed, fam, widths)
            layers = make(rng.child("net"), widths)
            graph = {"input_shape": shape(widths), "layers": layers, "output": output(widths)}
            per = -(-_n_params(layers) // widths[-1])
            n_in = 1
            for s in shape(widths):
                n_in *= s
            for n in sorted({max(1, per // 2), per, 2 * per + 2}):
                r = rng.child("sample", n)
                X = [[r.rational(-SAMPLE_NUM, SAMPLE_NUM, SAMPLE_DENS) for _ in range(n_in)] for _ in range(n)]
                yield fam, widths, n, graph, X
                if fam in ("leaky-mlp", "prelu-mlp", "residual-mlp", "conv1d-pool") and n == per:
                    yield fam + "-kink", widths, n, graph, [_on_kink(graph, X[0])] + X[1:]


def run(seed: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
    """Every case: the engine's report next to the truth."""
    from exactident.check import check
    from exactident.io.case import parse_case
    from exactident.suites.draft import fstr
    from exactident.suites.rng import HashRng

    out = []
    for c, (fam, widths, n, graph, X) in enumerate(cases(seed)):
        if limit is not None and c >= limit:
            break
        obj = {"format": "exactident-case/2", "name": f"{fam}-{'-'.join(map(str, widths))}-n{n}",
               "input_shape": graph["input_shape"], "layers": graph["layers"], "output": graph["output"],
               "sample": [[fstr(v) for v in x] for x in X]}
        t0 = time.perf_counter()
        report = check(parse_case(obj), numeric=False, seed=0)
        seconds = time.perf_counter() - t0
        pr = HashRng("probes", seed, c)
        probes = [[pr.rational(-24, 24, (1, 2, 3, 7)) for _ in X[0]] for _ in range(12)]
        # the engine's line (its direction, its probe) joins the candidates: the truth checks it like the others
        cert = report.certificate or {}
        extra = []
        for key in ("line", "constant_units", "dead_units"):
            part = cert.get(key)
            if part is None:
                continue
            pairs = part["delta"] if key != "dead_units" else [[part["parameter"], "-1"]]
            names = part.get("names") or [part.get("name")]
            if [n.split("[")[0] for n in names] != [_pname(graph, int(j)) for j, _q in pairs]:
                raise SystemExit("layer_graph_verdicts: the engine numbers parameters differently")
            extra.append({int(j): Fraction(q) for j, q in pairs})
            probes.append([Fraction(v) for v in part.get("probe") or part["x"]])
        t, why = truth(graph, X, probes, extra)
        wrong = report.verdict in ("identifiable", "not-identifiable") and t in ("identifiable", "not-identifiable") \
            and report.verdict != t
        out.append({"family": fam, "name": obj["name"], "widths": widths, "n_samples": n, "verdict": report.verdict,
                    "decided_by": report.decided_by, "n_ties": report.n_ties, "truth": t, "truth_why": why,
                    "wrong": wrong, "reason": report.reason, "seconds": round(seconds, 3)})
        print(f"{obj['name']:34s} {report.verdict:17s} {report.decided_by:22s} truth {t:17s} "
              f"{'WRONG' if wrong else ''}", file=sys.stderr)
    return out


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown: per family, the verdict counts, the truth counts and the wrong verdicts."""
    lines = ["| family | cases | identifiable | not-identifiable | inconclusive | truth decidable | "
             "inconclusive, truth decidable | wrong |", "|---|---|---|---|---|---|---|---|"]
    fams = sorted({r["family"] for r in rows})
    for fam in fams + ["all"]:
        rs = [r for r in rows if fam in ("all", r["family"])]
        v = Counter(r["verdict"] for r in rs)
        dec = sum(r["truth"] != "undecided" for r in rs)
        inc_dec = sum(r["truth"] != "undecided" and r["verdict"] == "inconclusive" for r in rs)
        lines.append(f"| {fam} | {len(rs)} | {v['identifiable']} | {v['not-identifiable']} | {v['inconclusive']} | "
                     f"{dec} | {inc_dec} | {sum(r['wrong'] for r in rs)} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="write every case to this JSON file")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, help="only the first cases")
    args = ap.parse_args()
    rows = run(args.seed, args.limit)
    print(table(rows))
    by = Counter(r["decided_by"] for r in rows)
    print("decided_by:", dict(sorted(by.items())))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"seed": args.seed, "cases": rows}, fh, indent=1)
            fh.write("\n")


if __name__ == "__main__":
    main()
