"""``exactident generate``: write generated cases with their ``expected`` blocks (docs/suites.md).

``--family NAME --widths 2,3,1 --count N --seed S --out DIR [--n-samples N]``
writes ``DIR/NAME/*.json``; ``--suite suite-v1 --out DIR [--clean]`` writes a
whole built-in suite; ``--list`` prints the families.  Every request is
checked (family known, architecture possible, optional modules present)
before any file is written; cases are then written one by one, atomically,
as they are generated, and ``DIR/manifest.json`` is rebuilt at the end.  A
request a family cannot meet stops the run with exit 2 and says why.

Called by :mod:`exactident.cli`.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from exactident.errors import OutputError, UnsupportedCaseError
from exactident.io.argtypes import non_negative_int, parse_widths, positive_int

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``generate`` subcommand's options."""
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--family", metavar="NAME", help="the family to generate (see --list)")
    what.add_argument("--suite", metavar="NAME", help="a built-in suite (suite-v1: the shipped cases/suite-v1)")
    what.add_argument("--list", action="store_true", help="print the families and their promised properties")
    parser.add_argument("--widths", type=parse_widths, metavar="N0,...,NL", help="architecture, e.g. 2,3,1")
    parser.add_argument("--count", type=positive_int, default=1, metavar="N", help="number of cases (default 1)")
    parser.add_argument("--seed", type=non_negative_int, default=0, metavar="S", help="seed (default 0)")
    parser.add_argument("--n-samples", type=positive_int, default=None, metavar="N",
                        help="sample size (default: the family's; generic cycles below/at/above dim/N_L)")
    parser.add_argument("--out", metavar="DIR", help="suite folder: cases go to DIR/<family>/, manifest to DIR")
    parser.add_argument("--clean", action="store_true",
                        help="first delete DIR's generated cases (files with a generator block)")


def _list() -> str:
    from exactident.suites.families import FAMILIES

    lines = []
    for fam in FAMILIES.values():
        needs = f" (needs {fam.needs})" if fam.needs else ""
        lines.append(f"{fam.name}{needs}: {fam.summary}")
        lines.append(f"    promise: {fam.promise}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    """Run the subcommand (errors propagate to :func:`exactident.cli.main`: bad requests exit 2)."""
    from exactident.io.atomic import write_stdout

    if args.list:
        write_stdout(_list())
        return 0
    from exactident.suites.generate import generate_all, plan_requests, remove_generated, suite_plan, suite_skips
    from exactident.suites.manifest import write_manifest
    from exactident.suites.progress import progress_iter

    if not args.out:
        raise UnsupportedCaseError("generate: --out DIR is required")
    if args.family:
        if not args.widths:
            raise UnsupportedCaseError("generate: --widths is required with --family")
        requests = plan_requests(args.family, args.widths, args.count, args.seed, args.n_samples)
    else:
        requests = suite_plan(args.suite)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UnsupportedCaseError(f"generate: --out {args.out} exists and is not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        removed = remove_generated(out) if args.clean else 0
        paths = generate_all(requests, out, lambda it: progress_iter(it, len(requests), "generate"))
        manifest = write_manifest(out, args.out)
    except OSError as exc:
        raise OutputError(args.out, exc) from None
    verdicts = Counter(str(r["verdict"]) for r in manifest["cases"] if r["file"] in
                       {p.relative_to(out).as_posix() for p in paths})
    text = (f"{'removed ' + str(removed) + ' old cases; ' if removed else ''}wrote {len(paths)} cases under "
            f"{args.out} ({', '.join(f'{v} {k}' for k, v in sorted(verdicts.items()))}); "
            f"manifest {out / 'manifest.json'}: {manifest['counts']['cases']} cases in all\n")
    if args.suite:
        text += "".join(f"skipped {line}\n" for line in suite_skips(args.suite))
    write_stdout(text)
    return 0
