"""What ``exactident canonical``, ``equiv`` and ``audit`` print: the JSON objects and the terminal views.

One view per result, whatever the network: :func:`canonical_json` and :func:`render_canonical` (a plain
MLP's :class:`~exactident.symmetry.canonical.CanonicalForm` or a layer graph's
:class:`~exactident.symmetry.canonical.GraphCanonicalForm`), :func:`render_equiv`
(:class:`~exactident.symmetry.equiv.Equivalence`), :func:`render_audit`
(:class:`~exactident.symmetry.audit.Audit` or :class:`~exactident.symmetry.audit.GraphAudit`).
Formats: docs/symmetries.md.  Exact numbers are strings in JSON; the terminal shortens long ones.

Called by :mod:`exactident.symmetry.command`.
"""

from __future__ import annotations

from typing import Any

import flint

from exactident.io.rationals import approx_text, format_fmpq, short_text
from exactident.io.report import escape_nonprintable
from exactident.symmetry.canonical import GraphCanonicalForm

__all__ = ["canonical_json", "render_audit", "render_canonical", "render_equiv"]


def canonical_json(name: str, cf: Any) -> dict[str, Any]:
    """The ``exactident-canonical/1`` object: the canonical parameters (exact strings) and how they were reached."""
    if isinstance(cf, GraphCanonicalForm):
        return _graph_canonical_json(name, cf)
    net = cf.network
    return {"format": "exactident-canonical/1", "name": name, "widths": list(net.widths), "digest": cf.digest(),
            "weights": [[[format_fmpq(net.W[l][i, j]) for j in range(net.widths[l])] for i in range(net.widths[l + 1])]
                        for l in range(net.L)],
            "biases": [[format_fmpq(x) for x in v] for v in net.b],
            "permutation": cf.perm, "scale": [[format_fmpq(s) for s in row] for row in cf.scale],
            "twins": [{"layer": l, "neurons": g} for l, g in cf.twins],
            "dead_in": [list(t) for t in cf.dead_in], "dead_out": [list(t) for t in cf.dead_out],
            "isolated": [list(t) for t in cf.isolated], "branches": cf.branches}


def _pairs(items: list[tuple[int, int]]) -> str:
    return ", ".join(f"({l},{i})" for l, i in items) or "none"


def _scale_text(s: flint.fmpq) -> str:
    text = format_fmpq(s)
    return text if len(text) <= 12 else f"~{approx_text(s.p, s.q)}"


def render_canonical(name: str, cf: Any) -> str:
    """Terminal view of a canonical form: digest, per layer the permutation and scales, named neurons."""
    if isinstance(cf, GraphCanonicalForm):
        return _render_graph_canonical(name, cf)
    net = cf.network
    lines = [f"{escape_nonprintable(name)}: canonical form, widths {list(net.widths)}, digest {cf.digest()} "
             f"({cf.branches} tie order(s) compared)"]
    for l in range(1, net.L):
        moved = [f"{i}<-{p}" + ("" if s == 1 else f" x{_scale_text(s)}")
                 for i, (p, s) in enumerate(zip(cf.perm[l - 1], cf.scale[l - 1]))]
        shown = ", ".join(moved[:16]) + (f", ... ({len(moved)} in all)" if len(moved) > 16 else "")
        lines.append(f"  layer {l}: canonical <- original (scale): {shown}")
    lines.append(f"  twins: {'; '.join(f'layer {l}: {g}' for l, g in cf.twins) or 'none'}")
    lines.append(f"  dead-in (pre-activation 0 on every input): {_pairs(cf.dead_in)}; "
                 f"dead-out (zero outgoing column): {_pairs(cf.dead_out)}")
    if cf.isolated:
        lines.append(f"  isolated (dead-in, dead-out, a nonzero incoming weight): {_pairs(cf.isolated)}: forms of the "
                     "same orbit may differ (docs/symmetries.md)")
    lines.append("  (scales shown with ~ are rounded here; every parameter and scale is exact in --json)")
    return "\n".join(lines) + "\n"


