"""A piecewise-linear network whose weights are an affine function of free parameters.

Every architecture beyond the layered, fully connected ReLU MLP that exactident analyses
(convolution, average pooling, skip connections, leaky ReLU, PReLU, layers without bias)
is compiled to this one form: a *layered* network ``N_0, ..., N_L`` whose dense weights
and biases are ``W = T theta + c``, where each dense entry is either **fixed** (its value
is part of ``c``) or **equal to one free parameter** ``theta_j`` (a column of ``T`` with
0/1 entries; a convolution weight feeds many dense entries).  Skip connections are carried
through the intermediate layers by *linear* units (no kink) with fixed weights 1, so the
network stays layered and every engine module keeps its layer-by-layer form.

Hidden unit ``v`` of layer ``l`` computes ``h = z`` for ``z >= 0`` and ``h = a z`` for
``z < 0`` with its negative-side slope ``a``: 0 for ReLU, a fixed rational for leaky ReLU
(the exact binary value the framework stores), a free parameter for PReLU, 1 for a linear
unit (no kink).  The output layer ``L`` is affine (logits), as in the plain engine.

Everything is in Q.  The plain MLP is the special case "every entry free, every slope 0"
(:func:`from_network`).

References
----------
Bona-Pellissier, Malgouyres, Bachoc, "Parameter identifiability of a deep feedforward ReLU
neural network", arXiv:2206.07424 (Prop. 1 keeps its form with slopes in the pattern).
Gonon, Brisebarre, Riccietti, Gribonval, "A path-norm toolkit for modern networks",
arXiv:2310.01225 (ReLU networks on a DAG with skips and pooling).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import flint
import numpy as np

from exactident.errors import CaseFormatError
from exactident.model.network import Network, _exact, _exact_vector, sample_matrix

__all__ = [
    "ConstrainedNetwork",
    "constrained_pre_activations",
    "from_network",
]

#: Name prefix of the carrier units that carry a skip connection up (model.compile).
CARRIER_PREFIX = "skip("

_WHERE = "<ConstrainedNetwork>"


@dataclass
class ConstrainedNetwork:
    """A layered piecewise-linear network with ``W = T theta + c`` (see the module docstring).

    Attributes
    ----------
    widths : tuple of int
        ``(N_0, ..., N_L)`` after compilation (carrier units included), ``L >= 1``.
    W : list of fmpq_mat
        Current dense values: ``W[l-1]`` is ``W_l``, shape ``(N_l, N_{l-1})``, entries in Q.
    b : list of list of fmpq
        Current dense values: ``b[l-1]`` is ``b_l``, length ``N_l``.
    W_index : list of int64 ndarray
        ``W_index[l-1]`` has shape ``(N_l, N_{l-1})``: ``-1`` when the entry is fixed at its
        value in ``W``, ``j >= 0`` when it equals the free parameter ``theta_j``.
    b_index : list of int64 ndarray
        ``b_index[l-1]`` has shape ``(N_l,)``, same convention.
    negative_slope : list of list of fmpq
        ``negative_slope[l-1]`` (hidden layers ``l = 1..L-1``): the slope ``a`` on ``z < 0``
        (0 ReLU, ``a`` leaky ReLU, the current value for PReLU, 1 for a linear unit).
    slope_index : list of int64 ndarray
        ``slope_index[l-1]``, shape ``(N_l,)``: ``-1`` fixed slope, ``j >= 0`` a PReLU slope
        equal to ``theta_j`` (the parameter may be shared by a channel).
    n_params : int
        ``k``, the number of free parameters; every index ``0..k-1`` is used at least once.
    features : tuple of str
        What makes this network more than a plain MLP, in words used by verdict reasons:
        ``"convolution"``, ``"average pooling"``, ``"skip connection"``, ``"leaky ReLU"``,
        ``"PReLU"``, ``"linear layer"``, ``"fixed weights"``.  Empty for a plain MLP.
    param_names : list of str
        ``param_names[j]`` names ``theta_j`` in the framework's terms, e.g. ``"conv1.weight[2,0,1,1]"``.
    unit_names : list of list of str
        ``unit_names[l-1][v]`` names hidden or output unit ``v`` of layer ``l``, e.g.
        ``"conv1[c=2,y=1,x=0]"`` or ``"skip(input[3])"`` for a carrier.

    Raises
    ------
    CaseFormatError
        On a wrong shape, a float, tied entries with different values, a linear unit with a
        PReLU parameter, or an unused parameter index.
    """

    widths: tuple[int, ...]
    W: list[flint.fmpq_mat]
    b: list[list[flint.fmpq]]
    W_index: list[np.ndarray]
    b_index: list[np.ndarray]
    negative_slope: list[list[flint.fmpq]]
    slope_index: list[np.ndarray]
    n_params: int
    features: tuple[str, ...] = ()
    param_names: list[str] = field(default_factory=list)
    unit_names: list[list[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        plain = Network(tuple(self.widths), self.W, self.b)  # validates shapes and exactness
        self.widths, self.W, self.b = plain.widths, plain.W, plain.b
        w, L = self.widths, len(self.widths) - 1
        self.W_index = [_index_array(M, (w[l + 1], w[l]), f"W_index[{l}]")
                        for l, M in enumerate(_n(self.W_index, L, "W_index"))]
        self.b_index = [_index_array(v, (w[l + 1],), f"b_index[{l}]")
                        for l, v in enumerate(_n(self.b_index, L, "b_index"))]
        self.negative_slope = [_exact_vector(s, w[l], f"negative_slope[{l - 1}]")
                               for l, s in zip(range(1, L), _n(self.negative_slope, L - 1, "negative_slope"))]
        self.slope_index = [_index_array(s, (w[l],), f"slope_index[{l - 1}]")
                            for l, s in zip(range(1, L), _n(self.slope_index, L - 1, "slope_index"))]
        k = self.n_params
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise CaseFormatError(_WHERE, "n_params", f"expected a non-negative integer, found {k!r}")
        self._check_indices()
        if self.param_names and len(self.param_names) != k:
            raise CaseFormatError(_WHERE, "param_names", f"expected {k} names, found {len(self.param_names)}")

    def _blocks(self):
        """``(kind, l, index array)`` of every weight (``W``), bias (``b``) and slope (``a``) block, by layer."""
        for l in range(1, self.L + 1):
            yield "W", l, self.W_index[l - 1]
            yield "b", l, self.b_index[l - 1]
        for l in range(1, self.L):
            yield "a", l, self.slope_index[l - 1]

    def _check_indices(self) -> None:
        """Every index in ``-1..k-1``, tied entries equal, every parameter used (numpy: no loop over the dense entries).

        The first failure in the order of the dense entries (layer by layer, row by row: ``W_l[i][*]`` then
        ``b_l[i]``; then the slopes) is reported, as a loop over the entries would; only the free (and
        invalid) entries are visited, the fixed ones (index ``-1``) need no check.
        """
        k = self.n_params
        seqs, idxs, blocks, locals_, where = [], [], [], [], []
        offset = 0
        for n_block, (kind, l, I) in enumerate(self._blocks()):
            flat = I.ravel()
            pos = np.flatnonzero(flat != -1)  # only free (or invalid) entries: fixed ones need no check
            if kind == "W":
                cols = I.shape[1]
                seq = offset + (pos // cols) * (cols + 1) + pos % cols
            elif kind == "b":
                cols = self.widths[l - 1]
                seq = offset + pos * (cols + 1) + cols
                offset += I.shape[0] * (cols + 1)
            else:
                seq = offset + pos
                offset += I.shape[0]
            seqs.append(seq)
            idxs.append(flat[pos])
            blocks.append(np.full(len(pos), n_block, dtype=np.int64))
            locals_.append(pos)
            where.append((kind, l))
        empty = np.zeros(0, dtype=np.int64)
        seq_all = np.concatenate(seqs) if seqs else empty
        idx_all = np.concatenate(idxs) if idxs else empty
        block = np.concatenate(blocks) if blocks else empty
        local = np.concatenate(locals_) if locals_ else empty
        bad_range = (idx_all < -1) | (idx_all >= k)
        first_bad = int(seq_all[bad_range].min()) if bad_range.any() else None
        # ties: entries of a parameter fed more than once; the first in order fixes the value
        ok = (idx_all >= 0) & ~bad_range
        counts = np.bincount(idx_all[ok], minlength=k) if k else np.zeros(0, dtype=np.int64)
        tied = ok & (counts[np.where(ok, idx_all, 0)] > 1)
        first_tie = None
        if tied.any():
            t_pos = np.flatnonzero(tied)
            order = np.lexsort((seq_all[t_pos], idx_all[t_pos]))
            t_pos = t_pos[order]
            t_idx = idx_all[t_pos]
            values = [self._value(where[int(block[p])], int(local[p])) for p in t_pos]
            starts = np.flatnonzero(np.r_[True, t_idx[1:] != t_idx[:-1]])
            ref = np.repeat(starts, np.diff(np.r_[starts, len(t_pos)]))
            mismatch = [m for m in range(len(t_pos)) if values[m] != values[ref[m]]]
            if mismatch:
                m = min(mismatch, key=lambda m: int(seq_all[t_pos[m]]))
                first_tie = (int(seq_all[t_pos[m]]), int(t_pos[m]), values[ref[m]], values[m])
        if first_bad is not None and (first_tie is None or first_bad < first_tie[0]):
            p = int(np.flatnonzero(bad_range & (seq_all == first_bad))[0])
            raise CaseFormatError(_WHERE, self._name(where[int(block[p])], int(local[p])),
                                  f"parameter index {int(idx_all[p])} outside -1..{k - 1}")
        if first_tie is not None:
            _seq, p, ref_val, val = first_tie
            raise CaseFormatError(_WHERE, self._name(where[int(block[p])], int(local[p])),
                                  f"tied to theta_{int(idx_all[p])} = {ref_val} but holds {val}")
        used = np.zeros(k, dtype=bool)
        used[idx_all[ok]] = True
        if not used.all():
            missing = int(np.flatnonzero(~used)[0])
            raise CaseFormatError(_WHERE, "n_params", f"theta_{missing} feeds no weight, bias or slope")

    def _name(self, block: tuple[str, int], pos: int) -> str:
        kind, l = block
        if kind == "W":
            cols = self.widths[l - 1]
            return f"W_{l}[{pos // cols}][{pos % cols}]"
        return f"b_{l}[{pos}]" if kind == "b" else f"slope_{l}[{pos}]"

    def _value(self, block: tuple[str, int], pos: int) -> flint.fmpq:
        kind, l = block
        if kind == "W":
            cols = self.widths[l - 1]
            return self.W[l - 1][pos // cols, pos % cols]
        return self.b[l - 1][pos] if kind == "b" else self.negative_slope[l - 1][pos]

    @property
    def L(self) -> int:
        """Number of weight layers ``L``."""
        return len(self.widths) - 1

    def is_carrier(self, l: int, v: int) -> bool:
        """Whether unit ``v`` of layer ``l`` is a skip carrier the compiler added (``skip(...)``), not the user's."""
        return 0 < l <= len(self.unit_names) and self.unit_names[l - 1][v].startswith(CARRIER_PREFIX)

    @property
    def layer_widths(self) -> list[int]:
        """``widths`` without the skip carriers: the sizes of the user's layers that reports show.

        The compiled widths carry a skip connection up layer by layer with carrier units
        (:mod:`exactident.model.compile`); those are internal and never shown as widths.

        Examples
        --------
        >>> from exactident.model.network import Network
        >>> cn = from_network(Network((1, 2, 1), [[[1], [1]], [[1, 1]]], [[0, 0], [0]]))
        >>> cn.layer_widths
        [1, 2, 1]
        """
        return [self.widths[0]] + [sum(not self.is_carrier(l, v) for v in range(self.widths[l]))
                                   for l in range(1, len(self.widths))]

    def param_name(self, j: int) -> str:
        """The name of ``theta_j`` in the framework's terms (``param_names``), else ``theta_j``."""
        return self.param_names[j] if 0 <= j < len(self.param_names) else f"theta_{j}"

    def unit_name(self, l: int, v: int) -> str:
        """The name of unit ``v`` of layer ``l`` (``unit_names``, e.g. ``conv1[c=2,y=1,x=0]``), else ``(l,v)``; ``x[v]``
        for an input coordinate (``l = 0``)."""
        if l == 0:
            return f"x[{v}]"
        names = self.unit_names
        return names[l - 1][v] if 0 < l <= len(names) and 0 <= v < len(names[l - 1]) else f"({l},{v})"

    def describe_units(self, units: Sequence[Sequence[int]], limit: int = 6) -> str:
        """Named units ``(l, v)`` for a reason: at most ``limit`` names, then how many in all."""
        shown = ", ".join(self.unit_name(int(l), int(v)) for l, v in units[:limit])
        return shown + (f", ... ({len(units)} units)" if len(units) > limit else "")

    def describe_params(self, params: Sequence[int], limit: int = 6) -> str:
        """Named free parameters for a reason: at most ``limit`` names, then how many in all."""
        shown = ", ".join(self.param_name(int(j)) for j in params[:limit])
        return shown + (f", ... ({len(params)} parameters)" if len(params) > limit else "")

    def describe_ties(self, ties: Sequence[Sequence[int]], active: Sequence[bool] | None = None,
                      limit: int = 4) -> str:
        """Ties ``(sample i, layer l, unit v)`` as ``x^i@<unit name>`` (with ``active``/``inactive`` when given)."""
        parts = [f"x^{int(i)}@{self.unit_name(int(l), int(v))}"
                 + ("" if active is None else " active" if active[t] else " inactive")
                 for t, (i, l, v) in enumerate(ties[:limit])]
        return ", ".join(parts) + (f", ... ({len(ties)} ties)" if len(ties) > limit else "")

    def kinked(self, l: int) -> np.ndarray:
        """Bool array ``(N_l,)``: units of hidden layer ``l`` (1-based) with a kink at ``z = 0``.

        A unit is linear (no kink) when its slope is fixed at 1; ties are only ever looked
        for at kinked units.
        """
        one = flint.fmpq(1)
        return np.array([self.slope_index[l - 1][v] >= 0 or self.negative_slope[l - 1][v] != one
                         for v in range(self.widths[l])], dtype=bool)

    def theta(self) -> list[flint.fmpq]:
        """The current free parameters ``theta`` (length ``n_params``, entries in Q)."""
        out: list[flint.fmpq | None] = [None] * self.n_params
        for kind, l, I in self._blocks():
            flat = I.ravel()
            free = np.flatnonzero(flat >= 0)
            idx, first = np.unique(flat[free], return_index=True)  # one entry per parameter (ties hold one value)
            for j, p in zip(idx.tolist(), free[first].tolist()):
                if out[j] is None:
                    out[j] = self._value((kind, l), p)
        return [v if v is not None else flint.fmpq(0) for v in out]

    def with_theta(self, theta: Sequence[object]) -> ConstrainedNetwork:
        """The same architecture at another ``theta`` (fixed entries unchanged).

        Raises
        ------
        CaseFormatError
            When ``theta`` does not have ``n_params`` exact entries.
        """
        if len(theta) != self.n_params:
            raise CaseFormatError(_WHERE, "theta", f"expected {self.n_params} entries, found {len(theta)}")
        t = [_exact(v, f"theta[{j}]") for j, v in enumerate(theta)]

        def pick(idx: int, val: flint.fmpq) -> flint.fmpq:
            return t[idx] if idx >= 0 else val

        W = []
        for l in range(1, self.L + 1):  # a copy with the free entries replaced (the fixed ones stay)
            M, I = flint.fmpq_mat(self.W[l - 1]), self.W_index[l - 1]
            for i, j in zip(*(a.tolist() for a in np.nonzero(I >= 0))):
                M[i, j] = t[int(I[i, j])]
            W.append(M)
        b = [[pick(int(self.b_index[l - 1][i]), self.b[l - 1][i]) for i in range(self.widths[l])]
             for l in range(1, self.L + 1)]
        s = [[pick(int(self.slope_index[l - 1][v]), self.negative_slope[l - 1][v]) for v in range(self.widths[l])]
             for l in range(1, self.L)]
        return ConstrainedNetwork(self.widths, W, b, [I.copy() for I in self.W_index],
                                  [I.copy() for I in self.b_index], s, [I.copy() for I in self.slope_index],
                                  self.n_params, self.features, list(self.param_names),
                                  [list(u) for u in self.unit_names])

    def is_plain(self) -> bool:
        """True for a layered ReLU MLP with every weight and bias free and distinct (the paper's setting)."""
        if self.features:
            return False
        zero = flint.fmpq(0)
        n_dense = sum(self.widths[l] * (self.widths[l - 1] + 1) for l in range(1, self.L + 1))
        if self.n_params != n_dense:
            return False
        if any((I < 0).any() for I in self.W_index + self.b_index):
            return False
        return all(a == zero and int(i) < 0 for S, I in zip(self.negative_slope, self.slope_index)
                   for a, i in zip(S, I))


