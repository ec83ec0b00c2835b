"""Re-check a rank certificate (``{"fixed_edges", "rank_gamma", "rank_a"}``) from the case alone.

Everything is recomputed from the case at an activation pattern the *caller* derives
(:mod:`exactident.verify.facts`: the ``>= 0`` pattern for the ``rank`` part, a tie resolution for each entry of
the ``boundary`` part): the images mod the certificate's primes, the entry bounds, the structural bounds and, for
kernels the certificate names by construction (``source`` ``local``, ``semi-local``, ``shifted``, ``column-blocks``),
the kernel vectors.  Every field is read strictly (JSON ints, not strings or floats; unknown fields are not
verified, hence invalid), every bound is checked (``upper.bound`` too); each problem names found and claimed.

``rank_a`` comes in three forms: the Gram form (shape ``[n, n]``, a rank mod p of ``alpha alpha^T``); the
alpha-rows form (shape ``[n, |P|]``, ``lower.matrix`` ``alpha`` or ``gram`` of the rows ``lower.rows``: any
rows give a lower bound; its upper bound may also be ``pattern-rowspace``, :mod:`~.rank_rowspace`); and the
lower-bound form (``{"shape", "lower", "rank_a_lower"}``, no ``upper``): ``R_A >= rank_a_lower`` only.
``rank_gamma``'s ``left-kernel`` bound is proved by :mod:`~.rank_left`, its ``active-blocks`` bound recomputed by
:mod:`~.rank_blocks` (the only structural bound an interval part may end at).

``M K = 0`` is checked mod primes whose product exceeds the bound on ``|M K|``, at most :data:`MAX_VERIFY_PRIMES`;
past that, by one exact product over Q on the support of ``K`` if ``M`` has at most
:data:`~exactident.linalg.certified.MAX_EXACT_CHECK_ENTRIES` entries (else not verified); the engine uses
only kernels that fit (:func:`exactident.linalg.certified.kernel_is_checkable`); ``Gamma`` on row supports.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from math import prod
from typing import Any

import flint
import numpy as np

from exactident.errors import InvariantViolation
from exactident.io.limits import DEFAULT_WORK_LIMITS, WorkLimits
from exactident.io.rationals import format_int, short_text
from exactident.linalg.blas_modp import BLAS_PRIME_HI, rank_blas
from exactident.linalg.certified import (
    MAX_CHECK_PRIMES,
    MAX_EXACT_CHECK_ENTRIES,
    has_full_column_rank,
    kernel_to_integer_columns,
)
from exactident.linalg.modular import random_primes, rank_mod_p, require_prime
from exactident.model.activation import alpha_exact, alpha_gram, n_paths
from exactident.model.gamma import gamma_exact
from exactident.model.gamma_modular import (
    ModularData,
    Scaled,
    alpha_mod_p,
    gamma_entry_bound,
    gamma_mod_p,
    gamma_sketch_mod_p,
    gram_entry_bound,
    gram_mod_p,
)
from exactident.model.gamma_row_sketch import gamma_live_row_sketch_mod_p
from exactident.model.integer_forward import data_denominator, integer_forward
from exactident.ranks.bounds import alpha_column_kernel, pattern_rank_bound
from exactident.ranks.kernels import neuron_local_kernel, semi_local_kernel
from exactident.ranks.shifted import structural_kernel
from exactident.verify.alpha_image import MAX_ALPHA_ENTRIES, alpha_rows_image
from exactident.verify.arith import BadField, capped_exact_rank, need, unknown_fields
from exactident.verify.rank_blocks import active_blocks_bound
from exactident.verify.rank_kernel import (
    _fixed,
    _json_int,
    _kernel_columns,
    _product_is_zero,
    _Reject,
    _structural,
    _zero_mod,
    sketch_claim_holds,
    tall_claim_holds,
)
from exactident.verify.rank_left import left_kernel_bound
from exactident.verify.rank_rowspace import rowspace_bound
from exactident.verify.rank_rules import own_ranks_reach
from exactident.verify.row_support import EXACT_ABOVE_PRIMES, EXACT_SUPPORT_SAMPLES, GammaRowSupport

__all__ = ["MAX_ALPHA_ENTRIES", "MAX_VERIFY_PRIMES", "CertifiedRanks", "check_rank_certificate",
           "verify_rank_certificate"]

#: Most primes the verifier uses for one check ``M K = 0`` (the engine's cap for its own checks).
MAX_VERIFY_PRIMES = MAX_CHECK_PRIMES


_RANK_KEYS = ("fixed_edges", "rank_gamma", "rank_a")
_ONE_KEYS = ("rank", "shape", "lower", "upper")
_LOWER_ONLY_KEYS = ("shape", "lower", "rank_a_lower")
_STRUCTURAL = ("shape", "paths", "patterns", "rank_a", "pattern-rowspace", "left-kernel", "active-blocks")
_INTERVAL_STRUCTURAL = ("active-blocks",)  # the structural bounds an interval part may end at
_EXPLICIT_KERNELS = ("crt", "exact-nullspace", "dixon")
#: The verifier's own seed for the column sketch of a wide ``Gamma`` (never taken from a report).
_SKETCH_SEED = 20_260_617


@dataclass
class CertifiedRanks:
    """What a verified rank certificate proves: ``R_Gamma``, ``R_A = N_L rank alpha`` when certified,
    and a certified lower bound on ``R_A`` (``R_A`` itself when it is certified)."""

    rank_gamma: int | None
    rank_a: int | None
    rank_a_lower: int | None = None
    #: ``(lo, hi)`` when the ``rank_gamma`` part is the interval form (``rank_gamma`` is then None).
    rank_gamma_interval: tuple[int, int] | None = None
    #: With an interval: ``reaches(v)`` is True when the verifier's own ranks mod its primes reach ``v``
    #: (so ``R_Gamma >= v``); used for a Monte Carlo value above the lower end.
    reaches: Callable[[int], bool] | None = None


@dataclass
class _Matrix:
    """One matrix whose rank a part claims, as the verifier rebuilds it from the case."""

    shape: tuple[int, int]
    avoid: int
    image: Callable[[int], np.ndarray]      # M mod q
    entry_bound: Callable[[], int]          # bound on the entries of D M (D clears M's denominators)
    structural: Mapping[str, int | Callable[[], int]]  # a callable is recomputed only when named
    max_words: int                          # cap on an exact elimination (WorkLimits.max_exact_entries)
    exact_matrix: Callable[[], Any]         # M over Q (fmpq_mat or fmpz_mat): M K = 0 past the prime cap
    kernels: Mapping[str, Callable[[], list]] = field(default_factory=dict)  # constructions, by source
    lower_keys: tuple[str, ...] = ("prime", "rank_mod_p")
    lower_image: Callable[[dict, int, str], np.ndarray] | None = None  # what the lower bound is a rank of
    sketch: Callable[[int, int, int], np.ndarray] | None = None  # (p, k, seed) -> M S mod p, M never built
    live_sketch: Callable[[int, int], tuple[np.ndarray, np.ndarray]] | None = None  # rank_kernel.sketch_claim_holds
    # (q, sparse int columns) -> M K = 0 mod q, with .support(col) and .exactly_zero(cols): GammaRowSupport
    columns: Any = None


def _int(obj: Any, key: str, where: str) -> int:
    value = need(obj, key, int, where)
    if value < 0:
        raise BadField(f"{where}.{key}", f"expected a nonnegative int, found {value}")
    return value


def _prime(p: int, avoid: int, where: str) -> int:
    try:
        return require_prime(p, avoid)
    except InvariantViolation:
        raise _Reject(f"{where}: {p} is not a prime in [3, 2^31) dividing no denominator of the data") from None


def _shape(what: str, c: dict, shape: tuple[int, int]) -> None:
    got = need(c, "shape", list, what)
    if got != list(shape) or any(isinstance(v, bool) for v in got):
        raise _Reject(f"{what}.shape: certificate says {got}, the matrix is {list(shape)}")


def _lower(what: str, c: dict, m: _Matrix) -> tuple[int, int]:
    """The rank mod p a ``lower`` field claims, recomputed (FLINT) from the case; returns it and p."""
    low = need(c, "lower", dict, what)
    for key in unknown_fields(low, m.lower_keys, f"{what}.lower"):
        raise _Reject(key)
    p = _prime(_int(low, "prime", f"{what}.lower"), m.avoid, f"{what}.lower.prime")
    claimed = _int(low, "rank_mod_p", f"{what}.lower")
    k = claimed + 16
    if m.sketch is not None and m.lower_image is None and p < BLAS_PRIME_HI and m.shape[1] > k + k // 8:
        # Wide (e.g. MNIST's first layer): rank_p(M S) <= rank_p(M) for any S, so a sketch of k columns
        # (our own seed, nothing from the report) reaching the claim proves it as a lower bound without
        # building M (memory rows x k, not rows x dim); above the claim, the claim is wrong; below
        # (S unlucky, or the claim is false), M is built whole as before.
        r_sketch = rank_blas(m.sketch(p, k, _SKETCH_SEED), p)
        if r_sketch == claimed:
            return claimed, p
        if r_sketch > claimed:
            raise _Reject(f"{what}.lower.rank_mod_p: certificate says {claimed}, recomputed rank mod {p} is at "
                          f"least {r_sketch}")
    if m.live_sketch is not None and m.lower_image is None and p < BLAS_PRIME_HI and \
            sketch_claim_holds(what, m.shape, m.live_sketch, p, claimed, _SKETCH_SEED):
        return claimed, p  # M never built (when the sketch falls short, M is built below)
    image = m.lower_image(low, p, f"{what}.lower") if m.lower_image else m.image(p)
    if m.lower_image is None and p < BLAS_PRIME_HI and tall_claim_holds(what, image, p, claimed, _SKETCH_SEED):
        return claimed, p
    # below 2**21 (the engine's primes): float64 BLAS elimination on the int64 residues, no Python ints
    # (linalg.blas_modp, tested against FLINT's nmod_mat); above, FLINT
    rp = rank_blas(image, p) if p < BLAS_PRIME_HI else rank_mod_p(image, p)
    if claimed != rp:
        raise _Reject(f"{what}.lower.rank_mod_p: certificate says {claimed}, recomputed rank mod {p} is {rp}")
    return rp, p


def _check_one(what: str, c: Any, m: _Matrix) -> int:
    """Check one matrix's certificate; returns the certified rank or raises :class:`_Reject`."""
    if not isinstance(c, dict):
        raise BadField(what, f"expected dict, found {type(c).__name__}")
    r = _int(c, "rank", what)
    _shape(what, c, m.shape)
    up = need(c, "upper", dict, what)
    kind = need(up, "kind", str, f"{what}.upper")
    extra = [k for k in c if k not in _ONE_KEYS]
    if extra:
        raise _Reject(f"{what}.{extra[0]}: unknown field, not verified")
    if kind == "exact-elimination":
        if "lower" in c or set(up) != {"kind"}:
            raise _Reject(f"{what}: an exact-elimination certificate has no other field, found "
                          f"{sorted(set(c) - {'rank', 'shape', 'upper'}) + sorted(set(up) - {'kind'})}")
        true, past = capped_exact_rank(m.shape, m.exact_matrix, m.max_words, f"{what}.upper")
        if true != r:
            raise _Reject(past or f"{what}.rank: certificate says {r}, exact elimination gives {true}")
        return r
    rp, p = _lower(what, c, m)
    if r != rp:
        raise _Reject(f"{what}.rank: certificate says {r}, but the certified lower bound (rank mod {p}) is {rp}")
    bound = _int(up, "bound", f"{what}.upper")
    if bound != r:
        raise _Reject(f"{what}.upper.bound: certificate says {bound}, the rank it must bound is {r}")
    if kind in _STRUCTURAL:
        _structural(what, kind, up, m, bound)
        return r
    if kind != "kernel":
        raise _Reject(f"{what}.upper.kind: unknown upper bound kind {kind!r}")
    _kernel_bound(what, up, m, r)
    return r


