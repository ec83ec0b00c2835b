"""exactident: exact local identifiability of ReLU networks from a finite sample.

Implements Bona-Pellissier, Malgouyres and Bachoc, "Local Identifiability of
Deep ReLU Neural Networks: the Theory", NeurIPS 2022 (arXiv:2206.07424).

The package is layered (``docs/architecture.md``): ``io`` (numbers, case
files, reports), ``linalg`` (exact, modular and float linear algebra),
``model`` (the paper's objects on one network), ``ranks`` (certified ranks),
``boundary`` (ties), ``verify`` (independent certificate checks), ``numeric``
(float backends), and on top :func:`check`, ``run_cases``, ``crosscheck``,
``explain``, ``suites`` and the CLI.
Importing the package loads only :mod:`exactident.errors`: every public name
(``check``, ``load_case``, ``from_sklearn``, ...) is imported on first
use (PEP 562), so a command loads only what it uses, and never networkx, sympy,
scipy, matplotlib, pandas, tqdm, torch or the model importers unless it uses them.

:func:`~exactident.api.explain`, :func:`~exactident.api.design` and
:func:`~exactident.api.crosscheck` are the other library calls; in a notebook every
result displays as HTML and every call shows its stages (``progress=``; docs/notebook.md).

>>> from exactident import load_case, check
>>> import exactident
>>> exactident.check("cases/tiny-111-kink.json", numeric=False, progress=False).verdict
'not-identifiable'
"""

from __future__ import annotations

import importlib as _importlib
import sys as _sys
from typing import TYPE_CHECKING, Any

from exactident.errors import CaseFormatError, ExactIdentError, InvariantViolation, UnsupportedCaseError

if TYPE_CHECKING:  # the names below load on first use (PEP 562 ``__getattr__``): ``import exactident`` stays light
    from exactident import crosscheck, explain
    from exactident.api import design
    from exactident.budget import BudgetExhausted
    from exactident.check import CheckOptions, check
    from exactident.io.case import Case, load_case, parse_case, write_case
    from exactident.io.importers import from_flax, from_sklearn, from_torch, import_model
    from exactident.io.report import Report
    from exactident.model.network import Network

__all__ = [
           "BudgetExhausted",
           "Case",
           "CaseFormatError",
           "CheckOptions",
           "ExactIdentError",
           "InvariantViolation",
           "Network",
           "Report",
           "UnsupportedCaseError",
           "__version__",
           "check",
           "crosscheck",
           "design",
           "explain",
           "from_flax",
           "from_sklearn",
           "from_torch",
           "import_model",
           "load_case",
           "parse_case",
           "write_case",
]

# public name -> the module that defines it; imported on first access, so a command loads only what it uses
_LAZY = {
    "check": "exactident.check",
    "CheckOptions": "exactident.check",
    "design": "exactident.api",
    "BudgetExhausted": "exactident.budget",
    "Case": "exactident.io.case",
    "load_case": "exactident.io.case",
    "parse_case": "exactident.io.case",
    "write_case": "exactident.io.case",
    "from_flax": "exactident.io.importers",
    "from_sklearn": "exactident.io.importers",
    "from_torch": "exactident.io.importers",
    "import_model": "exactident.io.importers",
    "Report": "exactident.io.report",
    "Network": "exactident.model.network",
}
# exactident.explain and exactident.crosscheck are the subpackages *and* the library calls of the same name
_CALLABLE_PACKAGES = ("explain", "crosscheck")


def _lazy_name(namespace: dict[str, Any], table: dict[str, str], package: str, name: str) -> Any:
    # The PEP 562 __getattr__ of this package and its subpackages (exactident.testing): load ``name`` from
    # the module ``table`` names and bind it in ``namespace``, so the next access is a plain lookup.
    if name in table:
        value = getattr(_importlib.import_module(table[name]), name)
        namespace[name] = value
        return value
    raise AttributeError(f"module {package!r} has no attribute {name!r}")


def __getattr__(name: str) -> Any:
    if name in _CALLABLE_PACKAGES:
        return _importlib.import_module(f"exactident.{name}")  # bound (and made callable) by _Package
    return _lazy_name(globals(), _LAZY, __name__, name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Package(type(_sys)):  # type: ignore[misc]
    # The import system binds a submodule on its package once loaded, whoever imports it first:
    # ``exactident.check`` stays the function (as when it was imported eagerly), and
    # ``exactident.explain`` / ``exactident.crosscheck`` become callable packages.
    def __setattr__(self, name: str, value: Any) -> None:
        if name == "check" and isinstance(value, type(_sys)):
            value = value.check
        elif name in _CALLABLE_PACKAGES and isinstance(value, type(_sys)):
            from exactident.api import CallablePackage

            value.__class__ = CallablePackage
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package


#: The package version (PEP 440).
__version__ = "0.1.0"
