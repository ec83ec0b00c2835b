"""The index arrays of ``W = T theta + c``: exact entries, their checks, the dense MLP's numbering.

A :class:`~exactident.model.network.Network` says which dense entry is which free parameter with
int64 arrays (``-1`` a fixed entry, ``j >= 0`` the parameter ``theta_j``).  This module holds what
reads and checks them, apart from the network itself:

- :func:`exact`, :func:`exact_vector`, :func:`exact_matrix`: exact entries (int, Fraction, fmpz,
  fmpq) to fmpq; a float or a wrong shape is refused with a :class:`~exactident.errors.CaseFormatError`.
- :func:`index_array`: an index block as int64 of the expected shape.
- :func:`check_indices`: every index in ``-1..k-1``, tied entries equal, every parameter used.
- :func:`dense_indices` and :func:`dense_names`: the plain MLP's numbering (``T = I``), ``W_l``
  row-major then ``b_l`` for ``l = 1..L``, and its names ``W_l[i,j]``, ``b_l[i]``.

Everything is in Q; the arrays are numpy int64.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction

import flint
import numpy as np

from exactident.errors import CaseFormatError

__all__ = ["check_indices", "dense_indices", "dense_names", "exact", "exact_matrix", "exact_vector", "index_array",
           "index_of_free"]

_HINT = "numpy arrays and floats: use Case.from_arrays, which converts them exactly"

#: One block of index arrays: ``(kind, l, array)``, kind ``"W"``, ``"b"`` or ``"a"`` (a slope).
Block = tuple[str, int, np.ndarray]


def exact(value: object, field: str, where: str = "<Network>") -> flint.fmpq:
    """``value`` as an fmpq: int, Fraction, fmpz or fmpq; CaseFormatError (naming ``field``) for anything else.

    Examples
    --------
    >>> exact(Fraction(1, 3), "x")
    1/3
    """
    # model sits below io (docs/architecture.md), so this is not io.rationals.to_fmpq: the same
    # exact types, without the parsing of strings that only files need.
    if isinstance(value, flint.fmpq):
        return value
    if isinstance(value, (int, flint.fmpz)) and not isinstance(value, bool):
        return flint.fmpq(value)
    if isinstance(value, Fraction):
        return flint.fmpq(value.numerator, value.denominator)
    raise CaseFormatError(where, field, f"expected an exact number (int, Fraction, fmpz, fmpq), "
                          f"found {value!r} ({_HINT})")


def exact_matrix(M: object, rows: int, cols: int, field: str, where: str = "<Network>") -> flint.fmpq_mat:
    """``M`` (fmpq_mat, fmpz_mat or nested lists of exact numbers) as an fmpq_mat of shape ``(rows, cols)``.

    Raises
    ------
    CaseFormatError
        Another type, a float entry or another shape.
    """
    if isinstance(M, flint.fmpq_mat):
        out = M
    elif isinstance(M, flint.fmpz_mat):
        out = flint.fmpq_mat(M)
    elif isinstance(M, (list, tuple)) and all(isinstance(r, (list, tuple)) for r in M):
        out = flint.fmpq_mat([[exact(v, f"{field}[{i}][{j}]", where) for j, v in enumerate(r)]
                              for i, r in enumerate(M)]) if M and M[0] else flint.fmpq_mat(len(M), 0)
    else:
        raise CaseFormatError(where, field, f"expected an fmpq_mat or nested lists of exact numbers, "
                              f"found {type(M).__name__} ({_HINT})")
    if (out.nrows(), out.ncols()) != (rows, cols):
        raise CaseFormatError(where, field, f"expected shape ({rows}, {cols}), found ({out.nrows()}, {out.ncols()})")
    return out


def exact_vector(v: object, n: int, field: str, where: str = "<Network>") -> list[flint.fmpq]:
    """``v`` (a list of ``n`` exact numbers) as a list of fmpq; CaseFormatError otherwise."""
    if not isinstance(v, (list, tuple)):
        found = type(v).__name__
        raise CaseFormatError(where, field, f"expected a list of exact numbers, found {found} ({_HINT})")
    if len(v) != n:
        raise CaseFormatError(where, field, f"expected {n} entries, found {len(v)}")
    return [exact(x, f"{field}[{i}]", where) for i, x in enumerate(v)]


def index_array(value: object, shape: tuple[int, ...], name: str, where: str = "<Network>") -> np.ndarray:
    """``value`` as an int64 array of ``shape`` (no copy of an int64 array); CaseFormatError otherwise."""
    arr = np.asarray(value)
    if arr.shape != shape or (arr.size and arr.dtype.kind not in "iu"):
        raise CaseFormatError(where, name, f"expected integers of shape {shape}, found {arr.dtype} {arr.shape}")
    return arr.astype(np.int64, copy=False)  # no copy of an int64 array (millions of entries for a conv)


def dense_indices(widths: Sequence[int]) -> tuple[list[np.ndarray], list[np.ndarray], int]:
    """``(W_index, b_index, k)`` of the plain MLP: every entry free, ``W_l`` row-major then ``b_l``, ``l = 1..L``.

    Examples
    --------
    >>> W_index, b_index, k = dense_indices((1, 2, 1))
    >>> [I.tolist() for I in W_index], [I.tolist() for I in b_index], k
    ([[[0], [1]], [[4, 5]]], [[2, 3], [6]], 7)
    """
    W_index, b_index, k = [], [], 0
    for l in range(1, len(widths)):
        n_out, n_in = widths[l], widths[l - 1]
        W_index.append(np.arange(k, k + n_out * n_in, dtype=np.int64).reshape(n_out, n_in))
        k += n_out * n_in
        b_index.append(np.arange(k, k + n_out, dtype=np.int64))
        k += n_out
    return W_index, b_index, k


def index_of_free(widths: Sequence[int], free: Sequence[int]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """``W_index``, ``b_index`` of a plain network whose free entries are the dense positions ``free`` (in order).

    Examples
    --------
    ``(1, 1, 1)`` with ``W_2`` fixed (dense positions 0, 1, 3 free):

    >>> W_index, b_index = index_of_free((1, 1, 1), [0, 1, 3])
    >>> [I.tolist() for I in W_index], [I.tolist() for I in b_index]
    ([[[0]], [[-1]]], [[1], [2]])
    """
    total = sum(widths[l] * (widths[l - 1] + 1) for l in range(1, len(widths)))
    flat = np.full(total, -1, dtype=np.int64)
    flat[np.asarray(free, dtype=np.int64)] = np.arange(len(free), dtype=np.int64)
    W_index, b_index, k = [], [], 0
    for l in range(1, len(widths)):
        n_w = widths[l] * widths[l - 1]
        W_index.append(flat[k:k + n_w].reshape(widths[l], widths[l - 1]))
        b_index.append(flat[k + n_w:k + n_w + widths[l]])
        k += n_w + widths[l]
    return W_index, b_index


def dense_names(widths: Sequence[int]) -> list[str]:
    """Names of the plain MLP's parameters in the order of :func:`dense_indices`: ``W_l[i,j]``, ``b_l[i]``.

    Examples
    --------
    >>> dense_names((1, 2, 1))
    ['W_1[0,0]', 'W_1[1,0]', 'b_1[0]', 'b_1[1]', 'W_2[0,0]', 'W_2[0,1]', 'b_2[0]']
    """
    return [name for l in range(1, len(widths))
            for name in [f"W_{l}[{i},{j}]" for i in range(widths[l]) for j in range(widths[l - 1])]
            + [f"b_{l}[{i}]" for i in range(widths[l])]]


def _name(widths: Sequence[int], block: tuple[str, int], pos: int) -> str:
    kind, l = block
    if kind == "W":
        cols = widths[l - 1]
        return f"W_{l}[{pos // cols}][{pos % cols}]"
    return f"b_{l}[{pos}]" if kind == "b" else f"slope_{l}[{pos}]"


def check_indices(widths: Sequence[int], blocks: Iterable[Block], k: int,
                  value: Callable[[tuple[str, int], int], flint.fmpq], where: str = "<Network>") -> None:
    """Every index in ``-1..k-1``, tied entries equal, every parameter used (numpy: no loop over the dense entries).

    Parameters
    ----------
    widths : sequence of int
        ``(N_0, ..., N_L)``.
    blocks : iterable of (kind, l, int64 array)
        Every weight (``"W"``), bias (``"b"``) and slope (``"a"``) block, by layer, weights and biases
        first (the order of the dense entries).
    k : int
        The number of free parameters.
    value : callable ``((kind, l), flat position) -> fmpq``
        The current value of one entry.

    Raises
    ------
    CaseFormatError
        The first failure in the order of the dense entries (layer by layer, row by row: ``W_l[i][*]``
        then ``b_l[i]``; then the slopes), as a loop over the entries would report it; only the free
        (and invalid) entries are visited, the fixed ones (index ``-1``) need no check.
    """
    seqs, idxs, blocks_, locals_, at = [], [], [], [], []
    offset = 0
    for n_block, (kind, l, I) in enumerate(blocks):
        flat = I.ravel()
        pos = np.flatnonzero(flat != -1)  # only free (or invalid) entries: fixed ones need no check
        if kind == "W":
            cols = I.shape[1]
            seq = offset + (pos // cols) * (cols + 1) + pos % cols
        elif kind == "b":
            cols = widths[l - 1]
            seq = offset + pos * (cols + 1) + cols
            offset += I.shape[0] * (cols + 1)
        else:
            seq = offset + pos
            offset += I.shape[0]
        seqs.append(seq)
        idxs.append(flat[pos])
        blocks_.append(np.full(len(pos), n_block, dtype=np.int64))
        locals_.append(pos)
        at.append((kind, l))
    empty = np.zeros(0, dtype=np.int64)
    seq_all = np.concatenate(seqs) if seqs else empty
    idx_all = np.concatenate(idxs) if idxs else empty
    block = np.concatenate(blocks_) if blocks_ else empty
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
        values = [value(at[int(block[p])], int(local[p])) for p in t_pos]
        starts = np.flatnonzero(np.r_[True, t_idx[1:] != t_idx[:-1]])
        ref = np.repeat(starts, np.diff(np.r_[starts, len(t_pos)]))
        mismatch = [m for m in range(len(t_pos)) if values[m] != values[ref[m]]]
        if mismatch:
            m = min(mismatch, key=lambda m: int(seq_all[t_pos[m]]))
            first_tie = (int(seq_all[t_pos[m]]), int(t_pos[m]), values[ref[m]], values[m])
    if first_bad is not None and (first_tie is None or first_bad < first_tie[0]):
        p = int(np.flatnonzero(bad_range & (seq_all == first_bad))[0])
        raise CaseFormatError(where, _name(widths, at[int(block[p])], int(local[p])),
                              f"parameter index {int(idx_all[p])} outside -1..{k - 1}")
    if first_tie is not None:
        _seq, p, ref_val, val = first_tie
        raise CaseFormatError(where, _name(widths, at[int(block[p])], int(local[p])),
                              f"tied to theta_{int(idx_all[p])} = {ref_val} but holds {val}")
    used = np.zeros(k, dtype=bool)
    used[idx_all[ok]] = True
    if not used.all():
        missing = int(np.flatnonzero(~used)[0])
        raise CaseFormatError(where, "n_params", f"theta_{missing} feeds no weight, bias or slope")
