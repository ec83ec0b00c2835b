"""The network ``theta = (W_l, b_l)_{l=1..L}`` and its exact forward pass (paper §2.1).

Widths ``N_0, ..., N_L`` (``L >= 1``; ``L = 1`` is the affine case with no hidden neuron).
``W[l-1]`` holds ``W_l`` as an ``fmpq_mat`` of shape ``(N_l, N_{l-1})`` and ``b[l-1]`` holds
``b_l`` as a list of ``N_l`` fmpq: the code is 0-based, the paper's layer numbers are 1-based.
Everything is in Q.

One class holds every network exactident analyses.  ``Network(widths, W, b)`` is the paper's
layered, fully connected ReLU MLP.  Every architecture beyond it (convolution, pooling, skip
connections, leaky ReLU, PReLU, layers without bias) compiles (:mod:`exactident.model.compile`)
to the same layered form with weights ``W = T theta + c``: each dense entry is either **fixed**
(its value is part of ``c``) or **equal to one free parameter** ``theta_j`` (a column of ``T``
with 0/1 entries; a convolution weight feeds many entries).  Skips are carried up through the
intermediate layers by *linear* units (no kink) with fixed weights 1, so the network stays layered.
Hidden unit ``v`` of layer ``l`` computes ``h = z`` for ``z >= 0`` and ``h = a z`` for ``z < 0``:
``a`` is 0 for ReLU, a fixed rational for leaky ReLU, a free parameter for PReLU, 1 for a linear
unit.  The output layer ``L`` is affine (logits).

The plain MLP is the special case ``T = I`` (every entry free, numbered ``W_l`` row-major then
``b_l``), ``c = 0``, every slope 0, no feature (:meth:`Network.is_plain`); built as
``Network(widths, W, b)`` it holds no index array (they are derived on first read).

References
----------
Bona-Pellissier, Malgouyres, Bachoc, arXiv:2206.07424 (Prop. 1 keeps its form with slopes in the pattern).
Gonon, Brisebarre, Riccietti, Gribonval, arXiv:2310.01225 (ReLU networks on a DAG with skips and pooling).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import flint
import numpy as np

from exactident.errors import CaseFormatError, UnsupportedCaseError
from exactident.model.names import CARRIER_PREFIX, Names
from exactident.model.param_index import (
    Block,
    check_indices,
    dense_indices,
    dense_names,
    exact,
    exact_matrix,
    exact_vector,
    index_array,
)

__all__ = [
    "CARRIER_PREFIX",
    "Network",
    "degenerate_neurons",
    "is_degenerate",
    "pre_activations",
    "relu_fmpq_mat",
    "sample_matrix",
]

_WHERE = "<Network>"


class Network(Names):
    """A layered piecewise-linear network with exact rational parameters, ``W = T theta + c`` (module docstring).

    ``Network(widths, W, b)`` is the plain ReLU MLP (every weight and bias free, every slope 0); the
    other arguments describe a compiled layer graph (:mod:`exactident.model.compile`).

    Attributes
    ----------
    widths : tuple of int
        ``(N_0, ..., N_L)``, ``L >= 1`` (after compilation: carrier units included).
    W : list of fmpq_mat
        ``W[l-1]`` is ``W_l``, shape ``(N_l, N_{l-1})``, entries in Q (current values).
    b : list of list of fmpq
        ``b[l-1]`` is ``b_l``, length ``N_l``.
    W_index : list of int64 ndarray
        ``W_index[l-1]`` has shape ``(N_l, N_{l-1})``: ``-1`` when the entry is fixed at its
        value in ``W``, ``j >= 0`` when it equals the free parameter ``theta_j``.  Omitted: every
        entry free, numbered ``W_l`` row-major then ``b_l`` for ``l = 1..L`` (built on first read).
    b_index : list of int64 ndarray
        ``b_index[l-1]`` has shape ``(N_l,)``, same convention.
    negative_slope : list of list of fmpq
        ``negative_slope[l-1]`` (hidden layers ``l = 1..L-1``): the slope ``a`` on ``z < 0``
        (0 ReLU, ``a`` leaky ReLU, the current value for PReLU, 1 for a linear unit).  Omitted: 0.
    slope_index : list of int64 ndarray
        ``slope_index[l-1]``, shape ``(N_l,)``: ``-1`` fixed slope, ``j >= 0`` a PReLU slope
        equal to ``theta_j`` (the parameter may be shared by a channel).  Omitted: all ``-1``.
    n_params : int
        ``k``, the number of free parameters; every index ``0..k-1`` is used at least once.
        Needed with index arrays; omitted, ``sum_l N_l (N_{l-1} + 1)``.
    features : tuple of str
        What makes this network more than a plain MLP, in words used by verdict reasons:
        ``"convolution"``, ``"average pooling"``, ``"skip connection"``, ``"leaky ReLU"``,
        ``"PReLU"``, ``"linear layer"``, ``"fixed weights"``.  Empty for a plain MLP.
    param_names : list of str
        ``param_names[j]`` names ``theta_j`` in the framework's terms, e.g. ``"conv1.weight[2,0,1,1]"``.
        Omitted with the index arrays: ``W_l[i,j]``, ``b_l[i]``; else none (``theta_j``).
    unit_names : list of list of str
        ``unit_names[l-1][v]`` names hidden or output unit ``v`` of layer ``l``, e.g.
        ``"conv1[c=2,y=1,x=0]"`` or ``"skip(input[3])"`` for a carrier.

    Raises
    ------
    CaseFormatError
        On a wrong shape, a float, tied entries with different values, a linear unit with a
        PReLU parameter, or an unused parameter index.

    Examples
    --------
    >>> net = Network((1, 2, 1), [[[1], [2]], [[3, 4]]], [[0, -1], [5]])
    >>> net.n_params, net.is_plain(), [str(t) for t in net.theta()]
    (7, True, ['1', '2', '0', '-1', '3', '4', '5'])
    """

    widths: tuple[int, ...]
    W: list[flint.fmpq_mat]
    b: list[list[flint.fmpq]]
    n_params: int
    features: tuple[str, ...]
    unit_names: list[list[str]]
    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def __init__(self, widths: Sequence[int], W: Sequence[object], b: Sequence[object],
                 W_index: Sequence[object] | None = None, b_index: Sequence[object] | None = None,
                 negative_slope: Sequence[object] | None = None, slope_index: Sequence[object] | None = None,
                 n_params: int | None = None, features: Sequence[str] = (), param_names: Sequence[str] | None = None,
                 unit_names: list[list[str]] | None = None) -> None:
        # Validate once, at construction: a float or a wrong shape must not reach the exact path.
        # Exact entries (int, Fraction, fmpz) are converted to fmpq; anything else is refused.
        if (not isinstance(widths, (tuple, list)) or len(widths) < 2
                or any(isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in widths)):
            raise CaseFormatError(_WHERE, "widths", f"expected at least two positive integers, found {widths!r}")
        self.widths = w = tuple(widths)
        L = len(w) - 1
        if len(W) != L or len(b) != L:
            raise CaseFormatError(_WHERE, "W" if len(W) != L else "b",
                                  f"expected {L} layers for widths {list(w)}, found {len(W)} W, {len(b)} b")
        self.W = [exact_matrix(M, w[l + 1], w[l], f"W_{l + 1}") for l, M in enumerate(W)]
        self.b = [exact_vector(v, w[l + 1], f"b_{l + 1}") for l, v in enumerate(b)]
        self.features = tuple(features)
        self.unit_names = unit_names if unit_names is not None else []
        self._negative_slope: list[list[flint.fmpq]] | None = None if negative_slope is None else [
            exact_vector(s, w[l], f"negative_slope[{l - 1}]")
            for l, s in zip(range(1, L), _n(negative_slope, L - 1, "negative_slope"))]
        self._param_names = None if param_names is None else list(param_names)
        self._W_index: list[np.ndarray] | None = None
        self._b_index: list[np.ndarray] | None = None
        self._slope_index: list[np.ndarray] | None = None
        n_dense = sum(w[l] * (w[l - 1] + 1) for l in range(1, L + 1))
        # T = I (no index array given): nothing to build or check; the arrays are derived on first read.
        self._dense = W_index is None and b_index is None and slope_index is None
        if self._dense:
            if n_params is not None and n_params != n_dense:
                raise CaseFormatError(_WHERE, "n_params", f"expected {n_dense} without index arrays (every weight "
                                      f"and bias free), found {n_params!r}")
            self.n_params = n_dense
        else:
            if isinstance(n_params, bool) or not isinstance(n_params, int) or n_params < 0:
                raise CaseFormatError(_WHERE, "n_params", f"expected a non-negative integer, found {n_params!r}")
            self.n_params = n_params
            if W_index is None or b_index is None:
                W_index, b_index, _ = dense_indices(w)
            self._W_index = [index_array(M, (w[l + 1], w[l]), f"W_index[{l}]")
                             for l, M in enumerate(_n(W_index, L, "W_index"))]
            self._b_index = [index_array(v, (w[l + 1],), f"b_index[{l}]")
                             for l, v in enumerate(_n(b_index, L, "b_index"))]
            self._slope_index = ([np.full(w[l], -1, dtype=np.int64) for l in range(1, L)] if slope_index is None else
                                 [index_array(s, (w[l],), f"slope_index[{l - 1}]")
                                  for l, s in zip(range(1, L), _n(slope_index, L - 1, "slope_index"))])
            check_indices(w, self._blocks(), n_params, self._value)
        if self._param_names and len(self._param_names) != self.n_params:
            raise CaseFormatError(_WHERE, "param_names", f"expected {self.n_params} names, "
                                  f"found {len(self._param_names)}")

    # -- the structure, derived on first read for a network built without it ---------------------------------

    @property
    def W_index(self) -> list[np.ndarray]:
        """``W_index[l-1]``, shape ``(N_l, N_{l-1})``: ``-1`` fixed, ``j`` the parameter ``theta_j``."""
        if self._W_index is None:
            self._W_index, self._b_index, _ = dense_indices(self.widths)
        return self._W_index

    @property
    def b_index(self) -> list[np.ndarray]:
        """``b_index[l-1]``, shape ``(N_l,)``, the convention of :attr:`W_index`."""
        if self._b_index is None:
            self._W_index, self._b_index, _ = dense_indices(self.widths)
        return self._b_index

    @property
    def negative_slope(self) -> list[list[flint.fmpq]]:
        """``negative_slope[l-1]``: each hidden unit's slope on ``z < 0`` (Q; 0 ReLU, 1 a linear unit)."""
        if self._negative_slope is None:
            zero = flint.fmpq(0)
            self._negative_slope = [[zero] * self.widths[l] for l in range(1, self.L)]
        return self._negative_slope

    @property
    def slope_index(self) -> list[np.ndarray]:
        """``slope_index[l-1]``, shape ``(N_l,)``: ``-1`` a fixed slope, ``j`` a PReLU slope ``theta_j``."""
        if self._slope_index is None:
            self._slope_index = [np.full(self.widths[l], -1, dtype=np.int64) for l in range(1, self.L)]
        return self._slope_index

    @property
    def param_names(self) -> list[str]:
        """``param_names[j]`` names ``theta_j`` (class docstring); ``W_l[i,j]``, ``b_l[i]`` for ``T = I`` as built."""
        if self._param_names is None:
            self._param_names = dense_names(self.widths) if self._dense else []
        return self._param_names

    @param_names.setter
    def param_names(self, names: list[str]) -> None:
        self._param_names = names

    # -- predicates: what the network is ---------------------------------------------------------------------

    def all_free(self) -> bool:
        """``T = I`` up to numbering: every weight and bias is its own free parameter, and there is no other."""
        if self._dense and self._W_index is None and self._b_index is None:
            return True  # built without index arrays and none read (so none changed) since
        w = self.widths
        if self.n_params != sum(w[l] * (w[l - 1] + 1) for l in range(1, self.L + 1)):
            return False
        return (not any((I < 0).any() for I in self.W_index + self.b_index)
                and not any((I >= 0).any() for I in self.slope_index))

    def is_relu_only(self) -> bool:
        """Every hidden unit is a ReLU: its negative slope is fixed at 0 (no leaky, PReLU or linear unit)."""
        if self._negative_slope is None:
            return self._slope_index is None or not any((I >= 0).any() for I in self._slope_index)
        zero = flint.fmpq(0)
        return (all(a == zero for S in self._negative_slope for a in S)
                and (self._slope_index is None or not any((I >= 0).any() for I in self._slope_index)))

    def is_plain(self) -> bool:
        """True for the paper's network: a layered, fully connected ReLU MLP, every weight and bias free and distinct.

        Only such a network has the dense dimension :attr:`dim` and the plain engine's results
        (Theorem 8 and ``C_N`` among them); anything else is a layer graph, analysed in its free
        parameters against ``dim_free``.
        """
        if (self._dense and self._W_index is None and self._b_index is None and self._negative_slope is None
                and self._slope_index is None):
            return not self.features  # built as Network(widths, W, b) and no structure read since: O(1)
        return not self.features and self.is_relu_only() and self.all_free()

    @property
    def L(self) -> int:
        """Number of weight layers ``L`` (hidden layers are ``1..L-1``)."""
        return len(self.widths) - 1

    @property
    def dim(self) -> int:
        """``dim = N_0 N_1 + ... + N_{L-1} N_L + N_L`` (docs/theory.md), for the plain MLP only.

        Equals ``|F_theta| + |B|``: one outgoing edge per hidden neuron is fixed,
        so the hidden biases are "paid for" by the fixed edges.

        Raises
        ------
        UnsupportedCaseError
            When the network is not plain (:meth:`is_plain`): the count holds for the dense ReLU
            MLP only; a layer graph's is ``dim_free`` (:func:`exactident.model.symmetry.rescaling_symmetry`).

        Examples
        --------
        >>> Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])], [[1], [0]]).dim
        3
        """
        if not self.is_plain():
            raise UnsupportedCaseError("dim (the number of parameters minus hidden neurons) is defined for the plain "
                                       "ReLU MLP only; a layer graph has n_params and dim_free")
        w = self.widths
        return sum(w[l] * w[l + 1] for l in range(self.L)) + w[-1]

    def hidden_layers(self) -> range:
        """Paper indices ``l = 1..L-1`` of the hidden layers."""
        return range(1, self.L)

    def copy(self) -> Network:
        """A copy with its own ``W``, ``b`` and slopes (the index arrays are shared: they are never written)."""
        return self._rebuild([flint.fmpq_mat(M) for M in self.W], [list(v) for v in self.b],
                             None if self._negative_slope is None else [list(s) for s in self._negative_slope])

    def _rebuild(self, W: list[flint.fmpq_mat], b: list[list[flint.fmpq]],
                 slopes: list[list[flint.fmpq]] | None) -> Network:
        names = None if self._param_names is None else list(self._param_names)
        units = [list(u) for u in self.unit_names]
        if self._dense and self._W_index is None and self._slope_index is None:
            return Network(self.widths, W, b, None, None, slopes, None, None, self.features, names, units)
        return Network(self.widths, W, b, self.W_index, self.b_index, slopes, self.slope_index, self.n_params,
                       self.features, names if names is not None or not self._dense else self.param_names, units)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Network):
            return NotImplemented
        if (self.widths, self.W, self.b, self.features) != (other.widths, other.W, other.b, other.features):
            return False
        if self.is_plain() and other.is_plain():
            return self.theta() == other.theta() or all(
                np.array_equal(x, y) for x, y in zip(self.W_index + self.b_index, other.W_index + other.b_index))
        return (self.n_params == other.n_params and self.negative_slope == other.negative_slope
                and all(np.array_equal(x, y) for x, y in zip(self.W_index + self.b_index + self.slope_index,
                                                             other.W_index + other.b_index + other.slope_index)))

    def __repr__(self) -> str:
        more = "" if self.is_plain() else f", n_params={self.n_params}, features={self.features!r}"
        return f"Network(widths={self.widths!r}, W={[M.table() for M in self.W]!r}, b={self.b!r}{more})"

    # -- the free parameters ---------------------------------------------------------------------------------

    def _blocks(self) -> Iterator[Block]:
        """``(kind, l, index array)`` of every weight (``W``), bias (``b``) and slope (``a``) block, by layer."""
        for l in range(1, self.L + 1):
            yield "W", l, self.W_index[l - 1]
            yield "b", l, self.b_index[l - 1]
        for l in range(1, self.L):
            yield "a", l, self.slope_index[l - 1]

    def _value(self, block: tuple[str, int], pos: int) -> flint.fmpq:
        kind, l = block
        if kind == "W":
            cols = self.widths[l - 1]
            return self.W[l - 1][pos // cols, pos % cols]
        return self.b[l - 1][pos] if kind == "b" else self.negative_slope[l - 1][pos]

    def theta(self) -> list[flint.fmpq]:
        """The current free parameters ``theta`` (length ``n_params``, Q); ``T = I``: ``W_l`` then ``b_l``."""
        if self._dense and self._W_index is None and self._slope_index is None:
            return [v for M, bl in zip(self.W, self.b) for v in [*M.entries(), *bl]]
        out: list[flint.fmpq | None] = [None] * self.n_params
        for kind, l, I in self._blocks():
            flat = I.ravel()
            free = np.flatnonzero(flat >= 0)
            idx, first = np.unique(flat[free], return_index=True)  # one entry per parameter (ties hold one value)
            for j, p in zip(idx.tolist(), free[first].tolist()):
                if out[j] is None:
                    out[j] = self._value((kind, l), p)
        return [v if v is not None else flint.fmpq(0) for v in out]

    def with_theta(self, theta: Sequence[object]) -> Network:
        """The same architecture at another ``theta`` (fixed entries unchanged).

        Raises
        ------
        CaseFormatError
            When ``theta`` does not have ``n_params`` exact entries.
        """
        if len(theta) != self.n_params:
            raise CaseFormatError(_WHERE, "theta", f"expected {self.n_params} entries, found {len(theta)}")
        t = [exact(v, f"theta[{j}]") for j, v in enumerate(theta)]
        W = []
        for l in range(1, self.L + 1):  # a copy with the free entries replaced (the fixed ones stay)
            M, I = flint.fmpq_mat(self.W[l - 1]), self.W_index[l - 1]
            for i, j in zip(*(a.tolist() for a in np.nonzero(I >= 0))):
                M[i, j] = t[int(I[i, j])]
            W.append(M)
        b = [[t[i] if i >= 0 else v for i, v in zip(self.b_index[l - 1].tolist(), self.b[l - 1])]
             for l in range(1, self.L + 1)]
        s = None if self._negative_slope is None and self._slope_index is None else [
            [t[i] if i >= 0 else a for i, a in zip(self.slope_index[l - 1].tolist(), self.negative_slope[l - 1])]
            for l in range(1, self.L)]
        return self._rebuild(W, b, s)

    # -- units -------------------------------------------------------------------------------------

    def kinked(self, l: int) -> np.ndarray:
        """Bool array ``(N_l,)``: units of hidden layer ``l`` (1-based) with a kink at ``z = 0``.

        A unit is linear (no kink) when its slope is fixed at 1; ties are only ever looked
        for at kinked units.
        """
        if self._negative_slope is None and self._slope_index is None:
            return np.ones(self.widths[l], dtype=bool)
        one = flint.fmpq(1)
        return np.array([self.slope_index[l - 1][v] >= 0 or self.negative_slope[l - 1][v] != one
                         for v in range(self.widths[l])], dtype=bool)


def _n(items: Sequence[object], n: int, name: str) -> Sequence[object]:
    if len(items) != n:
        raise CaseFormatError(_WHERE, name, f"expected {n} entries, found {len(items)}")
    return items


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


def _sample(X: Sequence[Sequence[object]], n_inputs: int) -> flint.fmpq_mat:
    try:
        return sample_matrix(X, n_inputs)  # type: ignore[arg-type]
    except TypeError:  # an int, Fraction or fmpz entry flint does not take directly; a float is refused
        return sample_matrix([[exact(v, "X") for v in row] for row in X], n_inputs)


def pre_activations(net: Network, X: Sequence[Sequence[flint.fmpq]]) -> list[flint.fmpq_mat]:
    """Exact pre-activations ``z_l(x^i)`` for ``l = 1..L``, with each hidden unit's negative slope.

    Parameters
    ----------
    net : Network
    X : n rows of N_0 exact numbers (int, Fraction, fmpz, fmpq; the flattened input, in the framework's
        flattening order for a layer graph)

    Returns
    -------
    list of fmpq_mat
        Element ``l-1`` has shape ``(n, N_l)``; the last one is ``f_theta(X)``.

    Raises
    ------
    CaseFormatError
        A float in ``X``.

    Examples
    --------
    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[2]]), flint.fmpq_mat([[3]])],
    ...               [[flint.fmpq(1)], [flint.fmpq(0)]])
    >>> [Z.entries() for Z in pre_activations(net, [[0], [1], [flint.fmpq(-1, 2)]])]
    [[1, 3, 0], [3, 9, 0]]

    A leaky unit with slope 1/10: ``f(x) = leaky(x - 1)``, at ``x = 0`` and ``x = 3``.

    >>> net = Network((1, 1, 1), [[[1]], [[1]]], [[-1], [0]], negative_slope=[[flint.fmpq(1, 10)]])
    >>> pre_activations(net, [[0], [3]])[-1].entries()
    [-1/10, 2]
    """
    H = _sample(X, net.widths[0])
    slopes = net._negative_slope  # None: every unit a ReLU (the plain MLP as built)
    zero = flint.fmpq(0)
    out = []
    for l in range(1, net.L + 1):
        Z = _add_bias(H * net.W[l - 1].transpose(), net.b[l - 1])
        out.append(Z)
        if l == net.L:
            break
        a = None if slopes is None else slopes[l - 1]
        if a is None or all(s == zero for s in a):
            H = relu_fmpq_mat(Z)
        else:
            H = flint.fmpq_mat(Z.nrows(), Z.ncols(), [z if z >= zero else a[c] * z for row in Z.table()
                                                      for c, z in enumerate(row)])
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
