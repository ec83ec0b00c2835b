"""Weights stored as named tensors, with no graph: PyTorch state dicts, safetensors, NumPy ``.npz``.

Such files hold no architecture.  exactident reads them as a plain ReLU MLP
``Linear, ReLU, ..., ReLU, Linear`` (what ``nn.Sequential`` of ``Linear`` and
``ReLU`` saves): ``<prefix>.weight`` of shape ``(N_l, N_{l-1})`` and an optional
``<prefix>.bias`` per layer, layers in the file's order (state dicts keep the
module order) or in natural name order (safetensors, whose header has no
order: ``2.weight`` before ``10.weight``).  ``.npz`` files hold ``W1, b1, W2, b2, ...``
in the paper's orientation.  Shapes must chain; any other tensor is an error
naming it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from exactident.errors import CaseFormatError
from exactident.io.importers.arrays import Tensor
from exactident.io.importers.common import Imported, natural_key

__all__ = ["layers_from_npz", "layers_from_state_dict"]


#: Where networks beyond the plain chain are read (convolutions, pooling, skips, leaky ReLU, PReLU, BatchNorm folded).
_MODEL_PATHS = ("convolutions, average pooling, skip connections, leaky ReLU and PReLU are read from the model "
                "itself: its module (exactident.from_torch(module, X) in Python) or its ONNX export (exactident check "
                "model.onnx --sample DATA)")


def layers_from_state_dict(names: Sequence[str], shapes: Sequence[tuple[int, ...]],
                           get: Callable[[str], Tensor], source: str, fmt: str, sort: bool = False) -> Imported:
    """Group ``<prefix>.weight`` / ``<prefix>.bias`` tensors into Linear layers.

    Parameters
    ----------
    names, shapes : tensor names and shapes, in file order
    get : callable
        Reads (and converts exactly) one tensor by name; called only after all shapes were checked.
    sort : bool
        Order the layers by natural name order instead of file order.

    Raises
    ------
    CaseFormatError
        A tensor that is not a Linear weight or bias, a weight that is not 2-D, a bias without
        its weight.
    """
    prefixes: list[str] = []
    weight: dict[str, str] = {}
    bias: dict[str, str] = {}
    for name, shape in zip(names, shapes):
        prefix, dot, kind = name.rpartition(".")
        if not dot:
            prefix, kind = "", name
        if kind == "weight":
            if len(shape) != 2:
                what = "a convolution kernel" if len(shape) in (3, 4) else "not a Linear weight"
                raise CaseFormatError(source, name, f"shape {tuple(shape)} is {what}: a weights file is read only "
                                                    f"as a plain Linear→ReLU chain; {_MODEL_PATHS}")
            weight[prefix] = name
        elif kind == "bias":
            bias[prefix] = name
        else:
            raise CaseFormatError(source, name, "not a Linear layer's weight or bias: a weights file is read only "
                                                f"as a plain Linear→ReLU chain; {_MODEL_PATHS}")
        if prefix not in prefixes:
            prefixes.append(prefix)
    for prefix, name in bias.items():
        if prefix not in weight:
            raise CaseFormatError(source, name, "bias without a weight")
    if sort:
        prefixes.sort(key=natural_key)
    order = [p for p in prefixes if p in weight]
    return Imported([get(weight[p]) for p in order], [get(bias[p]) if p in bias else None for p in order],
                    "out_in", fmt)


_NPZ_KEY = re.compile(r"([Wb])([1-9][0-9]*)")


def layers_from_npz(names: Sequence[str], get: Callable[[str], Tensor], source: str) -> Imported:
    """``W1, b1, ..., WL, bL`` (``W_l`` of shape ``(N_l, N_{l-1})``; a missing ``b_l`` is zero).

    Raises
    ------
    CaseFormatError
        An array of another name, ``W_l`` missing for some ``l <= L``.
    """
    found: dict[tuple[str, int], str] = {}
    for name in names:
        m = _NPZ_KEY.fullmatch(name)
        if not m:
            raise CaseFormatError(source, name, "unexpected array (expected W1, b1, W2, b2, ...)")
        found[(m.group(1), int(m.group(2)))] = name
    L = max((l for kind, l in found if kind == "W"), default=0)
    if L == 0:
        raise CaseFormatError(source, "W1", "missing (expected W1, b1, W2, b2, ...)")
    for l in range(1, L + 1):
        if ("W", l) not in found:
            raise CaseFormatError(source, f"W{l}", f"missing (W{L} is present)")
    for kind, l in found:
        if kind == "b" and l > L:
            raise CaseFormatError(source, f"b{l}", f"bias without W{l}")
    return Imported([get(f"W{l}") for l in range(1, L + 1)],
                    [get(f"b{l}") if ("b", l) in found else None for l in range(1, L + 1)], "out_in", "npz")
