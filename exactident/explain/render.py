"""Readable text for ``explain``: the report's ``explanation`` lines and the terminal view.

The terminal shows a few lines per kernel direction (:func:`exactident.explain.kernel.combination_text`,
abbreviated when the integers are large); the exact integers are in the JSON.

Called by :mod:`exactident.explain.core` and :mod:`exactident.explain.command`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from exactident.explain.kernel import combination_text
from exactident.io.report import Report, escape_nonprintable
from exactident.model.network import Network
from exactident.model.symmetry import Symmetry

# ``ex`` below is an :class:`exactident.explain.core.Explanation` (not imported: core imports this module).
Explanation = Any

__all__ = ["compress_names", "direction_texts", "explanation_lines", "framework_text", "free_explanation_lines",
           "plain_rules_line", "render_constrained", "render_explanation", "symmetry_text"]

_NAME = re.compile(r"(W|b)_(\d+)\[(\d+)(?:,(\d+))?\]")


def _runs(values: Sequence[int]) -> str:
    out, start = [], None
    for k, v in enumerate(values):
        if start is None:
            start = v
        if k + 1 == len(values) or values[k + 1] != v + 1:
            out.append(str(v) if v == start else f"{start}..{v}")
            start = None
    return ",".join(out)


def compress_names(names: Sequence[str], limit: int | None = None) -> str:
    """Parameter names grouped per neuron: ``W_2[2,0..7], b_2[2]``; at most ``limit`` groups, then ``...``.

    Columns of one row that form several runs are braced (``W_2[2,{0..2,5}]``), so the row index
    stays apart from the list of columns (``W_2[2,0..2,5]`` would read as three indices).

    Examples
    --------
    >>> compress_names(["W_2[2,0]", "W_2[2,1]", "W_2[2,2]", "W_2[2,5]", "b_2[2]", "b_2[4]", "b_3[0]"])
    'W_2[2,{0..2,5}], b_2[2,4], b_3[0]'
    """
    groups: dict[tuple[str, int, int], list[int]] = {}
    other: list[str] = []
    for n in names:
        m = _NAME.fullmatch(n)
        if m is None:
            other.append(n)
            continue
        key = (m[1], int(m[2]), int(m[3]) if m[1] == "W" else 0)
        groups.setdefault(key, []).append(int(m[4]) if m[1] == "W" else int(m[3]))
    parts = []
    for (kind, l, i), idx in groups.items():
        runs = _runs(sorted(idx))
        parts.append(f"W_{l}[{i},{'{' + runs + '}' if ',' in runs else runs}]" if kind == "W" else f"b_{l}[{runs}]")
    parts += other
    if limit is not None and len(parts) > limit:
        return ", ".join(parts[:limit]) + f", ... ({len(names)} in all)"
    return ", ".join(parts)


_GROUP = re.compile(r"\b([Wb])_(\d+)\[([^\]]*)\]")


def framework_text(text: str, names: Mapping[str, str]) -> str:
    """Paper names in ``text`` (``W_2[2,0..7], b_2[2]``) as the framework's (``fc2.weight[2,0..7], fc2.bias[2]``).

    ``names`` is the case's ``provenance["parameter_names"]`` (``{"W_2": "fc2.weight[i,j]", ...}``); a
    kernel stored ``(N_{l-1}, N_l)`` (``kernel[j,i]``: Keras, scikit-learn, Flax) gets its two indices
    swapped; any other index order is left as it is.

    Examples
    --------
    >>> framework_text("W_2[2,0..7], b_2[2], b_3[0]", {"W_2": "fc2.weight[i,j]", "b_2": "fc2.bias[i]"})
    'fc2.weight[2,0..7], fc2.bias[2], b_3[0]'
    >>> framework_text("W_1[2,0..7]", {"W_1": "layers/dense/kernel[j,i]"})
    'layers/dense/kernel[0..7,2]'
    >>> framework_text("W_1[2,{0,3..4}]", {"W_1": "layers/dense/kernel[j,i]"})
    'layers/dense/kernel[{0,3..4},2]'
    """
    def sub(m: re.Match[str]) -> str:
        t = names.get(f"{m[1]}_{m[2]}")
        if not isinstance(t, str):
            return m[0]
        base, index = t[:t.rindex("[")] if "[" in t else t, m[3].split(",", 1)
        if t.endswith(("[i,j]", "[i]")):
            return f"{base}[{m[3]}]"
        if t.endswith("[j,i]") and len(index) == 2:
            return f"{base}[{index[1]},{index[0]}]"
        return m[0]

    return _GROUP.sub(sub, text)


def direction_texts(ex: Explanation, limit: int = 6) -> list[str]:
    """One line per kernel direction: ``d3 = 2 W_1[0,0] - b_1[0]  [line]`` (``s2.d0`` for resolution 2)."""
    out = []
    for blk in ex.blocks:
        where = "" if blk.resolution is None else f"s{blk.resolution}."
        for d, (vec, line) in enumerate(zip(blk.basis, blk.lines)):
            out.append(f"{where}d{d} = {combination_text(vec, ex.names, limit)}" + ("  [line]" if line else ""))
    return out


def _by(ex: Explanation) -> str:
    counts: dict[str, int] = {}
    for e in ex.parameters:
        if e["class"] == "not-identifiable":
            counts[e["by"]] = counts.get(e["by"], 0) + 1
    words = {"line": "on exact straight lines", "C_N": "by C_N failing", "entering": "by the entering certificate"}
    return ", ".join(f"{n} {words.get(k, k)}" for k, n in counts.items())


def explanation_lines(report: Report, ex: Explanation, deltas: Mapping[str, Mapping[str, str]]) -> list[str]:
    """The readable lines of the report field ``explanation`` (prose, not verified)."""
    dim = report.dim
    out: list[str] = []
    if report.verdict == "identifiable":
        out.append(f"C_S holds: all {dim} free parameters are identifiable (Theorem 9)")
    elif report.degenerate:
        out.append("theta is in S: the theorems do not apply, every free parameter is unknown")
    if not ex.blocks and report.verdict != "identifiable":
        out.append("no kernel computed: the tie resolutions were not enumerated (the resolution cap)")
    for blk in ex.blocks:
        where = "ker Gamma" if blk.resolution is None else f"ker Gamma(s) of tie resolution {blk.resolution}"
        moved = sum(1 for j in range(dim) if any(vec[j] for vec in blk.basis))
        n_lines = sum(blk.lines)
        if blk.rank == dim:
            out.append(f"{where} is zero (rank {blk.rank} = dim: C_S holds there)")
            continue
        out.append(f"{where} has dimension {dim - blk.rank} (rank {blk.rank} < dim = {dim}; exact basis, "
                   f"Gamma K = 0 checked over Q) and moves {moved} of the {dim} free parameters"
                   + (f"; {n_lines} basis direction(s) keep the outputs on X exactly along a straight line"
                      if n_lines else ""))
    if report.verdict != "identifiable" and not report.degenerate:
        out.append(f"parameters: {ex.count('not-identifiable')} not identifiable"
                   + (f" ({_by(ex)})" if ex.count("not-identifiable") else "")
                   + f", {ex.count('first-order-determined')} determined to first order, "
                   f"{ex.count('unknown')} unknown; {ex.count('fixed')} fixed edges")
    if any(any(b.lines) for b in ex.blocks) and report.verdict not in ("not-identifiable", "degenerate"):
        out.append("the straight lines prove that theta is not locally identifiable from X; the verdict above "
                   "comes from Theorems 8 and 9 and the boundary certificates, which do not use them")
    for e in sorted(ex.neurons, key=lambda e: (-e.get("n_moved", 0), e["layer"], e["neuron"])):
        if e.get("under_determined"):
            full = e["hyperplane_full"]
            out.append(f"under-determined neuron ({e['layer']},{e['neuron']}): {e['why']} "
                       f"[kernel moves {e['n_moved']} of its {full} incoming parameters]")
    L = len(report.widths) - 1
    moved_out = [ex.names[j] for j in range(dim) if ex.names[j].startswith((f"W_{L}[", f"b_{L}["))
                 and any(vec[j] for blk in ex.blocks for vec in blk.basis)]
    if moved_out:
        out.append(f"output layer parameters moved with them: {compress_names(moved_out, 8)}")
    names = {nm: j for j, nm in enumerate(ex.names)}
    for kind, delta in deltas.items():
        vec = [0] * dim
        text = ", ".join(f"{k} = {v}" for k, v in delta.items() if v != "0")
        if all("/" not in v for v in delta.values()):
            for k, v in delta.items():
                if k in names:
                    vec[names[k]] = int(v)
            text = combination_text(vec, ex.names)
        out.append(f"certificate direction ({kind}): {text}")
    return out


def render_explanation(report: Report, ex: Explanation, *, max_directions: int = 20) -> str:
    """The terminal view of ``exactident explain`` (names escaped); see :func:`render_constrained` for the other."""
    if hasattr(ex, "units"):
        return render_constrained(report, ex, max_directions=max_directions)
    esc = escape_nonprintable
    lines = [f"{esc(report.name)}: {report.verdict} ({_rank_clause(report, 'rank Gamma')}, "
             f"rank A = {'-' if report.rank_a is None else report.rank_a}, dim = {report.dim}, "
             f"n*N_L = {report.n_samples * report.widths[-1]})",
             f"  {esc(report.reason)}"]
    lines += [f"  {esc(line)}" for line in ex.lines]
    by_class: dict[str, list[str]] = {}
    for e in ex.parameters:
        key = e["class"] + (f" ({e['by']})" if e["class"] == "not-identifiable" else "")
        by_class.setdefault(key, []).append(e["name"])
    known = ((report.extra.get("provenance") or {}).get("parameter_names") or {})
    lines.append("  parameters by class:" + ("  (the model's own names in parentheses)" if known else ""))
    for key, names in by_class.items():
        text = compress_names(names, 12)
        theirs = framework_text(text, known) if known else text
        lines.append(f"    {key} [{len(names)}]: {text}" + (f"  ({esc(theirs)})" if theirs != text else ""))
    lines += _directions("kernel directions", direction_texts(ex), max_directions)
    lines.append(f"  ({ex.seconds:.2f}s after the report)")
    return "\n".join(lines) + "\n"


def _rank_clause(report: Report, symbol: str) -> str:
    """The header's rank: ``= r``, or the certified interval with the Monte Carlo value labelled beside it."""
    if report.rank_gamma_interval is None:
        return f"{symbol} = {report.rank_gamma_text}"
    mc = (report.montecarlo or {}).get("rank_gamma")
    return f"{symbol} certified in {report.rank_gamma_text}" + ("" if mc is None else f", Monte Carlo value {mc}")


