"""Opt-in pytest plugin: the cases of a ground-truth suite as the parametrised fixture ``exactident_suite_case``.

Enable it with ``pytest -p exactident.testing.plugin`` (or ``pytest_plugins = ["exactident.testing.plugin"]``
in a ``conftest.py``).  A test asking for ``exactident_suite_case`` runs once per case and receives a
:class:`~exactident.testing.strategies.KnownCase` with the case's exact answers (its ``expected`` block).

Options:

``--exactident-suite DIR``
    A suite folder (``exactident generate --suite suite-v1 --out DIR``, or any folder of case files
    with ``expected`` blocks).  Without it: ``cases/suite-v1`` under pytest's root directory when it
    exists, else the requests of the built-in ``suite-v1`` (:data:`exactident.suites.generate.SUITES`),
    each case built when its test runs (the same case ``exactident generate`` writes; the ``trained``
    family's are skipped without scikit-learn).
``--exactident-families NAME,...``
    Only these families.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from exactident.testing.strategies import KnownCase

__all__ = ["exactident_suite_case", "pytest_addoption", "pytest_generate_tests"]

FIXTURE = "exactident_suite_case"


def pytest_addoption(parser: pytest.Parser) -> None:
    """The plugin's two options (see the module doc)."""
    group = parser.getgroup("exactident")
    group.addoption("--exactident-suite", metavar="DIR", default=None,
                    help="suite folder for the exactident_suite_case fixture (default: cases/suite-v1, else the "
                         "built-in suite-v1 built on use)")
    group.addoption("--exactident-families", metavar="NAMES", default=None,
                    help="comma-separated families to keep (default: all)")


def _params(config: pytest.Config) -> list[Any]:
    from exactident.suites.families import get_family
    from exactident.suites.generate import SUITES, Request
    from exactident.suites.manifest import suite_files

    keep = config.getoption("--exactident-families")
    families = {f.strip() for f in keep.split(",") if f.strip()} if keep else None
    folder = config.getoption("--exactident-suite")
    if folder is None and (Path(str(config.rootpath)) / "cases" / "suite-v1").is_dir():
        folder = str(Path(str(config.rootpath)) / "cases" / "suite-v1")
    if folder is not None:
        if not Path(folder).is_dir():
            raise pytest.UsageError(f"--exactident-suite: {folder}: not a folder")
        root = Path(folder)
        return [pytest.param(p, id=str(p.relative_to(root).with_suffix("")))
                for p in suite_files(root) if families is None or p.parent.name in families]
    seed, rows = SUITES["suite-v1"]
    out = []
    for family, widths, count in rows:
        fam = get_family(family)
        if (families is not None and family not in families) or fam.impossible(list(widths)):
            continue
        for k in range(count):
            req = Request(family, tuple(widths), seed, k, None, "suite-v1")
            out.append(pytest.param(req, id=f"{family}/{req.name}"))
    return out


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrise every test that asks for ``exactident_suite_case`` by the suite's cases."""
    if FIXTURE in metafunc.fixturenames:
        metafunc.parametrize(FIXTURE, _params(metafunc.config), indirect=True)


@pytest.fixture
def exactident_suite_case(request: pytest.FixtureRequest) -> KnownCase:
    """One case of the suite with its exact answers (a file's ``expected`` block, or the built case's)."""
    from exactident.io.case import load_case
    from exactident.suites.families import get_family
    from exactident.suites.generate import Request
    from exactident.testing.strategies import _from_case, _generate

    param = request.param
    if isinstance(param, Request):
        needs = get_family(param.family).needs
        if needs:
            pytest.importorskip(needs)
        return _generate(param)
    case = load_case(param)
    if not case.expected or "rank_gamma" not in case.expected:
        pytest.skip(f"{param}: no expected block with exact ranks")
    return _from_case(case, str((case.generator or {}).get("family", "")))
