"""Structural certificates: straight lines of constant outputs named by the mechanism behind them.

When Theorems 8 and 9 leave a case ``inconclusive`` (``R_Gamma < R_A``,
``R_Gamma < dim``), trained networks are usually not identifiable for a plain
structural reason visible in the exact pre-activations
(:mod:`exactident.model.diagnostics`).  Each reason gives a straight line
``theta(t) = theta + t delta`` along which ``f_{theta(t)}(X) = f_theta(X)``
exactly, for ``0 < t < t0`` (``t0`` exact, or no bound):

``dead-neuron``
    hidden neuron ``(l, v)`` strictly inactive on every sample: ``delta = -e_{b_l[v]}``
    (the neuron stays strictly inactive for every ``t > 0``);
``untouched-input``
    input ``j`` zero on every sample: ``delta = e_{W_1[v, j]}`` (``z_1`` unchanged on ``X``);
``proportional-neurons``
    ``h_u = c h_v`` on every sample (``c > 0``, same strict activation set, no tie):
    ``W_{l+1}[k, u] += t``, ``W_{l+1}[k, v] -= c t`` (``z_{l+1}`` unchanged on ``X``);
``always-active-block``
    neurons ``i != j`` of layer ``l`` strictly active on every sample: with
    ``E = e_i e_j^T`` (``E^2 = 0``, so ``(I + tE)^{-1} = I - tE``),
    ``theta(t) = (W_l + tE W_l, b_l + tE b_l, W_{l+1} - t W_{l+1} E)``, linear in ``t``;
``unpinned-hyperplane``
    the samples where ``z_l(x^i)_v >= 0`` do not pin the neuron's hyperplane
    (``rank [h_{l-1}(x^i), 1] < N_{l-1} + 1`` over them): its incoming weights and
    bias move along a kernel vector ``d``; ``z_l(x^i)_v`` is unchanged where it is
    ``>= 0`` and stays negative elsewhere for ``t < t0 = min -z_i / s_i`` over the
    samples with ``s_i = [h_{l-1}(x^i), 1] . d > 0``.

Non-equivalence: each line moves exactly one factor of some path whose other
factors are nonzero (such a path exists because theta is not in ``S``), so that
path product is a non-constant polynomial in ``t``: a ``path-products`` witness
(:mod:`exactident.boundary.nonequivalence`; proofs in docs/theory.md, "Structural
certificates").  The certificate is a ``line`` part (checked like any straight
line) plus a ``structural`` part naming the mechanism, its neurons and ``t0``,
which :mod:`exactident.verify.structural` re-derives from the case.

When no mechanism applies off the boundary, :func:`settle` looks for a straight
line in ``ker Gamma`` (:func:`exactident.boundary.line.find_line`) and otherwise
says what was tried.  Candidates are chosen in the canonical order of
:mod:`exactident.boundary.canonical` (neuron ranks and scales), so equivalent
presentations get the same mechanism on the same neuron and directions on one ray.
Called by :func:`exactident.check.check` for ``inconclusive`` verdicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import flint

from exactident.boundary.canonical import Canonical, canonical_form, canonical_nullspace
from exactident.boundary.entering import primitive_integer
from exactident.boundary.line import find_line, line_along, line_summary, segment_text
from exactident.errors import InvariantViolation
from exactident.io.rationals import format_fmpq
from exactident.model.activation import ActivationState
from exactident.model.conditions import DEGENERATE, IDENTIFIABLE, INCONCLUSIVE, NOT_IDENTIFIABLE, decided_by
from exactident.model.diagnostics import hyperplane_rows, neuron_activity, proportional_twins, untouched_inputs
from exactident.model.gamma import gamma_exact
from exactident.model.network import Network

__all__ = ["MAX_LINE_GAMMA_ENTRIES", "MECHANISMS", "RULES", "Settlement", "decided_by", "find_structural",
           "settle"]

#: The structural mechanisms, in the order they are tried.
MECHANISMS = ("dead-neuron", "untouched-input", "proportional-neurons", "always-active-block",
              "unpinned-hyperplane")
#: Every value of the report's ``decided_by`` and the verdict it goes with (docs/cli.md).
RULES = {"theorem-9": IDENTIFIABLE, "boundary-cs": IDENTIFIABLE, "theorem-8": NOT_IDENTIFIABLE,
         "boundary-entering": NOT_IDENTIFIABLE, "line": NOT_IDENTIFIABLE,
         **{m: NOT_IDENTIFIABLE for m in MECHANISMS}, "degenerate": DEGENERATE, "none": INCONCLUSIVE}
#: The exact kernel of ``Gamma`` for the line search is computed up to this many entries of ``Gamma``
#: (a budget: exact elimination grows fast; docs/theory.md gives measured times).
MAX_LINE_GAMMA_ENTRIES = 200_000

_ZERO = flint.fmpq(0)
_ONE = flint.fmpq(1)

Delta = dict[tuple, flint.fmpq]  # ("W", l, row, col) or ("b", l, row) -> value


@dataclass
class Settlement:
    """What :func:`settle` found for an ``inconclusive`` case.

    Attributes
    ----------
    certificate : dict or None
        ``{"line": ..., "structural": ...}`` (a mechanism), ``{"line": ...}`` (the
        kernel line search), or None.
    decided_by : str or None
        The mechanism, ``"line"``, or None.
    clause : str
        For the reason: what proves non-identifiability, or which searches failed.
    summary : list of str
        Readable lines (the certificate, or what was tried).
    """

    certificate: dict[str, Any] | None
    decided_by: str | None
    clause: str
    summary: list[str] = field(default_factory=list)


# --- paths with nonzero factors (theta not in S) -------------------------------------------------


def _into(net: Network, l: int, u: int) -> tuple[int, list[int]]:
    """A path ending at node ``(l, u)`` whose factors are all nonzero: ``(start, nodes of layers start..l)``."""
    if l == 0:
        return 0, [u]
    if net.b[l - 1][u] != _ZERO:
        return l, [u]
    j = next(j for j in range(net.widths[l - 1]) if net.W[l - 1][u, j] != _ZERO)  # (l, u) not in S
    start, nodes = _into(net, l - 1, j)
    return start, nodes + [u]


def _out(net: Network, l: int, v: int) -> list[int]:
    """Nodes of layers ``l+1..L`` continuing from ``(l, v)`` along nonzero weights (theta not in S)."""
    nodes, cur = [], v
    for m in range(l + 1, net.L + 1):
        cur = next(k for k in range(net.widths[m]) if net.W[m - 1][k, cur] != _ZERO)
        nodes.append(cur)
    return nodes


def _value(net: Network, key: tuple) -> flint.fmpq:
    return net.b[key[1] - 1][key[2]] if key[0] == "b" else net.W[key[1] - 1][key[2], key[3]]


def _path_witness(net: Network, delta: Delta, start: int, nodes: list[int]) -> dict[str, Any]:
    """The ``path-products`` witness of a path (nodes of layers ``start..L``) along ``theta + t delta``."""
    keys: list[tuple] = [("b", start, nodes[0])] if start >= 1 else []
    keys += [("W", m, nodes[m - start], nodes[m - start - 1]) for m in range(start + 1, net.L + 1)]
    poly = [_ONE]
    for key in keys:
        a, d = _value(net, key), delta.get(key, _ZERO)
        poly = [(poly[k] * a if k < len(poly) else _ZERO) + (poly[k - 1] * d if k >= 1 else _ZERO)
                for k in range(len(poly) + 1)]
    while len(poly) > 1 and poly[-1] == _ZERO:
        poly.pop()
    if len(poly) < 2:
        raise InvariantViolation(f"structural line: the path product from layer {start} through {nodes} is constant")
    return {"invariant": "path-products", "path": {"start": start, "neurons": nodes[:-1], "output": nodes[-1]},
            "coefficients": [format_fmpq(c) for c in poly]}


def _row_witness(net: Network, delta: Delta, l: int, v: int) -> dict[str, Any]:
    """Witness for a direction that moves the incoming row of ``(l, v)``: through its first moved entry."""
    if delta.get(("b", l, v), _ZERO) != _ZERO:
        return _path_witness(net, delta, l, [v] + _out(net, l, v))
    j = next(j for j in range(net.widths[l - 1]) if delta.get(("W", l, v, j), _ZERO) != _ZERO)
    start, nodes = _into(net, l - 1, j)
    return _path_witness(net, delta, start, nodes + [v] + _out(net, l, v))


# --- the mechanisms ------------------------------------------------------------------------------


def _name(key: tuple) -> str:
    return f"W_{key[1]}[{key[2]},{key[3]}]" if key[0] == "W" else f"b_{key[1]}[{key[2]}]"


def _dense(net: Network, delta: Delta) -> tuple[list[flint.fmpq_mat], list[list[flint.fmpq]]]:
    dW = [flint.fmpq_mat(net.widths[l], net.widths[l - 1]) for l in range(1, net.L + 1)]
    db = [[_ZERO] * net.widths[l] for l in range(1, net.L + 1)]
    for key, d in delta.items():
        if key[0] == "W":
            dW[key[1] - 1][key[2], key[3]] = d
        else:
            db[key[1] - 1][key[2]] = d
    return dW, db


def _row_t0(net: Network, X, state: ActivationState, l: int, v: int, delta: Delta) -> flint.fmpq | None:
    """``sup {t : z_l(x^i)_v + t s_i < 0 wherever z < 0}`` for a move of the incoming row (None: no bound)."""
    Z = state.Z[l - 1]
    t0 = None
    for i in range(Z.nrows()):
        h = list(X[i]) if l == 1 else [max(state.Z[l - 2][i, j], _ZERO) for j in range(net.widths[l - 1])]
        s = sum((delta.get(("W", l, v, j), _ZERO) * h[j] for j in range(len(h))), delta.get(("b", l, v), _ZERO))
        if Z[i, v] < _ZERO < s:
            t = -Z[i, v] / s
            t0 = t if t0 is None or t < t0 else t0
    return t0


def _canonical_key(canon: Canonical, l: int, v: int) -> tuple[int, int]:
    return l, canon.rank[(l, v)]


def _first_of_layer(net: Network, canon: Canonical, m: int) -> int:
    """The canonically first neuron of layer ``m`` (output 0 when ``m = L``)."""
    if m == net.L:
        return 0
    return min(range(net.widths[m]), key=lambda k: canon.rank[(m, k)])


def _dead(net, X, state, canon):
    dead = sorted(((a.l, a.v) for a in neuron_activity(state) if a.is_dead),
                  key=lambda lv: _canonical_key(canon, *lv))
    if not dead:
        return None
    l, v = dead[0]
    delta: Delta = {("b", l, v): -_ONE}
    part = {"mechanism": "dead-neuron", "neurons": [[l, v]], "t0": None}
    clause = (f"hidden neuron ({l},{v}) is strictly inactive on all {len(X)} samples: lowering its bias keeps "
              "every output on X for every t > 0")
    return delta, part, _row_witness(net, delta, l, v), clause


def _untouched(net, X, state, canon):
    inputs = untouched_inputs(X)
    if not inputs or net.L < 2:
        return None
    j, v = inputs[0], _first_of_layer(net, canon, 1)
    delta: Delta = {("W", 1, v, j): _ONE}
    part = {"mechanism": "untouched-input", "input": j, "neurons": [[1, v]], "t0": None}
    witness = _path_witness(net, delta, 0, [j, v] + _out(net, 1, v))
    clause = (f"input {j} is 0 on all {len(X)} samples: moving its weight into hidden neuron (1,{v}) keeps "
              "every output on X for every t")
    return delta, part, witness, clause


def _twins(net, X, state, canon):
    pairs = []
    for l, u, v, c in proportional_twins(state):
        if canon.rank[(l, u)] > canon.rank[(l, v)]:
            u, v, c = v, u, 1 / c
        pairs.append((l, u, v, c))
    if not pairs:
        return None
    l, u, v, c = min(pairs, key=lambda p: (p[0], canon.rank[(p[0], p[1])], canon.rank[(p[0], p[2])]))
    k = _first_of_layer(net, canon, l + 1)
    delta: Delta = {("W", l + 1, k, u): _ONE, ("W", l + 1, k, v): -c}
    part = {"mechanism": "proportional-neurons", "neurons": [[l, u], [l, v]], "ratio": format_fmpq(c), "t0": None}
    start, nodes = _into(net, l, u)
    witness = _path_witness(net, delta, start, nodes + [k] + _out(net, l + 1, k))
    clause = (f"hidden neurons ({l},{u}) and ({l},{v}) have positively proportional activations on all "
              f"{len(X)} samples: moving outgoing weight from one to the other keeps every output on X for every t")
    return delta, part, witness, clause


def _block(net, X, state, canon):
    by_layer: dict[int, list[int]] = {}
    for a in neuron_activity(state):
        if a.is_always_active:
            by_layer.setdefault(a.l, []).append(a.v)
    layers = sorted(l for l, vs in by_layer.items() if len(vs) >= 2)
    if not layers:
        return None
    l = layers[0]
    i, j = sorted(by_layer[l], key=lambda v: canon.rank[(l, v)])[:2]
    delta: Delta = {}
    for c in range(net.widths[l - 1]):
        delta[("W", l, i, c)] = net.W[l - 1][j, c]
    delta[("b", l, i)] = net.b[l - 1][j]
    for k in range(net.widths[l + 1]):
        delta[("W", l + 1, k, j)] = -net.W[l][k, i]
    delta = {key: d for key, d in delta.items() if d != _ZERO}
    part = {"mechanism": "always-active-block", "neurons": [[l, i], [l, j]], "t0": None}
    clause = (f"hidden neurons ({l},{i}) and ({l},{j}) are strictly active on all {len(X)} samples, so the "
              f"mixing theta(t) = (W_{l} + tE W_{l}, b_{l} + tE b_{l}, W_{l + 1} - t W_{l + 1} E), E = e_{i} e_{j}^T "
              "(E^2 = 0: (I + tE)^-1 = I - tE), keeps every output on X for every t > 0")
    return delta, part, _row_witness(net, delta, l, i), clause


#: A fixed BLAS prime (checked by :func:`exactident.linalg.blas_modp.rank_blas`) for the pinned-hyperplane pre-test.
_PINNED_PRIME = 1_048_573


class _PinnedTest:
    """``pinned(l, v)``: is ``[h_{l-1}(x^i), 1]`` over the samples where ``z_l(x^i)_v >= 0`` of full column rank
    mod :data:`_PINNED_PRIME`?  Then it is over Q too (a nonzero minor of the integer rows ``[d h, d]``, ``d > 0``
    the layer's denominator, is nonzero mod p); False says nothing (speed only: the exact kernel decides).

    Each layer's rows are reduced once, from the numerators of the exact ``z`` (``relu`` commutes with ``d > 0``).
    """

    def __init__(self, X: Sequence[Sequence[flint.fmpq]], state: ActivationState) -> None:
        self.X, self.state = X, state
        self._num: dict[int, tuple[Any, int]] = {}
        self._rows: dict[int, Any] = {}
        self._signs: dict[int, Any] = {}

    def _numerators(self, l: int) -> tuple[Any, int]:
        """Numerators (object array ``n x N_l``) and denominator of ``z_l``, or of ``X`` for ``l = 0``: once each
        (layer ``l``'s rows and layer ``l - 1``'s signs read the same ``z``)."""
        import numpy as np

        if l not in self._num:
            M = flint.fmpq_mat(self.X) if l == 0 else self.state.Z[l - 1]
            Mz, den = M.numer_denom()
            self._num[l] = np.array(Mz.tolist(), dtype=object).reshape(M.nrows(), M.ncols()), int(den)
        return self._num[l]

    def __call__(self, l: int, v: int) -> bool:
        import numpy as np

        from exactident.linalg.blas_modp import rank_blas

        p, n = _PINNED_PRIME, len(self.X)
        if l not in self._rows:
            ints, den = self._numerators(l - 1)
            if l > 1:
                ints = np.where(ints > 0, ints, 0)
            rows = np.empty((n, ints.shape[1] + 1), dtype=np.int64)
            rows[:, :-1] = (ints % p).astype(np.int64)
            rows[:, -1] = den % p
            self._rows[l] = rows
        if l not in self._signs:
            self._signs[l] = self._numerators(l)[0] >= 0
        rows = self._rows[l][self._signs[l][:, v]]
        return rows.shape[0] >= rows.shape[1] and rank_blas(rows, p) == rows.shape[1]


def _unpinned(net, X, state, canon):
    hidden = sorted(((l, v) for l in net.hidden_layers() for v in range(net.widths[l])),
                    key=lambda lv: _canonical_key(canon, *lv))
    pinned = _PinnedTest(X, state)
    for l, v in hidden:
        if X and pinned(l, v):
            continue  # pinned (a rank mod p is a lower bound on the rank over Q): no exact kernel needed
        rows = hyperplane_rows(state, X, l, v, ties=True)
        n_in = net.widths[l - 1]
        if not rows:
            continue  # dead: the dead-neuron mechanism (or a tie-only neuron: below would need no rows)
        # Canonical columns: layer l-1 in canonical order, scaled to the normalised network.
        cols = list(range(n_in)) if l == 1 else sorted(range(n_in), key=lambda u: canon.rank[(l - 1, u)])
        scale = [_ONE if l == 1 else canon.scale[(l - 1, u)] for u in cols]
        M = flint.fmpq_mat([[r[u] * a for u, a in zip(cols, scale)] + [r[-1]] for r in rows])
        K = canonical_nullspace(M)
        if not K:
            continue
        d = primitive_integer([K[0][k] * scale[k] for k in range(n_in)] + [K[0][-1]])
        delta: Delta = {("W", l, v, u): d[k] for k, u in enumerate(cols) if d[k] != _ZERO}
        if d[-1] != _ZERO:
            delta[("b", l, v)] = d[-1]
        t0 = _row_t0(net, X, state, l, v, delta)
        rank = n_in + 1 - len(K)
        n_active = sum(1 for i in range(len(X)) if state.Z[l - 1][i, v] > _ZERO)
        part = {"mechanism": "unpinned-hyperplane", "neurons": [[l, v]],
                "t0": None if t0 is None else format_fmpq(t0)}
        clause = (f"hidden neuron ({l},{v}) is active on {n_active} of {len(X)} samples, which do not pin its "
                  f"hyperplane (rank [h_{l - 1}, 1] = {rank} < {n_in + 1} over them): moving its incoming weights "
                  f"and bias in that kernel keeps every output on X for 0 < t < t0 "
                  f"({'no bound' if t0 is None else 't0 in the certificate'})")
        return delta, part, _row_witness(net, delta, l, v), clause
    return None


_FINDERS = {"dead-neuron": _dead, "untouched-input": _untouched, "proportional-neurons": _twins,
            "always-active-block": _block, "unpinned-hyperplane": _unpinned}


def find_structural(net: Network, X: Sequence[Sequence[flint.fmpq]], state: ActivationState,
                    canon: Canonical) -> tuple[dict[str, Any], str] | None:
    """The first mechanism of :data:`MECHANISMS` present, as an exactly checked certificate.

    Parameters
    ----------
    net : Network
        Not in ``S``.
    X : n rows of N_0 fmpq
    state : ActivationState
    canon : Canonical
        Chooses the neuron (canonical order) and the kernel vector (canonical coordinates).

    Returns
    -------
    (certificate, clause) or None
        ``{"line": {"delta", "t0", "nonequivalence"}, "structural": {"mechanism", "neurons", ..., "t0"}}``
        and a reason clause; both ``t0`` are the segment ``[0, t0]`` proved (``None``: every ``t >= 0``).

    Raises
    ------
    InvariantViolation
        If a mechanism's line moves an output on ``X``, meets a kink on ``X`` elsewhere than at the
        mechanism's ``t0``, or its path product is constant (a bug).

    Examples
    --------
    The dead-neuron case of docs/theory.md: neuron (1,0) has bias -100.

    >>> from exactident.model.activation import activation_state
    >>> q = flint.fmpq
    >>> net = Network((1, 3, 2), [[[1], [-2], [-4]], [[3, 4, 1], [1, 1, 3]]], [[-100, 3, 1], [2, 2]])
    >>> X = [[q(1)], [q(2, 3)], [q(2)], [q(-4, 3)], [q(5, 2)]]
    >>> state = activation_state(net, X)
    >>> cert, _ = find_structural(net, X, state, canonical_form(net, X, state.Z))
    >>> cert["structural"], cert["line"]["delta"]
    ({'mechanism': 'dead-neuron', 'neurons': [[1, 0]], 't0': None}, {'b_1[0]': '-1'})
    """
    for mechanism in MECHANISMS:
        found = _FINDERS[mechanism](net, X, state, canon)
        if found is None:
            continue
        delta, part, witness, clause = found
        dW, db = _dense(net, delta)
        lp = line_along(net, dW, db, canon.points)  # the distinct points of X
        if not lp.is_constant():
            raise InvariantViolation(f"{mechanism} line moves an output on X (neurons {part.get('neurons')})")
        t0 = lp.segment_end()
        if (None if t0 is None else format_fmpq(t0)) != part["t0"]:
            raise InvariantViolation(f"{mechanism} line: its first kink on X is at t = {t0}, the mechanism says "
                                     f"t0 = {part['t0']} (neurons {part.get('neurons')})")
        line = {"delta": {_name(k): format_fmpq(d) for k, d in sorted(delta.items(), key=_sort_key)},
                "t0": part["t0"], "nonequivalence": witness}
        return {"line": line, "structural": part}, clause
    return None


def _sort_key(item: tuple[tuple, flint.fmpq]) -> tuple:
    key = item[0]
    return key[1], key[0] == "b", key[2], key[3] if key[0] == "W" else 0


def _kernel_line(net: Network, X, state: ActivationState, canon: Canonical) -> tuple[dict[str, Any] | None, str]:
    """The straight-line search in ``ker Gamma`` at the activation pattern, and what it tried."""
    entries = len(X) * net.widths[-1] * net.dim
    if entries > MAX_LINE_GAMMA_ENTRIES:
        return None, (f"line search in ker Gamma skipped (Gamma has {entries} entries, more than "
                      f"{MAX_LINE_GAMMA_ENTRIES})")
    K = canonical_nullspace(canon.search_matrix(gamma_exact(net, X, state.Z, state.pattern, canon.fixed)))
    line = find_line(net, canon, [(K, [])]) if K else None
    if line is None:
        return None, (f"no straight line in ker Gamma (dimension {len(K)}) keeps f(X) constant beyond first order "
                      "among the kernel directions tried")
    return line, ""


def settle(net: Network, X: Sequence[Sequence[flint.fmpq]], state: ActivationState, *,
           kernel_line: bool) -> Settlement:
    """Try to turn an ``inconclusive`` verdict into a certified ``not-identifiable``.

    Parameters
    ----------
    net : Network
        Not in ``S``.
    X : n rows of N_0 fmpq
    state : ActivationState
    kernel_line : bool
        Also search ``ker Gamma`` at the activation pattern for a straight line (off the
        boundary; on it :mod:`exactident.boundary.analyse` already searched every resolution).

    Returns
    -------
    Settlement
    """
    canon = canonical_form(net, X, state.Z)
    found = find_structural(net, X, state, canon)
    if found is not None:
        cert, clause = found
        mechanism = cert["structural"]["mechanism"]
        summary = [f"{mechanism} certificate: " + line_summary({"line": cert["line"]})]
        return Settlement(cert, mechanism, f"{clause}, and changes a path product, so theta is not locally "
                          f"identifiable ({mechanism} certificate)", summary)
    tried = "no structural certificate applies (no dead neuron, untouched input, proportional pair, " \
            "always-active pair or unpinned hyperplane)"
    if kernel_line:
        line, why = _kernel_line(net, X, state, canon)
        if line is not None:
            shows = ("changes f at a probe point" if "probe" in line["line"] else
                     "changes an invariant of the equivalence")
            return Settlement(line, "line", "the segment theta + t delta (a kernel direction of Gamma) keeps every "
                              f"output on X exactly for {segment_text(line['line']['t0'])}, and {shows} "
                              "(straight-line certificate)",
                              [f"{tried}; " + line_summary(line)])
        tried += f"; {why}"
    return Settlement(None, None, tried, [f"searched: {tried}"])

