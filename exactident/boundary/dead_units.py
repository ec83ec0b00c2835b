"""The dead-unit certificate of non-identifiability for a constrained network (any architecture).

Let ``U`` be a set of kinked units with fixed slope 0 (ReLU) that are strictly negative on
every sample, and ``theta_j`` a free parameter all of whose occurrences lie in one layer
``l`` and are either the bias of a unit of ``U`` in layer ``l`` or a weight ``W_l[i, k]``
leaving a unit ``k`` of ``U`` in layer ``l - 1`` (a convolution channel's bias when the whole
channel is dead, or the weights leaving a dead unit).  Along the line
``theta(t) = theta - t e_j``, ``t >= 0``, the outputs on ``X`` are constant: the units of ``U``
only get more negative (their biases drop, nothing else feeding them changes on ``X``), so
they stay at 0, and the weights leaving them multiply 0.  Non-equivalence: an input ``x*``
and an ``eps > 0`` with the same activation pattern at ``x*`` at ``t = 0`` and ``t = eps``,
every kinked pre-activation nonzero at both.  With that pattern held fixed the pre-activations
at ``x*`` are affine in ``t`` (``theta_j`` lives in one layer and the network is affine in
each layer's parameters), so strict signs at both ends hold on the whole segment and
``f_{theta(t)}(x*)`` is affine on ``[0, eps]``; ``f_{theta(eps)}(x*) != f_theta(x*)`` then shows
that every ``theta(t)``, ``0 < t <= eps``, realises another function: ``theta`` is not locally
identifiable, whatever the architecture (docs/theory.md, "Beyond the layered ReLU MLP").

The point ``x*`` is searched in float64 (Newton steps onto ``z_u(x) = margin`` for a unit
``u`` of ``U``) and accepted only after the exact check above.

Called by :mod:`exactident.check_constrained`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import flint
import numpy as np

from exactident.model.constrained import ConstrainedNetwork, constrained_pre_activations
from exactident.model.gamma_free import FreeState

__all__ = ["candidate_lines", "check_dead_units", "find_dead_units"]

#: Step sizes ``eps`` tried at a candidate point, largest first.
_EPS = [flint.fmpq(1), flint.fmpq(1, 8), flint.fmpq(1, 64), flint.fmpq(1, 1024)]


def _dead(cn: ConstrainedNetwork, state: FreeState) -> set[tuple[int, int]]:
    """ReLU units (kinked, fixed slope 0) strictly negative on every sample."""
    zero = flint.fmpq(0)
    out = set()
    for l in range(1, cn.L):
        table = state.Z[l - 1].table()
        for v in range(cn.widths[l]):
            if int(cn.slope_index[l - 1][v]) >= 0 or cn.negative_slope[l - 1][v] != zero:
                continue
            if all(row[v] < zero for row in table):
                out.add((l, v))
    return out


def candidate_lines(cn: ConstrainedNetwork, state: FreeState) -> list[tuple[int, int, list[tuple[int, int]]]]:
    """``(j, layer, units)``: parameters whose every occurrence is a dead unit's bias or a weight leaving one.

    ``units`` are the dead units involved (the biased units and the sources of the weights).
    """
    dead = _dead(cn, state)
    if not dead:
        return []
    occ: dict[int, list[tuple[str, int, int, int]]] = {}
    for l in range(1, cn.L + 1):
        for i, k in zip(*np.nonzero(cn.W_index[l - 1] >= 0)):
            occ.setdefault(int(cn.W_index[l - 1][i, k]), []).append(("W", l, int(i), int(k)))
        for i in np.flatnonzero(cn.b_index[l - 1] >= 0):
            occ.setdefault(int(cn.b_index[l - 1][i]), []).append(("b", l, int(i), -1))
    for l in range(1, cn.L):
        for v in np.flatnonzero(cn.slope_index[l - 1] >= 0):
            occ.setdefault(int(cn.slope_index[l - 1][v]), []).append(("a", l, int(v), -1))
    out = []
    for j in sorted(occ):
        items = occ[j]
        layers = {l for _, l, _, _ in items}
        if len(layers) != 1:
            continue
        units: list[tuple[int, int]] = []
        ok = True
        for kind, l, i, k in items:
            if kind == "b" and (l, i) in dead:
                units.append((l, i))
            elif kind == "W" and (l - 1, k) in dead:
                units.append((l - 1, k))
            else:
                ok = False
                break
        if ok:
            out.append((j, layers.pop(), sorted(set(units))))
    return out


def _outputs_and_signs(cn: ConstrainedNetwork, x: list[flint.fmpq]) -> tuple[list[flint.fmpq], list[int]]:
    Z = constrained_pre_activations(cn, [x])
    signs = []
    for l in range(1, cn.L):
        kinked = cn.kinked(l)
        row = Z[l - 1].table()[0]
        signs += [(z > 0) - (z < 0) for z, k in zip(row, kinked) if k]
    return list(Z[-1].table()[0]), signs


def check_dead_units(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]], j: int,
                     x: Sequence[flint.fmpq], eps: flint.fmpq) -> tuple[list[flint.fmpq], list[flint.fmpq]] | None:
    """The exact check of a dead-unit certificate: ``(f_theta(x*), f_theta(eps)(x*))`` if it holds, else None.

    Checks, in Q: ``j`` is one of :func:`candidate_lines` (recomputed from ``cn`` and ``X``), ``eps > 0``,
    the same pattern at ``x*`` at both ends with every kinked pre-activation nonzero, and different outputs.
    """
    from exactident.model.gamma_free import free_state

    if eps <= 0 or all(c[0] != j for c in candidate_lines(cn, free_state(cn, X))):
        return None
    return _quick(cn, j, [flint.fmpq(v) for v in x], eps)


def _floats(cn: ConstrainedNetwork):
    W = [np.array([[float(v) for v in row] for row in M.table()]).reshape(M.nrows(), M.ncols()) for M in cn.W]
    b = [np.array([float(v) for v in bb]) for bb in cn.b]
    a = [np.array([float(v) for v in s]) for s in cn.negative_slope]
    return W, b, a


def _ascend(W, b, a, l_t: int, v_t: int, x: np.ndarray, margin: float, steps: int = 12) -> np.ndarray:
    """Newton steps on ``z_{l_t, v_t}(x) = margin`` (float64, a search only)."""
    for _ in range(steps):
        h, J = x, np.eye(len(x))
        for l in range(1, l_t + 1):
            z = W[l - 1] @ h + b[l - 1]
            Jz = W[l - 1] @ J
            if l == l_t:
                g, zt = Jz[v_t], z[v_t]
                break
            f = np.where(z >= 0, 1.0, a[l - 1])
            h, J = f * z, f[:, None] * Jz
        if zt >= margin * 0.999 and zt <= margin * 1.5:
            return x
        nrm = float(g @ g)
        if not np.isfinite(nrm) or nrm == 0:
            return x
        x = x + g * ((margin - zt) / nrm)
    return x


def _rational(x: np.ndarray) -> list[flint.fmpq]:
    out = []
    for v in x:
        fr = Fraction(float(v)).limit_denominator(1 << 12) if np.isfinite(v) else Fraction(0)
        out.append(flint.fmpq(fr.numerator, fr.denominator))
    return out


def find_dead_units(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]], state: FreeState,
                    rng: random.Random, tries: int = 24) -> dict[str, Any] | None:
    """A checked dead-unit certificate, or None.

    Returns
    -------
    dict or None
        ``{"kind": "dead-units", "parameter", "name", "units", "direction": "-1", "eps", "x", "f_0",
        "f_eps", "why"}`` (rationals as strings; ``why`` is for the reason, not the certificate).
    """
    lines = candidate_lines(cn, state)
    if not lines:
        return None
    W, b, a = _floats(cn)
    gen = np.random.default_rng(rng.randrange(1 << 30))
    N0 = cn.widths[0]
    Xf = np.array([[float(v) for v in row] for row in X]).reshape(len(X), N0)
    scale = float(np.abs(Xf).max()) if Xf.size else 1.0
    scale = scale if scale > 0 else 1.0
    for j, _layer, units in lines:
        for t in range(tries):
            l_t, v_t = units[t % len(units)]
            start = Xf[gen.integers(len(Xf))] if len(Xf) and t % 2 == 0 else gen.normal(0, scale, N0)
            x = _rational(_ascend(W, b, a, l_t, v_t, start.astype(float), margin=1.0 + t))
            for eps in _EPS:
                got = _quick(cn, j, x, eps)
                if got is None:
                    continue
                f0, f1 = got
                name = cn.param_names[j] if cn.param_names else f"theta_{j}"
                unit_names = ", ".join(f"({l},{v})" for l, v in units[:6]) + (", ..." if len(units) > 6 else "")
                return {"kind": "dead-units", "parameter": j, "name": name, "units": [list(u) for u in units],
                        "direction": "-1", "eps": str(eps), "x": [str(v) for v in x],
                        "f_0": [str(v) for v in f0], "f_eps": [str(v) for v in f1],
                        "why": (f"unit(s) {unit_names} are dead on every sample: lowering {name} keeps the "
                                f"outputs on X while f(x*) changes (dead-unit certificate)")}
    return None


def _quick(cn: ConstrainedNetwork, j: int, x: list[flint.fmpq], eps: flint.fmpq):
    """The exact check at ``x*`` (``j`` is already known to be a candidate line)."""
    theta = cn.theta()
    moved = cn.with_theta([t - eps if i == j else t for i, t in enumerate(theta)])
    f0, s0 = _outputs_and_signs(cn, x)
    f1, s1 = _outputs_and_signs(moved, x)
    if s0 != s1 or 0 in s0 or f0 == f1:
        return None
    return f0, f1
