"""Float rank tolerances judged against exact ranks (paper §3, Theorems 8-9, Prop. 11).

A float tool decides identifiability from the numerical ranks of ``Gamma``
and ``alpha`` (what ``numpy.linalg.matrix_rank`` / ``torch.linalg.matrix_rank``
return).  The exact ranks of the *same* matrices are known here, so every
tolerance rule can be marked right or wrong, and the whole set of right
tolerances computed:

- the **consistent band** of a matrix with exact rank ``r`` and float singular
  values ``sigma_1 >= sigma_2 >= ...`` is ``[sigma_{r+1}, sigma_r)``
  (:func:`exactident.linalg.floating.consistent_band`); divided by ``sigma_1``
  it is the band of relative tolerances (``rtol``);
- a case's band is the intersection of the relative bands of ``Gamma`` and
  ``alpha`` (a rule is applied to both, relative to each one's ``sigma_1``);
- a suite's band intersects the cases' relative bands.  Relative, not
  absolute: ``sigma_1(Gamma)`` scales with the weights and the inputs
  (``|x| sigma_1`` grows with a rescaled sample), so no absolute tolerance
  transfers between networks, and every named policy is relative anyway.
  The absolute intersection is reported beside it.

Which exact ranks: those of ``Gamma`` and ``alpha`` at the exact ``>= 0``
activation pattern, i.e. the matrices the float ones round.  Off the boundary
these are the report's ranks.  On the boundary (ties) or when rounding flips
the float pattern, even a perfect tolerance can give a wrong verdict: such
cases are flagged ``fixable = False`` (no tolerance gives the exact verdict).

Policies are in :mod:`exactident.numeric.tolerance`.

A backend whose float pipeline fails on a case (a value beyond the format's
range, ``nan``, an SVD that does not converge; :mod:`exactident.numeric.guard`)
is scored as a float failure: its policies get the verdict ``float-failed``
(wrong verdict and ranks), the failure is kept in the spectra, the case is
left out of that backend's band, and the suite goes on.

The ``full-jacobian-*`` backends rank the Jacobian over every parameter
(fixed edges included), whose exact rank is also ``rank_gamma``; their
policies read ``identifiable`` once the rank reaches ``dim`` (a practitioner's
reading) and a rank above ``dim`` is wrong by definition.

Any network, one rule for ``Gamma``: its float rank is marked against the exact rank and
against ``dim_free`` (``rank T - dim S_H``; ``dim`` for the plain MLP).  Beyond the plain
MLP (a layer graph) there is no ``alpha``: ``rank_a`` is null and a policy reads
``identifiable`` iff its rank reaches ``dim_free``.

Called by :mod:`exactident.crosscheck.command` (CLI) and :mod:`exactident.crosscheck.plot`;
calls :func:`exactident.check.check`, :mod:`exactident.numeric.numpy_backend`,
:mod:`exactident.numeric.gamma_free` and, optionally, :mod:`exactident.numeric.torch_backend`.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from exactident.check import check
from exactident.errors import InvariantViolation, UnsupportedCaseError
from exactident.io.case import Case
from exactident.model.activation import activation_state
from exactident.model.conditions import IDENTIFIABLE, VERDICTS, verdict_from_ranks
from exactident.model.fixed_edges import FixedEdges, fixed_edges
from exactident.numeric.float_network import numpy_dtype, round_sample, to_float_network
from exactident.numeric.gamma_free import float_flips, float_verdict_free, free_float_rank
from exactident.numeric.guard import FloatPipelineError, WarningLog, safe_svdvals
from exactident.numeric.numpy_backend import float_operators
from exactident.numeric.spectra import Spectra
from exactident.numeric.tolerance import Policy, backend_dtype, default_policies, is_full_jacobian

__all__ = ["FLOAT_FAILED", "CaseCrosscheck", "PolicyOutcome", "SuiteSummary", "crosscheck_case", "summarize"]

#: The "verdict" of a policy whose backend's float pipeline failed on the case.
FLOAT_FAILED = "float-failed"


@dataclass
class PolicyOutcome:
    """One policy's float ranks and verdict on one case, marked against the exact ones."""

    policy: str
    tol_gamma: float | None
    rank_gamma: int | None
    rank_a: int | None
    verdict: str
    right_verdict: bool
    right_ranks: bool


