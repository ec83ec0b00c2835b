"""The verdict for a constrained network (convolution, pooling, skips, leaky ReLU, PReLU, no-bias layers).

Order of work: exact forward pass and ties (kinked units only) -> the rescaling
symmetries the family keeps, ``S_H``, and ``dim_free = rank T - dim S_H``
(:mod:`exactident.model.symmetry`) -> for every tie resolution ``s`` (up to a cap),
the certified rank of ``Gamma_free(s) = d f(X) / d theta`` (:mod:`exactident.model.gamma_free`,
ranks mod p and :func:`exactident.linalg.certified.certified_rank` with the proven bound
``rank <= dim_free``) -> verdict:

- **identifiable** when ``rank Gamma_free(s) == dim_free`` for every resolution (the immersion
  argument, docs/theory.md, "Beyond the layered ReLU MLP"); ``decided_by: free-rank``;
- **not-identifiable** only with a certificate valid for every architecture: a dead-unit or
  constant-unit line (constant outputs on X, the realised function provably changes,
  :mod:`exactident.boundary.dead_units`; ``decided_by: dead-units`` or ``constant-units``), or a
  submersion (full row rank, and one more point raises the rank, :mod:`exactident.boundary.submersion`;
  ``decided_by: submersion``, or ``entering-submersion`` on a tie resolution that a kernel direction enters);
- **inconclusive** otherwise: Theorem 8 (``C_N``) is proved for the layered ReLU MLP only and
  is never borrowed.

The plain layered ReLU MLP never reaches this module: :func:`exactident.check.check` gives it to
the plain engine.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from itertools import product
from typing import Any

import flint

from exactident.budget import stage
from exactident.io.report import Report
from exactident.linalg import exact
from exactident.linalg.certified import certified_rank
from exactident.model.constrained import ConstrainedNetwork
from exactident.model.gamma_free import (
    FreeModularData,
    FreeState,
    free_data_denominator,
    free_state,
    gamma_free_entry_bound,
    gamma_free_exact,
    gamma_free_mod_p,
    persistent_ties,
    resolve_ties,
)
from exactident.model.symmetry import Symmetry, rescaling_symmetry

__all__ = ["MAX_EXACT_FREE_ENTRIES", "FreeRank", "check_constrained", "free_rank"]

#: ``Gamma_free`` is eliminated exactly over Q (after the modular route failed) up to this many entries.
MAX_EXACT_FREE_ENTRIES = 400_000


class FreeRank:
    """The rank of ``Gamma_free`` at one pattern: exact with its certificate, or a certified interval."""

    def __init__(self, rank: int | None, certificate: dict[str, Any] | None, interval: tuple[int, int]) -> None:
        self.rank, self.certificate, self.interval = rank, certificate, interval


def free_rank(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]], pattern, sym: Symmetry,
              rng: random.Random, data: FreeModularData | None = None, avoid: int | None = None) -> FreeRank:
    """Certified ``rank Gamma_free`` at ``pattern``, with the upper bound ``dim_free`` (``S_H`` is in its kernel).

    The lower bound is a rank mod random word-size primes; when it falls short of ``dim_free``
    an exact kernel (CRT reconstruction checked exactly, or FLINT's nullspace for small matrices)
    closes the gap.  When neither works the rank is a certified interval ``[lower, dim_free]``.

    Returns
    -------
    FreeRank
        ``certificate`` in the rank-certificate form of :func:`exactident.linalg.certified.certified_rank`
        (``upper.kind`` is ``"symmetry"`` when the bound ``dim_free`` was met).
    """
    avoid = avoid if avoid is not None else free_data_denominator(cn, X)
    data = data or FreeModularData(cn, X)
    shape = (len(X) * cn.widths[-1], cn.n_params)

    def image(p: int):
        return gamma_free_mod_p(cn, X, pattern, p, avoid, data)

    small = shape[0] * shape[1] <= MAX_EXACT_FREE_ENTRIES

    def exact_kernel():
        from exactident.ranks.kernels import sparse_columns

        return sparse_columns(exact.nullspace(gamma_free_exact(cn, X, pattern)))

    cr = certified_rank(image, shape, avoid=avoid, entry_bound=lambda: gamma_free_entry_bound(cn, X),
                        upper_bounds={"symmetry": sym.dim_free}, rng=rng, n_lower_primes=2,
                        exact_kernel=exact_kernel if small else None)
    if cr is not None:
        return FreeRank(cr.rank, cr.certificate, (cr.rank, cr.rank))
    if small:
        r = exact.rank(gamma_free_exact(cn, X, pattern))
        return FreeRank(r, {"rank": r, "shape": list(shape), "upper": {"kind": "exact-elimination"}}, (r, r))
    from exactident.linalg.certified import modular_lower_bound

    low, _p, _img = modular_lower_bound(image, avoid=avoid, rng=rng, n_primes=2, stop_at=sym.dim_free)
    return FreeRank(None, None, (low, sym.dim_free))


def _tie_dicts(state: FreeState) -> list[dict[str, int]]:
    return [{"sample": i, "layer": l, "neuron": v} for i, l, v in state.ties]


def _features_text(cn: ConstrainedNetwork) -> str:
    return ", ".join(cn.features) if cn.features else "this constrained family"


def check_constrained(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]], *, name: str = "constrained",
                      max_resolutions: int = 4096, seed: int | None = 0, structural: bool = True,
                      input_shape: Sequence[int] | None = None,
                      provenance: dict[str, Any] | None = None) -> Report:
    """Decide local identifiability of a constrained network from ``X`` (exact; docs/theory.md).

    Parameters
    ----------
    cn : ConstrainedNetwork
    X : n rows of N_0 fmpq (the flattened inputs)
    name : str
        The report's ``name``.
    max_resolutions : int
        Cap on the ``2**n_ties`` tie resolutions enumerated; past it the verdict is
        ``inconclusive`` unless a dead-unit certificate settles it.
    seed : int or None
        Seed of the random primes (speed only, never the result).
    structural : bool
        Search a dead-unit certificate for a rank deficit.
    input_shape : sequence of int, optional
        The framework's input shape, reported under ``architecture`` (default ``[N_0]``).
    provenance : dict, optional
        Copied to the report.

    Returns
    -------
    Report
        ``dim`` is ``dim_free``; ``rank_a`` and ``cn`` are null (``C_N`` is not used); the
        ``architecture`` block gives ``features, n_params, rank_t, symmetry_dim, dim_free,
        input_shape, softmax_rank_bound`` (docs/cli.md).

    Examples
    --------
    ``f(x) = 3 leaky(2x - 1)`` with slope 1/10 on ``x = 0, 1``: both sides of the kink are seen.

    >>> from exactident.model.network import Network
    >>> from exactident.model.constrained import from_network
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])],
    ...               [[flint.fmpq(-1)], [flint.fmpq(0)]])
    >>> cn = from_network(net)
    >>> cn.negative_slope[0][0] = flint.fmpq(1, 10); cn.features = ("leaky ReLU",)
    >>> r = check_constrained(cn, [[0], [1], [2]])
    >>> r.verdict, r.rank_gamma, r.dim, r.decided_by
    ('identifiable', 3, 3, 'free-rank')
    """
    start = time.perf_counter()
    X = [[flint.fmpq(v) for v in row] for row in X]
    rng = random.Random(seed)
    stage("forward pass", samples=len(X), widths="-".join(map(str, cn.widths)))
    state = free_state(cn, X)
    stage("rescaling symmetries", params=cn.n_params)
    sym = rescaling_symmetry(cn)
    avoid = free_data_denominator(cn, X)
    data = FreeModularData(cn, X)
    n_ties = len(state.ties)
    persistent = persistent_ties(cn, X, state)  # their side changes nothing: enumerated on one side only
    free_ties = [t for t in range(n_ties) if t not in set(persistent)]
    enumerable = 2 ** len(free_ties) <= max_resolutions
    resolutions: list[dict[str, Any]] = []
    patterns: list[dict[str, Any]] = []
    ranks: list[FreeRank] = []
    if enumerable:
        for sides in product([True, False], repeat=len(free_ties)):
            active = [True] * n_ties
            for t, side in zip(free_ties, sides):
                active[t] = side
            stage("ranks mod p", resolution=len(ranks), rows=len(X) * cn.widths[-1], cols=cn.n_params)
            fr = free_rank(cn, X, resolve_ties(state, active), sym, rng, data, avoid)
            ranks.append(fr)
            resolutions.append({"active": active, "rank_gamma": fr.certificate})
            patterns.append({"ties": [{**t, "active": a} for t, a in zip(_tie_dicts(state), active)],
                             "rank_gamma": fr.rank, "rank_a": None,
                             "cs": fr.rank == sym.dim_free if fr.rank is not None else None, "cn": None})
            if fr.rank != sym.dim_free:
                break  # the verdict can no longer be identifiable
    full = enumerable and all(r.rank == sym.dim_free for r in ranks)
    worst = min(ranks, key=lambda r: r.interval[0]) if ranks else None
    rank_gamma = worst.rank if worst is not None else None
    extra: dict[str, Any] = {"architecture": {
        "features": list(cn.features), "n_params": cn.n_params, "rank_t": sym.rank_t,
        "symmetry_dim": sym.symmetry_dim, "dim_free": sym.dim_free,
        "input_shape": list(input_shape) if input_shape is not None else [cn.widths[0]],
        "softmax_rank_bound": sym.softmax_rank_bound}}
    if worst is not None and worst.rank is None:
        extra["rank_gamma_interval"] = list(worst.interval)
    certificate: dict[str, Any] | None = None
    if ranks and all(r.certificate is not None for r in ranks):
        certificate = {"free_rank": {"kind": "free-rank", "ties": _tie_dicts(state), "persistent": persistent,
                                     "resolutions": resolutions}}
    if full:
        verdict, decided = "identifiable", "free-rank"
        where = f" on each of the {len(ranks)} tie resolutions" if n_ties else ""
        if persistent:
            where += f" ({len(persistent)} persistent ties, whose side changes nothing)"
        reason = (f"rank Gamma_free = {sym.dim_free} = dim_free (= {cn.n_params} parameters - "
                  f"{sym.symmetry_dim} rescalings){where}: locally identifiable up to rescaling")
    else:
        verdict, decided = "inconclusive", "none"
        if not enumerable:
            reason = (f"{len(free_ties)} ties: 2^{len(free_ties)} tie resolutions exceed the cap of {max_resolutions}"
                      + (f" ({len(persistent)} persistent ties more)" if persistent else ""))
        elif rank_gamma is None:
            assert worst is not None
            lo, hi = worst.interval
            reason = f"rank Gamma_free certified only in [{lo}, {hi}], dim_free = {sym.dim_free}"
        else:
            reason = f"rank Gamma_free = {rank_gamma} < dim_free = {sym.dim_free}"
        found = None
        if structural:
            from exactident.boundary.dead_units import find_dead_units

            stage("dead-unit certificate", units=sum(cn.widths[1:-1]))
            found = find_dead_units(cn, X, state, rng)
            if found is None:
                from exactident.boundary.submersion import find_entering_submersion, find_submersion

                stage("submersion certificate", rows=len(X) * cn.widths[-1], cols=cn.n_params)
                if not free_ties:  # F_X smooth near theta: persistent ties only
                    found = find_submersion(cn, X, rng)
                else:
                    found = find_entering_submersion(cn, X, rng)
        if found is not None:  # the certificate part and the rule are named after its kind
            verdict, decided = "not-identifiable", found["kind"]
            reason += f"; but {found['why']}"
            part = {k: v for k, v in found.items() if k != "why"}
            certificate = {**(certificate or {}), found["kind"].replace("-", "_"): part}
        else:
            reason += f"; C_N is not proved for {_features_text(cn)}; no certificate found"
    report = Report(name=name, widths=list(cn.widths), n_samples=len(X), dim=sym.dim_free,
                    rank_gamma=rank_gamma,  # type: ignore[arg-type]  # null past the cap or when unknown
                    rank_a=None, cs=None if rank_gamma is None else rank_gamma == sym.dim_free,  # type: ignore[arg-type]
                    cn=None,  # type: ignore[arg-type]  # Theorem 8 is not used here
                    degenerate=False, on_boundary=bool(n_ties), n_ties=n_ties, verdict=verdict, reason=reason,
                    patterns=patterns if n_ties else None, certificate=certificate, extra=extra,
                    decided_by=decided)
    if provenance:
        report.extra["provenance"] = dict(provenance)
    report.pattern_ranks = (ranks[0].rank, None) if ranks else None  # type: ignore[assignment]
    report.seconds = time.perf_counter() - start
    return report
