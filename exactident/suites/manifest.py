"""The suite manifest ``manifest.json``: what a suite folder holds, how to regenerate it, what to compare.

A suite is a folder of case files, one sub-folder per family
(``DIR/<family>/<name>.json``), plus ``DIR/manifest.json``::

    {"format": "exactident-suite/1", "exactident": "0.1.0",
     "compared_fields": ["verdict", "rank_gamma", ...],
     "regenerate": ["exactident generate --suite suite-v1 --out cases/suite-v1 --clean"],
     "counts": {"cases": 252, "family": {...}, "widths": {...}, "verdict": {...},
                "family_widths": {...}, "family_verdict": {...}},
     "cases": [{"file": "generic/generic-1x2x1-s1-000.json", "family": "generic",
                "widths": [1, 2, 1], "verdict": "identifiable"}, ...]}

It is rebuilt from the folder's files after every ``generate`` (so several
``generate`` runs into one folder give one consistent manifest) and read by
``suite run`` for its default ``compared_fields``.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from exactident.errors import CaseFormatError
from exactident.io.atomic import atomic_write_text
from exactident.io.case import SUITE_FORMAT, case_files, load_case, read_json
from exactident.suites.compare import DEFAULT_FIELDS, REPORT_SCALARS

__all__ = ["MANIFEST", "SUITE_FORMAT", "build_manifest", "read_manifest", "suite_files", "write_manifest"]

#: File name of a suite's manifest, at the root of the suite folder.
MANIFEST = "manifest.json"


def suite_files(folder: str | os.PathLike[str]) -> list[Path]:
    """Case files of a suite folder: every ``*.json`` below it except suite manifests and nested suites.

    In path order (:func:`exactident.io.case.case_files`: a sub-folder with its own manifest is a
    suite of its own, run separately).
    """
    return case_files(folder)[0]


def _widths_key(widths: Sequence[int]) -> str:
    return "x".join(str(w) for w in widths)


def _commands(gens: list[dict[str, Any]], out: str) -> list[str]:
    suites = sorted({g["suite"] for g in gens if g.get("suite")})
    cmds = [f"exactident generate --suite {s} --out {out} --clean" for s in suites]
    groups: dict[tuple, int] = {}
    for g in gens:
        if g.get("suite"):
            continue
        key = (g["family"], tuple(g["widths"]), g["seed"], g.get("n_samples"))
        groups[key] = max(groups.get(key, 0), int(g["index"]) + 1)
    for (family, widths, seed, n), count in sorted(groups.items(), key=lambda kv: repr(kv[0])):
        extra = "" if n is None else f" --n-samples {n}"
        cmds.append(f"exactident generate --family {family} --widths {','.join(map(str, widths))} "
                    f"--count {count} --seed {seed}{extra} --out {out}")
    return cmds


def build_manifest(folder: str | os.PathLike[str], out_text: str | None = None,
                   fields: Sequence[str] = DEFAULT_FIELDS) -> dict[str, Any]:
    """The manifest of ``folder`` from the case files it holds.

    Parameters
    ----------
    folder : path
    out_text : str, optional
        The folder as the regeneration commands should spell it (default: ``folder``).
    fields : sequence of str
        The report fields ``suite run`` compares by default.

    Raises
    ------
    CaseFormatError
        A malformed case file (naming the file and field).
    """
    from exactident import __version__

    root = Path(folder)
    rows: list[dict[str, Any]] = []
    gens = []
    for path in suite_files(root):
        case = load_case(path)
        gen = case.generator or {}
        family = str(gen.get("family", "(hand-written)"))
        verdict = (case.expected or {}).get("verdict")
        rows.append({"file": path.relative_to(root).as_posix(), "family": family,
                     "widths": list(case.compiled.layer_widths if not case.is_plain else case.network.widths),
                     "verdict": verdict})
        if gen.get("family") is not None:
            gens.append(gen)
    family_widths: dict[str, Counter[str]] = defaultdict(Counter)
    family_verdict: dict[str, Counter[str]] = defaultdict(Counter)
    for r in rows:
        family_widths[r["family"]][_widths_key(r["widths"])] += 1
        family_verdict[r["family"]][str(r["verdict"])] += 1
    counts = {
        "cases": len(rows),
        "family": dict(sorted(Counter(r["family"] for r in rows).items())),
        "widths": dict(sorted(Counter(_widths_key(r["widths"]) for r in rows).items())),
        "verdict": dict(sorted(Counter(str(r["verdict"]) for r in rows).items())),
        "family_widths": {f: dict(sorted(c.items())) for f, c in sorted(family_widths.items())},
        "family_verdict": {f: dict(sorted(c.items())) for f, c in sorted(family_verdict.items())},
    }
    return {"format": SUITE_FORMAT, "exactident": __version__, "compared_fields": list(fields),
            "regenerate": _commands(gens, out_text if out_text is not None else str(folder)),
            "counts": counts, "cases": rows}


def write_manifest(folder: str | os.PathLike[str], out_text: str | None = None,
                   fields: Sequence[str] = DEFAULT_FIELDS) -> dict[str, Any]:
    """Rebuild and write ``folder/manifest.json`` atomically; returns it."""
    manifest = build_manifest(folder, out_text, fields)
    atomic_write_text(Path(folder) / MANIFEST, json.dumps(manifest, indent=1) + "\n")
    return manifest


def read_manifest(folder: str | os.PathLike[str]) -> dict[str, Any] | None:
    """``folder/manifest.json`` if there is one (validated), else None.

    Raises
    ------
    CaseFormatError
        Not an ``exactident-suite/1`` object, or ``compared_fields`` not a list of report fields.
    """
    path = Path(folder) / MANIFEST
    if not path.is_file():
        return None
    obj = read_json(path)
    source = str(path)
    if not isinstance(obj, dict) or obj.get("format") != SUITE_FORMAT:
        raise CaseFormatError(source, "format", f"expected {SUITE_FORMAT!r}")
    fields = obj.get("compared_fields", list(DEFAULT_FIELDS))
    if not isinstance(fields, list) or not fields or any(f not in REPORT_SCALARS for f in fields):
        raise CaseFormatError(source, "compared_fields",
                              f"expected a list of report fields ({', '.join(REPORT_SCALARS)})")
    return obj