@dataclass
class CaseCrosscheck:
    """Everything ``exactident crosscheck`` says about one case.

    ``rank_gamma``/``rank_a``/``verdict`` are the exact report's *rank rules* (no structural
    certificates: no float pipeline computes them, so this is the verdict a float tool can be
    right about); ``check_verdict`` and ``check_decided_by`` are ``check``'s final verdict and
    its rule, shown beside it.  The ``pattern_*`` ranks are exact ranks at the ``>= 0`` pattern
    (what the float matrices round; equal to the report's off the boundary).
    """

    name: str
    source: str
    widths: list[int]
    n_samples: int
    dim: int
    verdict: str
    rank_gamma: int | None  # None past the resolution cap
    rank_a: int | None
    on_boundary: bool
    n_ties: int
    pattern_rank_gamma: int
    pattern_rank_a: int | None  # None for a constrained network (no alpha)
    pattern_verdict: str
    expected_verdict: str | None
    spectra: dict[str, Spectra]
    outcomes: list[PolicyOutcome]
    seconds: float = 0.0
    check_verdict: str | None = None
    check_decided_by: str | None = None
    #: ``--certified-bands``: :func:`exactident.crosscheck.certified.certified_conditioning`'s result.
    certified: dict[str, Any] | None = None
    #: ``--pipeline``: :func:`exactident.numeric.pipelines.emulate`'s results.
    pipelines: list[dict[str, Any]] | None = None

    @property
    def rank_alpha(self) -> int:
        """``rank alpha`` at the ``>= 0`` pattern (``R_A / N_L``; 0 when there is no ``alpha``)."""
        return 0 if self.pattern_rank_a is None else self.pattern_rank_a // self.widths[-1]

    @property
    def fixable(self) -> bool:
        """Would exact ranks of the float-rounded matrices give the exact verdict?"""
        return self.pattern_verdict == self.verdict

    def outcome(self, policy: str) -> PolicyOutcome:
        return next(o for o in self.outcomes if o.policy == policy)

    @property
    def comparison(self) -> str:
        """``rank rules: V; check's verdict: W (decided by RULE)``: what the policies are marked against
        (the rank rules: no float pipeline computes structural certificates), and ``check``'s final verdict."""
        text = f"rank rules: {self.verdict}"
        if self.check_verdict is not None:
            text += f"; check's verdict: {self.check_verdict}"
            if self.check_decided_by and self.check_decided_by != "none":
                text += f" (decided by {self.check_decided_by})"
        return text

    def __repr__(self) -> str:
        """One short line: the compared verdicts, ranks, how many policies are wrong."""
        wrong = sum(not o.right_verdict for o in self.outcomes)
        name = self.name if len(self.name) <= 60 else self.name[:60] + "..."
        return (f"CaseCrosscheck(name={name!r}, rank_rules={self.verdict!r}, check_verdict={self.check_verdict!r}, "
                f"decided_by={self.check_decided_by!r}, rank_gamma={self.pattern_rank_gamma}, dim={self.dim}, "
                f"wrong_policies={wrong}/{len(self.outcomes)})")

    def _repr_html_(self) -> str:
        """The notebook view: the compared verdicts, ranks and each policy's outcome (HTML, escaped)."""
        from exactident.io.display import html_block

        fields = [("compared with", self.comparison), ("rank Gamma (>= 0 pattern)", self.pattern_rank_gamma),
                  ("rank A (>= 0 pattern)", self.pattern_rank_a), ("dim", self.dim), ("ties", self.n_ties),
                  ("fixable by a tolerance", self.fixable)]
        rows = [[o.policy, "-" if o.tol_gamma is None else f"{o.tol_gamma:.3g}", o.rank_gamma, o.rank_a, o.verdict,
                 "right" if o.right_verdict else "WRONG", "right" if o.right_ranks else "WRONG"]
                for o in self.outcomes]
        return html_block(f"Crosscheck {self.name}", fields, ["float policies are marked against the rank rules' "
                                                               "verdict (no float pipeline computes certificates)"],
                          (["policy", "tol(Gamma)", "rank_gamma", "rank_a", "verdict", "verdict?", "ranks?"], rows))

    def to_dict(self) -> dict[str, Any]:
        spectra: dict[str, Any] = {}
        for key, sp in self.spectra.items():
            if sp.failure is not None:
                spectra[key] = {**sp.failure.as_dict(), "warnings": sp.warnings}
                continue
            band = sp.band(self.pattern_rank_gamma, self.rank_alpha)
            spectra[key] = {
                "gamma_shape": list(sp.gamma_shape), "alpha_shape": list(sp.alpha_shape),
                "n_pattern_flips": sp.n_pattern_flips, "pattern_differs": sp.n_pattern_flips > 0,
                "singular_values_gamma": [float(v) for v in sp.gamma_sv],
                "singular_values_alpha": [float(v) for v in sp.alpha_sv],
                "band": {k: ([_jf(v[0]), _jf(v[1])] if isinstance(v, tuple) else v) for k, v in band.items()},
                "band_applies": sp.n_pattern_flips == 0,
                "status": "ok", "warnings": sp.warnings,
            }
            if sp.native_default is not None:
                spectra[key]["native_default_ranks"] = list(sp.native_default)
        extra: dict[str, Any] = {}
        if self.certified is not None:
            extra["certified"] = self.certified
        if self.pipelines is not None:
            extra["pipelines"] = self.pipelines
        return {
            "name": self.name, "source": self.source, "widths": self.widths,
            "n_samples": self.n_samples, "dim": self.dim,
            "exact": {"verdict": self.verdict, "rank_gamma": self.rank_gamma, "rank_a": self.rank_a,
                      "on_boundary": self.on_boundary, "n_ties": self.n_ties,
                      "pattern_rank_gamma": self.pattern_rank_gamma,
                      "pattern_rank_a": self.pattern_rank_a, "pattern_verdict": self.pattern_verdict},
            "compared_with": "rank-rules",
            "check": {"verdict": self.check_verdict, "decided_by": self.check_decided_by},
            "expected_verdict": self.expected_verdict, "fixable": self.fixable,
            "spectra": spectra,
            "policies": [o.__dict__ for o in self.outcomes],
            **extra,
            "seconds": self.seconds,
        }