def _check_interval(what: str, c: dict, m: _Matrix) -> tuple[int, int]:
    """The interval form (``shape``, ``lower``, ``upper`` kernel or ``_INTERVAL_STRUCTURAL``): ``lo <= rank <= hi``."""
    extra = [k for k in c if k not in ("shape", "lower", "upper")]
    if extra:
        raise _Reject(f"{what}.{extra[0]}: unknown field, not verified")
    _shape(what, c, m.shape)
    up = need(c, "upper", dict, what)
    kind = need(up, "kind", str, f"{what}.upper")
    if kind != "kernel" and kind not in _INTERVAL_STRUCTURAL:
        raise _Reject(f"{what}.upper.kind: an interval is bounded above by kernel vectors or "
                      f"{', '.join(_INTERVAL_STRUCTURAL)} only, found {kind!r}")
    lo, _p = _lower(what, c, m)
    hi = _int(up, "bound", f"{what}.upper")
    if hi <= lo:
        raise _Reject(f"{what}: an interval part needs lower {lo} < upper {hi} (equal bounds use the exact form)")
    if kind != "kernel":
        _structural(what, kind, up, m, hi)
        return lo, hi
    if not _kernel_bound(what, up, m, hi):
        raise _Reject(f"{what}.upper: an interval part needs at least one kernel vector")
    return lo, hi


