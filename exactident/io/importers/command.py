"""``exactident import MODEL [--sample DATA] [-o CASE.json]`` and the model options of ``exactident check``.

``import`` reads a model file (and a sample), converts it exactly and writes
the case file (atomically with ``-o``, else to standard output), so the case
can be kept, diffed and re-checked.  ``check MODEL --sample DATA`` does the
same in memory and analyses it (:func:`load_check_inputs`).  Errors are
:class:`~exactident.errors.CaseFormatError` / ``UnsupportedCaseError``: one line
naming the file and the tensor, node or layer, exit status 2 (mapped by
:func:`exactident.cli.main`).

Called by :mod:`exactident.cli`; calls :mod:`exactident.io.importers.load`.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Sequence

from exactident.errors import CaseFormatError, OutputError
from exactident.io.case import Case, load_case
from exactident.io.importers.formats import (
    ASSUME_OPTION,
    DEFAULT_MAX_BYTES,
    FORMATS,
    PICKLE_EXTENSIONS,
    SAMPLE_ONLY_EXTENSIONS,
)
from exactident.io.limits import ReadLimits

# The importers (exactident.io.importers.load, .sample) are imported by the functions that read a model
# or a sample file: ``check CASE.json`` loads none of them (docs/performance.md, "start-up").

__all__ = ["MODEL_OPTIONS", "add_arguments", "add_assume_argument", "add_check_arguments", "is_model_file",
           "load_check_inputs", "option_input_files", "parse_bytes", "refuse_model_options", "run"]


def parse_bytes(text: str) -> int:
    """``"64M"``, ``"1G"``, ``"500000"`` -> bytes (K, M, G are powers of 1024).

    Examples
    --------
    >>> parse_bytes("64M"), parse_bytes("1000")
    (67108864, 1000)
    """
    m = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]?)[iI]?[bB]?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"expected a size like 64M or 1G, found {text!r}")
    return int(m.group(1)) * 1024 ** " KMG".index(m.group(2).upper() or " ")


def _common(parser: argparse.ArgumentParser) -> None:
    _fold_option(parser)
    parser.add_argument("--sample-rows", metavar="A:B", default=None,
                        help="use only rows A to B-1 of the sample (Python slice, either end optional)")
    parser.add_argument("--max-bytes", type=parse_bytes, default=DEFAULT_MAX_BYTES, metavar="SIZE",
                        help=f"refuse model/sample files and tensors larger than SIZE "
                             f"(default {DEFAULT_MAX_BYTES // 2**20}M)")
    parser.add_argument("--format", choices=sorted(FORMATS), default=None,
                        help="model format (default: from the extension, else the content)")
    parser.add_argument("--reference", metavar="REF", default=None,
                        help="check a weight-only file (state dict, .safetensors, .npz) against the model: an .onnx "
                             "file, or its outputs on the sample as .npy (n, N_L)")
    add_assume_argument(parser)


def add_assume_argument(parser: argparse.ArgumentParser) -> None:
    """``--assume-relu-mlp``, the same in every command that reads model files."""
    parser.add_argument(ASSUME_OPTION, dest="assume_relu_mlp", action="store_true",
                        help="state that a weight-only file (state dict, .safetensors, .npz) is a plain "
                             "Linear-ReLU-...-Linear chain: it holds no architecture, and without this statement "
                             "or --reference it is refused; the report records it as your assumption")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``exactident import`` (called by :func:`exactident.cli.build_parser`)."""
    parser.add_argument("model", metavar="MODEL",
                        help="model file: .onnx, .pt/.pth (state dict), .safetensors, .keras/.h5, .npz")
    parser.add_argument("--sample", metavar="DATA", default=None, help="sample file: .npy, .npz or .csv")
    parser.add_argument("-o", "--output", metavar="CASE.json", default=None,
                        help="write the case file here (atomically); default: standard output")
    parser.add_argument("--name", default=None, help="case name (default: the model file's stem)")
    _config_option(parser)
    _common(parser)


def _config_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", default=None,
                        help="Keras: the architecture of a weights-only .weights.h5 (JSON from model.to_json(), "
                             "or a .keras file)")


def _fold_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fold-batchnorm", action="store_true",
                        help="fold BatchNorm into the preceding layer in float64 (refused otherwise: sqrt(var + eps) "
                             "is irrational); the analysed network then differs from the framework's by that rounding")


def add_check_arguments(parser: argparse.ArgumentParser, sample_help: str | None = None) -> None:
    """Model options of every command that analyses a network (its CASE arguments may then be model files).

    The one place these options are added: ``check``, ``explain``, ``design``, ``crosscheck``,
    ``fdim``, ``canonical``, ``equiv``, ``audit`` and ``verify-certificate``; read by
    :func:`load_check_inputs`.  ``sample_help`` replaces the help of ``--sample`` for a command
    that uses the sample for more (``equiv``: the outputs compared on it).
    """
    parser.add_argument("--sample", metavar="DATA", default=None,
                        help=sample_help or "sample file (.npy, .npz, .csv) for the model files among the arguments")
    _config_option(parser)
    _common(parser)


