"""The verifier's own arithmetic: integer and Fraction forward passes, tangents, explicit ``alpha``, QQ ranks.

Nothing here comes from the engine (:mod:`exactident.model`,
:mod:`exactident.boundary`): the verifier recomputes every fact itself: the
pre-activations of every sample in integer arithmetic on data scaled per layer
(:mod:`exactident.verify.forward`), directional derivatives with ``fractions.Fraction``, *forward* (the engine uses
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
    "ParamKey",
    "alpha_rows",
    "as_fractions",
    "capped_exact_rank",
    "direction",
    "forward_tangent",
    "line_forward",
    "need",
    "parse_fraction",
    "parse_parameter",
    "rank_qq",
    "rational",
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


def as_fractions(case) -> tuple[list, list, list]:
    """``W``, ``b``, ``X`` of the case as nested lists of Fraction (the verifier's own arithmetic)."""
    def fr(q) -> Fraction:
        return Fraction(int(q.p), int(q.q))

    W = [[[fr(q) for q in row] for row in M.table()] for M in case.network.W]
    b = [[fr(q) for q in bl] for bl in case.network.b]
    X = [[fr(q) for q in row] for row in case.X]
    return W, b, X


def capped_exact_rank(shape: tuple[int, int], build: Any, max_words: int, where: str) -> tuple[int | None, str]:
    """Exact rank over Q of the matrix ``build()`` (fmpq_mat or fmpz_mat), if it fits the verifier's cap.

    ``max_words`` (``--max-exact-entries``) counts 64-bit words of the matrix scaled to integers by rows:
    one word per started 64 bits of each entry, at least one per entry.  The shape is checked before the
    matrix is built, its words after; past the cap nothing is eliminated.

    Returns
    -------
    (rank, "") or (None, one line saying what is not verified and why)

    Examples
    --------
    >>> capped_exact_rank((2, 2), lambda: flint.fmpq_mat([[1, 2], [2, 4]]), 10, "r")
    (1, '')
    >>> capped_exact_rank((100, 100), None, 1000, "r")[1]  # doctest: +ELLIPSIS
    "r: exact elimination of a 100 x 100 matrix (10000 entries) is past the verifier's limit of 1000 words ..."
    """
    rows, cols = shape
    if rows * cols > max_words:
        return None, (f"{where}: exact elimination of a {rows} x {cols} matrix ({rows * cols} entries) is past the "
                      f"verifier's limit of {max_words} words (--max-exact-entries): not verified")
    if rows == 0 or cols == 0:
        return 0, ""
    M = build()
    if not isinstance(M, flint.fmpz_mat):  # each row times the lcm of its denominators: same rank
        ints: list[int] = []
        for row in M.table():
            d = lcm(*(int(v.q) for v in row))
            ints.extend(int(v.p) * (d // int(v.q)) for v in row)
        M = flint.fmpz_mat(rows, cols, ints)
    words = sum(max(1, (int(v).bit_length() + 63) // 64) for v in M.entries())
    if words > max_words:
        return None, (f"{where}: exact elimination of a {rows} x {cols} matrix of {words} 64-bit words is past "
                      f"the verifier's limit of {max_words} words (--max-exact-entries): not verified")
    return int(M.rank()), ""


def rational(text: str) -> flint.fmpq:
    """``"p/q"`` or ``"p"`` (already checked by the report's schema) as an exact fmpq."""
    num, _, den = text.partition("/")
    return flint.fmpq(int(num), int(den or 1))
