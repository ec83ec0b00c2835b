"""``exactident canonical``, ``exactident equiv`` and ``exactident audit`` (docs/symmetries.md, docs/cli.md).

Every network argument is a case file (``.json``) or a model file of any import path (``.onnx``,
``.pt``, ``.safetensors``, ``.keras``/``.h5``, ``.npz``) imported with ``--sample`` and the model
options of ``check``, by the loader every command uses
(:func:`exactident.io.importers.command.load_check_inputs`).  Samples (``--sample``,
``--queries``) are ``.npy``/``.npz``/``.csv`` files or a case file (its sample).  Everything is
read and validated before any work: bad input is one line naming the file and field, exit
status 2 (:func:`exactident.cli.main`); otherwise 0 (``equiv``: 0 same orbit, 1 different
orbits, 3 undecided; :func:`equiv_status`).

Called by :mod:`exactident.cli`; calls :mod:`exactident.symmetry.canonical`,
:mod:`exactident.symmetry.equiv` and :mod:`exactident.symmetry.audit`.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import flint

from exactident.errors import CaseFormatError
from exactident.io.argtypes import positive_int, positive_seconds
from exactident.io.atomic import write_stdout
from exactident.io.case import Case, load_case
from exactident.io.limits import add_limit_arguments, limits_from_args
from exactident.io.rationals import approx_text, format_fmpq, short_text
from exactident.io.report import escape_nonprintable
from exactident.model.network import Network

__all__ = [
    "add_audit_arguments",
    "add_canonical_arguments",
    "add_equiv_arguments",
    "canonical_json",
    "equiv_status",
    "load_network",
    "load_queries",
    "render_audit",
    "render_canonical",
    "render_equiv",
    "render_graph_audit",
    "run_audit",
    "run_canonical",
    "run_equiv",
]


def _is_case_file(path: str) -> bool:
    return path.lower().endswith((".json", ".json.gz"))


def load_network(path: str, args: argparse.Namespace) -> Case:
    """A case file, or a model file imported with ``--sample``, by the loader every command uses.

    :func:`exactident.io.importers.command.load_check_inputs` with the command's model options;
    for a case file ``--sample`` is not the network's (``equiv``: the outputs compared on it;
    ``audit``: the queries), so it is not handed to the loader then.

    Raises
    ------
    CaseFormatError
        Naming the file and field (a missing file, a pickle, a model file without ``--sample``, ...).
    """
    from exactident.io.importers.command import is_model_file, load_check_inputs

    ns = argparse.Namespace(**vars(args))
    if not is_model_file(path, getattr(args, "format", None)):
        ns.sample = ns.sample_rows = None
    elif getattr(args, "queries", None) is not None and getattr(args, "sample", None) is None:
        ns.sample = args.queries  # audit: the queries are the sample a model file is imported with
    return load_check_inputs([path], ns, limits_from_args(args))[0]


def load_queries(path: str, n_inputs: int, args: argparse.Namespace) -> list[list[flint.fmpq]]:
    """A sample: a case file's sample, or a ``.npy``/``.npz``/``.csv`` file read exactly.

    Raises
    ------
    CaseFormatError
        Naming the file (rows of the wrong width, NaN, a pickle, ...).
    """
    if _is_case_file(path):
        case = load_case(path, limits_from_args(args))
        if case.widths[0] != n_inputs:
            raise CaseFormatError(path, "sample", f"has {case.widths[0]} inputs, the network {n_inputs}")
        return case.X
    from exactident.io.importers.sample import load_sample

    return load_sample(path, n_inputs, max_bytes=getattr(args, "max_bytes", None)).X


def _common(parser: argparse.ArgumentParser, sample_help: str | None = None) -> None:
    from exactident.io.importers.command import add_check_arguments

    add_check_arguments(parser, sample_help)  # --sample and the model options, as for check
    add_limit_arguments(parser)


def add_canonical_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``exactident canonical``."""
    parser.add_argument("network", metavar="CASE", help="a case file, or a model file with --sample")
    parser.add_argument("--json", action="store_true", help="print the exactident-canonical/1 JSON object")
    _common(parser)