def _kernel_bound(what: str, up: dict, m: _Matrix, bound: int) -> int:
    """The kernel named by ``up`` proves ``rank <= bound`` (its size ``cols - bound``, ``M K = 0``); its size."""
    K = _kernel_of(what, up, m)
    if m.shape[1] - len(K) != bound:
        raise _Reject(f"{what}.upper: the kernel has {len(K)} columns, so it bounds the rank by "
                      f"{m.shape[1] - len(K)}; the certificate says {bound}")
    if K:
        _kernel_is_zero(what, up, m, K)
    return len(K)


def _kernel_of(what: str, up: dict, m: _Matrix) -> list:
    """The kernel vectors an ``upper`` part names: explicit columns, or a construction rebuilt from the case."""
    source = need(up, "source", str, f"{what}.upper")
    n = m.shape[1]
    if source in _EXPLICIT_KERNELS:
        for key in unknown_fields(up, ("kind", "bound", "source", "kernel", "primes"), f"{what}.upper"):
            raise _Reject(key)
        K = _kernel_columns(need(up, "kernel", list, f"{what}.upper"), n, f"{what}.upper.kernel")
    else:
        if source not in m.kernels:
            raise _Reject(f"{what}.upper.source: {source!r} is not a kernel construction for this matrix "
                          f"(available: {sorted(m.kernels) + list(_EXPLICIT_KERNELS)})")
        for key in unknown_fields(up, ("kind", "bound", "source", "nullity"), f"{what}.upper"):
            raise _Reject(key)
        nullity = _int(up, "nullity", f"{what}.upper")
        K = m.kernels[source]()  # rebuilt from the case, then checked like any other K
        if len(K) != nullity:
            raise _Reject(f"{what}.upper.nullity: certificate says {nullity}, the {source} kernel rebuilt "
                          f"from the case has {len(K)} vectors")
    return K