def _directions(title: str, texts: list[str], max_directions: int) -> list[str]:
    """The kernel directions block of a text explanation: at most ``max_directions`` lines, then how many more."""
    if not texts:
        return []
    out = [f"  {title} ({len(texts)}, integer basis; exact integers in --json):"]
    out += [f"    {t}" for t in texts[:max_directions]]
    if len(texts) > max_directions:
        out.append(f"    ... ({len(texts) - max_directions} more in --json)")
    return out



def render_constrained(report: Report, ex: Explanation, *, max_directions: int = 20) -> str:
    """The terminal view of ``exactident explain`` on a constrained network (a ``ConstrainedExplanation``)."""
    esc = escape_nonprintable
    lines = [f"{esc(report.name)}: {report.verdict} ({_rank_clause(report, 'rank Gamma_free')}, "
             f"dim_free = {report.dim}, n*N_L = {report.n_samples * report.widths[-1]})", f"  {esc(report.reason)}"]
    lines += [f"  {esc(line)}" for line in ex.lines]
    by_class: dict[str, list[str]] = {}
    for e in ex.parameters:
        key = e["class"] + (f" ({e['by']})" if e["class"] == "not-identifiable" else "")
        by_class.setdefault(key, []).append(e["name"])
    lines.append("  parameters by class:")
    for key, names in by_class.items():
        shown = ", ".join(names[:12]) + (f", ... ({len(names)} in all)" if len(names) > 12 else "")
        lines.append(f"    {key} [{len(names)}]: {esc(shown)}")
    lines.append("  units (active / tie / slope side of n samples; local rank of its own parameters):")
    n = report.n_samples
    for u in ex.units:
        if u["kind"] == "linear" and not u["local_full"]:
            continue  # carriers and pooling units: nothing of their own
        flags = [f for f in ("dead", "constant") if u[f]] + ([] if u["pinned"] else ["not pinned alone"])
        lines.append(f"    {esc(u['name'])} [{u['kind']}]: {u['n_active']} / {u['n_tie']} / {u['n_slope_side']} "
                     f"of {n}; local rank {u['local_rank']} of {u['local_full']}"
                     + (f"; {', '.join(flags)}" if flags else ""))
    texts = []
    for blk in ex.blocks:
        where = "" if blk.active is None else "s" + "".join("+" if a else "-" for a in blk.active) + "."
        for d, (vec, line) in enumerate(zip(blk.basis, blk.lines)):
            texts.append(f"{where}d{d} = {combination_text(vec, ex.names)}" + ("  [line]" if line else ""))
    lines += _directions("kernel directions in the chart", [esc(t) for t in texts], max_directions)
    lines.append(f"  ({ex.seconds:.2f}s after the report)")
    return "\n".join(lines) + "\n"


