"""Re-check a rank certificate (``{"fixed_edges", "rank_gamma", "rank_a"}``) from the case alone.

Everything is recomputed from the case at an activation pattern the *caller*
derives (:mod:`exactident.verify.facts`: the ``>= 0`` pattern for the
``rank`` part, a tie resolution for each entry of the ``boundary`` part): the
images mod the certificate's primes, the entry bounds, the structural bounds
and (for ``source: local`` kernels) the kernel vectors themselves.  Every field
is read strictly (JSON ints, not strings or floats; unknown fields are not
verified, hence invalid) and every bound is checked, ``upper.bound`` included.
Each problem names the value found and the value claimed.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

import flint
import numpy as np

from exactident.errors import CaseFormatError, ExactIdentError, InvariantViolation
from exactident.io.rationals import format_int, short_text
from exactident.linalg import exact
from exactident.linalg.certified import has_full_column_rank, kernel_is_zero_mod, kernel_to_integer_columns
from exactident.linalg.modular import random_primes, rank_mod_p, require_prime
from exactident.model.activation import alpha_gram, n_paths
from exactident.model.fixed_edges import fixed_edges
from exactident.model.gamma import gamma_exact
from exactident.model.gamma_modular import gamma_entry_bound, gamma_mod_p, gram_entry_bound, gram_mod_p
from exactident.model.integer_forward import common_denominator, data_denominator, integer_forward
from exactident.ranks.bounds import pattern_rank_bound
from exactident.ranks.kernels import neuron_local_kernel
from exactident.verify.arith import BadField, need, unknown_fields

__all__ = ["CertifiedRanks", "check_rank_certificate", "verify_rank_certificate"]

_RANK_KEYS = ("fixed_edges", "rank_gamma", "rank_a")
_ONE_KEYS = ("rank", "shape", "lower", "upper")
_STRUCTURAL = ("shape", "paths", "patterns", "rank_a")
_KERNEL_SOURCES = ("local", "crt", "exact-nullspace")


@dataclass
class CertifiedRanks:
    """What a verified rank certificate proves: ``R_Gamma`` and, when certified, ``R_A = N_L rank alpha``."""

    rank_gamma: int | None
    rank_a: int | None


class _Reject(Exception):
    """One failed check of one matrix's certificate (the message names found and claimed values)."""


def _int(obj: Any, key: str, where: str) -> int:
    value = need(obj, key, int, where)
    if value < 0:
        raise BadField(f"{where}.{key}", f"expected a nonnegative int, found {value}")
    return value


