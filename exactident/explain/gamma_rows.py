"""The one interface ``design`` reads a network through: rows of ``Gamma``, the target dimension, exact ranks.

``design`` (:mod:`exactident.explain.design`) and its point search (:mod:`exactident.explain.points`)
need only: the rows of ``Gamma`` mod p on a subset of samples, the ``N_L`` rows of a new point
over Q, the exact (certified) rank and kernel, the pattern of a sample, and the number ``dim``
that an identifying sample reaches.  Both kinds of network provide them:

- the dense layered ReLU MLP (:class:`MLPRows`): ``Gamma`` in the coordinates ``tau`` (fixed edges
  removed), target ``dim`` (Theorem 9: ``rank Gamma = dim`` implies local identifiability);
- a layer graph (:class:`GraphRows`, ``W = T theta + c``, :mod:`exactident.model.network`):
  ``Gamma_free = d f(X) / d theta``, target ``dim_free = rank T - dim S_H``
  (:mod:`exactident.model.symmetry`); ``rank Gamma_free = dim_free`` is the immersion rule the
  layer-graph engine uses (docs/theory.md, "Beyond the layered ReLU MLP").  ``S_H`` (and
  ``ker T``) lie in every kernel, so ``n_cols - dim_free`` kernel directions are never removed.

Every rank a caller reports as certified is either a rank mod p that meets the proven upper
bound (``dim``, ``dim_free``), or an exact rank over Q.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import flint
import numpy as np

from exactident.linalg import exact
from exactident.linalg.modular import random_primes

if TYPE_CHECKING:
    from exactident.explain.obstructions import Obstruction

__all__ = ["GammaRows", "GraphRows", "MLPRows", "rows_of"]

_ZERO = flint.fmpq(0)


def _float(q: flint.fmpq) -> float:
    return int(q.p) / int(q.q)  # LP input only: a candidate is accepted by the exact check alone


def _lp_candidate(net, want: Sequence[set[int]], lo, hi) -> list[flint.fmpq] | None:
    """A point of the box whose hidden pattern is ``want`` (per hidden layer, the active neurons), from an LP.

    With the pattern fixed every pre-activation is affine in ``x``; HiGHS (scipy) maximises the
    smallest normalised margin.  Only a proposal: None without scipy or when infeasible; the
    caller checks the point exactly.
    """
    try:
        import numpy as np
        from scipy.optimize import linprog
    except ImportError:
        return None
    n0 = net.widths[0]
    M, m = np.eye(n0), np.zeros(n0)  # h_{l-1} = M x + m
    rows, rhs = [], []
    for l in range(1, net.L):
        W = np.array([[_float(v) for v in row] for row in net.W[l - 1].table()])
        b = np.array([_float(v) for v in net.b[l - 1]])
        A, c = W @ M, W @ m + b  # z_l = A x + c
        mask = np.zeros(len(c))
        for u in range(len(c)):
            norm = float(np.linalg.norm(A[u])) or 1.0
            sign = -1.0 if u in want[l - 1] else 1.0  # active: -(A x + c) + t |A| <= 0
            rows.append([*(sign * A[u]), norm])
            rhs.append(-sign * c[u])
            mask[u] = u in want[l - 1]
        M, m = A * mask[:, None], c * mask
    bounds = [(_float(a), _float(b)) for a, b in zip(lo, hi)] + [(0.0, None)]
    cost = np.zeros(n0 + 1)
    cost[-1] = -1.0
    try:
        res = linprog(cost, A_ub=np.array(rows), b_ub=np.array(rhs), bounds=bounds, method="highs")
    except ValueError:
        return None
    if res.status != 0 or res.x[-1] <= 0:
        return None
    return [flint.fmpq(*Fraction(float(v)).as_integer_ratio()) for v in res.x[:n0]]


class GammaRows:
    """What ``design`` needs of a network (module docstring); subclasses for the MLP and the layer graph.

    Attributes
    ----------
    dim : int
        The rank an identifying sample reaches: ``dim`` (MLP) or ``dim_free`` (layer graph).
    dim_name : str
        ``"dim"`` or ``"dim_free"``, as reports name it.
    n_cols : int
        Columns of ``Gamma`` (``dim`` for the MLP, ``n_params`` for a layer graph).
    N_L : int
        Rows per sample (outputs).
    widths : list of int
        The widths reports show.
    names : list of str
        The name of each column's parameter.
    plain : bool
        True for the dense layered ReLU MLP (Theorem 8 and the MLP's obstructions apply only then).
    n0 : int
        Input coordinates (flattened).
    gamma_name, rule : str
        How outputs name the matrix (``Gamma``, ``Gamma_free``) and the rank rule (``C_S``,
        ``rank Gamma_free = dim_free``).
    limits : str
        One line: which obstruction searches do not apply, and the hypothesis that fails ("" if none).
    """

    n0: int
    gamma_name: str = "Gamma"
    rule: str = "C_S"
    limits: str = ""

    dim: int
    dim_name: str
    n_cols: int
    N_L: int
    widths: list[int]
    names: list[str]
    plain: bool
    L: int

    def state(self, X: Sequence[Sequence[flint.fmpq]]) -> tuple[list[np.ndarray], list[Any]]:
        """The sample's own pattern (ties resolved active) and its ties."""
        raise NotImplementedError

    def avoid(self, X: Sequence[Sequence[flint.fmpq]]) -> int:
        """An integer every prime used must not divide (the data's denominators)."""
        raise NotImplementedError

    def mod_p(self, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray], p: int, avoid: int) -> np.ndarray:
        """``Gamma(X) mod p``, int64 ``(n N_L, n_cols)``, row ``i N_L + k`` for sample ``i``, output ``k``."""
        raise NotImplementedError

    def exact_matrix(self, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray]) -> flint.fmpq_mat:
        """``Gamma(X)`` over Q at ``pattern``."""
        raise NotImplementedError

    def exact_rank(self, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                   rng: random.Random) -> int:
        """The exact rank of ``Gamma(X)`` over Q (certified; 0 for an empty sample)."""
        raise NotImplementedError

    def kernel(self, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
               rng: random.Random) -> tuple[int, list[list[int]]]:
        """``(rank, basis)``: the exact rank and an integer basis of ``ker Gamma(X)`` (checked over Q)."""
        raise NotImplementedError

    def residues(self, X: Sequence[Sequence[flint.fmpq]], pattern: Sequence[np.ndarray],
                 rng: random.Random) -> tuple[int, np.ndarray]:
        """A random word-size prime ``p`` and ``Gamma(X) mod p``."""
        avoid = self.avoid(X)
        p = random_primes(1, avoid, rng)[0]
        return p, self.mod_p(X, pattern, p, avoid)

    def point_rows(self, x: Sequence[flint.fmpq]) -> flint.fmpq_mat | None:
        """The ``N_L`` rows of ``Gamma`` at one point over Q, or None when ``x`` is on a kink (a tie)."""
        pattern, ties = self.state([list(x)])
        return None if ties else self.exact_matrix([list(x)], pattern)

    def active_sets(self, points: Sequence[Sequence[flint.fmpq]]) -> list[set[tuple[int, int]]]:
        """Per point, the kinked hidden units strictly on their positive side."""
        raise NotImplementedError

    def target(self, j: int) -> tuple[int, int, int | None] | None:
        """``(l, v, k)``: the unit parameter ``j`` enters and its input (None: not aimed at)."""
        return None

    def lp_candidate(self, want: Sequence[set[int]], lo, hi) -> list[flint.fmpq] | None:
        """A point with the wanted units active (an LP proposal, checked exactly by the caller), or None."""
        return None

    def obstructions(self, X, box, inside: bool) -> list[Obstruction]:
        """Directions in ``ker Gamma(X')`` for every sample ``X'`` in ``box`` (or anywhere), each proved exactly."""
        raise NotImplementedError

    def resolutions(self, X, report) -> list[list[np.ndarray]] | None:
        """The patterns of the tie resolutions ``report`` enumerated (the sample's own without ties), or None."""
        raise NotImplementedError