def add_equiv_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``exactident equiv``."""
    parser.add_argument("a", metavar="A", help="a case file, or a model file with --sample")
    parser.add_argument("b", metavar="B", help="a case file, or a model file with --sample")
    parser.add_argument("--json", action="store_true", help="print the exactident-equiv/1 JSON object")
    _common(parser, "the sample (.npy, .npz, .csv or a case file): model files are imported with it, and the "
                    "outputs of A and B are compared on it exactly")


def add_audit_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``exactident audit``."""
    from exactident.io.rationals import add_box_argument
    from exactident.symmetry.audit import DEFAULT_EXPLAIN_MAX_DIM, DEFAULT_MAX_BOXES

    parser.add_argument("victim", metavar="VICTIM", help="the victim: a case file, or a model file with --sample")
    parser.add_argument("--queries", metavar="X", default=None,
                        help="the attack's query set (.npy, .npz, .csv or a case file; default: --sample)")
    parser.add_argument("--extracted", metavar="MODEL", default=None,
                        help="the extracted model (case or model file): orbit and exact alignment error")
    add_box_argument(parser, "the input box of the obstructions (default: the queries' bounding box)")
    parser.add_argument("--explain-max-dim", type=positive_int, default=DEFAULT_EXPLAIN_MAX_DIM, metavar="N",
                        help="compute the exact kernel of Gamma up to N parameters "
                             f"(default {DEFAULT_EXPLAIN_MAX_DIM})")
    parser.add_argument("--max-boxes", type=positive_int, default=DEFAULT_MAX_BOXES, metavar="N",
                        help=f"sub-boxes per proof on the box (default {DEFAULT_MAX_BOXES})")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random primes (speed only)")
    parser.add_argument("--timeout", type=positive_seconds, default=None, metavar="SECONDS",
                        help="wall-time budget: past it the output says 'time budget exhausted at <stage>' (exit 0)")
    parser.add_argument("--json", action="store_true", help="print the exactident-audit/1 JSON object")
    _common(parser, "the sample (.npy, .npz, .csv): model files are imported with it; it is the query set "
                    "unless --queries is given")


def canonical_json(name: str, cf: Any) -> dict[str, Any]:
    """The ``exactident-canonical/1`` object: the canonical parameters (exact strings) and how they were reached."""
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


def run_canonical(args: argparse.Namespace) -> int:
    """``exactident canonical``."""
    from exactident.symmetry.canonical import canonical_form

    case = load_network(args.network, args)
    if not case.is_plain:  # a layer graph: the normal form under its rescalings (symmetry.canonical_graph)
        from exactident.symmetry.canonical_graph import (
            canonical_form_graph,
            graph_canonical_json,
            render_graph_canonical,
        )

        gf = canonical_form_graph(case.compiled)
        write_stdout(json.dumps(graph_canonical_json(case.name, gf), indent=1) + "\n" if args.json
                     else render_graph_canonical(case.name, gf))
        return 0
    cf = canonical_form(case.network)
    write_stdout(json.dumps(canonical_json(case.name, cf), indent=1) + "\n" if args.json
                 else render_canonical(case.name, cf))
    return 0


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


def run_equiv(args: argparse.Namespace) -> int:
    """``exactident equiv``."""
    from exactident.symmetry.equiv import equiv

    a, b = load_network(args.a, args), load_network(args.b, args)
    X = None
    if not (a.is_plain and b.is_plain):  # a layer graph: symmetry.equiv_graph
        from exactident.symmetry.equiv_graph import equiv_graph

        if args.sample is not None:
            X = load_queries(args.sample, a.widths[0], args)
        e = equiv_graph(a.compiled, b.compiled, X)
        write_stdout(json.dumps(e.to_dict(), indent=1) + "\n" if args.json else render_equiv(e, a.name, b.name))
        return equiv_status(e.same_orbit)
    if args.sample is not None:
        if a.network.widths[0] != b.network.widths[0]:
            raise CaseFormatError(args.b, "widths", f"{b.network.widths[0]} inputs, A has {a.network.widths[0]}: "
                                                    "no common sample")
        X = load_queries(args.sample, a.network.widths[0], args)
    e = equiv(a.network, b.network, X)
    write_stdout(json.dumps(e.to_dict(), indent=1) + "\n" if args.json else render_equiv(e, a.name, b.name))
    return equiv_status(e.same_orbit)


