"""Forward check: does the imported exact network compute what the framework computes?

Every importer proves it read the trained network by comparing the framework's own
forward pass on the sample with a float64 forward pass of the *imported* exact
network, within a rigorous forward rounding-error bound in the stored dtype
(Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., Sec. 3.5:
``|fl(W h + b) - (W h + b)| <= gamma_k (|W| |h| + |b|)``, ``gamma_k = k u / (1 - k u)``,
propagated layer by layer through the 1-Lipschitz ReLU).

The framework may compute in a lower precision (``u`` is the largest unit roundoff
of the weights' and the input's dtypes) and in any summation order; the bound
covers both sides (factor 2).  A difference past the bound means the import is not
the network the framework computes: an error naming the first differing sample and
output.
"""

from __future__ import annotations

from collections.abc import Sequence

import flint
import numpy as np

from exactident.errors import CaseFormatError
from exactident.model.network import Network

__all__ = ["UNIT_ROUNDOFF", "compare_outputs", "forward_bound", "forward_check"]

#: Unit roundoff ``u`` of each stored dtype (round to nearest).
UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}


def _float_matrix(M: flint.fmpq_mat) -> np.ndarray:
    return np.array([[int(M[i, j].p) / int(M[i, j].q) for j in range(M.ncols())] for i in range(M.nrows())],
                    dtype=np.float64).reshape(M.nrows(), M.ncols())


def forward_bound(net: Network, X: np.ndarray, dtypes: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Float64 forward pass of ``net`` on ``X`` and a rigorous bound on its distance to any
    evaluation of the same network in the given dtypes.

    Parameters
    ----------
    net : Network
        Exact weights (Q).
    X : float64 ndarray, shape ``(n, N_0)``
    dtypes : sequence of str
        Dtype names of the weights and the input as the framework stores them
        (``float64``, ``float32``, ``float16``, ``bfloat16``; unknown names count as float32).

    Returns
    -------
    (outputs, bound) : float64 ndarrays, shape ``(n, N_L)``
        ``|framework(X) - outputs| <= bound`` for a framework that evaluates the same
        network in those dtypes, in any summation order.
    """
    h = np.asarray(X, dtype=np.float64).reshape(len(X), net.widths[0])
    mag = np.abs(h)
    err = np.zeros_like(h)
    u = max([UNIT_ROUNDOFF.get(n, 2.0**-24) for n in dtypes] or [2.0**-53]) + 2.0**-53
    for l in range(1, net.L + 1):
        Wf = _float_matrix(net.W[l - 1])
        bf = np.array([int(v.p) / int(v.q) for v in net.b[l - 1]], dtype=np.float64)
        k = Wf.shape[1] + 3
        gamma = k * u / (1 - k * u)
        h = h @ Wf.T + bf
        err = (np.abs(Wf) @ err.T + gamma * (np.abs(Wf) @ mag.T + np.abs(bf)[:, None])).T
        mag = mag @ np.abs(Wf).T + np.abs(bf)
        if l < net.L:
            h = np.maximum(h, 0)
    return h, 2 * err + np.finfo(np.float64).tiny


def forward_check(net: Network, X: np.ndarray, reference: np.ndarray, dtypes: Sequence[str], source: str,
                  what: str) -> str:
    """Compare the framework's outputs ``reference`` with the imported network on ``X``.

    Parameters
    ----------
    net : Network
        The imported exact network.
    X : float64 ndarray, shape ``(n, N_0)``
        The inputs the framework saw (already rounded to its input dtype).
    reference : ndarray, shape ``(n, N_L)``
        The framework's own outputs (before any dropped output activation).
    dtypes : sequence of str
        Stored dtypes of the weights and the input.
    source : str
        File or object name for messages.
    what : str
        Who computed ``reference`` (e.g. ``"torch forward"``), for messages and the summary.

    Returns
    -------
    str
        A one-line summary for the provenance (rows, largest difference, bound).

    Raises
    ------
    CaseFormatError
        Shapes differ, or an output differs by more than the bound: the import would not
        be the network the framework computes (names the first differing sample and output).

    Examples
    --------
    >>> import flint
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])], [[1], [0]])
    >>> X = np.array([[0.0], [1.0]])
    >>> forward_check(net, X, np.array([[3.0], [9.0]]), ["float64"], "m.pt", "torch forward")[:41]
    'torch forward on 2 rows: max |difference|'
    >>> try:
    ...     forward_check(net, X, np.array([[3.0], [9.5]]), ["float64"], "m.pt", "torch forward")
    ... except CaseFormatError as e:
    ...     print(e)  # doctest: +ELLIPSIS
    m.pt: forward check: the imported network differs from torch forward at sample 1, output 0: 9.0 vs 9.5 ...
    """
    h, bound = forward_bound(net, X, dtypes)
    ref = np.asarray(reference, dtype=np.float64)
    if ref.ndim == 1 and h.shape[1] == 1:
        ref = ref.reshape(-1, 1)
    return compare_outputs(h, bound, ref, source, what)


def compare_outputs(h: np.ndarray, bound: np.ndarray, ref: np.ndarray, source: str, what: str) -> str:
    """Compare the framework's outputs ``ref`` with the imported network's ``h`` within ``bound``.

    Parameters
    ----------
    h, bound, ref : float64 arrays of shape ``(n, N_L)``
        The imported network's outputs, the rounding bound per output, the framework's outputs.

    Returns
    -------
    str
        The one-line summary of :func:`forward_check`.

    Raises
    ------
    CaseFormatError
        Shapes differ, or an output differs past the bound (naming the first sample and output).
    """
    if ref.shape != h.shape:
        raise CaseFormatError(source, "forward check", f"{what} gives outputs of shape {ref.shape}, the imported "
                              f"network {h.shape}")
    diff = np.abs(ref - h)
    bad = ~np.isfinite(ref) | (diff > bound)
    if np.any(bad):
        i, j = (int(v) for v in np.argwhere(bad)[0])
        raise CaseFormatError(source, "forward check", f"the imported network differs from {what} at sample {i}, "
                              f"output {j}: {float(h[i, j])!r} vs {float(ref[i, j])!r} (bound {bound[i, j]:.2g})")
    return (f"{what} on {h.shape[0]} rows: max |difference| {float(diff.max(initial=0.0)):.3g} within the "
            f"rounding bound (max {float(bound.max(initial=0.0)):.3g})")