def _n(items: Sequence[object], n: int, name: str) -> Sequence[object]:
    if len(items) != n:
        raise CaseFormatError(_WHERE, name, f"expected {n} entries, found {len(items)}")
    return items


def _index_array(value: object, shape: tuple[int, ...], name: str) -> np.ndarray:
    arr = np.asarray(value)
    if arr.shape != shape or (arr.size and arr.dtype.kind not in "iu"):
        raise CaseFormatError(_WHERE, name, f"expected integers of shape {shape}, found {arr.dtype} {arr.shape}")
    return arr.astype(np.int64, copy=False)  # no copy of an int64 array (millions of entries for a conv)


def from_network(net: Network) -> ConstrainedNetwork:
    """The plain MLP as a constrained network: every weight and bias free, every slope 0.

    Parameters are numbered as the plain engine's full parameter vector: for ``l = 1..L``,
    ``W_l`` row-major then ``b_l``.

    Examples
    --------
    >>> net = Network((1, 2, 1), [flint.fmpq_mat([[1], [2]]), flint.fmpq_mat([[3, 4]])],
    ...               [[flint.fmpq(0), flint.fmpq(-1)], [flint.fmpq(5)]])
    >>> cn = from_network(net)
    >>> cn.n_params, cn.is_plain(), [str(t) for t in cn.theta()]
    (7, True, ['1', '2', '0', '-1', '3', '4', '5'])
    """
    W_index, b_index, k = [], [], 0
    for l in range(1, net.L + 1):
        n_out, n_in = net.widths[l], net.widths[l - 1]
        W_index.append(np.arange(k, k + n_out * n_in, dtype=np.int64).reshape(n_out, n_in))
        k += n_out * n_in
        b_index.append(np.arange(k, k + n_out, dtype=np.int64))
        k += n_out
    zero = flint.fmpq(0)
    slopes = [[zero] * net.widths[l] for l in net.hidden_layers()]
    slope_index = [np.full(net.widths[l], -1, dtype=np.int64) for l in net.hidden_layers()]
    names = [f"{'W' if kind == 'W' else 'b'}_{l}[{i}{',' + str(j) if kind == 'W' else ''}]"
             for l in range(1, net.L + 1)
             for kind, i, j in [("W", i, j) for i in range(net.widths[l]) for j in range(net.widths[l - 1])]
             + [("b", i, 0) for i in range(net.widths[l])]]
    return ConstrainedNetwork(net.widths, [flint.fmpq_mat(M) for M in net.W], [list(v) for v in net.b],
                              W_index, b_index, slopes, slope_index, k, (), names, [])


