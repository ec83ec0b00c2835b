"""Per parameter, what the sample determines (report field ``parameters``; proofs in docs/explain.md).

Each coordinate ``j`` of ``tau`` (a free weight ``W_l[i,k]`` or bias ``b_l[i]``;
fixed edges are listed as ``fixed``) gets one class:

- ``identifiable``: the verdict is identifiable (``C_S`` on every tie resolution);
- ``not-identifiable``: arbitrarily close to theta, with the fixed edges unchanged,
  some parameters give the same outputs on ``X`` and another value of ``j``.
  Witnesses (``by``): ``line`` -- a kernel direction ``delta`` with ``delta_j != 0``
  along which the outputs on ``X`` are exactly constant for small ``t``
  (:func:`constant_line`); ``C_N`` -- off the boundary, ``rank Gamma = rank A <
  dim`` (Theorem 8's constant rank, so the fibre is a manifold with tangent
  space ``ker Gamma``) and ``ker Gamma`` moves ``j``; ``entering`` -- on the
  boundary, the entering certificate's resolution ``s`` and ``ker Gamma(s)``
  moves ``j``;
- ``first-order-determined``: ``e_j`` is in the row space of ``Gamma`` (of
  every ``Gamma(s)`` on the boundary): no kernel vector moves ``j``;
- ``unknown``: none of these, with the reason (``why``).

Kernel bases are exact (:mod:`exactident.explain.kernel`); theta in ``S`` makes
every free parameter ``unknown`` (the theorems do not apply).

A layer graph (``W = T theta + c``, :mod:`exactident.model.network`) has the free
parameters ``theta_j`` as coordinates and the chart ``{delta_F = 0}`` across its
symmetries ``S_H`` (:mod:`exactident.explain.chart`); :func:`classify_free` puts each in
``gauge``, ``identifiable`` (``by: free-rank``), ``not-identifiable`` (``by``: the
certificate whose line, or entering direction, taken into the chart moves it: ``line``,
``slope-lines``, ``dead-units``, ``constant-units``, ``entering-submersion``, witness
``certificate`` as for the MLP's certified line), ``first-order-determined``,
``undetermined`` (a vector of some ``K_F(s)`` moves it: a first-order statement, as a
symmetry beyond ``S_H`` may keep the function) or ``unknown``.

Called by :mod:`exactident.explain.core`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import flint

from exactident.explain.kernel import layers_of
from exactident.model.fixed_edges import FixedEdges, Parameter
from exactident.model.network import Network

__all__ = ["CLASSES", "FREE_CLASSES", "MAX_LINE_WORK", "FreeBlock", "KernelBlock", "classify", "classify_free",
           "constant_line", "fixed_names"]

#: The classes a free parameter can be put in by :func:`classify` (docs/explain.md).
CLASSES = ("identifiable", "not-identifiable", "first-order-determined", "unknown", "fixed")
#: The classes of a layer graph's free parameter (:func:`classify_free`).
FREE_CLASSES = ("not-identifiable", "undetermined", "first-order-determined", "unknown", "identifiable", "gauge")
#: The polynomial line test runs when ``n * dim`` is at most this (it costs about that many
#: polynomial products per direction); above it only the one-layer lemma is used.
MAX_LINE_WORK = 400_000


@dataclass
class KernelBlock:
    """An exact basis of ``ker Gamma(s)`` for one activation pattern.

    Attributes
    ----------
    resolution : int or None
        Index into the report's ``patterns`` (a tie resolution), or None for the
        pattern of the sample itself (off the boundary, or only invisible ties).
    rank : int
        ``rank Gamma(s)`` (exact).
    basis : list of list of int
        ``dim - rank`` integer vectors over ``tau``.
    lines : list of bool
        Per vector: the outputs on ``X`` are exactly constant along ``theta + t delta``.
    """

    resolution: int | None
    rank: int
    basis: list[list[int]]
    lines: list[bool] = field(default_factory=list)


@dataclass
class FreeBlock:
    """An exact basis of ``K_F(s) = ker Gamma_free(s) ∩ {delta_F = 0}`` for one tie resolution of a layer graph.

    Attributes
    ----------
    active : list of bool or None
        The side of each tie (the report's ``certificate.free_rank.ties`` order); None without ties.
    rank : int
        ``rank Gamma_free(s)`` over Q (exact: a minor nonsingular mod p and ``Gamma K = 0`` over Q).
    basis : list of list of int
        ``dim_free - rank`` integer vectors over ``theta`` (zero on the gauge).
    lines : list of bool
        Per vector: the outputs on ``X`` are exactly constant along ``theta + t delta`` for small ``|t|``
        (:func:`exactident.explain.chart.one_layer_lines`).
    """

    active: list[bool] | None
    rank: int
    basis: list[list[int]]
    lines: list[bool] = field(default_factory=list)


def fixed_names(net: Network, fixed: FixedEdges) -> list[str]:
    """Names ``W_{l+1}[k,v]`` of the fixed edges, in ``(l, v)`` order."""
    return [f"W_{l + 1}[{k},{v}]" for (l, v), k in sorted(fixed.s_max.items())]


def constant_line(net: Network, X: Sequence[Sequence[flint.fmpq]], fixed: FixedEdges, params: Sequence[Parameter],
                  vec: Sequence[int], *, ties: bool, max_work: int = MAX_LINE_WORK) -> bool:
    """Are the outputs on ``X`` exactly constant along ``theta + t delta`` for small ``t > 0``?

    ``delta`` must be in ``ker Gamma`` (of the sample's pattern, when ``ties`` is False).
    Off the boundary a direction moving one layer's parameters only is such a line
    (docs/explain.md, "Straight lines": with the pattern fixed, the outputs are affine in
    that layer's parameters, so constant to first order means constant).  Otherwise the
    network is run on polynomials in ``t``, every sample at once (:func:`exactident.model.line_forward.line_pass`),
    when ``n * dim <= max_work``; False when not tested.

    Examples
    --------
    ``f = 3 relu(2x + 1)`` at ``0, 1``: ``b_1[0] - 3 b_2[0]`` keeps both outputs.

    >>> from exactident.model.fixed_edges import fixed_edges, free_parameters
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])], [[1], [0]])
    >>> fx = fixed_edges(net)
    >>> X = [[flint.fmpq(0)], [flint.fmpq(1)]]
    >>> constant_line(net, X, fx, free_parameters(net, fx), [0, 1, -3], ties=False)
    True
    """
    if not ties and len(layers_of(vec, params)) == 1:
        return True
    if len(X) * len(params) > max_work:
        return False
    from exactident.boundary.certificate import direction_of
    from exactident.model.line_forward import line_pass

    if not X:
        return True
    dW, db = direction_of(net, fixed, [flint.fmpq(v) for v in vec])
    return line_pass(net.W, net.b, dW, db, X).is_constant()


def _first(blocks: Sequence[KernelBlock], j: int, *, lines_only: bool = False,
           block: int | None = None) -> tuple[int, int] | None:
    for b, blk in enumerate(blocks):
        if block is not None and b != block:
            continue
        for d, vec in enumerate(blk.basis):
            if vec[j] and (not lines_only or (d < len(blk.lines) and blk.lines[d])):
                return b, d
    return None


def classify(names: Sequence[str], fixed: Sequence[str], *, verdict: str, degenerate: bool,
             blocks: Sequence[KernelBlock], covers_all: bool, cn_fails: bool,
             entering_block: int | None = None, certificate_deltas: Mapping[str, Mapping[str, str]] | None = None
             ) -> list[dict[str, Any]]:
    """The ``parameters`` entries (module docstring): fixed edges first, then ``tau`` in order.

    Parameters
    ----------
    names : list of str
        Names of the coordinates of ``tau``.
    fixed : list of str
        Names of the fixed edges.
    verdict : str
        The report's verdict.
    degenerate : bool
        Theta is in ``S``.
    blocks : list of KernelBlock
        Exact kernels (one off the boundary; one per enumerated tie resolution on it).
    covers_all : bool
        ``blocks`` cover every tie resolution (needed for ``first-order-determined``).
    cn_fails : bool
        Off the boundary, certified ``rank Gamma = rank A < dim`` (``blocks[0]`` is that kernel).
    entering_block : int, optional
        The block of the entering certificate's resolution.
    certificate_deltas : dict, optional
        ``{"line": {name: value}, "entering": {name: value}}``: the certificate's direction.

    Returns
    -------
    list of dict
        ``{name, class[, by, witness][, why]}``; ``witness`` is ``[block, direction]`` or
        ``"certificate"``.

    Examples
    --------
    >>> blk = KernelBlock(None, 2, [[0, 1, -3]], [True])
    >>> [e["class"] for e in classify(["W_1[0,0]", "b_1[0]", "b_2[0]"], ["W_2[0,0]"], verdict="not-identifiable",
    ...                               degenerate=False, blocks=[blk], covers_all=True, cn_fails=True)]
    ['fixed', 'first-order-determined', 'not-identifiable', 'not-identifiable']
    """
    out: list[dict[str, Any]] = [{"name": n, "class": "fixed"} for n in fixed]
    deltas = certificate_deltas or {}
    for j, name in enumerate(names):
        e: dict[str, Any] = {"name": name}
        moved = _first(blocks, j)
        if degenerate:
            e.update({"class": "unknown", "why": "theta is in S (a hidden neuron is all zero): the theorems do "
                      "not apply"})
        elif verdict == "identifiable":
            e.update({"class": "identifiable", "by": "C_S"})
        elif (w := _first(blocks, j, lines_only=True)) is not None:
            e.update({"class": "not-identifiable", "by": "line", "witness": list(w)})
        elif deltas.get("line", {}).get(name, "0") != "0":
            e.update({"class": "not-identifiable", "by": "line", "witness": "certificate"})
        elif cn_fails and moved is not None:
            e.update({"class": "not-identifiable", "by": "C_N", "witness": list(moved)})
        elif entering_block is not None and (w := _first(blocks, j, block=entering_block)) is not None:
            e.update({"class": "not-identifiable", "by": "entering", "witness": list(w)})
        elif deltas.get("entering", {}).get(name, "0") != "0":
            e.update({"class": "not-identifiable", "by": "entering", "witness": "certificate"})
        elif moved is None and covers_all:
            e["class"] = "first-order-determined"
        else:
            e.update({"class": "unknown", "why": _why_unknown(blocks, moved, covers_all)})
        out.append(e)
    return out


def _why_unknown(blocks: Sequence[KernelBlock], moved: tuple[int, int] | None, covers_all: bool) -> str:
    if moved is None:
        return "the tie resolutions were not all enumerated, so no kernel covers every piece near theta"
    b, d = moved
    blk = blocks[b]
    where = "ker Gamma" if blk.resolution is None else f"ker Gamma(s) of tie resolution {blk.resolution}"
    if blk.resolution is None:
        return (f"{where} moves it (direction {d}) to first order, but neither a straight line nor C_N failing "
                "shows a curve of equal outputs on X that moves it")
    return f"{where} moves it (direction {d}), but no certificate covers that resolution"


def classify_free(names: Sequence[str], gauge: Sequence[int], *, verdict: str, blocks: Sequence[FreeBlock],
                  covers_all: bool, why_none: str, certified: tuple[str, Sequence[flint.fmpq]] | None
                  ) -> list[dict[str, Any]]:
    """The ``parameters`` entries of a layer graph (module docstring), one per ``theta_j`` in order.

    Parameters
    ----------
    names : list of str
        Names of the free parameters.
    gauge : list of int
        The gauge set ``F`` (:func:`exactident.explain.chart.gauge_parameters`).
    verdict : str
        The report's verdict.
    blocks : list of FreeBlock
        Exact bases of ``K_F(s)``, one per tie resolution computed.
    covers_all : bool
        ``blocks`` cover every tie resolution (needed for ``first-order-determined``).
    why_none : str
        Why no kernel was computed (the ``why`` of ``unknown``), when ``blocks`` is empty.
    certified : (str, list of fmpq) or None
        The verified certificate's kind and direction in the chart
        (:func:`exactident.explain.chart.certificate_direction`); used for a ``not-identifiable`` verdict.

    Returns
    -------
    list of dict
        ``{name, index, class[, by][, witness][, line][, why]}``; ``witness`` is ``[block, direction]`` or
        ``"certificate"``.

    Examples
    --------
    ``v leaky(w x + b) + d`` with the gauge ``v`` and the certified line ``b += t, d -= 2 t``:

    >>> cert = ("line", [flint.fmpq(v) for v in (0, 1, 0, -2)])
    >>> blk = FreeBlock(None, 2, [[0, 1, 0, -2]], [False])
    >>> [(e["class"], e.get("by")) for e in classify_free(["w", "b", "v", "d"], [2], verdict="not-identifiable",
    ...     blocks=[blk], covers_all=True, why_none="", certified=cert)]
    [('first-order-determined', None), ('not-identifiable', 'line'), ('gauge', None), ('not-identifiable', 'line')]
    """
    out = []
    fixed = set(gauge)
    for j, name in enumerate(names):
        e: dict[str, Any] = {"name": name, "index": j}
        moved = next(((b, d) for b, blk in enumerate(blocks) for d, vec in enumerate(blk.basis) if vec[j]), None)
        line = next(((b, d) for b, blk in enumerate(blocks) for d, vec in enumerate(blk.basis)
                     if vec[j] and blk.lines[d]), None)
        if j in fixed:
            e.update({"class": "gauge", "why": "held at its value to remove the symmetries S_H (the chart)"})
        elif certified is not None and certified[1][j] != 0:
            e.update({"class": "not-identifiable", "by": certified[0], "witness": "certificate"})
        elif verdict == "identifiable":
            e.update({"class": "identifiable", "by": "free-rank"})
        elif moved is not None:
            w = line or moved
            e.update({"class": "undetermined", "witness": list(w), **({"line": True} if line else {})})
        elif blocks and covers_all:
            e["class"] = "first-order-determined"
        else:
            e.update({"class": "unknown", "why": why_none if not blocks else
                      "the tie resolutions were not all enumerated, so no kernel covers every piece near theta"})
        out.append(e)
    return out
