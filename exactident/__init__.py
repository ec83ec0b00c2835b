"""exactident: exact local identifiability of ReLU networks from a finite sample.

Implements Bona-Pellissier, Malgouyres and Bachoc, "Local Identifiability of
Deep ReLU Neural Networks: the Theory", NeurIPS 2022 (arXiv:2206.07424).

The package is layered (``docs/architecture.md``): ``io`` (numbers, case
files, reports), ``linalg`` (exact, modular and float linear algebra),
``model`` (the paper's objects on one network), ``ranks`` (certified ranks),
``boundary`` (ties), ``verify`` (independent certificate checks), ``numeric``
(float backends), and on top :func:`check`, ``run_cases``, ``crosscheck``,
``explain``, ``suites`` and the CLI.
Importing the package loads numpy and python-flint, never networkx, scipy,
matplotlib, pandas, tqdm or torch (those load where they are used).

:func:`~exactident.api.explain`, :func:`~exactident.api.design` and
:func:`~exactident.api.crosscheck` are the other library calls; in a notebook every
result displays as HTML and every call shows its stages (``progress=``; docs/notebook.md).

>>> from exactident import load_case, check
>>> import exactident
>>> exactident.check("cases/tiny-111-kink.json", numeric=False, progress=False).verdict
'not-identifiable'
"""

import sys as _sys

# the subpackages, made callable below
import exactident.crosscheck
import exactident.explain  # noqa: F401
from exactident.api import CallablePackage as _CallablePackage
from exactident.api import design
from exactident.check import check
from exactident.errors import CaseFormatError, ExactIdentError, InvariantViolation, UnsupportedCaseError
from exactident.io.case import Case, load_case, parse_case, write_case
from exactident.io.importers import from_flax, from_sklearn, from_torch, import_model
from exactident.io.report import Report
from exactident.model.network import Network

__all__ = [
           "Case",
           "CaseFormatError",
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
# exactident.explain and exactident.crosscheck are the subpackages *and* the library calls of the same name
for _name in ("exactident.explain", "exactident.crosscheck"):
    _sys.modules[_name].__class__ = _CallablePackage

#: The package version (PEP 440).
__version__ = "0.1.0"
