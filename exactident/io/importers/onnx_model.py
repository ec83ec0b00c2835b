"""ONNX models: a chain of ``Gemm`` / ``MatMul`` + ``Add`` / ``Relu``, read exactly and cross-checked.

Supported graph (one data input of shape ``(n, N_0)`` or ``(N_0, n)``, one output):
``Gemm`` (``alpha``, ``beta``, ``transA``, ``transB``; the data may be ``A`` or
``B``), ``MatMul`` with a constant matrix followed by an optional ``Add`` of a
constant bias, ``Relu`` between affine layers, ``Identity``, ``Flatten``/``Reshape``
that leave a flat ``(n, k)`` tensor unchanged, and an optional final
``Sigmoid``/``Softmax`` over the features, which is dropped (the network
analysed ends at the logits; the provenance says so).  Weights come from
initializers or ``Constant`` nodes in float16, bfloat16, float32, float64 (or
integers) and are read exactly; ``alpha``/``beta`` (float32 attributes) are
multiplied in exactly.  Any other op, a branch, two affine layers without a
``Relu`` between them, or external data is an error naming the node and op.

:func:`crosscheck` then runs ``onnx.reference.ReferenceEvaluator`` on the sample
and compares its output (before the dropped activation) with a float64 forward
pass of the *imported* exact network, within a forward rounding-error bound in
the model's dtype.  Needs the ``onnx`` extra.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import flint
import numpy as np

from exactident.errors import CaseFormatError, InvariantViolation
from exactident.io.importers.arrays import Tensor, dyadic
from exactident.io.importers.common import Imported, activation_inside
from exactident.io.importers.forward_check import forward_bound
from exactident.io.importers.onnx_fold import BATCH, HELPER_OPS, fold, is_symbolic
from exactident.io.importers.onnx_load import data_input, load_onnx, np_dtype, onnx_module
from exactident.model.network import Network

__all__ = ["OnnxGraph", "crosscheck", "read_onnx"]

_ROW, _COL = "nk", "kn"  # data layout: samples as rows (n, k) or as columns (k, n)


@dataclass
class OnnxGraph:
    """What :func:`crosscheck` needs besides the network: the model and the data path's names."""

    model: Any
    input_name: str
    input_dtype: Any
    input_layout: str
    output_layout: str
    logits_name: str
    imported: Imported
    notes: list[str] = field(default_factory=list)


def _node_where(node: Any, index: int) -> str:
    return f"node {node.name or f'#{index}'!r} ({node.op_type})"


def _attrs(node: Any, onnx: Any) -> dict[str, Any]:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


