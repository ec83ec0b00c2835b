"""A network given as a graph of framework layers, with exact parameters (case format 2).

An :class:`Architecture` is what a framework model is: an input of shape ``input_shape``
(channel-first, no batch axis: ``(N,)``, ``(C, L)`` or ``(C, H, W)``), a list of named
:class:`Layer` objects in an order where every layer's inputs come earlier, and the name of
the output layer.  Parameters are exact rationals (fmpq) held in numpy object arrays of the
framework's own shapes (``linear.weight`` is ``(out, in)``, ``conv2d.weight`` is
``(out, in, kh, kw)``).  :mod:`exactident.model.compile` turns it into the one compiled form
:class:`~exactident.model.network.Network`.

Ops (docs/case-format.md, format 2): ``linear``, ``conv1d``, ``conv2d`` (stride, zero
padding, dilation 1, groups 1), ``avgpool1d``, ``avgpool2d`` (zero padding counted in the
divisor, floor windows), ``maxpool1d``, ``maxpool2d`` (stride, padding that never wins, per side or
symmetric, dilation, ceil mode), ``relu``, ``leaky_relu`` (exact slope), ``prelu`` (one slope or one
per channel, free), ``flatten`` (C-order), ``add`` (two or more inputs of one shape),
``identity``.  Construction validates everything and raises a
:class:`~exactident.errors.CaseFormatError` naming the field (``layers[2].weight``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from math import prod

import flint
import numpy as np

from exactident.errors import CaseFormatError

__all__ = [
    "ACTIVATION_OPS",
    "OPS",
    "REFUSED_OPS",
    "Architecture",
    "Layer",
    "exact_array",
    "pool_out_size",
    "pool_pads",
    "pool_window",
    "unknown_op_message",
]

#: Every op, with its fields beyond ``name``, ``op``, ``inputs``: (required, optional).
OPS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "linear": (("weight", "bias"), ()),
    "conv1d": (("weight", "bias"), ("out_channels", "kernel_size", "stride", "padding")),
    "conv2d": (("weight", "bias"), ("out_channels", "kernel_size", "stride", "padding")),
    "avgpool1d": (("kernel_size",), ("stride", "padding")),
    "avgpool2d": (("kernel_size",), ("stride", "padding")),
    "maxpool1d": (("kernel_size",), ("stride", "padding", "dilation", "ceil_mode")),
    "maxpool2d": (("kernel_size",), ("stride", "padding", "dilation", "ceil_mode")),
    "relu": ((), ()),
    "leaky_relu": (("negative_slope",), ()),
    "prelu": (("weight",), ()),
    "flatten": ((), ()),
    "add": ((), ()),
    "identity": ((), ()),
}
#: Ops people ask for that exactident refuses, with the reason given in the one-line error.
REFUSED_OPS = {
    "batchnorm1d": "batch normalisation is refused: its exact folding needs sqrt(var + eps), irrational in general "
                   "(fold it into the previous layer first)",
    "batchnorm2d": "batch normalisation is refused: its exact folding needs sqrt(var + eps), irrational in general "
                   "(fold it into the previous layer first)",
    "gelu": "GELU is not piecewise linear", "tanh": "tanh is not piecewise linear",
    "sigmoid": "sigmoid is not piecewise linear", "softmax": "softmax is not piecewise linear (analyse the logits)",
}
#: Ops that set the negative-side slope of the units they follow.
ACTIVATION_OPS = ("relu", "leaky_relu", "prelu")
_SPATIAL = {"conv1d": 1, "conv2d": 2, "avgpool1d": 1, "avgpool2d": 2, "maxpool1d": 1, "maxpool2d": 2}


def exact_array(values: object, shape: Sequence[int] | None = None) -> np.ndarray:
    """An object array of fmpq from nested lists/arrays of exact numbers (int, Fraction, fmpq).

    Raises
    ------
    CaseFormatError
        On a float or any other inexact value, or a shape other than ``shape``.
    """
    from exactident.model.param_index import exact

    arr = np.array(values, dtype=object)
    if shape is not None and arr.shape != tuple(shape):
        raise CaseFormatError("<Architecture>", "", f"expected shape {tuple(shape)}, found {arr.shape}")
    flat = [exact(v, f"[{i}]") for i, v in enumerate(arr.ravel())]
    out = np.empty(arr.shape, dtype=object)
    out.ravel()[:] = flat if flat else []
    return out


@dataclass(eq=False)
class Layer:
    """One framework layer.

    Attributes
    ----------
    name : str
        Unique, not ``"input"``.
    op : str
        One of :data:`OPS`.
    inputs : tuple of str
        Names of earlier layers or ``"input"``; one, except ``add`` (two or more).
    weight : ndarray of fmpq or None
        ``linear``: ``(out, in)``; ``conv1d``: ``(out, in, k)``; ``conv2d``: ``(out, in, kh, kw)``;
        ``prelu``: ``(1,)`` or ``(C,)`` (one slope per channel).  Entries in Q.
    bias : ndarray of fmpq or None
        ``(out,)``; None means no bias (fixed at 0).
    kernel_size, stride, padding : tuple of int
        Convolution and pooling (one entry per spatial axis).  Defaults: stride 1 for a
        convolution, ``kernel_size`` for pooling; padding 0.  Max pooling also takes a padding
        of two entries per axis, every begin then every end (ONNX's ``pads``): a padded
        position never wins the max.
    dilation : tuple of int
        Max pooling only: the step between window positions (default 1 per axis).
    ceil_mode : bool
        Max pooling only: ceil instead of floor for the number of windows; a window that would
        start in the end padding is dropped (PyTorch's and ONNX's rule).
    negative_slope : fmpq or None
        ``leaky_relu`` only.
    """

    name: str
    op: str
    inputs: tuple[str, ...]
    weight: np.ndarray | None = None
    bias: np.ndarray | None = None
    kernel_size: tuple[int, ...] = ()
    stride: tuple[int, ...] = ()
    padding: tuple[int, ...] = ()
    negative_slope: flint.fmpq | None = None
    dilation: tuple[int, ...] = ()
    ceil_mode: bool = False

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Layer):
            return NotImplemented
        same = (self.name, self.op, tuple(self.inputs), self.kernel_size, self.stride, self.padding,
                self.negative_slope, self.dilation, self.ceil_mode) == (
            other.name, other.op, tuple(other.inputs), other.kernel_size, other.stride, other.padding,
            other.negative_slope, other.dilation, other.ceil_mode)
        return same and _same_array(self.weight, other.weight) and _same_array(self.bias, other.bias)


def _same_array(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.shape == b.shape and all(x == y for x, y in zip(a.ravel(), b.ravel()))


@dataclass(eq=False)
class Architecture:
    """A layer graph with exact parameters; validated and shape-inferred at construction.

    Attributes
    ----------
    input_shape : tuple of int
        ``(N,)``, ``(C, L)`` or ``(C, H, W)``, positive.
    layers : list of Layer
        In an order where each layer's inputs come earlier; every layer feeds the output.
    output : str
        Name of the output layer.
    source : str
        File name for error messages.
    shapes : dict of str to tuple of int
        Filled at construction: the output shape of ``"input"`` and of every layer.

    Raises
    ------
    CaseFormatError
        Naming ``layers[i].FIELD`` for an unknown op, a wrong number of inputs, a name used
        twice or not yet defined, a weight of the wrong shape, a window larger than its
        padded input, a layer that does not feed the output, an inexact number.

    Examples
    --------
    >>> fc = Layer("fc", "linear", ("input",), weight=exact_array([[1, 2]]), bias=None)
    >>> Architecture((2,), [fc, Layer("act", "relu", ("fc",))], "act").shapes["act"]
    (1,)
    """

    input_shape: tuple[int, ...]
    layers: list[Layer]
    output: str
    source: str = field(default="<architecture>", compare=False)
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        shape = self.input_shape
        if (not isinstance(shape, (tuple, list)) or not 1 <= len(shape) <= 3
                or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in shape)):
            self._fail("input_shape", f"expected 1 to 3 positive integers, found {shape!r}")
        self.input_shape = tuple(shape)
        self.shapes = {"input": self.input_shape}
        for i, layer in enumerate(self.layers):
            self.shapes[layer.name] = self._infer(i, layer)
        if self.output not in self.shapes or self.output == "input":
            self._fail("output", f"expected the name of a layer, found {self.output!r}")
        used = {self.output}
        for layer in reversed(self.layers):
            if layer.name in used:
                used.update(layer.inputs)
        for i, layer in enumerate(self.layers):
            if layer.name not in used:
                self._fail(f"layers[{i}]", f"layer {layer.name!r} does not feed the output {self.output!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Architecture):
            return NotImplemented
        return ((self.input_shape, self.output) == (other.input_shape, other.output)
                and len(self.layers) == len(other.layers)
                and all(a == b for a, b in zip(self.layers, other.layers)))

    def _fail(self, where: str, message: str) -> None:
        raise CaseFormatError(self.source, where, message)

    @property
    def n_inputs(self) -> int:
        """``N_0 = prod(input_shape)``: the length of a sample row (C-order)."""
        return prod(self.input_shape)

    def layer(self, name: str) -> Layer:
        """The layer called ``name`` (``KeyError`` when absent)."""
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(name)

    def _infer(self, i: int, layer: Layer) -> tuple[int, ...]:
        at = f"layers[{i}]"
        if not isinstance(layer.name, str) or not layer.name or layer.name == "input":
            self._fail(f"{at}.name", f"expected a non-empty name other than 'input', found {layer.name!r}")
        if layer.name in self.shapes:
            self._fail(f"{at}.name", f"name {layer.name!r} used twice")
        if layer.op not in OPS:
            self._fail(f"{at}.op", unknown_op_message(layer.op))
        n_in = len(layer.inputs)
        if (layer.op == "add" and n_in < 2) or (layer.op != "add" and n_in != 1):
            want = "two or more inputs" if layer.op == "add" else "one input"
            self._fail(f"{at}.inputs", f"{layer.op} takes {want}, found {n_in}")
        for j, src in enumerate(layer.inputs):
            if src not in self.shapes:
                self._fail(f"{at}.inputs[{j}]", f"{src!r} is not 'input' or an earlier layer")
        shapes = [self.shapes[s] for s in layer.inputs]
        shape = shapes[0]
        op = layer.op
        _check_fields(self, at, layer)
        if op == "add":
            for j, s in enumerate(shapes[1:], 1):
                if s != shape:
                    self._fail(f"{at}.inputs[{j}]", f"shape {s} differs from {shape} of {layer.inputs[0]!r}")
            return shape
        if op in ("relu", "identity"):
            return shape
        if op == "flatten":
            return (prod(shape),)
        if op == "leaky_relu":
            slope = _to_fmpq(layer.negative_slope)
            if slope is None:
                self._fail(f"{at}.negative_slope", f"expected an exact number (int, Fraction, fmpq), "
                                                   f"found {layer.negative_slope!r}")
            layer.negative_slope = slope
            return shape
        if op == "prelu":
            w = self._weight(at, layer, 1)
            if w.shape[0] not in (1, shape[0]):
                self._fail(f"{at}.weight", f"expected 1 or {shape[0]} slopes (one per channel), found {w.shape[0]}")
            return shape
        if op == "linear":
            if len(shape) != 1:
                self._fail(f"{at}.inputs[0]", f"linear takes a flat input, found shape {shape} (add a flatten)")
            w = self._weight(at, layer, 2)
            if w.shape[1] != shape[0]:
                self._fail(f"{at}.weight", f"expected rows of {shape[0]} entries (the input size), "
                                           f"found shape {w.shape}")
            self._bias(at, layer, w.shape[0])
            return (w.shape[0],)
        return self._spatial(at, layer, shape)

    def _max_windows(self, at: str, layer: Layer, spatial: tuple[int, ...]) -> list[int]:
        """Output size per axis of a max pooling; every window must hold an input position."""
        out = []
        for axis, n in enumerate(spatial):
            begin, end = pool_pads(layer.padding, axis, len(spatial))
            k, s, dil = layer.kernel_size[axis], layer.stride[axis], layer.dilation[axis]
            m = pool_out_size(n, k, s, begin, end, dil, layer.ceil_mode)
            if m < 1:
                self._fail(f"{at}.kernel_size", f"window {k} (dilation {dil}) is larger than the padded input "
                                                f"{n} + {begin} + {end}")
            for o in range(m):
                if not pool_window(o, k, s, begin, dil, n):
                    self._fail(f"{at}.padding", f"window {o} along axis {axis} holds only padding (no input "
                                                f"position to take the max of)")
            out.append(m)
        return out

    def _weight(self, at: str, layer: Layer, ndim: int) -> np.ndarray:
        w = layer.weight
        if isinstance(w, (list, tuple)):  # nested lists from Python: made an exact array (floats refused)
            w = layer.weight = np.array(w, dtype=object)
        if not isinstance(w, np.ndarray) or w.ndim != ndim or 0 in w.shape:
            found = w.shape if isinstance(w, np.ndarray) else type(w).__name__
            self._fail(f"{at}.weight", f"expected a non-empty array of {ndim} axes, found {found}")
        assert isinstance(w, np.ndarray)
        _check_exact(self, f"{at}.weight", w)
        return w

    def _bias(self, at: str, layer: Layer, n: int) -> None:
        if layer.bias is None:
            return
        if isinstance(layer.bias, (list, tuple)):
            layer.bias = np.array(layer.bias, dtype=object)
        if not isinstance(layer.bias, np.ndarray) or layer.bias.shape != (n,):
            found = layer.bias.shape if isinstance(layer.bias, np.ndarray) else type(layer.bias).__name__
            self._fail(f"{at}.bias", f"expected {n} entries (one per output), found {found}")
        _check_exact(self, f"{at}.bias", layer.bias)

    def _spatial(self, at: str, layer: Layer, shape: tuple[int, ...]) -> tuple[int, ...]:
        d = _SPATIAL[layer.op]
        if len(shape) != d + 1:
            self._fail(f"{at}.inputs[0]", f"{layer.op} takes a (C, {'L' if d == 1 else 'H, W'}) input, "
                                          f"found shape {shape}")
        conv = layer.op.startswith("conv")
        if conv:
            w = self._weight(at, layer, d + 2)
            if w.shape[1] != shape[0]:
                self._fail(f"{at}.weight", f"expected {shape[0]} input channels (axis 1), found shape {w.shape}")
            self._bias(at, layer, w.shape[0])
            if layer.kernel_size and tuple(layer.kernel_size) != w.shape[2:]:
                self._fail(f"{at}.kernel_size", f"{list(layer.kernel_size)} differs from the weight's "
                                                f"{list(w.shape[2:])}")
            layer.kernel_size = tuple(w.shape[2:])
        maxpool = layer.op.startswith("maxpool")
        for key in ("kernel_size", "stride", "padding", "dilation"):
            if key == "dilation" and not maxpool:
                continue
            value = getattr(layer, key)
            if key == "stride" and not value:
                value = (1,) * d if conv else layer.kernel_size
            if key in ("padding", "dilation") and not value:
                value = (0 if key == "padding" else 1,) * d
            low = 0 if key == "padding" else 1
            lengths = (d, 2 * d) if maxpool and key == "padding" else (d,)
            if (not isinstance(value, (tuple, list)) or len(value) not in lengths
                    or any(isinstance(v, bool) or not isinstance(v, int) or v < low for v in value)):
                what = "non-negative" if low == 0 else "positive"
                count = f"{d} or {2 * d}" if len(lengths) == 2 else f"{d}"
                self._fail(f"{at}.{key}", f"expected {count} {what} integer{'s' if d > 1 or maxpool else ''}, "
                                          f"found {value!r}")
            setattr(layer, key, tuple(value))
        if maxpool:
            if not isinstance(layer.ceil_mode, bool):
                self._fail(f"{at}.ceil_mode", f"expected true or false, found {layer.ceil_mode!r}")
            return (shape[0], *self._max_windows(at, layer, shape[1:]))
        out = []
        for axis in range(d):
            k, s, p, n = layer.kernel_size[axis], layer.stride[axis], layer.padding[axis], shape[axis + 1]
            if not conv and 2 * p > k:
                self._fail(f"{at}.padding", f"pooling padding {p} is more than half the window {k}")
            if n + 2 * p < k:
                self._fail(f"{at}.kernel_size", f"window {k} is larger than the padded input {n} + 2*{p}")
            out.append((n + 2 * p - k) // s + 1)
        channels = layer.weight.shape[0] if conv and layer.weight is not None else shape[0]
        return (channels, *out)


def pool_pads(padding: Sequence[int], axis: int, d: int) -> tuple[int, int]:
    """``(begin, end)`` padding of ``axis`` from ``d`` symmetric entries or ``2 d`` (begins, then ends)."""
    return (padding[axis], padding[axis + d]) if len(padding) == 2 * d else (padding[axis], padding[axis])


def pool_out_size(n: int, k: int, s: int, begin: int, end: int, dilation: int, ceil_mode: bool) -> int:
    """Number of max-pooling windows along one axis (PyTorch's and ONNX's rule).

    ``floor`` (or ``ceil``) of ``(n + begin + end - dilation (k - 1) - 1) / s`` plus one; with
    ``ceil_mode`` a last window that would start in the end padding is dropped.

    Examples
    --------
    >>> pool_out_size(5, 2, 2, 0, 0, 1, False), pool_out_size(5, 2, 2, 0, 0, 1, True)
    (2, 3)
    """
    span = n + begin + end - dilation * (k - 1) - 1  # negative: the window is longer than the padded input
    m = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (m - 1) * s >= n + begin:
        m -= 1
    return max(m, 0)


def pool_window(o: int, k: int, s: int, begin: int, dilation: int, n: int) -> list[int]:
    """Input positions of window ``o`` along one axis, padded positions left out (they never win the max)."""
    start = o * s - begin
    return [start + j * dilation for j in range(k) if 0 <= start + j * dilation < n]


def unknown_op_message(op: object) -> str:
    """The one-line reason an op is refused (``REFUSED_OPS``), or the list of known ops."""
    if isinstance(op, str) and op.lower() in REFUSED_OPS:
        return f"{op!r}: {REFUSED_OPS[op.lower()]}"
    return f"unknown op {op!r} (known: {', '.join(OPS)})"


def _check_fields(arch: Architecture, at: str, layer: Layer) -> None:
    required, optional = OPS[layer.op]
    allowed = set(required) | set(optional)
    for key in ("weight", "bias", "negative_slope"):
        if key not in allowed and getattr(layer, key) is not None:
            arch._fail(f"{at}.{key}", f"not a field of {layer.op}")
    for key in ("kernel_size", "stride", "padding", "dilation", "ceil_mode"):
        if key not in allowed and getattr(layer, key):
            arch._fail(f"{at}.{key}", f"not a field of {layer.op}")


def _check_exact(arch: Architecture, where: str, arr: np.ndarray) -> None:
    for idx, v in np.ndenumerate(arr):
        exact = _to_fmpq(v)
        if exact is None:
            arch._fail(where + "".join(f"[{k}]" for k in idx),
                       f"expected an exact number (int, Fraction, fmpq), found {v!r}")
        arr[idx] = exact


def _to_fmpq(v: object) -> flint.fmpq | None:
    if isinstance(v, flint.fmpq):
        return v
    if isinstance(v, (int, flint.fmpz)) and not isinstance(v, bool):
        return flint.fmpq(v)
    if isinstance(v, Fraction):
        return flint.fmpq(v.numerator, v.denominator)
    return None
