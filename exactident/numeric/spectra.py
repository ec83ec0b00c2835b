"""Float singular values of ``Gamma`` and ``alpha`` from one backend, and their consistent tolerance bands.

Filled by :mod:`exactident.crosscheck.core` (numpy) and
:mod:`exactident.numeric.torch_backend` (torch).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from exactident.linalg.floating import consistent_band
from exactident.numeric.guard import FloatFailure

__all__ = ["Spectra"]


@dataclass
class Spectra:
    """Float singular values of ``Gamma`` and ``alpha`` from one backend.

    ``native_default`` holds ``(rank Gamma, rank alpha)`` from the backend's own
    ``matrix_rank`` call with default tolerance (torch backends only).
    ``failure`` is set when the backend's float pipeline failed on the case
    (then the singular values are empty and no band applies); ``warnings``
    holds its captured ``RuntimeWarning`` warnings.
    """

    backend: str
    eps: float
    gamma_sv: np.ndarray
    gamma_shape: tuple[int, int]
    alpha_sv: np.ndarray
    alpha_shape: tuple[int, int]
    n_pattern_flips: int
    native_default: tuple[int, int] | None = None
    failure: FloatFailure | None = None
    warnings: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def failed(cls, backend: str, eps: float, failure: FloatFailure,
               warnings: list[dict[str, Any]] | None = None) -> Spectra:
        """The spectra of a backend whose pipeline failed (no singular values)."""
        return cls(backend, eps, np.zeros(0), (0, 0), np.zeros(0), (0, 0), 0, None, failure, warnings or [])

    def band(self, rank_gamma: int, rank_alpha_: int) -> dict[str, Any]:
        """Absolute ``Gamma`` band, relative ``Gamma``/``alpha`` bands and their intersection."""
        g_lo, g_hi = consistent_band(self.gamma_sv, rank_gamma)
        a_lo, a_hi = consistent_band(self.alpha_sv, rank_alpha_)
        gs = float(self.gamma_sv[0]) if self.gamma_sv.size and self.gamma_sv[0] > 0 else 1.0
        as_ = float(self.alpha_sv[0]) if self.alpha_sv.size and self.alpha_sv[0] > 0 else 1.0
        rel_g, rel_a = (g_lo / gs, g_hi / gs), (a_lo / as_, a_hi / as_)
        rel = (max(rel_g[0], rel_a[0]), min(rel_g[1], rel_a[1]))
        return {"gamma_abs": (g_lo, g_hi), "gamma_rel": rel_g, "alpha_rel": rel_a, "rel": rel,
                "empty": not rel[0] < rel[1]}
