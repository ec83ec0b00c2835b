"""Samples the float pipeline cannot place on the right side of a kink: rigorous rounding-error bounds.

A float tool reads the activation pattern off the signs of its float
pre-activations ``z_hat``.  Where ``|z_hat - z|`` may exceed ``|z_hat|`` the
float sign proves nothing, and at ``z_hat = 0`` the float verdict depends on
the framework's ``relu'(0)``.  This module bounds ``|z_hat - z|`` for every
(sample, hidden neuron) and lists the pairs where the float and exact pictures
differ:

- ``float-zero``: ``z_hat == 0`` while ``z != 0``;
- ``float-within-bound``: ``0 < |z_hat| <= bound`` while ``z != 0`` (the float
  sign is not certified, even if it happens to be right);
- ``exact-tie-float-nonzero``: ``z == 0`` (a tie) while ``z_hat != 0`` (the
  float tool sees no tie and picks a side by rounding).

The bound (docs/tolerances.md, "Rounding-error bound"), for hidden layer ``l``
with fan-in ``k = N_{l-1}``, float inputs ``h_hat`` and rounded parameters
``W_hat``, ``b_hat``, in a format with unit roundoff ``u = 2^-p`` and
``eta = 2^(emin - p)`` (half the subnormal spacing)::

    |z_hat - z| <= E_l = gamma_{k+1} (|h_hat| |W_hat|^T + |b_hat|) + 2 k eta
                         + E_{l-1} |W_hat|^T + (|h_hat| + E_{l-1}) dW^T + db

with ``gamma_m = m u / (1 - m u)``, ``E_0 = dX`` and ``dW``, ``db``, ``dX`` bounds on
the rounding errors of the parameters and the sample (0 where rounding was
exact).  Proof: ``z_hat - z = [z_hat - (h_hat W_hat^T + b_hat)] + (h_hat - h) W_hat^T
+ h (W_hat - W)^T + (b_hat - b)``.  The first bracket is the error of one
floating-point inner product of length ``k`` plus a bias, in any order of
summation (BLAS blocking, FMA), under the model ``fl(a op b) = (a op b)(1 + d) + e``
with ``|d| <= u``, ``|e| <= eta`` for products and ``e = 0`` for sums: each of
the ``k + 1`` summands goes through at most ``k + 1`` roundings (Higham,
*Accuracy and Stability of Numerical Algorithms*, 2nd ed., Lemma 3.1 and
§3.1), which gives the ``gamma_{k+1}`` term, and the ``k`` product underflow
errors add at most ``k eta (1 + gamma_k) <= 2 k eta``.  ReLU is 1-Lipschitz
and exact in floats, so ``|h_hat - h| <= E_{l-1}`` entrywise and
``|h| <= |h_hat| + E_{l-1}``.  float16 arithmetic in numpy is done in float32
and rounded back (two roundings), so ``u`` is taken as ``2^-11 + 2^-24`` there.

The bound is itself evaluated in float64 on non-negative terms; the computed
value is multiplied by ``1 + 2 (k + 12) 2^-53`` and increased by
``(4 k + 8) 2^-1074`` to cover that evaluation's own rounding and underflow,
so the returned numbers are upper bounds (``inf`` when ``gamma_{k+1}`` is
undefined, ``(k + 1) u >= 1``, or the evaluation overflows).

Called by :mod:`exactident.numeric.block`.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import flint
import numpy as np

from exactident.model.activation import ActivationState
from exactident.numeric.numpy_backend import FloatOperators
from exactident.numeric.rounding import float_format

__all__ = ["MAX_KINK_ENTRIES", "approx_decimal", "near_kinks", "preactivation_bounds"]

#: At most this many (sample, neuron) pairs are listed in ``near_kinks.entries`` (``n`` has the count).
MAX_KINK_ENTRIES = 100

_TINY64 = math.ldexp(1.0, -1074)


def _gamma(m: int, u: float) -> float:
    """``gamma_m = m u / (1 - m u)`` rounded up to a float64; ``inf`` when ``m u >= 1``."""
    uq = Fraction(u)
    if m * uq >= 1:
        return math.inf
    g = m * uq / (1 - m * uq)
    return math.nextafter(float(g), math.inf)


def _unit_roundoff(ops: FloatOperators) -> float:
    fmt = float_format(ops.dtype)
    return fmt.unit_roundoff + (math.ldexp(1.0, -24) if fmt.name == "float16" else 0.0)


def preactivation_bounds(ops: FloatOperators) -> list[np.ndarray]:
    """Upper bounds ``E_l`` on ``|z_hat - z|``, float64 arrays ``(n, N_l)`` for hidden ``l = 1..L-1``.

    Parameters
    ----------
    ops : FloatOperators
        From :func:`exactident.numeric.numpy_backend.float_operators` (finite: a
        failed pipeline raised before).

    Returns
    -------
    list of ndarray
        The bound of the module docstring, per hidden layer.

    Examples
    --------
    ``f = relu(x/3 - 1/3)``: ``z_hat = fl(fl(1/3) * 1 + fl(-1/3)) = 0`` exactly at ``x = 1``, and the
    bound covers the true ``z = 0``; at ``x = 3`` it covers ``|z_hat - 2/3|``.

    >>> import flint
    >>> from exactident.model.network import Network
    >>> from exactident.model.activation import activation_state
    >>> from exactident.model.fixed_edges import fixed_edges
    >>> from exactident.numeric.numpy_backend import float_operators
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[flint.fmpq(1, 3)]]), flint.fmpq_mat([[1]])],
    ...               [[flint.fmpq(-1, 3)], [flint.fmpq(0)]])
    >>> X = [[flint.fmpq(1)], [flint.fmpq(3)]]
    >>> ops = float_operators(net, X, fixed_edges(net), activation_state(net, X).pattern)
    >>> E = preactivation_bounds(ops)[0]
    >>> bool(abs(ops.Z[0][1, 0] - 2 / 3) <= E[1, 0] < 1e-15)
    True
    """
    fmt = float_format(ops.dtype)
    u = _unit_roundoff(ops)
    eta = math.ldexp(1.0, fmt.emin - fmt.p)
    if ops.fnet is None or ops.sample is None:
        return []
    fnet = ops.fnet
    E_prev = ops.sample.err
    out = []
    with np.errstate(all="ignore"):  # inf is a valid (useless) upper bound
        for l in range(1, fnet.L):
            k = fnet.widths[l - 1]
            H = np.abs(ops.H[l - 1].astype(np.float64))
            A = np.abs(fnet.W[l - 1].astype(np.float64))
            S = H @ A.T + np.abs(fnet.b[l - 1].astype(np.float64))
            E = (_gamma(k + 1, u) * S + 2 * k * eta + E_prev @ A.T + (H + E_prev) @ fnet.W_err[l - 1].T
                 + fnet.b_err[l - 1])
            E = E * (1 + 2 * (k + 12) * math.ldexp(1.0, -53)) + (4 * k + 8) * _TINY64
            E[np.isnan(E)] = np.inf  # 0 * inf from an infinite gamma
            out.append(E)
            E_prev = E
    return out


def near_kinks(ops: FloatOperators, state: ActivationState) -> dict[str, Any]:
    """The (sample, hidden neuron) pairs whose float side of a kink is not the exact one, or not certain.

    Parameters
    ----------
    ops : FloatOperators
    state : ActivationState
        The exact pre-activations, pattern and ties.

    Returns
    -------
    dict
        ``{"n": count, "entries": [...], "truncated": bool}``; each entry
        ``{"sample", "layer", "neuron", "kind", "float", "bound", "exact",
        "float_active", "exact_active"}`` (``exact`` the exact pre-activation
        in decimal to 3 significant digits, a string: it may lie beyond any
        float's range), at most
        :data:`MAX_KINK_ENTRIES` of them, in (sample, layer, neuron) order.
    """
    bounds = preactivation_bounds(ops)
    ties = {(t.i, t.l, t.v) for t in state.ties}
    found: list[tuple[int, int, int, str]] = []
    for l, E in enumerate(bounds, start=1):
        Zf = ops.Z[l - 1].astype(np.float64)
        tie = np.zeros(Zf.shape, dtype=bool)
        for i, tl, v in ties:
            if tl == l:
                tie[i, v] = True
        zero = Zf == 0
        within = (np.abs(Zf) <= E) & ~zero
        kinds = {"float-zero": zero & ~tie, "float-within-bound": within & ~tie,
                 "exact-tie-float-nonzero": tie & ~zero}
        for kind, mask in kinds.items():
            found += [(int(i), l, int(v), kind) for i, v in np.argwhere(mask)]
    found.sort()
    entries = []
    for i, l, v, kind in found[:MAX_KINK_ENTRIES]:
        zf = float(ops.Z[l - 1][i, v])
        entries.append({"sample": i, "layer": l, "neuron": v, "kind": kind, "float": zf,
                        "bound": _json(float(bounds[l - 1][i, v])), "exact": approx_decimal(state.Z[l - 1][i, v]),
                        "float_active": zf >= 0, "exact_active": bool(state.pattern[l - 1][i, v])})
    return {"n": len(found), "entries": entries, "truncated": len(found) > MAX_KINK_ENTRIES}


def approx_decimal(q: flint.fmpq | int, digits: int = 3) -> str:
    """``q`` in scientific notation with ``digits`` significant digits, from the exact rational.

    Works at any size (no float, no ``str`` of a huge integer).

    Examples
    --------
    >>> import flint
    >>> approx_decimal(flint.fmpq(-1, 2**51)), approx_decimal(flint.fmpq(1, 10**400)), approx_decimal(0)
    ('-4.44e-16', '1.00e-400', '0')
    """
    q = flint.fmpq(q)
    a, b = abs(int(q.p)), int(q.q)
    if a == 0:
        return "0"
    e = math.floor((a.bit_length() - b.bit_length()) * math.log10(2))
    # exact: 10^e <= a / b < 10^(e+1) (the estimate is off by at most a couple)
    while (a * 10**-e if e < 0 else a) < (b * 10**e if e >= 0 else b):
        e -= 1
    while (a * 10 ** -(e + 1) if e + 1 < 0 else a) >= (b * 10 ** (e + 1) if e + 1 >= 0 else b):
        e += 1
    k = digits - 1 - e
    num, den = (a * 10**k, b) if k >= 0 else (a, b * 10**-k)
    m, r = divmod(num, den)
    m += 2 * r >= den  # half up
    if m == 10**digits:
        m, e = 10 ** (digits - 1), e + 1
    text = str(m)
    sign = "-" if q < 0 else ""
    return f"{sign}{text[0]}.{text[1:]}e{e:+03d}" if digits > 1 else f"{sign}{text}e{e:+03d}"


def _json(v: float) -> float | None:
    return None if math.isinf(v) or math.isnan(v) else v
