"""``exactident canonical``, ``exactident equiv`` and ``exactident audit`` (docs/symmetries.md, docs/cli.md).

Every network argument is a case file (``.json``) or a model file of any import path (``.onnx``,
``.pt``, ``.safetensors``, ``.keras``/``.h5``, ``.npz``) imported with ``--sample`` and the model
options of ``check``, by the loader every command uses
(:func:`exactident.io.importers.command.load_check_inputs`).  Samples (``--sample``,
``--queries``) are ``.npy``/``.npz``/``.csv`` files or a case file (its sample).  Everything is
read and validated before any work: bad input is one line naming the file and field, exit
status 2 (:func:`exactident.cli.main`); otherwise 0 (``equiv``: 0 same orbit, 1 different
orbits, 3 undecided; :func:`equiv_status`).

Every command takes any network (a plain ReLU MLP or a layer graph) and calls one module per object:
:mod:`exactident.symmetry.canonical`, :mod:`exactident.symmetry.equiv`, :mod:`exactident.symmetry.audit`;
the output is :mod:`exactident.symmetry.views`.  Called by :mod:`exactident.cli`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

import flint

from exactident.errors import CaseFormatError
from exactident.io.argtypes import positive_int, positive_seconds
from exactident.io.atomic import write_stdout
from exactident.io.case import Case, load_case
from exactident.io.limits import add_limit_arguments, limits_from_args
from exactident.symmetry.views import canonical_json, render_audit, render_canonical, render_equiv

__all__ = [
    "add_audit_arguments",
    "add_canonical_arguments",
    "add_equiv_arguments",
    "equiv_status",
    "load_network",
    "load_queries",
    "run_audit",
    "run_canonical",
    "run_equiv",
]


def _is_case_file(path: str) -> bool:
    return path.lower().endswith((".json", ".json.gz"))


def load_network(path: str, args: argparse.Namespace, networks: Sequence[str] = ()) -> Case:
    """A case file, or a model file imported with ``--sample``, by the loader every command uses.

    :func:`exactident.io.importers.command.load_check_inputs` with the command's model options;
    for a case file ``--sample`` is not the network's (``equiv``: the outputs compared on it;
    ``audit``: the queries), so it is not handed to the loader then, nor are the model options when
    ``networks`` (all the command's network paths) holds a model file they are for.

    Raises
    ------
    CaseFormatError
        Naming the file and field (a missing file, a pickle, a model file without ``--sample``, ...).
    """
    from exactident.io.importers.command import MODEL_OPTIONS, is_model_file, load_check_inputs, refuse_model_options

    ns = argparse.Namespace(**vars(args))
    refuse_model_options([path, *networks], args)
    if not is_model_file(path, getattr(args, "format", None)):
        ns.sample = ns.sample_rows = None
        for dest, _ in MODEL_OPTIONS:  # for the other network, a model file (refused above otherwise)
            if hasattr(ns, dest):
                setattr(ns, dest, False if dest in ("assume_relu_mlp", "fold_batchnorm") else None)
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


def _network(case: Case) -> Any:
    """The network the symmetry modules read: the plain MLP, else the compiled layer graph."""
    return case.network if case.is_plain else case.compiled


def run_canonical(args: argparse.Namespace) -> int:
    """``exactident canonical``."""
    from exactident.symmetry.canonical import canonical_form

    case = load_network(args.network, args)
    cf = canonical_form(_network(case))
    write_stdout(json.dumps(canonical_json(case.name, cf), indent=1) + "\n" if args.json
                 else render_canonical(case.name, cf))
    return 0


def run_equiv(args: argparse.Namespace) -> int:
    """``exactident equiv``."""
    from exactident.symmetry.equiv import equiv

    a, b = load_network(args.a, args, [args.b]), load_network(args.b, args, [args.a])
    X = None
    if args.sample is not None:
        if a.is_plain and b.is_plain and a.network.widths[0] != b.network.widths[0]:
            raise CaseFormatError(args.b, "widths", f"{b.network.widths[0]} inputs, A has {a.network.widths[0]}: "
                                                    "no common sample")
        from exactident.io.importers.command import is_model_file

        # a model file was imported with this very sample: its X is the sample as that model reads it (an
        # image batch (n, H, W, C) or (n, C, H, W) in the case's layout, rounded to the model's dtype)
        imported = [c for c, p in ((a, args.a), (b, args.b)) if is_model_file(p, getattr(args, "format", None))]
        X = imported[0].X if imported else load_queries(args.sample, a.widths[0], args)
    e = equiv(_network(a), _network(b), X)
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


def run_audit(args: argparse.Namespace) -> int:
    """``exactident audit``."""
    from exactident.budget import run_command_work, timed_out_output
    from exactident.symmetry.audit import audit

    victim = load_network(args.victim, args, [args.extracted] if args.extracted else [])  # a model file without
    # --sample or --queries: named first
    if args.queries is None:
        if args.sample is None:
            raise CaseFormatError(args.victim, "--queries", "the attack's query set is required: --queries X "
                                                            "(or --sample X)")
        args.queries = args.sample
    net = _network(victim)
    n_in, n_out = net.widths[0], net.widths[-1]
    X = load_queries(args.queries, n_in, args)
    other = load_network(args.extracted, args, [args.victim]) if args.extracted else None
    if other is not None and (other.widths[0], other.widths[-1]) != (n_in, n_out):
        # as equiv --sample: the outputs on the queries cannot be compared, so say so rather than drop them
        raise CaseFormatError(args.extracted, "widths", f"{other.widths[0]} inputs and {other.widths[-1]} "
                                                        f"outputs, the victim has {n_in} and {n_out}")
    box = None if args.box is None else ([args.box[0]] * n_in, [args.box[1]] * n_in)
    shape = None if victim.is_plain else getattr(victim.architecture, "input_shape", None)

    def work() -> str:  # text only: picklable, as a child process returns it with --timeout
        au = audit(net, X, extracted=None if other is None else _network(other), name=victim.name, box=box,
                   seed=args.seed, explain_max_dim=args.explain_max_dim, max_boxes=args.max_boxes, input_shape=shape)
        return json.dumps(au.to_dict(), indent=1) + "\n" if args.json else render_audit(au)

    outcome = run_command_work(work, args.timeout)
    write_stdout(timed_out_output("exactident-audit/1", victim.name, args.timeout, outcome, args.json)
                 if outcome.timed_out else outcome.value)
    return 0