def _kernel_is_zero(what: str, up: dict, m: _Matrix, K: list) -> None:
    """``K`` of full column rank and ``M K = 0``: mod enough primes (at most the cap), or exactly."""
    rows, n = m.shape
    K_int = kernel_to_integer_columns(K)
    size = n * (entry_bound := m.entry_bound()) * max((abs(v) for col in K_int for v in col.values()), default=0)
    exact_check = False
    if "primes" in up:
        given = need(up, "primes", list, f"{what}.upper")
        if len(given) > MAX_VERIFY_PRIMES:
            raise _Reject(f"{what}.upper.primes: {len(given)} primes, more than the verifier checks "
                          f"({MAX_VERIFY_PRIMES})")
        primes = [_prime(_json_int(q, f"{what}.upper.primes[{k}]"), m.avoid, f"{what}.upper.primes")
                  for k, q in enumerate(given)]
        if len(set(primes)) != len(primes) or not primes:
            raise _Reject(f"{what}.upper.primes: must be distinct and nonempty, found {primes}")
        if prod(primes) <= size:
            raise _Reject(f"{what}.upper.primes: their product {short_text(format_int(prod(primes)))} does not "
                          f"exceed the bound {short_text(format_int(size))} on |M K|")
    else:  # no primes given: our own, each above 2^30, enough of them; past the cap one exact product
        count = size.bit_length() // 30 + 1
        exact_check = count > MAX_VERIFY_PRIMES
        if exact_check and rows * n > MAX_EXACT_CHECK_ENTRIES:
            raise _Reject(f"{what}.upper: M K = 0 would need {count} primes (|M K| < 2^{size.bit_length()}), "
                          f"more than {MAX_VERIFY_PRIMES}, and M has {rows} x {n} entries, more than "
                          f"{MAX_EXACT_CHECK_ENTRIES} for an exact product: not verified")
        primes = random_primes(1 if exact_check else count, m.avoid, random.Random(0))
    if not has_full_column_rank(K_int, n, primes[0]):
        raise _Reject(f"{what}.upper.kernel: the kernel basis is not of full column rank {len(K)}")
    if m.columns is not None and "primes" not in up:
        # each column on its row support: exactly in integers when its bound needs more than EXACT_ABOVE_PRIMES
        # primes or its support is at most EXACT_SUPPORT_SAMPLES samples (one integer block of Gamma costs less
        # than its primes), else mod its own count of primes
        from exactident.verify.rank_kernel import zero_by_columns

        counts = [(n * entry_bound * max((abs(v) for v in col.values()), default=0)).bit_length() // 30 + 1
                  for col in K_int]
        exact = [k > EXACT_ABOVE_PRIMES or int(m.columns.support(col).sum()) <= EXACT_SUPPORT_SAMPLES
                 for col, k in zip(K_int, counts)]
        count = max((k for k, e in zip(counts, exact) if not e), default=1)
        zero = m.columns.exactly_zero([col for col, e in zip(K_int, exact) if e]) and \
            zero_by_columns(m.columns, [col for col, e in zip(K_int, exact) if not e],
                            random_primes(count, m.avoid, random.Random(0)), n * entry_bound)
    else:
        zero = _product_is_zero(m.exact_matrix(), K) if exact_check else _zero_mod(m.image, K_int, primes)
    if not zero:
        raise _Reject(f"{what}.upper.kernel: M K is not 0 (the certificate claims it is)")