class _Walker:
    """Walks the nodes in order, following the single data path."""

    def __init__(self, path: str, consts: dict[str, np.ndarray], dtypes: dict[str, str]) -> None:
        self.path, self.consts, self.dtypes = path, consts, dtypes
        self.layout: str | None = None  # unknown until the first node that fixes it
        self.input_layout: str | None = None
        self.weights: list[Tensor] = []
        self.biases: list[Tensor | None] = []
        self.pending: tuple[Tensor, list[flint.fmpq] | None, str] | None = None
        self.dropped: str | None = None
        self.dropped_at = ""  # the node of the dropped activation (named when a layer follows it)
        self.logits_name = ""  # the tensor before a dropped output activation
        self.bias_dtypes: list[str] = []
        self.n_inputs: int | None = None
        self.sym: dict[str, np.ndarray] = {}  # folded shapes that hold the number of samples (BATCH)
        self.view: tuple[int, ...] | None = None  # the data reshaped to (n, *view) by a Reshape, until flattened
        self.initializers: set[str] = set()
        self.names: dict[str, str] = {}  # W_l / b_l -> the initializer's name and index order
        self.pending_names: list[str | None] = [None, None]

    def width(self) -> int | None:
        """The number of features of the (flat) data here."""
        return self.pending[0].shape[0] if self.pending else (self.weights[-1].shape[0] if self.weights
                                                              else self.n_inputs)

    def flat(self, where: str) -> None:
        if self.view is not None:
            dims = ", ".join(map(str, self.view))
            raise CaseFormatError(self.path, where, f"computes on the data reshaped to (n, {dims}) (only a flat "
                                                    "(n, k) tensor is supported)")

    def fix_layout(self, layout: str, where: str) -> None:
        if self.layout is None:
            self.layout = self.input_layout = layout
        elif self.layout != layout:
            raise CaseFormatError(self.path, where, "the data would need to be transposed here (unsupported layout)")

    def tensor(self, name: str, where: str, array: np.ndarray | None = None) -> Tensor:
        arr = self.consts[name] if array is None else array
        return Tensor(arr, self.path, f"{where} {name}", dtype=self.dtypes.get(name))

    def affine(self, W: Tensor, where: str, scale: float = 1.0, name: str = "", order: str = "[i,j]") -> None:
        if self.pending is not None:
            raise CaseFormatError(self.path, where, "follows another affine layer with no Relu between them")
        # the model's own name of W_l, when W_l is an initializer as stored (or transposed), unscaled
        self.pending_names = [f"{name}{order}" if name in self.initializers and scale == 1.0 else None, None]
        if scale != 1.0:
            q = dyadic(scale)
            W.values = [v * q for v in W.values]
        self.pending = (W, None, where)

    def add_bias(self, C: np.ndarray, name: str, where: str, scale: float = 1.0) -> None:
        if self.pending is None:
            raise CaseFormatError(self.path, where, "adds a constant that does not follow a MatMul or Gemm")
        W, b, _ = self.pending
        m = W.shape[0]
        ok = C.size == 1 or (C.ndim == 1 and self.layout == _ROW and C.shape[0] == m) or (
            C.ndim == 2 and (C.shape == ((1, m) if self.layout == _ROW else (m, 1))))
        if not ok:
            raise CaseFormatError(self.path, f"{where} {name}", f"bias of shape {C.shape} does not broadcast "
                                  f"over the samples to the {m} outputs")
        t = self.tensor(name, where, np.broadcast_to(C.reshape(-1), (m,)).copy())
        q = dyadic(scale)
        values = [v * q for v in t.values]
        plain = b is None and scale == 1.0 and name in self.initializers and C.size == m
        self.pending_names[1] = f"{name}[i]" if plain else None
        self.pending = (W, values if b is None else [x + y for x, y in zip(b, values)], where)
        self.bias_dtypes.append(t.dtype)

    def close(self) -> None:
        assert self.pending is not None
        W, b, where = self.pending
        bt = None
        if b is not None:
            bt = Tensor(np.zeros(len(b)), self.path, f"{where} bias")
            bt.values, bt.dtype = b, self.bias_dtypes[-1] if self.bias_dtypes else W.dtype
        self.weights.append(W)
        self.biases.append(bt)
        self.pending = None
        l = len(self.weights)
        for key, text in ((f"W_{l}", self.pending_names[0]), (f"b_{l}", self.pending_names[1] if bt else None)):
            if text:
                self.names[key] = text


