"""``verify-certificate`` for reports of constrained networks (convolution, pooling, skips, leaky ReLU, PReLU).

The verifier trusts nothing in the report: from the compiled network and the sample it
recomputes, with its own code (:mod:`exactident.verify.constrained_facts`), the
pre-activations and ties, ``Gamma_free`` mod primes for every tie resolution, the
rescaling symmetry ``S_H`` and ``dim_free = rank T - dim S_H``, then checks every claim:

- ``widths``, ``n_samples``, ``dim`` (``= dim_free``), ``architecture`` (``features``,
  ``n_params``, ``rank_t``, ``symmetry_dim``, ``dim_free``, ``input_shape``), ``on_boundary``,
  ``n_ties``;
- ``rank_a`` and ``cn`` must be null: Theorem 8 of the paper (``C_N``) is proved for the
  plain layered ReLU MLP only, so a ``C_N`` value for another architecture is refused;
- ``rank_gamma = r`` (the smallest rank over the tie resolutions): every resolution's
  ``Gamma_free`` has rank ``>= r`` mod some prime (a rank mod p never exceeds the rank over
  Q), and ``r`` is an upper bound: ``r = dim_free`` (every direction of ``S_H`` is in the
  kernel, so ``rank <= dim_free`` always), ``r = n N_L`` (the number of rows) or the
  certificate's exact kernel vectors of one resolution (checked over Q by forward-mode
  derivatives) together with ``S_H`` leave at most ``r``; ``cs`` is ``rank_gamma == dim``;
- the verdict: ``identifiable`` needs ``rank = dim_free`` mod p on every tie resolution
  (the immersion argument); ``not-identifiable`` needs a verified ``line`` part (below);
  ``inconclusive`` is refused when the verifier proves identifiability; ``degenerate``
  and ``decided_by: theorem-8`` are refused.

The ``line`` part ``{"kind": "dead-units", "units": [[l, v], ...], "delta": {name: "p/q"}}``
is checked exactly: every unit listed is a ReLU unit (slope fixed 0) with ``z_v(x) <= 0``
on every sample, so it outputs 0; every parameter ``delta`` moves feeds only outgoing weights
of those units, so the outputs on X are the same at ``theta + eps delta`` for every ``eps``;
and ``delta`` is not in ``S_H``, so for small ``eps != 0`` the point is not a rescaling of
``theta`` (the orbit is an embedded manifold with tangent ``S_H``): ``theta`` is not locally
identifiable.  Parameters are named as ``param_names`` or ``theta_j``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import flint
import numpy as np

from exactident.model.constrained import ConstrainedNetwork
from exactident.verify.constrained_facts import ConstrainedFacts, directional_derivative, rank_mod_p, verifier_primes
from exactident.verify.schema import (
    AnyOf,
    Enum,
    Int,
    List,
    Null,
    Obj,
    Rational,
    Spec,
    Tuple,
    Type,
    validate,
)

__all__ = ["CONSTRAINED_REPORT", "MAX_RESOLUTIONS", "verify_constrained"]

#: Tie resolutions the verifier enumerates at most (``2^ties``); beyond, an identifiable claim is not checked.
MAX_RESOLUTIONS = 1024
#: Primes tried per resolution before a rank mod p below the claim counts as a failure.
N_PRIMES = 3

NAT, BOOL, STR = Int(), Type(bool), Type(str)


class _Names(Spec):
    """``{parameter name: rational string}``."""

    what = "dict"

    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, dict):
            Type(dict).check(value, where)
        for key, item in value.items():
            STR.check(key, f"{where}[{key!r}]")
            Rational().check(item, f"{where}[{key!r}]")


KERNEL = List(List(Tuple(NAT, Rational())))
RANK_ONE = Obj({"shape": List(NAT, 2)}, {
    "lower": Obj({"prime": NAT, "rank_mod_p": NAT}, {"resolution": Null(NAT)}),
    "upper": Obj({"kind": Enum("dim-free", "kernel")}, {"kernel": KERNEL, "resolution": Null(NAT)})})
#: The schema of a constrained network's report (``exactident-report/1`` plus ``architecture``).
CONSTRAINED_REPORT = Obj({"architecture": Obj({"features": List(STR), "n_params": NAT, "rank_t": NAT,
                                                "symmetry_dim": NAT, "dim_free": NAT},
                                               {"input_shape": Null(List(Int(1)))})}, {
    "name": STR, "verdict": Enum("identifiable", "not-identifiable", "inconclusive", "degenerate"),
    "format": Enum("exactident-report/1"), "widths": List(Int(1)), "n_samples": NAT, "dim": NAT,
    "rank_gamma": Null(NAT), "rank_a": Type(type(None)), "cs": Null(BOOL), "cn": AnyOf(Type(type(None)), BOOL),
    "degenerate": BOOL, "on_boundary": Null(BOOL), "n_ties": Null(NAT), "reason": STR, "decided_by": STR,
    "numeric": Type(dict), "summary": List(STR), "provenance": Type(dict), "certified": BOOL, "timed_out": BOOL,
    "rank_gamma_interval": List(NAT, 2),
    "certificate": Null(Obj({}, {
        "rank": Obj({"rank_gamma": RANK_ONE}),
        "line": Obj({"kind": Enum("dead-units"), "delta": _Names()}, {"units": List(Tuple(Int(1), NAT))})}))})


def _param_index(cn: ConstrainedNetwork, name: str) -> int | None:
    if name.startswith("theta_") and name[6:].isdigit():
        j = int(name[6:])
        return j if j < cn.n_params else None
    try:
        return cn.param_names.index(name)
    except ValueError:
        return None


def _rational(text: str) -> flint.fmpq:
    num, _, den = text.partition("/")
    return flint.fmpq(int(num), int(den or 1))


class _Ranks:
    """Ranks mod p of ``Gamma_free(s)`` per tie resolution, computed on demand (max over primes)."""

    def __init__(self, facts: ConstrainedFacts) -> None:
        self.facts = facts
        self.primes = verifier_primes(N_PRIMES, facts.avoid)
        self.cache: dict[tuple[bool, ...], int] = {}

    def resolutions(self) -> list[tuple[bool, ...]]:
        return list(itertools.product((True, False), repeat=len(self.facts.ties)))

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


def _kernel_bound(facts: ConstrainedFacts, cols: list, sides: tuple[bool, ...], where: str) -> tuple[int | None, str]:
    """Upper bound ``k - rank[K | S_H]`` when every kernel column is an exact kernel vector of ``Gamma_free(s)``."""
    cn, k = facts.cn, facts.cn.n_params
    pattern = facts.resolution(sides) if sides else None
    K = flint.fmpq_mat(k, len(cols) + facts.symmetry.symmetry_dim)
    for c, col in enumerate(cols):
        delta = [flint.fmpq(0)] * k
        for i, v in col:
            if not 0 <= i < k:
                return None, f"{where}[{c}]: index {i} outside [0, {k})"
            delta[i] = _rational(v)
        if any(d != 0 for d in directional_derivative(cn, facts.X, delta, pattern)):
            return None, f"{where}[{c}]: Gamma_free times this column is not 0 (exact)"
        for i in range(k):
            K[i, c] = delta[i]
    B = facts.symmetry.basis
    for i in range(k):
        for c in range(B.ncols()):
            K[i, len(cols) + c] = B[i, c]
    return k - (K.rref()[1] if K.ncols() else 0), ""


def _check_line(facts: ConstrainedFacts, line: dict) -> list[str]:
    """Failures of a ``dead-units`` line part (empty: verified)."""
    cn, fails = facts.cn, []
    dead: set[tuple[int, int]] = set()
    for n_u, (l, v) in enumerate(line.get("units", [])):
        at = f"certificate.line.units[{n_u}]"
        if not (1 <= l < cn.L and v < cn.widths[l]):
            fails.append(f"{at}: ({l}, {v}) is not a hidden unit")
            continue
        if int(cn.slope_index[l - 1][v]) >= 0 or cn.negative_slope[l - 1][v] != 0:
            fails.append(f"{at}: unit ({l}, {v}) is not a ReLU unit (its negative slope is not fixed at 0)")
            continue
        Z = facts.forward[l - 1][0]
        if any(Z[i, v] > 0 for i in range(Z.nrows())):
            fails.append(f"{at}: unit ({l}, {v}) is active on a sample (z > 0): not dead")
            continue
        dead.add((l, v))
    delta = [flint.fmpq(0)] * cn.n_params
    for name, text in line["delta"].items():
        j = _param_index(cn, name)
        if j is None:
            fails.append(f"certificate.line.delta[{name!r}]: no such parameter")
            continue
        delta[j] = _rational(text)
    moved = {j for j, d in enumerate(delta) if d != 0}
    if not moved:
        fails.append("certificate.line.delta: the direction is 0")
    for l in range(1, cn.L + 1):
        I, Ib = np.asarray(cn.W_index[l - 1]), np.asarray(cn.b_index[l - 1])
        for (i, u) in zip(*np.nonzero(np.isin(I, list(moved)))):
            if (l - 1, int(u)) not in dead:
                fails.append(f"certificate.line.delta: theta_{I[i, u]} feeds W_{l}[{i},{u}], not an outgoing "
                             "weight of a dead unit listed: the outputs may change")
        for i in np.nonzero(np.isin(Ib, list(moved)))[0]:
            fails.append(f"certificate.line.delta: theta_{Ib[i]} feeds the bias b_{l}[{i}]: the outputs may change")
    for l in range(1, cn.L):
        for v in np.nonzero(np.isin(np.asarray(cn.slope_index[l - 1]), list(moved)))[0]:
            fails.append(f"certificate.line.delta: theta_{cn.slope_index[l - 1][v]} is a slope: the outputs may change")
    if moved and not fails:
        S = facts.symmetry
        M = flint.fmpq_mat(cn.n_params, S.symmetry_dim + 1)
        for i in range(cn.n_params):
            for c in range(S.symmetry_dim):
                M[i, c] = S.basis[i, c]
            M[i, S.symmetry_dim] = delta[i]
        if M.rref()[1] == S.symmetry_dim:
            fails.append("certificate.line.delta: the direction is in S_H (a rescaling of theta, not a new point)")
    return fails


def verify_constrained(cn: ConstrainedNetwork, X: Sequence[Sequence[object]], report: Any, *,
                       name: str | None = None, input_shape: Sequence[int] | None = None,
                       provenance: Any = None) -> tuple[bool, list[str]]:
    """Re-check a constrained network's report from the network and the sample alone.

    Parameters
    ----------
    cn : ConstrainedNetwork
        The compiled case (never taken from the report).
    X : n rows of ``N_0`` exact numbers (fmpq or int)
    report : dict
        The report (``exactident-report/1`` with ``architecture``).
    name, input_shape, provenance : optional
        The case's, compared with the report's when given.

    Returns
    -------
    (valid, messages) : (bool, list of str)
        What was checked, then what failed (each failure names the field, found and claimed).

    A malformed report is a failure in ``messages`` (its field's JSON path), never an exception.
    """
    problem = validate(report, CONSTRAINED_REPORT)
    if problem is not None:
        return False, [problem]
    facts = ConstrainedFacts.from_network(cn, X)
    sym, fails, msgs = facts.symmetry, [], []
    features = ", ".join(cn.features) or "this architecture"

    def claim(field: str, found: Any, claimed: Any) -> None:
        if claimed != found:
            fails.append(f"{field}: the case gives {found!r}, the report claims {claimed!r}")

    arch = report["architecture"]
    for key, found in (("name", name), ("widths", list(cn.widths)), ("n_samples", len(facts.X)),
                       ("dim", sym.dim_free), ("on_boundary", bool(facts.ties)), ("n_ties", len(facts.ties)),
                       ("provenance", provenance)):
        if key in report and (found is not None or key != "name") and (key != "provenance" or found is not None):
            claim(key, found, report[key])
    claim("architecture.features", sorted(cn.features), sorted(arch["features"]))
    for key, found in (("n_params", cn.n_params), ("rank_t", sym.rank_t), ("symmetry_dim", sym.symmetry_dim),
                       ("dim_free", sym.dim_free)):
        claim(f"architecture.{key}", found, arch[key])
    if input_shape is not None and "input_shape" in arch:
        claim("architecture.input_shape", list(input_shape), arch["input_shape"])
    if report.get("cn") is not None:
        fails.append(f"cn: Theorem 8 (C_N) is not proved for {features}: a constrained report must say null")
    if report.get("decided_by") == "theorem-8":
        fails.append(f"decided_by: Theorem 8 (C_N) is not proved for {features}")
    if report.get("degenerate"):
        fails.append("degenerate: no degenerate rule is proved for constrained networks")
    msgs.append(f"recomputed: {cn.n_params} parameters, rank T = {sym.rank_t}, dim S_H = {sym.symmetry_dim}, "
                f"dim_free = {sym.dim_free}, {len(facts.ties)} tie(s)")
    ranks = _Ranks(facts)
    if len(facts.ties) > 20 or 2 ** len(facts.ties) > MAX_RESOLUTIONS:
        fails.append(f"on_boundary: {len(facts.ties)} ties give more than {MAX_RESOLUTIONS} tie resolutions: "
                     "the ranks cannot be checked")
        return False, msgs + fails
    resolutions = ranks.resolutions()
    cert = report.get("certificate") or {}
    r = report.get("rank_gamma")
    proved_identifiable = None

    def all_full() -> bool:
        return all(ranks.at(s, sym.dim_free) >= sym.dim_free for s in resolutions)

    if r is not None:
        low = [s for s in resolutions if ranks.at(s, r) < r]
        if low:
            fails.append(f"rank_gamma: the report claims {r}, but Gamma_free has rank {ranks.at(low[0], r)} "
                         f"mod {len(ranks.primes)} primes at a tie resolution (a rank mod p never exceeds the rank)")
        elif r > sym.dim_free:
            fails.append(f"rank_gamma: the report claims {r} > dim_free = {sym.dim_free} (impossible: S_H is in "
                         "the kernel)")
        elif r < sym.dim_free and r == len(facts.X) * cn.widths[-1]:
            msgs.append(f"rank valid: R_Gamma = {r}, the number of rows of Gamma_free")
        elif r < sym.dim_free:
            up = cert.get("rank", {}).get("rank_gamma", {}).get("upper")
            if not up or up["kind"] != "kernel" or "kernel" not in up:
                fails.append(f"rank_gamma: the report claims {r} < dim_free = {sym.dim_free} with no kernel "
                             "vectors to bound it above: not verified")
            else:
                res = up.get("resolution")
                tried = [resolutions[res]] if res is not None and res < len(resolutions) else resolutions
                for sides in tried:  # the resolution the kernel belongs to (every one when not said)
                    bound, why = _kernel_bound(facts, up["kernel"], sides,
                                               "certificate.rank.rank_gamma.upper.kernel")
                    if bound is not None:
                        break
                if bound is None:
                    fails.append(why)
                elif bound > r:
                    fails.append(f"certificate.rank.rank_gamma.upper: the kernel vectors and S_H bound the rank "
                                 f"by {bound}, not {r}")
                else:
                    msgs.append(f"rank part valid: R_Gamma = {r} (kernel vectors checked over Q)")
        else:
            msgs.append(f"rank valid: R_Gamma = dim_free = {r} mod p on {len(resolutions)} tie resolution(s)")
            proved_identifiable = True
        if "cs" in report and report["cs"] != (r == sym.dim_free):
            claim("cs", r == sym.dim_free, report["cs"])
    lower = cert.get("rank", {}).get("rank_gamma", {}).get("lower")
    if lower is not None:
        p = lower["prime"]
        if not (2**20 <= p < 2**31 and flint.fmpz(p).is_prime() and facts.avoid % p):
            fails.append(f"certificate.rank.rank_gamma.lower.prime: {p} is not a usable prime")
        else:
            res = lower.get("resolution")
            sides = resolutions[res] if res is not None and res < len(resolutions) else resolutions[0]
            found = rank_mod_p(facts.gamma_mod_p(p, facts.resolution(sides) if sides else None), p)
            claim("certificate.rank.rank_gamma.lower.rank_mod_p", found, lower["rank_mod_p"])
    verdict = report.get("verdict")
    if verdict == "identifiable":
        if proved_identifiable is None:
            proved_identifiable = all_full()
        if not proved_identifiable:
            fails.append(f"verdict: identifiable needs rank Gamma_free = dim_free = {sym.dim_free} on every tie "
                         "resolution; the verifier finds less")
        else:
            msgs.append("verdict identifiable verified: rank Gamma_free = dim_free on every tie resolution")
    elif verdict == "not-identifiable":
        if "line" not in cert:
            fails.append(f"verdict: not-identifiable needs an exact certificate for {features} (a line); "
                         "the report has none")
        else:
            bad = _check_line(facts, cert["line"])
            fails += bad
            if not bad:
                msgs.append("line part valid: the outputs on X are constant along theta + eps delta, delta not in "
                            "S_H")
    elif verdict == "inconclusive":
        if all_full():
            fails.append("verdict: inconclusive, but the verifier proves identifiable (rank Gamma_free = dim_free "
                         "on every tie resolution)")
    elif verdict == "degenerate":
        fails.append("verdict: no degenerate rule is proved for constrained networks")
    if verdict != "not-identifiable" and "line" in cert:
        fails += _check_line(facts, cert["line"])
    return not fails, msgs + fails

