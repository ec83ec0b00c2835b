"""The straight-line certificate of a constrained network (layer graph): ``decided_by: line``.

The plain MLP's line certificate (:mod:`exactident.boundary.line`) needs nothing of the dense
ReLU MLP: only the exact outputs of the network along a straight line in parameter space.  Here
it runs on every :class:`~exactident.model.network.Network` (convolution,
pooling, skips, leaky ReLU, PReLU, fixed weights).  A direction ``delta`` over the free
parameters such that

- ``f_{theta + t delta}(X) = f_theta(X)`` for every ``t`` in ``[0, t0]`` (``t0 > 0``; null: every
  ``t >= 0``), and
- ``f_{theta + t delta}(x*)`` is not constant for small ``t > 0`` at a *probe* input ``x*``

proves that ``theta`` is not locally identifiable from ``X``: every neighbourhood of ``theta``
holds a parameter with the same outputs on ``X`` that computes another function, and parameters
related by a symmetry (a rescaling the family keeps, or any other) compute the same function.

Both items are decided exactly by running the network on polynomials in ``t``
(:func:`exactident.model.line_forward.line_pass`, with each unit's negative-side slope and the PReLU
slopes moving with ``delta``; the primitive the verifier shares): the side of a kinked unit for
small ``t > 0`` is the sign of the first nonzero coefficient of its pre-activation, ``t0`` is the
first positive root of a kinked pre-activation on ``X`` (a rational below it when irrational).
Ties at ``theta`` need no special care: the polynomial pass resolves them along the line.

Candidates ``delta`` are the basis vectors (both signs) of the exact kernels of ``Gamma_free(s)``
on the first tie resolutions (a direction of constant outputs on ``X`` is in every such kernel to
first order); each is checked exactly, none is trusted.

Source: the line certificate of the plain engine (docs/boundary.md, "Straight lines"), whose
argument uses only exact evaluation; docs/theory.md, "Beyond the layered ReLU MLP".

Called by :mod:`exactident.check.free_route` when the rank stage, the dead-unit and the
submersion certificates leave the case ``inconclusive``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flint
import numpy as np

from exactident.boundary.dead_units import along
from exactident.boundary.entering import primitive_integer
from exactident.io.rationals import format_fmpq
from exactident.linalg.exact import nullspace
from exactident.model.gamma_free import gamma_free_exact
from exactident.model.network import Network

__all__ = ["MAX_LINE_CANDIDATES", "MAX_LINE_ENTRIES", "MAX_LINE_PATTERNS", "find_graph_line",
           "line_cost_problem", "probe_points"]

#: ``Gamma_free`` is built exactly (for its kernel) only up to this many entries.
MAX_LINE_ENTRIES = 60_000
#: Tie resolutions whose kernels give candidates.
MAX_LINE_PATTERNS = 4
#: Kernel directions checked in all.
MAX_LINE_CANDIDATES = 64
#: Probe points run along a line in one batch.
PROBE_BATCH = 64


def line_cost_problem(cn: Network, n_samples: int) -> str | None:
    """Why the line search is not run on this size (one line), or None when it is.

    >>> from exactident.model.network import Network
    >>> cn = Network((1, 1, 1), [[[1]], [[1]]], [[0], [0]])
    >>> line_cost_problem(cn, 3) is None
    True
    """
    entries = n_samples * cn.widths[-1] * cn.n_params
    if entries > MAX_LINE_ENTRIES:
        return (f"an exact kernel of Gamma_free needs {entries} entries over Q, above the cap of "
                f"{MAX_LINE_ENTRIES}")
    return None


def probe_points(cn: Network, X: Sequence[Sequence[flint.fmpq]]) -> list[list[flint.fmpq]]:
    """Candidate probe inputs, in a fixed order: the samples shifted, scaled coordinate vectors, spread points."""
    n0 = cn.widths[0]
    q = flint.fmpq
    pts: list[list[flint.fmpq]] = [[v + k for v in x] for x in X[:16] for k in (-2, -1, 1, 2)]
    pts += [[q(k) if j == m else q(0) for j in range(n0)] for m in range(min(n0, 16)) for k in (-3, -1, 1, 3)]
    pts += [[q(2 * k + 1, 4)] * n0 for k in range(-6, 6)]
    pts += [[q((7 * m + 3 * j) % 11 - 5, 1 + m % 3) for j in range(n0)] for m in range(24)]
    return pts


def _probe(cn: Network, X, delta: dict[int, flint.fmpq]) -> list[flint.fmpq] | None:
    pts = probe_points(cn, X)
    for start in range(0, len(pts), PROBE_BATCH):
        batch = pts[start:start + PROBE_BATCH]
        moving = along(cn, batch, delta).moving()
        if moving:
            return batch[moving[0][0]]
    return None


def find_graph_line(cn: Network, X: Sequence[Sequence[flint.fmpq]],
                    patterns: Sequence[Sequence[np.ndarray]]) -> dict[str, Any] | None:
    """A checked ``line`` certificate part of a constrained network, or None.

    Parameters
    ----------
    cn : Network
    X : n >= 1 rows of ``N_0`` fmpq (Q)
    patterns : activation patterns (tie resolutions) whose ``Gamma_free`` kernels give candidates;
        the first :data:`MAX_LINE_PATTERNS` are used.

    Returns
    -------
    dict or None
        ``{"kind": "line", "delta": [[j, "p/q"], ...], "names": [...], "t0": "p/q" or None,
        "probe": ["p/q", ...], "why": str}`` (``why`` is for the reason).
    """
    if not len(X) or line_cost_problem(cn, len(X)) is not None:
        return None
    seen: set[tuple] = set()
    tried = 0
    for pattern in list(patterns)[:MAX_LINE_PATTERNS]:
        K = nullspace(gamma_free_exact(cn, X, pattern))
        for c in range(K.ncols()):
            col = primitive_integer([K[i, c] for i in range(K.nrows())])
            for sign in (1, -1):
                cand = tuple(int(v) * sign for v in col)
                if cand in seen or not any(cand):
                    continue
                seen.add(cand)
                tried += 1
                if tried > MAX_LINE_CANDIDATES:
                    return None
                delta = {j: flint.fmpq(v) for j, v in enumerate(cand) if v}
                lp = along(cn, X, delta)
                if not lp.is_constant():
                    continue
                probe = _probe(cn, X, delta)
                if probe is None:
                    continue
                t0 = lp.segment_end()
                moved = sorted(delta)
                return {"kind": "line", "delta": [[j, format_fmpq(delta[j])] for j in moved],
                        "names": [cn.param_name(j) for j in moved], "t0": None if t0 is None else format_fmpq(t0),
                        "probe": [format_fmpq(v) for v in probe],
                        "why": (f"moving {cn.describe_params(moved)} along a straight line keeps the outputs on X "
                                f"for {'every t >= 0' if t0 is None else f'0 <= t <= {t0}'} while f(x*) changes "
                                "at a probe x* (line certificate)")}
    return None
