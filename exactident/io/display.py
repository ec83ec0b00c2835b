"""Rich display in notebooks: HTML views, wrapped text and the per-parameter table (docs/notebook.md).

Jupyter shows an object's ``_repr_html_()`` when it has one; :class:`~exactident.io.report.Report`,
:class:`~exactident.io.case.Case`, the explanation, the design and the crosscheck result
build theirs from :func:`html_block` here.  Every text that comes from a case (names,
reasons) is HTML-escaped, so a case cannot inject markup.

The per-parameter table (:func:`parameter_rows`, :func:`to_frame`) names each
coordinate the paper's way (``W_l[i,j]``, ``b_l[i]``, 0-based, ``l`` from 1) and, when
the case came from a framework, the framework's way, from the case's
``provenance["parameter_names"]`` (a template per matrix with its index order:
``{"W_1": "fc1.weight[i,j]", "b_1": "fc1.bias[i]"}``, docs/case-format.md).

Standard library only; pandas is imported by :func:`to_frame` alone.
"""

from __future__ import annotations

import html
import re
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from exactident.errors import UnsupportedCaseError

__all__ = ["REASON_WIDTH", "framework_name", "html_block", "parameter_rows", "to_frame", "wrap"]

#: Reasons and notes are wrapped at this many characters in ``str(report)`` and the HTML views.
REASON_WIDTH = 100

_PAPER = re.compile(r"([Wb])_(\d+)\[(\d+)(?:,(\d+))?\]")
_TEMPLATE = re.compile(r"^(.*)\[([ij](?:,[ij])?)\]$")


def wrap(text: str, width: int = REASON_WIDTH, indent: str = "") -> list[str]:
    """``text`` cut at spaces into lines of at most ``width`` characters (a longer word stays whole).

    Continuation lines are indented two more spaces than ``indent``; hyphenated verdicts such as
    ``not-identifiable`` are never split.

    Examples
    --------
    >>> wrap("rank Gamma = 2 < dim = 3 and rank A = 2", width=20)
    ['rank Gamma = 2 < dim', '  = 3 and rank A = 2']
    """
    return textwrap.wrap(text, width=width, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_long_words=False, break_on_hyphens=False) or [indent]


def framework_name(paper: str, names: Mapping[str, Any] | None) -> str | None:
    """The framework's name of the paper's ``W_l[i,j]`` / ``b_l[i]``, or None when the case has none.

    ``names`` is ``provenance["parameter_names"]``: per matrix, the framework's tensor name with its
    index order (``[i,j]`` as stored by PyTorch, ``[j,i]`` for a transposed kernel).

    Examples
    --------
    >>> framework_name("W_2[3,0]", {"W_2": "fc2.weight[i,j]"})
    'fc2.weight[3,0]'
    >>> framework_name("W_1[3,0]", {"W_1": "coefs_[0][j,i]"})
    'coefs_[0][0,3]'
    >>> framework_name("b_1[4]", {"b_1": "fc1.bias[i]"}), framework_name("b_2[0]", {"b_1": "fc1.bias[i]"})
    ('fc1.bias[4]', None)
    """
    m = _PAPER.fullmatch(paper)
    if m is None or not names:
        return None
    template = names.get(f"{m[1]}_{m[2]}")
    t = _TEMPLATE.match(template) if isinstance(template, str) else None
    if t is None:
        return template if isinstance(template, str) else None
    index = {"i": m[3], "j": m[4] or ""}
    return f"{t[1]}[{','.join(index[c] for c in t[2].split(','))}]"


def _all_parameters(widths: Sequence[int]) -> list[str]:
    """Every parameter of the network, layer by layer: ``W_l`` row by row, then ``b_l``."""
    out = []
    for l in range(1, len(widths)):
        out += [f"W_{l}[{i},{j}]" for i in range(widths[l]) for j in range(widths[l - 1])]
        out += [f"b_{l}[{i}]" for i in range(widths[l])]
    return out