def _jf(v: float) -> float | None:
    return None if math.isinf(v) else float(v)


@dataclass
class _Exact:
    """The exact side a case's float ranks are marked against (see :func:`crosscheck_case`)."""

    rules: Any  # check's report of the rank rules
    final: Any  # check's final report
    target: int  # dim_free (the plain MLP's dim)
    p_rank_gamma: int
    p_rank_a: int | None  # None without alpha (Theorem 8 is proved only for the dense ReLU MLP)
    p_verdict: str
    pattern: list[np.ndarray]
    fixed: FixedEdges  # the plain MLP's fixed edges (empty for a layer graph: T says what is free)
    widths: list[int]


def _exact_side(case: Case, cn: Any) -> _Exact:
    """``check``'s exact ranks at the ``>= 0`` pattern and the verdict a float rank tool can be right about.

    The plain MLP (``cn`` None): the rank rules of Theorems 8-9 without structural certificates, ``check``'s
    final verdict beside them.  A layer graph: ``rank Gamma_free`` against ``dim_free``, no ``alpha``.
    """
    if cn is None:
        net = case.network
        rules = check(case, numeric=False, all_ranks=True, structural=False)
        p_rank_gamma, p_rank_a = rules.pattern_ranks or (None, None)  # certified, all_ranks=True
        if p_rank_gamma is None or p_rank_a is None:
            raise InvariantViolation("check(all_ranks=True) returned no ranks at the >= 0 pattern")
        # check's final verdict: structural certificates only act on an inconclusive rank verdict
        final = check(case, numeric=False) if rules.verdict == "inconclusive" else rules
        return _Exact(rules, final, net.dim, p_rank_gamma, p_rank_a,
                      verdict_from_ranks(p_rank_gamma, p_rank_a, net.dim, rules.degenerate),
                      activation_state(net, case.X).pattern, fixed_edges(net), list(net.widths))
    from exactident.model.network import pre_activations

    rep = check(case, numeric=False, exact_ranks=True)  # floats are compared with the exact rank
    Z = pre_activations(cn, case.X)
    pattern = [np.array([[z >= 0 for z in row] for row in M.table()], dtype=bool).reshape(M.nrows(), M.ncols())
               for M in Z[:-1]]
    p_rank = rep.pattern_ranks[0] if rep.pattern_ranks else rep.rank_gamma
    if p_rank is None:  # floats are marked against a certified rank, never a Monte Carlo value
        raise UnsupportedCaseError(f"{case.name}: rank Gamma_free at the >= 0 pattern is certified only in an "
                                   "interval (no exact kernel within the limits): crosscheck needs the exact rank")
    # the rank rule at the >= 0 pattern: check's answer unless that pattern decides otherwise
    p_full, exact_identifiable = p_rank >= rep.dim, rep.verdict == IDENTIFIABLE
    p_verdict = rep.verdict if p_full == exact_identifiable else (IDENTIFIABLE if p_full else "inconclusive")
    return _Exact(rep, rep, rep.dim, p_rank, None, p_verdict, pattern, FixedEdges({}), cn.layer_widths)


