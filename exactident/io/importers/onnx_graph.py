"""An ONNX model as a layer graph: residual ``Add``, ``LeakyRelu``, ``PRelu``, ``Conv``, average and max pooling.

:func:`read_onnx_graph` walks the nodes in order (a DAG) with every data tensor's
shape known (batch axis symbolic): ``Gemm`` (``alpha = beta = 1``, ``transA = 0``),
``MatMul`` by a constant matrix (then ``Add`` of a constant bias folded into it),
``Conv`` (1-D/2-D, symmetric zero ``pads``, ``dilations`` 1, ``group`` 1),
``AveragePool`` (no ``ceil_mode``; ``count_include_pad=0`` only without padding),
``GlobalAveragePool``, ``MaxPool`` (``pads`` per side or ``auto_pad``, ``dilations``,
``ceil_mode``; padded positions never win; no ``Indices`` output), ``GlobalMaxPool``, ``Relu``,
``LeakyRelu`` (its float32 ``alpha`` exactly),
``PRelu`` (one slope or one per channel), ``Add`` of two data tensors, ``Flatten``
(``axis=1``), ``Reshape`` to ``(n, -1)`` (a flatten) or of the input itself,
``Identity``/``Dropout``/``Cast`` to the same type (aliases), helper ops on constants
and shapes (folded as :mod:`~exactident.io.importers.onnx_fold` does), and a final
``Softmax``/``Sigmoid`` (dropped).  ``BatchNormalization`` after a ``Gemm``/``Conv``
only with ``fold_batchnorm``.  Refused in one line naming the node: ``Tanh``/``Erf``/``Gelu``/``Sigmoid`` inside (not
piecewise linear), recurrent ops, anything else.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from exactident.errors import CaseFormatError
from exactident.io.importers.arrays import dyadic
from exactident.io.importers.graph import LayerGraph
from exactident.io.importers.onnx_fold import BATCH, fold, is_symbolic
from exactident.io.importers.onnx_load import data_input, load_onnx, np_dtype, onnx_module

__all__ = ["OnnxLayerGraph", "onnx_graph_reference", "read_onnx_graph"]

_NOT_PL = "not piecewise linear (exactident decides piecewise-linear networks only)"
REFUSED = {"Tanh": _NOT_PL, "Erf": _NOT_PL, "Gelu": _NOT_PL, "Elu": _NOT_PL, "Selu": _NOT_PL, "Softplus": _NOT_PL,
           "Sigmoid": "not piecewise linear inside the network (only a final Sigmoid over the outputs is dropped)",
           "Softmax": "not piecewise linear inside the network (only a final Softmax over the outputs is dropped)",
           "Attention": "attention is not piecewise linear", "RNN": "recurrent layers are not supported",
           "LSTM": "recurrent layers are not supported", "GRU": "recurrent layers are not supported",
           "BatchNormalization": "exact folding is impossible (sqrt(var + eps) is irrational); fold it in float64 "
                                 "with --fold-batchnorm"}
_SUPPORTED = ("supported: Gemm, MatMul(+Add), Conv, Relu, LeakyRelu, PRelu, AveragePool, GlobalAveragePool, MaxPool, "
              "GlobalMaxPool, "
              "ReduceMean over the spatial axes, Add, "
              "Flatten, Reshape, Identity, Dropout, Cast, helper ops on constants, and a final Softmax or Sigmoid")


class OnnxLayerGraph:
    """The graph read, the model, its input's name and dtype, and the logits tensor's name."""

    def __init__(self, graph: LayerGraph, model: Any, input_name: str, input_dtype: Any, input_dims: list[int],
                 logits: str, batch: int | None) -> None:
        self.graph, self.model, self.input_name, self.input_dtype = graph, model, input_name, input_dtype
        self.input_dims, self.logits, self.batch = input_dims, logits, batch


def _sym_pads(pads: list[int], d: int, path: str, where: str) -> list[int]:
    if not pads:
        return [0] * d
    if list(pads[:d]) != list(pads[d:]):
        raise CaseFormatError(path, where, f"asymmetric pads {list(pads)} (only symmetric zero padding)")
    return [int(p) for p in pads[:d]]


class _Walk:
    def __init__(self, path: str, g: LayerGraph, consts: dict[str, np.ndarray], fold_bn: bool, onnx: Any) -> None:
        self.path, self.g, self.consts, self.fold_bn, self.onnx = path, g, consts, fold_bn, onnx
        self.val: dict[str, str] = {}  # ONNX tensor name -> graph tensor name
        self.sym: dict[str, np.ndarray] = {}
        self.users: dict[str, int] = {}
        self.logits: str | None = None
        self.in_dtype: Any = None
        self.batch = BATCH  # a fixed batch size of the exported input, when it has one

    def const(self, name: str, where: str) -> np.ndarray:
        if name not in self.consts:
            raise CaseFormatError(self.path, where, f"input {name!r} is not a constant")
        return self.consts[name]

    def step(self, node: Any, where: str, attrs: dict[str, Any], final: bool) -> str | None:
        op, g, ins = node.op_type, self.g, list(node.input)
        data = [i for i in ins if i in self.val]
        src = self.val[data[0]]
        name = node.name or node.output[0]
        weight = ins[1] if len(ins) > 1 and op in ("Gemm", "Conv", "PRelu") else ""
        if weight.endswith(".weight") and weight[:-7] not in g.shapes:
            name = weight[:-7]  # torch.onnx.export keeps the module's parameter names: fc1.weight -> layer fc1
        if op == "Add" and len(data) == 2:
            return g.add(name, [self.val[d] for d in data])
        if len(data) != 1 or ins.count(data[0]) != 1:
            raise CaseFormatError(self.path, where, "combines data tensors in an unsupported way")
        if op == "Gemm":
            if ins[0] != data[0] or attrs.get("transA", 0) or float(attrs.get("alpha", 1.0)) != 1.0 \
                    or float(attrs.get("beta", 1.0)) != 1.0:
                raise CaseFormatError(self.path, where, "only Gemm(data, W) with alpha = beta = 1 and transA = 0")
            B = self.const(ins[1], where)
            W = B if attrs.get("transB", 0) else B.T
            C = self.const(ins[2], where) if len(ins) > 2 and ins[2] else None
            if C is not None and C.size != W.shape[0]:
                raise CaseFormatError(self.path, f"{where} {ins[2]}", f"bias of shape {C.shape} does not broadcast "
                                                                      f"to one per output ({W.shape[0]},)")
            return g.linear(name, src, W, None if C is None else C.reshape(-1), f"{where} {ins[1]}",
                            f"{where} {ins[2]}" if C is not None else "")
        if op == "MatMul":
            if ins[0] != data[0]:
                raise CaseFormatError(self.path, where, "only MatMul(data, constant matrix)")
            M = self.const(ins[1], where)
            if M.ndim != 2:
                raise CaseFormatError(self.path, where, f"constant of shape {M.shape} is not a matrix")
            return g.linear(name, src, M.T, None, f"{where} {ins[1]}", "")
        if op == "Add":  # data + constant: the bias of the MatMul just before
            layer = g.layers[-1] if g.layers else None
            C = self.const(next(i for i in ins if i != data[0]), where).reshape(-1)
            if layer is None or layer.name != src or layer.op != "linear" or layer.bias is not None or \
                    self.users.get(data[0], 0) != 1 or C.size != layer.shape[0]:
                raise CaseFormatError(self.path, where, "adds a constant that is not the bias of a MatMul just "
                                                        "before it")
            layer.bias = g._tensor(C, f"{where} bias")
            return src
        if op == "Conv":
            W = self.const(ins[1], where)
            d = W.ndim - 2
            if int(attrs.get("group", 1)) != 1 or any(int(x) != 1 for x in attrs.get("dilations", [1] * d)) or \
                    attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET", b"VALID", "VALID"):
                raise CaseFormatError(self.path, where, "only group 1, dilations 1 and explicit pads are supported")
            Bc = self.const(ins[2], where) if len(ins) > 2 and ins[2] else None
            return g.conv(name, src, W, Bc, list(attrs.get("strides", [1] * d)),
                          _sym_pads(list(attrs.get("pads", [])), d, self.path, where), f"{where} {ins[1]}",
                          f"{where} {ins[2]}" if Bc is not None else "")
        if op == "AveragePool":
            k = [int(x) for x in attrs["kernel_shape"]]
            pads = _sym_pads(list(attrs.get("pads", [])), len(k), self.path, where)
            if int(attrs.get("ceil_mode", 0)) or (any(pads) and not int(attrs.get("count_include_pad", 0))) or \
                    any(int(x) != 1 for x in attrs.get("dilations", [1] * len(k))):
                raise CaseFormatError(self.path, where, "only floor windows (ceil_mode 0) that count the zero "
                                                        "padding (count_include_pad 1) are supported")
            return g.avgpool(name, src, k, list(attrs.get("strides", [1] * len(k))), pads)
        if op == "GlobalAveragePool":
            return g.global_avgpool(name, src)
        if op in ("MaxPool", "GlobalMaxPool"):
            if len(node.output) > 1 and node.output[1]:
                raise CaseFormatError(self.path, where, "the Indices output is not supported (not piecewise linear)")
            if op == "GlobalMaxPool":
                spatial = list(g.shape(src)[1:])
                return g.maxpool(name, src, spatial, spatial, 0)
            return self.maxpool(name, src, where, attrs)
        if op == "ReduceMean":  # torch.onnx (dynamo) writes AdaptiveAvgPool(1) / x.mean((2, 3)) so
            shp = g.shape(src)
            axes = attrs.get("axes", self.consts.get(ins[1]) if len(ins) > 1 and ins[1] else None)
            spatial = sorted(int(a) % (len(shp) + 1) for a in np.asarray(axes).ravel()) if axes is not None else []
            if len(shp) < 2 or spatial != list(range(2, len(shp) + 1)):
                raise CaseFormatError(self.path, where, "only a mean over every spatial axis (a global average "
                                                        "pooling) is supported")
            out = g.global_avgpool(name, src)
            return out if int(attrs.get("keepdims", 1)) else g.flatten(f"{name}_flat", out)
        if op == "Relu":
            return g.activation(name, src, "relu")
        if op == "LeakyRelu":
            return g.activation(name, src, "leaky_relu", dyadic(float(np.float32(attrs.get("alpha", 0.01)))))
        if op == "PRelu":
            a = self.const(ins[1], where)
            shp = g.shape(src)
            full = (1,) * (len(shp) + 1 - a.ndim) + tuple(a.shape)  # numpy broadcasting against (n, C, ...)
            if a.size > 1 and (len(full) != len(shp) + 1 or full[1] != shp[0] or a.size != shp[0]):
                raise CaseFormatError(self.path, where, f"slope of shape {a.shape} is not one per channel")
            return g.activation(name, src, "prelu", weight=a.reshape(-1), wname=f"{where} {ins[1]}")
        if op == "Flatten":
            if int(attrs.get("axis", 1)) != 1:
                raise CaseFormatError(self.path, where, "only Flatten(axis=1) is supported")
            return g.flatten(name, src)
        if op == "Reshape":
            return self.reshape(node, src, where)
        if op == "Unsqueeze" and src == "input" and not g.layers:  # x.unsqueeze(1) of the input: a new shape
            axes = attrs.get("axes", self.consts.get(ins[1]) if len(ins) > 1 else None)
            shape: list[int] = [BATCH, *g.shape(src)]
            for ax in sorted(int(x) % (len(shape) + np.asarray(axes).size) for x in np.asarray(axes).ravel()):
                shape.insert(ax, 1)
            if shape[0] != BATCH:
                raise CaseFormatError(self.path, where, "unsqueezes the batch axis")
            g.input_shape = tuple(shape[1:])
            g.shapes["input"] = g.input_shape
            return src
        if op in ("Identity", "Dropout"):
            return src
        if op == "Cast" and np_dtype(self.onnx, int(attrs.get("to", 0))) == self.in_dtype:
            return src
        if op in ("Softmax", "Sigmoid") and final:
            if op == "Softmax" and int(attrs.get("axis", -1)) not in (1, -1):
                raise CaseFormatError(self.path, where, "Softmax is not over the outputs")
            g.dropped, self.logits = op.lower(), data[0]
            return None
        if op == "BatchNormalization" and self.fold_bn:
            return self.batchnorm(node, src, where, attrs)
        raise CaseFormatError(self.path, where, REFUSED.get(op, f"unsupported op ({_SUPPORTED})"))

    def maxpool(self, name: str, src: str, where: str, attrs: dict[str, Any]) -> str:
        """``MaxPool``: explicit ``pads`` (begins, then ends) or ``auto_pad``; padding never wins the max."""
        k = [int(x) for x in attrs["kernel_shape"]]
        d = len(k)
        s = [int(x) for x in attrs.get("strides", [1] * d)]
        dil = [int(x) for x in attrs.get("dilations", [1] * d)]
        mode = attrs.get("auto_pad", b"NOTSET")
        mode = mode.decode() if isinstance(mode, bytes) else str(mode)
        if mode in ("SAME_UPPER", "SAME_LOWER"):  # ceil(n / s) windows, the odd one on the end (or begin)
            shp = self.g.shape(src)[1:]
            total = [max(0, (-(-n // si) - 1) * si + (ki - 1) * di + 1 - n) for n, ki, si, di in zip(shp, k, s, dil)]
            begin = [t // 2 if mode == "SAME_UPPER" else t - t // 2 for t in total]
            pads = begin + [t - b for t, b in zip(total, begin)]
        elif mode in ("NOTSET", "VALID"):
            pads = [int(x) for x in attrs.get("pads", [0] * 2 * d)] if mode == "NOTSET" else [0] * 2 * d
        else:
            raise CaseFormatError(self.path, where, f"unknown auto_pad {mode!r}")
        return self.g.maxpool(name, src, k, s, pads, dil, bool(int(attrs.get("ceil_mode", 0))))

    def reshape(self, node: Any, src: str, where: str) -> str:
        target = node.input[1]
        shape = [int(s) for s in np.asarray(self.consts.get(target, self.sym.get(target))).ravel()]
        before = self.g.shape(src)
        batch = (0, -1, BATCH, self.batch)
        if len(shape) == 2 and shape[0] in batch and shape[1] in (-1, int(np.prod(before))):
            return self.g.flatten(node.name or node.output[0], src)
        rest = shape[1:]
        if src == "input" and not self.g.layers and shape[0] in batch and all(s > 0 for s in rest) \
                and int(np.prod(rest)) == int(np.prod(before)):
            self.g.input_shape = tuple(rest)
            self.g.shapes["input"] = tuple(rest)
            return src
        raise CaseFormatError(self.path, where, f"Reshape of data of shape {list(before)} to {shape} (only a flatten "
                                                "or a reshape of the input itself)")

    def batchnorm(self, node: Any, src: str, where: str, attrs: dict[str, Any]) -> str:
        layer = self.g.layers[-1] if self.g.layers else None
        if layer is None or layer.name != src or layer.op not in ("linear", "conv1d", "conv2d") or \
                layer.weight is None or layer.weight.float64 is None:
            raise CaseFormatError(self.path, where, "BatchNormalization is folded only right after a Gemm or Conv")
        scale, bias, mean, var = (self.const(i, where).astype(np.float64) for i in node.input[1:5])
        s = scale / np.sqrt(var + float(np.float32(attrs.get("epsilon", 1e-5))))
        W = layer.weight.float64.reshape(layer.weight.shape)
        b = np.zeros(W.shape[0]) if layer.bias is None or layer.bias.float64 is None else layer.bias.float64
        layer.weight = self.g._tensor(W * s.reshape((-1,) + (1,) * (W.ndim - 1)), f"{where} (folded)")
        layer.bias = self.g._tensor(s * (b - mean) + bias, f"{where} (folded bias)")
        self.g.notes.append(f"BatchNormalization {node.name!r} folded into {src} in float64 (the analysed network "
                            "differs from the framework's by that rounding)")
        return src


def _layer_names(node: Any) -> set[str]:
    """The names :meth:`_Walk.step` may give the layer of ``node``."""
    names = {node.name or node.output[0]}
    names.update(i[:-7] for i in node.input[1:2] if i.endswith(".weight"))
    return names


def read_onnx_graph(path: str, max_bytes: int, fold_batchnorm: bool = False) -> OnnxLayerGraph:
    """Read an ONNX model's layer graph (see the module docstring).

    Raises
    ------
    CaseFormatError
        One line naming the node and op: refused or unsupported op (and why), a branch the graph
        cannot hold, shapes that do not chain.
    UnsupportedCaseError
        onnx is not installed.
    """
    onnx = onnx_module()
    from onnx import numpy_helper

    model = load_onnx(path, max_bytes)
    gr = model.graph
    consts: dict[str, np.ndarray] = {}
    for t in gr.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            raise CaseFormatError(path, f"initializer {t.name!r}", "tensor stored as external data")
        consts[t.name] = numpy_helper.to_array(t)
    inp, tt, dims = data_input(gr, consts, path)
    if len(dims) < 2 or any(d is None for d in dims[1:]):
        raise CaseFormatError(path, f"input {inp.name!r}", f"expected a shape (n, ...) with known sizes, found "
                                                           f"{dims}")
    g = LayerGraph(path, tuple(int(d) for d in dims[1:]))  # type: ignore[arg-type]
    w = _Walk(path, g, consts, fold_batchnorm, onnx)
    w.in_dtype = np_dtype(onnx, tt.elem_type)
    w.batch = int(dims[0]) if dims[0] else BATCH
    w.val[inp.name] = "input"
    for node in gr.node:
        for i in node.input:
            w.users[i] = w.users.get(i, 0) + 1
    out_name = gr.output[0].name
    for index, node in enumerate(gr.node):
        where = f"node {node.name or f'#{index}'!r} ({node.op_type})"
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "Constant":
            if "value" not in attrs:
                raise CaseFormatError(path, where, "only Constant nodes with a tensor 'value' are supported")
            consts[node.output[0]] = numpy_helper.to_array(attrs["value"])
            continue
        data = [i for i in node.input if i in w.val]
        if node.op_type == "Shape" and data and len(node.output) == 1:
            full = np.array([BATCH, *g.shape(w.val[data[0]])], dtype=np.int64)
            w.sym[node.output[0]] = full[int(attrs.get("start", 0)):attrs.get("end")]
            continue
        if not data:
            value = fold(node.op_type, [None if n == "" else consts.get(n, w.sym.get(n)) for n in node.input],
                         attrs, lambda elem: np_dtype(onnx, elem)) \
                if all(n == "" or n in consts or n in w.sym for n in node.input) else None
            if value is None:
                raise CaseFormatError(path, where, f"unsupported op on constants ({_SUPPORTED})")
            value = np.asarray(value)
            (w.sym if is_symbolic(value) else consts)[node.output[0]] = value
            continue
        final = node.output[0] == out_name
        try:
            out = w.step(node, where, attrs, final)
        except CaseFormatError as exc:  # the layer graph names the layer; name the node and op instead
            if exc.field in w.val.values() or exc.field not in _layer_names(node):
                raise
            raise CaseFormatError(path, where, exc.message) from None
        if out is not None:
            w.val[node.output[0]] = out
    if w.logits is None:
        if out_name not in w.val:
            raise CaseFormatError(path, "graph", f"the output {out_name!r} is not computed from the data")
        w.logits = out_name
    g.output = w.val[w.logits]
    return OnnxLayerGraph(g, model, inp.name, w.in_dtype, [int(d or 0) for d in dims[1:]], w.logits,
                          int(dims[0]) if dims[0] else None)


def onnx_graph_reference(og: OnnxLayerGraph, path: str = "") -> Any:
    """``onnx.reference.ReferenceEvaluator`` on the model, up to the logits, as a forward-check reference.

    Raises
    ------
    CaseFormatError
        When the returned function runs and the reference evaluator fails on the model or the sample
        (one line naming ``path``; e.g. its ``MaxPool`` with ``pads`` indexes past its own output in
        onnx 1.23): the import is not checked, so it is refused rather than trusted.
    """
    from onnx.reference import ReferenceEvaluator

    from exactident.io.importers.common import clean_message

    def run(Xf: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str], str]:
        Xin = Xf.astype(og.input_dtype)
        feed = np.ascontiguousarray(Xin.reshape(len(Xf), *og.input_dims))
        ev = ReferenceEvaluator(og.model)
        step = og.batch or len(Xf)  # an input exported with a fixed batch size: run that many rows at a time
        parts = []
        for start in range(0, len(Xf), step):
            chunk = feed[start:start + step]
            n = len(chunk)
            if n < step:
                chunk = np.concatenate([chunk, np.zeros((step - n, *chunk.shape[1:]), chunk.dtype)])
            try:
                res: Any = ev.run(None, {og.input_name: chunk}, intermediate=True)
            except Exception as exc:  # the reference evaluator's own failure, not the model's
                raise CaseFormatError(path, "", f"onnx.reference cannot run the model on the sample, so the import "
                                                f"cannot be forward-checked ({type(exc).__name__}: "
                                                f"{clean_message(exc)})") from None
            parts.append(np.asarray(res[og.logits], dtype=np.float64).reshape(step, -1)[:n])
        Y = np.concatenate(parts)
        dtypes = [og.graph.weight_dtype(), str(np.dtype(og.input_dtype).name)]
        return Y, Xin.astype(np.float64), [d for t in dtypes for d in t.split("+")], \
            "onnx.reference.ReferenceEvaluator"

    return run