def parameter_rows(widths: Sequence[int], provenance: Mapping[str, Any] | None,
                   entries: Sequence[Mapping[str, Any]] | None = None, *,
                   layer_graph: bool = False) -> list[dict[str, Any]]:
    """One dict per parameter: ``parameter`` (the paper's name), ``framework_name``, ``layer``, ``kind``,
    and, when ``entries`` (explain's report field ``parameters``) is given, ``class``, ``by`` and ``why``.

    Rows follow the network's parameter order (``W_1`` row by row, ``b_1``, ``W_2``, ...), whatever
    the order of ``entries`` (explain lists the fixed edges first), so an explained and an
    unexplained table of one network line up row by row. Without ``entries`` every parameter of the
    network is listed (fixed edges included: which edges are fixed is explain's fact, not the report's).

    A layer graph (``layer_graph=True``, a format-2 case beyond the plain MLP) has no ``W_l``/``b_l``:
    its free parameters are ``theta_j`` (``parameter``, ``j`` = the entry's ``index``), named by the case
    (``framework_name``; None when the case gives only ``theta_j``), ``layer`` and ``kind`` None, and two
    more columns from its explanation: ``witness`` (the kernel vector that moves it) and ``line``. Its
    widths do not list its parameters, so it needs ``entries``.

    Raises
    ------
    UnsupportedCaseError
        ``layer_graph`` without ``entries``: the parameters of a layer graph are listed by ``explain``.

    Examples
    --------
    >>> rows = parameter_rows([1, 1, 1], {"parameter_names": {"W_1": "fc1.weight[i,j]"}})
    >>> [(r["parameter"], r["framework_name"], r["kind"]) for r in rows][:2]
    [('W_1[0,0]', 'fc1.weight[0,0]', 'weight'), ('b_1[0]', None, 'bias')]
    """
    if layer_graph:
        if entries is None:
            raise UnsupportedCaseError(
                "a layer graph's parameters are not W_l/b_l of its widths: exactident.explain(case) lists "
                "them by the case's names (explain(case).parameters_frame())")
        return [{"parameter": f"theta_{e.get('index')}",
                 "framework_name": None if e.get("name") == f"theta_{e.get('index')}" else e.get("name"),
                 "layer": None, "kind": None, "class": e.get("class"), "by": e.get("by"), "why": e.get("why"),
                 "witness": e.get("witness"), "line": bool(e.get("line"))}
                for e in sorted(entries, key=lambda e: int(e.get("index") or 0))]
    names = (provenance or {}).get("parameter_names") or {}
    order = {n: k for k, n in enumerate(_all_parameters(widths))}
    listed = ([dict(e) for e in sorted(entries, key=lambda e: order.get(str(e.get("name")), len(order)))]
              if entries is not None else [{"name": n} for n in order])
    rows = []
    for e in listed:
        paper = str(e.get("name"))
        m = _PAPER.fullmatch(paper)
        row: dict[str, Any] = {"parameter": paper, "framework_name": framework_name(paper, names),
                               "layer": int(m[2]) if m else None,
                               "kind": None if m is None else ("weight" if m[1] == "W" else "bias")}
        if entries is not None:
            row.update({"class": e.get("class"), "by": e.get("by"), "why": e.get("why")})
        rows.append(row)
    return rows


def to_frame(rows: Sequence[Mapping[str, Any]]) -> Any:
    """``rows`` as a pandas ``DataFrame`` (pandas is optional: imported here only).

    Raises
    ------
    UnsupportedCaseError
        When pandas is not installed.
    """
    try:
        import pandas as pd  # type: ignore[import-untyped]
    except ImportError:
        raise UnsupportedCaseError("parameters_frame needs pandas (pip install pandas, or the notebook extra); "
                                   "parameters_rows() gives the same table as a list of dicts") from None
    return pd.DataFrame(list(rows))


def _cell(value: Any) -> str:
    return "-" if value is None else html.escape(str(value))


def html_block(title: str, fields: Sequence[tuple[str, Any]], lines: Sequence[str] = (),
               table: tuple[Sequence[str], Sequence[Sequence[Any]]] | None = None) -> str:
    """A small self-contained HTML view: a bold title, a two-column field table, text lines, an optional table.

    Every value is escaped (``html.escape``); lines are wrapped by the browser.

    Examples
    --------
    >>> html_block("t <x>", [("verdict", "identifiable")])  # doctest: +ELLIPSIS
    '<div class="exactident"><p><b>t &lt;x&gt;</b></p><table>...<td>identifiable</td></tr></table></div>'
    """
    parts = [f'<div class="exactident"><p><b>{html.escape(title)}</b></p><table>']
    parts += [f'<tr><th style="text-align:left">{html.escape(k)}</th><td>{_cell(v)}</td></tr>' for k, v in fields]
    parts.append("</table>")
    if lines:
        parts.append("<ul>" + "".join(f'<li style="white-space:normal">{html.escape(t)}</li>' for t in lines)
                     + "</ul>")
    if table is not None:
        head, rows = table
        parts.append("<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>")
        parts += ["<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>" for row in rows]
        parts.append("</table>")
    parts.append("</div>")
    return "".join(parts)
