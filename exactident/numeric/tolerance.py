"""Float rank-tolerance rules (``Policy``) as numpy, torch and practitioners apply them.

Named policies (the tolerance ``t``; singular values ``> t`` count):

- ``numpy-default``: ``sigma_1 * max(m, n) * eps(dtype)`` (``numpy.linalg.matrix_rank``);
- ``torch-default``: ``max(atol, rtol * sigma_1)`` with ``atol = 0`` and
  ``rtol = eps(dtype) * max(m, n)`` (``torch.linalg.matrix_rank`` docs): the same
  number as numpy's, so it is listed only for the torch backends, where the
  rank comes from torch's own call on torch's own Jacobian;
- ``rtol=1e-6``, ``rtol=1e-9``: ``rtol * sigma_1``;
- ``float64-eps`` on float32: ``sigma_1 * max(m, n) * eps(float64)``, the
  pitfall of judging a float32 Jacobian with float64's epsilon;
- the user's ``--tol`` (absolute, on ``Gamma``; ``alpha`` keeps numpy's rule)
  or ``--rtol`` (relative, on both).

Backends: ``float64``, ``float32`` (numpy), ``torch-float64``, ``torch-float32``
rank ``Gamma`` over the free parameters; the ``full-jacobian-*`` backends
(``full-jacobian-float64``, ``full-jacobian-float32``,
``torch-full-jacobian-float64``, ``torch-full-jacobian-float32``) rank the
Jacobian over *every* weight and bias, fixed edges included, as practitioners
do (:mod:`exactident.numeric.full_jacobian`); a rank there reads
``identifiable`` as soon as it reaches ``dim``.

Used by :mod:`exactident.crosscheck.core`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from exactident.errors import InvariantViolation

__all__ = ["EPS64", "Policy", "backend_dtype", "default_policies", "is_full_jacobian"]


#: Machine epsilon of float64, ``2**-52``.
EPS64 = float(np.finfo(np.float64).eps)


@dataclass(frozen=True)
class Policy:
    """A rank-tolerance rule on one backend.

    Attributes
    ----------
    backend : str
        ``float64``, ``float32``, ``torch-float64``, ``torch-float32``, or one of
        these with ``full-jacobian-`` after any ``torch-`` prefix.
    rule : str
        ``numpy-default``, ``torch-default``, ``rtol``, ``atol`` or ``float64-eps``.
    value : float or None
        ``rtol`` / ``atol`` value.
    """

    backend: str
    rule: str
    value: float | None = None

    @property
    def name(self) -> str:
        rule = self.rule if self.value is None else f"{self.rule}={self.value:g}"
        return f"{self.backend}/{rule}"

    def tolerance(self, s: np.ndarray, shape: tuple[int, int], eps: float, which: str) -> float:
        """Threshold for the singular values ``s`` (descending) of a matrix of ``shape``.

        ``which`` is ``"gamma"`` or ``"alpha"``: an absolute user tolerance
        applies to ``Gamma`` only (``alpha`` keeps numpy's rule).
        """
        smax = float(s[0]) if s.size else 0.0
        if self.rule in ("numpy-default", "torch-default") or (self.rule == "atol" and which == "alpha"):
            return smax * max(shape) * eps
        if self.rule == "float64-eps":
            return smax * max(shape) * EPS64
        if self.value is None:
            raise InvariantViolation(f"policy {self.rule!r} needs a value")
        if self.rule == "rtol":
            return smax * self.value
        return self.value  # atol on gamma


def default_policies(tol: float | None = None, rtol: float | None = None,
                     torch: bool = False) -> list[Policy]:
    """The named policies of the module docstring, plus the user's ``tol``/``rtol``."""
    out = []
    for full in ("", "full-jacobian-"):
        for backend in (f"{full}float64", f"{full}float32"):
            out += [Policy(backend, "numpy-default"), Policy(backend, "rtol", 1e-6),
                    Policy(backend, "rtol", 1e-9)]
        out.append(Policy(f"{full}float32", "float64-eps"))
        for backend in (f"{full}float64", f"{full}float32"):
            if tol is not None:
                out.append(Policy(backend, "atol", tol))
            if rtol is not None:
                out.append(Policy(backend, "rtol", rtol))
    if torch:
        for full in ("", "full-jacobian-"):
            out += [Policy(f"torch-{full}float64", "torch-default"), Policy(f"torch-{full}float32", "torch-default"),
                    Policy(f"torch-{full}float32", "float64-eps")]
    return out


def is_full_jacobian(backend: str) -> bool:
    """Does ``backend`` rank the full Jacobian (fixed edges included)?"""
    return "full-jacobian-" in backend


def backend_dtype(backend: str) -> str:
    """``float64`` or ``float32``: the dtype a backend name ends with."""
    return backend.rsplit("-", 1)[-1]