def is_model_file(path: str, fmt: str | None = None) -> bool:
    """Whether :func:`load_check_inputs` imports ``path`` as a model file rather than reading a case file.

    A model file by its extension (pickles included, to refuse them by name) or by ``--format``;
    anything else is read as a case file, within the case limits (so /dev/zero is refused there).
    """
    known = {e for exts in FORMATS.values() for e in exts} | set(PICKLE_EXTENSIONS)
    return fmt is not None or os.path.splitext(path)[1].lower() in known


#: Options that only say how to read a model file (``argparse`` destinations and their flags).
MODEL_OPTIONS = (("reference", "--reference"), ("config", "--config"), ("assume_relu_mlp", "--assume-relu-mlp"),
                 ("fold_batchnorm", "--fold-batchnorm"))


def option_input_files(args: argparse.Namespace) -> list[tuple[str, str]]:
    """``(option, path)`` of the files a command reads through its options (``--sample``, ``--reference``,
    ``--config``, those given as paths): no output of the command may overwrite one."""
    return [(option, path) for option, path in (("--sample", getattr(args, "sample", None)),
                                                ("--reference", getattr(args, "reference", None)),
                                                ("--config", getattr(args, "config", None)))
            if isinstance(path, str)]


def refuse_model_options(paths: Sequence[str], args: argparse.Namespace) -> None:
    """Refuse the :data:`MODEL_OPTIONS` when none of a command's network ``paths`` is a model file.

    Given with case files only, they would be ignored: a case file holds its network.  A command reading
    several networks (``equiv A B``, ``audit VICTIM --extracted MODEL``) passes all of them.

    Raises
    ------
    CaseFormatError
        Naming the first path and the option.
    """
    if any(is_model_file(p, getattr(args, "format", None)) for p in paths):
        return
    for dest, option in MODEL_OPTIONS:
        value = getattr(args, dest, None)
        if value is not None and value is not False:
            raise CaseFormatError(paths[0], option, f"case files hold their network already; {option} is for "
                                                    "model files")


def load_check_inputs(paths: Sequence[str], args: argparse.Namespace,
                      limits: ReadLimits | None = None) -> list[Case]:
    """Case files loaded and model files imported with ``--sample``, all before any analysis.

    Case files are read within ``limits`` (:class:`exactident.io.limits.ReadLimits`; model
    and sample files within ``--max-bytes``).

    Raises
    ------
    CaseFormatError
        A model file without ``--sample``, ``--sample`` with no model file, any import error.
    """
    sample = getattr(args, "sample", None)
    rows = _rows(getattr(args, "sample_rows", None))
    command = getattr(args, "command", None) or "check"  # the hints below name the command that was run
    usage = f"exactident {command} " + {"verify-certificate": "MODEL REPORT.json", "equiv": "A B"}.get(command, "MODEL")
    fmt = getattr(args, "format", None)
    models = [p for p in paths if is_model_file(p, fmt)]
    if (sample is not None or rows is not None) and not models:
        taken = next((p for p in paths if os.path.splitext(p)[1].lower() in SAMPLE_ONLY_EXTENSIONS), None)
        if taken is not None:  # e.g. check X.npy --sample X.npy: the sample given where the model goes
            raise CaseFormatError(taken, "CASE", f"taken as a sample file ({os.path.splitext(taken)[1]} holds an "
                                  "array), given where a case file (.json) or a model file (.onnx, .pt, .safetensors, "
                                  f".keras, .npz) is expected: {usage} --sample DATA")
        option = "--sample" if sample is not None else "--sample-rows"
        raise CaseFormatError(paths[0], option, f"case files hold their own sample; {option} is for model files")
    if not models:
        refuse_model_options(paths, args)
    out = []
    for path in paths:
        if path in models:
            if sample is None:
                if os.path.splitext(path)[1].lower() in PICKLE_EXTENSIONS and fmt is None:
                    from exactident.io.importers.load import detect_format

                    detect_format(path)  # a pickle is refused as such, not asked for a sample
                raise CaseFormatError(path, "--sample", "a model file needs a sample: --sample DATA (.npy, .npz, .csv)")
            from exactident.io.importers.load import import_model

            out.append(import_model(path, sample, sample_rows=rows, fmt=getattr(args, "format", None),
                                    max_bytes=getattr(args, "max_bytes", None),
                                    reference=getattr(args, "reference", None), config=getattr(args, "config", None),
                                    fold_batchnorm=getattr(args, "fold_batchnorm", False),
                                    assume_relu_mlp=getattr(args, "assume_relu_mlp", False)))
        elif os.path.splitext(path)[1].lower() in SAMPLE_ONLY_EXTENSIONS:
            raise CaseFormatError(path, "", "a sample file, not a case: a sample file goes with --sample "
                                  f"({usage} --sample {path})")
        else:
            out.append(load_case(path, limits))
    return out


