"""Certificate parts of a constrained network's report, re-checked exactly: ``free_rank``, ``dead_units``,
``constant_units``, ``slope_lines``, ``line`` (:func:`check_graph_line`).

Helpers of :mod:`exactident.verify.constrained`; every fact comes from
:class:`~exactident.verify.constrained_facts.ConstrainedFacts` (the verifier's own computation).

``free_rank`` ``{kind: "free-rank", ties, resolutions: [{active, rank_gamma}]}``
    The ties must be the case's ties; each resolution's rank certificate is re-checked:
    ``shape`` is ``[n N_L, n_params]``; ``lower`` ``{prime, rank_mod_p}`` is recomputed (the rank
    of ``Gamma_free(s)`` mod that prime, from the verifier's own residues) and bounds the rank
    below; ``upper`` is ``shape`` (``min(rows, columns)``), ``symmetry`` (the proven bound
    ``dim_free``), ``kernel`` (each column checked over Q by forward-mode derivatives; with ``S_H``
    they bound the rank by ``n_params - rank [K | S_H]``) or ``exact-elimination`` (the verifier's
    own exact rank, up to ``--max-exact-entries``).  A claimed ``rank`` must sit between the two bounds.
``dead_units`` ``{parameter, name, units, direction: "-1", t0, eps, x, f_0, f_eps}`` and ``constant_units``
    ``{units, value, delta, names, t0, eps, x, f_0, f_eps}``
    A line ``theta + t delta`` (``delta = -e_parameter`` for ``dead_units``): the units listed output
    0 (``value``) on every sample; the outputs on X are the same for every ``t`` in the segment
    ``[0, t0]`` the part states (``t0`` null: every ``t >= 0``): re-run as polynomials in ``t``
    with each unit's negative-side slope (:func:`~exactident.verify.constrained_facts.line_along`,
    the shared primitive), every output polynomial constant and no kinked unit's pre-activation on
    X with a root in ``(0, t0)`` (Descartes, a coefficient bound, else Sturm; exact), so every
    unit keeps its side on the open segment; ``delta`` is not in ``S_H``, so for small ``t`` the point is not
    a rescaling of ``theta`` (the rescaling orbit is an embedded manifold whose tangent is ``S_H``):
    theta is not locally identifiable.  The witness ``f(x)`` at ``t = 0`` and ``t = eps`` is
    recomputed and must be what the report says, and differ; ``eps > 0``, and ``f(x)`` along the
    line, run as polynomials in ``t`` (the shared primitive), is not constant for small ``t > 0``:
    so every ``theta + t delta`` with small ``t > 0`` computes another function (``delta`` outside
    ``S_H`` alone would not show it: a unit dead on every input, or any other symmetry the family has
    and ``S_H`` does not list, moves theta and keeps the function).
``slope_lines`` ``{parameter, name, units, direction: "1", t0, eps, x, f_0, f_eps}``
    The same line check with ``delta = +e_parameter``, a PReLU slope: the units listed carry that slope and
    are ``>= 0`` on every sample (the verifier's own forward pass).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flint

from exactident.io.limits import DEFAULT_WORK_LIMITS, WorkLimits
from exactident.verify.arith import capped_exact_rank
from exactident.verify.constrained_facts import (
    ConstrainedFacts,
    directional_derivative,
    line_along,
    outputs_at,
    rank_mod_p,
)

__all__ = ["check_free_rank", "check_graph_line", "check_line_part", "rational"]


def rational(text: str) -> flint.fmpq:
    """``"p/q"`` (schema-checked) as fmpq."""
    num, _, den = text.partition("/")
    return flint.fmpq(int(num), int(den or 1))


def _usable(facts: ConstrainedFacts, p: int) -> bool:
    return 2**20 <= p < 2**31 and bool(flint.fmpz(p).is_prime()) and facts.avoid % p != 0


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
        if not _usable(facts, p):
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
    from exactident.verify.constrained_submersion import persistent_ties

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


def _units_output(facts: ConstrainedFacts, units: Sequence[Sequence[int]], value: flint.fmpq, where: str) -> list[str]:
    """Failures unless every unit listed is hidden, or an input coordinate (``l = 0``), and outputs ``value`` on every
    sample."""
    cn, fails = facts.cn, []
    for u, (l, v) in enumerate(units):
        if l == 0 and 0 <= v < cn.widths[0]:
            bad = [i for i, row in enumerate(facts.X) if flint.fmpq(row[v]) != value]
            if bad:
                fails.append(f"{where}[{u}]: input x[{v}] is {flint.fmpq(facts.X[bad[0]][v])} on sample {bad[0]}, "
                             f"not {value}")
            continue
        if not (1 <= l < cn.L and v < cn.widths[l]):
            fails.append(f"{where}[{u}]: ({l}, {v}) is not a hidden unit or an input")
            continue
        Z, S = facts.forward[l - 1]
        a = cn.negative_slope[l - 1][v]
        for i in range(Z.nrows()):
            z = flint.fmpq(int(Z[i, v]), S)
            if (z if z >= 0 else a * z) != value:
                fails.append(f"{where}[{u}]: unit ({l}, {v}) outputs {z if z >= 0 else a * z} on sample {i}, "
                             f"not {value}")
                break
    return fails


def _slope_units(facts: ConstrainedFacts, units: Sequence[Sequence[int]], j: int, where: str) -> list[str]:
    """Failures unless every listed unit has the PReLU slope ``theta_j`` and ``z >= 0`` on every sample."""
    cn, fails = facts.cn, []
    for u, (l, v) in enumerate(units):
        if not (1 <= l < cn.L and 0 <= v < cn.widths[l]) or int(cn.slope_index[l - 1][v]) != j:
            fails.append(f"{where}[{u}]: ({l}, {v}) is not a unit with the slope theta_{j}")
            continue
        Z, _S = facts.forward[l - 1]
        if any(Z[i, v] < 0 for i in range(Z.nrows())):
            fails.append(f"{where}[{u}]: unit ({l}, {v}) is negative on some sample")
    return fails


def _name(facts: ConstrainedFacts, j: int) -> str:
    names = facts.cn.param_names
    return names[j] if names else f"theta_{j}"


def _sparse_direction(facts: ConstrainedFacts, part: dict[str, Any], where: str,
                      delta: list[flint.fmpq]) -> tuple[list[str], bool]:
    """Fill ``delta`` (length ``n_params``) from ``part["delta"]`` (pairs ``(j, c)``) and check ``part["names"]``.

    Returns the failures and whether they are fatal (an index out of range: nothing after it can be read)."""
    k = facts.cn.n_params
    fails: list[str] = []
    if len(part["names"]) != len(part["delta"]):
        fails.append(f"{where}.names: {len(part['names'])} names for {len(part['delta'])} entries of delta")
    for m, (j, c) in enumerate(part["delta"]):
        if j >= k:
            return [f"{where}.delta[{m}]: {j} is not a parameter (n_params = {k})"], True
        delta[j] = rational(c)
        if m < len(part["names"]) and part["names"][m] != _name(facts, j):
            fails.append(f"{where}.names[{m}]: theta_{j} is {_name(facts, j)!r}, the certificate says "
                         f"{part['names'][m]!r}")
    return fails, False


def _constant_on_sample(facts: ConstrainedFacts, part: dict[str, Any], delta: list[flint.fmpq],
                        where: str) -> list[str]:
    """Failures of "the outputs on X are the same for every t in [0, t0]" (``part["t0"]`` null: every t >= 0),
    by the shared polynomial pass: no output moves, and no kinked pre-activation on X changes side before t0."""
    t0 = None if part["t0"] is None else rational(part["t0"])
    if t0 is not None and t0 <= 0:
        return [f"{where}.t0: {t0} is not positive"]
    along = line_along(facts.cn, facts.X, delta)
    moving = along.moving()
    if moving:
        i, o, d, _c = moving[0]
        return [f"{where}: the outputs on X change along the line: sample {i}, output {o} moves (degree {d} in t)"]
    crossing = along.failures_below(t0)
    if crossing:
        i, l, v = crossing[0]
        return [f"{where}.t0: unit ({l}, {v}) changes side on sample {i} for some t in "
                f"(0, {'oo' if t0 is None else t0}): the segment the certificate states is not proved"
                + (f" ({len(crossing)} such pre-activations)" if len(crossing) > 1 else "")]
    return []


def check_line_part(facts: ConstrainedFacts, key: str, part: dict[str, Any]) -> list[str]:
    """Failures of a ``dead_units``, ``constant_units`` or ``slope_lines`` part (empty: theta is not locally
    identifiable)."""
    cn, k, where = facts.cn, facts.cn.n_params, f"certificate.{key}"
    zero = flint.fmpq(0)
    delta = [zero] * k
    if key in ("dead_units", "slope_lines"):
        j = part["parameter"]
        if j >= k:
            return [f"{where}.parameter: {j} is not a parameter (n_params = {k})"]
        if part["name"] != _name(facts, j):
            return [f"{where}.name: theta_{j} is {_name(facts, j)!r}, the certificate says {part['name']!r}"]
        if key == "slope_lines":
            delta[j] = flint.fmpq(1)
            fails = _slope_units(facts, part["units"], j, f"{where}.units")
        else:
            delta[j] = flint.fmpq(-1)
            fails = _units_output(facts, part["units"], zero, f"{where}.units")
    else:
        fails, fatal = _sparse_direction(facts, part, where, delta)
        if fatal:
            return fails
        fails += _units_output(facts, part["units"], rational(part["value"]), f"{where}.units")
    if fails:
        return fails
    if not any(d != 0 for d in delta):
        return [f"{where}: the direction is 0"]
    if facts.X:
        fails = _constant_on_sample(facts, part, delta, where)
        if fails:
            return fails
    sym = facts.symmetry
    M = flint.fmpq_mat(k, sym.symmetry_dim + 1)
    for i in range(k):
        for c in range(sym.symmetry_dim):
            M[i, c] = sym.basis[i, c]
        M[i, sym.symmetry_dim] = delta[i]
    if M.rref()[1] == sym.symmetry_dim:
        return [f"{where}: the direction is in S_H (a rescaling of theta, not a new point)"]
    x = [rational(v) for v in part["x"]]
    if len(x) != cn.widths[0]:
        return [f"{where}.x: {len(x)} entries for {cn.widths[0]} inputs"]
    theta = cn.theta()
    eps = rational(part["eps"])
    if eps <= 0:
        return [f"{where}.eps: {eps} is not positive (the witness must lie on the segment's side t > 0)"]
    # f(x) must move for every small t > 0 (a nonconstant polynomial there): f_0 != f_eps alone proves nothing
    # about small t (the point theta + eps delta may be far, or the function may change only past a kink)
    if not line_along(cn, [x], delta).moving():
        return [f"{where}.x: f(x) is constant along the line for small t > 0: no change of function shown"]
    f0 = outputs_at(cn, x, theta)
    f1 = outputs_at(cn, x, [t + eps * d for t, d in zip(theta, delta)])
    for label, found, claimed in (("f_0", f0, part["f_0"]), ("f_eps", f1, part["f_eps"])):
        if [str(v) for v in found] != [str(rational(c)) for c in claimed]:
            fails.append(f"{where}.{label}: the case gives {[str(v) for v in found]}, the certificate says {claimed}")
    if not fails and f0 == f1:
        fails.append(f"{where}: f_0 = f_eps: the witness shows no change")
    return fails


def check_graph_line(facts: ConstrainedFacts, part: dict[str, Any]) -> list[str]:
    """Failures of a ``line`` part ``{kind: "line", delta, names, t0, probe}`` (empty: not locally identifiable).

    Recomputed from the case alone with the shared polynomial pass
    (:func:`~exactident.verify.constrained_facts.line_along`): the direction is over the free parameters
    (names as the case gives them) and nonzero; every output on X is constant along ``theta + t delta`` and no
    kinked pre-activation on X has a root in ``(0, t0)``; at the probe ``x*`` some output is not constant for
    small ``t > 0``.  Then every ``theta + t delta`` with small ``t > 0`` has the outputs of ``theta`` on X and
    computes another function, so no symmetry relates it to ``theta``: only exact evaluation is used, valid for
    every layer graph.
    """
    cn, k, where = facts.cn, facts.cn.n_params, "certificate.line"
    zero = flint.fmpq(0)
    delta = [zero] * k
    fails, _fatal = _sparse_direction(facts, part, where, delta)
    if fails:
        return fails
    if not any(d != 0 for d in delta):
        return [f"{where}: the direction is 0"]
    if not facts.X:
        return [f"{where}: no sample"]
    fails = _constant_on_sample(facts, part, delta, where)
    if fails:
        return fails
    probe = [rational(v) for v in part["probe"]]
    if len(probe) != cn.widths[0]:
        return [f"{where}.probe: {len(probe)} entries for {cn.widths[0]} inputs"]
    if not line_along(cn, [probe], delta).moving():
        return [f"{where}.probe: f(x*) is constant along the line for small t > 0: no change of function shown"]
    return []
