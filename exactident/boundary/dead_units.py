"""Dead-unit, constant-unit and slope-line certificates of non-identifiability for a constrained network
(any architecture).

*Dead units*: ReLU units (kinked, slope fixed 0) strictly negative on every sample; *silent* units:
any unit whose output is 0 on every sample (dead units, or e.g. a pooling unit over dead units), and
any input coordinate that is 0 on every sample (a blank border pixel: the weights leaving it
multiply 0 on ``X``, whatever the activation, leaky ReLU and PReLU included). A free parameter
``theta_j`` all of whose occurrences lie in one layer ``l`` and are either the bias of a dead unit
of layer ``l`` or a weight ``W_l[i, k]`` leaving a silent unit ``k`` of layer ``l - 1`` gives the
line ``theta(t) = theta - t e_j``, ``t >= 0``, along which the outputs on ``X`` are constant: dead
units only get more negative and stay at 0, moved weights multiply outputs that are 0 on ``X``.
*Constant units*: a unit with the same pre-activation ``z`` (output ``h``) on every sample whose
outgoing weight ``W_{l+1}[i, v]`` is the only use of ``theta_j`` and the next bias ``b_{l+1}[i]``
the only use of ``theta_jb``: the line ``theta_j += t``, ``theta_jb -= h t`` keeps ``z_{l+1}[i]`` on
``X``.  *Slope lines*: a PReLU slope ``theta_j`` all of whose occurrences are the slopes of units of one
layer that are ``>= 0`` on every sample (:func:`slope_lines`): along ``theta_j += t`` those units output
``z`` on ``X`` whatever their slope.  Each certificate states the segment ``[0, t0]`` on which the
outputs on ``X`` are proved
constant (:func:`line_segment`: the shared polynomial pass, null for every ``t >= 0``).

Non-equivalence: an input ``x*`` and an ``eps > 0`` with the same activation pattern at ``x*``
at ``t = 0`` and ``t = eps``, every kinked pre-activation nonzero at both.  With that pattern
held the pre-activations at ``x*`` are affine in ``t`` (the moving parameters live in one layer
and the network is affine in each layer's parameters), so strict signs at both ends hold on the
whole segment and ``f_{theta(t)}(x*)`` is affine on ``[0, eps]``; ``f_{theta(eps)}(x*) !=
f_theta(x*)`` then shows that every ``theta(t)``, ``0 < t <= eps``, realises another function:
``theta`` is not locally identifiable, whatever the architecture (docs/theory.md, "Beyond the
layered ReLU MLP").

The point ``x*`` is searched in float64 (Newton steps moving one unit away from its value on
the sample) and accepted only after the exact check above.

Called by :mod:`exactident.check.free_route` (the layer-graph stages of :func:`exactident.check.check`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import flint
import numpy as np

from exactident.linalg.draws import Draws
from exactident.model.gamma_free import FreeState
from exactident.model.line_forward import LinePass, line_pass
from exactident.model.network import Network, pre_activations

__all__ = ["along", "candidate_lines", "check_constant_units", "check_dead_units", "constant_lines", "find_dead_units",
           "line_segment", "slope_lines", "zero_columns"]

#: Step sizes ``eps`` tried at a candidate point, largest first.
_EPS = [flint.fmpq(1), flint.fmpq(1, 8), flint.fmpq(1, 64), flint.fmpq(1, 1024)]
#: A target "value on the sample" that makes the point search aim below 0 (``margin = z + 1 + try < 0``).
_NEGATIVE = -12.0


def _dead(cn: Network, state: FreeState) -> set[tuple[int, int]]:
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


def _silent(cn: Network, state: FreeState) -> set[tuple[int, int]]:
    """Units ``(l, v)`` whose output is exactly 0 on every sample: hidden units of any kind, and the input
    coordinates ``(0, k)`` that are 0 on every sample (e.g. a border pixel of the digits)."""
    zero = flint.fmpq(0)
    out = {(0, int(k)) for k in np.flatnonzero(state.zero_inputs)} if state.zero_inputs is not None else set()
    for l in range(1, cn.L):
        table = state.Z[l - 1].table()
        for v in range(cn.widths[l]):
            a = cn.negative_slope[l - 1][v]
            if all(row[v] == zero or (row[v] < zero and a == zero) for row in table):
                out.add((l, v))
    return out


def candidate_lines(cn: Network, state: FreeState) -> list[tuple[int, int, list[tuple[int, int]]]]:
    """``(j, layer, units)``: parameters whose every occurrence is a dead unit's bias or a weight leaving a silent unit.

    Dead: a ReLU unit strictly negative on every sample; silent: a unit of any kind whose output is 0 on every
    sample (dead units are silent).  ``units`` are those involved (the biased units and the sources of the weights).
    """
    dead = _dead(cn, state)
    silent = _silent(cn, state)
    if not silent:
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
            elif kind == "W" and (l - 1, k) in silent:
                units.append((l - 1, k))
            else:
                ok = False
                break
        if ok:
            out.append((j, layers.pop(), sorted(set(units))))
    return out


def zero_columns(cn: Network, state: FreeState) -> list[int]:
    """Parameters whose column of ``Gamma_free(s)`` is 0 for every tie resolution ``s`` (exact, from the structure).

    Every occurrence of ``theta_j`` must be one of: a weight ``W_l[v, k]`` or bias ``b_l[v]`` *entering* a
    dead unit ``(l, v)`` (its derivative there is the fixed slope 0: no tie, strictly negative), a weight
    ``W_l[i, k]`` *leaving* a silent unit ``(l - 1, k)`` (it multiplies an output that is 0 on every
    sample), or the PReLU slope of a unit whose pre-activation is ``>= 0`` on every sample (it multiplies
    ``min(z, 0) = 0``).  Unlike :func:`candidate_lines` the occurrences may lie in several layers: this is
    a kernel vector ``e_j``, not a line.
    """
    dead, silent = _dead(cn, state), _silent(cn, state)
    if not dead and not silent and not (cn.L > 1 and any((I >= 0).any() for I in cn.slope_index)):
        return []
    good = np.zeros(cn.n_params, dtype=bool)
    bad = np.zeros(cn.n_params, dtype=bool)

    def mark(index: np.ndarray, ok: np.ndarray) -> None:
        j = index[index >= 0]
        k = ok[index >= 0]
        good[j[k]] = True
        bad[j[~k]] = True

    zero = flint.fmpq(0)
    for l in range(1, cn.L + 1):
        N, M = cn.widths[l], cn.widths[l - 1]
        into_dead = np.array([(l, v) in dead for v in range(N)], dtype=bool)
        from_silent = np.array([(l - 1, k) in silent for k in range(M)], dtype=bool)
        mark(cn.W_index[l - 1], into_dead[:, None] | from_silent[None, :])
        mark(cn.b_index[l - 1], into_dead)
        if l < cn.L:
            table = state.Z[l - 1].table()
            nonneg = np.array([all(row[v] >= zero for row in table) for v in range(N)], dtype=bool)
            mark(cn.slope_index[l - 1], nonneg)
    return [int(j) for j in np.flatnonzero(good & ~bad)]


def _outputs_and_signs(cn: Network, x: list[flint.fmpq]) -> tuple[list[flint.fmpq], list[int]]:
    Z = pre_activations(cn, [x])
    signs = []
    for l in range(1, cn.L):
        kinked = cn.kinked(l)
        row = Z[l - 1].table()[0]
        signs += [(z > 0) - (z < 0) for z, k in zip(row, kinked) if k]
    return list(Z[-1].table()[0]), signs


def check_dead_units(cn: Network, X: Sequence[Sequence[flint.fmpq]], j: int,
                     x: Sequence[flint.fmpq], eps: flint.fmpq) -> tuple[list[flint.fmpq], list[flint.fmpq]] | None:
    """The exact check of a dead-unit certificate: ``(f_theta(x*), f_theta(eps)(x*))`` if it holds, else None.

    Checks, in Q: ``j`` is one of :func:`candidate_lines` (recomputed from ``cn`` and ``X``), ``eps > 0``,
    the same pattern at ``x*`` at both ends with every kinked pre-activation nonzero, and different outputs.
    """
    from exactident.model.gamma_free import free_state

    if eps <= 0 or all(c[0] != j for c in candidate_lines(cn, free_state(cn, X))):
        return None
    return _quick(cn, {j: -flint.fmpq(1)}, [flint.fmpq(v) for v in x], eps)


def _floats(cn: Network):
    W = [np.array([[float(v) for v in row] for row in M.table()]).reshape(M.nrows(), M.ncols()) for M in cn.W]
    b = [np.array([float(v) for v in bb]) for bb in cn.b]
    a = [np.array([float(v) for v in s]) for s in cn.negative_slope]
    return W, b, a


def _ascend(W, b, a, l_t: int, v_t: int, x: np.ndarray, margin: float, gen: Draws,
            steps: int = 12) -> np.ndarray:
    """Newton steps on ``z_{l_t, v_t}(x) = margin`` (float64, a search only); ``l_t = 0``: the input itself."""
    if l_t == 0:  # an input coordinate that is 0 on the sample: move it off 0
        x = x.copy()
        x[v_t] = margin
        return x
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
        if not np.isfinite(nrm):
            return x
        if nrm == 0:  # flat here (the unit's inputs are all off): jump somewhere else
            x = x + gen.normal(0, 1 + float(np.abs(x).max(initial=0.0)), len(x))
            continue
        x = x + g * ((margin - zt) / nrm)
    return x


def _rational(x: np.ndarray) -> list[flint.fmpq]:
    out = []
    for v in x:
        fr = Fraction(float(v)).limit_denominator(1 << 12) if np.isfinite(v) else Fraction(0)
        out.append(flint.fmpq(fr.numerator, fr.denominator))
    return out


def constant_lines(cn: Network, state: FreeState
                   ) -> list[tuple[int, int, tuple[int, int], flint.fmpq, flint.fmpq]]:
    """``(j, jb, unit, z, h)``: a unit whose pre-activation is the same ``z`` (output ``h``) on every sample,
    ``theta_j`` its only use being the weight ``W_{l+1}[i, v]`` and ``theta_jb`` its only use being ``b_{l+1}[i]``.

    Along ``theta_j += t``, ``theta_jb -= h t`` the pre-activation ``z_{l+1}[i]`` is unchanged on ``X``.
    """
    if not state.Z or not state.Z[0].nrows():
        return []
    counts = np.zeros(cn.n_params, dtype=np.int64)
    for I in [*cn.W_index, *cn.b_index, *cn.slope_index]:
        counts += np.bincount(I[I >= 0], minlength=cn.n_params)
    zero = flint.fmpq(0)
    out = []
    for l in range(1, cn.L):
        table = state.Z[l - 1].table()
        for v in range(cn.widths[l]):
            z = table[0][v]
            if any(row[v] != z for row in table):
                continue
            h = z if z >= zero else cn.negative_slope[l - 1][v] * z
            if h == zero:
                continue  # a dead unit: the dead-unit lines cover it
            for i in range(cn.widths[l + 1]):
                j, jb = int(cn.W_index[l][i, v]), int(cn.b_index[l][i])
                if j >= 0 and jb >= 0 and j != jb and counts[j] == 1 and counts[jb] == 1:
                    out.append((j, jb, (l, v), z, h))
    return out


def slope_lines(cn: Network, state: FreeState) -> list[tuple[int, int, list[tuple[int, int]]]]:
    """``(j, layer, units)``: PReLU slopes ``theta_j`` whose every occurrence is the slope of a unit with ``z >= 0``
    on every sample, all in one layer.

    Along ``theta_j += t`` nothing changes on ``X``: each such unit outputs ``z`` there whatever its slope
    (``h = z + a min(z, 0)`` and ``min(z, 0) = 0``), and its pre-activation does not depend on its own slope.
    """
    if cn.L < 2 or not any((I >= 0).any() for I in cn.slope_index):
        return []
    occ: dict[int, list[tuple[str, int, int]]] = {}
    for l in range(1, cn.L + 1):
        for I in (cn.W_index[l - 1], cn.b_index[l - 1]):
            for j in np.unique(I[I >= 0]):
                occ.setdefault(int(j), []).append(("w", l, -1))
    zero = flint.fmpq(0)
    for l in range(1, cn.L):
        table = state.Z[l - 1].table() if state.Z and state.Z[l - 1].nrows() else []
        for v in np.flatnonzero(cn.slope_index[l - 1] >= 0):
            nonneg = all(row[v] >= zero for row in table)
            occ.setdefault(int(cn.slope_index[l - 1][v]), []).append(("a" if nonneg else "x", l, int(v)))
    out = []
    for j in sorted(occ):
        items = occ[j]
        if all(kind == "a" for kind, _l, _v in items) and len({l for _k, l, _v in items}) == 1:
            out.append((j, items[0][1], sorted((l, v) for _k, l, v in items)))
    return out


def _lines(cn: Network, state: FreeState):
    """``(kind, delta, units, targets, extra)`` of every candidate line; targets ``(l, v, z_now)``."""
    one = flint.fmpq(1)
    for j, _layer, units in candidate_lines(cn, state):
        yield "dead-units", {j: -one}, units, [(l, v, 0.0) for l, v in units], {"parameter": j}
    for j, jb, (l, v), z, h in constant_lines(cn, state):
        yield "constant-units", {j: one, jb: -h}, [(l, v)], [(l, v, float(z))], {"value": str(h)}
    for j, _layer, units in slope_lines(cn, state):  # the witness needs a unit on its negative side
        yield "slope-lines", {j: one}, units, [(l, v, _NEGATIVE) for l, v in units], {"parameter": j}


def find_dead_units(cn: Network, X: Sequence[Sequence[flint.fmpq]], state: FreeState,
                    rng: random.Random, tries: int = 8, max_lines: int = 64) -> dict[str, Any] | None:
    """A checked dead-unit (or constant-unit) certificate, or None.

    Returns
    -------
    dict or None
        ``{"kind": "dead-units", "parameter", "name", "units", "direction": "-1", "t0", "eps", "x", "f_0",
        "f_eps", "why"}``, or ``{"kind": "constant-units", "units", "value", "delta": [[j, q], ...],
        "names", "t0", "eps", "x", "f_0", "f_eps", "why"}`` (rationals as strings; ``t0``: the outputs on
        ``X`` are constant for every ``t`` in ``[0, t0]``, null for every ``t >= 0``, :func:`line_segment`;
        ``why`` is for the reason).
    """
    W, b, a = _floats(cn)
    gen = Draws(rng.randrange(1 << 30))
    N0 = cn.widths[0]
    Xf = np.array([[float(v) for v in row] for row in X]).reshape(len(X), N0)
    scale = float(np.abs(Xf).max()) if Xf.size else 1.0
    scale = scale if scale > 0 else 1.0
    for n_line, (kind, delta, units, targets, extra) in enumerate(_lines(cn, state)):
        if n_line >= max_lines:
            break
        for t in range(tries):
            l_t, v_t, z_now = targets[t % len(targets)]
            start = Xf[gen.integers(len(Xf))] if len(Xf) and t % 2 == 0 else gen.normal(0, scale, N0)
            x = _rational(_ascend(W, b, a, l_t, v_t, start.astype(float), margin=z_now + 1.0 + t, gen=gen))
            for eps in _EPS:
                got = _quick(cn, delta, x, eps, (W, b, a))
                if got is None:
                    continue
                f0, f1 = got
                constant, t0 = line_segment(cn, X, delta)
                if not constant:  # cannot happen for these lines (theory above); never certify it
                    break
                return _certificate(cn, kind, delta, units, extra, t0, eps, x, f0, f1)
            else:
                continue
            break
    return None


def line_segment(cn: Network, X: Sequence[Sequence[flint.fmpq]], delta: dict[int, flint.fmpq]
                 ) -> tuple[bool, flint.fmpq | None]:
    """Whether the outputs on ``X`` are constant along ``theta + t delta``, and the segment ``[0, t0]`` proved.

    The network is run on polynomials in ``t`` with each unit's negative-side slope
    (:func:`exactident.model.line_forward.line_pass`, exact over Q); ``t0`` is the first positive
    root of a kinked unit's pre-activation on ``X`` (a rational just below it when irrational),
    ``None`` when no unit ever changes side: every ``t >= 0``.  For a dead-unit line (a dead unit's
    bias lowered, or weights leaving units that are 0 on ``X``) and a constant-unit line the
    pre-activations on ``X`` never move, so ``t0`` is ``None``; it is computed, not assumed.

    Parameters
    ----------
    cn : Network
    X : n rows of ``N_0`` fmpq (Q), ``n >= 0``
    delta : dict ``j -> fmpq``
        The direction in ``theta`` (absent parameters 0).

    Returns
    -------
    (bool, fmpq or None)
        ``(True, None)`` for no sample.
    """
    if not len(X):
        return True, None
    run = along(cn, X, delta)
    return run.is_constant(), run.segment_end()


def along(cn: Network, points: Sequence[Sequence[flint.fmpq]], delta: dict[int, flint.fmpq]) -> LinePass:
    """The network on ``points`` along ``theta + t delta`` as polynomials in ``t`` (exact, Q).

    Parameters
    ----------
    cn : Network
    points : n >= 1 rows of ``N_0`` fmpq
    delta : dict ``j -> fmpq``
        The direction over the free parameters (absent ones 0): weights, biases and PReLU slopes.

    Returns
    -------
    LinePass
    """
    zero = flint.fmpq(0)

    def pick(index: np.ndarray) -> list[flint.fmpq]:
        return [delta.get(int(j), zero) if j >= 0 else zero for j in index.reshape(-1)]

    dW = [flint.fmpq_mat(cn.widths[l], cn.widths[l - 1], pick(cn.W_index[l - 1])) for l in range(1, cn.L + 1)]
    db = [pick(cn.b_index[l - 1]) for l in range(1, cn.L + 1)]
    da = [pick(cn.slope_index[l - 1]) for l in range(1, cn.L)]
    return line_pass(cn.W, cn.b, dW, db, [list(row) for row in points], slopes=cn.negative_slope, dslopes=da)


def _certificate(cn, kind, delta, units, extra, t0, eps, x, f0, f1) -> dict[str, Any]:
    name = cn.param_name
    unit_names = cn.describe_units(units)
    common = {"t0": None if t0 is None else str(t0), "eps": str(eps), "x": [str(v) for v in x],
              "f_0": [str(v) for v in f0], "f_eps": [str(v) for v in f1]}
    if kind == "dead-units":
        j = extra["parameter"]
        inputs = any(int(l) == 0 for l, _v in units)  # blank inputs: 0 on every sample, not dead
        what, verb = ("input(s)", "are 0") if inputs else ("unit(s)", "are dead")
        return {"kind": kind, "parameter": j, "name": name(j), "units": [list(u) for u in units], "direction": "-1",
                **common, "why": (f"{what} {unit_names} {verb} on every sample: lowering {name(j)} keeps the "
                                  f"outputs on X for {_segment_text(t0)} while f(x*) changes (dead-unit "
                                  "certificate)")}
    if kind == "slope-lines":
        j = extra["parameter"]
        return {"kind": kind, "parameter": j, "name": name(j), "units": [list(u) for u in units], "direction": "1",
                **common, "why": (f"unit(s) {unit_names} are >= 0 on every sample: moving their PReLU slope "
                                  f"{name(j)} keeps the outputs on X for {_segment_text(t0)} while f(x*) changes "
                                  "(slope-line certificate)")}
    (j, _one), (jb, mh) = sorted(delta.items(), key=lambda kv: kv[1] != 1)
    return {"kind": kind, "units": [list(u) for u in units], "value": extra["value"],
            "delta": [[j, "1"], [jb, str(mh)]], "names": [name(j), name(jb)], **common,
            "why": (f"unit {unit_names} outputs {extra['value']} on every sample: raising {name(j)} and "
                    f"lowering {name(jb)} by {extra['value']} times as much keeps the outputs on X for "
                    f"{_segment_text(t0)} while f(x*) changes (constant-unit certificate)")}


def _segment_text(t0: flint.fmpq | None) -> str:
    return "every t >= 0" if t0 is None else f"0 <= t <= {t0}"


def check_constant_units(cn: Network, X: Sequence[Sequence[flint.fmpq]], j: int, jb: int,
                         x: Sequence[flint.fmpq], eps: flint.fmpq) -> tuple[list[flint.fmpq], list[flint.fmpq]] | None:
    """The exact check of a constant-unit certificate (recomputes the line from ``cn`` and ``X``)."""
    from exactident.model.gamma_free import free_state

    found = [c for c in constant_lines(cn, free_state(cn, X)) if c[0] == j and c[1] == jb]
    if eps <= 0 or not found:
        return None
    return _quick(cn, {j: flint.fmpq(1), jb: -found[0][4]}, [flint.fmpq(v) for v in x], eps)


def _quick(cn: Network, delta: dict[int, flint.fmpq], x: list[flint.fmpq], eps: flint.fmpq,
           floats: tuple | None = None):
    """The exact check at ``x*`` along ``theta + t delta`` (the line itself is already known to keep ``f(X)``);
    with ``floats`` (:func:`_floats`) a float pre-check first skips hopeless points (speed only)."""
    theta = cn.theta()
    if floats is not None and not _float_plausible(cn, floats, delta, x, eps):
        return None
    moved = cn.with_theta([t + eps * delta[i] if i in delta else t for i, t in enumerate(theta)])
    f0, s0 = _outputs_and_signs(cn, x)
    f1, s1 = _outputs_and_signs(moved, x)
    if s0 != s1 or 0 in s0 or f0 == f1:
        return None
    return f0, f1


def _float_plausible(cn: Network, floats: tuple, delta: dict[int, flint.fmpq], x: list[flint.fmpq],
                     eps: flint.fmpq) -> bool:
    """A float pre-check (speed only: the exact check decides): same strict signs, outputs apart."""
    W, b, a = floats
    W2, b2, a2 = [M.copy() for M in W], [v.copy() for v in b], [v.copy() for v in a]
    for l in range(1, cn.L + 1):
        for j, d in delta.items():
            W2[l - 1][cn.W_index[l - 1] == j] += float(d * eps)
            b2[l - 1][cn.b_index[l - 1] == j] += float(d * eps)
            if l < cn.L:
                a2[l - 1][cn.slope_index[l - 1] == j] += float(d * eps)
    xf = np.array([float(v) for v in x])
    out = []
    for Ws, bs, As in ((W, b, a), (W2, b2, a2)):
        h, signs = xf, []
        for l in range(1, cn.L + 1):
            z = Ws[l - 1] @ h + bs[l - 1]
            if l < cn.L:
                signs.append(np.sign(z[cn.kinked(l)]))
                h = np.where(z >= 0, z, As[l - 1] * z)
        out.append((z, signs))
    (f0, s0), (f1, s1) = out
    same = all((u == w).all() and u.all() for u, w in zip(s0, s1))
    return bool(same and np.abs(f0 - f1).max(initial=0.0) > 1e-12 * (1 + np.abs(f0).max(initial=0.0)))