def plain_rules_line(cn: Network) -> str:
    """The one line saying which hypothesis of the plain MLP's rules fails on ``cn`` (so they are not applied).

    ``C_N`` (Theorem 8), ``rank A`` and the per-neuron twins and couplings read off ``ker Gamma`` assume a
    layered ReLU MLP with every weight and bias a free parameter; ``cn.features`` says what this network has
    instead.

    Examples
    --------
    >>> import flint, numpy as np
    >>> cn = Network((1, 1, 1), [flint.fmpq_mat([[1]]), flint.fmpq_mat([[2]])],
    ...     [[flint.fmpq(-5)], [flint.fmpq(0)]], [np.array([[0]]), np.array([[2]])], [np.array([1]), np.array([-1])],
    ...     [[flint.fmpq(1, 10)]], [np.array([-1])], 3, ("leaky ReLU", "fixed weights"))
    >>> plain_rules_line(cn)
    'not applied: C_N (Theorem 8), rank A and per-neuron twins and couplings need a layered ReLU MLP with every \
weight and bias free; this network has leaky ReLU, fixed weights'
    """
    why = ", ".join(cn.features) if cn.features else "weights that are not all free and distinct"
    return ("not applied: C_N (Theorem 8), rank A and per-neuron twins and couplings need a layered ReLU MLP "
            f"with every weight and bias free; this network has {why}")