def _rowspace(where: str, pattern, X, widths) -> int:
    value = rowspace_bound(pattern, X, widths)
    if value is None:
        raise _Reject(f"{where}.upper: a pattern-rowspace bound past the engine's size cap: not verified")
    return value


def _check_rank_a(where: str, c: Any, pattern, X, widths, max_words: int,
                  Xs: Scaled | None = None) -> tuple[int | None, int]:
    """The ``rank_a`` part: (certified ``R_A`` or None, certified lower bound on ``R_A``).

    ``Xs``: ``X`` scaled to integers (:class:`~exactident.model.gamma_modular.Scaled`), if already built.
    """
    if not isinstance(c, dict):
        raise BadField(where, f"expected dict, found {type(c).__name__}")
    n, N_L, P = len(X), widths[-1], n_paths(widths)
    if Xs is None:
        Xs = Scaled([v for row in X for v in row], (n, widths[0]))  # also the Gram image's scaling (all rows)
    avoid_x = Xs.den  # the lcm of the denominators of X
    low = c.get("lower")
    alpha_rows = isinstance(low, dict) and "matrix" in low
    if "rank_a_lower" in c or (alpha_rows and "upper" not in c):  # the lower-bound form
        for key in unknown_fields(c, _LOWER_ONLY_KEYS, where):
            raise _Reject(key)
        claimed = _int(c, "rank_a_lower", where)
    else:
        claimed = _int(c, "rank_a", where)
    if alpha_rows:
        x_bound = max((abs(int(v)) for v in Xs.ints.ravel()), default=0)

        def alpha_image(q: int) -> np.ndarray:
            if MAX_ALPHA_ENTRIES // max(n, 1) + 1 < P:  # as the engine: no column blocks past this size
                raise _Reject(f"{where}.upper: alpha has {n} x {P} entries, more than {MAX_ALPHA_ENTRIES} to reduce "
                              "mod p for the kernel check: not verified")
            return alpha_mod_p(pattern, Xs.mod(q), q)

        m = _Matrix((n, P), avoid_x, alpha_image, lambda: max(x_bound, Xs.den),
                    {"shape": n, "paths": P, "patterns": lambda: pattern_rank_bound(pattern, X),
                     "pattern-rowspace": lambda: _rowspace(where, pattern, X, widths)},
                    max_words, lambda: alpha_exact(pattern, X),
                    {"column-blocks": lambda: alpha_column_kernel(pattern, X, widths)},
                    ("prime", "rank_mod_p", "matrix", "rows"), alpha_rows_image(pattern, X, Xs, avoid_x, P))
    else:
        m = _Matrix((n, n), avoid_x, lambda q: gram_mod_p(pattern, X, q, avoid_x), lambda: gram_entry_bound(X, widths),
                    {"shape": n, "paths": P, "patterns": lambda: pattern_rank_bound(pattern, X)},
                    max_words, lambda: alpha_gram(pattern, X))
    if "rank_a_lower" in c:
        _shape(where, c, m.shape)
        r = _lower(where, c, m)[0]
        if claimed != N_L * r:
            raise _Reject(f"{where}.rank_a_lower: certificate says {claimed}, but N_L rank_p alpha = "
                          f"{N_L} x {r} = {N_L * r}")
        return None, claimed
    r = _check_one(where, {k: v for k, v in c.items() if k != "rank_a"}, m)
    if claimed != N_L * r:
        raise _Reject(f"{where}.rank_a: certificate says {claimed}, but N_L rank alpha = {N_L} x {r} = {N_L * r}")
    return N_L * r, N_L * r


