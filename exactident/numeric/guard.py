"""The float pipeline failing is a finding: statuses, where they happened, captured warnings.

A case may hold numbers no float format can hold (``1e350``, ``1e-400``), or
numbers whose products leave the range (``1e200 * 1e200``), and LAPACK's SVD
given ``inf``/``nan`` returns ``nan`` or raises ``LinAlgError`` (and on some
builds never returns).  None of that is a bug of exactident: it is what the
float pipeline does with this case.  So every stage checks its output and a
failure becomes a :class:`FloatFailure`, reported in the ``numeric`` block
(docs/cli.md) and scored in ``crosscheck`` (docs/tolerances.md), with the
status:

- ``overflow``: a value rounds to ``+-inf`` (a parameter or sample entry), or
  a finite computation produces ``inf``;
- ``underflow-to-zero``: an exactly nonzero parameter or sample entry rounds
  to zero (the float network is another network);
- ``non-finite``: a computation produces ``nan`` (e.g. ``0 * inf``), or the
  SVD returns a non-finite singular value;
- ``svd-failed``: LAPACK reports that the SVD did not converge.

A matrix is checked finite *before* its SVD, never after.  numpy's
``RuntimeWarning`` warnings (``overflow encountered in matmul``, ...) are captured with
the stage that raised them and reported in the same block, never printed.

Called by :mod:`exactident.numeric.numpy_backend`, :mod:`exactident.numeric.torch_backend`
and :mod:`exactident.numeric.block`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from exactident.errors import ExactIdentError

__all__ = [
    "MAX_WHERE_ENTRIES",
    "STATUSES",
    "FloatFailure",
    "FloatPipelineError",
    "WarningLog",
    "require_finite",
    "safe_svdvals",
]

#: Outcome of a float pipeline: ``ok`` or the first failure met.
STATUSES = ("ok", "overflow", "underflow-to-zero", "non-finite", "svd-failed")
#: At most this many locations are named in ``where.entries`` (``n_entries`` has the count).
MAX_WHERE_ENTRIES = 10


@dataclass
class FloatFailure:
    """Why and where the float pipeline failed.

    Attributes
    ----------
    status : str
        One of :data:`STATUSES` other than ``ok``.
    stage : str
        ``parameters``, ``sample``, ``forward``, ``gamma``, ``alpha``,
        ``svd-gamma``, ``svd-alpha`` (prefixed by the pipeline, e.g.
        ``full-jacobian/float32/svd-gamma``, where several run).
    entries : list of str
        Up to :data:`MAX_WHERE_ENTRIES` locations (``W_2[0,0]``, ``X[3,1]``,
        ``z_1[sample 4, neuron 2]``, ``Gamma[row 7, col 2]``).
    n_entries : int
        How many locations in all.
    message : str
        One readable line.
    """

    status: str
    stage: str
    entries: list[str]
    n_entries: int
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status,
                "where": {"stage": self.stage, "entries": self.entries, "n_entries": self.n_entries},
                "message": self.message}


class FloatPipelineError(ExactIdentError):
    """Raised inside the float pipeline; its caller turns ``failure`` into a report entry."""

    def __init__(self, failure: FloatFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


@dataclass
class WarningLog:
    """numpy ``RuntimeWarning`` warnings captured per stage: ``{"stage", "message", "count"}`` entries."""

    entries: list[dict[str, Any]] = field(default_factory=list)

    @contextmanager
    def stage(self, name: str, under: bool = True) -> Iterator[None]:
        """Run a block with numpy's floating-point checks on, recording warnings as ``name``.

        ``under`` also reports underflow (numpy ignores it by default): a
        product that underflows is how an exactly nonzero entry becomes 0.
        Warnings other than ``RuntimeWarning`` are re-issued unchanged.
        """
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with np.errstate(over="warn", invalid="warn", divide="warn", under="warn" if under else "ignore"):
                yield
        for w in caught:
            if issubclass(w.category, RuntimeWarning):
                self.add(name, str(w.message))
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)

    def add(self, stage: str, message: str) -> None:
        for e in self.entries:
            if e["stage"] == stage and e["message"] == message:
                e["count"] += 1
                return
        self.entries.append({"stage": stage, "message": message, "count": 1})

    def has(self, stage: str, word: str) -> bool:
        return any(e["stage"] == stage and word in e["message"] for e in self.entries)


def require_finite(M: np.ndarray, stage: str, locate: Callable[[tuple[int, ...]], str]) -> None:
    """Raise :class:`FloatPipelineError` if ``M`` holds ``inf`` (``overflow``) or ``nan`` (``non-finite``).

    ``locate`` names an index of ``M`` for the report.
    """
    if M.size == 0 or bool(np.isfinite(M).all()):
        return
    nan = np.argwhere(np.isnan(M))
    bad, status = (nan, "non-finite") if nan.size else (np.argwhere(np.isinf(M)), "overflow")
    names = [locate(tuple(int(v) for v in idx)) for idx in bad[:MAX_WHERE_ENTRIES]]
    what = "nan" if status == "non-finite" else "inf"
    raise FloatPipelineError(FloatFailure(
        status, stage, names, len(bad),
        f"the float pipeline produced {what} at {stage} ({_list(names, len(bad))})"))


def safe_svdvals(M: np.ndarray, stage: str) -> np.ndarray:
    """Singular values (descending) of a finite float matrix, or :class:`FloatPipelineError`.

    The caller has checked ``M`` finite (LAPACK on ``inf``/``nan`` input may
    not return).  ``LinAlgError`` becomes ``svd-failed``; an ``inf`` singular
    value (``sigma_1`` beyond the largest float) ``overflow``; ``nan`` ``non-finite``.
    """
    if M.size == 0:
        return np.zeros(0, dtype=M.dtype)
    if not bool(np.isfinite(M).all()):  # never hand LAPACK a non-finite matrix
        require_finite(M, stage, lambda idx: f"[{', '.join(map(str, idx))}]")
    try:
        s = np.linalg.svd(M, compute_uv=False)
    except np.linalg.LinAlgError as exc:
        raise FloatPipelineError(FloatFailure("svd-failed", stage, [], 0,
                                              f"the SVD at {stage} failed: {exc}")) from None
    if not bool(np.isfinite(s).all()):
        status = "non-finite" if np.isnan(s).any() else "overflow"
        bad = [f"sigma_{k + 1}" for k in np.flatnonzero(~np.isfinite(s))]
        raise FloatPipelineError(FloatFailure(
            status, stage, bad[:MAX_WHERE_ENTRIES], len(bad),
            f"the SVD at {stage} returned non-finite singular values ({_list(bad, len(bad))}): "
            f"the matrix's norm exceeds the largest {M.dtype.name}"))
    return s


def _list(names: Sequence[str], n: int) -> str:
    more = f", ... ({n} in all)" if n > len(names) else ""
    return ", ".join(names) + more