def read_onnx(path: str, max_bytes: int) -> OnnxGraph:
    """Read the ReLU network of an ONNX file (see the module docstring for what is supported).

    Raises
    ------
    UnsupportedCaseError
        onnx is not installed.
    CaseFormatError
        Over the size limit, corrupted, invalid, external data, more than one input or output,
        an unsupported op or topology (naming the node and op), wrong shapes (naming the node).
    """
    onnx = onnx_module()
    from onnx import numpy_helper

    model = load_onnx(path, max_bytes)
    graph = model.graph
    consts: dict[str, np.ndarray] = {}
    dtypes: dict[str, str] = {}

    def add_const(t: Any, where: str) -> None:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            raise CaseFormatError(path, where, "tensor stored as external data (not supported: embed it)")
        arr = numpy_helper.to_array(t)
        consts[t.name] = arr
        dtypes[t.name] = onnx.helper.tensor_dtype_to_np_dtype(t.data_type).name if t.data_type != \
            onnx.TensorProto.BFLOAT16 else "bfloat16"

    for t in graph.initializer:
        add_const(t, f"initializer {t.name!r}")
    inp, ttype, dims = data_input(graph, consts, path)
    if len(dims) != 2:
        raise CaseFormatError(path, f"input {inp.name!r}", f"expected a flat input (n, N_0), found {len(dims)} "
                                                           "dimensions")
    elem = ttype.elem_type
    in_dtype = np_dtype(onnx, elem)
    w = _Walker(path, consts, dtypes)
    w.initializers = {t.name for t in graph.initializer}
    w.n_inputs = dims[1] if dims[0] is None else None  # (dynamic n, N_0): the usual exported input
    data = inp.name
    for index, node in enumerate(graph.node):
        where = _node_where(node, index)
        if node.op_type == "Constant":
            value = _attrs(node, onnx).get("value")
            if value is None:
                raise CaseFormatError(path, where, "only Constant nodes with a tensor 'value' are supported")
            value.name = node.output[0]
            add_const(value, where)
            continue
        attrs = _attrs(node, onnx)
        if node.op_type == "Shape" and list(node.input) == [data] and len(node.output) == 1:
            width = w.width()
            if width is None and w.view is None:
                raise CaseFormatError(path, where, "Shape of data whose width is unknown")
            full = np.array([BATCH, *(w.view or (width,))], dtype=np.int64)
            w.sym[node.output[0]] = full[int(attrs.get("start", 0)):attrs.get("end")]
            continue
        if _fold_node(w, node, data, attrs, onnx):
            continue
        try:
            _on_data_path(w, node, data, where)
            _step(w, node, data, where, attrs)
        except CaseFormatError:
            if node.op_type in HELPER_OPS:  # name the compute op the helper prepares, not the helper
                _refuse_first_compute(path, graph.node, index)
            raise
        data = node.output[0]
    if data != graph.output[0].name:
        raise CaseFormatError(path, "graph", f"the output {graph.output[0].name!r} is not the end of the data path")
    if w.pending is None:
        raise CaseFormatError(path, "graph", "the output is a Relu (not a ReLU network's affine output)")
    w.logits_name = w.logits_name or data
    w.close()
    layout = w.input_layout or _ROW
    n_inputs = dims[1] if layout == _ROW else dims[0]
    imported = Imported(w.weights, w.biases, "out_in", "onnx", n_inputs, w.dropped, parameter_names=w.names or None)
    return OnnxGraph(model, inp.name, in_dtype, layout, w.layout or _ROW, w.logits_name, imported)


def _fold_node(w: _Walker, node: Any, data: str, attrs: dict[str, Any], onnx: Any) -> bool:
    """Evaluate a helper op whose inputs are all constants (:mod:`~exactident.io.importers.onnx_fold`)."""
    names = list(node.input)
    if not names or data in names or len(node.output) != 1 or not all(
            n == "" or n in w.consts or n in w.sym for n in names):
        return False
    value = fold(node.op_type, [None if n == "" else w.consts.get(n, w.sym.get(n)) for n in names], attrs,
                 lambda elem: np_dtype(onnx, elem))
    if value is None:
        return False
    value = np.asarray(value)
    if is_symbolic(value):
        w.sym[node.output[0]] = value
    else:
        w.consts[node.output[0]] = value
        w.dtypes[node.output[0]] = value.dtype.name
    return True


def _on_data_path(w: _Walker, node: Any, data: str, where: str) -> None:
    path = w.path
    if data not in node.input:
        raise CaseFormatError(path, where, "not on the network's single data path (unsupported topology)")
    if w.dropped is not None:  # the Sigmoid/Softmax was not the last op: it is inside the network
        raise activation_inside(path, w.dropped_at, w.dropped, where)
    others = [i for i in node.input if i != data and i != ""]
    for name in others:
        if name not in w.consts and (name not in w.sym or node.op_type != "Reshape"):
            raise CaseFormatError(path, where, f"input {name!r} is neither the data nor a constant "
                                               "(unsupported topology)")
    if list(node.input).count(data) != 1 or len(node.output) != 1:
        raise CaseFormatError(path, where, "unsupported topology (the data must enter once, one output)")


