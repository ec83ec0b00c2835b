"""The network ``theta = (W_l, b_l)_{l=1..L}`` and its exact forward pass (paper §2.1).

Widths ``N_0, ..., N_L`` (``L >= 1``; ``L = 1`` is the affine case with no
hidden neuron).  ``W[l-1]`` holds ``W_l`` as an ``fmpq_mat`` of shape
``(N_l, N_{l-1})`` and ``b[l-1]`` holds ``b_l`` as a list of ``N_l`` fmpq: the
code is 0-based, the paper's layer numbers are 1-based.  Everything is in Q.

Used by :mod:`exactident.model.fixed_edges`, :mod:`exactident.model.activation`,
:mod:`exactident.model.gamma` and :mod:`exactident.model.lifting`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import flint

from exactident.errors import CaseFormatError

__all__ = [
    "Network",
    "degenerate_neurons",
    "is_degenerate",
    "pre_activations",
    "relu_fmpq_mat",
    "sample_matrix",
]


@dataclass
class Network:
    """A ReLU network with exact rational parameters.

    Attributes
    ----------
    widths : tuple of int
        ``(N_0, ..., N_L)``, ``L >= 1``.
    W : list of fmpq_mat
        ``W[l-1]`` is ``W_l``, shape ``(N_l, N_{l-1})``, entries in Q.
    b : list of list of fmpq
        ``b[l-1]`` is ``b_l``, length ``N_l``.
    """

    widths: tuple[int, ...]
    W: list[flint.fmpq_mat]
    b: list[list[flint.fmpq]]

    def __post_init__(self) -> None:
        # Validate once, at construction: a float or a wrong shape must not reach the exact path.
        # Exact entries (int, Fraction, fmpz) are converted to fmpq; anything else is refused.
        where = "<Network>"
        widths = self.widths
        if (not isinstance(widths, (tuple, list)) or len(widths) < 2
                or any(isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in widths)):
            raise CaseFormatError(where, "widths", f"expected at least two positive integers, found {widths!r}")
        self.widths = tuple(widths)
        L = len(widths) - 1
        if len(self.W) != L or len(self.b) != L:
            found = f"{len(self.W)} W, {len(self.b)} b"
            raise CaseFormatError(where, "W" if len(self.W) != L else "b",
                                  f"expected {L} layers for widths {list(widths)}, found {found}")
        self.W = [_exact_matrix(M, widths[l + 1], widths[l], f"W_{l + 1}") for l, M in enumerate(self.W)]
        self.b = [_exact_vector(v, widths[l + 1], f"b_{l + 1}") for l, v in enumerate(self.b)]

    @property
    def L(self) -> int:
        """Number of weight layers ``L`` (hidden layers are ``1..L-1``)."""
        return len(self.widths) - 1

    @property
    def dim(self) -> int:
        """``dim = N_0 N_1 + ... + N_{L-1} N_L + N_L`` (docs/theory.md).

        Equals ``|F_theta| + |B|``: one outgoing edge per hidden neuron is fixed,
        so the hidden biases are "paid for" by the fixed edges.

        Examples
        --------
        >>> Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])], [[1], [0]]).dim
        3
        """
        w = self.widths
        return sum(w[l] * w[l + 1] for l in range(self.L)) + w[-1]

    def hidden_layers(self) -> range:
        """Paper indices ``l = 1..L-1`` of the hidden layers."""
        return range(1, self.L)

    def copy(self) -> Network:
        return Network(self.widths, [flint.fmpq_mat(M) for M in self.W], [list(v) for v in self.b])


_HINT = "numpy arrays and floats: use Case.from_arrays, which converts them exactly"


def _exact_matrix(M: object, rows: int, cols: int, field: str) -> flint.fmpq_mat:
    if isinstance(M, flint.fmpq_mat):
        out = M
    elif isinstance(M, flint.fmpz_mat):
        out = flint.fmpq_mat(M)
    elif isinstance(M, (list, tuple)) and all(isinstance(r, (list, tuple)) for r in M):
        out = flint.fmpq_mat([[_exact(v, f"{field}[{i}][{j}]") for j, v in enumerate(r)] for i, r in enumerate(M)]) \
            if M and M[0] else flint.fmpq_mat(len(M), 0)
    else:
        raise CaseFormatError("<Network>", field, f"expected an fmpq_mat or nested lists of exact numbers, "
                              f"found {type(M).__name__} ({_HINT})")
    if (out.nrows(), out.ncols()) != (rows, cols):
        found = f"({out.nrows()}, {out.ncols()})"
        raise CaseFormatError("<Network>", field, f"expected shape ({rows}, {cols}), found {found}")
    return out


def _exact_vector(v: object, n: int, field: str) -> list[flint.fmpq]:
    if not isinstance(v, (list, tuple)):
        found = type(v).__name__
        raise CaseFormatError("<Network>", field, f"expected a list of exact numbers, found {found} ({_HINT})")
    if len(v) != n:
        raise CaseFormatError("<Network>", field, f"expected {n} entries, found {len(v)}")
    return [_exact(x, f"{field}[{i}]") for i, x in enumerate(v)]


def _exact(value: object, field: str) -> flint.fmpq:
    # model sits below io (docs/architecture.md), so this is not io.rationals.to_fmpq: the same
    # exact types, without the parsing of strings that only files need.
    if isinstance(value, flint.fmpq):
        return value
    if isinstance(value, (int, flint.fmpz)) and not isinstance(value, bool):
        return flint.fmpq(value)
    if isinstance(value, Fraction):
        return flint.fmpq(value.numerator, value.denominator)
    raise CaseFormatError("<Network>", field, f"expected an exact number (int, Fraction, fmpz, fmpq), "
                          f"found {value!r} ({_HINT})")


def sample_matrix(X: Sequence[Sequence[flint.fmpq]], n_inputs: int) -> flint.fmpq_mat:
    """``X`` as an ``fmpq_mat`` of shape ``(n, N_0)``."""
    return flint.fmpq_mat(len(X), n_inputs, [v for row in X for v in row])


def _add_bias(Z: flint.fmpq_mat, bias: Sequence[flint.fmpq]) -> flint.fmpq_mat:
    B = flint.fmpq_mat(Z.nrows(), Z.ncols(), list(bias) * Z.nrows())
    return Z + B


def relu_fmpq_mat(Z: flint.fmpq_mat) -> flint.fmpq_mat:
    """Entrywise ``max(z, 0)`` (ReLU at 0 is 0 on either side: no convention needed)."""
    zero = flint.fmpq(0)
    return flint.fmpq_mat(Z.nrows(), Z.ncols(), [z if z > zero else zero for z in Z.entries()])


def pre_activations(net: Network, X: Sequence[Sequence[flint.fmpq]]) -> list[flint.fmpq_mat]:
    """Exact pre-activations ``z_l(x^i)`` for ``l = 1..L``.

    Parameters
    ----------
    net : Network
    X : n rows of N_0 fmpq

    Returns
    -------
    list of fmpq_mat
        Element ``l-1`` has shape ``(n, N_l)``; the last one is ``f_theta(X)``.

    Examples
    --------
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])],
    ...               [[flint.fmpq(1)], [flint.fmpq(0)]])
    >>> [Z.entries() for Z in pre_activations(net, [[0], [1], [flint.fmpq(-1, 2)]])]
    [[1, 3, 0], [3, 9, 0]]
    """
    H = sample_matrix(X, net.widths[0])
    out = []
    for l in range(1, net.L + 1):
        Z = _add_bias(H * net.W[l - 1].transpose(), net.b[l - 1])
        out.append(Z)
        H = relu_fmpq_mat(Z)
    return out


def degenerate_neurons(net: Network) -> list[tuple[int, int, str]]:
    """Hidden neurons that put ``theta`` in the degenerate set ``S``.

    Returns
    -------
    list of (l, v, why)
        ``why`` is ``"outgoing"`` (all outgoing weights zero) or ``"incoming"``
        (all incoming weights and the bias zero).  Paper §3 (definition of S).
    """
    out = []
    zero = flint.fmpq(0)
    for l in net.hidden_layers():
        W_in, W_out = net.W[l - 1], net.W[l]
        for v in range(net.widths[l]):
            if all(W_out[k, v] == zero for k in range(W_out.nrows())):
                out.append((l, v, "outgoing"))
            elif all(W_in[v, j] == zero for j in range(W_in.ncols())) and net.b[l - 1][v] == zero:
                out.append((l, v, "incoming"))
    return out


def is_degenerate(net: Network) -> bool:
    """``theta in S`` (see :func:`degenerate_neurons`)."""
    return bool(degenerate_neurons(net))
