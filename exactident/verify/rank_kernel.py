"""Reading a rank certificate's parts: its kernel columns (strictly), ``M K = 0`` mod primes or over Q,
and which bound closed each rank (:func:`closed_by`).

Helpers of :mod:`exactident.verify.rank` (kept apart for size), with the reading of ``fixed_edges``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flint
import numpy as np

from exactident.errors import CaseFormatError, ExactIdentError
from exactident.model.fixed_edges import fixed_edges
from exactident.verify.arith import BadField

__all__ = ["closed_by"]


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
