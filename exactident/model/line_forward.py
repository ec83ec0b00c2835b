"""The network along a straight line ``theta(t) = theta + t delta``, every sample at once, exactly.

Shared by the engine (:mod:`exactident.boundary.line`, :mod:`exactident.boundary.structural`,
:mod:`exactident.explain.parameters`, and for layer graphs :mod:`exactident.boundary.dead_units`)
and the verifier (:mod:`exactident.verify.line`, for the plain MLP and the layer graph, and
:mod:`exactident.verify.explained`), like :mod:`exactident.linalg.blas_modp`: each caller
builds ``theta``, ``delta`` and ``X`` from its own reading of the case.

Along the line every pre-activation ``z_l(x^i; t)`` is, on a segment ``(0, t0)``, a
polynomial in ``t`` with rational coefficients.  The network is run on those polynomials
(:func:`line_pass`): with the data brought to integers over one denominator per layer
(FLINT ``fmpq_mat.numer_denom``), ``h_{l-1}(t) = sum_k t^k H_k / S`` and
``W_l = W'/d_W``, ``delta W_l = D'/d_D``, ``b_l = b'/d_b``, ``delta b_l = e'/d_e``,
``S' = lcm(d_W S, d_D S, d_b, d_e)``::

    Z_k = (S'/(d_W S)) H_k W'^T + (S'/(d_D S)) H_{k-1} D'^T + [k = 0] (S'/d_b) 1 b'^T + [k = 1] (S'/d_e) 1 e'^T

(one FLINT ``fmpz_mat`` product per layer and degree).  A hidden unit's ReLU is taken on the
side its pre-activation has *just after* ``t = 0``: the sign of its lowest nonzero coefficient
(a unit identically 0 outputs 0 on either side).  The layer-graph form (leaky ReLU, PReLU,
linear skip carriers: a negative-side slope ``a_v``, moving as ``a_v + t da_v`` for a PReLU
slope) is the same pass with ``(a_v + t da_v) z`` on the negative side, again a polynomial.
Those polynomials are the true values for every ``t`` in ``(0, t0)`` as long as no hidden
pre-activation polynomial (of a kinked unit: a linear unit has none) has a root in
``(0, t0)`` (by induction over the layers); then every hidden unit keeps one sign on the open
segment, and the outputs on ``X`` are the output polynomials on the closed segment
``[0, t0]`` (continuity).

Which ``t0`` is proved:

- :meth:`LinePass.failures_below` decides exactly whether a given ``t0`` (``None``: every
  ``t > 0``) is a segment: a polynomial with no sign change among its coefficients has no
  positive root (Descartes); ``sum_{k >= 1} |q_k| t0^k <= |q_0|`` (after dividing by the
  lowest power of ``t``) excludes roots in ``(0, t0)``; otherwise Sturm's theorem counts
  them over Q.
- :meth:`LinePass.segment_end` finds one: the first positive root over all hidden
  pre-activations when it is rational (a linear factor over Z), else a rational below it
  within a relative ``2**-30`` (bisection with Sturm counts on the irreducible factor).

Nothing here is floating point.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import pairwise
from math import lcm
from typing import Any

import flint
import numpy as np

__all__ = ["ROOT_BITS", "LinePass", "line_outputs", "line_pass", "rational_matrix"]

#: Relative precision of an irrational first root (:meth:`LinePass.segment_end`).
ROOT_BITS = 30


def rational_matrix(rows: Any, nrows: int, ncols: int) -> flint.fmpq_mat:
    """A matrix of rationals (``fmpq_mat``, or rows of Fraction / fmpq / int) as ``fmpq_mat``.

    Raises
    ------
    TypeError
        From FLINT, for a float or another non-rational entry (the exact path takes no float).
    """
    if isinstance(rows, flint.fmpq_mat):
        return rows
    return flint.fmpq_mat(nrows, ncols, [v if isinstance(v, flint.fmpq) else flint.fmpq(v.numerator, v.denominator)
                                         for row in rows for v in row])


def _objects(M: flint.fmpz_mat, n: int, N: int) -> np.ndarray:
    """``M`` as an ``(n, N)`` numpy object array of ``fmpz`` (C-level comparisons, no Python loop)."""
    out = np.empty((n, N), dtype=object)
    if n and N:
        out[:, :] = M.tolist()
    return out


@dataclass
class LinePass:
    """Pre-activations along ``theta + t delta`` on every sample, as polynomials in ``t``.

    Attributes
    ----------
    Z : list of list of fmpz_mat
        ``Z[l-1][k]``, shape ``(n, N_l)``: ``z_l(x^i; t) = sum_k Z[l-1][k][i, v] t^k / den[l-1]``
        (``l = 1..L``; hidden ReLUs on the side just after ``t = 0``).  Trailing all-zero
        degrees are dropped (at least degree 0 is kept).
    den : list of int
        ``den[l-1] > 0``, one per layer.
    kinked : list of bool ndarray, optional
        ``kinked[l-1]``, shape ``(N_l,)`` (hidden layers): units with a kink at ``z = 0``; a
        unit whose negative-side slope is fixed at 1 (a linear unit, e.g. a skip carrier) has
        none, so its sign changes nothing.  ``None``: every hidden unit is kinked (ReLU).
    """

    Z: list[list[flint.fmpz_mat]]
    den: list[int]
    kinked: list[np.ndarray] | None = None

    @property
    def n(self) -> int:
        return self.Z[0][0].nrows() if self.Z else 0

    def is_constant(self) -> bool:
        """Every output on ``X`` has zero coefficients of degree ``>= 1`` (for small ``t > 0``)."""
        return all(Zk.is_zero() for Zk in self.Z[-1][1:])

    def moving(self) -> list[tuple[int, int, int, Fraction]]:
        """``(i, o, k, c)``: output ``o`` at sample ``i`` has ``c t^k`` as its lowest nonconstant term
        (``k >= 1``, ``c != 0``), for every moving output, by sample then output."""
        out = self.Z[-1]
        if len(out) < 2:
            return []
        n, N = out[0].nrows(), out[0].ncols()
        found: dict[tuple[int, int], tuple[int, Fraction]] = {}
        for k in range(1, len(out)):
            A = _objects(out[k], n, N)
            for i, o in zip(*np.nonzero(A != 0)):
                found.setdefault((int(i), int(o)), (k, Fraction(int(A[i, o]), self.den[-1])))
        return [(i, o, k, c) for (i, o), (k, c) in sorted(found.items())]

    def output_polys(self) -> list[list[list[Fraction]]]:
        """Per sample, per output: the Fraction coefficients of ``t^0, t^1, ...``."""
        out, S = self.Z[-1], self.den[-1]
        n, N = out[0].nrows(), out[0].ncols()
        tables = [Zk.tolist() for Zk in out]
        return [[[Fraction(int(T[i][o]), S) for T in tables] for o in range(N)] for i in range(n)]

    def _sign_changing(self) -> list[tuple[int, int, int, list[int]]]:
        """``(i, l, v, coefficients)`` of the hidden pre-activations with coefficients of both signs
        (the others have no positive root: Descartes' rule of signs)."""
        out = []
        for l, Zl in enumerate(self.Z[:-1], start=1):
            if len(Zl) < 2:
                continue  # constant in t
            n, N = Zl[0].nrows(), Zl[0].ncols()
            A = np.stack([_objects(Zk, n, N) for Zk in Zl])
            both = (A > 0).any(axis=0) & (A < 0).any(axis=0)
            if self.kinked is not None:
                both &= self.kinked[l - 1][None, :]
            for i, v in zip(*np.nonzero(both)):
                out.append((int(i), l, int(v), [int(c) for c in A[:, i, v]]))
        return out

    def failures_below(self, t0: flint.fmpq | None) -> list[tuple[int, int, int]]:
        """The hidden pre-activations ``(i, l, v)`` with a root in ``(0, t0)`` (``None``: in ``(0, oo)``).

        Empty: on the open segment every hidden unit keeps the side it has just after 0, so the
        outputs on ``X`` are the output polynomials for every ``t`` in ``[0, t0]`` (exact).
        """
        bad = []
        for i, l, v, coeffs in self._sign_changing():
            q = _stripped(coeffs)
            if t0 is None:
                if _count_roots(q, flint.fmpq(0), None) > 0:
                    bad.append((i, l, v))
            elif not _surely_no_root(q, t0) and _count_roots(_deflate(q, t0), flint.fmpq(0), t0) > 0:
                bad.append((i, l, v))
        return bad

    def segment_end(self) -> flint.fmpq | None:
        """A ``t0 > 0`` with no root of a hidden pre-activation in ``(0, t0)``; ``None``: none in ``(0, oo)``.

        The first positive root itself when it is rational, else a rational below it (relative
        ``2**-ROOT_BITS``).
        """
        best: flint.fmpq | None = None
        pending = []
        for _i, _l, _v, coeffs in self._sign_changing():
            q = _stripped(coeffs)
            if q.degree() == 1:  # q_0 + q_1 t with opposite signs: the root -q_0/q_1 > 0
                r = -q[0] / q[1]
                best = r if best is None or r < best else best
            else:
                pending.append(q)
        for q in pending:
            if best is not None and (_surely_no_root(q, best) or _count_roots(_deflate(q, best), flint.fmpq(0),
                                                                                best) == 0):
                continue
            first = _first_root_below(q)
            if first is not None and (best is None or first < best):
                best = first
        return best


def _stripped(coeffs: Sequence[int]) -> flint.fmpq_poly:
    """The polynomial divided by its lowest power of ``t`` (so ``q(0) != 0``)."""
    m = next(k for k, c in enumerate(coeffs) if c != 0)
    return flint.fmpq_poly(list(coeffs[m:]))


def _surely_no_root(q: flint.fmpq_poly, t0: flint.fmpq) -> bool:
    """``sum_{k >= 1} |q_k| t0^k <= |q_0|``: then ``|q(t) - q_0| < |q_0|`` on ``(0, t0)`` (sufficient only)."""
    rest, power = flint.fmpq(0), flint.fmpq(1)
    for k in range(1, q.degree() + 1):
        power *= t0
        rest += abs(q[k]) * power
    return rest <= abs(q[0])


def _deflate(q: flint.fmpq_poly, t0: flint.fmpq) -> flint.fmpq_poly:
    """``q`` with every factor ``(t - t0)`` divided out (so Sturm counts are taken at non-roots)."""
    lin = flint.fmpq_poly([-t0, 1])
    while q.degree() > 0 and q(t0) == 0:
        q = q // lin
    return q


def _sturm(q: flint.fmpq_poly) -> list[flint.fmpq_poly]:
    seq = [q, q.derivative()]
    while seq[-1] != 0:
        r = -(seq[-2] % seq[-1])
        if r == 0:
            break
        seq.append(r)
    return [p for p in seq if p != 0]


def _variations(values) -> int:
    signs = [v > 0 for v in values if v != 0]
    return sum(1 for a, b in pairwise(signs) if a != b)


def _count_roots(q: flint.fmpq_poly, a: flint.fmpq, b: flint.fmpq | None) -> int:
    """Distinct real roots of ``q`` in the open ``(a, b)`` (``b = None``: ``+oo``); ``q(a), q(b) != 0``.

    Sturm's theorem (Basu, Pollack, Roy, *Algorithms in Real Algebraic Geometry*, Thm 2.50):
    the number is ``Var(a) - Var(b)`` over the signed remainder sequence of ``q, q'``.
    """
    if q.degree() < 1:
        return 0
    seq = _sturm(q)
    at_a = _variations([p(a) for p in seq])
    at_b = _variations([p[p.degree()] for p in seq] if b is None else [p(b) for p in seq])
    return at_a - at_b


def _first_root_below(q: flint.fmpq_poly) -> flint.fmpq | None:
    """The smallest positive root of ``q`` (``q(0) != 0``) if rational, else a rational just below it."""
    zero = flint.fmpq(0)
    best = None
    _, factors = q.numer().factor()
    for f, _mult in factors:
        if f.degree() == 1:
            r = flint.fmpq(-int(f[0]), int(f[1]))
            if r > 0 and (best is None or r < best):
                best = r
            continue
        g = flint.fmpq_poly([int(c) for c in f.coeffs()])
        if _count_roots(g, zero, None) == 0:
            continue
        # Irreducible of degree >= 2: no rational root, so no bisection point is a root.
        hi = 1 + max(abs(g[k] / g[g.degree()]) for k in range(g.degree()))  # every root is below (Cauchy)
        while _count_roots(g, zero, hi / 2) > 0:
            hi = hi / 2
        lo = hi / 2  # no root in (0, lo], one in (lo, hi)
        for _ in range(ROOT_BITS):
            mid = (lo + hi) / 2
            if _count_roots(g, lo, mid) > 0:
                hi = mid
            else:
                lo = mid
        if best is None or lo < best:
            best = lo
    return best


def line_pass(W: Sequence[Any], b: Sequence[Any], dW: Sequence[Any], db: Sequence[Any],
              X: Sequence[Sequence[Any]], slopes: Sequence[Sequence[Any]] | None = None,
              dslopes: Sequence[Sequence[Any]] | None = None) -> LinePass:
    """Run the network along ``theta + t delta`` on every sample at once (module docstring).

    Parameters
    ----------
    W, dW : per layer an ``fmpq_mat`` ``N_l x N_{l-1}`` or rows of Fraction / fmpq (Q)
        ``W_l`` and the direction ``delta W_l``.
    b, db : per layer a sequence of Fraction / fmpq (Q)
    X : n rows of ``N_0`` Fraction / fmpq (Q)
    slopes, dslopes : per hidden layer ``l = 1..L-1`` a sequence of ``N_l`` Fraction / fmpq (Q), optional
        The layer-graph form (:class:`exactident.model.network.Network`): hidden
        unit ``v`` outputs ``z`` for ``z >= 0`` and ``(a_v + t da_v) z`` below, ``a_v`` its
        negative-side slope (0 ReLU, leaky ReLU, PReLU, 1 a linear unit) and ``da_v`` the
        direction of a PReLU slope.  On a segment where ``z`` keeps its sign this is again a
        polynomial in ``t``, so everything above holds unchanged; a unit with ``a_v = 1`` and
        ``da_v = 0`` has no kink and its roots never end a segment.  ``None``: every slope 0
        and fixed (ReLU, the plain MLP).

    Returns
    -------
    LinePass

    Examples
    --------
    ``f = 3 relu(2x + 1)`` moved along ``(dw, db_1, db_2) = (0, 1, -3)``: at the kink ``x = -1/2``
    ``3 relu(t) - 3t = 0``; at ``x = 0``, ``3 (1 + t) - 3t = 3``: constant for every ``t > 0``.

    >>> F = Fraction
    >>> lp = line_pass([[[F(2)]], [[F(3)]]], [[F(1)], [F(0)]], [[[F(0)]], [[F(0)]]], [[F(1)], [F(-3)]],
    ...                [[F(-1, 2)], [F(0)]])
    >>> lp.is_constant(), lp.output_polys(), lp.segment_end()
    (True, [[[Fraction(0, 1)]], [[Fraction(3, 1)]]], None)

    Along ``db_1 = -1`` at ``x = 0`` the unit reaches its kink at ``t = 1``:

    >>> lp = line_pass([[[F(2)]], [[F(3)]]], [[F(1)], [F(0)]], [[[F(0)]], [[F(0)]]], [[F(-1)], [F(0)]], [[F(0)]])
    >>> lp.moving(), lp.segment_end(), lp.failures_below(flint.fmpq(1)), lp.failures_below(flint.fmpq(2))
    ([(0, 0, 1, Fraction(-3, 1))], 1, [], [(0, 1, 0)])

    A leaky unit (slope ``1/10``) at ``x = -1``: ``z = -1 + t`` along ``db_1 = 1``, so the
    output is ``(-1 + t)/10`` until the kink at ``t = 1``:

    >>> lp = line_pass([[[F(1)]], [[F(1)]]], [[F(0)], [F(0)]], [[[F(0)]], [[F(0)]]], [[F(1)], [F(0)]],
    ...                [[F(-1)]], slopes=[[F(1, 10)]])
    >>> lp.output_polys(), lp.segment_end()
    ([[[Fraction(-1, 10), Fraction(1, 10)]]], 1)
    """
    n = len(X)
    n_in = W[0].ncols() if isinstance(W[0], flint.fmpq_mat) else len(W[0][0])
    widths = [n_in] + [len(bl) for bl in b]
    Hm, S_f = rational_matrix(X, n, widths[0]).numer_denom()
    H, S = [Hm], int(S_f)
    ones = flint.fmpz_mat(n, 1, [1] * n)
    L = len(W)
    Z_all: list[list[flint.fmpz_mat]] = []
    dens: list[int] = []
    kinked: list[np.ndarray] | None = [] if slopes is not None or dslopes is not None else None
    for l in range(1, L + 1):
        N, M = widths[l], widths[l - 1]
        Wn, dW_ = rational_matrix(W[l - 1], N, M).numer_denom()
        Dn, dD_ = rational_matrix(dW[l - 1], N, M).numer_denom()
        bn, db_ = rational_matrix([b[l - 1]], 1, N).numer_denom()
        en, de_ = rational_matrix([db[l - 1]], 1, N).numer_denom()
        dWi, dDi, dbi, dei = int(dW_), int(dD_), int(db_), int(de_)
        S_new = lcm(dWi * S, dDi * S, dbi, dei)
        WT, DT = Wn.transpose() * (S_new // (dWi * S)), Dn.transpose() * (S_new // (dDi * S))
        moves = not Dn.is_zero()
        Z = []
        for k in range(len(H) + 1):
            acc = H[k] * WT if k < len(H) else flint.fmpz_mat(n, N)
            if k >= 1 and moves:
                acc = acc + H[k - 1] * DT
            if k <= 1:
                vec, d = (bn, dbi) if k == 0 else (en, dei)
                if not vec.is_zero():
                    # the row on every sample: a column of ones times it, one C product (not n copies in Python)
                    acc = acc + ones * flint.fmpz_mat(1, N, [v * (S_new // d) for v in vec.entries()])
            Z.append(acc)
        while len(Z) > 1 and Z[-1].is_zero():
            Z.pop()
        S = S_new
        Z_all.append(Z)
        dens.append(S)
        if l < L:  # the side just after t = 0: the sign of the lowest nonzero coefficient
            A = [_objects(Zk, n, N) for Zk in Z]
            lead = A[-1]
            for Ak in reversed(A[:-1]):
                lead = np.where(Ak != 0, Ak, lead)
            keep = lead > 0
            a, da = _slopes(slopes, l, N), _slopes(dslopes, l, N)
            if kinked is not None:
                kinked.append(np.array([not (av == 1 and dav == 0) for av, dav in zip(a, da)], dtype=bool))
            if not any(a) and not any(da):  # ReLU: the negative side outputs 0
                H = Z if keep.all() else [flint.fmpz_mat(np.where(keep, Ak, 0).tolist()) if n and N
                                          else flint.fmpz_mat(n, N) for Ak in A]
            else:  # (a + t da) z below 0, on the scale S q (q clears the slopes' denominators)
                q = lcm(1, *(int(v.denominator) for v in [*a, *da]))
                up = np.array([int(v * q) for v in a], dtype=object)[None, :]
                dup = np.array([int(v * q) for v in da], dtype=object)[None, :]
                zero = np.zeros((n, N), dtype=object)
                H = []
                for k in range(len(A) + (1 if any(da) else 0)):
                    Ak = A[k] if k < len(A) else zero
                    Hk = np.where(keep, Ak * q, Ak * up)
                    if k >= 1:
                        Hk = Hk + np.where(keep, 0, A[k - 1] * dup)
                    H.append(flint.fmpz_mat(Hk.tolist()) if n and N else flint.fmpz_mat(n, N))
                while len(H) > 1 and H[-1].is_zero():
                    H.pop()
                S *= q
    return LinePass(Z_all, dens, kinked)


def _slopes(values: Sequence[Sequence[Any]] | None, l: int, N: int) -> list[Fraction]:
    """Layer ``l``'s slopes (or their direction) as Fractions; ``None``: ``N`` zeros."""
    if values is None:
        return [Fraction(0)] * N
    if any(isinstance(v, float) for v in values[l - 1]):
        raise TypeError(f"slopes of layer {l}: a float (the exact path takes rationals only)")
    return [Fraction(int(v.p), int(v.q)) if isinstance(v, flint.fmpq) else Fraction(v) for v in values[l - 1]]


def line_outputs(W, b, dW, db, X) -> list[list[list[Fraction]]]:
    """The outputs along ``theta + t delta`` per sample and output, as Fraction coefficients of ``t^0, t^1, ...``
    (for small ``t > 0``; :func:`line_pass`'s ``output_polys``; ``[]`` for no sample)."""
    if len(X) == 0:
        return []
    return line_pass(W, b, dW, db, X).output_polys()
