"""The library calls beside :func:`exactident.check`: ``explain``, ``design``, ``crosscheck`` (docs/notebook.md).

Each takes a case (a :class:`~exactident.io.case.Case` or a file path), shows its stages when
``progress`` asks for it (:mod:`exactident.progress`) and returns an object a notebook
displays as HTML.  They are reached as ``exactident.explain(...)``, ``exactident.design(...)``
and ``exactident.crosscheck(...)``: ``design`` is re-exported; ``exactident.explain`` and
``exactident.crosscheck`` stay the subpackages (so ``import exactident.explain.core`` works as
before) and are made callable (:class:`CallablePackage`).  The work is done by :mod:`exactident.explain.core`,
:mod:`exactident.explain.design` and :mod:`exactident.crosscheck.core`, imported on first call so
that ``import exactident`` stays light.
"""

from __future__ import annotations

import os
import types
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from exactident.budget import stage
from exactident.progress import showing

if TYPE_CHECKING:
    from exactident.crosscheck.core import CaseCrosscheck
    from exactident.explain.core import ConstrainedExplanation, Explanation
    from exactident.explain.design import Design
    from exactident.io.case import Case
    from exactident.io.report import Report
    from exactident.numeric.tolerance import Policy

__all__ = ["CallablePackage", "crosscheck", "design", "explain"]


def _case(case: Case | str | os.PathLike[str], sample: Any, reference: Any = None,
          assume_relu_mlp: bool = False) -> Case:
    from exactident.io.case import Case as _Case

    if isinstance(case, _Case) and sample is None:
        return case
    from exactident.io.importers.load import as_case

    return as_case(case, sample, reference=reference, assume_relu_mlp=assume_relu_mlp)


def explain(case: Case | str | os.PathLike[str], *, report: Report | None = None, seed: int | None = 0,
            sample: Any = None, progress: bool | None = None, reference: Any = None,
            assume_relu_mlp: bool = False, timeout: float | None = None) -> Explanation | ConstrainedExplanation:
    """Explain the verdict on ``case``: per parameter what the sample determines, the exact kernel of ``Gamma``.

    Parameters
    ----------
    case : Case, or path
        A case, a case file or a model file (as for :func:`exactident.check`).
    report : Report, optional
        ``check``'s report on this case (computed here, without the float cross-check, when not given).
    seed : int or None
        Seed of the random primes (speed only, never the result).
    sample : path or array-like
        The sample of a model file (required with one: refused without it, naming ``sample``).
    reference, assume_relu_mlp :
        For a weight-only model file, as for :func:`exactident.check`.
    progress : bool or None
        Show the stages (None: in a Jupyter kernel or a terminal).
    timeout : float, optional
        Seconds; checked when a stage begins (:func:`exactident.budget.soft_deadline`).  ``explain`` costs
        many times ``check`` on a large ``Gamma`` (minutes for a dim of about 1,200): a notebook may want one.

    Returns
    -------
    Explanation
        Parameter classes (``identifiable``, ``not-identifiable`` with a witness,
        ``first-order-determined``, ``unknown``, ``fixed``; docs/explain.md), neuron diagnostics and
        kernel directions, all exact.  ``.report`` is the report, with the fields ``parameters``,
        ``neurons``, ``kernel_basis`` and ``explanation`` added (so ``.report.parameters_frame()``
        has the classes).  A layer graph beyond the plain ReLU MLP gets a
        :class:`~exactident.explain.core.ConstrainedExplanation`: per free parameter (named as
        the framework names it), per unit and per convolution channel (report fields ``parameters``,
        ``units``, ``channels``, ``kernel_basis``, ``explanation``).

    Raises
    ------
    CaseFormatError
        A path that cannot be read or imported, a model file without ``sample``.
    BudgetExhausted
        ``timeout`` passed (its ``stage`` says where).

    Examples
    --------
    ``f = 3 relu(2x + 1)`` sampled at ``0, 1, -1/2`` (the last point on the kink, paper §2):

    >>> import exactident
    >>> ex = exactident.explain("cases/tiny-111-kink.json", progress=False)
    >>> ex.report.verdict, ex.report.decided_by
    ('not-identifiable', 'boundary-entering')
    >>> [(e["name"], e["class"]) for e in ex.parameters]  # doctest: +NORMALIZE_WHITESPACE
    [('W_2[0,0]', 'fixed'), ('W_1[0,0]', 'first-order-determined'), ('b_1[0]', 'not-identifiable'),
     ('b_2[0]', 'not-identifiable')]
    """
    from exactident.budget import soft_deadline
    from exactident.explain.core import explain as explain_case

    c = _case(case, sample, reference, assume_relu_mlp)
    with showing(progress, f"explain {c.name}"), soft_deadline(timeout):
        rep, ex = explain_case(c, report=report, seed=seed)
    rep.extra.update(ex.fields())
    return ex


