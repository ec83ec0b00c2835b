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
from exactident.numeric.numpy_backend import (
    MAX_ALPHA_ENTRIES,
    alpha_float,
    alpha_float_gram,
    to_float_network,
    to_float_sample,
)

__all__ = ["build_sequential", "gamma_torch", "import_torch", "torch_spectra"]


def import_torch():
    """Import torch or raise :class:`UnsupportedCaseError` naming the extra to install."""
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
        Exact parameters (Q), rounded to the nearest float64 then to ``dtype_name``.
    dtype_name : {"float32", "float64"}

    Returns
    -------
    torch.nn.Sequential
        Modules ``0, 2, 4, ...`` are the ``Linear`` layers ``W_1, b_1, W_2, ...``.
    """
    torch = import_torch()
    dtype = getattr(torch, dtype_name)
    fnet = to_float_network(net, np.float64)
    layers = []
    for l in range(1, net.L + 1):
        lin = torch.nn.Linear(net.widths[l - 1], net.widths[l], dtype=dtype)
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(fnet.W[l - 1]).to(dtype))
            lin.bias.copy_(torch.from_numpy(fnet.b[l - 1]).to(dtype))
        layers.append(lin)
        if l < net.L:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


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
                  exact_pattern: Sequence[np.ndarray], dtype_name: str = "float32"):
    """Singular values and default ranks of torch's ``Gamma`` and ``alpha``.

    Returns
    -------
    exactident.crosscheck.core.Spectra
        ``native_default`` = ``(torch.linalg.matrix_rank(Gamma), torch.linalg.matrix_rank(alpha))``
        with default tolerances; ``alpha`` is built from torch's own pattern
        (``z > 0``) so that ``Gamma = alpha Dpsi`` holds for the same pattern.
    """
    torch = import_torch()
    from exactident.numeric.spectra import Spectra

    dtype = getattr(torch, dtype_name)
    model = build_sequential(net, dtype_name)
    Xt = torch.from_numpy(to_float_sample(X, net.widths[0], np.float64)).to(dtype)
    with torch.no_grad():
        h, pattern = Xt, []
        for module in model:
            if isinstance(module, torch.nn.ReLU):
                pattern.append((h > 0).numpy())  # autograd's relu'(0) = 0
            h = module(h)
    flips = int(sum(int(np.sum(a != b)) for a, b in zip(pattern, exact_pattern)))
    G = gamma_torch(model, Xt, free_columns(net, fixed))
    Xn = Xt.numpy()
    if not X:
        A, gram = torch.zeros((0, n_paths(net.widths)), dtype=dtype), False
    elif len(X) * n_paths(net.widths) <= MAX_ALPHA_ENTRIES:
        A, gram = torch.from_numpy(alpha_float(pattern, Xn)), False
    else:
        A, gram = torch.from_numpy(alpha_float_gram(pattern, Xn)), True
    g_sv = torch.linalg.svdvals(G).double().numpy() if G.numel() else np.zeros(0)
    a_sv = torch.linalg.svdvals(A).double().numpy() if A.numel() else np.zeros(0)
    if gram:
        a_sv = np.sqrt(np.clip(a_sv, 0, None))
    rg = int(torch.linalg.matrix_rank(G)) if G.numel() else 0
    ra = int(torch.linalg.matrix_rank(A)) if A.numel() else 0
    return Spectra(f"torch-{dtype_name}", float(torch.finfo(dtype).eps), g_sv, tuple(G.shape),
                   a_sv, (len(X), n_paths(net.widths)), flips, (rg, ra))
