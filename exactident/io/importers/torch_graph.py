"""A PyTorch ``nn.Module`` as a layer graph: residual MLPs, leaky ReLU, PReLU, convolutions, average and max pooling.

:func:`read_torch_graph` traces the module with ``torch.fx.symbolic_trace`` (in
eval mode), runs ``torch.fx.passes.shape_prop.ShapeProp`` on the sample to know
every tensor's shape, and walks the graph (a DAG: skip connections are read as
``add`` layers).  Supported (docs/import.md): ``Linear`` (bias or not),
``F.linear``; ``Conv1d``/``Conv2d`` (stride, zero padding, dilation 1, groups 1);
``ReLU``/``F.relu``/``torch.relu``/``x.relu()``; ``LeakyReLU``/``F.leaky_relu`` (the
slope rounded to the module's dtype, as PyTorch computes with it); ``PReLU``;
``AvgPool1d``/``AvgPool2d`` (no ``ceil_mode``; ``count_include_pad=False`` only
without padding); ``AdaptiveAvgPool1d``/``2d`` when every window is the same
(input divisible by the output size); ``MaxPool1d``/``MaxPool2d``/``F.max_pool1d``/``2d``
(stride, padding, dilation, ``ceil_mode``; no ``return_indices``) and ``AdaptiveMaxPool1d``/``2d``
with equal windows; ``Flatten``/``torch.flatten(x, 1)``/a
``view``/``reshape`` to ``(n, -1)``; a ``view`` of the input itself (the sample is
then read in that shape); ``Identity``, ``Dropout`` (inference); ``+``,
``torch.add``, ``x.add(y)`` of two data tensors; a final ``Softmax``/``Sigmoid``
(dropped).  ``BatchNorm1d``/``2d`` after a ``Linear``/convolution only with
``fold_batchnorm=True``.  Everything else is refused in one line naming the
module path or node and why.
"""

from __future__ import annotations

import contextlib
import io
import operator
from typing import Any

import numpy as np

from exactident.errors import CaseFormatError
from exactident.io.importers.common import clean_message
from exactident.io.importers.graph import GLayer, LayerGraph, exact_slope
from exactident.io.importers.torch_trace import trace_in_eval

__all__ = ["REFUSED", "read_torch_graph"]

#: Layers refused by name, and why (one line each).
REFUSED = {
    "GELU": "not piecewise linear (exactident decides piecewise-linear networks only)",
    "Tanh": "not piecewise linear (exactident decides piecewise-linear networks only)",
    "Sigmoid": "not piecewise linear inside the network (only a final sigmoid over the outputs is dropped)",
    "Softmax": "not piecewise linear inside the network (only a final softmax over the outputs is dropped)",
    "SiLU": "not piecewise linear (exactident decides piecewise-linear networks only)",
    "ELU": "not piecewise linear (exactident decides piecewise-linear networks only)",
    "Softplus": "not piecewise linear (exactident decides piecewise-linear networks only)",
    "MultiheadAttention": "attention is not piecewise linear (softmax of products of the data)",
    "RNN": "recurrent layers are not supported", "LSTM": "recurrent layers are not supported",
    "GRU": "recurrent layers are not supported",
    "BatchNorm1d": "exact folding is impossible (sqrt(var + eps) is irrational); fold it in float64 with "
                   "--fold-batchnorm (fold_batchnorm=True)",
    "BatchNorm2d": "exact folding is impossible (sqrt(var + eps) is irrational); fold it in float64 with "
                   "--fold-batchnorm (fold_batchnorm=True)",
}
_IDENTITY = ("Identity", "Dropout", "Dropout1d", "Dropout2d", "AlphaDropout", "FeatureAlphaDropout")
_SUPPORTED = ("Linear, Conv1d, Conv2d, ReLU, LeakyReLU, PReLU, AvgPool1d/2d, F.avg_pool1d/2d, AdaptiveAvgPool1d/2d, "
              "MaxPool1d/2d, F.max_pool1d/2d, AdaptiveMaxPool1d/2d, "
              "Flatten, Unflatten/view of the input, Identity, Dropout, +/torch.add, and a final Softmax or Sigmoid")