def design(case: Case | str | os.PathLike[str], *, budget: int | None = None, seed: int | None = 0,
           report: Report | None = None, sample: Any = None, progress: bool | None = None, reference: Any = None,
           assume_relu_mlp: bool = False, timeout: float | None = None) -> Design:
    """Which samples already identify theta, and which new points would (:func:`exactident.explain.design.design`).

    Parameters
    ----------
    case : Case, or path
    budget : int, optional
        Most new points added (default :data:`exactident.explain.design.DEFAULT_BUDGET`).
    seed : int or None
        Seeds the primes and the point search (the result is reproducible).
    report : Report, optional
        ``check``'s report on the case.
    sample : path or array-like
        The sample of a model file (required with one: refused without it, naming ``sample``).
    reference, assume_relu_mlp :
        For a weight-only model file, as for :func:`exactident.check`.
    progress : bool or None
        Show the stages and each new point (None: in a Jupyter kernel or a terminal).
    timeout : float, optional
        Seconds; checked when a stage begins (:func:`exactident.budget.soft_deadline`).  ``design`` checks
        many candidate samples: on a large ``Gamma`` (a dim of about 1,200) it runs for many minutes.

    Returns
    -------
    Design
        The smallest identifying prefix and a small identifying subsample (certified ranks), or
        new points that make ``C_S`` hold, or the directions no sample can remove.

    Raises
    ------
    CaseFormatError
        A path that cannot be read or imported, a model file without ``sample``.
    BudgetExhausted
        ``timeout`` passed (its ``stage`` says where).

    Examples
    --------
    >>> import exactident
    >>> d = exactident.design("cases/tiny-111-kink.json", progress=False)
    >>> d.rank_gamma < d.dim, d.lower_bound
    (True, 3)
    """
    from exactident.budget import soft_deadline
    from exactident.explain.design import DEFAULT_BUDGET
    from exactident.explain.design import design as design_case

    c = _case(case, sample, reference, assume_relu_mlp)
    with showing(progress, f"design {c.name}") as show, soft_deadline(timeout):
        def point(line: str) -> None:
            show("new points", {"last": line})

        return design_case(c, budget=DEFAULT_BUDGET if budget is None else budget, seed=seed, report=report,
                           progress=point)


def crosscheck(case: Case | str | os.PathLike[str], *, policies: Sequence[Policy] | None = None,
               sample: Any = None, progress: bool | None = None, reference: Any = None,
               assume_relu_mlp: bool = False) -> CaseCrosscheck:
    """Float rank tolerances judged against the exact ranks of the same matrices, on one case.

    The float policies are marked against the verdict of the *rank rules* (``C_S``, ``C_N``, the
    boundary analysis): no float pipeline computes structural certificates.  ``check``'s final
    verdict, which such a certificate may settle, is shown beside it (``.comparison``).

    Parameters
    ----------
    case : Case, or path
    policies : list of Policy, optional
        Default :func:`exactident.numeric.tolerance.default_policies`.
    sample : path or array-like
        The sample of a model file (required with one: refused without it, naming ``sample``).
    reference, assume_relu_mlp :
        For a weight-only model file, as for :func:`exactident.check`.
    progress : bool or None
        Show the stages (None: in a Jupyter kernel or a terminal).

    Returns
    -------
    CaseCrosscheck
        Exact ranks, each policy's float ranks and verdict, the consistent tolerance bands
        (docs/tolerances.md).

    Raises
    ------
    CaseFormatError
        A path that cannot be read or imported, a model file without ``sample``.
    UnsupportedCaseError
        A torch policy without torch installed.

    Examples
    --------
    >>> import exactident
    >>> c = exactident.crosscheck("cases/tiny-111-kink.json", progress=False)
    >>> c.comparison
    "rank rules: not-identifiable; check's verdict: not-identifiable (decided by boundary-entering)"
    """
    from exactident.crosscheck.core import crosscheck_case

    c = _case(case, sample, reference, assume_relu_mlp)
    with showing(progress, f"crosscheck {c.name}"):
        # A layer-graph case has no plain network (c.network raises): name its parameter count.
        size = {"dim": c.network.dim} if c.is_plain else {"params": c.compiled.n_params}
        stage("exact ranks, then float spectra", samples=len(c.X), **size)
        return crosscheck_case(c, policies)


_CALLS: dict[str, Any] = {"exactident.explain": explain, "exactident.crosscheck": crosscheck}


class CallablePackage(types.ModuleType):
    """A subpackage that is also the library call of its name: ``exactident.explain(case)`` is
    :func:`explain`, ``exactident.crosscheck(case)`` is :func:`crosscheck`.

    The package's modules stay reachable as before (``exactident.explain.core``).
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _CALLS[self.__name__](*args, **kwargs)