def equiv_status(same_orbit: bool | None) -> int:
    """Exit status of ``equiv``, as ``cmp``/``diff``: 0 same orbit, 1 different orbits, 3 undecided.

    Undecided is neither answer, so a script testing for 0 (same) or 1 (different) never takes it
    for one.

    Examples
    --------
    >>> equiv_status(True), equiv_status(False), equiv_status(None)
    (0, 1, 3)
    """
    return {True: 0, False: 1, None: 3}[same_orbit]


def render_audit(au: Any) -> str:
    """Terminal view of an :class:`~exactident.symmetry.audit.Audit`."""
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


def render_graph_audit(au: Any) -> str:
    """Terminal view of a :class:`~exactident.symmetry.audit_graph.GraphAudit`."""
    from exactident.symmetry.audit_graph import OBSTRUCTIONS_OMITTED

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


def run_audit(args: argparse.Namespace) -> int:
    """``exactident audit``."""
    from exactident.symmetry.audit import audit

    victim = load_network(args.victim, args)  # a model file without --sample or --queries: named first
    if args.queries is None:
        if args.sample is None:
            raise CaseFormatError(args.victim, "--queries", "the attack's query set is required: --queries X "
                                                            "(or --sample X)")
        args.queries = args.sample
    if not victim.is_plain:
        return _run_audit_graph(args, victim)
    net: Network = victim.network
    X = load_queries(args.queries, net.widths[0], args)
    other = load_network(args.extracted, args) if args.extracted else None
    if other is not None and (other.widths[0], other.widths[-1]) != (net.widths[0], net.widths[-1]):
        # as equiv --sample: the outputs on the queries cannot be compared, so say so rather than drop them
        raise CaseFormatError(args.extracted, "widths", f"{other.widths[0]} inputs and {other.widths[-1]} "
                                                        f"outputs, the victim has {net.widths[0]} and {net.widths[-1]}")
    extracted = other.network if other is not None and other.is_plain else None
    box = None
    if args.box is not None:
        box = ([args.box[0]] * net.widths[0], [args.box[1]] * net.widths[0])

    def work() -> str:  # text only: picklable, as a child process returns it with --timeout
        au = audit(net, X, extracted=extracted, name=victim.name, box=box, seed=args.seed,
                   explain_max_dim=args.explain_max_dim, max_boxes=args.max_boxes)
        if other is not None and not other.is_plain:  # a layer-graph extraction of a plain victim
            from exactident.symmetry.equiv_graph import equiv_graph

            au.extracted = equiv_graph(net, other.compiled, X)
        return json.dumps(au.to_dict(), indent=1) + "\n" if args.json else render_audit(au)

    return _timed_write(work, args, victim.name)


def _timed_write(work: Any, args: argparse.Namespace, name: str) -> int:
    from exactident.budget import run_command_work, timed_out_output

    outcome = run_command_work(work, args.timeout)
    write_stdout(timed_out_output("exactident-audit/1", name, args.timeout, outcome, args.json) if outcome.timed_out
                 else outcome.value)
    return 0


def _run_audit_graph(args: argparse.Namespace, victim: Case) -> int:
    """``exactident audit`` on a layer-graph victim (:mod:`exactident.symmetry.audit_graph`)."""
    from exactident.symmetry.audit_graph import audit_graph

    cn = victim.compiled
    X = load_queries(args.queries, cn.widths[0], args)
    extracted = load_network(args.extracted, args) if args.extracted else None
    if extracted is not None and (extracted.widths[0], extracted.widths[-1]) != (cn.widths[0], cn.widths[-1]):
        raise CaseFormatError(args.extracted, "widths", f"{extracted.widths[0]} inputs and {extracted.widths[-1]} "
                                                        f"outputs, the victim has {cn.widths[0]} and {cn.widths[-1]}")
    box = None if args.box is None else ([args.box[0]] * cn.widths[0], [args.box[1]] * cn.widths[0])
    shape = getattr(victim.architecture, "input_shape", None)
    other = extracted.compiled if extracted is not None else None

    def work() -> str:
        au = audit_graph(cn, X, extracted=other, name=victim.name, box=box, seed=args.seed, input_shape=shape)
        return json.dumps(au.to_dict(), indent=1) + "\n" if args.json else render_graph_audit(au)

    return _timed_write(work, args, victim.name)
