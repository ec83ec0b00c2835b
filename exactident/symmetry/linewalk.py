"""Samples that reach many activation regions, kept by exact rank gain (docs/symmetries.md).

The lower bound of ``fdim`` is ``rank J(X) mod p`` at an exact rational sample ``X``;
any ``X`` without ties gives a valid bound, so floats may *choose* the points freely and
only the exact rank decides.  On one activation region ``J(x)`` is affine in ``x`` (one
output: the row is ``(dF/dz_l h_{l-1}(x), dF/dz_l)``), so a region contributes at most
``n0 + 1`` dimensions and ``fdim`` is the rank over the regions the domain meets: the
question is which regions a sample reaches.

- **Line walk** (:func:`line_pieces`): along a line ``a + t d`` every pre-activation is a
  piecewise-linear function of ``t``; its breakpoints are found layer by layer in float64
  (between consecutive breakpoints of the layers below, ``z_l`` is affine, so its zeros are
  read off its values at them; beyond the outermost ones, off its slope on the ray).  One
  point strictly inside each piece (the midpoint; on the two rays, past the last
  breakpoint) reaches every region the line crosses, at whatever scale it lies.
- **Region points** (:func:`region_points`): at a point ``x`` of a region, ``x`` and
  ``x + r e_j`` (``j = 1..n0``) with ``r`` a power of two below half the float distance
  from ``x`` to the nearest hyperplane ``z_{l,i} = 0`` of the local affine pieces: ``n0 + 1``
  affinely independent points of the region, so its whole contribution.
- **Greedy selection** (:class:`GreedyRank`): the Jacobian rows mod ``p`` of a batch of
  candidates are appended to the rows kept so far and the pivot columns of the reduced
  echelon form of the transpose pick, in order, the rows that raise the rank; only their
  points are kept (at most ``dim`` of them).

Everything the floats propose is then ranked exactly: the points are dyadic rationals,
ties are dropped, and the rank is that of ``J`` mod ``p`` at the exact activation pattern.

Any network is walked in its compiled layered form (:class:`exactident.symmetry.jacobian.Layered`):
a layer graph's leaky and PReLU units kink at 0 like ReLU units (the float forward pass uses each
unit's slope), its linear units (slope 1) do not, and ``J`` is ``J_free`` in its free parameters.
Called by :mod:`exactident.symmetry.fdim`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence

import flint
import numpy as np

from exactident.errors import InvariantViolation
from exactident.linalg.modular import random_primes, rank_mod_p, to_nmod_mat
from exactident.model.network import Network
from exactident.symmetry.jacobian import Layered

__all__ = ["KINDS", "MAX_REGIONS_PER_LINE", "SMALL_PRIME_RANGE", "GreedyRank", "domain_points", "exact_floats",
           "float_jacobian", "line_pieces", "region_points", "walk_lower_bound"]

Box = tuple[Sequence[flint.fmpq], Sequence[flint.fmpq]]


def domain_points(rng: np.random.Generator, n: int, n0: int, box: Box | None, bits: int = 10) -> list[list[flint.fmpq]]:
    """``n`` random dyadic points, rounded to ``2^-bits``: uniform in ``box``, or, for ``R^n``, Gaussian.

    The Gaussian points are standard normal times a scale ``2^k``, ``k`` uniform in ``0..12``
    per point (deep layers of a network at standard initialisation switch far from the origin).
    """
    den = 1 << bits
    if box is None:  # scales 1, 2, 4, ..., 4096: a standard Gaussian alone leaves far-out kinks unseen
        scale = 1 << rng.integers(0, 13, size=(n, 1))
        g = np.rint(rng.standard_normal((n, n0)) * scale * den).astype(np.int64)
        return [[flint.fmpq(int(v), den) for v in row] for row in g]
    u = rng.integers(0, den + 1, size=(n, n0))
    return [[box[0][j] + (box[1][j] - box[0][j]) * flint.fmpq(int(u[i, j]), den) for j in range(n0)]
            for i in range(n)]


def _act(z: np.ndarray, slopes: Sequence[np.ndarray] | None, l: int) -> np.ndarray:
    """``h`` of hidden layer ``l + 1`` from ``z`` (float64): ``z`` on ``z > 0``, ``a z`` else (ReLU when no slopes)."""
    return np.maximum(z, 0.0) if slopes is None else np.where(z > 0, z, slopes[l] * z)


def _pre_activations(W: Sequence[np.ndarray], b: Sequence[np.ndarray], X: np.ndarray, upto: int,
                     slopes: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """``z_upto(X)`` in float64 (``X``: rows are points; ``upto`` in ``1..L``)."""
    h = X
    z = h
    for l in range(upto):
        z = h @ W[l].T + b[l]
        h = _act(z, slopes, l) if l < len(W) - 1 else z
    return z


def line_pieces(W: Sequence[np.ndarray], b: Sequence[np.ndarray], a: np.ndarray, d: np.ndarray,
                t_range: tuple[float, float] | None = None, slopes: Sequence[np.ndarray] | None = None,
                kinked: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """Parameters ``t`` of one point strictly inside each piece of the network along ``a + t d`` (float64).

    ``t_range`` restricts the line to a segment (a box); ``None`` is the whole line, whose two
    unbounded pieces get a point past the outermost breakpoint.  ``slopes`` (per hidden layer, the
    negative-side slopes; None: ReLU) and ``kinked`` (per hidden layer, the units with a kink; None:
    all) read a layer graph's compiled form: only kinked units break the line.

    Examples
    --------
    ``relu(x - 1)`` then ``relu(1 - h)`` on the line ``x = t``: breakpoints 1 and 2, three pieces.

    >>> W = [np.array([[1.0]]), np.array([[-1.0]]), np.array([[1.0]])]
    >>> b = [np.array([-1.0]), np.array([1.0]), np.array([0.0])]
    >>> line_pieces(W, b, np.array([0.0]), np.array([1.0])).tolist()
    [0.0, 1.5, 3.0]
    """
    L = len(W)
    lo, hi = t_range if t_range is not None else (-np.inf, np.inf)
    B = np.zeros(0)
    for l in range(1, L):  # zeros of the hidden layers' pre-activations
        if np.isfinite(lo):  # a segment: z_l is affine between consecutive breakpoints and ends
            ts = np.concatenate([[lo], B, [hi]])
        elif B.size:
            span = max(B[-1] - B[0], 1.0)
            ts = np.concatenate([[B[0] - span], B, [B[-1] + span]])
        else:
            ts = np.array([-1.0, 0.0, 1.0])
        z = _pre_activations(W, b, a[None, :] + ts[:, None] * d[None, :], l, slopes)
        if kinked is not None:
            z = z[:, kinked[l - 1]]
        new: list[np.ndarray] = [ts[(z == 0).any(axis=1)]]  # a zero at a sample point is a breakpoint too
        z0, z1, t0, t1 = z[:-1], z[1:], ts[:-1, None], ts[1:, None]
        inner = np.ones(len(ts) - 1, dtype=bool)
        if not np.isfinite(lo):  # the rays: z is affine beyond the outermost breakpoint of the layers below
            inner[0] = inner[-1] = False
            for k, (tb, zb, zo, to) in enumerate(((ts[1], z[1], z[0], ts[0]), (ts[-2], z[-2], z[-1], ts[-1]))):
                slope = (zo - zb) / (to - tb)
                with np.errstate(divide="ignore", invalid="ignore"):
                    root = tb - zb / slope
                side = (root < tb) if k == 0 else (root > tb)
                new.append(root[np.isfinite(root) & side & (slope != 0)])
        cross = (np.sign(z0) * np.sign(z1) < 0) & inner[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            roots = t0 + (t1 - t0) * z0 / (z0 - z1)
        new.append(roots[cross])
        B = np.unique(np.concatenate([B, *new]))
        B = B[(lo < B) & (hi > B)]
    if np.isfinite(lo):
        edges = np.concatenate([[lo], B, [hi]])
        return (edges[:-1] + edges[1:]) / 2
    if not B.size:
        return np.array([0.0])
    span = max(B[-1] - B[0], 1.0)
    return np.concatenate([[B[0] - span], (B[:-1] + B[1:]) / 2, [B[-1] + span]])


def region_points(W: Sequence[np.ndarray], b: Sequence[np.ndarray], X: np.ndarray,
                  slopes: Sequence[np.ndarray] | None = None, kinked: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """For each row ``x`` of ``X``: ``x`` and ``x + r e_j`` (``j = 1..n0``), points of ``x``'s activation region.

    ``r`` is the largest power of two at most half the float distance from ``x`` to the nearest
    hyperplane of the local affine pre-activations of the kinked units (gradients by forward mode);
    rows numerically on a boundary are dropped.  ``slopes``, ``kinked``: as for :func:`line_pieces`.
    Returns ``(k (n0 + 1), n0)`` float64: a proposal, the exact pattern decides.

    Examples
    --------
    ``z = x_1 - 1`` at ``(1.25, 0)``: distance ``1/4``, ``r = 1/8``.

    >>> region_points([np.array([[1.0, 0.0]]), np.array([[1.0]])], [np.array([-1.0]), np.array([0.0])],
    ...               np.array([[1.25, 0.0]])).tolist()
    [[1.25, 0.0], [1.375, 0.0], [1.25, 0.125]]
    """
    m, n0 = X.shape
    h, G = X, np.broadcast_to(np.eye(n0), (m, n0, n0))  # G: d h / d x per point
    dist = np.full(m, np.inf)
    for l in range(len(W) - 1):
        z = h @ W[l].T + b[l]
        Gz = np.einsum("ij,mjk->mik", W[l], G)
        norms = np.linalg.norm(Gz, axis=2)
        with np.errstate(divide="ignore", invalid="ignore"):
            near = np.where(norms > 0, np.abs(z) / norms, np.inf)
        if kinked is not None:
            near = near[:, kinked[l]]
        if near.shape[1]:
            dist = np.minimum(dist, near.min(axis=1))
        f = (z > 0).astype(float) if slopes is None else np.where(z > 0, 1.0, slopes[l])
        h, G = z * f, Gz * f[:, :, None]
    dist = np.where(np.isfinite(dist), dist, 1.0)
    ok = dist > 1e-9 * np.maximum(1.0, np.abs(X).max(axis=1))
    X, dist = X[ok], dist[ok]
    r = 2.0 ** np.floor(np.log2(dist / 2))
    pts = X[:, None, :] + np.concatenate([np.zeros((1, n0)), np.eye(n0)])[None, :, :] * r[:, None, None]
    return pts.reshape(-1, n0)


def float_jacobian(W: Sequence[np.ndarray], b: Sequence[np.ndarray], X: np.ndarray) -> np.ndarray:
    """Rows ``d f_k(x) / d theta`` (float64), point-major, columns as the full parameter vector.

    (For ``l = 1..L``: ``W_l`` row-major, then ``b_l``; the order of ``gamma_mod_p`` with no edge fixed.)
    """
    hs, acts = [X], []
    for l in range(len(W) - 1):
        z = hs[-1] @ W[l].T + b[l]
        acts.append(z > 0)
        hs.append(np.maximum(z, 0.0))
    m, N_L = X.shape[0], W[-1].shape[0]
    blocks: list[np.ndarray] = []
    delta = np.broadcast_to(np.eye(N_L), (m, N_L, N_L))  # d f_k / d z_L, shape (m, k, N_L)
    for l in range(len(W) - 1, -1, -1):
        gW = delta[:, :, :, None] * hs[l][:, None, None, :]
        blocks.insert(0, np.concatenate([gW.reshape(m, N_L, -1), delta], axis=2))
        if l:
            delta = (delta @ W[l]) * acts[l - 1][:, None, :]
    return np.concatenate(blocks, axis=2).reshape(m * N_L, -1)


#: New regions taken from one line at most (chosen at random among those the line crosses).
MAX_REGIONS_PER_LINE = 24

#: The kinds of step of :func:`walk_lower_bound`.
KINDS = ("line", "rare", "points")

#: The greedy selection works mod a prime below ``2^21``: then a product of two residues summed over
#: up to ``2^11`` rows is below ``2^53``, and float64 matrix products (BLAS) are exact.
SMALL_PRIME_RANGE = (2**20, 2**21)


class GreedyRank:
    """Rows of ``J`` mod ``p`` kept only when they raise the rank (a lower bound of ``fdim``).

    The kept rows are a reduced echelon basis ``B`` mod ``p``, held in float64 with integer
    entries in ``[0, p)``: with ``p < 2^21`` every product ``C[:, pivots] B`` of
    :meth:`offer` is exact (below ``2^53``), so a batch of candidate rows is reduced by one
    BLAS product; of the rows left nonzero, those independent of the rows before them (the
    pivot columns of the reduced echelon form of their transpose, computed by FLINT mod ``p``)
    are added, in order: the rows a one-at-a-time greedy selection would keep.  :attr:`rank` is the
    number of rows kept, all independent mod ``p``, hence over Q.

    Parameters
    ----------
    net : Network or Layered
        ``J`` is :class:`~exactident.symmetry.jacobian.Layered`'s (all weights and biases of a plain MLP,
        the free parameters of a layer graph).
    p : int
        A prime in ``SMALL_PRIME_RANGE``; points whose denominators it divides are skipped.

    Raises
    ------
    InvariantViolation
        If ``p`` is not a prime below ``2^21``.
    """

    def __init__(self, net: Network | Layered, p: int) -> None:
        if not (3 <= p < SMALL_PRIME_RANGE[1] and flint.fmpz(p).is_prime()):
            raise InvariantViolation(f"modulus {p} is not a prime below 2^21")
        self.J, self.p = Layered.of(net), p
        n = self.J.n_cols
        self.points: list[list[flint.fmpq]] = []
        self.B = np.zeros((0, n))
        self.pivots: list[int] = []
        # a random vector s: a row whose residual r has r.s = 0 is skipped without the full reduction (a row
        # with r != 0 is skipped with probability 1/p: never a wrong rank, at worst a missed gain)
        self.s = np.random.default_rng(p).integers(0, p, size=n).astype(np.float64)
        self.Bs = np.zeros(0)

    @property
    def rank(self) -> int:
        """The number of independent rows kept (``<= rank J(points) mod p``)."""
        return len(self.pivots)

    def _dot(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """``A B mod p`` exactly in float64: ``A`` split into pieces below ``2^11``, every sum below ``2^53``."""
        hi, lo = np.floor(A / 2048), np.fmod(A, 2048)
        return np.fmod(np.fmod(hi @ B, self.p) * 2048 + lo @ B, self.p)

    def _reduce(self, C: np.ndarray) -> np.ndarray:
        if not self.pivots or not len(C):
            return C
        # C's pivot part split into pieces < 2^11: each product is < 2^32, a sum of them below 2^53
        return np.fmod(C - self._dot(C[:, self.pivots], self.B) + self.p, self.p)

    def _extend(self, R: np.ndarray) -> list[int]:
        """Add the rows of ``R`` (residuals: zero on the pivot columns) that are independent of the rows before them;
        returns their indices, in order (the pivot columns of the reduced echelon form of ``R^T``, by FLINT)."""
        p = self.p
        E, r = to_nmod_mat(np.ascontiguousarray(R.T).astype(np.int64), p).rref()
        indep, c = [], 0
        for j in range(int(r)):
            while int(E[j, c]) == 0:
                c += 1
            indep.append(c)
            c += 1
        if not indep:
            return []
        N, _ = to_nmod_mat(R[indep].astype(np.int64), p).rref()  # the new rows, reduced: unit on their pivots
        new = np.array([int(v) for v in N.entries()], dtype=np.float64).reshape(len(indep), R.shape[1])
        piv = [int(np.flatnonzero(row)[0]) for row in new]
        if len(self.B):  # the old rows lose the new pivot columns (the new rows are zero on the old pivots)
            self.B = np.fmod(self.B - self._dot(self.B[:, piv], new) + p, p)
        self.B = np.concatenate([self.B, new])
        self.pivots += piv
        return indep

    def offer(self, X: Sequence[Sequence[flint.fmpq]] | np.ndarray) -> int:
        """Add the points of ``X`` (tie-free ones) whose rows raise the rank; returns the gain.

        ``X``: exact points, or a float64 array (its rows are taken as the dyadic rationals they are).
        """
        if len(X) == 0:
            return 0
        Xc = [exact_floats(x) for x in X] if isinstance(X, np.ndarray) else [list(x) for x in X]
        avoid = self.J.denominator(Xc)
        if avoid % self.p == 0:
            return 0
        pattern, tied = self.J.state(Xc)
        keep = sorted(set(range(len(Xc))) - tied)
        if not keep:
            return 0
        Xc = [Xc[i] for i in keep]
        C = self.J.mod_p(Xc, [a[keep] for a in pattern], self.p, avoid).astype(np.float64)
        if self.pivots:  # screen: (C - C_P B) s = C s - C_P (B s), O(k (n + r)) instead of O(k r n)
            proj = np.fmod(self._dot(C, self.s[:, None])[:, 0] - self._dot(C[:, self.pivots], self.Bs[:, None])[:, 0]
                           + self.p, self.p)
            rows = np.flatnonzero(proj)
        else:
            rows = np.flatnonzero(C.any(axis=1))
        C = self._reduce(C[rows])
        live = np.flatnonzero(C.any(axis=1))
        N_L = self.J.widths[-1]
        gain = 0
        for i in (self._extend(C[live]) if live.size else []):
            k = rows[live[i]]
            gain += 1
            if not self.points or self.points[-1] is not Xc[k // N_L]:
                self.points.append(Xc[k // N_L])
        if gain:
            self.Bs = self._dot(self.B, self.s[:, None])[:, 0]
        return gain


def exact_floats(v: np.ndarray) -> list[flint.fmpq]:
    """The float64 entries of ``v`` as the exact rationals (dyadics) they are."""
    out = []
    for x in v:
        p, q = float(x).as_integer_ratio()
        out.append(flint.fmpq(p, q))
    return out


def _t_range(a: np.ndarray, d: np.ndarray, box: tuple[np.ndarray, np.ndarray]) -> tuple[float, float] | None:
    lo, hi = -np.inf, np.inf
    for j in range(a.size):
        if d[j] == 0:
            if not box[0][j] <= a[j] <= box[1][j]:
                return None
            continue
        t1, t2 = (box[0][j] - a[j]) / d[j], (box[1][j] - a[j]) / d[j]
        lo, hi = max(lo, min(t1, t2)), min(hi, max(t1, t2))
    return (lo, hi) if lo < hi else None


def walk_lower_bound(net: Network | Layered, start: Sequence[Sequence[flint.fmpq]],
                     box: Box | None = None, *,
                     seed: int = 0, target: int | None = None, max_lines: int = 256, patience: int = 64,
                     seconds: float | None = None) -> tuple[int, int, list[list[flint.fmpq]]]:
    """``(rank, prime, points)`` with ``rank J(points) mod prime = rank``: a lower bound of ``fdim``.

    The rows of ``start`` are selected greedily first; then steps of three kinds (:data:`KINDS`): a
    random line in a random direction through an ``N(0, s^2 I)`` point (``s`` in ``1/2..8``; in a
    box: a uniform point of the box, the line clipped to it); a random line through a point of a
    region already seen where a rarely active neuron is active (neuron ``k`` chosen with weight
    ``1 / count_k^2``, ``count_k`` the regions seen with ``k`` active) (of a line's new regions at most
    :data:`MAX_REGIONS_PER_LINE`, at random, are taken); ``8 (n0 + 1)`` random points of
    the domain (:func:`domain_points`: all scales up to ``2^12``).  The
    region points of every piece whose float activation pattern is new, or the random points, are
    offered to :class:`GreedyRank`.  Each kind runs once, then every fifth step in turn, and
    otherwise the kind with the best running average of rank gain per point offered (a
    deterministic rule: the same seed gives the same points).  ``max_lines`` and ``patience`` count
    steps.
    Stops at ``target`` (default ``dim`` of a plain MLP, ``dim_free`` of a layer graph), after
    ``max_lines`` lines, after ``patience`` lines in a row without gain, or after ``seconds``.

    A layer graph (:class:`~exactident.model.network.Network`) is walked in its compiled
    layered form: its leaky and PReLU units kink at 0 like ReLU, its linear units (slope 1) do not, and
    ``J`` is ``J_free`` in its free parameters (:class:`~exactident.symmetry.jacobian.Layered`).
    """
    t_start = time.perf_counter()
    J = Layered.of(net)
    if target is None:
        from exactident.model.symmetry import rescaling_symmetry

        target = J.net.dim if J.net is not None else rescaling_symmetry(J.cn).dim_free
    rng = np.random.default_rng([seed, 7])
    avoid = J.denominator(start) if start else 1
    p = random_primes(1, avoid, random.Random(seed), lo=SMALL_PRIME_RANGE[0], hi=SMALL_PRIME_RANGE[1])[0]
    g = GreedyRank(J, p)
    for i in range(0, len(start), 64):  # in chunks: after the first, the projection screen skips most rows
        g.offer(start[i:i + 64])
    W, b, slopes, kinked = J.floats()
    fnet = (W, b, slopes, kinked)
    n0 = J.widths[0]
    fbox = None if box is None else (np.array([float(v) for v in box[0]]), np.array([float(v) for v in box[1]]))
    regions = _Regions(int(sum(k.sum() for k in kinked)))
    rate = dict.fromkeys(KINDS, 1.0)
    stale, lines = 0, 0
    while g.rank < target and lines < max_lines and stale < patience:
        if seconds is not None and time.perf_counter() - t_start > seconds:
            break
        lines += 1
        # which kind of step: each in turn at first and every fifth step, else the best recent gain per point
        kind = (KINDS[(lines - 1) % 3] if lines <= 3 else KINDS[(lines // 5) % 3] if lines % 5 == 0
                else max(KINDS, key=lambda k: rate[k]))
        if kind == "points":
            cand: np.ndarray | list[list[flint.fmpq]] = domain_points(rng, 8 * (n0 + 1), n0, box)
        else:
            a = regions.rare_origin(rng) if kind == "rare" else None
            cand = _line_candidates(fnet, rng, n0, fbox, regions, a)
        gain = g.offer(cand)
        rate[kind] = 0.7 * rate[kind] + 0.3 * gain / (1 + len(cand) / 32)  # points offered: a deterministic cost
        stale = 0 if gain else stale + 1
    if not g.points:
        return 0, p, []
    # the witness, ranked once more from scratch, mod p and mod a word-size prime: the larger is reported
    X = g.points
    (pattern, _), avoid = J.state(X), J.denominator(X)
    best = (rank_mod_p(J.mod_p(X, pattern, p, avoid), p), p)
    q = random_primes(1, avoid, random.Random(seed))[0]
    best = max(best, (rank_mod_p(J.mod_p(X, pattern, q, avoid), q), q))
    if best[0] < g.rank:
        raise InvariantViolation(f"the kept rows are independent mod {p} but J(points) has rank {best[0]}")
    return best[0], best[1], X


class _Regions:
    """The float activation patterns seen so far, a point of each, and how often each neuron is active."""

    def __init__(self, n_hidden: int) -> None:
        self.seen: set[bytes] = set()
        self.centers: list[np.ndarray] = []
        self.where: list[list[int]] = [[] for _ in range(n_hidden)]  # neuron -> regions where it is active
        self.active = np.zeros(n_hidden)

    def add(self, code: np.ndarray, x: np.ndarray) -> bool:
        key = np.packbits(code).tobytes()
        if key in self.seen:
            return False
        self.seen.add(key)
        for k in np.flatnonzero(code):
            self.where[k].append(len(self.centers))
        self.centers.append(x)
        self.active += code
        return True

    def rare_origin(self, rng: np.random.Generator) -> np.ndarray | None:
        """A seen region's point where a rarely active neuron is active (chosen with weight ``1 / count^2``)."""
        live = np.flatnonzero(self.active > 0)
        if not live.size:
            return None
        w = 1.0 / self.active[live] ** 2
        k = int(rng.choice(live, p=w / w.sum()))
        return self.centers[self.where[k][int(rng.integers(len(self.where[k])))]]