_COMPUTE_OK = ("Gemm", "MatMul", "Relu", "Sigmoid", "Softmax")


def _refuse_first_compute(path: str, nodes: Any, index: int) -> None:
    """Raise the error of the first unsupported compute op after a refused helper op, if there is one."""
    for k in range(index + 1, len(nodes)):
        later = nodes[k]
        if later.op_type not in HELPER_OPS and later.op_type not in _COMPUTE_OK:
            raise CaseFormatError(path, _node_where(later, k), f"unsupported op ({_SUPPORTED_TEXT})")


_SUPPORTED_TEXT = ("supported: Gemm, MatMul, Add, Relu, Identity, Flatten, Reshape, Constant, helper ops on "
                   "constants, and a final Sigmoid or Softmax")


def _reshape(w: _Walker, node: Any, where: str) -> None:
    """A Reshape of the data: to a flat (n, k), or to (n, d1, d2, ...) in the row layout until flattened."""
    name = node.input[1]
    shape = [int(s) for s in np.asarray(w.consts[name] if name in w.consts else w.sym[name]).ravel()]
    width = w.width() if w.view is None else int(np.prod(w.view))
    batch, feat = (0, 1) if (w.layout or _ROW) == _ROW else (1, 0)
    text = [("n" if s == BATCH else s) for s in shape]
    if len(shape) == 2:
        keep = shape[batch] in (-1, 0, BATCH) and (width is None or shape[feat] in (-1, width))
        if keep and shape.count(-1) <= 1:
            w.view = None
            return
    elif len(shape) > 2 and batch == 0 and shape[0] in (0, BATCH) and width is not None and all(
            s > 0 for s in shape[1:]) and int(np.prod(shape[1:])) == width:
        w.view = tuple(shape[1:])
        return
    raise CaseFormatError(w.path, where, f"Reshape to {text} changes the flat data")


def _step(w: _Walker, node: Any, data: str, where: str, attrs: dict[str, Any]) -> None:
    op = node.op_type
    path = w.path
    if op in ("Gemm", "MatMul", "Add", "Sigmoid", "Softmax"):
        w.flat(where)
    if op == "Gemm":
        A, B = node.input[0], node.input[1]
        C = node.input[2] if len(node.input) > 2 and node.input[2] else None
        ta, tb = int(attrs.get("transA", 0)), int(attrs.get("transB", 0))
        alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
        if data == A:  # Y = X' B' : W_l = B'^T
            w.fix_layout(_COL if ta else _ROW, where)
            M = w.consts[B]
            _matrix(M, path, where, B)
            w.affine(w.tensor(B, where, M if tb else M.T), where, alpha, B, "[i,j]" if tb else "[j,i]")
            w.layout = _ROW
        else:  # Y = A' X' with the data as B: W_l = A'
            w.fix_layout(_ROW if tb else _COL, where)
            M = w.consts[A]
            _matrix(M, path, where, A)
            w.affine(w.tensor(A, where, M.T if ta else M), where, alpha, A, "[j,i]" if ta else "[i,j]")
            w.layout = _COL
        if C is not None:
            w.add_bias(w.consts[C], C, where, beta)
    elif op == "MatMul":
        if node.input[0] == data:
            w.fix_layout(_ROW, where)
            M = w.consts[node.input[1]]
            _matrix(M, path, where, node.input[1])
            w.affine(w.tensor(node.input[1], where, M.T), where, 1.0, node.input[1], "[j,i]")
        else:
            w.fix_layout(_COL, where)
            M = w.consts[node.input[0]]
            _matrix(M, path, where, node.input[0])
            w.affine(w.tensor(node.input[0], where, M), where, 1.0, node.input[0], "[i,j]")
    elif op == "Add":
        other = node.input[1] if node.input[0] == data else node.input[0]
        w.add_bias(w.consts[other], other, where)
    elif op == "Relu":
        if w.pending is None:
            raise CaseFormatError(path, where, "Relu does not follow an affine layer (MatMul/Gemm)")
        w.close()
    elif op == "Identity":
        pass
    elif op == "Flatten":
        if int(attrs.get("axis", 1)) != 1 and not (w.view is None and int(attrs.get("axis", 1)) == -1):
            raise CaseFormatError(path, where, f"Flatten with axis={attrs.get('axis')} changes the flat data")
        w.view = None
    elif op == "Reshape":
        _reshape(w, node, where)
    elif op in ("Sigmoid", "Softmax"):
        if op == "Softmax":
            axis = int(attrs.get("axis", -1))
            feature_axis = (1, -1) if (w.layout or _ROW) == _ROW else (0, -2)
            if axis not in feature_axis:
                raise CaseFormatError(path, where, f"Softmax over axis {axis} is not over the outputs")
        if w.pending is None:
            raise CaseFormatError(path, where, f"{op} does not follow the affine output layer")
        w.dropped = op.lower()
        w.dropped_at = where
        w.logits_name = data
    else:
        raise CaseFormatError(path, where, f"unsupported op ({_SUPPORTED_TEXT})")