def _rows(text: str | None) -> slice | None:
    """``--sample-rows`` as a slice (:func:`exactident.io.importers.sample.parse_rows`, loaded only when given)."""
    if text is None:
        return None
    from exactident.io.importers.sample import parse_rows

    return parse_rows(text)


def run(args: argparse.Namespace) -> int:
    """``exactident import``: write the case, print a one-line summary (to stderr with ``-o -``-less stdout).

    With ``-o``, the destination is checked first
    (:func:`exactident.io.atomic.check_writable`): a missing or unwritable folder is
    refused before the model is read.
    """
    import sys

    from exactident.io.atomic import check_writable, write_stdout
    from exactident.io.case import dump_case, write_case
    from exactident.io.importers.load import import_document

    if args.output:  # before any work: an unwritable destination is bad usage (exit 2)
        problem = check_writable(args.output)
        if problem:
            raise CaseFormatError(args.output, "-o", problem)
        out = os.path.realpath(args.output)
        for option, path in [("MODEL", args.model), *option_input_files(args)]:
            if isinstance(path, str) and os.path.exists(path) and os.path.realpath(path) == out:
                raise CaseFormatError(args.output, "-o", f"is also the input {option}; refusing to overwrite it")
    doc = import_document(args.model, args.sample, sample_rows=_rows(args.sample_rows), fmt=args.format,
                          name=args.name, max_bytes=args.max_bytes, reference=args.reference,
                          config=getattr(args, "config", None), fold_batchnorm=getattr(args, "fold_batchnorm", False),
                          assume_relu_mlp=getattr(args, "assume_relu_mlp", False))
    if isinstance(doc, dict):
        return _write_document(doc, args)
    case = doc
    prov = case.provenance or {}
    dropped = prov.get("dropped_output_activation")
    arch = prov.get("architecture", "")
    summary = (f"{args.model}: {prov.get('format')}, widths {list(case.widths)}, weights "
               f"{prov.get('weight_dtype')}, n = {case.n_samples}"
               + (f", output {dropped} dropped (analysed up to the logits)" if dropped else "")
               + (f", architecture {arch} (give --reference to check it)" if arch.startswith("assumed") else "")
               + (f", {arch}" if "folded" in arch else "")
               + (f", forward check {prov['forward_check']}" if str(prov.get("forward_check", "")).startswith("not run")
                  else "; forward check passed" if "forward_check" in prov else ""))
    if args.output:
        try:
            write_case(case, args.output)
        except OSError as exc:  # e.g. a full disk: nothing written (exit 1, "cannot write PATH: ...")
            raise OutputError(args.output, exc) from None
        write_stdout(f"wrote {args.output}: {summary}\n")
    else:
        write_stdout(dump_case(case))
        print(summary, file=sys.stderr)
    return 0


def _write_document(doc: dict[str, object], args: argparse.Namespace) -> int:
    """``import`` of a layer graph: write the ``exactident-case/2`` dict, print the one-line summary."""
    import sys

    from exactident.io.atomic import atomic_write_text, write_stdout
    from exactident.io.case import dump_case
    from exactident.io.importers.graph_case import document_case

    prov = doc.get("provenance") or {}
    assert isinstance(prov, dict)
    layers = doc.get("layers") or []
    assert isinstance(layers, list)
    ops = sorted({str(layer["op"]) for layer in layers})
    dropped = prov.get("dropped_output_activation")
    sample = doc.get("sample") or []
    assert isinstance(sample, list)
    summary = (f"{args.model}: {prov.get('format')}, layer graph ({', '.join(ops)}), input shape "
               f"{doc.get('input_shape')}, weights {prov.get('weight_dtype')}, n = {len(sample)}"
               + (f", output {dropped} dropped (analysed up to the logits)" if dropped else "")
               + (f", {prov['architecture']}" if prov.get("architecture") else "")
               + (f", forward check {prov['forward_check']}" if str(prov.get("forward_check", "")).startswith("not run")
                  else "; forward check passed"))
    text = dump_case(document_case(doc, args.model))  # through the case reader: checked, canonical
    if args.output:
        try:
            atomic_write_text(args.output, text)
        except OSError as exc:
            raise OutputError(args.output, exc) from None
        write_stdout(f"wrote {args.output}: {summary}\n")
    else:
        write_stdout(text)
        print(summary, file=sys.stderr)
    return 0