def symmetry_text(sym: Symmetry) -> str:
    """``S_H`` in words, each kind of symmetry counted (:meth:`exactident.model.symmetry.Symmetry.describe`).

    >>> symmetry_text(Symmetry(6, 6, 2, 4, [], 1, 0, ["rescaling", "bias-translation"]))
    '1 rescaling, 1 bias-translation through linear units (dim S_H = 2)'
    >>> symmetry_text(Symmetry(4, 4, 0, 4))
    'no symmetry (dim S_H = 0)'
    """
    if not sym.symmetry_dim:
        return "no symmetry (dim S_H = 0)"
    return f"{sym.describe()} (dim S_H = {sym.symmetry_dim})"


def free_explanation_lines(report: Report, ex: Explanation, sym: Symmetry) -> list[str]:
    """The readable lines of a layer graph's report field ``explanation`` (prose, not verified).

    ``ex`` is a :class:`exactident.explain.core.ConstrainedExplanation`.
    """
    gauge = ", ".join(ex.names[j] for j in ex.gauge[:8]) + (" ..." if len(ex.gauge) > 8 else "")
    out = [f"{sym.n_params} free parameters, symmetries kept by the family (S_H): {symmetry_text(sym)}, "
           f"dim_free = {sym.dim_free}; gauge (held to remove S_H): {gauge or 'none'}"]
    if report.verdict == "identifiable":
        out.append(f"rank Gamma_free = dim_free on every tie resolution: all {sym.dim_free} parameters outside the "
                   "gauge are identifiable (up to S_H)")
    if len(ex.blocks) == 1:
        blk = ex.blocks[0]
        moved = sum(1 for j in range(sym.n_params) if any(vec[j] for vec in blk.basis))
        out.append(f"ker Gamma_free in the chart (K_F) has dimension {len(blk.basis)} (rank {blk.rank}, dim_free = "
                   f"{sym.dim_free}; exact basis, Gamma_free K = 0 checked over Q) and moves {moved} parameters"
                   + (f"; {sum(blk.lines)} direction(s) keep the outputs on X exactly along a straight line"
                      if any(blk.lines) else ""))
    elif ex.blocks:
        dims = sorted({len(b.basis) for b in ex.blocks})
        moved = sum(1 for j in range(sym.n_params) if any(vec[j] for b in ex.blocks for vec in b.basis))
        out.append(f"ker Gamma_free in the chart (K_F(s)) on each of the {len(ex.blocks)} tie resolutions s: dimension "
                   f"{'/'.join(map(str, dims))} (exact bases, Gamma_free K = 0 checked over Q); together they move "
                   f"{moved} parameters")
    if report.verdict != "identifiable":
        by = sorted({e["by"] for e in ex.parameters if e["class"] == "not-identifiable"})
        out.append(f"parameters: {ex.count('not-identifiable')} not identifiable"
                   + (f" (certificate: {', '.join(by)})" if by else " (certificate)")
                   + f", {ex.count('undetermined')} undetermined (first order), {ex.count('first-order-determined')} "
                   f"determined to first order, {ex.count('unknown')} unknown, {ex.count('gauge')} gauge")
    dead = [u["name"] for u in ex.units if u["dead"]]
    if dead:
        out.append(f"dead units ({len(dead)}): " + ", ".join(dead[:8]) + (" ..." if len(dead) > 8 else ""))
    const = [u["name"] for u in ex.units if u["constant"] and not u["dead"]]
    if const:
        out.append(f"constant units ({len(const)}): " + ", ".join(const[:8]) + (" ..." if len(const) > 8 else ""))
    for c in ex.channels:
        out.append(f"channel {c['name']}: {c['n_units']} positions, {c['n_dead']} dead; local rank {c['local_rank']} "
                   f"of {c['local_full']} over all positions (best single position {c['best_position_rank']}); "
                   + ", ".join(f"{n} {k}" for k, n in c["classes"].items()))
    return out