class MLPRows(GammaRows):
    """The dense layered ReLU MLP: ``Gamma`` in the coordinates ``tau`` (fixed edges removed), target ``dim``."""

    def __init__(self, net, fixed=None, params=None) -> None:
        from exactident.model.fixed_edges import fixed_edges, free_parameters

        self.net = net
        self.fixed = fixed if fixed is not None else fixed_edges(net)
        self.params = params if params is not None else free_parameters(net, self.fixed)
        self.dim, self.dim_name, self.n_cols = net.dim, "dim", net.dim
        self.N_L, self.widths, self.L, self.plain = net.widths[-1], list(net.widths), net.L, True
        self.names = [p.name for p in self.params]
        self.n0 = net.widths[0]

    def state(self, X):
        from exactident.model.activation import activation_state

        st = activation_state(self.net, X)
        return st.pattern, st.ties

    def avoid(self, X):
        from exactident.model.integer_forward import data_denominator

        return data_denominator(self.net, X)

    def mod_p(self, X, pattern, p, avoid):
        from exactident.model.gamma_modular import gamma_mod_p

        return gamma_mod_p(self.net, X, pattern, self.fixed, p, avoid)

    def exact_matrix(self, X, pattern):
        from exactident.model.gamma import gamma_exact
        from exactident.model.integer_forward import integer_forward

        return gamma_exact(self.net, X, integer_forward(self.net, X).Z(), pattern, self.fixed)

    def exact_rank(self, X, pattern, rng):
        from exactident.explain.kernel import integer_kernel

        if not X:
            return 0
        G = exact.to_integer_rows(self.exact_matrix(X, pattern))
        avoid = self.avoid(X)
        return integer_kernel(G, lambda q: self.mod_p(X, pattern, q, avoid), avoid=avoid, rng=rng)[0]

    def kernel(self, X, pattern, rng):
        from exactident.explain.kernel import gamma_kernel

        k = gamma_kernel(self.net, X, pattern, self.fixed, rng=rng)
        return k.rank, [list(v) for v in k.basis]

    def point_rows(self, x):
        from exactident.model.activation import activation_state
        from exactident.model.gamma import gamma_exact

        st = activation_state(self.net, [list(x)])
        return None if st.ties else gamma_exact(self.net, [list(x)], st.Z, st.pattern, self.fixed)

    def active_sets(self, points):
        from exactident.model.activation import activation_state

        if not points:
            return []
        Z = activation_state(self.net, [list(x) for x in points]).Z
        return [{(l, v) for l in range(1, self.L) for v in range(self.widths[l]) if Z[l - 1][i, v] > _ZERO}
                for i in range(len(points))]

    def target(self, j):
        prm = self.params[j]
        return (prm.l, prm.i, prm.j) if prm.l < self.L else None

    def lp_candidate(self, want, lo, hi):
        return _lp_candidate(self.net, want, lo, hi)

    def obstructions(self, X, box, inside):
        from exactident.explain.obstructions import obstructions
        from exactident.model.activation import activation_state
        from exactident.model.diagnostics import neuron_activity

        state = activation_state(self.net, X)
        candidates = [(a.l, a.v, 1 if a.is_always_active else -1) for a in neuron_activity(state)
                      if a.is_always_active or a.is_dead] if inside else []
        return obstructions(self.net, self.fixed, self.params, box, candidates)

    def unseen_on_box(self, X, points, obs: Sequence[Obstruction], box, rng: random.Random) -> list[Obstruction]:
        """Single weights still in the kernel after the point search whose column is proved zero on the box."""
        from exactident.explain.obstructions import Obstruction, never_seen

        X_new = [list(x) for x in X] + list(points)
        left = self.kernel(X_new, self.state(X_new)[0], rng)[1]
        more = []
        covered = {j for o in obs for d in o.deltas for j, x in enumerate(d) if x != 0
                   and sum(1 for y in d if y != 0) == 1}
        for vec in left:
            nz = [j for j, x in enumerate(vec) if x]
            if len(nz) == 1 and nz[0] not in covered and never_seen(self.net, box, self.params[nz[0]]):
                delta = [_ZERO] * self.dim
                delta[nz[0]] = flint.fmpq(1)
                prm = self.params[nz[0]]
                more.append(Obstruction("unseen-on-box", [(prm.l, prm.i)], [delta], True,
                                        f"{prm.name} is never seen on the box (exact interval bounds: neuron "
                                        f"({prm.l},{prm.i}) is inactive wherever its input {prm.j} is nonzero)"))
        return more

    def resolutions(self, X, report):
        from exactident.model.activation import Tie, activation_state, resolve_ties

        state = activation_state(self.net, X)
        if not state.ties or report.patterns == []:
            return [state.pattern]
        if not report.patterns or len(report.patterns) > 64:
            return None
        return [resolve_ties(state.pattern, [Tie(t["sample"], t["layer"], t["neuron"]) for t in e["ties"]],
                             [bool(t["active"]) for t in e["ties"]]) for e in report.patterns]


