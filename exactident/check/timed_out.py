"""The reports of a case whose time budget ran out (``check(case, timeout=...)``, ``--timeout``).

With a budget the analysis runs in a child process; the report is handed to the parent as soon
as the verdict is reached (:func:`exactident.budget.deliver`), before the float cross-check, so a
budget that runs out there keeps the exact verdict and marks the ``numeric`` block ``timed out``
(:func:`keep_verdict`); earlier, the report is ``inconclusive`` with its ranks unknown
(:func:`timed_out_report`).
"""

from __future__ import annotations

from exactident.check.pipeline import constrained_of
from exactident.io.case import Case
from exactident.io.report import Report
from exactident.model.conditions import with_sample_size
from exactident.model.network import degenerate_neurons

__all__ = ["keep_verdict", "timed_out_report"]


def keep_verdict(report: Report, at_stage: str, seconds: float) -> Report:
    """The exact report of a case whose budget ran out after its verdict: ``numeric`` marked ``timed out``.

    Only the float cross-check runs after the verdict is delivered, so that is what
    did not finish; the exact part (verdict, ranks, certificate) is complete and verifies.

    Examples
    --------
    >>> from exactident.check import check
    >>> from exactident.io.case import parse_case
    >>> case = parse_case({"format": "exactident-case/1", "name": "t", "widths": [1, 1, 1],
    ...     "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]], "sample": [[0], [1], [-1]]})
    >>> r = keep_verdict(check(case, numeric=False), "float cross-check", 2.0)
    >>> r.verdict, r.numeric["status"], r.numeric["stage"], r.numeric["agrees"]
    ('identifiable', 'timed out', 'float cross-check', None)
    """
    rg, ra = report.pattern_ranks or (report.rank_gamma, report.rank_a)
    report.numeric = {"status": "timed out", "stage": at_stage, "dtype": "float64", "rank_gamma": None,
                      "rank_a": None, "verdict": None, "tol": None, "agrees": None,
                      "compared_with": {"rank_gamma": rg, "rank_a": ra, "verdict": None},
                      "singular_values_near_cut": [], "pattern_differs": None, "warnings": [],
                      "message": f"time budget exhausted at {at_stage}, after the exact verdict"}
    report.seconds = seconds
    return report


def timed_out_report(case: Case, at_stage: str, seconds: float) -> Report:
    """The report of a case whose time budget ran out: ``inconclusive``, ranks unknown (``null``).

    Examples
    --------
    >>> from exactident.io.case import parse_case
    >>> case = parse_case({"format": "exactident-case/1", "name": "t", "widths": [1, 1, 1],
    ...     "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]], "sample": [[0], [1]]})
    >>> r = timed_out_report(case, "ranks mod p", 2.0)
    >>> r.verdict, r.reason.split("; ")[-1], r.to_dict()["rank_gamma"], r.to_dict()["timed_out"]
    ('inconclusive', 'time budget exhausted at ranks mod p', None, True)
    """
    cn = constrained_of(case)
    if cn is not None:  # a constrained network: its layers' widths (no carriers) and dim_free, no degenerate set
        from exactident.model.symmetry import rescaling_symmetry

        widths, dim, degenerate = cn.layer_widths, rescaling_symmetry(cn).dim_free, False
    else:
        widths, dim, degenerate = list(case.network.widths), case.network.dim, bool(degenerate_neurons(case.network))
    report = Report(name=case.name, widths=widths, n_samples=len(case.X), dim=dim,
                    rank_gamma=None, rank_a=None, cs=None, cn=None,  # type: ignore[arg-type]  # no claim
                    degenerate=degenerate, on_boundary=None,  # type: ignore[arg-type]
                    n_ties=None,  # type: ignore[arg-type]
                    verdict="inconclusive", reason=with_sample_size(f"time budget exhausted at {at_stage}",
                                                                    case.X, widths[-1], dim, free=cn is not None),
                    extra={"timed_out": True, "stage": at_stage}, decided_by="none")
    report.seconds = seconds
    return report
