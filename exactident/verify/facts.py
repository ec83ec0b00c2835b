"""What the verifier knows about a case: derived from the case file alone, exactly.

:class:`CaseFacts` holds a plain ReLU MLP's facts (with Fractions), :class:`ConstrainedFacts` a layer
graph's (convolution, pooling, skips, leaky ReLU, PReLU: with FLINT).

Nothing in a report is trusted: the ties, which of them are invisible (and the
layer that blocks each), the visible ties whose resolutions exist (ties at equal
sample points share a side: ``CaseFacts.classes``), the degenerate set ``S``,
``dim`` and the activation pattern of any tie resolution are recomputed here by the verifier's own forward pass
(:func:`exactident.verify.forward.scaled_forward`, integer arithmetic on scaled data), and the report's claims are
checked against them (:mod:`exactident.verify.claims`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from math import lcm
from typing import Any

import flint
import numpy as np

from exactident.model.network import Network
from exactident.verify.forward import LazyRows, integer_forward, scaled_forward
from exactident.verify.gamma import gamma_free_mod_p
from exactident.verify.symmetry import Symmetry, rescaling_symmetry

__all__ = ["CaseFacts", "ConstrainedFacts", "Tie"]

#: A tie as the verifier keys it: (sample, layer, neuron).
Tie = tuple[int, int, int]


@dataclass
class CaseFacts:
    """Facts of one case, recomputed from the case file.

    Attributes
    ----------
    name : str
    widths : list of int
        ``[N_0, ..., N_L]``.
    W, b : nested lists of Fraction
    X : sequence of rows of Fraction (each row converted from the case on first use)
    Z : sequence (per sample) of lists (per layer ``1..L``) of Fraction
        Pre-activations; they do not depend on how ties resolve (``relu(0) = 0``).
        Built per sample on first use from ``scaled``.
    ties : list of Tie
        Every ``(i, l, v)`` with ``z_l(x^i)_v == 0``, hidden ``l``, sorted.
    blocked_by : dict Tie -> int
        For each invisible tie, the first hidden layer ``m > l`` whose neurons are
        all strictly inactive at ``x^i`` (docs/boundary.md).
    visible : list of Tie
        ``ties`` minus the invisible ones, sorted.
    degenerate : list of (l, v, why)
        Hidden neurons putting theta in ``S``: ``why`` is ``"outgoing"`` (all outgoing
        weights zero) or ``"incoming"`` (all incoming weights and the bias zero).
    scaled : list of (list of list of fmpz, int)
        Per layer ``l = 1..L``, ``(Z_l, S_l)``: ``z_l(x^i)_v = Z_l[i][v] / S_l``
        (:func:`exactident.verify.forward.scaled_forward`, exact integer arithmetic).
    classes : list of list of Tie
        The visible ties grouped by (sample point, layer, neuron): ties of one class sit
        at samples with equal exact coordinates, whose pre-activations (recomputed here)
        are equal, and stay equal for every parameter near theta, so the ties of a class
        are on the same side in every reachable pattern.  The tie resolutions that exist
        are the ``2^len(classes)`` that give each class one side (docs/boundary.md).
    X_q : sequence of rows of fmpq
        The case's sample itself (the exact line pass reads it without a ``Fraction`` round trip).
    """

    name: str
    widths: list[int]
    W: list
    b: list
    X: Sequence
    Z: Sequence
    ties: list[Tie]
    blocked_by: dict[Tie, int]
    visible: list[Tie]
    degenerate: list[tuple[int, int, str]]
    classes: list[list[Tie]]
    scaled: list = field(default_factory=list)
    #: The sample as the case gives it (rows of fmpq), for the exact passes that take FLINT rationals
    #: (no ``Fraction`` row built and converted back); empty: use ``X``.
    X_q: Sequence = ()

    @property
    def L(self) -> int:
        return len(self.widths) - 1

    @property
    def n(self) -> int:
        return len(self.X)

    @property
    def dim(self) -> int:
        """``|F_theta| + |B| = N_0 N_1 + ... + N_{L-1} N_L + N_L``."""
        w = self.widths
        return sum(w[l] * w[l + 1] for l in range(self.L)) + w[-1]

    @classmethod
    def from_case(cls, case: Any) -> CaseFacts:
        """Recompute the facts of ``case`` (a validated :class:`exactident.io.case.Case`).

        Examples
        --------
        ``f = 3 relu(2x + 1)`` at ``-1/2, 1, -2``: one tie (sample 0), visible, theta not in ``S``.

        >>> from exactident.io.case import parse_case
        >>> case = parse_case({"format": "exactident-case/1", "name": "k", "widths": [1, 1, 1],
        ...                    "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]],
        ...                    "sample": [["-1/2"], ["1"], ["-2"]]})
        >>> f = CaseFacts.from_case(case)
        >>> f.ties, f.visible, f.degenerate, f.dim
        ([(0, 1, 0)], [(0, 1, 0)], [], 3)

        A repeated sample point: two ties, one class (they always share a side).

        >>> case = parse_case({"format": "exactident-case/1", "name": "k", "widths": [1, 1, 1],
        ...                    "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]],
        ...                    "sample": [["-1/2"], ["1"], ["-1/2"]]})
        >>> CaseFacts.from_case(case).classes
        [[(0, 1, 0), (2, 1, 0)]]
        """
        def fr(q) -> Fraction:
            return Fraction(int(q.p), int(q.q))

        W = [[[fr(q) for q in row] for row in M.table()] for M in case.network.W]
        b = [[fr(q) for q in bl] for bl in case.network.b]
        X = LazyRows(len(case.X), lambda i: [fr(q) for q in case.X[i]])
        widths = list(case.network.widths)
        L = len(widths) - 1
        scaled = scaled_forward(case.network.W, case.network.b, case.X)  # integers over one scale per layer
        Z = LazyRows(len(case.X), lambda i: [[Fraction(int(z), S) for z in Zl[i]] for Zl, S in scaled])
        ties = sorted((i, l, v) for l in range(1, L) for i, row in enumerate(scaled[l - 1][0])
                      for v, z in enumerate(row) if z == 0)
        blocked: dict[Tie, int] = {}
        for (i, l, v) in ties:
            for m in range(l + 1, L):
                if all(z < 0 for z in scaled[m - 1][0][i]):
                    blocked[(i, l, v)] = m
                    break
        degenerate = []
        for l in range(1, L):
            for v in range(widths[l]):
                if all(W[l][k][v] == 0 for k in range(widths[l + 1])):
                    degenerate.append((l, v, "outgoing"))
                elif all(w == 0 for w in W[l - 1][v]) and b[l - 1][v] == 0:
                    degenerate.append((l, v, "incoming"))
        visible = [t for t in ties if t not in blocked]
        return cls(case.name, widths, W, b, X, Z, ties, blocked, visible, degenerate, _classes(visible, X, Z),
                   scaled, case.X)

    def consistent(self, sides: dict[Tie, bool]) -> bool:
        """Every class of ``classes`` has one side under ``sides`` (a resolution that exists)."""
        return all(len({sides.get(t) for t in members}) == 1 for members in self.classes)

    def active(self, sides: dict[Tie, bool]):
        """``act(i) -> (l, v, z) -> bool`` for :func:`~exactident.verify.arith.forward_tangent`.

        Ties are on the side ``sides`` gives them, other ties active.
        """
        def at_sample(i: int):
            def act(l: int, v: int, z: Fraction) -> bool:
                key = (i, l, v)
                return sides.get(key, z >= 0)
            return act
        return at_sample

    def pattern(self, sides: dict[Tie, bool]) -> list[np.ndarray]:
        """Activation pattern of a tie resolution: ``z > 0`` active, ties per ``sides`` (others active).

        Returns
        -------
        list of bool arrays, ``pattern[l-1]`` of shape ``(n, N_l)`` for hidden ``l = 1..L-1``.
        """
        out = []
        for l in range(1, self.L):
            rows = self.scaled[l - 1][0] if self.scaled else [self.Z[i][l - 1] for i in range(self.n)]
            a = np.array([[z > 0 for z in row] for row in rows], dtype=bool).reshape(self.n, self.widths[l])
            out.append(a)
        for (i, l, v) in self.ties:  # z == 0: the side the resolution gives, active by default
            out[l - 1][i, v] = sides.get((i, l, v), True)
        return out


def _classes(visible: list[Tie], X: Sequence, Z: Sequence) -> list[list[Tie]]:
    """Visible ties grouped by (exact sample point, layer, neuron), in order of first appearance.

    Two ties share a class only if their points are equal coordinate by coordinate *and*
    the recomputed pre-activations at the two samples are equal (they must be: the
    forward pass is a function of the point); if in doubt they stay apart, which asks
    the report for more resolutions, never fewer.
    """
    out: list[list[Tie]] = []
    where: dict[tuple, list[int]] = {}
    for t in visible:
        i, l, v = t
        key = (tuple(X[i]), l, v)
        for k in where.get(key, []):
            j = out[k][0][0]
            if Z[j] == Z[i]:
                out[k].append(t)
                break
        else:
            where.setdefault(key, []).append(len(out))
            out.append([t])
    return out


@dataclass
class ConstrainedFacts:
    """Everything the verifier derives from a compiled network and its sample (nothing from a report).

    Attributes
    ----------
    cn : Network
    X : n rows of ``N_0`` fmpq
    forward : per layer ``(Z_l, S_l)`` from :func:`exactident.verify.forward.integer_forward`
    symmetry : Symmetry
    ties : list of ``(sample, layer, unit)``
        ``z = 0`` at a kinked unit, ordered by layer, then sample, then unit.
    avoid : int
        The lcm of every denominator of the case (no prime dividing it is used).
    """

    cn: Network
    X: list[list[flint.fmpq]]
    forward: list[tuple[flint.fmpz_mat, int]]
    symmetry: Symmetry
    ties: list[tuple[int, int, int]]  # (sample, layer, unit) with z = 0 at a kinked unit
    avoid: int  # lcm of every denominator of the case

    @classmethod
    def from_network(cls, cn: Network, X: Sequence[Sequence[object]]) -> ConstrainedFacts:
        Xq = [[v if isinstance(v, flint.fmpq) else flint.fmpq(v) for v in row] for row in X]  # type: ignore[call-overload]
        fw = integer_forward(cn, Xq)
        ties = []
        for l in range(1, cn.L):
            kinked = [bool(int(cn.slope_index[l - 1][v]) >= 0 or cn.negative_slope[l - 1][v] != 1)
                      for v in range(cn.widths[l])]
            Z = fw[l - 1][0]
            for i in range(Z.nrows()):
                for v in range(Z.ncols()):
                    if kinked[v] and Z[i, v] == 0:
                        ties.append((i, l, v))
        dens = [int(v.q) for row in Xq for v in row] + [S for _Z, S in fw]
        dens += [int(M.numer_denom()[1]) for M in cn.W] + [int(x.q) for bl in cn.b for x in bl]
        dens += [int(x.q) for a in cn.negative_slope for x in a]
        return cls(cn, Xq, fw, rescaling_symmetry(cn), ties, lcm(1, *dens))

    def sign_pattern(self) -> list[np.ndarray]:
        """The ``z >= 0`` side of every (sample, hidden unit), bool ``(n, N_l)``."""
        return [np.array([z >= 0 for z in Z.entries()], dtype=bool).reshape(Z.nrows(), Z.ncols())
                for Z, _S in self.forward[:-1]]

    def resolution(self, sides: Sequence[bool]) -> list[np.ndarray]:
        """The pattern with tie ``t`` (in the order of ``ties``) on side ``sides[t]``."""
        pat = [P.copy() for P in self.sign_pattern()]
        for (i, l, v), s in zip(self.ties, sides):
            pat[l - 1][i, v] = bool(s)
        return pat

    def gamma_mod_p(self, p: int, active: Sequence[np.ndarray] | None = None) -> np.ndarray:
        """:func:`exactident.verify.gamma.gamma_free_mod_p` on this sample."""
        return gamma_free_mod_p(self.cn, self.X, self.forward, p, active)
