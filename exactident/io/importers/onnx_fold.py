"""Helper ops of exported ONNX graphs, evaluated before the network is read.

Exporters surround the affine layers with ops that only move numbers around:
``Transpose``/``Cast``/``Unsqueeze``/``Squeeze``/``Reshape``/``Identity`` of a
constant weight, and shape arithmetic (``Shape`` of the data, then ``Gather``,
``Slice``, ``Concat``, ``Unsqueeze``, integer ``Mod``/``Add``/``Sub``/``Mul`` on
constants) that computes the target of a ``Reshape`` (what ``x.view(x.size(0), -1)``
and ``nn.Unflatten`` export to).  :func:`fold` evaluates such a node when all
its inputs are constants; a float result is only ever a re-arrangement of
stored numbers (or a ``Cast``, whose value is what the model computes with), so
the weights read stay exact.  ``Shape`` of the data gives ``[n, k...]`` with the
number of samples ``n`` kept symbolic (:data:`BATCH`): arithmetic on it is not
folded, so the only thing a shape can do is become a ``Reshape`` target, which
:mod:`~exactident.io.importers.onnx_model` checks.

:data:`HELPER_OPS` are the ops an error skips over to name the first
unsupported *compute* op (``Conv``, not the ``Unsqueeze`` before it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["BATCH", "HELPER_OPS", "fold", "is_symbolic"]

#: Stands for the number of samples in a folded shape (never a real dimension or weight).
BATCH = -(2**62) + 7

#: Ops that only move numbers or compute shapes.
HELPER_OPS = frozenset({"Shape", "Gather", "Slice", "Concat", "Unsqueeze", "Squeeze", "Reshape", "Cast", "Transpose",
                        "Identity", "Constant", "Flatten", "Mod", "Add", "Sub", "Mul", "Expand", "ConstantOfShape",
                        "Range", "Div"})


def is_symbolic(arr: np.ndarray) -> bool:
    """Whether a folded integer array holds :data:`BATCH` (it depends on the number of samples)."""
    return arr.dtype.kind in "iu" and bool(np.any(arr == BATCH))


def _axes(node_inputs: list[np.ndarray | None], attrs: dict[str, Any]) -> list[int] | None:
    if len(node_inputs) > 1 and node_inputs[1] is not None:
        return [int(a) for a in np.asarray(node_inputs[1]).ravel()]
    axes = attrs.get("axes")
    return None if axes is None else [int(a) for a in axes]


def _unsqueeze(x: np.ndarray, axes: list[int]) -> np.ndarray:
    rank = x.ndim + len(axes)
    for a in sorted(a % rank for a in axes):
        x = np.expand_dims(x, a)
    return x


def _reshape(x: np.ndarray, shape: np.ndarray, attrs: dict[str, Any]) -> np.ndarray:
    target = [int(s) for s in shape.ravel()]
    if not attrs.get("allowzero", 0):
        target = [x.shape[i] if s == 0 else s for i, s in enumerate(target)]
    return x.reshape(target)


def _slice(x: np.ndarray, ins: list[np.ndarray | None]) -> np.ndarray:
    starts = [int(v) for v in np.asarray(ins[1]).ravel()]
    ends = [int(v) for v in np.asarray(ins[2]).ravel()]
    axes = [int(v) for v in np.asarray(ins[3]).ravel()] if len(ins) > 3 and ins[3] is not None else \
        list(range(len(starts)))
    steps = [int(v) for v in np.asarray(ins[4]).ravel()] if len(ins) > 4 and ins[4] is not None else \
        [1] * len(starts)
    index: list[slice] = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        index[a % x.ndim] = slice(s, e, st)
    return x[tuple(index)]


def _int_arith(op: Callable[[Any, Any], Any]) -> Callable[[list[np.ndarray | None], dict[str, Any]], np.ndarray | None]:
    def run(ins: list[np.ndarray | None], attrs: dict[str, Any]) -> np.ndarray | None:
        a, b = np.asarray(ins[0]), np.asarray(ins[1])
        if a.dtype.kind not in "iu" or b.dtype.kind not in "iu" or is_symbolic(a) or is_symbolic(b):
            return None  # float arithmetic would round; arithmetic on n is not a constant
        if op is np.mod and attrs.get("fmod", 0):
            return np.fmod(a, b)
        return np.asarray(op(a, b))
    return run


def _cast(ins: list[np.ndarray | None], attrs: dict[str, Any], to_dtype: Callable[[int], Any]) -> np.ndarray | None:
    x = np.asarray(ins[0])
    if is_symbolic(x):
        return None
    return x.astype(to_dtype(int(attrs["to"])))


_FOLD: dict[str, Callable[[list[np.ndarray | None], dict[str, Any]], np.ndarray | None]] = {
    "Identity": lambda ins, attrs: ins[0],
    "Transpose": lambda ins, attrs: np.transpose(np.asarray(ins[0]), attrs.get("perm")),
    "Unsqueeze": lambda ins, attrs: _unsqueeze(np.asarray(ins[0]), _axes(ins, attrs) or []),
    "Squeeze": lambda ins, attrs: np.squeeze(np.asarray(ins[0]), axis=tuple(a for a in (_axes(ins, attrs) or []))
                                             or None),
    "Reshape": lambda ins, attrs: _reshape(np.asarray(ins[0]), np.asarray(ins[1]), attrs),
    "Concat": lambda ins, attrs: np.concatenate([np.asarray(v) for v in ins if v is not None],
                                                axis=int(attrs.get("axis", 0))),
    "Gather": lambda ins, attrs: np.take(np.asarray(ins[0]), np.asarray(ins[1]), axis=int(attrs.get("axis", 0))),
    "Slice": lambda ins, attrs: _slice(np.asarray(ins[0]), ins),
    "Mod": _int_arith(np.mod),
    "Add": _int_arith(np.add),
    "Sub": _int_arith(np.subtract),
    "Mul": _int_arith(np.multiply),
}


def fold(op: str, inputs: list[np.ndarray | None], attrs: dict[str, Any],
         to_dtype: Callable[[int], Any]) -> np.ndarray | None:
    """The value of a helper op on constant inputs, or None when it is not folded.

    Parameters
    ----------
    op : str
        The ONNX op type.
    inputs : list of ndarray or None
        The node's inputs (None for an omitted optional input).
    attrs : dict
        The node's attributes.
    to_dtype : callable
        ONNX element type -> numpy dtype (for ``Cast``).

    Examples
    --------
    >>> fold("Transpose", [np.array([[1, 2, 3]])], {}, None).tolist()
    [[1], [2], [3]]
    >>> fold("Mod", [np.array(3), np.array(2)], {}, None).tolist()
    1
    >>> fold("Add", [np.array([BATCH]), np.array([1])], {}, None) is None  # n + 1 is not a constant
    True
    """
    if op == "Cast":
        return _cast(inputs, attrs, to_dtype)
    run = _FOLD.get(op)
    if run is None:
        return None
    try:
        return run(inputs, attrs)
    except (ValueError, IndexError, TypeError, KeyError):  # shapes that do not fit: left to the reader's error
        return None
