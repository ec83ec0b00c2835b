"""Float backend: what a practitioner computes (backprop Jacobian + SVD rank).

Mirrors the exact path module for module: float forward pass with the
``>= 0`` convention (so ``relu'(0) = 1``, as the paper's indicator), ``Gamma`` by
backpropagation skipping the fixed edges, ``alpha`` from float signs, ranks
by SVD with numpy's default tolerance (:mod:`exactident.linalg.floating`).
Rationals are rounded once, correctly, to the float format
(:mod:`exactident.numeric.rounding`), here and in the torch backend only;
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
from exactident.numeric.guard import (
    MAX_WHERE_ENTRIES,
    FloatFailure,
    FloatPipelineError,
    WarningLog,
    require_finite,
    safe_svdvals,
)
from exactident.numeric.rounding import FloatFormat, float_format, round_values

__all__ = [
    "MAX_ALPHA_ENTRIES",
    "FloatNetwork",
    "FloatOperators",
    "FloatSample",
    "all_parameters",
    "alpha_float",
    "alpha_float_gram",
    "float_operators",
    "float_pattern",
    "gamma_float",
    "numpy_dtype",
    "round_sample",
    "to_float_network",
    "to_float_sample",
]

#: Above this many entries ``alpha`` is not materialised; its Gram matrix is used.
MAX_ALPHA_ENTRIES = 20_000_000


def numpy_dtype(dtype: object) -> type:
    """The numpy scalar type of a float format name/dtype (float64, float32, float16).

    Raises
    ------
    UnsupportedCaseError
        For bfloat16 (numpy has no bfloat16 arithmetic) or a non-float dtype.
    """
    fmt = float_format(dtype)
    if fmt.name == "bfloat16":
        raise UnsupportedCaseError("numpy has no bfloat16 arithmetic: use the torch backend for bfloat16")
    return {"float64": np.float64, "float32": np.float32, "float16": np.float16}[fmt.name]


def all_parameters(net: Network) -> list[Parameter]:
    """Every weight and bias in the full parameter order (per layer ``W_l`` row-major, then ``b_l``)."""
    out = []
    for l in range(1, net.L + 1):
        out += [Parameter(l, i, j) for i in range(net.widths[l]) for j in range(net.widths[l - 1])]
        out += [Parameter(l, i) for i in range(net.widths[l])]
    return out


@dataclass
class FloatNetwork:
    """``W[l-1]`` float arrays ``(N_l, N_{l-1})``, ``b[l-1]`` float arrays ``(N_l,)``.

    ``W_err``/``b_err`` (float64, same shapes) bound ``|rounded - exact|`` per
    entry (0 where rounding was exact); ``overflow``/``underflow`` name the
    parameters that rounded to ``+-inf`` / from nonzero to zero.
    """

    widths: tuple[int, ...]
    W: list[np.ndarray]
    b: list[np.ndarray]
    W_err: list[np.ndarray] = field(default_factory=list)
    b_err: list[np.ndarray] = field(default_factory=list)
    overflow: list[str] = field(default_factory=list)
    underflow: list[str] = field(default_factory=list)

    @property
    def L(self) -> int:
        return len(self.widths) - 1


def _error_bound(values: np.ndarray, inexact: list[int], fmt: FloatFormat) -> np.ndarray:
    """Upper bounds on ``|fl(q) - q|`` (float64): 0 where exact, else ``u (1 + 2u) |fl(q)| + 2^(emin-p)``.

    ``|fl(q) - q| <= u |q|`` in the normal range and ``<= 2^(emin - p)`` (half the
    subnormal spacing) below it, and ``|q| <= |fl(q)| / (1 - u) <= (1 + 2u) |fl(q)|``.
    The three float64 operations evaluating it lose at most ``3 * 2^-53``
    relatively; the factor ``1 + 2^-49`` and a final step up cover that.
    """
    err = np.zeros(values.shape, dtype=np.float64)
    if inexact:
        idx = np.array(inexact)
        u = fmt.unit_roundoff
        with np.errstate(over="ignore"):  # inf entries are reported as overflow before any use
            v = np.abs(values.reshape(-1)[idx].astype(np.float64)) * (u * (1 + 2 * u))
            v = (v + np.ldexp(1.0, fmt.emin - fmt.p)) * (1 + 2.0**-49)
        err.reshape(-1)[idx] = np.nextafter(v, np.inf)
    return err


def to_float_network(net: Network, dtype: object = np.float64) -> FloatNetwork:
    """Round every parameter once to the nearest float of ``dtype`` (:func:`.rounding.round_rational`).

    Overflowing parameters become ``+-inf`` and are named in ``overflow``
    (:func:`float_operators` refuses to go on with them).
    """
    fmt = float_format(dtype)
    nd = numpy_dtype(fmt)
    W, b, W_err, b_err, over, under = [], [], [], [], [], []
    for l, (M, bl) in enumerate(zip(net.W, net.b), start=1):
        r = round_values(M.entries(), fmt)
        Wl: np.ndarray = np.array(r.values, dtype=np.float64).reshape(M.nrows(), M.ncols()).astype(nd)
        W.append(Wl)
        W_err.append(_error_bound(Wl, r.inexact, fmt))
        cols = M.ncols()
        over += [f"W_{l}[{k // cols},{k % cols}]" for k in r.overflow]
        under += [f"W_{l}[{k // cols},{k % cols}]" for k in r.underflow]
        rb = round_values(bl, fmt)
        bv: np.ndarray = np.array(rb.values, dtype=np.float64).astype(nd)
        b.append(bv)
        b_err.append(_error_bound(bv, rb.inexact, fmt))
        over += [f"b_{l}[{k}]" for k in rb.overflow]
        under += [f"b_{l}[{k}]" for k in rb.underflow]
    return FloatNetwork(net.widths, W, b, W_err, b_err, over, under)


@dataclass
class FloatSample:
    """The sample rounded once: ``X`` ``(n, N_0)`` in the dtype, ``err`` error bounds (float64).

    ``overflow``/``underflow`` name the entries (``X[i,j]``) rounded to ``+-inf`` / from nonzero to zero.
    """

    X: np.ndarray
    err: np.ndarray
    overflow: list[str]
    underflow: list[str]


def round_sample(X: Sequence[Sequence[flint.fmpq]], n_inputs: int, dtype: object = np.float64) -> FloatSample:
    """Round every sample entry once to ``dtype``; entries are named ``X[i,j]``."""
    fmt = float_format(dtype)
    r = round_values([v for row in X for v in row], fmt)
    Xf: np.ndarray = np.array(r.values, dtype=np.float64).reshape(len(X), n_inputs).astype(numpy_dtype(fmt))
    name = (lambda k: f"X[{k // n_inputs},{k % n_inputs}]") if n_inputs else str
    return FloatSample(Xf, _error_bound(Xf, r.inexact, fmt), [name(k) for k in r.overflow],
                       [name(k) for k in r.underflow])


def to_float_sample(X: Sequence[Sequence[flint.fmpq]], n_inputs: int, dtype: object = np.float64) -> np.ndarray:
    """The sample rounded once to ``dtype``, shape ``(n, N_0)`` (:func:`round_sample`)."""
    return round_sample(X, n_inputs, dtype).X


def _forward(fnet: FloatNetwork, Xf: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    H, pattern = _forward_full(fnet, Xf)[:2]
    return H, pattern


def _forward_full(fnet: FloatNetwork, Xf: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """``H = [h_0 = X, h_1, ..., h_{L-1}]``, the ``>= 0`` pattern and ``Z = [z_1, ..., z_L]``, all in the dtype."""
    H = [Xf]
    pattern = []
    Zs = []
    for l in range(1, fnet.L + 1):
        Z = H[-1] @ fnet.W[l - 1].T + fnet.b[l - 1]
        Zs.append(Z)
        if l < fnet.L:
            pattern.append(Z >= 0)  # -0.0 >= 0 is True: -0.0 is a tie
            H.append(np.maximum(Z, 0))
    return H, pattern, Zs


def float_pattern(fnet: FloatNetwork, Xf: np.ndarray) -> list[np.ndarray]:
    """Float activation pattern (``z >= 0``), bool arrays ``(n, N_l)``."""
    return _forward(fnet, Xf)[1]


def gamma_float(fnet: FloatNetwork, Xf: np.ndarray, fixed: FixedEdges,
                cols: Sequence[int] | None) -> np.ndarray:
    """Float ``Gamma``, shape ``(n N_L, len(cols))``, by backpropagation (Prop. 10).

    ``cols`` selects columns of the full Jacobian (every ``W_l`` row-major then
    ``b_l``, per layer); ``None`` keeps them all (the full Jacobian).
    Products are numpy ufuncs, so floating-point flags (overflow, underflow)
    are reported (``einsum`` would not report them).
    """
    H, pattern = _forward(fnet, Xf)
    n, N_L = Xf.shape[0], fnet.widths[-1]
    D = np.broadcast_to(np.eye(N_L, dtype=Xf.dtype), (n, N_L, N_L))
    per_layer = []
    for l in range(fnet.L, 0, -1):
        # D: (n, N_L, N_l) = d f / d z_l
        # explicit sizes: reshape(..., -1) fails on an empty sample (n = 0)
        dW = (D[:, :, :, None] * H[l - 1][:, None, None, :]).reshape(n, N_L, D.shape[2] * H[l - 1].shape[1])
        per_layer.append(np.concatenate([dW, D], axis=2))
        if l > 1:
            D = (D @ fnet.W[l - 1]) * pattern[l - 2][:, None, :]
    blocks = per_layer[::-1]
    full = np.concatenate(blocks, axis=2)
    full = full.reshape(n * N_L, full.shape[2])
    return full if cols is None else full[:, list(cols)]


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
    fnet = to_float_network(net, nd)
    sample = round_sample(X, net.widths[0], nd)
    for what, over in (("parameters", fnet.overflow), ("sample", sample.overflow)):
        if over:
            raise FloatPipelineError(FloatFailure(
                "overflow", pre + what, over[:MAX_WHERE_ENTRIES], len(over),
                f"{len(over)} {what[:-1] if what == 'parameters' else 'sample'} value(s) beyond the largest "
                f"{np.dtype(nd).name} ({', '.join(over[:3])}{', ...' if len(over) > 3 else ''}): "
                f"they round to inf"))
    Xf = sample.X
    params = all_parameters(net)
    cols = free_columns(net, fixed) if columns == "free" else list(range(len(params)))
    with log.stage(pre + "forward"):
        H, pattern, Zs = _forward_full(fnet, Xf)
    for l, Z in enumerate(Zs, start=1):
        require_finite(Z, pre + "forward", _z_name(l))
    flips = int(sum(int(np.sum(a != b)) for a, b in zip(pattern, exact_pattern)))
    with log.stage(pre + "gamma"):
        G = gamma_float(fnet, Xf, fixed, cols)
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
