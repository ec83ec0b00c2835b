"""``generate``: build cases of a family, verify their promise, and let the engine fill ``expected``.

One case = one request ``(family, widths, seed, index, n_samples)``.  Its
random stream is :class:`~exactident.suites.rng.HashRng` keyed by that request
(so a case does not depend on the other cases asked for with it, and the same
request gives the same bytes in any process, as long as the engine gives the
same report: a boundary certificate's direction may come from scipy's float
LP when scipy is installed); the family's ``build`` searches
until its property holds, ``verify`` checks it again, and
:func:`exactident.check` (exact ranks, ``all_ranks=True``, no float
cross-check) computes the report whose exact part becomes ``expected``
(:func:`~exactident.suites.compare.expected_from_report`).

Files go to ``OUT/<family>/<name>.json``, each written atomically, then the
suite's manifest is rebuilt from what the folder holds
(:mod:`exactident.suites.manifest`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exactident.errors import InvariantViolation
from exactident.io.case import Case, parse_case
from exactident.suites.draft import draft_to_case_obj
from exactident.suites.families import get_family
from exactident.suites.families.common import Unmet
from exactident.suites.rng import HashRng

__all__ = ["SUITES", "Request", "generate_case", "plan_requests", "remove_generated", "suite_plan", "suite_skips"]

#: The key prefix of every case stream: change it and every generated case changes.
STREAM = "exactident-suite/1"

#: The widths of every family in ``suite-v1``.
SUITE_V1_WIDTHS = ([1, 2, 1], [2, 3, 1], [2, 2, 2], [2, 3, 2], [2, 2, 2, 1])
#: Built-in suites: name -> (seed, [(family, widths, count), ...]).  ``suite-v1`` is cases/suite-v1/.
SUITES: dict[str, tuple[int, list[tuple[str, list[int], int]]]] = {
    "suite-v1": (1, [(family, list(w), count) for family, count in (
        ("generic", 9), ("boundary", 6), ("degenerate", 4), ("dead-neuron", 6), ("all-active", 5),
        ("twins", 6), ("gap", 6), ("rescaled", 8), ("near-kink", 6), ("float32-trap", 6), ("trained", 3))
        for w in SUITE_V1_WIDTHS]),
}


@dataclass(frozen=True)
class Request:
    """One case to generate: the whole key of its random stream.

    Attributes
    ----------
    family : str
        A family name (``exactident generate --list``).
    widths : tuple of int
        ``N_0, ..., N_L``.
    seed : int
    index : int
        The case's number among those of the same family, widths and seed.
    n_samples : int, optional
        Sample size; None lets the family choose.
    suite : str, optional
        The built-in suite the case belongs to (a key of :data:`SUITES`), if any.
    """

    family: str
    widths: tuple[int, ...]
    seed: int
    index: int
    n_samples: int | None = None
    suite: str | None = None

    @property
    def name(self) -> str:
        """The case's name, e.g. ``generic-2x3x1-s1-004`` (``-n<n>`` after the widths when ``n_samples`` is set)."""
        n = "" if self.n_samples is None else f"-n{self.n_samples}"
        return f"{self.family}-{'x'.join(map(str, self.widths))}{n}-s{self.seed}-{self.index:03d}"

    @property
    def path(self) -> str:
        return f"{self.family}/{self.name}.json"


def suite_plan(name: str) -> list[Request]:
    """Every request of a built-in suite, skipping the (family, widths) pairs the family refuses.

    Raises
    ------
    UnsupportedCaseError
        Unknown suite name, or a family needs a module that is not installed.
    """
    if name not in SUITES:
        raise Unmet(f"unknown suite {name!r} (known: {', '.join(SUITES)})")
    seed, rows = SUITES[name]
    out = []
    for family, widths, count in rows:
        _check_needs(family)
        if get_family(family).impossible(list(widths)) is None:
            out += [Request(family, tuple(widths), seed, k, None, name) for k in range(count)]
    return out


