"""Optional PyTorch backend: what an autograd pipeline computes (paper Prop. 10 in practice).

The case becomes ``torch.nn.Sequential(Linear, ReLU, ..., Linear)`` in
float32 or float64; ``Gamma`` is ``torch.func.jacrev`` of
``torch.func.functional_call`` with respect to all weights and biases,
flattened in the paper's order (per layer ``W_l`` row-major then ``b_l``, the
same as :func:`exactident.model.gamma.free_columns`), with the fixed edges' columns
dropped.  Ranks come from ``torch.linalg.matrix_rank`` with its defaults and
the singular values from ``torch.linalg.svdvals``.

Convention trap: autograd's ReLU has derivative 0 at ``z = 0`` (``z > 0``
counts as active), while the paper's indicator is ``z >= 0``.  So the torch
activation pattern is ``z > 0`` in the dtype, and a sample exactly on a
kink (in floats) is inactive here but active in the numpy backend.  Flips
are counted against the exact ``>= 0`` pattern.

A network beyond the plain MLP (``W = T theta + c``, negative slopes) goes through
:func:`gamma_free_torch`: ``torch.func.jacrev`` of the outputs with respect to ``theta``
itself, the dense weights gathered from it.

Called by :mod:`exactident.crosscheck.core`; needs the ``torch`` extra (imported
lazily; :class:`~exactident.errors.UnsupportedCaseError` if missing).
"""

from __future__ import annotations

from collections.abc import Sequence

import flint
import numpy as np

from exactident.errors import UnsupportedCaseError
from exactident.model.activation import n_paths
from exactident.model.fixed_edges import FixedEdges
from exactident.model.gamma import free_columns
from exactident.model.network import Network
from exactident.numeric.float_network import all_parameters, to_float_network
from exactident.numeric.guard import MAX_WHERE_ENTRIES, FloatFailure, FloatPipelineError, WarningLog
from exactident.numeric.numpy_backend import (
    MAX_ALPHA_ENTRIES,
    alpha_float,
    alpha_float_gram,
)
from exactident.numeric.rounding import float_format, round_values

__all__ = ["build_sequential", "gamma_free_torch", "gamma_torch", "import_torch", "torch_full_jacobian_rank",
           "torch_sample", "torch_spectra"]


def import_torch():
    """Import torch or raise :class:`~exactident.errors.UnsupportedCaseError` naming the extra to install."""
    try:
        import torch
    except ImportError:
        raise UnsupportedCaseError("the torch backend needs PyTorch: pip install 'exactident[torch]' "
                                   "(CPU build: pip install torch==2.13.0)") from None
    return torch


def build_sequential(net: Network, dtype_name: str = "float32"):
    """``torch.nn.Sequential`` of ``Linear``/``ReLU`` holding the rounded parameters.

    Parameters
    ----------
    net : Network
        Exact parameters (Q), each rounded once to the nearest ``dtype_name`` value
        (:func:`exactident.numeric.rounding.round_rational`; never via float64).
    dtype_name : {"float32", "float64", "float16", "bfloat16"}

    Returns
    -------
    torch.nn.Sequential
        Modules ``0, 2, 4, ...`` are the ``Linear`` layers ``W_1, b_1, W_2, ...``.

    Raises
    ------
    FloatPipelineError
        ``overflow`` when a parameter is beyond the format's range.
    """
    torch = import_torch()
    dtype = getattr(torch, dtype_name)
    fmt = float_format(dtype_name)
    layers = []
    over: list[str] = []
    for l in range(1, net.L + 1):
        M = net.W[l - 1]
        rw, rb = round_values(M.entries(), fmt), round_values(net.b[l - 1], fmt)
        over += [f"W_{l}[{k // M.ncols()},{k % M.ncols()}]" for k in rw.overflow]
        over += [f"b_{l}[{k}]" for k in rb.overflow]
        lin = torch.nn.Linear(net.widths[l - 1], net.widths[l], dtype=dtype)
        with torch.no_grad():  # the float64 values are exactly representable in dtype: exact casts
            lin.weight.copy_(torch.tensor(rw.values, dtype=torch.float64).reshape(M.nrows(), M.ncols()).to(dtype))
            lin.bias.copy_(torch.tensor(rb.values, dtype=torch.float64).to(dtype))
        layers.append(lin)
        if l < net.L:
            layers.append(torch.nn.ReLU())
    if over:
        raise FloatPipelineError(FloatFailure("overflow", f"torch-{dtype_name}/parameters", over[:MAX_WHERE_ENTRIES],
                                              len(over), f"{len(over)} parameter(s) beyond the largest "
                                              f"{dtype_name} ({', '.join(over[:3])}): they round to inf"))
    return torch.nn.Sequential(*layers)


