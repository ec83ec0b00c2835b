"""Verify the explain fields of a report: ``kernel_basis``, ``parameters``, ``neurons`` (docs/explain.md).

Nothing is trusted.  From the case alone:

- each ``kernel_basis`` block's directions are checked to be in ``ker Gamma(s)``
  (``s`` the sample's ``>= 0`` pattern, ties active, for ``resolution: null``; or the
  named tie resolution of the verified ``boundary`` part): ``Gamma(s) K = 0`` mod fresh primes whose product exceeds the
  bound on ``|Gamma K|`` (the same test as the rank certificates, with the
  engine's residues of ``Gamma``, :mod:`exactident.model.gamma_modular`), ``K`` of
  full column rank; the block is *complete* when it has ``dim - R_Gamma(s)``
  directions with ``R_Gamma(s)`` certified by the certificate.  A ``line: true``
  claim is re-checked with the verifier's own polynomial forward pass
  (:func:`exactident.model.line_forward.line_pass`), or, for a direction moving one
  layer only on a case without ties, by the one-layer lemma of docs/explain.md;
- each ``parameters`` entry's class against its witness: ``identifiable`` needs
  the verified ranks to prove ``C_S``; ``not-identifiable`` needs a verified line,
  or certified ``R_Gamma = R_A < dim`` off the boundary, or the verified entering
  certificate's resolution, and a verified direction that moves the parameter;
  ``first-order-determined`` needs complete blocks for every resolution that do
  not move it; ``unknown`` claims nothing; ``fixed`` must name a fixed edge;
- each ``neurons`` entry's counts, hyperplane rank (sympy over QQ), flags, twins
  and couplings, recomputed with Fractions; ``why`` is prose.

A layer graph's report (:func:`verify_free_explained`: ``kernel_basis``, ``parameters`` in the chart of the
free parameters, ``units``, ``channels``, docs/explain.md, "Constrained networks").  Nothing is
trusted; from the compiled network and the sample, with the verifier's own facts
(:class:`~exactident.verify.facts.ConstrainedFacts`):

- the gauge (the ``parameters`` of class ``gauge``) has ``dim S_H`` parameters whose rows of the
  verifier's own basis of ``S_H`` are independent (exact over Q), so ``S_H`` meets the chart in 0;
- each ``kernel_basis`` block: its directions (integers) are zero on the gauge, in ``ker Gamma_free(s)``
  (``Gamma_free(s) delta = 0`` exactly, forward mode, for the block's tie resolution ``s``) and
  independent (exact rank); its ``rank_gamma`` is proved from both sides: a rank mod p at least
  that large (a lower bound), and ``k - dim S_H - (number of directions)`` equal to it (the
  directions and ``S_H`` span independent parts of the kernel, an upper bound), which also makes the
  block a complete basis of the kernel in the chart; ``line: true`` is re-checked by the verifier's
  polynomial forward pass in ``t`` (:func:`~exactident.verify.line.line_is_constant`) along
  ``delta`` and ``-delta``;
- each ``parameters`` entry's class against its witness: ``identifiable`` needs the identifiable
  verdict (itself verified); ``not-identifiable`` a verified certificate part of its ``by`` whose
  direction (``-e_j`` for a dead-unit line, ``+e_j`` for a slope line, the listed ``delta`` otherwise),
  taken into the chart by subtracting its part in ``S_H``, moves the parameter;
  ``first-order-determined`` complete blocks for every tie resolution, none moving it;
  ``undetermined`` a verified direction (its ``witness``) moving it;
- each ``units`` and ``channels`` entry recomputed (:mod:`exactident.verify.units_check`).

Called by :mod:`exactident.verify.certificate`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import flint

from exactident.linalg.certified import has_full_column_rank, kernel_is_zero_mod
from exactident.linalg.modular import random_primes
from exactident.model.fixed_edges import fixed_edges, free_parameters
from exactident.model.gamma_modular import gamma_entry_bound, gamma_mod_p
from exactident.model.integer_forward import data_denominator
from exactident.model.line_forward import line_pass
from exactident.verify.arith import BadField, direction, need, parse_fraction, unknown_fields
from exactident.verify.claims import Proofs
from exactident.verify.facts import CaseFacts, ConstrainedFacts
from exactident.verify.gamma import directional_derivative
from exactident.verify.line import line_is_constant
from exactident.verify.symmetry import gauge_spans, into_chart
from exactident.verify.units_check import INTEGER, check_channels, check_units, free_parameter_names

__all__ = ["EXPLAIN_FIELDS", "verify_explained", "verify_free_explained"]

#: The report fields checked here.
EXPLAIN_FIELDS = ("parameters", "neurons", "kernel_basis")


class _Block:
    def __init__(self, resolution: int | None, sides: dict, vectors: list[dict[int, Fraction]],
                 lines: list[bool], complete: bool) -> None:
        self.resolution, self.sides, self.vectors, self.lines, self.complete = (resolution, sides, vectors, lines,
                                                                                complete)


def _certified_rank(facts: CaseFacts, proofs: Proofs, resolution: int | None) -> int | None:
    res = proofs.boundary.resolutions if proofs.boundary else None
    if resolution is not None:
        return res[resolution].rank_gamma if res and 0 <= resolution < len(res) else None
    if not facts.visible and res and len(res) == 1 and res[0].rank_gamma is not None:
        return res[0].rank_gamma
    return proofs.rank_part[0] if proofs.rank_part else None  # the >= 0 pattern (ties active)


def _zero_mod_primes(case, pattern, fixed, vectors: list[dict[int, Fraction]]) -> bool:
    net, X = case.network, case.X
    dim = net.dim
    avoid = data_denominator(net, X)
    K_int = []
    for vec in vectors:
        d = 1
        for v in vec.values():
            d = d * v.denominator // _gcd(d, v.denominator)
        K_int.append({j: int(v * d) for j, v in vec.items()})
    if not K_int:
        return True
    rng = random.Random()
    bound = dim * gamma_entry_bound(net, X) * max(abs(v) for col in K_int for v in col.values())
    primes: list[int] = []
    while sum(q.bit_length() - 1 for q in primes) <= bound.bit_length() + 1:
        primes += random_primes(1, avoid, rng, exclude=primes)
    if not has_full_column_rank(K_int, dim, primes[0]):
        return False
    return kernel_is_zero_mod(lambda q: gamma_mod_p(net, X, pattern, fixed, q, avoid), dim, K_int, primes, avoid)


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


def _blocks(case, report: dict, facts: CaseFacts, proofs: Proofs, names: list[str], fixed) -> tuple[list, list, list]:
    fails: list[str] = []
    msgs: list[str] = []
    out: list[_Block | None] = []
    blocks = need(report, "kernel_basis", list, "")
    params = {n: j for j, n in enumerate(names)}
    layer_of = [int(n.split("_")[1].split("[")[0]) for n in names]
    for b, blk in enumerate(blocks):
        at = f"kernel_basis[{b}]"
        if not isinstance(blk, dict):
            raise BadField(at, f"expected dict, found {type(blk).__name__}")
        fails += unknown_fields(blk, ("resolution", "rank_gamma", "directions"), at)
        res = blk.get("resolution")
        if res is not None and (not isinstance(res, int) or isinstance(res, bool)):
            raise BadField(f"{at}.resolution", f"expected int or null, found {type(res).__name__}")
        sides: dict = {}
        if res is not None:
            resolutions = proofs.boundary.resolutions if proofs.boundary else None
            if not resolutions or not 0 <= res < len(resolutions):
                fails.append(f"{at}.resolution: {res} is not a tie resolution the certificate verifies")
                out.append(None)
                continue
            sides = dict(zip(proofs.boundary.ties if proofs.boundary else [], resolutions[res].active))
        vectors, lines = [], []
        for d, direc in enumerate(need(blk, "directions", list, at)):
            where = f"{at}.directions[{d}]"
            if not isinstance(direc, dict):
                raise BadField(where, f"expected dict, found {type(direc).__name__}")
            fails += unknown_fields(direc, ("delta", "line"), where)
            vec: dict[int, Fraction] = {}
            for name, value in need(direc, "delta", dict, where).items():
                if name not in params:
                    fails.append(f"{where}.delta: {name!r} is not a free parameter (the fixed edges are "
                                 "not coordinates)")
                    continue
                q = parse_fraction(value, f"{where}.delta[{name!r}]")
                if q:
                    vec[params[name]] = q
            if not vec:
                fails.append(f"{where}.delta: the zero vector is not a basis direction")
            vectors.append(vec)
            lines.append(direc.get("line") is True)
        pattern = facts.pattern(sides)
        if vectors and not _zero_mod_primes(case, pattern, fixed, vectors):
            fails.append(f"{at}: the directions are not independent vectors of ker Gamma"
                         + (f"(s) of tie resolution {res}" if res is not None else ""))
            out.append(None)
            continue
        rank = _certified_rank(facts, proofs, res)
        claimed = need(blk, "rank_gamma", int, at)
        complete = rank is not None and rank == claimed == facts.dim - len(vectors)
        if claimed != facts.dim - len(vectors) or (rank is not None and rank != claimed):
            fails.append(f"{at}.rank_gamma: report says {claimed}, with {len(vectors)} directions dim - nullity = "
                         f"{facts.dim - len(vectors)}, certified rank {rank}")
        for d, (vec, claim) in enumerate(zip(vectors, lines)):
            if claim and not _is_line(facts, vec, names, layer_of):
                fails.append(f"{at}.directions[{d}].line: the outputs on X move along theta + t delta; the report "
                             "claims a straight line of equal outputs")
                lines[d] = False
        out.append(_Block(res, sides, vectors, lines, complete))
        msgs.append(f"kernel_basis[{b}] valid: {len(vectors)} exact directions of ker Gamma"
                    + ("" if res is None else f"(s) (tie resolution {res})")
                    + (", a complete basis" if complete else "") + f", {sum(lines)} straight line(s)")
    return out, fails, msgs


def _is_line(facts: CaseFacts, vec: dict[int, Fraction], names: list[str], layer_of: list[int]) -> bool:
    if facts.degenerate:
        return False
    if not facts.ties and len({layer_of[j] for j in vec}) == 1:
        return True  # docs/explain.md, "Straight lines": one layer, no tie, in ker Gamma
    from exactident.verify.arith import parse_parameter

    keyed = {parse_parameter(names[j], facts.widths, "delta"): v for j, v in vec.items()}
    dW, db = direction(facts.widths, keyed)
    return not facts.X or line_pass(facts.W, facts.b, dW, db, facts.X).is_constant()


def _identifiable_proved(facts: CaseFacts, proofs: Proofs) -> bool:
    res = proofs.boundary.resolutions if proofs.boundary else None
    if facts.visible:
        return bool(res) and all(r.rank_gamma == facts.dim for r in res or [])
    rank = _certified_rank(facts, proofs, None)
    return rank == facts.dim


def _cn_fails_proved(facts: CaseFacts, proofs: Proofs) -> bool:
    if facts.visible or facts.degenerate:
        return False
    res = proofs.boundary.resolutions if proofs.boundary else None
    ranks = (res[0].rank_gamma, res[0].rank_a) if res and len(res) == 1 else proofs.rank_part
    return ranks is not None and ranks[1] is not None and ranks[0] == ranks[1] < facts.dim


def _parameters(report: dict, facts: CaseFacts, proofs: Proofs, names: list[str], fixed_names: list[str],
                blocks: list) -> list[str]:
    fails: list[str] = []
    entries = need(report, "parameters", list, "")
    seen = []
    cert: dict = report["certificate"] if isinstance(report.get("certificate"), dict) else {}
    ent_res = cert.get("entering", {}).get("resolution") if isinstance(cert.get("entering"), dict) else None
    for k, e in enumerate(entries):
        at = f"parameters[{k}]"
        if not isinstance(e, dict):
            raise BadField(at, f"expected dict, found {type(e).__name__}")
        fails += unknown_fields(e, ("name", "class", "by", "witness", "why"), at)
        name, cls = need(e, "name", str, at), need(e, "class", str, at)
        seen.append(name)
        if cls == "fixed":
            if name not in fixed_names:
                fails.append(f"{at}: {name} is not a fixed edge (the fixed edges are {fixed_names[:6]}...)")
            continue
        if name not in names:
            fails.append(f"{at}: {name!r} is not a free parameter of this network")
            continue
        j = names.index(name)
        problem = _class_problem(cls, e, j, name, facts, proofs, blocks, cert, ent_res)
        if problem:
            fails.append(f"{at} ({name}): {problem}")
    if sorted(seen) != sorted(names + fixed_names):
        fails.append(f"parameters: the entries do not list every parameter once ({len(seen)} entries, "
                     f"{len(names)} free parameters and {len(fixed_names)} fixed edges)")
    return fails


def _witness(e: dict, j: int, blocks: list, *, line: bool = False, resolution: Any = "any") -> str | None:
    w = e.get("witness")
    if not (isinstance(w, list) and len(w) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in w)):
        return f"witness {w!r} is not [block, direction]"
    b, d = w
    blk = blocks[b] if 0 <= b < len(blocks) else None
    if blk is None or not 0 <= d < len(blk.vectors):
        return f"witness {w}: no verified kernel direction there"
    if resolution != "any" and blk.resolution != resolution:
        return f"witness {w}: block of resolution {blk.resolution}, expected {resolution}"
    if not blk.vectors[d].get(j):
        return f"witness {w}: that direction does not move it"
    if line and not blk.lines[d]:
        return f"witness {w}: that direction is not a verified straight line"
    return None


def _class_problem(cls: str, e: dict, j: int, name: str, facts: CaseFacts, proofs: Proofs, blocks: list,
                   cert: dict, ent_res: Any) -> str | None:
    by = e.get("by")
    if cls == "unknown":
        return None
    if cls == "identifiable":
        return None if _identifiable_proved(facts, proofs) else "C_S is not proved by the certified ranks"
    if cls == "first-order-determined":
        res = proofs.boundary.resolutions if proofs.boundary else None
        wanted = [None] if not facts.visible else list(range(len(res or [])))
        if not wanted:
            return "no certified tie resolutions to cover"
        for r in wanted:
            blk = next((b for b in blocks if b is not None and b.resolution == r and b.complete), None)
            if blk is None:
                return f"no complete verified kernel basis for {'the sample' if r is None else f'resolution {r}'}"
            if any(v.get(j) for v in blk.vectors):
                return "a kernel direction moves it"
        return None
    if cls != "not-identifiable":
        return f"unknown class {cls!r}"
    if facts.degenerate:
        return "theta is in S: the argument does not apply"
    if by == "line":
        if e.get("witness") == "certificate":
            delta = cert.get("line", {}).get("delta", {}) if isinstance(cert.get("line"), dict) else {}
            ok = proofs.nonequivalence == "line" and parse_fraction(delta.get(name, "0"), "line.delta") != 0
            return None if ok else "the line certificate is not verified or does not move it"
        return _witness(e, j, blocks, line=True)
    if by == "C_N":
        if not _cn_fails_proved(facts, proofs):
            return "C_N failing (R_Gamma = R_A < dim, off the boundary) is not certified"
        return _witness(e, j, blocks, resolution=None)
    if by == "entering":
        if proofs.nonequivalence != "entering":
            return "no verified entering certificate"
        if e.get("witness") == "certificate":
            delta = cert["entering"].get("delta", {})
            return None if parse_fraction(delta.get(name, "0"), "entering.delta") != 0 else "delta does not move it"
        w = e.get("witness")
        blk = blocks[w[0]] if isinstance(w, list) and w and isinstance(w[0], int) and 0 <= w[0] < len(blocks) else None
        if blk is None or blk.resolution is None or not isinstance(ent_res, list):
            return "the witness is not a kernel of the entering resolution"
        sides = {(t.get("sample"), t.get("layer"), t.get("neuron")): t.get("active") for t in ent_res
                 if isinstance(t, dict)}
        if sides != blk.sides:
            return "the witness block is not the entering certificate's resolution"
        return _witness(e, j, blocks)
    return f"not-identifiable by {by!r}: unknown witness kind"


def _neurons(report: dict, facts: CaseFacts, proofs: Proofs, names: list[str], blocks: list) -> list[str]:
    from exactident.verify.neurons_check import check_neurons

    trivial = not blocks and _identifiable_proved(facts, proofs)
    return check_neurons(need(report, "neurons", list, ""), facts, names, blocks, trivial)


def verify_explained(case: Any, report: dict, facts: CaseFacts, proofs: Proofs) -> tuple[list[str], list[str]]:
    """Check the explain fields present in ``report`` (module docstring); (failures, messages)."""
    present = [k for k in EXPLAIN_FIELDS if k in report]
    if not present:
        return [], []
    fixed = fixed_edges(case.network)
    names = [p.name for p in free_parameters(case.network, fixed)]
    fixed_names = [f"W_{l + 1}[{k},{v}]" for (l, v), k in sorted(fixed.s_max.items())]
    blocks: list = []
    fails: list[str] = []
    msgs: list[str] = []
    if "kernel_basis" in report:
        blocks, f, m = _blocks(case, report, facts, proofs, names, fixed)
        fails += f
        msgs += m
    if "parameters" in report:
        f = _parameters(report, facts, proofs, names, fixed_names, blocks)
        fails += f
        if not f:
            msgs.append("parameters valid: every class backed by the certificate and the verified kernel")
    if "neurons" in report:
        f = _neurons(report, facts, proofs, names, blocks)
        fails += f
        if not f:
            msgs.append("neurons valid: counts, hyperplane ranks, flags, twins and couplings recomputed")
    return fails, msgs


class _FreeBlock:
    def __init__(self, sides: tuple[bool, ...], vectors: list[list[flint.fmpq]], lines: list[bool],
                 complete: bool) -> None:
        self.sides, self.vectors, self.lines, self.complete = sides, vectors, lines, complete


def _free_blocks(facts: ConstrainedFacts, blocks: list[dict[str, Any]], gauge: list[int] | None, persistent: set,
                 rank_at: Callable[[tuple[bool, ...], int], int], fails: list[str]) -> list[_FreeBlock]:
    cn, k = facts.cn, facts.cn.n_params
    index = {name: j for j, name in enumerate(free_parameter_names(facts))}
    zero = flint.fmpq(0)
    out = []
    for b, blk in enumerate(blocks):
        where = f"kernel_basis[{b}]"
        active = blk["active"]
        if (active is None) != (not facts.ties) or (active is not None and len(active) != len(facts.ties)):
            fails.append(f"{where}.active: expected {'null' if not facts.ties else f'{len(facts.ties)} sides'}")
            out.append(_FreeBlock((), [], [], False))
            continue
        sides = tuple(True if t in persistent else bool(a) for t, a in zip(facts.ties, active or []))
        pattern = facts.resolution(sides) if facts.ties else None
        vectors, lines, ok = [], [], True
        for d, direc in enumerate(blk["directions"]):
            vec = [zero] * k
            for name, value in direc["delta"].items():
                if name not in index or not isinstance(value, str) or not INTEGER.fullmatch(value) or int(value) == 0:
                    fails.append(f"{where}.directions[{d}].delta[{name!r}]: not a parameter with a nonzero integer")
                    ok = False
                    break
                vec[index[name]] = flint.fmpq(int(value))
            if not ok:
                break
            if gauge is not None and any(vec[j] != zero for j in gauge):
                fails.append(f"{where}.directions[{d}]: moves a gauge parameter")
                ok = False
            elif any(v != zero for v in directional_derivative(cn, facts.X, vec, pattern)):
                fails.append(f"{where}.directions[{d}]: Gamma_free(s) delta != 0 (not a kernel vector)")
                ok = False
            line = bool(direc.get("line"))
            if ok and line and not (line_is_constant(cn, facts.X, vec)[0]
                                    and line_is_constant(cn, facts.X, [-v for v in vec])[0]):
                fails.append(f"{where}.directions[{d}].line: the outputs on X move along theta + t delta")
                ok = False
            vectors.append(vec)
            lines.append(line)
        if ok and vectors and flint.fmpq_mat(vectors).rank() != len(vectors):
            fails.append(f"{where}.directions: not independent")
            ok = False
        rank = blk["rank_gamma"]
        if ok and (gauge is None or k - facts.symmetry.symmetry_dim - len(vectors) != rank
                   or rank_at(sides, rank) < rank):
            fails.append(f"{where}.rank_gamma: {rank} is not proved (a rank mod p at least {rank}, and "
                         f"k - dim S_H - {len(vectors)} directions = {k - facts.symmetry.symmetry_dim - len(vectors)})")
            ok = False
        out.append(_FreeBlock(sides, vectors if ok else [], lines if ok else [], ok))
    return out


def _moved_by_certificate(facts: ConstrainedFacts, cert: dict[str, Any], key: str, gauge: list[int]) -> set[int]:
    part = cert.get(key)
    if not isinstance(part, dict):
        return set()
    k = facts.cn.n_params
    delta = [flint.fmpq(0)] * k
    single = key in ("dead_units", "slope_lines")  # one parameter moved: lowered (dead unit), raised (slope)
    if single and 0 <= int(part["parameter"]) < k:
        delta[int(part["parameter"])] = flint.fmpq(-1 if key == "dead_units" else 1)
    for j, v in part.get("delta", []) if not single else []:
        if 0 <= j < k:
            num, _, den = str(v).partition("/")
            delta[j] = flint.fmpq(int(num), int(den or 1))
    return {j for j, v in enumerate(into_chart(facts.symmetry, delta, gauge)) if v != 0}


def _free_parameters(facts: ConstrainedFacts, report: dict[str, Any], blocks: list[_FreeBlock], gauge: list[int],
                verified_parts: dict[str, bool], everyone: list[tuple[bool, ...]], fails: list[str]) -> None:
    names = free_parameter_names(facts)
    entries = report["parameters"]
    if [(e["index"], e["name"]) for e in entries] != list(enumerate(names)):
        fails.append("parameters: not one entry per free parameter in theta order with its name")
        return
    covered = {b.sides for b in blocks if b.complete}
    cert = report.get("certificate") or {}
    for j, e in enumerate(entries):
        where, cls = f"parameters[{j}]", e["class"]
        moved_any = any(b.vectors[d][j] != 0 for b in blocks for d in range(len(b.vectors)))
        if cls == "identifiable" and report.get("verdict") != "identifiable":
            fails.append(f"{where}: identifiable needs the identifiable verdict")
        elif cls == "not-identifiable":
            key = str(e.get("by", "")).replace("-", "_")
            if not verified_parts.get(key) or j not in _moved_by_certificate(facts, cert, key, gauge):
                fails.append(f"{where}: not-identifiable needs a verified certificate part {key!r} moving it")
        elif cls == "first-order-determined" and (moved_any or not everyone or not set(everyone) <= covered):
            fails.append(f"{where}: first-order-determined needs complete kernel blocks of every tie resolution, "
                         "none moving it")
        elif cls == "undetermined":
            w = e.get("witness")
            ok = isinstance(w, list) and len(w) == 2 and 0 <= w[0] < len(blocks) \
                and 0 <= w[1] < len(blocks[w[0]].vectors) and blocks[w[0]].vectors[w[1]][j] != 0
            if ok and e.get("line") and not blocks[w[0]].lines[w[1]]:
                ok = False
            if not ok:
                fails.append(f"{where}: undetermined needs a verified kernel direction (its witness) moving it")

def verify_free_explained(facts: ConstrainedFacts, report: dict[str, Any], *, persistent: set,
                          everyone: list[tuple[bool, ...]], rank_at: Callable[[tuple[bool, ...], int], int],
                          verified_parts: dict[str, bool]) -> tuple[list[str], list[str]]:
    """``(failures, messages)`` for the explain fields of a layer graph's report (module docstring).

    Parameters
    ----------
    facts : ConstrainedFacts
        The verifier's own facts on the case.
    report : dict
        The report, already validated by the schema.
    persistent : set of (sample, layer, unit)
        The persistent ties (their side changes nothing; taken active).
    everyone : list of tuple of bool
        Every tie resolution (persistent ties active); empty past the verifier's cap.
    rank_at : callable (sides, target) -> int
        The verifier's largest rank mod p of ``Gamma_free(s)`` over its primes.
    verified_parts : dict str -> bool
        The certificate parts verified (``dead_units``, ``constant_units``, ``slope_lines``, ``line``,
        ``submersion``, ``entering_submersion``).
    """
    fails: list[str] = []
    shown = [k for k in ("parameters", "units", "channels", "kernel_basis") if k in report]
    if not shown:
        return [], []
    gauge = None
    if "parameters" in report:
        gauge = [j for j, e in enumerate(report["parameters"]) if e.get("class") == "gauge"]
        if not gauge_spans(facts.symmetry, gauge):
            fails.append(f"parameters: the gauge ({len(gauge)} parameters) does not meet S_H (dim "
                         f"{facts.symmetry.symmetry_dim}) in a basis of its rows")
            gauge = None
    blocks = _free_blocks(facts, report.get("kernel_basis", []), gauge, persistent, rank_at, fails)
    if "parameters" in report and gauge is not None:
        _free_parameters(facts, report, blocks, gauge, verified_parts, everyone, fails)
    rows_of = check_units(facts, report, fails) if "units" in report else {}
    if "channels" in report:
        if "units" not in report or "parameters" not in report:
            fails.append("channels: checked against units and parameters, which the report lacks")
        elif not any(f.startswith("units") for f in fails):
            check_channels(facts, report, rows_of, fails)
    msgs = [] if fails else [f"explain fields valid: {', '.join(shown)} recomputed from the case"
                             + (f" ({sum(len(b.vectors) for b in blocks)} kernel directions checked exactly)"
                                if blocks else "")]
    return fails, msgs
