"""The verdict for a constrained network (convolution, pooling, skips, leaky ReLU, PReLU, no-bias layers).

Order of work: exact forward pass and ties (kinked units only) -> the rescaling
symmetries the family keeps, ``S_H``, and ``dim_free = rank T - dim S_H``
(:mod:`exactident.model.symmetry`) -> for every tie resolution ``s`` (up to a cap; all of them, since
``rank_gamma`` is the smallest rank over them: :func:`exactident.model.gamma_free.tie_resolutions`),
the certified rank of ``Gamma_free(s) = d f(X) / d theta`` (:mod:`exactident.model.gamma_free`,
ranks mod p and :func:`exactident.linalg.certified.certified_rank` with the proven bound
``rank <= dim_free``) -> verdict:

- **identifiable** when ``rank Gamma_free(s) == dim_free`` for every resolution (the immersion
  argument, docs/theory.md, "Beyond the layered ReLU MLP"); ``decided_by: free-rank``;
- **not-identifiable** only with a certificate valid for every architecture: a dead-unit,
  constant-unit or slope line (constant outputs on X, the realised function provably changes,
  :mod:`exactident.boundary.dead_units`; ``decided_by: dead-units``, ``constant-units`` or
  ``slope-lines``), or a
  submersion (full row rank, and one more point raises the rank, :mod:`exactident.boundary.submersion`;
  ``decided_by: submersion``, or ``entering-submersion`` on a tie resolution that a kernel direction enters),
  or, tried last, a straight line of constant outputs on X with a probe whose output moves
  (:mod:`exactident.boundary.kernel_line`; ``decided_by: line``), then Theorem 8's constant-rank argument
  with a witness point (:mod:`exactident.boundary.constant_rank`; ``decided_by: constant-rank``);
- **inconclusive** otherwise: Theorem 8 (``C_N``) itself is proved for the layered ReLU MLP only and
  is never borrowed.

Each rule states the hypotheses it needs (:mod:`exactident.boundary.rules`); the report's ``rules``
lists every one with its status and, where a hypothesis fails, which.

The plain layered ReLU MLP never reaches this module: :func:`exactident.check.check` gives it to
the plain engine.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import Any

import flint
import numpy as np

from exactident.boundary.rules import rule_entries
from exactident.budget import stage
from exactident.errors import InvariantViolation
from exactident.io.report import Report
from exactident.linalg import exact
from exactident.linalg.certified import certified_rank
from exactident.model.conditions import cs_from_bounds, with_sample_size
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
    tie_resolutions,
)
from exactident.model.symmetry import Symmetry, rescaling_symmetry

__all__ = ["MAX_EXACT_FREE_ENTRIES", "MC_PRIMES", "FreeRank", "check_constrained", "free_rank", "line_kernel"]

#: Uniformly drawn primes for the Monte Carlo value inside a certified interval (each lowers its error bound).
MC_PRIMES = 3
#: ``Gamma_free`` is eliminated exactly over Q (after the modular route failed) up to this many entries.
MAX_EXACT_FREE_ENTRIES = 400_000


class FreeRank:
    """The rank of ``Gamma_free`` at one pattern: exact with its certificate, or a certified interval.

    ``rank`` is None for an interval; ``certificate`` is then in the *interval* form (``shape``,
    ``lower``, ``upper``, no ``rank``) and ``montecarlo`` holds the Monte Carlo value inside it.
    """

    def __init__(self, rank: int | None, certificate: dict[str, Any] | None, interval: tuple[int, int],
                 montecarlo: dict[str, Any] | None = None) -> None:
        self.rank, self.certificate, self.interval, self.montecarlo = rank, certificate, interval, montecarlo

    @property
    def value(self) -> int:
        """The exact rank, else the Monte Carlo value (else the certified lower bound)."""
        if self.rank is not None:
            return self.rank
        return int((self.montecarlo or {}).get("rank_gamma", self.interval[0]))


def free_rank(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]], pattern, sym: Symmetry,
              rng: random.Random, data: FreeModularData | None = None, avoid: int | None = None,
              exact_ranks: bool = False) -> FreeRank:
    """Certified ``rank Gamma_free`` at ``pattern``, with the upper bound ``dim_free`` (``S_H`` is in its kernel).

    The lower bound is a rank mod a random word-size prime.  When it meets the proven upper bound
    (``dim_free``, or the number of rows) the rank is exact.  Otherwise (verdict first) the rank is
    the certified interval ``[lower, min(dim_free, rows)]`` beside its Monte Carlo value (up to
    :data:`MC_PRIMES` uniformly drawn primes, :func:`exactident.linalg.montecarlo.monte_carlo_rank`):
    no verdict needs more, since ``identifiable`` needs the lower bound to reach ``dim_free`` and ``not-identifiable``
    needs a certificate.  With ``exact_ranks`` an exact kernel (CRT reconstruction checked exactly,
    or FLINT's nullspace for small matrices) closes the gap, as before; when neither works the rank
    is the interval all the same.

    Returns
    -------
    FreeRank
        ``certificate`` in the rank-certificate form of :func:`exactident.linalg.certified.certified_rank`
        (``upper.kind`` is ``"symmetry"`` when the bound ``dim_free`` was met), or its interval form.
    """
    from exactident.linalg.lower_bound import modular_lower_bound

    avoid = avoid if avoid is not None else free_data_denominator(cn, X)
    data = data or FreeModularData(cn, X)
    shape = (len(X) * cn.widths[-1], cn.n_params)
    bounds = {"shape": min(shape), "symmetry": sym.dim_free}
    ub_kind = min(bounds, key=lambda k: bounds[k])
    ub = bounds[ub_kind]

    def image(p: int):
        return gamma_free_mod_p(cn, X, pattern, p, avoid, data)

    def entry_bound() -> int:
        return gamma_free_entry_bound(cn, X)

    def monte_carlo(lower: tuple[int, int, Any]) -> tuple[tuple[int, int, Any], dict[str, Any]]:
        from exactident.linalg.montecarlo import monte_carlo_rank

        value, err = monte_carlo_rank(image, shape, avoid, entry_bound, rng, first=lower, max_primes=MC_PRIMES)
        if value > lower[0]:  # the first prime was unlucky: a certified lower bound as high as the value
            again = modular_lower_bound(image, avoid=avoid, rng=rng, n_primes=3, stop_at=value)
            lower = max(lower, again, key=lambda t: t[0])
        return lower, {"rank_gamma": value, "error_probability": 0.0 if value >= ub else err}

    lower = modular_lower_bound(image, avoid=avoid, rng=rng, n_primes=2 if exact_ranks else 1, stop_at=ub)
    montecarlo = None
    if lower[0] < ub and not exact_ranks:
        lower, montecarlo = monte_carlo(lower)
    if lower[0] >= ub or exact_ranks:
        small = shape[0] * shape[1] <= MAX_EXACT_FREE_ENTRIES

        def exact_kernel():
            from exactident.ranks.kernels import sparse_columns

            return sparse_columns(exact.nullspace(gamma_free_exact(cn, X, pattern)))

        cr = certified_rank(image, shape, avoid=avoid, entry_bound=entry_bound,
                            upper_bounds={"symmetry": sym.dim_free}, rng=rng, lower=lower,
                            exact_kernel=exact_kernel if small else None)
        if cr is not None:
            return FreeRank(cr.rank, cr.certificate, (cr.rank, cr.rank))
        if small:
            r = exact.rank(gamma_free_exact(cn, X, pattern))
            return FreeRank(r, {"rank": r, "shape": list(shape), "upper": {"kind": "exact-elimination"}}, (r, r))
        lower, montecarlo = monte_carlo(lower)  # no exact kernel: the interval after all
    r_low, prime, _image = lower
    cert = {"shape": list(shape), "lower": {"prime": prime, "rank_mod_p": r_low},
            "upper": {"kind": ub_kind, "bound": ub}}
    return FreeRank(None, cert, (r_low, ub), montecarlo)


def line_kernel(cn: ConstrainedNetwork, state: FreeState, sym: Symmetry, rng: random.Random,
                max_columns: int = 64) -> tuple[int, list[dict[int, flint.fmpq]]] | None:
    """An upper bound ``k - rank [K | S_H]`` on ``rank Gamma_free(s)`` from exact kernel vectors, or None.

    ``K``: ``e_j`` for a parameter whose column of ``Gamma_free(s)`` is 0 by the structure (entering a
    dead unit, leaving a silent one: :func:`exactident.boundary.dead_units.zero_columns`), and the
    constant-unit lines ``e_j - h e_jb`` (:func:`~exactident.boundary.dead_units.constant_lines`: a unit
    with the same output ``h`` on every sample), along which the outputs on ``X`` are constant.  Each
    is in ``ker Gamma_free(s)`` whatever the tie resolution ``s``, and so is ``S_H``.
    ``rank [K | S_H]`` is bounded below by its rank mod a prime: the bound is valid either way.
    At most ``max_columns`` directions (the verifier checks each by an exact forward pass).

    Returns
    -------
    (bound, K) or None
        None when the directions add nothing to ``S_H`` (the bound would not be below ``dim_free``).
    """
    from exactident.boundary.dead_units import constant_lines, zero_columns
    from exactident.linalg.certified import kernel_to_integer_columns
    from exactident.linalg.modular import random_primes, rank_mod_p

    one = flint.fmpq(1)
    K: list[dict[int, flint.fmpq]] = [{j: one} for j in zero_columns(cn, state)]
    K += [{j: one, jb: -h} for j, jb, _unit, _z, h in constant_lines(cn, state)]
    K = K[:max_columns]
    if not K:
        return None
    k = cn.n_params
    cols = kernel_to_integer_columns(K) + kernel_to_integer_columns(list(sym.basis))
    p = random_primes(1, 1, rng)[0]
    M = np.zeros((k, len(cols)), dtype=np.int64)
    for c, col in enumerate(cols):
        for i, v in col.items():
            M[i, c] = v % p
    bound = k - rank_mod_p(M, p)
    return (bound, K) if bound < sym.dim_free else None


def _graph_line(cn: ConstrainedNetwork, X, state: FreeState, n_ties: int, persistent: list[int],
                tried: dict[str, str], skipped: dict[str, str]) -> dict[str, Any] | None:
    """The ``line`` rule (:mod:`exactident.boundary.kernel_line`) on the first tie resolutions, or None."""
    from exactident.boundary.kernel_line import MAX_LINE_PATTERNS, find_graph_line, line_cost_problem

    cost = line_cost_problem(cn, len(X))
    if cost is not None:
        skipped["line"] = cost
        return None
    stage("line certificate", rows=len(X) * cn.widths[-1], cols=cn.n_params)
    patterns = []
    for active in tie_resolutions(n_ties, persistent):
        patterns.append(resolve_ties(state, list(active)))
        if len(patterns) >= MAX_LINE_PATTERNS:
            break
    found = find_graph_line(cn, X, patterns)
    if found is None:
        tried["line"] = "no kernel direction of Gamma_free keeps the outputs on X along a straight line with a probe"
    return found


def rng_seed_for_certificates(seed: int | None) -> int | None:
    """The seed of the certificate search's own random stream (None: unseeded, as ``seed``).

    >>> rng_seed_for_certificates(0) != rng_seed_for_certificates(1)
    True
    """
    return None if seed is None else 7_919 * seed + 104_729


def _tie_dicts(state: FreeState) -> list[dict[str, int]]:
    return [{"sample": i, "layer": l, "neuron": v} for i, l, v in state.ties]


def _features_text(cn: ConstrainedNetwork) -> str:
    return ", ".join(cn.features) if cn.features else "this constrained family"


def check_constrained(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]], *, name: str = "constrained",
                      max_resolutions: int = 4096, seed: int | None = 0, structural: bool = True,
                      input_shape: Sequence[int] | None = None,
                      provenance: dict[str, Any] | None = None, exact_ranks: bool = False) -> Report:
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
    tried: dict[str, str] = {}  # rules that ran without settling the case, with what they found (report's rules)
    skipped: dict[str, str] = {}  # rules a size cap stopped
    X = [[flint.fmpq(v) for v in row] for row in X]
    rng = random.Random(seed)
    stage("forward pass", samples=len(X), widths="-".join(map(str, cn.layer_widths)))
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
        # every resolution, also after one short of dim_free: rank_gamma is the smallest rank over all of them
        for active in map(list, tie_resolutions(n_ties, persistent)):
            stage("ranks mod p", resolution=len(ranks), rows=len(X) * cn.widths[-1], cols=cn.n_params)
            fr = free_rank(cn, X, resolve_ties(state, active), sym, rng, data, avoid, exact_ranks=exact_ranks)
            ranks.append(fr)
            resolutions.append({"active": active, "rank_gamma": fr.certificate})
            patterns.append({"ties": [{**t, "active": a} for t, a in zip(_tie_dicts(state), active)],
                             "rank_gamma": fr.rank, "rank_a": None,
                             "cs": fr.rank == sym.dim_free if fr.rank is not None else None, "cn": None})
    full = enumerable and all(r.rank == sym.dim_free for r in ranks)
    if not full:
        tried["free-rank"] = ("past the cap on tie resolutions" if not enumerable
                              else "rank Gamma_free below dim_free, or not certified at dim_free, on a resolution")
    interval = None
    zero_params: list[int] = []  # parameters of the kernel vectors from the structure, for the reason
    if ranks and any(r.rank is None for r in ranks):
        interval = (min(r.interval[0] for r in ranks), min(r.interval[1] for r in ranks))
    if interval is not None and interval[0] < interval[1]:  # lines of constant outputs may lower the upper ends
        found_k = line_kernel(cn, state, sym, rng)  # in ker Gamma_free(s) for every resolution s
        for j, short in enumerate(ranks):
            if found_k is None or short.rank is not None or found_k[0] >= short.interval[1]:
                continue
            from exactident.linalg.certified import _fmt

            bound, K = found_k
            zero_params = sorted(set().union(*K))
            if bound < short.interval[0] or short.value > bound:
                raise InvariantViolation(f"kernel of the lines bounds rank Gamma_free by {bound}, below its rank mod "
                                         f"p {short.interval[0]} or Monte Carlo value {short.value}")
            short.interval = (short.interval[0], bound)
            assert short.certificate is not None
            short.certificate["upper"] = {
                "kind": "kernel", "bound": short.interval[1], "source": "lines",
                "kernel": [[[i, _fmt(int(v.p), int(v.q))] for i, v in sorted(col.items())] for col in K]}
            if short.interval[0] == short.interval[1]:  # the lines close the gap: the rank is exact
                short.rank = short.interval[0]
                short.certificate["rank"] = short.rank
                patterns[j].update(rank_gamma=short.rank, cs=short.rank == sym.dim_free)
        interval = (min(r.interval[0] for r in ranks), min(r.interval[1] for r in ranks))
    worst = min(ranks, key=lambda r: r.value) if ranks else None
    rank_gamma = worst.value if worst is not None else None
    extra: dict[str, Any] = {"architecture": {
        "features": list(cn.features), "n_params": cn.n_params, "rank_t": sym.rank_t,
        "symmetry_dim": sym.symmetry_dim, "dim_free": sym.dim_free,
        "input_shape": list(input_shape) if input_shape is not None else [cn.widths[0]],
        "softmax_rank_bound": sym.softmax_rank_bound}}
    cs: bool | None = None if rank_gamma is None else rank_gamma == sym.dim_free
    if interval is not None and interval[0] == interval[1]:
        interval = None  # every resolution exact after all
    montecarlo = None
    if interval is not None:  # the verdict did not need the exact rank (Monte Carlo value, labelled)
        assert worst is not None
        montecarlo = {"rank_gamma": rank_gamma,
                               "error_probability": (worst.montecarlo or {}).get("error_probability", 0.0)
                               if worst.rank is None else 0.0}
        from exactident.ranks.intervals import MONTE_CARLO_TARGET

        if float(montecarlo["error_probability"] or 0.0) > MONTE_CARLO_TARGET:
            montecarlo = None  # a Monte Carlo value whose error bound is not small is not worth its label
        cs = cs_from_bounds(interval[0], interval[1], sym.dim_free)  # None: the rank is not settled
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
                  f"{sym.describe()}){where}: locally identifiable up to "
                  + ("rescaling" if set(sym.kinds) <= {"rescaling"} else "these symmetries"))
    else:
        verdict, decided = "inconclusive", "none"
        if not enumerable:
            reason = (f"{len(free_ties)} ties ({cn.describe_ties([state.ties[t] for t in free_ties])}): "
                      f"2^{len(free_ties)} tie resolutions exceed the cap of {max_resolutions}"
                      + (f" ({len(persistent)} persistent ties more)" if persistent else ""))
        elif interval is not None:
            lo, hi = interval
            reason = (f"rank Gamma_free certified in [{lo}, {hi}] (Monte Carlo value {rank_gamma}; exact value: "
                      f"--exact-ranks), dim_free = {sym.dim_free}")
        else:
            reason = f"rank Gamma_free = {rank_gamma} < dim_free = {sym.dim_free}"
        if zero_params:
            reason += (f" (exact kernel vectors from dead, silent or constant units, moving "
                       f"{cn.describe_params(zero_params)})")
        found = None
        if structural:
            from exactident.boundary.dead_units import find_dead_units

            # a stream of its own: the certificates (hence the verdict) must not depend on how many random
            # primes the rank stage drew, which differs between the verdict-first and the exact-ranks orders
            cert_rng = random.Random(rng_seed_for_certificates(seed))
            stage("dead-unit certificate", units=sum(cn.widths[1:-1]))
            found = find_dead_units(cn, X, state, cert_rng)
            tried["dead-units"] = tried["constant-units"] = "no dead, silent or constant unit gives a line"
            if found is None:
                from exactident.boundary.submersion import find_entering_submersion, find_submersion

                stage("submersion certificate", rows=len(X) * cn.widths[-1], cols=cn.n_params)
                if not free_ties:  # F_X smooth near theta: persistent ties only
                    found = find_submersion(cn, X, cert_rng)
                    tried["submersion"] = "no full row rank with a moving fiber direction"
                    skipped["entering-submersion"] = "no free tie: the submersion rule covers this sample"
                else:
                    found = find_entering_submersion(cn, X, cert_rng)
                    tried["entering-submersion"] = "no entering direction of a full-row-rank resolution"
                    skipped["submersion"] = "free ties: F_X is not smooth at theta (entering-submersion instead)"
            if found is None:  # a straight line of constant outputs on X (exact evaluation: every layer graph)
                found = _graph_line(cn, X, state, n_ties, persistent, tried, skipped)
            if found is None:  # Theorem 8's constant rank with a witness point (tried last)
                from exactident.boundary.constant_rank import try_constant_rank

                found = try_constant_rank(cn, X, state, cert_rng, tried)
        if found is not None:  # the certificate part and the rule are named after its kind
            verdict, decided = "not-identifiable", found["kind"]
            reason += f"; but {found['why']}"
            part = {k: v for k, v in found.items() if k != "why"}
            certificate = {**(certificate or {}), found["kind"].replace("-", "_"): part}
        else:
            reason += f"; C_N is not proved for {_features_text(cn)}; no certificate found"
    if not structural:
        skipped.update(dict.fromkeys(("dead-units", "constant-units", "submersion", "entering-submersion", "line",
                                      "constant-rank"),
                                     "the certificate search is off (structural=False)"))
    extra["rules"] = rule_entries(cn, decided, tried, skipped)
    report = Report(name=name, widths=cn.layer_widths, n_samples=len(X), dim=sym.dim_free,
                    # null past the cap, and beside an interval (its Monte Carlo value is montecarlo's)
                    rank_gamma=None if interval is not None else rank_gamma,
                    rank_a=None, cs=cs,  # type: ignore[arg-type]  # null when the interval leaves it open
                    cn=None,  # type: ignore[arg-type]  # Theorem 8 is not used here
                    degenerate=False, on_boundary=bool(n_ties), n_ties=n_ties, verdict=verdict,
                    reason=with_sample_size(reason, X, cn.widths[-1], sym.dim_free, free=True),
                    patterns=patterns if n_ties else None, certificate=certificate, extra=extra,
                    decided_by=decided, rank_gamma_interval=interval, montecarlo=montecarlo)
    if provenance:
        report.extra["provenance"] = dict(provenance)
    report.pattern_ranks = (ranks[0].rank, None) if ranks else None  # certified only: None for an interval
    report.pattern_interval = ranks[0].interval if ranks and ranks[0].rank is None else None  # for the float check
    report.seconds = time.perf_counter() - start
    return report
