"""Reading a rank certificate's parts: its kernel columns (strictly), ``M K = 0`` mod primes or over Q,
and which bound closed each rank (:func:`closed_by`); the verifier's own ranks of ``Gamma`` mod its primes
(:func:`own_rank_reaches`, for the rule against weaker verdicts).

Helpers of :mod:`exactident.verify.rank` (kept apart for size), with the reading of ``fixed_edges``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import flint
import numpy as np

from exactident.errors import CaseFormatError, ExactIdentError
from exactident.model.fixed_edges import fixed_edges
from exactident.model.gamma_modular import ModularData, gamma_mod_p, gamma_sketch_mod_p
from exactident.model.integer_forward import data_denominator
from exactident.verify.arith import BadField, unknown_fields
from exactident.verify.rank_rules import own_ranks_reach
from exactident.verify.row_support import (
    EXACT_SUPPORT_SAMPLES,
    GammaRowSupport,
    gamma_columns_mod_p,
    gamma_product_is_zero,
)

__all__ = ["EXACT_SUPPORT_SAMPLES", "OWN_SKETCH_SEED", "GammaRowSupport", "closed_by", "gamma_columns_mod_p",
           "gamma_product_is_zero", "own_rank_reaches", "sketch_claim_holds", "tall_claim_holds", "tall_lower",
           "zero_by_columns"]


class _Reject(Exception):
    """One failed check of one matrix's certificate (the message names found and claimed values)."""