def _spectra(case: Case, cn: Any, ex: _Exact, backend: str) -> Spectra:
    """One backend's float singular values; a failed pipeline gives :meth:`Spectra.failed`.

    The plain MLP: ``Gamma`` (or the full Jacobian) and ``alpha`` (:func:`float_operators`,
    :func:`~exactident.numeric.torch_backend.torch_spectra`); a layer graph: ``Gamma_free`` only
    (:func:`~exactident.numeric.gamma_free.free_float_rank`,
    :func:`~exactident.numeric.torch_backend.gamma_free_torch`), its pattern flips counted at kinked units.
    """
    dtype = backend_dtype(backend)
    eps = float(np.finfo(np.dtype(dtype)).eps)
    full = is_full_jacobian(backend)
    log = WarningLog()
    try:
        if backend.startswith("torch-"):
            from exactident.numeric.torch_backend import gamma_free_torch, torch_spectra

            if cn is None:
                return torch_spectra(case.network, case.X, ex.fixed, ex.pattern, dtype,
                                     columns="all" if full else "free")
            G = gamma_free_torch(cn, case.X, dtype)
            s = safe_svdvals(G, f"{backend}/svd-gamma") if G.size else np.zeros(0)
        elif cn is None:
            ops = float_operators(case.network, case.X, FixedEdges({}) if full else ex.fixed, ex.pattern,
                                  np.dtype(dtype).type, columns="all" if full else "free", log=log,
                                  stage_prefix=f"{backend}/")
            sp = Spectra(backend, eps, ops.gamma_singular_values().astype(np.float64), ops.gamma.shape,
                         ops.alpha_singular_values().astype(np.float64), ops.alpha_shape,
                         ops.n_pattern_flips, warnings=log.entries)
            # an underflow: the pipeline ran on another network, a failure all the same
            return sp if ops.underflow is None else Spectra.failed(backend, eps, ops.underflow, log.entries)
        else:
            fr, G, _f = free_float_rank(cn, case.X, dtype=dtype, log=log)
            s = fr.singular_values
    except FloatPipelineError as exc:
        return Spectra.failed(backend, eps, exc.failure, log.entries)
    fnet = to_float_network(cn, dtype)
    flips = float_flips(fnet, round_sample(case.X, fnet.widths[0], numpy_dtype(dtype)).X, ex.pattern)
    return Spectra(backend, eps, np.asarray(s, dtype=np.float64), G.shape, np.zeros(0), (len(case.X), 0), flips,
                   warnings=log.entries)


