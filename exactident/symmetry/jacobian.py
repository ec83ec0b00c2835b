"""The Jacobian ``J`` of the outputs in the parameters, for any network the fdim modules read (docs/symmetries.md).

The region cover (:mod:`exactident.symmetry.regions`), its rank
(:mod:`exactident.symmetry.region_fdim`) and the line walk (:mod:`exactident.symmetry.linewalk`)
read every network in the compiled layered form of
:class:`~exactident.model.network.Network`: hidden unit ``v`` of layer ``l``
computes ``h = z`` for ``z >= 0`` and ``h = a z`` for ``z < 0`` (``a = 0`` ReLU, a fixed ``a``
leaky ReLU, the current value of a PReLU slope; a unit whose slope is fixed at exactly 1 is
linear and has no kink).  The plain MLP is the special case "every entry free, every slope 0"
(:meth:`~exactident.model.network.Network.is_plain`).  :class:`Layered` holds that form and the
one thing that differs between the two kinds: which Jacobian is ranked.

- A plain MLP (:class:`~exactident.model.network.Network`): ``J`` in all its weights and
  biases (the full parameter vector, ``W_l`` row-major then ``b_l``), target ``dim``, through the
  plain engine's backpropagation (:func:`exactident.model.gamma_modular.gamma_mod_p`, and the
  exact integer one, :func:`exactident.model.gamma_modular.gamma_integer`).
- A layer graph: ``J_free`` in its free parameters (a tied parameter is one column), target
  ``dim_free`` (:mod:`exactident.model.gamma_free`).

A point is *tie-free* when no kinked unit has ``z = 0`` there; ``J`` is defined at tie-free points.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import lcm

import flint
import numpy as np

from exactident.model.network import Network

__all__ = ["Layered"]


@dataclass
class Layered:
    """A network in the compiled layered form, with the Jacobian ``J`` the fdim modules rank (module docstring).

    Attributes
    ----------
    cn : Network
        The layered form: weights, biases, negative slopes, which units are kinked.
    net : Network or None
        The plain MLP when the network is one (``J`` in the full parameter vector), else None
        (``J_free`` in the free parameters of ``cn``).
    """

    cn: Network
    net: Network | None = None

    @classmethod
    def of(cls, network: Network | Layered) -> Layered:
        """The layered form of a plain MLP (:meth:`~exactident.model.network.Network.is_plain`) or of a layer graph."""
        if isinstance(network, Layered):
            return network
        return cls(network, network if network.is_plain() else None)

    @property
    def widths(self) -> tuple[int, ...]:
        """``(N_0, ..., N_L)`` of the layered form (skip carriers included)."""
        return tuple(self.cn.widths)

    @property
    def n_cols(self) -> int:
        """Columns of ``J``: every weight and bias of a plain MLP, the free parameters of a layer graph."""
        return self.cn.n_params

    def kinked_units(self) -> list[tuple[int, int]]:
        """``(l, v)`` of every kinked hidden unit, in layer order (a plain MLP: every hidden neuron)."""
        return [(l, int(v)) for l in range(1, self.cn.L) for v in np.flatnonzero(self.cn.kinked(l))]

    def state(self, X: Sequence[Sequence[flint.fmpq]]) -> tuple[list[np.ndarray], set[int]]:
        """``(pattern, tied)``: per hidden layer the ``(n, N_l)`` bool pattern (True: derivative 1, linear units
        included), and the samples where some kinked unit has ``z = 0`` exactly."""
        if self.net is not None:
            from exactident.model.activation import activation_state

            st = activation_state(self.net, X)
            return list(st.pattern), {t.i for t in st.ties}
        from exactident.model.gamma_free import free_state

        fs = free_state(self.cn, X)
        return list(fs.pattern), {i for i, _l, _v in fs.ties}

    def denominator(self, X: Sequence[Sequence[flint.fmpq]]) -> int:
        """``lcm`` of the denominators of ``X`` and the network (primes dividing it are avoided)."""
        if self.net is not None:
            from exactident.model.integer_forward import data_denominator

            return data_denominator(self.net, X)
        from exactident.model.gamma_free import free_data_denominator

        return lcm(free_data_denominator(self.cn, X), 1)

    def mod_p(self, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray], p: int,
              avoid: int) -> np.ndarray:
        """``J(X) mod p`` (int64, ``(n N_L, n_cols)``, rows ``i N_L + k``) at the given pattern."""
        if self.net is not None:
            from exactident.model.fixed_edges import FixedEdges
            from exactident.model.gamma_modular import gamma_mod_p

            return gamma_mod_p(self.net, X, pattern, FixedEdges({}), p, avoid)
        from exactident.model.gamma_free import gamma_free_mod_p

        return gamma_free_mod_p(self.cn, X, pattern, p, avoid)

    def integer_rows(self, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray], samples: Sequence[int],
                     data: object = None) -> tuple[np.ndarray, np.ndarray]:
        """``(G, s)``: ``J`` at the points ``samples`` of ``X`` as exact integers, ``G = D J diag(s)`` with ``D``
        a positive diagonal on the rows and ``s > 0`` on the columns, so ``G u = 0`` iff ``J (s u) = 0``.

        Object arrays of Python ints, shapes ``(len(samples) N_L, n_cols)`` and ``(n_cols,)``.  ``data`` is the
        plain engine's :class:`~exactident.model.gamma_modular.ModularData` of ``X`` (a plain MLP only).
        """
        if self.net is not None:
            from exactident.model.fixed_edges import FixedEdges
            from exactident.model.gamma_modular import ModularData, gamma_integer

            md = data if isinstance(data, ModularData) else ModularData(self.net, X)
            return gamma_integer(self.net, X, pattern, FixedEdges({}), samples, md)
        from exactident.model.gamma_free import gamma_free_exact

        idx = list(samples)
        sub = [X[i] for i in idx]
        pat = [np.asarray(a)[idx] for a in pattern]
        J = gamma_free_exact(self.cn, sub, pat)
        rows = []
        for r in range(J.nrows()):
            vals = [J[r, c] for c in range(J.ncols())]
            d = 1
            for v in vals:
                d = lcm(d, int(v.q))
            rows.append([int(v.p) * (d // int(v.q)) for v in vals])
        G = np.array(rows, dtype=object).reshape(len(rows), self.n_cols)
        return G, np.ones(self.n_cols, dtype=object)

    def floats(self) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
        """``(W, b, a, kinked)`` in float64: weights, biases, and per hidden layer the negative slopes and the
        kinked mask (what the float proposals of the line walk read)."""
        cn = self.cn
        W = [np.array([[float(M[i, j]) for j in range(M.ncols())] for i in range(M.nrows())]).reshape(
            M.nrows(), M.ncols()) for M in cn.W]
        b = [np.array([float(v) for v in bl]) for bl in cn.b]
        a = [np.array([float(v) for v in s]) for s in cn.negative_slope]
        k = [cn.kinked(l) for l in range(1, cn.L)]
        return W, b, a, k
