"""The image mod p that a ``rank_a`` certificate's alpha-rows form names: ``alpha`` or its Gram matrix on rows.

Read strictly from the certificate's ``lower`` part (``matrix``, ``rows``) and rebuilt from the case
(:func:`alpha_rows_image`); any rows of ``alpha`` give a lower bound on its rank (Prop. 11: ``R_A = N_L rank
alpha``).  A helper of :mod:`exactident.verify.rank` (kept apart for size).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from exactident.io.rationals import short_text
from exactident.model.gamma_modular import Scaled, alpha_mod_p, gram_mod_p
from exactident.verify.arith import BadField, need
from exactident.verify.rank_kernel import _json_int, _Reject

__all__ = ["MAX_ALPHA_ENTRIES", "alpha_rows_image"]

#: ``alpha`` (or rows of it) is reduced mod p explicitly up to this many entries, as the engine does
#: (``exactident.ranks.rank_alpha.MAX_EXPLICIT_ALPHA_MOD_P``); a certificate asking for more is not verified.
MAX_ALPHA_ENTRIES = 40_000_000


def alpha_rows_image(pattern, X, Xs: Scaled, avoid: int, P: int) -> Callable[[dict, int, str], np.ndarray]:
    """``lower`` of the alpha-rows form: ``alpha`` (or its Gram matrix) mod p on the rows ``lower.rows``."""
    n = len(X)

    def image(low: dict, p: int, where: str) -> np.ndarray:
        matrix = need(low, "matrix", str, where)
        if "rows" not in low:
            raise BadField(f"{where}.rows", "missing")
        rows_field = low["rows"]
        if rows_field == "all":
            rows = list(range(n))
        elif isinstance(rows_field, list):
            rows = [_json_int(i, f"{where}.rows[{k}]") for k, i in enumerate(rows_field)]
            if any(not 0 <= i < n for i in rows) or len(set(rows)) != len(rows):
                raise _Reject(f"{where}.rows: expected distinct sample indices in [0, {n}), found "
                              f"{short_text(str(rows_field))}")
        else:
            raise BadField(f"{where}.rows", f"expected 'all' or a list of ints, found {type(rows_field).__name__}")
        sub = [np.asarray(a)[rows] for a in pattern]
        if matrix == "alpha":
            if len(rows) * P > MAX_ALPHA_ENTRIES:
                raise _Reject(f"{where}.matrix: alpha on {len(rows)} rows has {len(rows)} x {P} entries, more than "
                              f"{MAX_ALPHA_ENTRIES} to reduce mod p: not verified (the engine uses 'gram' then)")
            return alpha_mod_p(sub, Xs.mod(p)[rows], p)
        if matrix == "gram":
            return gram_mod_p(sub, [X[i] for i in rows], p, avoid, None, Xs if rows == list(range(n)) else None,
                              symmetric=True)  # float64 below 2**21: rank_blas eliminates it without a copy
        raise _Reject(f"{where}.matrix: expected 'alpha' or 'gram', found {matrix!r}")
    return image