def torch_sample(X: Sequence[Sequence[flint.fmpq]], n_inputs: int, dtype_name: str):
    """The sample as a torch tensor ``(n, N_0)``, each entry rounded once to ``dtype_name``.

    Raises
    ------
    FloatPipelineError
        ``overflow`` when an entry is beyond the format's range.
    """
    torch = import_torch()
    fmt = float_format(dtype_name)
    r = round_values([v for row in X for v in row], fmt)
    if r.overflow:
        names = [f"X[{k // n_inputs},{k % n_inputs}]" for k in r.overflow]
        raise FloatPipelineError(FloatFailure("overflow", f"torch-{dtype_name}/sample", names[:MAX_WHERE_ENTRIES],
                                              len(names), f"{len(names)} sample value(s) beyond the largest "
                                              f"{dtype_name} ({', '.join(names[:3])}): they round to inf"))
    return torch.tensor(r.values, dtype=torch.float64).reshape(len(X), n_inputs).to(getattr(torch, dtype_name))


def _require_finite_torch(torch, M, stage: str) -> None:
    if M.numel() and not bool(torch.isfinite(M).all()):
        nan = bool(torch.isnan(M).any())
        bad = torch.nonzero(torch.isnan(M) if nan else ~torch.isfinite(M))
        names = [f"[{', '.join(str(int(v)) for v in idx)}]" for idx in bad[:MAX_WHERE_ENTRIES]]
        raise FloatPipelineError(FloatFailure("non-finite" if nan else "overflow", stage, names, len(bad),
                                              f"the float pipeline produced {'nan' if nan else 'inf'} at {stage}"))


def _svdvals_torch(torch, M, stage: str) -> np.ndarray:
    """Singular values by ``torch.linalg.svdvals`` after a finiteness check (float64 numpy, descending)."""
    _require_finite_torch(torch, M, stage)
    if not M.numel():
        return np.zeros(0)
    try:
        s = torch.linalg.svdvals(M).double().numpy()
    except RuntimeError as exc:  # torch's LinAlgError subclasses RuntimeError
        failure = FloatFailure("svd-failed", stage, [], 0, f"the SVD at {stage} failed: {exc}")
        raise FloatPipelineError(failure) from None
    if not np.isfinite(s).all():
        raise FloatPipelineError(FloatFailure("overflow" if not np.isnan(s).any() else "non-finite", stage, [], 0,
                                              f"the SVD at {stage} returned non-finite singular values"))
    return s


def torch_full_jacobian_rank(net: Network, X: Sequence[Sequence[flint.fmpq]], dtype_name: str = "float32"
                             ) -> tuple[int, float, np.ndarray, tuple[int, int], float]:
    """``torch.linalg.matrix_rank`` of the full Jacobian (every weight and bias) in ``dtype_name``.

    Returns
    -------
    (rank, tol, singular_values, shape, eps)
        ``tol`` is torch's default (``sigma_1 max(m, n) eps``); singular values
        from ``torch.linalg.svdvals`` (as float64 numpy, descending).

    Raises
    ------
    FloatPipelineError
        Out-of-range values, non-finite Jacobian, failed SVD.
    """
    torch = import_torch()
    model = build_sequential(net, dtype_name)
    Xt = torch_sample(X, net.widths[0], dtype_name)
    stage = f"full-jacobian/torch-{dtype_name}"
    G = gamma_torch(model, Xt, range(len(all_parameters(net))))
    s = _svdvals_torch(torch, G, stage + "/svd-gamma")
    tol = float(s[0]) * max(G.shape) * float(torch.finfo(G.dtype).eps) if s.size else 0.0
    rank = int(torch.linalg.matrix_rank(G)) if G.numel() else 0
    return rank, tol, s, (int(G.shape[0]), int(G.shape[1])), float(torch.finfo(G.dtype).eps)


def gamma_torch(model, Xt, cols: Sequence[int]):
    """``Gamma`` by ``torch.func.jacrev``: shape ``(n N_L, dim)``, rows ``i N_L + k``.

    ``cols`` selects the free parameters (fixed edges excluded) from the full
    flattened parameter vector.
    """
    torch = import_torch()
    from torch.func import functional_call, jacrev

    params = {k: v.detach() for k, v in model.named_parameters()}
    names = list(params)

    def f(p):
        return functional_call(model, p, (Xt,))

    n, N_L = Xt.shape[0], model[-1].out_features
    if n == 0:
        return torch.zeros((0, len(cols)), dtype=Xt.dtype)
    jac = jacrev(f)(params)  # name -> (n, N_L, *param.shape)
    full = torch.cat([jac[k].reshape(n * N_L, -1) for k in names], dim=1)
    return full[:, list(cols)]


