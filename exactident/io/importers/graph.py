"""The layer graph an importer reads from a model: exact tensors, shapes, and the ``exactident-case/2`` dict.

Every framework walker (:mod:`~exactident.io.importers.torch_graph`,
:mod:`~exactident.io.importers.onnx_graph`, :mod:`~exactident.io.importers.keras_graph`)
adds layers to a :class:`LayerGraph` in the framework's own terms (PyTorch's
channel-first layout): ``linear``, ``conv1d``/``conv2d`` (stride, zero padding),
``avgpool1d``/``avgpool2d`` (zero padding counted in the divisor), ``maxpool1d``/``maxpool2d``
(padding that never wins, dilation, ceil mode), ``relu``,
``leaky_relu`` (the exact binary value of the slope the framework computes with),
``prelu`` (free slopes), ``flatten`` (C-order), ``add``.  Identity layers (``Dropout``
at inference, ``Identity``) are aliases and emit nothing.  Every float becomes the
rational it is (:class:`~exactident.io.importers.arrays.Tensor`), written as a
``"p/q"`` string; shapes are checked as layers are added, naming the layer.

:meth:`LayerGraph.plain_chain` says whether the graph is the plain
``Linear(bias) -> ReLU -> ... -> Linear(bias)`` chain on a flat input, which
is imported as an ``exactident-case/1`` case exactly as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import flint
import numpy as np

from exactident.errors import CaseFormatError
from exactident.io.importers.arrays import Tensor, join_dtypes
from exactident.io.rationals import format_fmpq
from exactident.model.architecture import pool_out_size, pool_pads, pool_window

__all__ = ["CASE_FORMAT_2", "GLayer", "LayerGraph", "exact_slope"]

#: The case format that stores a layer graph (docs/case-format.md).
CASE_FORMAT_2 = "exactident-case/2"

_ACTIVATIONS = ("relu", "leaky_relu", "prelu")


def exact_slope(value: float, dtype: str) -> flint.fmpq:
    """The slope a framework computes with: ``value`` rounded to the compute ``dtype`` (float32 0.01 is
    0.00999999977648258209228515625), as the exact rational it is.

    Examples
    --------
    >>> exact_slope(0.01, "float32")  # 0.00999999977648258209228515625
    5368709/536870912
    >>> str(exact_slope(0.25, "float32"))
    '1/4'
    """
    if dtype == "float64":
        p, q = float(value).as_integer_ratio()
    else:
        p, q = float(np.asarray(value, dtype=np.float16 if dtype == "float16" else np.float32)).as_integer_ratio()
    return flint.fmpq(p, q)


@dataclass
class GLayer:
    """One layer: ``op``, its ``inputs`` (layer names or ``"input"``), attributes, exact tensors."""

    name: str
    op: str
    inputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    weight: Tensor | None = None
    bias: Tensor | None = None
    slope: flint.fmpq | None = None
    shape: tuple[int, ...] = ()


def _nested(values: list[flint.fmpq], shape: tuple[int, ...]) -> Any:
    if len(shape) <= 1:
        return [format_fmpq(v) for v in values]
    step = len(values) // shape[0]
    return [_nested(values[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def _pair(v: Any, n: int) -> list[int]:
    if isinstance(v, (list, tuple)):
        out = [int(x) for x in v]
        return out * n if len(out) == 1 else out
    return [int(v)] * n


class LayerGraph:
    """Layers added in an order where every input comes first; the network's ``output`` set last.

    Parameters
    ----------
    source : str
        The model (file or object) named in errors.
    input_shape : tuple of int
        Channel-first shape of one input, without the batch axis: ``(N_0,)``, ``(C, L)``, ``(C, H, W)``.
    """

    def __init__(self, source: str, input_shape: tuple[int, ...]) -> None:
        self.source = source
        self.input_shape = tuple(int(s) for s in input_shape)
        self.layers: list[GLayer] = []
        self.shapes: dict[str, tuple[int, ...]] = {"input": self.input_shape}
        self.output: str | None = None
        self.dtypes: list[str] = []
        self.notes: list[str] = []
        self.dropped: str | None = None
        #: rows of the stored sample are ``row[sample_permutation]`` of the framework's (Keras: channels-last)
        self.sample_permutation: list[int] | None = None

    def _new(self, layer: GLayer, shape: tuple[int, ...]) -> str:
        base, k = layer.name or "layer", 1
        while layer.name in self.shapes or not layer.name:  # a module applied twice, an ONNX node named "input"
            k += 1
            layer.name = f"{base}_{k}"
        layer.shape = shape
        self.layers.append(layer)
        self.shapes[layer.name] = shape
        return layer.name

    def shape(self, name: str) -> tuple[int, ...]:
        return self.shapes[name]

    def _tensor(self, value: Any, name: str) -> Tensor:
        t = Tensor(value, self.source, name)
        self.dtypes.append(t.dtype)
        return t

    def linear(self, name: str, src: str, weight: Any, bias: Any, wname: str, bname: str) -> str:
        """``y = W x + b`` on flat features, ``W`` of shape ``(out, in)``; ``bias`` None: fixed at 0."""
        W = self._tensor(weight, wname)
        shp = self.shape(src)
        if W.ndim != 2 or len(shp) != 1 or W.shape[1] != shp[0]:
            raise CaseFormatError(self.source, name, f"weight of shape {W.shape} does not apply to the data of "
                                  f"shape {shp} (a Linear layer acts on flat features; flatten first)")
        b = None if bias is None else self._tensor(bias, bname)
        if b is not None and b.shape != (W.shape[0],):
            raise CaseFormatError(self.source, bname, f"bias of shape {b.shape}, expected ({W.shape[0]},)")
        return self._new(GLayer(name, "linear", [src], weight=W, bias=b), (W.shape[0],))

    def conv(self, name: str, src: str, weight: Any, bias: Any, stride: Any, padding: Any,
             wname: str, bname: str) -> str:
        """``conv1d`` (weight ``(out, in, k)``) or ``conv2d`` (``(out, in, kh, kw)``), zero padding."""
        W = self._tensor(weight, wname)
        d = W.ndim - 2
        shp = self.shape(src)
        if d not in (1, 2) or len(shp) != d + 1 or shp[0] != W.shape[1]:
            raise CaseFormatError(self.source, name, f"kernel of shape {W.shape} does not apply to the data of "
                                                     f"shape {shp}")
        s, p = _pair(stride, d), _pair(padding, d)
        k = list(W.shape[2:])
        out = [(shp[1 + i] + 2 * p[i] - k[i]) // s[i] + 1 for i in range(d)]
        if min(out) < 1 or min(s) < 1 or min(p) < 0:
            raise CaseFormatError(self.source, name, f"kernel {k}, stride {s}, padding {p} on shape {shp}: "
                                                     "no output")
        b = None if bias is None else self._tensor(bias, bname)
        if b is not None and b.shape != (W.shape[0],):
            raise CaseFormatError(self.source, bname, f"bias of shape {b.shape}, expected ({W.shape[0]},)")
        return self._new(GLayer(name, f"conv{d}d", [src], {"kernel_size": k, "stride": s, "padding": p},
                                weight=W, bias=b), (W.shape[0], *out))

    def avgpool(self, name: str, src: str, kernel: Any, stride: Any, padding: Any) -> str:
        """Average pooling, zero padding counted in the divisor (``count_include_pad=True``), floor windows."""
        shp = self.shape(src)
        d = len(shp) - 1
        if d not in (1, 2):
            raise CaseFormatError(self.source, name, f"average pooling of data of shape {shp}")
        k, s, p = _pair(kernel, d), _pair(kernel if stride is None else stride, d), _pair(padding, d)
        out = [(shp[1 + i] + 2 * p[i] - k[i]) // s[i] + 1 for i in range(d)]
        if min(out) < 1 or min(s) < 1:
            raise CaseFormatError(self.source, name, f"pooling window {k}, stride {s} on shape {shp}: no output")
        return self._new(GLayer(name, f"avgpool{d}d", [src], {"kernel_size": k, "stride": s, "padding": p}),
                         (shp[0], *out))

    def maxpool(self, name: str, src: str, kernel: Any, stride: Any, padding: Any, dilation: Any = 1,
                ceil_mode: bool = False) -> str:
        """Max pooling; ``padding``: one entry per axis (both sides) or ``2 d`` (begins, then ends), never winning.

        Raises
        ------
        CaseFormatError
            Naming the layer: not 1-D or 2-D data, no output, or a window holding only padding.
        """
        shp = self.shape(src)
        d = len(shp) - 1
        if d not in (1, 2):
            raise CaseFormatError(self.source, name, f"max pooling of data of shape {shp}")
        k, s, dil = _pair(kernel, d), _pair(kernel if stride is None else stride, d), _pair(dilation, d)
        p = [int(x) for x in padding] if isinstance(padding, (list, tuple)) and len(padding) == 2 * d \
            else _pair(padding, d)
        if len(p) == 2 * d and p[:d] == p[d:]:
            p = p[:d]
        out = []
        for i in range(d):
            begin, end = pool_pads(p, i, d)
            m = pool_out_size(shp[1 + i], k[i], s[i], begin, end, dil[i], bool(ceil_mode)) if min(k + s + dil) > 0 \
                and min(p) >= 0 else 0
            if m < 1 or any(not pool_window(o, k[i], s[i], begin, dil[i], shp[1 + i]) for o in range(m)):
                raise CaseFormatError(self.source, name, f"pooling window {k}, stride {s}, padding {p}, dilation "
                                                         f"{dil} on shape {shp}: no output, or a window of padding "
                                                         "only")
            out.append(m)
        attrs = {"kernel_size": k, "stride": s, "padding": p, "dilation": dil, "ceil_mode": bool(ceil_mode)}
        return self._new(GLayer(name, f"maxpool{d}d", [src], attrs), (shp[0], *out))

    def global_avgpool(self, name: str, src: str) -> str:
        """Average over the whole spatial extent (one window); keeps the shape ``(C, 1[, 1])``."""
        shp = self.shape(src)
        return self.avgpool(name, src, list(shp[1:]), list(shp[1:]), 0)

    def activation(self, name: str, src: str, op: str, slope: flint.fmpq | None = None, weight: Any = None,
                   wname: str = "") -> str:
        """``relu``, ``leaky_relu`` (exact ``slope``) or ``prelu`` (``weight``: 1 entry or one per channel)."""
        layer = GLayer(name, op, [src], slope=slope)
        if op == "prelu":
            W = self._tensor(np.asarray(weight).reshape(-1) if isinstance(weight, np.ndarray) else weight, wname)
            channels = self.shape(src)[0]
            if W.ndim != 1 or W.shape[0] not in (1, channels):
                raise CaseFormatError(self.source, name, f"{W.shape[0] if W.ndim == 1 else W.shape} slopes for "
                                                         f"{channels} channels (expected 1 or {channels})")
            layer.weight = W
        return self._new(layer, self.shape(src))

    def flatten(self, name: str, src: str) -> str:
        """C-order flatten (``torch.flatten(x, 1)``); a flat tensor is returned as is."""
        shp = self.shape(src)
        if len(shp) == 1:
            return src
        return self._new(GLayer(name, "flatten", [src]), (int(np.prod(shp)),))

    def add(self, name: str, srcs: list[str]) -> str:
        """The sum of two or more tensors of one shape (a skip connection)."""
        shapes = {self.shape(s) for s in srcs}
        if len(srcs) < 2 or len(shapes) != 1:
            raise CaseFormatError(self.source, name, f"adds tensors of shapes {sorted(shapes)} (expected two or "
                                                     "more of the same shape)")
        return self._new(GLayer(name, "add", list(srcs)), self.shape(srcs[0]))

    # -- the result -------------------------------------------------------------------------------------
    def weight_dtype(self) -> str:
        return join_dtypes(self.dtypes)

    def used(self) -> list[GLayer]:
        """The layers the output depends on, in order (dead branches dropped)."""
        if self.output is None:
            raise CaseFormatError(self.source, "output", "the graph has no output")
        need = {self.output}
        for layer in reversed(self.layers):
            if layer.name in need:
                need.update(layer.inputs)
        return [layer for layer in self.layers if layer.name in need]

    def plain_chain(self) -> bool:
        """``Linear(bias) -> ReLU -> ... -> Linear(bias)`` on a flat input, each layer on the previous one."""
        layers = self.used()
        if len(self.input_shape) != 1 or not layers or len(layers) % 2 == 0:
            return False
        prev = "input"
        for i, layer in enumerate(layers):
            want = "linear" if i % 2 == 0 else "relu"
            if layer.op != want or layer.inputs != [prev] or (want == "linear" and layer.bias is None):
                return False
            prev = layer.name
        return prev == self.output

    def check_output(self) -> None:
        """The network ends at an affine layer, an add or a pooling (its outputs are the logits)."""
        layers = self.used()
        affine = [x for x in layers if x.op in ("linear", "conv1d", "conv2d")]
        if not affine:
            raise CaseFormatError(self.source, "output", "no Linear or convolution on the data path")
        last = layers[-1]
        if last.op in _ACTIVATIONS:
            raise CaseFormatError(self.source, last.name, f"the network ends with an activation ({last.op}); the "
                                  "output layer must be affine (the logits)")

    def document(self, name: str, sample: list[list[flint.fmpq]], description: str,
                 provenance: dict[str, Any]) -> dict[str, Any]:
        """The ``exactident-case/2`` dict (every number a canonical ``"p/q"`` string)."""
        self.check_output()
        layers = []
        for layer in self.used():
            entry: dict[str, Any] = {"name": layer.name, "op": layer.op, "inputs": list(layer.inputs)}
            if layer.op in ("linear", "conv1d", "conv2d"):
                assert layer.weight is not None
                if layer.op != "linear":
                    entry["out_channels"] = layer.weight.shape[0]
                entry.update({k: layer.attrs[k] for k in ("kernel_size", "stride", "padding") if k in layer.attrs})
                entry["weight"] = _nested(layer.weight.values, layer.weight.shape)
                entry["bias"] = None if layer.bias is None else _nested(layer.bias.values, layer.bias.shape)
            elif layer.op.startswith(("avgpool", "maxpool")):
                entry.update(layer.attrs)
            elif layer.op == "leaky_relu":
                assert layer.slope is not None
                entry["negative_slope"] = format_fmpq(layer.slope)
            elif layer.op == "prelu":
                assert layer.weight is not None
                entry["weight"] = _nested(layer.weight.values, layer.weight.shape)
            layers.append(entry)
        doc: dict[str, Any] = {"format": CASE_FORMAT_2, "name": name}
        if description:
            doc["description"] = description
        doc.update({"input_shape": list(self.input_shape), "layers": layers, "output": self.output,
                    "sample": [[format_fmpq(v) for v in row] for row in sample]})
        if provenance:
            doc["provenance"] = provenance
        return doc