def _dtype_name(module: Any) -> str:
    params = list(module.parameters())
    return str(params[0].dtype).removeprefix("torch.") if params else "float32"


class _TorchWalk:
    def __init__(self, module: Any, gm: Any, where: str, graph: LayerGraph, fold_batchnorm: bool) -> None:
        import torch

        self.torch, self.module, self.gm, self.where, self.g = torch, module, gm, where, graph
        self.fold = fold_batchnorm
        self.dtype = _dtype_name(module)
        self.val: dict[Any, str] = {}  # fx node -> graph tensor name
        self.meta: set[Any] = set()  # size/shape helper nodes
        self.logits: Any = None
        self.output_node = next(n for n in gm.graph.nodes if n.op == "output")

    def field(self, node: Any) -> str:
        if node.op == "call_module":
            return f"{node.target} ({type(self.gm.get_submodule(node.target)).__name__})"
        if node.op == "call_method":
            return f"{node.name} (Tensor.{node.target})"
        return f"{node.name} ({getattr(node.target, '__name__', node.target)})"

    def err(self, node: Any, why: str) -> CaseFormatError:
        return CaseFormatError(self.where, self.field(node), why)

    def shape(self, node: Any) -> tuple[int, ...]:
        tm = node.meta.get("tensor_meta")
        if tm is None or not hasattr(tm, "shape"):
            raise self.err(node, "does not give one tensor")
        return tuple(int(s) for s in tm.shape)

    def param(self, node: Any, arg: Any, what: str) -> tuple[Any, str]:
        if arg is None:
            return None, ""
        if getattr(arg, "op", None) != "get_attr":
            raise self.err(node, f"{what} is not a parameter of the module")
        value: Any = self.module
        for part in str(arg.target).split("."):
            value = getattr(value, part)
        return value, str(arg.target)

    def final(self, node: Any, kind: str, dim: Any) -> bool:
        """A softmax/sigmoid over the outputs that the module returns: dropped (logits analysed)."""
        if list(node.users) != [self.output_node] or self.output_node.args[0] is not node:
            return False
        if kind == "softmax" and dim not in (1, -1):
            raise self.err(node, f"softmax over dim {dim} is not over the outputs")
        self.g.dropped, self.logits = kind, node.args[0]
        return True

    def fold_bn(self, node: Any, sub: Any, src: str) -> str:
        if not self.fold:
            raise self.err(node, REFUSED[type(sub).__name__])
        layer = next((x for x in self.g.layers if x.name == src), None)
        users = [n for n in self.gm.graph.nodes if any(self.val.get(i) == src for i in n.all_input_nodes)]
        if layer is None or layer.op not in ("linear", "conv1d", "conv2d") or len(users) != 1:
            raise self.err(node, "BatchNorm is folded only right after a Linear or convolution used nowhere else")
        W, b = _bn_fold(layer, sub)
        layer.weight = self.g._tensor(W, f"{layer.weight.name if layer.weight else src}+{node.target} (folded)")
        layer.bias = self.g._tensor(b, f"{node.target} (folded bias)")
        self.g.notes.append(f"BatchNorm {node.target} folded into {src} in float64 (the analysed network differs "
                            "from the framework's by that rounding)")
        return src

    def module_step(self, node: Any, src: str) -> str | None:
        sub = self.gm.get_submodule(node.target)
        g = self.g
        kind, name = type(sub).__name__, str(node.target)
        if name in g.shapes:  # a module applied twice: its second call by the node's unique name
            name = node.name
        if kind == "Linear":
            return g.linear(name, src, sub.weight, sub.bias, f"{name}.weight",
                            f"{name}.bias")
        if kind in ("Conv1d", "Conv2d"):
            if sub.groups != 1 or any(d != 1 for d in sub.dilation) or sub.padding_mode != "zeros" \
                    or (isinstance(sub.padding, str) and sub.padding != "valid"):
                raise self.err(node, "only groups=1, dilation 1 and numeric zero padding are supported")
            pad = 0 if isinstance(sub.padding, str) else list(sub.padding)
            return g.conv(name, src, sub.weight, sub.bias, list(sub.stride), pad, f"{name}.weight", f"{name}.bias")
        if kind == "ReLU":
            return g.activation(name, src, "relu")
        if kind == "LeakyReLU":
            return g.activation(name, src, "leaky_relu", exact_slope(sub.negative_slope, self.dtype))
        if kind == "PReLU":
            return g.activation(name, src, "prelu", weight=sub.weight, wname=f"{name}.weight")
        if kind in ("AvgPool1d", "AvgPool2d"):
            pad = sub.padding
            if sub.ceil_mode or getattr(sub, "divisor_override", None) is not None or \
                    (not sub.count_include_pad and any(_as_list(pad))):
                raise self.err(node, "only floor windows (no ceil_mode) that count the zero padding are supported")
            return g.avgpool(name, src, _as_list(sub.kernel_size), _as_list(sub.stride), _as_list(pad))
        if kind in ("AdaptiveAvgPool1d", "AdaptiveAvgPool2d"):
            return self.adaptive(node, src, sub.output_size, name)
        if kind in ("MaxPool1d", "MaxPool2d"):
            return self.maxpool(node, src, name, sub.kernel_size, sub.stride, sub.padding, sub.dilation,
                                sub.ceil_mode, sub.return_indices)
        if kind in ("AdaptiveMaxPool1d", "AdaptiveMaxPool2d"):
            if sub.return_indices:
                raise self.err(node, "return_indices=True is not supported (the indices are not piecewise linear)")
            return self.adaptive(node, src, sub.output_size, name, maxpool=True)
        if kind == "Flatten":
            if (sub.start_dim, sub.end_dim) != (1, -1):
                raise self.err(node, "only Flatten(start_dim=1, end_dim=-1) is supported")
            return g.flatten(name, src)
        if kind in _IDENTITY:
            return src
        if kind == "Unflatten":  # of the input itself: the sample read in that shape
            return self.reshape(node, src)
        if kind in ("Softmax", "Sigmoid") and self.final(node, kind.lower(), getattr(sub, "dim", 1)):
            return None
        if kind in ("BatchNorm1d", "BatchNorm2d"):
            return self.fold_bn(node, sub, src)
        if kind in REFUSED:
            raise self.err(node, REFUSED[kind])
        raise self.err(node, f"unsupported layer (supported: {_SUPPORTED})")

    def maxpool(self, node: Any, src: str, name: str, kernel: Any, stride: Any, padding: Any, dilation: Any,
                ceil_mode: Any, indices: Any) -> str:
        """``MaxPool1d/2d``, ``F.max_pool1d/2d``: the padding is ``-inf`` in PyTorch (it never wins)."""
        if indices:
            raise self.err(node, "return_indices=True is not supported (the indices are not piecewise linear)")
        k = _as_list(kernel)
        return self.g.maxpool(name, src, k, _as_list(stride) if stride else k, _as_list(padding),
                              _as_list(dilation), bool(ceil_mode))

    def adaptive(self, node: Any, src: str, output_size: Any, name: str | None = None, maxpool: bool = False) -> str:
        """Adaptive average (or max) pooling whose windows are all the same: input size divisible by the output
        size."""
        shp = self.g.shape(src)[1:]
        out = [None if o is None else int(o) for o in (output_size if isinstance(output_size, (list, tuple))
                                                       else [output_size])]
        out = out * len(shp) if len(out) == 1 else out
        sizes = [s if o is None else o for s, o in zip(shp, out)]
        if any(s % o for s, o in zip(shp, sizes)):
            raise self.err(node, f"adaptive windows on {list(shp)} to {sizes} are not all the same (the input "
                                 "size must be divisible by the output size)")
        k = [s // o for s, o in zip(shp, sizes)]
        if maxpool:
            return self.g.maxpool(name or node.name, src, k, k, 0)
        return self.g.avgpool(name or node.name, src, k, k, 0)

    def data_args(self, node: Any) -> list[str]:
        return [self.val[a] for a in node.args if getattr(a, "op", None) is not None and a in self.val]

    def function_step(self, node: Any, src: str) -> str | None:
        torch, F, t = self.torch, self.torch.nn.functional, node.target
        g, args, kw = self.g, list(node.args), dict(node.kwargs)
        if t is F.linear:
            w, wn = self.param(node, args[1] if len(args) > 1 else kw.get("weight"), "the weight")
            b, bn = self.param(node, args[2] if len(args) > 2 else kw.get("bias"), "the bias")
            return g.linear(node.name, src, w, b, wn, bn)
        if t in (F.relu, torch.relu, getattr(F, "relu_", None), getattr(torch, "relu_", None)):
            return g.activation(node.name, src, "relu")
        if t in (F.leaky_relu, getattr(F, "leaky_relu_", None)):
            slope = args[1] if len(args) > 1 else kw.get("negative_slope", 0.01)
            return g.activation(node.name, src, "leaky_relu", exact_slope(float(slope), self.dtype))
        if t in (operator.add, operator.iadd, torch.add):
            return self.add(node)
        if t is torch.flatten:
            if (args[1:2] or [kw.get("start_dim", 0)])[0] != 1 or (args[2:3] or [kw.get("end_dim", -1)])[0] != -1:
                raise self.err(node, "only torch.flatten(x, 1) is supported")
            return g.flatten(node.name, src)
        if t is F.dropout:
            return src
        if t in (torch.softmax, F.softmax, torch.sigmoid, F.sigmoid):
            kind = "softmax" if t in (torch.softmax, F.softmax) else "sigmoid"
            if self.final(node, kind, args[1] if len(args) > 1 else kw.get("dim", 1) if kind == "softmax" else 1):
                return None
            raise self.err(node, REFUSED[kind.capitalize()])
        if t in (F.avg_pool1d, F.avg_pool2d):  # avg_pool(x, kernel_size, stride=None, padding=0, ceil_mode, ...)
            names = ("input", "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
                     "divisor_override")
            p = dict(zip(names, args)) | kw
            if p.get("ceil_mode") or p.get("divisor_override") is not None or \
                    (p.get("count_include_pad", True) is False and any(_as_list(p.get("padding", 0)))):
                raise self.err(node, "only floor windows (no ceil_mode) that count the zero padding are supported")
            k = _as_list(p["kernel_size"])
            stride = p.get("stride") or k
            return g.avgpool(node.name, src, k, _as_list(stride), _as_list(p.get("padding", 0)))
        if t in (F.adaptive_avg_pool1d, F.adaptive_avg_pool2d):
            return self.adaptive(node, src, args[1] if len(args) > 1 else kw["output_size"])
        if "max_pool" in str(getattr(t, "__name__", "")) and str(t.__name__).endswith("_with_indices"):
            raise self.err(node, "return_indices=True is not supported (the indices are not piecewise linear)")
        if t in (F.max_pool1d, F.max_pool2d, torch.max_pool1d, torch.max_pool2d):
            # F.max_pool(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False)
            names = ("input", "kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices")
            p = dict(zip(names, args)) | kw
            return self.maxpool(node, src, node.name, p["kernel_size"], p.get("stride"), p.get("padding", 0),
                                p.get("dilation", 1), p.get("ceil_mode", False), p.get("return_indices", False))
        if t in (F.adaptive_max_pool1d, F.adaptive_max_pool2d):
            if (args[2:3] or [kw.get("return_indices", False)])[0]:
                raise self.err(node, "return_indices=True is not supported (the indices are not piecewise linear)")
            return self.adaptive(node, src, args[1] if len(args) > 1 else kw["output_size"], maxpool=True)
        if t in (torch.tanh, F.tanh, F.gelu, F.silu, F.elu, F.softplus):
            raise self.err(node, REFUSED["Tanh"])
        raise self.err(node, f"unsupported op (supported: {_SUPPORTED})")

    def add(self, node: Any) -> str:
        srcs = self.data_args(node)
        others = [a for a in node.args if not (getattr(a, "op", None) is not None and a in self.val)]
        if len(srcs) != 2 or others or node.kwargs.get("alpha", 1) != 1:
            raise self.err(node, "only the sum of two data tensors (a skip connection) is supported, not a "
                                 "constant or a scaled term")
        return self.g.add(node.name, srcs)

    def method_step(self, node: Any, src: str) -> str | None:
        t, args = node.target, list(node.args)
        if t in ("relu", "relu_"):
            return self.g.activation(node.name, src, "relu")
        if t in ("add", "add_", "__add__"):
            return self.add(node)
        if t in ("view", "reshape", "flatten"):
            return self.reshape(node, src)
        if t in ("contiguous", "float", "double", "to"):
            return src
        if t in ("softmax", "sigmoid") and self.final(node, t, args[1] if len(args) > 1 else
                                                      node.kwargs.get("dim", 1) if t == "softmax" else 1):
            return None
        raise self.err(node, f"unsupported op (supported: {_SUPPORTED})")

    def reshape(self, node: Any, src: str) -> str:
        before, after = self.shape(node.args[0]), self.shape(node)
        if before == after:
            return src
        if len(after) == 2 and after[0] == before[0]:
            return self.g.flatten(node.name, src)
        if src == "input" and not self.g.layers and after[0] == before[0] and \
                len([u for u in node.args[0].users]) == 1:
            # a view of the input itself: the sample (C-order) is read in the new shape
            self.g.input_shape = after[1:]
            self.g.shapes["input"] = after[1:]
            return src
        raise self.err(node, f"reshapes the data from {list(before[1:])} to {list(after[1:])} (only a flatten, "
                             "or a view of the input itself, is supported)")

    def walk(self) -> None:
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                if self.val:
                    if node.args or node.kwargs:
                        continue
                    raise CaseFormatError(self.where, f"forward({node.name})", "a second input (exactident reads "
                                                                                "networks with one input x)")
                self.val[node] = "input"
                continue
            if node.op in ("get_attr", "output"):
                continue
            data = [n for n in node.all_input_nodes if n in self.val]
            if not data:
                continue  # a helper on constants or on shapes
            if (node.op == "call_method" and node.target in ("size", "dim")) or \
                    (node.op == "call_function" and node.target is getattr):
                continue  # x.size(0), x.shape: used only by helpers
            src = self.val[data[0]]
            if node.op == "call_module":
                out = self.module_step(node, src)
            elif node.op == "call_function":
                if node.target is operator.getitem:
                    raise self.err(node, "indexes the data (only whole tensors are supported)")
                out = self.function_step(node, src)
            else:
                out = self.method_step(node, src)
            if out is not None:
                self.val[node] = out
        res = self.output_node.args[0]
        if self.logits is not None and res in self.val:
            raise self.err(res, "the output activation is not the last op")
        last = self.logits if self.logits is not None else res
        if last not in self.val:
            raise CaseFormatError(self.where, "forward", "does not return the end of its data path")
        self.g.output = self.val[last]


def _as_list(v: Any) -> list[int]:
    return [int(x) for x in v] if isinstance(v, (list, tuple)) else [int(v)]


def _bn_fold(layer: GLayer, bn: Any) -> tuple[np.ndarray, np.ndarray]:
    """``W' = s W``, ``b' = s (b - mean) + beta``, ``s = gamma / sqrt(var + eps)`` per output channel, float64."""
    assert layer.weight is not None and layer.weight.float64 is not None
    W = layer.weight.float64.reshape(layer.weight.shape)
    b = np.zeros(W.shape[0]) if layer.bias is None or layer.bias.float64 is None else layer.bias.float64
    mean = bn.running_mean.detach().double().cpu().numpy()
    var = bn.running_var.detach().double().cpu().numpy()
    gamma = bn.weight.detach().double().cpu().numpy() if bn.weight is not None else np.ones_like(mean)
    beta = bn.bias.detach().double().cpu().numpy() if bn.bias is not None else np.zeros_like(mean)
    s = gamma / np.sqrt(var + float(bn.eps))
    return W * s.reshape((-1,) + (1,) * (W.ndim - 1)), s * (b - mean) + beta


def read_torch_graph(module: Any, X: Any, fold_batchnorm: bool = False) -> tuple[LayerGraph, Any, str]:
    """Trace ``module`` on the sample ``X`` and read its layer graph.

    Parameters
    ----------
    module : torch.nn.Module
    X : array-like ``(n, *input shape)`` (what ``module`` takes)
    fold_batchnorm : bool
        Fold ``BatchNorm`` into the preceding ``Linear``/convolution in float64 (else refused).

    Returns
    -------
    (LayerGraph, logits, where)
        The graph (output set), a function running the module up to its logits (the module
        itself when no final softmax/sigmoid was dropped), the module's description.

    Raises
    ------
    CaseFormatError
        One line naming the module path or node: untraceable, unsupported or refused layer (and why).
    """
    import torch
    from torch import fx
    from torch.fx.passes.shape_prop import ShapeProp

    cls = type(module)
    where = f"<{cls.__module__}.{cls.__name__}>"

    def shapes(gm: Any) -> Any:  # the sample through the traced graph: every node's shape
        x = torch.as_tensor(np.asarray(X, dtype=np.float64)).to(getattr(torch, _dtype_name(module)))
        with torch.no_grad(), contextlib.redirect_stderr(io.StringIO()):
            ShapeProp(gm).propagate(x)
        return x

    def failure(exc: BaseException) -> str:
        cause = exc.__cause__ or exc  # ShapeProp wraps the failing layer's own error
        return f"cannot be traced by torch.fx on the sample ({type(cause).__name__}: {clean_message(cause)})"

    gm, x = trace_in_eval(module, where, failure, shapes)
    graph = LayerGraph(where, tuple(int(s) for s in x.shape[1:]))
    w = _TorchWalk(module, gm, where, graph, fold_batchnorm)
    w.walk()
    logits_node = w.logits

    def logits(xt: Any) -> Any:
        if logits_node is None:
            return module(xt)
        interp = fx.Interpreter(gm, garbage_collect_values=False)
        interp.run(xt)
        return interp.env[logits_node]

    return graph, logits, where


def torch_reference(module: Any, logits: Any, shape: tuple[int, ...], where: str) -> Any:
    """The module's own forward pass for :func:`~exactident.io.importers.graph_case.finish_document`."""
    import torch

    dtype = getattr(torch, _dtype_name(module))

    def run(Xf: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str], str]:
        was = module.training
        module.eval()
        try:
            with torch.no_grad():
                xt = torch.as_tensor(Xf.reshape(len(Xf), *shape)).to(dtype)
                Y = logits(xt)
        finally:
            module.train(was)
        return (Y.detach().double().cpu().numpy().reshape(len(Xf), -1), xt.double().numpy().reshape(len(Xf), -1),
                [_dtype_name(module)], f"torch forward of {type(module).__name__}")

    return run
