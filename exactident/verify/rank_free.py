"""The ``free_rank`` part of a layer graph's report: certified ranks of ``Gamma_free(s)`` on every tie resolution.

Every fact comes from :class:`~exactident.verify.facts.ConstrainedFacts` (the verifier's own computation).

``free_rank`` ``{kind: "free-rank", ties, resolutions: [{active, rank_gamma}]}``
    The ties must be the case's ties; each resolution's rank certificate is re-checked:
    ``shape`` is ``[n N_L, n_params]``; ``lower`` ``{prime, rank_mod_p}`` is recomputed (the rank
    of ``Gamma_free(s)`` mod that prime, from the verifier's own residues) and bounds the rank
    below; ``upper`` is ``shape`` (``min(rows, columns)``), ``symmetry`` (the proven bound
    ``dim_free``), ``kernel`` (each column checked over Q by forward-mode derivatives; with ``S_H``
    they bound the rank by ``n_params - rank [K | S_H]``) or ``exact-elimination`` (the verifier's
    own exact rank, up to ``--max-exact-entries``).  A claimed ``rank`` must sit between the two bounds.

The resolutions listed are compared with the verifier's own enumeration
(:mod:`exactident.verify.resolutions`), the rule of the plain MLP's ``boundary`` part.
:class:`OwnRanks` gives the verifier's own ranks mod p where no certificate is given.
"""

from __future__ import annotations

from typing import Any

import flint

from exactident.io.limits import DEFAULT_WORK_LIMITS, WorkLimits
from exactident.model.conditions import cs_from_bounds
from exactident.verify.arith import capped_exact_rank, rational
from exactident.verify.common_claims import reachable_claim
from exactident.verify.facts import ConstrainedFacts
from exactident.verify.gamma import directional_derivative, rank_mod_p, usable_prime, verifier_primes
from exactident.verify.rank_rules import RankBounds, rank_claim_problems, smallest
from exactident.verify.resolutions import cover_problems, n_free_sides, persistent_ties

__all__ = ["N_PRIMES", "OwnRanks", "check_free_rank", "check_rank_one", "free_pattern_claims",
           "free_rank_claims"]

#: Primes tried per resolution before a rank mod p below the claim counts as a failure.
N_PRIMES = 3


def _kernel_bound(facts: ConstrainedFacts, cols: list, pattern, where: str) -> tuple[int | None, str]:
    """``k - rank [K | S_H]`` when every column of ``K`` is an exact kernel vector of ``Gamma_free(s)``."""
    cn, k = facts.cn, facts.cn.n_params
    sym = facts.symmetry
    K = flint.fmpq_mat(k, len(cols) + sym.symmetry_dim)
    for c, col in enumerate(cols):
        delta = [flint.fmpq(0)] * k
        for i, v in col:
            if not 0 <= i < k:
                return None, f"{where}[{c}]: index {i} outside [0, {k})"
            delta[i] = rational(v)
        if any(d != 0 for d in directional_derivative(cn, facts.X, delta, pattern)):
            return None, f"{where}[{c}]: Gamma_free times this column is not 0 (exact)"
        for i in range(k):
            K[i, c] = delta[i]
    for i in range(k):
        for c in range(sym.symmetry_dim):
            K[i, len(cols) + c] = sym.basis[i, c]
    return k - (K.rref()[1] if K.ncols() else 0), ""


def _exact_rank(facts: ConstrainedFacts, pattern, max_words: int, where: str) -> tuple[int | None, str]:
    """The verifier's own exact rank of ``Gamma_free(s)`` (forward mode, one pass per parameter), within the cap."""
    cn, k = facts.cn, facts.cn.n_params
    rows = len(facts.X) * cn.widths[-1]

    def build() -> flint.fmpq_mat:
        cols = [directional_derivative(cn, facts.X, [flint.fmpq(int(i == j)) for i in range(k)], pattern)
                for j in range(k)]
        return flint.fmpq_mat(rows, k, [cols[j][r] for r in range(rows) for j in range(k)])

    return capped_exact_rank((rows, k), build, max_words, where)