def _outcome(pol: Policy, sp: Spectra, ex: _Exact) -> PolicyOutcome:
    """One policy's ranks and verdict, marked against the exact ones (``rank >= dim_free`` reads full rank)."""
    if sp.failure is not None:
        return PolicyOutcome(pol.name, None, None, None, FLOAT_FAILED, False, False)
    tg = pol.tolerance(sp.gamma_sv, sp.gamma_shape, sp.eps, "gamma")
    exact_verdict = ex.rules.verdict
    if ex.p_rank_a is None:  # no alpha: the rank of Gamma_free against dim_free decides
        rg = int((sp.gamma_sv > tg).sum())
        v = float_verdict_free(rg, ex.target)
        return PolicyOutcome(pol.name, tg, rg, None, v, (v == IDENTIFIABLE) == (exact_verdict == IDENTIFIABLE),
                             rg == ex.p_rank_gamma)
    ta = pol.tolerance(sp.alpha_sv, sp.alpha_shape, sp.eps, "alpha")
    if pol.rule == "torch-default" and sp.native_default is not None:
        rg, ra_alpha = sp.native_default
    else:
        rg, ra_alpha = int((sp.gamma_sv > tg).sum()), int((sp.alpha_sv > ta).sum())
    ra = ex.widths[-1] * ra_alpha
    degenerate = ex.rules.degenerate
    if is_full_jacobian(pol.backend) and rg >= ex.target and not degenerate:
        v = IDENTIFIABLE  # a practitioner's reading of a full rank (a rank above dim is impossible exactly)
    else:
        v = verdict_from_ranks(rg, ra, ex.target, degenerate)
    return PolicyOutcome(pol.name, tg, rg, ra, v, v == exact_verdict,
                         rg == ex.p_rank_gamma and ra == ex.p_rank_a)