def render_equiv(e: Any, name_a: str = "A", name_b: str = "B") -> str:
    """Terminal view of an :class:`~exactident.symmetry.equiv.Equivalence`."""
    verdict = {True: "same orbit", False: "different orbits", None: "undecided"}[e.same_orbit]
    lines = [f"{escape_nonprintable(name_a)} vs {escape_nonprintable(name_b)}: {verdict} ({e.reason})"]
    if e.form_a is not None and e.form_b is not None:
        lines.append(f"  canonical digests {e.form_a.digest()} and {e.form_b.digest()}")
    fd = e.first_difference
    if fd and "parameter" in fd:  # a layer graph: the forms under the rescalings, by parameter name
        lines.append(f"  first difference of the canonical forms: {escape_nonprintable(fd['entry'])}: "
                     f"{_short(fd['a'])} vs {_short(fd['b'])}")
    elif fd:
        lines.append(f"  first difference of the canonical forms: {fd['entry']} (layer {fd['layer']}, canonical "
                     f"neuron {fd['neuron']}; neuron {fd['neuron_a']} of A, {fd['neuron_b']} of B): "
                     f"{_short(fd['a'])} vs {_short(fd['b'])}"
                     + (f"; the weight comes from canonical neuron {fd['from']} of layer {fd['layer'] - 1} (neuron "
                        f"{fd['from_a']} of A, {fd['from_b']} of B)" if "from" in fd else ""))
    al = e.alignment
    if al is not None and (fd or al.max_abs != 0):
        d = al.to_dict()
        rel = ("-" if d["max_rel"] is None else f"{_short(d['max_rel'], d['max_rel_float'])} at {d['where_rel']} "
               f"({d['bits']:.2f} bits)" if d["bits"] is not None else "0")
        lines.append(f"  alignment ({al.method}): max abs error {_short(d['max_abs'], d['max_abs_float'])} at "
                     f"{d['where_abs']}; max relative error {rel}"
                     + (f"; {al.zero_mismatch} entries zero in A only" if al.zero_mismatch else ""))
    s = e.sample
    if s is not None:
        if s["same_outputs"]:
            lines.append(f"  outputs on the sample ({s['n']} points): equal exactly"
                         + ("; different orbits: a certified hidden symmetry on the sample"
                            if e.hidden_symmetry_on_sample else ""))
        else:
            f = s["first_difference"]
            lines.append(f"  outputs on the sample ({s['n']} points): differ, first at sample {f['sample']} output "
                         f"{f['output']} ({_short(f['a'])} vs {_short(f['b'])}); max abs "
                         f"~{s['max_abs_output_error_float']:.3g}")
    return "\n".join(lines) + "\n"


def _short(text: str, approx: float | None = None) -> str:
    """An exact number for the terminal: whole when short (with ``~approx``), else its float and digit count.

    Never cut in the middle (``3.797e95 (96 digits)``, :func:`exactident.io.rationals.short_text`);
    ``--json`` has the whole number.
    """
    if len(text) > 40:
        return short_text(text, keep=13)
    return text if approx is None or text == "0" else f"{text} (~{approx:.3g})"


def render_audit(au: Any) -> str:
    """Terminal view of an :class:`~exactident.symmetry.audit.Audit` or a
    :class:`~exactident.symmetry.audit.GraphAudit`."""
    from exactident.symmetry.audit import GraphAudit

    if isinstance(au, GraphAudit):
        return _render_graph_audit(au)
    r, c = au.report, au.counts()
    lines = [f"{escape_nonprintable(au.name)}: {r.verdict} from {au.n_queries} queries "
             f"(rank Gamma = {r.rank_gamma_text}, dim = {au.dim}, widths {au.widths})",
             f"  {escape_nonprintable(r.reason)}"]
    lines.append(f"  hidden neurons: {c['hidden']}; dead on the queries {c['dead']}, always active "
                 f"{c['always_active']}, hyperplane not pinned {c['unpinned']}, under-determined "
                 f"{c['under_determined']} (kernel: {au.kernel})")
    for e in au.neurons:
        if e.get("under_determined") or e["dead"] or e["always_active"] or e["twins"]:
            lines.append(f"    ({e['layer']},{e['neuron']}): {e['why']}")
    if au.obstructions:
        lines.append("  no query set in the box can pin:")
        lines += [f"    {o['kind']}: {o['text']}" for o in au.obstructions]
    else:
        lines.append("  no structural obstruction found in the box (theta not in S, no twins, no neuron proved dead "
                     "or always active on the box)")
    if au.extracted is not None:
        lines += ["  extracted model: " + ln.strip() for ln in render_equiv(au.extracted, "victim",
                                                                           "extracted").splitlines()]
    lines.append("  (" + ", ".join(f"{k} {v:.2f}s" for k, v in au.seconds.items()) + ")")
    return "\n".join(lines) + "\n"


def _render_graph_canonical(name: str, cf: GraphCanonicalForm) -> str:
    """Terminal view of a layer graph's normal form."""
    net = cf.network
    lines = [f"{escape_nonprintable(name)}: canonical form under the rescalings and block permutations (layer graph: "
             f"{', '.join(net.features) or 'constrained'}), {net.n_params} parameters, digest {cf.digest()}"]
    for us, p in zip(cf.classes[:8], cf.pivots):
        lines.append(f"  rescaling of {{{net.describe_units(us, limit=3)}}}: "
                     + (f"|{net.param_name(p)}| = 1" if p is not None else "not normalised"))
    if len(cf.classes) > 8:
        lines.append(f"  ... ({len(cf.classes)} generators in all; --json lists every one)")
    if not cf.complete:
        lines.append("  incomplete: a generator moves a nonzero parameter but has no pivot; forms of one orbit may "
                     "differ")
    if cf.perm is not None:
        for layer, blocks in cf.groups:
            members = [blk[0][1] for blk in blocks]  # a block by its first unit
            moved = [f"{i}<-{cf.perm[layer - 1][i]}" for i in members if cf.perm[layer - 1][i] != i]
            what = "units" if len(blocks[0]) == 1 else f"blocks of {len(blocks[0])} units (channels)"
            lines.append(f"  layer {layer}: {len(blocks)} interchangeable {what} sorted; canonical <- original: "
                         + (", ".join(moved[:12]) + (" ..." if len(moved) > 12 else "") if moved else "unchanged"))
    else:
        lines.append("  no interchangeable units or channels (skips or ties touch every unit): rescalings only")
    return "\n".join(lines) + "\n"


