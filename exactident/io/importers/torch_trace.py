"""Any PyTorch ``nn.Module`` that is a ReLU MLP, read by tracing its ``forward`` with ``torch.fx``.

Research code subclasses ``nn.Module`` and writes ``forward`` by hand.
:func:`read_traced_module` traces it with ``torch.fx.symbolic_trace`` (in eval
mode, so ``F.dropout(x, training=self.training)`` is the identity; Python loops
over an ``nn.ModuleList`` are unrolled, ``nn.Sequential`` is inlined) and
walks the graph along its single data path, normalising

- affine: ``nn.Linear``, ``F.linear(x, weight, bias)`` on the module's parameters;
- ReLU: ``nn.ReLU``, ``F.relu``, ``torch.relu``, ``x.relu()`` (and their in-place forms);
- the identity on a flat ``(n, k)`` tensor: ``nn.Flatten``, ``torch.flatten(x, 1)``,
  ``x.flatten(1)``, ``x.view``/``x.reshape`` to ``(x.size(0), -1)`` / ``(-1, k)``,
  ``nn.Identity``, ``nn.Dropout`` and ``F.dropout`` at inference, ``x.contiguous()``;
- a final softmax or sigmoid over the features (``nn.Softmax``, ``torch.softmax``,
  ``F.softmax``, ``x.softmax``, ``nn.Sigmoid``, ``torch.sigmoid``), dropped.

Anything else (``LeakyReLU``, a residual ``+``, ``Conv2d``, ``BatchNorm1d``,
``tanh``, ...) is refused in one line naming the module path (or the graph node)
and the op, e.g. ``<model.Net>: act (LeakyReLU): unsupported op``; when a
helper op (a ``view`` to an image shape, ``getitem``) comes first, the first
unsupported compute op after it is named instead.  The forward check then runs
the module itself (up to its logits) against the imported network.

Shared by every module import (this trace, :mod:`~exactident.io.importers.torch_module`,
:mod:`~exactident.io.importers.torch_graph`, a module given as ``reference=``):
:func:`refuse_hooks_and_ties` (a forward hook changes what ``module(x)`` computes but is invisible to
the trace; a tensor used by two layers is one parameter, not two) and :func:`module_view` (the sample
rounded to the module's dtype, as the module sees it).
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from exactident.errors import CaseFormatError
from exactident.io.importers.arrays import Tensor
from exactident.io.importers.common import Imported, activation_inside, clean_message

__all__ = ["module_view", "read_traced_module", "refuse_hooks_and_ties", "trace_in_eval"]

_SUPPORTED = ("Linear, F.linear, ReLU, F.relu, torch.relu, x.relu(), Flatten, torch.flatten, x.view/x.reshape/"
              "x.flatten to (n, k), Identity, Dropout, and a final Softmax or Sigmoid")
_IDENTITY_MODULES = ("Identity", "Dropout", "AlphaDropout", "FeatureAlphaDropout")
_FINAL_MODULES = ("Softmax", "Sigmoid")
_HELPERS = ("view", "reshape", "flatten", "size", "getitem", "getattr", "contiguous", "unsqueeze", "squeeze",
            "permute", "transpose", "to", "float", "double", "type", "Flatten", "Unflatten")


def _fname(target: Any) -> str:
    mod = getattr(target, "__module__", None) or ""
    mod = {"_operator": "operator", "torch._C._nn": "torch.nn.functional", "torch._C._VariableFunctions":
           "torch"}.get(mod, mod)
    name = getattr(target, "__name__", str(target))
    return f"{mod}.{name}" if mod else name


class _Walk:
    """The single data path of the traced graph, turned into affine + ReLU layers."""

    def __init__(self, module: Any, gm: Any, where: str) -> None:
        import torch
        import torch.nn.functional as F

        self.torch, self.module, self.gm, self.where = torch, module, gm, where
        self.relu_fns = {F.relu, torch.relu, getattr(F, "relu_", None), getattr(torch, "relu_", None)} - {None}
        self.final_fns = {torch.softmax: "softmax", F.softmax: "softmax", torch.sigmoid: "sigmoid",
                          F.sigmoid: "sigmoid"}
        self.weights: list[Tensor] = []
        self.biases: list[Tensor | None] = []
        self.pending = False
        self.dropped: str | None = None
        self.dropped_at = ""  # the field of the dropped activation (named when a layer follows it)
        self.width: int | None = None  # width of the data at the current node, when known
        self.data: Any = None
        self.data_nodes: set[Any] = set()
        self.meta: dict[Any, str] = {}  # shape helpers: node -> "batch" | "shape"
        self.logits: Any = None
        self.nodes = list(gm.graph.nodes)

    # -- refusals -------------------------------------------------------------------------------------
    def field(self, node: Any) -> str:
        if node.op == "call_module":
            return f"{node.target} ({type(self.gm.get_submodule(node.target)).__name__})"
        if node.op == "call_method":
            return f"{node.name} (Tensor.{node.target})"
        return f"{node.name} ({_fname(node.target)})"

    def _is_helper(self, node: Any) -> bool:
        if node.op == "call_module":
            return type(self.gm.get_submodule(node.target)).__name__ in _HELPERS + _IDENTITY_MODULES
        return node.op in ("call_method", "call_function") and getattr(node.target, "__name__", node.target) \
            in _HELPERS

    def refuse(self, node: Any, why: str = "") -> CaseFormatError:
        """The error for ``node``, or for the first unsupported compute op after it when ``node`` is a helper."""
        if self._is_helper(node):
            for later in self.nodes[self.nodes.index(node) + 1:]:
                if later.op in ("call_module", "call_function", "call_method") and not self._is_helper(later) \
                        and not self._supported(later):
                    return CaseFormatError(self.where, self.field(later), f"unsupported op (supported: {_SUPPORTED})")
        return CaseFormatError(self.where, self.field(node), why or f"unsupported op (supported: {_SUPPORTED})")

    def _supported(self, node: Any) -> bool:
        import torch.nn.functional as F

        if node.op == "call_module":
            kind = type(self.gm.get_submodule(node.target)).__name__
            return kind in ("Linear", "ReLU", "Flatten", *_IDENTITY_MODULES, *_FINAL_MODULES)
        if node.op == "call_function":
            return node.target in self.relu_fns or node.target in self.final_fns or node.target in (
                F.linear, self.torch.flatten, F.dropout)
        return node.target in ("relu", "relu_", "softmax", "sigmoid")

    # -- layers ---------------------------------------------------------------------------------------
    def affine(self, node: Any, weight: Any, bias: Any, wname: str, bname: str) -> None:
        if self.dropped is not None:
            raise activation_inside(self.where, self.dropped_at, self.dropped, self.field(node))
        if self.pending:
            raise CaseFormatError(self.where, self.field(node), "follows another affine layer with no ReLU "
                                                                "between them")
        if weight.dim() != 2:
            raise CaseFormatError(self.where, self.field(node), f"weight of shape {tuple(weight.shape)} is not a "
                                                                "matrix")
        self.weights.append(Tensor(weight, self.where, wname))
        self.biases.append(None if bias is None else Tensor(bias, self.where, bname))
        self.width = int(weight.shape[0])
        self.pending = True

    def relu(self, node: Any) -> None:
        if not self.pending and self.weights and self.dropped is None:
            return  # relu(relu(z)) = relu(z): a second ReLU (a block's own, then the caller's) changes nothing
        if not self.pending:
            raise CaseFormatError(self.where, self.field(node), "ReLU does not follow an affine layer")
        self.pending = False

    def final(self, node: Any, kind: str, dim: Any) -> None:
        if not self.pending:
            raise CaseFormatError(self.where, self.field(node), f"{kind} does not follow the affine output layer")
        if kind == "softmax" and dim not in (1, -1):
            raise CaseFormatError(self.where, self.field(node), f"softmax over dim {dim} is not over the outputs")
        self.dropped, self.dropped_at, self.logits = kind, self.field(node), self.data

    def param(self, node: Any, arg: Any, what: str) -> tuple[Any, str]:
        """A parameter given to ``F.linear``: a ``get_attr`` node of the module."""
        if arg is None:
            return None, ""
        if getattr(arg, "op", None) != "get_attr":
            raise CaseFormatError(self.where, self.field(node), f"{what} is not a parameter of the module")
        value: Any = self.module
        for part in str(arg.target).split("."):
            value = getattr(value, part)
        return value, str(arg.target)

    def reshape(self, node: Any, dims: list[Any]) -> None:
        """``view``/``reshape`` that leave a flat ``(n, k)`` tensor as it is."""
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = list(dims[0])
        batch = len(dims) == 2 and (self.meta.get(dims[0]) == "batch" or dims[0] == -1)
        feat = len(dims) == 2 and (dims[1] == -1 or (isinstance(dims[1], int) and dims[1] > 0
                                                     and self.width in (None, dims[1])))
        if not (batch and feat) or dims.count(-1) > 1:
            raise self.refuse(node, "reshapes the data away from a flat (n, k) tensor (only x.view(x.size(0), -1) "
                                    "and x.view(-1, k) of flat data are supported)")
        if isinstance(dims[1], int) and dims[1] > 0 and self.width is None and not self.weights:
            self.width = dims[1]

    def _identity_function(self, target: Any, args: list[Any], kwargs: dict[str, Any]) -> bool:
        """``torch.flatten(x, 1)`` of flat data, ``F.dropout`` at inference."""
        if target is self.torch.flatten:
            return bool((args[1:2] or [kwargs.get("start_dim", 0)])[0] == 1
                        and (args[2:3] or [kwargs.get("end_dim", -1)])[0] == -1)
        if target is self.torch.nn.functional.dropout:
            return not (args[2] if len(args) > 2 else kwargs.get("training", True))
        return False

    def step(self, node: Any) -> None:
        F = self.torch.nn.functional
        args = list(node.args)
        kwargs = dict(node.kwargs)
        op, target = node.op, node.target
        if op == "call_module":
            sub = self.gm.get_submodule(target)
            kind = type(sub).__name__
            if kind == "Linear":
                self.affine(node, sub.weight, sub.bias, f"{target}.weight", f"{target}.bias")
            elif kind == "ReLU":
                self.relu(node)
            elif kind in _IDENTITY_MODULES or (kind == "Flatten" and (sub.start_dim, sub.end_dim) == (1, -1)):
                pass
            elif kind in _FINAL_MODULES:
                self.final(node, kind.lower(), getattr(sub, "dim", 1))
            else:
                raise self.refuse(node)
        elif op == "call_function":
            if target is F.linear:
                w, wname = self.param(node, args[1] if len(args) > 1 else kwargs.get("weight"), "the weight")
                b, bname = self.param(node, args[2] if len(args) > 2 else kwargs.get("bias"), "the bias")
                self.affine(node, w, b, wname, bname)
            elif target in self.relu_fns:
                self.relu(node)
            elif target in self.final_fns:
                dim = args[1] if len(args) > 1 else kwargs.get("dim", 1)
                self.final(node, self.final_fns[target], dim if self.final_fns[target] == "softmax" else 1)
            elif self._identity_function(target, args, kwargs):
                pass
            else:
                raise self.refuse(node)
        elif op == "call_method":
            if target in ("relu", "relu_"):
                self.relu(node)
            elif target in ("softmax", "sigmoid"):
                dim = args[1] if len(args) > 1 else kwargs.get("dim", 1)
                self.final(node, str(target), dim if target == "softmax" else 1)
            elif target in ("view", "reshape"):
                self.reshape(node, args[1:])
            elif target == "contiguous" or (target == "flatten" and (args[1:2] or [kwargs.get("start_dim", 0)])[0]
                                             == 1):
                pass
            else:
                raise self.refuse(node)
        else:
            raise self.refuse(node)

    def walk(self) -> None:
        for node in self.nodes:
            if node.op == "placeholder":
                if self.data is not None:
                    if node.args or node.kwargs:  # an input with a default value
                        continue
                    raise CaseFormatError(self.where, f"forward({node.name})", "a second input (exactident reads "
                                                                                "networks with one input x)")
                self.data = node
                self.data_nodes.add(node)
                continue
            if node.op in ("get_attr", "output"):
                continue
            inputs = node.all_input_nodes
            used = [n for n in inputs if n in self.data_nodes]
            if not used:
                if any(n in self.meta for n in inputs):  # x.size(0), x.shape[0], ...
                    self.meta[node] = "batch" if node.target is operator.getitem and node.args[1] == 0 else "shape"
                continue
            if (node.op == "call_method" and node.target == "size") or \
                    (node.op == "call_function" and node.target is getattr and node.args[1] == "shape"):
                self.meta[node] = "batch" if node.args[1:2] == (0,) else "shape"
                continue
            if used != [self.data] or list(node.args).count(self.data) > 1:
                raise CaseFormatError(self.where, self.field(node), "unsupported op: it combines the data with an "
                                      "earlier value (a skip connection or a branch; only a chain of layers is "
                                      "supported)")
            if self.dropped is not None:
                raise activation_inside(self.where, self.dropped_at, self.dropped, self.field(node))
            self.step(node)
            self.data = node
            self.data_nodes.add(node)
        out = next(n for n in self.nodes if n.op == "output")
        if out.args[0] is not self.data:
            raise CaseFormatError(self.where, "forward", "does not return the end of its data path (a tuple, a dict "
                                                         "or another value)")


def _hook_kind(m: Any) -> str | None:
    if getattr(m, "_forward_pre_hooks", None):
        return "a forward pre-hook"
    if getattr(m, "_forward_hooks", None):
        return "a forward hook"
    return None


def refuse_hooks_and_ties(module: Any, where: str, gm: Any = None) -> None:
    """Refuse a module whose forward pass is not the layers read from it.

    Forward hooks and pre-hooks (on ``module``, on any submodule, or global ones registered with
    ``torch.nn.modules.module.register_module_forward_hook`` / ``register_module_forward_pre_hook``)
    run in ``module(x)`` but not in a ``torch.fx`` trace, so the forward check could pass on the
    sample while the analysed network differs elsewhere.  Tied weights: a parameter tensor used by
    more than one layer (one ``Linear`` applied twice; two layers holding the same tensor) is a
    single free parameter; importing each use as its own ``W_l`` would analyse the untied network,
    which has more parameters than the trained one.

    Parameters
    ----------
    module : torch.nn.Module
    where : str
        The module's description for messages, e.g. ``<model.Net>``.
    gm : torch.fx.GraphModule, optional
        The traced graph: each use of a parameter in it is counted (a module called twice uses its
        weight twice).  Without it, the names under which each tensor is registered are counted.

    Raises
    ------
    CaseFormatError
        One line naming the hooked module (or the global hook), or the parameter used twice.
    """
    import torch.nn.modules.module as torch_module

    if getattr(torch_module, "_global_forward_pre_hooks", None) or getattr(torch_module, "_global_forward_hooks",
                                                                            None):
        raise CaseFormatError(where, "forward", "a global forward hook is registered (torch.nn.modules.module."
                                                "register_module_forward_hook or _pre_hook): it runs inside every "
                                                "module but torch.fx does not trace it; remove it (handle.remove()) "
                                                "before importing")
    for name, m in module.named_modules(remove_duplicate=False):
        kind = _hook_kind(m)
        if kind:
            label = f"{name} ({type(m).__name__})" if name else f"the module ({type(m).__name__})"
            raise CaseFormatError(where, label, f"has {kind}: it changes what the module computes but torch.fx "
                                                "does not trace it; remove it (handle.remove()) before importing")
    uses: dict[int, list[str]] = {}

    def use(tensor: Any, name: str) -> None:
        if tensor is not None and tensor.numel():
            uses.setdefault(tensor.untyped_storage().data_ptr(), []).append(name)

    if gm is None:
        for name, p in module.named_parameters(remove_duplicate=False):
            use(p, name)
    else:
        for node in gm.graph.nodes:
            if node.op == "call_module":
                sub = gm.get_submodule(node.target)
                for pname, p in sub.named_parameters(recurse=False):
                    use(p, f"{node.target}.{pname}")
            elif node.op == "get_attr":
                value: Any = gm
                for part in str(node.target).split("."):
                    value = getattr(value, part, None)
                if hasattr(value, "untyped_storage"):
                    for _ in range(max(1, len(node.users))):
                        use(value, str(node.target))
    for names in uses.values():
        if len(names) > 1:
            what = (f"{names[0]} is used {len(names)} times" if len(set(names)) == 1
                    else f"{' and '.join(dict.fromkeys(names))} are one tensor")
            raise CaseFormatError(where, names[0], f"tied weights: {what} (one parameter feeding several layers); "
                                                   "tied networks are not supported (importing each use as its own "
                                                   "layer would analyse the untied network, which has more "
                                                   "parameters)")


def module_view(module: Any, X: Any) -> tuple[Any, dict[str, str]]:
    """The sample as a PyTorch module sees it: a float sample wider than the module's dtype rounded to it.

    The module computes ``module(x.to(dtype))``: a float64 sample given to a float32 module is
    analysed as the float32 values the module sees (each an exact dyadic rational), not as the
    float64 values it never sees.  The rounding is PyTorch's own conversion.

    Parameters
    ----------
    module : torch.nn.Module
    X : array-like, torch.Tensor or None

    Returns
    -------
    (X, provenance)
        The sample to read exactly (rounded: a float32 or float16 array; bfloat16 values as a float32
        array, exactly), and ``{"sample_rounding": ...}`` saying what was done, or why not (a sample
        of exact numbers is analysed as given).
    """
    import torch

    params = list(module.parameters()) if hasattr(module, "parameters") else []
    if X is None or not params or not params[0].is_floating_point():
        return X, {}
    dtype = params[0].dtype
    name = str(dtype).removeprefix("torch.")
    t = X.detach().cpu() if isinstance(X, torch.Tensor) else None
    arr = None if t is not None else np.asarray(X)
    if t is None and arr is not None and arr.dtype.kind == "f":
        t = torch.as_tensor(arr)
    if t is None or not t.is_floating_point():
        if arr is not None and arr.dtype.kind == "O" and dtype != torch.float64:
            return X, {"sample_rounding": f"not rounded: the sample was given as exact numbers and is analysed as "
                                          f"given (the module computes in {name} and sees them rounded to {name})"}
        return X, {}
    found = str(t.dtype).removeprefix("torch.")
    if t.dtype == dtype or t.element_size() < params[0].element_size():  # widening is exact
        return X, {}
    rounded = t.to(dtype)
    out = (rounded.to(torch.float32) if dtype == torch.bfloat16 else rounded).numpy()
    from exactident.io.importers.sample import rounding_note

    return out, {"sample_rounding": rounding_note(found, name, "module")}


def trace_in_eval(module: Any, where: str, failure: Callable[[BaseException], str],
                  after: Callable[[Any], Any] | None = None) -> tuple[Any, Any]:
    """``torch.fx.symbolic_trace(module)`` in eval mode (the mode is restored), warnings silenced.

    ``after(gm)``, when given, runs in the same conditions (e.g. shape propagation on the sample);
    returns ``(gm, after(gm))``.

    Raises
    ------
    CaseFormatError
        ``where``, field ``forward``, message ``failure(exc)`` for any exception of the tracing or of
        ``after`` (data-dependent control flow, unsupported Python constructs, a sample of the wrong
        shape); a CaseFormatError of ``after`` passes unchanged; a forward hook or tied weights
        (:func:`refuse_hooks_and_ties`).
    """
    from torch import fx

    was = module.training
    module.eval()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gm = fx.symbolic_trace(module)
            refuse_hooks_and_ties(module, where, gm)  # hooks do not appear in gm; tied weights do
            extra = after(gm) if after is not None else None
    except CaseFormatError:
        raise
    except Exception as exc:
        raise CaseFormatError(where, "forward", failure(exc)) from None
    finally:
        module.train(was)
    return gm, extra


def read_traced_module(module: Any) -> tuple[Imported, str, Callable[[Any], Any] | None]:
    """Trace ``module`` and read its layers (see the module docstring).

    Returns
    -------
    (Imported, where, logits)
        The layers (tensor names: the parameters' names, e.g. ``fc1.weight``), the module's
        description for messages, and a function running the module up to its logits when a final
        softmax/sigmoid was dropped (None: the module itself).

    Raises
    ------
    CaseFormatError
        One line: the module cannot be traced, an unsupported op (naming the module path or node and
        the op), two affine layers without a ReLU between them, a ReLU on the output, a branch.
    """
    from torch import fx

    cls = type(module)
    where = f"<{cls.__module__}.{cls.__name__}>"
    gm, _ = trace_in_eval(module, where, lambda exc: f"cannot be traced by torch.fx ({type(exc).__name__}: "
                                                     f"{clean_message(exc)}); export it to ONNX instead")
    w = _Walk(module, gm, where)
    w.walk()
    if not w.weights:
        raise CaseFormatError(where, "forward", "no Linear layer on the data path")
    if not w.pending and w.dropped is None:
        raise CaseFormatError(where, "forward", "the network ends with a ReLU (not a ReLU network's affine output)")
    logits_node = w.logits
    logits = None
    if logits_node is not None:
        def logits(x: Any) -> Any:
            interp = fx.Interpreter(gm, garbage_collect_values=False)
            interp.run(x)
            return interp.env[logits_node]

    return Imported(w.weights, w.biases, "out_in", "torch-module", None, w.dropped), where, logits