def _matrix(M: np.ndarray, path: str, where: str, name: str) -> None:
    if M.ndim != 2:
        raise CaseFormatError(path, f"{where} {name}", f"expected a weight matrix, found shape {M.shape}")


def crosscheck(g: OnnxGraph, net: Network, X: np.ndarray, source: str) -> str:
    """Compare ``onnx.reference.ReferenceEvaluator`` with the imported network on ``X``.

    Parameters
    ----------
    g : OnnxGraph
    net : Network
        The imported exact network.
    X : float64 ndarray ``(n, N_0)``
        The sample; it is rounded to the graph input's dtype and both sides see that input.

    Returns
    -------
    str
        A one-line summary for the provenance (rows, largest difference, bound).

    Raises
    ------
    InvariantViolation
        An output differs by more than the forward rounding-error bound (the import would
        not be the network the file computes).
    """
    from onnx.reference import ReferenceEvaluator

    Xin = X.astype(g.input_dtype)
    feed = Xin if g.input_layout == _ROW else Xin.T
    results: Any = ReferenceEvaluator(g.model).run(None, {g.input_name: np.ascontiguousarray(feed)},
                                                   intermediate=True)  # a dict of every tensor
    ref = np.asarray(results[g.logits_name]).astype(np.float64)
    if g.output_layout == _COL:
        ref = ref.T
    names = [t.dtype for t in g.imported.weights] + [str(np.dtype(g.input_dtype).name)]
    h, bound = forward_bound(net, Xin.astype(np.float64), names)
    if ref.shape != h.shape:
        raise InvariantViolation(f"{source}: onnx.reference gives output shape {ref.shape}, the imported "
                                 f"network {h.shape}")
    diff = np.abs(ref - h)
    if not np.all(np.isfinite(ref)) or np.any(diff > bound):
        i, j = np.unravel_index(int(np.nanargmax(np.where(np.isfinite(diff), diff / bound, np.inf))), diff.shape)
        raise InvariantViolation(f"{source}: the imported network does not reproduce onnx.reference: row {i}, "
                                 f"output {j}: {h[i, j]!r} vs {ref[i, j]!r} (bound {bound[i, j]:.3g})")
    return (f"onnx.reference.ReferenceEvaluator on {X.shape[0]} rows ({np.dtype(g.input_dtype).name} input): "
            f"max |difference| {float(diff.max(initial=0.0)):.3g} within the rounding bound "
            f"(max {float(bound.max(initial=0.0)):.3g})")