def _graph_canonical_json(name: str, cf: GraphCanonicalForm) -> dict[str, Any]:
    """The ``exactident-canonical/1`` object of a layer graph (docs/symmetries.md, "Layer graphs")."""
    net = cf.network
    by_layer: dict[int, list[str]] = {}
    for (l, _v), s in zip(cf.units, cf.scale):
        by_layer.setdefault(l, []).append(format_fmpq(s))
    return {"format": "exactident-canonical/1", "name": name, "widths": list(net.widths), "digest": cf.digest(),
            "weights": [[[format_fmpq(net.W[l][i, j]) for j in range(net.widths[l])] for i in range(net.widths[l + 1])]
                        for l in range(net.L)],
            "biases": [[format_fmpq(x) for x in v] for v in net.b],
            "permutation": cf.perm, "scale": [by_layer.get(l, []) for l in range(1, net.L)],
            "twins": [], "dead_in": [], "dead_out": [], "isolated": [], "branches": 1,
            "layer_graph": {"features": list(net.features),
                            "group": ("rescalings (H) and permutations of interchangeable blocks" if cf.groups
                                      else "rescalings (H)"),
                            "interchangeable": [{"layer": l, "units": [net.unit_name(*blk[0]) for blk in blocks]}
                                                | ({} if len(blocks[0]) == 1 else {"block_units": len(blocks[0])})
                                                for l, blocks in cf.groups],
                            "complete": cf.complete,
                            "parameters": [{"name": net.param_name(j), "value": format_fmpq(v)}
                                           for j, v in enumerate(cf.theta)],
                            "generators": [{"units": [net.unit_name(l, v) for l, v in us],
                                            "pivot": None if p is None else net.param_name(p)}
                                           for us, p in zip(cf.classes, cf.pivots)]}}


def _render_graph_audit(au: Any) -> str:
    from exactident.symmetry.audit import OBSTRUCTIONS_OMITTED

    r, c = au.report, au.counts()
    arch = r.extra.get("architecture", {})
    lines = [f"{escape_nonprintable(au.name)}: {r.verdict} from {au.n_queries} queries (layer graph: "
             f"{', '.join(arch.get('features', [])) or 'constrained'}; rank Gamma_free = {r.rank_gamma_text}, "
             f"dim_free = {au.dim}, widths {au.widths})", f"  {escape_nonprintable(r.reason)}"]
    lines.append(f"  hidden units: {c['hidden']}; dead on the queries {c['dead']}, silent {c['silent']}, not pinned "
                 f"{c['unpinned']}, under-determined {c['under_determined']} (kernel: {au.kernel})")
    lines.append("  parameters: " + ", ".join(f"{n} {k}" for k, n in sorted(au.classes.items())))
    shown = [u for u in au.units if u["dead"] or u["under_determined"] or not u["pinned"]]
    for u in shown[:12]:
        what = [w for w, on in (("dead", u["dead"]), ("under-determined", u["under_determined"]),
                                ("not pinned", not u["pinned"])) if on]
        lines.append(f"    {escape_nonprintable(u['name'])} ({u['kind']}): {', '.join(what)}; active on "
                     f"{u['n_active']}, slope side {u['n_slope_side']}, kink {u['n_tie']}; local rank "
                     f"{u['local_rank']} of {u['local_full']}")
    if len(shown) > 12:
        lines.append(f"    ... ({len(shown)} units in all; --json lists every one)")
    for ch in au.channels[:8]:
        lines.append(f"  channel {escape_nonprintable(ch['name'])}: {ch['n_units']} positions, {ch['n_dead']} dead, "
                     f"local rank {ch['local_rank']} of {ch['local_full']}")
    lines.append(f"  obstructions on the box: omitted ({OBSTRUCTIONS_OMITTED})")
    if au.extracted is not None:
        lines += ["  extracted model: " + ln.strip() for ln in render_equiv(au.extracted, "victim",
                                                                           "extracted").splitlines()]
    lines.append("  (" + ", ".join(f"{k} {v:.2f}s" for k, v in au.seconds.items()) + ")")
    return "\n".join(lines) + "\n"