def crosscheck_case(case: Case, policies: Sequence[Policy] | None = None, *, certified: bool = False,
                    pipelines: Sequence[str] = ()) -> CaseCrosscheck:
    """Exact ranks and verdict of ``case`` against every policy's float ones.

    Any network: the float ranks of ``Gamma_free`` (for the plain MLP, ``Gamma`` over the free
    parameters) are held against ``dim_free`` (for the plain MLP, ``dim``) and against the exact rank
    at the ``>= 0`` pattern.  The plain MLP adds ``alpha`` and the rules of Theorems 8-9; beyond it
    there is no ``alpha`` (``rank_a`` null: Theorem 8 is proved only for the dense ReLU MLP) and the
    full-Jacobian policies are left out (the free parameters are what the architecture has).

    Parameters
    ----------
    case : Case
    policies : list of Policy, optional
        Default :func:`~exactident.numeric.tolerance.default_policies` (numpy backends only).
    certified : bool
        Add the certified conditioning (:mod:`exactident.crosscheck.certified`; plain MLP only).
    pipelines : list of str
        Emulated pipelines to run (:mod:`exactident.numeric.pipelines`; plain MLP only).

    Returns
    -------
    CaseCrosscheck

    Raises
    ------
    UnsupportedCaseError
        From the torch backend when torch is not installed; ``certified`` or ``pipelines`` on a case
        beyond the plain ReLU MLP; a layer graph whose exact rank at the ``>= 0`` pattern is certified
        only in an interval.

    Examples
    --------
    The hand-checked network of docs/theory.md with the samples ``0, 1, 2`` (all active: rank 2 < dim 3):

    >>> from exactident.io.case import parse_case
    >>> c = crosscheck_case(parse_case({"format": "exactident-case/1", "name": "t",
    ...     "widths": [1, 1, 1], "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]],
    ...     "sample": [[0], [1], [2]]}))
    >>> c.verdict, c.outcome("float64/numpy-default").verdict
    ('not-identifiable', 'not-identifiable')
    """
    start = time.perf_counter()
    policies = list(default_policies() if policies is None else policies)
    cn: Any = None if getattr(case, "is_plain", True) else case.compiled
    if cn is not None:
        if certified or pipelines:
            raise UnsupportedCaseError("--certified-bands and --pipeline are for plain ReLU MLPs; this case's "
                                       f"architecture has {', '.join(cn.features)}")
        policies = [p for p in policies if not is_full_jacobian(p.backend)]
    ex = _exact_side(case, cn)
    spectra = {b: _spectra(case, cn, ex, b) for b in dict.fromkeys(p.backend for p in policies)}
    outcomes = [_outcome(pol, spectra[pol.backend], ex) for pol in policies]
    expected = (case.expected or {}).get("verdict")
    cert = None
    if certified:
        from exactident.crosscheck.certified import certified_conditioning

        cert = certified_conditioning(case, ex.p_rank_gamma, (ex.p_rank_a or 0) // ex.widths[-1], ex.target)
    emulated = None
    if pipelines:
        from exactident.numeric.pipelines import emulate

        emulated = [emulate(case, name, ex.p_rank_gamma, ex.target) for name in pipelines]
    rules = ex.rules
    return CaseCrosscheck(case.name, case.source, ex.widths, len(case.X), ex.target, rules.verdict,
                          rules.rank_gamma, rules.rank_a if cn is None else None, rules.on_boundary, rules.n_ties,
                          ex.p_rank_gamma, ex.p_rank_a, ex.p_verdict, expected if isinstance(expected, str) else None,
                          spectra, outcomes, time.perf_counter() - start, ex.final.verdict, ex.final.decided_by,
                          cert, emulated)


@dataclass
class SuiteSummary:
    """Per-policy confusion tables and counts, and the common tolerance band per backend.

    ``bands[backend]`` has ``rel`` (``[lo, hi)`` relative to ``sigma_1``, the
    intersection over cases), ``abs`` (intersection of the absolute ``Gamma``
    bands), ``exists``, ``chosen`` (geometric middle of ``rel``, if it exists),
    and ``conflict`` naming the case that needs the largest lower end and the
    case with the smallest upper end when the band is empty.  Cases whose float
    activation pattern differs from the exact one on that backend are left out
    (``excluded_pattern_differs``): their float matrix rounds a different matrix;
    so are cases where the backend's float pipeline failed (``excluded_float_failed``;
    ``float_failed`` lists them per backend).
    """

    n_cases: int
    policies: list[str]
    confusion: dict[str, dict[str, dict[str, int]]]
    wrong_verdicts: dict[str, list[str]]
    wrong_ranks: dict[str, list[str]]
    bands: dict[str, dict[str, Any]]
    unfixable: list[str] = field(default_factory=list)
    float_failed: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"n_cases": self.n_cases, "policies": self.policies, "confusion": self.confusion,
                "n_wrong_verdicts": {p: len(v) for p, v in self.wrong_verdicts.items()},
                "n_wrong_ranks": {p: len(v) for p, v in self.wrong_ranks.items()},
                "wrong_verdicts": self.wrong_verdicts, "wrong_ranks": self.wrong_ranks,
                "bands": self.bands, "unfixable": self.unfixable, "float_failed": self.float_failed}


