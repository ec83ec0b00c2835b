"""The verifier's own arithmetic: integer and Fraction forward passes, tangents, explicit ``alpha``, QQ ranks.

Nothing here comes from the engine (:mod:`exactident.model`,
:mod:`exactident.boundary`): the verifier recomputes every fact itself: the
pre-activations of every sample by a forward pass in integer arithmetic on
data scaled per layer (:func:`pre_activations`, FLINT ``fmpz_mat`` products),
directional derivatives with ``fractions.Fraction``, *forward* (the engine uses
backpropagation), paths enumerated explicitly for ``alpha``, ranks with
sympy's ``DomainMatrix`` over QQ.  Also the strict readers of report fields
(:func:`need`, :func:`parse_fraction`); a malformed field raises
:class:`BadField` carrying its JSON path.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from fractions import Fraction
from itertools import product
from math import lcm
from typing import Any

import flint

__all__ = [
    "PARAMETER_NAME",
    "BadField",
    "LazyRows",
    "ParamKey",
    "alpha_rows",
    "as_fractions",
    "direction",
    "forward_tangent",
    "line_forward",
    "line_outputs",
    "need",
    "parse_fraction",
    "parse_parameter",
    "pre_activations",
    "rank_qq",
    "scaled_forward",
    "show",
    "tie_key",
    "unknown_fields",
]


# re.ASCII: without it \d also matches other scripts' digits.
_RATIONAL = re.compile(r"([+-]?[0-9]+)(?:/([0-9]+))?", re.ASCII)

#: A parameter's name in a report: ``W_l[row,col]`` or ``b_l[row]`` (groups: kind, layer, row, col).
PARAMETER_NAME = re.compile(r"(W)_(\d{1,9})\[(\d{1,9}),(\d{1,9})\]|(b)_(\d{1,9})\[(\d{1,9})\]", re.ASCII)

#: A parameter as the verifier keys it: ``("W", l, row, col)`` or ``("b", l, row, None)``.
ParamKey = tuple[str, int, int, "int | None"]


class BadField(Exception):
    """Malformed report (exit 2): carries the JSON path of the field."""

    def __init__(self, where: str, msg: str) -> None:
        super().__init__(msg)
        self.where = where


def need(obj: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """``obj[key]``, required and of JSON type ``kind``: the strict reader of every report field.

    Parameters
    ----------
    obj : Any
        Should be a ``dict`` (a JSON object of the report).
    key : str
        The field to read.
    kind : type or tuple of type
        Accepted Python type(s) of the value (``int``, ``str``, ``list``, ``dict``, ``bool``).
        With ``kind`` exactly ``int``, a ``bool`` is refused (JSON ``true`` is not a count).
    where : str
        JSON path of ``obj`` in the report (``""`` at the top), used in the error.

    Returns
    -------
    Any
        The value, unchanged.

    Raises
    ------
    BadField
        ``obj`` is not a dict (path ``where``), ``key`` is missing, or the value has another
        type (path ``where.key``).

    Examples
    --------
    >>> need({"layer": 2}, "layer", int, "ties[0]")
    2
    >>> try:
    ...     need({"layer": True}, "layer", int, "ties[0]")
    ... except BadField as exc:
    ...     print(exc.where, "-", exc)
    ties[0].layer - expected int, found bool
    """
    if not isinstance(obj, dict):
        raise BadField(where, f"expected dict, found {type(obj).__name__}")
    if key not in obj:
        raise BadField(f"{where}.{key}" if where else key, "missing")
    value = obj[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise BadField(f"{where}.{key}" if where else key, f"expected {getattr(kind, '__name__', kind)}, "
                   f"found {type(value).__name__}")
    return value


def parse_fraction(text: Any, where: str) -> Fraction:
    """A certificate's rational string ``"p/q"`` or ``"p"``, read strictly, of any size.

    The same rules as :func:`exactident.io.report_file.parse_report_rational` (kept
    here so that this module imports nothing of the engine): ASCII ``[+-]digits[/digits]``
    exactly (no blanks, decimals, other scripts' digits), nonzero denominator.  The
    digits are converted by FLINT (``int(str)`` stops at 4300 digits).

    Parameters
    ----------
    text : Any
        Should be a ``str``; a JSON number is refused (a float is not exact).
    where : str
        JSON path of the field, used in the error.

    Returns
    -------
    fractions.Fraction
        The number in Q, in lowest terms.

    Raises
    ------
    BadField
        Naming ``where``: not a string of that form, or a zero denominator.

    Examples
    --------
    >>> parse_fraction("-6/4", "delta"), parse_fraction("7" * 5000, "delta").denominator
    (Fraction(-3, 2), 1)
    """
    m = _RATIONAL.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        shown = repr(text[:40]) if isinstance(text, str) else type(text).__name__
        raise BadField(where, f"expected a rational string 'p/q' (ASCII digits), found {shown}")
    num = int(flint.fmpz(m.group(1).lstrip("+")))
    den = int(flint.fmpz(m.group(2))) if m.group(2) is not None else 1
    if den == 0:
        raise BadField(where, f"zero denominator in {text[:40]!r}")
    return Fraction(num, den)


def show(value: Fraction | int) -> str:
    """A rational for a message: any size (``str(int)`` stops at 4300 digits), long ones abbreviated.

    Examples
    --------
    >>> show(Fraction(-3, 2)), show(Fraction(10**5000 + 1))
    ('-3/2', '10000000000000000000...00000000000000000001 (5001 digits)')
    """
    q = Fraction(value)
    num = str(flint.fmpz(q.numerator))
    text = num if q.denominator == 1 else f"{num}/{flint.fmpz(q.denominator)}"
    if len(text) <= 60:
        return text
    return f"{text[:20]}...{text[-20:]} ({sum(c.isdigit() for c in text)} digits)"


def parse_parameter(name: Any, widths: Sequence[int], where: str) -> ParamKey | None:
    """``"W_l[r,c]"`` / ``"b_l[r]"`` (canonical spelling, ASCII) as a key; None if no such parameter exists.

    Raises
    ------
    BadField
        If ``name`` is not a string spelled like a parameter name.

    Examples
    --------
    >>> parse_parameter("W_2[0,1]", [1, 2, 1], "delta"), parse_parameter("b_3[0]", [1, 2, 1], "delta")
    (('W', 2, 0, 1), None)
    """
    m = PARAMETER_NAME.fullmatch(name) if isinstance(name, str) else None
    if m is None:
        raise BadField(where, f"expected a parameter name like 'W_1[0,0]' or 'b_1[0]', found {name!r}"[:200])
    key: ParamKey = ("W", int(m[2]), int(m[3]), int(m[4])) if m[1] else ("b", int(m[6]), int(m[7]), None)
    canonical = f"W_{key[1]}[{key[2]},{key[3]}]" if key[0] == "W" else f"b_{key[1]}[{key[2]}]"
    if name != canonical:
        raise BadField(where, f"parameter name {name!r} is not spelled canonically ({canonical!r})")
    L = len(widths) - 1
    l, r, c = key[1], key[2], key[3]
    if not 1 <= l <= L or r >= widths[l] or (c is not None and c >= widths[l - 1]):
        return None
    return key


def direction(widths: Sequence[int], vec: dict) -> tuple[list, list]:
    """``(dW, db)`` shaped like ``W``, ``b`` from ``{ParamKey: Fraction}`` (zero elsewhere)."""
    L = len(widths) - 1
    dW = [[[vec.get(("W", l, r, c), Fraction(0)) for c in range(widths[l - 1])] for r in range(widths[l])]
          for l in range(1, L + 1)]
    db = [[vec.get(("b", l, r, None), Fraction(0)) for r in range(widths[l])] for l in range(1, L + 1)]
    return dW, db


def tie_key(obj: Any, where: str) -> tuple[int, int, int]:
    """A tie object ``{"sample": i, "layer": l, "neuron": v}`` of a report as the key ``(i, l, v)``.

    The tie is ``x^i@(l,v)``: sample ``i`` (0-based) on the zero set of hidden neuron
    ``v`` of layer ``l`` (1-based, ``1 <= l <= L-1``).  Only the types are checked here;
    whether the tie exists is checked against :class:`exactident.verify.facts.CaseFacts`.

    Parameters
    ----------
    obj : Any
        Should be a dict with ``int`` fields ``sample``, ``layer``, ``neuron``.
    where : str
        JSON path of ``obj``, used in the error.

    Returns
    -------
    tuple of int
        ``(sample, layer, neuron)``.

    Raises
    ------
    BadField
        A field is missing or not an ``int`` (see :func:`need`).

    Examples
    --------
    >>> tie_key({"sample": 3, "layer": 1, "neuron": 0}, "resolution[0]")
    (3, 1, 0)
    """
    return need(obj, "sample", int, where), need(obj, "layer", int, where), need(obj, "neuron", int, where)


def forward_tangent(W, b, x, active_at, dW=None, db=None):
    """Forward pass with a tangent (forward-mode derivative) along ``(dW, db)``.

    ``active_at(l, v, z)`` says whether hidden neuron ``(l, v)`` acts as the
    identity.  Returns per layer ``l = 1..L`` the lists ``z_l`` and ``dz_l``.
    """
    h, dh = list(x), [Fraction(0)] * len(x)
    L = len(W)
    zs, dzs = [], []
    for l in range(1, L + 1):
        Wl, bl = W[l - 1], b[l - 1]
        z = [sum((w * hv for w, hv in zip(row, h)), Fraction(0)) + bv for row, bv in zip(Wl, bl)]
        if dW is None:
            dz = [Fraction(0)] * len(z)
        else:
            dz = [sum((dw * hv for dw, hv in zip(drow, h)), Fraction(0))
                  + sum((w * dhv for w, dhv in zip(row, dh)), Fraction(0)) + dbv
                  for row, drow, dbv in zip(Wl, dW[l - 1], db[l - 1])]
        zs.append(z)
        dzs.append(dz)
        if l < L:
            act = [active_at(l, v, z[v]) for v in range(len(z))]
            h = [zv if a else Fraction(0) for zv, a in zip(z, act)]
            dh = [dv if a else Fraction(0) for dv, a in zip(dz, act)]
    return zs, dzs


def _lcm_den(values) -> int:
    return lcm(1, *{int(v.denominator) for v in values})  # a set: data share few denominators


def _fmpq_mat(rows, nrows: int, ncols: int) -> flint.fmpq_mat:
    """A matrix of rationals (``fmpq_mat``, or rows of Fraction / fmpq) as ``fmpq_mat``."""
    if isinstance(rows, flint.fmpq_mat):
        return rows
    return flint.fmpq_mat(nrows, ncols, [v if isinstance(v, flint.fmpq) else flint.fmpq(v.numerator, v.denominator)
                                         for row in rows for v in row])


def scaled_forward(W, b, X) -> list[tuple[list[list[Any]], int]]:
    """Pre-activations of every sample in integer arithmetic: per layer ``l = 1..L``, ``(Z_l, S_l)``
    with ``z_l(x^i)_v = Z_l[i][v] / S_l`` exactly (``Z_l`` integers, FLINT ``fmpz``; ``S_l > 0``).

    With ``h_{l-1} = H / S`` (``H`` an ``n x N_{l-1}`` integer matrix), ``W_l = W' / d_W``,
    ``b_l = b' / d_b`` (integer numerators over common denominators) and ``S' = lcm(d_W S, d_b)``::

        Z_l = (S' / (d_W S)) H W'^T + (S' / d_b) 1 b'^T,   S_l = S'

    one FLINT ``fmpz_mat`` product per layer; ``H_l = relu(Z_l)`` keeps the scale
    (``relu(0) = 0``, so ties need no side).

    Parameters
    ----------
    W : per layer an ``fmpq_mat`` ``N_l x N_{l-1}``, or rows of Fraction (``W[l-1][v][k] = W_l[v, k]``)
    b : per layer a list of Fraction or fmpq
    X : rows of Fraction or fmpq

    Examples
    --------
    ``f = 3 relu(2x + 1)`` at ``x = -1/2, 1/3``: ``z_1 = (0, 5/3)``, ``z_2 = (0, 5)``.

    >>> F = Fraction
    >>> [([[int(z) for z in row] for row in Z], S)
    ...  for Z, S in scaled_forward([[[F(2)]], [[F(3)]]], [[F(1)], [F(0)]], [[F(-1, 2)], [F(1, 3)]])]
    [([[0], [10]], 6), ([[0], [30]], 6)]
    """
    n = len(X)
    widths = [len(X[0]) if n else (W[0].ncols() if isinstance(W[0], flint.fmpq_mat) else len(W[0][0]))]
    widths += [len(bl) for bl in b]
    Hm, S_f = _fmpq_mat(X, n, widths[0]).numer_denom()
    S = int(S_f)
    out = []
    for l, (Wl, bl) in enumerate(zip(W, b), start=1):
        Wn, dW_f = _fmpq_mat(Wl, widths[l], widths[l - 1]).numer_denom()
        bn, db_f = _fmpq_mat([bl], 1, widths[l]).numer_denom()
        dW, db = int(dW_f), int(db_f)
        S_new = lcm(dW * S, db)
        bias = [v * (S_new // db) for v in bn.entries()]
        if n:
            Zm = Hm * (Wn.transpose() * (S_new // (dW * S))) + flint.fmpz_mat(n, widths[l], bias * n)
            Zl = Zm.tolist()
        else:
            Zl = []
        out.append((Zl, S_new))
        if l < len(W) and n:
            Hm = flint.fmpz_mat([[z if z > 0 else 0 for z in row] for row in Zl])
        S = S_new
    return out


def pre_activations(W, b, X) -> list[list[list[Fraction]]]:
    """``Z[i][l-1] = z_l(x^i)`` (``l = 1..L``) as Fractions, from :func:`scaled_forward`.

    Examples
    --------
    >>> F = Fraction
    >>> pre_activations([[[F(2)]], [[F(3)]]], [[F(1)], [F(0)]], [[F(-1, 2)], [F(1, 3)]])
    [[[Fraction(0, 1)], [Fraction(0, 1)]], [[Fraction(5, 3)], [Fraction(5, 1)]]]
    """
    layers = scaled_forward(W, b, X)
    return [[[Fraction(int(z), S) for z in Zl[i]] for Zl, S in layers] for i in range(len(X))]


class LazyRows(Sequence):
    """A read-only sequence of ``n`` rows, each built by ``make(i)`` on first use (then kept)."""

    def __init__(self, n: int, make) -> None:
        self._n, self._make = n, make
        self._rows: dict[int, Any] = {}

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self._n))]
        if not -self._n <= i < self._n:
            raise IndexError(i)
        i %= self._n
        if i not in self._rows:
            self._rows[i] = self._make(i)
        return self._rows[i]


def rank_qq(rows: list[list[Fraction]], ncols: int) -> int:
    """Exact rank over Q of a matrix of Fractions, by sympy's ``DomainMatrix`` over ``QQ``.

    The verifier's own rank (the engine ranks with FLINT, mostly mod p): it is how
    ``verify-certificate`` recomputes ``R_Gamma(s) = rank Gamma(s)`` and
    ``R_A(s) = N_L rank alpha(s)`` (paper Prop. 11) and the hyperplane ranks of
    :mod:`exactident.verify.neurons_check`.  sympy is imported on first call.

    Parameters
    ----------
    rows : list of list of fractions.Fraction
        The matrix, shape ``(len(rows), ncols)``, entries in Q.
    ncols : int
        Number of columns (needed when ``rows`` is empty).

    Returns
    -------
    int
        The rank, ``0`` for an empty matrix.

    Examples
    --------
    >>> F = Fraction
    >>> rank_qq([[F(1), F(1, 2)], [F(2), F(1)], [F(0), F(3)]], 2), rank_qq([], 3)
    (2, 0)
    >>> rank_qq([[F(1, 3), F(2, 3)], [F(1), F(2)]], 2)
    1
    """
    from sympy import QQ
    from sympy.polys.matrices import DomainMatrix

    if not rows or ncols == 0:
        return 0
    M = DomainMatrix([[QQ(v.numerator, v.denominator) for v in r] for r in rows], (len(rows), ncols), QQ)
    return int(M.rank())


def alpha_rows(widths, X, act) -> list[list[Fraction]]:
    """``alpha(s)`` by enumerating every path (one neuron per layer up to ``L-1``) explicitly."""
    L = len(widths) - 1
    rows = []
    for i, x in enumerate(X):
        row = []
        for start in range(L):  # paths starting at layer `start` and ending at layer L-1
            for path in product(*(range(widths[m]) for m in range(start, L))):
                f = Fraction(1)
                for m, u in zip(range(start, L), path):
                    f *= x[u] if m == 0 else (1 if act(i, m, u) else 0)
                row.append(f)
        row.append(Fraction(1))  # the empty path beta
        rows.append(row)
    return rows


def unknown_fields(obj: dict, allowed: Sequence[str], where: str) -> list[str]:
    """Failures for keys the verifier does not understand: what is not checked is not valid."""
    return [f"{where}.{key}: unknown field, not verified" for key in sorted(set(obj) - set(allowed), key=str)]


def _poly_add(p, q):
    n = max(len(p), len(q))
    return [(p[k] if k < len(p) else 0) + (q[k] if k < len(q) else 0) for k in range(n)]


def _poly_mul(p, q):
    out = [Fraction(0)] * max(len(p) + len(q) - 1, 0)
    for a, pa in enumerate(p):
        for c, qc in enumerate(q):
            out[a + c] += pa * qc
    return out


def line_forward(W, b, dW, db, x):
    """Outputs of ``theta + eps delta`` at ``x`` as polynomials in ``eps``, for small ``eps > 0``."""
    h = [[v] for v in x]
    L = len(W)
    for l in range(1, L + 1):
        z = []
        for r in range(len(W[l - 1])):
            acc = [b[l - 1][r], db[l - 1][r]]
            for c in range(len(h)):
                acc = _poly_add(acc, _poly_mul([W[l - 1][r][c], dW[l - 1][r][c]], h[c]))
            z.append(acc)
        if l < L:  # relu for small eps > 0: the sign of the lowest nonzero coefficient
            z = [p if next((c for c in p if c != 0), 0) > 0 else [] for p in z]
        h = z
    return h


def line_outputs(W, b, dW, db, X) -> list[list[list[Fraction]]]:
    """:func:`line_forward` for every sample at once, in integer arithmetic on scaled data.

    ``h_{l-1}(eps) = sum_k eps^k H_k / S`` (``H_k`` integer ``n x N_{l-1}`` matrices, one
    scale ``S``); with ``W_l = W'/d_W``, ``delta W_l = D'/d_D``, ``b_l = b'/d_b``,
    ``delta b_l = e'/d_e`` and ``S' = lcm(d_W S, d_D S, d_b, d_e)``::

        Z_k = (S'/(d_W S)) H_k W'^T + (S'/(d_D S)) H_{k-1} D'^T + [k = 0] (S'/d_b) 1 b'^T + [k = 1] (S'/d_e) 1 e'^T

    (FLINT ``fmpz_mat`` products); the ReLU of a hidden neuron at a sample, for small
    ``eps > 0``, keeps its coefficients when the lowest nonzero one is positive, else
    zeroes them.

    Returns
    -------
    list (per sample) of lists (per output) of Fraction coefficients of ``eps^0, eps^1, ...``

    Examples
    --------
    ``f = 3 relu(2x + 1)`` moved along ``delta b_1 = 1``: ``f = 3 (2x + 1) + 3 eps`` where active
    (coefficients up to ``eps^L``).

    >>> F = Fraction
    >>> line_outputs([[[F(2)]], [[F(3)]]], [[F(1)], [F(0)]], [[[F(0)]], [[F(0)]]], [[F(1)], [F(0)]],
    ...              [[F(1)], [F(-1)]])
    [[[Fraction(9, 1), Fraction(3, 1), Fraction(0, 1)]], [[Fraction(0, 1), Fraction(0, 1), Fraction(0, 1)]]]
    """
    n = len(X)
    if n == 0:
        return []
    widths = [len(X[0])] + [len(bl) for bl in b]
    Hm, S_f = _fmpq_mat(X, n, widths[0]).numer_denom()
    H, S = [Hm], int(S_f)
    L = len(W)
    for l in range(1, L + 1):
        N, M = widths[l], widths[l - 1]
        Wn, dW_ = _fmpq_mat(W[l - 1], N, M).numer_denom()
        Dn, dD_ = _fmpq_mat(dW[l - 1], N, M).numer_denom()
        bn, db_ = _fmpq_mat([b[l - 1]], 1, N).numer_denom()
        en, de_ = _fmpq_mat([db[l - 1]], 1, N).numer_denom()
        dWi, dDi, dbi, dei = int(dW_), int(dD_), int(db_), int(de_)
        S_new = lcm(dWi * S, dDi * S, dbi, dei)
        WT, DT = Wn.transpose() * (S_new // (dWi * S)), Dn.transpose() * (S_new // (dDi * S))
        Z = []
        for k in range(len(H) + 1):
            acc = flint.fmpz_mat(n, N)
            if k < len(H):
                acc = acc + H[k] * WT
            if k >= 1:
                acc = acc + H[k - 1] * DT
            if k <= 1:
                row = [v * (S_new // (dbi if k == 0 else dei)) for v in (bn if k == 0 else en).entries()]
                acc = acc + flint.fmpz_mat(n, N, row * n)
            Z.append(acc.tolist())
        S = S_new
        if l < L:  # relu for small eps > 0: the sign of the lowest nonzero coefficient
            keep = [[next((Zk[i][v] for Zk in Z if Zk[i][v] != 0), 0) > 0 for v in range(N)] for i in range(n)]
            H = [flint.fmpz_mat([[z if keep[i][v] else 0 for v, z in enumerate(Zk[i])] for i in range(n)])
                 for Zk in Z]
        else:
            return [[[Fraction(int(Zk[i][v]), S) for Zk in Z] for v in range(N)] for i in range(n)]
    return []


def as_fractions(case) -> tuple[list, list, list]:
    """``W``, ``b``, ``X`` of the case as nested lists of Fraction (the verifier's own arithmetic)."""
    def fr(q) -> Fraction:
        return Fraction(int(q.p), int(q.q))

    W = [[[fr(q) for q in row] for row in M.table()] for M in case.network.W]
    b = [[fr(q) for q in bl] for bl in case.network.b]
    X = [[fr(q) for q in row] for row in case.X]
    return W, b, X