def _json_int(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadField(where, f"expected int, found {type(value).__name__}")
    return value


def _check_one(what: str, c: Any, image, shape: tuple[int, int], avoid: int, bound_fn,
               structural: Mapping[str, int], exact_rank, local_kernel=None) -> int:
    """Check one matrix's certificate; returns the certified rank or raises :class:`_Reject`."""
    if not isinstance(c, dict):
        raise BadField(what, f"expected dict, found {type(c).__name__}")
    r = _int(c, "rank", what)
    got_shape = need(c, "shape", list, what)
    if got_shape != list(shape) or any(isinstance(v, bool) for v in got_shape):
        raise _Reject(f"{what}.shape: certificate says {got_shape}, the matrix is {list(shape)}")
    up = need(c, "upper", dict, what)
    kind = need(up, "kind", str, f"{what}.upper")
    extra = [k for k in c if k not in _ONE_KEYS]
    if extra:
        raise _Reject(f"{what}.{extra[0]}: unknown field, not verified")
    if kind == "exact-elimination":
        if "lower" in c or set(up) != {"kind"}:
            raise _Reject(f"{what}: an exact-elimination certificate has no other field, found "
                          f"{sorted(set(c) - {'rank', 'shape', 'upper'}) + sorted(set(up) - {'kind'})}")
        true = exact_rank()
        if true != r:
            raise _Reject(f"{what}.rank: certificate says {r}, exact elimination gives {true}")
        return r
    low = need(c, "lower", dict, what)
    for key in unknown_fields(low, ("prime", "rank_mod_p"), f"{what}.lower"):
        raise _Reject(key)
    p = _int(low, "prime", f"{what}.lower")
    claimed_mod_p = _int(low, "rank_mod_p", f"{what}.lower")
    try:
        require_prime(p, avoid)
    except InvariantViolation:
        raise _Reject(f"{what}.lower.prime: {p} is not a prime in [3, 2^31) dividing no denominator "
                      "of the data") from None
    rp = rank_mod_p(image(p), p)
    if claimed_mod_p != rp:
        raise _Reject(f"{what}.lower.rank_mod_p: certificate says {claimed_mod_p}, recomputed rank mod {p} is {rp}")
    if r != rp:
        raise _Reject(f"{what}.rank: certificate says {r}, but the certified lower bound (rank mod {p}) is {rp}")
    bound = _int(up, "bound", f"{what}.upper")
    if bound != r:
        raise _Reject(f"{what}.upper.bound: certificate says {bound}, the rank it must bound is {r}")
    if kind in _STRUCTURAL:
        for key in unknown_fields(up, ("kind", "bound"), f"{what}.upper"):
            raise _Reject(key)
        if kind not in structural:
            raise _Reject(f"{what}.upper.kind: {kind!r} is not an upper bound available for this matrix "
                          f"(available: {sorted(structural)})")
        if structural[kind] != bound:
            raise _Reject(f"{what}.upper.bound: certificate says {kind} bounds the rank by {bound}, "
                          f"recomputed bound is {structural[kind]}")
        return r
    if kind != "kernel":
        raise _Reject(f"{what}.upper.kind: unknown upper bound kind {kind!r}")
    source = need(up, "source", str, f"{what}.upper")
    if source not in _KERNEL_SOURCES:
        raise _Reject(f"{what}.upper.source: unknown kernel source {source!r}")
    n = shape[1]
    if source == "local":
        for key in unknown_fields(up, ("kind", "bound", "source", "nullity"), f"{what}.upper"):
            raise _Reject(key)
        nullity = _int(up, "nullity", f"{what}.upper")
        if local_kernel is None:
            raise _Reject(f"{what}.upper: no local kernel construction for this matrix")
        K = local_kernel()  # rebuilt from the case, then checked like any other K
        if len(K) != nullity:
            raise _Reject(f"{what}.upper.nullity: certificate says {nullity}, the local kernel rebuilt "
                          f"from the case has {len(K)} vectors")
    else:
        for key in unknown_fields(up, ("kind", "bound", "source", "kernel", "primes"), f"{what}.upper"):
            raise _Reject(key)
        K = _kernel_columns(need(up, "kernel", list, f"{what}.upper"), n, f"{what}.upper.kernel")
    if n - len(K) != r:
        raise _Reject(f"{what}.upper: the kernel has {len(K)} columns, so it bounds the rank by {n - len(K)}; "
                      f"the certificate says {r}")
    K_int = kernel_to_integer_columns(K)
    size = n * bound_fn() * max((abs(v) for col in K_int for v in col.values()), default=0)
    if "primes" in up:
        primes = [_json_int(q, f"{what}.upper.primes[{k}]")
                  for k, q in enumerate(need(up, "primes", list, f"{what}.upper"))]
        for q in primes:
            try:
                require_prime(q, avoid)
            except InvariantViolation:
                raise _Reject(f"{what}.upper.primes: {q} is not a prime in [3, 2^31) dividing no "
                              "denominator of the data") from None
    else:  # no primes given: draw our own, enough of them
        primes = []
        while prod(primes) <= size:
            primes += random_primes(1, avoid, random.Random(len(primes)), exclude=primes)
    if len(set(primes)) != len(primes) or not primes:
        raise _Reject(f"{what}.upper.primes: must be distinct and nonempty, found {primes}")
    if prod(primes) <= size:
        raise _Reject(f"{what}.upper.primes: their product {short_text(format_int(prod(primes)))} does not "
                      f"exceed the bound {short_text(format_int(size))} "
                      "on |M K|")
    if not has_full_column_rank(K_int, n, primes[0]):
        raise _Reject(f"{what}.upper.kernel: the kernel basis is not of full column rank {len(K)}")
    if not kernel_is_zero_mod(image, n, K_int, primes, avoid):
        raise _Reject(f"{what}.upper.kernel: M K is not 0 (the certificate claims it is)")
    return r


def _kernel_columns(cols: list, n: int, where: str) -> list[dict[int, flint.fmpq]]:
    from exactident.io.report_file import parse_report_rational

    K = []
    for c, col in enumerate(cols):
        if not isinstance(col, list):
            raise BadField(f"{where}[{c}]", f"expected list, found {type(col).__name__}")
        out: dict[int, flint.fmpq] = {}
        for k, entry in enumerate(col):
            at = f"{where}[{c}][{k}]"
            if not (isinstance(entry, list) and len(entry) == 2):
                raise BadField(at, "expected [index, 'p/q']")
            i = _json_int(entry[0], f"{at}[0]")
            try:
                v = parse_report_rational(entry[1], "", at)
            except CaseFormatError as exc:
                raise BadField(at, exc.message) from None
            if not 0 <= i < n or i in out:
                raise _Reject(f"{at}: index {i} is out of range [0, {n}) or repeated")
            out[i] = flint.fmpq(v.numerator, v.denominator)
        K.append(out)
    return K


def _fixed(net, entries: Any):
    if not isinstance(entries, list):
        raise BadField("fixed_edges", f"expected list, found {type(entries).__name__}")
    choice: dict[tuple[int, int], int] = {}
    for k, e in enumerate(entries):
        if not (isinstance(e, list) and len(e) == 3 and all(isinstance(x, int) and not isinstance(x, bool)
                                                            for x in e)):
            raise BadField(f"fixed_edges[{k}]", f"expected [layer, neuron, k] of ints, found {e!r}"[:120])
        if (e[0], e[1]) in choice:
            raise _Reject(f"fixed_edges[{k}]: neuron ({e[0]},{e[1]}) is listed twice")
        choice[(e[0], e[1])] = e[2]
    try:
        default = fixed_edges(net).s_max
        return fixed_edges(net, {key: k for key, k in choice.items() if default.get(key) != k})
    except ExactIdentError as exc:  # a zero weight or a neuron that does not exist
        raise _Reject(f"fixed_edges: {exc}") from None


def check_rank_certificate(case: Any, certificate: Any, pattern: Sequence[np.ndarray],
                           where: str = "certificate.rank") -> tuple[list[str], CertifiedRanks]:
    """Re-check a rank certificate at ``pattern``; problems (empty = valid) and the certified ranks.

    Parameters
    ----------
    case : Case
    certificate : dict
        ``{"fixed_edges": [[l, v, k], ...], "rank_gamma": {...}, "rank_a": {...}}``
        (``rank_a`` optional; it carries ``"rank_a": N_L * rank``).
    pattern : list of bool arrays ``(n, N_l)``
        The activation pattern the ranks are about, derived by the caller from the case.
    where : str
        JSON path of the certificate, for messages.

    Returns
    -------
    (problems, ranks) : (list of str, CertifiedRanks)
        ``ranks`` holds only what verified (``None`` otherwise).

    Raises
    ------
    BadField
        For a field of the wrong JSON type (bad input, exit 2).
    """
    problems: list[str] = []
    if not isinstance(certificate, dict):
        raise BadField(where, f"expected dict, found {type(certificate).__name__}")
    problems += unknown_fields(certificate, _RANK_KEYS, where)
    net, X = case.network, case.X
    # fixed_edges is optional: absent, the default choice (largest |weight|, lowest index) is used
    entries = need(certificate, "fixed_edges", list, where) if "fixed_edges" in certificate else []
    try:
        fixed = _fixed(net, entries)
    except BadField as exc:
        raise BadField(f"{where}.{exc.where}", str(exc)) from None
    except _Reject as exc:
        return problems + [f"{where}.{exc}"], CertifiedRanks(None, None)
    avoid = data_denominator(net, X)
    n, N_L, dim = len(X), net.widths[-1], net.dim
    rank_a = None
    if "rank_a" in certificate:
        c = need(certificate, "rank_a", dict, where)
        avoid_x = common_denominator(v for row in X for v in row)
        inner = {k: v for k, v in c.items() if k != "rank_a"}
        try:
            claimed = _int(c, "rank_a", f"{where}.rank_a")
            r = _check_one(f"{where}.rank_a", inner, lambda q: gram_mod_p(pattern, X, q, avoid_x), (n, n), avoid_x,
                           lambda: gram_entry_bound(X, net.widths),
                           {"shape": n, "paths": n_paths(net.widths), "patterns": pattern_rank_bound(pattern, X)},
                           lambda: exact.rank(alpha_gram(pattern, X)) if n else 0)
            if claimed != N_L * r:
                raise _Reject(f"{where}.rank_a.rank_a: certificate says {claimed}, but N_L rank alpha = "
                              f"{N_L} x {r} = {N_L * r}")
            rank_a = N_L * r
        except _Reject as exc:
            problems.append(str(exc))
    c = need(certificate, "rank_gamma", dict, where)
    structural = {"shape": min(n * N_L, dim)}
    if rank_a is not None:
        structural["rank_a"] = rank_a
    rank_gamma = None
    try:
        rank_gamma = _check_one(
            f"{where}.rank_gamma", c, lambda q: gamma_mod_p(net, X, pattern, fixed, q, avoid), (n * N_L, dim),
            avoid, lambda: gamma_entry_bound(net, X), structural,
            lambda: exact.rank(gamma_exact(net, X, integer_forward(net, X).Z(), pattern, fixed)),
            lambda: neuron_local_kernel(net, X, pattern, fixed))
    except _Reject as exc:
        problems.append(str(exc))
    if problems:
        return problems, CertifiedRanks(None, None)
    return problems, CertifiedRanks(rank_gamma, rank_a)


def verify_rank_certificate(case: Any, rank_certificate: Any,
                            pattern: Sequence[np.ndarray] | None = None) -> list[str]:
    """Re-check a rank certificate from the case alone; list of problems (empty = valid).

    ``pattern`` defaults to the exact ``>= 0`` activation pattern of the case.
    Malformed fields are problems here too (the CLI path, :func:`check_rank_certificate`,
    reports them as bad input instead).
    """
    if pattern is None:
        from exactident.verify.facts import CaseFacts

        pattern = CaseFacts.from_case(case).pattern({})
    try:
        return check_rank_certificate(case, rank_certificate, pattern, "rank")[0]
    except BadField as exc:
        return [f"{exc.where}: malformed certificate ({exc})"]
