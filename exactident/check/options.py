"""``CheckOptions``: every option of :func:`exactident.check.check`, validated once.

``check(case, options)`` reads its options from one frozen :class:`CheckOptions`; its keywords
(``check(case, numeric=False, seed=3)``) are a thin layer that builds one.  A keyword given
together with ``options=`` overrides that field (:meth:`CheckOptions.merged`), as
``dataclasses.replace`` does, and the result is validated again.

Validation happens at construction (``__post_init__``): a value outside a field's
domain raises :class:`~exactident.errors.UnsupportedCaseError` naming the field, before any case is
read.  Float pipeline names are checked there too (:func:`exactident.numeric.block.parse_pipelines`,
imported only when ``pipelines`` is given).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from exactident.errors import UnsupportedCaseError

__all__ = ["CheckOptions"]

_BOOLEANS = ("assume_relu_mlp", "modular", "all_ranks", "exact_ranks", "verdict_first", "structural",
             "verify_propositions", "numeric")


@dataclass(frozen=True)
class CheckOptions:
    """The options of one :func:`exactident.check.check` call (docs/notebook.md, "Options").

    Every field has the default of the ``check`` keyword of the same name, so ``CheckOptions()``
    is ``check(case)`` with no keyword.  Fields are grouped by the stage that reads them:
    loading the case, the exact analysis, the float cross-check, and how the call runs.  The
    exact verdict depends only on the case and the exact-analysis fields (``seed`` changes the
    primes, so the certificate, never a rank or the verdict).

    Raises
    ------
    UnsupportedCaseError
        At construction, for a value outside its field's domain (the message names the field),
        or an unknown float pipeline name.

    Examples
    --------
    >>> opts = CheckOptions(numeric=False, all_ranks=True)
    >>> opts.certify, opts.max_resolutions, opts.numeric
    ('full', 4096, False)
    >>> CheckOptions(max_resolutions=-1)
    Traceback (most recent call last):
    ...
    exactident.errors.UnsupportedCaseError: CheckOptions.max_resolutions must be an integer >= 0, not -1
    """

    # -- loading the case ("load" stage)
    #: The sample of a model file: a path (``.npy``, ``.npz``, ``.csv``) or an array ``(n, N_0)``.
    #: Default None; required with a model file (refused without it, naming ``sample``); given with a
    #: :class:`~exactident.io.case.Case`, it replaces the case's sample.
    sample: Any = None
    #: For a weight-only model file (state dict, safetensors, ``.npz``): the model it was saved from (a
    #: path or a ``torch.nn.Module``) or its outputs on the sample (array-like).  Default None.
    reference: Any = None
    #: bool, default False.  For a weight-only model file without ``reference``: your statement that
    #: it is a plain ``Linear -> ReLU`` chain (else it is refused); the report's provenance records it.
    assume_relu_mlp: bool = False

    # -- the exact analysis (forward pass, ranks, verdict, certificates)
    #: bool, default True: certified ranks mod random primes (a rank certificate under
    #: ``certificate["rank"]`` off the boundary).  False: the rational reference path (``Gamma`` over
    #: Q and its FLINT rank), slower, same ranks.
    modular: bool = True
    #: ``"full"`` (default): every rank is certified.  ``"none"``: Monte Carlo ranks mod random primes,
    #: labelled in the report (``certified: false`` and ``error_probability``, a proven bound, at most
    #: ``1e-6``, on the chance that a rank is too low; docs/modular.md); boundary cases stay certified, and so
    #: do cases whose entries are too large for any prime range to reach ``1e-6``.
    certify: str = "full"
    #: int or None, default 0: seed of the random primes (None: fresh randomness).  Primes change
    #: speed and the certificate, never a rank or the verdict.
    seed: int | None = 0
    #: int ``>= 0``, default 4096: cap on the tie resolutions enumerated on the boundary; past it the
    #: verdict is ``inconclusive`` and the ranks are null.
    max_resolutions: int = 4096
    #: bool, default False: compute ``rank_a`` even when ``C_S`` already decides (otherwise it is
    #: None then: the verdict does not need it); implies ``exact_ranks``.
    all_ranks: bool = False
    #: bool, default False: certify ``rank_gamma`` exactly even when a certified interval decides the
    #: verdict and the exact rank is expensive.  By default ``rank_gamma`` is exact whenever its
    #: estimated cost is small (:func:`exactident.ranks.estimate.exact_rank_is_cheap`, then a Dixon lifting
    #: capped at that budget, :func:`exactident.ranks.intervals.close_within`); otherwise a
    #: rank-deficient ``Gamma`` whose cheap kernel vectors settle the verdict is reported as a
    #: certified interval (``Report.rank_gamma_interval``, docs/modular.md, "Verdict first").  For a
    #: layer graph ``rank Gamma_free`` is exact only with this (or ``all_ranks``).  Forced on by the
    #: ``full-jacobian``, ``float32`` and ``torch`` pipelines (they are compared with the exact rank).
    exact_ranks: bool = False
    #: bool, default False: the interval whenever it settles the verdict, however cheap the exact
    #: rank (ignored with ``exact_ranks`` or ``all_ranks``).
    verdict_first: bool = False
    #: Mapping ``(l, v) -> k`` or None (default): override the fixed outgoing edge ``k`` of some hidden
    #: neurons ``(l, v)`` (the edges whose weights are fixed by the rescaling symmetry).
    fixed_choice: Mapping[tuple[int, int], int] | None = None
    #: bool, default True: try to settle an ``inconclusive`` verdict with a structural certificate or a
    #: straight line (:func:`exactident.boundary.structural.settle`).  False keeps the rank rules' verdict.
    structural: bool = True
    #: bool, default False: check Props. 1 and 10 exactly (small networks only; a broken identity
    #: raises :class:`~exactident.errors.InvariantViolation`).
    verify_propositions: bool = False

    # -- the float cross-check ("float cross-check" stage, after the verdict)
    #: bool, default True: also run the float64 pipeline (backprop ``Gamma`` and its SVD rank) and
    #: report whether it agrees (the report's ``numeric`` block).  False: no ``numeric`` block.
    numeric: bool = True
    #: More float pipelines in the ``numeric`` block: a comma-separated string or a collection of
    #: names (``"stored-dtype"``, ``"kinks"``, ``"full-jacobian"``, ``"float32"``, ``"torch"``, ``"all"``;
    #: :data:`exactident.numeric.block.OPTIONAL_PIPELINES`).  Default None: the float64 one only.
    #: Read only with ``numeric``.
    pipelines: str | Collection[str] | None = None
    #: float64 ``>= 0`` or None (default: numpy's rule): absolute SVD tolerance for the float ``Gamma``.
    tol: float | None = None
    #: float64 ``>= 0`` or None: relative SVD tolerance (``rtol * sigma_max``); ignored when ``tol`` is given.
    rtol: float | None = None

    # -- how the call runs (never changes the report, except a budget that runs out)
    #: Seconds of wall time ``> 0`` (``math.inf``: a child process without deadline) or None (default:
    #: in-process, no budget).  With a budget the analysis runs in a child process killed with its
    #: process group at the deadline; the report is then ``inconclusive`` with reason
    #: ``time budget exhausted at <stage>``, unless the verdict was already reached: then the exact
    #: report is kept and its ``numeric`` block is ``timed out``.
    timeout: float | None = None
    #: bool or None (default): show the stages as they run (``tqdm.auto``; :mod:`exactident.progress`).
    #: None: on in a Jupyter kernel or a terminal, unless ``on_stage`` is given; off otherwise.
    progress: bool | None = None
    #: Callable ``(stage, sizes)`` or None: called at each stage of the analysis (``forward pass``,
    #: ``ranks mod p``, ``verdict``, ...: the names of the progress line, docs/cli.md), in this
    #: process; with ``timeout`` the child's stages are forwarded to it.
    on_stage: Callable[[str, dict[str, Any]], None] | None = None
    #: Callable ``()`` or None: called about twice a second while a child process works.
    on_tick: Callable[[], None] | None = None

    def __post_init__(self) -> None:
        """Validate every field once (the class docstring lists the domains)."""
        for name in _BOOLEANS:
            if not _flag(getattr(self, name)):
                _refuse(name, "True or False", getattr(self, name))
        if self.certify not in ("full", "none"):
            _refuse("certify", "'full' or 'none'", self.certify)
        if self.seed is not None and not _integer(self.seed):
            _refuse("seed", "an integer or None", self.seed)
        if not _integer(self.max_resolutions) or self.max_resolutions < 0:
            _refuse("max_resolutions", "an integer >= 0", self.max_resolutions)
        if self.fixed_choice is not None and not isinstance(self.fixed_choice, Mapping):
            _refuse("fixed_choice", "a mapping (l, v) -> k or None", self.fixed_choice)
        for name in ("tol", "rtol"):
            value = getattr(self, name)
            if value is not None and not (_real(value) and math.isfinite(value) and value >= 0):
                _refuse(name, "a finite number >= 0 or None", value)
        if self.timeout is not None and not (_real(self.timeout) and self.timeout > 0):
            _refuse("timeout", "a number of seconds > 0 or None", self.timeout)
        if self.progress is not None and not _flag(self.progress):
            _refuse("progress", "True, False or None", self.progress)
        for name in ("on_stage", "on_tick"):
            if getattr(self, name) is not None and not callable(getattr(self, name)):
                _refuse(name, "a callable or None", getattr(self, name))
        if self.pipelines is not None:
            names = self.pipelines
            if not isinstance(names, str) and not (isinstance(names, Collection)
                                                   and all(isinstance(n, str) for n in names)):
                _refuse("pipelines", "a comma-separated string or a collection of names", names)
            from exactident.numeric.block import parse_pipelines

            parse_pipelines(names)  # an unknown name: UnsupportedCaseError, before any work

    @classmethod
    def merged(cls, options: CheckOptions | None, keywords: Mapping[str, Any]) -> CheckOptions:
        """``options`` (default: ``CheckOptions()``) with ``keywords`` overriding its fields, validated.

        Raises
        ------
        UnsupportedCaseError
            A keyword that is no field (naming it), or a value outside its field's domain.

        Examples
        --------
        >>> base = CheckOptions(numeric=False, seed=1)
        >>> CheckOptions.merged(base, {"seed": 2}) == CheckOptions(numeric=False, seed=2)
        True
        >>> CheckOptions.merged(None, {"numerik": False})
        Traceback (most recent call last):
        ...
        exactident.errors.UnsupportedCaseError: check() has no option 'numerik' (the fields of CheckOptions)
        """
        if options is not None and not isinstance(options, CheckOptions):
            raise UnsupportedCaseError(f"check(options=...) must be a CheckOptions, not {type(options).__name__}")
        fields = {f.name for f in dataclasses.fields(cls)}
        for name in keywords:
            if name not in fields:
                raise UnsupportedCaseError(f"check() has no option {name!r} (the fields of CheckOptions)")
        if options is None:
            return cls(**keywords)
        return dataclasses.replace(options, **keywords) if keywords else options


def _flag(value: Any) -> bool:
    # a bool, or what compares as one (numpy's bool_, 0 and 1): the engine reads flags by truth value
    return isinstance(value, bool) or (not isinstance(value, (str, bytes, float)) and _is_0_or_1(value))


def _is_0_or_1(value: Any) -> bool:
    try:
        return bool(value in (0, 1))
    except (TypeError, ValueError):  # an array: no single truth value
        return False


def _integer(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _refuse(name: str, domain: str, value: Any) -> None:
    raise UnsupportedCaseError(f"CheckOptions.{name} must be {domain}, not {value!r}")
