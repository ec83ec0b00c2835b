"""Reading a rank certificate's parts: its kernel columns (strictly), ``M K = 0`` mod primes or over Q,
and which bound closed each rank (:func:`closed_by`); the verifier's own ranks of ``Gamma`` mod its primes
(:func:`own_rank_reaches`, for the rule against weaker verdicts).

Helpers of :mod:`exactident.verify.rank` (kept apart for size), with the reading of ``fixed_edges``.
"""

from __future__ import annotations

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

__all__ = ["OWN_SKETCH_SEED", "closed_by", "gamma_columns_mod_p", "gamma_product_is_zero", "own_rank_reaches",
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


def gamma_columns_mod_p(net, X, pattern, fixed, q: int, cols: np.ndarray, avoid: int, data: list) -> np.ndarray:
    """``Gamma mod q`` on the free columns ``cols`` only (rows as ``gamma_mod_p``): ``D_l[:, v] h_{l-1}[j]``.

    The backpropagation of :func:`exactident.model.gamma_modular.gamma_mod_p` (Prop. 10), then one
    column per parameter: the cost of a kernel check on a sparse ``K`` is its support, not ``dim``.
    ``data``: a cache list, empty or holding the case's ``ModularData`` (filled on first use).
    """
    from exactident.linalg.modular import require_prime
    from exactident.model.fixed_edges import free_parameters
    from exactident.model.gamma_modular import _backprop_mod_p

    require_prime(q, avoid)
    data[:] = data or [ModularData(net, X)]
    H, D = _backprop_mod_p(net, X, pattern, q, data[0])
    params = free_parameters(net, fixed)
    N_L = net.widths[-1]
    out = np.empty((len(X) * N_L, len(cols)), dtype=np.int64)
    for t, c in enumerate(cols):
        prm = params[int(c)]
        d = D[prm.l - 1][:, prm.i]
        out[:, t] = d if prm.j is None else (d * np.repeat(H[prm.l - 1][:, prm.j], N_L)) % q
    return out


def gamma_product_is_zero(net, X, pattern, fixed, q: int, cols: list[dict[int, int]], avoid: int,
                          data: list) -> bool:
    """Is ``Gamma K_c = 0 mod q`` for every sparse integer column ``K_c`` of ``cols``?

    By Prop. 10 the row ``(i, k)`` of ``Gamma K_c`` is ``sum_v D_l[(i, k), v] u_v(i)`` with
    ``u_v(i) = sum_j h_{l-1}(x_i)[j] K_c[W_l[v, j]] + K_c[b_l[v]]`` over the neurons ``v`` that ``K_c``
    touches: ``u_v`` is one value per sample, so the cost is ``n`` per nonzero of ``K_c`` plus ``n N_L``
    per neuron, not ``n N_L`` per nonzero.  ``D`` and ``h`` mod q from the backpropagation of
    :func:`exactident.model.gamma_modular.gamma_mod_p`; ``data`` as for :func:`gamma_columns_mod_p`.
    """
    from exactident.linalg.modular import require_prime
    from exactident.model.fixed_edges import free_parameters
    from exactident.model.gamma_modular import _backprop_mod_p

    require_prime(q, avoid)
    data[:] = data or [ModularData(net, X)]
    H, D = _backprop_mod_p(net, X, pattern, q, data[0])
    params = free_parameters(net, fixed)
    n, N_L = len(X), net.widths[-1]
    for col in cols:
        by_neuron: dict[tuple[int, int], np.ndarray] = {}
        for c, v in col.items():
            prm = params[c]
            r = v % q
            if r == 0:
                continue
            u = by_neuron.get((prm.l, prm.i))
            term = np.full(n, r, dtype=np.int64) if prm.j is None else (H[prm.l - 1][:, prm.j] * r) % q
            by_neuron[(prm.l, prm.i)] = term if u is None else (u + term) % q
        total = np.zeros(n * N_L, dtype=np.int64)
        for (l, v), u in by_neuron.items():
            total = (total + D[l - 1][:, v] * np.repeat(u, N_L)) % q
        if total.any():
            return False
    return True


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