def _json_int(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadField(where, f"expected int, found {type(value).__name__}")
    return value


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


def _zero_mod(image: Callable[[int], np.ndarray], K_int: list[dict[int, int]], primes: list[int]) -> bool:
    """``M K = 0`` mod every prime, column by column on the support of ``K`` (cost: rows x nonzeros)."""
    for q in primes:
        Mq = np.asarray(image(q), dtype=np.int64)
        for col in K_int:
            if not col:
                continue
            idx = np.fromiter(col.keys(), dtype=np.int64, count=len(col))
            vals = np.array([v % q for v in col.values()], dtype=np.int64)
            # residues below 2^31: each product below 2^62, reduced before the sum
            if (((Mq[:, idx] * vals) % q).sum(axis=1) % q).any():
                return False
    return True


def _product_is_zero(M: Any, K: list[dict[int, flint.fmpq]]) -> bool:
    """``M K = 0`` over Q, column by column on the support of ``K`` (cost: rows x nonzeros of ``K``)."""
    if not K:
        return True
    A = np.array(M.table(), dtype=object).reshape(M.nrows(), M.ncols())
    for col in K:
        idx = sorted(col)
        if idx and any(v != 0 for v in A[:, idx].dot(np.array([col[i] for i in idx], dtype=object))):
            return False
    return True


def closed_by(rank_part: dict) -> dict[str, str]:
    """``kind`` or ``kind:source`` of each matrix's upper bound; ``lower-bound`` for a ``rank_a`` without one."""
    out = {}
    for key in ("rank_gamma", "rank_a"):
        part = rank_part.get(key)
        if not isinstance(part, dict):
            continue
        up = part.get("upper")
        if isinstance(up, dict):
            out[key] = f"{up.get('kind')}:{up['source']}" if "source" in up else str(up.get("kind"))
        elif "upper" not in part:
            out[key] = "lower-bound"
    return out


def _fixed(net, entries: Any):
    """The fixed edges a certificate names (``[[l, v, k], ...]``, the default choice elsewhere), checked."""
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


def tall_lower(image: np.ndarray, p: int, claimed: int, seed: int) -> int:
    """A lower bound on ``rank_p`` of a very tall ``image`` (``m > 2 n + 64``) from fewer than ``m`` rows.

    First the rank of one sparse sketch ``R A`` (:func:`~exactident.linalg.blas_modp.sketch_rows_sparse`, ``n' + 16``
    rows, ``n'`` the columns nonzero mod p); short of ``claimed``, the rank ``r1`` of ``n + 16`` rows, stacked (when
    below ``claimed``) with ``R A_rest``, ``R`` random ``(claimed - r1 + 16) x (m - n - 16)``. Each (own ``seed``) has
    rows combining ``A``'s: a lower bound whatever ``R`` is, ``rank_p(A)`` unless ``R`` is unlucky (then all rows).
    """
    from exactident.linalg.blas_modp import nonzero_columns, rank_blas, sketch_rows, sketch_rows_sparse, symmetric_rows

    m, n = image.shape
    live = nonzero_columns(image)  # a zero column mod p adds nothing to rank_p
    r0 = rank_blas(sketch_rows_sparse(image, len(live) + 16, p, seed, cols=live), p) if claimed <= len(live) else -1
    if r0 >= claimed:
        return r0
    rng = random.Random(seed)
    rows = sorted(rng.sample(range(m), n + 16))
    r1 = rank_blas(symmetric_rows(image, rows, p, np.empty((n + 16, n))), p)
    if r1 >= claimed:
        return r1
    k = claimed - r1 + 16
    stack = np.empty((n + 16 + k, n))
    symmetric_rows(image, rows, p, stack[:n + 16])
    symmetric_rows(sketch_rows(image, k, p, rng, rows=np.setdiff1d(np.arange(m), rows)), range(k), p, stack[n + 16:])
    return rank_blas(stack, p)


def tall_claim_holds(what: str, image: np.ndarray, p: int, claimed: int, seed: int) -> bool:
    """Does :func:`tall_lower` prove ``rank_p(image) >= claimed`` (a very tall image: rows above ``2 cols + 64``)?

    False when it is not very tall or falls short (the caller eliminates all rows); raises ``_Reject`` when
    it proves the rank mod p above ``claimed`` (named exactly at the column count).
    """
    from exactident.linalg.montecarlo import very_tall

    if not very_tall(*image.shape):
        return False
    r_rows = tall_lower(image, p, claimed, seed)
    _not_above(what, p, claimed, r_rows, min(image.shape))
    return r_rows == claimed


def sketch_claim_holds(what: str, shape: tuple[int, int], live_sketch: Callable[[int, int], tuple[np.ndarray, Any]],
                       p: int, claimed: int, seed: int) -> bool:
    """:func:`tall_lower`'s first step, its sketch from ``live_sketch(p, seed)`` (``(live, R M[:, live] mod p)``,
    :func:`exactident.model.gamma_row_sketch.gamma_live_row_sketch_mod_p`: the matrix never built).

    False when ``shape`` is not very tall or the sketch falls short (the caller builds the matrix); raises
    ``_Reject`` when the sketch's rank, a lower bound on ``rank_p``, is above ``claimed``.
    """
    from exactident.linalg.blas_modp import rank_blas
    from exactident.linalg.montecarlo import very_tall

    if not very_tall(*shape):
        return False
    live, S = live_sketch(p, seed)
    r = rank_blas(S, p) if claimed <= len(live) else -1
    _not_above(what, p, claimed, r, min(shape))
    return r == claimed


def _not_above(what: str, p: int, claimed: int, r: int, most: int) -> None:
    if r > claimed:
        exactly = "" if r == most else "at least "
        raise _Reject(f"{what}.lower.rank_mod_p: certificate says {claimed}, recomputed rank mod {p} is {exactly}{r}")


def zero_by_columns(product_is_zero: Callable[[int, list[dict[int, int]]], bool], K_int: list[dict[int, int]],
                    primes: list[int], row_bound: int) -> bool:
    """``M K = 0``, column ``K_c`` mod its own first primes (``product_is_zero(q, cols)``: ``M K_c = 0 mod q``).

    ``row_bound`` bounds the sum of the absolute values of a row of ``D M`` (``ncols`` times its entry
    bound), so ``|D M K_c| <= row_bound max |K_c|``, and column ``c`` is checked mod the first
    ``bits // 30 + 1`` of ``primes`` (each above ``2^30``: their product exceeds that bound); False when
    ``primes`` has fewer than some column needs.
    """
    counts = [(row_bound * max((abs(v) for v in col.values()), default=0)).bit_length() // 30 + 1 for col in K_int]
    if max(counts, default=0) > len(primes):
        return False
    for t, q in enumerate(primes):
        todo = [col for col, k in zip(K_int, counts) if k > t and col]
        if not todo:
            break
        if not product_is_zero(q, todo):
            return False
    return True


def _structural(what: str, kind: str, up: dict, m: Any, bound: int) -> None:
    """A structural ``upper`` part: no other field, and the bound recomputed from the case equals ``bound``."""
    for key in unknown_fields(up, ("kind", "bound"), f"{what}.upper"):
        raise _Reject(key)
    if kind not in m.structural:
        raise _Reject(f"{what}.upper.kind: {kind!r} is not an upper bound available for this matrix "
                      f"(available: {sorted(m.structural)})")
    value = m.structural[kind]
    value = value() if callable(value) else value
    if value != bound:
        raise _Reject(f"{what}.upper.bound: certificate says {kind} bounds the rank by {bound}, "
                      f"recomputed bound is {value}")


#: The verifier's own seed for the sketch of a wide ``Gamma`` (:func:`own_rank_reaches`).
OWN_SKETCH_SEED = 20_261_207


def own_rank_reaches(case: Any, pattern: Sequence[np.ndarray], target: int) -> bool:
    """The verifier's own ranks of ``Gamma`` at ``pattern`` mod its primes reach ``target`` (then ``R_Gamma >=
    target``).

    No certificate is read: ``Gamma`` mod the verifier's own primes
    (:func:`exactident.verify.rank_rules.own_ranks_reach`, default fixed edges).  False proves nothing
    (a rank mod p may fall below the rank).  Used by the rule against weaker verdicts
    (:mod:`exactident.verify.verdict`).
    """
    net, X = case.network, case.X
    if len(X) * net.widths[-1] < target or net.dim < target:
        return False  # R_Gamma <= min(rows, dim): no prime can show more
    fixed = _fixed(net, [])
    avoid = data_denominator(net, X)
    data = ModularData(net, X)
    return own_ranks_reach(
        (len(X) * net.widths[-1], net.dim), avoid, lambda q: gamma_mod_p(net, X, pattern, fixed, q, avoid, data),
        lambda q, k, seed: gamma_sketch_mod_p(net, X, pattern, fixed, q, k, seed, avoid, data), OWN_SKETCH_SEED)(target)