def check_rank_one(facts: ConstrainedFacts, cert: dict, pattern, where: str,
                   limits: WorkLimits = DEFAULT_WORK_LIMITS) -> tuple[list[str], tuple[int, int]]:
    """Failures and the proved bounds ``(lo, hi)`` of one ``Gamma_free(s)`` rank certificate."""
    cn, fails = facts.cn, []
    shape = [len(facts.X) * cn.widths[-1], cn.n_params]
    if cert["shape"] != shape:
        return [f"{where}.shape: the case gives {shape}, the certificate says {cert['shape']}"], (0, shape[1])
    lo, hi = 0, min(shape[0], facts.symmetry.dim_free)  # S_H is in the kernel: rank <= dim_free always
    lower = cert.get("lower")
    if lower is not None:
        p = lower["prime"]
        if not usable_prime(p, facts.avoid):
            fails.append(f"{where}.lower.prime: {p} is not a prime in [2^20, 2^31) dividing no denominator")
        elif "rows" in lower and lower["rows"] != "all":
            fails.append(f"{where}.lower.rows: a row subset is not accepted for Gamma_free")
        else:
            found = rank_mod_p(facts.gamma_mod_p(p, pattern), p)
            if found != lower["rank_mod_p"]:
                fails.append(f"{where}.lower.rank_mod_p: Gamma_free has rank {found} mod {p}, the certificate "
                             f"says {lower['rank_mod_p']}")
            lo = found
    up = cert.get("upper")
    if up is not None:
        kind = up["kind"]
        if kind == "shape":  # rank <= min(rows, columns)
            if "bound" in up and up["bound"] != min(shape):
                fails.append(f"{where}.upper.bound: the shape bound is {min(shape)}, the certificate says "
                             f"{up['bound']}")
            hi = min(hi, min(shape))
        elif kind == "symmetry":
            if "bound" in up and up["bound"] != facts.symmetry.dim_free:
                fails.append(f"{where}.upper.bound: the symmetry bound is dim_free = {facts.symmetry.dim_free}, "
                             f"the certificate says {up['bound']}")
        elif kind == "kernel" and "kernel" in up:
            bound, why = _kernel_bound(facts, up["kernel"], pattern, f"{where}.upper.kernel")
            if bound is None:
                fails.append(why)
            elif "bound" in up and up["bound"] < min(hi, bound):
                fails.append(f"{where}.upper.bound: the kernel vectors (with S_H) bound the rank by {min(hi, bound)}, "
                             f"the certificate says {up['bound']}")
            else:
                hi = min(hi, bound)
        elif kind == "exact-elimination":
            r, past = _exact_rank(facts, pattern, limits.max_exact_entries, f"{where}.upper")
            if r is None:
                fails.append(past)
            else:
                lo, hi = max(lo, r), min(hi, r)
        else:
            fails.append(f"{where}.upper.kind: {kind!r} is not an upper bound checked for Gamma_free")
    if "rank" in cert and not fails:
        r = cert["rank"]
        if lo < r:
            fails.append(f"{where}.rank: claims {r}, but the lower bound proved is {lo}")
        elif hi > r:
            fails.append(f"{where}.rank: claims {r}, but no upper bound below {hi} is proved")
        else:
            lo = hi = r
    return fails, (lo, hi)