def torch_spectra(net: Network, X: Sequence[Sequence[flint.fmpq]], fixed: FixedEdges,
                  exact_pattern: Sequence[np.ndarray], dtype_name: str = "float32", columns: str = "free"):
    """Singular values and default ranks of torch's ``Gamma`` and ``alpha``.

    ``columns="all"``: the full Jacobian (every weight and bias, fixed edges
    included), backend name ``torch-full-jacobian-<dtype>``.

    Returns
    -------
    exactident.crosscheck.core.Spectra
        ``native_default`` = ``(torch.linalg.matrix_rank(Gamma), torch.linalg.matrix_rank(alpha))``
        with default tolerances; ``alpha`` is built from torch's own pattern
        (``z > 0``) so that ``Gamma = alpha Dpsi`` holds for the same pattern.

    Raises
    ------
    FloatPipelineError
        Out-of-range values, non-finite values, failed SVD (:mod:`exactident.numeric.guard`).
    """
    torch = import_torch()
    from exactident.numeric.spectra import Spectra

    dtype = getattr(torch, dtype_name)
    name = f"torch-{dtype_name}" if columns == "free" else f"torch-full-jacobian-{dtype_name}"
    log = WarningLog()
    model = build_sequential(net, dtype_name)
    Xt = torch_sample(X, net.widths[0], dtype_name)
    with torch.no_grad():
        h, pattern = Xt, []
        for module in model:
            if isinstance(module, torch.nn.ReLU):
                _require_finite_torch(torch, h, f"{name}/forward")
                pattern.append((h > 0).numpy())  # autograd's relu'(0) = 0
            h = module(h)
        _require_finite_torch(torch, h, f"{name}/forward")
    flips = int(sum(int(np.sum(a != b)) for a, b in zip(pattern, exact_pattern)))
    cols = free_columns(net, fixed) if columns == "free" else range(len(all_parameters(net)))
    G = gamma_torch(model, Xt, cols)
    Xn = Xt.numpy()
    with log.stage(f"{name}/alpha"):
        if not X:
            A, gram = torch.zeros((0, n_paths(net.widths)), dtype=dtype), False
        elif len(X) * n_paths(net.widths) <= MAX_ALPHA_ENTRIES:
            A, gram = torch.from_numpy(alpha_float(pattern, Xn)), False
        else:
            A, gram = torch.from_numpy(alpha_float_gram(pattern, Xn)), True
    g_sv = _svdvals_torch(torch, G, f"{name}/svd-gamma")
    a_sv = _svdvals_torch(torch, A, f"{name}/svd-alpha")
    if gram:
        a_sv = np.sqrt(np.clip(a_sv, 0, None))
    rg = int(torch.linalg.matrix_rank(G)) if G.numel() else 0
    ra = int(torch.linalg.matrix_rank(A)) if A.numel() else 0
    return Spectra(name, float(torch.finfo(dtype).eps), g_sv, tuple(G.shape),
                   a_sv, (len(X), n_paths(net.widths)), flips, (rg, ra), warnings=log.entries)


def gamma_free_torch(net: object, X: Sequence[Sequence[flint.fmpq]], dtype: str = "float64") -> np.ndarray:
    """``Gamma_free`` by ``torch.func.jacrev`` of the outputs with respect to ``theta`` (any network).

    The dense weights are built from ``theta`` by gathering (``W = T theta + c``,
    :func:`exactident.numeric.float_network.to_float_network`), the units apply
    ``torch.where(z >= 0, z, a z)`` (derivative 1 at ``z = 0``, as the ``>= 0`` convention).

    Returns
    -------
    ndarray, shape ``(n N_L, n_params)``, in ``dtype``

    Raises
    ------
    UnsupportedCaseError
        Without PyTorch.
    """
    torch = import_torch()
    from torch.func import jacrev

    fmt = float_format(dtype)
    tdt = {"float64": torch.float64, "float32": torch.float32}[fmt.name]
    fnet = to_float_network(net, dtype)
    k = int(fnet.n_params or 0)
    theta0 = np.zeros(k, dtype=np.float64)
    for values, index in zip(fnet.W + fnet.b + fnet.slope, fnet.W_index + fnet.b_index + fnet.slope_index):
        theta0[index[index >= 0]] = values[index >= 0]  # tied entries hold the same float
    Xf = torch.tensor(np.array(round_values([v for r in X for v in r], fmt).values,
                               dtype=np.float64).reshape(len(X), fnet.widths[0]), dtype=tdt)

    def gathered(values: np.ndarray, index: np.ndarray, theta):
        fixed = torch.tensor(np.where(index >= 0, 0, values).astype(np.float64), dtype=tdt)
        idx = torch.tensor(np.where(index >= 0, index, 0), dtype=torch.long)
        return torch.where(torch.tensor(index >= 0), theta[idx], fixed)

    def f(theta):
        h = Xf
        for l in range(1, fnet.L + 1):
            Wl = gathered(fnet.W[l - 1], np.asarray(fnet.W_index[l - 1]), theta)
            bl = gathered(fnet.b[l - 1], np.asarray(fnet.b_index[l - 1]), theta)
            z = h @ Wl.T + bl
            if l == fnet.L:
                return z
            a = gathered(fnet.slope[l - 1], np.asarray(fnet.slope_index[l - 1]), theta)
            h = torch.where(z >= 0, z, a * z)
        return h

    J = jacrev(f)(torch.tensor(theta0, dtype=tdt))  # (n, N_L, k)
    return J.detach().cpu().numpy().reshape(len(X) * fnet.widths[-1], k)