def summarize(results: Sequence[CaseCrosscheck]) -> SuiteSummary:
    """Suite view of :func:`crosscheck_case` results (same policies on every case)."""
    policies = [o.policy for o in results[0].outcomes] if results else []
    confusion: dict[str, dict[str, dict[str, int]]] = {}
    wrong_v: dict[str, list[str]] = {}
    wrong_r: dict[str, list[str]] = {}
    for p in policies:
        counts = Counter((r.verdict, r.outcome(p).verdict) for r in results)
        floats = (*VERDICTS, FLOAT_FAILED)
        confusion[p] = {e: {f: counts[(e, f)] for f in floats if counts[(e, f)]}
                        for e in VERDICTS if any(counts[(e, f)] for f in floats)}
        wrong_v[p] = [r.name for r in results if not r.outcome(p).right_verdict]
        wrong_r[p] = [r.name for r in results if not r.outcome(p).right_ranks]
    bands: dict[str, dict[str, Any]] = {}
    backends = list(dict.fromkeys(k for r in results for k in r.spectra))
    for b in backends:
        # A case whose float pattern differs rounds a different matrix: no tolerance on it
        # is about rounding error, so it is left out of the band (and listed).
        failed = [r.name for r in results if b in r.spectra and r.spectra[b].failure is not None]
        here = [r for r in results if b in r.spectra and r.spectra[b].failure is None]
        excluded = [r.name for r in here if r.spectra[b].n_pattern_flips]
        per = [(r.name, r.spectra[b].band(r.pattern_rank_gamma, r.rank_alpha))
               for r in here if not r.spectra[b].n_pattern_flips]
        if not per:
            bands[b] = {"rel": None, "abs": None, "exists": False, "abs_exists": False,
                        "excluded_pattern_differs": excluded, "excluded_float_failed": failed, "empty_cases": []}
            continue
        lo_name, lo = max(((n, d["rel"][0]) for n, d in per), key=lambda t: t[1])
        hi_name, hi = min(((n, d["rel"][1]) for n, d in per), key=lambda t: t[1])
        abs_lo = max(d["gamma_abs"][0] for _, d in per)
        abs_hi = min(d["gamma_abs"][1] for _, d in per)
        exists = lo < hi
        entry: dict[str, Any] = {"rel": [lo, _jf(hi)], "abs": [abs_lo, _jf(abs_hi)], "exists": exists,
                                 "abs_exists": abs_lo < abs_hi}
        if exists:
            entry["chosen"] = _middle(lo, hi, here[0].spectra[b].eps)
        else:
            entry["conflict"] = {"needs_rtol_at_least": {"case": lo_name, "rtol": lo},
                                 "needs_rtol_below": {"case": hi_name, "rtol": hi},
                                 "cases_below": sorted(n for n, d in per if d["rel"][1] <= lo)}
        entry["empty_cases"] = [n for n, d in per if d["empty"]]
        entry["excluded_pattern_differs"] = excluded
        entry["excluded_float_failed"] = failed
        bands[b] = entry
    unfixable = [r.name for r in results if not r.fixable]
    float_failed = {b: [r.name for r in results if b in r.spectra and r.spectra[b].failure is not None]
                    for b in backends}
    return SuiteSummary(len(results), policies, confusion, wrong_v, wrong_r, bands, unfixable,
                        {b: v for b, v in float_failed.items() if v})


def _middle(lo: float, hi: float, eps: float) -> float:
    """Geometric middle of ``[lo, hi)`` (tolerances compare on a log scale).

    A zero lower end (every case full rank) is replaced by ``eps`` -- a relative
    tolerance below round-off means nothing -- or by ``hi / 1000`` if smaller.
    """
    a = lo if lo > 0 else min(eps, hi / 1000)
    if math.isinf(hi):
        return a * 1000
    return math.sqrt(a * hi)
