"""Ground-truth test suites: generate cases with known answers, run them, score other tools, survey ranks.

- :mod:`~exactident.suites.generate` and :mod:`~exactident.suites.families`:
  families of cases whose promised property is checked exactly
  (:mod:`~exactident.suites.exact`) and whose ``expected`` block is the engine's
  exact report, seeded by hashing (:mod:`~exactident.suites.rng`);
- :mod:`~exactident.suites.run`: recompute a suite in process or on Dask and compare;
- :mod:`~exactident.suites.score`: accuracy of another tool per field and per family;
- :mod:`~exactident.suites.survey`: the distribution of ``R_Gamma`` over random draws.

The commands ``generate``, ``suite run``, ``suite score`` and ``survey`` live in
the ``cli_*`` modules.  Sits above :mod:`exactident.check` and
:mod:`exactident.crosscheck`, below :mod:`exactident.cli`; Dask, scikit-learn and
matplotlib are imported only where used.  See docs/suites.md.
"""

from exactident.suites.compare import DEFAULT_FIELDS, compare, expected_from_report
from exactident.suites.families import FAMILIES, Family
from exactident.suites.generate import Request, generate_case, suite_plan
from exactident.suites.run import SuiteRun, run_suite
from exactident.suites.score import SCORED_FIELDS, Score, command_tool, score
from exactident.suites.survey import SurveyResult, survey

__all__ = [
    "DEFAULT_FIELDS",
    "FAMILIES",
    "SCORED_FIELDS",
    "Family",
    "Request",
    "Score",
    "SuiteRun",
    "SurveyResult",
    "command_tool",
    "compare",
    "expected_from_report",
    "generate_case",
    "run_suite",
    "score",
    "suite_plan",
    "survey",
]