def check_rank_certificate(case: Any, certificate: Any, pattern: Sequence[np.ndarray],
                           where: str = "certificate.rank",
                           limits: WorkLimits = DEFAULT_WORK_LIMITS) -> tuple[list[str], CertifiedRanks]:
    """Re-check a rank certificate at ``pattern``; problems (empty = valid) and the certified ranks.

    Parameters
    ----------
    case : Case
    certificate : dict
        ``{"fixed_edges": [[l, v, k], ...], "rank_gamma": {...}, "rank_a": {...}}``
        (``rank_a`` optional; it carries ``"rank_a": N_L * rank``, or in the
        lower-bound form ``"rank_a_lower": N_L * rank_mod_p``).
    pattern : list of bool arrays ``(n, N_l)``
        The activation pattern the ranks are about, derived by the caller from the case.
    where : str
        JSON path of the certificate, for messages.
    limits : WorkLimits
        Caps on the verifier's own work: an ``exact-elimination`` bound past ``max_exact_entries`` is a
        problem saying "not verified" (never a hang).

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
    data: list[ModularData] = []  # the case's data scaled to integers once, for every prime and check

    def case_data() -> ModularData:
        data[:] = data or [ModularData(net, X)]
        return data[0]

    rank_a = rank_a_lower = None
    if "rank_a" in certificate:
        try:
            rank_a, rank_a_lower = _check_rank_a(f"{where}.rank_a", certificate["rank_a"], pattern, X, net.widths,
                                                 limits.max_exact_entries, case_data().X)
        except _Reject as exc:
            problems.append(str(exc))
    c = need(certificate, "rank_gamma", dict, where)
    structural: dict[str, Any] = {"shape": min(n * N_L, dim),  # left-kernel: verify/rank_left.py
                                  "left-kernel": lambda: left_kernel_bound(net, X, pattern, fixed),
                                  "active-blocks": lambda: active_blocks_bound(net, X, pattern, fixed)}
    if rank_a is not None:
        structural["rank_a"] = rank_a

    def image(q: int) -> np.ndarray:
        return gamma_mod_p(net, X, pattern, fixed, q, avoid, case_data())

    def sketch(q: int, k: int, seed: int) -> np.ndarray:
        return gamma_sketch_mod_p(net, X, pattern, fixed, q, k, seed, avoid, case_data())

    def gamma() -> flint.fmpq_mat:
        return gamma_exact(net, X, integer_forward(net, X).Z(), pattern, fixed)

    m = _Matrix((n * N_L, dim), avoid, image, lambda: gamma_entry_bound(net, X), structural,
                limits.max_exact_entries, gamma,
                {"local": lambda: neuron_local_kernel(net, X, pattern, fixed),
                 "semi-local": lambda: semi_local_kernel(net, X, pattern, fixed),
                 "shifted": lambda: structural_kernel(net, X, pattern, fixed, data=case_data())},
                sketch=sketch, columns=GammaRowSupport(net, X, pattern, fixed, avoid, data),
                live_sketch=(lambda q, seed: gamma_live_row_sketch_mod_p(net, X, pattern, fixed, q, seed, avoid,
                                                                         case_data())) if net.is_plain() else None)
    rank_gamma = interval = None
    try:
        if "rank" not in c and "upper" in c and "lower" in c:
            interval = _check_interval(f"{where}.rank_gamma", c, m)
        else:
            rank_gamma = _check_one(f"{where}.rank_gamma", c, m)
    except _Reject as exc:
        problems.append(str(exc))
    if problems:
        return problems, CertifiedRanks(None, None)
    return problems, CertifiedRanks(rank_gamma, rank_a, rank_a_lower, interval,
                                    own_ranks_reach(m.shape, m.avoid, m.image, m.sketch, _SKETCH_SEED)
                                    if interval is not None else None)


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