class GraphRows(GammaRows):
    """A layer graph (``W = T theta + c``): ``Gamma_free`` over ``theta``, target ``dim_free`` (module docstring)."""

    def __init__(self, cn) -> None:
        from exactident.model.symmetry import rescaling_symmetry

        self.cn, self.sym = cn, rescaling_symmetry(cn)
        self.dim, self.dim_name, self.n_cols = self.sym.dim_free, "dim_free", cn.n_params
        self.N_L, self.widths, self.L, self.plain = cn.widths[-1], list(cn.layer_widths), cn.L, False
        self.names = [cn.param_name(j) for j in range(cn.n_params)]
        self.n0 = cn.widths[0]
        self.gamma_name, self.rule = "Gamma_free", "rank Gamma_free = dim_free"
        self.limits = ("not searched on a layer graph: theta in S, twins, dead/active units on the box, unseen "
                       "weights (each moves one unit's own weights, and W = T theta + c shares parameters between "
                       "units)")

    def free_state(self, X):
        from exactident.model.gamma_free import free_state

        return free_state(self.cn, X)

    def state(self, X):
        st = self.free_state(X)
        return st.pattern, st.ties

    def avoid(self, X):
        from exactident.model.gamma_free import free_data_denominator

        return free_data_denominator(self.cn, X)

    def mod_p(self, X, pattern, p, avoid):
        from exactident.model.gamma_free import gamma_free_mod_p

        return gamma_free_mod_p(self.cn, X, pattern, p, avoid)

    def exact_matrix(self, X, pattern):
        from exactident.model.gamma_free import gamma_free_exact

        return gamma_free_exact(self.cn, X, pattern)

    def exact_rank(self, X, pattern, rng):
        from exactident.check.free_rank import free_rank

        if not X:
            return 0
        fr = free_rank(self.cn, X, pattern, self.sym, rng, exact_ranks=True)
        # free_rank's interval when no exact kernel was found: the certified kernel below decides
        return fr.rank if fr.rank is not None else self.kernel(X, pattern, rng)[0]

    def kernel(self, X, pattern, rng):
        # the MLP's route on Gamma_free: a kernel mod p lifted to Q and checked exactly (G K = 0)
        from exactident.explain.kernel import integer_kernel

        if not X:
            return 0, [[int(i == j) for i in range(self.n_cols)] for j in range(self.n_cols)]
        avoid = self.avoid(X)
        G = exact.to_integer_rows(self.exact_matrix(X, pattern))
        rank, K, _prime = integer_kernel(G, lambda q: self.mod_p(X, pattern, q, avoid), avoid=avoid, rng=rng)
        return rank, K

    def active_sets(self, points):
        if not points:
            return []
        st = self.free_state([list(x) for x in points])
        return [{(l, int(v)) for l in range(1, self.L) for v in np.flatnonzero(self.cn.kinked(l))
                 if st.Z[l - 1][i, int(v)] > _ZERO} for i in range(len(points))]


    def resolutions(self, X, report):
        from exactident.model.gamma_free import resolve_ties

        st = self.free_state(X)
        if not st.ties or report.patterns == []:
            return [st.pattern]
        if not report.patterns or len(report.patterns) > 64:
            return None
        return [resolve_ties(st, [bool(t["active"]) for t in e["ties"]]) for e in report.patterns]

    def pre_activation_bounds(self, box) -> list[list[tuple[flint.fmpq, flint.fmpq]]]:
        """Exact interval bounds ``[lo, hi]`` of every pre-activation ``z_l[v]``, ``l = 1..L-1``, on the box.

        Interval arithmetic over Q: ``z = W h + b`` term by term, then each unit's activation
        (``z`` for ``z >= 0``, ``a z`` below, ``a`` its current slope) at the ends and at 0.
        """
        h = [(flint.fmpq(a), flint.fmpq(b)) for a, b in zip(box[0], box[1])]
        out = []
        for l in range(1, self.L):
            W, b = self.cn.W[l - 1], self.cn.b[l - 1]
            z = []
            for v in range(self.cn.widths[l]):
                lo = hi = b[v]
                for k, (a_k, b_k) in enumerate(h):
                    w = W[v, k]
                    if w != 0:
                        lo += min(w * a_k, w * b_k)
                        hi += max(w * a_k, w * b_k)
                z.append((lo, hi))
            out.append(z)
            slope = self.cn.negative_slope[l - 1]

            def act(t: flint.fmpq, a: flint.fmpq) -> flint.fmpq:
                return t if t >= 0 else a * t

            h = []
            for v, (lo, hi) in enumerate(z):
                vals = [act(lo, slope[v]), act(hi, slope[v])] + ([_ZERO] if lo < 0 < hi else [])
                h.append((min(vals), max(vals)))
        return out

    def obstructions(self, X, box, inside):
        """PReLU slopes never used on the box: every unit sharing slope ``theta_j`` has ``z >= 0`` on it.

        There ``h = z`` whatever ``theta_j``, so ``f`` is the same on the whole box all along the
        line ``theta + t e_j`` (not a rescaling: rescalings keep slopes): no sample in the box
        identifies theta.  Proved by :meth:`pre_activation_bounds`.
        """
        from exactident.explain.obstructions import Obstruction

        if not any((I >= 0).any() for I in self.cn.slope_index):
            return []
        bounds = self.pre_activation_bounds(box)
        in_weights = {int(j) for I in self.cn.W_index + self.cn.b_index for j in np.unique(I) if j >= 0}
        units: dict[int, list[tuple[int, int]]] = {}
        for l in range(1, self.L):
            for v, j in enumerate(self.cn.slope_index[l - 1].tolist()):
                if j >= 0:
                    units.setdefault(j, []).append((l, v))
        out = []
        for j, us in sorted(units.items()):
            if j in in_weights or any(bounds[l - 1][v][0] < 0 for l, v in us):
                continue
            delta = [_ZERO] * self.n_cols
            delta[j] = flint.fmpq(1)
            low = min(bounds[l - 1][v][0] for l, v in us)
            out.append(Obstruction("slope-unused-on-box", us, [delta], True,
                                   f"PReLU slope {self.names[j]} is never used on the box: "
                                   f"{self.cn.describe_units(us)} has pre-activation >= {low} >= 0 on the whole box "
                                   "(exact interval bounds), so f does not depend on it there"))
        return out


def rows_of(case) -> GammaRows:
    """The interface for a case: :class:`MLPRows` for a plain ReLU MLP, else :class:`GraphRows`."""
    return MLPRows(case.network) if case.is_plain else GraphRows(case.compiled)