def check_free_rank(facts: ConstrainedFacts, part: dict, limits: WorkLimits = DEFAULT_WORK_LIMITS
                    ) -> tuple[list[str], dict[tuple[bool, ...], tuple[int, int]]]:
    """Failures of a ``free_rank`` part and, per resolution listed (sides in the verifier's tie order), ``(lo, hi)``."""
    where = "certificate.free_rank"
    listed = [(t["sample"], t["layer"], t["neuron"]) for t in part["ties"]]
    if sorted(listed) != sorted(facts.ties) or len(set(listed)) != len(listed):
        return [f"{where}.ties: the case has the ties {sorted(facts.ties)} ((sample, layer, unit) with z = 0 at "
                f"a kinked unit), the certificate lists {listed}"], {}
    persistent = persistent_ties(facts)
    fails: list[str] = []
    for m in part.get("persistent", []):
        if m >= len(listed) or listed[m] not in persistent:
            fails.append(f"{where}.persistent[{m}]: not a persistent tie (a first-layer unit with a fixed bias whose "
                         "free weights all meet a zero input)")
    proved: dict[tuple[bool, ...], tuple[int, int]] = {}
    for r, res in enumerate(part["resolutions"]):
        at = f"{where}.resolutions[{r}]"
        if len(res["active"]) != len(listed):
            fails.append(f"{at}.active: {len(res['active'])} sides for {len(listed)} ties")
            continue
        side = dict(zip(listed, res["active"]))
        sides = tuple(True if t in persistent else side[t] for t in facts.ties)  # a persistent side changes nothing
        if sides in proved:
            fails.append(f"{at}.active: this resolution is listed twice")
            continue
        bad, bounds = check_rank_one(facts, res["rank_gamma"], facts.resolution(sides) if sides else None,
                                     f"{at}.rank_gamma", limits)
        fails += bad
        proved[sides] = bounds
    return fails, proved


class OwnRanks:
    """The verifier's own ranks mod p of ``Gamma_free(s)`` per tie resolution, on demand (max over its primes).

    A rank mod p never exceeds the rank over Q: reaching ``target`` proves ``rank >= target``.  Computed only
    when a claim needs it (:mod:`exactident.verify.verdict`), and cached per resolution.
    """

    def __init__(self, facts: ConstrainedFacts) -> None:
        self.facts = facts
        self.primes = verifier_primes(N_PRIMES, facts.avoid)
        self.cache: dict[tuple[bool, ...], int] = {}

    def at(self, sides: tuple[bool, ...], target: int) -> int:
        """Largest rank mod p over the primes, stopping once ``target`` is reached."""
        if sides not in self.cache:
            best = -1
            pattern = self.facts.resolution(sides) if sides else None
            for p in self.primes:
                best = max(best, rank_mod_p(self.facts.gamma_mod_p(p, pattern), p))
                if best >= target:
                    break
            self.cache[sides] = best
        return self.cache[sides]


def free_pattern_claims(report: dict, facts: ConstrainedFacts, persistent: set,
                        proved: dict[tuple[bool, ...], tuple[int, int]]) -> list[str]:
    """A layer graph's ``patterns``: each a tie resolution certified by the ``free_rank`` part, with its rank."""
    fails: list[str] = []
    features = ", ".join(facts.cn.features) or "this architecture"
    for m, pat in enumerate(report.get("patterns", [])):
        side = {(t["sample"], t["layer"], t["neuron"]): t["active"] for t in pat["ties"]}
        sides = tuple(True if t in persistent else side.get(t, True) for t in facts.ties)
        # checked before anything else: a pattern without a rank still claims these (no witness part exists)
        if pat["cn"] is not None or pat["rank_a"] is not None:
            fails.append(f"patterns[{m}]: cn and rank_a must be null (Theorem 8 is not proved for {features})")
        fails += reachable_claim(pat, f"patterns[{m}]", witnessed=False)
        if len(pat["ties"]) != len(side):  # one tie twice, maybe on both sides: names no resolution
            fails.append(f"patterns[{m}].ties: a tie listed more than once")
            continue
        if set(side) == set(facts.ties) and pat["rank_gamma"] is None and pat["cs"] is None:
            continue  # a resolution enumerated without a certified rank: it claims nothing more
        if set(side) != set(facts.ties) or sides not in proved:
            fails.append(f"patterns[{m}].ties: not a tie resolution certified by the free_rank part")
            continue
        lo, hi = proved[sides]
        for key, found in (("rank_gamma", lo if lo == hi else None),
                           ("cs", cs_from_bounds(lo, hi, facts.symmetry.dim_free))):
            if pat[key] is not None and pat[key] != found:
                fails.append(f"patterns[{m}].{key}: the case gives {found!r}, the report claims {pat[key]!r}")
    return fails