def suite_skips(name: str) -> list[str]:
    """The (family, widths) pairs of a built-in suite its family refuses, each with the reason."""
    _, rows = SUITES[name]
    return [f"{family} x {list(widths)}: {why}" for family, widths, _ in rows
            if (why := get_family(family).impossible(list(widths)))]


def _check_needs(family: str) -> None:
    fam = get_family(family)
    if fam.needs:
        try:
            __import__(fam.needs)
        except ImportError:
            raise Unmet(f"family {family!r} needs {fam.needs}: pip install 'exactident[suites]'") from None


def plan_requests(family: str, widths: list[int], count: int, seed: int, n_samples: int | None) -> list[Request]:
    """``count`` requests of one family; refused at once when the architecture makes the family impossible.

    Raises
    ------
    UnsupportedCaseError
        Unknown family, or its property cannot hold for ``widths`` (the message says why).
    """
    fam = get_family(family)
    why = fam.impossible(list(widths))
    if why:
        raise Unmet(f"family {family!r} cannot produce widths {list(widths)}: {why}")
    _check_needs(family)
    return [Request(family, tuple(widths), seed, k, n_samples) for k in range(count)]


def _version() -> str:
    from exactident import __version__

    return __version__


def generate_case(req: Request) -> Case:
    """Build, verify and analyse one requested case.

    Returns
    -------
    Case
        With ``generator`` (family, widths, seed, index, n_samples, the
        family's parameters and promise, exactident's version) and ``expected``
        (the exact report fields) set.

    Raises
    ------
    UnsupportedCaseError
        The family found no case with its property (the message says how hard it looked).
    InvariantViolation
        A built case fails its own property check (a generator bug).
    """
    from exactident.check import check
    from exactident.suites.compare import expected_from_report

    fam = get_family(req.family)
    rng = HashRng(STREAM, req.family, list(req.widths), req.seed, req.index, req.n_samples)
    try:
        draft = fam.build(rng, list(req.widths), req.index, req.n_samples)
    except Unmet as exc:
        raise Unmet(f"family {req.family!r}, widths {list(req.widths)}, case {req.index}: {exc}") from None
    problem = fam.verify(draft)
    if problem:
        raise InvariantViolation(f"generated case {req.name} breaks the {req.family} promise: {problem}")
    obj = draft_to_case_obj(draft, req.name)
    generator: dict[str, Any] = {"family": req.family, "widths": list(req.widths), "seed": req.seed,
                                 "index": req.index, "n_samples": req.n_samples}
    if req.suite:
        generator["suite"] = req.suite
    generator.update({"parameters": draft.params, "property": fam.promise, "exactident": _version()})
    obj["generator"] = generator
    case = parse_case(obj, req.path)
    report = check(case, numeric=False, all_ranks=True)
    case.expected = expected_from_report(report.to_dict())
    return case


def generate_all(requests: list[Request], out: Path, progress: Callable[[Iterator[Request]], Iterator[Request]]
                 ) -> list[Path]:
    """Generate and write every request (each file atomically, as it is done)."""
    from exactident.io.case import write_case

    written = []
    for req in progress(iter(requests)):
        case = generate_case(req)
        path = out / req.path
        path.parent.mkdir(parents=True, exist_ok=True)
        write_case(case, path)
        written.append(path)
    return written


def remove_generated(out: Path) -> int:
    """Delete the generated cases under ``out`` (files with a ``generator`` block) and the folders this empties.

    Hand-written files and anything unreadable are left alone.
    """
    from exactident.errors import CaseFormatError
    from exactident.io.case import read_json
    from exactident.suites.manifest import suite_files

    count = 0
    for path in suite_files(out):
        try:
            obj = read_json(path)
        except CaseFormatError:
            continue
        if isinstance(obj, dict) and "generator" in obj:
            path.unlink()
            count += 1
    for folder in sorted((p for p in out.iterdir() if p.is_dir()), reverse=True) if out.is_dir() else []:
        if not any(folder.iterdir()):
            folder.rmdir()
    return count