def _line_candidates(fnet: tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], list[np.ndarray]],
                     rng: np.random.Generator, n0: int, fbox: tuple[np.ndarray, np.ndarray] | None, regions: _Regions,
                     origin: np.ndarray | None = None) -> np.ndarray:
    """Region points of the pieces of one random line (through ``origin`` if given) whose float activation
    pattern (of the kinked units) is new (recorded in ``regions``)."""
    W, b, slopes, kinked = fnet
    d = rng.standard_normal(n0)
    d /= np.linalg.norm(d)
    if origin is not None:
        a = origin
    elif fbox is None:
        a = rng.standard_normal(n0) * 2.0 ** int(rng.integers(-1, 4))
    else:
        a = fbox[0] + (fbox[1] - fbox[0]) * rng.random(n0)
    tr = None
    if fbox is not None:
        tr = _t_range(a, d, fbox)
        if tr is None:
            return np.zeros((0, n0))
    xs = a[None, :] + line_pieces(W, b, a, d, tr, slopes, kinked)[:, None] * d[None, :]
    h, codes = xs, []
    for l in range(len(W) - 1):
        z = h @ W[l].T + b[l]
        codes.append((z > 0)[:, kinked[l]])
        h = _act(z, slopes, l)
    code = np.concatenate(codes, axis=1) if codes else np.zeros((len(xs), 0), dtype=bool)
    fresh, keys = [], set()
    for i in range(len(xs)):
        key = np.packbits(code[i]).tobytes()
        if key not in regions.seen and key not in keys:
            keys.add(key)
            fresh.append(i)
    if len(fresh) > MAX_REGIONS_PER_LINE:  # a step stays cheap in wide inputs; the others wait for another line
        fresh = sorted(rng.choice(fresh, MAX_REGIONS_PER_LINE, replace=False).tolist())
    for i in fresh:
        regions.add(code[i], xs[i])
    if not fresh:
        return np.zeros((0, n0))
    pts = region_points(W, b, xs[fresh], slopes, kinked)
    if fbox is not None:
        pts = pts[np.all(pts >= fbox[0], axis=1) & np.all(pts <= fbox[1], axis=1)]
    return pts