def free_rank_claims(report: dict[str, Any], facts: ConstrainedFacts, cert: dict[str, Any],
                     everyone: list[tuple[bool, ...]] | None, ranks: OwnRanks, limits: WorkLimits, clean: bool
                     ) -> tuple[list[str], list[str], dict[tuple[bool, ...], tuple[int, int]]]:
    """A layer graph's ``free_rank`` part and its ``rank_gamma``, ``cs``, ``rank_gamma_interval``, ``montecarlo``.

    The part lists every resolution the verifier enumerates (``everyone``, None past its cap:
    :mod:`exactident.verify.resolutions`); the claims are checked against the smallest rank over them
    (:func:`exactident.verify.rank_rules.rank_claim_problems`): the certified bounds, or without a part the
    verifier's own ranks mod p (``ranks``) and ``min(rows, dim_free)``.  ``clean``: nothing failed before
    (the rank message is printed only then).

    Returns
    -------
    (failures, messages, proved)
        ``proved``: the certified ``(lo, hi)`` per resolution (empty unless the part is valid).
    """
    cn, sym = facts.cn, facts.symmetry
    fails: list[str] = []
    msgs: list[str] = []
    proved: dict[tuple[bool, ...], tuple[int, int]] = {}
    if "free_rank" in cert:
        bad, proved = check_free_rank(facts, cert["free_rank"], limits)
        if not bad and everyone is not None:  # the rule shared with the MLP: every resolution the verifier enumerates
            bad = cover_problems(proved, everyone, "certificate.free_rank.resolutions", show=list)
        elif not bad:
            bad = [f"certificate.free_rank.resolutions: 2^{n_free_sides(facts)} tie resolutions are past the "
                   f"verifier's limit of {limits.max_resolutions} (--max-resolutions): not verified"]
        fails += bad
        if not bad:
            open_ = sorted({(lo, hi) for lo, hi in proved.values() if lo < hi})
            msgs.append(f"free_rank part valid: all {len(proved)} tie resolution(s), ranks "
                        f"{sorted({lo for lo, hi in proved.values() if lo == hi})} certified"
                        + (f", intervals {[list(b) for b in open_]}" if open_ else ""))
        else:
            proved = {}
    top = min(len(facts.X) * cn.widths[-1], sym.dim_free)

    def own(s: tuple[bool, ...]) -> RankBounds:  # no certificate: the verifier's ranks mod p, and the proven top
        return RankBounds(min(ranks.at(s, sym.dim_free), top), top)

    claims_rank = any(report.get(k) is not None for k in ("rank_gamma", "cs", "rank_gamma_interval", "montecarlo"))
    bounds: RankBounds | None = None
    if proved and everyone is not None:
        bounds = smallest(RankBounds(*proved[s]) for s in everyone)
    elif "free_rank" not in cert and everyone is not None and claims_rank:
        bounds = smallest(own(s) for s in everyone)
    fails += rank_claim_problems(report, bounds, sym.dim_free, "rank Gamma_free (smallest over the tie resolutions)",
                                 reaches=lambda v: everyone is not None and all(ranks.at(s, v) >= v for s in everyone))
    if bounds is not None and clean and not fails and everyone is not None:
        msgs.append(f"rank valid: the smallest rank Gamma_free over the {len(everyone)} tie resolution(s) is "
                    f"{'certified ' + bounds.text if bounds.exact is None else bounds.text}, dim_free = {sym.dim_free}")
    return fails, msgs, proved
