"""The one pipeline of :func:`exactident.check.check`: named stages, each with the hypotheses it needs.

Every network, the dense layered ReLU MLP and a layer graph alike (convolution, pooling, skips, leaky
ReLU, PReLU, fixed or tied weights: :func:`constrained_of`), goes through
the stages of :data:`STAGES`, in order.  A stage runs on every network that meets its hypotheses; on
another it does not run and says in one line which hypothesis fails (``Stage.fails``, recorded in
``Work.not_run``).  What a stage computes on the MLP is :mod:`exactident.check.dense_route` and
:mod:`exactident.check.verdict`; on a layer graph, :mod:`exactident.check.free_route`.  The rules a
verdict rests on state their own hypotheses (:mod:`exactident.boundary.rules`, docs/theory.md, "Rules
and their hypotheses"): Theorem 8 (``C_N``) only ever runs on the dense ReLU MLP.

Certificates first: with ``k`` ties a rank stage enumerates ``2^k`` tie resolutions.  On a layer graph
the certificates (a straight line of constant outputs on ``X`` along which the function changes, a
dead, silent or constant unit, a submersion) are valid whatever the resolution and read none of the
ranks, so with more than :data:`ENUMERATE_FIRST` resolutions (or past the
cap) they are searched before the ranks, and a certificate found settles the case with nothing
enumerated: the same verdict and certificate as after the enumeration, which could only have
given ``identifiable`` without one.  On the MLP the first-order entering certificate, found on a
tie resolution, has priority over the tie-independent line (past the cap the line is tried without
enumerating, :func:`exactident.boundary.analyse.analyse_boundary`), so its resolutions come first.

The stage names are the ones progress displays and ``--timeout`` reports (the ``stage`` calls inside).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import flint

from exactident.budget import release_freed_memory
from exactident.check.dense_route import forward_pass, numeric_stage, rank_stage
from exactident.check.options import CheckOptions
from exactident.check.verdict import assemble, decide, settle_structurally
from exactident.io.report import Report
from exactident.model.conditions import INCONCLUSIVE

# The layer-graph stages (exactident.check.free_route) are imported where a layer graph needs them: an MLP
# loads neither them nor the layer-graph model.

__all__ = ["ENUMERATE_FIRST", "STAGES", "Stage", "Work", "analyse", "check_carried", "check_constrained",
           "constrained_of", "run_stages"]

#: On a layer graph, up to this many tie resolutions are enumerated before any certificate is searched
#: (the report then has every resolution's rank); with more (or past the cap), the certificates valid
#: whatever the resolution (a line of constant outputs on X along which the function changes, a
#: submersion) are searched first and, when one is found, nothing is enumerated: 2^k resolutions for k
#: ties cost 2^k rank computations.
ENUMERATE_FIRST = 16


def constrained_of(case: Any) -> Any:
    """The :class:`~exactident.model.network.Network` a case carries, or None for a plain MLP.

    A case object exposing ``constrained`` (a Network) or ``architecture`` (compiled by
    ``exactident.model.compile.compile_architecture``) is a layer graph, unless it compiles to the
    plain layered ReLU MLP (``is_plain()``): that one keeps the MLP's stages (and Theorem 8).
    """
    cn = getattr(case, "constrained", None)
    arch = getattr(case, "architecture", None)
    if cn is None and arch is not None:
        if hasattr(case, "compiled"):  # the case keeps its compiled form
            cn = case.compiled
        else:
            from exactident.model.compile import compile_architecture  # type: ignore[import-not-found,unused-ignore]

            cn = compile_architecture(arch)
    if cn is None or cn.is_plain():
        return None
    return cn


@dataclass
class Work:
    """One network and sample going through the stages: what each stage reads and writes.

    Exactly one of ``net`` (the dense layered ReLU MLP, :class:`~exactident.model.network.Network`) and
    ``cn`` (a layer graph, :class:`~exactident.model.network.Network`) is set.
    """

    name: str
    X: Sequence[Sequence[flint.fmpq]]
    options: CheckOptions
    net: Any = None
    cn: Any = None
    case: Any = None
    input_shape: Sequence[int] | None = None
    provenance: dict[str, Any] | None = None
    start: float = field(default_factory=time.perf_counter)
    #: The records of the stages (:class:`~exactident.check.verdict.Forward` or
    #: :class:`~exactident.check.free_route.GraphForward`, ...).
    forward: Any = None
    ranks: Any = None
    decided: Any = None
    report: Report | None = None
    #: A layer graph's certificate (``{"kind", "why", ...}``) and whether it was searched before the ranks.
    found: dict[str, Any] | None = None
    searched_first: bool = False
    #: What the certificates searched first found out (their ``tried``, ``skipped``): kept unless the ranks
    #: settle the case (then the certificates were not needed, as when they run after the ranks).
    first_outcome: tuple[dict[str, str], dict[str, str]] = field(default_factory=lambda: ({}, {}))
    #: A layer graph's rules that ran without settling the case, and those a cap or an option stopped.
    tried: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    #: Stage name -> the hypothesis that fails on this network (one line): the stages that did not run.
    not_run: dict[str, str] = field(default_factory=dict)

    @property
    def is_mlp(self) -> bool:
        return self.cn is None


@dataclass(frozen=True)
class Stage:
    """One named stage: ``hypotheses`` in words, ``fails(work)`` the first that fails (one line) or None,
    ``run(work)`` the work on a network that meets them."""

    name: str
    hypotheses: str
    fails: Callable[[Work], str | None]
    run: Callable[[Work], None]


def _every(work: Work) -> str | None:
    return None


def _exact_ranks(work: Work) -> bool:
    return work.options.exact_ranks or work.options.all_ranks


# -- forward pass


def _forward(work: Work) -> None:
    if work.is_mlp:
        work.forward = forward_pass(work.net, work.X, work.options)
    else:
        from exactident.check.free_route import graph_forward

        work.forward = graph_forward(work.cn, work.X)


# -- certificates first (layer graph; the MLP's tie-independent line is tried inside its boundary analysis)


def _first_fails(work: Work) -> str | None:
    if work.is_mlp:
        # its first-order entering certificate, found on the resolutions, comes before its line: searching the
        # line first would change the certificate of such cases (past the cap the line is tried unenumerated)
        return ("the dense ReLU MLP: the entering certificate on a tie resolution has priority over its "
                "tie-independent line, so the resolutions come first (below the cap)")
    if not work.options.structural:
        return "the certificate search is off (structural=False)"
    k = work.forward.n_resolutions_bits()
    past_cap = 2 ** k > work.options.max_resolutions
    if not past_cap and 2 ** k <= ENUMERATE_FIRST:
        return f"2^{k} tie resolutions, at most {ENUMERATE_FIRST}: enumerated first (every resolution's rank reported)"
    return None


def _first(work: Work) -> None:
    from exactident.check.free_route import certificate_stage

    tried: dict[str, str] = {}
    skipped: dict[str, str] = {}
    work.found = certificate_stage(work.cn, work.X, work.forward, work.options.seed, tried, skipped)
    work.searched_first = True
    work.first_outcome = (tried, skipped)


# -- ranks


def _ranks(work: Work) -> None:
    o = work.options
    if work.is_mlp:
        work.ranks = rank_stage(work.net, work.X, work.forward, o)
        return
    from exactident.check.free_route import GraphRanks, free_rank_stage

    if work.found is not None:  # a certificate valid on every resolution settled the case: none enumerated
        work.ranks = GraphRanks(enumerable=2 ** work.forward.n_resolutions_bits() <= o.max_resolutions)
        if work.ranks.enumerable:
            work.skipped["free-rank"] = "not run: a certificate valid on every tie resolution settled the case first"
    else:
        work.ranks = free_rank_stage(work.cn, work.X, work.forward, random.Random(o.seed), o.max_resolutions,
                                     _exact_ranks(work))


# -- verdict


def _verdict(work: Work) -> None:
    if work.is_mlp:
        o = work.options
        work.decided = decide(work.net, work.X, work.forward, work.ranks, o.max_resolutions, o.all_ranks)
        return
    gr = work.ranks
    if not gr.full and not (work.found is not None and not gr.ranks and gr.enumerable):
        work.tried["free-rank"] = ("past the cap on tie resolutions" if not gr.enumerable
                                   else "rank Gamma_free below dim_free, or not certified at dim_free, on a resolution")
    if work.searched_first and not gr.full:  # the certificates' outcomes count only where the ranks did not settle
        tried, skipped = work.first_outcome
        work.tried.update(tried)
        work.skipped.update(skipped)


# -- structural certificates


def _structural_fails(work: Work) -> str | None:
    if not work.options.structural:
        return "the certificate search is off (structural=False)"
    if work.is_mlp:
        return None if work.decided.verdict == INCONCLUSIVE else "the verdict is settled"
    if work.ranks.full:
        return "the verdict is settled (free-rank)"
    if work.searched_first:
        return "searched before the ranks (certificates first)"
    return None


def _structural(work: Work) -> None:
    if work.is_mlp:
        work.decided = settle_structurally(work.net, work.X, work.forward.state, work.decided)
    else:
        from exactident.check.free_route import certificate_stage

        work.found = certificate_stage(work.cn, work.X, work.forward, work.options.seed, work.tried, work.skipped)


# -- propositions (the MLP's lifting)


def _propositions_fails(work: Work) -> str | None:
    if not work.is_mlp:
        return "Props. 1 and 10 are stated for the lifting phi of the dense ReLU MLP; this network is a layer graph"
    return None if work.options.verify_propositions else "not asked (verify_propositions=False)"


def _propositions(work: Work) -> None:
    from exactident.model.lifting import verify_propositions

    verify_propositions(work.net, work.X, work.forward.state, work.forward.fixed, work.ranks.gamma)


# -- report


def _report(work: Work) -> None:
    if work.is_mlp:
        report = assemble(work.name, work.net, work.X, work.forward, work.ranks, work.decided)
        if work.provenance:
            report.extra["provenance"] = dict(work.provenance)
        # the >= 0 pattern's: what a float tool rounds
        report.pattern_ranks = (work.ranks.rank_gamma, work.ranks.rank_a)
    else:
        from exactident.check.free_route import graph_report

        o, gr = work.options, work.ranks
        report = graph_report(work.cn, work.X, work.forward, gr, work.found, work.tried, work.skipped,
                                    name=work.name, max_resolutions=o.max_resolutions, structural=o.structural,
                                    first=work.searched_first, input_shape=work.input_shape)
        if work.provenance:
            report.extra["provenance"] = dict(work.provenance)
        ranks = gr.ranks
        report.pattern_ranks = (ranks[0].rank, None) if ranks else None  # certified only: None for an interval
        # for the float check
        report.pattern_interval = ranks[0].interval if ranks and ranks[0].rank is None else None
    report.seconds = time.perf_counter() - work.start
    work.report = report


# -- float cross-check


def _numeric_fails(work: Work) -> str | None:
    if not work.options.numeric:
        return "not asked (numeric=False)"
    return None if work.case is not None else "no case to run the float pipelines on"


def _numeric(work: Work) -> None:
    assert work.report is not None
    if work.is_mlp:
        numeric_stage(work.case, work.forward, work.ranks, work.decided.rank_verdict, work.decided.reached,
                          work.report, work.options)
        work.report.seconds = time.perf_counter() - work.start
    else:
        from exactident.check.free_route import carried_numeric

        carried_numeric(work.case, work.cn, work.report, work.options)


#: The stages, in order.
#:
#: :meta hide-value:
STAGES = (
    Stage("forward pass", "every network: exact evaluation over Q (ties, the degenerate set or dim_free)",
          _every, _forward),
    Stage("certificates first",
          f"a layer graph, the certificate search on, more than {ENUMERATE_FIRST} tie resolutions (or past the cap): "
          "certificates valid on every resolution", _first_fails, _first),
    Stage("ranks", "every network: Gamma and alpha at the >= 0 pattern (MLP), Gamma_free on every tie resolution "
          "(layer graph), unless a certificate settled it first", _every, _ranks),
    Stage("verdict", "every network: Theorems 8 and 9 and the tie resolutions (MLP, Theorem 8 there only), "
          "the free-rank rule (layer graph)", _every, _verdict),
    Stage("structural certificates", "the certificate search on and the verdict not settled",
          _structural_fails, _structural),
    Stage("propositions", "the dense ReLU MLP (the lifting of Props. 1 and 10), verify_propositions",
          _propositions_fails, _propositions),
    Stage("report", "every network", _every, _report),
    Stage("float cross-check", "numeric, and a case to run the float pipelines on", _numeric_fails, _numeric),
)


def run_stages(work: Work) -> Report:
    """Every stage of :data:`STAGES` on ``work``, in order; the report."""
    for st in STAGES:
        why = st.fails(work)
        if why is None:
            st.run(work)
            release_freed_memory()  # the next stage's peak on top of what this one still holds, not freed
        else:
            work.not_run[st.name] = why
    assert work.report is not None
    return work.report


def analyse(case: Any, options: CheckOptions) -> Report:
    """The stages of :func:`exactident.check.check` on a loaded case, in this process (no budget, no display)."""
    cn = constrained_of(case)
    if cn is None:
        work = Work(name=case.name, X=case.X, options=options, net=case.network, case=case,
                    provenance=case.provenance)
    else:  # beyond the layered ReLU MLP: Theorem 8 never runs (its hypotheses fail)
        work = Work(name=case.name, X=[[flint.fmpq(v) for v in row] for row in case.X], options=options, cn=cn,
                    case=case, input_shape=getattr(getattr(case, "architecture", None), "input_shape", None),
                    provenance=getattr(case, "provenance", None))
    return run_stages(work)


def check_constrained(cn: Any, X: Sequence[Sequence[Any]], *, name: str = "constrained",
                      max_resolutions: int = 4096, seed: int | None = 0, structural: bool = True,
                      input_shape: Sequence[int] | None = None,
                      provenance: dict[str, Any] | None = None, exact_ranks: bool = False) -> Report:
    """The exact stages of :func:`exactident.check.check` on a layer graph and a sample (docs/theory.md).

    Parameters
    ----------
    cn : Network
    X : n rows of N_0 rationals (the flattened inputs)
    name : str
        The report's ``name``.
    max_resolutions : int
        Cap on the ``2**n_ties`` tie resolutions enumerated; past it the verdict is
        ``inconclusive`` unless a certificate settles it.
    seed : int or None
        Seed of the random primes (speed only, never the result).
    structural : bool
        Search the certificates of ``not-identifiable`` (dead units, submersions, lines).
    input_shape : sequence of int, optional
        The framework's input shape, reported under ``architecture`` (default ``[N_0]``).
    provenance : dict, optional
        Copied to the report.
    exact_ranks : bool
        Certify ``rank Gamma_free`` exactly even when the verdict does not need it (CRT kernels,
        exact nullspaces: minutes on a thousand parameters).  By default a rank whose lower bound
        mod p falls short of ``dim_free`` is reported as the certified interval
        ``rank_gamma_interval`` (upper end ``dim_free``, or lower where exact kernel vectors from
        lines of constant outputs prove it), ``rank_gamma`` is None and the Monte Carlo value is
        ``Report.montecarlo``, labelled (docs/modular.md, "Verdict first").

    Returns
    -------
    Report
        ``dim`` is ``dim_free``; ``rank_a`` and ``cn`` are null (``C_N`` is not used); the
        ``architecture`` block gives ``features, n_params, rank_t, symmetry_dim, dim_free,
        input_shape, softmax_rank_bound`` (docs/cli.md).

    Raises
    ------
    UnsupportedCaseError
        ``max_resolutions`` below 0 (naming it).

    Examples
    --------
    ``f(x) = 3 leaky(2x - 1)`` with slope 1/10 on ``x = 0, 1``: both sides of the kink are seen.

    >>> from exactident.model.network import Network
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])],
    ...               [[flint.fmpq(-1)], [flint.fmpq(0)]])
    >>> cn = net
    >>> cn.negative_slope[0][0] = flint.fmpq(1, 10); cn.features = ("leaky ReLU",)
    >>> r = check_constrained(cn, [[0], [1], [2]])
    >>> r.verdict, r.rank_gamma, r.dim, r.decided_by
    ('identifiable', 3, 3, 'free-rank')
    """
    options = CheckOptions(max_resolutions=max_resolutions, seed=seed, structural=structural,
                           exact_ranks=exact_ranks, numeric=False, progress=False)
    work = Work(name=name, X=[[flint.fmpq(v) for v in row] for row in X], options=options, cn=cn,
                input_shape=input_shape, provenance=provenance)
    return run_stages(work)


def check_carried(case: Any, options: CheckOptions) -> Report:
    """The exact stages on a case object carrying a layer graph (no float cross-check).

    Reads ``max_resolutions``, ``seed``, ``structural`` and ``exact_ranks or all_ranks`` of
    ``options`` (the layer-graph stages read no other exact option).
    """
    shape = getattr(getattr(case, "architecture", None), "input_shape", None)
    return check_constrained(constrained_of(case), case.X, name=case.name, max_resolutions=options.max_resolutions,
                             seed=options.seed, structural=options.structural, input_shape=shape,
                             provenance=getattr(case, "provenance", None),
                             exact_ranks=options.exact_ranks or options.all_ranks)