def constrained_pre_activations(cn: ConstrainedNetwork, X: Sequence[Sequence[flint.fmpq]]) -> list[flint.fmpq_mat]:
    """Exact pre-activations ``z_l(x^i)``, ``l = 1..L``, with each unit's negative slope.

    Parameters
    ----------
    cn : ConstrainedNetwork
    X : n rows of N_0 fmpq (the flattened input, in the framework's flattening order)

    Returns
    -------
    list of fmpq_mat
        Element ``l-1`` has shape ``(n, N_l)``; the last one is the network's output on ``X``.

    Examples
    --------
    A leaky unit with slope 1/10: ``f(x) = leaky(x - 1)``, at ``x = 0`` and ``x = 3``.

    >>> net = Network((1, 1, 1), [flint.fmpq_mat([[1]]), flint.fmpq_mat([[1]])],
    ...               [[flint.fmpq(-1)], [flint.fmpq(0)]])
    >>> cn = from_network(net)
    >>> cn.negative_slope[0][0] = flint.fmpq(1, 10)
    >>> [Z.entries() for Z in constrained_pre_activations(cn, [[0], [3]])][-1]
    [-1/10, 2]
    """
    H = sample_matrix([[_exact(v, "X") for v in row] for row in X], cn.widths[0])
    out = []
    zero = flint.fmpq(0)
    for l in range(1, cn.L + 1):
        n = H.nrows()
        Z = H * cn.W[l - 1].transpose() + flint.fmpq_mat(n, cn.widths[l], list(cn.b[l - 1]) * n)
        out.append(Z)
        if l < cn.L:
            a = cn.negative_slope[l - 1]
            cols = cn.widths[l]
            H = flint.fmpq_mat(n, cols, [z if z >= zero else a[c] * z for row in Z.table()
                                         for c, z in enumerate(row)])
    return out
