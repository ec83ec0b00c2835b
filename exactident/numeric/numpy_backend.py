"""Float backend: what a practitioner computes (backprop Jacobian + SVD rank) for a plain ReLU MLP.

Mirrors the exact path module for module: float forward pass with the
``>= 0`` convention (so ``relu'(0) = 1``, as the paper's indicator), ``Gamma`` by
backpropagation skipping the fixed edges (the one float builder,
:func:`exactident.numeric.gamma_free.gamma_free_float`, on the network whose ``T``
selects the free weights and biases: its dense route), ``alpha`` from float signs
(Theorem 8 needs it; it exists for the plain MLP only), ranks
by SVD with numpy's default tolerance (:mod:`exactident.linalg.floating`).
Rationals are rounded once, correctly, to the float format
(:mod:`exactident.numeric.float_network`), here and in the torch backend only;
whether that moved a sample across a kink is recorded (``pattern_differs``).
Each stage checks its output (:mod:`exactident.numeric.guard`): a value out
of the format's range raises :class:`~exactident.numeric.guard.FloatPipelineError`
naming the status and the place, which callers report instead of crashing.
``columns="all"`` builds the *full* Jacobian (fixed edges included), what
practitioners rank (``full-jacobian``, docs/tolerances.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import flint
import numpy as np

from exactident.errors import UnsupportedCaseError
from exactident.model.activation import n_paths
from exactident.model.fixed_edges import FixedEdges, Parameter
from exactident.model.gamma import free_columns
from exactident.model.network import Network
from exactident.numeric.float_network import (
    FloatNetwork,
    FloatSample,
    all_parameters,
    numpy_dtype,
    round_sample,
    to_float_network,
)
from exactident.numeric.gamma_free import float_forward, gamma_free_float
from exactident.numeric.guard import (
    MAX_WHERE_ENTRIES,
    FloatFailure,
    FloatPipelineError,
    WarningLog,
    require_finite,
    safe_svdvals,
)

__all__ = [
    "MAX_ALPHA_ENTRIES",
    "FloatOperators",
    "alpha_float",
    "alpha_float_gram",
    "float_operators",
]

#: Above this many entries ``alpha`` is not materialised; its Gram matrix is used.
MAX_ALPHA_ENTRIES = 20_000_000


def alpha_float(pattern: Sequence[np.ndarray], Xf: np.ndarray) -> np.ndarray:
    """Float ``alpha``, shape ``(n, |P|)`` (same column order as the exact one)."""
    n = Xf.shape[0]
    tail = np.ones((n, 1), dtype=Xf.dtype)
    blocks = []
    for p in reversed(pattern):
        tail = (p[:, :, None] * tail[:, None, :]).reshape(n, p.shape[1] * tail.shape[1]).astype(Xf.dtype)
        blocks.append(tail)
    blocks.reverse()
    first = (Xf[:, :, None] * tail[:, None, :]).reshape(n, Xf.shape[1] * tail.shape[1])
    return np.concatenate([first, *blocks, np.ones((n, 1), dtype=Xf.dtype)], axis=1)


@dataclass
class FloatOperators:
    """``Gamma`` and ``alpha`` of the rounded case in one float dtype.

    Attributes
    ----------
    dtype : numpy dtype
        float64, float32 or float16: every parameter, sample and operation is in it.
    gamma : ndarray, shape ``(n N_L, dim)`` (``(n N_L, N)`` over all ``N`` parameters for the full Jacobian)
    alpha : ndarray, shape ``(n, |P|)``, or its Gram matrix ``(n, n)`` when ``alpha_is_gram``
    alpha_is_gram : bool
    alpha_shape : (int, int)
        ``(n, |P|)`` (the shape a rank rule must use, even for the Gram route).
    pattern : list of bool ndarray ``(n, N_l)``
        Float activation pattern (``z >= 0`` computed in ``dtype``).
    n_pattern_flips : int
        Entries where it differs from the exact pattern (0 = same pattern).
    fnet, sample, H, Z
        The rounded network and sample, the float hidden values ``h_0..h_{L-1}``
        and pre-activations ``z_1..z_L`` (for the rounding-error bounds of
        :mod:`exactident.numeric.kinks`).
    underflow : FloatFailure or None
        ``underflow-to-zero``: exactly nonzero parameters, sample entries or
        ``Gamma`` entries that are zero in floats (the pipeline still ran).
    log : WarningLog
        numpy ``RuntimeWarning`` warnings per stage.
    """

    dtype: np.dtype
    gamma: np.ndarray
    alpha: np.ndarray
    alpha_is_gram: bool
    alpha_shape: tuple[int, int]
    pattern: list[np.ndarray]
    n_pattern_flips: int
    fnet: FloatNetwork | None = None
    sample: FloatSample | None = None
    H: list[np.ndarray] = field(default_factory=list)
    Z: list[np.ndarray] = field(default_factory=list)
    underflow: FloatFailure | None = None
    log: WarningLog = field(default_factory=WarningLog)
    stage_prefix: str = ""

    @property
    def pattern_differs(self) -> bool:
        return self.n_pattern_flips > 0

    def gamma_singular_values(self) -> np.ndarray:
        """Descending singular values of ``gamma`` (in ``dtype``'s LAPACK routine; float16 in float32).

        Raises
        ------
        FloatPipelineError
            ``svd-failed``, or ``overflow``/``non-finite`` singular values.
        """
        with self.log.stage(self.stage_prefix + "svd-gamma"):
            return safe_svdvals(_lapack(self.gamma), self.stage_prefix + "svd-gamma")

    def alpha_singular_values(self) -> np.ndarray:
        """Descending singular values of ``alpha``; square roots of the Gram's eigenvalues on that route.

        The Gram route squares the condition number, so small singular values
        come out less accurate than from ``alpha`` itself.
        """
        with self.log.stage(self.stage_prefix + "svd-alpha"):
            s = safe_svdvals(_lapack(self.alpha), self.stage_prefix + "svd-alpha")
        return np.sqrt(np.clip(s, 0, None)) if self.alpha_is_gram else s


def _lapack(M: np.ndarray) -> np.ndarray:
    # LAPACK has no half precision: float16 matrices are decomposed in float32 (exact conversion).
    return M.astype(np.float32) if M.dtype == np.float16 else M


def _svdvals(M: np.ndarray) -> np.ndarray:
    return safe_svdvals(_lapack(M), "svd")


def _z_name(l: int):
    def locate(idx: tuple[int, ...]) -> str:
        return f"z_{l}[sample {idx[0]}, neuron {idx[1]}]"
    return locate


def _names(params: Sequence[Parameter], N_L: int, stage: str):
    def locate(idx: tuple[int, ...]) -> str:
        if stage == "gamma":
            r, c = idx
            return f"Gamma[sample {r // N_L}, output {r % N_L}, {params[c].name}]"
        return f"[{', '.join(map(str, idx))}]"
    return locate


def float_operators(net: Network, X: Sequence[Sequence[flint.fmpq]], fixed: FixedEdges,
                    exact_pattern: Sequence[np.ndarray], dtype: object = np.float64, *,
                    columns: str = "free", log: WarningLog | None = None,
                    stage_prefix: str = "", with_alpha: bool = True) -> FloatOperators:
    """Round the case to ``dtype`` and build the float ``Gamma`` and ``alpha`` (Props. 10, 1).

    Parameters
    ----------
    net : Network
        Exact parameters (Q); rounded once to the nearest ``dtype`` value here.
    X : n rows of N_0 fmpq
    fixed : FixedEdges
        The fixed edges of the *exact* network (a float tool would choose the
        same ones: rounding keeps the order of ``|weights|`` up to ties).
    exact_pattern : list of bool arrays ``(n, N_l)``
        From :func:`exactident.model.activation.activation_state`, to count flips.
    dtype : float64, float32 or float16 (a name, numpy dtype or type)
    columns : {"free", "all"}
        ``free``: ``Gamma`` over the free parameters ``tau`` (fixed edges
        dropped, Prop. 10); ``all``: the full Jacobian over every weight and
        bias, as practitioners compute it (its exact rank is ``rank_gamma``:
        the fixed-edge columns are combinations of the others by positive
        homogeneity).
    log : WarningLog, optional
        Collects numpy ``RuntimeWarning`` warnings per stage (a new one by default).
    stage_prefix : str
        Prepended to stage names in failures and warnings.
    with_alpha : bool
        Build ``alpha`` (``False``: an empty ``(n, 0)`` placeholder, for a ``Gamma``-only pipeline).

    Returns
    -------
    FloatOperators

    Raises
    ------
    FloatPipelineError
        ``overflow``: a parameter or sample entry beyond the format's range, or
        ``inf`` in the forward pass, ``Gamma`` or ``alpha``; ``non-finite``: ``nan`` there.
    UnsupportedCaseError
        For bfloat16 (no numpy arithmetic) or an unknown ``columns``.
    """
    if columns not in ("free", "all"):
        raise UnsupportedCaseError(f"columns must be 'free' or 'all', found {columns!r}")
    log = log if log is not None else WarningLog()
    pre = stage_prefix
    nd = numpy_dtype(dtype)
    params = all_parameters(net)
    cols = free_columns(net, fixed) if columns == "free" else list(range(len(params)))
    fnet = to_float_network(net, nd, cols)  # T selects the free columns: the dense route of gamma_free_float
    sample = round_sample(X, net.widths[0], nd)
    for what, over in (("parameters", fnet.overflow), ("sample", sample.overflow)):
        if over:
            raise FloatPipelineError(FloatFailure(
                "overflow", pre + what, over[:MAX_WHERE_ENTRIES], len(over),
                f"{len(over)} {what[:-1] if what == 'parameters' else 'sample'} value(s) beyond the largest "
                f"{np.dtype(nd).name} ({', '.join(over[:3])}{', ...' if len(over) > 3 else ''}): "
                f"they round to inf"))
    Xf = sample.X
    with log.stage(pre + "forward"):
        H, Zs = float_forward(fnet, Xf, with_deriv=False)[:2]
        pattern = [z >= 0 for z in Zs[:-1]]  # -0.0 >= 0 is True: -0.0 is a tie
    for l, Z in enumerate(Zs, start=1):
        require_finite(Z, pre + "forward", _z_name(l))
    flips = int(sum(int(np.sum(a != b)) for a, b in zip(pattern, exact_pattern)))
    with log.stage(pre + "gamma"):
        G = gamma_free_float(fnet, Xf)
    require_finite(G, pre + "gamma", _names([params[c] for c in cols], net.widths[-1], "gamma"))
    n_p = n_paths(net.widths)
    A: np.ndarray
    with log.stage(pre + "alpha"):
        if not with_alpha:
            A, gram = np.zeros((len(X), 0), dtype=nd), False
        elif not X:
            A, gram = np.zeros((0, n_p), dtype=nd), False
        elif len(X) * n_p <= MAX_ALPHA_ENTRIES:
            A, gram = alpha_float(pattern, Xf), False
        else:
            A, gram = alpha_float_gram(pattern, Xf), True
    require_finite(A, pre + "alpha", lambda idx: f"alpha[{idx[0]}, {idx[1]}]")
    under = fnet.underflow + sample.underflow
    underflow = None
    if under:
        underflow = FloatFailure("underflow-to-zero", pre + ("parameters" if fnet.underflow else "sample"),
                                 under[:MAX_WHERE_ENTRIES], len(under),
                                 f"{len(under)} nonzero value(s) round to zero in {np.dtype(nd).name} "
                                 f"({', '.join(under[:3])}{', ...' if len(under) > 3 else ''}): "
                                 "the float pipeline analyses another network")
    elif flips == 0 and (log.has(pre + "gamma", "underflow") or log.has(pre + "forward", "underflow")):
        lost = _gamma_zeros_lost(net, X, exact_pattern, fixed if columns == "free" else FixedEdges({}), G)
        if lost:
            names = [_names([params[c] for c in cols], net.widths[-1], "gamma")(rc) for rc in lost]
            underflow = FloatFailure("underflow-to-zero", pre + "gamma", names[:MAX_WHERE_ENTRIES], len(names),
                                     f"{len(names)} exactly nonzero entries of Gamma underflow to 0 in "
                                     f"{np.dtype(nd).name} ({', '.join(names[:2])}{', ...' if len(names) > 2 else ''})")
    return FloatOperators(np.dtype(nd), G, A, gram, (len(X), n_p), pattern, flips, fnet, sample,
                          H, Zs, underflow, log, pre)


def _gamma_zeros_lost(net: Network, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                      fixed: FixedEdges, G: np.ndarray) -> list[tuple[int, int]]:
    """Entries zero in the float ``G`` but nonzero in the exact ``Gamma`` (same pattern).

    The exact side is ``Gamma mod p`` for a random prime: a nonzero residue
    proves the rational entry nonzero, so every entry listed is a real loss
    (a lost entry with residue 0, probability about ``1/p``, goes unlisted).
    """
    import random

    from exactident.linalg.modular import random_primes
    from exactident.model.gamma_modular import gamma_mod_p
    from exactident.model.integer_forward import data_denominator

    avoid = data_denominator(net, X)
    p = random_primes(1, avoid, random.Random(0))[0]
    Gp = gamma_mod_p(net, X, pattern, fixed, p, avoid)
    rows, cols = np.nonzero((G == 0) & (Gp != 0))
    return [(int(r), int(c)) for r, c in zip(rows, cols)]


def alpha_float_gram(pattern: Sequence[np.ndarray], Xf: np.ndarray) -> np.ndarray:
    """Float Gram matrix ``alpha alpha^T`` ``(n, n)`` (see :func:`exactident.model.activation.alpha_gram`)."""
    n = Xf.shape[0]
    prod_c = np.ones((n, n), dtype=Xf.dtype)
    suffix = np.zeros((n, n), dtype=Xf.dtype)
    for p in reversed(pattern):
        A = p.astype(Xf.dtype)
        prod_c = prod_c * (A @ A.T)
        suffix = suffix + prod_c
    return (Xf @ Xf.T) * prod_c + suffix + 1
